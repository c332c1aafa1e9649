//! `cargo xtask bench profiles`: what the allocation profile costs on an
//! allocation-heavy program (apps/profiles.cs `bench`: 2 000 000 small
//! objects and 50 000 arrays of 4 000 bytes per unit of scale), as the
//! ratio of the loops' wall time to the unprofiled run (median of at least
//! 5 alternating runs each), for: the runtime's `GCAllocationTick` events
//! (`CLRPROF_SAMPLER_PROFILES=alloc`), the `ObjectAllocated` fallback (a
//! callback per object, a walk per 100 KB a thread allocates), and the lock
//! and exception profiles on the same program (none happen: their idle cost).
//! The sampler's CPU and wall profiles are `bench sampler`'s.
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 7,
//! at least 5), `--scale N` (default 2). Writes `target/bench/profiles.json`.

use crate::measure::{elapsed_ns, median, Setup};
use clrprof_testing::run::{run_app, RunSpec};
use std::time::Duration;

pub fn main(args: &[String]) -> crate::Result {
    let (mut leg_name, mut runs, mut scale) = ("linux-x64-8.0".to_string(), 7usize, 2u32);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("bench profiles: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--scale" => scale = value.parse()?,
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

    // (name, environment; None = no profiler)
    type Config = (
        &'static str,
        Option<&'static [(&'static str, &'static str)]>,
    );
    let configs: [Config; 4] = [
        ("no-profiler", None),
        (
            "alloc-events",
            Some(&[("CLRPROF_SAMPLER_PROFILES", "alloc")]),
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
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut events: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
    println!("==> {runs} alternating runs, scale {scale}, on {leg_name}");
    for round in 0..runs {
        for (i, (name, env)) in configs.iter().enumerate() {
            let work = out_dir
                .join("runs/profiles")
                .join(name)
                .join(round.to_string());
            // The sampler appends its records: start from an empty directory.
            if work.exists() {
                std::fs::remove_dir_all(&work)?;
            }
            std::fs::create_dir_all(&work)?;
            let mut spec = RunSpec::new(&app, &work)
                .timeout(Duration::from_secs(600))
                .env("DOTNET_TieredCompilation", "0")
                .env("COMPlus_TieredCompilation", "0");
            spec.args = vec!["bench".into(), scale.to_string()];
            if let Some(env) = env {
                spec = spec.profiler(profiler.clone());
                for (k, v) in env.iter() {
                    spec = spec.env(k, v);
                }
            }
            let outcome = run_app(leg, runtimes.wine(), &spec)?;
            outcome.check_exit()?;
            let ns = elapsed_ns(&outcome)?;
            if env.is_some() {
                events[i].push(event_count(&work.join("records.jsonl.jsonl"))?);
            }
            println!("  round {round} {name:<24} {:>9.2} ms", ns / 1e6);
            times[i].push(ns);
        }
    }
    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let ratio = |i: usize| med[i] / med[0];
    println!("\nmedians of {runs} runs:");
    for (i, (name, _)) in configs.iter().enumerate() {
        println!(
            "  {name:<24} {:>9.2} ms  ratio {:.3}  samples {:?}",
            med[i] / 1e6,
            ratio(i),
            events[i]
        );
    }
    let json = serde_json::json!({
        "ratio_alloc_events": ratio(1),
        "ratio_alloc_object_allocated": ratio(2),
        "ratio_lock_exception": ratio(3),
        "median_ns": configs.iter().enumerate().map(|(i, (n, _))| (n.to_string(), serde_json::json!(med[i]))).collect::<serde_json::Map<_, _>>(),
        "alloc_samples_events": events[1],
        "alloc_samples_object_allocated": events[2],
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

/// The allocation samples of one run (`event-profiles` record: events
/// plus `ObjectAllocated` samples).
fn event_count(records: &std::path::Path) -> crate::Result<u64> {
    let text = std::fs::read_to_string(records)?;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["event"] == "event-profiles" {
            let n = |k: &str| v[k].as_u64().unwrap_or(0);
            return Ok(n("alloc_events") + n("object_samples"));
        }
    }
    Err(format!("no event-profiles record in {}", records.display()).into())
}
