//! First proof: the jit-tracer example loads on every leg, writes the runtime
//! record with the leg's framework version, names the methods the app says it
//! called, and leaves the app's output byte for byte unchanged.

use clrprof_testing::harness::Scenario;
use std::collections::HashSet;

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new("jit-tracer: first proof", |case| {
        let app = case.app("jit")?;
        let plain = case.run(case.spec(&app))?;
        plain.check()?;
        let profiler = case.profiler("jit-tracer")?;
        let traced = case.run(case.spec(&app).profiler(profiler))?;
        traced.check()?;

        if traced.stdout != plain.stdout {
            return Err(format!(
                "app output changed under the profiler:\nwithout: {:?}\nwith:    {:?}",
                plain.stdout, traced.stdout
            )
            .into());
        }

        let runtime = traced.runtime_record().ok_or("no runtime record")?;
        let leg = case.leg();
        if runtime["version"] != leg.version.as_str() {
            return Err(format!(
                "runtime record {runtime} has not the leg's version {}",
                leg.version
            )
            .into());
        }
        if runtime["runtime"] != "coreclr" {
            return Err(format!("runtime record {runtime} does not say coreclr").into());
        }
        if runtime["pid"].as_u64().is_none_or(|p| p == 0) {
            return Err(format!("runtime record {runtime} has no pid").into());
        }

        let jitted: HashSet<&str> = traced
            .events("jit")
            .filter_map(|r| r["method"].as_str())
            .collect();
        let called: Vec<&str> = plain
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("calls "))
            .collect();
        if called.len() < 5 {
            return Err(format!(
                "the app named only {} methods: {:?}",
                called.len(),
                plain.stdout
            )
            .into());
        }
        let missing: Vec<&str> = called
            .iter()
            .copied()
            .filter(|m| !jitted.contains(m))
            .collect();
        if !missing.is_empty() {
            let mut sample: Vec<&str> = jitted
                .iter()
                .copied()
                .filter(|m| m.starts_with("Jit."))
                .collect();
            sample.sort_unstable();
            return Err(format!(
                "{} JIT records, but none for {missing:?}; the app's own methods seen: {sample:?}",
                jitted.len()
            )
            .into());
        }

        let app_module_seen = traced
            .events("module")
            .filter_map(|r| r["name"].as_str())
            .any(|n| {
                let n = n.to_ascii_lowercase();
                n.ends_with("/jit.dll") || n.ends_with("\\jit.dll")
            });
        if !app_module_seen {
            return Err("no module record for the app's own jit.dll".into());
        }
        Ok(())
    })
    .also_on(&[clrprof_testing::manifest::ARM64_LEG])]
}
