//! The state of one runtime's multiplexer: the runtime's Info object
//! ([`RealInfo`]), the children, their event masks and the union the
//! runtime is given, and each child's Info proxy object (its methods are
//! the `info_vtbl` and `proxy` modules').

use crate::config::ChildSpec;
use crate::elt_hooks::{Hooks, Mode};
use crate::rejit_requests::Requests;
use crate::routes::Route;
use crate::runtime::RealInfo;
use clrprof::output::JsonLines;
use clrprof::sys::*;
use clrprof::MaskRules;
use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use windows_core::IUnknown;

/// A loaded child: its callback object.
pub(crate) struct Loaded {
    /// The callback interface of `version` (owned by `owner`).
    this: *mut c_void,
    /// The highest `ICorProfilerCallback` version the child answers.
    pub version: u32,
    /// The reference that keeps the callback object alive; taken when the
    /// child is released.
    owner: Mutex<Option<IUnknown>>,
    /// The library; unloaded after the callback object is released.
    library: Mutex<Option<libloading::Library>>,
}

// SAFETY: [free-threaded] a profiler's callback object is called by the runtime from any
// thread (corprof.idl: callbacks arrive on whatever thread raises them),
// so calling it from any thread is its contract; the owning references are
// behind mutexes.
unsafe impl Send for Loaded {}
// SAFETY: [free-threaded] as above.
unsafe impl Sync for Loaded {}

impl Loaded {
    pub(crate) fn new(
        this: *mut c_void,
        version: u32,
        owner: IUnknown,
        library: libloading::Library,
    ) -> Loaded {
        Loaded {
            this,
            version,
            owner: Mutex::new(Some(owner)),
            library: Mutex::new(Some(library)),
        }
    }

    /// The callback interface pointer.
    #[inline]
    pub fn this(&self) -> *mut c_void {
        self.this
    }

    /// The callback object's vtable as `V`.
    ///
    /// # Safety
    /// `V` is the vtable type of an `ICorProfilerCallback` version not above
    /// [`Loaded::version`] (each version's vtable starts with the earlier
    /// ones'), and the child has not been released.
    #[inline]
    pub unsafe fn vtbl<V>(&self) -> &V {
        // SAFETY: [caller-contract] guaranteed by the caller; the object lives until release.
        unsafe { &**(self.this as *const *const V) }
    }

    /// Releases the callback object, then unloads the library (what the
    /// runtime does with a profiler it is done with).
    pub(crate) fn release(&self) {
        let owner = self.owner.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(owner);
        let library = self
            .library
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(library);
    }
}

/// One child profiler and what the multiplexer keeps for it.
pub(crate) struct ChildState {
    pub spec: ChildSpec,
    /// The child's own event masks (low | high << 32).
    pub masks: AtomicU64,
    /// Loaded and not dropped: receives callbacks.
    pub active: AtomicBool,
    pub loaded: OnceLock<Loaded>,
    /// The child's Info proxy (one reference owned here, for the child's
    /// whole life: a child may keep the Info pointer it was given without
    /// a reference of its own, as the runtime's object outlives it too).
    /// Taken when the multiplexer is released, which breaks the cycle
    /// proxy → `Shared` → proxy.
    pub proxy: Mutex<Option<ProxyRef>>,
    /// The ELT hooks and function-ID mapper the child registered.
    pub hooks: Mutex<Hooks>,
    /// The child called `RequestProfilerDetach`.
    pub detach_requested: AtomicBool,
    /// The child's `ObjectReferences` returned a failure in this GC.
    pub object_references_stopped: AtomicBool,
    /// The child called `SetILFunctionBody` (its instrumentation cannot be undone).
    pub set_il: AtomicBool,
}

impl ChildState {
    fn new(spec: ChildSpec) -> ChildState {
        ChildState {
            spec,
            masks: AtomicU64::new(0),
            active: AtomicBool::new(false),
            loaded: OnceLock::new(),
            proxy: Mutex::new(None),
            hooks: Mutex::new(Hooks::default()),
            detach_requested: AtomicBool::new(false),
            object_references_stopped: AtomicBool::new(false),
            set_il: AtomicBool::new(false),
        }
    }

