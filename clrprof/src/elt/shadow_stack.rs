//! Shadow stacks: for every thread, the hooked frames it is in, kept by the
//! ELT hooks and by the exception-unwind callbacks.
//!
//! Call [`enter`] from [`EltHooks::enter`](super::EltHooks::enter), [`leave`]
//! from `leave` and [`tailcall`] from `tailcall`. An exception that unwinds
//! a hooked frame calls no leave hook; instead the runtime (with
//! `MONITOR_EXCEPTIONS`, see [`EltOptions::with_exceptions`](super::EltOptions::with_exceptions))
//! calls `ExceptionUnwindFunctionEnter` / `ExceptionUnwindFunctionLeave`
//! for every managed frame it unwinds, hooked or not, and
//! `ExceptionCatcherEnter` for the frame that catches. With that option the
//! SDK delivers those callbacks to the shadow stacks itself (an SDK
//! component registered by [`install`](super::install)): a frame is popped
//! when the frame being unwound is the top of the shadow stack. No
//! forwarding code in the profiler.
//!
//! A frame holds the function's ID, not a pointer to its record: a sampler
//! reading a stale frame (a thread whose stack an exception left unbalanced
//! without `MONITOR_EXCEPTIONS`) reads a number, never freed memory, even
//! after the record of an unloaded function is released.
//!
//! Memory is taken once ([`preallocate`], or the defaults on first use): a
//! pool of per-thread stacks of fixed capacity. A thread takes a free stack
//! at its first hook and gives it back when it exits. After that, pushing
//! and popping write a few words of the thread's own stack: no allocation,
//! no lock. Deeper frames than the capacity are counted, not stored.
//!
//! A frame that returns without its leave hook (a .NET 11 runtime-async
//! method that suspends, dotnet/runtime issue 122488; a frame an exception
//! ended while the profiler did not receive the unwind callbacks) is popped
//! as *suspended* at the first later event that proves it gone:
//!
//! * a leave hook naming a frame below it (the caller's leave);
//! * on the ELT fast path, an enter hook whose method's caller's stack
//!   pointer (which the JIT passes to the hook, see
//!   `clrprof_sys::elt::EltEnterHandler`) is not below the frame's own: a
//!   live caller's is always strictly above its callee's, as the stack
//!   grows down. This also repairs a thread-pool thread on which a resumed
//!   runtime-async method suspended again, at the next method the thread
//!   runs, where no hooked caller below ever leaves. The SDK passes those
//!   stack pointers only where such frames exist: once a runtime that can
//!   run runtime-async methods (.NET 11 and later) is on the fast path and
//!   a thread has taken a shadow stack (see `elt::CallerSpTracking`);
//!   elsewhere neither the enter hook nor [`enter`] spends anything on
//!   them. Such pops are counted in [`StackStats::suspended_at_enter`].
//!
//! Until then the frame stays on its thread's stack (a runtime-async method
//! reports nothing when it suspends), so a thread whose last hooked method
//! suspended keeps that frame until its next hooked call.
//!
//! Any thread can read any stack at any moment ([`snapshot`],
//! [`for_each_thread`]): the owner brackets every change with a sequence
//! counter and readers retry until they copied a consistent state (a
//! seqlock), so a sampler never blocks the thread it samples.

use super::Hooked;
use crate::ids::RawFunctionId;
use std::cell::Cell;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Default number of per-thread stacks.
pub const DEFAULT_THREADS: usize = 256;
/// Default capacity of each stack, in frames.
pub const DEFAULT_DEPTH: usize = 1024;

/// How many unwinds may be nested (an exception thrown from a `finally`
/// that runs during another exception's unwind, ...).
const UNWIND_NESTING: usize = 16;

/// One frame of a shadow stack: the function of a hooked frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShadowFrame(usize);

impl ShadowFrame {
    /// The function's ID (raw: the frame may outlive it, see the module docs).
    pub fn function(&self) -> RawFunctionId {
        RawFunctionId(self.0)
    }
}

