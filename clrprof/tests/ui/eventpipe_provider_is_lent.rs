// A provider handed to a callback may be an EventSource's, deleted when it
// is disposed: it is lent for the callback and cannot be kept.
use clrprof::eventpipe::{EventPipeEvent, ProviderRef};
use clrprof::{profiler, EventMasks, Profiler, ProfilerInfo, Result};
use std::sync::Mutex;

#[profiler(clsid = "{0F6E3A1B-8C2D-4E5F-9A7B-1C2D3E4F5A6B}")]
#[derive(Default)]
struct Listener {
    last: Mutex<Option<ProviderRef<'static>>>,
}

impl Profiler for Listener {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
    fn event_pipe_event_delivered(&self, _info: &ProfilerInfo, event: &EventPipeEvent<'_>) {
        *self.last.lock().unwrap() = Some(event.provider);
    }
}

fn main() {}
