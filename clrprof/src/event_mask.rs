//! Event masks: which callbacks the runtime delivers and which runtime
//! behaviours the profiler changes (`COR_PRF_MONITOR`, `COR_PRF_HIGH_MONITOR`).
//!
//! A profiler loaded at startup returns an [`EventMasks`] from `initialize`.
//! A profiler loaded by attach can only ask for the flags the runtime allows
//! after attach (`COR_PRF_ALLOWABLE_AFTER_ATTACH` and
//! `COR_PRF_HIGH_ALLOWABLE_AFTER_ATTACH`); [`AttachEventMask`] and
//! [`AttachHighEventMask`] have only those flags, so asking for, say,
//! `MONITOR_ENTERLEAVE` from `initialize_for_attach` does not compile:
//!
//! ```compile_fail
//! let _ = clrprof::AttachEventMask::MONITOR_ENTERLEAVE;
//! ```
//!
//! Some flags are *immutable* (`COR_PRF_MONITOR_IMMUTABLE`,
//! `COR_PRF_HIGH_MONITOR_IMMUTABLE`): they can only be set or cleared during
//! `Initialize`; changing them later makes `SetEventMask` / `SetEventMask2`
//! fail with a plain `E_FAIL` (the runtime has no dedicated code for it:
//! seen on .NET Core 3.1.23 and .NET 8.0.4 in the conformance
//! dynamicoptimization scenario), which
//! [`RuntimeHandle::set_event_mask`](crate::RuntimeHandle::set_event_mask)
//! returns as [`Error::Runtime`](crate::Error::Runtime).

use bitflags::bitflags;
use clrprof_sys as sys;

