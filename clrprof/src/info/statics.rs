//! Addresses of static fields (`ICorProfilerInfo2`, `ICorProfilerInfo3`).
//!
//! Each call returns the address of the field's storage. Reading it is
//! `unsafe` and up to the caller: the address is valid while the class is
//! loaded (and, for thread statics, while the thread lives); for statics of
//! reference type the storage holds an object reference that a GC may change.
//! The runtime answers `CORPROF_E_DATAINCOMPLETE` until the class's static
//! constructor has run, and `E_INVALIDARG` when the field is not of the kind
//! the method is for (see [`ProfilerInfo::static_field_info`]).

use crate::error::{check, Result};
use crate::ids::*;
use crate::info::ProfilerInfo;
use core::ffi::c_void;

impl ProfilerInfo {
    /// `GetRVAStaticAddress` (Info2): address of an RVA static (data in the
    /// module's image). Needs a managed thread (`CORPROF_E_NOT_MANAGED_THREAD`).
    pub fn rva_static_address(&self, class: ClassId<'_>, field: MdFieldDef) -> Result<*mut c_void> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetRVAStaticAddress")?;
        let mut addr = core::ptr::null_mut();
        // SAFETY: `class` is valid; valid out pointer; the runtime checks the token.
        check(
            unsafe { i2.GetRVAStaticAddress(class.as_sys(), field.0, &mut addr) },
            "ICorProfilerInfo2::GetRVAStaticAddress",
        )?;
        Ok(addr)
    }

    /// `GetAppDomainStaticAddress` (Info2): address of an ordinary static in
    /// `app_domain`. Literal (`const`) fields fail with
    /// `CORPROF_E_LITERALS_HAVE_NO_ADDRESS`.
    pub fn app_domain_static_address(
        &self,
        class: ClassId<'_>,
        field: MdFieldDef,
        app_domain: AppDomainId<'_>,
    ) -> Result<*mut c_void> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetAppDomainStaticAddress")?;
        let mut addr = core::ptr::null_mut();
        // SAFETY: IDs are valid (typed IDs); valid out pointer.
        check(
            unsafe {
                i2.GetAppDomainStaticAddress(
                    class.as_sys(),
                    field.0,
                    app_domain.as_sys(),
                    &mut addr,
                )
            },
            "ICorProfilerInfo2::GetAppDomainStaticAddress",
        )?;
        Ok(addr)
    }

    /// `GetThreadStaticAddress` (Info2): address of a `[ThreadStatic]` field
    /// for `thread`, which must be the calling thread (`None` means the
    /// calling thread; any other thread fails with `E_INVALIDARG`).
    pub fn thread_static_address(
        &self,
        class: ClassId<'_>,
        field: MdFieldDef,
        thread: Option<ThreadId<'_>>,
    ) -> Result<*mut c_void> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetThreadStaticAddress")?;
        let mut addr = core::ptr::null_mut();
        let t = thread.map_or(0, |t| t.as_sys());
        // SAFETY: IDs are valid (typed IDs) or 0 ("current thread"); valid out pointer.
        check(
            unsafe { i2.GetThreadStaticAddress(class.as_sys(), field.0, t, &mut addr) },
            "ICorProfilerInfo2::GetThreadStaticAddress",
        )?;
        Ok(addr)
    }

    /// `GetThreadStaticAddress2` (Info3): address of a `[ThreadStatic]` field
    /// for any managed `thread` in `app_domain` (`None`: the calling thread).
    pub fn thread_static_address2(
        &self,
        class: ClassId<'_>,
        field: MdFieldDef,
        app_domain: AppDomainId<'_>,
        thread: Option<ThreadId<'_>>,
    ) -> Result<*mut c_void> {
        let i3 = self.raw_info3("ICorProfilerInfo3::GetThreadStaticAddress2")?;
        let mut addr = core::ptr::null_mut();
        let t = thread.map_or(0, |t| t.as_sys());
        // SAFETY: IDs are valid (typed IDs) or 0 ("current thread"); valid out pointer.
        check(
            unsafe {
                i3.GetThreadStaticAddress2(
                    class.as_sys(),
                    field.0,
                    app_domain.as_sys(),
                    t,
                    &mut addr,
                )
            },
            "ICorProfilerInfo3::GetThreadStaticAddress2",
        )?;
        Ok(addr)
    }

    /// `GetContextStaticAddress` (Info2): address of a context static
    /// (.NET Framework remoting contexts). CoreCLR has no contexts and always
    /// returns `E_NOTIMPL`.
    pub fn context_static_address(
        &self,
        class: ClassId<'_>,
        field: MdFieldDef,
        context: ContextId<'_>,
    ) -> Result<*mut c_void> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetContextStaticAddress")?;
        let mut addr = core::ptr::null_mut();
        // SAFETY: IDs are valid (typed IDs); valid out pointer.
        check(
            unsafe {
                i2.GetContextStaticAddress(class.as_sys(), field.0, context.as_sys(), &mut addr)
            },
            "ICorProfilerInfo2::GetContextStaticAddress",
        )?;
        Ok(addr)
    }
}
