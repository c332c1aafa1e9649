//! Jitted code enumeration (`ICorProfilerInfo3`).

use crate::error::{check, Error, KnownHresult, Result};
use crate::info::enums::{function_enum, FunctionEnum};
use crate::info::RuntimeHandle;
use clrprof_sys as sys;

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
    pub fn enum_jited_functions(&self) -> Result<FunctionEnum> {
        self.call_live("ICorProfilerInfo3::EnumJITedFunctions", || {
            let i3 = self.raw_info3("ICorProfilerInfo3::EnumJITedFunctions")?;
            let mut e: Option<sys::ICorProfilerFunctionEnum> = None;
            check(
                // SAFETY: [info-alive, com-ownership] `e` receives an owned reference.
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
