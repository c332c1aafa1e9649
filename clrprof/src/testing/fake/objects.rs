//! The fake's enumerators (`ICorProfilerObjectEnum`, `ICorProfilerFunctionEnum`,
//! `ICorProfilerModuleEnum`, and for tests of the iterator types the Info4+
//! `ICorProfilerThreadEnum` / `ICorProfilerMethodEnum`) and IL allocator (`IMethodMalloc`).

use super::{put, FakeState, E_INVALIDARG, E_NOTIMPL, S_FALSE, S_OK};
use clrprof_sys::*;
use core::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use windows_core::implement;

#[implement(ICorProfilerObjectEnum)]
pub(crate) struct FakeObjectEnum {
    items: Vec<ObjectID>,
    pos: AtomicUsize,
    live: Arc<AtomicUsize>,
}

impl FakeObjectEnum {
    pub(crate) fn create(items: Vec<ObjectID>, live: &Arc<AtomicUsize>) -> ICorProfilerObjectEnum {
        live.fetch_add(1, Ordering::SeqCst);
        FakeObjectEnum {
            items,
            pos: AtomicUsize::new(0),
            live: live.clone(),
        }
        .into()
    }
}

impl Drop for FakeObjectEnum {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ICorProfilerObjectEnum_Impl for FakeObjectEnum_Impl {
    unsafe fn Skip(&self, celt: ULONG) -> HRESULT {
        let pos = self.pos.load(Ordering::SeqCst);
        let next = (pos + celt as usize).min(self.items.len());
        self.pos.store(next, Ordering::SeqCst);
        if next - pos == celt as usize {
            S_OK
        } else {
            S_FALSE
        }
    }
    unsafe fn Reset(&self) -> HRESULT {
        self.pos.store(0, Ordering::SeqCst);
        S_OK
    }
    unsafe fn Clone(&self, _ppEnum: *mut Option<ICorProfilerObjectEnum>) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetCount(&self, pcelt: *mut ULONG) -> HRESULT {
        put(pcelt, self.items.len() as u32);
        S_OK
    }
    unsafe fn Next(&self, celt: ULONG, out: *mut ObjectID, pceltFetched: *mut ULONG) -> HRESULT {
        if out.is_null() {
            return E_INVALIDARG;
        }
        let pos = self.pos.load(Ordering::SeqCst);
        let n = (celt as usize).min(self.items.len() - pos);
        // SAFETY: [caller-contract] the caller gives room for `celt >= n` elements.
        unsafe { core::ptr::copy_nonoverlapping(self.items[pos..].as_ptr(), out, n) };
        self.pos.store(pos + n, Ordering::SeqCst);
        put(pceltFetched, n as u32);
        if n == celt as usize {
            S_OK
        } else {
            S_FALSE
        }
    }
}

#[implement(ICorProfilerFunctionEnum)]
pub(crate) struct FakeFunctionEnum {
    items: Vec<COR_PRF_FUNCTION>,
    pos: AtomicUsize,
    live: Arc<AtomicUsize>,
}

impl FakeFunctionEnum {
    pub(crate) fn create(
        items: Vec<COR_PRF_FUNCTION>,
        live: &Arc<AtomicUsize>,
    ) -> ICorProfilerFunctionEnum {
        live.fetch_add(1, Ordering::SeqCst);
        FakeFunctionEnum {
            items,
            pos: AtomicUsize::new(0),
            live: live.clone(),
        }
        .into()
    }
}

impl Drop for FakeFunctionEnum {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ICorProfilerFunctionEnum_Impl for FakeFunctionEnum_Impl {
    unsafe fn Skip(&self, celt: ULONG) -> HRESULT {
        let pos = self.pos.load(Ordering::SeqCst);
        let next = (pos + celt as usize).min(self.items.len());
        self.pos.store(next, Ordering::SeqCst);
        if next - pos == celt as usize {
            S_OK
        } else {
            S_FALSE
        }
    }
    unsafe fn Reset(&self) -> HRESULT {
        self.pos.store(0, Ordering::SeqCst);
        S_OK
    }
    unsafe fn Clone(&self, _ppEnum: *mut Option<ICorProfilerFunctionEnum>) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetCount(&self, pcelt: *mut ULONG) -> HRESULT {
        put(pcelt, self.items.len() as u32);
        S_OK
    }
    unsafe fn Next(
        &self,
        celt: ULONG,
        out: *mut COR_PRF_FUNCTION,
        pceltFetched: *mut ULONG,
    ) -> HRESULT {
        if out.is_null() {
            return E_INVALIDARG;
        }
        let pos = self.pos.load(Ordering::SeqCst);
        let n = (celt as usize).min(self.items.len() - pos);
        // SAFETY: [caller-contract] the caller gives room for `celt >= n` elements.
        unsafe { core::ptr::copy_nonoverlapping(self.items[pos..].as_ptr(), out, n) };
        self.pos.store(pos + n, Ordering::SeqCst);
        put(pceltFetched, n as u32);
        if n == celt as usize {
            S_OK
        } else {
            S_FALSE
        }
    }
}

#[implement(ICorProfilerModuleEnum)]
pub(crate) struct FakeModuleEnum {
    items: Vec<ModuleID>,
    pos: AtomicUsize,
    live: Arc<AtomicUsize>,
}

impl FakeModuleEnum {
    pub(crate) fn create(items: Vec<ModuleID>, live: &Arc<AtomicUsize>) -> ICorProfilerModuleEnum {
        live.fetch_add(1, Ordering::SeqCst);
        FakeModuleEnum {
            items,
            pos: AtomicUsize::new(0),
            live: live.clone(),
        }
        .into()
    }
}

impl Drop for FakeModuleEnum {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ICorProfilerModuleEnum_Impl for FakeModuleEnum_Impl {
    unsafe fn Skip(&self, celt: ULONG) -> HRESULT {
        let pos = self.pos.load(Ordering::SeqCst);
        let next = (pos + celt as usize).min(self.items.len());
        self.pos.store(next, Ordering::SeqCst);
        if next - pos == celt as usize {
            S_OK
        } else {
            S_FALSE
        }
    }
    unsafe fn Reset(&self) -> HRESULT {
        self.pos.store(0, Ordering::SeqCst);
        S_OK
    }
    unsafe fn Clone(&self, _ppEnum: *mut Option<ICorProfilerModuleEnum>) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetCount(&self, pcelt: *mut ULONG) -> HRESULT {
        put(pcelt, self.items.len() as u32);
        S_OK
    }
    unsafe fn Next(&self, celt: ULONG, out: *mut ModuleID, pceltFetched: *mut ULONG) -> HRESULT {
        if out.is_null() {
            return E_INVALIDARG;
        }
        let pos = self.pos.load(Ordering::SeqCst);
        let n = (celt as usize).min(self.items.len() - pos);
        // SAFETY: [caller-contract] the caller gives room for `celt >= n` elements.
        unsafe { core::ptr::copy_nonoverlapping(self.items[pos..].as_ptr(), out, n) };
        self.pos.store(pos + n, Ordering::SeqCst);
        put(pceltFetched, n as u32);
        if n == celt as usize {
            S_OK
        } else {
            S_FALSE
        }
    }
}

/// Enumerators of Info4+ methods (`EnumThreads`,
/// `EnumNgenModuleMethodsInliningThisMethod`).
pub(crate) mod info4 {
    use super::*;

