//! `cargo xtask bench elt`: the cost of an ELT hook call under clrprof,
//! against a hand-written C profiler (see `benches/README.md`).
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 5,
//! at least 5), `--calls N` (hooked calls per run, default 20 000 000),
//! `--leave` (both profilers also register leave/tailcall hooks; by
//! default both count with the enter hook only, as a counting profiler
//! does).
//! Writes `target/bench/elt.json`.

use crate::bench::{elapsed_ns, median};
use crate::provision;
use clrprof_testing::csharp::{compile, CompileOptions};
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use clrprof_testing::{discover, Os};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// CLSID of `benches/elt/baseline/baseline.c`.
const BASELINE_CLSID: &str = "{6D1F6A1E-3C8B-4F7A-9E52-1B7C2D40E193}";

pub fn main(args: &[String]) -> crate::Result {
    let mut it = args.iter();
    let (mut leg_name, mut runs, mut calls) = ("linux-x64-8.0".to_string(), 5usize, 20_000_000u64);
    let mut leave = false;
    while let Some(a) = it.next() {
        if a == "--leave" {
            leave = true;
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
    elt(&leg_name, runs, calls, leave)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Config {
    None,
    BaselineFast,
    ClrprofFast,
    BaselineWithInfo,
    ClrprofWithInfo,
}

impl Config {
    const ALL: [Config; 5] = [
        Config::None,
        Config::BaselineFast,
        Config::ClrprofFast,
        Config::BaselineWithInfo,
        Config::ClrprofWithInfo,
    ];

    fn name(self) -> &'static str {
        match self {
            Config::None => "no-profiler",
            Config::BaselineFast => "c-baseline-fastpath",
            Config::ClrprofFast => "call-tracer-fastpath",
            Config::BaselineWithInfo => "c-baseline-withinfo",
            Config::ClrprofWithInfo => "call-tracer-withinfo",
        }
    }

    fn variant(self) -> &'static str {
        match self {
            Config::BaselineWithInfo | Config::ClrprofWithInfo => "withinfo",
            _ => "fastpath",
        }
    }
}

fn build_baseline(root: &Path, out_dir: &Path) -> crate::Result<PathBuf> {
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err("the C baseline has stubs for linux-x64 only".into());
    }
    let dir = root.join("benches/elt/baseline");
    let lib = out_dir.join("libelt_baseline.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o"])
        .arg(&lib)
        .arg(dir.join("baseline.c"))
        .arg(dir.join("baseline_x86_64_sysv.S"))
        .status()?;
    if !status.success() {
        return Err(format!("building the C baseline failed: {status}").into());
    }
    Ok(lib)
}

