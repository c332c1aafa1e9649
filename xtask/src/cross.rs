//! `cargo xtask cross-test [--strict]`: the clrprof-sys tests on every
//! architecture clrprof ships trampolines for.
//!
//! Legs, each `cargo test -p clrprof-sys`:
//!
//! | leg | target | runs under |
//! |---|---|---|
//! | native | host | directly (doctests too) |
//! | aarch64 | aarch64-unknown-linux-gnu | qemu-aarch64 (`.cargo/config.toml` runner) |
//! | win-x64 | x86_64-pc-windows-gnu | Wine (`clrprof-testing/scripts/wine-runner.sh`) |
//!
//! Cross legs run `--lib --tests` (no doctests: rustdoc would run them on
//! the host). A leg whose toolchain is missing prints
//! `skipped: <leg>: <reason>`; in strict mode (`--strict` or `CI=true`) it
//! is a failure instead. The command fails if any leg failed.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How a leg ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LegOutcome {
    /// `cargo test` ran and succeeded.
    Passed,
    /// `cargo test` failed, or (strict mode) the leg could not run.
    Failed(String),
    /// The leg could not run (missing toolchain) and strict mode is off.
    Skipped(String),
}

/// The result of one leg, with the libtest counts summed over its binaries.
#[derive(Debug, Clone)]
pub struct LegReport {
    /// Short leg name: `native`, `aarch64`, `win-x64`.
    pub leg: String,
    /// Target triple, `None` for the host.
    pub target: Option<String>,
    pub outcome: LegOutcome,
    pub passed: usize,
    pub failed: usize,
    pub ignored: usize,
}

impl LegReport {
    fn new(leg: &Leg, outcome: LegOutcome) -> Self {
        LegReport {
            leg: leg.name.to_string(),
            target: leg.target.map(str::to_string),
            outcome,
            passed: 0,
            failed: 0,
            ignored: 0,
        }
    }
}

struct Leg {
    name: &'static str,
    target: Option<&'static str>,
    /// Programs that must be on PATH (any one of each inner list).
    programs: &'static [&'static [&'static str]],
    /// Files or directories that must exist.
    paths: &'static [&'static str],
}

const LEGS: [Leg; 3] = [
    Leg {
        name: "native",
        target: None,
        programs: &[],
        paths: &[],
    },
    Leg {
        name: "aarch64",
        target: Some("aarch64-unknown-linux-gnu"),
        programs: &[&["aarch64-linux-gnu-gcc"], &["qemu-aarch64"]],
        paths: &["/usr/aarch64-linux-gnu/lib"],
    },
    Leg {
        name: "win-x64",
        target: Some("x86_64-pc-windows-gnu"),
        programs: &[
            &["x86_64-w64-mingw32-gcc"],
            &["/usr/lib/wine/wine64", "wine64", "wine"],
        ],
        paths: &[],
    },
];

pub fn main(args: &[String]) -> crate::Result {
    for arg in args {
        if arg != "--strict" {
            return Err(format!("cross-test: unknown argument `{arg}`").into());
        }
    }
    let strict = crate::workspace::strict_from(args);
    crate::toolchain::ensure(strict)?;
    let reports = run(strict)?;
    println!(
        "\n{:<10} {:<28} {:>7} {:>7} {:>8}  outcome",
        "leg", "target", "passed", "failed", "ignored"
    );
    for r in &reports {
        let outcome = match &r.outcome {
            LegOutcome::Passed => "passed".to_string(),
            LegOutcome::Failed(why) => format!("FAILED: {why}"),
            LegOutcome::Skipped(why) => format!("skipped: {why}"),
        };
        println!(
            "{:<10} {:<28} {:>7} {:>7} {:>8}  {outcome}",
            r.leg,
            r.target.as_deref().unwrap_or("host"),
            r.passed,
            r.failed,
            r.ignored
        );
    }
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| matches!(r.outcome, LegOutcome::Failed(_)))
        .map(|r| r.leg.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed legs: {}", failed.join(", ")).into())
    }
}

