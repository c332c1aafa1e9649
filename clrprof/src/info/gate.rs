//! The gate every Info call passes: no call reaches a runtime that retired
//! the profiler, and the runtime is retired only after the calls that
//! passed the gate have returned.
//!
//! Why: on detach and after a failed `Initialize` the runtime's
//! `EEToProfInterfaceImpl` destructor (eetoprofinterfaceimpl.cpp) releases
//! the profiler's callback object, unloads the library and *deletes* its
//! `ProfToEEInterfaceImpl` — the object behind every `ICorProfilerInfoN`
//! pointer — whatever references the profiler still holds (its `AddRef`
//! and `Release` are no-ops that return 1: "the VM controls the lifetime",
//! proftoeeinterfaceimpl.cpp). After `Shutdown` the profiling API forbids
//! Info calls (the object is kept then: the destructor skips the delete
//! while the EE shuts down). A [`RuntimeHandle`](super::RuntimeHandle) is
//! `Clone + Send + Sync + 'static`, so a profiler can keep one past any of
//! these; the gate turns every later call into
//! [`Error::Detached`](crate::error::Error::Detached).
//!
//! How, and what it costs:
//! - Calls made through the handle the SDK lends inside a callback the
//!   runtime is issuing ([`ProfilerInfo`](super::ProfilerInfo) in a
//!   callback, the `Initialize` scope) are not counted: the runtime deletes
//!   the object only after the callbacks have drained (it waits for every
//!   thread's evacuation counter before `ProfilerDetachSucceeded`, and a
//!   failed `Initialize` issues no further callback). They pay one relaxed
//!   load of the `live` flag and a branch (the hot paths: `ObjectAllocated`
//!   → `GetObjectSize`, JIT and GC callbacks).
//! - Every other call (a handle kept in a `static`, moved to a thread, a
//!   clone — `Clone` always makes a counted handle) increments a counter on
//!   its own cache line (one of [`STRIPES`], chosen per thread, so threads
//!   do not contend), then reads the flag (both sequentially consistent),
//!   and decrements (release) when the call returned: two uncontended
//!   locked read-modify-writes per call on x86-64. Measured (`gate_cost`
//!   below, release build, a 2-core VM at load 8, three runs): 1.9–3.2 ns
//!   per call inside a callback against 0.6–2.0 ns for an empty loop (so
//!   about 1.3 ns), 39–44 ns for a counted call, the same as the single
//!   shared counter it replaces (38–65 ns) when alone; two threads at once
//!   cost 79–101 ns each on their own stripes against 83–121 ns on one
//!   shared counter (on that loaded machine mostly time slicing). An
//!   asymmetric fence (`membarrier` / `FlushProcessWriteBuffers` in
//!   `retire`) with per-thread slots would bring the counted path down to
//!   plain stores; not done.
//! - [`Gate::retire`] clears the flag (sequentially consistent) and waits
//!   until every stripe is zero: a call either saw the flag cleared and
//!   made no call, or was counted before `retire` looked and is waited for.
//!   `retire` runs only inside callbacks the runtime issues (end of
//!   `Shutdown`, of `ProfilerDetachSucceeded`, of a failed `Initialize`,
//!   and the runtime's last `Release`), never inside a counted call, so it
//!   never waits for itself.

use core::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How many counters calls are spread over.
pub(crate) const STRIPES: usize = 16;

/// A counter alone on its cache line (128 bytes: adjacent-line prefetch).
#[repr(align(128))]
#[derive(Default)]
struct Stripe(AtomicUsize);

/// Liveness of one runtime's Info object, and the calls in flight on it.
pub(crate) struct Gate {
    live: AtomicBool,
    stripes: [Stripe; STRIPES],
}

thread_local! {
    // reentrancy: none: the index of this thread's stripe of the gate's counters, chosen once
    /// This thread's stripe, 0 until first used (then 1 + index). `const`
    /// and without a destructor, so no thread-exit hook is registered.
    static STRIPE: Cell<u8> = const { Cell::new(0) };
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

#[inline]
fn my_stripe() -> usize {
    STRIPE
        .try_with(|s| {
            let v = s.get();
            if v != 0 {
                return usize::from(v - 1);
            }
            let i = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
            s.set(i as u8 + 1);
            i
        })
        // Thread-locals already destroyed (a call from another TLS
        // destructor): any stripe is correct, only less private.
        .unwrap_or(0)
}

/// A passed gate: the call it covers may use the runtime's object until
/// this is dropped.
pub(crate) struct Entry<'g> {
    stripe: Option<&'g AtomicUsize>,
}

impl Drop for Entry<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(s) = self.stripe {
            s.fetch_sub(1, Ordering::Release);
        }
    }
}

impl Gate {
    pub(crate) fn new() -> Self {
        Gate {
            live: AtomicBool::new(true),
            stripes: Default::default(),
        }
    }

