//! Typed IDs only where the runtime says they are valid (the test-profilers
//! fixture `ScopesProfiler` on apps/alloc.cs and apps/unload.cs).
//!
//! Once, `*LoadStarted` handed out typed IDs, and asking about a module in
//! `ModuleLoadStarted` (`GetClassFromToken`, `GetClassLayout`) killed .NET 8
//! with SIGSEGV on both apps; `MovedReferences2`, `SurvivingReferences2` and
//! `HandleCreated` counted as scopes that block collections, so objects
//! could be read there while the GC moved them. The fixture does the same
//! work where the SDK now allows it: every `*LoadStarted` ID (raw) comes
//! back typed at its `*Finished`, where the module's classes are resolved by
//! token with their layouts; a kept GC handle is asked for its object in
//! the three GC callbacks and refused every time (`GcMayRun`). Checked: the
//! app's exit status and output are byte-identical with and without the
//! profiler, every started load finished typed (array classes, reported
//! from .NET 11 on, answering `IsArrayClass`), classes were resolved,
//! every refusal happened (on runtimes with Info13), and no rule was broken.
//!
//! On .NET 9 the same `GetClassFromToken` at `ModuleLoadFinished` killed
//! the runtime (SIGSEGV on 9.0.23, both apps): its loader dereferences a
//! null assembly while resolving an assembly reference of an assembly whose
//! load is under way. The SDK refuses every type load inside an assembly's
//! load on .NET 9 (`Error::RuntimeVersion`, the runtime not called); there
//! the fixture counts one refusal per module and resolves the classes at the
//! module's first `ClassLoadFinished`, which must succeed.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use serde_json::Value;

const SCOPES: &str = "{BC3C51D1-1D73-4401-9055-FD085D8B16AA}";

