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

/// The sampler in continuous mode (50 ms periods to a directory, CPU and
/// wall time, allocations and exceptions): its last periods must be
/// written on every exit path. Run beside [`TRACERS`] on the app's exit
/// paths.
const CONTINUOUS: &str = "sampler-continuous";

/// Why the continuous sampler does not run on the Wine legs' `exit()`
/// path (the other paths it runs on every leg).
const CONTINUOUS_WINE_NATIVE_EXIT: &str = "under Wine, a process that calls exit() \
     with the sampler loaded hung at exit in 2 of 10 runs in continuous mode and 1 of 10 in the \
     plain mode, each time after the profiler's finish had completed and every record and period \
     was written (one thread left, waiting on a kernel object in Wine's process detach); the \
     cause is not found yet, and the plain sampler's case stays on this path";

/// The package and extra environment of a tracer name.
fn tracer_package(tracer: &str) -> (&str, &'static [(&'static str, &'static str)]) {
    match tracer {
        CONTINUOUS => (
            "sampler",
            &[
                ("CLRPROF_SAMPLER_CONTINUOUS_DIR", "periods"),
                ("CLRPROF_SAMPLER_CONTINUOUS_EVERY", "0.05"),
                ("CLRPROF_SAMPLER_PROFILES", "cpu,wall,alloc,exception"),
            ],
        ),
        other => (other, &[]),
    }
}

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
    /// Another shape of unhandled exception: the app's mode (see
    /// [`unhandled_shape`]).
    Shape(&'static str),
    Signal(i32),
}

