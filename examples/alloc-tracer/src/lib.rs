//! alloc-tracer: exact allocation counts and bytes per type, and one record per GC.
//!
//! Records (to the file named by `CLRPROF_OUTPUT`, or stderr):
//! `{"event":"runtime",...}` first; `{"event":"gc","gc":N,"generations":[0,1],
//! "reason":"induced","survived_bytes":B}` when each GC finishes (the bytes
//! of the ranges its `MovedReferences2` / `SurvivingReferences2` reported);
//! and when the profiler finishes (see [`clrprof::Profiler::finish`]: at
//! shutdown, or at process exit when the runtime is never shut down) one
//! `{"event":"alloc","type":"Namespace.Type","count":N,"bytes":B}` per allocated type, by name (arrays as `Element[]`, generic
//! instantiations under their definition's name).
//!
//! `ObjectAllocated` reports every allocation once the profiler asks for it at
//! startup (`ENABLE_OBJECT_ALLOCATED` is immutable after `Initialize`); the
//! runtime then takes its slower allocation path, so this tracer costs time.

use clrprof::gc::{GcRanges, GcReason, GenerationSet};
use clrprof::output::JsonLines;
use clrprof::{
    profiler, ClassId, EventMask, EventMasks, ObjectId, Profiler, ProfilerInfo, RawClassId, Result,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Slots of the class table (a power of two): more than the classes most
/// apps allocate.
const SLOTS: usize = 4096;

/// One class's allocations. `class` is the raw `ClassID` (0: a free slot).
#[derive(Default)]
struct Slot {
    class: AtomicUsize,
    count: AtomicU64,
    bytes: AtomicU64,
}

/// Allocation counts per class, for `ObjectAllocated`, which the runtime
/// calls for every allocation on every allocating thread: a fixed table
/// indexed by a hash of the `ClassID` (open addressing, linear probing), in
/// which a class claims its slot once (compare-and-swap) and from then on
/// every allocation is two relaxed atomic additions: no lock, no
/// allocation. A class that finds no free slot (an app with more than
/// [`SLOTS`] allocated classes) is counted in `overflow`, under a lock.
struct ClassTable {
    slots: Box<[Slot]>,
    overflow: Mutex<HashMap<RawClassId, (u64, u64)>>,
}

impl Default for ClassTable {
    fn default() -> Self {
        ClassTable {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            overflow: Mutex::default(),
        }
    }
}

impl ClassTable {
    /// Adds one allocation of `size` bytes to `class`; `true` if this was
    /// the class's first (the caller names it).
    fn add(&self, class: RawClassId, size: u64) -> bool {
        let id = class.0;
        // ClassIDs are addresses: multiply to spread them, keep the top bits.
        let home = ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        for probe in 0..SLOTS {
            let slot = &self.slots[home.wrapping_add(probe) % SLOTS];
            let mut first = false;
            let mut owner = slot.class.load(Ordering::Acquire);
            if owner == 0 {
                owner =
                    match slot
                        .class
                        .compare_exchange(0, id, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => {
                            first = true;
                            id
                        }
                        Err(other) => other,
                    };
            }
            if owner == id {
                slot.count.fetch_add(1, Ordering::Relaxed);
                slot.bytes.fetch_add(size, Ordering::Relaxed);
                return first;
            }
        }
        let Ok(mut overflow) = self.overflow.lock() else {
            return false;
        };
        let counts = overflow.entry(class).or_default();
        counts.0 += 1;
        counts.1 += size;
        counts.0 == 1
    }

    /// Every class counted so far, with its count and bytes.
    fn counts(&self) -> Vec<(RawClassId, u64, u64)> {
        let mut all: Vec<_> = self
            .slots
            .iter()
            .filter(|s| s.class.load(Ordering::Acquire) != 0)
            .map(|s| {
                (
                    RawClassId(s.class.load(Ordering::Relaxed)),
                    s.count.load(Ordering::Relaxed),
                    s.bytes.load(Ordering::Relaxed),
                )
            })
            .collect();
        if let Ok(overflow) = self.overflow.lock() {
            all.extend(overflow.iter().map(|(c, (n, b))| (*c, *n, *b)));
        }
        all
    }
}

/// The current GC, between `GarbageCollectionStarted` and `Finished`.
#[derive(Default)]
struct CurrentGc {
    generations: Vec<u32>,
    reason: &'static str,
    survived_bytes: u64,
}

/// The profiler's state.
#[profiler(clsid = "{6F1A2B3C-4D5E-4F60-8A7B-9C0D1E2F3A4B}")]
#[derive(Default)]
pub struct AllocTracer {
    out: JsonLines,
    by_class: ClassTable,
    /// Class names, resolved at each class's first allocation.
    names: Mutex<HashMap<RawClassId, String>>,
    gcs: AtomicU64,
    gc: Mutex<CurrentGc>,
}

/// A readable name for any class, arrays included.
fn type_name(info: &ProfilerInfo, class: ClassId<'_>) -> String {
    if let Ok(Some(array)) = info.is_array_class(class) {
        let commas = ",".repeat(array.rank.saturating_sub(1) as usize);
        let element = if array.element_class.is_null() {
            format!("{:?}", array.element_type)
        } else {
            type_name(info, array.element_class)
        };
        return format!("{element}[{commas}]");
    }
    info.class_name(class)
        .unwrap_or_else(|e| format!("<class {:#x}: {e}>", class.as_sys()))
}

impl Profiler for AllocTracer {
    // ANCHOR: initialize
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        Ok((EventMask::MONITOR_OBJECT_ALLOCATED
            | EventMask::ENABLE_OBJECT_ALLOCATED
            | EventMask::MONITOR_GC)
            .into())
    }
    // ANCHOR_END: initialize

    // ANCHOR: allocated
    fn object_allocated(&self, info: &ProfilerInfo, object: ObjectId<'_>, class: ClassId<'_>) {
        let size = info.object_size(object).unwrap_or(0) as u64;
        if self.by_class.add(class.to_raw(), size) {
            // Named at the first allocation: the class may be unloaded by shutdown.
            let name = type_name(info, class);
            if let Ok(mut names) = self.names.lock() {
                names.insert(class.to_raw(), name);
            }
        }
    }
    // ANCHOR_END: allocated

    // ANCHOR: gc
    fn garbage_collection_started(
        &self,
        _info: &ProfilerInfo,
        gens: GenerationSet,
        reason: GcReason,
    ) {
        if let Ok(mut gc) = self.gc.lock() {
            *gc = CurrentGc {
                generations: (0..gens.len() as u32)
                    .filter(|&g| gens.contains(g))
                    .collect(),
                reason: match reason {
                    GcReason::Induced => "induced",
                    _ => "other",
                },
                survived_bytes: 0,
            };
        }
    }

    fn moved_references(&self, _info: &ProfilerInfo, ranges: GcRanges<'_>) {
        self.count_survivors(ranges);
    }

    fn surviving_references(&self, _info: &ProfilerInfo, ranges: GcRanges<'_>) {
        self.count_survivors(ranges);
    }

    fn garbage_collection_finished(&self, _info: &ProfilerInfo) {
        let n = self.gcs.fetch_add(1, Ordering::Relaxed) + 1;
        let Ok(gc) = self.gc.lock() else {
            return;
        };
        let generations: Vec<String> = gc.generations.iter().map(u32::to_string).collect();
        self.out
            .record("gc")
            .num("gc", n)
            .raw("generations", &format!("[{}]", generations.join(",")))
            .str("reason", gc.reason)
            .num("survived_bytes", gc.survived_bytes)
            .write();
    }
    // ANCHOR_END: gc

    // Names were resolved at each class's first allocation: nothing here
    // calls the runtime, which may be gone at process exit.
    fn finish(&self) {
        let mut by_name: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let names = self.names.lock().ok();
        for (class, count, bytes) in self.by_class.counts() {
            let name = names
                .as_ref()
                .and_then(|n| n.get(&class).cloned())
                .unwrap_or_else(|| format!("<class {:#x}>", class.0));
            let e = by_name.entry(name).or_default();
            e.0 += count;
            e.1 += bytes;
        }
        for (name, (count, bytes)) in by_name {
            self.out
                .record("alloc")
                .str("type", &name)
                .num("count", count)
                .num("bytes", bytes)
                .write();
        }
        self.out.flush();
    }
}

impl AllocTracer {
    fn count_survivors(&self, ranges: GcRanges<'_>) {
        let bytes: usize = ranges.iter().map(|r| r.len).sum();
        if let Ok(mut gc) = self.gc.lock() {
            gc.survived_bytes += bytes as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_table_counts_per_class_and_spills_over() {
        let table = ClassTable::default();
        // More classes than slots: the last ones go to the overflow map.
        let classes = SLOTS + 10;
        for c in 1..=classes {
            let class = RawClassId(c * 8);
            assert!(table.add(class, 24), "first allocation of {c}");
            assert!(!table.add(class, 24));
        }
        assert!(!table.add(RawClassId(8), 100));
        let counts = table.counts();
        assert_eq!(counts.len(), classes);
        for (class, count, bytes) in counts {
            let extra = u64::from(class.0 == 8);
            assert_eq!((count, bytes), (2 + extra, 48 + 100 * extra), "{class:?}");
        }
    }
}
