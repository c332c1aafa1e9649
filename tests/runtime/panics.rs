//! Panic containment inside real runtimes: a profiler that panics in every
//! callback it enables (and, in a second run, in `initialize`) leaves the
//! application's output and exit code exactly as without any profiler; at
//! the default log level (`CLRPROF_LOG` unset) each contained panic is said
//! on stderr, with its location.

use clrprof_testing::harness::Scenario;

/// CLSIDs of the two classes of the test-profilers fixture library.
const PANICKING: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4C}";
const SECOND: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4D}";
const PANICKING_ELT: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B50}";
const SIGNATURES: &str = "{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B51}";

/// One library, two CLSIDs: asking for the second class loads it (and not the
/// panicking one); the module count it reports matches the jit-tracer-style
/// module records of nothing else, so it is checked against a fresh count
/// from a second class-selection run.
fn second_class(
    case: &clrprof_testing::harness::Case<'_>,
) -> Result<(), clrprof_testing::harness::Verdict> {
    let app = case.app("hello")?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let second = case.profiler_class("test-profilers", SECOND)?;
    let traced = case.run(case.spec(&app).profiler(second))?;
    traced.check()?;
    if traced.stdout != plain.stdout {
        return Err(format!(
            "stdout changed:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    if traced.events("second").count() != 1 || traced.events("armed").count() != 0 {
        return Err(format!("expected the second class only, got {:?}", traced.records).into());
    }
    let modules = traced
        .events("modules")
        .next()
        .and_then(|r| r["count"].as_u64())
        .ok_or("no modules record at shutdown")?;
    // hello.dll and System.Private.CoreLib at least.
    if modules < 2 {
        return Err(format!("second class counted only {modules} module loads").into());
    }
    Ok(())
}

fn compare(
    case: &clrprof_testing::harness::Case<'_>,
    app: &str,
    panic_in: Option<&str>,
) -> Result<(), clrprof_testing::harness::Verdict> {
    compare_class(case, app, PANICKING, panic_in)
}

fn compare_class(
    case: &clrprof_testing::harness::Case<'_>,
    app: &str,
    class: &str,
    panic_in: Option<&str>,
) -> Result<(), clrprof_testing::harness::Verdict> {
    let app = case.app(app)?;
    let plain = case.run(case.spec(&app))?;
    plain.check()?;
    let profiler = case.profiler_class("test-profilers", class)?;
    // CLRPROF_LOG's default (an unknown value falls back to it): errors.
    let mut spec = case.spec(&app).profiler(profiler).env("CLRPROF_LOG", "");
    if let Some(p) = panic_in {
        spec = spec.env("CLRPROF_PANIC_IN", p);
    }
    let traced = case.run(spec)?;
    traced.check_exit()?;
    if traced.stdout != plain.stdout {
        return Err(format!(
            "stdout changed:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, traced.stdout
        )
        .into());
    }
    // The app's own stderr is unchanged; beside it, at the default log
    // level, the SDK says where each panic happened and that it was contained.
    let (logged, app_stderr): (Vec<&str>, Vec<&str>) = traced
        .stderr
        .lines()
        .partition(|l| l.starts_with("[clrprof ERROR "));
    if app_stderr != plain.stderr.lines().collect::<Vec<_>>() {
        return Err(format!(
            "stderr changed:\nwithout: {:?}\nwith:    {:?}",
            plain.stderr, traced.stderr
        )
        .into());
    }
    let located = logged
        .iter()
        .any(|l| l.contains("] panic in profiler code at ") && l.contains(".rs:"));
    let contained = logged
        .iter()
        .any(|l| l.ends_with("; contained, the runtime gets the harmless result"));
    if !located || !contained {
        return Err(format!(
            "with CLRPROF_LOG unset, expected the panics' locations and \"contained\" on stderr, got: {logged:?}"
        )
        .into());
    }
    match panic_in {
        // The profiler really ran: it wrote its runtime record and armed itself.
        None => {
            traced.check_profiler_loaded()?;
            if traced.events("armed").count() != 1 {
                return Err(format!("expected one armed record, got {:?}", traced.records).into());
            }
        }
        // A panic in initialize writes nothing and unloads the profiler.
        Some(_) => {
            if !traced.records.is_empty() {
                return Err(format!(
                    "initialize panicked, yet records were written: {:?}",
                    traced.records
                )
                .into());
            }
        }
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new("panics: every callback panics, busy app unchanged", |case| compare(case, "busy", None))
            .exclude_leg(
                crate::exceptions::WINE_NET8_LEG,
                "a Rust panic is a Windows exception too; after the app's managed exception, .NET 8 under Wine 8 aborts on the next one (the Wine defect of RUNTIMES.md); the hello variant covers this leg",
            ),
        Scenario::new("panics: every callback panics, hello app unchanged", |case| compare(case, "hello", None)),
        Scenario::new("panics: initialize panics, busy app unchanged", |case| compare(case, "busy", Some("initialize"))),
        Scenario::new("profiler classes: a second CLSID in the same library", second_class),
        Scenario::new("panics: ELT mapper and enter hooks panic, hello app unchanged", |case| compare_class(case, "hello", PANICKING_ELT, None)),
    ]
}

/// Signatures decoded from metadata inside the runtime equal the ones the app
/// prints about itself through reflection; the defining assembly is named.
pub fn signature_scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "metadata: method signatures match the app's reflection",
        |case| {
            let app = case.app("sigs")?;
            let plain = case.run(case.spec(&app))?;
            plain.check()?;
            let profiler = case.profiler_class("test-profilers", SIGNATURES)?;
            let traced = case.run(case.spec(&app).profiler(profiler))?;
            traced.check()?;
            if traced.stdout != plain.stdout {
                return Err(format!(
                    "stdout changed:\nwithout: {:?}\nwith:    {:?}",
                    plain.stdout, traced.stdout
                )
                .into());
            }
            let expected: Vec<(&str, &str)> = plain
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix("sig "))
                .filter_map(|l| l.split_once(' '))
                .collect();
            if expected.len() != 7 {
                return Err(format!(
                    "the app printed {} signatures, expected 7: {:?}",
                    expected.len(),
                    plain.stdout
                )
                .into());
            }
            for (method, signature) in &expected {
                let got: Vec<&str> = traced
                    .events("sig")
                    .filter(|r| r["method"] == *method)
                    .filter_map(|r| r["signature"].as_str().or_else(|| r["error"].as_str()))
                    .collect();
                if got.first() != Some(signature) {
                    return Err(
                        format!("{method}: decoded {got:?}, the app says {signature:?}").into(),
                    );
                }
            }
            let (name, version) = plain
                .stdout
                .lines()
                .find_map(|l| l.strip_prefix("assembly "))
                .and_then(|l| l.split_once(' '))
                .ok_or("the app did not print its assembly name")?;
            if !traced
                .events("assembly")
                .any(|r| r["name"] == name && r["version"] == version)
            {
                return Err(format!(
                    "no assembly record {name} {version}: {:?}",
                    traced.events("assembly").next()
                )
                .into());
            }
            Ok(())
        },
    )]
}
