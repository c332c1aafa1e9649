//! method-wrapper: wraps managed methods with handlers written in safe Rust
//! through [`clrprof_instrumentation`].
//!
//! Every method whose name (`Namespace.Type::Method`) starts with
//! `CLRPROF_WRAP_FILTER` (or with one of its comma-separated prefixes) is
//! wrapped: its entry handler counts the call, its
//! exit handler a normal return or an exceptional exit. When the profiler
//! finishes it writes one
//! `{"event":"wrapped","method":NAME,"enter":N,"return":N,"exception":N}`
//! per method name (instantiations of a generic method and overloads summed
//! under the name) to `CLRPROF_OUTPUT`, or stderr.
//!
//! - `CLRPROF_WRAP_MODE=jit` (default): the wrapped body is installed at
//!   `JITCompilationStarted`. `rejit`: methods are only noted when first
//!   compiled; when `<namespace>.Rejit::Begin` is compiled every noted
//!   method is re-JITted with its wrapper, and when `<namespace>.Rejit::End`
//!   is compiled they are reverted, so only the calls in between count.
//! - `CLRPROF_WRAP_EVERY=1` (JIT mode): every `JITCompilationStarted` of a
//!   selected method builds and installs its wrapper, as the book's short
//!   listing does, instead of the first one only. The later compilations
//!   (tier 1, an on-stack replacement of a running loop) are refused by the
//!   SDK (`Error::CannotWrap`, a `wrap_refused` record each): the method
//!   keeps the body installed at its first compilation.
//! - `CLRPROF_WRAP_SKIP=N` (JIT mode): the first `N` compilations of each
//!   selected method are passed over (it runs its own IL), the wrapper is
//!   installed from the next: the SDK refuses it (a later compilation, which
//!   may continue a running frame of the earlier code) and the method stays
//!   unwrapped.
//! - `CLRPROF_WRAP_ARGS=1`: also one
//!   `{"event":"call","method":..,"args":[..],"return":..,"threw":bool}` per
//!   call, each primitive argument and the return value as the method's own
//!   signature types them (others as `"?"`).
//! - `CLRPROF_WRAP_REPLACE=Ns.Type::Method=N`: that method's `int` return
//!   value is replaced with `N`.
//! - `CLRPROF_WRAP_INLINERS=1` (ReJIT mode): wrapped methods may be inlined
//!   until they are wrapped; a method the JIT inlines is noted at
//!   `JITInlining` (it may never be compiled on its own), and the ReJIT at
//!   `Begin` is `RequestReJITWithInliners` with `BLOCK_INLINING`, so the
//!   callers that inlined it are compiled again and call the wrapped
//!   method. Each inline it allows is reported as
//!   `{"event":"inlined","method":..}`.
//! - `CLRPROF_WRAP_CYCLES=N` (ReJIT mode): from `Rejit::Begin` a profiler
//!   thread wraps and unwraps the noted methods up to `N` times (ReJIT, a
//!   pause, revert, a pause) while the app runs, until `Rejit::End` stops it
//!   after its current revert; one
//!   `{"event":"rejit_cycles","cycles":N,"failed":F}` then.
//! - `CLRPROF_WRAP_MANAGED=Assembly,Major.Minor.Build.Revision,Namespace.Type`:
//!   the handlers are C# methods `OnEntry`/`OnExit` of that type
//!   ([`instrumentation::ManagedHandlers`]); the application loads the
//!   assembly as a startup hook (`DOTNET_STARTUP_HOOKS`). The C# handlers
//!   keep their own counts; this profiler reports no `wrapped` records then,
//!   only refusals.
//! - `CLRPROF_WRAP_TIME=1`: the handlers also time every call (entry to
//!   exit, on every way out); the `wrapped` records then carry `"ns"`, the
//!   calls' total time in nanoseconds (for `cargo xtask bench server`).
//! - `CLRPROF_WRAP_BENCH=1` (for `cargo xtask bench wrap`): the handlers read
//!   the `int` second argument and the `long` return value of every call and
//!   sum them; one `{"event":"wrap_bench","calls":N,"args":S,"returns":S}`
//!   at finish.
//!
//! Wrapped methods are never inlined (`JITInlining` refuses them), so every
//! call runs the wrapper. A method the layer cannot wrap is reported as
//! `{"event":"wrap_refused","method":..,"why":..}` and left as it was.

