//! The object readers and the IL-body checks inside real runtimes (the
//! readers-profiler fixture on apps/boxes.cs):
//! - fields: a profiler that reads every field of every new object
//!   (`field_value`, then `class_from_object`, `string_text` and one more
//!   level) runs the app to the end with its output and exit status
//!   unchanged, and the fields it decodes from the boxes the app keeps
//!   (boxed `DictionaryEntry` and `CancellationToken` with a reference at
//!   offset 0, a struct with a reference after a `long`, a boxed `int` and
//!   enum, a class, and the elements of arrays of structs, one of them
//!   padded) are exactly the app's own account, and no read failed (new
//!   strings and arrays are read with their own readers). Before boxed
//!   value types' offsets were counted from the value, this died with
//!   SIGSEGV on both Linux legs; before the app churned its boxes in
//!   optimized code, .NET 10 and 11 reported half the objects (their tier-0
//!   boxes go through the C# box helper, which raises no ObjectAllocated);
//! - lying header: a ReJIT whose new body is a one-byte tiny header
//!   announcing 63 bytes is refused by the SDK with a clear error, and the
//!   method keeps its IL (the app's output is unchanged). Before the check,
//!   the JIT read past the runtime's copy.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::collections::BTreeSet;

const FIELDS: &str = "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3C01}";
const LYING: &str = "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3C02}";

/// Runs the boxes app plain and under the fixture class `clsid`; checks the
/// exit status and the output are byte-identical.
fn run_pair(case: &Case<'_>, clsid: &str) -> Result<(Outcome, Outcome), Verdict> {
    let app = case.app("boxes")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let profiler = case.profiler_class("readers-profiler", clsid)?;
    let traced = case.run(case.spec(&app).profiler(profiler))?;
    traced.check()?;
    if traced.stdout != plain.stdout || format!("{:?}", traced.exit) != format!("{:?}", plain.exit)
    {
        return Err(format!(
            "the app changed under the profiler:\nwithout ({:?}): {:?}\nwith    ({:?}): {:?}",
            plain.exit, plain.stdout, traced.exit, traced.stdout
        )
        .into());
    }
    Ok((plain, traced))
}

fn fields_scenario(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = run_pair(case, FIELDS)?;
    if let Some(e) = traced.events("kept_error").next() {
        return Err(format!("reading the kept boxes failed: {}", e["error"]).into());
    }
    let truth: BTreeSet<(String, String, String)> = plain
        .stdout
        .lines()
        .filter_map(|l| l.trim_end_matches('\r').strip_prefix("field "))
        .filter_map(|l| {
            let mut p = l.splitn(3, ' ');
            Some((p.next()?.into(), p.next()?.into(), p.next()?.into()))
        })
        .collect();
    if truth.len() != 22 {
        return Err(format!("the app printed {} fields, expected 22", truth.len()).into());
    }
    let read: BTreeSet<(String, String, String)> = traced
        .events("field")
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (s("class"), s("field"), s("value"))
        })
        .collect();
    if read != truth {
        let missing: Vec<_> = truth.difference(&read).collect();
        let extra: Vec<_> = read.difference(&truth).collect();
        return Err(format!(
            "decoded fields differ from the app's account:\nnot decoded: {missing:?}\ndecoded instead: {extra:?}"
        )
        .into());
    }
    let summary = traced
        .events("summary")
        .next()
        .ok_or("no summary record (did Shutdown run?)")?;
    let n = |k: &str| summary[k].as_u64().unwrap_or(u64::MAX);
    // The churn loop alone allocates, 2000 times, 5 boxes of at least one
    // field (DictionaryEntry with a boxed int, Pair, CancellationToken,
    // After) and a Holder of 3, in optimized code, each escaping into a
    // static.
    if n("objects") < 8000 || n("fields") < 8000 || n("kept_read") != 1 {
        return Err(format!("too little was read: {summary}").into());
    }
    // Every box is reported up to .NET 9. On .NET 10 and 11 a box made
    // through the runtime's C# box helper is not (CastHelpers.Box, since
    // dotnet/runtime PR 115134): measured on 10.0.15 and 11.0.0, the
    // optimized churn's boxes are all reported on Linux x64, while on
    // Windows x64 those of the 16-byte structs (DictionaryEntry, Pair,
    // After) are not, the boxed int and CancellationToken are.
    let major = case.leg().major();
    let boxes_wanted = if major >= 10 && case.leg().name.starts_with("win-") {
        4_000
    } else {
        10_000
    };
    if n("boxes") < boxes_wanted {
        return Err(format!(
            "{} boxes reported on .NET {major}, expected at least {boxes_wanted}: {summary}",
            n("boxes")
        )
        .into());
    }
    // Every field, string and array of every new object was read.
    if n("errors") != 0 {
        let errors: Vec<String> = traced.events("error").map(|r| r.to_string()).collect();
        return Err(format!("reads failed: {summary}; first: {errors:?}").into());
    }
    Ok(())
}

fn lying_scenario(case: &Case<'_>) -> CaseResult {
    let (_plain, traced) = run_pair(case, LYING)?;
    let request = traced
        .events("request")
        .next()
        .ok_or("the ReJIT was never requested")?;
    if request["error"] != "" {
        return Err(format!("RequestReJIT failed: {request}").into());
    }
    let refused: Vec<&serde_json::Value> = traced.events("refused").collect();
    let Some(r) = refused.first() else {
        return Err("GetReJITParameters never came for Boxes.Program::Twice".into());
    };
    let error = r["error"].as_str().unwrap_or("");
    if r["refused"] != true || !error.contains("header claims more bytes than the buffer holds") {
        return Err(format!("the lying body was not refused as expected: {r}").into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "readers: every field of every new object, boxed value types decoded as the app made them",
            fields_scenario,
        ),
        Scenario::new(
            "readers: a ReJIT body whose header overruns it is refused, the method keeps its IL",
            lying_scenario,
        ),
    ]
}
