//! The alloc-tracer and exception-tracer examples on real runtimes: exact
//! counts against what the test apps say they did, and the apps' output
//! unchanged by each tracer.

use clrprof_testing::callbacks::{check_exceptions_with, ExceptionRules};
use clrprof_testing::harness::{Case, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::collections::BTreeMap;

/// Runs `app` without and with `tracer` (plus `env`); the output must match.
fn traced(
    case: &Case<'_>,
    app: &str,
    tracer: &str,
    env: &[(&str, &str)],
) -> Result<(Outcome, Outcome), Verdict> {
    let app = case.app(app)?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let mut spec = case.spec(&app).profiler(case.profiler(tracer)?);
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let with = case.run(spec)?;
    with.check()?;
    if with.stdout != plain.stdout {
        return Err(format!(
            "app output changed under {tracer}:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, with.stdout
        )
        .into());
    }
    Ok((plain, with))
}

/// The number the app printed right after `prefix`.
fn number_after(stdout: &str, prefix: &str) -> Result<u64, Verdict> {
    stdout
        .lines()
        .find_map(|l| l.find(prefix).map(|at| &l[at + prefix.len()..]))
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the app printed no {prefix:?}: {stdout:?}").into())
}

fn alloc_counts(case: &Case<'_>) -> Result<(), Verdict> {
    let (plain, o) = traced(case, "alloc", "alloc-tracer", &[])?;
    let widgets = number_after(&plain.stdout, "allocated Alloc.Widget x ")?;
    let arrays = number_after(&plain.stdout, "allocated Alloc.Widget[] x ")?;
    let induced = number_after(&plain.stdout, "induced GCs = ")?;
    let by_type: BTreeMap<&str, (u64, u64)> = o
        .events("alloc")
        .filter_map(|r| {
            Some((
                r["type"].as_str()?,
                (r["count"].as_u64()?, r["bytes"].as_u64()?),
            ))
        })
        .collect();
    let (count, bytes) = by_type
        .get("Alloc.Widget")
        .copied()
        .ok_or("no alloc record for Alloc.Widget")?;
    if count != widgets {
        return Err(format!(
            "alloc-tracer counted {count} Alloc.Widget, the app allocated {widgets}"
        )
        .into());
    }
    // Every leg is 64-bit: a Widget is the object header and method-table
    // pointer (16 bytes), a reference (8) and an int padded to 8: 32 bytes.
    if bytes != count * 32 {
        return Err(format!("{bytes} bytes for {count} Alloc.Widget, expected 32 each").into());
    }
    let (count, bytes) = by_type
        .get("Alloc.Widget[]")
        .copied()
        .ok_or("no alloc record for Alloc.Widget[]")?;
    // An array of references: header, method table and length (24 bytes), then 8 per element.
    if count != arrays || bytes != arrays * (24 + 20000 * 8) {
        return Err(format!("alloc-tracer: {count} Alloc.Widget[] of {bytes} bytes, the app allocated {arrays} of 20000 references").into());
    }
    let induced_seen = o.events("gc").filter(|r| r["reason"] == "induced").count() as u64;
    if induced_seen != induced {
        return Err(format!("{induced_seen} induced gc records, the app induced {induced}").into());
    }
    if !o.events("gc").all(|r| {
        r["generations"].as_array().is_some_and(|g| !g.is_empty())
            && r["survived_bytes"].as_u64().is_some()
    }) {
        return Err(format!(
            "malformed gc record among {:?}",
            o.events("gc").collect::<Vec<_>>()
        )
        .into());
    }
    // The kept objects survive the induced GCs.
    let last = o
        .events("gc")
        .filter(|r| r["reason"] == "induced")
        .last()
        .ok_or("no induced gc")?;
    if last["survived_bytes"].as_u64() < Some(widgets * 24) {
        return Err(format!(
            "the last induced GC reports fewer surviving bytes than the kept widgets: {last}"
        )
        .into());
    }
    Ok(())
}

fn exception_counts(case: &Case<'_>) -> Result<(), Verdict> {
    let (plain, o) = traced(case, "exflow", "exception-tracer", &[])?;
    let thrown = number_after(&plain.stdout, "thrown = ")?;
    let caught = number_after(&plain.stdout, "caught = ")?;
    let records: Vec<_> = o.events("exception").collect();
    let with_catcher = records.iter().filter(|r| r["catcher"].is_string()).count() as u64;
    if records.len() as u64 != thrown || with_catcher != caught {
        return Err(format!(
            "exception-tracer: {} thrown / {with_catcher} caught, the app {thrown} / {caught}: {records:#?}",
            records.len()
        )
        .into());
    }
    let throwers: BTreeMap<&str, usize> = records.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r["thrower"].as_str().unwrap_or("")).or_default() += 1;
        m
    });
    // Every throw statement is in Throw, except the rethrow in Rethrower.
    let expected: BTreeMap<&str, usize> = [
        ("ExFlow.Program::Throw", thrown as usize - 1),
        ("ExFlow.Program::Rethrower", 1),
    ]
    .into();
    if throwers != expected || !records.iter().all(|r| r["type"] == "ExFlow.FlowException") {
        return Err(
            format!("throwers {throwers:?} (expected {expected:?}), records {records:#?}").into(),
        );
    }
    if o.events("ExceptionThrown").count() != 0 {
        return Err("callback sequence written although not asked for".into());
    }
    Ok(())
}

