//! The live-heap profile: what is still alive, and who allocated it.
//!
//! The allocation profile ([`crate::events`]) sees a sample of the
//! allocations: the runtime's `AllocationSampled` events (.NET 10 and later)
//! or `GCAllocationTick` events (.NET 5 to 9), each with the allocating
//! stack. The live heap keeps each sampled object it takes by a weak GC
//! handle ([`AllocationSample::create_handle`], `ICorProfilerInfo13`,
//! .NET 7 and later) made while the runtime delivers the event, and at the
//! end of every garbage collection (`GarbageCollectionFinished`, asked for
//! with `HIGH_BASIC_GC`, which leaves concurrent collection on) it asks
//! each handle whether its object survived (`GetObjectIDFromHandle`): the
//! dead are released (their handles destroyed later, outside the
//! collection), the survivors age by one collection and their generation
//! is read from the generation bounds. The profile ([`LiveHeap::profile`])
//! is the heap as of the last collection: every tracked object that
//! survived at least one, with its allocation stack and type, labelled
//! with its age and generation, and upscaled into `inuse_objects`/`count`
//! and `inuse_space`/`bytes`.
//!
//! # Upscaling
//! Each tracked object stands for the objects its sample stands for (the
//! estimator of its source's sampling law, [`clrprof::allocations`]): an
//! `AllocationSampled` object of size `s` for `1 / (1 − (1 − 1/102400)^s)`
//! objects ([`clrprof::allocations::sampled_weight`]: each allocated byte
//! is a sampling point with probability 1/102,400, so this is the chance
//! that the object held one); a `GCAllocationTick` object for
//! `amount / s` ([`clrprof::allocations::tick_weight`]: the tick fires at a
//! fixed threshold of bytes, so an object is the one with a chance about
//! proportional to its size, and a large object past the threshold fires
//! one every time and stands for itself). Whether a sampled object lives
//! does not depend on its having been sampled, so the weighted count of the
//! survivors estimates the live objects without bias (Horvitz–Thompson).
//! The walk budget's weight ([`crate::budget`]) multiplies in as a second
//! layer: a sample walked with probability `p` counts `1 / p` times.
//!
//! # Bounded
//! At most [`LiveHeapConfig::max_tracked`] objects are tracked (4,096 by
//! default). When the table is full the sampling rate halves: every tracked
//! object is kept with probability 1/2 and counts twice as much, and new
//! samples are taken with probability 1/2 and count twice as much, and so
//! on (the admission level, [`LiveHeapStats::level`]); the estimates stay
//! unbiased and the table never grows. When a collection leaves it less
//! than a quarter full, the level comes down again (for new samples). Every
//! object let go this way is counted ([`LiveHeapStats::thinned`]).
//!
//! # Where handles are made and destroyed
//! Handles are created only during the allocation event's delivery, on the
//! allocating thread (the SDK's rule `allocation-event-object`), never
//! during a collection (`no-handle-in-gc`: creating them at a GC's start
//! made Datadog's profiler crash). The handles of dead objects are found
//! inside `GarbageCollectionFinished` and destroyed after it, at the next
//! sample or period.

use crate::budget::uniform;
use clrprof::allocations::AllocationSample;
use clrprof::component::Component;
use clrprof::error::{Error, Result};
use clrprof::event_mask::{EventMasks, HighEventMask};
use clrprof::gc::{GcReason, GenerationSet};
use clrprof::handles::{GcHandle, HandleKind};
use clrprof::info::gc::{Generation, GenerationRange};
use clrprof::{ProfilerInfo, RawObjectId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The default of [`LiveHeapConfig::max_tracked`] (Datadog's live heap
/// keeps as many).
pub const DEFAULT_MAX_TRACKED: usize = 4096;

/// Every this many collections each tracked object is checked, whatever the
/// collection condemned (a background collection may free old objects
/// without a blocking one).
const CHECK_ALL_EVERY: u64 = 16;

/// How the live heap is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveHeapConfig {
    /// Objects tracked at most (at least 16).
    pub max_tracked: usize,
}

impl Default for LiveHeapConfig {
    fn default() -> Self {
        LiveHeapConfig {
            max_tracked: DEFAULT_MAX_TRACKED,
        }
    }
}

/// Counters of the live heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveHeapStats {
    /// Samples offered (walked allocation samples).
    pub offered: u64,
    /// Samples tracked (a handle made).
    pub tracked: u64,
    /// Objects tracked now.
    pub tracking: u64,
    /// Tracked objects found dead at a collection's end.
    pub died: u64,
    /// Samples not taken, and tracked objects let go, to keep within
    /// [`LiveHeapConfig::max_tracked`].
    pub thinned: u64,
    /// Handle creations that failed.
    pub handle_failures: u64,
    /// Collections seen.
    pub collections: u64,
    /// The admission level: new samples are taken with probability
    /// `2^-level`.
    pub level: u32,
    /// The highest level reached.
    pub max_level: u32,
    /// Handles asked for their object at collections' ends.
    pub checks: u64,
    /// Time spent in `GarbageCollectionFinished` (the collection's pause),
    /// nanoseconds in all.
    pub gc_ns: u64,
    /// Time spent taking samples (the handle and the table; the walk is
    /// the allocation profile's), nanoseconds in all.
    pub offer_ns: u64,
}

