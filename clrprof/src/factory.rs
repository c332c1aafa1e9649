//! The class factory and the library exports the runtime calls.
//!
//! The runtime loads the profiler library, calls `DllGetClassObject` with the
//! CLSID from `CORECLR_PROFILER`, asks the returned `IClassFactory` to
//! `CreateInstance` an `ICorProfilerCallback2` (and QIs for newer versions),
//! then calls `Initialize`.
//!
//! Every `#[profiler]` struct exports one creation function whose symbol name
//! is derived from its CLSID (`clrprof_class_<32 hex digits>`, see
//! [`class_symbol_name`]). `DllGetClassObject` turns the requested CLSID into
//! that name and looks it up in the library's own export table (`dladdr` +
//! `dlsym` on Unix, `GetModuleHandleExW` + `GetProcAddress` on Windows). So
//! several profilers with different CLSIDs can live in one library while the
//! exports exist once, without any link-time registry, on every target.

use crate::com::LIVE_OBJECTS;
use crate::error::{KnownHresult, HRESULT};
use crate::guard::guard;
use core::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use windows_core::{implement, interface, IUnknown, Interface, GUID};

pub use class_factory::{IClassFactory, IClassFactory_Impl, IClassFactory_Vtbl};

mod class_factory {
    #![allow(missing_docs, non_snake_case)]
    use super::*;

    /// `IClassFactory` (COM's `unknwn.idl`).
    #[interface("00000001-0000-0000-C000-000000000046")]
    pub unsafe trait IClassFactory: IUnknown {
        /// `IClassFactory::CreateInstance`.
        pub fn CreateInstance(
            &self,
            outer: *mut c_void,
            riid: *const GUID,
            object: *mut *mut c_void,
        ) -> HRESULT;
        /// `IClassFactory::LockServer`.
        pub fn LockServer(&self, lock: i32) -> HRESULT;
    }
}

/// The signature of the creation function `#[profiler]` exports per class:
/// builds a new profiler object and answers `riid` with it.
pub type CreateFn = unsafe extern "system" fn(riid: *const GUID, ppv: *mut *mut c_void) -> HRESULT;

/// The exported symbol name of the creation function for `clsid`.
pub fn class_symbol_name(clsid: &GUID) -> String {
    format!("clrprof_class_{:032X}", clsid.to_u128())
}

/// `IClassFactory::LockServer` count (for `DllCanUnloadNow`).
static SERVER_LOCKS: AtomicUsize = AtomicUsize::new(0);

#[implement(IClassFactory)]
struct ClassFactory {
    create: CreateFn,
}

#[allow(non_snake_case)]
impl IClassFactory_Impl for ClassFactory_Impl {
    unsafe fn CreateInstance(
        &self,
        outer: *mut c_void,
        riid: *const GUID,
        object: *mut *mut c_void,
    ) -> HRESULT {
        guard(
            "IClassFactory::CreateInstance",
            HRESULT(KnownHresult::E_FAIL as i32),
            || {
                if object.is_null() || riid.is_null() {
                    return HRESULT(KnownHresult::E_POINTER as i32);
                }
                // SAFETY: non-null out pointer from the caller (COM contract).
                unsafe { *object = core::ptr::null_mut() };
                if !outer.is_null() {
                    return HRESULT(KnownHresult::CLASS_E_NOAGGREGATION as i32);
                }
                // SAFETY: valid riid and out pointer (checked above).
                unsafe { (self.create)(riid, object) }
            },
        )
    }

    unsafe fn LockServer(&self, lock: i32) -> HRESULT {
        if lock != 0 {
            SERVER_LOCKS.fetch_add(1, Ordering::SeqCst);
        } else {
            // Never underflow, whatever the caller does.
            let _ =
                SERVER_LOCKS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
        HRESULT(0)
    }
}

/// Finds the creation function this library exports for `clsid`.
pub fn find_class(clsid: &GUID) -> Option<CreateFn> {
    let mut name = class_symbol_name(clsid).into_bytes();
    name.push(0);
    let address = own_export(&name)?;
    // SAFETY: the symbol `clrprof_class_<clsid>` is only ever defined by
    // `#[profiler]`, as a function of type `CreateFn`.
    Some(unsafe { core::mem::transmute::<*mut c_void, CreateFn>(address) })
}

/// Looks up an exported symbol (NUL-terminated name) in the library that
/// contains this code.
#[cfg(unix)]
fn own_export(name: &[u8]) -> Option<*mut c_void> {
    // SAFETY: Dl_info is plain data (pointers and integers); all-zero is valid.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let here = DllGetClassObject as *const c_void;
    // SAFETY: `here` is an address inside this library; `info` is a valid out struct.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: the library is loaded (we are running in it), so RTLD_NOLOAD only
    // takes another reference to it, released by dlclose below.
    let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: valid handle and NUL-terminated name.
    let symbol = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
    // SAFETY: balances the dlopen above; the library stays loaded by the runtime's own reference.
    unsafe { libc::dlclose(handle) };
    (!symbol.is_null()).then_some(symbol)
}

#[cfg(windows)]
fn own_export(name: &[u8]) -> Option<*mut c_void> {
    const FROM_ADDRESS: u32 = 0x4;
    const UNCHANGED_REFCOUNT: u32 = 0x2;
    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleExW(flags: u32, name: *const c_void, module: *mut *mut c_void) -> i32;
        fn GetProcAddress(module: *mut c_void, name: *const u8) -> *mut c_void;
    }
    let mut module: *mut c_void = core::ptr::null_mut();
    let here = DllGetClassObject as *const c_void;
    // SAFETY: `here` is an address inside this DLL; UNCHANGED_REFCOUNT takes no reference.
    if unsafe { GetModuleHandleExW(FROM_ADDRESS | UNCHANGED_REFCOUNT, here, &mut module) } == 0 {
        return None;
    }
    // SAFETY: valid module handle and NUL-terminated name.
    let symbol = unsafe { GetProcAddress(module, name.as_ptr()) };
    (!symbol.is_null()).then_some(symbol)
}

