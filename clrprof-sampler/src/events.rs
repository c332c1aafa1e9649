//! Event profiles: allocations, lock contention and exceptions, each with
//! the stack of the thread the event happened on.
//!
//! | profile | source | pprof sample types |
//! |---|---|---|
//! | allocations | the runtime's `GCAllocationTick` events (EventPipe session of the profiler, Info12, .NET 5+); `ObjectAllocated` with a byte-threshold sampler on older runtimes | `alloc_objects/count`, `alloc_space/bytes` |
//! | lock contention | the runtime's `ContentionStop` events (.NET 5+) | `contentions/count`, `delay/nanoseconds` |
//! | exceptions | `ExceptionThrown` callbacks (every runtime), 1 in N per type kept | `exceptions/count` |
//!
//! # How the runtime's events are used
//! A session the profiler starts (`EventPipeStartSession`) delivers each
//! event synchronously, on the thread that wrote it, inside the write (see
//! [`clrprof::eventpipe`]). `GCAllocationTick` is written on the allocating
//! thread inside the allocation and `ContentionStop` on the thread that
//! waited, once it holds the lock; .NET 8 gives the profiler's own sessions
//! no `stack` IPs ([`EventPipeEvent::stack`] is empty), so the stack is a
//! walk of the current thread (`DoStackSnapshot` of the calling thread,
//! [`ProfilerInfo::walk_current_thread`]), named while the walk holds the
//! frames' `FunctionID`s.
//!
//! # Allocation estimates
//! The runtime raises `GCAllocationTick` each time about 100 KB more were
//! allocated (per heap, per kind: small, large, pinned), naming the type of
//! the object that crossed the threshold and the amount since the last
//! tick. An object is the one that crosses with a probability about
//! proportional to its size, so attributing the whole amount to its stack
//! and type estimates the bytes each (stack, type) allocated, and amount ÷
//! object size (`ObjectSize`, payload V4, .NET 8) the objects. Before V4
//! (.NET 5–7) no object size is sent: each tick counts as one object.
//!
//! .NET 10's randomized `AllocationSampled` event (keyword
//! `AllocationSampling`) is decoded too ([`decode_allocation_sampled`],
//! [`upscale_sampled`]); the profiles take allocations from it on runtimes
//! of major version 10 and later, and from `GCAllocationTick` on .NET 5 to
//! 9 (the profiles scenarios check, on every leg, which events the runtime
//! delivered: `AllocationSampled` only on 10.0.15 and 11.0.0,
//! `GCAllocationTick` only on 8.0.34 and 9.0.23). Both reach the profiles
//! through [`EventProfiles::allocation_sampled`], which the profiler feeds
//! from [`Profiler::allocation_sampled`](clrprof::Profiler::allocation_sampled):
//! the SDK decodes them and checks they are the runtime's own
//! ([`clrprof::allocations`]). The same walk feeds the live heap
//! ([`crate::live_heap`]) when it is on.
//!
//! On runtimes without EventPipe from a profiler (.NET Core 3.1) the
//! fallback is `ObjectAllocated` for every object, whose cost is the
//! callback and an object-size query per allocation: each thread adds up
//! the bytes it allocated and takes a sample (a walk) when the sum crosses
//! [`EventProfilesConfig::alloc_every_bytes`], the same estimator as the
//! runtime's ticks.

use crate::budget::WalkBudget;
use crate::interner::Names;
use clrprof::allocations::{AllocationSample, AllocationSource};
use clrprof::eventpipe::payload::{decode_utf16le, Reader};
use clrprof::eventpipe::{EventPipeEvent, Level, ProviderConfig, Session};
use clrprof::stackwalk::{Walk, WalkOptions};
use clrprof::{
    ClassId, EventMask, EventMasks, HighEventMask, NameCache, ObjectId, ProfilerInfo, Result,
};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The runtime's provider.
pub const RUNTIME_PROVIDER: &str = "Microsoft-Windows-DotNETRuntime";
/// The `GC` keyword (`GCAllocationTick` at verbose level).
pub const GC_KEYWORD: u64 = 0x1;
/// The `Contention` keyword (`ContentionStart`/`ContentionStop`).
pub const CONTENTION_KEYWORD: u64 = 0x4000;
/// The `AllocationSampling` keyword of .NET 10 (`AllocationSampled`).
pub const ALLOCATION_SAMPLING_KEYWORD: u64 = 0x800_0000_0000;
/// Event ID of `GCAllocationTick`.
pub const GC_ALLOCATION_TICK: u32 = 10;
/// Event ID of `ContentionStop`.
pub const CONTENTION_STOP: u32 = 91;
/// Event ID of `AllocationSampled` (.NET 10).
pub const ALLOCATION_SAMPLED: u32 = 303;
/// The mean distance in bytes between two `AllocationSampled` events.
pub const ALLOCATION_SAMPLING_MEAN: f64 = 100.0 * 1024.0;

/// A profile kind the sampler example writes (one `.pb.gz` each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProfileKind {
    /// CPU time (`cpu/nanoseconds`).
    Cpu,
    /// Wall time (`samples/count`, `wall/nanoseconds`).
    Wall,
    /// Allocations (`alloc_objects/count`, `alloc_space/bytes`).
    Alloc,
    /// Lock contention (`contentions/count`, `delay/nanoseconds`).
    Lock,
    /// Thrown exceptions (`exceptions/count`).
    Exception,
    /// The live heap (`inuse_objects/count`, `inuse_space/bytes`; see
    /// [`crate::live_heap`]).
    Heap,
}

impl ProfileKind {
    /// Every kind.
    pub const ALL: [ProfileKind; 6] = [
        ProfileKind::Cpu,
        ProfileKind::Wall,
        ProfileKind::Alloc,
        ProfileKind::Lock,
        ProfileKind::Exception,
        ProfileKind::Heap,
    ];

