//! `cargo xtask conformance [--summary FILE] [--check]`: the conformance
//! table with the runtime's own profiler test suite, generated into
//! `book/src/conformance.md`.
//!
//! Input: `tests/conformance.toml` (every area and test program of
//! dotnet/runtime `src/tests/profiler`, as read, each mapped to the clrprof
//! scenarios that reproduce it or to the reason it cannot run here, with the
//! facts where a leg's runtime differs from the runtime's current test), the
//! real-runtime harness's list of scenarios (`--list`), and the harness's
//! results (`harness-summary.json` of the last `cargo xtask test`, or
//! `--summary FILE`): one cell per test and leg says whether its scenarios
//! passed there.
//!
//! Fails when the data names an area without tests, a test without a
//! scenario or a reason, or a scenario the harness does not have; with
//! `--check` (what `cargo xtask test` runs, after the harness) also when a
//! listed scenario failed on a leg, or when no results exist. Scenarios of
//! branches not merged yet (`pending`) count as soon as the harness has
//! them, and are shown as pending until then.

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The legs of the table, in column order: one column per runtime version
/// and OS, every standard leg of the harness.
pub const LEGS: [&str; 7] = clrprof_testing::manifest::STANDARD_LEGS;

/// Areas that hold the runner and the test profilers, not tests.
const NOT_TEST_AREAS: [&str; 2] = ["common", "native"];

/// `tests/conformance.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Data {
    pub source: Source,
    #[serde(default)]
    pub helper: Vec<Helper>,
    #[serde(default)]
    pub test: Vec<Test>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub repository: String,
    pub path: String,
    pub native_list: String,
    pub areas: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Helper {
    pub file: String,
    #[serde(default)]
    pub commit: Option<String>,
    pub role: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Test {
    pub area: String,
    pub file: String,
    pub commit: String,
    pub native: String,
    pub checks: String,
    #[serde(default)]
    pub scenarios: Vec<String>,
    #[serde(default)]
    pub pending: Vec<String>,
    #[serde(default)]
    pub pending_branch: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub facts: Vec<String>,
    /// What a .NET 9, 10 or 11 test checks and how the scenarios prove it
    /// on those legs (listed under the table).
    #[serde(default)]
    pub net9_plus: Option<String>,
}

/// One case of the harness's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    pub result: String,
    pub reason: String,
}

/// Results by (scenario, leg).
pub type Results = BTreeMap<(String, String), CaseResult>;

pub fn main(args: &[String]) -> crate::Result {
    let mut summary: Option<PathBuf> = None;
    let mut check = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--check" => check = true,
            "--summary" => {
                summary = Some(
                    it.next()
                        .map(PathBuf::from)
                        .ok_or("conformance: --summary needs a file")?,
                )
            }
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask conformance [--summary FILE] [--check]\n\n\
                     Writes book/src/conformance.md from tests/conformance.toml, the harness's\n\
                     scenarios and its last results (default: the cache's harness-summary.json).\n\
                     --check: also fail when a listed scenario failed on a leg or no results exist."
                );
                return Ok(());
            }
            other => return Err(format!("conformance: unknown argument `{other}`").into()),
        }
    }
    let root = crate::workspace::root();
    let summary =
        summary.unwrap_or_else(|| crate::provision::cache_dir(None).join("harness-summary.json"));
    generate(&root, &summary, check)
}

/// Reads the data, the harness's scenarios and the results in `summary`,
/// writes `book/src/conformance.md`; with `check`, failed scenarios and
/// missing results are errors too.
pub fn generate(root: &Path, summary: &Path, check: bool) -> crate::Result {
    let data = read_data(root)?;
    let scenarios = harness_scenarios(root)?;
    let results = match std::fs::read_to_string(summary) {
        Ok(text) => Some(parse_summary(&text)?),
        Err(_) if !check => None,
        Err(e) => {
            return Err(format!(
                "conformance: no harness results at {} ({e}); run the harness first",
                summary.display()
            )
            .into())
        }
    };
    let mut problems = validate(&data, &scenarios);
    let page = render(&data, &scenarios, results.as_ref(), &mut problems, check);
    let out = root.join("book/src/conformance.md");
    std::fs::write(&out, page).map_err(|e| format!("{}: {e}", out.display()))?;
    println!("conformance: wrote {}", out.display());
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("conformance:\n  {}", problems.join("\n  ")).into())
    }
}

