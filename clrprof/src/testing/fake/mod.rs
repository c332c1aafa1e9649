//! [`FakeRuntime`]: a Rust object implementing `ICorProfilerInfo` …
//! `ICorProfilerInfo11` with programmable answers (offering Info1–3 unless
//! made with [`FakeRuntime::with_info_version`]), plus [`FakeMetaData`]
//! implementing the part of `IMetaDataImport` that names need.
//!
//! ```
//! # #[cfg(feature = "fake-runtime")]
//! # fn main() {
//! use clrprof::testing::fake::{FakeFunction, FakeRuntime};
//!
//! let fake = FakeRuntime::new();
//! fake.state().functions.insert(0x10, FakeFunction { module: 0x20, token: 0x0600_0001, ..Default::default() });
//! // SAFETY: the fake's state describes no memory; nothing is read through it.
//! let info = unsafe { fake.profiler_info() };
//! // SAFETY: the ID is only passed to the fake's ProfilerInfo.
//! let f = unsafe { fake.function_id(0x10) };
//! assert_eq!(info.function_info(f).unwrap().token.0, 0x0600_0001);
//! # }
//! # #[cfg(not(feature = "fake-runtime"))]
//! # fn main() {}
//! ```
//!
//! What the fake does, so tests can rely on it:
//! - IDs are plain keys of the maps in [`FakeState`]; an unknown ID is
//!   answered with `E_INVALIDARG`, and no ID is ever dereferenced.
//! - Every call is recorded in [`FakeState::calls`] (method name without the
//!   interface, and its ID/value arguments), then the hook set with
//!   [`FakeRuntime::on_call`] runs (it may change the state, e.g. make a name
//!   longer between two calls of the buffer protocol), then a failure set
//!   with [`FakeRuntime::fail`] for that method is returned, if any.
//! - Caller-allocated buffers follow the runtime's conventions per method:
//!   module names answer `ERROR_INSUFFICIENT_BUFFER` when short; app-domain,
//!   assembly and runtime-version strings are truncated; arrays report the
//!   full count and fill what fits; `GetClassLayout`, `GetClassIDInfo2` and
//!   `GetFunctionInfo2` report the number of elements written (the count
//!   only when asked with no buffer); metadata names are
//!   truncated with `CLDB_S_TRUNCATION`.
//! - Methods the fake does not implement answer `E_NOTIMPL`; so does every
//!   method CoreCLR leaves unimplemented (`SetFunctionReJIT`,
//!   `GetContextStaticAddress`, in-proc debugging).
//! - [`FakeRuntime::new`] answers `QueryInterface` for Info1–3 only, so
//!   newer methods are `Unsupported`; [`FakeRuntime::with_info_version`]
//!   answers up to Info15 (Info4–9 and 11 answer from the state; Info10
//!   and 12–15 from the heap, GC-handle and EventPipe state).

#![allow(non_snake_case, unused_variables, clippy::too_many_arguments)]

/// Locks the fake's state (a poisoned lock is still usable: the state is
/// plain data).
fn lock(info: &info::FakeInfo) -> std::sync::MutexGuard<'_, FakeState> {
    info.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// In an Info method of the fake: locks the state, records the call
/// (`$name` and the listed arguments), runs the hook and returns a forced
/// failure; else yields the guard.
macro_rules! enter {
    ($self:ident, $name:literal $(, $arg:expr)*) => {{
        let mut st = super::lock(&$self);
        if let Some(hr) = st.enter($name, vec![$($arg as usize),*]) {
            return hr;
        }
        st
    }};
}

/// Looks an ID up, answering `E_INVALIDARG` for an unknown one.
macro_rules! get {
    ($map:expr, $id:expr) => {
        match $map.get(&$id) {
            Some(v) => v.clone(),
            None => return E_INVALIDARG,
        }
    };
}

mod heap_events;
mod info;
mod info10;
mod info_newer;
mod metadata;
pub(crate) mod objects;
mod versions;

pub use heap_events::{FakeEpConfig, FakeEpEvent, FakeEpWrite, FakeEventPipe, FakeHeap};
pub use metadata::{FakeMemberRef, FakeMetaData, FakeMethodDef, FakeTypeDef};

