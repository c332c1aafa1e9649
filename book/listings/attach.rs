//! A JIT tracer that can also be attached to a running process: its
//! records go to the `output=<path>` that `clrprof attach` adds to the
//! client data, else to `CLRPROF_OUTPUT`.

use clrprof::attach::ClientData;
use clrprof::output::JsonLines;
use clrprof::{
    profiler, AttachEventMask, AttachEventMasks, EventMask, EventMasks, FunctionId, Profiler,
    ProfilerInfo, Result,
};
use std::path::Path;

// Keep the CLSID `clrprof new` wrote into your crate: it is the one it printed.
#[profiler(clsid = "{3F0C9A52-7E1D-4B86-9C2A-5D1E0B7F4A63}")]
#[derive(Default)]
pub struct Tracer {
    out: JsonLines,
}

impl Profiler for Tracer {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        Ok(EventMask::MONITOR_JIT_COMPILATION.into())
    }

    fn initialize_for_attach(&self, info: &ProfilerInfo, client_data: &[u8]) -> Result<AttachEventMasks> {
        let data = ClientData::new(client_data);
        if let Some(path) = data.get("output") {
            // Where `clrprof attach` says, before the first record (if it
            // cannot be opened, the records go where CLRPROF_OUTPUT says).
            let _ = self.out.open(Path::new(path));
        }
        self.out.runtime_record(info)?;
        self.out.record("attached").str("client_data", data.text().unwrap_or("")).write();
        Ok(AttachEventMask::MONITOR_JIT_COMPILATION.into())
    }

    fn jit_compilation_started(&self, info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {
        if let Ok(name) = info.function_name(function) {
            self.out.record("jit").str("method", &name).write();
        }
    }

    fn finish(&self) {
        self.out.flush();
    }
}
