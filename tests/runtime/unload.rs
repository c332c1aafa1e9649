//! ELT records follow their function's lifetime: 1,000 load/run/unload
//! cycles of a collectible `AssemblyLoadContext` whose methods are hooked
//! (call-tracer, both ELT variants). The app prints how many calls it made
//! in each cycle; the profiler reports each unloaded method's record with
//! its count when the SDK frees it. Checked: the per-cycle counts match
//! exactly (no record ever served two methods, whose counts would merge),
//! every cycle's record is accounted for (freed, or still alive at the end
//! because its context had not finished unloading), the live records stay
//! few (memory stops growing), and the app's output is unchanged.
//!
//! Also, without clrprof: a C profiler (`tests/fixtures/c-enumjit`) that
//! walks the JIT's code heaps (`EnumJITedFunctions`) from a plain thread,
//! each walk inside `SuspendRuntime`, while the app unloads contexts: the
//! app is unchanged in every run. That is how the SDK makes the walk on
//! .NET 10 and later, where the same walk outside a suspension killed the
//! runtime (see `enumeration_beside_unloads`).

use clrprof_testing::harness::{Case, CaseResult, Scenario};
use clrprof_testing::manifest::Os;
use serde_json::Value;

/// Live records allowed at any unload: a few cycles may overlap while the
/// runtime finishes unloading earlier contexts; a leak would reach hundreds.
const MAX_LIVE: u64 = 16;

fn cycles_for(case: &Case<'_>) -> usize {
    // Wine is an order of magnitude slower at loading assemblies.
    if case.leg().name.starts_with("win") {
        200
    } else {
        1000
    }
}

fn cycle_scenario(variant: &'static str) -> Scenario {
    Scenario::new(
        &format!("elt {variant}: collectible contexts load, run and unload; records follow their functions"),
        move |case| {
            let cycles = cycles_for(case);
            let app = case.app("unload")?;
            let mut plain_spec = case.spec(&app);
            plain_spec.args = vec![cycles.to_string()];
            let plain = case.run(plain_spec)?;
            plain.check()?;
            let profiler = case.profiler("call-tracer")?;
            let mut spec = case
                .spec(&app)
                .profiler(profiler)
                .env("CLRPROF_ELT", variant)
                .env("CLRPROF_CALLS_FILTER", "Unload.Plugin::Work");
            spec.args = vec![cycles.to_string()];
            let traced = case.run(spec)?;
            traced.check()?;
            if traced.stdout != plain.stdout {
                return Err("app output changed under ELT hooks".into());
            }
            // The app's own account: calls per cycle.
            let mut expected: Vec<u64> = plain
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix("cycle "))
                .filter_map(|l| l.split_once(" calls ").and_then(|(_, k)| k.trim().parse().ok()))
                .collect();
            if expected.len() != cycles {
                return Err(format!("the app reported {} of {cycles} cycles", expected.len()).into());
            }
            let collected: usize = plain
                .stdout
                .lines()
                .find_map(|l| l.rsplit_once(" collected ").and_then(|(_, n)| n.trim().parse().ok()))
                .unwrap_or(0);
            if collected * 10 < cycles * 9 {
                return Err(format!("only {collected} of {cycles} contexts were collected").into());
            }
            // The profiler's account: one record per freed function, with its count.
            let unloaded: Vec<&Value> = traced
                .events("unloaded")
                .filter(|r| r["method"] == "Unload.Plugin::Work")
                .collect();
            let mut counts: Vec<u64> = unloaded.iter().filter_map(|r| r["count"].as_u64()).collect();
            let max_live = unloaded.iter().filter_map(|r| r["live"].as_u64()).max().unwrap_or(0);
            if unloaded.len() * 10 < cycles * 9 {
                return Err(format!(
                    "only {} of {cycles} hooked methods were freed with their module",
                    unloaded.len()
                )
                .into());
            }
            if max_live > MAX_LIVE {
                return Err(format!("{max_live} records alive at once (at most {MAX_LIVE} expected)").into());
            }
            // Records still alive at shutdown: the remaining cycles' counts.
            let total: u64 = traced
                .events("calls")
                .find(|r| r["method"] == "Unload.Plugin::Work")
                .and_then(|r| r["count"].as_u64())
                .unwrap_or(0);
            let freed: u64 = counts.iter().sum();
            let want_total: u64 = expected.iter().sum();
            if total != want_total {
                return Err(format!("{total} hooked calls of Work in all, the app made {want_total}").into());
            }
            // Every freed record carries exactly one cycle's count: as a
            // multiset, they are the app's counts minus those of the cycles
            // whose records were still alive.
            expected.sort_unstable();
            counts.sort_unstable();
            let mut rest = expected.clone();
            for c in &counts {
                match rest.binary_search(c) {
                    Ok(i) => {
                        rest.remove(i);
                    }
                    Err(_) => {
                        return Err(format!(
                            "a freed record counted {c} calls, which no single cycle made (records merged?)"
                        )
                        .into())
                    }
                }
            }
            let alive_sum: u64 = rest.iter().sum();
            if freed + alive_sum != want_total || rest.len() > MAX_LIVE as usize {
                return Err(format!(
                    "{} records freed ({freed} calls), {} cycles unaccounted for ({alive_sum} calls)",
                    counts.len(),
                    rest.len()
                )
                .into());
            }
            Ok(())
        },
    )
}

