//! Heap snapshots on real runtimes, matched against `dotnet-gcdump`
//! (apps/heapdump.cs: its own types in known numbers, strings, arrays and
//! collections, then it waits without allocating).
//!
//! At the app's known point, `clrprof heap --pid` (the CLI attaches the
//! example sampler, which forces a full collection, counts every live
//! object by type and detaches) and then `dotnet-gcdump collect` (NuGet's
//! 10.0.750501, provisioned with the legs) each take the heap; then:
//! - the snapshot has the app's own counts exactly;
//! - for every type `dotnet-gcdump report` lists with 10 or more objects
//!   (its size classes, `System.String (Bytes > 10K)` and the like, added
//!   up), the snapshot has the same count;
//! - total bytes agree within 1 %.
//!
//! The dotnet-gcdump match runs on one leg per way the snapshot is taken
//! ([`GCDUMP_LEGS`]); .NET Core 3.1, 9 and 11 check the app's counts only.
//!
//! Names: `dotnet-gcdump` (TraceEvent) names a nested type by its own name
//! at the top level (`Entry<System.String,System.Int32>[]` for
//! `Dictionary<,>+Entry[]`); both sides are compared after the enclosing
//! types are dropped there.

use clrprof_testing::background::{spawn_app, wait_for_file};
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::nuget::{Feed, Quiet};
use clrprof_testing::Os;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

type R<T> = Result<T, Verdict>;

/// The native `clrprof` CLI, built by cargo.
pub(crate) fn native_cli() -> R<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(clrprof_testing::build::cargo())
        .current_dir(&workspace)
        .args([
            "build",
            "--quiet",
            "--message-format=json-render-diagnostics",
            "-p",
            "clrprof-cli",
        ])
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building clrprof-cli failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "clrprof")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| "cargo reported no clrprof".into())
}

/// `dotnet-gcdump`'s dll (fetched and checked on first use) and the
/// `dotnet` that runs it (the compiler leg's: the tool is built for .NET 8).
fn gcdump(case: &Case<'_>) -> R<(PathBuf, PathBuf)> {
    let dll = clrprof_testing::peer_tools::tool_dll(
        case.cache_dir(),
        &clrprof_testing::peer_tools::DOTNET_GCDUMP,
        &Feed::configured(),
        &Quiet,
    )
    .map_err(|e| Verdict::Failed(format!("dotnet-gcdump: {e}")))?;
    let runtimes = clrprof_testing::discover();
    let host = runtimes
        .legs
        .iter()
        .find(|l| l.name == clrprof_testing::runtime_pack::COMPILER_LEG)
        .map(|l| l.host.clone())
        .ok_or("no linux-x64-10.0 leg to run dotnet-gcdump on")?;
    Ok((dll, host))
}

fn tool(host: &Path, dll: &Path) -> Command {
    let mut cmd = Command::new(host);
    cmd.args(["exec", "--roll-forward", "LatestMajor"])
        .arg(dll)
        .env("DOTNET_CLI_TELEMETRY_OPTOUT", "1")
        .env("DOTNET_NOLOGO", "1");
    cmd
}

/// What `dotnet-gcdump report` says: per type (size classes added up),
/// objects; and the heap's total bytes and objects.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) types: BTreeMap<String, u64>,
    pub(crate) bytes: u64,
    pub(crate) objects: u64,
}

fn number(s: &str) -> Option<u64> {
    s.replace(',', "").parse().ok()
}

/// Parses the `heapstat` report.
pub(crate) fn parse_report(text: &str) -> Result<Report, String> {
    let mut r = Report::default();
    let mut in_table = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_suffix("GC Heap bytes") {
            r.bytes = number(v.trim()).ok_or_else(|| format!("bad line {line:?}"))?;
            continue;
        }
        if let Some(v) = t.strip_suffix("GC Heap objects") {
            r.objects = number(v.trim()).ok_or_else(|| format!("bad line {line:?}"))?;
            continue;
        }
        if t.starts_with("Object Bytes") {
            in_table = true;
            continue;
        }
        if !in_table || t.is_empty() {
            continue;
        }
        // `bytes  count  type  [module]`; the count is blank for some rows.
        let mut parts = t.splitn(2, char::is_whitespace);
        let _size = parts.next();
        let rest = parts.next().unwrap_or("").trim_start();
        let (count, name) = match rest.split_once(char::is_whitespace) {
            Some((c, n)) if number(c).is_some() => (number(c).unwrap_or(0), n.trim()),
            _ => (0, rest),
        };
        let name = match name.rfind("  [") {
            Some(i) if name.ends_with(']') => &name[..i],
            _ => name,
        };
        let name = match name.find(" (Bytes > ") {
            Some(i) => &name[..i],
            None => name,
        };
        *r.types.entry(top_level_name(name)).or_default() += count;
    }
    if !in_table {
        return Err(format!("no table in the report:\n{text}"));
    }
    Ok(r)
}

