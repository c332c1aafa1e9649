//! `cargo xtask bench elt`: the cost of an ELT hook call under clrprof,
//! against a hand-written C profiler (see `benches/README.md`).
//!
//! Two figures, both clrprof's call-tracer (counting mode) against the C
//! baseline of `benches/elt/baseline/`:
//!
//! * **time**: the workload (`benches/elt/workload.cs`) on a real runtime
//!   with no profiler, under the baseline and under call-tracer, fast path
//!   and WithInfo, enter hook only and enter+leave hooks, all alternating,
//!   `--runs` rounds; medians of the time each adds per hooked call;
//! * **instructions** (deterministic): `benches/elt/driver` calls each
//!   profiler's hooks the way the runtime does, outside any runtime, under
//!   `valgrind --tool=callgrind`; instructions per hook call. Skipped, with
//!   a message, when valgrind is not installed.
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 5,
//! at least 5), `--calls N` (hooked calls per run, default 20 000 000),
//! `--leave` (time only the enter+leave mode), `--enter-only` (time only
//! the enter-only mode; by default both are timed).
//! Writes `target/bench/elt.json`.

use crate::measure::{elapsed_ns, median, Setup};
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use clrprof_testing::Os;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// CLSID of `benches/elt/baseline/baseline.c`.
pub(crate) const BASELINE_CLSID: &str = "{6D1F6A1E-3C8B-4F7A-9E52-1B7C2D40E193}";

/// The goal of issue 18 for both ratios.
const TARGET_RATIO: f64 = 1.03;

pub fn main(args: &[String]) -> crate::Result {
    let mut it = args.iter();
    let (mut leg_name, mut runs, mut calls) = ("linux-x64-8.0".to_string(), 5usize, 20_000_000u64);
    let mut modes = vec![false, true];
    while let Some(a) = it.next() {
        match a.as_str() {
            "--leave" => {
                modes = vec![true];
                continue;
            }
            "--enter-only" => {
                modes = vec![false];
                continue;
            }
            _ => {}
        }
        let value = it
            .next()
            .ok_or_else(|| format!("bench: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--calls" => calls = value.parse()?,
            other => return Err(format!("bench: unknown option `{other}`").into()),
        }
    }
    if runs < 5 {
        return Err("bench: --runs must be at least 5".into());
    }
    elt(&leg_name, runs, calls, &modes)
}

/// Who profiles a timed run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Who {
    Baseline,
    Clrprof,
}

/// One timed configuration: nobody, or a profiler with a hook variant and
/// enter-only or enter+leave hooks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Config {
    None,
    Profiled {
        who: Who,
        with_info: bool,
        leave: bool,
    },
}

impl Config {
    pub(crate) fn name(self) -> String {
        match self {
            Config::None => "no-profiler".into(),
            Config::Profiled {
                who,
                with_info,
                leave,
            } => format!(
                "{}-{}{}",
                match who {
                    Who::Baseline => "c-baseline",
                    Who::Clrprof => "call-tracer",
                },
                if with_info { "withinfo" } else { "fastpath" },
                if leave { "-leave" } else { "" }
            ),
        }
    }
}

