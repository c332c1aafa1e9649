//! `ProfilerInfo`: the safe face of `ICorProfilerInfo` … `ICorProfilerInfo15`.
//!
//! At `Initialize` the SDK asks the runtime (QueryInterface) for every Info
//! version it knows, once, and keeps the interfaces the runtime offers. A
//! method of a newer interface than the runtime has returns
//! [`Error::Unsupported`] instead of calling through a missing vtable.
//!
//! The Info interfaces are free-threaded: the runtime allows calls from any
//! thread, including threads the profiler created (BOTR *Profiling*), with the
//! restrictions each method documents (e.g. `GetCurrentThreadID` on a
//! non-managed thread fails with `CORPROF_E_NOT_MANAGED_THREAD`).
//!
//! The methods of `ICorProfilerInfo`…`ICorProfilerInfo3` are grouped by
//! concern: [`functions`], [`classes`], [`statics`], [`modules`],
//! [`threads`], [`gc`], [`exceptions`], [`jit`]; enumerators are iterators
//! ([`enums`]). Info methods that return an ID not derived from an ID the
//! caller passed (e.g. `function_from_ip`, `enum_modules`) tie it to `&self`;
//! the runtime's validity rule for that kind of ID still applies.
//!
//! `ICorProfilerInfo4`…`ICorProfilerInfo9` and `ICorProfilerInfo11`:
//! [`code_versions`] (native code per ReJIT version and tier, IP look-ups,
//! `EnumJITedFunctions2`), [`dynamic`] (methods without metadata),
//! [`symbols`] (`ApplyMetaData`, in-memory symbols), [`environment`],
//! [`ngen`] (inlining recorded in precompiled images), [`object_size`]
//! (`GetObjectSize2`), [`profiler_threads`] (`InitializeCurrentThread`);
//! ReJIT is in [`crate::il::rejit`], `EnumThreads` in
//! [`crate::stackwalk`], the high event mask (Info5) here. Which runtime
//! implements which interface: the book's *Which interfaces each runtime
//! implements*; the coverage of every method: its *Coverage* chapter.
//!
//! Not here, see the elt and stackwalk modules: `DoStackSnapshot`,
//! `SetEnterLeaveFunctionHooks`/`2`/`3`/`3WithInfo`, `SetFunctionIDMapper`/`2`,
//! `GetFunctionEnter3Info`, `GetFunctionLeave3Info`,
//! `GetFunctionTailcall3Info`.
//!
//! For a profiler loaded by attach the runtime refuses some methods with
//! `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`; among Info1–3 these are
//! `GetNotifiedExceptionClauseInfo`, the ELT hook setters (callable only
//! during `Initialize` anyway), `SetFunctionIDMapper`/`2` and the
//! `GetFunction*3Info` methods. Every other Info1–3 method is allowed.

use crate::buffer::{fill, fill_string};
use crate::error::{check, Error, Result, HRESULT};
use crate::event_mask::{EventMask, EventMasks, HighEventMask, MaskRules};
use crate::ids::*;
use crate::metadata::MetaDataImport;
pub use crate::runtimes::{RuntimeInfo, RuntimeType};
use clrprof_sys as sys;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use windows_core::{IUnknown, Interface};

pub mod classes;
pub mod code_versions;
pub mod dynamic;
pub mod enums;
pub mod environment;
pub mod exceptions;
pub mod functions;
mod gate;
pub mod gc;
pub mod heap;
pub mod jit;
#[cfg(test)]
mod lifecycle_tests;
pub mod modules;
pub mod ngen;
pub mod object_size;
pub mod profiler_threads;
pub mod statics;
pub mod symbols;
pub mod threads;

pub use classes::{
    ArrayClassInfo, ArrayObjectInfo, ClassDefinition, ClassLayout, CorElementType, FieldOffset,
    StaticFieldKinds, StringLayout, StringLayout2,
};
pub use code_versions::NativeCode;
pub use dynamic::DynamicFunctionInfo;
pub use enums::{
    FunctionEnum, JitedFunction, MethodEnum, ModuleEnum, ModuleMethod, ObjectEnum, ProfilerEnum,
    ThreadEnum,
};
pub use exceptions::{ClauseType, ExceptionClauseInfo};
pub use functions::{
    il_method_size, CodeChunk, IlBuffer, IlMapEntry, IlOffset, IlToNativeMapEntry, MethodMalloc,
};
pub use gc::{Generation, GenerationRange};
pub use heap::NonGcHeapRange;
pub use modules::{AppDomainInfo, AssemblyInfo, ModuleFlags, ModuleInfo2};
pub use ngen::NgenInliners;

