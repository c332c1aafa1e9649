//! The multiplexer's callback object: the one profiler the runtime knows.
//!
//! Its `Initialize` loads the children and initializes each with its own
//! Info proxy; every later callback is fanned out (`callback_impl.rs`) to the
//! children whose masks ask for it, in configuration order. The methods
//! here are the callbacks the runtime reads a result from, and the
//! lifecycle:
//!
//! | callback | rule |
//! |---|---|
//! | `JITInlining` | each child gets `TRUE` to change; inlined only if every child left it `TRUE` (the runtime's rule for several profilers) |
//! | `JITCachedFunctionSearchStarted` | likewise: the cached code is used only if every child agrees |
//! | `ObjectReferences` | a child that returns a failure gets no more `ObjectReferences` in that GC; the runtime gets a failure (stop) once every receiving child stopped |
//! | `GetReJITParameters` | the children that asked for the method, chained ([`crate::rejit`]) |
//! | `ModuleUnloadFinished` | to every child that asked, then the IL bodies handed out for the module during ReJIT fan-outs are freed |
//! | `GetAssemblyReferences` | every child adds its references to the runtime's provider |
//! | `LoadAsNotificationOnly` | `FALSE`: the multiplexer is the main profiler |
//!
//! A child's failing `HRESULT` from any other callback is ignored, as the
//! runtime ignores it; a child never sees another child's result.

use crate::config::{self, ChildSpec};
use crate::env::Overrides;
use crate::info_vtbl::INFO_VTBL;
use crate::routes::{self, Route};
use crate::runtime::RealInfo;
use crate::shared::{ChildState, Loaded, ProxyRef, Shared, PHASE_RUNNING};
use clrprof::factory::IClassFactory;
use clrprof::guard::guard;
use clrprof::output::JsonLines;
use clrprof::sys::*;
use core::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use windows_core::{implement, IUnknown, Interface};

/// The multiplexer's COM object (one per runtime that loads it).
#[implement(ICorProfilerCallback11)]
pub struct Multiplexer {
    shared: OnceLock<Arc<Shared>>,
}

/// The loop of [`Multiplexer::fan_out`] over several children.
#[inline(never)]
fn fan_out_each(
    children: &[ChildState],
    route: Route,
    version: u32,
    mut call: impl FnMut(&Loaded) -> HRESULT,
) {
    for child in children {
        if let Some(loaded) = child.receiver(route, version) {
            let _ = call(loaded);
        }
    }
}

impl Multiplexer {
    pub(crate) fn new() -> Multiplexer {
        Multiplexer {
            shared: OnceLock::new(),
        }
    }

    /// Delivers a callback of `ICorProfilerCallback{version}` to every
    /// active child whose masks ask for `route`, in configuration order.
    /// `call` makes the child's call (it receives only children whose
    /// callback object implements `version`). Allocates nothing, takes no
    /// lock and cannot panic; a child's result is ignored.
    #[inline]
    pub(crate) fn fan_out(
        &self,
        route: Route,
        version: u32,
        mut call: impl FnMut(&Loaded) -> HRESULT,
    ) -> HRESULT {
        let Some(shared) = self.shared.get() else {
            return S_OK;
        };
        // One child is the common case: a path of its own that keeps nothing
        // live across the child's call, so it saves no registers; the loop,
        // which keeps its place in callee-saved registers, is out of line.
        if let [only] = &*shared.children {
            if let Some(loaded) = only.receiver(route, version) {
                let _ = call(loaded);
            }
        } else {
            fan_out_each(&shared.children, route, version, call);
        }
        S_OK
    }

