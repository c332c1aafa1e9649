//! Trace context end to end (issue 46, stage 3): an ASP.NET Core service
//! (`apps/traceweb.cs`) traced by the real OpenTelemetry .NET SDK from NuGet
//! (`clrprof_testing::packages::OPENTELEMETRY_SDK`), exporting its spans over
//! OTLP/HTTP protobuf to a receiver of the test, while the sampler example
//! (CPU and wall, `CLRPROF_SAMPLER_OTLP=1`) exports its profiles over OTLP
//! to the same receiver, and the SDK's startup hook follows
//! `Activity.Current`.
//!
//! Ground truth is the app's (its truth file, see the app's header): every
//! step's endpoint, time, thread CPU time and `Activity.Current`; the spans
//! are the ones the SDK exported. Checked:
//! - the service's output is the same as without the profiler and hook
//!   (and every answer the same);
//! - the profile's CPU by `trace_endpoint` beside the app's own CPU
//!   accounting of its steps per endpoint is printed, not asserted: a
//!   share of sampled CPU depends on scheduling (within 3.3 points in the
//!   first runs on 8.0, 10.0 and 11.0 on the 2 shared vCPUs; counting only
//!   the samples inside the steps it was 6 points off, since a sample's CPU
//!   is the thread's since its previous sample and a short step's often
//!   lands on the next, outside it);
//! - **join**: every sample with a span names a span of the SDK's export
//!   (the link table's trace and span, and the attributes), with its trace
//!   and local root, its `trace_endpoint` is the route of that span's
//!   root, and its time lies inside the span (or after its end only in its
//!   stop, or in the inline completion of the request's handler);
//! - **across await**: every sample inside a step (before the first await,
//!   after `Task.Yield`, inside `Task.Run`, after an awaited timer) carries
//!   the span of a request that ran that step, on some thread, at that
//!   moment; samples of idle pool threads carry none.

use crate::otlp_traces::{self, Span};
use crate::tracecontext::hook_env;
use clrprof_sampler::otlp::proto::Value as OtlpValue;
use clrprof_testing::csharp::CompileOptions;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::http::{Request, Response, TestServer};
use clrprof_testing::load::{self, LoadSpec};
use clrprof_testing::packages::OPENTELEMETRY_SDK;
use clrprof_testing::run::Profiler;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// The endpoints, in the order requests cycle through them.
const ENDPOINTS: [&str; 3] = ["light", "medium", "heavy"];

/// The frames of the four steps, by step number - 1.
const STEPS: [&str; 4] = [
    "TraceWeb.Steps::BeforeAwait",
    "TraceWeb.Steps::AfterYield",
    "TraceWeb.Steps::InTaskRun",
    "TraceWeb.Steps::AfterTimer",
];

/// The app's request handler's state machine (`TraceWeb.Service+<Handle>d__N`).
const HANDLER: &str = "TraceWeb.Service+<Handle>";

/// Frames of work that runs in an execution context captured earlier, and
/// of the switch between two contexts. Runtime facts: `Activity.Current`
/// is an `AsyncLocal`, so a task or continuation created during a request
/// (by the app or by the framework: seen, a `GroupBy(..).ToArray()` task on
/// .NET 11 10–25 ms after its request's end) runs with the request's
/// activity as `Activity.Current` after that activity stopped (a stop
/// moves `Activity.Current` only in its caller's context); and when a
/// context is switched, `ExecutionContext.OnValuesChanged` notifies each
/// `AsyncLocal` with a handler in turn, the app's own before the hook's in
/// some runs, so a sample between the two still reads the old record.
const CAPTURED_CONTEXT: [&str; 3] = [
    "System.Threading.ExecutionContext::OnValuesChanged",
    "System.Threading.ExecutionContext::RunInternal",
    "System.Threading.Tasks.Task::ExecuteWithThreadLocal",
];

/// Requests per run: every path once.
const REQUESTS: u64 = 150;

/// `OTEL_SERVICE_NAME` of the service: its traces' and its profiles'.
const SERVICE: &str = "traceweb";

/// The request targets: the three endpoints in turn, `n` from 0 to 99.
fn paths() -> Vec<String> {
    (0..REQUESTS as usize)
        .map(|j| format!("/{}?n={}", ENDPOINTS[j % 3], j / 3))
        .collect()
}

