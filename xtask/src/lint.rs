//! The project's own checks, run by `cargo xtask test` after the tests:
//! `cargo fmt --all -- --check`,
//! `cargo clippy --workspace --all-targets -- -D warnings`, and the library
//! crates' API docs with rustdoc's warnings denied (broken intra-doc links).

use std::process::Command;

/// The crates whose API docs users read (the CLI's doc comments are its
/// `--help` text, not rustdoc).
const DOCUMENTED: &[&str] = &[
    "clrprof",
    "clrprof-sys",
    "clrprof-macros",
    "clrprof-instrumentation",
    "clrprof-mux",
    "clrprof-sampler",
    "clrprof-testing",
];

fn cargo(args: &[&str]) -> crate::Result {
    cargo_env(args, &[])
}

fn cargo_env(args: &[&str], env: &[(&str, &str)]) -> crate::Result {
    println!("$ cargo {}", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(crate::workspace::root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")).into())
    }
}

/// Formatting and clippy; every failure is returned, not only the first.
pub fn run() -> Vec<String> {
    let mut failures = Vec::new();
    if let Err(e) = cargo(&["fmt", "--all", "--", "--check"]) {
        failures.push(format!("lint: {e}"));
    }
    if let Err(e) = cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]) {
        failures.push(format!("lint: {e}"));
    }
    let mut doc = vec!["doc", "--no-deps"];
    for krate in DOCUMENTED {
        doc.extend(["-p", krate]);
    }
    if let Err(e) = cargo_env(&doc, &[("RUSTDOCFLAGS", "-D warnings")]) {
        failures.push(format!("lint: {e}"));
    }
    failures
}