fn exception_types(case: &Case<'_>) -> Result<(), Verdict> {
    let (plain, o) = traced(case, "exceptions", "exception-tracer", &[])?;
    let from_app: Vec<&str> = plain
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("caught ")?.split(':').next())
        .collect();
    let from_tracer: Vec<&str> = o
        .events("exception")
        .filter_map(|r| r["type"].as_str())
        .collect();
    if from_app != from_tracer {
        return Err(
            format!("types caught by the app {from_app:?}, by the tracer {from_tracer:?}").into(),
        );
    }
    let wrong: Vec<_> = o
        .events("exception")
        .filter(|r| {
            r["thrower"] != "Exceptions.Program::Throw"
                || r["catcher"] != "Exceptions.Program::Main"
        })
        .collect();
    if !wrong.is_empty() {
        return Err(format!("thrower/catcher wrong in {wrong:#?}").into());
    }
    Ok(())
}

fn exception_sequence(case: &Case<'_>) -> Result<(), Verdict> {
    let (plain, o) = traced(
        case,
        "exflow",
        "exception-tracer",
        &[("CLRPROF_EXCEPTION_SEQUENCE", "1")],
    )?;
    let (account, violations) =
        check_exceptions_with(&o.records, ExceptionRules::for_major(case.leg().major()));
    if !violations.is_empty() {
        return Err(format!(
            "the tracer's callback sequence breaks the state machine: {violations:#?}"
        )
        .into());
    }
    let thrown = number_after(&plain.stdout, "thrown = ")?;
    if account.thrown as u64 != thrown || o.events("exception").count() as u64 != thrown {
        return Err(format!("sequence counts {account:?}, the app threw {thrown}").into());
    }
    Ok(())
}

/// One exception: runs on every leg, the win-x64 .NET 8 one included.
fn exception_once(case: &Case<'_>) -> Result<(), Verdict> {
    let (_, o) = traced(case, "throwonce", "exception-tracer", &[])?;
    let records: Vec<_> = o.events("exception").collect();
    let expected = serde_json::json!({
        "type": "System.TimeoutException",
        "thrower": "ThrowOnce.Program::Fail",
        "catcher": "ThrowOnce.Program::Main",
    });
    let matches = |r: &&serde_json::Value| {
        ["type", "thrower", "catcher"]
            .iter()
            .all(|k| r[k] == expected[k])
    };
    if records.len() != 1 || !records.iter().all(matches) {
        return Err(format!("expected one record like {expected}, got {records:#?}").into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    use crate::exceptions::{WINE_NET8_LEG, WINE_NET8_REASON};
    vec![
        Scenario::new(
            "alloc-tracer: exact counts per type, one record per GC",
            alloc_counts,
        )
        .also_on(&[clrprof_testing::manifest::ARM64_LEG]),
        Scenario::new("exception-tracer: one exception, every leg", exception_once)
            .also_on(&[clrprof_testing::manifest::ARM64_LEG]),
        Scenario::new(
            "exception-tracer: thrown and caught counts, throwers",
            exception_counts,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON)
        .also_on(&[clrprof_testing::manifest::ARM64_LEG]),
        Scenario::new(
            "exception-tracer: types match the app's own account",
            exception_types,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON),
        Scenario::new(
            "exception-tracer: the callback sequence on request",
            exception_sequence,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON),
    ]
}