pub fn read_data(root: &Path) -> crate::Result<Data> {
    let path = root.join("tests/conformance.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()).into())
}

/// The scenario names of the real-runtime harness (`--list`).
fn harness_scenarios(root: &Path) -> crate::Result<BTreeSet<String>> {
    let out = Command::new(clrprof_testing::build::cargo())
        .current_dir(root)
        .args([
            "test",
            "-q",
            "-p",
            "clrprof-tests",
            "--test",
            "runtime",
            "--",
            "--list",
        ])
        .output()
        .map_err(|e| format!("cannot run the harness's --list: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the harness's --list failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(parse_list(&String::from_utf8_lossy(&out.stdout)))
}

/// Scenario names from the harness's `--list` output (`name [leg]` lines).
pub fn parse_list(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_end();
            let (name, leg) = l.rsplit_once(" [")?;
            leg.strip_suffix(']')?;
            Some(name.to_string())
        })
        .collect()
}

/// The per-case results of a harness summary (`"cases"`).
pub fn parse_summary(text: &str) -> crate::Result<Results> {
    let v: serde_json::Value = serde_json::from_str(text)?;
    let cases = v["cases"]
        .as_array()
        .ok_or("the harness summary has no per-case results (\"cases\")")?;
    let mut results = Results::new();
    for c in cases {
        let (Some(s), Some(l), Some(r)) = (
            c["scenario"].as_str(),
            c["leg"].as_str(),
            c["result"].as_str(),
        ) else {
            return Err(format!("malformed case in the harness summary: {c}").into());
        };
        results.insert(
            (s.to_string(), l.to_string()),
            CaseResult {
                result: r.to_string(),
                reason: c["reason"].as_str().unwrap_or("").to_string(),
            },
        );
    }
    Ok(results)
}

/// Structural problems: areas without tests, tests without a scenario or a
/// reason, unknown scenarios.
pub fn validate(data: &Data, scenarios: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    for area in &data.source.areas {
        if NOT_TEST_AREAS.contains(&area.as_str()) {
            continue;
        }
        if !data.test.iter().any(|t| &t.area == area) {
            problems.push(format!("area {area} has no [[test]]"));
        }
    }
    for t in &data.test {
        if !data.source.areas.contains(&t.area) {
            problems.push(format!(
                "{}: area {} is not in source.areas",
                t.file, t.area
            ));
        }
        if !t.file.starts_with(&format!("{}/", t.area)) {
            problems.push(format!("{}: not a file of area {}", t.file, t.area));
        }
        for s in &t.scenarios {
            if !scenarios.contains(s) {
                problems.push(format!("{}: no scenario named {s:?}", t.file));
            }
        }
        let has_scenario =
            !t.scenarios.is_empty() || t.pending.iter().any(|s| scenarios.contains(s));
        let reason = t.reason.as_deref().unwrap_or("").trim();
        if !has_scenario && reason.is_empty() && t.pending.is_empty() {
            problems.push(format!("{}: neither a scenario nor a reason", t.file));
        }
        if !t.pending.is_empty() && t.pending_branch.is_none() {
            problems.push(format!(
                "{}: pending scenarios without pending_branch",
                t.file
            ));
        }
    }
    problems
}

/// What a test's scenarios did on one leg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// Every scenario that ran there passed (at least one ran).
    Passed,
    /// A scenario failed there.
    Failed(Vec<String>),
    /// Every scenario was skipped there (the reason of the first).
    Skipped(String),
    /// No result for this leg.
    NotRun,
    /// No scenario exists (yet).
    NoScenario,
}