macro_rules! info_versions {
    ($($field:ident: $iface:ident = $n:literal;)*) => {
        /// Every `ICorProfilerInfoN` the runtime answered QueryInterface for.
        ///
        /// The pointers are never released: the runtime's `AddRef` and
        /// `Release` on this object are no-ops and it deletes the object
        /// itself on detach or after a failed `Initialize`, whatever
        /// references remain (see [`gate`]), so a `Release` from the last
        /// handle dropped later would call into freed memory.
        struct Interfaces {
            info1: ManuallyDrop<sys::ICorProfilerInfo>,
            $($field: ManuallyDrop<Option<sys::$iface>>,)*
            version: u8,
            attached: bool,
            slot: crate::runtimes::RuntimeSlot,
            /// The masks the profiler asked for (low | high << 32).
            user_masks: AtomicU64,
            /// The masks SDK components need (low | high << 32).
            component_masks: AtomicU64,
            /// Whether the runtime still takes calls, and the calls in
            /// flight (see [`gate`]).
            gate: gate::Gate,
            /// Reasons the runtime may call into this library after a
            /// detach (see [`RuntimeHandle::pin_library`]).
            library_pins: AtomicUsize,
            /// `false` while a runtime that loaded the profiler at startup
            /// has not yet initialized its GC heap: until the profiler's
            /// `Initialize` returned (the runtime initializes the GC after
            /// it, ceemain.cpp `EEStartupHelper`). Always `true` by attach.
            gc_heap_initialized: AtomicBool,
        }

        impl RuntimeHandle {
            /// Wraps the `IUnknown` the runtime passed to `Initialize` /
            /// `InitializeForAttach`, querying every Info version it offers.
            ///
            /// The handle returned is the one the SDK lends inside the
            /// runtime's callbacks: its calls are not counted by the gate
            /// (see [`RuntimeHandle`]). Every clone of it is counted.
            ///
            /// # Safety
            /// `unknown` must be the runtime's profiler-info object (the
            /// argument of `ICorProfilerCallback::Initialize`), and the
            /// returned handle itself (not its clones) must only be used
            /// inside callbacks that runtime issues, before
            /// the SDK retires the runtime (at the end of `Shutdown`,
            /// `ProfilerDetachSucceeded`, a failed `Initialize`, or in the
            /// runtime's last `Release`).
            pub unsafe fn from_unknown(unknown: &IUnknown, attached: bool) -> Result<Self> {
                let info1: sys::ICorProfilerInfo = unknown
                    .cast()
                    .map_err(|e| Error::runtime(e.code(), "QueryInterface(ICorProfilerInfo)"))?;
                let mut version = 1u8;
                $(
                    let $field: Option<sys::$iface> = unknown.cast().ok();
                    if $field.is_some() {
                        version = version.max($n);
                    }
                )*
                Ok(RuntimeHandle {
                    inner: Arc::new(Interfaces {
                        info1: ManuallyDrop::new(info1),
                        $($field: ManuallyDrop::new($field),)*
                        version,
                        attached,
                        slot: crate::runtimes::RuntimeSlot(u32::MAX),
                        user_masks: AtomicU64::new(0),
                        component_masks: AtomicU64::new(0),
                        gate: gate::Gate::new(),
                        library_pins: AtomicUsize::new(0),
                        gc_heap_initialized: AtomicBool::new(attached),
                    }),
                    in_callback: true,
                })
            }
        }

        impl RuntimeHandle {
            fn raw_info_present(&self, version: u8) -> bool {
                match version {
                    $($n => self.inner.$field.is_some(),)*
                    _ => false,
                }
            }
        }

        paste::paste! {
            impl RuntimeHandle {
                $(
                    #[doc = concat!("The `", stringify!($iface), "` for one call, through the gate: `Unsupported` on an older runtime, [`Error::Detached`] once the runtime retired the profiler.")]
                    #[inline]
                    pub(crate) fn [<raw_ $field>](&self, call: &'static str) -> Result<Live<'_, sys::$iface>> {
                        let iface = (*self.inner.$field).as_ref().ok_or(Error::Unsupported { needs: $n, has: self.inner.version, call })?;
                        self.live(iface, call)
                    }

                    #[doc = concat!("The raw `", stringify!($iface), "` for calls the SDK does not wrap, through the gate (see [`com_info1`](Self::com_info1)).")]
                    ///
                    /// # Safety
                    /// Keep no copy of the interface (a clone, a raw pointer)
                    /// beyond the returned guard: the runtime deletes the
                    /// object when it detaches the profiler, whatever
                    /// references remain, and a kept copy's `Release` or
                    /// calls would then reach freed memory.
                    #[inline]
                    pub unsafe fn [<com_ $field>](&self, call: &'static str) -> Result<Live<'_, sys::$iface>> {
                        self.[<raw_ $field>](call)
                    }
                )*
            }
        }
    };
}

info_versions! {
    info2: ICorProfilerInfo2 = 2;
    info3: ICorProfilerInfo3 = 3;
    info4: ICorProfilerInfo4 = 4;
    info5: ICorProfilerInfo5 = 5;
    info6: ICorProfilerInfo6 = 6;
    info7: ICorProfilerInfo7 = 7;
    info8: ICorProfilerInfo8 = 8;
    info9: ICorProfilerInfo9 = 9;
    info10: ICorProfilerInfo10 = 10;
    info11: ICorProfilerInfo11 = 11;
    info12: ICorProfilerInfo12 = 12;
    info13: ICorProfilerInfo13 = 13;
    info14: ICorProfilerInfo14 = 14;
    info15: ICorProfilerInfo15 = 15;
}

/// One runtime's profiling services, owned: what a profiler keeps beyond a
/// callback (in its struct, a `static`, another thread).
///
/// A `RuntimeHandle` is `Clone + Send + Sync + 'static`, and so it offers
/// nothing that takes or yields a typed ID: an ID is only proven valid inside
/// a scope the runtime guarantees, which is what a [`ProfilerInfo`] stands
/// for. Everything here is valid at any time after `Initialize`: the
/// runtime's identity and version, the event mask, `ForceGC`, detach, and
/// enumerations and IP lookups, which answer raw IDs (the runtime may unload
/// what they list while the caller looks at it).
///
/// # After the runtime is done with the profiler
///
/// Once the runtime shut down (`Shutdown`), detached the profiler
/// (`ProfilerDetachSucceeded`), or released it after `Initialize` failed or
/// declined, every call through any clone answers [`Error::Detached`] and
/// makes no call: on detach and after a failed `Initialize` the runtime
/// deletes its Info object whatever references remain
/// (`EEToProfInterfaceImpl`'s destructor, eetoprofinterfaceimpl.cpp), and
/// after `Shutdown` the profiling API forbids Info calls. Calls already
/// running then finish before the runtime is told the profiler is done
/// (see [`is_live`](Self::is_live)). Dropping the last clone calls nothing:
/// the SDK holds no reference the runtime counts (its `AddRef`/`Release`
/// are no-ops). The library is kept loaded from `Initialize` on, so a
/// thread still holding a handle keeps running its code.
///
/// Cloning is one atomic increment; a call through a clone passes a gate
/// of one uncontended atomic increment and decrement (calls through the
/// `&ProfilerInfo` of a callback pay one relaxed load).
pub struct RuntimeHandle {
    inner: Arc<Interfaces>,
    /// `true` only for the SDK's own handle, lent inside callbacks the
    /// runtime issues, whose calls the gate does not count.
    in_callback: bool,
}

impl Clone for RuntimeHandle {
    /// A counted handle: a clone may be kept beyond any callback.
    fn clone(&self) -> Self {
        RuntimeHandle {
            inner: self.inner.clone(),
            in_callback: false,
        }
    }
}

/// See [`RuntimeHandle::hold_live`].
pub(crate) struct LiveHold {
    inner: Arc<Interfaces>,
    stripe: usize,
}

impl LiveHold {
    /// The Info10 interface, for the call that ends the held state
    /// (`ICorProfilerInfo10::ResumeRuntime`): not refused once the runtime started retiring,
    /// since the retiring callback has not returned (it waits for this
    /// hold), so the runtime's object still exists and the call is made
    /// before the runtime is told the profiler is done.
    pub(crate) fn info10(&self, call: &'static str) -> Result<&sys::ICorProfilerInfo10> {
        (*self.inner.info10).as_ref().ok_or(Error::Unsupported {
            needs: 10,
            has: self.inner.version,
            call,
        })
    }
}

impl Drop for LiveHold {
    fn drop(&mut self) {
        self.inner.gate.leave(self.stripe);
    }
}

/// One `ICorProfilerInfoN` interface, for the call it covers: the runtime
/// cannot retire the profiler (and delete the object) while it lives.
/// Dereferences to the interface.
pub struct Live<'a, I> {
    iface: &'a I,
    _entry: gate::Entry<'a>,
}

impl<I> core::ops::Deref for Live<'_, I> {
    type Target = I;
    #[inline]
    fn deref(&self) -> &I {
        self.iface
    }
}

// SAFETY: [free-threaded] the ICorProfilerInfo* interfaces are free-threaded: corprof.idl and
// the BOTR document them as callable from any thread after Initialize (each
// method's own restrictions are reported as HRESULTs, not as memory
// unsafety), and COM reference counting on them is thread-safe.
unsafe impl Send for RuntimeHandle {}
// SAFETY: [free-threaded] shared use only calls Info methods, which corprof.idl allows from
// any thread concurrently, and reads or updates the handle's own state
// through atomics.
unsafe impl Sync for RuntimeHandle {}

/// The runtime's profiling services inside a scope the runtime guarantees:
/// the `&ProfilerInfo` every callback receives, the one an ELT mapper
/// receives, and the one a [`RuntimeSuspension`](crate::stackwalk::RuntimeSuspension)
/// lends.
///
/// Typed IDs come from here and go back here. A `ProfilerInfo` cannot be
/// kept (it borrows the scope `'s`), sent to another thread or cloned into a
/// `static`; to keep the runtime, keep [`ProfilerInfo::handle`]. Only the
/// SDK makes one, for the runtime whose callback it is dispatching, so IDs of
/// one runtime never meet another runtime's scope: the scopes of two
/// runtimes are never open on one thread at once (callbacks of different
/// runtimes do not nest, and a runtime suspension needs the exclusive borrow
/// of an SDK thread's [`SamplingThread`](crate::stackwalk::SamplingThread)).
///
/// Dereferences to [`RuntimeHandle`] for everything that needs no scope.
pub struct ProfilerInfo<'s> {
    runtime: &'s RuntimeHandle,
    scope: Scope,
    /// `!Send + !Sync`: "the current thread" and "no GC now" are facts
    /// about the thread that received the scope.
    _thread: PhantomData<*const ()>,
}

