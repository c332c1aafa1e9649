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
//! returns as [`Error::Runtime`].
//!
//! # Rules that depend on the runtime version
//!
//! .NET 10 (dotnet/runtime PR 113924) moved `COR_PRF_DISABLE_INLINING` and
//! `COR_PRF_DISABLE_OPTIMIZATIONS` out of `COR_PRF_MONITOR_IMMUTABLE` and
//! into `COR_PRF_ALLOWABLE_AFTER_ATTACH`: from .NET 10 on they may be
//! switched after `Initialize` and requested by a profiler loaded by
//! attach. Older runtimes refuse both. Set in `Initialize`, each applies to
//! every module; switched later, or requested by attach, each applies to
//! the modules that load from then on: the code of modules already loaded
//! is still compiled with optimizations and inlining (measured inside
//! 10.0.15 and 11.0.0: the scenarios "conformance dynamicoptimization" and
//! "attach: DISABLE_INLINING or DISABLE_OPTIMIZATIONS from
//! InitializeForAttach ...", where the JIT does not inline, nor asks
//! `JITInlining`, in a module loaded after the switch, and still does both
//! in the modules loaded before).
//! So the typed [`AttachEventMask`] has these two flags (what the newest
//! runtime accepts compiles), and [`MaskRules`] — the rules of the runtime
//! actually running — decides at run time:
//! [`RuntimeHandle::set_event_mask`](crate::RuntimeHandle::set_event_mask)
//! refuses them on an attached pre-.NET 10 runtime before calling it, and
//! explains the runtime's `E_FAIL` when a pre-.NET 10 runtime refuses a
//! change of them after `Initialize`, both as
//! [`Error::RuntimeVersion`] naming the versions (seen on .NET Core 3.1.3,
//! 8.0.34 and 9.0.23).

use bitflags::bitflags;
use clrprof_sys as sys;

use crate::error::{Error, KnownHresult, HRESULT};

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
        /// Disables inlining: set in `Initialize`, everywhere. Immutable
        /// before .NET 10; from .NET 10 on it may change after `Initialize`
        /// and after attach, and then applies to the modules that load from
        /// then on (see the [module docs](self) and [`MaskRules`]).
        const DISABLE_INLINING = sys::COR_PRF_DISABLE_INLINING;
        /// Disables JIT optimisations. Immutable before .NET 10; from .NET 10
        /// on it may change after `Initialize` and after attach, and applies
        /// per module as the module loads (see [`MaskRules`]).
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
        /// `COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC`
        /// (`0x200`, dotnet/runtime PR 123177): with
        /// [`EventMask::MONITOR_GC`], no `ObjectsAllocatedByClass`
        /// callbacks, which otherwise cost a walk of the heap at every
        /// collection; the other GC callbacks still arrive. Only .NET 11
        /// and later honour it.
        ///
        /// No `corprof.idl` readable here defines it: its value was
        /// established inside the .NET 11.0.0 runtime, where of every
        /// high bit above `MONITOR_PINNEDOBJECT_ALLOCATED` offered alone
        /// beside `MONITOR_GC`, only `0x200` stops `ObjectsAllocatedByClass`
        /// while every collection's `GarbageCollectionStarted` and
        /// `Finished` still arrive. `SetEventMask2` accepts and stores any
        /// high bit on every runtime (.NET Core 3.1.3 to 11.0.0 seen), so
        /// runtimes before .NET 11 accept this flag and go on calling
        /// `ObjectsAllocatedByClass` at every collection (proven on 3.1.3,
        /// 8.0.34, 9.0.23 and 10.0.15: the scenario "conformance
        /// gc/gcskipobjectsallocatedbyclasscallback").
        const MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC =
            sys::COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC;
    }
}

