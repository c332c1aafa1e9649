// ClassUnloadFinished: the ClassID died when ClassUnloadStarted returned,
// so the callback hands out the raw form, which Info methods do not take.
use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, RawClassId, Result, HRESULT};

#[profiler(clsid = "{1B0E6A52-0C4F-4E0B-A3B1-6F1C2D3E4F50}")]
#[derive(Default)]
struct P;

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
    fn class_unload_finished(&self, info: &ProfilerInfo, class: RawClassId, _status: HRESULT) {
        let _ = info.class_info(class);
    }
}

fn main() {}