use crate::error::KnownHresult;
use crate::ids::*;
use crate::info::{ProfilerInfo, RuntimeHandle, Scope};
use clrprof_sys as sys;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use windows_core::{IUnknown, HRESULT};

/// A recorded call: the method name (e.g. `GetClassLayout`) and its ID or
/// value arguments, in order, as `usize`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeCall {
    /// Method name without the interface.
    pub method: &'static str,
    /// Arguments that are IDs, tokens or values (no out pointers).
    pub args: Vec<usize>,
}

/// `GetRuntimeInformation`'s answer.
#[derive(Clone, Debug)]
pub struct FakeRuntimeInfo {
    /// Instance ID.
    pub clr_instance_id: u16,
    /// `COR_PRF_RUNTIME_TYPE`.
    pub runtime_type: u32,
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
    /// Build number.
    pub build: u16,
    /// QFE number.
    pub qfe: u16,
    /// Version string.
    pub version_string: String,
}

impl Default for FakeRuntimeInfo {
    fn default() -> Self {
        FakeRuntimeInfo {
            clr_instance_id: 7,
            runtime_type: sys::COR_PRF_CORE_CLR,
            major: 8,
            minor: 0,
            build: 4,
            qfe: 0,
            version_string: "8.0.4".into(),
        }
    }
}

/// A function.
#[derive(Clone, Debug, Default)]
pub struct FakeFunction {
    /// Its class (0 for the runtime's "none").
    pub class: usize,
    /// Its module.
    pub module: usize,
    /// Its `MethodDef` token.
    pub token: u32,
    /// Its own type arguments.
    pub type_args: Vec<usize>,
    /// Native code chunks `(start, size)`; empty: not compiled.
    pub code: Vec<(usize, usize)>,
    /// IL-to-native map entries `(il, native_start, native_end)`.
    pub il_map: Vec<(u32, u32, u32)>,
    /// Further native code versions (Info4/Info9: tiered compilation and
    /// ReJIT) after the first one, which is `code` / `il_map` with ReJIT ID 0.
    pub versions: Vec<FakeCodeVersion>,
    /// `Some` for a dynamic method (Info8: LCG, IL stubs), which has no metadata.
    pub dynamic: Option<FakeDynamic>,
}

/// One more native code version of a function.
#[derive(Clone, Debug, Default)]
pub struct FakeCodeVersion {
    /// The ReJIT ID of its IL version (0: the original IL).
    pub rejit_id: usize,
    /// Its code chunks `(start, size)`; the first chunk's start is its start address.
    pub code: Vec<(usize, usize)>,
    /// Its IL-to-native map `(il, native_start, native_end)`.
    pub il_map: Vec<(u32, u32, u32)>,
}

/// What `GetDynamicFunctionInfo` answers for a dynamic method.
#[derive(Clone, Debug, Default)]
pub struct FakeDynamic {
    /// The runtime's name for it.
    pub name: String,
    /// Its signature blob (the fake hands out a pointer into it).
    pub signature: Arc<[u8]>,
}

/// A native code version seen by the fake: `(ReJIT ID, chunks, IL map)`.
pub type FakeVersionView<'a> = (usize, &'a [(usize, usize)], &'a [(u32, u32, u32)]);

impl FakeFunction {
    /// Every native code version: `(ReJIT ID, chunks, IL map)`, the first
    /// one first (absent while `code` is empty).
    pub fn all_versions(&self) -> Vec<FakeVersionView<'_>> {
        let first = (!self.code.is_empty()).then_some((0, &self.code[..], &self.il_map[..]));
        first
            .into_iter()
            .chain(
                self.versions
                    .iter()
                    .map(|v| (v.rejit_id, &v.code[..], &v.il_map[..])),
            )
            .collect()
    }
}

/// A class.
#[derive(Clone, Debug, Default)]
pub struct FakeClass {
    /// Its module (0 for arrays).
    pub module: usize,
    /// Its `TypeDef` token.
    pub type_def: u32,
    /// Its parent class.
    pub parent: usize,
    /// Its type arguments.
    pub type_args: Vec<usize>,
    /// For array classes: `(CorElementType, element class, rank)`.
    pub array: Option<(u32, usize, u32)>,
    /// Instance fields `(FieldDef token, offset)`.
    pub fields: Vec<(u32, u32)>,
    /// `GetClassLayout`'s size.
    pub size: u32,
    /// `GetBoxClassLayout`'s offset (`None`: not a value type).
    pub box_offset: Option<u32>,
}

