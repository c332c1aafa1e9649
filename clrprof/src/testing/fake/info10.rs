//! The fake's `ICorProfilerInfo10` methods: `E_NOTIMPL` for now, so that the
//! fake can implement `ICorProfilerInfo11` (whose base it is). The heap
//! inspection, ReJIT-with-inliners and suspension parts are to be faked
//! where a unit test needs them.

use super::info::FakeInfo_Impl;
use super::E_NOTIMPL;
use clrprof_sys::*;
use core::ffi::c_void;

impl ICorProfilerInfo10_Impl for FakeInfo_Impl {
    unsafe fn EnumerateObjectReferences(
        &self,
        objectId: ObjectID,
        callback: Option<ObjectReferenceCallback>,
        clientData: *mut c_void,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn IsFrozenObject(&self, objectId: ObjectID, pbFrozen: *mut BOOL) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetLOHObjectSizeThreshold(&self, pThreshold: *mut DWORD) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn RequestReJITWithInliners(
        &self,
        dwRejitFlags: DWORD,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn SuspendRuntime(&self) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn ResumeRuntime(&self) -> HRESULT {
        E_NOTIMPL
    }
}
