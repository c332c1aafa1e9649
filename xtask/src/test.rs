//! `cargo xtask test [--strict]`: everything, on every leg.
//!
//! Steps: install missing toolchains → provision the runtimes and the C#
//! compiler → build the example profilers for Linux and Windows →
//! `cargo test --workspace` (native tests, and the real-runtime harness of
//! `tests/`, which runs every scenario on every leg) → the conformance table
//! (`xtask/src/conformance.rs`, from those results) → the book → lint →
//! `cargo package` of every publishable crate (`xtask/src/package.rs`) → the
//! coverage table of the profiling API (`xtask/src/coverage.rs`) → the soundness
//! ledger (`xtask/src/ledger.rs`: untagged `unsafe`, missing tests, stale page) → the
//! instruction-count gate of the hot paths against their C yardsticks
//! (`xtask/src/bench_gate.rs`: ELT, `ObjectAllocated`, exceptions) → the cross-target
//! clrprof-sys tests → the `x86_64-pc-windows-msvc` build and unwind-data
//! check (`xtask/src/msvc.rs`) → a per-leg summary table. Strict mode (`--strict` or
//! `CI=true`) turns anything that cannot run into a failure. Exits non-zero
//! on any failure.

use crate::provision;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// One row of the final table.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// What ran (a leg, or a group of tests).
    pub name: String,
    /// Passed count.
    pub passed: usize,
    /// Failed count.
    pub failed: usize,
    /// Skipped (or ignored) count.
    pub skipped: usize,
    /// A note, e.g. why a step did not run.
    pub note: String,
}

pub fn main(args: &[String]) -> crate::Result {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "usage: cargo xtask test [--strict]\n\n\
             Provisions, builds the examples, runs every workspace test (with the real-runtime\n\
             harness on every leg) and the cross-target clrprof-sys tests, then prints a table.\n\
             --strict (or CI=true): a leg or tool that cannot run is a failure."
        );
        return Ok(());
    }
    for a in args {
        if a != "--strict" {
            return Err(format!("test: unknown argument `{a}`").into());
        }
    }
    let strict = crate::workspace::strict_from(args);
    let started = Instant::now();
    let root = crate::workspace::root();
    let mut rows: Vec<Row> = Vec::new();
    let mut step_failures: Vec<String> = Vec::new();

    step("toolchains");
    crate::toolchain::ensure(strict)?;

    step("provision runtimes and C# compiler");
    let cache = provision::cache_dir(None);
    if let Err(e) = provision::provision(&cache, strict) {
        // Not strict: what could not be provisioned shows as skipped legs below.
        step_failures.push(format!("provision: {e}"));
    }

    step("build example profilers");
    for (name, result) in build_examples(&root) {
        if let Err(e) = result {
            step_failures.push(format!("build {name}: {e}"));
        }
    }

    step("cargo test --workspace (native tests + real-runtime harness on every leg)");
    let summary_path = cache.join("harness-summary.json");
    let _ = std::fs::remove_file(&summary_path);
    let (native, ok) = cargo_test_workspace(&root, &summary_path, strict)?;
    rows.push(native);
    if !ok {
        step_failures.push("cargo test --workspace failed".into());
    }
    let mut failed_scenarios = Vec::new();
    match read_harness_summary(&summary_path) {
        Some((legs, failed)) => {
            rows.extend(legs);
            failed_scenarios = failed;
        }
        None => {
            step_failures.push("the real-runtime harness wrote no summary (did it run?)".into());
        }
    }

    step("conformance: the runtime's profiler tests against the scenarios' results");
    if let Err(e) = crate::conformance::generate(&root, &summary_path, true) {
        step_failures.push(e.to_string());
    }

    if let Err(e) = crate::book::build(strict) {
        step_failures.push(format!("book: {e}"));
    }
    step("lint: cargo fmt --check, cargo clippy -D warnings, rustdoc -D warnings");
    step_failures.extend(crate::lint::run());

    step("package: cargo package of every crate meant for crates.io (offline)");
    if let Err(e) = crate::package::run(&root, false) {
        step_failures.push(e.to_string());
    }

    step(
        "coverage: every corprof.idl method wrapped or with a reason; book/src/coverage.md current",
    );
    if let Err(e) = crate::coverage::generate(&root)
        .and_then(|report| crate::coverage::check_current(&root, &report))
    {
        step_failures.push(e.to_string());
    }

    step(
        "soundness ledger: every unsafe block names its rule, every rule's tests exist; book/src/soundness-ledger.md current",
    );
    match crate::ledger::generate(&root) {
        Ok(report) => {
            for (file, n) in &report.pending_files {
                println!("ledger: pending: {file} ({n} untagged)");
            }
            if let Err(e) = crate::ledger::check_current(&root, &report) {
                step_failures.push(e.to_string());
            }
        }
        Err(e) => step_failures.push(format!("ledger: {e}")),
    }

    step("gate: instructions per hooked call, allocation and exception against the C yardsticks (callgrind)");
    rows.push(gate_row(strict, &mut step_failures));

    step("cross-target clrprof-sys tests");
    match cross_rows(strict) {
        Ok(cross) => rows.extend(cross),
        Err(e) => step_failures.push(format!("cross-target tests: {e}")),
    }

    step("x86_64-pc-windows-msvc: build, check the examples, trampolines' unwind data");
    rows.push(msvc_row(&root, strict));

    print_table(&rows);
    // The names last, so that the tail of a CI log says what failed.
    for f in &failed_scenarios {
        println!("FAILED case: {f}");
    }
    let failed_cases: usize = rows.iter().map(|r| r.failed).sum();
    println!("total time {:.0}s", started.elapsed().as_secs_f64());
    if failed_cases > 0 || !step_failures.is_empty() {
        for f in &step_failures {
            eprintln!("xtask test: {f}");
        }
        return Err(format!(
            "{failed_cases} failed case(s), {} failed step(s)",
            step_failures.len()
        )
        .into());
    }
    Ok(())
}