impl Path {
    fn args(self, exceptions: u32) -> Vec<String> {
        let (mode, status) = match self {
            Path::Return => ("return", "0"),
            Path::EnvironmentExit => ("exit", "7"),
            Path::NativeExit => ("native-exit", "9"),
            Path::Unhandled => ("unhandled", "-"),
            Path::Shape(mode) => (mode, "-"),
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
    let dir = spec.work_dir.clone();
    if let Some(t) = tracer {
        let (package, env) = tracer_package(t);
        spec = spec.profiler(case.profiler(package)?);
        for (k, v) in env {
            // A relative directory is the run's own.
            let v = if *k == "CLRPROF_SAMPLER_CONTINUOUS_DIR" {
                crate::profiles::env_path(case, &dir.join(v))?
            } else {
                v.to_string()
            };
            spec = spec.env(k, &v);
        }
    }
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
    for tracer in TRACERS.into_iter().chain([CONTINUOUS]) {
        if tracer == CONTINUOUS && case.leg().is_wine() && matches!(path, Path::NativeExit) {
            println!(
                "    {}: {CONTINUOUS} not run: {CONTINUOUS_WINE_NATIVE_EXIT}",
                case.leg().name
            );
            continue;
        }
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
    if tracer == "sampler" || tracer == CONTINUOUS {
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
            check_folded(r, dir)?;
        }
        CONTINUOUS => {
            // See the sampler's case above: no profile at a Windows exit
            // without Shutdown.
            if windows_exit {
                return Ok(());
            }
            let thrown = truth.thrown + u64::from(matches!(path, Path::Unhandled));
            check_continuous(&records, dir, thrown)?;
        }
        other => return Err(format!("no check for {other}")),
    }
    Ok(())
}

/// The continuous sampler's records: every period written (its file there,
/// with the bytes recorded), the sampler's and each event kind's last
/// period among them, and the exception periods adding up to every throw.
fn check_continuous(records: &[Value], dir: &std::path::Path, thrown: u64) -> Result<(), String> {
    let periods: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "period" || r["event"] == "kind-period")
        .collect();
    for p in &periods {
        // The file as the app named it (a Wine path on the Windows legs),
        // looked for in the run's `periods` directory.
        let to = p["to"]
            .as_str()
            .ok_or_else(|| format!("a period not written: {p}"))?;
        let name = to.rsplit(['/', '\\']).next().unwrap_or(to);
        let file = dir.join("periods").join(name);
        let len = std::fs::metadata(&file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .len();
        if p["ok"] != true || Some(len) != p["bytes"].as_u64() {
            return Err(format!("period {p} but the file has {len} bytes"));
        }
    }
    let last = |event: &str, kind: Option<&str>| {
        periods
            .iter()
            .filter(|p| p["event"] == event && kind.is_none_or(|k| p["kind"] == k))
            .any(|p| p["last"] == true)
    };
    for (event, kind) in [
        ("period", None),
        ("kind-period", Some("alloc")),
        ("kind-period", Some("exception")),
    ] {
        if !last(event, kind) {
            return Err(format!(
                "no last {event} {kind:?} among {} periods: {periods:?}",
                periods.len()
            ));
        }
    }
    let exceptions: u64 = periods
        .iter()
        .filter(|p| p["event"] == "kind-period" && p["kind"] == "exception")
        .filter_map(|p| p["value_0"].as_u64())
        .sum();
    if exceptions != thrown {
        return Err(format!(
            "the exception periods count {exceptions} throws, the app threw {thrown}"
        ));
    }
    Ok(())
}

/// An unhandled exception in another shape than `Main` calling a method
/// that throws: the app (mode `mode`) first throws and catches exceptions
/// from one call site of its thread's outermost frame (the watch's kept walk
/// of that thread is then reused), then throws one nobody catches. With the
/// exception-tracer, which writes an exception with no catcher only in its
/// `finish`, the process must end as it does without a profiler and the
/// records must hold every exception the app counted, caught, and the last
/// one with no catcher: `finish` ran before the runtime ended the process.
fn unhandled_shape(case: &Case<'_>, mode: &'static str) -> CaseResult {
    let path = Path::Shape(mode);
    let (plain, _) = run(case, path, None)?;
    let aborted = match plain.exit {
        Exit::Signal(SIGABRT) => true,
        Exit::Code(_) => case.leg().is_wine() && plain.stderr.contains("Unhandled exception"),
        _ => false,
    };
    if !aborted {
        return Err(format!(
            "without a profiler the app ended with {:?}; stderr: {:?}",
            plain.exit,
            tail(&plain.stderr)
        )
        .into());
    }
    // The app's own count: every "thrown = T, caught = C" line it printed
    // (Work's, the rounds', the filter's, the finalizer's).
    let mut thrown = 0;
    let mut caught = 0;
    for line in plain.stdout.lines().filter(|l| l.contains("thrown = ")) {
        thrown += number_after(line, "thrown = ")?;
        caught += number_after(line, "caught = ")?;
    }
    let (with, _) = run(case, path, Some("exception-tracer"))?;
    let (a, b) = (app_output(&with.stdout), app_output(&plain.stdout));
    if with.exit != plain.exit || a != b {
        return Err(format!(
            "the app ended with {:?} and printed {a:?}; without a profiler {:?} and {b:?}; stderr: {:?}",
            with.exit,
            plain.exit,
            tail(&with.stderr)
        )
        .into());
    }
    if !with.bad_records.is_empty() {
        return Err(format!("invalid JSON Lines: {:?}", with.bad_records).into());
    }
    let ours: Vec<&Value> = with
        .records
        .iter()
        .filter(|r| r["event"] == "exception" && r["type"] == "Exits.ExitException")
        .collect();
    let by_app = ours
        .iter()
        .filter(|r| {
            r["catcher"]
                .as_str()
                .is_some_and(|c| c.starts_with("Exits."))
        })
        .count() as u64;
    let no_catcher: Vec<&&Value> = ours.iter().filter(|r| r["catcher"].is_null()).collect();
    let last = ours
        .iter()
        .filter(|r| r["thrower"] == "Exits.Program::Unhandled")
        .collect::<Vec<_>>();
    // The last exception has no catcher; or (.NET Core 3.1, a Thread) the
    // thread's start code catches it and throws it again (the rethrow
    // then has none).
    let rethrown = last.len() == 1
        && last[0]["catcher"] == "System.Threading.ExecutionContext::RunInternal"
        && no_catcher.len() == 1
        && no_catcher[0]["thrower"]
            == "System.Runtime.ExceptionServices.ExceptionDispatchInfo::Throw";
    let plain_last = last.len() == 1 && last[0]["catcher"].is_null() && no_catcher.len() == 1;
    let total = thrown + 1 + u64::from(rethrown);
    if by_app != caught || !(plain_last || rethrown) || ours.len() as u64 != total {
        return Err(format!(
            "{by_app} caught by the app / {} with no catcher of {} records; the app: {thrown} thrown, {caught} caught, 1 unhandled: {ours:?}",
            no_catcher.len(),
            ours.len()
        )
        .into());
    }
    Ok(())
}

/// Why an unhandled exception in a finalizer is not checked on .NET 10.
const FINALIZER_NET10: &str = "on .NET 10 the finalizer thread's outermost managed frame, \
     System.GC::RunFinalizers, has a filter clause (it offers the exception to the handler of \
     .NET 10's ExceptionHandling.SetUnhandledExceptionHandler), and .NET 9 and later end an \
     unhandled exception's first pass without that frame's ExceptionSearchFunctionLeave: the \
     watch does not see this exception (seen on 10.0.15: the search enters RunFinalizers, which \
     may catch, and no callback follows; the watch decides by the rule it had when it walked at \
     every throw). 9.0 and 11.0 run it";

/// The legs where SIGTERM ends the process through the SDK's signal path.
const SIGTERM_SIGNAL_PATH: [&str; 2] = ["linux-x64-10.0", "linux-x64-11.0"];

/// Why the tracers' SIGTERM path runs on .NET 10 and 11 only.
const SIGTERM_ORDERLY: &str = "before .NET 10 the runtime turns SIGTERM into its orderly \
     exit (ProcessExit, Shutdown, status 143: seen on 3.1.3, 8.0.34 and 9.0.23), where the tracers \
     finish at Shutdown as on the Environment.Exit path, which runs them all on every leg; the \
     SDK's handler passes the signal on untouched there, which `signals: SIGTERM while a \
     callback holds the lock finish takes` checks on these legs (status 143, finish ran)";

pub fn scenarios() -> Vec<Scenario> {
    const LINUX: [&str; 5] = [
        "linux-x64-3.1",
        "linux-x64-8.0",
        "linux-x64-9.0",
        "linux-x64-10.0",
        "linux-x64-11.0",
    ];
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
        Scenario::new(
            "exit paths: unhandled exception after caught ones, same call site",
            |c| unhandled_shape(c, "unhandled-rounds"),
        )
        .exclude_leg(WINE_NET8_LEG, crate::exceptions::WINE_NET8_REASON),
        Scenario::new(
            "exit paths: unhandled exception past a filter that throws",
            |c| unhandled_shape(c, "unhandled-filter"),
        )
        .exclude_leg(WINE_NET8_LEG, crate::exceptions::WINE_NET8_REASON),
        Scenario::new("exit paths: unhandled exception on a Thread", |c| {
            unhandled_shape(c, "unhandled-thread")
        })
        .exclude_leg(WINE_NET8_LEG, crate::exceptions::WINE_NET8_REASON),
        Scenario::new(
            "exit paths: unhandled exception on a thread-pool thread",
            |c| unhandled_shape(c, "unhandled-pool"),
        )
        .exclude_leg(WINE_NET8_LEG, crate::exceptions::WINE_NET8_REASON),
        Scenario::new(
            "exit paths: unhandled exception in a finalizer after another class's caught one",
            |c| unhandled_shape(c, "unhandled-finalizer"),
        )
        .exclude_leg(WINE_NET8_LEG, crate::exceptions::WINE_NET8_REASON)
        .exclude_leg("linux-x64-10.0", FINALIZER_NET10)
        .exclude_leg("win-x64-10.0", FINALIZER_NET10),
        Scenario::new(
            "exit paths: unhandled exception under a recursive Main",
            |c| unhandled_shape(c, "unhandled-recursive"),
        )
        .exclude_leg(WINE_NET8_LEG, crate::exceptions::WINE_NET8_REASON),
        Scenario::new("exit paths: SIGTERM", |c| {
            exits_with_path(c, Path::Signal(SIGTERM))
        })
        .only_on(&SIGTERM_SIGNAL_PATH, SIGTERM_ORDERLY),
        Scenario::new("exit paths: SIGINT (Ctrl-C)", |c| {
            exits_with_path(c, Path::Signal(SIGINT))
        })
        .only_on(&LINUX, "POSIX signals"),
    ]
}

// ----- the real third-party host: CPython + pythonnet -----

use clrprof_testing::manifest::{PYTHONNET_LEG, PYTHONNET_RUNTIME_LEG};
use clrprof_testing::run::{run_captured, Captured};

const WHY_PYTHONNET: &str = "CPython hosting .NET 10 through pythonnet";

/// Builds the `clrprof` CLI for this machine and returns the executable.
pub(crate) fn native_cli() -> Result<PathBuf, Verdict> {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(clrprof_testing::build::cargo())
        .current_dir(&workspace)
        .args([
            "build",
            "--quiet",
            "--message-format=json-render-diagnostics",
            "-p",
            "clrprof-cli",
        ])
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building clrprof-cli failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "clrprof")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| "cargo reported no clrprof executable".into())
}

