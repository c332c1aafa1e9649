//! The signal source beside the runtime's own signals (Linux legs and
//! arm64): apps blocked in every kind of interruptible call, fault storms,
//! thread churn and a component that takes `SIGPROF` over, each sampled at
//! 1 kHz with every thread asked for a wall-time sample at every tick; the
//! app's output and exit status must be byte-identical to a run without
//! the profiler, and the sampler's records say what it did.
//!
//! Two of them found faults of the first version: the null-reference storm
//! killed the process at once (the runtime's `SIGSEGV` handler runs on a
//! small alternate stack, and a sampling signal landing there could not be
//! delivered: the SDK now blocks its signal in such handlers, see
//! `clrprof::stackwalk::signals`), and the blocking app hung in
//! `Socket.Poll` with a timeout (the base library restarts `poll` with the
//! whole timeout on `EINTR`: a blocked thread now takes one signal per
//! blocking episode).

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::manifest::ARM64_LEG;
use clrprof_testing::run::Outcome;
use serde_json::Value;
use std::time::Duration;

const LINUX: [&str; 6] = [
    "linux-x64-3.1",
    "linux-x64-8.0",
    "linux-x64-9.0",
    "linux-x64-10.0",
    "linux-x64-11.0",
    ARM64_LEG,
];

/// The legs of the two longest cases (an app run twice, with fixed sleeps):
/// the oldest runtime's signal handling (3.1's PAL) and the two newest.
/// Both cases passed on 8.0 and 9.0 when they were written (issue 43); the
/// handler is the same code there, and CI time is short.
const BLOCKING_LEGS: [&str; 3] = ["linux-x64-3.1", "linux-x64-10.0", "linux-x64-11.0"];

/// The fault storm's legs: as [`BLOCKING_LEGS`], and arm64, whose fault
/// handling (the runtime's and the handler's leaf recovery) differs.
const FAULT_LEGS: [&str; 4] = [
    "linux-x64-3.1",
    "linux-x64-10.0",
    "linux-x64-11.0",
    ARM64_LEG,
];

struct Sampled {
    plain: Outcome,
    with: Outcome,
    records: Vec<Value>,
}

impl Sampled {
    fn event(&self, name: &str) -> Result<&Value, Verdict> {
        self.records
            .iter()
            .find(|r| r["event"] == name)
            .ok_or_else(|| format!("no {name} record in {:?}", self.records).into())
    }

    fn num(&self, event: &str, field: &str) -> Result<u64, Verdict> {
        self.event(event)?[field]
            .as_u64()
            .ok_or_else(|| format!("no number {field} in the {event} record").into())
    }
}

/// Runs `app args` without a profiler, then under the sampler with the
/// signal source at 1 kHz (`wall` threads asked per tick); the output and
/// exit status must match.
fn sampled(
    case: &Case<'_>,
    app: &str,
    args: &[&str],
    wall: u32,
    timeout: Duration,
) -> Result<Sampled, Verdict> {
    let app = case.app(app)?;
    let mut plain = case.spec(&app).timeout(timeout);
    plain.args = args.iter().map(|s| s.to_string()).collect();
    let plain = case.run(plain)?;
    plain.check_exit()?;
    let mut spec = case
        .spec(&app)
        .profiler(case.profiler("sampler")?)
        .env("CLRPROF_SAMPLER_SOURCE", "signals")
        .env("CLRPROF_SAMPLER_RATE", "1000")
        .env("CLRPROF_SAMPLER_WALL_THREADS", &wall.to_string())
        .timeout(timeout);
    spec.args = args.iter().map(|s| s.to_string()).collect();
    let records_path = spec.work_dir.join("records.jsonl.jsonl");
    let with = case.run(spec)?;
    if with.exit != plain.exit {
        return Err(format!(
            "exit {:?} under the sampler, {:?} without (stderr: {})",
            with.exit,
            plain.exit,
            with.stderr
                .lines()
                .rev()
                .take(12)
                .collect::<Vec<_>>()
                .join(" | ")
        )
        .into());
    }
    if with.stdout != plain.stdout {
        return Err(format!(
            "output changed under the signal source:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, with.stdout
        )
        .into());
    }
    let text = std::fs::read_to_string(&records_path)
        .map_err(|e| format!("no record file {}: {e}", records_path.display()))?;
    let records = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("bad record {l:?}: {e}")))
        .collect::<Result<Vec<Value>, String>>()?;
    Ok(Sampled {
        plain,
        with,
        records,
    })
}

fn check_signals_ran(s: &Sampled) -> CaseResult {
    let sampling = s.event("sampling")?;
    if sampling["method"] != "signals" {
        return Err(format!("the signal source did not run: {sampling}").into());
    }
    let samples = s.event("samples")?;
    if samples["method"] != "signals" || samples["failed_ticks"].as_u64() != Some(0) {
        return Err(format!("sampling did not run cleanly: {samples}").into());
    }
    Ok(())
}

