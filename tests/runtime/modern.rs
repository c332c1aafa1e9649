//! The C# users write today (apps/modern.cs: async/await, Span<T> and ref
//! structs, generic virtual methods, static abstract interface members,
//! default interface methods, records, lambdas and local functions,
//! function pointers, a collectible AssemblyLoadContext unloaded), compiled
//! by Roslyn against each leg's reference assemblies, under the ELT hooks,
//! method wrapping, the sampler and the exception tracer. The app counts
//! its own calls; every count and the app's output must be what the app
//! says without a profiler. On .NET 11 the same source is also compiled with
//! runtime-async on, where the runtime (not a state machine) suspends and
//! resumes the async methods.

use crate::elt::{app_counts, check_counts, check_shadow, traced_counts};
use crate::wrap::wrapped_records;
use clrprof_testing::csharp::CompileOptions;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::manifest::ARM64_LEG;
use clrprof_testing::run::Outcome;

/// Static abstract interface members (and the C# 11 that spells them) need
/// the .NET 7 runtime.
const NEEDS_NET7: &str = "static abstract interface members need the .NET 7 runtime; \
     .NET Core 3.1 cannot load the app (its apps are the C# 7-level ones)";

/// The Wine leg whose .NET 8 hangs on a process's second managed exception.
use crate::exceptions::WINE_NET8_LEG;

/// The methods the app counts (and only those; Counter.Hit itself, the
/// state machines' MoveNext and the record's generated members are hooked
/// but not in its account).
const COUNTED: usize = 20;

fn options(runtime_async: bool) -> CompileOptions {
    CompileOptions {
        allow_unsafe: true,
        runtime_async,
        ..CompileOptions::default()
    }
}

/// Runs the modern app plain and under `tracer` with `env`; the output must
/// be identical. Returns (plain, traced).
fn pair(
    case: &Case<'_>,
    runtime_async: bool,
    args: &[&str],
    tracer: &str,
    env: &[(&str, &str)],
) -> Result<(Outcome, Outcome), Verdict> {
    pair_in(case, runtime_async, args, tracer, env).map(|(p, t, _)| (p, t))
}

