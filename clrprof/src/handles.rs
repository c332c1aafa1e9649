//! GC handles made by the profiler (`ICorProfilerInfo13`, .NET 7+): the
//! sound way to keep an object.
//!
//! An [`ObjectId`] is the object's address and dies at the next garbage
//! collection (BOTR "Lifetime & Stability"), so it cannot be kept. A
//! [`GcHandle`] can: it is a handle in the runtime's handle table, which the
//! GC updates when it moves the object, and which (strong and pinned kinds)
//! keeps the object alive. It is the counterpart of jni-rs's `GlobalRef`:
//! owned, `Send + Sync`, freed when dropped.
//!
//! - [`ProfilerInfo::create_handle`] makes one from an object a callback
//!   received ([`HandleKind::Strong`], [`HandleKind::Weak`] or
//!   [`HandleKind::Pinned`]);
//! - [`GcHandle::object`] gives the object back as a typed `ObjectId<'s>`
//!   of a scope where no garbage collection can start
//!   ([`ProfilerInfo::gc_blocked`]), its address as of now; elsewhere it
//!   refuses with [`Error::GcMayRun`]. A weak handle whose object was
//!   collected gives `None`;
//! - a handle belongs to the runtime that made it: asking it through
//!   another runtime's scope is [`Error::Mismatch`];
//! - dropping it calls `DestroyHandle`, while the runtime still takes calls:
//!   after `Shutdown` (the runtime forbids Info calls then) or once a
//!   detach began (the runtime refuses them) the drop makes no call, and
//!   the handle is left to the runtime that is going away. A profiler that
//!   detaches drops its handles before it requests the detach, or the
//!   objects of its strong handles stay alive in the process.
//!
//! On runtimes without Info13 (.NET Core 3.1, .NET 5, .NET 6) creating a
//! handle is [`Error::Unsupported`].
//!
//! The runtime announces a handle the profiler creates with
//! `HandleCreated`, on the creating thread, inside `CreateHandle` (with the
//! object as its initial object). A handle made from that callback's object
//! would be announced inside it in turn, and so on: the torture profiler's
//! re-entrancy family, without its own guard, nested 2,020 of them on .NET
//! 10.0.15 until the thread's stack overflowed (SIGSEGV). So a
//! `create_handle` on a thread inside another one is refused
//! ([`Error::WouldRecurse`], nothing created).

use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::{ObjectId, RawObjectId};
use crate::info::{ProfilerInfo, RuntimeHandle};
use clrprof_sys as sys;
use std::cell::Cell;

thread_local! {
    // reentrancy: handle-creation
    /// Whether this thread is inside the profiler's own `CreateHandle`,
    /// whose `HandleCreated` the runtime delivers on this thread before the
    /// call returns.
    static CREATING: Cell<bool> = const { Cell::new(false) };
}

/// The scope of one `CreateHandle` (see [`CREATING`]).
struct Creating;

impl Creating {
    fn enter(call: &'static str) -> Result<Creating> {
        if CREATING.with(|c| c.replace(true)) {
            return Err(Error::WouldRecurse {
                call,
                why: "this thread is inside the profiler's own CreateHandle, whose \
                      HandleCreated the runtime delivers here before that call returns; a \
                      handle made from that callback would be announced inside it in turn \
                      (make handles from the callbacks that hand out objects, not from \
                      HandleCreated of the profiler's own)"
                    .into(),
            });
        }
        Ok(Creating)
    }
}

impl Drop for Creating {
    fn drop(&mut self) {
        CREATING.with(|c| c.set(false));
    }
}

/// The kind of a GC handle (`COR_PRF_HANDLE_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HandleKind {
    /// Keeps the object alive (`COR_PRF_HANDLE_TYPE_STRONG`); the GC may
    /// still move it.
    Strong,
    /// Follows the object without keeping it alive
    /// (`COR_PRF_HANDLE_TYPE_WEAK`): empty once the object is collected.
    Weak,
    /// Keeps the object alive and at its address
    /// (`COR_PRF_HANDLE_TYPE_PINNED`).
    Pinned,
}

impl HandleKind {
    fn to_sys(self) -> sys::COR_PRF_HANDLE_TYPE {
        match self {
            HandleKind::Strong => sys::COR_PRF_HANDLE_TYPE_STRONG,
            HandleKind::Weak => sys::COR_PRF_HANDLE_TYPE_WEAK,
            HandleKind::Pinned => sys::COR_PRF_HANDLE_TYPE_PINNED,
        }
    }
}

