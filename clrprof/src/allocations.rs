//! The runtime's own allocation events, decoded by the SDK:
//! `GCAllocationTick` (.NET 5 and later) and `AllocationSampled` (.NET 10
//! and later), as [`AllocationSample`]s handed to
//! [`Profiler::allocation_sampled`](crate::Profiler::allocation_sampled)
//! and to SDK components.
//!
//! A profiler that starts an EventPipe session with the runtime's provider
//! ([`RUNTIME_PROVIDER`], the `GC` keyword at verbose level for the ticks,
//! the `AllocationSampling` keyword for the sampled events; see
//! [`crate::eventpipe`]) receives each of these events on the allocating
//! thread, inside the allocation. The SDK recognises them before it hands
//! them on: the event must come from the runtime's own provider (named
//! [`RUNTIME_PROVIDER`], asked once per provider with
//! `EventPipeGetProviderInfo`, and carrying the metadata only the runtime's
//! native events have: no event name, no fields), have the event ID and a
//! version with the object's address, and decode exactly by the runtime's
//! manifest. Nothing else becomes an [`AllocationSample`]: an event of
//! another provider, one an `EventSource` wrote (its metadata names it), one
//! of a provider the profiler made (the SDK refuses to make a provider of
//! the runtime's name).
//!
//! # The object being allocated
//! Both events fire from the allocator before the object is finished: the
//! measured first word at the address (its `MethodTable` pointer) is 0 on
//! .NET 8.0.34 (`GCAllocationTick`) and 10.0.15 (`AllocationSampled`); the
//! runtime writes it when the allocation returns. So the SDK hands out no
//! typed [`ObjectId`](crate::ObjectId) for it (nothing may read the object),
//! only its address ([`AllocationSample::object`]) and
//! [`AllocationSample::create_handle`], which keeps it by a GC handle: the
//! runtime's `CreateHandle` stores the address without reading the object,
//! and no garbage collection can start before the allocation returns (the
//! allocating thread is in cooperative mode inside the allocator, and the
//! event's delivery may not trigger one), by which time the object is whole.
//! Once a collection ran, the handle gives the object back where it is now
//! (or nothing, a weak handle whose object was collected). The rule is
//! `allocation-event-object` of the soundness ledger.

use crate::error::Result;
use crate::eventpipe::payload::{decode_utf16le, Reader};
use crate::handles::{GcHandle, HandleKind};
use crate::ids::{RawClassId, RawObjectId};
use crate::info::RuntimeHandle;
use core::sync::atomic::{AtomicUsize, Ordering};

pub use crate::eventpipe::RUNTIME_PROVIDER;
/// Event ID of `GCAllocationTick`.
pub const GC_ALLOCATION_TICK: u32 = 10;
/// Event ID of `AllocationSampled` (.NET 10).
pub const ALLOCATION_SAMPLED: u32 = 303;
/// The `GC` keyword (`GCAllocationTick` at verbose level).
pub const GC_KEYWORD: u64 = 0x1;
/// The `AllocationSampling` keyword of .NET 10 (`AllocationSampled`).
pub const ALLOCATION_SAMPLING_KEYWORD: u64 = 0x800_0000_0000;
/// The threshold of `GCAllocationTick`: the GC raises it when the bytes it
/// handed out (allocation contexts, large objects) since the last tick of
/// the same heap and kind pass this (`etw_allocation_tick` in the GC).
pub const ALLOCATION_TICK_BYTES: u64 = 100 * 1024;
/// The mean distance in bytes between two `AllocationSampled` events: each
/// allocated byte is a sampling point with probability 1 / this.
pub const ALLOCATION_SAMPLING_MEAN: f64 = 102_400.0;

/// Which event an [`AllocationSample`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocationSource {
    /// `GCAllocationTick`: `amount` bytes were handed out since the last
    /// tick (of this heap and kind), this object's allocation crossed the
    /// threshold.
    Tick {
        /// Bytes since the last tick (`AllocationAmount64`).
        amount: u64,
    },
    /// `AllocationSampled`: a sampling point fell into this object,
    /// `sampled_byte_offset` bytes into it.
    Sampled {
        /// Where in the object the sampling point fell.
        sampled_byte_offset: u64,
    },
}

/// The heap an allocation went to (`AllocationKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocationHeap {
    /// The small-object heap.
    Small,
    /// The large-object heap.
    Large,
    /// The pinned-object heap (.NET 5).
    Pinned,
    /// A value the SDK does not know.
    Other(u32),
}

