// An object reference read from a static is valid only until the next GC:
// the value borrows the scope and cannot be kept.
use clrprof::inspect::Value;
use clrprof::{AppDomainId, ClassId, ProfilerInfo};
use std::sync::Mutex;

static KEPT: Mutex<Vec<Value<'static>>> = Mutex::new(Vec::new());

fn keep(info: &ProfilerInfo, class: ClassId<'_>, domain: AppDomainId<'_>) {
    let value = info.static_field_value(class, "Instance", domain).unwrap();
    KEPT.lock().unwrap().push(value);
}

fn main() {}
