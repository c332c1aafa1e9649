//! Running an app on a runtime leg, with or without a profiler.
//!
//! The profiler is loaded the way CoreCLR documents for startup loading:
//! `CORECLR_ENABLE_PROFILING=1`, `CORECLR_PROFILER={CLSID}` and
//! `CORECLR_PROFILER_PATH=<absolute path>` (.NET Core 3.1 and .NET 8 both read
//! these names). On Windows legs the process runs under Wine, which passes the
//! environment through unchanged, so paths in it are written as `Z:\...`.
//! Every run has a timeout: on expiry the whole process group is killed and the
//! run is reported as hung, with the output it had produced so far. Output is
//! captured into files rather than pipes, so a helper process that inherits
//! them (Wine's server) cannot keep a reader waiting.

use crate::manifest::{Leg, Os, Wine};
use crate::wine::{strip_cr, to_wine_path};
use crate::{Error, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Default timeout of one app run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// A profiler library and the CLSID to ask it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profiler {
    /// Absolute path of the `.so` / `.dll`.
    pub path: PathBuf,
    /// Braced CLSID, e.g. `{0A1B2C3D-...}`.
    pub clsid: String,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The app assembly, prepared for the leg (see [`crate::csharp::CompiledApp::for_leg`]).
    pub app: PathBuf,
    /// Arguments passed to the app.
    pub args: Vec<String>,
    /// Profiler to load at startup, if any.
    pub profiler: Option<Profiler>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Time after which the process tree is killed.
    pub timeout: Duration,
    /// Directory for the captured output and the profiler's record file.
    pub work_dir: PathBuf,
}

impl RunSpec {
    /// A run of `app` with no profiler, the default timeout, and captured files in `work_dir`.
    pub fn new(app: impl Into<PathBuf>, work_dir: impl Into<PathBuf>) -> RunSpec {
        RunSpec {
            app: app.into(),
            args: Vec::new(),
            profiler: None,
            env: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            work_dir: work_dir.into(),
        }
    }

