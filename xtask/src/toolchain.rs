//! `cargo xtask toolchain [--strict]`: installs the cross toolchains.
//!
//! Runs `clrprof-testing/scripts/install-toolchains.sh` (through
//! `clrprof_testing::provision::ensure_toolchains`, which `clrprof
//! provision` shares), which adds the rustup targets (aarch64-unknown-linux-gnu,
//! x86_64-pc-windows-gnu, x86_64-pc-windows-msvc for the build-only MSVC
//! step) and the Debian packages the cross legs and the test rig need
//! (aarch64 gcc and libc, qemu-user, mingw-w64 gcc, wine64, mono-mcs,
//! python3-pip, valgrind for the instruction-count gate, protobuf-compiler
//! for the trace-context scenario's independent OTLP decoding). The script is
//! idempotent and silent when everything is present.
//!
//! Strict mode (`--strict` or `CI=true`) turns a failed install into an
//! error; otherwise it is a warning and the legs that need the missing
//! tools report themselves as skipped.

pub fn main(args: &[String]) -> crate::Result {
    for arg in args {
        if arg != "--strict" {
            return Err(format!("toolchain: unknown argument `{arg}`").into());
        }
    }
    ensure(crate::workspace::strict_from(args))
}

/// Installs whatever the cross legs need and is missing.
///
/// Not strict: a failure is printed as a warning and `Ok` is returned.
/// Strict: a failure is an error.
pub fn ensure(strict: bool) -> crate::Result {
    let cache = crate::provision::cache_dir(None);
    Ok(clrprof_testing::provision::ensure_toolchains(
        &cache, strict,
    )?)
}