/// The name after the enclosing types at the top level (outside `<>`).
pub(crate) fn top_level_name(name: &str) -> String {
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in name.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '+' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    name[start..].to_string()
}

/// The snapshot's types, counted under [`top_level_name`] (and with
/// TraceEvent's spelling of compiler-generated names: `[]c` for `<>c`).
fn snapshot_types(json: &Value) -> Result<BTreeMap<String, u64>, String> {
    let mut out = BTreeMap::new();
    for t in json["types"].as_array().ok_or("snapshot without types")? {
        let name = t["type"].as_str().ok_or("a type without a name")?;
        let name = top_level_name(name).replace("<>", "[]");
        *out.entry(name).or_default() += t["objects"].as_u64().unwrap_or(0);
    }
    Ok(out)
}

/// `clrprof heap --pid` into `out`.
fn clrprof_heap(cli: &Path, pid: u32, sampler: &Path, out: &Path) -> R<Value> {
    let run = Command::new(cli)
        .args(["heap", "--pid", &pid.to_string(), "--profiler"])
        .arg(sampler)
        .arg("-o")
        .arg(out)
        .output()
        .map_err(|e| format!("clrprof heap: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "clrprof heap failed: {}",
            String::from_utf8_lossy(&run.stderr)
        )
        .into());
    }
    let text = std::fs::read_to_string(out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(serde_json::from_str(&text).map_err(|e| format!("the snapshot is not JSON: {e}"))?)
}

/// A copy of the app beside a runtimeconfig that turns managed
/// `EventSource`s off (`System.Diagnostics.Tracing.EventSource.IsSupported`,
/// .NET 5 and later). Runtime fact: a `dotnet-gcdump` session enables the
/// runtime's provider, and the app's `NativeRuntimeEventSource` (the
/// managed side of the same name) answers the enabling by running managed
/// code in the app (building its manifest), on the diagnostics server's
/// thread, while the session asks for its collection: the objects it makes
/// before that collection are in `dotnet-gcdump`'s heap and were not in the
/// app's (seen: one `System.String` of 28 bytes in one run of three, and
/// 3,451 objects, 254 KB, left alive after the session). Without managed
/// event sources the session runs no managed code in the app.
fn without_event_sources(case: &Case<'_>, app: &Path) -> R<PathBuf> {
    let dir = case.spec(app).work_dir.join("app");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dll = dir.join("heapdump.dll");
    std::fs::copy(app, &dll).map_err(|e| format!("{}: {e}", dll.display()))?;
    let mut config: Value = serde_json::from_str(&case.leg().runtimeconfig_json())
        .map_err(|e| format!("runtimeconfig: {e}"))?;
    config["runtimeOptions"]["configProperties"] =
        serde_json::json!({ "System.Diagnostics.Tracing.EventSource.IsSupported": false });
    std::fs::write(dir.join("heapdump.runtimeconfig.json"), config.to_string())
        .map_err(|e| format!("runtimeconfig: {e}"))?;
    Ok(dll)
}

/// Whether `dotnet-gcdump`'s count `gcdump` of a type exceeds clrprof's
/// `before` by objects of dotnet-gcdump's own session, which a snapshot
/// taken `after` the session still finds (`before < gcdump <= after`), on a
/// runtime where the session runs managed code in the app that the app
/// cannot turn off. Runtime facts: .NET Core 3.1 has no
/// `EventSource.IsSupported` switch (it arrived in .NET 5), and its
/// `NativeRuntimeEventSource` answers the session's enabling with managed
/// code (seen: 37 more `System.SByte[]`, 107 where the app had 70, 125
/// after); .NET 11 starts a managed thread in the app for the session
/// (seen: a `Thread` with its `ManualResetEvent`, `SafeWaitHandle`,
/// `LowLevelLock` and 2 more `System.String`s in dotnet-gcdump's heap, the
/// strings still there after it). Elsewhere every count must be equal.
fn session_objects(case: &Case<'_>, before: u64, gcdump: u64, after: u64) -> bool {
    let leg = case.leg();
    let runs_managed_code = leg.name.ends_with("3.1") || leg.major() >= 11;
    runs_managed_code && before < gcdump && gcdump <= after
}

