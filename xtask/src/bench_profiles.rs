//! `cargo xtask bench profiles`: what the allocation profile costs on an
//! allocation-heavy program (apps/profiles.cs `bench`: 2 000 000 small
//! objects and 50 000 arrays of 4 000 bytes per unit of scale), as the
//! ratio of the loops' wall time to the unprofiled run (median of at least
//! 5 alternating runs each), for: the runtime's `GCAllocationTick` events
//! (`CLRPROF_SAMPLER_PROFILES=alloc`: walks within the default budget of
//! 0.5 % of the time), the same with every tick walked
//! (`CLRPROF_SAMPLER_ALLOC_BUDGET=100`), the `ObjectAllocated` fallback (a
//! callback per object, a walk per 100 KB a thread allocates), and the lock
//! and exception profiles on the same program (none happen: their idle cost).
//! The sampler's CPU and wall profiles are `bench sampler`'s.
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 7,
//! at least 5), `--scale N` (default 2). Writes `target/bench/profiles.json`.
//!
//! `--callgrind`: instead of timing, runs each configuration at scales 1
//! and 3 under `valgrind --tool=callgrind` and compares the instructions
//! the two more units of work added with and without the profile (start-up
//! and JIT cancel out): a ratio the machine's load does not move. Writes
//! `target/bench/profiles-callgrind.json`. `--only NAME` (repeatable)
//! measures only those configurations beside the unprofiled one.

use crate::measure::{elapsed_ns, median, Setup};
use clrprof_testing::run::Profiler;
use clrprof_testing::run::{run_app, RunSpec};
use std::time::Duration;

/// (name, environment; None = no profiler)
type Config = (
    &'static str,
    Option<&'static [(&'static str, &'static str)]>,
);
const CONFIGS: [Config; 5] = [
    ("no-profiler", None),
    (
        "alloc-events",
        Some(&[("CLRPROF_SAMPLER_PROFILES", "alloc")]),
    ),
    (
        "alloc-events-every-walk",
        Some(&[
            ("CLRPROF_SAMPLER_PROFILES", "alloc"),
            ("CLRPROF_SAMPLER_ALLOC_BUDGET", "100"),
        ]),
    ),
    (
        "alloc-object-allocated",
        Some(&[
            ("CLRPROF_SAMPLER_PROFILES", "alloc"),
            ("CLRPROF_SAMPLER_ALLOC_SOURCE", "object-allocated"),
        ]),
    ),
    (
        "lock-exception",
        Some(&[("CLRPROF_SAMPLER_PROFILES", "lock,exception")]),
    ),
];

