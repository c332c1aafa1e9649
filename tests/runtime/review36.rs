//! Review 36 (provenance): safe-code attacks of the `review36-profiler`
//! fixture (`#![forbid(unsafe_code)]`) inside real runtimes, each compared
//! with the app run without a profiler.
//!
//! The three routes the review found, and what the scenarios now assert
//! (each failed before its fix: the host died or hung):
//! - "review36: managed handlers seen in a plugin context": entry
//!   handlers-load-context (`ManagedHandlers::module_loaded`,
//!   `wrap_managed`, clrprof-instrumentation/src/handlers.rs). The handlers
//!   noted their assembly in *any* module load, so wrap_managed accepted
//!   them for a module of another load context: the `review36alc` app
//!   loads wraphandlers.dll into a plugin `AssemblyLoadContext`, the
//!   profiler wraps `ReviewAlc.Target::Work` (default context), and the
//!   method's new `AssemblyRef` could not bind: unhandled
//!   `FileNotFoundException`, SIGABRT, on 3.1, 8.0 and 10.0. Now the
//!   handlers serve only the first load of their assembly, made by the
//!   runtime's startup hook code into the default context: the plugin-only
//!   load is refused (`Error::CannotWrap` naming `LoadPlugin`), a hook load
//!   followed by the plugin load is refused (a second load), a hook load
//!   alone wraps `Work` (the handlers count 1000 calls); the app's output
//!   and exit status are those of the run without the profiler.
//! - "review36: emit": entry token-module, whose third claim said new
//!   metadata rows are read only by IL. Reflection reads new TypeDef rows
//!   too: a class defined with the app's sealed `Review.Tiny` (or a TypeRef
//!   row the module lacks) as its base made the app's
//!   `Assembly.GetTypes()` throw `ReflectionTypeLoadException`: SIGABRT on
//!   3.1, 8.0 and 10.0. Now `define_static_class(name)` takes no base (the
//!   SDK derives from the module's own `System.Object`; trybuild
//!   `static_class_base_is_the_sdks`) and refuses a name the module has;
//!   `define_static_method` refuses a name and signature the class has. The
//!   app counts one type more and runs on.
//! - "review36: rejit-in-coop" (not a pair; safe code hanging the host):
//!   `ReJitThread::request_rejit` from `ObjectAllocated`, a scope the SDK
//!   marks as blocking collections, waited for a `RequestReJIT` that waits
//!   for this thread: the app hung on 3.1 and 10.0 (on 8.0 in some runs).
//!   Now refused at once (`Error::WouldDeadlock`); "review36: rejit from
//!   ModuleLoadFinished waits" is the control (a preemptive callback: the
//!   request is answered).
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

/// Runs the app with and without the probe (with `env` and the
/// `REVIEW_*` variables of the harness's environment), fails unless the
/// exit status and output are the same (the emit probe's app counts one
/// type more: `types N+1`), and returns the probe's run.
fn run_probe(
    case: &Case<'_>,
    probe: &str,
    env: &[(&str, &str)],
) -> Result<clrprof_testing::run::Outcome, clrprof_testing::harness::Verdict> {
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
        "REVIEW_EMIT_APPLY",
        "REVIEW_EMIT_METHOD",
        "REVIEW_EMIT_EXISTING",
        "REVIEW_REJIT_FROM",
    ] {
        if let Ok(v) = std::env::var(k) {
            spec = spec.env(k, &v);
        }
    }
    for (k, v) in env {
        spec = spec.env(k, v);
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
    // `GetTypes()` (that is what injecting a type is for).
    let want = if probe == "emit" {
        plain
            .stdout
            .lines()
            .map(|l| match l.strip_prefix("types ").map(str::parse::<u32>) {
                Some(Ok(n)) => format!("types {}\n", n + 1),
                _ => format!("{l}\n"),
            })
            .collect()
    } else {
        plain.stdout.clone()
    };
    if traced.stdout != want || format!("{:?}", traced.exit) != format!("{:?}", plain.exit) {
        return Err(format!(
            "the app changed under the {probe} probe:\nwithout ({:?}): {:?}\nwant: {want:?}\nwith    ({:?}): {:?}\nstderr: {}",
            plain.exit,
            plain.stdout,
            traced.exit,
            traced.stdout,
            traced.stderr.chars().take(3000).collect::<String>()
        )
        .into());
    }
    Ok(traced)
}

/// The one record `event` of a run, with `fields` equal to these values.
fn expect_record(
    traced: &clrprof_testing::run::Outcome,
    event: &str,
    fields: &[(&str, &str)],
) -> CaseResult {
    let records: Vec<_> = traced.events(event).collect();
    let [record] = records[..] else {
        return Err(format!("{} `{event}` records: {records:?}", records.len()).into());
    };
    for (k, v) in fields {
        if record[*k].as_str() != Some(*v) {
            return Err(format!("`{event}`.{k} = {}, want {v:?}", record[*k]).into());
        }
    }
    Ok(())
}

