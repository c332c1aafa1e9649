//! exception-tracer: one record per thrown exception, with who threw it and who caught it.
//!
//! Records (to the file named by `CLRPROF_OUTPUT`, or stderr):
//! `{"event":"runtime",...}` first, then per exception, when its catch block
//! is entered, `{"event":"exception","type":"Namespace.Type",
//! "thrower":"Namespace.Type::Method","catcher":"Namespace.Type::Method"}`.
//! The thrower is the first frame the runtime's first pass searches; a
//! rethrow is a new exception thrown by the method that rethrew. Exceptions
//! still in flight when the profiler finishes (at shutdown, or at process
//! exit: an unhandled exception ends the process in flight) are written with `"catcher":null`.
//!
//! With `CLRPROF_EXCEPTION_SEQUENCE=1` every exception callback is written
//! too, as `{"event":"<CallbackName>","t":<thread>,"name":<function>,
//! "class":<exception type>}` (the format `clrprof_testing::callbacks`
//! checks).

use clrprof::output::JsonLines;
use clrprof::{
    profiler, EventMask, EventMasks, FunctionId, NameCache, ObjectId, Profiler, ProfilerInfo,
    Result,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// An exception between `ExceptionThrown` and its catch.
struct InFlight {
    ty: String,
    thrower: Option<String>,
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// A small number naming the calling thread.
fn thread() -> u64 {
    THREAD.with(|t| *t)
}

/// The profiler's state.
#[profiler(clsid = "{7B2C3D4E-5F60-4A71-8B92-A3B4C5D6E7F8}")]
#[derive(Default)]
pub struct ExceptionTracer {
    out: JsonLines,
    names: NameCache,
    /// Per thread, the exceptions in flight, innermost last. Exception
    /// callbacks arrive on the thread that threw.
    in_flight: Mutex<HashMap<u64, Vec<InFlight>>>,
}

fn sequence_wanted() -> bool {
    static WANTED: OnceLock<bool> = OnceLock::new();
    *WANTED.get_or_init(|| std::env::var("CLRPROF_EXCEPTION_SEQUENCE").as_deref() == Ok("1"))
}

impl ExceptionTracer {
    fn function(&self, info: &ProfilerInfo, f: FunctionId<'_>) -> String {
        self.names
            .function_name(info, f)
            .map(|n| n.to_string())
            .unwrap_or_else(|e| format!("<{e}>"))
    }

    /// Writes the callback itself when the sequence is wanted.
    fn step(&self, callback: &str, function: Option<&str>, class: Option<&str>) {
        if !sequence_wanted() {
            return;
        }
        let mut r = self.out.record(callback).num("t", thread());
        if let Some(f) = function {
            r = r.str("name", f);
        }
        if let Some(c) = class {
            r = r.str("class", c);
        }
        r.write();
    }

    fn caught(&self, catcher: &str) {
        let x = self
            .in_flight
            .lock()
            .ok()
            .and_then(|mut m| m.get_mut(&thread()).and_then(Vec::pop));
        if let Some(x) = x {
            self.out
                .record("exception")
                .str("type", &x.ty)
                .str("thrower", x.thrower.as_deref().unwrap_or(""))
                .str("catcher", catcher)
                .write();
        }
    }
}

impl Profiler for ExceptionTracer {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        // The SDK keeps the cache's names valid across unloads.
        self.names.register(info)?;
        Ok(EventMask::MONITOR_EXCEPTIONS.into())
    }

    // ANCHOR: thrown
    fn exception_thrown(&self, info: &ProfilerInfo, exception: ObjectId<'_>) {
        let ty = info
            .class_from_object(exception)
            .and_then(|c| self.names.class_name(info, c))
            .map(|n| n.to_string())
            .unwrap_or_else(|e| format!("<{e}>"));
        self.step("ExceptionThrown", None, Some(&ty));
        if let Ok(mut m) = self.in_flight.lock() {
            m.entry(thread())
                .or_default()
                .push(InFlight { ty, thrower: None });
        }
    }

    fn exception_search_function_enter(&self, info: &ProfilerInfo, f: FunctionId<'_>) {
        let name = self.function(info, f);
        if let Ok(mut m) = self.in_flight.lock() {
            if let Some(x) = m.get_mut(&thread()).and_then(|s| s.last_mut()) {
                x.thrower.get_or_insert_with(|| name.clone());
            }
        }
        self.step("ExceptionSearchFunctionEnter", Some(&name), None);
    }
    // ANCHOR_END: thrown
    fn exception_search_function_leave(&self, _info: &ProfilerInfo) {
        self.step("ExceptionSearchFunctionLeave", None, None);
    }
    fn exception_search_filter_enter(&self, info: &ProfilerInfo, f: FunctionId<'_>) {
        self.step(
            "ExceptionSearchFilterEnter",
            Some(&self.function(info, f)),
            None,
        );
    }
    fn exception_search_filter_leave(&self, _info: &ProfilerInfo) {
        self.step("ExceptionSearchFilterLeave", None, None);
    }
    fn exception_search_catcher_found(&self, info: &ProfilerInfo, f: FunctionId<'_>) {
        self.step(
            "ExceptionSearchCatcherFound",
            Some(&self.function(info, f)),
            None,
        );
    }
    fn exception_unwind_function_enter(&self, info: &ProfilerInfo, f: FunctionId<'_>) {
        self.step(
            "ExceptionUnwindFunctionEnter",
            Some(&self.function(info, f)),
            None,
        );
    }
    fn exception_unwind_function_leave(&self, _info: &ProfilerInfo) {
        self.step("ExceptionUnwindFunctionLeave", None, None);
    }
    fn exception_unwind_finally_enter(&self, info: &ProfilerInfo, f: FunctionId<'_>) {
        self.step(
            "ExceptionUnwindFinallyEnter",
            Some(&self.function(info, f)),
            None,
        );
    }
    fn exception_unwind_finally_leave(&self, _info: &ProfilerInfo) {
        self.step("ExceptionUnwindFinallyLeave", None, None);
    }
    // ANCHOR: catcher
    fn exception_catcher_enter(
        &self,
        info: &ProfilerInfo,
        f: FunctionId<'_>,
        exception: ObjectId<'_>,
    ) {
        let catcher = self.function(info, f);
        let ty = info
            .class_from_object(exception)
            .and_then(|c| self.names.class_name(info, c))
            .map(|n| n.to_string())
            .ok();
        self.step("ExceptionCatcherEnter", Some(&catcher), ty.as_deref());
        self.caught(&catcher);
    }
    // ANCHOR_END: catcher
    fn exception_catcher_leave(&self, _info: &ProfilerInfo) {
        self.step("ExceptionCatcherLeave", None, None);
    }
    fn exception_clr_catcher_found(&self, _info: &ProfilerInfo) {
        self.step("ExceptionCLRCatcherFound", None, None);
    }
    fn exception_clr_catcher_execute(&self, _info: &ProfilerInfo) {
        self.step("ExceptionCLRCatcherExecute", None, None);
        self.caught("<runtime>");
    }

    // Exceptions still in flight (an unhandled one, or the process ending
    // mid-search) are written with no catcher; names were resolved when seen.
    fn finish(&self) {
        if let Ok(mut m) = self.in_flight.lock() {
            for x in m.drain().flat_map(|(_, s)| s) {
                self.out
                    .record("exception")
                    .str("type", &x.ty)
                    .str("thrower", x.thrower.as_deref().unwrap_or(""))
                    .raw("catcher", "null")
                    .write();
            }
        }
        self.out.flush();
    }
}