    /// Loads `profiler` at startup.
    pub fn profiler(mut self, profiler: Profiler) -> RunSpec {
        self.profiler = Some(profiler);
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> RunSpec {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> RunSpec {
        self.timeout = timeout;
        self
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal (Unix).
    Signal(i32),
    /// Still running at the timeout; the process group was killed.
    Hung(Duration),
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Leg name.
    pub leg: String,
    /// How the process ended.
    pub exit: Exit,
    /// The app's stdout (CRLF stripped on Wine legs).
    pub stdout: String,
    /// The app's stderr (CRLF stripped on Wine legs).
    pub stderr: String,
    /// Whether a profiler was requested.
    pub profiled: bool,
    /// The profiler's JSON Lines records, in file order.
    pub records: Vec<Value>,
    /// Lines of the record file that were not valid JSON, with their line number.
    pub bad_records: Vec<String>,
    /// Wall time of the run.
    pub duration: Duration,
    /// Peak resident memory of the process, in KiB (Linux: the kernel's
    /// `VmHWM`, read every 1 ms for the first half second and every 10 ms
    /// after while the process runs; `None` elsewhere or for a process too
    /// short-lived to be read).
    pub max_rss_kib: Option<u64>,
}

/// The last `max` characters of `text`, on a character boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Name of a Unix signal number (Linux numbering) for reports.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

impl Outcome {
    /// The first record, when it is the runtime record every tracer writes first.
    pub fn runtime_record(&self) -> Option<&Value> {
        self.records.first().filter(|r| r["event"] == "runtime")
    }

    /// Records whose `event` field is `event`.
    pub fn events<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.records.iter().filter(move |r| r["event"] == event)
    }

    fn partial_output(&self) -> String {
        format!(
            "partial output: stdout: {:?}; stderr: {:?}",
            tail(&self.stdout, 400),
            tail(&self.stderr, 400)
        )
    }

    /// `Ok` when the process exited with status 0; otherwise a readable reason:
    /// `hung, killed after Ns, partial output: ...`, `process died: SIGSEGV`
    /// (or, under Wine, the unhandled Windows exception Wine reported),
    /// `runtime failed to start` (the host's `Failed to create CoreCLR`, e.g.
    /// when the runtime caught a fault in the profiler's `Initialize`),
    /// `exited with status N; stderr: ...`.
    pub fn check_exit(&self) -> std::result::Result<(), String> {
        match self.exit {
            // Wine says a thread's fault was unhandled and starts its
            // debugger; the process then ends, in some runs with status 0
            // (a crash in the broken-profiler fixture's Initialize on
            // win-x64-10.0, 2026-11-28). A run that says so did not end
            // well: it is read as any other status below.
            Exit::Code(0) if !self.stderr.contains(WINE_UNHANDLED) => Ok(()),
            Exit::Hung(after) => Err(format!(
                "hung, killed after {}s, {}",
                after.as_secs(),
                self.partial_output()
            )),
            Exit::Signal(sig) => Err(format!(
                "process died: {} (signal {sig}); stderr: {:?}",
                signal_name(sig),
                tail(&self.stderr, 400)
            )),
            Exit::Code(code) if self.stderr.contains("Failed to create CoreCLR") => Err(format!(
                "runtime failed to start (exit status {code}); stderr: {:?}",
                tail(&self.stderr, 400)
            )),
            Exit::Code(code) => match crash_under_wine(&self.stderr) {
                Some(what) => Err(format!(
                    "process died: {what} (exit status {code}); stderr: {:?}",
                    tail(&self.stderr, 400)
                )),
                None => Err(format!(
                    "exited with status {code}; stderr: {:?}",
                    tail(&self.stderr, 400)
                )),
            },
        }
    }

    /// `Ok` when the profiler wrote its records starting with the runtime record.
    /// The runtime keeps running the app when a profiler fails to load, so a
    /// missing runtime record is how a load failure shows.
    pub fn check_profiler_loaded(&self) -> std::result::Result<(), String> {
        if !self.bad_records.is_empty() {
            return Err(format!(
                "profiler wrote invalid JSON Lines: {}",
                self.bad_records.join("; ")
            ));
        }
        if self.records.is_empty() {
            return Err(format!(
                "profiler did not load: no records written; stderr: {:?}",
                tail(&self.stderr, 400)
            ));
        }
        if self.runtime_record().is_none() {
            return Err(format!(
                "profiler's first record is not the runtime record: {}",
                self.records[0]
            ));
        }
        Ok(())
    }

    /// [`Outcome::check_exit`], then (for profiled runs) [`Outcome::check_profiler_loaded`].
    pub fn check(&self) -> std::result::Result<(), String> {
        self.check_exit()?;
        if self.profiled {
            self.check_profiler_loaded()?;
        }
        Ok(())
    }
}

/// Wine's line for a fault no handler took (`wine: Unhandled page fault
/// ...`, `wine: Unhandled exception ...`), before it starts its debugger.
const WINE_UNHANDLED: &str = "wine: Unhandled ";

/// Wine reports an unhandled Windows exception on stderr (the process exit
/// status keeps only the low 8 bits of the NTSTATUS); recognise the common ones.
fn crash_under_wine(stderr: &str) -> Option<&'static str> {
    if stderr.contains("page fault") || stderr.contains("c0000005") || stderr.contains("C0000005") {
        Some("access violation (Windows exception 0xC0000005)")
    } else if stderr.contains("Unhandled exception") || stderr.contains("unhandled exception") {
        Some("unhandled exception")
    } else {
        None
    }
}

/// The command that runs `spec` on `leg` (host, or Wine with a Windows path),
/// with a clean profiling environment and, when the spec has a profiler, the
/// `CORECLR_*` variables and `CLRPROF_OUTPUT` pointing at the returned
/// records path in the spec's work directory (created, stale records removed).
pub fn app_command(leg: &Leg, wine: Option<&Wine>, spec: &RunSpec) -> Result<(Command, PathBuf)> {
    std::fs::create_dir_all(&spec.work_dir)
        .map_err(|e| Error::new(format!("{}: {e}", spec.work_dir.display())))?;
    let records_path = spec.work_dir.join("records.jsonl");
    let _ = std::fs::remove_file(&records_path);
    let app = crate::manifest::absolute(&spec.app);

    let mut cmd = match leg.os {
        _ if !leg.is_wine() => {
            // Through the leg's emulator (qemu-aarch64) when it has one.
            let mut c = leg.host_command();
            c.arg(&app);
            c
        }
        Os::Linux | Os::Windows => {
            let wine = wine.ok_or_else(|| {
                Error::new(format!("leg {} needs Wine, none configured", leg.name))
            })?;
            crate::wine::keep_server(wine);
            let mut c = Command::new(&wine.loader);
            c.arg(&leg.host).arg(to_wine_path(&app)?);
            c.env("WINEPREFIX", &wine.prefix).env("WINEDEBUG", "-all");
            c
        }
    };
    cmd.args(&spec.args);
    for var in [
        "CORECLR_ENABLE_PROFILING",
        "CORECLR_PROFILER",
        "CORECLR_PROFILER_PATH",
        "CORECLR_PROFILER_PATH_64",
        "CORECLR_PROFILER_PATH_32",
        "CORECLR_PROFILER_PATH_ARM64",
        "CLRPROF_OUTPUT",
        // The example tracers' side-by-side policy: a value from the
        // developer's shell must not leak into the app unless a spec sets it.
        "CLRPROF_RUNTIMES",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1");
    cmd.env("DOTNET_CLI_TELEMETRY_OPTOUT", "1");
    if leg.is_wine() && leg.major() >= 10 {
        // Wine 8 with .NET 10 and W^X on (the runtime's default) dies
        // finalizing dynamic methods, without any profiler (tests/runtime/
        // wine.rs shows it on every run): the leg runs with the code heap
        // mapped once, as `DOTNET_EnableWriteXorExecute=0` asks. A spec may
        // set it back.
        cmd.env("DOTNET_EnableWriteXorExecute", "0");
    }
    if let Some(p) = &spec.profiler {
        let lib = crate::manifest::absolute(&p.path);
        let (lib_text, out_text) = match leg.os {
            _ if !leg.is_wine() => (
                lib.display().to_string(),
                records_path.display().to_string(),
            ),
            Os::Linux | Os::Windows => (
                to_wine_path(&lib)?,
                to_wine_path(&crate::manifest::absolute(&records_path))?,
            ),
        };
        cmd.env("CORECLR_ENABLE_PROFILING", "1")
            .env("CORECLR_PROFILER", &p.clsid)
            .env("CORECLR_PROFILER_PATH", lib_text)
            .env("CLRPROF_OUTPUT", out_text);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    Ok((cmd, records_path))
}

/// Runs `spec` on `leg`. `wine` is required for Windows legs.
pub fn run_app(leg: &Leg, wine: Option<&Wine>, spec: &RunSpec) -> Result<Outcome> {
    let (cmd, mut records_path) = app_command(leg, wine, spec)?;
    let mut captured = run_captured(cmd, spec.timeout, &spec.work_dir)?;
    // Wine itself now and then fails a run (see `wine::failed_to_run`);
    // run it again, at most twice, and say so.
    for _ in 0..2 {
        if !leg.is_wine() {
            break;
        }
        let status = match captured.exit {
            Exit::Code(c) => Some(c),
            _ => None,
        };
        let Some(why) = crate::wine::failed_to_run(status, &captured.stdout, &captured.stderr)
        else {
            break;
        };
        eprintln!(
            "    note: {} {why} under Wine; running it again",
            spec.app.display()
        );
        let (cmd, again) = app_command(leg, wine, spec)?;
        records_path = again;
        captured = run_captured(cmd, spec.timeout, &spec.work_dir)?;
    }

    let (mut records, mut bad_records) = (Vec::new(), Vec::new());
    if let Ok(text) = std::fs::read_to_string(&records_path) {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(v) => records.push(v),
                Err(e) => bad_records.push(format!("line {}: {e}: {:?}", i + 1, tail(line, 120))),
            }
        }
    }
    let (stdout, stderr) = if leg.is_wine() {
        (strip_cr(&captured.stdout), strip_cr(&captured.stderr))
    } else {
        (captured.stdout, captured.stderr)
    };
    Ok(Outcome {
        leg: leg.name.clone(),
        exit: captured.exit,
        stdout,
        stderr,
        profiled: spec.profiler.is_some(),
        records,
        bad_records,
        duration: captured.duration,
        max_rss_kib: captured.max_rss_kib,
    })
}

/// Output of [`run_captured`].
#[derive(Debug, Clone)]
pub struct Captured {
    /// How the process ended.
    pub exit: Exit,
    /// Its stdout, lossily decoded.
    pub stdout: String,
    /// Its stderr, lossily decoded.
    pub stderr: String,
    /// Wall time.
    pub duration: Duration,
    /// Peak resident memory in KiB (Linux; see [`Outcome::max_rss_kib`]).
    pub max_rss_kib: Option<u64>,
}

/// Runs `cmd` in its own process group with stdout/stderr captured into files
/// in `dir`; on timeout kills the whole group and reports [`Exit::Hung`].
pub fn run_captured(mut cmd: Command, timeout: Duration, dir: &Path) -> Result<Captured> {
    let out_path = dir.join("stdout.txt");
    let err_path = dir.join("stderr.txt");
    let open = |p: &Path| {
        std::fs::File::create(p).map_err(|e| Error::new(format!("{}: {e}", p.display())))
    };
    cmd.stdin(Stdio::null())
        .stdout(open(&out_path)?)
        .stderr(open(&err_path)?);
    as_from_a_terminal(&mut cmd);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::new(format!("cannot start {:?}: {e}", cmd.get_program())))?;
    // Written on Linux only (the peak RSS is read from /proc).
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut max_rss_kib = None;
    let exit = loop {
        match child.try_wait() {
            Ok(Some(status)) => break exit_of(status),
            Ok(None) => {
                // Sampled every poll; the peak only grows, so the last sample
                // misses at most what the final poll interval added.
                #[cfg(target_os = "linux")]
                if let Some(kib) = peak_rss_kib(child.id()) {
                    max_rss_kib = Some(kib);
                }
            }
            Err(e) => {
                return Err(Error::new(format!(
                    "waiting for {:?}: {e}",
                    cmd.get_program()
                )))
            }
        }
        if start.elapsed() >= timeout {
            kill_tree(&mut child);
            let _ = child.wait();
            break Exit::Hung(timeout);
        }
        // Finely at first, so that short runs still have their exit status
        // and their peak memory (above) read close to the end.
        let poll = if start.elapsed() < Duration::from_millis(500) {
            1
        } else {
            10
        };
        std::thread::sleep(Duration::from_millis(poll));
    };
    let duration = start.elapsed();
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    Ok(Captured {
        exit,
        stdout: read(&out_path),
        stderr: read(&err_path),
        duration,
        max_rss_kib,
    })
}