    /// The kind's name in `CLRPROF_SAMPLER_PROFILES` and in file names.
    pub fn name(self) -> &'static str {
        match self {
            ProfileKind::Cpu => "cpu",
            ProfileKind::Wall => "wall",
            ProfileKind::Alloc => "alloc",
            ProfileKind::Lock => "lock",
            ProfileKind::Exception => "exception",
            ProfileKind::Heap => "heap",
        }
    }

    /// The pprof sample types (type, unit) of the kind.
    pub fn sample_types(self) -> &'static [(&'static str, &'static str)] {
        match self {
            ProfileKind::Cpu => &[("cpu", "nanoseconds")],
            ProfileKind::Wall => &[("samples", "count"), ("wall", "nanoseconds")],
            ProfileKind::Alloc => &[("alloc_objects", "count"), ("alloc_space", "bytes")],
            ProfileKind::Lock => &[("contentions", "count"), ("delay", "nanoseconds")],
            ProfileKind::Exception => &[("exceptions", "count")],
            ProfileKind::Heap => &crate::live_heap::SAMPLE_TYPES,
        }
    }

    /// Parses a comma list (`cpu,wall,alloc`); unknown names are errors,
    /// duplicates are kept once, in [`ALL`](Self::ALL) order.
    pub fn parse_list(list: &str) -> core::result::Result<Vec<ProfileKind>, String> {
        let mut kinds = Vec::new();
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let kind = ProfileKind::ALL
                .into_iter()
                .find(|k| k.name().eq_ignore_ascii_case(word))
                .ok_or_else(|| {
                    format!(
                        "unknown profile kind {word:?} (cpu, wall, alloc, lock, exception, heap)"
                    )
                })?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds.sort();
        Ok(kinds)
    }
}

/// One `GCAllocationTick` (payload V1..V4 of the runtime's manifest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocationTick {
    /// Bytes allocated since the last tick (`AllocationAmount64` from V2 on,
    /// else `AllocationAmount`).
    pub amount: u64,
    /// 0 small object heap, 1 large, 2 pinned.
    pub kind: u32,
    /// The type of the object that crossed the threshold (V2+).
    pub type_name: Option<String>,
    /// That object's size (V4, .NET 8).
    pub object_size: Option<u64>,
}

/// Decodes a `GCAllocationTick` payload of `version` (pointers are 8
/// bytes: 64-bit runtimes).
pub fn decode_allocation_tick(version: u32, data: &[u8]) -> Result<AllocationTick> {
    let tick = RawTick::decode(version, data)?;
    Ok(AllocationTick {
        amount: tick.amount,
        kind: tick.kind,
        type_name: tick.type_name.map(decode_utf16le).transpose()?,
        object_size: tick.object_size,
    })
}

/// A `GCAllocationTick` whose type name is left undecoded (most ticks are
/// not walked, and their names are never needed).
struct RawTick<'a> {
    amount: u64,
    kind: u32,
    type_name: Option<&'a [u8]>,
    object_size: Option<u64>,
}

impl<'a> RawTick<'a> {
    fn decode(version: u32, data: &'a [u8]) -> Result<RawTick<'a>> {
        let mut r = Reader::new(data);
        let amount32 = r.u32()?;
        let kind = r.u32()?;
        let short = RawTick {
            amount: u64::from(amount32),
            kind,
            type_name: None,
            object_size: None,
        };
        if version == 0 {
            return Ok(short);
        }
        let _clr_instance = r.u16()?;
        if version == 1 {
            return Ok(short);
        }
        let amount = r.u64()?;
        let _type_id = r.u64()?;
        let type_name = r.utf16z_bytes()?;
        let _heap = r.u32()?;
        let mut object_size = None;
        if version >= 3 {
            let _address = r.u64()?;
            if version >= 4 {
                object_size = Some(r.u64()?);
            }
        }
        Ok(RawTick {
            amount,
            kind,
            type_name: Some(type_name),
            object_size,
        })
    }
}

/// Estimated (objects, bytes) a tick stands for.
pub fn upscale_tick(tick: &AllocationTick) -> (u64, u64) {
    upscale_amount(tick.amount, tick.object_size)
}

/// Estimated (objects, bytes) of `amount` bytes of objects of `object_size`
/// (unknown: one object).
fn upscale_amount(amount: u64, object_size: Option<u64>) -> (u64, u64) {
    let objects = match object_size {
        Some(size) if size > 0 => amount.saturating_add(size / 2) / size,
        _ => 1,
    };
    (objects.max(1), amount)
}

/// One `AllocationSampled` (.NET 10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocationSampled {
    /// 0 small object heap, 1 large, 2 pinned.
    pub kind: u32,
    /// The sampled object's type.
    pub type_name: String,
    /// Its size.
    pub object_size: u64,
    /// Where in the object the sampling point fell.
    pub sampled_byte_offset: u64,
}

/// Decodes an `AllocationSampled` payload (V0: kind, instance, type ID,
/// type name, address, object size, sampled byte offset).
pub fn decode_allocation_sampled(data: &[u8]) -> Result<AllocationSampled> {
    let mut r = Reader::new(data);
    let kind = r.u32()?;
    let _clr_instance = r.u16()?;
    let _type_id = r.u64()?;
    let type_name = r.utf16z()?;
    let _address = r.u64()?;
    let object_size = r.u64()?;
    let sampled_byte_offset = r.u64()?;
    Ok(AllocationSampled {
        kind,
        type_name,
        object_size,
        sampled_byte_offset,
    })
}

