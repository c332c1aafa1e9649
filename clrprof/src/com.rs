//! The COM object the runtime talks to: `ICorProfilerCallback` …
//! `ICorProfilerCallback11`, forwarding every callback to a [`Profiler`].
//!
//! One object is created per `IClassFactory::CreateInstance`, i.e. per runtime
//! instance that loads the profiler (side-by-side runtimes each create their
//! own). It owns the user's profiler value and the [`ProfilerInfo`] of its
//! runtime; when the runtime releases it (after `ProfilerDetachSucceeded`, or
//! at shutdown where the runtime does so) the profiler value is dropped.
//!
//! Every method converts the raw arguments into typed, borrowed ones and runs
//! the user's code under [`guard`]: a panic becomes a log entry and `S_OK`
//! (or the failure `HRESULT` for `Initialize`), never an unwind into the
//! runtime.

#![allow(non_snake_case)]

use crate::callback::{EventPipeEvent, Profiler, SuspendReason, TransitionReason};
use crate::error::{KnownHresult, HRESULT};
use crate::gc::{GcRanges, GcReason, GenerationSet, RootReferences};
use crate::guard::guard;
use crate::ids::*;
use crate::info::ProfilerInfo;
use crate::rejit::{AssemblyReferenceProvider, FunctionControl};
use crate::runtimes::RuntimeSlot;
use crate::wide::WideStr;
use clrprof_sys as sys;
use clrprof_sys::*;
use core::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use windows_core::{implement, IUnknown, Interface};

const S_OK: HRESULT = HRESULT(0);

/// Callback objects alive in this library (for `DllCanUnloadNow`).
pub(crate) static LIVE_OBJECTS: AtomicUsize = AtomicUsize::new(0);

/// The callback object wrapping a user's profiler.
///
/// Implements `ICorProfilerCallback11`, whose vtable starts with those of
/// every earlier version, so QueryInterface answers all of them with it.
#[implement(ICorProfilerCallback11)]
pub struct CallbackObject<P: Profiler> {
    profiler: P,
    info: OnceLock<ProfilerInfo>,
    slot: RuntimeSlot,
    /// Set once `Initialize(ForAttach)` succeeded: runs `Profiler::finish` once.
    finish: OnceLock<crate::exit::ProfilerFinish>,
}

impl<P: Profiler> CallbackObject<P> {
    /// Wraps a freshly constructed profiler value registered under `slot`.
    fn new(profiler: P, slot: RuntimeSlot) -> Self {
        LIVE_OBJECTS.fetch_add(1, Ordering::SeqCst);
        CallbackObject {
            profiler,
            info: OnceLock::new(),
            slot,
            finish: OnceLock::new(),
        }
    }

    /// Creates the object and returns it as `IUnknown`.
    pub fn into_unknown(self) -> IUnknown {
        self.into()
    }

    fn dispatch(
        &self,
        entry: &'static str,
        f: impl FnOnce(&P, &ProfilerInfo) -> HRESULT,
    ) -> HRESULT {
        guard(entry, S_OK, || match self.info.get() {
            Some(info) => f(&self.profiler, info),
            // The runtime issues no callbacks before Initialize returns.
            None => S_OK,
        })
    }

    fn initialize_common(
        &self,
        entry: &'static str,
        unknown: *mut c_void,
        attached: bool,
        user: impl FnOnce(&P, &ProfilerInfo) -> crate::Result<crate::EventMasks>,
    ) -> HRESULT {
        guard(entry, HRESULT(KnownHresult::E_FAIL as i32), || {
            // SAFETY: the runtime passes its profiler-info object as a
            // borrowed IUnknown pointer valid for the call.
            let Some(unknown) = (unsafe { IUnknown::from_raw_borrowed(&unknown) }) else {
                return HRESULT(KnownHresult::E_POINTER as i32);
            };
            // SAFETY: this IUnknown is the runtime's profiler-info object.
            let mut info = match unsafe { ProfilerInfo::from_unknown(unknown, attached) } {
                Ok(i) => i,
                Err(e) => {
                    log::error!("{entry}: {e}");
                    return e.hresult();
                }
            };
            info.set_slot(self.slot);
            // Side-by-side policy: a runtime the profiler does not select
            // declines quietly. Runtimes without Info3 (1.x/2.0) cannot say
            // which they are and are treated as selected.
            if let Ok(runtime) = info.runtime_information() {
                if !crate::runtimes::registry().initialize(self.slot, runtime, P::runtime_policy())
                {
                    return HRESULT(KnownHresult::CORPROF_E_PROFILER_CANCEL_ACTIVATION as i32);
                }
            }
            let info = self.info.get_or_init(|| info);
            let result = user(&self.profiler, info)
                .and_then(|masks| info.set_event_mask(crate::exit::with_exit_flags(masks)));
            match result {
                Ok(()) => {
                    // SAFETY: `self.profiler` lives as long as this object,
                    // whose `Drop` releases the registration first.
                    let _ = self
                        .finish
                        .set(unsafe { crate::exit::ProfilerFinish::register(&self.profiler) });
                    S_OK
                }
                Err(e) => {
                    log::error!("{entry}: {e}");
                    e.hresult()
                }
            }
        })
    }
}

impl<P: Profiler> Drop for CallbackObject<P> {
    fn drop(&mut self) {
        if let Some(f) = self.finish.get() {
            f.release();
        }
        crate::runtimes::registry().release(self.slot);
        LIVE_OBJECTS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `true` from a `BOOL`.
#[inline]
fn b(v: BOOL) -> bool {
    v != 0
}

/// Borrows a runtime array for the callback's duration.
///
/// # Safety
/// `ptr` is null or points to `len` initialised elements valid for `'a`
/// (the runtime's `[in, size_is(len)]` arrays, valid during the callback).
#[inline]
unsafe fn slice<'a, T>(ptr: *const T, len: u32) -> &'a [T] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { core::slice::from_raw_parts(ptr, len as usize) }
    }
}

