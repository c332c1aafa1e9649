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

/// One request the app made: ids, and its spans' times (Unix ns).
struct Request {
    trace: String,
    root: String,
    child: String,
    root_time: (u64, u64),
    child_time: (u64, u64),
}

fn read_requests(path: &Path) -> Result<Vec<Request>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("the app wrote no ids to {}: {e}", path.display()))?;
    text.lines()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            let n = |s: &str| s.parse::<u64>().map_err(|_| format!("bad id line {l:?}"));
            match w[..] {
                ["request", t, r, c, rs, re, cs, ce] => Ok(Request {
                    trace: t.into(),
                    root: r.into(),
                    child: c.into(),
                    root_time: (n(rs)?, n(re)?),
                    child_time: (n(cs)?, n(ce)?),
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
    let app = case.app("tracectx")?;
    let profiler = case.profiler("sampler")?;
    let env = hook_env(case, &profiler)?;
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
    for s in &pb.samples {
        let n = s.values[0] as u64;
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
            "trace context: every sample carries its request's span across await, idle pool threads none",
            across_await,
        )
        .only_on(
            &CONTEXT_LEGS,
            "the hook follows Activity.CurrentChanged, which .NET 7 brought (3.1 is checked for the hook's refusal); the trace-context legs are linux-x64",
        ),
        Scenario::new(
            "trace context: OTLP profiles reach a receiver; linked samples lie inside the app's spans",
            otlp_profiles,
        )
        .only_on(
            &["linux-x64-10.0"],
            "the OTLP bytes do not depend on the runtime; the labels are proven on every trace-context leg by the pprof scenario",
        ),
        Scenario::new(
            "trace context: on .NET Core 3.1 the hook says Activity.CurrentChanged is missing",
            unsupported,
        )
        .only_on(&["linux-x64-3.1"], "the runtime without Activity.CurrentChanged"),
    ]
}

/// What an OTLP request says, read with the SDK's own message types.
pub(crate) fn decode_otlp(
    r: &clrprof_testing::http::Request,
) -> Result<clrprof_sampler::otlp::proto::ExportProfilesServiceRequest, String> {
    use prost::Message;
    use std::io::Read;
    let mut raw = Vec::new();
    let body: &[u8] = if r.header("content-encoding") == Some("gzip") {
        flate2::read::GzDecoder::new(&r.body[..])
            .read_to_end(&mut raw)
            .map_err(|e| format!("an OTLP body said gzip but is not: {e}"))?;
        &raw
    } else {
        &r.body
    };
    clrprof_sampler::otlp::proto::ExportProfilesServiceRequest::decode(body)
        .map_err(|e| format!("an OTLP body does not decode: {e}"))
}

/// The sampler example in OTLP mode sends its periods to a local receiver
/// (OpenTelemetry's environment), and the samples join the app's spans:
/// every linked sample's span is one the app made, with its trace, and each
/// of its timestamps lies inside that span.
fn otlp_profiles(case: &Case<'_>) -> CaseResult {
    use clrprof_sampler::otlp::proto::Value;
    use clrprof_testing::http::{Response, TestServer};
    let app = case.app("tracectx")?;
    let profiler = case.profiler("sampler")?;
    let receiver = TestServer::start(|_| Response::new(200, Vec::<u8>::new()))
        .map_err(|e| format!("cannot start the receiver: {e}"))?;
    let mut env = hook_env(case, &profiler)?;
    for (k, v) in [
        ("CLRPROF_SAMPLER_OTLP", "1".to_string()),
        ("CLRPROF_SAMPLER_CONTINUOUS_EVERY", "0.5".into()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
        ("OTEL_SERVICE_NAME", "tracectx-test".into()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment.name=ci".into(),
        ),
    ] {
        env.push((k.into(), v));
    }
    let traced = run(case, &app, Some(&profiler), &env)?;
    if traced.outcome.stdout.trim() != "requests ok" {
        return Err(format!("the app failed: {:?}", traced.outcome.stdout).into());
    }
    // The last `otlp` record: the counters at finish.
    let stats = traced
        .records
        .iter()
        .rev()
        .find(|r| r["event"] == "otlp")
        .ok_or("no otlp record")?;
    let requests = read_requests(&traced.ids)?;
    let spans: HashMap<&str, (&Request, (u64, u64))> = requests
        .iter()
        .flat_map(|r| {
            [
                (r.root.as_str(), (r, r.root_time)),
                (r.child.as_str(), (r, r.child_time)),
            ]
        })
        .collect();
    let posted: Vec<_> = receiver
        .requests()
        .into_iter()
        .filter(|r| r.method() == "POST" && r.target() == "/v1development/profiles")
        .collect();
    if posted.len() < 2 || stats["delivered"].as_u64() != Some(posted.len() as u64) {
        return Err(format!(
            "{} requests reached the receiver; the profiler says {stats}",
            posted.len()
        )
        .into());
    }
    let (mut linked, mut in_steps) = (0u64, 0u64);
    for r in &posted {
        if r.header("content-type") != Some("application/x-protobuf") {
            return Err(format!("OTLP request with headers {:?}", r.headers).into());
        }
        let req = decode_otlp(r)?;
        let d = req
            .dictionary
            .as_ref()
            .ok_or("a request without a dictionary")?;
        let st = |i: i32| {
            d.string_table
                .get(i as usize)
                .map(String::as_str)
                .unwrap_or("?")
        };
        let rp = req
            .resource_profiles
            .first()
            .ok_or("no resource profiles")?;
        let res: HashMap<&str, &Value> = rp
            .resource
            .as_ref()
            .map(|r| {
                r.attributes
                    .iter()
                    .filter_map(|a| Some((a.key.as_str(), a.value.as_ref()?.value.as_ref()?)))
                    .collect()
            })
            .unwrap_or_default();
        let s = |k: &str| match res.get(k) {
            Some(Value::StringValue(v)) => Some(v.as_str()),
            _ => None,
        };
        if s("service.name") != Some("tracectx-test")
            || s("deployment.environment.name") != Some("ci")
            || s("process.runtime.version") != Some(case.leg().version.as_str())
            || !matches!(res.get("process.pid"), Some(Value::IntValue(p)) if *p > 0)
            || s("host.name").is_none()
        {
            return Err(format!("resource attributes {res:?}").into());
        }
        for p in rp.scope_profiles.iter().flat_map(|s| &s.profiles) {
            let ty = p
                .sample_type
                .as_ref()
                .map(|t| st(t.type_strindex))
                .unwrap_or("?");
            let (from, to) = (p.time_unix_nano, p.time_unix_nano + p.duration_nano);
            for sample in &p.samples {
                if !sample.timestamps_unix_nano.is_empty()
                    && sample.timestamps_unix_nano.len() != sample.values.len()
                {
                    return Err("a sample with timestamps and values of different counts".into());
                }
                let frames: Vec<&str> = d
                    .stack_table
                    .get(sample.stack_index as usize)
                    .map(|s| {
                        s.location_indices
                            .iter()
                            .filter_map(|&l| d.location_table.get(l as usize)?.lines.first())
                            .filter_map(|line| d.function_table.get(line.function_index as usize))
                            .map(|f| st(f.name_strindex))
                            .collect()
                    })
                    .unwrap_or_default();
                let in_step = frames.iter().any(|f| f.starts_with("TraceCtx.Work::Step"));
                if sample.link_index == 0 {
                    if in_step && ty == "wall" {
                        return Err(
                            format!("a wall sample inside a step has no link: {frames:?}").into(),
                        );
                    }
                    continue;
                }
                let link = d
                    .link_table
                    .get(sample.link_index as usize)
                    .ok_or("a link index beyond the link table")?;
                let span = clrprof::context::hex(&link.span_id);
                let Some((req, (start, end))) = spans.get(span.as_str()) else {
                    return Err(
                        format!("a sample links span {span}, which the app never made").into(),
                    );
                };
                if clrprof::context::hex(&link.trace_id) != req.trace {
                    return Err(format!("span {span} linked with another trace").into());
                }
                let attr = |key: &str| {
                    sample.attribute_indices.iter().find_map(|&i| {
                        let a = d.attribute_table.get(i as usize)?;
                        (st(a.key_strindex) == key)
                            .then(|| a.value.as_ref()?.as_str())
                            .flatten()
                    })
                };
                if attr("span_id") != Some(span.as_str())
                    || attr("local_root_span_id") != Some(req.root.as_str())
                {
                    return Err(format!("span {span}'s attributes disagree with its link").into());
                }
                for &t in &sample.timestamps_unix_nano {
                    if t < *start || t > *end || t < from || t > to {
                        return Err(format!(
                            "a {ty} sample of span {span} at {t} lies outside the span [{start}, {end}] or its profile [{from}, {to}]"
                        )
                        .into());
                    }
                }
                linked += sample.values.len() as u64;
                in_steps += u64::from(in_step);
            }
        }
    }
    if linked < 20 || in_steps == 0 {
        return Err(
            format!("too few linked samples to judge: {linked} ({in_steps} in steps)").into(),
        );
    }
    Ok(())
}
