// A `WrappedBody` borrows the module of the scope that built it: it cannot
// be kept for a later JIT compilation or ReJIT control (of another method,
// or after its module unloaded), where nothing would pair it with the
// method it wraps (review 36).
use clrprof_instrumentation::{wrap, Entry, Exit, MethodHandler, WrappedBody};
use clrprof::{FunctionId, ProfilerInfo};
use std::sync::{Arc, Mutex};

struct Count;

impl MethodHandler for Count {
    type State = ();
    fn on_entry(&self, _: &Entry<'_>) {}
    fn on_exit(&self, _: &mut Exit<'_>, _: ()) {}
}

static KEPT: Mutex<Option<WrappedBody<'static>>> = Mutex::new(None);

fn jit_compilation_started(info: &ProfilerInfo, function: FunctionId<'_>) {
    let fi = info.function_info(function).unwrap();
    let body = wrap(info, fi.module, fi.token, Arc::new(Count)).unwrap();
    *KEPT.lock().unwrap() = Some(body);
}

fn main() {}
