//! Callback coverage on real runtimes: the event-recorder fixture records
//! every callback family while the `events` app triggers each one; the
//! records must obey the runtime's ordering rules and validity windows, and
//! match what the app says it did. The `exflow` app's exception callbacks
//! must follow the two-pass state machine and add up to its own counts.

use clrprof_testing::callbacks::{
    check_exceptions_with, check_started_finished, check_suspensions, check_validity_windows,
    ExceptionRules,
};
use clrprof_testing::csharp::CompileOptions;
use clrprof_testing::harness::{Case, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use serde_json::Value;

const RECORDER: &str = "event-recorder";

/// Optimised build, run without tiered compilation, so that the JIT's
/// inlining decisions (and `JITInlining`) happen on first compilation.
fn run_events(case: &Case<'_>, veto: Option<&str>) -> Result<(Outcome, Outcome), Verdict> {
    let app = case.app_with(
        "events",
        CompileOptions {
            optimize: true,
            ..CompileOptions::default()
        },
    )?;
    let plain = case.run(case.spec(&app).env("COMPlus_TieredCompilation", "0"))?;
    plain.check()?;
    let mut spec = case
        .spec(&app)
        .env("COMPlus_TieredCompilation", "0")
        .profiler(case.profiler(RECORDER)?);
    if let Some(callee) = veto {
        spec = spec.env("CLRPROF_VETO_INLINE", callee);
    }
    let traced = case.run(spec)?;
    traced.check()?;
    if traced.stdout != plain.stdout {
        return Err(format!(
            "app output changed under the recorder:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    traced.check_profiler_loaded()?;
    Ok((plain, traced))
}

fn violations(what: &str, v: Vec<String>) -> Result<(), Verdict> {
    if v.is_empty() {
        return Ok(());
    }
    let shown: Vec<&String> = v.iter().take(8).collect();
    Err(format!("{what}: {} violation(s), first: {shown:#?}", v.len()).into())
}

fn named<'a>(
    o: &'a Outcome,
    event: &'a str,
    name: &'a str,
) -> impl Iterator<Item = &'a Value> + 'a {
    o.events(event).filter(move |r| r["name"] == name)
}

/// The number the app printed right after `prefix` (anywhere in a line).
fn app_number(stdout: &str, prefix: &str) -> Result<u64, Verdict> {
    stdout
        .lines()
        .find_map(|l| l.find(prefix).map(|at| &l[at + prefix.len()..]))
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
        .ok_or_else(|| format!("the app printed no {prefix:?} line: {stdout:?}").into())
}

fn require(ok: bool, what: impl FnOnce() -> String) -> Result<(), Verdict> {
    if ok {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn loader_and_threads(o: &Outcome) -> Result<(), Verdict> {
    require(o.events("AppDomainCreationFinished").count() >= 1, || {
        "no AppDomainCreationFinished".into()
    })?;
    // The app's module loads twice (default context, then the collectible
    // one); the second copy's assembly and module unload, with its Plugin class.
    let is_app = |r: &&Value| {
        r["name"]
            .as_str()
            .is_some_and(|n| n.to_ascii_lowercase().ends_with("events.dll"))
    };
    let app_modules: Vec<&Value> = o.events("ModuleLoadFinished").filter(is_app).collect();
    require(app_modules.len() == 2, || {
        format!("expected the app's module to load twice, got {app_modules:?}")
    })?;
    let copy = app_modules[1]["id"].as_u64();
    let copy_assembly = o
        .events("ModuleAttachedToAssembly")
        .find(|r| r["id"].as_u64() == copy)
        .and_then(|r| r["assembly"].as_u64())
        .ok_or("no ModuleAttachedToAssembly for the collectible copy of the app")?;
    let unloaded: Vec<&str> = o
        .records
        .iter()
        .filter(|r| r["id"] == copy_assembly || r["id"].as_u64() == copy)
        .filter_map(|r| r["event"].as_str())
        .filter(|e| e.contains("Unload"))
        .collect();
    let expected: &[&str] = if pre_net5(o) {
        &[
            "ModuleUnloadStarted",
            "ModuleUnloadFinished",
            "AssemblyUnloadFinished",
        ]
    } else {
        &[
            "AssemblyUnloadStarted",
            "ModuleUnloadStarted",
            "ModuleUnloadFinished",
            "AssemblyUnloadFinished",
        ]
    };
    require(unloaded == expected, || {
        format!("unload callbacks of the collectible copy: {unloaded:?}, expected {expected:?}")
    })?;
    require(
        named(o, "ClassUnloadStarted", "Events.Plugin").count() == 1,
        || "no ClassUnloadStarted for Events.Plugin of the collectible context".into(),
    )?;
    require(o.events("ModuleAttachedToAssembly").count() >= 2, || {
        "fewer than 2 ModuleAttachedToAssembly".into()
    })?;

    // JIT: the app's methods, and ready-to-run lookups for the framework's.
    for m in [
        "Events.Program::Main",
        "Events.Program::UseTiny",
        "Events.Program::Probe",
    ] {
        require(named(o, "JITCompilationStarted", m).count() >= 1, || {
            format!("no JITCompilationStarted for {m}")
        })?;
    }
    // Threads: the named worker is created, assigned, named and destroyed.
    let renamed: Vec<u64> = named(o, "ThreadNameChanged", "events-worker")
        .filter_map(|r| r["id"].as_u64())
        .collect();
    let [worker] = renamed[..] else {
        return Err(
            format!("expected one ThreadNameChanged to events-worker, got {renamed:?}").into(),
        );
    };
    for e in [
        "ThreadCreated",
        "ThreadAssignedToOSThread",
        "ThreadDestroyed",
    ] {
        require(o.events(e).any(|r| r["id"] == worker), || {
            format!("no {e} for the events-worker thread {worker:#x}")
        })?;
    }

    // Transitions: the P/Invoke is a Call out and a Return back, one thread.
    let pinvoke = |e: &str, reason: &str| -> Option<u64> {
        o.events(e)
            .find(|r| {
                r["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("Events.Native::GetPid"))
                    && r["reason"] == reason
            })
            .and_then(|r| r["t"].as_u64())
    };
    let call = pinvoke("ManagedToUnmanagedTransition", "Call");
    let ret = pinvoke("UnmanagedToManagedTransition", "Return");
    require(call.is_some() && call == ret, || {
        format!("P/Invoke transitions: call on thread {call:?}, return on {ret:?}")
    })?;
    Ok(())
}

fn gc_and_objects(o: &Outcome) -> Result<(), Verdict> {
    let k = app_number(&o.stdout, "tracked allocated = ")?;
    let finalized = app_number(&o.stdout, "finalized = ")?;
    let handles = app_number(&o.stdout, "handles made and freed = ")?;

    // GCs never nest: Started and Finished alternate.
    let mut in_gc = false;
    for r in o.records.iter() {
        match r["event"].as_str() {
            Some("GarbageCollectionStarted") if !in_gc => in_gc = true,
            Some("GarbageCollectionFinished") if in_gc => in_gc = false,
            Some(e @ ("GarbageCollectionStarted" | "GarbageCollectionFinished")) => {
                return Err(format!("{e} out of order: {r}").into())
            }
            Some("MovedReferences2" | "SurvivingReferences2" | "RootReferences2") if !in_gc => {
                return Err(format!("GC data outside a GC: {r}").into())
            }
            _ => {}
        }
    }
    let induced = o
        .events("GarbageCollectionStarted")
        .filter(|r| r["reason"] == "Induced")
        .count();
    require(induced >= 6, || {
        format!("only {induced} induced GCs, the app induces at least 6")
    })?;
    require(
        o.events("MovedReferences2").count() + o.events("SurvivingReferences2").count() >= induced,
        || "fewer moved/surviving reports than GCs".into(),
    )?;
    require(
        o.events("RootReferences2")
            .any(|r| r["roots"].as_u64() > Some(0)),
        || "no RootReferences2 with roots".into(),
    )?;
    let (suspensions, v) = check_suspensions(&o.records);
    violations("runtime suspension protocol", v)?;
    require(suspensions >= induced, || {
        format!("{suspensions} suspensions for {induced} GCs")
    })?;

    let queued = o
        .events("FinalizeableObjectQueued")
        .filter(|r| r["class"] == "Events.Finalizable")
        .count() as u64;
    require(queued == finalized, || {
        format!("{queued} Events.Finalizable queued, the app finalized {finalized}")
    })?;

    let made: Vec<u64> = o
        .events("HandleCreated")
        .filter(|r| r["class"] == "Events.Handled")
        .filter_map(|r| r["id"].as_u64())
        .collect();
    require(made.len() as u64 == handles, || {
        format!(
            "{} handles to Events.Handled created, the app made {handles}",
            made.len()
        )
    })?;
    for h in &made {
        require(o.events("HandleDestroyed").any(|r| r["id"] == *h), || {
            format!("handle {h:#x} to an Events.Handled never destroyed")
        })?;
    }

    let summary = o
        .events("summary")
        .next()
        .ok_or("no summary record at shutdown")?;
    require(
        summary["Events.Tracked"] == k && summary["tracked_by_class"] == k,
        || {
            format!("ObjectAllocated / ObjectsAllocatedByClass counted {} / {} Events.Tracked, the app allocated {k}: {summary}",
            summary["Events.Tracked"], summary["tracked_by_class"])
        },
    )?;

    // The object table follows all K objects through the app's 5 GCs.
    let complete = o
        .events("tracked")
        .filter(|r| {
            r["alive"] == k
                && r["named"] == k
                && r["distinct"] == k
                && r["names_ok"] == k
                && r["errors"] == 0
                && r["id_sum"].as_u64() == Some(k * (k - 1) / 2)
        })
        .count();
    require(complete >= 5, || {
        let all: Vec<&Value> = o.events("tracked").collect();
        format!("only {complete} GCs with all {k} objects tracked, named and read back: {all:#?}")
    })?;

    let statics = o.events("statics").next().ok_or("no statics record")?;
    require(
        statics["number"] == 42
            && statics["boxed"] == 1_234_567_890_123i64
            && statics["text"] == "static text"
            && statics["numbers"] == serde_json::json!([1, 2, 3, 5, 8]),
        || format!("statics read back wrong: {statics}"),
    )?;
    Ok(())
}

/// .NET Core 3.1 reports `AssemblyUnloadFinished` without
/// `AssemblyUnloadStarted` when a collectible context unloads (seen on
/// 3.1.23 on Linux and Windows; 8.0 reports both).
fn pre_net5(o: &Outcome) -> bool {
    o.runtime_record()
        .and_then(|r| r["version"].as_str())
        .is_some_and(|v| v.starts_with("3."))
}

fn coverage(case: &Case<'_>) -> Result<(), Verdict> {
    let (_, traced) = run_events(case, None)?;
    let mut pairs = check_started_finished(&traced.records);
    if pre_net5(&traced) {
        let before = pairs.len();
        pairs.retain(|m| !m.contains("AssemblyUnloadFinished for id"));
        require(before - pairs.len() == 1, || {
            format!(
                "expected exactly one unpaired AssemblyUnloadFinished on 3.1, got {}",
                before - pairs.len()
            )
        })?;
    }
    violations("Started/Finished pairs", pairs)?;
    violations(
        "ID validity windows",
        check_validity_windows(&traced.records),
    )?;
    loader_and_threads(&traced)?;
    gc_and_objects(&traced)?;
    // Inlining allowed: Tiny is inlined into UseTiny and never compiled alone.
    require(
        traced.events("JITInlining").any(|r| {
            r["caller"] == "Events.Program::UseTiny"
                && r["callee"] == "Events.Inl::Tiny"
                && r["allowed"] == true
        }),
        || "no JITInlining of Events.Inl::Tiny into UseTiny".into(),
    )?;
    require(
        named(&traced, "JITCompilationStarted", "Events.Inl::Tiny").count() == 0,
        || "Events.Inl::Tiny was compiled on its own although it was inlined".into(),
    )?;
    Ok(())
}

fn veto(case: &Case<'_>) -> Result<(), Verdict> {
    let (_, traced) = run_events(case, Some("Events.Inl::Tiny"))?;
    require(
        traced
            .events("JITInlining")
            .any(|r| r["callee"] == "Events.Inl::Tiny" && r["allowed"] == false),
        || "the recorder was never asked about inlining Events.Inl::Tiny".into(),
    )?;
    require(
        named(&traced, "JITCompilationStarted", "Events.Inl::Tiny").count() == 1,
        || {
            "with inlining vetoed, Events.Inl::Tiny was not JIT-compiled as a method of its own"
                .into()
        },
    )?;
    Ok(())
}

/// Ready-to-run framework code is looked up through
/// `JITCachedFunctionSearchStarted`/`Finished` (only with a mask that does
/// not make the runtime ignore ready-to-run code).
fn cache_searches(case: &Case<'_>) -> Result<(), Verdict> {
    let app = case.app("hello")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let spec = case
        .spec(&app)
        .env("CLRPROF_RECORD", "cache-searches")
        .profiler(case.profiler(RECORDER)?);
    let traced = case.run(spec)?;
    traced.check()?;
    require(traced.stdout == plain.stdout, || {
        "app output changed under the recorder".into()
    })?;
    violations(
        "Started/Finished pairs",
        check_started_finished(&traced.records),
    )?;
    let found = traced
        .events("JITCachedFunctionSearchFinished")
        .filter(|r| r["found"] == true)
        .count();
    require(found >= 10, || {
        format!("only {found} methods found in ready-to-run images")
    })?;
    Ok(())
}

fn exceptions(case: &Case<'_>) -> Result<(), Verdict> {
    let app = case.app("exflow")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let traced = case.run(case.spec(&app).profiler(case.profiler(RECORDER)?))?;
    traced.check()?;
    require(traced.stdout == plain.stdout, || {
        format!(
            "app output changed:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
    })?;
    let (account, v) = check_exceptions_with(
        &traced.records,
        ExceptionRules::for_major(case.leg().major()),
    );
    violations("exception state machine", v)?;
    let thrown = app_number(&plain.stdout, "thrown = ")?;
    let caught = app_number(&plain.stdout, "caught = ")?;
    let filters = app_number(&plain.stdout, "filters = ")?;
    let finallys = app_number(&plain.stdout, "finallys = ")?;
    let got = (
        account.thrown as u64,
        account.caught as u64,
        account.filters as u64,
        account.finallys as u64,
    );
    require(got == (thrown, caught, filters, finallys), || {
        format!(
            "callbacks counted (thrown, caught, filters, finallys) = {got:?}, the app {:?}",
            (thrown, caught, filters, finallys)
        )
    })?;
    // Nested: inside a catch, the rethrow and inside a finally; the rethrow
    // abandons one catch. No frame is reported twice, on .NET 9 either (its
    // repeats are of a method whose finally throws on the normal way out,
    // which this app has not: the versions scenarios).
    require(
        account.nested == 3 && account.abandoned == 1 && account.duplicated_frames == 0,
        || {
            format!(
                "expected 3 nested exceptions, 1 abandoned handler, no frame twice, got {account:?}"
            )
        },
    )?;
    Ok(())
}

/// One exception's callbacks, on every leg (the win-x64 .NET 8 one included).
fn one_exception(case: &Case<'_>) -> Result<(), Verdict> {
    let app = case.app("throwonce")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let traced = case.run(case.spec(&app).profiler(case.profiler(RECORDER)?))?;
    traced.check()?;
    require(traced.stdout == plain.stdout, || {
        "app output changed under the recorder".into()
    })?;
    let (account, v) = check_exceptions_with(
        &traced.records,
        ExceptionRules::for_major(case.leg().major()),
    );
    violations("exception state machine", v)?;
    require(account.thrown == 1 && account.caught == 1, || {
        format!("expected one exception thrown and caught, got {account:?}")
    })?;
    let sequence: Vec<String> = traced
        .records
        .iter()
        .filter_map(|r| {
            let e = r["event"].as_str()?;
            e.starts_with("Exception").then(|| {
                format!("{e} {}", r["name"].as_str().unwrap_or(""))
                    .trim()
                    .to_string()
            })
        })
        .collect();
    let expected = [
        "ExceptionThrown",
        "ExceptionSearchFunctionEnter ThrowOnce.Program::Fail",
        "ExceptionSearchFunctionLeave",
        "ExceptionSearchFunctionEnter ThrowOnce.Program::Main",
        "ExceptionSearchCatcherFound ThrowOnce.Program::Main",
        "ExceptionSearchFunctionLeave",
        "ExceptionUnwindFunctionEnter ThrowOnce.Program::Fail",
        "ExceptionUnwindFunctionLeave",
        "ExceptionUnwindFunctionEnter ThrowOnce.Program::Main",
        "ExceptionCatcherEnter ThrowOnce.Program::Main",
        "ExceptionCatcherLeave",
    ];
    require(sequence == expected, || {
        format!("exception callbacks {sequence:#?}, expected {expected:#?}")
    })?;
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "events: every callback family, ordering and validity windows",
            coverage,
        ),
        Scenario::new(
            "events: JIT cached function searches find ready-to-run code",
            cache_searches,
        ),
        Scenario::new(
            "events: vetoing an inlining compiles the callee on its own",
            veto,
        ),
        Scenario::new(
            "events: one exception's exact callback sequence, every leg",
            one_exception,
        ),
        Scenario::new(
            "events: exception callbacks follow the two-pass state machine",
            exceptions,
        )
        .exclude_leg(
            crate::exceptions::WINE_NET8_LEG,
            crate::exceptions::WINE_NET8_REASON,
        ),
    ]
}
