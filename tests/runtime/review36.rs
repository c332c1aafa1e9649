//! Review 36 (provenance): safe-code attacks of the `review36-profiler`
//! fixture (`#![forbid(unsafe_code)]`) inside real runtimes, each compared
//! with the app run without a profiler.
//!
//! Failing now (the host is hurt):
//! - "review36: managed handlers seen in a plugin context": entry
//!   token-module / `ManagedHandlers` (clrprof/src/instrumentation/mod.rs,
//!   `ManagedHandlers::module_loaded` ~987, `wrap_managed` ~1047). The
//!   handlers note the handler assembly in *any* module load (the marker
//!   says "only read and compared"), and `wrap_managed` then accepts them
//!   for a module of another load context. The `review36alc` app loads
//!   wraphandlers.dll into a plugin `AssemblyLoadContext`; the profiler
//!   wraps `ReviewAlc.Target::Work` (default context) as documented; the
//!   method's new `AssemblyRef` cannot bind there: unhandled
//!   `FileNotFoundException`, SIGABRT, on 3.1, 8.0 and 10.0 (the SDK's
//!   promise: "never a FileNotFoundException in the application").
//! - "review36: emit": entry token-module, its third claim ("a token
//!   handed to `MetaDataEmit` only becomes part of new rows ..., which
//!   only IL uses"; clrprof/src/metadata_emit.rs `define_static_class`
//!   ~349). Reflection reads new TypeDef rows too: a class defined with the
//!   app's sealed `Review.Tiny` (or a TypeRef row the module lacks) as its
//!   base makes the app's `Assembly.GetTypes()` throw
//!   `ReflectionTypeLoadException`: SIGABRT on 3.1, 8.0 and 10.0, with or
//!   without `ApplyMetaData` (`REVIEW_EMIT=object` defines a valid class:
//!   the app then lives).
//! - "review36: rejit-in-coop" (not a pair; safe code hanging the host):
//!   `ReJitThread::request_rejit` (clrprof/src/il/rejit.rs ~339) from
//!   `ObjectAllocated`, a scope the SDK itself marks as blocking
//!   collections, waits for a `RequestReJIT` that waits for this thread:
//!   the app hangs forever on 3.1, 8.0 and 10.0.
//!
//! Passing (the pair was refused by the SDK or answered harmlessly by the
//! runtime): tokens (`function_from_token_and_type_args` with classes that
//! do not declare the method: COR_E_TYPELOAD for generic ones, the
//! method's own FunctionID for non-generic ones), rejit-ids (made-up ReJIT
//! IDs: the default version's code), fields (every static getter with
//! every field on every class: the field's own address), il-map (a map of
//! offsets no body has), epoch (GC-triggering calls between two reads of
//! a new string in `ObjectAllocated`, with a thread collecting: no move),
//! dynamic-body (a dynamic method's `GetFunctionInfo` token is nil: `wrap`
//! refuses), the side-by-side partners and the multiplexer's `GcHandle`.
//!
//! Each probe run's records go to `$REVIEW36_DUMP/<leg>-<probe>.jsonl`
//! when that variable is set.

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

