//! The exports of a real profiler library, called the way a runtime calls
//! them: the test-profilers fixture, built as a `cdylib` and loaded with
//! `dlopen`.
//!
//! - `DllGetClassObject` serves the CLSIDs of its `#[profiler]` classes and
//!   refuses (`CLASS_E_CLASSNOTAVAILABLE`) a CLSID whose symbol exists in
//!   the library but is not a class entry, without calling into it;
//! - `DllCanUnloadNow` answers "busy" while a class factory the runtime got
//!   is alive, and "can unload" once it is released.

use core::ffi::c_void;
use std::path::PathBuf;

type DllGetClassObject =
    unsafe extern "system" fn(*const Guid, *const Guid, *mut *mut c_void) -> i32;
type DllCanUnloadNow = unsafe extern "system" fn() -> i32;

#[repr(C)]
#[derive(Clone, Copy)]
struct Guid(u32, u16, u16, [u8; 8]);

const IID_ICLASSFACTORY: Guid = Guid(0x0000_0001, 0, 0, [0xC0, 0, 0, 0, 0, 0, 0, 0x46]);
/// The fixture's `SecondProfiler` class.
const SECOND: Guid = Guid(
    0x5A1C0E8E,
    0x4D2B,
    0x4B7A,
    [0x9C, 0x3E, 0x7F, 0x0D, 0x1E, 0x2A, 0x3B, 0x4D],
);
/// The fixture's decoy symbol `clrprof_class_0BADC1A5...`.
const DECOY: Guid = Guid(0x0BADC1A5, 0, 0, [0; 8]);
const CLASS_E_CLASSNOTAVAILABLE: i32 = 0x8004_0111_u32 as i32;

fn fixture() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    clrprof_testing::build::build_cdylib("test-profilers", clrprof_testing::Os::Linux, false, &root)
        .expect("build the test-profilers fixture")
}

#[test]
#[cfg(target_os = "linux")]
fn dll_get_class_object_serves_entries_and_refuses_other_symbols() {
    let path = fixture();
    // SAFETY: loading the fixture runs no initialisers of ours beyond Rust's
    // own; the symbols have the COM export signatures declared above.
    unsafe {
        let lib = libloading::Library::new(&path).expect("dlopen the fixture");
        let get: libloading::Symbol<DllGetClassObject> =
            lib.get(b"DllGetClassObject\0").expect("DllGetClassObject");
        let can_unload: libloading::Symbol<DllCanUnloadNow> =
            lib.get(b"DllCanUnloadNow\0").expect("DllCanUnloadNow");
        assert!(
            lib.get::<*const u8>(b"clrprof_class_0BADC1A5000000000000000000000000\0")
                .is_ok(),
            "the decoy symbol is exported"
        );
        let mut ppv: *mut c_void = core::ptr::null_mut();
        let hr = get(&DECOY, &IID_ICLASSFACTORY, &mut ppv);
        assert_eq!(hr, CLASS_E_CLASSNOTAVAILABLE);
        assert!(ppv.is_null());
        assert_eq!(can_unload(), 0, "S_OK: nothing alive");

        let hr = get(&SECOND, &IID_ICLASSFACTORY, &mut ppv);
        assert_eq!(hr, 0);
        assert!(!ppv.is_null());
        assert_eq!(can_unload(), 1, "S_FALSE while the runtime holds a factory");
        // IUnknown::Release is the third slot of the factory's vtable.
        let vtable = *(ppv as *const *const unsafe extern "system" fn(*mut c_void) -> u32);
        let release = *vtable.add(2);
        assert_eq!(release(ppv), 0);
        assert_eq!(can_unload(), 0, "S_OK once the factory is released");
    }
}
