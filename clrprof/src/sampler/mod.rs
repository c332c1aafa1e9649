//! A sampling profiler: stacks of every managed thread, many times a second.
//!
//! [`Sampler::start`] starts the SDK's sampling thread
//! ([`crate::stackwalk::spawn_sampling_thread`]). At each tick it
//!
//! 1. suspends the runtime (`ICorProfilerInfo10::SuspendRuntime`, .NET Core 3.0+),
//! 2. lists the managed threads and walks each into a preallocated
//!    [`FrameBuffer`] (no allocation, no lock: see the
//!    [stack-walk rules](crate::stackwalk)),
//! 3. resumes the runtime,
//! 4. and only then resolves the functions to names through the
//!    [`NameCache`] and counts each distinct stack, per thread.
//!
//! Stacks can also come from elsewhere (ELT shadow stacks on runtimes
//! without `SuspendRuntime`): [`Sampler::start_with_source`] takes any
//! [`StackSource`], and the SDK does steps 4 onwards the same way.
//!
//! The result is a [`Profile`], written as folded stacks
//! ([`Profile::write_folded`]: `root;...;leaf N`, one line per distinct
//! stack, the input of flame-graph tools such as `clrprof flamegraph`) or as
//! a speedscope file ([`Profile::write_speedscope`]).
//!
//! The profiler forwards three callbacks: [`Sampler::thread_created`],
//! [`Sampler::thread_destroyed`] (which waits until a running walk of that
//! thread is over) and [`Sampler::class_unload_started`] (which waits until
//! names being resolved are done, so no `FunctionID` of an unloading class
//! reaches the runtime). They take no lock: everything the sampler shares
//! with callbacks is atomic.

use crate::error::{Error, Result};
use crate::ids::{ClassId, RawFunctionId, ThreadId};
use crate::info::ProfilerInfo;
use crate::names::NameCache;
use crate::stackwalk::{
    spawn_sampling_thread, FrameBuffer, SamplingThread, ThreadGate, ThreadList,
};
use crate::thread::ProfilerThread;
use core::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod profile;
mod shadow;

pub use profile::Profile;
pub use shadow::ShadowStackSource;

/// Name used for a run of unmanaged frames.
pub const UNMANAGED_FRAME: &str = "[unmanaged]";
/// Name used for a function whose name could not be resolved.
pub const UNKNOWN_FRAME: &str = "[unknown]";

/// How the sampler samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplerConfig {
    /// Samples per second (per thread), at least 1.
    pub rate_hz: u32,
    /// Threads walked per tick; more are counted as skipped.
    pub max_threads: usize,
    /// Frames kept per stack (deeper stacks are cut and marked truncated).
    pub max_depth: usize,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            rate_hz: 100,
            max_threads: 256,
            max_depth: 256,
        }
    }
}

impl SamplerConfig {
    /// The default configuration at `rate_hz` samples per second.
    pub fn at(rate_hz: u32) -> Self {
        SamplerConfig {
            rate_hz: rate_hz.max(1),
            ..Default::default()
        }
    }

    fn period(&self) -> Duration {
        Duration::from_nanos(1_000_000_000 / u64::from(self.rate_hz.max(1)))
    }
}

/// Somewhere stacks come from, called once per tick on the sampling thread.
pub trait StackSource: Send + 'static {
    /// Fills `buffer` with one stack per thread (leaf first), allocating
    /// nothing while application threads are stopped. Returns how many threads
    /// were skipped.
    fn take(
        &mut self,
        thread: &mut SamplingThread,
        gate: &ThreadGate,
        buffer: &mut FrameBuffer,
    ) -> Result<Tick>;
    /// A short name for records (`suspend-runtime`, `shadow-stack`).
    fn method(&self) -> &'static str;
}

/// What one tick of a [`StackSource`] skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tick {
    /// Threads not sampled (destroyed, over the limits, or refused).
    pub skipped: u64,
    /// Threads the runtime refused to walk.
    pub refused: u64,
    /// The first refusal of the tick.
    pub refusal: Option<Error>,
}

/// The `SuspendRuntime` source: `SuspendRuntime`, `EnumThreads`, `DoStackSnapshot`
/// per thread, `ResumeRuntime`.
pub struct SuspendRuntimeSource {
    threads: ThreadList,
}

impl SuspendRuntimeSource {
    /// A source walking up to `max_threads` threads per tick.
    pub fn new(max_threads: usize) -> Self {
        SuspendRuntimeSource {
            threads: ThreadList::new(max_threads),
        }
    }
}

