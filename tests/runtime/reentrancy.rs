//! The fourth review's re-entrancy routes (issue 42: routes 3, 4 and 6),
//! from the safe-only `reentrancy-profiler` fixture inside real runtimes,
//! each compared with the app run without a profiler (exit status and
//! output byte-identical).
//!
//! - "reentrancy: claims re-entered from their own closure" (route 3):
//!   `compilations::claim` held the claim table's `Mutex` while its
//!   closure ran, and `is_replaced`, a nested `claim`, `wrap` and
//!   `install_at_jit` inside it locked it again on the same thread. At
//!   3711658 the jit app hung at the first claim, on every leg (8.0.34 and
//!   10.0.15 measured: `Hung(60s)`, each case alone). Now the table is
//!   released before the closure runs (a method being installed is marked
//!   and its other compilations wait on a condition variable, outside the
//!   lock): every case answers at once, as it would outside a claim, and a
//!   mask change that would end the JIT count is refused inside a claim
//!   (`Error::WouldDeadlock`: it waits for the claims in progress).
//! - "reentrancy: an EventPipe relay of its own session's events" (route
//!   4): the runtime delivers a profiler session's events inside the write
//!   (`ep_session_write_event` calls the session's synchronous callback;
//!   src/native/eventpipe/ep-session.c), so relaying each delivered event
//!   with a write recursed until the stack overflowed: SIGSEGV at 3711658
//!   on .NET 8.0.34 and 10.0.15. Now `Event::write` refuses a write made
//!   while this thread is inside one of its own writes
//!   (`Error::WouldRecurse`): relays of the runtime's events are written,
//!   relays of the profiler's own are refused, the counts add up exactly.
//! - "reentrancy: the JIT count ends before the mask loses its JIT events"
//!   (route 6): the guard. The window (the count marked incomplete only
//!   after `SetEventMask` returned) opens once per process for a few
//!   instructions; no run can be made to hit it, so the order is pinned by
//!   `clrprof-instrumentation/tests/jit_count_window.rs` against the fake
//!   runtime. Here: a method offered a body before the change is wrapped
//!   (its handler counts the app's 100 calls), one offered after it is
//!   refused and runs unwrapped; with the JIT events kept, both are
//!   wrapped.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::time::Duration;

type R<T> = Result<T, Verdict>;

const CLAIMS: &str = "{4D1F7A30-6C2B-4E59-8B3A-0F2E6D9C5A01}";
const RELAY: &str = "{4D1F7A30-6C2B-4E59-8B3A-0F2E6D9C5A02}";
const MASKS: &str = "{4D1F7A30-6C2B-4E59-8B3A-0F2E6D9C5A03}";

/// Runs `app` with and without the probe `clsid` (with `env`), fails
/// unless the exit status and output are the same, and returns the
/// probe's run. A run still going after 60 s is a hang.
fn run_probe(
    case: &Case<'_>,
    app: &str,
    args: &[&str],
    clsid: &str,
    env: &[(&str, &str)],
) -> R<(Outcome, Outcome)> {
    let path = case.app(app)?;
    let mut plain = case.spec(&path);
    plain.args = args.iter().map(|a| a.to_string()).collect();
    let plain = case.run(plain)?;
    plain.check()?;
    let profiler = case.profiler_class("reentrancy-profiler", clsid)?;
    let mut spec = case
        .spec(&path)
        .profiler(profiler)
        .timeout(Duration::from_secs(60));
    spec.args = args.iter().map(|a| a.to_string()).collect();
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    // One case of the claims probe alone (to show each one), the relay
    // probe's session stopped in a delivery.
    for k in ["REENTRANCY_CASES", "REENTRANCY_RELAY"] {
        if let Ok(v) = std::env::var(k) {
            spec = spec.env(k, &v);
        }
    }
    let traced = case.run(spec)?;
    if traced.stdout != plain.stdout || format!("{:?}", traced.exit) != format!("{:?}", plain.exit)
    {
        return Err(format!(
            "the app changed under the probe:\nwithout ({:?}): {:?}\nwith    ({:?}): {:?}\nstderr: {}",
            plain.exit,
            plain.stdout,
            traced.exit,
            traced.stdout,
            tail(&traced.stderr)
        )
        .into());
    }
    traced.check_profiler_loaded()?;
    Ok((plain, traced))
}

fn tail(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    chars[chars.len().saturating_sub(3000)..].iter().collect()
}

/// The `answer` of the `claim` record of `case`.
fn answer<'a>(traced: &'a Outcome, case: &str) -> R<&'a str> {
    let records: Vec<_> = traced
        .events("claim")
        .filter(|r| r["case"] == case)
        .collect();
    let [r] = records[..] else {
        return Err(format!(
            "{} `claim` records of case {case}: {records:?}",
            records.len()
        )
        .into());
    };
    Ok(r["answer"].as_str().unwrap_or_default())
}

