//! The runtime's own `ICorProfilerInfo*` object, which every child's proxy
//! forwards to and the multiplexer itself calls.

use clrprof::RuntimeHandle;
use core::ffi::c_void;
use windows_core::{IUnknown, Interface};

/// The runtime's own `ICorProfilerInfo*` object, one pointer per version it
/// answers.
pub(crate) struct RealInfo {
    /// Owns the runtime's interfaces (and so keeps the pointers valid).
    pub handle: RuntimeHandle,
    /// `ptrs[n]`: the `ICorProfilerInfo{n}` pointer, null if the runtime lacks it.
    ptrs: [*mut c_void; 16],
}

// SAFETY: [free-threaded] the runtime's ICorProfilerInfo* objects are free-threaded
// (corprof.idl: callable from any thread once Initialize began, each
// method's own restrictions reported as HRESULTs), and the pointers are
// owned by `handle`, which is Send + Sync.
unsafe impl Send for RealInfo {}
// SAFETY: [free-threaded] as above; the pointers are only read after construction.
unsafe impl Sync for RealInfo {}

impl RealInfo {
    /// Queries every Info version of the runtime's object.
    ///
    /// # Safety
    /// `unknown` is the runtime's profiler-info object, the argument of
    /// `ICorProfilerCallback::Initialize` / `InitializeForAttach`.
    pub unsafe fn new(unknown: &IUnknown, attached: bool) -> clrprof::Result<RealInfo> {
        // SAFETY: [caller-contract] guaranteed by the caller.
        let handle = unsafe { RuntimeHandle::from_unknown(unknown, attached) }?;
        let mut ptrs = [core::ptr::null_mut(); 16];
        // SAFETY: [info-alive, mux-forward] the raw pointers are kept beyond the guards; the runtime
        // keeps the object alive until it releases the multiplexer (which
        // forwards nothing after that), as it did before the gate existed.
        ptrs[1] = unsafe { handle.com_info1() }?.as_raw();
        macro_rules! take {
            ($($n:literal $f:ident),*) => {$(
                // SAFETY: [info-alive, mux-forward] as above.
                if let Ok(i) = unsafe { handle.$f("QueryInterface") } {
                    ptrs[$n] = i.as_raw();
                }
            )*};
        }
        take!(2 com_info2, 3 com_info3, 4 com_info4, 5 com_info5, 6 com_info6, 7 com_info7,
              8 com_info8, 9 com_info9, 10 com_info10, 11 com_info11, 12 com_info12,
              13 com_info13, 14 com_info14, 15 com_info15);
        Ok(RealInfo { handle, ptrs })
    }

    /// The `ICorProfilerInfo{version}` pointer, if the runtime has it.
    #[inline]
    pub fn get(&self, version: u32) -> Option<*mut c_void> {
        self.ptrs
            .get(version as usize)
            .copied()
            .filter(|p| !p.is_null())
    }

    /// The interface pointer of `version` and its vtable as `V`.
    ///
    /// # Safety
    /// `V` is the vtable type of `ICorProfilerInfo{version}`.
    #[inline]
    pub unsafe fn vtbl<V>(&self, version: u32) -> Option<(*mut c_void, &V)> {
        let this = self.get(version)?;
        // SAFETY: [ffi-abi, interface-version] a COM interface pointer points to its vtable pointer; the
        // vtable of ICorProfilerInfo{version} has the layout `V` (caller) and
        // lives as long as the object, which `handle` keeps.
        Some((this, unsafe { &**(this as *const *const V) }))
    }
}