/// Counters of one thread's stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackStats {
    /// Current depth (may exceed the capacity; frames beyond it are not stored).
    pub depth: usize,
    /// Deepest depth seen.
    pub max_depth: usize,
    /// Frames pushed (enter hooks).
    pub pushes: u64,
    /// Frames popped by leave or tailcall hooks.
    pub pops: u64,
    /// Frames popped by exception unwinding.
    pub unwound: u64,
    /// Pops on an empty stack.
    pub underflows: u64,
    /// Leave/tailcall hooks whose function was neither the top frame nor
    /// found below it.
    pub mismatches: u64,
    /// Frames that ended without a leave hook of their own, popped when a
    /// leave hook named a frame below them or (ELT fast path) when an enter
    /// hook's caller stack pointer showed they had returned. On .NET 11
    /// these are runtime-async methods that suspended (the runtime calls
    /// Enter on every resume but no Leave on suspension, dotnet/runtime
    /// issue 122488); on earlier runtimes, frames an exception ended while
    /// the profiler did not receive the unwind callbacks.
    pub suspended: u64,
    /// Of [`suspended`](Self::suspended), the frames popped at an enter
    /// hook whose caller stack pointer showed they had returned (the ELT
    /// fast path on a runtime that can suspend frames, .NET 11 and later;
    /// always 0 elsewhere).
    pub suspended_at_enter: u64,
}

/// One thread's stack. Written only by its owner thread.
struct ThreadStack {
    /// 0 when free, else the owner's OS thread ID + 1.
    owner: AtomicU64,
    /// Odd while the owner is changing the stack.
    seq: AtomicU64,
    depth: AtomicUsize,
    max_depth: AtomicUsize,
    pushes: AtomicU64,
    pops: AtomicU64,
    unwound: AtomicU64,
    underflows: AtomicU64,
    mismatches: AtomicU64,
    suspended: AtomicU64,
    suspended_at_enter: AtomicU64,
    frames: Box<[AtomicUsize]>,
    /// The caller stack pointer of each stored frame (0: unknown) — owner
    /// only.
    caller_sps: Box<[AtomicUsize]>,
    /// Pending unwinds: the function being unwound — owner only.
    unwinds: [AtomicUsize; UNWIND_NESTING],
    /// Bit `n`: the function of pending unwind `n` was the top frame.
    unwind_matches: AtomicU64,
    unwind_level: AtomicUsize,
}

impl ThreadStack {
    fn new(depth: usize) -> ThreadStack {
        ThreadStack {
            owner: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            depth: AtomicUsize::new(0),
            max_depth: AtomicUsize::new(0),
            pushes: AtomicU64::new(0),
            pops: AtomicU64::new(0),
            unwound: AtomicU64::new(0),
            underflows: AtomicU64::new(0),
            mismatches: AtomicU64::new(0),
            suspended: AtomicU64::new(0),
            suspended_at_enter: AtomicU64::new(0),
            frames: (0..depth).map(|_| AtomicUsize::new(0)).collect(),
            caller_sps: (0..depth).map(|_| AtomicUsize::new(0)).collect(),
            unwinds: [const { AtomicUsize::new(0) }; UNWIND_NESTING],
            unwind_matches: AtomicU64::new(0),
            unwind_level: AtomicUsize::new(0),
        }
    }

