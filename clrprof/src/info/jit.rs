//! Jitted code enumeration (`ICorProfilerInfo3`).
//!
//! `EnumJITedFunctions` and `EnumJITedFunctions2` walk the JIT's code
//! heaps. On .NET 10 and later the runtime walks a copy of the heap list
//! without the code-heap lock (its `CodeHeapIterator`, codeman.cpp), while
//! a collectible `AssemblyLoadContext` that unloads has its code heaps
//! taken off that list inside a runtime suspension of its own
//! (`LoaderAllocator::GCLoaderAllocators` → `ExecutionManager::Unload`,
//! between `SuspendEE` and `RestartEE`) and its memory freed right after. A
//! walk that overlaps that suspension reads freed memory: a C profiler that
//! only enumerates from a plain thread killed 10.0.15 and 11.0.0 in the
//! unload app ("The RX block to map as RW was not found", or SIGSEGV in the
//! walk; tests/runtime/unload.rs), and no run died with each enumeration
//! made inside `SuspendRuntime`. A walk is therefore made only where no
//! such suspension can run: in a scope that keeps the runtime from
//! suspending (a runtime suspension, a GC or suspension callback, a
//! callback in cooperative mode), or on an SDK thread that suspends the
//! runtime for it. .NET 9 and older hold the lock for the
//! whole walk.

use crate::error::{check, Error, KnownHresult, Result};
use crate::info::enums::{function_enum, FunctionEnum};
use crate::info::{ProfilerInfo, RuntimeHandle};
use clrprof_sys as sys;

/// The reason of the refusals (see the module docs).
pub(crate) const CODE_HEAP_WALK: &str = "on .NET 10 and later the runtime walks its code heaps \
     for this call without their lock, and a collectible AssemblyLoadContext unloading \
     meanwhile frees the memory it reads (a C profiler making only this call killed 10.0.15 \
     and 11.0.0); call it where the runtime cannot suspend: on the ProfilerInfo of a runtime \
     suspension, of a GC callback or of a callback that receives ObjectIDs, or use \
     attach::CatchUp, which suspends the runtime for it";

impl RuntimeHandle {
    /// `EnumJITedFunctions` (Info3): the functions jitted so far (a snapshot
    /// taken by this call). Each element's ReJIT ID is 0 (`EnumJITedFunctions2`
    /// of `ICorProfilerInfo4` reports real ones).
    ///
    /// Typically called from `ProfilerAttachComplete` by a profiler loaded by
    /// attach, to learn about code that ran before it. The IDs are raw: a
    /// collectible assembly may unload a function's class on another thread
    /// while the caller iterates (see [`crate::attach::CatchUp`], which
    /// delivers them safely).
    ///
    /// On .NET 10 and later a handle (which proves no scope) is refused
    /// with [`Error::RuntimeVersion`]: from .NET 10 on the runtime walks its
    /// code heaps without their lock, and a collectible
    /// `AssemblyLoadContext` unloading meanwhile (inside a runtime
    /// suspension of its own) frees what the walk reads, so the walk is
    /// safe only while the runtime cannot suspend, which
    /// [`ProfilerInfo::enum_jited_functions`] checks.
    pub fn enum_jited_functions(&self) -> Result<FunctionEnum> {
        const CALL: &str = "ICorProfilerInfo3::EnumJITedFunctions";
        self.refuse_code_heap_walk(CALL)?;
        self.enum_jited_functions_walk()
    }

    /// [`Error::RuntimeVersion`] for `call` on .NET 10 and later (see the
    /// module docs).
    pub(crate) fn refuse_code_heap_walk(&self, call: &'static str) -> Result<()> {
        let runtime = self.runtime_information()?;
        if runtime.runtime_type != crate::runtimes::RuntimeType::CoreClr || runtime.major < 10 {
            return Ok(());
        }
        Err(Error::RuntimeVersion {
            hr: sys::CORPROF_E_UNSUPPORTED_CALL_SEQUENCE,
            call,
            called: false,
            why: CODE_HEAP_WALK.into(),
        })
    }

