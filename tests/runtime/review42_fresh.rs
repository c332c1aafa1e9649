//! Review 42, the fresh review (after the fourth review's fixes, by someone
//! who did not write them): safe-code probes of the
//! `review42-fresh-profiler` fixture (`#![forbid(unsafe_code)]`) on the
//! `review42fresh` app, each compared with the app run without a profiler
//! (exit status and output byte-identical), each run bounded to 30 s, on
//! linux-x64 8.0.34, 10.0.15 and 11.0.0.
//!
//! The class found (closed): **the SDK waits, or lets safe code wait, on a thread the
//! runtime's suspension waits for.** A thread in cooperative mode keeps
//! every runtime suspension (a collection, a ReJIT, a sampler's
//! `SuspendRuntime`) from completing until it returns, so a wait there for
//! anything that needs one never ends. The probe's test of a wait is a
//! sampling thread's `suspend_runtime`, waited for at most 10 s (a
//! suspension takes milliseconds otherwise; the bound turns a deadlock into
//! an answer, after which everything goes on).
//!
//! | probe | before the fix (8.0 / 10.0 / 11.0) | now |
//! |---|---|---|
//! | claim-coop: a claim's installation (`JITCompilationStarted` of `Claimed`) waits for a suspension while another thread's `ObjectAllocated` asks `is_replaced` of the method | no suspension within 10 s on all three: `is_replaced` waited on the claim table's condition variable in cooperative mode | `is_replaced` never waits (a method being installed is being replaced); the suspension completes |
//! | mask-coop: the same, the other thread dropping the JIT events from the mask | no suspension within 10 s on all three (the mask change waited for the claim, route 6's fix) | `Error::WouldDeadlock` where the thread keeps the runtime from suspending (a cooperative, unwind, handle, GC or suspension callback, or a held suspension); the count goes on |
//! | unwind-rejit, unwind-finally-rejit: `ReJitThread::request_rejit` from `ExceptionUnwindFunctionEnter` / `ExceptionUnwindFinallyEnter` | allowed to wait (`Scope::Callback`); the survey saw no suspension complete while `ExceptionUnwindFinallyEnter` (8.0), `ExceptionUnwindFunctionEnter` (10.0, 11.0) or `ExceptionCatcherLeave` (all) waited: the unwinder calls them in cooperative mode. The request itself returned here (a ReJIT of a running method needed no suspension), but review 36 saw one hang the app from `ObjectAllocated` | `Scope::Cooperative` for the unwind phase's callbacks: waits refused (`Error::WouldDeadlock`) |
//! | handle-rejit: the same from `HandleCreated` of the app's `GCHandle.Alloc` | allowed to wait; the survey saw no suspension complete while `HandleCreated` of a handle made with an object waited (all three), nor `HandleDestroyed` (10.0, 11.0) | `HandleCreated` / `HandleDestroyed` in `Scope::Cooperative` |
//! | relay-thread: each delivery of the probe's own EventPipe event relays it by a write on a new thread of the probe's, waited for | holds, and is left open: the `WouldRecurse` mark is per thread, so the chain of deliveries went as deep as the probe let it (32 levels, 31 relays, none refused, none stuck) on all three; nothing recurses on one stack, each level is a thread the profiler started and waits for, and the SDK cannot tell such a write from another thread's concurrent one | guard (pins the depth and that no write waits for another thread's delivery) |
//! | unwind-gc: `force_gc` from `ExceptionUnwindFunctionEnter` | does not hold: the runtime refuses `ForceGC` inside a callback (`CORPROF_E_UNSUPPORTED_CALL_SEQUENCE`, all three) | guard |
//! | suspend-gc: `force_gc` from `RuntimeSuspendFinished` | does not hold: the same refusal (all three) | guard |
//!
//! The survey (not run by CI): `REVIEW42_SURVEY=1 REVIEW42_WAIT_MS=1500`
//! with the unwind scenarios prints, for the first call of each exception
//! and handle callback, whether a suspension completed while it waited. On
//! all three legs the search phase's callbacks let it complete.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::time::Duration;

const CLSID: &str = "{5B2E8C41-7D3A-4F60-9E12-A4C6B8D0F201}";

/// The app run without the profiler and with the probe `probe`; fails
/// unless both end alike with the same output.
fn run_probe(case: &Case<'_>, probe: &str) -> Result<Outcome, Verdict> {
    let app = case.app("review42fresh")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let profiler = case.profiler_class("review42-fresh-profiler", CLSID)?;
    let traced = case.run(
        case.spec(&app)
            .profiler(profiler)
            .env("REVIEW42_CASE", probe)
            .env(
                "REVIEW42_WAIT_MS",
                &std::env::var("REVIEW42_WAIT_MS").unwrap_or_else(|_| "10000".into()),
            )
            .timeout(Duration::from_secs(30)),
    )?;
    let records: Vec<String> = traced.records.iter().map(|r| r.to_string()).collect();
    eprintln!("    {probe} records: {records:#?}");
    if traced.stdout != plain.stdout || format!("{:?}", traced.exit) != format!("{:?}", plain.exit)
    {
        return Err(format!(
            "the app changed under the {probe} probe:\nwithout ({:?}): {:?}\nwith    ({:?}): {:?}\nrecords: {records:#?}\nstderr: {}",
            plain.exit,
            plain.stdout,
            traced.exit,
            traced.stdout,
            tail(&traced.stderr)
        )
        .into());
    }
    traced.check_profiler_loaded()?;
    Ok(traced)
}

fn tail(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    chars[chars.len().saturating_sub(3000)..].iter().collect()
}