/// Threads blocked in pipes, sockets (one with a receive timeout), poll,
/// sleeps, waits, `Process.Start` and `WaitForExit`, a raw `fork` and
/// `Console.ReadLine` on a pipe, with every thread interrupted up to a
/// thousand times a second: each call gives what it gives unprofiled.
fn blocking_calls(case: &Case<'_>) -> CaseResult {
    let s = sampled(case, "blocking", &["1"], 64, Duration::from_secs(240))?;
    check_signals_ran(&s)?;
    if !s.plain.stdout.contains("blocking done") {
        return Err(format!("app output incomplete: {:?}", s.plain.stdout).into());
    }
    for line in [
        "socket receive: TimedOut",
        "readline: 'first line', 'second line', end True",
    ] {
        if !s.plain.stdout.contains(line) {
            return Err(format!("the app printed no {line:?}: {:?}", s.plain.stdout).into());
        }
    }
    // The blocked threads were interrupted (once per blocking episode) and
    // counted at every tick: requests went out, samples came back, and
    // blocked threads were counted again where they were.
    let signalled = s.num("signal-samples", "signalled")?;
    let wall = s.num("signal-samples", "wall_samples")?;
    let reused = s.num("signal-samples", "wall_reused")?;
    if signalled < 100 || wall < 500 || reused == 0 {
        return Err(format!(
            "{signalled} wall requests, {wall} wall samples, {reused} of blocked threads: the \
             threads were hardly interrupted"
        )
        .into());
    }
    println!(
        "    {}: {signalled} wall requests, {wall} wall samples, {} CPU samples; output unchanged",
        case.leg().name,
        s.num("signal-samples", "cpu_samples")?
    );
    Ok(())
}

/// Null-reference and divide-by-zero faults in a loop on four threads (the
/// runtime's fault handlers run on an alternate stack, then on the thread's
/// own), sampled at 1 kHz: the counts are the app's own.
fn fault_storm(case: &Case<'_>) -> CaseResult {
    let each = if case.leg().name == ARM64_LEG {
        "2000"
    } else {
        "20000"
    };
    let s = sampled(
        case,
        "interrupts",
        &["faults", "4", each],
        64,
        Duration::from_secs(240),
    )?;
    check_signals_ran(&s)?;
    let want = format!(
        "null references caught {}",
        4 * each.parse::<u64>().unwrap_or(0)
    );
    if !s.plain.stdout.contains(&want) {
        return Err(format!("the app printed no {want:?}: {:?}", s.plain.stdout).into());
    }
    println!(
        "    {}: {} CPU samples, {} wall samples during the storm; output unchanged",
        case.leg().name,
        s.num("signal-samples", "cpu_samples")?,
        s.num("signal-samples", "wall_samples")?,
    );
    Ok(())
}

/// 2,000 threads (arm64: 500), each burning 2 ms of CPU and ending, while
/// their CPU-time timers fire at 1 kHz: each ends cleanly, its timer goes
/// with it.
fn thread_churn(case: &Case<'_>) -> CaseResult {
    let n = if case.leg().name == ARM64_LEG {
        "500"
    } else {
        "2000"
    };
    let s = sampled(
        case,
        "interrupts",
        &["churn", n],
        8,
        Duration::from_secs(240),
    )?;
    check_signals_ran(&s)?;
    if !s.plain.stdout.contains(&format!("threads ran {n}")) {
        return Err(format!("app output: {:?}", s.plain.stdout).into());
    }
    let timers = s.num("signal-samples", "timers_made")?;
    println!(
        "    {}: {timers} timers made for {n} short threads, {} CPU samples",
        case.leg().name,
        s.num("signal-samples", "cpu_samples")?
    );
    Ok(())
}

/// The app sets `SIGPROF` to be ignored halfway: the sampler sees its
/// handler replaced, stops its timers and wall requests, says so, and goes
/// on with the runtime's suspension (where the runtime has it).
fn handler_replaced(case: &Case<'_>) -> CaseResult {
    let s = sampled(
        case,
        "interrupts",
        &["replace"],
        8,
        Duration::from_secs(120),
    )?;
    let samples = s.event("samples")?;
    let reason = samples["reason"].as_str().unwrap_or("");
    if !reason.contains("replaced the SDK's SIGPROF handler") {
        return Err(format!("the replacement was not reported: {samples}").into());
    }
    // Every leg's runtime has SuspendRuntime (Info10, .NET Core 3.0 on).
    let method = samples["method"].as_str().unwrap_or("");
    if method != "suspend-runtime" {
        return Err(
            format!("no fallback to the suspension after the replacement: {samples}").into(),
        );
    }
    let _ = &s.with;
    println!("    {}: {method}: {reason}", case.leg().name);
    Ok(())
}

