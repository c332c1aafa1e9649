//! `cargo xtask demo [--leg NAME]... [--all-legs]`: provision, build the
//! example profilers, compile a sample C# app, run it under each example
//! tracer, and show readably what each tracer saw. By default on the newest
//! LTS runtime ([`DEFAULT_LEG`]); `--leg` picks others, `--all-legs` takes
//! every provisioned leg.

use crate::provision;
use clrprof_testing::csharp::{compile, CompileOptions};
use clrprof_testing::manifest::Target;
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use clrprof_testing::{discover, Leg};
use std::collections::BTreeMap;

/// The leg the demo runs on unless told otherwise: .NET 10, the newest LTS.
pub const DEFAULT_LEG: &str = "linux-x64-10.0";

pub fn main(args: &[String]) -> crate::Result {
    let mut wanted: Vec<String> = Vec::new();
    let mut all = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--leg" => wanted.push(it.next().ok_or("--leg needs a leg name")?.clone()),
            "--all-legs" => all = true,
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask demo [--leg NAME]... [--all-legs]\n\n\
                     Runs a sample app under each example tracer on {DEFAULT_LEG} (the newest LTS),\n\
                     on the named legs, or on every provisioned leg."
                );
                return Ok(());
            }
            other => return Err(format!("demo: unknown argument `{other}`").into()),
        }
    }
    if wanted.is_empty() {
        wanted.push(DEFAULT_LEG.to_string());
    }
    let root = crate::workspace::root();
    let cache = provision::cache_dir(None);
    println!("==> provision");
    provision::provision(&cache, false)?;

    let runtimes = discover();
    let legs: Vec<&Leg> = runtimes
        .legs
        .iter()
        .filter(|l| all || wanted.contains(&l.name))
        .collect();
    for name in &wanted {
        if !all && !legs.iter().any(|l| &l.name == name) {
            let reason = runtimes
                .missing
                .iter()
                .find(|m| &m.name == name)
                .map(|m| m.reason.clone())
                .unwrap_or_else(|| "not provisioned".to_string());
            return Err(format!("demo: leg {name} cannot run: {reason}").into());
        }
    }
    let mut targets: Vec<Target> = Vec::new();
    for leg in &legs {
        if !targets.contains(&leg.target()) {
            targets.push(leg.target());
        }
    }

    println!("\n==> build example profilers");
    let mut profilers: Vec<(String, Target, Result<Profiler, String>)> = Vec::new();
    for package in crate::workspace::example_packages(&root) {
        for &target in &targets {
            let built = clrprof_testing::build::build_cdylib(&package, target, false, &root)
                .and_then(|path| {
                    let clsid = clrprof_testing::clsid::single_clsid(&path)?;
                    Ok(Profiler { path, clsid })
                })
                .map_err(|e| e.to_string());
            match &built {
                Ok(p) => println!(
                    "{package} for {}: {} {}",
                    target.rust_target(),
                    p.clsid,
                    p.path.display()
                ),
                Err(e) => println!(
                    "{package} for {}: not usable: {}",
                    target.rust_target(),
                    first_line(e)
                ),
            }
            profilers.push((package.clone(), target, built));
        }
    }

    let compiler = runtimes
        .compiler()
        .ok_or("no C# compiler (run `cargo xtask provision`)")?;
    let source = root.join("tests").join("apps").join("jit.cs");
    println!("\n==> compile the sample app {}", source.display());

    println!("\n==> run the sample app under each tracer on each leg");
    let mut failures = 0;
    for (package, target, built) in &profilers {
        for leg in legs.iter().filter(|l| l.target() == *target) {
            let label = format!("{package} on {}", leg.name);
            let profiler = match built {
                Ok(p) => p.clone(),
                Err(e) => {
                    println!("{label}: skipped: profiler not built: {}", first_line(e));
                    continue;
                }
            };
            let app = compile(&compiler, &source, &cache, CompileOptions::default(), leg)
                .and_then(|app| app.for_leg(leg));
            let result = app.map_err(|e| e.to_string()).and_then(|dll| {
                let dir = cache.join("demo").join(package).join(&leg.name);
                let plain = run_app(leg, runtimes.wine(), &RunSpec::new(&dll, dir.join("plain")))
                    .map_err(|e| e.to_string())?;
                let mut spec = RunSpec::new(&dll, dir.join("traced")).profiler(profiler);
                if package == "method-wrapper" {
                    // The wrapper wraps the methods its filter names: the app's own.
                    spec = spec.env("CLRPROF_WRAP_FILTER", APP_NAMESPACE);
                }
                let traced = run_app(leg, runtimes.wine(), &spec).map_err(|e| e.to_string())?;
                if package == "sampler" {
                    // The sampler writes folded stacks to CLRPROF_OUTPUT and
                    // its JSON Lines records next to it (issue 10's layout).
                    traced.check_exit()?;
                    return describe_sampler(&dir.join("traced"), plain.stdout == traced.stdout);
                }
                traced.check()?;
                Ok(describe(&traced, plain.stdout == traced.stdout))
            });
            match result {
                Ok(text) => println!("{label}: {text}"),
                Err(reason) => {
                    failures += 1;
                    println!("{label}: FAILED: {reason}");
                }
            }
        }
    }
    if failures > 0 {
        return Err(format!("{failures} demo run(s) failed").into());
    }
    Ok(())
}

