//! The code map: which managed function's native code holds an address.
//!
//! A stack taken without the runtime's help (a frame-pointer walk in a
//! signal handler) is a list of instruction pointers. The runtime names an
//! instruction pointer (`GetFunctionFromIP`), but only outside a signal
//! handler, and only while the code is still there; the code map answers
//! from the SDK's own memory instead, from any context, and only with
//! functions that are loaded now.
//!
//! # What feeds it
//! It is an SDK component ([`CodeMap::register`]): the SDK delivers to it
//! - `JITCompilationFinished`: every native code version of the function
//!   (`GetNativeCodeStartAddresses` and `GetCodeInfo4`, Info9; tier 0,
//!   the instrumented tier, tier 1 and OSR bodies each have their own);
//! - `ReJITCompilationFinished`: the versions of that ReJIT's IL;
//! - `DynamicMethodJITCompilationFinished` (Info8 runtimes): dynamic
//!   methods (`DynamicMethod`, compiled expressions, IL stubs);
//! - `JITCachedFunctionSearchFinished` (`MONITOR_CACHE_SEARCHES`): code
//!   precompiled as ReadyToRun, which the runtime does not jit.
//!
//! A function whose code is not published yet when its callback runs (the
//! runtime sets a ReadyToRun method's code after the search callback) is
//! kept as pending and looked up again from the sampling thread
//! ([`CodeMap::update`]), inside an [`UnloadFence::resolve`] so that it
//! cannot unload meanwhile.
//!
//! # Removal at unload, behind the fence
//! The [`UnloadFence`] the map is registered with calls it at the start of
//! `ClassUnloadStarted`, `ModuleUnloadStarted` and `DynamicMethodUnloaded`,
//! before it counts the unload (and before any memory of the unloading code
//! is freed). The map then drops the entries of that class, module or
//! dynamic method, and of every generic instantiation (a method
//! instantiated over a collectible type may belong to a class and a module
//! that do not unload: the map cannot tell, so it lets them all go). So an
//! entry the map returns names a function that was loaded at the moment of
//! the look-up; a sample taken before an unload began is dropped by its
//! reader (its unload epoch, counted by every fence after its hooks,
//! differs).
//!
//! # Look-ups without a lock
//! The entries are an immutable sorted array (and a short sorted array of
//! recent additions) behind one atomic pointer. A writer (a JIT callback,
//! under a mutex) builds a new snapshot and swaps the pointer; a reader
//! counts itself in, loads the pointer, binary-searches, and counts itself
//! out. Old snapshots are freed by a later writer once it has seen no reader
//! in (every reader that could hold the old pointer has left). A look-up
//! allocates nothing, takes no lock and makes no system call, so a signal
//! handler may make it.

use super::naming::{UnloadFence, UnloadHook, Unloading};
use crate::error::Result;
use crate::event_mask::{EventMask, EventMasks};
use crate::ids::{FunctionId, RawFunctionId, RawReJitId};
use crate::info::ProfilerInfo;
use crate::runtimes::RuntimeSlot;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};

/// One range of native code of one function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    start: usize,
    /// One past the last byte.
    end: usize,
    function: usize,
    class: usize,
    module: usize,
    /// A generic instantiation (class or method type arguments): dropped at
    /// every unload.
    generic: bool,
}

/// A function to look up again ([`CodeMap::update`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    function: usize,
    rejit: usize,
    dynamic: bool,
    /// Look-ups so far; given up after [`PENDING_TRIES`].
    tries: u32,
}

/// Look-ups of a pending function before the map gives up on it (a
/// function whose code never gets published: its compilation was
/// abandoned, or the profiler declined a precompiled body).
const PENDING_TRIES: u32 = 64;

/// An immutable view of the map.
struct Snapshot {
    /// Sorted by `start`, not overlapping.
    base: Arc<[Entry]>,
    /// Sorted by `start`: additions since `base` was built.
    recent: Box<[Entry]>,
}

