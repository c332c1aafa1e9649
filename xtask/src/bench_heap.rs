//! `cargo xtask bench heap-snapshot` and `cargo xtask bench heap-soak`:
//! the heap snapshot beside `dotnet-gcdump`, and the live heap's memory over
//! a long run.
//!
//! `heap-snapshot [--leg L] [--runs N] [--scale S]`: the `heapdump` test app
//! builds a heap of about `S` × 0.5 MB (default 420: about 200 MB, 4 million
//! objects) and waits; `clrprof heap --pid` (release CLI and sampler) and
//! `dotnet-gcdump collect` (NuGet, pinned) take it in turn, `N` rounds
//! (default 3) alternating; the wall time of each, medians, and their
//! ratio. Both must find the same heap (total bytes within 1 %). Writes
//! `target/bench/heap-snapshot.json`.
//!
//! `heap-soak [--leg L] [--seconds S]`: the soak app (benches/heap/soak.cs)
//! allocates short-lived requests beside a cache that replaces its oldest
//! entry, for `S` seconds (default 600), under the sampler with the
//! allocation profile and the live heap in continuous mode (a period every
//! 10 s to a directory); the process's resident memory is read every 5 s.
//! Bounded means: the last third's highest reading is within 5 % (and 8
//! MiB) of the middle third's highest, and the live heap tracks at most
//! its table's 4,096 objects at the end. Writes
//! `target/bench/heap-soak.json`.

use crate::measure::{median, Setup};
use clrprof_testing::background::{spawn_app, wait_for_file};
use clrprof_testing::nuget::{Feed, Quiet};
use clrprof_testing::run::RunSpec;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> crate::Result<T> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a value").into()),
        None => Ok(default),
    }
}

/// The release `clrprof` CLI.
fn release_cli(root: &Path) -> crate::Result<PathBuf> {
    let status = Command::new(clrprof_testing::build::cargo())
        .current_dir(root)
        .args(["build", "--release", "--quiet", "-p", "clrprof-cli"])
        .status()?;
    if !status.success() {
        return Err("building clrprof-cli failed".into());
    }
    Ok(root.join("target/release/clrprof"))
}

/// Resident memory of `pid` in KiB (`VmRSS`).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

pub fn snapshot(args: &[String]) -> crate::Result {
    let leg_name: String = arg(args, "--leg", "linux-x64-10.0".to_string())?;
    let runs: usize = arg(args, "--runs", 3)?;
    let scale: u32 = arg(args, "--scale", 420)?;
    let setup = Setup::open("heap-snapshot", &leg_name)?;
    let sampler = setup.release_profiler("sampler")?;
    let cli = release_cli(&setup.root)?;
    let gcdump = clrprof_testing::peer_tools::tool_dll(
        &setup.cache,
        &clrprof_testing::peer_tools::DOTNET_GCDUMP,
        &Feed::configured(),
        &Quiet,
    )?;
    let host = setup
        .runtimes
        .leg(clrprof_testing::runtime_pack::COMPILER_LEG)
        .ok_or("no linux-x64-10.0 leg to run dotnet-gcdump")?
        .host
        .clone();
    let app = setup.app("tests/apps/heapdump.cs")?;
    let work = setup.out_dir.join("heap-snapshot");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let (stop, ready) = (work.join("stop"), work.join("ready"));
    let mut spec = RunSpec::new(&app, &work);
    spec.args = vec![
        stop.display().to_string(),
        ready.display().to_string(),
        scale.to_string(),
    ];
    println!("==> heapdump at scale {scale} on {leg_name}");
    let bg = spawn_app(&setup.leg, setup.runtimes.wine(), &spec)?;
    let pid: u32 = wait_for_file(&ready, Duration::from_secs(600))?
        .trim()
        .parse()
        .map_err(|_| "no pid in the ready file")?;
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let (mut ours_bytes, mut gc_bytes) = (0u64, 0u64);
    let result = (|| -> crate::Result {
        for round in 0..runs {
            let snap = work.join(format!("s{round}.json"));
            let t = Instant::now();
            let out = Command::new(&cli)
                .args([
                    "heap",
                    "--pid",
                    &pid.to_string(),
                    "--timeout-ms",
                    "60000",
                    "--profiler",
                ])
                .arg(&sampler.path)
                .arg("-o")
                .arg(&snap)
                .output()?;
            let ours = t.elapsed().as_secs_f64();
            if !out.status.success() {
                return Err(
                    format!("clrprof heap: {}", String::from_utf8_lossy(&out.stderr)).into(),
                );
            }
            let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&snap)?)?;
            ours_bytes = v["bytes"].as_u64().unwrap_or(0);
            let dump = work.join(format!("g{round}.gcdump"));
            let t = Instant::now();
            let out = Command::new(&host)
                .args(["exec", "--roll-forward", "LatestMajor"])
                .arg(&gcdump)
                .args(["collect", "-p", &pid.to_string(), "-o"])
                .arg(&dump)
                .output()?;
            let theirs = t.elapsed().as_secs_f64();
            if !out.status.success() || !dump.is_file() {
                return Err(format!(
                    "dotnet-gcdump collect: {}",
                    String::from_utf8_lossy(&out.stdout)
                )
                .into());
            }
            let report = Command::new(&host)
                .args(["exec", "--roll-forward", "LatestMajor"])
                .arg(&gcdump)
                .arg("report")
                .arg(&dump)
                .output()?;
            gc_bytes = String::from_utf8_lossy(&report.stdout)
                .lines()
                .find_map(|l| {
                    l.trim()
                        .strip_suffix("GC Heap bytes")
                        .map(|v| v.trim().replace(',', ""))
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            println!(
                "  round {round}: clrprof heap {ours:.2} s ({ours_bytes} bytes), dotnet-gcdump collect {theirs:.2} s ({gc_bytes} bytes)"
            );
            times[0].push(ours);
            times[1].push(theirs);
        }
        Ok(())
    })();
    let _ = std::fs::write(&stop, "stop");
    let _ = bg.finish(Duration::from_secs(120));
    result?;
    let (ours, theirs) = (median(&mut times[0]), median(&mut times[1]));
    let same_heap = (ours_bytes as f64 / gc_bytes.max(1) as f64 - 1.0).abs() <= 0.01;
    println!(
        "==> medians: clrprof heap {ours:.2} s, dotnet-gcdump collect {theirs:.2} s: ratio {:.3} (goal <= 1); heaps {ours_bytes} vs {gc_bytes} bytes ({})",
        ours / theirs,
        if same_heap { "the same within 1 %" } else { "DIFFER" }
    );
    let out = setup.out_dir.join("heap-snapshot.json");
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&json!({
            "leg": leg_name,
            "runtime": setup.leg.version,
            "scale": scale,
            "heap_bytes": ours_bytes,
            "gcdump_heap_bytes": gc_bytes,
            "clrprof_heap_s": times[0],
            "gcdump_collect_s": times[1],
            "clrprof_median_s": ours,
            "gcdump_median_s": theirs,
            "ratio": ours / theirs,
        }))?,
    )?;
    println!("wrote {}", out.display());
    if !same_heap {
        return Err("the two tools found different heaps".into());
    }
    Ok(())
}

