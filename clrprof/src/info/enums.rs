//! Iterators over the runtime's enumerator interfaces:
//! `ICorProfilerObjectEnum`, `ICorProfilerFunctionEnum`,
//! `ICorProfilerModuleEnum`, `ICorProfilerThreadEnum` and
//! `ICorProfilerMethodEnum`.
//!
//! The runtime fills an enumerator with a snapshot when it is created
//! (`EnumModules`, `EnumJITedFunctions`, ...); `Next` hands out up to `celt`
//! elements and returns `S_FALSE` once fewer than asked for were left. The
//! iterators here fetch in batches, yield typed values and release the COM
//! object when dropped (the wrapped interface value's `Drop` calls `Release`).

use crate::error::{check, check_success, Result};
use crate::ids::*;
use clrprof_sys as sys;
use core::marker::PhantomData;

/// How many elements one `Next` call asks for.
const BATCH: usize = 32;

/// One of the runtime's enumerator interfaces, seen by [`ProfilerEnum`].
///
/// Implemented for the five `ICorProfiler*Enum` interfaces; not meant to be
/// implemented elsewhere.
pub trait RawProfilerEnum {
    /// The element type of `Next` (`ObjectID`, `COR_PRF_FUNCTION`, ...).
    type Raw: Copy + Default;
    /// The interface name, for errors (e.g. `ICorProfilerModuleEnum`).
    const NEXT: &'static str;
    /// `GetCount`'s call name.
    const GET_COUNT: &'static str;
    /// `Skip`'s call name.
    const SKIP: &'static str;
    /// `Reset`'s call name.
    const RESET: &'static str;
    /// `Next(celt, out, &fetched)`.
    ///
    /// # Safety
    /// `out` must have room for `celt` elements.
    unsafe fn next(&self, celt: u32, out: *mut Self::Raw, fetched: &mut u32) -> sys::HRESULT;
    /// Calls `GetCount`.
    fn get_count(&self, count: &mut u32) -> sys::HRESULT;
    /// Calls `Skip`.
    fn skip(&self, celt: u32) -> sys::HRESULT;
    /// Calls `Reset`.
    fn reset(&self) -> sys::HRESULT;
}

macro_rules! raw_enum {
    ($iface:ident, $raw:ty) => {
        impl RawProfilerEnum for sys::$iface {
            type Raw = $raw;
            const NEXT: &'static str = concat!(stringify!($iface), "::Next");
            const GET_COUNT: &'static str = concat!(stringify!($iface), "::GetCount");
            const SKIP: &'static str = concat!(stringify!($iface), "::Skip");
            const RESET: &'static str = concat!(stringify!($iface), "::Reset");
            unsafe fn next(&self, celt: u32, out: *mut $raw, fetched: &mut u32) -> sys::HRESULT {
                // SAFETY: [caller-contract, plain-call] the caller guarantees `out` has room for `celt`
                // elements; `fetched` is a valid out pointer.
                unsafe { self.Next(celt, out, fetched) }
            }
            fn get_count(&self, count: &mut u32) -> sys::HRESULT {
                // SAFETY: [com-ownership, plain-call] valid out pointer; the enumerator is alive (we hold a reference).
                unsafe { self.GetCount(count) }
            }
            fn skip(&self, celt: u32) -> sys::HRESULT {
                // SAFETY: [plain-call] plain value argument.
                unsafe { self.Skip(celt) }
            }
            fn reset(&self) -> sys::HRESULT {
                // SAFETY: [plain-call] no arguments.
                unsafe { self.Reset() }
            }
        }
    };
}

raw_enum!(ICorProfilerObjectEnum, sys::ObjectID);
raw_enum!(ICorProfilerFunctionEnum, sys::COR_PRF_FUNCTION);
raw_enum!(ICorProfilerModuleEnum, sys::ModuleID);
raw_enum!(ICorProfilerThreadEnum, sys::ThreadID);
raw_enum!(ICorProfilerMethodEnum, sys::COR_PRF_METHOD);

/// A batched iterator over a runtime enumerator, yielding `Result<T>`.
///
/// The first error ends the iteration (it is yielded once). Elements carry
/// the lifetime `'a` of what produced the enumerator (see the method that
/// returns it for the validity rule).
pub struct ProfilerEnum<'a, E: RawProfilerEnum, T> {
    raw: E,
    batch: Vec<E::Raw>,
    pos: usize,
    finished: bool,
    convert: fn(E::Raw) -> T,
    _scope: PhantomData<&'a ()>,
}

impl<'a, E: RawProfilerEnum, T> ProfilerEnum<'a, E, T> {
    /// Wraps an enumerator returned by the runtime.
    ///
    /// # Safety
    /// Every element the enumerator yields, passed through `convert`, must be
    /// valid for `'a` (e.g. IDs the runtime guarantees for that scope).
    pub unsafe fn new(raw: E, convert: fn(E::Raw) -> T) -> Self {
        ProfilerEnum {
            raw,
            batch: Vec::new(),
            pos: 0,
            finished: false,
            convert,
            _scope: PhantomData,
        }
    }