/// What the Python host needs: its `python`, the script, the runtime's root
/// folder and the helper assembly.
pub(crate) struct PythonHost {
    pub(crate) python: PathBuf,
    pub(crate) script: PathBuf,
    pub(crate) dotnet_root: PathBuf,
    pub(crate) helper: PathBuf,
}

impl PythonHost {
    pub(crate) fn new(case: &Case<'_>) -> Result<PythonHost, Verdict> {
        let runtime = case
            .other_leg(PYTHONNET_RUNTIME_LEG)
            .ok_or_else(|| format!("the {PYTHONNET_RUNTIME_LEG} leg is not available"))?;
        Ok(PythonHost {
            python: case.leg().host.clone(),
            script: std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/host.py"),
            dotnet_root: runtime
                .host
                .parent()
                .ok_or("the runtime's host has no folder")?
                .to_path_buf(),
            helper: case.app("pyhelper")?,
        })
    }

    /// `[clrprof run --profiler LIB --output DIR/records.jsonl --] python host.py ROOT HELPER`
    /// with `env`, run to its end in `dir`.
    fn run(
        &self,
        dir: &std::path::Path,
        cli: Option<(&PathBuf, &clrprof_testing::run::Profiler)>,
        env: &[(&str, &str)],
    ) -> Result<Captured, Verdict> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let _ = std::fs::remove_file(dir.join("records.jsonl"));
        let _ = std::fs::remove_file(dir.join("records.jsonl.jsonl"));
        let mut cmd = match cli {
            Some((cli, p)) => {
                let mut c = std::process::Command::new(cli);
                c.arg("run")
                    .arg("--profiler")
                    .arg(&p.path)
                    .arg("--clsid")
                    .arg(&p.clsid)
                    .arg("--output")
                    .arg(dir.join("records.jsonl"))
                    .arg("--")
                    .arg(&self.python);
                c
            }
            None => std::process::Command::new(&self.python),
        };
        cmd.arg(&self.script)
            .arg(&self.dotnet_root)
            .arg(&self.helper);
        for var in [
            "CORECLR_ENABLE_PROFILING",
            "CORECLR_PROFILER",
            "CORECLR_PROFILER_PATH",
            "CORECLR_PROFILER_PATH_64",
            "CLRPROF_OUTPUT",
            "CLRPROF_RUNTIMES",
        ] {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        Ok(run_captured(cmd, Duration::from_secs(120), dir)?)
    }
}

