//! EventPipe from a profiler in real runtimes (the heap-events fixture on
//! apps/eventpipe.cs): the profiler defines a provider and a typed event of
//! twelve fields, writes one event per `Pipe.Marker` the app allocates,
//! starts a session on its provider and on the runtime's own, and receives
//! everything back through `EventPipeEventDelivered`. Checked: the events
//! delivered are exactly the events written, value for value, as many as
//! the app made markers, decoded by type and by their metadata, inside the
//! write; the runtime's `GCStart` events arrive, one per collection the app
//! induced (and the profiler's own GC callbacks agree); the provider's
//! enable callback sees the session's level and keywords, and its disable
//! at the stop; a provider added to the running session is enabled only if
//! created after. Runtimes without Info12 must answer `Unsupported` (the
//! leg is then reported skipped, naming the runtime).

use crate::heap::{info_version, require_checks, run_pair_app, runtime_version};
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};

const EVENTPIPE: &str = "{3C1E9A57-2B4D-4E8F-9A61-5D7C0B2E4F03}";

/// `<prefix><n>` from the app's output.
fn app_number(stdout: &str, prefix: &str) -> Result<u64, String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("the app printed no {prefix:?} line"))
}

fn eventpipe_scenario(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = run_pair_app(case, "eventpipe", EVENTPIPE, &[], &[])?;
    let version = info_version(&traced)?;
    if version < 12 {
        require_checks(&traced, &["eventpipe_unsupported"])?;
        return Err(Verdict::Skipped(format!(
            "{} offers ICorProfilerInfo{version}; EventPipe from a profiler needs ICorProfilerInfo12 (.NET 5+), and the SDK answered Unsupported",
            runtime_version(&traced)
        )));
    }
    let mut checks = vec![
        "set_up",
        "provider_name",
        "define_event_needs_names",
        "write_empty",
        "empty_event",
        "activity_id",
        "metadata_describes_fields",
        "delivered_inside_write",
        "delivered_provider",
        "stop_session",
    ];
    if version < 14 {
        checks.push("provider_callback_unsupported");
    }
    require_checks(&traced, &checks)?;
    // Every event written came back, in order, value for value.
    let markers = app_number(&plain.stdout, "markers ")?;
    let written: Vec<&str> = traced
        .events("written")
        .filter_map(|r| r["values"].as_str())
        .collect();
    let delivered: Vec<&str> = traced
        .events("delivered")
        .filter_map(|r| r["values"].as_str())
        .collect();
    if written.len() as u64 != markers {
        return Err(format!(
            "the app made {markers} markers, the profiler wrote {} events",
            written.len()
        )
        .into());
    }
    if delivered != written {
        let first = written
            .iter()
            .zip(&delivered)
            .position(|(w, d)| w != d)
            .unwrap_or(written.len().min(delivered.len()));
        return Err(format!(
            "{} written, {} delivered; first difference at {first}: wrote {:?}, got {:?}",
            written.len(),
            delivered.len(),
            written.get(first),
            delivered.get(first)
        )
        .into());
    }
    // The runtime's own provider: one GCStart per induced collection.
    let collections = app_number(&plain.stdout, "collections ")?;
    let starts: Vec<&serde_json::Value> = traced
        .events("gc_start")
        .filter(|r| r["reason"] == 1)
        .collect();
    let induced_seen = traced
        .events("gc_started")
        .filter(|r| r["induced"] == true)
        .count() as u64;
    if starts.len() as u64 != collections || induced_seen != collections {
        return Err(format!(
            "the app induced {collections} collections; GCStart events with reason Induced: {}, GarbageCollectionStarted (induced): {induced_seen}",
            starts.len()
        )
        .into());
    }
    let counts: Vec<u64> = starts.iter().filter_map(|r| r["count"].as_u64()).collect();
    if starts.iter().any(|r| r["depth"] != 2 || r["version"] != 2)
        || counts.windows(2).any(|w| w[1] <= w[0])
    {
        return Err(format!("GCStart events: {starts:?}").into());
    }
    // The provider's enable callback (Info14).
    if version >= 14 {
        let calls: Vec<&serde_json::Value> = traced.events("provider_callback").collect();
        let ok = calls.len() == 2
            && calls[0]["enabled"] == true
            && calls[1]["enabled"] == false
            && calls
                .iter()
                .all(|c| c["level"] == 5 && c["any"] == "0xf0" && c["all"] == "0x0");
        if !ok {
            return Err(format!("provider callbacks: {calls:?}").into());
        }
    }
    // Added to the running session: only the provider created afterwards.
    let added: Vec<(&str, &str)> = traced
        .events("added_delivered")
        .filter_map(|r| Some((r["provider"].as_str()?, r["values"].as_str()?)))
        .collect();
    if added != [("Clrprof-Added-Later", "Ok((2,))")] {
        return Err(format!("events of providers added to the running session: {added:?}").into());
    }
    if !traced
        .events("provider_created")
        .any(|r| r["name"] == "Microsoft-Windows-DotNETRuntime")
    {
        return Err("EventPipeProviderCreated never named the runtime's provider".into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "eventpipe: a typed event round trip from a profiler, the runtime's GC events, provider callbacks",
        eventpipe_scenario,
    )]
}