fn elt(leg_name: &str, runs: usize, calls: u64, modes: &[bool]) -> crate::Result {
    let setup = Setup::open("elt", leg_name)?;
    let (root, leg, out_dir) = (&setup.root, &setup.leg, &setup.out_dir);
    let runtimes = &setup.runtimes;

    println!("==> build call-tracer (release) and the C baseline");
    let tracer = setup.release_profiler("call-tracer")?;
    let baseline = c_baseline(&setup)?;

    // The deterministic figure first: it takes seconds and does not depend
    // on how busy the machine is.
    let instructions = if leg.os == Os::Linux {
        instruction_counts(root, &tracer, &baseline)?
    } else {
        InstructionCounts::Skipped("the driver runs linux-x64 hooks only".into())
    };

    let app = setup.app("benches/elt/workload.cs")?;

    let mut configs = vec![Config::None];
    for &leave in modes {
        for with_info in [false, true] {
            for who in [Who::Baseline, Who::Clrprof] {
                configs.push(Config::Profiled {
                    who,
                    with_info,
                    leave,
                });
            }
        }
    }
    println!(
        "==> {runs} alternating rounds of {} runs, {calls} calls each, on {leg_name}",
        configs.len()
    );
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for round in 0..runs {
        for (i, config) in configs.iter().enumerate() {
            let work = out_dir
                .join("runs")
                .join(config.name())
                .join(round.to_string());
            let spec = run_spec(&app, &work, *config, calls, &baseline, &tracer);
            let outcome = run_app(leg, runtimes.wine(), &spec)?;
            match config {
                Config::Profiled {
                    who: Who::Clrprof, ..
                } => outcome.check()?,
                _ => outcome.check_exit()?,
            }
            let ns = elapsed_ns(&outcome)?;
            check_counted(*config, &outcome, calls)?;
            println!("  round {round} {:<30} {:>8.2} ms", config.name(), ns / 1e6);
            times[i].push(ns);
        }
    }

    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let index = |c: Config| configs.iter().position(|x| *x == c);
    let per_call = |c: Config| index(c).map(|i| (med[i] - med[0]) / calls as f64);

    println!("\nmedians of {runs} runs, {calls} hooked calls each:");
    for (i, c) in configs.iter().enumerate() {
        println!(
            "  {:<30} {:>9.2} ms  {:>7.2} ns/call added",
            c.name(),
            med[i] / 1e6,
            (med[i] - med[0]) / calls as f64
        );
    }
    let mut json = serde_json::Map::new();
    for &leave in modes {
        for with_info in [false, true] {
            let get = |who| {
                per_call(Config::Profiled {
                    who,
                    with_info,
                    leave,
                })
            };
            let (Some(ours), Some(theirs)) = (get(Who::Clrprof), get(Who::Baseline)) else {
                continue;
            };
            let ratio = ours / theirs;
            let variant = if with_info { "withinfo" } else { "fastpath" };
            let suffix = if leave { "_leave" } else { "" };
            println!(
                "{:<9} {:<12} clrprof adds {ours:.2} ns per hooked call, the C baseline {theirs:.2}; ratio {ratio:.3} (goal <= {TARGET_RATIO})",
                variant,
                if leave { "enter+leave" } else { "enter only" },
            );
            json.insert(format!("{variant}{suffix}_ratio"), ratio.into());
            json.insert(format!("ns_per_call_{variant}{suffix}"), ours.into());
            json.insert(
                format!("baseline_ns_per_call_{variant}{suffix}"),
                theirs.into(),
            );
        }
    }
    instructions.print();
    json.insert("instructions".into(), instructions.to_json());
    json.insert("runtime".into(), leg.version.clone().into());
    json.insert("leg".into(), leg.name.clone().into());
    json.insert("calls".into(), calls.into());
    json.insert("runs".into(), runs.into());
    json.insert("target_ratio".into(), TARGET_RATIO.into());
    json.insert(
        "median_ns".into(),
        configs
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name(), serde_json::json!(med[i])))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    );
    let path = out_dir.join("elt.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&serde_json::Value::Object(json))? + "\n",
    )?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The C baseline profiler of `benches/elt/baseline/`, built for the leg.
pub(crate) fn c_baseline(setup: &Setup) -> crate::Result<Profiler> {
    setup.c_profiler(
        "libelt_baseline.so",
        &[
            "benches/elt/baseline/baseline.c",
            "benches/elt/baseline/baseline_x86_64_sysv.S",
        ],
        BASELINE_CLSID,
    )
}

/// The run of the workload with `calls` hooked calls under `config`
/// (`baseline` and `tracer`: the two profilers), in `work`.
pub(crate) fn run_spec(
    app: &Path,
    work: &Path,
    config: Config,
    calls: u64,
    baseline: &Profiler,
    tracer: &Profiler,
) -> RunSpec {
    let mut spec = RunSpec::new(app, work)
        .timeout(Duration::from_secs(600))
        // Fully optimised code from the first call: no tier-0 code
        // or background recompilation during the timed loop.
        .env("DOTNET_TieredCompilation", "0")
        .env("COMPlus_TieredCompilation", "0");
    spec.args = vec![calls.to_string()];
    if let Config::Profiled {
        who,
        with_info,
        leave,
    } = config
    {
        spec = spec
            .env(
                "CLRPROF_ELT",
                if with_info { "withinfo" } else { "fastpath" },
            )
            .env("CLRPROF_ELT_LEAVE", if leave { "1" } else { "0" })
            .profiler(match who {
                Who::Baseline => baseline.clone(),
                Who::Clrprof => tracer.clone(),
            });
    }
    spec
}

/// Checks that the profiled run really counted the workload's calls, so a
/// profiler that silently hooked nothing cannot look fast.
pub(crate) fn check_counted(config: Config, outcome: &Outcome, calls: u64) -> crate::Result {
    // The timed loop plus the warm-up.
    let expected = calls + 1000;
    match config {
        Config::None => Ok(()),
        Config::Profiled {
            who: Who::Clrprof, ..
        } => {
            let step = outcome
                .events("calls")
                .find(|r| r["method"] == "Bench.Workload::Step")
                .and_then(|r| r["count"].as_u64());
            if step != Some(expected) {
                return Err(format!(
                    "call-tracer counted {step:?} calls of Step, expected {expected}"
                )
                .into());
            }
            Ok(())
        }
        Config::Profiled {
            who: Who::Baseline, ..
        } => {
            let total: u64 = outcome
                .events("baseline-total")
                .filter_map(|v| v["count"].as_u64())
                .sum();
            if total < expected {
                return Err(format!(
                    "the C baseline counted {total} calls, expected at least {expected}"
                )
                .into());
            }
            Ok(())
        }
    }
}