/// What the SDK knows about the scope it lends a [`ProfilerInfo`] for.
#[derive(Clone, Copy)]
pub(crate) enum Scope {
    /// A callback during which a garbage collection may run on another
    /// thread (most callbacks: the thread is in preemptive mode).
    Callback,
    /// A callback or hook that receives `ObjectID`s (so no GC relocates
    /// objects until it returns: the runtime hands out object references
    /// only from cooperative mode or from inside the GC), or a runtime
    /// suspension made by the profiler.
    NoGc,
    /// `MovedReferences(2)` / `SurvivingReferences(2)`: the GC thread is in
    /// the middle of planning and relocating, so no `ObjectID` names a
    /// readable object (corprof.idl, MovedReferences: the IDs are not valid
    /// during the callback; an object's end may hold GC bookkeeping). No
    /// GC is blocked here, and no object may be read.
    GcRelocating,
    /// `Initialize` / `InitializeForAttach`: SDK components may register
    /// (through the registrar the SDK sets for the call, see
    /// [`crate::component`]).
    Initialize,
    /// A callback the runtime issues while it is suspended, or while the
    /// thread that is suspending it holds the thread store
    /// (`GarbageCollectionStarted` / `Finished`, the `RuntimeSuspend*`,
    /// `RuntimeResume*` and `RuntimeThread*` callbacks): the suspension
    /// waits for this callback, so no other suspension can start until it
    /// returns. Otherwise as [`Scope::Callback`].
    Suspended,
    /// `ModuleLoadFinished` of this (successfully loaded) module, on the
    /// thread that loaded it. Otherwise as [`Scope::Callback`].
    ModuleLoad(crate::ids::RawModuleId),
    /// A callback the runtime issues in cooperative mode that receives no
    /// `ObjectID` the SDK treats as readable: the callbacks of an
    /// exception's unwind phase (`ExceptionUnwindFunctionEnter`/`Leave`,
    /// `ExceptionUnwindFinallyEnter`/`Leave`, `ExceptionCatcherLeave`), and
    /// `HandleCreated` / `HandleDestroyed` (a handle made or freed by managed
    /// code). Measured by the fresh review of issue 42
    /// (tests/runtime/review42_fresh.rs): a runtime suspension made while one
    /// of them waited did not complete on .NET 8, 10 and 11 (on 8.0
    /// `ExceptionUnwindFunctionEnter` let it complete, and `HandleCreated` of
    /// an empty handle runs in preemptive mode). So nothing here may wait for
    /// a suspension; and, as a GC may still run in some of them, no object
    /// may be read. Otherwise as [`Scope::Callback`].
    Cooperative,
}

impl<'s> ProfilerInfo<'s> {
    /// Lends the runtime for one scope. Only the SDK's dispatch (callbacks,
    /// ELT mapper and hooks, runtime suspensions) calls this, always for the
    /// runtime that opened the scope.
    pub(crate) fn scoped(runtime: &'s RuntimeHandle, scope: Scope) -> Self {
        ProfilerInfo {
            runtime,
            scope,
            _thread: PhantomData,
        }
    }

    /// Lends `runtime` for a callback scope on a thread of the SDK's own:
    /// what the SDK's companion crates use on the threads they start
    /// (`clrprof-instrumentation`'s class-name thread). Not a public API.
    ///
    /// # Safety
    /// The calling thread was started with [`crate::thread::spawn`] by SDK
    /// code and has no other scope open for its whole use of the returned
    /// value; every ID passed through it is one whose validity the caller
    /// proves itself (as the SDK's own threads do).
    #[doc(hidden)]
    pub unsafe fn sdk_thread_scope(runtime: &'s RuntimeHandle) -> Self {
        Self::scoped(runtime, Scope::Callback)
    }

    /// An owned handle to this runtime, to keep beyond the scope.
    pub fn handle(&self) -> RuntimeHandle {
        self.runtime.clone()
    }

    /// `true` where the runtime cannot start a garbage collection until the
    /// scope ends: callbacks that receive `ObjectID`s, ELT hooks and
    /// runtime suspensions. Object references read from the heap are only
    /// handed out as typed [`ObjectId`]s in such scopes.
    pub fn gc_blocked(&self) -> bool {
        matches!(self.scope, Scope::NoGc)
    }

    /// `true` where no runtime suspension other than one this scope is part
    /// of can run until the scope ends: a runtime suspension the profiler
    /// made, a callback that receives `ObjectID`s (its thread is in
    /// cooperative mode, so a suspension cannot complete), a GC callback
    /// and the `RuntimeSuspend*` / `RuntimeResume*` / `RuntimeThread*`
    /// callbacks (the suspension in progress waits for them).
    pub(crate) fn suspensions_excluded(&self) -> bool {
        matches!(
            self.scope,
            Scope::NoGc | Scope::Suspended | Scope::GcRelocating
        )
    }

    /// `true` in the `Initialize` / `InitializeForAttach` scope.
    pub(crate) fn in_initialize(&self) -> bool {
        matches!(self.scope, Scope::Initialize)
    }

    /// `true` in the `ModuleLoadFinished` callback of `module`, on the
    /// thread that loaded it.
    // provenance: none: the module ID is only compared with the scope's, never handed to the runtime
    pub fn in_load_of(&self, module: crate::ids::RawModuleId) -> bool {
        matches!(self.scope, Scope::ModuleLoad(m) if m == module)
    }

