//! Method wrapping in real runtimes (clrprof-instrumentation through the
//! method-wrapper example, on apps/wrap.cs, whose own account of every
//! call and exceptional exit is the ground truth):
//! - at JIT time, every shape (static, instance, value-type `this`, generic
//!   methods and methods of generic types in shared and unshared
//!   instantiations, `out`/`ref`, twelve arguments, struct, decimal, double
//!   and float returns, own try/catch/finally and filters, several returns,
//!   a method ending in `throw`, exceptions through nested finally blocks,
//!   recursion, an iterator, an async method, a constructor): entries,
//!   returns and exceptions equal the app's account, output byte-identical;
//! - by ReJIT: wrapped at `Rejit.Begin`, unwrapped at `Rejit.End`, counts
//!   equal the app's account of that phase; also with inlining allowed
//!   before the wrap and `RequestReJITWithInliners`; and cycles of ReJIT
//!   and revert while four threads call;
//! - the app prints the IL offset the runtime reports inside a wrapped
//!   method: the wrapper's IL map keeps it an offset of the original body;
//! - on win-x64-8.0 (Wine 8 + .NET 8.0.4 hang on a process's second
//!   managed exception) the app runs without the shapes that must throw;
//! - arguments and return values decoded by the method's own types equal
//!   what the app printed, and a replaced return value is what the app sees.

use crate::exceptions::WINE_NET8_LEG;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::collections::BTreeMap;

/// (enter, return, exception) per method.
pub(crate) type Counts = BTreeMap<String, (u64, u64, u64)>;

/// `<prefix> <method> <enter> <return> <exception>` lines of the app.
pub(crate) fn app_account(stdout: &str, prefix: &str) -> Counts {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix)?.strip_prefix(' '))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() != 4 {
                return None;
            }
            Some((
                f[0].to_string(),
                (f[1].parse().ok()?, f[2].parse().ok()?, f[3].parse().ok()?),
            ))
        })
        .collect()
}

fn wrapped(outcome: &Outcome) -> Counts {
    wrapped_records(&outcome.records)
}

/// The method-wrapper's `wrapped` records among `records`.
pub(crate) fn wrapped_records(records: &[serde_json::Value]) -> Counts {
    records
        .iter()
        .filter(|r| r["event"] == "wrapped")
        .filter_map(|r| {
            Some((
                r["method"].as_str()?.to_string(),
                (
                    r["enter"].as_u64()?,
                    r["return"].as_u64()?,
                    r["exception"].as_u64()?,
                ),
            ))
        })
        .collect()
}

/// Runs the app plain and under the wrapper; the app's output must be
/// identical (or differ only in the lines `changed` names, with the values
/// given); no wrapper panics. Returns (plain, profiled).
fn run_pair(
    case: &Case<'_>,
    env: &[(&str, &str)],
    changed: &[(&str, &str)],
) -> Result<(Outcome, Outcome), Verdict> {
    run_app_pair(case, "wrap", env, &[], changed)
}

