//! Loading a profiler at startup through a suspending diagnostic port (.NET 5+).
//!
//! Facts (dotnet/diagnostics `ipc-protocol.md`, "Diagnostic Ports"): a
//! process started with `DOTNET_DiagnosticPorts=<socket path>,connect,suspend`
//! connects to that socket early in runtime startup, before any managed code
//! runs, sends a 34-byte advertise message, and waits. Each connection
//! carries one command; after answering, the runtime connects again (and
//! advertises again). It stays suspended until `ResumeRuntime` arrives. While
//! suspended it accepts `StartupProfiler` (CLSID + path), which registers a
//! profiler the runtime then loads like one named by `CORECLR_PROFILER`.

use super::ipc::{self, Advertise};
use super::{check_reply, send_and_receive, AttachError};
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
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
    listener: UnixListener,
    path: PathBuf,
}

impl DiagnosticPort {
    /// Creates the socket at `path` (which must not exist) and listens on it.
    pub fn bind(path: impl Into<PathBuf>) -> Result<Self, AttachError> {
        let path = path.into();
        let listener = UnixListener::bind(&path)
            .map_err(|e| AttachError::Protocol(format!("binding {}: {e}", path.display())))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| AttachError::Protocol(format!("listener: {e}")))?;
        Ok(DiagnosticPort { listener, path })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name of the variable to set in the app's environment.
    pub fn variable(&self) -> &'static str {
        DIAGNOSTIC_PORTS_VAR
    }

    /// Its value: `<path>,connect,suspend`.
    pub fn variable_value(&self) -> String {
        format!("{},connect,suspend", self.path.display())
    }

    /// Waits for the runtime to connect and advertise itself.
    pub fn accept(&self, wait: Duration) -> Result<(UnixStream, Advertise), AttachError> {
        let started = Instant::now();
        let mut stream = loop {
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
        let mut advert = [0u8; ipc::ADVERTISE_LEN];
        stream.read_exact(&mut advert).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                AttachError::Timeout { waited: wait }
            }
            _ => AttachError::Protocol(format!("reading the advertise message: {e}")),
        })?;
        let advertise = ipc::parse_advertise(&advert).ok_or_else(|| {
            AttachError::Protocol(format!("not an advertise message: {advert:02x?}"))
        })?;
        Ok((stream, advertise))
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
        let (mut stream, advertise) = self.accept(wait)?;
        let reply = send_and_receive(&mut stream, &message, started, wait)?;
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

    /// `ResumeRuntime`: lets the suspended runtime continue its startup.
    pub fn resume_runtime(&self, wait: Duration) -> Result<Advertise, AttachError> {
        self.command(ipc::PROCESS, ipc::RESUME_RUNTIME, &[], wait)
    }

    /// `StartupProfiler` then `ResumeRuntime`: the app starts with the
    /// profiler loaded (its `Initialize` runs, not `InitializeForAttach`).
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

impl Drop for DiagnosticPort {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