/// The key of a generic method instantiation: `(token, class, method type arguments)`.
pub type FunctionInstantiation = (u32, usize, Vec<usize>);

/// A module.
#[derive(Clone, Debug, Default)]
pub struct FakeModule {
    /// File name.
    pub name: String,
    /// Base load address.
    pub base: usize,
    /// Its assembly.
    pub assembly: usize,
    /// `COR_PRF_MODULE_FLAGS`.
    pub flags: u32,
    /// App domains containing it.
    pub app_domains: Vec<usize>,
    /// Its metadata.
    pub metadata: Arc<FakeMetaData>,
    /// IL bodies by `MethodDef` token.
    pub il_bodies: BTreeMap<u32, Arc<[u8]>>,
    /// Objects of its frozen segment.
    pub frozen_objects: Vec<usize>,
    /// `GetFunctionFromToken` answers: token → FunctionID.
    pub functions_by_token: BTreeMap<u32, usize>,
    /// `GetClassFromToken` answers: TypeDef → ClassID.
    pub classes_by_token: BTreeMap<u32, usize>,
    /// `GetClassFromTokenAndTypeArgs` answers: `(TypeDef, type args)` → ClassID.
    pub class_instantiations: Vec<((u32, Vec<usize>), usize)>,
    /// `GetFunctionFromTokenAndTypeArgs` answers: `(token, class, type args)` → FunctionID.
    pub function_instantiations: Vec<(FunctionInstantiation, usize)>,
    /// Its in-memory symbol stream (Info7), if it has one.
    pub symbols: Option<Vec<u8>>,
    /// For an NGEN/ReadyToRun module with an inline tracking map (Info6):
    /// `((inlinee module, inlinee token), inliners as (module, token), incomplete)`.
    /// `None`: no map (`CORPROF_E_DATAINCOMPLETE`, as CoreCLR answers for JIT-only modules).
    pub inliners: Option<Vec<NgenInliners>>,
}

/// One answer of `EnumNgenModuleMethodsInliningThisMethod`:
/// `((inlinee module, inlinee token), inliners as (module, token), incomplete)`.
pub type NgenInliners = ((usize, u32), Vec<(usize, u32)>, bool);

/// An assembly.
#[derive(Clone, Debug, Default)]
pub struct FakeAssembly {
    /// Simple name.
    pub name: String,
    /// Its app domain.
    pub app_domain: usize,
    /// Its manifest module.
    pub module: usize,
}

/// An app domain.
#[derive(Clone, Debug, Default)]
pub struct FakeAppDomain {
    /// Friendly name.
    pub name: String,
    /// Process ID.
    pub process_id: usize,
}

/// A managed thread.
#[derive(Clone, Debug, Default)]
pub struct FakeThread {
    /// OS thread ID.
    pub os_id: u32,
    /// OS handle value.
    pub handle: usize,
    /// Its app domain.
    pub app_domain: usize,
    /// Its context.
    pub context: usize,
}

/// An object.
#[derive(Clone, Debug, Default)]
pub struct FakeObject {
    /// Its class.
    pub class: usize,
    /// `GetObjectSize`'s answer.
    pub size: u32,
    /// For arrays: `(dimension sizes, lower bounds, data address)`.
    pub array: Option<(Vec<u32>, Vec<i32>, usize)>,
}

/// A static field: its `COR_PRF_STATIC_TYPE` bits and the address the
/// matching `Get*StaticAddress` call answers.
#[derive(Clone, Debug, Default)]
pub struct FakeStatic {
    /// `COR_PRF_STATIC_TYPE` bits.
    pub kind: u32,
    /// The address.
    pub address: usize,
}