/// Borrows a runtime array of raw IDs as typed IDs.
///
/// # Safety
/// As [`slice`]; additionally the IDs must be valid for `'a` (true of the
/// IDs a callback receives, for the callback's duration).
#[inline]
unsafe fn ids<'a, Id: Copy>(ptr: *const usize, len: u32) -> &'a [Id] {
    debug_assert_eq!(core::mem::size_of::<Id>(), core::mem::size_of::<usize>());
    // SAFETY: every typed ID is `#[repr(transparent)]` over `usize`, so the
    // layouts are identical; validity is guaranteed by the caller.
    unsafe { slice(ptr as *const Id, len) }
}

/// A typed ID for a raw ID argument of the current callback.
macro_rules! id {
    ($kind:ty, $raw:expr) => {{
        // SAFETY: the runtime passes IDs that are valid for the duration of
        // the callback receiving them (BOTR "Lifetime & Stability"); the typed
        // ID borrows only that duration.
        unsafe { <$kind>::from_sys($raw) }
    }};
}

/// Forwards a callback whose only arguments are IDs and plain values.
macro_rules! forward {
    ($self:ident, $entry:literal, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch($entry, |$p, $info| {
            $body;
            S_OK
        })
    };
}

// SAFETY (applies to every `from_sys` below): the runtime passes IDs that are
// valid for the duration of the callback receiving them (BOTR "Lifetime &
// Stability"); the typed IDs created here borrow only that duration.
impl<P: Profiler> ICorProfilerCallback_Impl for CallbackObject_Impl<P> {
    unsafe fn Initialize(&self, pICorProfilerInfoUnk: *mut c_void) -> HRESULT {
        self.initialize_common(
            "ICorProfilerCallback::Initialize",
            pICorProfilerInfoUnk,
            false,
            |p, info| p.initialize(info),
        )
    }
    unsafe fn Shutdown(&self) -> HRESULT {
        let hr = forward!(self, "ICorProfilerCallback::Shutdown", |p, info| p
            .shutdown(info));
        if let Some(f) = self.finish.get() {
            f.finish("Shutdown");
        }
        hr
    }
    unsafe fn AppDomainCreationStarted(&self, appDomainId: AppDomainID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AppDomainCreationStarted",
            |p, info| p.app_domain_creation_started(info, id!(AppDomainId, appDomainId))
        )
    }
    unsafe fn AppDomainCreationFinished(
        &self,
        appDomainId: AppDomainID,
        hrStatus: HRESULT,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AppDomainCreationFinished",
            |p, info| p.app_domain_creation_finished(info, id!(AppDomainId, appDomainId), hrStatus)
        )
    }
    unsafe fn AppDomainShutdownStarted(&self, appDomainId: AppDomainID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AppDomainShutdownStarted",
            |p, info| p.app_domain_shutdown_started(info, id!(AppDomainId, appDomainId))
        )
    }
    unsafe fn AppDomainShutdownFinished(
        &self,
        appDomainId: AppDomainID,
        hrStatus: HRESULT,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AppDomainShutdownFinished",
            |p, info| p.app_domain_shutdown_finished(info, id!(AppDomainId, appDomainId), hrStatus)
        )
    }
    unsafe fn AssemblyLoadStarted(&self, assemblyId: AssemblyID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AssemblyLoadStarted",
            |p, info| p.assembly_load_started(info, id!(AssemblyId, assemblyId))
        )
    }
    unsafe fn AssemblyLoadFinished(&self, assemblyId: AssemblyID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AssemblyLoadFinished",
            |p, info| p.assembly_load_finished(info, id!(AssemblyId, assemblyId), hrStatus)
        )
    }
    unsafe fn AssemblyUnloadStarted(&self, assemblyId: AssemblyID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AssemblyUnloadStarted",
            |p, info| p.assembly_unload_started(info, id!(AssemblyId, assemblyId))
        )
    }
    unsafe fn AssemblyUnloadFinished(&self, assemblyId: AssemblyID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AssemblyUnloadFinished",
            |p, info| p.assembly_unload_finished(info, id!(AssemblyId, assemblyId), hrStatus)
        )
    }
    unsafe fn ModuleLoadStarted(&self, moduleId: ModuleID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ModuleLoadStarted",
            |p, info| p.module_load_started(info, id!(ModuleId, moduleId))
        )
    }
    unsafe fn ModuleLoadFinished(&self, moduleId: ModuleID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ModuleLoadFinished",
            |p, info| p.module_load_finished(info, id!(ModuleId, moduleId), hrStatus)
        )
    }
    unsafe fn ModuleUnloadStarted(&self, moduleId: ModuleID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ModuleUnloadStarted",
            |p, info| p.module_unload_started(info, id!(ModuleId, moduleId))
        )
    }
    unsafe fn ModuleUnloadFinished(&self, moduleId: ModuleID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ModuleUnloadFinished",
            |p, info| p.module_unload_finished(info, id!(ModuleId, moduleId), hrStatus)
        )
    }
    unsafe fn ModuleAttachedToAssembly(
        &self,
        moduleId: ModuleID,
        AssemblyId: AssemblyID,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ModuleAttachedToAssembly",
            |p, info| p.module_attached_to_assembly(
                info,
                id!(ModuleId, moduleId),
                id!(crate::ids::AssemblyId, AssemblyId)
            )
        )
    }
    unsafe fn ClassLoadStarted(&self, classId: ClassID) -> HRESULT {
        forward!(self, "ICorProfilerCallback::ClassLoadStarted", |p, info| p
            .class_load_started(info, id!(ClassId, classId)))
    }
    unsafe fn ClassLoadFinished(&self, classId: ClassID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ClassLoadFinished",
            |p, info| p.class_load_finished(info, id!(ClassId, classId), hrStatus)
        )
    }
    unsafe fn ClassUnloadStarted(&self, classId: ClassID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ClassUnloadStarted",
            |p, info| p.class_unload_started(info, id!(ClassId, classId))
        )
    }
    unsafe fn ClassUnloadFinished(&self, classId: ClassID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ClassUnloadFinished",
            |p, info| p.class_unload_finished(info, id!(ClassId, classId), hrStatus)
        )
    }
    unsafe fn FunctionUnloadStarted(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::FunctionUnloadStarted",
            |p, info| p.function_unload_started(info, id!(FunctionId, functionId))
        )
    }
    unsafe fn JITCompilationStarted(
        &self,
        functionId: FunctionID,
        fIsSafeToBlock: BOOL,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::JITCompilationStarted",
            |p, info| p.jit_compilation_started(
                info,
                id!(FunctionId, functionId),
                b(fIsSafeToBlock)
            )
        )
    }
    unsafe fn JITCompilationFinished(
        &self,
        functionId: FunctionID,
        hrStatus: HRESULT,
        fIsSafeToBlock: BOOL,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::JITCompilationFinished",
            |p, info| p.jit_compilation_finished(
                info,
                id!(FunctionId, functionId),
                hrStatus,
                b(fIsSafeToBlock)
            )
        )
    }
    unsafe fn JITCachedFunctionSearchStarted(
        &self,
        functionId: FunctionID,
        pbUseCachedFunction: *mut BOOL,
    ) -> HRESULT {
        self.dispatch(
            "ICorProfilerCallback::JITCachedFunctionSearchStarted",
            |p, info| {
                let use_cached =
                    p.jit_cached_function_search_started(info, id!(FunctionId, functionId));
                if !pbUseCachedFunction.is_null() {
                    // SAFETY: the runtime passes a valid out pointer (checked non-null).
                    unsafe { *pbUseCachedFunction = use_cached as BOOL };
                }
                S_OK
            },
        )
    }
    unsafe fn JITCachedFunctionSearchFinished(
        &self,
        functionId: FunctionID,
        result: COR_PRF_JIT_CACHE,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::JITCachedFunctionSearchFinished",
            |p, info| p.jit_cached_function_search_finished(
                info,
                id!(FunctionId, functionId),
                result == sys::COR_PRF_CACHED_FUNCTION_FOUND
            )
        )
    }
    unsafe fn JITFunctionPitched(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::JITFunctionPitched",
            |p, info| p.jit_function_pitched(info, id!(FunctionId, functionId))
        )
    }
    unsafe fn JITInlining(
        &self,
        callerId: FunctionID,
        calleeId: FunctionID,
        pfShouldInline: *mut BOOL,
    ) -> HRESULT {
        self.dispatch("ICorProfilerCallback::JITInlining", |p, info| {
            let inline = p.jit_inlining(info, id!(FunctionId, callerId), id!(FunctionId, calleeId));
            if !pfShouldInline.is_null() {
                // SAFETY: the runtime passes a valid out pointer (checked non-null).
                unsafe { *pfShouldInline = inline as BOOL };
            }
            S_OK
        })
    }
    unsafe fn ThreadCreated(&self, threadId: ThreadID) -> HRESULT {
        forward!(self, "ICorProfilerCallback::ThreadCreated", |p, info| p
            .thread_created(info, id!(ThreadId, threadId)))
    }
    unsafe fn ThreadDestroyed(&self, threadId: ThreadID) -> HRESULT {
        forward!(self, "ICorProfilerCallback::ThreadDestroyed", |p, info| p
            .thread_destroyed(info, id!(ThreadId, threadId)))
    }
    unsafe fn ThreadAssignedToOSThread(
        &self,
        managedThreadId: ThreadID,
        osThreadId: DWORD,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ThreadAssignedToOSThread",
            |p, info| p.thread_assigned_to_os_thread(
                info,
                id!(ThreadId, managedThreadId),
                osThreadId
            )
        )
    }
    unsafe fn RemotingClientInvocationStarted(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RemotingClientInvocationStarted",
            |p, info| p.remoting_client_invocation_started(info)
        )
    }
    unsafe fn RemotingClientSendingMessage(&self, pCookie: *mut GUID, fIsAsync: BOOL) -> HRESULT {
        // SAFETY: null or a valid GUID for the callback's duration.
        forward!(
            self,
            "ICorProfilerCallback::RemotingClientSendingMessage",
            |p, info| p.remoting_client_sending_message(
                info,
                // SAFETY: the cookie is null or a valid GUID for the callback's duration.
                unsafe { pCookie.as_ref() },
                b(fIsAsync)
            )
        )
    }
    unsafe fn RemotingClientReceivingReply(&self, pCookie: *mut GUID, fIsAsync: BOOL) -> HRESULT {
        // SAFETY: null or a valid GUID for the callback's duration.
        forward!(
            self,
            "ICorProfilerCallback::RemotingClientReceivingReply",
            |p, info| p.remoting_client_receiving_reply(
                info,
                // SAFETY: the cookie is null or a valid GUID for the callback's duration.
                unsafe { pCookie.as_ref() },
                b(fIsAsync)
            )
        )
    }
    unsafe fn RemotingClientInvocationFinished(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RemotingClientInvocationFinished",
            |p, info| p.remoting_client_invocation_finished(info)
        )
    }
    unsafe fn RemotingServerReceivingMessage(&self, pCookie: *mut GUID, fIsAsync: BOOL) -> HRESULT {
        // SAFETY: null or a valid GUID for the callback's duration.
        forward!(
            self,
            "ICorProfilerCallback::RemotingServerReceivingMessage",
            |p, info| p.remoting_server_receiving_message(
                info,
                // SAFETY: the cookie is null or a valid GUID for the callback's duration.
                unsafe { pCookie.as_ref() },
                b(fIsAsync)
            )
        )
    }
    unsafe fn RemotingServerInvocationStarted(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RemotingServerInvocationStarted",
            |p, info| p.remoting_server_invocation_started(info)
        )
    }
    unsafe fn RemotingServerInvocationReturned(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RemotingServerInvocationReturned",
            |p, info| p.remoting_server_invocation_returned(info)
        )
    }
    unsafe fn RemotingServerSendingReply(&self, pCookie: *mut GUID, fIsAsync: BOOL) -> HRESULT {
        // SAFETY: null or a valid GUID for the callback's duration.
        forward!(
            self,
            "ICorProfilerCallback::RemotingServerSendingReply",
            |p, info| p.remoting_server_sending_reply(
                info,
                // SAFETY: the cookie is null or a valid GUID for the callback's duration.
                unsafe { pCookie.as_ref() },
                b(fIsAsync)
            )
        )
    }
    unsafe fn UnmanagedToManagedTransition(
        &self,
        functionId: FunctionID,
        reason: COR_PRF_TRANSITION_REASON,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::UnmanagedToManagedTransition",
            |p, info| p.unmanaged_to_managed_transition(
                info,
                id!(FunctionId, functionId),
                TransitionReason::from_sys(reason)
            )
        )
    }
    unsafe fn ManagedToUnmanagedTransition(
        &self,
        functionId: FunctionID,
        reason: COR_PRF_TRANSITION_REASON,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ManagedToUnmanagedTransition",
            |p, info| p.managed_to_unmanaged_transition(
                info,
                id!(FunctionId, functionId),
                TransitionReason::from_sys(reason)
            )
        )
    }
    unsafe fn RuntimeSuspendStarted(&self, suspendReason: COR_PRF_SUSPEND_REASON) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RuntimeSuspendStarted",
            |p, info| p.runtime_suspend_started(info, SuspendReason::from_sys(suspendReason))
        )
    }
    unsafe fn RuntimeSuspendFinished(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RuntimeSuspendFinished",
            |p, info| p.runtime_suspend_finished(info)
        )
    }
    unsafe fn RuntimeSuspendAborted(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RuntimeSuspendAborted",
            |p, info| p.runtime_suspend_aborted(info)
        )
    }
    unsafe fn RuntimeResumeStarted(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RuntimeResumeStarted",
            |p, info| p.runtime_resume_started(info)
        )
    }
    unsafe fn RuntimeResumeFinished(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RuntimeResumeFinished",
            |p, info| p.runtime_resume_finished(info)
        )
    }
    unsafe fn RuntimeThreadSuspended(&self, threadId: ThreadID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RuntimeThreadSuspended",
            |p, info| p.runtime_thread_suspended(info, id!(ThreadId, threadId))
        )
    }
    unsafe fn RuntimeThreadResumed(&self, threadId: ThreadID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RuntimeThreadResumed",
            |p, info| p.runtime_thread_resumed(info, id!(ThreadId, threadId))
        )
    }
    unsafe fn MovedReferences(
        &self,
        _c: ULONG,
        _old: *const ObjectID,
        _new: *const ObjectID,
        _len: *const ULONG,
    ) -> HRESULT {
        // The same ranges arrive through MovedReferences2 (we implement
        // Callback4), with lengths that cannot be truncated.
        S_OK
    }
    unsafe fn ObjectAllocated(&self, objectId: ObjectID, classId: ClassID) -> HRESULT {
        forward!(self, "ICorProfilerCallback::ObjectAllocated", |p, info| p
            .object_allocated(
                info,
                id!(ObjectId, objectId),
                id!(ClassId, classId)
            ))
    }
    unsafe fn ObjectsAllocatedByClass(
        &self,
        cClassCount: ULONG,
        classIds: *const ClassID,
        cObjects: *const ULONG,
    ) -> HRESULT {
        // SAFETY: both arrays have `cClassCount` elements valid during the callback.
        forward!(
            self,
            "ICorProfilerCallback::ObjectsAllocatedByClass",
            |p, info| p.objects_allocated_by_class(
                info,
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                unsafe { ids(classIds, cClassCount) },
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                unsafe { slice(cObjects, cClassCount) }
            )
        )
    }
    unsafe fn ObjectReferences(
        &self,
        objectId: ObjectID,
        classId: ClassID,
        cObjectRefs: ULONG,
        objectRefIds: *const ObjectID,
    ) -> HRESULT {
        self.dispatch("ICorProfilerCallback::ObjectReferences", |p, info| {
            // SAFETY: the array has `cObjectRefs` IDs valid during the callback.
            let refs = unsafe { ids(objectRefIds, cObjectRefs) };
            if p.object_references(info, id!(ObjectId, objectId), id!(ClassId, classId), refs) {
                S_OK
            } else {
                // Any failure code stops ObjectReferences for this GC.
                HRESULT(KnownHresult::E_FAIL as i32)
            }
        })
    }
    unsafe fn RootReferences(&self, _cRootRefs: ULONG, _rootRefIds: *const ObjectID) -> HRESULT {
        // Superseded by RootReferences2, which the runtime also calls.
        S_OK
    }
    unsafe fn ExceptionThrown(&self, thrownObjectId: ObjectID) -> HRESULT {
        forward!(self, "ICorProfilerCallback::ExceptionThrown", |p, info| {
            crate::exit::unhandled::thrown(info);
            p.exception_thrown(info, id!(ObjectId, thrownObjectId))
        })
    }
    unsafe fn ExceptionSearchFunctionEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFunctionEnter",
            |p, info| {
                crate::exit::unhandled::search_enter(functionId);
                p.exception_search_function_enter(info, id!(FunctionId, functionId))
            }
        )
    }
    unsafe fn ExceptionSearchFunctionLeave(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFunctionLeave",
            |p, info| {
                p.exception_search_function_leave(info);
                crate::exit::unhandled::search_leave()
            }
        )
    }
    unsafe fn ExceptionSearchFilterEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFilterEnter",
            |p, info| p.exception_search_filter_enter(info, id!(FunctionId, functionId))
        )
    }
    unsafe fn ExceptionSearchFilterLeave(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFilterLeave",
            |p, info| p.exception_search_filter_leave(info)
        )
    }
    unsafe fn ExceptionSearchCatcherFound(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchCatcherFound",
            |p, info| {
                crate::exit::unhandled::catcher_found();
                p.exception_search_catcher_found(info, id!(FunctionId, functionId))
            }
        )
    }
    unsafe fn ExceptionOSHandlerEnter(&self, _unused: UINT_PTR) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionOSHandlerEnter",
            |p, info| p.exception_os_handler_enter(info)
        )
    }
    unsafe fn ExceptionOSHandlerLeave(&self, _unused: UINT_PTR) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionOSHandlerLeave",
            |p, info| p.exception_os_handler_leave(info)
        )
    }
    unsafe fn ExceptionUnwindFunctionEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionUnwindFunctionEnter",
            |p, info| p.exception_unwind_function_enter(info, id!(FunctionId, functionId))
        )
    }
    unsafe fn ExceptionUnwindFunctionLeave(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionUnwindFunctionLeave",
            |p, info| p.exception_unwind_function_leave(info)
        )
    }
    unsafe fn ExceptionUnwindFinallyEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionUnwindFinallyEnter",
            |p, info| p.exception_unwind_finally_enter(info, id!(FunctionId, functionId))
        )
    }
    unsafe fn ExceptionUnwindFinallyLeave(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionUnwindFinallyLeave",
            |p, info| p.exception_unwind_finally_leave(info)
        )
    }
    unsafe fn ExceptionCatcherEnter(&self, functionId: FunctionID, objectId: ObjectID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionCatcherEnter",
            |p, info| p.exception_catcher_enter(
                info,
                id!(FunctionId, functionId),
                id!(ObjectId, objectId)
            )
        )
    }
    unsafe fn ExceptionCatcherLeave(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionCatcherLeave",
            |p, info| p.exception_catcher_leave(info)
        )
    }
    unsafe fn COMClassicVTableCreated(
        &self,
        wrappedClassId: ClassID,
        implementedIID: REFGUID,
        pVTable: *mut c_void,
        cSlots: ULONG,
    ) -> HRESULT {
        self.dispatch(
            "ICorProfilerCallback::COMClassicVTableCreated",
            |p, info| {
                // SAFETY: REFGUID is a valid GUID reference for the callback's duration.
                if let Some(iid) = unsafe { implementedIID.as_ref() } {
                    p.com_classic_vtable_created(
                        info,
                        id!(ClassId, wrappedClassId),
                        iid,
                        pVTable,
                        cSlots,
                    );
                }
                S_OK
            },
        )
    }
    unsafe fn COMClassicVTableDestroyed(
        &self,
        wrappedClassId: ClassID,
        implementedIID: REFGUID,
        pVTable: *mut c_void,
    ) -> HRESULT {
        self.dispatch(
            "ICorProfilerCallback::COMClassicVTableDestroyed",
            |p, info| {
                // SAFETY: REFGUID is a valid GUID reference for the callback's duration.
                if let Some(iid) = unsafe { implementedIID.as_ref() } {
                    p.com_classic_vtable_destroyed(
                        info,
                        id!(ClassId, wrappedClassId),
                        iid,
                        pVTable,
                    );
                }
                S_OK
            },
        )
    }
    unsafe fn ExceptionCLRCatcherFound(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionCLRCatcherFound",
            |p, info| p.exception_clr_catcher_found(info)
        )
    }
    unsafe fn ExceptionCLRCatcherExecute(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionCLRCatcherExecute",
            |p, info| p.exception_clr_catcher_execute(info)
        )
    }
}

