//! clrprof-mux: several CLR profilers in one process.
//!
//! The runtime loads one profiler per process. The multiplexer is that
//! profiler, and it loads and drives the profilers named in its
//! configuration — any COM profiler: built with clrprof, hand-written in
//! C/C++, or a vendor's — each as if it were alone:
//!
//! - **loading**: each child library is loaded, its `DllGetClassObject`
//!   asked for the configured CLSID and its class factory for an
//!   `ICorProfilerCallback2`, as the runtime does ([`config`] has the
//!   syntax: `CLRPROF_MUX_PROFILERS=path={CLSID};path={CLSID}`, the
//!   runtime's own notification-profiler list syntax);
//! - **its own Info object**: each child gets a proxy of the runtime's
//!   `ICorProfilerInfo*` that answers exactly the versions the runtime has;
//!   most methods forward to the runtime, the per-profiler ones are the
//!   multiplexer's (`proxy` module: event masks, ELT hooks and mappers,
//!   ReJIT requests, IL bodies, detach);
//! - **event masks**: each child's masks are its own; the runtime gets the
//!   union, and each callback reaches only the children whose masks ask
//!   for it (by the runtime's own per-profiler rules), in configuration
//!   order;
//! - **results the runtime reads** (inlining, cached code, `ObjectReferences`,
//!   ReJIT parameters, assembly references) are combined by the rules in
//!   the `callback` module;
//! - **features the runtime gives one owner** are composed: ELT hooks and
//!   mappers of several children (`elt` module), IL rewriting (a body set
//!   by one child is what the next one reads), ReJIT requests (`rejit`
//!   module), detach (when every child asked);
//! - **isolation**: a child that fails to load or to initialize is dropped
//!   alone and reported; a failing result of one child never reaches
//!   another; every entry point of the multiplexer runs under clrprof's
//!   panic guard or is panic-free by construction.
//!
//! The multiplexer writes its own JSON Lines records (to `CLRPROF_MUX_OUTPUT`,
//! else the process's `CLRPROF_OUTPUT`): the runtime record, one `child` record per child
//! (`initialized` with its masks, or `dropped` with the stage, `HRESULT` and
//! reason), one `elt` record when children hook (`pass-through` or
//! `fan-out`), and `initialized` with the count of active children.
//!
//! `clrprof run --profiler A --profiler B --output-dir DIR -- CMD` uses the
//! multiplexer without any of this spelled out. The book's chapter
//! "Running several profilers" compares it with the runtime's notification
//! profilers.

#![warn(clippy::undocumented_unsafe_blocks)]
#![allow(non_snake_case)]

mod callback;
#[rustfmt::skip]
mod callback_impl;
pub mod config;
mod elt;
mod elt_hooks;
mod env;
mod il_map;
#[rustfmt::skip]
mod info_vtbl;
mod proxy;
mod rejit;
mod rejit_requests;
mod routes;
mod runtime;
mod shared;
#[cfg(test)]
mod tests;

use clrprof::factory::{ClassEntry, CLASS_ENTRY_MAGIC};
use clrprof::guard::guard;
use clrprof::sys::*;
use core::ffi::c_void;
use windows_core::IUnknown;

/// The multiplexer's CLSID (`CORECLR_PROFILER`).
pub const CLSID: &str = "{366DABA3-098B-4669-961C-4FBE18ECC9B9}";

const CLSID_VALUE: u128 = 0x366DABA3_098B_4669_961C_4FBE18ECC9B9;

/// Marker read by `clrprof clsid` (and the test rig) from the file.
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
#[used]
pub static clrprof_profiler_clsid_366DABA3098B4669961C4FBE18ECC9B9: [u8; 52] =
    *b"CLRPROF_CLSID:{366DABA3-098B-4669-961C-4FBE18ECC9B9}";

/// Creates the multiplexer (one per `IClassFactory::CreateInstance`).
unsafe extern "system" fn create(riid: *const GUID, ppv: *mut *mut c_void) -> HRESULT {
    guard("clrprof-mux CreateInstance", E_FAIL, || {
        let unknown: IUnknown = callback::Multiplexer::new().into();
        // SAFETY: [caller-contract, com-ownership] forwarded from IClassFactory::CreateInstance, whose
        // caller guarantees valid `riid` and `ppv` pointers.
        unsafe { unknown.query(riid, ppv) }
    })
}

/// The multiplexer's class entry, found by clrprof's `DllGetClassObject`.
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static clrprof_class_366DABA3098B4669961C4FBE18ECC9B9: ClassEntry = ClassEntry {
    magic: CLASS_ENTRY_MAGIC,
    clsid: CLSID_VALUE,
    create,
};

#[cfg(test)]
mod marker_tests {
    #[test]
    fn the_marker_and_the_entry_name_the_clsid() {
        let marker =
            std::str::from_utf8(&super::clrprof_profiler_clsid_366DABA3098B4669961C4FBE18ECC9B9)
                .unwrap();
        assert_eq!(marker, format!("CLRPROF_CLSID:{}", super::CLSID));
        let guid = super::config::parse_clsid(super::CLSID).unwrap();
        assert_eq!(guid.to_u128(), super::CLSID_VALUE);
        assert_eq!(
            clrprof::factory::class_symbol_name(&guid),
            "clrprof_class_366DABA3098B4669961C4FBE18ECC9B9"
        );
    }
}
