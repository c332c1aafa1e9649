//! ReJIT with inliners in real runtimes (the heap-events fixture on
//! apps/inliners.cs, tiered compilation off so the first compilation
//! inlines): `Inliners.Target::Value` (returns 1) is inlined into
//! `Inliners.Callers::Twice` (`Value() * 100 + Value()`); the profiler
//! rewrites `Value` to return 2.
//! - `RequestReJITWithInliners` (Info10): the runtime re-JITs `Value` and
//!   its inliner `Twice`, each once, so the caller computes 202 afterwards
//!   and a call through a delegate returns 2;
//! - `RequestReJIT` (Info4) of `Value` alone, for contrast: `Twice` keeps its
//!   inlined copy of the old body (101) while the delegate sees 2.

use clrprof_testing::harness::{Case, CaseResult, Scenario};
use std::collections::BTreeMap;

const INLINERS: &str = "{3C1E9A57-2B4D-4E8F-9A61-5D7C0B2E4F04}";

/// `caller before N`, `caller after N`, `direct after N` from the app.
fn results(stdout: &str) -> BTreeMap<String, i64> {
    stdout
        .lines()
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn scenario(case: &Case<'_>, mode: &str) -> CaseResult {
    let env = [
        ("DOTNET_TieredCompilation", "0"),
        ("COMPlus_TieredCompilation", "0"),
    ];
    let app = case.app("inliners")?;
    let mut plain_spec = case.spec(&app);
    for (k, v) in env {
        plain_spec = plain_spec.env(k, v);
    }
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let profiler = case.profiler_class("heap-events-profiler", INLINERS)?;
    let mut spec = case
        .spec(&app)
        .profiler(profiler)
        .env("CLRPROF_REJIT", mode);
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let traced = case.run(spec)?;
    traced.check()?;
    let failed: Vec<String> = traced
        .events("check")
        .filter(|r| r["ok"] != true)
        .map(|r| format!("{}: {}", r["name"], r["detail"]))
        .collect();
    if !failed.is_empty() {
        return Err(format!("failed checks:\n{}", failed.join("\n")).into());
    }
    if !traced
        .events("check")
        .any(|r| r["name"] == "request" && r["ok"] == true)
    {
        return Err("the ReJIT request was never made".into());
    }
    // The JIT reported the inlining the scenario relies on.
    if !traced
        .events("inlined")
        .any(|r| r["caller"] == "Inliners.Callers::Twice")
    {
        return Err("the JIT never reported Value inlined into Twice".into());
    }
    let base = results(&plain.stdout);
    let got = results(&traced.stdout);
    let one = |k: &str, m: &BTreeMap<String, i64>| m.get(k).copied();
    if one("caller before", &base) != Some(101)
        || one("caller after", &base) != Some(101)
        || one("direct after", &base) != Some(1)
    {
        return Err(format!("the app's own results without a profiler: {base:?}").into());
    }
    let mut rejitted: Vec<String> = traced
        .events("rejit_compiled")
        .filter_map(|r| r["function"].as_str().map(str::to_string))
        .collect();
    rejitted.sort();
    let (want_after, want_rejitted) = if mode == "plain" {
        // The caller keeps its inlined copy of the old body.
        (101, vec!["Inliners.Target::Value".to_string()])
    } else {
        (
            202,
            vec![
                "Inliners.Callers::Twice".to_string(),
                "Inliners.Target::Value".to_string(),
            ],
        )
    };
    if one("caller before", &got) != Some(101)
        || one("caller after", &got) != Some(want_after)
        || one("direct after", &got) != Some(2)
    {
        return Err(format!(
            "under the profiler the app computed {got:?}; expected caller 101 then {want_after}, direct 2"
        )
        .into());
    }
    if rejitted != want_rejitted {
        return Err(format!("ReJIT compilations {rejitted:?}, expected {want_rejitted:?}").into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "inliners: RequestReJITWithInliners re-JITs the rewritten method and its inliner",
            |case| scenario(case, "inliners"),
        ),
        Scenario::new(
            "inliners: plain RequestReJIT leaves the inliner's old copy (contrast)",
            |case| scenario(case, "plain"),
        ),
    ]
}