/// The side-by-side host (linux-x64-8.0 with linux-x64-3.1, concurrently)
/// on the `review36` app under the sxs probe: every use of one runtime's
/// partner in the other runtime's scope must be refused, and both apps
/// must print their normal output.
fn side_by_side(case: &Case<'_>) -> CaseResult {
    use clrprof_testing::run::{run_captured, Exit};
    const OTHER: &str = "linux-x64-3.1";
    let here = case.leg().clone();
    let other = case
        .other_leg(OTHER)
        .cloned()
        .ok_or("the linux-x64-3.1 leg is not available")?;
    let app = case.app_compiled_for("review36", OTHER)?;
    let alone = case.run(case.spec(&app))?;
    alone.check()?;
    let profiler = case.profiler_class(
        "review36-profiler",
        "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A360A}",
    )?;
    let dir = app
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join("review36-sxs");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let output = dir.join("records.jsonl");
    let _ = std::fs::remove_file(&output);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_clrprof-sxs-host"));
    cmd.arg("--concurrent")
        .arg(clrprof_testing::sxs::framework_dir(&other))
        .arg(&app)
        .arg(clrprof_testing::sxs::framework_dir(&here))
        .arg(&app)
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("CORECLR_ENABLE_PROFILING", "1")
        .env("CORECLR_PROFILER", &profiler.clsid)
        .env("CORECLR_PROFILER_PATH", &profiler.path)
        .env("CLRPROF_OUTPUT", &output);
    let out =
        run_captured(cmd, std::time::Duration::from_secs(180), &dir).map_err(|e| e.to_string())?;
    let records = std::fs::read_to_string(&output).unwrap_or_default();
    eprintln!("    sxs records:\n{records}");
    if !matches!(out.exit, Exit::Code(0)) {
        return Err(format!("host failed: {:?}; stderr: {}", out.exit, out.stderr).into());
    }
    let mut want: Vec<&str> = alone.stdout.lines().chain(alone.stdout.lines()).collect();
    let mut got: Vec<&str> = out.stdout.lines().collect();
    want.sort_unstable();
    got.sort_unstable();
    if want != got {
        return Err(format!("the apps' output changed: {got:?}, expected {want:?}").into());
    }
    for line in records.lines().filter(|l| l.contains("\"event\":\"sxs\"")) {
        let accepted = (line.contains("of_other_runtime") && line.contains("\"outcome\":\"ok"))
            || line.contains("\"outcome\":\"Some(Some(")
            || (line.contains("named_through_fence") && !line.contains("\"outcome\":\"0\""));
        if accepted {
            return Err(format!("a partner of the other runtime was accepted: {line}").into());
        }
    }
    if !records.contains("rejit_thread_of_other_runtime") {
        return Err("the other runtime never tried".into());
    }
    Ok(())
}

/// Two classes of the review36 library as two children of the
/// multiplexer (one library, shared statics): a GcHandle child A made,
/// asked for its object in child B's scope, must be refused.
fn mux_handle(case: &Case<'_>) -> CaseResult {
    let app = case.app("review36")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let mux = case.profiler("clrprof-mux")?;
    let a = case.profiler_class(
        "review36-profiler",
        "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A360B}",
    )?;
    let b = case.profiler_class(
        "review36-profiler",
        "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A360C}",
    )?;
    let list = format!(
        "{}={};{}={}",
        a.path.display(),
        a.clsid,
        b.path.display(),
        b.clsid
    );
    let traced = case.run(
        case.spec(&app)
            .profiler(mux)
            .env("CLRPROF_MUX_PROFILERS", &list),
    )?;
    let records: Vec<String> = traced
        .records
        .iter()
        .filter(|r| r["event"] == "mux_handle" || r["event"] == "child")
        .map(|r| r.to_string())
        .collect();
    eprintln!("    mux records: {records:#?}");
    if traced.stdout != plain.stdout || format!("{:?}", traced.exit) != format!("{:?}", plain.exit)
    {
        return Err(format!(
            "the app changed under the multiplexer: {:?} {:?}\nstderr: {}",
            traced.exit,
            traced.stdout,
            traced.stderr.chars().take(1500).collect::<String>()
        )
        .into());
    }
    let used: Vec<&String> = records
        .iter()
        .filter(|r| r.contains("other child"))
        .collect();
    if used.is_empty() {
        return Err("child B never tried the handle".into());
    }
    if let Some(r) = used.iter().find(|r| r.contains("\"outcome\":\"ok")) {
        return Err(format!("child B got child A's handle's object: {r}").into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    [
        Scenario::new(
            "review36: managed handlers seen in a plugin context",
            handlers_in_plugin_context,
        ),
        Scenario::new(
            "review36: a GcHandle of another child of the multiplexer",
            mux_handle,
        ),
        Scenario::new(
            "review36: side-by-side partners of the other runtime",
            side_by_side,
        )
        .only_on(&["linux-x64-8.0"], "the side-by-side host loads both Linux runtimes into one process; it runs once, on the linux-x64-8.0 leg"),
    ]
    .into_iter()
    .chain(PROBES.iter().map(|(probe, _)| {
        let probe: &'static str = probe;
        Scenario::new(&format!("review36: {probe}"), move |case: &Case<'_>| {
            run_probe(case, probe)
        })
    }))
    .collect()
}
