//! `cargo xtask bench wrap`: what wrapping a method costs per call
//! (`clrprof-instrumentation` through the method-wrapper example), against
//! the IL example's entry counter and call-tracer's WithInfo ELT hooks, on
//! the ELT benchmark's workload (`benches/elt/workload.cs`: a tight loop of
//! calls to `Bench.Workload::Step(long, int)`, never inlined).
//!
//! Configurations, all filtered to `Step`:
//! * `no-profiler`;
//! * `il-entry-counter`: il-rewriter's native probe at method entry;
//! * `wrapper-empty`: method-wrapper counting entries, returns, exceptions;
//! * `wrapper-arg-and-return`: method-wrapper whose handlers read the `int`
//!   argument and the `long` return value (`CLRPROF_WRAP_BENCH=1`);
//! * `call-tracer-withinfo-leave`: WithInfo enter and leave hooks counting
//!   calls (no decoding);
//! * `call-tracer-withinfo-decode`: the same hooks decoding every call's
//!   arguments and return value (`CLRPROF_ARGS_SINK`): what an agent
//!   reading an argument and the return value through ELT pays.
//!
//! Two figures per configuration: the time added per call (medians of
//! `--runs` alternating rounds, `--calls` calls each, tiering off), and,
//! on Linux with valgrind, the instructions added per call (callgrind's
//! whole-process totals at two sizes, differenced, so start-up cancels).
//! Goals (the method-instrumentation issue): the wrapper reading an
//! argument and the return value adds at most 1/5 of the WithInfo cost, and
//! the empty wrapper at most twice the entry counter's.
//! Writes `target/bench/wrap.json`.

use crate::measure::{elapsed_ns, median, Setup};
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const METHOD: &str = "Bench.Workload::Step";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Config {
    None,
    IlEntryCounter,
    WrapperEmpty,
    WrapperArgAndReturn,
    WithInfo,
    WithInfoDecode,
}

const CONFIGS: [Config; 6] = [
    Config::None,
    Config::IlEntryCounter,
    Config::WrapperEmpty,
    Config::WrapperArgAndReturn,
    Config::WithInfo,
    Config::WithInfoDecode,
];

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::None => "no-profiler",
            Config::IlEntryCounter => "il-entry-counter",
            Config::WrapperEmpty => "wrapper-empty",
            Config::WrapperArgAndReturn => "wrapper-arg-and-return",
            Config::WithInfo => "call-tracer-withinfo-leave",
            Config::WithInfoDecode => "call-tracer-withinfo-decode",
        }
    }
}

struct Profilers {
    il: Profiler,
    wrapper: Profiler,
    tracer: Profiler,
}

pub fn main(args: &[String]) -> crate::Result {
    let mut it = args.iter();
    let (mut leg_name, mut runs, mut calls) = ("linux-x64-8.0".to_string(), 5usize, 20_000_000u64);
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
            "--calls" => calls = value.parse()?,
            other => return Err(format!("bench: unknown option `{other}`").into()),
        }
    }
    if runs < 5 {
        return Err("bench: --runs must be at least 5".into());
    }
    let setup = Setup::open("wrap", &leg_name)?;
    println!("==> build il-rewriter, method-wrapper and call-tracer (release)");
    let profilers = Profilers {
        il: setup.release_profiler("il-rewriter")?,
        wrapper: setup.release_profiler("method-wrapper")?,
        tracer: setup.release_profiler("call-tracer")?,
    };
    let app = setup.app("benches/elt/workload.cs")?;

    println!(
        "==> {runs} alternating rounds of {} runs, {calls} calls each, on {leg_name}",
        CONFIGS.len()
    );
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    for round in 0..runs {
        for (i, config) in CONFIGS.iter().enumerate() {
            let work = setup
                .out_dir
                .join("runs-wrap")
                .join(config.name())
                .join(round.to_string());
            let spec = spec(&app, &work, *config, calls, &profilers);
            let outcome = run_app(&setup.leg, setup.runtimes.wine(), &spec)?;
            check(*config, &outcome, calls)?;
            let ns = elapsed_ns(&outcome)?;
            println!("  round {round} {:<28} {:>9.2} ms", config.name(), ns / 1e6);
            times[i].push(ns);
        }
    }
    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let added: Vec<f64> = med.iter().map(|m| (m - med[0]) / calls as f64).collect();
    println!("\nmedians of {runs} runs, {calls} calls each:");
    for (i, c) in CONFIGS.iter().enumerate() {
        println!(
            "  {:<28} {:>9.2} ms  {:>7.2} ns/call added",
            c.name(),
            med[i] / 1e6,
            added[i]
        );
    }
    let mut json = serde_json::Map::new();
    let at = |c: Config| CONFIGS.iter().position(|x| *x == c).unwrap_or(0);
    let ratios = |v: &[f64]| {
        (
            v[at(Config::WrapperArgAndReturn)] / v[at(Config::WithInfoDecode)],
            v[at(Config::WrapperEmpty)] / v[at(Config::IlEntryCounter)],
        )
    };
    let (vs_withinfo, vs_counter) = ratios(&added);
    println!(
        "time: wrapper reading an argument and the return value / WithInfo decoding them = {vs_withinfo:.3} (goal <= 0.2); \
         empty wrapper / entry counter = {vs_counter:.3} (goal <= 2)"
    );
    // The figures of one measure: per configuration, and the two ratios.
    let record = |json: &mut serde_json::Map<String, Value>,
                  (per_call, ratio): (&str, &str),
                  added: &[f64],
                  (vs_withinfo, vs_counter): (f64, f64)| {
        let per_config: serde_json::Map<_, _> = CONFIGS
            .iter()
            .zip(added)
            .map(|(c, a)| (c.name().to_string(), json!(a)))
            .collect();
        json.insert(per_call.into(), per_config.into());
        json.insert(format!("{ratio}_ratio_vs_withinfo"), json!(vs_withinfo));
        json.insert(format!("{ratio}_ratio_vs_entry_counter"), json!(vs_counter));
    };
    record(
        &mut json,
        ("ns_per_call_added", "time"),
        &added,
        (vs_withinfo, vs_counter),
    );

    if callgrind && setup.leg.os == clrprof_testing::Os::Linux {
        let (small, large) = (200_000u64, 1_200_000u64);
        println!("==> callgrind: {small} and {large} calls per configuration");
        let mut per_call = Vec::new();
        for config in CONFIGS {
            let mut totals = [0u64; 2];
            for (k, n) in [small, large].into_iter().enumerate() {
                let work = setup
                    .out_dir
                    .join("callgrind-wrap")
                    .join(format!("{}-{n}", config.name()));
                let (outcome, total) =
                    setup.under_callgrind(spec(&app, &work, config, n, &profilers), &work)?;
                check(config, &outcome, n)?;
                totals[k] = total;
            }
            let per = (totals[1] as f64 - totals[0] as f64) / (large - small) as f64;
            println!("  {:<28} {per:>9.1} instructions per call", config.name());
            per_call.push(per);
        }
        let added: Vec<f64> = per_call.iter().map(|p| p - per_call[0]).collect();
        let (vs_withinfo, vs_counter) = ratios(&added);
        println!(
            "instructions: wrapper reading an argument and the return value / WithInfo decoding them = {vs_withinfo:.3}; \
             empty wrapper / entry counter = {vs_counter:.3}"
        );
        record(
            &mut json,
            ("instructions_per_call_added", "instructions"),
            &added,
            (vs_withinfo, vs_counter),
        );
    }
    json.insert("leg".into(), json!(setup.leg.name));
    json.insert("runtime".into(), json!(setup.leg.version));
    json.insert("calls".into(), json!(calls));
    json.insert("runs".into(), json!(runs));
    let path = setup.out_dir.join("wrap.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&Value::Object(json))? + "\n",
    )?;
    println!("wrote {}", path.display());
    Ok(())
}

