//! Build script of clrprof-sys: assembles the ELT trampolines for the target
//! (see `src/elt.rs`) and, for the crate's own tests only, the register
//! harness that checks them.
//!
//! | target                          | trampolines                   |
//! |---------------------------------|-------------------------------|
//! | x86_64 Linux / macOS            | `asm/elt_x86_64_sysv.S`       |
//! | x86_64 Windows, GNU toolchain   | `asm/elt_x86_64_win64.S`      |
//! | x86_64 Windows, MSVC toolchain  | `asm/elt_x86_64_win64.asm`    |
//! | aarch64 Linux / macOS           | `asm/elt_aarch64.S`           |
//! | anything else                   | none (`cfg(clrprof_elt)` off) |
//!
//! When trampolines are built the script sets `cfg(clrprof_elt)`. The harness
//! (`asm/harness/*.S`, GNU syntax) is compiled to object files that are passed
//! to the linker of test targets only (`rustc-link-arg-tests`), so the library
//! never contains it; it sets `cfg(clrprof_elt_harness)`.

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

    let Some(trampolines) = trampoline_source(&arch, &os, &target_env) else {
        return;
    };
    println!("cargo::rerun-if-changed={trampolines}");
    cc::Build::new().file(trampolines).compile("clrprof_elt");
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

/// The trampoline source for a target, or `None` where clrprof has none.
fn trampoline_source(arch: &str, os: &str, target_env: &str) -> Option<&'static str> {
    match (arch, os) {
        ("x86_64", "linux" | "android" | "macos") => Some("asm/elt_x86_64_sysv.S"),
        ("x86_64", "windows") if target_env == "msvc" => Some("asm/elt_x86_64_win64.asm"),
        ("x86_64", "windows") => Some("asm/elt_x86_64_win64.S"),
        ("aarch64", "linux" | "android" | "macos") => Some("asm/elt_aarch64.S"),
        _ => None,
    }
}

/// The test harness source for a target (GNU assembler syntax only).
fn harness_source(arch: &str, os: &str, target_env: &str) -> Option<&'static str> {
    match (arch, os) {
        ("x86_64", "linux" | "android" | "macos") => Some("asm/harness/harness_x86_64_sysv.S"),
        ("x86_64", "windows") if target_env == "gnu" => Some("asm/harness/harness_x86_64_win64.S"),
        ("aarch64", "linux" | "android" | "macos") => Some("asm/harness/harness_aarch64.S"),
        _ => None,
    }
}
