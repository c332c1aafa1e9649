//! ReJIT requests of several children, merged.
//!
//! The runtime keeps one active IL version per method. The multiplexer
//! remembers which children asked to re-JIT each method
//! (`RequestReJIT`, `RequestReJITWithInliners`) and forwards the request;
//! when the runtime asks for the new IL (`GetReJITParameters`), every child
//! that asked for that method is called in configuration order (all
//! `ENABLE_REJIT` children, for a method none asked for), each with its own
//! `ICorProfilerFunctionControl` whose settings are collected:
//!
//! - the IL body: the last one set wins, and a child that sets one sees, in
//!   `GetILFunctionBody` through its proxy, the body an earlier child set for
//!   that method during this call — so two rewriters chain. A body handed
//!   out that way lives as long as the module, as the runtime's own
//!   answers do ([`HandedOut`](crate::rejit_requests::HandedOut)): a later
//!   child's `SetILFunctionBody` and the end of the call do not free it;
//! - codegen flags: the union;
//! - instrumented-code maps: composed (see [`crate::il_map`]).
//!
//! A child whose `GetReJITParameters` fails contributes nothing (its
//! settings are discarded); the runtime gets a failure only when every
//! child failed. `RequestRevert` by one child reverts a method only when no
//! other child still wants it re-JITted; otherwise the method is re-JITted
//! again, so the remaining children's IL replaces the reverting child's.

use crate::rejit_requests::HandedOut;
use crate::shared::{InfoProxy, Shared};
use clrprof::guard::guard;
use clrprof::sys::*;
use core::ffi::c_void;
use std::cell::RefCell;
use std::sync::Arc;
use windows_core::implement;

/// The `(module, method)` pairs of a request.
///
/// # Safety
/// `modules` and `methods` are null or arrays of `count` elements (the
/// IDL's `[in, size_is(cFunctions)]`).
pub(crate) unsafe fn methods(
    count: ULONG,
    modules: *const ModuleID,
    methods: *const mdMethodDef,
) -> Vec<(ModuleID, mdMethodDef)> {
    if count == 0 || modules.is_null() || methods.is_null() {
        return Vec::new();
    }
    // SAFETY: [caller-contract] guaranteed by the caller.
    let (m, t) = unsafe {
        (
            core::slice::from_raw_parts(modules, count as usize),
            core::slice::from_raw_parts(methods, count as usize),
        )
    };
    m.iter().copied().zip(t.iter().copied()).collect()
}

fn bit(k: usize) -> u64 {
    1u64.checked_shl(k as u32).unwrap_or(0)
}

fn runtime_rejit(
    shared: &Shared,
    list: &[(ModuleID, mdMethodDef)],
    flags: Option<DWORD>,
) -> HRESULT {
    if list.is_empty() {
        return S_OK;
    }
    let modules: Vec<ModuleID> = list.iter().map(|m| m.0).collect();
    let tokens: Vec<mdMethodDef> = list.iter().map(|m| m.1).collect();
    // SAFETY: [interface-version, local-memory] Info4 / Info10 vtable types for their versions; the arrays
    // hold `list.len()` elements for the call.
    unsafe {
        match flags {
            None => match shared.runtime.vtbl::<ICorProfilerInfo4_Vtbl>(4) {
                Some((this, v)) => {
                    (v.RequestReJIT)(this, list.len() as ULONG, modules.as_ptr(), tokens.as_ptr())
                }
                None => E_NOTIMPL,
            },
            Some(flags) => match shared.runtime.vtbl::<ICorProfilerInfo10_Vtbl>(10) {
                Some((this, v)) => (v.RequestReJITWithInliners)(
                    this,
                    flags,
                    list.len() as ULONG,
                    modules.as_ptr(),
                    tokens.as_ptr(),
                ),
                None => E_NOTIMPL,
            },
        }
    }
}

/// A child's `RequestReJIT` (`flags`: `RequestReJITWithInliners`).
pub(crate) fn request(
    proxy: &InfoProxy,
    list: &[(ModuleID, mdMethodDef)],
    flags: Option<DWORD>,
) -> HRESULT {
    let shared = &proxy.shared;
    // The runtime refuses a profiler that did not enable ReJIT; so does the
    // multiplexer, per child.
    if shared.children[proxy.child].masks().0 & COR_PRF_ENABLE_REJIT == 0 {
        return CORPROF_E_REJIT_NOT_ENABLED;
    }
    {
        let mut by = shared
            .rejit
            .by_method
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for m in list {
            *by.entry(*m).or_default() |= bit(proxy.child);
        }
    }
    runtime_rejit(shared, list, flags)
}

