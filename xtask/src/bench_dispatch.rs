//! `cargo xtask bench dispatch`: what clrprof adds to the delivery of one
//! callback, against a hand-written C profiler with the same callbacks (see
//! `benches/README.md`, `dispatch/`).
//!
//! Workloads (`benches/dispatch/*.cs`, each timing itself and printing
//! `elapsed_ns` and its own counts): `object_allocated` (small
//! allocations), `exception_thrown` (exceptions thrown and caught; and
//! `exception_thrown_unwatched`, the same with the SDK's unhandled-exception
//! watch turned off),
//! `moved_references` (collections with fragmented survivors), and
//! `jit_compilation_started` (distinct generic instantiations, each compiled
//! once). Each runs with no profiler, under the C profiler
//! (`benches/dispatch/baseline.c`) and under the clrprof profiler
//! (`benches/dispatch/profiler`), alternating, `--runs` rounds; plus
//! `alloc_tracer`: the allocation workload under examples/alloc-tracer and
//! under the C profiler's per-class counting mode. Ratio per workload:
//! clrprof's added time (median) / C's added time (median). Every profiled
//! run is checked to have received its callbacks.
//!
//! `--callgrind`: instead of timing, runs every workload at two sizes under
//! `valgrind --tool=callgrind` and prints instructions per callback (the
//! difference of the two runs' totals divided by the difference in
//! callbacks: start-up and JIT cancel out); writes
//! `target/bench/dispatch-callgrind.json`.
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 7,
//! at least 5), `--only W[,W...]` (workloads), `--allocations N` (default
//! 20 000 000), `--exceptions N` (default 100 000), `--gc-rounds N`
//! (default 300), `--methods N` (default 4 000), `--callgrind`.
//! Writes `target/bench/dispatch.json`.

use crate::measure::{self, elapsed_ns, median};
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// CLSID of `benches/dispatch/baseline.c`.
const BASELINE_CLSID: &str = "{3D15A7C0-5B1E-4C8A-9F20-6E4BD107A358}";

/// A workload: its name in the JSON, its source, and what its callback
/// count is called in the profilers' records.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Workload {
    ObjectAllocated,
    ExceptionThrown,
    /// The exception workload with the SDK's unhandled-exception watch
    /// turned off (`Profiler::watch_unhandled_exceptions`), and the C
    /// profiler without the flags the watch asks for.
    ExceptionThrownUnwatched,
    MovedReferences,
    JitCompilationStarted,
    AllocTracer,
}

impl Workload {
    const ALL: [Workload; 6] = [
        Workload::ObjectAllocated,
        Workload::ExceptionThrown,
        Workload::ExceptionThrownUnwatched,
        Workload::MovedReferences,
        Workload::JitCompilationStarted,
        Workload::AllocTracer,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::ObjectAllocated => "object_allocated",
            Workload::ExceptionThrown => "exception_thrown",
            Workload::ExceptionThrownUnwatched => "exception_thrown_unwatched",
            Workload::MovedReferences => "moved_references",
            Workload::JitCompilationStarted => "jit_compilation_started",
            Workload::AllocTracer => "alloc_tracer",
        }
    }

    /// The low event mask both profilers must end up with: the workload's
    /// events and what the clrprof SDK adds to every profiler's mask
    /// (`MONITOR_EXCEPTIONS | ENABLE_STACK_SNAPSHOT`, its unhandled-exception
    /// watch), which the C profiler asks for too.
    fn mask(self) -> u64 {
        const SDK: u64 = 0x40 | 0x1000_0000;
        const ALLOCATIONS: u64 = 0x100 | 0x80_0000;
        // With the watch off, neither profiler asks for its flags.
        let sdk = if self == Workload::ExceptionThrownUnwatched {
            0
        } else {
            SDK
        };
        sdk | match self {
            Workload::ObjectAllocated => ALLOCATIONS,
            Workload::ExceptionThrown | Workload::ExceptionThrownUnwatched => 0x40,
            Workload::MovedReferences => 0x80,
            Workload::JitCompilationStarted => 0x20,
            Workload::AllocTracer => ALLOCATIONS | 0x80,
        }
    }

    /// What the profilers are told to ask for (`CLRPROF_DISPATCH_EVENTS`).
    fn events(self) -> &'static str {
        match self {
            Workload::ExceptionThrownUnwatched => Workload::ExceptionThrown.name(),
            w => w.name(),
        }
    }

    fn source(self) -> &'static str {
        match self {
            Workload::ObjectAllocated | Workload::AllocTracer => "alloc.cs",
            Workload::ExceptionThrown | Workload::ExceptionThrownUnwatched => "exceptions.cs",
            Workload::MovedReferences => "gc.cs",
            Workload::JitCompilationStarted => "jit.cs",
        }
    }
}

