//! Detaching the profiler from a running process.
//!
//! The runtime's rules (profiling API docs, "Profiler Detach"):
//! - detach is requested with `ICorProfilerInfo3::RequestProfilerDetach`,
//!   from any thread, usually one the profiler created; the runtime then
//!   stops issuing new callbacks, waits (first about the time the profiler
//!   said it needs, then polling) until no thread is inside a callback,
//!   calls `ProfilerDetachSucceeded`, releases the callback object (the SDK
//!   drops the user's profiler value then) and unloads the library;
//! - the runtime does not know the profiler's own threads: it unloads the
//!   library whatever they run (the SDK pins the library before any
//!   profiler code runs, so their code stays mapped, see [`crate::thread`];
//!   their calls through a kept handle answer
//!   [`Error::Detached`](crate::error::Error::Detached));
//! - a profiler that used instrumentation the runtime cannot undo cannot
//!   detach: with ELT hooks set, IL replaced by `SetILFunctionBody` or ReJIT
//!   enabled the request fails with
//!   `CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT`; after an immutable
//!   event-mask flag set in `Initialize` (e.g. `DISABLE_INLINING`) it fails
//!   with `CORPROF_E_IMMUTABLE_FLAGS_SET` (changing such a flag later with
//!   `SetEventMask` fails with a plain `E_FAIL` instead). Both were seen on
//!   .NET Core 3.1 and .NET 8 (the tests' startup-detach and conformance
//!   dynamicoptimization scenarios).
//!
//! [`request_detach`] (and [`RuntimeHandle::request_profiler_detach`], the
//! same call) encodes the thread rule with [`crate::thread`]: it refuses
//! while another profiler thread still runs; the calling profiler thread
//! itself is fine, since it holds a reference to the library until it has
//! left it.

use crate::error::Result;
use crate::info::RuntimeHandle;

/// Asks the runtime to detach this profiler (`RequestProfilerDetach`).
///
/// `expected_completion_ms` is how long the profiler expects its threads to
/// need to leave its code; the runtime waits about that long before checking.
///
/// Fails with [`Error::ThreadsRunning`](crate::error::Error::ThreadsRunning) naming the threads when threads started with
/// [`crate::thread::spawn`] (other than the caller) are still running: join
/// them first. Runtime refusals come back as [`Error::Runtime`](crate::error::Error::Runtime) with the
/// code explained, e.g. `CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT`,
/// `CORPROF_E_IMMUTABLE_FLAGS_SET` (see the module docs for what each means
/// here) or `CORPROF_E_CALLBACK3_REQUIRED`. After success callbacks may
/// still arrive until the runtime has drained them, then
/// `profiler_detach_succeeded` is the last one; when it returns the runtime
/// deletes its Info object, and every call through a kept
/// [`RuntimeHandle`] answers [`Error::Detached`](crate::error::Error::Detached)
/// from then on (calls already running finish first).
pub fn request_detach(info: &RuntimeHandle, expected_completion_ms: u32) -> Result<()> {
    info.request_profiler_detach(expected_completion_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::testing::fake::FakeRuntime;

    #[test]
    fn refused_while_another_profiler_thread_runs_then_requested() {
        let _serial = crate::thread::TEST_REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fake = FakeRuntime::new();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info_attached() };
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let worker = crate::thread::spawn("unit-test-sampler", move || {
            let _ = rx.recv();
        })
        .unwrap();
        let e = request_detach(&info, 50).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, crate::error::Error::ThreadsRunning { .. }),
            "{e:?}"
        );
        // Other tests of the crate may run SDK threads at the same time, so
        // only this one's name is certain.
        assert!(
            text.contains("still running") && text.contains("unit-test-sampler"),
            "{text}"
        );
        assert_eq!(fake.call_count("RequestProfilerDetach"), 0);
        tx.send(()).unwrap();
        worker.join().unwrap();
        let start = std::time::Instant::now();
        while !crate::thread::running_except_current().is_empty()
            && start.elapsed() < std::time::Duration::from_secs(10)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        request_detach(&info, 50).unwrap();
        assert_eq!(fake.calls_of("RequestProfilerDetach")[0].args, vec![50]);
    }

    #[test]
    fn a_running_sdk_thread_blocks_detach_through_every_entry_point() {
        let _serial = crate::thread::TEST_REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fake = FakeRuntime::new();
        // Both ways of requesting a detach apply the rule (before the fix,
        // RuntimeHandle::request_profiler_detach went straight to the
        // runtime).
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let handle = unsafe { fake.runtime_handle(true) };
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let worker = crate::thread::spawn("clrprof-rejit", move || {
            let _ = rx.recv();
        })
        .unwrap();
        for result in [
            request_detach(&handle, 5),
            handle.request_profiler_detach(5),
        ] {
            match result {
                Err(Error::ThreadsRunning { threads }) => {
                    assert!(threads.iter().any(|t| t == "clrprof-rejit"), "{threads:?}")
                }
                other => panic!("detach not refused: {other:?}"),
            }
        }
        assert_eq!(fake.call_count("RequestProfilerDetach"), 0);
        tx.send(()).unwrap();
        worker.join().unwrap();
    }

    #[test]
    fn the_calling_profiler_thread_may_request() {
        let _serial = crate::thread::TEST_REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fake = FakeRuntime::new();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.runtime_handle(true) };
        let t =
            crate::thread::spawn("unit-test-detacher", move || request_detach(&info, 7)).unwrap();
        t.join().unwrap().unwrap();
        assert_eq!(fake.call_count("RequestProfilerDetach"), 1);
    }

    #[test]
    fn runtime_refusals_come_back_explained() {
        let _serial = crate::thread::TEST_REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fake = FakeRuntime::new();
        fake.fail(
            "RequestProfilerDetach",
            crate::error::HRESULT(
                crate::error::KnownHresult::CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT as i32,
            ),
        );
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let e = request_detach(&unsafe { fake.runtime_handle(true) }, 0).unwrap_err();
        assert!(e.to_string().contains("cannot detach"), "{e}");
    }

    #[test]
    fn irreversible_instrumentation_is_explained() {
        let e = Error::runtime(
            crate::error::HRESULT(
                crate::error::KnownHresult::CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT as i32,
            ),
            "ICorProfilerInfo3::RequestProfilerDetach",
        );
        let text = e.to_string();
        assert!(
            text.contains("CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT"),
            "{text}"
        );
        assert!(text.contains("cannot detach"), "{text}");
    }
}
