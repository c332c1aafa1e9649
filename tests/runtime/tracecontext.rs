//! Trace context on every sample (issue 46): the SDK's startup hook
//! (`clrprof/managed/ClrprofTraceContext.cs`) mirrors `Activity.Current`
//! into each thread's record, and the sampler example's `SuspendRuntime`
//! source labels each sample with the walked thread's context.
//!
//! Ground truth comes from the app (`apps/tracectx.cs`): the trace, root and
//! child span ids of every request it made, written to a file, and which
//! step runs where (Step1 before any await, Step2 after `Task.Yield`, Step3
//! in `Task.Run`, Step4 after an awaited timer, in a child activity). Every
//! sample inside a step must carry exactly that step's span; samples of
//! pool threads idling in the pool must carry none.

use crate::pprof::{decode, PbSample};
use clrprof_testing::csharp::CompileOptions;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::{Outcome, Profiler};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The startup hook's source, as the SDK ships it.
pub const HOOK_SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../clrprof/managed/ClrprofTraceContext.cs"
);

/// The legs whose runtime has `Activity.CurrentChanged` (.NET 7+).
pub const CONTEXT_LEGS: [&str; 4] = [
    "linux-x64-8.0",
    "linux-x64-9.0",
    "linux-x64-10.0",
    "linux-x64-11.0",
];

/// The startup hook, compiled once against .NET Core 3.1's reference
/// assemblies (as it ships: one assembly for every runtime), prepared for
/// the case's leg.
pub fn hook(case: &Case<'_>) -> Result<PathBuf, Verdict> {
    let options = CompileOptions {
        allow_unsafe: true,
        optimize: true,
        ..Default::default()
    };
    case.assembly_from(Path::new(HOOK_SOURCE), options, "linux-x64-3.1")
}

/// The environment that loads the hook and points it at `profiler`.
pub fn hook_env(case: &Case<'_>, profiler: &Profiler) -> Result<Vec<(String, String)>, Verdict> {
    let hook = hook(case)?;
    Ok(vec![
        (
            "DOTNET_STARTUP_HOOKS".into(),
            crate::mux::target_path(case, &hook)?,
        ),
        (
            "CLRPROF_CONTEXT_LIBRARY".into(),
            crate::mux::target_path(case, &profiler.path)?,
        ),
    ])
}

fn read_records(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("no record file {}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("bad record {l:?}: {e}")))
        .collect()
}

/// One request the app made: its ids (the OTLP join with span times is the
/// end-to-end scenario's, `tracecontext_e2e`, against the OpenTelemetry
/// SDK's exported spans).
struct Request {
    trace: String,
    root: String,
    child: String,
}

fn read_requests(path: &Path) -> Result<Vec<Request>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("the app wrote no ids to {}: {e}", path.display()))?;
    text.lines()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            match w[..] {
                ["request", t, r, c] => Ok(Request {
                    trace: t.into(),
                    root: r.into(),
                    child: c.into(),
                }),
                _ => Err(format!("bad id line {l:?}")),
            }
        })
        .collect()
}

struct Traced {
    outcome: Outcome,
    records: Vec<Value>,
    pprof: Option<Vec<u8>>,
    ids: PathBuf,
}

fn run(
    case: &Case<'_>,
    app: &Path,
    profiler: Option<&Profiler>,
    env: &[(String, String)],
) -> Result<Traced, Verdict> {
    let mut spec = case.spec(app).timeout(Duration::from_secs(60));
    let ids = spec.work_dir.join("ids.txt");
    spec = spec.env("TRACECTX_IDS", &ids.display().to_string());
    if let Some(p) = profiler {
        spec = spec.profiler(p.clone()).env("CLRPROF_SAMPLER_RATE", "250");
    }
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let records_path = spec.work_dir.join("records.jsonl.jsonl");
    let pprof_path = spec.work_dir.join("records.jsonl.pb.gz");
    let outcome = case.run(spec)?;
    outcome.check_exit()?;
    let records = if profiler.is_some() {
        read_records(&records_path)?
    } else {
        Vec::new()
    };
    Ok(Traced {
        outcome,
        records,
        pprof: std::fs::read(&pprof_path).ok(),
        ids,
    })
}

fn record<'a>(records: &'a [Value], event: &str) -> Result<&'a Value, String> {
    records
        .iter()
        .find(|r| r["event"] == event)
        .ok_or_else(|| format!("no {event:?} record in {records:?}"))
}