/// Who profiles a run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Who {
    Nobody,
    C,
    Clrprof,
}

impl Who {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Who::Nobody => "none",
            Who::C => "c",
            Who::Clrprof => "clrprof",
        }
    }
}

struct Sizes {
    allocations: u64,
    exceptions: u64,
    gc_rounds: u64,
    methods: u64,
}

impl Sizes {
    fn of(&self, w: Workload) -> u64 {
        match w {
            Workload::ObjectAllocated | Workload::AllocTracer => self.allocations,
            Workload::ExceptionThrown | Workload::ExceptionThrownUnwatched => self.exceptions,
            Workload::MovedReferences => self.gc_rounds,
            Workload::JitCompilationStarted => self.methods,
        }
    }
}

pub fn main(args: &[String]) -> crate::Result {
    let (mut leg_name, mut runs) = ("linux-x64-8.0".to_string(), 7usize);
    let mut sizes = Sizes {
        allocations: 20_000_000,
        exceptions: 100_000,
        gc_rounds: 300,
        methods: 4_000,
    };
    let mut only: Vec<Workload> = Workload::ALL.to_vec();
    let mut callgrind = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--callgrind" {
            callgrind = true;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("bench dispatch: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--allocations" => sizes.allocations = value.parse()?,
            "--exceptions" => sizes.exceptions = value.parse()?,
            "--gc-rounds" => sizes.gc_rounds = value.parse()?,
            "--methods" => sizes.methods = value.parse()?,
            "--only" => {
                only = value
                    .split(',')
                    .map(|n| {
                        Workload::ALL
                            .into_iter()
                            .find(|w| w.name() == n)
                            .ok_or_else(|| format!("bench dispatch: unknown workload `{n}`"))
                    })
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("bench dispatch: unknown option `{other}`").into()),
        }
    }
    if runs < 5 {
        return Err("bench dispatch: --runs must be at least 5".into());
    }
    let setup = Setup::new(&leg_name, &only)?;
    if callgrind {
        setup.callgrind(&only)
    } else {
        setup.time(&only, runs, &sizes)
    }
}

/// Everything built once: the leg, the apps, the profilers.
pub(crate) struct Setup {
    pub(crate) base: measure::Setup,
    apps: Vec<(Workload, PathBuf)>,
    c: Profiler,
    clrprof: Profiler,
    alloc_tracer: Option<Profiler>,
}

impl Setup {
    pub(crate) fn new(leg_name: &str, only: &[Workload]) -> crate::Result<Setup> {
        let base = measure::Setup::open("dispatch", leg_name)?;
        println!("==> build dispatch-profiler, alloc-tracer (release) and the C baseline");
        let clrprof = base.release_profiler("dispatch-profiler")?;
        let alloc_tracer = if only.contains(&Workload::AllocTracer) {
            Some(base.release_profiler("alloc-tracer")?)
        } else {
            None
        };
        let c = base.c_profiler(
            "libdispatch_baseline.so",
            &["benches/dispatch/baseline.c"],
            BASELINE_CLSID,
        )?;
        let mut apps = Vec::new();
        for &w in only {
            let app = base.app(&format!("benches/dispatch/{}", w.source()))?;
            apps.push((w, app));
        }
        Ok(Setup {
            base,
            apps,
            c,
            clrprof,
            alloc_tracer,
        })
    }

    fn app(&self, w: Workload) -> &Path {
        self.apps
            .iter()
            .find(|(a, _)| *a == w)
            .map(|(_, p)| p.as_path())
            .unwrap_or(Path::new(""))
    }

