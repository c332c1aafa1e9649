//! `cargo xtask provision [--cache DIR] [--strict]`: install the test runtimes
//! and the C# compiler into the rig's cache, idempotently. The provisioning
//! itself is `clrprof_testing::provision`, shared with `clrprof provision`.

use clrprof_testing::manifest::Manifest;
use std::path::{Path, PathBuf};

pub use clrprof_testing::provision::{print_manifest, wine_prefix};

/// The cache directory: `--cache`, else `$CLRPROF_CACHE`, else
/// `$CARGO_TARGET_DIR/clrprof-cache`, else `<workspace>/target/clrprof-cache`.
pub fn cache_dir(explicit: Option<&Path>) -> PathBuf {
    clrprof_testing::provision::cache_dir(explicit, &crate::workspace::root().join("target"))
}

pub fn main(args: &[String]) -> crate::Result {
    let mut cache = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cache" => cache = Some(PathBuf::from(it.next().ok_or("--cache needs a directory")?)),
            "--strict" => {}
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask provision [--cache DIR] [--strict]\n\n\
                     Installs the runtime legs, a Wine prefix and the C# compiler into DIR\n\
                     (default: $CLRPROF_CACHE, else target/clrprof-cache) and writes runtimes.json."
                );
                return Ok(());
            }
            other => return Err(format!("provision: unknown argument `{other}`").into()),
        }
    }
    let strict = crate::workspace::strict_from(args);
    let manifest = provision(&cache_dir(cache.as_deref()), strict)?;
    print_manifest(&manifest);
    Ok(())
}

/// Provisions everything into `cache` (toolchains first) and writes the manifest.
pub fn provision(cache: &Path, strict: bool) -> crate::Result<Manifest> {
    let options = clrprof_testing::provision::Options {
        strict,
        toolchains: true,
    };
    Ok(clrprof_testing::provision::provision(cache, &options)?)
}