/// The `outcome` of the one `event` record of `callback`.
fn outcome_of(traced: &Outcome, event: &str, callback: &str) -> Result<String, Verdict> {
    let found: Vec<_> = traced
        .events(event)
        .filter(|r| r["callback"] == callback)
        .collect();
    let [r] = found[..] else {
        return Err(format!("{} `{event}` records of {callback}: {found:?}", found.len()).into());
    };
    Ok(r["outcome"].as_str().unwrap_or_default().to_string())
}

fn expect(what: &str, got: &str, ok: bool) -> CaseResult {
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: {got:?}").into())
    }
}

fn claim_coop(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(case, "claim-coop")?;
    let asked = outcome_of(&traced, "answer", "ObjectAllocated")?;
    expect(
        "is_replaced from ObjectAllocated",
        &asked,
        asked == "is_replaced true",
    )?;
    let claim = outcome_of(&traced, "claim", "JITCompilationStarted")?;
    expect(
        "the claim",
        &claim,
        claim == "Ok(Ok(\"partner true; rejit ok (); suspended\"))",
    )
}

fn mask_coop(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(case, "mask-coop")?;
    let asked = outcome_of(&traced, "answer", "ObjectAllocated")?;
    expect(
        "set_event_mask from ObjectAllocated during another thread's claim",
        &asked,
        asked.starts_with("err ICorProfilerInfo::SetEventMask refused (nothing was requested)")
            && asked.contains("a claim is in progress on another thread"),
    )?;
    let claim = outcome_of(&traced, "claim", "JITCompilationStarted")?;
    expect(
        "the claim",
        &claim,
        claim == "Ok(Ok(\"partner true; rejit ok (); suspended\"))",
    )
}

fn unwind_rejit(probe: &'static str, callback: &'static str) -> impl Fn(&Case<'_>) -> CaseResult {
    move |case| {
        if std::env::var("REVIEW42_SURVEY").is_ok() {
            survey(case)?;
        }
        let traced = run_probe(case, probe)?;
        let answer = outcome_of(&traced, "answer", callback)?;
        expect(
            "request_rejit from an unwind callback",
            &answer,
            answer.starts_with(
                "rejit err ReJitThread::request_rejit refused (nothing was requested)",
            ) && answer.contains("the runtime issues this callback in cooperative mode"),
        )
    }
}

fn handle_rejit(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(case, "handle-rejit")?;
    let answer = outcome_of(&traced, "answer", "HandleCreated")?;
    expect(
        "request_rejit from HandleCreated of a handle made with an object",
        &answer,
        answer.starts_with("err ReJitThread::request_rejit refused (nothing was requested)")
            && answer.contains("the runtime issues this callback in cooperative mode"),
    )
}

fn relay_thread(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(case, "relay-thread")?;
    let relay = outcome_of(&traced, "relay", "Shutdown")?;
    // Not refused, and not stuck: each level's write, on a thread of the
    // probe's own, delivers on that thread, whose relay starts the next;
    // the chain is as deep as the probe lets it (32), and no write waits
    // for another thread's delivery.
    expect(
        "a relay chain across the profiler's own threads",
        &relay,
        relay == "deepest 32; relayed 31; refused 0; stuck 0",
    )
}

fn force_gc_in(probe: &'static str, callback: &'static str) -> impl Fn(&Case<'_>) -> CaseResult {
    move |case| {
        let traced = run_probe(case, probe)?;
        let answer = outcome_of(&traced, "answer", callback)?;
        expect("force_gc", &answer, answer.starts_with("err "))
    }
}

/// The survey of the exception callbacks (run by hand: `REVIEW42_SURVEY=1`
/// with the unwind scenarios, `REVIEW42_WAIT_MS=1500` to keep it short):
/// prints, for the first call of each exception callback, whether a
/// runtime suspension completed while the callback waited for it.
fn survey(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(case, "survey")?;
    for r in traced.events("survey") {
        eprintln!("    survey: {} {}", r["callback"], r["outcome"]);
    }
    Ok(())
}

const LEGS: &[&str] = &["linux-x64-8.0", "linux-x64-10.0", "linux-x64-11.0"];
const WHY: &str = "the fresh review of issue 42 runs inside 8.0, 10.0 and 11.0 (CI time)";

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "review42 fresh: the claim table asked from ObjectAllocated while the claim waits for a suspension",
            claim_coop,
        )
        .only_on(LEGS, WHY),
        Scenario::new(
            "review42 fresh: the JIT events dropped from ObjectAllocated while another thread's claim waits for a suspension",
            mask_coop,
        )
        .only_on(LEGS, WHY),
        Scenario::new(
            "review42 fresh: request_rejit from ExceptionUnwindFunctionEnter",
            unwind_rejit("unwind-rejit", "ExceptionUnwindFunctionEnter"),
        )
        .only_on(LEGS, WHY),
        Scenario::new(
            "review42 fresh: request_rejit from ExceptionUnwindFinallyEnter",
            unwind_rejit("unwind-finally-rejit", "ExceptionUnwindFinallyEnter"),
        )
        .only_on(LEGS, WHY),
        Scenario::new(
            "review42 fresh: request_rejit from HandleCreated",
            handle_rejit,
        )
        .only_on(LEGS, WHY),
        Scenario::new(
            "review42 fresh: an EventPipe relay of the profiler's own event written on another thread",
            relay_thread,
        )
        .only_on(LEGS, WHY),
        Scenario::new(
            "review42 fresh: force_gc from ExceptionUnwindFunctionEnter",
            force_gc_in("unwind-gc", "ExceptionUnwindFunctionEnter"),
        )
        .only_on(LEGS, WHY),
        Scenario::new(
            "review42 fresh: force_gc from RuntimeSuspendFinished",
            force_gc_in("suspend-gc", "RuntimeSuspendFinished"),
        )
        .only_on(LEGS, WHY),
    ]
}