/// Whether `ty` is one of the objects the runtime's finalizer thread makes
/// after each full collection, which a snapshot may find waiting for
/// finalization and dotnet-gcdump's heap does not list. Runtime facts: the
/// shared `ArrayPool`'s trim (its `Gen2GcCallback`, run on the finalizer
/// thread after a generation-2 collection) enumerates its
/// `ConditionalWeakTable` (an enumerator with a finalizer, so one made
/// after the app's last collection is still on the heap, queued, through
/// the snapshot's collection) and reads `GC.GetGCMemoryInfo` (a
/// `GCMemoryInfoData`). Seen on .NET 9.0.23 in two runs of two and on
/// 10.0.15 in one of three: one of each in clrprof's snapshot and none in
/// dotnet-gcdump's heap; clrprof's second snapshot had none or one of each
/// (the trim after dotnet-gcdump's collection). Allowed only for these types,
/// as `before > gcdump`.
fn finalizer_work(ty: &str, before: u64, gcdump: u64) -> bool {
    let made_after_a_collection = ty == "System.GCMemoryInfoData"
        || ty == "Enumerator<System.Buffers.SharedArrayPoolThreadLocalArray[],System.Object>";
    made_after_a_collection && before > gcdump
}

/// The app's own counts (its `count TYPE N` lines), exactly.
fn app_counts(stdout: &str, ours: &BTreeMap<String, u64>) -> CaseResult {
    let mut n_types = 0;
    for line in stdout.lines().filter_map(|l| l.strip_prefix("count ")) {
        let (ty, n) = line.rsplit_once(' ').ok_or("bad count line")?;
        let n: u64 = n.parse().map_err(|_| "bad count")?;
        let got = ours.get(&top_level_name(ty)).copied().unwrap_or(0);
        if got != n {
            return Err(format!("the snapshot counts {got} {ty}, the app made {n}").into());
        }
        n_types += 1;
    }
    if n_types == 0 {
        return Err("the app printed no counts".into());
    }
    Ok(())
}

/// The legs where the snapshot is matched against dotnet-gcdump: one per
/// way clrprof takes it (`ObjectReferences` of a forced collection before
/// .NET 9, `EnumerateGCHeapObjects` from 9 on). The other legs check the
/// app's own counts only (dotnet-gcdump's collect and report cost about
/// 10 s a leg).
const GCDUMP_LEGS: &[&str] = &["linux-x64-8.0", "linux-x64-10.0"];

fn counts_exactly(case: &Case<'_>) -> CaseResult {
    if case.leg().os == Os::Windows {
        return counts_exactly_under_wine(case);
    }
    snapshot_case(case, false)
}

