//! `cargo xtask bench server`: what profiling costs an ASP.NET Core service
//! in requests per second and tail latency, beside the tools a team would
//! use instead.
//!
//! The service is `tests/apps/server.cs` (Kestrel on 127.0.0.1: JSON, an
//! async endpoint awaiting a timer and a `SemaphoreSlim`, allocate-and-sort,
//! an exception on 1 % of requests, a contended lock; its own account of
//! requests and exceptions). The load generator is
//! [`clrprof_testing::load`]: closed loop, `--connections` keep-alive
//! connections (default 16), every answer compared with the same request's
//! answer in a run without a profiler.
//!
//! Configurations, alternating, `--runs` rounds (default 3) in one
//! invocation, per leg (`--leg`, repeatable; default linux-x64-10.0 and
//! linux-x64-11.0):
//! 1. `none`: no profiler;
//! 2. `sampler`: the sampler example, CPU and wall at 100 Hz (by signal on
//!    Linux); `sampler-suspend`: the same with the runtime's suspension as
//!    its source (`CLRPROF_SAMPLER_SOURCE=suspend-runtime`);
//! 3. `alloc` and `alloc-heap`: the sampler's allocation profile alone, and
//!    with the live heap (weak handles on the sampled allocations, checked
//!    at every collection): the live heap's cost is `alloc-heap` against
//!    `alloc`;
//! 4. `continuous`: the sampler with every production profile (cpu, wall,
//!    alloc, lock, exception), continuous mode uploading every
//!    `--period` seconds (default 5) to a local endpoint;
//! 5. `wrapper`: method-wrapper on every action method and middleware
//!    `Invoke` of the service, a Rust handler timing each call;
//! 6. `call-tracer`: ELT hooks on every JIT-compiled method, counting
//!    (inlining off), for reference;
//! 7. `dotnet-trace`: `dotnet-trace collect` with its default profile,
//!    attached to the service; `dotnet-counters`: `dotnet-counters collect`
//!    of the runtime counters. Both from NuGet (pinned by SHA-512, run with
//!    the leg's `dotnet exec`).
//!
//! A run: start the service, attach the tool (7), `--warmup` seconds of
//! load (default 12: tiered compilation must be done before the measured
//! phase; with 3 s the service without a profiler ran at 6 700 req/s and
//! any profiler that delays tiering, the sampler's suspensions or the
//! wrapper's JIT callbacks, measured 8-10 % slower, all of it warm-up;
//! with 12 s, 8 200 req/s and within 1 %), then the measured phase: `--seconds` (default 8) or
//! `--requests` (default 2 000 000) requests, whichever ends first. Then the
//! service's account must equal what was sent (requests per endpoint,
//! exceptions thrown and caught, no failed self-check) and no answer may
//! have changed, or the benchmark fails. Measured: requests per second,
//! p50/p99/p99.9 latency, the service's CPU time in the measured phase
//! (`/proc/<pid>/stat`; the peer tool's own process apart), peak RSS
//! (`VmHWM`). Medians per configuration; ratios against `none` of the same
//! leg and invocation. Writes `target/bench/server.json` and the chart
//! `target/bench/server.svg` (throughput and p99 per configuration).
//! `--only NAME` (repeatable) runs only those configurations beside `none`.

use crate::measure::{median, Setup};
use clrprof_testing::http::{Response, TestServer};
use clrprof_testing::load::{self, LoadResult, LoadSpec};
use clrprof_testing::nuget::{Feed, Pin, Quiet};
use clrprof_testing::run::{Profiler, RunSpec};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The peer tools, pinned (SHA-512 of the `.nupkg`, base64).
const DOTNET_TRACE: Pin = clrprof_testing::peer_tools::DOTNET_TRACE;
const DOTNET_COUNTERS: Pin = clrprof_testing::peer_tools::DOTNET_COUNTERS;

/// A chart row: configuration, median req/s, median p99 (ms).
type Row = (String, f64, f64);
/// A leg's rows.
type LegRows = (String, Vec<Row>);

/// The endpoints, in the order requests cycle through them.
const ENDPOINTS: [&str; 5] = ["json", "sort", "async", "exception", "lock"];

