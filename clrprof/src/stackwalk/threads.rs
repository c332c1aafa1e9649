//! The thread registry: per managed thread, its OS thread, its stack
//! bounds, its sample ring and its trace-context slot, readable from a
//! signal handler.
//!
//! The SDK fills it from the thread callbacks it already receives
//! ([`register`]): `ThreadAssignedToOSThread` runs on the thread itself
//! (the runtime calls it from the thread's own setup, `SetupThread` and
//! `Thread::HasStarted`, with `GetCurrentThreadId()`), so that is where the
//! registry asks the system for the thread's stack bounds
//! (`pthread_getattr_np` of `pthread_self()`); a call that arrives on
//! another thread is counted and the thread left out. `ThreadDestroyed`
//! retires the entry: it stops being a target, any handler still writing
//! to it finishes first, and the entry is reused for a later thread.
//!
//! # Memory a handler may touch
//! Entries live in chunks that are allocated in normal context and never
//! freed; a signal handler finds its entry by number
//! (`record`), lock-free. An entry is *live* only between its thread's
//! registration and retirement; a handler announces itself in the entry
//! (`busy`) before it checks that the entry is live and is its own (its
//! kernel thread id, its generation), and retirement marks the entry dead
//! before it waits for `busy` to clear: either the handler sees the entry
//! dead, or the retirement sees the handler and waits for it. The consumer
//! (the sampling thread) announces itself the same way (`draining`).
//!
//! Each entry's ring (`Ring`) has one producer (the entry's own thread,
//! in the SDK's signal handler, which is never nested with itself: the
//! signal is blocked while its handler runs) and one consumer (the one
//! sampling thread that samples with signals).

// The rings' producer is the Linux signal handler; elsewhere only the
// registry's bookkeeping runs.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use crate::context::ThreadContextRecord;
use core::cell::UnsafeCell;
use core::sync::atomic::{
    AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release, SeqCst},
};
use std::collections::HashMap;
use std::sync::Mutex;

/// Entries per chunk.
pub(crate) const CHUNK: usize = 64;
/// Chunks at most: 65,536 threads alive at once.
const MAX_CHUNKS: usize = 1024;

/// The entry's states.
pub(crate) const FREE: u32 = 0;
pub(crate) const LIVE: u32 = 2;
pub(crate) const DEAD: u32 = 3;

/// One thread's entry. See the [module docs](self).
pub(crate) struct ThreadRecord {
    pub(crate) state: AtomicU32,
    /// Incremented at each retirement: a signal meant for an earlier
    /// thread of this entry is refused.
    pub(crate) generation: AtomicU32,
    /// The kernel thread id (0 when not live).
    pub(crate) tid: AtomicI32,
    pub(crate) runtime: AtomicU32,
    /// The raw `ThreadID`.
    pub(crate) thread: AtomicUsize,
    pub(crate) stack_lo: AtomicUsize,
    pub(crate) stack_hi: AtomicUsize,
    /// A handler is inside the entry.
    pub(crate) busy: AtomicU32,
    /// The consumer is inside the entry's ring.
    pub(crate) draining: AtomicU32,
    pub(crate) ring: AtomicPtr<Ring>,
    pub(crate) context: AtomicPtr<ThreadContextRecord>,
    /// The entry's CPU-time timer, as the signal source made it (`timer_t`
    /// plus one; 0: none). Changed only under the registry's mutex.
    pub(crate) timer: AtomicUsize,
    /// The weight of the next wall-time sample, set before the signal.
    pub(crate) wall_weight_ns: AtomicU64,
    /// The thread's CPU time as the handler ended its last wall-time
    /// sample (what a still-blocked thread has at the next look, give or
    /// take the restart of its system call).
    pub(crate) wall_cpu_after: AtomicU64,
    /// Stacks written, and signals whose stack was not walked because the
    /// interrupted stack pointer was not on the thread's stack.
    pub(crate) samples: AtomicU64,
    pub(crate) off_stack: AtomicU64,
}

