//! Loading a profiler at startup through a suspending diagnostic port (.NET 5+).
//!
//! Facts (dotnet/diagnostics `ipc-protocol.md`, "Diagnostic Ports"): a
//! process started with `DOTNET_DiagnosticPorts=<address>,connect,suspend`
//! connects to that address early in runtime startup, before any managed
//! code runs, sends a 34-byte advertise message, and waits. The address is
//! the full path of a Unix domain socket, or on Windows a named pipe name
//! without `\\.\pipe\`. Each connection carries one command; after
//! answering, the runtime connects again (and advertises again). It stays
//! suspended until `ResumeRuntime` arrives. While suspended it accepts
//! `StartupProfiler` (CLSID + path), which registers a profiler the runtime
//! then loads like one named by `CORECLR_PROFILER`.

use super::ipc::{self, Advertise};
use super::{check_reply, send_and_receive, AttachError};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use windows_core::GUID;

/// The environment variable the runtime reads its diagnostic ports from.
pub const DIAGNOSTIC_PORTS_VAR: &str = "DOTNET_DiagnosticPorts";

/// A listening diagnostic port: the tool's end of the startup protocol.
///
/// ```no_run
/// # use clrprof::attach::trigger::{DiagnosticPort, parse_clsid};
/// # use std::time::Duration;
/// // A socket path on Unix; a pipe name (without \\.\pipe\) on Windows.
/// let port = DiagnosticPort::bind("/tmp/my-port.sock")?;
/// let mut app = std::process::Command::new("dotnet")
///     .arg("app.dll")
///     .env(port.variable(), port.variable_value())
///     .spawn()
///     .expect("start the app");
/// let clsid = parse_clsid("{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E6F}")?;
/// port.load_profiler_at_startup(clsid, "/abs/libprofiler.so", Duration::from_secs(30))?;
/// # Ok::<(), clrprof::attach::trigger::AttachError>(())
/// ```
pub struct DiagnosticPort {
    server: server::Server,
    address: PathBuf,
}

impl DiagnosticPort {
    /// Starts listening at `address`: a socket path that must not exist
    /// (Unix), or a pipe name (Windows).
    pub fn bind(address: impl Into<PathBuf>) -> Result<Self, AttachError> {
        let address = address.into();
        let server = server::Server::bind(&address)?;
        Ok(DiagnosticPort { server, address })
    }

    /// The address given to [`DiagnosticPort::bind`].
    pub fn path(&self) -> &Path {
        &self.address
    }

    /// The name of the variable to set in the app's environment.
    pub fn variable(&self) -> &'static str {
        DIAGNOSTIC_PORTS_VAR
    }

    /// Its value: `<address>,connect,suspend`.
    pub fn variable_value(&self) -> String {
        format!("{},connect,suspend", self.address.display())
    }

    /// Waits for the runtime to connect and advertise itself.
    fn accept(&self, wait: Duration) -> Result<(server::Connection, Advertise), AttachError> {
        let started = Instant::now();
        let mut conn = self.server.accept(wait)?;
        let mut advert = [0u8; ipc::ADVERTISE_LEN];
        read_exact_until(&mut conn, &mut advert, started, wait)?;
        let advertise = ipc::parse_advertise(&advert).ok_or_else(|| {
            AttachError::Protocol(format!("not an advertise message: {advert:02x?}"))
        })?;
        Ok((conn, advertise))
    }

    /// Sends one command on the next connection and checks its reply.
    fn command(
        &self,
        set: u8,
        id: u8,
        payload: &[u8],
        wait: Duration,
    ) -> Result<Advertise, AttachError> {
        let started = Instant::now();
        let message = ipc::message(set, id, payload).ok_or_else(|| {
            AttachError::InvalidArgument("message longer than 65535 bytes".into())
        })?;
        let (conn, advertise) = self.accept(wait)?;
        let reply = server::exchange(conn, message, started, wait)?;
        check_reply(reply)?;
        Ok(advertise)
    }

    /// `StartupProfiler`: registers the profiler `clsid` at `profiler_path`
    /// (absolute, as the target sees it) with the suspended runtime.
    pub fn startup_profiler(
        &self,
        clsid: GUID,
        profiler_path: &str,
        wait: Duration,
    ) -> Result<Advertise, AttachError> {
        let payload = ipc::startup_profiler_payload(&clsid, profiler_path);
        self.command(ipc::PROFILER, ipc::STARTUP_PROFILER, &payload, wait)
    }

    /// Sends the diagnostics command `ResumeRuntime`: lets the suspended
    /// runtime continue its startup.
    pub fn resume_runtime(&self, wait: Duration) -> Result<Advertise, AttachError> {
        self.command(ipc::PROCESS, ipc::RESUME_RUNTIME, &[], wait)
    }

    /// Sends `StartupProfiler`, then `ResumeRuntime`: the app starts with
    /// the profiler loaded (its `Initialize` runs, not `InitializeForAttach`).
    /// Returns the process id the runtime advertised.
    pub fn load_profiler_at_startup(
        &self,
        clsid: GUID,
        profiler_path: &str,
        wait: Duration,
    ) -> Result<u64, AttachError> {
        let first = self.startup_profiler(clsid, profiler_path, wait)?;
        let second = self.resume_runtime(wait)?;
        if first.pid != second.pid {
            return Err(AttachError::Protocol(format!(
                "two processes use this port: {} and {}",
                first.pid, second.pid
            )));
        }
        Ok(first.pid)
    }
}

