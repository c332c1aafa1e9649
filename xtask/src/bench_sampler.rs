//! `cargo xtask bench sampler`: the overhead of the sampler example at
//! 100 Hz and 1 kHz, as the ratio of the workload's wall time to the
//! unprofiled run (median of at least 5 alternating runs each), with where
//! the sampling thread's time went per tick (the `samples` record's phase
//! totals divided by its ticks: median over the runs) and the samples taken.
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 7,
//! at least 5), `--rounds N` (work per thread, default 2 000 000),
//! `--threads N` (default 2). Writes `target/bench/sampler.json`.
//!
//! `--idle N[,N...]` measures instead what idle threads cost: the loop on
//! one thread beside N threads waiting on one event (the `hot` app's
//! `work` mode), without a profiler, under the sampler with the runtime's
//! suspension and with signals, each at 100 Hz CPU and wall time (median
//! of the runs, alternating); with `--rate HZ` another rate. Writes
//! `target/bench/sampler-idle.json`.
//!
//! `--callgrind` counts instead what the signal handler costs per sample,
//! in instructions: the `hot` app's loop (`--rounds`, default 200 000 here,
//! on one thread beside 8 idle ones) under `valgrind --tool=callgrind`
//! with the sampler's signal source at `--rate` (default 100 Hz: the
//! sampling thread, slowed by callgrind, must keep the rings from filling),
//! the handler's inclusive cost (callgrind counts a handler as a call
//! stack of its own) over its calls (its own account: the
//! `signal-samples` record). The kernel's delivery of the signal and the return from
//! it are not counted. Writes `target/bench/sampler-handler.json`.

use crate::measure::{elapsed_ns, median, Setup};
use clrprof_testing::run::{run_app, RunSpec};
use std::time::Duration;