/// A generation, for the `generation` label.
fn generation_label(g: Option<Generation>) -> &'static str {
    match g {
        Some(Generation::Gen0) => "0",
        Some(Generation::Gen1) => "1",
        Some(Generation::Gen2) => "2",
        Some(Generation::LargeObjectHeap) => "loh",
        Some(Generation::PinnedObjectHeap) => "poh",
        Some(Generation::Unknown(_)) | None => "unknown",
    }
}

/// The `age` label: collections survived, in powers of two.
pub fn age_label(age: u32) -> &'static str {
    match age {
        0 => "0",
        1 => "1",
        2 => "2",
        3..=4 => "3-4",
        5..=8 => "5-8",
        9..=16 => "9-16",
        17..=32 => "17-32",
        33..=64 => "33-64",
        _ => "65+",
    }
}

/// The index of a generation in `GarbageCollectionStarted`'s array.
fn generation_index(g: Generation) -> Option<u32> {
    match g {
        Generation::Gen0 => Some(0),
        Generation::Gen1 => Some(1),
        Generation::Gen2 => Some(2),
        Generation::LargeObjectHeap => Some(3),
        Generation::PinnedObjectHeap => Some(4),
        Generation::Unknown(_) => None,
    }
}

/// One tracked object.
struct Tracked {
    handle: GcHandle,
    type_name: Arc<str>,
    /// Leaf first.
    stack: Arc<[Arc<str>]>,
    /// How many objects it stands for.
    weight: f64,
    size: u64,
    /// Collections survived.
    age: u32,
    /// Its generation at the last collection (`None`: not seen by one yet).
    generation: Option<Generation>,
}

struct State {
    tracked: Vec<Tracked>,
    level: u32,
    max_level: u32,
    /// The generations the collection under way condemns (from its start).
    condemned: Option<GenerationSet>,
    /// Handles of dead or let-go objects, destroyed outside collections.
    released: Vec<GcHandle>,
    last_gc: Option<SystemTime>,
}

/// The live heap of one runtime (see the [module docs](self)).
pub struct LiveHeap {
    config: LiveHeapConfig,
    state: Mutex<State>,
    offered: AtomicU64,
    tracked: AtomicU64,
    died: AtomicU64,
    thinned: AtomicU64,
    handle_failures: AtomicU64,
    collections: AtomicU64,
    checks: AtomicU64,
    gc_ns: AtomicU64,
    offer_ns: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why `info`'s runtime can give no live heap, if so.
pub fn unavailable(info: &ProfilerInfo) -> Option<String> {
    if info.has_info(13) && info.has_info(12) {
        return None;
    }
    let runtime = info
        .runtime_information()
        .map(|r| format!("{}.{}.{}", r.major, r.minor, r.build))
        .unwrap_or_else(|_| "this runtime".into());
    Some(format!(
        "the live-heap profile keeps sampled objects by GC handles (ICorProfilerInfo13::CreateHandle, \
         .NET 7 and later) and samples them from the runtime's allocation events (ICorProfilerInfo12, \
         .NET 5 and later); .NET {runtime} has neither"
    ))
}

impl LiveHeap {
    /// Registers a live heap for the runtime of `info` as an SDK component
    /// (in `Initialize`; it adds `HIGH_BASIC_GC` to the event mask). On a
    /// runtime without `ICorProfilerInfo13` this is [`Error::Unsupported`]
    /// (naming the interface; [`unavailable`] says it in words, with the
    /// runtime's version).
    pub fn register(info: &ProfilerInfo, config: LiveHeapConfig) -> Result<Arc<LiveHeap>> {
        if unavailable(info).is_some() {
            return Err(Error::Unsupported {
                call: "ICorProfilerInfo13::CreateHandle",
                needs: 13,
                has: info.version(),
            });
        }
        let heap = Arc::new(LiveHeap::new(config));
        info.register(Arc::new(LiveHeapComponent { heap: heap.clone() }))?;
        Ok(heap)
    }

