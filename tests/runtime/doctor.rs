//! What `clrprof doctor` says a runtime reads, against what the runtime
//! does: with only the `DOTNET_` forms of the three loading variables set
//! (`DOTNET_ENABLE_PROFILING`, `DOTNET_PROFILER`, `DOTNET_PROFILER_PATH`),
//! the jit-tracer loads on this leg exactly when `clrprof doctor --runtime
//! <leg>` reports those variables as read (.NET 11 on; measured: not on
//! 3.1.3, 8.0.34, 9.0.23 or 10.0.15).

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::wine::to_wine_path;
use std::path::Path;

fn dotnet_forms(case: &Case<'_>) -> CaseResult {
    let leg = case.leg();
    let app = case.app("hello")?;
    let profiler = case.profiler("jit-tracer")?;
    let spec = case.spec(&app);
    let for_runtime = |p: &Path| -> Result<String, Verdict> {
        if leg.is_wine() {
            Ok(to_wine_path(p)?)
        } else {
            Ok(p.display().to_string())
        }
    };
    let vars = [
        ("DOTNET_ENABLE_PROFILING", "1".to_string()),
        ("DOTNET_PROFILER", profiler.clsid.clone()),
        ("DOTNET_PROFILER_PATH", for_runtime(&profiler.path)?),
    ];
    let records = for_runtime(&spec.work_dir.join("records.jsonl"))?;
    let mut spec = spec.env("CLRPROF_OUTPUT", &records);
    for (k, v) in &vars {
        spec = spec.env(k, v);
    }
    let outcome = case.run(spec)?;
    outcome.check_exit()?;
    let loaded = outcome
        .records
        .first()
        .is_some_and(|r| r["event"] == "runtime");

    let cli = crate::exits::native_cli()?;
    let mut cmd = std::process::Command::new(&cli);
    cmd.args(["doctor", "--runtime", &leg.name])
        .env("CLRPROF_CACHE", case.cache_dir());
    for var in [
        "CORECLR_ENABLE_PROFILING",
        "CORECLR_PROFILER",
        "CORECLR_PROFILER_PATH",
        "CORECLR_PROFILER_PATH_64",
        "CORECLR_PROFILER_PATH_ARM64",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in &vars {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", cli.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = format!("runtime: .NET {} ({})", leg.version, leg.name);
    if stdout.lines().next() != Some(first.as_str()) {
        return Err(format!("doctor's first line is not {first:?}:\n{stdout}").into());
    }
    let read = stdout
        .lines()
        .any(|l| l == "  ok      DOTNET_ENABLE_PROFILING=1");
    let unread = stdout.lines().any(|l| {
        l.starts_with("  ERROR   CORECLR_ENABLE_PROFILING is not set: ")
            && l.contains(&format!(
                "DOTNET_ENABLE_PROFILING is set, but .NET {} does not read it",
                leg.version
            ))
    });
    if read == unread {
        return Err(format!("doctor says neither read nor unread (or both):\n{stdout}").into());
    }
    if read != loaded {
        return Err(format!(
            "with only the DOTNET_ forms set the profiler {} on {} {}, but the doctor says they are {}:\n{stdout}",
            if loaded { "loaded" } else { "did not load" },
            leg.name,
            leg.version,
            if read { "read" } else { "not read" },
        )
        .into());
    }
    if read && out.status.code() != Some(0) {
        return Err(format!("doctor found an error although the profiler loads:\n{stdout}").into());
    }
    if !read && out.status.code() != Some(1) {
        return Err(format!(
            "doctor exited {:?} although nothing loads:\n{stdout}",
            out.status
        )
        .into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "doctor: the DOTNET_ forms load the profiler exactly where doctor says the runtime reads them",
        dotnet_forms,
    )]
}
