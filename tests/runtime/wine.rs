//! What the Windows legs under Wine get wrong without any profiler, each
//! fact checked here by a scenario of its own, so that the scenarios left
//! out of a leg for it are left out only as long as the fact holds.
//!
//! win-x64-10.0 (Wine 8, .NET 10.0.15): a process that finalizes dynamic
//! methods (`DynamicResolver+DestroyScout`) after an EventPipe session (the
//! runtime's own managed code makes them then: the eventpipe app has none
//! of its own), or those of reflection's invoke stubs for collectible
//! contexts, dies with `Internal CLR error. (0x80131506)`. Under `WINEDEBUG=+seh` the finalizer
//! thread calls `RtlDeleteGrowableFunctionTable` and then reads address
//! 0x20 at coreclr.dll RVA 0x106362: the runtime's unpublishing of the
//! method's unwind information (the routine that starts at RVA 0x106310
//! tests the publishing flag, looks the code range up and reads the code
//! header stored just before the method's code, null here, for its count
//! of unwind infos). With `DOTNET_EnableWriteXorExecute=0` (the code heap
//! mapped once instead of twice) it never happens; win-x64-8.0 and
//! linux-x64-10.0 run the same apps. So the rig runs the win-x64-10.0 leg
//! with `DOTNET_EnableWriteXorExecute=0` (`clrprof_testing::run`), and
//! every scenario runs there; the scenario below sets W^X back on to show
//! the fault is Wine's, and fails (saying the setting can go) once it is not.

use clrprof_testing::harness::{Case, CaseResult, Scenario};
use clrprof_testing::run::{Exit, Outcome};
use clrprof_testing::wine::to_wine_path;

/// The leg of .NET 10 under Wine.
pub const WINE_NET10_LEG: &str = "win-x64-10.0";

/// `true` when `outcome` is the death the module docs describe.
fn died_finalizing_a_dynamic_method(outcome: &Outcome) -> bool {
    outcome.exit != Exit::Code(0)
        && outcome.stderr.contains("0x80131506")
        && outcome
            .stderr
            .contains("DynamicResolver+DestroyScout.Finalize")
}

/// Runs `app` with `args`, W^X on and off, without a profiler (with an
/// EventPipe session of the runtime's GC keyword, written into the run's
/// directory, when `event_pipe`): with W^X on it must die finalizing a
/// dynamic method in one of [`TRIES_ON`] runs (the fault depends on when
/// the finalizer runs: one run in a rehearsal of 2026-11-28 exited 0), with
/// it off exit 0.
fn on_and_off(
    case: &Case<'_>,
    what: &str,
    app: &std::path::Path,
    args: &[&str],
    event_pipe: bool,
) -> CaseResult {
    let run = |wx: &str| {
        let mut spec = case.spec(app).env("DOTNET_EnableWriteXorExecute", wx);
        if event_pipe {
            let trace = to_wine_path(&spec.work_dir.join("trace.nettrace"))?;
            spec = spec
                .env("DOTNET_EnableEventPipe", "1")
                .env(
                    "DOTNET_EventPipeConfig",
                    "Microsoft-Windows-DotNETRuntime:0x1:4",
                )
                .env("DOTNET_EventPipeOutputPath", &trace);
        } else {
            spec = spec.env("DOTNET_EnableEventPipe", "0");
        }
        spec.args = args.iter().map(|a| a.to_string()).collect();
        case.run(spec)
    };
    let mut survived = Vec::new();
    let mut died = false;
    for _ in 0..TRIES_ON {
        let on = run("1")?;
        if died_finalizing_a_dynamic_method(&on) {
            died = true;
            break;
        }
        survived.push(format!("{:?}, stderr {:?}", on.exit, on.stderr));
    }
    if !died {
        return Err(format!(
            "{what}, W^X on: no longer dies finalizing a dynamic method in {TRIES_ON} runs ({}); \
             the Wine leg's fact changed: run the scenarios excluded for it \
             (see tests/runtime/wine.rs): the rig's DOTNET_EnableWriteXorExecute=0 for this leg can go",
            survived.join("; ")
        )
        .into());
    }
    let off = run("0")?;
    off.check_exit()
        .map_err(|e| format!("{what}, W^X off: {e}"))?;
    Ok(())
}

/// Runs with W^X on, of which one must die (see [`on_and_off`]).
const TRIES_ON: usize = 3;

fn dynamic_method_finalizers(case: &Case<'_>) -> CaseResult {
    // Reflection's invoke stubs of two collectible contexts' methods,
    // finalized when the app collects the contexts.
    let conformance = case.app("conformance")?;
    on_and_off(case, "conformance alc", &conformance, &["alc"], false)?;
    // No dynamic method of its own, no reflection: the app allocates and
    // collects, with an EventPipe session of the runtime's GC keyword (what
    // the torture profiler and the allocation profiles start), and the
    // runtime's own managed code makes the dynamic methods that die. Without
    // the session this app exits 0.
    let eventpipe = case.app("eventpipe")?;
    on_and_off(
        case,
        "eventpipe with an EventPipe session",
        &eventpipe,
        &[],
        true,
    )
}

/// The scenarios of this file.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "wine: dynamic-method finalizers kill .NET 10.0.15 under Wine 8 with W^X on, without a profiler, and not with W^X off",
        dynamic_method_finalizers,
    )
    .only_on(
        &[WINE_NET10_LEG],
        "a fact of the .NET 10 leg under Wine (see tests/runtime/wine.rs)",
    )]
}