impl<P: Profiler> ICorProfilerCallback2_Impl for CallbackObject_Impl<P> {
    unsafe fn ThreadNameChanged(
        &self,
        threadId: ThreadID,
        cchName: ULONG,
        name: *const WCHAR,
    ) -> HRESULT {
        // SAFETY: `name` holds `cchName` WCHARs (or is null) during the callback.
        forward!(
            self,
            "ICorProfilerCallback2::ThreadNameChanged",
            |p, info| p.thread_name_changed(
                info,
                id!(ThreadId, threadId),
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                WideStr::new(unsafe { slice(name, cchName) })
            )
        )
    }
    unsafe fn GarbageCollectionStarted(
        &self,
        cGenerations: i32,
        generationCollected: *const BOOL,
        reason: COR_PRF_GC_REASON,
    ) -> HRESULT {
        // SAFETY: the array has `cGenerations` entries during the callback.
        forward!(
            self,
            "ICorProfilerCallback2::GarbageCollectionStarted",
            |p, info| p.garbage_collection_started(
                info,
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                GenerationSet::from_flags(unsafe {
                    slice(generationCollected, cGenerations.max(0) as u32)
                }),
                GcReason::from_sys(reason)
            )
        )
    }
    unsafe fn SurvivingReferences(
        &self,
        _c: ULONG,
        _start: *const ObjectID,
        _len: *const ULONG,
    ) -> HRESULT {
        // The same ranges arrive through SurvivingReferences2 (Callback4).
        S_OK
    }
    unsafe fn GarbageCollectionFinished(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback2::GarbageCollectionFinished",
            |p, info| p.garbage_collection_finished(info)
        )
    }
    unsafe fn FinalizeableObjectQueued(
        &self,
        finalizerFlags: DWORD,
        objectID: ObjectID,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback2::FinalizeableObjectQueued",
            |p, info| p.finalizeable_object_queued(
                info,
                id!(ObjectId, objectID),
                finalizerFlags & sys::COR_PRF_FINALIZER_CRITICAL != 0
            )
        )
    }
    unsafe fn RootReferences2(
        &self,
        cRootRefs: ULONG,
        rootRefIds: *const ObjectID,
        rootKinds: *const COR_PRF_GC_ROOT_KIND,
        rootFlags: *const COR_PRF_GC_ROOT_FLAGS,
        rootIds: *const UINT_PTR,
    ) -> HRESULT {
        self.dispatch("ICorProfilerCallback2::RootReferences2", |p, info| {
            // SAFETY: each array has `cRootRefs` entries during the callback.
            let roots = unsafe {
                RootReferences {
                    objects: ids(rootRefIds, cRootRefs),
                    kinds: slice(rootKinds, cRootRefs),
                    flags: slice(rootFlags, cRootRefs),
                    ids: slice(rootIds, cRootRefs),
                }
            };
            p.root_references(info, roots);
            S_OK
        })
    }
    unsafe fn HandleCreated(&self, handleId: GCHandleID, initialObjectId: ObjectID) -> HRESULT {
        forward!(self, "ICorProfilerCallback2::HandleCreated", |p, info| p
            .handle_created(
                info,
                id!(GcHandleId, handleId),
                id!(ObjectId, initialObjectId)
            ))
    }
    unsafe fn HandleDestroyed(&self, handleId: GCHandleID) -> HRESULT {
        forward!(self, "ICorProfilerCallback2::HandleDestroyed", |p, info| p
            .handle_destroyed(info, id!(GcHandleId, handleId)))
    }
}