    fn reset(&self) {
        self.depth.store(0, Ordering::Relaxed);
        self.max_depth.store(0, Ordering::Relaxed);
        for c in [
            &self.pushes,
            &self.pops,
            &self.unwound,
            &self.underflows,
            &self.mismatches,
            &self.suspended,
            &self.suspended_at_enter,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.unwind_level.store(0, Ordering::Relaxed);
    }

    #[inline(always)]
    fn begin(&self) -> u64 {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        s
    }

    #[inline(always)]
    fn end(&self, s: u64) {
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    #[inline(always)]
    fn push(&self, frame: usize, caller_sp: usize) {
        let s = self.begin();
        let mut d = self.depth.load(Ordering::Relaxed);
        if caller_sp != 0 {
            d = self.pop_returned(d, caller_sp);
        }
        if let Some(slot) = self.frames.get(d) {
            slot.store(frame, Ordering::Relaxed);
        }
        if let Some(slot) = self.caller_sps.get(d) {
            slot.store(caller_sp, Ordering::Relaxed);
        }
        self.depth.store(d + 1, Ordering::Relaxed);
        if d + 1 > self.max_depth.load(Ordering::Relaxed) {
            self.max_depth.store(d + 1, Ordering::Relaxed);
        }
        self.pushes
            .store(self.pushes.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.end(s);
    }

    /// Pops (as suspended) the stored top frames that cannot be callers of
    /// a method entered with `caller_sp`: those whose own caller stack
    /// pointer is not above it. Inside `begin`/`end`. Returns the new depth.
    #[inline(always)]
    fn pop_returned(&self, depth: usize, caller_sp: usize) -> usize {
        let mut d = depth;
        while d > 0 {
            let Some(top_sp) = self
                .caller_sps
                .get(d - 1)
                .map(|c| c.load(Ordering::Relaxed))
            else {
                // Frames beyond the capacity are not stored: unknown.
                break;
            };
            if top_sp == 0 || top_sp > caller_sp {
                break;
            }
            d -= 1;
        }
        if d != depth {
            self.depth.store(d, Ordering::Relaxed);
            for c in [&self.suspended, &self.suspended_at_enter] {
                c.store(
                    c.load(Ordering::Relaxed) + (depth - d) as u64,
                    Ordering::Relaxed,
                );
            }
        }
        d
    }

    /// The top frame, if stored.
    #[inline(always)]
    fn top(&self) -> Option<usize> {
        let d = self.depth.load(Ordering::Relaxed);
        d.checked_sub(1)
            .and_then(|i| self.frames.get(i))
            .map(|f| f.load(Ordering::Relaxed))
    }

    #[inline(always)]
    fn pop(&self, expected: Option<usize>, counter: &AtomicU64) {
        let mut d = self.depth.load(Ordering::Relaxed);
        if d == 0 {
            self.underflows.store(
                self.underflows.load(Ordering::Relaxed) + 1,
                Ordering::Relaxed,
            );
            return;
        }
        if let (Some(expected), Some(top)) = (expected, self.top()) {
            if top != expected {
                d = self.pop_to(expected, d);
            }
        }
        let s = self.begin();
        self.depth.store(d - 1, Ordering::Relaxed);
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.end(s);
    }

    /// A leave hook whose function is not the top frame (out of line: never
    /// taken by balanced code). If the function is found below the top, the
    /// frames above it ended without their leave hook and are popped as
    /// suspended, so the caller's leave pops its own frame; otherwise the
    /// leave is counted as a mismatch and the top frame is popped as before.
    #[cold]
    #[inline(never)]
    fn pop_to(&self, expected: usize, depth: usize) -> usize {
        let stored = depth.min(self.frames.len());
        let below = (0..stored.saturating_sub(1))
            .rev()
            .find(|&i| self.frames[i].load(Ordering::Relaxed) == expected);
        match below {
            Some(i) if depth <= self.frames.len() => {
                let above = (depth - 1 - i) as u64;
                let s = self.begin();
                self.depth.store(i + 1, Ordering::Relaxed);
                self.suspended.store(
                    self.suspended.load(Ordering::Relaxed) + above,
                    Ordering::Relaxed,
                );
                self.end(s);
                i + 1
            }
            _ => {
                self.mismatches.store(
                    self.mismatches.load(Ordering::Relaxed) + 1,
                    Ordering::Relaxed,
                );
                depth
            }
        }
    }

    fn stats(&self) -> StackStats {
        StackStats {
            depth: self.depth.load(Ordering::Relaxed),
            max_depth: self.max_depth.load(Ordering::Relaxed),
            pushes: self.pushes.load(Ordering::Relaxed),
            pops: self.pops.load(Ordering::Relaxed),
            unwound: self.unwound.load(Ordering::Relaxed),
            underflows: self.underflows.load(Ordering::Relaxed),
            mismatches: self.mismatches.load(Ordering::Relaxed),
            suspended: self.suspended.load(Ordering::Relaxed),
            suspended_at_enter: self.suspended_at_enter.load(Ordering::Relaxed),
        }
    }

    /// A consistent copy of the stored frames (bottom first) and the counters.
    fn read(&self, out: &mut Vec<ShadowFrame>) -> StackStats {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            out.clear();
            let stats = self.stats();
            let stored = stats.depth.min(self.frames.len());
            out.extend(
                self.frames[..stored]
                    .iter()
                    .map(|f| ShadowFrame(f.load(Ordering::Relaxed))),
            );
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return stats;
            }
        }
    }
}

struct Pool {
    stacks: Box<[ThreadStack]>,
    exhausted: AtomicU64,
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// Allocates the pool: `threads` stacks of `depth` frames each. Call it
/// from `initialize` to choose the sizes; otherwise the first hook that
/// uses a shadow stack allocates [`DEFAULT_THREADS`] × [`DEFAULT_DEPTH`].
/// Returns `false` if the pool already existed (the sizes are not changed).
pub fn preallocate(threads: usize, depth: usize) -> bool {
    let mut created = false;
    POOL.get_or_init(|| {
        created = true;
        Pool {
            stacks: (0..threads.max(1))
                .map(|_| ThreadStack::new(depth.max(1)))
                .collect(),
            exhausted: AtomicU64::new(0),
        }
    });
    created
}

fn pool() -> &'static Pool {
    POOL.get_or_init(|| Pool {
        stacks: (0..DEFAULT_THREADS)
            .map(|_| ThreadStack::new(DEFAULT_DEPTH))
            .collect(),
        exhausted: AtomicU64::new(0),
    })
}

/// Counters of stacks whose threads exited, summed.
static RETIRED: Mutex<StackStats> = Mutex::new(StackStats {
    depth: 0,
    max_depth: 0,
    pushes: 0,
    pops: 0,
    unwound: 0,
    underflows: 0,
    mismatches: 0,
    suspended: 0,
    suspended_at_enter: 0,
});

fn add(total: &mut StackStats, st: StackStats) {
    total.depth += st.depth;
    total.max_depth = total.max_depth.max(st.max_depth);
    total.pushes += st.pushes;
    total.pops += st.pops;
    total.unwound += st.unwound;
    total.underflows += st.underflows;
    total.mismatches += st.mismatches;
    total.suspended += st.suspended;
    total.suspended_at_enter += st.suspended_at_enter;
}

/// Gives the thread's stack back to the pool when the thread exits, after
/// adding its counters to the retired totals.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let stack = LOCAL
            .try_with(|l| l.current.replace(core::ptr::null()))
            .unwrap_or(core::ptr::null());
        if !stack.is_null() {
            // SAFETY: [local-memory] `current` only holds pointers into the pool, which lives
            // for the rest of the process.
            let stack = unsafe { &*stack };
            if let Ok(mut retired) = RETIRED.lock() {
                add(&mut retired, stack.stats());
            }
            stack.reset();
            stack.owner.store(0, Ordering::Release);
        }
    }
}

