//! Garbage-collection callback data: generations, reasons, object ranges,
//! roots, and [`ObjectTable`], which keeps object IDs valid across GCs.

use crate::ids::{ObjectId, RawObjectId};
use crate::info::gc::{Generation, GenerationRange};
use clrprof_sys as sys;
use std::collections::BTreeMap;

/// Why a GC was started (`COR_PRF_GC_REASON`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GcReason {
    /// `COR_PRF_GC_INDUCED`: `GC.Collect` or `ForceGC`.
    Induced,
    /// `COR_PRF_GC_OTHER`.
    Other,
    /// A value the SDK does not know.
    Unknown(u32),
}

impl GcReason {
    pub(crate) fn from_sys(v: u32) -> Self {
        match v {
            sys::COR_PRF_GC_INDUCED => Self::Induced,
            sys::COR_PRF_GC_OTHER => Self::Other,
            o => Self::Unknown(o),
        }
    }
}

/// Which generations a GC collects (`GarbageCollectionStarted`'s
/// `generationCollected[]`: index 0..2 are gen 0..2, 3 the large-object heap,
/// 4 the pinned-object heap on .NET 5+).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GenerationSet {
    bits: u32,
    count: u8,
}

impl GenerationSet {
    /// Builds the set from the runtime's `BOOL` array.
    pub fn from_flags(flags: &[i32]) -> Self {
        let mut bits = 0u32;
        for (i, &f) in flags.iter().enumerate().take(32) {
            if f != 0 {
                bits |= 1 << i;
            }
        }
        GenerationSet {
            bits,
            count: flags.len().min(32) as u8,
        }
    }

    /// `true` if generation `generation` (see the type docs) is collected.
    pub fn contains(&self, generation: u32) -> bool {
        generation < 32 && self.bits & (1 << generation) != 0
    }

    /// How many generations the runtime reported.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// `true` if the runtime reported no generations.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The highest generation collected (a gen-N GC also collects 0..N).
    pub fn max_generation(&self) -> Option<u32> {
        (0..3u32).rev().find(|&g| self.contains(g))
    }
}

impl core::fmt::Debug for GenerationSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list()
            .entries((0..self.count as u32).filter(|&g| self.contains(g)))
            .finish()
    }
}

/// One range of objects in `MovedReferences2` / `SurvivingReferences2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GcRange {
    /// Start of the range before the GC.
    pub old_start: RawObjectId,
    /// Start of the range after the GC (equal to `old_start` for survivors).
    pub new_start: RawObjectId,
    /// Length in bytes.
    pub len: usize,
}

impl GcRange {
    /// Where an object that was at `old` is now, if it lies in this range.
    pub fn remap(&self, old: RawObjectId) -> Option<RawObjectId> {
        let off = old.0.checked_sub(self.old_start.0)?;
        (off < self.len).then(|| RawObjectId(self.new_start.0 + off))
    }
}

/// The ranges of a `MovedReferences2` or `SurvivingReferences2` callback.
#[derive(Clone, Copy, Debug)]
pub struct GcRanges<'a> {
    old: &'a [usize],
    new: Option<&'a [usize]>,
    lens: &'a [usize],
}

impl<'a> GcRanges<'a> {
    /// Moved ranges: `old[i]..old[i]+lens[i]` moved to `new[i]`.
    pub fn moved(old: &'a [usize], new: &'a [usize], lens: &'a [usize]) -> Self {
        GcRanges {
            old,
            new: Some(new),
            lens,
        }
    }
    /// Surviving ranges (objects did not move).
    pub fn surviving(start: &'a [usize], lens: &'a [usize]) -> Self {
        GcRanges {
            old: start,
            new: None,
            lens,
        }
    }
    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.old.len().min(self.lens.len())
    }
    /// `true` if there are no ranges.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The ranges.
    pub fn iter(&self) -> impl Iterator<Item = GcRange> + 'a {
        let (old, new, lens) = (self.old, self.new, self.lens);
        (0..old.len().min(lens.len())).map(move |i| GcRange {
            old_start: RawObjectId(old[i]),
            new_start: RawObjectId(new.and_then(|n| n.get(i).copied()).unwrap_or(old[i])),
            len: lens[i],
        })
    }
}

/// Kind of a GC root (`COR_PRF_GC_ROOT_KIND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GcRootKind {
    /// A stack variable (`COR_PRF_GC_ROOT_STACK`).
    Stack,
    /// The finalizer queue (`COR_PRF_GC_ROOT_FINALIZER`).
    Finalizer,
    /// A GC handle (`COR_PRF_GC_ROOT_HANDLE`).
    Handle,
    /// Anything else (`COR_PRF_GC_ROOT_OTHER`).
    Other,
    /// A value the SDK does not know.
    Unknown(u32),
}

