//! `cargo xtask bench gate`, a step of `cargo xtask test`: the hot paths
//! that have a hand-written C yardstick, in instructions, against that
//! yardstick in the same run; fails when clrprof's added instructions pass
//! the goal's multiple of C's.
//!
//! Instructions do not move with the machine's load (see
//! `benches/README.md`), so unlike a timing this can gate. Each workload
//! runs under `valgrind --tool=callgrind` (tiered compilation off,
//! `DOTNET_GCHeapHardLimit=0x10000000` and `DOTNET_EnableWriteXorExecute=0`,
//! which CoreCLR needs there) with no profiler, under the C profiler and
//! under the clrprof one. Instrumentation is off until the app reaches its
//! measured loop (`--instr-atstart=no`; the app turns it on and off
//! through the callgrind marker, `benches/callgrind/marker.c`), so the
//! process's total is the loop's alone, every thread included: start-up
//! and JIT neither count nor need subtracting, and they run several times
//! faster uninstrumented. A configuration's total over the loop's units of
//! work is its cost per unit; minus the unprofiled run's, what the profiler
//! adds. The ratio is clrprof's added instructions over C's.
//!
//! | row | workload | clrprof | C | goal |
//! |---|---|---|---|---|
//! | `elt_fastpath` | `benches/elt/workload.cs`, per hooked call | call-tracer, fast path, enter hook only | `benches/elt/baseline` | ≤ 1.03 |
//! | `elt_fastpath_leave` | the same | fast path, enter and leave hooks | the same | ≤ 1.03 |
//! | `elt_withinfo` | the same | WithInfo, enter hook only | the same | ≤ 1.03 |
//! | `object_allocated` | `benches/dispatch/alloc.cs`, per allocation | `benches/dispatch/profiler` | `benches/dispatch/baseline.c` | ≤ 1.03 |
//! | `exception_thrown` | `benches/dispatch/exceptions.cs`, per exception, the unhandled-exception watch on | the same | the same | ≤ 1.5 |
//!
//! Every profiled run is checked to have received its hooks or callbacks
//! (a profiler that hooked nothing cannot pass). By default every row runs
//! on linux-x64-8.0 and the fast-path rows again on linux-x64-11.0 (the
//! enter handler the SDK picks depends on the runtime: see
//! `DEFAULT_PLAN`). Options: `--leg NAME` (repeatable: every row on those
//! legs instead), `--only elt|dispatch`, `--jobs N` (callgrind processes
//! at once, default 2). Writes `target/bench/gate.json`; with
//! `CLRPROF_GATE_KEEP=1` each run's `callgrind.out` is kept beside its
//! records, for `callgrind_annotate`.

use crate::bench_dispatch::{self, Workload};
use crate::bench_elt::{self, Config};
use crate::measure::Setup;
use clrprof_testing::run::Profiler;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The goal of the ELT rows and of `ObjectAllocated`: clrprof adds at
/// most 3 % more instructions than the C profiler.
pub(crate) const PARITY: f64 = 1.03;
/// The goal of exceptions with the unhandled-exception watch on: clrprof
/// adds at most 1.5 times the C profiler's instructions per exception (the
/// watch's bookkeeping in the search-phase callbacks, which C lacks).
pub(crate) const EXCEPTIONS: f64 = 1.5;

/// What `cargo xtask test` measures: every row on .NET 8, and the fast
/// path again on .NET 11, where the SDK may pass the caller stack pointers
/// of runtime-async frames (`clrprof::elt`; before 11 every runtime takes
/// .NET 8's path: 10.0 measured the same, see `benches/README.md`).
const DEFAULT_PLAN: [(&str, &[Probe]); 2] = [
    (
        "linux-x64-8.0",
        &[
            ELT_PROBES[0],
            ELT_PROBES[1],
            ELT_PROBES[2],
            DISPATCH_PROBES[0],
            DISPATCH_PROBES[1],
        ],
    ),
    ("linux-x64-11.0", &[ELT_PROBES[0], ELT_PROBES[1]]),
];

/// Hooked calls in the measured loop of the ELT runs.
const ELT_CALLS: u64 = 100_000;
/// Allocations in the measured loop of the `ObjectAllocated` runs.
const ALLOCATIONS: u64 = 50_000;
/// Exceptions in the measured loop of the exception runs.
const EXCEPTIONS_THROWN: u64 = 2_000;

/// One gated hot path on one leg: instructions clrprof and C add per unit
/// of work.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Measured {
    pub leg: String,
    pub row: &'static str,
    pub clrprof: f64,
    pub c: f64,
    pub goal: f64,
}

