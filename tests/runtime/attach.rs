//! Attach and detach inside real runtimes: a long-running app (`longrun`)
//! gets profilers attached over the diagnostics IPC and detached again, and
//! must finish with its own correct output.
//!
//! On Linux legs the test calls the trigger library directly. On Windows legs
//! (under Wine) the runtime's endpoint is a Wine named pipe, reachable only
//! from Windows code in the same prefix, so the test runs the Windows build
//! of the `clrprof` CLI (`clrprof.exe attach`) under Wine: that covers the
//! named-pipe transport and the CLI at once.

use clrprof::attach::trigger::{attach_profiler, parse_clsid, AttachError, DiagnosticPort};
use clrprof_testing::background::{spawn_app, wait_for_file, Background};
use clrprof_testing::harness::{Case, Scenario, Verdict};
use clrprof_testing::manifest::{Os, Wine};
use clrprof_testing::run::Profiler;
use clrprof_testing::wine::to_wine_path;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// CLSID of the fixture class that detaches from ProfilerAttachComplete and
/// records its own drop.
const DETACH_DROP: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4E}";

/// CLSID of the fixture class that is loaded at startup and asks to detach.
const STARTUP_DETACH: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4F}";

/// What the app prints when its sum matches the closed formula.
const LONGRUN_OK: &str = "iterations positive\nsum matches formula True\n";

const NO_PIPE_PORT: &str = "the port must be served by Windows code in the app's Wine prefix and the CLI has no subcommand for it; the Windows DiagnosticPort (named-pipe server) is unit-tested under Wine against a stand-in runtime";

const NO_PORTS_31: &str =
    ".NET Core 3.1 has no diagnostic ports and no StartupProfiler command (both arrived in .NET 5)";

type R<T> = Result<T, Verdict>;

/// A started longrun app with its stop and ready files.
pub(crate) struct Running {
    app: Background,
    stop: PathBuf,
    pub(crate) records: PathBuf,
    pub(crate) pid: u32,
}

/// A path as the app sees it: the Unix path, or its `Z:\...` form on
/// Windows legs.
fn app_path(case: &Case<'_>, p: &Path) -> R<String> {
    match case.leg().os {
        Os::Linux => Ok(p.display().to_string()),
        Os::Windows => Ok(to_wine_path(p)?),
    }
}

pub(crate) fn start_longrun(case: &Case<'_>, env: &[(&str, &str)]) -> R<Running> {
    start_longrun_probed(case, env, None)
}

/// [`start_longrun`], with the app's probe file (`longrun`'s third
/// argument: once it exists the app calls its `Probe` method once and
/// writes `<probe>.done`).
pub(crate) fn start_longrun_probed(
    case: &Case<'_>,
    env: &[(&str, &str)],
    probe: Option<&Path>,
) -> R<Running> {
    let app = case.app("longrun")?;
    let mut spec = case.spec(&app);
    let stop = spec.work_dir.join("stop");
    let ready = spec.work_dir.join("ready");
    spec.args = vec![app_path(case, &stop)?, app_path(case, &ready)?];
    if let Some(p) = probe {
        spec.args.push(app_path(case, p)?);
    }
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let runtimes = clrprof_testing::discover();
    let bg = spawn_app(case.leg(), runtimes.wine(), &spec)?;
    let records = bg.records_path();
    Ok(Running {
        app: bg,
        stop,
        records,
        pid: 0,
    })
    .and_then(|mut r| {
        let text = wait_for_file(&ready, Duration::from_secs(60))?;
        r.pid = text
            .parse()
            .map_err(|_| format!("ready file holds {text:?}, not a pid"))?;
        // Under Wine the app's own pid is a Windows one; natively it is the host's.
        if case.leg().os == Os::Linux && r.pid != r.app.id() {
            return Err(format!(
                "app says pid {}, the started process is {}",
                r.pid,
                r.app.id()
            )
            .into());
        }
        Ok(r)
    })
}

impl Running {
    /// Stops the app and checks its exit and its own ground truth.
    pub(crate) fn stop_and_check(self) -> R<Vec<Value>> {
        std::fs::write(&self.stop, "stop").map_err(|e| format!("writing the stop file: {e}"))?;
        let outcome = self.app.finish(Duration::from_secs(60))?;
        outcome.check_exit()?;
        if outcome.stdout != LONGRUN_OK {
            return Err(format!("app output {:?}, expected {LONGRUN_OK:?}", outcome.stdout).into());
        }
        if !outcome.bad_records.is_empty() {
            return Err(format!("invalid records: {:?}", outcome.bad_records).into());
        }
        Ok(outcome.records)
    }
}

