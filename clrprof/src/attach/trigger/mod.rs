//! The attach trigger: load a profiler into a running .NET process.
//!
//! [`attach_profiler`] sends the diagnostics IPC command `AttachProfiler`
//! (command set `0x03`, id `0x01`) to the target's diagnostics server, which
//! every .NET Core 3.0+ runtime runs: a Unix domain socket
//! `dotnet-diagnostic-{pid}-{key}-socket` in the target's `$TMPDIR` (`/tmp`
//! when unset) on Linux and macOS, the named pipe
//! `\\.\pipe\dotnet-diagnostic-{pid}` on Windows. The runtime loads the
//! library, creates the CLSID's class, calls `InitializeForAttach` with the
//! client data, and answers with an `HRESULT`.
//!
//! [`DiagnosticPort`] loads a profiler at *startup* of a .NET 5+ process:
//! the process is started with `DOTNET_DiagnosticPorts=<address>` (suspend
//! mode; a socket path, or a pipe name on Windows), connects to it before
//! running any managed code and
//! waits; the tool sends `StartupProfiler` (`0x03`/`0x02`) and then
//! `ResumeRuntime` (`0x04`/`0x01`). The profiler gets a normal `Initialize`,
//! so everything a startup profiler can do (ELT, immutable flags) is allowed.
//!
//! On Windows, `framework` (a Windows-only module) attaches to .NET Framework 4 processes through
//! `ICLRProfiling::AttachProfiler`.
//!
//! Errors are typed ([`AttachError`]): the runtime's `HRESULT`s carry their
//! name and explanation from [`KnownHresult`];
//! a missing process, a process without a diagnostics endpoint, a permission
//! problem and a runtime that does not know the command are told apart.

pub mod ipc;

mod startup;
#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod windows;

#[cfg(windows)]
pub mod framework;

pub use startup::{DiagnosticPort, DIAGNOSTIC_PORTS_VAR};
#[cfg(unix)]
pub use unix::find_socket;

use crate::error::{hresult_explanation, hresult_name, KnownHresult};
use core::fmt;
use ipc::{Parsed, Reply};
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use windows_core::GUID;

/// `COR_E_NOTSUPPORTED`, which a runtime built without attach support answers.
const COR_E_NOTSUPPORTED: i32 = 0x8013_1515_u32 as i32;

/// Extra time the trigger waits for the reply beyond the attach timeout it
/// hands the runtime (which enforces that timeout itself).
pub const REPLY_GRACE: Duration = Duration::from_secs(2);

/// Why an attach (or a startup load) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttachError {
    /// No process has this id.
    NoSuchProcess {
        /// The process id.
        pid: u32,
    },
    /// The process exists but has no diagnostics endpoint: it is not a .NET
    /// Core 3.0+ process, or its diagnostics are disabled
    /// (`DOTNET_EnableDiagnostics=0`), or it runs with another `$TMPDIR`.
    NotDotNet {
        /// The process id.
        pid: u32,
        /// What was looked for.
        detail: String,
    },
    /// The endpoint exists but this user may not connect to it (the
    /// runtime's socket/pipe is private to the process's user).
    PermissionDenied {
        /// The process id.
        pid: u32,
        /// The endpoint.
        endpoint: String,
    },
    /// The runtime does not know the command: it predates it (attach needs
    /// .NET Core 3.0; startup loading needs .NET 5+ diagnostic ports and the
    /// `StartupProfiler` command) or was built without profiler attach.
    RuntimeTooOld {
        /// The `HRESULT` the runtime answered with.
        hresult: i32,
    },
    /// The runtime refused with an `HRESULT`, e.g.
    /// `CORPROF_E_PROFILER_ALREADY_ACTIVE` or the profiler's own failure from
    /// `InitializeForAttach`.
    Runtime {
        /// The `HRESULT`.
        hresult: i32,
    },
    /// No reply arrived in time.
    Timeout {
        /// How long the trigger waited.
        waited: Duration,
    },
    /// The exchange broke: a reply that is not of the protocol, a connection
    /// closed early, an I/O error on the endpoint.
    Protocol(String),
    /// An argument the trigger refused before contacting anyone.
    InvalidArgument(String),
}

impl AttachError {
    /// The runtime's `HRESULT`, for the variants that carry one.
    pub fn hresult(&self) -> Option<i32> {
        match self {
            AttachError::Runtime { hresult } | AttachError::RuntimeTooOld { hresult } => {
                Some(*hresult)
            }
            _ => None,
        }
    }

    /// `true` for `CORPROF_E_PROFILER_ALREADY_ACTIVE`.
    pub fn is_already_active(&self) -> bool {
        self.hresult() == Some(KnownHresult::CORPROF_E_PROFILER_ALREADY_ACTIVE as i32)
    }

    /// Turns a failing `HRESULT` of a reply into the matching variant.
    pub fn from_hresult(hresult: i32) -> Self {
        if hresult == KnownHresult::CORDIAGIPC_E_UNKNOWN_COMMAND as i32
            || hresult == COR_E_NOTSUPPORTED
        {
            AttachError::RuntimeTooOld { hresult }
        } else {
            AttachError::Runtime { hresult }
        }
    }
}

