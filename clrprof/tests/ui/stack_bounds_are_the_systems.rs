// Stack bounds come from the system for the calling thread
// (`StackBounds::current`), never from numbers: bounds made up by safe code
// would make the walk read whatever memory they name.
use clrprof::stackwalk::StackBounds;

fn main() {
    let _ = StackBounds { lo: 0x1000, hi: 0x2000 };
}
