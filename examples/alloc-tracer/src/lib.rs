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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Allocations of one class.
struct Allocations {
    name: String,
    count: u64,
    bytes: u64,
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
    by_class: Mutex<HashMap<RawClassId, Allocations>>,
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
        let Ok(mut map) = self.by_class.lock() else {
            return;
        };
        // Named at the first allocation: the class may be unloaded by shutdown.
        let entry = map.entry(class.to_raw()).or_insert_with(|| Allocations {
            name: type_name(info, class),
            count: 0,
            bytes: 0,
        });
        entry.count += 1;
        entry.bytes += size;
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
        if let Ok(map) = self.by_class.lock() {
            for a in map.values() {
                let e = by_name.entry(a.name.clone()).or_default();
                e.0 += a.count;
                e.1 += a.bytes;
            }
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
