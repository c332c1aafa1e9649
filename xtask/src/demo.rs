//! `cargo xtask demo`: provision, build the example profilers, compile a
//! sample C# app, run it under each example tracer on each leg, and show
//! readably what each tracer saw.

use crate::{provision, test};
use clrprof_testing::csharp::{compile, CompileOptions};
use clrprof_testing::run::{run_app, Outcome, Profiler, RunSpec};
use clrprof_testing::{discover, Os};
use std::collections::BTreeMap;

pub fn main(args: &[String]) -> crate::Result {
    if let Some(a) = args.first() {
        return Err(format!("demo: unknown argument `{a}`").into());
    }
    let root = provision::workspace_root();
    let cache = provision::cache_dir(None);
    println!("==> provision");
    provision::provision(&cache, false)?;

    println!("\n==> build example profilers");
    let mut profilers: Vec<(String, Os, Result<Profiler, String>)> = Vec::new();
    for package in test::example_packages(&root) {
        for os in [Os::Linux, Os::Windows] {
            let built = clrprof_testing::build::build_cdylib(&package, os, false, &root)
                .and_then(|path| {
                    let clsid = clrprof_testing::clsid::single_clsid(&path)?;
                    Ok(Profiler { path, clsid })
                })
                .map_err(|e| e.to_string());
            match &built {
                Ok(p) => println!(
                    "{package} for {}: {} {}",
                    os.rust_target(),
                    p.clsid,
                    p.path.display()
                ),
                Err(e) => println!(
                    "{package} for {}: not usable: {}",
                    os.rust_target(),
                    first_line(e)
                ),
            }
            profilers.push((package.clone(), os, built));
        }
    }

    let runtimes = discover();
    let compiler = runtimes
        .compiler()
        .ok_or("no C# compiler (install mono-mcs)")?;
    let source = root.join("tests").join("apps").join("jit.cs");
    println!("\n==> compile the sample app {}", source.display());
    let app = compile(&compiler, &source, &cache, CompileOptions::default())?;

    println!("\n==> run the sample app under each tracer on each leg");
    let mut failures = 0;
    for missing in &runtimes.missing {
        println!("leg {}: skipped: {}", missing.name, missing.reason);
    }
    for (package, os, built) in &profilers {
        for leg in runtimes.legs.iter().filter(|l| l.os == *os) {
            let label = format!("{package} on {}", leg.name);
            let profiler = match built {
                Ok(p) => p.clone(),
                Err(e) => {
                    println!("{label}: skipped: profiler not built: {}", first_line(e));
                    continue;
                }
            };
            let result = app.for_leg(leg).map_err(|e| e.to_string()).and_then(|dll| {
                let dir = cache.join("demo").join(package).join(&leg.name);
                let plain = run_app(leg, runtimes.wine(), &RunSpec::new(&dll, dir.join("plain")))
                    .map_err(|e| e.to_string())?;
                let traced = run_app(
                    leg,
                    runtimes.wine(),
                    &RunSpec::new(&dll, dir.join("traced")).profiler(profiler),
                )
                .map_err(|e| e.to_string())?;
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