/// [`pair`], also giving the traced run's work directory.
fn pair_in(
    case: &Case<'_>,
    runtime_async: bool,
    args: &[&str],
    tracer: &str,
    env: &[(&str, &str)],
) -> Result<(Outcome, Outcome, std::path::PathBuf), Verdict> {
    if case.leg().major() < 8 {
        return Err(Verdict::Skipped(NEEDS_NET7.to_string()));
    }
    let app = case.app_with("modern", options(runtime_async))?;
    let mut plain_spec = case.spec(&app);
    plain_spec.args = args.iter().map(|a| a.to_string()).collect();
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let mut spec = case.spec(&app).profiler(case.profiler(tracer)?);
    spec.args = args.iter().map(|a| a.to_string()).collect();
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let work_dir = spec.work_dir.clone();
    let traced = case.run(spec)?;
    if tracer == "sampler" {
        traced.check_exit()?;
    } else {
        traced.check()?;
    }
    if traced.stdout != plain.stdout {
        return Err(format!(
            "app output changed under {tracer} ({env:?}):\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    Ok((plain, traced, work_dir))
}

/// The app's throwing round runs where a process may throw more than once.
fn args(case: &Case<'_>) -> Vec<&'static str> {
    if case.leg().name == WINE_NET8_LEG {
        vec!["3"]
    } else {
        vec!["3", "throw"]
    }
}

fn elt_counts(case: &Case<'_>, variant: &str) -> CaseResult {
    let (plain, traced) = pair(
        case,
        false,
        &args(case),
        "call-tracer",
        &[
            ("CLRPROF_ELT", variant),
            ("CLRPROF_CALLS_FILTER", "Modern."),
            ("CLRPROF_CALL_TIMES", "1"),
        ],
    )?;
    let expected = app_counts(&plain.stdout);
    check_counts(
        &expected,
        &traced,
        COUNTED - usize::from(!args(case).contains(&"throw")),
    )?;
    check_shadow(&traced, false)?;
    Ok(())
}

fn wrapping(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = pair(
        case,
        false,
        &args(case),
        "method-wrapper",
        &[("CLRPROF_WRAP_FILTER", "Modern.")],
    )?;
    let refused: Vec<String> = traced
        .events("wrap_refused")
        .map(|r| r.to_string())
        .collect();
    let expected = app_counts(&plain.stdout);
    let got = wrapped_records(&traced.records);
    let mut wrong = Vec::new();
    for (method, n) in &expected {
        match got.get(method) {
            // Every entry ends in a return or an exception leaving the method.
            Some(&(enter, ret, exc)) if enter == *n && ret + exc == enter => {}
            Some(g) => wrong.push(format!(
                "{method}: app {n}, wrapper (enter, return, exception) {g:?}"
            )),
            None => wrong.push(format!("{method}: not wrapped")),
        }
    }
    if !wrong.is_empty() {
        return Err(format!("wrapped counts differ: {wrong:#?}; refused: {refused:?}").into());
    }
    // Nothing of the app is refused: records' `init` accessors (which
    // return `modreq(IsExternalInit) void`), ref structs, static abstract
    // members, default interface methods, lambdas and local functions, the
    // async state machines all wrap.
    if !refused.is_empty() {
        return Err(format!("methods refused: {refused:#?}").into());
    }
    let panics: Vec<u64> = traced
        .events("wrapper_panics")
        .filter_map(|r| r["count"].as_u64())
        .collect();
    if panics != [0] {
        return Err(format!("wrapper_panics records {panics:?}, expected one of 0").into());
    }
    Ok(())
}

fn sampling(case: &Case<'_>) -> CaseResult {
    // Many rounds, so that the sampler sees the app's own frames.
    let (_, _, dir) = pair_in(
        case,
        false,
        &["400"],
        "sampler",
        &[("CLRPROF_SAMPLER_RATE", "1000")],
    )?;
    let folded_path = dir.join("records.jsonl");
    let folded = std::fs::read_to_string(&folded_path)
        .map_err(|e| format!("no folded stacks {}: {e}", folded_path.display()))?;
    let modern: u64 = folded
        .lines()
        .filter(|l| l.contains("Modern.Program::Main"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    if modern == 0 {
        return Err(format!(
            "no sample under Modern.Program::Main in {} lines of folded stacks",
            folded.lines().count()
        )
        .into());
    }
    Ok(())
}

fn exceptions(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = pair(case, false, &["1", "throw"], "exception-tracer", &[])?;
    let thrown = plain
        .stdout
        .lines()
        .filter(|l| l.starts_with("result async-throw "))
        .count();
    let records: Vec<_> = traced
        .events("exception")
        .filter(|r| r["type"] == "System.InvalidOperationException")
        .collect();
    // The async method's exception is thrown once, in its body, and
    // rethrown once by GetResult (ExceptionDispatchInfo): two throws of one
    // InvalidOperationException as the runtime sees it.
    if thrown != 1 || records.is_empty() {
        return Err(format!(
            "the app caught {thrown} async exception(s), the tracer saw {records:?}"
        )
        .into());
    }
    Ok(())
}

/// .NET 11, runtime-async: the same app with its async methods compiled as
/// runtime-async methods. On 11.0.0 the runtime calls Enter again on every
/// resume of a suspended method and no Leave when it suspends
/// (dotnet/runtime issue 122488; PR 131985, which adds a Leave on
/// suspension, is not in 11.0.0): a suspended frame returns to its caller
/// with nothing reported. The shadow stacks pop such a frame as suspended
/// at the first later event on its thread that proves it gone (a caller's
/// Leave, or an Enter whose caller stack pointer is not below it); a thread
/// whose last hooked method suspended keeps that frame, which no callback
/// of the runtime can remove. So: every method the app counts is entered
/// at least as often as the app says; no Leave mismatches or underflows;
/// every push is popped, unwound, popped as suspended or still on a stack
/// at the end; suspensions were seen (the 11.0.0 fact); frames were popped
/// at an enter (the thread-pool threads' repair); and every frame left at
/// the end is a runtime-async method of the app, on a thread other than
/// the one that ran Main to its end.
fn runtime_async_elt(case: &Case<'_>) -> CaseResult {
    if case.leg().major() < 11 {
        return Err(Verdict::Skipped(
            "runtime-async methods arrived in .NET 11".to_string(),
        ));
    }
    let (plain, traced) = pair(
        case,
        true,
        &args(case),
        "call-tracer",
        &[
            ("CLRPROF_ELT", "fastpath"),
            ("CLRPROF_CALLS_FILTER", "Modern."),
            ("CLRPROF_CALL_TIMES", "1"),
        ],
    )?;
    let expected = app_counts(&plain.stdout);
    let got = traced_counts(&traced);
    let mut wrong = Vec::new();
    for (method, n) in &expected {
        let hooked = got.get(method).copied().unwrap_or(0);
        let is_async = method.starts_with("Modern.Async::");
        if (is_async && hooked < *n) || (!is_async && hooked != *n) {
            wrong.push(format!("{method}: app {n}, hooks {hooked}"));
        }
    }
    if !wrong.is_empty() {
        return Err(format!("runtime-async call counts: {wrong:?}").into());
    }
    let shadow = traced
        .events("shadow")
        .next()
        .cloned()
        .ok_or("no shadow record")?;
    let n = |k: &str| shadow[k].as_u64().unwrap_or(u64::MAX);
    if n("underflows") != 0 || n("mismatches") != 0 || n("untracked") != 0 {
        return Err(format!("shadow stacks unbalanced: {shadow}").into());
    }
    if n("pushes") != n("pops") + n("unwound") + n("suspended") + n("depth") {
        return Err(format!("pushes != pops + unwound + suspended + depth: {shadow}").into());
    }
    if n("suspended") == 0 {
        return Err(format!(
            "no frame popped as suspended: does this runtime report a Leave when a \
             runtime-async method suspends (dotnet/runtime PR 131985)? {shadow}"
        )
        .into());
    }
    // A thread-pool thread resumes the app's methods from the pool's
    // dispatch loop, which is not hooked: a resumed method that suspends
    // there has no hooked caller whose Leave could pop it. The SDK pops it
    // at the thread's next hooked enter, whose caller stack pointer shows
    // it returned (the pool runs each round's continuations, several of
    // which suspend, on two or three threads; 7 to 9 such pops in six runs
    // on 11.0.0, none when the SDK passes no caller stack pointers).
    if n("suspended_at_enter") == 0 {
        return Err(format!(
            "no frame popped at an enter: the fast path passed no caller stack pointers? {shadow}"
        )
        .into());
    }
    // The frames left at the end: runtime-async methods that suspended last
    // on their threads. The thread that ran Main ends balanced (Main's own
    // Leave pops what suspended above it).
    let threads: Vec<&serde_json::Value> = traced.events("shadow-thread").collect();
    let mut left_total = 0u64;
    let mut balanced_main = false;
    for t in &threads {
        let left: Vec<&str> = t["left"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        if left.len() as u64 != t["depth"].as_u64().unwrap_or(u64::MAX) {
            return Err(format!("a thread's depth and its frames differ: {t}").into());
        }
        if let Some(bad) = left.iter().find(|m| !m.starts_with("Modern.Async::")) {
            return Err(format!("{bad} left on a shadow stack at the end: {t}").into());
        }
        left_total += left.len() as u64;
        // Main's thread made most of the calls.
        if t["pushes"].as_u64().unwrap_or(0) > n("pushes") / 2 {
            balanced_main = left.is_empty();
        }
    }
    if left_total != n("depth") || !balanced_main {
        return Err(format!(
            "frames left at the end {left_total} (main thread balanced: {balanced_main}): \
             {shadow}; threads: {threads:?}"
        )
        .into());
    }
    Ok(())
}

/// .NET 11, runtime-async: the SDK refuses to wrap a runtime-async method
/// (`MethodImplOptions.Async`): its `ret` pushes the awaited value (the
/// `int` of `Task<int>`), not the declared `Task<int>` the wrapper's
/// return-value local is typed with (before the refusal it wrapped them
/// with exact counts, storing an integer into a GC-reference local across
/// the exit handler's call). Every other counted method is wrapped with
/// exact entries and exits; the app is unharmed (a peer's agent produced
/// InvalidProgramException).
fn runtime_async_wrap(case: &Case<'_>) -> CaseResult {
    if case.leg().major() < 11 {
        return Err(Verdict::Skipped(
            "runtime-async methods arrived in .NET 11".to_string(),
        ));
    }
    let (plain, traced) = pair(
        case,
        true,
        &args(case),
        "method-wrapper",
        &[("CLRPROF_WRAP_FILTER", "Modern.")],
    )?;
    let expected = app_counts(&plain.stdout);
    let got = wrapped_records(&traced.records);
    let refused: Vec<(String, String)> = traced
        .events("wrap_refused")
        .filter_map(|r| Some((r["method"].as_str()?.into(), r["why"].as_str()?.into())))
        .collect();
    let mut wrong = Vec::new();
    for (method, n) in &expected {
        let why = refused.iter().find(|(m, _)| m == method).map(|(_, w)| w);
        if method.starts_with("Modern.Async::") {
            // (The wrapper writes a record of zeros for a method it never ran.)
            match (got.get(method), why) {
                (None | Some(&(0, 0, 0)), Some(why)) if why.contains("runtime-async method") => {}
                (g, w) => wrong.push(format!(
                    "{method}: expected refused as a runtime-async method, wrapper {g:?}, refusal {w:?}"
                )),
            }
            continue;
        }
        match got.get(method) {
            Some(&(enter, ret, exc)) if enter == *n && ret + exc == enter => {}
            other => wrong.push(format!(
                "{method}: app {n}, wrapper {other:?}, refusal {why:?}"
            )),
        }
    }
    if !wrong.is_empty() {
        return Err(format!("{wrong:#?}; refused: {refused:?}").into());
    }
    println!("    refused: {refused:?}");
    Ok(())
}

/// .NET 11, runtime-async (review 4, route 5): call-tracer decodes the
/// arguments and return value of every call of `Modern.Async` (WithInfo,
/// `CLRPROF_ARGS`). On 11.0.0 each such method has two hooked functions of
/// one token: the Task-returning variant the app's synchronous code calls
/// (a runtime-made thunk: real arguments, returns the `Task<T>`), and the
/// async variant with the method's code, which the runtime's resumption
/// stub calls again on every resume with `this` null and every parameter at
/// its default (dotnet/runtime `AsyncResumptionStub`), and whose Leave
/// returns the awaited `T`. Before the fix the async variant's resumes were
/// decoded as calls (`Middle` had 15 argument records for the app's 3
/// calls, 12 of them `0`; `Leaf` 12 for 6; `Thrower` `[0, 7, 7]` for one
/// call with 7) and its returns typed as `Task<int>` (a 4-byte range read
/// as an object reference: `Malformed`).
/// Now `MethodShape::of` refuses the async variant (`Error::RuntimeVersion`,
/// call-tracer's `args_refused` record) and decodes the Task-returning one:
/// exactly the app's calls, with the app's arguments (`Middle(round)` for
/// each round, `Thrower(7)`), each returning a task.
fn runtime_async_args(case: &Case<'_>) -> CaseResult {
    if case.leg().major() < 11 {
        return Err(Verdict::Skipped(
            "runtime-async methods arrived in .NET 11".to_string(),
        ));
    }
    let args = args(case);
    let (plain, traced) = pair(
        case,
        true,
        &args,
        "call-tracer",
        &[
            ("CLRPROF_ELT", "withinfo"),
            ("CLRPROF_CALLS_FILTER", "Modern."),
            ("CLRPROF_ARGS", "Modern.Async::"),
        ],
    )?;
    let expected = app_counts(&plain.stdout);
    let rounds: i64 = args[0].parse().map_err(|_| "bad rounds")?;
    let mut wrong = Vec::new();
    let of = |event: &'static str, method: &'static str| -> Vec<&serde_json::Value> {
        traced
            .events(event)
            .filter(|r| r["method"] == method)
            .collect()
    };
    for r in traced.events("args").chain(traced.events("return")) {
        if r.get("error").is_some() {
            wrong.push(format!("decoding failed: {r}"));
        }
    }
    // Called from the app's synchronous code: its calls, with its arguments.
    let mut want: Vec<(&str, Vec<i64>)> = vec![("Modern.Async::Middle", (0..rounds).collect())];
    if args.contains(&"throw") {
        want.push(("Modern.Async::Thrower", vec![7]));
    }
    for (method, values) in &want {
        let mut got: Vec<i64> = of("args", method)
            .iter()
            .filter_map(|r| r["values"][0].as_i64())
            .collect();
        got.sort_unstable();
        let n = expected.get(*method).copied().unwrap_or(0);
        if got != *values || got.len() as u64 != n {
            wrong.push(format!(
                "{method}: decoded arguments {got:?}, the app made {n} calls with {values:?}"
            ));
        }
        let returns = of("return", method);
        if returns.len() as u64 != n
            || returns
                .iter()
                .any(|r| r["value"]["object"].as_u64().unwrap_or(0) == 0)
        {
            wrong.push(format!("{method}: returns {returns:?}, expected {n} tasks"));
        }
    }
    // Called only from async code (its async variant): never decoded.
    let leaf = "Modern.Async::Leaf";
    if !of("args", leaf).is_empty() || !of("return", leaf).is_empty() {
        wrong.push(format!(
            "{leaf}: {} argument and {} return records of its async variant",
            of("args", leaf).len(),
            of("return", leaf).len()
        ));
    }
    // Every async variant refused, with the reason.
    let mut variants = vec!["Modern.Async::Middle", "Modern.Async::Leaf"];
    if args.contains(&"throw") {
        variants.push("Modern.Async::Thrower");
    }
    for method in variants {
        let refused = of("args_refused", method);
        if refused.len() != 1
            || !refused[0]["why"]
                .as_str()
                .is_some_and(|w| w.contains("async variant"))
        {
            wrong.push(format!("{method}: refusals {refused:?}"));
        }
    }
    if let Some(r) = traced.events("args_refused").find(|r| {
        !r["method"]
            .as_str()
            .is_some_and(|m| m.starts_with("Modern.Async::"))
    }) {
        wrong.push(format!("a method that is not runtime-async refused: {r}"));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{wrong:#?}").into())
    }
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new("modern C#: ELT fast path, exact call counts", |c| {
            elt_counts(c, "fastpath")
        })
        .also_on(&[ARM64_LEG]),
        Scenario::new("modern C#: ELT WithInfo, exact call counts", |c| {
            elt_counts(c, "withinfo")
        })
        .also_on(&[ARM64_LEG]),
        Scenario::new(
            "modern C#: every counted method wrapped, entries and exits exact",
            wrapping,
        )
        .also_on(&[ARM64_LEG]),
        Scenario::new(
            "modern C#: sampled at 1 kHz, the app's frames in the profile",
            sampling,
        )
        .also_on(&[ARM64_LEG]),
        Scenario::new(
            "modern C#: an async method's exception seen by the exception tracer",
            exceptions,
        )
        .exclude_leg(WINE_NET8_LEG, crate::exceptions::WINE_NET8_REASON),
        Scenario::new(
            "runtime-async (.NET 11): Enter on every resume, shadow stacks balanced",
            runtime_async_elt,
        ),
        Scenario::new(
            "runtime-async (.NET 11): wrapping works or is refused with a reason",
            runtime_async_wrap,
        ),
        Scenario::new(
            "runtime-async (.NET 11): arguments decoded for calls only, never for resumes",
            runtime_async_args,
        ),
    ]
}
