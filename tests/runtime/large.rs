//! A large program we did not write: Mono's C# compiler (`mcs.exe`, about
//! 1.9 MB of IL, installed with the test rig's C# compiler) running on
//! .NET 8 and compiling a generated 13,500-line source, under
//! - method-wrapper, wrapping every compiler method (`Mono.CSharp.`), and
//! - the torture profiler, calling every safe API from every callback, and
//! - the sampler taking every profile (CPU, wall, allocations, lock
//!   contention, exceptions) at the production rate of 100 Hz.
//!
//! The compiler's exit status and output must be what they are without a
//! profiler, and the assembly it builds the same: two builds without a
//! profiler already differ in a few per-build GUIDs and the build time, so
//! the profiled build (made between two unprofiled ones) may differ from
//! the first only inside the byte ranges where the two unprofiled builds
//! differ from each other.
//!
//! linux-x64-10.0 (the newest LTS) only: the compiler does not run on .NET
//! Core 3.1 (its `mscorlib` facade lacks `Stack<T>`, a TypeLoadException
//! before any profiler matters), and one leg keeps the CI time of a
//! 15-second (wrapped) and a minute-long (tortured) compile low.

use clrprof_testing::background::read_records;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LEG: &str = "linux-x64-10.0";
const ONLY: &str = "Mono's C# compiler does not run on .NET Core 3.1 (its mscorlib facade lacks \
     Stack<T>); one leg, the newest LTS, keeps the CI time of the compiles low";

/// Where the system's mono-mcs package puts the compiler.
const MCS: &str = "/usr/lib/mono/4.5/mcs.exe";

/// The compiler set up to run on .NET 8 (a copy beside a runtimeconfig),
/// its reference assemblies, and the generated source.
struct Compiler {
    exe: PathBuf,
    refs: PathBuf,
    source: PathBuf,
}

fn compiler(case: &Case<'_>) -> Result<Compiler, Verdict> {
    let mcs = Path::new(MCS);
    if !mcs.exists() {
        return Err(Verdict::Skipped(format!(
            "{MCS} is not installed (the mono-mcs package the rig installs as its C# compiler)"
        )));
    }
    let dir = case.cache_dir().join("large-program");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let exe = dir.join("mcs.exe");
    std::fs::copy(mcs, &exe).map_err(|e| format!("copy {MCS}: {e}"))?;
    std::fs::write(
        dir.join("mcs.runtimeconfig.json"),
        r#"{"runtimeOptions":{"tfm":"net8.0","framework":{"name":"Microsoft.NETCore.App","version":"8.0.0"},"rollForward":"LatestMajor"}}"#,
    )
    .map_err(|e| format!("runtimeconfig: {e}"))?;
    let source = dir.join("generated.cs");
    std::fs::write(&source, generated_source()).map_err(|e| format!("source: {e}"))?;
    Ok(Compiler {
        exe,
        refs: mcs.parent().unwrap_or(Path::new("/")).to_path_buf(),
        source,
    })
}

/// 300 classes of six methods each: loops, try/catch/finally, LINQ with
/// lambdas, switches and generic collections (13,505 lines).
fn generated_source() -> String {
    generated_classes(300)
}

/// The generated source with `classes` classes (45 lines each).
pub(crate) fn generated_classes(classes: usize) -> String {
    let mut s = String::from(
        "using System;\nusing System.Collections.Generic;\nusing System.Linq;\nnamespace Gen {\n",
    );
    for c in 0..classes {
        let _ = writeln!(s, "public class C{c} {{");
        let _ = writeln!(s, "  int f{c}; List<int> xs = new List<int>();");
        for m in 0..6 {
            let _ = writeln!(s, "  public int M{m}(int a, string s) {{");
            let _ = writeln!(s, "    int r = a * {} + s.Length;", m + 1);
            let _ = writeln!(
                s,
                "    for (int i = 0; i < a % 7; i++) {{ r += i; if (r > 1000) break; }}"
            );
            let _ = writeln!(
                s,
                "    try {{ xs.Add(r); r += xs.Where(x => x % 2 == 0).Sum(); }} catch (Exception e) {{ r -= e.Message.Length; }} finally {{ f{c}++; }}"
            );
            let _ = writeln!(
                s,
                "    switch (r % 3) {{ case 0: return r; case 1: return r + {c}; default: break; }}"
            );
            let _ = writeln!(
                s,
                "    var d = new Dictionary<string,int>(); d[s] = r; return d.Count + r;"
            );
            s.push_str("  }\n");
        }
        s.push_str("}\n");
    }
    s.push_str("}\n");
    s
}

