//! Enter/Leave/Tailcall hooks (ELT) in safe Rust.
//!
//! With `COR_PRF_MONITOR_ENTERLEAVE` the runtime calls a profiler hook when a
//! jitted method is entered, when it returns and when it leaves through a
//! tail call. This module registers those hooks for you and calls the
//! methods of an [`EltHooks`] implementation:
//!
//! ```no_run
//! use clrprof::elt::{self, EltHooks, EltOptions, Hooked};
//! use clrprof::{EventMask, EventMasks, FunctionId, ProfilerInfo, Result};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! struct CountCalls;
//!
//! impl EltHooks for CountCalls {
//!     // What the SDK keeps for every hooked function: here, its call count.
//!     type Function = AtomicU64;
//!     fn map_function(&self, _info: &ProfilerInfo, _f: FunctionId<'_>) -> Option<AtomicU64> {
//!         Some(AtomicU64::new(0)) // hook every function
//!     }
//!     fn enter(&self, function: &Hooked<AtomicU64>) {
//!         function.data().fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//!
//! // In `Profiler::initialize`:
//! fn initialize(info: &ProfilerInfo) -> Result<EventMasks> {
//!     let wanted = EventMasks::from(EventMask::DISABLE_INLINING);
//!     let (masks, _runtime) = elt::install(info, Arc::new(CountCalls), EltOptions::fast_path(), wanted)?;
//!     Ok(masks) // return exactly these masks
//! }
//! ```
//!
//! # The two variants
//!
//! * **Fast path** ([`EltOptions::fast_path`]): `SetEnterLeaveFunctionHooks3`.
//!   Jitted code calls clrprof's assembly trampolines (`clrprof_sys::elt`)
//!   directly, which save the registers the JIT keeps live and call
//!   [`EltHooks::enter`] / [`leave`](EltHooks::leave) /
//!   [`tailcall`](EltHooks::tailcall). No argument or frame information.
//!   Available where clrprof-sys has trampolines (x86_64 Linux/macOS/Windows,
//!   aarch64 Linux/macOS); elsewhere [`install`] says so.
//! * **WithInfo** ([`EltOptions::with_info`]): `SetEnterLeaveFunctionHooks3WithInfo`.
//!   The runtime calls through its own stub and hands an `eltInfo` handle,
//!   from which [`EnterContext`], [`LeaveContext`] and [`TailcallContext`]
//!   read the frame info (`GetFunctionEnter3Info` …), the argument ranges
//!   and the return value range; [`args`] decodes them into typed values.
//!   It needs at least one of `COR_PRF_ENABLE_FUNCTION_ARGS`,
//!   `COR_PRF_ENABLE_FUNCTION_RETVAL`, `COR_PRF_ENABLE_FRAME_INFO`, and is
//!   several times slower than the fast path (the runtime's stub and its
//!   C++ helper run around every hook). The SDK registers its handlers with
//!   the runtime directly wherever that stub keeps the managed method's
//!   registers itself (.NET 5 and later, Windows); only on .NET Core 3.x
//!   for Unix x64, whose stub loses `xmm2`-`xmm7` across the enter hook,
//!   does the enter hook go through a trampoline that keeps them.
//!
//! # Rules the runtime sets, and how [`install`] keeps them
//!
//! * The hooks can only be set during `Initialize`, and the runtime checks
//!   them against the event mask *current at that moment*: the fast-path
//!   setter fails with `CORPROF_E_INCONSISTENT_WITH_FLAGS` if ARGS, RETVAL
//!   or FRAME_INFO is set, the WithInfo setter if none is. So [`install`]
//!   sets the complete mask first (the one it also returns, with
//!   `MONITOR_ENTERLEAVE` and the variant's flags added), then the function
//!   ID mapper, then the hooks. Those flags are immutable: they cannot be
//!   changed after `Initialize`. Return the masks [`install`] gives back.
//! * Inconsistent requests are refused before the runtime sees them, with
//!   [`Error::Refused`] (with the code the runtime would give) or
//!   [`Error::Usage`]: ARGS/RETVAL/FRAME_INFO with the fast path, WithInfo
//!   with none of them, the fast path on a target without trampolines, a
//!   second hooks type in one process.
//! * A profiler loaded by attach cannot set ELT hooks: the runtime refuses
//!   with `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER` (ENTERLEAVE is not
//!   in `COR_PRF_ALLOWABLE_AFTER_ATTACH`); [`install`] returns that error
//!   without calling the runtime.
//! * Setting ELT hooks makes detaching impossible:
//!   `RequestProfilerDetach` then fails with
//!   `CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT`. The SDK relies on it:
//!   the per-runtime state lives until the process ends.
//! * The JIT inlines small methods and an inlined call has no hooks. For
//!   exact call counts add `EventMask::DISABLE_INLINING` (immutable before
//!   .NET 10, which allows switching it while running: dotnet/runtime PR 113924).
//!
//! # Choosing functions and routing ([`EltHooks::map_function`])
//!
//! The SDK registers a `FunctionIDMapper2`. The runtime calls it once per
//! function it compiles with hooks; [`EltHooks::map_function`] decides
//! whether the function is hooked at all (`None`: the JIT emits no hook
//! calls for it, which costs nothing at run time) and returns the data the
//! SDK keeps for it. The SDK stores that data in a [`Hooked`] record and
//! gives the runtime the record's address as the function's client ID:
//! every hook call reaches its record with one load and no lookup. The
//! mapper's client data is the runtime's own state, so side-by-side
//! runtimes each map and route their own functions. A function the runtime
//! asks about again (tiered recompilation) gets the same record.
//!
//! # Records follow their function
//!
//! A record lives as long as its function's code can run. When the
//! function's module unloads (a collectible `AssemblyLoadContext`), the SDK
//! calls [`EltHooks::function_unloading`] with the record, then frees it;
//! `install` registers an SDK component for that (it adds
//! `MONITOR_MODULE_LOADS` and `MONITOR_CLASS_LOADS` to the mask, and
//! `MONITOR_DYNAMIC_FUNCTION_UNLOADS` where the runtime has it). The same
//! happens when the function's class unloads (`ClassUnloadStarted`: a
//! generic instantiation over a collectible type lives in another module)
//! and at `DynamicMethodUnloaded`: the runtime reuses a freed dynamic
//! method's descriptor, and so its `FunctionID`, for the next one, with the
//! same token (nil), class and module, which no identity check can tell
//! apart. If the runtime ever hands a `FunctionID` it mapped before to a
//! *different* function (same ID, different module, class or token), the
//! old record is released the same way and the new function gets a fresh
//! one: a record never serves two functions. Each record has a serial
//! number ([`Binding`]), to which [`args::MethodShape`] is bound. (The
//! runtimes tested, 3.1 and 8.0, never call `FunctionIDMapper2` for a
//! dynamic method, so they hook none: measured with 300 recycled ones.)
//!
//! # Hook rules
//!
//! Hooks run on any thread that runs managed code, concurrently, inside the
//! prolog or epilog of the managed method, with the GC unable to proceed
//! until they return. Keep them short, take no lock that a GC or another
//! hook might hold, and do not call back into managed code. A panic in a
//! hook is caught and logged, and the hook call becomes a no-op. The SDK's
//! own dispatch allocates nothing and takes no lock.
//!
//! # Shadow stacks
//!
//! [`shadow_stack`] keeps a per-thread stack of the hooked frames, which
//! the thread itself or a sampler can read at any moment.

use crate::error::{Error, Result};
use crate::event_mask::{EventMask, EventMasks};
use crate::ids::{FunctionId, RawFunctionId};
use crate::info::{ProfilerInfo, RuntimeHandle, Scope};
use crate::runtimes::RuntimeSlot;
use clrprof_sys as sys;
use core::ffi::c_void;
use std::any::TypeId;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub mod args;
mod frame;
#[cfg(all(target_arch = "x86_64", unix))]
mod legacy_stub;
mod return_registers;
pub mod shadow_stack;

pub use frame::{
    ArgumentRange, Arguments, Binding, EightByte, EnterContext, FrameInfo, LeaveContext,
    ReturnValue, TailcallContext, MAX_ARGUMENT_RANGES,
};

