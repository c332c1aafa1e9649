//! Heap inspection beyond the GC callbacks: an object's references, frozen
//! objects, the non-GC heap, the large-object threshold and a walk of the
//! whole GC heap (`ICorProfilerInfo10`, `ICorProfilerInfo14`,
//! `ICorProfilerInfo15`).
//!
//! Which runtime has what (from the runtime's sources, and checked by the
//! `heap` scenario on every leg):
//!
//! | method | interface | .NET Core 3.1 | .NET 8 |
//! |---|---|---|---|
//! | `EnumerateObjectReferences`, `IsFrozenObject`, `GetLOHObjectSizeThreshold` | Info10 (.NET Core 3.0) | yes | yes |
//! | `EnumerateNonGCObjects`, `GetNonGCHeapBounds` | Info14 (.NET 8) | `Unsupported` | yes |
//! | `EnumerateGCHeapObjects` | Info15 (.NET 9) | `Unsupported` | `Unsupported` |
//!
//! # Object references and the GC
//! An `ObjectID` is the object's address; any garbage collection may move
//! the object (BOTR "Lifetime & Stability"), so references read out of an
//! object are handed out as typed [`ObjectId`]s only in scopes where no
//! collection can start ([`ProfilerInfo::gc_blocked`]); elsewhere the call
//! refuses with [`Error::GcMayRun`].
//!
//! The non-GC heap (.NET 8's frozen segments, which hold string literals,
//! `typeof` objects and other preinitialised data) is different: its
//! objects are never moved nor freed, so they are typed in any scope.

use crate::buffer::fill;
use crate::error::{check, Error, KnownHresult, Result};
use crate::guard::guard;
use crate::ids::*;
use crate::info::enums::{object_enum, ObjectEnum};
use crate::info::ProfilerInfo;
use crate::info::RuntimeHandle;
use clrprof_sys as sys;
use core::ffi::c_void;

/// One segment of the non-GC heap (`COR_PRF_NONGC_HEAP_RANGE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NonGcHeapRange {
    /// First address of the segment.
    pub start: RawObjectId,
    /// Bytes in use.
    pub len: usize,
    /// Bytes reserved.
    pub reserved_len: usize,
}

impl NonGcHeapRange {
    fn from_sys(r: sys::COR_PRF_NONGC_HEAP_RANGE) -> Self {
        NonGcHeapRange {
            start: RawObjectId(r.rangeStart),
            len: r.rangeLength,
            reserved_len: r.rangeLengthReserved,
        }
    }

    /// `true` if `object` lies in the used part of the segment.
    pub fn contains(&self, object: RawObjectId) -> bool {
        object.0.wrapping_sub(self.start.0) < self.len
    }
}

/// What the reference trampoline needs: the closure and what happened to it.
struct RefState<'c> {
    visit: &'c mut dyn FnMut(usize) -> bool,
    panicked: bool,
}