/// Runs every leg and reports each. Only an inability to start cargo at
/// all is an `Err`; test failures and missing toolchains are outcomes.
pub fn run(strict: bool) -> crate::Result<Vec<LegReport>> {
    let root = crate::workspace::root();
    let mut reports = Vec::new();
    for leg in &LEGS {
        if let Err(reason) = check_toolchain(leg) {
            let outcome = if strict {
                eprintln!("FAILED: {}: {reason}", leg.name);
                LegOutcome::Failed(reason)
            } else {
                println!("skipped: {}: {reason}", leg.name);
                LegOutcome::Skipped(reason)
            };
            reports.push(LegReport::new(leg, outcome));
            continue;
        }
        reports.push(run_leg(&root, leg)?);
    }
    Ok(reports)
}

fn check_toolchain(leg: &Leg) -> Result<(), String> {
    if let Some(target) = leg.target {
        if !rust_target_installed(target) {
            return Err(format!(
                "Rust target {target} not installed (cargo xtask toolchain)"
            ));
        }
    }
    for alternatives in leg.programs {
        if !alternatives.iter().any(|p| find_program(p).is_some()) {
            return Err(format!(
                "{} not found (cargo xtask toolchain)",
                alternatives.join(" or ")
            ));
        }
    }
    for path in leg.paths {
        if !Path::new(path).exists() {
            return Err(format!("{path} missing (cargo xtask toolchain)"));
        }
    }
    Ok(())
}

/// A target is usable when its standard library is in the sysroot.
fn rust_target_installed(target: &str) -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
    let Ok(output) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Path::new(&sysroot)
        .join("lib/rustlib")
        .join(target)
        .join("lib")
        .is_dir()
}

fn find_program(name: &str) -> Option<PathBuf> {
    let candidate = Path::new(name);
    if candidate.is_absolute() {
        return candidate.is_file().then(|| candidate.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn run_leg(root: &Path, leg: &Leg) -> crate::Result<LegReport> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).args(["test", "-p", "clrprof-sys"]);
    if let Some(target) = leg.target {
        cmd.args(["--target", target, "--lib", "--tests"]);
    }
    // The Wine runner makes a prefix of its own on first use (~0.7 GB);
    // where `cargo xtask provision` made one, the runner uses that instead.
    let provisioned = crate::provision::wine_prefix(&crate::provision::cache_dir(None));
    if std::env::var_os("CLRPROF_WINEPREFIX").is_none() && provisioned.join("system.reg").is_file()
    {
        cmd.env("CLRPROF_WINEPREFIX", &provisioned);
    }
    println!("==> cross-test {}: {:?}", leg.name, cmd);
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut report = LegReport::new(leg, LegOutcome::Passed);
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            println!("{line}");
            if let Some(counts) = parse_test_result(&line) {
                report.passed += counts.0;
                report.failed += counts.1;
                report.ignored += counts.2;
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        report.outcome = LegOutcome::Failed(format!("cargo test exited with {status}"));
    } else if report.failed > 0 {
        report.outcome = LegOutcome::Failed(format!("{} tests failed", report.failed));
    }
    Ok(report)
}

/// Parses libtest's `test result: ok. 5 passed; 0 failed; 1 ignored; ...`
/// into (passed, failed, ignored).
fn parse_test_result(line: &str) -> Option<(usize, usize, usize)> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (_, counts) = rest.split_once(". ")?;
    let mut result = (0, 0, 0);
    for part in counts.split(';') {
        let mut words = part.split_whitespace();
        let (Some(number), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(number) = number.parse::<usize>() else {
            continue;
        };
        match kind {
            "passed" => result.0 = number,
            "failed" => result.1 = number,
            "ignored" => result.2 = number,
            _ => {}
        }
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::parse_test_result;

    #[test]
    fn parses_libtest_summary_lines() {
        assert_eq!(
            parse_test_result("test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s"),
            Some((5, 0, 1))
        );
        assert_eq!(
            parse_test_result(
                "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out"
            ),
            Some((3, 2, 0))
        );
        assert_eq!(parse_test_result("running 5 tests"), None);
    }
}
