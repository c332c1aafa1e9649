use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, Result};

#[profiler(clsid = "{not-a-guid}")]
#[derive(Default)]
struct P;

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
}

fn main() {}
