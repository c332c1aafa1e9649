//! The callback trait: what a profiler implements.
//!
//! [`Profiler`] has one method per callback of `ICorProfilerCallback` through
//! `ICorProfilerCallback11`, with typed, borrowed arguments and empty default
//! bodies, so a profiler implements only what it uses. The runtime calls
//! callbacks from many threads at once (and in surprising orders, e.g. a
//! function's ELT hooks can fire before its `JITCompilationFinished`), so every
//! method takes `&self` and the profiler type must be `Send + Sync`: interior
//! state goes behind atomics, `Mutex`es or lock-free structures.
//!
//! A callback is only delivered if the event mask returned by
//! [`Profiler::initialize`] (or changed later with
//! [`RuntimeHandle::set_event_mask`](crate::RuntimeHandle::set_event_mask)) enables it; each method says which flag.
//!
//! Every callback runs inside the SDK's panic guard: a panic is logged and
//! turned into the `HRESULT` that is harmless for that callback, so the host
//! application never dies because of the profiler.

use crate::error::{Error, Result, HRESULT};
use crate::event_mask::{AttachEventMasks, EventMasks};
use crate::gc::{GcRanges, GcReason, GenerationSet, RootReferences};
use crate::ids::*;
use crate::info::ProfilerInfo;
use crate::runtimes::RuntimePolicy;
use crate::wide::WideStr;
use windows_core::GUID;

/// Why a managed/unmanaged transition happened (`COR_PRF_TRANSITION_REASON`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransitionReason {
    /// A call crossed the boundary (`COR_PRF_TRANSITION_CALL`).
    Call,
    /// A call returned across the boundary (`COR_PRF_TRANSITION_RETURN`).
    Return,
    /// A value the SDK does not know.
    Other(u32),
}

impl TransitionReason {
    pub(crate) fn from_sys(v: u32) -> Self {
        match v {
            clrprof_sys::COR_PRF_TRANSITION_CALL => Self::Call,
            clrprof_sys::COR_PRF_TRANSITION_RETURN => Self::Return,
            o => Self::Other(o),
        }
    }
}

/// Why the runtime is suspending (`COR_PRF_SUSPEND_REASON`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SuspendReason {
    /// `COR_PRF_SUSPEND_OTHER`.
    Other,
    /// For a garbage collection (`COR_PRF_SUSPEND_FOR_GC`).
    ForGc,
    /// For an application-domain shutdown (`COR_PRF_SUSPEND_FOR_APPDOMAIN_SHUTDOWN`).
    ForAppDomainShutdown,
    /// For code pitching (`COR_PRF_SUSPEND_FOR_CODE_PITCHING`).
    ForCodePitching,
    /// For runtime shutdown (`COR_PRF_SUSPEND_FOR_SHUTDOWN`).
    ForShutdown,
    /// For an in-process debugger (`COR_PRF_SUSPEND_FOR_INPROC_DEBUGGER`).
    ForInprocDebugger,
    /// Preparing for a GC (`COR_PRF_SUSPEND_FOR_GC_PREP`).
    ForGcPrep,
    /// For ReJIT (`COR_PRF_SUSPEND_FOR_REJIT`).
    ForReJit,
    /// Requested by a profiler (`COR_PRF_SUSPEND_FOR_PROFILER`).
    ForProfiler,
    /// A value the SDK does not know.
    Unknown(u32),
}

impl SuspendReason {
    pub(crate) fn from_sys(v: u32) -> Self {
        use clrprof_sys as s;
        match v {
            s::COR_PRF_SUSPEND_OTHER => Self::Other,
            s::COR_PRF_SUSPEND_FOR_GC => Self::ForGc,
            s::COR_PRF_SUSPEND_FOR_APPDOMAIN_SHUTDOWN => Self::ForAppDomainShutdown,
            s::COR_PRF_SUSPEND_FOR_CODE_PITCHING => Self::ForCodePitching,
            s::COR_PRF_SUSPEND_FOR_SHUTDOWN => Self::ForShutdown,
            s::COR_PRF_SUSPEND_FOR_INPROC_DEBUGGER => Self::ForInprocDebugger,
            s::COR_PRF_SUSPEND_FOR_GC_PREP => Self::ForGcPrep,
            s::COR_PRF_SUSPEND_FOR_REJIT => Self::ForReJit,
            s::COR_PRF_SUSPEND_FOR_PROFILER => Self::ForProfiler,
            o => Self::Unknown(o),
        }
    }
}