impl Measured {
    pub(crate) fn ratio(&self) -> f64 {
        self.clrprof / self.c
    }

    /// `Ok` when clrprof's added instructions are within the goal's
    /// multiple of C's; the message names both counts either way.
    pub(crate) fn verdict(&self) -> Result<String, String> {
        let counts = format!(
            "{} {}: clrprof adds {:.1} instructions per unit, C {:.1}: ratio {:.3} (goal <= {})",
            self.leg,
            self.row,
            self.clrprof,
            self.c,
            self.ratio(),
            self.goal
        );
        // A yardstick that adds (about) nothing, or a count that is not a
        // number, is a broken measurement, never a pass.
        if !(self.c.is_finite() && self.clrprof.is_finite()) || self.c < 1.0 {
            return Err(format!("{counts}: not a measurement"));
        }
        if self.ratio() > self.goal {
            Err(format!("{counts}: above the goal"))
        } else {
            Ok(counts)
        }
    }
}

/// Who runs a measured configuration.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Who {
    Nobody,
    C,
    Clrprof,
}

/// A row of the gate: its name, goal, and how its runs are made.
#[derive(Clone, Copy, Debug)]
enum Probe {
    /// The ELT workload with the fast path or WithInfo, with or without
    /// the leave hooks.
    Elt { with_info: bool, leave: bool },
    /// The ELT workload on the fast path with enter and leave hooks, and
    /// call-tracer keeping shadow stacks (`CLRPROF_SHADOW=1`), against the
    /// C profiler's counting: reported, not gated (`--shadow`). On .NET 11
    /// it includes what runtime-async frames cost every call (the caller
    /// stack pointers the SDK passes there).
    EltShadow,
    /// A dispatch workload.
    Dispatch(Workload),
}

impl Probe {
    fn row(self) -> &'static str {
        match self {
            Probe::Elt {
                with_info: false,
                leave: false,
            } => "elt_fastpath",
            Probe::Elt {
                with_info: false,
                leave: true,
            } => "elt_fastpath_leave",
            Probe::Elt {
                with_info: true,
                leave: false,
            } => "elt_withinfo",
            Probe::Elt {
                with_info: true,
                leave: true,
            } => "elt_withinfo_leave",
            Probe::EltShadow => "elt_fastpath_shadow",
            Probe::Dispatch(w) => w.name(),
        }
    }

    fn goal(self) -> f64 {
        match self {
            Probe::EltShadow => f64::INFINITY,
            Probe::Dispatch(Workload::ExceptionThrown) => EXCEPTIONS,
            _ => PARITY,
        }
    }

    fn units(self) -> u64 {
        match self {
            Probe::Elt { .. } | Probe::EltShadow => ELT_CALLS,
            Probe::Dispatch(Workload::ExceptionThrown) => EXCEPTIONS_THROWN,
            Probe::Dispatch(_) => ALLOCATIONS,
        }
    }
}

const ELT_PROBES: [Probe; 3] = [
    Probe::Elt {
        with_info: false,
        leave: false,
    },
    Probe::Elt {
        with_info: false,
        leave: true,
    },
    Probe::Elt {
        with_info: true,
        leave: false,
    },
];
const DISPATCH_PROBES: [Probe; 2] = [
    Probe::Dispatch(Workload::ObjectAllocated),
    Probe::Dispatch(Workload::ExceptionThrown),
];

/// What the gate found: the measured rows, and why some could not run.
pub(crate) struct Report {
    pub rows: Vec<Measured>,
    /// Legs or rows that did not run, with the reason.
    pub not_run: Vec<String>,
    pub seconds: f64,
}

impl Report {
    /// The rows above their goal (or not measurements), as messages.
    pub(crate) fn failures(&self) -> Vec<String> {
        self.rows.iter().filter_map(|r| r.verdict().err()).collect()
    }
}

pub fn main(args: &[String]) -> crate::Result {
    let mut legs: Vec<String> = Vec::new();
    let mut only: Option<String> = None;
    let mut jobs = 2usize;
    let mut shadow = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--shadow" {
            shadow = true;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("bench gate: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => legs.push(value.clone()),
            "--only" if value == "elt" || value == "dispatch" => only = Some(value.clone()),
            "--jobs" => jobs = value.parse()?,
            other => return Err(format!("bench gate: unknown option `{other}` {value}").into()),
        }
    }
    let report = run(&legs, only.as_deref(), jobs.max(1), shadow)?;
    if !report.not_run.is_empty() {
        return Err(format!("bench gate: not run: {}", report.not_run.join("; ")).into());
    }
    let failures = report.failures();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("bench gate failed:\n  {}", failures.join("\n  ")).into())
    }
}

