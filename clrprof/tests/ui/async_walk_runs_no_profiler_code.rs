// An asynchronous walk runs while the runtime holds the target thread
// OS-suspended (possibly holding the heap lock): no closure of the
// profiler's may run then, so the walk takes a reserved FrameBuffer.
use clrprof::stackwalk::{Frame, Walk, WalkOptions};
use clrprof::{ProfilerInfo, ThreadId};

fn walk(info: &ProfilerInfo, thread: ThreadId<'_>) {
    let mut names = Vec::new();
    let _ = info.walk_other_thread(thread, WalkOptions::default(), |frame: Frame<'_>| {
        names.push(format!("{:?}", frame.function));
        Walk::Continue
    });
}

fn main() {}