bitflags! {
    /// `COR_PRF_MONITOR`: the low event mask (`SetEventMask`, `SetEventMask2`'s first word).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct EventMask: u32 {
        /// `FunctionUnloadStarted` callbacks.
        const MONITOR_FUNCTION_UNLOADS = sys::COR_PRF_MONITOR_FUNCTION_UNLOADS;
        /// `ClassLoad*`/`ClassUnload*` callbacks.
        const MONITOR_CLASS_LOADS = sys::COR_PRF_MONITOR_CLASS_LOADS;
        /// `ModuleLoad*`, `ModuleUnload*`, `ModuleAttachedToAssembly` callbacks.
        const MONITOR_MODULE_LOADS = sys::COR_PRF_MONITOR_MODULE_LOADS;
        /// `AssemblyLoad*`/`AssemblyUnload*` callbacks.
        const MONITOR_ASSEMBLY_LOADS = sys::COR_PRF_MONITOR_ASSEMBLY_LOADS;
        /// `AppDomainCreation*`/`AppDomainShutdown*` callbacks.
        const MONITOR_APPDOMAIN_LOADS = sys::COR_PRF_MONITOR_APPDOMAIN_LOADS;
        /// `JITCompilation*`, `JITInlining`, `JITFunctionPitched` callbacks.
        const MONITOR_JIT_COMPILATION = sys::COR_PRF_MONITOR_JIT_COMPILATION;
        /// Exception callbacks (first and second pass).
        const MONITOR_EXCEPTIONS = sys::COR_PRF_MONITOR_EXCEPTIONS;
        /// GC callbacks: moved/surviving references, roots, object references, handles.
        const MONITOR_GC = sys::COR_PRF_MONITOR_GC;
        /// `ObjectAllocated` callbacks (needs `ENABLE_OBJECT_ALLOCATED`, immutable).
        const MONITOR_OBJECT_ALLOCATED = sys::COR_PRF_MONITOR_OBJECT_ALLOCATED;
        /// Thread created/destroyed/assigned/named callbacks.
        const MONITOR_THREADS = sys::COR_PRF_MONITOR_THREADS;
        /// Remoting callbacks (.NET Framework only).
        const MONITOR_REMOTING = sys::COR_PRF_MONITOR_REMOTING;
        /// Managed/unmanaged transition callbacks. Immutable.
        const MONITOR_CODE_TRANSITIONS = sys::COR_PRF_MONITOR_CODE_TRANSITIONS;
        /// Enter/Leave/Tailcall hooks. Not allowed after attach.
        const MONITOR_ENTERLEAVE = sys::COR_PRF_MONITOR_ENTERLEAVE;
        /// COM-interop vtable callbacks.
        const MONITOR_CCW = sys::COR_PRF_MONITOR_CCW;
        /// Remoting cookies (implies `MONITOR_REMOTING`).
        const MONITOR_REMOTING_COOKIE = sys::COR_PRF_MONITOR_REMOTING_COOKIE;
        /// Asynchronous remoting (implies `MONITOR_REMOTING`).
        const MONITOR_REMOTING_ASYNC = sys::COR_PRF_MONITOR_REMOTING_ASYNC;
        /// Runtime suspend/resume callbacks.
        const MONITOR_SUSPENDS = sys::COR_PRF_MONITOR_SUSPENDS;
        /// `JITCachedFunctionSearch*` callbacks (ready-to-run/NGEN code).
        const MONITOR_CACHE_SEARCHES = sys::COR_PRF_MONITOR_CACHE_SEARCHES;
        /// Allows ReJIT (`RequestReJIT`). Must be set in `Initialize` on older runtimes.
        const ENABLE_REJIT = sys::COR_PRF_ENABLE_REJIT;
        /// In-process debugging (obsolete).
        const ENABLE_INPROC_DEBUGGING = sys::COR_PRF_ENABLE_INPROC_DEBUGGING;
        /// Keeps IL-to-native maps (`GetILToNativeMapping`). Immutable.
        const ENABLE_JIT_MAPS = sys::COR_PRF_ENABLE_JIT_MAPS;
        /// Disables inlining everywhere. Immutable.
        const DISABLE_INLINING = sys::COR_PRF_DISABLE_INLINING;
        /// Disables JIT optimisations. Immutable.
        const DISABLE_OPTIMIZATIONS = sys::COR_PRF_DISABLE_OPTIMIZATIONS;
        /// Makes `ObjectAllocated` possible at all. Immutable.
        const ENABLE_OBJECT_ALLOCATED = sys::COR_PRF_ENABLE_OBJECT_ALLOCATED;
        /// `ExceptionCLRCatcher*` callbacks.
        const MONITOR_CLR_EXCEPTIONS = sys::COR_PRF_MONITOR_CLR_EXCEPTIONS;
        /// Argument ranges in the WithInfo ELT hooks. Immutable.
        const ENABLE_FUNCTION_ARGS = sys::COR_PRF_ENABLE_FUNCTION_ARGS;
        /// Return value range in the WithInfo leave hook. Immutable.
        const ENABLE_FUNCTION_RETVAL = sys::COR_PRF_ENABLE_FUNCTION_RETVAL;
        /// Frame info in the WithInfo ELT hooks. Immutable.
        const ENABLE_FRAME_INFO = sys::COR_PRF_ENABLE_FRAME_INFO;
        /// Allows `DoStackSnapshot`.
        const ENABLE_STACK_SNAPSHOT = sys::COR_PRF_ENABLE_STACK_SNAPSHOT;
        /// Use profiler-enhanced NGEN images (.NET Framework). Immutable.
        const USE_PROFILE_IMAGES = sys::COR_PRF_USE_PROFILE_IMAGES;
        /// Transparency checks off under full trust (.NET Framework). Immutable.
        const DISABLE_TRANSPARENCY_CHECKS_UNDER_FULL_TRUST = sys::COR_PRF_DISABLE_TRANSPARENCY_CHECKS_UNDER_FULL_TRUST;
        /// Load no NGEN / ready-to-run images: everything is JIT-compiled. Immutable.
        const DISABLE_ALL_NGEN_IMAGES = sys::COR_PRF_DISABLE_ALL_NGEN_IMAGES;
    }
}

