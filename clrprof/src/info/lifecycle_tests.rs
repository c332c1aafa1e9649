//! A `RuntimeHandle` kept beyond the runtime's use of the profiler (second
//! soundness review, route 1): driven through the SDK's callback object over
//! the fake runtime, on every path the runtime ends a profiler by.

use crate::callback::Profiler;
use crate::com::create_instance;
use crate::error::{Error, KnownHresult, Result, HRESULT};
use crate::event_mask::{EventMask, EventMasks};
use crate::info::{ProfilerInfo, RuntimeHandle};
use crate::runtimes::RuntimePolicy;
use crate::testing::fake::FakeRuntime;
use clrprof_sys::{ICorProfilerCallback2, ICorProfilerCallback3};
use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use windows_core::Interface;

/// Where the profilers below keep their handle, as a user would in a
/// `static` or a thread.
type Kept = Arc<Mutex<Option<RuntimeHandle>>>;

/// A std thread the profiler started late, and the signal that lets it call
/// (sent by the test once the callback returned to the "runtime").
type Late = Arc<
    Mutex<
        Option<(
            std::thread::JoinHandle<Result<()>>,
            std::sync::mpsc::Sender<()>,
        )>,
    >,
>;

fn run_late(late: &Late) -> Result<()> {
    let (t, go) = late.lock().unwrap().take().expect("a late thread");
    go.send(()).unwrap();
    t.join().unwrap()
}

fn kept_handle(kept: &Kept) -> RuntimeHandle {
    kept.lock()
        .unwrap()
        .clone()
        .expect("the profiler kept a handle")
}

/// How the profiler's `Initialize` ends.
#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    Ok,
    Err,
    Panic,
}

struct Keeper {
    kept: Kept,
    outcome: Outcome,
    /// Set by a std thread started from `profiler_detach_succeeded` /
    /// `shutdown`: what its first call answered.
    late_thread: Late,
}

impl Profiler for Keeper {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        *self.kept.lock().unwrap() = Some(info.handle());
        match self.outcome {
            Outcome::Ok => Ok(EventMask::MONITOR_JIT_COMPILATION.into()),
            Outcome::Err => Err(Error::Usage("declining on purpose".into())),
            Outcome::Panic => panic!("deliberate"),
        }
    }
    fn profiler_detach_succeeded(&self, info: &ProfilerInfo) {
        // Still allowed inside the callback itself.
        assert!(info.event_mask().is_ok());
        self.start_late_thread(info.handle());
    }
    fn shutdown(&self, info: &ProfilerInfo) {
        assert!(info.event_mask().is_ok());
        self.start_late_thread(info.handle());
    }
}

impl Keeper {
    fn start_late_thread(&self, handle: RuntimeHandle) {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // Runs once the callback has returned to the runtime.
            let _ = rx.recv();
            handle.event_mask().map(|_| ())
        });
        *self.late_thread.lock().unwrap() = Some((t, tx));
    }
}

struct Made {
    callback: ICorProfilerCallback2,
    kept: Kept,
    late_thread: Late,
}

fn make(outcome: Outcome) -> Made {
    let kept: Kept = Arc::default();
    let late_thread = Arc::new(Mutex::new(None));
    let profiler = Keeper {
        kept: kept.clone(),
        outcome,
        late_thread: late_thread.clone(),
    };
    let mut ppv: *mut c_void = core::ptr::null_mut();
    // SAFETY: [plain-call] valid IID and out pointer.
    let hr = unsafe { create_instance(move || profiler, &ICorProfilerCallback2::IID, &mut ppv) };
    assert_eq!(hr.0, 0);
    Made {
        // SAFETY: [com-ownership] `ppv` holds an owned ICorProfilerCallback2 reference.
        callback: unsafe { ICorProfilerCallback2::from_raw(ppv) },
        kept,
        late_thread,
    }
}

/// Every kind of call through `handle` answers `Detached` and none
/// reaches the fake.
fn assert_detached(fake: &FakeRuntime, handle: &RuntimeHandle) {
    let before = fake.state().calls.len();
    assert!(!handle.is_live());
    for e in [
        handle.current_thread().map(|_| ()).unwrap_err(),
        handle.event_mask().map(|_| ()).unwrap_err(),
        handle.set_event_mask(EventMasks::default()).unwrap_err(),
        handle.runtime_information().map(|_| ()).unwrap_err(),
        handle.force_gc().unwrap_err(),
    ] {
        assert!(matches!(e, Error::Detached { .. }), "{e:?}");
        assert_eq!(e.name(), Some("CORPROF_E_PROFILER_DETACHING"));
    }
    // A clone made now is no different.
    let clone = handle.clone();
    assert!(matches!(clone.event_mask(), Err(Error::Detached { .. })));
    assert_eq!(
        fake.state().calls.len(),
        before,
        "no call reached the runtime"
    );
}

