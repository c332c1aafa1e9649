//! The profiler multiplexer (clrprof-mux) inside real runtimes: several
//! profilers in one process, each seeing exactly what it sees alone.
//!
//! - jit-tracer, alloc-tracer, exception-tracer and a hand-written C
//!   profiler (`tests/fixtures/mux-child`, Callback1–3 only) under the
//!   multiplexer: each child's records equal its records when it is loaded
//!   alone, and the app's output is unchanged;
//! - two ELT children (call-tracer twice, different filters; fast path
//!   both, and fast path beside WithInfo) both count every call exactly;
//!   one hooking child is passed through;
//! - two IL rewriters (il-rewriter twice) on the same methods, at JIT time
//!   and by ReJIT: both probes in every body, both counts exact;
//! - a child that fails `Initialize`, one that panics in `Initialize` and
//!   one that panics in every callback leave the others complete;
//! - `clrprof run --profiler A --profiler B --output-dir DIR`;
//! - the pythonnet host, and attach (children that support it) with
//!   detach once every child asked.
//!
//! Two copies of one tracer are two files (`library_copy`): the loader
//! loads one file once per process, so one file named twice would be one
//! library with one set of statics.

use crate::exceptions::WINE_NET8_LEG;
use clrprof::il::{verify, CallSite, MethodBody, Operand};
use clrprof::MdToken;
use clrprof_testing::background::read_records;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::manifest::Os;
use clrprof_testing::run::{Outcome, Profiler};
use clrprof_testing::wine::to_wine_path;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

type R<T> = Result<T, Verdict>;

/// The C fixture's source and CLSID.
const C_CHILD_SOURCE: &str = include_str!("../fixtures/mux-child/mux_child.c");
const C_CHILD_CLSID: &str = "{7C0FFEE1-6A2B-4C3D-8E4F-5A6B7C8D9E0F}";

/// test-profilers classes: panics in every callback it enables (with
/// `CLRPROF_PANIC_IN=initialize`, in `Initialize`).
const PANICKING: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4C}";

/// Tiered compilation off: JIT compilations (and what follows from them)
/// do not depend on timing, so two runs compile the same methods.
pub(crate) const NO_TIERING: [(&str, &str); 2] = [
    ("DOTNET_TieredCompilation", "0"),
    ("COMPlus_TieredCompilation", "0"),
];

/// A child profiler of a multiplexer run: its library, class and variables.
#[derive(Clone)]
pub(crate) struct Kid {
    profiler: Profiler,
    env: Vec<(String, String)>,
}

impl Kid {
    pub(crate) fn new(profiler: Profiler) -> Kid {
        Kid {
            profiler,
            env: Vec::new(),
        }
    }

    pub(crate) fn env(mut self, k: &str, v: &str) -> Kid {
        self.env.push((k.to_string(), v.to_string()));
        self
    }
}

/// A multiplexer run: the app's outcome (its records are the
/// multiplexer's own) and each child's records.
pub(crate) struct MuxRun {
    pub(crate) outcome: Outcome,
    pub(crate) children: Vec<Vec<Value>>,
}

impl MuxRun {
    /// The multiplexer's `child` record of child `index` (from 1).
    fn child_record(&self, index: u64) -> R<&Value> {
        self.outcome
            .events("child")
            .find(|r| r["index"] == index)
            .ok_or_else(|| {
                format!(
                    "no child record for child {index}: {:?}",
                    self.outcome.records
                )
                .into()
            })
    }
}

/// A path as the leg's runtime sees it.
pub(crate) fn target_path(case: &Case<'_>, p: &Path) -> R<String> {
    match case.leg().os {
        Os::Linux => Ok(p.display().to_string()),
        Os::Windows => Ok(to_wine_path(p)?),
    }
}

