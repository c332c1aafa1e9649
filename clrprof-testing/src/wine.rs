//! Path and output translation for Windows legs run under Wine.
//!
//! Wine maps the Unix root to drive `Z:` in every prefix, so an absolute Unix
//! path `/a/b` is `Z:\a\b` to the Windows process. Environment variables pass
//! through to the Windows process unchanged, so paths inside them (such as
//! `CORECLR_PROFILER_PATH`) must be written in that form. Console output of a
//! Windows process ends lines with CRLF.

use crate::{Error, Result};
use std::path::Path;

/// Translates an absolute Unix path to the `Z:\...` path Wine's default drive
/// mapping gives it. Relative paths are rejected: the Windows process has its
/// own idea of the current directory.
pub fn to_wine_path(path: &Path) -> Result<String> {
    let text = path
        .to_str()
        .ok_or_else(|| Error::new(format!("path {} is not valid UTF-8", path.display())))?;
    if !text.starts_with('/') {
        return Err(Error::new(format!(
            "path {text} is not absolute; Wine needs an absolute path"
        )));
    }
    Ok(format!("Z:{}", text.replace('/', "\\")))
}

/// Removes the carriage returns of CRLF line ends (Windows console output).
pub fn strip_cr(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// Whether a command is run under Wine: a `.exe`, or a Wine loader itself
/// (`wine`, `wine64`, `/usr/lib/wine/wine64`, ...).
pub fn is_wine_command(cmd: &Path) -> bool {
    let name = cmd
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    name.ends_with(".exe") || name == "wine" || name == "wine64" || name == "wine-stable"
}

/// Whether a run under Wine failed for Wine's own reasons rather than the
/// program's: the reason, to print, or `None`.
///
/// Two failures are Wine's: `dotnet.exe` exiting 1 without a byte on stdout
/// or stderr (it failed to start at all; seen once in ~700 Wine runs, with
/// and without a profiler: every test app prints, and a failing profiler
/// shows on stderr or as a crash status), and a Wine process losing its
/// connection to the wineserver (`wine client error:0: recvmsg: Connection
/// reset by peer`, seen once in a CI run: the server of the prefix went away
/// under a running process, which no program inside can cause).
///
/// `status` is the exit status, `None` for a process that did not exit by
/// itself (a signal, a timeout).
pub fn failed_to_run(status: Option<i32>, stdout: &str, stderr: &str) -> Option<&'static str> {
    if status == Some(1) && stdout.is_empty() && stderr.is_empty() {
        return Some("exited 1 without any output");
    }
    if status != Some(0) && stderr.lines().any(|l| l.starts_with("wine client error:")) {
        return Some("lost its connection to the wineserver");
    }
    None
}

/// Starts the prefix's wineserver, once per test process, with a
/// persistence delay of five minutes instead of Wine's three seconds.
///
/// A wineserver exits a few seconds after its last client, and a Wine
/// process that starts while it shuts down can lose its connection (see
/// [`failed_to_run`]); tests start Wine processes one after another, often
/// with such gaps. Kept running, the server also spares every run its start.
/// A server that already runs for the prefix is left as it is.
pub fn keep_server(wine: &crate::manifest::Wine) {
    use std::sync::Mutex;
    static STARTED: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());
    let Ok(mut started) = STARTED.lock() else {
        return;
    };
    if started.contains(&wine.prefix) {
        return;
    }
    started.push(wine.prefix.clone());
    let server = wine.loader.with_file_name("wineserver");
    let server = if server.is_file() {
        server
    } else {
        std::path::PathBuf::from("wineserver")
    };
    // The server daemonizes; the command returns once it is listening.
    let _ = std::process::Command::new(server)
        .arg("-p300")
        .env("WINEPREFIX", &wine.prefix)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// The Wine loader: `$WINE`, else `/usr/lib/wine/wine64`, else `wine64` or `wine` on `PATH`.
pub fn find_wine_loader() -> Option<std::path::PathBuf> {
    if let Some(w) = std::env::var_os("WINE") {
        return Some(w.into());
    }
    let debian = Path::new("/usr/lib/wine/wine64");
    if debian.is_file() {
        return Some(debian.to_path_buf());
    }
    crate::manifest::find_on_path("wine64").or_else(|| crate::manifest::find_on_path("wine"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_map_to_drive_z() {
        assert_eq!(
            to_wine_path(Path::new("/work/main/target/debug/jit_tracer.dll")).unwrap(),
            r"Z:\work\main\target\debug\jit_tracer.dll"
        );
        assert_eq!(to_wine_path(Path::new("/")).unwrap(), r"Z:\");
        assert_eq!(to_wine_path(Path::new("/a b/c")).unwrap(), r"Z:\a b\c");
    }

    #[test]
    fn wines_own_failures_are_told_from_the_programs() {
        assert!(failed_to_run(Some(1), "", "").is_some());
        let lost = "wine client error:0: recvmsg: Connection reset by peer\n";
        assert!(failed_to_run(Some(1), "", lost).is_some());
        assert!(failed_to_run(Some(1), "half\n", lost).is_some());
        assert!(failed_to_run(None, "", lost).is_some());
        // The program's own failures are not Wine's.
        assert!(failed_to_run(Some(1), "", "Unhandled exception.\n").is_none());
        assert!(failed_to_run(Some(1), "printed\n", "").is_none());
        assert!(failed_to_run(Some(3), "", "").is_none());
        assert!(failed_to_run(None, "", "").is_none());
        assert!(failed_to_run(Some(0), "", lost).is_none());
    }

    #[test]
    fn relative_paths_are_rejected() {
        assert!(to_wine_path(Path::new("target/x.dll")).is_err());
    }

    #[test]
    fn crlf_becomes_lf_and_lone_cr_stays() {
        assert_eq!(strip_cr("a\r\nb\r\n"), "a\nb\n");
        assert_eq!(strip_cr("a\rb"), "a\rb");
    }

    #[test]
    fn recognizes_wine_commands() {
        assert!(is_wine_command(Path::new("/x/dotnet.exe")));
        assert!(is_wine_command(Path::new("/usr/lib/wine/wine64")));
        assert!(is_wine_command(Path::new("wine")));
        assert!(is_wine_command(Path::new("APP.EXE")));
        assert!(!is_wine_command(Path::new("/x/dotnet")));
        assert!(!is_wine_command(Path::new("/x/winetricks")));
    }
}
