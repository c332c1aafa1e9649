//! Stacks taken by a signal, on the thread itself, without stopping the
//! runtime (Linux, x86-64 and aarch64).
//!
//! A [`SignalSampling`] interrupts the thread to sample with `SIGPROF`: its
//! CPU-time timer fires (`timer_create` on the thread's CPU clock, delivered
//! to that thread, `SIGEV_THREAD_ID`), or the sampling thread asks it for a
//! wall-time sample (`rt_tgsigqueueinfo`). The SDK's handler runs on the
//! interrupted thread and takes its stack by frame pointers
//! ([`fpwalk`]) into the thread's preallocated ring
//! ([`threads`]); the sampling thread later turns the
//! instruction pointers into functions with the [`CodeMap`] and hands them
//! to the usual naming ([`UnloadFence::resolve`](super::UnloadFence::resolve)).
//!
//! # What the handler does, and does not
//! It keeps `errno`; it allocates nothing, takes no lock, makes no runtime
//! call and runs no profiler code. It reads its siginfo and context, its
//! thread's registry entry (by the number the signal carries), the unload
//! epoch, the words of its own stack inside the stack's bounds, and the
//! thread's trace context (a sequence-locked record); it writes the ring.
//! Its only system call is `gettid`. A signal that is not the SDK's (another
//! sender, a number of no entry, an entry of another thread) is ignored.
//!
//! # The runtime's own signals
//! CoreCLR on Linux (read in `src/coreclr/pal/src/exception/signal.cpp`
//! and `src/native/libs/System.Native/pal_signal.c`) handles `SIGILL`,
//! `SIGTRAP`, `SIGFPE`, `SIGBUS`, `SIGSEGV` (on an alternate stack: null
//! references, stack overflow), `SIGABRT`, `SIGINT`, `SIGQUIT`, `SIGTERM`,
//! and `SIGRTMIN` (`INJECT_ACTIVATION_SIGNAL`: the runtime's suspension
//! interrupts threads running managed code with it); System.Native handles
//! `SIGCHLD`, `SIGCONT`, `SIGWINCH`, `SIGTTIN`, `SIGTTOU`, `SIGURG` and
//! whatever an app registers with `PosixSignalRegistration`; `SIGPIPE` is
//! ignored. `SIGPROF` is none of them (and is what the JVM's
//! async-profiler and Datadog's .NET profiler use). Like the runtime's own
//! handlers, the SDK's is installed with `SA_RESTART`, so the system calls
//! that restart after a handler do; those that never do (`nanosleep`,
//! `poll`, `epoll_wait`, `select`, socket calls with a timeout, see
//! signal(7)) return `EINTR`, which the runtime and the base library loop on
//! (`SystemNative_Poll`, `SystemNative_Read`, the PAL's waits and sleeps),
//! so no `EINTR` reaches the app. A loop that restarts a *relative* timeout
//! whole (`poll` in `Socket.Poll`, a receive with `ReceiveTimeout`) would
//! never time out under a signal at every tick (seen: `Socket.Poll` hung),
//! so a thread blocked in the kernel is interrupted once per blocking
//! episode: the wall-time turn sees from its CPU clock that it has not run
//! since its last sample (beyond the restart of its system call) and
//! counts that sample again instead (`SignalTick::wall_reused`).
//!
//! # The runtime's fault handling
//! The runtime's `SIGSEGV` handler (null references, stack overflow) runs
//! on the thread's small alternate signal stack; a second signal frame
//! does not fit there (seen: a null-reference storm at 1 kHz killed the
//! process at once, the kernel failing to deliver `SIGPROF` on that stack).
//! So the SDK adds its signal to the mask of every handler installed to run
//! on an alternate stack, as the runtime does its own activation signal,
//! and unblocks it again at the thread's `ExceptionThrown` (the runtime
//! never returns from that handler for a managed exception, and unblocks
//! only `SIGSEGV`). A signal that still finds `SIGSEGV` blocked in the
//! interrupted context (the thread inside the fault handler) is not walked.
//!
//! # What a frame-pointer walk does not see, and how it is helped
//! The handler puts back the caller of a method moved by on-stack
//! replacement (`fpwalk::restore_osr_callers`), of a method caught in its
//! prologue or at its `ret`, and walks on from the first managed caller's
//! frame record when the thread was caught in native code without frame
//! pointers (the C library): see the `leaf` module.
//!
//! # When the handler does not walk
//! - The interrupted stack pointer is not inside the thread's stack: the
//!   thread runs on an alternate signal stack (the runtime's `SIGSEGV`
//!   handler before it moves back to the thread's stack, or its
//!   stack-overflow stack). Counted as `off_stack`.
//! - The entry is not live, or belongs to another thread (a signal that
//!   raced the thread's end). Counted as `foreign`.
//! - `SIGSEGV` is blocked in the interrupted context: the thread is inside
//!   the runtime's fault handling. Counted as `in_fault`.
//!
//! # Stopping
//! [`SignalSampling::stop`] (also at detach, and when the handler was
//! replaced) stops asking for wall samples, deletes every timer, sets
//! `SIGPROF` to be ignored (which discards signals still pending on any
//! thread), waits until no handler runs, and leaves it ignored (a signal
//! still in flight must not meet the default action, which ends the
//! process: see `stop_all`). The library itself stays loaded for the life of the process (the
//! SDK pins it before any profiler code runs), so a handler that the kernel
//! had already started never runs unmapped code.

// The handler and its leaf recovery run on Linux only; elsewhere the
// module keeps its types and the checked refusals.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use super::buffer::{FrameBuffer, SampleKind};
use super::codemap::CodeMap;
use super::fpwalk::{self, StartRegisters};
use super::leaf;
use super::naming::{unload_epoch, UnloadFence, UNPLACED};
use super::threads::{self, Ring, RingKind, ThreadRecord, DEAD, LIVE};
use super::SamplingThread;
use crate::error::{Error, Result};
use crate::ids::{RawFunctionId, RawThreadId};
use crate::info::ProfilerInfo;
use core::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The signal the SDK samples with.
#[cfg(target_os = "linux")]
pub const SAMPLING_SIGNAL: i32 = libc::SIGPROF;
/// The signal the SDK samples with (none off Linux).
#[cfg(not(target_os = "linux"))]
pub const SAMPLING_SIGNAL: i32 = 0;

/// Marks the SDK's signal values: the top 16 bits of `si_value`.
const MAGIC: usize = 0xC1F0;

fn encode(index: u32, generation: u32) -> usize {
    (MAGIC << 48) | ((generation as usize & 0xFFFF) << 32) | index as usize
}

// signal-context: async-signal-safe: arithmetic only
fn decode(value: usize) -> Option<(u32, u32)> {
    (value >> 48 == MAGIC).then_some((value as u32, ((value >> 32) & 0xFFFF) as u32))
}

