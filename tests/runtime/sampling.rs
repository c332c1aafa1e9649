//! The sampler example on real runtimes: the hot method dominates the
//! samples, stacks are well formed, a 10 s multithreaded run at 1 kHz ends
//! cleanly, and runtimes without `SuspendRuntime` say what they do instead.
//!
//! The sampler writes folded stacks to `CLRPROF_OUTPUT` (not JSON Lines), so
//! these scenarios check the exit with `check_exit` and read the record file
//! (`CLRPROF_OUTPUT.jsonl`) and the folded file themselves.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::{Outcome, RunSpec};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Sampled {
    outcome: Outcome,
    records: Vec<Value>,
    folded: Vec<(String, u64)>,
    speedscope: Option<Value>,
    pprof: Option<Vec<u8>>,
}

fn read_records(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("no record file {}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("bad record {l:?}: {e}")))
        .collect()
}

/// Parses folded stacks: `frame;frame;... N` per line.
fn parse_folded(text: &str) -> Result<Vec<(String, u64)>, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (stack, n) = l
                .rsplit_once(' ')
                .ok_or_else(|| format!("folded line without a count: {l:?}"))?;
            let n: u64 = n
                .parse()
                .map_err(|_| format!("folded line with a bad count: {l:?}"))?;
            Ok((stack.to_string(), n))
        })
        .collect()
}

fn sample(
    case: &Case<'_>,
    args: &[&str],
    rate: u32,
    timeout: Duration,
    source: Option<&str>,
) -> Result<Sampled, Verdict> {
    sample_app(case, "hot", args, rate, timeout, source)
}

fn sample_app(
    case: &Case<'_>,
    app: &str,
    args: &[&str],
    rate: u32,
    timeout: Duration,
    source: Option<&str>,
) -> Result<Sampled, Verdict> {
    let app = case.app(app)?;
    let profiler = case.profiler("sampler")?;
    let mut spec: RunSpec = case
        .spec(&app)
        .profiler(profiler)
        .env("CLRPROF_SAMPLER_RATE", &rate.to_string())
        .timeout(timeout);
    if let Some(source) = source {
        spec = spec.env("CLRPROF_SAMPLER_SOURCE", source);
    }
    spec.args = args.iter().map(|s| s.to_string()).collect();
    let folded_path: PathBuf = spec.work_dir.join("records.jsonl");
    let records_path = spec.work_dir.join("records.jsonl.jsonl");
    let speedscope_path = spec.work_dir.join("records.jsonl.speedscope.json");
    let pprof_path = spec.work_dir.join("records.jsonl.pb.gz");
    let _ = std::fs::remove_file(&pprof_path);
    let outcome = case.run(spec)?;
    outcome.check_exit()?;
    let records = read_records(&records_path)?;
    let folded = match std::fs::read_to_string(&folded_path) {
        Ok(text) => parse_folded(&text)?,
        Err(_) => Vec::new(),
    };
    let speedscope = std::fs::read_to_string(&speedscope_path)
        .ok()
        .map(|t| serde_json::from_str(&t).map_err(|e| format!("speedscope file is not JSON: {e}")))
        .transpose()?;
    let pprof = std::fs::read(&pprof_path).ok();
    Ok(Sampled {
        outcome,
        records,
        folded,
        speedscope,
        pprof,
    })
}

fn event<'a>(records: &'a [Value], name: &str) -> Option<&'a Value> {
    records.iter().find(|r| r["event"] == name)
}

/// Stacks are well formed: counts > 0, no empty frame names, and wherever
/// `Hot.Program::Spin` appears, `Hot.Program::Main` is closer to the root.
fn check_well_formed(folded: &[(String, u64)]) -> CaseResult {
    for (stack, n) in folded {
        if *n == 0 {
            return Err(format!("zero count for {stack:?}").into());
        }
        let frames: Vec<&str> = stack.split(';').collect();
        if frames.iter().any(|f| f.trim().is_empty()) {
            return Err(format!("empty frame name in {stack:?}").into());
        }
        if let Some(spin) = frames.iter().position(|f| *f == "Hot.Program::Spin") {
            match frames.iter().position(|f| *f == "Hot.Program::Work") {
                Some(work) if work < spin => {}
                _ => {
                    return Err(format!(
                        "Spin without its caller Work closer to the root: {stack:?}"
                    )
                    .into())
                }
            }
        }
    }
    Ok(())
}

