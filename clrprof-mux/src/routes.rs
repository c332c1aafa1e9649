//! Which child receives which callback.
//!
//! A callback reaches a child when the child's own event mask has one of the
//! callback's flags. These are the runtime's own rules for delivering a
//! callback to each of several profilers (the main profiler and the
//! notification profilers of .NET 5 and later: one per-profiler condition
//! per callback, e.g. `COR_PRF_MONITOR_GC` or `COR_PRF_HIGH_BASIC_GC` for
//! `GarbageCollectionStarted`), so a child sees exactly the callbacks the
//! runtime would send it if it were loaded alone with the same mask. The
//! generated dispatch (`callback_impl.rs`) names one route per callback; a
//! callback without a route here does not compile.

#![allow(non_upper_case_globals)]

use clrprof::sys::*;

/// The flags that make a callback reach a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// `COR_PRF_MONITOR` flags, any of which delivers the callback.
    pub low: u32,
    /// `COR_PRF_HIGH_MONITOR` flags, any of which delivers the callback.
    pub high: u32,
    /// `COR_PRF_HIGH_MONITOR` flags any of which keeps the callback from
    /// the child although `low` or `high` would deliver it (the runtime's
    /// negative flags, e.g. .NET 11's skip of `ObjectsAllocatedByClass`).
    pub unless_high: u32,
}

impl Route {
    /// Delivered to every child, whatever its mask (lifecycle callbacks).
    pub const ALWAYS: Route = Route {
        low: u32::MAX,
        high: u32::MAX,
        unless_high: 0,
    };

    const fn low(low: u32) -> Route {
        Route {
            low,
            high: 0,
            unless_high: 0,
        }
    }

    const fn high(high: u32) -> Route {
        Route {
            low: 0,
            high,
            unless_high: 0,
        }
    }

    /// Whether a child with these masks receives the callback.
    #[inline]
    pub fn delivers(self, masks: u64) -> bool {
        let low = masks as u32;
        let high = (masks >> 32) as u32;
        self == Route::ALWAYS
            || (low & self.low != 0 || high & self.high != 0) && high & self.unless_high == 0
    }
}

const APPDOMAINS: Route = Route::low(COR_PRF_MONITOR_APPDOMAIN_LOADS);
const ASSEMBLIES: Route = Route::low(COR_PRF_MONITOR_ASSEMBLY_LOADS);
const MODULES: Route = Route::low(COR_PRF_MONITOR_MODULE_LOADS);
const CLASSES: Route = Route::low(COR_PRF_MONITOR_CLASS_LOADS);
const JIT: Route = Route::low(COR_PRF_MONITOR_JIT_COMPILATION);
const CACHE_SEARCHES: Route = Route::low(COR_PRF_MONITOR_CACHE_SEARCHES);
const THREADS: Route = Route::low(COR_PRF_MONITOR_THREADS);
const REMOTING: Route = Route::low(COR_PRF_MONITOR_REMOTING);
const TRANSITIONS: Route = Route::low(COR_PRF_MONITOR_CODE_TRANSITIONS);
const SUSPENDS: Route = Route::low(COR_PRF_MONITOR_SUSPENDS);
const GC: Route = Route::low(COR_PRF_MONITOR_GC);
const GC_OR_BASIC: Route = Route {
    low: COR_PRF_MONITOR_GC,
    high: COR_PRF_HIGH_BASIC_GC,
    unless_high: 0,
};
const GC_OR_MOVED: Route = Route {
    low: COR_PRF_MONITOR_GC,
    high: COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS,
    unless_high: 0,
};
const EXCEPTIONS: Route = Route::low(COR_PRF_MONITOR_EXCEPTIONS);
const CLR_EXCEPTIONS: Route = Route::low(COR_PRF_MONITOR_CLR_EXCEPTIONS);
const CCW: Route = Route::low(COR_PRF_MONITOR_CCW);
const REJIT: Route = Route::low(COR_PRF_ENABLE_REJIT);
const EVENT_PIPE: Route = Route::high(COR_PRF_HIGH_MONITOR_EVENT_PIPE);