/// Runs the compiler, building `out`; with `profiler`, under it. Gives the
/// outcome, the assembly built and the run's working directory.
fn compile(
    case: &Case<'_>,
    c: &Compiler,
    out: &Path,
    profiler: Option<(&str, &[(&str, &str)])>,
) -> Result<(Outcome, Vec<u8>, PathBuf), Verdict> {
    let mut spec = case.spec(&c.exe).timeout(Duration::from_secs(600));
    spec.args = vec![
        "-nostdlib".into(),
        format!("-r:{}", c.refs.join("mscorlib.dll").display()),
        format!("-r:{}", c.refs.join("System.dll").display()),
        format!("-r:{}", c.refs.join("System.Core.dll").display()),
        "-target:library".into(),
        format!("-out:{}", out.display()),
        c.source.display().to_string(),
    ];
    if let Some((package, env)) = profiler {
        spec = spec.profiler(case.profiler(package)?);
        for (k, v) in env {
            spec = spec.env(k, v);
        }
    }
    let work_dir = spec.work_dir.clone();
    let outcome = case.run(spec)?;
    // The sampler's output file holds folded stacks, its records go beside
    // it (`<output>.jsonl`, read by its scenario).
    if profiler.is_some_and(|(p, _)| p == "sampler") {
        outcome.check_exit()?;
    } else {
        outcome.check()?;
    }
    let bytes = std::fs::read(out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok((outcome, bytes, work_dir))
}

/// Byte ranges (inclusive) where `a` and `b` differ, merged when closer
/// than 256 bytes.
fn differing_ranges(a: &[u8], b: &[u8]) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (i, _) in a.iter().zip(b).enumerate().filter(|(_, (x, y))| x != y) {
        match ranges.last_mut() {
            Some((_, end)) if i - *end < 256 => *end = i,
            _ => ranges.push((i, i)),
        }
    }
    ranges
}

/// Builds twice without a profiler and once with one; checks the profiled
/// build as the module docs say. Returns the profiled outcome and its
/// working directory.
fn build_three(
    case: &Case<'_>,
    profiler: &str,
    env: &[(&str, &str)],
) -> Result<(Outcome, PathBuf), Verdict> {
    let c = compiler(case)?;
    let dir = case.cache_dir().join("large-program");
    // The profiled build between the two others: the compiler stamps the
    // time of the build (to the second) into the assembly, and the two
    // unprofiled builds, seconds apart, then differ there as well.
    // The same file name for each (the compiler writes it into the
    // assembly's name and version resource).
    let out = |build: &str| -> Result<PathBuf, Verdict> {
        let d = dir.join(build);
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        Ok(d.join("out.dll"))
    };
    let (plain, first, _) = compile(case, &c, &out("plain1")?, None)?;
    let (with, profiled, work_dir) = compile(case, &c, &out("profiled")?, Some((profiler, env)))?;
    let (_, second, _) = compile(case, &c, &out("plain2")?, None)?;
    if plain.stdout != with.stdout {
        return Err(format!(
            "the compiler's output changed under {profiler}:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, with.stdout
        )
        .into());
    }
    if first.len() != profiled.len() || first.len() != second.len() {
        return Err(format!(
            "assembly sizes: {} and {} without {profiler}, {} with",
            first.len(),
            second.len(),
            profiled.len()
        )
        .into());
    }
    let allowed = differing_ranges(&first, &second);
    if allowed.len() > 8 {
        return Err(format!("two unprofiled builds differ in {} places", allowed.len()).into());
    }
    for (start, end) in differing_ranges(&first, &profiled) {
        if !allowed.iter().any(|(a, b)| *a <= start && end <= *b + 255) {
            return Err(format!(
                "the assembly built under {profiler} differs at bytes {start}..={end}, where \
                 two unprofiled builds agree (they differ only at {allowed:?})"
            )
            .into());
        }
    }
    Ok((with, work_dir))
}