    /// `ICorProfiler*Enum::GetCount`: how many elements the enumerator holds in total
    /// (including those already returned).
    pub fn total(&self) -> Result<u32> {
        let mut n = 0u32;
        check(self.raw.get_count(&mut n), E::GET_COUNT)?;
        Ok(n)
    }

    /// `ICorProfiler*Enum::Skip`: moves past `count` elements (also dropping any fetched but not
    /// yet yielded batch, so the next element is the runtime's next one).
    /// `S_FALSE` (fewer left than asked) is not an error.
    pub fn skip_elements(&mut self, count: u32) -> Result<()> {
        let buffered = (self.batch.len() - self.pos) as u32;
        if count <= buffered {
            self.pos += count as usize;
            return Ok(());
        }
        self.pos = self.batch.len();
        check(self.raw.skip(count - buffered), E::SKIP)
    }

    /// `ICorProfiler*Enum::Reset`: starts again from the first element.
    pub fn reset(&mut self) -> Result<()> {
        self.batch.clear();
        self.pos = 0;
        self.finished = false;
        check(self.raw.reset(), E::RESET)
    }

    /// The raw enumerator interface.
    pub fn raw(&self) -> &E {
        &self.raw
    }

    fn refill(&mut self) -> Result<()> {
        self.batch.clear();
        self.batch.resize(BATCH, E::Raw::default());
        self.pos = 0;
        let mut fetched = 0u32;
        // SAFETY: [local-memory] `batch` has room for BATCH elements.
        let hr = unsafe {
            self.raw
                .next(BATCH as u32, self.batch.as_mut_ptr(), &mut fetched)
        };
        let hr = match check_success(hr, E::NEXT) {
            Ok(hr) => hr,
            Err(e) => {
                self.batch.clear();
                return Err(e);
            }
        };
        // Never trust a count larger than the buffer.
        self.batch.truncate((fetched as usize).min(BATCH));
        // S_FALSE: fewer than asked for were left, so this batch is the last.
        if hr.0 != 0 || self.batch.len() < BATCH {
            self.finished = true;
        }
        Ok(())
    }
}

impl<E: RawProfilerEnum, T> Iterator for ProfilerEnum<'_, E, T> {
    type Item = Result<T>;

    /// `ICorProfiler*Enum::Next`, fetching 32 elements per runtime call.
    fn next(&mut self) -> Option<Result<T>> {
        if self.pos >= self.batch.len() {
            if self.finished {
                return None;
            }
            if let Err(e) = self.refill() {
                self.finished = true;
                return Some(Err(e));
            }
            if self.batch.is_empty() {
                return None;
            }
        }
        let raw = self.batch[self.pos];
        self.pos += 1;
        Some(Ok((self.convert)(raw)))
    }
}

/// A function the JIT compiled, as `EnumJITedFunctions` reports it.
///
/// The ID is raw: an enumeration is a snapshot, and another thread may
/// unload the function's class while the profiler looks at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JitedFunction {
    /// The function.
    pub function: RawFunctionId,
    /// Its ReJIT version (0 for the original code; `EnumJITedFunctions`
    /// always reports 0, `EnumJITedFunctions2` the real one).
    pub rejit_id: RawReJitId,
}

/// A method named by module and token (`COR_PRF_METHOD`); the module is raw,
/// as for every enumeration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModuleMethod {
    /// The module that defines it.
    pub module: RawModuleId,
    /// Its definition token.
    pub method: MdMethodDef,
}

/// Objects of `EnumModuleFrozenObjects`: frozen objects never move and live
/// as long as their module (`'a`).
pub type ObjectEnum<'a> = ProfilerEnum<'a, sys::ICorProfilerObjectEnum, ObjectId<'a>>;
/// Functions of `EnumJITedFunctions` (raw IDs).
pub type FunctionEnum = ProfilerEnum<'static, sys::ICorProfilerFunctionEnum, JitedFunction>;
/// Modules of `EnumModules` (raw IDs).
pub type ModuleEnum = ProfilerEnum<'static, sys::ICorProfilerModuleEnum, RawModuleId>;
/// Threads of `EnumThreads` (Info4; raw IDs).
pub type ThreadEnum = ProfilerEnum<'static, sys::ICorProfilerThreadEnum, RawThreadId>;
/// Methods of `EnumNgenModuleMethodsInliningThisMethod` (Info6; raw IDs).
pub type MethodEnum = ProfilerEnum<'static, sys::ICorProfilerMethodEnum, ModuleMethod>;