/// `CLRPROF_WRAP_FILTER`: every action method and middleware `Invoke`.
const WRAP_FILTER: &str =
    "Shop.Endpoints::,Shop.Middleware.Accounting::Invoke,Shop.Middleware.RequestId::Invoke";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tool {
    Trace,
    Counters,
}

/// How one configuration runs the service.
#[derive(Clone)]
enum Kind {
    None,
    /// A workspace profiler package and its environment.
    Profiler(&'static str, Vec<(&'static str, String)>),
    /// A peer tool attached to the service.
    Peer(Tool),
}

struct Config {
    name: &'static str,
    label: &'static str,
    kind: Kind,
}

fn configs(upload_url: &str, period: f64) -> Vec<Config> {
    vec![
        Config {
            name: "none",
            label: "no profiler",
            kind: Kind::None,
        },
        Config {
            name: "sampler",
            label: "sampler cpu+wall 100 Hz",
            kind: Kind::Profiler(
                "sampler",
                vec![
                    ("CLRPROF_SAMPLER_RATE", "100".into()),
                    ("CLRPROF_SAMPLER_PROFILES", "cpu,wall".into()),
                ],
            ),
        },
        Config {
            name: "sampler-suspend",
            label: "sampler cpu+wall 100 Hz, runtime suspension",
            kind: Kind::Profiler(
                "sampler",
                vec![
                    ("CLRPROF_SAMPLER_RATE", "100".into()),
                    ("CLRPROF_SAMPLER_PROFILES", "cpu,wall".into()),
                    ("CLRPROF_SAMPLER_SOURCE", "suspend-runtime".into()),
                ],
            ),
        },
        Config {
            name: "alloc",
            label: "sampler, allocation profile",
            kind: Kind::Profiler(
                "sampler",
                vec![("CLRPROF_SAMPLER_PROFILES", "alloc".into())],
            ),
        },
        Config {
            name: "alloc-heap",
            label: "sampler, allocation profile and live heap",
            kind: Kind::Profiler(
                "sampler",
                vec![("CLRPROF_SAMPLER_PROFILES", "alloc,heap".into())],
            ),
        },
        Config {
            name: "continuous",
            label: "sampler, all profiles, continuous",
            kind: Kind::Profiler(
                "sampler",
                vec![
                    ("CLRPROF_SAMPLER_RATE", "100".into()),
                    (
                        "CLRPROF_SAMPLER_PROFILES",
                        "cpu,wall,alloc,lock,exception".into(),
                    ),
                    ("CLRPROF_SAMPLER_CONTINUOUS_URL", upload_url.to_string()),
                    ("CLRPROF_SAMPLER_CONTINUOUS_EVERY", period.to_string()),
                ],
            ),
        },
        Config {
            name: "wrapper",
            label: "method-wrapper, timing",
            kind: Kind::Profiler(
                "method-wrapper",
                vec![
                    ("CLRPROF_WRAP_FILTER", WRAP_FILTER.into()),
                    ("CLRPROF_WRAP_TIME", "1".into()),
                ],
            ),
        },
        Config {
            name: "call-tracer",
            label: "call-tracer (every method)",
            kind: Kind::Profiler("call-tracer", Vec::new()),
        },
        Config {
            name: "dotnet-trace",
            label: "dotnet-trace collect",
            kind: Kind::Peer(Tool::Trace),
        },
        Config {
            name: "dotnet-counters",
            label: "dotnet-counters collect",
            kind: Kind::Peer(Tool::Counters),
        },
    ]
}

struct Options {
    legs: Vec<String>,
    runs: usize,
    seconds: f64,
    warmup: f64,
    requests: u64,
    connections: usize,
    period: f64,
    only: Vec<String>,
}

fn options(args: &[String]) -> crate::Result<Options> {
    let mut o = Options {
        legs: Vec::new(),
        runs: 3,
        seconds: 8.0,
        warmup: 12.0,
        requests: 2_000_000,
        connections: 16,
        period: 5.0,
        only: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("bench server: `{a}` needs a value"))?;
        match a.as_str() {
            "--leg" => o.legs.push(value.clone()),
            "--runs" => o.runs = value.parse()?,
            "--seconds" => o.seconds = value.parse()?,
            "--warmup" => o.warmup = value.parse()?,
            "--requests" => o.requests = value.parse()?,
            "--connections" => o.connections = value.parse()?,
            "--period" => o.period = value.parse()?,
            "--only" => o.only.push(value.clone()),
            other => return Err(format!("bench server: unknown option `{other}`").into()),
        }
    }
    if o.legs.is_empty() {
        o.legs = vec!["linux-x64-10.0".into(), "linux-x64-11.0".into()];
    }
    if o.runs < 1 || o.seconds <= 0.0 || o.connections == 0 {
        return Err("bench server: --runs, --seconds and --connections must be positive".into());
    }
    Ok(o)
}

