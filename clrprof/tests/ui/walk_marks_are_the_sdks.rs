// Whether a stack may be named by the runtime rests on marks only the SDK
// sets: a buffer's fence stamp, a thread list's suspension serial (and a
// sample's walk mark and range: sample_is_the_sdks.rs). Safe code can set
// none of them (review 36).
use clrprof::stackwalk::{FrameBuffer, ThreadList};

fn stamp(buffer: &mut FrameBuffer) {
    buffer.stamp = Some((1, 0));
}

fn serial(list: &mut ThreadList) {
    list.serial = 7;
}

fn main() {}