/// Whether clrprof-sys has fast-path trampolines for this target (the same
/// table as its build script).
pub const FAST_PATH_AVAILABLE: bool = cfg!(any(
    all(
        target_arch = "x86_64",
        any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "windows"
        )
    ),
    all(
        target_arch = "aarch64",
        any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos"
        )
    )
));

/// What a profiler implements to receive ELT hooks.
///
/// Every method has a default, so an implementation writes only what it
/// uses. The WithInfo methods default to the fast-path ones, so one
/// implementation serves both variants.
#[allow(unused_variables)]
pub trait EltHooks: Send + Sync + 'static {
    /// What the SDK keeps for each hooked function (a counter, an index into
    /// the profiler's own table, a decoded signature, `()`...). Created once
    /// per function by [`map_function`](Self::map_function); hooks get a
    /// shared reference to it, so mutable parts must be atomics.
    type Function: Send + Sync + 'static;

    /// The `FunctionIDMapper2` decision: `None` leaves the function
    /// unhooked, `Some(data)` hooks it. Called once per function, on the
    /// thread that JIT-compiles it, before its first hook call. Any Info or
    /// metadata call is allowed here (names, modules, signatures).
    fn map_function(&self, info: &ProfilerInfo, function: FunctionId<'_>)
        -> Option<Self::Function>;

    /// The function's module is unloading (a collectible assembly): the
    /// last call with its record. Read what the record holds (e.g. write its
    /// counts) now; the SDK frees the record when this returns, and the
    /// runtime may give the `FunctionID` to another function later.
    fn function_unloading(&self, info: &ProfilerInfo, function: &Hooked<Self::Function>) {}

    /// Fast path: a hooked function was entered.
    fn enter(&self, function: &Hooked<Self::Function>) {}
    /// Fast path: a hooked function returns normally.
    fn leave(&self, function: &Hooked<Self::Function>) {}
    /// Fast path: a hooked function leaves through a tail call (its callee
    /// replaces its frame; no leave follows for it).
    fn tailcall(&self, function: &Hooked<Self::Function>) {}

    /// WithInfo: entered; `context` reads frame info and arguments.
    /// Defaults to [`enter`](Self::enter).
    fn enter_with_info(&self, function: &Hooked<Self::Function>, context: &EnterContext<'_>) {
        self.enter(function)
    }
    /// WithInfo: returns; `context` reads frame info and the return value.
    /// Defaults to [`leave`](Self::leave).
    fn leave_with_info(&self, function: &Hooked<Self::Function>, context: &LeaveContext<'_>) {
        self.leave(function)
    }
    /// WithInfo: leaves through a tail call. Defaults to [`tailcall`](Self::tailcall).
    fn tailcall_with_info(&self, function: &Hooked<Self::Function>, context: &TailcallContext<'_>) {
        self.tailcall(function)
    }
}

/// One hooked function: its ID, its runtime and the profiler's data for it.
///
/// Created by the SDK when [`EltHooks::map_function`] returns `Some`, lent
/// to the hooks for the duration of each hook call, and freed when the
/// function's module unloads (after [`EltHooks::function_unloading`]).
#[derive(Debug)]
#[repr(C)] // the function ID first, whatever `F` is (see `shadow_stack`)
pub struct Hooked<F> {
    binding: Binding,
    runtime: RuntimeSlot,
    data: F,
}

#[cfg(test)]
impl Hooked<()> {
    pub(crate) fn for_tests(function: RawFunctionId) -> Self {
        Hooked {
            binding: Binding {
                function,
                serial: 0,
            },
            runtime: RuntimeSlot(0),
            data: (),
        }
    }
}

impl<F> Hooked<F> {
    /// The function's ID (raw: it stays valid until its class unloads).
    pub fn function(&self) -> RawFunctionId {
        self.binding.function
    }

    /// The function's ID and the serial number of this record: what a
    /// [`MethodShape`](args::MethodShape) made for the function is bound to.
    pub fn binding(&self) -> Binding {
        self.binding
    }

    /// The runtime the function belongs to.
    pub fn runtime(&self) -> RuntimeSlot {
        self.runtime
    }

    /// The profiler's data for the function.
    pub fn data(&self) -> &F {
        &self.data
    }
}

/// Which ELT variant to register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EltVariant {
    /// `SetEnterLeaveFunctionHooks3` through the assembly trampolines.
    FastPath,
    /// `SetEnterLeaveFunctionHooks3WithInfo`, with these of
    /// `ENABLE_FUNCTION_ARGS`, `ENABLE_FUNCTION_RETVAL`, `ENABLE_FRAME_INFO`
    /// (at least one).
    WithInfo(EventMask),
}

/// How [`install`] sets up the hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EltOptions {
    /// The variant.
    pub variant: EltVariant,
    /// Adds `MONITOR_EXCEPTIONS`, which the shadow stack needs to pop frames
    /// that an exception unwinds (forward
    /// [`Profiler::exception_unwind_function_enter`](crate::callback::Profiler::exception_unwind_function_enter)
    /// and `_leave` to [`shadow_stack`]).
    pub exceptions: bool,
    /// Registers the leave and tailcall hooks too (default). Without them
    /// ([`EltOptions::enter_only`]) the JIT emits no leave or tailcall hook
    /// call at all, which halves the cost of a profiler that only counts.
    pub leave: bool,
}

impl EltOptions {
    /// The fast path (no arguments, no frame info).
    pub const fn fast_path() -> Self {
        EltOptions {
            variant: EltVariant::FastPath,
            exceptions: false,
            leave: true,
        }
    }

    /// WithInfo with arguments, return value and frame info.
    pub const fn with_info() -> Self {
        EltOptions {
            variant: EltVariant::WithInfo(
                EventMask::ENABLE_FUNCTION_ARGS
                    .union(EventMask::ENABLE_FUNCTION_RETVAL.union(EventMask::ENABLE_FRAME_INFO)),
            ),
            exceptions: false,
            leave: true,
        }
    }

    /// WithInfo with only the given info flags.
    pub const fn with_info_flags(flags: EventMask) -> Self {
        EltOptions {
            variant: EltVariant::WithInfo(flags),
            exceptions: false,
            leave: true,
        }
    }

    /// Also monitor exceptions (for shadow stacks that stay balanced when
    /// exceptions unwind hooked frames).
    pub const fn with_exceptions(mut self) -> Self {
        self.exceptions = true;
        self
    }

    /// Registers only the enter hook: [`EltHooks::leave`] and
    /// [`EltHooks::tailcall`] (and their WithInfo forms) are never called.
    pub const fn enter_only(mut self) -> Self {
        self.leave = false;
        self
    }

    /// Whether the variant is WithInfo.
    pub const fn is_with_info(&self) -> bool {
        matches!(self.variant, EltVariant::WithInfo(_))
    }
}

/// The event-mask flags that select the WithInfo path.
pub const WITH_INFO_FLAGS: EventMask = EventMask::ENABLE_FUNCTION_ARGS
    .union(EventMask::ENABLE_FUNCTION_RETVAL)
    .union(EventMask::ENABLE_FRAME_INFO);

