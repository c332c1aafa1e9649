//! What the benchmarks share: their setup (the leg, release profilers, C
//! yardsticks, apps) and the figures taken from runs (an app's own
//! `elapsed_ns` line, medians).

use clrprof_testing::run::{app_command, run_captured, Outcome, Profiler, RunSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `elapsed_ns N` line a benchmark app prints about its own timed part.
pub(crate) fn elapsed_ns(outcome: &Outcome) -> crate::Result<f64> {
    let line = outcome
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("elapsed_ns "))
        .ok_or_else(|| {
            format!(
                "no elapsed_ns line: {:?} {:?}",
                outcome.stdout, outcome.stderr
            )
        })?;
    let ns = line.split_whitespace().next().unwrap_or("");
    Ok(ns.parse::<f64>()?)
}

/// Median (mean of the middle two for an even count); sorts `values`.
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// What every benchmark starts from: the workspace, the provisioned
/// runtimes, the leg it measures on and `target/bench/`.
pub(crate) struct Setup {
    pub root: std::path::PathBuf,
    pub cache: std::path::PathBuf,
    pub runtimes: clrprof_testing::Runtimes,
    pub leg: clrprof_testing::Leg,
    pub out_dir: std::path::PathBuf,
}

impl Setup {
    /// Finds `leg_name` among the provisioned legs. Timings under Wine are
    /// not meaningful: `bench` names the benchmark in the error for a
    /// Windows leg.
    pub(crate) fn open(bench: &str, leg_name: &str) -> crate::Result<Setup> {
        let root = crate::workspace::root();
        let cache = crate::provision::cache_dir(None);
        let runtimes = clrprof_testing::discover();
        let leg = runtimes
            .leg(leg_name)
            .ok_or_else(|| format!("leg {leg_name} is not provisioned (cargo xtask provision)"))?
            .clone();
        if leg.os != clrprof_testing::Os::Linux {
            return Err(format!(
                "bench {bench}: {leg_name} runs under Wine, where timings are not meaningful; use a Linux leg"
            )
            .into());
        }
        let out_dir = root.join("target/bench");
        std::fs::create_dir_all(&out_dir)?;
        Ok(Setup {
            root,
            cache,
            runtimes,
            leg,
            out_dir,
        })
    }

    /// A workspace package built in release as a profiler for the leg.
    pub(crate) fn release_profiler(&self, package: &str) -> crate::Result<Profiler> {
        let path = clrprof_testing::build::build_cdylib(package, self.leg.os, true, &self.root)?;
        Ok(Profiler {
            clsid: clrprof_testing::clsid::single_clsid(&path)?,
            path,
        })
    }

    /// A C profiler from `sources` (relative to the workspace), built with
    /// `$CC -O2` into `target/bench/<lib>` and served under `clsid`.
    pub(crate) fn c_profiler(
        &self,
        lib: &str,
        sources: &[&str],
        clsid: &str,
    ) -> crate::Result<Profiler> {
        Ok(Profiler {
            path: self.c_library(lib, sources)?,
            clsid: clsid.to_string(),
        })
    }