/// A path as the leg's process sees it.
fn process_path(case: &Case<'_>, path: &std::path::Path) -> Result<String, String> {
    match case.leg().os {
        Os::Linux => Ok(path.display().to_string()),
        Os::Windows => clrprof_testing::wine::to_wine_path(path).map_err(|e| e.to_string()),
    }
}

const ENUMJIT_SOURCE: &str = include_str!("../fixtures/c-enumjit/enumjit.c");
const ENUMJIT_CLSID: &str = "{6C1A7E52-3B9D-4E20-9F41-5D2B8E6017C3}";

/// Runs of the suspended walk per leg.
const SUSPENDED_RUNS: usize = 3;

/// `EnumJITedFunctions` from a plain thread of a C profiler, back to back
/// inside `SuspendRuntime` / `ResumeRuntime`, while the unload app loads and
/// unloads 20 collectible contexts: exit status and output as without the
/// profiler in every run, and the walks listed functions.
///
/// The same profiler without the suspensions
/// (`CLRPROF_MEASURE_UNSUSPENDED=N` runs it N times more and prints how
/// many runs died; no verdict, since the fault is the runtime's and comes
/// in some runs only) died in 4 of 40 runs on 10.0.15 ("The RX block to
/// map as RW was not found", or SIGSEGV in the walk) and 1 of 40 on
/// 11.0.0, and in none of 30 on 8.0.34 and 9.0.23. So the SDK refuses the
/// walk on .NET 10 and later outside a scope where the runtime cannot
/// suspend, and suspends the runtime itself where it needs the list
/// (`attach::CatchUp`).
fn enumeration_beside_unloads(case: &Case<'_>) -> CaseResult {
    let profiler = clrprof_testing::fixtures::c_profiler(
        case.leg().os,
        case.cache_dir(),
        "c-enumjit",
        ENUMJIT_SOURCE,
        ENUMJIT_CLSID,
        match case.leg().os {
            Os::Linux => &["-lpthread"],
            // winpthreads linked in, so that the DLL needs nothing the Wine
            // prefix lacks.
            Os::Windows => &["-Wl,-Bstatic", "-lpthread"],
        },
    )
    .map_err(|e| e.to_string())?;
    let app = case.app("unload")?;
    let args = vec!["20".to_string()];
    let mut plain = case.spec(&app);
    plain.args = args.clone();
    let plain = case.run(plain)?;
    plain.check()?;
    let run = |suspend: bool,
               i: usize|
     -> Result<(clrprof_testing::run::Outcome, Option<Value>), String> {
        let mut spec = case.spec(&app).profiler(profiler.clone());
        let out = spec.work_dir.join(format!("c-enumjit-{suspend}-{i}.jsonl"));
        spec = spec
            .env("CLRPROF_C_OUTPUT", &process_path(case, &out)?)
            .env("CLRPROF_C_ENUM_MS", "0")
            .env("CLRPROF_C_SUSPEND", if suspend { "1" } else { "0" });
        spec.args = args.clone();
        let outcome = case.run(spec).map_err(|v| format!("{v:?}"))?;
        let record = std::fs::read_to_string(&out).ok().and_then(|t| {
            t.lines()
                .find_map(|l| serde_json::from_str::<Value>(l).ok())
        });
        Ok((outcome, record))
    };
    for i in 0..SUSPENDED_RUNS {
        let (with, record) = run(true, i)?;
        if format!("{:?}", with.exit) != format!("{:?}", plain.exit) || with.stdout != plain.stdout
        {
            return Err(format!(
                "run {i}: the app changed under the C profiler's suspended walks: {:?} without, \
                 {:?} with; stderr: {}",
                plain.exit,
                with.exit,
                with.stderr.chars().take(600).collect::<String>()
            )
            .into());
        }
        let record = record.ok_or(format!("run {i}: the C profiler wrote no record"))?;
        let walks = record["enumerations"].as_u64().unwrap_or(0);
        let functions = record["functions"].as_u64().unwrap_or(0);
        if walks == 0 || functions == 0 {
            return Err(
                format!("run {i}: {walks} walks listed {functions} functions: {record}").into(),
            );
        }
        eprintln!(
            "    c-enumjit suspended, run {i}: {walks} walks, {functions} functions, {} refused suspensions",
            record["failures"]
        );
    }
    if let Some(n) = std::env::var("CLRPROF_MEASURE_UNSUSPENDED")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut died = 0;
        for i in 0..n {
            let (with, _) = run(false, i)?;
            if format!("{:?}", with.exit) != format!("{:?}", plain.exit) {
                died += 1;
            }
        }
        eprintln!("    c-enumjit without suspensions: {died} of {n} runs died");
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        cycle_scenario("fastpath"),
        cycle_scenario("withinfo"),
        Scenario::new(
            "unload: EnumJITedFunctions from a C profiler's thread inside SuspendRuntime, beside collectible unloads",
            enumeration_beside_unloads,
        )
    ]
}
