//! Counting a stack the profile has seen before allocates nothing (the
//! sampler counts every sample this way, on its thread, once per tick).
//! Its own test binary: the global allocator here counts every allocation
//! of the test's own thread (the test harness's thread allocates meanwhile,
//! at its own pace: 4 of its allocations fell in the window on a loaded
//! machine).

use clrprof::RawThreadId;
use clrprof_sampler::Profile;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the test's thread: only its allocations are counted.
    static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    if COUNTED.try_with(|c| c.get()).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as for `dealloc`; the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn counting_a_known_stack_allocates_nothing() {
    COUNTED.with(|c| c.set(true));
    let mut p = Profile::new();
    let frames: Vec<u32> = ["[unmanaged]", "Main", "Bench", "FixedWork", "Spin", "Cold"]
        .iter()
        .map(|n| p.intern(n))
        .collect();
    // Threads with IDs that need all 64 bits, and stacks of several depths.
    let threads = [RawThreadId(0x7f3a_0000_1000), RawThreadId(0x7f3a_0000_2000)];
    for t in threads {
        for depth in 1..=frames.len() {
            p.add(t, &frames[..depth], false);
        }
    }
    let before = ALLOCATIONS.load(Relaxed);
    for round in 0..10_000 {
        let t = threads[round % 2];
        p.add(t, &frames[..1 + round % frames.len()], round % 7 == 0);
    }
    let allocated = ALLOCATIONS.load(Relaxed) - before;
    assert_eq!(
        allocated, 0,
        "counting known stacks allocated {allocated} times"
    );
    assert_eq!(p.samples(), 12 + 10_000);
    assert_eq!(p.distinct_stacks(), 12);
    // A new stack allocates its key once.
    p.add(threads[0], &frames[2..], false);
    assert!(ALLOCATIONS.load(Relaxed) > before);
    assert_eq!(p.distinct_stacks(), 13);
}