fn describe_hresult(f: &mut fmt::Formatter<'_>, hr: i32) -> fmt::Result {
    let h = windows_core::HRESULT(hr);
    write!(f, "{:#010x}", hr as u32)?;
    if let (Some(n), Some(e)) = (hresult_name(h), hresult_explanation(h)) {
        write!(f, " {n}: {e}")?;
    } else if hr == COR_E_NOTSUPPORTED {
        write!(
            f,
            " COR_E_NOTSUPPORTED: this runtime was built without profiler attach"
        )?;
    }
    Ok(())
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachError::NoSuchProcess { pid } => write!(f, "no process with id {pid}"),
            AttachError::NotDotNet { pid, detail } => write!(
                f,
                "process {pid} has no .NET diagnostics endpoint (not a .NET Core 3.0+ process, or diagnostics disabled): {detail}"
            ),
            AttachError::PermissionDenied { pid, endpoint } => write!(
                f,
                "permission denied connecting to process {pid}'s diagnostics endpoint {endpoint} (run as the process's user or root)"
            ),
            AttachError::RuntimeTooOld { hresult } => {
                f.write_str("the target runtime does not support this command (too old, or built without it): ")?;
                describe_hresult(f, *hresult)
            }
            AttachError::Runtime { hresult } => {
                f.write_str("the target runtime refused: ")?;
                describe_hresult(f, *hresult)
            }
            AttachError::Timeout { waited } => write!(
                f,
                "no answer from the target runtime within {} ms",
                waited.as_millis()
            ),
            AttachError::Protocol(what) => write!(f, "diagnostics IPC failed: {what}"),
            AttachError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
        }
    }
}

impl std::error::Error for AttachError {}

/// Parses a CLSID written as `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX`, with or
/// without braces.
pub fn parse_clsid(text: &str) -> Result<GUID, AttachError> {
    let t = text.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(t);
    GUID::try_from(inner)
        .map_err(|_| AttachError::InvalidArgument(format!("{text:?} is not a CLSID")))
}

/// Loads the profiler `clsid` from `profiler_path` into the running process
/// `pid` over the diagnostics IPC and waits for the runtime's answer.
///
/// `profiler_path` is passed to the target as is: it must be absolute and
/// valid in the target's view of the file system (a `Z:\...` path for a
/// Windows runtime under Wine). `client_data` reaches
/// `InitializeForAttach`. `timeout` is the attach timeout the runtime
/// enforces (it includes the profiler's `InitializeForAttach`); the trigger
/// gives up [`REPLY_GRACE`] later.
///
/// Success means `InitializeForAttach` returned success; the runtime calls
/// `ProfilerAttachComplete` afterwards, on its own thread.
pub fn attach_profiler(
    pid: u32,
    clsid: GUID,
    profiler_path: &str,
    client_data: &[u8],
    timeout: Duration,
) -> Result<(), AttachError> {
    if profiler_path.is_empty() {
        return Err(AttachError::InvalidArgument("empty profiler path".into()));
    }
    let timeout_ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
    let payload = ipc::attach_profiler_payload(timeout_ms, &clsid, profiler_path, client_data);
    let message = ipc::message(ipc::PROFILER, ipc::ATTACH_PROFILER, &payload).ok_or_else(|| {
        AttachError::InvalidArgument(format!(
            "the attach message would take {} bytes; the protocol allows 65535 (shorten the path or the client data)",
            ipc::HEADER_LEN + payload.len()
        ))
    })?;
    let wait = timeout.saturating_add(REPLY_GRACE);
    #[cfg(unix)]
    let reply = unix::exchange(pid, &message, wait)?;
    #[cfg(windows)]
    let reply = windows::exchange(pid, &message, wait)?;
    #[cfg(not(any(unix, windows)))]
    let reply: Reply = {
        let _ = (pid, message, wait);
        return Err(AttachError::Protocol(
            "no diagnostics transport on this platform".into(),
        ));
    };
    check_reply(reply)
}

/// Sends one diagnostics IPC command to process `pid`'s default endpoint and
/// returns the server's reply, for commands this module has no function for
/// (see [`ipc`] for the command numbers). Use [`check_reply`] for commands
/// that answer with an `HRESULT`.
pub fn send_command(
    pid: u32,
    command_set: u8,
    command_id: u8,
    payload: &[u8],
    wait: Duration,
) -> Result<Reply, AttachError> {
    let message = ipc::message(command_set, command_id, payload)
        .ok_or_else(|| AttachError::InvalidArgument("message longer than 65535 bytes".into()))?;
    #[cfg(unix)]
    return unix::exchange(pid, &message, wait);
    #[cfg(windows)]
    return windows::exchange(pid, &message, wait);
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (pid, message, wait);
        Err(AttachError::Protocol(
            "no diagnostics transport on this platform".into(),
        ))
    }
}

