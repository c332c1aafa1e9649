//! The class factory and the library exports the runtime calls.
//!
//! The runtime loads the profiler library, calls `DllGetClassObject` with the
//! CLSID from `CORECLR_PROFILER`, asks the returned `IClassFactory` to
//! `CreateInstance` an `ICorProfilerCallback2` (and QIs for newer versions),
//! then calls `Initialize`.
//!
//! Every `#[profiler]` struct exports one [`ClassEntry`] whose symbol name is
//! derived from its CLSID (`clrprof_class_<32 hex digits>`, see
//! [`class_symbol_name`]). `DllGetClassObject` turns the requested CLSID into
//! that name and looks it up in the library's own export table (`dladdr` +
//! `dlsym` on Unix, `GetModuleHandleExW` + `GetProcAddress` on Windows). So
//! several profilers with different CLSIDs can live in one library while the
//! exports exist once, without any link-time registry, on every target.
//!
//! A symbol of that name that `#[profiler]` did not make (another crate's
//! `#[no_mangle]` item that happens to match) is not trusted: the entry
//! starts with [`CLASS_ENTRY_MAGIC`] and records its own CLSID, and
//! `DllGetClassObject` checks both before it calls anything.

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

/// The signature of the creation function of a [`ClassEntry`]: builds a new
/// profiler object and answers `riid` with it.
pub type CreateFn = unsafe extern "system" fn(riid: *const GUID, ppv: *mut *mut c_void) -> HRESULT;

/// The first bytes of every [`ClassEntry`].
pub const CLASS_ENTRY_MAGIC: [u8; 16] = *b"clrprof-class-v1";

/// What `#[profiler]` exports per profiler class, under
/// [`class_symbol_name`]: a marker, the class's CLSID and its creation
/// function.
#[repr(C)]
pub struct ClassEntry {
    /// [`CLASS_ENTRY_MAGIC`].
    pub magic: [u8; 16],
    /// The CLSID, as `GUID::to_u128` gives it.
    pub clsid: u128,
    /// Creates the profiler object.
    pub create: CreateFn,
}

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

impl ClassFactory {
    /// Counted in `LIVE_OBJECTS` from before it exists until after it is
    /// dropped: its methods are library code the runtime may still call.
    fn new(create: CreateFn) -> ClassFactory {
        LIVE_OBJECTS.fetch_add(1, Ordering::SeqCst);
        ClassFactory { create }
    }
}

impl Drop for ClassFactory {
    fn drop(&mut self) {
        LIVE_OBJECTS.fetch_sub(1, Ordering::SeqCst);
    }
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
                // SAFETY: [callback-args] non-null out pointer from the caller (COM contract).
                unsafe { *object = core::ptr::null_mut() };
                if !outer.is_null() {
                    return HRESULT(KnownHresult::CLASS_E_NOAGGREGATION as i32);
                }
                // Before the profiler's constructor runs: a thread it starts
                // must not outlive the library (see `exit::pin_library`).
                crate::exit::pin_library();
                // SAFETY: [callback-args, ffi-abi] valid riid and out pointer (checked above).
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

/// Finds the creation function this library exports for `clsid`: the
/// [`ClassEntry`] named after it, if it carries the magic and that CLSID.
pub fn find_class(clsid: &GUID) -> Option<CreateFn> {
    let mut name = class_symbol_name(clsid).into_bytes();
    name.push(0);
    let address = own_export(&name)?;
    if !in_own_image(address as usize, core::mem::size_of::<ClassEntry>()) {
        return None;
    }
    // SAFETY: [local-memory, os-api] the whole range of a ClassEntry at `address` lies in this
    // library's loaded image (checked above: the loader maps every loaded
    // segment readable), so reading its first 16 bytes, unaligned, reads
    // mapped memory whatever the symbol really is.
    let magic = unsafe { core::ptr::read_unaligned(address as *const [u8; 16]) };
    if magic != CLASS_ENTRY_MAGIC {
        log::warn!(
            "DllGetClassObject: {} is exported but is not a #[profiler] class entry",
            String::from_utf8_lossy(&name[..name.len() - 1])
        );
        return None;
    }
    // SAFETY: [local-memory] the magic says `#[profiler]` made this symbol, which it only
    // ever defines as a `ClassEntry` (repr(C), 8-byte aligned static).
    let entry = unsafe { &*(address as *const ClassEntry) };
    (entry.clsid == clsid.to_u128()).then_some(entry.create)
}

/// Looks up an exported symbol (NUL-terminated name) in the library that
/// contains this code.
#[cfg(unix)]
fn own_export(name: &[u8]) -> Option<*mut c_void> {
    // SAFETY: [ffi-abi] Dl_info is plain data (pointers and integers); all-zero is valid.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let here = DllGetClassObject as *const c_void;
    // SAFETY: [os-api] `here` is an address inside this library; `info` is a valid out struct.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: [os-api, nul-terminated, library-pinned] the library is loaded (we are running in it), so RTLD_NOLOAD only
    // takes another reference to it, released by dlclose below.
    let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: [os-api, nul-terminated] valid handle and NUL-terminated name.
    let symbol = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
    // SAFETY: [os-api, library-pinned] balances the dlopen above; the library stays loaded by the runtime's own reference.
    unsafe { libc::dlclose(handle) };
    (!symbol.is_null()).then_some(symbol)
}

/// `true` if `start..start + len` lies in this library's loaded image (both
/// ends in a segment the loader mapped for the object containing this code).
#[cfg(unix)]
fn in_own_image(start: usize, len: usize) -> bool {
    fn base_of(address: usize) -> Option<usize> {
        // SAFETY: [ffi-abi] Dl_info is plain data; all-zero is valid.
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] dladdr only looks the address up in the loader's tables.
        (unsafe { libc::dladdr(address as *const c_void, &mut info) } != 0)
            .then_some(info.dli_fbase as usize)
    }
    let Some(end) = start.checked_add(len.saturating_sub(1)) else {
        return false;
    };
    let ours = base_of(DllGetClassObject as *const () as usize);
    ours.is_some() && base_of(start) == ours && base_of(end) == ours
}