pub fn main(args: &[String]) -> crate::Result {
    let (mut leg_name, mut runs, mut rounds, mut threads) =
        ("linux-x64-8.0".to_string(), 7usize, 2_000_000u64, 2u32);
    let mut idle: Option<Vec<usize>> = None;
    let mut rate: Option<u32> = None;
    let mut callgrind = false;
    let mut profiles: Option<String> = None;
    let mut rounds_given = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--callgrind" {
            callgrind = true;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("bench sampler: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--rounds" => {
                rounds = value.parse()?;
                rounds_given = true;
            }
            "--threads" => threads = value.parse()?,
            "--profiles" => profiles = Some(value.clone()),
            "--rate" => rate = Some(value.parse()?),
            "--idle" => {
                idle = Some(
                    value
                        .split(',')
                        .map(|n| n.trim().parse::<usize>())
                        .collect::<Result<_, _>>()?,
                )
            }
            other => return Err(format!("bench sampler: unknown option `{other}`").into()),
        }
    }
    if callgrind {
        let rounds = if rounds_given { rounds } else { 200_000 };
        let profiles = profiles.as_deref().unwrap_or("cpu");
        return handler_instructions(&leg_name, rounds, rate.unwrap_or(100), profiles);
    }
    if runs < 5 {
        return Err("bench sampler: --runs must be at least 5".into());
    }
    if let Some(idle) = idle {
        return idle_threads(&leg_name, runs, rounds, rate.unwrap_or(100), &idle);
    }
    let setup = Setup::open("sampler", &leg_name)?;
    let (leg, out_dir, runtimes) = (&setup.leg, &setup.out_dir, &setup.runtimes);
    println!("==> build the sampler example (release)");
    let profiler = setup.release_profiler("sampler")?;
    let app = setup.app("tests/apps/hot.cs")?;

    // (name, sampling rate; 0 = no profiler)
    let configs: [(&str, u32); 3] = [
        ("no-profiler", 0),
        ("sampler-100hz", 100),
        ("sampler-1khz", 1000),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
    let mut phases: Vec<Vec<Phases>> = vec![Vec::new(); configs.len()];
    // CPU time of the whole process over the timed part (every thread, the
    // sampling thread included), where the app can tell (Linux).
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    println!("==> {runs} alternating runs, {threads} threads x {rounds} rounds, on {leg_name}");
    for round in 0..runs {
        for (i, (name, rate)) in configs.iter().enumerate() {
            let work = out_dir
                .join("runs/sampler")
                .join(name)
                .join(round.to_string());
            // The sampler appends its records: a directory left by an
            // earlier invocation would be read instead of this run's.
            if work.exists() {
                std::fs::remove_dir_all(&work)?;
            }
            std::fs::create_dir_all(&work)?;
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
            let outcome = run_app(leg, runtimes.wine(), &spec)?;
            outcome.check_exit()?;
            let ns = elapsed_ns(&outcome)?;
            if let Some(c) = outcome
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("cpu_ns "))
                .and_then(|c| c.trim().parse::<f64>().ok())
            {
                cpu[i].push(c);
            }
            if *rate > 0 {
                let (taken, per_tick) = samples_record(&work.join("records.jsonl.jsonl"))?;
                if taken == 0 {
                    return Err(format!("{name}: the sampler took no samples").into());
                }
                samples[i].push(taken);
                phases[i].push(per_tick);
            }
            println!("  round {round} {name:<14} {:>9.2} ms", ns / 1e6);
            times[i].push(ns);
        }
    }
    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let ratio = |i: usize| med[i] / med[0];
    let cpu_med: Vec<Option<f64>> = cpu
        .iter_mut()
        .map(|c| (c.len() == runs).then(|| median(c)))
        .collect();
    let cpu_ratio = |i: usize| match (cpu_med[i], cpu_med[0]) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    println!("\nmedians of {runs} runs:");
    for (i, (name, _)) in configs.iter().enumerate() {
        println!(
            "  {name:<14} {:>9.2} ms  ratio {:.3}{}",
            med[i] / 1e6,
            ratio(i),
            match (cpu_med[i], cpu_ratio(i)) {
                (Some(c), Some(r)) => format!("   process CPU {:.2} ms, ratio {r:.3}", c / 1e6),
                _ => String::new(),
            }
        );
    }
    println!("\nper tick (median of the runs' means), microseconds:");
    println!(
        "  {:<14} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7} {:>9}",
        "", "ticks", "suspend", "walk", "resume", "count", "late", "cpu"
    );
    let per_tick: Vec<serde_json::Value> = (0..configs.len())
        .map(|i| per_tick_json(&mut phases[i]))
        .collect();
    for (i, (name, rate)) in configs.iter().enumerate() {
        if *rate == 0 {
            continue;
        }
        let p = &per_tick[i];
        let us = |k: &str| p[k].as_f64().unwrap_or(0.0) / 1e3;
        println!(
            "  {name:<14} {:>7} {:>8.1} {:>7.1} {:>7.1} {:>7.2} {:>7.1} {:>9.1}",
            p["ticks"],
            us("suspend_ns"),
            us("walk_ns"),
            us("resume_ns"),
            us("count_ns"),
            us("late_ns"),
            us("thread_cpu_ns")
        );
    }
    let json = serde_json::json!({
        "ratio_100hz": ratio(1),
        "ratio_1khz": ratio(2),
        "median_ns": configs.iter().enumerate().map(|(i, (n, _))| (n.to_string(), serde_json::json!(med[i]))).collect::<serde_json::Map<_, _>>(),
        "samples_100hz": samples[1],
        "samples_1khz": samples[2],
        "cpu_ratio_100hz": cpu_ratio(1),
        "cpu_ratio_1khz": cpu_ratio(2),
        "median_cpu_ns": configs.iter().enumerate().map(|(i, (n, _))| (n.to_string(), serde_json::json!(cpu_med[i]))).collect::<serde_json::Map<_, _>>(),
        "per_tick_100hz": per_tick[1],
        "per_tick_1khz": per_tick[2],
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

/// One run's `samples` record: samples taken, and the sampling thread's
/// cost per tick (phase totals divided by ticks), in nanoseconds.
#[derive(Clone, Copy, Default)]
struct Phases {
    ticks: f64,
    suspend: f64,
    walk: f64,
    resume: f64,
    count: f64,
    late: f64,
    cpu: f64,
}

fn samples_record(records: &std::path::Path) -> crate::Result<(u64, Phases)> {
    let text = std::fs::read_to_string(records)?;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["event"] == "samples" {
            let n = |k: &str| v[k].as_u64().unwrap_or(0) as f64;
            let ticks = n("ticks").max(1.0);
            let phases = Phases {
                ticks: n("ticks"),
                suspend: n("suspend_ns") / ticks,
                walk: n("walk_ns") / ticks,
                resume: n("resume_ns") / ticks,
                count: n("count_ns") / ticks,
                late: n("late_ns") / ticks,
                cpu: n("thread_cpu_ns") / ticks,
            };
            return Ok((v["samples"].as_u64().unwrap_or(0), phases));
        }
    }
    Err(format!("no samples record in {}", records.display()).into())
}

/// Medians over the runs of each per-tick figure (ns), and of the ticks.
fn per_tick_json(runs: &mut [Phases]) -> serde_json::Value {
    if runs.is_empty() {
        return serde_json::Value::Null;
    }
    let med = |f: fn(&Phases) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        median(&mut v)
    };
    serde_json::json!({
        "ticks": med(|p| p.ticks),
        "suspend_ns": med(|p| p.suspend),
        "walk_ns": med(|p| p.walk),
        "resume_ns": med(|p| p.resume),
        "count_ns": med(|p| p.count),
        "late_ns": med(|p| p.late),
        "thread_cpu_ns": med(|p| p.cpu),
    })
}

