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

use crate::callback::{EventPipeEvent, Failed, Profiler, SuspendReason, TransitionReason};
use crate::component::{succeeded, Components, Registrar};
use crate::error::{KnownHresult, HRESULT};
use crate::gc::{GcRanges, GcReason, GenerationSet, RootReferences};
use crate::guard::guard;
use crate::ids::*;
use crate::info::{ProfilerInfo, RuntimeHandle, Scope};
use crate::rejit::{AssemblyReferenceProvider, FunctionControl};
use crate::runtimes::RuntimeSlot;
use crate::wide::WideStr;
use clrprof_sys as sys;
use clrprof_sys::*;
use core::ffi::c_void;
use core::mem::ManuallyDrop;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use windows_core::{implement, IUnknown, Interface};

const S_OK: HRESULT = HRESULT(0);

/// COM objects alive in this library, callback objects and class factories
/// (for `DllCanUnloadNow`). Counted up before an object exists and down
/// only after its last line of library code (the profiler's `Drop`
/// included) has run.
pub(crate) static LIVE_OBJECTS: AtomicUsize = AtomicUsize::new(0);

/// The callback object wrapping a user's profiler.
///
/// Implements `ICorProfilerCallback11`, whose vtable starts with those of
/// every earlier version, so QueryInterface answers all of them with it.
#[implement(ICorProfilerCallback11)]
pub struct CallbackObject<P: Profiler> {
    /// Dropped by hand in `Drop`, under the panic guard.
    profiler: ManuallyDrop<P>,
    info: OnceLock<RuntimeHandle>,
    /// SDK components registered during `Initialize`.
    components: OnceLock<Components>,
    slot: RuntimeSlot,
    /// Set once `Initialize(ForAttach)` succeeded: runs `Profiler::finish` once.
    finish: OnceLock<crate::exit::ProfilerFinish>,
    /// `RuntimeThreadSuspended` calls held until the suspension finished.
    held_suspends: crate::suspends::HeldThreadSuspends,
    /// Which EventPipe provider is the runtime's own (allocation events).
    runtime_provider: crate::allocations::RuntimeProvider,
}

impl<P: Profiler> CallbackObject<P> {
    /// Wraps a freshly constructed profiler value registered under `slot`.
    fn new(profiler: P, slot: RuntimeSlot) -> Self {
        LIVE_OBJECTS.fetch_add(1, Ordering::SeqCst);
        CallbackObject {
            profiler: ManuallyDrop::new(profiler),
            info: OnceLock::new(),
            components: OnceLock::new(),
            slot,
            finish: OnceLock::new(),
            held_suspends: crate::suspends::HeldThreadSuspends::new(),
            runtime_provider: crate::allocations::RuntimeProvider::default(),
        }
    }

    /// Creates the object and returns it as `IUnknown`.
    pub fn into_unknown(self) -> IUnknown {
        self.into()
    }