impl StackSource for SuspendRuntimeSource {
    fn take(
        &mut self,
        thread: &mut SamplingThread,
        gate: &ThreadGate,
        buffer: &mut FrameBuffer,
    ) -> Result<Tick> {
        let suspension = thread.suspend_runtime()?;
        suspension.enum_threads(&mut self.threads)?;
        let mut tick = Tick {
            skipped: self.threads.overflow as u64,
            ..Tick::default()
        };
        for i in 0..self.threads.len() {
            match suspension.sample_into(&self.threads, i, gate, buffer) {
                Ok(true) => {}
                Ok(false) => tick.skipped += 1,
                Err(e) => {
                    tick.skipped += 1;
                    tick.refused += 1;
                    if tick.refusal.is_none() {
                        tick.refusal = Some(e);
                    }
                }
            }
        }
        drop(suspension);
        Ok(tick)
    }

    fn method(&self) -> &'static str {
        "suspend-runtime"
    }
}

/// Counters of a running sampler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamplerStats {
    /// Ticks taken.
    pub ticks: u64,
    /// Stacks recorded.
    pub samples: u64,
    /// Threads that could not be walked (destroyed, refused, over the limit).
    pub skipped: u64,
    /// Ticks whose source failed (e.g. the suspension was refused).
    pub failed_ticks: u64,
    /// Thread walks the runtime refused (counted in `skipped` too).
    pub refused: u64,
}

struct Shared {
    gate: ThreadGate,
    stop: AtomicBool,
    ticks: AtomicU64,
    samples: AtomicU64,
    skipped: AtomicU64,
    failed_ticks: AtomicU64,
    refused: AtomicU64,
    /// The first walk the runtime refused (written by the sampling thread
    /// after resuming; read by `stop` callers).
    last_refusal: Mutex<Option<String>>,
    /// Bumped by every `ClassUnloadStarted`.
    unloads: AtomicU64,
    /// `true` while the sampler resolves names through the runtime.
    resolving: AtomicBool,
    last_error: Mutex<Option<String>>,
}

/// A running sampler. See the [module docs](self).
pub struct Sampler {
    shared: Arc<Shared>,
    method: &'static str,
    thread: Mutex<Option<ProfilerThread<Result<Result<Profile>>>>>,
}

impl Sampler {
    /// Starts sampling with `SuspendRuntime` (needs `Info10`, .NET Core 3.0+,
    /// and `Info4` for `EnumThreads`); on older runtimes returns
    /// [`Error::Unsupported`] without starting anything.
    ///
    /// The profiler must have enabled
    /// [`EventMask::ENABLE_STACK_SNAPSHOT`](crate::EventMask::ENABLE_STACK_SNAPSHOT)
    /// and [`EventMask::MONITOR_THREADS`](crate::EventMask::MONITOR_THREADS)
    /// (for `ThreadDestroyed`), and should enable `MONITOR_CLASS_LOADS` when
    /// classes can unload (collectible assemblies).
    pub fn start(
        info: &ProfilerInfo,
        config: SamplerConfig,
        names: Arc<NameCache>,
    ) -> Result<Sampler> {
        info.raw_info10("ICorProfilerInfo10::SuspendRuntime")?;
        info.raw_info4("ICorProfilerInfo4::EnumThreads")?;
        Self::start_with_source(
            info,
            config,
            names,
            SuspendRuntimeSource::new(config.max_threads),
        )
    }

