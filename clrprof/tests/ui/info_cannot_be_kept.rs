// A ProfilerInfo lends the runtime for one callback: it cannot be cloned
// into the profiler's state or a static to be used later.
use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, Result};
use std::sync::OnceLock;

#[profiler(clsid = "{1B0E6A52-0C4F-4E0B-A3B1-6F1C2D3E4F52}")]
#[derive(Default)]
struct P {
    kept: OnceLock<ProfilerInfo<'static>>,
}

impl Profiler for P {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        let _ = self.kept.set(info.clone());
        Ok(EventMasks::default())
    }
}

fn main() {}