/// Estimated (objects, bytes) an `AllocationSampled` stands for: each byte
/// is a sampling point with probability 1/mean, so an object of size s is
/// sampled with probability p = 1 − e^(−s/mean) and stands for 1/p objects.
pub fn upscale_sampled(object_size: u64) -> (f64, f64) {
    let s = object_size.max(1) as f64;
    let p = 1.0 - (-s / ALLOCATION_SAMPLING_MEAN).exp();
    let objects = 1.0 / p;
    (objects, objects * s)
}

/// Decodes the `DurationNs` of a `ContentionStop` (V1+: flags, instance,
/// duration as a double); `None` for V0 (no duration).
pub fn decode_contention_stop(version: u32, data: &[u8]) -> Result<Option<(u8, f64)>> {
    if version == 0 {
        return Ok(None);
    }
    let mut r = Reader::new(data);
    let flags = r.u8()?;
    let _clr_instance = r.u16()?;
    let duration = f64::from_bits(r.u64()?);
    Ok(Some((flags, duration)))
}

/// What the event profiles collect.
#[derive(Clone, Copy, Debug)]
pub struct EventProfilesConfig {
    /// The allocation profile.
    pub alloc: bool,
    /// The lock-contention profile.
    pub lock: bool,
    /// The exception profile.
    pub exceptions: bool,
    /// Keep 1 in this many thrown exceptions of each type (1: every one);
    /// each kept one counts this many.
    pub exception_every: u32,
    /// The `ObjectAllocated` fallback samples a thread each time it
    /// allocated this many more bytes (0: every object).
    pub alloc_every_bytes: u64,
    /// Use `ObjectAllocated` even where the runtime's events are there
    /// (for comparisons).
    pub force_object_allocated: bool,
    /// Deepest stack kept (frames nearest the leaf).
    pub max_depth: usize,
    /// The share of the time the allocation profile's walks may take
    /// (0.005, the default: 0.5 %; 1 or more: every allocation sample walked). Above it,
    /// samples are walked at random and weighted, see [`crate::budget`].
    pub alloc_walk_budget: f64,
    /// The live-heap profile ([`crate::live_heap`]): the walked allocation
    /// samples are kept by weak handles and checked at every collection.
    pub live_heap: bool,
    /// Objects the live heap tracks at most.
    pub live_heap_max_tracked: usize,
}

impl Default for EventProfilesConfig {
    fn default() -> Self {
        EventProfilesConfig {
            alloc: false,
            lock: false,
            exceptions: false,
            exception_every: 1,
            alloc_every_bytes: 100 * 1024,
            force_object_allocated: false,
            max_depth: 256,
            alloc_walk_budget: 0.005,
            live_heap: false,
            live_heap_max_tracked: crate::live_heap::DEFAULT_MAX_TRACKED,
        }
    }
}

/// Values per (type label, stack) of one profile kind.
#[derive(Clone, Debug, Default)]
pub struct KindProfile {
    names: Names,
    labels: Names,
    rows: HashMap<(Option<u32>, Vec<u32>), [u64; 2]>,
    start: Option<SystemTime>,
}

/// Distinct type labels kept per profile; more fall under [`OTHER_TYPES`].
pub const MAX_TYPE_LABELS: usize = 1000;
/// The type label past [`MAX_TYPE_LABELS`].
pub const OTHER_TYPES: &str = "(other types)";

impl KindProfile {
    fn label(&mut self, label: &str) -> u32 {
        if let Some(i) = self.labels.find(label) {
            return i;
        }
        if self.labels.len() >= MAX_TYPE_LABELS {
            return self.labels.intern(OTHER_TYPES);
        }
        self.labels.intern(label)
    }

    /// Adds `values` to (`type_label`, `stack`), the stack leaf first.
    pub fn add(&mut self, type_label: Option<&str>, leaf_first: &[&str], values: [u64; 2]) {
        let label = type_label.map(|l| self.label(l));
        let stack: Vec<u32> = leaf_first
            .iter()
            .rev()
            .map(|f| self.names.intern(f))
            .collect();
        let row = self.rows.entry((label, stack)).or_default();
        row[0] = row[0].saturating_add(values[0]);
        row[1] = row[1].saturating_add(values[1]);
    }

    /// Rows: (type label, root-first frame names, values).
    pub fn rows(&self) -> impl Iterator<Item = (Option<&str>, Vec<&str>, [u64; 2])> {
        self.rows.iter().map(|((l, s), v)| {
            (
                l.and_then(|l| self.labels.get(l)),
                s.iter().filter_map(|&f| self.names.get(f)).collect(),
                *v,
            )
        })
    }

    /// Sums of the values.
    pub fn totals(&self) -> [u64; 2] {
        self.rows.values().fold([0, 0], |a, v| {
            [a[0].saturating_add(v[0]), a[1].saturating_add(v[1])]
        })
    }

    /// Ends the period at `now`: returns it, this one starts empty.
    pub fn take_period(&mut self, now: SystemTime) -> KindProfile {
        let mut period = std::mem::take(self);
        self.start = Some(now);
        if period.start.is_none() {
            period.start = Some(now);
        }
        period
    }

    /// When the profile began.
    pub fn start(&self) -> Option<SystemTime> {
        self.start
    }
}