    /// The child's callback object if it receives a callback of `route`
    /// declared in `ICorProfilerCallback{version}`.
    #[inline]
    pub fn receiver(&self, route: Route, version: u32) -> Option<&Loaded> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let loaded = self.loaded.get()?;
        (loaded.version >= version && route.delivers(self.masks.load(Ordering::Relaxed)))
            .then_some(loaded)
    }

    /// The child's masks as `(low, high)`.
    pub fn masks(&self) -> (u32, u32) {
        let m = self.masks.load(Ordering::Relaxed);
        (m as u32, (m >> 32) as u32)
    }

    /// The child's callback version (0 before it is loaded).
    pub fn callback_version(&self) -> u32 {
        self.loaded.get().map_or(0, |l| l.version)
    }
}

/// Phases of the multiplexer's life.
pub(crate) const PHASE_INITIALIZING: u8 = 0;
pub(crate) const PHASE_RUNNING: u8 = 1;

/// Everything the multiplexer of one runtime shares with its proxies.
pub(crate) struct Shared {
    pub runtime: RealInfo,
    pub attached: bool,
    pub children: Box<[ChildState]>,
    pub phase: AtomicU8,
    /// The union last given to the runtime (low | high << 32), and the lock
    /// that orders mask changes.
    applied: Mutex<u64>,
    /// The multiplexer's own records (`CLRPROF_MUX_OUTPUT`, else the process's `CLRPROF_OUTPUT`).
    pub out: JsonLines,
    pub rejit: Requests,
    /// How the ELT hooks are served, once decided.
    pub elt: OnceLock<Mode>,
    /// The event-mask rules of this runtime's version, read once.
    rules: OnceLock<MaskRules>,
}

impl Shared {
    pub(crate) fn new(
        runtime: RealInfo,
        attached: bool,
        specs: Vec<ChildSpec>,
        out: JsonLines,
    ) -> Shared {
        Shared {
            runtime,
            attached,
            children: specs.into_iter().map(ChildState::new).collect(),
            phase: AtomicU8::new(PHASE_INITIALIZING),
            applied: Mutex::new(0),
            out,
            rejit: Default::default(),
            elt: OnceLock::new(),
            rules: OnceLock::new(),
        }
    }

    /// The event-mask rules of the runtime (`clrprof::MaskRules`): which
    /// flags are immutable depends on its version (.NET 10 made
    /// `DISABLE_INLINING` and `DISABLE_OPTIMIZATIONS` mutable, dotnet/runtime
    /// PR 113924), and the children are refused as that runtime would
    /// refuse them. A runtime without `GetRuntimeInformation` (Info3) gets
    /// the old rules.
    pub(crate) fn rules(&self) -> MaskRules {
        *self.rules.get_or_init(|| {
            // SAFETY: [interface-version] Info3 vtable type for version 3.
            let Some((this, v)) = (unsafe { self.runtime.vtbl::<ICorProfilerInfo3_Vtbl>(3) })
            else {
                return MaskRules::BEFORE_NET10;
            };
            let (mut id, mut ty, mut major, mut minor, mut build, mut qfe, mut len) =
                (0u16, 0u32, 0u16, 0u16, 0u16, 0u16, 0u32);
            // SAFETY: [interface-version, plain-call] corprof.idl ICorProfilerInfo3::GetRuntimeInformation:
            // every out pointer is a valid local; a zero-length, null version
            // buffer asks for no string.
            let hr = unsafe {
                (v.GetRuntimeInformation)(
                    this,
                    &mut id,
                    &mut ty,
                    &mut major,
                    &mut minor,
                    &mut build,
                    &mut qfe,
                    0,
                    &mut len,
                    core::ptr::null_mut(),
                )
            };
            if hr.is_err() {
                return MaskRules::BEFORE_NET10;
            }
            let ty = match ty {
                COR_PRF_CORE_CLR => clrprof::RuntimeType::CoreClr,
                COR_PRF_DESKTOP_CLR => clrprof::RuntimeType::Desktop,
                o => clrprof::RuntimeType::Unknown(o),
            };
            MaskRules::for_version(ty, major)
        })
    }