/// The numbers the Python host printed about its own .NET work.
pub(crate) fn python_truth(stdout: &str) -> Result<(u64, u64, u64), Verdict> {
    Ok((
        number_after(stdout, "called PyHelper.Helper::Marked x ")?,
        number_after(stdout, "allocated PyHelper.Marker x ")?,
        number_after(stdout, "caught System.FormatException x ")?,
    ))
}

fn under_pythonnet(case: &Case<'_>) -> CaseResult {
    let host = PythonHost::new(case)?;
    let cli = native_cli()?;
    let base = case.spec(&host.script).work_dir;
    let plain = host.run(&base.join("plain"), None, &[])?;
    if plain.exit != Exit::Code(0) {
        return Err(format!(
            "the Python host failed: {:?}; stderr: {}",
            plain.exit,
            tail(&plain.stderr)
        )
        .into());
    }
    let (calls, markers, exceptions) = python_truth(&plain.stdout)?;
    let mut failures = Vec::new();
    for tracer in TRACERS {
        let profiler = case.profiler(tracer)?;
        let dir = base.join(tracer);
        let with = host.run(&dir, Some((&cli, &profiler)), &[])?;
        if with.exit != plain.exit || with.stdout != plain.stdout {
            failures.push(format!(
                "{tracer}: the host ended with {:?} and printed {:?}; without a profiler {:?} and {:?}; stderr: {}",
                with.exit, with.stdout, plain.exit, plain.stdout, tail(&with.stderr)
            ));
            continue;
        }
        let records_file = if tracer == "sampler" {
            dir.join("records.jsonl.jsonl")
        } else {
            dir.join("records.jsonl")
        };
        let (records, bad) = read_records(&records_file);
        if let Err(e) = check_python_tracer(
            tracer,
            &case.leg().version,
            &records,
            &bad,
            &dir,
            (calls, markers, exceptions),
        ) {
            failures.push(format!("{tracer}: {e}"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// The major version of a runtime version (`10` for `10.0.15`).
fn version_major(version: &str) -> u32 {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn check_python_tracer(
    tracer: &str,
    version: &str,
    records: &[Value],
    bad: &[String],
    dir: &std::path::Path,
    (calls, markers, exceptions): (u64, u64, u64),
) -> Result<(), String> {
    if !bad.is_empty() {
        return Err(format!("invalid JSON Lines: {bad:?}"));
    }
    if records
        .first()
        .is_none_or(|r| r["event"] != "runtime" || r["version"] != version)
    {
        return Err(format!(
            "no {version} runtime record first: {:?}",
            records.first()
        ));
    }
    let count_of = |event: &str, key: &str, value: &str| -> Result<u64, String> {
        one(records, event, key, value)?["count"]
            .as_u64()
            .ok_or_else(|| format!("{event} record for {value} without a count"))
    };
    match tracer {
        "alloc-tracer" => {
            let n = count_of("alloc", "type", "PyHelper.Marker")?;
            if n != markers {
                return Err(format!(
                    "counted {n} PyHelper.Marker, the host made {markers}"
                ));
            }
        }
        "exception-tracer" => {
            let format: Vec<&Value> = records
                .iter()
                .filter(|r| r["event"] == "exception" && r["type"] == "System.FormatException")
                .collect();
            let (caught, uncaught): (Vec<&Value>, Vec<&Value>) =
                format.iter().partition(|r| r["catcher"].is_string());
            // .NET 9's managed exception handling dispatches an exception
            // that reaches a native frame twice: the first pass ends at the
            // native frame with no managed catcher, and the exception is
            // raised again from the managed frame above it (seen on 10.0.15:
            // the first reflection call from Python goes through the
            // interpreted invoke, whose native frame the parser's
            // FormatException crosses, raised again from
            // `MethodBaseInvoker::InterpretedInvoke_Method`). Earlier
            // runtimes dispatch it once.
            let crossings_allowed = if version_major(version) >= 9 { 1 } else { 0 };
            let re_raised = caught
                .iter()
                .filter(|r| r["thrower"] != "System.Number::ThrowFormatException")
                .count();
            // Each throw of the host's: caught where it was thrown, or ending
            // at a native frame (then raised again and caught there).
            if (caught.len() - re_raised + uncaught.len()) as u64 != exceptions
                || uncaught.len() > crossings_allowed
                || uncaught.len() != re_raised
            {
                return Err(format!(
                    "{} FormatException records ({} caught, {re_raised} of them raised again past a native frame), the host caught {exceptions}: {format:?}",
                    format.len(),
                    caught.len()
                ));
            }
        }
        "call-tracer" => {
            let n = count_of("calls", "method", "PyHelper.Helper::Marked")?;
            if n != calls {
                return Err(format!("counted {n} calls, the host made {calls}"));
            }
        }
        "il-rewriter" => {
            let n = count_of("il_calls", "method", "PyHelper.Helper::Marked")?;
            if n != calls {
                return Err(format!("counted {n} calls, the host made {calls}"));
            }
            if let Some(r) = records.iter().find(|r| {
                r["event"] == "il_calls"
                    && r["method"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("System."))
            }) {
                return Err(format!("instrumented framework code by default: {r}"));
            }
        }
        "jit-tracer" => {
            for m in ["PyHelper.Helper::Marked", "PyHelper.Helper::MakeMarkers"] {
                one(records, "jit", "method", m)?;
            }
        }
        "sampler" => {
            let r = records
                .iter()
                .find(|r| r["event"] == "samples")
                .ok_or("no samples record")?;
            if r.get("error").is_some() {
                return Err(format!("samples record with an error: {r}"));
            }
            check_folded(r, dir)?;
        }
        other => return Err(format!("no check for {other}")),
    }
    Ok(())
}

/// The side-by-side manager in the Python host: jit-tracer's runtime policy
/// selects (the hosted runtime's major version) or declines (`3`) the one
/// runtime pythonnet loads.
fn pythonnet_runtime_policy(case: &Case<'_>) -> CaseResult {
    let host = PythonHost::new(case)?;
    let cli = native_cli()?;
    let profiler = case.profiler("jit-tracer")?;
    let base = case.spec(&host.script).work_dir;
    let plain = host.run(&base.join("plain"), None, &[])?;
    let major = case.leg().major().to_string();
    for (policy, selected) in [(major.as_str(), true), ("3", false), ("first", true)] {
        let dir = base.join(format!("policy-{policy}"));
        let with = host.run(
            &dir,
            Some((&cli, &profiler)),
            &[("CLRPROF_RUNTIMES", policy)],
        )?;
        if with.exit != plain.exit || with.stdout != plain.stdout {
            return Err(format!(
                "policy {policy}: host output changed: {:?}; stderr: {}",
                with.stdout,
                tail(&with.stderr)
            )
            .into());
        }
        let (records, _) = read_records(&dir.join("records.jsonl"));
        let runtimes = records.iter().filter(|r| r["event"] == "runtime").count();
        let helper_jit = records
            .iter()
            .any(|r| r["event"] == "jit" && r["method"] == "PyHelper.Helper::Marked");
        if selected != (runtimes == 1 && helper_jit) || (!selected && !records.is_empty()) {
            return Err(format!(
                "policy {policy}: expected the runtime {}, got {runtimes} runtime records, helper JIT seen {helper_jit}",
                if selected { "profiled" } else { "declined" }
            )
            .into());
        }
    }
    Ok(())
}

/// `clrprof attach --pid` into the Python process: attach-tracer attaches,
/// catches up with the modules loaded before it (the helper among them),
/// detaches after 300 ms, and the host finishes normally.
fn pythonnet_attach(case: &Case<'_>) -> CaseResult {
    let host = PythonHost::new(case)?;
    let cli = native_cli()?;
    let profiler = case.profiler("attach-tracer")?;
    let dir = case.spec(&host.script).work_dir;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (ready, stop, records) = (
        dir.join("ready"),
        dir.join("stop"),
        dir.join("records.jsonl"),
    );
    let mut cmd = std::process::Command::new(&host.python);
    cmd.arg(&host.script)
        .arg(&host.dotnet_root)
        .arg(&host.helper)
        .arg(&ready)
        .arg(&stop)
        .env_remove("CORECLR_ENABLE_PROFILING")
        .env_remove("CLRPROF_OUTPUT")
        .stdout(std::fs::File::create(dir.join("stdout.txt")).map_err(|e| e.to_string())?)
        .stderr(std::fs::File::create(dir.join("stderr.txt")).map_err(|e| e.to_string())?);
    let mut child = cmd.spawn().map_err(|e| format!("python: {e}"))?;
    let result = (|| -> CaseResult {
        let pid = clrprof_testing::background::wait_for_file(&ready, Duration::from_secs(60))?;
        let attach = std::process::Command::new(&cli)
            .args(["attach", "--pid", &pid, "--profiler"])
            .arg(&profiler.path)
            .args(["--clsid", &profiler.clsid, "--client-data"])
            .arg(format!("detach_after_ms=300;output={}", records.display()))
            .output()
            .map_err(|e| format!("clrprof attach: {e}"))?;
        if !attach.status.success() {
            return Err(format!(
                "clrprof attach failed: {}",
                String::from_utf8_lossy(&attach.stderr)
            )
            .into());
        }
        let start = Instant::now();
        loop {
            let (r, _) = read_records(&records);
            if r.iter().any(|r| r["event"] == "detached") {
                break;
            }
            if start.elapsed() > Duration::from_secs(30) {
                return Err(format!("no detached record within 30 s: {r:?}").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    })();
    let _ = std::fs::write(&stop, "stop");
    let status = child.wait().map_err(|e| e.to_string())?;
    result?;
    let stdout = std::fs::read_to_string(dir.join("stdout.txt")).unwrap_or_default();
    if !status.success() || !stdout.ends_with("stopped\n") {
        return Err(format!(
            "the host ended with {status} and printed {stdout:?}; stderr: {}",
            tail(&std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default())
        )
        .into());
    }
    let (r, bad) = read_records(&records);
    if !bad.is_empty() {
        return Err(format!("invalid JSON Lines: {bad:?}").into());
    }
    let events: Vec<&str> = r.iter().filter_map(|r| r["event"].as_str()).collect();
    let helper_seen = r.iter().any(|r| {
        r["event"] == "module"
            && r["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("pyhelper.dll"))
    });
    if events.first() != Some(&"runtime")
        || !events.contains(&"attached")
        || !events.contains(&"attach_complete")
        || !helper_seen
        || events.last() != Some(&"detached")
        || events.contains(&"shutdown")
    {
        return Err(
            format!("unexpected records (helper module seen: {helper_seen}): {r:?}").into(),
        );
    }
    Ok(())
}

/// `clrprof doctor -- python ...`: a profiler loaded into the Python-hosted
/// runtime is seen loading (and finishing at process exit, as the host never
/// shuts the runtime down); a Python program that starts no CoreCLR is told so.
fn pythonnet_doctor(case: &Case<'_>) -> CaseResult {
    let host = PythonHost::new(case)?;
    let cli = native_cli()?;
    let profiler = case.profiler("jit-tracer")?;
    let doctor = |args: &[&std::ffi::OsStr]| -> Result<String, Verdict> {
        let out = std::process::Command::new(&cli)
            .arg("doctor")
            .arg("--profiler")
            .arg(&profiler.path)
            .arg("--")
            .args(args)
            .env_remove("CORECLR_ENABLE_PROFILING")
            .env_remove("CORECLR_PROFILER")
            .env_remove("CORECLR_PROFILER_PATH")
            .output()
            .map_err(|e| format!("clrprof doctor: {e}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let loaded = doctor(&[
        host.python.as_os_str(),
        host.script.as_os_str(),
        host.dotnet_root.as_os_str(),
        host.helper.as_os_str(),
    ])?;
    for expected in [
        "ok      the Python host started CoreCLR through hostfxr",
        "ok      the profiler loaded and Initialize ran",
        "note    the host never shut the runtime down",
        "0 error(s)",
    ] {
        if !loaded.contains(expected) {
            return Err(format!("doctor did not say {expected:?}:\n{loaded}").into());
        }
    }
    let no_runtime = doctor(&[host.python.as_os_str(), "-c".as_ref(), "print(1)".as_ref()])?;
    if !no_runtime.contains("ERROR   the Python program started no CoreCLR through hostfxr") {
        return Err(
            format!("doctor did not explain a Python program without .NET:\n{no_runtime}").into(),
        );
    }
    Ok(())
}

pub fn python_scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "pythonnet: every example tracer under `clrprof run`, complete without Shutdown",
            under_pythonnet,
        )
        .only_on(&[PYTHONNET_LEG], WHY_PYTHONNET),
        Scenario::new(
            "pythonnet: the side-by-side runtime policy",
            pythonnet_runtime_policy,
        )
        .only_on(&[PYTHONNET_LEG], WHY_PYTHONNET),
        Scenario::new(
            "pythonnet: clrprof doctor explains the Python host",
            pythonnet_doctor,
        )
        .only_on(&[PYTHONNET_LEG], WHY_PYTHONNET),
        Scenario::new(
            "pythonnet: clrprof attach --pid into the Python process",
            pythonnet_attach,
        )
        .only_on(&[PYTHONNET_LEG], WHY_PYTHONNET),
    ]
}

/// The sampler's folded stacks (in `dir/records.jsonl`) add up to the
/// non-empty samples its `samples` record `r` counts.
fn check_folded(r: &Value, dir: &std::path::Path) -> std::result::Result<(), String> {
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
    Ok(())
}
