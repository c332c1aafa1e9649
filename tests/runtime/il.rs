//! IL rewriting in real runtimes (the il-rewriter example on apps/il.cs):
//! - JIT-time rewrite with tiered compilation on and off: every shape's
//!   injected probe counts exactly the calls the app counted itself, the
//!   app's output is unchanged, and every rewritten body (dumped by the
//!   profiler) passes clrprof's verifier here, outside the profiler;
//! - ReJIT: methods re-JITted at `Rejit.Begin` and reverted at `Rejit.End`
//!   count exactly the calls of the phase in between.

use clrprof::il::{verify, CallSite, MethodBody};
use clrprof::MdToken;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::run::Outcome;
use std::collections::{BTreeMap, HashMap};

/// The methods of apps/il.cs.
const METHODS: [&str; 6] = [
    "Il.Shapes::Fib",
    "Il.Shapes::Tiny",
    "Il.Shapes::Guarded",
    "Il.Shapes::Switch",
    "Il.Shapes::Long",
    "Il.Shapes::Instance",
];

/// `<prefix> <method> <count>` lines of the app's output.
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

fn probe_counts(outcome: &Outcome) -> BTreeMap<String, u64> {
    outcome
        .events("il_calls")
        .filter_map(|r| Some((r["method"].as_str()?.to_string(), r["count"].as_u64()?)))
        .collect()
}

fn no_errors(outcome: &Outcome) -> Result<(), String> {
    let errors: Vec<String> = outcome.events("il_error").map(|r| r.to_string()).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("profiler reported errors: {errors:?}"))
    }
}

