//! `cargo xtask bench <name>|all`: the benchmarks of `benches/README.md`.
//!
//! Each benchmark compares clrprof against a yardstick in the same run
//! (a hand-written C profiler, or the app without a profiler), takes
//! medians of alternating runs and writes `target/bench/<name>.json`.
//! `all` runs every one of them in turn with its defaults.

/// One benchmark: its name on the command line and its entry point.
type Bench = (&'static str, fn(&[String]) -> crate::Result);

/// Every benchmark, in the order `all` runs them.
const BENCHES: &[Bench] = &[
    ("elt", crate::bench_elt::main),
    ("sampler", crate::bench_sampler::main),
    ("profiles", crate::bench_profiles::main),
    ("mux", crate::bench_mux::main),
    ("dispatch", crate::bench_dispatch::main),
    ("memory", crate::bench_memory::main),
    ("wrap", crate::bench_wrap::main),
    ("context", crate::bench_context::main),
    ("server", crate::bench_server::main),
    ("heap-snapshot", crate::bench_heap::snapshot),
    ("heap-soak", crate::bench_heap::soak),
    ("gate", crate::bench_gate::main),
];

pub fn main(args: &[String]) -> crate::Result {
    let names: Vec<&str> = BENCHES.iter().map(|(n, _)| *n).collect();
    let Some(what) = args.first() else {
        return Err(format!(
            "usage: cargo xtask bench <{}|all> [options]",
            names.join("|")
        )
        .into());
    };
    if what == "all" {
        return all(&args[1..]);
    }
    match BENCHES.iter().find(|(n, _)| n == what) {
        Some((_, run)) => run(&args[1..]),
        None => Err(format!(
            "bench: unknown benchmark `{what}` (known: {}, all)",
            names.join(", ")
        )
        .into()),
    }
}

/// Runs every benchmark with its defaults (`--leg` passed on to each) and
/// reports which ones failed; each still writes its own JSON.
fn all(args: &[String]) -> crate::Result {
    let started = std::time::Instant::now();
    let mut failed = Vec::new();
    for (name, run) in BENCHES {
        println!("\n=== bench {name}");
        let t = std::time::Instant::now();
        match run(args) {
            Ok(()) => println!(
                "=== bench {name}: done in {:.0} s",
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                println!("=== bench {name}: FAILED: {e}");
                failed.push(*name);
            }
        }
    }
    println!(
        "\nall benchmarks: {:.0} s; JSON in target/bench/",
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("benchmarks failed: {}", failed.join(", ")).into())
    }
}