/// Roslyn (the rig's `csc.dll`, not ours, multi-threaded: it compiles
/// method bodies in parallel, with the server GC) compiling half of the
/// large program's generated source (6,750 lines), under each source at
/// 100 Hz.
/// Of the CPU time the profile holds, the share whose leaf is the runtime's
/// GC-poll helper (`Thread::<PollGC>g__PollGCWorker`, where a suspension
/// stops a running thread) must be at most 1 % with signals; the
/// suspension's share is shown beside it.
fn no_safepoint_bias(case: &Case<'_>) -> CaseResult {
    let cache = case.cache_dir();
    let csc = std::fs::read_dir(cache.join("roslyn"))
        .map_err(|e| format!("no Roslyn in the cache: {e}"))?
        .filter_map(|d| d.ok())
        .map(|d| d.path().join("csc.dll"))
        .find(|p| p.exists())
        .ok_or("no roslyn/*/csc.dll in the cache")?;
    let refs = cache.join("refs").join(&case.leg().version);
    if !refs.join("System.Runtime.dll").exists() {
        return Err(Verdict::Skipped(format!(
            "no reference assemblies at {}",
            refs.display()
        )));
    }
    let dir = cache.join("large-program");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let source = dir.join("generated-roslyn.cs");
    // 150 classes, 6,750 lines: half the large program's, a shorter run.
    std::fs::write(&source, crate::large::generated_classes(150))
        .map_err(|e| format!("source: {e}"))?;
    let mut shares = Vec::new();
    for method in ["signals", "suspend-runtime"] {
        let mut spec = case
            .spec(&csc)
            .profiler(case.profiler("sampler")?)
            .env("CLRPROF_SAMPLER_SOURCE", method)
            .env("CLRPROF_SAMPLER_RATE", "100")
            .timeout(Duration::from_secs(600));
        let out = spec.work_dir.join("out.dll");
        spec.args = vec![
            "-nologo".into(),
            "-nostdlib".into(),
            "-target:library".into(),
            format!("-out:{}", out.display()),
        ];
        for r in [
            "System.Runtime.dll",
            "System.Collections.dll",
            "System.Linq.dll",
        ] {
            spec.args.push(format!("-r:{}", refs.join(r).display()));
        }
        spec.args.push(source.display().to_string());
        let pprof_path = spec.work_dir.join("records.jsonl.pb.gz");
        let outcome = case.run(spec)?;
        outcome.check_exit()?;
        if !out.exists() {
            return Err(format!("Roslyn built nothing: {}", outcome.stdout).into());
        }
        let gz = std::fs::read(&pprof_path).map_err(|e| format!("no pprof file: {e}"))?;
        let pb = crate::pprof::decode(&gz)?;
        let cpu = pb
            .sample_types
            .iter()
            .position(|(t, _)| t == "cpu")
            .ok_or("no cpu column")?;
        let (mut total, mut poll) = (0i64, 0i64);
        for smp in &pb.samples {
            let ns = smp.values[cpu];
            total += ns;
            if smp
                .frames
                .last()
                .is_some_and(|leaf| leaf.contains("<PollGC>g__PollGCWorker"))
            {
                poll += ns;
            }
        }
        if total < 100_000_000 {
            return Err(format!(
                "{method}: only {} ms of CPU time in the profile",
                total / 1_000_000
            )
            .into());
        }
        shares.push((method, poll as f64 / total as f64, total));
    }
    println!(
        "    {}: GC-poll helper as the leaf of {}",
        case.leg().name,
        shares
            .iter()
            .map(|(m, s, t)| format!("{:.2} % of {} ms of CPU ({m})", s * 100.0, t / 1_000_000))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if shares[0].1 > 0.01 {
        return Err(format!("safepoint bias with signals: {:.2} %", shares[0].1 * 100.0).into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    let why = "signal sampling runs on Linux (x86-64 and arm64)";
    let why_fewer = "signal sampling runs on Linux; this long case runs on the oldest and newest runtimes' signal handling (it passed on 8.0 and 9.0 when written, the same handler code) to keep CI time";
    vec![
        Scenario::new(
            "signal sampling: pipes, sockets, poll, sleeps, waits, Process.Start, fork and ReadLine give what they give unprofiled, at 1 kHz",
            blocking_calls,
        )
        .only_on(&BLOCKING_LEGS, why_fewer),
        Scenario::new(
            "signal sampling: a null-reference and divide-by-zero storm on four threads, at 1 kHz",
            fault_storm,
        )
        .only_on(&FAULT_LEGS, why_fewer),
        Scenario::new(
            "signal sampling: 2,000 short threads end while their CPU-time timers fire",
            thread_churn,
        )
        .only_on(&LINUX, why),
        Scenario::new(
            "signal sampling: another component takes SIGPROF over: detected, stopped, reported, the suspension goes on",
            handler_replaced,
        )
        .only_on(&LINUX, why),
        Scenario::new(
            "signal sampling: no safepoint bias: Roslyn compiling 6,750 lines in parallel, the GC-poll helper the leaf of at most 1 % of the CPU time",
            no_safepoint_bias,
        )
        .only_on(
            &["linux-x64-10.0"],
            "one leg, the newest LTS (the rig's Roslyn runs on .NET 10 and later), keeps the CI time of two compiles low",
        )
        .exclusive(),
    ]
}
