//! Build script of clrprof-sys: says whether this target has ELT
//! trampolines and, for the crate's own tests only, assembles the register
//! harness that checks them.
//!
//! The trampolines themselves are `global_asm!` in `src/elt/` (one source
//! per calling convention), assembled by rustc; no external assembler.
//!
//! | target                          | trampolines                   |
//! |---------------------------------|-------------------------------|
//! | x86_64 Linux / Android / macOS  | `src/elt/x86_64_sysv.rs`      |
//! | x86_64 Windows (MSVC and GNU)   | `src/elt/x86_64_win64.rs`     |
//! | aarch64 Linux / Android / macOS | `src/elt/aarch64.rs`          |
//! | anything else                   | none (`cfg(clrprof_elt)` off) |
//!
//! Where there are trampolines the script sets `cfg(clrprof_elt)`. The
//! harness (`asm/harness/*.S`, GNU syntax, assembled with `cc`) is compiled
//! to object files that are passed to the linker of test targets only
//! (`rustc-link-arg-tests`), so the library never contains it; it sets
//! `cfg(clrprof_elt_harness)`.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(clrprof_elt)");
    println!("cargo::rustc-check-cfg=cfg(clrprof_elt_harness)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=asm");
    println!("cargo::rerun-if-changed=tests/elt_trampolines.rs");

    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();

    if !has_trampolines(&arch, &os) {
        return;
    }
    println!("cargo::rustc-cfg=clrprof_elt");

    // Only a package that still has its test target can take test link args.
    let has_harness_test = env::var_os("CARGO_MANIFEST_DIR")
        .map(|dir| Path::new(&dir).join("tests/elt_trampolines.rs").is_file())
        .unwrap_or(false);
    let harness = harness_source(&arch, &os, &target_env).filter(|_| has_harness_test);
    if let Some(harness) = harness {
        println!("cargo::rerun-if-changed={harness}");
        let objects = cc::Build::new()
            .file(harness)
            .cargo_metadata(false)
            .compile_intermediates();
        for object in objects {
            println!("cargo::rustc-link-arg-tests={}", object.display());
        }
        println!("cargo::rustc-cfg=clrprof_elt_harness");
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

/// The test harness source for a target (GNU assembler syntax, so the
/// GNU toolchains only).
fn harness_source(arch: &str, os: &str, target_env: &str) -> Option<&'static str> {
    match (arch, os) {
        ("x86_64", "linux" | "android" | "macos") => Some("asm/harness/harness_x86_64_sysv.S"),
        ("x86_64", "windows") if target_env == "gnu" => Some("asm/harness/harness_x86_64_win64.S"),
        ("aarch64", "linux" | "android" | "macos") => Some("asm/harness/harness_aarch64.S"),
        _ => None,
    }
}