/// One step the app ran.
#[derive(Debug, Clone)]
struct Step {
    endpoint: String,
    k: usize,
    span: String,
    start: u64,
    end: u64,
    cpu: u64,
}

/// The app's truth file.
#[derive(Debug, Default)]
struct Truth {
    steps: Vec<Step>,
    /// Root span id → endpoint, per request.
    requests: HashMap<String, String>,
    /// Span id → the last time `Activity.Current` moved away from it.
    left: HashMap<String, u64>,
}

fn parse_truth(text: &str) -> Result<Truth, String> {
    let mut t = Truth::default();
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let n = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("bad truth line {line:?}"))
        };
        match w[..] {
            ["step", e, _n, k, _trace, span, start, end, cpu] => t.steps.push(Step {
                endpoint: e.into(),
                k: n(k)? as usize,
                span: span.into(),
                start: n(start)?,
                end: n(end)?,
                cpu: n(cpu)?,
            }),
            ["left", span, time] => {
                t.left.insert(span.into(), n(time)?);
            }
            ["request", e, _n, _trace, root] => {
                t.requests.insert(root.into(), e.into());
            }
            _ => return Err(format!("bad truth line {line:?}")),
        }
    }
    Ok(t)
}

/// One run of the service.
struct Served {
    /// The run's folder.
    dir: std::path::PathBuf,
    stdout: String,
    truth: Truth,
    received: Vec<Request>,
    records: Vec<Value>,
    bodies: HashMap<usize, Vec<u8>>,
}

/// Runs the service (the SDK exporting its spans), under `profiler` and the hook when
/// given, sends [`REQUESTS`] requests over 4 connections (every answer
/// checked against `expected`), lets the pool idle, and stops it.
fn serve(
    case: &Case<'_>,
    app: &std::path::Path,
    profiler: Option<&Profiler>,
    expected: &Arc<HashMap<usize, Vec<u8>>>,
) -> Result<Served, Verdict> {
    let receiver = TestServer::start(|_| Response::new(200, Vec::<u8>::new()))
        .map_err(|e| format!("cannot start the OTLP receiver: {e}"))?;
    let mut spec = case.spec(app).timeout(Duration::from_secs(120));
    let truth = spec.work_dir.join("truth.txt");
    for (k, v) in [
        ("TRACEWEB_TRUTH", truth.display().to_string()),
        ("OTEL_SERVICE_NAME", SERVICE.into()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment.name=ci".into(),
        ),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
        // The SDK's batch processor: often, and never dropping a span.
        ("OTEL_BSP_SCHEDULE_DELAY", "500".into()),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "65536".into()),
    ] {
        spec = spec.env(k, &v);
    }
    if let Some(p) = profiler {
        spec = spec.profiler(p.clone());
        for (k, v) in hook_env(case, p)? {
            spec = spec.env(&k, &v);
        }
        for (k, v) in [
            ("CLRPROF_SAMPLER_RATE", "500"),
            ("CLRPROF_SAMPLER_PROFILES", "cpu,wall"),
            ("CLRPROF_SAMPLER_OTLP", "1"),
            ("CLRPROF_SAMPLER_CONTINUOUS_EVERY", "2"),
        ] {
            spec = spec.env(k, v);
        }
    }
    let records_path = spec.work_dir.join("records.jsonl.jsonl");
    let (service, addr) = load::spawn_web_app(case.leg(), None, &spec, Duration::from_secs(60))?;
    let result = load::run(&LoadSpec {
        addr,
        paths: paths(),
        connections: 4,
        requests: REQUESTS,
        duration: Duration::from_secs(90),
        expected: expected.clone(),
    });
    // Every pool thread back in the pool for a while.
    std::thread::sleep(Duration::from_millis(500));
    let _ = load::get(addr, "/shutdown");
    let outcome = service.finish(Duration::from_secs(60))?;
    outcome.check_exit()?;
    let result = result?;
    if result.failed > 0 || result.mismatched > 0 || result.total_sent() != REQUESTS {
        return Err(format!(
            "{} of {REQUESTS} requests sent, {} failed, {} answers changed: {:?}",
            result.total_sent(),
            result.failed,
            result.mismatched,
            result.errors
        )
        .into());
    }
    let text = std::fs::read_to_string(&truth)
        .map_err(|e| format!("the app wrote no truth file {}: {e}", truth.display()))?;
    let records = if profiler.is_some() {
        let text = std::fs::read_to_string(&records_path)
            .map_err(|e| format!("no record file {}: {e}", records_path.display()))?;
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    } else {
        Vec::new()
    };
    println!(
        "    {}: service{} {REQUESTS} requests in {:.1} s, run {:.1} s",
        case.leg().name,
        if profiler.is_some() {
            " + sampler + hook"
        } else {
            ""
        },
        result.elapsed.as_secs_f64(),
        outcome.duration.as_secs_f64()
    );
    Ok(Served {
        dir: spec.work_dir.clone(),
        stdout: outcome.stdout,
        truth: parse_truth(&text)?,
        received: receiver.requests(),
        records,
        bodies: result.bodies,
    })
}