/// Hook run on every call, with the method name.
pub type CallHook = Box<dyn FnMut(&mut FakeState, &'static str) + Send>;

/// The ELT registrations the fake recorded (addresses; `0` = none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FakeElt {
    /// The `FunctionIDMapper2` and its client data.
    pub mapper: usize,
    /// The client data given with [`mapper`](Self::mapper).
    pub mapper_client_data: usize,
    /// `SetEnterLeaveFunctionHooks3`: enter, leave, tailcall.
    pub hooks3: [usize; 3],
    /// `SetEnterLeaveFunctionHooks3WithInfo`: enter, leave, tailcall.
    pub hooks3_with_info: [usize; 3],
}

/// Everything the fake answers from. Tests change it through
/// [`FakeRuntime::state`].
#[derive(Default)]
pub struct FakeState {
    /// `GetRuntimeInformation`.
    pub runtime: FakeRuntimeInfo,
    /// `true` if the `ProfilerInfo` was built as attached; the fake then
    /// refuses what the runtime refuses an attaching profiler.
    pub attached: bool,
    /// `true` once `Initialize` has returned: the fake then refuses a
    /// change of an immutable flag with `E_FAIL`, by the rules of the
    /// version in [`runtime`](Self::runtime) (before .NET 10
    /// `DISABLE_INLINING` and `DISABLE_OPTIMIZATIONS` are immutable and
    /// refused after attach; dotnet/runtime PR 113924), and its GC heap is
    /// initialized (`GetLOHObjectSizeThreshold` answers from .NET 9 on).
    pub initialized: bool,
    /// `GetEventMask` / `SetEventMask`.
    pub event_mask: u32,
    /// The high mask of `GetEventMask2` / `SetEventMask2` (Info5).
    pub event_mask_high: u32,
    /// The process environment `GetEnvironmentVariable` / `SetEnvironmentVariable` see (Info11).
    pub environment: BTreeMap<String, String>,
    /// `GetCurrentThreadID` (`None`: not a managed thread).
    pub current_thread: Option<usize>,
    /// Functions by ID.
    pub functions: BTreeMap<usize, FakeFunction>,
    /// Classes by ID.
    pub classes: BTreeMap<usize, FakeClass>,
    /// Modules by ID.
    pub modules: BTreeMap<usize, FakeModule>,
    /// Assemblies by ID.
    pub assemblies: BTreeMap<usize, FakeAssembly>,
    /// App domains by ID.
    pub app_domains: BTreeMap<usize, FakeAppDomain>,
    /// Threads by ID.
    pub threads: BTreeMap<usize, FakeThread>,
    /// Objects by ID.
    pub objects: BTreeMap<usize, FakeObject>,
    /// Statics by `(ClassID, FieldDef)`.
    pub statics: BTreeMap<(usize, u32), FakeStatic>,
    /// `GetGenerationBounds` (empty: "no GC yet", `E_FAIL`).
    pub generation_bounds: Vec<sys::COR_PRF_GC_GENERATION_RANGE>,
    /// `GetNotifiedExceptionClauseInfo` (`None`: no exception, `S_FALSE`).
    pub exception_clause: Option<sys::COR_PRF_EX_CLAUSE_INFO>,
    /// `EnumJITedFunctions`.
    pub jitted: Vec<sys::COR_PRF_FUNCTION>,
    /// `GetStringLayout` offsets (buffer length, string length, buffer).
    pub string_layout: [u32; 3],
    /// Forced failures by method name.
    pub failures: HashMap<&'static str, HRESULT>,
    /// Every call, in order.
    pub calls: Vec<FakeCall>,
    /// Bodies given to `SetILFunctionBody`: `(module, token, bytes read from
    /// the pointer, as many as the header says)`.
    pub il_bodies_set: Vec<(usize, u32, Vec<u8>)>,
    /// Maps given to `SetILInstrumentedCodeMap`.
    pub il_maps_set: Vec<(usize, bool, Vec<sys::COR_IL_MAP>)>,
    /// The heap and GC handles (Info10, 13, 14, 15).
    pub heap: FakeHeap,
    /// EventPipe (Info12, 14).
    pub eventpipe: FakeEventPipe,
    /// What `SetFunctionIDMapper2` and `SetEnterLeaveFunctionHooks3`(`WithInfo`)
    /// were given, so a test (or a benchmark driver) can call the hooks the
    /// way the runtime would.
    pub elt: FakeElt,
    hook: Option<CallHook>,
    /// Memory the fake handed out and keeps alive while it lives.
    keep_alive: Vec<Arc<[u8]>>,
    allocations: Vec<Box<[u8]>>,
    pub(crate) live_enumerators: Arc<std::sync::atomic::AtomicUsize>,
}

