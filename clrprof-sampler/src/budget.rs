//! How many allocation samples are walked: a budget of the time the walks
//! may take, kept by sampling the samples.
//!
//! An allocation sample (a `GCAllocationTick`, an `AllocationSampled` or a
//! fallback threshold crossing) is cheap to receive and dear to attribute:
//! the walk of the allocating thread and the naming of its frames took
//! about 4 µs each on the .NET 8 leg, from inside the allocator. A program
//! that allocates 3 GB/s raises some 30 000 ticks a second, and walking
//! each one cost it 11–29 % (`cargo xtask bench profiles`).
//!
//! The budget bounds the walks' share of the time: in each window of
//! [`WINDOW_NS`] the walks may take `fraction` × the window (summed over
//! the threads that walk). At each window's end a walk probability `p` is
//! set from that window's sample count and mean walk cost, so that the
//! next window's walks fit the budget, and a walked sample counts `1 / p`
//! times its values. Below the budget `p` is 1 and every sample is walked,
//! as without it. A window whose walks took that much ends early (after at
//! least 32 walks: a run's first walks also name their frames for the
//! first time, and cost more than later ones), and `p` never falls below
//! 1/1024, so the windows after a dear one still measure the walks.
//!
//! Which samples are walked: each thread walks one sample in about `1 / p`,
//! the gap between two walks drawn uniformly from 0.75 to 1.25 times `1 / p`
//! and the first one from 0 to `1 / p` (when `p` changes, the distance to
//! the next walk is rescaled to the new spacing).
//! Each sample is thus walked with probability `p`, so each one's expected
//! contribution is its own values and the estimates stay unbiased
//! (Horvitz–Thompson); spreading the walks evenly over a thread's samples
//! keeps their variance far below independent coin tosses' (a program that
//! allocates at one site, then at another, gets walks at both in proportion),
//! and the random gaps keep a program whose sites alternate with a period
//! from lining up with the walks.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Instant;

/// The length of a budget window.
pub const WINDOW_NS: u64 = 100_000_000;

/// How far a gap between two walks strays from its mean, as a share of it.
const JITTER: f64 = 0.25;

/// A window ends early (its walks took its budget) only after this many
/// walks: the first walks of a run also name their frames for the first
/// time and cost many times a later walk, and would set `p` far too low.
const EARLY_END_WALKS: u64 = 32;

/// The smallest `p`: one walk in this many samples at least, so that the
/// windows after a dear one still measure what a walk costs now (a share of
/// the samples, not a rate in time: a program slowed down, e.g. under
/// valgrind, walks the same share).
const MIN_P: f64 = 1.0 / 1024.0;

/// The walk budget of one profile (see the module's docs).
#[derive(Debug)]
pub struct WalkBudget {
    /// The walks' allowed share of each window; ≥ 1 means no budget.
    fraction: f64,
    window_start: AtomicU64,
    samples: AtomicU64,
    walks: AtomicU64,
    walk_ns: AtomicU64,
    /// The mean cost of a walk so far (ns), for windows with no walk.
    mean_walk_ns: AtomicU64,
    /// `p`, as `f64` bits.
    p: AtomicU64,
    /// Counts the windows whose end changed `p` (threads rescale the
    /// distance to their next walk when it moves).
    epoch: AtomicU64,
    /// Every measured walk's time, for the records.
    total_walk_ns: AtomicU64,
}

/// A sample chosen for a walk: its weight, and when the walk started.
#[derive(Debug)]
pub struct Chosen {
    /// The factor its values count by (`1 / p`).
    pub weight: f64,
    started: Option<u64>,
}

/// Nanoseconds since the first use of the budget's clock.
fn now_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

thread_local! {
    // reentrancy: none: this thread's random state of the sampling budget
    static RNG: Cell<u64> = const { Cell::new(0) };
    // reentrancy: none: this thread's countdown to its next walk
    /// This thread's place in the walks of the budget it last used.
    static STRIDE: Cell<Stride> = const { Cell::new(Stride { budget: 0, epoch: 0, left: 0.0, gap: 1.0 }) };
}