impl ThreadRecord {
    const fn new() -> Self {
        ThreadRecord {
            state: AtomicU32::new(FREE),
            generation: AtomicU32::new(0),
            tid: AtomicI32::new(0),
            runtime: AtomicU32::new(0),
            thread: AtomicUsize::new(0),
            stack_lo: AtomicUsize::new(0),
            stack_hi: AtomicUsize::new(0),
            busy: AtomicU32::new(0),
            draining: AtomicU32::new(0),
            ring: AtomicPtr::new(core::ptr::null_mut()),
            context: AtomicPtr::new(core::ptr::null_mut()),
            timer: AtomicUsize::new(0),
            wall_weight_ns: AtomicU64::new(0),
            wall_cpu_after: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            off_stack: AtomicU64::new(0),
        }
    }
}

type Chunk = [ThreadRecord; CHUNK];

static CHUNKS: [AtomicPtr<Chunk>; MAX_CHUNKS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_CHUNKS];

/// What only normal context touches.
struct State {
    chunks: usize,
    free: Vec<u32>,
    by_thread: HashMap<(u32, usize), u32>,
    by_tid: HashMap<i32, u32>,
    /// Contexts attached before their thread was registered, by kernel
    /// thread id.
    early_contexts: HashMap<i32, usize>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// Counters of the registry.
static REGISTERED: AtomicU64 = AtomicU64::new(0);
static RETIRED: AtomicU64 = AtomicU64::new(0);
static ELSEWHERE: AtomicU64 = AtomicU64::new(0);
static NO_BOUNDS: AtomicU64 = AtomicU64::new(0);
static FULL: AtomicU64 = AtomicU64::new(0);

/// Called when an entry retires, before it is reused (the signal source
/// deletes the entry's timer there).
static ON_RETIRE: AtomicUsize = AtomicUsize::new(0);

// reentrancy: none: every `f` is a closure of this module that edits the registry's maps and entries (no SDK or user call)
fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if guard.is_none() {
        // Records claimed from now on reach their thread's entry.
        crate::context::on_claim(attach_context);
    }
    let state = guard.get_or_insert_with(|| State {
        chunks: 0,
        free: Vec::new(),
        by_thread: HashMap::new(),
        by_tid: HashMap::new(),
        early_contexts: HashMap::new(),
    });
    f(state)
}

// signal-context: async-signal-safe: atomic loads of never-freed chunks
/// The entry numbered `index`, if its chunk exists. Lock-free and
/// allocation-free (a signal handler finds its entry with it).
pub(crate) fn record(index: u32) -> Option<&'static ThreadRecord> {
    let (c, i) = (index as usize / CHUNK, index as usize % CHUNK);
    if c >= MAX_CHUNKS {
        return None;
    }
    // signal-context: bounds: `c < MAX_CHUNKS`, checked just above
    let chunk = CHUNKS[c].load(Acquire);
    if chunk.is_null() {
        return None;
    }
    // `i < CHUNK` (a remainder): an element of the chunk.
    let entry = (chunk as *const ThreadRecord).wrapping_add(i);
    // SAFETY: [local-memory] chunks are leaked boxes published with a release store after
    // they were initialised, and never freed; `entry` is one of its elements.
    Some(unsafe { &*entry })
}

/// Every entry allocated so far, with its number (lock-free).
pub(crate) fn records() -> impl Iterator<Item = (u32, &'static ThreadRecord)> {
    (0..MAX_CHUNKS)
        .map_while(|c| {
            let chunk = CHUNKS[c].load(Acquire);
            (!chunk.is_null()).then_some((c, chunk))
        })
        .flat_map(|(c, chunk)| {
            // SAFETY: [local-memory] as in `record`: a published, never-freed chunk.
            let chunk: &'static Chunk = unsafe { &*chunk };
            chunk
                .iter()
                .enumerate()
                .map(move |(i, r)| ((c * CHUNK + i) as u32, r))
        })
}

