//! ELT hooks end to end with the call-tracer example, in both variants
//! (fast path through clrprof's trampolines, and WithInfo):
//! - exact call counts for recursive, generic, virtual and interface
//!   methods (the app counts its own calls and prints them);
//! - identical program output with and without hooks for methods with many
//!   integer, float, double and struct arguments and struct / floating-point
//!   returns (the hooks preserve argument and return registers);
//! - tail calls (explicit `tail.` calls emitted with Reflection.Emit);
//! - shadow stacks balanced after exceptions unwind hooked frames;
//! - an 8-thread stress run that loses no event;
//! - WithInfo argument and return-value decoding.

use crate::exceptions::{WINE_NET8_LEG, WINE_NET8_REASON};
use clrprof_testing::csharp::CompileOptions;
use clrprof_testing::harness::{Case, Scenario};
use clrprof_testing::run::Outcome;
use serde_json::Value;
use std::collections::BTreeMap;

type CaseResult = std::result::Result<(), clrprof_testing::harness::Verdict>;

const VARIANTS: [&str; 2] = ["fastpath", "withinfo"];

/// Runs `app` (with `args`) plainly and under call-tracer with `env`;
/// checks both runs and that stdout is identical.
fn run_pair(
    case: &Case<'_>,
    app: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::result::Result<(Outcome, Outcome), clrprof_testing::harness::Verdict> {
    run_pair_with(case, app, CompileOptions::default(), args, env)
}

/// [`run_pair`] with compiler options for the app.
fn run_pair_with(
    case: &Case<'_>,
    app: &str,
    options: CompileOptions,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::result::Result<(Outcome, Outcome), clrprof_testing::harness::Verdict> {
    let app = case.app_with(app, options)?;
    let mut plain_spec = case.spec(&app);
    plain_spec.args = args.iter().map(|a| a.to_string()).collect();
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let profiler = case.profiler("call-tracer")?;
    let mut spec = case.spec(&app).profiler(profiler);
    spec.args = args.iter().map(|a| a.to_string()).collect();
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let traced = case.run(spec)?;
    traced.check()?;
    if traced.stdout != plain.stdout {
        return Err(format!(
            "app output changed under ELT hooks ({env:?}):\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    Ok((plain, traced))
}

/// `count <method> <n>` lines of the app's output.
pub(crate) fn app_counts(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("count "))
        .filter_map(|l| {
            let (m, n) = l.rsplit_once(' ')?;
            Some((m.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// The profiler's `calls` records, by method.
pub(crate) fn traced_counts(outcome: &Outcome) -> BTreeMap<String, u64> {
    outcome
        .events("calls")
        .filter_map(|r| Some((r["method"].as_str()?.to_string(), r["count"].as_u64()?)))
        .collect()
}

pub(crate) fn check_counts(
    expected: &BTreeMap<String, u64>,
    traced: &Outcome,
    min_methods: usize,
) -> CaseResult {
    if expected.len() < min_methods {
        return Err(format!(
            "the app printed only {} counts: {expected:?}",
            expected.len()
        )
        .into());
    }
    let got = traced_counts(traced);
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(m, n)| got.get(*m) != Some(n))
        .map(|(m, n)| format!("{m}: app {n}, hooks {:?}", got.get(m)))
        .collect();
    if !wrong.is_empty() {
        return Err(format!("call counts differ: {wrong:?}").into());
    }
    // The runtime record comes first, and the calls records follow it.
    let first = traced.records.first().map(|r| r["event"].clone());
    if first != Some(Value::from("runtime")) {
        return Err(format!("the first record is {first:?}, not the runtime record").into());
    }
    Ok(())
}

/// The single `shadow` record, checked for balance.
pub(crate) fn check_shadow(
    traced: &Outcome,
    expect_unwound: bool,
) -> std::result::Result<Value, String> {
    let shadow: Vec<&Value> = traced.events("shadow").collect();
    let [s] = shadow.as_slice() else {
        return Err(format!("expected one shadow record, got {}", shadow.len()));
    };
    let n = |k: &str| s[k].as_u64().unwrap_or(u64::MAX);
    // No frame ends without its leave or unwind callback on these runtimes
    // (no runtime-async methods before .NET 11), so none is popped as
    // suspended.
    if n("depth") != 0
        || n("underflows") != 0
        || n("mismatches") != 0
        || n("suspended") != 0
        || n("untracked") != 0
    {
        return Err(format!("shadow stacks unbalanced: {s}"));
    }
    if n("pushes") != n("pops") + n("unwound") {
        return Err(format!("pushes != pops + unwound: {s}"));
    }
    if expect_unwound && n("unwound") == 0 {
        return Err(format!("no frame was popped by exception unwinding: {s}"));
    }
    Ok((*s).clone())
}

fn counts_scenario(variant: &'static str) -> Scenario {
    Scenario::new(
        &format!("elt {variant}: exact call counts, registers preserved"),
        move |case| {
            let (plain, traced) = run_pair(
                case,
                "calls",
                &["3"],
                &[("CLRPROF_ELT", variant), ("CLRPROF_CALLS_FILTER", "Calls.")],
            )?;
            check_counts(&app_counts(&plain.stdout), &traced, 16)
        },
    )
}

fn all_methods_scenario(variant: &'static str) -> Scenario {
    Scenario::new(
        &format!("elt {variant}: every method hooked, shadow stacks and call times"),
        move |case| {
            let (plain, traced) = run_pair(
                case,
                "calls",
                &["2"],
                &[("CLRPROF_ELT", variant), ("CLRPROF_CALL_TIMES", "1")],
            )?;
            check_counts(&app_counts(&plain.stdout), &traced, 16)?;
            check_shadow(&traced, false)?;
            // Times: inclusive >= exclusive, and Main's inclusive time covers
            // what it calls (summed inclusive times of a recursive method count
            // nested frames more than once, so Fib's exclusive time is compared).
            let mut inclusive = BTreeMap::new();
            for r in traced.events("calls") {
                let (Some(m), Some(i), Some(e)) = (
                    r["method"].as_str(),
                    r["inclusive_ns"].as_u64(),
                    r["exclusive_ns"].as_u64(),
                ) else {
                    return Err(format!("calls record without times: {r}").into());
                };
                if e > i {
                    return Err(format!("exclusive > inclusive: {r}").into());
                }
                inclusive.insert(m.to_string(), i);
            }
            let main = inclusive.get("Calls.Program::Main").copied().unwrap_or(0);
            let fib_exclusive = traced
                .events("calls")
                .find(|r| r["method"] == "Calls.Program::Fib")
                .and_then(|r| r["exclusive_ns"].as_u64())
                .unwrap_or(u64::MAX);
            let mix = inclusive
                .get("Calls.Program::Mix")
                .copied()
                .unwrap_or(u64::MAX);
            if main == 0 || main < fib_exclusive || main < mix {
                return Err(format!(
                "Main inclusive {main} ns < Fib exclusive {fib_exclusive} ns or Mix inclusive {mix} ns"
            )
            .into());
            }
            Ok(())
        },
    )
}

fn exceptions_scenario(variant: &'static str) -> Scenario {
    Scenario::new(
        &format!("elt {variant}: exceptions unwinding hooked frames leave shadow stacks balanced"),
        move |case| {
            let (plain, traced) = run_pair(
                case,
                "eltflow",
                &["exceptions", "12"],
                &[
                    ("CLRPROF_ELT", variant),
                    ("CLRPROF_CALLS_FILTER", "Flow."),
                    ("CLRPROF_SHADOW", "1"),
                ],
            )?;
            check_counts(&app_counts(&plain.stdout), &traced, 5)?;
            check_shadow(&traced, true)?;
            Ok(())
        },
    )
    .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON)
}

fn stress_scenario(variant: &'static str) -> Scenario {
    Scenario::new(
        &format!("elt {variant}: 8 threads lose no event and leave every stack balanced"),
        move |case| {
            let (plain, traced) = run_pair(
                case,
                "eltflow",
                &["stress", "3000"],
                &[
                    ("CLRPROF_ELT", variant),
                    ("CLRPROF_CALLS_FILTER", "Flow."),
                    ("CLRPROF_SHADOW", "1"),
                ],
            )?;
            check_counts(&app_counts(&plain.stdout), &traced, 2)?;
            let shadow = check_shadow(&traced, false)?;
            // Every enter hook of every hooked method reached a shadow stack.
            let hooked_calls: u64 = traced_counts(&traced).values().sum();
            if shadow["pushes"].as_u64() != Some(hooked_calls) {
                return Err(format!(
                    "{hooked_calls} hooked calls counted, but the shadow stacks saw {shadow}"
                )
                .into());
            }
            let work = app_counts(&plain.stdout)
                .get("Flow.Program::Work")
                .copied()
                .unwrap_or(0);
            if work < 8 * 3000 {
                return Err(format!("the app made only {work} Work calls").into());
            }
            Ok(())
        },
    )
}

fn tailcall_scenario(variant: &'static str) -> Scenario {
    Scenario::new(
        &format!("elt {variant}: explicit tail calls"),
        move |case| {
            let (plain, traced) = run_pair(
                case,
                "eltflow",
                &["tailcall", "1000"],
                &[
                    ("CLRPROF_ELT", variant),
                    ("CLRPROF_CALLS_FILTER", "Flow"),
                    ("CLRPROF_SHADOW", "1"),
                ],
            )?;
            check_counts(&app_counts(&plain.stdout), &traced, 2)?;
            check_shadow(&traced, false)?;
            let caller = traced
                .events("calls")
                .find(|r| r["method"] == "FlowTail.Gen::Caller")
                .cloned()
                .ok_or("no calls record for the dynamic method FlowTail.Gen::Caller")?;
            // The caller's frame is replaced by Target's: the runtime reports
            // that through the tailcall hook, and no leave hook follows for the
            // caller (the shadow record above is balanced: pushes == pops).
            let tailcalls = caller["tailcalls"].as_u64().unwrap_or(0);
            if tailcalls != 1000 {
                return Err(format!(
                    "{tailcalls} of 1000 calls left through the tailcall hook: {caller}"
                )
                .into());
            }
            Ok(())
        },
    )
}

/// Values the app passes in `calls 2` (rounds r = 0, 1), as the WithInfo
/// decoder must see them.
fn args_scenario() -> Scenario {
    Scenario::new(
        "elt withinfo: arguments and return values decoded",
        |case| {
            let (_, traced) = run_pair(
                case,
                "calls",
                &["2"],
                &[
                    ("CLRPROF_ELT", "withinfo"),
                    ("CLRPROF_CALLS_FILTER", "Calls.Program::"),
                    ("CLRPROF_ARGS", "Calls.Program::"),
                ],
            )?;
            let values = |event: &str, method: &str, key: &str| -> Vec<Value> {
                traced
                    .events(event)
                    .filter(|r| r["method"] == method)
                    .map(|r| {
                        if r.get("error").is_some() {
                            Value::from(format!("error: {}", r["error"]))
                        } else {
                            r[key].clone()
                        }
                    })
                    .collect()
            };
            let expect = |what: &str, got: Vec<Value>, want: Value| -> CaseResult {
                if Value::from(got.clone()) != want {
                    return Err(format!("{what}: decoded {got:?}, expected {want}").into());
                }
                Ok(())
            };
            expect(
                "Sum8 arguments",
                values("args", "Calls.Program::Sum8", "values"),
                serde_json::json!([[0, 0, 0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6, 7, 8]]),
            )?;
            expect(
                "Sum8 return values",
                values("return", "Calls.Program::Sum8", "value"),
                serde_json::json!([0, 1 - 2 + 9 - 4 + 25 - 6 + 49 - 8]),
            )?;
            expect(
                "Half arguments",
                values("args", "Calls.Program::Half", "values"),
                serde_json::json!([["1.5"], ["2.5"]]),
            )?;
            expect(
                "Half return values",
                values("return", "Calls.Program::Half", "value"),
                serde_json::json!(["0.75", "1.25"]),
            )?;
            // MakePair(r, r + 1) returns { A = 7r, B = r - 2 } as 8 bytes.
            expect(
                "MakePair return values",
                values("return", "Calls.Program::MakePair", "value"),
                serde_json::json!([{"bytes": "00000000feffffff"}, {"bytes": "07000000ffffffff"}]),
            )?;
            // Strings: read through GetStringLayout2, arguments and return values.
            expect(
                "Greet arguments",
                values("args", "Calls.Program::Greet", "values"),
                serde_json::json!([["s0", 0], ["s1", 1]]),
            )?;
            expect(
                "Greet return values",
                values("return", "Calls.Program::Greet", "value"),
                serde_json::json!(["s0!0", "s1!1"]),
            )?;
            // A generic method's parameter (!!0) cannot be typed from the
            // signature alone: it comes back as bytes of the right size.
            let identity = values("args", "Calls.Program::Identity", "values");
            if identity.len() != 8 || identity.iter().any(|v| v[0].get("bytes").is_none()) {
                return Err(
                    format!("Identity<T> arguments not reported as bytes: {identity:?}").into(),
                );
            }
            Ok(())
        },
    )
}

/// One value the `eltargs` app printed: `i4 N`, `r4 X`, `r8 X`, `str S`
/// or `struct SIZE OFFSET:TYPE:VALUE ...`.
fn check_printed_value(printed: &str, decoded: &Value) -> std::result::Result<(), String> {
    let mismatch = || format!("app printed `{printed}`, the hook decoded {decoded}");
    let (kind, rest) = printed.split_once(' ').ok_or_else(mismatch)?;
    let float = |v: &Value| v.as_str().and_then(|t| t.parse::<f64>().ok());
    let ok = match kind {
        "i4" => decoded.as_i64() == rest.parse::<i64>().ok(),
        // Compared as the type's own bits: round-trip text on both sides.
        "r4" => match (float(decoded), rest.parse::<f32>()) {
            (Some(d), Ok(p)) => (d as f32).to_bits() == p.to_bits(),
            _ => false,
        },
        "r8" => match (float(decoded), rest.parse::<f64>()) {
            (Some(d), Ok(p)) => d.to_bits() == p.to_bits(),
            _ => false,
        },
        "str" => decoded.as_str() == Some(rest),
        "struct" => {
            let hex = decoded["bytes"].as_str().ok_or_else(mismatch)?;
            let bytes: Vec<u8> = (0..hex.len() / 2)
                .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
                .collect();
            let mut items = rest.split(' ');
            let size: usize = items
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(mismatch)?;
            if bytes.len() != size {
                return Err(format!(
                    "{}: {} bytes, the struct has {size}",
                    mismatch(),
                    bytes.len()
                ));
            }
            // Each field at its offset; padding bytes are not compared.
            items.all(|field| {
                let mut parts = field.splitn(3, ':');
                let (Some(offset), Some(ty), Some(value)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    return false;
                };
                let Ok(offset) = offset.parse::<usize>() else {
                    return false;
                };
                let at = |n: usize| bytes.get(offset..offset + n);
                match ty {
                    "i4" => {
                        at(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                            == value.parse().ok()
                    }
                    "i8" => {
                        at(8).map(|b| {
                            i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                        }) == value.parse().ok()
                    }
                    "r4" => {
                        at(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                            == value.parse::<f32>().ok().map(f32::to_bits)
                    }
                    "r8" => {
                        at(8).map(|b| {
                            u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                        }) == value.parse::<f64>().ok().map(f64::to_bits)
                    }
                    _ => false,
                }
            })
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(mismatch())
    }
}

/// The shapes of the runtime's own slow-path ELT test (dotnet/runtime
/// `src/tests/profiler/elt`): every argument the callee printed and every
/// return value the caller printed equals what the WithInfo hooks decoded,
/// on every leg. On .NET Core 3.1 for Linux x64 the runtime reports every
/// struct returned in registers from the saved `rax`, so a `{float; float;
/// float}` (`xmm0`, `xmm1`), a `{double; double}`, an `{int; double}` (`rax`,
/// `xmm0`) read wrong unless the SDK reads the leave stub's saved registers
/// itself (see clrprof's `elt::legacy_stub`).
fn struct_args_scenario() -> Scenario {
    Scenario::new(
        "elt withinfo: HFA, mixed, large and integer struct arguments and return values decoded",
        |case| {
            let options = CompileOptions {
                allow_unsafe: true,
                ..CompileOptions::default()
            };
            let (plain, traced) = run_pair_with(
                case,
                "eltargs",
                options,
                &[],
                &[
                    ("CLRPROF_ELT", "withinfo"),
                    ("CLRPROF_CALLS_FILTER", "EltArgs.Program::"),
                    ("CLRPROF_ARGS", "EltArgs.Program::"),
                ],
            )?;
            // The app's calls, in order: per method, each call's printed
            // arguments, and the printed return values.
            let mut args: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
            let mut rets: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for line in plain.stdout.lines() {
                let mut words = line.splitn(3, ' ');
                match (words.next(), words.next(), words.next()) {
                    (Some("arg"), Some(method), Some(rest)) => {
                        let (index, value) = rest.split_once(' ').ok_or("bad arg line")?;
                        let calls = args.entry(method.to_string()).or_default();
                        if index == "0" {
                            calls.push(Vec::new());
                        }
                        calls
                            .last_mut()
                            .ok_or("arg line before index 0")?
                            .push(value.to_string());
                    }
                    (Some("ret"), Some(method), Some(value)) => rets
                        .entry(method.to_string())
                        .or_default()
                        .push(value.to_string()),
                    _ => return Err(format!("unexpected app line {line:?}").into()),
                }
            }
            if args.len() != 17 || args.values().any(|calls| calls.len() != 2) {
                return Err(format!(
                    "the app made {} of 17 methods' 2 calls: {args:?}",
                    args.len()
                )
                .into());
            }
            let mut wrong = Vec::new();
            for (method, calls) in &args {
                let decoded: Vec<&Value> = traced
                    .events("args")
                    .filter(|r| r["method"] == method.as_str())
                    .collect();
                if decoded.len() != calls.len() {
                    wrong.push(format!(
                        "{method}: {} calls, {} args records",
                        calls.len(),
                        decoded.len()
                    ));
                    continue;
                }
                for (call, record) in calls.iter().zip(decoded) {
                    let values = record["values"].as_array().cloned().unwrap_or_default();
                    if values.len() != call.len() {
                        wrong.push(format!("{method}: arguments {call:?}, decoded {record}"));
                        continue;
                    }
                    for (printed, value) in call.iter().zip(&values) {
                        if let Err(e) = check_printed_value(printed, value) {
                            wrong.push(format!("{method} argument: {e}"));
                        }
                    }
                }
            }
            for (method, printed) in &rets {
                let decoded: Vec<&Value> = traced
                    .events("return")
                    .filter(|r| r["method"] == method.as_str())
                    .collect();
                if decoded.len() != printed.len() {
                    wrong.push(format!(
                        "{method}: {} returns, {} return records",
                        printed.len(),
                        decoded.len()
                    ));
                    continue;
                }
                for (p, record) in printed.iter().zip(decoded) {
                    // Refused, as it must be, where the runtime reports it
                    // from rax's slot and the SDK cannot classify it.
                    if refused_on_leg(&case.leg().name, method) {
                        let error = record["error"].as_str().unwrap_or("");
                        if !error.contains("classification") || record.get("value").is_some() {
                            wrong.push(format!("{method} return value: not refused: {record}"));
                        }
                        continue;
                    }
                    if let Err(e) = check_printed_value(p, &record["value"]) {
                        wrong.push(format!("{method} return value: {e} ({record})"));
                    }
                }
            }
            if !wrong.is_empty() {
                return Err(format!("{} mismatches:\n{}", wrong.len(), wrong.join("\n")).into());
            }
            Ok(())
        },
    )
}

/// Whether the SDK must refuse `method`'s return value on `leg`: a struct
/// nesting a struct, returned in registers, which .NET Core 3.1 on Linux x64
/// reports from `rax`'s slot and the SDK does not classify.
fn refused_on_leg(leg: &str, method: &str) -> bool {
    leg == "linux-x64-3.1" && method == "EltArgs.Program::NestedFunc"
}

/// Dynamic methods whose FunctionIDs the runtime recycles, alternately
/// taking an `int` and a `string` (app `lcg`), under WithInfo hooks that
/// decode every hooked method's arguments: the app is unharmed, and any
/// dynamic method the runtime hooks is decoded with its own signature (a
/// shape of the method that had the ID before would read the int as a
/// string reference: the SDK binds shapes to its record of the function,
/// which it releases at `DynamicMethodUnloaded`).
fn lcg_args_scenario() -> Scenario {
    Scenario::new(
        "elt withinfo: recycled dynamic-method FunctionIDs of other signatures decode their own arguments",
        |case| {
            let (plain, traced) = run_pair(
                case,
                "lcg",
                &[],
                &[("CLRPROF_ELT", "withinfo"), ("CLRPROF_ARGS", "")],
            )?;
            // What the app passed to each dynamic method: "call Dyn_N i4 V"
            // or "call Dyn_N str S".
            let mut passed: BTreeMap<String, Value> = BTreeMap::new();
            for line in plain.stdout.lines() {
                let Some(rest) = line.strip_prefix("call ") else {
                    continue;
                };
                let mut w = rest.splitn(3, ' ');
                let (Some(name), Some(kind), Some(value)) = (w.next(), w.next(), w.next()) else {
                    return Err(format!("bad app line {line:?}").into());
                };
                let value = match kind {
                    "i4" => Value::from(value.parse::<i64>().map_err(|e| e.to_string())?),
                    _ => Value::from(value),
                };
                passed.insert(name.to_string(), serde_json::json!([value]));
            }
            if passed.len() != 300 {
                return Err(format!("the app reported {} of 300 dynamic-method calls", passed.len()).into());
            }
            // Every decoded call of a dynamic method: named as one the app
            // made, at most once, with the argument the app passed.
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            let mut wrong = Vec::new();
            for r in traced.events("args") {
                let method = r["method"].as_str().unwrap_or("");
                let name = method.rsplit("::").next().unwrap_or(method);
                if !name.starts_with("Dyn_") {
                    continue;
                }
                *seen.entry(name.to_string()).or_default() += 1;
                match passed.get(name) {
                    Some(want) if r.get("error").is_none() && &r["values"] == want => {}
                    want => wrong.push(format!("{method}: decoded {r}, the app passed {want:?}")),
                }
            }
            wrong.extend(seen.iter().filter(|(_, &n)| n > 1).map(|(m, n)| format!("{m} decoded {n} times, called once")));
            if !wrong.is_empty() {
                return Err(format!("{} wrong:\n{}", wrong.len(), wrong.join("\n")).into());
            }
            eprintln!(
                "    {}: {} of 300 dynamic-method calls hooked and decoded",
                case.leg().name,
                seen.len()
            );
            Ok(())
        },
    )
}

pub fn scenarios() -> Vec<Scenario> {
    use clrprof_testing::manifest::ARM64_LEG;
    let mut v = Vec::new();
    for variant in VARIANTS {
        // The arm64 tier: exact counts (the trampolines preserve the
        // argument and return registers) and shadow stacks through
        // exceptions, in both variants.
        v.push(counts_scenario(variant).also_on(&[ARM64_LEG]));
        v.push(all_methods_scenario(variant));
        v.push(exceptions_scenario(variant).also_on(&[ARM64_LEG]));
        v.push(stress_scenario(variant));
        v.push(tailcall_scenario(variant));
    }
    // WithInfo argument and return-value decoding on arm64 too.
    v.push(args_scenario().also_on(&[ARM64_LEG]));
    v.push(struct_args_scenario().also_on(&[ARM64_LEG]));
    v.push(lcg_args_scenario());
    v
}
