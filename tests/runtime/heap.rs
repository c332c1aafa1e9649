//! GC handles and heap inspection in real runtimes (the heap-events
//! fixture on apps/heap.cs):
//! - handles (Info13): an object nothing else references, held by a strong
//!   handle, reads back exactly what the app made after each of five
//!   induced collections; a pinned object stays at its address; a weak
//!   handle reports the object gone once the app released it; typed objects
//!   only in scopes that block collections; explicit destroys succeed.
//!   Runtimes without Info13 must answer `Unsupported` (then the leg is
//!   reported skipped, naming the runtime);
//! - heap (Info10, 14, 15): an object's references match its fields,
//!   `IsFrozenObject` is true exactly for the string literal on runtimes
//!   with the non-GC heap, which lists it within its bounds;
//!   `GetLOHObjectSizeThreshold` reports the default and a threshold set
//!   through `GCLOHThreshold` once the GC heap is initialized (and already
//!   in `Initialize` on 3.1 and 8; from .NET 9 on the runtime would answer
//!   the default there, and the SDK refuses the call), and the GC puts the
//!   app's arrays on either side of it accordingly; `EnumerateGCHeapObjects`
//!   is `Unsupported` without Info15, and with it (.NET 9+) two walks right
//!   after the app's collections count by class exactly the objects the app
//!   keeps reachable (`gc_heap_walks`).

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;

const HANDLES: &str = "{3C1E9A57-2B4D-4E8F-9A61-5D7C0B2E4F01}";
const HEAP: &str = "{3C1E9A57-2B4D-4E8F-9A61-5D7C0B2E4F02}";

/// Runs the heap app plain and under `clsid` with `args` and `env`; checks
/// the app's output is unchanged and no check failed.
pub fn run_pair(
    case: &Case<'_>,
    clsid: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(Outcome, Outcome), Verdict> {
    run_pair_app(case, "heap", clsid, args, env)
}

/// As [`run_pair`] for app `app_name`.
pub fn run_pair_app(
    case: &Case<'_>,
    app_name: &str,
    clsid: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(Outcome, Outcome), Verdict> {
    let app = case.app(app_name)?;
    let mut plain_spec = case.spec(&app);
    plain_spec.args = args.iter().map(|a| a.to_string()).collect();
    for (k, v) in env {
        plain_spec = plain_spec.env(k, v);
    }
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let profiler = case.profiler_class("heap-events-profiler", clsid)?;
    let mut spec = case.spec(&app).profiler(profiler);
    spec.args = args.iter().map(|a| a.to_string()).collect();
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let traced = case.run(spec)?;
    traced.check()?;
    if traced.stdout != plain.stdout {
        return Err(format!(
            "app output changed under the profiler:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    let failed: Vec<String> = traced
        .events("check")
        .filter(|r| r["ok"] != true)
        .map(|r| format!("{}: {}", r["name"], r["detail"]))
        .collect();
    if !failed.is_empty() {
        return Err(format!("failed checks:\n{}", failed.join("\n")).into());
    }
    Ok((plain, traced))
}

/// The highest `ICorProfilerInfoN` the runtime offered (the fixture's record).
pub fn info_version(traced: &Outcome) -> Result<u64, String> {
    traced
        .events("info_version")
        .next()
        .and_then(|r| r["version"].as_u64())
        .ok_or_else(|| "no info_version record".to_string())
}

/// The runtime's product name and version, e.g. `.NET Core 3.1.23`.
pub fn runtime_version(traced: &Outcome) -> String {
    let v = traced
        .runtime_record()
        .and_then(|r| r["version"].as_str())
        .unwrap_or("?");
    let major: u32 = v
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 5 {
        format!(".NET Core {v}")
    } else {
        format!(".NET {v}")
    }
}

/// Every named check was written, and passed (failures are caught by `run_pair`).
pub fn require_checks(traced: &Outcome, names: &[&str]) -> Result<(), String> {
    let passed: Vec<&str> = traced
        .events("check")
        .filter_map(|r| r["name"].as_str())
        .collect();
    let missing: Vec<&&str> = names.iter().filter(|n| !passed.contains(n)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("checks never run: {missing:?}; ran {passed:?}"))
    }
}

/// The app's `kept N TEXT V1,V2,V3` line.
fn kept_truth(stdout: &str) -> Result<(i64, String, Vec<i64>), String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("kept "))
        .ok_or("the app printed no kept line")?;
    let mut parts = line.split(' ');
    let number = parts
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or("bad kept number")?;
    let text = parts.next().ok_or("no kept text")?.to_string();
    let values = parts
        .next()
        .ok_or("no kept values")?
        .split(',')
        .map(|v| v.parse().map_err(|_| format!("bad value {v}")))
        .collect::<Result<_, _>>()?;
    Ok((number, text, values))
}

fn handles_scenario(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = run_pair(case, HANDLES, &[], &[])?;
    let version = info_version(&traced)?;
    if version < 13 {
        require_checks(&traced, &["create_handle_unsupported"])?;
        return Err(Verdict::Skipped(format!(
            "{} offers ICorProfilerInfo{version}; GC handles need ICorProfilerInfo13 (.NET 7+), and create_handle answered Unsupported",
            runtime_version(&traced)
        )));
    }
    require_checks(
        &traced,
        &[
            "handle_gives_back_object",
            "object_needs_gc_blocked_scope",
            "object_raw_anywhere",
            "destroy_handles",
        ],
    )?;
    let (number, text, values) = kept_truth(&plain.stdout)?;
    // The app's account of the weakly held object, per round.
    let held: Vec<bool> = plain
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("round "))
        .map(|l| l.ends_with(" held"))
        .collect();
    let rounds: Vec<&serde_json::Value> = traced.events("handles_round").collect();
    if rounds.len() != held.len() || rounds.len() != 5 {
        return Err(format!(
            "{} rounds read through the handles, the app ran {} (expected 5)",
            rounds.len(),
            held.len()
        )
        .into());
    }
    for (i, r) in rounds.iter().enumerate() {
        let round = i + 1;
        let values_read: Vec<i64> = r["values"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
            .unwrap_or_default();
        if r["round"] != round
            || r["number"] != number
            || r["text"] != text.as_str()
            || values_read != values
        {
            return Err(format!(
                "round {round}: the strong handle read {r}, the app made ({number}, {text:?}, {values:?})"
            )
            .into());
        }
        if r["pinned_stayed"] != true || r["pinned_number"] != 7 {
            return Err(format!("round {round}: the pinned object: {r}").into());
        }
        if r["weak_alive"] != held[i] || r["weak_empty"] != !held[i] {
            return Err(format!(
                "round {round}: the weak handle says alive={} empty={}, the app {} the object",
                r["weak_alive"],
                r["weak_empty"],
                if held[i] { "held" } else { "released" }
            )
            .into());
        }
    }
    Ok(())
}

/// The app's `large N and M` line: the two byte-array lengths.
fn large_truth(stdout: &str) -> Result<(u64, u64), String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("large "))
        .ok_or("the app printed no large line")?;
    let (a, b) = line.split_once(" and ").ok_or("bad large line")?;
    Ok((
        a.trim().parse().map_err(|_| "bad length")?,
        b.trim().parse().map_err(|_| "bad length")?,
    ))
}

