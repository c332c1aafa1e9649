//! The per-child methods of each child's own `ICorProfilerInfo*` object.
//!
//! A child talks to the runtime through a proxy ([`InfoProxy`]) that answers
//! `QueryInterface` for exactly the Info versions the runtime answers, and
//! whose vtable (generated, see `info_vtbl.rs`) forwards every method to the
//! runtime's object — except the methods whose meaning is per profiler,
//! which the multiplexer implements itself ([`intercept`]):
//!
//! | methods | what the multiplexer does |
//! |---|---|
//! | `SetEventMask`, `SetEventMask2` | records the child's masks; the runtime gets the union ([`Shared::set_child_masks`](crate::shared::Shared::set_child_masks)) |
//! | `GetEventMask`, `GetEventMask2` | the child's own masks |
//! | `SetEnterLeaveFunctionHooks*`, `SetFunctionIDMapper*` | recorded; served by [`crate::elt`] |
//! | `GetILFunctionBody` | during a `GetReJITParameters` fan-out, the body an earlier child set ([`crate::rejit`]) |
//! | `SetILFunctionBody` | forwarded, and noted (the child can no longer detach) |
//! | `SetILInstrumentedCodeMap` | composed with an earlier child's map of the same compilation |
//! | `RequestReJIT`, `RequestReJITWithInliners`, `RequestRevert` | merged ([`crate::rejit`]) |
//! | `RequestProfilerDetach` | detach once every child asked ([`Shared::request_detach`](crate::shared::Shared::request_detach)) |

use crate::shared::InfoProxy;
use clrprof::sys::*;
use core::ffi::c_void;
use std::sync::atomic::Ordering;

/// The proxy's own implementations of the methods that are per child. Each
/// runs under the panic guard (a panic becomes `E_UNEXPECTED`, never an
/// unwind into the child).
#[allow(non_snake_case)]
pub(crate) mod intercept {
    use super::*;
    use clrprof::guard::guard;

    const PANICKED: HRESULT = E_UNEXPECTED;

    /// `IUnknown::QueryInterface`: `IUnknown` and the Info versions the
    /// runtime answers, nothing else (what the runtime's object answers).
    pub(crate) unsafe extern "system" fn QueryInterface(
        this: *mut c_void,
        iid: *const GUID,
        out: *mut *mut c_void,
    ) -> HRESULT {
        if out.is_null() || iid.is_null() {
            return E_POINTER;
        }
        // SAFETY: [com-ownership, caller-contract] COM contract of QueryInterface: `out` is a valid out
        // pointer and `iid` a valid GUID (both checked non-null).
        let iid = unsafe {
            *out = core::ptr::null_mut();
            *iid
        };
        // SAFETY: [mux-forward] a method of this proxy was called with `this`.
        let proxy = unsafe { InfoProxy::get(this) };
        let wanted = INFO_IIDS
            .iter()
            .position(|i| *i == iid)
            .map(|k| k as u32 + 1);
        let ok =
            iid == IUnknown::IID || wanted.is_some_and(|v| proxy.shared.runtime.get(v).is_some());
        if !ok {
            return E_NOINTERFACE;
        }
        proxy.add_ref();
        // SAFETY: [com-ownership, caller-contract] `out` is valid (above); the caller now owns one reference.
        unsafe { *out = this };
        S_OK
    }

    /// `IUnknown::AddRef`.
    pub(crate) unsafe extern "system" fn AddRef(this: *mut c_void) -> u32 {
        // SAFETY: [mux-forward] a method of this proxy was called with `this`.
        unsafe { InfoProxy::get(this) }.add_ref()
    }

    /// `IUnknown::Release`: frees the proxy with its last reference.
    pub(crate) unsafe extern "system" fn Release(this: *mut c_void) -> u32 {
        // SAFETY: [mux-forward] a method of this proxy was called with `this`, whose
        // caller gives up the reference it owns (COM's Release rule).
        unsafe { InfoProxy::release(this) }
    }

    /// The IIDs of `ICorProfilerInfo` … `ICorProfilerInfo15`, by version.
    const INFO_IIDS: [GUID; 15] = [
        ICorProfilerInfo::IID,
        ICorProfilerInfo2::IID,
        ICorProfilerInfo3::IID,
        ICorProfilerInfo4::IID,
        ICorProfilerInfo5::IID,
        ICorProfilerInfo6::IID,
        ICorProfilerInfo7::IID,
        ICorProfilerInfo8::IID,
        ICorProfilerInfo9::IID,
        ICorProfilerInfo10::IID,
        ICorProfilerInfo11::IID,
        ICorProfilerInfo12::IID,
        ICorProfilerInfo13::IID,
        ICorProfilerInfo14::IID,
        ICorProfilerInfo15::IID,
    ];

