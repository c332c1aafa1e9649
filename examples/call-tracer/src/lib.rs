//! call-tracer: exact call counts per method through ELT hooks.
//!
//! Every JIT-compiled method (or those whose name starts with
//! `CLRPROF_CALLS_FILTER`) is hooked; its enter hook adds one to its
//! counter. Inlining is disabled (`COR_PRF_DISABLE_INLINING`), because an
//! inlined call runs no hook: with it the counts are exact.
//!
//! Environment:
//! - `CLRPROF_ELT` = `fastpath` (default: `SetEnterLeaveFunctionHooks3`
//!   through clrprof's trampolines) or `withinfo`
//!   (`SetEnterLeaveFunctionHooks3WithInfo`);
//! - `CLRPROF_CALLS_FILTER` = a method-name prefix (e.g. `Calls.`): hook
//!   only those methods (default: all);
//! - `CLRPROF_CALL_TIMES=1`: also measure inclusive and exclusive time per
//!   method (the call tree's times, folded per method), and keep shadow
//!   stacks balanced across exceptions;
//! - `CLRPROF_SHADOW=1`: keep shadow stacks (implied by `CLRPROF_CALL_TIMES`)
//!   and report their counters;
//! - `CLRPROF_ARGS` = a method-name prefix (WithInfo only): write the
//!   decoded arguments and return value of every call of those methods
//!   (slow: one record per call); a function whose arguments the SDK
//!   refuses to decode (`MethodShape::of`, e.g. the async variant of a .NET
//!   11 runtime-async method) gets one
//!   `{"event":"args_refused","method":..,"why":..}` instead;
//! - `CLRPROF_ARGS_SINK=1` (with `CLRPROF_ARGS`, for `cargo xtask bench
//!   wrap`): decode the arguments and return value of every call as above
//!   but write nothing per call; one
//!   `{"event":"args_decoded","arguments":N,"returns":N}` at finish;
//! - `CLRPROF_RUNTIMES` = `first` | `all` (default) | a major version: the
//!   side-by-side runtimes to profile;
//! - `CLRPROF_OUTPUT`: the JSON Lines file (default: stderr).
//!
//! Records: `{"event":"runtime",...}` first; when a collectible assembly
//! unloads, per hooked method of it
//! `{"event":"unloaded","method":...,"count":N,"live":L}` (`L`: records still
//! alive after it was freed); when the profiler finishes (shutdown, or
//! process exit when there is none), per method with at
//! least one call, `{"event":"calls","method":"Ns.Type::Method","count":N}`
//! (instantiations of a generic method and overloads are summed under their
//! name), with `"tailcalls"` when the method left through tail calls, plus `"inclusive_ns"`/`"exclusive_ns"` with call times; with
//! shadow stacks, one `{"event":"shadow",...}` record with the totals of
//! every thread and one `{"event":"shadow-thread",...}` per live thread.