/// Review 36's route: `ReJitThread::request_rejit` from `ObjectAllocated`
/// hung the app (3.1 and 10.0 every run, 8.0 in some); now it is refused
/// at once.
fn rejit_in_coop(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(case, "rejit-in-coop", &[])?;
    expect_record(
        &traced,
        "rejit",
        &[
            ("scope", "ObjectAllocated"),
            (
                "outcome",
                "err ReJitThread::request_rejit refused (nothing was requested): waiting here \
                 would hang the application: this scope blocks garbage collections and runtime \
                 suspensions until it returns (a callback that receives ObjectIDs runs in \
                 cooperative mode; a runtime suspension is one), and the request suspends the \
                 runtime or may start a collection, which would wait for this thread; ask from a \
                 callback that runs in preemptive mode (JITCompilationStarted of another method, \
                 a profiler thread's own loop), or queue the request (request_rejit_async, \
                 unsafe) and keep the modules loaded until it is answered",
            ),
        ],
    )
}

/// The same request from the app module's `ModuleLoadFinished` (a
/// preemptive callback) waits for the runtime's answer and the app runs on.
fn rejit_from_module_load(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(
        case,
        "rejit-in-coop",
        &[("REVIEW_REJIT_FROM", "module-load")],
    )?;
    expect_record(
        &traced,
        "rejit",
        &[("scope", "ModuleLoadFinished"), ("outcome", "ok ()")],
    )
}

/// Review 36's route: a class defined with a sealed base made the app's
/// `GetTypes()` throw. Now the SDK derives it from the module's own
/// `System.Object` (the TypeRef the app's classes use) and refuses a name
/// the module has; the app counts one type more and runs on.
fn emit(case: &Case<'_>) -> CaseResult {
    let traced = run_probe(case, "emit", &[])?;
    let records: Vec<_> = traced.events("emit").collect();
    let defined = records
        .first()
        .and_then(|r| r["defined"].as_str())
        .unwrap_or_default();
    if !defined.starts_with("ok MdTypeDef(") {
        return Err(format!("Review.Injected not defined: {records:?}").into());
    }
    expect_record(
        &traced,
        "emit",
        &[
            (
                "duplicate",
                "err the module already defines a type named `Review.Tiny`; a second TypeDef of \
                 that name would make its types fail to load (Assembly.GetTypes() in the \
                 application included)",
            ),
            (
                "duplicate_method",
                "err `Review.Tiny` already has a method `Touch` of this signature",
            ),
            ("same_base_as_tiny", "true"),
            ("base_name", "ok \"System.Object\""),
            ("base_scope", "ok \"System.Runtime\""),
            ("applied", "ok ()"),
        ],
    )
}

/// What wrapping `ReviewAlc.Target::Work` with the C# handlers must give,
/// per way of loading the handler assembly.
struct HandlersCase<'a> {
    /// Loaded as a startup hook (`DOTNET_STARTUP_HOOKS`).
    hook: bool,
    /// Loaded by the app into its plugin context (`REVIEW_HANDLERS`).
    plugin: bool,
    /// The plugin context is collectible, and unloaded before the calls
    /// (`REVIEW_COLLECTIBLE=1`).
    collectible: bool,
    /// `accepted` of each `handlers_module` record, in load order.
    judged: &'static [&'static str],
    /// The `wrap_managed` outcome.
    wrap: &'a str,
    /// Lines the handlers add to the app's output.
    added: &'static [&'static str],
}

const HOOK: &str = "load it as a startup hook (DOTNET_STARTUP_HOOKS=<path to the assembly>), \
                    which the runtime loads into the default load context, where the wrapped \
                    methods of every load context bind it";