/// What a thread keeps for its shadow stack, in one thread-local (so the
/// enter hook's part reaches both with one thread-local access).
struct Local {
    /// The thread's stack (null until its first hook).
    current: Cell<*const ThreadStack>,
    /// The caller stack pointer of the method whose enter hook is running
    /// on this thread (0: none known), set by the SDK's fast-path enter
    /// handler and taken by [`enter`].
    entering_caller_sp: Cell<usize>,
}

thread_local! {
    // reentrancy: none: this thread's own shadow stack pointer (set once when the thread first needs it) and the caller stack pointer handed from the fast-path enter handler to the `enter` it makes next; the hooks run no user code while they change them
    static LOCAL: Local = const {
        Local {
            current: Cell::new(core::ptr::null()),
            entering_caller_sp: Cell::new(0),
        }
    };
    // reentrancy: none: no value: its destructor gives the thread's shadow stack back when the thread ends
    static RELEASE: Release = const { Release };
}

/// The thread's stack, null if it has none yet.
#[inline(always)]
fn current() -> *const ThreadStack {
    LOCAL
        .try_with(|l| l.current.get())
        .unwrap_or(core::ptr::null())
}

/// Records the caller stack pointer the JIT passed to the enter hook now
/// running on this thread, for the [`enter`] it makes.
#[inline(always)]
pub(crate) fn set_entering_caller_sp(caller_sp: usize) {
    let _ = LOCAL.try_with(|l| l.entering_caller_sp.set(caller_sp));
}