fn step(what: &str) {
    println!("\n==> {what}");
}

/// Builds every example for each target the legs need: Linux (the host's),
/// Windows (x86_64-pc-windows-gnu) and linux-arm64 (aarch64-unknown-linux-gnu).
pub fn build_examples(root: &Path) -> Vec<(String, crate::Result)> {
    use clrprof_testing::manifest::{Arch, Os, Target};
    let mut results = Vec::new();
    let targets = [
        Target::from(Os::Linux),
        Target::from(Os::Windows),
        Target {
            os: Os::Linux,
            arch: Arch::Arm64,
        },
    ];
    for package in crate::workspace::example_packages(root) {
        for target in targets {
            let label = format!("{package} ({})", target.rust_target());
            let r = clrprof_testing::build::build_cdylib(&package, target, false, root)
                .map(|path| println!("built {label}: {}", path.display()))
                .map_err(|e| e.to_string().into());
            results.push((label, r));
        }
    }
    results
}

/// Runs `cargo test --workspace`, streaming its output and counting libtest
/// results. The runtime harness writes its per-leg counts to `summary`.
fn cargo_test_workspace(root: &Path, summary: &Path, strict: bool) -> crate::Result<(Row, bool)> {
    let mut cmd = Command::new(clrprof_testing::build::cargo());
    // --no-fail-fast: one failing test binary must not hide the others.
    cmd.current_dir(root)
        .args(["test", "--workspace", "--no-fail-fast"]);
    cmd.env("CLRPROF_HARNESS_SUMMARY", summary);
    cmd.env("CLRPROF_CACHE", provision::cache_dir(None));
    if strict {
        cmd.env("CI", "true");
    }
    cmd.stdout(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run cargo test: {e}"))?;
    let mut row = Row {
        name: "native (cargo test)".into(),
        ..Row::default()
    };
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("{line}");
            if let Some(counts) = parse_libtest_result(&line) {
                row.passed += counts.0;
                row.failed += counts.1;
                row.skipped += counts.2;
            }
        }
    }
    let status = child.wait()?;
    Ok((row, status.success()))
}

/// Parses `test result: ok. 19 passed; 0 failed; 2 ignored; ...` into (passed, failed, ignored).
pub fn parse_libtest_result(line: &str) -> Option<(usize, usize, usize)> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (_, counts) = rest.split_once(". ")?;
    let mut found = (0, 0, 0);
    for part in counts.split(';') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (
            words.next().and_then(|w| w.parse::<usize>().ok()),
            words.next(),
        ) else {
            continue; // "finished in 0.50s"
        };
        match what {
            "passed" => found.0 = n,
            "failed" => found.1 = n,
            "ignored" => found.2 = n,
            _ => {}
        }
    }
    Some(found)
}

