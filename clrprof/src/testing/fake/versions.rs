//! Which `ICorProfilerInfoN` the fake answers `QueryInterface` for.
//!
//! The fake object implements `ICorProfilerInfo` … `ICorProfilerInfo15`, and
//! `QueryInterface` on a `#[implement]`ed object answers every interface of
//! that chain. A real runtime implements a prefix of the chain (.NET Core
//! 3.1: up to 11; .NET 8: up to 14), so the fake hands out an `IUnknown`
//! proxy that answers only `IUnknown` and `ICorProfilerInfo` …
//! `ICorProfilerInfoN` and refuses the rest with `E_NOINTERFACE`: the SDK's
//! `Unsupported` path is tested against it, as on an older runtime.

use clrprof_sys as sys;
use core::ffi::c_void;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use windows_core::{IUnknown, IUnknown_Vtbl, Interface, GUID, HRESULT};

const E_NOINTERFACE: HRESULT = HRESULT(0x8000_4002_u32 as i32);

/// The IIDs of `ICorProfilerInfo` … `ICorProfilerInfo15`, in order.
fn info_iids() -> [GUID; 15] {
    [
        sys::ICorProfilerInfo::IID,
        sys::ICorProfilerInfo2::IID,
        sys::ICorProfilerInfo3::IID,
        sys::ICorProfilerInfo4::IID,
        sys::ICorProfilerInfo5::IID,
        sys::ICorProfilerInfo6::IID,
        sys::ICorProfilerInfo7::IID,
        sys::ICorProfilerInfo8::IID,
        sys::ICorProfilerInfo9::IID,
        sys::ICorProfilerInfo10::IID,
        sys::ICorProfilerInfo11::IID,
        sys::ICorProfilerInfo12::IID,
        sys::ICorProfilerInfo13::IID,
        sys::ICorProfilerInfo14::IID,
        sys::ICorProfilerInfo15::IID,
    ]
}

/// The proxy: a COM object whose only interface is `IUnknown`.
#[repr(C)]
struct Proxy {
    vtable: *const IUnknown_Vtbl,
    refs: AtomicU32,
    inner: IUnknown,
    max_version: u8,
}

static PROXY_VTABLE: IUnknown_Vtbl = IUnknown_Vtbl {
    QueryInterface: query_interface,
    AddRef: add_ref,
    Release: release,
};

/// An `IUnknown` for `inner` (the fake's Info object) that answers
/// `QueryInterface` for `ICorProfilerInfo` … `ICorProfilerInfo{max_version}` only.
pub(crate) fn limit(inner: IUnknown, max_version: u8) -> IUnknown {
    let proxy = Box::new(Proxy {
        vtable: &PROXY_VTABLE,
        refs: AtomicU32::new(1),
        inner,
        max_version,
    });
    let raw = Box::into_raw(proxy) as *mut c_void;
    // SAFETY: [test-fake, com-ownership, ffi-abi] `raw` points to a `Proxy`, whose first field is a pointer to an
    // `IUnknown` vtable, with one reference owned by the returned value (COM
    // object layout); the functions of the vtable implement that contract.
    unsafe { IUnknown::from_raw(raw) }
}

unsafe extern "system" fn query_interface(
    this: *mut c_void,
    iid: *const GUID,
    out: *mut *mut c_void,
) -> HRESULT {
    if iid.is_null() || out.is_null() {
        return HRESULT(0x8000_4003_u32 as i32); // E_POINTER
    }
    // SAFETY: [com-ownership, caller-contract] COM's QueryInterface contract: `this` is the proxy handed out by
    // `limit` (alive: the caller holds a reference), `iid` and `out` valid.
    let (proxy, iid) = unsafe { (&*(this as *const Proxy), *iid) };
    // SAFETY: [caller-contract] `out` is a valid out pointer (checked non-null above).
    unsafe { *out = core::ptr::null_mut() };
    if iid == IUnknown::IID {
        // SAFETY: [com-ownership, caller-contract] as above; the proxy is its own IUnknown.
        unsafe { add_ref(this) };
        // SAFETY: [com-ownership, caller-contract] as above.
        unsafe { *out = this };
        return HRESULT(0);
    }
    let allowed = info_iids()
        .iter()
        .take(proxy.max_version as usize)
        .any(|g| *g == iid);
    if !allowed {
        return E_NOINTERFACE;
    }
    // SAFETY: [com-ownership, caller-contract] forwards the caller's arguments to the inner object's
    // QueryInterface, whose interface pointers the caller then owns.
    unsafe { proxy.inner.query(&iid, out) }
}

unsafe extern "system" fn add_ref(this: *mut c_void) -> u32 {
    // SAFETY: [com-ownership, caller-contract] `this` is a live proxy (COM AddRef contract).
    let proxy = unsafe { &*(this as *const Proxy) };
    proxy.refs.fetch_add(1, Ordering::Relaxed) + 1
}

unsafe extern "system" fn release(this: *mut c_void) -> u32 {
    // SAFETY: [com-ownership, caller-contract] `this` is a live proxy (COM Release contract).
    let left = unsafe { &*(this as *const Proxy) }
        .refs
        .fetch_sub(1, Ordering::AcqRel)
        - 1;
    if left == 0 {
        if let Some(p) = NonNull::new(this as *mut Proxy) {
            // SAFETY: [com-ownership, local-memory] the last reference is gone; the proxy was made by
            // `Box::into_raw` in `limit` and is freed exactly once here.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    }
    left
}
