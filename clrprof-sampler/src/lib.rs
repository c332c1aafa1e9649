//! A sampling profiler: stacks of every managed thread, many times a second.
//!
//! Two sources take the stacks ([`SourceChoice`]):
//!
//! - **Signals** (the default on Linux, x86-64 and aarch64;
//!   [`signal::SignalSource`]): nothing is stopped. Each thread's own
//!   CPU-time timer interrupts it with `SIGPROF` once per period of *its*
//!   CPU time, and the SDK's handler takes its stack by frame pointers on
//!   the thread itself; each tick also asks a bounded number of threads in
//!   turn for a wall-time sample. A thread that waits costs nothing. See
//!   [`clrprof::stackwalk::signals`] for the handler's rules and
//!   [`signal`] for the weights.
//! - **The runtime's suspension** (Windows, and the fallback; the
//!   [`SuspendRuntimeSource`]): at each tick the sampling thread
//!
//! 1. suspends the runtime (`ICorProfilerInfo10::SuspendRuntime`, .NET Core 3.0+),
//! 2. lists the managed threads and walks each into a preallocated
//!    [`FrameBuffer`] (no allocation, no lock: see the
//!    [stack-walk rules](clrprof::stackwalk)),
//! 3. resumes the runtime,
//! 4. and only then resolves the functions to names through the
//!    [`NameCache`] and counts each distinct stack, per thread.
//!
//! Either way the sampling thread names the frames after the stacks were
//! taken, under the [`UnloadFence`], and counts them the same way.
//! [`Sampler::method`] and [`Sampler::method_reason`] say which source runs
//! and why (e.g. why the signal source fell back to the suspension).
//!
//! One suspension serves every thread of a tick. Each distinct `FunctionID`
//! is named once, the first time it is seen (after the resume); later frames
//! cost one hash lookup, and counting a stack seen before allocates nothing.
//!
//! # What a tick costs
//!
//! [`SamplerStats::phases`] adds up where the sampling thread's time goes
//! ([`SamplerPhases`]) and [`SamplerStats::thread_cpu_ns`] its CPU time.
//! Measured on Linux with .NET 8 (`benches/README.md`, sampler section):
//! the suspension (about 50 µs per tick on a 2-core machine whose two cores
//! run application threads) and the resume (about 10 µs) are nearly all of
//! it: the runtime signals every thread running managed code, waits until
//! each reaches a safe point, and wakes them again, which is kernel work
//! (signals, context switches, an inter-processor interrupt to flush write
//! buffers) in the sampling thread and in the application's threads. The
//! walks take a few µs per tick; naming and counting well under one.
//!
//! # CPU time
//!
//! With the signal source, CPU time is what the threads' CPU-time timers
//! sample: each sample stands for the timer's interval times one plus its
//! overruns, so a thread's total is its CPU time to within one interval
//! (the kernel checks CPU timers at its scheduler tick, 4 ms at Debian's
//! 250 Hz: at 1 kHz a running thread is sampled about 250 times a second,
//! each sample weighing its overruns). What follows is the suspension
//! source's way.
//!
//! Wall time is what the sample counts measure: every managed thread is
//! walked at every tick, running or blocked. Beside it the sampler keeps a
//! CPU profile ([`Profile::cpu_stacks`], the `cpu`/`nanoseconds` column of
//! the pprof output): at each tick, after resuming the runtime, it reads the
//! CPU-time clock of each sampled thread's OS thread and adds what the
//! thread used since the tick before to the stack it was just seen in. A
//! sleeping or blocked thread uses nothing and costs nothing; a spinning one
//! costs its CPU. The OS thread of a managed thread comes from
//! `ThreadAssignedToOSThread` (the kernel thread ID on Linux, the Win32
//! thread ID on Windows), which the SDK delivers to the sampler.
//!
//! How accurate it is, and why:
//!
//! - **Per thread, the total is the OS's own account.** On Linux the clock
//!   is the scheduler's runtime of the thread (`clock_gettime` on the
//!   thread's CPU clock), to the nanosecond and current to the moment of the
//!   read, also for a thread running at that moment. On Windows it is
//!   `GetThreadTimes`, which the kernel advances at clock interrupts (every
//!   15.6 ms by default) by a whole interrupt period for the thread it finds
//!   running: over one 10 ms tick a thread gets 0 or 15.6 ms, and only sums
//!   over many ticks are right.
//! - **Per stack, it is a sample.** All the CPU time of one interval goes to
//!   the stack seen at its end, so the split between a thread's methods is
//!   as exact as the wall-time split (its error shrinks with the number of
//!   ticks), not exact per interval.
//! - **What is not counted**: the interval before a thread's first sample
//!   (no earlier reading), threads the sampler could not walk at a tick
//!   (their time goes to their next sample), threads without
//!   `ThreadAssignedToOSThread` (those that existed before an attach), and
//!   the sampling thread's own CPU (in [`SamplerStats::thread_cpu_ns`]).
//!   Platforms other than Linux and Windows have no CPU column.
//!
//! Measured (the `cpuwall` test app, one thread spinning and one sleeping
//! for 2 s, 100 Hz, .NET 8 on Linux): the spinner 1910 ms CPU in 2000 ms
//! wall, the sleeper 1.8 ms CPU in 2010 ms wall; .NET Core 3.1, 1873 ms and
//! 0.9 ms. Under Wine the spinner got 1480 ms (3.1) and 610 ms (8.0) of
//! 2 s on a shared machine, the sleeper 0.
//!
//! # Which source, and why two
//!
//! The suspension stops every managed thread at a safe point at every
//! tick, running or not: its cost grows with the threads (measured beside
//! idle threads, `cargo xtask bench sampler --idle`), and the samples land
//! where the runtime stopped the threads (a GC poll, a loop's back edge),
//! not where they were running (safepoint bias: the runtime's
//! `Thread::<PollGC>g__PollGCWorker` as the leaf of a fifth of a
//! compiler's running samples). Its walks are the runtime's own, exact to
//! the inlined frame, and it works wherever `SuspendRuntime` does. The
//! signal source stops nothing, costs only the threads that run, and sees
//! the threads where they are; its stacks are frame-pointer walks, checked
//! word by word, named through the SDK's code map
//! ([`clrprof::stackwalk::CodeMap`]). It falls back to the suspension where
//! it cannot start (another handler of `SIGPROF`, another runtime of the
//! process sampling with signals), when another component replaces its
//! handler, and after an attach (code compiled before it is in no code map).
//!
//! Stacks can also come from elsewhere (ELT shadow stacks on runtimes
//! without `SuspendRuntime`): [`Sampler::register_with_source`] takes any
//! [`StackSource`], and the SDK does steps 4 onwards the same way.
//!
//! The result is a [`Profile`], written as folded stacks
//! ([`Profile::write_folded`]: `root;...;leaf N`, one line per distinct
//! stack, the input of flame-graph tools such as `clrprof flamegraph`) or as
//! a speedscope file ([`Profile::write_speedscope`]) or as pprof
//! ([`Profile::write_pprof`], see [`pprof`]). In [continuous]
//! mode the profile is cut into periods and each one written or sent while
//! the process runs.
//!
//! The sampler is an SDK component ([`clrprof::component`]): the profiler
//! registers it in `Initialize` ([`Sampler::register`]) and the SDK delivers
//! the callbacks it needs, from the first one on: `ThreadCreated` and
//! `ThreadDestroyed` (which waits until a running walk of that thread is
//! over, through a [`ThreadGate`]), `ClassUnloadStarted`,
//! `ModuleUnloadStarted` and `DynamicMethodUnloaded` (which wait until names
//! being resolved are done, so no `FunctionID` of something unloading
//! reaches the runtime, and make the sampler forget a dynamic method's
//! recycled ID), and the module loads or `ProfilerAttachComplete` at which
//! it starts. The profiler writes no forwarding code. Everything the
//! sampler shares with those callbacks is atomic, except the short list of
//! unloaded dynamic methods, whose lock the sampling thread never holds
//! while the runtime is suspended.