#[test]
fn a_handle_kept_by_a_failed_initialize_is_detached() {
    for outcome in [Outcome::Err, Outcome::Panic] {
        let fake = FakeRuntime::with_info_version(10);
        let made = make(outcome);
        // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
        let hr = unsafe { made.callback.Initialize(fake.unknown().as_raw()) };
        assert!(hr.0 < 0, "Initialize failed");
        let handle = kept_handle(&made.kept);
        assert_detached(&fake, &handle);
        // The runtime releases the callback object, then the last clone
        // goes: nothing is called or released on the deleted object.
        drop(made.callback);
        assert_detached(&fake, &handle);
        drop(made.kept);
        drop(handle);
    }
}

#[test]
fn a_runtime_declined_by_the_policy_is_retired_before_any_profiler_code() {
    struct Declines(Arc<AtomicBool>);
    impl Profiler for Declines {
        fn runtime_policy() -> RuntimePolicy {
            // The fake is CoreCLR 8.0.4.
            RuntimePolicy::Major(3)
        }
        fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
            self.0.store(true, Ordering::SeqCst);
            Ok(EventMasks::default())
        }
    }
    let fake = FakeRuntime::new();
    let ran = Arc::new(AtomicBool::new(false));
    let profiler = Declines(ran.clone());
    let mut ppv: *mut c_void = core::ptr::null_mut();
    // SAFETY: [plain-call] valid IID and out pointer.
    let hr = unsafe { create_instance(move || profiler, &ICorProfilerCallback2::IID, &mut ppv) };
    assert_eq!(hr.0, 0);
    // SAFETY: [com-ownership] an owned reference from create_instance.
    let cb = unsafe { ICorProfilerCallback2::from_raw(ppv) };
    // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
    let hr = unsafe { cb.Initialize(fake.unknown().as_raw()) };
    assert_eq!(
        hr.0,
        KnownHresult::CORPROF_E_PROFILER_CANCEL_ACTIVATION as i32
    );
    assert!(!ran.load(Ordering::SeqCst), "no profiler code ran");
    // Callbacks after a decline reach nothing (the runtime sends none).
    // SAFETY: [test-fake, plain-call] plain values.
    assert_eq!(unsafe { cb.JITCompilationStarted(0x1234, 1) }.0, 0);
    assert_eq!(fake.call_count("SetEventMask"), 0);
}

#[test]
fn a_handle_kept_past_detach_is_detached_and_late_threads_are_refused() {
    let fake = FakeRuntime::with_info_version(10);
    let made = make(Outcome::Ok);
    // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
    let hr = unsafe { made.callback.Initialize(fake.unknown().as_raw()) };
    assert_eq!(hr.0, 0);
    let handle = kept_handle(&made.kept);
    assert!(handle.is_live());
    assert!(handle.event_mask().is_ok());
    let cb3: ICorProfilerCallback3 = made.callback.cast().unwrap();
    // SAFETY: [plain-call] no arguments.
    assert_eq!(unsafe { cb3.ProfilerDetachSucceeded() }.0, 0);
    assert_detached(&fake, &handle);
    // The runtime's last Release drops the profiler (and wakes the thread
    // it started from profiler_detach_succeeded).
    let e = run_late(&made.late_thread).unwrap_err();
    drop(cb3);
    drop(made.callback);
    assert!(matches!(e, Error::Detached { .. }), "{e:?}");
    assert_detached(&fake, &handle);
}

#[test]
fn a_handle_kept_past_shutdown_is_detached() {
    let fake = FakeRuntime::with_info_version(10);
    let made = make(Outcome::Ok);
    // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
    let hr = unsafe { made.callback.Initialize(fake.unknown().as_raw()) };
    assert_eq!(hr.0, 0);
    let handle = kept_handle(&made.kept);
    // SAFETY: [plain-call] no arguments.
    assert_eq!(unsafe { made.callback.Shutdown() }.0, 0);
    assert_detached(&fake, &handle);
    let e = run_late(&made.late_thread).unwrap_err();
    drop(made.callback);
    assert!(matches!(e, Error::Detached { .. }), "{e:?}");
}