/// [`run_pair`] on the app `name` (of `tests/apps`), with `traced_env`
/// set in the profiled run only.
fn run_app_pair(
    case: &Case<'_>,
    name: &str,
    env: &[(&str, &str)],
    traced_env: &[(&str, &str)],
    changed: &[(&str, &str)],
) -> Result<(Outcome, Outcome), Verdict> {
    let app = case.app(name)?;
    // The app throws no exception on the leg that hangs on a process's
    // second one (WRAP_NO_THROW leaves out the shapes that must throw).
    let no_throw = if case.leg().name == WINE_NET8_LEG {
        "1"
    } else {
        "0"
    };
    let mut plain_spec = case.spec(&app).env("WRAP_NO_THROW", no_throw);
    // The same runtime settings (tiering) and app settings, no profiler.
    for (k, v) in env {
        if !k.starts_with("CLRPROF_") {
            plain_spec = plain_spec.env(k, v);
        }
    }
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let profiler = case.profiler("method-wrapper")?;
    let mut spec = case
        .spec(&app)
        .env("WRAP_NO_THROW", no_throw)
        .profiler(profiler);
    for (k, v) in env.iter().chain(traced_env) {
        spec = spec.env(k, v);
    }
    let traced = case.run(spec)?;
    traced.check()?;
    let expected: String = plain
        .stdout
        .lines()
        .map(|l| {
            let replaced = changed
                .iter()
                .find(|(prefix, _)| l.starts_with(prefix))
                .map(|(prefix, value)| format!("{prefix}{value}"));
            format!("{}\n", replaced.unwrap_or_else(|| l.to_string()))
        })
        .collect();
    // Lines the C# handlers print (never without the profiler).
    let traced_app: String = traced
        .stdout
        .lines()
        .filter(|l| !l.starts_with("managed-"))
        .map(|l| format!("{l}\n"))
        .collect();
    if traced_app != expected {
        let diff: Vec<String> = expected
            .lines()
            .zip(traced_app.lines())
            .filter(|(a, b)| a != b)
            .take(5)
            .map(|(a, b)| format!("expected {a:?}, got {b:?}"))
            .collect();
        return Err(format!(
            "app output under the wrapper is not the expected one ({} vs {} lines): {diff:?}",
            expected.lines().count(),
            traced_app.lines().count()
        )
        .into());
    }
    let panics: Vec<u64> = traced
        .events("wrapper_panics")
        .filter_map(|r| r["count"].as_u64())
        .collect();
    if panics != [0] {
        return Err(format!("wrapper_panics records {panics:?}, expected one of 0").into());
    }
    Ok((plain, traced))
}

/// Every shape of apps/wrap.cs, by the name the SDK gives it.
const SHAPES: [&str; 27] = [
    "Wrap.Target.Args::Add",
    "Wrap.Target.Args::Mix",
    "Wrap.Target.Base::.ctor",
    "Wrap.Target.Box`1::Get",
    "Wrap.Target.Derived::.ctor",
    "Wrap.Target.Point::Sum",
    "Wrap.Target.Shapes::Chain",
    "Wrap.Target.Shapes::Dec",
    "Wrap.Target.Shapes::Fib",
    "Wrap.Target.Shapes::Filtered",
    "Wrap.Target.Shapes::Guarded",
    "Wrap.Target.Shapes::Half",
    "Wrap.Target.Shapes::Id",
    "Wrap.Target.Shapes::Instance",
    "Wrap.Target.Shapes::MakePair",
    "Wrap.Target.Shapes::Many",
    "Wrap.Target.Shapes::ManyReturns",
    "Wrap.Target.Shapes::NestedFinally",
    "Wrap.Target.Shapes::OutRef",
    "Wrap.Target.Shapes::Range",
    "Wrap.Target.Shapes::Secret",
    "Wrap.Target.Shapes::Third",
    "Wrap.Target.Shapes::Thrower",
    "Wrap.Target.Shapes::Where",
    "Wrap.Target.Shapes::WorkAsync",
    "Wrap.Target.Small::Twice",
    "Wrap.Target.Widget::.ctor",
];

/// The shapes that only throw, left out under `WRAP_NO_THROW`.
const ALWAYS_THROW: [&str; 3] = [
    "Wrap.Target.Shapes::Chain",
    "Wrap.Target.Shapes::Filtered",
    "Wrap.Target.Shapes::Thrower",
];