    /// The run of workload `w` of size `n` under `who`.
    pub(crate) fn spec(&self, w: Workload, who: Who, n: u64, work: &Path) -> RunSpec {
        let mut spec = RunSpec::new(self.app(w), work)
            .timeout(Duration::from_secs(900))
            .env("DOTNET_TieredCompilation", "0")
            .env("COMPlus_TieredCompilation", "0");
        spec.args = vec![n.to_string()];
        if w == Workload::ExceptionThrownUnwatched && who != Who::Nobody {
            spec = spec.env("CLRPROF_DISPATCH_WATCH", "0");
        }
        match (who, w) {
            (Who::Nobody, _) => spec,
            (Who::C, Workload::AllocTracer) => spec
                .profiler(self.c.clone())
                .env("CLRPROF_DISPATCH_MODE", "count"),
            (Who::C, _) => spec
                .profiler(self.c.clone())
                .env("CLRPROF_DISPATCH_EVENTS", w.events()),
            (Who::Clrprof, Workload::AllocTracer) => match &self.alloc_tracer {
                Some(p) => spec.profiler(p.clone()),
                None => spec,
            },
            (Who::Clrprof, _) => spec
                .profiler(self.clrprof.clone())
                .env("CLRPROF_DISPATCH_EVENTS", w.events()),
        }
    }

    /// The timing benchmark.
    fn time(&self, only: &[Workload], runs: usize, sizes: &Sizes) -> crate::Result {
        let whos = [Who::Nobody, Who::C, Who::Clrprof];
        // (workload, who) -> elapsed ns per round.
        let mut times: Vec<((Workload, Who), Vec<f64>)> = Vec::new();
        for &w in only {
            for who in whos {
                // alloc_tracer's no-profiler run is object_allocated's when both run.
                if w == Workload::AllocTracer
                    && who == Who::Nobody
                    && only.contains(&Workload::ObjectAllocated)
                {
                    continue;
                }
                times.push(((w, who), Vec::new()));
            }
        }
        println!(
            "==> {runs} alternating rounds on {}: {} allocations, {} exceptions, {} GC rounds, {} methods",
            self.base.leg.name, sizes.allocations, sizes.exceptions, sizes.gc_rounds, sizes.methods
        );
        for round in 0..runs {
            for ((w, who), t) in times.iter_mut() {
                let n = sizes.of(*w);
                let work = self
                    .base
                    .out_dir
                    .join("runs-dispatch")
                    .join(format!("{}-{}", w.name(), who.name()))
                    .join(round.to_string());
                let outcome = run_app(
                    &self.base.leg,
                    self.base.runtimes.wine(),
                    &self.spec(*w, *who, n, &work),
                )?;
                outcome.check_exit()?;
                check_callbacks(*w, *who, &outcome, n)?;
                let ns = elapsed_ns(&outcome)?;
                println!(
                    "  round {round} {:<24} {:<8} {:>10.2} ms",
                    w.name(),
                    who.name(),
                    ns / 1e6
                );
                t.push(ns);
            }
        }
        let med = |w: Workload, who: Who| -> f64 {
            let w_none = if who == Who::Nobody && w == Workload::AllocTracer {
                if only.contains(&Workload::ObjectAllocated) {
                    Workload::ObjectAllocated
                } else {
                    w
                }
            } else {
                w
            };
            times
                .iter()
                .find(|((a, b), _)| *a == w_none && *b == who)
                .map(|(_, t)| median(&mut t.clone()))
                .unwrap_or(f64::NAN)
        };
        let mut json = serde_json::Map::new();
        let mut medians = serde_json::Map::new();
        println!("\nmedians of {runs} rounds (added = median - no profiler's):");
        for &w in only {
            let none = med(w, Who::Nobody);
            let c = med(w, Who::C);
            let clrprof = med(w, Who::Clrprof);
            let (c_added, clrprof_added) = (c - none, clrprof - none);
            let ratio = clrprof_added / c_added;
            let n = sizes.of(w) as f64;
            let target = if w == Workload::AllocTracer {
                1.10
            } else {
                1.05
            };
            println!(
                "  {:<24} none {:>9.2} ms  C {:>9.2} ms (+{:.2})  clrprof {:>9.2} ms (+{:.2})  ratio {ratio:.3} (target <= {target}); per unit of work: C +{:.1} ns, clrprof +{:.1} ns",
                w.name(),
                none / 1e6,
                c / 1e6,
                c_added / 1e6,
                clrprof / 1e6,
                clrprof_added / 1e6,
                c_added / n,
                clrprof_added / n,
            );
            json.insert(format!("{}_ratio", w.name()), json!(ratio));
            medians.insert(
                w.name().to_string(),
                json!({
                    "work": sizes.of(w),
                    "none_ns": none,
                    "c_ns": c,
                    "clrprof_ns": clrprof,
                    "c_added_ns_per_unit": c_added / n,
                    "clrprof_added_ns_per_unit": clrprof_added / n,
                }),
            );
        }
        json.insert("median_ns".into(), Value::Object(medians));
        json.insert("runtime".into(), json!(self.base.leg.version));
        json.insert("leg".into(), json!(self.base.leg.name));
        json.insert("runs".into(), json!(runs));
        let path = self.base.out_dir.join("dispatch.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&Value::Object(json))? + "\n",
        )?;
        println!("wrote {}", path.display());
        Ok(())
    }