/// The `ObjectReferenceCallback` the SDK hands `EnumerateObjectReferences`.
unsafe extern "system" fn reference_visited(
    _root: sys::ObjectID,
    reference: *mut sys::ObjectID,
    client_data: *mut c_void,
) -> sys::BOOL {
    if client_data.is_null() || reference.is_null() {
        return 0;
    }
    // SAFETY: [callback-args, local-memory] `client_data` is the `&mut RefState` that `object_references_with`
    // passed to EnumerateObjectReferences; the runtime hands it back
    // unchanged, on the calling thread, while that call runs (corprof.idl).
    let state = unsafe { &mut *(client_data as *mut RefState<'_>) };
    // SAFETY: [callback-args, object-no-gc] the runtime passes the address of one reference field of the
    // object it walks, readable during the callback (corprof.idl,
    // ObjectReferenceCallback).
    let target = unsafe { reference.read() };
    let visit = &mut *state.visit;
    match guard("ObjectReferenceCallback", None, || Some(visit(target))) {
        Some(go_on) => go_on as sys::BOOL,
        None => {
            state.panicked = true;
            0
        }
    }
}

/// What the heap-walk trampoline needs.
struct WalkState<'c> {
    visit: &'c mut dyn FnMut(usize) -> bool,
    panicked: bool,
}

/// The `ObjectCallback` the SDK hands `EnumerateGCHeapObjects`.
unsafe extern "system" fn heap_object_visited(
    object: sys::ObjectID,
    client_data: *mut c_void,
) -> sys::BOOL {
    if client_data.is_null() {
        return 0;
    }
    // SAFETY: [callback-args, local-memory] `client_data` is the `&mut WalkState` that
    // `enumerate_gc_heap_objects` passed; the runtime hands it back
    // unchanged, on the calling thread, during that call (corprof.idl).
    let state = unsafe { &mut *(client_data as *mut WalkState<'_>) };
    let visit = &mut *state.visit;
    match guard("ObjectCallback", None, || Some(visit(object))) {
        Some(go_on) => go_on as sys::BOOL,
        None => {
            state.panicked = true;
            0
        }
    }
}

impl RuntimeHandle {
    /// `GetLOHObjectSizeThreshold` (Info10): the size in bytes from which an
    /// object is allocated on the large-object heap. 85,000 by default; the
    /// runtime's `GCLOHThreshold` setting (`DOTNET_GCLOHThreshold` /
    /// `COMPlus_GCLOHThreshold`, hexadecimal, or
    /// `System.GC.LOHThreshold` in runtimeconfig.json) changes it.
    ///
    /// From .NET 9 on (ICorProfilerInfo15) the runtime answers the GC's own
    /// threshold (`IGCHeap::GetLOHThreshold`, the GC's
    /// `loh_size_threshold`, since dotnet/runtime PR 95485 capped the
    /// setting by the region size), which the GC sets from its
    /// configuration when it initializes its heap. A profiler loaded at
    /// startup runs `Initialize` before that, so there the runtime answers
    /// 85,000 whatever the setting (measured on 9.0.23, 10.0.15 and
    /// 11.0.0). The SDK refuses the call there with
    /// [`Error::RuntimeVersion`] (`CORPROF_E_NOT_YET_AVAILABLE`, the
    /// runtime not called): ask from any later callback. .NET Core 3.1 and
    /// .NET 8 answer the setting from `Initialize` on. (A thread of the
    /// profiler's own that asks at the very moment `Initialize` returns may
    /// still race the GC's initialization.)
    pub fn loh_object_size_threshold(&self) -> Result<u32> {
        const CALL: &str = "ICorProfilerInfo10::GetLOHObjectSizeThreshold";
        let i10 = self.raw_info10(CALL)?;
        if self.version() >= 15 && !self.gc_heap_initialized() {
            return Err(Error::RuntimeVersion {
                hr: sys::HRESULT(KnownHresult::CORPROF_E_NOT_YET_AVAILABLE as i32),
                call: CALL,
                called: false,
                why: "from .NET 9 on the runtime answers the GC's threshold, which the GC sets \
                      when it initializes its heap, after the profiler's Initialize; asked from \
                      Initialize it answers the default 85,000 whatever the GCLOHThreshold \
                      setting: ask from a later callback"
                    .into(),
            });
        }
        let mut threshold = 0u32;
        check(
            // SAFETY: [plain-call] valid out pointer.
            unsafe { i10.GetLOHObjectSizeThreshold(&mut threshold) },
            CALL,
        )?;
        Ok(threshold)
    }

    /// `GetNonGCHeapBounds` (Info14, .NET 8): the segments of the non-GC
    /// heap, whose objects never move and are never collected. Empty when
    /// the runtime has allocated nothing there yet.
    pub fn non_gc_heap_bounds(&self) -> Result<Vec<NonGcHeapRange>> {
        const CALL: &str = "ICorProfilerInfo14::GetNonGCHeapBounds";
        let i14 = self.raw_info14(CALL)?;
        let mut ranges: Vec<sys::COR_PRF_NONGC_HEAP_RANGE> = Vec::new();
        fill::<sys::COR_PRF_NONGC_HEAP_RANGE, 16>(CALL, &mut ranges, |cap, needed, buf| {
            // SAFETY: [buffer-protocol] `buf` has `cap` slots (buffer protocol).
            unsafe { i14.GetNonGCHeapBounds(cap, needed, buf) }
        })?;
        Ok(ranges.into_iter().map(NonGcHeapRange::from_sys).collect())
    }
}

impl<'s> ProfilerInfo<'s> {
    /// `EnumerateObjectReferences` (Info10): calls `visit` with every object
    /// `object` refers to (its reference fields, or a reference array's
    /// elements, in the runtime's order), until `visit` returns `false`.
    /// Null references are not reported (the runtime walks only non-null
    /// ones on .NET Core 3.1.23 and .NET 8.0.4; the SDK drops a null
    /// anyway).
    ///
    /// The references are read from the heap, so this needs a scope where
    /// no garbage collection can start ([`gc_blocked`](Self::gc_blocked)),
    /// and refuses with [`Error::GcMayRun`] elsewhere. A panic in `visit`
    /// stops the walk and is reported as [`Error::Usage`].
    pub fn object_references_with(
        &self,
        object: ObjectId<'_>,
        mut visit: impl FnMut(ObjectId<'s>) -> bool,
    ) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo10::EnumerateObjectReferences";
        self.require_gc_blocked(CALL)?;
        if object.is_null() {
            // The runtime reads the object's method table without a check.
            return Err(Error::InvalidArgument(
                "object_references: null object (a null field value is no object)",
            ));
        }
        let i10 = self.raw_info10(CALL)?;
        let mut typed = |raw: usize| {
            if raw == 0 {
                return true;
            }
            // SAFETY: [object-no-gc] a reference held by a live object, read while no GC
            // can start in this scope ('s): it names a live object at this
            // address until the scope ends.
            visit(unsafe { ObjectId::from_sys(raw) })
        };
        let mut state = RefState {
            visit: &mut typed,
            panicked: false,
        };
        // SAFETY: [object-no-gc, local-memory] `object` is valid (typed ID); the callback matches
        // ObjectReferenceCallback and `state` outlives the call, used only
        // on this thread through the client data.
        let hr = unsafe {
            i10.EnumerateObjectReferences(
                object.as_sys(),
                Some(reference_visited),
                &mut state as *mut RefState<'_> as *mut c_void,
            )
        };
        if state.panicked {
            return Err(Error::Usage(
                "the object-reference closure panicked; the walk was stopped (the panic is in the log)"
                    .into(),
            ));
        }
        check(hr, CALL)
    }

    /// `EnumerateObjectReferences` (Info10), collected: the objects `object`
    /// refers to. Needs a GC-blocked scope, see
    /// [`object_references_with`](Self::object_references_with).
    pub fn object_references(&self, object: ObjectId<'_>) -> Result<Vec<ObjectId<'s>>> {
        let mut out = Vec::new();
        self.object_references_with(object, |r| {
            out.push(r);
            true
        })?;
        Ok(out)
    }

    /// `IsFrozenObject` (Info10): `true` for an object of a frozen segment
    /// (on .NET 8 the non-GC heap: string literals and other preinitialised
    /// objects), which the GC never moves or frees.
    pub fn is_frozen_object(&self, object: ObjectId<'_>) -> Result<bool> {
        const CALL: &str = "ICorProfilerInfo10::IsFrozenObject";
        self.require_objects_readable(CALL)?;
        let i10 = self.raw_info10(CALL)?;
        let mut frozen: sys::BOOL = 0;
        check(
            // SAFETY: [object-no-gc, plain-call] `object` is valid (typed ID); valid out pointer.
            unsafe { i10.IsFrozenObject(object.as_sys(), &mut frozen) },
            CALL,
        )?;
        Ok(frozen != 0)
    }

    /// `EnumerateNonGCObjects` (Info14, .NET 8): the objects of the non-GC
    /// heap. They are never moved nor freed, so they are typed for the
    /// scope in any scope.
    pub fn enum_non_gc_objects(&self) -> Result<ObjectEnum<'s>> {
        const CALL: &str = "ICorProfilerInfo14::EnumerateNonGCObjects";
        let i14 = self.raw_info14(CALL)?;
        let mut e: Option<sys::ICorProfilerObjectEnum> = None;
        // SAFETY: [com-ownership] `e` receives an owned reference.
        check(unsafe { i14.EnumerateNonGCObjects(&mut e) }, CALL)?;
        let e = e.ok_or(Error::runtime(
            sys::HRESULT(KnownHresult::E_POINTER as i32),
            CALL,
        ))?;
        // SAFETY: [module-lifetime] objects of the non-GC heap are never relocated nor freed
        // (its segments live as long as the runtime), so each stays valid
        // for the whole scope.
        Ok(unsafe { object_enum(e) })
    }

    /// `EnumerateGCHeapObjects` (Info15, .NET 9): calls `visit` with every
    /// object of the GC heap, until it returns `false`. The runtime
    /// suspends itself for the walk (unless the profiler already did, see
    /// [`RuntimeSuspension`](crate::stackwalk::RuntimeSuspension)), so each
    /// object is valid while `visit` runs; pass it to this scope's methods.
    ///
    /// Call it where the runtime may suspend: a thread of the profiler's
    /// own, or a callback that may block. On a runtime without Info15 this
    /// is [`Error::Unsupported`] naming `ICorProfilerInfo15`.
    pub fn enumerate_gc_heap_objects(
        &self,
        mut visit: impl FnMut(ObjectId<'_>) -> bool,
    ) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo15::EnumerateGCHeapObjects";
        self.require_objects_readable(CALL)?;
        let i15 = self.raw_info15(CALL)?;
        let mut typed = |raw: usize| {
            // SAFETY: [suspension, object-no-gc] the runtime is suspended for the walk and hands out
            // live objects; the ID is lent to `visit` only for this call.
            visit(unsafe { ObjectId::from_sys(raw) })
        };
        let mut state = WalkState {
            visit: &mut typed,
            panicked: false,
        };
        // SAFETY: [suspension, local-memory] the callback matches ObjectCallback; `state` outlives the
        // call and is used only through the client data during it.
        let hr = unsafe {
            i15.EnumerateGCHeapObjects(
                Some(heap_object_visited),
                &mut state as *mut WalkState<'_> as *mut c_void,
            )
        };
        if state.panicked {
            return Err(Error::Usage(
                "the heap-walk closure panicked; the walk was stopped (the panic is in the log)"
                    .into(),
            ));
        }
        check(hr, CALL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeObject, FakeRuntime};

    fn unsupported(e: Error, needs: u8, iface: &str) {
        match e {
            Error::Unsupported { needs: n, call, .. } => {
                assert_eq!(n, needs);
                assert!(call.starts_with(iface), "{call} names {iface}");
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    #[test]
    fn loh_threshold_default_set_and_unsupported() {
        let fake = FakeRuntime::with_info_version(10);
        // SAFETY: [test-fake] the fake's objects describe memory this test owns (none).
        let info = unsafe { fake.profiler_info() };
        assert_eq!(info.loh_object_size_threshold().unwrap(), 85_000);
        fake.state().heap.loh_threshold = Some(0x30000);
        assert_eq!(info.handle().loh_object_size_threshold().unwrap(), 196_608);

        let old = FakeRuntime::with_info_version(9);
        // SAFETY: [test-fake] as above.
        let info = unsafe { old.profiler_info() };
        unsupported(
            info.loh_object_size_threshold().unwrap_err(),
            10,
            "ICorProfilerInfo10::",
        );
        assert_eq!(old.call_count("GetLOHObjectSizeThreshold"), 0);
    }

    #[test]
    fn loh_threshold_refused_before_the_gc_heap_of_net9() {
        // .NET 9 (Info15): the GC's threshold, set after Initialize.
        let fake = FakeRuntime::with_info_version(15);
        fake.state().heap.loh_threshold = Some(0x30000);
        // SAFETY: [test-fake] the fake's objects describe memory this test owns (none).
        let info = unsafe { fake.profiler_info() };
        match info.loh_object_size_threshold().unwrap_err() {
            Error::RuntimeVersion {
                hr, called, call, ..
            } => {
                assert_eq!(hr.0 as u32, 0x8013_135B, "CORPROF_E_NOT_YET_AVAILABLE");
                assert!(!called);
                assert!(call.ends_with("GetLOHObjectSizeThreshold"));
            }
            other => panic!("expected RuntimeVersion, got {other:?}"),
        }
        assert_eq!(fake.call_count("GetLOHObjectSizeThreshold"), 0);
        // Once Initialize returned, and for a profiler loaded by attach.
        fake.state().initialized = true;
        // SAFETY: [test-fake] as above.
        let info = unsafe { fake.profiler_info() };
        assert_eq!(info.loh_object_size_threshold().unwrap(), 196_608);
        fake.state().initialized = false;
        // SAFETY: [test-fake] as above.
        let attached = unsafe { fake.profiler_info_attached() };
        assert_eq!(attached.loh_object_size_threshold().unwrap(), 196_608);
        // .NET 8 (Info14) answers the setting from Initialize on.
        let net8 = FakeRuntime::with_info_version(14);
        net8.state().heap.loh_threshold = Some(0x30000);
        // SAFETY: [test-fake] as above.
        let info = unsafe { net8.profiler_info() };
        assert_eq!(info.loh_object_size_threshold().unwrap(), 196_608);
    }

    #[test]
    fn object_references_need_a_gc_blocked_scope() {
        let fake = FakeRuntime::with_info_version(10);
        fake.state().objects.insert(0x100, FakeObject::default());
        // A null entry is dropped by the SDK.
        fake.state()
            .heap
            .references
            .insert(0x100, vec![0x200, 0, 0x300, 0x400]);
        fake_ids!(fake; o = object_id(0x100));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let callback = unsafe { fake.profiler_info() };
        assert!(matches!(
            callback.object_references(o),
            Err(Error::GcMayRun { .. })
        ));
        assert_eq!(fake.call_count("EnumerateObjectReferences"), 0);

        // SAFETY: [test-fake] as above.
        let info = unsafe { fake.profiler_info_no_gc() };
        let refs: Vec<usize> = info
            .object_references(o)
            .unwrap()
            .iter()
            .map(|r| r.as_sys())
            .collect();
        assert_eq!(refs, vec![0x200, 0x300, 0x400]);
        // The closure stops the walk.
        let mut seen = Vec::new();
        info.object_references_with(o, |r| {
            seen.push(r.as_sys());
            seen.len() < 2
        })
        .unwrap();
        assert_eq!(seen, vec![0x200, 0x300]);
        // A panic stops it too and comes back as an error.
        let mut visits = 0;
        let e = info
            .object_references_with(o, |_| {
                visits += 1;
                panic!("in the closure")
            })
            .unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{e:?}");
        assert_eq!(visits, 1);
        // An object the runtime refuses.
        fake_ids!(fake; unknown = object_id(0x999));
        assert_eq!(
            info.object_references(unknown).unwrap_err().name(),
            Some("E_INVALIDARG")
        );
    }

    #[test]
    fn frozen_objects() {
        let fake = FakeRuntime::with_info_version(10);
        fake.state().objects.insert(0x100, FakeObject::default());
        fake.state().objects.insert(0x200, FakeObject::default());
        fake.state().heap.frozen.insert(0x200);
        fake_ids!(fake; plain = object_id(0x100), literal = object_id(0x200));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        assert!(!info.is_frozen_object(plain).unwrap());
        assert!(info.is_frozen_object(literal).unwrap());
    }

    #[test]
    fn non_gc_heap_bounds_and_objects() {
        let fake = FakeRuntime::with_info_version(14);
        // More segments than the stack buffer holds.
        fake.state().heap.non_gc_ranges = (0..20)
            .map(|i| (0x10_0000 * (i + 1), 0x1000, 0x4000))
            .collect();
        fake.state().heap.non_gc_objects = vec![0x10_0010, 0x10_0040];
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        let bounds = info.non_gc_heap_bounds().unwrap();
        assert_eq!(bounds.len(), 20);
        assert_eq!(
            bounds[0],
            NonGcHeapRange {
                start: RawObjectId(0x10_0000),
                len: 0x1000,
                reserved_len: 0x4000
            }
        );
        assert!(bounds[0].contains(RawObjectId(0x10_0fff)));
        assert!(!bounds[0].contains(RawObjectId(0x10_1000)));
        // Typed in a scope where a GC may run: these objects never move.
        let objects: Vec<usize> = info
            .enum_non_gc_objects()
            .unwrap()
            .map(|o| o.unwrap().as_sys())
            .collect();
        assert_eq!(objects, vec![0x10_0010, 0x10_0040]);
        assert_eq!(fake.live_enumerators(), 0);

        let old = FakeRuntime::with_info_version(13);
        // SAFETY: [test-fake] as above.
        let info = unsafe { old.profiler_info() };
        unsupported(
            info.non_gc_heap_bounds().unwrap_err(),
            14,
            "ICorProfilerInfo14::",
        );
        unsupported(
            info.enum_non_gc_objects().map(|_| ()).unwrap_err(),
            14,
            "ICorProfilerInfo14::",
        );
    }

    #[test]
    fn gc_heap_walk_where_the_runtime_has_info15() {
        let fake = FakeRuntime::with_info_version(15);
        fake.state().heap.gc_heap = vec![0x10, 0x20, 0x30];
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        let mut seen = Vec::new();
        info.enumerate_gc_heap_objects(|o| {
            seen.push(o.as_sys());
            true
        })
        .unwrap();
        assert_eq!(seen, vec![0x10, 0x20, 0x30]);
        let mut first = 0;
        info.enumerate_gc_heap_objects(|_| {
            first += 1;
            false
        })
        .unwrap();
        assert_eq!(first, 1);

        // .NET 8 has Info14: the walk is Unsupported, naming Info15.
        let net8 = FakeRuntime::with_info_version(14);
        // SAFETY: [test-fake] as above.
        let info = unsafe { net8.profiler_info() };
        unsupported(
            info.enumerate_gc_heap_objects(|_| true).unwrap_err(),
            15,
            "ICorProfilerInfo15::",
        );
    }
}