/// Checks `options` against `wanted` and returns the masks to set: `wanted`
/// plus `MONITOR_ENTERLEAVE`, the WithInfo flags and `MONITOR_EXCEPTIONS`
/// as the options ask. Pure: this is what [`install`] refuses, before any
/// runtime call.
pub fn masks_for(options: &EltOptions, wanted: EventMasks, attached: bool) -> Result<EventMasks> {
    if attached {
        return Err(Error::runtime(
            sys::CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER,
            "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3 (ELT hooks cannot be set by a profiler loaded by attach)",
        ));
    }
    let mut masks = wanted;
    masks.low |= EventMask::MONITOR_ENTERLEAVE;
    if options.exceptions {
        masks.low |= EventMask::MONITOR_EXCEPTIONS;
    }
    match options.variant {
        EltVariant::FastPath => {
            if !FAST_PATH_AVAILABLE {
                return Err(Error::Usage(
                    "the ELT fast path has no trampolines for this target; use EltOptions::with_info()"
                        .into(),
                ));
            }
            let extra = masks.low & WITH_INFO_FLAGS;
            if !extra.is_empty() {
                return Err(Error::Refused {
                    hr: sys::CORPROF_E_INCONSISTENT_WITH_FLAGS,
                    call: "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3",
                    why: format!(
                        "the ELT fast path cannot be combined with {extra:?}: with those flags the \
                         runtime only accepts SetEnterLeaveFunctionHooks3WithInfo; use \
                         EltOptions::with_info_flags"
                    ),
                });
            }
        }
        EltVariant::WithInfo(flags) => {
            if !(flags - WITH_INFO_FLAGS).is_empty() {
                return Err(Error::Usage(format!(
                    "EltVariant::WithInfo takes only ENABLE_FUNCTION_ARGS, ENABLE_FUNCTION_RETVAL and \
                     ENABLE_FRAME_INFO, not {:?}",
                    flags - WITH_INFO_FLAGS
                )));
            }
            if flags.is_empty() && (masks.low & WITH_INFO_FLAGS).is_empty() {
                return Err(Error::Refused {
                    hr: sys::CORPROF_E_INCONSISTENT_WITH_FLAGS,
                    call: "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3WithInfo",
                    why: "the WithInfo ELT variant needs at least one of ENABLE_FUNCTION_ARGS, \
                          ENABLE_FUNCTION_RETVAL, ENABLE_FRAME_INFO"
                        .into(),
                });
            }
            masks.low |= flags;
        }
    }
    Ok(masks)
}

/// Per-runtime ELT state; the `FunctionIDMapper2` client data. Leaked: it
/// lives as long as the process (ELT hooks make the profiler undetachable).
struct RuntimeElt<H: EltHooks> {
    hooks: Arc<H>,
    runtime: RuntimeHandle,
    shared: EltShared,
    slot: RuntimeSlot,
    /// FunctionID → its record, so a function mapped twice (tiered
    /// recompilation) keeps one record.
    mapped: Mutex<HashMap<usize, Record<H>>>,
    /// How many records `mapped` has (read without its lock).
    count: AtomicUsize,
}

thread_local! {
    // reentrancy: elt-records
    /// The ELT states whose records this thread holds while user code runs
    /// (an [`EltRuntime`] closure, the hooks' `map_function`); 0 in a free
    /// slot.
    static HOLDING: Cell<[usize; 4]> = const { Cell::new([0; 4]) };
}

/// This thread holds a state's records while user code runs (see
/// [`HOLDING`]).
struct Holding(usize);

impl Holding {
    fn enter<H: EltHooks>(state: &RuntimeElt<H>, call: &'static str) -> Result<Holding> {
        let me = state as *const RuntimeElt<H> as usize;
        HOLDING.with(|h| {
            let mut slots = h.get();
            let free = slots
                .iter()
                .position(|s| *s == 0)
                .ok_or_else(|| Error::WouldDeadlock {
                    call,
                    why: "four calls that hold ELT records are nested on this thread already"
                        .into(),
                })?;
            slots[free] = me;
            h.set(slots);
            Ok(Holding(free))
        })
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        let _ = HOLDING.try_with(|h| {
            let mut slots = h.get();
            slots[self.0] = 0;
            h.set(slots);
        });
    }
}

