//! The ASP.NET Core service of `apps/server.cs` under a short load (a
//! bounded number of requests, not timed) with the profilers of `cargo
//! xtask bench server`'s configurations 2-4: the sampler (CPU and wall at
//! 100 Hz), the sampler with every production profile in continuous mode
//! uploading to a local endpoint, and method-wrapper timing every action
//! method and middleware `Invoke`.
//!
//! Each run must leave the service's own account equal to the load
//! generator's (requests per endpoint, exceptions thrown and caught, no
//! failed self-check), every answer equal to the same request's answer
//! without a profiler, and the profiles' top endpoint frames must be the
//! endpoints the service's own timing (and allocation count) says are hot.

use crate::pprof::{decode, Pb};
use clrprof_testing::csharp::CompileOptions;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::http::{Response, TestServer};
use clrprof_testing::load::{self, LoadResult, LoadSpec};
use clrprof_testing::run::Outcome;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The endpoints, in the order requests cycle through them.
pub const ENDPOINTS: [&str; 5] = ["json", "sort", "async", "exception", "lock"];

/// The endpoints whose handlers the service times (the synchronous ones),
/// with their action methods' frame names.
const TIMED: [(&str, &str); 4] = [
    ("json", "Shop.Endpoints::Json"),
    ("sort", "Shop.Endpoints::Sort"),
    ("exception", "Shop.Endpoints::Exception"),
    ("lock", "Shop.Endpoints::Lock"),
];

/// `CLRPROF_WRAP_FILTER` for every action method and middleware `Invoke`.
pub const WRAP_FILTER: &str =
    "Shop.Endpoints::,Shop.Middleware.Accounting::Invoke,Shop.Middleware.RequestId::Invoke";

/// The request targets, request `i` taking `paths()[i % 1000]`: the five
/// endpoints in turn, `n` from 0 to 199 (so 1 % of the exception
/// endpoint's requests throw).
pub fn paths() -> Vec<String> {
    (0..1000)
        .map(|j| format!("/{}?n={}", ENDPOINTS[j % 5], j / 5))
        .collect()
}

/// The exceptions the service must have thrown for the requests sent.
pub fn expected_exceptions(paths: &[String], sent: &[u64]) -> u64 {
    paths
        .iter()
        .zip(sent)
        .filter(|(p, _)| {
            p.strip_prefix("/exception?n=")
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n % 100 == 0)
        })
        .map(|(_, s)| s)
        .sum()
}

/// Where the service's account differs from what the load generator sent
/// (requests per endpoint, exceptions, self-checks), or `Ok`.
pub fn check_account(account: &Value, paths: &[String], result: &LoadResult) -> Result<(), String> {
    if result.failed > 0 || result.mismatched > 0 {
        return Err(format!(
            "{} failed and {} changed answers of {}: {:?}",
            result.failed,
            result.mismatched,
            result.total_sent(),
            result.errors
        ));
    }
    for e in ENDPOINTS {
        let sent: u64 = paths
            .iter()
            .zip(&result.sent)
            .filter(|(p, _)| p.starts_with(&format!("/{e}?")))
            .map(|(_, s)| s)
            .sum();
        let served = account["requests"][e].as_u64().unwrap_or(u64::MAX);
        if served != sent {
            return Err(format!(
                "/{e}: the service counted {served} requests, the load generator sent {sent} (account {account})"
            ));
        }
    }
    let thrown = expected_exceptions(paths, &result.sent);
    let n = |k: &str| account[k].as_u64().unwrap_or(u64::MAX);
    if n("thrown") != thrown || n("caught") != thrown || n("bad") != 0 {
        return Err(format!(
            "expected {thrown} exceptions thrown and caught and no bad result: account {account}"
        ));
    }
    Ok(())
}

/// One run of the service under load.
struct Served {
    load: LoadResult,
    account: Value,
    outcome: Outcome,
    work: PathBuf,
}

