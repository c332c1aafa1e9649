//! `clrprof compile APP.cs --runtime LEG`: compiles a one-file C# program
//! for a runtime without a .NET SDK, with the compiler `clrprof provision`
//! brought (Roslyn from NuGet, against that runtime's reference
//! assemblies; or Mono's `mcs`, or an installed SDK's `csc`), the way the
//! tests compile their apps (`clrprof_testing::csharp::compile`). It
//! writes `APP.dll` and the `APP.runtimeconfig.json` the host needs into
//! the output directory.

use clrprof_testing::{Error, Result};
use std::path::Path;
use std::process::ExitCode;

/// The `clrprof compile` command.
pub fn run(
    source: &Path,
    runtime: &str,
    out: Option<&Path>,
    allow_unsafe: bool,
) -> Result<ExitCode> {
    let found = crate::runtime::found(None);
    let leg = crate::runtime::resolve(runtime, &found)?;
    let compiler = found.compiler().ok_or_else(|| {
        Error::new(
            "no C# compiler found: `clrprof provision` in your profiler crate brings one (Roslyn \
             from NuGet); run clrprof compile there",
        )
    })?;
    let options = clrprof_testing::csharp::CompileOptions {
        allow_unsafe,
        optimize: true,
        ..Default::default()
    };
    let apps = found.cache_dir().join("apps");
    let app = clrprof_testing::csharp::compile(&compiler, source, &apps, options, leg)?;
    let built = app.for_leg(leg)?;
    let shown = out.unwrap_or(Path::new("."));
    let out = clrprof_testing::manifest::absolute(shown);
    std::fs::create_dir_all(&out).map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    let dll = out.join(format!("{}.dll", app.name));
    let config = out.join(format!("{}.runtimeconfig.json", app.name));
    let built_config = built.with_file_name(format!("{}.runtimeconfig.json", app.name));
    for (from, to) in [(&built, &dll), (&built_config, &config)] {
        std::fs::copy(from, to)
            .map_err(|e| Error::new(format!("{} → {}: {e}", from.display(), to.display())))?;
    }
    println!(
        "compiled {} for {} (.NET {}): {}",
        source.display(),
        leg.name,
        leg.version,
        shown.join(format!("{}.dll", app.name)).display()
    );
    Ok(ExitCode::SUCCESS)
}
