// What a profiler keeps is a RuntimeHandle: it offers nothing that takes or
// yields a typed ID (so a handle of one runtime cannot take IDs of another,
// and a kept handle cannot mint IDs that outlive their thread or module).
use clrprof::{ClassId, RuntimeHandle};
use std::sync::OnceLock;

static OTHER_RUNTIME: OnceLock<RuntimeHandle> = OnceLock::new();

fn class_of_another_runtime(class: ClassId<'_>) {
    let handle = OTHER_RUNTIME.get().unwrap();
    let _ = handle.class_info(class);
    let _ = handle.current_thread_id();
}

fn main() {}