bitflags! {
    /// `COR_PRF_HIGH_MONITOR`: the high event mask (`SetEventMask2`, Info5+).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct HighEventMask: u32 {
        /// `GetAssemblyReferences` callbacks (Callback6).
        const ADD_ASSEMBLY_REFERENCES = sys::COR_PRF_HIGH_ADD_ASSEMBLY_REFERENCES;
        /// `ModuleInMemorySymbolsUpdated` callbacks (Callback7).
        const IN_MEMORY_SYMBOLS_UPDATED = sys::COR_PRF_HIGH_IN_MEMORY_SYMBOLS_UPDATED;
        /// `DynamicMethodUnloaded` callbacks (Callback9).
        const MONITOR_DYNAMIC_FUNCTION_UNLOADS = sys::COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS;
        /// Disables tiered compilation. Immutable.
        const DISABLE_TIERED_COMPILATION = sys::COR_PRF_HIGH_DISABLE_TIERED_COMPILATION;
        /// GC start/finish callbacks only, without the expensive reference callbacks.
        const BASIC_GC = sys::COR_PRF_HIGH_BASIC_GC;
        /// `MovedReferences` callbacks without the rest of `MONITOR_GC`.
        const MONITOR_GC_MOVED_OBJECTS = sys::COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS;
        /// `ObjectAllocated` for large objects only.
        const MONITOR_LARGEOBJECT_ALLOCATED = sys::COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED;
        /// EventPipe callbacks (Callback10).
        const MONITOR_EVENT_PIPE = sys::COR_PRF_HIGH_MONITOR_EVENT_PIPE;
        /// `ObjectAllocated` for pinned-heap objects only.
        const MONITOR_PINNEDOBJECT_ALLOCATED = sys::COR_PRF_HIGH_MONITOR_PINNEDOBJECT_ALLOCATED;
    }
}

bitflags! {
    /// The low event mask a profiler loaded by attach may request: exactly the
    /// flags of `COR_PRF_ALLOWABLE_AFTER_ATTACH`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct AttachEventMask: u32 {
        /// See [`EventMask::MONITOR_THREADS`].
        const MONITOR_THREADS = sys::COR_PRF_MONITOR_THREADS;
        /// See [`EventMask::MONITOR_MODULE_LOADS`].
        const MONITOR_MODULE_LOADS = sys::COR_PRF_MONITOR_MODULE_LOADS;
        /// See [`EventMask::MONITOR_ASSEMBLY_LOADS`].
        const MONITOR_ASSEMBLY_LOADS = sys::COR_PRF_MONITOR_ASSEMBLY_LOADS;
        /// See [`EventMask::MONITOR_APPDOMAIN_LOADS`].
        const MONITOR_APPDOMAIN_LOADS = sys::COR_PRF_MONITOR_APPDOMAIN_LOADS;
        /// See [`EventMask::ENABLE_STACK_SNAPSHOT`].
        const ENABLE_STACK_SNAPSHOT = sys::COR_PRF_ENABLE_STACK_SNAPSHOT;
        /// See [`EventMask::MONITOR_GC`]. Returned from `initialize_for_attach`
        /// it is accepted: the runtime turns concurrent GC off during that call.
        /// Set later with `set_event_mask` while concurrent GC is on, it is
        /// refused with `CORPROF_E_CONCURRENT_GC_NOT_PROFILABLE`.
        const MONITOR_GC = sys::COR_PRF_MONITOR_GC;
        /// See [`EventMask::MONITOR_SUSPENDS`].
        const MONITOR_SUSPENDS = sys::COR_PRF_MONITOR_SUSPENDS;
        /// See [`EventMask::MONITOR_CLASS_LOADS`].
        const MONITOR_CLASS_LOADS = sys::COR_PRF_MONITOR_CLASS_LOADS;
        /// See [`EventMask::MONITOR_EXCEPTIONS`].
        const MONITOR_EXCEPTIONS = sys::COR_PRF_MONITOR_EXCEPTIONS;
        /// See [`EventMask::MONITOR_JIT_COMPILATION`].
        const MONITOR_JIT_COMPILATION = sys::COR_PRF_MONITOR_JIT_COMPILATION;
        /// See [`EventMask::ENABLE_REJIT`].
        const ENABLE_REJIT = sys::COR_PRF_ENABLE_REJIT;
    }
}

