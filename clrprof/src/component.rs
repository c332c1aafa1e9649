//! SDK components: parts of the SDK that need callbacks of their own.
//!
//! Some SDK parts are only correct if they hear about the runtime's
//! lifecycle: the sampler must not walk a thread after its
//! `ThreadDestroyed` returned, nor name a function whose class has begun to
//! unload; the name cache must forget a `FunctionID` the runtime recycles
//! for another dynamic method; ELT records must follow their function's
//! lifetime; shadow stacks must pop the frames an exception unwinds; attach
//! catch-up must see loads that race its enumeration. Such a part is a
//! [`Component`]: it registers itself in `Initialize`
//! ([`ProfilerInfo::register`]) with the event masks it needs, and from then
//! on the SDK's callback object delivers those callbacks to it, before or
//! after the profiler's own callback as the order below says. The profiler
//! writes no forwarding code and cannot forget any. This is the shape of
//! tracing-subscriber's layers: independent parts composed around one
//! dispatcher, each seeing the events it registered for.
//!
//! # Order
//! - Events that create or begin something (`ThreadCreated`,
//!   `ModuleLoadFinished`, `JITCompilationFinished`, `ReJITCompilationFinished`,
//!   `DynamicMethodJITCompilationFinished`, `JITCachedFunctionSearchFinished`,
//!   `ProfilerAttachComplete`,
//!   `ExceptionThrown`, `ExceptionSearchFunctionEnter`) reach components
//!   **before** the profiler, so a
//!   profiler's callback already sees the component up to date.
//! - Events that end something (`ThreadDestroyed`, `ModuleUnloadStarted`,
//!   `ClassUnloadStarted`, `DynamicMethodUnloaded`, the exception search's
//!   leave and catcher, the unwind callbacks, `Shutdown`) reach components
//!   **after** the profiler, so the
//!   profiler can still use what the component knows (a cached name, a
//!   shadow stack) about what is going away.
//! - Components among themselves: in registration order.
//!
//! A panic in a component is contained like one in a callback (logged; the
//! other components and the profiler still run).

use crate::error::{Error, Result, HRESULT};
use crate::event_mask::EventMasks;
use crate::guard::guard;
use crate::ids::*;
use crate::info::ProfilerInfo;
use std::cell::Cell;
use std::sync::{Arc, Mutex};