/// The spans the SDK exported (every `POST /v1/traces`).
fn exported_spans(received: &[Request]) -> Result<Vec<Span>, String> {
    let mut spans = Vec::new();
    for r in received
        .iter()
        .filter(|r| r.method() == "POST" && r.target() == "/v1/traces")
    {
        if r.header("content-type") != Some("application/x-protobuf") {
            return Err(format!("a trace export with headers {:?}", r.headers));
        }
        spans.extend(otlp_traces::decode(
            &r.body,
            r.header("content-encoding") == Some("gzip"),
        )?);
    }
    Ok(spans)
}

/// One observation of an OTLP profile sample: its value at its time.
#[derive(Debug, Clone)]
struct Observation {
    /// The profile's sample type (`cpu`, `wall`).
    kind: String,
    value: i64,
    time: u64,
    /// The time is its profile's start: the sampler times a sample drained
    /// more than a tick after it was taken, into a later period, at that
    /// period's start (clrprof-sampler's counting loop), not when taken.
    at_period_start: bool,
    /// The stack's function names.
    frames: Vec<String>,
    /// The linked span and trace.
    link: Option<(String, String)>,
    attrs: HashMap<String, String>,
}

impl Observation {
    fn step(&self) -> Option<usize> {
        (0..4).find(|k| self.frames.iter().any(|f| f == STEPS[*k]))
    }

    /// A pool thread idling in the pool: waiting for work in the pool's
    /// semaphore, running no work item.
    fn idle_pool_thread(&self) -> bool {
        let has = |prefix: &str| self.frames.iter().any(|f| f.starts_with(prefix));
        has("System.Threading.LowLevelLifoSemaphore::Wait")
            && has("System.Threading.PortableThreadPool+WorkerThread::WorkerThreadStart")
            && !has("System.Threading.ThreadPoolWorkQueue::Dispatch")
    }
}

