//! `clrprof attach` end to end: clear one-line errors for a dead pid and a
//! process without a .NET runtime; with a Linux runtime leg present, a real
//! attach of the attach-tracer example into a running app, which detaches
//! itself again.

use clrprof_testing::background::{read_records, spawn_app, wait_for_file};
use clrprof_testing::csharp::{compile, CompileOptions};
use clrprof_testing::run::RunSpec;
use clrprof_testing::Os;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn clrprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clrprof"))
}

fn attach(pid: u32) -> std::process::Output {
    // Any existing file does as the library: the CLSID is given.
    clrprof()
        .args(["attach", "--pid", &pid.to_string(), "--profiler"])
        .arg(env!("CARGO_BIN_EXE_clrprof"))
        .args([
            "--clsid",
            "{2F0B7C43-91A5-4E2D-8C6B-5D7E9A1F3B20}",
            "--timeout-ms",
            "2000",
        ])
        .output()
        .unwrap()
}

#[test]
fn a_dead_pid_fails_with_one_clear_line() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let out = attach(pid);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("clrprof: attach failed: no process with id {pid}\n")
    );
}

#[test]
fn a_process_without_a_runtime_fails_with_one_clear_line() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let out = attach(sleeper.id());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("clrprof: attach failed: process "), "{err}");
    assert!(err.contains("has no .NET diagnostics endpoint"), "{err}");
}

#[test]
fn attaches_the_attach_tracer_to_a_running_app_when_a_linux_leg_exists() {
    let runtimes = clrprof_testing::discover();
    let (Some(leg), Some(compiler)) = (
        runtimes
            .legs
            .iter()
            .find(|l| l.os == Os::Linux && l.target().is_native() && l.major() >= 8),
        runtimes.compiler(),
    ) else {
        eprintln!("no Linux runtime leg or C# compiler: real attach not checked (run `cargo xtask provision`)");
        return;
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cache = runtimes.cache_dir();
    let app = compile(
        &compiler,
        &workspace.join("tests/apps/longrun.cs"),
        &cache,
        CompileOptions::default(),
        leg,
    )
    .unwrap()
    .for_leg(leg)
    .unwrap();
    let tracer =
        clrprof_testing::build::build_cdylib("attach-tracer", Os::Linux, false, &workspace)
            .unwrap();
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("clrprof-cli-attach-{}", leg.name));
    let _ = std::fs::remove_dir_all(&dir);
    let (stop, ready, output) = (dir.join("stop"), dir.join("ready"), dir.join("out.jsonl"));
    let mut spec = RunSpec::new(&app, &dir);
    spec.args = vec![stop.display().to_string(), ready.display().to_string()];
    let running = spawn_app(leg, None, &spec).unwrap();
    let pid = wait_for_file(&ready, Duration::from_secs(60)).unwrap();

    let out = clrprof()
        .args(["attach", "--pid", &pid, "--profiler"])
        .arg(&tracer)
        .args(["--client-data", "detach_after_ms=50"])
        .env("CLRPROF_OUTPUT", &output)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let start = Instant::now();
    let records = loop {
        let (r, bad) = read_records(&output);
        assert!(bad.is_empty(), "{bad:?}");
        if r.iter().any(|r| r["event"] == "detached") || start.elapsed() > Duration::from_secs(30) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::fs::write(&stop, "stop").unwrap();
    let outcome = running.finish(Duration::from_secs(60)).unwrap();
    outcome.check_exit().unwrap();
    assert_eq!(
        outcome.stdout,
        "iterations positive\nsum matches formula True\n"
    );
    let events: Vec<&str> = records.iter().filter_map(|r| r["event"].as_str()).collect();
    assert_eq!(events.first(), Some(&"runtime"), "{events:?}");
    // The CLI passed its CLRPROF_OUTPUT in the client data.
    assert_eq!(
        records[1]["client_data"],
        format!("detach_after_ms=50;output={}", output.display()),
        "{records:?}"
    );
    assert_eq!(events.last(), Some(&"detached"), "{events:?}");
}
