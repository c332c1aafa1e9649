// Stack bounds describe the stack of the thread that asked for them: a
// frame-pointer walk with them is sound only on that thread (on another,
// the words below its own frames are not live, or not mapped). They cannot
// be sent or shared with another thread.
use clrprof::stackwalk::StackBounds;

fn main() {
    let bounds = StackBounds::current().unwrap();
    std::thread::spawn(move || {
        let mut out = [0usize; 8];
        let _ = bounds.walk_from_caller(&mut out);
    });
}
