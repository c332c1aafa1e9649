//! Threads: OS identity, handle, app domain and context (`ICorProfilerInfo`,
//! `ICorProfilerInfo2`).

use crate::error::{check, Result};
use crate::ids::*;
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

impl<'s> ProfilerInfo<'s> {
    /// `GetThreadInfo`: the OS thread ID the managed thread runs on
    /// (`E_INVALIDARG` for a thread that is not, or no longer, managed).
    pub fn thread_info(&self, thread: ThreadId<'_>) -> Result<u32> {
        let mut os_id = 0u32;
        check(
            // SAFETY: [id-scope, plain-call] `thread` is valid (typed ID); valid out pointer.
            unsafe { self.raw_info1()?.GetThreadInfo(thread.as_sys(), &mut os_id) },
            "ICorProfilerInfo::GetThreadInfo",
        )?;
        Ok(os_id)
    }

    /// `GetHandleFromThread`: the runtime's OS handle of the thread. The
    /// handle stays owned by the runtime: do not close it.
    pub fn handle_from_thread(&self, thread: ThreadId<'_>) -> Result<sys::HANDLE> {
        let mut handle: sys::HANDLE = core::ptr::null_mut();
        check(
            // SAFETY: [id-scope, plain-call] `thread` is valid (typed ID); valid out pointer.
            unsafe {
                self.raw_info1()?
                    .GetHandleFromThread(thread.as_sys(), &mut handle)
            },
            "ICorProfilerInfo::GetHandleFromThread",
        )?;
        Ok(handle)
    }

    /// `GetThreadAppDomain` (Info2): the app domain `thread` runs in
    /// (`None`: the calling thread, which must be managed, else
    /// `CORPROF_E_NOT_MANAGED_THREAD`). The result borrows both `&self` and
    /// the thread ID: for the calling thread nothing the caller passed bounds
    /// it, and an app domain outlives the threads running in it.
    pub fn thread_app_domain<'a>(
        &'a self,
        thread: Option<ThreadId<'a>>,
    ) -> Result<AppDomainId<'a>> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetThreadAppDomain")?;
        let mut ad = 0usize;
        let t = thread.map_or(0, |t| t.as_sys());
        check(
            // SAFETY: [id-scope, plain-call] `t` is a valid thread (typed ID) or 0 ("current thread"); valid out pointer.
            unsafe { i2.GetThreadAppDomain(t, &mut ad) },
            "ICorProfilerInfo2::GetThreadAppDomain",
        )?;
        // SAFETY: [id-derived] a thread's app domain outlives the thread.
        Ok(unsafe { AppDomainId::from_sys(ad) })
    }

    /// `GetThreadContext`: the thread's context. CoreCLR has no remoting
    /// contexts and reports the thread's app domain as its context.
    pub fn thread_context<'a>(&self, thread: ThreadId<'a>) -> Result<ContextId<'a>> {
        let mut ctx = 0usize;
        check(
            // SAFETY: [id-scope, plain-call] `thread` is valid (typed ID); valid out pointer.
            unsafe {
                self.raw_info1()?
                    .GetThreadContext(thread.as_sys(), &mut ctx)
            },
            "ICorProfilerInfo::GetThreadContext",
        )?;
        // SAFETY: [id-derived] the context (app domain) outlives the thread.
        Ok(unsafe { ContextId::from_sys(ctx) })
    }
}

/// The in-process debugging interfaces of `ICorProfilerInfo`
/// (`GetInprocInspectionInterface`, `GetInprocInspectionIThisThread`,
/// `BeginInprocDebugging`, `EndInprocDebugging`) were removed from the runtime
/// long ago: CoreCLR (and .NET Framework 2.0+) answer every one of them with
/// `E_NOTIMPL`. They are wrapped only so that every Info method has a safe
/// form; expect [`crate::error::Error::Runtime`] with `E_NOTIMPL`.
impl<'s> ProfilerInfo<'s> {
    /// `GetInprocInspectionInterface`: obsolete, `E_NOTIMPL` on CoreCLR.
    pub fn inproc_inspection_interface(&self) -> Result<windows_core::IUnknown> {
        let mut unk: Option<windows_core::IUnknown> = None;
        check(
            // SAFETY: [com-ownership] `unk` receives an owned reference (or stays None).
            unsafe { self.raw_info1()?.GetInprocInspectionInterface(&mut unk) },
            "ICorProfilerInfo::GetInprocInspectionInterface",
        )?;
        unk.ok_or(crate::error::Error::runtime(
            sys::HRESULT(crate::error::KnownHresult::E_POINTER as i32),
            "ICorProfilerInfo::GetInprocInspectionInterface",
        ))
    }