impl<P: Profiler> ICorProfilerCallback3_Impl for CallbackObject_Impl<P> {
    unsafe fn InitializeForAttach(
        &self,
        pCorProfilerInfoUnk: *mut c_void,
        pvClientData: *mut c_void,
        cbClientData: UINT,
    ) -> HRESULT {
        self.initialize_common(
            "ICorProfilerCallback3::InitializeForAttach",
            pCorProfilerInfoUnk,
            true,
            |p, info| {
                // SAFETY: the runtime passes `cbClientData` bytes (or null) valid during the call.
                let data = unsafe { slice(pvClientData as *const u8, cbClientData) };
                p.initialize_for_attach(info, data).map(Into::into)
            },
        )
    }
    unsafe fn ProfilerAttachComplete(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback3::ProfilerAttachComplete",
            |p, info| p.profiler_attach_complete(info)
        )
    }
    unsafe fn ProfilerDetachSucceeded(&self) -> HRESULT {
        let hr = forward!(
            self,
            "ICorProfilerCallback3::ProfilerDetachSucceeded",
            |p, info| p.profiler_detach_succeeded(info)
        );
        if let Some(f) = self.finish.get() {
            f.finish("ProfilerDetachSucceeded");
        }
        hr
    }
}

impl<P: Profiler> ICorProfilerCallback4_Impl for CallbackObject_Impl<P> {
    unsafe fn ReJITCompilationStarted(
        &self,
        functionId: FunctionID,
        rejitId: ReJITID,
        fIsSafeToBlock: BOOL,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback4::ReJITCompilationStarted",
            |p, info| p.rejit_compilation_started(
                info,
                id!(FunctionId, functionId),
                id!(ReJitId, rejitId),
                b(fIsSafeToBlock)
            )
        )
    }
    unsafe fn GetReJITParameters(
        &self,
        moduleId: ModuleID,
        methodId: mdMethodDef,
        pFunctionControl: *mut c_void,
    ) -> HRESULT {
        self.dispatch("ICorProfilerCallback4::GetReJITParameters", |p, info| {
            // SAFETY: the runtime passes a borrowed ICorProfilerFunctionControl valid during the call.
            let Some(control) = (unsafe { FunctionControl::from_raw_borrowed(pFunctionControl) })
            else {
                return HRESULT(KnownHresult::E_POINTER as i32);
            };
            match p.get_rejit_parameters(
                info,
                id!(ModuleId, moduleId),
                MdMethodDef(methodId),
                &control,
            ) {
                Ok(()) => S_OK,
                Err(e) => {
                    log::error!("GetReJITParameters: {e}");
                    e.hresult()
                }
            }
        })
    }
    unsafe fn ReJITCompilationFinished(
        &self,
        functionId: FunctionID,
        rejitId: ReJITID,
        hrStatus: HRESULT,
        fIsSafeToBlock: BOOL,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback4::ReJITCompilationFinished",
            |p, info| p.rejit_compilation_finished(
                info,
                id!(FunctionId, functionId),
                id!(ReJitId, rejitId),
                hrStatus,
                b(fIsSafeToBlock)
            )
        )
    }
    unsafe fn ReJITError(
        &self,
        moduleId: ModuleID,
        methodId: mdMethodDef,
        functionId: FunctionID,
        hrStatus: HRESULT,
    ) -> HRESULT {
        forward!(self, "ICorProfilerCallback4::ReJITError", |p, info| p
            .rejit_error(
                info,
                id!(ModuleId, moduleId),
                MdMethodDef(methodId),
                id!(FunctionId, functionId),
                hrStatus
            ))
    }
    unsafe fn MovedReferences2(
        &self,
        cMovedObjectIDRanges: ULONG,
        oldObjectIDRangeStart: *const ObjectID,
        newObjectIDRangeStart: *const ObjectID,
        cObjectIDRangeLength: *const SIZE_T,
    ) -> HRESULT {
        // SAFETY: each array has `cMovedObjectIDRanges` entries during the callback.
        forward!(
            self,
            "ICorProfilerCallback4::MovedReferences2",
            // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
            |p, info| p.moved_references(info, unsafe {
                GcRanges::moved(
                    slice(oldObjectIDRangeStart, cMovedObjectIDRanges),
                    slice(newObjectIDRangeStart, cMovedObjectIDRanges),
                    slice(cObjectIDRangeLength, cMovedObjectIDRanges),
                )
            })
        )
    }
    unsafe fn SurvivingReferences2(
        &self,
        cSurvivingObjectIDRanges: ULONG,
        objectIDRangeStart: *const ObjectID,
        cObjectIDRangeLength: *const SIZE_T,
    ) -> HRESULT {
        // SAFETY: each array has `cSurvivingObjectIDRanges` entries during the callback.
        forward!(
            self,
            "ICorProfilerCallback4::SurvivingReferences2",
            // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
            |p, info| p.surviving_references(info, unsafe {
                GcRanges::surviving(
                    slice(objectIDRangeStart, cSurvivingObjectIDRanges),
                    slice(cObjectIDRangeLength, cSurvivingObjectIDRanges),
                )
            })
        )
    }
}