impl AllocationHeap {
    fn from_kind(kind: u32) -> Self {
        match kind {
            0 => AllocationHeap::Small,
            1 => AllocationHeap::Large,
            2 => AllocationHeap::Pinned,
            k => AllocationHeap::Other(k),
        }
    }
}

/// One allocation the runtime reported (see the [module docs](self)):
/// valid for the callback it was handed to.
pub struct AllocationSample<'a> {
    runtime: &'a RuntimeHandle,
    fields: Fields<'a>,
}

/// What an allocation event's payload says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fields<'a> {
    source: AllocationSource,
    heap: AllocationHeap,
    type_id: usize,
    type_name: &'a [u8],
    object: usize,
    object_size: Option<u64>,
}

impl core::fmt::Debug for AllocationSample<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AllocationSample")
            .field("source", &self.fields.source)
            .field("heap", &self.fields.heap)
            .field("object", &format_args!("{:#x}", self.fields.object))
            .field("object_size", &self.fields.object_size)
            .finish()
    }
}

impl<'a> AllocationSample<'a> {
    /// Which event it is, with what it alone carries.
    pub fn source(&self) -> AllocationSource {
        self.fields.source
    }

    /// The heap the object went to.
    pub fn heap(&self) -> AllocationHeap {
        self.fields.heap
    }

    /// The object's type as the event spells it (the runtime's name, e.g.
    /// `System.Byte[]`). Decoded on each call.
    pub fn type_name(&self) -> Result<String> {
        decode_utf16le(self.fields.type_name)
    }

    /// The type's `TypeID` (its `MethodTable`, which is the `ClassID`), raw:
    /// for comparisons and as a key.
    pub fn type_id(&self) -> RawClassId {
        RawClassId(self.fields.type_id)
    }

    /// The object's size in bytes (`ObjectSize`: `AllocationSampled`, and
    /// `GCAllocationTick` from V4, .NET 8, on).
    pub fn object_size(&self) -> Option<u64> {
        self.fields.object_size
    }

    /// The object's address now, raw: nothing may read it (its method table
    /// is not written yet), and it moves at the next garbage collection.
    pub fn object(&self) -> RawObjectId {
        RawObjectId(self.fields.object)
    }

    /// `CreateHandle` (Info13, .NET 7): a GC handle of `kind` to the object
    /// being allocated, which from the next garbage collection on follows
    /// it (a [`HandleKind::Weak`] one until it is collected). On runtimes
    /// without Info13, [`Error::Unsupported`](crate::Error::Unsupported).
    pub fn create_handle(&self, kind: HandleKind) -> Result<GcHandle> {
        GcHandle::create_for_allocation(self.runtime, self.fields.object, kind)
    }
}

/// Decodes an allocation event's payload (`None`: not one, or no address).
fn decode(event_id: u32, version: u32, data: &[u8]) -> Option<Fields<'_>> {
    let mut r = Reader::new(data);
    let fields = match event_id {
        GC_ALLOCATION_TICK => {
            // V3 brought the address, V4 the object size (.NET 8).
            if version < 3 {
                return None;
            }
            let _amount32 = r.u32().ok()?;
            let kind = r.u32().ok()?;
            let _clr_instance = r.u16().ok()?;
            let amount = r.u64().ok()?;
            let type_id = pointer(&mut r)?;
            let type_name = r.utf16z_bytes().ok()?;
            let _heap_index = r.u32().ok()?;
            let object = pointer(&mut r)?;
            let object_size = if version >= 4 {
                Some(r.u64().ok()?)
            } else {
                None
            };
            Fields {
                source: AllocationSource::Tick { amount },
                heap: AllocationHeap::from_kind(kind),
                type_id,
                type_name,
                object,
                object_size,
            }
        }
        ALLOCATION_SAMPLED => {
            let kind = r.u32().ok()?;
            let _clr_instance = r.u16().ok()?;
            let type_id = pointer(&mut r)?;
            let type_name = r.utf16z_bytes().ok()?;
            let object = pointer(&mut r)?;
            let object_size = r.u64().ok()?;
            let sampled_byte_offset = r.u64().ok()?;
            Fields {
                source: AllocationSource::Sampled {
                    sampled_byte_offset,
                },
                heap: AllocationHeap::from_kind(kind),
                type_id,
                type_name,
                object,
                object_size: Some(object_size),
            }
        }
        _ => return None,
    };
    // The manifest's version of the payload, exactly: a later version adds
    // fields at the end, an earlier one is not this layout.
    let exact = match (event_id, version) {
        (GC_ALLOCATION_TICK, 3 | 4) | (ALLOCATION_SAMPLED, 0) => r.is_empty(),
        _ => true,
    };
    (exact && fields.object != 0).then_some(fields)
}

