//! A `RuntimeHandle` kept past the runtime's use of the profiler (second
//! soundness review, route 1), inside real runtimes.
//!
//! On detach and after a failed `Initialize` the runtime's
//! `EEToProfInterfaceImpl` destructor releases the profiler, unloads its
//! library and deletes its `ICorProfilerInfo` object whatever references
//! remain (eetoprofinterfaceimpl.cpp). The fixture
//! (`test-profilers`, `KeptHandleProfiler`) keeps handles in threads that go
//! on calling through them. Checked: the host's exit status and output are
//! byte-identical to a run without the profiler, and every thread saw its
//! calls answered `Error::Detached` (and made them: it reports only after
//! 1,000 such answers).

use crate::attach::{start_longrun, wait_for_events, Trigger};
use clrprof_testing::harness::{Case, Scenario, Verdict};
use serde_json::Value;
use std::time::Duration;

/// Why the provider scenario does not run on .NET Core 3.1.
const NO_INFO12: &str = "EventPipe providers from a profiler need ICorProfilerInfo12 (.NET 5+); .NET Core 3.1 answers Unsupported";

/// CLSID of `KeptHandleProfiler`.
const KEPT_HANDLE: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B60}";

/// `DETACHED_CALLS` of the fixture.
const DETACHED_CALLS: u64 = 1000;

type R<T> = Result<T, Verdict>;

fn kept_records<'a>(records: &'a [Value], event: &str, thread: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["event"] == event && r["thread"] == thread)
        .collect()
}

/// The one `event` record of `thread` (`kept_handle_first_detached`, or
/// `kept_handle` after `at_least` calls answered `Detached`), written while
/// the handle says it is retired.
fn check_kept(records: &[Value], event: &str, thread: &str, at_least: u64) -> R<()> {
    let kept = kept_records(records, event, thread);
    let [r] = kept.as_slice() else {
        return Err(format!("expected one {event} record of {thread}, got {records:?}").into());
    };
    if r["detached"].as_u64().unwrap_or(0) < at_least || r["live"] != false {
        return Err(format!("{thread}: {r}").into());
    }
    Ok(())
}

/// Runs `app` (with `args`) without and with the fixture failing
/// `Initialize` while a std thread keeps its handle.
fn failed_initialize(case: &Case<'_>, app: &str, args: &[String]) -> R<()> {
    let app = case.app(app)?;
    let mut plain_spec = case.spec(&app);
    plain_spec.args = args.to_vec();
    let plain = case.run(plain_spec)?;
    plain.check_exit()?;
    let profiler = case.profiler_class("test-profilers", KEPT_HANDLE)?;
    let mut spec = case.spec(&app).profiler(profiler);
    spec.args = args.to_vec();
    let kept = case.run(spec)?;
    if kept.exit != plain.exit {
        return Err(format!(
            "exit {:?} with the profiler, {:?} without; stderr: {}",
            kept.exit, plain.exit, kept.stderr
        )
        .into());
    }
    if kept.stdout != plain.stdout {
        return Err(format!(
            "app output changed: {:?} instead of {:?}",
            kept.stdout, plain.stdout
        )
        .into());
    }
    if kept.events("initialize").count() != 1 {
        return Err(format!("the fixture's Initialize did not run: {:?}", kept.records).into());
    }
    // The thread was calling before Initialize returned; the app may end
    // before it has seen many Detached answers, but it saw the first.
    check_kept(&kept.records, "kept_handle_first_detached", "std-keeper", 1)
        .map_err(|e| format!("{}; stderr: {}", describe(&e), kept.stderr).into())
}

/// The provider the fixture creates before failing `Initialize`.
const KEPT_PROVIDER: &str = "Clrprof-Lifecycle-Kept";