/// `sp` if it is a stack address above this call, else 0 (the caller of a
/// method in its prolog is above every frame of the hook, and within 1 MiB
/// of it: a method's fixed frame at its prolog is far smaller).
#[inline(always)]
fn plausible_caller_sp(sp: usize) -> usize {
    if sp == 0 {
        return 0;
    }
    let here = &sp as *const usize as usize;
    if sp > here && sp - here < (1 << 20) {
        sp
    } else {
        0
    }
}

fn os_thread_id() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: [os-api] gettid has no preconditions.
        (unsafe { libc::gettid() }) as u64
    }
    #[cfg(windows)]
    {
        extern "system" {
            fn GetCurrentThreadId() -> u32;
        }
        // SAFETY: [os-api] GetCurrentThreadId has no preconditions.
        (unsafe { GetCurrentThreadId() }) as u64
    }
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // reentrancy: none: a number naming the thread, set once
        thread_local!(static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed));
        ID.with(|id| *id)
    }
}

#[cold]
fn acquire() -> *const ThreadStack {
    let pool = pool();
    let owner = os_thread_id() + 1;
    for stack in pool.stacks.iter() {
        if stack
            .owner
            .compare_exchange(0, owner, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            stack.reset();
            let ptr = stack as *const ThreadStack;
            let _ = LOCAL.try_with(|l| l.current.set(ptr));
            // Registers the release at thread exit.
            let _ = RELEASE.try_with(|_| ());
            super::shadow_stacks_in_use();
            return ptr;
        }
    }
    pool.exhausted.fetch_add(1, Ordering::Relaxed);
    core::ptr::null()
}

#[inline(always)]
fn with_current(f: impl FnOnce(&ThreadStack)) {
    let mut ptr = current();
    if ptr.is_null() {
        ptr = acquire();
        if ptr.is_null() {
            return;
        }
    }
    // SAFETY: [local-memory] a non-null `current` points into the pool, which is never freed,
    // and this thread owns the stack until it exits.
    f(unsafe { &*ptr })
}

/// The enter hook's part: pushes `function`. Called from the enter hook on
/// the ELT fast path, it first pops the frames the method's caller stack
/// pointer shows returned without their leave hook (see the module docs).
#[inline(always)]
pub fn enter<F>(function: &Hooked<F>) {
    let frame = function.function().0;
    let passing = super::passing_caller_sps();
    // The stack and the recorded caller stack pointer (taken: it belongs
    // to this enter only) in one thread-local access.
    let (mut ptr, caller_sp) = LOCAL
        .try_with(|l| {
            let sp = if passing {
                l.entering_caller_sp.replace(0)
            } else {
                0
            };
            (l.current.get(), sp)
        })
        .unwrap_or((core::ptr::null(), 0));
    let caller_sp = plausible_caller_sp(caller_sp);
    if ptr.is_null() {
        ptr = acquire();
        if ptr.is_null() {
            return;
        }
    }
    // SAFETY: [local-memory] as in `with_current`.
    unsafe { &*ptr }.push(frame, caller_sp);
}

/// The leave hook's part: pops the top frame (counting a mismatch if it is
/// not `function`).
#[inline(always)]
pub fn leave<F>(function: &Hooked<F>) {
    let frame = function.function().0;
    with_current(|s| s.pop(Some(frame), &s.pops));
}

/// The tailcall hook's part: the frame is replaced by its callee's, so it
/// is popped like a leave.
#[inline(always)]
pub fn tailcall<F>(function: &Hooked<F>) {
    leave(function)
}