/// A part of the SDK (or of a profiler) that receives lifecycle callbacks
/// from the SDK itself. See the [module docs](self).
///
/// Every method has an empty default; a component implements those it
/// needs and asks for their events through [`Component::masks`].
#[allow(unused_variables)]
pub trait Component: Send + Sync + 'static {
    /// A short name, for logs.
    fn name(&self) -> &'static str;

    /// The event masks the component needs; the SDK adds them to the
    /// profiler's own when it sets the mask at the end of `Initialize`.
    fn masks(&self) -> EventMasks {
        EventMasks::default()
    }

    /// `ThreadCreated` (MONITOR_THREADS), before the profiler.
    fn thread_created(&self, info: &ProfilerInfo, thread: ThreadId<'_>) {}
    /// `ThreadDestroyed` (MONITOR_THREADS), after the profiler.
    fn thread_destroyed(&self, info: &ProfilerInfo, thread: ThreadId<'_>) {}
    /// `ThreadAssignedToOSThread` (MONITOR_THREADS), before the profiler:
    /// the OS thread (`GetCurrentThreadId`; on Linux the kernel's thread ID)
    /// the managed thread runs on from now.
    fn thread_assigned_to_os_thread(
        &self,
        info: &ProfilerInfo,
        thread: ThreadId<'_>,
        os_thread_id: u32,
    ) {
    }
    /// `ThreadNameChanged` (MONITOR_THREADS), before the profiler.
    fn thread_name_changed(
        &self,
        info: &ProfilerInfo,
        thread: ThreadId<'_>,
        name: crate::wide::WideStr<'_>,
    ) {
    }
    /// `ModuleLoadFinished` (MONITOR_MODULE_LOADS), before the profiler.
    /// Only successful loads reach components.
    fn module_load_finished(&self, info: &ProfilerInfo, module: ModuleId<'_>) {}
    /// `JITCompilationFinished` (MONITOR_JIT_COMPILATION), before the
    /// profiler. Only successful compilations reach components.
    fn jit_compilation_finished(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `JITCachedFunctionSearchFinished` (MONITOR_CACHE_SEARCHES), before
    /// the profiler: precompiled (ReadyToRun) code of `function` was found
    /// and will run. Only searches that found code reach components.
    fn jit_cached_function_search_finished(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ReJITCompilationFinished`, before the profiler. Only successful
    /// compilations reach components.
    fn rejit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        rejit: RawReJitId,
    ) {
    }
    /// `DynamicMethodJITCompilationFinished` (Callback8, MONITOR_JIT_COMPILATION),
    /// before the profiler. Only successful compilations reach components.
    fn dynamic_method_jit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
    ) {
    }
    /// `ModuleUnloadStarted` (MONITOR_MODULE_LOADS), after the profiler.
    fn module_unload_started(&self, info: &ProfilerInfo, module: ModuleId<'_>) {}
    /// `ClassUnloadStarted` (MONITOR_CLASS_LOADS), after the profiler.
    fn class_unload_started(&self, info: &ProfilerInfo, class: ClassId<'_>) {}
    /// `DynamicMethodUnloaded` (HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS),
    /// after the profiler. The ID is raw: the method is gone, and the
    /// runtime may hand the same `FunctionID` to the next dynamic method.
    fn dynamic_method_unloaded(&self, info: &ProfilerInfo, function: RawFunctionId) {}
    /// `ExceptionThrown` (MONITOR_EXCEPTIONS), before the profiler.
    fn exception_thrown(&self, info: &ProfilerInfo, exception: ObjectId<'_>) {}
    /// `ExceptionSearchFunctionEnter` (MONITOR_EXCEPTIONS), before the profiler.
    fn exception_search_function_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ExceptionSearchFunctionLeave` (MONITOR_EXCEPTIONS), after the profiler.
    fn exception_search_function_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionSearchCatcherFound` (MONITOR_EXCEPTIONS), after the profiler.
    fn exception_search_catcher_found(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// Whether the component receives the unwind callbacks below
    /// (`exception_unwind_function_enter`, `exception_unwind_function_leave`,
    /// `exception_catcher_enter`). The runtime makes them for every frame an
    /// exception unwinds; a component that implements none of them returns
    /// `false`, and when no component of the runtime wants them the SDK
    /// does not run its delivery loop for them. Asked once, at the end of
    /// `Initialize`. Default: `true`.
    fn receives_unwinds(&self) -> bool {
        true
    }
    /// `ExceptionUnwindFunctionEnter` (MONITOR_EXCEPTIONS), after the profiler.
    fn exception_unwind_function_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ExceptionUnwindFunctionLeave` (MONITOR_EXCEPTIONS), after the profiler.
    fn exception_unwind_function_leave(&self, info: &ProfilerInfo) {}
    /// `ExceptionCatcherEnter` (MONITOR_EXCEPTIONS), after the profiler.
    fn exception_catcher_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {}
    /// `ProfilerAttachComplete`, before the profiler.
    fn profiler_attach_complete(&self, info: &ProfilerInfo) {}
    /// A runtime allocation event (see [`crate::allocations`]), before the
    /// profiler's [`Profiler::allocation_sampled`](crate::Profiler::allocation_sampled).
    /// Needs an EventPipe session with the runtime's provider, which some
    /// other part starts, and `HIGH_MONITOR_EVENT_PIPE` in the masks.
    fn allocation_sampled(
        &self,
        info: &ProfilerInfo,
        sample: &crate::allocations::AllocationSample<'_>,
    ) {
    }
    /// `GarbageCollectionStarted` (`MONITOR_GC` or `HIGH_BASIC_GC`), before
    /// the profiler.
    fn garbage_collection_started(
        &self,
        info: &ProfilerInfo,
        generations: crate::gc::GenerationSet,
        reason: crate::gc::GcReason,
    ) {
    }
    /// `GarbageCollectionFinished` (`MONITOR_GC` or `HIGH_BASIC_GC`), after
    /// the profiler.
    fn garbage_collection_finished(&self, info: &ProfilerInfo) {}
    /// `ObjectReferences` (`MONITOR_GC`), before the profiler: return
    /// `false` to want no more of them in this collection (the runtime
    /// stops only once neither the profiler nor any component wants more).
    fn object_references(
        &self,
        info: &ProfilerInfo,
        object: ObjectId<'_>,
        class: ClassId<'_>,
        references: &[ObjectId<'_>],
    ) -> bool {
        false
    }
    /// `Shutdown`, after the profiler.
    fn shutdown(&self, info: &ProfilerInfo) {}
    /// `ProfilerDetachSucceeded`, after the profiler: the last moment the
    /// component may run; the runtime unloads the library next.
    fn profiler_detach_succeeded(&self, info: &ProfilerInfo) {}
}

/// Collects the components registered during one `Initialize`.
#[derive(Default)]
pub struct Registrar {
    components: Mutex<Vec<Arc<dyn Component>>>,
}

thread_local! {
    // reentrancy: initialize-registrar
    /// The registrar of the `Initialize` running on this thread, if any. A
    /// `ProfilerInfo` cannot leave the thread that received it, so an
    /// `Initialize` scope's `register` always runs where this is set.
    static REGISTRAR: Cell<*const Registrar> = const { Cell::new(core::ptr::null()) };
}

impl Registrar {
    /// Runs `f` (the profiler's `initialize`) with this registrar as the
    /// thread's current one.
    pub(crate) fn during<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Reset(*const Registrar);
        impl Drop for Reset {
            fn drop(&mut self) {
                let _ = REGISTRAR.try_with(|r| r.set(self.0));
            }
        }
        let outer = REGISTRAR
            .try_with(|r| r.replace(self as *const Registrar))
            .unwrap_or(core::ptr::null());
        let _reset = Reset(outer);
        f()
    }

    /// Calls `f` with the thread's current registrar, if an `Initialize`
    /// runs on it.
    fn with_current<R>(f: impl FnOnce(&Registrar) -> R) -> Option<R> {
        let current = REGISTRAR.try_with(|r| r.get()).ok()?;
        // SAFETY: [local-memory] a non-null REGISTRAR was set by `during` from a `&self`
        // that outlives the call `during` makes, and is reset before
        // `during` returns (also when it unwinds, through `Reset`).
        (!current.is_null()).then(|| f(unsafe { &*current }))
    }

    pub(crate) fn add(&self, component: Arc<dyn Component>) {
        let mut list = self.components.lock().unwrap_or_else(|e| e.into_inner());
        list.push(component);
    }

    pub(crate) fn finish(self) -> Components {
        let list = self
            .components
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        let unwinds = list
            .iter()
            .filter(|c| c.receives_unwinds())
            .cloned()
            .collect();
        Components {
            list: list.into_boxed_slice(),
            unwinds,
        }
    }
}

impl ProfilerInfo<'_> {
    /// Registers an SDK component for this runtime: it receives the
    /// callbacks of [`Component`] from now on, and its
    /// [`masks`](Component::masks) are added to the profiler's.
    ///
    /// Only during `Initialize` / `InitializeForAttach`: a component that
    /// started later would have missed events it relies on (a thread
    /// created before it, an unload). Elsewhere this is
    /// [`Error::NotInInitialize`].
    pub fn register(&self, component: Arc<dyn Component>) -> Result<()> {
        let refused = Error::NotInInitialize {
            call: "ProfilerInfo::register",
        };
        if !self.in_initialize() {
            return Err(refused);
        }
        Registrar::with_current(|r| r.add(component)).ok_or(refused)
    }
}

/// The components of one runtime, fixed at the end of `Initialize`.
#[derive(Default)]
pub(crate) struct Components {
    list: Box<[Arc<dyn Component>]>,
    /// Those of `list` that receive the unwind callbacks
    /// ([`Component::receives_unwinds`]), in the same order.
    unwinds: Box<[Arc<dyn Component>]>,
}

impl Components {
    /// The union of every component's masks.
    pub(crate) fn masks(&self) -> EventMasks {
        self.list.iter().fold(EventMasks::default(), |m, c| {
            let c = c.masks();
            EventMasks {
                low: m.low | c.low,
                high: m.high | c.high,
            }
        })
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Delivers one event to every component, each under the panic guard.
    ///
    /// Out of line: the loop keeps its place in callee-saved registers, and
    /// inlined it made every callback that may reach a component save and
    /// restore six of them, components or not (callgrind, the exception
    /// callbacks of a profiler without components: 296 instructions per
    /// exception inside the library inlined, 211 out of line).
    /// A single component (the common case: the unhandled-exception
    /// watch alone) takes no loop: the loop's registers cost the exception
    /// callbacks 8 saves and restores each (the instruction gate).
    #[inline(never)]
    pub(crate) fn each(&self, entry: &'static str, f: impl Fn(&dyn Component)) {
        match &*self.list {
            [only] => guard(entry, (), || f(&**only)),
            list => each_of(list, entry, f),
        }
    }

    /// Delivers an unwind callback to the components that receive them
    /// ([`Component::receives_unwinds`]); with none, the caller skips the
    /// call (see [`Components::receive_unwinds`]).
    #[inline(never)]
    pub(crate) fn each_unwind(&self, entry: &'static str, f: impl Fn(&dyn Component)) {
        match &*self.unwinds {
            [only] => guard(entry, (), || f(&**only)),
            list => each_of(list, entry, f),
        }
    }

    /// Whether any component receives the unwind callbacks.
    #[inline]
    pub(crate) fn receive_unwinds(&self) -> bool {
        !self.unwinds.is_empty()
    }
}

/// `true` for a successful `*Finished` status.
#[inline]
pub(crate) fn succeeded(status: HRESULT) -> bool {
    status.0 >= 0
}

/// Delivers one event to each of `list`, each under the panic guard (the
/// loop of [`Components::each`], out of line).
#[inline(never)]
fn each_of(list: &[Arc<dyn Component>], entry: &'static str, f: impl Fn(&dyn Component)) {
    for c in list {
        guard(entry, (), || f(&**c));
    }
}
