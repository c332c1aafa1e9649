//! Attaching to a .NET Framework 4 process (Windows only).
//!
//! .NET Framework has no diagnostics IPC; its attach trigger is the hosting
//! API (attach documentation of the profiling API): `CLRCreateInstance`
//! (exported by `mscoree.dll`) creates an `ICLRMetaHost`; its `GetRuntime`
//! returns the `ICLRRuntimeInfo` of an installed runtime version (attach
//! needs `v4.0.30319`); that runtime's `GetInterface(CLSID_CLRProfiling)`
//! returns `ICLRProfiling`, whose `AttachProfiler` does what the IPC command
//! does for CoreCLR and returns the `HRESULT`.
//!
//! The trigger process must have the target's bitness; the runtime loaded by
//! the trigger does not have to be started. This path is compile-checked for
//! `x86_64-pc-windows-gnu`; no .NET Framework runs on the project's test
//! machines, so it has not been run.

use super::AttachError;
use clrprof_sys as sys;
use core::ffi::c_void;
use std::time::Duration;
use windows_core::{Interface, GUID};

/// The .NET Framework 4 runtime version string, the only one that supports attach.
pub const FRAMEWORK_V4: &str = "v4.0.30319";

#[link(name = "kernel32")]
extern "system" {
    fn LoadLibraryW(name: *const u16) -> *mut c_void;
    fn GetProcAddress(module: *mut c_void, name: *const u8) -> *mut c_void;
}

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(Some(0)).collect()
}

fn failed(hr: sys::HRESULT) -> Result<(), AttachError> {
    if hr.0 < 0 {
        Err(AttachError::from_hresult(hr.0))
    } else {
        Ok(())
    }
}

/// Attaches profiler `clsid` at `profiler_path` to the .NET Framework
/// process `pid` through `ICLRProfiling::AttachProfiler`, using the installed
/// runtime `runtime_version` (normally [`FRAMEWORK_V4`]).
pub fn attach_profiler_framework(
    pid: u32,
    clsid: GUID,
    profiler_path: &str,
    client_data: &[u8],
    timeout: Duration,
    runtime_version: &str,
) -> Result<(), AttachError> {
    let client_len = u32::try_from(client_data.len())
        .map_err(|_| AttachError::InvalidArgument("client data larger than 4 GiB".into()))?;
    let mscoree = wide("mscoree.dll");
    // SAFETY: [os-api, nul-terminated] NUL-terminated wide string; the returned module stays loaded
    // for the life of the process (never freed here).
    let module = unsafe { LoadLibraryW(mscoree.as_ptr()) };
    if module.is_null() {
        return Err(AttachError::Protocol(
            "mscoree.dll is not installed: no .NET Framework on this machine".into(),
        ));
    }
    // SAFETY: [os-api, nul-terminated] `module` is a loaded module; the name is NUL-terminated.
    let create = unsafe { GetProcAddress(module, c"CLRCreateInstance".as_ptr().cast()) };
    if create.is_null() {
        return Err(AttachError::Protocol(
            "mscoree.dll has no CLRCreateInstance (a .NET Framework older than 4)".into(),
        ));
    }
    // SAFETY: [ffi-abi] `CLRCreateInstance` has this signature (metahost.idl).
    let create: sys::CLRCreateInstanceFnPtr = unsafe { core::mem::transmute(create) };

    let mut raw: *mut c_void = core::ptr::null_mut();
    // SAFETY: [com-ownership, plain-call] valid CLSID/IID pointers and out pointer; on success `raw` holds
    // one reference to an ICLRMetaHost, which `from_raw` takes over.
    failed(unsafe { create(&sys::CLSID_CLRMetaHost, &sys::ICLRMetaHost::IID, &mut raw) })?;
    // SAFETY: [com-ownership] CLRCreateInstance succeeded, so `raw` holds one owned
    // ICLRMetaHost reference, which `from_raw` takes over.
    let meta_host = unsafe { sys::ICLRMetaHost::from_raw(raw) };

    let version = wide(runtime_version);
    let mut raw: *mut c_void = core::ptr::null_mut();
    // SAFETY: [com-ownership, nul-terminated, plain-call] NUL-terminated version, valid IID and out pointer; ownership as above.
    failed(unsafe {
        meta_host.GetRuntime(version.as_ptr(), &sys::ICLRRuntimeInfo::IID, &mut raw)
    })?;
    // SAFETY: [com-ownership] `raw` holds one reference to an ICLRRuntimeInfo.
    let runtime = unsafe { sys::ICLRRuntimeInfo::from_raw(raw) };

    let mut raw: *mut c_void = core::ptr::null_mut();
    // SAFETY: [com-ownership, plain-call] valid CLSID/IID pointers and out pointer; ownership as above.
    failed(unsafe {
        runtime.GetInterface(&sys::CLSID_CLRProfiling, &sys::ICLRProfiling::IID, &mut raw)
    })?;
    // SAFETY: [com-ownership] `raw` holds one reference to an ICLRProfiling.
    let profiling = unsafe { sys::ICLRProfiling::from_raw(raw) };

    let path = wide(profiler_path);
    let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
    // SAFETY: [nul-terminated, plain-call] the CLSID, the NUL-terminated path and `client_len` bytes of
    // client data are valid for the call; the runtime copies the client data
    // and does not write through the pointer.
    failed(unsafe {
        profiling.AttachProfiler(
            pid,
            ms,
            &clsid,
            path.as_ptr(),
            client_data.as_ptr() as *mut c_void,
            client_len,
        )
    })
}
