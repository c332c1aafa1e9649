// A kept RuntimeHandle reaches the runtime's COM interfaces only for one
// call, and the raw accessors are `unsafe`: a clone of the interface kept
// past a detach would be Released, or called, after the runtime deleted
// the object (it does so whatever references remain). Safe code cannot
// take a copy of the interface out of a handle.
use clrprof::RuntimeHandle;
use std::sync::OnceLock;

static KEPT: OnceLock<RuntimeHandle> = OnceLock::new();

fn keep_the_interface() {
    let handle = KEPT.get().unwrap();
    let _kept = handle.com_info1().map(|i| (*i).clone());
}

fn main() {}
