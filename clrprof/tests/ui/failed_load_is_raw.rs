// A failed ModuleLoadFinished hands out no usable ModuleId: the outcome must
// be matched, and its Err side holds only the raw ID.
use clrprof::{profiler, EventMasks, Loaded, ModuleId, Profiler, ProfilerInfo, Result};

#[profiler(clsid = "{1B0E6A52-0C4F-4E0B-A3B1-6F1C2D3E4F51}")]
#[derive(Default)]
struct P;

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
    fn module_load_finished(&self, info: &ProfilerInfo, module: Loaded<ModuleId<'_>>) {
        if let Err(failed) = module {
            let _ = info.module_info(failed.id);
        }
    }
}

fn main() {}