/// On a Windows leg: the Windows build of the CLI under Wine, in the app's
/// prefix (the runtime's diagnostics endpoint there is a Wine named pipe,
/// which only Windows code in that prefix reaches), `clrprof.exe heap
/// --pid` with the Windows sampler; the app's counts exactly.
fn counts_exactly_under_wine(case: &Case<'_>) -> CaseResult {
    use clrprof_testing::wine::to_wine_path;
    let wine = clrprof_testing::discover()
        .wine()
        .cloned()
        .ok_or("Windows leg without a Wine configuration")?;
    let exe = crate::attach::windows_cli()?;
    let sampler = case.profiler("sampler")?;
    let app = case.app("heapdump")?;
    let mut spec = case.spec(&app);
    let stop = spec.work_dir.join("stop");
    let ready = spec.work_dir.join("ready");
    let out = spec.work_dir.join("snapshot.json");
    for f in [&stop, &ready, &out] {
        let _ = std::fs::remove_file(f);
    }
    spec.args = vec![to_wine_path(&stop)?, to_wine_path(&ready)?];
    let work = spec.work_dir.clone();
    let runtimes = clrprof_testing::discover();
    let bg = spawn_app(case.leg(), runtimes.wine(), &spec)?;
    let pid: u32 = wait_for_file(&ready, Duration::from_secs(60))?
        .trim()
        .parse()
        .map_err(|_| "the ready file holds no pid")?;
    let mut cmd = Command::new(&wine.loader);
    cmd.arg(&exe)
        .args(["heap", "--pid", &pid.to_string(), "--profiler"])
        .arg(to_wine_path(&sampler.path)?)
        .arg("-o")
        .arg(to_wine_path(&out)?)
        .env("WINEPREFIX", &wine.prefix)
        .env("WINEDEBUG", "-all")
        .env_remove("CLRPROF_OUTPUT");
    let scratch = work.join("cli");
    let _ = std::fs::create_dir_all(&scratch);
    let done = clrprof_testing::run::run_captured(cmd, Duration::from_secs(120), &scratch);
    let _ = std::fs::write(&stop, "stop");
    let outcome = bg.finish(Duration::from_secs(60))?;
    outcome.check_exit()?;
    let done = done?;
    if !matches!(done.exit, clrprof_testing::run::Exit::Code(0)) {
        return Err(format!(
            "clrprof.exe heap ended {:?}: {}{}",
            done.exit, done.stdout, done.stderr
        )
        .into());
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("the snapshot is not JSON: {e}"))?;
    app_counts(&outcome.stdout, &snapshot_types(&json)?)?;
    println!(
        "    {} ({}, clrprof.exe under Wine): the app's counts exact; {} objects, {} bytes",
        case.leg().name,
        json["method"],
        json["objects"],
        json["bytes"]
    );
    Ok(())
}

fn matches_gcdump(case: &Case<'_>) -> CaseResult {
    snapshot_case(case, true)
}

