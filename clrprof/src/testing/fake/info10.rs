//! The fake's `ICorProfilerInfo10`: object references, frozen objects and
//! the large-object threshold from [`FakeHeap`](super::FakeHeap), and
//! `RequestReJITWithInliners` recorded; `SuspendRuntime` / `ResumeRuntime`
//! recorded, answering `E_NOTIMPL` unless a test programs another answer
//! with [`FakeRuntime::fail`](super::FakeRuntime::fail) (e.g. `S_OK`).

use super::info::FakeInfo_Impl;
use super::{put, E_INVALIDARG, E_NOTIMPL, S_OK};
use clrprof_sys::*;
use core::ffi::c_void;

impl ICorProfilerInfo10_Impl for FakeInfo_Impl {
    unsafe fn EnumerateObjectReferences(
        &self,
        objectId: ObjectID,
        callback: Option<ObjectReferenceCallback>,
        clientData: *mut c_void,
    ) -> HRESULT {
        let (refs, slots) = {
            let st = enter!(self, "EnumerateObjectReferences", objectId);
            let slots = st.heap.reference_slots.get(&objectId).cloned();
            match st.heap.references.get(&objectId).or(slots.as_ref()) {
                Some(r) => (r.clone(), slots),
                None => return E_INVALIDARG,
            }
        };
        let Some(cb) = callback else {
            return E_INVALIDARG;
        };
        if let Some(slots) = slots {
            for slot in slots {
                // SAFETY: [test-fake, callback-args] as the runtime does: the address of one reference
                // slot of the object (memory the test owns), the client data.
                if unsafe { cb(objectId, slot as *mut ObjectID, clientData) } == 0 {
                    break;
                }
            }
            return S_OK;
        }
        for mut r in refs {
            // SAFETY: [test-fake, callback-args] called as the runtime does: the object, the address
            // of one reference (a local here), the client data.
            if unsafe { cb(objectId, &mut r, clientData) } == 0 {
                break;
            }
        }
        S_OK
    }
    unsafe fn IsFrozenObject(&self, objectId: ObjectID, pbFrozen: *mut BOOL) -> HRESULT {
        let st = enter!(self, "IsFrozenObject", objectId);
        if !st.objects.contains_key(&objectId) && !st.heap.non_gc_objects.contains(&objectId) {
            return E_INVALIDARG;
        }
        put(pbFrozen, st.heap.frozen.contains(&objectId) as BOOL);
        S_OK
    }
    unsafe fn GetLOHObjectSizeThreshold(&self, pThreshold: *mut DWORD) -> HRESULT {
        let st = enter!(self, "GetLOHObjectSizeThreshold");
        put(pThreshold, st.heap.loh_threshold.unwrap_or(85_000));
        S_OK
    }
    unsafe fn RequestReJITWithInliners(
        &self,
        dwRejitFlags: DWORD,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
    ) -> HRESULT {
        let mut args = vec![dwRejitFlags as usize, cFunctions as usize];
        for i in 0..cFunctions as usize {
            // SAFETY: [caller-contract] the caller passes `cFunctions` entries in each array.
            unsafe {
                args.push(*moduleIds.add(i));
                args.push(*methodIds.add(i) as usize);
            }
        }
        let mut st = super::lock(self);
        if let Some(hr) = st.enter("RequestReJITWithInliners", args) {
            return hr;
        }
        S_OK
    }
    unsafe fn SuspendRuntime(&self) -> HRESULT {
        let mut st = super::lock(self);
        st.enter("SuspendRuntime", vec![]).unwrap_or(E_NOTIMPL)
    }
    unsafe fn ResumeRuntime(&self) -> HRESULT {
        let mut st = super::lock(self);
        st.enter("ResumeRuntime", vec![]).unwrap_or(E_NOTIMPL)
    }
}
