// "The current thread" and "no GC now" are facts about the thread that got
// the scope: a ProfilerInfo cannot be sent to another thread.
use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, Result};

#[profiler(clsid = "{1B0E6A52-0C4F-4E0B-A3B1-6F1C2D3E4F53}")]
#[derive(Default)]
struct P;

impl Profiler for P {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        std::thread::scope(|s| {
            s.spawn(|| info.current_thread_id().map(|t| t.to_raw()));
        });
        Ok(EventMasks::default())
    }
}

fn main() {}