    fn new(config: LiveHeapConfig) -> LiveHeap {
        LiveHeap {
            config: LiveHeapConfig {
                max_tracked: config.max_tracked.max(16),
            },
            state: Mutex::new(State {
                tracked: Vec::new(),
                level: 0,
                max_level: 0,
                condemned: None,
                released: Vec::new(),
                last_gc: None,
            }),
            offered: AtomicU64::new(0),
            tracked: AtomicU64::new(0),
            died: AtomicU64::new(0),
            thinned: AtomicU64::new(0),
            handle_failures: AtomicU64::new(0),
            collections: AtomicU64::new(0),
            checks: AtomicU64::new(0),
            gc_ns: AtomicU64::new(0),
            offer_ns: AtomicU64::new(0),
        }
    }

    /// Offers a walked allocation sample: its type, its stack (leaf first)
    /// and how many objects it stands for (its source's weight times the
    /// walk budget's). Called during the sample's delivery; makes the
    /// handle then if the sample is taken.
    pub fn offer(
        &self,
        sample: &AllocationSample<'_>,
        type_name: Arc<str>,
        stack: Arc<[Arc<str>]>,
        weight: f64,
    ) {
        let started = std::time::Instant::now();
        self.offered.fetch_add(1, Relaxed);
        let size = sample.object_size().unwrap_or(0);
        // Decided under the table's lock, the handle made outside it:
        // `CreateHandle` delivers `HandleCreated` on this thread before it
        // returns, and a profiler's callback may read this table.
        let (level, mut released) = {
            let mut state = lock(&self.state);
            if state.tracked.len() >= self.config.max_tracked {
                self.thin(&mut state);
            }
            (state.level, std::mem::take(&mut state.released))
        };
        let keep = level == 0 || uniform() < 0.5f64.powi(level as i32);
        if keep {
            match sample.create_handle(HandleKind::Weak) {
                Ok(handle) => {
                    let mut state = lock(&self.state);
                    // Thinned meanwhile: the coins this sample missed.
                    let missed = state.level.saturating_sub(level);
                    if missed == 0 || uniform() < 0.5f64.powi(missed as i32) {
                        let at = state.level.max(level);
                        self.tracked.fetch_add(1, Relaxed);
                        state.tracked.push(Tracked {
                            handle,
                            type_name,
                            stack,
                            weight: weight * 2f64.powi(at as i32),
                            size,
                            age: 0,
                            generation: None,
                        });
                    } else {
                        self.thinned.fetch_add(1, Relaxed);
                        released.push(handle);
                    }
                    released.append(&mut state.released);
                }
                Err(e) => {
                    if self.handle_failures.fetch_add(1, Relaxed) == 0 {
                        log::warn!("live heap: cannot keep a sampled object: {e}");
                    }
                }
            }
        } else {
            self.thinned.fetch_add(1, Relaxed);
        }
        // Outside the lock, and outside any collection.
        drop(released);
        self.offer_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Relaxed);
    }

    /// The table is full: halve the sampling rate (see the module docs).
    fn thin(&self, state: &mut State) {
        state.level += 1;
        state.max_level = state.max_level.max(state.level);
        let before = state.tracked.len();
        let mut kept = Vec::with_capacity(before);
        for mut t in state.tracked.drain(..) {
            if uniform() < 0.5 {
                t.weight *= 2.0;
                kept.push(t);
            } else {
                state.released.push(t.handle);
            }
        }
        self.thinned
            .fetch_add((before - kept.len()) as u64, Relaxed);
        state.tracked = kept;
    }

    fn gc_started(&self, generations: GenerationSet) {
        lock(&self.state).condemned = Some(generations);
    }

