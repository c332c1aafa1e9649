//! `clrprof heap --pid PID`: a heap snapshot of a running .NET process.
//!
//! Attaches the example sampler (`libsampler.so` / `sampler.dll`: the
//! library `--profiler` names, else `$CLRPROF_SAMPLER_LIBRARY`, else the one
//! next to this program) with the client data `heap_snapshot=PATH`; the
//! sampler forces a full collection, counts every live object by type
//! ([`clrprof_sampler::heap_snapshot`]), writes `PATH` (JSON), `PATH.txt`
//! and `PATH.pb.gz` (or `PATH.error`) and detaches. This program waits for
//! them, then prints the text (sorted by bytes) or writes `-o FILE` in the
//! format `--format` or FILE's name asks for (`.json`, `.txt`, `.pb.gz`).
//!
//! Also the reader of snapshot files for `clrprof convert` and
//! `clrprof flamegraph` ([`read_snapshot`]).

use clap::ValueEnum;
use clrprof_sampler::heap_snapshot::{HeapSnapshot, TypeCount};
use clrprof_testing::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, UNIX_EPOCH};

/// A snapshot file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SnapshotFormat {
    /// JSON (`clrprof-heap-snapshot`, version 1).
    Json,
    /// Text, one line per type, by bytes.
    Text,
    /// pprof: one sample per type, `objects`/`count` and `space`/`bytes`.
    Pprof,
}

impl SnapshotFormat {
    fn from_name(path: &Path) -> SnapshotFormat {
        let name = path.to_string_lossy().to_lowercase();
        if name.ends_with(".pb.gz") || name.ends_with(".pb") || name.ends_with(".pprof") {
            SnapshotFormat::Pprof
        } else if name.ends_with(".json") {
            SnapshotFormat::Json
        } else {
            SnapshotFormat::Text
        }
    }
}

/// The sampler library: `given`, `$CLRPROF_SAMPLER_LIBRARY`, or next to
/// this program.
fn sampler_library(given: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("CLRPROF_SAMPLER_LIBRARY").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let name = if cfg!(windows) {
        "sampler.dll"
    } else {
        "libsampler.so"
    };
    let exe = std::env::current_exe().map_err(|e| Error::new(e.to_string()))?;
    let next = exe.with_file_name(name);
    if next.is_file() {
        return Ok(next);
    }
    Err(Error::new(format!(
        "no sampler library: pass --profiler LIB (the example sampler, `cargo build -p sampler`), \
         set CLRPROF_SAMPLER_LIBRARY, or put {name} next to {}",
        exe.display()
    )))
}