impl Snapshot {
    // signal-context: async-signal-safe: a binary search of an immutable slice
    /// The entry of `entries` (sorted, not overlapping) that holds `ip`.
    fn find(entries: &[Entry], ip: usize) -> Option<&Entry> {
        // `lo` ends as the number of entries starting at or below `ip`.
        let (mut lo, mut hi) = (0usize, entries.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // signal-context: bounds: `lo <= mid < hi <= entries.len()`
            let start = entries[mid].start;
            if start <= ip {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return None;
        }
        // signal-context: bounds: `0 < lo <= entries.len()`
        let e = &entries[lo - 1];
        (ip < e.end).then_some(e)
    }

    // signal-context: async-signal-safe: two binary searches
    fn lookup(&self, ip: usize) -> Option<&Entry> {
        match Snapshot::find(&self.recent, ip) {
            Some(e) => Some(e),
            None => Snapshot::find(&self.base, ip),
        }
    }
}

struct Writer {
    base: Arc<[Entry]>,
    recent: Vec<Entry>,
    /// Snapshots swapped out, freed once no reader can hold them.
    retired: Vec<*mut Snapshot>,
    /// Functions whose code was not published when their callback ran.
    /// Cleared at every unload.
    pending: Vec<Pending>,
}

// SAFETY: [local-memory] the raw pointers in `retired` are boxes this writer owns alone; they
// are only freed under the writer's mutex.
unsafe impl Send for Writer {}

/// Which native code belongs to which managed function, for one runtime.
/// See the [module docs](self).
pub struct CodeMap {
    slot: RuntimeSlot,
    current: AtomicPtr<Snapshot>,
    readers: AtomicUsize,
    writer: Mutex<Writer>,
    added: AtomicU64,
    removed: AtomicU64,
    /// Whether the runtime has Info9 (every native code version) and Info8
    /// (dynamic methods).
    has_info9: bool,
}

// SAFETY: [local-memory] `current` points to a snapshot only readers share (immutable);
// everything else is atomics or behind the mutex.
unsafe impl Sync for CodeMap {}
// SAFETY: [local-memory] as above: the snapshots are owned by the map.
unsafe impl Send for CodeMap {}

/// Counters of a code map.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodeMapStats {
    /// Code ranges in the map now.
    pub ranges: usize,
    /// Ranges added so far.
    pub added: u64,
    /// Ranges removed at unloads so far.
    pub removed: u64,
    /// Functions whose code was not yet published, to look up again.
    pub pending: usize,
}

/// Additions kept in the short array before it is merged into the base:
/// at least this many, or a quarter of the base (so each entry is copied a
/// bounded number of times on average).
const RECENT_MIN: usize = 256;

impl CodeMap {
    fn new(slot: RuntimeSlot, has_info9: bool) -> CodeMap {
        let empty: Arc<[Entry]> = Arc::from(Vec::new());
        let first = Box::into_raw(Box::new(Snapshot {
            base: empty.clone(),
            recent: Box::new([]),
        }));
        CodeMap {
            slot,
            current: AtomicPtr::new(first),
            readers: AtomicUsize::new(0),
            writer: Mutex::new(Writer {
                base: empty,
                recent: Vec::new(),
                retired: Vec::new(),
                pending: Vec::new(),
            }),
            added: AtomicU64::new(0),
            removed: AtomicU64::new(0),
            has_info9,
        }
    }