#[test]
fn a_call_in_flight_finishes_before_detach_returns_to_the_runtime() {
    let fake = FakeRuntime::with_info_version(10);
    let made = make(Outcome::Ok);
    // SAFETY: [test-fake] the fake's IUnknown is a valid profiler-info object.
    let hr = unsafe { made.callback.Initialize(fake.unknown().as_raw()) };
    assert_eq!(hr.0, 0);
    let handle = kept_handle(&made.kept);
    // The fake blocks inside GetCurrentThreadID until released.
    let (inside_tx, inside_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (inside_tx, release_rx) = (Mutex::new(inside_tx), Mutex::new(release_rx));
    fake.on_call(move |_, method| {
        if method == "GetCurrentThreadID" {
            let _ = inside_tx.lock().unwrap().send(());
            let _ = release_rx.lock().unwrap().recv();
        }
    });
    let call_done = Arc::new(AtomicBool::new(false));
    let caller = {
        let (handle, call_done) = (handle.clone(), call_done.clone());
        std::thread::spawn(move || {
            let r = handle.current_thread();
            call_done.store(true, Ordering::SeqCst);
            r
        })
    };
    inside_rx.recv().unwrap();
    let detach_returned = Arc::new(AtomicUsize::new(0));
    let detacher = {
        let cb3: ICorProfilerCallback3 = made.callback.cast().unwrap();
        let (call_done, detach_returned) = (call_done.clone(), detach_returned.clone());
        // SAFETY (of the move): COM interface pointers of the SDK's
        // callback object are free-threaded, as the runtime uses them.
        let cb3 = SendCb(cb3);
        std::thread::spawn(move || {
            let cb3 = cb3;
            // SAFETY: [plain-call] no arguments.
            let hr = unsafe { cb3.0.ProfilerDetachSucceeded() };
            detach_returned.store(1, Ordering::SeqCst);
            (hr, call_done.load(Ordering::SeqCst))
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        detach_returned.load(Ordering::SeqCst),
        0,
        "ProfilerDetachSucceeded waits for the call in flight"
    );
    release_tx.send(()).unwrap();
    let (hr, done_before) = detacher.join().unwrap();
    assert_eq!(hr.0, 0);
    assert!(done_before, "the call finished before the runtime was told");
    // The call in flight completed with the runtime's answer (the fake's
    // for a thread it does not know), not with Detached.
    let answer = caller.join().unwrap();
    assert!(!matches!(answer, Err(Error::Detached { .. })), "{answer:?}");
    assert_eq!(fake.call_count("GetCurrentThreadID"), 1);
    assert_detached(&fake, &handle);
}

struct SendCb(ICorProfilerCallback3);
// SAFETY: [free-threaded, test-fake] the callback object's methods are called by the runtime from any
// thread; the test moves one reference to one thread.
unsafe impl Send for SendCb {}

#[test]
fn clones_are_counted_and_in_callback_calls_are_not_after_retire() {
    let fake = FakeRuntime::new();
    // SAFETY: [test-fake] the fake's objects describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    let handle = info.handle();
    assert!(handle.event_mask().is_ok());
    handle.retire();
    // The scope's own handle answers Detached as well.
    assert!(matches!(info.current_thread(), Err(Error::Detached { .. })));
    assert!(matches!(
        info.current_thread_id(),
        Err(Error::Detached { .. })
    ));
    let hr = HRESULT(KnownHresult::CORPROF_E_PROFILER_DETACHING as i32);
    assert_eq!(
        info.event_mask().unwrap_err().hresult(),
        hr,
        "the code a runtime gives a detaching profiler"
    );
}

#[test]
fn a_runtime_suspension_is_resumed_before_the_runtime_is_retired() {
    let _serial = crate::thread::TEST_REGISTRY
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let fake = FakeRuntime::with_info_version(10);
    // The fake answers these two with E_NOTIMPL unless told otherwise.
    fake.fail("SuspendRuntime", HRESULT(0));
    fake.fail("ResumeRuntime", HRESULT(0));
    // SAFETY: [test-fake] the fake's objects describe memory this test owns.
    let handle = unsafe { fake.runtime_handle(false) };
    let (suspended_tx, suspended_rx) = std::sync::mpsc::channel::<()>();
    let (resume_tx, resume_rx) = std::sync::mpsc::channel::<()>();
    let sampler = crate::stackwalk::spawn_sampling_thread(&handle, "unit-test-suspender", 0, {
        move |thread| {
            let suspension = thread.suspend_runtime().expect("suspended");
            suspended_tx.send(()).unwrap();
            resume_rx.recv().unwrap();
            drop(suspension);
        }
    })
    .unwrap();
    suspended_rx.recv().unwrap();
    let retired = Arc::new(AtomicBool::new(false));
    let retirer = {
        let (handle, retired) = (handle.clone(), retired.clone());
        std::thread::spawn(move || {
            handle.retire();
            retired.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        !retired.load(Ordering::SeqCst),
        "retire waits for the suspension"
    );
    resume_tx.send(()).unwrap();
    sampler.join().unwrap().unwrap();
    retirer.join().unwrap();
    assert_eq!(fake.call_count("SuspendRuntime"), 1);
    assert_eq!(
        fake.call_count("ResumeRuntime"),
        1,
        "the suspension was resumed, not refused"
    );
    assert!(matches!(handle.event_mask(), Err(Error::Detached { .. })));
}