use clrprof::error::{Error, Result};
use clrprof::event_mask::{EventMask, HighEventMask};
use clrprof::ids::{RawFunctionId, RawThreadId, ThreadId};
use clrprof::info::{ProfilerInfo, RuntimeHandle};
use clrprof::names::NameCache;
use clrprof::stackwalk::{
    spawn_sampling_thread, FrameBuffer, FrameName, SampleKind, SamplingThread, ThreadGate,
    ThreadList, UnloadFence,
};
use clrprof::thread::ProfilerThread;
use core::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod budget;
pub mod continuous;
mod cpu;
pub mod event_upload;
pub mod events;
pub mod heap_snapshot;
mod interner;
pub mod kinds;
pub mod labels;
pub mod live_heap;
pub mod otlp;
pub mod pprof;
mod pprof_rows;
mod profile;
mod shadow;
pub mod signal;
mod stacks;
mod upload;

pub use continuous::{
    Continuous, ContinuousConfig, ContinuousStats, Period, PeriodObserver, PeriodSink,
    UploadOptions,
};
pub use profile::{Profile, NOT_WALL};
pub use shadow::ShadowStackSource;

pub use clrprof::stackwalk::{UNKNOWN_FRAME, UNMANAGED_FRAME};

/// How the sampler samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplerConfig {
    /// Samples per second (per thread), at least 1.
    pub rate_hz: u32,
    /// Threads walked per tick; more are counted as skipped.
    pub max_threads: usize,
    /// Frames kept per stack (deeper stacks are cut and marked truncated).
    pub max_depth: usize,
    /// Sampling starts at this successful module load (1 = the first,
    /// `System.Private.CoreLib`); by the second the runtime runs the
    /// application's startup. Ignored after an attach (sampling starts at
    /// `ProfilerAttachComplete`).
    pub start_after_module_loads: usize,
    /// Where stacks come from ([`Sampler::register`]).
    pub source: SourceChoice,
    /// With the signal source: threads asked for a wall-time sample per
    /// tick, in turn (0: no wall profile). Each sample's weight is corrected
    /// for the threads not asked.
    pub wall_threads_per_tick: usize,
}