impl<P: Profiler> ICorProfilerCallback5_Impl for CallbackObject_Impl<P> {
    unsafe fn ConditionalWeakTableElementReferences(
        &self,
        cRootRefs: ULONG,
        keyRefIds: *const ObjectID,
        valueRefIds: *const ObjectID,
        rootIds: *const GCHandleID,
    ) -> HRESULT {
        // SAFETY: each array has `cRootRefs` IDs valid during the callback.
        forward!(
            self,
            "ICorProfilerCallback5::ConditionalWeakTableElementReferences",
            |p, info| p.conditional_weak_table_element_references(
                info,
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                unsafe { ids(keyRefIds, cRootRefs) },
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                unsafe { ids(valueRefIds, cRootRefs) },
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                unsafe { ids(rootIds, cRootRefs) }
            )
        )
    }
}

impl<P: Profiler> ICorProfilerCallback6_Impl for CallbackObject_Impl<P> {
    unsafe fn GetAssemblyReferences(
        &self,
        wszAssemblyPath: *const WCHAR,
        pAsmRefProvider: *mut c_void,
    ) -> HRESULT {
        self.dispatch("ICorProfilerCallback6::GetAssemblyReferences", |p, info| {
            // SAFETY: a borrowed provider valid during the call, and a NUL-terminated path.
            let Some(provider) =
                (unsafe { AssemblyReferenceProvider::from_raw_borrowed(pAsmRefProvider) })
            else {
                return HRESULT(KnownHresult::E_POINTER as i32);
            };
            // SAFETY: the runtime passes a NUL-terminated path valid during the call.
            let path = unsafe { WideStr::from_nul_terminated(wszAssemblyPath) };
            match p.get_assembly_references(info, path, &provider) {
                Ok(()) => S_OK,
                Err(e) => {
                    log::error!("GetAssemblyReferences: {e}");
                    e.hresult()
                }
            }
        })
    }
}