use clrprof::il::{ReJitFlags, ReJitThread};
use clrprof::output::JsonLines;
use clrprof::rejit::FunctionControl;
use clrprof::thread::ProfilerThread;
use clrprof::{
    profiler, EventMask, EventMasks, FunctionId, MdMethodDef, ModuleId, Profiler, ProfilerInfo,
    RawModuleId, Result,
};
use clrprof_instrumentation::{
    self as instrumentation, Arguments, Entry, Exit, MethodHandler, ReturnValue,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The counts of one method name.
#[derive(Default)]
struct Tally {
    enter: AtomicU64,
    ret: AtomicU64,
    exception: AtomicU64,
    /// Total time of the calls, ns (`CLRPROF_WRAP_TIME`).
    nanos: AtomicU64,
}

/// The handler of one method: counts (no state: nothing is allocated per
/// call).
struct Counter {
    tally: Arc<Tally>,
    replace: Option<i32>,
}

impl Counter {
    fn exit(&self, call: &mut Exit<'_>) {
        if call.threw() {
            self.tally.exception.fetch_add(1, Ordering::Relaxed);
        } else {
            self.tally.ret.fetch_add(1, Ordering::Relaxed);
            if let Some(n) = self.replace {
                // A method not returning `int` keeps its value.
                let _ = call.return_value().set(n);
            }
        }
    }
}

impl MethodHandler for Counter {
    type State = ();

    fn on_entry(&self, _: &Entry<'_>) {
        self.tally.enter.fetch_add(1, Ordering::Relaxed);
    }

    fn on_exit(&self, call: &mut Exit<'_>, _: ()) {
        self.exit(call);
    }
}

/// `CLRPROF_WRAP_TIME`: counts and times every call.
struct Timer {
    counter: Counter,
}

impl MethodHandler for Timer {
    /// When the call began.
    type State = std::time::Instant;

    fn on_entry(&self, _: &Entry<'_>) -> std::time::Instant {
        self.counter.tally.enter.fetch_add(1, Ordering::Relaxed);
        std::time::Instant::now()
    }

    fn on_exit(&self, call: &mut Exit<'_>, start: std::time::Instant) {
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counter.tally.nanos.fetch_add(ns, Ordering::Relaxed);
        self.counter.exit(call);
    }
}

/// `CLRPROF_WRAP_ARGS`: counts and records every call's arguments and
/// return value.
struct Recorder {
    counter: Counter,
    out: Arc<JsonLines>,
}

/// A primitive argument or return value as text, by its declared type
/// (the first primitive type the value reads as).
macro_rules! show {
    ($x:ident $args:tt) => {
        show!(@each $x $args; i32, i64, f64, f32, bool, u16, i16, i8, u8, u32, u64, isize, usize)
    };
    (@each $x:ident $args:tt; $($t:ty),*) => {{
        let mut s: Option<String> = None;
        $(
            if s.is_none() {
                if let Ok(v) = $x.get::<$t> $args {
                    s = Some(v.to_string());
                }
            }
        )*
        s.unwrap_or_else(|| "?".to_string())
    }};
}

fn show_arg(a: &Arguments<'_>, i: usize) -> String {
    show!(a(i))
}

fn show_return(r: &ReturnValue<'_>) -> String {
    show!(r())
}

impl MethodHandler for Recorder {
    /// The arguments as text.
    type State = Vec<String>;
    const ARGUMENTS: bool = true;

    fn on_entry(&self, call: &Entry<'_>) -> Vec<String> {
        self.counter.tally.enter.fetch_add(1, Ordering::Relaxed);
        let a = call.arguments();
        (0..a.len()).map(|i| show_arg(a, i)).collect()
    }

    fn on_exit(&self, call: &mut Exit<'_>, args: Vec<String>) {
        self.counter.exit(call);
        let threw = call.threw();
        let list: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
        let ret = if threw {
            "?".to_string()
        } else {
            show_return(call.return_value())
        };
        let mut record = self.out.record("call");
        record = record
            .str("method", call.method().name())
            .raw("args", &format!("[{}]", list.join(",")))
            .str("return", &ret)
            .bool("threw", threw);
        // The exception's type (its class, valid for this call only).
        if let Some(e) = call.exception() {
            let name = e.type_name().unwrap_or_else(|e| format!("? ({e})"));
            record = record.str("exception", &name);
        }
        record.write();
    }
}

/// The benchmark's handler: reads one `int` argument and the `long` return
/// value of each call, as an instrumentation agent's handler would.
#[derive(Default)]
struct BenchHandler {
    calls: AtomicU64,
    args: AtomicU64,
    returns: AtomicU64,
}

impl MethodHandler for BenchHandler {
    type State = ();
    const ARGUMENTS: bool = true;

    fn on_entry(&self, call: &Entry<'_>) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if let Ok(i) = call.arguments().get::<i32>(1) {
            self.args.fetch_add(i as u64, Ordering::Relaxed);
        }
    }

    fn on_exit(&self, call: &mut Exit<'_>, _: ()) {
        if let Ok(r) = call.return_value().get::<i64>() {
            self.returns.fetch_add(r as u64, Ordering::Relaxed);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Jit,
    ReJit,
}

/// Settings read once in `Initialize`.
struct Config {
    /// Name prefixes; empty: nothing is wrapped.
    filter: Vec<String>,
    mode: Mode,
    args: bool,
    time: bool,
    bench: bool,
    inliners: bool,
    every: bool,
    skip: u32,
    cycles: Option<u32>,
    replace: Option<(String, i32)>,
    managed: Option<instrumentation::ManagedHandlers>,
}

/// `Assembly,1.2.3.4,Namespace.Type`.
fn managed_handlers(v: &str) -> Option<instrumentation::ManagedHandlers> {
    let mut parts = v.split(',');
    let (assembly, version, type_name) = (parts.next()?, parts.next()?, parts.next()?);
    let mut n = version.split('.').map(|p| p.parse::<u16>().ok());
    let version = [n.next()??, n.next()??, n.next()??, n.next()??];
    Some(instrumentation::ManagedHandlers::new(
        assembly, version, type_name,
    ))
}

type MethodKey = (RawModuleId, MdMethodDef);

/// The `CLRPROF_WRAP_CYCLES` thread's stop flag, and the thread (which
/// answers the cycles done and the requests that failed).
type Cycler = (Arc<AtomicBool>, ProfilerThread<(u64, u64)>);

#[derive(Default)]
struct State {
    tallies: BTreeMap<String, Arc<Tally>>,
    /// Methods wrapped at JIT time (never twice: later compilations and
    /// other instantiations use the body already set).
    wrapped: HashSet<MethodKey>,
    /// Compilations of each method seen (`CLRPROF_WRAP_SKIP`).
    compilations: HashMap<MethodKey, u32>,
    /// Methods seen compiled (ReJIT mode), and those re-JITted now.
    candidates: Vec<MethodKey>,
    rejitted: Vec<MethodKey>,
    /// Candidates the JIT inlined somewhere (`CLRPROF_WRAP_INLINERS`).
    inlined: HashSet<MethodKey>,
}

/// The profiler.
#[profiler(clsid = "{2C8E4F61-7A3B-4D59-9E12-6B0F1A2C3D4E}")]
#[derive(Default)]
pub struct MethodWrapper {
    out: Arc<JsonLines>,
    config: OnceLock<Config>,
    state: Mutex<State>,
    rejit: OnceLock<Arc<ReJitThread>>,
    bench: Arc<BenchHandler>,
    /// The thread of `CLRPROF_WRAP_CYCLES`, and its stop flag.
    cycler: Mutex<Option<Cycler>>,
}

impl MethodWrapper {
    fn config(&self) -> Option<&Config> {
        self.config.get()
    }

    fn selected(&self, name: &str) -> bool {
        self.config()
            .is_some_and(|c| c.filter.iter().any(|p| name.starts_with(p.as_str())))
    }

    /// Builds the wrapped body of `method` with the handler for its name.
    fn build<'m>(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'m>,
        method: MdMethodDef,
        name: &str,
    ) -> Result<instrumentation::WrappedBody<'m>> {
        let config = self
            .config()
            .ok_or_else(|| clrprof::Error::Usage("not initialized".into()))?;
        let tally = self
            .state
            .lock()
            .map_err(|_| clrprof::Error::Usage("lock poisoned".into()))?
            .tallies
            .entry(name.to_string())
            .or_default()
            .clone();
        let replace = config
            .replace
            .as_ref()
            .filter(|(m, _)| m == name)
            .map(|(_, n)| *n);
        let counter = Counter { tally, replace };
        if let Some(managed) = &config.managed {
            instrumentation::wrap_managed(info, module, method, managed)
        } else if config.bench {
            instrumentation::wrap(info, module, method, self.bench.clone())
        } else if config.args {
            let out = self.out.clone();
            instrumentation::wrap(info, module, method, Arc::new(Recorder { counter, out }))
        } else if config.time {
            instrumentation::wrap(info, module, method, Arc::new(Timer { counter }))
        } else {
            instrumentation::wrap(info, module, method, Arc::new(counter))
        }
    }

    fn refused(&self, name: &str, e: &clrprof::Error) {
        self.out
            .record("wrap_refused")
            .str("method", name)
            .str("why", &e.to_string())
            .write();
    }

    fn on_marker(&self, begin: bool) -> Result<()> {
        let Some(rejit) = self.rejit.get() else {
            return Ok(());
        };
        let keys: Vec<MethodKey> = {
            let mut s = self
                .state
                .lock()
                .map_err(|_| clrprof::Error::Usage("lock poisoned".into()))?;
            if begin {
                s.rejitted = s.candidates.clone();
                s.rejitted.clone()
            } else {
                std::mem::take(&mut s.rejitted)
            }
        };
        if keys.is_empty() {
            return Ok(());
        }
        if let Some(n) = self.config().and_then(|c| c.cycles) {
            return self.cycle(rejit.clone(), keys, n, begin);
        }
        let failed = if begin && self.config().is_some_and(|c| c.inliners) {
            // The inlined methods with their inliners first, then the others
            // alone: a method that is both requested and an inliner of an
            // inlined one (an iterator's kick-off inlines its state machine's
            // constructor) must get its own wrapped version last, or the
            // inliner's re-JIT (the original IL) replaces it.
            let inlined: Vec<MethodKey> = {
                let s = self
                    .state
                    .lock()
                    .map_err(|_| clrprof::Error::Usage("lock poisoned".into()))?;
                keys.iter()
                    .copied()
                    .filter(|k| s.inlined.contains(k))
                    .collect()
            };
            let rest: Vec<MethodKey> = keys
                .iter()
                .copied()
                .filter(|k| !inlined.contains(k))
                .collect();
            let mut failed = 0;
            if !inlined.is_empty() {
                failed += request(rejit, &inlined, true, true)?;
            }
            if !rest.is_empty() {
                failed += request(rejit, &rest, true, false)?;
            }
            failed
        } else {
            request(rejit, &keys, begin, false)?
        };
        self.out
            .record(if begin {
                "rejit_requested"
            } else {
                "revert_requested"
            })
            .num("methods", keys.len() as u64)
            .num("failed", failed)
            .write();
        Ok(())
    }
}