    fn initialize(&self, unknown: *mut c_void, attach: Option<&[u8]>) -> HRESULT {
        clrprof::logging::init_from_env();
        // SAFETY: [callback-args, com-ownership] the runtime passes its profiler-info object as a borrowed
        // IUnknown valid for the call (corprof.idl Initialize / InitializeForAttach).
        let Some(unknown) = (unsafe { IUnknown::from_raw_borrowed(&unknown) }) else {
            return E_POINTER;
        };
        // SAFETY: [callback-args, com-ownership] this IUnknown is the runtime's profiler-info object.
        let runtime = match unsafe { RealInfo::new(unknown, attach.is_some()) } {
            Ok(r) => r,
            Err(e) => {
                log::error!("clrprof-mux: {e}");
                return e.hresult();
            }
        };
        // The multiplexer's own records go to CLRPROF_MUX_OUTPUT (what
        // `clrprof run --output-dir` sets), else to the process's
        // CLRPROF_OUTPUT: opened now, before any child's variables are set.
        let out = if std::env::var_os(config::OUTPUT_VAR).is_some() {
            JsonLines::from_env(config::OUTPUT_VAR)
        } else {
            JsonLines::default()
        };
        write_runtime_record(&out, &runtime);
        let specs = match attach {
            Some(data) if !data.is_empty() => config::from_client_data(data),
            _ => config::from_environment(),
        };
        let specs = match specs {
            Ok(s) if s.len() > 64 => Err(config::ConfigError(format!(
                "{} profilers named; at most 64 are supported",
                s.len()
            ))),
            other => other,
        };
        let specs = match specs {
            Ok(s) => s,
            Err(e) => {
                out.record("config_error").str("error", &e.0).write();
                out.flush();
                log::error!("clrprof-mux: {e}");
                return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
            }
        };
        let shared = Arc::new(Shared::new(runtime, attach.is_some(), specs, out));
        let _ = self.shared.set(shared.clone());
        for k in 0..shared.children.len() {
            initialize_child(&shared, k, attach.is_some());
        }
        let mode = crate::elt::install(&shared);
        let _ = shared.elt.set(mode);
        let active = shared.active().count();
        shared
            .out
            .record("initialized")
            .num("children", shared.children.len() as u64)
            .num("active", active as u64)
            .write();
        shared.out.flush();
        shared.phase.store(PHASE_RUNNING, Ordering::Release);
        if active == 0 {
            // Nothing to drive: the runtime unloads the multiplexer quietly.
            return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
        }
        S_OK
    }

    /// `ICorProfilerCallback::Initialize`.
    pub(crate) unsafe fn on_Initialize(&self, info: *mut c_void) -> HRESULT {
        guard("clrprof-mux Initialize", E_FAIL, || {
            self.initialize(info, None)
        })
    }

    /// `ICorProfilerCallback3::InitializeForAttach`: the client data carries
    /// the configuration (see [`crate::config`]); without it, the process
    /// environment does.
    pub(crate) unsafe fn on_InitializeForAttach(
        &self,
        info: *mut c_void,
        data: *mut c_void,
        size: UINT,
    ) -> HRESULT {
        guard("clrprof-mux InitializeForAttach", E_FAIL, || {
            let data = if data.is_null() || size == 0 {
                &[][..]
            } else {
                // SAFETY: [callback-args] corprof.idl: `pvClientData` holds `cbClientData` bytes for the call.
                unsafe { core::slice::from_raw_parts(data as *const u8, size as usize) }
            };
            self.initialize(info, Some(data))
        })
    }

    /// `ICorProfilerCallback::Shutdown`: to every child, each with its own
    /// variables set again (as during its `Initialize`: a child that reads
    /// `CLRPROF_OUTPUT` when it finishes gets its own file, not the
    /// process's value), then the multiplexer's records are flushed.
    pub(crate) unsafe fn on_Shutdown(&self) -> HRESULT {
        let Some(shared) = self.shared.get() else {
            return S_OK;
        };
        for child in shared.children.iter() {
            let Some(loaded) = child.receiver(routes::Shutdown, 1) else {
                continue;
            };
            let overrides = guard("clrprof-mux Shutdown", None, || {
                Some(Overrides::set(&child.spec.env))
            });
            // SAFETY: [interface-version, mux-forward] every child implements ICorProfilerCallback; no arguments.
            let _ = unsafe { (loaded.vtbl::<ICorProfilerCallback_Vtbl>().Shutdown)(loaded.this()) };
            guard("clrprof-mux Shutdown", (), || drop(overrides));
        }
        guard("clrprof-mux Shutdown", (), || shared.out.flush());
        S_OK
    }