impl<P: Profiler> ICorProfilerCallback7_Impl for CallbackObject_Impl<P> {
    unsafe fn ModuleInMemorySymbolsUpdated(&self, moduleId: ModuleID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback7::ModuleInMemorySymbolsUpdated",
            |p, info| p.module_in_memory_symbols_updated(info, id!(ModuleId, moduleId))
        )
    }
}

impl<P: Profiler> ICorProfilerCallback8_Impl for CallbackObject_Impl<P> {
    unsafe fn DynamicMethodJITCompilationStarted(
        &self,
        functionId: FunctionID,
        fIsSafeToBlock: BOOL,
        pILHeader: LPCBYTE,
        cbILHeader: ULONG,
    ) -> HRESULT {
        // SAFETY: `pILHeader` holds `cbILHeader` bytes during the callback.
        forward!(
            self,
            "ICorProfilerCallback8::DynamicMethodJITCompilationStarted",
            |p, info| p.dynamic_method_jit_compilation_started(
                info,
                id!(FunctionId, functionId),
                b(fIsSafeToBlock),
                // SAFETY: the runtime's arrays have the stated length and stay valid during the callback.
                unsafe { slice(pILHeader, cbILHeader) }
            )
        )
    }
    unsafe fn DynamicMethodJITCompilationFinished(
        &self,
        functionId: FunctionID,
        hrStatus: HRESULT,
        fIsSafeToBlock: BOOL,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback8::DynamicMethodJITCompilationFinished",
            |p, info| p.dynamic_method_jit_compilation_finished(
                info,
                id!(FunctionId, functionId),
                hrStatus,
                b(fIsSafeToBlock)
            )
        )
    }
}