/// Initialize creates an EventPipe provider with a callback, then fails;
/// a startup session names the provider, so the runtime enables it and, at
/// exit, disables it, calling the callback's address each time after it
/// released the profiler (a fresh review of the safe surface: SIGSEGV in
/// an unmapped library on .NET 8 before the SDK pinned the library at
/// CreateInstance). The app's exit status and output must be unchanged.
fn provider_after_failed_initialize(case: &Case<'_>) -> R<()> {
    let app = case.app("hello")?;
    let trace = std::env::temp_dir().join(format!(
        "clrprof-lifecycle-{}-{}.nettrace",
        std::process::id(),
        case.leg().name
    ));
    let trace_path = if case.leg().is_wine() {
        clrprof_testing::wine::to_wine_path(&trace).map_err(|e| e.to_string())?
    } else {
        trace.display().to_string()
    };
    let session = |spec: clrprof_testing::run::RunSpec| {
        spec.env("DOTNET_EnableEventPipe", "1")
            .env(
                "DOTNET_EventPipeConfig",
                &format!("{KEPT_PROVIDER}:0xFFFFFFFF:5"),
            )
            .env("DOTNET_EventPipeOutputPath", &trace_path)
    };
    let plain = case.run(session(case.spec(&app)))?;
    plain.check_exit()?;
    let profiler = case.profiler_class("test-profilers", KEPT_HANDLE)?;
    let kept = case.run(session(
        case.spec(&app)
            .profiler(profiler)
            .env("CLRPROF_KEPT_PROVIDER", KEPT_PROVIDER),
    ))?;
    let _ = std::fs::remove_file(&trace);
    if (kept.exit, &kept.stdout) != (plain.exit, &plain.stdout) {
        return Err(format!(
            "exit {:?} and output {:?} with the profiler, {:?} and {:?} without; stderr: {}",
            kept.exit, kept.stdout, plain.exit, plain.stdout, kept.stderr
        )
        .into());
    }
    if kept.events("provider_created").count() != 1 {
        return Err(format!("the provider was not created: {:?}", kept.records).into());
    }
    // The runtime called the callback after Initialize failed (the session
    // enables the provider at startup), so the route was taken.
    if kept.events("provider_callback").count() == 0 {
        return Err(format!(
            "the runtime never called the provider callback: {:?}",
            kept.records
        )
        .into());
    }
    Ok(())
}

fn describe(v: &Verdict) -> String {
    match v {
        Verdict::Failed(m) => m.clone(),
        other => format!("{other:?}"),
    }
}

fn unload_cycles(case: &Case<'_>) -> Vec<String> {
    // Wine is an order of magnitude slower at loading assemblies.
    vec![if case.leg().is_wine() { "100" } else { "300" }.to_string()]
}

fn attach_detach(case: &Case<'_>) -> R<()> {
    let fixture = case.profiler_class("test-profilers", KEPT_HANDLE)?;
    let trigger = Trigger::for_case(case)?;
    let run = start_longrun(case, &[])?;
    let data = format!("output={}", trigger.target_path(&run.records)?);
    if let Err(r) = trigger.attach(run.pid, &fixture, &data)? {
        return Err(format!("attach failed: {}", r.message).into());
    }
    wait_for_events(&run.records, "kept_handle", 3, Duration::from_secs(60))?;
    // The app keeps running a while with the threads calling.
    std::thread::sleep(Duration::from_millis(500));
    let records = run.stop_and_check()?;
    let events: Vec<&str> = records
        .iter()
        .filter_map(|r| r["event"].as_str())
        .filter(|e| !e.starts_with("kept_handle"))
        .collect();
    let want = ["attached", "detach_requested", "detach_succeeded"];
    if events != want {
        return Err(format!("events {events:?}, expected {want:?}; records {records:?}").into());
    }
    for thread in ["std-keeper", "late-std-keeper", "late-sdk-keeper"] {
        check_kept(&records, "kept_handle_first_detached", thread, 1)?;
        check_kept(&records, "kept_handle", thread, DETACHED_CALLS)?;
    }
    // The thread started in InitializeForAttach called the runtime before
    // the detach (which answers most of them with its own refusals: a
    // profiler still initializing for attach, then detaching).
    let early = kept_records(&records, "kept_handle", "std-keeper");
    let before = early[0]["ok"].as_u64().unwrap_or(0) + early[0]["other"].as_u64().unwrap_or(0);
    if before == 0 {
        return Err(format!("std-keeper made no call before the detach: {}", early[0]).into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "lifecycle: Initialize fails with a handle kept in a std thread; allocation app unharmed",
            |case| failed_initialize(case, "alloc", &[]),
        ),
        Scenario::new(
            "lifecycle: Initialize fails with a handle kept in a std thread; collectible-code app unharmed",
            |case| failed_initialize(case, "unload", &unload_cycles(case)),
        ),
        Scenario::new(
            "lifecycle: handles kept in std and SDK threads across attach and detach answer Detached; app unharmed",
            attach_detach,
        ),
        Scenario::new(
            "lifecycle: Initialize fails after creating an EventPipe provider with a callback; a session calls it; app unharmed",
            provider_after_failed_initialize,
        )
        .exclude_leg("linux-x64-3.1", NO_INFO12)
        .exclude_leg("win-x64-3.1", NO_INFO12),
    ]
}