/// The gate as `cargo xtask test` runs it: every default leg, two jobs.
/// A missing valgrind or leg is in `not_run` (a failure in strict mode).
pub(crate) fn run_default() -> crate::Result<Report> {
    run(&[], None, 2, false)
}

/// Measures the rows of `only` (`elt`, `dispatch`, or both) on `legs`
/// (empty: the defaults), `jobs` callgrind processes at a time, prints
/// them and writes `target/bench/gate.json`.
fn run(legs: &[String], only: Option<&str>, jobs: usize, shadow: bool) -> crate::Result<Report> {
    let started = Instant::now();
    let mut not_run = Vec::new();
    let valgrind = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !valgrind {
        not_run.push("valgrind is not installed (Debian package `valgrind`)".to_string());
        return Ok(Report {
            rows: Vec::new(),
            not_run,
            seconds: 0.0,
        });
    }
    // (leg, probes) in the order they run: the default plan, or every row
    // on each leg asked for.
    let kept = |p: &Probe| match only {
        Some("elt") => matches!(p, Probe::Elt { .. }),
        Some("dispatch") => matches!(p, Probe::Dispatch(_)),
        _ => true,
    };
    let mut plan: Vec<(String, Vec<Probe>)> = if legs.is_empty() {
        DEFAULT_PLAN
            .iter()
            .map(|(leg, probes)| {
                (
                    leg.to_string(),
                    probes.iter().copied().filter(kept).collect(),
                )
            })
            .collect()
    } else {
        let mut plan: Vec<(String, Vec<Probe>)> = Vec::new();
        for leg in legs {
            if !plan.iter().any(|(l, _)| l == leg) {
                let probes = ELT_PROBES.iter().chain(DISPATCH_PROBES.iter());
                plan.push((leg.clone(), probes.copied().filter(kept).collect()));
            }
        }
        plan
    };
    if shadow {
        for (_, probes) in plan.iter_mut() {
            if probes.iter().any(|p| matches!(p, Probe::Elt { .. })) {
                probes.push(Probe::EltShadow);
            }
        }
    }
    plan.retain(|(_, probes)| !probes.is_empty());

    println!("==> build call-tracer, dispatch-profiler (release) and the C yardsticks");
    // Built once: the profilers are the same on every linux-x64 leg.
    let mut legs_ready: Vec<LegSetup> = Vec::new();
    let mut tracer: Option<Profiler> = None;
    for (name, probes) in &plan {
        let base = match Setup::open("gate", name) {
            Ok(s) => s,
            Err(e) => {
                not_run.push(format!("{name}: {e}"));
                continue;
            }
        };
        let has_elt = probes
            .iter()
            .any(|p| matches!(p, Probe::Elt { .. } | Probe::EltShadow));
        let has_dispatch = probes.iter().any(|p| matches!(p, Probe::Dispatch(_)));
        let elt = if has_elt {
            let t = match &tracer {
                Some(t) => t.clone(),
                None => {
                    let t = base.release_profiler("call-tracer")?;
                    tracer = Some(t.clone());
                    t
                }
            };
            Some(EltSetup {
                app: base.app("benches/elt/workload.cs")?,
                baseline: bench_elt::c_baseline(&base)?,
                tracer: t,
            })
        } else {
            None
        };
        let dispatch = if has_dispatch {
            Some(bench_dispatch::Setup::new(
                name,
                &[Workload::ObjectAllocated, Workload::ExceptionThrown],
            )?)
        } else {
            None
        };
        legs_ready.push(LegSetup {
            marker: base.callgrind_marker()?,
            base,
            probes: probes.clone(),
            elt,
            dispatch,
        });
    }

    // Every run: (leg index, probe, who).
    let mut runs: Vec<(usize, Probe, Who)> = Vec::new();
    for (i, leg) in legs_ready.iter().enumerate() {
        // The unprofiled ELT runs serve every ELT row of the leg.
        let mut elt_none_done = false;
        for &probe in &leg.probes {
            for who in [Who::Nobody, Who::C, Who::Clrprof] {
                if who == Who::Nobody && matches!(probe, Probe::Elt { .. } | Probe::EltShadow) {
                    if elt_none_done {
                        continue;
                    }
                    elt_none_done = true;
                }
                runs.push((i, probe, who));
            }
        }
    }
    println!(
        "==> {} callgrind runs on {}, {jobs} at a time",
        runs.len(),
        legs_ready
            .iter()
            .map(|l| l.base.leg.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    // (leg index, row of the unprofiled run or the probe's, who) -> total.
    let totals: Mutex<BTreeMap<(usize, &'static str, Who), u64>> = Mutex::new(BTreeMap::new());
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(i, probe, who)) = runs.get(n) else {
                    break;
                };
                let leg = &legs_ready[i];
                let t = Instant::now();
                match leg.measure(probe, who) {
                    Ok(total) => {
                        println!(
                            "  {:<16} {:<20} {:<8} {:>8} {:>14} instructions ({:.1} s)",
                            leg.base.leg.name,
                            probe.row(),
                            who_name(who),
                            probe.units(),
                            total,
                            t.elapsed().as_secs_f64()
                        );
                        totals
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert((i, key_row(probe, who), who), total);
                    }
                    Err(e) => errors
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(format!(
                            "{} {} {} {}: {e}",
                            leg.base.leg.name,
                            probe.row(),
                            who_name(who),
                            probe.units()
                        )),
                }
            });
        }
    });
    let errors = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    if !errors.is_empty() {
        return Err(format!("bench gate: runs failed:\n  {}", errors.join("\n  ")).into());
    }
    let totals = totals.into_inner().unwrap_or_else(|e| e.into_inner());

    let mut rows = Vec::new();
    for (i, leg) in legs_ready.iter().enumerate() {
        for &probe in &leg.probes {
            let per_unit = |who: Who| -> f64 {
                totals
                    .get(&(i, key_row(probe, who), who))
                    .map_or(f64::NAN, |&t| t as f64 / probe.units() as f64)
            };
            let none = per_unit(Who::Nobody);
            rows.push(Measured {
                leg: leg.base.leg.name.clone(),
                row: probe.row(),
                clrprof: per_unit(Who::Clrprof) - none,
                c: per_unit(Who::C) - none,
                goal: probe.goal(),
            });
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!("\ninstructions added per unit of work (callgrind, the measured loop, every thread):");
    println!(
        "  {:<16} {:<20} {:>9} {:>9} {:>7} {:>6}",
        "leg", "row", "C", "clrprof", "ratio", "goal"
    );
    for r in &rows {
        println!(
            "  {:<16} {:<20} {:>9.1} {:>9.1} {:>7.3} {:>6}  {}",
            r.leg,
            r.row,
            r.c,
            r.clrprof,
            r.ratio(),
            if r.goal.is_finite() {
                r.goal.to_string()
            } else {
                "-".into()
            },
            match (r.verdict().is_ok(), r.goal.is_finite()) {
                (true, true) => "ok",
                (true, false) => "(not gated)",
                (false, _) => "FAILED",
            }
        );
    }
    println!("gate: {seconds:.0} s");
    if let Some(out_dir) = legs_ready.first().map(|l| l.base.out_dir.clone()) {
        let json = json!({
            "rows": rows.iter().map(|r| json!({
                "leg": r.leg,
                "row": r.row,
                "clrprof": r.clrprof,
                "c_baseline": r.c,
                "ratio": r.ratio(),
                "goal": r.goal,
                "ok": r.verdict().is_ok(),
            })).collect::<Vec<_>>(),
            "not_run": not_run,
            "seconds": seconds,
        });
        let path = out_dir.join("gate.json");
        std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
        println!("wrote {}", path.display());
    }
    Ok(Report {
        rows,
        not_run,
        seconds,
    })
}

fn who_name(who: Who) -> &'static str {
    match who {
        Who::Nobody => "none",
        Who::C => "c",
        Who::Clrprof => "clrprof",
    }
}

