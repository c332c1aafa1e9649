//! Exceptions: the clause being run (`ICorProfilerInfo2`).

use crate::error::{check_success, Result};
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

/// Kind of an exception-handling clause (`COR_PRF_CLAUSE_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClauseType {
    /// A `filter` block.
    Filter,
    /// A `catch` block.
    Catch,
    /// A `finally` block.
    Finally,
    /// A value the SDK does not know.
    Unknown(u32),
}

/// `GetNotifiedExceptionClauseInfo`: the clause the runtime last notified
/// (`ExceptionSearchFilterEnter`, `ExceptionCatcherEnter`,
/// `ExceptionUnwindFinallyEnter`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExceptionClauseInfo {
    /// The kind of clause.
    pub clause_type: ClauseType,
    /// Native address of the clause's handler code.
    pub program_counter: usize,
    /// Frame pointer of the clause's frame.
    pub frame_pointer: usize,
    /// Shadow stack pointer (IA-64 only; 0 elsewhere).
    pub shadow_stack_pointer: usize,
}

impl<'s> ProfilerInfo<'s> {
    /// `GetNotifiedExceptionClauseInfo` (Info2): the clause being run on the
    /// calling thread, or `None` when no exception is in flight (the
    /// runtime's `S_FALSE`). Call it from an exception callback.
    ///
    /// Not allowed for a profiler loaded by attach: the runtime answers
    /// `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`.
    pub fn notified_exception_clause_info(&self) -> Result<Option<ExceptionClauseInfo>> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetNotifiedExceptionClauseInfo")?;
        let mut info = sys::COR_PRF_EX_CLAUSE_INFO::default();
        let hr = check_success(
            // SAFETY: [plain-call] valid out pointer to a zeroed struct.
            unsafe { i2.GetNotifiedExceptionClauseInfo(&mut info) },
            "ICorProfilerInfo2::GetNotifiedExceptionClauseInfo",
        )?;
        if hr.0 != 0 || info.clauseType == sys::COR_PRF_CLAUSE_NONE {
            return Ok(None);
        }
        let clause_type = match info.clauseType {
            sys::COR_PRF_CLAUSE_FILTER => ClauseType::Filter,
            sys::COR_PRF_CLAUSE_CATCH => ClauseType::Catch,
            sys::COR_PRF_CLAUSE_FINALLY => ClauseType::Finally,
            o => ClauseType::Unknown(o),
        };
        Ok(Some(ExceptionClauseInfo {
            clause_type,
            program_counter: info.programCounter,
            frame_pointer: info.framePointer,
            shadow_stack_pointer: info.shadowStackPointer,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::FakeRuntime;

    #[test]
    fn clause_is_decoded_or_none() {
        let fake = FakeRuntime::new();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        assert_eq!(info.notified_exception_clause_info().unwrap(), None);
        fake.state().exception_clause = Some(sys::COR_PRF_EX_CLAUSE_INFO {
            clauseType: sys::COR_PRF_CLAUSE_FINALLY,
            programCounter: 0x7100,
            framePointer: 0x7fff_0000,
            shadowStackPointer: 0,
        });
        let c = info.notified_exception_clause_info().unwrap().unwrap();
        assert_eq!(
            c,
            ExceptionClauseInfo {
                clause_type: ClauseType::Finally,
                program_counter: 0x7100,
                frame_pointer: 0x7fff_0000,
                shadow_stack_pointer: 0
            }
        );
    }

    #[test]
    fn refused_for_attached_profilers() {
        let fake = FakeRuntime::new();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info_attached() };
        assert!(info.is_attached());
        assert!(info
            .notified_exception_clause_info()
            .unwrap_err()
            .is_unsupported_for_attach());
    }
}