/// The shapes the app's account must hold: all, less those that only throw
/// on the no-exception leg, less `Secret` and `Where` (called after the
/// phase) for ReJIT.
pub(crate) fn shapes(case: &Case<'_>, rejit: bool) -> Vec<&'static str> {
    SHAPES
        .iter()
        .copied()
        .filter(|m| case.leg().name != WINE_NET8_LEG || !ALWAYS_THROW.contains(m))
        .filter(|m| {
            !rejit || !["Wrap.Target.Shapes::Secret", "Wrap.Target.Shapes::Where"].contains(m)
        })
        .collect()
}

/// No method was refused, and the counts `got` equal the app's account (its
/// `<prefix> …` lines in `app_stdout`) for the shapes of this leg.
fn exact(
    case: &Case<'_>,
    traced: &Outcome,
    app_stdout: &str,
    prefix: &str,
    rejit: bool,
    got: &Counts,
) -> CaseResult {
    let refused = refused(traced);
    if !refused.is_empty() {
        return Err(format!("methods refused: {refused:?}").into());
    }
    compare(&shapes(case, rejit), &app_account(app_stdout, prefix), got)?;
    Ok(())
}

fn compare(shapes: &[&str], expected: &Counts, got: &Counts) -> Result<(), String> {
    let accounted: Vec<&str> = expected.keys().map(String::as_str).collect();
    if accounted != shapes {
        return Err(format!(
            "the app accounted for {accounted:?}, not for the shapes {shapes:?}"
        ));
    }
    let mut wrong = Vec::new();
    for (m, want) in expected {
        match got.get(m) {
            Some(g) if g == want => {}
            Some(g) => wrong.push(format!(
                "{m}: wrapper (enter, return, exception) {g:?}, app {want:?}"
            )),
            None => wrong.push(format!("{m}: no wrapped record")),
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{wrong:#?}"))
    }
}

fn refused(outcome: &Outcome) -> Vec<String> {
    outcome
        .events("wrap_refused")
        .map(|r| r.to_string())
        .collect()
}

fn jit_scenario(case: &Case<'_>, tiering: &str) -> CaseResult {
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
        ("DOTNET_TieredCompilation", tiering),
        ("COMPlus_TieredCompilation", tiering),
    ];
    let (_plain, traced) = run_pair(case, &env, &[])?;
    exact(
        case,
        &traced,
        &traced.stdout,
        "account",
        false,
        &wrapped(&traced),
    )?;
    Ok(())
}

fn jit_tiering_on(case: &Case<'_>) -> CaseResult {
    jit_scenario(case, "1")
}

fn jit_tiering_off(case: &Case<'_>) -> CaseResult {
    jit_scenario(case, "0")
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "method-wrapper: every shape wrapped at JIT, tiered compilation on",
            jit_tiering_on,
        )
        .also_on(&[clrprof_testing::manifest::ARM64_LEG]),
        Scenario::new(
            "method-wrapper: every shape wrapped at JIT, tiered compilation off",
            jit_tiering_off,
        ),
        Scenario::new(
            "method-wrapper: methods with hot loops wrapped at every compilation (on-stack replacement of the running loop)",
            osr_scenario,
        )
        .also_on(&[clrprof_testing::manifest::ARM64_LEG]),
        Scenario::new(
            "method-wrapper: methods with hot loops wrapped from their second compilation (the on-stack replacement): refused, the app unharmed",
            osr_late_scenario,
        ),
        Scenario::new(
            "method-wrapper: wrapped by ReJIT for one phase and unwrapped by revert",
            rejit_scenario,
        )
        .also_on(&[clrprof_testing::manifest::ARM64_LEG]),
        Scenario::new(
            "method-wrapper: arguments and return values by the method's types; a replaced return value",
            values_scenario,
        )
        .also_on(&[clrprof_testing::manifest::ARM64_LEG]),
        Scenario::new(
            "method-wrapper: the type of every exception leaving a wrapped method, as the app caught it",
            exception_types_scenario,
        ),
        Scenario::new(
            "method-wrapper: ReJIT on/off cycles while four threads call the wrapped methods",
            cycles_scenario,
        ),
        Scenario::new(
            "method-wrapper: a method already inlined is wrapped by ReJIT with its inliners",
            inliners_scenario,
        ),
        Scenario::new(
            "method-wrapper: C# handlers from a startup hook see every shape, the arguments and the return value, and replace one",
            managed_scenario,
        ),
        Scenario::new(
            "method-wrapper: C# handlers wrapped by ReJIT for one phase and unwrapped by revert",
            managed_rejit,
        ),
        Scenario::new(
            "method-wrapper: C# handlers not loaded, or of another version: every method refused, the app unharmed",
            managed_refusals,
        ),
    ]
}

