// Whether a stack may be named by the runtime rests on marks only the SDK
// sets: a sample's walk mark and range, a buffer's fence stamp, a thread
// list's suspension serial. Safe code can set none of them (review 36).
use clrprof::stackwalk::{FrameBuffer, StackSample, ThreadList};
use clrprof::RawThreadId;

fn stamp(buffer: &mut FrameBuffer) {
    buffer.stamp = Some((1, 0));
}

fn serial(list: &mut ThreadList) {
    list.serial = 7;
}

fn walked() -> StackSample {
    StackSample {
        thread: RawThreadId(1),
        start: 0,
        len: 4,
        truncated: false,
        walked_in: None,
    }
}

fn main() {}