    /// `GarbageCollectionFinished`: who survived.
    fn gc_finished(&self, info: &ProfilerInfo) {
        let started = std::time::Instant::now();
        self.check_survivors(info);
        self.gc_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Relaxed);
    }

    fn check_survivors(&self, info: &ProfilerInfo) {
        let n = self.collections.fetch_add(1, Relaxed) + 1;
        let mut bounds = info.generation_bounds().unwrap_or_default();
        bounds.sort_by_key(|r| r.start.0);
        let mut state = lock(&self.state);
        let condemned = state.condemned.take();
        let check_all = condemned.is_none() || n % CHECK_ALL_EVERY == 0;
        let mut died = 0u64;
        let mut checks = 0u64;
        let mut alive = Vec::with_capacity(state.tracked.len());
        let mut released = Vec::new();
        for mut t in state.tracked.drain(..) {
            let condemned_here = match (t.generation, condemned) {
                (None, _) => true,
                (Some(g), Some(set)) => generation_index(g).is_none_or(|i| set.contains(i)),
                (Some(_), None) => true,
            };
            if check_all || condemned_here {
                checks += 1;
                match t.handle.object_raw() {
                    Ok(Some(object)) => {
                        t.generation = Some(generation_of(&bounds, object));
                    }
                    Ok(None) => {
                        died += 1;
                        released.push(t.handle);
                        continue;
                    }
                    // The runtime went away: nothing more to learn.
                    Err(_) => {}
                }
            }
            t.age = t.age.saturating_add(1);
            alive.push(t);
        }
        state.tracked = alive;
        state.released.extend(released);
        if state.level > 0 && state.tracked.len() < self.config.max_tracked / 4 {
            state.level -= 1;
        }
        state.last_gc = Some(SystemTime::now());
        self.died.fetch_add(died, Relaxed);
        self.checks.fetch_add(checks, Relaxed);
    }

    /// Destroys the handles of objects let go (call outside collections;
    /// the periods and [`offer`](Self::offer) do).
    pub fn release(&self) {
        let released = std::mem::take(&mut lock(&self.state).released);
        drop(released);
    }

    /// The counters.
    pub fn stats(&self) -> LiveHeapStats {
        let (tracking, level, max_level) = {
            let s = lock(&self.state);
            (s.tracked.len() as u64, s.level, s.max_level)
        };
        LiveHeapStats {
            offered: self.offered.load(Relaxed),
            tracked: self.tracked.load(Relaxed),
            tracking,
            died: self.died.load(Relaxed),
            thinned: self.thinned.load(Relaxed),
            handle_failures: self.handle_failures.load(Relaxed),
            collections: self.collections.load(Relaxed),
            level,
            max_level,
            checks: self.checks.load(Relaxed),
            gc_ns: self.gc_ns.load(Relaxed),
            offer_ns: self.offer_ns.load(Relaxed),
        }
    }

    /// The heap as of the last collection: every tracked object that
    /// survived one, aggregated by (type, stack, age, generation). Waits
    /// for the table's lock at most [`EXIT_WAIT`](clrprof::exit::EXIT_WAIT)
    /// once the process is ending (`None` then).
    pub fn profile(&self) -> Option<HeapProfile> {
        let rows = {
            let state = clrprof::exit::lock_unless_exiting(&self.state)?;
            let mut rows: HashMap<RowKey, [f64; 2]> = HashMap::new();
            for t in state.tracked.iter().filter(|t| t.age > 0) {
                let key = RowKey {
                    type_name: t.type_name.clone(),
                    stack: t.stack.clone(),
                    age: age_label(t.age),
                    generation: generation_label(t.generation),
                };
                let v = rows.entry(key).or_default();
                v[0] += t.weight;
                v[1] += t.weight * t.size as f64;
            }
            let last_gc = state.last_gc;
            (rows, last_gc)
        };
        self.release();
        let (rows, last_gc) = rows;
        let mut rows: Vec<HeapRow> = rows
            .into_iter()
            .map(|(k, v)| HeapRow {
                type_name: k.type_name,
                stack: k.stack,
                age: k.age,
                generation: k.generation,
                objects: v[0],
                bytes: v[1],
            })
            .collect();
        rows.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
        Some(HeapProfile {
            rows,
            as_of: last_gc,
            stats: self.stats(),
        })
    }
}