    /// Whether the multiplexer's `Initialize` has returned.
    #[inline]
    pub fn running(&self) -> bool {
        self.phase.load(Ordering::Acquire) == PHASE_RUNNING
    }

    /// Child `k`'s request to set its masks to `(low, high)`: checked the
    /// way the runtime checks a profiler's own request, then the union of
    /// every child's masks goes to the runtime. On failure the child keeps
    /// its old masks and gets the runtime's (or the rule's) HRESULT.
    pub(crate) fn set_child_masks(&self, k: usize, low: u32, high: u32) -> HRESULT {
        let Some(child) = self.children.get(k) else {
            return E_INVALIDARG;
        };
        // A multiplexer loaded by attach refuses, as the SDK refuses its own
        // profiler (clrprof::MaskRules::refuse_after_attach), the flags this
        // runtime's version does not allow after attach
        // (`DISABLE_INLINING`, `DISABLE_OPTIMIZATIONS` before .NET 10),
        // without calling the runtime; other flags are left to the runtime.
        if self.attached
            && self
                .rules()
                .refuse_after_attach(clrprof::EventMask::from_bits_retain(low), "SetEventMask")
                .is_some()
        {
            return CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER;
        }
        // reentrancy: none: `masks` reads the child's record (an atomic), not the child
        let mut applied = self.applied.lock().unwrap_or_else(|e| e.into_inner());
        let (old_low, old_high) = child.masks();
        // Immutable flags are fixed once Initialize returned (corprof.idl:
        // COR_PRF_MONITOR_IMMUTABLE, of this runtime's version); the union
        // may not change, but the child is refused as the runtime would
        // refuse it.
        if self.running()
            && ((old_low ^ low) & self.rules().immutable().bits() != 0
                || (old_high ^ high) & COR_PRF_HIGH_MONITOR_IMMUTABLE != 0)
        {
            return CORPROF_E_IMMUTABLE_FLAGS_SET;
        }
        // Flags whose callbacks the child's callback interface lacks.
        let version = child.callback_version();
        if low & COR_PRF_ENABLE_REJIT != 0 && version < 4 {
            return CORPROF_E_CALLBACK4_REQUIRED;
        }
        if high & COR_PRF_HIGH_ADD_ASSEMBLY_REFERENCES != 0 && version < 6 {
            return CORPROF_E_CALLBACK6_REQUIRED;
        }
        if high & COR_PRF_HIGH_IN_MEMORY_SYMBOLS_UPDATED != 0 && version < 7 {
            return CORPROF_E_CALLBACK7_REQUIRED;
        }
        let new = low as u64 | (high as u64) << 32;
        let union = self.union_with(k, new);
        if union != *applied {
            let hr = self.apply(union);
            if hr.is_err() {
                return hr;
            }
            *applied = union;
        }
        child.masks.store(new, Ordering::Relaxed);
        S_OK
    }

    /// Recomputes the union without child `k` (dropped) and gives it to the runtime.
    pub(crate) fn forget_child_masks(&self, k: usize) {
        let mut applied = self.applied.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(child) = self.children.get(k) {
            child.masks.store(0, Ordering::Relaxed);
        }
        let union = self.union_with(k, 0);
        if union != *applied && self.apply(union).is_ok() {
            *applied = union;
        }
    }

    /// The union of every active child's masks, with child `k`'s replaced
    /// by `masks`.
    ///
    /// A negative flag is in the union only when no child needs what it
    /// takes away: `COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC`
    /// stops the runtime's `ObjectsAllocatedByClass` for the whole
    /// multiplexer (seen on .NET 11.0.0), so it is given to the runtime only
    /// while every child with `COR_PRF_MONITOR_GC` asked for it.
    fn union_with(&self, k: usize, masks: u64) -> u64 {
        let all: Vec<u64> = self
            .children
            .iter()
            .enumerate()
            .filter(|(j, c)| *j == k || c.active.load(Ordering::Acquire))
            .map(|(j, c)| {
                if j == k {
                    masks
                } else {
                    c.masks.load(Ordering::Relaxed)
                }
            })
            .collect();
        union_of(&all)
    }