/// The runtime (slot) whose sampler owns the handler now; `u32::MAX`: none.
static OWNER: AtomicU32 = AtomicU32::new(u32::MAX);
/// Handlers running now.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// The CPU-time each timer expiry stands for, in nanoseconds.
static CPU_PERIOD_NS: AtomicU64 = AtomicU64::new(0);
/// Whether the handler is installed.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Signals the handler took a stack for, and ignored.
static TAKEN: AtomicU64 = AtomicU64::new(0);
static FOREIGN: AtomicU64 = AtomicU64::new(0);
static OFF_STACK: AtomicU64 = AtomicU64::new(0);
/// The code map the handler consults (the owner's; leaked, so a handler
/// that read the pointer never reads a freed map).
static HANDLER_MAP: core::sync::atomic::AtomicPtr<CodeMap> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());
/// Frames put back after an on-stack replacement, by the handler.
static OSR_RESTORED: AtomicU64 = AtomicU64::new(0);
/// Callers of managed leaves stopped in a prologue or at `ret`, put back.
static CALLER_RESTORED: AtomicU64 = AtomicU64::new(0);
/// Walks that started in native code and went on from a frame record
/// found above the stack pointer.
static SCANNED: AtomicU64 = AtomicU64::new(0);
/// Frames the handler checks for on-stack replacement (the first ones).
const OSR_FRAMES: usize = 64;
/// Signals the handler found the interrupted thread in the runtime's fault
/// handling (`SIGSEGV` blocked in the interrupted context) and did not walk.
static IN_FAULT: AtomicU64 = AtomicU64::new(0);
/// The signals whose handlers run on an alternate stack, to whose masks
/// the SDK added its own signal (taken out again at stop).
static MASKED_IN: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Held while the handler is installed, so two installs do not race. The
/// disposition found (default or ignored: install refuses any other) is
/// not kept: at stop the signal is left ignored (see `stop_all`).
#[cfg(target_os = "linux")]
static INSTALLING: Mutex<()> = Mutex::new(());

/// How signal sampling samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalConfig {
    /// CPU time between two samples of a thread (its CPU-time timer's
    /// interval); `None`: no CPU samples.
    pub cpu_period: Option<Duration>,
    /// Threads asked for a wall-time sample per tick, in turn (0: no wall
    /// samples).
    pub wall_threads_per_tick: usize,
    /// Frames kept per stack.
    pub max_depth: usize,
    /// Stacks a thread's ring holds between two ticks (more are dropped
    /// and counted).
    pub ring_slots: u32,
}

impl Default for SignalConfig {
    fn default() -> Self {
        SignalConfig {
            cpu_period: Some(Duration::from_millis(10)),
            wall_threads_per_tick: 8,
            max_depth: 256,
            ring_slots: 8,
        }
    }
}

/// What one [`SignalSampling::take`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalTick {
    /// CPU-time samples moved into the buffer.
    pub cpu_samples: u64,
    /// Wall-time samples moved into the buffer.
    pub wall_samples: u64,
    /// Samples dropped because an unload began after they were taken.
    pub unload_dropped: u64,
    /// Samples that did not fit in the buffer.
    pub buffer_full: u64,
    /// Frames the code map placed.
    pub placed_by_map: u64,
    /// Leaf frames the runtime placed (`GetFunctionFromIP`).
    pub placed_by_runtime: u64,
    /// Frames inside native modules (reported as unmanaged runs).
    pub native: u64,
    /// Frames nothing could place (reported as [`UNPLACED`]).
    pub unplaced: u64,
    /// Threads asked for a wall-time sample.
    pub signalled: u64,
    /// Wall-time samples of threads still blocked where their last one was
    /// taken: counted again without interrupting them.
    pub wall_reused: u64,
    /// Threads registered for this runtime now.
    pub threads: u64,
    /// Timers made this tick.
    pub timers_made: u64,
}

/// Counters of the signal source so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignalStats {
    /// Signals whose stack the handler took.
    pub taken: u64,
    /// Signals the handler ignored (not the SDK's, or for an entry that
    /// ended).
    pub foreign: u64,
    /// Signals that came while the thread ran off its stack (an alternate
    /// signal stack): not walked.
    pub off_stack: u64,
    /// Stacks a full ring could not take.
    pub ring_dropped: u64,
    /// Callers of methods moved by on-stack replacement that the handler
    /// put back (`fpwalk::restore_osr_callers`).
    pub osr_restored: u64,
    /// Callers of managed leaves stopped in a prologue or at `ret` that the
    /// handler put back (see `stackwalk::leaf`).
    pub caller_restored: u64,
    /// Walks that began in native code without frame pointers and went on
    /// from the first managed caller's frame record above the stack pointer.
    pub scanned: u64,
    /// Signals that came while the thread was in the runtime's fault
    /// handling (`SIGSEGV` blocked): not walked.
    pub in_fault: u64,
    /// The signals whose handlers run on an alternate stack and block the
    /// SDK's signal while they run (the runtime's `SIGSEGV`).
    pub masked_in: Vec<i32>,
}

/// Signal-driven sampling for one runtime. See the [module docs](self).
pub struct SignalSampling {
    slot: crate::runtimes::RuntimeSlot,
    config: SignalConfig,
    map: Arc<CodeMap>,
    fence: Arc<UnloadFence>,
    started: AtomicBool,
    stopped: AtomicBool,
    /// Why sampling stopped by itself (the handler was replaced), if so.
    stop_reason: Mutex<Option<String>>,
    /// Where the wall-time turn goes on from.
    cursor: AtomicUsize,
    info8: bool,
    natives: Mutex<NativeModules>,
    /// Per registry entry: what the wall-time turn knows of its thread
    /// (only the sampling thread touches it).
    wall: Mutex<std::collections::HashMap<u32, WallState>>,
}

/// CPU time a thread may gain between two looks without having run on
/// its own: the restart of the system call the SDK's signal interrupted
/// (measured from the end of the handler), and the clock's granularity.
const HANDLER_SLACK_NS: u64 = 50_000;

/// What the wall-time turn knows of one thread.
#[derive(Default)]
struct WallState {
    /// The entry's generation this state is of.
    generation: u32,
    /// The thread's CPU time at the last look.
    cpu_seen: u64,
    /// Whether it was asked for a sample at that look.
    signalled: bool,
    /// Its last wall-time stack, as placed (functions), with the unload
    /// epoch it was taken in: the stack of a thread still blocked where it
    /// was.
    stack: Vec<RawFunctionId>,
    truncated: bool,
    epoch: Option<u64>,
    /// That stack's trace context and time: a sample counted again is of
    /// the moment it repeats (its stack, request and time agree).
    context: Option<crate::context::TraceContext>,
    taken_at_ns: u64,
}