impl FakeState {
    /// Records the call, runs the hook, and returns the forced failure, if any.
    fn enter(&mut self, method: &'static str, args: Vec<usize>) -> Option<HRESULT> {
        self.calls.push(FakeCall { method, args });
        if let Some(mut hook) = self.hook.take() {
            hook(self, method);
            if self.hook.is_none() {
                self.hook = Some(hook);
            }
        }
        self.failures.get(method).copied()
    }
}

/// A fake runtime. Cloning shares the state.
#[derive(Clone)]
pub struct FakeRuntime {
    state: Arc<Mutex<FakeState>>,
    /// The handles scopes borrow: as loaded at startup, and by attach.
    handles: [std::sync::OnceLock<RuntimeHandle>; 2],
    /// The highest `ICorProfilerInfoN` it answers `QueryInterface` for.
    info_version: u8,
}

impl Default for FakeRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeRuntime {
    /// A fake with no IDs, CoreCLR 8.0.4 runtime information and the string
    /// layout of 64-bit CoreCLR (`8, 8, 12`).
    pub fn new() -> Self {
        let state = FakeState {
            string_layout: [8, 8, 12],
            ..Default::default()
        };
        FakeRuntime {
            state: Arc::new(Mutex::new(state)),
            handles: [std::sync::OnceLock::new(), std::sync::OnceLock::new()],
            info_version: 3,
        }
    }

    /// A fake that answers `QueryInterface` for `ICorProfilerInfo` …
    /// `ICorProfilerInfo{version}` (3 to 15; [`new`](Self::new) answers up
    /// to 3), like a runtime of that generation: .NET Core 3.1 implements
    /// up to 11, .NET 8 up to 14. Methods of Info4–9 and 11 answer from
    /// [`FakeState`]; Info10 and 12–15 implement the heap, GC-handle and
    /// EventPipe methods (see [`FakeHeap`], [`FakeEventPipe`]).
    pub fn with_info_version(version: u8) -> Self {
        FakeRuntime {
            info_version: version.clamp(3, 15),
            ..Self::new()
        }
    }

    /// The state, to program answers or read recorded calls. Do not hold the
    /// guard across a `ProfilerInfo` call (the fake locks it too).
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes every call of `method` (e.g. `"GetClassLayout"`) fail with `hr`.
    pub fn fail(&self, method: &'static str, hr: HRESULT) {
        self.state().failures.insert(method, hr);
    }

    /// Sets the hook run on every call (after recording, before answering).
    pub fn on_call(&self, hook: impl FnMut(&mut FakeState, &'static str) + Send + 'static) {
        self.state().hook = Some(Box::new(hook));
    }

    /// How many enumerators the fake handed out are still alive (not yet
    /// released by the caller).
    pub fn live_enumerators(&self) -> usize {
        self.state()
            .live_enumerators
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many times `method` was called.
    pub fn call_count(&self, method: &str) -> usize {
        self.state()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    /// The recorded calls of `method`, in order.
    pub fn calls_of(&self, method: &str) -> Vec<FakeCall> {
        self.state()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// The fake as the `IUnknown` a runtime passes to `Initialize`.
    pub fn unknown(&self) -> IUnknown {
        let object: IUnknown = info::FakeInfo {
            state: self.state.clone(),
        }
        .into();
        versions::limit(object, self.info_version)
    }

    /// A callback scope over the fake (as loaded at startup): the scope in
    /// which most callbacks run, where a GC may run concurrently.
    ///
    /// # Safety
    /// The SDK's readers follow the fake's answers into memory: object
    /// addresses, sizes, layouts and static addresses in [`FakeState`] must
    /// describe memory the test owns and keeps alive while it uses the
    /// scope (a real runtime guarantees this for its own objects).
    pub unsafe fn profiler_info(&self) -> ProfilerInfo<'_> {
        ProfilerInfo::scoped(self.handle_with(false), Scope::Callback)
    }

    /// A scope where no GC can run (like `ObjectAllocated` or a runtime
    /// suspension), as loaded at startup.
    ///
    /// # Safety
    /// As for [`profiler_info`](Self::profiler_info).
    pub unsafe fn profiler_info_no_gc(&self) -> ProfilerInfo<'_> {
        ProfilerInfo::scoped(self.handle_with(false), Scope::NoGc)
    }

    /// A scope of the given kind over the fake, as loaded at startup.
    ///
    /// # Safety
    /// As for [`profiler_info`](Self::profiler_info).
    #[cfg(test)]
    pub(crate) unsafe fn profiler_info_in(&self, scope: Scope) -> ProfilerInfo<'_> {
        ProfilerInfo::scoped(self.handle_with(false), scope)
    }

    /// A callback scope over the fake, as loaded by attach.
    ///
    /// # Safety
    /// As for [`profiler_info`](Self::profiler_info).
    pub unsafe fn profiler_info_attached(&self) -> ProfilerInfo<'_> {
        ProfilerInfo::scoped(self.handle_with(true), Scope::Callback)
    }