/// The harness summary's rows per leg, and its failed cases as
/// `scenario [leg]: first line of the reason`.
fn read_harness_summary(path: &Path) -> Option<(Vec<Row>, Vec<String>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let legs = v["legs"].as_object()?;
    let count = |c: &serde_json::Value, k: &str| {
        c[k].as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    };
    let rows = legs
        .iter()
        .map(|(name, c)| Row {
            name: name.clone(),
            passed: count(c, "passed"),
            failed: count(c, "failed"),
            skipped: count(c, "skipped"),
            note: String::new(),
        })
        .collect();
    let failed = v["cases"]
        .as_array()
        .map(|cases| {
            cases
                .iter()
                .filter(|c| c["result"] == "failed")
                .map(|c| {
                    let text = |k: &str| c[k].as_str().unwrap_or("?").to_string();
                    let reason: String = text("reason").chars().take(300).collect();
                    format!("{} [{}]: {reason}", text("scenario"), text("leg"))
                })
                .collect()
        })
        .unwrap_or_default();
    Some((rows, failed))
}

/// Rows of the cross-target clrprof-sys runs (xtask/src/cross.rs).
fn cross_rows(strict: bool) -> crate::Result<Vec<Row>> {
    use crate::cross::LegOutcome;
    let reports = crate::cross::run(strict)?;
    Ok(reports
        .into_iter()
        .map(|r| {
            let (failed, note) = match &r.outcome {
                LegOutcome::Passed => (r.failed, String::new()),
                // A leg that failed without a failing test (could not build or
                // start) still counts as one failure.
                LegOutcome::Failed(why) => (r.failed.max(1), why.clone()),
                LegOutcome::Skipped(why) => (r.failed, format!("skipped: {why}")),
            };
            let skipped = r.ignored + usize::from(matches!(r.outcome, LegOutcome::Skipped(_)));
            Row {
                name: format!("clrprof-sys {}", r.leg),
                passed: r.passed,
                failed,
                skipped,
                note,
            }
        })
        .collect())
}

/// The row of the instruction-count gate (xtask/src/bench_gate.rs): one
/// case per measured row; a failing row is a failed case and names both
/// counts. What could not run (no valgrind, a leg not provisioned) is a
/// failure in strict mode, a skip otherwise.
fn gate_row(strict: bool, step_failures: &mut Vec<String>) -> Row {
    let mut row = Row {
        name: "gate (callgrind)".into(),
        ..Row::default()
    };
    match crate::bench_gate::run_default() {
        Ok(report) => {
            let failures = report.failures();
            for f in &failures {
                eprintln!("FAILED: gate: {f}");
            }
            row.failed = failures.len();
            row.passed = report.rows.len() - failures.len();
            let mut notes: Vec<String> = failures.clone();
            if !report.not_run.is_empty() {
                if strict {
                    row.failed += report.not_run.len();
                } else {
                    row.skipped += report.not_run.len();
                }
                notes.extend(report.not_run.iter().map(|n| format!("not run: {n}")));
            }
            notes.push(format!("{:.0} s", report.seconds));
            row.note = notes.join("; ");
        }
        Err(e) => {
            row.failed = 1;
            row.note = e.to_string();
            step_failures.push(format!("gate: {e}"));
        }
    }
    row
}

/// The row of the MSVC step (xtask/src/msvc.rs): one case per check.
fn msvc_row(root: &Path, strict: bool) -> Row {
    let report = crate::msvc::run(root);
    let failures: Vec<String> = report
        .checks
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|e| format!("{name}: {e}")))
        .collect();
    for f in &failures {
        eprintln!("FAILED: {f}");
    }
    let mut row = Row {
        name: format!("msvc {}", crate::msvc::TARGET),
        passed: report.checks.len() - failures.len(),
        failed: failures.len(),
        skipped: 0,
        note: failures.join("; "),
    };
    if let Some(why) = report.unavailable {
        if strict {
            row.failed += 1;
            row.note = why;
        } else {
            row.skipped += 1;
            row.note = format!("skipped: {why}");
        }
    }
    row
}

fn print_table(rows: &[Row]) {
    println!(
        "\n{:<28} {:>7} {:>7} {:>8}  note",
        "leg", "passed", "failed", "skipped"
    );
    for r in rows {
        println!(
            "{:<28} {:>7} {:>7} {:>8}  {}",
            r.name, r.passed, r.failed, r.skipped, r.note
        );
    }
}

#[cfg(test)]
mod tests {
    use super::parse_libtest_result;

    #[test]
    fn parses_libtest_summaries() {
        assert_eq!(
            parse_libtest_result("test result: ok. 19 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.50s"),
            Some((19, 0, 2))
        );
        assert_eq!(
            parse_libtest_result(
                "test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out"
            ),
            Some((3, 1, 0))
        );
        assert_eq!(parse_libtest_result("running 3 tests"), None);
    }
}