    fn apply(&self, union: u64) -> HRESULT {
        let (low, high) = (union as u32, (union >> 32) as u32);
        // SAFETY: [interface-version] Info5 / Info1 vtable types for their versions.
        unsafe {
            if let Some((this, v)) = self.runtime.vtbl::<ICorProfilerInfo5_Vtbl>(5) {
                // SAFETY: corprof.idl ICorProfilerInfo5::SetEventMask2 takes two DWORDs.
                (v.SetEventMask2)(this, low, high)
            } else if high != 0 {
                E_NOTIMPL
            } else if let Some((this, v)) = self.runtime.vtbl::<ICorProfilerInfo_Vtbl>(1) {
                // SAFETY: corprof.idl ICorProfilerInfo::SetEventMask takes a DWORD.
                (v.SetEventMask)(this, low)
            } else {
                E_NOINTERFACE
            }
        }
    }

    /// The active children.
    pub(crate) fn active(&self) -> impl Iterator<Item = (usize, &ChildState)> {
        self.children
            .iter()
            .enumerate()
            .filter(|(_, c)| c.active.load(Ordering::Acquire))
    }

    /// Child `k`'s `RequestProfilerDetach`: refused as the runtime would
    /// refuse the child alone; otherwise noted, and the runtime is asked to
    /// detach the multiplexer once every active child has asked.
    pub(crate) fn request_detach(&self, k: usize, expected_ms: DWORD) -> HRESULT {
        let Some(child) = self.children.get(k) else {
            return E_INVALIDARG;
        };
        let (low, high) = child.masks();
        // The runtime refuses a profiler that set a flag immutable on its
        // version (EnsureProfilerDetachable).
        if low & self.rules().immutable().bits() != 0 || high & COR_PRF_HIGH_MONITOR_IMMUTABLE != 0
        {
            return CORPROF_E_IMMUTABLE_FLAGS_SET;
        }
        if low & COR_PRF_ENABLE_REJIT != 0 || child.set_il.load(Ordering::Relaxed) {
            return CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT;
        }
        child.detach_requested.store(true, Ordering::SeqCst);
        if !self
            .active()
            .all(|(_, c)| c.detach_requested.load(Ordering::SeqCst))
        {
            self.out
                .record("detach_pending")
                .num("child", child.spec.index as u64)
                .write();
            self.out.flush();
            return S_OK;
        }
        // SAFETY: [interface-version] Info3 vtable type for version 3.
        let hr = match unsafe { self.runtime.vtbl::<ICorProfilerInfo3_Vtbl>(3) } {
            // SAFETY: [interface-version, plain-call] corprof.idl ICorProfilerInfo3::RequestProfilerDetach takes a DWORD.
            Some((this, v)) => unsafe { (v.RequestProfilerDetach)(this, expected_ms) },
            None => E_NOINTERFACE,
        };
        self.out
            .record("detach_requested")
            .num("child", child.spec.index as u64)
            .str("hr", &format!("{:#010x}", hr.0 as u32))
            .write();
        self.out.flush();
        if hr.is_err() {
            child.detach_requested.store(false, Ordering::SeqCst);
        }
        hr
    }
}

/// The masks (low | high << 32) the runtime must have for children with
/// `masks`: their union, without a negative flag some child would lose
/// callbacks to (see [`Shared::union_with`]).
pub(crate) fn union_of(masks: &[u64]) -> u64 {
    const SKIP: u64 = (COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC as u64) << 32;
    const GC: u64 = COR_PRF_MONITOR_GC as u64;
    let union = masks.iter().fold(0, |u, m| u | m);
    let by_class_wanted = masks.iter().any(|m| m & GC != 0 && m & SKIP == 0);
    if by_class_wanted {
        union & !SKIP
    } else {
        union
    }
}

/// A child's Info proxy: the object behind the `ICorProfilerInfo*` pointer
/// the child is given. `#[repr(C)]` with the vtable pointer first: a
/// pointer to it is a COM interface pointer.
#[repr(C)]
pub(crate) struct InfoProxy {
    vtbl: &'static ICorProfilerInfo15_Vtbl,
    refs: AtomicU32,
    pub(crate) shared: Arc<Shared>,
    /// The child's position in `shared.children`.
    pub(crate) child: usize,
}