impl<P: Profiler> ICorProfilerCallback9_Impl for CallbackObject_Impl<P> {
    unsafe fn DynamicMethodUnloaded(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback9::DynamicMethodUnloaded",
            |p, info| p.dynamic_method_unloaded(info, id!(FunctionId, functionId))
        )
    }
}

impl<P: Profiler> ICorProfilerCallback10_Impl for CallbackObject_Impl<P> {
    unsafe fn EventPipeEventDelivered(
        &self,
        provider: EVENTPIPE_PROVIDER,
        eventId: DWORD,
        eventVersion: DWORD,
        cbMetadataBlob: ULONG,
        metadataBlob: LPCBYTE,
        cbEventData: ULONG,
        eventData: LPCBYTE,
        pActivityId: LPCGUID,
        pRelatedActivityId: LPCGUID,
        eventThread: ThreadID,
        numStackFrames: ULONG,
        stackFrames: *const UINT_PTR,
    ) -> HRESULT {
        self.dispatch(
            "ICorProfilerCallback10::EventPipeEventDelivered",
            |p, info| {
                // SAFETY: every buffer has the stated length and every pointer is
                // null or valid during the callback.
                let event = unsafe {
                    EventPipeEvent {
                        provider,
                        event_id: eventId,
                        event_version: eventVersion,
                        metadata: slice(metadataBlob, cbMetadataBlob),
                        data: slice(eventData, cbEventData),
                        activity_id: pActivityId.as_ref(),
                        related_activity_id: pRelatedActivityId.as_ref(),
                        thread: ThreadId::from_sys(eventThread),
                        stack: slice(stackFrames, numStackFrames),
                    }
                };
                p.event_pipe_event_delivered(info, &event);
                S_OK
            },
        )
    }
    unsafe fn EventPipeProviderCreated(&self, provider: EVENTPIPE_PROVIDER) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback10::EventPipeProviderCreated",
            |p, info| p.event_pipe_provider_created(info, provider)
        )
    }
}