/// Runs the service (with `profiler` and `env` when given), sends
/// `requests` requests over 8 connections, then `lock_burst` requests to
/// the lock endpoint alone (all 8 connections contending for its lock),
/// checks the account and every answer against `expected`, and stops the
/// service.
fn serve(
    case: &Case<'_>,
    app: &Path,
    profiler: Option<&str>,
    env: &[(&str, String)],
    (requests, lock_burst): (u64, u64),
    expected: &Arc<HashMap<usize, Vec<u8>>>,
) -> Result<Served, Verdict> {
    let mut spec = case.spec(app).timeout(Duration::from_secs(120));
    if let Some(p) = profiler {
        spec = spec.profiler(case.profiler(p)?);
    }
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let work = spec.work_dir.clone();
    let (app, addr) = load::spawn_web_app(case.leg(), None, &spec, Duration::from_secs(60))?;
    let paths = paths();
    let result = load::run(&LoadSpec {
        addr,
        paths: paths.clone(),
        connections: 8,
        requests,
        duration: Duration::from_secs(60),
        expected: expected.clone(),
    });
    // The lock endpoint's paths, and their answers, by index.
    let lock: Vec<usize> = (0..paths.len())
        .filter(|j| paths[*j].starts_with("/lock?"))
        .collect();
    let burst = (lock_burst > 0).then(|| {
        load::run(&LoadSpec {
            addr,
            paths: lock.iter().map(|j| paths[*j].clone()).collect(),
            connections: 8,
            requests: lock_burst,
            duration: Duration::from_secs(60),
            expected: Arc::new(
                lock.iter()
                    .enumerate()
                    .filter_map(|(k, j)| Some((k, expected.get(j)?.clone())))
                    .collect(),
            ),
        })
    });
    let stats = load::get(addr, "/stats");
    let _ = load::get(addr, "/shutdown");
    let outcome = app.finish(Duration::from_secs(60))?;
    outcome.check_exit()?;
    let mut result = result?;
    let (status, stats) = stats?;
    if status != 200 {
        return Err(format!("/stats: HTTP {status}: {stats}").into());
    }
    let account: Value =
        serde_json::from_str(&stats).map_err(|e| format!("/stats is not JSON ({e}): {stats}"))?;
    if result.total_sent() != requests {
        return Err(format!(
            "{} of {requests} requests sent within 60 s",
            result.total_sent()
        )
        .into());
    }
    // The burst's requests, counted on the paths they took.
    let mut all = result.clone();
    if let Some(burst) = burst {
        let burst = burst?;
        all.failed += burst.failed;
        all.mismatched += burst.mismatched;
        all.errors.extend(burst.errors.iter().cloned());
        for (k, n) in burst.sent.iter().enumerate() {
            all.sent[lock[k]] += n;
        }
        if burst.total_sent() != lock_burst {
            return Err(
                format!("{} of {lock_burst} lock requests sent", burst.total_sent()).into(),
            );
        }
    }
    check_account(&account, &paths, &all)?;
    result.sent = all.sent;
    println!(
        "    {}: {} {requests} requests in {:.1} s ({:.0}/s, p99 {:.1} ms), run {:.1} s",
        case.leg().name,
        profiler.unwrap_or("no profiler"),
        result.elapsed.as_secs_f64(),
        result.throughput(),
        result.percentile_us(0.99) / 1000.0,
        outcome.duration.as_secs_f64()
    );
    Ok(Served {
        load: result,
        account,
        outcome,
        work,
    })
}

/// The endpoint the service's own account says is hottest by `key`
/// (`nanos` or `bytes`), among the timed ones.
fn hottest_by_account(account: &Value, key: &str) -> (&'static str, u64) {
    TIMED
        .iter()
        .map(|(e, _)| (*e, account[key][e].as_u64().unwrap_or(0)))
        .max_by_key(|(_, v)| *v)
        .unwrap_or(("none", 0))
}

/// The sum of `profile`'s value `column` over the samples whose stack
/// holds `frame`.
fn inclusive(profile: &Pb, frame: &str, column: usize) -> u64 {
    profile
        .samples
        .iter()
        .filter(|s| s.frames.iter().any(|f| f == frame))
        .map(|s| s.values.get(column).copied().unwrap_or(0).max(0) as u64)
        .sum()
}

/// The column of sample type `name` (the first one when absent).
fn column(profile: &Pb, name: &str) -> usize {
    profile
        .sample_types
        .iter()
        .position(|(t, _)| t == name)
        .unwrap_or(0)
}