    #[implement(ICorProfilerThreadEnum)]
    pub(crate) struct FakeThreadEnum {
        items: Vec<ThreadID>,
        pos: AtomicUsize,
        live: Arc<AtomicUsize>,
    }

    impl FakeThreadEnum {
        pub(crate) fn create(
            items: Vec<ThreadID>,
            live: &Arc<AtomicUsize>,
        ) -> ICorProfilerThreadEnum {
            live.fetch_add(1, Ordering::SeqCst);
            FakeThreadEnum {
                items,
                pos: AtomicUsize::new(0),
                live: live.clone(),
            }
            .into()
        }
    }

    impl Drop for FakeThreadEnum {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl ICorProfilerThreadEnum_Impl for FakeThreadEnum_Impl {
        unsafe fn Skip(&self, celt: ULONG) -> HRESULT {
            let pos = self.pos.load(Ordering::SeqCst);
            let next = (pos + celt as usize).min(self.items.len());
            self.pos.store(next, Ordering::SeqCst);
            if next - pos == celt as usize {
                S_OK
            } else {
                S_FALSE
            }
        }
        unsafe fn Reset(&self) -> HRESULT {
            self.pos.store(0, Ordering::SeqCst);
            S_OK
        }
        unsafe fn Clone(&self, _ppEnum: *mut Option<ICorProfilerThreadEnum>) -> HRESULT {
            E_NOTIMPL
        }
        unsafe fn GetCount(&self, pcelt: *mut ULONG) -> HRESULT {
            put(pcelt, self.items.len() as u32);
            S_OK
        }
        unsafe fn Next(
            &self,
            celt: ULONG,
            out: *mut ThreadID,
            pceltFetched: *mut ULONG,
        ) -> HRESULT {
            if out.is_null() {
                return E_INVALIDARG;
            }
            let pos = self.pos.load(Ordering::SeqCst);
            let n = (celt as usize).min(self.items.len() - pos);
            // SAFETY: [caller-contract] the caller gives room for `celt >= n` elements.
            unsafe { core::ptr::copy_nonoverlapping(self.items[pos..].as_ptr(), out, n) };
            self.pos.store(pos + n, Ordering::SeqCst);
            put(pceltFetched, n as u32);
            if n == celt as usize {
                S_OK
            } else {
                S_FALSE
            }
        }
    }

