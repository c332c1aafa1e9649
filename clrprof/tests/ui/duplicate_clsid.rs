use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, Result};

#[profiler(clsid = "{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E63}")]
#[derive(Default)]
struct A;

#[profiler(clsid = "{8c3d4d6a-2e7b-4f0e-9b61-3a1b2c4d5e63}")]
#[derive(Default)]
struct B;

impl Profiler for A {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
}

impl Profiler for B {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
}

fn main() {}