/// The cell of scenarios `names` on `leg`.
pub fn cell(names: &[&String], leg: &str, results: Option<&Results>) -> Cell {
    if names.is_empty() {
        return Cell::NoScenario;
    }
    let Some(results) = results else {
        return Cell::NotRun;
    };
    let mut failed = Vec::new();
    let (mut passed, mut skipped) = (0, None);
    for n in names {
        match results.get(&((*n).clone(), leg.to_string())) {
            Some(r) if r.result == "ok" => passed += 1,
            Some(r) if r.result == "failed" => failed.push(format!("{n}: {}", r.reason)),
            Some(r) => {
                skipped.get_or_insert_with(|| r.reason.clone());
            }
            None => {}
        }
    }
    if !failed.is_empty() {
        Cell::Failed(failed)
    } else if passed > 0 {
        Cell::Passed
    } else if let Some(reason) = skipped {
        Cell::Skipped(reason)
    } else {
        Cell::NotRun
    }
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The page.
fn render(
    data: &Data,
    scenarios: &BTreeSet<String>,
    results: Option<&Results>,
    problems: &mut Vec<String>,
    check: bool,
) -> String {
    let mut page = String::new();
    let src = &data.source;
    let _ = writeln!(
        page,
        "# Conformance with the runtime's profiler tests\n\n\
         <!-- Generated by `cargo xtask conformance` from tests/conformance.toml and the \
         real-runtime harness's results; do not edit. -->\n\n\
         The .NET runtime tests its profiling API with a suite of its own: \
         `{}` in `{}`, one C# program per test and a native test profiler \
         per test in `native/` whose checks say what the runtime promises. \
         Every test of it is rewritten here as a clrprof profiler (a class of \
         `tests/fixtures/conformance`, or another fixture) and a C# program \
         (`tests/apps/conformance.cs`, or another app), asserting the same \
         facts inside real runtimes. The table is generated from \
         `tests/conformance.toml`, which lists the suite's areas and test \
         programs as read (with the commit of each file read; the native \
         profilers' list is `{}`), and from the results of the last run of \
         the real-runtime harness (`cargo xtask test`).\n",
        src.path, src.repository, src.native_list
    );
    page.push_str(
        "A leg's cell is **passed** when every scenario of the test that ran \
         there passed, **FAILED** when one failed, **skipped** when the \
         scenarios are left out there (the reason is under the table), and \
         **not run** without results. Where a leg's runtime behaves \
         differently from what the runtime's current test expects, the \
         scenario asserts what that runtime does; those facts, with the \
         runtime versions, follow the table.\n\n",
    );
    page.push_str(
        "One column per leg: the runtime version and OS the scenarios ran on \
         (runtime packs from NuGet; the Windows legs under Wine). The tests of \
         .NET 9, 10 and 11 features are listed under the table with what \
         proves them.\n\n",
    );
    let _ = write!(
        page,
        "| runtime test | what it checks | clrprof scenarios |"
    );
    for leg in LEGS {
        let _ = write!(page, " {leg} |");
    }
    page.push_str("\n|---|---|---|");
    for _ in LEGS.iter() {
        page.push_str("---|");
    }
    page.push('\n');
    for t in &data.test {
        let existing: Vec<&String> = t
            .scenarios
            .iter()
            .chain(t.pending.iter().filter(|s| scenarios.contains(*s)))
            .collect();
        let mut listed: Vec<String> = existing
            .iter()
            .map(|s| format!("`{}`", escape(s)))
            .collect();
        for p in t.pending.iter().filter(|s| !scenarios.contains(*s)) {
            listed.push(format!(
                "`{}` (pending: branch {})",
                escape(p),
                t.pending_branch.as_deref().unwrap_or("?")
            ));
        }
        if listed.is_empty() {
            listed.push("— (see below)".to_string());
        }
        let _ = write!(
            page,
            "| `{}` | {} | {} |",
            t.file,
            escape(&t.checks),
            listed.join("<br>")
        );
        for leg in LEGS.iter() {
            let text = match cell(&existing, leg, results) {
                Cell::Passed => "passed".to_string(),
                Cell::Failed(why) => {
                    if check {
                        for w in &why {
                            problems.push(format!("{} on {leg}: {w}", t.file));
                        }
                    }
                    "**FAILED**".to_string()
                }
                Cell::Skipped(_) => "skipped".to_string(),
                Cell::NotRun => {
                    if check && results.is_some() && !existing.is_empty() {
                        problems.push(format!("{}: no result on {leg}", t.file));
                    }
                    "not run".to_string()
                }
                Cell::NoScenario => "—".to_string(),
            };
            let _ = write!(page, " {text} |");
        }
        page.push('\n');
    }

    page.push_str("\n## The .NET 9, 10 and 11 tests\n\n");
    for t in data.test.iter().filter(|t| t.net9_plus.is_some()) {
        let _ = writeln!(
            page,
            "- `{}`: {}",
            t.file,
            t.net9_plus.as_deref().unwrap_or("").trim()
        );
    }

    page.push_str("\n## Why a test, or a leg of it, cannot run here\n\n");
    for t in data.test.iter().filter(|t| t.reason.is_some()) {
        let _ = writeln!(
            page,
            "- `{}`: {}",
            t.file,
            t.reason.as_deref().unwrap_or("").trim()
        );
    }
    page.push_str(
        "\nA scenario left out on a leg also says why in the harness's own \
         report line (`skipped: ...`).\n",
    );

    page.push_str("\n## Where the legs' runtimes differ from the runtime's current tests\n\n");
    for t in data.test.iter().filter(|t| !t.facts.is_empty()) {
        let _ = writeln!(page, "- `{}`:", t.file);
        for f in &t.facts {
            let _ = writeln!(page, "  - {}", f.trim());
        }
    }

    page.push_str("\n## The suite as read\n\n");
    let _ = writeln!(
        page,
        "Areas of `{}`: {}. `common` holds the runner, `native` the test profilers.\n",
        src.path,
        src.areas
            .iter()
            .map(|a| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    page.push_str("| test program | commit read | test profiler |\n|---|---|---|\n");
    for t in &data.test {
        let _ = writeln!(
            page,
            "| `{}` | `{}` | `{}` |",
            t.file,
            t.commit,
            escape(&t.native)
        );
    }
    page.push_str("\nFiles that are not tests:\n\n");
    for h in &data.helper {
        let commit = h
            .commit
            .as_deref()
            .map(|c| format!(" (`{c}`)"))
            .unwrap_or_default();
        let _ = writeln!(page, "- `{}`{commit}: {}", h.file, h.role);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn the_committed_data_is_complete() {
        let data = read_data(&root()).unwrap();
        // Every scenario named exists is checked against the harness by the
        // xtask itself; here: areas and reasons.
        let all: BTreeSet<String> = data
            .test
            .iter()
            .flat_map(|t| t.scenarios.iter().cloned())
            .collect();
        let problems = validate(&data, &all);
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(data.test.len() >= 30, "{} tests", data.test.len());
    }

    #[test]
    fn list_and_summary_parse() {
        let list = "clrprof real-runtime harness: 2 scenario(s) x 2 leg(s); runtimes from: x\n\
                    a: one [b] [linux-x64-8.0]\na: one [b] [win-x64-8.0]\nother [linux-x64-3.1]\n\n0 passed, 0 failed, 0 skipped\n";
        let names = parse_list(list);
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["a: one [b]", "other"]
        );
        let summary = r#"{"legs":{},"cases":[
            {"scenario":"a","leg":"linux-x64-8.0","result":"ok","reason":""},
            {"scenario":"b","leg":"linux-x64-8.0","result":"skipped","reason":"why"},
            {"scenario":"c","leg":"linux-x64-8.0","result":"failed","reason":"broke"}]}"#;
        let r = parse_summary(summary).unwrap();
        let (a, b, c) = ("a".to_string(), "b".to_string(), "c".to_string());
        assert_eq!(cell(&[&a, &b], "linux-x64-8.0", Some(&r)), Cell::Passed);
        assert_eq!(
            cell(&[&b], "linux-x64-8.0", Some(&r)),
            Cell::Skipped("why".into())
        );
        assert_eq!(
            cell(&[&a, &c], "linux-x64-8.0", Some(&r)),
            Cell::Failed(vec!["c: broke".into()])
        );
        assert_eq!(cell(&[&a], "win-x64-8.0", Some(&r)), Cell::NotRun);
        assert_eq!(cell(&[], "win-x64-8.0", Some(&r)), Cell::NoScenario);
        assert!(parse_summary(r#"{"legs":{}}"#).is_err());
    }
}
