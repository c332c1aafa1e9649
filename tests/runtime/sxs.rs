//! Side-by-side: .NET Core 3.1 and .NET 8 loaded into one process by the
//! native host of `clrprof_testing::sxs`, one after the other and
//! concurrently on two threads, under jit-tracer with each runtime policy.
//!
//! Checked: which runtimes wrote a runtime record (the policy's choice), that
//! every other record carries the runtime it came from, that each runtime
//! JIT-compiled the app's own methods exactly once (no record attributed to
//! the wrong runtime), and that both apps printed their normal output.

use clrprof_testing::harness::{Case, Scenario, Verdict};
use clrprof_testing::run::{run_captured, Exit};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

/// The scenario runs once, on this leg, and takes the 3.1 runtime from the other Linux leg.
const HOST_LEG: &str = "linux-x64-8.0";
const OTHER_LEG: &str = "linux-x64-3.1";
const WHY_ONE_LEG: &str = "the side-by-side host loads both Linux runtimes into one process; it runs once, on the linux-x64-8.0 leg";

/// Runs the side-by-side host with the 3.1 and the 8.0 runtime (in that
/// order, or concurrently) on `app` under `profiler`, with `env`; returns the
/// host's stdout and the profiler's records.
fn run_host(
    case: &Case<'_>,
    app: &std::path::Path,
    profiler: &clrprof_testing::run::Profiler,
    concurrent: bool,
    label: &str,
    env: &[(&str, &str)],
) -> Result<(String, Vec<serde_json::Value>), Verdict> {
    let here = case.leg().clone();
    let other = case
        .other_leg(OTHER_LEG)
        .cloned()
        .ok_or_else(|| Verdict::Failed(format!("the {OTHER_LEG} leg is not available")))?;
    let mode = if concurrent {
        "concurrent"
    } else {
        "sequential"
    };
    let dir = app
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(format!("sxs-{label}-{mode}"));
    std::fs::create_dir_all(&dir).map_err(|e| Verdict::Failed(e.to_string()))?;
    let output = dir.join("records.jsonl");
    let _ = std::fs::remove_file(&output);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clrprof-sxs-host"));
    if concurrent {
        cmd.arg("--concurrent");
    }
    cmd.arg(clrprof_testing::sxs::framework_dir(&other))
        .arg(app);
    cmd.arg(clrprof_testing::sxs::framework_dir(&here)).arg(app);
    cmd.env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("CORECLR_ENABLE_PROFILING", "1")
        .env("CORECLR_PROFILER", &profiler.clsid)
        .env("CORECLR_PROFILER_PATH", &profiler.path)
        .env("CLRPROF_OUTPUT", &output);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_captured(cmd, Duration::from_secs(180), &dir)
        .map_err(|e| Verdict::Failed(e.to_string()))?;
    if !matches!(out.exit, Exit::Code(0)) {
        return Err(format!("host failed: {:?}; stderr: {}", out.exit, out.stderr).into());
    }
    let text = std::fs::read_to_string(&output)
        .map_err(|e| Verdict::Failed(format!("no records: {e}")))?;
    let records = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| Verdict::Failed(format!("bad record: {e}")))?;
    Ok((out.stdout, records))
}

fn run(case: &Case<'_>, concurrent: bool, policy: &str) -> Result<(), Verdict> {
    let here = case.leg().clone();
    let other = case
        .other_leg(OTHER_LEG)
        .cloned()
        .ok_or_else(|| Verdict::Failed(format!("the {OTHER_LEG} leg is not available")))?;
    // Compiled against .NET Core 3.1's reference assemblies: the same
    // assembly then runs in both runtimes.
    let app = case.app_compiled_for("jit", OTHER_LEG)?;
    let profiler = case.profiler("jit-tracer")?;
    // Ground truth: what the app prints in one runtime on its own.
    let alone = case.run(case.spec(&app))?;
    alone.check()?;

    let (host_stdout, records) = run_host(
        case,
        &app,
        &profiler,
        concurrent,
        policy,
        &[("CLRPROF_RUNTIMES", policy)],
    )?;

    // Both apps printed exactly their normal lines (interleaved when concurrent).
    let mut expected: BTreeMap<&str, usize> = BTreeMap::new();
    for l in alone.stdout.lines() {
        *expected.entry(l).or_default() += 2;
    }
    let mut got: BTreeMap<&str, usize> = BTreeMap::new();
    for l in host_stdout.lines() {
        *got.entry(l).or_default() += 1;
    }
    if got != expected {
        return Err(format!("the two apps' output differs from twice the single run:\n got {got:?}\n expected {expected:?}").into());
    }

    let runtimes: Vec<&str> = records
        .iter()
        .filter(|r| r["event"] == "runtime")
        .filter_map(|r| r["version"].as_str())
        .collect();
    let wanted: Vec<&str> = match (policy, concurrent) {
        ("all", _) => vec![other.version.as_str(), here.version.as_str()],
        ("first", false) => vec![other.version.as_str()],
        ("first", true) => runtimes.clone(), // whichever runtime created its profiler first
        ("8", _) => vec![here.version.as_str()],
        _ => return Err(format!("unknown policy {policy}").into()),
    };
    let mut sorted = runtimes.clone();
    sorted.sort_unstable();
    let mut wanted_sorted = wanted.clone();
    wanted_sorted.sort_unstable();
    if sorted != wanted_sorted || (policy == "first" && runtimes.len() != 1) {
        return Err(
            format!("policy {policy}: runtime records {runtimes:?}, expected {wanted:?}").into(),
        );
    }
    for r in records.iter().filter(|r| r["event"] != "runtime") {
        let tag = r["runtime"].as_str().unwrap_or("");
        if !runtimes.contains(&tag) {
            return Err(
                format!("record {r} is not tagged with a profiled runtime {runtimes:?}").into(),
            );
        }
    }
    // The app's methods were JIT-compiled exactly once per profiled runtime.
    let called: Vec<&str> = alone
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("calls "))
        .collect();
    for rt in &runtimes {
        for m in &called {
            let n = records
                .iter()
                .filter(|r| r["event"] == "jit" && r["runtime"] == *rt && r["method"] == *m)
                .count();
            if n != 1 {
                return Err(
                    format!("{m} was JIT-compiled {n} times in runtime {rt} (expected 1)").into(),
                );
            }
        }
    }
    Ok(())
}

