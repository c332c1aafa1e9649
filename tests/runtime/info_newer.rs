//! `ICorProfilerInfo4`…`ICorProfilerInfo9` and `ICorProfilerInfo11` inside
//! real runtimes, with the info-newer-profiler fixture (one profiler class
//! per scenario): code versions under tiered compilation, dynamic methods
//! and a name cache while the runtime recycles their IDs, metadata applied
//! at run time with IL that calls the added method, in-memory symbols, the
//! process environment, and which Info version each runtime offers. Every
//! check the fixture writes must be present and pass, and the app's output
//! must not change (except what the environment scenario changes on
//! purpose).

use clrprof_testing::harness::{Case, CaseResult, Scenario};
use clrprof_testing::run::Outcome;
use std::collections::{BTreeMap, HashMap};

const CODE_VERSIONS: &str = "{3C7E1A52-9D04-4B6F-8E21-5A0B7C9D1E31}";
const DYNAMIC: &str = "{3C7E1A52-9D04-4B6F-8E21-5A0B7C9D1E32}";
const EMIT: &str = "{3C7E1A52-9D04-4B6F-8E21-5A0B7C9D1E33}";
const ENVIRONMENT: &str = "{3C7E1A52-9D04-4B6F-8E21-5A0B7C9D1E34}";
const FIXTURE: &str = "info-newer-profiler";

/// The highest `ICorProfilerInfoN` each runtime implements (book: "Which
/// interfaces each runtime implements"): 11 on .NET Core 3.1, 14 on .NET 8,
/// 15 from .NET 9 on (`EnumerateGCHeapObjects`, dotnet/runtime PR 103735;
/// 15 is also the newest the bindings know, corprof.idl of .NET 10).
fn expected_info_version(case: &Case<'_>) -> u64 {
    match case.leg().major() {
        0..=3 => 11,
        5..=8 => 14,
        _ => 15,
    }
}

/// Runs `app` without and with the fixture class `clsid`; returns both.
fn run_pair(
    case: &Case<'_>,
    app: &str,
    clsid: &str,
    env: &[(&str, &str)],
) -> Result<(Outcome, Outcome), clrprof_testing::harness::Verdict> {
    let app = case.app(app)?;
    let mut plain_spec = case.spec(&app);
    for (k, v) in env {
        plain_spec = plain_spec.env(k, v);
    }
    let plain = case.run(plain_spec)?;
    plain.check()?;
    let profiler = case.profiler_class(FIXTURE, clsid)?;
    let mut spec = case.spec(&app).profiler(profiler);
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let traced = case.run(spec)?;
    traced.check()?;
    Ok((plain, traced))
}

/// Fails on a failed check or a missing one.
fn checks(traced: &Outcome, expected: &[&str]) -> CaseResult {
    let failed: Vec<String> = traced
        .events("check")
        .filter(|r| r["ok"] != true)
        .map(|r| format!("{}: {}", r["name"], r["detail"]))
        .collect();
    if !failed.is_empty() {
        return Err(format!("failed checks:\n{}", failed.join("\n")).into());
    }
    let passed: Vec<&str> = traced
        .events("check")
        .filter_map(|r| r["name"].as_str())
        .collect();
    let missing: Vec<&&str> = expected.iter().filter(|c| !passed.contains(c)).collect();
    if !missing.is_empty() {
        return Err(format!("checks never run: {missing:?}; ran {passed:?}").into());
    }
    Ok(())
}