pub fn soak(args: &[String]) -> crate::Result {
    let leg_name: String = arg(args, "--leg", "linux-x64-10.0".to_string())?;
    let seconds: f64 = arg(args, "--seconds", 600.0)?;
    let setup = Setup::open("heap-soak", &leg_name)?;
    let sampler = setup.release_profiler("sampler")?;
    let app = setup.app("benches/heap/soak.cs")?;
    let work = setup.out_dir.join("heap-soak");
    let _ = std::fs::remove_dir_all(&work);
    let periods = work.join("periods");
    std::fs::create_dir_all(&periods)?;
    let mut spec = RunSpec::new(&app, &work)
        .profiler(sampler)
        .env("CLRPROF_SAMPLER_PROFILES", "alloc,heap")
        .env(
            "CLRPROF_SAMPLER_CONTINUOUS_DIR",
            &periods.display().to_string(),
        )
        .env("CLRPROF_SAMPLER_CONTINUOUS_EVERY", "10");
    spec.args = vec![seconds.to_string()];
    println!("==> soak for {seconds} s on {leg_name}: alloc and live heap, continuous");
    let bg = spawn_app(&setup.leg, setup.runtimes.wine(), &spec)?;
    let pid = bg.id();
    let start = Instant::now();
    let mut readings: Vec<(f64, u64)> = Vec::new();
    while start.elapsed().as_secs_f64() < seconds + 5.0 {
        match rss_kib(pid) {
            Some(kib) => readings.push((start.elapsed().as_secs_f64(), kib)),
            None => break,
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    let outcome = bg.finish(Duration::from_secs(120))?;
    outcome.check_exit()?;
    let third = |k: usize| -> u64 {
        let n = readings.len();
        readings[n * k / 3..n * (k + 1) / 3]
            .iter()
            .map(|r| r.1)
            .max()
            .unwrap_or(0)
    };
    if readings.len() < 6 {
        return Err(format!("only {} memory readings", readings.len()).into());
    }
    let (first, middle, last) = (third(0), third(1), third(2));
    // The example sampler writes its records beside `CLRPROF_OUTPUT`, as
    // `<CLRPROF_OUTPUT>.jsonl` (the outcome's own records are the text
    // output's).
    let (records, _) = clrprof_testing::background::read_records(&work.join("records.jsonl.jsonl"));
    let heap = records
        .iter()
        .chain(outcome.records.iter())
        .find(|r| r["event"] == "live-heap")
        .cloned()
        .unwrap_or_default();
    let bounded = last <= middle + (middle / 20).max(8 * 1024)
        && heap["tracking"].as_u64().is_some_and(|t| t <= 4096);
    println!(
        "==> resident memory, highest per third: {first} KiB, {middle} KiB, {last} KiB ({}); live heap at the end: {heap}",
        if bounded { "bounded" } else { "GROWING" }
    );
    let out = setup.out_dir.join("heap-soak.json");
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&json!({
            "leg": leg_name,
            "seconds": seconds,
            "rss_kib": readings.iter().map(|r| json!([r.0, r.1])).collect::<Vec<_>>(),
            "highest_per_third_kib": [first, middle, last],
            "live_heap": heap,
            "app": outcome.stdout,
            "bounded": bounded,
        }))?,
    )?;
    println!("wrote {}", out.display());
    if !bounded {
        return Err("memory grew over the soak".into());
    }
    Ok(())
}