/// The managed-handlers probe on the `review36alc` app: the handler
/// assembly loaded only into the app's plugin context (the review's route:
/// was a FileNotFoundException and SIGABRT, now refused), only into a
/// collectible plugin context that the app unloads (refused), as a startup
/// hook and again into the plugin context (refused: a second load), and as
/// a startup hook only (wrapped). Each run's output and exit status equal
/// the run without the profiler (plus, when wrapped, the handlers' count).
fn handlers_in_plugin_context(case: &Case<'_>) -> CaseResult {
    let app = case.app("review36alc")?;
    let handlers = crate::mux::target_path(case, &case.app("wraphandlers")?)?;
    let profiler = case.profiler_class(
        "review36-profiler",
        "{7A4C2E19-5B3D-4F6A-8C21-9E0D1B2A3607}",
    )?;
    let plugin_only = format!(
        "err cannot wrap ReviewAlc.Target::Work: the application loaded `wraphandlers` itself \
         (it was loaded by `ReviewAlc.Program::LoadPlugin`), into a load context the SDK \
         cannot see; {HOOK}; the method was left unchanged"
    );
    let collectible = format!(
        "err cannot wrap ReviewAlc.Target::Work: `wraphandlers` is in a collectible or dynamic \
         assembly, which no context but its own binds and which may unload; {HOOK}; the method \
         was left unchanged"
    );
    let cases = [
        HandlersCase {
            hook: false,
            plugin: true,
            collectible: false,
            judged: &["false"],
            wrap: &plugin_only,
            added: &[],
        },
        HandlersCase {
            hook: false,
            plugin: true,
            collectible: true,
            judged: &["false"],
            wrap: &collectible,
            added: &[],
        },
        HandlersCase {
            hook: true,
            plugin: true,
            collectible: false,
            judged: &["true", "false"],
            wrap: "err cannot wrap ReviewAlc.Target::Work: `wraphandlers` was loaded a second \
                   time (another file, or another load context) after the startup hook's load; \
                   a method of that context may bind its reference to that copy; the method was \
                   left unchanged",
            added: &[],
        },
        HandlersCase {
            hook: true,
            plugin: false,
            collectible: false,
            judged: &["true"],
            wrap: "ok ()",
            added: &["managed-wrapped ReviewAlc.Target::Work 1000 1000 0"],
        },
    ];
    for c in &cases {
        let spec = |with_profiler: bool| {
            let mut spec = case.spec(&app);
            if c.plugin {
                spec = spec.env("REVIEW_HANDLERS", &handlers);
            }
            if c.hook {
                spec = spec.env("DOTNET_STARTUP_HOOKS", &handlers);
            }
            if c.collectible {
                spec = spec.env("REVIEW_COLLECTIBLE", "1");
            }
            if with_profiler {
                spec = spec.profiler(profiler.clone());
            }
            spec
        };
        let plain = case.run(spec(false))?;
        plain.check()?;
        let traced = case.run(spec(true))?;
        let judged: Vec<String> = traced
            .events("handlers_module")
            .map(|r| r["accepted"].as_str().unwrap_or("?").to_string())
            .collect();
        let wraps: Vec<String> = traced
            .events("wrap_managed")
            .map(|r| r["outcome"].as_str().unwrap_or("?").to_string())
            .collect();
        let mut want_stdout = plain.stdout.clone();
        for line in c.added {
            want_stdout.push_str(line);
            want_stdout.push('\n');
        }
        let what = format!(
            "hook {}, plugin {}, collectible {}",
            c.hook, c.plugin, c.collectible
        );
        if traced.stdout != want_stdout
            || format!("{:?}", traced.exit) != format!("{:?}", plain.exit)
        {
            return Err(format!(
                "{what}: the app changed under the profiler:\nwithout ({:?}): {:?}\nwant: \
                 {want_stdout:?}\nwith    ({:?}): {:?}\nstderr: {}",
                plain.exit,
                plain.stdout,
                traced.exit,
                traced.stdout,
                traced.stderr.chars().take(1500).collect::<String>()
            )
            .into());
        }
        if judged != c.judged || wraps != [c.wrap] {
            return Err(format!(
                "{what}: judged {judged:?} (want {:?}), wrap_managed {wraps:?} (want {:?})",
                c.judged, c.wrap
            )
            .into());
        }
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
        )
        .exclude_leg(
            "linux-x64-3.1",
            "GC handles are ICorProfilerInfo13 (.NET 7 and later): on .NET Core 3.1 child A's \
             create_handle is Error::Unsupported (Info11 there), so there is no handle to try",
        ),
        Scenario::new(
            "review36: side-by-side partners of the other runtime",
            side_by_side,
        )
        .only_on(&["linux-x64-8.0"], "the side-by-side host loads both Linux runtimes into one process; it runs once, on the linux-x64-8.0 leg"),
    ]
    .into_iter()
    .chain([
        Scenario::new("review36: rejit-in-coop", rejit_in_coop),
        Scenario::new(
            "review36: rejit from ModuleLoadFinished waits",
            rejit_from_module_load,
        ),
        Scenario::new("review36: emit", emit),
    ])
    .chain(
        PROBES
            .iter()
            .filter(|(probe, _)| !matches!(*probe, "rejit-in-coop" | "emit"))
            .map(|(probe, _)| {
                let probe: &'static str = probe;
                Scenario::new(&format!("review36: {probe}"), move |case: &Case<'_>| {
                    run_probe(case, probe, &[]).map(|_| ())
                })
            }),
    )
    .collect()
}