    /// A shared library from C `sources` (relative to the workspace), built
    /// with `$CC -O2` into `target/bench/<lib>` (`lib` may name a folder).
    pub(crate) fn c_library(&self, lib: &str, sources: &[&str]) -> crate::Result<PathBuf> {
        if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
            return Err("the C yardsticks are built for linux-x64 only".into());
        }
        let path = self.out_dir.join(lib);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let status =
            std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
                .args(["-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o"])
                .arg(&path)
                .args(sources.iter().map(|s| self.root.join(s)))
                .status()?;
        if !status.success() {
            return Err(format!("building {lib} from {sources:?} failed: {status}").into());
        }
        Ok(path)
    }

    /// Runs `spec` under `valgrind --tool=callgrind` (with the variables
    /// CoreCLR needs to start there), its profile written to
    /// `work/callgrind.out`: the outcome and the process's total instruction
    /// count. The records are those of `work/records.jsonl`.
    pub(crate) fn under_callgrind(
        &self,
        spec: RunSpec,
        work: &Path,
    ) -> crate::Result<(Outcome, u64)> {
        self.callgrind(spec, work, None)
    }

    /// Runs `spec` under callgrind with instrumentation off until the app
    /// turns it on through the callgrind marker (`benches/callgrind/`, the
    /// library `marker`, made by [`Setup::callgrind_marker`]): the total is
    /// that of the part the app brackets with the marker's two calls.
    pub(crate) fn under_callgrind_marked(
        &self,
        spec: RunSpec,
        work: &Path,
        marker: &Path,
    ) -> crate::Result<(Outcome, u64)> {
        let dir = marker.parent().ok_or("the marker library has no folder")?;
        let spec = spec
            .env("CLRPROF_CALLGRIND_MARKER", "1")
            .env("LD_LIBRARY_PATH", &dir.display().to_string());
        let (outcome, total) = self.callgrind(spec, work, Some("--instr-atstart=no"))?;
        if total == 0 {
            return Err(format!(
                "callgrind counted nothing: the app did not call the marker ({})",
                work.display()
            )
            .into());
        }
        Ok((outcome, total))
    }

    /// The callgrind marker library (`benches/callgrind/marker.c`), in a
    /// folder of its own (the marked runs put it on the library path).
    pub(crate) fn callgrind_marker(&self) -> crate::Result<PathBuf> {
        self.c_library(
            "callgrind/libclrprof_callgrind_marker.so",
            &["benches/callgrind/marker.c"],
        )
    }

    fn callgrind(
        &self,
        spec: RunSpec,
        work: &Path,
        option: Option<&str>,
    ) -> crate::Result<(Outcome, u64)> {
        let spec = spec
            .env("DOTNET_GCHeapHardLimit", "0x10000000")
            .env("COMPlus_GCHeapHardLimit", "0x10000000")
            .env("DOTNET_EnableWriteXorExecute", "0");
        let (app, records_path) = app_command(&self.leg, self.runtimes.wine(), &spec)?;
        let out_file = work.join("callgrind.out");
        let mut cmd = std::process::Command::new("valgrind");
        cmd.arg("--tool=callgrind")
            .args(option)
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            .arg(app.get_program())
            .args(app.get_args());
        for (k, v) in app.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let (pad_count, pad) = environment_padding(&cmd);
        for i in 0..pad_count {
            cmd.env(format!("CLRPROF_CALLGRIND_PAD{i}"), "");
        }
        cmd.env("CLRPROF_CALLGRIND_PAD", pad);
        let captured = run_captured(cmd, Duration::from_secs(1800), work)?;
        let total = captured
            .stderr
            .lines()
            .find_map(|l| l.split("Collected : ").nth(1))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("no callgrind total: {}", captured.stderr))?;
        let records = clrprof_testing::background::read_records(&records_path).0;
        let outcome = Outcome {
            leg: self.leg.name.clone(),
            exit: captured.exit,
            stdout: captured.stdout,
            stderr: captured.stderr,
            profiled: spec.profiler.is_some(),
            records,
            bad_records: Vec::new(),
            duration: captured.duration,
            max_rss_kib: captured.max_rss_kib,
        };
        outcome.check_exit()?;
        Ok((outcome, total))
    }

    /// A C# app of the workspace (`source` relative to it), compiled with
    /// optimisation and prepared for the leg.
    pub(crate) fn app(&self, source: &str) -> crate::Result<std::path::PathBuf> {
        let compiler = self
            .runtimes
            .compiler()
            .ok_or("no C# compiler (install mono-mcs)")?;
        let options = clrprof_testing::csharp::CompileOptions {
            optimize: true,
            ..Default::default()
        };
        let compiled = clrprof_testing::csharp::compile(
            &compiler,
            &self.root.join(source),
            &self.cache,
            options,
            &self.leg,
        )?;
        Ok(compiled.for_leg(&self.leg)?)
    }
}

/// The variables that make the environment `cmd` passes the same size in
/// every run, up to the next 16 KiB, and their number a multiple of 64:
/// how many empty ones, and the value of one more.
///
/// The process's environment strings and their pointers sit above its
/// first stack frame, so their size moves every stack address of the main
/// thread (where the benchmark apps throw and allocate), and with it the
/// alignment of the buffers that `memcpy` and the unwinder copy: seen as
/// 36 instructions per exception between two runs of the unprofiled app
/// whose working folders' names differed by one character. Padded, the
/// three configurations of a row (each with its own profiler variables
/// and folder) start their main thread at the same address, and the
/// runtime's copy of the environment takes as much of the heap in each
/// (left: the strings' lengths one by one; 7 instructions per exception
/// between two parent environments 70 bytes apart).
fn environment_padding(cmd: &std::process::Command) -> (usize, String) {
    let mut vars: BTreeMap<std::ffi::OsString, std::ffi::OsString> = std::env::vars_os().collect();
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => vars.insert(k.to_owned(), v.to_owned()),
            None => vars.remove(k),
        };
    }
    vars.retain(|k, _| !k.to_string_lossy().starts_with("CLRPROF_CALLGRIND_PAD"));
    // `NAME=value\0` each.
    let bytes: usize = vars.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    // The empty ones (`CLRPROF_CALLGRIND_PADn=\0`) and the last one's name.
    let empty = (64 - (vars.len() + 1) % 64) % 64;
    let fixed: usize = (0..empty)
        .map(|i| format!("CLRPROF_CALLGRIND_PAD{i}").len() + 2)
        .sum::<usize>()
        + "CLRPROF_CALLGRIND_PAD".len()
        + 2;
    let used = bytes + fixed;
    let target = (used / 16_384 + 1) * 16_384;
    (empty, "x".repeat(target - used))
}