/// The request targets (request `i` takes `paths()[i % 1000]`): the five
/// endpoints in turn, `n` from 0 to 199 (1 % of the exception endpoint's
/// requests throw).
fn paths() -> Vec<String> {
    (0..1000)
        .map(|j| format!("/{}?n={}", ENDPOINTS[j % 5], j / 5))
        .collect()
}

/// The figures of one run.
#[derive(Clone, Debug, Default)]
struct Figures {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    /// The service's CPU time in the measured phase, s.
    cpu_s: f64,
    /// The service's CPU time per request, µs.
    cpu_us_per_request: f64,
    /// The peer tool's own CPU time in the measured phase, s.
    tool_cpu_s: f64,
    peak_rss_mib: f64,
    requests: u64,
    /// The sampler's account of itself (its `samples` record, whole run):
    /// ticks, threads, and per tick the µs of each phase.
    sampler: Option<Value>,
}

impl Figures {
    fn to_json(&self) -> Value {
        json!({
            "rps": self.rps,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "p999_ms": self.p999_ms,
            "cpu_s": self.cpu_s,
            "cpu_us_per_request": self.cpu_us_per_request,
            "tool_cpu_s": self.tool_cpu_s,
            "peak_rss_mib": self.peak_rss_mib,
            "requests": self.requests,
            "sampler": self.sampler,
        })
    }
}

/// The peer tools, unpacked, per tool.
struct PeerTools {
    trace: PathBuf,
    counters: PathBuf,
}