/// `read_exact` that reports a timeout as [`AttachError::Timeout`].
fn read_exact_until<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    started: Instant,
    wait: Duration,
) -> Result<(), AttachError> {
    let mut filled = 0;
    while filled < buf.len() {
        if started.elapsed() > wait {
            return Err(AttachError::Timeout { waited: wait });
        }
        match r.read(&mut buf[filled..]) {
            Ok(0) => {
                return Err(AttachError::Protocol(format!(
                    "connection closed after {filled} of {} bytes of the advertise message",
                    buf.len()
                )))
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(AttachError::Timeout { waited: wait })
            }
            Err(e) => return Err(AttachError::Protocol(format!("reading: {e}"))),
        }
    }
    Ok(())
}

#[cfg(unix)]
mod server {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// One accepted connection.
    pub type Connection = UnixStream;

    /// A listening Unix socket, removed when dropped.
    pub struct Server {
        listener: UnixListener,
        path: PathBuf,
    }

    impl Server {
        pub fn bind(path: &Path) -> Result<Server, AttachError> {
            let listener = UnixListener::bind(path)
                .map_err(|e| AttachError::Protocol(format!("binding {}: {e}", path.display())))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| AttachError::Protocol(format!("listener: {e}")))?;
            Ok(Server {
                listener,
                path: path.to_path_buf(),
            })
        }

        pub fn accept(&self, wait: Duration) -> Result<Connection, AttachError> {
            let started = Instant::now();
            let stream = loop {
                match self.listener.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if started.elapsed() > wait {
                            return Err(AttachError::Timeout { waited: wait });
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => return Err(AttachError::Protocol(format!("accept: {e}"))),
                }
            };
            let remaining = wait
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1));
            stream
                .set_nonblocking(false)
                .and_then(|_| stream.set_read_timeout(Some(remaining)))
                .and_then(|_| stream.set_write_timeout(Some(remaining)))
                .map_err(|e| AttachError::Protocol(format!("connection setup: {e}")))?;
            Ok(stream)
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Sends the command and reads the reply (the socket has timeouts).
    pub fn exchange(
        mut conn: Connection,
        message: Vec<u8>,
        started: Instant,
        wait: Duration,
    ) -> Result<ipc::Reply, AttachError> {
        send_and_receive(&mut conn, &message, started, wait)
    }
}

#[cfg(windows)]
mod server {
    use super::*;
    use core::ffi::c_void;
    use std::os::windows::io::FromRawHandle;

    const PIPE_ACCESS_DUPLEX: u32 = 0x3;
    const PIPE_TYPE_BYTE_WAIT: u32 = 0x0;
    const PIPE_UNLIMITED_INSTANCES: u32 = 255;
    const ERROR_PIPE_CONNECTED: i32 = 535;
    const INVALID_HANDLE_VALUE: isize = -1;

    #[link(name = "kernel32")]
    extern "system" {
        fn CreateNamedPipeW(
            name: *const u16,
            open_mode: u32,
            pipe_mode: u32,
            max_instances: u32,
            out_buffer: u32,
            in_buffer: u32,
            default_timeout: u32,
            security: *mut c_void,
        ) -> *mut c_void;
        fn ConnectNamedPipe(pipe: *mut c_void, overlapped: *mut c_void) -> i32;
    }

    /// One accepted connection: the server end of a pipe instance.
    pub type Connection = std::fs::File;

    /// A named-pipe server: each accept creates a new pipe instance and
    /// waits for the runtime to open it.
    pub struct Server {
        full_name: String,
    }