/// A child's `RequestRevert`.
pub(crate) fn revert(
    proxy: &InfoProxy,
    list: &[(ModuleID, mdMethodDef)],
    statuses: Option<&mut [HRESULT]>,
) -> HRESULT {
    let shared = &proxy.shared;
    if shared.children[proxy.child].masks().0 & COR_PRF_ENABLE_REJIT == 0 {
        return CORPROF_E_REJIT_NOT_ENABLED;
    }
    let mut revert_idx = Vec::new();
    let mut again_idx = Vec::new();
    {
        let mut by = shared
            .rejit
            .by_method
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (i, m) in list.iter().enumerate() {
            let left = match by.get_mut(m) {
                Some(bits) => {
                    *bits &= !bit(proxy.child);
                    *bits
                }
                None => 0,
            };
            if left == 0 {
                by.remove(m);
                revert_idx.push(i);
            } else {
                again_idx.push(i);
            }
        }
    }
    let to_revert: Vec<(ModuleID, mdMethodDef)> = revert_idx.iter().map(|&i| list[i]).collect();
    let again: Vec<(ModuleID, mdMethodDef)> = again_idx.iter().map(|&i| list[i]).collect();
    let mut revert_status = vec![S_OK; to_revert.len()];
    let hr = if to_revert.is_empty() {
        S_OK
    } else {
        let modules: Vec<ModuleID> = to_revert.iter().map(|m| m.0).collect();
        let tokens: Vec<mdMethodDef> = to_revert.iter().map(|m| m.1).collect();
        // SAFETY: [interface-version, local-memory] Info4 vtable type for version 4; arrays of `len` elements.
        unsafe {
            match shared.runtime.vtbl::<ICorProfilerInfo4_Vtbl>(4) {
                Some((this, v)) => (v.RequestRevert)(
                    this,
                    to_revert.len() as ULONG,
                    modules.as_ptr(),
                    tokens.as_ptr(),
                    revert_status.as_mut_ptr(),
                ),
                None => E_NOTIMPL,
            }
        }
    };
    let again_hr = runtime_rejit(shared, &again, None);
    if let Some(statuses) = statuses {
        for (j, &i) in revert_idx.iter().enumerate() {
            if let Some(s) = statuses.get_mut(i) {
                *s = revert_status[j];
            }
        }
        for &i in &again_idx {
            if let Some(s) = statuses.get_mut(i) {
                *s = again_hr;
            }
        }
    }
    if hr.is_err() {
        hr
    } else {
        again_hr
    }
}

/// What the children have set so far in one `GetReJITParameters`.
#[derive(Clone, Default)]
struct Pending {
    module: ModuleID,
    method: mdMethodDef,
    /// Shared with [`HandedOut`] once a child read it.
    body: Option<Arc<[u8]>>,
    flags: DWORD,
    map: Option<Vec<COR_IL_MAP>>,
}

thread_local! {
    // reentrancy: mux-fan-out
    static PENDING: RefCell<Option<Pending>> = const { RefCell::new(None) };
}

/// `GetILFunctionBody` during a `GetReJITParameters` fan-out: the body an
/// earlier child set for this method, if any, kept in `bodies` until the
/// module unloads (the lifetime of the runtime's own answer).
///
/// # Safety
///
/// `header` and `size` are null or valid for writes (the `[out]` pointers
/// of the caller's `GetILFunctionBody`).
pub(crate) unsafe fn pending_body(
    bodies: &HandedOut,
    module: ModuleID,
    method: mdMethodDef,
    header: *mut LPCBYTE,
    size: *mut ULONG,
) -> Option<HRESULT> {
    PENDING
        .try_with(|p| {
            let p = p.try_borrow().ok()?;
            let p = p.as_ref()?;
            if p.module != module || p.method != method {
                return None;
            }
            let body = p.body.as_ref()?;
            let len = body.len() as ULONG;
            let kept = bodies.keep(module, body);
            // SAFETY: [caller-contract] null or writable, this fn's precondition.
            unsafe {
                if !header.is_null() {
                    *header = kept;
                }
                if !size.is_null() {
                    *size = len;
                }
            }
            Some(S_OK)
        })
        .ok()
        .flatten()
}

/// The function control each child gets: collects into [`PENDING`].
#[implement(ICorProfilerFunctionControl)]
pub(crate) struct ControlProxy;

/// Starts (`Some`) or ends (`None`) a fan-out's state on this thread, as
/// `get_parameters` does around its children (for the unit tests, which
/// have no child libraries).
#[cfg(test)]
pub(crate) fn test_fan_out(call: Option<(ModuleID, mdMethodDef)>) {
    let _ = PENDING.try_with(|p| {
        *p.borrow_mut() = call.map(|(module, method)| Pending {
            module,
            method,
            ..Default::default()
        })
    });
}

fn with_pending(f: impl FnOnce(&mut Pending) -> HRESULT) -> HRESULT {
    PENDING
        .try_with(|p| {
            match p
                .try_borrow_mut()
                .ok()
                .as_deref_mut()
                .and_then(Option::as_mut)
            {
                Some(p) => f(p),
                // Used outside its GetReJITParameters call.
                None => CORPROF_E_UNSUPPORTED_CALL_SEQUENCE,
            }
        })
        .unwrap_or(E_UNEXPECTED)
}