bitflags! {
    /// The low event mask a profiler loaded by attach may request: exactly the
    /// flags of `COR_PRF_ALLOWABLE_AFTER_ATTACH` of the newest runtime
    /// (.NET 10 and later). [`DISABLE_INLINING`](Self::DISABLE_INLINING) and
    /// [`DISABLE_OPTIMIZATIONS`](Self::DISABLE_OPTIMIZATIONS) are accepted
    /// only from .NET 10 on; on an older runtime the SDK refuses them with
    /// [`Error::RuntimeVersion`] (see [`MaskRules`]).
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
        /// See [`EventMask::DISABLE_INLINING`]. .NET 10 and later only
        /// (dotnet/runtime PR 113924); refused on older runtimes. Applies
        /// to the modules that load after the attach only.
        const DISABLE_INLINING = sys::COR_PRF_DISABLE_INLINING;
        /// See [`EventMask::DISABLE_OPTIMIZATIONS`]. .NET 10 and later only
        /// (dotnet/runtime PR 113924); refused on older runtimes. Applies
        /// to the modules that load after the attach only.
        const DISABLE_OPTIMIZATIONS = sys::COR_PRF_DISABLE_OPTIMIZATIONS;
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
    /// `DISABLE_INLINING | DISABLE_OPTIMIZATIONS`: immutable and refused
    /// after attach before .NET 10, mutable and allowed after attach from
    /// .NET 10 on (dotnet/runtime PR 113924).
    pub const MUTABLE_SINCE_NET10: EventMask = EventMask::from_bits_retain(
        sys::COR_PRF_DISABLE_INLINING | sys::COR_PRF_DISABLE_OPTIMIZATIONS,
    );

    /// The flags that can only be changed during `Initialize` on every
    /// runtime (`COR_PRF_MONITOR_IMMUTABLE` of .NET 10 and later). Before
    /// .NET 10 [`MUTABLE_SINCE_NET10`](Self::MUTABLE_SINCE_NET10) are
    /// immutable too: [`MaskRules::immutable`] gives the set of the
    /// running runtime.
    pub const IMMUTABLE: EventMask = EventMask::from_bits_retain(
        sys::COR_PRF_MONITOR_IMMUTABLE & !Self::MUTABLE_SINCE_NET10.bits(),
    );

    /// `COR_PRF_MONITOR_IMMUTABLE` of the runtimes before .NET 10.
    pub const IMMUTABLE_BEFORE_NET10: EventMask =
        EventMask::from_bits_retain(Self::IMMUTABLE.bits() | Self::MUTABLE_SINCE_NET10.bits());
}

impl AttachEventMask {
    /// The attach flags that need .NET 10 or later.
    pub const SINCE_NET10: AttachEventMask =
        AttachEventMask::from_bits_retain(EventMask::MUTABLE_SINCE_NET10.bits());
}

/// The event-mask rules of one runtime version: which flags are immutable
/// after `Initialize` and which a profiler loaded by attach may ask for.
///
/// The runtime checks a new mask in `SetEventMask` / `SetEventMask2`
/// against its own `COR_PRF_MONITOR_IMMUTABLE` and
/// `COR_PRF_ALLOWABLE_AFTER_ATTACH`, and those changed in .NET 10 (see the
/// [module docs](self)). [`MaskRules::for_runtime`] picks the rules from
/// `GetRuntimeInformation`; the SDK applies them in
/// [`RuntimeHandle::set_event_mask`](crate::RuntimeHandle::set_event_mask),
/// and the multiplexer applies them to its children.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaskRules {
    net10: bool,
}

impl MaskRules {
    /// The rules of .NET Framework, .NET Core 3.1 and .NET 5 to 9.
    pub const BEFORE_NET10: MaskRules = MaskRules { net10: false };
    /// The rules of .NET 10 and later.
    pub const NET10: MaskRules = MaskRules { net10: true };

    /// The rules of the runtime that answered `GetRuntimeInformation` with
    /// `info`. CoreCLR before .NET 5 reports 4.x, .NET Framework is
    /// `Desktop`: both get the old rules.
    pub fn for_runtime(info: &crate::runtimes::RuntimeInfo) -> MaskRules {
        Self::for_version(info.runtime_type, info.major)
    }

    /// The rules of a runtime of type `runtime_type` reporting major
    /// version `major` (as `GetRuntimeInformation` reports it).
    pub fn for_version(runtime_type: crate::runtimes::RuntimeType, major: u16) -> MaskRules {
        MaskRules {
            net10: runtime_type == crate::runtimes::RuntimeType::CoreClr && major >= 10,
        }
    }

    /// Whether these are the rules of .NET 10 and later.
    pub fn is_net10_or_later(self) -> bool {
        self.net10
    }

    /// The low flags that can only change during `Initialize`.
    pub fn immutable(self) -> EventMask {
        if self.net10 {
            EventMask::IMMUTABLE
        } else {
            EventMask::IMMUTABLE_BEFORE_NET10
        }
    }

    /// The high flags that can only change during `Initialize` (the same
    /// on every runtime so far).
    pub fn high_immutable(self) -> HighEventMask {
        HighEventMask::IMMUTABLE
    }

    /// The low flags a profiler loaded by attach may ask for.
    pub fn allowable_after_attach(self) -> AttachEventMask {
        if self.net10 {
            AttachEventMask::all()
        } else {
            AttachEventMask::all() - AttachEventMask::SINCE_NET10
        }
    }

    /// The refusal the SDK reports, before calling the runtime, for a
    /// profiler loaded by attach asking for `low`: `None` when these rules
    /// allow it (flags outside every runtime's allowable set are left to
    /// the runtime, which answers `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`).
    pub fn refuse_after_attach(self, low: EventMask, call: &'static str) -> Option<Error> {
        let refused = low & EventMask::MUTABLE_SINCE_NET10;
        if self.net10 || refused.is_empty() {
            return None;
        }
        Some(Error::RuntimeVersion {
            hr: HRESULT(KnownHresult::CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER as i32),
            call,
            called: false,
            why: format!(
                "{refused:?} may be requested by a profiler loaded by attach only from .NET 10 on \
                 (dotnet/runtime PR 113924); this runtime (.NET Framework, .NET Core 3.1 or .NET 5-9) \
                 allows it in Initialize of a profiler loaded at startup only"
            ),
        })
    }

