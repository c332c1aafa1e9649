//! The rules that changed in .NET 9, 10 and 11, against the fake runtime
//! taught each version's documented behaviour (see the book's
//! Info-versions chapter for what is proven on real runtimes here and
//! what only in CI).

use super::*;
use crate::error::Error;
use crate::event_mask::{AttachEventMask, AttachEventMasks, EventMask, EventMasks};

/// A fake reporting CoreCLR `major`.0.0, with Info5 (`SetEventMask2`).
fn fake_of(major: u16) -> FakeRuntime {
    let fake = FakeRuntime::with_info_version(15);
    {
        let mut st = fake.state();
        st.runtime.major = major;
        st.runtime.version_string = format!("{major}.0.0");
    }
    fake
}

#[test]
fn disable_inlining_after_initialize_is_refused_with_the_versions_before_net10() {
    for major in [8u16, 9] {
        let fake = fake_of(major);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        info.set_event_mask(EventMask::MONITOR_JIT_COMPILATION.into())
            .unwrap();
        fake.state().initialized = true;
        let err = info
            .set_event_mask(
                (EventMask::MONITOR_JIT_COMPILATION | EventMask::DISABLE_INLINING).into(),
            )
            .unwrap_err();
        match &err {
            Error::RuntimeVersion { hr, called, .. } => {
                assert_eq!(hr.0 as u32, 0x8000_4005, "E_FAIL of the runtime");
                assert!(*called);
            }
            other => panic!("{major}: {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.contains(".NET 10") && text.contains("DISABLE_INLINING"),
            "{text}"
        );
        // The mask did not change.
        assert_eq!(
            fake.state().event_mask,
            EventMask::MONITOR_JIT_COMPILATION.bits()
        );
        // Another immutable flag keeps the runtime's own error.
        let err = info
            .set_event_mask(
                (EventMask::MONITOR_JIT_COMPILATION | EventMask::ENABLE_OBJECT_ALLOCATED).into(),
            )
            .unwrap_err();
        assert!(matches!(err, Error::Runtime { .. }), "{err:?}");
    }
}

#[test]
fn disable_optimizations_switches_after_initialize_from_net10() {
    for major in [10u16, 11] {
        let fake = fake_of(major);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        info.set_event_mask(EventMask::MONITOR_JIT_COMPILATION.into())
            .unwrap();
        fake.state().initialized = true;
        let on = EventMask::MONITOR_JIT_COMPILATION
            | EventMask::DISABLE_OPTIMIZATIONS
            | EventMask::DISABLE_INLINING;
        info.set_event_mask(on.into()).unwrap();
        assert_eq!(fake.state().event_mask, on.bits());
        info.set_event_mask(EventMask::MONITOR_JIT_COMPILATION.into())
            .unwrap();
        assert_eq!(
            fake.state().event_mask,
            EventMask::MONITOR_JIT_COMPILATION.bits()
        );
        // Still immutable on .NET 10.
        assert!(info
            .set_event_mask(EventMask::ENABLE_OBJECT_ALLOCATED.into())
            .is_err());
    }
}

#[test]
fn attach_mask_with_disable_flags_by_version() {
    let wanted: AttachEventMasks =
        (AttachEventMask::MONITOR_JIT_COMPILATION | AttachEventMask::DISABLE_OPTIMIZATIONS).into();
    // .NET 8: refused by the SDK before the call, naming the versions.
    let fake = fake_of(8);
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info_attached() };
    let err = info.set_event_mask(EventMasks::from(wanted)).unwrap_err();
    match &err {
        Error::RuntimeVersion { hr, called, .. } => {
            assert_eq!(
                hr.0 as u32, 0x8013_136F,
                "CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER"
            );
            assert!(!*called);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("PR 113924"), "{err}");
    assert!(
        !fake
            .state()
            .calls
            .iter()
            .any(|c| c.method.starts_with("SetEventMask")),
        "the runtime was not called"
    );
    // Without the .NET 10 flags the same runtime accepts the mask.
    info.set_event_mask(EventMask::MONITOR_JIT_COMPILATION.into())
        .unwrap();

    // .NET 10: accepted, and the runtime got exactly that mask.
    let fake = fake_of(10);
    // SAFETY: [test-fake] as above.
    let info = unsafe { fake.profiler_info_attached() };
    info.set_event_mask(EventMasks::from(wanted)).unwrap();
    assert_eq!(
        fake.state().event_mask,
        (EventMask::MONITOR_JIT_COMPILATION | EventMask::DISABLE_OPTIMIZATIONS).bits()
    );
}

#[test]
fn core_clr_31_reports_4_and_gets_the_old_rules() {
    let fake = fake_of(4);
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info_attached() };
    assert!(matches!(
        info.set_event_mask(EventMask::DISABLE_INLINING.into()),
        Err(Error::RuntimeVersion { .. })
    ));
}

#[test]
fn a_failed_walk_of_the_current_thread_keeps_the_runtimes_error_on_every_version() {
    // The ELT hooks get no ProfilerInfo, so a walk of the current thread
    // comes from a callback, where the runtime's E_FAIL is not the ELT
    // defect of dotnet/runtime issue 130220 (measured inside 3.1.3 to
    // 11.0.0: the scenario "version rules: DoStackSnapshot of the current
    // thread from an ELT enter hook"); it is reported as it is.
    use crate::stackwalk::{Walk, WalkOptions};
    for major in [4u16, 8, 9, 10, 11] {
        let fake = fake_of(major);
        fake.fail("DoStackSnapshot", HRESULT(0x8000_4005_u32 as i32));
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info_no_gc() };
        let err = info
            .walk_current_thread(WalkOptions::default(), |_| Walk::Continue)
            .unwrap_err();
        assert!(
            matches!(&err, Error::Runtime { hr, .. } if hr.0 as u32 == 0x8000_4005),
            ".NET {major}: {err:?}"
        );
    }
}