pub fn main(args: &[String]) -> crate::Result {
    if args.first().is_some_and(|a| a == "--replot") {
        return replot();
    }
    let o = options(args)?;
    let started = Instant::now();
    let endpoint = TestServer::start(|_| Response::new(200, ""))?;
    let url = format!("{}/ingest?name=shop.server", endpoint.url());
    let all = configs(&url, o.period);
    let chosen: Vec<&Config> = all
        .iter()
        .filter(|c| c.name == "none" || o.only.is_empty() || o.only.iter().any(|n| n == c.name))
        .collect();
    let mut legs_json = serde_json::Map::new();
    let mut chart_rows: Vec<LegRows> = Vec::new();
    for leg_name in &o.legs {
        let setup = Setup::open("server", leg_name)?;
        if !setup.leg.has_aspnetcore() {
            return Err(format!(
                "bench server: {leg_name} has no ASP.NET Core (provisioned on linux-x64-10.0 and 11.0)"
            )
            .into());
        }
        let app = compile_service(&setup)?;
        let mut profilers: HashMap<&str, Profiler> = HashMap::new();
        for c in &chosen {
            if let Kind::Profiler(package, _) = &c.kind {
                if !profilers.contains_key(package) {
                    println!("==> build {package} (release)");
                    profilers.insert(package, setup.release_profiler(package)?);
                }
            }
        }
        let tools = if chosen.iter().any(|c| matches!(c.kind, Kind::Peer(_))) {
            Some(peer_tools(&setup)?)
        } else {
            None
        };
        let (leg_json, rows) = bench_leg(&setup, &o, &chosen, &app, &profilers, tools.as_ref())?;
        legs_json.insert(leg_name.clone(), leg_json);
        chart_rows.push((leg_name.clone(), rows));
    }
    let uploads = endpoint.requests().len();
    drop(endpoint);
    let out_dir = crate::workspace::root().join("target/bench");
    let json = json!({
        "legs": legs_json,
        "configurations": chosen.iter().map(|c| json!({"name": c.name, "label": c.label})).collect::<Vec<_>>(),
        "runs": o.runs,
        "seconds": o.seconds,
        "warmup": o.warmup,
        "connections": o.connections,
        "continuous_period_s": o.period,
        "uploads_received": uploads,
        "peer_tools": [DOTNET_TRACE.to_string(), DOTNET_COUNTERS.to_string()],
        "bench_seconds": started.elapsed().as_secs_f64(),
    });
    let path = out_dir.join("server.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")?;
    println!("wrote {}", path.display());
    let labels: Vec<(&str, &str)> = chosen.iter().map(|c| (c.name, c.label)).collect();
    let svg = out_dir.join("server.svg");
    chart(&svg, &labels, &chart_rows)?;
    println!("wrote {}", svg.display());
    println!(
        "bench server: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn compile_service(setup: &Setup) -> crate::Result<PathBuf> {
    let compiler = setup
        .runtimes
        .compiler()
        .ok_or("no C# compiler (cargo xtask provision)")?;
    let options = clrprof_testing::csharp::CompileOptions {
        optimize: true,
        aspnetcore: true,
        ..Default::default()
    };
    let compiled = clrprof_testing::csharp::compile(
        &compiler,
        &setup.root.join("tests/apps/server.cs"),
        &setup.cache,
        options,
        &setup.leg,
    )?;
    Ok(compiled.for_leg(&setup.leg)?)
}

/// One leg: every configuration, alternating, `o.runs` rounds; the JSON of
/// the leg and the chart's rows (name, median req/s, median p99 ms).
fn bench_leg(
    setup: &Setup,
    o: &Options,
    chosen: &[&Config],
    app: &Path,
    profilers: &HashMap<&str, Profiler>,
    tools: Option<&PeerTools>,
) -> crate::Result<(Value, Vec<Row>)> {
    let leg = &setup.leg;
    println!(
        "==> server on {}: {} configurations x {} rounds, {} s warm-up + {} s measured each, {} connections",
        leg.name, chosen.len(), o.runs, o.warmup, o.seconds, o.connections
    );
    let mut expected: Arc<HashMap<usize, Vec<u8>>> = Arc::default();
    let mut runs: Vec<Vec<Figures>> = vec![Vec::new(); chosen.len()];
    for round in 0..o.runs {
        for (i, c) in chosen.iter().enumerate() {
            let work = setup
                .out_dir
                .join("runs/server")
                .join(&leg.name)
                .join(c.name)
                .join(round.to_string());
            if work.exists() {
                std::fs::remove_dir_all(&work)?;
            }
            std::fs::create_dir_all(&work)?;
            let (figures, bodies) = run_once(setup, o, c, app, profilers, tools, &work, &expected)
                .map_err(|e| format!("{} on {}, round {round}: {e}", c.name, leg.name))?;
            if expected.is_empty() {
                expected = Arc::new(bodies);
            }
            println!(
                "  round {round} {:<16} {:>7.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  p99.9 {:>6.2} ms  cpu {:>5.1} us/req  rss {:>4.0} MiB{}",
                c.name,
                figures.rps,
                figures.p50_ms,
                figures.p99_ms,
                figures.p999_ms,
                figures.cpu_us_per_request,
                figures.peak_rss_mib,
                if figures.tool_cpu_s > 0.0 {
                    format!("  tool cpu {:.2} s", figures.tool_cpu_s)
                } else {
                    String::new()
                }
            );
            runs[i].push(figures);
        }
    }
    let med = |i: usize, f: fn(&Figures) -> f64| {
        let mut v: Vec<f64> = runs[i].iter().map(f).collect();
        median(&mut v)
    };
    let base_rps = med(0, |f| f.rps);
    let base_p99 = med(0, |f| f.p99_ms);
    let base_cpu = med(0, |f| f.cpu_us_per_request);
    let mut configs = serde_json::Map::new();
    let mut rows = Vec::new();
    println!(
        "\n{}: medians of {} runs (ratio to no profiler)",
        leg.name, o.runs
    );
    for (i, c) in chosen.iter().enumerate() {
        let (rps, p50, p99, p999) = (
            med(i, |f| f.rps),
            med(i, |f| f.p50_ms),
            med(i, |f| f.p99_ms),
            med(i, |f| f.p999_ms),
        );
        let (cpu, rss, tool) = (
            med(i, |f| f.cpu_us_per_request),
            med(i, |f| f.peak_rss_mib),
            med(i, |f| f.tool_cpu_s),
        );
        println!(
            "  {:<16} {:>7.0} req/s ({:.3})  p50 {:>6.2} ms  p99 {:>6.2} ms ({:.3})  p99.9 {:>6.2} ms  cpu {:>5.1} us/req ({:.3})  rss {:>4.0} MiB",
            c.name,
            rps,
            rps / base_rps,
            p50,
            p99,
            p99 / base_p99,
            p999,
            cpu,
            cpu / base_cpu,
            rss
        );
        configs.insert(
            c.name.to_string(),
            json!({
                "label": c.label,
                "median": {
                    "rps": rps, "p50_ms": p50, "p99_ms": p99, "p999_ms": p999,
                    "cpu_us_per_request": cpu, "peak_rss_mib": rss, "tool_cpu_s": tool,
                },
                "ratio": {
                    "throughput": rps / base_rps,
                    "throughput_loss": 1.0 - rps / base_rps,
                    "p99": p99 / base_p99,
                    "cpu_per_request": cpu / base_cpu,
                },
                "runs": runs[i].iter().map(Figures::to_json).collect::<Vec<_>>(),
            }),
        );
        rows.push((c.name.to_string(), rps, p99));
    }
    Ok((
        json!({"runtime": leg.version, "configurations": configs}),
        rows,
    ))
}

/// One run of one configuration (see the module docs): its figures and
/// the answers' bodies.
#[allow(clippy::too_many_arguments)]
fn run_once(
    setup: &Setup,
    o: &Options,
    c: &Config,
    app: &Path,
    profilers: &HashMap<&str, Profiler>,
    tools: Option<&PeerTools>,
    work: &Path,
    expected: &Arc<HashMap<usize, Vec<u8>>>,
) -> crate::Result<(Figures, HashMap<usize, Vec<u8>>)> {
    let mut spec = RunSpec::new(app, work).timeout(Duration::from_secs(600));
    if let Kind::Profiler(package, env) = &c.kind {
        let p = profilers
            .get(package)
            .ok_or_else(|| format!("{package} not built"))?;
        spec = spec.profiler(p.clone());
        for (k, v) in env {
            spec = spec.env(k, v);
        }
    }
    let (service, addr) = load::spawn_web_app(
        &setup.leg,
        setup.runtimes.wine(),
        &spec,
        Duration::from_secs(120),
    )?;
    let pid = service.id();
    let mut tool = match (&c.kind, tools) {
        (Kind::Peer(t), Some(tools)) => Some(attach(setup, *t, tools, pid, work)?),
        (Kind::Peer(_), None) => return Err("peer tools not prepared".into()),
        _ => None,
    };
    let result = drive(o, addr, pid, tool.as_ref().map(|t| t.id()), expected);
    let stats = load::get(addr, "/stats");
    let rss = peak_rss_mib(pid);
    // A tool that does not end its session within a minute of Ctrl+C (seen
    // now and then with dotnet-trace on a loaded machine) ends when the
    // service exits.
    let stopped = match tool.as_mut() {
        Some(t) => stop_tool(t, c.name, work, Duration::from_secs(60))?,
        None => true,
    };
    let _ = load::get(addr, "/shutdown");
    let outcome = service.finish(Duration::from_secs(120))?;
    if let Some(t) = tool.as_mut().filter(|_| !stopped) {
        println!(
            "    ({} did not stop within 60 s of SIGINT; the service's exit ended it)",
            c.name
        );
        if !wait_tool(t, c.name, work, Duration::from_secs(60))? {
            let _ = t.kill();
            let _ = t.wait();
            return Err(format!("{} did not stop, even when the service exited", c.name).into());
        }
    }
    outcome.check_exit()?;
    let (warm, measured, cpu_s, tool_cpu_s) = result?;
    let (status, stats) = stats?;
    if status != 200 {
        return Err(format!("/stats: HTTP {status}").into());
    }
    let account: Value = serde_json::from_str(&stats)?;
    check_account(&account, &warm, &measured)?;
    let requests = measured.ok;
    let figures = Figures {
        rps: measured.throughput(),
        p50_ms: measured.percentile_us(0.50) / 1000.0,
        p99_ms: measured.percentile_us(0.99) / 1000.0,
        p999_ms: measured.percentile_us(0.999) / 1000.0,
        cpu_s,
        cpu_us_per_request: cpu_s * 1e6 / requests.max(1) as f64,
        tool_cpu_s,
        peak_rss_mib: rss,
        requests,
        sampler: sampler_phases(&work.join("records.jsonl.jsonl")),
    };
    let mut bodies = warm.bodies;
    bodies.extend(measured.bodies);
    Ok((figures, bodies))
}

/// The warm-up and the measured phase: both results, the service's and the
/// tool's CPU seconds in the measured phase.
fn drive(
    o: &Options,
    addr: std::net::SocketAddr,
    pid: u32,
    tool: Option<u32>,
    expected: &Arc<HashMap<usize, Vec<u8>>>,
) -> crate::Result<(LoadResult, LoadResult, f64, f64)> {
    let spec = LoadSpec {
        addr,
        paths: paths(),
        connections: o.connections,
        requests: o.requests,
        duration: Duration::from_secs_f64(o.warmup),
        expected: expected.clone(),
    };
    let warm = load::run(&spec)?;
    let (cpu0, tool0) = (cpu_seconds(pid)?, tool.map_or(Ok(0.0), cpu_seconds)?);
    let measured = load::run(&LoadSpec {
        duration: Duration::from_secs_f64(o.seconds),
        ..spec
    })?;
    let (cpu1, tool1) = (cpu_seconds(pid)?, tool.map_or(Ok(0.0), cpu_seconds)?);
    for r in [&warm, &measured] {
        if r.failed > 0 || r.mismatched > 0 {
            return Err(format!(
                "{} failed and {} changed answers: {:?}",
                r.failed, r.mismatched, r.errors
            )
            .into());
        }
    }
    Ok((warm, measured, cpu1 - cpu0, tool1 - tool0))
}

/// The service's account must equal what the two phases sent.
fn check_account(account: &Value, warm: &LoadResult, measured: &LoadResult) -> crate::Result {
    let paths = paths();
    let sent: Vec<u64> = warm
        .sent
        .iter()
        .zip(&measured.sent)
        .map(|(a, b)| a + b)
        .collect();
    for e in ENDPOINTS {
        let n: u64 = paths
            .iter()
            .zip(&sent)
            .filter(|(p, _)| p.starts_with(&format!("/{e}?")))
            .map(|(_, s)| s)
            .sum();
        let served = account["requests"][e].as_u64();
        if served != Some(n) {
            return Err(format!(
                "/{e}: the service counted {served:?} requests, {n} were sent (account {account})"
            )
            .into());
        }
    }
    let thrown: u64 = paths
        .iter()
        .zip(&sent)
        .filter(|(p, _)| {
            p.strip_prefix("/exception?n=")
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n % 100 == 0)
        })
        .map(|(_, s)| s)
        .sum();
    let n = |k: &str| account[k].as_u64();
    if n("thrown") != Some(thrown) || n("caught") != Some(thrown) || n("bad") != Some(0) {
        return Err(format!(
            "expected {thrown} exceptions thrown and caught and no bad result: account {account}"
        )
        .into());
    }
    Ok(())
}