    /// Why this thread must not wait here for another thread that calls
    /// into the runtime for something that suspends it or may start a
    /// garbage collection (`RequestReJIT`, `RequestRevert`): `None` where it
    /// may. A runtime suspension (a collection is one) waits until every
    /// thread in cooperative mode reaches a safe point, and only one
    /// suspension runs at a time; the runtime's rule is to call
    /// `RequestReJIT` from a thread of the profiler's own, never from a
    /// callback thread the runtime waits for (corprof.idl and the
    /// `ICorProfilerInfo4::RequestReJIT` remarks).
    #[inline]
    pub(crate) fn wait_would_deadlock(&self) -> Option<&'static str> {
        match self.scope {
            Scope::NoGc => Some(
                "this scope blocks garbage collections and runtime suspensions until it returns \
                 (a callback that receives ObjectIDs runs in cooperative mode; a runtime \
                 suspension is one), and the request suspends the runtime or may start a \
                 collection, which would wait for this thread",
            ),
            Scope::GcRelocating | Scope::Suspended => Some(
                "the runtime is suspended (a garbage collection or another suspension) until this \
                 callback returns, and the request needs a suspension of its own, which waits \
                 for this one to end",
            ),
            Scope::Cooperative => Some(
                "the runtime issues this callback in cooperative mode (the unwind phase of an \
                 exception, a GC handle's creation or destruction: a suspension made while one \
                 waited did not complete on .NET 8, 10 and 11), so a suspension of the runtime \
                 waits for it to return, and the request suspends the runtime or may start a \
                 collection, which would wait for this thread",
            ),
            Scope::Callback | Scope::Initialize | Scope::ModuleLoad(_) => None,
        }
    }

    /// Fails with [`Error::GcMayRun`] unless [`gc_blocked`](Self::gc_blocked).
    pub(crate) fn require_gc_blocked(&self, call: &'static str) -> Result<()> {
        if self.gc_blocked() {
            Ok(())
        } else {
            Err(Error::GcMayRun { call })
        }
    }

    /// Refuses, in a scope that blocks collections, a call that may load
    /// types: loading allocates and may switch the thread to preemptive
    /// mode, so a garbage collection can start during the call (the runtime
    /// allows such calls from `ObjectAllocated`, `ExceptionThrown` and
    /// `FinalizeableObjectQueued`, which run in cooperative mode) and move
    /// every object whose typed [`ObjectId`](crate::ObjectId) the scope
    /// still holds.
    ///
    /// Also refuses, on .NET 9, a type load made while an assembly's load
    /// is under way on this thread (see [`AssemblyLoading`]).
    pub(crate) fn require_no_type_load(&self, call: &'static str) -> Result<()> {
        if self.gc_blocked() {
            return Err(Error::Usage(format!(
                "{call} may load types, and a type load can start a garbage collection that \
                 moves the objects this scope holds (a callback that receives ObjectIDs, an ELT \
                 hook or a runtime suspension); call it from a callback that receives none"
            )));
        }
        if AssemblyLoading::on_this_thread() {
            if let Some(refusal) = self.refuse_type_load_during_assembly_load(call) {
                return Err(refusal);
            }
        }
        Ok(())
    }

    /// The refusal of a type load inside an assembly's load on .NET 9
    /// (`None` on every other runtime).
    ///
    /// .NET 9's loader resolves an assembly reference of a module through
    /// the referencing assembly's `DomainAssembly`, which it looks up with
    /// `AppDomain::FindAssembly` and dereferences without a check; the look-up
    /// answers null until that assembly's load reaches `FILE_LOADED`. Every
    /// load callback of an assembly comes before that level (measured on
    /// 9.0.23: level 2 of the 5 `FindAssembly` requires, in
    /// `ModuleLoadFinished`, `ModuleAttachedToAssembly` and
    /// `AssemblyLoadFinished`), and loading any type of the assembly
    /// resolves its base type through such a reference (`System.Object` is
    /// in another assembly), so `GetClassFromToken` there ended in a SIGSEGV
    /// inside the runtime (tests/runtime/scopes.rs, both apps; the torture
    /// profiler on every app). .NET 8.0.34 and 10.0.15 answer the same
    /// calls (the first loads the referenced assembly, nested). A load of
    /// another assembly's type can reach the loading one as well (a type
    /// whose base type is in it), so every type load is refused there.
    fn refuse_type_load_during_assembly_load(&self, call: &'static str) -> Option<Error> {
        let runtime = self.runtime_information().ok()?;
        if runtime.runtime_type != RuntimeType::CoreClr || runtime.major != 9 {
            return None;
        }
        Some(Error::RuntimeVersion {
            hr: HRESULT(crate::error::KnownHresult::CORPROF_E_DATAINCOMPLETE as i32),
            call,
            called: false,
            why: "on .NET 9 a type load from inside an assembly's load (its AssemblyLoad*, \
                  ModuleLoad* and ModuleAttachedToAssembly callbacks, or a module CatchUp \
                  enumerated) can resolve an assembly reference of that assembly before its \
                  load completes, which 9.0's loader dereferences as null (SIGSEGV on 9.0.23); \
                  .NET 8 and 10 answer. Load the type later, e.g. from the assembly's first \
                  ClassLoadFinished or JITCompilationStarted"
                .into(),
        })
    }

    /// Fails with [`Error::GcMayRun`] inside `MovedReferences(2)` /
    /// `SurvivingReferences(2)`, where the GC is relocating objects and no
    /// object may be read or handed to the runtime as an `ObjectID`. Every
    /// reader that takes an [`ObjectId`](crate::ObjectId) checks this first
    /// (a frozen object, the only kind a safe caller can hold there, can
    /// refer to objects of the GC heap that are being moved).
    pub(crate) fn require_objects_readable(&self, call: &'static str) -> Result<()> {
        if matches!(self.scope, Scope::GcRelocating) {
            Err(Error::GcMayRun { call })
        } else {
            Ok(())
        }
    }
}

thread_local! {
    // reentrancy: assembly-loading
    /// How many assembly-load scopes are open on this thread (see
    /// [`AssemblyLoading`]).
    static ASSEMBLY_LOADING: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// Marks the current thread, while it lives, as one where an assembly's
/// load is under way and the profiler runs in the middle of it: the SDK
/// opens one around `AssemblyLoadStarted`, `AssemblyLoadFinished`,
/// `ModuleLoadStarted`, `ModuleLoadFinished` and `ModuleAttachedToAssembly`
/// (everything they dispatch, nested callbacks included), and around a
/// module [`CatchUp`](crate::attach::CatchUp) hands out from its
/// enumeration (`EnumModules` also lists modules whose load is under way on
/// another thread). On .NET 9 no type may be loaded there
/// ([`ProfilerInfo::require_no_type_load`]).
pub(crate) struct AssemblyLoading(());

impl AssemblyLoading {
    /// Opens the scope on this thread.
    pub(crate) fn enter() -> Self {
        let _ = ASSEMBLY_LOADING.try_with(|d| d.set(d.get().saturating_add(1)));
        AssemblyLoading(())
    }

    /// `true` while a scope is open on this thread. A thread whose
    /// thread-locals are gone (it is exiting) counts as inside one.
    pub(crate) fn on_this_thread() -> bool {
        ASSEMBLY_LOADING.try_with(|d| d.get() > 0).unwrap_or(true)
    }
}

impl Drop for AssemblyLoading {
    fn drop(&mut self) {
        let _ = ASSEMBLY_LOADING.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

impl core::ops::Deref for ProfilerInfo<'_> {
    type Target = RuntimeHandle;
    fn deref(&self) -> &RuntimeHandle {
        self.runtime
    }
}

fn pack(m: EventMasks) -> u64 {
    u64::from(m.low.bits()) | (u64::from(m.high.bits()) << 32)
}

#[inline]
fn unpack(v: u64) -> EventMasks {
    EventMasks {
        low: EventMask::from_bits_retain(v as u32),
        high: HighEventMask::from_bits_retain((v >> 32) as u32),
    }
}

/// `GetFunctionInfo`: where a function lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionInfo<'a> {
    /// Its class (null for some generic instantiations; use `function_info2`).
    pub class: ClassId<'a>,
    /// Its module.
    pub module: ModuleId<'a>,
    /// Its method definition token.
    pub token: MdMethodDef,
}

/// `GetModuleInfo`: a module's file name, load address and assembly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo<'a> {
    /// Base load address (0 for dynamic modules).
    pub base_load_address: usize,
    /// File name (path) of the module; empty for dynamic modules.
    pub name: String,
    /// The assembly it belongs to.
    pub assembly: AssemblyId<'a>,
}

/// `GetClassIDInfo2`: a class's definition, parent and type arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassInfo<'a> {
    /// Its module.
    pub module: ModuleId<'a>,
    /// Its type definition token.
    pub type_def: MdTypeDef,
    /// Its parent class (null for `System.Object` and interfaces).
    pub parent: ClassId<'a>,
    /// Type arguments of a generic instantiation, in order.
    pub type_args: Vec<ClassId<'a>>,
}