    /// The call itself, for callers that proved the runtime cannot suspend
    /// meanwhile (or that it is .NET 9 or older).
    pub(crate) fn enum_jited_functions_walk(&self) -> Result<FunctionEnum> {
        self.call_live("ICorProfilerInfo3::EnumJITedFunctions", || {
            let i3 = self.raw_info3("ICorProfilerInfo3::EnumJITedFunctions")?;
            let mut e: Option<sys::ICorProfilerFunctionEnum> = None;
            check(
                // SAFETY: [info-alive, com-ownership, code-heap-walk] `e` receives an owned
                // reference; the caller made sure no collectible code heap is freed during the
                // walk (.NET 9 and older hold the lock; else the runtime cannot suspend).
                unsafe { i3.EnumJITedFunctions(&mut e) },
                "ICorProfilerInfo3::EnumJITedFunctions",
            )?;
            let e = e.ok_or(Error::runtime(
                sys::HRESULT(KnownHresult::E_POINTER as i32),
                "ICorProfilerInfo3::EnumJITedFunctions",
            ))?;
            Ok(function_enum(e))
        })
    }
}

impl ProfilerInfo<'_> {
    /// [`RuntimeHandle::enum_jited_functions`] from a scope: allowed on
    /// every runtime where no other runtime suspension can run until the
    /// scope ends (a runtime suspension's
    /// [`info`](crate::stackwalk::RuntimeSuspension::info), a GC callback,
    /// a `RuntimeSuspend*` callback, a callback that receives `ObjectID`s,
    /// an ELT hook); elsewhere refused on .NET 10 and later like the
    /// handle's.
    pub fn enum_jited_functions(&self) -> Result<FunctionEnum> {
        if !self.suspensions_excluded() {
            self.refuse_code_heap_walk("ICorProfilerInfo3::EnumJITedFunctions")?;
        }
        self.enum_jited_functions_walk()
    }
}

#[cfg(test)]
mod tests {
    use crate::ids::RawReJitId;
    use crate::testing::fake::FakeRuntime;
    use clrprof_sys as sys;

    #[test]
    fn jited_functions_are_enumerated_in_batches() {
        let fake = FakeRuntime::new();
        // More than one batch of 32.
        fake.state().jitted = (0..70)
            .map(|i| sys::COR_PRF_FUNCTION {
                functionId: 0x1000 + i,
                reJitId: 0,
            })
            .collect();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        let e = info.enum_jited_functions().unwrap();
        assert_eq!(e.total().unwrap(), 70);
        let all: Vec<_> = e.collect::<crate::error::Result<Vec<_>>>().unwrap();
        assert_eq!(all.len(), 70);
        assert_eq!(all[69].function.0, 0x1000 + 69);
        assert_eq!(all[0].rejit_id, RawReJitId(0));
    }

    #[test]
    fn net10_walks_only_where_the_runtime_cannot_suspend() {
        use crate::error::Error;
        use crate::info::{ProfilerInfo, Scope};
        for major in [8u16, 9, 10, 11] {
            let fake = FakeRuntime::new();
            fake.state().runtime.major = major;
            fake.state().jitted = vec![sys::COR_PRF_FUNCTION {
                functionId: 0x1000,
                reJitId: 0,
            }];
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            let refused = |r: crate::error::Result<_>| {
                matches!(r, Err(Error::RuntimeVersion { called: false, .. }))
            };
            let handle = info.handle();
            assert_eq!(
                refused(handle.enum_jited_functions()),
                major >= 10,
                ".NET {major}"
            );
            let callback = ProfilerInfo::scoped(&handle, Scope::Callback);
            assert_eq!(
                refused(callback.enum_jited_functions()),
                major >= 10,
                ".NET {major}"
            );
            for scope in [Scope::NoGc, Scope::Suspended, Scope::GcRelocating] {
                let scoped = ProfilerInfo::scoped(&handle, scope);
                let all: Vec<_> = scoped
                    .enum_jited_functions()
                    .unwrap()
                    .collect::<crate::error::Result<Vec<_>>>()
                    .unwrap();
                assert_eq!(all.len(), 1, ".NET {major}");
            }
        }
    }

    #[test]
    fn failure_is_reported() {
        let fake = FakeRuntime::new();
        fake.fail("EnumJITedFunctions", sys::E_OUTOFMEMORY);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        assert_eq!(
            info.enum_jited_functions().err().unwrap().name(),
            Some("E_OUTOFMEMORY")
        );
    }
}