    /// A code map for the runtime of `info`, registered as an SDK component
    /// (call it from `Initialize`), whose entries `fence` removes before it
    /// counts an unload. The SDK adds `MONITOR_JIT_COMPILATION` and
    /// `MONITOR_CACHE_SEARCHES` to the event mask (the fence adds the
    /// unload events).
    ///
    /// Code compiled before the map was registered (before an attach) is
    /// not in it; after an attach precompiled (ReadyToRun) code is not
    /// either (`MONITOR_CACHE_SEARCHES` cannot be set then). A fence of another runtime (which hears that runtime's
    /// unloads, not this one's) is refused with [`Error::WrongPartner`](crate::error::Error::WrongPartner).
    // provenance: fence-runtime
    pub fn register(info: &ProfilerInfo, fence: &Arc<UnloadFence>) -> Result<Arc<CodeMap>> {
        if fence.runtime_slot() != info.runtime_slot() {
            return Err(crate::error::Error::WrongPartner {
                call: "stackwalk::CodeMap::register",
                why: "the unload fence was registered with another runtime, whose unloads it \
                      hears instead of this one's; register the map with this runtime's fence"
                    .to_string(),
            });
        }
        let map = Arc::new(CodeMap::new(info.runtime_slot(), info.has_info(9)));
        let hook: Arc<dyn UnloadHook> = map.clone();
        fence.add_hook(Arc::downgrade(&hook));
        info.register(Arc::new(CodeMapComponent {
            map: Arc::downgrade(&map),
            _hook: hook,
            attached: info.is_attached(),
        }))?;
        Ok(map)
    }

    /// The runtime this map describes.
    pub fn runtime_slot(&self) -> RuntimeSlot {
        self.slot
    }

    // signal-context: async-signal-safe: atomic counter, atomic load, binary search of an immutable array; no call
    /// The function whose native code holds `ip`, if the map knows one.
    ///
    /// The ID is raw: it names a function that was loaded at the moment of
    /// the look-up, and says nothing of how long it stays loaded (see the
    /// [module docs](self)). Lock-free and allocation-free; callable from a
    /// signal handler.
    pub fn lookup(&self, ip: usize) -> Option<RawFunctionId> {
        self.lookup_range(ip).map(|(f, _)| f)
    }

    // signal-context: async-signal-safe: as `lookup`
    /// Like [`lookup`](Self::lookup), with the first byte of the code range
    /// that holds `ip` (each native code version has its own ranges).
    pub fn lookup_range(&self, ip: usize) -> Option<(RawFunctionId, usize)> {
        self.readers.fetch_add(1, SeqCst);
        let snapshot = self.current.load(SeqCst);
        // SAFETY: [local-memory] `snapshot` was the current one after this reader counted itself
        // in, so no writer frees it before the reader counts itself out
        // (a writer frees a swapped-out snapshot only after it saw no
        // reader in, after the swap).
        let found = Snapshot::lookup(unsafe { &*snapshot }, ip)
            .map(|e| (RawFunctionId(e.function), e.start));
        self.readers.fetch_sub(1, SeqCst);
        found
    }

    /// The map's counters.
    pub fn stats(&self) -> CodeMapStats {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        CodeMapStats {
            ranges: w.base.len() + w.recent.len(),
            added: self.added.load(SeqCst),
            removed: self.removed.load(SeqCst),
            pending: w.pending.len(),
        }
    }

    /// Publishes the writer's state as the new snapshot and frees the
    /// snapshots no reader can hold any more.
    fn publish(&self, w: &mut Writer) {
        if w.recent.len() > RECENT_MIN.max(w.base.len() / 4) {
            let mut all: Vec<Entry> = Vec::with_capacity(w.base.len() + w.recent.len());
            all.extend_from_slice(&w.base);
            all.append(&mut w.recent);
            all.sort_unstable_by_key(|e| e.start);
            w.base = Arc::from(all);
        }
        let next = Box::into_raw(Box::new(Snapshot {
            base: w.base.clone(),
            recent: w.recent.clone().into_boxed_slice(),
        }));
        let old = self.current.swap(next, SeqCst);
        w.retired.push(old);
        self.reclaim(w);
    }

    fn reclaim(&self, w: &mut Writer) {
        // A reader that holds an old pointer counted itself in before it
        // loaded it; seeing none in now, after the swap, means none does.
        if self.readers.load(SeqCst) == 0 {
            for old in w.retired.drain(..) {
                // SAFETY: [local-memory] a snapshot made by `Box::into_raw` in `publish` or `new`,
                // swapped out (no longer current), that no reader holds (above); freed once.
                drop(unsafe { Box::from_raw(old) });
            }
        }
    }