impl<H: EltHooks> RuntimeElt<H> {
    /// Locks the records, refused ([`Error::WouldDeadlock`]) on a thread
    /// that holds them while user code runs: the lock is not re-entrant,
    /// and the thread would wait for itself.
    fn records(&self, call: &'static str) -> Result<MutexGuard<'_, HashMap<usize, Record<H>>>> {
        let me = self as *const RuntimeElt<H> as usize;
        if HOLDING.with(|h| h.get().contains(&me)) {
            return Err(Error::WouldDeadlock {
                call,
                why: "this thread holds the ELT records of this runtime while a closure of \
                      `EltRuntime::for_each_function` or `with_function`, or the hooks' \
                      `map_function`, runs (the SDK keeps one record per function under that \
                      lock); walk or ask the records after it returns"
                    .into(),
            });
        }
        Ok(self.mapped.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Notes the records' count after a change (with the lock held).
    fn counted(&self, map: &HashMap<usize, Record<H>>) {
        self.count.store(map.len(), Ordering::Relaxed);
    }
}

/// What the WithInfo contexts read of their runtime's ELT state.
pub(crate) struct EltShared {
    pub(crate) info3: sys::ICorProfilerInfo3,
    /// The runtime's Unix x64 stubs are the ones `legacy_stub` describes.
    #[cfg(all(target_arch = "x86_64", unix))]
    pub(crate) legacy_stub: bool,
}

// SAFETY: [free-threaded] the only non-Sync member is the ICorProfilerInfo3 interface,
// which the runtime documents as free-threaded (callable from any thread,
// the ELT hooks included); COM reference counting is thread-safe.
unsafe impl<H: EltHooks> Send for RuntimeElt<H> {}
// SAFETY: [free-threaded] shared use from hooks on many threads only reads the state or
// goes through its Mutex; the ICorProfilerInfo3 it holds is free-threaded
// (corprof.idl: Info methods may be called from any thread).
unsafe impl<H: EltHooks> Sync for RuntimeElt<H> {}

/// The record behind a client ID: the user's [`Hooked`] first, then what
/// the dispatch needs.
#[repr(C)]
struct Entry<H: EltHooks> {
    /// The hooks object, one load away from the client ID.
    hooks: *const H,
    runtime: &'static RuntimeElt<H>,
    hooked: Hooked<H::Function>,
}

impl<H: EltHooks> Entry<H> {
    #[inline(always)]
    fn hooks(&self) -> &H {
        // SAFETY: [local-memory] `hooks` points into the `Arc<H>` held by the leaked
        // `RuntimeElt` this record belongs to, so it lives as long as the
        // record.
        unsafe { &*self.hooks }
    }
}

/// Who a function is, as the runtime answers `GetFunctionInfo`: what tells a
/// recycled `FunctionID` from the function it named before.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Identity {
    module: usize,
    class: usize,
    token: u32,
}

impl Identity {
    fn of(info: &ProfilerInfo<'_>, function: FunctionId<'_>) -> Option<Identity> {
        let f = info.function_info(function).ok()?;
        Some(Identity {
            module: f.module.as_sys(),
            class: f.class.as_sys(),
            token: f.token.0,
        })
    }
}

/// A mapped function's record, owned by the mapper's table. Its address is
/// the client ID jitted code passes to the hooks, so it is boxed (stable)
/// and only freed when no code of its function can run any more: when the
/// function's module unloads (the code of a collectible assembly goes with
/// it, and no thread can be inside it: a frame on a stack keeps its loader
/// allocator alive), or when the runtime maps the same `FunctionID` again
/// for a different function (the old one's code is gone, or the ID could
/// not have been reused).
struct Record<H: EltHooks> {
    entry: Box<Entry<H>>,
    identity: Option<Identity>,
}

impl<H: EltHooks> Record<H> {
    fn client_id(&self) -> usize {
        &*self.entry as *const Entry<H> as usize
    }
}

/// A handle to the ELT state of one runtime, returned by [`install`].
pub struct EltRuntime<H: EltHooks> {
    state: &'static RuntimeElt<H>,
}

impl<H: EltHooks> Clone for EltRuntime<H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<H: EltHooks> Copy for EltRuntime<H> {}

impl<H: EltHooks> EltRuntime<H> {
    /// The runtime's slot.
    pub fn runtime(&self) -> RuntimeSlot {
        self.state.slot
    }

    /// The hooks object.
    pub fn hooks(&self) -> &H {
        &self.state.hooks
    }

    /// Calls `f` with every function hooked in this runtime now (in no
    /// particular order). Records of unloaded functions are gone (see
    /// [`EltHooks::function_unloading`]). Holds the mapper's lock while `f`
    /// runs: call it from callbacks, not from hooks. Refused
    /// ([`Error::WouldDeadlock`], `f` not called) from inside `f`, another
    /// `for_each_function` or [`with_function`](Self::with_function) closure
    /// of this runtime, or the hooks' [`EltHooks::map_function`], all of
    /// which run holding that lock (the torture profiler's re-entrancy
    /// family: a nested walk hung the application on .NET 10).
    pub fn for_each_function(&self, mut f: impl FnMut(&Hooked<H::Function>)) -> Result<()> {
        const CALL: &str = "EltRuntime::for_each_function";
        // reentrancy: elt-records
        let map = self.state.records(CALL)?;
        let _holding = Holding::enter(self.state, CALL)?;
        for record in map.values() {
            f(&record.entry.hooked);
        }
        Ok(())
    }

    // provenance: none: the ID is only a key of this runtime's own record map; nothing reaches the runtime
    /// Calls `f` with the record of `function`, if it is hooked. Holds the
    /// mapper's lock while `f` runs; refused where
    /// [`for_each_function`](Self::for_each_function) is.
    pub fn with_function<R>(
        &self,
        function: RawFunctionId,
        f: impl FnOnce(&Hooked<H::Function>) -> R,
    ) -> Result<Option<R>> {
        const CALL: &str = "EltRuntime::with_function";
        // reentrancy: elt-records
        let map = self.state.records(CALL)?;
        let _holding = Holding::enter(self.state, CALL)?;
        Ok(map.get(&function.0).map(|r| f(&r.entry.hooked)))
    }

    /// How many functions have a record now (read without the mapper's
    /// lock: it answers anywhere, inside the closures too).
    pub fn function_count(&self) -> usize {
        self.state.count.load(Ordering::Relaxed)
    }
}

/// The SDK component behind [`install`]: frees the records of functions
/// whose module unloads, and (with [`EltOptions::with_exceptions`]) keeps
/// the shadow stacks balanced when exceptions unwind hooked frames.
struct EltComponent<H: EltHooks> {
    state: &'static RuntimeElt<H>,
    exceptions: bool,
    /// The runtime reports `DynamicMethodUnloaded` (Callback9, from
    /// `ICorProfilerInfo10` runtimes on).
    dynamic_unloads: bool,
}

impl<H: EltHooks> EltComponent<H> {
    /// Releases the records `gone` selects.
    fn release_where(&self, info: &ProfilerInfo, gone: impl Fn(usize, &Record<H>) -> bool) {
        let gone: Vec<Record<H>> = {
            let mut map = match self.state.records("ELT records: release") {
                Ok(map) => map,
                // An unload delivered on a thread inside a closure that holds
                // the records (the runtime does not do that): kept.
                Err(e) => {
                    log::error!("{e}");
                    return;
                }
            };
            let ids: Vec<usize> = map
                .iter()
                .filter(|(id, r)| gone(**id, r))
                .map(|(id, _)| *id)
                .collect();
            let gone = ids.iter().filter_map(|id| map.remove(id)).collect();
            self.state.counted(&map);
            gone
        };
        for record in gone {
            release(info, record);
        }
    }
}

impl<H: EltHooks> crate::component::Component for EltComponent<H> {
    fn name(&self) -> &'static str {
        "elt"
    }

    fn masks(&self) -> EventMasks {
        let mut low = EventMask::MONITOR_MODULE_LOADS | EventMask::MONITOR_CLASS_LOADS;
        if self.exceptions {
            low |= EventMask::MONITOR_EXCEPTIONS;
        }
        EventMasks {
            low,
            high: if self.dynamic_unloads {
                crate::event_mask::HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS
            } else {
                crate::event_mask::HighEventMask::empty()
            },
        }
    }

    fn module_unload_started(&self, info: &ProfilerInfo, module: crate::ids::ModuleId<'_>) {
        let module = module.as_sys();
        self.release_where(info, |_, r| r.identity.map(|i| i.module) == Some(module));
    }

    // A class's methods (generic instantiations over collectible types
    // among them, whose module is not the one unloading) go with it.
    fn class_unload_started(&self, info: &ProfilerInfo, class: crate::ids::ClassId<'_>) {
        let class = class.as_sys();
        self.release_where(info, |_, r| r.identity.map(|i| i.class) == Some(class));
    }

    // The runtime reuses a freed dynamic method's descriptor (and so its
    // FunctionID) for the next one, with the same token, class and module:
    // the identity check cannot tell them apart, the unload can.
    fn dynamic_method_unloaded(&self, info: &ProfilerInfo, function: RawFunctionId) {
        self.release_where(info, |id, _| id == function.0);
    }

    // Only with `EltOptions::with_exceptions`: the shadow stacks' unwinds.
    fn receives_unwinds(&self) -> bool {
        self.exceptions
    }

    fn exception_unwind_function_enter(&self, _info: &ProfilerInfo, function: FunctionId<'_>) {
        if self.exceptions {
            shadow_stack::unwind_function_enter(function.to_raw());
        }
    }

    fn exception_unwind_function_leave(&self, _info: &ProfilerInfo) {
        if self.exceptions {
            shadow_stack::unwind_function_leave();
        }
    }

    fn exception_catcher_enter(&self, _info: &ProfilerInfo, function: FunctionId<'_>) {
        if self.exceptions {
            shadow_stack::catcher_enter(function.to_raw());
        }
    }
}

/// Hands a record to [`EltHooks::function_unloading`], then frees it.
fn release<H: EltHooks>(info: &ProfilerInfo<'_>, record: Record<H>) {
    let hooked = &record.entry.hooked;
    unbind(hooked.runtime, hooked.binding);
    crate::guard::guard("EltHooks::function_unloading", (), || {
        record.entry.hooks().function_unloading(info, hooked)
    });
    crate::guard::guard("dropping an ELT record", (), move || drop(record));
}

/// The hooks type installed in this process (the handler slots are
/// process-wide: one per library).
static INSTALLED: Mutex<Option<TypeId>> = Mutex::new(None);

/// The next record serial number (0 is never used: see [`Binding`]).
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// The serial number of every live record, by runtime and `FunctionID`:
/// what [`args::MethodShape::of`] binds a shape to. A record's entry is
/// made before [`EltHooks::map_function`] runs for it (so a shape made
/// there is bound to the record being made) and removed when the record
/// is released, before its ID can name another function.
static BINDINGS: Mutex<BTreeMap<(u32, usize), u64>> = Mutex::new(BTreeMap::new());

fn bindings() -> std::sync::MutexGuard<'static, BTreeMap<(u32, usize), u64>> {
    BINDINGS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The binding of the live record of `function` in the runtime `slot`, if
/// the ELT mapper hooked it (or is mapping it now).
pub(crate) fn current_binding(slot: RuntimeSlot, function: RawFunctionId) -> Option<Binding> {
    bindings()
        .get(&(slot.0, function.0))
        .map(|&serial| Binding { function, serial })
}

fn unbind(slot: RuntimeSlot, binding: Binding) {
    let mut map = bindings();
    let key = (slot.0, binding.function.0);
    if map.get(&key) == Some(&binding.serial) {
        map.remove(&key);
    }
}

/// Registers ELT hooks for the runtime of `info`. Call it from
/// [`Profiler::initialize`](crate::callback::Profiler::initialize) and return the
/// masks it gives back.
///
/// In order: checks `options` against `wanted` ([`masks_for`]), sets the
/// resulting event mask, registers the `FunctionIDMapper2` (client data:
/// this runtime's state) and the hooks of the chosen variant. Side-by-side
/// runtimes may each call it with the same hooks type; a different type in
/// the same process is refused.
pub fn install<H: EltHooks>(
    info: &ProfilerInfo,
    hooks: Arc<H>,
    options: EltOptions,
    wanted: EventMasks,
) -> Result<(EventMasks, EltRuntime<H>)> {
    let masks = masks_for(&options, wanted, info.is_attached())?;
    let info3 = info
        .raw_info3("ICorProfilerInfo3::SetEnterLeaveFunctionHooks3")?
        .clone();
    {
        let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        match *installed {
            Some(t) if t != TypeId::of::<H>() => {
                return Err(Error::Usage(format!(
                    "ELT hooks of another type are already installed in this process; \
                     every runtime must use the same EltHooks type (not {})",
                    std::any::type_name::<H>()
                )))
            }
            _ => *installed = Some(TypeId::of::<H>()),
        }
    }
    info.set_event_mask(masks)?;

    let state: &'static RuntimeElt<H> = Box::leak(Box::new(RuntimeElt {
        hooks,
        runtime: info.handle(),
        shared: EltShared {
            info3,
            #[cfg(all(target_arch = "x86_64", unix))]
            legacy_stub: options.is_with_info() && legacy_stub::applies(info.version()),
        },
        slot: info.runtime_slot(),
        mapped: Mutex::new(HashMap::new()),
        count: AtomicUsize::new(0),
    }));
    info.register(Arc::new(EltComponent {
        state,
        exceptions: options.exceptions,
        dynamic_unloads: info.raw_info10("ICorProfilerInfo10").is_ok(),
    }))?;
    let client_data = state as *const RuntimeElt<H> as *mut c_void;
    crate::error::check(
        // SAFETY: [ffi-abi, library-pinned] `map_function::<H>` has the FunctionIDMapper2 signature and
        // treats the client data as the `RuntimeElt<H>` passed here, which is
        // leaked and so outlives every call.
        unsafe {
            state
                .shared
                .info3
                .SetFunctionIDMapper2(Some(map_function::<H>), client_data)
        },
        "ICorProfilerInfo3::SetFunctionIDMapper2",
    )?;
    match options.variant {
        EltVariant::FastPath => {
            set_fast_path::<H>(&state.shared.info3, options.leave, frames_can_suspend(info))?
        }
        EltVariant::WithInfo(_) => {
            set_with_info::<H>(&state.shared.info3, options.leave, info.version())?
        }
    }
    Ok((masks, EltRuntime { state }))
}