/// Every observation of every profile the sampler posted, and how many
/// requests carried them.
fn observations(
    dir: &std::path::Path,
    received: &[Request],
    runtime_version: &str,
) -> Result<(Vec<Observation>, usize, usize), String> {
    let mut links_checked = 0;
    let mut out = Vec::new();
    let posted: Vec<&Request> = received
        .iter()
        .filter(|r| r.method() == "POST" && r.target() == "/v1development/profiles")
        .collect();
    for r in &posted {
        // Named once, as the Collector's receiver asks.
        let versions = r
            .headers
            .iter()
            .filter(|h| {
                h.split_once(':').is_some_and(|(k, _)| {
                    k.trim()
                        .eq_ignore_ascii_case(clrprof_sampler::otlp::DEVELOPMENT_VERSION_HEADER)
                })
            })
            .count();
        if versions != 1 || r.header(clrprof_sampler::otlp::DEVELOPMENT_VERSION_HEADER) != Some("1")
        {
            return Err(format!("a profiles request with headers {:?}", r.headers));
        }
        let req = decode_otlp(r)?;
        let d = req
            .dictionary
            .as_ref()
            .ok_or("a profiles request without a dictionary")?;
        // The link table as protoc reads it is the one the SDK's types read.
        let by_protoc = crate::otlp_protoc::links(dir, &uncompressed(r)?)?;
        let by_sdk: Vec<crate::otlp_protoc::Link> = d
            .link_table
            .iter()
            .map(|l| (l.trace_id.clone(), l.span_id.clone()))
            .collect();
        if by_protoc != by_sdk {
            return Err(format!(
                "a profiles request's link table: protoc reads {} links, the SDK's types {}: {:?} against {:?}",
                by_protoc.len(),
                by_sdk.len(),
                by_protoc.iter().take(3).collect::<Vec<_>>(),
                by_sdk.iter().take(3).collect::<Vec<_>>()
            ));
        }
        links_checked += by_sdk.len();
        // One resource, the process: OpenTelemetry's environment, as the
        // SDK's traces have it, and the runtime.
        let [rp] = &req.resource_profiles[..] else {
            return Err(format!(
                "{} resources in a profiles request",
                req.resource_profiles.len()
            ));
        };
        let attr = |k: &str| {
            rp.resource
                .as_ref()?
                .attributes
                .iter()
                .find(|a| a.key == k)?
                .value
                .as_ref()?
                .value
                .clone()
        };
        let text = |k: &str| match attr(k) {
            Some(OtlpValue::StringValue(v)) => Some(v),
            _ => None,
        };
        if text("service.name").as_deref() != Some(SERVICE)
            || text("deployment.environment.name").as_deref() != Some("ci")
            || text("process.runtime.version").as_deref() != Some(runtime_version)
            || !matches!(attr("process.pid"), Some(OtlpValue::IntValue(p)) if p > 0)
            || text("host.name").is_none()
        {
            return Err(format!("a profiles request's resource: {:?}", rp.resource));
        }
        let st = |i: i32| d.string_table.get(i as usize).cloned().unwrap_or_default();
        for p in req
            .resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .flat_map(|s| &s.profiles)
        {
            let kind = p
                .sample_type
                .as_ref()
                .map(|t| st(t.type_strindex))
                .unwrap_or_default();
            for s in &p.samples {
                let frames: Vec<String> = d
                    .stack_table
                    .get(s.stack_index as usize)
                    .map(|stack| {
                        stack
                            .location_indices
                            .iter()
                            .filter_map(|&l| d.location_table.get(l as usize)?.lines.first())
                            .filter_map(|line| d.function_table.get(line.function_index as usize))
                            .map(|f| st(f.name_strindex))
                            .collect()
                    })
                    .unwrap_or_default();
                let link = if s.link_index == 0 {
                    None
                } else {
                    let l = d
                        .link_table
                        .get(s.link_index as usize)
                        .ok_or("a link index beyond the link table")?;
                    Some((
                        clrprof::context::hex(&l.span_id),
                        clrprof::context::hex(&l.trace_id),
                    ))
                };
                let attrs: HashMap<String, String> = s
                    .attribute_indices
                    .iter()
                    .filter_map(|&i| {
                        let a = d.attribute_table.get(i as usize)?;
                        Some((st(a.key_strindex), a.value.as_ref()?.as_str()?.to_string()))
                    })
                    .collect();
                if s.timestamps_unix_nano.len() != s.values.len() {
                    return Err(format!(
                        "a {kind} sample with {} values and {} timestamps",
                        s.values.len(),
                        s.timestamps_unix_nano.len()
                    ));
                }
                let (from, to) = (p.time_unix_nano, p.time_unix_nano + p.duration_nano);
                if let Some(t) = s.timestamps_unix_nano.iter().find(|&&t| t < from || t > to) {
                    return Err(format!(
                        "a {kind} sample at {t} lies outside its profile's period [{from}, {to}]"
                    ));
                }
                for (&value, &time) in s.values.iter().zip(&s.timestamps_unix_nano) {
                    out.push(Observation {
                        kind: kind.clone(),
                        value,
                        time,
                        at_period_start: time == from,
                        frames: frames.clone(),
                        link: link.clone(),
                        attrs: attrs.clone(),
                    });
                }
            }
        }
    }
    Ok((out, posted.len(), links_checked))
}

/// What a profiles request says, read with the SDK's own message types.
pub(crate) fn decode_otlp(
    r: &Request,
) -> Result<clrprof_sampler::otlp::proto::ExportProfilesServiceRequest, String> {
    use prost::Message;
    clrprof_sampler::otlp::proto::ExportProfilesServiceRequest::decode(&uncompressed(r)?[..])
        .map_err(|e| format!("a profiles request does not decode: {e}"))
}