/// The kernel's id of the calling thread.
// signal-context: async-signal-safe: one system call (gettid), async-signal-safe
pub(crate) fn gettid() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: [os-api] gettid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// A thread that `ThreadAssignedToOSThread` reported, as the registry has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisteredThread {
    /// The runtime's `ThreadID`.
    pub thread: crate::ids::RawThreadId,
    /// The OS thread (the kernel's thread id).
    pub os_thread: u32,
    /// The stack's bounds, `[low, high)`.
    pub stack: (usize, usize),
}

/// Counters of the registry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegistryStats {
    /// Threads registered so far.
    pub registered: u64,
    /// Threads retired (`ThreadDestroyed`).
    pub retired: u64,
    /// `ThreadAssignedToOSThread` calls that came on another thread than
    /// the one they name (left out: their bounds cannot be asked).
    pub elsewhere: u64,
    /// Threads whose stack bounds the system did not give.
    pub no_bounds: u64,
    /// Threads left out because the registry was full.
    pub full: u64,
    /// Threads registered now.
    pub live: u64,
}

/// The registry's counters.
pub fn stats() -> RegistryStats {
    let live = records()
        .filter(|(_, r)| r.state.load(Relaxed) == LIVE)
        .count() as u64;
    RegistryStats {
        registered: REGISTERED.load(Relaxed),
        retired: RETIRED.load(Relaxed),
        elsewhere: ELSEWHERE.load(Relaxed),
        no_bounds: NO_BOUNDS.load(Relaxed),
        full: FULL.load(Relaxed),
        live,
    }
}

/// The threads registered now for the runtime in `slot`.
// reentrancy: none: `records()` is a lock-free walk of the registry's chunks, not a lock; the loads are atomics
pub fn registered(slot: crate::runtimes::RuntimeSlot) -> Vec<RegisteredThread> {
    records()
        .filter(|(_, r)| r.state.load(Acquire) == LIVE && r.runtime.load(Relaxed) == slot.0)
        .map(|(_, r)| RegisteredThread {
            thread: crate::ids::RawThreadId(r.thread.load(Relaxed)),
            os_thread: r.tid.load(Relaxed) as u32,
            stack: (r.stack_lo.load(Relaxed), r.stack_hi.load(Relaxed)),
        })
        .collect()
}

/// Registers the calling thread as `thread` of runtime `runtime`, which the
/// runtime said runs on OS thread `os_thread`. Normal context only.
pub(crate) fn thread_assigned(runtime: u32, thread: usize, os_thread: u32) -> Option<u32> {
    let tid = gettid();
    if tid <= 0 || tid as u32 != os_thread {
        ELSEWHERE.fetch_add(1, Relaxed);
        return None;
    }
    let Some((lo, hi)) = super::fpwalk::current_thread_stack() else {
        NO_BOUNDS.fetch_add(1, Relaxed);
        return None;
    };
    with_state(|s| {
        // A thread assigned again (a new OS thread for the same ThreadID,
        // or the same one twice): retire the old entry first.
        if let Some(old) = s.by_thread.get(&(runtime, thread)).copied() {
            retire_locked(s, old);
        }
        let index = match s.free.pop() {
            Some(i) => i,
            None => {
                if s.chunks == MAX_CHUNKS {
                    FULL.fetch_add(1, Relaxed);
                    return None;
                }
                let chunk: Box<Chunk> = Box::new([const { ThreadRecord::new() }; CHUNK]);
                CHUNKS[s.chunks].store(Box::into_raw(chunk), Release);
                let first = (s.chunks * CHUNK) as u32;
                s.chunks += 1;
                s.free.extend((first + 1..first + CHUNK as u32).rev());
                first
            }
        };
        let r = record(index)?;
        r.tid.store(tid, Relaxed);
        r.runtime.store(runtime, Relaxed);
        r.thread.store(thread, Relaxed);
        r.stack_lo.store(lo, Relaxed);
        r.stack_hi.store(hi, Relaxed);
        // A record attached before the entry existed, or claimed before
        // the registry ran (the context module tells the registry only
        // once it runs).
        let context = s.early_contexts.remove(&tid).unwrap_or_else(|| {
            crate::context::record_of_os_thread(tid as u64)
                .map_or(0, |r| r as *const ThreadContextRecord as usize)
        });
        r.context
            .store(context as *mut ThreadContextRecord, Relaxed);
        r.state.store(LIVE, SeqCst);
        s.by_thread.insert((runtime, thread), index);
        s.by_tid.insert(tid, index);
        REGISTERED.fetch_add(1, Relaxed);
        Some(index)
    })
}

