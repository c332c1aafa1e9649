//! `cargo xtask bench sampler`: the overhead of the sampler example at
//! 100 Hz and 1 kHz, as the ratio of the workload's wall time to the
//! unprofiled run (median of at least 5 alternating runs each).
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 5,
//! at least 5), `--rounds N` (work per thread, default 2 000 000),
//! `--threads N` (default 2). Writes `target/bench/sampler.json`.

use crate::bench::{elapsed_ns, median};
use crate::provision;
use clrprof_testing::csharp::{compile, CompileOptions};
use clrprof_testing::run::{run_app, RunSpec};
use clrprof_testing::{discover, Os};
use std::time::Duration;

pub fn main(args: &[String]) -> crate::Result {
    let (mut leg_name, mut runs, mut rounds, mut threads) =
        ("linux-x64-8.0".to_string(), 5usize, 2_000_000u64, 2u32);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("bench sampler: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--rounds" => rounds = value.parse()?,
            "--threads" => threads = value.parse()?,
            other => return Err(format!("bench sampler: unknown option `{other}`").into()),
        }
    }
    if runs < 5 {
        return Err("bench sampler: --runs must be at least 5".into());
    }
    let root = provision::workspace_root();
    let cache = provision::cache_dir(None);
    let runtimes = discover();
    let leg = runtimes
        .leg(&leg_name)
        .ok_or_else(|| format!("leg {leg_name} is not provisioned (cargo xtask provision)"))?
        .clone();
    if leg.os != Os::Linux {
        eprintln!("warning: timings under Wine are not meaningful");
    }
    let out_dir = root.join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    println!("==> build the sampler example (release)");
    let path = clrprof_testing::build::build_cdylib("sampler", leg.os, true, &root)?;
    let profiler = clrprof_testing::run::Profiler {
        clsid: clrprof_testing::clsid::single_clsid(&path)?,
        path,
    };
    let compiler = runtimes
        .compiler()
        .ok_or("no C# compiler (install mono-mcs)")?;
    let options = CompileOptions {
        optimize: true,
        ..CompileOptions::default()
    };
    let app =
        compile(&compiler, &root.join("tests/apps/hot.cs"), &cache, options)?.for_leg(&leg)?;

    // (name, sampling rate; 0 = no profiler)
    let configs: [(&str, u32); 3] = [
        ("no-profiler", 0),
        ("sampler-100hz", 100),
        ("sampler-1khz", 1000),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
    println!("==> {runs} alternating runs, {threads} threads x {rounds} rounds, on {leg_name}");
    for round in 0..runs {
        for (i, (name, rate)) in configs.iter().enumerate() {
            let work = out_dir
                .join("runs/sampler")
                .join(name)
                .join(round.to_string());
            // Fully optimised code from the first call in every configuration:
            // tiering would otherwise differ between profiled and plain runs.
            let mut spec = RunSpec::new(&app, &work)
                .timeout(Duration::from_secs(600))
                .env("DOTNET_TieredCompilation", "0")
                .env("COMPlus_TieredCompilation", "0");
            spec.args = vec!["work".into(), rounds.to_string(), threads.to_string()];
            if *rate > 0 {
                spec = spec
                    .profiler(profiler.clone())
                    .env("CLRPROF_SAMPLER_RATE", &rate.to_string());
            }
            let outcome = run_app(&leg, runtimes.wine(), &spec)?;
            outcome.check_exit()?;
            let ns = elapsed_ns(&outcome)?;
            if *rate > 0 {
                let taken = samples_taken(&work.join("records.jsonl.jsonl"))?;
                if taken == 0 {
                    return Err(format!("{name}: the sampler took no samples").into());
                }
                samples[i].push(taken);
            }
            println!("  round {round} {name:<14} {:>9.2} ms", ns / 1e6);
            times[i].push(ns);
        }
    }
    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let ratio = |i: usize| med[i] / med[0];
    println!("\nmedians of {runs} runs:");
    for (i, (name, _)) in configs.iter().enumerate() {
        println!(
            "  {name:<14} {:>9.2} ms  ratio {:.3}",
            med[i] / 1e6,
            ratio(i)
        );
    }
    let json = serde_json::json!({
        "ratio_100hz": ratio(1),
        "ratio_1khz": ratio(2),
        "median_ns": configs.iter().enumerate().map(|(i, (n, _))| (n.to_string(), serde_json::json!(med[i]))).collect::<serde_json::Map<_, _>>(),
        "samples_100hz": samples[1],
        "samples_1khz": samples[2],
        "runtime": leg.version,
        "leg": leg.name,
        "runs": runs,
        "rounds": rounds,
        "threads": threads,
    });
    let path = out_dir.join("sampler.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

fn samples_taken(records: &std::path::Path) -> crate::Result<u64> {
    let text = std::fs::read_to_string(records)?;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["event"] == "samples" {
            return Ok(v["samples"].as_u64().unwrap_or(0));
        }
    }
    Err(format!("no samples record in {}", records.display()).into())
}
