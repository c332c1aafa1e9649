//! `cargo xtask bench mux`: what the profiler multiplexer adds to a child
//! profiler, against the same child loaded directly.
//!
//! - **Callbacks**: `benches/dispatch/alloc.cs` allocates N small objects (one
//!   `ObjectAllocated` callback each) under alloc-tracer, and under the
//!   hand-written C child of the multiplexer tests (`mux_child.c`, mode
//!   `alloc`: one relaxed atomic add per callback, the smallest possible
//!   child), each loaded directly and through the multiplexer. Ratio: time
//!   the profiler adds through the multiplexer / time it adds directly
//!   (target ≤ 1.05).
//! - **ELT**: `benches/elt/workload.cs` makes N hooked calls under
//!   call-tracer (fast path, enter hook), directly and as the one hooking
//!   child of the multiplexer (target ≤ 1.10); for information also two
//!   call-tracers (two files) hooking through the multiplexer's fan-out.
//!
//! Every configuration runs once per round, rounds alternate, medians of
//! the rounds are compared (the ELT benchmark's method, `benches/README.md`);
//! every profiled run is checked to have counted its work, so a child that
//! silently got nothing cannot look fast. Tiered compilation is off.
//!
//! Options: `--leg NAME` (default `linux-x64-8.0`), `--runs N` (default 5,
//! at least 5), `--allocations N` (default 5 000 000), `--calls N` (default
//! 20 000 000). Writes `target/bench/mux.json`. `--callgrind`: instead of
//! timing, instructions per allocation of the callback configurations under
//! callgrind (`target/bench/mux-callgrind.json`), which do not move with
//! the machine's load.

use crate::measure::{elapsed_ns, median, Setup};
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use std::path::{Path, PathBuf};
use std::time::Duration;

const C_CHILD_CLSID: &str = "{7C0FFEE1-6A2B-4C3D-8E4F-5A6B7C8D9E0F}";

pub fn main(args: &[String]) -> crate::Result {
    let (mut leg_name, mut runs) = ("linux-x64-8.0".to_string(), 5usize);
    let (mut allocations, mut calls) = (5_000_000u64, 20_000_000u64);
    let mut callgrind = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--callgrind" {
            callgrind = true;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("bench mux: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => leg_name = value.clone(),
            "--runs" => runs = value.parse()?,
            "--allocations" => allocations = value.parse()?,
            "--calls" => calls = value.parse()?,
            other => return Err(format!("bench mux: unknown option `{other}`").into()),
        }
    }
    if runs < 5 {
        return Err("bench mux: --runs must be at least 5".into());
    }
    run(&leg_name, runs, allocations, calls, callgrind)
}

/// One profiler of a configuration: library, class, variables.
#[derive(Clone)]
struct Child {
    profiler: Profiler,
    env: Vec<(&'static str, &'static str)>,
}

/// A benchmark configuration.
struct Config {
    name: &'static str,
    workload: Workload,
    /// `None`: no profiler; one child without the multiplexer: loaded
    /// directly; otherwise through the multiplexer.
    children: Vec<Child>,
    through_mux: bool,
}