#[cfg(any(
    all(
        target_arch = "x86_64",
        any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "windows"
        )
    ),
    all(
        target_arch = "aarch64",
        any(target_os = "linux", target_os = "android", target_os = "macos")
    )
))]
fn set_fast_path<H: EltHooks>(
    info3: &sys::ICorProfilerInfo3,
    leave: bool,
    frames_can_suspend: bool,
) -> Result<()> {
    use sys::elt;
    {
        let mut tracking = caller_sp_tracking();
        // SAFETY: [elt-handler, library-pinned] the handlers only read records the mapper created (client IDs
        // are their addresses, and a record outlives every hook call of its
        // function: see `Record`), never unwind (every user call is inside
        // `contain`), and are plain functions of this library.
        unsafe {
            elt::set_enter3_caller_sp_handler(Some(fast_enter_passing_caller_sp::<H>));
            if !tracking.passing {
                elt::set_enter3_handler(Some(fast_enter::<H>));
            }
            elt::set_leave3_handler(Some(fast_leave::<H>));
            elt::set_tailcall3_handler(Some(fast_tailcall::<H>));
        }
        tracking.frames_can_suspend |= frames_can_suspend;
        tracking.update();
    }
    crate::error::check(
        // SAFETY: [ffi-abi, library-pinned] the trampolines implement the JIT's FunctionEnter3/Leave3/
        // Tailcall3 convention for this target (clrprof_sys::elt).
        unsafe {
            info3.SetEnterLeaveFunctionHooks3(
                Some(elt::enter3_trampoline()),
                leave.then(elt::leave3_trampoline),
                leave.then(elt::tailcall3_trampoline),
            )
        },
        "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3",
    )
}

#[cfg(not(any(
    all(
        target_arch = "x86_64",
        any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "windows"
        )
    ),
    all(
        target_arch = "aarch64",
        any(target_os = "linux", target_os = "android", target_os = "macos")
    )
)))]
fn set_fast_path<H: EltHooks>(_info3: &sys::ICorProfilerInfo3, _leave: bool) -> Result<()> {
    Err(Error::Usage(
        "the ELT fast path has no trampolines for this target".into(),
    ))
}

fn set_with_info<H: EltHooks>(
    info3: &sys::ICorProfilerInfo3,
    leave: bool,
    info_version: u8,
) -> Result<()> {
    // The runtime calls WithInfo hooks from its own stub, which keeps the
    // managed method's registers itself on every runtime but one: the .NET
    // Core 3.x stub for Unix x64 restores only xmm0/xmm1 of the
    // floating-point argument registers after the enter hook. So there the
    // enter hook is clrprof-sys's trampoline that keeps xmm2-xmm7, which
    // calls `info_enter_legacy` through its slot; every other hook (and
    // every hook on every other runtime) is the plain handler, called by
    // the stub with the C ABI and nothing to keep. The stubs' leave and
    // tailcall paths restore the return registers on every runtime
    // (rax, rdx, xmm0, xmm1 on Unix x64; rax, xmm0 on Windows).
    let enter = enter_with_info_hook::<H>(info_version);
    crate::error::check(
        // SAFETY: [ffi-abi, library-pinned] the hooks have the IDL's WithInfo signatures and calling
        // convention; the trampoline forwards to the handler installed above.
        unsafe {
            info3.SetEnterLeaveFunctionHooks3WithInfo(
                Some(enter),
                leave.then_some(info_leave::<H> as sys::FunctionLeave3WithInfo),
                leave.then_some(info_tailcall::<H> as sys::FunctionTailcall3WithInfo),
            )
        },
        "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3WithInfo",
    )
}

/// The WithInfo enter hook for a runtime (by its highest
/// `ICorProfilerInfoN`): where the Unix x64 stub keeps too little (see
/// `legacy_stub`), clrprof-sys's trampoline that keeps `xmm2`-`xmm7` and
/// calls `info_enter_legacy`; everywhere else the plain handler.
#[cfg(all(target_arch = "x86_64", unix))]
fn enter_with_info_hook<H: EltHooks>(info_version: u8) -> sys::FunctionEnter3WithInfo {
    if !legacy_stub::applies(info_version) {
        return info_enter::<H>;
    }
    // SAFETY: [elt-handler, library-pinned] `info_enter_legacy` only reads records the mapper created
    // (client IDs are their addresses; the records outlive their
    // functions' code), never unwinds (every user call is inside
    // `contain`), and is a plain function of this library.
    unsafe { sys::elt::set_enter3_with_info_handler(Some(info_enter_legacy::<H>)) };
    sys::elt::enter3_with_info_netcore3_hook()
}

#[cfg(not(all(target_arch = "x86_64", unix)))]
fn enter_with_info_hook<H: EltHooks>(_info_version: u8) -> sys::FunctionEnter3WithInfo {
    info_enter::<H>
}

/// The `FunctionIDMapper2` registered by [`install`].
unsafe extern "system" fn map_function<H: EltHooks>(
    function: sys::FunctionID,
    client_data: *mut c_void,
    hook: *mut sys::BOOL,
) -> usize {
    let set_hook = |value: bool| {
        if !hook.is_null() {
            // SAFETY: [callback-args] the runtime passes a valid out pointer for the decision.
            unsafe { *hook = value as sys::BOOL };
        }
    };
    set_hook(false);
    if client_data.is_null() {
        return function;
    }
    // SAFETY: [callback-args] the client data is the leaked `RuntimeElt<H>` that `install`
    // registered together with this monomorphisation (the runtime passes the
    // client data of SetFunctionIDMapper2 back unchanged).
    let state: &'static RuntimeElt<H> = unsafe { &*(client_data as *const RuntimeElt<H>) };
    crate::guard::guard("FunctionIDMapper2", function, || {
        let info = ProfilerInfo::scoped(&state.runtime, Scope::Callback);
        // SAFETY: [callback-args, id-scope] the runtime passes the FunctionID of the function it is
        // compiling; it is valid for the duration of the mapper call.
        let id = unsafe { FunctionId::from_sys(function) };
        let identity = Identity::of(&info, id);
        const CALL: &str = "FunctionIDMapper2";
        // reentrancy: elt-records
        let Ok(mut mapped) = state.records(CALL) else {
            // The runtime maps no function on a thread inside a closure
            // that holds the records; if it did, the function is not hooked.
            return function;
        };
        if let Some(record) = mapped.get(&function) {
            if record.identity == identity {
                set_hook(true);
                return record.client_id();
            }
            // The same FunctionID now names another function: the old one
            // is gone (its ID could not have been reused otherwise).
            if let Some(stale) = mapped.remove(&function) {
                state.counted(&mapped);
                drop(mapped);
                release(&info, stale);
                let Ok(again) = state.records(CALL) else {
                    return function;
                };
                mapped = again;
            }
        }
        // The record's serial is bound before the user's mapper runs, so a
        // shape made there is bound to the record being made.
        let binding = Binding {
            function: RawFunctionId(function),
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
        };
        bindings().insert((state.slot.0, function), binding.serial);
        // The user's mapper runs holding the records: an `EltRuntime` call
        // from it that would lock them again is refused.
        let data = match Holding::enter(state, CALL) {
            Ok(_holding) => state.hooks.map_function(&info, id),
            Err(_) => None,
        };
        let Some(data) = data else {
            unbind(state.slot, binding);
            return function;
        };
        let record = Record {
            entry: Box::new(Entry {
                hooked: Hooked {
                    binding,
                    runtime: state.slot,
                    data,
                },
                hooks: Arc::as_ptr(&state.hooks),
                runtime: state,
            }),
            identity,
        };
        let client = record.client_id();
        mapped.insert(function, record);
        state.counted(&mapped);
        set_hook(true);
        client
    })
}