/// `ExceptionUnwindFunctionEnter`: the exception starts unwinding a frame
/// of `function` (hooked or not). Delivered by the SDK.
pub(crate) fn unwind_function_enter(function: RawFunctionId) {
    with_current(|s| {
        let level = s.unwind_level.load(Ordering::Relaxed);
        let top_matches = s.top().map(|top| top == function.0).unwrap_or(false);
        if let Some(slot) = s.unwinds.get(level) {
            slot.store(function.0, Ordering::Relaxed);
            let bit = 1u64 << level;
            let m = s.unwind_matches.load(Ordering::Relaxed);
            let m = if top_matches { m | bit } else { m & !bit };
            s.unwind_matches.store(m, Ordering::Relaxed);
        }
        s.unwind_level.store(level + 1, Ordering::Relaxed);
    });
}

/// `ExceptionUnwindFunctionLeave`: the frame is gone; pops it if it was the
/// top of the shadow stack. Delivered by the SDK.
pub(crate) fn unwind_function_leave() {
    with_current(|s| {
        let level = s.unwind_level.load(Ordering::Relaxed);
        if level == 0 {
            return;
        }
        s.unwind_level.store(level - 1, Ordering::Relaxed);
        let matched = level - 1 < UNWIND_NESTING
            && s.unwind_matches.load(Ordering::Relaxed) & (1u64 << (level - 1)) != 0;
        if matched {
            s.pop(None, &s.unwound);
        }
    });
}

/// `ExceptionCatcherEnter`: the frame of `function` catches and goes on
/// running. If an unwind of that frame is pending it is dropped without
/// popping the frame. Delivered by the SDK.
pub(crate) fn catcher_enter(function: RawFunctionId) {
    with_current(|s| {
        let level = s.unwind_level.load(Ordering::Relaxed);
        let Some(i) = level.checked_sub(1) else {
            return;
        };
        let pending = s.unwinds.get(i).map(|p| p.load(Ordering::Relaxed));
        if pending == Some(function.0) {
            s.unwind_level.store(i, Ordering::Relaxed);
        }
    });
}

/// The calling thread's current depth (0 if it has no stack yet).
pub fn current_depth() -> usize {
    let ptr = current();
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: [local-memory] as in `with_current`.
    unsafe { (*ptr).depth.load(Ordering::Relaxed) }
}

/// A consistent copy of the stack of the thread with OS thread ID
/// `os_thread`, bottom frame first, with its counters; `None` if that
/// thread has no stack. Never blocks the thread.
pub fn snapshot(os_thread: u64, frames: &mut Vec<ShadowFrame>) -> Option<StackStats> {
    let pool = POOL.get()?;
    let stack = pool
        .stacks
        .iter()
        .find(|s| s.owner.load(Ordering::Acquire) == os_thread + 1)?;
    Some(stack.read(frames))
}

/// Calls `f(os_thread_id, stats, frames)` for every thread that has a stack.
pub fn for_each_thread(mut f: impl FnMut(u64, StackStats, &[ShadowFrame])) {
    let Some(pool) = POOL.get() else { return };
    let mut frames = Vec::new();
    for stack in pool.stacks.iter() {
        let owner = stack.owner.load(Ordering::Acquire);
        if owner != 0 {
            let stats = stack.read(&mut frames);
            f(owner - 1, stats, &frames);
        }
    }
}

/// The calling thread's OS thread ID, as [`snapshot`] and
/// [`for_each_thread`] use it.
pub fn current_os_thread() -> u64 {
    os_thread_id()
}

/// Hook calls that found no free stack in the pool (their threads are not
/// tracked).
pub fn exhausted() -> u64 {
    POOL.get()
        .map_or(0, |p| p.exhausted.load(Ordering::Relaxed))
}

