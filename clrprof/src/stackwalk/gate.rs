//! `ThreadDestroyed` waits for walks of that thread: the [`ThreadGate`].

use crate::ids::RawThreadId;
use core::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// How many recently destroyed threads the gate remembers.
const DESTROYED_SLOTS: usize = 64;

/// Keeps walks away from threads the runtime has destroyed, lock-free.
///
/// A walker announces the thread it is about to walk ([`ThreadGate::enter`]);
/// the gate is an SDK component ([`ThreadGate::register`]), so the SDK
/// delivers `ThreadDestroyed` to it, which marks the thread as gone and
/// waits until no walk of it is running, before the runtime frees it. Both sides use sequentially
/// consistent atomics in opposite order (announce, then check), so either the
/// walker sees the thread marked and skips it, or the destroyer sees the walk
/// and waits for it: a thread is never walked after its `ThreadDestroyed`
/// has returned.
///
/// No lock is involved, so a walker suspended in the middle of a walk never
/// blocks anything but the one `ThreadDestroyed` that waits for it, and that
/// waiter holds nothing the walker needs (rule 4 of the [module](super)).
///
/// Destroyed IDs are remembered in a small ring until `ThreadCreated` reports
/// the same ID again (the runtime reuses the memory of a `Thread`).
pub struct ThreadGate {
    /// The thread each walker is walking (0 when none); one slot per walker.
    walking: [AtomicUsize; 4],
    destroyed: [AtomicUsize; DESTROYED_SLOTS],
    next_destroyed: AtomicUsize,
    /// The runtime whose thread events the gate hears ([`register`](Self::register));
    /// `u32::MAX` for the SDK's own gates, which their component feeds.
    runtime: u32,
}

/// A walk announced to a [`ThreadGate`]; ends (and releases the waiting
/// `ThreadDestroyed`) when dropped.
pub struct GateEntry<'g> {
    slot: &'g AtomicUsize,
}

impl Drop for GateEntry<'_> {
    fn drop(&mut self) {
        self.slot.store(0, SeqCst);
    }
}

impl ThreadGate {
    /// A gate for the runtime of `info`, registered as an SDK component in
    /// `Initialize` (it adds `MONITOR_THREADS` to the event mask): from the
    /// first thread on, the SDK delivers `ThreadCreated` and
    /// `ThreadDestroyed` to it.
    pub fn register(
        info: &crate::info::ProfilerInfo,
    ) -> crate::error::Result<std::sync::Arc<ThreadGate>> {
        let gate = std::sync::Arc::new(ThreadGate {
            runtime: info.runtime_slot().0,
            ..ThreadGate::new()
        });
        info.register(std::sync::Arc::new(GateComponent(gate.clone())))?;
        Ok(gate)
    }

    /// An empty gate that hears of no threads: the SDK's own components
    /// (the sampler) deliver its events themselves.
    pub(crate) const fn new() -> Self {
        ThreadGate {
            walking: [const { AtomicUsize::new(0) }; 4],
            destroyed: [const { AtomicUsize::new(0) }; DESTROYED_SLOTS],
            next_destroyed: AtomicUsize::new(0),
            runtime: u32::MAX,
        }
    }

    /// Whether the gate hears the thread events of the runtime in `slot`
    /// (the SDK's own gates hear those of the runtime that feeds them).
    pub(crate) fn hears(&self, slot: crate::runtimes::RuntimeSlot) -> bool {
        self.runtime == u32::MAX || self.runtime == slot.0
    }

    fn is_destroyed(&self, thread: usize) -> bool {
        self.destroyed.iter().any(|d| d.load(SeqCst) == thread)
    }

    // provenance: none: the gate only compares the thread's number with those it heard destroyed
    /// Announces a walk of `thread` by walker `walker` (0..4). Returns `None`
    /// if the thread has been destroyed (do not walk it). Allocation-free.
    pub fn enter(&self, walker: usize, thread: RawThreadId) -> Option<GateEntry<'_>> {
        let slot = &self.walking[walker % self.walking.len()];
        if thread.0 == 0 {
            return None;
        }
        slot.store(thread.0, SeqCst);
        if self.is_destroyed(thread.0) {
            slot.store(0, SeqCst);
            return None;
        }
        Some(GateEntry { slot })
    }

    /// `ThreadDestroyed`: marks `thread` gone, then waits until no walk of
    /// it is running. Returns how many times it had to wait.
    pub(crate) fn thread_destroyed(&self, thread: RawThreadId) -> u64 {
        let i = self.next_destroyed.fetch_add(1, SeqCst) % DESTROYED_SLOTS;
        self.destroyed[i].store(thread.0, SeqCst);
        let mut waits = 0u64;
        while self.walking.iter().any(|w| w.load(SeqCst) == thread.0) {
            waits += 1;
            std::thread::yield_now();
        }
        waits
    }

    /// `ThreadCreated`: a new thread may reuse a destroyed one's ID.
    pub(crate) fn thread_created(&self, thread: RawThreadId) {
        for d in &self.destroyed {
            let _ = d.compare_exchange(thread.0, 0, SeqCst, SeqCst);
        }
    }
}

/// The SDK component behind [`ThreadGate::register`].
struct GateComponent(std::sync::Arc<ThreadGate>);

impl crate::component::Component for GateComponent {
    fn name(&self) -> &'static str {
        "thread-gate"
    }

    fn masks(&self) -> crate::event_mask::EventMasks {
        crate::event_mask::EventMask::MONITOR_THREADS.into()
    }

    fn thread_created(&self, _info: &crate::info::ProfilerInfo, thread: crate::ids::ThreadId<'_>) {
        self.0.thread_created(thread.to_raw());
    }

    fn thread_destroyed(
        &self,
        _info: &crate::info::ProfilerInfo,
        thread: crate::ids::ThreadId<'_>,
    ) {
        self.0.thread_destroyed(thread.to_raw());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn destroyed_threads_are_not_entered_until_recreated() {
        let gate = ThreadGate::new();
        let t = RawThreadId(0x1000);
        assert!(gate.enter(0, t).is_some());
        gate.thread_destroyed(t);
        assert!(gate.enter(0, t).is_none());
        gate.thread_created(t);
        assert!(gate.enter(0, t).is_some());
        assert!(gate.enter(0, RawThreadId(0)).is_none());
    }

    #[test]
    fn thread_destroyed_waits_for_the_running_walk() {
        let gate = Arc::new(ThreadGate::new());
        let t = RawThreadId(0x2000);
        let entry_gate = gate.clone();
        let walking = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (w, d) = (walking.clone(), done.clone());
        let walker = std::thread::spawn(move || {
            let entry = entry_gate.enter(1, t).expect("not destroyed yet");
            w.store(true, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(100));
            d.store(true, SeqCst);
            drop(entry);
        });
        while !walking.load(SeqCst) {
            std::thread::yield_now();
        }
        let waits = gate.thread_destroyed(t);
        assert!(
            done.load(SeqCst),
            "ThreadDestroyed returned while the walk ran"
        );
        assert!(waits > 0);
        walker.join().unwrap();
    }

    #[test]
    fn a_registered_gate_hears_only_its_runtime() {
        use crate::runtimes::RuntimeSlot;
        let registered = ThreadGate {
            runtime: 3,
            ..ThreadGate::new()
        };
        assert!(registered.hears(RuntimeSlot(3)));
        assert!(!registered.hears(RuntimeSlot(4)), "another runtime's walk");
        assert!(
            ThreadGate::new().hears(RuntimeSlot(4)),
            "the SDK's own gates"
        );
    }
}