fn heap_scenario(case: &Case<'_>, threshold: u32) -> CaseResult {
    let args = [threshold.to_string()];
    let hex = format!("{threshold:x}");
    let env: Vec<(&str, &str)> = if threshold == 85_000 {
        Vec::new()
    } else {
        vec![
            ("DOTNET_GCLOHThreshold", hex.as_str()),
            ("COMPlus_GCLOHThreshold", hex.as_str()),
        ]
    };
    let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    let (plain, traced) = run_pair(case, HEAP, &args, &env)?;
    let version = info_version(&traced)?;
    let runtime = runtime_version(&traced);
    let mut checks = vec![
        "inspect_shown",
        "object_references",
        "object_references_stop",
    ];
    if version < 14 {
        checks.push("non_gc_heap_unsupported");
    }
    if version < 15 {
        checks.push("gc_heap_walk_unsupported");
    } else {
        checks.push("gc_heap_walk");
    }
    require_checks(&traced, &checks)?;
    if version >= 15 {
        gc_heap_walks(&plain.stdout, &traced)?;
    }
    // The threshold the runtime reports is the one it was started with,
    // once its GC heap is initialized. In Initialize, .NET 3.1 and 8 answer
    // it too (the EE's own reading of the setting); from .NET 9 on the
    // runtime answers the GC's threshold, which the GC sets after the
    // profiler's Initialize (85,000 there whatever the setting), and the
    // SDK refuses the call there instead.
    let reported = |event: &str| {
        traced
            .events(event)
            .next()
            .and_then(|r| r["value"].as_str())
            .unwrap_or("none")
            .to_string()
    };
    let after_start = reported("loh_threshold_after_start");
    if after_start != threshold.to_string() {
        return Err(format!(
            "GetLOHObjectSizeThreshold said {after_start} after startup, the runtime was started \
             with {threshold}"
        )
        .into());
    }
    let in_initialize = traced
        .events("loh_threshold")
        .next()
        .cloned()
        .ok_or("no loh_threshold record")?;
    let refused = in_initialize["error_kind"] == "refused for the runtime version";
    let expected_in_initialize = if version >= 15 {
        refused
    } else {
        in_initialize["value"].as_str() == Some(threshold.to_string().as_str())
    };
    if !expected_in_initialize {
        return Err(format!(
            "GetLOHObjectSizeThreshold in Initialize on {runtime} (Info{version}), started with \
             {threshold}: {in_initialize}"
        )
        .into());
    }
    // ... and the one the GC applies: of the app's two arrays, the one at
    // the threshold is on the large-object heap, the one 1,000 below is not.
    let (big, small) = large_truth(&plain.stdout)?;
    let arrays: Vec<(u64, bool)> = traced
        .events("large_array")
        .filter_map(|r| Some((r["size"].as_u64()?, r["loh"].as_bool()?)))
        .collect();
    let on_loh = |len: u64| {
        arrays
            .iter()
            .find(|(size, _)| *size >= len && *size < len + 64)
            .map(|(_, loh)| *loh)
    };
    if on_loh(big) != Some(true) || on_loh(small) != Some(false) || arrays.len() != 2 {
        return Err(format!(
            "arrays of {big} and {small} bytes: the profiler saw {arrays:?} (size, on the LOH)"
        )
        .into());
    }
    let refs = traced
        .events("references")
        .next()
        .ok_or("no references record")?;
    if refs["count"] != 3 {
        return Err(format!("Shown has 3 non-null references; the runtime walked {refs}").into());
    }
    // String literals are frozen on .NET 8 (the non-GC heap), not on 3.1.
    let frozen = traced.events("frozen").next().ok_or("no frozen record")?;
    let literal_frozen = version >= 14;
    if frozen["label"] != literal_frozen || frozen["text"] != false || frozen["shown"] != false {
        return Err(format!("IsFrozenObject on {runtime}: {frozen}").into());
    }
    if version >= 14 {
        let nongc = traced
            .events("non_gc_heap")
            .next()
            .ok_or("no non_gc_heap record")?;
        if nongc["segments"].as_u64().unwrap_or(0) == 0
            || nongc["objects"].as_u64().unwrap_or(0) == 0
            || nongc["label_in_bounds"] != true
            || nongc["label_listed"] != true
            || nongc["text_listed"] != false
        {
            return Err(format!("the non-GC heap on {runtime}: {nongc}").into());
        }
    }
    Ok(())
}