/// `ThreadDestroyed` of `thread` of runtime `runtime`: retires its entry.
pub(crate) fn thread_destroyed(runtime: u32, thread: usize) {
    with_state(|s| {
        if let Some(index) = s.by_thread.get(&(runtime, thread)).copied() {
            retire_locked(s, index);
        }
    });
}

fn retire_locked(s: &mut State, index: u32) {
    let Some(r) = record(index) else {
        return;
    };
    // Dead first, then wait: a handler either sees it dead or is waited for.
    r.state.store(DEAD, SeqCst);
    r.generation.fetch_add(1, SeqCst);
    while r.busy.load(SeqCst) != 0 || r.draining.load(SeqCst) != 0 {
        std::thread::yield_now();
    }
    let on_retire = ON_RETIRE.load(SeqCst);
    if on_retire != 0 {
        // SAFETY: [ffi-abi] ON_RETIRE holds only `fn(&ThreadRecord)` values (set_on_retire).
        let f: fn(&ThreadRecord) = unsafe { core::mem::transmute(on_retire) };
        f(r);
    }
    // Samples still in the ring belonged to the thread that ended: given up.
    let ring = r.ring.load(SeqCst);
    if !ring.is_null() {
        // SAFETY: [local-memory] rings are never freed; no producer (the entry is dead and no
        // handler is inside) and no consumer (`draining` is clear, and the
        // consumer checks the state after announcing itself) use it now.
        unsafe { (*ring).discard() };
    }
    let tid = r.tid.swap(0, SeqCst);
    s.by_tid.remove(&tid);
    let thread = r.thread.load(Relaxed);
    let runtime = r.runtime.load(Relaxed);
    s.by_thread.remove(&(runtime, thread));
    r.context.store(core::ptr::null_mut(), SeqCst);
    r.state.store(FREE, SeqCst);
    s.free.push(index);
    RETIRED.fetch_add(1, Relaxed);
}

/// Sets the function the registry calls when an entry retires.
pub(crate) fn set_on_retire(f: fn(&ThreadRecord)) {
    ON_RETIRE.store(f as usize, SeqCst);
}

/// Runs `f` with the registry's mutex held (the signal source makes and
/// deletes timers under it, so they never race a retirement).
pub(crate) fn locked<R>(f: impl FnOnce() -> R) -> R {
    with_state(|_| f())
}

/// The trace context of `thread` of runtime `runtime` now, as its entry's
/// record holds it: `None` when the registry has no entry for the thread
/// (it does not run for that runtime, or the thread is not registered),
/// `Some(None)` when the thread has no context. Lock-free and
/// allocation-free (the suspension source reads it while the runtime is
/// suspended); a scan of the entries.
// reentrancy: none: `records()` is a lock-free walk of the registry's chunks, not a lock; the loads are atomics
pub(crate) fn context_of(
    runtime: u32,
    thread: usize,
) -> Option<Option<crate::context::TraceContext>> {
    records()
        .find(|(_, r)| {
            r.state.load(Acquire) == LIVE
                && r.thread.load(Relaxed) == thread
                && r.runtime.load(Relaxed) == runtime
        })
        .map(|(_, r)| entry_context(r))
}