/// Which stack source [`Sampler::register`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SourceChoice {
    /// Signals where the platform has them (Linux on x86-64 and aarch64),
    /// the runtime's suspension elsewhere (Windows), where signals cannot
    /// start, and after an attach (the code compiled before it is in no
    /// code map).
    #[default]
    Auto,
    /// Signals ([`signal::SignalSource`]), where the platform has them
    /// (Linux, x86-64 and aarch64), with the suspension as the fallback.
    Signals,
    /// The runtime's suspension (`SuspendRuntime` and `DoStackSnapshot`).
    SuspendRuntime,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            rate_hz: 100,
            max_threads: 256,
            max_depth: 256,
            start_after_module_loads: 2,
            source: SourceChoice::Auto,
            wall_threads_per_tick: 5,
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
    /// A short name for records (`suspend-runtime`, `shadow-stack`,
    /// `signals`): the source that takes stacks now.
    fn method(&self) -> &'static str;
    /// Why the source samples the way it does (e.g. why it fell back), if
    /// it says.
    fn reason(&self) -> Option<String> {
        None
    }
    /// Called once when sampling starts, before the sampling thread runs
    /// (e.g. to install a signal handler); an error stops the sampler.
    fn prepare(&mut self) -> Result<()> {
        Ok(())
    }
    /// Called inside each tick's [`UnloadFence::resolve`], before the
    /// frames are named (the signal source looks up code there).
    fn resolving(&mut self, namer: &clrprof::stackwalk::FrameNamer<'_>) {
        let _ = namer;
    }
    /// Called once when sampling ends, on the sampling thread.
    fn finish(&mut self) {}
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
    /// Where the tick's time went, for sources that measure it (zero
    /// otherwise); added up in [`SamplerStats::phases`].
    pub phases: SamplerPhases,
    /// What the signal source did this tick, when it ran.
    pub signal: Option<clrprof::stackwalk::SignalTick>,
    /// Set when the source changed its method this tick (why).
    pub switched: Option<String>,
    /// When the stacks were taken (the `SuspendRuntime` source: once every
    /// managed thread stood still), where the source knows; else the time
    /// the sampler counts them at. Each sample's time in OTLP profiles.
    pub taken_at: Option<std::time::SystemTime>,
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
        let t0 = Instant::now();
        let suspension = thread.suspend_runtime()?;
        let t1 = Instant::now();
        // A vDSO clock read: no lock, no allocation (rule 5).
        let taken_at = std::time::SystemTime::now();
        suspension.enum_threads(&mut self.threads)?;
        let mut tick = Tick {
            skipped: self.threads.overflow as u64,
            taken_at: Some(taken_at),
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
        let t2 = Instant::now();
        drop(suspension);
        let t3 = Instant::now();
        tick.phases.suspend_ns = nanos(t1 - t0);
        tick.phases.walk_ns = nanos(t2 - t1);
        tick.phases.resume_ns = nanos(t3 - t2);
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
    /// Stacks recorded as samples of wall time (every stack of the
    /// suspension source; the wall-time samples of the signal source, whose
    /// CPU-time samples are in [`SignalCounters::cpu_samples`]): the
    /// profile's sample count.
    pub samples: u64,
    /// Threads that could not be walked (destroyed, refused, over the limit).
    pub skipped: u64,
    /// Ticks whose source failed (e.g. the suspension was refused).
    pub failed_ticks: u64,
    /// Thread walks the runtime refused (counted in `skipped` too).
    pub refused: u64,
    /// Where the sampling thread's time went, in nanoseconds summed over
    /// all ticks (divide by `ticks` for the cost of one).
    pub phases: SamplerPhases,
    /// CPU time the sampling thread has used so far, in nanoseconds (its
    /// own, including the runtime's work on it inside `SuspendRuntime` and
    /// the walks; read every 16 ticks and when it stops). 0 where the
    /// platform does not tell (only Unix does here).
    pub thread_cpu_ns: u64,
    /// Signal source: what its ticks did, summed.
    pub signal: SignalCounters,
}

/// What the signal source's ticks did, summed ([`SamplerStats::signal`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalCounters {
    /// CPU-time samples (a thread's timer fired).
    pub cpu_samples: u64,
    /// Wall-time samples (asked for by the sampling thread).
    pub wall_samples: u64,
    /// Samples dropped because an unload began after they were taken.
    pub unload_dropped: u64,
    /// Frames placed by the code map.
    pub placed_by_map: u64,
    /// Leaf frames placed by the runtime (`GetFunctionFromIP`).
    pub placed_by_runtime: u64,
    /// Frames in native modules.
    pub native_frames: u64,
    /// Frames nothing could place (named `[unplaced]`).
    pub unplaced_frames: u64,
    /// Wall-time requests sent.
    pub signalled: u64,
    /// Wall-time samples of threads still blocked where their last one was
    /// taken (counted again without a signal).
    pub wall_reused: u64,
    /// Timers made.
    pub timers_made: u64,
    /// Stacks that did not fit in the tick's buffer.
    pub buffer_full: u64,
}