// ICorProfilerCallback
pub(crate) const Shutdown: Route = Route::ALWAYS;
pub(crate) const AppDomainCreationStarted: Route = APPDOMAINS;
pub(crate) const AppDomainCreationFinished: Route = APPDOMAINS;
pub(crate) const AppDomainShutdownStarted: Route = APPDOMAINS;
pub(crate) const AppDomainShutdownFinished: Route = APPDOMAINS;
pub(crate) const AssemblyLoadStarted: Route = ASSEMBLIES;
pub(crate) const AssemblyLoadFinished: Route = ASSEMBLIES;
pub(crate) const AssemblyUnloadStarted: Route = ASSEMBLIES;
pub(crate) const AssemblyUnloadFinished: Route = ASSEMBLIES;
pub(crate) const ModuleLoadStarted: Route = MODULES;
pub(crate) const ModuleLoadFinished: Route = MODULES;
pub(crate) const ModuleUnloadStarted: Route = MODULES;
pub(crate) const ModuleUnloadFinished: Route = MODULES;
pub(crate) const ModuleAttachedToAssembly: Route = MODULES;
pub(crate) const ClassLoadStarted: Route = CLASSES;
pub(crate) const ClassLoadFinished: Route = CLASSES;
pub(crate) const ClassUnloadStarted: Route = CLASSES;
pub(crate) const ClassUnloadFinished: Route = CLASSES;
pub(crate) const FunctionUnloadStarted: Route = Route::low(COR_PRF_MONITOR_FUNCTION_UNLOADS);
pub(crate) const JITCompilationStarted: Route = JIT;
pub(crate) const JITCompilationFinished: Route = JIT;
pub(crate) const JITCachedFunctionSearchStarted: Route = CACHE_SEARCHES;
pub(crate) const JITCachedFunctionSearchFinished: Route = CACHE_SEARCHES;
pub(crate) const JITFunctionPitched: Route = JIT;
pub(crate) const JITInlining: Route = JIT;
pub(crate) const ThreadCreated: Route = THREADS;
pub(crate) const ThreadDestroyed: Route = THREADS;
pub(crate) const ThreadAssignedToOSThread: Route = THREADS;
pub(crate) const RemotingClientInvocationStarted: Route = REMOTING;
pub(crate) const RemotingClientSendingMessage: Route = REMOTING;
pub(crate) const RemotingClientReceivingReply: Route = REMOTING;
pub(crate) const RemotingClientInvocationFinished: Route = REMOTING;
pub(crate) const RemotingServerReceivingMessage: Route = REMOTING;
pub(crate) const RemotingServerInvocationStarted: Route = REMOTING;
pub(crate) const RemotingServerInvocationReturned: Route = REMOTING;
pub(crate) const RemotingServerSendingReply: Route = REMOTING;
pub(crate) const UnmanagedToManagedTransition: Route = TRANSITIONS;
pub(crate) const ManagedToUnmanagedTransition: Route = TRANSITIONS;
pub(crate) const RuntimeSuspendStarted: Route = SUSPENDS;
pub(crate) const RuntimeSuspendFinished: Route = SUSPENDS;
pub(crate) const RuntimeSuspendAborted: Route = SUSPENDS;
pub(crate) const RuntimeResumeStarted: Route = SUSPENDS;
pub(crate) const RuntimeResumeFinished: Route = SUSPENDS;
pub(crate) const RuntimeThreadSuspended: Route = SUSPENDS;
pub(crate) const RuntimeThreadResumed: Route = SUSPENDS;
pub(crate) const MovedReferences: Route = GC_OR_MOVED;
/// The runtime's per-profiler condition is `ENABLE_OBJECT_ALLOCATED` or
/// `HIGH_MONITOR_LARGEOBJECT_ALLOCATED`; the monitor flag and the pinned
/// heap's flag deliver it too, so a child never misses what it asked for.
pub(crate) const ObjectAllocated: Route = Route {
    low: COR_PRF_MONITOR_OBJECT_ALLOCATED | COR_PRF_ENABLE_OBJECT_ALLOCATED,
    high: COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED | COR_PRF_HIGH_MONITOR_PINNEDOBJECT_ALLOCATED,
    unless_high: 0,
};
/// `MONITOR_GC`, unless the child asked to skip it
/// (`COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC`, .NET 11:
/// the runtime then sends none, see `Shared::union_with`).
pub(crate) const ObjectsAllocatedByClass: Route = Route {
    low: COR_PRF_MONITOR_GC,
    high: 0,
    unless_high: COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC,
};
pub(crate) const ObjectReferences: Route = GC;
pub(crate) const RootReferences: Route = GC;
pub(crate) const ExceptionThrown: Route = EXCEPTIONS;
pub(crate) const ExceptionSearchFunctionEnter: Route = EXCEPTIONS;
pub(crate) const ExceptionSearchFunctionLeave: Route = EXCEPTIONS;
pub(crate) const ExceptionSearchFilterEnter: Route = EXCEPTIONS;
pub(crate) const ExceptionSearchFilterLeave: Route = EXCEPTIONS;
pub(crate) const ExceptionSearchCatcherFound: Route = EXCEPTIONS;
pub(crate) const ExceptionOSHandlerEnter: Route = EXCEPTIONS;
pub(crate) const ExceptionOSHandlerLeave: Route = EXCEPTIONS;
pub(crate) const ExceptionUnwindFunctionEnter: Route = EXCEPTIONS;
pub(crate) const ExceptionUnwindFunctionLeave: Route = EXCEPTIONS;
pub(crate) const ExceptionUnwindFinallyEnter: Route = EXCEPTIONS;
pub(crate) const ExceptionUnwindFinallyLeave: Route = EXCEPTIONS;
pub(crate) const ExceptionCatcherEnter: Route = EXCEPTIONS;
pub(crate) const ExceptionCatcherLeave: Route = EXCEPTIONS;
pub(crate) const COMClassicVTableCreated: Route = CCW;
pub(crate) const COMClassicVTableDestroyed: Route = CCW;
pub(crate) const ExceptionCLRCatcherFound: Route = CLR_EXCEPTIONS;
pub(crate) const ExceptionCLRCatcherExecute: Route = CLR_EXCEPTIONS;

