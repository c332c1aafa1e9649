//! The diagnostics endpoint on Unix: a domain socket
//! `dotnet-diagnostic-{pid}-{key}-socket` in the runtime's temporary
//! directory, `{key}` being the process start time (jiffies since boot from
//! `/proc/{pid}/stat` on Linux).

use super::ipc::Reply;
use super::{send_and_receive, AttachError};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Whether process `pid` exists (`kill(pid, 0)`: `EPERM` means it exists but
/// belongs to someone else).
pub(super) fn process_exists(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: [os-api] kill(2) with signal 0 only checks for existence and permission;
    // it takes plain integers and touches no memory.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The process's start time as the runtime uses it for the socket name
/// (field 22 of `/proc/{pid}/stat`), when readable.
fn start_key(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// The directories the runtime may have put its socket in: the target's own
/// `$TMPDIR` (from `/proc/{pid}/environ` when readable), ours, and `/tmp`.
fn candidate_dirs(pid: u32) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
        for var in env.split(|&b| b == 0) {
            if let Some(v) = var.strip_prefix(b"TMPDIR=") {
                if !v.is_empty() {
                    use std::os::unix::ffi::OsStrExt;
                    dirs.push(PathBuf::from(std::ffi::OsStr::from_bytes(v)));
                }
            }
        }
    }
    if let Some(t) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
        dirs.push(PathBuf::from(t));
    }
    dirs.push(PathBuf::from("/tmp"));
    let mut unique = Vec::new();
    for d in dirs {
        if !unique.contains(&d) {
            unique.push(d);
        }
    }
    unique
}

/// Finds the diagnostics socket of `pid`.
///
/// Several sockets can carry the same pid (left behind by earlier processes
/// that died without cleaning up); the one whose key is the process's start
/// time wins, else the most recently modified one.
pub fn find_socket(pid: u32) -> Result<PathBuf, AttachError> {
    if pid == 0 {
        return Err(AttachError::InvalidArgument("process id 0".into()));
    }
    let prefix = format!("dotnet-diagnostic-{pid}-");
    let key = start_key(pid);
    let dirs = candidate_dirs(pid);
    let mut found: Vec<(PathBuf, Option<u64>)> = Vec::new();
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            let Some(k) = rest.strip_suffix("-socket") else {
                continue;
            };
            found.push((entry.path(), k.parse().ok()));
        }
    }
    if let Some((p, _)) = found.iter().find(|(_, k)| k.is_some() && *k == key) {
        return Ok(p.clone());
    }
    let newest = found
        .into_iter()
        .max_by_key(|(p, _)| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    match newest {
        Some((p, _)) if process_exists(pid) => Ok(p),
        _ if !process_exists(pid) => Err(AttachError::NoSuchProcess { pid }),
        _ => Err(AttachError::NotDotNet {
            pid,
            detail: format!(
                "no {prefix}*-socket in {}",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// Connects to `socket` of process `pid`, mapping failures to the error kinds.
pub(super) fn connect(pid: u32, socket: &Path) -> Result<UnixStream, AttachError> {
    UnixStream::connect(socket).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => AttachError::PermissionDenied {
            pid,
            endpoint: socket.display().to_string(),
        },
        _ if !process_exists(pid) => AttachError::NoSuchProcess { pid },
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound => {
            AttachError::NotDotNet {
                pid,
                detail: format!("{} refuses connections ({e})", socket.display()),
            }
        }
        _ => AttachError::Protocol(format!("connecting to {}: {e}", socket.display())),
    })
}

/// One command, one reply, on a fresh connection (the server closes it after
/// answering).
pub(super) fn exchange(pid: u32, message: &[u8], wait: Duration) -> Result<Reply, AttachError> {
    let started = Instant::now();
    let socket = find_socket(pid)?;
    let mut stream = connect(pid, &socket)?;
    let timeout = Some(wait.max(Duration::from_millis(1)));
    stream
        .set_read_timeout(timeout)
        .and_then(|_| stream.set_write_timeout(timeout))
        .map_err(|e| AttachError::Protocol(format!("socket timeouts: {e}")))?;
    send_and_receive(&mut stream, message, started, wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_pid_is_no_such_process() {
        // Start and reap a child: its pid is free afterwards (reuse within the
        // test is practically impossible on a pid space of 2^22).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let e = super::super::attach_profiler(
            pid,
            windows_core::GUID::zeroed(),
            "/nonexistent.so",
            b"",
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(e, AttachError::NoSuchProcess { pid });
        assert_eq!(e.to_string(), format!("no process with id {pid}"));
    }

    #[test]
    fn a_process_without_a_runtime_is_not_dotnet() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let e = super::super::attach_profiler(
            pid,
            windows_core::GUID::zeroed(),
            "/nonexistent.so",
            b"",
            Duration::from_secs(1),
        )
        .unwrap_err();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            matches!(e, AttachError::NotDotNet { pid: p, .. } if p == pid),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.contains("no .NET diagnostics endpoint"), "{text}");
        assert!(
            text.contains(&format!("dotnet-diagnostic-{pid}-*-socket")),
            "{text}"
        );
    }

    #[test]
    fn start_key_of_this_process_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(start_key(std::process::id()).is_some());
        }
    }
}