impl Config {
    /// The run of this configuration: the app with `n` units of work, the
    /// profiler (directly, or `mux` with the children's variables), and
    /// the children's output files.
    fn spec(&self, app: &Path, n: u64, work: &Path, mux: &Profiler) -> (RunSpec, Vec<PathBuf>) {
        let mut spec = RunSpec::new(app, work)
            .timeout(Duration::from_secs(600))
            .env("DOTNET_TieredCompilation", "0")
            .env("COMPlus_TieredCompilation", "0");
        spec.args = vec![n.to_string()];
        let outputs: Vec<PathBuf> = (1..=self.children.len())
            .map(|k| work.join(format!("child{k}.jsonl")))
            .collect();
        match (self.children.as_slice(), self.through_mux) {
            ([], _) => {}
            ([one], false) => {
                spec = spec.profiler(one.profiler.clone());
                for (k, v) in &one.env {
                    spec = spec.env(k, v);
                }
            }
            (children, _) => {
                let list = children
                    .iter()
                    .map(|c| format!("{}={}", c.profiler.path.display(), c.profiler.clsid))
                    .collect::<Vec<_>>()
                    .join(";");
                spec = spec
                    .profiler(mux.clone())
                    .env("CLRPROF_MUX_PROFILERS", &list);
                for (k, (c, out)) in children.iter().zip(&outputs).enumerate() {
                    spec = spec.env(
                        &format!("CLRPROF_MUX_{}_CLRPROF_OUTPUT", k + 1),
                        &out.display().to_string(),
                    );
                    for (name, v) in &c.env {
                        spec = spec.env(&format!("CLRPROF_MUX_{}_{name}", k + 1), v);
                    }
                }
            }
        }
        (spec, outputs)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    Alloc,
    Calls,
}

/// A second file of a library (the loader loads one file once).
fn copy_of(p: &Profiler, out_dir: &Path) -> crate::Result<Profiler> {
    let name = p
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("library without a name")?;
    let copy = out_dir.join(format!("copy-{name}"));
    std::fs::copy(&p.path, &copy)?;
    Ok(Profiler {
        path: copy,
        clsid: p.clsid.clone(),
    })
}

fn run(
    leg_name: &str,
    runs: usize,
    allocations: u64,
    calls: u64,
    callgrind: bool,
) -> crate::Result {
    let setup = Setup::open("mux", leg_name)?;
    let (leg, out_dir, runtimes) = (&setup.leg, &setup.out_dir, &setup.runtimes);

    println!("==> build clrprof-mux, alloc-tracer, call-tracer (release) and the C child");
    let mux = setup.release_profiler("clrprof-mux")?;
    let alloc = setup.release_profiler("alloc-tracer")?;
    let calls_tracer = setup.release_profiler("call-tracer")?;
    let calls_copy = copy_of(&calls_tracer, out_dir)?;
    let c_child = setup.c_profiler(
        "libmux_child.so",
        &["tests/fixtures/mux-child/mux_child.c"],
        C_CHILD_CLSID,
    )?;
    let alloc_app = setup.app("benches/dispatch/alloc.cs")?;
    let calls_app = setup.app("benches/elt/workload.cs")?;

    let child = |p: &Profiler, env: Vec<(&'static str, &'static str)>| Child {
        profiler: p.clone(),
        env,
    };
    let c_alloc = child(&c_child, vec![("CLRPROF_MUX_CHILD_MODE", "alloc")]);
    let tracer = |p: &Profiler| {
        child(
            p,
            vec![
                ("CLRPROF_ELT", "fastpath"),
                ("CLRPROF_CALLS_FILTER", "Bench."),
            ],
        )
    };
    let configs = vec![
        Config {
            name: "alloc: no profiler",
            workload: Workload::Alloc,
            children: vec![],
            through_mux: false,
        },
        Config {
            name: "alloc: alloc-tracer",
            workload: Workload::Alloc,
            children: vec![child(&alloc, vec![])],
            through_mux: false,
        },
        Config {
            name: "alloc: alloc-tracer via mux",
            workload: Workload::Alloc,
            children: vec![child(&alloc, vec![])],
            through_mux: true,
        },
        Config {
            name: "alloc: C child",
            workload: Workload::Alloc,
            children: vec![c_alloc.clone()],
            through_mux: false,
        },
        Config {
            name: "alloc: C child via mux",
            workload: Workload::Alloc,
            children: vec![c_alloc],
            through_mux: true,
        },
        Config {
            name: "elt: no profiler",
            workload: Workload::Calls,
            children: vec![],
            through_mux: false,
        },
        Config {
            name: "elt: call-tracer",
            workload: Workload::Calls,
            children: vec![tracer(&calls_tracer)],
            through_mux: false,
        },
        Config {
            name: "elt: call-tracer via mux",
            workload: Workload::Calls,
            children: vec![tracer(&calls_tracer)],
            through_mux: true,
        },
        Config {
            name: "elt: two call-tracers via mux",
            workload: Workload::Calls,
            children: vec![tracer(&calls_tracer), tracer(&calls_copy)],
            through_mux: true,
        },
    ];

    if callgrind {
        return instructions(&setup, &configs, &alloc_app, &mux);
    }
    println!("==> {runs} alternating rounds on {leg_name}: {allocations} allocations, {calls} hooked calls");
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for round in 0..runs {
        for (i, config) in configs.iter().enumerate() {
            let work = out_dir
                .join("runs-mux")
                .join(i.to_string())
                .join(round.to_string());
            let (app, n) = match config.workload {
                Workload::Alloc => (&alloc_app, allocations),
                Workload::Calls => (&calls_app, calls),
            };
            let (spec, outputs) = config.spec(app, n, &work, &mux);
            let outcome = run_app(leg, runtimes.wine(), &spec)?;
            outcome.check_exit()?;
            check_work(config, &outcome, &outputs, n)?;
            let ns = elapsed_ns(&outcome)?;
            println!("  round {round} {:<32} {:>9.2} ms", config.name, ns / 1e6);
            times[i].push(ns);
        }
    }

    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let by = |name: &str| -> f64 {
        configs
            .iter()
            .position(|c| c.name == name)
            .map(|i| med[i])
            .unwrap_or(f64::NAN)
    };
    let added = |name: &str, base: &str| by(name) - by(base);
    let per = |name: &str, base: &str, n: u64| added(name, base) / n as f64;
    let alloc_ratio = added("alloc: alloc-tracer via mux", "alloc: no profiler")
        / added("alloc: alloc-tracer", "alloc: no profiler");
    let c_ratio = added("alloc: C child via mux", "alloc: no profiler")
        / added("alloc: C child", "alloc: no profiler");
    let elt_ratio = added("elt: call-tracer via mux", "elt: no profiler")
        / added("elt: call-tracer", "elt: no profiler");
    let fan_out = per("elt: two call-tracers via mux", "elt: no profiler", calls);

    println!("\nmedians of {runs} rounds:");
    for (c, m) in configs.iter().zip(&med) {
        println!("  {:<32} {:>9.2} ms", c.name, m / 1e6);
    }
    let pa = |n: &str| per(n, "alloc: no profiler", allocations);
    let pe = |n: &str| per(n, "elt: no profiler", calls);
    println!(
        "callbacks: alloc-tracer adds {:.2} ns per allocation directly, {:.2} through the multiplexer: ratio {alloc_ratio:.3} (target <= 1.05)",
        pa("alloc: alloc-tracer"),
        pa("alloc: alloc-tracer via mux")
    );
    println!(
        "callbacks, smallest child: the C child adds {:.2} ns directly, {:.2} through the multiplexer: ratio {c_ratio:.3}",
        pa("alloc: C child"),
        pa("alloc: C child via mux")
    );
    println!(
        "ELT, one hooking child: call-tracer adds {:.2} ns per call directly, {:.2} through the multiplexer: ratio {elt_ratio:.3} (target <= 1.10)",
        pe("elt: call-tracer"),
        pe("elt: call-tracer via mux")
    );
    println!("ELT, two hooking children (fan-out): {fan_out:.2} ns per call for both");

    let json = serde_json::json!({
        "callback_ratio_alloc_tracer": alloc_ratio,
        "callback_ratio_c_child": c_ratio,
        "elt_ratio_one_hooking_child": elt_ratio,
        "ns_per_allocation_alloc_tracer": pa("alloc: alloc-tracer"),
        "ns_per_allocation_alloc_tracer_mux": pa("alloc: alloc-tracer via mux"),
        "ns_per_allocation_c_child": pa("alloc: C child"),
        "ns_per_allocation_c_child_mux": pa("alloc: C child via mux"),
        "ns_per_call_call_tracer": pe("elt: call-tracer"),
        "ns_per_call_call_tracer_mux": pe("elt: call-tracer via mux"),
        "ns_per_call_two_call_tracers_mux": fan_out,
        "runtime": leg.version,
        "leg": leg.name,
        "allocations": allocations,
        "calls": calls,
        "runs": runs,
        "median_ns": configs.iter().zip(&med).map(|(c, m)| (c.name.to_string(), serde_json::json!(m))).collect::<serde_json::Map<_, _>>(),
    });
    let path = out_dir.join("mux.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Checks that every profiler of a run counted its work.
/// `--callgrind`: the allocation configurations at 200 000 and 1 200 000
/// allocations under callgrind; instructions per allocation each adds to
/// the run without a profiler (the difference of the two sizes, so start-up
/// and JIT cancel out), and the multiplexer's ratio for each child.
/// Writes `target/bench/mux-callgrind.json`.
fn instructions(setup: &Setup, configs: &[Config], app: &Path, mux: &Profiler) -> crate::Result {
    const SIZES: [u64; 2] = [200_000, 1_200_000];
    println!(
        "==> callgrind on {}: two sizes per configuration",
        setup.leg.name
    );
    let mut per_allocation = serde_json::Map::new();
    for config in configs.iter().filter(|c| c.workload == Workload::Alloc) {
        let mut totals = [0u64; 2];
        for (k, n) in SIZES.into_iter().enumerate() {
            let work = setup
                .out_dir
                .join("callgrind-mux")
                .join(config.name.replace([':', ' '], "_"))
                .join(n.to_string());
            let (spec, outputs) = config.spec(app, n, &work, mux);
            let (outcome, total) = setup.under_callgrind(spec, &work)?;
            check_work(config, &outcome, &outputs, n)?;
            totals[k] = total;
        }
        let per = (totals[1] as f64 - totals[0] as f64) / (SIZES[1] - SIZES[0]) as f64;
        println!(
            "  {:<32} {per:>10.1} instructions per allocation",
            config.name
        );
        per_allocation.insert(config.name.to_string(), serde_json::json!(per));
    }
    let at = |name: &str| {
        per_allocation
            .get(name)
            .and_then(|v| v.as_f64())
            .unwrap_or(f64::NAN)
    };
    let none = at("alloc: no profiler");
    let ratio = |child: &str| {
        let (direct, via) = (at(child) - none, at(&format!("{child} via mux")) - none);
        println!(
            "  {child}: adds {direct:.1} instructions per allocation directly, {via:.1} through the multiplexer (+{:.1}): ratio {:.3}",
            via - direct,
            via / direct
        );
        via / direct
    };
    let json = serde_json::json!({
        "callback_ratio_alloc_tracer": ratio("alloc: alloc-tracer"),
        "callback_ratio_c_child": ratio("alloc: C child"),
        "instructions_per_allocation": per_allocation,
        "sizes": SIZES,
        "leg": setup.leg.name,
        "runtime": setup.leg.version,
    });
    let path = setup.out_dir.join("mux-callgrind.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    Ok(())
}

fn check_work(config: &Config, outcome: &Outcome, outputs: &[PathBuf], n: u64) -> crate::Result {
    let records = |k: usize| -> Vec<serde_json::Value> {
        if config.through_mux {
            clrprof_testing::background::read_records(&outputs[k]).0
        } else {
            outcome.records.clone()
        }
    };
    for (k, child) in config.children.iter().enumerate() {
        let r = records(k);
        let name = child.profiler.path.display();
        let counted = match config.workload {
            Workload::Alloc if child.profiler.clsid == C_CHILD_CLSID => r
                .iter()
                .find(|r| r["event"] == "c_counts")
                .and_then(|r| r["allocations"].as_u64())
                .map(|a| a >= n),
            Workload::Alloc => r
                .iter()
                .find(|r| r["event"] == "alloc" && r["type"] == "Bench.Cell")
                .and_then(|r| r["count"].as_u64())
                .map(|c| c == n + 1000),
            Workload::Calls => r
                .iter()
                .find(|r| r["event"] == "calls" && r["method"] == "Bench.Workload::Step")
                .and_then(|r| r["count"].as_u64())
                .map(|c| c == n + 1000),
        };
        if counted != Some(true) {
            return Err(format!("{}: {name} did not count its work: {r:?}", config.name).into());
        }
    }
    Ok(())
}