/// `clrprof heap`.
pub fn run(
    pid: u32,
    profiler: Option<&Path>,
    output: Option<&Path>,
    format: Option<SnapshotFormat>,
    timeout_ms: u64,
) -> Result<ExitCode, Error> {
    let library = sampler_library(profiler)?;
    let dir = std::env::temp_dir().join(format!(
        "clrprof-heap-{pid}-{}",
        UNIX_EPOCH.elapsed().map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::new(format!("cannot create {}: {e}", dir.display())))?;
    let result = snapshot_into(pid, &library, &dir, timeout_ms);
    let outcome = result.and_then(|(json, snapshot)| deliver(&json, &snapshot, output, format));
    let _ = std::fs::remove_dir_all(&dir);
    outcome.map(|()| ExitCode::SUCCESS)
}

/// Attaches, waits for the snapshot in `dir`, and reads it.
fn snapshot_into(
    pid: u32,
    library: &Path,
    dir: &Path,
    timeout_ms: u64,
) -> Result<(PathBuf, HeapSnapshot), Error> {
    let json = dir.join("snapshot.json");
    let data = format!("heap_snapshot={}", json.display());
    if let Err(message) = crate::attach::attach(pid, library, None, Some(&data), timeout_ms) {
        return Err(Error::new(format!("attach failed: {message}")));
    }
    let error = dir.join("snapshot.json.error");
    let deadline = Instant::now() + Duration::from_millis(timeout_ms.max(1000)) * 6;
    loop {
        if json.is_file() {
            let text = std::fs::read_to_string(&json)
                .map_err(|e| Error::new(format!("cannot read {}: {e}", json.display())))?;
            let snapshot = read_snapshot(&text).map_err(Error::new)?;
            return Ok((json, snapshot));
        }
        if let Ok(why) = std::fs::read_to_string(&error) {
            return Err(Error::new(format!(
                "the snapshot failed in process {pid}: {why}"
            )));
        }
        if Instant::now() > deadline {
            return Err(Error::new(format!(
                "no snapshot from process {pid} within {} s",
                (timeout_ms.max(1000) * 6) / 1000
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Prints the text, or writes `output` in its format.
fn deliver(
    json: &Path,
    snapshot: &HeapSnapshot,
    output: Option<&Path>,
    format: Option<SnapshotFormat>,
) -> Result<(), Error> {
    let Some(out) = output else {
        print!("{}", snapshot.to_text());
        return Ok(());
    };
    let format = format.unwrap_or_else(|| SnapshotFormat::from_name(out));
    let written = match format {
        SnapshotFormat::Json => std::fs::copy(json, out).map(|_| ()),
        SnapshotFormat::Text => std::fs::write(out, snapshot.to_text()),
        SnapshotFormat::Pprof => std::fs::write(
            out,
            clrprof_sampler::kinds::gzip_pprof(&snapshot.to_pprof()),
        ),
    };
    written.map_err(|e| Error::new(format!("cannot write {}: {e}", out.display())))?;
    eprintln!(
        "clrprof: heap snapshot of {} objects, {} bytes, {} types ({}) -> {}",
        snapshot.objects(),
        snapshot.bytes(),
        snapshot.types.len(),
        snapshot.method,
        out.display()
    );
    Ok(())
}

/// `true` if `text` is a snapshot file's JSON.
pub fn is_snapshot(text: &str) -> bool {
    let head: String = text.chars().take(200).collect();
    head.contains("\"clrprof-heap-snapshot\"")
}

/// Reads a snapshot's JSON ([`HeapSnapshot::to_json`]).
pub fn read_snapshot(text: &str) -> Result<HeapSnapshot, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not a snapshot (not JSON: {e})"))?;
    if v["format"] != "clrprof-heap-snapshot" || v["version"] != 1 {
        return Err("not a clrprof heap snapshot (format clrprof-heap-snapshot, version 1)".into());
    }
    let types = v["types"]
        .as_array()
        .ok_or("a snapshot without types")?
        .iter()
        .map(|t| {
            Ok(TypeCount {
                name: t["type"]
                    .as_str()
                    .ok_or("a type without a name")?
                    .to_string(),
                objects: t["objects"].as_u64().ok_or("a type without objects")?,
                bytes: t["bytes"].as_u64().ok_or("a type without bytes")?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(HeapSnapshot {
        runtime: v["runtime"].as_str().map(String::from),
        method: v["method"].as_str().unwrap_or("").to_string(),
        taken_at: UNIX_EPOCH + Duration::from_millis(v["taken_at_ms"].as_u64().unwrap_or(0)),
        duration: Duration::from_secs_f64(
            v["duration_ms"].as_f64().unwrap_or(0.0).max(0.0) / 1000.0,
        ),
        types,
        unnamed: v["unnamed"].as_u64().unwrap_or(0),
        allocated_since: v["allocated_since"].as_u64().unwrap_or(0),
    })
}

/// A snapshot as folded stacks: one line per type, its bytes (a flame
/// graph of the heap by type).
pub fn snapshot_folded(snapshot: &HeapSnapshot) -> String {
    let mut s = String::new();
    for t in &snapshot.types {
        // `;` separates frames and the count follows the last space.
        let name = t.name.replace(';', ":").replace(' ', "_");
        s.push_str(&format!("{name} {}\n", t.bytes));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_back_from_its_json() {
        let s = HeapSnapshot {
            runtime: Some("10.0.15".into()),
            method: "enumerate-gc-heap-objects".into(),
            taken_at: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            duration: Duration::from_micros(12_500),
            types: vec![
                TypeCount {
                    name: "System.Collections.Generic.Dictionary<System.String,System.Int32>"
                        .into(),
                    objects: 30,
                    bytes: 2400,
                },
                TypeCount {
                    name: "Node".into(),
                    objects: 5000,
                    bytes: 160_000,
                },
            ],
            unnamed: 0,
            allocated_since: 3,
        };
        let json = s.to_json();
        assert!(is_snapshot(&json));
        assert_eq!(read_snapshot(&json).unwrap(), s);
        assert!(read_snapshot("{\"shared\":{}}").is_err());
        assert_eq!(
            snapshot_folded(&s),
            "System.Collections.Generic.Dictionary<System.String,System.Int32> 2400\nNode 160000\n"
        );
        assert_eq!(
            SnapshotFormat::from_name(Path::new("a.pb.gz")),
            SnapshotFormat::Pprof
        );
        assert_eq!(
            SnapshotFormat::from_name(Path::new("a.json")),
            SnapshotFormat::Json
        );
        assert_eq!(
            SnapshotFormat::from_name(Path::new("a.txt")),
            SnapshotFormat::Text
        );
    }
}