impl SignalCounters {
    fn add(&mut self, t: &clrprof::stackwalk::SignalTick) {
        self.cpu_samples += t.cpu_samples;
        self.wall_samples += t.wall_samples;
        self.unload_dropped += t.unload_dropped;
        self.placed_by_map += t.placed_by_map;
        self.placed_by_runtime += t.placed_by_runtime;
        self.native_frames += t.native;
        self.unplaced_frames += t.unplaced;
        self.signalled += t.signalled;
        self.wall_reused += t.wall_reused;
        self.timers_made += t.timers_made;
        self.buffer_full += t.buffer_full;
    }
}

/// CPU time of the calling thread, in nanoseconds, where the platform tells.
fn thread_cpu_ns() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: [os-api] a valid out pointer; CLOCK_THREAD_CPUTIME_ID is a clock of
        // the calling thread (POSIX), no other memory is touched.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
            return Some((t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64);
        }
    }
    None
}

/// Time spent in each phase of a tick, in nanoseconds (summed over ticks in
/// [`SamplerStats::phases`]). Measured with the monotonic clock at the
/// phase boundaries; a few clock reads per tick, always on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamplerPhases {
    /// How much later than its due time the sampling thread woke up (timer
    /// slack and scheduling delay; a busy machine makes it large).
    pub late_ns: u64,
    /// `SuspendRuntime`: until every managed thread stopped at a safe point.
    pub suspend_ns: u64,
    /// `EnumThreads` and the walks, with the runtime suspended.
    pub walk_ns: u64,
    /// `ResumeRuntime`.
    pub resume_ns: u64,
    /// After resuming: naming new functions and counting the stacks.
    pub count_ns: u64,
}

/// A duration in nanoseconds, saturating.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// [`SamplerPhases`] as shared counters.
#[derive(Default)]
struct PhaseCounters {
    late_ns: AtomicU64,
    suspend_ns: AtomicU64,
    walk_ns: AtomicU64,
    resume_ns: AtomicU64,
    count_ns: AtomicU64,
}

impl PhaseCounters {
    fn add(&self, p: &SamplerPhases) {
        self.late_ns.fetch_add(p.late_ns, Relaxed);
        self.suspend_ns.fetch_add(p.suspend_ns, Relaxed);
        self.walk_ns.fetch_add(p.walk_ns, Relaxed);
        self.resume_ns.fetch_add(p.resume_ns, Relaxed);
        self.count_ns.fetch_add(p.count_ns, Relaxed);
    }

    fn get(&self) -> SamplerPhases {
        SamplerPhases {
            late_ns: self.late_ns.load(Relaxed),
            suspend_ns: self.suspend_ns.load(Relaxed),
            walk_ns: self.walk_ns.load(Relaxed),
            resume_ns: self.resume_ns.load(Relaxed),
            count_ns: self.count_ns.load(Relaxed),
        }
    }
}

type SamplingResult = Result<Result<()>>;