/// A request's body, gunzipped when it says gzip.
fn uncompressed(r: &Request) -> Result<Vec<u8>, String> {
    use std::io::Read;
    if r.header("content-encoding") != Some("gzip") {
        return Ok(r.body.clone());
    }
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_end(&mut raw)
        .map_err(|e| format!("a body said gzip but is not: {e}"))?;
    Ok(raw)
}

/// The span whose descendant `span` is, that has no parent among `spans`.
fn local_root<'a>(spans: &'a HashMap<String, Span>, span: &'a Span) -> &'a Span {
    let mut s = span;
    for _ in 0..64 {
        match s.parent.as_ref().and_then(|p| spans.get(p)) {
            Some(parent) => s = parent,
            None => break,
        }
    }
    s
}

/// The endpoint label the hook gives a local root: its `http.route`, else
/// its name.
fn label_of(root: &Span) -> &str {
    root.route.as_deref().unwrap_or(&root.name)
}

/// Everything checked of one profiled run (see the module docs).
fn check_run(case: &Case<'_>, run: &Served) -> CaseResult {
    let what = "under the profiler";
    let exported = exported_spans(&run.received)?;
    if let Some(s) = exported
        .iter()
        .find(|s| s.service.as_deref() != Some(SERVICE))
    {
        return Err(format!("{what}: a span of another service: {s:?}").into());
    }
    let spans: HashMap<String, Span> = otlp_traces::by_id(exported);
    let truth = &run.truth;
    // Every request's activities are among the spans (the SDK exported
    // them all), each request's root a server span of its route.
    for (root, endpoint) in &truth.requests {
        let Some(s) = spans.get(root) else {
            return Err(format!(
                "{what}: the root span {root} of a /{endpoint} request is not among the {} spans",
                spans.len()
            )
            .into());
        };
        if s.parent.is_some() || s.kind != 2 || s.route.as_deref() != Some(&format!("/{endpoint}"))
        {
            return Err(format!("{what}: /{endpoint}'s root span as exported: {s:?}").into());
        }
    }
    for st in &truth.steps {
        if !spans.contains_key(&st.span) {
            return Err(format!(
                "{what}: step {} ran in span {}, not among the spans",
                st.k, st.span
            )
            .into());
        }
    }
    // The sampler's account of its export: every period delivered.
    let (obs, posted, links_checked) = observations(&run.dir, &run.received, &case.leg().version)?;
    let stats = run
        .records
        .iter()
        .rev()
        .find(|r| r["event"] == "otlp")
        .ok_or("no otlp record")?;
    if posted < 1 || stats["delivered"].as_u64() != Some(posted as u64) {
        return Err(format!(
            "{what}: {posted} profile requests received; the profiler says {stats}"
        )
        .into());
    }
    let hook = run
        .records
        .iter()
        .find(|r| r["event"] == "trace-context")
        .ok_or("no trace-context record")?;
    if hook["writer"] != "following" {
        return Err(
            format!("{what}: the startup hook does not follow Activity.Current: {hook}").into(),
        );
    }

    // Steps by number, for the across-await check.
    let mut by_step: Vec<Vec<&Step>> = vec![Vec::new(); 4];
    for s in &truth.steps {
        if (1..=4).contains(&s.k) {
            by_step[s.k - 1].push(s);
        }
    }
    let (mut linked, mut idle, mut no_endpoint) = (0u64, 0u64, 0u64);
    let mut in_step = [0u64; 4];
    let (mut in_stop, mut in_completion, mut in_captured, mut late) =
        (0u64, 0u64, 0u64, Vec::new());
    let mut timed_at_start = 0u64;
    for o in &obs {
        let span_attr = o.attrs.get("span_id");
        if let Some((span, trace)) = &o.link {
            linked += 1;
            let Some(s) = spans.get(span) else {
                return Err(format!(
                    "{what}: a {} sample links span {span}, which is not among the spans",
                    o.kind
                )
                .into());
            };
            let root = local_root(&spans, s);
            if &s.trace != trace
                || span_attr != Some(span)
                || o.attrs.get("trace_id") != Some(trace)
                || o.attrs.get("local_root_span_id") != Some(&root.span)
            {
                return Err(format!(
                    "{what}: a sample of span {span} (trace {}, root {}) carries link trace {trace} and attributes {:?}",
                    s.trace, root.span, o.attrs
                )
                .into());
            }
            match o.attrs.get("trace_endpoint") {
                Some(e) if e != label_of(root) => {
                    return Err(format!(
                    "{what}: a sample of span {span} has trace_endpoint {e:?}; its root {} is {:?}",
                    root.span,
                    label_of(root)
                )
                    .into())
                }
                Some(_) => {}
                None => no_endpoint += 1,
            }
            if o.time < s.start {
                return Err(format!(
                    "{what}: a {} sample of span {span} at {} lies before the span's start {}",
                    o.kind, o.time, s.start
                )
                .into());
            }
            // After the span's end only inside its own stop: an activity
            // stamps its end, then runs its stop callbacks, then moves
            // Activity.Current to its parent.
            if o.time > s.end {
                match truth.left.get(span) {
                    Some(&left) if o.time <= left => in_stop += 1,
                    // Still in the inline completion of the request's
                    // handler: the continuations run there in execution
                    // contexts captured before the stop, where
                    // `Activity.Current` is still the request's activity
                    // (a stop moves `Activity.Current` only in the
                    // context of its caller).
                    _ if o.frames.iter().any(|f| f.starts_with(HANDLER)) => in_completion += 1,
                    // Work in a context captured during the request, or the
                    // switch of contexts itself (see `CAPTURED_CONTEXT`).
                    _ if o
                        .frames
                        .iter()
                        .any(|f| CAPTURED_CONTEXT.iter().any(|c| f.starts_with(c))) =>
                    {
                        in_captured += 1
                    }
                    left => late.push(format!(
                        "{} ns after the end of {} ({}, {} to {}, request {:?} steps {:?}), Activity.Current left it at {left:?}, sample at {} {}: {:?}",
                        o.time - s.end,
                        s.name,
                        s.span,
                        s.start,
                        s.end,
                        truth.requests.get(span),
                        truth.steps.iter().filter(|st| st.span == *span).map(|st| (st.k, st.start, st.end)).collect::<Vec<_>>(),
                        o.kind,
                        o.time,
                        o.frames.iter().take(12).collect::<Vec<_>>()
                    )),
                }
            }
        } else if span_attr.is_some() {
            return Err(format!(
                "{what}: a sample with span attributes and no link: {:?}",
                o.attrs
            )
            .into());
        }
        if let Some(k) = o.step() {
            in_step[k] += 1;
            let Some((span, _)) = &o.link else {
                return Err(format!(
                    "{what}: a {} sample inside {} carries no span: {:?}",
                    o.kind, STEPS[k], o.frames
                )
                .into());
            };
            let running = by_step[k]
                .iter()
                .any(|s| &s.span == span && s.start <= o.time && o.time <= s.end);
            if !running && o.at_period_start {
                timed_at_start += 1;
            } else if !running {
                let candidates: Vec<&str> = by_step[k]
                    .iter()
                    .filter(|s| s.start <= o.time && o.time <= s.end)
                    .map(|s| s.span.as_str())
                    .collect();
                return Err(format!(
                    "{what}: a {} sample inside {} at {} carries span {span}, which was not in that step then (spans in it then: {candidates:?})",
                    o.kind, STEPS[k], o.time
                )
                .into());
            }
        }
        if o.idle_pool_thread() {
            if o.link.is_some() {
                return Err(format!(
                    "{what}: an idle pool thread's {} sample at {} carries a span: {:?}, stack {:?}",
                    o.kind, o.time, o.attrs, o.frames
                )
                .into());
            }
            idle += 1;
        }
    }
    if !late.is_empty() {
        return Err(format!(
            "{what}: {} of {linked} linked samples lie after their span's end and after Activity.Current left it: {late:?}",
            late.len()
        )
        .into());
    }
    if in_step.iter().any(|&n| n < 5) || idle == 0 || linked < 100 {
        return Err(format!(
            "{what}: too few samples to judge: per step {in_step:?}, idle pool threads {idle}, linked {linked}"
        )
        .into());
    }

    // The split: the app's own CPU per endpoint against the CPU profile's.
    let mut app_cpu: BTreeMap<&str, u64> = BTreeMap::new();
    for s in &truth.steps {
        *app_cpu.entry(s.endpoint.as_str()).or_default() += s.cpu;
    }
    // Each endpoint's label is its route, from its requests' roots.
    let mut labels: BTreeMap<&str, &str> = BTreeMap::new();
    for (root, endpoint) in &truth.requests {
        if let Some(s) = spans.get(root) {
            let l = label_of(s);
            if l != format!("/{endpoint}") {
                return Err(
                    format!("{what}: a /{endpoint} request's root span is labelled {l:?}").into(),
                );
            }
            labels.insert(endpoint.as_str(), l);
        }
    }
    let mut profile_cpu: BTreeMap<&str, i64> = BTreeMap::new();
    for o in obs.iter().filter(|o| o.kind == "cpu") {
        let endpoint = o
            .attrs
            .get("trace_endpoint")
            .and_then(|l| labels.iter().find(|(_, v)| **v == l).map(|(e, _)| *e));
        if let Some(e) = endpoint {
            *profile_cpu.entry(e).or_default() += o.value;
        }
    }
    let app_total: u64 = app_cpu.values().sum();
    let profile_total: i64 = profile_cpu.values().sum();
    let mut split = Vec::new();
    for e in ENDPOINTS {
        let a = 100.0 * *app_cpu.get(e).unwrap_or(&0) as f64 / app_total.max(1) as f64;
        let p = 100.0 * *profile_cpu.get(e).unwrap_or(&0) as f64 / profile_total.max(1) as f64;
        split.push((e, a, p));
    }
    let by = "trace_endpoint";
    let shown: Vec<String> = split
        .iter()
        .map(|(e, a, p)| format!("{e} {p:.1} % (app {a:.1} %)"))
        .collect();
    if profile_total <= 0 {
        return Err(format!("{what}: no CPU sample carries an endpoint").into());
    }
    println!(
        "      {} {what}: CPU by {by} (not asserted): {}; {linked} linked observations ({in_stop} inside their span's stop, after its end was stamped; {in_completion} after it in the inline completion of the request's handler; {in_captured} after it in work that runs in a context captured during the request, or in the switch of contexts; {no_endpoint} before their request's endpoint was named), {} observations inside the steps, every one with the span of a request in that step then ({timed_at_start} timed at their profile's start, not checked), per step {in_step:?}; {idle} of idle pool threads, none with a span; {links_checked} links read alike by protoc; labels {labels:?}",
        case.leg().name,
        shown.join(", "),
        in_step.iter().sum::<u64>()
    );
    Ok(())
}

