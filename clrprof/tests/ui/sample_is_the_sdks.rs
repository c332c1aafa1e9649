// A stack sample's range and walk mark (which lets the namer hand its
// frames to the runtime) are set only by the SDK's own walk: safe code
// cannot forge a walked sample (review 36).
use clrprof::stackwalk::StackSample;
use clrprof::RawThreadId;

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
