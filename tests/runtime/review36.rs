//! Review 36 (provenance): exploratory runs of the `review36-profiler`
//! attacks on the `review36` app. Each run's records go to
//! `$REVIEW36_DUMP/<leg>-<probe>.jsonl` when that variable is set; the
//! scenario fails when the app's exit status or output changed under the
//! profiler.

use clrprof_testing::harness::{Case, CaseResult, Scenario};

const PROBES: &[(&str, &str)] = &[
    ("tokens", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3601}"),
    ("rejit-ids", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3602}"),
    ("fields", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3603}"),
    ("il-map", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3604}"),
    ("epoch", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3605}"),
    ("dynamic-body", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3606}"),
    ("rejit-in-coop", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3608}"),
    ("emit", "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3609}"),
];

fn run_probe(case: &Case<'_>, probe: &str) -> CaseResult {
    let clsid = PROBES
        .iter()
        .find(|(n, _)| *n == probe)
        .map(|(_, c)| *c)
        .ok_or("no such probe")?;
    let app = case.app_with(
        "review36",
        clrprof_testing::csharp::CompileOptions::default(),
    )?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let profiler = case.profiler_class("review36-profiler", clsid)?;
    let mut spec = case.spec(&app).profiler(profiler);
    for k in [
        "REVIEW_EPOCH",
        "REVIEW_EMIT",
        "REVIEW_EMIT_APPLY",
        "REVIEW_EMIT_METHOD",
    ] {
        if let Ok(v) = std::env::var(k) {
            spec = spec.env(k, &v);
        }
    }
    let traced = case.run(spec.timeout(std::time::Duration::from_secs(60)))?;
    if let Ok(dir) = std::env::var("REVIEW36_DUMP") {
        let path = std::path::Path::new(&dir).join(format!("{}-{probe}.jsonl", case.leg().name));
        let mut text = String::new();
        for r in &traced.records {
            text.push_str(&r.to_string());
            text.push('\n');
        }
        text.push_str(&format!(
            "{{\"event\":\"__exit\",\"exit\":{:?},\"stdout\":{:?},\"stderr\":{:?}}}\n",
            format!("{:?}", traced.exit),
            traced.stdout,
            traced
                .stderr
                .chars()
                .rev()
                .take(3000)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
        ));
        let _ = std::fs::write(path, text);
    }
    // A class the emit probe adds is one more type for the app's
    // `GetTypes()` (that is what injecting a type is for): there only the
    // exit status is compared.
    let same_output = traced.stdout == plain.stdout
        || (probe == "emit" && traced.stdout.lines().next() == plain.stdout.lines().next());
    if !same_output || format!("{:?}", traced.exit) != format!("{:?}", plain.exit) {
        return Err(format!(
            "the app changed under the {probe} probe:\nwithout ({:?}): {:?}\nwith    ({:?}): {:?}\nstderr: {}",
            plain.exit,
            plain.stdout,
            traced.exit,
            traced.stdout,
            traced.stderr.chars().take(3000).collect::<String>()
        )
        .into());
    }
    Ok(())
}

/// The managed-handlers probe on the `review36alc` app, whose plugin
/// context holds the handler assembly.
fn handlers_in_plugin_context(case: &Case<'_>) -> CaseResult {
    let app = case.app("review36alc")?;
    let handlers = case.app("wraphandlers")?;
    let handlers = handlers.to_string_lossy().to_string();
    let plain = case.run(case.spec(&app).env("REVIEW_HANDLERS", &handlers))?;
    plain.check()?;
    let profiler = case.profiler_class(
        "review36-profiler",
        "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3607}",
    )?;
    let traced = case.run(
        case.spec(&app)
            .env("REVIEW_HANDLERS", &handlers)
            .profiler(profiler),
    )?;
    let records: Vec<String> = traced.records.iter().map(|r| r.to_string()).collect();
    eprintln!("    records: {records:?}");
    if traced.stdout != plain.stdout || format!("{:?}", traced.exit) != format!("{:?}", plain.exit)
    {
        return Err(format!(
            "the app changed under the profiler:\nwithout ({:?}): {:?}\nwith    ({:?}): {:?}\nstderr: {}",
            plain.exit,
            plain.stdout,
            traced.exit,
            traced.stdout,
            traced.stderr.chars().take(1500).collect::<String>()
        )
        .into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    std::iter::once(Scenario::new(
        "review36: managed handlers seen in a plugin context",
        handlers_in_plugin_context,
    ))
    .chain(PROBES.iter().map(|(probe, _)| {
        let probe: &'static str = probe;
        Scenario::new(&format!("review36: {probe}"), move |case: &Case<'_>| {
            run_probe(case, probe)
        })
    }))
    .collect()
}