    /// Adds the ranges of one code version, skipping ranges already known
    /// (a function reported again: another tier, another callback).
    fn add_ranges(
        &self,
        w: &mut Writer,
        function: usize,
        owner: (usize, usize, bool),
        chunks: &[crate::info::functions::CodeChunk],
    ) -> usize {
        let mut added = 0;
        for c in chunks.iter().filter(|c| c.size > 0) {
            let known = Snapshot::find(&w.base, c.start)
                .or_else(|| Snapshot::find(&w.recent, c.start))
                .is_some();
            if known {
                continue;
            }
            let entry = Entry {
                start: c.start,
                end: c.start.saturating_add(c.size),
                function,
                class: owner.0,
                module: owner.1,
                generic: owner.2,
            };
            let at = w.recent.partition_point(|e| e.start <= entry.start);
            w.recent.insert(at, entry);
            added += 1;
        }
        self.added.fetch_add(added as u64, SeqCst);
        added
    }

    /// Looks up and adds every native code version of `function`'s IL
    /// version `rejit`; `false` if the runtime gave no code yet.
    fn add_function(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        rejit: RawReJitId,
        dynamic: bool,
    ) -> bool {
        self.add_function_try(info, function, rejit, dynamic, 0)
    }

    fn add_function_try(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        rejit: RawReJitId,
        dynamic: bool,
        tries: u32,
    ) -> bool {
        let owner = if dynamic {
            (0, 0, false)
        } else {
            match info.function_info2(function) {
                Ok((fi, method_args)) => {
                    let class_args = if fi.class.to_raw().0 == 0 {
                        // Shared code or a method of an array type: no class
                        // to hear unload for.
                        true
                    } else {
                        info.class_info(fi.class)
                            .map(|c| !c.type_args.is_empty())
                            .unwrap_or(true)
                    };
                    (
                        fi.class.to_raw().0,
                        fi.module.to_raw().0,
                        class_args || !method_args.is_empty(),
                    )
                }
                Err(_) => (0, 0, true),
            }
        };
        let mut versions: Vec<Vec<crate::info::functions::CodeChunk>> = Vec::new();
        if self.has_info9 {
            if let Ok(starts) = info.native_code_versions(function, rejit) {
                for code in starts {
                    if let Ok(chunks) = info.code_info4(code) {
                        versions.push(chunks);
                    }
                }
            }
        }
        if versions.is_empty() && rejit.0 == 0 {
            if let Ok(chunks) = info.code_info2(function) {
                versions.push(chunks);
            }
        }
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut added = 0;
        for chunks in &versions {
            added += self.add_ranges(&mut w, function.to_raw().0, owner, chunks);
        }
        if versions.iter().all(|v| v.iter().all(|c| c.size == 0)) {
            let (f, r) = (function.to_raw().0, rejit.0);
            let known = w
                .pending
                .iter()
                .any(|p| p.function == f && p.rejit == r && p.dynamic == dynamic);
            if !known && tries < PENDING_TRIES && w.pending.len() < 65_536 {
                w.pending.push(Pending {
                    function: f,
                    rejit: r,
                    dynamic,
                    tries: tries + 1,
                });
            }
            return false;
        }
        if added > 0 {
            self.publish(&mut w);
        }
        true
    }

    // provenance: none: every pending FunctionID was recorded from a callback since the last unload; any unload clears the list before the fence counts it, and this runs inside the fence's resolve
    /// Looks up the functions whose code was not yet published when their
    /// callback ran. Call it from the sampling thread inside
    /// [`UnloadFence::resolve`] of the fence this map was registered with
    /// (`namer` is that resolve's): the pending IDs were reported since the
    /// last unload began (each unload clears them), and no unload can
    /// proceed until the resolve ends. Returns how many were found.
    pub fn update(&self, namer: &super::FrameNamer<'_>) -> usize {
        let info = namer.info();
        if info.runtime_slot() != self.slot || !namer.unloads_unchanged() {
            return 0;
        }
        let pending = {
            let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            self.reclaim(&mut w);
            std::mem::take(&mut w.pending)
        };
        let mut found = 0;
        for p in pending {
            // SAFETY: [id-scope] the ID was reported by a compilation callback of this
            // runtime after the last unload began (every unload clears the
            // pending list under the writer's mutex before the fence counts
            // it), and this runs inside the fence's resolve with no unload
            // counted since the namer's buffer was stamped: any unload that
            // begins now waits in the fence until the resolve ends.
            let function = unsafe { RawFunctionId(p.function).assume_valid() };
            if self.add_function_try(info, function, RawReJitId(p.rejit), p.dynamic, p.tries) {
                found += 1;
            }
        }
        found
    }