/// The trace context of `r`'s thread now, if its record is attached and
/// still owned by that thread (a record freed at its thread's end may be
/// claimed by another thread before the entry is retired).
// signal-context: async-signal-safe: atomic loads of never-freed records
pub(crate) fn entry_context(r: &ThreadRecord) -> Option<crate::context::TraceContext> {
    let c = r.context.load(Acquire);
    if c.is_null() {
        return None;
    }
    // SAFETY: [local-memory] context records live in leaked chunks (never freed).
    let c = unsafe { &*c };
    let tid = r.tid.load(Relaxed);
    if tid <= 0 || c.os_thread() != Some(tid as u64) {
        return None;
    }
    c.snapshot()
}

/// Attaches the calling thread's trace-context record to its entry, so
/// samples of the thread carry its context ([`ThreadContextRecord::snapshot`]
/// at sample time). Call it on the thread itself, from normal context; a
/// thread not registered yet gets the record when it is.
pub fn attach_context(record: &'static ThreadContextRecord) {
    let tid = gettid();
    with_state(
        |s| match s.by_tid.get(&tid).and_then(|&i| self::record(i)) {
            Some(r) => r
                .context
                .store(record as *const _ as *mut ThreadContextRecord, SeqCst),
            None => {
                s.early_contexts.insert(tid, record as *const _ as usize);
            }
        },
    );
}

/// The component that feeds the registry for one runtime.
struct RegistryComponent;

impl crate::component::Component for RegistryComponent {
    fn name(&self) -> &'static str {
        "thread-registry"
    }

    fn masks(&self) -> crate::event_mask::EventMasks {
        crate::event_mask::EventMask::MONITOR_THREADS.into()
    }

    fn thread_assigned_to_os_thread(
        &self,
        info: &crate::info::ProfilerInfo,
        thread: crate::ids::ThreadId<'_>,
        os_thread_id: u32,
    ) {
        thread_assigned(info.runtime_slot().0, thread.to_raw().0, os_thread_id);
    }

    fn thread_destroyed(&self, info: &crate::info::ProfilerInfo, thread: crate::ids::ThreadId<'_>) {
        thread_destroyed(info.runtime_slot().0, thread.to_raw().0);
    }
}

/// Registers the registry's component with the runtime of `info` (from
/// `Initialize`): from then on every managed thread the runtime assigns to
/// an OS thread is registered with its stack bounds. Idempotent per
/// runtime.
pub fn register(info: &crate::info::ProfilerInfo) -> crate::error::Result<()> {
    static DONE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let slot = info.runtime_slot().0;
    // reentrancy: none: `info.register` adds the registry's component to the runtime's list and calls none of its methods; DONE is this function's alone
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if done.contains(&slot) {
        return Ok(());
    }
    info.register(std::sync::Arc::new(RegistryComponent))?;
    done.push(slot);
    Ok(())
}

/// Kinds of sample a ring holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub(crate) enum RingKind {
    /// The thread's CPU-time timer fired.
    #[default]
    Cpu = 0,
    /// The sampling thread asked for a wall-time sample.
    Wall = 1,
}

/// What a ring slot says of its stack, besides the frames.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SlotMeta {
    pub(crate) frames: u32,
    pub(crate) end: u8,
    pub(crate) kind: RingKind,
    pub(crate) weight_ns: u64,
    pub(crate) epoch: u64,
    pub(crate) context: Option<crate::context::TraceContext>,
    /// When the handler took the stack (Unix nanoseconds; 0: unknown).
    pub(crate) at_ns: u64,
}

/// A single-producer single-consumer ring of stacks, preallocated.
pub(crate) struct Ring {
    /// Slots written (the producer's).
    head: AtomicU32,
    /// Slots read (the consumer's).
    tail: AtomicU32,
    slots: u32,
    depth: usize,
    meta: Box<[UnsafeCell<SlotMeta>]>,
    frames: Box<[UnsafeCell<usize>]>,
    /// Stacks the producer could not write: the ring was full.
    pub(crate) dropped: AtomicU64,
}

// SAFETY: [local-memory] a slot is written only by the one producer while it owns it
// (between its head and the consumer's tail) and read only by the one
// consumer after the producer's release store of `head`.
unsafe impl Sync for Ring {}