/// `--idle`: the loop's wall time beside `idle` waiting threads, plain and
/// under each source at `rate`, as ratios to the plain run of the same N.
fn idle_threads(
    leg_name: &str,
    runs: usize,
    rounds: u64,
    rate: u32,
    idle: &[usize],
) -> crate::Result {
    let setup = Setup::open("sampler", leg_name)?;
    let (leg, out_dir, runtimes) = (&setup.leg, &setup.out_dir, &setup.runtimes);
    println!("==> build the sampler example (release)");
    let profiler = setup.release_profiler("sampler")?;
    let app = setup.app("tests/apps/hot.cs")?;
    // (name, source; None = no profiler)
    let configs: [(&str, Option<&str>); 3] = [
        ("no-profiler", None),
        ("suspend-runtime", Some("suspend-runtime")),
        ("signals", Some("signals")),
    ];
    let mut results = serde_json::Map::new();
    println!("==> {runs} alternating runs per N, the loop of {rounds} rounds on one thread, {rate} Hz, on {leg_name}");
    for &n in idle {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
        let mut taken: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
        for round in 0..runs {
            for (i, (name, source)) in configs.iter().enumerate() {
                let work = out_dir
                    .join("runs/sampler-idle")
                    .join(n.to_string())
                    .join(name)
                    .join(round.to_string());
                if work.exists() {
                    std::fs::remove_dir_all(&work)?;
                }
                std::fs::create_dir_all(&work)?;
                let mut spec = RunSpec::new(&app, &work)
                    .timeout(Duration::from_secs(600))
                    .env("DOTNET_TieredCompilation", "0")
                    .env("COMPlus_TieredCompilation", "0");
                spec.args = vec!["work".into(), rounds.to_string(), "1".into(), n.to_string()];
                if let Some(source) = source {
                    spec = spec
                        .profiler(profiler.clone())
                        .env("CLRPROF_SAMPLER_RATE", &rate.to_string())
                        .env("CLRPROF_SAMPLER_SOURCE", source);
                }
                let outcome = run_app(leg, runtimes.wine(), &spec)?;
                outcome.check_exit()?;
                let ns = elapsed_ns(&outcome)?;
                if source.is_some() {
                    let (samples, _) = samples_record(&work.join("records.jsonl.jsonl"))?;
                    taken[i].push(samples);
                }
                println!("  N={n:<5} round {round} {name:<16} {:>9.2} ms", ns / 1e6);
                times[i].push(ns);
            }
        }
        let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
        println!(
            "  N={n}: plain {:.2} ms, suspend-runtime {:.3}, signals {:.3}",
            med[0] / 1e6,
            med[1] / med[0],
            med[2] / med[0]
        );
        results.insert(
            n.to_string(),
            serde_json::json!({
                "plain_ns": med[0],
                "suspend_runtime_ratio": med[1] / med[0],
                "signals_ratio": med[2] / med[0],
                "suspend_runtime_samples": taken[1],
                "signals_samples": taken[2],
            }),
        );
    }
    let json = serde_json::json!({
        "idle": results,
        "rate_hz": rate,
        "runtime": leg.version,
        "leg": leg.name,
        "runs": runs,
        "rounds": rounds,
    });
    let path = out_dir.join("sampler-idle.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

/// `--callgrind`: the signal handler's instructions per call, from one run
/// of the `hot` app under callgrind with the signal source at `rate`.
fn handler_instructions(leg_name: &str, rounds: u64, rate: u32, profiles: &str) -> crate::Result {
    let setup = Setup::open("sampler", leg_name)?;
    println!("==> build the sampler example (release)");
    let profiler = setup.release_profiler("sampler")?;
    let app = setup.app("tests/apps/hot.cs")?;
    let work = setup.out_dir.join("runs/sampler-handler");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    std::fs::create_dir_all(&work)?;
    let mut spec = RunSpec::new(&app, &work)
        .timeout(Duration::from_secs(1800))
        .env("DOTNET_TieredCompilation", "0")
        .env("COMPlus_TieredCompilation", "0")
        .profiler(profiler)
        .env("CLRPROF_SAMPLER_RATE", &rate.to_string())
        .env("CLRPROF_SAMPLER_SOURCE", "signals")
        .env("CLRPROF_SAMPLER_PROFILES", profiles);
    spec.args = vec!["work".into(), rounds.to_string(), "1".into(), "8".into()];
    println!("==> hot.cs, {rounds} rounds beside 8 idle threads, signals at {rate} Hz ({profiles}), under callgrind on {leg_name}");
    let (outcome, total) = setup.under_callgrind(spec, &work)?;
    let inclusive = handler_cost(&work.join("callgrind.out"), "signals::imp::on_signal")?;
    let (samples, _) = samples_record(&work.join("records.jsonl.jsonl"))?;
    // The handler's own account: each call ends as one of these.
    let stats = signal_samples_record(&work.join("records.jsonl.jsonl"))?;
    let n = |k: &str| stats[k].as_u64().unwrap_or(0);
    let calls = n("taken") + n("foreign") + n("off_stack") + n("in_fault");
    // A call that finds its thread's ring full returns before the walk
    // (three loads and an add): counted apart, and the cost per walk is
    // given as the bound of every instruction over the calls that walked.
    let dropped = n("ring_dropped");
    let walked = calls.saturating_sub(dropped);
    if calls == 0 || inclusive == 0 {
        return Err(format!(
            "the signal handler never ran under callgrind ({inclusive} instructions counted in it; \
             samples record: {samples}; stderr: {})",
            outcome.stderr.lines().last().unwrap_or("")
        )
        .into());
    }
    if std::env::var_os("CLRPROF_GATE_KEEP").is_none() {
        let _ = std::fs::remove_file(work.join("callgrind.out"));
    }
    let per_call = inclusive as f64 / calls as f64;
    let per_walk = inclusive as f64 / walked.max(1) as f64;
    println!(
        "  handler: {calls} calls ({dropped} found their ring full), {inclusive} instructions \
         inclusive: {per_call:.1} per call, at most {per_walk:.1} per walk ({samples} samples \
         written; the process {total} instructions)"
    );
    let json = serde_json::json!({
        "leg": setup.leg.name,
        "runtime": setup.leg.version,
        "rate_hz": rate,
        "profiles": profiles,
        "rounds": rounds,
        "handler_calls": calls,
        "ring_full": dropped,
        "per_walk_at_most": per_walk,
        "handler_instructions": inclusive,
        "per_call": per_call,
        "samples": samples,
        "process_instructions": total,
    });
    let path = setup.out_dir.join("sampler-handler.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The inclusive instructions of the functions whose name contains
/// `needle` in a callgrind profile, where callgrind counts them as the
/// base of a call stack of their own (a signal handler: the profile has
/// no call edge into it). Their blocks (`fn=` up to the next `fn=`) hold
/// their own cost lines and, after each `calls=`, the callee's inclusive
/// cost: the sum of the first cost column (Ir) of every cost line there.
/// Names are compressed (`(id) name` the first time, `(id)` after), as
/// callgrind writes them by default.
fn handler_cost(profile: &std::path::Path, needle: &str) -> crate::Result<u64> {
    let text = std::fs::read_to_string(profile)?;
    let mut names: std::collections::HashMap<String, String> = Default::default();
    let mut inside = false;
    let mut total = 0u64;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("fn=") {
            let rest = rest.trim();
            let name = match rest.strip_prefix('(').and_then(|r| r.split_once(')')) {
                Some((id, name)) if !name.trim().is_empty() => {
                    names.insert(id.to_string(), name.trim().to_string());
                    name.trim().to_string()
                }
                Some((id, _)) => names.get(id).cloned().unwrap_or_default(),
                None => rest.to_string(),
            };
            inside = name.contains(needle);
            continue;
        }
        if let Some(rest) = line.strip_prefix("cfn=") {
            // Keep the table of compressed names whole.
            if let Some((id, name)) = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.split_once(')'))
            {
                if !name.trim().is_empty() {
                    names.insert(id.to_string(), name.trim().to_string());
                }
            }
            continue;
        }
        if !inside {
            continue;
        }
        let cost_line = line
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '+' || c == '-' || c == '*');
        if cost_line {
            if let Some(ir) = line
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse::<u64>().ok())
            {
                total += ir;
            }
        }
    }
    Ok(total)
}

/// A run's `signal-samples` record (the signal handler's own account).
fn signal_samples_record(records: &std::path::Path) -> crate::Result<serde_json::Value> {
    let text = std::fs::read_to_string(records)?;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["event"] == "signal-samples" {
            return Ok(v);
        }
    }
    Err(format!("no signal-samples record in {}", records.display()).into())
}