#[allow(non_snake_case)]
impl ICorProfilerFunctionControl_Impl for ControlProxy_Impl {
    unsafe fn SetCodegenFlags(&self, flags: DWORD) -> HRESULT {
        guard(
            "ICorProfilerFunctionControl::SetCodegenFlags",
            E_UNEXPECTED,
            || {
                with_pending(|p| {
                    p.flags |= flags;
                    S_OK
                })
            },
        )
    }

    unsafe fn SetILFunctionBody(&self, cb: ULONG, pb: LPCBYTE) -> HRESULT {
        guard(
            "ICorProfilerFunctionControl::SetILFunctionBody",
            E_UNEXPECTED,
            || {
                if pb.is_null() || cb == 0 {
                    return E_INVALIDARG;
                }
                // SAFETY: [caller-contract] IDL [in, size_is(cbNewILMethodHeader)] buffer of the caller.
                let body: Arc<[u8]> =
                    unsafe { core::slice::from_raw_parts(pb, cb as usize) }.into();
                with_pending(|p| {
                    // The body it replaces stays alive where a child read it
                    // (`HandedOut`); otherwise it goes now.
                    p.body = Some(body);
                    S_OK
                })
            },
        )
    }

    unsafe fn SetILInstrumentedCodeMap(&self, n: ULONG, entries: *const COR_IL_MAP) -> HRESULT {
        guard(
            "ICorProfilerFunctionControl::SetILInstrumentedCodeMap",
            E_UNEXPECTED,
            || {
                let new = if n == 0 || entries.is_null() {
                    Vec::new()
                } else {
                    // SAFETY: [caller-contract] IDL [in, size_is(cILMapEntries)] array of the caller.
                    unsafe { core::slice::from_raw_parts(entries, n as usize) }.to_vec()
                };
                with_pending(|p| {
                    p.map = Some(match &p.map {
                        Some(first) => crate::il_map::compose(first, &new),
                        None => new,
                    });
                    S_OK
                })
            },
        )
    }
}

/// `GetReJITParameters`: the children that asked, chained.
pub(crate) fn get_parameters(
    shared: &Shared,
    module: ModuleID,
    method: mdMethodDef,
    control: *mut c_void,
) -> HRESULT {
    let wanted = shared
        .rejit
        .by_method
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(module, method))
        .copied()
        .unwrap_or(0);
    let targets: Vec<_> = shared
        .children
        .iter()
        .enumerate()
        .filter(|(k, _)| wanted == 0 || wanted & bit(*k) != 0)
        .filter_map(|(_, c)| c.receiver(crate::routes::GetReJITParameters, 4))
        .collect();
    let start = Pending {
        module,
        method,
        ..Default::default()
    };
    let _ = PENDING.try_with(|p| *p.borrow_mut() = Some(start));
    let proxy: ICorProfilerFunctionControl = ControlProxy.into();
    let mut succeeded = 0usize;
    let mut first_failure = None;
    for child in &targets {
        let before = PENDING.try_with(|p| p.borrow().clone()).ok().flatten();
        // SAFETY: [interface-version, mux-forward] the child implements Callback4 (receiver checked the
        // version); the arguments are the runtime's, the control our own
        // live object, valid for the call.
        let hr = unsafe {
            (child
                .vtbl::<ICorProfilerCallback4_Vtbl>()
                .GetReJITParameters)(child.this(), module, method, proxy.as_raw())
        };
        if hr.is_ok() {
            succeeded += 1;
        } else {
            first_failure.get_or_insert(hr);
            let _ = PENDING.try_with(|p| *p.borrow_mut() = before);
        }
    }
    let pending = PENDING
        .try_with(|p| p.borrow_mut().take())
        .ok()
        .flatten()
        .unwrap_or_default();
    // SAFETY: [callback-args, ffi-abi] `control` is the runtime's ICorProfilerFunctionControl for this
    // callback (corprof.idl GetReJITParameters), valid until it returns.
    let v = unsafe { &**(control as *const *const ICorProfilerFunctionControl_Vtbl) };
    let mut hr = S_OK;
    // SAFETY: [callback-args, mux-forward] the runtime's control with buffers valid for each call.
    unsafe {
        if pending.flags != 0 {
            hr = (v.SetCodegenFlags)(control, pending.flags);
        }
        if let Some(body) = &pending.body {
            let set = (v.SetILFunctionBody)(control, body.len() as ULONG, body.as_ptr());
            if set.is_err() {
                hr = set;
            }
        }
        if let Some(map) = &pending.map {
            let set = (v.SetILInstrumentedCodeMap)(control, map.len() as ULONG, map.as_ptr());
            if set.is_err() && hr.is_ok() {
                hr = set;
            }
        }
    }
    match (succeeded, first_failure) {
        (0, Some(failure)) => failure,
        _ => hr,
    }
}