/// The sampler's `samples` record (see examples/sampler): ticks, threads
/// and the µs per tick of each phase of its sampling thread (late,
/// suspend, walk, resume, count; its CPU time), for where the time goes.
fn sampler_phases(records: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(records).ok()?;
    let r: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "samples")?;
    let ticks = r["ticks"].as_u64()?.max(1) as f64;
    let per_tick = |k: &str| r[k].as_f64().unwrap_or(0.0) / ticks / 1000.0;
    Some(json!({
        "ticks": r["ticks"],
        "samples": r["samples"],
        "threads": r["threads"],
        "refused": r["refused"],
        "late_us_per_tick": per_tick("late_ns"),
        "suspend_us_per_tick": per_tick("suspend_ns"),
        "walk_us_per_tick": per_tick("walk_ns"),
        "resume_us_per_tick": per_tick("resume_ns"),
        "count_us_per_tick": per_tick("count_ns"),
        "thread_cpu_us_per_tick": per_tick("thread_cpu_ns"),
    }))
}

/// utime + stime of a process, seconds (`/proc/<pid>/stat`, USER_HZ 100).
fn cpu_seconds(pid: u32) -> crate::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or("bad /proc stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3; utime 14 and stime 15.
    let ticks = |i: usize| -> crate::Result<f64> {
        Ok(fields
            .get(i - 3)
            .ok_or("short /proc stat")?
            .parse::<f64>()?)
    };
    Ok((ticks(14)? + ticks(15)?) / 100.0)
}