/// The generation whose range holds `object` (bounds sorted by start).
fn generation_of(bounds: &[GenerationRange], object: RawObjectId) -> Generation {
    let i = bounds.partition_point(|r| r.start.0 <= object.0);
    match i.checked_sub(1).and_then(|i| bounds.get(i)) {
        Some(r) if r.contains(object) => r.generation,
        _ => Generation::Unknown(u32::MAX),
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct RowKey {
    type_name: Arc<str>,
    stack: Arc<[Arc<str>]>,
    age: &'static str,
    generation: &'static str,
}

/// One row of a [`HeapProfile`].
#[derive(Clone, Debug)]
pub struct HeapRow {
    /// The objects' type.
    pub type_name: Arc<str>,
    /// Their allocation stack, leaf first.
    pub stack: Arc<[Arc<str>]>,
    /// The `age` label ([`age_label`]).
    pub age: &'static str,
    /// The `generation` label: `0`, `1`, `2`, `loh`, `poh`.
    pub generation: &'static str,
    /// Estimated live objects.
    pub objects: f64,
    /// Estimated live bytes.
    pub bytes: f64,
}

/// The live heap as of a collection (see [`LiveHeap::profile`]).
#[derive(Clone, Debug, Default)]
pub struct HeapProfile {
    /// By estimated bytes, the largest first.
    pub rows: Vec<HeapRow>,
    /// When the collection it shows ended (`None`: none yet).
    pub as_of: Option<SystemTime>,
    /// The counters when it was taken.
    pub stats: LiveHeapStats,
}

/// The pprof sample types of the live heap.
pub const SAMPLE_TYPES: [(&str, &str); 2] = [("inuse_objects", "count"), ("inuse_space", "bytes")];

impl HeapProfile {
    /// Estimated live objects and bytes of `type_name` (all stacks).
    pub fn type_totals(&self, type_name: &str) -> (f64, f64) {
        self.rows
            .iter()
            .filter(|r| &*r.type_name == type_name)
            .fold((0.0, 0.0), |a, r| (a.0 + r.objects, a.1 + r.bytes))
    }

    /// Sums of the values (objects, bytes), rounded.
    pub fn totals(&self) -> [u64; 2] {
        let (o, b) = self
            .rows
            .iter()
            .fold((0.0, 0.0), |a, r| (a.0 + r.objects, a.1 + r.bytes));
        [o.round() as u64, b.round() as u64]
    }

    /// As pprof: `inuse_objects`/`count` and `inuse_space`/`bytes` (the
    /// default), one sample per row with labels `type`, `age`,
    /// `generation` and `runtime_version`; the profile's time is the
    /// collection it shows.
    pub fn to_pprof(&self, runtime: Option<&str>, now: SystemTime) -> crate::pprof::PprofProfile {
        let at = self.as_of.unwrap_or(now);
        let rows = self.rows.iter().map(|r| {
            let mut labels = vec![
                ("type", &*r.type_name),
                ("age", r.age),
                ("generation", r.generation),
            ];
            if let Some(v) = runtime {
                labels.push(("runtime_version", v));
            }
            crate::pprof_rows::Row {
                stack_leaf_first: r.stack.iter().map(|f| &**f).collect(),
                labels,
                values: vec![r.objects.round() as i64, r.bytes.round() as i64],
            }
        });
        crate::pprof_rows::build(&SAMPLE_TYPES, 1, rows, "clrprof live heap", at, at)
    }
}

/// The SDK component behind [`LiveHeap::register`].
struct LiveHeapComponent {
    heap: Arc<LiveHeap>,
}

impl Component for LiveHeapComponent {
    fn name(&self) -> &'static str {
        "live-heap"
    }

    fn masks(&self) -> EventMasks {
        EventMasks {
            low: clrprof::EventMask::empty(),
            high: HighEventMask::BASIC_GC | HighEventMask::MONITOR_EVENT_PIPE,
        }
    }

    fn garbage_collection_started(
        &self,
        _info: &ProfilerInfo,
        generations: GenerationSet,
        _reason: GcReason,
    ) {
        self.heap.gc_started(generations);
    }

    fn garbage_collection_finished(&self, info: &ProfilerInfo) {
        self.heap.gc_finished(info);
    }

    fn shutdown(&self, _info: &ProfilerInfo) {
        // The runtime still takes calls: destroy what waits.
        self.heap.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_generations_label_in_few_values() {
        let labels: std::collections::BTreeSet<_> = (0..10_000).map(age_label).collect();
        assert_eq!(labels.len(), 9);
        assert_eq!(age_label(1), "1");
        assert_eq!(age_label(4), "3-4");
        assert_eq!(age_label(1000), "65+");
        assert_eq!(generation_label(Some(Generation::LargeObjectHeap)), "loh");
    }

    fn range(g: Generation, start: usize, len: usize) -> GenerationRange {
        GenerationRange {
            generation: g,
            start: RawObjectId(start),
            len,
            reserved_len: len,
        }
    }

    #[test]
    fn generation_of_an_address() {
        let mut b = vec![
            range(Generation::Gen2, 0x9000, 0x1000),
            range(Generation::Gen0, 0x1000, 0x100),
            range(Generation::Gen1, 0x2000, 0x100),
        ];
        b.sort_by_key(|r| r.start.0);
        assert_eq!(generation_of(&b, RawObjectId(0x1010)), Generation::Gen0);
        assert_eq!(generation_of(&b, RawObjectId(0x20ff)), Generation::Gen1);
        assert_eq!(generation_of(&b, RawObjectId(0x9fff)), Generation::Gen2);
        assert!(matches!(
            generation_of(&b, RawObjectId(0x1100)),
            Generation::Unknown(_)
        ));
        assert!(matches!(
            generation_of(&b, RawObjectId(0x10)),
            Generation::Unknown(_)
        ));
    }
}