impl Ring {
    /// A ring of `slots` stacks of up to `depth` frames each.
    pub(crate) fn new(slots: u32, depth: usize) -> Ring {
        let slots = slots.max(1);
        let depth = depth.max(1);
        Ring {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            slots,
            depth,
            meta: (0..slots)
                .map(|_| UnsafeCell::new(SlotMeta::default()))
                .collect(),
            frames: (0..slots as usize * depth)
                .map(|_| UnsafeCell::new(0))
                .collect(),
            dropped: AtomicU64::new(0),
        }
    }

    // signal-context: async-signal-safe: atomics and writes into the ring's own preallocated slot; no call
    /// Writes one stack: `fill` gets the slot's metadata and frames. Returns
    /// `false` (and counts it) when the ring is full.
    ///
    /// # Safety
    /// Only the ring's one producer calls this, never nested with itself.
    pub(crate) unsafe fn produce(&self, fill: impl FnOnce(&mut SlotMeta, &mut [usize])) -> bool {
        let head = self.head.load(Relaxed);
        let tail = self.tail.load(Acquire);
        if head.wrapping_sub(tail) >= self.slots {
            self.dropped.fetch_add(1, Relaxed);
            return false;
        }
        let slot = (head % self.slots) as usize;
        // SAFETY: [local-memory] slot `head` is between the consumer's tail and the
        // producer's head: only this producer touches it until the release
        // store below; `slot < slots` (a remainder), the frames are that
        // slot's own range.
        unsafe {
            let meta = &mut *self.slot_meta(slot);
            let frames = core::slice::from_raw_parts_mut(self.slot_frames(slot), self.depth);
            fill(meta, frames);
        }
        self.head.store(head.wrapping_add(1), Release);
        true
    }

    /// Reads every stack written so far, oldest first.
    ///
    /// # Safety
    /// Only the ring's one consumer calls this.
    pub(crate) unsafe fn consume(&self, mut each: impl FnMut(&SlotMeta, &[usize])) -> usize {
        let tail = self.tail.load(Relaxed);
        let head = self.head.load(Acquire);
        let n = head.wrapping_sub(tail);
        for k in 0..n {
            let slot = (tail.wrapping_add(k) % self.slots) as usize;
            // SAFETY: [local-memory] slots between tail and head were published by the
            // producer's release store of `head` (acquired above) and are not
            // written again until the tail moves past them.
            let (meta, frames) = unsafe {
                let meta = &*self.slot_meta(slot);
                let len = (meta.frames as usize).min(self.depth);
                (
                    meta,
                    core::slice::from_raw_parts(self.slot_frames(slot) as *const usize, len),
                )
            };
            each(meta, frames);
        }
        self.tail.store(head, Release);
        n as usize
    }

    // signal-context: async-signal-safe: pointer arithmetic only
    /// The metadata of `slot` (`slot < slots`), with the provenance of the
    /// whole array.
    fn slot_meta(&self, slot: usize) -> *mut SlotMeta {
        // `UnsafeCell<T>` has the layout of `T`.
        self.meta
            .as_ptr()
            .wrapping_add(slot)
            .cast::<SlotMeta>()
            .cast_mut()
    }

    // signal-context: async-signal-safe: pointer arithmetic only
    /// The first frame of `slot` (`slot < slots`), with the provenance of
    /// the whole array of `slots * depth` cells.
    fn slot_frames(&self, slot: usize) -> *mut usize {
        // `UnsafeCell<T>` has the layout of `T`.
        self.frames
            .as_ptr()
            .wrapping_add(slot.wrapping_mul(self.depth))
            .cast::<usize>()
            .cast_mut()
    }

