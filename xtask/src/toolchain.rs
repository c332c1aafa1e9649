//! `cargo xtask toolchain [--strict]`: installs the cross toolchains.
//!
//! Runs `scripts/install-toolchains.sh`, which adds the rustup targets
//! (aarch64-unknown-linux-gnu, x86_64-pc-windows-gnu, x86_64-pc-windows-msvc
//! for the build-only MSVC step) and the Debian
//! packages the cross legs and the test rig need (aarch64 gcc and libc,
//! qemu-user, mingw-w64 gcc, wine64, mono-mcs, python3-pip). The script is
//! idempotent and silent when everything is present.
//!
//! Strict mode (`--strict` or `CI=true`) turns a failed install into an
//! error; otherwise it is a warning and the legs that need the missing
//! tools report themselves as skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn main(args: &[String]) -> crate::Result {
    for arg in args {
        if arg != "--strict" {
            return Err(format!("toolchain: unknown argument `{arg}`").into());
        }
    }
    ensure(crate::workspace::strict_from(args))
}

/// The installer script, `scripts/install-toolchains.sh` in the workspace.
pub fn install_script() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir
        .parent()
        .unwrap_or(xtask_dir)
        .join("scripts")
        .join("install-toolchains.sh")
}

/// Installs whatever the cross legs need and is missing.
///
/// Not strict: a failure is printed as a warning and `Ok` is returned.
/// Strict: a failure is an error.
pub fn ensure(strict: bool) -> crate::Result {
    let outcome = run_installer();
    match outcome {
        Ok(()) => Ok(()),
        Err(reason) if strict => Err(format!("toolchain: {reason}").into()),
        Err(reason) => {
            eprintln!(
                "toolchain: warning: {reason}; legs that need the missing tools will be skipped"
            );
            Ok(())
        }
    }
}

fn run_installer() -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("the cross toolchains install on Linux (Debian) only".into());
    }
    let script = install_script();
    if !script.is_file() {
        return Err(format!("{} is missing", script.display()));
    }
    let status = Command::new("bash")
        .arg(&script)
        .status()
        .map_err(|e| format!("cannot run bash {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", script.display()))
    }
}
