//! ELT records follow their function's lifetime: 1,000 load/run/unload
//! cycles of a collectible `AssemblyLoadContext` whose methods are hooked
//! (call-tracer, both ELT variants). The app prints how many calls it made
//! in each cycle; the profiler reports each unloaded method's record with
//! its count when the SDK frees it. Checked: the per-cycle counts match
//! exactly (no record ever served two methods, whose counts would merge),
//! every cycle's record is accounted for (freed, or still alive at the end
//! because its context had not finished unloading), the live records stay
//! few (memory stops growing), and the app's output is unchanged.

use clrprof_testing::harness::{Case, Scenario};
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

pub fn scenarios() -> Vec<Scenario> {
    vec![cycle_scenario("fastpath"), cycle_scenario("withinfo")]
}
