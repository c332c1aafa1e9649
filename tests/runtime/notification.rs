//! Several profilers in one process: a clrprof profiler loaded as a
//! notification-only profiler (`ICorProfilerCallback11::LoadAsNotificationOnly`,
//! through `CORECLR_ENABLE_NOTIFICATION_PROFILERS=1` and
//! `CORECLR_NOTIFICATION_PROFILERS=<path>={CLSID};`) beside a main profiler:
//! another clrprof profiler in its own library (the jit-tracer example) and
//! a hand-written C profiler (`tests/fixtures/c-counter/counter.c`, built
//! here with the leg's C compiler), each way round. Every profiler must see
//! exactly the `notify` app's own account of its events (methods compiled,
//! objects allocated, the module loaded, exceptions thrown, collections
//! induced), the main clrprof profiler the same as when it runs alone, and
//! the app's output must not change.
//!
//! Notification profilers arrived in .NET 6 (dotnet/runtime pull request
//! 53122): the .NET Core 3.1 legs report skipped, naming the version.

use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::manifest::Os;
use clrprof_testing::run::{Outcome, Profiler};
use clrprof_testing::wine::to_wine_path;
use serde_json::Value;
use std::path::{Path, PathBuf};

const NOTIFY_CLSID: &str = "{7A41D3E8-2B6C-4C95-9F0E-61B8D2A4C573}";
const C_CLSID: &str = "{4E5B2C71-8A3D-4F09-B61E-2C7D905A3F18}";
const C_SOURCE: &str = include_str!("../fixtures/c-counter/counter.c");

/// The app's `NotifyApp.Work::M*` methods, its allocations and collections
/// (tests/apps/notify.cs prints them; checked against its output below).
const METHODS: usize = 10;

/// Builds the C profiler for the leg's OS (once per source and compiler).
fn c_counter(case: &Case<'_>) -> Result<Profiler, Verdict> {
    clrprof_testing::fixtures::c_profiler(
        case.leg().os,
        case.cache_dir(),
        "c-counter",
        C_SOURCE,
        C_CLSID,
        &[],
    )
    .map_err(|e| e.to_string().into())
}

/// A path as the leg's process sees it.
fn process_path(case: &Case<'_>, path: &Path) -> Result<String, Verdict> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join(path)
    };
    Ok(match case.leg().os {
        Os::Linux => abs.display().to_string(),
        Os::Windows => to_wine_path(&abs)?,
    })
}

/// JSON Lines of a file (empty when it does not exist).
fn read_records(path: &Path) -> Result<Vec<Value>, Verdict> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| Verdict::from(format!("{}: {e}: {l}", path.display())))
        })
        .collect()
}

/// What a profiler other than the harness's main one wrote.
struct Side {
    records: Vec<Value>,
}

/// Runs the notify app with `main` as the main profiler and `notification`
/// as the notification-only one; the notification profiler's records (or
/// the C profiler's line) come from their own output files.
fn run_with(
    case: &Case<'_>,
    app: &Path,
    main: Profiler,
    notification: &Profiler,
    c_notification: bool,
) -> Result<(Outcome, Side, Side), Verdict> {
    let spec = case.spec(app);
    std::fs::create_dir_all(&spec.work_dir).map_err(|e| e.to_string())?;
    let notify_out = spec.work_dir.join("notify.jsonl");
    let c_out = spec.work_dir.join("c.jsonl");
    let _ = std::fs::remove_file(&notify_out);
    let _ = std::fs::remove_file(&c_out);
    let list = clrprof_testing::profiler_env::notification_profilers(&[(
        process_path(case, &notification.path)?,
        notification.clsid.to_string(),
    )]);
    let spec = spec
        .profiler(main)
        .env("CORECLR_ENABLE_NOTIFICATION_PROFILERS", "1")
        .env("CORECLR_NOTIFICATION_PROFILERS", &list)
        .env("CLRPROF_NOTIFY_OUTPUT", &process_path(case, &notify_out)?)
        .env("CLRPROF_C_OUTPUT", &process_path(case, &c_out)?)
        .env("CLRPROF_C_MODULE", "notify.dll")
        .env(
            "CLRPROF_C_NOTIFICATION",
            if c_notification { "1" } else { "0" },
        );
    let outcome = case.run(spec)?;
    outcome.check_exit()?;
    Ok((
        outcome,
        Side {
            records: read_records(&notify_out)?,
        },
        Side {
            records: read_records(&c_out)?,
        },
    ))
}

