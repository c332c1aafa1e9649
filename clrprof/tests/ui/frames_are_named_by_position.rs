// A `FrameNamer` names frames of the buffer it resolves, by position: it
// takes only a `FrameRef`, which only the namer makes (`FrameNamer::frames`)
// and which cannot outlive it. So safe code cannot hand the runtime a
// `FunctionID` of its own (a made-up one, or one kept from an earlier tick
// whose method has gone since): the third review's SIGSEGV route.
use clrprof::stackwalk::{FrameNamer, FrameRef};
use clrprof::{NameCache, RawFunctionId};

fn made_up(namer: &FrameNamer<'_>, names: &NameCache) {
    let _ = namer.name(names, RawFunctionId(0x4141_4141_4140));
}

fn forged<'n>() -> FrameRef<'n> {
    FrameRef {
        sample: 0,
        index: 0,
    }
}

fn kept(namer: &FrameNamer<'_>, later: &mut Vec<FrameRef<'static>>) {
    later.extend(namer.frames(0));
}

fn main() {}
