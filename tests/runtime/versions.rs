//! Rules that changed with .NET 9, 10 and 11, measured inside the runtimes
//! (fixtures: `tests/fixtures/test-profilers/src/versions.rs`, the
//! event-recorder):
//!
//! - `DoStackSnapshot` of the current thread from inside an ELT enter hook
//!   (dotnet/runtime issue 130220): fast-path hooks answer `E_FAIL` on every
//!   runtime; WithInfo hooks walk the stack up to the hooked method on
//!   .NET Core 3.1 to .NET 9 and answer `E_FAIL` from .NET 10 on (11
//!   included, on Linux and under Wine); the same walk from
//!   `ExceptionThrown` succeeds everywhere;
//! - .NET 9's managed exception handling: walks from `ExceptionThrown` and
//!   from the first pass's `ExceptionSearchFunctionEnter` show the app's
//!   frames only (no `System.Runtime.EH` dispatch code), for exceptions
//!   thrown from inside finally and catch funclets too; walks from
//!   `ExceptionUnwindFunctionEnter` are refused on every runtime
//!   (`CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX`);
//! - a frame running a funclet reported twice (dotnet/runtime issue 123351,
//!   fixed in .NET 11 by PR 123564): a finally that throws on the normal way
//!   out of its method makes .NET 9.0.23 report the method's search and
//!   unwind frames twice each; 3.1.3, 8.0.34, 10.0.15 and 11.0.0 report
//!   them once, and a finally throwing while an exception unwinds or a
//!   catch block throwing is reported once on every runtime; the SDK's ELT
//!   shadow stacks pop each unwound frame once under the repeat (the same
//!   counts on every leg).

use crate::exceptions::{WINE_NET8_LEG, WINE_NET8_REASON};
use clrprof_testing::callbacks::{check_exceptions_with, ExceptionAccount, ExceptionRules};
use clrprof_testing::harness::{Case, CaseResult, Scenario};
use clrprof_testing::run::Outcome;
use serde_json::Value;

const ELT_WALK: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B70}";
const THROW_WALK: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B71}";

const E_FAIL: i64 = 0x8000_4005_u32 as i32 as i64;

/// Runs `app` plain and under the test-profilers class `clsid` with `env`;
/// the app's output must be the same.
fn traced(
    case: &Case<'_>,
    app: &str,
    clsid: &str,
    env: &[(&str, &str)],
) -> Result<Outcome, String> {
    let app = case.app(app).map_err(|e| format!("{e:?}"))?;
    let plain = case.run(case.spec(&app)).map_err(|e| format!("{e:?}"))?;
    plain.check().map_err(|e| format!("{e:?}"))?;
    let mut spec = case.spec(&app).profiler(
        case.profiler_class("test-profilers", clsid)
            .map_err(|e| format!("{e:?}"))?,
    );
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let o = case.run(spec).map_err(|e| format!("{e:?}"))?;
    o.check().map_err(|e| format!("{e:?}"))?;
    if o.stdout != plain.stdout {
        return Err(format!(
            "the app's output changed under the profiler:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, o.stdout
        ));
    }
    Ok(o)
}

