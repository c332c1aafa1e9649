//! Sampler frames the SDK did not walk itself, inside real runtimes (a
//! fresh review of the safe surface found both routes: SIGSEGV on
//! linux-x64-8.0 and linux-x64-3.1). `test-profilers`' `ForgedFramesProfiler`
//! samples a stack source of its own that pushes a made-up `FunctionID`;
//! `StaleFramesProfiler` samples enter-only ELT shadow stacks of collectible
//! methods that unload. Checked: the app's exit status and output are
//! byte-identical to a run without the profiler, and the sampler sampled.

use clrprof_testing::harness::{Case, Scenario, Verdict};

const FORGED: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B61}";
const STALE: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B62}";

type R<T> = Result<T, Verdict>;

/// The app's output less what it measures: the hot app prints the share of
/// time each method took (`hot Hot.Program::Spin 0.75`), which moves with
/// the machine's load from run to run, profiler or not.
fn deterministic(stdout: &str) -> String {
    stdout
        .lines()
        .map(|l| {
            if l.starts_with("hot ") || l.starts_with("cold ") {
                l.rsplit_once(' ').map_or(l, |(name, _share)| name)
            } else {
                l
            }
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn unharmed(case: &Case<'_>, clsid: &str, app: &str, args: &[String]) -> R<()> {
    let app = case.app(app)?;
    let mut plain_spec = case.spec(&app);
    plain_spec.args = args.to_vec();
    let plain = case.run(plain_spec)?;
    plain.check_exit()?;
    let profiler = case.profiler_class("test-profilers", clsid)?;
    let mut spec = case.spec(&app).profiler(profiler);
    spec.args = args.to_vec();
    let sampled = case.run(spec)?;
    if (sampled.exit, deterministic(&sampled.stdout)) != (plain.exit, deterministic(&plain.stdout))
    {
        return Err(format!(
            "exit {:?} and output {:?} with the profiler, {:?} and {:?} without; stderr: {}",
            sampled.exit, sampled.stdout, plain.exit, plain.stdout, sampled.stderr
        )
        .into());
    }
    let stats: Vec<_> = sampled.events("sampler").collect();
    let [s] = stats.as_slice() else {
        return Err(format!("expected one sampler record: {:?}", sampled.records).into());
    };
    if s["samples"].as_u64().unwrap_or(0) == 0 {
        return Err(format!("the sampler took no sample: {s}").into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "sampler frames: a profiler's own stack source pushing a made-up FunctionID; app unharmed",
            |case| unharmed(case, FORGED, "hot", &[]),
        ),
        Scenario::new(
            "sampler frames: enter-only shadow stacks of collectible methods that unload; app unharmed",
            |case| {
                let cycles = if case.leg().is_wine() { "100" } else { "300" };
                unharmed(case, STALE, "unload", &[cycles.to_string()])
            },
        ),
    ]
}