/// A frame handle (`COR_PRF_FRAME_INFO`) the SDK lent for a hook call or a
/// stack-walk frame: [`crate::elt::FrameInfo`] and
/// [`crate::stackwalk::SnapshotFrameInfo`]. Sealed: only those carry a
/// handle the runtime made.
pub trait FrameHandle: sealed::Sealed {
    /// The raw handle.
    fn raw_frame(&self) -> sys::COR_PRF_FRAME_INFO;
}

pub(crate) mod sealed {
    /// Only SDK frame types implement [`super::FrameHandle`].
    pub trait Sealed {}
}

/// Open flags for metadata (`CorOpenFlags`): read or read/write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaDataOpen {
    /// `ofRead`.
    Read,
    /// `ofRead | ofWrite` (needed to emit new tokens for IL rewriting).
    ReadWrite,
}

impl RuntimeHandle {
    /// The highest `ICorProfilerInfoN` version the runtime offers.
    pub fn version(&self) -> u8 {
        self.inner.version
    }

    /// The registry slot of this runtime (see [`crate::runtimes`]).
    pub fn runtime_slot(&self) -> crate::runtimes::RuntimeSlot {
        self.inner.slot
    }

    /// Records the registry slot; only while the handle is not shared yet
    /// (right after [`from_unknown`](Self::from_unknown)).
    pub(crate) fn with_slot(mut self, slot: crate::runtimes::RuntimeSlot) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.slot = slot;
        }
        self
    }

    /// Tags a raw ID (or any value) with this runtime, for storage across
    /// callbacks in a profiler that sees several runtimes.
    pub fn tag<T>(&self, value: T) -> crate::runtimes::RuntimeTagged<T> {
        crate::runtimes::RuntimeTagged {
            slot: self.inner.slot,
            value,
        }
    }

    // provenance: id-runtime
    /// Gives back a tagged value only if it was tagged by this runtime, so an
    /// ID from one runtime cannot reach another runtime's Info methods.
    pub fn untag<T>(&self, tagged: crate::runtimes::RuntimeTagged<T>) -> Option<T> {
        (tagged.slot == self.inner.slot).then_some(tagged.value)
    }

    /// `true` if the profiler was loaded by attach (`InitializeForAttach`).
    pub fn is_attached(&self) -> bool {
        self.inner.attached
    }

    /// Records whether the runtime's GC heap is initialized: set when the
    /// `Initialize` of a profiler loaded at startup returned, as the runtime
    /// initializes its GC heap next, before it issues any further callback
    /// or runs managed code.
    pub(crate) fn set_gc_heap_initialized(&self, initialized: bool) {
        self.inner
            .gc_heap_initialized
            .store(initialized, Ordering::Release);
    }

    /// `false` while the runtime's GC heap is not initialized yet (during
    /// the `Initialize` of a profiler loaded at startup).
    pub(crate) fn gc_heap_initialized(&self) -> bool {
        self.inner.gc_heap_initialized.load(Ordering::Acquire)
    }

    /// `true` if `other` is a handle of the same runtime (the object the
    /// SDK made for it at `Initialize`), so values made for one runtime
    /// (a [`GcHandle`](crate::handles::GcHandle), an EventPipe session) are
    /// never handed to another.
    pub fn same_runtime(&self, other: &RuntimeHandle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Passes the gate for one call through `iface` (see [`gate`]).
    #[inline]
    fn live<'a, I>(&'a self, iface: &'a I, call: &'static str) -> Result<Live<'a, I>> {
        let entry = if self.in_callback {
            self.inner.gate.enter_in_callback()
        } else {
            self.inner.gate.enter()
        };
        match entry {
            Some(entry) => Ok(Live {
                iface,
                _entry: entry,
            }),
            None => Err(Error::Detached { call }),
        }
    }

    /// Runs `f` (a call into the runtime) only while the runtime still
    /// takes calls: `None` once it has shut down or retired this profiler.
    /// The runtime cannot be retired until `f` returned.
    ///
    /// For calls nothing but a `Drop` makes (`DestroyHandle` of a
    /// [`GcHandle`](crate::handles::GcHandle), `EventPipeStopSession` of a
    /// session), which pass the runtime a handle of its own: a value
    /// dropped after the runtime retired (with the profiler, in the
    /// runtime's last `Release`) makes no call at all. Calls nest (an
    /// EventPipe event delivered inside a stop that drops a handle).
    pub(crate) fn while_live<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _entry = self.inner.gate.enter()?;
        Some(f())
    }

    /// [`while_live`](Self::while_live) for a call that returns a
    /// `Result`: once the runtime retired, [`Error::Detached`] instead of
    /// the call.
    pub(crate) fn call_live<T>(
        &self,
        call: &'static str,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        self.while_live(f).unwrap_or(Err(Error::Detached { call }))
    }

    /// Marks the runtime as no longer taking calls from this profiler, and
    /// waits for the calls already running through any handle: at the end
    /// of `Shutdown`, of `ProfilerDetachSucceeded`, of an `Initialize` that
    /// failed or declined, and when the runtime releases the profiler (its
    /// `EEToProfInterfaceImpl` destructor releases the callback object
    /// before it deletes the Info object). Only the SDK calls this, from
    /// those callbacks, never inside a call through the gate.
    pub(crate) fn retire(&self) {
        self.inner.gate.retire();
    }

    /// Keeps the runtime from being retired until the returned value is
    /// dropped, for a state that spans several calls and must end with one
    /// (a runtime suspension, which only `ResumeRuntime` ends):
    /// [`Error::Detached`] once the runtime retired the profiler. The
    /// retiring callback waits for it, so hold it only across work that
    /// never waits for a runtime callback to return.
    pub(crate) fn hold_live(&self, call: &'static str) -> Result<LiveHold> {
        match self.inner.gate.enter_held() {
            Some(stripe) => Ok(LiveHold {
                inner: self.inner.clone(),
                stripe,
            }),
            None => Err(Error::Detached { call }),
        }
    }

    /// Records that the runtime now holds an address in this library it
    /// may call later (an EventPipe provider callback, a running session
    /// delivering to the profiler): [`request_profiler_detach`](Self::request_profiler_detach)
    /// refuses until every pin is released.
    pub(crate) fn pin_library(&self) {
        self.inner.library_pins.fetch_add(1, Ordering::SeqCst);
    }

    /// Releases one [`pin_library`](Self::pin_library).
    pub(crate) fn unpin_library(&self) {
        self.inner.library_pins.fetch_sub(1, Ordering::SeqCst);
    }

    /// `false` once the runtime stopped taking calls from this profiler: at
    /// the end of `Shutdown` (after which the runtime forbids Info calls),
    /// of `ProfilerDetachSucceeded`, when `Initialize` failed or declined,
    /// or when the runtime released the profiler. From then on every call
    /// through any handle answers [`Error::Detached`], and values that call
    /// the runtime when dropped ([`GcHandle`](crate::handles::GcHandle), an
    /// EventPipe [`Session`](crate::eventpipe::Session)) make no call.
    pub fn is_live(&self) -> bool {
        self.inner.gate.is_live()
    }

    /// `true` if the runtime implements `ICorProfilerInfo{version}` (it
    /// answered QueryInterface for it at `Initialize`).
    pub fn has_info(&self, version: u8) -> bool {
        match version {
            1 => true,
            2..=15 => self.raw_info_present(version),
            _ => false,
        }
    }

    /// The `ICorProfilerInfo` for one call, through the gate: [`Error::Detached`]
    /// once the runtime retired the profiler.
    #[inline]
    pub(crate) fn raw_info1(&self) -> Result<Live<'_, sys::ICorProfilerInfo>> {
        self.live(&*self.inner.info1, "ICorProfilerInfo")
    }

    /// The raw `ICorProfilerInfo` for calls the SDK does not wrap, through
    /// the gate: [`Error::Detached`] once the runtime retired the profiler.
    ///
    /// # Safety
    /// Keep no copy of the interface (a clone, a raw pointer) beyond the
    /// returned guard: the runtime deletes the object when it detaches the
    /// profiler, whatever references remain, and a kept copy's `Release` or
    /// calls would then reach freed memory.
    #[inline]
    pub unsafe fn com_info1(&self) -> Result<Live<'_, sys::ICorProfilerInfo>> {
        self.raw_info1()
    }

    /// `GetEventMask` (and `GetEventMask2` when the runtime has Info5).
    pub fn event_mask(&self) -> Result<EventMasks> {
        if let Ok(i5) = self.raw_info5("ICorProfilerInfo5::GetEventMask2") {
            let (mut lo, mut hi) = (0u32, 0u32);
            check(
                // SAFETY: [plain-call] valid out pointers; Info5 is present.
                unsafe { i5.GetEventMask2(&mut lo, &mut hi) },
                "ICorProfilerInfo5::GetEventMask2",
            )?;
            return Ok(EventMasks {
                low: EventMask::from_bits_retain(lo),
                high: HighEventMask::from_bits_retain(hi),
            });
        }
        let mut lo = 0u32;
        check(
            // SAFETY: [plain-call] valid out pointer.
            unsafe { self.raw_info1()?.GetEventMask(&mut lo) },
            "ICorProfilerInfo::GetEventMask",
        )?;
        Ok(EventMasks {
            low: EventMask::from_bits_retain(lo),
            high: HighEventMask::empty(),
        })
    }

    /// `SetEventMask` / `SetEventMask2`. A non-empty high mask needs Info5.
    ///
    /// These are the masks of the profiler itself: the SDK adds those of
    /// its registered components ([`crate::component`]) before it calls
    /// the runtime, and delivers a callback that only a component asked for
    /// to that component alone, so what the profiler's own callbacks see
    /// follows this mask.
    ///
    /// Outside `Initialize`, changing an immutable flag
    /// ([`EventMask::IMMUTABLE`], [`HighEventMask::IMMUTABLE`]) is refused by
    /// the runtime with a plain `E_FAIL` (it has no dedicated code for it;
    /// seen on .NET Core 3.1.23 and .NET 8.0.4); asking a profiler loaded by
    /// attach for a flag outside `COR_PRF_ALLOWABLE_AFTER_ATTACH` is refused
    /// with `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`. Both come back as
    /// [`Error::Runtime`] with that code and its explanation, except where
    /// the rule depends on the runtime version ([`MaskRules`]: before .NET
    /// 10, `DISABLE_INLINING` and `DISABLE_OPTIMIZATIONS` are immutable and
    /// refused after attach): those come back as [`Error::RuntimeVersion`]
    /// naming the versions, an attached profiler's before the runtime is
    /// called.
    pub fn set_event_mask(&self, masks: EventMasks) -> Result<()> {
        let components = unpack(self.inner.component_masks.load(Ordering::SeqCst));
        self.set_runtime_mask(EventMasks {
            low: masks.low | components.low,
            high: masks.high | components.high,
        })?;
        self.inner.user_masks.store(pack(masks), Ordering::SeqCst);
        Ok(())
    }

    /// The masks the profiler asked for (without its components'). Read on
    /// every callback a component may also have asked for: inlined into
    /// the callback object, which is compiled in the profiler's crate.
    #[inline]
    pub(crate) fn user_masks(&self) -> EventMasks {
        unpack(self.inner.user_masks.load(Ordering::Relaxed))
    }

    /// Records the components' masks (at the end of `Initialize`), then sets
    /// the union with the profiler's `masks`.
    pub(crate) fn set_masks_with_components(
        &self,
        masks: EventMasks,
        components: EventMasks,
    ) -> Result<()> {
        self.inner
            .component_masks
            .store(pack(components), Ordering::SeqCst);
        self.set_event_mask(masks)
    }

    fn set_runtime_mask(&self, masks: EventMasks) -> Result<()> {
        let call = if masks.high.is_empty() {
            "ICorProfilerInfo::SetEventMask"
        } else {
            "ICorProfilerInfo5::SetEventMask2"
        };
        // The flags whose rules changed in .NET 10 (event_mask::MaskRules).
        let version_dependent = !(masks.low & EventMask::MUTABLE_SINCE_NET10).is_empty();
        let rules = || {
            self.runtime_information()
                .map(|i| MaskRules::for_runtime(&i))
                .unwrap_or(MaskRules::BEFORE_NET10)
        };
        if version_dependent && self.inner.attached {
            if let Some(refused) = rules().refuse_after_attach(masks.low, call) {
                return Err(refused);
            }
        }
        // The JIT count ends before the runtime takes a mask without the JIT
        // events (it compiles unseen from inside the call on), after the
        // claims in progress landed (`compilations`).
        let monitors_jit = masks.low.contains(EventMask::MONITOR_JIT_COMPILATION);
        let change = crate::compilations::mask_change(call, monitors_jit, self.inner.attached)?;
        let hr = if !masks.high.is_empty() {
            let i5 = self.raw_info5("ICorProfilerInfo5::SetEventMask2")?;
            // SAFETY: [plain-call] plain value arguments.
            unsafe { i5.SetEventMask2(masks.low.bits(), masks.high.bits()) }
        } else {
            // SAFETY: [plain-call] plain value argument.
            unsafe { self.raw_info1()?.SetEventMask(masks.low.bits()) }
        };
        if hr.is_err() {
            // A refused call changed nothing: the runtime's mask is still the old one.
            if let Ok(old) = self.event_mask() {
                if let Some(e) = rules().explain_immutable(hr, old.low, masks.low, call) {
                    return Err(e);
                }
            }
        }
        check(hr, call)?;
        // IL is replaced at JIT time only while the SDK has seen every
        // compilation (`compilations`).
        change.applied();
        Ok(())
    }

    /// `GetRuntimeInformation` (Info3).
    pub fn runtime_information(&self) -> Result<RuntimeInfo> {
        let i3 = self.raw_info3("ICorProfilerInfo3::GetRuntimeInformation")?;
        let (mut id, mut ty, mut major, mut minor, mut build, mut qfe) =
            (0u16, 0u32, 0u16, 0u16, 0u16, 0u16);
        let version_string = fill_string(
            "ICorProfilerInfo3::GetRuntimeInformation",
            |cap, needed, buf| {
                // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` writable WCHARs (buffer protocol); other
                // out pointers are valid locals.
                unsafe {
                    i3.GetRuntimeInformation(
                        &mut id, &mut ty, &mut major, &mut minor, &mut build, &mut qfe, cap,
                        needed, buf,
                    )
                }
            },
        )?;
        let runtime_type = match ty {
            sys::COR_PRF_DESKTOP_CLR => RuntimeType::Desktop,
            sys::COR_PRF_CORE_CLR => RuntimeType::CoreClr,
            o => RuntimeType::Unknown(o),
        };
        let product_version = if runtime_type == RuntimeType::CoreClr && major == 4 {
            crate::host::legacy_coreclr_product_version()
        } else {
            None
        };
        Ok(RuntimeInfo {
            clr_instance_id: id,
            runtime_type,
            major,
            minor,
            build,
            qfe,
            version_string,
            product_version,
        })
    }

    /// `GetCurrentThreadID`, raw: the calling thread's `ThreadID` as a
    /// number (a typed one comes from [`ProfilerInfo::current_thread_id`],
    /// inside a scope). Fails with `CORPROF_E_NOT_MANAGED_THREAD` on threads
    /// the runtime does not know, e.g. the profiler's own.
    pub fn current_thread(&self) -> Result<RawThreadId> {
        let mut t = 0usize;
        check(
            // SAFETY: [plain-call] valid out pointer; the runtime reports the caller's thread.
            unsafe { self.raw_info1()?.GetCurrentThreadID(&mut t) },
            "ICorProfilerInfo::GetCurrentThreadID",
        )?;
        Ok(RawThreadId(t))
    }

    /// `ForceGC` (Info2): must be called from a thread that is not running
    /// managed code and is not inside a callback, e.g. a thread the profiler created.
    ///
    /// Refused with [`Error::WouldDeadlock`] on a thread that holds a
    /// [`RuntimeSuspension`](crate::stackwalk::RuntimeSuspension) (through
    /// the suspension's own `info()` or any `RuntimeHandle`): the runtime's
    /// `ForceGC` makes the thread a managed one and switches it to
    /// cooperative mode, which waits for the suspension to end, and the
    /// suspension waits for this thread: every managed thread stayed stopped
    /// for ever (fourth review, route 7: .NET 8.0 and 10.0, the sampling
    /// thread blocked in libcoreclr, `tests/runtime/signals.rs`). Drop the
    /// suspension first.
    pub fn force_gc(&self) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo2::ForceGC";
        if crate::suspends::thread_holds_suspension() {
            return Err(Error::WouldDeadlock {
                call: CALL,
                why: "this thread holds a runtime suspension: a collection needs every managed \
                      thread, and the runtime's ForceGC waits for the suspension to end; drop the \
                      RuntimeSuspension first"
                    .into(),
            });
        }
        let i2 = self.raw_info2(CALL)?;
        // SAFETY: [plain-call] no arguments; the runtime checks the calling context.
        check(unsafe { i2.ForceGC() }, CALL).map(|_| ())
    }

    /// `RequestProfilerDetach` (Info3): ask the runtime to detach this
    /// profiler; `expected_completion_ms` is how long the profiler expects
    /// its threads to need to leave its code.
    ///
    /// The runtime unloads the library after `ProfilerDetachSucceeded` and
    /// waits only for threads inside callbacks, not for the profiler's own
    /// (profiling API docs, "Profiler Detach"). So this refuses with
    /// [`Error::ThreadsRunning`] while any thread started with
    /// [`crate::thread::spawn`] other than the caller still runs: every way
    /// of requesting a detach goes through this check. It refuses with
    /// [`Error::Refused`] once an EventPipe provider was created with a
    /// callback, or while an EventPipe session the profiler started runs
    /// (see [`crate::eventpipe`]). See [`crate::detach`] for the runtime's
    /// own refusals.
    pub fn request_profiler_detach(&self, expected_completion_ms: u32) -> Result<()> {
        crate::thread::ensure_no_other_threads()?;
        let pins = self.inner.library_pins.load(Ordering::SeqCst);
        if pins != 0 {
            return Err(Error::Refused {
                hr: HRESULT(crate::error::KnownHresult::CORPROF_E_UNSUPPORTED_CALL_SEQUENCE as i32),
                call: "ICorProfilerInfo3::RequestProfilerDetach",
                why: format!(
                    "the runtime would still call into this library after it unloads it: {pins} \
                     EventPipe provider callback(s) or running session(s) of this profiler \
                     (a provider callback lives as long as the runtime; stop sessions first)"
                ),
            });
        }
        let i3 = self.raw_info3("ICorProfilerInfo3::RequestProfilerDetach")?;
        check(
            // SAFETY: [plain-call] plain value argument.
            unsafe { i3.RequestProfilerDetach(expected_completion_ms) },
            "ICorProfilerInfo3::RequestProfilerDetach",
        )
        .map(|_| ())
    }
}