    /// `false` once retired.
    #[inline]
    pub(crate) fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }

    /// Passes the gate for a call made inside a callback the runtime is
    /// issuing (not counted, see the module docs), or `None` once retired.
    #[inline]
    pub(crate) fn enter_in_callback(&self) -> Option<Entry<'_>> {
        self.live
            .load(Ordering::Relaxed)
            .then_some(Entry { stripe: None })
    }

    /// Passes the gate for a call from anywhere (counted), or `None` once
    /// retired.
    #[inline]
    pub(crate) fn enter(&self) -> Option<Entry<'_>> {
        let stripe = &self.stripes[my_stripe()].0;
        // Counted before the flag is read, and `retire` clears the flag
        // before it reads the counters (all SeqCst): either this call sees
        // the flag cleared, or `retire` sees it counted and waits.
        stripe.fetch_add(1, Ordering::SeqCst);
        if self.live.load(Ordering::SeqCst) {
            Some(Entry {
                stripe: Some(stripe),
            })
        } else {
            stripe.fetch_sub(1, Ordering::Release);
            None
        }
    }

    /// [`enter`](Self::enter) for a state that spans several calls and is
    /// not tied to a borrow of the gate: the stripe to give back to
    /// [`leave`](Self::leave), or `None` once retired.
    pub(crate) fn enter_held(&self) -> Option<usize> {
        let i = my_stripe();
        let stripe = &self.stripes[i].0;
        stripe.fetch_add(1, Ordering::SeqCst);
        if self.live.load(Ordering::SeqCst) {
            Some(i)
        } else {
            stripe.fetch_sub(1, Ordering::Release);
            None
        }
    }

    /// Ends an [`enter_held`](Self::enter_held).
    pub(crate) fn leave(&self, stripe: usize) {
        self.stripes[stripe].0.fetch_sub(1, Ordering::Release);
    }

    /// Stops every later call and waits for the counted calls in flight.
    /// Returns `true` the first time.
    pub(crate) fn retire(&self) -> bool {
        let first = self.live.swap(false, Ordering::SeqCst);
        for s in &self.stripes {
            while s.0.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn retire_refuses_later_calls_and_waits_for_calls_in_flight() {
        let gate = Arc::new(Gate::new());
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let finished = Arc::new(AtomicBool::new(false));
        let worker = {
            let gate = gate.clone();
            let finished = finished.clone();
            std::thread::spawn(move || {
                let entry = gate.enter().expect("live");
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                finished.store(true, Ordering::SeqCst);
                drop(entry);
            })
        };
        entered_rx.recv().unwrap();
        let retirer = {
            let gate = gate.clone();
            let finished = finished.clone();
            std::thread::spawn(move || {
                gate.retire();
                // The call in flight finished before retire returned.
                finished.load(Ordering::SeqCst)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!retirer.is_finished(), "retire must wait for the call");
        assert!(gate.enter().is_none() && gate.enter_in_callback().is_none());
        release_tx.send(()).unwrap();
        worker.join().unwrap();
        assert!(retirer.join().unwrap());
        assert!(!gate.is_live());
        assert!(!gate.retire(), "only the first retire reports it");
    }
}

/// The gate's cost, measured (release build):
/// `cargo test --release -p clrprof --lib gate_cost -- --ignored --nocapture`.
#[cfg(test)]
mod cost {
    use super::*;
    use std::hint::black_box;
    use std::time::Instant;

    const N: u32 = 20_000_000;

    fn per_call(f: impl Fn()) -> f64 {
        let start = Instant::now();
        for _ in 0..N {
            f();
        }
        start.elapsed().as_nanos() as f64 / f64::from(N)
    }

    #[test]
    #[ignore = "a measurement, not a check; run in release"]
    fn gate_cost() {
        let gate = Gate::new();
        let none = per_call(|| {
            black_box(&gate);
        });
        let in_callback = per_call(|| {
            black_box(gate.enter_in_callback());
        });
        let counted = per_call(|| {
            black_box(gate.enter());
        });
        // The design before the gate: one counter per runtime, both RMWs
        // SeqCst, shared by every thread.
        let single = AtomicUsize::new(0);
        let one_counter = per_call(|| {
            black_box(&single).fetch_add(1, Ordering::SeqCst);
            black_box(gate.live.load(Ordering::SeqCst));
            black_box(&single).fetch_sub(1, Ordering::SeqCst);
        });
        let shared = std::sync::Arc::new(AtomicUsize::new(0));
        let other_single = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                per_call(|| {
                    black_box(&*shared).fetch_add(1, Ordering::SeqCst);
                    black_box(&*shared).fetch_sub(1, Ordering::SeqCst);
                })
            })
        };
        let contended_single = per_call(|| {
            black_box(&*shared).fetch_add(1, Ordering::SeqCst);
            black_box(&*shared).fetch_sub(1, Ordering::SeqCst);
        });
        let other_single = other_single.join().unwrap();
        // Two threads passing the gate of one runtime at once (own stripes).
        let gate = std::sync::Arc::new(Gate::new());
        let other = {
            let gate = gate.clone();
            std::thread::spawn(move || per_call(|| drop(black_box(gate.enter()))))
        };
        let contended = per_call(|| drop(black_box(gate.enter())));
        let other = other.join().unwrap();
        println!(
            "gate per call: nothing {none:.2} ns, in a callback {in_callback:.2} ns, \
             counted {counted:.2} ns, counted on two threads at once {contended:.2} / {other:.2} ns; \
             one shared counter: {one_counter:.2} ns alone, {contended_single:.2} / {other_single:.2} ns on two threads"
        );
    }
}