/// The hook kinds the driver measures: (name, driver hook, fake runtime's
/// highest ICorProfilerInfoN).
const HOOK_KINDS: [(&str, &str, u8); 6] = [
    ("fastpath_enter", "enter", 14),
    ("fastpath_leave", "leave", 14),
    ("withinfo_enter", "enter-with-info", 14),
    ("withinfo_leave", "leave-with-info", 14),
    // .NET Core 3.x (at most ICorProfilerInfo11): on Unix x64 its WithInfo
    // stub keeps too few registers, and clrprof keeps them itself.
    ("withinfo_enter_netcore3", "enter-with-info", 11),
    ("withinfo_leave_netcore3", "leave-with-info", 11),
];

/// Calls per driver run; two counts, so the loop's fixed cost cancels.
const DRIVER_CALLS: [u64; 2] = [10_000, 110_000];

enum InstructionCounts {
    /// Per hook kind: (name, clrprof, C baseline), instructions per call
    /// from the hook's first instruction to its `ret`.
    Measured(Vec<(&'static str, f64, f64)>),
    Skipped(String),
}

impl InstructionCounts {
    fn print(&self) {
        match self {
            InstructionCounts::Skipped(why) => {
                println!("instructions per hook call: SKIPPED ({why})")
            }
            InstructionCounts::Measured(rows) => {
                println!("instructions per hook call (callgrind, trampoline + handler, outside any runtime):");
                println!(
                    "  {:<26} {:>8} {:>8} {:>7}",
                    "hook", "clrprof", "C", "ratio"
                );
                for (name, ours, theirs) in rows {
                    println!(
                        "  {name:<26} {ours:>8.1} {theirs:>8.1} {:>7.3}",
                        ours / theirs
                    );
                }
            }
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match self {
            InstructionCounts::Skipped(why) => serde_json::json!({ "skipped": why }),
            InstructionCounts::Measured(rows) => rows
                .iter()
                .map(|(name, ours, theirs)| {
                    (
                        name.to_string(),
                        serde_json::json!({
                            "clrprof": ours,
                            "c_baseline": theirs,
                            "ratio": ours / theirs,
                        }),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into(),
        }
    }
}

/// Instructions per hook call of both profilers, for every kind of
/// [`HOOK_KINDS`], from `benches/elt/driver` under callgrind.
fn instruction_counts(
    root: &Path,
    tracer: &Profiler,
    baseline: &Profiler,
) -> crate::Result<InstructionCounts> {
    let valgrind_ok = Command::new("valgrind")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !valgrind_ok {
        let why = "valgrind not found; install it for the deterministic instruction counts";
        eprintln!("warning: {why}");
        return Ok(InstructionCounts::Skipped(why.into()));
    }
    println!("==> build the ELT driver; instructions per hook call under callgrind");
    let status = Command::new(clrprof_testing::build::cargo())
        .current_dir(root)
        .args(["build", "--quiet", "--release", "-p", "elt-driver"])
        .status()?;
    if !status.success() {
        return Err(format!("building benches/elt/driver failed: {status}").into());
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let driver = target_dir.join("release/elt-driver");
    let mut rows = Vec::new();
    for (name, hook, info_version) in HOOK_KINDS {
        let null = per_call(&driver, None, hook, info_version)?;
        let ours = per_call(&driver, Some(tracer), hook, info_version)? - null + 1.0;
        let theirs = per_call(&driver, Some(baseline), hook, info_version)? - null + 1.0;
        rows.push((name, ours, theirs));
    }
    Ok(InstructionCounts::Measured(rows))
}

/// Instructions per iteration of the driver's loop calling `hook` of
/// `profiler` (`None`: a bare `ret`), from two runs with different counts.
/// Subtracting the bare loop's figure and adding back its `ret` leaves
/// the hook's own instructions.
fn per_call(
    driver: &Path,
    profiler: Option<&Profiler>,
    hook: &str,
    info_version: u8,
) -> crate::Result<f64> {
    let mut totals = [0u64; 2];
    for (total, calls) in totals.iter_mut().zip(DRIVER_CALLS) {
        let mut cmd = Command::new("valgrind");
        cmd.args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--toggle-collect=elt_drive_*",
        ])
        .arg(driver);
        match profiler {
            Some(p) => cmd.arg(&p.path).arg(&p.clsid),
            None => cmd.args(["none", "none"]),
        };
        cmd.arg(hook)
            .arg(calls.to_string())
            .arg(info_version.to_string());
        let out = cmd.output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("elt-driver under callgrind failed: {stderr}").into());
        }
        *total = stderr
            .lines()
            .find_map(|l| l.split("Collected :").nth(1))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("no `Collected :` line from callgrind: {stderr}"))?;
    }
    Ok((totals[1] as f64 - totals[0] as f64) / (DRIVER_CALLS[1] - DRIVER_CALLS[0]) as f64)
}