/// The app's `NotifyApp.Work::M*` compilations a clrprof profiler reported
/// (`jit` records with `method`), sorted.
fn work_methods(records: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = records
        .iter()
        .filter(|r| r["event"] == "jit")
        .filter_map(|r| r["method"].as_str())
        .filter(|m| m.starts_with("NotifyApp.Work::M"))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn expected_methods() -> Vec<String> {
    let mut v: Vec<String> = (0..METHODS)
        .map(|i| format!("NotifyApp.Work::M{i}"))
        .collect();
    v.sort();
    v
}

/// The clrprof notification profiler saw exactly the app's events.
fn check_clrprof_notification(who: &str, side: &Side) -> CaseResult {
    if side.records.first().is_none_or(|r| r["event"] != "runtime") {
        return Err(format!(
            "{who}: the notification profiler did not load (records: {:?})",
            side.records
        )
        .into());
    }
    let methods = work_methods(&side.records);
    if methods != expected_methods() {
        return Err(
            format!("{who}: the notification profiler saw compilations {methods:?}").into(),
        );
    }
    let counts = side
        .records
        .iter()
        .find(|r| r["event"] == "counts")
        .ok_or_else(|| format!("{who}: the notification profiler wrote no counts"))?;
    let want =
        serde_json::json!({"module_loads": 1, "items": 1000, "exceptions": 1, "induced_gcs": 3});
    for (k, v) in want.as_object().into_iter().flatten() {
        if &counts[k] != v {
            return Err(format!(
                "{who}: the notification profiler counted {counts}, expected {want}"
            )
            .into());
        }
    }
    Ok(())
}

/// The C profiler saw exactly the app's events.
fn check_c(who: &str, side: &Side, notification: bool) -> Result<u64, Verdict> {
    let line = side
        .records
        .iter()
        .find(|r| r["event"] == "c-counter")
        .ok_or_else(|| {
            format!("{who}: the C profiler wrote nothing (not loaded, or no Shutdown)")
        })?;
    let want = serde_json::json!({
        "notification": i32::from(notification), "module_loads": 1,
        "exceptions": 1, "induced_gcs": 3, "mask_hr": 0
    });
    for (k, v) in want.as_object().into_iter().flatten() {
        if &line[k] != v {
            return Err(format!("{who}: the C profiler counted {line}, expected {want}").into());
        }
    }
    // Main, Item..ctor and the ten Work methods.
    let functions = line["functions"].as_u64().unwrap_or(0);
    if functions != METHODS as u64 + 2 {
        return Err(format!(
            "{who}: the C profiler saw {functions} functions of notify.dll compiled, expected {}",
            METHODS + 2
        )
        .into());
    }
    Ok(functions)
}

fn notification_profilers(case: &Case<'_>) -> CaseResult {
    let app: PathBuf = case.app("notify")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    for line in [
        format!("methods {METHODS} sum 420"),
        "items 1000 last 999".into(),
        "induced collections 3".into(),
        "exceptions 1".into(),
    ] {
        if !plain.stdout.lines().any(|l| l == line) {
            return Err(format!("the app did not print {line:?}: {:?}", plain.stdout).into());
        }
    }
    let jit_tracer = case.profiler("jit-tracer")?;
    let notify = case.profiler_class("notification-profiler", NOTIFY_CLSID)?;
    let c = c_counter(case)?;
    let same_output = |who: &str, o: &Outcome| -> CaseResult {
        if o.stdout != plain.stdout {
            return Err(format!(
                "{who}: app output changed:\nwithout: {:?}\nwith:    {:?}",
                plain.stdout, o.stdout
            )
            .into());
        }
        Ok(())
    };

    // The main clrprof profiler alone: its own view of the app's methods.
    let alone = case.run(case.spec(&app).profiler(jit_tracer.clone()))?;
    alone.check()?;
    let alone_methods = work_methods(&alone.records);
    if alone_methods != expected_methods() {
        return Err(format!("jit-tracer alone saw {alone_methods:?}").into());
    }

    // Two clrprof profilers, two libraries: jit-tracer main, clrprof notification.
    let who = "jit-tracer + clrprof notification";
    let (o, notified, _) = run_with(case, &app, jit_tracer.clone(), &notify, false)?;
    same_output(who, &o)?;
    o.check_profiler_loaded()?;
    if work_methods(&o.records) != alone_methods {
        return Err(format!(
            "{who}: jit-tracer saw {:?} beside the notification profiler, {alone_methods:?} alone",
            work_methods(&o.records)
        )
        .into());
    }
    check_clrprof_notification(who, &notified)?;

    // C main, clrprof notification.
    let who = "C main + clrprof notification";
    let (o, notified, c_side) = run_with(case, &app, c.clone(), &notify, false)?;
    same_output(who, &o)?;
    check_c(who, &c_side, false)?;
    check_clrprof_notification(who, &notified)?;

    // clrprof main, C notification.
    let who = "jit-tracer + C notification";
    let (o, _, c_side) = run_with(case, &app, jit_tracer, &c, true)?;
    same_output(who, &o)?;
    o.check_profiler_loaded()?;
    if work_methods(&o.records) != alone_methods {
        return Err(format!(
            "{who}: jit-tracer saw {:?} beside the C profiler, {alone_methods:?} alone",
            work_methods(&o.records)
        )
        .into());
    }
    check_c(who, &c_side, true)?;
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "notification profilers: a clrprof notification profiler beside a clrprof and a C main profiler, and a C one beside clrprof; each sees exactly its events",
        notification_profilers,
    )
    .only_on(
        &["linux-x64-8.0", "win-x64-8.0"],
        "notification profilers (ICorProfilerCallback11) arrived in .NET 6; .NET Core 3.1.23 has none",
    )]
}
