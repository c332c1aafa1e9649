//! Jitted code enumeration (`ICorProfilerInfo3`).

use crate::error::{check, Error, KnownHresult, Result};
use crate::info::enums::{function_enum, FunctionEnum};
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

impl ProfilerInfo {
    /// `EnumJITedFunctions` (Info3): the functions jitted so far (a snapshot
    /// taken by this call). Each element's ReJIT ID is 0 (`EnumJITedFunctions2`
    /// of `ICorProfilerInfo4` reports real ones).
    ///
    /// Typically called from `ProfilerAttachComplete` by a profiler loaded by
    /// attach, to learn about code that ran before it. The functions are tied
    /// to `&self`: a function stays valid until its class unloads, which the
    /// caller must track (`class_unload_started`) if it keeps them longer
    /// than the current callback.
    pub fn enum_jited_functions(&self) -> Result<FunctionEnum<'_>> {
        let i3 = self.raw_info3("ICorProfilerInfo3::EnumJITedFunctions")?;
        let mut e: Option<sys::ICorProfilerFunctionEnum> = None;
        // SAFETY: `e` receives an owned reference.
        check(
            unsafe { i3.EnumJITedFunctions(&mut e) },
            "ICorProfilerInfo3::EnumJITedFunctions",
        )?;
        let e = e.ok_or(Error::runtime(
            sys::HRESULT(KnownHresult::E_POINTER as i32),
            "ICorProfilerInfo3::EnumJITedFunctions",
        ))?;
        // SAFETY: functions the runtime enumerates are loaded now; see the doc
        // comment for how long they stay valid.
        Ok(unsafe { function_enum(e) })
    }
}