impl<P: Profiler> ICorProfilerCallback11_Impl for CallbackObject_Impl<P> {
    unsafe fn LoadAsNotificationOnly(&self, pbNotificationOnly: *mut BOOL) -> HRESULT {
        guard(
            "ICorProfilerCallback11::LoadAsNotificationOnly",
            S_OK,
            || {
                let v = self.profiler.load_as_notification_only();
                if !pbNotificationOnly.is_null() {
                    // SAFETY: the runtime passes a valid out pointer (checked non-null).
                    unsafe { *pbNotificationOnly = v as BOOL };
                }
                S_OK
            },
        )
    }
}

/// Creates a callback object for `P` and answers `riid` with it
/// (`IClassFactory::CreateInstance` semantics).
///
/// # Safety
/// `riid` is a valid GUID pointer and `ppv` a valid out pointer (COM rules).
pub unsafe fn create_instance<P: Profiler>(
    make: impl FnOnce() -> P,
    riid: *const GUID,
    ppv: *mut *mut c_void,
) -> HRESULT {
    let Some(slot) = crate::runtimes::registry().create(P::runtime_policy()) else {
        // Policy `First`: another runtime is already profiled.
        return HRESULT(KnownHresult::CORPROF_E_PROFILER_CANCEL_ACTIVATION as i32);
    };
    let object = CallbackObject::new(make(), slot).into_unknown();
    // SAFETY: forwarded COM out-parameter contract.
    unsafe { object.query(riid, ppv) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_mask::{EventMask, EventMasks};
    use crate::testing::fake::FakeRuntime;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// A profiler that counts JIT callbacks and its own drops, and panics on demand.
    struct Probe {
        jitted: Arc<AtomicUsize>,
        dropped: Arc<AtomicUsize>,
        mask: EventMask,
    }

    impl Profiler for Probe {
        fn initialize(&self, _info: &ProfilerInfo) -> crate::Result<EventMasks> {
            Ok(self.mask.into())
        }
        fn jit_compilation_started(&self, _info: &ProfilerInfo, f: FunctionId<'_>, _safe: bool) {
            if f.as_sys() == 0xbad {
                panic!("deliberate");
            }
            self.jitted.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn make(mask: EventMask) -> (ICorProfilerCallback2, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (jitted, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let probe = Probe {
            jitted: jitted.clone(),
            dropped: dropped.clone(),
            mask,
        };
        let mut ppv: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid IID and out pointer.
        let hr = unsafe { create_instance(move || probe, &ICorProfilerCallback2::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: `ppv` holds an owned ICorProfilerCallback2 reference.
        let cb = unsafe { ICorProfilerCallback2::from_raw(ppv) };
        (cb, jitted, dropped)
    }

    #[test]
    fn initialize_sets_the_returned_mask_and_callbacks_reach_the_profiler() {
        let fake = FakeRuntime::new();
        let (cb, jitted, dropped) = make(EventMask::MONITOR_JIT_COMPILATION);
        // SAFETY: the fake's IUnknown is a valid profiler-info object.
        let hr = unsafe { cb.Initialize(fake.unknown().as_raw()) };
        assert_eq!(hr.0, 0);
        // What the profiler asked for, plus the flags the SDK adds to see an
        // unhandled exception coming (crate::exit::unhandled).
        assert_eq!(
            fake.state().event_mask,
            (EventMask::MONITOR_JIT_COMPILATION
                | EventMask::MONITOR_EXCEPTIONS
                | EventMask::ENABLE_STACK_SNAPSHOT)
                .bits()
        );
        // SAFETY: plain values.
        unsafe {
            assert_eq!(cb.JITCompilationStarted(0x1234, 1).0, 0);
            assert_eq!(
                cb.JITCompilationStarted(0xbad, 1).0,
                0,
                "a panic becomes S_OK"
            );
            assert_eq!(cb.JITCompilationStarted(0x5678, 1).0, 0);
        }
        assert_eq!(jitted.load(Ordering::SeqCst), 2);
        // QueryInterface answers every callback version.
        let _: ICorProfilerCallback11 = cb.cast().expect("Callback11");
        let _: ICorProfilerCallback3 = cb.cast().expect("Callback3");
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        drop(cb);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the last Release drops the profiler value"
        );
    }

    #[test]
    fn a_refused_mask_fails_initialize_with_the_runtime_code() {
        let fake = FakeRuntime::new();
        let refusal = HRESULT(KnownHresult::CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER as i32);
        fake.fail("SetEventMask", refusal);
        let (cb, _, _) = make(EventMask::MONITOR_ENTERLEAVE);
        // SAFETY: the fake's IUnknown is a valid profiler-info object.
        let hr = unsafe { cb.Initialize(fake.unknown().as_raw()) };
        assert_eq!(hr, refusal);
    }

    #[test]
    fn callbacks_before_initialize_are_ignored() {
        let (cb, jitted, _) = make(EventMask::MONITOR_JIT_COMPILATION);
        // SAFETY: plain values.
        assert_eq!(unsafe { cb.JITCompilationStarted(0x1234, 1) }.0, 0);
        assert_eq!(jitted.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn create_instance_honours_riid() {
        let probe = Probe {
            jitted: Default::default(),
            dropped: Default::default(),
            mask: EventMask::empty(),
        };
        let mut ppv: *mut c_void = core::ptr::dangling_mut();
        let foreign = GUID::from_u128(0x0bad_0000_0000_0000_0000_0000_0000_0000);
        // SAFETY: valid IID and out pointer.
        let hr = unsafe { create_instance(move || probe, &foreign, &mut ppv) };
        assert_eq!(hr.0, KnownHresult::E_NOINTERFACE as i32);
        assert!(ppv.is_null());
    }
}