    /// An owned handle over the fake, as loaded at startup (`attached`
    /// false) or by attach.
    ///
    /// # Safety
    /// As for [`profiler_info`](Self::profiler_info).
    pub unsafe fn runtime_handle(&self, attached: bool) -> RuntimeHandle {
        self.handle_with(attached).clone()
    }

    /// Runs `init` in an `Initialize` scope over the fake and returns the
    /// SDK components it registered, for tests that drive components.
    #[cfg(test)]
    pub(crate) fn initialize_components(
        &self,
        attached: bool,
        init: impl FnOnce(&ProfilerInfo<'_>),
    ) -> crate::component::Components {
        let registrar = crate::component::Registrar::default();
        registrar.during(|| {
            init(&ProfilerInfo::scoped(
                self.handle_with(attached),
                Scope::Initialize,
            ))
        });
        registrar.finish()
    }

    fn handle_with(&self, attached: bool) -> &RuntimeHandle {
        let initialized = {
            let mut st = self.state();
            st.attached = attached;
            st.initialized
        };
        let handle = self.handles[attached as usize].get_or_init(|| {
            // SAFETY: [test-fake, interface-version] the fake implements ICorProfilerInfo15 and its bases; it
            // never dereferences the IDs passed to it.
            match unsafe { RuntimeHandle::from_unknown(&self.unknown(), attached) } {
                Ok(info) => info,
                Err(e) => panic!("the fake always answers QueryInterface(ICorProfilerInfo): {e}"),
            }
        });
        // The runtime initializes its GC heap once `Initialize` returned.
        handle.set_gc_heap_initialized(attached || initialized);
        handle
    }
}

macro_rules! fake_id_ctors {
    ($($fn_name:ident -> $ty:ident;)*) => {
        impl FakeRuntime {
            $(
                #[doc = concat!("A [`", stringify!($ty), "`] for the fake's tables.")]
                ///
                /// # Safety
                /// Pass it only to a `ProfilerInfo` of this fake: a real
                /// runtime would dereference the made-up value.
                pub unsafe fn $fn_name(&self, raw: usize) -> $ty<'_> {
                    // SAFETY: [test-fake, caller-contract] the fake treats IDs as map keys; the caller
                    // keeps the ID away from real runtimes.
                    unsafe { $ty::from_sys(raw) }
                }
            )*
        }
    };
}

fake_id_ctors! {
    function_id -> FunctionId;
    class_id -> ClassId;
    module_id -> ModuleId;
    assembly_id -> AssemblyId;
    app_domain_id -> AppDomainId;
    thread_id -> ThreadId;
    object_id -> ObjectId;
    context_id -> ContextId;
}

pub(crate) const S_OK: HRESULT = HRESULT(0);
pub(crate) const S_FALSE: HRESULT = HRESULT(1);
pub(crate) const E_NOTIMPL: HRESULT = HRESULT(KnownHresult::E_NOTIMPL as i32);
pub(crate) const E_INVALIDARG: HRESULT = HRESULT(KnownHresult::E_INVALIDARG as i32);
pub(crate) const E_FAIL: HRESULT = HRESULT(KnownHresult::E_FAIL as i32);
pub(crate) const SHORT: HRESULT = HRESULT(KnownHresult::ERROR_INSUFFICIENT_BUFFER as i32);
/// `CLDB_S_TRUNCATION`: a metadata name did not fit and was truncated.
pub(crate) const CLDB_S_TRUNCATION: HRESULT = HRESULT(0x0013_1106);