/// The row a run's total is kept under: the unprofiled ELT runs are one
/// set for every ELT row.
fn key_row(probe: Probe, who: Who) -> &'static str {
    match (probe, who) {
        (Probe::Elt { .. } | Probe::EltShadow, Who::Nobody) => "elt",
        _ => probe.row(),
    }
}

struct EltSetup {
    app: std::path::PathBuf,
    baseline: Profiler,
    tracer: Profiler,
}

/// One leg, ready to run.
struct LegSetup {
    base: Setup,
    /// The callgrind marker library.
    marker: std::path::PathBuf,
    probes: Vec<Probe>,
    elt: Option<EltSetup>,
    dispatch: Option<bench_dispatch::Setup>,
}

impl LegSetup {
    /// The total instructions of one run, after checking it received its
    /// hooks or callbacks.
    fn measure(&self, probe: Probe, who: Who) -> Result<u64, String> {
        let n = probe.units();
        let work = self
            .base
            .out_dir
            .join("gate")
            .join(&self.base.leg.name)
            .join(format!("{}-{}-{n}", key_row(probe, who), who_name(who)));
        let result = match probe {
            Probe::Elt { with_info, leave } => {
                self.measure_elt(with_info, leave, false, who, n, &work)
            }
            Probe::EltShadow => self.measure_elt(false, true, true, who, n, &work),
            Probe::Dispatch(w) => self.measure_dispatch(w, who, n, &work),
        };
        // The profile itself is not needed, only its total, unless asked
        // to keep it (`CLRPROF_GATE_KEEP=1`, to annotate a regression).
        if std::env::var_os("CLRPROF_GATE_KEEP").is_none() {
            let _ = std::fs::remove_file(work.join("callgrind.out"));
        }
        result.map_err(|e| e.to_string())
    }