/// A GC handle the profiler owns (see the [module docs](self)).
pub struct GcHandle {
    runtime: RuntimeHandle,
    /// The `ObjectHandleID` (an address in the runtime's handle table),
    /// kept as a number: it is only ever passed back to `runtime`.
    raw: usize,
    kind: HandleKind,
    destroyed: bool,
}

impl core::fmt::Debug for GcHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GcHandle")
            .field("handle", &format_args!("{:#x}", self.raw))
            .field("kind", &self.kind)
            .finish()
    }
}

thread_local! {
    // reentrancy: gc-callbacks
    /// How many of the garbage collector's own callbacks run on this
    /// thread (`GarbageCollectionStarted` to `GarbageCollectionFinished`,
    /// and the heap-walk and relocation callbacks in between).
    static IN_GC: Cell<u32> = const { Cell::new(0) };
    // reentrancy: handle-creation
    /// Set while this thread creates a handle for an object the runtime is
    /// still allocating ([`crate::allocations`]): the `HandleCreated` it
    /// raises gets no typed object (its method table is not written yet).
    static FOR_ALLOCATION: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as inside one of the GC's callbacks while it
/// lives (the SDK opens one around each of them).
pub(crate) struct InGc(());

impl InGc {
    pub(crate) fn enter() -> InGc {
        let _ = IN_GC.try_with(|d| d.set(d.get().saturating_add(1)));
        InGc(())
    }
}

impl Drop for InGc {
    fn drop(&mut self) {
        let _ = IN_GC.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// `true` inside a handle creation for an allocation event on this thread.
pub(crate) fn creating_for_allocation() -> bool {
    FOR_ALLOCATION.try_with(Cell::get).unwrap_or(false)
}

/// Refuses a handle creation inside the GC's own callbacks (rule
/// `no-handle-in-gc`).
fn refuse_in_gc(call: &'static str) -> Result<()> {
    if IN_GC.try_with(Cell::get).unwrap_or(0) > 0 {
        return Err(Error::Refused {
            hr: sys::HRESULT(KnownHresult::CORPROF_E_UNSUPPORTED_CALL_SEQUENCE as i32),
            call,
            why: "a GC handle is created only outside a garbage collection (not from \
                  GarbageCollectionStarted to GarbageCollectionFinished, nor from the \
                  ObjectReferences, RootReferences, FinalizeableObjectQueued or relocation \
                  callbacks in between): the runtime's handle tables are the collector's \
                  then; create it from a callback outside the collection"
                .into(),
        });
    }
    Ok(())
}

impl<'s> ProfilerInfo<'s> {
    /// `CreateHandle` (Info13): a [`GcHandle`] of `kind` to `object`.
    ///
    /// `object` is typed, so it is valid now (it came from a callback);
    /// from here on the handle follows it across collections. Refused
    /// ([`Error::Refused`]) inside the garbage collector's own callbacks
    /// (`GarbageCollectionStarted` to `GarbageCollectionFinished`, e.g.
    /// `ObjectReferences`): handles are made outside a collection. Refused
    /// ([`Error::WouldRecurse`]) on a thread inside another `create_handle`:
    /// from the `HandleCreated` the runtime delivers inside it (see the
    /// [module docs](self)).
    pub fn create_handle(&self, object: ObjectId<'_>, kind: HandleKind) -> Result<GcHandle> {
        const CALL: &str = "ICorProfilerInfo13::CreateHandle";
        self.require_objects_readable(CALL)?;
        refuse_in_gc(CALL)?;
        let i13 = self.raw_info13(CALL)?;
        let _creating = Creating::enter(CALL)?;
        let mut handle: sys::ObjectHandleID = core::ptr::null_mut();
        check(
            // SAFETY: [id-scope, object-no-gc, no-handle-in-gc, plain-call] `object` is valid (typed ID);
            // no collection runs on this thread (refused above); valid out pointer.
            unsafe { i13.CreateHandle(object.as_sys(), kind.to_sys(), &mut handle) },
            CALL,
        )?;
        if handle.is_null() {
            return Err(Error::InconsistentAnswer { call: CALL });
        }
        Ok(GcHandle {
            runtime: self.handle(),
            raw: handle as usize,
            kind,
            destroyed: false,
        })
    }
}

impl GcHandle {
    /// `CreateHandle` (Info13) for the object an allocation event names
    /// (only [`AllocationSample`](crate::allocations::AllocationSample)
    /// calls it, during that event's delivery).
    pub(crate) fn create_for_allocation(
        runtime: &RuntimeHandle,
        object: usize,
        kind: HandleKind,
    ) -> Result<GcHandle> {
        const CALL: &str = "ICorProfilerInfo13::CreateHandle";
        refuse_in_gc(CALL)?;
        if object == 0 {
            return Err(Error::InvalidArgument(
                "create_handle: the event names no object",
            ));
        }
        let i13 = runtime.raw_info13(CALL)?;
        // Its `HandleCreated` comes on this thread inside the call, as any
        // other creation's does.
        let _creating = Creating::enter(CALL)?;
        let mut handle: sys::ObjectHandleID = core::ptr::null_mut();
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                let _ = FOR_ALLOCATION.try_with(|f| f.set(false));
            }
        }
        let _ = FOR_ALLOCATION.try_with(|f| f.set(true));
        let _reset = Reset;
        let hr = runtime.call_live(CALL, || {
            check(
                // SAFETY: [allocation-event-object, no-handle-in-gc, info-alive, plain-call] `object` is the
                // address of the object the runtime is allocating, from its own allocation event
                // delivered on this thread now (the caller is the sample lent to that callback):
                // no GC can start before the allocation returns, and CreateHandle only stores the
                // address; no collection runs on this thread (refused above); valid out pointer.
                unsafe { i13.CreateHandle(object, kind.to_sys(), &mut handle) },
                CALL,
            )
        });
        hr?;
        if handle.is_null() {
            return Err(Error::InconsistentAnswer { call: CALL });
        }
        Ok(GcHandle {
            runtime: runtime.clone(),
            raw: handle as usize,
            kind,
            destroyed: false,
        })
    }
}

impl GcHandle {
    /// The handle's kind.
    pub fn kind(&self) -> HandleKind {
        self.kind
    }

    /// The runtime the handle belongs to.
    pub fn runtime(&self) -> &RuntimeHandle {
        &self.runtime
    }

    /// The raw `ObjectHandleID`, for the raw API (never freed through it:
    /// the handle is destroyed when this value drops).
    pub fn as_raw(&self) -> usize {
        self.raw
    }

    /// The handle's object as a raw number (by `GetObjectIDFromHandle`).
    fn target(&self, call: &'static str) -> Result<usize> {
        let i13 = self.runtime.raw_info13(call)?;
        self.runtime.call_live(call, || {
            let mut object: sys::ObjectID = 0;
            check(
                // SAFETY: [gc-handle, info-alive] `raw` is a handle this runtime made and that is not
                // destroyed yet (only `destroy` / `Drop` destroy it); the
                // runtime still runs (`call_live`).
                unsafe { i13.GetObjectIDFromHandle(self.raw as sys::ObjectHandleID, &mut object) },
                call,
            )?;
            Ok(object)
        })
    }

    // provenance: handle-runtime
    /// `GetObjectIDFromHandle` (Info13): the object the handle holds, at its
    /// address as of now, typed for the scope `info` — which must block
    /// garbage collections ([`ProfilerInfo::gc_blocked`]: callbacks that
    /// receive `ObjectID`s, ELT hooks, runtime suspensions), else
    /// [`Error::GcMayRun`], and must be a scope of the runtime that made
    /// the handle, else [`Error::Mismatch`]. `None` once a weak handle's
    /// object was collected.
    pub fn object<'s>(&self, info: &ProfilerInfo<'s>) -> Result<Option<ObjectId<'s>>> {
        const CALL: &str = "ICorProfilerInfo13::GetObjectIDFromHandle";
        if !self.runtime.same_runtime(info) {
            return Err(Error::Mismatch {
                call: CALL,
                made_for: self.runtime.runtime_slot().0 as usize,
                used_with: info.runtime_slot().0 as usize,
            });
        }
        info.require_gc_blocked(CALL)?;
        let object = self.target(CALL)?;
        Ok((object != 0).then(|| {
            // SAFETY: [gc-handle, object-no-gc] the handle holds a live object (or null, handled
            // above) and no GC can move it before the scope 's ends.
            unsafe { ObjectId::from_sys(object) }
        }))
    }

    /// `GetObjectIDFromHandle` (Info13) as a raw ID, in any scope and from
    /// any thread: the object's address at the moment of the call, which a
    /// GC may change right after (fit for logs and comparisons, e.g. that a
    /// pinned object did not move). `None` once a weak handle's object was
    /// collected. After the runtime shut down, [`Error::Detached`].
    pub fn object_raw(&self) -> Result<Option<RawObjectId>> {
        let object = self.target("ICorProfilerInfo13::GetObjectIDFromHandle")?;
        Ok((object != 0).then_some(RawObjectId(object)))
    }

    /// `true` once the handle holds no object: a weak handle whose object
    /// was collected.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.object_raw()?.is_none())
    }
}