    /// Starts sampling stacks from `source`.
    pub fn start_with_source<S: StackSource>(
        info: &ProfilerInfo,
        config: SamplerConfig,
        names: Arc<NameCache>,
        mut source: S,
    ) -> Result<Sampler> {
        let shared = Arc::new(Shared {
            gate: ThreadGate::new(),
            stop: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            failed_ticks: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            last_refusal: Mutex::new(None),
            unloads: AtomicU64::new(0),
            resolving: AtomicBool::new(false),
            last_error: Mutex::new(None),
        });
        let method = source.method();
        let theirs = shared.clone();
        let thread = spawn_sampling_thread(info, "clrprof-sampler", 0, move |thread| {
            run(thread, &theirs, config, &names, &mut source)
        })
        .map_err(|e| Error::Usage(format!("cannot start the sampling thread: {e}")))?;
        Ok(Sampler {
            shared,
            method,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Which source the sampler uses (`suspend-runtime`, `shadow-stack`, ...).
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// The counters so far.
    pub fn stats(&self) -> SamplerStats {
        let s = &self.shared;
        SamplerStats {
            ticks: s.ticks.load(Relaxed),
            samples: s.samples.load(Relaxed),
            skipped: s.skipped.load(Relaxed),
            failed_ticks: s.failed_ticks.load(Relaxed),
            refused: s.refused.load(Relaxed),
        }
    }

    /// The last error a tick hit, if any.
    pub fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// The first thread walk the runtime refused, if any (e.g. threads that
    /// are not in managed code cannot be walked on some runtimes).
    pub fn first_refusal(&self) -> Option<String> {
        self.shared.last_refusal.lock().ok().and_then(|e| e.clone())
    }

    /// Forward from `Profiler::thread_created`.
    pub fn thread_created(&self, thread: ThreadId<'_>) {
        self.shared.gate.thread_created(thread.to_raw());
    }

    /// Forward from `Profiler::thread_destroyed`: waits until a walk of
    /// `thread` in progress has finished, and keeps it from being walked again.
    pub fn thread_destroyed(&self, thread: ThreadId<'_>) {
        self.shared.gate.thread_destroyed(thread.to_raw());
    }

    /// Forward from `Profiler::class_unload_started`: waits until names being
    /// resolved are done; samples taken before the unload whose functions are
    /// not named yet stay unnamed ([`UNKNOWN_FRAME`]).
    pub fn class_unload_started(&self, _class: ClassId<'_>) {
        self.shared.unloads.fetch_add(1, SeqCst);
        while self.shared.resolving.load(SeqCst) {
            std::thread::yield_now();
        }
    }

    /// Stops sampling and returns the profile (once; later calls fail).
    pub fn stop(&self) -> Result<Profile> {
        self.shared.stop.store(true, SeqCst);
        let thread = self
            .thread
            .lock()
            .map_err(|_| Error::Usage("sampler state poisoned".to_string()))?
            .take()
            .ok_or_else(|| Error::Usage("the sampler was already stopped".to_string()))?;
        match thread.join() {
            Ok(Ok(Ok(profile))) => Ok(profile),
            Ok(Ok(Err(e))) | Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Usage(
                "the sampling thread panicked (see the log)".to_string(),
            )),
        }
    }
}

fn run<S: StackSource>(
    thread: &mut SamplingThread,
    shared: &Shared,
    config: SamplerConfig,
    names: &NameCache,
    source: &mut S,
) -> Result<Profile> {
    let mut buffer = FrameBuffer::new(config.max_threads, config.max_depth);
    let mut profile = Profile::new();
    let mut stack: Vec<u32> = Vec::with_capacity(config.max_depth);
    let mut local: HashMap<RawFunctionId, u32> = HashMap::new();
    let period = config.period();
    let mut next = Instant::now();
    while !shared.stop.load(SeqCst) {
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            // Behind (a long suspension): do not try to catch up in a burst.
            next = now;
        }
        if shared.stop.load(SeqCst) {
            break;
        }
        buffer.clear();
        let unloads_before = shared.unloads.load(SeqCst);
        shared.ticks.fetch_add(1, Relaxed);
        match source.take(thread, &shared.gate, &mut buffer) {
            Ok(tick) => {
                shared.skipped.fetch_add(tick.skipped, Relaxed);
                shared.refused.fetch_add(tick.refused, Relaxed);
                if let Some(e) = tick.refusal {
                    if let Ok(mut last) = shared.last_refusal.lock() {
                        if last.is_none() {
                            *last = Some(e.to_string());
                        }
                    }
                }
            }
            Err(e) => {
                shared.failed_ticks.fetch_add(1, Relaxed);
                if let Ok(mut last) = shared.last_error.lock() {
                    *last = Some(e.to_string());
                }
                continue;
            }
        }
        // The runtime runs again: resolve names and count.
        shared.resolving.store(true, SeqCst);
        let may_call_runtime = shared.unloads.load(SeqCst) == unloads_before;
        for sample in buffer.samples() {
            stack.clear();
            for &f in buffer.frames(sample).iter().rev() {
                let index = match local.get(&f) {
                    Some(&i) => i,
                    None => {
                        let (name, final_name) =
                            frame_name(thread.info(), names, f, may_call_runtime);
                        let i = profile.intern(&name);
                        if final_name {
                            local.insert(f, i);
                        }
                        i
                    }
                };
                stack.push(index);
            }
            profile.add(sample.thread, &stack, sample.truncated);
            shared.samples.fetch_add(1, Relaxed);
        }
        shared.resolving.store(false, SeqCst);
    }
    Ok(profile)
}

/// The name of a sampled function, and whether it is final (cacheable).
fn frame_name(
    info: &ProfilerInfo,
    names: &NameCache,
    f: RawFunctionId,
    may_call_runtime: bool,
) -> (std::sync::Arc<str>, bool) {
    if f.0 == 0 {
        return (UNMANAGED_FRAME.into(), true);
    }
    if let Some(n) = names.cached_function_name(f) {
        return (n, true);
    }
    if !may_call_runtime {
        return (UNKNOWN_FRAME.into(), false);
    }
    // SAFETY: the function had a frame on a thread's stack at this tick, so
    // its class was loaded then; no ClassUnloadStarted has begun since (the
    // unload counter is unchanged, and any later one waits for `resolving`),
    // so the FunctionID is still valid.
    let id = unsafe { f.assume_valid() };
    match names.function_name(info, id) {
        Ok(n) if !n.is_empty() => (n, true),
        _ => (UNKNOWN_FRAME.into(), true),
    }
}
