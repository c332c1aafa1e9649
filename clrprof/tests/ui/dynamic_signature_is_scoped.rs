// A dynamic method's signature lives in runtime memory freed with the
// method (at DynamicMethodUnloaded): the slice borrows the function's scope.
use clrprof::{FunctionId, ProfilerInfo};
use std::sync::Mutex;

static KEPT: Mutex<Vec<&'static [u8]>> = Mutex::new(Vec::new());

fn keep(info: &ProfilerInfo, function: FunctionId<'_>) {
    let d = info.dynamic_function_info(function).unwrap();
    KEPT.lock().unwrap().push(d.signature);
}

fn main() {}