/// A pointer-sized payload field.
fn pointer(r: &mut Reader<'_>) -> Option<usize> {
    if cfg!(target_pointer_width = "64") {
        usize::try_from(r.u64().ok()?).ok()
    } else {
        usize::try_from(r.u32().ok()?).ok()
    }
}

/// `true` for the metadata of one of the runtime's native events: an event
/// ID, an empty name, keywords, version, level and no fields (what an
/// `EventSource` or a profiler defines always has a name). Read in place:
/// this runs at every allocation event.
fn native_metadata(metadata: &[u8]) -> bool {
    // id u32, name (one NUL code unit), keywords u64, version u32, level
    // u32, field count u32.
    const FIELDS_AT: usize = 4 + 2 + 8 + 4 + 4;
    metadata.len() >= FIELDS_AT + 4
        && metadata[4..6] == [0, 0]
        && metadata[FIELDS_AT..FIELDS_AT + 4] == [0, 0, 0, 0]
}

/// Which provider of one runtime is its own (see the [module docs](self)),
/// learned from the first allocation event that proves it.
#[derive(Default)]
pub(crate) struct RuntimeProvider {
    /// The runtime provider's `EVENTPIPE_PROVIDER`, 0 until known. The
    /// runtime never deletes its native provider, so the handle names it
    /// for the whole process.
    known: AtomicUsize,
}

impl RuntimeProvider {
    /// `true` if `provider` is `runtime`'s own provider and `metadata` is a
    /// native event's.
    fn is_runtime(&self, runtime: &RuntimeHandle, provider: usize, metadata: &[u8]) -> bool {
        if provider == 0 || !native_metadata(metadata) {
            return false;
        }
        if self.known.load(Ordering::Relaxed) == provider {
            return true;
        }
        match crate::eventpipe::provider_name(runtime, provider) {
            Ok(name) if name == RUNTIME_PROVIDER => {
                self.known.store(provider, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// The allocation sample an event of `provider` stands for, if it is one.
    pub(crate) fn sample<'a>(
        &self,
        runtime: &'a RuntimeHandle,
        provider: usize,
        event_id: u32,
        version: u32,
        metadata: &[u8],
        data: &'a [u8],
    ) -> Option<AllocationSample<'a>> {
        if event_id != GC_ALLOCATION_TICK && event_id != ALLOCATION_SAMPLED {
            return None;
        }
        let fields = decode(event_id, version, data)?;
        self.is_runtime(runtime, provider, metadata)
            .then_some(AllocationSample { runtime, fields })
    }
}

/// The upscaling weight of one `AllocationSampled` object of `size` bytes:
/// `1 / p` with `p = 1 − (1 − 1/mean)^size`, the chance that one of its
/// bytes was a sampling point (the runtime's design document,
/// RandomizedAllocationSampling.md, "Weighted samples"). Summed over the
/// samples of a type it estimates that type's objects without bias.
pub fn sampled_weight(size: u64) -> f64 {
    let q = 1.0 - 1.0 / ALLOCATION_SAMPLING_MEAN;
    let p = 1.0 - q.powf(size.max(1) as f64);
    1.0 / p
}

/// The upscaling weight of one `GCAllocationTick` object of `size` bytes
/// after `amount` bytes: `amount / size` objects (at least 1). The GC
/// raises the tick at the allocation that crosses a fixed threshold of
/// bytes handed out, so an object is the one with a chance about
/// proportional to its size; a large object beyond the threshold raises a
/// tick every time and stands for itself. `None` size (payloads before V4):
/// one object.
pub fn tick_weight(amount: u64, size: Option<u64>) -> f64 {
    match size {
        Some(s) if s > 0 => (amount as f64 / s as f64).max(1.0),
        _ => 1.0,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn utf16z(s: &str) -> Vec<u8> {
        let mut v: Vec<u8> = s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        v.extend([0, 0]);
        v
    }

    pub(crate) fn tick_payload(
        version: u32,
        amount: u64,
        ty: &str,
        address: u64,
        size: u64,
    ) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend((amount as u32).to_le_bytes());
        d.extend(1u32.to_le_bytes());
        d.extend(7u16.to_le_bytes());
        d.extend(amount.to_le_bytes());
        d.extend(0x7000u64.to_le_bytes());
        d.extend(utf16z(ty));
        d.extend(0u32.to_le_bytes());
        d.extend(address.to_le_bytes());
        if version >= 4 {
            d.extend(size.to_le_bytes());
        }
        d
    }

    /// An `AllocationSampled` payload.
    pub(crate) fn sampled_payload(ty: &str, address: u64, size: u64, offset: u64) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend(0u32.to_le_bytes());
        d.extend(7u16.to_le_bytes());
        d.extend(0x7000u64.to_le_bytes());
        d.extend(utf16z(ty));
        d.extend(address.to_le_bytes());
        d.extend(size.to_le_bytes());
        d.extend(offset.to_le_bytes());
        d
    }

    /// The metadata of one of the runtime's native events (as measured on
    /// .NET 8.0.34 and 10.0.15: 26 bytes, no name, no fields); `name`
    /// gives it one, as an `EventSource`'s or a profiler's event has.
    pub(crate) fn metadata(id: u32, version: u32, name: &str) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend(id.to_le_bytes());
        m.extend(utf16z(name));
        m.extend(1u64.to_le_bytes());
        m.extend(version.to_le_bytes());
        m.extend(5u32.to_le_bytes());
        m.extend(0u32.to_le_bytes());
        m
    }