/// Wraps an `ICorProfilerObjectEnum`.
///
/// # Safety
/// The objects must be valid for `'a` (ObjectIDs: until the next GC).
pub unsafe fn object_enum<'a>(raw: sys::ICorProfilerObjectEnum) -> ObjectEnum<'a> {
    // SAFETY: [caller-contract] guaranteed by the caller.
    unsafe { ProfilerEnum::new(raw, |o| ObjectId::from_sys(o)) }
}

/// Wraps an `ICorProfilerFunctionEnum` (raw IDs: nothing to promise).
pub fn function_enum(raw: sys::ICorProfilerFunctionEnum) -> FunctionEnum {
    // SAFETY: [id-scope] the elements are raw IDs and plain numbers, valid for 'static.
    unsafe {
        ProfilerEnum::new(raw, |f| JitedFunction {
            function: RawFunctionId(f.functionId),
            rejit_id: RawReJitId(f.reJitId),
        })
    }
}

/// Wraps an `ICorProfilerModuleEnum` (raw IDs).
pub fn module_enum(raw: sys::ICorProfilerModuleEnum) -> ModuleEnum {
    // SAFETY: [id-scope] raw IDs are plain numbers, valid for 'static.
    unsafe { ProfilerEnum::new(raw, RawModuleId) }
}

/// Wraps an `ICorProfilerThreadEnum` (raw IDs).
pub fn thread_enum(raw: sys::ICorProfilerThreadEnum) -> ThreadEnum {
    // SAFETY: [id-scope] raw IDs are plain numbers, valid for 'static.
    unsafe { ProfilerEnum::new(raw, RawThreadId) }
}

/// Wraps an `ICorProfilerMethodEnum` (raw IDs).
pub fn method_enum(raw: sys::ICorProfilerMethodEnum) -> MethodEnum {
    // SAFETY: [id-scope] raw IDs and tokens are plain numbers, valid for 'static.
    unsafe {
        ProfilerEnum::new(raw, |m| ModuleMethod {
            module: RawModuleId(m.moduleId),
            method: MdMethodDef(m.methodId),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::fake::{fake_ids, FakeModule, FakeRuntime};

    fn frozen(n: usize) -> FakeRuntime {
        let fake = FakeRuntime::new();
        fake.state().modules.insert(
            0x2000,
            FakeModule {
                frozen_objects: (0..n).map(|i| 0x10 * (i + 1)).collect(),
                ..Default::default()
            },
        );
        fake
    }

    #[test]
    fn empty_enumerator_yields_nothing() {
        let fake = frozen(0);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(0x2000));
        let mut e = info.enum_module_frozen_objects(m).unwrap();
        assert!(e.next().is_none());
        assert!(e.next().is_none());
        assert_eq!(e.total().unwrap(), 0);
    }

    #[test]
    fn batch_boundaries_lose_nothing() {
        for n in [31, 32, 33, 64, 65] {
            let fake = frozen(n);
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            fake_ids!(fake; m = module_id(0x2000));
            let got: Vec<usize> = info
                .enum_module_frozen_objects(m)
                .unwrap()
                .map(|o| o.unwrap().as_sys())
                .collect();
            assert_eq!(
                got,
                (0..n).map(|i| 0x10 * (i + 1)).collect::<Vec<_>>(),
                "n = {n}"
            );
        }
    }

    #[test]
    fn skip_within_and_beyond_the_fetched_batch() {
        let fake = frozen(70);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(0x2000));
        let mut e = info.enum_module_frozen_objects(m).unwrap();
        assert_eq!(e.next().unwrap().unwrap().as_sys(), 0x10);
        // 31 are buffered; skipping 40 skips them and 9 more in the runtime.
        e.skip_elements(40).unwrap();
        assert_eq!(e.next().unwrap().unwrap().as_sys(), 0x10 * 42);
        e.skip_elements(1000).unwrap();
        assert!(e.next().is_none());
    }
}

#[cfg(test)]
mod info4_tests {
    use super::*;
    use crate::testing::fake::objects::info4::{FakeMethodEnum, FakeThreadEnum};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn thread_and_method_enumerators_convert_and_release() {
        let live = Arc::new(AtomicUsize::new(0));
        let raw = FakeThreadEnum::create(vec![0x60, 0x61], &live);
        let threads: Vec<usize> = thread_enum(raw).map(|t| t.unwrap().0).collect();
        assert_eq!(threads, vec![0x60, 0x61]);
        let methods = vec![sys::COR_PRF_METHOD {
            moduleId: 0x20,
            methodId: 0x0600_0003,
        }];
        let raw = FakeMethodEnum::create(methods, &live);
        let mut e = method_enum(raw);
        assert_eq!(live.load(Ordering::SeqCst), 1);
        let m = e.next().unwrap().unwrap();
        assert_eq!((m.module.0, m.method), (0x20, MdMethodDef(0x0600_0003)));
        assert!(e.next().is_none());
        drop(e);
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }
}