    /// Runs a callback in a [`Scope::Callback`] scope.
    #[inline]
    fn dispatch(
        &self,
        entry: &'static str,
        f: impl FnOnce(&P, &ProfilerInfo<'_>) -> HRESULT,
    ) -> HRESULT {
        self.dispatch_in(entry, Scope::Callback, f)
    }

    /// Runs a callback in a [`Scope::NoGc`] scope: one the runtime issues
    /// on a thread in cooperative mode (no GC can start until it returns)
    /// or on the thread doing a GC while nothing moves (a heap walk before
    /// the collection starts or after it finished). Every caller names the
    /// rule it relies on (`// SAFETY (no GC):` at the call).
    #[inline]
    fn dispatch_no_gc(
        &self,
        entry: &'static str,
        f: impl FnOnce(&P, &ProfilerInfo<'_>) -> HRESULT,
    ) -> HRESULT {
        self.dispatch_in(entry, Scope::NoGc, f)
    }

    /// Runs `MovedReferences2` / `SurvivingReferences2` in a
    /// [`Scope::GcRelocating`] scope: the GC is relocating, no object may
    /// be read and no collection is blocked.
    #[inline]
    fn dispatch_relocating(
        &self,
        entry: &'static str,
        f: impl FnOnce(&P, &ProfilerInfo<'_>) -> HRESULT,
    ) -> HRESULT {
        let _gc = crate::handles::InGc::enter();
        self.dispatch_in(entry, Scope::GcRelocating, f)
    }

    /// As [`Self::dispatch_no_gc`], for the GC's own heap-walk callbacks
    /// (a collection runs on this thread: no handle may be made).
    #[inline]
    fn dispatch_gc_walk(
        &self,
        entry: &'static str,
        f: impl FnOnce(&P, &ProfilerInfo<'_>) -> HRESULT,
    ) -> HRESULT {
        let _gc = crate::handles::InGc::enter();
        self.dispatch_in(entry, Scope::NoGc, f)
    }

    /// Runs a callback of an assembly's load in a [`Scope::Callback`]
    /// scope, with an [`AssemblyLoading`](crate::info::AssemblyLoading)
    /// marker open on the thread until it returns.
    #[inline]
    fn dispatch_loading(
        &self,
        entry: &'static str,
        f: impl FnOnce(&P, &ProfilerInfo<'_>) -> HRESULT,
    ) -> HRESULT {
        self.dispatch_loading_in(entry, Scope::Callback, f)
    }

    /// [`Self::dispatch_loading`] in `scope` (a module's own load scope).
    fn dispatch_loading_in(
        &self,
        entry: &'static str,
        scope: Scope,
        f: impl FnOnce(&P, &ProfilerInfo<'_>) -> HRESULT,
    ) -> HRESULT {
        let _loading = crate::info::AssemblyLoading::enter();
        self.dispatch_in(entry, scope, f)
    }

    #[inline]
    fn dispatch_in(
        &self,
        entry: &'static str,
        scope: Scope,
        f: impl FnOnce(&P, &ProfilerInfo<'_>) -> HRESULT,
    ) -> HRESULT {
        guard(entry, S_OK, || match self.info.get() {
            Some(runtime) => {
                let info = ProfilerInfo::scoped(runtime, scope);
                // A scope that keeps the runtime from suspending: the SDK
                // waits for no other thread's claim in it (`compilations`).
                // The scope is known where this is inlined, so for the
                // others the test folds away; the marked call is out of
                // line (the instruction gate counts every callback).
                if info.wait_would_deadlock().is_some() && crate::compilations::installs_begun() {
                    return no_wait(|| f(&self.profiler, &info));
                }
                f(&self.profiler, &info)
            }
            // The runtime issues no callbacks before Initialize returns.
            None => S_OK,
        })
    }

    /// Delivers the `RuntimeThreadSuspended` calls held since
    /// `RuntimeSuspendStarted` (see [`crate::suspends`]).
    fn deliver_held_suspends(&self, p: &P, info: &ProfilerInfo<'_>) {
        let lost = self.held_suspends.release(|thread| {
            // SAFETY: [id-scope] a ThreadID the runtime passed to RuntimeThreadSuspended
            // during this suspension: the runtime holds its thread-store lock
            // from RuntimeSuspendStarted until it resumes, so no thread has
            // been destroyed since (the thread store deletes a Thread only
            // under that lock); the typed ID borrows only this callback.
            let thread = unsafe { ThreadId::from_sys(thread) };
            p.runtime_thread_suspended(info, thread);
        });
        if lost > 0 {
            log::warn!(
                "{lost} RuntimeThreadSuspended notification(s) of this suspension did not fit the \
                 SDK's {} held ones and were dropped",
                crate::suspends::HELD
            );
        }
    }

    /// The components registered in `Initialize` (none before it returned).
    #[inline]
    fn components(&self) -> Option<&Components> {
        self.components.get().filter(|c| !c.is_empty())
    }

    /// Whether the profiler itself asked for `flag` (a callback that only a
    /// component asked for reaches only the component).
    #[inline]
    fn wants(&self, flag: crate::event_mask::EventMask) -> bool {
        self.components().is_none()
            || self
                .info
                .get()
                .is_some_and(|r| r.user_masks().low.intersects(flag))
    }

    #[inline]
    fn wants_high(&self, flag: crate::event_mask::HighEventMask) -> bool {
        self.components().is_none()
            || self
                .info
                .get()
                .is_some_and(|r| r.user_masks().high.intersects(flag))
    }

    /// Whether the profiler itself asked for the GC's start and finish
    /// (`MONITOR_GC` or `HIGH_BASIC_GC`).
    #[inline]
    fn wants_gc(&self) -> bool {
        self.wants(crate::event_mask::EventMask::MONITOR_GC)
            || self.wants_high(crate::event_mask::HighEventMask::BASIC_GC)
    }

    fn initialize_common(
        &self,
        entry: &'static str,
        unknown: *mut c_void,
        attached: bool,
        user: impl FnOnce(&P, &ProfilerInfo<'_>) -> crate::error::Result<crate::event_mask::EventMasks>,
    ) -> HRESULT {
        // Before any profiler code runs: after a failed or declined
        // Initialize the runtime unloads the library, whatever threads the
        // profiler started still run its code (see `exit::pin_library`).
        crate::exit::pin_library();
        let hr = guard(entry, HRESULT(KnownHresult::E_FAIL as i32), || {
            // SAFETY: [callback-args, com-ownership] the runtime passes its profiler-info object as a
            // borrowed IUnknown pointer valid for the call (corprof.idl,
            // ICorProfilerCallback::Initialize / InitializeForAttach).
            let Some(unknown) = (unsafe { IUnknown::from_raw_borrowed(&unknown) }) else {
                return HRESULT(KnownHresult::E_POINTER as i32);
            };
            // SAFETY: [info-alive, callback-args] this IUnknown is the runtime's profiler-info object;
            // the handle itself is only lent inside this runtime's
            // callbacks (`dispatch_in`, this method), and retired before the
            // runtime deletes the object (here on failure, in `Shutdown`,
            // `ProfilerDetachSucceeded` and `Drop`).
            let runtime = match unsafe { RuntimeHandle::from_unknown(unknown, attached) } {
                Ok(i) => i.with_slot(self.slot),
                Err(e) => {
                    log::error!("{entry}: {e}");
                    return e.hresult();
                }
            };
            // Side-by-side policy: a runtime the profiler does not select
            // declines quietly. Runtimes without Info3 (1.x/2.0) cannot say
            // which they are and are treated as selected.
            if let Ok(info) = runtime.runtime_information() {
                crate::exit::note_runtime_major(info.major);
                // reentrancy: none: `Registry::initialize` is the SDK's runtime registry, not the profiler's `initialize`; the guard is dropped before the block runs
                if !crate::runtimes::registry().initialize(self.slot, info, P::runtime_policy()) {
                    // Declined: the runtime releases this object and deletes
                    // its Info object next; nothing may call it any more.
                    runtime.retire();
                    return HRESULT(KnownHresult::CORPROF_E_PROFILER_CANCEL_ACTIVATION as i32);
                }
            }
            let runtime = self.info.get_or_init(|| runtime);
            let registrar = Registrar::default();
            // The SDK's own component: recognises an unhandled exception on
            // the way out, where no exit hook runs (see `crate::exit`).
            if P::watch_unhandled_exceptions() {
                registrar.add(std::sync::Arc::new(crate::exit::unhandled::Watch));
            }
            let result = registrar.during(|| {
                let info = ProfilerInfo::scoped(runtime, Scope::Initialize);
                user(&self.profiler, &info)
            });
            let components = registrar.finish();
            let result = result
                .and_then(|masks| runtime.set_masks_with_components(masks, components.masks()));
            let _ = self.components.set(components);
            match result {
                Ok(()) => {
                    // The runtime initializes its GC heap once this returns.
                    runtime.set_gc_heap_initialized(true);
                    // SAFETY: [local-memory] `self.profiler` lives as long as this object,
                    // whose `Drop` releases the registration first.
                    let _ = self
                        .finish
                        .set(unsafe { crate::exit::ProfilerFinish::register::<P>(&self.profiler) });
                    S_OK
                }
                Err(e) => {
                    log::error!("{entry}: {e}");
                    e.hresult()
                }
            }
        });
        if hr.0 < 0 {
            // A failed Initialize (an error, a panic, a refused mask): the
            // runtime releases this object, unloads the library and deletes
            // its Info object (`EEToProfInterfaceImpl`'s destructor), so
            // every handle the profiler kept (in a thread it started, a
            // static) answers `Error::Detached` from now on, after the calls
            // already running have returned.
            if let Some(runtime) = self.info.get() {
                runtime.retire();
            }
        }
        hr
    }
}

impl<P: Profiler> Drop for CallbackObject<P> {
    /// Runs inside the runtime's last `Release`: the profiler's own `Drop`
    /// and the components' run under the panic guard (a panic there would
    /// unwind into the runtime), and the object stops counting as alive for
    /// `DllCanUnloadNow` only after them.
    fn drop(&mut self) {
        let profiler = &mut self.profiler;
        let components = &mut self.components;
        let finish = self.finish.get();
        // Released by the runtime: whatever the profiler drops now (GC
        // handles, EventPipe sessions) makes no call into the runtime.
        if let Some(runtime) = self.info.get() {
            runtime.retire();
        }
        guard("IUnknown::Release (dropping the profiler)", (), || {
            // Finish (if nothing did yet) and forget the profiler before it
            // is dropped: process-exit hooks must not reach a dropped value.
            if let Some(f) = finish {
                f.release();
            }
            // SAFETY: [local-memory] `profiler` is dropped exactly once, here, and never used
            // afterwards (this is the object's destructor).
            unsafe { ManuallyDrop::drop(profiler) };
            drop(components.take());
        });
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
        // SAFETY: [caller-contract] guaranteed by the caller.
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
    // SAFETY: [ffi-abi, caller-contract] every typed ID is `#[repr(transparent)]` over `usize`, so the
    // layouts are identical; validity is guaranteed by the caller.
    unsafe { slice(ptr as *const Id, len) }
}

/// A typed ID for a raw ID argument of the current callback. Used only for
/// arguments the runtime documents as valid for information requests during
/// the callback; the callbacks whose ID is already dead (`*UnloadFinished`,
/// `AppDomainShutdownFinished`, a failed `*LoadFinished`,
/// `DynamicMethodUnloaded`, the writer thread of an EventPipe event) pass
/// the raw form instead.
macro_rules! id {
    ($kind:ty, $raw:expr) => {{
        // SAFETY: [id-scope, object-no-gc] corprof.idl and the BOTR ("Lifetime & Stability") give
        // every ID argument of the callbacks that use this macro a validity
        // that covers the whole callback (e.g. a ClassID from
        // ClassLoadFinished until ClassUnloadStarted returns, a ThreadID
        // until ThreadDestroyed returns); an ObjectID is made only in the
        // callbacks dispatched by `dispatch_no_gc`, where no GC runs until
        // they return. The typed ID borrows only the callback's duration.
        unsafe { <$kind>::from_sys($raw) }
    }};
}

/// Runs `f` with the thread marked may-not-wait
/// ([`MayNotWait`](crate::compilations::MayNotWait)): the cold half of
/// `dispatch_in`.
#[cold]
#[inline(never)]
fn no_wait(f: impl FnOnce() -> HRESULT) -> HRESULT {
    let _no_wait = crate::compilations::MayNotWait::enter();
    f()
}

/// Forwards a callback whose only arguments are IDs and plain values.
/// With `wants FLAG`, the profiler's method runs only if the profiler's own
/// mask has `FLAG` (a component may have asked for the event alone).
macro_rules! forward {
    // A callback of an assembly's load (see `dispatch_loading`).
    (loading $self:ident, $entry:literal, wants $flag:expr, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_loading($entry, |$p, $info| {
            if $self.wants($flag) {
                $body;
            }
            S_OK
        })
    };
    (loading $self:ident, in $scope:expr, $entry:literal, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_loading_in($entry, $scope, |$p, $info| {
            $body;
            S_OK
        })
    };
    (loading $self:ident, $entry:literal, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_loading($entry, |$p, $info| {
            $body;
            S_OK
        })
    };
    ($self:ident, in $scope:expr, $entry:literal, wants $flag:expr, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_in($entry, $scope, |$p, $info| {
            if $self.wants($flag) {
                $body;
            }
            S_OK
        })
    };
    ($self:ident, $entry:literal, wants $flag:expr, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch($entry, |$p, $info| {
            if $self.wants($flag) {
                $body;
            }
            S_OK
        })
    };
    ($self:ident, $entry:literal, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch($entry, |$p, $info| {
            $body;
            S_OK
        })
    };
    ($self:ident, in $scope:expr, $entry:literal, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_in($entry, $scope, |$p, $info| {
            $body;
            S_OK
        })
    };
}

/// As `forward!`, for callbacks that receive `ObjectID`s ([`Scope::NoGc`]).
macro_rules! forward_no_gc {
    ($self:ident, $entry:literal, wants $flag:expr, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_no_gc($entry, |$p, $info| {
            if $self.wants($flag) {
                $body;
            }
            S_OK
        })
    };
    ($self:ident, $entry:literal, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_no_gc($entry, |$p, $info| {
            $body;
            S_OK
        })
    };
}

/// As `forward_no_gc!`, for the GC's own heap-walk callbacks (see
/// `dispatch_gc_walk`).
macro_rules! forward_gc_walk {
    ($self:ident, $entry:literal, |$p:ident, $info:ident| $body:expr) => {
        $self.dispatch_gc_walk($entry, |$p, $info| {
            $body;
            S_OK
        })
    };
}

/// A `*LoadFinished` / `*CreationFinished` outcome: the typed ID after a
/// successful load, the raw ID and the status after a failed one (the ID is
/// not valid for information requests then).
macro_rules! loaded {
    ($kind:ty, $raw_kind:ident, $raw:expr, $status:expr) => {{
        if succeeded($status) {
            Ok(id!($kind, $raw))
        } else {
            Err(Failed {
                id: $raw_kind($raw),
                status: $status,
            })
        }
    }};
}

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
        let hr = forward!(self, "ICorProfilerCallback::Shutdown", |p, info| {
            p.shutdown(info);
            if let Some(c) = self.components() {
                c.each("Shutdown (component)", |c| c.shutdown(info));
            }
        });
        // No Info calls after Shutdown (the profiling API forbids them):
        // kept handles answer `Error::Detached`, values dropped later (GC
        // handles, EventPipe sessions) leave their runtime alone.
        if let Some(runtime) = self.info.get() {
            runtime.retire();
        }
        if let Some(f) = self.finish.get() {
            f.finish("Shutdown");
        }
        hr
    }
    unsafe fn AppDomainCreationStarted(&self, appDomainId: AppDomainID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::AppDomainCreationStarted",
            // Raw: valid for information requests only from
            // AppDomainCreationFinished (corprof.idl remarks).
            |p, info| p.app_domain_creation_started(info, RawAppDomainId(appDomainId))
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
            |p, info| p.app_domain_creation_finished(
                info,
                loaded!(AppDomainId, RawAppDomainId, appDomainId, hrStatus)
            )
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
            |p, info| p.app_domain_shutdown_finished(info, RawAppDomainId(appDomainId), hrStatus)
        )
    }
    unsafe fn AssemblyLoadStarted(&self, assemblyId: AssemblyID) -> HRESULT {
        forward!(
            loading self,
            "ICorProfilerCallback::AssemblyLoadStarted",
            // Raw: valid for information requests only from
            // AssemblyLoadFinished (corprof.idl remarks).
            |p, info| p.assembly_load_started(info, RawAssemblyId(assemblyId))
        )
    }
    unsafe fn AssemblyLoadFinished(&self, assemblyId: AssemblyID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            loading self,
            "ICorProfilerCallback::AssemblyLoadFinished",
            |p, info| p.assembly_load_finished(
                info,
                loaded!(AssemblyId, RawAssemblyId, assemblyId, hrStatus)
            )
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
            |p, info| p.assembly_unload_finished(info, RawAssemblyId(assemblyId), hrStatus)
        )
    }
    unsafe fn ModuleLoadStarted(&self, moduleId: ModuleID) -> HRESULT {
        forward!(
            loading self,
            "ICorProfilerCallback::ModuleLoadStarted", wants crate::event_mask::EventMask::MONITOR_MODULE_LOADS,
            // Raw: the loader calls this before it initialises the module,
            // which is valid for information requests only from
            // ModuleLoadFinished (corprof.idl remarks).
            |p, info| p.module_load_started(info, RawModuleId(moduleId))
        )
    }
    unsafe fn ModuleLoadFinished(&self, moduleId: ModuleID, hrStatus: HRESULT) -> HRESULT {
        // A successful load's callback is the module's load scope (what
        // `ManagedHandlers::module_loaded` checks it is called in).
        let scope = if succeeded(hrStatus) {
            Scope::ModuleLoad(RawModuleId(moduleId))
        } else {
            Scope::Callback
        };
        forward!(
            loading self,
            in scope,
            "ICorProfilerCallback::ModuleLoadFinished",
            |p, info| {
                if let (Some(c), true) = (self.components(), succeeded(hrStatus)) {
                    c.each("ModuleLoadFinished (component)", |c| {
                        c.module_load_finished(info, id!(ModuleId, moduleId))
                    });
                }
                if self.wants(crate::event_mask::EventMask::MONITOR_MODULE_LOADS) {
                    p.module_load_finished(info, loaded!(ModuleId, RawModuleId, moduleId, hrStatus))
                }
            }
        )
    }
    unsafe fn ModuleUnloadStarted(&self, moduleId: ModuleID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ModuleUnloadStarted",
            |p, info| {
                if self.wants(crate::event_mask::EventMask::MONITOR_MODULE_LOADS) {
                    p.module_unload_started(info, id!(ModuleId, moduleId));
                }
                if let Some(c) = self.components() {
                    c.each("ModuleUnloadStarted (component)", |c| {
                        c.module_unload_started(info, id!(ModuleId, moduleId))
                    });
                }
            }
        )
    }
    unsafe fn ModuleUnloadFinished(&self, moduleId: ModuleID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ModuleUnloadFinished", wants crate::event_mask::EventMask::MONITOR_MODULE_LOADS,
            |p, info| p.module_unload_finished(info, RawModuleId(moduleId), hrStatus)
        )
    }
    unsafe fn ModuleAttachedToAssembly(
        &self,
        moduleId: ModuleID,
        AssemblyId: AssemblyID,
    ) -> HRESULT {
        forward!(
            loading self,
            "ICorProfilerCallback::ModuleAttachedToAssembly", wants crate::event_mask::EventMask::MONITOR_MODULE_LOADS,
            // The module's load finished just before (the runtime issues
            // this only after a successful ModuleLoadFinished); the
            // assembly's AssemblyLoadFinished comes after this callback, so
            // its ID is not valid for information requests yet: raw.
            |p, info| p.module_attached_to_assembly(
                info,
                id!(ModuleId, moduleId),
                RawAssemblyId(AssemblyId)
            )
        )
    }
    unsafe fn ClassLoadStarted(&self, classId: ClassID) -> HRESULT {
        // Raw: the type is still being built; valid for information
        // requests only from ClassLoadFinished (corprof.idl remarks).
        forward!(self, "ICorProfilerCallback::ClassLoadStarted", wants crate::event_mask::EventMask::MONITOR_CLASS_LOADS, |p, info| p
            .class_load_started(info, RawClassId(classId)))
    }
    unsafe fn ClassLoadFinished(&self, classId: ClassID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ClassLoadFinished", wants crate::event_mask::EventMask::MONITOR_CLASS_LOADS,
            |p, info| p.class_load_finished(info, loaded!(ClassId, RawClassId, classId, hrStatus))
        )
    }
    unsafe fn ClassUnloadStarted(&self, classId: ClassID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ClassUnloadStarted",
            |p, info| {
                if self.wants(crate::event_mask::EventMask::MONITOR_CLASS_LOADS) {
                    p.class_unload_started(info, id!(ClassId, classId));
                }
                if let Some(c) = self.components() {
                    c.each("ClassUnloadStarted (component)", |c| {
                        c.class_unload_started(info, id!(ClassId, classId))
                    });
                }
            }
        )
    }
    unsafe fn ClassUnloadFinished(&self, classId: ClassID, hrStatus: HRESULT) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ClassUnloadFinished", wants crate::event_mask::EventMask::MONITOR_CLASS_LOADS,
            |p, info| p.class_unload_finished(info, RawClassId(classId), hrStatus)
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
            |p, info| {
                let function = id!(FunctionId, functionId);
                // Every compilation is counted, whoever asked for the event:
                // a method's IL is replaced at JIT time only in its first
                // (`compilations`).
                let _compiling = crate::compilations::counting().then(|| {
                    let key = info
                        .function_info(function)
                        .ok()
                        .map(|fi| (fi.module.to_raw(), fi.token));
                    crate::compilations::compilation_started(function.to_raw(), key)
                });
                if self.wants(crate::event_mask::EventMask::MONITOR_JIT_COMPILATION) {
                    p.jit_compilation_started(info, function, b(fIsSafeToBlock))
                }
            }
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
            |p, info| {
                if let (Some(c), true) = (self.components(), succeeded(hrStatus)) {
                    c.each("JITCompilationFinished (component)", |c| {
                        c.jit_compilation_finished(info, id!(FunctionId, functionId))
                    });
                }
                if self.wants(crate::event_mask::EventMask::MONITOR_JIT_COMPILATION) {
                    p.jit_compilation_finished(
                        info,
                        id!(FunctionId, functionId),
                        hrStatus,
                        b(fIsSafeToBlock),
                    )
                }
            }
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
                // A component may have asked for cache searches (the code
                // map); the profiler decides only if it asked too.
                let use_cached = !self.wants(crate::event_mask::EventMask::MONITOR_CACHE_SEARCHES)
                    || p.jit_cached_function_search_started(info, id!(FunctionId, functionId));
                if !pbUseCachedFunction.is_null() {
                    // SAFETY: [callback-args] the runtime passes a valid out pointer (checked non-null).
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
            |p, info| {
                let found = result == sys::COR_PRF_CACHED_FUNCTION_FOUND;
                if let (Some(c), true) = (self.components(), found) {
                    c.each("JITCachedFunctionSearchFinished (component)", |c| {
                        c.jit_cached_function_search_finished(info, id!(FunctionId, functionId))
                    });
                }
                if self.wants(crate::event_mask::EventMask::MONITOR_CACHE_SEARCHES) {
                    p.jit_cached_function_search_finished(info, id!(FunctionId, functionId), found)
                }
            }
        )
    }
    unsafe fn JITFunctionPitched(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::JITFunctionPitched", wants crate::event_mask::EventMask::MONITOR_JIT_COMPILATION,
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
            let inline = !self.wants(crate::event_mask::EventMask::MONITOR_JIT_COMPILATION)
                || p.jit_inlining(info, id!(FunctionId, callerId), id!(FunctionId, calleeId));
            if !pfShouldInline.is_null() {
                // SAFETY: [callback-args] the runtime passes a valid out pointer (checked non-null).
                unsafe { *pfShouldInline = inline as BOOL };
            }
            S_OK
        })
    }
    unsafe fn ThreadCreated(&self, threadId: ThreadID) -> HRESULT {
        forward!(self, "ICorProfilerCallback::ThreadCreated", |p, info| {
            if let Some(c) = self.components() {
                c.each("ThreadCreated (component)", |c| {
                    c.thread_created(info, id!(ThreadId, threadId))
                });
            }
            if self.wants(crate::event_mask::EventMask::MONITOR_THREADS) {
                p.thread_created(info, id!(ThreadId, threadId))
            }
        })
    }
    unsafe fn ThreadDestroyed(&self, threadId: ThreadID) -> HRESULT {
        forward!(self, "ICorProfilerCallback::ThreadDestroyed", |p, info| {
            if self.wants(crate::event_mask::EventMask::MONITOR_THREADS) {
                p.thread_destroyed(info, id!(ThreadId, threadId));
            }
            if let Some(c) = self.components() {
                c.each("ThreadDestroyed (component)", |c| {
                    c.thread_destroyed(info, id!(ThreadId, threadId))
                });
            }
        })
    }
    unsafe fn ThreadAssignedToOSThread(
        &self,
        managedThreadId: ThreadID,
        osThreadId: DWORD,
    ) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ThreadAssignedToOSThread",
            |p, info| {
                if let Some(c) = self.components() {
                    c.each("ThreadAssignedToOSThread (component)", |c| {
                        c.thread_assigned_to_os_thread(
                            info,
                            id!(ThreadId, managedThreadId),
                            osThreadId,
                        )
                    });
                }
                if self.wants(crate::event_mask::EventMask::MONITOR_THREADS) {
                    p.thread_assigned_to_os_thread(info, id!(ThreadId, managedThreadId), osThreadId)
                }
            }
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
        forward!(
            self,
            "ICorProfilerCallback::RemotingClientSendingMessage",
            |p, info| p.remoting_client_sending_message(
                info,
                // SAFETY: [callback-args] the cookie is null or a valid GUID for the callback's duration.
                unsafe { pCookie.as_ref() },
                b(fIsAsync)
            )
        )
    }
    unsafe fn RemotingClientReceivingReply(&self, pCookie: *mut GUID, fIsAsync: BOOL) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::RemotingClientReceivingReply",
            |p, info| p.remoting_client_receiving_reply(
                info,
                // SAFETY: [callback-args] the cookie is null or a valid GUID for the callback's duration.
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
        forward!(
            self,
            "ICorProfilerCallback::RemotingServerReceivingMessage",
            |p, info| p.remoting_server_receiving_message(
                info,
                // SAFETY: [callback-args] the cookie is null or a valid GUID for the callback's duration.
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
        forward!(
            self,
            "ICorProfilerCallback::RemotingServerSendingReply",
            |p, info| p.remoting_server_sending_reply(
                info,
                // SAFETY: [callback-args] the cookie is null or a valid GUID for the callback's duration.
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
        self.held_suspends.suspend_started();
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback::RuntimeSuspendStarted",
            |p, info| p.runtime_suspend_started(info, SuspendReason::from_sys(suspendReason))
        )
    }
    unsafe fn RuntimeSuspendFinished(&self) -> HRESULT {
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback::RuntimeSuspendFinished",
            |p, info| {
                self.deliver_held_suspends(p, info);
                p.runtime_suspend_finished(info)
            }
        )
    }
    unsafe fn RuntimeSuspendAborted(&self) -> HRESULT {
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback::RuntimeSuspendAborted",
            |p, info| {
                self.deliver_held_suspends(p, info);
                p.runtime_suspend_aborted(info)
            }
        )
    }
    unsafe fn RuntimeResumeStarted(&self) -> HRESULT {
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback::RuntimeResumeStarted",
            |p, info| p.runtime_resume_started(info)
        )
    }
    unsafe fn RuntimeResumeFinished(&self) -> HRESULT {
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback::RuntimeResumeFinished",
            |p, info| p.runtime_resume_finished(info)
        )
    }
    unsafe fn RuntimeThreadSuspended(&self, threadId: ThreadID) -> HRESULT {
        // On Windows the thread may be OS-suspended right now, holding any
        // lock: no profiler code runs until the suspension finished
        // (`crate::suspends`).
        if self.held_suspends.hold(threadId) {
            return S_OK;
        }
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback::RuntimeThreadSuspended",
            |p, info| p.runtime_thread_suspended(info, id!(ThreadId, threadId))
        )
    }
    unsafe fn RuntimeThreadResumed(&self, threadId: ThreadID) -> HRESULT {
        forward!(
            self,
            in Scope::Suspended,
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
        // SAFETY (no GC): the runtime issues ObjectAllocated on the allocating
        // thread in cooperative mode (its contract: MODE_COOPERATIVE, the
        // ObjectID is an argument), so no GC starts before it returns.
        forward_no_gc!(self, "ICorProfilerCallback::ObjectAllocated", |p, info| p
            .object_allocated(info, id!(ObjectId, objectId), id!(ClassId, classId)))
    }
    unsafe fn ObjectsAllocatedByClass(
        &self,
        cClassCount: ULONG,
        classIds: *const ClassID,
        cObjects: *const ULONG,
    ) -> HRESULT {
        // SAFETY (no GC): issued by the thread doing a GC at its start
        // (DiagGCStart), from a walk of generation 0 before the collection
        // marks or moves anything, with the runtime suspended (GC_NOTRIGGER).
        forward_gc_walk!(
            self,
            "ICorProfilerCallback::ObjectsAllocatedByClass",
            |p, info| p.objects_allocated_by_class(
                info,
                // SAFETY: [callback-args, id-scope] `classIds` has `cClassCount` ClassIDs, loaded classes, valid during the callback.
                unsafe { ids(classIds, cClassCount) },
                // SAFETY: [callback-args] `cObjects` has `cClassCount` counts, valid during the callback.
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
        // SAFETY (no GC): issued by the thread doing a GC from the heap walk
        // at its end (DiagGCEnd), after the collection has moved everything
        // and before the runtime resumes (GC_NOTRIGGER): every object is at
        // its final address until the callback returns.
        self.dispatch_gc_walk("ICorProfilerCallback::ObjectReferences", |p, info| {
            // SAFETY: [callback-args, object-no-gc] the array has `cObjectRefs` IDs valid during the callback.
            let refs = unsafe { ids(objectRefIds, cObjectRefs) };
            let more_for_components = core::cell::Cell::new(false);
            if let Some(c) = self.components() {
                c.each("ObjectReferences (component)", |c| {
                    let more = c.object_references(
                        info,
                        id!(ObjectId, objectId),
                        id!(ClassId, classId),
                        refs,
                    );
                    if more {
                        more_for_components.set(true);
                    }
                });
            }
            let mut more = more_for_components.get();
            if self.wants(crate::event_mask::EventMask::MONITOR_GC) {
                more |=
                    p.object_references(info, id!(ObjectId, objectId), id!(ClassId, classId), refs);
            }
            if more {
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
        // SAFETY (no GC): issued on the throwing thread in cooperative mode
        // (contract MODE_COOPERATIVE: the ObjectID is an argument), so no GC
        // starts on another thread before it returns.
        forward_no_gc!(self, "ICorProfilerCallback::ExceptionThrown", |p, info| {
            if let Some(c) = self.components() {
                c.each("ExceptionThrown (component)", |c| {
                    c.exception_thrown(info, id!(ObjectId, thrownObjectId))
                });
            }
            if self.wants(crate::event_mask::EventMask::MONITOR_EXCEPTIONS) {
                p.exception_thrown(info, id!(ObjectId, thrownObjectId))
            }
        })
    }
    unsafe fn ExceptionSearchFunctionEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFunctionEnter",
            |p, info| {
                if let Some(c) = self.components() {
                    c.each("ExceptionSearchFunctionEnter (component)", |c| {
                        c.exception_search_function_enter(info, id!(FunctionId, functionId))
                    });
                }
                if self.wants(crate::event_mask::EventMask::MONITOR_EXCEPTIONS) {
                    p.exception_search_function_enter(info, id!(FunctionId, functionId))
                }
            }
        )
    }
    unsafe fn ExceptionSearchFunctionLeave(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFunctionLeave",
            |p, info| {
                if self.wants(crate::event_mask::EventMask::MONITOR_EXCEPTIONS) {
                    p.exception_search_function_leave(info);
                }
                if let Some(c) = self.components() {
                    c.each("ExceptionSearchFunctionLeave (component)", |c| {
                        c.exception_search_function_leave(info)
                    });
                }
            }
        )
    }
    unsafe fn ExceptionSearchFilterEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFilterEnter", wants crate::event_mask::EventMask::MONITOR_EXCEPTIONS,
            |p, info| p.exception_search_filter_enter(info, id!(FunctionId, functionId))
        )
    }
    unsafe fn ExceptionSearchFilterLeave(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchFilterLeave", wants crate::event_mask::EventMask::MONITOR_EXCEPTIONS,
            |p, info| p.exception_search_filter_leave(info)
        )
    }
    unsafe fn ExceptionSearchCatcherFound(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionSearchCatcherFound",
            |p, info| {
                if self.wants(crate::event_mask::EventMask::MONITOR_EXCEPTIONS) {
                    p.exception_search_catcher_found(info, id!(FunctionId, functionId));
                }
                if let Some(c) = self.components() {
                    c.each("ExceptionSearchCatcherFound (component)", |c| {
                        c.exception_search_catcher_found(info, id!(FunctionId, functionId))
                    });
                }
            }
        )
    }
    unsafe fn ExceptionOSHandlerEnter(&self, _unused: UINT_PTR) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionOSHandlerEnter", wants crate::event_mask::EventMask::MONITOR_EXCEPTIONS,
            |p, info| p.exception_os_handler_enter(info)
        )
    }
    unsafe fn ExceptionOSHandlerLeave(&self, _unused: UINT_PTR) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback::ExceptionOSHandlerLeave", wants crate::event_mask::EventMask::MONITOR_EXCEPTIONS,
            |p, info| p.exception_os_handler_leave(info)
        )
    }
    unsafe fn ExceptionUnwindFunctionEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            in Scope::Cooperative,
            "ICorProfilerCallback::ExceptionUnwindFunctionEnter",
            |p, info| {
                if self.wants(crate::event_mask::EventMask::MONITOR_EXCEPTIONS) {
                    p.exception_unwind_function_enter(info, id!(FunctionId, functionId));
                }
                if let Some(c) = self.components().filter(|c| c.receive_unwinds()) {
                    c.each_unwind("ExceptionUnwindFunctionEnter (component)", |c| {
                        c.exception_unwind_function_enter(info, id!(FunctionId, functionId))
                    });
                }
            }
        )
    }
    unsafe fn ExceptionUnwindFunctionLeave(&self) -> HRESULT {
        forward!(
            self,
            in Scope::Cooperative,
            "ICorProfilerCallback::ExceptionUnwindFunctionLeave",
            |p, info| {
                if self.wants(crate::event_mask::EventMask::MONITOR_EXCEPTIONS) {
                    p.exception_unwind_function_leave(info);
                }
                if let Some(c) = self.components().filter(|c| c.receive_unwinds()) {
                    c.each_unwind("ExceptionUnwindFunctionLeave (component)", |c| {
                        c.exception_unwind_function_leave(info)
                    });
                }
            }
        )
    }
    unsafe fn ExceptionUnwindFinallyEnter(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            in Scope::Cooperative,
            "ICorProfilerCallback::ExceptionUnwindFinallyEnter", wants crate::event_mask::EventMask::MONITOR_EXCEPTIONS,
            |p, info| p.exception_unwind_finally_enter(info, id!(FunctionId, functionId))
        )
    }
    unsafe fn ExceptionUnwindFinallyLeave(&self) -> HRESULT {
        forward!(
            self,
            in Scope::Cooperative,
            "ICorProfilerCallback::ExceptionUnwindFinallyLeave", wants crate::event_mask::EventMask::MONITOR_EXCEPTIONS,
            |p, info| p.exception_unwind_finally_leave(info)
        )
    }
    unsafe fn ExceptionCatcherEnter(&self, functionId: FunctionID, objectId: ObjectID) -> HRESULT {
        // SAFETY (no GC): issued from the unwind in cooperative mode and
        // GC_NOTRIGGER (the stack is not GC-friendly there), so no GC starts
        // before it returns.
        forward_no_gc!(
            self,
            "ICorProfilerCallback::ExceptionCatcherEnter",
            |p, info| {
                if self.wants(crate::event_mask::EventMask::MONITOR_EXCEPTIONS) {
                    p.exception_catcher_enter(
                        info,
                        id!(FunctionId, functionId),
                        id!(ObjectId, objectId),
                    );
                }
                if let Some(c) = self.components().filter(|c| c.receive_unwinds()) {
                    c.each_unwind("ExceptionCatcherEnter (component)", |c| {
                        c.exception_catcher_enter(info, id!(FunctionId, functionId))
                    });
                }
            }
        )
    }
    unsafe fn ExceptionCatcherLeave(&self) -> HRESULT {
        forward!(
            self,
            in Scope::Cooperative,
            "ICorProfilerCallback::ExceptionCatcherLeave", wants crate::event_mask::EventMask::MONITOR_EXCEPTIONS,
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
                // SAFETY: [callback-args] REFGUID is a valid GUID reference for the callback's duration.
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
                // SAFETY: [callback-args] REFGUID is a valid GUID reference for the callback's duration.
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
        forward!(
            self,
            "ICorProfilerCallback2::ThreadNameChanged",
            |p, info| {
                // SAFETY: [callback-args] `name` holds `cchName` WCHARs (or is null) during the callback.
                let name = WideStr::new(unsafe { slice(name, cchName) });
                if let Some(c) = self.components() {
                    c.each("ThreadNameChanged (component)", |c| {
                        c.thread_name_changed(info, id!(ThreadId, threadId), name)
                    });
                }
                if self.wants(crate::event_mask::EventMask::MONITOR_THREADS) {
                    p.thread_name_changed(info, id!(ThreadId, threadId), name)
                }
            }
        )
    }
    unsafe fn GarbageCollectionStarted(
        &self,
        cGenerations: i32,
        generationCollected: *const BOOL,
        reason: COR_PRF_GC_REASON,
    ) -> HRESULT {
        let _gc = crate::handles::InGc::enter();
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback2::GarbageCollectionStarted",
            |p, info| {
                // SAFETY: [callback-args] `generationCollected` has `cGenerations` entries during the callback.
                let generations = GenerationSet::from_flags(unsafe {
                    slice(generationCollected, cGenerations.max(0) as u32)
                });
                let reason = GcReason::from_sys(reason);
                if let Some(c) = self.components() {
                    c.each("GarbageCollectionStarted (component)", |c| {
                        c.garbage_collection_started(info, generations, reason)
                    });
                }
                if self.wants_gc() {
                    p.garbage_collection_started(info, generations, reason)
                }
            }
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
        let _gc = crate::handles::InGc::enter();
        forward!(
            self,
            in Scope::Suspended,
            "ICorProfilerCallback2::GarbageCollectionFinished",
            |p, info| {
                if self.wants_gc() {
                    p.garbage_collection_finished(info)
                }
                if let Some(c) = self.components() {
                    c.each("GarbageCollectionFinished (component)", |c| {
                        c.garbage_collection_finished(info)
                    });
                }
            }
        )
    }
    unsafe fn FinalizeableObjectQueued(
        &self,
        finalizerFlags: DWORD,
        objectID: ObjectID,
    ) -> HRESULT {
        // SAFETY (no GC): issued in cooperative mode (contract
        // MODE_COOPERATIVE: the ObjectID is an argument) by the thread doing
        // a GC while it walks the finalization queue with the runtime
        // suspended; nothing moves during the walk.
        forward_gc_walk!(
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
        // SAFETY (no GC): issued from the heap walk at the end of a GC
        // (DiagGCEnd), after the collection has moved everything and before
        // the runtime resumes (GC_NOTRIGGER): the roots' objects are at their
        // final addresses until the callback returns.
        self.dispatch_gc_walk("ICorProfilerCallback2::RootReferences2", |p, info| {
            // SAFETY: [callback-args, object-no-gc] each array has `cRootRefs` entries during the callback.
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
        // Not a no-GC scope: the runtime issues HandleCreated in preemptive
        // mode when the handle starts empty (e.g. a new Thread's handles;
        // its contract is MODE_ANY for a null initialObjectId), so a GC may
        // run on another thread during the callback. Nor one to wait in: a
        // handle made by managed code comes in cooperative mode (a
        // suspension made while it waited did not complete on .NET 8, 10
        // and 11).
        forward!(self, in Scope::Cooperative, "ICorProfilerCallback2::HandleCreated", |p, info| p
        .handle_created(
            info,
            id!(GcHandleId, handleId),
            (initialObjectId != 0 && !crate::handles::creating_for_allocation()).then(|| {
                // SAFETY: [object-no-gc] a non-null initial object comes only from a
                // thread in cooperative mode (the contract requires it,
                // and the creator holds the reference it stores), which
                // keeps the object in place until the callback returns;
                // the typed ID borrows only the callback.
                unsafe { ObjectId::from_sys(initialObjectId) }
            })
        ))
    }
    unsafe fn HandleDestroyed(&self, handleId: GCHandleID) -> HRESULT {
        // A handle freed by managed code: cooperative mode on .NET 10 and
        // 11 (as HandleCreated).
        forward!(self, in Scope::Cooperative, "ICorProfilerCallback2::HandleDestroyed", |p, info| p
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
                // SAFETY: [callback-args] the runtime passes `cbClientData` bytes (or null) valid during the call.
                let data = unsafe { slice(pvClientData as *const u8, cbClientData) };
                p.initialize_for_attach(info, data).map(Into::into)
            },
        )
    }
    unsafe fn ProfilerAttachComplete(&self) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback3::ProfilerAttachComplete",
            |p, info| {
                if let Some(c) = self.components() {
                    c.each("ProfilerAttachComplete (component)", |c| {
                        c.profiler_attach_complete(info)
                    });
                }
                p.profiler_attach_complete(info)
            }
        )
    }
    unsafe fn ProfilerDetachSucceeded(&self) -> HRESULT {
        let hr = forward!(
            self,
            "ICorProfilerCallback3::ProfilerDetachSucceeded",
            |p, info| {
                p.profiler_detach_succeeded(info);
                if let Some(c) = self.components() {
                    c.each("ProfilerDetachSucceeded (component)", |c| {
                        c.profiler_detach_succeeded(info)
                    });
                }
            }
        );
        // When this returns the runtime deletes its Info object
        // (`EEToProfInterfaceImpl`'s destructor): every handle the profiler
        // kept (a thread started just now included) answers
        // `Error::Detached` from here on, after the calls already running
        // through one have returned; values dropped with the profiler make
        // no call.
        if let Some(runtime) = self.info.get() {
            runtime.retire();
        }
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
            // A waited ReJIT request from the handler is refused (it would
            // make the runtime prepare a version inside this one).
            let _parameters = crate::il::rejit::InParameters::enter();
            // SAFETY: [callback-args, com-ownership] the runtime passes a borrowed ICorProfilerFunctionControl valid during the call, for the new version of method `methodId` of module `moduleId` (corprof.idl, GetReJITParameters).
            let Some(control) = (unsafe {
                FunctionControl::from_raw_borrowed(
                    pFunctionControl,
                    RawModuleId(moduleId),
                    MdMethodDef(methodId),
                )
            }) else {
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
            |p, info| {
                if let (Some(c), true) = (self.components(), succeeded(hrStatus)) {
                    c.each("ReJITCompilationFinished (component)", |c| {
                        c.rejit_compilation_finished(
                            info,
                            id!(FunctionId, functionId),
                            RawReJitId(rejitId),
                        )
                    });
                }
                p.rejit_compilation_finished(
                    info,
                    id!(FunctionId, functionId),
                    id!(ReJitId, rejitId),
                    hrStatus,
                    b(fIsSafeToBlock),
                )
            }
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
        // Not a no-GC scope: the GC is relocating, and the runtime says no
        // ObjectID (old or new) names a readable object during the callback.
        // The ranges are raw; the scope refuses every object reader.
        self.dispatch_relocating("ICorProfilerCallback4::MovedReferences2", |p, info| {
            // SAFETY: [object-no-gc, callback-args] the runtime's arrays have `cMovedObjectIDRanges`
            // entries and stay valid during the callback.
            let ranges = unsafe {
                GcRanges::moved(
                    slice(oldObjectIDRangeStart, cMovedObjectIDRanges),
                    slice(newObjectIDRangeStart, cMovedObjectIDRanges),
                    slice(cObjectIDRangeLength, cMovedObjectIDRanges),
                )
            };
            p.moved_references(info, ranges);
            S_OK
        })
    }
    unsafe fn SurvivingReferences2(
        &self,
        cSurvivingObjectIDRanges: ULONG,
        objectIDRangeStart: *const ObjectID,
        cObjectIDRangeLength: *const SIZE_T,
    ) -> HRESULT {
        // Not a no-GC scope: as MovedReferences2, the GC is in the middle of
        // its work and no ObjectID names a readable object (a dead object's
        // memory may already hold GC bookkeeping). Raw ranges only.
        self.dispatch_relocating("ICorProfilerCallback4::SurvivingReferences2", |p, info| {
            // SAFETY: [object-no-gc, callback-args] the runtime's arrays have `cSurvivingObjectIDRanges`
            // entries and stay valid during the callback.
            let ranges = unsafe {
                GcRanges::surviving(
                    slice(objectIDRangeStart, cSurvivingObjectIDRanges),
                    slice(cObjectIDRangeLength, cSurvivingObjectIDRanges),
                )
            };
            p.surviving_references(info, ranges);
            S_OK
        })
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
        // SAFETY (no GC): issued from the heap walk at the end of a GC
        // (DiagGCEnd; dependent handles), after the collection has moved
        // everything and before the runtime resumes (GC_NOTRIGGER): the
        // objects stay at their final addresses until the callback returns.
        forward_gc_walk!(
            self,
            "ICorProfilerCallback5::ConditionalWeakTableElementReferences",
            |p, info| p.conditional_weak_table_element_references(
                info,
                // SAFETY: [callback-args, object-no-gc] `keyRefIds` has `cRootRefs` ObjectIDs, valid during the callback; no GC runs until it returns.
                unsafe { ids(keyRefIds, cRootRefs) },
                // SAFETY: [callback-args, object-no-gc] `valueRefIds` has `cRootRefs` ObjectIDs, valid during the callback; no GC runs until it returns.
                unsafe { ids(valueRefIds, cRootRefs) },
                // SAFETY: [callback-args, id-scope] `rootIds` has `cRootRefs` GCHandleIDs of handles that exist during the callback.
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
            // SAFETY: [callback-args, com-ownership] the runtime passes a borrowed provider, valid during the call; it is not released.
            let Some(provider) =
                (unsafe { AssemblyReferenceProvider::from_raw_borrowed(pAsmRefProvider) })
            else {
                return HRESULT(KnownHresult::E_POINTER as i32);
            };
            // SAFETY: [callback-args, nul-terminated] the runtime passes a NUL-terminated path valid during the call.
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
        forward!(
            self,
            "ICorProfilerCallback8::DynamicMethodJITCompilationStarted", wants crate::event_mask::EventMask::MONITOR_JIT_COMPILATION,
            |p, info| p.dynamic_method_jit_compilation_started(
                info,
                id!(FunctionId, functionId),
                b(fIsSafeToBlock),
                // SAFETY: [callback-args] `pILHeader` holds `cbILHeader` bytes during the callback.
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
            |p, info| {
                if let (Some(c), true) = (self.components(), succeeded(hrStatus)) {
                    c.each("DynamicMethodJITCompilationFinished (component)", |c| {
                        c.dynamic_method_jit_compilation_finished(info, id!(FunctionId, functionId))
                    });
                }
                if self.wants(crate::event_mask::EventMask::MONITOR_JIT_COMPILATION) {
                    p.dynamic_method_jit_compilation_finished(
                        info,
                        id!(FunctionId, functionId),
                        hrStatus,
                        b(fIsSafeToBlock),
                    )
                }
            }
        )
    }
}

impl<P: Profiler> ICorProfilerCallback9_Impl for CallbackObject_Impl<P> {
    unsafe fn DynamicMethodUnloaded(&self, functionId: FunctionID) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback9::DynamicMethodUnloaded",
            |p, info| {
                if self
                    .wants_high(crate::event_mask::HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS)
                {
                    p.dynamic_method_unloaded(info, RawFunctionId(functionId));
                }
                if let Some(c) = self.components() {
                    c.each("DynamicMethodUnloaded (component)", |c| {
                        c.dynamic_method_unloaded(info, RawFunctionId(functionId))
                    });
                }
            }
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
                // SAFETY: [callback-args, eventpipe-handles] every buffer has the stated length and every pointer is
                // null or valid during the callback; the provider writes this
                // event now, so it is alive for the callback.
                let event = unsafe {
                    EventPipeEvent {
                        provider: crate::eventpipe::ProviderRef::from_sys(provider),
                        event_id: eventId,
                        event_version: eventVersion,
                        metadata: slice(metadataBlob, cbMetadataBlob),
                        data: slice(eventData, cbEventData),
                        activity_id: crate::eventpipe::activity(pActivityId),
                        related_activity_id: crate::eventpipe::activity(pRelatedActivityId),
                        thread: RawThreadId(eventThread),
                        stack: slice(stackFrames, numStackFrames),
                    }
                };
                if self.wants_high(crate::event_mask::HighEventMask::MONITOR_EVENT_PIPE) {
                    p.event_pipe_event_delivered(info, &event);
                }
                if let Some(runtime) = self.info.get() {
                    let sample = self.runtime_provider.sample(
                        runtime,
                        provider,
                        eventId,
                        eventVersion,
                        event.metadata,
                        event.data,
                    );
                    if let Some(sample) = sample {
                        if let Some(c) = self.components() {
                            c.each("AllocationSampled (component)", |c| {
                                c.allocation_sampled(info, &sample)
                            });
                        }
                        if self.wants_high(crate::event_mask::HighEventMask::MONITOR_EVENT_PIPE) {
                            p.allocation_sampled(info, &sample);
                        }
                    }
                }
                S_OK
            },
        )
    }
    unsafe fn EventPipeProviderCreated(&self, provider: EVENTPIPE_PROVIDER) -> HRESULT {
        forward!(
            self,
            "ICorProfilerCallback10::EventPipeProviderCreated",
            |p, info| p.event_pipe_provider_created(
                info,
                // SAFETY: [callback-args, eventpipe-handles] the runtime announces a provider it just created,
                // alive during the callback.
                unsafe { crate::eventpipe::ProviderRef::from_sys(provider) }
            )
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
                    // SAFETY: [callback-args] the runtime passes a valid out pointer (checked non-null).
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
    // SAFETY: [caller-contract, com-ownership] `riid` and `ppv` are valid (this fn's contract);
    // QueryInterface stores one reference, owned by the caller, in `*ppv`.
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
        fn initialize(&self, _info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
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
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr = unsafe { create_instance(move || probe, &ICorProfilerCallback2::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback2 reference.
        let cb = unsafe { ICorProfilerCallback2::from_raw(ppv) };
        (cb, jitted, dropped)
    }

    #[test]
    fn initialize_sets_the_returned_mask_and_callbacks_reach_the_profiler() {
        let fake = FakeRuntime::new();
        let (cb, jitted, dropped) = make(EventMask::MONITOR_JIT_COMPILATION);
        // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
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
        // SAFETY: [test-fake, plain-call] plain values.
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
        // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
        let hr = unsafe { cb.Initialize(fake.unknown().as_raw()) };
        assert_eq!(hr, refusal);
    }

    /// A profiler whose `Drop` panics, and reports what `DllCanUnloadNow`
    /// answered while the drop ran.
    struct PanicsOnDrop {
        busy_during_drop: Arc<AtomicUsize>,
    }

    impl Profiler for PanicsOnDrop {
        fn initialize(&self, _info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
            Ok(EventMasks::default())
        }
    }

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            let answer = crate::factory::DllCanUnloadNow();
            self.busy_during_drop
                .store(answer.0 as usize + 1, Ordering::SeqCst);
            panic!("deliberate panic in Drop");
        }
    }

    #[test]
    fn a_panicking_drop_is_contained_and_the_library_stays_busy_during_it() {
        let busy = Arc::new(AtomicUsize::new(0));
        let probe = PanicsOnDrop {
            busy_during_drop: busy.clone(),
        };
        let mut ppv: *mut c_void = core::ptr::null_mut();
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr = unsafe { create_instance(move || probe, &ICorProfilerCallback2::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback2 reference.
        let cb = unsafe { ICorProfilerCallback2::from_raw(ppv) };
        // The last Release runs the user's Drop, which panics: contained
        // (an unwind out of Release would abort the test process).
        drop(cb);
        assert_eq!(
            busy.load(Ordering::SeqCst),
            2,
            "DllCanUnloadNow answered S_FALSE (busy) while the profiler's Drop ran"
        );
    }

    /// Records which of its callbacks ran.
    #[derive(Default)]
    struct Seen {
        user_threads: AtomicUsize,
        component_threads: AtomicUsize,
    }

    struct ThreadComponent(Arc<Seen>);

    impl crate::component::Component for ThreadComponent {
        fn name(&self) -> &'static str {
            "test"
        }
        fn masks(&self) -> EventMasks {
            EventMask::MONITOR_THREADS.into()
        }
        fn thread_created(&self, _info: &ProfilerInfo, _thread: ThreadId<'_>) {
            self.0.component_threads.fetch_add(1, Ordering::SeqCst);
        }
    }

    struct WithComponent(Arc<Seen>);

    impl Profiler for WithComponent {
        fn initialize(&self, info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
            info.register(Arc::new(ThreadComponent(self.0.clone())))?;
            Ok(EventMask::MONITOR_GC.into())
        }
        fn thread_created(&self, _info: &ProfilerInfo, _thread: ThreadId<'_>) {
            self.0.user_threads.fetch_add(1, Ordering::SeqCst);
        }
        fn garbage_collection_finished(&self, info: &ProfilerInfo) {
            // Outside Initialize, registering is refused.
            assert!(matches!(
                info.register(Arc::new(ThreadComponent(self.0.clone()))),
                Err(crate::error::Error::NotInInitialize { .. })
            ));
            // The profiler changes its own mask: the component's flags stay.
            info.set_event_mask(EventMask::MONITOR_EXCEPTIONS.into())
                .unwrap();
        }
    }

    #[test]
    fn component_events_reach_components_only_and_their_masks_stay_set() {
        let fake = FakeRuntime::new();
        let seen = Arc::new(Seen::default());
        let profiler = WithComponent(seen.clone());
        let mut ppv: *mut c_void = core::ptr::null_mut();
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr =
            unsafe { create_instance(move || profiler, &ICorProfilerCallback2::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback2 reference.
        let cb = unsafe { ICorProfilerCallback2::from_raw(ppv) };
        // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
        assert_eq!(unsafe { cb.Initialize(fake.unknown().as_raw()) }.0, 0);
        // The SDK's own unhandled-exception watch adds its flags too.
        let watch = EventMask::MONITOR_EXCEPTIONS | EventMask::ENABLE_STACK_SNAPSHOT;
        let set = EventMask::from_bits_retain(fake.state().event_mask);
        assert_eq!(
            set,
            EventMask::MONITOR_GC | EventMask::MONITOR_THREADS | watch
        );
        // SAFETY: [test-fake, plain-call] plain values.
        unsafe {
            assert_eq!(cb.ThreadCreated(0x44).0, 0);
        }
        assert_eq!(seen.component_threads.load(Ordering::SeqCst), 1);
        assert_eq!(
            seen.user_threads.load(Ordering::SeqCst),
            0,
            "the profiler did not ask for MONITOR_THREADS"
        );
        // SAFETY: [plain-call] no arguments.
        unsafe {
            assert_eq!(cb.GarbageCollectionFinished().0, 0);
        }
        assert_eq!(
            EventMask::from_bits_retain(fake.state().event_mask),
            EventMask::MONITOR_EXCEPTIONS | EventMask::MONITOR_THREADS | watch
        );
    }

    /// A profiler that turns the unhandled-exception watch off.
    struct Unwatched;

    impl Profiler for Unwatched {
        fn initialize(&self, _info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
            Ok(EventMask::MONITOR_GC.into())
        }
        fn watch_unhandled_exceptions() -> bool {
            false
        }
    }

    #[test]
    fn a_profiler_can_turn_the_unhandled_exception_watch_off() {
        let fake = FakeRuntime::new();
        let mut ppv: *mut c_void = core::ptr::null_mut();
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr = unsafe { create_instance(|| Unwatched, &ICorProfilerCallback2::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback2 reference.
        let cb = unsafe { ICorProfilerCallback2::from_raw(ppv) };
        // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
        assert_eq!(unsafe { cb.Initialize(fake.unknown().as_raw()) }.0, 0);
        // Exactly the profiler's own mask: no exception callbacks, no walks.
        assert_eq!(
            EventMask::from_bits_retain(fake.state().event_mask),
            EventMask::MONITOR_GC
        );
    }

    /// Tries to make GC handles in the collector's callbacks, and keeps
    /// what the SDK hands out for allocation events.
    #[derive(Default)]
    struct HandleProbe {
        /// Callbacks where `create_handle` was refused before any call.
        refused_in: std::sync::Mutex<Vec<&'static str>>,
        /// The allocation samples: object, source, type, and whether a
        /// handle was made.
        samples: std::sync::Mutex<Vec<(usize, crate::allocations::AllocationSource, String, bool)>>,
        handles: std::sync::Mutex<Vec<crate::handles::GcHandle>>,
        /// `HandleCreated`'s initial objects.
        created: std::sync::Mutex<Vec<Option<usize>>>,
    }

    impl HandleProbe {
        fn try_handle(&self, what: &'static str, info: &ProfilerInfo<'_>, object: ObjectId<'_>) {
            match info.create_handle(object, crate::handles::HandleKind::Weak) {
                Err(crate::error::Error::Refused { .. }) => {
                    self.refused_in.lock().unwrap().push(what)
                }
                Ok(h) => self.handles.lock().unwrap().push(h),
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }

    impl Profiler for Arc<HandleProbe> {
        fn initialize(&self, _info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
            Ok(EventMasks {
                low: EventMask::MONITOR_GC | EventMask::MONITOR_OBJECT_ALLOCATED,
                high: crate::event_mask::HighEventMask::MONITOR_EVENT_PIPE,
            })
        }
        fn object_allocated(&self, info: &ProfilerInfo, object: ObjectId<'_>, _c: ClassId<'_>) {
            self.try_handle("ObjectAllocated", info, object);
        }
        fn object_references(
            &self,
            info: &ProfilerInfo,
            object: ObjectId<'_>,
            _class: ClassId<'_>,
            _references: &[ObjectId<'_>],
        ) -> bool {
            self.try_handle("ObjectReferences", info, object);
            true
        }
        fn finalizeable_object_queued(
            &self,
            info: &ProfilerInfo,
            object: ObjectId<'_>,
            _critical: bool,
        ) {
            self.try_handle("FinalizeableObjectQueued", info, object);
        }
        fn root_references(&self, info: &ProfilerInfo, roots: crate::gc::RootReferences<'_>) {
            for r in roots.iter() {
                self.try_handle("RootReferences2", info, r.object);
            }
        }
        fn allocation_sampled(
            &self,
            _info: &ProfilerInfo,
            sample: &crate::allocations::AllocationSample<'_>,
        ) {
            let made = sample.create_handle(crate::handles::HandleKind::Weak);
            self.samples.lock().unwrap().push((
                sample.object().0,
                sample.source(),
                sample.type_name().unwrap_or_default(),
                made.is_ok(),
            ));
            if let Ok(h) = made {
                self.handles.lock().unwrap().push(h);
            }
        }
        fn handle_created(
            &self,
            _info: &ProfilerInfo,
            _handle: GcHandleId<'_>,
            initial_object: Option<ObjectId<'_>>,
        ) {
            self.created
                .lock()
                .unwrap()
                .push(initial_object.map(|o| o.as_sys()));
        }
    }

    fn handle_probe(fake: &FakeRuntime) -> (Arc<HandleProbe>, ICorProfilerCallback2) {
        let probe = Arc::new(HandleProbe::default());
        let theirs = probe.clone();
        let mut ppv: *mut c_void = core::ptr::null_mut();
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr = unsafe { create_instance(move || theirs, &ICorProfilerCallback2::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback2 reference.
        let cb = unsafe { ICorProfilerCallback2::from_raw(ppv) };
        // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
        assert_eq!(unsafe { cb.Initialize(fake.unknown().as_raw()) }.0, 0);
        (probe, cb)
    }

    #[test]
    fn no_handle_is_made_inside_a_collection() {
        let fake = FakeRuntime::with_info_version(13);
        fake.state()
            .objects
            .insert(0x100, crate::testing::fake::FakeObject::default());
        let (probe, cb) = handle_probe(&fake);
        let roots = [0x100usize];
        let kinds = [sys::COR_PRF_GC_ROOT_STACK];
        let flags = [0u32];
        let ids = [0usize];
        // SAFETY: [test-fake, callback-args] the fake knows the object; the arrays outlive the calls.
        unsafe {
            assert_eq!(cb.ObjectAllocated(0x100, 0x200).0, 0);
            let started = [1i32, 0, 0];
            assert_eq!(cb.GarbageCollectionStarted(3, started.as_ptr(), 0).0, 0);
            assert_eq!(cb.ObjectReferences(0x100, 0x200, 0, core::ptr::null()).0, 0);
            assert_eq!(
                cb.RootReferences2(
                    1,
                    roots.as_ptr(),
                    kinds.as_ptr(),
                    flags.as_ptr(),
                    ids.as_ptr()
                )
                .0,
                0
            );
            assert_eq!(cb.FinalizeableObjectQueued(0, 0x100).0, 0);
            assert_eq!(cb.GarbageCollectionFinished().0, 0);
        }
        assert_eq!(
            *probe.refused_in.lock().unwrap(),
            [
                "ObjectReferences",
                "RootReferences2",
                "FinalizeableObjectQueued"
            ]
        );
        // Outside the collection a handle is made: one CreateHandle in all.
        assert_eq!(probe.handles.lock().unwrap().len(), 1);
        assert_eq!(fake.call_count("CreateHandle"), 1);
    }

    #[test]
    fn allocation_samples_come_only_from_the_runtimes_own_events() {
        use crate::allocations::tests::{metadata, sampled_payload, tick_payload};
        use crate::allocations::{AllocationSource, ALLOCATION_SAMPLED, GC_ALLOCATION_TICK};
        let fake = FakeRuntime::with_info_version(13);
        let (runtime, other) = (0x7700usize, 0x7800usize);
        {
            let mut st = fake.state();
            st.eventpipe
                .providers
                .insert(runtime, ("Microsoft-Windows-DotNETRuntime".into(), None));
            st.eventpipe
                .providers
                .insert(other, ("My-Provider".into(), None));
            for object in [0x1000, 0x2000] {
                st.objects
                    .insert(object, crate::testing::fake::FakeObject::default());
            }
        }
        let (probe, cb) = handle_probe(&fake);
        let cb10: ICorProfilerCallback10 = cb.cast().unwrap();
        let zero = windows_core::GUID::zeroed();
        let deliver = |provider: usize, id: u32, version: u32, meta: &[u8], data: &[u8]| {
            // SAFETY: [test-fake, callback-args] every buffer outlives the call.
            let hr = unsafe {
                cb10.EventPipeEventDelivered(
                    provider,
                    id,
                    version,
                    meta.len() as u32,
                    meta.as_ptr(),
                    data.len() as u32,
                    data.as_ptr(),
                    &zero,
                    &zero,
                    0,
                    0,
                    core::ptr::null(),
                )
            };
            assert_eq!(hr.0, 0);
        };
        let sampled = sampled_payload("Keep", 0x1000, 40, 7);
        let tick = tick_payload(4, 102_400, "System.Byte[]", 0x2000, 16_408);
        // The runtime's provider, native metadata: samples, handles made.
        deliver(
            runtime,
            ALLOCATION_SAMPLED,
            0,
            &metadata(ALLOCATION_SAMPLED, 0, ""),
            &sampled,
        );
        deliver(
            runtime,
            GC_ALLOCATION_TICK,
            4,
            &metadata(GC_ALLOCATION_TICK, 4, ""),
            &tick,
        );
        // Another provider, an event with a name (an EventSource's, a
        // profiler's), a payload that is not the manifest's: none.
        deliver(
            other,
            ALLOCATION_SAMPLED,
            0,
            &metadata(ALLOCATION_SAMPLED, 0, ""),
            &sampled,
        );
        deliver(
            runtime,
            ALLOCATION_SAMPLED,
            0,
            &metadata(ALLOCATION_SAMPLED, 0, "Fake"),
            &sampled,
        );
        deliver(
            runtime,
            ALLOCATION_SAMPLED,
            0,
            &metadata(ALLOCATION_SAMPLED, 0, ""),
            &sampled[..20],
        );
        deliver(runtime, 11, 0, &metadata(11, 0, ""), &sampled);
        let samples = probe.samples.lock().unwrap().clone();
        assert_eq!(
            samples,
            [
                (
                    0x1000,
                    AllocationSource::Sampled {
                        sampled_byte_offset: 7
                    },
                    "Keep".to_string(),
                    true
                ),
                (
                    0x2000,
                    AllocationSource::Tick { amount: 102_400 },
                    "System.Byte[]".to_string(),
                    true
                ),
            ]
        );
        assert_eq!(fake.call_count("CreateHandle"), 2);
        // The provider's name was asked once: its handle is known since.
        assert_eq!(fake.call_count("EventPipeGetProviderInfo"), 2);
        // The SDK refuses to make a provider of the runtime's name.
        // SAFETY: [test-fake] no objects are read.
        let info = unsafe { fake.profiler_info() };
        assert!(matches!(
            info.handle()
                .event_pipe_create_provider("Microsoft-Windows-DotNETRuntime"),
            Err(crate::error::Error::InvalidArgument(_))
        ));
    }

    /// Calls every reader of objects (and of references held in objects)
    /// with `object` and says which of them refused with `GcMayRun`.
    fn refusals(info: &ProfilerInfo<'_>, object: ObjectId<'_>) -> Vec<(&'static str, bool)> {
        fn gc(r: crate::error::Result<impl Sized>) -> bool {
            matches!(r, Err(crate::error::Error::GcMayRun { .. }))
        }
        vec![
            ("class_from_object", gc(info.class_from_object(object))),
            ("object_size", gc(info.object_size(object))),
            ("object_size2", gc(info.object_size2(object))),
            ("object_generation", gc(info.object_generation(object))),
            ("array_object_info", gc(info.array_object_info(object))),
            ("is_frozen_object", gc(info.is_frozen_object(object))),
            ("string_text", gc(info.string_text(object))),
            ("field_value", gc(info.field_value(object, "x"))),
            ("array_elements", gc(info.array_elements(object))),
            ("unboxed_value", gc(info.unboxed_value(object))),
            ("object_references", gc(info.object_references(object))),
            (
                "create_handle",
                gc(info.create_handle(object, crate::handles::HandleKind::Strong)),
            ),
        ]
    }

    /// What `ScopeProbe` saw in one callback.
    #[derive(Debug, Default, Clone)]
    struct ScopeSeen {
        gc_blocked: bool,
        initial_object: Option<usize>,
        handle_object_refused: bool,
        refused: Vec<(&'static str, bool)>,
    }

    /// Makes a GC handle where objects are stable (ObjectAllocated), then
    /// tries every object reader in MovedReferences2, SurvivingReferences2
    /// and HandleCreated.
    #[derive(Default)]
    struct ScopeProbe {
        /// ObjectAllocated's `class_from_token` refused before any call.
        type_load_refused: AtomicUsize,
        handle: std::sync::Mutex<Option<crate::handles::GcHandle>>,
        seen: std::sync::Mutex<Vec<(&'static str, ScopeSeen)>>,
    }

    impl ScopeProbe {
        fn note(&self, what: &'static str, info: &ProfilerInfo<'_>, object: Option<ObjectId<'_>>) {
            let handle_object_refused = self.handle.lock().unwrap().as_ref().is_some_and(|h| {
                matches!(h.object(info), Err(crate::error::Error::GcMayRun { .. }))
            });
            let seen = ScopeSeen {
                gc_blocked: info.gc_blocked(),
                initial_object: object.map(|o| o.as_sys()),
                handle_object_refused,
                refused: object.map(|o| refusals(info, o)).unwrap_or_default(),
            };
            self.seen.lock().unwrap().push((what, seen));
        }
    }

    impl Profiler for Arc<ScopeProbe> {
        fn initialize(&self, _info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
            Ok((EventMask::MONITOR_GC | EventMask::MONITOR_OBJECT_ALLOCATED).into())
        }
        fn object_allocated(&self, info: &ProfilerInfo, object: ObjectId<'_>, _class: ClassId<'_>) {
            let handle = info.create_handle(object, crate::handles::HandleKind::Strong);
            *self.handle.lock().unwrap() = handle.ok();
            // A type load here could start a GC that moves `object`.
            // SAFETY: [test-fake] (test) refused before the fake is asked anything.
            let module = unsafe { RawModuleId(0x10).assume_valid() };
            if matches!(
                info.class_from_token(module, MdTypeDef::from_rid(2)),
                Err(crate::error::Error::Usage(_))
            ) {
                self.type_load_refused.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn moved_references(&self, info: &ProfilerInfo, ranges: crate::gc::GcRanges<'_>) {
            for range in ranges.iter() {
                // SAFETY: [test-fake] (test) stands for an object a safe caller could
                // hold here (a frozen object of the non-GC heap); every
                // reader must refuse before the fake reads anything.
                let object = unsafe { range.new_start.assume_valid() };
                self.note("MovedReferences2", info, Some(object));
            }
        }
        fn surviving_references(&self, info: &ProfilerInfo, ranges: crate::gc::GcRanges<'_>) {
            for range in ranges.iter() {
                // SAFETY: [test-fake] (test) as in moved_references.
                let object = unsafe { range.old_start.assume_valid() };
                self.note("SurvivingReferences2", info, Some(object));
            }
        }
        fn handle_created(
            &self,
            info: &ProfilerInfo,
            _handle: GcHandleId<'_>,
            initial_object: Option<ObjectId<'_>>,
        ) {
            self.note("HandleCreated", info, initial_object);
        }
    }

    /// Tries the three Info calls that may load types in every callback of
    /// an assembly's load, and in `ClassLoadFinished` after it.
    #[derive(Default)]
    struct LoadProbe {
        /// Per callback: how many of the three the SDK refused with
        /// `RuntimeVersion` before calling the runtime.
        refused: std::sync::Mutex<Vec<(&'static str, usize)>>,
    }

    impl LoadProbe {
        fn try_loads(&self, what: &'static str, info: &ProfilerInfo<'_>) {
            // SAFETY: [test-fake] (test) IDs the fake knows; the refusals come
            // before any call, the other calls reach only the fake.
            let (module, class) = unsafe {
                (
                    RawModuleId(0x10).assume_valid(),
                    RawClassId(0x100).assume_valid(),
                )
            };
            fn version(r: crate::error::Result<impl Sized>) -> usize {
                usize::from(matches!(
                    r,
                    Err(crate::error::Error::RuntimeVersion { called: false, .. })
                ))
            }
            let refused = version(info.class_from_token(module, MdTypeDef::from_rid(2)))
                + version(info.class_from_token_and_type_args(module, MdTypeDef::from_rid(2), &[]))
                + version(info.function_from_token_and_type_args(
                    module,
                    crate::ids::MdToken(0x0600_0001),
                    class,
                    &[],
                ));
            self.refused.lock().unwrap().push((what, refused));
        }
    }

    impl Profiler for Arc<LoadProbe> {
        fn initialize(&self, _info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
            Ok((EventMask::MONITOR_ASSEMBLY_LOADS
                | EventMask::MONITOR_MODULE_LOADS
                | EventMask::MONITOR_CLASS_LOADS)
                .into())
        }
        fn assembly_load_started(&self, info: &ProfilerInfo, _a: RawAssemblyId) {
            self.try_loads("AssemblyLoadStarted", info);
        }
        fn module_load_started(&self, info: &ProfilerInfo, _m: RawModuleId) {
            self.try_loads("ModuleLoadStarted", info);
        }
        fn module_load_finished(
            &self,
            info: &ProfilerInfo,
            _m: crate::callback::Loaded<ModuleId<'_>>,
        ) {
            self.try_loads("ModuleLoadFinished", info);
        }
        fn module_attached_to_assembly(
            &self,
            info: &ProfilerInfo,
            _m: ModuleId<'_>,
            _a: RawAssemblyId,
        ) {
            self.try_loads("ModuleAttachedToAssembly", info);
        }
        fn assembly_load_finished(
            &self,
            info: &ProfilerInfo,
            _a: crate::callback::Loaded<AssemblyId<'_>>,
        ) {
            self.try_loads("AssemblyLoadFinished", info);
        }
        fn class_load_finished(
            &self,
            info: &ProfilerInfo,
            _c: crate::callback::Loaded<ClassId<'_>>,
        ) {
            self.try_loads("ClassLoadFinished", info);
        }
    }

    #[test]
    fn net9_refuses_type_loads_inside_an_assemblys_load() {
        for major in [8u16, 9, 10] {
            let fake = FakeRuntime::with_info_version(15);
            {
                let mut st = fake.state();
                st.runtime.major = major;
                st.runtime.version_string = format!("{major}.0.0");
            }
            let probe = Arc::new(LoadProbe::default());
            let p = probe.clone();
            let mut ppv: *mut c_void = core::ptr::null_mut();
            // SAFETY: [plain-call] valid IID and out pointer.
            let hr = unsafe { create_instance(move || p, &ICorProfilerCallback4::IID, &mut ppv) };
            assert_eq!(hr.0, 0);
            // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback4 reference.
            let cb = unsafe { ICorProfilerCallback4::from_raw(ppv) };
            // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
            assert_eq!(unsafe { cb.Initialize(fake.unknown().as_raw()) }.0, 0);
            // SAFETY: [test-fake, plain-call] fake IDs and plain values, in
            // the order the runtime issues them for one assembly.
            unsafe {
                assert_eq!(cb.AssemblyLoadStarted(0x20).0, 0);
                assert_eq!(cb.ModuleLoadStarted(0x10).0, 0);
                assert_eq!(cb.ModuleLoadFinished(0x10, HRESULT(0)).0, 0);
                assert_eq!(cb.ModuleAttachedToAssembly(0x10, 0x20).0, 0);
                assert_eq!(cb.AssemblyLoadFinished(0x20, HRESULT(0)).0, 0);
                assert_eq!(cb.ClassLoadFinished(0x100, HRESULT(0)).0, 0);
            }
            let refused = probe.refused.lock().unwrap().clone();
            let inside = if major == 9 { 3 } else { 0 };
            assert_eq!(
                refused,
                [
                    ("AssemblyLoadStarted", inside),
                    ("ModuleLoadStarted", inside),
                    ("ModuleLoadFinished", inside),
                    ("ModuleAttachedToAssembly", inside),
                    ("AssemblyLoadFinished", inside),
                    // The load is over: the calls reach the runtime.
                    ("ClassLoadFinished", 0),
                ],
                ".NET {major}"
            );
            let asked = fake.call_count("GetClassFromToken");
            assert_eq!(asked, if major == 9 { 1 } else { 6 }, ".NET {major}");
            let err = {
                // SAFETY: [test-fake] the fake's objects describe memory this test owns.
                let info = unsafe { fake.profiler_info() };
                let _loading = crate::info::AssemblyLoading::enter();
                // SAFETY: [test-fake] (test) a module the fake knows of.
                let module = unsafe { RawModuleId(0x10).assume_valid() };
                info.class_from_token(module, MdTypeDef::from_rid(2))
            };
            if major == 9 {
                let text = err.unwrap_err().to_string();
                assert!(text.contains(".NET 9") && text.contains("9.0.23"), "{text}");
            }
            // Closed again once the scope ends.
            assert!(!crate::info::AssemblyLoading::on_this_thread());
        }
    }

    #[test]
    fn gc_callbacks_that_do_not_block_collections_refuse_every_object_reader() {
        const OBJECT: usize = 0x7000;
        // .NET 8's interfaces: GC handles (Info13), EnumerateObjectReferences (Info10).
        let fake = FakeRuntime::with_info_version(14);
        fake.state().objects.insert(
            OBJECT,
            crate::testing::fake::FakeObject {
                class: 0x100,
                size: 24,
                array: None,
            },
        );
        let probe = Arc::new(ScopeProbe::default());
        let p = probe.clone();
        let mut ppv: *mut c_void = core::ptr::null_mut();
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr = unsafe { create_instance(move || p, &ICorProfilerCallback4::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback4 reference.
        let cb = unsafe { ICorProfilerCallback4::from_raw(ppv) };
        // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
        assert_eq!(unsafe { cb.Initialize(fake.unknown().as_raw()) }.0, 0);
        // SAFETY: [test-fake] a fake object and class; no memory behind them is read.
        assert_eq!(unsafe { cb.ObjectAllocated(OBJECT, 0x100) }.0, 0);
        assert!(
            probe.handle.lock().unwrap().is_some(),
            "handle made in ObjectAllocated"
        );
        assert_eq!(probe.type_load_refused.load(Ordering::SeqCst), 1);
        assert_eq!(fake.call_count("GetClassFromToken"), 0);

        let calls = fake.state().calls.len();
        let (old, new, len) = ([OBJECT], [OBJECT + 0x100], [24usize]);
        // SAFETY: [test-fake, callback-args] arrays of one entry each, alive for the calls.
        unsafe {
            assert_eq!(
                cb.MovedReferences2(1, old.as_ptr(), new.as_ptr(), len.as_ptr())
                    .0,
                0
            );
            assert_eq!(cb.SurvivingReferences2(1, old.as_ptr(), len.as_ptr()).0, 0);
        }
        // An empty handle (created in preemptive mode).
        // SAFETY: [test-fake, plain-call] plain values.
        assert_eq!(unsafe { cb.HandleCreated(0xB000, 0) }.0, 0);
        // Every refusal so far came before any call into the runtime.
        let after: Vec<_> = fake.state().calls[calls..]
            .iter()
            .map(|c| c.method)
            .collect();
        assert!(after.is_empty(), "{after:?}");
        // A handle made with an object.
        // SAFETY: [test-fake, plain-call] plain values.
        assert_eq!(unsafe { cb.HandleCreated(0xB008, OBJECT) }.0, 0);
        let seen = probe.seen.lock().unwrap().clone();
        let names: Vec<_> = seen.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "MovedReferences2",
                "SurvivingReferences2",
                "HandleCreated",
                "HandleCreated"
            ]
        );
        for (what, s) in &seen {
            assert!(!s.gc_blocked, "{what}: not a GC-blocked scope");
            assert!(s.handle_object_refused, "{what}: GcHandle::object refused");
        }
        // No object of MovedReferences2 / SurvivingReferences2 is readable.
        for (what, s) in &seen[..2] {
            let allowed: Vec<_> = s.refused.iter().filter(|(_, r)| !r).collect();
            assert!(
                allowed.is_empty(),
                "{what}: readers not refused: {allowed:?}"
            );
            assert_eq!(s.refused.len(), 12);
        }
        // HandleCreated: no object for an empty handle; a non-null one is
        // typed (the creator is in cooperative mode) but heap references
        // are not followed, since the scope blocks no collection.
        assert_eq!(seen[2].1.initial_object, None);
        assert_eq!(seen[3].1.initial_object, Some(OBJECT));
        let handle_created: Vec<_> = seen[3].1.refused.iter().filter(|(_, r)| *r).collect();
        assert_eq!(handle_created, [&("object_references", true)]);
    }

    /// Records, per callback, whether a wait for a runtime suspension is
    /// refused there and whether the scope is the load of module 0x2000.
    #[derive(Default)]
    struct WaitProbe {
        seen: std::sync::Mutex<Vec<(&'static str, bool, bool)>>,
    }

    impl WaitProbe {
        fn note(&self, what: &'static str, info: &ProfilerInfo<'_>) {
            self.seen.lock().unwrap().push((
                what,
                info.wait_would_deadlock().is_some(),
                info.in_load_of(RawModuleId(0x2000)),
            ));
        }
    }

    impl Profiler for Arc<WaitProbe> {
        fn initialize(&self, _info: &ProfilerInfo) -> crate::error::Result<EventMasks> {
            Ok((EventMask::MONITOR_GC
                | EventMask::MONITOR_SUSPENDS
                | EventMask::MONITOR_MODULE_LOADS
                | EventMask::MONITOR_JIT_COMPILATION
                | EventMask::MONITOR_OBJECT_ALLOCATED
                | EventMask::MONITOR_EXCEPTIONS)
                .into())
        }
        fn module_load_finished(
            &self,
            info: &ProfilerInfo,
            _module: crate::callback::Loaded<ModuleId<'_>>,
        ) {
            self.note("ModuleLoadFinished", info);
        }
        fn jit_compilation_started(&self, info: &ProfilerInfo, _f: FunctionId<'_>, _safe: bool) {
            self.note("JITCompilationStarted", info);
        }
        fn object_allocated(&self, info: &ProfilerInfo, _o: ObjectId<'_>, _c: ClassId<'_>) {
            self.note("ObjectAllocated", info);
        }
        fn garbage_collection_started(&self, info: &ProfilerInfo, _g: GenerationSet, _r: GcReason) {
            self.note("GarbageCollectionStarted", info);
        }
        fn garbage_collection_finished(&self, info: &ProfilerInfo) {
            self.note("GarbageCollectionFinished", info);
        }
        fn runtime_suspend_started(&self, info: &ProfilerInfo, _r: SuspendReason) {
            self.note("RuntimeSuspendStarted", info);
        }
        fn runtime_suspend_finished(&self, info: &ProfilerInfo) {
            self.note("RuntimeSuspendFinished", info);
        }
        fn runtime_resume_started(&self, info: &ProfilerInfo) {
            self.note("RuntimeResumeStarted", info);
        }
        fn exception_search_function_enter(&self, info: &ProfilerInfo, _f: FunctionId<'_>) {
            self.note("ExceptionSearchFunctionEnter", info);
        }
        fn exception_unwind_function_enter(&self, info: &ProfilerInfo, _f: FunctionId<'_>) {
            self.note("ExceptionUnwindFunctionEnter", info);
        }
        fn exception_unwind_function_leave(&self, info: &ProfilerInfo) {
            self.note("ExceptionUnwindFunctionLeave", info);
        }
        fn exception_unwind_finally_enter(&self, info: &ProfilerInfo, _f: FunctionId<'_>) {
            self.note("ExceptionUnwindFinallyEnter", info);
        }
        fn exception_unwind_finally_leave(&self, info: &ProfilerInfo) {
            self.note("ExceptionUnwindFinallyLeave", info);
        }
        fn exception_catcher_leave(&self, info: &ProfilerInfo) {
            self.note("ExceptionCatcherLeave", info);
        }
        fn handle_created(
            &self,
            info: &ProfilerInfo,
            _h: crate::ids::GcHandleId<'_>,
            _o: Option<ObjectId<'_>>,
        ) {
            self.note("HandleCreated", info);
        }
        fn handle_destroyed(&self, info: &ProfilerInfo, _h: crate::ids::GcHandleId<'_>) {
            self.note("HandleDestroyed", info);
        }
    }

    #[test]
    fn scopes_say_where_a_wait_for_a_suspension_would_hang_and_which_module_loads() {
        let fake = FakeRuntime::with_info_version(10);
        let probe = Arc::new(WaitProbe::default());
        let p = probe.clone();
        let mut ppv: *mut c_void = core::ptr::null_mut();
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr = unsafe { create_instance(move || p, &ICorProfilerCallback4::IID, &mut ppv) };
        assert_eq!(hr.0, 0);
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback4 reference.
        let cb = unsafe { ICorProfilerCallback4::from_raw(ppv) };
        // SAFETY: [test-fake, plain-call] the fake's IUnknown is a valid
        // profiler-info object; the other arguments are plain values no
        // callback here dereferences (an empty generation list).
        unsafe {
            assert_eq!(cb.Initialize(fake.unknown().as_raw()).0, 0);
            assert_eq!(cb.ModuleLoadFinished(0x2000, HRESULT(0)).0, 0);
            assert_eq!(cb.ModuleLoadFinished(0x3000, HRESULT(0)).0, 0);
            assert_eq!(cb.ModuleLoadFinished(0x2000, HRESULT(-1)).0, 0);
            assert_eq!(cb.JITCompilationStarted(0x1234, 1).0, 0);
            assert_eq!(cb.ObjectAllocated(0x7000, 0x100).0, 0);
            assert_eq!(cb.RuntimeSuspendStarted(1).0, 0);
            assert_eq!(cb.RuntimeSuspendFinished().0, 0);
            assert_eq!(cb.GarbageCollectionStarted(0, core::ptr::null(), 0).0, 0);
            assert_eq!(cb.GarbageCollectionFinished().0, 0);
            assert_eq!(cb.RuntimeResumeStarted().0, 0);
            // The unwind phase's callbacks run in cooperative mode (the
            // fresh review of issue 42); the search phase's do not.
            assert_eq!(cb.ExceptionSearchFunctionEnter(0x1234).0, 0);
            assert_eq!(cb.ExceptionUnwindFunctionEnter(0x1234).0, 0);
            assert_eq!(cb.ExceptionUnwindFinallyEnter(0x1234).0, 0);
            assert_eq!(cb.ExceptionUnwindFinallyLeave().0, 0);
            assert_eq!(cb.ExceptionUnwindFunctionLeave().0, 0);
            assert_eq!(cb.ExceptionCatcherLeave().0, 0);
            // So do the GC handle callbacks of managed code's handles.
            assert_eq!(cb.HandleCreated(0x5000, 0).0, 0);
            assert_eq!(cb.HandleDestroyed(0x5000).0, 0);
        }
        let seen = probe.seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                ("ModuleLoadFinished", false, true),
                ("ModuleLoadFinished", false, false),
                ("ModuleLoadFinished", false, false),
                ("JITCompilationStarted", false, false),
                ("ObjectAllocated", true, false),
                ("RuntimeSuspendStarted", true, false),
                ("RuntimeSuspendFinished", true, false),
                ("GarbageCollectionStarted", true, false),
                ("GarbageCollectionFinished", true, false),
                ("RuntimeResumeStarted", true, false),
                ("ExceptionSearchFunctionEnter", false, false),
                ("ExceptionUnwindFunctionEnter", true, false),
                ("ExceptionUnwindFinallyEnter", true, false),
                ("ExceptionUnwindFinallyLeave", true, false),
                ("ExceptionUnwindFunctionLeave", true, false),
                ("ExceptionCatcherLeave", true, false),
                ("HandleCreated", true, false),
                ("HandleDestroyed", true, false),
            ]
        );
    }

    #[test]
    fn callbacks_before_initialize_are_ignored() {
        let (cb, jitted, _) = make(EventMask::MONITOR_JIT_COMPILATION);
        // SAFETY: [test-fake, plain-call] plain values.
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
        // SAFETY: [plain-call] valid IID and out pointer.
        let hr = unsafe { create_instance(move || probe, &foreign, &mut ppv) };
        assert_eq!(hr.0, KnownHresult::E_NOINTERFACE as i32);
        assert!(ppv.is_null());
    }
}