    #[test]
    fn ticks_and_sampled_events_decode_by_the_manifest() {
        let d = tick_payload(4, 102_456, "Keep", 0x1000, 40);
        let f = decode(GC_ALLOCATION_TICK, 4, &d).unwrap();
        assert_eq!(f.source, AllocationSource::Tick { amount: 102_456 });
        assert_eq!(f.heap, AllocationHeap::Large);
        assert_eq!(
            (f.object, f.object_size, f.type_id),
            (0x1000, Some(40), 0x7000)
        );
        assert_eq!(decode_utf16le(f.type_name).unwrap(), "Keep");
        let v3 = tick_payload(3, 1, "Keep", 0x1000, 0);
        assert_eq!(
            decode(GC_ALLOCATION_TICK, 3, &v3).unwrap().object_size,
            None
        );
        // V2 has no address: no sample.
        assert_eq!(decode(GC_ALLOCATION_TICK, 2, &v3[..v3.len() - 8]), None);
        // A payload longer or shorter than its version's is not this event.
        assert_eq!(decode(GC_ALLOCATION_TICK, 3, &d), None);
        assert_eq!(decode(GC_ALLOCATION_TICK, 4, &d[..d.len() - 1]), None);
        let s = sampled_payload("System.String", 0x2000, 24, 3);
        let f = decode(ALLOCATION_SAMPLED, 0, &s).unwrap();
        assert_eq!(
            f.source,
            AllocationSource::Sampled {
                sampled_byte_offset: 3
            }
        );
        assert_eq!((f.object, f.object_size), (0x2000, Some(24)));
        assert_eq!(decode(ALLOCATION_SAMPLED, 0, &s[..s.len() - 2]), None);
        // A null address is no object.
        let null = sampled_payload("X", 0, 24, 0);
        assert_eq!(decode(ALLOCATION_SAMPLED, 0, &null), None);
        assert_eq!(decode(11, 0, &s), None);
    }

    #[test]
    fn native_metadata_is_nameless_and_fieldless() {
        assert!(native_metadata(&metadata(303, 0, "")));
        assert!(!native_metadata(&metadata(303, 0, "AllocationSampled")));
        let mut with_field = metadata(303, 0, "");
        with_field[22] = 1;
        assert!(!native_metadata(&with_field));
        assert!(!native_metadata(&metadata(303, 0, "")[..25]));
        assert!(!native_metadata(&[]));
        // What EventMetadata makes of it agrees.
        let m = crate::eventpipe::EventMetadata::parse(&metadata(10, 4, "")).unwrap();
        assert_eq!(
            (m.id, m.name.as_str(), m.fields.len(), m.version),
            (10, "", 0, 4)
        );
    }

    #[test]
    fn weights_follow_each_events_law() {
        // AllocationSampled: about mean / size for small objects, 1 for huge.
        let w = sampled_weight(24);
        assert!(
            (w - (ALLOCATION_SAMPLING_MEAN / 24.0 + 0.5)).abs() < 0.1,
            "{w}"
        );
        assert!((sampled_weight(100 * 1024 * 1024) - 1.0).abs() < 1e-9);
        assert!((sampled_weight(102_400) - 1.0 / (1.0 - (-1.0f64).exp())).abs() < 1e-4);
        // Ticks: the amount over the size, never below one object.
        assert_eq!(tick_weight(102_400, Some(40)), 2_560.0);
        assert_eq!(tick_weight(200_000, Some(200_000)), 1.0);
        assert_eq!(tick_weight(150_000, Some(200_000)), 1.0);
        assert_eq!(tick_weight(102_400, None), 1.0);
        assert_eq!(tick_weight(102_400, Some(0)), 1.0);
    }
}
