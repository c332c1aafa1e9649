use clrprof::{profiler, EventMasks, FunctionId, Profiler, ProfilerInfo, Result};
use std::sync::Mutex;

#[profiler(clsid = "{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E64}")]
#[derive(Default)]
struct P {
    kept: Mutex<Vec<FunctionId<'static>>>,
}

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
    fn jit_compilation_started(&self, _info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {
        self.kept.lock().unwrap().push(function);
    }
}

fn main() {}
