//! Every example tracer writes complete results on every exit path.
//!
//! The `exits` app does a known amount of work, prints its own account of it
//! and leaves the way it is told: `Main` returning, `Environment.Exit`, the C
//! library's `exit()`, an unhandled exception, or (Linux) SIGTERM / SIGINT
//! while it waits. For each path, the app runs once without a profiler and
//! once under each example tracer: the exit status and stdout must be the
//! same, and each tracer's records must match the app's account exactly.

use crate::exceptions::WINE_NET8_LEG;
use clrprof_testing::background::{read_records, spawn_app};
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::{Exit, Outcome, RunSpec};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The example tracers that write results.
const TRACERS: [&str; 6] = [
    "alloc-tracer",
    "exception-tracer",
    "call-tracer",
    "il-rewriter",
    "jit-tracer",
    "sampler",
];

const SIGINT: i32 = 2;
const SIGABRT: i32 = 6;
const SIGTERM: i32 = 15;

/// How the app leaves.
#[derive(Clone, Copy)]
enum Path {
    Return,
    EnvironmentExit,
    NativeExit,
    Unhandled,
    Signal(i32),
}

impl Path {
    fn args(self, exceptions: u32) -> Vec<String> {
        let (mode, status) = match self {
            Path::Return => ("return", "0"),
            Path::EnvironmentExit => ("exit", "7"),
            Path::NativeExit => ("native-exit", "9"),
            Path::Unhandled => ("unhandled", "-"),
            Path::Signal(_) => ("wait", "-"),
        };
        vec![mode.into(), status.into(), exceptions.to_string()]
    }
}

/// What the app printed about its own work.
struct Truth {
    allocations: u64,
    calls: u64,
    thrown: u64,
    caught: u64,
}

fn number_after(stdout: &str, prefix: &str) -> Result<u64, Verdict> {
    stdout
        .lines()
        .find_map(|l| l.find(prefix).map(|at| &l[at + prefix.len()..]))
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the app printed no {prefix:?}: {stdout:?}").into())
}

impl Truth {
    fn from(stdout: &str) -> Result<Truth, Verdict> {
        Ok(Truth {
            allocations: number_after(stdout, "allocated Exits.Marker x ")?,
            calls: number_after(stdout, "called Exits.Program::Marked x ")?,
            thrown: number_after(stdout, "thrown = ")?,
            caught: number_after(stdout, "caught = ")?,
        })
    }
}

