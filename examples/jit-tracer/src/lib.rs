// ANCHOR: all
//! jit-tracer: every module load and every JIT compilation, as JSON Lines.
//!
//! Records (to the file named by `CLRPROF_OUTPUT`, or stderr):
//! `{"event":"runtime",...}` first, then `{"event":"module","name":PATH}` per
//! loaded module and `{"event":"jit","method":"Namespace.Type+Nested::Method"}`
//! per JIT compilation. With side-by-side runtimes each runtime writes its own
//! runtime record and tags its other records with `"runtime":"<version>"`.

use clrprof::output::JsonLines;
use clrprof::{
    profiler, EventMask, EventMasks, FunctionId, Loaded, ModuleId, Profiler, ProfilerInfo, Result,
    RuntimePolicy,
};

// ANCHOR: profiler
/// The profiler's state: only its output sink.
#[profiler(clsid = "{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E6F}")]
#[derive(Default)]
pub struct JitTracer {
    out: JsonLines,
}

// ANCHOR_END: profiler
impl Profiler for JitTracer {
    // ANCHOR: policy
    /// `CLRPROF_RUNTIMES` = `first` | `all` (default) | a major version such as `8`.
    fn runtime_policy() -> RuntimePolicy {
        RuntimePolicy::from_env("CLRPROF_RUNTIMES")
    }
    // ANCHOR_END: policy

    // ANCHOR: initialize
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        Ok((EventMask::MONITOR_MODULE_LOADS | EventMask::MONITOR_JIT_COMPILATION).into())
    }
    // ANCHOR_END: initialize

    // ANCHOR: callbacks
    fn module_load_finished(&self, info: &ProfilerInfo, module: Loaded<ModuleId<'_>>) {
        // A failed load hands out no usable ID (`Err` carries the raw one).
        let Ok(module) = module else { return };
        if let Ok(m) = info.module_info(module) {
            self.out.record("module").str("name", &m.name).write();
        }
    }

    fn jit_compilation_started(&self, info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {
        match info.function_name(function) {
            Ok(name) => self.out.record("jit").str("method", &name).write(),
            Err(e) => self.out.record("jit").str("error", &e.to_string()).write(),
        }
    }
    // ANCHOR_END: callbacks

    // No `shutdown` or `finish`: every record is written as it happens, and
    // the SDK flushes `JsonLines` at every finishing point and at process exit.
}
// ANCHOR_END: all