/// Runs a hook body; a panic is logged and the call becomes a no-op.
/// Only `catch_unwind`, which costs nothing when nothing panics. The hook's
/// name is a const parameter, so the hot path stores nothing for the
/// landing pad (a `&str` argument was spilled to the stack on every call).
#[inline(always)]
fn contain<const KIND: u8>(f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        hook_panicked(KIND, payload);
    }
}

const ENTER: u8 = 0;
const LEAVE: u8 = 1;
const TAILCALL: u8 = 2;
const ENTER_INFO: u8 = 3;
const LEAVE_INFO: u8 = 4;
const TAILCALL_INFO: u8 = 5;

#[cold]
#[inline(never)]
fn hook_panicked(kind: u8, payload: Box<dyn std::any::Any + Send>) {
    crate::guard::drop_payload(payload);
    let name = match kind {
        ENTER => "enter",
        LEAVE => "leave",
        TAILCALL => "tailcall",
        ENTER_INFO => "enter (WithInfo)",
        LEAVE_INFO => "leave (WithInfo)",
        _ => "tailcall (WithInfo)",
    };
    log::error!("panic in ELT hook {name}; the hook call was ignored");
}

/// The record behind a client ID.
///
/// # Safety
/// `client` must be a client ID that `map_function::<H>` returned with
/// "hook" set, i.e. the address of a boxed `Entry<H>` in the mapper's table,
/// called from a hook of that function (whose record is not freed while
/// its code can run: see [`Record`]).
#[inline(always)]
unsafe fn entry<H: EltHooks>(client: usize) -> &'static Entry<H> {
    // SAFETY: [caller-contract] guaranteed by the caller.
    unsafe { &*(client as *const Entry<H>) }
}

/// The fast-path enter handler: the record, then the user's hook.
unsafe extern "C" fn fast_enter<H: EltHooks>(client: usize) {
    // SAFETY: [callback-args] the runtime passes the client ID the mapper returned for a
    // function it hooked.
    let e = unsafe { entry::<H>(client) };
    contain::<ENTER>(|| e.hooks().enter(&e.hooked));
}

/// The fast-path enter handler while caller stack pointers are passed (see
/// [`CallerSpTracking`]), called through clrprof-sys's caller-SP forwarder:
/// `caller_sp` is the hooked method's caller's stack pointer, which the
/// JIT passes beside the ID (`clrprof_sys::elt::EltEnterHandler`); the
/// shadow stacks use it to find frames that returned without a leave hook.
unsafe extern "C" fn fast_enter_passing_caller_sp<H: EltHooks>(client: usize, caller_sp: usize) {
    // SAFETY: [callback-args] as in `fast_enter`.
    let e = unsafe { entry::<H>(client) };
    shadow_stack::set_entering_caller_sp(caller_sp);
    contain::<ENTER>(|| e.hooks().enter(&e.hooked));
}

/// Whether the runtime of `info` can run methods that return without a
/// leave hook on the fast path: .NET 11's runtime-async methods, which
/// return to their caller when they suspend and get an enter hook again on
/// every resume (dotnet/runtime issue 122488). No runtime before .NET 11
/// has them. A runtime that does not say what it is counts as one that can.
fn frames_can_suspend(info: &ProfilerInfo) -> bool {
    match info.runtime_information() {
        Ok(r) => match r.runtime_type {
            crate::runtimes::RuntimeType::CoreClr => r.major >= 11,
            crate::runtimes::RuntimeType::Desktop => false,
            crate::runtimes::RuntimeType::Unknown(_) => true,
        },
        Err(_) => true,
    }
}

/// When the fast path passes the JIT's caller stack pointers to the shadow
/// stacks. Passing one costs every enter hook a thread-local store, and
/// only a frame that returns without its leave hook needs them (see
/// `shadow_stack`), so the enter trampoline calls [`fast_enter`], which
/// passes nothing, until both are true: a runtime of the process on the
/// fast path can run such frames ([`frames_can_suspend`]), and shadow
/// stacks are in use (a thread took one: [`shadow_stacks_in_use`]). From
/// then on its handler is clrprof-sys's caller-SP forwarder, which calls
/// [`fast_enter_passing_caller_sp`] with the value the JIT left in its
/// register. Counting hooks on every runtime, and shadow stacks before
/// .NET 11, pay nothing for it.
struct CallerSpTracking {
    frames_can_suspend: bool,
    shadow_stacks: bool,
    /// The forwarder is installed.
    passing: bool,
}

impl CallerSpTracking {
    /// Installs the forwarder once both conditions hold.
    fn update(&mut self) {
        if self.passing || !(self.frames_can_suspend && self.shadow_stacks) {
            return;
        }
        self.passing = true;
        PASSING_CALLER_SPS.store(true, Ordering::SeqCst);
        // SAFETY: [elt-handler] the forwarder calls the caller-SP slot's
        // handler, `fast_enter_passing_caller_sp` of the installed hooks
        // (set before `frames_can_suspend` can be true), with the ID and the
        // register the JIT set for the enter trampoline, which leaves it
        // untouched; it never unwinds.
        unsafe { sys::elt::set_enter3_handler(Some(sys::elt::enter3_caller_sp_forwarder())) };
    }
}

static CALLER_SP_TRACKING: Mutex<CallerSpTracking> = Mutex::new(CallerSpTracking {
    frames_can_suspend: false,
    shadow_stacks: false,
    passing: false,
});

/// The fast path passes caller stack pointers (read by every shadow-stack
/// enter, so an atomic beside the lock).
static PASSING_CALLER_SPS: AtomicBool = AtomicBool::new(false);
/// Shadow stacks are in use (so a thread that takes one later does not
/// lock [`CALLER_SP_TRACKING`]).
static SHADOW_STACKS_IN_USE: AtomicBool = AtomicBool::new(false);

fn caller_sp_tracking() -> std::sync::MutexGuard<'static, CallerSpTracking> {
    CALLER_SP_TRACKING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Called by the shadow stacks when a thread takes its stack: shadow stacks
/// are in use (see [`CallerSpTracking`]). Only the first threads lock.
pub(crate) fn shadow_stacks_in_use() {
    if SHADOW_STACKS_IN_USE.load(Ordering::Relaxed) {
        return;
    }
    let mut tracking = caller_sp_tracking();
    SHADOW_STACKS_IN_USE.store(true, Ordering::Relaxed);
    tracking.shadow_stacks = true;
    tracking.update();
}

/// Makes the shadow stacks take the caller stack pointers recorded for
/// them, as they do once the fast path passes them.
#[cfg(test)]
pub(crate) fn pass_caller_sps_for_tests() {
    PASSING_CALLER_SPS.store(true, Ordering::SeqCst);
}

