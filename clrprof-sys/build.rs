//! Build script of clrprof-sys: says whether this target has ELT
//! trampolines (`cfg(clrprof_elt)`).
//!
//! The trampolines are `global_asm!` in `src/elt/` (one source per calling
//! convention) and the register harness that tests them is `global_asm!` in
//! `tests/harness/`, so nothing here runs an assembler or a C compiler: the
//! crate builds with rustc alone for every target.
//!
//! | target                          | trampolines                   |
//! |---------------------------------|-------------------------------|
//! | x86_64 Linux / Android / macOS  | `src/elt/x86_64_sysv.rs`      |
//! | x86_64 Windows (MSVC and GNU)   | `src/elt/x86_64_win64.rs`     |
//! | aarch64 Linux / Android / macOS | `src/elt/aarch64.rs`          |
//! | anything else                   | none (`cfg(clrprof_elt)` off) |

use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(clrprof_elt)");
    println!("cargo::rerun-if-changed=build.rs");

    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if has_trampolines(&arch, &os) {
        println!("cargo::rustc-cfg=clrprof_elt");
    }
}

/// Whether `src/elt/` has trampolines for a target (the same table as
/// `clrprof::elt::FAST_PATH_AVAILABLE`).
fn has_trampolines(arch: &str, os: &str) -> bool {
    matches!(
        (arch, os),
        ("x86_64", "linux" | "android" | "macos" | "windows")
            | ("aarch64", "linux" | "android" | "macos")
    )
}