    /// Instructions per callback under callgrind (see the module docs).
    fn callgrind(&self, only: &[Workload]) -> crate::Result {
        let small = Sizes {
            allocations: 200_000,
            exceptions: 2_000,
            gc_rounds: 20,
            methods: 200,
        };
        let large = Sizes {
            allocations: 1_200_000,
            exceptions: 12_000,
            gc_rounds: 120,
            methods: 1_200,
        };
        let mut json = serde_json::Map::new();
        println!(
            "==> callgrind on {}: two sizes per workload",
            self.base.leg.name
        );
        for &w in only {
            let mut row = serde_json::Map::new();
            let mut base = None;
            for who in [Who::Nobody, Who::C, Who::Clrprof] {
                let mut totals = [0u64; 2];
                let mut callbacks = [0u64; 2];
                for (k, sizes) in [&small, &large].into_iter().enumerate() {
                    let n = sizes.of(w);
                    let work = self.base.out_dir.join("callgrind-dispatch").join(format!(
                        "{}-{}-{n}",
                        w.name(),
                        who.name()
                    ));
                    let (outcome, total) = self.under_callgrind(w, who, n, &work)?;
                    if who != Who::Nobody {
                        check_callbacks(w, who, &outcome, n)?;
                    }
                    totals[k] = total;
                    callbacks[k] = callback_count(w, who, &outcome).unwrap_or(n);
                }
                let per_work = (totals[1] as f64 - totals[0] as f64)
                    / (small.of(w).abs_diff(large.of(w)) as f64);
                let per_callback = if who == Who::Nobody {
                    f64::NAN
                } else {
                    (totals[1] as f64 - totals[0] as f64)
                        / (callbacks[1] as f64 - callbacks[0] as f64)
                };
                let added = base.map(|b: f64| per_work - b);
                if who == Who::Nobody {
                    base = Some(per_work);
                }
                println!(
                    "  {:<24} {:<8} {:>12.1} instructions per unit of work{}",
                    w.name(),
                    who.name(),
                    per_work,
                    added
                        .map(|a| format!(
                            ", {a:.1} added; callbacks {} / {}",
                            callbacks[0], callbacks[1]
                        ))
                        .unwrap_or_default()
                );
                row.insert(
                    who.name().to_string(),
                    json!({
                        "instructions": totals,
                        "callbacks": callbacks,
                        "per_unit": per_work,
                        "added_per_unit": added,
                        "per_callback_total": per_callback,
                    }),
                );
            }
            let added = |who: &str| row[who]["added_per_unit"].as_f64().unwrap_or(f64::NAN);
            let ratio = added("clrprof") / added("c");
            println!(
                "  {:<24} ratio of added instructions (clrprof / C): {ratio:.3}",
                w.name()
            );
            json.insert(format!("{}_ratio", w.name()), json!(ratio));
            json.insert(w.name().to_string(), Value::Object(row));
        }
        json.insert("leg".into(), json!(self.base.leg.name));
        json.insert(
            "sizes".into(),
            json!({
                "small": [small.allocations, small.exceptions, small.gc_rounds, small.methods],
                "large": [large.allocations, large.exceptions, large.gc_rounds, large.methods],
            }),
        );
        let path = self.base.out_dir.join("dispatch-callgrind.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&Value::Object(json))? + "\n",
        )?;
        println!("wrote {}", path.display());
        Ok(())
    }

    /// Runs one workload under callgrind: the outcome and the process's
    /// total instruction count.
    pub(crate) fn under_callgrind(
        &self,
        w: Workload,
        who: Who,
        n: u64,
        work: &Path,
    ) -> crate::Result<(Outcome, u64)> {
        self.base.under_callgrind(self.spec(w, who, n, work), work)
    }
}

