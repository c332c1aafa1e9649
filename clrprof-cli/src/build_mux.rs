//! `clrprof build-mux`: builds the profiler multiplexer for a CLI that was
//! installed with `cargo install` (which installs binaries only, never the
//! `libclrprof_mux.so` that `clrprof run` needs for several profilers).
//!
//! It writes a small crate into `<cache>/mux/build` whose library is the
//! published `clrprof-mux` of this CLI's own version (or, with `--local`,
//! a checkout's), builds it with cargo, and copies the library to
//! `<cache>/mux/`, where `clrprof run` looks for it. `<cache>` is the
//! crate's `target/clrprof-cache`, as for `clrprof provision`.

use clrprof_testing::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where `clrprof build-mux` puts the multiplexer of a cache.
pub fn mux_dir(cache: &Path) -> PathBuf {
    cache.join("mux")
}

/// The wrapper crate's manifest.
fn manifest(dependency: &str) -> String {
    format!(
        r#"# Written by `clrprof build-mux`: the profiler multiplexer as a shared library.
[package]
name = "clrprof-mux-build"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
name = "clrprof_mux_build"
crate-type = ["cdylib"]
path = "lib.rs"

[dependencies]
clrprof-mux = {dependency}

[profile.release]
panic = "unwind"

[workspace]
"#
    )
}

/// The wrapper's source: linking clrprof-mux brings its exports
/// (`DllGetClassObject`, its class entry and CLSID marker) into the library.
const LIB_RS: &str = "//! Written by `clrprof build-mux`.\npub use clrprof_mux::*;\n";

/// The `clrprof build-mux` command.
pub fn run(
    cache: Option<&Path>,
    target: Option<&str>,
    local: Option<&Path>,
    debug: bool,
) -> Result<ExitCode> {
    let cache = match cache {
        Some(c) => clrprof_testing::manifest::absolute(c),
        None => crate::cache_for_crate()?,
    };
    let dir = mux_dir(&cache);
    let build = dir.join("build");
    std::fs::create_dir_all(&build).map_err(|e| Error::new(format!("{}: {e}", build.display())))?;
    let dependency = match local {
        Some(root) => {
            let root = clrprof_testing::manifest::absolute(root);
            if !root.join("clrprof-mux").join("Cargo.toml").is_file() {
                return Err(Error::new(format!(
                    "{} is not a clrprof checkout (no clrprof-mux/Cargo.toml)",
                    root.display()
                )));
            }
            // The checkout's lock file: the versions it was tested with.
            if let Err(e) = std::fs::copy(root.join("Cargo.lock"), build.join("Cargo.lock")) {
                eprintln!("clrprof: note: no Cargo.lock copied from the checkout ({e})");
            }
            format!(
                "{{ path = {:?} }}",
                root.join("clrprof-mux").display().to_string()
            )
        }
        None => format!("\"={}\"", env!("CARGO_PKG_VERSION")),
    };
    for (name, text) in [
        ("Cargo.toml", manifest(&dependency)),
        ("lib.rs", LIB_RS.to_string()),
    ] {
        let path = build.join(name);
        std::fs::write(&path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    }
    let windows =
        target.is_some_and(|t| t.contains("windows")) || (target.is_none() && cfg!(windows));
    let mut cmd = std::process::Command::new(clrprof_testing::build::cargo());
    cmd.current_dir(&build).args(["build", "--lib"]);
    if !debug {
        cmd.arg("--release");
    }
    if let Some(t) = target {
        cmd.args(["--target", t]);
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| build.join("target"));
    cmd.env("CARGO_TARGET_DIR", &target_dir);
    println!(
        "building the multiplexer (clrprof-mux {}) in {}",
        if local.is_some() {
            "from the checkout".to_string()
        } else {
            env!("CARGO_PKG_VERSION").to_string()
        },
        build.display()
    );
    let status = cmd
        .status()
        .map_err(|e| Error::new(format!("cannot run cargo: {e}")))?;
    if !status.success() {
        return Err(Error::new(format!("cargo build failed ({status})")));
    }
    let (built_name, name) = if windows {
        ("clrprof_mux_build.dll", "clrprof_mux.dll")
    } else if cfg!(target_os = "macos") {
        ("libclrprof_mux_build.dylib", "libclrprof_mux.dylib")
    } else {
        ("libclrprof_mux_build.so", "libclrprof_mux.so")
    };
    let mut built = target_dir;
    if let Some(t) = target {
        built.push(t);
    }
    built.push(if debug { "debug" } else { "release" });
    built.push(built_name);
    let dest = dir.join(name);
    std::fs::copy(&built, &dest)
        .map_err(|e| Error::new(format!("{} → {}: {e}", built.display(), dest.display())))?;
    println!("built {}", dest.display());
    println!("`clrprof run` finds it there when you run it in this crate (or name it with --mux)");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_depends_on_this_version() {
        let m = manifest(&format!("\"={}\"", env!("CARGO_PKG_VERSION")));
        assert!(
            m.contains(&format!("clrprof-mux = \"={}\"", env!("CARGO_PKG_VERSION"))),
            "{m}"
        );
        assert!(m.contains("crate-type = [\"cdylib\"]"), "{m}");
        assert!(m.contains("\n[workspace]\n"), "{m}");
    }
}