impl<'s> ProfilerInfo<'s> {
    /// `GetFunctionInfo`.
    pub fn function_info<'a>(&self, function: FunctionId<'a>) -> Result<FunctionInfo<'a>> {
        let (mut class, mut module, mut token) = (0usize, 0usize, 0u32);
        check(
            // SAFETY: [id-scope, plain-call] `function` is valid for 'a (typed ID); out pointers are locals.
            unsafe {
                self.raw_info1()?.GetFunctionInfo(
                    function.as_sys(),
                    &mut class,
                    &mut module,
                    &mut token,
                )
            },
            "ICorProfilerInfo::GetFunctionInfo",
        )?;
        // SAFETY: [id-derived] IDs returned for a valid function stay valid as long as it does.
        Ok(unsafe {
            FunctionInfo {
                class: ClassId::from_sys(class),
                module: ModuleId::from_sys(module),
                token: MdMethodDef(token),
            }
        })
    }

    /// `GetFunctionInfo2` without a frame: the class, module, token and the
    /// function's own type arguments (empty for non-generic methods, or when
    /// the runtime cannot tell without a frame).
    pub fn function_info2<'a>(
        &self,
        function: FunctionId<'a>,
    ) -> Result<(FunctionInfo<'a>, Vec<ClassId<'a>>)> {
        self.function_info2_raw(function, 0)
    }

    // provenance: frame-function
    /// `GetFunctionInfo2` in a frame: for code shared between generic
    /// instantiations, the frame tells which instantiation runs, so the
    /// class and type arguments are exact. `frame` comes from a WithInfo
    /// hook ([`crate::elt::FrameInfo`]) or a stack walk
    /// ([`crate::stackwalk::SnapshotFrameInfo`]), and is only valid during
    /// that hook or frame callback, which its borrow enforces.
    pub fn function_info2_in_frame<'a>(
        &self,
        function: FunctionId<'a>,
        frame: &impl FrameHandle,
    ) -> Result<(FunctionInfo<'a>, Vec<ClassId<'a>>)> {
        self.function_info2_raw(function, frame.raw_frame())
    }

    fn function_info2_raw<'a>(
        &self,
        function: FunctionId<'a>,
        frame: sys::COR_PRF_FRAME_INFO,
    ) -> Result<(FunctionInfo<'a>, Vec<ClassId<'a>>)> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetFunctionInfo2")?;
        let (mut class, mut module, mut token) = (0usize, 0usize, 0u32);
        let mut args: Vec<usize> = Vec::new();
        // Count first (capacity 0): with a buffer, the runtime reports how
        // many type arguments it wrote, not how many there are.
        fill::<usize, 0>(
            "ICorProfilerInfo2::GetFunctionInfo2",
            &mut args,
            |cap, needed, buf| {
                // SAFETY: [id-scope, buffer-protocol, elt-frame, stack-snapshot] `function` is valid (typed ID); `frame` is 0 or a
                // frame handle of the hook or walk callback still running
                // (FrameHandle borrows it); `buf` has `cap` slots.
                unsafe {
                    i2.GetFunctionInfo2(
                        function.as_sys(),
                        frame,
                        &mut class,
                        &mut module,
                        &mut token,
                        cap,
                        needed,
                        buf,
                    )
                }
            },
        )?;
        // SAFETY: [id-derived] the class, module and type arguments of a function live
        // at least as long as the function (BOTR: a FunctionID dies with its
        // class; its module and type arguments are loaded before it).
        let info = unsafe {
            FunctionInfo {
                class: ClassId::from_sys(class),
                module: ModuleId::from_sys(module),
                token: MdMethodDef(token),
            }
        };
        Ok((
            info,
            args.into_iter()
                // SAFETY: [id-derived] a function's type arguments are loaded before it
                // and unload no earlier (BOTR "Lifetime & Stability").
                .map(|c| unsafe { ClassId::from_sys(c) })
                .collect(),
        ))
    }

    /// `GetClassIDInfo2` (Info2): definition, parent and type arguments.
    pub fn class_info<'a>(&self, class: ClassId<'a>) -> Result<ClassInfo<'a>> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetClassIDInfo2")?;
        let (mut module, mut td, mut parent) = (0usize, 0u32, 0usize);
        let mut args: Vec<usize> = Vec::new();
        // Count first (capacity 0), as for GetFunctionInfo2.
        fill::<usize, 0>(
            "ICorProfilerInfo2::GetClassIDInfo2",
            &mut args,
            |cap, needed, buf| {
                // SAFETY: [id-scope, buffer-protocol] `class` is valid (typed ID); `buf` has `cap` slots.
                unsafe {
                    i2.GetClassIDInfo2(
                        class.as_sys(),
                        &mut module,
                        &mut td,
                        &mut parent,
                        cap,
                        needed,
                        buf,
                    )
                }
            },
        )?;
        // SAFETY: [id-derived] IDs returned for a loaded class are valid while it is.
        Ok(unsafe {
            ClassInfo {
                module: ModuleId::from_sys(module),
                type_def: MdTypeDef(td),
                parent: ClassId::from_sys(parent),
                type_args: args.into_iter().map(|c| ClassId::from_sys(c)).collect(),
            }
        })
    }

    /// `GetModuleInfo`.
    pub fn module_info<'a>(&self, module: ModuleId<'a>) -> Result<ModuleInfo<'a>> {
        let (mut base, mut assembly) = (core::ptr::null::<u8>(), 0usize);
        let i1 = self.raw_info1()?;
        let name = fill_string("ICorProfilerInfo::GetModuleInfo", |cap, needed, buf| {
            // SAFETY: [buffer-protocol, id-scope] `module` is valid; `buf` has `cap` WCHARs.
            unsafe { i1.GetModuleInfo(module.as_sys(), &mut base, cap, needed, buf, &mut assembly) }
        })?;
        Ok(ModuleInfo {
            base_load_address: base as usize,
            name,
            // SAFETY: [id-derived] the assembly of a loaded module is valid while the module is.
            assembly: unsafe { AssemblyId::from_sys(assembly) },
        })
    }

    /// `GetModuleMetaData`: the module's metadata import interface. It
    /// borrows the module (`'a`): the metadata reads the module's image,
    /// which a collectible module takes with it when it unloads.
    pub fn module_metadata<'a>(
        &self,
        module: ModuleId<'a>,
        open: MetaDataOpen,
    ) -> Result<MetaDataImport<'a>> {
        let flags = match open {
            MetaDataOpen::Read => sys::ofRead,
            MetaDataOpen::ReadWrite => sys::ofRead | sys::ofWrite,
        };
        let mut unk: Option<IUnknown> = None;
        check(
            // SAFETY: [id-scope, com-ownership] `module` is valid; the IID is IMetaDataImport's; `unk` receives an owned reference.
            unsafe {
                self.raw_info1()?.GetModuleMetaData(
                    module.as_sys(),
                    flags,
                    &sys::IMetaDataImport::IID,
                    &mut unk,
                )
            },
            "ICorProfilerInfo::GetModuleMetaData",
        )?;
        let unk = unk.ok_or(Error::runtime(
            HRESULT(crate::error::KnownHresult::E_NOINTERFACE as i32),
            "ICorProfilerInfo::GetModuleMetaData",
        ))?;
        // SAFETY: [id-scope, module-lifetime] the metadata of `module`, which is loaded for 'a (typed ID).
        unsafe { MetaDataImport::from_unknown(&unk) }
    }

    /// `GetTokenAndMetaDataFromFunction`: the function's metadata and token.
    pub fn token_and_metadata_from_function<'a>(
        &self,
        function: FunctionId<'a>,
    ) -> Result<(MetaDataImport<'a>, MdMethodDef)> {
        let mut unk: Option<IUnknown> = None;
        let mut token = 0u32;
        check(
            // SAFETY: [id-scope, com-ownership] `function` is valid; IID is IMetaDataImport's; out pointers are locals.
            unsafe {
                self.raw_info1()?.GetTokenAndMetaDataFromFunction(
                    function.as_sys(),
                    &sys::IMetaDataImport::IID,
                    &mut unk,
                    &mut token,
                )
            },
            "ICorProfilerInfo::GetTokenAndMetaDataFromFunction",
        )?;
        let unk = unk.ok_or(Error::runtime(
            HRESULT(crate::error::KnownHresult::E_NOINTERFACE as i32),
            "ICorProfilerInfo::GetTokenAndMetaDataFromFunction",
        ))?;
        // SAFETY: [id-derived, module-lifetime] the metadata of the function's module, which stays loaded
        // while the function is valid ('a, typed ID).
        let metadata = unsafe { MetaDataImport::from_unknown(&unk)? };
        Ok((metadata, MdMethodDef(token)))
    }

    /// `GetCurrentThreadID`: the managed thread running the caller, valid
    /// for this scope (the thread cannot be destroyed while it runs a
    /// callback). Fails with `CORPROF_E_NOT_MANAGED_THREAD` on threads the
    /// runtime does not know.
    pub fn current_thread_id(&self) -> Result<ThreadId<'s>> {
        let mut t = 0usize;
        check(
            // SAFETY: [plain-call] valid out pointer.
            unsafe { self.raw_info1()?.GetCurrentThreadID(&mut t) },
            "ICorProfilerInfo::GetCurrentThreadID",
        )?;
        // SAFETY: [id-scope] the calling thread is running this scope
        // (`ProfilerInfo` stays on its thread), and the runtime destroys a
        // Thread only once it stopped running managed code and callbacks, so
        // its ThreadID is valid at least as long as the scope.
        Ok(unsafe { ThreadId::from_sys(t) })
    }
}

#[cfg(test)]
mod tests {
    use crate::ids::ClassId;
    use crate::testing::fake::{FakeClass, FakeRuntime};

    #[test]
    fn class_info_returns_every_type_argument() {
        let fake = FakeRuntime::new();
        let args: Vec<usize> = (0..12).map(|i| 0x9000 + i * 8).collect();
        fake.state().classes.insert(
            0x5000,
            FakeClass {
                module: 0x2000,
                type_def: 0x0200_0004,
                type_args: args.clone(),
                ..Default::default()
            },
        );
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        // SAFETY: [test-fake] a class the fake knows; never passed to a real runtime.
        let class = unsafe { ClassId::from_sys(0x5000) };
        let got = info.class_info(class).expect("class info");
        assert_eq!(
            got.type_args.iter().map(|c| c.as_sys()).collect::<Vec<_>>(),
            args,
            "more than a stack buffer's worth"
        );
    }
}