/// One owned reference to a proxy (released when dropped).
pub(crate) struct ProxyRef(*mut InfoProxy);

// SAFETY: [free-threaded] the proxy's reference count is atomic and its state is Sync
// (Arc<Shared>, an index); COM allows releasing a free-threaded object's
// reference from any thread.
unsafe impl Send for ProxyRef {}
// SAFETY: [free-threaded] `&ProxyRef` only gives out the raw pointer.
unsafe impl Sync for ProxyRef {}

impl ProxyRef {
    /// Creates child `child`'s proxy with one reference, owned by the result.
    ///
    /// # Safety
    /// `vtbl`'s methods take an [`InfoProxy`] as `this` (the proxy's
    /// generated vtable, `info_vtbl::INFO_VTBL`).
    pub(crate) unsafe fn new(
        vtbl: &'static ICorProfilerInfo15_Vtbl,
        shared: Arc<Shared>,
        child: usize,
    ) -> ProxyRef {
        let proxy = Box::new(InfoProxy {
            vtbl,
            refs: AtomicU32::new(1),
            shared,
            child,
        });
        ProxyRef(Box::into_raw(proxy))
    }

    /// The COM interface pointer (an `ICorProfilerInfo{n}` for every `n` the runtime has).
    pub(crate) fn as_raw(&self) -> *mut c_void {
        self.0.cast()
    }
}

impl Drop for ProxyRef {
    fn drop(&mut self) {
        // SAFETY: [com-ownership] this value owns one reference to a live proxy.
        unsafe { InfoProxy::release(self.0.cast()) };
    }
}

impl InfoProxy {
    /// The proxy behind a COM `this` pointer.
    ///
    /// # Safety
    /// `this` is a pointer a proxy method was called with: one that
    /// [`ProxyRef::as_raw`] or this proxy's `QueryInterface` handed out, whose
    /// caller holds a reference (COM's rule for calling a method).
    #[inline]
    pub(crate) unsafe fn get<'a>(this: *mut c_void) -> &'a InfoProxy {
        // SAFETY: [caller-contract] guaranteed by the caller.
        unsafe { &*(this as *const InfoProxy) }
    }

    /// The runtime's object and vtable for a method of `ICorProfilerInfo{version}`,
    /// or `None` when the runtime lacks that version.
    ///
    /// # Safety
    /// As [`InfoProxy::get`]; `V` is the vtable type of `ICorProfilerInfo{version}`.
    #[inline]
    pub(crate) unsafe fn forward<'a, V>(
        this: *mut c_void,
        version: u32,
    ) -> Option<(*mut c_void, &'a V)> {
        // SAFETY: [caller-contract] guaranteed by the caller.
        let proxy = unsafe { Self::get(this) };
        // SAFETY: [interface-version, caller-contract] `V` matches `version` (caller); the runtime's object lives
        // as long as `shared`, which the proxy keeps.
        unsafe { proxy.shared.runtime.vtbl::<V>(version) }
    }

    /// The state of the proxy's child.
    pub(crate) fn child(&self) -> &ChildState {
        &self.shared.children[self.child]
    }

    /// One more reference (`IUnknown::AddRef`); the new count.
    #[inline]
    pub(crate) fn add_ref(&self) -> u32 {
        self.refs.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// One reference less (`IUnknown::Release`): frees the proxy with its
    /// last reference; the count left.
    ///
    /// # Safety
    /// As [`InfoProxy::get`]; the caller gives up one reference it owns.
    pub(crate) unsafe fn release(this: *mut c_void) -> u32 {
        // SAFETY: [caller-contract] guaranteed by the caller.
        let proxy = unsafe { Self::get(this) };
        let left = proxy.refs.fetch_sub(1, Ordering::Release) - 1;
        if left == 0 {
            std::sync::atomic::fence(Ordering::Acquire);
            // SAFETY: [com-ownership, local-memory] the last reference is gone: nobody can call the proxy
            // again, and it was made by `Box::into_raw` in `ProxyRef::new`.
            drop(unsafe { Box::from_raw(this as *mut InfoProxy) });
        }
        left
    }
}