use clrprof::elt::args::{decode_arguments, decode_return, ArgValue, MethodShape};
use clrprof::elt::{
    self, shadow_stack, EltHooks, EltOptions, EltRuntime, EnterContext, Hooked, LeaveContext,
};
use clrprof::output::{push_json_string, JsonLines};
use clrprof::{
    profiler, EventMask, EventMasks, FunctionId, Profiler, ProfilerInfo, Result, RuntimePolicy,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// What call-tracer keeps per hooked method.
pub struct Method {
    count: AtomicU64,
    /// Timing, shadow stacks or argument records are on for this method:
    /// kept next to the counter, so the counting-only hooks read nothing but
    /// this record's first cache line.
    extra: bool,
    name: Box<str>,
    tailcalls: AtomicU64,
    inclusive_ns: AtomicU64,
    exclusive_ns: AtomicU64,
    /// The signature's shape, for methods whose arguments are written.
    shape: Option<MethodShape>,
}

/// The hooks: counting, and with `EXTRA` optionally timing, shadow stacks
/// and argument records. Counting mode (none of `CLRPROF_CALL_TIMES`,
/// `CLRPROF_SHADOW`, `CLRPROF_ARGS`) uses `Calls<false>`, whose hooks are
/// the counter increment alone: no test of what is switched off on the
/// hot path.
pub struct Calls<const EXTRA: bool> {
    filter: Option<String>,
    times: bool,
    shadow: bool,
    args_filter: Option<String>,
    /// `CLRPROF_ARGS_SINK`: decode, count, write nothing per call.
    args_sink: bool,
    decoded: (AtomicU64, AtomicU64),
    epoch: Instant,
    out: Arc<JsonLines>,
    /// Totals of methods whose module unloaded (their records are freed).
    retired: Mutex<BTreeMap<Box<str>, Totals>>,
    /// This runtime's ELT state (set after `install`), for the number of
    /// live records in `unloaded` records.
    elt: OnceLock<EltRuntime<Calls<EXTRA>>>,
}

/// Count, inclusive and exclusive time, tail calls.
type Totals = (u64, u64, u64, u64);

impl Method {
    fn totals(&self) -> Totals {
        (
            self.count.load(Ordering::Relaxed),
            self.inclusive_ns.load(Ordering::Relaxed),
            self.exclusive_ns.load(Ordering::Relaxed),
            self.tailcalls.load(Ordering::Relaxed),
        )
    }
}

fn add(into: &mut Totals, t: Totals) {
    into.0 += t.0;
    into.1 += t.1;
    into.2 += t.2;
    into.3 += t.3;
}

thread_local! {
    /// Call times of the thread's open frames, indexed by shadow-stack depth:
    /// (start in ns since the epoch, time spent in callees).
    static TIMES: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

impl<const EXTRA: bool> Calls<EXTRA> {
    /// WithInfo extras out of line: timing, shadow stacks, argument records.
    #[cold]
    #[inline(never)]
    fn enter_with_info_extra(&self, function: &Hooked<Method>, context: &EnterContext<'_>) {
        self.enter_extra(function);
        if function.data().shape.is_some() {
            self.write_args(function, context);
        }
    }

    /// Timing and shadow stacks, out of line: the counting-only hook stays a
    /// leaf function with no stack frame of its own.
    #[cold]
    #[inline(never)]
    fn enter_extra(&self, function: &Hooked<Method>) {
        if self.times {
            self.timed_enter(function);
        } else if self.shadow {
            shadow_stack::enter(function);
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn timed_enter(&self, function: &Hooked<Method>) {
        let depth = shadow_stack::current_depth();
        shadow_stack::enter(function);
        let now = self.now();
        let _ = TIMES.try_with(|t| {
            if let Ok(mut t) = t.try_borrow_mut() {
                if t.len() <= depth {
                    t.resize(depth + 1, (0, 0));
                }
                t[depth] = (now, 0);
            }
        });
    }

    fn timed_leave(&self, function: &Hooked<Method>) {
        let now = self.now();
        shadow_stack::leave(function);
        let depth = shadow_stack::current_depth();
        let _ = TIMES.try_with(|t| {
            if let Ok(mut t) = t.try_borrow_mut() {
                let Some(&(start, child)) = t.get(depth) else {
                    return;
                };
                let inclusive = now.saturating_sub(start);
                let m = function.data();
                m.inclusive_ns.fetch_add(inclusive, Ordering::Relaxed);
                m.exclusive_ns
                    .fetch_add(inclusive.saturating_sub(child), Ordering::Relaxed);
                if let Some(parent) = depth.checked_sub(1).and_then(|d| t.get_mut(d)) {
                    parent.1 += inclusive;
                }
            }
        });
    }

    fn write_args(&self, function: &Hooked<Method>, context: &EnterContext<'_>) {
        let Some(shape) = &function.data().shape else {
            return;
        };
        if self.args_sink {
            let decoded = context.arguments().and_then(|(_, args)| {
                decode_arguments(shape, &args, |_, v| {
                    std::hint::black_box(v);
                })
            });
            if decoded.is_ok() {
                self.decoded.0.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let mut values = String::from("[");
        let result = context.arguments().and_then(|(_, args)| {
            decode_arguments(shape, &args, |i, v| {
                if i > 0 {
                    values.push(',');
                }
                push_value(&mut values, &v);
            })
        });
        values.push(']');
        let record = self.out.record("args").str("method", &function.data().name);
        match result {
            Ok(()) => record.raw("values", &values).write(),
            Err(e) => record.str("error", &e.to_string()).write(),
        }
    }

    fn write_return(&self, function: &Hooked<Method>, context: &LeaveContext<'_>) {
        let Some(shape) = &function.data().shape else {
            return;
        };
        if self.args_sink {
            let decoded = context.return_value().and_then(|(_, returned)| {
                std::hint::black_box(decode_return(shape, &returned)?);
                Ok(())
            });
            if decoded.is_ok() {
                self.decoded.1.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let record = self
            .out
            .record("return")
            .str("method", &function.data().name);
        let mut value = String::new();
        let result = context.return_value().and_then(|(_, returned)| {
            let v = decode_return(shape, &returned)?;
            push_value(&mut value, &v);
            Ok(())
        });
        match result {
            Ok(()) => record.raw("value", &value).write(),
            Err(e) => record.str("error", &e.to_string()).write(),
        }
    }
}

/// A decoded value as JSON: numbers as numbers (floats with their full
/// precision as strings, so NaN and infinities survive), strings as
/// strings, references as `{"object":N}`, value types as hex bytes.
fn push_value(out: &mut String, v: &ArgValue<'_>) {
    use std::fmt::Write as _;
    let _ = match v {
        ArgValue::Bool(b) => write!(out, "{b}"),
        ArgValue::Char(c) => write!(out, "{c}"),
        ArgValue::I1(x) => write!(out, "{x}"),
        ArgValue::U1(x) => write!(out, "{x}"),
        ArgValue::I2(x) => write!(out, "{x}"),
        ArgValue::U2(x) => write!(out, "{x}"),
        ArgValue::I4(x) => write!(out, "{x}"),
        ArgValue::U4(x) => write!(out, "{x}"),
        ArgValue::I8(x) => write!(out, "{x}"),
        ArgValue::U8(x) => write!(out, "{x}"),
        ArgValue::R4(x) => write!(out, "\"{x:?}\""),
        ArgValue::R8(x) => write!(out, "\"{x:?}\""),
        ArgValue::I(x) => write!(out, "{x}"),
        ArgValue::U(x) => write!(out, "{x}"),
        ArgValue::String { object: 0, .. } => write!(out, "null"),
        ArgValue::String { .. } => {
            push_json_string(out, &v.string_text().unwrap_or_default());
            Ok(())
        }
        ArgValue::Object(0) => write!(out, "null"),
        ArgValue::Object(o) => write!(out, "{{\"object\":{o}}}"),
        ArgValue::ByRef(p) => write!(out, "{{\"byref\":{p}}}"),
        ArgValue::Pointer(p) => write!(out, "{{\"pointer\":{p}}}"),
        ArgValue::ValueType { bytes, .. } | ArgValue::Unknown(bytes) => {
            out.push_str("{\"bytes\":\"");
            for b in bytes.iter() {
                let _ = write!(out, "{b:02x}");
            }
            out.push_str("\"}");
            Ok(())
        }
        ArgValue::Void => write!(out, "\"void\""),
    };
}

// ANCHOR: hooks
impl<const EXTRA: bool> EltHooks for Calls<EXTRA> {
    type Function = Method;

    // ANCHOR: unloading
    /// A collectible assembly unloads: keep the method's totals by name
    /// (its record is freed after this).
    fn function_unloading(&self, _info: &ProfilerInfo, function: &Hooked<Method>) {
        let m = function.data();
        if let Ok(mut retired) = self.retired.lock() {
            add(retired.entry(m.name.clone()).or_default(), m.totals());
        }
        let live = self.elt.get().map_or(0, |e| e.function_count());
        self.out
            .record("unloaded")
            .str("method", &m.name)
            .num("count", m.count.load(Ordering::Relaxed))
            .num("live", live as u64)
            .write();
    }
    // ANCHOR_END: unloading

    fn map_function(&self, info: &ProfilerInfo, function: FunctionId<'_>) -> Option<Method> {
        let name = info.function_name(function).ok()?;
        if let Some(prefix) = &self.filter {
            if !name.starts_with(prefix.as_str()) {
                return None;
            }
        }
        let shape = match &self.args_filter {
            Some(prefix) if name.starts_with(prefix.as_str()) => {
                match MethodShape::of(info, function) {
                    Ok(shape) => Some(shape),
                    Err(e) => {
                        self.out
                            .record("args_refused")
                            .str("method", &name)
                            .str("why", &e.to_string())
                            .write();
                        None
                    }
                }
            }
            _ => None,
        };
        let extra = self.times || self.shadow || shape.is_some();
        Some(Method {
            count: AtomicU64::new(0),
            extra,
            name: name.into_boxed_str(),
            tailcalls: AtomicU64::new(0),
            inclusive_ns: AtomicU64::new(0),
            exclusive_ns: AtomicU64::new(0),
            shape,
        })
    }

    #[inline]
    fn enter(&self, function: &Hooked<Method>) {
        let method = function.data();
        method.count.fetch_add(1, Ordering::Relaxed);
        if EXTRA && method.extra {
            self.enter_extra(function);
        }
    }

    #[inline]
    fn leave(&self, function: &Hooked<Method>) {
        if !EXTRA {
            return;
        }
        if self.times {
            self.timed_leave(function);
        } else if self.shadow {
            shadow_stack::leave(function);
        }
    }

    #[inline]
    fn tailcall(&self, function: &Hooked<Method>) {
        function.data().tailcalls.fetch_add(1, Ordering::Relaxed);
        self.leave(function)
    }

    fn enter_with_info(&self, function: &Hooked<Method>, context: &EnterContext<'_>) {
        let method = function.data();
        method.count.fetch_add(1, Ordering::Relaxed);
        if EXTRA && method.extra {
            self.enter_with_info_extra(function, context);
        }
    }

    fn leave_with_info(&self, function: &Hooked<Method>, context: &LeaveContext<'_>) {
        if EXTRA && function.data().shape.is_some() {
            self.write_return(function, context);
        }
        self.leave(function);
    }
}
// ANCHOR_END: hooks

/// The profiler: installs the hooks and writes the counts at shutdown.
#[profiler(clsid = "{0C927D58-EE86-474F-BE83-EDD2B7A731C9}")]
pub struct CallTracer {
    out: Arc<JsonLines>,
    hooks: Hooks,
}

/// The hooks of one of the two modes, and their runtime once installed.
enum Hooks {
    Counting(Arc<Calls<false>>, OnceLock<EltRuntime<Calls<false>>>),
    Full(Arc<Calls<true>>, OnceLock<EltRuntime<Calls<true>>>),
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

fn env_text(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl<const EXTRA: bool> Calls<EXTRA> {
    fn from_env(out: Arc<JsonLines>) -> Self {
        let times = env_flag("CLRPROF_CALL_TIMES");
        Calls {
            filter: env_text("CLRPROF_CALLS_FILTER"),
            times,
            shadow: times || env_flag("CLRPROF_SHADOW"),
            args_filter: env_text("CLRPROF_ARGS"),
            args_sink: env_flag("CLRPROF_ARGS_SINK"),
            decoded: (AtomicU64::new(0), AtomicU64::new(0)),
            epoch: Instant::now(),
            out,
            retired: Mutex::new(BTreeMap::new()),
            elt: OnceLock::new(),
        }
    }

    // ANCHOR: install
    /// Installs these hooks (the body of `initialize`).
    fn install(
        self: &Arc<Self>,
        info: &ProfilerInfo,
        runtime: &OnceLock<EltRuntime<Self>>,
    ) -> Result<EventMasks> {
        let with_info = match std::env::var("CLRPROF_ELT").as_deref() {
            Ok("withinfo") => true,
            Ok("fastpath") | Err(_) => false,
            Ok(other) => {
                return Err(clrprof::Error::Usage(format!(
                    "CLRPROF_ELT={other:?}: expected fastpath or withinfo"
                )))
            }
        };
        let mut options = if with_info {
            EltOptions::with_info()
        } else {
            EltOptions::fast_path()
        };
        if self.shadow {
            // The SDK then pops the frames exceptions unwind.
            options = options.with_exceptions();
        }
        // Counting needs only the enter hook: without leave hooks the JIT
        // emits no leave calls at all. CLRPROF_ELT_LEAVE=1 keeps them (the
        // benchmark's enter+leave mode).
        let needs_leave = self.shadow || self.args_filter.is_some();
        if !needs_leave && !env_flag("CLRPROF_ELT_LEAVE") {
            options = options.enter_only();
        }
        let wanted = EventMasks::from(EventMask::DISABLE_INLINING);
        let (masks, installed) = elt::install(info, self.clone(), options, wanted)?;
        let _ = runtime.set(installed);
        let _ = self.elt.set(installed);
        Ok(masks)
    }
    // ANCHOR_END: install

    /// Writes the records of `finish`.
    fn finish(&self, runtime: &OnceLock<EltRuntime<Self>>) {
        if let Some(runtime) = runtime.get() {
            let mut by_name: BTreeMap<Box<str>, Totals> =
                self.retired.lock().map(|r| r.clone()).unwrap_or_default();
            // Refused only from inside another walk of the records.
            let _ = runtime.for_each_function(|f| {
                let m = f.data();
                add(by_name.entry(m.name.clone()).or_default(), m.totals());
            });
            for (name, (count, inclusive, exclusive, tailcalls)) in by_name {
                if count == 0 {
                    continue;
                }
                let mut record = self
                    .out
                    .record("calls")
                    .str("method", &name)
                    .num("count", count);
                if self.times {
                    record = record
                        .num("inclusive_ns", inclusive)
                        .num("exclusive_ns", exclusive);
                }
                if tailcalls > 0 {
                    record = record.num("tailcalls", tailcalls);
                }
                record.write();
            }
        }
        if self.args_sink {
            self.out
                .record("args_decoded")
                .num("arguments", self.decoded.0.load(Ordering::Relaxed))
                .num("returns", self.decoded.1.load(Ordering::Relaxed))
                .write();
        }
        if self.shadow {
            let t = shadow_stack::totals();
            self.out
                .record("shadow")
                .num("depth", t.depth as u64)
                .num("max_depth", t.max_depth as u64)
                .num("pushes", t.pushes)
                .num("pops", t.pops)
                .num("unwound", t.unwound)
                .num("underflows", t.underflows)
                .num("mismatches", t.mismatches)
                .num("suspended", t.suspended)
                .num("suspended_at_enter", t.suspended_at_enter)
                .num("untracked", shadow_stack::exhausted())
                .write();
            // The frames still on a stack at the end, by name (a
            // runtime-async method that suspended last on its thread).
            let mut names: HashMap<usize, Box<str>> = HashMap::new();
            if let Some(runtime) = runtime.get() {
                let _ = runtime.for_each_function(|f| {
                    names.insert(f.function().0, f.data().name.clone());
                });
            }
            shadow_stack::for_each_thread(|thread, s, frames| {
                let mut left = String::from("[");
                for (i, f) in frames.iter().enumerate() {
                    if i > 0 {
                        left.push(',');
                    }
                    push_json_string(&mut left, names.get(&f.function().0).map_or("?", |n| n));
                }
                left.push(']');
                self.out
                    .record("shadow-thread")
                    .num("thread", thread)
                    .num("depth", s.depth as u64)
                    .num("pushes", s.pushes)
                    .num("pops", s.pops)
                    .num("unwound", s.unwound)
                    .num("suspended", s.suspended)
                    .num("suspended_at_enter", s.suspended_at_enter)
                    .raw("left", &left)
                    .write();
            });
        }
        self.out.flush();
    }
}

impl Default for CallTracer {
    fn default() -> Self {
        let out = Arc::new(JsonLines::default());
        let extra = env_flag("CLRPROF_CALL_TIMES")
            || env_flag("CLRPROF_SHADOW")
            || env_text("CLRPROF_ARGS").is_some();
        let hooks = if extra {
            Hooks::Full(Arc::new(Calls::from_env(out.clone())), OnceLock::new())
        } else {
            Hooks::Counting(Arc::new(Calls::from_env(out.clone())), OnceLock::new())
        };
        CallTracer { out, hooks }
    }
}

impl Profiler for CallTracer {
    /// `CLRPROF_RUNTIMES` = `first` | `all` (default) | a major version: which
    /// side-by-side runtimes to profile. Each profiled runtime counts its own
    /// calls (the mapper's client data routes every hook to its runtime).
    fn runtime_policy() -> RuntimePolicy {
        RuntimePolicy::from_env("CLRPROF_RUNTIMES")
    }

    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        match &self.hooks {
            Hooks::Counting(hooks, runtime) => hooks.install(info, runtime),
            Hooks::Full(hooks, runtime) => hooks.install(info, runtime),
        }
    }

    // Method names were resolved when each function was mapped: nothing
    // here calls the runtime, which may be gone at process exit.
    fn finish(&self) {
        match &self.hooks {
            Hooks::Counting(hooks, runtime) => hooks.finish(runtime),
            Hooks::Full(hooks, runtime) => hooks.finish(runtime),
        }
    }
}
