//! Wraps the app's `App::Square`: counts its calls and the exceptions that
//! leave it, written to `CLRPROF_OUTPUT` at the end.

use clrprof_instrumentation::{self as instrumentation, Entry, Exit, MethodHandler};
use clrprof::output::JsonLines;
use clrprof::{profiler, EventMask, EventMasks, FunctionId, Profiler, ProfilerInfo, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Default)]
struct Calls {
    entered: AtomicU64,
    threw: AtomicU64,
}

impl MethodHandler for Calls {
    type State = ();
    fn on_entry(&self, _: &Entry<'_>) {
        self.entered.fetch_add(1, Ordering::Relaxed);
    }
    fn on_exit(&self, exit: &mut Exit<'_>, _: ()) {
        if exit.threw() {
            self.threw.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// Keep the CLSID `clrprof new` wrote into your crate: it is the one it printed.
#[profiler(clsid = "{3F0C9A52-7E1D-4B86-9C2A-5D1E0B7F4A63}")]
#[derive(Default)]
pub struct Wrapper {
    out: JsonLines,
    calls: Arc<Calls>,
    /// Set at the method's first compilation: the later ones (tier 1, an
    /// on-stack replacement of a running loop) compile the body installed
    /// then, and the SDK would refuse a second one.
    wrapped: AtomicBool,
}

impl Wrapper {
    /// Wraps `function` before the JIT compiles it.
    fn wrap(&self, info: &ProfilerInfo, function: FunctionId<'_>) -> Result<()> {
        let fi = info.function_info(function)?;
        instrumentation::wrap(info, fi.module, fi.token, self.calls.clone())?
            .install_at_jit(info, function)
    }
}

impl Profiler for Wrapper {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        // Wrapping at JIT time needs the JIT events, nothing else.
        Ok(EventMask::MONITOR_JIT_COMPILATION.into())
    }

    fn jit_compilation_started(&self, info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {
        // A callback returns nothing: handle the error here, `?` is for
        // functions that return a Result, like `wrap` above.
        let Ok(name) = info.function_name(function) else {
            return;
        };
        if name == "App::Square" && !self.wrapped.swap(true, Ordering::Relaxed) {
            if let Err(e) = self.wrap(info, function) {
                self.out.record("error").str("method", &name).str("error", &e.to_string()).write();
            }
        }
    }

    fn finish(&self) {
        self.out
            .record("calls")
            .num("entered", self.calls.entered.load(Ordering::Relaxed))
            .num("threw", self.calls.threw.load(Ordering::Relaxed))
            .write();
    }
}