impl GcRootKind {
    fn from_sys(v: u32) -> Self {
        match v {
            sys::COR_PRF_GC_ROOT_STACK => Self::Stack,
            sys::COR_PRF_GC_ROOT_FINALIZER => Self::Finalizer,
            sys::COR_PRF_GC_ROOT_HANDLE => Self::Handle,
            sys::COR_PRF_GC_ROOT_OTHER => Self::Other,
            o => Self::Unknown(o),
        }
    }
}

/// One root of `RootReferences2`.
#[derive(Clone, Copy, Debug)]
pub struct RootReference<'a> {
    /// The object the root refers to (null for some roots).
    pub object: ObjectId<'a>,
    /// The root's kind.
    pub kind: GcRootKind,
    /// `COR_PRF_GC_ROOT_FLAGS` (pinning, weak, interior, refcounted).
    pub flags: u32,
    /// The root's identity: a `FunctionID` for stack roots, a `GCHandleID`
    /// for handles, 0 otherwise.
    pub root_id: usize,
}

/// The roots of a `RootReferences2` callback.
#[derive(Clone, Copy, Debug)]
pub struct RootReferences<'a> {
    pub(crate) objects: &'a [ObjectId<'a>],
    pub(crate) kinds: &'a [u32],
    pub(crate) flags: &'a [u32],
    pub(crate) ids: &'a [usize],
}

impl<'a> RootReferences<'a> {
    /// Number of roots.
    pub fn len(&self) -> usize {
        self.objects.len()
    }
    /// `true` if there are none.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
    /// The roots.
    pub fn iter(&self) -> impl Iterator<Item = RootReference<'a>> + 'a {
        let s = *self;
        (0..s.objects.len()).map(move |i| RootReference {
            object: s.objects[i],
            kind: GcRootKind::from_sys(
                s.kinds
                    .get(i)
                    .copied()
                    .unwrap_or(sys::COR_PRF_GC_ROOT_OTHER),
            ),
            flags: s.flags.get(i).copied().unwrap_or(0),
            root_id: s.ids.get(i).copied().unwrap_or(0),
        })
    }
}

/// A profiler's table of objects it keeps across garbage collections.
///
/// An `ObjectID` is the object's address, so it changes whenever a GC moves
/// the object and means nothing once the object is collected (BOTR
/// *Profiling*, "Lifetime & Stability"). During each GC the runtime reports
/// the survivors of the generations it collected:
///
/// * a compacting GC calls `MovedReferences2` with ranges `old..old+len` that
///   now start at `new` (ranges of objects that stayed put may be reported
///   with `new == old`);
/// * a non-compacting GC calls `SurvivingReferences2` with the ranges that
///   survived in place.
///
/// Either may arrive in several batches per GC. An object of a collected
/// generation that lies in none of the reported ranges is dead; an object of
/// a generation the GC did not collect is not reported and stays where it is.
/// `ObjectTable` applies exactly these rules:
///
/// 1. [`gc_started`](Self::gc_started) (from `GarbageCollectionStarted`)
///    notes which tracked objects the GC condemns, from the collected
///    generations and the generation bounds (`GetGenerationBounds`);
/// 2. [`moved`](Self::moved) / [`surviving`](Self::surviving) (from
///    `MovedReferences2` / `SurvivingReferences2`) remap every tracked object
///    inside a range to its new address;
/// 3. [`gc_finished`](Self::gc_finished) (from `GarbageCollectionFinished`)
///    drops the condemned objects no range mentioned and returns them.
///
/// The table is a plain data structure; the runtime calls the GC callbacks
/// from GC threads, so a profiler keeps it behind a `Mutex`.
#[derive(Debug, Clone)]
pub struct ObjectTable<V> {
    live: BTreeMap<usize, V>,
    gc: Option<GcInProgress<V>>,
}

/// What a table knows between `GarbageCollectionStarted` and `GarbageCollectionFinished`.
#[derive(Debug, Clone)]
struct GcInProgress<V> {
    /// Tracked objects not yet found in a range: value and whether condemned.
    before: BTreeMap<usize, (V, bool)>,
    /// Tracked objects found in a range, at their new addresses.
    after: BTreeMap<usize, V>,
}

impl<V> Default for ObjectTable<V> {
    fn default() -> Self {
        ObjectTable {
            live: BTreeMap::new(),
            gc: None,
        }
    }
}