fn spec(app: &Path, work: &Path, config: Config, calls: u64, p: &Profilers) -> RunSpec {
    let mut spec = RunSpec::new(app, work)
        .timeout(Duration::from_secs(900))
        // Fully optimised code from the first call.
        .env("DOTNET_TieredCompilation", "0")
        .env("COMPlus_TieredCompilation", "0");
    spec.args = vec![calls.to_string()];
    match config {
        Config::None => spec,
        Config::IlEntryCounter => spec.env("CLRPROF_IL_FILTER", METHOD).profiler(p.il.clone()),
        Config::WrapperEmpty => spec
            .env("CLRPROF_WRAP_FILTER", METHOD)
            .profiler(p.wrapper.clone()),
        Config::WrapperArgAndReturn => spec
            .env("CLRPROF_WRAP_FILTER", METHOD)
            .env("CLRPROF_WRAP_BENCH", "1")
            .profiler(p.wrapper.clone()),
        Config::WithInfo => spec
            .env("CLRPROF_CALLS_FILTER", METHOD)
            .env("CLRPROF_ELT", "withinfo")
            .env("CLRPROF_ELT_LEAVE", "1")
            .profiler(p.tracer.clone()),
        Config::WithInfoDecode => spec
            .env("CLRPROF_CALLS_FILTER", METHOD)
            .env("CLRPROF_ELT", "withinfo")
            .env("CLRPROF_ARGS", METHOD)
            .env("CLRPROF_ARGS_SINK", "1")
            .profiler(p.tracer.clone()),
    }
}

/// Checks each profiled run saw every call (the workload warms up with 1000
/// calls first), so a profiler that did nothing cannot look fast.
fn check(config: Config, outcome: &Outcome, calls: u64) -> crate::Result {
    outcome.check_exit()?;
    let want = calls + 1000;
    let got = match config {
        Config::None => return Ok(()),
        Config::IlEntryCounter => outcome
            .events("il_calls")
            .find(|r| r["method"] == METHOD)
            .and_then(|r| r["count"].as_u64()),
        Config::WrapperEmpty => outcome
            .events("wrapped")
            .find(|r| r["method"] == METHOD)
            .and_then(|r| r["return"].as_u64()),
        Config::WrapperArgAndReturn => outcome
            .events("wrap_bench")
            .next()
            .and_then(|r| r["calls"].as_u64()),
        Config::WithInfo => outcome
            .events("calls")
            .find(|r| r["method"] == METHOD)
            .and_then(|r| r["count"].as_u64()),
        Config::WithInfoDecode => outcome
            .events("args_decoded")
            .find(|r| r["arguments"] == r["returns"])
            .and_then(|r| r["returns"].as_u64()),
    };
    if got != Some(want) {
        return Err(format!(
            "{}: the profiler counted {got:?} calls of {METHOD}, expected {want}",
            config.name()
        )
        .into());
    }
    Ok(())
}