#[cfg(windows)]
fn in_own_image(start: usize, len: usize) -> bool {
    const FROM_ADDRESS: u32 = 0x4;
    const UNCHANGED_REFCOUNT: u32 = 0x2;
    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleExW(flags: u32, name: *const c_void, module: *mut *mut c_void) -> i32;
    }
    let module_of = |address: usize| {
        let mut module: *mut c_void = core::ptr::null_mut();
        // SAFETY: [os-api] the call only looks the address up among loaded modules;
        // UNCHANGED_REFCOUNT takes no reference.
        let ok = unsafe {
            GetModuleHandleExW(
                FROM_ADDRESS | UNCHANGED_REFCOUNT,
                address as *const c_void,
                &mut module,
            )
        };
        (ok != 0).then_some(module as usize)
    };
    let Some(end) = start.checked_add(len.saturating_sub(1)) else {
        return false;
    };
    let ours = module_of(DllGetClassObject as *const () as usize);
    ours.is_some() && module_of(start) == ours && module_of(end) == ours
}

#[cfg(not(any(unix, windows)))]
fn in_own_image(_start: usize, _len: usize) -> bool {
    false
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
    // SAFETY: [os-api] `here` is an address inside this DLL; UNCHANGED_REFCOUNT takes no reference.
    if unsafe { GetModuleHandleExW(FROM_ADDRESS | UNCHANGED_REFCOUNT, here, &mut module) } == 0 {
        return None;
    }
    // SAFETY: [os-api, nul-terminated] valid module handle and NUL-terminated name.
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
            // SAFETY: [caller-contract, callback-args] non-null pointers from the runtime (COM contract).
            unsafe { *ppv = core::ptr::null_mut() };
            // SAFETY: [caller-contract, callback-args] COM's DllGetClassObject contract: `rclsid` points to a
            // valid GUID for the call (checked non-null above).
            let clsid = unsafe { *rclsid };
            let Some(create) = find_class(&clsid) else {
                log::warn!("DllGetClassObject: this library does not serve CLSID {clsid:?}");
                return HRESULT(KnownHresult::CLASS_E_CLASSNOTAVAILABLE as i32);
            };
            crate::guard::mark_loaded_in_host();
            let factory: IUnknown = ClassFactory::new(create).into();
            // SAFETY: [caller-contract, com-ownership] valid riid and out pointer (checked above).
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
        // SAFETY: [plain-call] valid pointers.
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
        let factory: IClassFactory = ClassFactory::new(refuse).into();
        let mut ppv: *mut c_void = core::ptr::dangling_mut();
        let outer: *mut c_void = core::ptr::dangling_mut();
        // SAFETY: [plain-call] valid pointers; `outer` is never dereferenced (aggregation is refused first).
        let hr = unsafe { factory.CreateInstance(outer, &IClassFactory::IID, &mut ppv) };
        assert_eq!(hr.0, KnownHresult::CLASS_E_NOAGGREGATION as i32);
        assert!(ppv.is_null());
        let before = SERVER_LOCKS.load(Ordering::SeqCst);
        // SAFETY: [plain-call] plain values.
        unsafe {
            assert_eq!(factory.LockServer(1).0, 0);
            assert_eq!(SERVER_LOCKS.load(Ordering::SeqCst), before + 1);
            assert_eq!(DllCanUnloadNow().0, 1, "S_FALSE while locked");
            assert_eq!(factory.LockServer(0).0, 0);
        }
        assert_eq!(SERVER_LOCKS.load(Ordering::SeqCst), before);
    }
}
