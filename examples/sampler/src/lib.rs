//! sampler: a sampling profiler writing folded stacks.
//!
//! Where the runtime has `ICorProfilerInfo10` (.NET Core 3.0 and later —
//! .NET Core 3.1 included) it samples every managed thread with
//! `SuspendRuntime` + `DoStackSnapshot` ([`clrprof::sampler`]). On older
//! runtimes, or with `CLRPROF_SAMPLER_SOURCE=shadow-stack`, it falls back to
//! the shadow stacks its ELT hooks keep ([`clrprof::sampler::ShadowStackSource`]):
//! no suspension, JIT-compiled frames only. The `sampling` record says which
//! method was used.
//!
//! Configuration (environment):
//! - `CLRPROF_OUTPUT`: folded stacks (`root;...;leaf N`) are written here when
//!   the profiler finishes (shutdown, or process exit when there is none), and a speedscope file next to it (`<CLRPROF_OUTPUT>.speedscope.json`);
//! - `CLRPROF_OUTPUT.jsonl` (the same path plus `.jsonl`): JSON Lines records
//!   `{"event":"runtime",...}`, `{"event":"sampling","method":"suspend-runtime"|"shadow-stack"|"none",...}`,
//!   `{"event":"async-walk",...}` (what an asynchronous walk of another
//!   thread gave, on runtimes without `SuspendRuntime`), and at shutdown
//!   `{"event":"samples","method":...,"samples":N,"ticks":N,...}`;
//! - `CLRPROF_SAMPLER_RATE`: samples per second (default 1000);
//! - `CLRPROF_SAMPLER_SOURCE` = `suspend-runtime` (default where the runtime
//!   has it) | `shadow-stack`.
//!
//! Sampling starts at the second module load (the runtime is up and the
//! first application assembly is loading), not inside `Initialize`.

use clrprof::elt::{self, shadow_stack, EltHooks, EltOptions, EltRuntime, Hooked};
use clrprof::output::JsonLines;
use clrprof::sampler::{Sampler, SamplerConfig, ShadowStackSource};
use clrprof::stackwalk::{ThreadGate, Walk, WalkOptions};
use clrprof::{
    profiler, ClassId, EventMask, EventMasks, FunctionId, ModuleId, NameCache, ObjectId, Profiler,
    ProfilerInfo, RawThreadId, Result, ThreadId, HRESULT,
};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// How long `finish` waits for the sampling thread to stop.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Where the JSON Lines records go (set from `CLRPROF_OUTPUT` at start-up).
const RECORDS_VAR: &str = "CLRPROF_SAMPLER_RECORDS";

/// The profiler's state.
#[profiler(clsid = "{5B0C2E71-9A43-4D1E-8F26-7C1D3E5A9B42}")]
pub struct SamplerProfiler {
    out: JsonLines,
    names: Arc<NameCache>,
    sampler: OnceLock<Arc<Sampler>>,
    /// The ELT hooks of the shadow-stack fallback, when it is used.
    shadow: OnceLock<EltRuntime<ShadowHooks>>,
    modules: AtomicUsize,
    /// Threads seen by `ThreadCreated`, for the asynchronous-walk check.
    threads: Mutex<Vec<RawThreadId>>,
    /// Guards walks this profiler makes outside the sampler.
    gate: ThreadGate,
}

impl Default for SamplerProfiler {
    fn default() -> Self {
        if std::env::var_os(RECORDS_VAR).is_none() {
            if let Some(out) = std::env::var_os("CLRPROF_OUTPUT") {
                let mut p = out;
                p.push(".jsonl");
                std::env::set_var(RECORDS_VAR, p);
            }
        }
        SamplerProfiler {
            out: JsonLines::from_env(RECORDS_VAR),
            names: Arc::new(NameCache::new()),
            sampler: OnceLock::new(),
            shadow: OnceLock::new(),
            modules: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
            gate: ThreadGate::new(),
        }
    }
}

/// ELT hooks that only keep shadow stacks (the fallback's stack source).
pub struct ShadowHooks;