/// One ReJIT (with the methods' inliners when `inliners`) or revert
/// request, waited for: how many methods failed.
fn request(rejit: &ReJitThread, keys: &[MethodKey], wrap: bool, inliners: bool) -> Result<u64> {
    // SAFETY: the modules are the app's own, loaded for the process's
    // life (the wrapped apps load no collectible assemblies), so the raw
    // module IDs stay valid until the request, waited for here, is done.
    let rx = unsafe {
        if wrap && inliners {
            rejit.request_rejit_with_inliners_async(ReJitFlags::BLOCK_INLINING, keys.to_vec())?
        } else if wrap {
            rejit.request_rejit_async(keys.to_vec())?
        } else {
            rejit.request_revert_async(keys.to_vec())?
        }
    };
    let statuses = rx
        .recv()
        .map_err(|_| clrprof::Error::Usage("ReJIT thread gone".into()))??;
    Ok(statuses.iter().filter(|h| h.0 < 0).count() as u64)
}

impl MethodWrapper {
    /// `CLRPROF_WRAP_CYCLES`: starts the cycling thread at `Begin`, stops
    /// it at `End` (after its current revert) and reports.
    fn cycle(
        &self,
        rejit: Arc<ReJitThread>,
        keys: Vec<MethodKey>,
        n: u32,
        begin: bool,
    ) -> Result<()> {
        let mut slot = self
            .cycler
            .lock()
            .map_err(|_| clrprof::Error::Usage("lock poisoned".into()))?;
        if begin {
            let stop = Arc::new(AtomicBool::new(false));
            let flag = stop.clone();
            let thread = clrprof::thread::spawn("wrap-cycles", move || {
                let (mut cycles, mut failed) = (0u64, 0u64);
                let pause = std::time::Duration::from_millis(15);
                for _ in 0..n {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    let wrapped = request(&rejit, &keys, true, false);
                    std::thread::sleep(pause);
                    let unwrapped = request(&rejit, &keys, false, false);
                    std::thread::sleep(pause);
                    match (wrapped, unwrapped) {
                        (Ok(a), Ok(b)) => failed += a + b,
                        _ => failed += 1,
                    }
                    cycles += 1;
                }
                (cycles, failed)
            })
            .map_err(|e| clrprof::Error::Usage(format!("cannot start the cycling thread: {e}")))?;
            *slot = Some((stop, thread));
        } else if let Some((stop, thread)) = slot.take() {
            stop.store(true, Ordering::Relaxed);
            let (cycles, failed) = thread.join().unwrap_or((0, u64::MAX));
            self.out
                .record("rejit_cycles")
                .num("cycles", cycles)
                .num("failed", failed)
                .write();
        }
        Ok(())
    }
}