/// Runs the app on `path`, with `tracer` if given; a signal path starts it,
/// waits for "ready" and sends the signal.
fn run(case: &Case<'_>, path: Path, tracer: Option<&str>) -> Result<(Outcome, PathBuf), Verdict> {
    let app = case.app("exits")?;
    let exceptions = if case.leg().name == WINE_NET8_LEG {
        0
    } else {
        5
    };
    let mut spec: RunSpec = case.spec(&app);
    spec.args = path.args(exceptions);
    spec.timeout = Duration::from_secs(60);
    if let Some(t) = tracer {
        spec = spec.profiler(case.profiler(t)?);
    }
    let dir = spec.work_dir.clone();
    let Path::Signal(sig) = path else {
        return Ok((case.run(spec)?, dir));
    };
    let runtimes = clrprof_testing::discover();
    let bg = spawn_app(case.leg(), runtimes.wine(), &spec)?;
    let stdout = spec.work_dir.join("stdout.txt");
    let start = Instant::now();
    while !std::fs::read_to_string(&stdout).is_ok_and(|t| t.contains("ready")) {
        if start.elapsed() > Duration::from_secs(30) {
            return Err("the app did not print \"ready\" within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The child is not reaped yet, so the pid is still the app's.
    let sent = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(bg.id().to_string())
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    if !sent.success() {
        return Err(format!("kill -{sig} {} failed: {sent}", bg.id()).into());
    }
    Ok((bg.finish(Duration::from_secs(60))?, dir))
}

fn exits_with_path(case: &Case<'_>, path: Path) -> CaseResult {
    let (plain, _) = run(case, path, None)?;
    match (path, plain.exit) {
        (Path::Return, Exit::Code(0))
        | (Path::EnvironmentExit, Exit::Code(7))
        | (Path::NativeExit, Exit::Code(9)) => {}
        // The runtime's SIGTERM handling is an orderly exit with 128 + 15.
        (Path::Signal(SIGTERM), Exit::Code(143)) => {}
        (Path::Signal(s), Exit::Signal(got)) if s == got => {}
        // abort() on Unix.
        (Path::Unhandled, Exit::Signal(SIGABRT)) => {}
        // Under Wine the status is whatever Wine's debugger leaves (0 seen).
        (Path::Unhandled, Exit::Code(_))
            if case.leg().is_wine() && plain.stderr.contains("Unhandled exception") => {}
        (_, other) => {
            return Err(format!(
                "without a profiler the app ended with {other:?}; stderr: {:?}",
                plain.stderr
            )
            .into())
        }
    }
    let truth = Truth::from(&plain.stdout)?;
    let mut failures = Vec::new();
    for tracer in TRACERS {
        let (with, dir) = run(case, path, Some(tracer))?;
        let (a, b) = (app_output(&with.stdout), app_output(&plain.stdout));
        if with.exit != plain.exit || a != b {
            failures.push(format!(
                "{tracer}: the app ended with {:?} and printed {a:?}; without a profiler {:?} and {b:?}; stderr: {:?}",
                with.exit, plain.exit, tail(&with.stderr)
            ));
            continue;
        }
        let windows_exit = case.leg().is_wine() && matches!(path, Path::NativeExit);
        if let Err(e) = check_tracer(tracer, &with, &dir, &truth, path, windows_exit) {
            failures.push(format!("{tracer}: {e}"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// The app's own stdout: under Wine an unhandled exception starts Wine's
/// debugger, which appends a register and module dump (different each run).
fn app_output(stdout: &str) -> &str {
    match stdout.find("Unhandled exception: 0x") {
        Some(at) => &stdout[..at],
        None => stdout,
    }
}

fn tail(s: &str) -> &str {
    let mut start = s.len().saturating_sub(600);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

fn one<'a>(records: &'a [Value], event: &str, key: &str, value: &str) -> Result<&'a Value, String> {
    let found: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == event && r[key] == value)
        .collect();
    match found.as_slice() {
        [r] => Ok(r),
        _ => Err(format!(
            "expected one {event} record with {key} = {value}, found {}",
            found.len()
        )),
    }
}

fn check_tracer(
    tracer: &str,
    o: &Outcome,
    dir: &std::path::Path,
    truth: &Truth,
    path: Path,
    windows_exit: bool,
) -> Result<(), String> {
    let mut records = o.records.clone();
    if tracer == "sampler" {
        // Folded stacks in CLRPROF_OUTPUT, records in CLRPROF_OUTPUT.jsonl.
        let (r, bad) = read_records(&dir.join("records.jsonl.jsonl"));
        if !bad.is_empty() {
            return Err(format!("invalid JSON Lines: {bad:?}"));
        }
        records = r;
    } else if !o.bad_records.is_empty() {
        return Err(format!("invalid JSON Lines: {:?}", o.bad_records));
    }
    if records.first().is_none_or(|r| r["event"] != "runtime") {
        return Err(format!("no runtime record first: {records:?}"));
    }
    match tracer {
        "alloc-tracer" => {
            let r = one(&records, "alloc", "type", "Exits.Marker")?;
            if r["count"].as_u64() != Some(truth.allocations) {
                return Err(format!(
                    "counted {} Exits.Marker, the app allocated {}",
                    r["count"], truth.allocations
                ));
            }
        }
        "exception-tracer" => {
            let ours: Vec<&Value> = records
                .iter()
                .filter(|r| r["event"] == "exception" && r["type"] == "Exits.ExitException")
                .collect();
            let caught = ours
                .iter()
                .filter(|r| r["catcher"] == "Exits.Program::Work")
                .count() as u64;
            let unhandled = ours
                .iter()
                .filter(|r| r["catcher"].is_null() && r["thrower"] == "Exits.Program::Unhandled")
                .count() as u64;
            let expected_unhandled = u64::from(matches!(path, Path::Unhandled));
            if caught != truth.caught
                || unhandled != expected_unhandled
                || ours.len() as u64 != truth.thrown + expected_unhandled
            {
                return Err(format!(
                    "{caught} caught / {unhandled} unhandled of {} records; the app: {} thrown, {} caught, {expected_unhandled} unhandled: {ours:?}",
                    ours.len(),
                    truth.thrown,
                    truth.caught
                ));
            }
        }
        "call-tracer" => {
            let r = one(&records, "calls", "method", "Exits.Program::Marked")?;
            if r["count"].as_u64() != Some(truth.calls) {
                return Err(format!(
                    "counted {} calls, the app made {}",
                    r["count"], truth.calls
                ));
            }
        }
        "il-rewriter" => {
            let r = one(&records, "il_calls", "method", "Exits.Program::Marked")?;
            if r["count"].as_u64() != Some(truth.calls) {
                return Err(format!(
                    "counted {} calls, the app made {}",
                    r["count"], truth.calls
                ));
            }
            // The default instruments the app's own code only.
            if let Some(r) = records.iter().find(|r| {
                r["event"] == "il_calls"
                    && !r["method"].as_str().unwrap_or("").starts_with("Exits.")
            }) {
                return Err(format!("instrumented framework code: {r}"));
            }
        }
        "jit-tracer" => {
            let mut wanted = vec!["Exits.Program::Work", "Exits.Program::Marked"];
            if matches!(path, Path::Unhandled) {
                // Compiled right before the process ends.
                wanted.push("Exits.Program::Unhandled");
            }
            for m in wanted {
                if !records
                    .iter()
                    .any(|r| r["event"] == "jit" && r["method"] == m)
                {
                    return Err(format!("no jit record for {m}"));
                }
            }
        }
        "sampler" => {
            let r = records
                .iter()
                .find(|r| r["event"] == "samples")
                .ok_or("no samples record")?;
            if let Some(e) = r.get("error") {
                // At the end of a Windows process without Shutdown the system
                // has ended every other thread, the sampler's included, before
                // exit handlers run: its profile cannot be collected there.
                if windows_exit
                    && e.as_str()
                        .is_some_and(|e| e.contains("ended by the system"))
                {
                    return Ok(());
                }
                return Err(format!("samples record with an error: {r}"));
            }
            let folded = std::fs::read_to_string(dir.join("records.jsonl"))
                .map_err(|e| format!("no folded stacks: {e}"))?;
            let total: u64 = folded
                .lines()
                .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
                .sum();
            let expected = r["samples"].as_u64().unwrap_or(0) - r["empty"].as_u64().unwrap_or(0);
            if total != expected {
                return Err(format!(
                    "folded stacks add up to {total}, the samples record says {expected}: {r}"
                ));
            }
        }
        other => return Err(format!("no check for {other}")),
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    const LINUX: [&str; 2] = ["linux-x64-3.1", "linux-x64-8.0"];
    vec![
        Scenario::new("exit paths: Main returns", |c| {
            exits_with_path(c, Path::Return)
        }),
        Scenario::new("exit paths: Environment.Exit", |c| {
            exits_with_path(c, Path::EnvironmentExit)
        }),
        Scenario::new("exit paths: exit() from native code", |c| {
            exits_with_path(c, Path::NativeExit)
        }),
        Scenario::new("exit paths: unhandled exception", |c| {
            exits_with_path(c, Path::Unhandled)
        }),
        Scenario::new("exit paths: SIGTERM", |c| {
            exits_with_path(c, Path::Signal(SIGTERM))
        })
        .only_on(&LINUX, "POSIX signals"),
        Scenario::new("exit paths: SIGINT (Ctrl-C)", |c| {
            exits_with_path(c, Path::Signal(SIGINT))
        })
        .only_on(&LINUX, "POSIX signals"),
    ]
}