// ICorProfilerCallback2
pub(crate) const ThreadNameChanged: Route = THREADS;
pub(crate) const GarbageCollectionStarted: Route = GC_OR_BASIC;
pub(crate) const SurvivingReferences: Route = GC;
pub(crate) const GarbageCollectionFinished: Route = GC_OR_BASIC;
pub(crate) const FinalizeableObjectQueued: Route = GC;
pub(crate) const RootReferences2: Route = GC;
pub(crate) const HandleCreated: Route = GC;
pub(crate) const HandleDestroyed: Route = GC;

// ICorProfilerCallback3
pub(crate) const ProfilerAttachComplete: Route = Route::ALWAYS;
pub(crate) const ProfilerDetachSucceeded: Route = Route::ALWAYS;

// ICorProfilerCallback4
pub(crate) const ReJITCompilationStarted: Route = REJIT;
pub(crate) const GetReJITParameters: Route = REJIT;
pub(crate) const ReJITCompilationFinished: Route = REJIT;
pub(crate) const ReJITError: Route = REJIT;
pub(crate) const MovedReferences2: Route = GC_OR_MOVED;
pub(crate) const SurvivingReferences2: Route = GC;

// ICorProfilerCallback5
pub(crate) const ConditionalWeakTableElementReferences: Route = GC;

// ICorProfilerCallback6
pub(crate) const GetAssemblyReferences: Route = Route::high(COR_PRF_HIGH_ADD_ASSEMBLY_REFERENCES);

// ICorProfilerCallback7
pub(crate) const ModuleInMemorySymbolsUpdated: Route =
    Route::high(COR_PRF_HIGH_IN_MEMORY_SYMBOLS_UPDATED);

// ICorProfilerCallback8
pub(crate) const DynamicMethodJITCompilationStarted: Route = JIT;
pub(crate) const DynamicMethodJITCompilationFinished: Route = JIT;

// ICorProfilerCallback9
pub(crate) const DynamicMethodUnloaded: Route =
    Route::high(COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS);

// ICorProfilerCallback10
pub(crate) const EventPipeEventDelivered: Route = EVENT_PIPE;
pub(crate) const EventPipeProviderCreated: Route = EVENT_PIPE;

#[cfg(test)]
mod tests {
    use super::*;

    fn masks(low: u32, high: u32) -> u64 {
        low as u64 | (high as u64) << 32
    }

    #[test]
    fn a_route_delivers_on_any_of_its_flags() {
        assert!(GarbageCollectionStarted.delivers(masks(COR_PRF_MONITOR_GC, 0)));
        assert!(GarbageCollectionStarted.delivers(masks(0, COR_PRF_HIGH_BASIC_GC)));
        assert!(!GarbageCollectionStarted.delivers(masks(COR_PRF_MONITOR_THREADS, 0)));
        assert!(!MovedReferences.delivers(masks(0, COR_PRF_HIGH_BASIC_GC)));
        assert!(Shutdown.delivers(0));
        assert!(ObjectAllocated.delivers(masks(0, COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED)));
        assert!(!JITCompilationStarted.delivers(masks(COR_PRF_MONITOR_CACHE_SEARCHES, 0)));
    }
}