    /// Runs an intercepted method for the child of `this`.
    #[inline]
    fn with_proxy(
        entry: &'static str,
        this: *mut c_void,
        f: impl FnOnce(&InfoProxy) -> HRESULT,
    ) -> HRESULT {
        // SAFETY: [mux-forward] every intercepted method is called with its proxy (COM).
        let proxy = unsafe { InfoProxy::get(this) };
        guard(entry, PANICKED, || f(proxy))
    }

    /// `ICorProfilerInfo::GetEventMask`: the child's own low mask.
    pub(crate) unsafe extern "system" fn GetEventMask(
        this: *mut c_void,
        pdwEvents: *mut DWORD,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo::GetEventMask", this, |p| {
            if pdwEvents.is_null() {
                return E_INVALIDARG;
            }
            // SAFETY: [caller-contract] non-null out pointer of the caller (IDL [out]).
            unsafe { *pdwEvents = p.child().masks().0 };
            S_OK
        })
    }

    /// `ICorProfilerInfo5::GetEventMask2`: the child's own masks.
    pub(crate) unsafe extern "system" fn GetEventMask2(
        this: *mut c_void,
        pdwEventsLow: *mut DWORD,
        pdwEventsHigh: *mut DWORD,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo5::GetEventMask2", this, |p| {
            if pdwEventsLow.is_null() || pdwEventsHigh.is_null() {
                return E_INVALIDARG;
            }
            let (low, high) = p.child().masks();
            // SAFETY: [caller-contract] non-null out pointers of the caller (IDL [out]).
            unsafe {
                *pdwEventsLow = low;
                *pdwEventsHigh = high;
            }
            S_OK
        })
    }

    /// `ICorProfilerInfo::SetEventMask`: the child's low mask (its high
    /// mask is kept, as the runtime keeps it).
    pub(crate) unsafe extern "system" fn SetEventMask(
        this: *mut c_void,
        dwEvents: DWORD,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo::SetEventMask", this, |p| {
            let (_, high) = p.child().masks();
            p.shared.set_child_masks(p.child, dwEvents, high)
        })
    }

    /// `ICorProfilerInfo5::SetEventMask2`.
    pub(crate) unsafe extern "system" fn SetEventMask2(
        this: *mut c_void,
        dwEventsLow: DWORD,
        dwEventsHigh: DWORD,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo5::SetEventMask2", this, |p| {
            p.shared.set_child_masks(p.child, dwEventsLow, dwEventsHigh)
        })
    }

    /// `ICorProfilerInfo::SetEnterLeaveFunctionHooks` (the v1 hooks).
    pub(crate) unsafe extern "system" fn SetEnterLeaveFunctionHooks(
        this: *mut c_void,
        pFuncEnter: Option<FunctionEnter>,
        pFuncLeave: Option<FunctionLeave>,
        pFuncTailcall: Option<FunctionTailcall>,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo::SetEnterLeaveFunctionHooks", this, |p| {
            crate::elt::set_hooks(
                p,
                crate::elt_hooks::Request::V1(
                    pFuncEnter.map_or(0, |f| f as usize),
                    pFuncLeave.map_or(0, |f| f as usize),
                    pFuncTailcall.map_or(0, |f| f as usize),
                ),
            )
        })
    }

    /// `ICorProfilerInfo2::SetEnterLeaveFunctionHooks2` (the v2 hooks).
    pub(crate) unsafe extern "system" fn SetEnterLeaveFunctionHooks2(
        this: *mut c_void,
        pFuncEnter: Option<FunctionEnter2>,
        pFuncLeave: Option<FunctionLeave2>,
        pFuncTailcall: Option<FunctionTailcall2>,
    ) -> HRESULT {
        with_proxy(
            "ICorProfilerInfo2::SetEnterLeaveFunctionHooks2",
            this,
            |p| {
                crate::elt::set_hooks(
                    p,
                    crate::elt_hooks::Request::V2(
                        pFuncEnter.map_or(0, |f| f as usize),
                        pFuncLeave.map_or(0, |f| f as usize),
                        pFuncTailcall.map_or(0, |f| f as usize),
                    ),
                )
            },
        )
    }

    /// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3` (the fast-path hooks).
    pub(crate) unsafe extern "system" fn SetEnterLeaveFunctionHooks3(
        this: *mut c_void,
        pFuncEnter3: Option<FunctionEnter3>,
        pFuncLeave3: Option<FunctionLeave3>,
        pFuncTailcall3: Option<FunctionTailcall3>,
    ) -> HRESULT {
        with_proxy(
            "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3",
            this,
            |p| {
                crate::elt::set_hooks(
                    p,
                    crate::elt_hooks::Request::V3(
                        pFuncEnter3.map_or(0, |f| f as usize),
                        pFuncLeave3.map_or(0, |f| f as usize),
                        pFuncTailcall3.map_or(0, |f| f as usize),
                    ),
                )
            },
        )
    }

    /// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3WithInfo`.
    pub(crate) unsafe extern "system" fn SetEnterLeaveFunctionHooks3WithInfo(
        this: *mut c_void,
        pFuncEnter3WithInfo: Option<FunctionEnter3WithInfo>,
        pFuncLeave3WithInfo: Option<FunctionLeave3WithInfo>,
        pFuncTailcall3WithInfo: Option<FunctionTailcall3WithInfo>,
    ) -> HRESULT {
        with_proxy(
            "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3WithInfo",
            this,
            |p| {
                crate::elt::set_hooks(
                    p,
                    crate::elt_hooks::Request::V3WithInfo(
                        pFuncEnter3WithInfo.map_or(0, |f| f as usize),
                        pFuncLeave3WithInfo.map_or(0, |f| f as usize),
                        pFuncTailcall3WithInfo.map_or(0, |f| f as usize),
                    ),
                )
            },
        )
    }

    /// `ICorProfilerInfo::SetFunctionIDMapper`.
    pub(crate) unsafe extern "system" fn SetFunctionIDMapper(
        this: *mut c_void,
        pFunc: Option<FunctionIDMapper>,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo::SetFunctionIDMapper", this, |p| {
            crate::elt::set_mapper(p, crate::elt_hooks::Mapper::from_v1(pFunc))
        })
    }

    /// `ICorProfilerInfo3::SetFunctionIDMapper2`.
    pub(crate) unsafe extern "system" fn SetFunctionIDMapper2(
        this: *mut c_void,
        pFunc: Option<FunctionIDMapper2>,
        clientData: *mut c_void,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo3::SetFunctionIDMapper2", this, |p| {
            crate::elt::set_mapper(p, crate::elt_hooks::Mapper::from_v2(pFunc, clientData))
        })
    }

    /// `ICorProfilerInfo::GetILFunctionBody`: during a `GetReJITParameters`
    /// fan-out, the body an earlier child gave for that method, alive until
    /// the module unloads (as the runtime's answer is); otherwise
    /// the runtime's answer (which already includes a body set with
    /// `SetILFunctionBody` by an earlier child in `JITCompilationStarted`).
    pub(crate) unsafe extern "system" fn GetILFunctionBody(
        this: *mut c_void,
        moduleId: ModuleID,
        methodId: mdMethodDef,
        ppMethodHeader: *mut LPCBYTE,
        pcbMethodSize: *mut ULONG,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo::GetILFunctionBody", this, |proxy| {
            // SAFETY: [caller-contract] the caller's `[out]` pointers, null or
            // writable (GetILFunctionBody's contract, this fn's precondition).
            let pending = unsafe {
                crate::rejit::pending_body(
                    &proxy.shared.rejit.bodies,
                    moduleId,
                    methodId,
                    ppMethodHeader,
                    pcbMethodSize,
                )
            };
            if let Some(hr) = pending {
                return hr;
            }
            // SAFETY: [interface-version, mux-forward] a method of this proxy was called with `this`; Info1's vtable.
            match unsafe { InfoProxy::forward::<ICorProfilerInfo_Vtbl>(this, 1) } {
                // SAFETY: [mux-forward, caller-contract] the caller's arguments, passed on under the same IDL contract.
                Some((real, v)) => unsafe {
                    (v.GetILFunctionBody)(real, moduleId, methodId, ppMethodHeader, pcbMethodSize)
                },
                None => E_NOTIMPL,
            }
        })
    }

    /// `ICorProfilerInfo::SetILFunctionBody`: forwarded; the child is noted
    /// as holding instrumentation that cannot be undone (no detach).
    pub(crate) unsafe extern "system" fn SetILFunctionBody(
        this: *mut c_void,
        moduleId: ModuleID,
        methodid: mdMethodDef,
        pbNewILMethodHeader: LPCBYTE,
    ) -> HRESULT {
        // SAFETY: [mux-forward] a method of this proxy was called with `this`.
        let proxy = unsafe { InfoProxy::get(this) };
        proxy.child().set_il.store(true, Ordering::Relaxed);
        // SAFETY: [interface-version, mux-forward] as above; Info1's vtable.
        match unsafe { InfoProxy::forward::<ICorProfilerInfo_Vtbl>(this, 1) } {
            // SAFETY: [mux-forward, caller-contract] the caller's arguments (a body from the runtime's
            // allocator), passed on under the same IDL contract.
            Some((real, v)) => unsafe {
                (v.SetILFunctionBody)(real, moduleId, methodid, pbNewILMethodHeader)
            },
            None => E_NOTIMPL,
        }
    }

    /// `ICorProfilerInfo::SetILInstrumentedCodeMap`: within one
    /// `JITCompilationStarted`, a second child's map is composed with the
    /// first child's (the second maps the first one's offsets), so the
    /// runtime gets original → final offsets.
    pub(crate) unsafe extern "system" fn SetILInstrumentedCodeMap(
        this: *mut c_void,
        functionId: FunctionID,
        fStartJit: BOOL,
        cILMapEntries: ULONG,
        rgILMapEntries: *const COR_IL_MAP,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo::SetILInstrumentedCodeMap", this, |_| {
            let entries = if rgILMapEntries.is_null() || cILMapEntries == 0 {
                &[][..]
            } else {
                // SAFETY: [caller-contract] IDL [in, size_is(cILMapEntries)] array of the caller.
                unsafe { core::slice::from_raw_parts(rgILMapEntries, cILMapEntries as usize) }
            };
            let map = crate::il_map::combine(functionId, fStartJit != 0, entries);
            let map = map.as_deref().unwrap_or(entries);
            // SAFETY: [interface-version, mux-forward] a method of this proxy was called with `this`; Info1's vtable.
            match unsafe { InfoProxy::forward::<ICorProfilerInfo_Vtbl>(this, 1) } {
                // SAFETY: [mux-forward, local-memory] `map` is a valid array of `map.len()` entries for the call.
                Some((real, v)) => unsafe {
                    (v.SetILInstrumentedCodeMap)(
                        real,
                        functionId,
                        fStartJit,
                        map.len() as ULONG,
                        map.as_ptr(),
                    )
                },
                None => E_NOTIMPL,
            }
        })
    }

    /// `ICorProfilerInfo4::RequestReJIT`: merged with the other children's.
    pub(crate) unsafe extern "system" fn RequestReJIT(
        this: *mut c_void,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo4::RequestReJIT", this, |p| {
            // SAFETY: [caller-contract] IDL [in, size_is(cFunctions)] arrays of the caller.
            let methods = unsafe { crate::rejit::methods(cFunctions, moduleIds, methodIds) };
            crate::rejit::request(p, &methods, None)
        })
    }

    /// `ICorProfilerInfo10::RequestReJITWithInliners`: merged likewise.
    pub(crate) unsafe extern "system" fn RequestReJITWithInliners(
        this: *mut c_void,
        dwRejitFlags: DWORD,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo10::RequestReJITWithInliners", this, |p| {
            // SAFETY: [caller-contract] IDL [in, size_is(cFunctions)] arrays of the caller.
            let methods = unsafe { crate::rejit::methods(cFunctions, moduleIds, methodIds) };
            crate::rejit::request(p, &methods, Some(dwRejitFlags))
        })
    }

    /// `ICorProfilerInfo4::RequestRevert`: a method another child still
    /// wants re-JITted is re-JITted again without this child's IL instead.
    pub(crate) unsafe extern "system" fn RequestRevert(
        this: *mut c_void,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
        status: *mut HRESULT,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo4::RequestRevert", this, |p| {
            // SAFETY: [caller-contract] IDL [in, size_is(cFunctions)] arrays of the caller.
            let methods = unsafe { crate::rejit::methods(cFunctions, moduleIds, methodIds) };
            let statuses = if status.is_null() {
                None
            } else {
                // SAFETY: [caller-contract] IDL [out, size_is(cFunctions)] array of the caller.
                Some(unsafe { core::slice::from_raw_parts_mut(status, methods.len()) })
            };
            crate::rejit::revert(p, &methods, statuses)
        })
    }

    /// `ICorProfilerInfo3::RequestProfilerDetach`.
    pub(crate) unsafe extern "system" fn RequestProfilerDetach(
        this: *mut c_void,
        dwExpectedCompletionMilliseconds: DWORD,
    ) -> HRESULT {
        with_proxy("ICorProfilerInfo3::RequestProfilerDetach", this, |p| {
            p.shared
                .request_detach(p.child, dwExpectedCompletionMilliseconds)
        })
    }
}