fn rejit_scenario(case: &Case<'_>) -> CaseResult {
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
        ("CLRPROF_WRAP_MODE", "rejit"),
    ];
    let (_plain, traced) = run_pair(case, &env, &[])?;
    let requested: Vec<String> = traced
        .events("rejit_requested")
        .chain(traced.events("revert_requested"))
        .map(|r| r.to_string())
        .collect();
    if requested.len() != 2 || requested.iter().any(|r| !r.contains("\"failed\":0")) {
        return Err(format!("ReJIT and revert requests: {requested:?}").into());
    }
    exact(
        case,
        &traced,
        &traced.stdout,
        "rejit-account",
        true,
        &wrapped(&traced),
    )?;
    Ok(())
}

fn values_scenario(case: &Case<'_>) -> CaseResult {
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target.Args::"),
        ("CLRPROF_WRAP_ARGS", "1"),
    ];
    let (plain, traced) = run_pair(case, &env, &[])?;
    let expected: Vec<String> = plain
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("args "))
        .map(str::to_string)
        .collect();
    let got: Vec<String> = traced
        .events("call")
        .map(|r| {
            let args: Vec<&str> = r["args"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            format!(
                "{} {} -> {}",
                r["method"].as_str().unwrap_or("?"),
                args.join(" "),
                r["return"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if expected.len() < 30 || got != expected {
        return Err(format!(
            "decoded calls differ from the app's:\napp:     {:?}\nwrapper: {:?}",
            &expected[..expected.len().min(6)],
            &got[..got.len().min(6)]
        )
        .into());
    }
    // A replaced `int` return value is what the app prints.
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target.Shapes::Secret"),
        ("CLRPROF_WRAP_REPLACE", "Wrap.Target.Shapes::Secret=42"),
    ];
    let (plain, _traced) = run_pair(case, &env, &[("secret ", "42")])?;
    if !plain.stdout.contains("secret 7\n") {
        return Err("the app without the wrapper does not print `secret 7`".into());
    }
    Ok(())
}

/// The exit handler's view of each exception (its class's name, read in
/// the call): per method and type, as many as the app's own account
/// (`exception-type <method> <type> <count>`); the counts equal too.
fn exception_types_scenario(case: &Case<'_>) -> CaseResult {
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
        ("CLRPROF_WRAP_ARGS", "1"),
    ];
    let (_plain, traced) = run_pair(case, &env, &[])?;
    exact(
        case,
        &traced,
        &traced.stdout,
        "account",
        false,
        &wrapped(&traced),
    )?;
    let expected: BTreeMap<String, u64> = traced
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("exception-type "))
        .filter_map(|l| {
            let (key, n) = l.rsplit_once(' ')?;
            Some((key.to_string(), n.parse().ok()?))
        })
        .collect();
    let shapes = shapes(case, false);
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for r in traced.events("call").filter(|r| r["threw"] == true) {
        let method = r["method"].as_str().unwrap_or("?");
        if !shapes.contains(&method) {
            continue;
        }
        let ty = r["exception"].as_str().unwrap_or("(no exception type)");
        *got.entry(format!("{method} {ty}")).or_default() += 1;
    }
    let throws = case.leg().name != WINE_NET8_LEG;
    if got != expected || (throws && expected.len() < 7) {
        return Err(format!(
            "exception types per method:
app:     {expected:#?}
wrapper: {got:#?}"
        )
        .into());
    }
    Ok(())
}

/// Wrapped and unwrapped again and again by ReJIT while threads call: the
/// app is unharmed, every wrapped call that entered also left (by a return
/// or an exception), and the wrapper never counted more calls than the app
/// made.
fn cycles_scenario(case: &Case<'_>) -> CaseResult {
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
        ("CLRPROF_WRAP_MODE", "rejit"),
        ("CLRPROF_WRAP_CYCLES", "40"),
        ("WRAP_THREADS", "4"),
        ("WRAP_ROUNDS", "1500"),
    ];
    let (_plain, traced) = run_pair(case, &env, &[])?;
    let cycles: Vec<(u64, u64)> = traced
        .events("rejit_cycles")
        .filter_map(|r| Some((r["cycles"].as_u64()?, r["failed"].as_u64()?)))
        .collect();
    let [(done, 0)] = cycles[..] else {
        return Err(
            format!("rejit_cycles records {cycles:?}, expected one without failures").into(),
        );
    };
    if done < 2 {
        return Err(format!("only {done} wrap/unwrap cycles ran while the threads called").into());
    }
    let app = app_account(&traced.stdout, "rejit-account");
    let got = wrapped(&traced);
    let mut wrong = Vec::new();
    let mut wrapped_calls = 0;
    for (m, &(enter, ret, exc)) in &got {
        if enter != ret + exc {
            wrong.push(format!(
                "{m}: {enter} entries but {ret} returns and {exc} exceptions"
            ));
        }
        if let Some(&(app_enter, _, app_exc)) = app.get(m) {
            wrapped_calls += enter;
            if enter > app_enter || exc > app_exc {
                wrong.push(format!(
                    "{m}: the wrapper counted ({enter}, {exc}) entries and exceptions, the app made only ({app_enter}, {app_exc})"
                ));
            }
        }
    }
    if !wrong.is_empty() {
        return Err(format!("{wrong:#?}").into());
    }
    if wrapped_calls == 0 {
        return Err(format!("no wrapped call counted in {done} cycles").into());
    }
    Ok(())
}

/// Inlining allowed until the wrap (tiering off, so the first compilation
/// inlines): `Small.Twice` is inlined into its callers in phase 1, and the
/// ReJIT with inliners at `Begin` recompiles them, so phase 2 counts every
/// call exactly.
fn inliners_scenario(case: &Case<'_>) -> CaseResult {
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
        ("CLRPROF_WRAP_MODE", "rejit"),
        ("CLRPROF_WRAP_INLINERS", "1"),
        ("DOTNET_TieredCompilation", "0"),
        ("COMPlus_TieredCompilation", "0"),
    ];
    let (_plain, traced) = run_pair(case, &env, &[])?;
    let inlined = traced
        .events("inlined")
        .filter(|r| r["method"] == "Wrap.Target.Small::Twice")
        .count();
    if inlined == 0 {
        return Err(
            "Small.Twice was never inlined, so this run proves nothing about inliners".into(),
        );
    }
    exact(
        case,
        &traced,
        &traced.stdout,
        "rejit-account",
        true,
        &wrapped(&traced),
    )?;
    Ok(())
}

const HANDLERS: &str = "wraphandlers,0.0.0.0,WrapHandlers.Handlers";

/// `DOTNET_STARTUP_HOOKS` naming the C# handlers' assembly, as the leg sees it.
fn startup_hook(case: &Case<'_>) -> Result<String, Verdict> {
    let handlers = case.app("wraphandlers")?;
    crate::mux::target_path(case, &handlers)
}

/// The C# handlers' `managed-wrapped` lines.
fn managed_counts(stdout: &str) -> Result<Counts, Verdict> {
    if stdout.contains("state-mismatch") {
        return Err("an exit handler got another call's state".into());
    }
    // The same line format as the app's own account.
    Ok(app_account(stdout, "managed-wrapped"))
}

fn managed_rejit(case: &Case<'_>) -> CaseResult {
    let hook = startup_hook(case)?;
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
        ("CLRPROF_WRAP_MANAGED", HANDLERS),
        ("CLRPROF_WRAP_MODE", "rejit"),
        ("DOTNET_STARTUP_HOOKS", hook.as_str()),
    ];
    let (plain, traced) = run_pair(case, &env, &[])?;
    exact(
        case,
        &traced,
        &plain.stdout,
        "rejit-account",
        true,
        &managed_counts(&traced.stdout)?,
    )?;
    Ok(())
}

