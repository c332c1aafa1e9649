//! The sampler's pprof output and continuous mode on real runtimes.
//!
//! Profiles are read back with a protobuf decoder written here from the
//! public `profile.proto` field numbers (independent of the SDK's prost
//! messages), after gunzip.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::http::{Response, TestServer};
use clrprof_testing::run::{Outcome, RunSpec};
use clrprof_testing::wine::to_wine_path;
use clrprof_testing::Os;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

// ---- a minimal protobuf reader ----

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

/// The fields of one message: (field number, value).
fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((field, Wire::Varint(varint(buf, &mut pos)?))),
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let len = varint(buf, &mut pos)? as usize;
                let end = pos.checked_add(len).filter(|&e| e <= buf.len());
                let end = end.ok_or("length past the end")?;
                out.push((field, Wire::Bytes(&buf[pos..end])));
                pos = end;
            }
            w => return Err(format!("unexpected wire type {w}")),
        }
    }
    Ok(out)
}

/// A repeated varint field, packed or not.
fn push_varints(w: &Wire<'_>, into: &mut Vec<u64>) -> Result<(), String> {
    match w {
        Wire::Varint(v) => into.push(*v),
        Wire::Bytes(b) => {
            let mut p = 0;
            while p < b.len() {
                into.push(varint(b, &mut p)?);
            }
        }
    }
    Ok(())
}

fn num(w: &Wire<'_>) -> u64 {
    match w {
        Wire::Varint(v) => *v,
        Wire::Bytes(_) => 0,
    }
}

/// One sample: root-first frame names, its values, labels.
#[derive(Debug)]
pub struct PbSample {
    pub frames: Vec<String>,
    pub modules: Vec<String>,
    pub values: Vec<i64>,
    pub labels: BTreeMap<String, String>,
}

/// What the tests need of a pprof profile.
#[derive(Debug, Default)]
pub struct Pb {
    pub sample_types: Vec<(String, String)>,
    pub samples: Vec<PbSample>,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub period: i64,
    pub period_type: (String, String),
}

impl Pb {
    /// The sum of the first sample type (samples).
    pub fn total(&self) -> u64 {
        self.samples.iter().map(|s| s.values[0] as u64).sum()
    }

    /// Samples whose stack includes `frame`.
    pub fn inclusive(&self, frame: &str) -> u64 {
        self.samples
            .iter()
            .filter(|s| s.frames.iter().any(|f| f == frame))
            .map(|s| s.values[0] as u64)
            .sum()
    }
}