impl<V> ObjectTable<V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts tracking `object` (e.g. from `ObjectAllocated`), replacing and
    /// returning any value already tracked at that address. Objects are
    /// allocated only while no GC runs; inserting during a GC tracks the
    /// address as it will be after the GC.
    pub fn insert(&mut self, object: RawObjectId, value: V) -> Option<V> {
        match &mut self.gc {
            Some(gc) => gc.after.insert(object.0, value),
            None => self.live.insert(object.0, value),
        }
    }

    /// The value tracked for `object` (its address outside a GC).
    pub fn get(&self, object: RawObjectId) -> Option<&V> {
        self.live.get(&object.0)
    }

    /// Stops tracking `object`.
    pub fn remove(&mut self, object: RawObjectId) -> Option<V> {
        self.live.remove(&object.0)
    }

    /// Number of tracked objects (outside a GC).
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// `true` if nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// `true` between [`gc_started`](Self::gc_started) and [`gc_finished`](Self::gc_finished).
    pub fn in_gc(&self) -> bool {
        self.gc.is_some()
    }

    /// The tracked objects and their values, by address (outside a GC; empty during one).
    pub fn iter(&self) -> impl Iterator<Item = (RawObjectId, &V)> + '_ {
        self.live.iter().map(|(&a, v)| (RawObjectId(a), v))
    }

    /// `GarbageCollectionStarted`: every tracked address becomes provisional.
    ///
    /// An object is condemned when it lies in a range of `bounds` whose
    /// generation is in `generations`, or in no range at all while generation
    /// 0 is collected (objects allocated since the last GC may lie outside
    /// the bounds the runtime recorded then). Pass an empty `bounds` when
    /// `GetGenerationBounds` is not available: every object is condemned, so
    /// only objects the GC reports survive, which is exact for full GCs.
    ///
    /// A `gc_started` without a `gc_finished` for the previous GC first
    /// finishes that one.
    pub fn gc_started(&mut self, generations: GenerationSet, bounds: &[GenerationRange]) {
        if self.gc.is_some() {
            self.gc_finished();
        }
        let live = core::mem::take(&mut self.live);
        let before = live
            .into_iter()
            .map(|(addr, v)| {
                let condemned = match bounds.iter().find(|r| r.contains(RawObjectId(addr))) {
                    Some(r) => {
                        generation_index(r.generation).is_none_or(|g| generations.contains(g))
                    }
                    None => bounds.is_empty() || generations.contains(0),
                };
                (addr, (v, condemned))
            })
            .collect();
        self.gc = Some(GcInProgress {
            before,
            after: BTreeMap::new(),
        });
    }

    /// `MovedReferences2`: objects in the ranges moved to their new addresses.
    pub fn moved(&mut self, ranges: GcRanges<'_>) {
        self.apply(ranges);
    }

    /// `SurvivingReferences2`: objects in the ranges survived where they are.
    pub fn surviving(&mut self, ranges: GcRanges<'_>) {
        self.apply(ranges);
    }

    fn apply(&mut self, ranges: GcRanges<'_>) {
        let Some(gc) = &mut self.gc else {
            return;
        };
        for range in ranges.iter() {
            let Some(end) = range.old_start.0.checked_add(range.len) else {
                continue;
            };
            let inside: Vec<usize> = gc
                .before
                .range(range.old_start.0..end)
                .map(|(&a, _)| a)
                .collect();
            for old in inside {
                if let (Some((v, _)), Some(new)) =
                    (gc.before.remove(&old), range.remap(RawObjectId(old)))
                {
                    gc.after.insert(new.0, v);
                }
            }
        }
    }

    /// `GarbageCollectionFinished`: condemned objects no range reported are
    /// dead; they are removed and returned with the address they had.
    /// Objects of generations the GC did not collect keep their address.
    pub fn gc_finished(&mut self) -> Vec<(RawObjectId, V)> {
        let Some(gc) = self.gc.take() else {
            return Vec::new();
        };
        let mut dead = Vec::new();
        self.live = gc.after;
        for (addr, (v, condemned)) in gc.before {
            if condemned {
                dead.push((RawObjectId(addr), v));
            } else {
                self.live.insert(addr, v);
            }
        }
        dead
    }
}