/// A thread's countdown to its next walk.
#[derive(Clone, Copy, Debug)]
struct Stride {
    /// The budget it belongs to (its address) and that budget's epoch.
    budget: usize,
    epoch: u64,
    /// Samples until the next walk.
    left: f64,
    /// The mean gap `left` was drawn for.
    gap: f64,
}

/// A uniform draw in [0, 1) from this thread's generator (xorshift64*,
/// seeded from the thread's own address and the clock).
pub(crate) fn uniform() -> f64 {
    RNG.with(|s| {
        let mut x = s.get();
        if x == 0 {
            let addr = s as *const Cell<u64> as u64;
            x = splitmix(addr ^ now_ns().rotate_left(32)) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    })
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl WalkBudget {
    /// A budget of `fraction` of the time (0.01: 1 %); `fraction` ≥ 1 (or
    /// not a number) walks every sample and measures nothing.
    pub fn new(fraction: f64) -> WalkBudget {
        let fraction = if fraction.is_finite() && fraction > 0.0 {
            fraction
        } else if fraction.is_nan() {
            1.0
        } else {
            // 0 or below: the smallest budget that still walks a few.
            1e-6
        };
        WalkBudget {
            fraction,
            window_start: AtomicU64::new(now_ns()),
            samples: AtomicU64::new(0),
            walks: AtomicU64::new(0),
            walk_ns: AtomicU64::new(0),
            mean_walk_ns: AtomicU64::new(0),
            p: AtomicU64::new(1f64.to_bits()),
            epoch: AtomicU64::new(0),
            total_walk_ns: AtomicU64::new(0),
        }
    }

    /// Whether every sample is walked.
    pub fn unlimited(&self) -> bool {
        self.fraction >= 1.0
    }

    /// The walk probability in force.
    pub fn probability(&self) -> f64 {
        f64::from_bits(self.p.load(Relaxed))
    }

    /// Decides for one sample: `Some` when it is walked.
    pub fn choose(&self) -> Option<Chosen> {
        if self.unlimited() {
            return Some(Chosen {
                weight: 1.0,
                started: None,
            });
        }
        STRIDE.with(|stride| self.choose_at(now_ns(), stride, uniform))
    }

    fn choose_at(
        &self,
        now: u64,
        stride: &Cell<Stride>,
        mut draw: impl FnMut() -> f64,
    ) -> Option<Chosen> {
        let start = self.window_start.load(Relaxed);
        // A window ends after WINDOW_NS, or sooner once its walks took a
        // whole window's budget (a burst after a quiet window, or the first
        // window, which walks everything, is cut short).
        let spent = self.walk_ns.load(Relaxed) as f64;
        let over =
            spent > self.fraction * WINDOW_NS as f64 && self.walks.load(Relaxed) >= EARLY_END_WALKS;
        if (now.saturating_sub(start) >= WINDOW_NS || over)
            && now > start
            && self
                .window_start
                .compare_exchange(start, now, Relaxed, Relaxed)
                .is_ok()
        {
            self.close_window(now - start);
        }
        self.samples.fetch_add(1, Relaxed);
        let epoch = self.epoch.load(Relaxed);
        let p = self.probability();
        if p >= 1.0 {
            return Some(Chosen {
                weight: 1.0,
                started: Some(now),
            });
        }
        let gap = 1.0 / p;
        let mut s = stride.get();
        let me = self as *const WalkBudget as usize;
        if s.budget != me {
            s = Stride {
                budget: me,
                epoch,
                left: gap * draw(),
                gap,
            };
        } else if s.epoch != epoch {
            // The same place between two walks, at the new spacing.
            s.left = (s.left * gap / s.gap).clamp(0.0, gap * (1.0 + JITTER));
            s.epoch = epoch;
            s.gap = gap;
        }
        s.left -= 1.0;
        let walk = s.left <= 0.0;
        if walk {
            s.left += gap * (1.0 - JITTER + 2.0 * JITTER * draw());
        }
        stride.set(s);
        walk.then_some(Chosen {
            weight: gap,
            started: Some(now),
        })
    }

    /// Sets `p` for the next window from the one of `length` ns that ends.
    fn close_window(&self, length: u64) {
        let samples = self.samples.swap(0, Relaxed);
        let walks = self.walks.swap(0, Relaxed);
        let walk_ns = self.walk_ns.swap(0, Relaxed);
        let mean = match walk_ns.checked_div(walks) {
            Some(m) => {
                self.mean_walk_ns.store(m.max(1), Relaxed);
                m.max(1)
            }
            None => self.mean_walk_ns.load(Relaxed),
        };
        if samples == 0 || mean == 0 {
            // Nothing to go by: walk everything until a window says more.
            self.set_probability(1.0);
            return;
        }
        let allowed_walks = self.fraction * length.max(1) as f64 / mean as f64;
        let p = (allowed_walks / samples as f64).clamp(MIN_P, 1.0);
        self.set_probability(p);
    }

    fn set_probability(&self, p: f64) {
        if self.p.swap(p.to_bits(), Relaxed) != p.to_bits() {
            self.epoch.fetch_add(1, Relaxed);
        }
    }

    /// Counts a walk that `chosen` started.
    pub fn walked(&self, chosen: &Chosen) {
        if let Some(started) = chosen.started {
            let ns = now_ns().saturating_sub(started);
            self.walk_ns.fetch_add(ns, Relaxed);
            self.total_walk_ns.fetch_add(ns, Relaxed);
            self.walks.fetch_add(1, Relaxed);
        }
    }

    /// The time all measured walks took (0 without a budget: nothing is
    /// measured then).
    pub fn total_walk_ns(&self) -> u64 {
        self.total_walk_ns.load(Relaxed)
    }

    #[cfg(test)]
    fn walked_for(&self, ns: u64) {
        self.walk_ns.fetch_add(ns, Relaxed);
        self.walks.fetch_add(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Cell<Stride> {
        Cell::new(Stride {
            budget: 0,
            epoch: 0,
            left: 0.0,
            gap: 1.0,
        })
    }

    #[test]
    fn below_the_budget_every_sample_is_walked() {
        let b = WalkBudget::new(0.01);
        let t0 = b.window_start.load(Relaxed);
        let stride = fresh();
        // 10 samples of 5 µs in a window: 50 µs of 100 ms, under 1 %.
        for i in 0..10 {
            let c = b.choose_at(t0 + i, &stride, || 0.999).expect("p is 1");
            assert_eq!(c.weight, 1.0);
            b.walked_for(5_000);
        }
        assert!(b.choose_at(t0 + WINDOW_NS, &stride, || 0.999).is_some());
        assert_eq!(b.probability(), 1.0);
    }

    #[test]
    fn above_the_budget_p_fits_the_walks_into_it() {
        let b = WalkBudget::new(0.01);
        let t0 = b.window_start.load(Relaxed);
        let stride = fresh();
        // A sample every 33 µs, each walk 5 µs: 15 % of the time where 1 %
        // is allowed. The window ends once its walks took 1 ms (201 walks,
        // 6.6 ms in), and p becomes 1 % of 6.6 ms / 5 µs = 13.3 walks of
        // 201 samples: 1 in 15.
        let mut t = t0;
        while b.probability() == 1.0 {
            t += 33_000;
            let _ = b.choose_at(t, &stride, || 0.5);
            b.walked_for(5_000);
        }
        let p = b.probability();
        assert!((p - 1.0 / 15.0).abs() < 0.002, "{p}");
        // Draws of 0.5: the walks come every 1 / p samples, weighted 1 / p.
        let mut walks = Vec::new();
        for i in 0..3000u64 {
            if let Some(c) = b.choose_at(t + i, &stride, || 0.5) {
                walks.push((i, c.weight));
            }
        }
        let expected = 3000.0 * p;
        assert!((walks.len() as f64 - expected).abs() <= 2.0, "{walks:?}");
        assert!(
            walks.iter().all(|w| (w.1 - 1.0 / p).abs() < 1e-9),
            "{walks:?}"
        );
        assert!(
            walks
                .windows(2)
                .all(|w| (w[1].0 - w[0].0).abs_diff(15) <= 1),
            "{walks:?}"
        );
    }

    #[test]
    fn a_window_over_its_budget_ends_early() {
        let b = WalkBudget::new(0.01);
        let t0 = b.window_start.load(Relaxed);
        let stride = fresh();
        // 1 ms of walks (the window's budget) after 10 ms: the window ends
        // at the next sample, not at 100 ms.
        for i in 1..=201 {
            let _ = b.choose_at(t0 + i * 50_000, &stride, || 0.5);
            b.walked_for(5_000);
        }
        assert_eq!(b.probability(), 1.0);
        let _ = b.choose_at(t0 + 202 * 50_000, &stride, || 0.5);
        let p = b.probability();
        // 201 samples in 10.1 ms, of which 1 % of 10.1 ms / 5 µs = 20
        // could be walked.
        assert!((p - 20.2 / 201.0).abs() < 0.005, "{p}");
    }

    #[test]
    fn dear_first_walks_neither_end_the_window_nor_starve_the_next() {
        let b = WalkBudget::new(0.005);
        let t0 = b.window_start.load(Relaxed);
        let stride = fresh();
        // Ten first walks of 1 ms each (naming new frames): 10 ms, twenty
        // times the window's budget, yet the window goes on.
        let mut t = t0;
        for _ in 0..10 {
            t += 1_000_000;
            assert!(b.choose_at(t, &stride, || 0.5).is_some());
            b.walked_for(1_000_000);
        }
        assert_eq!(b.probability(), 1.0);
        // At its end p is at its floor: one walk in 1024 samples.
        for _ in 0..1990 {
            t += 40_000;
            let _ = b.choose_at(t, &stride, || 0.5);
        }
        let _ = b.choose_at(t0 + WINDOW_NS + 1, &stride, || 0.5);
        assert_eq!(b.probability(), MIN_P);
    }

    /// Two sites in turn (the first allocates 3 times as much), each
    /// window over budget: the weighted counts land on the truth, phase by
    /// phase as well as in all.
    fn estimate(pattern: impl Fn(u64) -> usize) -> ([f64; 2], [u64; 2]) {
        let b = WalkBudget::new(0.01);
        let t0 = b.window_start.load(Relaxed);
        let stride = fresh();
        let (mut est, mut truth) = ([0f64; 2], [0u64; 2]);
        let mut t = t0;
        for i in 0..200_000u64 {
            t += 20_000; // 5000 samples per window
            let site = pattern(i);
            truth[site] += 1;
            if let Some(c) = b.choose_at(t, &stride, uniform) {
                est[site] += c.weight;
                b.walked_for(5_000);
            }
        }
        assert!(b.probability() < 0.05, "{}", b.probability());
        (est, truth)
    }

    fn within(est: [f64; 2], truth: [u64; 2], tolerance: f64) {
        for s in 0..2 {
            let err = (est[s] - truth[s] as f64) / truth[s] as f64;
            assert!(
                err.abs() < tolerance,
                "site {s}: {} vs {}",
                est[s],
                truth[s]
            );
        }
    }

    #[test]
    fn the_estimate_is_unbiased_for_sites_in_phases() {
        let (est, truth) = estimate(|i| usize::from(i >= 150_000));
        within(est, truth, 0.02);
    }

    #[test]
    fn the_estimate_is_unbiased_for_sites_in_a_period() {
        // Period 4 and, worse, period 25 (the mean gap when p is 1/25).
        let (est, truth) = estimate(|i| usize::from(i % 4 == 0));
        within(est, truth, 0.1);
        let (est, truth) = estimate(|i| usize::from(i % 25 == 0));
        within(est, truth, 0.15);
    }

    #[test]
    fn no_budget_measures_nothing() {
        let b = WalkBudget::new(1.0);
        assert!(b.unlimited());
        let c = b.choose().expect("walked");
        assert_eq!(c.weight, 1.0);
        b.walked(&c);
        assert_eq!(b.walks.load(Relaxed), 0);
        assert!(WalkBudget::new(f64::NAN).unlimited());
        assert!(!WalkBudget::new(0.0).unlimited());
    }

    #[test]
    fn draws_are_uniform_enough() {
        let n = 100_000;
        let mean = (0..n).map(|_| uniform()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }
}
