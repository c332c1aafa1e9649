//! Building a profiler `cdylib` for a leg's target with cargo.

use crate::manifest::{Os, Target};
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cargo executable: `$CARGO` (set by cargo for the processes it runs), else `cargo`.
pub fn cargo() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// Builds package `package` (a `cdylib`) for `target` (a runtime's OS and
/// architecture; an [`Os`] alone means its usual architecture) and returns
/// the path of the library: `lib<name>.so` for Linux (`.dylib` on macOS),
/// `<name>.dll` for Windows (target `x86_64-pc-windows-gnu` under Wine; the
/// host's own target on a Windows host), `aarch64-unknown-linux-gnu` for
/// the emulated arm64 leg. A runtime native to the host gets the host build
/// (no `--target`, so it shares the normal build). `workspace` is the
/// directory cargo runs in.
pub fn build_cdylib(
    package: &str,
    target: impl Into<Target>,
    release: bool,
    workspace: &Path,
) -> Result<PathBuf> {
    let target = target.into();
    let os = target.os;
    let mut cmd = Command::new(cargo());
    cmd.current_dir(workspace).args([
        "build",
        "--quiet",
        "--message-format=json-render-diagnostics",
        "-p",
        package,
    ]);
    if release {
        cmd.arg("--release");
    }
    if !target.is_native() {
        cmd.args(["--target", target.rust_target()]);
    }
    let out = cmd
        .output()
        .map_err(|e| Error::new(format!("cannot run cargo to build {package}: {e}")))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "building {package} for {} failed ({}):\n{}",
            target.rust_target(),
            out.status,
            first_lines(&String::from_utf8_lossy(&out.stderr), 40)
        )));
    }
    let wanted_ext = match os {
        Os::Linux if cfg!(target_os = "macos") => ".dylib",
        Os::Linux => ".so",
        Os::Windows => ".dll",
    };
    let lib_name = package.replace('-', "_");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut found = None;
    for line in stdout.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let target = &msg["target"];
        let is_cdylib = target["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|v| v == "cdylib"));
        let name_matches =
            target["name"].as_str().map(|n| n.replace('-', "_")) == Some(lib_name.clone());
        if !is_cdylib || !name_matches {
            continue;
        }
        if let Some(files) = msg["filenames"].as_array() {
            for f in files.iter().filter_map(|f| f.as_str()) {
                if f.ends_with(wanted_ext) {
                    found = Some(PathBuf::from(f));
                }
            }
        }
    }
    found.ok_or_else(|| {
        Error::new(format!(
            "cargo built {package} for {} but reported no cdylib ending in {wanted_ext} \
             (is `crate-type = [\"cdylib\"]` set?)",
            target.rust_target()
        ))
    })
}

/// The workspace root of the current directory (`cargo locate-project --workspace`).
pub fn workspace_root() -> Result<PathBuf> {
    let out = Command::new(cargo())
        .args(["locate-project", "--workspace", "--message-format", "plain"])
        .output()
        .map_err(|e| Error::new(format!("cannot run cargo locate-project: {e}")))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "cargo locate-project failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let manifest = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    manifest
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| Error::new("cargo locate-project returned no directory"))
}

/// The first `n` lines of `text` (the first compiler errors are the useful ones).
fn first_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= n {
        return text.to_string();
    }
    format!(
        "{}\n... ({} more lines)",
        lines[..n].join("\n"),
        lines.len() - n
    )
}