    /// `ICorProfilerCallback3::ProfilerDetachSucceeded`: to every child.
    /// The children are released (and their libraries unloaded) when the
    /// runtime releases the multiplexer right after.
    pub(crate) unsafe fn on_ProfilerDetachSucceeded(&self) -> HRESULT {
        let _ = self.fan_out(routes::ProfilerDetachSucceeded, 3, |c| {
            // SAFETY: [interface-version, mux-forward] version-3 children only (fan_out); no arguments.
            unsafe {
                (c.vtbl::<ICorProfilerCallback3_Vtbl>()
                    .ProfilerDetachSucceeded)(c.this())
            }
        });
        if let Some(shared) = self.shared.get() {
            guard("clrprof-mux ProfilerDetachSucceeded", (), || {
                shared.out.record("detached").write();
                shared.out.flush();
            });
        }
        S_OK
    }

    /// `ICorProfilerCallback::JITCompilationStarted`: instrumented-code
    /// maps of the children are composed within it ([`crate::il_map`]).
    pub(crate) unsafe fn on_JITCompilationStarted(
        &self,
        functionId: FunctionID,
        fIsSafeToBlock: BOOL,
    ) -> HRESULT {
        let _compilation = crate::il_map::Compilation::begin(functionId);
        self.fan_out(routes::JITCompilationStarted, 1, |c| {
            // SAFETY: [interface-version, mux-forward, callback-args] every child implements ICorProfilerCallback; the
            // runtime's arguments, valid for the callback.
            unsafe {
                (c.vtbl::<ICorProfilerCallback_Vtbl>().JITCompilationStarted)(
                    c.this(),
                    functionId,
                    fIsSafeToBlock,
                )
            }
        })
    }

    /// `ICorProfilerCallback::JITInlining`: inlined only if every child agrees.
    pub(crate) unsafe fn on_JITInlining(
        &self,
        callerId: FunctionID,
        calleeId: FunctionID,
        pfShouldInline: *mut BOOL,
    ) -> HRESULT {
        let mut all = true;
        let _ = self.fan_out(routes::JITInlining, 1, |c| {
            let mut inline: BOOL = 1;
            // SAFETY: [interface-version, mux-forward, plain-call] every child implements ICorProfilerCallback; a valid
            // out pointer of ours.
            let hr = unsafe {
                (c.vtbl::<ICorProfilerCallback_Vtbl>().JITInlining)(
                    c.this(),
                    callerId,
                    calleeId,
                    &mut inline,
                )
            };
            all &= inline != 0;
            hr
        });
        if !pfShouldInline.is_null() {
            // SAFETY: [callback-args] the runtime's out pointer (corprof.idl JITInlining).
            unsafe { *pfShouldInline = all as BOOL };
        }
        S_OK
    }

    /// `ICorProfilerCallback::JITCachedFunctionSearchStarted`: the cached
    /// code is used only if every child agrees.
    pub(crate) unsafe fn on_JITCachedFunctionSearchStarted(
        &self,
        functionId: FunctionID,
        pbUseCachedFunction: *mut BOOL,
    ) -> HRESULT {
        let mut all = true;
        let _ = self.fan_out(routes::JITCachedFunctionSearchStarted, 1, |c| {
            let mut use_cached: BOOL = 1;
            // SAFETY: [callback-args] as in on_JITInlining.
            let hr = unsafe {
                (c.vtbl::<ICorProfilerCallback_Vtbl>()
                    .JITCachedFunctionSearchStarted)(
                    c.this(), functionId, &mut use_cached
                )
            };
            all &= use_cached != 0;
            hr
        });
        if !pbUseCachedFunction.is_null() {
            // SAFETY: [callback-args] the runtime's out pointer.
            unsafe { *pbUseCachedFunction = all as BOOL };
        }
        S_OK
    }

    /// `ICorProfilerCallback2::GarbageCollectionStarted`: a new GC, so every
    /// child receives `ObjectReferences` again.
    pub(crate) unsafe fn on_GarbageCollectionStarted(
        &self,
        cGenerations: i32,
        generationCollected: *const BOOL,
        reason: COR_PRF_GC_REASON,
    ) -> HRESULT {
        if let Some(shared) = self.shared.get() {
            for c in shared.children.iter() {
                c.object_references_stopped.store(false, Ordering::Relaxed);
            }
        }
        self.fan_out(routes::GarbageCollectionStarted, 2, |c| {
            // SAFETY: [interface-version, mux-forward, callback-args] version-2 children only; the runtime's arguments.
            unsafe {
                (c.vtbl::<ICorProfilerCallback2_Vtbl>()
                    .GarbageCollectionStarted)(
                    c.this(), cGenerations, generationCollected, reason
                )
            }
        })
    }