impl SignalSampling {
    /// Whether signal sampling can work in this process: Linux on x86-64
    /// or aarch64. The handler's own conditions (nobody else handles
    /// `SIGPROF`) are checked at [`start`](Self::start).
    pub fn supported() -> std::result::Result<(), String> {
        if cfg!(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )) {
            Ok(())
        } else {
            Err("signal sampling needs Linux on x86-64 or aarch64".into())
        }
    }

    /// Registers signal sampling for the runtime of `info` (from
    /// `Initialize`): the thread registry ([`threads::register`]) and a code
    /// map ([`CodeMap::register`]) whose entries `fence` removes at unloads
    /// (a fence of another runtime is refused). Nothing is interrupted
    /// before [`start`](Self::start).
    // provenance: fence-runtime
    pub fn register(
        info: &ProfilerInfo,
        fence: &Arc<UnloadFence>,
        config: SignalConfig,
    ) -> Result<Arc<SignalSampling>> {
        Self::supported().map_err(Error::Usage)?;
        threads::register(info)?;
        let map = CodeMap::register(info, fence)?;
        info.register(Arc::new(FaultGuard))?;
        Ok(Arc::new(SignalSampling {
            slot: info.runtime_slot(),
            config: SignalConfig {
                max_depth: config.max_depth.clamp(1, 4096),
                ring_slots: config.ring_slots.clamp(1, 1024),
                ..config
            },
            map,
            fence: fence.clone(),
            started: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            stop_reason: Mutex::new(None),
            cursor: AtomicUsize::new(0),
            info8: info.has_info(8),
            natives: Mutex::new(NativeModules::default()),
            wall: Mutex::new(std::collections::HashMap::new()),
        }))
    }

    /// The code map the source places frames with.
    pub fn code_map(&self) -> &Arc<CodeMap> {
        &self.map
    }

    /// Installs the handler. Fails (and nothing is installed) when another
    /// handler of `SIGPROF` is there already (another profiler or tool), or
    /// when another runtime of this process samples with signals.
    pub fn start(&self) -> Result<()> {
        if self.stopped.load(SeqCst) {
            return Err(Error::Usage("signal sampling was stopped".into()));
        }
        if self.started.load(SeqCst) {
            return Ok(());
        }
        if OWNER
            .compare_exchange(u32::MAX, self.slot.0, SeqCst, SeqCst)
            .is_err()
        {
            return Err(Error::Usage(
                "another runtime of this process samples with signals already".into(),
            ));
        }
        CPU_PERIOD_NS.store(
            self.config
                .cpu_period
                .map_or(0, |p| u64::try_from(p.as_nanos()).unwrap_or(u64::MAX)),
            SeqCst,
        );
        threads::set_on_retire(delete_timer);
        // Leaked on purpose: a handler may hold the pointer at any time.
        let map = Arc::into_raw(self.map.clone()) as *mut CodeMap;
        let old = HANDLER_MAP.swap(map, SeqCst);
        let _ = old; // an earlier owner's map stays leaked
        if let Err(e) = install() {
            OWNER.store(u32::MAX, SeqCst);
            return Err(e);
        }
        self.started.store(true, SeqCst);
        Ok(())
    }

    /// Why sampling stopped by itself, if it did (another component
    /// replaced the handler).
    pub fn stop_reason(&self) -> Option<String> {
        self.stop_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The handler's counters (process-wide).
    pub fn stats() -> SignalStats {
        let ring_dropped = threads::records()
            .map(|(_, r)| {
                let ring = r.ring.load(Relaxed);
                if ring.is_null() {
                    0
                } else {
                    // SAFETY: [local-memory] rings are never freed once attached.
                    unsafe { (*ring).dropped.load(Relaxed) }
                }
            })
            .sum();
        SignalStats {
            taken: TAKEN.load(Relaxed),
            foreign: FOREIGN.load(Relaxed),
            off_stack: OFF_STACK.load(Relaxed),
            ring_dropped,
            osr_restored: OSR_RESTORED.load(Relaxed),
            caller_restored: CALLER_RESTORED.load(Relaxed),
            scanned: SCANNED.load(Relaxed),
            in_fault: IN_FAULT.load(Relaxed),
            masked_in: MASKED_IN.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    // provenance: sample-buffer
    /// One tick, from the sampling thread: makes timers for threads that
    /// have none, moves every stack the handler took since the last tick
    /// into `buffer` (placed by the code map; marked as walked by the SDK in
    /// this runtime), then asks the next threads in turn for a wall-time
    /// sample, which the next tick collects. `period` is the tick's length
    /// (the wall-time weight of a sample, corrected for the threads not
    /// asked this tick).
    ///
    /// Call it after [`UnloadFence::begin_tick`] stamped `buffer` with this
    /// source's fence: a stack taken before an unload began is dropped
    /// (its unload epoch differs), and names reach the runtime only while
    /// the stamp holds.
    pub fn take(
        &self,
        thread: &mut SamplingThread,
        buffer: &mut FrameBuffer,
        period: Duration,
    ) -> Result<SignalTick> {
        if !self.started.load(SeqCst) || self.stopped.load(SeqCst) {
            return Err(Error::Usage(
                self.stop_reason()
                    .unwrap_or_else(|| "signal sampling is not running".into()),
            ));
        }
        if thread.runtime().runtime_slot() != self.slot {
            return Err(Error::WrongPartner {
                call: "stackwalk::SignalSampling::take",
                why: "the sampling thread samples another runtime than this source".into(),
            });
        }
        if let Some(why) = replaced() {
            self.stop_with(why.clone());
            return Err(Error::Usage(why));
        }
        let epoch = unload_epoch();
        let mut tick = SignalTick::default();
        let period_ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
        let mut live: Vec<(u32, &'static ThreadRecord)> = Vec::new();
        // reentrancy: none: `records()` is a lock-free walk of the registry's chunks, not a lock; the loads are atomics
        for (index, r) in threads::records() {
            if r.runtime.load(Relaxed) != self.slot.0 {
                continue;
            }
            let state = r.state.load(SeqCst);
            if state != LIVE && state != DEAD {
                continue;
            }
            if state == LIVE {
                if r.ring.load(SeqCst).is_null() {
                    let ring = Box::leak(Box::new(Ring::new(
                        self.config.ring_slots,
                        self.config.max_depth,
                    )));
                    if r.ring
                        .compare_exchange(core::ptr::null_mut(), ring, SeqCst, SeqCst)
                        .is_err()
                    {
                        // SAFETY: [local-memory] the box leaked just above lost the race and was
                        // never published: freed once, here.
                        drop(unsafe { Box::from_raw(ring as *mut Ring) });
                    }
                }
                if self.config.cpu_period.is_some()
                    && r.timer.load(SeqCst) == 0
                    && make_timer(index, r, self.config.cpu_period.unwrap_or_default())
                {
                    tick.timers_made += 1;
                }
                live.push((index, r));
            }
            self.drain(thread, index, r, epoch, buffer, &mut tick);
        }
        tick.threads = live.len() as u64;
        if self.config.wall_threads_per_tick > 0 && !live.is_empty() {
            self.signal_wall(&live, period_ns, epoch, buffer, &mut tick);
        }
        Ok(tick)
    }

    /// Moves the stacks of `r`'s ring into `buffer`.
    fn drain(
        &self,
        thread: &SamplingThread,
        index: u32,
        r: &ThreadRecord,
        epoch: u64,
        buffer: &mut FrameBuffer,
        tick: &mut SignalTick,
    ) {
        r.draining.store(1, SeqCst);
        let generation = r.generation.load(SeqCst);
        let state = r.state.load(SeqCst);
        let ring = r.ring.load(SeqCst);
        if (state == LIVE || state == DEAD) && !ring.is_null() {
            let owner = RawThreadId(r.thread.load(SeqCst));
            let mut natives = self.natives.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: [local-memory] rings are never freed; this source is the one consumer of
            // every ring of its runtime (one signal source per process, OWNER),
            // and `draining` keeps a retirement from discarding it meanwhile.
            unsafe {
                (*ring).consume(|meta, frames| {
                    if meta.epoch != epoch {
                        tick.unload_dropped += 1;
                        return;
                    }
                    let kind = match meta.kind {
                        RingKind::Cpu => SampleKind::Cpu,
                        RingKind::Wall => SampleKind::Wall,
                    };
                    if !buffer.begin_signal(
                        owner,
                        self.slot,
                        kind,
                        meta.weight_ns,
                        meta.context,
                        meta.end == fpwalk::WalkEnd::Full as u8,
                    ) {
                        tick.buffer_full += 1;
                        return;
                    }
                    buffer.set_taken_at(meta.at_ns);
                    match kind {
                        SampleKind::Cpu => tick.cpu_samples += 1,
                        _ => tick.wall_samples += 1,
                    }
                    let first = buffer.samples().len() - 1;
                    let mut last_native = false;
                    for (i, &ip) in frames.iter().enumerate() {
                        let f = self.place(thread, &mut natives, ip, i == 0, tick);
                        // Runs of native frames are one unmanaged frame, as
                        // the runtime's own walks report them.
                        if f.0 == 0 {
                            if last_native {
                                continue;
                            }
                            last_native = true;
                        } else {
                            last_native = false;
                        }
                        if !buffer.push_walked(f) {
                            break;
                        }
                    }
                    if kind == SampleKind::Wall {
                        let sample = buffer.samples()[first];
                        let mut wall = self.wall.lock().unwrap_or_else(|p| p.into_inner());
                        let state = wall.entry(index).or_default();
                        if state.generation == generation {
                            state.stack.clear();
                            state.stack.extend_from_slice(buffer.frames(&sample));
                            state.truncated = sample.truncated;
                            state.epoch = Some(epoch);
                            state.context = sample.context;
                            state.taken_at_ns = sample.taken_at_ns;
                        }
                    }
                });
            }
        }
        r.draining.store(0, SeqCst);
    }

    /// The function of one frame: `ip` is the interrupted program counter
    /// (`leaf`) or a return address (its call is the byte before).
    fn place(
        &self,
        thread: &SamplingThread,
        natives: &mut NativeModules,
        ip: usize,
        leaf: bool,
        tick: &mut SignalTick,
    ) -> RawFunctionId {
        let at = if leaf { ip } else { ip.wrapping_sub(1) };
        if let Some(f) = self.map.lookup(at) {
            tick.placed_by_map += 1;
            return f;
        }
        if natives.contains(at) {
            tick.native += 1;
            return RawFunctionId(0);
        }
        // Only the interrupted instruction itself goes to the runtime: it
        // is code the thread was running, which cannot be unloading. A
        // return address read from a broken chain could point into code
        // whose unload has begun, which the runtime would name while it
        // frees it; such addresses stay unplaced.
        if leaf {
            let runtime = thread.runtime();
            let found = if self.info8 {
                runtime.function_from_ip3(at).map(|(f, _)| f)
            } else {
                runtime.function_from_ip(at)
            };
            if let Ok(f) = found {
                if f.0 != 0 {
                    tick.placed_by_runtime += 1;
                    return f;
                }
            }
        }
        tick.unplaced += 1;
        UNPLACED
    }

    /// Takes a wall-time sample of the next `wall_threads_per_tick` live
    /// threads in turn.
    ///
    /// A thread that has used no CPU since the last look (beyond what the
    /// SDK's own handler cost it) is blocked where it was: its last wall
    /// stack is counted again, and it is not interrupted. So a thread
    /// blocked in the kernel takes one signal per blocking episode, the
    /// first look after it last ran. That matters beyond cost: a signal
    /// makes a wait with a relative timeout that the base library restarts
    /// on `EINTR` with the whole timeout (`SystemNative_Poll`, a socket
    /// receive with `ReceiveTimeout`) start over, and signals at every tick
    /// would keep such a wait from ever timing out; one per episode
    /// lengthens it at most once.
    fn signal_wall(
        &self,
        live: &[(u32, &'static ThreadRecord)],
        period_ns: u64,
        epoch: u64,
        buffer: &mut FrameBuffer,
        tick: &mut SignalTick,
    ) {
        let n = self.config.wall_threads_per_tick.min(live.len());
        // Each thread is asked once every live/n ticks: its sample stands
        // for that much wall time.
        let weight =
            (period_ns as u128 * live.len() as u128 / n as u128).min(u64::MAX as u128) as u64;
        let start = self.cursor.fetch_add(n, Relaxed) % live.len();
        let mut wall = self.wall.lock().unwrap_or_else(|p| p.into_inner());
        for k in 0..n {
            let (index, r) = live[(start + k) % live.len()];
            let generation = r.generation.load(SeqCst);
            let state = wall.entry(index).or_default();
            if state.generation != generation {
                *state = WallState {
                    generation,
                    ..WallState::default()
                };
            }
            let cpu = thread_cpu_ns(r.tid.load(SeqCst)).unwrap_or(u64::MAX);
            // Since the last look, or since the handler ended the sample the
            // last look asked for: no CPU (but the restart of the system
            // call the signal interrupted) means still blocked.
            let since = if state.signalled {
                r.wall_cpu_after.load(SeqCst).max(state.cpu_seen)
            } else {
                state.cpu_seen
            };
            let blocked = cpu.saturating_sub(since) < HANDLER_SLACK_NS;
            state.cpu_seen = cpu;
            if blocked && state.epoch == Some(epoch) && !state.stack.is_empty() {
                let context = state.context;
                let owner = RawThreadId(r.thread.load(SeqCst));
                if buffer.begin_signal(
                    owner,
                    self.slot,
                    SampleKind::Wall,
                    weight,
                    context,
                    state.truncated,
                ) {
                    // Still blocked where it was: the sample it repeats.
                    buffer.set_taken_at(state.taken_at_ns);
                    for &f in &state.stack {
                        if !buffer.push_walked(f) {
                            break;
                        }
                    }
                    tick.wall_samples += 1;
                    tick.wall_reused += 1;
                } else {
                    tick.buffer_full += 1;
                }
                state.signalled = false;
                continue;
            }
            r.wall_weight_ns.store(weight, SeqCst);
            state.signalled = send_wall(index, r);
            if state.signalled {
                tick.signalled += 1;
            }
        }
        wall.retain(|i, s| {
            threads::record(*i).is_some_and(|r| r.generation.load(Relaxed) == s.generation)
        });
    }

    /// Stops sampling: no more wall signals, every timer deleted, the
    /// handler removed (see the [module docs](self)). Idempotent.
    pub fn stop(&self) {
        if self.stopped.swap(true, SeqCst) || !self.started.load(SeqCst) {
            return;
        }
        stop_all(true);
        OWNER.store(u32::MAX, SeqCst);
    }

    fn stop_with(&self, why: String) {
        *self.stop_reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        if self.stopped.swap(true, SeqCst) {
            return;
        }
        // Another handler is there now: leave it, stop our timers only.
        stop_all(false);
        OWNER.store(u32::MAX, SeqCst);
    }

    /// The fence the source was registered with.
    pub fn fence(&self) -> &Arc<UnloadFence> {
        &self.fence
    }
}

/// Gives a thread its sampling signal back after the runtime's fault
/// handling: see [`block_in_alternate_stack_handlers`](imp::block_in_alternate_stack_handlers).
///
/// The runtime's `SIGSEGV` handler (null references, stack overflow) runs
/// on the thread's alternate signal stack, a few pages that a second signal
/// frame does not fit in: a signal delivered there fails to be set up and
/// the kernel kills the process (seen at 1 kHz on a null-reference storm,
/// .NET 10 on x86-64 with AVX-512, whose signal frames are 3.4 KB; the
/// runtime masks its own activation signal there for the same reason, as
/// Datadog's and Pyroscope's .NET profilers do `SIGPROF`). So the SDK adds
/// its signal to the mask of every handler that runs on an alternate stack.
/// The runtime never returns from that handler for a managed exception: it
/// switches back to the thread's stack and dispatches the exception from
/// there, and unblocks only `SIGSEGV`. The first callback on the thread
/// after the switch is `ExceptionThrown`; there the component unblocks the
/// sampling signal again (one system call per exception).
struct FaultGuard;

impl crate::component::Component for FaultGuard {
    fn name(&self) -> &'static str {
        "signal-fault-guard"
    }

    fn masks(&self) -> crate::event_mask::EventMasks {
        crate::event_mask::EventMask::MONITOR_EXCEPTIONS.into()
    }

    fn exception_thrown(&self, _info: &ProfilerInfo, _exception: crate::ids::ObjectId<'_>) {
        if INSTALLED.load(Relaxed) {
            imp::unblock_sampling_signal();
        }
    }
}

impl Drop for SignalSampling {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The system's real-time clock, in nanoseconds since the Unix epoch (0
/// if it cannot be read).
// signal-context: async-signal-safe: one clock_gettime (async-signal-safe)
fn realtime_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: [os-api] a valid out pointer; CLOCK_REALTIME always exists.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut t) } != 0 {
            return 0;
        }
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// CPU time the kernel thread `tid` of this process has used, in
/// nanoseconds (its CPU-time clock; `None` for a thread that ended).
fn thread_cpu_ns(tid: i32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        if tid <= 0 {
            return None;
        }
        let clock: libc::clockid_t = ((!tid) << 3) | 6;
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: [os-api] a valid out pointer; the kernel checks the clock (a thread of
        // this process).
        if unsafe { libc::clock_gettime(clock, &mut t) } != 0 {
            return None;
        }
        Some((t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        None
    }
}

/// The native modules of the process (their executable segments), for
/// telling native frames from unplaced ones. Read with `dl_iterate_phdr`
/// in normal context, again when an address is in none of them (at most
/// once a second).
#[derive(Default)]
struct NativeModules {
    ranges: Vec<(usize, usize)>,
    read_at: Option<Instant>,
}

impl NativeModules {
    fn contains(&mut self, ip: usize) -> bool {
        if self.find(ip) {
            return true;
        }
        if self
            .read_at
            .is_none_or(|t| t.elapsed() > Duration::from_secs(1))
        {
            self.ranges = native_ranges();
            self.read_at = Some(Instant::now());
            return self.find(ip);
        }
        false
    }

    fn find(&self, ip: usize) -> bool {
        let i = self.ranges.partition_point(|&(s, _)| s <= ip);
        i > 0 && ip < self.ranges[i - 1].1
    }
}

#[cfg(target_os = "linux")]
fn native_ranges() -> Vec<(usize, usize)> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: [os-api, callback-args] dl_iterate_phdr passes a valid info struct for this
        // call, and `data` is the vector passed below.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<(usize, usize)>)) };
        if info.dlpi_phdr.is_null() {
            return 0;
        }
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: [os-api] `dlpi_phdr` has `dlpi_phnum` program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                out.push((start, start.saturating_add(ph.p_memsz as usize)));
            }
        }
        0
    }
    let mut out: Vec<(usize, usize)> = Vec::new();
    // SAFETY: [os-api, ffi-abi] the callback matches dl_iterate_phdr's and only writes into
    // `out`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut out as *mut _ as *mut libc::c_void) };
    out.sort_unstable();
    out
}

#[cfg(not(target_os = "linux"))]
fn native_ranges() -> Vec<(usize, usize)> {
    Vec::new()
}

// ----- the handler, and what it needs from the system -----

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use core::ffi::c_void;

    const SI_QUEUE: i32 = -1;
    const SI_TIMER: i32 = -2;

    /// The leading fields of a `siginfo_t` the handler reads: the layout of
    /// glibc's `siginfo_t` on 64-bit Linux (`si_signo`, `si_errno`,
    /// `si_code`, then, after padding, the union: for `SI_TIMER`
    /// `si_tid`, `si_overrun`, `si_sigval`; for `SI_QUEUE` `si_pid`,
    /// `si_uid`, `si_sigval`).
    #[repr(C)]
    pub(super) struct SigInfo {
        pub signo: i32,
        pub errno: i32,
        pub code: i32,
        _pad: i32,
        pub a: i32,
        pub b: i32,
        pub value: usize,
        _rest: [u8; 128 - 32],
    }

    const _: () =
        assert!(core::mem::size_of::<SigInfo>() == core::mem::size_of::<libc::siginfo_t>());

    // signal-context: async-signal-safe: reads the kernel's context struct; no call
    fn registers(uc: *mut c_void) -> StartRegisters {
        // SAFETY: [callback-args] the kernel passes the interrupted context as a valid
        // `ucontext_t` to an SA_SIGINFO handler, for the duration of the call.
        let uc = unsafe { &*(uc as *const libc::ucontext_t) };
        #[cfg(target_arch = "x86_64")]
        {
            let g = &uc.uc_mcontext.gregs;
            StartRegisters {
                pc: g[libc::REG_RIP as usize] as usize,
                sp: g[libc::REG_RSP as usize] as usize,
                fp: g[libc::REG_RBP as usize] as usize,
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            let m = &uc.uc_mcontext;
            StartRegisters {
                pc: m.pc as usize,
                sp: m.sp as usize,
                fp: m.regs[29] as usize,
            }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            let _ = uc;
            StartRegisters {
                pc: 0,
                sp: 0,
                fp: 0,
            }
        }
    }

    // signal-context: async-signal-safe: reads the kernel's context struct; no call
    /// The link register (arm64; 0 elsewhere).
    fn link_register(uc: *mut c_void) -> usize {
        #[cfg(target_arch = "aarch64")]
        {
            // SAFETY: [callback-args] the kernel passes the interrupted context as a valid
            // `ucontext_t` to an SA_SIGINFO handler, for the duration of the call.
            let uc = unsafe { &*(uc as *const libc::ucontext_t) };
            uc.uc_mcontext.regs[30] as usize
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = uc;
            0
        }
    }

    // signal-context: async-signal-safe: one bit of the kernel's context struct
    /// Whether the interrupted code ran with `SIGSEGV` blocked: inside the
    /// runtime's fault handler (which blocks it while it runs, until it
    /// unblocks it on the thread's own stack). Walking there is skipped, as
    /// Datadog's .NET profiler does (their libunwind crashed in it).
    fn in_fault_handling(uc: *mut c_void) -> bool {
        // SAFETY: [callback-args] the kernel passes the interrupted context as a valid
        // `ucontext_t` to an SA_SIGINFO handler; `uc_sigmask` starts with the
        // kernel's 64-bit signal set (bit n - 1 for signal n).
        let mask = unsafe { &(*(uc as *const libc::ucontext_t)).uc_sigmask };
        // SAFETY: [ffi-abi] sigset_t is at least 8 bytes on Linux; read its first word.
        let word = unsafe { core::ptr::read(mask as *const libc::sigset_t as *const u64) };
        word & (1u64 << (libc::SIGSEGV - 1)) != 0
    }

    // signal-context: handler: the SDK's SIGPROF handler; everything it calls is marked
    /// The SDK's `SIGPROF` handler (see the [module docs](super)).
    pub(super) extern "C" fn on_signal(_sig: i32, info: *mut libc::siginfo_t, uc: *mut c_void) {
        // SAFETY: [os-api] the calling thread's errno location, valid while it runs.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: [os-api] as above.
        let saved = unsafe { *errno };
        IN_HANDLER.fetch_add(1, SeqCst);
        if !info.is_null() && !uc.is_null() {
            // SAFETY: [callback-args] an SA_SIGINFO handler gets a valid siginfo_t; SigInfo has its
            // size and leading layout.
            take(unsafe { &*(info as *const SigInfo) }, uc);
        }
        IN_HANDLER.fetch_sub(1, SeqCst);
        // SAFETY: [os-api] as above.
        unsafe { *errno = saved };
    }

    // signal-context: async-signal-safe: atomics, the registry, the walk and the ring; gettid
    fn take(info: &SigInfo, uc: *mut c_void) {
        let (kind, overrun) = match info.code {
            SI_TIMER => (RingKind::Cpu, info.b.max(0) as u64),
            // Only this process queues the SDK's wall samples.
            // SAFETY: [os-api] getpid cannot fail and touches no memory.
            SI_QUEUE if info.a == unsafe { libc::getpid() } => (RingKind::Wall, 0),
            _ => {
                FOREIGN.fetch_add(1, Relaxed);
                return;
            }
        };
        let Some((index, generation)) = decode(info.value) else {
            FOREIGN.fetch_add(1, Relaxed);
            return;
        };
        let Some(r) = threads::record(index) else {
            FOREIGN.fetch_add(1, Relaxed);
            return;
        };
        let epoch = unload_epoch();
        // Announce, then check (the retirement marks dead, then waits).
        r.busy.store(1, SeqCst);
        let ours = r.state.load(SeqCst) == LIVE
            && r.generation.load(SeqCst) & 0xFFFF == generation
            && r.tid.load(SeqCst) == threads::gettid();
        let ring = r.ring.load(SeqCst);
        if !ours || ring.is_null() {
            r.busy.store(0, SeqCst);
            FOREIGN.fetch_add(1, Relaxed);
            return;
        }
        if in_fault_handling(uc) {
            r.busy.store(0, SeqCst);
            IN_FAULT.fetch_add(1, Relaxed);
            return;
        }
        let regs = registers(uc);
        let lr = link_register(uc);
        let (lo, hi) = (r.stack_lo.load(Relaxed), r.stack_hi.load(Relaxed));
        if regs.sp < lo || regs.sp >= hi {
            r.off_stack.fetch_add(1, Relaxed);
            r.busy.store(0, SeqCst);
            OFF_STACK.fetch_add(1, Relaxed);
            return;
        }
        let weight = match kind {
            RingKind::Cpu => CPU_PERIOD_NS.load(Relaxed).saturating_mul(1 + overrun),
            RingKind::Wall => r.wall_weight_ns.load(Relaxed),
        };
        // SAFETY: [interrupted-stack, local-memory] this handler runs on the thread
        // whose entry this is (its kernel id, checked above), on that thread's
        // stack or above it; `regs.sp` lies inside the bounds the system gave
        // for that stack (checked above), so every word of [lo, hi) from the
        // interrupted frames up is mapped and live. The ring is never freed,
        // and this handler is its one producer (its own thread's, never
        // nested: SIGPROF is blocked while it runs). Context records are
        // never freed, and neither is the handler's code map (leaked at start).
        unsafe {
            (*ring).produce(|meta, frames| {
                let mut records = [0usize; OSR_FRAMES];
                let map = HANDLER_MAP.load(SeqCst);
                let mut walked = if map.is_null() {
                    fpwalk::walk_recording(regs, lo, hi, frames, &mut records)
                } else {
                    let map = &*map;
                    let (walked, fix) = leaf::walk_from_leaf(
                        regs,
                        lr,
                        lo,
                        hi,
                        frames,
                        &mut records,
                        |ip, leaf| {
                            map.lookup_range(if leaf { ip } else { ip.wrapping_sub(1) })
                                .map(|(f, start)| (f.0, start))
                        },
                        // SAFETY: [interrupted-stack] asked only for bytes of the
                        // instruction the thread was interrupted at (the decoder's
                        // contract): code it is executing, mapped and readable.
                        |a| Some(core::ptr::read_volatile(a as *const u8)),
                    );
                    if fix.caller_restored {
                        CALLER_RESTORED.fetch_add(1, Relaxed);
                    }
                    if fix.scanned {
                        SCANNED.fetch_add(1, Relaxed);
                    }
                    walked
                };
                if !map.is_null() {
                    let map = &*map;
                    let restored = fpwalk::restore_osr_callers(
                        frames,
                        &mut records,
                        &mut walked.frames,
                        lo,
                        hi,
                        |ip, leaf| {
                            map.lookup_range(if leaf { ip } else { ip.wrapping_sub(1) })
                                .map(|(f, start)| (f.0, start))
                        },
                    );
                    if restored > 0 {
                        OSR_RESTORED.fetch_add(restored as u64, Relaxed);
                    }
                }
                meta.frames = walked.frames as u32;
                meta.end = walked.end as u8;
                meta.kind = kind;
                meta.weight_ns = weight;
                meta.epoch = epoch;
                meta.context = threads::entry_context(r);
                meta.at_ns = realtime_ns();
            });
        }
        r.samples.fetch_add(1, Relaxed);
        TAKEN.fetch_add(1, Relaxed);
        if kind == RingKind::Wall {
            r.wall_cpu_after.store(own_cpu_ns(), Relaxed);
        }
        r.busy.store(0, SeqCst);
    }

    // signal-context: async-signal-safe: one system call (clock_gettime, async-signal-safe)
    /// The calling thread's CPU time, in nanoseconds (0 if the clock fails).
    fn own_cpu_ns() -> u64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: [os-api] a valid out pointer; the calling thread's own CPU clock.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
            return 0;
        }
        (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
    }

    fn handler_address() -> usize {
        on_signal as extern "C" fn(i32, *mut libc::siginfo_t, *mut c_void) as usize
    }

    pub(super) fn install() -> Result<()> {
        let _installing = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
        if INSTALLED.load(SeqCst) {
            return Ok(());
        }
        // SAFETY: [ffi-abi] sigaction is a plain C struct, valid when zeroed.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] reads the current disposition into a valid out struct.
        if unsafe { libc::sigaction(SAMPLING_SIGNAL, core::ptr::null(), &mut old) } != 0 {
            return Err(Error::Usage("sigaction(SIGPROF) failed".into()));
        }
        let default = old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN;
        if !default {
            return Err(Error::Usage(format!(
                "SIGPROF already has a handler ({:#x}): another profiler or tool samples \
                 this process",
                old.sa_sigaction
            )));
        }
        // SAFETY: [ffi-abi] a zeroed sigaction, then filled in.
        let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
        // signal-context: registers on_signal
        new.sa_sigaction = handler_address();
        new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: [os-api] a valid mask.
        unsafe { libc::sigemptyset(&mut new.sa_mask) };
        // SAFETY: [os-api, library-pinned] installs a handler of this library, which the SDK
        // pins for the life of the process.
        if unsafe { libc::sigaction(SAMPLING_SIGNAL, &new, core::ptr::null_mut()) } != 0 {
            return Err(Error::Usage("sigaction(SIGPROF) failed".into()));
        }
        INSTALLED.store(true, SeqCst);
        block_in_alternate_stack_handlers();
        Ok(())
    }

    /// Adds the sampling signal to the mask of every handler installed to
    /// run on an alternate signal stack (`SA_ONSTACK`: the runtime's
    /// `SIGSEGV`), so it never lands on that small stack (see
    /// [`FaultGuard`]). The handlers themselves are left as they are.
    pub(super) fn block_in_alternate_stack_handlers() {
        let mut masked = MASKED_IN.lock().unwrap_or_else(|p| p.into_inner());
        for sig in 1..=64 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP || sig == SAMPLING_SIGNAL {
                continue;
            }
            // SAFETY: [ffi-abi] a plain C struct, valid when zeroed.
            let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
            // SAFETY: [os-api] reads a disposition into a valid out struct.
            if unsafe { libc::sigaction(sig, core::ptr::null(), &mut action) } != 0 {
                continue;
            }
            let handler =
                action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN;
            // SAFETY: [os-api] tests a member of a valid signal set.
            let blocked = unsafe { libc::sigismember(&action.sa_mask, SAMPLING_SIGNAL) } == 1;
            if handler && action.sa_flags & libc::SA_ONSTACK != 0 && !blocked {
                if !masked.contains(&sig) {
                    masked.push(sig);
                }
                // SAFETY: [os-api] adds a member to a valid signal set.
                unsafe { libc::sigaddset(&mut action.sa_mask, SAMPLING_SIGNAL) };
                // SAFETY: [os-api] installs the same handler, flags and mask plus one signal.
                unsafe { libc::sigaction(sig, &action, core::ptr::null_mut()) };
            }
        }
    }

    /// Takes the sampling signal out of the masks it was added to.
    fn unblock_in_alternate_stack_handlers() {
        let masked = MASKED_IN.lock().unwrap_or_else(|p| p.into_inner());
        for &sig in masked.iter() {
            // SAFETY: [ffi-abi] a plain C struct, valid when zeroed.
            let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
            // SAFETY: [os-api] reads a disposition into a valid out struct.
            if unsafe { libc::sigaction(sig, core::ptr::null(), &mut action) } != 0 {
                continue;
            }
            // SAFETY: [os-api] removes a member of a valid signal set, then installs the
            // same disposition without it.
            unsafe {
                libc::sigdelset(&mut action.sa_mask, SAMPLING_SIGNAL);
                libc::sigaction(sig, &action, core::ptr::null_mut());
            }
        }
    }

    /// Unblocks the sampling signal on the calling thread.
    pub(super) fn unblock_sampling_signal() {
        // SAFETY: [ffi-abi] a plain C struct, valid when zeroed.
        let mut set: libc::sigset_t = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] a valid set; changes only the calling thread's mask.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, SAMPLING_SIGNAL);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut());
        }
    }

    /// `Some(why)` when `SIGPROF`'s handler is no longer the SDK's.
    pub(super) fn replaced() -> Option<String> {
        if !INSTALLED.load(SeqCst) {
            return None;
        }
        // SAFETY: [ffi-abi] a plain C struct, valid when zeroed.
        let mut now: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] reads the disposition into a valid out struct.
        if unsafe { libc::sigaction(SAMPLING_SIGNAL, core::ptr::null(), &mut now) } != 0 {
            return None;
        }
        (now.sa_sigaction != handler_address()).then(|| {
            format!(
                "another component replaced the SDK's SIGPROF handler (now {:#x}): signal \
                 sampling stopped",
                now.sa_sigaction
            )
        })
    }

    /// Makes and arms `r`'s CPU-time timer.
    pub(super) fn make_timer(index: u32, r: &ThreadRecord, period: Duration) -> bool {
        threads::locked(|| {
            if r.state.load(SeqCst) != LIVE || r.timer.load(SeqCst) != 0 {
                return false;
            }
            let tid = r.tid.load(SeqCst);
            if tid <= 0 {
                return false;
            }
            // The thread's CPU-time clock, as pthread_getcpuclockid makes it
            // (Linux's CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED).
            let clock: libc::clockid_t = ((!tid) << 3) | 6;
            // SAFETY: [ffi-abi] a plain C struct, valid when zeroed.
            let mut event: libc::sigevent = unsafe { core::mem::zeroed() };
            event.sigev_notify = libc::SIGEV_THREAD_ID;
            event.sigev_signo = SAMPLING_SIGNAL;
            event.sigev_notify_thread_id = tid;
            event.sigev_value.sival_ptr = encode(index, r.generation.load(SeqCst)) as *mut c_void;
            let mut timer: libc::timer_t = core::ptr::null_mut();
            // SAFETY: [os-api] valid event and out pointer; the kernel checks that the clock is
            // a thread of this process (EINVAL for one that ended).
            if unsafe { libc::timer_create(clock, &mut event, &mut timer) } != 0 {
                return false;
            }
            let ns = i64::try_from(period.as_nanos()).unwrap_or(i64::MAX).max(1);
            let ts = libc::timespec {
                tv_sec: ns / 1_000_000_000,
                tv_nsec: ns % 1_000_000_000,
            };
            let spec = libc::itimerspec {
                it_interval: ts,
                it_value: ts,
            };
            // SAFETY: [os-api] a timer just made, a valid spec.
            if unsafe { libc::timer_settime(timer, 0, &spec, core::ptr::null_mut()) } != 0 {
                // SAFETY: [os-api] deletes the timer made above, once.
                unsafe { libc::timer_delete(timer) };
                return false;
            }
            r.timer.store(timer as usize + 1, SeqCst);
            true
        })
    }

    /// Deletes `r`'s timer (the registry calls it at retirement, with its
    /// mutex held).
    pub(super) fn delete_timer(r: &ThreadRecord) {
        let t = r.timer.swap(0, SeqCst);
        if t != 0 {
            // SAFETY: [os-api] a timer this module made (its value plus one), deleted once
            // (swapped out above).
            unsafe { libc::timer_delete((t - 1) as libc::timer_t) };
        }
    }

    /// Queues a wall-time sample request to `r`'s thread.
    pub(super) fn send_wall(index: u32, r: &ThreadRecord) -> bool {
        let tid = r.tid.load(SeqCst);
        if tid <= 0 || r.state.load(SeqCst) != LIVE {
            return false;
        }
        // SAFETY: [ffi-abi] a plain C struct, valid when zeroed.
        let mut info: SigInfo = unsafe { core::mem::zeroed() };
        info.signo = SAMPLING_SIGNAL;
        info.code = SI_QUEUE;
        // SAFETY: [os-api] getpid and getuid cannot fail.
        info.a = unsafe { libc::getpid() };
        // SAFETY: [os-api] as above.
        info.b = unsafe { libc::getuid() } as i32;
        info.value = encode(index, r.generation.load(SeqCst));
        // SAFETY: [os-api] rt_tgsigqueueinfo(tgid, tid, sig, info) with a valid siginfo of
        // SI_QUEUE (a code below zero, which a process may send to itself).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                libc::getpid(),
                tid,
                SAMPLING_SIGNAL,
                &info as *const SigInfo,
            )
        };
        rc == 0
    }

    /// Deletes every timer; with `restore`, ignores the signal (dropping
    /// what is pending), waits for running handlers and puts back the
    /// disposition found at install.
    pub(super) fn stop_all(restore: bool) {
        threads::locked(|| {
            for (_, r) in threads::records() {
                delete_timer(r);
            }
        });
        unblock_in_alternate_stack_handlers();
        if !restore || !INSTALLED.load(SeqCst) {
            INSTALLED.store(false, SeqCst);
            return;
        }
        // What install found (the default disposition, or ignored: it
        // refuses any other) is not put back: SIGPROF stays ignored. A
        // sampling signal may still be in flight after the timers are
        // deleted and the disposition set to ignore: under qemu-user one
        // queued for a thread that blocks it (the runtime's fault handler
        // on its alternate stack) outlived SIG_IGN, and delivered after the
        // default disposition was back it ended the process (SIGPROF's
        // default action; the arm64 fault storm, 1 run in CI). The runtime
        // and the BCL use no SIGPROF; ignoring it is what a process without
        // a profiler can tell apart only by sending it one.
        // SAFETY: [ffi-abi] a plain C struct, valid when zeroed.
        let mut ignore: libc::sigaction = unsafe { core::mem::zeroed() };
        ignore.sa_sigaction = libc::SIG_IGN;
        // SAFETY: [os-api] ignoring the signal discards it where it is pending (POSIX
        // sigaction: "setting a signal action to SIG_IGN for a signal that is
        // pending shall cause the pending signal to be discarded").
        unsafe { libc::sigaction(SAMPLING_SIGNAL, &ignore, core::ptr::null_mut()) };
        let deadline = Instant::now() + Duration::from_secs(2);
        while IN_HANDLER.load(SeqCst) != 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        INSTALLED.store(false, SeqCst);
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;
    pub(super) fn install() -> Result<()> {
        Err(Error::Usage("signal sampling needs Linux".into()))
    }
    pub(super) fn replaced() -> Option<String> {
        None
    }
    pub(super) fn make_timer(_: u32, _: &ThreadRecord, _: Duration) -> bool {
        false
    }
    pub(super) fn delete_timer(_: &ThreadRecord) {}
    pub(super) fn send_wall(_: u32, _: &ThreadRecord) -> bool {
        false
    }
    pub(super) fn stop_all(_: bool) {}
    pub(super) fn unblock_sampling_signal() {}
}