struct Shared {
    runtime: RuntimeHandle,
    config: SamplerConfig,
    names: Arc<NameCache>,
    /// The source's method now, and why.
    method: Mutex<(&'static str, Option<String>)>,
    /// Summed signal-source counters.
    signal: Mutex<SignalCounters>,
    gate: Arc<ThreadGate>,
    /// Keeps each tick's frames nameable until they are named.
    fence: Arc<UnloadFence>,
    stop: AtomicBool,
    ticks: AtomicU64,
    samples: AtomicU64,
    skipped: AtomicU64,
    failed_ticks: AtomicU64,
    refused: AtomicU64,
    phases: PhaseCounters,
    thread_cpu_ns: AtomicU64,
    /// The first walk the runtime refused (written by the sampling thread
    /// after resuming; read by `stop` callers).
    last_refusal: Mutex<Option<String>>,
    last_error: Mutex<Option<String>>,
    /// The OS thread of each managed thread (`ThreadAssignedToOSThread`),
    /// whose CPU-time clock weighs its samples in the CPU profile.
    os_threads: Mutex<HashMap<RawThreadId, u32>>,
    /// Successful module loads seen (the start trigger).
    module_loads: AtomicUsize,
    /// The stack source, until the thread starts and takes it.
    source: Mutex<Option<Box<dyn StackSource>>>,
    thread: Mutex<Option<ProfilerThread<SamplingResult>>>,
    /// The profile so far: the sampling thread adds each tick's stacks
    /// after resuming the runtime (never while threads are suspended), so it
    /// stays reachable even if the thread never finishes (process exit).
    profile: Mutex<Profile>,
    /// How the sampling ended, once it has been stopped.
    result: Mutex<Option<Result<()>>>,
}

/// A sampler registered with one runtime. See the [module docs](self).
pub struct Sampler {
    shared: Arc<Shared>,
}

impl Sampler {
    // provenance: name-cache-runtime
    /// Registers a sampler that suspends the runtime (`SuspendRuntime`, needs
    /// `Info10`, .NET Core 3.0+, and `Info4` for `EnumThreads`); on older
    /// runtimes returns [`Error::Unsupported`] without registering anything.
    /// Call it from `Initialize` (or `InitializeForAttach`); the SDK adds
    /// `ENABLE_STACK_SNAPSHOT`, `MONITOR_THREADS`, `MONITOR_CLASS_LOADS`,
    /// `MONITOR_MODULE_LOADS` (and on Info10 runtimes
    /// `HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS`) to the event mask.
    ///
    /// Sampling starts by itself at the
    /// [`start_after_module_loads`](SamplerConfig::start_after_module_loads)-th
    /// module load (the runtime is up by then), or at
    /// `ProfilerAttachComplete` after an attach; [`Sampler::start`] starts it
    /// earlier.
    pub fn register(
        info: &ProfilerInfo,
        config: SamplerConfig,
        names: Arc<NameCache>,
    ) -> Result<Arc<Sampler>> {
        let suspension = || -> Result<SuspendRuntimeSource> {
            for (needs, call) in [
                (10, "ICorProfilerInfo10::SuspendRuntime"),
                (4, "ICorProfilerInfo4::EnumThreads"),
            ] {
                if !info.has_info(needs) {
                    return Err(Error::Unsupported {
                        needs,
                        has: info.version(),
                        call,
                    });
                }
            }
            Ok(SuspendRuntimeSource::new(config.max_threads))
        };
        // After an attach the code compiled before it is in no code map:
        // the suspension names every frame there, so Auto takes it.
        let signals = match config.source {
            SourceChoice::Signals => true,
            SourceChoice::Auto => {
                clrprof::stackwalk::SignalSampling::supported().is_ok() && !info.is_attached()
            }
            SourceChoice::SuspendRuntime => false,
        };
        if signals {
            if let Err(why) = clrprof::stackwalk::SignalSampling::supported() {
                // The suspension, and the record says why not signals.
                let sampler = Self::register_with_source(info, config, names, suspension()?)?;
                *lock(&sampler.shared.method) = (
                    "suspend-runtime",
                    Some(format!("{why}; the runtime's suspension samples instead")),
                );
                return Ok(sampler);
            }
            let fence = UnloadFence::register(info)?;
            let signals = clrprof::stackwalk::SignalSampling::register(
                info,
                &fence,
                clrprof::stackwalk::SignalConfig {
                    cpu_period: Some(config.period()),
                    wall_threads_per_tick: config.wall_threads_per_tick,
                    max_depth: config.max_depth,
                    ..Default::default()
                },
            )?;
            let source = signal::SignalSource::new(signals, config.period(), suspension().ok());
            return Self::register_parts(info, config, names, fence, source);
        }
        Self::register_with_source(info, config, names, suspension()?)
    }

    // provenance: name-cache-runtime
    /// Registers a sampler taking stacks from `source`. `names` is
    /// registered with the runtime too, if it is not yet.
    pub fn register_with_source<S: StackSource>(
        info: &ProfilerInfo,
        config: SamplerConfig,
        names: Arc<NameCache>,
        source: S,
    ) -> Result<Arc<Sampler>> {
        let fence = UnloadFence::register(info)?;
        Self::register_parts(info, config, names, fence, source)
    }

    fn register_parts<S: StackSource>(
        info: &ProfilerInfo,
        config: SamplerConfig,
        names: Arc<NameCache>,
        fence: Arc<UnloadFence>,
        source: S,
    ) -> Result<Arc<Sampler>> {
        names.register(info)?;
        let mut profile = Profile::new();
        let runtime = info.runtime_information().ok().map(|r| r.version());
        profile.set_origin(
            runtime.as_deref(),
            u64::try_from(config.period().as_nanos()).unwrap_or(u64::MAX),
        );
        profile.set_cpu_measured(cfg!(any(target_os = "linux", windows)));
        let shared = Arc::new(Shared {
            runtime: info.handle(),
            config,
            names,
            method: Mutex::new((source.method(), source.reason())),
            signal: Mutex::new(SignalCounters::default()),
            gate: ThreadGate::register(info)?,
            fence,
            stop: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            failed_ticks: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            phases: PhaseCounters::default(),
            thread_cpu_ns: AtomicU64::new(0),
            last_refusal: Mutex::new(None),
            last_error: Mutex::new(None),
            os_threads: Mutex::new(HashMap::new()),
            module_loads: AtomicUsize::new(0),
            source: Mutex::new(Some(Box::new(source))),
            thread: Mutex::new(None),
            profile: Mutex::new(profile),
            result: Mutex::new(None),
        });
        info.register(Arc::new(SamplerComponent {
            shared: shared.clone(),
        }))?;
        Ok(Arc::new(Sampler { shared }))
    }

    /// Starts sampling now, if it has not started yet (and was not stopped).
    /// Fails if the sampling thread cannot be started.
    pub fn start(&self) -> Result<()> {
        self.shared.start()
    }