/// The two walks of the GC heap (Info15, .NET 9+), in rounds 1 and 3 right
/// after the app's induced collections, count by class exactly what the
/// app keeps reachable: its `listed` Heap.Listed, the one Heap.Shown, the
/// Heap.Dropped until round 3 (released before that round's collections),
/// no Heap.Kept and no Heap.Pinned (unreachable since `Make`: collected in
/// round 1), and the Heap.Checkpoint just allocated (the walk runs in its
/// `ObjectAllocated`: the object is on the heap already).
fn gc_heap_walks(stdout: &str, traced: &Outcome) -> CaseResult {
    let listed: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("listed "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or("the app printed no listed line")?;
    let walks: Vec<&serde_json::Value> = traced.events("gc_heap_walk").collect();
    let rounds: Vec<u64> = walks.iter().filter_map(|w| w["round"].as_u64()).collect();
    if rounds != [1, 3] {
        return Err(
            format!("GC heap walks in rounds {rounds:?}, expected [1, 3]: {walks:?}").into(),
        );
    }
    for w in &walks {
        let round = w["round"].as_u64().unwrap_or(0);
        let want = serde_json::json!({
            "Heap.Program": 0,
            "Heap.Kept": 0,
            "Heap.Pinned": 0,
            "Heap.Dropped": if round < 3 { 1 } else { 0 },
            "Heap.Shown": 1,
            "Heap.Listed": listed,
            "Heap.Checkpoint": 1,
        });
        let objects = w["objects"].as_u64().unwrap_or(0);
        if w["classes"] != want || w["class_unreadable"] != 0 || objects < listed + 2 {
            return Err(format!(
                "round {round}: the GC heap walk counted {} ({objects} objects, {} of unreadable class), the app keeps {want}",
                w["classes"], w["class_unreadable"]
            )
            .into());
        }
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "handles: strong, pinned and weak GC handles across five induced collections",
            handles_scenario,
        ),
        Scenario::new(
            "heap: object references, frozen objects, the non-GC heap, LOH threshold (default)",
            |case| heap_scenario(case, 85_000),
        ),
        Scenario::new(
            "heap: LOH threshold from the runtime's GCLOHThreshold setting",
            |case| heap_scenario(case, 0x30000),
        ),
    ]
}