/// `VmHWM` of a process, MiB (0 when unreadable).
fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

// ---- the peer tools ----

/// Fetches (once, checked) and unpacks the two tools under the cache.
fn peer_tools(setup: &Setup) -> crate::Result<PeerTools> {
    let feed = Feed::configured();
    let downloads = setup.cache.join("downloads/nuget");
    let mut dirs = Vec::new();
    for pin in [DOTNET_TRACE, DOTNET_COUNTERS] {
        let dir = setup
            .cache
            .join("tools")
            .join(format!("{}-{}", pin.id, pin.version));
        let dll = clrprof_testing::peer_tools::find_tool_dll(&dir, pin.id);
        let dll = match dll {
            Some(d) => d,
            None => {
                println!("==> fetch {pin} from NuGet (.NET tool, run with the leg's dotnet exec)");
                let nupkg = feed.fetch(&pin, &downloads, &Quiet)?;
                clrprof_testing::peer_tools::unpack_tools(&nupkg, &dir)?;
                clrprof_testing::peer_tools::find_tool_dll(&dir, pin.id)
                    .ok_or_else(|| format!("{pin}: no tools/<tfm>/any/{}.dll", pin.id))?
            }
        };
        dirs.push(dll);
    }
    let counters = dirs.pop().ok_or("no dotnet-counters")?;
    let trace = dirs.pop().ok_or("no dotnet-trace")?;
    Ok(PeerTools { trace, counters })
}