bitflags! {
    /// The high event mask a profiler loaded by attach may request: exactly the
    /// flags of `COR_PRF_HIGH_ALLOWABLE_AFTER_ATTACH`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct AttachHighEventMask: u32 {
        /// See [`HighEventMask::IN_MEMORY_SYMBOLS_UPDATED`].
        const IN_MEMORY_SYMBOLS_UPDATED = sys::COR_PRF_HIGH_IN_MEMORY_SYMBOLS_UPDATED;
        /// See [`HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS`].
        const MONITOR_DYNAMIC_FUNCTION_UNLOADS = sys::COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS;
        /// See [`HighEventMask::BASIC_GC`].
        const BASIC_GC = sys::COR_PRF_HIGH_BASIC_GC;
        /// See [`HighEventMask::MONITOR_GC_MOVED_OBJECTS`].
        const MONITOR_GC_MOVED_OBJECTS = sys::COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS;
        /// See [`HighEventMask::MONITOR_LARGEOBJECT_ALLOCATED`].
        const MONITOR_LARGEOBJECT_ALLOCATED = sys::COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED;
        /// See [`HighEventMask::MONITOR_EVENT_PIPE`].
        const MONITOR_EVENT_PIPE = sys::COR_PRF_HIGH_MONITOR_EVENT_PIPE;
    }
}

impl EventMask {
    /// The flags that can only be changed during `Initialize`
    /// (`COR_PRF_MONITOR_IMMUTABLE`).
    pub const IMMUTABLE: EventMask = EventMask::from_bits_retain(sys::COR_PRF_MONITOR_IMMUTABLE);
}

impl HighEventMask {
    /// The flags that can only be changed during `Initialize`
    /// (`COR_PRF_HIGH_MONITOR_IMMUTABLE`).
    pub const IMMUTABLE: HighEventMask =
        HighEventMask::from_bits_retain(sys::COR_PRF_HIGH_MONITOR_IMMUTABLE);
}

impl From<AttachEventMask> for EventMask {
    fn from(m: AttachEventMask) -> Self {
        EventMask::from_bits_retain(m.bits())
    }
}

impl From<AttachHighEventMask> for HighEventMask {
    fn from(m: AttachHighEventMask) -> Self {
        HighEventMask::from_bits_retain(m.bits())
    }
}

/// Both event masks, as returned by `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct EventMasks {
    /// `COR_PRF_MONITOR` flags.
    pub low: EventMask,
    /// `COR_PRF_HIGH_MONITOR` flags (needs Info5; on older runtimes a non-empty
    /// high mask makes `Initialize` fail with an `Unsupported` error).
    pub high: HighEventMask,
}

impl From<EventMask> for EventMasks {
    fn from(low: EventMask) -> Self {
        EventMasks {
            low,
            high: HighEventMask::empty(),
        }
    }
}

/// Both masks a profiler loaded by attach may request, as returned by
/// `initialize_for_attach`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AttachEventMasks {
    /// Attach-allowed `COR_PRF_MONITOR` flags.
    pub low: AttachEventMask,
    /// Attach-allowed `COR_PRF_HIGH_MONITOR` flags.
    pub high: AttachHighEventMask,
}

impl From<AttachEventMask> for AttachEventMasks {
    fn from(low: AttachEventMask) -> Self {
        AttachEventMasks {
            low,
            high: AttachHighEventMask::empty(),
        }
    }
}

impl From<AttachEventMasks> for EventMasks {
    fn from(m: AttachEventMasks) -> Self {
        EventMasks {
            low: m.low.into(),
            high: m.high.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_masks_are_exactly_the_allowable_sets() {
        assert_eq!(
            AttachEventMask::all().bits(),
            sys::COR_PRF_ALLOWABLE_AFTER_ATTACH
        );
        assert_eq!(
            AttachHighEventMask::all().bits(),
            sys::COR_PRF_HIGH_ALLOWABLE_AFTER_ATTACH
        );
    }

    #[test]
    fn full_masks_cover_every_defined_flag() {
        // Every bit of COR_PRF_ALL is a flag defined here.
        assert!(EventMask::from_bits(sys::COR_PRF_ALL).is_some());
        assert!(EventMask::all().contains(EventMask::IMMUTABLE));
        assert!(!EventMask::IMMUTABLE.contains(EventMask::MONITOR_JIT_COMPILATION));
        assert!(EventMask::IMMUTABLE.contains(EventMask::ENABLE_OBJECT_ALLOCATED));
    }
}
