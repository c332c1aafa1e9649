//! The clrprof side of `cargo xtask bench dispatch`: a profiler whose
//! callbacks do as little as a profiler can, to measure what the SDK's
//! dispatch costs against the hand-written C profiler of
//! `benches/dispatch/baseline.c`.
//!
//! It asks for `ObjectAllocated`, `ExceptionThrown`, the GC callbacks
//! (`MovedReferences2`, `SurvivingReferences2`) and `JITCompilationStarted`
//! (only one of them when `CLRPROF_DISPATCH_EVENTS` names it, as the C
//! profiler does: `object_allocated`, `exception_thrown`,
//! `moved_references`, `jit_compilation_started`; `CLRPROF_DISPATCH_WATCH=0`
//! turns the SDK's unhandled-exception watch off, and the C profiler leaves
//! out the flags the watch would have added); each adds one to its own counter (a relaxed atomic add, exactly as the C
//! profiler does), so the benchmark can check that the callbacks arrived
//! and an unloaded profiler cannot look fast. When the profiler finishes it
//! writes `{"event":"dispatch_counts","allocations":A,"exceptions":E,
//! "moved":MV,"moved_ranges":MR,"surviving":S,"jit":J,"mask_read":R}` to
//! `CLRPROF_OUTPUT` (`mask_read`: the low event mask the runtime reported at
//! `Shutdown`, 0 if `Shutdown` never came).

use clrprof::gc::GcRanges;
use clrprof::output::JsonLines;
use clrprof::{
    profiler, ClassId, EventMask, EventMasks, FunctionId, ObjectId, Profiler, ProfilerInfo, Result,
};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// The counters, one per callback kind.
#[profiler(clsid = "{5E0C3B9A-8D41-4F27-B6E3-2A9C71D04F85}")]
#[derive(Default)]
pub struct DispatchProfiler {
    out: JsonLines,
    allocations: AtomicU64,
    exceptions: AtomicU64,
    moved: AtomicU64,
    moved_ranges: AtomicU64,
    surviving: AtomicU64,
    jit: AtomicU64,
    mask_read: AtomicU32,
}

impl Profiler for DispatchProfiler {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        let events = std::env::var("CLRPROF_DISPATCH_EVENTS").unwrap_or_default();
        let wants = |name: &str| events.is_empty() || events == name;
        let mut mask = EventMask::empty();
        if wants("object_allocated") {
            mask |= EventMask::MONITOR_OBJECT_ALLOCATED | EventMask::ENABLE_OBJECT_ALLOCATED;
        }
        if wants("exception_thrown") {
            mask |= EventMask::MONITOR_EXCEPTIONS;
        }
        if wants("moved_references") {
            mask |= EventMask::MONITOR_GC;
        }
        if wants("jit_compilation_started") {
            mask |= EventMask::MONITOR_JIT_COMPILATION;
        }
        Ok(mask.into())
    }

    /// `CLRPROF_DISPATCH_WATCH=0` turns the SDK's unhandled-exception watch
    /// off, to measure the exception callbacks without its stack walk.
    fn watch_unhandled_exceptions() -> bool {
        std::env::var("CLRPROF_DISPATCH_WATCH").as_deref() != Ok("0")
    }

    fn object_allocated(&self, _info: &ProfilerInfo, _object: ObjectId<'_>, _class: ClassId<'_>) {
        self.allocations.fetch_add(1, Relaxed);
    }

    fn exception_thrown(&self, _info: &ProfilerInfo, _exception: ObjectId<'_>) {
        self.exceptions.fetch_add(1, Relaxed);
    }

    fn moved_references(&self, _info: &ProfilerInfo, ranges: GcRanges<'_>) {
        self.moved.fetch_add(1, Relaxed);
        self.moved_ranges.fetch_add(ranges.len() as u64, Relaxed);
    }

    fn surviving_references(&self, _info: &ProfilerInfo, _ranges: GcRanges<'_>) {
        self.surviving.fetch_add(1, Relaxed);
    }

    fn jit_compilation_started(
        &self,
        _info: &ProfilerInfo,
        _function: FunctionId<'_>,
        _is_safe_to_block: bool,
    ) {
        self.jit.fetch_add(1, Relaxed);
    }

    fn shutdown(&self, info: &ProfilerInfo) {
        if let Ok(masks) = info.event_mask() {
            self.mask_read.store(masks.low.bits(), Relaxed);
        }
    }

    fn finish(&self) {
        self.out
            .record("dispatch_counts")
            .str("mode", "empty")
            .num("mask_read", self.mask_read.load(Relaxed).into())
            .num("allocations", self.allocations.load(Relaxed))
            .num("exceptions", self.exceptions.load(Relaxed))
            .num("moved", self.moved.load(Relaxed))
            .num("moved_ranges", self.moved_ranges.load(Relaxed))
            .num("surviving", self.surviving.load(Relaxed))
            .num("jit", self.jit.load(Relaxed))
            .write();
    }
}
