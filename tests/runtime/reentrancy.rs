//! The fourth review's re-entrancy routes (issue 42: routes 3, 4 and 6),
//! from the safe-only `reentrancy-profiler` fixture inside real runtimes,
//! each compared with the app run without a profiler (exit status and
//! output byte-identical).
//!
//! One scenario, "reentrancy: claims re-entered from their own closure, the
//! JIT count ended before the mask loses its JIT events, an EventPipe relay
//! of the profiler's own events", runs the jit app once without a profiler
//! and once under each probe:
//!
//! - Route 3: `compilations::claim` held the claim table's `Mutex` while
//!   its closure ran, and `is_replaced`, a nested `claim` (of the same
//!   method or another), `wrap` and `install_at_jit` inside it locked it
//!   again on the same thread. At 3711658 the app hung at the first claim
//!   (`Hung(60s)`) on linux-x64 3.1, 8.0, 9.0, 10.0 and 11.0 and on
//!   win-x64 8.0 and 10.0, each case alone on 8.0 and 10.0. Now the table
//!   is released before the closure runs (a method being installed is
//!   marked, and its compilations on other threads wait on a condition
//!   variable): every case answers at once, as it would outside a claim,
//!   and a mask change that would end the JIT count is refused inside a
//!   claim (`Error::WouldDeadlock`: it waits for the claims in progress).
//! - Route 6, the guard: the window (the count marked incomplete only
//!   after `SetEventMask` returned) opens once per process for a few
//!   instructions, so no run can be made to hit it; the order is pinned
//!   by `clrprof-instrumentation/tests/jit_count_window.rs` against the
//!   fake runtime (a claim made inside the `SetEventMask` call was granted
//!   at 3711658). Here: a method offered a body before the change is
//!   wrapped (its handler counts the app's 100 calls of `Add`), one
//!   offered after it is refused and runs unwrapped.
//! - Route 4: the runtime delivers a profiler session's
//!   events inside the write (`ep_session_write_event` calls the session's
//!   synchronous callback; src/native/eventpipe/ep-session.c), so relaying
//!   each delivered event with a write recursed until the stack overflowed:
//!   at 3711658 SIGSEGV on linux-x64 8.0, 9.0, 10.0 and 11.0, a hang under
//!   Wine (8.0 and 10.0), on the eventpipe app; 3.1 has no EventPipe for
//!   profilers (Info11), and the SDK must answer `Unsupported`. Now `Event::write` (and a
//!   provider's creation) refuses on a thread inside another of the
//!   profiler's own writes or creations (`Error::WouldRecurse`): relays of
//!   the runtime's events are written, relays of the profiler's own are
//!   refused, and the counts add up exactly.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::time::Duration;

type R<T> = Result<T, Verdict>;

const CLAIMS: &str = "{4D1F7A30-6C2B-4E59-8B3A-0F2E6D9C5A01}";
const RELAY: &str = "{4D1F7A30-6C2B-4E59-8B3A-0F2E6D9C5A02}";
const MASKS: &str = "{4D1F7A30-6C2B-4E59-8B3A-0F2E6D9C5A03}";

/// `app` run without a profiler (it must exit 0).
fn plain(case: &Case<'_>, app: &str) -> R<(std::path::PathBuf, Outcome)> {
    let path = case.app(app)?;
    let plain = case.run(case.spec(&path))?;
    plain.check()?;
    Ok((path, plain))
}

/// The app at `path` run with the probe `clsid` (and `env`); fails unless
/// the exit status and output are those of `plain`. A run still going
/// after 60 s is a hang.
fn traced(
    case: &Case<'_>,
    (path, plain): &(std::path::PathBuf, Outcome),
    clsid: &str,
    env: &[(&str, &str)],
) -> R<Outcome> {
    let profiler = case.profiler_class("reentrancy-profiler", clsid)?;
    let mut spec = case
        .spec(path)
        .profiler(profiler)
        .timeout(Duration::from_secs(60));
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
    Ok(traced)
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

/// Route 3: every re-entering case answers, as outside a claim.
fn claims(traced: &Outcome) -> Vec<String> {
    let mut problems = Vec::new();
    let mut want = |c: &str, ok: &dyn Fn(&str) -> bool, what: &str| match answer(traced, c) {
        Ok(a) if ok(a) => {}
        Ok(a) => problems.push(format!("{c}: {a:?}, want {what}")),
        Err(e) => problems.push(format!("{e:?}")),
    };
    // Inside its claim a method is being replaced; another is claimed by
    // its own rule (compiled: refused).
    want(
        "table",
        &|a| {
            a == "Ok(Ok(\"is_replaced true; nested Err(AlreadyReplaced); other \
                  Some(Err(AlreadyCompiled))\"))"
        },
        "is_replaced true, the nested claim refused as replaced, the other as compiled",
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
    problems
}

/// Route 4: every relay of the profiler's own event refused, every relay
/// of the runtime's written, the counts exact. A runtime without EventPipe
/// for profilers (Info12, .NET 5+) must answer `Unsupported`.
fn relay(traced: &Outcome) -> Vec<String> {
    if let Some(r) = traced.events("eventpipe_unsupported").next() {
        let e = r["error"].as_str().unwrap_or_default();
        return if e
            .starts_with("ICorProfilerInfo12::EventPipeCreateProvider needs ICorProfilerInfo12")
        {
            Vec::new()
        } else {
            vec![format!("relay: EventPipe refused: {e}")]
        };
    }
    let records: Vec<_> = traced.events("relay").collect();
    let [r] = records[..] else {
        return vec![format!("{} `relay` records: {records:?}", records.len())];
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
    if !problems.is_empty() {
        problems.push(format!("relay record {r}"));
    }
    problems
}

/// Route 6's guard: a body offered before the mask loses its JIT events
/// is installed (its handler counts the app's 100 calls of `Add`), one
/// offered after it is refused and never runs.
fn masks(traced: &Outcome) -> Vec<String> {
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
    if before == "ok ()" && set == "ok ()" && refused_after && add == Some(100) && work == Some(0) {
        Vec::new()
    } else {
        vec![format!(
            "masks: before {before:?}, set {set:?}, after {after:?}, calls Add {add:?} Work {work:?}"
        )]
    }
}

/// Routes 3, 6 and 4, on one plain run of the jit app and one run under
/// each probe.
fn routes(case: &Case<'_>) -> CaseResult {
    let app = plain(case, "jit")?;
    if !app.1.stdout.contains("counter total = 5050") {
        return Err(format!("the jit app's output changed: {:?}", app.1.stdout).into());
    }
    let mut problems = claims(&traced(case, &app, CLAIMS, &[])?);
    problems.extend(masks(&traced(case, &app, MASKS, &[])?));
    problems.extend(relay(&traced(case, &app, RELAY, &[])?));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "reentrancy: claims re-entered from their own closure, the JIT count ended before the mask loses its JIT events, an EventPipe relay of the profiler's own events (routes 3, 6 and 4)",
        routes,
    )]
}