    /// For the SDK's tests: adds a range directly.
    #[cfg(test)]
    pub(crate) fn insert_for_test(
        &self,
        start: usize,
        size: usize,
        function: usize,
        generic: bool,
    ) {
        let mut w = self.writer.lock().unwrap();
        self.add_ranges(
            &mut w,
            function,
            (function + 1, function + 2, generic),
            &[crate::info::functions::CodeChunk { start, size }],
        );
        self.publish(&mut w);
    }

    #[cfg(test)]
    pub(crate) fn new_for_test() -> CodeMap {
        CodeMap::new(RuntimeSlot(0), true)
    }
}

impl UnloadHook for CodeMap {
    fn unloading(&self, what: Unloading) {
        // reentrancy: none: `keep` is the closure below, a comparison of an entry's IDs
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.pending.clear();
        let keep = |e: &Entry| match what {
            Unloading::Class(c) => e.class != c && !e.generic,
            Unloading::Module(m) => e.module != m && !e.generic,
            Unloading::DynamicMethod(f) => e.function != f.0,
        };
        let before = w.base.len() + w.recent.len();
        if w.base.iter().any(|e| !keep(e)) {
            let base: Vec<Entry> = w.base.iter().copied().filter(keep).collect();
            w.base = Arc::from(base);
        }
        w.recent.retain(keep);
        let removed = before - (w.base.len() + w.recent.len());
        if removed > 0 {
            self.removed.fetch_add(removed as u64, SeqCst);
            self.publish(&mut w);
        }
    }
}

impl Drop for CodeMap {
    fn drop(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        for old in w.retired.drain(..) {
            // SAFETY: [local-memory] the map is being dropped: no reader holds a reference to it,
            // so no reader holds any of its snapshots; each is freed once.
            drop(unsafe { Box::from_raw(old) });
        }
        let current = *self.current.get_mut();
        // SAFETY: [local-memory] as above, for the current snapshot.
        drop(unsafe { Box::from_raw(current) });
    }
}

/// The SDK component behind [`CodeMap::register`].
struct CodeMapComponent {
    map: Weak<CodeMap>,
    /// Keeps the fence's hook alive as long as the component.
    _hook: Arc<dyn UnloadHook>,
    /// Loaded by attach: `MONITOR_CACHE_SEARCHES` is not allowed then, and
    /// precompiled code is placed by the runtime at the leaf only.
    attached: bool,
}