fn check_runtime_record(case: &Case<'_>, s: &Sampled) -> CaseResult {
    let runtime = s
        .records
        .first()
        .filter(|r| r["event"] == "runtime")
        .ok_or_else(|| {
            format!(
                "first record is not the runtime record: {:?}",
                s.records.first()
            )
        })?;
    if runtime["version"] != case.leg().version.as_str() {
        return Err(format!(
            "runtime record {runtime} is not the leg's {}",
            case.leg().version
        )
        .into());
    }
    Ok(())
}

fn hot_method(case: &Case<'_>) -> CaseResult {
    hot_method_from(case, "suspend-runtime")
}

/// The same checks with the ELT shadow-stack source (the fallback for
/// runtimes without SuspendRuntime), forced on a runtime that has both so
/// the fallback runs on every leg.
fn hot_method_shadow(case: &Case<'_>) -> CaseResult {
    hot_method_from(case, "shadow-stack")
}

/// The same checks with the signal source (Linux: SIGPROF, per-thread
/// CPU-time timers, frame-pointer walks).
fn hot_method_signals(case: &Case<'_>) -> CaseResult {
    hot_method_from(case, "signals")
}

fn hot_method_from(case: &Case<'_>, method: &str) -> CaseResult {
    let s = sample(
        case,
        &["2", "1"],
        1000,
        Duration::from_secs(120),
        Some(method),
    )?;
    check_runtime_record(case, &s)?;
    let truth: f64 = s
        .outcome
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("hot Hot.Program::Spin "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("the app printed no ground truth: {:?}", s.outcome.stdout))?;
    if truth < 0.7 {
        return Err(format!("the app's own measure gives Spin only {truth} of the time").into());
    }
    let sampling = event(&s.records, "sampling").ok_or("no sampling record")?;
    // An asynchronous walk of another thread (no suspension) gives the
    // SDK's clear error on Linux (Windows runtimes support such walks).
    let walk = event(&s.records, "async-walk").ok_or("no async-walk record")?;
    if case.leg().os == clrprof_testing::Os::Linux {
        let error = walk["error"].as_str().unwrap_or("");
        if walk["ok"] != false
            || !error.contains("asynchronous stack walks")
            || !error.contains("exist only on Windows")
            || !error.contains("DoStackSnapshot")
        {
            return Err(format!("expected the asynchronous-walk error, got {walk}").into());
        }
    }
    if sampling["method"] != method {
        return Err(format!("expected method {method}, got {sampling}").into());
    }
    let samples = event(&s.records, "samples").ok_or("no samples record")?;
    let taken = samples["samples"].as_u64().unwrap_or(0);
    if taken == 0 || samples["ticks"].as_u64().unwrap_or(0) == 0 {
        return Err(format!("no samples: {samples}").into());
    }
    check_well_formed(&s.folded)?;
    let total: u64 = s.folded.iter().map(|(_, n)| n).sum();
    let empty = samples["empty"].as_u64().unwrap_or(u64::MAX);
    if total.checked_add(empty) != Some(taken) {
        return Err(format!(
            "folded counts add up to {total}, plus {empty} empty stacks, but the record says {taken} samples"
        )
        .into());
    }
    // Of the samples of the thread running the app's loop (stacks through
    // Work), at least half must be in Spin.
    let in_work: u64 = s
        .folded
        .iter()
        .filter(|(st, _)| st.split(';').any(|f| f == "Hot.Program::Work"))
        .map(|(_, n)| n)
        .sum();
    let in_spin: u64 = s
        .folded
        .iter()
        .filter(|(st, _)| st.split(';').any(|f| f == "Hot.Program::Spin"))
        .map(|(_, n)| n)
        .sum();
    if in_work < 100 {
        return Err(
            format!("only {in_work} samples through Hot.Program::Work in 2 s at 1 kHz").into(),
        );
    }
    let share = in_spin as f64 / in_work as f64;
    if share < 0.5 {
        return Err(format!(
            "Spin is in {in_spin} of {in_work} samples of the working thread ({share:.2}); ground truth {truth}"
        )
        .into());
    }
    let ss = s.speedscope.as_ref().ok_or("no speedscope file")?;
    let frames = ss["shared"]["frames"]
        .as_array()
        .map(|f| f.len())
        .unwrap_or(0);
    let profiles = ss["profiles"].as_array().map(|p| p.len()).unwrap_or(0);
    if frames == 0 || profiles == 0 {
        return Err(format!("speedscope file has {frames} frames and {profiles} profiles").into());
    }
    // The same profile as pprof, read with the test's own decoder.
    let pprof = s.pprof.as_deref().ok_or("no pprof file")?;
    crate::pprof::check_against_folded(case, pprof, &s.folded, 1000)?;
    println!(
        "    {}: {taken} samples, Spin {in_spin}/{in_work} = {share:.2} (truth {truth})",
        case.leg().name
    );
    Ok(())
}