thread_local! {
    // reentrancy: sampler-busy
    /// Set while this thread is inside one of the handlers: an event raised
    /// by what a handler does (a walk, a name lookup) is not counted.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    // reentrancy: none: a count of this thread's allocated bytes
    /// Bytes this thread allocated since its last `ObjectAllocated` sample.
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

struct Reentry;
impl Reentry {
    fn enter() -> Option<Reentry> {
        BUSY.with(|b| (!b.replace(true)).then_some(Reentry))
    }
}
impl Drop for Reentry {
    fn drop(&mut self) {
        BUSY.with(|b| b.set(false));
    }
}

/// Counters of the event profiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventProfilesStats {
    /// `GCAllocationTick` (or `AllocationSampled`) events counted.
    pub alloc_events: u64,
    /// `ObjectAllocated` callbacks seen (fallback).
    pub objects_seen: u64,
    /// `ObjectAllocated` samples taken (fallback).
    pub object_samples: u64,
    /// `ContentionStop` events counted.
    pub contentions: u64,
    /// Exceptions thrown (all) and kept.
    pub exceptions_thrown: u64,
    /// Exceptions kept (sampled).
    pub exceptions_kept: u64,
    /// Allocation samples walked (all of them while under
    /// [`EventProfilesConfig::alloc_walk_budget`]).
    pub alloc_walks: u64,
    /// The time those walks took, naming included (measured only under a
    /// budget).
    pub alloc_walk_ns: u64,
    /// Events or callbacks dropped: undecodable payload, failed walk.
    pub failures: u64,
    /// Runtime events delivered with stack IPs (`EventPipeEvent::stack`
    /// not empty; .NET 8.0.4 gives none to a profiler's session).
    pub events_with_stack: u64,
    /// Runtime events delivered to the session, of every ID (the
    /// keywords bring more than the events the profiles use: per-GC events
    /// come with the `GC` keyword).
    pub events_delivered: u64,
    /// `GCAllocationTick` events delivered, whatever the allocation source.
    pub ticks_delivered: u64,
    /// `AllocationSampled` events delivered, whatever the allocation source.
    pub sampled_delivered: u64,
}

/// Where the allocation profile comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocSource {
    /// No allocation profile.
    None,
    /// `GCAllocationTick` from the profiler's EventPipe session.
    AllocationTick,
    /// `AllocationSampled` from the profiler's EventPipe session (.NET 10+).
    AllocationSampled,
    /// `ObjectAllocated` with a byte-threshold sampler.
    ObjectAllocated,
}

impl AllocSource {
    /// A name for records.
    pub fn name(self) -> &'static str {
        match self {
            AllocSource::None => "none",
            AllocSource::AllocationTick => "gc-allocation-tick",
            AllocSource::AllocationSampled => "allocation-sampled",
            AllocSource::ObjectAllocated => "object-allocated",
        }
    }
}

