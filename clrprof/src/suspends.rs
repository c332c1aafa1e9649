//! `RuntimeThreadSuspended` calls held back until the runtime's suspension
//! has finished.
//!
//! On Windows the runtime suspends a thread that runs managed code with the
//! OS (`SuspendThread`) to see where it stopped, and it reports
//! `RuntimeThreadSuspended` for that thread from the suspending thread
//! *while the target is still OS-suspended* (CoreCLR's
//! `Thread::SuspendThread`, threadsuspend.cpp, calls the profiler after the
//! OS suspension succeeded and before `ResumeThread`). The target can be
//! stopped anywhere, holding the process heap's lock or any other lock: a
//! callback that allocates, logs or takes a lock then waits for a thread
//! that waits for it. Under Wine this hung the torture profiler on both
//! Windows legs (the application's main thread suspended inside
//! `RtlFreeHeap`, the suspending thread waiting for the heap lock in the
//! profiler's callback). Linux runtimes have no such path.
//!
//! So the SDK, on every platform, does not run profiler code in
//! `RuntimeThreadSuspended` between `RuntimeSuspendStarted` and
//! `RuntimeSuspendFinished`: it records the thread in a fixed array (no
//! allocation, no lock) and delivers the held calls, in order, at
//! `RuntimeSuspendFinished` (or `RuntimeSuspendAborted`), just before that
//! callback. No thread is OS-suspended by the runtime then, and the
//! `ThreadID`s are still valid: the runtime holds its thread-store lock from
//! the start of a suspension until it resumes, so no thread is destroyed in
//! between. The runtime documents `RuntimeThreadSuspended` as arriving at any
//! time between `RuntimeSuspendStarted` and `RuntimeResumeStarted`; the
//! delayed calls stay inside that window.

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};

thread_local! {
    // reentrancy: suspension-held
    /// Runtime suspensions this thread holds (a `RuntimeSuspension` of the
    /// stack-walk module alive), counted by it.
    pub(crate) static SUSPENSIONS_HELD: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// Whether the calling thread holds a runtime suspension: calls that wait
/// for the runtime's threads (a forced collection) would wait for ever.
pub(crate) fn thread_holds_suspension() -> bool {
    SUSPENSIONS_HELD.with(|h| h.get() > 0)
}

/// How many held calls one suspension can keep; more are counted as
/// dropped and logged when the suspension finishes.
pub(crate) const HELD: usize = 512;

/// The held `RuntimeThreadSuspended` calls of one runtime.
pub(crate) struct HeldThreadSuspends {
    /// Between `RuntimeSuspendStarted` and `RuntimeSuspendFinished`/`Aborted`.
    suspending: AtomicBool,
    len: AtomicUsize,
    threads: [AtomicUsize; HELD],
    dropped: AtomicU64,
}

impl HeldThreadSuspends {
    pub(crate) const fn new() -> Self {
        HeldThreadSuspends {
            suspending: AtomicBool::new(false),
            len: AtomicUsize::new(0),
            threads: [const { AtomicUsize::new(0) }; HELD],
            dropped: AtomicU64::new(0),
        }
    }

    /// `RuntimeSuspendStarted`: hold the thread suspensions from now on.
    pub(crate) fn suspend_started(&self) {
        self.len.store(0, SeqCst);
        self.suspending.store(true, SeqCst);
    }

    /// `RuntimeThreadSuspended` of `thread`: `true` if it is held (deliver
    /// nothing now). Allocation-free and lock-free.
    pub(crate) fn hold(&self, thread: usize) -> bool {
        if !self.suspending.load(SeqCst) {
            return false;
        }
        let i = self.len.fetch_add(1, SeqCst);
        match self.threads.get(i) {
            Some(slot) => slot.store(thread, SeqCst),
            None => {
                self.dropped.fetch_add(1, SeqCst);
            }
        }
        true
    }

    /// `RuntimeSuspendFinished` / `RuntimeSuspendAborted`: stops holding and
    /// hands each held thread to `deliver`, in order. Returns how many calls
    /// did not fit (lost) since the previous release.
    pub(crate) fn release(&self, mut deliver: impl FnMut(usize)) -> u64 {
        self.suspending.store(false, SeqCst);
        let n = self.len.swap(0, SeqCst).min(HELD);
        for slot in &self.threads[..n] {
            deliver(slot.load(SeqCst));
        }
        self.dropped.swap(0, SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_only_inside_a_suspension_and_delivered_in_order() {
        let h = HeldThreadSuspends::new();
        assert!(!h.hold(7), "outside a suspension: delivered at once");
        h.suspend_started();
        assert!(h.hold(1));
        assert!(h.hold(2));
        let mut seen = Vec::new();
        assert_eq!(h.release(|t| seen.push(t)), 0);
        assert_eq!(seen, [1, 2]);
        assert!(!h.hold(3), "after the suspension finished: at once");
        let mut again = Vec::new();
        h.release(|t| again.push(t));
        assert!(again.is_empty(), "nothing is delivered twice");
    }

    #[test]
    fn overflow_is_counted_not_written_past_the_end() {
        let h = HeldThreadSuspends::new();
        h.suspend_started();
        for t in 0..HELD + 3 {
            assert!(h.hold(t + 1));
        }
        let mut n = 0;
        assert_eq!(h.release(|_| n += 1), 3);
        assert_eq!(n, HELD);
    }
}