fn managed_scenario(case: &Case<'_>) -> CaseResult {
    let hook = startup_hook(case)?;
    let env = [
        ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
        ("CLRPROF_WRAP_MANAGED", HANDLERS),
        ("DOTNET_STARTUP_HOOKS", hook.as_str()),
        ("WRAPHANDLERS_SECRET", "42"),
    ];
    let (plain, traced) = run_pair(case, &env, &[("secret ", "42")])?;
    let managed = managed_counts(&traced.stdout)?;
    exact(case, &traced, &plain.stdout, "account", false, &managed)?;
    // What the handlers saw of Add, against what the app printed.
    let app_calls: Vec<(String, String)> = plain
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("args Wrap.Target.Args::Add "))
        .filter_map(|l| {
            let (args, sum) = l.split_once(" -> ")?;
            Some((args.to_string(), sum.to_string()))
        })
        .collect();
    let seen_args: Vec<&str> = traced
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("managed-args Wrap.Target.Args::Add "))
        .collect();
    let seen_returns: Vec<&str> = traced
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("managed-return Wrap.Target.Args::Add "))
        .collect();
    let want_args: Vec<&str> = app_calls.iter().map(|(a, _)| a.as_str()).collect();
    let want_returns: Vec<&str> = app_calls.iter().map(|(_, r)| r.as_str()).collect();
    if app_calls.len() < 10 || seen_args != want_args || seen_returns != want_returns {
        return Err(format!(
            "the C# handlers saw Add({seen_args:?}) -> {seen_returns:?}; the app made {app_calls:?}"
        )
        .into());
    }
    Ok(())
}

