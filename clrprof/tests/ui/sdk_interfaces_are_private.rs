// The accessors the SDK's own wrappers call through (gated, one call at a
// time) are not part of the safe surface.
use clrprof::RuntimeHandle;
use std::sync::OnceLock;

static KEPT: OnceLock<RuntimeHandle> = OnceLock::new();

fn keep_the_interface() {
    let handle = KEPT.get().unwrap();
    let _kept = handle.raw_info1().map(|i| (*i).clone());
}

fn main() {}
