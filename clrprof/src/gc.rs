//! Garbage-collection callback data: generations, reasons, object ranges, roots.

use crate::ids::{ObjectId, RawObjectId};
use clrprof_sys as sys;

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
}