    /// `true` once the sampling thread runs (until [`stop`](Self::stop)).
    pub fn is_running(&self) -> bool {
        lock(&self.shared.thread).is_some()
    }

    /// Which source the sampler uses now (`signals`, `suspend-runtime`,
    /// `shadow-stack`, ...).
    pub fn method(&self) -> &'static str {
        lock(&self.shared.method).0
    }

    /// Why the sampler uses that source, when the source says (e.g. why
    /// the signal source fell back to the suspension).
    pub fn method_reason(&self) -> Option<String> {
        lock(&self.shared.method).1.clone()
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
            phases: s.phases.get(),
            thread_cpu_ns: s.thread_cpu_ns.load(Relaxed),
            signal: *lock(&s.signal),
        }
    }

    /// The last error a tick hit, if any.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.shared.last_error).clone()
    }

    /// The first thread walk the runtime refused, if any (e.g. threads that
    /// are not in managed code cannot be walked on some runtimes).
    pub fn first_refusal(&self) -> Option<String> {
        lock(&self.shared.last_refusal).clone()
    }

    /// Stops sampling and returns the profile. The first call stops the
    /// thread, waiting at most [`EXIT_WAIT`](clrprof::exit::EXIT_WAIT) for it
    /// (at process exit it may be stuck, or already ended by the system);
    /// the profile holds every tick completed before. Later calls (and the
    /// SDK's own stop at `Shutdown`) return the same profile. A sampler that
    /// never started gives an empty one.
    pub fn stop(&self) -> Result<Profile> {
        self.shared.stop()
    }

    /// Keeps the time of every sample (and the CPU time each got) beside the
    /// counts, from the next tick on: what an OTLP export's per-sample
    /// timestamps need ([`crate::otlp`]).
    pub fn keep_sample_times(&self, keep: bool) {
        lock(&self.shared.profile).set_keep_times(keep);
    }

    /// Ends the current period: returns the profile sampled since the last
    /// call (or since sampling started) and goes on with an empty one, which
    /// keeps only the frame names (see [`Profile::take_period`]). The
    /// [continuous mode](continuous) calls it every period; after it,
    /// [`stop`](Self::stop) returns only what came later. Waits for the
    /// profile lock at most [`EXIT_WAIT`](clrprof::exit::EXIT_WAIT).
    pub fn take_period(&self) -> Result<Profile> {
        let deadline = Instant::now() + clrprof::exit::EXIT_WAIT;
        match clrprof::exit::lock_until(&self.shared.profile, deadline) {
            Some(mut p) => Ok(p.take_period(std::time::SystemTime::now())),
            None => Err(Error::Usage(
                "the sampling thread holds the profile (ended by the system, or stuck at process exit)".into(),
            )),
        }
    }
}

/// Locks a mutex, recovering from poisoning (the data is plain counters
/// and messages, valid whatever panicked).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn start(self: &Arc<Self>) -> Result<()> {
        let Some(mut source) = lock(&self.source).take() else {
            return Ok(()); // started (or stopped) already
        };
        source.prepare()?;
        let method = (source.method(), source.reason());
        *lock(&self.method) = method;
        let theirs = self.clone();
        let thread = spawn_sampling_thread(&self.runtime, "clrprof-sampler", 0, move |thread| {
            run(thread, &theirs, &mut *source)
        })
        .map_err(|e| Error::Usage(format!("cannot start the sampling thread: {e}")))?;
        *lock(&self.thread) = Some(thread);
        Ok(())
    }

    fn stop(&self) -> Result<Profile> {
        self.stop.store(true, SeqCst);
        // Never started: nothing to join, and nothing may start any more.
        lock(&self.source).take();
        let deadline = std::time::Instant::now() + clrprof::exit::EXIT_WAIT;
        let Some(mut result) = clrprof::exit::lock_until(&self.result, deadline) else {
            return Err(Error::Usage(
                "another stop of the sampler is still waiting".into(),
            ));
        };
        if result.is_none() {
            let thread = lock(&self.thread).take();
            *result = Some(match thread {
                None => Ok(()),
                Some(thread) => match thread.join_timeout(clrprof::exit::EXIT_WAIT) {
                    Ok(Ok(Ok(Ok(())))) => Ok(()),
                    // The runtime shut down (Environment.Exit soon after
                    // startup) before the sampling thread made its first
                    // call: it took no tick, and the empty profile is the
                    // whole truth, not a failure.
                    Ok(Ok(Err(e)))
                        if e.is(clrprof::error::KnownHresult::CORPROF_E_PROFILER_DETACHING) =>
                    {
                        Ok(())
                    }
                    Ok(Ok(Ok(Err(e)))) | Ok(Ok(Err(e))) => Err(e),
                    Ok(Err(_)) => Err(Error::Usage(
                        "the sampling thread panicked (see the log)".to_string(),
                    )),
                    Err(_) => Err(Error::Usage(format!(
                        "the sampling thread did not stop within {} s (ended by the system, or \
                         stuck at process exit); the profile holds the ticks before",
                        clrprof::exit::EXIT_WAIT.as_secs()
                    ))),
                },
            });
        }
        let outcome = result.clone().unwrap_or(Ok(()));
        drop(result);
        match clrprof::exit::lock_until(&self.profile, deadline) {
            Some(profile) => match outcome {
                // A thread that did not stop in time still leaves its profile.
                Ok(()) | Err(Error::Usage(_)) => Ok(profile.clone()),
                Err(e) => Err(e),
            },
            None => outcome.and(Err(Error::Usage(
                "the sampling thread holds the profile (ended by the system, or stuck at process exit)".into(),
            ))),
        }
    }
}