fn clsid_of(p: &Profiler) -> R<clrprof::sys::GUID> {
    parse_clsid(&p.clsid).map_err(|e| Verdict::Failed(e.to_string()))
}

fn path_of(p: &Profiler) -> String {
    p.path.display().to_string()
}

fn count(records: &[Value], event: &str) -> usize {
    records.iter().filter(|r| r["event"] == event).count()
}

/// Polls the records file until `event` occurs `n` times.
pub(crate) fn wait_for_events(
    records: &Path,
    event: &str,
    n: usize,
    timeout: Duration,
) -> R<Vec<Value>> {
    let start = Instant::now();
    loop {
        let (r, _) = clrprof_testing::background::read_records(records);
        if count(&r, event) >= n {
            return Ok(r);
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "waited {}s for {n} {event:?} records, have {}: last records {:?}",
                timeout.as_secs(),
                count(&r, event),
                r.iter().rev().take(5).collect::<Vec<_>>()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An attach the runtime (or the trigger) refused.
pub(crate) struct Refused {
    pub(crate) already_active: bool,
    pub(crate) message: String,
}

/// How a case reaches the runtime: the trigger library in this process on
/// Linux legs; the Windows build of the CLI under Wine on Windows legs.
pub(crate) enum Trigger {
    Native,
    Wine {
        exe: PathBuf,
        wine: Wine,
        scratch: PathBuf,
    },
}

impl Trigger {
    pub(crate) fn for_case(case: &Case<'_>) -> R<Trigger> {
        match case.leg().os {
            Os::Linux => Ok(Trigger::Native),
            Os::Windows => {
                let wine = clrprof_testing::discover()
                    .wine()
                    .cloned()
                    .ok_or("Windows leg without a Wine configuration")?;
                let scratch = case.spec(Path::new("trigger")).work_dir;
                Ok(Trigger::Wine {
                    exe: windows_cli()?,
                    wine,
                    scratch,
                })
            }
        }
    }

    /// A path as the target runtime sees it.
    pub(crate) fn target_path(&self, p: &Path) -> R<String> {
        match self {
            Trigger::Native => Ok(p.display().to_string()),
            Trigger::Wine { .. } => Ok(to_wine_path(p)?),
        }
    }

    pub(crate) fn attach(&self, pid: u32, p: &Profiler, data: &str) -> R<Result<(), Refused>> {
        match self {
            Trigger::Native => {
                let r = attach_profiler(
                    pid,
                    clsid_of(p)?,
                    &self.target_path(&p.path)?,
                    data.as_bytes(),
                    Duration::from_secs(10),
                );
                Ok(r.map_err(|e| Refused {
                    already_active: e.is_already_active(),
                    message: e.to_string(),
                }))
            }
            Trigger::Wine { exe, wine, scratch } => {
                let target = self.target_path(&p.path)?;
                let make = || {
                    let mut cmd = std::process::Command::new(&wine.loader);
                    cmd.arg(exe)
                        .args(["attach", "--pid", &pid.to_string(), "--profiler", &target])
                        .args([
                            "--clsid",
                            &p.clsid,
                            "--client-data",
                            data,
                            "--timeout-ms",
                            "10000",
                        ])
                        .env("WINEPREFIX", &wine.prefix)
                        .env("WINEDEBUG", "-all")
                        .env_remove("CLRPROF_OUTPUT");
                    cmd
                };
                std::fs::create_dir_all(scratch)
                    .map_err(|e| format!("{}: {e}", scratch.display()))?;
                let mut done =
                    clrprof_testing::run::run_captured(make(), Duration::from_secs(60), scratch)?;
                // The CLI always prints a line, attached or not. A failing
                // status with no output at all is Wine not starting the
                // process (seen once: status 66, nothing printed); start it
                // again, at most twice.
                for _ in 0..2 {
                    let silent = !matches!(done.exit, clrprof_testing::run::Exit::Code(0))
                        && done.stdout.trim().is_empty()
                        && done.stderr.trim().is_empty();
                    if !silent {
                        break;
                    }
                    eprintln!("    note: clrprof.exe ended {:?} without any output under Wine; running it again", done.exit);
                    done = clrprof_testing::run::run_captured(
                        make(),
                        Duration::from_secs(60),
                        scratch,
                    )?;
                }
                let stderr = clrprof_testing::wine::strip_cr(&done.stderr);
                // The CLI prints this line only after the runtime's OK reply.
                // (Once, on win-x64-8.0, Wine killed the finished CLI process
                // with SIGKILL after it had printed it; the attach itself had
                // succeeded, so the line, not the exit status, decides.)
                let attached = stderr.starts_with("clrprof: attached ");
                match done.exit {
                    clrprof_testing::run::Exit::Code(0) => Ok(Ok(())),
                    clrprof_testing::run::Exit::Signal(9) if attached => Ok(Ok(())),
                    _ => Ok(Err(Refused {
                        already_active: stderr.contains("CORPROF_E_PROFILER_ALREADY_ACTIVE"),
                        message: format!("{:?}: {}", done.exit, stderr.trim()),
                    })),
                }
            }
        }
    }
}

/// Builds the `clrprof` CLI for Windows and returns the `.exe`.
pub(crate) fn windows_cli() -> R<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(clrprof_testing::build::cargo())
        .current_dir(&workspace)
        .args([
            "build",
            "--quiet",
            "--message-format=json-render-diagnostics",
            "-p",
            "clrprof-cli",
        ])
        .args(["--target", Os::Windows.rust_target()])
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building clrprof-cli for Windows failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "clrprof")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| "cargo reported no clrprof.exe".into())
}