impl crate::component::Component for CodeMapComponent {
    fn name(&self) -> &'static str {
        "code-map"
    }

    fn masks(&self) -> EventMasks {
        if self.attached {
            EventMask::MONITOR_JIT_COMPILATION.into()
        } else {
            (EventMask::MONITOR_JIT_COMPILATION | EventMask::MONITOR_CACHE_SEARCHES).into()
        }
    }

    fn jit_compilation_finished(&self, info: &ProfilerInfo, function: FunctionId<'_>) {
        if let Some(map) = self.map.upgrade() {
            map.add_function(info, function, RawReJitId(0), false);
        }
    }

    fn jit_cached_function_search_finished(&self, info: &ProfilerInfo, function: FunctionId<'_>) {
        if let Some(map) = self.map.upgrade() {
            map.add_function(info, function, RawReJitId(0), false);
        }
    }

    fn rejit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        rejit: RawReJitId,
    ) {
        if let Some(map) = self.map.upgrade() {
            map.add_function(info, function, rejit, false);
        }
    }

    fn dynamic_method_jit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
    ) {
        if let Some(map) = self.map.upgrade() {
            map.add_function(info, function, RawReJitId(0), true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{FakeClass, FakeCodeVersion, FakeFunction, FakeRuntime};
    use std::sync::atomic::AtomicBool;

    const F: usize = 0x1000;
    const G: usize = 0x1100;
    const CLASS: usize = 0x5000;
    const MODULE: usize = 0x2000;

    /// F: a method of a plain class with a tier-0 and a tier-1 body; G: a
    /// generic instantiation.
    fn world() -> FakeRuntime {
        let fake = FakeRuntime::with_info_version(10);
        {
            let mut st = fake.state();
            st.classes.insert(
                CLASS,
                FakeClass {
                    module: MODULE,
                    ..Default::default()
                },
            );
            st.functions.insert(
                F,
                FakeFunction {
                    class: CLASS,
                    module: MODULE,
                    code: vec![(0x7000, 0x40)],
                    versions: vec![FakeCodeVersion {
                        rejit_id: 0,
                        code: vec![(0xA000, 0x20)],
                        il_map: Vec::new(),
                    }],
                    ..Default::default()
                },
            );
            st.functions.insert(
                G,
                FakeFunction {
                    class: CLASS,
                    module: MODULE,
                    type_args: vec![0x5100],
                    code: vec![(0xB000, 0x10)],
                    ..Default::default()
                },
            );
        }
        fake
    }

    #[test]
    fn compilations_fill_the_map_and_unloads_empty_it_behind_the_fence() {
        let fake = world();
        let mut map = None;
        let components = fake.initialize_components(false, |info| {
            let fence = UnloadFence::register(info).unwrap();
            map = Some((CodeMap::register(info, &fence).unwrap(), fence));
        });
        let (map, _fence) = map.unwrap();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        crate::testing::fake::fake_ids!(fake; f = function_id(F), g = function_id(G));
        components.each("test", |c| c.jit_compilation_finished(&info, f));
        components.each("test", |c| c.jit_cached_function_search_finished(&info, g));
        assert_eq!(map.lookup(0x7010), Some(RawFunctionId(F)), "tier 0");
        assert_eq!(map.lookup(0xA01F), Some(RawFunctionId(F)), "tier 1");
        assert_eq!(map.lookup(0xB000), Some(RawFunctionId(G)));
        assert_eq!(map.lookup(0xA020), None);
        // Reported again (another tier's callback): nothing twice.
        components.each("test", |c| c.jit_compilation_finished(&info, f));
        assert_eq!(map.stats().ranges, 3);
        // Another class unloads: only the generic instantiation goes.
        crate::testing::fake::fake_ids!(fake; other = class_id(0x6000), class = class_id(CLASS));
        components.each("test", |c| c.class_unload_started(&info, other));
        assert_eq!(map.lookup(0xB000), None, "generic: dropped at any unload");
        assert_eq!(map.lookup(0x7010), Some(RawFunctionId(F)));
        // Its own class unloads: all of F's code goes, before the fence counts it.
        let epoch = unload_epoch_now();
        components.each("test", |c| c.class_unload_started(&info, class));
        assert_eq!(map.lookup(0x7010), None);
        assert_eq!(map.lookup(0xA000), None);
        assert!(unload_epoch_now() > epoch);
    }

    fn unload_epoch_now() -> u64 {
        super::super::naming::unload_epoch()
    }

    #[test]
    fn a_fence_of_another_runtime_is_refused() {
        let fake = world();
        let mut refused = None;
        let _ = fake.initialize_components(false, |info| {
            let other = UnloadFence::for_test(RuntimeSlot(info.runtime_slot().0.wrapping_add(1)));
            refused = Some(CodeMap::register(info, &other).err());
        });
        let e = refused.unwrap().expect("refused");
        assert!(matches!(e, crate::error::Error::WrongPartner { .. }), "{e}");
    }

    #[test]
    fn looks_up_ranges_and_nothing_between_them() {
        let map = CodeMap::new_for_test();
        map.insert_for_test(0x1000, 0x100, 0xA0, false);
        map.insert_for_test(0x3000, 0x10, 0xB0, false);
        map.insert_for_test(0x2000, 0x80, 0xC0, false);
        assert_eq!(map.lookup(0x1000), Some(RawFunctionId(0xA0)));
        assert_eq!(map.lookup(0x10ff), Some(RawFunctionId(0xA0)));
        assert_eq!(map.lookup(0x1100), None);
        assert_eq!(map.lookup(0x0fff), None);
        assert_eq!(map.lookup(0x2040), Some(RawFunctionId(0xC0)));
        assert_eq!(map.lookup(0x300f), Some(RawFunctionId(0xB0)));
        assert_eq!(map.lookup(0x3010), None);
        // The same range again is not added twice.
        map.insert_for_test(0x1000, 0x100, 0xA0, false);
        assert_eq!(map.stats().ranges, 3);
    }

    #[test]
    fn many_additions_merge_and_stay_sorted() {
        let map = CodeMap::new_for_test();
        // Added out of order, across several merges.
        let n = 5000usize;
        for i in 0..n {
            let k = (i * 7919) % n;
            map.insert_for_test(0x10_0000 + k * 0x40, 0x20, k + 1, false);
        }
        assert_eq!(map.stats().ranges, n);
        for k in 0..n {
            let start = 0x10_0000 + k * 0x40;
            assert_eq!(map.lookup(start + 0x1f), Some(RawFunctionId(k + 1)));
            assert_eq!(map.lookup(start + 0x20), None);
        }
    }

    #[test]
    fn unloads_remove_their_own_and_every_generic_entry() {
        let map = CodeMap::new_for_test();
        // insert_for_test gives class = function + 1, module = function + 2.
        map.insert_for_test(0x1000, 0x10, 0x10, false);
        map.insert_for_test(0x2000, 0x10, 0x20, false);
        map.insert_for_test(0x3000, 0x10, 0x30, true);
        map.insert_for_test(0x4000, 0x10, 0x40, false);
        map.unloading(Unloading::Class(0x11));
        assert_eq!(map.lookup(0x1000), None, "the class's own method");
        assert_eq!(map.lookup(0x3000), None, "a generic instantiation");
        assert_eq!(map.lookup(0x2000), Some(RawFunctionId(0x20)));
        map.unloading(Unloading::Module(0x22));
        assert_eq!(map.lookup(0x2000), None);
        map.unloading(Unloading::DynamicMethod(RawFunctionId(0x40)));
        assert_eq!(map.lookup(0x4000), None);
        assert_eq!(map.stats().removed, 4);
    }

    /// Readers never see a freed snapshot while writers add and remove:
    /// many threads looking up while one writes (run under Miri or ASan
    /// this is the test that would catch a use after free; natively it
    /// checks every answer is one of the ranges' own functions).
    #[test]
    fn lookups_race_writers_safely() {
        let map = Arc::new(CodeMap::new_for_test());
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (map, stop) = (map.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut hits = 0u64;
                    while !stop.load(SeqCst) {
                        for k in 0..64usize {
                            if let Some(f) = map.lookup(0x1_0000 + k * 0x100 + 5) {
                                assert_eq!(f.0, k + 1, "an answer of another range");
                                hits += 1;
                            }
                        }
                    }
                    hits
                })
            })
            .collect();
        for round in 0..300usize {
            for k in 0..64usize {
                map.insert_for_test(0x1_0000 + k * 0x100, 0x10, k + 1, k % 2 == 0);
            }
            map.unloading(if round % 2 == 0 {
                Unloading::Class(usize::MAX)
            } else {
                Unloading::DynamicMethod(RawFunctionId(round % 64 + 1))
            });
        }
        stop.store(true, SeqCst);
        let hits: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert!(hits > 0);
    }
}