/// The SDK component behind [`Sampler::register`].
struct SamplerComponent {
    shared: Arc<Shared>,
}

impl clrprof::component::Component for SamplerComponent {
    fn name(&self) -> &'static str {
        "sampler"
    }

    fn masks(&self) -> clrprof::event_mask::EventMasks {
        clrprof::event_mask::EventMasks {
            low: EventMask::ENABLE_STACK_SNAPSHOT
                | EventMask::MONITOR_THREADS
                | EventMask::MONITOR_MODULE_LOADS,
            high: HighEventMask::empty(),
        }
    }

    fn thread_destroyed(&self, _info: &ProfilerInfo, thread: ThreadId<'_>) {
        lock(&self.shared.os_threads).remove(&thread.to_raw());
    }

    fn thread_assigned_to_os_thread(
        &self,
        _info: &ProfilerInfo,
        thread: ThreadId<'_>,
        os_thread_id: u32,
    ) {
        lock(&self.shared.os_threads).insert(thread.to_raw(), os_thread_id);
    }

    fn thread_name_changed(
        &self,
        _info: &ProfilerInfo,
        thread: ThreadId<'_>,
        name: clrprof::WideStr<'_>,
    ) {
        lock(&self.shared.profile).set_thread_name(thread.to_raw(), &name.to_string());
    }

    fn module_load_finished(&self, _info: &ProfilerInfo, _module: clrprof::ids::ModuleId<'_>) {
        let n = self.shared.module_loads.fetch_add(1, SeqCst) + 1;
        if n == self.shared.config.start_after_module_loads.max(1) {
            if let Err(e) = self.shared.start() {
                *lock(&self.shared.last_error) = Some(e.to_string());
            }
        }
    }

    fn profiler_attach_complete(&self, _info: &ProfilerInfo) {
        if let Err(e) = self.shared.start() {
            *lock(&self.shared.last_error) = Some(e.to_string());
        }
    }

    fn profiler_detach_succeeded(&self, _info: &ProfilerInfo) {
        let _ = self.shared.stop();
    }
}