fn long_multithreaded(case: &Case<'_>) -> CaseResult {
    let s = sample(case, &["10", "4"], 1000, Duration::from_secs(90), None)?;
    check_runtime_record(case, &s)?;
    if !s.outcome.stdout.contains("threads 4") {
        return Err(format!("app output incomplete: {:?}", s.outcome.stdout).into());
    }
    let samples = event(&s.records, "samples")
        .ok_or("no samples record: the sampler did not stop cleanly")?;
    let ticks = samples["ticks"].as_u64().unwrap_or(0);
    let taken = samples["samples"].as_u64().unwrap_or(0);
    // 10 s at 1 kHz on a loaded 2-core machine: far fewer than 10000 ticks
    // are possible, but not fewer than a fifth.
    if ticks < 2000 || taken < ticks {
        return Err(format!("too few ticks or samples: {samples}").into());
    }
    if samples["threads"].as_u64().unwrap_or(0) < 4 {
        return Err(format!("fewer than the app's 4 threads were sampled: {samples}").into());
    }
    check_well_formed(&s.folded)?;
    println!("    {}: {samples}", case.leg().name);
    Ok(())
}

/// One thread spins in `Burn`, one sleeps in `Doze`, for 2 s each (the
/// `cpuwall` app, threads named `spinner` and `sleeper`), sampled at 100 Hz.
/// The pprof file's `cpu` column gives `Burn` most of the CPU time and
/// `Doze` next to none; its `wall` column gives both comparable weight; the
/// `thread` labels are the threads' names.
fn cpu_and_wall(case: &Case<'_>) -> CaseResult {
    let s = sample_app(case, "cpuwall", &["2"], 100, Duration::from_secs(120), None)?;
    let gz = s.pprof.as_ref().ok_or("no pprof file")?;
    let pb = crate::pprof::decode(gz)?;
    let column = |name: &str| {
        pb.sample_types
            .iter()
            .position(|(t, u)| t == name && u == "nanoseconds")
            .ok_or_else(|| format!("no {name}/nanoseconds sample type: {:?}", pb.sample_types))
    };
    let (wall, cpu) = (column("wall")?, column("cpu")?);
    // (wall, cpu) of the samples whose stack holds `method`, and the
    // thread labels they carry.
    let of = |method: &str| {
        let mut sum = (0i64, 0i64);
        let mut threads = std::collections::BTreeSet::new();
        for smp in pb
            .samples
            .iter()
            .filter(|smp| smp.frames.iter().any(|f| f == method))
        {
            sum.0 += smp.values[wall];
            sum.1 += smp.values[cpu];
            threads.insert(smp.labels.get("thread").cloned().unwrap_or_default());
        }
        (sum, threads)
    };
    let ((burn_wall, burn_cpu), burn_threads) = of("Cpuwall.Program::Burn");
    let ((doze_wall, doze_cpu), doze_threads) = of("Cpuwall.Program::Doze");
    let total_cpu: i64 = pb.samples.iter().map(|smp| smp.values[cpu]).sum();
    let ms = |ns: i64| ns as f64 / 1e6;
    println!(
        "    {}: Burn wall {:.0} ms cpu {:.0} ms, Doze wall {:.0} ms cpu {:.1} ms, all threads cpu {:.0} ms",
        case.leg().name,
        ms(burn_wall),
        ms(burn_cpu),
        ms(doze_wall),
        ms(doze_cpu),
        ms(total_cpu)
    );
    if burn_threads.iter().collect::<Vec<_>>() != ["spinner"]
        || doze_threads.iter().collect::<Vec<_>>() != ["sleeper"]
    {
        return Err(format!(
            "thread labels: Burn on {burn_threads:?}, Doze on {doze_threads:?} (expected spinner, sleeper)"
        )
        .into());
    }
    // Wall time: both threads were sampled the whole time.
    if burn_wall < 1_000_000_000 || doze_wall < 1_000_000_000 {
        return Err(format!(
            "wall time Burn {} ms, Doze {} ms: each ran 2 s",
            ms(burn_wall),
            ms(doze_wall)
        )
        .into());
    }
    let ratio = burn_wall as f64 / doze_wall as f64;
    if !(0.5..=2.0).contains(&ratio) {
        return Err(format!("wall time Burn/Doze = {ratio:.2}, not comparable").into());
    }
    // CPU time: the spinner's, not the sleeper's. On Linux the spinner
    // reads its own CPU clock: on a loaded machine it gets less than its
    // 2 s, and the signal source's CPU timers measure that CPU time itself
    // (within 15 % and a sample), the suspension's ticks only its presence.
    let own = s
        .outcome
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("burn cpu ms "))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .map(|ms| ms * 1_000_000);
    let method = event(&s.records, "sampling")
        .and_then(|r| r["method"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let floor = own.map_or(500_000_000, |own| own.min(2_000_000_000) / 2);
    if (burn_cpu as f64) < 0.6 * total_cpu as f64 || burn_cpu < floor {
        return Err(format!(
            "Burn has {} ms of {} ms CPU time (its own clock: {:?} ms)",
            ms(burn_cpu),
            ms(total_cpu),
            own.map(ms)
        )
        .into());
    }
    if let (Some(own), "signals") = (own, method.as_str()) {
        let slack = own as f64 * 0.15 + 10e6;
        println!(
            "    {}: Burn's own CPU clock {:.0} ms, the signal source's CPU profile {:.0} ms",
            case.leg().name,
            ms(own),
            ms(burn_cpu)
        );
        if (burn_cpu as f64 - own as f64).abs() > slack {
            return Err(format!(
                "the CPU profile gives Burn {} ms, its own clock {} ms",
                ms(burn_cpu),
                ms(own)
            )
            .into());
        }
    }
    if doze_cpu as f64 > 0.02 * burn_cpu as f64 {
        return Err(format!(
            "the sleeping Doze has {} ms CPU time (Burn {} ms)",
            ms(doze_cpu),
            ms(burn_cpu)
        )
        .into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        // The app's own measure of Spin's share of the time, which a case
        // running beside it lowers: these run alone.
        Scenario::new("sampling: hot method dominates, stacks well formed", hot_method)
            .also_on(&[clrprof_testing::manifest::ARM64_LEG])
            .exclusive(),
        // Timings: CPU time split between threads, which another case's
        // load beside it would move.
        Scenario::new("sampling: CPU time goes to the spinning thread, wall time to both", cpu_and_wall)
            .exclusive(),
        Scenario::new("sampling: signal source, hot method dominates, stacks well formed", hot_method_signals)
            .only_on(
                &[
                    "linux-x64-3.1",
                    "linux-x64-8.0",
                    "linux-x64-9.0",
                    "linux-x64-10.0",
                    "linux-x64-11.0",
                    clrprof_testing::manifest::ARM64_LEG,
                ],
                "signal sampling runs on Linux (x86-64 and arm64); the Windows legs sample with the runtime's suspension",
            )
            .exclusive(),
        Scenario::new("sampling: shadow-stack fallback, hot method dominates, stacks well formed", hot_method_shadow)
            .also_on(&[clrprof_testing::manifest::ARM64_LEG])
            .exclusive(),
        Scenario::new("sampling: 10 s, 4 threads, 1 kHz, no crash or deadlock", long_multithreaded)
            .only_on(&["linux-x64-10.0"], "the 10 s run runs on one leg only (the newest LTS) to keep CI time low; the 2 s scenarios cover every leg"),
    ]
}