/// ELT in both runtimes at once: call-tracer's counts per runtime equal the
/// app's own counts (not the sum of both runtimes), so every hook reached
/// the runtime whose code called it.
fn elt_counts(case: &Case<'_>, concurrent: bool) -> Result<(), Verdict> {
    let here = case.leg().clone();
    let other = case
        .other_leg(OTHER_LEG)
        .cloned()
        .ok_or_else(|| Verdict::Failed(format!("the {OTHER_LEG} leg is not available")))?;
    let app = case.app_compiled_for("calls", OTHER_LEG)?;
    let profiler = case.profiler("call-tracer")?;
    let alone = case.run(case.spec(&app))?;
    alone.check()?;
    let expected: Vec<(String, u64)> = alone
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("count "))
        .filter_map(|l| {
            l.rsplit_once(' ')
                .and_then(|(m, n)| Some((m.to_string(), n.trim().parse().ok()?)))
        })
        .collect();
    if expected.len() < 3 {
        return Err(format!("the calls app printed too few counts: {:?}", alone.stdout).into());
    }
    let (_, records) = run_host(
        case,
        &app,
        &profiler,
        concurrent,
        "elt",
        &[
            ("CLRPROF_CALLS_FILTER", "Calls."),
            ("CLRPROF_RUNTIMES", "all"),
        ],
    )?;
    for rt in [other.version.as_str(), here.version.as_str()] {
        for (method, n) in &expected {
            let got: Vec<u64> = records
                .iter()
                .filter(|r| {
                    r["event"] == "calls" && r["runtime"] == rt && r["method"] == method.as_str()
                })
                .filter_map(|r| r["count"].as_u64())
                .collect();
            if got != [*n] {
                return Err(
                    format!("runtime {rt}: {method} counted {got:?}, the app says {n}").into(),
                );
            }
        }
    }
    Ok(())
}

/// The side-by-side checker class of the test-profilers fixture.
const SXS_CHECKER: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B52}";

/// IDs of two runtimes in one process stay apart: each runtime's scope
/// gives back only its own runtime's tagged IDs, and no callback of one
/// runtime runs inside a callback of the other on the same thread.
fn ids_stay_apart(case: &Case<'_>, concurrent: bool) -> Result<(), Verdict> {
    let here = case.leg().clone();
    let other = case
        .other_leg(OTHER_LEG)
        .cloned()
        .ok_or_else(|| Verdict::Failed(format!("the {OTHER_LEG} leg is not available")))?;
    // Compiled against .NET Core 3.1's reference assemblies: the same
    // assembly then runs in both runtimes.
    let app = case.app_compiled_for("jit", OTHER_LEG)?;
    let profiler = case.profiler_class("test-profilers", SXS_CHECKER)?;
    let (_, records) = run_host(case, &app, &profiler, concurrent, "brand", &[])?;
    for rt in [other.version.as_str(), here.version.as_str()] {
        let sxs: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["event"] == "sxs" && r["runtime"] == rt)
            .collect();
        let [r] = sxs.as_slice() else {
            return Err(format!("runtime {rt}: {} sxs records", sxs.len()).into());
        };
        let n = |k: &str| r[k].as_u64().unwrap_or(u64::MAX);
        if n("own") == 0 || n("foreign_accepted") != 0 || n("nested") != 0 {
            return Err(format!("runtime {rt}: {r}").into());
        }
    }
    // Both runtimes saw the other's tags (the refusals happened).
    let refused: u64 = records
        .iter()
        .filter(|r| r["event"] == "sxs")
        .filter_map(|r| r["foreign_refused"].as_u64())
        .sum();
    if refused == 0 {
        return Err("no runtime ever met the other's IDs".into());
    }
    Ok(())
}

/// "concurrent" or "one after the other".
fn mode(concurrent: bool) -> &'static str {
    if concurrent {
        "concurrent"
    } else {
        "one after the other"
    }
}

/// Runs `body` once, on the leg that hosts both Linux runtimes.
fn on_host_leg(
    name: &str,
    body: impl Fn(&Case<'_>) -> Result<(), Verdict> + Send + Sync + 'static,
) -> Scenario {
    Scenario::new(name, body).only_on(&[HOST_LEG], WHY_ONE_LEG)
}

pub fn scenarios() -> Vec<Scenario> {
    let mut v = Vec::new();
    for concurrent in [false, true] {
        v.push(on_host_leg(
            &format!(
                "side-by-side: each runtime's scope refuses the other's IDs, {}",
                mode(concurrent)
            ),
            move |case| ids_stay_apart(case, concurrent),
        ));
    }
    for concurrent in [false, true] {
        for policy in ["all", "first", "8"] {
            v.push(on_host_leg(
                &format!(
                    "side-by-side: 3.1 + 8.0 in one process, {}, policy {policy}",
                    mode(concurrent)
                ),
                move |case| run(case, concurrent, policy),
            ));
        }
        v.push(on_host_leg(
            &format!("side-by-side: ELT counts per runtime, {}", mode(concurrent)),
            move |case| elt_counts(case, concurrent),
        ));
    }
    v
}