    /// `ICorProfilerCallback::ObjectReferences`: see the module table.
    pub(crate) unsafe fn on_ObjectReferences(
        &self,
        objectId: ObjectID,
        classId: ClassID,
        cObjectRefs: ULONG,
        objectRefIds: *const ObjectID,
    ) -> HRESULT {
        let Some(shared) = self.shared.get() else {
            return S_OK;
        };
        let mut continuing = false;
        for child in shared.children.iter() {
            let Some(c) = child.receiver(routes::ObjectReferences, 1) else {
                continue;
            };
            if child.object_references_stopped.load(Ordering::Relaxed) {
                continue;
            }
            // SAFETY: [interface-version, mux-forward, callback-args] every child implements ICorProfilerCallback; the
            // runtime's arguments, valid for the callback.
            let hr = unsafe {
                (c.vtbl::<ICorProfilerCallback_Vtbl>().ObjectReferences)(
                    c.this(),
                    objectId,
                    classId,
                    cObjectRefs,
                    objectRefIds,
                )
            };
            if hr.is_err() {
                child
                    .object_references_stopped
                    .store(true, Ordering::Relaxed);
            } else {
                continuing = true;
            }
        }
        if continuing {
            S_OK
        } else {
            E_FAIL
        }
    }

    /// `ICorProfilerCallback4::GetReJITParameters`.
    pub(crate) unsafe fn on_GetReJITParameters(
        &self,
        moduleId: ModuleID,
        methodId: mdMethodDef,
        pFunctionControl: *mut c_void,
    ) -> HRESULT {
        let Some(shared) = self.shared.get() else {
            return S_OK;
        };
        if pFunctionControl.is_null() {
            return E_POINTER;
        }
        guard("clrprof-mux GetReJITParameters", E_FAIL, || {
            crate::rejit::get_parameters(shared, moduleId, methodId, pFunctionControl)
        })
    }

    /// `ICorProfilerCallback::ModuleUnloadFinished`: to every child that
    /// asked; then the IL bodies handed out for the module's methods during
    /// ReJIT fan-outs are freed ([`crate::rejit_requests::HandedOut`]): no
    /// child holds the module's typed ID any longer, so none may read its IL.
    pub(crate) unsafe fn on_ModuleUnloadFinished(
        &self,
        moduleId: ModuleID,
        hrStatus: HRESULT,
    ) -> HRESULT {
        let hr = self.fan_out(routes::ModuleUnloadFinished, 1, |c| {
            // SAFETY: [interface-version, mux-forward, callback-args] every child implements ICorProfilerCallback; the
            // runtime's arguments, valid for the callback.
            unsafe {
                (c.vtbl::<ICorProfilerCallback_Vtbl>().ModuleUnloadFinished)(
                    c.this(),
                    moduleId,
                    hrStatus,
                )
            }
        });
        if let Some(shared) = self.shared.get() {
            shared.rejit.bodies.module_unloaded(moduleId);
        }
        hr
    }

    /// `ICorProfilerCallback6::GetAssemblyReferences`: every child adds to
    /// the runtime's provider.
    pub(crate) unsafe fn on_GetAssemblyReferences(
        &self,
        wszAssemblyPath: *const WCHAR,
        pAsmRefProvider: *mut c_void,
    ) -> HRESULT {
        self.fan_out(routes::GetAssemblyReferences, 6, |c| {
            // SAFETY: [interface-version, mux-forward, callback-args] version-6 children only; the runtime's arguments.
            unsafe {
                (c.vtbl::<ICorProfilerCallback6_Vtbl>().GetAssemblyReferences)(
                    c.this(),
                    wszAssemblyPath,
                    pAsmRefProvider,
                )
            }
        })
    }

    /// `ICorProfilerCallback11::LoadAsNotificationOnly`: no.
    pub(crate) unsafe fn on_LoadAsNotificationOnly(
        &self,
        pbNotificationOnly: *mut BOOL,
    ) -> HRESULT {
        if !pbNotificationOnly.is_null() {
            // SAFETY: [callback-args] the runtime's out pointer.
            unsafe { *pbNotificationOnly = 0 };
        }
        S_OK
    }
}