fn has_frame(s: &PbSample, prefix: &str) -> bool {
    s.frames.iter().any(|f| f.starts_with(prefix))
}

/// The step (1-4) a sample is in, from its frames.
fn step_of(s: &PbSample) -> Option<u8> {
    (1..=4u8).find(|k| {
        s.frames
            .iter()
            .any(|f| f == &format!("TraceCtx.Work::Step{k}"))
    })
}

/// A pool thread idling in the pool: waiting in the pool's semaphore, no
/// frame of the app.
fn idle_pool_thread(s: &PbSample) -> bool {
    has_frame(s, "System.Threading.LowLevelLifoSemaphore::") && !has_frame(s, "TraceCtx.")
}

fn across_await(case: &Case<'_>) -> CaseResult {
    across_await_with(case, "signals")
}

/// The same with the suspension source (the signal source is the default
/// on Linux): the context is read from a suspended thread.
fn across_await_suspended(case: &Case<'_>) -> CaseResult {
    across_await_with(case, "suspend-runtime")
}

/// Every sample of the steps carries its request's context, taken by the
/// sampler's source `source`; with signals also every CPU-time sample (the
/// handler's `snapshot` of the interrupted thread's record).
fn across_await_with(case: &Case<'_>, source: &str) -> CaseResult {
    let app = case.app("tracectx")?;
    let profiler = case.profiler("sampler")?;
    let mut env = hook_env(case, &profiler)?;
    env.push(("CLRPROF_SAMPLER_SOURCE".into(), source.into()));
    // The app's output does not depend on how long it runs: the run
    // without the profiler is short.
    let plain = run(case, &app, None, &[("TRACECTX_MS".into(), "300".into())])?;
    let traced = run(case, &app, Some(&profiler), &env)?;
    if plain.outcome.stdout != traced.outcome.stdout || plain.outcome.stdout.trim() != "requests ok"
    {
        return Err(format!(
            "the app's output changed under the profiler and hook: {:?} without, {:?} with",
            plain.outcome.stdout, traced.outcome.stdout
        )
        .into());
    }
    let sampling = record(&traced.records, "sampling")?;
    if sampling["method"] != source {
        return Err(format!("the sampler runs another source than {source}: {sampling}").into());
    }
    let writer = record(&traced.records, "trace-context")?;
    if writer["writer"] != "following" {
        return Err(format!("the startup hook does not follow Activity.Current: {writer}").into());
    }
    let requests = read_requests(&traced.ids)?;
    let mut roots: HashMap<&str, &Request> = HashMap::new();
    let mut children: HashMap<&str, &Request> = HashMap::new();
    for r in &requests {
        roots.insert(&r.root, r);
        children.insert(&r.child, r);
    }
    let pb = decode(traced.pprof.as_deref().ok_or("no pprof file")?)?;
    let mut per_step = [0u64; 5];
    let (mut idle, mut labelled) = (0u64, 0u64);
    let mut unlabelled_steps: Vec<(u8, u64)> = Vec::new();
    let cpu_col = pb.sample_types.iter().position(|(t, _)| t == "cpu");
    let (mut step_cpu, mut unlabelled_step_cpu) = (0i64, 0i64);
    for s in &pb.samples {
        let n = s.values[0] as u64;
        if let (Some(c), Some(_)) = (cpu_col, step_of(s)) {
            let ns = s.values.get(c).copied().unwrap_or(0);
            step_cpu += ns;
            if !s.labels.contains_key("span_id") {
                unlabelled_step_cpu += ns;
            }
        }
        let span = s.labels.get("span_id");
        let trace = s.labels.get("trace_id");
        let root = s.labels.get("local_root_span_id");
        if let Some(span) = span {
            labelled += n;
            // Every labelled sample names a span the app made, with its
            // own trace and local root.
            let (req, is_child) = match (roots.get(span.as_str()), children.get(span.as_str())) {
                (Some(r), _) => (*r, false),
                (None, Some(r)) => (*r, true),
                (None, None) => {
                    return Err(format!(
                        "a sample carries span {span}, which the app never made: {s:?}"
                    )
                    .into())
                }
            };
            // Every request ended before the profile was written: its root
            // span's name ("request", no route) is each sample's endpoint.
            if s.labels.get("trace_endpoint").map(String::as_str) != Some("request") {
                return Err(format!(
                    "span {span}'s sample has endpoint {:?}, want the root activity's name \"request\"",
                    s.labels.get("trace_endpoint")
                )
                .into());
            }
            if trace != Some(&req.trace) || root != Some(&req.root) {
                return Err(format!(
                    "span {span} of trace {} (root {}) was labelled trace {trace:?}, root {root:?}",
                    req.trace, req.root
                )
                .into());
            }
            if let Some(k) = step_of(s) {
                if is_child != (k == 4) {
                    return Err(format!(
                        "a Step{k} sample carries the {} span {span}: {:?}",
                        if is_child { "child" } else { "root" },
                        s.frames
                    )
                    .into());
                }
            }
        }
        if let Some(k) = step_of(s) {
            if span.is_none() {
                unlabelled_steps.push((k, n));
            }
            per_step[k as usize] += n;
        }
        if idle_pool_thread(s) {
            if span.is_some() {
                return Err(format!(
                    "an idle pool thread's sample carries span {span:?}: {:?}",
                    s.frames
                )
                .into());
            }
            idle += n;
        }
    }
    if !unlabelled_steps.is_empty() {
        return Err(format!(
            "samples inside the steps without a trace context (step, count): {unlabelled_steps:?}; \
             per step {:?}, labelled {labelled}; records {:?}",
            &per_step[1..],
            record(&traced.records, "trace-context")?
        )
        .into());
    }
    if source == "signals" && (step_cpu == 0 || unlabelled_step_cpu > 0) {
        return Err(format!(
            "CPU time of the steps: {step_cpu} ns, {unlabelled_step_cpu} ns of it without a trace context"
        )
        .into());
    }
    if per_step[1..].iter().any(|&n| n < 3) || idle == 0 {
        return Err(format!(
            "too few samples to judge: steps 1-4 {:?}, idle pool threads {idle}",
            &per_step[1..]
        )
        .into());
    }
    let stated = record(&traced.records, "trace-context")?["labelled_samples"]
        .as_u64()
        .unwrap_or(0);
    if stated < labelled {
        return Err(format!(
            "the profile holds {labelled} labelled samples, the sampler counted {stated}"
        )
        .into());
    }
    Ok(())
}

