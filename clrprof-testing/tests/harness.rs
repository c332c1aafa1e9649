//! The harness's accounting: passes, failures, panics, excluded legs and
//! missing legs, in normal and strict mode. Scenarios here touch no runtime;
//! one leg "exists" (its host is any existing file), the other standard legs
//! are missing.

use clrprof_testing::harness::{Counts, Harness, Scenario};
use clrprof_testing::manifest::{Leg, Manifest, Os};

fn harness() -> Harness {
    Harness::new("/nonexistent-apps")
        .scenario(Scenario::new("passes", |_| Ok(())))
        .scenario(Scenario::new("fails", |_| Err("wrong answer".into())))
        .scenario(Scenario::new("panics", |_| panic!("boom")))
        .scenario(
            Scenario::new("excluded", |_| Err("must not run".into()))
                .exclude_leg("linux-x64-3.1", "known defect"),
        )
}

#[test]
fn counts_every_case_and_never_passes_a_missing_leg() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("harness-accounting");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = Manifest {
        cache: dir.clone(),
        wine: None,
        compiler: None,
        legs: vec![Leg {
            name: "linux-x64-3.1".into(),
            os: Os::Linux,
            host: std::env::current_exe().unwrap(),
            version: "3.1.23".into(),
            tfm: "netcoreapp3.1".into(),
        }],
    };
    let path = dir.join("runtimes.json");
    manifest.save(&path).unwrap();
    // This test binary has a single test, so changing its environment races with nothing.
    std::env::set_var("CLRPROF_RUNTIMES", &path);
    std::env::remove_var("CI");
    std::env::remove_var("CLRPROF_LEGS");

    let (total, per_leg) = harness().run(&[]);
    // linux-x64-3.1: passes ok; fails and panics failed; excluded skipped.
    assert_eq!(
        per_leg["linux-x64-3.1"],
        Counts {
            passed: 1,
            failed: 2,
            skipped: 1
        }
    );
    // The three missing standard legs: every scenario skipped, none passed.
    for leg in ["linux-x64-8.0", "win-x64-3.1", "win-x64-8.0"] {
        assert_eq!(
            per_leg[leg],
            Counts {
                passed: 0,
                failed: 0,
                skipped: 4
            },
            "{leg}"
        );
    }
    assert_eq!(
        total,
        Counts {
            passed: 1,
            failed: 2,
            skipped: 13
        }
    );

    // Strict: a missing leg is a failure; an excluded leg is still a skip.
    let (total, per_leg) = harness().run(&["--strict".to_string()]);
    assert_eq!(
        per_leg["linux-x64-8.0"],
        Counts {
            passed: 0,
            failed: 4,
            skipped: 0
        }
    );
    assert_eq!(
        per_leg["linux-x64-3.1"],
        Counts {
            passed: 1,
            failed: 2,
            skipped: 1
        }
    );
    assert_eq!(
        total,
        Counts {
            passed: 1,
            failed: 14,
            skipped: 1
        }
    );

    // Filters and --leg narrow the cases.
    let (total, _) = harness().run(&["--leg".into(), "linux-x64-3.1".into(), "pass".into()]);
    assert_eq!(
        total,
        Counts {
            passed: 1,
            failed: 0,
            skipped: 0
        }
    );
}
