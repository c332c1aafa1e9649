//! `clrprof run --trace-context`: the SDK's trace-context startup hook
//! (`clrprof::context::STARTUP_HOOK_SOURCE`) compiled with the compiler
//! `clrprof provision` brought, against the oldest provisioned runtime's
//! reference assemblies (one assembly loads on every runtime after it), into
//! `<cache>/trace-context/`, and the variables that load it: the hook in
//! `DOTNET_STARTUP_HOOKS` (after any the environment already names) and the
//! profiler library in `CLRPROF_CONTEXT_LIBRARY`.

use clrprof_testing::{Error, Result};
use std::path::{Path, PathBuf};

/// The compiled hook (compiled if needed).
pub fn hook_assembly(near: Option<&Path>) -> Result<PathBuf> {
    let found = crate::runtime::found(near);
    let compiler = found.compiler().ok_or_else(|| {
        Error::new(
            "--trace-context: no C# compiler found to build the startup hook; \
             `clrprof provision` in your profiler crate brings one (Roslyn from NuGet)",
        )
    })?;
    let leg = found
        .legs
        .iter()
        .min_by(|a, b| a.version.cmp(&b.version))
        .ok_or_else(|| {
            Error::new("--trace-context: no runtime found to compile the startup hook against")
        })?;
    let dir = found.cache_dir().join("trace-context");
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let source = dir.join("ClrprofTraceContext.cs");
    if std::fs::read_to_string(&source).ok().as_deref()
        != Some(clrprof::context::STARTUP_HOOK_SOURCE)
    {
        std::fs::write(&source, clrprof::context::STARTUP_HOOK_SOURCE)
            .map_err(|e| Error::new(format!("{}: {e}", source.display())))?;
    }
    let options = clrprof_testing::csharp::CompileOptions {
        allow_unsafe: true,
        optimize: true,
        ..Default::default()
    };
    let app = clrprof_testing::csharp::compile(&compiler, &source, &dir, options, leg)?;
    Ok(app.dll())
}

/// `DOTNET_STARTUP_HOOKS` and `CLRPROF_CONTEXT_LIBRARY` for `hook` and
/// `library` (paths as the runtime sees them); an existing
/// `DOTNET_STARTUP_HOOKS` keeps its hooks first.
pub fn env(hook: &str, library: &str, windows: bool) -> Vec<(String, String)> {
    let separator = if windows { ';' } else { ':' };
    let hooks = match std::env::var("DOTNET_STARTUP_HOOKS") {
        Ok(existing) if !existing.is_empty() => format!("{existing}{separator}{hook}"),
        _ => hook.to_string(),
    };
    vec![
        ("DOTNET_STARTUP_HOOKS".to_string(), hooks),
        (
            clrprof::context::LIBRARY_VAR.to_string(),
            library.to_string(),
        ),
    ]
}