impl Drop for Multiplexer {
    /// The runtime's last release (after detach, or when it cancels the
    /// activation): every child is released and unloaded, as the runtime
    /// would release and unload it.
    fn drop(&mut self) {
        if let Some(shared) = self.shared.get() {
            guard("clrprof-mux release", (), || {
                for child in shared.children.iter() {
                    child.active.store(false, Ordering::SeqCst);
                    if let Some(l) = child.loaded.get() {
                        l.release();
                    }
                    let proxy = child.proxy.lock().unwrap_or_else(|e| e.into_inner()).take();
                    drop(proxy);
                }
            });
        }
    }
}

fn write_runtime_record(out: &JsonLines, runtime: &RealInfo) {
    let mut r = out.record("runtime");
    if let Ok(rt) = runtime.handle.runtime_information() {
        r = r.str("version", &rt.version()).str(
            "runtime",
            match rt.runtime_type {
                clrprof::RuntimeType::CoreClr => "coreclr",
                clrprof::RuntimeType::Desktop => "desktop",
                clrprof::RuntimeType::Unknown(_) => "unknown",
            },
        );
    }
    r.num("pid", u64::from(std::process::id()))
        .str("profiler", "clrprof-mux")
        .write();
}

/// Why a child was not kept.
struct Dropped {
    stage: &'static str,
    hr: Option<HRESULT>,
    error: String,
}

/// Loads child `k`, creates its callback object and initializes it with its
/// proxy, its own variables set throughout; drops it alone on any failure.
fn initialize_child(shared: &Arc<Shared>, k: usize, attached: bool) {
    let child = &shared.children[k];
    let overrides = Overrides::set(&child.spec.env);
    let result = (|| -> Result<(), Dropped> {
        let loaded = load(&child.spec)?;
        if attached && loaded.version < 3 {
            return Err(Dropped {
                stage: "initialize",
                hr: Some(CORPROF_E_CALLBACK3_REQUIRED),
                error: "the child does not implement ICorProfilerCallback3 (needed for attach)"
                    .into(),
            });
        }
        let _ = child.loaded.set(loaded);
        let loaded = child.loaded.get().ok_or_else(|| Dropped {
            stage: "load",
            hr: None,
            error: "loaded twice".into(),
        })?;
        // SAFETY: [interface-version, mux-forward] INFO_VTBL is the proxy's vtable, generated for an
        // InfoProxy `this` (COM: a method gets the object it was read from).
        let proxy = unsafe { ProxyRef::new(&INFO_VTBL, shared.clone(), k) };
        let info = proxy.as_raw();
        *child.proxy.lock().unwrap_or_else(|e| e.into_inner()) = Some(proxy);
        child.active.store(true, Ordering::SeqCst);
        let hr = if attached {
            let data = &child.spec.client_data;
            // SAFETY: [interface-version, mux-forward] the child implements Callback3 (checked above); its
            // proxy is live (owned by `child.proxy`), the client data lives
            // in the spec for the call.
            unsafe {
                (loaded
                    .vtbl::<ICorProfilerCallback3_Vtbl>()
                    .InitializeForAttach)(
                    loaded.this(),
                    info,
                    data.as_ptr() as *mut c_void,
                    data.len() as UINT,
                )
            }
        } else {
            // SAFETY: [interface-version, mux-forward] every child implements ICorProfilerCallback; its proxy
            // is live for the call and beyond.
            unsafe { (loaded.vtbl::<ICorProfilerCallback_Vtbl>().Initialize)(loaded.this(), info) }
        };
        if hr.is_err() {
            return Err(Dropped {
                stage: "initialize",
                hr: Some(hr),
                error: format!(
                    "{} failed",
                    if attached {
                        "InitializeForAttach"
                    } else {
                        "Initialize"
                    }
                ),
            });
        }
        Ok(())
    })();
    drop(overrides);
    let spec = &child.spec;
    let record = shared
        .out
        .record("child")
        .num("index", spec.index as u64)
        .str("path", &spec.path)
        .str("clsid", &config::format_clsid(&spec.clsid))
        .num("callback_version", u64::from(child.callback_version()));
    match result {
        Ok(()) => {
            let (low, high) = child.masks();
            record
                .str("status", "initialized")
                .num("mask", u64::from(low))
                .num("mask_high", u64::from(high))
                .write();
        }
        Err(d) => {
            let mut record = record.str("status", "dropped").str("stage", d.stage);
            if let Some(hr) = d.hr {
                record = record.str("hr", &format!("{:#010x}", hr.0 as u32));
            }
            record.str("error", &d.error).write();
            log::warn!(
                "clrprof-mux: child {} ({}) dropped at {}: {}",
                spec.index,
                spec.path,
                d.stage,
                d.error
            );
            child.active.store(false, Ordering::SeqCst);
            child.hooks.lock().map(|mut h| *h = Default::default()).ok();
            shared.forget_child_masks(k);
            if let Some(l) = child.loaded.get() {
                l.release();
            }
        }
    }
}