/// The index of `generation` in `GarbageCollectionStarted`'s array.
fn generation_index(generation: Generation) -> Option<u32> {
    match generation {
        Generation::Gen0 => Some(0),
        Generation::Gen1 => Some(1),
        Generation::Gen2 => Some(2),
        Generation::LargeObjectHeap => Some(3),
        Generation::PinnedObjectHeap => Some(4),
        Generation::Unknown(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_set_reads_bool_array() {
        let g = GenerationSet::from_flags(&[1, 1, 0, 0]);
        assert!(g.contains(0) && g.contains(1) && !g.contains(2));
        assert_eq!(g.max_generation(), Some(1));
        assert_eq!(g.len(), 4);
    }

    #[test]
    fn ranges_remap_inside_only() {
        let (old, new, lens) = (
            [0x1000usize, 0x5000],
            [0x2000usize, 0x5000],
            [0x100usize, 0x10],
        );
        let r = GcRanges::moved(&old, &new, &lens);
        let v: Vec<_> = r.iter().collect();
        assert_eq!(v[0].remap(RawObjectId(0x1010)), Some(RawObjectId(0x2010)));
        assert_eq!(v[0].remap(RawObjectId(0x1100)), None);
        assert_eq!(v[0].remap(RawObjectId(0x0fff)), None);
        let s = GcRanges::surviving(&old, &lens);
        assert_eq!(s.iter().next().unwrap().new_start, RawObjectId(0x1000));
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
    fn table_remaps_moved_and_drops_unreported() {
        let mut t = ObjectTable::new();
        for (i, a) in [0x1000usize, 0x1020, 0x1040, 0x9000]
            .into_iter()
            .enumerate()
        {
            t.insert(RawObjectId(a), i);
        }
        // 0x1000.. is gen 0, 0x9000.. gen 2; a gen-0 GC.
        let bounds = [
            range(Generation::Gen0, 0x1000, 0x1000),
            range(Generation::Gen2, 0x9000, 0x1000),
        ];
        t.gc_started(GenerationSet::from_flags(&[1, 0, 0, 0]), &bounds);
        assert!(t.in_gc() && t.is_empty());
        // Two batches: 0x1000 moves to 0x9800, 0x1040 moves onto 0x1000's old place.
        let (o, n, l) = ([0x1000usize], [0x9800usize], [0x20usize]);
        t.moved(GcRanges::moved(&o, &n, &l));
        let (o, n, l) = ([0x1040usize], [0x1000usize], [0x20usize]);
        t.moved(GcRanges::moved(&o, &n, &l));
        let dead = t.gc_finished();
        assert_eq!(dead, vec![(RawObjectId(0x1020), 1)]);
        assert_eq!(t.get(RawObjectId(0x9800)), Some(&0));
        assert_eq!(t.get(RawObjectId(0x1000)), Some(&2));
        // Gen 2 was not collected: unreported but alive, same address.
        assert_eq!(t.get(RawObjectId(0x9000)), Some(&3));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn table_keeps_survivors_in_place() {
        let mut t = ObjectTable::new();
        t.insert(RawObjectId(0x2000), "a");
        t.insert(RawObjectId(0x2100), "b");
        t.gc_started(GenerationSet::from_flags(&[1, 1, 1, 1]), &[]);
        let (s, l) = ([0x2100usize], [0x40usize]);
        t.surviving(GcRanges::surviving(&s, &l));
        assert_eq!(t.gc_finished(), vec![(RawObjectId(0x2000), "a")]);
        let all: Vec<_> = t.iter().collect();
        assert_eq!(all, vec![(RawObjectId(0x2100), &"b")]);
    }

    #[test]
    fn table_without_gc_ignores_ranges() {
        let mut t = ObjectTable::new();
        t.insert(RawObjectId(0x10), ());
        let (o, n, l) = ([0x10usize], [0x20usize], [8usize]);
        t.moved(GcRanges::moved(&o, &n, &l));
        assert!(t.gc_finished().is_empty());
        assert!(t.get(RawObjectId(0x10)).is_some());
    }

    proptest::proptest! {
        /// Objects compacted in random batches keep their values, in address
        /// order, and nothing outside the ranges survives a full GC.
        #[test]
        fn table_compaction_keeps_values(sizes in proptest::collection::vec(1usize..8, 1..60),
                                         live in proptest::collection::vec(proptest::bool::ANY, 60),
                                         batch in 1usize..5) {
            let mut t = ObjectTable::new();
            let mut addr = 0x10_0000usize;
            let mut objs = Vec::new();
            for (i, s) in sizes.iter().enumerate() {
                t.insert(RawObjectId(addr), i);
                objs.push((addr, s * 8, live[i]));
                addr += s * 8;
            }
            t.gc_started(GenerationSet::from_flags(&[1, 1, 1]), &[]);
            let mut to = 0x1000usize;
            let mut expect = Vec::new();
            let (mut old, mut new, mut lens) = (Vec::new(), Vec::new(), Vec::new());
            for (i, &(a, len, alive)) in objs.iter().enumerate() {
                if alive {
                    old.push(a); new.push(to); lens.push(len);
                    expect.push((RawObjectId(to), i));
                    to += len;
                }
            }
            for ((o, n), l) in old.chunks(batch).zip(new.chunks(batch)).zip(lens.chunks(batch)) {
                t.moved(GcRanges::moved(o, n, l));
            }
            let dead = t.gc_finished();
            let got: Vec<_> = t.iter().map(|(a, &v)| (a, v)).collect();
            proptest::prop_assert_eq!(got, expect.clone());
            proptest::prop_assert_eq!(dead.len() + expect.len(), objs.len());
        }
    }
}