/// Runs `app` with `args` plain and under the fixture; the app must not
/// notice the profiler.
fn run_pair(case: &Case<'_>, app: &str, args: &[String]) -> Result<(Outcome, Value), Verdict> {
    let app = case.app(app)?;
    let mut plain_spec = case.spec(&app);
    plain_spec.args = args.to_vec();
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let profiler = case.profiler_class("test-profilers", SCOPES)?;
    let mut spec = case.spec(&app).profiler(profiler);
    spec.args = args.to_vec();
    let traced = case.run(spec)?;
    traced.check()?;
    if traced.exit != plain.exit {
        return Err(format!(
            "exit changed under the profiler: {:?} -> {:?}",
            plain.exit, traced.exit
        )
        .into());
    }
    if traced.stdout != plain.stdout {
        return Err(format!(
            "app output changed under the profiler:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    let broken: Vec<String> = traced
        .events("check")
        .filter(|r| r["ok"] != true)
        .map(|r| format!("{}: {}", r["name"], r["detail"]))
        .collect();
    if !broken.is_empty() {
        return Err(format!("rules broken:\n{}", broken.join("\n")).into());
    }
    let summary = traced
        .events("scopes")
        .next()
        .cloned()
        .ok_or("no scopes record")?;
    Ok((traced, summary))
}

/// `true` when the traced runtime is a .NET 9.
fn net9(traced: &Outcome) -> bool {
    traced
        .runtime_record()
        .and_then(|r| r["version"].as_str())
        .is_some_and(|v| v.starts_with("9."))
}

fn num(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

/// The facts every run must show.
fn check_summary(traced: &Outcome, s: &Value) -> CaseResult {
    if std::env::var_os("CLRPROF_SCOPES_SUMMARY").is_some() {
        eprintln!("scopes [{}]: {s}", traced.leg);
    }
    let fail = |what: String| -> CaseResult { Err(format!("{what}: {s}").into()) };
    if num(s, "violations") != 0 {
        return fail("violations".into());
    }
    // Every module, class, assembly and app domain that started loading
    // came back typed at its *Finished, and answered there.
    let modules = num(s, "modules_finished");
    if modules < 3 || num(s, "modules_matched") != modules {
        return fail(format!(
            "{modules} modules finished, not all after a ModuleLoadStarted"
        ));
    }
    let classes = num(s, "classes_finished");
    if classes == 0 || num(s, "classes_matched") != classes {
        return fail(format!("{classes} classes finished, not all named"));
    }
    // .NET 11 reports the loads of array classes too (dotnet/runtime PR
    // 120796, "Raise profiler ClassLoad events for array method tables");
    // earlier runtimes report none. Both apps make arrays of their own.
    let major = traced
        .runtime_record()
        .and_then(|r| r["version"].as_str())
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
        .unwrap_or(0);
    let arrays = num(s, "array_classes");
    if (major >= 11) != (arrays > 0) {
        return fail(format!(
            "{arrays} array classes loaded on .NET {major} (reported from .NET 11 on)"
        ));
    }
    // Classes without metadata are runtime-async continuations (.NET 11),
    // which these apps do not make.
    if num(s, "metadata_less_classes") != 0 {
        return fail("classes without metadata in an app without runtime-async methods".into());
    }
    if num(s, "assemblies_matched") < 3 || num(s, "attached") < modules {
        return fail("assemblies or attachments missing".into());
    }
    // The calls that crashed from ModuleLoadStarted, made at ModuleLoadFinished
    // (on .NET 9, refused there and made at a ClassLoadFinished).
    if net9(traced) {
        // Every module with a type definition refused (modules without
        // one, such as facades, ask nothing): CoreLib and the app at least.
        let refused = num(s, "type_loads_refused");
        if refused < 2 || refused > modules {
            return fail(format!(
                "{refused} ModuleLoadFinished refused their type loads on .NET 9"
            ));
        }
        let resolved = num(s, "deferred_resolved");
        if resolved == 0 || num(s, "classes_from_token") < resolved {
            return fail("no module's classes resolved after its load on .NET 9".into());
        }
    } else if num(s, "type_loads_refused") != 0 {
        return fail("type loads refused outside .NET 9".into());
    } else if num(s, "classes_from_token") < modules {
        return fail("classes by token".into());
    }
    if num(s, "layouts") != num(s, "classes_from_token") {
        return fail("classes by token and their layouts".into());
    }
    // The GC callbacks ran (the apps induce collections), and the kept
    // handle's object was refused in every one of them.
    let relocating = num(s, "relocating_callbacks");
    if relocating == 0 {
        return fail("no MovedReferences2 / SurvivingReferences2".into());
    }
    let created = num(s, "handles_created_empty") + num(s, "handles_created_with_object");
    if created == 0 || num(s, "initial_objects_classed") != num(s, "handles_created_with_object") {
        return fail("HandleCreated".into());
    }
    if s["handle"] == true {
        if num(s, "relocating_refusals") != relocating {
            return fail("a relocating GC callback read the handle's object".into());
        }
        if num(s, "handle_created_refusals") == 0 {
            return fail("HandleCreated never asked the kept handle".into());
        }
    } else if !traced
        .runtime_record()
        .and_then(|r| r["version"].as_str())
        .is_some_and(|v| v.starts_with("3."))
    {
        // Only runtimes without Info13 (.NET Core 3.1) make no handle.
        return fail("no GC handle on a runtime with Info13".into());
    }
    Ok(())
}

/// The scenarios of this file.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "scopes: LoadStarted IDs raw, classes by token at ModuleLoadFinished, no object read in relocating GC callbacks (allocation app)",
            allocation_app,
        ),
        Scenario::new(
            "scopes: LoadStarted IDs raw, classes by token at ModuleLoadFinished, no object read in relocating GC callbacks (collectible code)",
            collectible_code,
        ),
    ]
}

fn allocation_app(case: &Case<'_>) -> CaseResult {
    let (traced, s) = run_pair(case, "alloc", &[])?;
    check_summary(&traced, &s)
}

fn collectible_code(case: &Case<'_>) -> CaseResult {
    // Wine is an order of magnitude slower at loading assemblies.
    let cycles = if case.leg().name.starts_with("win") {
        20
    } else {
        100
    };
    let (traced, s) = run_pair(case, "unload", &[cycles.to_string()])?;
    check_summary(&traced, &s)?;
    // Each cycle loads the app's assembly again, collectible: its module's
    // classes resolve at each ModuleLoadFinished (on .NET 9, at its first
    // ClassLoadFinished).
    if num(&s, "modules_finished") < cycles {
        return Err(format!(
            "{} modules for {cycles} cycles: {s}",
            num(&s, "modules_finished")
        )
        .into());
    }
    if net9(&traced) && num(&s, "deferred_resolved") < cycles {
        return Err(format!(
            "{} modules resolved after their load for {cycles} cycles: {s}",
            num(&s, "deferred_resolved")
        )
        .into());
    }
    Ok(())
}
