//! `cargo xtask bench context`: what following the trace context costs per
//! execution-context switch (issue 46): the SDK's startup hook
//! (`clrprof/managed/ClrprofTraceContext.cs`), whose `AsyncLocal`
//! value-changed handler writes the thread's record through
//! `clrprof_context_set_v1` / `clrprof_context_clear_v1` at every switch.
//!
//! Workload: `benches/context/switches.cs`, rounds of
//! `ExecutionContext.Run` of a context in which an activity is current (two
//! switches a round, in and out), on one thread. Configurations, both with
//! the sampler example loaded as the profiler but sampling nothing
//! (`CLRPROF_SAMPLER_PROFILES=none`), so they differ only in the hook:
//! * `no-hook`: the app alone (the yardstick);
//! * `hook`: `DOTNET_STARTUP_HOOKS` with `CLRPROF_CONTEXT_LIBRARY` naming
//!   the profiler.
//!
//! Figures: time added per switch (medians of `--runs` alternating rounds,
//! `--rounds` rounds each), and, on Linux with valgrind, instructions added
//! per switch (callgrind's whole-process totals at two sizes, differenced,
//! so start-up and JIT cancel). The hook run must have written a record at
//! every switch (the profiler's `trace-context` record counts the writes).
//! Writes `target/bench/context.json`.

use crate::measure::{elapsed_ns, median, Setup};
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CONFIGS: [&str; 2] = ["no-hook", "hook"];