/// The process's peak resident memory so far (`VmHWM` of
/// `/proc/<pid>/status`, in KiB), while it runs. Not `ru_maxrss` from
/// `wait4`: the kernel carries the peak of the pre-`exec` image (a copy of
/// this process) into it, so every child would look at least as large as
/// the test runner.
#[cfg(target_os = "linux")]
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return Exit::Signal(sig);
        }
    }
    Exit::Code(status.code().unwrap_or(-1))
}

/// Starts the app the way a shell started from a terminal would: in its own
/// process group (so a timeout can kill everything it started), and with the
/// default disposition of the signals a user sends from a terminal. A test
/// harness started in the background by a non-interactive shell ignores
/// SIGINT and SIGQUIT, and POSIX keeps ignored signals ignored across `exec`:
/// without the reset, an app (and the runtime's own Ctrl-C handling, which
/// restores the disposition it found) would never see the Ctrl-C a test sends.
pub(crate) fn as_from_a_terminal(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        // SAFETY: the closure runs in the child between fork and exec, where
        // only async-signal-safe functions may be called; `signal` is one
        // (POSIX.1 lists it), and it touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGQUIT] {
                    if libc::signal(sig, libc::SIG_DFL) == libc::SIG_ERR {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

/// Kills the child's whole process group (the child leads it: see [`as_from_a_terminal`]).
fn kill_tree(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) takes plain integers and touches no memory of ours;
            // a negative pid addresses the process group the child leads, which
            // still exists because the child has not been reaped yet.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit: Exit, records: Vec<Value>) -> Outcome {
        Outcome {
            leg: "linux-x64-8.0".into(),
            exit,
            stdout: "partial line\n".into(),
            stderr: String::new(),
            profiled: true,
            records,
            bad_records: Vec::new(),
            duration: Duration::from_secs(1),
            max_rss_kib: None,
        }
    }

    #[test]
    fn reasons_are_readable() {
        let hung = outcome(Exit::Hung(Duration::from_secs(5)), vec![])
            .check()
            .unwrap_err();
        assert!(
            hung.starts_with("hung, killed after 5s, partial output: stdout: \"partial line\\n\""),
            "{hung}"
        );
        let segv = outcome(Exit::Signal(11), vec![]).check().unwrap_err();
        assert!(segv.starts_with("process died: SIGSEGV"), "{segv}");
        let none = outcome(Exit::Code(0), vec![]).check().unwrap_err();
        assert!(
            none.starts_with("profiler did not load: no records written"),
            "{none}"
        );
        let wrong_first = outcome(Exit::Code(0), vec![serde_json::json!({"event":"jit"})])
            .check()
            .unwrap_err();
        assert!(
            wrong_first.contains("not the runtime record"),
            "{wrong_first}"
        );
        let good = outcome(
            Exit::Code(0),
            vec![serde_json::json!({"event":"runtime","version":"8.0.4"})],
        );
        assert_eq!(good.check(), Ok(()));
        let mut wine_fault = outcome(Exit::Code(0), vec![]);
        wine_fault.stderr = "wine: Unhandled page fault on read access to 0000000000000004 at \
                             address 000000000152D6E8 (thread 05cc), starting debugger...\n"
            .into();
        let died = wine_fault.check().unwrap_err();
        assert!(
            died.starts_with(
                "process died: access violation (Windows exception 0xC0000005) (exit status 0)"
            ),
            "{died}"
        );
    }

    #[test]
    fn tail_respects_char_boundaries() {
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(tail("abc", 10), "abc");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn peak_resident_memory_is_the_childs() {
        let dir = std::env::temp_dir().join(format!("clrprof-rss-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = |mib: u32| {
            let mut cmd = Command::new("python3");
            // Touches every page of a `mib` MiB buffer, stays long enough to
            // be sampled a few times, then exits.
            let script = format!("import time; b = bytearray({mib} << 20); time.sleep(0.2)");
            cmd.args(["-c", &script]);
            let captured = run_captured(cmd, Duration::from_secs(30), &dir).unwrap();
            assert_eq!(captured.exit, Exit::Code(0), "{}", captured.stderr);
            captured.max_rss_kib.expect("Linux reports ru_maxrss")
        };
        let (small, large) = (run(1), run(96));
        assert!(large >= 96 * 1024, "96 MiB buffer, peak {large} KiB");
        // Not the runner's own size either (the pre-exec image does not count).
        assert!(
            small + 90 * 1024 <= large,
            "1 MiB: {small} KiB, 96 MiB: {large} KiB"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn timeout_kills_the_process_group_and_keeps_partial_output() {
        let dir = std::env::temp_dir().join(format!("clrprof-run-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        // The grandchild `sleep` would keep running if only `sh` were killed.
        cmd.args(["-c", "echo started; sleep 30 & wait"]);
        let t = Instant::now();
        let c = run_captured(cmd, Duration::from_millis(500), &dir).unwrap();
        assert!(t.elapsed() < Duration::from_secs(10));
        assert_eq!(c.exit, Exit::Hung(Duration::from_millis(500)));
        assert_eq!(c.stdout, "started\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn ctrl_c_reaches_the_app_even_when_the_harness_ignores_it() {
        let dir = std::env::temp_dir().join(format!("clrprof-run-test3-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // What a harness started with `cmd &` from a non-interactive shell has.
        // SAFETY: `signal` only swaps this process's disposition of SIGINT;
        // the previous one is put back below, and nothing in this test
        // binary sends SIGINT in between.
        let before = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
        let mut cmd = Command::new("sh");
        // A shell started with SIGINT ignored keeps ignoring it and echoes.
        cmd.args(["-c", "kill -INT $$; echo survived"]);
        let c = run_captured(cmd, DEFAULT_TIMEOUT, &dir);
        // SAFETY: as above; restores what the test found.
        unsafe { libc::signal(libc::SIGINT, before) };
        let c = c.unwrap();
        assert_eq!((c.exit, c.stdout.as_str()), (Exit::Signal(2), ""));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn signals_and_codes_are_told_apart() {
        let dir = std::env::temp_dir().join(format!("clrprof-run-test2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "kill -SEGV $$"]);
        assert_eq!(
            run_captured(cmd, DEFAULT_TIMEOUT, &dir).unwrap().exit,
            Exit::Signal(11)
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo err >&2; exit 3"]);
        let c = run_captured(cmd, DEFAULT_TIMEOUT, &dir).unwrap();
        assert_eq!((c.exit, c.stderr.as_str()), (Exit::Code(3), "err\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
