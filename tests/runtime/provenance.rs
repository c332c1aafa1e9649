//! Two values that must belong together, handed over with the wrong
//! partner from safe code (the readers-profiler fixture's `partners`
//! probes on apps/partners.cs; the third soundness review's routes):
//! - wrong control: a wrapper of `Greet(string)` installed through the
//!   ReJIT control of `Add(int, long)` is refused by the SDK
//!   (`Error::WrongPartner`), `Add` keeps its IL, the wrapper's handler
//!   sees no call, and the app's exit status and output are byte-identical
//!   to the run without a profiler. Before the control knew its method,
//!   Greet's IL became Add's body and the app aborted
//!   (`InvalidProgramException`);
//! - forged frames: a sampling thread that names the frames of one tick
//!   with the namer of another (nested resolves over this tick's and the
//!   previous tick's buffers) has every such call refused, names its own
//!   frames, and leaves the app unchanged. Before frames were named by
//!   position, the same probe named a made-up `FunctionID` with a walked
//!   sample and the host died with SIGSEGV.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;

const WRONG_CONTROL: &str = "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3C03}";
const FORGED_FRAME: &str = "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3C04}";

/// Runs the partners app plain and under the fixture class `clsid`; checks
/// the exit status and the output are byte-identical.
fn run_pair(case: &Case<'_>, clsid: &str) -> Result<Outcome, Verdict> {
    let app = case.app("partners")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let profiler = case.profiler_class("readers-profiler", clsid)?;
    let traced = case.run(case.spec(&app).profiler(profiler))?;
    if traced.stdout != plain.stdout || format!("{:?}", traced.exit) != format!("{:?}", plain.exit)
    {
        return Err(format!(
            "the app changed under the profiler:\nwithout ({:?}): {:?}\nwith    ({:?}): {:?}\nstderr: {}",
            plain.exit,
            plain.stdout,
            traced.exit,
            traced.stdout,
            traced.stderr.chars().take(2000).collect::<String>()
        )
        .into());
    }
    traced.check()?;
    Ok(traced)
}

fn one<'a>(traced: &'a Outcome, event: &'a str) -> Result<&'a serde_json::Value, Verdict> {
    let all: Vec<&serde_json::Value> = traced.events(event).collect();
    match all.as_slice() {
        [one] => Ok(one),
        _ => Err(format!("expected one `{event}` record, got {all:?}").into()),
    }
}

fn wrong_control(case: &Case<'_>) -> CaseResult {
    let traced = run_pair(case, WRONG_CONTROL)?;
    let request = one(&traced, "request")?;
    if request["error"] != "" {
        return Err(format!("RequestReJIT failed: {request}").into());
    }
    let install = one(&traced, "install")?;
    let error = install["error"].as_str().unwrap_or("");
    let expected = "instrumentation::WrappedBody::install_in_rejit refused (nothing was handed to \
                    the runtime): the body wraps Partners.Program::Greet";
    if install["refused"] != true
        || !error.starts_with(expected)
        || !error.contains("but this ReJIT control is for method")
    {
        return Err(format!("Greet's body in Add's control was not refused: {install}").into());
    }
    let handler = one(&traced, "handler")?;
    if handler["entries"] != 0 {
        return Err(format!("the wrapper ran: {handler}").into());
    }
    Ok(())
}

fn forged_frames(case: &Case<'_>) -> CaseResult {
    let traced = run_pair(case, FORGED_FRAME)?;
    let forged = one(&traced, "forged")?;
    let n = |k: &str| forged[k].as_u64().unwrap_or(0);
    if n("ticks") < 10 || n("named") == 0 || n("attempts") == 0 {
        return Err(format!("too little sampled to tell: {forged}").into());
    }
    eprintln!("    provenance: {forged}");
    if n("refused") != n("attempts") {
        return Err(format!("a frame of another tick was named: {forged}").into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "provenance: a wrapped body in another method's ReJIT control is refused, the method keeps its IL",
            wrong_control,
        ),
        Scenario::new(
            "provenance: frames of one tick named with another tick's namer are refused, the host lives",
            forged_frames,
        ),
    ]
}