/// Sums of the counters of every thread's stack, live threads and exited
/// ones (an exited thread's `depth` is what it left unbalanced).
pub fn totals() -> StackStats {
    let mut t = RETIRED.lock().map(|r| *r).unwrap_or_default();
    let Some(pool) = POOL.get() else { return t };
    for s in pool.stacks.iter() {
        if s.owner.load(Ordering::Acquire) != 0 {
            add(&mut t, s.stats());
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(function: usize) -> &'static Hooked<()> {
        Box::leak(Box::new(Hooked::for_tests(RawFunctionId(function))))
    }

    #[test]
    fn push_pop_unwind_and_snapshot_from_another_thread() {
        let (a, b, c) = (record(0x1000), record(0x2000), record(0x3000));
        let me = current_os_thread();
        enter(a);
        enter(b);
        enter(c);
        assert_eq!(current_depth(), 3);
        // A sampler thread reads the stack, bottom first.
        let frames = std::thread::spawn(move || {
            let mut frames = Vec::new();
            snapshot(me, &mut frames)
                .map(|_| frames.iter().map(|f| f.function().0).collect::<Vec<_>>())
        })
        .join()
        .unwrap();
        assert_eq!(frames, Some(vec![0x1000, 0x2000, 0x3000]));
        // An exception unwinds c (top) and an unhooked frame, b catches.
        unwind_function_enter(RawFunctionId(0x3000));
        unwind_function_leave();
        unwind_function_enter(RawFunctionId(0x9999));
        unwind_function_leave();
        unwind_function_enter(RawFunctionId(0x2000));
        catcher_enter(RawFunctionId(0x2000));
        assert_eq!(current_depth(), 2);
        leave(b);
        tailcall(a);
        assert_eq!(current_depth(), 0);
        let mut frames = Vec::new();
        let stats = snapshot(me, &mut frames).unwrap();
        assert_eq!((stats.pushes, stats.pops, stats.unwound), (3, 2, 1));
        assert_eq!((stats.underflows, stats.mismatches), (0, 0));
        leave(a);
        let stats = snapshot(me, &mut frames).unwrap();
        assert_eq!(stats.underflows, 1);
    }

    /// An enter as the fast path makes it: the JIT's caller stack pointer
    /// recorded first, `offset` bytes above a local of the caller.
    fn enter_at(function: &Hooked<()>, top_of_stack: usize, offset: usize) {
        set_entering_caller_sp(top_of_stack + offset);
        enter(function);
    }

    #[test]
    fn an_enter_above_a_frame_pops_it_as_returned() {
        // As on a runtime that can suspend frames, once shadow stacks are
        // in use (the fast path then passes caller stack pointers).
        super::super::pass_caller_sps_for_tests();
        std::thread::spawn(|| {
            let local = 0u8;
            let base = &local as *const u8 as usize;
            let (dispatch_a, callee, dispatch_b) = (record(0xA000), record(0xB000), record(0xC000));
            // A thread-pool thread: the unhooked dispatcher resumes A (its
            // caller stack pointer 0x800 above here), A calls B (0x700),
            // B suspends, A suspends: both return without a leave hook.
            enter_at(dispatch_a, base, 0x800);
            enter_at(callee, base, 0x700);
            assert_eq!(current_depth(), 2);
            // The dispatcher's next resume, from the same call site: A and
            // B returned.
            enter_at(dispatch_b, base, 0x800);
            assert_eq!(current_depth(), 1);
            leave(dispatch_b);
            let mut frames = Vec::new();
            let stats = snapshot(current_os_thread(), &mut frames).unwrap();
            assert_eq!(stats.depth, 0);
            assert_eq!((stats.pushes, stats.pops, stats.suspended), (3, 1, 2));
            assert_eq!(stats.suspended_at_enter, 2);
            assert_eq!((stats.mismatches, stats.underflows), (0, 0));
            // A callee (lower caller stack pointer) keeps its callers; an
            // implausible value (not above this thread's frames) is ignored.
            enter_at(dispatch_a, base, 0x800);
            enter_at(callee, base, 0x700);
            set_entering_caller_sp(1);
            enter(dispatch_b);
            assert_eq!(current_depth(), 3);
            leave(dispatch_b);
            leave(callee);
            leave(dispatch_a);
            let stats = snapshot(current_os_thread(), &mut frames).unwrap();
            assert_eq!((stats.depth, stats.suspended, stats.mismatches), (0, 2, 0));
        })
        .join()
        .unwrap();
    }
}