/// Runs the app plain and under the rewriter; checks output unchanged and no
/// errors; returns (plain, profiled).
fn run_pair(case: &Case<'_>, env: &[(&str, &str)]) -> Result<(Outcome, Outcome), Verdict> {
    let app = case.app("il")?;
    let mut plain_spec = case.spec(&app);
    for (k, v) in env {
        if !k.starts_with("CLRPROF_") {
            plain_spec = plain_spec.env(k, v);
        }
    }
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let profiler = case.profiler("il-rewriter")?;
    let mut spec = case.spec(&app).profiler(profiler);
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let traced = case.run(spec)?;
    traced.check()?;
    // The managed probe's own report is the only output the app may add.
    let app_output: String = traced
        .stdout
        .lines()
        .filter(|l| !l.starts_with("hits "))
        .map(|l| format!("{l}\n"))
        .collect();
    if app_output != plain.stdout {
        return Err(format!(
            "app output changed under the rewriter:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    no_errors(&traced)?;
    // The offset the app reads from its own stack frame is one of the
    // original IL (inside Where's 15 bytes), not of the rewritten body.
    let offset: Option<i64> = traced
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("il-offset "))
        .and_then(|n| n.parse().ok());
    if !offset.is_some_and(|o| (0..15).contains(&o)) {
        return Err(
            format!("the app's IL offset is {offset:?}, not one of the original IL").into(),
        );
    }
    Ok((plain, traced))
}

fn compare(expected: &BTreeMap<String, u64>, got: &BTreeMap<String, u64>) -> Result<(), String> {
    for m in METHODS {
        let want = expected
            .get(m)
            .ok_or_else(|| format!("the app printed no count for {m}"))?;
        if *want == 0 {
            return Err(format!("the app counted no calls of {m}"));
        }
        match got.get(m) {
            Some(n) if n == want => {}
            Some(n) => return Err(format!("{m}: probe counted {n}, the app {want}")),
            None => return Err(format!("{m}: no il_calls record; got {got:?}")),
        }
    }
    Ok(())
}

/// The code the native probe injects at entry.
const NATIVE_PROBE: &[&str] = &["ldc.i4", "ldc.i8", "conv.i", "calli"];
/// The code the managed probe injects at entry.
const MANAGED_PROBE: &[&str] = &["ldstr", "call"];

/// Every dumped body passes the verifier, decodes, and starts with the
/// probe call.
fn verify_dumped(outcome: &Outcome, probe: &[&str]) -> Result<usize, String> {
    let mut n = 0;
    for r in outcome.events("il_body") {
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
        let first: Vec<&str> = body.instructions()[..probe.len()]
            .iter()
            .map(|i| i.opcode.name())
            .collect();
        if first != probe {
            return Err(format!("{method}: body starts with {first:?}"));
        }
        // Parsing the profiler's bytes again gives the same body.
        if MethodBody::parse(&bytes).map_err(|e| e.to_string())? != body {
            return Err(format!("{method}: parse is not deterministic"));
        }
        n += 1;
    }
    Ok(n)
}

fn jit_scenario(case: &Case<'_>, tiering: &str) -> CaseResult {
    let env = [
        ("CLRPROF_IL_DUMP", "1"),
        ("DOTNET_TieredCompilation", tiering),
        ("COMPlus_TieredCompilation", tiering),
    ];
    let (_plain, traced) = run_pair(case, &env)?;
    compare(
        &app_counts(&traced.stdout, "calls "),
        &probe_counts(&traced),
    )?;
    let verified = verify_dumped(&traced, NATIVE_PROBE)?;
    if verified < METHODS.len() {
        return Err(format!("only {verified} rewritten bodies dumped").into());
    }
    // Tiny grew from a tiny header to a fat one.
    let tiny = traced
        .events("il_body")
        .find(|r| r["method"] == "Il.Shapes::Tiny")
        .ok_or("no il_body for Tiny")?;
    if tiny["original_size"].as_u64().is_none_or(|s| s > 64) || tiny["fat"] != true {
        return Err(format!("Tiny was expected to go from a tiny to a fat header: {tiny}").into());
    }
    // Each method rewritten exactly once, whatever the tiers.
    for m in METHODS {
        let n = traced
            .events("il_rewritten")
            .filter(|r| r["method"] == m)
            .count();
        if n != 1 {
            return Err(format!("{m} rewritten {n} times").into());
        }
    }
    // Tier 1 recompiles the hot recursive method from the replaced IL (the
    // counts above prove the probe survived); without tiering nothing is
    // compiled twice.
    let recompiled = traced
        .events("il_recompiled")
        .filter(|r| r["method"] == "Il.Shapes::Fib")
        .count();
    match (tiering, recompiled) {
        ("1", 0) => return Err("tiered compilation on, but Fib was never recompiled".into()),
        ("0", n) if n > 0 => {
            return Err(format!(
                "tiered compilation off, but Fib was compiled {} times",
                n + 1
            )
            .into())
        }
        _ => {}
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "il-rewriter: JIT-time probe, tiered compilation on",
            |case| jit_scenario(case, "1"),
        ),
        Scenario::new(
            "il-rewriter: JIT-time probe, tiered compilation off",
            |case| jit_scenario(case, "0"),
        ),
        Scenario::new(
            "il-rewriter: managed probe through emitted metadata (MemberRef, user string)",
            |case| {
                let env = [("CLRPROF_IL_PROBE", "managed"), ("CLRPROF_IL_DUMP", "1")];
                let (plain, traced) = run_pair(case, &env)?;
                if plain.stdout.lines().any(|l| l.starts_with("hits ")) {
                    return Err("the app reports probe hits without the profiler".into());
                }
                // Probe.Hit got each method's own name (the user strings)
                // exactly as often as the method counted its calls.
                compare(
                    &app_counts(&traced.stdout, "calls "),
                    &app_counts(&traced.stdout, "hits "),
                )?;
                if verify_dumped(&traced, MANAGED_PROBE)? < METHODS.len() {
                    return Err("fewer rewritten bodies than methods".into());
                }
                Ok(())
            },
        ),
        Scenario::new("il-rewriter: ReJIT and revert count one phase", |case| {
            let env = [("CLRPROF_IL_MODE", "rejit"), ("CLRPROF_IL_DUMP", "1")];
            let (_plain, traced) = run_pair(case, &env)?;
            compare(
                &app_counts(&traced.stdout, "rejit-calls "),
                &probe_counts(&traced),
            )?;
            let requested: Vec<String> = traced
                .events("il_rejit_requested")
                .map(|r| r.to_string())
                .collect();
            let reverted: Vec<String> = traced
                .events("il_revert_requested")
                .map(|r| r.to_string())
                .collect();
            if requested.len() != 1 || reverted.len() != 1 {
                return Err(format!("ReJIT requests {requested:?}, reverts {reverted:?}").into());
            }
            if !requested[0].contains("\"failed\":0") || !reverted[0].contains("\"failed\":0") {
                return Err(format!("ReJIT/revert failures: {requested:?} {reverted:?}").into());
            }
            let bodies = traced.events("il_rejit_body").count();
            if bodies < METHODS.len() {
                return Err(format!("GetReJITParameters supplied only {bodies} bodies").into());
            }
            verify_dumped(&traced, NATIVE_PROBE)?;
            Ok(())
        }),
    ]
}
