//! The diagnostics endpoint on Windows: the named pipe
//! `\\.\pipe\dotnet-diagnostic-{pid}`, opened like a file. A pipe read has
//! no timeout of its own, so the exchange runs on a helper thread and the
//! caller waits for it with the deadline.

use super::ipc::Reply;
use super::{send_and_receive, AttachError};
use core::ffi::c_void;
use std::time::{Duration, Instant};

const PROCESS_QUERY_LIMITED_INFORMATION: u32 = 0x1000;
const ERROR_ACCESS_DENIED: i32 = 5;
const ERROR_PIPE_BUSY: i32 = 231;

#[link(name = "kernel32")]
extern "system" {
    fn OpenProcess(access: u32, inherit: i32, pid: u32) -> *mut c_void;
    fn CloseHandle(handle: *mut c_void) -> i32;
}

/// Whether process `pid` exists (`OpenProcess` succeeds, or fails only for
/// lack of access).
fn process_exists(pid: u32) -> bool {
    // SAFETY: [os-api] OpenProcess takes plain values and returns an owned handle or null.
    let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        return std::io::Error::last_os_error().raw_os_error() == Some(ERROR_ACCESS_DENIED);
    }
    // SAFETY: [os-api] `h` is a handle we own, closed once.
    unsafe { CloseHandle(h) };
    true
}

/// One command, one reply, on a fresh pipe instance.
pub(super) fn exchange(pid: u32, message: &[u8], wait: Duration) -> Result<Reply, AttachError> {
    let started = Instant::now();
    let name = format!(r"\\.\pipe\dotnet-diagnostic-{pid}");
    let mut pipe = loop {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&name)
        {
            Ok(p) => break p,
            // Every instance is in use: the server creates another shortly.
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY) && started.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(AttachError::PermissionDenied {
                    pid,
                    endpoint: name,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(if process_exists(pid) {
                    AttachError::NotDotNet {
                        pid,
                        detail: format!("no pipe {name}"),
                    }
                } else {
                    AttachError::NoSuchProcess { pid }
                })
            }
            Err(e) => return Err(AttachError::Protocol(format!("opening {name}: {e}"))),
        }
    };
    let message = message.to_vec();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("clrprof-attach-pipe".into())
        .spawn(move || {
            let _ = tx.send(send_and_receive(&mut pipe, &message, started, wait));
        })
        .map_err(|e| AttachError::Protocol(format!("helper thread: {e}")))?;
    match rx.recv_timeout(wait.saturating_sub(started.elapsed())) {
        Ok(result) => result,
        // The helper thread ends when the runtime closes the pipe.
        Err(_) => Err(AttachError::Timeout { waited: wait }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_process_and_a_process_without_a_runtime_are_told_apart() {
        // Windows process ids are multiples of 4; this one is never handed out.
        let e = exchange(0xFFFF_FFF1, b"x", Duration::from_secs(1)).unwrap_err();
        assert_eq!(e, AttachError::NoSuchProcess { pid: 0xFFFF_FFF1 });
        // This test process runs no .NET runtime: it has no diagnostics pipe.
        let me = std::process::id();
        let e = exchange(me, b"x", Duration::from_secs(1)).unwrap_err();
        assert!(
            matches!(e, AttachError::NotDotNet { pid, .. } if pid == me),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .contains(&format!(r"\\.\pipe\dotnet-diagnostic-{me}")),
            "{e}"
        );
    }
}