fn snapshot_case(case: &Case<'_>, with_gcdump: bool) -> CaseResult {
    if case.leg().os == Os::Windows {
        return Err(Verdict::Skipped(
            "dotnet-gcdump on a Windows leg must run under Wine beside the app and reach its \
             named pipe; the Linux build of the tool cannot"
                .into(),
        ));
    }
    let tool_and_host = if with_gcdump {
        Some(gcdump(case)?)
    } else {
        None
    };
    let cli = native_cli()?;
    let sampler = case.profiler("sampler")?;
    let app = without_event_sources(case, &case.app("heapdump")?)?;
    let mut spec = case.spec(&app);
    let stop = spec.work_dir.join("stop");
    let ready = spec.work_dir.join("ready");
    let _ = std::fs::remove_file(&stop);
    let _ = std::fs::remove_file(&ready);
    spec.args = vec![stop.display().to_string(), ready.display().to_string()];
    let work = spec.work_dir.clone();
    let runtimes = clrprof_testing::discover();
    let bg = spawn_app(case.leg(), runtimes.wine(), &spec)?;
    let pid: u32 = wait_for_file(&ready, Duration::from_secs(60))?
        .trim()
        .parse()
        .map_err(|_| "the ready file holds no pid")?;
    // clrprof first: its attached profiler allocates nothing managed, so
    // dotnet-gcdump's heap is the app's; dotnet-gcdump's session afterwards,
    // then clrprof again (see `session_objects`).
    let json = match clrprof_heap(&cli, pid, &sampler.path, &work.join("snapshot.json")) {
        Ok(j) => j,
        Err(e) => {
            let _ = std::fs::write(&stop, "stop");
            return Err(e);
        }
    };
    let Some((dll, host)) = tool_and_host else {
        let _ = std::fs::write(&stop, "stop");
        let outcome = bg.finish(Duration::from_secs(60))?;
        outcome.check_exit()?;
        app_counts(&outcome.stdout, &snapshot_types(&json)?)?;
        println!(
            "    {} ({}): the app's counts exact; {} objects, {} bytes",
            case.leg().name,
            json["method"],
            json["objects"],
            json["bytes"]
        );
        return Ok(());
    };
    let dump = work.join("heap.gcdump");
    let _ = std::fs::remove_file(&dump);
    let collect = tool(&host, &dll)
        .args(["collect", "-p", &pid.to_string(), "-o"])
        .arg(&dump)
        .output()
        .map_err(|e| format!("dotnet-gcdump collect: {e}"))?;
    let after = clrprof_heap(&cli, pid, &sampler.path, &work.join("after.json"));
    let _ = std::fs::write(&stop, "stop");
    let outcome = bg.finish(Duration::from_secs(60))?;
    outcome.check_exit()?;
    if !collect.status.success() || !dump.is_file() {
        return Err(format!(
            "dotnet-gcdump collect failed: {}{}",
            String::from_utf8_lossy(&collect.stdout),
            String::from_utf8_lossy(&collect.stderr)
        )
        .into());
    }
    let report = tool(&host, &dll)
        .arg("report")
        .arg(&dump)
        .output()
        .map_err(|e| format!("dotnet-gcdump report: {e}"))?;
    let report_text = String::from_utf8_lossy(&report.stdout).to_string();
    let _ = std::fs::write(work.join("report.txt"), &report_text);
    let gc = parse_report(&report_text)?;
    let ours = snapshot_types(&json)?;
    let after = snapshot_types(&after?)?;
    app_counts(&outcome.stdout, &ours)?;
    // Every type dotnet-gcdump lists with 10 objects or more.
    let mut differ = Vec::new();
    let mut session = Vec::new();
    let mut finalizing = Vec::new();
    let mut finalizing_objects = 0;
    let mut compared = 0;
    for (ty, &n) in gc.types.iter().filter(|(_, &n)| n >= 10) {
        compared += 1;
        let got = ours.get(ty).copied().unwrap_or(0);
        let later = after.get(ty).copied().unwrap_or(0);
        if got == n {
            continue;
        }
        if session_objects(case, got, n, later) {
            session.push(format!("{ty} {got} < {n} <= {later}"));
        } else {
            differ.push(format!(
                "{ty}: dotnet-gcdump {n}, clrprof {got} (after it {later})"
            ));
        }
    }
    // Types under 10 objects: only the finalizer thread's own (see
    // `finalizer_work`) may be found by clrprof alone; they are taken out
    // of the totals below.
    for (ty, &got) in &ours {
        let n = gc.types.get(ty).copied().unwrap_or(0);
        let later = after.get(ty).copied().unwrap_or(0);
        if finalizer_work(ty, got, n) {
            finalizing.push(format!("{ty} {got} > {n}, after it {later}"));
            finalizing_objects += got - n;
        }
    }
    // dotnet-gcdump's "GC Heap objects" counts its graph's root nodes too
    // (static variables, handles, finalizer queue: nodes without a size,
    // which its table leaves out); its table's counts add up to the objects.
    let table: u64 = gc.types.values().sum();
    let objects = json["objects"].as_u64().unwrap_or(0);
    if table != objects - finalizing_objects.min(objects) && session.is_empty() {
        differ.push(format!(
            "objects: dotnet-gcdump's table {table}, clrprof {objects} ({finalizing_objects} of \
             them the finalizer thread's)"
        ));
    }
    let bytes = json["bytes"].as_u64().unwrap_or(0);
    let ratio = bytes as f64 / gc.bytes.max(1) as f64;
    println!(
        "    {} ({}): {compared} types with 10+ objects compared, {} differ, {} by the session's own objects{}, {} waiting for finalization{}; bytes {bytes} vs {} ({:+.2} %), objects {} vs {}",
        case.leg().name,
        json["method"],
        differ.len(),
        session.len(),
        if session.is_empty() { String::new() } else { format!(" ({})", session.join(", ")) },
        finalizing.len(),
        if finalizing.is_empty() { String::new() } else { format!(" ({})", finalizing.join(", ")) },
        gc.bytes,
        100.0 * (ratio - 1.0),
        json["objects"],
        gc.objects
    );
    if !differ.is_empty() {
        return Err(format!("per-type counts differ: {}", differ.join("; ")).into());
    }
    if (ratio - 1.0).abs() > 0.01 {
        return Err(format!("total bytes {bytes} vs dotnet-gcdump's {}", gc.bytes).into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "heap snapshot: clrprof heap --pid matches dotnet-gcdump per type (10+ objects) and in bytes",
            matches_gcdump,
        )
        .only_on(
            GCDUMP_LEGS,
            "one leg per way the snapshot is taken (ObjectReferences of a forced collection \
             before .NET 9, EnumerateGCHeapObjects from 9 on); the other legs count the app's \
             objects exactly",
        ),
        Scenario::new(
            "heap snapshot: clrprof heap --pid counts the app's own objects exactly",
            counts_exactly,
        )
        .only_on(
            &[
                "linux-x64-3.1",
                "linux-x64-9.0",
                "linux-x64-11.0",
                "win-x64-8.0",
                "win-x64-10.0",
            ],
            "the legs without the dotnet-gcdump match, which checks these counts too",
        ),
    ]
}