impl EltHooks for ShadowHooks {
    type Function = ();
    fn map_function(&self, _info: &ProfilerInfo, _function: FunctionId<'_>) -> Option<()> {
        Some(())
    }
    fn enter(&self, function: &Hooked<()>) {
        shadow_stack::enter(function);
    }
    fn leave(&self, function: &Hooked<()>) {
        shadow_stack::leave(function);
    }
    fn tailcall(&self, function: &Hooked<()>) {
        shadow_stack::tailcall(function);
    }
}

/// Whether to sample shadow stacks: asked for, or `SuspendRuntime` missing.
fn wants_shadow_stacks(info: &ProfilerInfo) -> bool {
    match std::env::var("CLRPROF_SAMPLER_SOURCE").as_deref() {
        Ok("shadow-stack") => true,
        Ok("suspend-runtime") => false,
        _ => {
            info.raw_info10("ICorProfilerInfo10::SuspendRuntime")
                .is_err()
                || info.raw_info4("ICorProfilerInfo4::EnumThreads").is_err()
        }
    }
}

fn rate() -> u32 {
    std::env::var("CLRPROF_SAMPLER_RATE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(1000)
}

impl SamplerProfiler {
    // ANCHOR: start
    fn start(&self, info: &ProfilerInfo) {
        self.try_async_walk(info);
        let config = SamplerConfig::at(rate());
        let started = if self.shadow.get().is_some() {
            Sampler::start_with_source(info, config, self.names.clone(), ShadowStackSource)
        } else {
            Sampler::start(info, config, self.names.clone())
        };
        match started {
            Ok(sampler) => {
                self.out
                    .record("sampling")
                    .str("method", sampler.method())
                    .num("rate_hz", u64::from(config.rate_hz))
                    .write();
                let _ = self.sampler.set(Arc::new(sampler));
            }
            Err(e) => {
                self.out
                    .record("sampling")
                    .str("method", "none")
                    .str("reason", &e.to_string())
                    .write();
            }
        }
        self.out.flush();
    }
    // ANCHOR_END: start

    /// What does an asynchronous walk of another thread (no runtime
    /// suspension) give? Off Windows, the SDK's clear error; recorded.
    fn try_async_walk(&self, info: &ProfilerInfo) {
        let me = info.current_thread_id().ok().map(|t| t.to_raw());
        let other = self
            .threads
            .lock()
            .ok()
            .and_then(|t| t.iter().copied().find(|t| Some(*t) != me));
        let Some(other) = other else {
            self.out
                .record("async-walk")
                .str("error", "no other thread")
                .write();
            return;
        };
        let Some(_entry) = self.gate.enter(1, other) else {
            return;
        };
        // SAFETY: ThreadCreated reported it and the gate entry keeps its
        // ThreadDestroyed from returning until this walk is over.
        let thread = unsafe { other.assume_valid() };
        let mut frames = 0u64;
        match info.walk_other_thread(thread, WalkOptions::default(), |_| {
            frames += 1;
            Walk::Continue
        }) {
            Ok(_) => self
                .out
                .record("async-walk")
                .bool("ok", true)
                .num("frames", frames)
                .write(),
            Err(e) => self
                .out
                .record("async-walk")
                .bool("ok", false)
                .str("error", &e.to_string())
                .write(),
        }
    }
}

impl Profiler for SamplerProfiler {
    // ANCHOR: initialize
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        let masks: EventMasks = (EventMask::ENABLE_STACK_SNAPSHOT
            | EventMask::MONITOR_THREADS
            | EventMask::MONITOR_CLASS_LOADS
            | EventMask::MONITOR_MODULE_LOADS)
            .into();
        if !wants_shadow_stacks(info) {
            return Ok(masks);
        }
        // ELT needs MONITOR_ENTERLEAVE, which only Initialize can set; the
        // exception callbacks keep the shadow stacks balanced on unwinds.
        let options = EltOptions::fast_path().with_exceptions();
        let (masks, runtime) = elt::install(info, Arc::new(ShadowHooks), options, masks)?;
        let _ = self.shadow.set(runtime);
        Ok(masks)
    }
    // ANCHOR_END: initialize

    fn module_load_finished(&self, info: &ProfilerInfo, _module: ModuleId<'_>, _status: HRESULT) {
        if self.modules.fetch_add(1, Ordering::SeqCst) == 1 {
            self.start(info);
        }
    }

    // ANCHOR: forward
    fn thread_created(&self, _info: &ProfilerInfo, thread: ThreadId<'_>) {
        self.gate.thread_created(thread.to_raw());
        if let Some(s) = self.sampler.get() {
            s.thread_created(thread);
        }
        if let Ok(mut t) = self.threads.lock() {
            t.push(thread.to_raw());
        }
    }

    fn thread_destroyed(&self, _info: &ProfilerInfo, thread: ThreadId<'_>) {
        if let Ok(mut t) = self.threads.lock() {
            t.retain(|x| *x != thread.to_raw());
        }
        self.gate.thread_destroyed(thread.to_raw());
        if let Some(s) = self.sampler.get() {
            s.thread_destroyed(thread);
        }
    }

    fn class_unload_started(&self, _info: &ProfilerInfo, class: ClassId<'_>) {
        if let Some(s) = self.sampler.get() {
            s.class_unload_started(class);
        }
    }
    fn exception_unwind_function_enter(&self, _info: &ProfilerInfo, function: FunctionId<'_>) {
        shadow_stack::unwind_function_enter(function.to_raw());
    }

    fn exception_unwind_function_leave(&self, _info: &ProfilerInfo) {
        shadow_stack::unwind_function_leave();
    }

    fn exception_catcher_enter(
        &self,
        _info: &ProfilerInfo,
        function: FunctionId<'_>,
        _exception: ObjectId<'_>,
    ) {
        shadow_stack::catcher_enter(function.to_raw());
    }
    // ANCHOR_END: forward

    // At shutdown, or at process exit when the runtime is not shut down. The
    // sampler's names were resolved while it sampled; stopping it joins its
    // thread, which at process exit may be stuck in a suspension that never
    // ends (or already gone, on Windows): wait a bounded time, then write
    // what is known.
    fn finish(&self) {
        if let Some(sampler) = self.sampler.get() {
            let stats = sampler.stats();
            let (tx, rx) = std::sync::mpsc::channel();
            let stopping = sampler.clone();
            let stopper = std::thread::Builder::new()
                .name("sampler-stop".into())
                .spawn(move || {
                    let _ = tx.send(stopping.stop());
                });
            let stopped = match stopper {
                Ok(_) => rx.recv_timeout(STOP_WAIT).unwrap_or_else(|_| {
                    Err(clrprof::Error::Usage(format!(
                        "the sampling thread did not stop within {} s",
                        STOP_WAIT.as_secs()
                    )))
                }),
                // Windows refuses new threads once the process is ending;
                // by then it has ended every other thread, the sampler's too.
                Err(e) => Err(clrprof::Error::Usage(format!(
                    "the sampling thread was ended by the system before the profiler finished (no new thread at process exit: {e}); its stacks are lost"
                ))),
            };
            match stopped {
                Ok(profile) => {
                    if let Some(path) = std::env::var_os("CLRPROF_OUTPUT") {
                        let mut folded = Vec::new();
                        let _ = profile.write_folded(&mut folded);
                        let _ = std::fs::write(&path, folded);
                        let mut ss = path.clone();
                        ss.push(".speedscope.json");
                        if let Ok(mut f) = std::fs::File::create(ss) {
                            let _ = profile.write_speedscope("clrprof sampler", &mut f);
                            let _ = f.flush();
                        }
                    }
                    self.out
                        .record("samples")
                        .str("method", sampler.method())
                        .num("samples", profile.samples())
                        .num("ticks", stats.ticks)
                        .num("threads", profile.threads() as u64)
                        .num("truncated", profile.truncated())
                        .num("empty", profile.empty())
                        .num("skipped", stats.skipped)
                        .num("failed_ticks", stats.failed_ticks)
                        .num("refused", stats.refused)
                        .str(
                            "first_refusal",
                            &sampler.first_refusal().unwrap_or_default(),
                        )
                        .str("last_error", &sampler.last_error().unwrap_or_default())
                        .write();
                }
                Err(e) => self
                    .out
                    .record("samples")
                    .str("error", &e.to_string())
                    .write(),
            }
        }
        self.out.flush();
    }
}
