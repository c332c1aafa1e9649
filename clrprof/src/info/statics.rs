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

impl<'s> ProfilerInfo<'s> {
    // provenance: field-class
    /// `GetRVAStaticAddress` (Info2): address of an RVA static (data in the
    /// module's image). Needs a managed thread (`CORPROF_E_NOT_MANAGED_THREAD`).
    pub fn rva_static_address(&self, class: ClassId<'_>, field: MdFieldDef) -> Result<*mut c_void> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetRVAStaticAddress")?;
        let mut addr = core::ptr::null_mut();
        check(
            // SAFETY: [id-scope, plain-call] `class` is valid; valid out pointer; the runtime checks the token.
            unsafe { i2.GetRVAStaticAddress(class.as_sys(), field.0, &mut addr) },
            "ICorProfilerInfo2::GetRVAStaticAddress",
        )?;
        Ok(addr)
    }

    // provenance: field-class
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
        check(
            // SAFETY: [id-scope, plain-call] IDs are valid (typed IDs); valid out pointer.
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

    // provenance: field-class
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
        check(
            // SAFETY: [id-scope, plain-call] IDs are valid (typed IDs) or 0 ("current thread"); valid out pointer.
            unsafe { i2.GetThreadStaticAddress(class.as_sys(), field.0, t, &mut addr) },
            "ICorProfilerInfo2::GetThreadStaticAddress",
        )?;
        Ok(addr)
    }

    // provenance: field-class
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
        check(
            // SAFETY: [id-scope, plain-call] IDs are valid (typed IDs) or 0 ("current thread"); valid out pointer.
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

    // provenance: field-class
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
        check(
            // SAFETY: [id-scope, plain-call] IDs are valid (typed IDs); valid out pointer.
            unsafe {
                i2.GetContextStaticAddress(class.as_sys(), field.0, context.as_sys(), &mut addr)
            },
            "ICorProfilerInfo2::GetContextStaticAddress",
        )?;
        Ok(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::KnownHresult;
    use crate::testing::fake::{
        fake_ids, FakeAppDomain, FakeClass, FakeRuntime, FakeStatic, FakeThread,
    };
    use clrprof_sys as sys;

    const C: usize = 0x3000;
    const AD: usize = 0x4000;
    const T: usize = 0x6000;
    const T2: usize = 0x6100;

    fn world() -> FakeRuntime {
        let fake = FakeRuntime::new();
        {
            let mut st = fake.state();
            st.classes.insert(C, FakeClass::default());
            st.app_domains.insert(AD, FakeAppDomain::default());
            st.threads.insert(T, FakeThread::default());
            st.threads.insert(T2, FakeThread::default());
            st.current_thread = Some(T);
            st.statics.insert(
                (C, 0x0400_0001),
                FakeStatic {
                    kind: sys::COR_PRF_FIELD_RVA_STATIC,
                    address: 0x1_0000,
                },
            );
            st.statics.insert(
                (C, 0x0400_0002),
                FakeStatic {
                    kind: sys::COR_PRF_FIELD_APP_DOMAIN_STATIC,
                    address: 0x2_0000,
                },
            );
            st.statics.insert(
                (C, 0x0400_0003),
                FakeStatic {
                    kind: sys::COR_PRF_FIELD_THREAD_STATIC,
                    address: 0x3_0000,
                },
            );
        }
        fake
    }

    #[test]
    fn each_kind_of_static_has_its_address() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C), ad = app_domain_id(AD), t = thread_id(T), t2 = thread_id(T2));
        assert_eq!(
            info.rva_static_address(c, MdFieldDef(0x0400_0001)).unwrap() as usize,
            0x1_0000
        );
        assert_eq!(
            info.app_domain_static_address(c, MdFieldDef(0x0400_0002), ad)
                .unwrap() as usize,
            0x2_0000
        );
        assert_eq!(
            info.thread_static_address(c, MdFieldDef(0x0400_0003), None)
                .unwrap() as usize,
            0x3_0000
        );
        assert_eq!(
            info.thread_static_address(c, MdFieldDef(0x0400_0003), Some(t))
                .unwrap() as usize,
            0x3_0000
        );
        assert_eq!(
            info.thread_static_address2(c, MdFieldDef(0x0400_0003), ad, Some(t2))
                .unwrap() as usize,
            0x3_0000
        );
        assert_eq!(
            info.thread_static_address2(c, MdFieldDef(0x0400_0003), ad, None)
                .unwrap() as usize,
            0x3_0000
        );
        assert_eq!(
            fake.calls_of("GetThreadStaticAddress")[0].args,
            vec![C, 0x0400_0003, 0]
        );
        assert_eq!(
            fake.calls_of("GetThreadStaticAddress2")[0].args,
            vec![C, 0x0400_0003, AD, T2]
        );
        assert_eq!(
            fake.calls_of("GetAppDomainStaticAddress")[0].args,
            vec![C, 0x0400_0002, AD]
        );
    }

    #[test]
    fn wrong_kind_or_other_thread_is_invalid() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C), t2 = thread_id(T2));
        let e = info
            .rva_static_address(c, MdFieldDef(0x0400_0002))
            .unwrap_err();
        assert_eq!(e.hresult().0, KnownHresult::E_INVALIDARG as i32);
        let e = info
            .thread_static_address(c, MdFieldDef(0x0400_0003), Some(t2))
            .unwrap_err();
        assert_eq!(e.hresult().0, KnownHresult::E_INVALIDARG as i32);
        fake.fail(
            "GetRVAStaticAddress",
            sys::HRESULT(KnownHresult::CORPROF_E_DATAINCOMPLETE as i32),
        );
        assert!(info
            .rva_static_address(c, MdFieldDef(0x0400_0001))
            .unwrap_err()
            .is_data_incomplete());
    }

    #[test]
    fn context_statics_are_not_implemented_on_coreclr() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C), ctx = context_id(AD));
        let e = info
            .context_static_address(c, MdFieldDef(0x0400_0002), ctx)
            .unwrap_err();
        assert_eq!(e.name(), Some("E_NOTIMPL"));
        assert_eq!(
            fake.calls_of("GetContextStaticAddress")[0].args,
            vec![C, 0x0400_0002, AD]
        );
    }
}