/// The profile's top endpoint by sample type `sample_type` (the endpoint
/// with the most of it in the samples whose stack holds its action method)
/// must be the service's own by `key` (`nanos` or `bytes`).
fn check_top(
    what: &str,
    profile: &Pb,
    sample_type: &str,
    account: &Value,
    key: &str,
) -> CaseResult {
    let (hot, value) = hottest_by_account(account, key);
    let c = column(profile, sample_type);
    let sums: Vec<(&str, u64)> = TIMED
        .iter()
        .map(|(e, frame)| (*e, inclusive(profile, frame, c)))
        .collect();
    let top = sums
        .iter()
        .max_by_key(|(_, v)| *v)
        .map_or("none", |(e, _)| *e);
    if top != hot || sums.iter().all(|(_, v)| *v == 0) {
        return Err(format!(
            "{what}: the profile's top endpoint by {sample_type} is {top} ({sums:?}), the service's own {key} say {hot} ({value}; account {account})"
        )
        .into());
    }
    println!("      {what}: top endpoint {top}, as the service's {key} say ({sums:?})");
    Ok(())
}

/// Merges profiles (their samples; the first one's types).
fn merge(profiles: Vec<Pb>) -> Pb {
    let mut all = Pb::default();
    for p in profiles {
        if all.sample_types.is_empty() {
            all.sample_types = p.sample_types;
        }
        all.samples.extend(p.samples);
    }
    all
}