pub fn main(args: &[String]) -> crate::Result {
    let (mut leg_name, mut runs, mut scale) = ("linux-x64-8.0".to_string(), 7usize, 2u32);
    let mut callgrind = false;
    let mut only: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--callgrind" {
            callgrind = true;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("bench profiles: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--scale" => scale = value.parse()?,
            "--only" => only.push(value.clone()),
            other => return Err(format!("bench profiles: unknown option `{other}`").into()),
        }
    }
    if runs < 5 {
        return Err("bench profiles: --runs must be at least 5".into());
    }
    let setup = Setup::open("profiles", &leg_name)?;
    let (leg, out_dir, runtimes) = (&setup.leg, &setup.out_dir, &setup.runtimes);
    println!("==> build the sampler example (release)");
    let profiler = setup.release_profiler("sampler")?;
    let app = setup.app("tests/apps/profiles.cs")?;

    if callgrind {
        return under_callgrind(&setup, &profiler, &app, &only);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); CONFIGS.len()];
    let mut events: Vec<Vec<u64>> = vec![Vec::new(); CONFIGS.len()];
    let mut walks: Vec<Vec<u64>> = vec![Vec::new(); CONFIGS.len()];
    println!("==> {runs} alternating runs, scale {scale}, on {leg_name}");
    for round in 0..runs {
        for (i, (name, env)) in CONFIGS.iter().enumerate() {
            let work = out_dir
                .join("runs/profiles")
                .join(name)
                .join(round.to_string());
            let spec = bench_spec(&app, &work, scale, *env, &profiler)?;
            let outcome = run_app(leg, runtimes.wine(), &spec)?;
            outcome.check_exit()?;
            let ns = elapsed_ns(&outcome)?;
            if env.is_some() {
                let (samples, walked) = event_count(&work.join("records.jsonl.jsonl"))?;
                events[i].push(samples);
                walks[i].push(walked);
            }
            println!("  round {round} {name:<24} {:>9.2} ms", ns / 1e6);
            times[i].push(ns);
        }
    }
    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let ratio = |i: usize| med[i] / med[0];
    println!("\nmedians of {runs} runs:");
    for (i, (name, _)) in CONFIGS.iter().enumerate() {
        println!(
            "  {name:<24} {:>9.2} ms  ratio {:.3}  samples {:?}  walked {:?}",
            med[i] / 1e6,
            ratio(i),
            events[i],
            walks[i]
        );
    }
    let json = serde_json::json!({
        "ratio_alloc_events": ratio(1),
        "ratio_alloc_events_every_walk": ratio(2),
        "ratio_alloc_object_allocated": ratio(3),
        "ratio_lock_exception": ratio(4),
        "median_ns": CONFIGS.iter().enumerate().map(|(i, (n, _))| (n.to_string(), serde_json::json!(med[i]))).collect::<serde_json::Map<_, _>>(),
        "alloc_samples_events": events[1],
        "alloc_samples_events_every_walk": events[2],
        "alloc_samples_object_allocated": events[3],
        "alloc_walks_events": walks[1],
        "runtime": leg.version,
        "leg": leg.name,
        "runs": runs,
        "scale": scale,
    });
    let path = out_dir.join("profiles.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The app's `bench <scale>` run in an empty `work` directory (the sampler
/// appends its records), tiered compilation off, under the sampler with
/// `env` (none: no profiler).
fn bench_spec(
    app: &std::path::Path,
    work: &std::path::Path,
    scale: u32,
    env: Option<&[(&str, &str)]>,
    profiler: &Profiler,
) -> crate::Result<RunSpec> {
    if work.exists() {
        std::fs::remove_dir_all(work)?;
    }
    std::fs::create_dir_all(work)?;
    let mut spec = RunSpec::new(app, work)
        .timeout(Duration::from_secs(1800))
        .env("DOTNET_TieredCompilation", "0")
        .env("COMPlus_TieredCompilation", "0");
    spec.args = vec!["bench".into(), scale.to_string()];
    if let Some(env) = env {
        spec = spec.profiler(profiler.clone());
        for (k, v) in env {
            spec = spec.env(k, v);
        }
    }
    Ok(spec)
}

/// The allocation samples of one run (`event-profiles` record: events
/// plus `ObjectAllocated` samples) and how many of them were walked.
fn event_count(records: &std::path::Path) -> crate::Result<(u64, u64)> {
    let text = std::fs::read_to_string(records)?;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["event"] == "event-profiles" {
            let n = |k: &str| v[k].as_u64().unwrap_or(0);
            return Ok((n("alloc_events") + n("object_samples"), n("alloc_walks")));
        }
    }
    Err(format!("no event-profiles record in {}", records.display()).into())
}

/// The callgrind comparison (see the module docs).
fn under_callgrind(
    setup: &Setup,
    profiler: &Profiler,
    app: &std::path::Path,
    only: &[String],
) -> crate::Result {
    const SCALES: [u32; 2] = [1, 3];
    println!(
        "==> callgrind on {}: scales {SCALES:?} per configuration",
        setup.leg.name
    );
    let mut added = [0f64; CONFIGS.len()];
    let mut rows = serde_json::Map::new();
    for (i, (name, env)) in CONFIGS.iter().enumerate() {
        if i > 0 && !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let mut totals = [0u64; 2];
        let mut walked = [0u64; 2];
        for (k, scale) in SCALES.iter().enumerate() {
            let work = setup
                .out_dir
                .join("callgrind-profiles")
                .join(format!("{name}-{scale}"));
            let spec = bench_spec(app, &work, *scale, *env, profiler)?;
            let (_outcome, total) = setup.under_callgrind(spec, &work)?;
            totals[k] = total;
            if env.is_some() {
                walked[k] = event_count(&work.join("records.jsonl.jsonl"))?.1;
            }
        }
        added[i] = totals[1] as f64 - totals[0] as f64;
        let ratio = added[i] / added[0];
        println!(
            "  {name:<24} {:>14} / {:>14} instructions, {:.0} added; ratio {ratio:.3}; walked {walked:?}",
            totals[0], totals[1], added[i]
        );
        rows.insert(
            name.to_string(),
            serde_json::json!({"instructions": totals, "added": added[i], "ratio": ratio, "walked": walked}),
        );
    }
    let json = serde_json::json!({
        "configurations": rows,
        "scales": SCALES,
        "leg": setup.leg.name,
        "runtime": setup.leg.version,
    });
    let path = setup.out_dir.join("profiles-callgrind.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}