/// Builds the C fixture for the leg's OS (once per source).
fn c_child(case: &Case<'_>) -> R<Profiler> {
    let os = case.leg().os;
    let cc = clrprof_testing::fixtures::c_compiler(os);
    let hash = clrprof_testing::content_hash(&[C_CHILD_SOURCE.as_bytes(), cc.as_bytes()]);
    let dir = case
        .cache_dir()
        .join("fixtures")
        .join(format!("mux-child-{hash:016x}"));
    let lib = dir.join(match os {
        Os::Linux => "libmux_child.so",
        Os::Windows => "mux_child.dll",
    });
    if !lib.is_file() {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let source = dir.join("mux_child.c");
        std::fs::write(&source, C_CHILD_SOURCE).map_err(|e| format!("{e}"))?;
        let tmp = dir.join(format!(
            "mux_child.{}.tmp",
            clrprof_testing::unique_suffix()
        ));
        let mut cmd = std::process::Command::new(&cc);
        cmd.args(["-shared", "-O1", "-o"]).arg(&tmp).arg(&source);
        if os == Os::Linux {
            cmd.arg("-fPIC");
        }
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run `{cc}` for the C child: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{cc}` failed on the C child: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        std::fs::rename(&tmp, &lib).map_err(|e| format!("{e}"))?;
    }
    Ok(Profiler {
        path: lib,
        clsid: C_CHILD_CLSID.to_string(),
    })
}

/// A second file of a profiler library (`<stem>_<suffix>.<ext>`), so it
/// loads as a library of its own.
pub(crate) fn library_copy(case: &Case<'_>, p: &Profiler, suffix: &str) -> R<Profiler> {
    let stem = p
        .path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("library without a name")?;
    let ext = p.path.extension().and_then(|s| s.to_str()).unwrap_or("");
    let dir = case
        .cache_dir()
        .join("fixtures")
        .join("mux-copies")
        .join(format!("{:?}", case.leg().os));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let copy = dir.join(format!("{stem}_{suffix}.{ext}"));
    let current = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.len(), m.modified().ok()))
    };
    let fresh = match (current(&p.path), current(&copy)) {
        (Some((a, ta)), Some((b, tb))) => a == b && tb >= ta,
        _ => false,
    };
    if !fresh {
        let tmp = dir.join(format!(
            "{stem}_{suffix}.{}.tmp",
            clrprof_testing::unique_suffix()
        ));
        std::fs::copy(&p.path, &tmp).map_err(|e| format!("copying {}: {e}", p.path.display()))?;
        std::fs::rename(&tmp, &copy).map_err(|e| format!("{e}"))?;
    }
    Ok(Profiler {
        path: copy,
        clsid: p.clsid.clone(),
    })
}

fn with_args(
    mut spec: clrprof_testing::run::RunSpec,
    args: &[&str],
) -> clrprof_testing::run::RunSpec {
    spec.args = args.iter().map(|a| a.to_string()).collect();
    spec
}

/// Runs `app` under the multiplexer with `kids`, each writing to its own
/// file (`CLRPROF_MUX_<n>_CLRPROF_OUTPUT`).
pub(crate) fn mux_run(
    case: &Case<'_>,
    app: &Path,
    args: &[&str],
    kids: &[Kid],
    env: &[(&str, &str)],
) -> R<MuxRun> {
    let mux = case.profiler("clrprof-mux")?;
    let spec = with_args(case.spec(app), args);
    let outputs: Vec<PathBuf> = (1..=kids.len())
        .map(|i| spec.work_dir.join(format!("child{i}.jsonl")))
        .collect();
    let list = kids
        .iter()
        .map(|k| {
            Ok(format!(
                "{}={}",
                target_path(case, &k.profiler.path)?,
                k.profiler.clsid
            ))
        })
        .collect::<R<Vec<String>>>()?
        .join(";");
    let mut spec = spec.profiler(mux).env("CLRPROF_MUX_PROFILERS", &list);
    for (i, (kid, out)) in kids.iter().zip(&outputs).enumerate() {
        spec = spec.env(
            &format!("CLRPROF_MUX_{}_CLRPROF_OUTPUT", i + 1),
            &target_path(case, out)?,
        );
        for (k, v) in &kid.env {
            spec = spec.env(&format!("CLRPROF_MUX_{}_{k}", i + 1), v);
        }
    }
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let outcome = case.run(spec)?;
    outcome.check()?;
    let mut children = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        let (records, bad) = read_records(out);
        if !bad.is_empty() {
            return Err(format!("child {} wrote invalid JSON Lines: {bad:?}", i + 1).into());
        }
        children.push(records);
    }
    Ok(MuxRun { outcome, children })
}

/// Runs `app` with `kid` loaded alone.
fn alone_run(
    case: &Case<'_>,
    app: &Path,
    args: &[&str],
    kid: &Kid,
    env: &[(&str, &str)],
) -> R<Outcome> {
    let mut spec = with_args(case.spec(app), args).profiler(kid.profiler.clone());
    for (k, v) in kid
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(env.iter().copied())
    {
        spec = spec.env(k, v);
    }
    let outcome = case.run(spec)?;
    outcome.check_exit()?;
    Ok(outcome)
}

/// Runs `app` without a profiler.
pub(crate) fn plain_run(
    case: &Case<'_>,
    app: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> R<Outcome> {
    let mut spec = with_args(case.spec(app), args);
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let outcome = case.run(spec)?;
    outcome.check()?;
    Ok(outcome)
}

fn same_output(plain: &Outcome, with: &Outcome, what: &str) -> CaseResult {
    if plain.stdout != with.stdout {
        return Err(format!(
            "app output changed under {what}:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, with.stdout
        )
        .into());
    }
    Ok(())
}

/// A child's records as comparable lines: the `runtime` record (which holds
/// the process id) left out, the rest in file order or sorted.
fn comparable(records: &[Value], sorted: bool) -> Vec<String> {
    let mut lines: Vec<String> = records
        .iter()
        .filter(|r| r["event"] != "runtime")
        .map(|r| r.to_string())
        .collect();
    if sorted {
        lines.sort();
    }
    lines
}

/// What differs between two record lists, briefly.
fn difference(alone: &[String], muxed: &[String]) -> String {
    let only_alone: Vec<&String> = alone
        .iter()
        .filter(|l| !muxed.contains(l))
        .take(5)
        .collect();
    let only_muxed: Vec<&String> = muxed
        .iter()
        .filter(|l| !alone.contains(l))
        .take(5)
        .collect();
    format!(
        "{} records alone, {} under the multiplexer; only alone: {only_alone:?}; only under the multiplexer: {only_muxed:?}",
        alone.len(),
        muxed.len()
    )
}

/// How many exceptions the mux app throws: on the win-x64 .NET 8 leg one
/// (its Wine defect hangs the second), or none when a Rust panic (a Windows
/// exception too) may follow.
fn throws(case: &Case<'_>, panics: bool) -> &'static str {
    match (case.leg().name == WINE_NET8_LEG, panics) {
        (false, _) => "3",
        (true, false) => "1",
        (true, true) => "0",
    }
}

fn four_children(case: &Case<'_>) -> CaseResult {
    let app = case.app("mux")?;
    let args = [throws(case, false)];
    let plain = plain_run(case, &app, &args, &NO_TIERING)?;
    let kids = [
        Kid::new(case.profiler("jit-tracer")?),
        Kid::new(case.profiler("alloc-tracer")?),
        Kid::new(case.profiler("exception-tracer")?),
        Kid::new(c_child(case)?),
    ];
    let muxed = mux_run(case, &app, &args, &kids, &NO_TIERING)?;
    same_output(&plain, &muxed.outcome, "the multiplexer")?;
    for i in 1..=kids.len() as u64 {
        let r = muxed.child_record(i)?;
        if r["status"] != "initialized" {
            return Err(format!("child {i} not initialized: {r}").into());
        }
    }
    // The C child implements only Callback1-3; the tracers Callback11.
    if muxed.child_record(4)?["callback_version"] != 3 {
        return Err(format!("C child: {}", muxed.child_record(4)?).into());
    }
    let mut failures = Vec::new();
    for (k, kid) in kids.iter().enumerate() {
        let alone = if k == 3 && case.leg().os == Os::Windows {
            // .NET Core 3.1 under Wine JIT-compiles 6 methods more (and
            // loads 6 classes fewer) of this app when the only profiler is
            // C than when any Rust-built library is a profiler (jit-tracer
            // loaded directly compiles what it compiles under the
            // multiplexer): the C child's baseline on Windows legs is it
            // alone under the multiplexer. The same-process cross-checks
            // below hold on every leg.
            let run = mux_run(case, &app, &args, &kids[3..], &NO_TIERING)?;
            let mut o = run.outcome;
            o.records = run.children[0].clone();
            o
        } else {
            alone_run(case, &app, &args, kid, &NO_TIERING)?
        };
        same_output(&plain, &alone, "a child alone")?;
        if k < 3
            && (alone.runtime_record().is_none()
                || muxed.children[k]
                    .first()
                    .is_none_or(|r| r["event"] != "runtime"))
        {
            failures.push(format!("child {}: no runtime record first", k + 1));
            continue;
        }
        // jit-tracer's records are in compilation order; the others' are
        // compared as sets of lines.
        let a = comparable(&alone.records, k != 0);
        let m = comparable(&muxed.children[k], k != 0);
        if a.is_empty() {
            failures.push(format!("child {}: no records when alone", k + 1));
        } else if a != m {
            failures.push(format!(
                "child {} ({}): {}",
                k + 1,
                kid.profiler.path.display(),
                difference(&a, &m)
            ));
        }
    }
    // The app's own account in the tracers' records.
    let throws: u64 = args[0].parse().unwrap_or(0);
    let widgets = muxed.children[1]
        .iter()
        .find(|r| r["event"] == "alloc" && r["type"] == "Mux.Widget")
        .and_then(|r| r["count"].as_u64());
    if widgets != Some(1000) {
        failures.push(format!(
            "alloc-tracer counted {widgets:?} Mux.Widget, the app made 1000"
        ));
    }
    let exceptions = muxed.children[2]
        .iter()
        .filter(|r| r["event"] == "exception" && r["type"] == "Mux.MuxException")
        .count() as u64;
    if exceptions != throws {
        failures.push(format!(
            "exception-tracer saw {exceptions} MuxException, the app threw {throws}"
        ));
    }
    let c = &muxed.children[3];
    let init = c
        .iter()
        .find(|r| r["event"] == "c_init")
        .ok_or("the C child wrote no c_init")?;
    if init["mask_read"] != init["mask"] {
        failures.push(format!(
            "the C child's GetEventMask answered another mask: {init}"
        ));
    }
    let counts = c
        .iter()
        .find(|r| r["event"] == "c_counts")
        .ok_or("the C child wrote no counts")?;
    // In one process every child got every event it asked for: the C
    // child's counts equal the tracers' records.
    let of = |k: usize, event: &str| {
        muxed.children[k]
            .iter()
            .filter(|r| r["event"] == event)
            .count() as u64
    };
    let expected = [
        ("jit", of(0, "jit")),
        ("modules", of(0, "module")),
        ("exceptions", of(2, "exception")),
    ];
    for (what, n) in expected {
        if counts[what].as_u64() != Some(n) || n == 0 {
            failures.push(format!(
                "the C child counted {counts}, the tracers saw {n} {what}"
            ));
        }
    }
    if counts["exceptions"].as_u64() != Some(throws) {
        failures.push(format!(
            "the C child counted {counts}, the app threw {throws}"
        ));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

fn failing_children(case: &Case<'_>) -> CaseResult {
    let app = case.app("mux")?;
    let args = [throws(case, true)];
    let plain = plain_run(case, &app, &args, &NO_TIERING)?;
    let jit = Kid::new(case.profiler("jit-tracer")?);
    let panicking = case.profiler_class("test-profilers", PANICKING)?;
    let kids = [
        Kid::new(c_child(case)?).env("CLRPROF_MUX_CHILD_MODE", "fail-initialize"),
        Kid::new(panicking.clone()).env("CLRPROF_PANIC_IN", "initialize"),
        jit.clone(),
        Kid::new(library_copy(case, &panicking, "b")?),
        Kid::new(case.profiler("exception-tracer")?),
    ];
    let muxed = mux_run(case, &app, &args, &kids, &NO_TIERING)?;
    same_output(&plain, &muxed.outcome, "the multiplexer")?;
    let status = |i: u64| -> R<(String, String)> {
        let r = muxed.child_record(i)?;
        Ok((
            r["status"].as_str().unwrap_or("").to_string(),
            r["hr"].as_str().unwrap_or("").to_string(),
        ))
    };
    let expect = [
        (1, "dropped", "0x80004005"),
        (2, "dropped", ""),
        (3, "initialized", ""),
        (4, "initialized", ""),
        (5, "initialized", ""),
    ];
    for (i, s, hr) in expect {
        let (got, got_hr) = status(i)?;
        if got != s || (!hr.is_empty() && got_hr != hr) {
            return Err(format!("child {i}: {}", muxed.child_record(i)?).into());
        }
    }
    if muxed.children[1].iter().any(|r| r["event"] == "armed") {
        return Err("the child that panicked in Initialize was armed".into());
    }
    if !muxed.children[3].iter().any(|r| r["event"] == "armed") {
        return Err("the panicking child never got going".into());
    }
    // The others are complete: what each writes alone.
    for k in [2usize, 4] {
        let alone = alone_run(case, &app, &args, &kids[k], &NO_TIERING)?;
        let a = comparable(&alone.records, k != 2);
        let m = comparable(&muxed.children[k], k != 2);
        if a != m {
            return Err(format!("child {}: {}", k + 1, difference(&a, &m)).into());
        }
    }
    Ok(())
}

/// `<prefix> <method> <n>` lines of the app's output.
fn app_counts(stdout: &str, prefix: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|l| {
            let (m, n) = l.rsplit_once(' ')?;
            Some((m.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// A child's `event` records as method → count.
fn record_counts(records: &[Value], event: &str) -> BTreeMap<String, u64> {
    records
        .iter()
        .filter(|r| r["event"] == event)
        .filter_map(|r| Some((r["method"].as_str()?.to_string(), r["count"].as_u64()?)))
        .collect()
}

/// Every method of `expected` whose name starts with `filter` counted
/// exactly, and nothing counted outside the filter.
fn exact_counts(
    who: &str,
    expected: &BTreeMap<String, u64>,
    got: &BTreeMap<String, u64>,
    filter: &str,
) -> Result<usize, String> {
    let mut n = 0;
    for (m, want) in expected.iter().filter(|(m, _)| m.starts_with(filter)) {
        if got.get(m) != Some(want) {
            return Err(format!(
                "{who}: {m}: the app counted {want}, the child {:?}",
                got.get(m)
            ));
        }
        n += 1;
    }
    if let Some(outside) = got.keys().find(|m| !m.starts_with(filter)) {
        return Err(format!(
            "{who}: counted {outside}, outside its filter {filter:?}"
        ));
    }
    if n == 0 {
        return Err(format!("{who}: the app counted no method under {filter:?}"));
    }
    Ok(n)
}

/// The multiplexer's `elt` record.
fn elt_mode(run: &MuxRun) -> R<String> {
    let r = run
        .outcome
        .events("elt")
        .next()
        .ok_or_else(|| format!("no elt record: {:?}", run.outcome.records))?;
    let failed: Vec<String> = r
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| k.starts_with("Set") && v.as_str() != Some("0x00000000"))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    if !failed.is_empty() {
        return Err(format!("the runtime refused hooks: {failed:?}").into());
    }
    Ok(r["mode"].as_str().unwrap_or("").to_string())
}

/// call-tracer twice (two files), with different filters and hook kinds:
/// both count every call of their methods exactly, and the app's results
/// (float, double and struct arguments and returns) are unchanged.
fn two_elt_children(case: &Case<'_>, first: &str, second: &str) -> CaseResult {
    let app = case.app("calls")?;
    let args = ["3"];
    let plain = plain_run(case, &app, &args, &[])?;
    let tracer = case.profiler("call-tracer")?;
    let kids = [
        Kid::new(tracer.clone())
            .env("CLRPROF_ELT", first)
            .env("CLRPROF_CALLS_FILTER", "Calls."),
        Kid::new(library_copy(case, &tracer, "b")?)
            .env("CLRPROF_ELT", second)
            .env("CLRPROF_CALLS_FILTER", "Calls.Program::"),
    ];
    let run = mux_run(case, &app, &args, &kids, &[])?;
    same_output(&plain, &run.outcome, "two ELT children")?;
    if elt_mode(&run)? != "fan-out" {
        return Err(format!("two hooking children, yet {:?}", run.outcome.records).into());
    }
    let expected = app_counts(&plain.stdout, "count ");
    let a = exact_counts(
        "child 1",
        &expected,
        &record_counts(&run.children[0], "calls"),
        "Calls.",
    )?;
    let b = exact_counts(
        "child 2",
        &expected,
        &record_counts(&run.children[1], "calls"),
        "Calls.Program::",
    )?;
    if a < 16 || b >= a {
        return Err(format!("child 1 checked {a} methods, child 2 {b}").into());
    }
    Ok(())
}

/// One hooking child (beside one that does not hook) is passed through.
fn one_elt_child(case: &Case<'_>) -> CaseResult {
    let app = case.app("calls")?;
    let args = ["3"];
    let plain = plain_run(case, &app, &args, &[])?;
    let kids = [
        Kid::new(c_child(case)?),
        Kid::new(case.profiler("call-tracer")?).env("CLRPROF_CALLS_FILTER", "Calls."),
    ];
    let run = mux_run(case, &app, &args, &kids, &[])?;
    same_output(&plain, &run.outcome, "one ELT child")?;
    if elt_mode(&run)? != "pass-through" {
        return Err(format!("one hooking child, yet {:?}", run.outcome.records).into());
    }
    let expected = app_counts(&plain.stdout, "count ");
    exact_counts(
        "child 2",
        &expected,
        &record_counts(&run.children[1], "calls"),
        "Calls.",
    )?;
    Ok(())
}

/// The methods of apps/il.cs.
const IL_METHODS: [&str; 6] = [
    "Il.Shapes::Fib",
    "Il.Shapes::Tiny",
    "Il.Shapes::Guarded",
    "Il.Shapes::Switch",
    "Il.Shapes::Long",
    "Il.Shapes::Instance",
];

/// A dumped body: verified, decoded; the `ldc.i8` operands (probe
/// addresses) of the native probes at its entry.
fn entry_probes(r: &Value) -> Result<Vec<i64>, String> {
    let method = r["method"].as_str().unwrap_or("?");
    let hex = r["hex"].as_str().ok_or("il_body without hex")?;
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{method}: bad hex: {e}"))?;
    let mut sites: HashMap<MdToken, CallSite> = HashMap::new();
    for (tok, s) in r["sites"].as_object().ok_or("il_body without sites")? {
        let tok: u32 = tok.parse().map_err(|_| format!("bad token {tok}"))?;
        let s = s.as_array().ok_or("bad site")?;
        sites.insert(
            MdToken(tok),
            CallSite {
                params: s[0].as_u64().ok_or("bad site")? as u32,
                has_this: s[1].as_bool().ok_or("bad site")?,
                returns_value: s[2].as_bool().ok_or("bad site")?,
            },
        );
    }
    let returns = r["returns"].as_bool().ok_or("il_body without returns")?;
    let (body, _) = verify(&bytes, returns, &sites).map_err(|e| format!("{method}: {e}"))?;
    if MethodBody::parse(&bytes).map_err(|e| e.to_string())? != body {
        return Err(format!("{method}: parse is not deterministic"));
    }
    let names: Vec<&str> = body
        .instructions()
        .iter()
        .map(|i| i.opcode.name())
        .collect();
    let mut probes = Vec::new();
    let mut at = 0;
    while names.get(at..at + 4) == Some(&["ldc.i4", "ldc.i8", "conv.i", "calli"][..]) {
        match body.instructions()[at + 1].operand {
            Operand::Long(address) => probes.push(address),
            ref other => return Err(format!("{method}: ldc.i8 with {other:?}")),
        }
        at += 4;
    }
    Ok(probes)
}

/// il-rewriter twice (two files) on the same methods.
fn two_rewriters(case: &Case<'_>, rejit: bool) -> CaseResult {
    let app = case.app("il")?;
    let plain = plain_run(case, &app, &[], &NO_TIERING)?;
    let rewriter = case.profiler("il-rewriter")?;
    let mut kids = vec![
        Kid::new(rewriter.clone()).env("CLRPROF_IL_DUMP", "1"),
        Kid::new(library_copy(case, &rewriter, "b")?).env("CLRPROF_IL_DUMP", "1"),
    ];
    if rejit {
        kids = kids
            .into_iter()
            .map(|k| k.env("CLRPROF_IL_MODE", "rejit"))
            .collect();
    }
    let run = mux_run(case, &app, &[], &kids, &NO_TIERING)?;
    same_output(&plain, &run.outcome, "two IL rewriters")?;
    let (counted, prefix) = if rejit {
        ("rejit-calls ", "il_rejit_body")
    } else {
        ("calls ", "il_rewritten")
    };
    let expected: BTreeMap<String, u64> = app_counts(&plain.stdout, counted)
        .into_iter()
        .filter(|(m, _)| IL_METHODS.contains(&m.as_str()))
        .collect();
    if expected.len() != IL_METHODS.len() || expected.values().any(|n| *n == 0) {
        return Err(format!("the app's counts: {expected:?}").into());
    }
    let mut addresses = Vec::new();
    for (k, records) in run.children.iter().enumerate() {
        let errors: Vec<String> = records
            .iter()
            .filter(|r| r["event"] == "il_error")
            .map(|r| r.to_string())
            .collect();
        if !errors.is_empty() {
            return Err(format!("child {} reported errors: {errors:?}", k + 1).into());
        }
        exact_counts(
            &format!("child {}", k + 1),
            &expected,
            &record_counts(records, "il_calls")
                .into_iter()
                .filter(|(m, _)| IL_METHODS.contains(&m.as_str()))
                .collect(),
            "Il.Shapes::",
        )?;
        let mut mine = Vec::new();
        for m in IL_METHODS {
            if !records
                .iter()
                .any(|r| r["event"] == prefix && r["method"] == m)
            {
                return Err(format!("child {}: no {prefix} record for {m}", k + 1).into());
            }
            let body = records
                .iter()
                .rev()
                .find(|r| r["event"] == "il_body" && r["method"] == m)
                .ok_or_else(|| format!("child {}: no il_body for {m}", k + 1))?;
            let probes = entry_probes(body)?;
            // The first child rewrites the original body; the second one
            // rewrites the first one's, so its body starts with both probes.
            if probes.len() != k + 1 {
                return Err(format!(
                    "child {}: {m} starts with {} probes: {probes:x?}",
                    k + 1,
                    probes.len()
                )
                .into());
            }
            mine.push(probes[0]);
            if k == 1 && probes[1] != addresses[0] {
                return Err(format!(
                    "child 2's {m} chains the probe {:#x}, child 1's is {:#x}",
                    probes[1], addresses[0]
                )
                .into());
            }
        }
        if mine.iter().any(|a| *a != mine[0]) {
            return Err(format!("child {}: probes at several addresses {mine:x?}", k + 1).into());
        }
        addresses.push(mine[0]);
    }
    if addresses[0] == addresses[1] {
        return Err(
            "the two rewriters' probes are one function: the copy was not a library of its own"
                .into(),
        );
    }
    if !rejit {
        // The IL offset the app reads from its own frame is one of the
        // original IL: the two children's code maps were composed.
        let offset: Option<i64> = run
            .outcome
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("il-offset "))
            .and_then(|n| n.parse().ok());
        if !offset.is_some_and(|o| (0..15).contains(&o)) {
            return Err(
                format!("the app's IL offset is {offset:?}, not one of the original IL").into(),
            );
        }
    }
    Ok(())
}

/// `clrprof run --profiler .. --profiler .. --output-dir DIR -- HOST APP`:
/// the multiplexer found next to the profilers, one file per profiler.
fn cli_run(case: &Case<'_>) -> CaseResult {
    let app = case.app("mux")?;
    let args = [throws(case, false)];
    let plain = plain_run(case, &app, &args, &NO_TIERING)?;
    case.profiler("clrprof-mux")?;
    let cli = crate::exits::native_cli()?;
    let jit = case.profiler("jit-tracer")?;
    let alloc = case.profiler("alloc-tracer")?;
    let c = c_child(case)?;
    let dir = case.spec(&app).work_dir;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut cmd = std::process::Command::new(&cli);
    cmd.arg("run");
    for p in [&jit, &alloc, &c] {
        cmd.arg("--profiler")
            .arg(format!("{}={}", p.path.display(), p.clsid));
    }
    cmd.arg("--output-dir")
        .arg(&out)
        .arg("--")
        .arg(&case.leg().host);
    match case.leg().os {
        Os::Linux => cmd.arg(&app),
        Os::Windows => {
            let wine = clrprof_testing::discover()
                .wine()
                .cloned()
                .ok_or("Windows leg without Wine")?;
            cmd.env("WINEPREFIX", &wine.prefix);
            cmd.arg(to_wine_path(&app)?)
        }
    };
    cmd.args(args);
    for var in [
        "CORECLR_ENABLE_PROFILING",
        "CLRPROF_OUTPUT",
        "CLRPROF_MUX_PROFILERS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1");
    for (k, v) in NO_TIERING {
        cmd.env(k, v);
    }
    let done = clrprof_testing::run::run_captured(cmd, std::time::Duration::from_secs(120), &dir)?;
    let stdout = clrprof_testing::wine::strip_cr(&done.stdout);
    if done.exit != clrprof_testing::run::Exit::Code(0) || stdout != plain.stdout {
        return Err(format!(
            "clrprof run ended {:?} with {stdout:?} (plain: {:?}); stderr: {}",
            done.exit, plain.stdout, done.stderr
        )
        .into());
    }
    let stem = |p: &Profiler| {
        p.path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string()
    };
    let read = |name: &str| -> R<Vec<Value>> {
        let (records, bad) = read_records(&out.join(format!("{name}.jsonl")));
        if !bad.is_empty() || records.is_empty() {
            return Err(
                format!("{name}.jsonl: {} records, invalid: {bad:?}", records.len()).into(),
            );
        }
        Ok(records)
    };
    let mux = read("clrprof-mux")?;
    let initialized = mux
        .iter()
        .filter(|r| r["event"] == "child" && r["status"] == "initialized")
        .count();
    if initialized != 3 {
        return Err(format!("the multiplexer's records: {mux:?}").into());
    }
    let jit_records = read(&stem(&jit))?;
    if !jit_records
        .iter()
        .any(|r| r["event"] == "jit" && r["method"] == "Mux.Program::Make")
    {
        return Err(format!("jit-tracer saw no Mux.Program::Make: {jit_records:?}").into());
    }
    let widgets = read(&stem(&alloc))?
        .iter()
        .find(|r| r["event"] == "alloc" && r["type"] == "Mux.Widget")
        .and_then(|r| r["count"].as_u64());
    if widgets != Some(1000) {
        return Err(format!("alloc-tracer counted {widgets:?} widgets").into());
    }
    let c_records = read(&stem(&c))?;
    let jits = jit_records.iter().filter(|r| r["event"] == "jit").count() as u64;
    if !c_records
        .iter()
        .any(|r| r["event"] == "c_counts" && r["jit"] == jits)
    {
        return Err(format!(
            "the C child's records {c_records:?}, jit-tracer saw {jits} compilations"
        )
        .into());
    }
    Ok(())
}

/// `clrprof run --profiler sampler --profiler jit-tracer --output-dir DIR`:
/// the sampler reads `CLRPROF_OUTPUT` when it finishes (in `Shutdown`) and
/// writes its folded stacks there. That is its own `DIR/<stem>.jsonl`; the
/// multiplexer's `DIR/clrprof-mux.jsonl` keeps its records (issue 39: the
/// sampler once replaced it with its stacks and left no file of its own).
fn child_output_at_finish(case: &Case<'_>) -> CaseResult {
    let app = case.app("hot")?;
    case.profiler("clrprof-mux")?;
    let cli = crate::exits::native_cli()?;
    let sampler = case.profiler("sampler")?;
    let jit = case.profiler("jit-tracer")?;
    let dir = case.spec(&app).work_dir;
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = std::process::Command::new(&cli);
    cmd.arg("run");
    for p in [&sampler, &jit] {
        cmd.arg("--profiler")
            .arg(format!("{}={}", p.path.display(), p.clsid));
    }
    // The directory does not exist yet: `clrprof run` creates it.
    cmd.arg("--output-dir")
        .arg(&out)
        .arg("--")
        .arg(&case.leg().host);
    match case.leg().os {
        Os::Linux => cmd.arg(&app),
        Os::Windows => {
            let wine = clrprof_testing::discover()
                .wine()
                .cloned()
                .ok_or("Windows leg without Wine")?;
            cmd.env("WINEPREFIX", &wine.prefix);
            cmd.arg(to_wine_path(&app)?)
        }
    };
    cmd.arg("1");
    for var in [
        "CORECLR_ENABLE_PROFILING",
        "CLRPROF_OUTPUT",
        "CLRPROF_MUX_OUTPUT",
        "CLRPROF_MUX_PROFILERS",
        "CLRPROF_SAMPLER_RECORDS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let done = clrprof_testing::run::run_captured(cmd, std::time::Duration::from_secs(120), &dir)?;
    if done.exit != clrprof_testing::run::Exit::Code(0) {
        return Err(format!("clrprof run ended {:?}; stderr: {}", done.exit, done.stderr).into());
    }
    let stem = |p: &Profiler| {
        p.path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string()
    };
    let (mux, bad) = read_records(&out.join("clrprof-mux.jsonl"));
    let initialized = mux
        .iter()
        .filter(|r| r["event"] == "child" && r["status"] == "initialized")
        .count();
    if !bad.is_empty() || initialized != 2 {
        return Err(format!(
            "the multiplexer's file was not its own: {initialized} children initialized in {mux:?}, not JSON: {bad:?}"
        )
        .into());
    }
    let folded_path = out.join(format!("{}.jsonl", stem(&sampler)));
    let folded = std::fs::read_to_string(&folded_path)
        .map_err(|e| format!("{}: {e}", folded_path.display()))?;
    let stacks: Vec<&str> = folded.lines().collect();
    let well_formed = |l: &str| {
        l.rsplit_once(' ')
            .is_some_and(|(stack, n)| !stack.is_empty() && n.parse::<u64>().is_ok())
    };
    if stacks.is_empty()
        || !stacks.iter().all(|l| well_formed(l))
        || !stacks.iter().any(|l| l.contains("Hot.Program::Spin"))
    {
        return Err(format!(
            "the sampler's own file {} holds no folded stacks with Hot.Program::Spin: {:?}",
            folded_path.display(),
            &stacks[..stacks.len().min(5)]
        )
        .into());
    }
    let (jit_records, _) = read_records(&out.join(format!("{}.jsonl", stem(&jit))));
    if !jit_records
        .iter()
        .any(|r| r["event"] == "jit" && r["method"] == "Hot.Program::Spin")
    {
        return Err(format!("jit-tracer's file has no Hot.Program::Spin: {jit_records:?}").into());
    }
    Ok(())
}

/// The multiplexer in CPython hosting .NET 10 through pythonnet, which never
/// shuts the runtime down: every child finishes at process exit.
fn under_pythonnet(case: &Case<'_>) -> CaseResult {
    let host = crate::exits::PythonHost::new(case)?;
    let cli = crate::exits::native_cli()?;
    case.profiler("clrprof-mux")?;
    let base = case.spec(&host.script).work_dir;
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let python = |dir: &Path, profilers: &[&Profiler]| -> R<clrprof_testing::run::Captured> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cmd = if profilers.is_empty() {
            std::process::Command::new(&host.python)
        } else {
            let mut c = std::process::Command::new(&cli);
            c.arg("run");
            for p in profilers {
                c.arg("--profiler")
                    .arg(format!("{}={}", p.path.display(), p.clsid));
            }
            c.arg("--output-dir").arg(dir).arg("--").arg(&host.python);
            c
        };
        cmd.arg(&host.script)
            .arg(&host.dotnet_root)
            .arg(&host.helper);
        for var in [
            "CORECLR_ENABLE_PROFILING",
            "CLRPROF_OUTPUT",
            "CLRPROF_MUX_PROFILERS",
        ] {
            cmd.env_remove(var);
        }
        Ok(clrprof_testing::run::run_captured(
            cmd,
            std::time::Duration::from_secs(120),
            dir,
        )?)
    };
    let plain = python(&base.join("plain"), &[])?;
    let truth = crate::exits::python_truth(&plain.stdout)?;
    let tracers = [
        "jit-tracer",
        "alloc-tracer",
        "exception-tracer",
        "call-tracer",
    ];
    let profilers: Vec<Profiler> = tracers.iter().map(|t| case.profiler(t)).collect::<R<_>>()?;
    let c = c_child(case)?;
    let mut all: Vec<&Profiler> = profilers.iter().collect();
    all.push(&c);
    let dir = base.join("mux");
    let with = python(&dir, &all)?;
    if with.exit != plain.exit || with.stdout != plain.stdout {
        return Err(format!(
            "the host ended {:?} with {:?}; without profilers {:?} with {:?}; stderr: {}",
            with.exit, with.stdout, plain.exit, plain.stdout, with.stderr
        )
        .into());
    }
    let mut failures = Vec::new();
    for (tracer, p) in tracers.iter().zip(&profilers) {
        let stem = p.path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let (records, bad) = read_records(&dir.join(format!("{stem}.jsonl")));
        if let Err(e) = crate::exits::check_python_tracer(
            tracer,
            &case.leg().version,
            &records,
            &bad,
            &dir,
            truth,
        ) {
            failures.push(format!("{tracer}: {e}"));
        }
    }
    let (c_records, _) = read_records(&dir.join("libmux_child.jsonl"));
    let exceptions = truth.2;
    match c_records.iter().find(|r| r["event"] == "c_counts") {
        Some(r) if r["why"] == "exit" && r["exceptions"].as_u64() >= Some(exceptions) => {}
        other => failures.push(format!(
            "the C child's counts: {other:?} (the host caught {exceptions} exceptions)"
        )),
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// The multiplexer's attach client data: the profiler list and each
/// child's variables and client data, one `NAME=value` per line.
fn attach_data(
    trigger: &crate::attach::Trigger,
    kids: &[Kid],
    client_data: &[(usize, String)],
) -> R<String> {
    let list = kids
        .iter()
        .map(|k| {
            Ok(format!(
                "{}={}",
                trigger.target_path(&k.profiler.path)?,
                k.profiler.clsid
            ))
        })
        .collect::<R<Vec<String>>>()?
        .join(";");
    let mut data = format!("CLRPROF_MUX_PROFILERS={list}\n");
    for (i, k) in kids.iter().enumerate() {
        for (name, value) in &k.env {
            data.push_str(&format!("CLRPROF_MUX_{}_{name}={value}\n", i + 1));
        }
    }
    for (n, d) in client_data {
        data.push_str(&format!("CLRPROF_MUX_{n}_CLIENT_DATA={d}\n"));
    }
    Ok(data)
}

/// Attach: children that support it run, one that does not is dropped; a
/// child that never asks to detach keeps the multiplexer attached; with only
/// children that ask, the multiplexer detaches, twice in one process.
fn attach(case: &Case<'_>) -> CaseResult {
    use crate::attach::{attach_retrying, start_longrun, wait_for_events, Trigger};
    use std::time::Duration;
    let mux = case.profiler("clrprof-mux")?;
    let tracer = case.profiler("attach-tracer")?;
    let jit = case.profiler("jit-tracer")?;
    let c = c_child(case)?;
    let trigger = Trigger::for_case(case)?;
    let long = Duration::from_secs(60);

    // The multiplexer's own records go to the target's CLRPROF_OUTPUT.
    let dir = case.spec(Path::new("attach")).work_dir;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mux_records = dir.join("mux.jsonl");
    let (tracer_a, c_out, tracer_b) = (
        dir.join("tracer-a.jsonl"),
        dir.join("c.jsonl"),
        dir.join("tracer-b.jsonl"),
    );
    let run = start_longrun(
        case,
        &[("CLRPROF_OUTPUT", &trigger.target_path(&mux_records)?)],
    )?;

    // 1. attach-tracer asks to detach, the C child never does: pending.
    let kids = [
        Kid::new(tracer.clone()),
        Kid::new(c.clone()).env("CLRPROF_OUTPUT", &trigger.target_path(&c_out)?),
        Kid::new(jit.clone()),
    ];
    let data = attach_data(
        &trigger,
        &kids,
        &[(
            1,
            format!(
                "output={};detach_after_ms=200",
                trigger.target_path(&tracer_a)?
            ),
        )],
    )?;
    attach_retrying(&trigger, run.pid, &mux, &data)?;
    wait_for_events(&tracer_a, "detach_requested", 1, long)?;
    let m = wait_for_events(&mux_records, "detach_pending", 1, long)?;
    let c_init = wait_for_events(&c_out, "c_init", 1, long)?;
    if !c_init
        .iter()
        .any(|r| r["event"] == "c_init" && r["attach"] == 1 && r["hr"] == 0)
    {
        return Err(format!("the C child's InitializeForAttach: {c_init:?}").into());
    }
    let dropped = m
        .iter()
        .find(|r| r["event"] == "child" && r["index"] == 3)
        .ok_or("no record of child 3")?;
    if dropped["status"] != "dropped" || dropped["hr"] != "0x80131368" {
        return Err(
            format!("jit-tracer (not attachable) was not dropped as expected: {dropped}").into(),
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    let (now, _) = read_records(&mux_records);
    if now.iter().any(|r| r["event"] == "detached") {
        return Err("detached although the C child never asked".into());
    }
    let records = run.stop_and_check()?;
    let _ = records;
    let (c_records, _) = read_records(&c_out);
    if !c_records
        .iter()
        .any(|r| r["event"] == "c_counts" && r["jit"].as_u64() > Some(0))
    {
        return Err(format!("the C child did not finish with its counts: {c_records:?}").into());
    }

    // 2. Only children that ask: detached, and attached again.
    let run = start_longrun(
        case,
        &[("CLRPROF_OUTPUT", &trigger.target_path(&mux_records)?)],
    )?;
    let _ = std::fs::remove_file(&mux_records);
    let kids = [Kid::new(tracer), Kid::new(jit)];
    let data = attach_data(
        &trigger,
        &kids,
        &[(
            1,
            format!(
                "output={};detach_after_ms=200",
                trigger.target_path(&tracer_b)?
            ),
        )],
    )?;
    for cycle in 1..=2 {
        attach_retrying(&trigger, run.pid, &mux, &data)?;
        wait_for_events(&tracer_b, "detached", cycle, long)?;
        wait_for_events(&mux_records, "detached", cycle, long)?;
    }
    run.stop_and_check()?;
    let (t, _) = read_records(&tracer_b);
    let completes = t.iter().filter(|r| r["event"] == "attach_complete").count();
    if completes != 2 {
        return Err(format!("attach-tracer completed {completes} attaches: {t:?}").into());
    }
    Ok(())
}

/// A child asking for `COR_PRF_DISABLE_INLINING` in `InitializeForAttach`
/// through an attached multiplexer, as attach-tracer alone does in the
/// attach scenario: from .NET 10 the child is kept with the flag in its mask
/// and the module loaded after the attach is compiled without inlining
/// (`JITInlining` is asked only for the app's own module); before .NET 10
/// the child's SDK refuses the mask without calling the runtime (its log:
/// "would answer 0x8013136f CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER")
/// and the multiplexer drops the child with that code.
fn attach_disable_inlining(case: &Case<'_>) -> CaseResult {
    use crate::attach::{run_probe, start_longrun_probed, wait_for_events, Trigger};
    use std::time::Duration;
    let mux = case.profiler("clrprof-mux")?;
    let tracer = case.profiler("attach-tracer")?;
    let trigger = Trigger::for_case(case)?;
    let net10 = case.leg().major() >= 10;
    let dir = case.spec(Path::new("attach-disable")).work_dir;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (mux_records, tracer_out, probe, log) = (
        dir.join("mux.jsonl"),
        dir.join("tracer.jsonl"),
        dir.join("probe"),
        dir.join("sdk.log"),
    );
    for p in [
        &mux_records,
        &tracer_out,
        &probe,
        &log,
        &dir.join("probe.done"),
    ] {
        let _ = std::fs::remove_file(p);
    }
    let run = start_longrun_probed(
        case,
        &[
            ("CLRPROF_OUTPUT", &trigger.target_path(&mux_records)?),
            ("CLRPROF_LOG", "error"),
            ("CLRPROF_LOG_FILE", &trigger.target_path(&log)?),
        ],
        Some(&probe),
    )?;
    let kids = [Kid::new(tracer)];
    let data = attach_data(
        &trigger,
        &kids,
        &[(
            1,
            format!(
                "output={};inlining=1;disable=inlining",
                trigger.target_path(&tracer_out)?
            ),
        )],
    )?;
    let attached = trigger.attach(run.pid, &mux, &data)?;
    let long = Duration::from_secs(60);
    let m = wait_for_events(&mux_records, "child", 1, long)?;
    let child = m
        .iter()
        .find(|r| r["event"] == "child" && r["index"] == 1)
        .ok_or("no record of child 1")?
        .clone();
    if net10 {
        if let Err(r) = attached {
            return Err(format!("the multiplexer's attach failed: {}", r.message).into());
        }
        let mask = child["mask"].as_u64().unwrap_or(0);
        if child["status"] != "initialized"
            || mask & u64::from(clrprof::sys::COR_PRF_DISABLE_INLINING) == 0
        {
            return Err(format!("child 1 on .NET {}: {child}", case.leg().major()).into());
        }
        wait_for_events(&tracer_out, "attach_complete", 1, long)?;
    } else {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if child["status"] != "dropped"
            || child["hr"] != "0x8013136f"
            || !text
                .contains("would answer 0x8013136f CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER")
        {
            return Err(format!(
                "child 1 on .NET {}: {child} (attach: {:?}); the SDK's log: {text:?}",
                case.leg().major(),
                attached.as_ref().map_err(|r| r.message.clone())
            )
            .into());
        }
    }
    let inlined = run_probe(&probe)?;
    let (tracer_records, _) = read_records(&tracer_out);
    run.stop_and_check()?;
    let compiled = tracer_records
        .iter()
        .filter(|r| r["event"] == "compiled" && r["name"] == "LongRun.Program::Probe")
        .count();
    let asked = tracer_records
        .iter()
        .filter(|r| r["event"] == "inlining" && r["caller"] == "LongRun.Program::Probe")
        .count();
    // Under Wine the optimised compile is redone in MinOpts: no inline
    // survives (see the attach scenario).
    let wine = case.leg().os == Os::Windows;
    let want = match (net10, wine) {
        (true, false) => ((true, false), 2, 1),
        (true, true) => ((false, false), 2, 1),
        (false, false) => ((true, true), 0, 0),
        (false, true) => ((false, false), 0, 0),
    };
    if (inlined, compiled, asked) != want {
        return Err(format!(
            "on .NET {}: inlined (own module, copy) {inlined:?}, Probe compiled {compiled} times in the child, JITInlining asked {asked} times; expected {want:?}",
            case.leg().major()
        )
        .into());
    }
    Ok(())
}

/// method-wrapper beside il-rewriter on the same methods of apps/wrap.cs,
/// in either order: the second child rewrites the body the first one set
/// (the multiplexer hands it out from `GetILFunctionBody`), and both count
/// exactly what the app accounted for.
fn wrapper_beside_rewriter(case: &Case<'_>, wrapper_first: bool) -> CaseResult {
    let app = case.app("wrap")?;
    let no_throw = if case.leg().name == crate::exceptions::WINE_NET8_LEG {
        "1"
    } else {
        "0"
    };
    let env = [("WRAP_NO_THROW", no_throw)];
    let plain = plain_run(case, &app, &[], &env)?;
    let wrapper =
        Kid::new(case.profiler("method-wrapper")?).env("CLRPROF_WRAP_FILTER", "Wrap.Target.");
    let rewriter = Kid::new(case.profiler("il-rewriter")?).env("CLRPROF_IL_FILTER", "Wrap.Target.");
    let (kids, w) = if wrapper_first {
        ([wrapper, rewriter], 0)
    } else {
        ([rewriter, wrapper], 1)
    };
    let run = mux_run(case, &app, &[], &kids, &env)?;
    same_output(&plain, &run.outcome, "method-wrapper beside il-rewriter")?;
    let account = crate::wrap::app_account(&plain.stdout, "account");
    let shapes = crate::wrap::shapes(case, false);
    let wrapped = crate::wrap::wrapped_records(&run.children[w]);
    let probed = record_counts(&run.children[1 - w], "il_calls");
    let mut wrong = Vec::new();
    for m in &shapes {
        let want = account.get(*m).copied();
        if want.is_none() {
            wrong.push(format!("{m}: not in the app's account"));
        }
        if wrapped.get(*m).copied() != want {
            wrong.push(format!("{m}: wrapper {:?}, app {want:?}", wrapped.get(*m)));
        }
        // The wrapper starts a constructor after its base constructor call
        // (so Derived's counts only the calls whose Base constructor
        // returned); il-rewriter's probe at IL entry counts every call, and
        // the app makes every Base through Derived.
        let entries = if *m == "Wrap.Target.Derived::.ctor" {
            account.get("Wrap.Target.Base::.ctor").map(|w| w.0)
        } else {
            want.map(|w| w.0)
        };
        if probed.get(*m).copied() != entries {
            wrong.push(format!(
                "{m}: il-rewriter's probe {:?}, app's entries {entries:?}",
                probed.get(*m),
            ));
        }
    }
    for (k, records) in run.children.iter().enumerate() {
        let errors: Vec<String> = records
            .iter()
            .filter(|r| r["event"] == "il_error" || r["event"] == "wrap_refused")
            .map(|r| r.to_string())
            .collect();
        if !errors.is_empty() {
            wrong.push(format!("child {}: {errors:?}", k + 1));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{wrong:#?}").into())
    }
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "mux: attach, a child asking for DISABLE_INLINING: kept from .NET 10 (applied to modules loaded after), dropped by its SDK's refusal before",
            attach_disable_inlining,
        ),
        Scenario::new(
            "mux: jit-, alloc-, exception-tracer and a C profiler each see what they see alone",
            four_children,
        ),
        Scenario::new(
            "mux: children that fail or panic in Initialize, or panic in callbacks, leave the others complete",
            failing_children,
        ),
        Scenario::new("mux: two ELT children (call-tracer twice, fast path) both exact", |case| {
            two_elt_children(case, "fastpath", "fastpath")
        }),
        Scenario::new(
            "mux: two ELT children (fast path beside WithInfo) both exact",
            |case| two_elt_children(case, "fastpath", "withinfo"),
        ),
        Scenario::new("mux: one ELT child is passed through", one_elt_child),
        Scenario::new(
            "mux: two IL rewriters at JIT time chain, both probes count exactly",
            |case| two_rewriters(case, false),
        ),
        Scenario::new(
            "mux: two IL rewriters by ReJIT merge, both probes count exactly",
            |case| two_rewriters(case, true),
        ),
        Scenario::new(
            "mux: method-wrapper then il-rewriter on the same methods, both exact",
            |case| wrapper_beside_rewriter(case, true),
        ),
        Scenario::new(
            "mux: il-rewriter then method-wrapper on the same methods, both exact",
            |case| wrapper_beside_rewriter(case, false),
        ),
        Scenario::new(
            "mux: clrprof run with three --profiler options and --output-dir",
            cli_run,
        ),
        Scenario::new(
            "mux: a child reading CLRPROF_OUTPUT in finish writes its own file, the multiplexer keeps its own",
            child_output_at_finish,
        ),
        Scenario::new(
            "mux: attach (a child that cannot is dropped), detach once every child asked",
            attach,
        ),
    ]
}

/// The multiplexer inside the pythonnet host.
pub fn python_scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "pythonnet: four tracers and a C profiler under the multiplexer, complete without Shutdown",
        under_pythonnet,
    )
    .only_on(
        &[clrprof_testing::manifest::PYTHONNET_LEG],
        "CPython hosting .NET 10 through pythonnet",
    )]
}