/// Whether fast-path enter hooks record the caller stack pointer for the
/// shadow stacks now (see [`CallerSpTracking`]).
#[inline(always)]
pub(crate) fn passing_caller_sps() -> bool {
    PASSING_CALLER_SPS.load(Ordering::Relaxed)
}

unsafe extern "C" fn fast_leave<H: EltHooks>(client: usize) {
    // SAFETY: [callback-args] as in `fast_enter`.
    let e = unsafe { entry::<H>(client) };
    contain::<LEAVE>(|| e.hooks().leave(&e.hooked));
}

unsafe extern "C" fn fast_tailcall<H: EltHooks>(client: usize) {
    // SAFETY: [callback-args] as in `fast_enter`.
    let e = unsafe { entry::<H>(client) };
    contain::<TAILCALL>(|| e.hooks().tailcall(&e.hooked));
}

/// The client ID of a WithInfo hook call.
#[inline(always)]
fn client_id(id: sys::FunctionIDOrClientID) -> usize {
    // SAFETY: [ffi-abi] both union fields are pointer-sized integers, so reading
    // either is valid for any value the runtime passes.
    unsafe { id.clientID }
}

/// `FunctionEnter3WithInfo`, called by the runtime's stub, which keeps the
/// managed method's registers (every runtime but the one `legacy_stub`
/// describes).
unsafe extern "system" fn info_enter<H: EltHooks>(
    id: sys::FunctionIDOrClientID,
    elt_info: sys::COR_PRF_ELT_INFO,
) {
    // SAFETY: [callback-args] with a mapper registered the runtime passes the client ID the
    // mapper returned for a function it hooked (as in `fast_enter`).
    let e = unsafe { entry::<H>(client_id(id)) };
    contain::<ENTER_INFO>(|| {
        let context = EnterContext::new(&e.runtime.shared, &e.hooked.binding, elt_info);
        e.hooks().enter_with_info(&e.hooked, &context)
    });
}

/// The enter handler on runtimes whose Unix x64 stub shares its xmm0/xmm1
/// save area with the struct-copy buffer (see `legacy_stub`), called
/// through clrprof-sys's trampoline that keeps `xmm2`-`xmm7`. The context copies
/// the save area before the first `GetFunctionEnter3Info` of the call (the
/// only thing that writes the buffer), and it is put back after the hook;
/// a hook that reads no arguments pays nothing for it.
#[cfg(all(target_arch = "x86_64", unix))]
unsafe extern "C" fn info_enter_legacy<H: EltHooks>(
    client: usize,
    elt_info: sys::COR_PRF_ELT_INFO,
) {
    // SAFETY: [callback-args] with a mapper registered the runtime passes the client ID the
    // mapper returned for a function it hooked (as in `fast_enter`).
    let e = unsafe { entry::<H>(client) };
    let guard = legacy_stub::SaveAreaGuard::new(elt_info);
    contain::<ENTER_INFO>(|| {
        let context = EnterContext::new(&e.runtime.shared, &e.hooked.binding, elt_info)
            .keeping_stub_save_area(&guard);
        e.hooks().enter_with_info(&e.hooked, &context)
    });
    // SAFETY: [elt-frame] this is the enter handler of a runtime for which
    // `legacy_stub::applies`, after the hook, with the guard of this call.
    unsafe { guard.restore() };
}

unsafe extern "system" fn info_leave<H: EltHooks>(
    id: sys::FunctionIDOrClientID,
    elt_info: sys::COR_PRF_ELT_INFO,
) {
    // SAFETY: [callback-args] with a mapper registered the runtime passes the client ID the
    // mapper returned for a function it hooked (as in `fast_enter`).
    let e = unsafe { entry::<H>(client_id(id)) };
    contain::<LEAVE_INFO>(|| {
        let context = LeaveContext::new(&e.runtime.shared, &e.hooked.binding, elt_info);
        e.hooks().leave_with_info(&e.hooked, &context)
    });
}