fn decode_file(path: &Path) -> Result<Pb, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    decode(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The service under the three profilers, each checked (see the module docs).
fn under_load(case: &Case<'_>) -> CaseResult {
    let app = case.app_with(
        "server",
        CompileOptions {
            aspnetcore: true,
            optimize: true,
            ..Default::default()
        },
    )?;
    // The answers without a profiler: every path at least once.
    let reference = serve(case, &app, None, &[], (1000, 0), &Arc::default())?;
    let expected = Arc::new(reference.load.bodies);
    if expected.len() != 1000 {
        return Err(format!("the reference run saw {} paths", expected.len()).into());
    }
    let requests = 2500;

    // 2: the sampler, CPU and wall at 100 Hz.
    let sampled = serve(
        case,
        &app,
        Some("sampler"),
        &[
            ("CLRPROF_SAMPLER_RATE", "100".into()),
            ("CLRPROF_SAMPLER_PROFILES", "cpu,wall".into()),
        ],
        (requests, 0),
        &expected,
    )?;
    let cpu = decode_file(&sampled.work.join("records.jsonl.cpu.pb.gz"))?;
    check_top("sampler, cpu", &cpu, "cpu", &sampled.account, "nanos")?;

    // 3: every production profile, continuous, uploading to a local endpoint.
    let endpoint = TestServer::start(|_| Response::new(200, ""))
        .map_err(|e| format!("the upload endpoint: {e}"))?;
    let url = format!("{}/ingest?name=shop.server", endpoint.url());
    let continuous = serve(
        case,
        &app,
        Some("sampler"),
        &[
            ("CLRPROF_SAMPLER_RATE", "100".into()),
            (
                "CLRPROF_SAMPLER_PROFILES",
                "cpu,wall,alloc,lock,exception".into(),
            ),
            ("CLRPROF_SAMPLER_CONTINUOUS_URL", url),
            ("CLRPROF_SAMPLER_CONTINUOUS_EVERY", "1".into()),
        ],
        (requests, 400),
        &expected,
    )?;
    let uploads = endpoint.requests();
    drop(endpoint);
    let mut by_type: HashMap<String, Vec<Pb>> = HashMap::new();
    for r in &uploads {
        if !r.target().contains("name=shop.server") || !r.target().contains("format=pprof") {
            return Err(format!("upload {}", r.line).into());
        }
        let pb = decode(&r.body).map_err(|e| format!("upload {}: {e}", r.line))?;
        let kind = pb
            .sample_types
            .first()
            .map(|(t, _)| t.clone())
            .unwrap_or_default();
        by_type.entry(kind).or_default().push(pb);
    }
    let mut kinds: Vec<(String, usize)> =
        by_type.iter().map(|(k, v)| (k.clone(), v.len())).collect();
    kinds.sort();
    println!("      {} uploads: {kinds:?}", uploads.len());
    let mut take = |kind: &str| -> Result<Pb, Verdict> {
        by_type
            .remove(kind)
            .map(merge)
            .ok_or_else(|| Verdict::from(format!("no {kind} profile uploaded ({kinds:?})")))
    };
    let account = &continuous.account;
    check_top(
        "continuous, cpu",
        &take("samples")?,
        "cpu",
        account,
        "nanos",
    )?;
    check_top(
        "continuous, alloc",
        &take("alloc_objects")?,
        "alloc_space",
        account,
        "bytes",
    )?;
    // Every exception the service threw, at its throw site.
    let exceptions = take("exceptions")?;
    let thrown = inclusive(&exceptions, "Shop.Endpoints::Checkout", 0);
    if thrown != account["thrown"].as_u64().unwrap_or(u64::MAX) {
        return Err(format!(
            "the exception profile holds {thrown} exceptions thrown in Shop.Endpoints::Checkout, the service threw {}",
            account["thrown"]
        )
        .into());
    }
    // Contention is the lock endpoint's.
    let contentions = take("contentions")?;
    let c = column(&contentions, "contentions");
    let locked = inclusive(&contentions, "Shop.Endpoints::Lock", c);
    let others: u64 = TIMED
        .iter()
        .filter(|(e, _)| *e != "lock")
        .map(|(_, f)| inclusive(&contentions, f, c))
        .sum();
    if locked == 0 || others >= locked {
        return Err(format!(
            "the lock profile has {locked} contentions in Shop.Endpoints::Lock, {others} in other endpoints"
        )
        .into());
    }
    println!("      continuous: {thrown} exceptions at Checkout, {locked} contentions in Lock ({others} elsewhere)");

    // 4: method-wrapper timing every action method and middleware Invoke.
    let wrapped = serve(
        case,
        &app,
        Some("method-wrapper"),
        &[
            ("CLRPROF_WRAP_FILTER", WRAP_FILTER.into()),
            ("CLRPROF_WRAP_TIME", "1".into()),
        ],
        (requests, 0),
        &expected,
    )?;
    check_wrapped(&wrapped)?;
    Ok(())
}

/// method-wrapper's counts equal the service's, and its timing's top
/// endpoint is the service's.
fn check_wrapped(wrapped: &Served) -> CaseResult {
    let records = &wrapped.outcome.records;
    if let Some(r) = records.iter().find(|r| r["event"] == "wrap_refused") {
        return Err(format!("a method was not wrapped: {r}").into());
    }
    let method = |name: &str| {
        records
            .iter()
            .find(|r| r["event"] == "wrapped" && r["method"] == name)
    };
    let account = &wrapped.account;
    // Every request but /shutdown has entered both middlewares by the time
    // /stats counted itself; /shutdown enters them once more.
    let total: u64 = account["requests"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    for m in [
        "Shop.Middleware.Accounting::Invoke",
        "Shop.Middleware.RequestId::Invoke",
    ] {
        let enter = method(m).and_then(|r| r["enter"].as_u64());
        if enter != Some(total + 1) {
            return Err(format!(
                "{m}: {enter:?} calls wrapped, the service served {} requests (account {account})",
                total + 1
            )
            .into());
        }
    }
    let mut times = Vec::new();
    for (e, frame) in TIMED
        .iter()
        .chain([("async", "Shop.Endpoints::Async")].iter())
    {
        let r = method(frame).ok_or_else(|| format!("no wrapped record for {frame}"))?;
        let served = account["requests"][e].as_u64();
        if r["enter"].as_u64() != served || r["return"].as_u64() != served {
            return Err(format!("{frame}: wrapped {r}, the service served {served:?}").into());
        }
        if *e != "async" {
            times.push((*e, r["ns"].as_u64().unwrap_or(0)));
        }
    }
    let top = times
        .iter()
        .max_by_key(|(_, v)| *v)
        .map_or("none", |(e, _)| *e);
    let (hot, _) = hottest_by_account(account, "nanos");
    if top != hot {
        return Err(format!(
            "method-wrapper's timing puts {top} on top ({times:?}), the service's own {hot} (account {account})"
        )
        .into());
    }
    println!("      method-wrapper: every call counted, top endpoint {top} ({times:?})");
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "server: ASP.NET Core under load with the sampler, continuous production profiles and method wrapping: every request accounted for, no answer changed, the hot endpoints on top",
        under_load,
    )
    .only_on(
        &["linux-x64-10.0", "linux-x64-11.0"],
        "ASP.NET Core is provisioned on the linux-x64 .NET 10 and 11 legs",
    )]
}
