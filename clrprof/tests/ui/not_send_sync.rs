use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, Result};
use std::cell::RefCell;

#[profiler(clsid = "{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E61}")]
#[derive(Default)]
struct P {
    seen: RefCell<Vec<u32>>,
}

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
}

fn main() {}