/// Success or the typed error of a reply to a command that answers with an
/// `HRESULT`.
pub fn check_reply(reply: Reply) -> Result<(), AttachError> {
    match reply {
        Reply::Ok { hresult: None } => Ok(()),
        Reply::Ok { hresult: Some(hr) } if hr >= 0 => Ok(()),
        Reply::Ok { hresult: Some(hr) } | Reply::Error { hresult: hr } => {
            Err(AttachError::from_hresult(hr))
        }
    }
}

/// Sends `message` on `stream` and reads one reply, within `deadline`.
///
/// The caller has set the stream's own timeouts (where it has any); this
/// checks the deadline between reads and turns `WouldBlock`/`TimedOut`
/// into [`AttachError::Timeout`].
pub fn send_and_receive<S: Read + Write>(
    stream: &mut S,
    message: &[u8],
    started: Instant,
    wait: Duration,
) -> Result<Reply, AttachError> {
    stream
        .write_all(message)
        .and_then(|_| stream.flush())
        .map_err(|e| io_error("sending the command", e, started))?;
    read_reply(stream, started, wait)
}

/// Reads one reply from `stream`, tolerating short reads.
pub fn read_reply<S: Read>(
    stream: &mut S,
    started: Instant,
    wait: Duration,
) -> Result<Reply, AttachError> {
    let mut buf: Vec<u8> = Vec::with_capacity(64);
    let mut chunk = [0u8; 512];
    loop {
        let want = match ipc::parse_reply(&buf) {
            Parsed::Reply { reply, .. } => return Ok(reply),
            Parsed::Invalid(why) => return Err(AttachError::Protocol(why)),
            Parsed::NeedMore(n) => n,
        };
        if started.elapsed() > wait {
            return Err(AttachError::Timeout { waited: wait });
        }
        let room = (want - buf.len()).min(chunk.len());
        match stream.read(&mut chunk[..room]) {
            Ok(0) => {
                return Err(AttachError::Protocol(format!(
                    "the runtime closed the connection after {} of {want} reply bytes",
                    buf.len()
                )))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("reading the reply", e, started)),
        }
    }
}

fn io_error(what: &str, e: std::io::Error, started: Instant) -> AttachError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => AttachError::Timeout {
            waited: started.elapsed(),
        },
        _ => AttachError::Protocol(format!("{what}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that hands out its reply one byte per read.
    struct Trickle {
        reply: Vec<u8>,
        pos: usize,
        written: Vec<u8>,
    }
    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.pos >= self.reply.len() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.reply[self.pos];
            self.pos += 1;
            Ok(1)
        }
    }
    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.written.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn one_byte_reads_and_early_close() {
        let hr = KnownHresult::CORPROF_E_PROFILER_ALREADY_ACTIVE as i32;
        let reply = ipc::message(ipc::SERVER, ipc::SERVER_ERROR, &hr.to_le_bytes()).unwrap();
        let mut s = Trickle {
            reply: reply.clone(),
            pos: 0,
            written: vec![],
        };
        let r = send_and_receive(&mut s, b"hello", Instant::now(), Duration::from_secs(5)).unwrap();
        assert_eq!(s.written, b"hello");
        let e = check_reply(r).unwrap_err();
        assert!(e.is_already_active());
        let text = e.to_string();
        assert!(text.contains("CORPROF_E_PROFILER_ALREADY_ACTIVE"), "{text}");
        assert!(text.contains("already loaded"), "{text}");

        let mut cut = Trickle {
            reply: reply[..21].to_vec(),
            pos: 0,
            written: vec![],
        };
        let e = read_reply(&mut cut, Instant::now(), Duration::from_secs(5)).unwrap_err();
        assert_eq!(
            e,
            AttachError::Protocol(
                "the runtime closed the connection after 21 of 24 reply bytes".into()
            )
        );
    }

    #[test]
    fn unknown_command_means_runtime_too_old() {
        let e = AttachError::from_hresult(KnownHresult::CORDIAGIPC_E_UNKNOWN_COMMAND as i32);
        assert!(matches!(e, AttachError::RuntimeTooOld { .. }));
        assert!(
            e.to_string().contains("CORDIAGIPC_E_UNKNOWN_COMMAND"),
            "{e}"
        );
        assert_eq!(check_reply(Reply::Ok { hresult: Some(0) }), Ok(()));
        assert_eq!(check_reply(Reply::Ok { hresult: None }), Ok(()));
    }

    #[test]
    fn clsids_parse_with_and_without_braces() {
        let want = GUID::from_u128(0x8C3D4D6A_2E7B_4F0E_9B61_3A1B2C4D5E6F);
        assert_eq!(
            parse_clsid("{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E6F}"),
            Ok(want)
        );
        assert_eq!(
            parse_clsid("8c3d4d6a-2e7b-4f0e-9b61-3a1b2c4d5e6f"),
            Ok(want)
        );
        assert!(parse_clsid("{nope}").is_err());
    }
}