    /// Explains a runtime's refusal (`hr`) of a change from `old` to `new`
    /// after `Initialize`: when the change touches a flag that is immutable
    /// under these rules only because the runtime is older than .NET 10,
    /// the error says so; otherwise `None` (the runtime's own error stands).
    pub fn explain_immutable(
        self,
        hr: HRESULT,
        old: EventMask,
        new: EventMask,
        call: &'static str,
    ) -> Option<Error> {
        let changed = (old ^ new) & EventMask::MUTABLE_SINCE_NET10;
        if self.net10 || changed.is_empty() || hr.is_ok() {
            return None;
        }
        Some(Error::RuntimeVersion {
            hr,
            call,
            called: true,
            why: format!(
                "{changed:?} can be switched after Initialize only from .NET 10 on \
                 (dotnet/runtime PR 113924); on this runtime (.NET Framework, .NET Core 3.1 or .NET 5-9) \
                 it is immutable: set it in Initialize, or leave it as it is"
            ),
        })
    }
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
        // The bindings' COR_PRF_ALLOWABLE_AFTER_ATTACH is that of the idl
        // they were generated from (.NET 10 or later).
        assert_eq!(
            AttachEventMask::all().bits(),
            sys::COR_PRF_ALLOWABLE_AFTER_ATTACH
        );
        assert_eq!(
            MaskRules::NET10.allowable_after_attach(),
            AttachEventMask::all()
        );
        assert_eq!(
            MaskRules::BEFORE_NET10.allowable_after_attach().bits(),
            sys::COR_PRF_ALLOWABLE_AFTER_ATTACH
                & !(sys::COR_PRF_DISABLE_INLINING | sys::COR_PRF_DISABLE_OPTIMIZATIONS)
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

    #[test]
    fn disable_flags_are_immutable_before_net10_only() {
        use crate::runtimes::RuntimeType::{CoreClr, Desktop};
        assert_eq!(EventMask::IMMUTABLE.bits(), sys::COR_PRF_MONITOR_IMMUTABLE);
        for (ty, major, net10) in [
            (CoreClr, 4, false), // .NET Core 3.1 reports 4.0.30319
            (CoreClr, 8, false),
            (CoreClr, 9, false),
            (CoreClr, 10, true),
            (CoreClr, 11, true),
            (Desktop, 4, false),
        ] {
            let rules = MaskRules::for_version(ty, major);
            assert_eq!(rules.is_net10_or_later(), net10, "{ty:?} {major}");
            assert_eq!(
                rules.immutable().contains(EventMask::DISABLE_INLINING),
                !net10
            );
            assert_eq!(
                rules.immutable().contains(EventMask::DISABLE_OPTIMIZATIONS),
                !net10
            );
            assert_eq!(
                rules
                    .allowable_after_attach()
                    .contains(AttachEventMask::DISABLE_OPTIMIZATIONS),
                net10
            );
            assert!(rules
                .immutable()
                .contains(EventMask::ENABLE_OBJECT_ALLOCATED));
            assert_eq!(
                rules
                    .refuse_after_attach(EventMask::DISABLE_INLINING, "t")
                    .is_some(),
                !net10
            );
            assert!(rules
                .refuse_after_attach(EventMask::MONITOR_JIT_COMPILATION, "t")
                .is_none());
        }
    }

    #[test]
    fn refusals_name_the_versions() {
        let e = MaskRules::BEFORE_NET10
            .refuse_after_attach(
                EventMask::DISABLE_OPTIMIZATIONS | EventMask::MONITOR_GC,
                "ICorProfilerInfo::SetEventMask",
            )
            .unwrap();
        let text = e.to_string();
        assert!(text.contains(".NET 10"), "{text}");
        assert!(text.contains("DISABLE_OPTIMIZATIONS"), "{text}");
        assert!(!text.contains("MONITOR_GC"), "{text}");
        let e = MaskRules::BEFORE_NET10
            .explain_immutable(
                HRESULT(0x8000_4005_u32 as i32),
                EventMask::DISABLE_INLINING,
                EventMask::empty(),
                "ICorProfilerInfo::SetEventMask",
            )
            .unwrap();
        assert!(e.to_string().contains("PR 113924"), "{e}");
        assert!(MaskRules::NET10
            .explain_immutable(
                HRESULT(0x8000_4005_u32 as i32),
                EventMask::DISABLE_INLINING,
                EventMask::empty(),
                "c"
            )
            .is_none());
        // A change of another immutable flag keeps the runtime's own error.
        assert!(MaskRules::BEFORE_NET10
            .explain_immutable(
                HRESULT(0x8000_4005_u32 as i32),
                EventMask::ENABLE_OBJECT_ALLOCATED,
                EventMask::empty(),
                "c"
            )
            .is_none());
    }
}