fn frames(r: &Value) -> Vec<String> {
    r["frames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The stack of throwonce's `Fail` as a walk names it, leaf first: .NET 11
/// runs `Main` through CoreLib's `System.Environment::CallEntryPoint`
/// (`other`: how that frame is named).
fn fail_stack(case: &Case<'_>, other: &str) -> Vec<String> {
    let mut s = vec!["ThrowOnce.Program::Fail", "ThrowOnce.Program::Main"];
    if case.leg().major() >= 11 {
        s.push(other);
    }
    s.push("<native>");
    s.into_iter().map(String::from).collect()
}

fn elt_walk(case: &Case<'_>) -> CaseResult {
    let major = case.leg().major();
    for with_info in [false, true] {
        let env: &[(&str, &str)] = if with_info {
            &[("CLRPROF_ELTWALK_INFO", "1")]
        } else {
            &[]
        };
        let mode = if with_info { "WithInfo" } else { "fast path" };
        let o = traced(case, "throwonce", ELT_WALK, env)?;
        let walks: Vec<&Value> = o.events("elt_walk").collect();
        // Main's first enter, then Fail's.
        let walks_here = with_info && major < 10;
        let expected: Vec<(String, i64, Vec<String>)> = [
            ("ThrowOnce.Program::Main", {
                let mut s = fail_stack(case, "<other>");
                s.remove(0);
                s
            }),
            ("ThrowOnce.Program::Fail", fail_stack(case, "<other>")),
        ]
        .into_iter()
        .map(|(m, stack)| {
            if walks_here {
                (m.to_string(), 0, stack)
            } else {
                (m.to_string(), E_FAIL, Vec::new())
            }
        })
        .collect();
        let got: Vec<(String, i64, Vec<String>)> = walks
            .iter()
            .map(|r| {
                (
                    r["method"].as_str().unwrap_or("").to_string(),
                    r["hr"].as_i64().unwrap_or(1),
                    frames(r),
                )
            })
            .collect();
        if got != expected {
            return Err(format!(
                "DoStackSnapshot from {mode} enter hooks on {}: (method, hr, frames) {got:?}, expected {expected:?}",
                case.leg().name
            )
            .into());
        }
        // The same walk from a callback succeeds on every runtime.
        let thrown: Vec<(i64, Vec<String>)> = o
            .events("callback_walk")
            .map(|r| (r["hr"].as_i64().unwrap_or(1), frames(r)))
            .collect();
        if thrown != [(0, fail_stack(case, "<other>"))] {
            return Err(
                format!("DoStackSnapshot from ExceptionThrown ({mode} run): {thrown:?}").into(),
            );
        }
    }
    Ok(())
}

/// The funclets app's throwing method per exception, in order.
const FUNCLET_THROWERS: [&str; 5] = [
    "FromFinallyWhileUnwinding",
    "FromFinallyWhileUnwinding",
    "FromFinallyOnNormalExit",
    "FromCatch",
    "FromCatch",
];

fn dispatch_frames(case: &Case<'_>) -> CaseResult {
    let o = traced(case, "funclets", THROW_WALK, &[])?;
    let entry = case.leg().major() >= 11;
    let stack_of = |method: &str| {
        let mut s = vec![
            "Funclets.Program::Throw".to_string(),
            format!("Funclets.Program::{method}"),
            "Funclets.Program::Main".to_string(),
        ];
        if entry {
            s.push("System.Environment::CallEntryPoint".into());
        }
        s.push("<native>".into());
        s
    };
    // Walks per exception: ExceptionThrown, then one per first-pass frame
    // (the same stack: the first pass runs on top of the throw), then the
    // second pass's, which the runtime refuses.
    let mut exception = 0usize;
    let mut current: Vec<String> = Vec::new();
    let mut refused = 0usize;
    for r in o.events("throw_walk") {
        let walked = frames(r);
        match r["callback"].as_str() {
            Some("ExceptionThrown") => {
                let want = stack_of(FUNCLET_THROWERS.get(exception).copied().unwrap_or("?"));
                if walked != want || !r["error"].is_null() {
                    return Err(format!(
                        "the walk from exception {}'s ExceptionThrown: {r}, expected the app's frames {want:?}",
                        exception + 1
                    )
                    .into());
                }
                current = walked;
                exception += 1;
            }
            Some("ExceptionSearchFunctionEnter") => {
                if walked != current || !r["error"].is_null() {
                    return Err(format!(
                        "a first-pass walk of exception {exception}: {r}, expected {current:?}"
                    )
                    .into());
                }
            }
            Some("ExceptionUnwindFunctionEnter") => {
                let error = r["error"].as_str().unwrap_or("");
                if !walked.is_empty() || !error.contains("CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX") {
                    return Err(format!(
                        "a second-pass walk of exception {exception}: {r}, expected CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX"
                    )
                    .into());
                }
                refused += 1;
            }
            _ => return Err(format!("unexpected record {r}").into()),
        }
    }
    if exception != FUNCLET_THROWERS.len() || refused == 0 {
        return Err(format!(
            "{exception} exceptions walked ({refused} second-pass walks), the app throws {}",
            FUNCLET_THROWERS.len()
        )
        .into());
    }
    Ok(())
}

/// The frames a run reports twice in a row (an enter of the frame the same
/// pass just left), as (pass, function).
fn repeated_frames(records: &[Value]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut last_entered: Option<(&'static str, String)> = None;
    let mut just_left: Option<(&'static str, String)> = None;
    for r in records {
        let e = r["event"].as_str().unwrap_or("");
        let pass = match e {
            "ExceptionSearchFunctionEnter" => Some("search"),
            "ExceptionUnwindFunctionEnter" => Some("unwind"),
            _ => None,
        };
        if let Some(pass) = pass {
            let f = r["name"].as_str().unwrap_or("").to_string();
            if just_left.as_ref() == Some(&(pass, f.clone())) {
                out.push((pass, f.clone()));
            }
            last_entered = Some((pass, f));
            just_left = None;
        } else if matches!(
            e,
            "ExceptionSearchFunctionLeave" | "ExceptionUnwindFunctionLeave"
        ) {
            just_left = last_entered.take();
        } else if e.starts_with("Exception") {
            just_left = None;
        }
    }
    out
}

fn funclet_duplicates(case: &Case<'_>) -> CaseResult {
    let app = case.app("funclets")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let o = case.run(case.spec(&app).profiler(case.profiler("event-recorder")?))?;
    o.check()?;
    if o.stdout != plain.stdout {
        return Err("the app's output changed under the event recorder".into());
    }
    let major = case.leg().major();
    let (account, violations) = check_exceptions_with(&o.records, ExceptionRules::for_major(major));
    if !violations.is_empty() {
        return Err(format!("exception callbacks: {violations:#?}").into());
    }
    let duplicated = major == 9;
    // Five throws, four catch blocks entered; one finally runs in an
    // unwind (the other on the normal way out); the exceptions from the
    // finally and the catch block are nested, and abandon the ones those
    // handlers ran for.
    let want = ExceptionAccount {
        thrown: 5,
        caught: 4,
        filters: 0,
        finallys: 1,
        nested: 2,
        abandoned: 2,
        duplicated_frames: if duplicated { 2 } else { 0 },
    };
    if account != want {
        return Err(format!("exception callbacks add up to {account:?}, expected {want:?}").into());
    }
    let repeated = repeated_frames(&o.records);
    let method = "Funclets.Program::FromFinallyOnNormalExit".to_string();
    let want: Vec<(&str, String)> = if duplicated {
        vec![("search", method.clone()), ("unwind", method)]
    } else {
        Vec::new()
    };
    if repeated != want {
        return Err(format!(
            "frames reported twice in a row on .NET {major}: {repeated:?}, expected {want:?}"
        )
        .into());
    }
    Ok(())
}

/// The SDK's shadow stacks under the funclet repeat: the call-tracer's ELT
/// shadow stacks pop a frame at its `ExceptionUnwindFunctionLeave` only if
/// it was the top frame at its `ExceptionUnwindFunctionEnter`, so .NET
/// 9.0.23's second unwind report of a method whose finally throws pops
/// nothing: every stack ends balanced and the frames unwound are the same
/// on every runtime.
fn funclet_shadow_stacks(case: &Case<'_>) -> CaseResult {
    let (_, traced) = crate::elt::run_pair(
        case,
        "funclets",
        &[],
        &[
            ("CLRPROF_ELT", "fastpath"),
            ("CLRPROF_CALLS_FILTER", "Funclets."),
            ("CLRPROF_SHADOW", "1"),
        ],
    )?;
    let shadow = crate::elt::check_shadow(&traced, true)?;
    // Hooked: Main, the three case methods, five Throws and five
    // CaseException constructors; the five exceptions unwind the five
    // Throws and the three case methods (each once).
    let n = |k: &str| shadow[k].as_u64().unwrap_or(u64::MAX);
    if (n("pushes"), n("pops"), n("unwound"), n("max_depth")) != (14, 6, 8, 4) {
        return Err(format!(
            "shadow stacks (pushes, pops, unwound, max depth) should be (14, 6, 8, 4): {shadow}"
        )
        .into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "version rules: shadow stacks stay balanced under the funclet repeat",
            funclet_shadow_stacks,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON),
        Scenario::new(
            "version rules: DoStackSnapshot of the current thread from an ELT enter hook (fast path E_FAIL everywhere; WithInfo walks before .NET 10, E_FAIL from 10 on)",
            elt_walk,
        ),
        Scenario::new(
            "version rules: walks from exception callbacks show the app's frames only, funclet throws included (no .NET 9+ dispatch frames)",
            dispatch_frames,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON),
        Scenario::new(
            "version rules: a method whose finally throws is reported twice per pass on .NET 9 (issue 123351), once on 3.1, 8, 10 and 11",
            funclet_duplicates,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON),
    ]
}
