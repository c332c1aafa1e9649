//! The broken-profiler proof: a profiler that cannot load, crashes or hangs
//! makes a run fail with a readable reason, never a hang of the test run.
//! Each case asserts the reason the rig reports.

use crate::hello::expected_hello_stdout;
use clrprof_testing::fixtures::{BrokenBuild, BrokenMode, MODE_VARIABLE};
use clrprof_testing::harness::{Case, CaseResult, Scenario};
use clrprof_testing::run::Outcome;
use std::time::Duration;

/// What the fixture prints to stderr before crashing / hanging, so the tests
/// know the defect happened where intended.
const CRASH_NOTE: &str = "clrprof broken-profiler fixture: crashing in Initialize";
const HANG_NOTE: &str = "clrprof broken-profiler fixture: hanging in Initialize";

/// Timeout for the hang case; Wine legs start slower.
fn hang_timeout(case: &Case<'_>) -> Duration {
    if case.leg().is_wine() {
        Duration::from_secs(8)
    } else {
        Duration::from_secs(3)
    }
}

fn run_broken(
    case: &Case<'_>,
    build: BrokenBuild,
    mode: Option<BrokenMode>,
    timeout: Duration,
) -> Result<Outcome, clrprof_testing::harness::Verdict> {
    let app = case.app("hello")?;
    let profiler = case.broken_profiler(build)?;
    let mut spec = case.spec(&app).profiler(profiler).timeout(timeout);
    if let Some(mode) = mode {
        spec = spec.env(MODE_VARIABLE, mode.env_value());
    }
    case.run(spec)
}

/// The runtime keeps running the app when the profiler fails to load: the
/// app's output is intact, and the rig reports the missing runtime record.
fn expect_not_loaded(outcome: &Outcome) -> CaseResult {
    outcome.check_exit()?;
    if outcome.stdout != expected_hello_stdout() {
        return Err(format!("app output changed: {:?}", outcome.stdout).into());
    }
    match outcome.check() {
        Ok(()) => Err("the rig accepted a profiler that did not load".into()),
        Err(reason) if reason.starts_with("profiler did not load: no records written") => Ok(()),
        Err(reason) => Err(format!("unexpected reason: {reason}").into()),
    }
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "broken profiler: wrong CLSID is reported as not loaded",
            |case| {
                let outcome = run_broken(
                    case,
                    BrokenBuild::Standard,
                    Some(BrokenMode::WrongClsid),
                    Duration::from_secs(60),
                )?;
                expect_not_loaded(&outcome)
            },
        ),
        Scenario::new(
            "broken profiler: missing DllGetClassObject is reported as not loaded",
            |case| {
                let outcome =
                    run_broken(case, BrokenBuild::NoExport, None, Duration::from_secs(60))?;
                expect_not_loaded(&outcome)
            },
        ),
        Scenario::new(
            "broken profiler: crash in Initialize is reported as a dead process",
            |case| {
                let outcome = run_broken(
                    case,
                    BrokenBuild::Standard,
                    Some(BrokenMode::CrashInInitialize),
                    Duration::from_secs(60),
                )?;
                if !outcome.stderr.contains(CRASH_NOTE) {
                    return Err(format!(
                        "the fixture never reached Initialize; stderr: {:?}",
                        outcome.stderr
                    )
                    .into());
                }
                // Linux runtimes die of SIGSEGV; under Wine, .NET 8 dies of the
                // unhandled fault while .NET Core 3.1 catches it and fails startup.
                match outcome.check() {
                    Ok(()) => Err("the rig accepted a run whose profiler crashed".into()),
                    Err(reason) if reason.starts_with("process died: ") => Ok(()),
                    Err(reason) if reason.starts_with("runtime failed to start ") => Ok(()),
                    Err(reason) => Err(format!("unexpected reason: {reason}").into()),
                }
            },
        ),
        Scenario::new(
            "broken profiler: hang in Initialize is killed and reported",
            |case| {
                let timeout = hang_timeout(case);
                let outcome = run_broken(
                    case,
                    BrokenBuild::Standard,
                    Some(BrokenMode::HangInInitialize),
                    timeout,
                )?;
                let expected = format!(
                    "hung, killed after {}s, partial output: ",
                    timeout.as_secs()
                );
                match outcome.check() {
                    Ok(()) => Err("the rig accepted a run whose profiler hung".into()),
                    Err(reason) if reason.starts_with(&expected) && reason.contains(HANG_NOTE) => {
                        Ok(())
                    }
                    Err(reason) => Err(format!("unexpected reason: {reason}").into()),
                }
            },
        ),
    ]
}
