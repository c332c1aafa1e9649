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
