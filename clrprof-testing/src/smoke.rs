//! The first start of a provisioned leg: a program that prints the
//! runtime's version, which must be the version the leg was provisioned
//! with. A leg whose runtime does not start here (Wine or qemu may not run
//! it at all) is reported with what the start printed, instead of failing
//! every scenario one by one.

use crate::csharp::{compile, CompileOptions};
use crate::manifest::{Compiler, Leg, Wine};
use crate::run::{run_app, RunSpec};
use crate::{Error, Result};
use std::path::Path;
use std::time::Duration;

/// The program: the runtime's own account of its version.
pub const SOURCE: &str = "class Smoke { static void Main() { \
    System.Console.WriteLine(System.Environment.Version.ToString(3)); } }\n";

/// How long a first start may take (a fresh Wine prefix, an emulated JIT).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Starts the smoke program on `leg`; `Ok` when it printed the leg's version.
pub fn check_starts(
    leg: &Leg,
    wine: Option<&Wine>,
    compiler: &Compiler,
    cache: &Path,
) -> Result<()> {
    let dir = cache.join("smoke");
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let source = dir.join("smoke.cs");
    if std::fs::read_to_string(&source).ok().as_deref() != Some(SOURCE) {
        std::fs::write(&source, SOURCE)
            .map_err(|e| Error::new(format!("{}: {e}", source.display())))?;
    }
    let app = compile(compiler, &source, cache, CompileOptions::default(), leg)?.for_leg(leg)?;
    let spec = RunSpec::new(app, dir.join("runs").join(&leg.name)).timeout(TIMEOUT);
    let outcome = run_app(leg, wine, &spec)?;
    let how = if leg.is_wine() {
        " under Wine"
    } else if leg.is_emulated() {
        " under qemu"
    } else {
        ""
    };
    outcome.check_exit().map_err(|e| {
        Error::new(format!(
            "the {} runtime ({}) does not start{how}: {e}",
            leg.name, leg.version
        ))
    })?;
    let printed = outcome.stdout.trim();
    if printed != leg.version {
        return Err(Error::new(format!(
            "the {} leg should run .NET {}, but its program printed {printed:?}",
            leg.name, leg.version
        )));
    }
    Ok(())
}