fn elt(leg_name: &str, runs: usize, calls: u64, leave: bool) -> crate::Result {
    let root = provision::workspace_root();
    let cache = provision::cache_dir(None);
    let runtimes = discover();
    let leg = runtimes
        .leg(leg_name)
        .ok_or_else(|| format!("leg {leg_name} is not provisioned (cargo xtask provision)"))?
        .clone();
    if leg.os != Os::Linux {
        eprintln!("warning: timings under Wine are not meaningful");
    }
    let out_dir = root.join("target/bench");
    std::fs::create_dir_all(&out_dir)?;

    println!("==> build call-tracer (release) and the C baseline");
    let tracer_path = clrprof_testing::build::build_cdylib("call-tracer", leg.os, true, &root)?;
    let tracer = Profiler {
        clsid: clrprof_testing::clsid::single_clsid(&tracer_path)?,
        path: tracer_path,
    };
    let baseline = Profiler {
        path: build_baseline(&root, &out_dir)?,
        clsid: BASELINE_CLSID.to_string(),
    };

    let compiler = runtimes
        .compiler()
        .ok_or("no C# compiler (install mono-mcs)")?;
    let source = root.join("benches/elt/workload.cs");
    let options = CompileOptions {
        optimize: true,
        ..CompileOptions::default()
    };
    let app = compile(&compiler, &source, &cache, options)?.for_leg(&leg)?;

    println!("==> {runs} alternating runs of {calls} calls on {leg_name}");
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); Config::ALL.len()];
    for round in 0..runs {
        for (i, config) in Config::ALL.iter().enumerate() {
            let work = out_dir
                .join("runs")
                .join(config.name())
                .join(round.to_string());
            let mut spec = RunSpec::new(&app, &work)
                .timeout(Duration::from_secs(600))
                // Fully optimised code from the first call: no tier-0 code
                // or background recompilation during the timed loop.
                .env("DOTNET_TieredCompilation", "0")
                .env("COMPlus_TieredCompilation", "0")
                .env("CLRPROF_ELT", config.variant())
                .env("CLRPROF_ELT_LEAVE", if leave { "1" } else { "0" });
            spec.args = vec![calls.to_string()];
            match config {
                Config::None => {}
                Config::BaselineFast | Config::BaselineWithInfo => {
                    spec = spec.profiler(baseline.clone());
                }
                Config::ClrprofFast | Config::ClrprofWithInfo => {
                    spec = spec.profiler(tracer.clone());
                }
            }
            let outcome = run_app(&leg, runtimes.wine(), &spec)?;
            match config {
                Config::ClrprofFast | Config::ClrprofWithInfo => outcome.check()?,
                _ => outcome.check_exit()?,
            }
            let ns = elapsed_ns(&outcome)?;
            check_counted(*config, &outcome, calls)?;
            println!("  round {round} {:<22} {:>8.2} ms", config.name(), ns / 1e6);
            times[i].push(ns);
        }
    }

    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let added = |c: Config| med[c as usize] - med[Config::None as usize];
    let per_call = |c: Config| added(c) / calls as f64;
    let fast_ratio = added(Config::ClrprofFast) / added(Config::BaselineFast);
    let info_ratio = added(Config::ClrprofWithInfo) / added(Config::BaselineWithInfo);

    let hooks = if leave {
        "one enter and one leave hook"
    } else {
        "one enter hook"
    };
    println!("\nmedians of {runs} runs, {calls} hooked calls each ({hooks} per call):");
    for c in Config::ALL {
        println!(
            "  {:<22} {:>9.2} ms  {:>7.2} ns/call added",
            c.name(),
            med[c as usize] / 1e6,
            per_call(c)
        );
    }
    println!("fast path: clrprof adds {:.2} ns per hooked call, the C baseline {:.2}; ratio {fast_ratio:.3}",
        per_call(Config::ClrprofFast), per_call(Config::BaselineFast));
    println!("WithInfo:  clrprof adds {:.2} ns per hooked call, the C baseline {:.2}; ratio {info_ratio:.3}",
        per_call(Config::ClrprofWithInfo), per_call(Config::BaselineWithInfo));
    println!("target: ratio <= 1.10");

    let json = serde_json::json!({
        "fastpath_ratio": fast_ratio,
        "withinfo_ratio": info_ratio,
        "ns_per_call_fastpath": per_call(Config::ClrprofFast),
        "ns_per_call_withinfo": per_call(Config::ClrprofWithInfo),
        "baseline_ns_per_call_fastpath": per_call(Config::BaselineFast),
        "baseline_ns_per_call_withinfo": per_call(Config::BaselineWithInfo),
        "runtime": leg.version,
        "leg": leg.name,
        "calls": calls,
        "runs": runs,
        "hooks": if leave { "enter+leave+tailcall" } else { "enter" },
        "median_ns": Config::ALL.iter().map(|c| (c.name().to_string(), serde_json::json!(med[*c as usize]))).collect::<serde_json::Map<_, _>>(),
    });
    let path = out_dir.join("elt.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Checks that the profiled run really counted the workload's calls, so a
/// profiler that silently hooked nothing cannot look fast.
fn check_counted(config: Config, outcome: &Outcome, calls: u64) -> crate::Result {
    // The timed loop plus the warm-up.
    let expected = calls + 1000;
    match config {
        Config::None => Ok(()),
        Config::ClrprofFast | Config::ClrprofWithInfo => {
            let step = outcome
                .events("calls")
                .find(|r| r["method"] == "Bench.Workload::Step")
                .and_then(|r| r["count"].as_u64());
            if step != Some(expected) {
                return Err(format!(
                    "call-tracer counted {step:?} calls of Step, expected {expected}"
                )
                .into());
            }
            Ok(())
        }
        Config::BaselineFast | Config::BaselineWithInfo => {
            let total: u64 = outcome
                .events("baseline-total")
                .filter_map(|v| v["count"].as_u64())
                .sum();
            if total < expected {
                return Err(format!(
                    "the C baseline counted {total} calls, expected at least {expected}"
                )
                .into());
            }
            Ok(())
        }
    }
}