/// The profiler's final record.
fn counts(outcome: &Outcome) -> Option<&Value> {
    outcome
        .records
        .iter()
        .find(|r| r["event"] == "dispatch_counts")
}

/// A number the app printed about itself (`key value` in its output line).
fn printed(outcome: &Outcome, key: &str) -> Option<u64> {
    let mut words = outcome.stdout.split_whitespace();
    while let Some(word) = words.next() {
        if word == key {
            return words.next().and_then(|v| v.parse().ok());
        }
    }
    None
}

/// How many of the workload's callbacks the profiler received.
pub(crate) fn callback_count(w: Workload, who: Who, outcome: &Outcome) -> Option<u64> {
    if who == Who::Nobody {
        return None;
    }
    if w == Workload::AllocTracer && who == Who::Clrprof {
        return outcome
            .records
            .iter()
            .filter(|r| r["event"] == "alloc")
            .map(|r| r["count"].as_u64())
            .sum();
    }
    let c = counts(outcome)?;
    let field = |k: &str| c[k].as_u64();
    match w {
        Workload::ObjectAllocated | Workload::AllocTracer => field("allocations"),
        Workload::ExceptionThrown | Workload::ExceptionThrownUnwatched => field("exceptions"),
        Workload::MovedReferences => Some(field("moved")? + field("surviving")?),
        Workload::JitCompilationStarted => field("jit"),
    }
}

/// Checks that a profiled run received the callbacks of its workload, as
/// many as the app says it caused (at least: start-up and warm-up add some).
pub(crate) fn check_callbacks(w: Workload, who: Who, outcome: &Outcome, n: u64) -> crate::Result {
    let name = format!("{} under {}", w.name(), who.name());
    let app = |key: &str| {
        printed(outcome, key).ok_or_else(|| format!("{name}: the app printed no `{key}`"))
    };
    match w {
        Workload::ObjectAllocated | Workload::AllocTracer => {
            if app("allocations")? != n {
                return Err(format!("{name}: the app did not allocate {n}").into());
            }
        }
        Workload::ExceptionThrown | Workload::ExceptionThrownUnwatched => {
            if app("caught")? != n + 100 {
                return Err(format!("{name}: the app did not catch {n} + 100").into());
            }
        }
        Workload::MovedReferences => {
            if app("gcs")? < n {
                return Err(format!("{name}: fewer than {n} collections").into());
            }
        }
        Workload::JitCompilationStarted => {
            if app("methods")? != n {
                return Err(format!("{name}: the app did not compile {n} methods").into());
            }
        }
    }
    if who == Who::Nobody {
        return Ok(());
    }
    let got = callback_count(w, who, outcome).ok_or_else(|| {
        format!(
            "{name}: no final count from the profiler: {:?} {:?}",
            outcome.records, outcome.stderr
        )
    })?;
    let enough = match w {
        Workload::AllocTracer if who == Who::Clrprof => {
            // alloc-tracer: exactly the workload's cells (plus warm-up).
            let cells = outcome
                .records
                .iter()
                .find(|r| r["event"] == "alloc" && r["type"] == "Bench.Cell")
                .and_then(|r| r["count"].as_u64());
            cells == Some(n + 1000)
        }
        Workload::AllocTracer => {
            // The C counter: its busiest class is the workload's cell.
            counts(outcome).and_then(|c| c["top_class_count"].as_u64()) == Some(n + 1000)
        }
        Workload::ObjectAllocated => got >= n,
        Workload::ExceptionThrown | Workload::ExceptionThrownUnwatched => got >= n,
        Workload::MovedReferences => got >= app("gcs")?,
        Workload::JitCompilationStarted => got >= n,
    };
    if !enough {
        return Err(format!(
            "{name}: the profiler counted {got} callbacks: {:?}",
            counts(outcome)
        )
        .into());
    }
    // Both profilers must have had the same mask (clrprof's reports it at
    // Shutdown, 0 when Shutdown never came; alloc-tracer does not report it).
    if let Some(mask) = counts(outcome).and_then(|c| c["mask_read"].as_u64()) {
        if mask != 0 && mask != w.mask() {
            return Err(format!("{name}: event mask {mask:#x}, expected {:#x}", w.mask()).into());
        }
    }
    Ok(())
}