impl GcHandle {
    /// `DestroyHandle` (Info13) now, with the runtime's answer (dropping
    /// the handle does the same and logs a failure). After the runtime shut
    /// down or detached the profiler this makes no call and answers
    /// [`Error::Detached`] (`CORPROF_E_PROFILER_DETACHING`).
    pub fn destroy(mut self) -> Result<()> {
        self.destroy_inner()
    }

    fn destroy_inner(&mut self) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo13::DestroyHandle";
        if self.destroyed {
            return Ok(());
        }
        self.destroyed = true;
        let raw = self.raw;
        let runtime = &self.runtime;
        runtime.call_live(CALL, || {
            let i13 = runtime.raw_info13(CALL)?;
            // SAFETY: [gc-handle, info-alive] `raw` is a handle this runtime made and nothing
            // destroyed yet (`destroyed` guards); the runtime still takes
            // calls (`call_live`).
            check(
                unsafe { i13.DestroyHandle(raw as sys::ObjectHandleID) },
                CALL,
            )
        })
    }
}

impl Drop for GcHandle {
    /// `DestroyHandle`, while the runtime takes calls (see the module docs).
    fn drop(&mut self) {
        match self.destroy_inner() {
            Ok(()) => {}
            Err(Error::Detached { .. }) => log::debug!(
                "GC handle {:#x} dropped after the runtime shut down or detached the profiler; left to the runtime",
                self.raw
            ),
            Err(e) => log::warn!("dropping a GC handle: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeObject, FakeRuntime};

    fn fake_with_object(object: usize) -> FakeRuntime {
        let fake = FakeRuntime::with_info_version(13);
        fake.state().objects.insert(object, FakeObject::default());
        fake
    }

    #[test]
    fn a_handle_follows_its_object_and_is_destroyed_once() {
        let fake = fake_with_object(0x100);
        fake_ids!(fake; o = object_id(0x100));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info_no_gc() };
        let h = info.create_handle(o, HandleKind::Strong).unwrap();
        assert_eq!(h.kind(), HandleKind::Strong);
        assert_eq!(h.object(&info).unwrap(), Some(o));
        assert_eq!(fake.calls_of("CreateHandle")[0].args, vec![0x100, 0x2]);

        // A GC moved it: the handle gives the new address.
        let raw = h.as_raw();
        fake.state().heap.handles.insert(raw, (0x180, 0x2));
        assert_eq!(h.object(&info).unwrap().map(|o| o.as_sys()), Some(0x180));
        assert_eq!(h.object_raw().unwrap(), Some(RawObjectId(0x180)));

        drop(h);
        assert_eq!(fake.state().heap.destroyed, vec![raw]);
        assert_eq!(fake.call_count("DestroyHandle"), 1);
    }

    #[test]
    fn no_handle_is_made_inside_the_profiler_s_own_create_handle() {
        // The fourth review's torture family: HandleCreated, delivered inside
        // CreateHandle, made a handle of its object, 2,020 deep on .NET 10.
        let fake = fake_with_object(0x100);
        fake_ids!(fake; o = object_id(0x100));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info_no_gc() };
        // As the runtime's HandleCreated, inside the call, would.
        let inside = Creating::enter("ICorProfilerInfo13::CreateHandle").unwrap();
        match info.create_handle(o, HandleKind::Strong) {
            Err(e @ Error::WouldRecurse { .. }) => assert!(e
                .to_string()
                .starts_with("ICorProfilerInfo13::CreateHandle refused (nothing was called)")),
            other => panic!("a handle inside CreateHandle: {other:?}"),
        }
        assert_eq!(fake.call_count("CreateHandle"), 0);
        // An allocation event's handle too: its HandleCreated comes inside
        // the call as well.
        match GcHandle::create_for_allocation(&info.handle(), 0x100, HandleKind::Weak) {
            Err(Error::WouldRecurse { .. }) => {}
            other => panic!("an allocation's handle inside CreateHandle: {other:?}"),
        }
        assert_eq!(fake.call_count("CreateHandle"), 0);
        drop(inside);
        assert!(info.create_handle(o, HandleKind::Strong).is_ok());
        assert!(GcHandle::create_for_allocation(&info.handle(), 0x100, HandleKind::Weak).is_ok());
    }

    #[test]
    fn typed_objects_only_where_no_gc_runs() {
        let fake = fake_with_object(0x100);
        fake_ids!(fake; o = object_id(0x100));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let no_gc = unsafe { fake.profiler_info_no_gc() };
        let h = no_gc.create_handle(o, HandleKind::Pinned).unwrap();
        // SAFETY: [test-fake] as above.
        let callback = unsafe { fake.profiler_info() };
        assert!(matches!(h.object(&callback), Err(Error::GcMayRun { .. })));
        // The raw address is fine anywhere.
        assert_eq!(h.object_raw().unwrap(), Some(RawObjectId(0x100)));
    }

    #[test]
    fn a_weak_handle_reports_its_object_gone() {
        let fake = fake_with_object(0x100);
        fake_ids!(fake; o = object_id(0x100));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info_no_gc() };
        let h = info.create_handle(o, HandleKind::Weak).unwrap();
        assert!(!h.is_empty().unwrap());
        fake.state().heap.handles.insert(h.as_raw(), (0, 0x1));
        assert_eq!(h.object(&info).unwrap(), None);
        assert!(h.is_empty().unwrap());
        assert_eq!(h.object_raw().unwrap(), None);
    }