fn run(thread: &mut SamplingThread, shared: &Shared, source: &mut dyn StackSource) -> Result<()> {
    let config = shared.config;
    let names = &*shared.names;
    let mut buffer = FrameBuffer::new(config.max_threads, config.max_depth);
    let mut stack: Vec<u32> = Vec::with_capacity(config.max_depth);
    // Each distinct FunctionID is named once; later frames cost one lookup.
    let mut local: HashMap<RawFunctionId, u32, stacks::WordHash> = HashMap::default();
    // The unload count `local` was last cleared at.
    let mut local_unloads = 0u64;
    let period = config.period();
    // Per managed thread: its OS thread, that thread's CPU clock at the
    // last tick it was sampled, and that tick.
    let mut cpu_last: HashMap<RawThreadId, (u32, u64, u64), stacks::WordHash> = HashMap::default();
    lock(&shared.profile).set_start(std::time::SystemTime::now());
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
        let woke = Instant::now();
        let unloads_before = shared.fence.begin_tick(&mut buffer);
        shared.ticks.fetch_add(1, Relaxed);
        let (mut phases, taken_at) = match source.take(thread, &shared.gate, &mut buffer) {
            Ok(tick) => {
                shared.skipped.fetch_add(tick.skipped, Relaxed);
                shared.refused.fetch_add(tick.refused, Relaxed);
                if let Some(signal) = &tick.signal {
                    lock(&shared.signal).add(signal);
                }
                if tick.switched.is_some() {
                    let method = (source.method(), tick.switched.clone());
                    *lock(&shared.method) = method;
                }
                if let Some(e) = tick.refusal {
                    if let Ok(mut last) = shared.last_refusal.lock() {
                        if last.is_none() {
                            *last = Some(e.to_string());
                        }
                    }
                }
                (tick.phases, tick.taken_at)
            }
            Err(e) => {
                shared.failed_ticks.fetch_add(1, Relaxed);
                if let Ok(mut last) = shared.last_error.lock() {
                    *last = Some(e.to_string());
                }
                continue;
            }
        };
        phases.late_ns = nanos(woke.saturating_duration_since(next));
        let counting = Instant::now();
        // The runtime runs again: resolve names and count.
        for gone in shared.fence.take_forgotten() {
            local.remove(&gone);
        }
        // A module or class unload frees its methods' descriptors, whose
        // memory (and so FunctionIDs) the runtime may give to other
        // methods: names resolved before it are not kept past it.
        if unloads_before != local_unloads {
            local.clear();
            local_unloads = unloads_before;
        }
        let tick = shared.ticks.load(Relaxed);
        let tick_at = taken_at
            .unwrap_or_else(std::time::SystemTime::now)
            .duration_since(std::time::UNIX_EPOCH)
            .map(nanos)
            .unwrap_or(0);
        shared.fence.resolve(thread, &buffer, |namer| {
            source.resolving(namer);
            // reentrancy: sampler-profile
            let mut profile = lock(&shared.profile);
            // reentrancy: sampler-profile
            let os_threads = lock(&shared.os_threads);
            for (n, sample) in namer.samples().iter().enumerate() {
                stack.clear();
                for frame in namer.frames(n).rev() {
                    let f = frame.function();
                    let index = match local.get(&f) {
                        Some(&i) => i,
                        None => {
                            // A frame this namer handed out: never refused.
                            let named = namer.name(names, frame).unwrap_or_else(|_| FrameName {
                                function: UNKNOWN_FRAME.into(),
                                module: None,
                                is_final: false,
                            });
                            let i = profile.intern_frame(&named.function, named.module.as_deref());
                            if named.is_final {
                                local.insert(f, i);
                            }
                            i
                        }
                    };
                    stack.push(index);
                }
                let context = sample.context.as_ref();
                let mut at = match sample.taken_at_ns {
                    0 => tick_at,
                    t => t,
                };
                // A stack taken less than a tick before its period began (a
                // signal sample still in its ring, a suspension's stacks
                // when the period was taken before they were counted): the
                // period starts at it. Older (a blocked thread's sample
                // counted again): timed at the period's start. Each
                // sample's time lies inside its profile.
                let taken = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(at);
                let one_tick = std::time::Duration::from_nanos(profile.period_nanos().max(1));
                if let Some(start) = profile.time_range().0 {
                    if taken < start {
                        if start.duration_since(taken).unwrap_or_default() <= one_tick {
                            profile.set_start(taken);
                        } else {
                            at = start
                                .duration_since(std::time::UNIX_EPOCH)
                                .map(nanos)
                                .unwrap_or(at);
                        }
                    }
                }
                match sample.kind {
                    // A signal source's samples carry their own weights.
                    // Counted in the signal counters, not in `samples`: the
                    // profile's sample count (its `samples` column, the folded
                    // counts) is of wall-time samples.
                    SampleKind::Cpu => {
                        profile.add_cpu_in_context(
                            sample.thread,
                            &stack,
                            sample.weight_ns,
                            context,
                        );
                        profile.add_weighted_time(
                            sample.thread,
                            &stack,
                            context,
                            at,
                            sample.weight_ns,
                            profile::NOT_WALL,
                        );
                        continue;
                    }
                    SampleKind::Wall => {
                        profile.add_wall_in_context(
                            sample.thread,
                            &stack,
                            sample.weight_ns,
                            sample.truncated,
                            context,
                        );
                        profile.add_weighted_time(
                            sample.thread,
                            &stack,
                            context,
                            at,
                            0,
                            sample.weight_ns.max(1),
                        );
                        shared.samples.fetch_add(1, Relaxed);
                        continue;
                    }
                    SampleKind::Tick => {}
                }
                profile.add_n_in_context(sample.thread, &stack, 1, sample.truncated, context);
                // CPU time: what the thread's OS thread used since the tick
                // before (nothing at the first sight of a thread).
                let mut cpu_used = 0;
                if let Some(&os) = os_threads.get(&sample.thread) {
                    if let Some(now) = cpu::os_thread_cpu_ns(os) {
                        if let Some(&(last_os, last, _)) = cpu_last.get(&sample.thread) {
                            let used = now.saturating_sub(last);
                            if last_os == os && used > 0 {
                                profile.add_cpu_in_context(sample.thread, &stack, used, context);
                                cpu_used = used;
                            }
                        }
                        cpu_last.insert(sample.thread, (os, now, tick));
                    }
                }
                profile.add_time(sample.thread, &stack, context, tick_at, cpu_used);
                shared.samples.fetch_add(1, Relaxed);
            }
            drop(os_threads);
            drop(profile);
        });
        // Forget threads not sampled for a while (destroyed ones).
        if tick % 1024 == 0 {
            cpu_last.retain(|_, &mut (_, _, seen)| tick - seen < 1024);
        }
        phases.count_ns = nanos(counting.elapsed());
        shared.phases.add(&phases);
        if shared.ticks.load(Relaxed) % 16 == 0 {
            if let Some(cpu) = thread_cpu_ns() {
                shared.thread_cpu_ns.store(cpu, Relaxed);
            }
        }
    }
    source.finish();
    if let Some(cpu) = thread_cpu_ns() {
        shared.thread_cpu_ns.store(cpu, Relaxed);
    }
    Ok(())
}