    #[implement(ICorProfilerMethodEnum)]
    pub(crate) struct FakeMethodEnum {
        items: Vec<COR_PRF_METHOD>,
        pos: AtomicUsize,
        live: Arc<AtomicUsize>,
    }

    impl FakeMethodEnum {
        pub(crate) fn create(
            items: Vec<COR_PRF_METHOD>,
            live: &Arc<AtomicUsize>,
        ) -> ICorProfilerMethodEnum {
            live.fetch_add(1, Ordering::SeqCst);
            FakeMethodEnum {
                items,
                pos: AtomicUsize::new(0),
                live: live.clone(),
            }
            .into()
        }
    }

    impl Drop for FakeMethodEnum {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl ICorProfilerMethodEnum_Impl for FakeMethodEnum_Impl {
        unsafe fn Skip(&self, celt: ULONG) -> HRESULT {
            let pos = self.pos.load(Ordering::SeqCst);
            let next = (pos + celt as usize).min(self.items.len());
            self.pos.store(next, Ordering::SeqCst);
            if next - pos == celt as usize {
                S_OK
            } else {
                S_FALSE
            }
        }
        unsafe fn Reset(&self) -> HRESULT {
            self.pos.store(0, Ordering::SeqCst);
            S_OK
        }
        unsafe fn Clone(&self, _ppEnum: *mut Option<ICorProfilerMethodEnum>) -> HRESULT {
            E_NOTIMPL
        }
        unsafe fn GetCount(&self, pcelt: *mut ULONG) -> HRESULT {
            put(pcelt, self.items.len() as u32);
            S_OK
        }
        unsafe fn Next(
            &self,
            celt: ULONG,
            out: *mut COR_PRF_METHOD,
            pceltFetched: *mut ULONG,
        ) -> HRESULT {
            if out.is_null() {
                return E_INVALIDARG;
            }
            let pos = self.pos.load(Ordering::SeqCst);
            let n = (celt as usize).min(self.items.len() - pos);
            // SAFETY: [caller-contract] the caller gives room for `celt >= n` elements.
            unsafe { core::ptr::copy_nonoverlapping(self.items[pos..].as_ptr(), out, n) };
            self.pos.store(pos + n, Ordering::SeqCst);
            put(pceltFetched, n as u32);
            if n == celt as usize {
                S_OK
            } else {
                S_FALSE
            }
        }
    }
}

/// The fake's `IMethodMalloc`: hands out memory filled with `0xCD` (so a
/// caller that forgets to initialise it is caught) and keeps it alive as
/// long as the fake's state lives, like the runtime keeps IL bodies alive.
#[implement(IMethodMalloc)]
pub(crate) struct FakeMethodMalloc {
    pub(crate) state: Arc<Mutex<FakeState>>,
}

impl IMethodMalloc_Impl for FakeMethodMalloc_Impl {
    unsafe fn Alloc(&self, cb: ULONG) -> PVOID {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.enter("Alloc", vec![cb as usize]).is_some() || cb == 0 {
            return core::ptr::null_mut();
        }
        let mut block = vec![0xCDu8; cb as usize].into_boxed_slice();
        let p = block.as_mut_ptr() as *mut c_void;
        st.allocations.push(block);
        p
    }
}