pub fn main(args: &[String]) -> crate::Result {
    let mut it = args.iter();
    let (mut leg_name, mut runs, mut rounds) = ("linux-x64-10.0".to_string(), 7usize, 2_000_000u64);
    let mut callgrind = true;
    while let Some(a) = it.next() {
        if a == "--no-callgrind" {
            callgrind = false;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("bench: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--rounds" => rounds = value.parse()?,
            other => return Err(format!("bench: unknown option `{other}`").into()),
        }
    }
    if runs < 5 {
        return Err("bench: --runs must be at least 5".into());
    }
    let setup = Setup::open("context", &leg_name)?;
    println!("==> build the sampler example (release), the app and the startup hook");
    let profiler = setup.release_profiler("sampler")?;
    let app = setup.app("benches/context/switches.cs")?;
    let hook = hook(&setup)?;

    println!("==> {runs} alternating rounds, {rounds} ExecutionContext.Run each (2 switches), on {leg_name}");
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    for run in 0..runs {
        for (i, config) in CONFIGS.iter().enumerate() {
            let work = setup
                .out_dir
                .join("runs-context")
                .join(config)
                .join(run.to_string());
            let outcome = run_app(
                &setup.leg,
                setup.runtimes.wine(),
                &spec(&app, &work, i == 1, rounds, &profiler, &hook),
            )?;
            check(i == 1, &outcome, &work, rounds)?;
            let ns = elapsed_ns(&outcome)?;
            println!("  round {run} {config:<8} {:>9.2} ms", ns / 1e6);
            times[i].push(ns);
        }
    }
    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let switches = 2.0 * rounds as f64;
    let ns_per_switch = (med[1] - med[0]) / switches;
    println!(
        "\nmedians of {runs} runs: no-hook {:.2} ns per switch, hook {:.2} ns per switch: {ns_per_switch:.2} ns added per switch",
        med[0] / switches,
        med[1] / switches
    );
    let mut out = json!({
        "leg": setup.leg.name,
        "runtime": setup.leg.version,
        "runs": runs,
        "rounds": rounds,
        "ns_per_switch_no_hook": med[0] / switches,
        "ns_per_switch_hook": med[1] / switches,
        "ns_per_switch_added": ns_per_switch,
    });
    if callgrind && setup.leg.os == clrprof_testing::Os::Linux {
        let (small, large) = (100_000u64, 600_000u64);
        println!("==> callgrind: {small} and {large} rounds per configuration");
        let mut per = [0f64; 2];
        for (i, config) in CONFIGS.iter().enumerate() {
            let mut totals = [0u64; 2];
            for (k, n) in [small, large].into_iter().enumerate() {
                let work = setup
                    .out_dir
                    .join("callgrind-context")
                    .join(format!("{config}-{n}"));
                let (outcome, total) =
                    setup.under_callgrind(spec(&app, &work, i == 1, n, &profiler, &hook), &work)?;
                check(i == 1, &outcome, &work, n)?;
                totals[k] = total;
            }
            per[i] = (totals[1] as f64 - totals[0] as f64) / (2.0 * (large - small) as f64);
            println!("  {config:<8} {:>9.1} instructions per switch", per[i]);
        }
        println!(
            "instructions added per switch: {:.1} (no-hook {:.1}, hook {:.1})",
            per[1] - per[0],
            per[0],
            per[1]
        );
        out["instructions_per_switch_no_hook"] = json!(per[0]);
        out["instructions_per_switch_hook"] = json!(per[1]);
        out["instructions_per_switch_added"] = json!(per[1] - per[0]);
    }
    let path = setup.out_dir.join("context.json");
    std::fs::write(&path, serde_json::to_string_pretty(&out)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The startup hook, compiled as it ships: against .NET Core 3.1's
/// reference assemblies when that leg is provisioned.
fn hook(setup: &Setup) -> crate::Result<PathBuf> {
    let compiler = setup
        .runtimes
        .compiler()
        .ok_or("no C# compiler (cargo xtask provision)")?;
    let options = clrprof_testing::csharp::CompileOptions {
        allow_unsafe: true,
        optimize: true,
        ..Default::default()
    };
    let against = setup.runtimes.leg("linux-x64-3.1").unwrap_or(&setup.leg);
    let compiled = clrprof_testing::csharp::compile(
        &compiler,
        &setup.root.join("clrprof/managed/ClrprofTraceContext.cs"),
        &setup.cache,
        options,
        against,
    )?;
    Ok(compiled.for_leg(&setup.leg)?)
}

fn spec(app: &Path, work: &Path, hooked: bool, rounds: u64, p: &Profiler, hook: &Path) -> RunSpec {
    let mut spec = RunSpec::new(app, work)
        .timeout(Duration::from_secs(900))
        .profiler(p.clone())
        .env("CLRPROF_SAMPLER_PROFILES", "none")
        // Fully optimised code from the first call.
        .env("DOTNET_TieredCompilation", "0")
        .env("COMPlus_TieredCompilation", "0");
    spec.args = vec![rounds.to_string()];
    // The sampler appends to its record file: start each run without one.
    let _ = std::fs::remove_file(work.join("records.jsonl.jsonl"));
    if hooked {
        spec = spec
            .env("DOTNET_STARTUP_HOOKS", &hook.display().to_string())
            .env("CLRPROF_CONTEXT_LIBRARY", &p.path.display().to_string());
    }
    spec
}

/// The app saw its activity in every round, and the hooked run wrote the
/// record at every switch (warm-up included), so a hook that did nothing
/// cannot look fast.
fn check(hooked: bool, outcome: &Outcome, work: &Path, rounds: u64) -> crate::Result {
    outcome.check_exit()?;
    // The sampler example writes its records beside CLRPROF_OUTPUT.
    let path = work.join("records.jsonl.jsonl");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("no records at {}: {e}", path.display()))?;
    let r: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["event"] == "trace-context")
        .ok_or("no trace-context record")?;
    let writes = r["writes"].as_u64().unwrap_or(0);
    let want = if hooked { 2 * (rounds + 200_000) } else { 0 };
    if r["writer"] != if hooked { "following" } else { "none" } || writes < want {
        return Err(format!(
            "{}: the hook wrote {writes} records (want at least {want}): {r}",
            if hooked { "hook" } else { "no-hook" }
        )
        .into());
    }
    Ok(())
}