fn wrapped_compiler(case: &Case<'_>) -> CaseResult {
    let (with, _) = build_three(
        case,
        "method-wrapper",
        &[("CLRPROF_WRAP_FILTER", "Mono.CSharp.")],
    )?;
    let refused: Vec<String> = with.events("wrap_refused").map(|r| r.to_string()).collect();
    if !refused.is_empty() {
        return Err(format!("methods refused: {refused:?}").into());
    }
    let panics: Vec<u64> = with
        .events("wrapper_panics")
        .filter_map(|r| r["count"].as_u64())
        .collect();
    if panics != [0] {
        return Err(format!("wrapper_panics {panics:?}").into());
    }
    let mut methods = 0;
    let mut calls = 0;
    let mut open = Vec::new();
    for r in with.events("wrapped") {
        let n = |k: &str| r[k].as_u64().unwrap_or(0);
        methods += 1;
        calls += n("enter");
        // A frame still running when the process ends (the compiler's
        // entry point ends the process) has entered and not left.
        match n("enter").checked_sub(n("return") + n("exception")) {
            Some(0) => {}
            Some(1) => open.push(r["method"].to_string()),
            _ => return Err(format!("unbalanced: {r}").into()),
        }
    }
    if methods < 1000 || calls < 1_000_000 || open.len() > 3 {
        return Err(format!(
            "{methods} methods wrapped, {calls} calls; still open at exit: {open:?}"
        )
        .into());
    }
    Ok(())
}

fn tortured_compiler(case: &Case<'_>) -> CaseResult {
    let (with, _) = build_three(case, "torture", &[("TORTURE_EVERY", "64")])?;
    let calls: u64 = with
        .events("torture")
        .filter_map(|r| r["calls"].as_u64())
        .sum();
    if calls < 1_000_000 {
        return Err(format!("the torture profiler made only {calls} calls").into());
    }
    Ok(())
}

/// Every profile of the sampler on the compiler: the build unchanged, no
/// failure in the event profiles, and each profile's file holding the
/// compiler's own methods (the compiler allocates at every step, so the
/// allocation profile must have walked some of its ticks).
fn sampled_compiler(case: &Case<'_>) -> CaseResult {
    let (_, dir) = build_three(
        case,
        "sampler",
        &[
            ("CLRPROF_SAMPLER_PROFILES", "cpu,wall,alloc,lock,exception"),
            ("CLRPROF_SAMPLER_RATE", "100"),
        ],
    )?;
    // The sampler's records go beside its folded output.
    let (records, bad) = read_records(&dir.join("records.jsonl.jsonl"));
    if !bad.is_empty() {
        return Err(format!("invalid JSON Lines: {bad:?}").into());
    }
    let end = records
        .iter()
        .find(|r| r["event"] == "event-profiles")
        .ok_or("no event-profiles record")?;
    let n = |k: &str| end[k].as_u64().unwrap_or(0);
    if n("failures") != 0 || n("alloc_events") == 0 || n("alloc_walks") == 0 {
        return Err(format!("event profiles: {end}").into());
    }
    let mut report = Vec::new();
    for (kind, must_hold_compiler) in [
        ("cpu", true),
        ("wall", true),
        ("alloc", true),
        ("lock", false),
        ("exception", false),
    ] {
        let path = dir.join(format!("records.jsonl.{kind}.pb.gz"));
        let gz = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let pb = crate::pprof::decode(&gz)?;
        let compiler = pb
            .samples
            .iter()
            .filter(|s| s.frames.iter().any(|f| f.starts_with("Mono.CSharp.")))
            .count();
        report.push(format!(
            "{kind}: {} samples, {compiler} in Mono.CSharp",
            pb.samples.len()
        ));
        if must_hold_compiler && compiler == 0 {
            return Err(format!("no compiler frames in the {kind} profile: {report:?}").into());
        }
    }
    println!(
        "    {}: {} allocation ticks, {} walked; {}",
        case.leg().name,
        n("alloc_events"),
        n("alloc_walks"),
        report.join("; ")
    );
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "large program: Mono's C# compiler with every compiler method wrapped",
            wrapped_compiler,
        )
        .only_on(&[LEG], ONLY),
        Scenario::new(
            "large program: Mono's C# compiler under the torture profiler",
            tortured_compiler,
        )
        .only_on(&[LEG], ONLY),
        Scenario::new(
            "large program: Mono's C# compiler under the sampler taking every profile",
            sampled_compiler,
        )
        .only_on(&[LEG], ONLY),
    ]
}