    /// Forgets what the ring holds (no producer or consumer runs).
    fn discard(&self) {
        let head = self.head.load(SeqCst);
        self.tail.store(head, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_ring_hands_over_stacks_in_order_and_counts_what_did_not_fit() {
        let ring = Ring::new(4, 8);
        for n in 0..6u32 {
            // SAFETY: [test-fake] this test is the ring's only producer.
            unsafe {
                ring.produce(|m, f| {
                    m.frames = n + 1;
                    for (i, slot) in f.iter_mut().enumerate().take(n as usize + 1) {
                        *slot = (n as usize) * 100 + i;
                    }
                })
            };
        }
        assert_eq!(ring.dropped.load(Relaxed), 2);
        let mut seen = Vec::new();
        // SAFETY: [test-fake] this test is the ring's only consumer.
        let n = unsafe { ring.consume(|m, f| seen.push((m.frames, f.to_vec()))) };
        assert_eq!(n, 4);
        assert_eq!(seen[0], (1, vec![0]));
        assert_eq!(seen[3], (4, vec![300, 301, 302, 303]));
        // SAFETY: [test-fake] as above.
        assert_eq!(unsafe { ring.consume(|_, _| {}) }, 0);
    }

    #[test]
    fn a_producer_and_a_consumer_on_two_threads_lose_nothing_unseen() {
        let ring = Arc::new(Ring::new(8, 4));
        let r = ring.clone();
        let producer = std::thread::spawn(move || {
            let mut written = 0u64;
            for n in 0..100_000u64 {
                // SAFETY: [test-fake] the only producer.
                if unsafe {
                    r.produce(|m, f| {
                        m.weight_ns = n;
                        m.frames = 2;
                        f[0] = n as usize;
                        f[1] = !(n as usize);
                    })
                } {
                    written += 1;
                }
            }
            written
        });
        let mut read = 0u64;
        let mut last = None;
        while !producer.is_finished() || read == 0 {
            // SAFETY: [test-fake] the only consumer.
            read += unsafe {
                ring.consume(|m, f| {
                    assert_eq!(f, &[m.weight_ns as usize, !(m.weight_ns as usize)]);
                    assert!(last.is_none_or(|l| m.weight_ns > l), "out of order");
                    last = Some(m.weight_ns);
                })
            } as u64;
        }
        let written = producer.join().unwrap();
        // SAFETY: [test-fake] the only consumer.
        read += unsafe { ring.consume(|_, _| {}) } as u64;
        assert_eq!(written, read);
        assert_eq!(written + ring.dropped.load(Relaxed), 100_000);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn threads_register_on_themselves_and_retire() {
        let runtime = 0xFFFF_0001;
        let tid = gettid() as u32;
        let index = thread_assigned(runtime, 0x7777, tid).expect("registered");
        let r = record(index).unwrap();
        assert_eq!(r.state.load(SeqCst), LIVE);
        let (lo, hi) = (r.stack_lo.load(SeqCst), r.stack_hi.load(SeqCst));
        let here = &index as *const _ as usize;
        assert!(lo < here && here < hi, "a local lies inside the bounds");
        let listed = registered(crate::runtimes::RuntimeSlot(runtime));
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].os_thread, tid);
        // Not on the thread it names: left out.
        let before = stats().elsewhere;
        assert_eq!(thread_assigned(runtime, 0x8888, tid + 1), None);
        assert_eq!(stats().elsewhere, before + 1);
        let generation = r.generation.load(SeqCst);
        thread_destroyed(runtime, 0x7777);
        assert_eq!(r.state.load(SeqCst), FREE);
        assert_eq!(r.generation.load(SeqCst), generation + 1);
        assert!(registered(crate::runtimes::RuntimeSlot(runtime)).is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn retirement_waits_for_a_handler_inside_the_entry() {
        let runtime = 0xFFFF_0002;
        let index = thread_assigned(runtime, 0x1234, gettid() as u32).unwrap();
        let r = record(index).unwrap();
        r.busy.store(1, SeqCst);
        let retiring = std::thread::spawn(move || thread_destroyed(runtime, 0x1234));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !retiring.is_finished(),
            "retired while a handler was inside"
        );
        assert_eq!(r.state.load(SeqCst), DEAD, "marked dead before waiting");
        r.busy.store(0, SeqCst);
        retiring.join().unwrap();
        assert_eq!(r.state.load(SeqCst), FREE);
    }
}