fn managed_refusals(case: &Case<'_>) -> CaseResult {
    let hook = startup_hook(case)?;
    let cases = [
        (
            "wraphandlers,9.9.9.9,WrapHandlers.Handlers",
            Some(hook.as_str()),
            "the application loaded `wraphandlers` 0.0.0.0, the handlers were built for 9.9.9.9",
        ),
        (
            HANDLERS,
            None,
            "the handler assembly `wraphandlers` is not loaded",
        ),
    ];
    for (handlers, hook, why) in cases {
        let mut env = vec![
            ("CLRPROF_WRAP_FILTER", "Wrap.Target."),
            ("CLRPROF_WRAP_MANAGED", handlers),
        ];
        if let Some(h) = hook {
            env.push(("DOTNET_STARTUP_HOOKS", h));
        }
        let (_plain, traced) = run_pair(case, &env, &[])?;
        let refused = refused(&traced);
        let clear = refused.iter().filter(|r| r.contains(why)).count();
        if clear < 20 || clear != refused.len() {
            return Err(format!(
                "{handlers}: {} refusals, {clear} saying {why:?}: {:?}",
                refused.len(),
                &refused[..refused.len().min(3)]
            )
            .into());
        }
    }
    Ok(())
}

/// The loop methods of apps/wraposr.cs.
const LOOPS: [&str; 3] = [
    "Osr.Target.Loops::Guarded",
    "Osr.Target.Loops::Sum",
    "Osr.Target.Loops::ThenThrow",
];