/// `dotnet exec` of the leg with a tool (rolled forward to the leg's
/// runtime: a tool built for an older .NET runs on it), with `SIGINT` at
/// its default disposition: a shell that starts the bench in the background
/// hands its children `SIGINT` ignored, and the runtime then keeps it
/// ignored, so Ctrl+C would not stop the tool.
fn tool_command(setup: &Setup, dll: &Path) -> Command {
    let mut cmd = Command::new("env");
    cmd.arg("--default-signal=INT")
        .arg(&setup.leg.host)
        .arg("exec")
        .arg("--roll-forward")
        .arg("LatestMajor")
        .arg(dll)
        .env("DOTNET_CLI_TELEMETRY_OPTOUT", "1")
        .env("DOTNET_NOLOGO", "1");
    cmd
}

/// Attaches `tool` to the service and waits until its session runs.
fn attach(
    setup: &Setup,
    tool: Tool,
    tools: &PeerTools,
    pid: u32,
    work: &Path,
) -> crate::Result<Child> {
    let mut cmd = match tool {
        Tool::Trace => {
            let mut c = tool_command(setup, &tools.trace);
            c.arg("collect")
                .arg("--process-id")
                .arg(pid.to_string())
                .arg("--output")
                .arg(work.join("trace.nettrace"));
            c
        }
        Tool::Counters => {
            let mut c = tool_command(setup, &tools.counters);
            c.arg("collect")
                .arg("--process-id")
                .arg(pid.to_string())
                .arg("--format")
                .arg("json")
                .arg("--output")
                .arg(work.join("counters.json"));
            c
        }
    };
    let stdout = work.join("tool-stdout.txt");
    cmd.stdin(Stdio::piped())
        .stdout(std::fs::File::create(&stdout)?)
        .stderr(std::fs::File::create(work.join("tool-stderr.txt"))?);
    let mut child = cmd.spawn()?;
    // The session runs once the tool says so, or its output file begins.
    let (marker, output) = match tool {
        Tool::Trace => ("Recording trace", work.join("trace.nettrace")),
        Tool::Counters => ("Starting a counter session", work.join("counters.json")),
    };
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&stdout).unwrap_or_default();
        let begun = std::fs::metadata(&output).is_ok_and(|m| m.len() > 0);
        if text.contains(marker) || begun {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{tool:?} exited ({status}) before its session ran: {text} {}",
                std::fs::read_to_string(work.join("tool-stderr.txt")).unwrap_or_default()
            )
            .into());
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            return Err(format!("{tool:?} did not start its session within 60 s: {text}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops a peer tool as a user at its terminal would (Ctrl+C: `SIGINT`;
/// it ends its session, rundown included) and waits up to `wait` for it:
/// whether it exited.
fn stop_tool(child: &mut Child, name: &str, work: &Path, wait: Duration) -> crate::Result<bool> {
    let _ = Command::new("kill")
        .args(["-s", "INT", &child.id().to_string()])
        .status();
    wait_tool(child, name, work, wait)
}

/// Waits up to `wait` for a peer tool to exit: whether it did.
fn wait_tool(child: &mut Child, name: &str, work: &Path, wait: Duration) -> crate::Result<bool> {
    let start = Instant::now();
    while start.elapsed() < wait {
        if let Some(status) = child.try_wait()? {
            // dotnet-counters ends by the signal itself.
            let by_sigint = std::os::unix::process::ExitStatusExt::signal(&status) == Some(2);
            if !status.success() && !by_sigint {
                println!("    ({name} exited with {status}; see {})", work.display());
            }
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(false)
}

// ---- the chart ----

/// `--replot`: the chart again from `target/bench/server.json`.
fn replot() -> crate::Result {
    let out_dir = crate::workspace::root().join("target/bench");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(out_dir.join("server.json"))?)?;
    let configs: Vec<(String, String)> = json["configurations"]
        .as_array()
        .ok_or("server.json: no configurations")?
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or("").to_string(),
                c["label"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let labels: Vec<(&str, &str)> = configs
        .iter()
        .map(|(n, l)| (n.as_str(), l.as_str()))
        .collect();
    let mut rows = Vec::new();
    for (leg, v) in json["legs"].as_object().ok_or("server.json: no legs")? {
        let row = configs
            .iter()
            .map(|(name, _)| {
                let m = &v["configurations"][name]["median"];
                (
                    name.clone(),
                    m["rps"].as_f64().unwrap_or(0.0),
                    m["p99_ms"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        rows.push((leg.clone(), row));
    }
    let svg = out_dir.join("server.svg");
    chart(&svg, &labels, &rows)?;
    println!("wrote {}", svg.display());
    Ok(())
}

/// Two panels: median throughput and median p99 per configuration, a bar
/// per leg.
fn chart(path: &Path, labels: &[(&str, &str)], rows: &[LegRows]) -> crate::Result {
    use plotters::prelude::*;
    let width = 1100u32;
    let height = 420u32;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "ASP.NET Core service under load: medians per configuration (cargo xtask bench server)",
        ("sans-serif", 18),
    )?;
    let (left, right) = root.split_horizontally(width / 2);
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
    ];
    let n = labels.len();
    let legs = rows.len().max(1);
    for (panel, title, pick) in [
        (&left, "throughput, requests/s", 0usize),
        (&right, "p99 latency, ms", 1usize),
    ] {
        let max = rows
            .iter()
            .flat_map(|(_, r)| r.iter().map(|(_, t, p)| if pick == 0 { *t } else { *p }))
            .fold(0.0f64, f64::max)
            * 1.6;
        // Configurations top down, a horizontal bar per leg.
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(110)
            .build_cartesian_2d(0f64..max.max(1e-9), -0.5f64..n as f64 - 0.5)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(WHITE)
            .y_labels(n)
            .y_label_formatter(&|y| {
                let i = y.round();
                if (y - i).abs() > 1e-6 || i < 0.0 {
                    return String::new();
                }
                labels
                    .get(n.saturating_sub(1 + i as usize))
                    .map_or(String::new(), |(name, _)| name.to_string())
            })
            .y_label_style(("sans-serif", 13))
            .draw()?;
        for (l, (leg, values)) in rows.iter().enumerate() {
            let color = palette[l % palette.len()];
            let bar = 0.8 / legs as f64;
            chart
                .draw_series(values.iter().enumerate().map(|(i, (_, t, p))| {
                    let v = if pick == 0 { *t } else { *p };
                    let y = (n - 1 - i) as f64;
                    let y1 = y + 0.4 - bar * l as f64;
                    Rectangle::new([(0.0, y1), (v, y1 - bar * 0.95)], color.filled())
                }))?
                .label(leg.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
