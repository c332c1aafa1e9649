//! `elt-driver`: calls one ELT hook of a profiler library the way the
//! runtime calls it, outside any runtime, so `valgrind --tool=callgrind`
//! can count the instructions of the hook path (trampoline + handler)
//! exactly. `cargo xtask bench elt` runs it; see `benches/README.md`.
//!
//! ```text
//! elt-driver LIBRARY CLSID HOOK CALLS [INFO_VERSION]
//! ```
//!
//! * `LIBRARY`, `CLSID`: the profiler (`none`: no profiler, the hook is a
//!   bare `ret`, for the loop's own cost).
//! * `HOOK`: `enter` / `leave` (fast path, `SetEnterLeaveFunctionHooks3`)
//!   or `enter-with-info` / `leave-with-info`
//!   (`SetEnterLeaveFunctionHooks3WithInfo`). The profiler is told which
//!   through `CLRPROF_ELT`, and `CLRPROF_ELT_LEAVE=1` makes it register
//!   leave hooks too.
//! * `INFO_VERSION`: the highest `ICorProfilerInfoN` the fake runtime
//!   answers (default 14, like .NET 8; 11 is .NET Core 3.1).
//!
//! The driver loads the library, gets its class factory through
//! `DllGetClassObject`, creates the profiler and calls its `Initialize`
//! with a fake runtime (`clrprof::testing::fake`) that records the
//! function-ID mapper and the hooks the profiler registers; it maps one
//! function through that mapper, like the runtime's JIT does, and then
//! calls the chosen hook `CALLS` times from `elt_drive_*`, small assembly
//! loops that call it as jitted code does (fast path: the ID in `r14` for
//! enter, in `rdi` for leave, 16-byte aligned stack; WithInfo: the C ABI
//! with the ID and a `COR_PRF_ELT_INFO` handle, as the runtime's stub
//! does). Run it under callgrind with `--toggle-collect=elt_drive_*`.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod driver;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn main() -> std::process::ExitCode {
    match driver::run(std::env::args().skip(1).collect()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("elt-driver: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn main() -> std::process::ExitCode {
    eprintln!("elt-driver: only x86_64 Linux has the C baseline's stubs and this driver's loops");
    std::process::ExitCode::FAILURE
}