fn same_output(plain: &Outcome, traced: &Outcome) -> CaseResult {
    if traced.stdout != plain.stdout {
        return Err(format!(
            "app output changed under the profiler:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    Ok(())
}

fn code_versions(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = run_pair(case, "tiers", CODE_VERSIONS, &[])?;
    same_output(&plain, &traced)?;
    let version = traced
        .events("info_version")
        .find_map(|r| r["version"].as_u64())
        .ok_or("no info_version record")?;
    let want = expected_info_version(case);
    if version != want {
        return Err(format!(
            "runtime {} offers ICorProfilerInfo{version}, the book says {want}",
            case.leg().version
        )
        .into());
    }
    checks(
        &traced,
        &[
            "tiered_up",
            "versions_own_code",
            "versions_own_map",
            "ip_lookup_each_version",
            "first_version_methods",
            "jited_functions2",
            "initialize_current_thread",
            "ngen_inliners",
            "object_size2",
        ],
    )
}

fn dynamic_methods(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = run_pair(case, "lcg", DYNAMIC, &[])?;
    same_output(&plain, &traced)?;
    checks(
        &traced,
        &[
            "described",
            "found_from_ip",
            "metadata_method_is_not_dynamic",
        ],
    )?;
    // The app's own account: how many DynamicMethods it made.
    let made: usize = plain
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("dynamic methods "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or("the app did not say how many dynamic methods it made")?;
    // Each method's own name, exactly once, through the name cache: a
    // recycled ID named with its previous method's name would repeat one
    // name and lose another.
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids: HashMap<u64, usize> = HashMap::new();
    for r in traced.events("lcg") {
        *names
            .entry(r["name"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
        *ids.entry(r["id"].as_u64().unwrap_or(0)).or_default() += 1;
    }
    let expected: Vec<String> = (0..made).map(|i| format!("Dyn_{i}")).collect();
    let wrong: Vec<String> = names
        .iter()
        .filter(|(n, &k)| k != 1 || !expected.contains(n))
        .map(|(n, k)| format!("{n} x{k}"))
        .collect();
    let missing: Vec<&String> = expected
        .iter()
        .filter(|n| !names.contains_key(*n))
        .collect();
    if !wrong.is_empty() || !missing.is_empty() {
        return Err(format!(
            "names given by the cache: unexpected or repeated {wrong:?}; never named {missing:?}"
        )
        .into());
    }
    // The property is only proven if the runtime did recycle IDs.
    let recycled = ids.values().filter(|&&k| k > 1).count();
    if recycled == 0 {
        return Err(format!(
            "{made} dynamic methods got {} distinct FunctionIDs: no ID was recycled, so the cache was not put to the test",
            ids.len()
        )
        .into());
    }
    // Every unload names the method that last had that ID (the cache still
    // knows it while the profiler's callback runs, and forgets it after).
    let mut last: HashMap<u64, String> = HashMap::new();
    let mut unloaded_lcg = 0usize;
    for r in &traced.records {
        let id = r["id"].as_u64().unwrap_or(0);
        let name = r["name"].as_str().unwrap_or("");
        match r["event"].as_str() {
            Some("lcg") => {
                last.insert(id, name.to_string());
            }
            Some("unloaded") if name.starts_with("Dyn_") => {
                unloaded_lcg += 1;
                if last.get(&id).map(String::as_str) != Some(name) {
                    return Err(format!(
                        "DynamicMethodUnloaded of {id:#x} named {name:?}, but that ID last belonged to {:?}",
                        last.get(&id)
                    )
                    .into());
                }
            }
            Some("unloaded") => {}
            _ => {}
        }
    }
    // The app collects after every tenth method: all but the last few are
    // unloaded before it ends.
    if unloaded_lcg * 10 < made * 9 {
        return Err(format!("{unloaded_lcg} of {made} dynamic methods reported unloaded").into());
    }
    if traced.events("lambda").next().is_none() {
        return Err("the compiled expression tree was not seen as a dynamic method".into());
    }
    eprintln!(
        "    {}: {made} dynamic methods, {} FunctionIDs ({recycled} recycled), {unloaded_lcg} unloads reported",
        case.leg().name,
        ids.len()
    );
    Ok(())
}

fn emit(case: &Case<'_>) -> CaseResult {
    let (plain, traced) = run_pair(case, "emit", EMIT, &[])?;
    same_output(&plain, &traced)?;
    checks(
        &traced,
        &[
            "metadata_applied_and_il_rewritten",
            "added_method_called",
            "file_module_has_no_symbols",
            "reflection_emit_symbols_refused",
            "symbols_read_in_pieces",
        ],
    )?;
    // The app's blob, as it printed it: "... symbols <len> <fnv> True".
    let line = plain
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("loaded a copy with symbols "))
        .ok_or("the app did not print its symbol blob")?;
    let mut words = line.split_whitespace();
    let (len, fnv) = (words.next(), words.next());
    let seen: Vec<(u64, String)> = traced
        .events("symbols")
        .map(|r| {
            (
                r["len"].as_u64().unwrap_or(0),
                r["fnv"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want = (
        len.and_then(|l| l.parse::<u64>().ok()).unwrap_or(u64::MAX),
        fnv.unwrap_or("").to_string(),
    );
    if seen != vec![want.clone()] {
        return Err(format!("in-memory symbols read {seen:?}, the app loaded {want:?}").into());
    }
    Ok(())
}

fn environment(case: &Case<'_>) -> CaseResult {
    let long = "L".repeat(600);
    let env = [
        ("CLRPROF_ENV_FROM_TEST", "from the test"),
        ("CLRPROF_ENV_LONG", long.as_str()),
        ("CLRPROF_ENV_REMOVED", "to be removed"),
    ];
    let (plain, traced) = run_pair(case, "envvars", ENVIRONMENT, &env)?;
    checks(&traced, &["set_and_remove"])?;
    let read = traced.events("read").next().ok_or("no read record")?;
    if read["from_test"] != "from the test"
        || read["long_len"] != 600
        || read["missing_is_none"] != true
    {
        return Err(format!("the profiler read {read}").into());
    }
    // The managed program sees the profiler's changes: the variable it set
    // (UTF-16 code units of the value) and the one it removed.
    let hex = |s: &str| -> String {
        s.encode_utf16()
            .take(16)
            .map(|u| format!("{u:04x}"))
            .collect()
    };
    let set = "set by the profiler: \u{e4}\u{20ac}\u{1d11e}";
    let with_lines: Vec<&str> = traced.stdout.lines().collect();
    let plain_lines: Vec<&str> = plain.stdout.lines().collect();
    let expected_with = [
        plain_lines.first().copied().unwrap_or(""),
        plain_lines.get(1).copied().unwrap_or(""),
        "CLRPROF_ENV_REMOVED <unset>",
        &format!(
            "CLRPROF_ENV_SET_BY_PROFILER len {} {}",
            set.encode_utf16().count(),
            hex(set)
        ),
    ];
    if plain_lines.get(3) != Some(&"CLRPROF_ENV_SET_BY_PROFILER <unset>")
        || plain_lines
            .get(2)
            .is_none_or(|l| !l.starts_with("CLRPROF_ENV_REMOVED len 13"))
    {
        return Err(format!("without the profiler the app printed {plain_lines:?}").into());
    }
    if with_lines != expected_with {
        return Err(format!(
            "with the profiler the app printed {with_lines:?}, expected {expected_with:?}"
        )
        .into());
    }
    if let Some(libc) = traced.events("libc").next() {
        eprintln!(
            "    {}: the C library's environment sees the set variable: {}, the removed one: {}",
            case.leg().name,
            libc["sees_set"],
            libc["sees_removed"]
        );
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "info code versions: a method that tiers up has two native versions, each with its code and map; IP look-ups resolve into both (Info4, Info9)",
            code_versions,
        ),
        Scenario::new(
            "info dynamic methods: LCG and expression trees recognised, described, found from an IP, unloads reported; a name cache names every method right while IDs are recycled (Info8)",
            dynamic_methods,
        ),
        Scenario::new(
            "info apply metadata: a class added after module load, ApplyMetaData, rewritten IL calls its method; in-memory symbols (Info7)",
            emit,
        ),
        Scenario::new(
            "info environment: the profiler reads the process environment and sets what the program sees (Info11)",
            environment,
        ),
    ]
}