    impl Server {
        pub fn bind(name: &Path) -> Result<Server, AttachError> {
            let name = name.to_str().ok_or_else(|| {
                AttachError::InvalidArgument(format!("pipe name {} is not UTF-8", name.display()))
            })?;
            Ok(Server {
                full_name: format!(r"\\.\pipe\{name}"),
            })
        }

        pub fn accept(&self, wait: Duration) -> Result<Connection, AttachError> {
            let wide: Vec<u16> = self.full_name.encode_utf16().chain(Some(0)).collect();
            // SAFETY: [os-api, nul-terminated] NUL-terminated name; null security attributes; the
            // returned handle is owned here (or INVALID_HANDLE_VALUE).
            let h = unsafe {
                CreateNamedPipeW(
                    wide.as_ptr(),
                    PIPE_ACCESS_DUPLEX,
                    PIPE_TYPE_BYTE_WAIT,
                    PIPE_UNLIMITED_INSTANCES,
                    65536,
                    65536,
                    0,
                    core::ptr::null_mut(),
                )
            };
            if h as isize == INVALID_HANDLE_VALUE {
                return Err(AttachError::Protocol(format!(
                    "creating {}: {}",
                    self.full_name,
                    std::io::Error::last_os_error()
                )));
            }
            // SAFETY: [os-api] `h` is a valid pipe handle we own; the File closes it.
            let file = unsafe { std::fs::File::from_raw_handle(h) };
            // ConnectNamedPipe blocks until a client opens the instance; it
            // runs on a helper thread so the deadline holds. On timeout the
            // helper is released by opening the instance ourselves.
            let raw = h as usize;
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("clrprof-port-connect".into())
                .spawn(move || {
                    // SAFETY: [os-api] the handle stays open until this thread reports
                    // back (the File owning it waits for the answer or for
                    // the self-connection below).
                    let ok = unsafe { ConnectNamedPipe(raw as *mut c_void, core::ptr::null_mut()) };
                    let err = std::io::Error::last_os_error();
                    let _ = tx.send(ok != 0 || err.raw_os_error() == Some(ERROR_PIPE_CONNECTED));
                })
                .map_err(|e| AttachError::Protocol(format!("helper thread: {e}")))?;
            match rx.recv_timeout(wait) {
                Ok(true) => Ok(file),
                Ok(false) => Err(AttachError::Protocol(format!(
                    "waiting for a connection on {} failed",
                    self.full_name
                ))),
                Err(_) => {
                    let _wake = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&self.full_name);
                    let _ = rx.recv_timeout(Duration::from_secs(1));
                    Err(AttachError::Timeout { waited: wait })
                }
            }
        }
    }

    /// Sends the command and reads the reply on a helper thread (pipe reads
    /// have no timeout of their own), waiting until the deadline.
    pub fn exchange(
        mut conn: Connection,
        message: Vec<u8>,
        started: Instant,
        wait: Duration,
    ) -> Result<ipc::Reply, AttachError> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("clrprof-port-exchange".into())
            .spawn(move || {
                let _ = tx.send(send_and_receive(&mut conn, &message, started, wait));
            })
            .map_err(|e| AttachError::Protocol(format!("helper thread: {e}")))?;
        rx.recv_timeout(wait.saturating_sub(started.elapsed()))
            .unwrap_or(Err(AttachError::Timeout { waited: wait }))
    }
}

#[cfg(not(any(unix, windows)))]
mod server {
    use super::*;
    pub type Connection = std::fs::File;
    pub struct Server;
    impl Server {
        pub fn bind(_: &Path) -> Result<Server, AttachError> {
            Err(AttachError::Protocol(
                "no diagnostic ports on this platform".into(),
            ))
        }
        pub fn accept(&self, _: Duration) -> Result<Connection, AttachError> {
            Err(AttachError::Protocol(
                "no diagnostic ports on this platform".into(),
            ))
        }
    }
    pub fn exchange(
        _: Connection,
        _: Vec<u8>,
        _: Instant,
        wait: Duration,
    ) -> Result<ipc::Reply, AttachError> {
        Err(AttachError::Timeout { waited: wait })
    }
}