/// apps/wraposr.cs, whose methods run hot loops at their first calls, under
/// the method-wrapper installing at every `JITCompilationStarted` of them
/// (`CLRPROF_WRAP_EVERY=1`, as the book's listing did before it kept a set).
/// The runtime compiles each loop again while its tier-0 frame runs
/// (on-stack replacement, .NET 7 and later with tiered compilation) and
/// announces that compilation too: the SDK must refuse to install there
/// (the compilation continues the running frame at an IL offset of the body
/// it came from), and the wrapped calls must be the app's account, its
/// output the same as without the profiler. With `late`, the first
/// compilation is passed over (`CLRPROF_WRAP_SKIP=1`): the install at the
/// OSR compilation is refused too and nothing is wrapped. Where the leg
/// writes the JIT's list of compiled methods to a file
/// (`DOTNET_JitStdOutFile`, linux legs from .NET 8 on), that list must show
/// an OSR compilation of every loop method.
fn osr_case(case: &Case<'_>, late: bool) -> CaseResult {
    let leg = case.leg();
    let major: u32 = leg
        .version
        .split('.')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // On-stack replacement is on by default from .NET 7 (x64 and arm64);
    // 3.1 compiles methods with loops optimized at once.
    let osr = major >= 7;
    let listed = osr && leg.os == clrprof_testing::manifest::Os::Linux;
    let list = std::env::temp_dir().join(format!(
        "clrprof-wraposr-{}-{}-{late}.txt",
        leg.name,
        std::process::id()
    ));
    let _ = std::fs::remove_file(&list);
    let list_str = list.display().to_string();
    let mut env = vec![
        ("CLRPROF_WRAP_FILTER", "Osr.Target."),
        ("CLRPROF_WRAP_EVERY", "1"),
    ];
    if late {
        env.push(("CLRPROF_WRAP_SKIP", "1"));
    }
    let mut traced_env = Vec::new();
    if listed {
        traced_env.push(("DOTNET_JitStdOutFile", list_str.as_str()));
        traced_env.push(("DOTNET_JitDisasmSummary", "1"));
    }
    let (_plain, traced) = run_app_pair(case, "wraposr", &env, &traced_env, &[])?;
    let compiled = std::fs::read_to_string(&list).unwrap_or_default();
    let _ = std::fs::remove_file(&list);
    let mut expected = app_account(&traced.stdout, "account");
    let why = if late {
        // Nothing wrapped: each method ran its own IL.
        for counts in expected.values_mut() {
            *counts = (0, 0, 0);
        }
        "already compiled its IL"
    } else {
        "already wrapped"
    };
    compare(&LOOPS, &expected, &wrapped(&traced))?;
    // Every refusal is of a later compilation, for `why`; with OSR every
    // loop method has one at least.
    let mut refusals: BTreeMap<&str, u64> = BTreeMap::new();
    let mut others = Vec::new();
    for r in traced.events("wrap_refused") {
        let method = r["method"].as_str().unwrap_or("");
        match LOOPS.iter().find(|m| **m == method) {
            Some(m) if r["why"].as_str().unwrap_or("").contains(why) => {
                *refusals.entry(m).or_default() += 1;
            }
            _ => others.push(r.to_string()),
        }
    }
    if !others.is_empty() {
        return Err(format!("refusals other than {why:?}: {others:?}").into());
    }
    if osr && refusals.len() != LOOPS.len() {
        return Err(format!(
            "later compilations refused per method {refusals:?}: every loop method should have one (its on-stack replacement)"
        )
        .into());
    }
    if listed {
        // `JIT compiled Osr.Target.Loops:Sum(int) [Tier1-OSR @0x19 ...`
        let missing: Vec<&str> = LOOPS
            .iter()
            .copied()
            .filter(|m| {
                let jit_name = m.replace("::", ":");
                !compiled.lines().any(|l| {
                    l.contains(&format!("JIT compiled {jit_name}(")) && l.contains("Tier1-OSR")
                })
            })
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "no on-stack replacement of {missing:?} in the JIT's list ({} lines): {compiled:?}",
                compiled.lines().count()
            )
            .into());
        }
    }
    eprintln!("    note: later compilations refused ({why}): {refusals:?}");
    Ok(())
}

fn osr_scenario(case: &Case<'_>) -> CaseResult {
    osr_case(case, false)
}

fn osr_late_scenario(case: &Case<'_>) -> CaseResult {
    osr_case(case, true)
}