/// Attaches; while the previous profiler is still being unloaded the
/// runtime answers PROFILER_ALREADY_ACTIVE, so that answer is retried for up
/// to two seconds. Returns how many retries were needed.
pub(crate) fn attach_retrying(trigger: &Trigger, pid: u32, p: &Profiler, data: &str) -> R<u32> {
    let start = Instant::now();
    let mut retries = 0;
    loop {
        match trigger.attach(pid, p, data)? {
            Ok(()) => return Ok(retries),
            Err(r) if r.already_active && start.elapsed() < Duration::from_secs(2) => {
                retries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(r) => return Err(format!("attach failed: {}", r.message).into()),
        }
    }
}

fn cycles(case: &Case<'_>) -> R<()> {
    // Under Wine each cycle takes about ten seconds (the Windows CLI's
    // start-up through Wine), so five there keep the case at a minute; the
    // Linux legs keep twenty.
    let cycles: usize = if case.leg().name.starts_with("win-") {
        5
    } else {
        20
    };
    let tracer = case.profiler("attach-tracer")?;
    let trigger = Trigger::for_case(case)?;
    let run = start_longrun(case, &[])?;
    let data = format!(
        "output={};detach_after_ms=100",
        trigger.target_path(&run.records)?
    );
    let mut retries = 0;
    for i in 1..=cycles {
        retries += attach_retrying(&trigger, run.pid, &tracer, &data)?;
        wait_for_events(&run.records, "detached", i, Duration::from_secs(30))
            .map_err(|e| format!("cycle {i}: {}", describe(&e)))?;
    }
    let pid = run.pid;
    let records = run.stop_and_check()?;
    for (event, want) in [
        ("runtime", cycles),
        ("attached", cycles),
        ("attach_complete", cycles),
        ("detach_requested", cycles),
        ("detached", cycles),
        ("detach_failed", 0),
    ] {
        if count(&records, event) != want {
            return Err(format!(
                "{want} {event:?} records expected, got {}: {records:?}",
                count(&records, event)
            )
            .into());
        }
    }
    let leg = case.leg();
    for r in records.iter().filter(|r| r["event"] == "runtime") {
        if r["version"] != leg.version.as_str() || r["pid"] != pid {
            return Err(format!(
                "runtime record {r} does not match leg {} / pid {pid}",
                leg.version
            )
            .into());
        }
    }
    // Every attach caught up with the modules loaded before it.
    let mut cycle_modules: Vec<Vec<&str>> = Vec::new();
    for r in &records {
        match r["event"].as_str() {
            Some("attached") => cycle_modules.push(Vec::new()),
            Some("module") => {
                if let (Some(c), Some(n)) = (cycle_modules.last_mut(), r["name"].as_str()) {
                    c.push(n);
                }
            }
            _ => {}
        }
    }
    for (i, names) in cycle_modules.iter().enumerate() {
        let has = |end: &str| names.iter().any(|n| n.ends_with(end));
        if !has("longrun.dll") || !has("System.Private.CoreLib.dll") {
            return Err(format!(
                "cycle {}: modules {names:?} lack longrun.dll or System.Private.CoreLib.dll",
                i + 1
            )
            .into());
        }
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        if unique.len() != names.len() {
            return Err(format!("cycle {}: a module was reported twice: {names:?}", i + 1).into());
        }
    }
    // Every attach caught up with functions compiled before it (Main at least).
    for (i, r) in records
        .iter()
        .filter(|r| r["event"] == "attach_complete")
        .enumerate()
    {
        if r["functions"].as_u64().unwrap_or(0) == 0 {
            return Err(format!(
                "cycle {}: EnumJITedFunctions catch-up found nothing: {r}",
                i + 1
            )
            .into());
        }
    }
    // The app compiles a new dynamic method every ~10 ms and each cycle
    // stays attached for at least 100 ms: every cycle must have seen some.
    let mut jit = 0;
    for (i, r) in records
        .iter()
        .filter(|r| r["event"] == "detached")
        .enumerate()
    {
        let dynamic = r["dynamic_jit"].as_u64().unwrap_or(0);
        if dynamic == 0 {
            return Err(format!(
                "cycle {}: no dynamic-method JIT compilation seen while attached: {r}",
                i + 1
            )
            .into());
        }
        jit += dynamic + r["jit"].as_u64().unwrap_or(0);
    }
    eprintln!("    {cycles} cycles, {retries} ALREADY_ACTIVE retries while unloading, {jit} JIT compilations seen");
    Ok(())
}

fn describe(v: &Verdict) -> String {
    match v {
        Verdict::Failed(s) | Verdict::Skipped(s) => s.clone(),
    }
}

/// GC monitoring asked for in InitializeForAttach: the runtime turns
/// concurrent GC off for it there (and only there), so the attach succeeds
/// and the app's induced collections are reported.
fn gc_after_attach(case: &Case<'_>) -> R<()> {
    let tracer = case.profiler("attach-tracer")?;
    let trigger = Trigger::for_case(case)?;
    let run = start_longrun(case, &[])?;
    let data = format!(
        "output={};gc=1;detach_after_ms=1500",
        trigger.target_path(&run.records)?
    );
    if let Err(r) = trigger.attach(run.pid, &tracer, &data)? {
        return Err(format!("attach with MONITOR_GC failed: {}", r.message).into());
    }
    wait_for_events(&run.records, "detached", 1, Duration::from_secs(30))?;
    let records = run.stop_and_check()?;
    let gcs = records
        .iter()
        .find(|r| r["event"] == "detached")
        .and_then(|r| r["gc"].as_u64())
        .unwrap_or(0);
    // The app collects every 20 iterations (~0.2-0.3 s); 1.5 s attached.
    if gcs == 0 {
        return Err(
            format!("no GarbageCollectionStarted while attached for 1.5 s: {records:?}").into(),
        );
    }
    Ok(())
}

fn already_active(case: &Case<'_>) -> R<()> {
    let tracer = case.profiler("attach-tracer")?;
    let trigger = Trigger::for_case(case)?;
    let run = start_longrun(case, &[])?;
    let data = format!("output={}", trigger.target_path(&run.records)?);
    if let Err(r) = trigger.attach(run.pid, &tracer, &data)? {
        return Err(format!("first attach failed: {}", r.message).into());
    }
    let refused = match trigger.attach(run.pid, &tracer, &data)? {
        Ok(()) => {
            return Err(
                "the second attach succeeded; expected CORPROF_E_PROFILER_ALREADY_ACTIVE".into(),
            )
        }
        Err(r) => r,
    };
    let text = &refused.message;
    if !refused.already_active
        || !text.contains("CORPROF_E_PROFILER_ALREADY_ACTIVE")
        || !text.contains("already loaded")
    {
        return Err(format!("expected an explained ALREADY_ACTIVE, got: {text}").into());
    }
    let records = run.stop_and_check()?;
    if count(&records, "attached") != 1 {
        return Err(format!("expected one attached profiler: {records:?}").into());
    }
    Ok(())
}

fn drop_after_detach(case: &Case<'_>) -> R<()> {
    let fixture = case.profiler_class("test-profilers", DETACH_DROP)?;
    let trigger = Trigger::for_case(case)?;
    let run = start_longrun(case, &[])?;
    let data = format!(
        "output={};hold_thread=1",
        trigger.target_path(&run.records)?
    );
    if let Err(r) = trigger.attach(run.pid, &fixture, &data)? {
        return Err(format!("attach failed: {}", r.message).into());
    }
    wait_for_events(&run.records, "dropped", 1, Duration::from_secs(30))?;
    let records = run.stop_and_check()?;
    let events: Vec<&str> = records.iter().filter_map(|r| r["event"].as_str()).collect();
    let want = [
        "attached",
        "detach_refused",
        "detach_requested",
        "detach_succeeded",
        "dropped",
    ];
    if events != want {
        return Err(format!("events {events:?}, expected {want:?}; records {records:?}").into());
    }
    let refusal = records[1]["message"].as_str().unwrap_or("");
    if !refusal.contains("still running") || !refusal.contains("fixture-holder") {
        return Err(format!("refusal does not name the running thread: {refusal:?}").into());
    }
    Ok(())
}

/// Detach of a profiler loaded at startup: allowed with reversible flags;
/// refused, and explained, after an immutable flag (DISABLE_INLINING:
/// CORPROF_E_IMMUTABLE_FLAGS_SET, before .NET 10 only: .NET 10 made it
/// mutable, dotnet/runtime PR 113924, and the runtime's detach check reads
/// the immutable set of its version) or ReJIT (ENABLE_REJIT:
/// CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT).
fn startup_detach(case: &Case<'_>) -> R<()> {
    let fixture = case.profiler_class("test-profilers", STARTUP_DETACH)?;
    let inlining_immutable = case.leg().major() < 10;
    for (flags, expected) in [
        ("none", None),
        (
            "inlining",
            inlining_immutable.then_some("CORPROF_E_IMMUTABLE_FLAGS_SET"),
        ),
        (
            "rejit",
            Some("CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT"),
        ),
    ] {
        let app = case.app("longrun")?;
        let mut spec = case
            .spec(&app)
            .profiler(fixture.clone())
            .env("CLRPROF_DETACH_FLAGS", flags);
        let stop = spec.work_dir.join("stop");
        let ready = spec.work_dir.join("ready");
        spec.args = vec![app_path(case, &stop)?, app_path(case, &ready)?];
        let runtimes = clrprof_testing::discover();
        let bg = spawn_app(case.leg(), runtimes.wine(), &spec)?;
        let records_path = bg.records_path();
        wait_for_file(&ready, Duration::from_secs(60))?;
        let last = if expected.is_some() {
            "detach_failed"
        } else {
            "dropped"
        };
        wait_for_events(&records_path, last, 1, Duration::from_secs(30))
            .map_err(|e| format!("{flags}: {}", describe(&e)))?;
        let run = Running {
            app: bg,
            stop,
            records: records_path,
            pid: 0,
        };
        let records = run.stop_and_check()?;
        let events: Vec<&str> = records.iter().filter_map(|r| r["event"].as_str()).collect();
        match expected {
            None => {
                let want = ["armed", "detach_requested", "detach_succeeded", "dropped"];
                if events != want {
                    return Err(format!("{flags}: events {events:?}, expected {want:?}").into());
                }
            }
            Some(code) => {
                let message = records
                    .iter()
                    .find(|r| r["event"] == "detach_failed")
                    .and_then(|r| r["message"].as_str())
                    .unwrap_or("");
                // 3.1 releases (drops) the profiler at shutdown; 8.0 does not.
                let refused_only = events.starts_with(&["armed", "detach_failed"])
                    && events[2..].iter().all(|e| *e == "dropped");
                if !refused_only
                    || !message.contains(code)
                    || !message.contains("RequestProfilerDetach")
                {
                    return Err(format!(
                        "{flags}: expected a refusal naming {code}, got {events:?}: {message:?}"
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// `longrun`'s probe: creates the probe file, waits for the app to have run
/// `Probe` in its own module and in a copy loaded then (its `.done` file),
/// and returns, for each, whether `Twice` was inlined into `Probe` (the
/// app's own account: which method called `Deep`).
pub(crate) fn run_probe(probe: &Path) -> R<(bool, bool)> {
    std::fs::write(probe, "go").map_err(|e| format!("{}: {e}", probe.display()))?;
    let mut done = probe.as_os_str().to_owned();
    done.push(".done");
    let result = wait_for_file(Path::new(&done), Duration::from_secs(60))?;
    // Probe(20) = Twice(20) + 1.
    let inlined = |line: Option<&str>| match line.map(str::trim) {
        Some("41 Probe") => Ok(true),
        Some("41 Twice") => Ok(false),
        other => Err(format!("Probe answered {other:?} ({result:?})")),
    };
    let mut lines = result.lines();
    Ok((inlined(lines.next())?, inlined(lines.next())?))
}

/// `COR_PRF_DISABLE_INLINING` and `COR_PRF_DISABLE_OPTIMIZATIONS` asked for
/// in `InitializeForAttach` (dotnet/runtime PR 113924 put them in
/// `COR_PRF_ALLOWABLE_AFTER_ATTACH` in .NET 10). For each request the app
/// then runs its `Probe` twice, in its own module (loaded before the
/// attach) and in a copy of its assembly loaded after it, with the
/// attach-tracer recording the JIT's compilations and inlinings, and the
/// app saying whether `Twice` was inlined into `Probe`:
/// - none: inlined in both, the JIT asking `JITInlining` twice, on every
///   leg;
/// - `DISABLE_INLINING`, or `DISABLE_OPTIMIZATIONS`, alone: from .NET 10
///   on the runtime holds the flag (`GetEventMask`) and applies it to the
///   modules that load from then on, as after `Initialize`: the copy is not
///   inlined (no `JITInlining` for it), the app's own module still is.
///   Before .NET 10 the SDK refuses the mask before calling the runtime
///   (`Error::RuntimeVersion` in the log: "would answer 0x8013136f
///   CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER"), the attach fails with
///   that code, and the app goes on unprofiled, inlining in both.
fn disable_flags_at_attach(case: &Case<'_>) -> R<()> {
    let tracer = case.profiler("attach-tracer")?;
    let trigger = Trigger::for_case(case)?;
    let net10 = case.leg().major() >= 10;
    let inlining = clrprof::sys::COR_PRF_DISABLE_INLINING as u64;
    let optimizations = clrprof::sys::COR_PRF_DISABLE_OPTIMIZATIONS as u64;
    for (disable, flags) in [
        ("", 0),
        ("inlining", inlining),
        ("optimizations", optimizations),
    ] {
        let what = if disable.is_empty() {
            "no flag"
        } else {
            disable
        };
        let dir = case.spec(Path::new(&format!("disable-{}", flags))).work_dir;
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let (probe, log, records) = (
            dir.join("probe"),
            dir.join("sdk.log"),
            dir.join("tracer.jsonl"),
        );
        for p in [&probe, &log, &records] {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_file(dir.join("probe.done"));
        let log_path = trigger.target_path(&log)?;
        let run = start_longrun_probed(
            case,
            &[("CLRPROF_LOG", "error"), ("CLRPROF_LOG_FILE", &log_path)],
            Some(&probe),
        )?;
        let data = format!(
            "output={};inlining=1;disable={disable}",
            trigger.target_path(&records)?
        );
        let attached = trigger.attach(run.pid, &tracer, &data)?;
        let refused_here = !net10 && flags != 0;
        match (&attached, refused_here) {
            (Ok(()), false) => {
                let r = wait_for_events(&records, "attach_complete", 1, Duration::from_secs(30))?;
                let mask = r
                    .iter()
                    .find(|r| r["event"] == "attach_complete")
                    .and_then(|r| r["mask"].as_u64())
                    .unwrap_or(0);
                if mask & (inlining | optimizations) != flags {
                    return Err(format!(
                        "{what}: the runtime holds the mask {mask:#x} after the attach"
                    )
                    .into());
                }
            }
            (Err(refused), true) => {
                if !refused
                    .message
                    .contains("CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER")
                {
                    return Err(format!(
                        "{what}: the attach was refused with {:?}, expected CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER",
                        refused.message
                    )
                    .into());
                }
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if !(text.contains(
                    "would answer 0x8013136f CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER",
                ) && text.contains(".NET 10")
                    && text.contains("PR 113924"))
                {
                    return Err(format!(
                        "{what}: the SDK's log has no refusal before the runtime call (Error::RuntimeVersion): {text:?}"
                    )
                    .into());
                }
            }
            (Ok(()), true) => {
                return Err(format!(
                    "{what}: the attach succeeded on .NET {}, expected the SDK to refuse it",
                    case.leg().major()
                )
                .into())
            }
            (Err(refused), false) => {
                return Err(format!("{what}: the attach failed: {}", refused.message).into())
            }
        }
        let inlined = run_probe(&probe)?;
        let (tracer_records, _) = clrprof_testing::background::read_records(&records);
        run.stop_and_check()?;
        let compiled = tracer_records
            .iter()
            .filter(|r| r["event"] == "compiled" && r["name"] == "LongRun.Program::Probe")
            .count();
        let asked: Vec<&str> = tracer_records
            .iter()
            .filter(|r| r["event"] == "inlining" && r["caller"] == "LongRun.Program::Probe")
            .filter_map(|r| r["callee"].as_str())
            .collect();
        // (own module, copy loaded after the attach), Probe compiled while
        // attached, JITInlining asked for it.
        let applied = flags != 0 && !refused_here;
        // Under Wine the JIT's optimised compile of Probe, with the inline,
        // is redone in MinOpts (see conformance unittest/inlining): the app
        // never sees Twice inlined there, and JITInlining is the evidence.
        let want_inlined = if case.leg().os == Os::Windows {
            (false, false)
        } else {
            (true, !applied)
        };
        let want_compiled = if refused_here { 0 } else { 2 };
        let want_asked = match (refused_here, applied) {
            (true, _) => vec![],
            (false, true) => vec!["LongRun.Program::Twice"],
            (false, false) => vec!["LongRun.Program::Twice"; 2],
        };
        if (inlined, compiled, &asked) != (want_inlined, want_compiled, &want_asked) {
            return Err(format!(
                "{what} on .NET {}: inlined (own module, copy) {inlined:?}, Probe compiled {compiled} times while attached, JITInlining asked {asked:?}; expected {want_inlined:?}, {want_compiled}, {want_asked:?}",
                case.leg().major()
            )
            .into());
        }
    }
    Ok(())
}

fn startup_port(case: &Case<'_>) -> R<()> {
    let tracer = case.profiler("attach-tracer")?;
    // Unix socket paths are limited to ~108 bytes: keep it short.
    let sock = std::env::temp_dir().join(format!(
        "clrprof-port-{}-{}.sock",
        std::process::id(),
        case.leg().name
    ));
    let _ = std::fs::remove_file(&sock);
    let port = DiagnosticPort::bind(&sock).map_err(|e| e.to_string())?;
    let app = case.app("longrun")?;
    let mut spec = case.spec(&app);
    let stop = spec.work_dir.join("stop");
    let ready = spec.work_dir.join("ready");
    let records = spec.work_dir.join("records.jsonl");
    spec.args = vec![app_path(case, &stop)?, app_path(case, &ready)?];
    spec = spec
        .env(port.variable(), &port.variable_value())
        .env("CLRPROF_OUTPUT", &records.display().to_string());
    let runtimes = clrprof_testing::discover();
    let bg = spawn_app(case.leg(), runtimes.wine(), &spec)?;
    // Suspended: no managed code may have run before the profiler is loaded.
    std::thread::sleep(Duration::from_millis(300));
    if ready.exists() {
        return Err("the app ran before the diagnostic port resumed it".into());
    }
    let pid = port
        .load_profiler_at_startup(
            clsid_of(&tracer)?,
            &path_of(&tracer),
            Duration::from_secs(30),
        )
        .map_err(|e| format!("startup load failed: {e}"))?;
    if pid != u64::from(bg.id()) {
        return Err(format!("the port advertised pid {pid}, the app is {}", bg.id()).into());
    }
    wait_for_file(&ready, Duration::from_secs(60))?;
    let run = Running {
        app: bg,
        stop,
        records,
        pid: pid as u32,
    };
    let records = run.stop_and_check()?;
    let events: Vec<&str> = records.iter().filter_map(|r| r["event"].as_str()).collect();
    if events.first() != Some(&"runtime")
        || events.get(1) != Some(&"startup")
        || count(&records, "attached") != 0
    {
        return Err(
            format!("expected a startup load (runtime, startup, ...), got {events:?}").into(),
        );
    }
    if !records.iter().any(|r| {
        r["event"] == "module"
            && r["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("longrun.dll"))
    }) {
        return Err(format!("longrun.dll load not seen: {records:?}").into());
    }
    let shutdown = records.iter().find(|r| r["event"] == "shutdown");
    let counted = |k: &str| shutdown.and_then(|r| r[k].as_u64()).unwrap_or(0);
    if counted("jit") == 0 || counted("dynamic_jit") == 0 {
        return Err(format!(
            "no shutdown record with JIT and dynamic-method compilations: {records:?}"
        )
        .into());
    }
    Ok(())
}

/// `ResumeRuntime` (process command set, .NET 5+) sent to a running app:
/// .NET Core 3.1 has no process commands and answers
/// CORDIAGIPC_E_UNKNOWN_COMMAND, which the trigger reports as
/// `RuntimeTooOld`; .NET 8 answers OK (a no-op when not suspended). The app
/// is unaffected either way.
fn resume_runtime_on_running_app(case: &Case<'_>) -> R<()> {
    use clrprof::attach::trigger::{check_reply, ipc, send_command};
    let run = start_longrun(case, &[])?;
    let reply = send_command(
        run.pid,
        ipc::PROCESS,
        ipc::RESUME_RUNTIME,
        &[],
        Duration::from_secs(10),
    )
    .and_then(check_reply);
    let old = case.leg().version.starts_with("3.");
    match (&reply, old) {
        (Err(e @ AttachError::RuntimeTooOld { .. }), true)
            if e.to_string().contains("CORDIAGIPC_E_UNKNOWN_COMMAND") => {}
        (Ok(()), false) => {}
        _ => return Err(format!("unexpected answer on {}: {reply:?}", case.leg().version).into()),
    }
    run.stop_and_check()?;
    Ok(())
}

fn not_dotnet_errors(_case: &Case<'_>) -> R<()> {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .map_err(|e| format!("sleep: {e}"))?;
    let pid = sleeper.id();
    let e = attach_profiler(
        pid,
        clrprof::sys::GUID::zeroed(),
        "/x.so",
        b"",
        Duration::from_secs(2),
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    match e {
        Err(AttachError::NotDotNet { pid: p, .. }) if p == pid => {}
        other => return Err(format!("sleep 30: expected NotDotNet, got {other:?}").into()),
    }
    let e = attach_profiler(
        pid,
        clrprof::sys::GUID::zeroed(),
        "/x.so",
        b"",
        Duration::from_secs(2),
    );
    match e {
        Err(AttachError::NoSuchProcess { pid: p }) if p == pid => Ok(()),
        other => Err(format!("dead pid: expected NoSuchProcess, got {other:?}").into()),
    }
}

pub fn scenarios() -> Vec<Scenario> {
    // Every Windows leg (they run under Wine), the former win-x64-3.1 too.
    let unix_only = |s: Scenario, reason: &str| {
        std::iter::once("win-x64-3.1")
            .chain(
                clrprof_testing::manifest::STANDARD_LEGS
                    .into_iter()
                    .filter(|leg| leg.starts_with("win-")),
            )
            .fold(s, |s, leg| s.exclude_leg(leg, reason))
    };
    vec![
        Scenario::new("attach: 20 attach/detach cycles into one running app (5 under Wine)", cycles),
        Scenario::new("attach: MONITOR_GC from InitializeForAttach, collections reported", gc_after_attach),
        Scenario::new("attach: a second attach is PROFILER_ALREADY_ACTIVE, explained", already_active),
        Scenario::new(
            "attach: DISABLE_INLINING or DISABLE_OPTIMIZATIONS from InitializeForAttach: from .NET 10 held and applied to modules loaded after the attach, before refused by the SDK without calling the runtime",
            disable_flags_at_attach,
        ),
        Scenario::new(
            "attach: detach refused while a profiler thread runs; profiler dropped after ProfilerDetachSucceeded",
            drop_after_detach,
        ),
        Scenario::new(
            "detach: a startup-loaded profiler detaches, or is refused with the reason (immutable flag, ReJIT)",
            startup_detach,
        ),
        unix_only(
            Scenario::new("attach: profiler loaded at startup through a suspended diagnostic port", startup_port),
            NO_PIPE_PORT,
        )
        .exclude_leg("linux-x64-3.1", NO_PORTS_31),
        unix_only(
            Scenario::new(
                "attach: ResumeRuntime is unknown to 3.1 (RuntimeTooOld) and a no-op on running 8.0",
                resume_runtime_on_running_app,
            ),
            "sends a raw command from the test process; the CLI has no raw-command subcommand to run under Wine",
        ),
        // Needs no runtime: checked once, on the first Linux leg.
        unix_only(
            Scenario::new("attach: a dead pid and a non-.NET process give clear errors", not_dotnet_errors),
            "leg-independent; checked on linux-x64-3.1",
        )
        .exclude_leg("linux-x64-8.0", "leg-independent; checked on linux-x64-3.1"),
    ]
}