/// How a fake method answers a caller-allocated buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Buffer {
    /// Fill what fits, report the full count, succeed.
    FillReportTotal,
    /// Report the full count; if it does not fit, write nothing and answer
    /// `ERROR_INSUFFICIENT_BUFFER`.
    ShortIsError,
    /// Strings: copy what fits with a NUL, report the full count, succeed.
    Truncate,
    /// Strings: as `Truncate`, answering `CLDB_S_TRUNCATION` when cut.
    MetadataTruncate,
    /// Report the number written (the full count when the capacity is 0).
    ReportWritten,
}

/// Writes `v` through an optional out pointer.
///
/// # Safety
/// `p` is null or valid for a write of `T` (the COM out-parameter contract).
pub(crate) unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: [caller-contract] guaranteed by the caller.
        unsafe { p.write(v) };
    }
}

/// Answers a caller-allocated array buffer.
///
/// # Safety
/// `buf` is valid for `cap` writes (or `cap` is 0); `needed` is null or valid.
pub(crate) unsafe fn give<T: Copy>(
    data: &[T],
    cap: u32,
    needed: *mut u32,
    buf: *mut T,
    mode: Buffer,
) -> HRESULT {
    let total = data.len();
    let fits = total.min(cap as usize);
    match mode {
        Buffer::ShortIsError if total > cap as usize => {
            // SAFETY: [caller-contract] as for this function.
            unsafe { put(needed, total as u32) };
            return SHORT;
        }
        Buffer::ReportWritten => {
            // SAFETY: [caller-contract] as for this function.
            unsafe { put(needed, if cap == 0 { total as u32 } else { fits as u32 }) };
        }
        _ => {
            // SAFETY: [caller-contract] as for this function.
            unsafe { put(needed, total as u32) };
        }
    }
    if cap > 0 && !buf.is_null() {
        // SAFETY: [local-memory] `buf` has room for `cap >= fits` elements.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), buf, fits) };
    }
    S_OK
}

/// Answers a caller-allocated string buffer (UTF-16 with a NUL, counted in
/// the size).
///
/// # Safety
/// As [`give`].
pub(crate) unsafe fn give_str(
    s: &str,
    cap: u32,
    needed: *mut u32,
    buf: *mut u16,
    mode: Buffer,
) -> HRESULT {
    let wide: Vec<u16> = s.encode_utf16().chain(Some(0)).collect();
    match mode {
        Buffer::Truncate | Buffer::MetadataTruncate => {
            // SAFETY: [caller-contract] as for this function.
            unsafe { put(needed, wide.len() as u32) };
            if cap == 0 || buf.is_null() {
                return S_OK;
            }
            let n = wide.len().min(cap as usize);
            // SAFETY: [local-memory] `buf` has room for `cap >= n` elements; the last one
            // written is set to NUL below.
            unsafe {
                core::ptr::copy_nonoverlapping(wide.as_ptr(), buf, n);
                buf.add(n - 1).write(0);
            }
            if n < wide.len() && mode == Buffer::MetadataTruncate {
                CLDB_S_TRUNCATION
            } else {
                S_OK
            }
        }
        // SAFETY: [caller-contract] as for this function.
        _ => unsafe { give(&wide, cap, needed, buf, mode) },
    }
}

#[cfg(test)]
mod runtime_async;
#[cfg(test)]
mod runtime_rules;
#[cfg(test)]
mod tests;

/// Makes typed IDs from the fake's raw values, for tests:
/// `fake_ids!(fake; f = function_id(0x10), m = module_id(0x20));`
#[cfg(test)]
macro_rules! fake_ids {
    ($fake:expr; $($name:ident = $ctor:ident($raw:expr)),* $(,)?) => {
        $(
            // SAFETY: [test-fake] these IDs are only passed to the fake's ProfilerInfo.
            let $name = unsafe { $fake.$ctor($raw) };
        )*
    };
}
#[cfg(test)]
pub(crate) use fake_ids;