fn end_to_end(case: &Case<'_>) -> CaseResult {
    let app = case.app_with_packages(
        "traceweb",
        CompileOptions {
            aspnetcore: true,
            optimize: true,
            ..Default::default()
        },
        &OPENTELEMETRY_SDK,
    )?;
    let profiler = case.profiler("sampler")?;
    let reference = serve(case, &app, None, &Arc::default())?;
    if reference.bodies.len() != REQUESTS as usize
        || !reference.stdout.contains("every step in its activity")
    {
        return Err(format!(
            "the run without the profiler: {} paths answered, output {:?}",
            reference.bodies.len(),
            reference.stdout
        )
        .into());
    }
    let expected = Arc::new(reference.bodies);
    let run = serve(case, &app, Some(&profiler), &expected)?;
    if run.stdout != reference.stdout {
        return Err(format!(
            "the service's output changed under the profiler and hook: {:?}, without: {:?}",
            run.stdout, reference.stdout
        )
        .into());
    }
    check_run(case, &run)
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "trace context end to end: an ASP.NET Core service with the OpenTelemetry .NET SDK, OTLP traces and profiles to one receiver: every sample in a request carries its exported span, trace and route, across await; none outside",
        end_to_end,
    )
    .only_on(
        &["linux-x64-8.0", "linux-x64-10.0", "linux-x64-11.0"],
        "the OpenTelemetry .NET SDK 1.20 and ASP.NET Core: provisioned on linux-x64 .NET 8, 10 and 11 (the issue's legs; 9.0 has no ASP.NET Core here)",
    )]
}