    fn measure_elt(
        &self,
        with_info: bool,
        leave: bool,
        shadow: bool,
        who: Who,
        calls: u64,
        work: &Path,
    ) -> crate::Result<u64> {
        let elt = self.elt.as_ref().ok_or("no ELT setup")?;
        let config = match who {
            Who::Nobody => Config::None,
            Who::C | Who::Clrprof => Config::Profiled {
                who: if who == Who::C {
                    bench_elt::Who::Baseline
                } else {
                    bench_elt::Who::Clrprof
                },
                with_info,
                leave,
            },
        };
        let mut spec =
            bench_elt::run_spec(&elt.app, work, config, calls, &elt.baseline, &elt.tracer);
        if shadow && who == Who::Clrprof {
            spec = spec.env("CLRPROF_SHADOW", "1");
        }
        let (outcome, total) = self.base.under_callgrind_marked(spec, work, &self.marker)?;
        bench_elt::check_counted(config, &outcome, calls)?;
        Ok(total)
    }

    fn measure_dispatch(&self, w: Workload, who: Who, n: u64, work: &Path) -> crate::Result<u64> {
        let setup = self.dispatch.as_ref().ok_or("no dispatch setup")?;
        let who = match who {
            Who::Nobody => bench_dispatch::Who::Nobody,
            Who::C => bench_dispatch::Who::C,
            Who::Clrprof => bench_dispatch::Who::Clrprof,
        };
        let spec = setup.spec(w, who, n, work);
        let (outcome, total) = self.base.under_callgrind_marked(spec, work, &self.marker)?;
        bench_dispatch::check_callbacks(w, who, &outcome, n)?;
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(clrprof: f64, c: f64, goal: f64) -> Measured {
        Measured {
            leg: "linux-x64-8.0".into(),
            row: "elt_fastpath",
            clrprof,
            c,
            goal,
        }
    }

    #[test]
    fn within_the_goal_passes_and_names_both_counts() {
        let ok = row(60.0, 61.0, PARITY).verdict().unwrap();
        assert!(
            ok.contains("clrprof adds 60.0") && ok.contains("C 61.0"),
            "{ok}"
        );
        // Exactly at the goal passes.
        assert!(row(62.8, 61.0, PARITY).verdict().is_ok());
        assert!(row(4093.0, 2779.0, EXCEPTIONS).verdict().is_ok());
    }

    #[test]
    fn above_the_goal_fails_with_both_counts() {
        // The regression the gate was made for: 84 against 61.
        let err = row(84.0, 61.0, PARITY).verdict().unwrap_err();
        assert!(
            err.contains("clrprof adds 84.0") && err.contains("C 61.0") && err.contains("1.377"),
            "{err}"
        );
        assert!(row(62.9, 61.0, PARITY).verdict().is_err());
        // The exception row as it measured before its regression was found.
        assert!(row(3828.5, 2485.0, EXCEPTIONS).verdict().is_err());
    }

    #[test]
    fn a_broken_measurement_never_passes() {
        // A yardstick that adds nothing (it hooked nothing), a negative
        // difference, or no number at all.
        assert!(row(0.0, 0.0, PARITY).verdict().is_err());
        assert!(row(-5.0, 0.4, PARITY).verdict().is_err());
        assert!(row(f64::NAN, 61.0, PARITY).verdict().is_err());
        assert!(row(60.0, f64::INFINITY, PARITY).verdict().is_err());
    }

    #[test]
    fn report_failures_are_the_rows_above_their_goal() {
        let report = Report {
            rows: vec![row(60.0, 61.0, PARITY), row(84.0, 61.0, PARITY)],
            not_run: Vec::new(),
            seconds: 0.0,
        };
        let failures = report.failures();
        assert_eq!(failures.len(), 1);
        assert!(failures[0].contains("84.0"), "{failures:?}");
    }
}