unsafe extern "system" fn info_tailcall<H: EltHooks>(
    id: sys::FunctionIDOrClientID,
    elt_info: sys::COR_PRF_ELT_INFO,
) {
    // SAFETY: [callback-args] with a mapper registered the runtime passes the client ID the
    // mapper returned for a function it hooked (as in `fast_enter`).
    let e = unsafe { entry::<H>(client_id(id)) };
    contain::<TAILCALL_INFO>(|| {
        let context = TailcallContext::new(&e.runtime.shared, &e.hooked.binding, elt_info);
        e.hooks().tailcall_with_info(&e.hooked, &context)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hooks that number the functions they map and remember which records
    /// were released; once given their runtime, their mapper also asks the
    /// records it is called holding (one `EltHooks` type per process).
    #[derive(Default)]
    struct Numbering {
        mapped: AtomicU64,
        released: Mutex<Vec<u64>>,
        runtime: std::sync::OnceLock<EltRuntime<Numbering>>,
        answers: Mutex<Vec<String>>,
    }

    impl EltHooks for Numbering {
        type Function = u64;
        fn map_function(&self, _info: &ProfilerInfo, f: FunctionId<'_>) -> Option<u64> {
            if let Some(rt) = self.runtime.get() {
                let mut a = self.answers.lock().unwrap();
                a.push(format!("{:?}", rt.with_function(f.to_raw(), |_| ()).err()));
                a.push(format!("{:?}", rt.for_each_function(|_| ()).err()));
                a.push(format!("count {}", rt.function_count()));
            }
            Some(self.mapped.fetch_add(1, Ordering::Relaxed))
        }
        fn function_unloading(&self, _info: &ProfilerInfo, function: &Hooked<u64>) {
            self.released.lock().unwrap().push(*function.data());
        }
    }

    #[test]
    fn a_recycled_dynamic_method_id_gets_a_new_record_and_binding() {
        use crate::testing::fake::{fake_ids, FakeFunction, FakeRuntime};
        type Mapper2 =
            unsafe extern "system" fn(sys::FunctionID, *mut c_void, *mut sys::BOOL) -> usize;
        let fake = FakeRuntime::with_info_version(11);
        // A dynamic method: token 0; the next one gets the same descriptor,
        // class and module, so the mapper's identity check sees no change.
        let lcg = FakeFunction {
            class: 0x300,
            module: 0x2000,
            token: 0,
            ..Default::default()
        };
        fake.state().functions.insert(0x20, lcg);
        let hooks = Arc::new(Numbering::default());
        let components = fake.initialize_components(false, |info| {
            install(
                info,
                hooks.clone(),
                EltOptions::with_info(),
                EventMasks::default(),
            )
            .unwrap();
        });
        assert!(components
            .masks()
            .high
            .contains(crate::event_mask::HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS));
        assert!(components
            .masks()
            .low
            .contains(EventMask::MONITOR_CLASS_LOADS));
        let elt = fake.state().elt;
        // SAFETY: [test-fake, ffi-abi] the fake recorded the address of the FunctionIDMapper2
        // `install` registered.
        let mapper: Mapper2 = unsafe { core::mem::transmute::<usize, Mapper2>(elt.mapper) };
        let map = || {
            let mut hooked: sys::BOOL = 0;
            // SAFETY: [test-fake] called as the runtime does, with the registered client
            // data, for a function the fake knows.
            let client =
                unsafe { mapper(0x20, elt.mapper_client_data as *mut c_void, &mut hooked) };
            assert_eq!(hooked, 1);
            client
        };
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        let slot = info.runtime_slot();
        let first = map();
        let bound = current_binding(slot, RawFunctionId(0x20)).unwrap();
        // Mapped again (a second compilation of the same method): one record.
        assert_eq!(map(), first);
        assert_eq!(current_binding(slot, RawFunctionId(0x20)), Some(bound));
        // The runtime frees the method and hands its ID to another one.
        fake_ids!(fake; f = function_id(0x20));
        components.each("test", |c| c.dynamic_method_unloaded(&info, f.to_raw()));
        assert_eq!(*hooks.released.lock().unwrap(), vec![0]);
        assert_eq!(current_binding(slot, RawFunctionId(0x20)), None);
        let second = map();
        let rebound = current_binding(slot, RawFunctionId(0x20)).unwrap();
        assert_eq!(hooks.mapped.load(Ordering::Relaxed), 2, "a new record");
        assert_ne!(
            rebound.serial, bound.serial,
            "a shape of the old one is refused"
        );
        // Its class unloads: the record goes with it.
        let _ = second;
        fake_ids!(fake; class = class_id(0x300));
        components.each("test", |c| c.class_unload_started(&info, class));
        assert_eq!(*hooks.released.lock().unwrap(), vec![0, 1]);
        assert_eq!(current_binding(slot, RawFunctionId(0x20)), None);
    }

    /// What the enter trampoline's slot holds now.
    #[cfg(all(target_arch = "x86_64", unix))]
    fn enter_slot() -> usize {
        sys::elt::enter3_handler().map_or(0, |h| h as usize)
    }

    /// The caller stack pointers cost nothing until a runtime that can
    /// suspend frames is on the fast path and shadow stacks are in use;
    /// then the enter trampoline's handler is the caller-SP forwarder, for
    /// every runtime of the process.
    #[test]
    #[cfg(all(target_arch = "x86_64", unix))]
    fn caller_stack_pointers_are_passed_only_where_frames_can_suspend() {
        use crate::testing::fake::FakeRuntime;
        let forwarder = sys::elt::enter3_caller_sp_forwarder() as usize;
        let install_on = |major: u16| {
            let fake = FakeRuntime::with_info_version(14);
            fake.state().runtime.major = major;
            fake.state().runtime.version_string = format!("{major}.0.0");
            let hooks = Arc::new(Numbering {
                mapped: AtomicU64::new(0),
                released: Mutex::new(Vec::new()),
                runtime: std::sync::OnceLock::new(),
                answers: Mutex::new(Vec::new()),
            });
            let _ = fake.initialize_components(false, |info| {
                assert_eq!(frames_can_suspend(info), major >= 11);
                install(info, hooks, EltOptions::fast_path(), EventMasks::default()).unwrap();
            });
            // The fake keeps what was registered; the runtime would too.
            std::mem::forget(fake);
        };
        // .NET 8, shadow stacks in use: the plain handler.
        install_on(8);
        shadow_stacks_in_use();
        assert_ne!(enter_slot(), forwarder);
        assert_eq!(
            enter_slot(),
            fast_enter::<Numbering> as unsafe extern "C" fn(usize) as usize
        );
        assert_eq!(
            sys::elt::enter3_caller_sp_handler().map(|h| h as usize),
            Some(
                fast_enter_passing_caller_sp::<Numbering> as unsafe extern "C" fn(usize, usize)
                    as usize
            )
        );
        // A .NET 11 runtime beside it: the forwarder, and it stays when
        // another runtime installs its hooks after it.
        install_on(11);
        assert_eq!(enter_slot(), forwarder);
        assert!(passing_caller_sps());
        install_on(10);
        assert_eq!(enter_slot(), forwarder);
    }

    #[test]
    fn the_records_refuse_calls_from_code_that_runs_holding_them() {
        // The torture profiler's re-entrancy family: a walk of the records
        // inside a walk, and a record asked for from the user's mapper,
        // locked the records again on the same thread (the app hung).
        use crate::testing::fake::{FakeFunction, FakeRuntime};
        type Mapper2 =
            unsafe extern "system" fn(sys::FunctionID, *mut c_void, *mut sys::BOOL) -> usize;
        let fake = FakeRuntime::with_info_version(11);
        let method = FakeFunction {
            class: 0x300,
            module: 0x2000,
            token: 0x0600_0001,
            ..Default::default()
        };
        fake.state().functions.insert(0x20, method);
        let hooks = Arc::new(Numbering::default());
        let _components = fake.initialize_components(false, |info| {
            let (_, rt) = install(
                info,
                hooks.clone(),
                EltOptions::with_info(),
                EventMasks::default(),
            )
            .unwrap();
            let _ = hooks.runtime.set(rt);
        });
        let elt = fake.state().elt;
        let (mapper, data) = (elt.mapper, elt.mapper_client_data);
        let runtime = *hooks.runtime.get().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: [test-fake, ffi-abi] the fake recorded the address of the
            // FunctionIDMapper2 `install` registered, called as the runtime does.
            let mapper: Mapper2 = unsafe { core::mem::transmute::<usize, Mapper2>(mapper) };
            let mut hooked: sys::BOOL = 0;
            // SAFETY: [test-fake] the registered client data, a function the fake knows.
            let _ = unsafe { mapper(0x20, data as *mut c_void, &mut hooked) };
            // A walk, and the records asked for again inside it.
            let mut inner = Vec::new();
            let walked = runtime.for_each_function(|f| {
                inner.push(format!(
                    "{:?}",
                    runtime.with_function(f.function(), |_| ()).err()
                ));
                inner.push(format!("count {}", runtime.function_count()));
            });
            let _ = tx.send((hooked, walked.is_ok(), inner));
        });
        let (hooked, walked, inner) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("hung: the records were locked again by the thread holding them");
        assert_eq!(hooked, 1);
        assert!(walked);
        let refused = |call: &str| {
            format!(
                "Some(WouldDeadlock {{ call: \"{call}\", why: \"this thread holds the ELT records"
            )
        };
        let answers = hooks.answers.lock().unwrap();
        assert!(
            answers[0].starts_with(&refused("EltRuntime::with_function")),
            "{answers:?}"
        );
        assert!(answers[1].starts_with(&refused("EltRuntime::for_each_function")));
        assert_eq!(answers[2], "count 0", "the record is made after the mapper");
        assert!(
            inner[0].starts_with(&refused("EltRuntime::with_function")),
            "{inner:?}"
        );
        assert_eq!(inner[1], "count 1");
        // Outside: answered.
        assert_eq!(
            runtime.with_function(RawFunctionId(0x20), |_| 7).unwrap(),
            Some(7)
        );
    }

    #[test]
    fn fast_path_adds_enterleave_and_refuses_info_flags() {
        let masks = masks_for(
            &EltOptions::fast_path(),
            EventMask::DISABLE_INLINING.into(),
            false,
        )
        .unwrap();
        assert_eq!(
            masks.low,
            EventMask::DISABLE_INLINING | EventMask::MONITOR_ENTERLEAVE
        );
        let err = masks_for(
            &EltOptions::fast_path(),
            EventMask::ENABLE_FUNCTION_ARGS.into(),
            false,
        )
        .unwrap_err();
        assert!(err.is(crate::error::KnownHresult::CORPROF_E_INCONSISTENT_WITH_FLAGS));
    }

    #[test]
    fn with_info_adds_its_flags_and_needs_one() {
        let masks = masks_for(&EltOptions::with_info(), EventMasks::default(), false).unwrap();
        assert!(masks
            .low
            .contains(WITH_INFO_FLAGS | EventMask::MONITOR_ENTERLEAVE));
        let only_args = EltOptions::with_info_flags(EventMask::ENABLE_FUNCTION_ARGS);
        let masks = masks_for(&only_args, EventMasks::default(), false).unwrap();
        assert!(!masks.low.contains(EventMask::ENABLE_FRAME_INFO));
        let none = EltOptions::with_info_flags(EventMask::empty());
        assert!(masks_for(&none, EventMasks::default(), false).is_err());
        let wrong = EltOptions::with_info_flags(EventMask::MONITOR_GC);
        assert!(masks_for(&wrong, EventMasks::default(), false).is_err());
    }

    #[test]
    fn attach_is_refused_with_the_runtime_code() {
        let err = masks_for(&EltOptions::fast_path(), EventMasks::default(), true).unwrap_err();
        assert!(err.is_unsupported_for_attach());
    }

    #[test]
    fn exceptions_option_adds_monitor_exceptions() {
        let masks = masks_for(
            &EltOptions::fast_path().with_exceptions().enter_only(),
            EventMasks::default(),
            false,
        )
        .unwrap();
        assert!(masks.low.contains(EventMask::MONITOR_EXCEPTIONS));
    }
}