use imp::{delete_timer, install, make_timer, replaced, send_wall, stop_all};

/// Whether the SDK's handler is installed now (`SIGPROF`).
pub fn handler_installed() -> bool {
    INSTALLED.load(SeqCst)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use core::ffi::c_void;

    fn ring_of(index: u32) -> &'static Ring {
        let r = threads::record(index).unwrap();
        let ring = Box::leak(Box::new(Ring::new(64, 64)));
        r.ring.store(ring, SeqCst);
        ring
    }

    fn drain(ring: &Ring) -> Vec<(threads::SlotMeta, Vec<usize>)> {
        let mut out = Vec::new();
        // SAFETY: [test-fake] the test is the ring's only consumer.
        unsafe { ring.consume(|m, f| out.push((*m, f.to_vec()))) };
        out
    }

    fn disposition() -> usize {
        // SAFETY: [test-fake] a zeroed out struct for sigaction.
        let mut now: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: [test-fake] reads the disposition.
        unsafe { libc::sigaction(SAMPLING_SIGNAL, core::ptr::null(), &mut now) };
        now.sa_sigaction
    }

    static ALT_SPINS: AtomicBool = AtomicBool::new(false);

    /// A handler that runs on an alternate signal stack (as the runtime's
    /// SIGSEGV handler does) and waits there until told to stop.
    extern "C" fn on_alt_stack(_: i32, _: *mut libc::siginfo_t, _: *mut c_void) {
        while ALT_SPINS.load(SeqCst) {
            core::hint::spin_loop();
        }
    }

    /// The handler in this test process: it installs over the default
    /// disposition only, takes stacks on its own thread (wall requests and
    /// CPU-time timers), keeps errno, refuses signals of other senders and
    /// of ended entries, does not walk off the thread's stack, and leaves
    /// the signal ignored when stopped.
    #[test]
    fn the_handler_takes_stacks_on_its_own_thread_and_leaves_nothing_behind() {
        assert_eq!(disposition(), libc::SIG_DFL);
        install().expect("installed over the default disposition");
        CPU_PERIOD_NS.store(1_000_000, SeqCst);
        let runtime = 0xFFFF_0100;
        let index = threads::thread_assigned(runtime, 0xABC0, threads::gettid() as u32).unwrap();
        let r = threads::record(index).unwrap();
        let ring = ring_of(index);

        // A wall request: taken before the system call returns (the signal
        // is for this thread and not blocked), with errno as it was.
        r.wall_weight_ns.store(12345, SeqCst);
        // SAFETY: [test-fake] sets this thread's errno.
        unsafe { *libc::__errno_location() = 4242 };
        assert!(send_wall(index, r));
        // SAFETY: [test-fake] reads this thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, 4242, "errno kept");
        let got = drain(ring);
        assert_eq!(got.len(), 1);
        let (meta, frames) = &got[0];
        assert_eq!(meta.kind, RingKind::Wall);
        assert_eq!(meta.weight_ns, 12345);
        assert!(!frames.is_empty() && frames[0] != 0, "the interrupted pc");

        // CPU-time timer: samples while this thread burns CPU.
        assert!(make_timer(index, r, Duration::from_millis(1)));
        let t0 = Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let cpu = drain(ring);
        assert!(!cpu.is_empty(), "no CPU-time sample in 300 ms of CPU");
        assert!(cpu
            .iter()
            .all(|(m, _)| m.kind == RingKind::Cpu && m.weight_ns >= 1_000_000));
        threads::locked(|| delete_timer(r));

        // A signal of another sender (a plain kill-style SIGPROF) and one
        // for another generation of the entry are ignored.
        let foreign = FOREIGN.load(SeqCst);
        // SAFETY: [test-fake] sends SIGPROF to this thread with tgkill.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid(),
                threads::gettid(),
                SAMPLING_SIGNAL,
            )
        };
        r.generation.fetch_add(1, SeqCst);
        assert!(send_wall(index, r), "queued");
        let stale = encode(index, r.generation.load(SeqCst).wrapping_sub(1));
        // SAFETY: [test-fake] a plain C struct, valid when zeroed.
        let mut info: imp::SigInfo = unsafe { core::mem::zeroed() };
        info.signo = SAMPLING_SIGNAL;
        info.code = -1;
        // SAFETY: [test-fake] getpid.
        info.a = unsafe { libc::getpid() };
        info.value = stale;
        // SAFETY: [test-fake] queues a stale request to this thread.
        unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                libc::getpid(),
                threads::gettid(),
                SAMPLING_SIGNAL,
                &info as *const imp::SigInfo,
            )
        };
        assert_eq!(
            FOREIGN.load(SeqCst),
            foreign + 2,
            "tgkill and the stale request"
        );
        assert_eq!(drain(ring).len(), 1, "only the request of this generation");

        // Off the thread's stack: a handler on an alternate stack that a
        // request interrupts is not walked.
        let alt = vec![0u8; 256 * 1024];
        let stack = libc::stack_t {
            ss_sp: alt.as_ptr() as *mut c_void,
            ss_flags: 0,
            ss_size: alt.len(),
        };
        // SAFETY: [test-fake] installs an alternate stack this test owns, and a SIGUSR2
        // handler on it; removed below.
        unsafe {
            libc::sigaltstack(&stack, core::ptr::null_mut());
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction =
                on_alt_stack as extern "C" fn(i32, *mut libc::siginfo_t, *mut c_void) as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigaction(libc::SIGUSR2, &action, core::ptr::null_mut());
        }
        let me = threads::gettid();
        let off = OFF_STACK.load(SeqCst);
        ALT_SPINS.store(true, SeqCst);
        let helper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            assert!(send_wall(index, threads::record(index).unwrap()));
            std::thread::sleep(Duration::from_millis(50));
            ALT_SPINS.store(false, SeqCst);
        });
        // SAFETY: [test-fake] SIGUSR2 to this thread, handled on the alternate stack.
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), me, libc::SIGUSR2) };
        helper.join().unwrap();
        assert_eq!(
            OFF_STACK.load(SeqCst),
            off + 1,
            "the request came on the alternate stack"
        );
        // SAFETY: [test-fake] removes the handler and the alternate stack.
        unsafe {
            libc::signal(libc::SIGUSR2, libc::SIG_DFL);
            let off = libc::stack_t {
                ss_sp: core::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            libc::sigaltstack(&off, core::ptr::null_mut());
        }
        drop(alt);

        // Another handler replaced ours: seen.
        assert_eq!(replaced(), None);
        // SAFETY: [test-fake] swaps SIGPROF's handler for SIG_IGN and back.
        let ours = unsafe { libc::signal(SAMPLING_SIGNAL, libc::SIG_IGN) };
        assert!(replaced().is_some());
        // SAFETY: [test-fake] puts the SDK's handler back.
        unsafe {
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction = ours;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigaction(SAMPLING_SIGNAL, &action, core::ptr::null_mut());
        }
        assert_eq!(replaced(), None);

        // Stopped: no timer, the signal ignored (never the default action,
        // which ends the process), and a request queued meanwhile is
        // dropped rather than delivered to it.
        assert!(make_timer(index, r, Duration::from_millis(1)));
        stop_all(true);
        assert_eq!(r.timer.load(SeqCst), 0);
        assert_eq!(disposition(), libc::SIG_IGN);
        assert!(!handler_installed());
        threads::thread_destroyed(runtime, 0xABC0);
    }

    #[test]
    fn values_carry_the_entry_and_its_generation() {
        let v = encode(1234, 0x1_0007);
        assert_eq!(decode(v), Some((1234, 7)));
        assert_eq!(decode(1234), None, "a value without the SDK's mark");
        assert_eq!(decode(0), None);
    }
}
