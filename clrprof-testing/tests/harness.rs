//! The harness's accounting: passes, failures, panics, excluded legs and
//! missing legs, in normal and strict mode. Scenarios here touch no runtime;
//! one leg "exists" (its host is any existing file), the other standard legs
//! are missing.

use clrprof_testing::harness::{Counts, Harness, Scenario};
use clrprof_testing::manifest::{Arch, Leg, Manifest, MissingLeg, Os};

fn harness() -> Harness {
    Harness::new("/nonexistent-apps")
        .scenario(Scenario::new("passes", |_| Ok(())))
        .scenario(Scenario::new("fails", |_| Err("wrong answer".into())))
        .scenario(Scenario::new("panics", |_| panic!("boom")))
        .scenario(
            Scenario::new("excluded", |_| Err("must not run".into()))
                .exclude_leg("linux-x64-3.1", "known defect"),
        )
        .scenario(
            Scenario::new("elsewhere", |_| Err("must not run".into()))
                .only_on(&["win-x64-8.0"], "one leg suffices"),
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
            arch: Arch::host(),
            emulator: None,
            host: std::env::current_exe().unwrap(),
            version: "3.1.23".into(),
            tfm: "netcoreapp3.1".into(),
        }],
        pythonnet: None,
        unusable: vec![MissingLeg {
            name: "linux-x64-11.0".into(),
            reason: "the runtime does not start".into(),
        }],
    };
    let path = dir.join("runtimes.json");
    manifest.save(&path).unwrap();
    // This test binary has a single test, so changing its environment races with nothing.
    std::env::set_var("CLRPROF_RUNTIME_MANIFEST", &path);
    std::env::remove_var("CI");
    std::env::remove_var("CLRPROF_LEGS");
    // No installed dotnet's runtimes (a CI runner has one): only the manifest's leg.
    std::env::remove_var("DOTNET_ROOT");
    std::env::set_var("PATH", &dir);

    let (total, per_leg) = harness().run(&[]);
    // linux-x64-3.1: passes ok; fails and panics failed; excluded and elsewhere skipped.
    assert_eq!(per_leg["linux-x64-3.1"], counts(1, 2, 2));
    // The six missing standard legs (one of them found unusable by
    // provisioning): every scenario skipped, none passed.
    for leg in [
        "linux-x64-8.0",
        "linux-x64-9.0",
        "linux-x64-10.0",
        "linux-x64-11.0",
        "win-x64-8.0",
        "win-x64-10.0",
    ] {
        assert_eq!(per_leg[leg], counts(0, 0, 5), "{leg}");
    }
    assert_eq!(total, counts(1, 2, 32));

    // Strict: a missing leg is a failure; a leg the scenario leaves out is still a skip.
    let (total, per_leg) = harness().run(&["--strict".to_string()]);
    assert_eq!(per_leg["linux-x64-3.1"], counts(1, 2, 2));
    assert_eq!(per_leg["linux-x64-8.0"], counts(0, 4, 1));
    assert_eq!(per_leg["linux-x64-11.0"], counts(0, 4, 1));
    assert_eq!(per_leg["win-x64-8.0"], counts(0, 5, 0));
    assert_eq!(total, counts(1, 27, 7));

    // Filters and --leg narrow the cases.
    let (total, _) = harness().run(&["--leg".into(), "linux-x64-3.1".into(), "pass".into()]);
    assert_eq!(total, counts(1, 0, 0));

    // A profiler author's harness (`clrprof new`) runs on the legs found only:
    // the missing standard legs are not cases at all.
    let (total, per_leg) = harness().found_legs_only().run(&[]);
    assert_eq!(per_leg.keys().collect::<Vec<_>>(), ["linux-x64-3.1"]);
    assert_eq!(total, counts(1, 2, 2));
    // With no leg found, each scenario's one case says to provision (a
    // failure in strict mode).
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::env::set_var("CLRPROF_RUNTIME_MANIFEST", empty.join("runtimes.json"));
    let (total, per_leg) = harness().found_legs_only().run(&[]);
    assert_eq!(per_leg.keys().collect::<Vec<_>>(), ["no-runtime"]);
    assert_eq!(total, counts(0, 0, 5));
    let (total, _) = harness().found_legs_only().run(&["--strict".into()]);
    assert_eq!(total, counts(0, 5, 0));
}

fn counts(passed: usize, failed: usize, skipped: usize) -> Counts {
    Counts {
        passed,
        failed,
        skipped,
    }
}