/// A failed `*LoadFinished` / `*CreationFinished`: the runtime says the ID is
/// not valid for information requests after a failed load, so it comes as
/// the raw form, with the failure status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failed<R> {
    /// The raw ID of what failed to load.
    pub id: R,
    /// The failing status the runtime reported.
    pub status: HRESULT,
}

/// The outcome of a `*LoadFinished` / `*CreationFinished` callback: the
/// typed ID after a successful load, [`Failed`] (raw ID and status) after a
/// failed one. E.g. `module: Loaded<ModuleId<'_>>`.
pub type Loaded<T> = core::result::Result<T, Failed<<T as ScopedId>::Raw>>;

/// One event delivered through EventPipe; see [`crate::eventpipe`].
pub use crate::eventpipe::EventPipeEvent;

/// The profiler's callbacks (`ICorProfilerCallback` … `ICorProfilerCallback11`).
///
/// Implement this for the struct marked `#[profiler(clsid = "...")]`. Only
/// [`initialize`](Profiler::initialize) is required.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is marked #[profiler] but does not implement `clrprof::Profiler`",
    label = "add `impl clrprof::Profiler for {Self} {{ fn initialize(&self, info: &clrprof::ProfilerInfo) -> clrprof::Result<clrprof::EventMasks> {{ ... }} }}`",
    note = "the #[profiler] struct must implement the callback trait: at least `initialize`"
)]
#[allow(unused_variables)]
pub trait Profiler: Send + Sync + 'static {
    // ----- ICorProfilerCallback: startup and shutdown -----

    /// `Initialize`: the profiler was loaded at startup. Return the event masks
    /// to enable. Returning an error unloads the profiler (the runtime logs it).
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks>;

    /// Which runtimes of the process this profiler class profiles when several
    /// load it side by side (see [`crate::runtimes`]). Default: all.
    fn runtime_policy() -> RuntimePolicy
    where
        Self: Sized,
    {
        RuntimePolicy::All
    }

    /// Whether the SDK watches exceptions so that [`finish`](Profiler::finish)
    /// runs before the runtime ends the process on an unhandled managed
    /// exception. Default: `true`.
    ///
    /// On Linux the runtime prints an unhandled exception and calls `abort()`
    /// after putting back the signal dispositions it found at startup, so no
    /// exit handler of a library runs; on the Windows legs (Wine) the process
    /// ends without exit handlers or the top-level exception filter either.
    /// The last thing a profiler sees is the
    /// exception's first pass leaving the thread's outermost managed frame.
    /// To recognise that moment the SDK asks for `MONITOR_EXCEPTIONS` and
    /// `ENABLE_STACK_SNAPSHOT` and takes a synchronous stack snapshot of the
    /// throwing thread at every `ExceptionThrown` (the `clrprof::exit` module
    /// docs). That walk costs about 0.6 µs per thrown exception on .NET 8
    /// (`benches/README.md`, dispatch). A profiler that has no finishing
    /// work, or accepts losing it when an exception goes unhandled, returns
    /// `false` and pays nothing per exception beyond its own callbacks.
    fn watch_unhandled_exceptions() -> bool
    where
        Self: Sized,
    {
        true
    }

    /// `Shutdown`: the runtime is shutting down. Not called on many exit
    /// paths (a host that never shuts the runtime down, `exit()` from native
    /// code, an unhandled exception, signals): put final writes in
    /// [`finish`](Profiler::finish), which runs on every path.
    fn shutdown(&self, info: &ProfilerInfo) {}

    /// The profiler's finishing work: called by the SDK exactly once per
    /// profiler object, at whichever comes first of `Shutdown` (after
    /// [`shutdown`](Profiler::shutdown)), `ProfilerDetachSucceeded` (after
    /// [`profiler_detach_succeeded`](Profiler::profiler_detach_succeeded)),
    /// or the end of the process by any path the platform lets a library see
    /// (the `clrprof::exit` module lists them, with their limits). Only for profilers
    /// whose `initialize` (or `initialize_for_attach`) succeeded.
    ///
    /// There is no `ProfilerInfo` argument: at process exit the runtime may
    /// be half torn down, its threads stopped mid-callback (Windows ends them
    /// before exit handlers run), so nothing here may call it. Resolve what
    /// the final output needs (names!) while the runtime answers, e.g. when
    /// an ID is first seen, and only format and write here. Callbacks on
    /// other threads may still run concurrently with (and after) `finish`.
    /// Output written through [`crate::output::JsonLines`] is flushed by the
    /// SDK right after this returns.
    fn finish(&self) {}

    // ----- application domains (MONITOR_APPDOMAIN_LOADS) -----

    /// `AppDomainCreationStarted`. The ID is raw: the runtime makes it valid
    /// for information requests only from `AppDomainCreationFinished`
    /// (corprof.idl remarks), where it arrives typed.
    fn app_domain_creation_started(&self, info: &ProfilerInfo, app_domain: RawAppDomainId) {}
    /// `AppDomainCreationFinished`: the typed ID once created, the raw ID
    /// and the status if creation failed.
    fn app_domain_creation_finished(
        &self,
        info: &ProfilerInfo,
        app_domain: Loaded<AppDomainId<'_>>,
    ) {
    }
    /// `AppDomainShutdownStarted`.
    fn app_domain_shutdown_started(&self, info: &ProfilerInfo, app_domain: AppDomainId<'_>) {}
    /// `AppDomainShutdownFinished`. The ID is raw: it stopped being valid
    /// for information requests when `AppDomainShutdownStarted` returned.
    fn app_domain_shutdown_finished(
        &self,
        info: &ProfilerInfo,
        app_domain: RawAppDomainId,
        status: HRESULT,
    ) {
    }

    // ----- assemblies (MONITOR_ASSEMBLY_LOADS) -----

    /// `AssemblyLoadStarted`. The ID is raw: the runtime makes it valid for
    /// information requests only from `AssemblyLoadFinished` (corprof.idl
    /// remarks), where it arrives typed.
    fn assembly_load_started(&self, info: &ProfilerInfo, assembly: RawAssemblyId) {}
    /// `AssemblyLoadFinished`: the typed ID once loaded, the raw ID and
    /// the status if the load failed.
    fn assembly_load_finished(&self, info: &ProfilerInfo, assembly: Loaded<AssemblyId<'_>>) {}
    /// `AssemblyUnloadStarted`.
    fn assembly_unload_started(&self, info: &ProfilerInfo, assembly: AssemblyId<'_>) {}
    /// `AssemblyUnloadFinished`. The ID is raw: it stopped being valid for
    /// information requests when `AssemblyUnloadStarted` returned.
    fn assembly_unload_finished(
        &self,
        info: &ProfilerInfo,
        assembly: RawAssemblyId,
        status: HRESULT,
    ) {
    }

    // ----- modules (MONITOR_MODULE_LOADS) -----

    /// `ModuleLoadStarted`. The ID is raw: the runtime calls this before it
    /// has initialised the module (its class tables, metadata and assembly
    /// are not set up yet), and makes the ID valid for information requests
    /// only from `ModuleLoadFinished` (corprof.idl remarks), where it
    /// arrives typed. Asking the runtime about it here (e.g.
    /// `GetClassFromToken`) crashed .NET 8.
    fn module_load_started(&self, info: &ProfilerInfo, module: RawModuleId) {}
    /// `ModuleLoadFinished`: the module can be inspected now (typed ID), or
    /// its load failed (raw ID and status).
    fn module_load_finished(&self, info: &ProfilerInfo, module: Loaded<ModuleId<'_>>) {}
    /// `ModuleUnloadStarted`: last moment the `ModuleId` is valid.
    fn module_unload_started(&self, info: &ProfilerInfo, module: ModuleId<'_>) {}
    /// `ModuleUnloadFinished`. The ID is raw: it stopped being valid for
    /// information requests when `ModuleUnloadStarted` returned.
    fn module_unload_finished(&self, info: &ProfilerInfo, module: RawModuleId, status: HRESULT) {}
    /// `ModuleAttachedToAssembly`: issued right after a successful
    /// `ModuleLoadFinished` (the module is typed). The assembly is raw: the
    /// runtime issues this before the assembly's `AssemblyLoadFinished`, and
    /// an `AssemblyID` is valid for information requests only from then on.
    fn module_attached_to_assembly(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        assembly: RawAssemblyId,
    ) {
    }

    // ----- classes (MONITOR_CLASS_LOADS) -----

    /// `ClassLoadStarted`. The ID is raw: the type is still being built, and
    /// the runtime makes the ID valid for information requests only from
    /// `ClassLoadFinished` (corprof.idl remarks), where it arrives typed.
    fn class_load_started(&self, info: &ProfilerInfo, class: RawClassId) {}
    /// `ClassLoadFinished`: the typed ID once loaded, the raw ID and the
    /// status if the load failed.
    fn class_load_finished(&self, info: &ProfilerInfo, class: Loaded<ClassId<'_>>) {}
    /// `ClassUnloadStarted`: last moment the `ClassId` (and its functions' IDs) are valid.
    fn class_unload_started(&self, info: &ProfilerInfo, class: ClassId<'_>) {}
    /// `ClassUnloadFinished`. The ID is raw: it (and its functions' IDs)
    /// stopped being valid when `ClassUnloadStarted` returned.
    fn class_unload_finished(&self, info: &ProfilerInfo, class: RawClassId, status: HRESULT) {}
    /// `FunctionUnloadStarted` (MONITOR_FUNCTION_UNLOADS).
    fn function_unload_started(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}

    // ----- JIT (MONITOR_JIT_COMPILATION, MONITOR_CACHE_SEARCHES) -----

    /// `JITCompilationStarted`: the place to replace the IL body.
    fn jit_compilation_started(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        is_safe_to_block: bool,
    ) {
    }
    /// `JITCompilationFinished`.
    fn jit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        status: HRESULT,
        is_safe_to_block: bool,
    ) {
    }
    /// `JITCachedFunctionSearchStarted`: return `false` to reject the
    /// precompiled (NGEN / ready-to-run) code and have the function JIT-compiled.
    fn jit_cached_function_search_started(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
    ) -> bool {
        true
    }
    /// `JITCachedFunctionSearchFinished`; `found` is `COR_PRF_CACHED_FUNCTION_FOUND`.
    fn jit_cached_function_search_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        found: bool,
    ) {
    }
    /// `JITFunctionPitched`.
    fn jit_function_pitched(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `JITInlining`: return `false` to veto inlining `callee` into `caller`.
    fn jit_inlining(
        &self,
        info: &ProfilerInfo,
        caller: FunctionId<'_>,
        callee: FunctionId<'_>,
    ) -> bool {
        true
    }

    // ----- threads (MONITOR_THREADS) -----

    /// `ThreadCreated`.
    fn thread_created(&self, info: &ProfilerInfo, thread: ThreadId<'_>) {}
    /// `ThreadDestroyed`: last moment the `ThreadId` is valid.
    fn thread_destroyed(&self, info: &ProfilerInfo, thread: ThreadId<'_>) {}
    /// `ThreadAssignedToOSThread`.
    fn thread_assigned_to_os_thread(
        &self,
        info: &ProfilerInfo,
        thread: ThreadId<'_>,
        os_thread_id: u32,
    ) {
    }
    /// `ThreadNameChanged` (Callback2).
    fn thread_name_changed(&self, info: &ProfilerInfo, thread: ThreadId<'_>, name: WideStr<'_>) {}

    // ----- remoting (.NET Framework; MONITOR_REMOTING*) -----

    /// `RemotingClientInvocationStarted`.
    fn remoting_client_invocation_started(&self, info: &ProfilerInfo) {}
    /// `RemotingClientSendingMessage`.
    fn remoting_client_sending_message(
        &self,
        info: &ProfilerInfo,
        cookie: Option<&GUID>,
        is_async: bool,
    ) {
    }
    /// `RemotingClientReceivingReply`.
    fn remoting_client_receiving_reply(
        &self,
        info: &ProfilerInfo,
        cookie: Option<&GUID>,
        is_async: bool,
    ) {
    }
    /// `RemotingClientInvocationFinished`.
    fn remoting_client_invocation_finished(&self, info: &ProfilerInfo) {}
    /// `RemotingServerReceivingMessage`.
    fn remoting_server_receiving_message(
        &self,
        info: &ProfilerInfo,
        cookie: Option<&GUID>,
        is_async: bool,
    ) {
    }
    /// `RemotingServerInvocationStarted`.
    fn remoting_server_invocation_started(&self, info: &ProfilerInfo) {}
    /// `RemotingServerInvocationReturned`.
    fn remoting_server_invocation_returned(&self, info: &ProfilerInfo) {}
    /// `RemotingServerSendingReply`.
    fn remoting_server_sending_reply(
        &self,
        info: &ProfilerInfo,
        cookie: Option<&GUID>,
        is_async: bool,
    ) {
    }

    // ----- transitions (MONITOR_CODE_TRANSITIONS) -----

    /// `UnmanagedToManagedTransition`.
    fn unmanaged_to_managed_transition(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        reason: TransitionReason,
    ) {
    }
    /// `ManagedToUnmanagedTransition`.
    fn managed_to_unmanaged_transition(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        reason: TransitionReason,
    ) {
    }

    // ----- suspension (MONITOR_SUSPENDS) -----

    /// `RuntimeSuspendStarted`. The runtime may hold the thread-store lock: do not block.
    fn runtime_suspend_started(&self, info: &ProfilerInfo, reason: SuspendReason) {}
    /// `RuntimeSuspendFinished`.
    fn runtime_suspend_finished(&self, info: &ProfilerInfo) {}
    /// `RuntimeSuspendAborted`.
    fn runtime_suspend_aborted(&self, info: &ProfilerInfo) {}
    /// `RuntimeResumeStarted`.
    fn runtime_resume_started(&self, info: &ProfilerInfo) {}
    /// `RuntimeResumeFinished`.
    fn runtime_resume_finished(&self, info: &ProfilerInfo) {}
    /// `RuntimeThreadSuspended`. Calls the runtime makes between
    /// `RuntimeSuspendStarted` and `RuntimeSuspendFinished` are delivered
    /// when the suspension has finished, just before
    /// [`runtime_suspend_finished`](Self::runtime_suspend_finished) (or
    /// [`runtime_suspend_aborted`](Self::runtime_suspend_aborted)): on
    /// Windows the runtime makes them while the thread is OS-suspended,
    /// possibly holding the heap lock, where profiler code that allocates
    /// would deadlock the process.
    fn runtime_thread_suspended(&self, info: &ProfilerInfo, thread: ThreadId<'_>) {}
    /// `RuntimeThreadResumed`.
    fn runtime_thread_resumed(&self, info: &ProfilerInfo, thread: ThreadId<'_>) {}

    // ----- GC (MONITOR_GC and friends) -----

    /// `GarbageCollectionStarted` (Callback2). Every `ObjectId` held so far
    /// becomes invalid now.
    fn garbage_collection_started(
        &self,
        info: &ProfilerInfo,
        generations: GenerationSet,
        reason: GcReason,
    ) {
    }
    /// `GarbageCollectionFinished` (Callback2).
    fn garbage_collection_finished(&self, info: &ProfilerInfo) {}
    /// `MovedReferences2` (Callback4; the SDK ignores the older `MovedReferences`,
    /// which carries the same ranges with 32-bit lengths): objects moved by a
    /// compacting GC.
    ///
    /// The ranges are raw addresses: the GC is in the middle of relocating,
    /// and the runtime says no `ObjectID` (old or new) names a readable
    /// object during this callback. Every object reader refuses here with
    /// [`Error::GcMayRun`]; keep what you need with
    /// [`ObjectTable`](crate::gc::ObjectTable) and read objects after the GC.
    fn moved_references(&self, info: &ProfilerInfo, ranges: GcRanges<'_>) {}
    /// `SurvivingReferences2` (Callback4; the older `SurvivingReferences` is
    /// ignored likewise): objects that survived a non-compacting GC. Raw
    /// ranges, and no object may be read, as in
    /// [`moved_references`](Profiler::moved_references).
    fn surviving_references(&self, info: &ProfilerInfo, ranges: GcRanges<'_>) {}
    /// `ObjectAllocated` (MONITOR_OBJECT_ALLOCATED with ENABLE_OBJECT_ALLOCATED).
    fn object_allocated(&self, info: &ProfilerInfo, object: ObjectId<'_>, class: ClassId<'_>) {}
    /// `ObjectsAllocatedByClass`: counts since the last GC, per class.
    fn objects_allocated_by_class(
        &self,
        info: &ProfilerInfo,
        classes: &[ClassId<'_>],
        counts: &[u32],
    ) {
    }
    /// `ObjectReferences`: the objects `object` refers to. Return `false` to
    /// stop receiving `ObjectReferences` for the rest of this GC.
    fn object_references(
        &self,
        info: &ProfilerInfo,
        object: ObjectId<'_>,
        class: ClassId<'_>,
        references: &[ObjectId<'_>],
    ) -> bool {
        true
    }
    /// `RootReferences2` (Callback2), with root kinds and flags. (The older
    /// `RootReferences` carries a subset of the same data and is ignored.)
    fn root_references(&self, info: &ProfilerInfo, roots: RootReferences<'_>) {}
    /// `FinalizeableObjectQueued`; `critical` is `COR_PRF_FINALIZER_CRITICAL`.
    fn finalizeable_object_queued(
        &self,
        info: &ProfilerInfo,
        object: ObjectId<'_>,
        critical: bool,
    ) {
    }
    /// `HandleCreated`. The runtime may issue it in preemptive mode (a GC
    /// can run on another thread meanwhile) when the handle starts empty,
    /// e.g. the handles of a new `Thread`; then `initial_object` is `None`.
    /// It is `None` too for a handle the profiler makes for an object the
    /// runtime is still allocating
    /// ([`AllocationSample::create_handle`](crate::allocations::AllocationSample::create_handle)),
    /// whose method table is not written yet.
    /// Otherwise the creating thread is in cooperative mode and the object
    /// stays put for the callback. Either way this is not a GC-blocked scope
    /// ([`ProfilerInfo::gc_blocked`] is `false`): reads that follow object
    /// references from the heap ([`GcHandle::object`](crate::handles::GcHandle::object),
    /// `object_references`, `static_field_value`) refuse with
    /// [`Error::GcMayRun`].
    fn handle_created(
        &self,
        info: &ProfilerInfo,
        handle: GcHandleId<'_>,
        initial_object: Option<ObjectId<'_>>,
    ) {
    }
    /// `HandleDestroyed`.
    fn handle_destroyed(&self, info: &ProfilerInfo, handle: GcHandleId<'_>) {}
    /// `ConditionalWeakTableElementReferences` (Callback5): dependent handles.
    fn conditional_weak_table_element_references(
        &self,
        info: &ProfilerInfo,
        keys: &[ObjectId<'_>],
        values: &[ObjectId<'_>],
        roots: &[GcHandleId<'_>],
    ) {
    }

    // ----- exceptions (MONITOR_EXCEPTIONS, MONITOR_CLR_EXCEPTIONS) -----

    /// `ExceptionThrown`.
    fn exception_thrown(&self, info: &ProfilerInfo, exception: ObjectId<'_>) {}
    /// `ExceptionSearchFunctionEnter` (first pass).
    fn exception_search_function_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ExceptionSearchFunctionLeave`.
    fn exception_search_function_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionSearchFilterEnter`.
    fn exception_search_filter_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ExceptionSearchFilterLeave`.
    fn exception_search_filter_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionSearchCatcherFound`.
    fn exception_search_catcher_found(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ExceptionOSHandlerEnter` (not issued by current runtimes).
    fn exception_os_handler_enter(&self, info: &ProfilerInfo) {}
    /// `ExceptionOSHandlerLeave` (not issued by current runtimes).
    fn exception_os_handler_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionUnwindFunctionEnter` (second pass). Runs where a GC cannot
    /// happen: do not block.
    fn exception_unwind_function_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ExceptionUnwindFunctionLeave`.
    fn exception_unwind_function_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionUnwindFinallyEnter`.
    fn exception_unwind_finally_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ExceptionUnwindFinallyLeave`.
    fn exception_unwind_finally_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionCatcherEnter`.
    fn exception_catcher_enter(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        exception: ObjectId<'_>,
    ) {
    }
    /// `ExceptionCatcherLeave`.
    fn exception_catcher_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionCLRCatcherFound`.
    fn exception_clr_catcher_found(&self, info: &ProfilerInfo) {}
    /// `ExceptionCLRCatcherExecute`.
    fn exception_clr_catcher_execute(&self, info: &ProfilerInfo) {}

    // ----- COM interop (MONITOR_CCW) -----

    /// `COMClassicVTableCreated`.
    fn com_classic_vtable_created(
        &self,
        info: &ProfilerInfo,
        class: ClassId<'_>,
        implemented_iid: &GUID,
        vtable: *mut core::ffi::c_void,
        slots: u32,
    ) {
    }
    /// `COMClassicVTableDestroyed`.
    fn com_classic_vtable_destroyed(
        &self,
        info: &ProfilerInfo,
        class: ClassId<'_>,
        implemented_iid: &GUID,
        vtable: *mut core::ffi::c_void,
    ) {
    }

    // ----- attach and detach (Callback3) -----

    /// `InitializeForAttach`: the profiler was loaded into a running process.
    /// `client_data` is what the attach trigger sent. Only attach-allowed
    /// masks can be returned. The default refuses attach
    /// (`CORPROF_E_PROFILER_NOT_ATTACHABLE`).
    fn initialize_for_attach(
        &self,
        info: &ProfilerInfo,
        client_data: &[u8],
    ) -> Result<AttachEventMasks> {
        Err(Error::runtime(
            HRESULT(crate::error::KnownHresult::CORPROF_E_PROFILER_NOT_ATTACHABLE as i32),
            "Profiler::initialize_for_attach",
        ))
    }
    /// `ProfilerAttachComplete`: catch-up time (enumerate what loaded before the attach).
    fn profiler_attach_complete(&self, info: &ProfilerInfo) {}
    /// `ProfilerDetachSucceeded`: the last callback; the profiler is dropped afterwards.
    fn profiler_detach_succeeded(&self, info: &ProfilerInfo) {}

    // ----- ReJIT (Callback4) -----

    /// `ReJITCompilationStarted`.
    fn rejit_compilation_started(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        rejit: ReJitId<'_>,
        is_safe_to_block: bool,
    ) {
    }
    /// `GetReJITParameters`: supply the new IL through `control`. An error is
    /// returned to the runtime, which then reports `ReJITError`. `control`
    /// sets the new version of (`module`, `method`) only, and knows it
    /// ([`FunctionControl::module`](crate::rejit::FunctionControl::module),
    /// [`method`](crate::rejit::FunctionControl::method)): a wrapped body of
    /// another method is refused by
    /// `WrappedBody::install_in_rejit` (crate `clrprof-instrumentation`).
    fn get_rejit_parameters(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        method: MdMethodDef,
        control: &crate::rejit::FunctionControl,
    ) -> Result<()> {
        Ok(())
    }
    /// `ReJITCompilationFinished`.
    fn rejit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        rejit: ReJitId<'_>,
        status: HRESULT,
        is_safe_to_block: bool,
    ) {
    }
    /// `ReJITError`.
    fn rejit_error(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        method: MdMethodDef,
        function: FunctionId<'_>,
        status: HRESULT,
    ) {
    }

    // ----- Callback6 .. Callback11 -----

    /// `GetAssemblyReferences` (HIGH ADD_ASSEMBLY_REFERENCES): add references
    /// the runtime should consider while loading `assembly_path`.
    fn get_assembly_references(
        &self,
        info: &ProfilerInfo,
        assembly_path: WideStr<'_>,
        provider: &crate::rejit::AssemblyReferenceProvider,
    ) -> Result<()> {
        Ok(())
    }
    /// `ModuleInMemorySymbolsUpdated` (Callback7).
    fn module_in_memory_symbols_updated(&self, info: &ProfilerInfo, module: ModuleId<'_>) {}
    /// `DynamicMethodJITCompilationStarted` (Callback8): `il_header` is the
    /// method's IL header and body.
    fn dynamic_method_jit_compilation_started(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        is_safe_to_block: bool,
        il_header: &[u8],
    ) {
    }
    /// `DynamicMethodJITCompilationFinished` (Callback8).
    fn dynamic_method_jit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        status: HRESULT,
        is_safe_to_block: bool,
    ) {
    }
    /// `DynamicMethodUnloaded` (Callback9, HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS).
    /// The ID is raw: the method has been collected, and the runtime hands
    /// the same `FunctionID` to later dynamic methods.
    fn dynamic_method_unloaded(&self, info: &ProfilerInfo, function: RawFunctionId) {}
    /// `EventPipeEventDelivered` (Callback10, HIGH_MONITOR_EVENT_PIPE): an
    /// event of a session the profiler started
    /// ([`RuntimeHandle::event_pipe_start_session`](crate::RuntimeHandle::event_pipe_start_session)),
    /// delivered on the thread that wrote it, inside the write (see
    /// [`crate::eventpipe`]).
    fn event_pipe_event_delivered(&self, info: &ProfilerInfo, event: &EventPipeEvent<'_>) {}
    /// One of the runtime's own allocation events (`GCAllocationTick`,
    /// `AllocationSampled`) of a session the profiler started, decoded and
    /// recognised by the SDK (see [`crate::allocations`]); called right
    /// after [`event_pipe_event_delivered`](Self::event_pipe_event_delivered)
    /// for the same event, on the allocating thread, inside the allocation.
    fn allocation_sampled(
        &self,
        info: &ProfilerInfo,
        sample: &crate::allocations::AllocationSample<'_>,
    ) {
    }
    /// `EventPipeProviderCreated` (Callback10, HIGH_MONITOR_EVENT_PIPE): a
    /// provider was created; the reference is valid for this callback.
    fn event_pipe_provider_created(
        &self,
        info: &ProfilerInfo,
        provider: crate::eventpipe::ProviderRef<'_>,
    ) {
    }
    /// `LoadAsNotificationOnly` (Callback11): return `true` to be loaded as a
    /// notification-only profiler (several may be active; fewer features).
    /// Called before `initialize`, without a `ProfilerInfo`.
    fn load_as_notification_only(&self) -> bool {
        false
    }
}
