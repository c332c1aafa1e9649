// MovedReferences2 / SurvivingReferences2 report raw ranges: the GC is
// relocating and no ObjectID names a readable object during the callback,
// so none can be handed to an object reader. (A frozen object held there
// is refused at run time with Error::GcMayRun.)
use clrprof::gc::GcRanges;
use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, Result};

#[profiler(clsid = "{0B7E2A95-4C1D-4F63-8E20-7A9C3D5B1E68}")]
#[derive(Default)]
struct P;

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
    fn moved_references(&self, info: &ProfilerInfo, ranges: GcRanges<'_>) {
        for range in ranges.iter() {
            let _ = info.class_from_object(range.new_start);
        }
    }
    fn surviving_references(&self, info: &ProfilerInfo, ranges: GcRanges<'_>) {
        for range in ranges.iter() {
            let _ = info.string_text(range.old_start);
        }
    }
}

fn main() {}
