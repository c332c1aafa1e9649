// The object a GC handle holds is handed out for one scope: its address
// changes at the next GC. What is kept is the handle (owned, Send + Sync),
// never the ObjectId it gives.
use clrprof::handles::GcHandle;
use clrprof::{ObjectId, ProfilerInfo};
use std::sync::Mutex;

static LAST: Mutex<Option<ObjectId<'static>>> = Mutex::new(None);

fn remember(info: &ProfilerInfo, handle: &GcHandle) {
    let object = handle.object(info).unwrap();
    *LAST.lock().unwrap() = object;
}

fn main() {}