/// A readable account of the sampler's two files: the records
/// (`records.jsonl.jsonl`) and the folded stacks (`records.jsonl`).
fn describe_sampler(dir: &std::path::Path, output_unchanged: bool) -> Result<String, String> {
    let (records, bad) =
        clrprof_testing::background::read_records(&dir.join("records.jsonl.jsonl"));
    if !bad.is_empty() {
        return Err(format!(
            "sampler wrote invalid JSON Lines: {}",
            bad.join("; ")
        ));
    }
    let runtime = records
        .iter()
        .find(|r| r["event"] == "runtime")
        .ok_or("profiler did not load: no runtime record")?;
    let method = records
        .iter()
        .find(|r| r["event"] == "sampling")
        .and_then(|r| r["method"].as_str())
        .unwrap_or("?");
    let folded = std::fs::read_to_string(dir.join("records.jsonl")).unwrap_or_default();
    let mut stacks: Vec<(u64, &str)> = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(stack, n)| Some((n.parse().ok()?, stack)))
        .collect();
    stacks.sort_by_key(|s| std::cmp::Reverse(s.0));
    let samples: u64 = stacks.iter().map(|(n, _)| n).sum();
    let hottest = stacks
        .first()
        .map(|(n, s)| format!("{} ({n})", s.rsplit(';').next().unwrap_or(s)))
        .unwrap_or_else(|| "-".into());
    Ok(format!(
        "runtime {} {} (pid {}); sampling by {method}; {samples} samples in {} distinct stacks; hottest leaf: {hottest}; {}",
        runtime["runtime"].as_str().unwrap_or("?"),
        runtime["version"].as_str().unwrap_or("?"),
        runtime["pid"],
        stacks.len(),
        if output_unchanged { "app output unchanged" } else { "APP OUTPUT CHANGED" }
    ))
}

/// The sample app's namespace (`tests/apps/jit.cs`): its own methods.
const APP_NAMESPACE: &str = "Jit.";

/// The method wrapper's account: one `wrapped` record per method name with
/// its `enter`, `return` and `exception` counts.
fn describe_wrapped<'a>(wrapped: impl Iterator<Item = &'a serde_json::Value>) -> String {
    let mut methods: Vec<(&str, u64)> = Vec::new();
    let (mut returns, mut exceptions) = (0u64, 0u64);
    for r in wrapped {
        let count = |k: &str| r[k].as_u64().unwrap_or(0);
        methods.push((r["method"].as_str().unwrap_or("?"), count("enter")));
        returns += count("return");
        exceptions += count("exception");
    }
    let calls: u64 = methods.iter().map(|(_, n)| n).sum();
    methods.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let most: Vec<String> = methods
        .iter()
        .take(3)
        .map(|(m, n)| format!("{m} {n}"))
        .collect();
    format!(
        "{} methods wrapped, {calls} calls counted ({returns} returns, {exceptions} exceptions); most called: {}",
        methods.len(),
        most.join(", ")
    )
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// A readable account of a tracer's records.
fn describe(o: &Outcome, output_unchanged: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(r) = o.runtime_record() {
        parts.push(format!(
            "runtime {} {} (pid {})",
            r["runtime"].as_str().unwrap_or("?"),
            r["version"].as_str().unwrap_or("?"),
            r["pid"]
        ));
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in o.records.iter().skip(1) {
        *counts
            .entry(r["event"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    for (event, n) in &counts {
        match event.as_str() {
            "jit" => {
                let methods: Vec<&str> = o
                    .events("jit")
                    .filter_map(|r| r["method"].as_str())
                    .collect();
                let own: Vec<&str> = methods
                    .iter()
                    .copied()
                    .filter(|m| m.starts_with("Jit."))
                    .collect();
                parts.push(format!(
                    "{n} methods JIT-compiled; first: {}; the app's own: {}",
                    methods.first().unwrap_or(&"-"),
                    own.join(", ")
                ));
            }
            "module" => {
                let names: Vec<String> = o
                    .events("module")
                    .filter_map(|r| r["name"].as_str())
                    .map(|n| n.rsplit(['/', '\\']).next().unwrap_or(n).to_string())
                    .collect();
                parts.push(format!("{n} modules loaded ({})", names.join(", ")));
            }
            "wrapped" => parts.push(describe_wrapped(o.events("wrapped"))),
            "wrapper_panics" => {
                let panics: u64 = o
                    .events("wrapper_panics")
                    .filter_map(|r| r["count"].as_u64())
                    .sum();
                parts.push(format!("{panics} handler panics"));
            }
            other => parts.push(format!("{n} {other} records")),
        }
    }
    parts.push(if output_unchanged {
        "app output unchanged".into()
    } else {
        "APP OUTPUT CHANGED".into()
    });
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::describe_wrapped;
    use serde_json::json;

    #[test]
    fn the_wrapper_account_counts_methods_and_calls() {
        let records = [
            json!({"event": "wrapped", "method": "Jit.Counter::Add", "enter": 100, "return": 100, "exception": 0}),
            json!({"event": "wrapped", "method": "Jit.Program::Fib", "enter": 21891, "return": 21891, "exception": 0}),
            json!({"event": "wrapped", "method": "Jit.Program::Main", "enter": 1, "return": 0, "exception": 1}),
        ];
        assert_eq!(
            describe_wrapped(records.iter()),
            "3 methods wrapped, 21992 calls counted (21991 returns, 1 exceptions); \
             most called: Jit.Program::Fib 21891, Jit.Counter::Add 100, Jit.Program::Main 1"
        );
    }
}
