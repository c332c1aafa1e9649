// The exception's ClassId an exit handler gets is valid for the call only
// (its instance is held alive by the wrapped frame while the handler runs):
// a handler cannot keep it past the call.
use clrprof_instrumentation::{Entry, Exit, MethodHandler};
use clrprof::ClassId;
use std::sync::Mutex;

struct Keeper {
    last: Mutex<Option<ClassId<'static>>>,
}

impl MethodHandler for Keeper {
    type State = ();
    fn on_entry(&self, _: &Entry<'_>) {}
    fn on_exit(&self, call: &mut Exit<'_>, _: ()) {
        if let Some(e) = call.exception() {
            *self.last.lock().unwrap() = Some(e.class());
        }
    }
}

fn main() {}