/// Gunzips and decodes a pprof file.
pub fn decode(gz: &[u8]) -> Result<Pb, String> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .map_err(|e| format!("pprof file is not gzip: {e}"))?;
    let mut strings = Vec::new();
    let mut samples_raw = Vec::new();
    let mut locations: HashMap<u64, (u64, Vec<u64>)> = HashMap::new();
    let mut functions: HashMap<u64, u64> = HashMap::new();
    let mut mappings: HashMap<u64, u64> = HashMap::new();
    let mut types_raw = Vec::new();
    let mut pb = Pb::default();
    let mut period_type = (0, 0);
    let value_type = |b: &[u8]| -> Result<(u64, u64), String> {
        let mut t = (0, 0);
        for (f, w) in fields(b)? {
            match f {
                1 => t.0 = num(&w),
                2 => t.1 = num(&w),
                _ => {}
            }
        }
        Ok(t)
    };
    for (f, w) in fields(&raw)? {
        match (f, &w) {
            (1, Wire::Bytes(b)) => types_raw.push(value_type(b)?),
            (2, Wire::Bytes(b)) => samples_raw.push(*b),
            (3, Wire::Bytes(b)) => {
                let (mut id, mut file) = (0, 0);
                for (f, w) in fields(b)? {
                    match f {
                        1 => id = num(&w),
                        5 => file = num(&w),
                        _ => {}
                    }
                }
                mappings.insert(id, file);
            }
            (4, Wire::Bytes(b)) => {
                let (mut id, mut mapping, mut funcs) = (0, 0, Vec::new());
                for (f, w) in fields(b)? {
                    match (f, w) {
                        (1, w) => id = num(&w),
                        (2, w) => mapping = num(&w),
                        (4, Wire::Bytes(line)) => {
                            for (f, w) in fields(line)? {
                                if f == 1 {
                                    funcs.push(num(&w));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                locations.insert(id, (mapping, funcs));
            }
            (5, Wire::Bytes(b)) => {
                let (mut id, mut name) = (0, 0);
                for (f, w) in fields(b)? {
                    match f {
                        1 => id = num(&w),
                        2 => name = num(&w),
                        _ => {}
                    }
                }
                functions.insert(id, name);
            }
            (6, Wire::Bytes(b)) => strings
                .push(String::from_utf8(b.to_vec()).map_err(|_| "string table entry not UTF-8")?),
            (6, Wire::Varint(_)) => return Err("bad string table entry".into()),
            (9, w) => pb.time_nanos = num(w) as i64,
            (10, w) => pb.duration_nanos = num(w) as i64,
            (11, Wire::Bytes(b)) => period_type = value_type(b)?,
            (12, w) => pb.period = num(w) as i64,
            _ => {}
        }
    }
    let st = |i: u64| -> Result<String, String> {
        strings
            .get(i as usize)
            .cloned()
            .ok_or_else(|| format!("string index {i} out of the table"))
    };
    for (t, u) in types_raw {
        pb.sample_types.push((st(t)?, st(u)?));
    }
    pb.period_type = (st(period_type.0)?, st(period_type.1)?);
    for b in samples_raw {
        let (mut locs, mut values, mut labels) = (Vec::new(), Vec::new(), BTreeMap::new());
        for (f, w) in fields(b)? {
            match (f, &w) {
                (1, w) => push_varints(w, &mut locs)?,
                (2, w) => push_varints(w, &mut values)?,
                (3, Wire::Bytes(l)) => {
                    let (mut k, mut v) = (0, 0);
                    for (f, w) in fields(l)? {
                        match f {
                            1 => k = num(&w),
                            2 => v = num(&w),
                            _ => {}
                        }
                    }
                    labels.insert(st(k)?, st(v)?);
                }
                _ => {}
            }
        }
        let (mut frames, mut modules) = (Vec::new(), Vec::new());
        for id in locs.iter().rev() {
            let (mapping, funcs) = locations
                .get(id)
                .ok_or_else(|| format!("sample names unknown location {id}"))?;
            let module = match mappings.get(mapping) {
                Some(&f) => st(f)?,
                None => String::new(),
            };
            for fid in funcs.iter().rev() {
                let name = functions
                    .get(fid)
                    .ok_or_else(|| format!("location names unknown function {fid}"))?;
                frames.push(st(*name)?);
                modules.push(module.clone());
            }
        }
        pb.samples.push(PbSample {
            frames,
            modules,
            values: values.into_iter().map(|v| v as i64).collect(),
            labels,
        });
    }
    Ok(pb)
}

// ---- checks ----

/// The leaf frame with the most samples, and its count.
fn hottest_leaf<'a>(stacks: impl Iterator<Item = (&'a str, u64)>) -> Option<(String, u64)> {
    let mut leaves: BTreeMap<String, u64> = BTreeMap::new();
    for (leaf, n) in stacks {
        *leaves.entry(leaf.to_string()).or_default() += n;
    }
    leaves.into_iter().max_by_key(|(_, n)| *n)
}

/// The hot-method run's pprof file against its folded file: the same total,
/// the same hottest method with the same count, the same Spin count; sample
/// types, period, labels and mappings as documented.
pub fn check_against_folded(
    case: &Case<'_>,
    gz: &[u8],
    folded: &[(String, u64)],
    rate_hz: u64,
) -> CaseResult {
    let pb = decode(gz)?;
    let types: Vec<(&str, &str)> = pb
        .sample_types
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    // The sampler measures CPU time per thread on Linux and Windows.
    if types
        != [
            ("samples", "count"),
            ("wall", "nanoseconds"),
            ("cpu", "nanoseconds"),
        ]
    {
        return Err(format!("pprof sample types {types:?}").into());
    }
    let period = 1_000_000_000 / rate_hz as i64;
    if pb.period != period || pb.period_type != ("wall".into(), "nanoseconds".into()) {
        return Err(format!(
            "pprof period {} {:?}, expected {period} ns",
            pb.period, pb.period_type
        )
        .into());
    }
    if pb.time_nanos <= 0 || pb.duration_nanos <= 0 {
        return Err(format!(
            "pprof time {} duration {}",
            pb.time_nanos, pb.duration_nanos
        )
        .into());
    }
    let folded_total: u64 = folded.iter().map(|(_, n)| n).sum();
    if pb.total() != folded_total {
        return Err(format!("pprof has {} samples, folded {folded_total}", pb.total()).into());
    }
    for s in &pb.samples {
        if s.values.len() != 3 || s.values[1] != s.values[0] * period || s.values[2] < 0 {
            return Err(format!("sample values {:?} (period {period})", s.values).into());
        }
        if s.labels.get("runtime_version").map(String::as_str) != Some(case.leg().version.as_str())
        {
            return Err(format!("sample labels {:?}, leg {}", s.labels, case.leg().version).into());
        }
        // A thread's name or the one `unnamed` bucket, never a per-run ID.
        if !s
            .labels
            .get("thread")
            .is_some_and(|t| !t.is_empty() && !t.starts_with("0x"))
        {
            return Err(format!("sample without a thread-name label: {:?}", s.labels).into());
        }
    }
    let from_pprof = hottest_leaf(
        pb.samples
            .iter()
            .filter_map(|s| Some((s.frames.last()?.as_str(), s.values[0] as u64))),
    );
    let from_folded = hottest_leaf(
        folded
            .iter()
            .filter_map(|(st, n)| Some((st.rsplit(';').next()?, *n))),
    );
    if from_pprof != from_folded || from_pprof.is_none() {
        return Err(format!("hottest method: pprof {from_pprof:?}, folded {from_folded:?}").into());
    }
    let spin_folded: u64 = folded
        .iter()
        .filter(|(st, _)| st.split(';').any(|f| f == "Hot.Program::Spin"))
        .map(|(_, n)| n)
        .sum();
    let spin = pb.inclusive("Hot.Program::Spin");
    if spin != spin_folded || spin == 0 {
        return Err(format!("Spin: pprof {spin} samples, folded {spin_folded}").into());
    }
    // Spin's mapping is the app's module.
    let app = case.app("hot")?;
    let app_file = app
        .file_name()
        .map(|f| f.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let module = pb
        .samples
        .iter()
        .find_map(|s| {
            let i = s.frames.iter().position(|f| f == "Hot.Program::Spin")?;
            Some(s.modules[i].to_lowercase())
        })
        .unwrap_or_default();
    if module != app_file {
        return Err(format!("Spin's mapping is {module:?}, not the app {app_file:?}").into());
    }
    println!(
        "    {}: pprof {} bytes, hottest {:?}, Spin {spin} = folded",
        case.leg().name,
        gz.len(),
        from_pprof
    );
    Ok(())
}

fn read_records(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("no record file {}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("bad record {l:?}: {e}")))
        .collect()
}

fn env_path(case: &Case<'_>, p: &Path) -> Result<String, Verdict> {
    match case.leg().os {
        Os::Linux => Ok(p.display().to_string()),
        Os::Windows => Ok(to_wine_path(p).map_err(|e| e.to_string())?),
    }
}

fn run_continuous(
    case: &Case<'_>,
    args: &[&str],
    every: &str,
    env: &[(&str, String)],
    dir_var: Option<&str>,
) -> Result<(Outcome, Vec<Value>, std::path::PathBuf), Verdict> {
    let app = case.app("hot")?;
    let profiler = case.profiler("sampler")?;
    let mut spec: RunSpec = case
        .spec(&app)
        .profiler(profiler)
        .env("CLRPROF_SAMPLER_RATE", "1000")
        .env("CLRPROF_SAMPLER_CONTINUOUS_EVERY", every)
        .timeout(Duration::from_secs(120));
    let dir = spec.work_dir.join("periods");
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(var) = dir_var {
        spec = spec.env(var, &env_path(case, &dir)?);
    }
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    spec.args = args.iter().map(|s| s.to_string()).collect();
    let records_path = spec.work_dir.join("records.jsonl.jsonl");
    let _ = std::fs::remove_file(&records_path);
    let outcome = case.run(spec)?;
    outcome.check_exit()?;
    let records = read_records(&records_path)?;
    Ok((outcome, records, dir))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// Continuous mode, 0.1 s periods, on a run whose hot method changes
/// halfway: every sample reaches a period file; periods before the change
/// sample Spin only, periods after it Cold only; memory stays bounded.
fn continuous_directory(case: &Case<'_>) -> CaseResult {
    let (outcome, records, dir) = run_continuous(
        case,
        &["switch", "6"],
        "0.1",
        &[],
        Some("CLRPROF_SAMPLER_CONTINUOUS_DIR"),
    )?;
    let switch_ms: i64 = outcome
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("switch_unix_ms "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("the app printed no switch time: {:?}", outcome.stdout))?;
    let periods: Vec<&Value> = records.iter().filter(|r| r["event"] == "period").collect();
    let summary = records
        .iter()
        .find(|r| r["event"] == "continuous")
        .ok_or("no continuous record")?;
    if periods.len() < 50 {
        return Err(format!(
            "{} periods in a 6 s run at 0.1 s, expected at least 50",
            periods.len()
        )
        .into());
    }
    if let Some(bad) = periods.iter().find(|p| p["ok"] != true) {
        return Err(format!("a period was not written: {bad}").into());
    }
    if !periods.last().is_some_and(|p| p["last"] == true) {
        return Err("the last period record is not marked last".into());
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .collect();
    files.sort();
    if files.len() != periods.len() || u(summary, "periods") != periods.len() as u64 {
        return Err(format!(
            "{} files, {} period records, summary {summary}",
            files.len(),
            periods.len()
        )
        .into());
    }
    let (mut total, mut empty, mut before, mut after, mut sizes) = (0u64, 0, 0, 0, Vec::new());
    for (file, record) in files.iter().zip(&periods) {
        let gz = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        sizes.push(gz.len() as u64);
        let pb = decode(&gz).map_err(|e| format!("{}: {e}", file.display()))?;
        empty += u(record, "empty");
        if pb.total() + u(record, "empty") != u(record, "samples")
            || gz.len() as u64 != u(record, "bytes")
        {
            return Err(format!(
                "{} holds {} samples, {} bytes; record {record}",
                file.display(),
                pb.total(),
                gz.len()
            )
            .into());
        }
        total += pb.total();
        let start_ms = pb.time_nanos / 1_000_000;
        let end_ms = (pb.time_nanos + pb.duration_nanos) / 1_000_000;
        let (spin, cold) = (
            pb.inclusive("Hot.Program::Spin"),
            pb.inclusive("Hot.Program::Cold"),
        );
        // A sample is taken shortly before it is counted: 100 ms margin.
        if end_ms < switch_ms - 100 && spin + cold > 0 {
            if cold > 0 {
                return Err(format!(
                    "period {} ends before the switch but samples Cold {cold} times (Spin {spin})",
                    record["index"]
                )
                .into());
            }
            before += 1;
        } else if start_ms > switch_ms + 100 && spin + cold > 0 {
            if spin > 0 {
                return Err(format!(
                    "period {} starts after the switch but samples Spin {spin} times (Cold {cold})",
                    record["index"]
                )
                .into());
            }
            after += 1;
        }
    }
    if before < 10 || after < 10 {
        return Err(format!(
            "only {before} periods of Spin before and {after} of Cold after the switch"
        )
        .into());
    }
    if total + empty != u(summary, "samples") {
        return Err(format!(
            "period files hold {total} samples, the sampler took {}",
            summary["samples"]
        )
        .into());
    }
    // Bounded memory: what the sampler keeps between periods (frame names)
    // stops growing, each period's stacks are few, and (Linux) the process's
    // resident memory does not grow with the number of periods.
    let names: Vec<u64> = periods.iter().map(|p| u(p, "frame_names")).collect();
    let max_stacks = periods.iter().map(|p| u(p, "stacks")).max().unwrap_or(0);
    // The shutdown's frames land in the last period, or in the last two when
    // a period boundary falls during shutdown: compare before both.
    let half = names.len() / 2;
    let before_last = names[names.len().saturating_sub(3)];
    if before_last > names[half] + 5 || names.iter().any(|&n| n > 500) || max_stacks > 200 {
        return Err(
            format!("frame names per period {names:?}, at most {max_stacks} stacks").into(),
        );
    }
    let rss: Vec<u64> = periods
        .iter()
        .filter_map(|p| p["rss_kib"].as_u64())
        .collect();
    let rss_note = if rss.len() > 20 {
        let (early, last) = (rss[10], rss[rss.len() - 1]);
        if last > early + 32 * 1024 {
            return Err(format!(
                "resident memory grew from {early} KiB to {last} KiB over the periods"
            )
            .into());
        }
        format!(", RSS {early}..{last} KiB")
    } else {
        String::new()
    };
    sizes.sort_unstable();
    println!(
        "    {}: {} periods, {total} samples, {before} Spin-only before / {after} Cold-only after the switch, pprof per period median {} B (max {}), frame names {}{rss_note}",
        case.leg().name,
        periods.len(),
        sizes[sizes.len() / 2],
        sizes[sizes.len() - 1],
        names[names.len() - 1],
    );
    Ok(())
}

/// A pprof-upload endpoint that refuses every other upload (HTTP 503): the
/// first, third, ... request is answered 200. It serves one connection at a
/// time and records requests in arrival order, so the `n`th recorded
/// request was accepted when `n` is even.
fn flaky_server() -> Result<TestServer, String> {
    let answered = AtomicUsize::new(0);
    TestServer::start(move |_| {
        let accept = answered.fetch_add(1, Ordering::SeqCst).is_multiple_of(2);
        Response::new(if accept { 200 } else { 503 }, Vec::new())
    })
    .map_err(|e| format!("test endpoint: {e}"))
}

/// Continuous mode uploading to a local endpoint that refuses every other
/// upload: the refused periods are reported and counted as lost, every
/// other one arrives whole, and nothing else is lost.
fn continuous_http(case: &Case<'_>) -> CaseResult {
    let server = flaky_server()?;
    let url = format!("{}/ingest?name=clrprof.test", server.url());
    let (_outcome, records, _) = run_continuous(
        case,
        &["3", "1"],
        "0.25",
        &[("CLRPROF_SAMPLER_CONTINUOUS_URL", url)],
        None,
    )?;
    let requests: Vec<(bool, String, Vec<u8>)> = server
        .requests()
        .into_iter()
        .enumerate()
        .map(|(n, r)| (n % 2 == 0, r.line, r.body))
        .collect();
    drop(server);
    let periods: Vec<&Value> = records.iter().filter(|r| r["event"] == "period").collect();
    let summary = records
        .iter()
        .find(|r| r["event"] == "continuous")
        .ok_or("no continuous record")?;
    if periods.len() < 6 || requests.len() != periods.len() {
        return Err(format!(
            "{} periods, {} uploads received",
            periods.len(),
            requests.len()
        )
        .into());
    }
    let (mut sent, mut refused, mut lost) = (0u64, 0u64, 0u64);
    for ((accepted, query, body), record) in requests.iter().zip(&periods) {
        if !query.contains("format=pprof")
            || !query.contains("name=clrprof.test")
            || !query.contains("from=")
            || !query.contains("until=")
        {
            return Err(format!("upload request line {query:?}").into());
        }
        let pb = decode(body)?;
        let samples = pb.total() + u(record, "empty");
        if samples != u(record, "samples") {
            return Err(format!("upload holds {} samples, record {record}", pb.total()).into());
        }
        if *accepted {
            if record["ok"] != true {
                return Err(format!("accepted upload reported as failed: {record}").into());
            }
            sent += samples;
        } else {
            let error = record["error"].as_str().unwrap_or("");
            if record["ok"] != false || !error.contains("503") {
                return Err(
                    format!("refused upload not reported with its HTTP status: {record}").into(),
                );
            }
            refused += 1;
            lost += samples;
        }
    }
    if u(summary, "refused") != refused
        || u(summary, "lost_samples") != lost
        || u(summary, "delivered") + refused != periods.len() as u64
        || sent + lost != u(summary, "samples")
    {
        return Err(format!(
            "summary {summary}: expected {refused} refused, {lost} lost, {sent} delivered samples"
        )
        .into());
    }
    println!(
        "    {}: {} uploads, {refused} refused ({lost} samples lost, reported), {sent} samples delivered",
        case.leg().name,
        periods.len()
    );
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "pprof: continuous periods to a directory, hot method changes halfway, memory bounded over 50+ periods",
            continuous_directory,
        )
        // The periods follow the app's phases in time: run alone.
        .exclusive(),
        Scenario::new(
            "pprof: continuous uploads to an endpoint refusing every other one lose only the refused periods",
            continuous_http,
        )
        .only_on(
            &[
                "linux-x64-3.1",
                "linux-x64-8.0",
                "linux-x64-9.0",
                "linux-x64-10.0",
                "linux-x64-11.0",
                "win-x64-10.0",
            ],
            "the uploads are the SDK's own HTTP client, not the runtime's: one Wine leg proves its Windows build (each Wine run of the case takes about 90 s of CI)",
        ),
    ]
}