#[cfg(not(any(unix, windows)))]
fn own_export(_name: &[u8]) -> Option<*mut c_void> {
    None
}

/// `DllGetClassObject`: the class factory for `rclsid`, or
/// `CLASS_E_CLASSNOTAVAILABLE` when this library does not serve that CLSID.
///
/// # Safety
/// COM export contract: valid `rclsid`/`riid` pointers and a valid out pointer.
#[no_mangle]
pub unsafe extern "system" fn DllGetClassObject(
    rclsid: *const GUID,
    riid: *const GUID,
    ppv: *mut *mut c_void,
) -> HRESULT {
    crate::logging::init_from_env();
    guard(
        "DllGetClassObject",
        HRESULT(KnownHresult::E_FAIL as i32),
        || {
            if rclsid.is_null() || riid.is_null() || ppv.is_null() {
                return HRESULT(KnownHresult::E_POINTER as i32);
            }
            // SAFETY: non-null pointers from the runtime (COM contract).
            unsafe { *ppv = core::ptr::null_mut() };
            // SAFETY: as above.
            let clsid = unsafe { *rclsid };
            let Some(create) = find_class(&clsid) else {
                log::warn!("DllGetClassObject: this library does not serve CLSID {clsid:?}");
                return HRESULT(KnownHresult::CLASS_E_CLASSNOTAVAILABLE as i32);
            };
            crate::guard::mark_loaded_in_host();
            let factory: IUnknown = ClassFactory { create }.into();
            // SAFETY: valid riid and out pointer (checked above).
            unsafe { factory.query(riid, ppv) }
        },
    )
}

/// `DllCanUnloadNow`: `S_OK` when no profiler object and no server lock is
/// alive, `S_FALSE` otherwise.
#[no_mangle]
pub extern "system" fn DllCanUnloadNow() -> HRESULT {
    let busy = LIVE_OBJECTS.load(Ordering::SeqCst) > 0 || SERVER_LOCKS.load(Ordering::SeqCst) > 0;
    HRESULT(busy as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_names_follow_the_clsid() {
        let clsid = GUID::from_u128(0x8c3d4d6a_2e7b_4f0e_9b61_3a1b2c4d5e6f);
        assert_eq!(
            class_symbol_name(&clsid),
            "clrprof_class_8C3D4D6A2E7B4F0E9B613A1B2C4D5E6F"
        );
    }

    #[test]
    fn unknown_clsid_is_class_not_available() {
        let clsid = GUID::from_u128(0x0bad0bad_0000_0000_0000_000000000000);
        let mut ppv: *mut c_void = core::ptr::dangling_mut();
        // SAFETY: valid pointers.
        let hr = unsafe { DllGetClassObject(&clsid, &IClassFactory::IID, &mut ppv) };
        assert_eq!(hr.0, KnownHresult::CLASS_E_CLASSNOTAVAILABLE as i32);
        assert!(ppv.is_null());
    }
}

#[cfg(test)]
mod factory_tests {
    use super::*;

    unsafe extern "system" fn refuse(_riid: *const GUID, _ppv: *mut *mut c_void) -> HRESULT {
        HRESULT(KnownHresult::E_FAIL as i32)
    }

    #[test]
    fn create_instance_refuses_aggregation_and_lock_server_counts() {
        let factory: IClassFactory = ClassFactory { create: refuse }.into();
        let mut ppv: *mut c_void = core::ptr::dangling_mut();
        let outer: *mut c_void = core::ptr::dangling_mut();
        // SAFETY: valid pointers; `outer` is never dereferenced (aggregation is refused first).
        let hr = unsafe { factory.CreateInstance(outer, &IClassFactory::IID, &mut ppv) };
        assert_eq!(hr.0, KnownHresult::CLASS_E_NOAGGREGATION as i32);
        assert!(ppv.is_null());
        let before = SERVER_LOCKS.load(Ordering::SeqCst);
        // SAFETY: plain values.
        unsafe {
            assert_eq!(factory.LockServer(1).0, 0);
            assert_eq!(SERVER_LOCKS.load(Ordering::SeqCst), before + 1);
            assert_eq!(DllCanUnloadNow().0, 1, "S_FALSE while locked");
            assert_eq!(factory.LockServer(0).0, 0);
        }
        assert_eq!(SERVER_LOCKS.load(Ordering::SeqCst), before);
    }
}