/// .NET Core 3.1 has no `Activity.CurrentChanged`: the hook says so, and
/// the app runs as it does without it.
fn unsupported(case: &Case<'_>) -> CaseResult {
    let app = case.app("hello")?;
    let profiler = case.profiler("sampler")?;
    let env = hook_env(case, &profiler)?;
    let plain = case.run(case.spec(&app).timeout(Duration::from_secs(60)))?;
    plain.check_exit()?;
    let mut spec = case
        .spec(&app)
        .profiler(profiler.clone())
        .env("CLRPROF_SAMPLER_RATE", "100")
        .timeout(Duration::from_secs(60));
    for (k, v) in &env {
        spec = spec.env(k, v);
    }
    let records_path = spec.work_dir.join("records.jsonl.jsonl");
    let traced = case.run(spec)?;
    traced.check_exit()?;
    if plain.stdout != traced.stdout {
        return Err(format!(
            "the app's output changed: {:?} without, {:?} with",
            plain.stdout, traced.stdout
        )
        .into());
    }
    let records = read_records(&records_path)?;
    let writer = record(&records, "trace-context")?;
    let detail = writer["detail"].as_str().unwrap_or("");
    if writer["writer"] != "unsupported" || !detail.contains("no CurrentChanged event") {
        return Err(format!("expected the hook's clear refusal, got {writer}").into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "trace context: every sample carries its request's span across await, idle pool threads none (signals)",
            across_await,
        )
        .only_on(
            &CONTEXT_LEGS,
            "the hook follows Activity.CurrentChanged, which .NET 7 brought (3.1 is checked for the hook's refusal); the trace-context legs are linux-x64",
        ),
        Scenario::new(
            "trace context: the suspension source labels its samples too",
            across_await_suspended,
        )
        .only_on(
            &["linux-x64-10.0"],
            "the signal source is the default on Linux and is proven on every trace-context leg; the suspension's reading of the record does not depend on the runtime's version",
        ),
        Scenario::new(
            "trace context: on .NET Core 3.1 the hook says Activity.CurrentChanged is missing",
            unsupported,
        )
        .only_on(&["linux-x64-3.1"], "the runtime without Activity.CurrentChanged"),
    ]
}