    /// `GetInprocInspectionIThisThread`: obsolete, `E_NOTIMPL` on CoreCLR.
    pub fn inproc_inspection_ithis_thread(&self) -> Result<windows_core::IUnknown> {
        let mut unk: Option<windows_core::IUnknown> = None;
        check(
            // SAFETY: [com-ownership] `unk` receives an owned reference (or stays None).
            unsafe { self.raw_info1()?.GetInprocInspectionIThisThread(&mut unk) },
            "ICorProfilerInfo::GetInprocInspectionIThisThread",
        )?;
        unk.ok_or(crate::error::Error::runtime(
            sys::HRESULT(crate::error::KnownHresult::E_POINTER as i32),
            "ICorProfilerInfo::GetInprocInspectionIThisThread",
        ))
    }

    /// `BeginInprocDebugging`: obsolete, `E_NOTIMPL` on CoreCLR. Returns the
    /// profiler context to pass to [`end_inproc_debugging`](Self::end_inproc_debugging).
    pub fn begin_inproc_debugging(&self, this_thread_only: bool) -> Result<u32> {
        let mut ctx = 0u32;
        check(
            // SAFETY: [plain-call] plain value argument and a valid out pointer.
            unsafe {
                self.raw_info1()?
                    .BeginInprocDebugging(this_thread_only as sys::BOOL, &mut ctx)
            },
            "ICorProfilerInfo::BeginInprocDebugging",
        )?;
        Ok(ctx)
    }

    /// `EndInprocDebugging`: obsolete, `E_NOTIMPL` on CoreCLR.
    pub fn end_inproc_debugging(&self, profiler_context: u32) -> Result<()> {
        check(
            // SAFETY: [plain-call] plain value argument.
            unsafe { self.raw_info1()?.EndInprocDebugging(profiler_context) },
            "ICorProfilerInfo::EndInprocDebugging",
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::error::KnownHresult;
    use crate::testing::fake::{fake_ids, FakeRuntime, FakeThread};

    const T: usize = 0x6000;
    const AD: usize = 0x4000;

    fn world() -> FakeRuntime {
        let fake = FakeRuntime::new();
        fake.state().threads.insert(
            T,
            FakeThread {
                os_id: 4242,
                handle: 0x88,
                app_domain: AD,
                context: AD + 1,
            },
        );
        fake
    }

    #[test]
    fn thread_facts() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; t = thread_id(T), bogus = thread_id(0x1));
        assert_eq!(info.thread_info(t).unwrap(), 4242);
        assert_eq!(info.handle_from_thread(t).unwrap() as usize, 0x88);
        assert_eq!(info.thread_context(t).unwrap().as_sys(), AD + 1);
        assert_eq!(info.thread_app_domain(Some(t)).unwrap().as_sys(), AD);
        assert_eq!(
            info.thread_info(bogus).unwrap_err().hresult().0,
            KnownHresult::E_INVALIDARG as i32
        );
    }

    #[test]
    fn current_thread_app_domain_needs_a_managed_thread() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        let e = info.thread_app_domain(None).unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_NOT_MANAGED_THREAD"));
        fake.state().current_thread = Some(T);
        assert_eq!(info.thread_app_domain(None).unwrap().as_sys(), AD);
        assert_eq!(
            fake.calls_of("GetThreadAppDomain").last().unwrap().args,
            vec![0]
        );
    }

    #[test]
    fn inproc_debugging_is_gone() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        assert_eq!(
            info.inproc_inspection_interface().unwrap_err().name(),
            Some("E_NOTIMPL")
        );
        assert_eq!(
            info.inproc_inspection_ithis_thread().unwrap_err().name(),
            Some("E_NOTIMPL")
        );
        assert_eq!(
            info.begin_inproc_debugging(true).unwrap_err().name(),
            Some("E_NOTIMPL")
        );
        assert_eq!(
            info.end_inproc_debugging(7).unwrap_err().name(),
            Some("E_NOTIMPL")
        );
        assert_eq!(fake.calls_of("BeginInprocDebugging")[0].args, vec![1]);
        assert_eq!(fake.calls_of("EndInprocDebugging")[0].args, vec![7]);
    }
}