/// Writes all of `bytes` (used by the tests' stand-in runtime).
#[cfg(test)]
fn write_all<W: std::io::Write>(w: &mut W, bytes: &[u8]) {
    w.write_all(bytes).expect("write");
    w.flush().expect("flush");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's side of one connection: advertise, read one command,
    /// answer with `reply`; returns the command's (set, id, payload).
    fn runtime_side<S: Read + std::io::Write>(
        s: &mut S,
        pid: u64,
        reply: &[u8],
    ) -> (u8, u8, Vec<u8>) {
        let mut advert = Vec::from(&ipc::ADVERTISE_MAGIC[..]);
        advert.extend_from_slice(&[7; 16]);
        advert.extend_from_slice(&pid.to_le_bytes());
        advert.extend_from_slice(&[0, 0]);
        write_all(s, &advert);
        let mut header = [0u8; ipc::HEADER_LEN];
        s.read_exact(&mut header).expect("header");
        assert_eq!(&header[..14], ipc::MAGIC);
        let size = u16::from_le_bytes([header[14], header[15]]) as usize;
        let mut payload = vec![0u8; size - ipc::HEADER_LEN];
        s.read_exact(&mut payload).expect("payload");
        write_all(s, reply);
        (header[16], header[17], payload)
    }

    #[cfg(unix)]
    fn connect(port: &Path) -> std::os::unix::net::UnixStream {
        std::os::unix::net::UnixStream::connect(port).expect("connect")
    }

    #[cfg(windows)]
    fn connect(port: &Path) -> std::fs::File {
        let name = format!(r"\\.\pipe\{}", port.display());
        let start = Instant::now();
        loop {
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&name)
            {
                Ok(f) => return f,
                Err(_) if start.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("open {name}: {e}"),
            }
        }
    }

    #[cfg(any(unix, windows))]
    #[test]
    fn startup_profiler_then_resume_runtime_against_a_stand_in_runtime() {
        let address = if cfg!(unix) {
            std::env::temp_dir().join(format!("clrprof-port-test-{}.sock", std::process::id()))
        } else {
            PathBuf::from(format!("clrprof-port-test-{}", std::process::id()))
        };
        let _ = std::fs::remove_file(&address);
        let port = DiagnosticPort::bind(&address).unwrap();
        assert_eq!(
            port.variable_value(),
            format!("{},connect,suspend", address.display())
        );
        let ok_with_hr = ipc::message(ipc::SERVER, ipc::SERVER_OK, &0i32.to_le_bytes()).unwrap();
        let ok_empty = ipc::message(ipc::SERVER, ipc::SERVER_OK, &[]).unwrap();
        let addr = address.clone();
        let runtime = std::thread::spawn(move || {
            let first = runtime_side(&mut connect(&addr), 4242, &ok_with_hr);
            let second = runtime_side(&mut connect(&addr), 4242, &ok_empty);
            (first, second)
        });
        let clsid = GUID::from_u128(0x8C3D4D6A_2E7B_4F0E_9B61_3A1B2C4D5E6F);
        let pid = port
            .load_profiler_at_startup(clsid, "/p.so", Duration::from_secs(20))
            .unwrap();
        assert_eq!(pid, 4242);
        let ((set1, id1, payload1), (set2, id2, payload2)) = runtime.join().unwrap();
        assert_eq!((set1, id1), (ipc::PROFILER, ipc::STARTUP_PROFILER));
        assert_eq!(payload1, ipc::startup_profiler_payload(&clsid, "/p.so"));
        assert_eq!(
            (set2, id2, payload2),
            (ipc::PROCESS, ipc::RESUME_RUNTIME, vec![])
        );
    }

    #[cfg(any(unix, windows))]
    #[test]
    fn a_refusal_and_a_silent_port_are_typed() {
        let address = if cfg!(unix) {
            std::env::temp_dir().join(format!("clrprof-port-test2-{}.sock", std::process::id()))
        } else {
            PathBuf::from(format!("clrprof-port-test2-{}", std::process::id()))
        };
        let _ = std::fs::remove_file(&address);
        let port = DiagnosticPort::bind(&address).unwrap();
        let e = port.resume_runtime(Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, AttachError::Timeout { .. }), "{e:?}");
        let hr = crate::error::KnownHresult::E_INVALIDARG as i32;
        let refusal = ipc::message(ipc::SERVER, ipc::SERVER_ERROR, &hr.to_le_bytes()).unwrap();
        let addr = address.clone();
        let runtime = std::thread::spawn(move || runtime_side(&mut connect(&addr), 1, &refusal));
        let e = port
            .startup_profiler(GUID::zeroed(), "/p.so", Duration::from_secs(20))
            .unwrap_err();
        runtime.join().unwrap();
        assert_eq!(e, AttachError::Runtime { hresult: hr });
    }
}
