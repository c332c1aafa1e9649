//! The project's own checks, run by `cargo xtask test` before the tests:
//! `cargo fmt --all -- --check` and
//! `cargo clippy --workspace --all-targets -- -D warnings`.

use std::process::Command;

fn cargo(args: &[&str]) -> crate::Result {
    println!("$ cargo {}", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(crate::provision::workspace_root())
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
    failures
}