/// The allocation, lock and exception profiles of one runtime.
///
/// Created in `Initialize` ([`EventProfiles::new`], whose masks the
/// profiler must return), fed by the profiler's `EventPipeEventDelivered`,
/// `ExceptionThrown` and `ObjectAllocated` callbacks, started once the
/// runtime runs managed code ([`EventProfiles::start`], which starts the
/// EventPipe session).
pub struct EventProfiles {
    config: EventProfilesConfig,
    /// Kinds asked for that this runtime cannot give, and why.
    unavailable: Vec<(ProfileKind, String)>,
    names: Arc<NameCache>,
    alloc_source: AllocSource,
    /// The live heap, when asked for and the runtime can give it.
    live_heap: Option<Arc<crate::live_heap::LiveHeap>>,
    /// Which runtime event the live heap samples from.
    heap_source: AllocSource,
    /// Whether the runtime's events are wanted (a session is needed).
    session_keywords: u64,
    session: Mutex<Option<Session>>,
    alloc: Mutex<KindProfile>,
    lock: Mutex<KindProfile>,
    exceptions: Mutex<KindProfile>,
    /// Thrown exceptions per type, for the 1-in-N sampling.
    thrown: Mutex<HashMap<Arc<str>, u64>>,
    alloc_events: AtomicU64,
    alloc_budget: WalkBudget,
    alloc_walks: AtomicU64,
    objects_seen: AtomicU64,
    object_samples: AtomicU64,
    contentions: AtomicU64,
    exceptions_thrown: AtomicU64,
    exceptions_kept: AtomicU64,
    failures: AtomicU64,
    events_with_stack: AtomicU64,
    events_delivered: AtomicU64,
    ticks_delivered: AtomicU64,
    sampled_delivered: AtomicU64,
    last_error: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl EventProfiles {
    // provenance: name-cache-runtime
    /// Sets the profiles up in `Initialize`: chooses the allocation source
    /// (the runtime's events with Info12, else `ObjectAllocated`) and
    /// returns the masks the profiler must add to its own.
    pub fn new(
        info: &ProfilerInfo,
        config: EventProfilesConfig,
        names: Arc<NameCache>,
    ) -> Result<(Arc<EventProfiles>, EventMasks)> {
        // Frames and types are named through the cache, which must hear
        // the unloads (registering twice is harmless).
        names.register(info)?;
        let eventpipe = info.has_info(12);
        let major = info.runtime_information().map(|r| r.major).unwrap_or(0);
        let alloc_source = if !config.alloc {
            AllocSource::None
        } else if config.force_object_allocated || !eventpipe {
            AllocSource::ObjectAllocated
        } else if major >= 10 {
            AllocSource::AllocationSampled
        } else {
            AllocSource::AllocationTick
        };
        let mut masks = EventMasks::from(EventMask::ENABLE_STACK_SNAPSHOT);
        let mut keywords = 0;
        match alloc_source {
            AllocSource::AllocationTick => keywords |= GC_KEYWORD,
            AllocSource::AllocationSampled => keywords |= ALLOCATION_SAMPLING_KEYWORD,
            AllocSource::ObjectAllocated => {
                masks.low |=
                    EventMask::ENABLE_OBJECT_ALLOCATED | EventMask::MONITOR_OBJECT_ALLOCATED
            }
            AllocSource::None => {}
        }
        let mut config = config;
        let mut unavailable = Vec::new();
        // The live heap samples from the runtime's events (where handles
        // exist, there is EventPipe too).
        let mut live_heap = None;
        let mut heap_source = AllocSource::None;
        if config.live_heap {
            match crate::live_heap::unavailable(info) {
                Some(why) => unavailable.push((ProfileKind::Heap, why)),
                None => {
                    let heap_config = crate::live_heap::LiveHeapConfig {
                        max_tracked: config.live_heap_max_tracked,
                    };
                    live_heap = Some(crate::live_heap::LiveHeap::register(info, heap_config)?);
                    heap_source = if major >= 10 {
                        keywords |= ALLOCATION_SAMPLING_KEYWORD;
                        AllocSource::AllocationSampled
                    } else {
                        keywords |= GC_KEYWORD;
                        AllocSource::AllocationTick
                    };
                }
            }
        }
        if config.lock && !eventpipe {
            config.lock = false;
            unavailable.push((
                ProfileKind::Lock,
                "the lock-contention profile needs the runtime's ContentionStop events through a profiler EventPipe session (ICorProfilerInfo12, .NET 5+)".to_string(),
            ));
        }
        if config.lock {
            keywords |= CONTENTION_KEYWORD;
        }
        if keywords != 0 {
            masks.high |= HighEventMask::MONITOR_EVENT_PIPE;
        }
        if config.exceptions {
            masks.low |= EventMask::MONITOR_EXCEPTIONS;
        }
        let profiles = Arc::new(EventProfiles {
            config,
            unavailable,
            names,
            alloc_source,
            live_heap,
            heap_source,
            session_keywords: keywords,
            session: Mutex::new(None),
            alloc: Mutex::default(),
            lock: Mutex::default(),
            exceptions: Mutex::default(),
            thrown: Mutex::default(),
            alloc_events: AtomicU64::new(0),
            alloc_budget: WalkBudget::new(config.alloc_walk_budget),
            alloc_walks: AtomicU64::new(0),
            objects_seen: AtomicU64::new(0),
            object_samples: AtomicU64::new(0),
            contentions: AtomicU64::new(0),
            exceptions_thrown: AtomicU64::new(0),
            exceptions_kept: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            events_with_stack: AtomicU64::new(0),
            events_delivered: AtomicU64::new(0),
            ticks_delivered: AtomicU64::new(0),
            sampled_delivered: AtomicU64::new(0),
            last_error: Mutex::new(None),
        });
        let now = SystemTime::now();
        for p in [&profiles.alloc, &profiles.lock, &profiles.exceptions] {
            lock(p).start = Some(now);
        }
        Ok((profiles, masks))
    }

    /// Kinds asked for that this runtime cannot give, and why.
    pub fn unavailable(&self) -> &[(ProfileKind, String)] {
        &self.unavailable
    }

    /// Where the allocation profile comes from.
    pub fn alloc_source(&self) -> AllocSource {
        self.alloc_source
    }

    /// The live heap, when asked for and this runtime can give it.
    pub fn live_heap(&self) -> Option<&Arc<crate::live_heap::LiveHeap>> {
        self.live_heap.as_ref()
    }

    /// Which runtime event the live heap samples from ([`AllocSource::None`]
    /// without a live heap).
    pub fn heap_source(&self) -> AllocSource {
        self.heap_source
    }

    /// Starts the EventPipe session the profiles need, if any (once the
    /// runtime runs managed code, e.g. at the second module load).
    pub fn start(&self, info: &ProfilerInfo) -> Result<()> {
        if self.session_keywords == 0 {
            return Ok(());
        }
        let mut session = lock(&self.session);
        if session.is_some() {
            return Ok(());
        }
        let level = if self.session_keywords & (GC_KEYWORD | ALLOCATION_SAMPLING_KEYWORD) != 0 {
            Level::Verbose
        } else {
            Level::Informational
        };
        let started = info.handle().event_pipe_start_session(
            &[ProviderConfig::new(
                RUNTIME_PROVIDER,
                self.session_keywords,
                level,
            )],
            false,
        );
        match started {
            Ok(s) => {
                *session = Some(s);
                Ok(())
            }
            Err(e) => {
                *lock(&self.last_error) = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Stops the session (at shutdown; events after it are not counted).
    pub fn stop(&self) {
        if let Some(s) = lock(&self.session).take() {
            let _ = s.stop();
        }
    }

    /// The last error of the session or a handler.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }

    /// The counters.
    pub fn stats(&self) -> EventProfilesStats {
        EventProfilesStats {
            alloc_events: self.alloc_events.load(Relaxed),
            alloc_walks: self.alloc_walks.load(Relaxed),
            alloc_walk_ns: self.alloc_budget.total_walk_ns(),
            objects_seen: self.objects_seen.load(Relaxed),
            object_samples: self.object_samples.load(Relaxed),
            contentions: self.contentions.load(Relaxed),
            exceptions_thrown: self.exceptions_thrown.load(Relaxed),
            exceptions_kept: self.exceptions_kept.load(Relaxed),
            failures: self.failures.load(Relaxed),
            events_with_stack: self.events_with_stack.load(Relaxed),
            events_delivered: self.events_delivered.load(Relaxed),
            ticks_delivered: self.ticks_delivered.load(Relaxed),
            sampled_delivered: self.sampled_delivered.load(Relaxed),
        }
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) {
        self.failures.fetch_add(1, Relaxed);
        let mut last = lock(&self.last_error);
        if last.is_none() {
            *last = Some(format!("{what}: {e}"));
        }
    }

    /// The calling thread's stack, leaf first, named (`None` when the walk
    /// failed: counted).
    fn walk_here(&self, info: &ProfilerInfo) -> Option<Vec<Arc<str>>> {
        let mut frames: Vec<Arc<str>> = Vec::with_capacity(32);
        let max = self.config.max_depth.max(1);
        let walked = info.walk_current_thread(WalkOptions::default(), |frame| {
            // Unmanaged frames (no function) are left out: the runtime's
            // own allocation and wait code.
            if let Some(f) = frame.function {
                let name = self
                    .names
                    .function_name(info, f)
                    .unwrap_or_else(|_| clrprof::stackwalk::UNKNOWN_FRAME.into());
                frames.push(name);
            }
            if frames.len() >= max {
                Walk::Stop
            } else {
                Walk::Continue
            }
        });
        match walked {
            Ok(_) => Some(frames),
            Err(e) => {
                self.failed("walk of the current thread", e);
                None
            }
        }
    }

    /// Adds `values` to `profile` at the calling thread's stack; `false`
    /// when the walk failed (counted, nothing added).
    fn record(
        &self,
        profile: &Mutex<KindProfile>,
        info: &ProfilerInfo,
        type_label: Option<&str>,
        values: [u64; 2],
    ) -> bool {
        let Some(frames) = self.walk_here(info) else {
            return false;
        };
        let names: Vec<&str> = frames.iter().map(|f| &**f).collect();
        lock(profile).add(type_label, &names, values);
        true
    }

    /// Records an allocation sample of estimated `objects` and `bytes` if
    /// the walk budget picks it, weighted by its odds; `type_label` is
    /// asked only then (`Err`: counted as a failure, nothing recorded).
    /// One walk serves the allocation profile (`into_alloc`) and the live
    /// heap (`heap`: the sample and how many objects it stands for).
    fn record_alloc(
        &self,
        info: &ProfilerInfo,
        type_label: impl FnOnce() -> Result<Option<Arc<str>>>,
        objects: f64,
        bytes: f64,
        into_alloc: bool,
        heap: Option<(&AllocationSample<'_>, f64)>,
    ) {
        let Some(chosen) = self.alloc_budget.choose() else {
            return;
        };
        let type_label = match type_label() {
            Ok(l) => l,
            Err(e) => {
                self.failed("allocated type", e);
                return;
            }
        };
        let w = chosen.weight;
        let frames = self.walk_here(info);
        if let Some(frames) = &frames {
            if into_alloc {
                let values = [(objects * w).round() as u64, (bytes * w).round() as u64];
                let names: Vec<&str> = frames.iter().map(|f| &**f).collect();
                lock(&self.alloc).add(type_label.as_deref(), &names, values);
            }
        }
        if let (Some(frames), Some((sample, weight)), Some(live)) =
            (frames.as_ref(), heap, &self.live_heap)
        {
            let ty = type_label.clone().unwrap_or_else(|| Arc::from("?"));
            live.offer(sample, ty, frames.clone().into(), weight * w);
        }
        self.alloc_budget.walked(&chosen);
        if frames.is_some() {
            self.alloc_walks.fetch_add(1, Relaxed);
        }
    }

    /// Feed from `Profiler::allocation_sampled`: the runtime's allocation
    /// events (`GCAllocationTick`, `AllocationSampled`) as the SDK hands
    /// them out, for the allocation profile and the live heap.
    pub fn allocation_sampled(&self, info: &ProfilerInfo, sample: &AllocationSample<'_>) {
        let size = sample.object_size();
        let (source, objects, bytes, heap_weight) = match sample.source() {
            AllocationSource::Tick { amount } => {
                let (o, b) = upscale_amount(amount, size);
                (
                    AllocSource::AllocationTick,
                    o as f64,
                    b as f64,
                    clrprof::allocations::tick_weight(amount, size),
                )
            }
            AllocationSource::Sampled { .. } => {
                let size = size.unwrap_or(0);
                let (o, b) = upscale_sampled(size);
                (
                    AllocSource::AllocationSampled,
                    o,
                    b,
                    clrprof::allocations::sampled_weight(size),
                )
            }
        };
        let into_alloc = self.alloc_source == source;
        let into_heap = self.live_heap.is_some() && self.heap_source == source;
        if !into_alloc && !into_heap {
            return;
        }
        let Some(_busy) = Reentry::enter() else {
            return;
        };
        if into_alloc {
            self.alloc_events.fetch_add(1, Relaxed);
        }
        self.record_alloc(
            info,
            || sample.type_name().map(|n| Some(Arc::from(n))),
            objects,
            bytes,
            into_alloc,
            into_heap.then_some((sample, heap_weight)),
        );
    }

    /// Feed from `EventPipeEventDelivered`: the runtime's contention events
    /// (others are counted only; allocations come through
    /// [`allocation_sampled`](Self::allocation_sampled)).
    pub fn event_pipe_event_delivered(&self, info: &ProfilerInfo, event: &EventPipeEvent<'_>) {
        if self.session_keywords == 0 {
            return;
        }
        let Some(_busy) = Reentry::enter() else {
            return;
        };
        self.events_delivered.fetch_add(1, Relaxed);
        if !event.stack.is_empty() {
            self.events_with_stack.fetch_add(1, Relaxed);
        }
        match event.event_id {
            GC_ALLOCATION_TICK => {
                self.ticks_delivered.fetch_add(1, Relaxed);
            }
            ALLOCATION_SAMPLED => {
                self.sampled_delivered.fetch_add(1, Relaxed);
            }
            _ => {}
        }
        match event.event_id {
            CONTENTION_STOP if self.config.lock => {
                match decode_contention_stop(event.event_version, event.data) {
                    Ok(Some((_flags, ns))) => {
                        self.contentions.fetch_add(1, Relaxed);
                        let ns = if ns.is_finite() && ns > 0.0 {
                            ns as u64
                        } else {
                            0
                        };
                        self.record(&self.lock, info, None, [1, ns]);
                    }
                    Ok(None) => {
                        self.contentions.fetch_add(1, Relaxed);
                        self.record(&self.lock, info, None, [1, 0]);
                    }
                    Err(e) => self.failed("ContentionStop payload", e),
                }
            }
            _ => {}
        }
    }

    /// Feed from `ExceptionThrown`.
    pub fn exception_thrown(&self, info: &ProfilerInfo, exception: ObjectId<'_>) {
        if !self.config.exceptions {
            return;
        }
        let Some(_busy) = Reentry::enter() else {
            return;
        };
        self.exceptions_thrown.fetch_add(1, Relaxed);
        let ty = match info
            .class_from_object(exception)
            .and_then(|c| type_name(info, &self.names, c, 0))
        {
            Ok(t) => t,
            Err(e) => {
                self.failed("exception type", e);
                return;
            }
        };
        let every = u64::from(self.config.exception_every.max(1));
        let keep = {
            let mut thrown = lock(&self.thrown);
            let n = thrown.entry(ty.clone()).or_insert(0);
            *n += 1;
            (*n - 1) % every == 0
        };
        if keep {
            self.exceptions_kept.fetch_add(1, Relaxed);
            self.record(&self.exceptions, info, Some(&ty), [every, 0]);
        }
    }

    /// Feed from `ObjectAllocated` (the fallback source).
    pub fn object_allocated(&self, info: &ProfilerInfo, object: ObjectId<'_>, class: ClassId<'_>) {
        if self.alloc_source != AllocSource::ObjectAllocated {
            return;
        }
        let Some(_busy) = Reentry::enter() else {
            return;
        };
        self.objects_seen.fetch_add(1, Relaxed);
        let size = match info.object_size2(object) {
            Ok(s) => s as u64,
            Err(_) => match info.object_size(object) {
                Ok(s) => u64::from(s),
                Err(e) => {
                    self.failed("object size", e);
                    return;
                }
            },
        };
        let every = self.config.alloc_every_bytes;
        let amount = ALLOCATED.with(|a| {
            let sum = a.get().saturating_add(size);
            if sum >= every {
                a.set(0);
                Some(sum)
            } else {
                a.set(sum);
                None
            }
        });
        let Some(amount) = amount else {
            return;
        };
        self.object_samples.fetch_add(1, Relaxed);
        let objects = amount.saturating_add(size / 2) / size.max(1);
        self.record_alloc(
            info,
            || type_name(info, &self.names, class, 0).map(Some),
            objects.max(1) as f64,
            amount as f64,
            true,
            None,
        );
    }

    /// The profile of `kind` so far (a copy), for [`ProfileKind::Alloc`],
    /// [`ProfileKind::Lock`] and [`ProfileKind::Exception`].
    ///
    /// Once the process is ending, the profile's lock is waited for at
    /// most [`EXIT_WAIT`](clrprof::exit::EXIT_WAIT) (a thread the system
    /// ended while it recorded holds it forever): `None` then, as for a
    /// kind these profiles do not keep.
    pub fn profile(&self, kind: ProfileKind) -> Option<KindProfile> {
        let p = self.slot(kind)?;
        clrprof::exit::lock_unless_exiting(p).map(|p| p.clone())
    }

    /// Ends the period of `kind` at `now` (continuous mode; bounded at
    /// exit as [`profile`](Self::profile)).
    pub fn take_period(&self, kind: ProfileKind, now: SystemTime) -> Option<KindProfile> {
        let p = self.slot(kind)?;
        clrprof::exit::lock_unless_exiting(p).map(|mut p| p.take_period(now))
    }

    fn slot(&self, kind: ProfileKind) -> Option<&Mutex<KindProfile>> {
        match kind {
            ProfileKind::Alloc => Some(&self.alloc),
            ProfileKind::Lock => Some(&self.lock),
            ProfileKind::Exception => Some(&self.exceptions),
            _ => None,
        }
    }
}

/// A class's name as the runtime's events spell it: arrays as the element
/// type's name and `[]` (`[,]` for rank 2, ...), since `GetClassIDInfo2`
/// refuses array classes (`CORPROF_E_CLASSID_IS_ARRAY`).
fn type_name(
    info: &ProfilerInfo,
    names: &NameCache,
    class: ClassId<'_>,
    depth: u32,
) -> Result<Arc<str>> {
    let Some(array) = info.is_array_class(class)? else {
        return names.class_name(info, class);
    };
    let element: Arc<str> = match crate::heap_snapshot::primitive_name(array.element_type) {
        Some(n) => n.into(),
        None if depth < 8 => type_name(info, names, array.element_class, depth + 1)?,
        None => "?".into(),
    };
    let commas = ",".repeat(array.rank.saturating_sub(1) as usize);
    Ok(format!("{element}[{commas}]").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16z(s: &str) -> Vec<u8> {
        let mut v: Vec<u8> = s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        v.extend([0, 0]);
        v
    }

    fn tick_v4(amount: u64, ty: &str, size: u64) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend((amount as u32).to_le_bytes());
        d.extend(0u32.to_le_bytes());
        d.extend(7u16.to_le_bytes());
        d.extend(amount.to_le_bytes());
        d.extend(0x1234u64.to_le_bytes());
        d.extend(utf16z(ty));
        d.extend(0u32.to_le_bytes());
        d.extend(0xdeadu64.to_le_bytes());
        d.extend(size.to_le_bytes());
        d
    }

    #[test]
    fn set_up_outside_initialize_is_refused() {
        let fake = clrprof::testing::fake::FakeRuntime::with_info_version(12);
        // SAFETY: [test-fake] the fake holds no objects: nothing is read through it.
        let info = unsafe { fake.profiler_info() };
        let config = EventProfilesConfig {
            alloc: true,
            ..EventProfilesConfig::default()
        };
        // The name cache (and the masks) can only be registered in
        // Initialize: anywhere else the set-up fails instead of naming
        // frames through a cache that would not hear the unloads.
        match EventProfiles::new(&info, config, Arc::new(NameCache::new())) {
            Err(clrprof::Error::NotInInitialize { .. }) => {}
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("EventProfiles::new outside Initialize succeeded"),
        }
    }

    #[test]
    fn allocation_tick_versions() {
        let d = tick_v4(102_456, "System.Byte[]", 1_024);
        let t = decode_allocation_tick(4, &d).unwrap();
        assert_eq!(t.amount, 102_456);
        assert_eq!(t.type_name.as_deref(), Some("System.Byte[]"));
        assert_eq!(t.object_size, Some(1_024));
        assert_eq!(upscale_tick(&t), (100, 102_456));
        // V3: no object size; V2: no address either.
        let v3 = &d[..d.len() - 8];
        let t3 = decode_allocation_tick(3, v3).unwrap();
        assert_eq!((t3.object_size, upscale_tick(&t3)), (None, (1, 102_456)));
        let v2 = &d[..d.len() - 16];
        assert_eq!(
            decode_allocation_tick(2, v2).unwrap().type_name.as_deref(),
            Some("System.Byte[]")
        );
        // V1: amount, kind, instance only.
        let t1 = decode_allocation_tick(1, &d[..10]).unwrap();
        assert_eq!((t1.amount, t1.type_name), (102_456, None));
        // Any amount and size the payload holds upscale without overflow.
        let huge = AllocationTick {
            amount: u64::MAX,
            kind: 0,
            type_name: None,
            object_size: Some(u64::MAX),
        };
        assert_eq!(upscale_tick(&huge), (1, u64::MAX));
        // Truncated payloads are errors, not panics.
        assert!(decode_allocation_tick(4, &d[..d.len() - 1]).is_err());
        assert!(decode_allocation_tick(2, &d[..12]).is_err());
    }

    #[test]
    fn contention_stop_duration() {
        let mut d = vec![0u8];
        d.extend(7u16.to_le_bytes());
        d.extend(1_500_000.0f64.to_bits().to_le_bytes());
        assert_eq!(
            decode_contention_stop(1, &d).unwrap(),
            Some((0, 1_500_000.0))
        );
        assert_eq!(decode_contention_stop(0, &d[..3]).unwrap(), None);
        assert!(decode_contention_stop(1, &d[..5]).is_err());
    }

    #[test]
    fn allocation_sampled_upscaling() {
        let mut d = Vec::new();
        d.extend(0u32.to_le_bytes());
        d.extend(7u16.to_le_bytes());
        d.extend(1u64.to_le_bytes());
        d.extend(utf16z("Foo"));
        d.extend(2u64.to_le_bytes());
        d.extend(24u64.to_le_bytes());
        d.extend(3u64.to_le_bytes());
        let s = decode_allocation_sampled(&d).unwrap();
        assert_eq!((s.type_name.as_str(), s.object_size), ("Foo", 24));
        // A small object stands for about mean/size objects, its bytes for
        // about the mean; a huge one for itself.
        let (n, b) = upscale_sampled(24);
        assert!((n - ALLOCATION_SAMPLING_MEAN / 24.0).abs() < 1.0, "{n}");
        assert!((b - ALLOCATION_SAMPLING_MEAN).abs() < 24.0, "{b}");
        let (n, _) = upscale_sampled(100 * 1024 * 1024);
        assert!((n - 1.0).abs() < 1e-9);
    }

    #[test]
    fn kinds_parse_and_name() {
        assert_eq!(
            ProfileKind::parse_list("alloc, cpu,wall,alloc").unwrap(),
            vec![ProfileKind::Cpu, ProfileKind::Wall, ProfileKind::Alloc]
        );
        assert!(ProfileKind::parse_list("cpu,heaps").is_err());
        assert_eq!(
            ProfileKind::parse_list("heap").unwrap(),
            vec![ProfileKind::Heap]
        );
        for k in ProfileKind::ALL {
            for (t, u) in k.sample_types() {
                assert!(!t.contains('-') && !u.contains('-'));
            }
        }
    }

    #[test]
    fn kind_profile_rows_and_labels() {
        let mut p = KindProfile::default();
        p.add(Some("A"), &["Leaf", "Main"], [2, 100]);
        p.add(Some("A"), &["Leaf", "Main"], [1, 50]);
        p.add(Some("B"), &["Other", "Main"], [1, 10]);
        assert_eq!(p.totals(), [4, 160]);
        let mut rows: Vec<_> = p
            .rows()
            .map(|(l, s, v)| (l.map(String::from), s.join(";"), v))
            .collect();
        rows.sort();
        assert_eq!(
            rows,
            vec![
                (Some("A".into()), "Main;Leaf".into(), [3, 150]),
                (Some("B".into()), "Main;Other".into(), [1, 10]),
            ]
        );
        for i in 0..MAX_TYPE_LABELS + 5 {
            p.add(Some(&format!("T{i}")), &["X"], [1, 1]);
        }
        assert!(p.labels.len() <= MAX_TYPE_LABELS + 1);
        assert!(p.rows().any(|(l, _, _)| l == Some(OTHER_TYPES)));
        let period = p.take_period(SystemTime::now());
        assert_eq!(p.totals(), [0, 0]);
        assert!(period.totals()[0] > 4);
    }
}