    #[test]
    fn another_runtimes_scope_is_refused() {
        let a = fake_with_object(0x100);
        let b = fake_with_object(0x100);
        fake_ids!(a; o = object_id(0x100));
        // SAFETY: [test-fake] the fakes' objects describe memory this test owns.
        let (ia, ib) = unsafe { (a.profiler_info_no_gc(), b.profiler_info_no_gc()) };
        let h = ia.create_handle(o, HandleKind::Strong).unwrap();
        assert!(matches!(h.object(&ib), Err(Error::Mismatch { .. })));
        assert_eq!(b.call_count("GetObjectIDFromHandle"), 0);
        assert_eq!(a.call_count("GetObjectIDFromHandle"), 0);
    }

    #[test]
    fn no_call_after_the_runtime_retired() {
        let fake = fake_with_object(0x100);
        fake_ids!(fake; o = object_id(0x100));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info_no_gc() };
        let kept = info.create_handle(o, HandleKind::Strong).unwrap();
        let explicit = info.create_handle(o, HandleKind::Strong).unwrap();
        let explicit_raw = explicit.as_raw();
        assert_eq!(explicit.destroy(), Ok(()));
        assert_eq!(fake.state().heap.destroyed, vec![explicit_raw]);

        // Shutdown (or a detach) retires the runtime: drops make no call.
        info.retire();
        assert!(!info.is_live());
        assert!(matches!(kept.object_raw(), Err(Error::Detached { .. })));
        let e = kept.destroy().unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_PROFILER_DETACHING"));
        assert_eq!(fake.call_count("DestroyHandle"), 1);
        assert_eq!(fake.call_count("GetObjectIDFromHandle"), 0);
    }

    #[test]
    fn handles_need_info13() {
        let fake = FakeRuntime::with_info_version(12);
        fake.state().objects.insert(0x100, FakeObject::default());
        fake_ids!(fake; o = object_id(0x100));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info_no_gc() };
        match info.create_handle(o, HandleKind::Weak).unwrap_err() {
            Error::Unsupported {
                needs: 13, call, ..
            } => {
                assert_eq!(call, "ICorProfilerInfo13::CreateHandle")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<GcHandle>();
    }
}