impl Profiler for MethodWrapper {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        let mode = match std::env::var("CLRPROF_WRAP_MODE").as_deref() {
            Ok("rejit") => Mode::ReJit,
            _ => Mode::Jit,
        };
        let replace = std::env::var("CLRPROF_WRAP_REPLACE").ok().and_then(|v| {
            let (m, n) = v.rsplit_once('=')?;
            Some((m.to_string(), n.parse().ok()?))
        });
        let _ = self.config.set(Config {
            filter: std::env::var("CLRPROF_WRAP_FILTER")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
            mode,
            args: std::env::var("CLRPROF_WRAP_ARGS").is_ok_and(|v| v == "1"),
            time: std::env::var("CLRPROF_WRAP_TIME").is_ok_and(|v| v == "1"),
            bench: std::env::var("CLRPROF_WRAP_BENCH").is_ok_and(|v| v == "1"),
            inliners: mode == Mode::ReJit
                && std::env::var("CLRPROF_WRAP_INLINERS").is_ok_and(|v| v == "1"),
            every: mode == Mode::Jit && std::env::var("CLRPROF_WRAP_EVERY").is_ok_and(|v| v == "1"),
            skip: std::env::var("CLRPROF_WRAP_SKIP")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|_| mode == Mode::Jit)
                .unwrap_or(0),
            managed: std::env::var("CLRPROF_WRAP_MANAGED")
                .ok()
                .and_then(|v| managed_handlers(&v)),
            cycles: std::env::var("CLRPROF_WRAP_CYCLES")
                .ok()
                .and_then(|v| v.parse().ok()),
            replace,
        });
        let mut mask = EventMask::MONITOR_JIT_COMPILATION | EventMask::MONITOR_MODULE_LOADS;
        if mode == Mode::ReJit {
            mask |= EventMask::ENABLE_REJIT;
            let _ = self.rejit.set(Arc::new(ReJitThread::spawn(info)?));
        }
        Ok(mask.into())
    }

    fn module_load_finished(&self, info: &ProfilerInfo, module: clrprof::Loaded<ModuleId<'_>>) {
        let Ok(module) = module else { return };
        if let Some(managed) = self.config().and_then(|c| c.managed.as_ref()) {
            managed.module_loaded(info, module);
        }
    }

    fn jit_inlining(
        &self,
        info: &ProfilerInfo,
        _caller: FunctionId<'_>,
        callee: FunctionId<'_>,
    ) -> bool {
        let Ok(name) = info.function_name(callee) else {
            return true;
        };
        if !self.selected(&name) {
            return true;
        }
        if !self.config().is_some_and(|c| c.inliners) {
            // A wrapped method inlined into its caller would run unwrapped.
            return false;
        }
        // Inlined until wrapped: the ReJIT with inliners recompiles the
        // callers. The method may never be compiled on its own, so note it
        // here.
        if let (Ok(fi), Ok(mut s)) = (info.function_info(callee), self.state.lock()) {
            let key = (fi.module.to_raw(), fi.token);
            s.tallies.entry(name.clone()).or_default();
            if !s.candidates.contains(&key) {
                s.candidates.push(key);
            }
            s.inlined.insert(key);
        }
        self.out.record("inlined").str("method", &name).write();
        true
    }

    fn jit_compilation_started(&self, info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {
        let Ok(name) = info.function_name(function) else {
            return;
        };
        if let Some(marker) = name.rsplit_once(".Rejit::").map(|(_, m)| m) {
            let r = match marker {
                "Begin" => self.on_marker(true),
                "End" => self.on_marker(false),
                _ => Ok(()),
            };
            if let Err(e) = r {
                self.refused(&name, &e);
            }
            return;
        }
        if !self.selected(&name) {
            return;
        }
        let Ok(fi) = info.function_info(function) else {
            return;
        };
        let key = (fi.module.to_raw(), fi.token);
        let Some((mode, every, skip)) = self.config().map(|c| (c.mode, c.every, c.skip)) else {
            return;
        };
        {
            let Ok(mut s) = self.state.lock() else {
                return;
            };
            s.tallies.entry(name.clone()).or_default();
            if mode == Mode::ReJit {
                if !s.candidates.contains(&key) {
                    s.candidates.push(key);
                }
                return;
            }
            let seen = s.compilations.entry(key).or_default();
            *seen = seen.saturating_add(1);
            if *seen <= skip {
                return;
            }
            if !s.wrapped.insert(key) && !every {
                return;
            }
        }
        let r = self
            .build(info, fi.module, fi.token, &name)
            .and_then(|body| body.install_at_jit(info, function));
        if let Err(e) = r {
            self.refused(&name, &e);
        }
    }

    fn get_rejit_parameters(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        method: MdMethodDef,
        control: &FunctionControl,
    ) -> Result<()> {
        let name = info
            .module_metadata(module, clrprof::info::MetaDataOpen::Read)?
            .method_name(method)
            .unwrap_or_else(|_| format!("{:#010x}", method.0));
        let r = self
            .build(info, module, method, &name)
            .and_then(|body| body.install_in_rejit(control));
        if let Err(e) = &r {
            self.refused(&name, e);
        }
        r
    }

    fn shutdown(&self, _info: &ProfilerInfo) {
        if let Some(rejit) = self.rejit.get() {
            rejit.stop();
        }
    }

    fn finish(&self) {
        let tallies: Vec<(String, Arc<Tally>)> = self
            .state
            .lock()
            .map(|s| {
                s.tallies
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let time = self.config().is_some_and(|c| c.time);
        for (name, t) in tallies {
            let mut record = self
                .out
                .record("wrapped")
                .str("method", &name)
                .num("enter", t.enter.load(Ordering::Relaxed))
                .num("return", t.ret.load(Ordering::Relaxed))
                .num("exception", t.exception.load(Ordering::Relaxed));
            if time {
                record = record.num("ns", t.nanos.load(Ordering::Relaxed));
            }
            record.write();
        }
        if self.config().is_some_and(|c| c.bench) {
            self.out
                .record("wrap_bench")
                .num("calls", self.bench.calls.load(Ordering::Relaxed))
                .num("args", self.bench.args.load(Ordering::Relaxed))
                .num("returns", self.bench.returns.load(Ordering::Relaxed))
                .write();
        }
        self.out
            .record("wrapper_panics")
            .num("count", instrumentation::handler_panics())
            .write();
    }
}