type DllGetClassObjectFn =
    unsafe extern "system" fn(*const GUID, *const GUID, *mut *mut c_void) -> HRESULT;

/// Loads a child's library and creates its callback object, the way the
/// runtime does: `DllGetClassObject(CLSID, IID_IClassFactory)`, then
/// `CreateInstance(NULL, IID_ICorProfilerCallback2)`; the highest
/// `ICorProfilerCallback` version it answers decides which callbacks it gets.
fn load(spec: &ChildSpec) -> Result<Loaded, Dropped> {
    let fail =
        |stage: &'static str, hr: Option<HRESULT>, error: String| Dropped { stage, hr, error };
    // SAFETY: [library-pinned, os-api] loading a profiler library runs its initialisers, exactly what
    // the runtime does with the library a profiler variable names; the
    // configuration names it for that purpose.
    let library = unsafe { libloading::Library::new(&spec.path) }
        .map_err(|e| fail("load", None, format!("cannot load {}: {e}", spec.path)))?;
    // SAFETY: [ffi-abi] `DllGetClassObject` of a COM server has this signature (COM's
    // contract, which the runtime relies on too).
    let get = unsafe { library.get::<DllGetClassObjectFn>(b"DllGetClassObject\0") }
        .map_err(|e| fail("load", None, format!("no DllGetClassObject: {e}")))?;
    let mut factory: *mut c_void = core::ptr::null_mut();
    // SAFETY: [plain-call] valid GUID pointers and out pointer for the call.
    let hr = unsafe { get(&spec.clsid, &IClassFactory::IID, &mut factory) };
    if hr.is_err() || factory.is_null() {
        return Err(fail(
            "create",
            Some(hr),
            "DllGetClassObject refused the CLSID".into(),
        ));
    }
    // SAFETY: [com-ownership] DllGetClassObject returned an owned IClassFactory reference.
    let factory = unsafe { IClassFactory::from_raw(factory) };
    let mut object: *mut c_void = core::ptr::null_mut();
    // SAFETY: [com-ownership, plain-call] valid IID and out pointer; no aggregation.
    let hr = unsafe {
        factory.CreateInstance(
            core::ptr::null_mut(),
            &ICorProfilerCallback2::IID,
            &mut object,
        )
    };
    drop(factory);
    if hr.is_err() || object.is_null() {
        return Err(fail(
            "create",
            Some(hr),
            "IClassFactory::CreateInstance(ICorProfilerCallback2) failed".into(),
        ));
    }
    // SAFETY: [com-ownership] CreateInstance returned an owned ICorProfilerCallback2 reference.
    let unknown = unsafe { IUnknown::from_raw(object) };
    let newer: [(u32, GUID); 9] = [
        (11, ICorProfilerCallback11::IID),
        (10, ICorProfilerCallback10::IID),
        (9, ICorProfilerCallback9::IID),
        (8, ICorProfilerCallback8::IID),
        (7, ICorProfilerCallback7::IID),
        (6, ICorProfilerCallback6::IID),
        (5, ICorProfilerCallback5::IID),
        (4, ICorProfilerCallback4::IID),
        (3, ICorProfilerCallback3::IID),
    ];
    for (version, iid) in newer {
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: [com-ownership, plain-call] valid IID and out pointer (COM QueryInterface).
        if unsafe { unknown.query(&iid, &mut p) }.is_ok() && !p.is_null() {
            // SAFETY: [com-ownership] QueryInterface returned an owned reference of that interface.
            let owner = unsafe { IUnknown::from_raw(p) };
            return Ok(Loaded::new(p, version, owner, library));
        }
    }
    let this = unknown.as_raw();
    Ok(Loaded::new(this, 2, unknown, library))
}