/// Route 3.
fn claims(case: &Case<'_>) -> CaseResult {
    let (_, traced) = run_probe(case, "jit", &[], CLAIMS, &[])?;
    let mut problems = Vec::new();
    let mut want = |c: &str, ok: &dyn Fn(&str) -> bool, what: &str| match answer(&traced, c) {
        Ok(a) if ok(a) => {}
        Ok(a) => problems.push(format!("{c}: {a:?}, want {what}")),
        Err(e) => problems.push(format!("{e:?}")),
    };
    // Inside its claim a method is being replaced.
    want("is_replaced", &|a| a == "Ok(Ok(true))", "Ok(Ok(true))");
    want(
        "nested_claim",
        &|a| a == "Ok(Ok(\"Err(AlreadyReplaced)\"))",
        "the nested claim refused as replaced",
    );
    want(
        "nested_claim_other",
        &|a| a == "Ok(Ok(\"Some(Err(AlreadyCompiled))\"))",
        "another (compiled) method's claim refused as compiled",
    );
    let already = |a: &str| a.starts_with("Ok(\"err ") && a.contains("it is already wrapped");
    want("wrap_inside", &already, "wrap refused: already wrapped");
    want(
        "install_inside",
        &already,
        "install refused: already wrapped",
    );
    want(
        "mask_inside",
        &|a| {
            a.starts_with("Ok(\"err ICorProfilerInfo::SetEventMask refused") && a.contains("claim")
        },
        "the mask change refused (WouldDeadlock) inside the claim",
    );
    let calls: Vec<_> = traced.events("handler").collect();
    if calls.len() != 1 || calls[0]["calls"] != 0 {
        problems.push(format!("a body was installed: {calls:?}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

/// Route 4.
fn relay(case: &Case<'_>) -> CaseResult {
    let (_, traced) = run_probe(case, "eventpipe", &[], RELAY, &[])?;
    if let Some(r) = traced.events("eventpipe_unsupported").next() {
        return Err(Verdict::Skipped(format!(
            "{} has no EventPipe for profilers (ICorProfilerInfo12, .NET 5+): {}",
            crate::heap::runtime_version(&traced),
            r["error"].as_str().unwrap_or_default()
        )));
    }
    let records: Vec<_> = traced.events("relay").collect();
    let [r] = records[..] else {
        return Err(format!("{} `relay` records: {records:?}", records.len()).into());
    };
    let n = |k: &str| r[k].as_u64().unwrap_or(u64::MAX);
    let (written, own, runtime) = (n("written"), n("own"), n("runtime"));
    let (accepted, refused, depth) = (n("accepted"), n("refused"), n("depth"));
    let mut problems = Vec::new();
    if written == 0 || runtime == 0 {
        problems.push("no event of the profiler's or none of the runtime's delivered".to_string());
    }
    // Every event written is delivered: the JIT callbacks' and the relays.
    if own != written + accepted {
        problems.push(format!(
            "own deliveries {own} != written {written} + relayed {accepted}"
        ));
    }
    // A relay of the runtime's event is written; a relay of one's own, from
    // inside the write that delivered it, is refused.
    if accepted != runtime || refused != own {
        problems.push(format!(
            "relays: {accepted} accepted for {runtime} runtime events, {refused} refused for {own} own"
        ));
    }
    if depth != 2 {
        problems.push(format!(
            "deliveries nested {depth} deep (want 2: a relay's own delivery)"
        ));
    }
    let refusal = r["refusal"].as_str().unwrap_or_default();
    if !refusal.starts_with("ICorProfilerInfo12::EventPipeWriteEvent refused") {
        problems.push(format!("refusal {refusal:?}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}; record {r}", problems.join("; ")).into())
    }
}

/// Route 6's guard.
fn masks(case: &Case<'_>) -> CaseResult {
    let mut problems = Vec::new();
    for keep in [false, true] {
        let env: &[(&str, &str)] = if keep {
            &[("REENTRANCY_MASK_KEEP", "1")]
        } else {
            &[]
        };
        let (plain, traced) = run_probe(case, "jit", &[], MASKS, env)?;
        if !plain.stdout.contains("counter total = 5050") {
            return Err(format!("the jit app's output changed: {:?}", plain.stdout).into());
        }
        let step = |s: &str| {
            traced
                .events("mask_step")
                .find(|r| r["step"] == s)
                .and_then(|r| r["answer"].as_str().map(str::to_string))
                .unwrap_or_else(|| "(none)".into())
        };
        let (before, set, after) = (step("before"), step("set_event_mask"), step("after"));
        let calls = traced
            .events("mask_calls")
            .next()
            .cloned()
            .unwrap_or_default();
        let (add, work) = (calls["add"].as_u64(), calls["work"].as_u64());
        let refused_after =
            after.starts_with("err ") && after.contains("did not see every JIT compilation");
        let ok = before == "ok ()"
            && set == "ok ()"
            && add == Some(100)
            && if keep {
                after == "ok ()" && work == Some(1)
            } else {
                refused_after && work == Some(0)
            };
        if !ok {
            problems.push(format!(
                "keep={keep}: before {before:?}, set {set:?}, after {after:?}, calls Add {add:?} Work {work:?}"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "reentrancy: claims re-entered from their own closure (route 3)",
            claims,
        ),
        Scenario::new(
            "reentrancy: an EventPipe relay of its own session's events (route 4)",
            relay,
        ),
        Scenario::new(
            "reentrancy: the JIT count ends before the mask loses its JIT events (route 6)",
            masks,
        ),
    ]
}
