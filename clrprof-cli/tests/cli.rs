//! The `clrprof` binary end to end, on the broken-profiler fixture (a real
//! ELF / PE library carrying the CLSID marker) and plain shell commands.

use clrprof_testing::fixtures::{broken_profiler, BrokenBuild, BROKEN_PROFILER_CLSID};
use clrprof_testing::Os;
use std::process::Command;

fn clrprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clrprof"))
}

fn scratch() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("clrprof-cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn clsid_reads_the_marker_of_an_elf_library() {
    let lib = broken_profiler(Os::Linux, BrokenBuild::Standard, &scratch()).unwrap();
    let out = clrprof().arg("clsid").arg(&lib.path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{BROKEN_PROFILER_CLSID}\n")
    );
}

#[test]
fn clsid_reads_the_marker_of_a_pe_library_when_mingw_is_present() {
    let Ok(lib) = broken_profiler(Os::Windows, BrokenBuild::Standard, &scratch()) else {
        eprintln!("x86_64-w64-mingw32-gcc missing: PE case not checked");
        return;
    };
    let out = clrprof().arg("clsid").arg(&lib.path).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{BROKEN_PROFILER_CLSID}\n")
    );
}

#[test]
fn clsid_fails_without_a_marker() {
    let out = clrprof()
        .arg("clsid")
        .arg(env!("CARGO_BIN_EXE_clrprof"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("marker"),
        "{out:?}"
    );
}

#[test]
fn run_sets_the_variables_and_passes_the_exit_status_on() {
    let lib = broken_profiler(Os::Linux, BrokenBuild::Standard, &scratch()).unwrap();
    let out = clrprof()
        .arg("run")
        .arg("--profiler")
        .arg(&lib.path)
        .args(["--output", "/tmp/x.jsonl", "--", "sh", "-c"])
        .arg("echo $CORECLR_ENABLE_PROFILING $CORECLR_PROFILER $CORECLR_PROFILER_PATH $CLRPROF_OUTPUT; exit 7")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "1 {BROKEN_PROFILER_CLSID} {} /tmp/x.jsonl\n",
            lib.path.display()
        )
    );
}

/// clrprof-mux's CLSID (its marker).
const MUX: &str = "{366DABA3-098B-4669-961C-4FBE18ECC9B9}";

#[test]
fn run_with_several_profilers_sets_up_the_multiplexer() {
    let lib = broken_profiler(Os::Linux, BrokenBuild::Standard, &scratch()).unwrap();
    let mux = scratch().join("libclrprof_mux_stand_in.so");
    // A stand-in with the multiplexer's marker: the command below loads nothing.
    std::fs::write(&mux, format!("CLRPROF_CLSID:{MUX}")).unwrap();
    let out_dir = scratch().join("several");
    let out = clrprof()
        .arg("run")
        .args(["--profiler"])
        .arg(&lib.path)
        .args(["--profiler"])
        .arg(format!("{}={BROKEN_PROFILER_CLSID}", lib.path.display()))
        .arg("--mux")
        .arg(&mux)
        .arg("--output-dir")
        .arg(&out_dir)
        .args(["--profiler-env", "2:CLRPROF_BROKEN_MODE=hang-in-initialize"])
        .args(["--", "sh", "-c"])
        .arg("echo $CORECLR_PROFILER $CORECLR_PROFILER_PATH; echo $CLRPROF_MUX_PROFILERS; echo $CLRPROF_OUTPUT $CLRPROF_MUX_1_CLRPROF_OUTPUT $CLRPROF_MUX_2_CLRPROF_OUTPUT $CLRPROF_MUX_2_CLRPROF_BROKEN_MODE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lib = lib.path.display();
    let dir = out_dir.display();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "{} {}\n{lib}={BROKEN_PROFILER_CLSID};{lib}={BROKEN_PROFILER_CLSID}\n{dir}/clrprof-mux.jsonl {dir}/libbroken_profiler.jsonl {dir}/libbroken_profiler-2.jsonl hang-in-initialize\n",
            MUX,
            mux.display()
        )
    );
}

#[cfg(unix)]
#[test]
fn run_passes_a_signal_death_on() {
    use std::os::unix::process::ExitStatusExt;
    let lib = broken_profiler(Os::Linux, BrokenBuild::Standard, &scratch()).unwrap();
    let status = clrprof()
        .arg("run")
        .arg("--profiler")
        .arg(&lib.path)
        .args(["--", "sh", "-c", "kill -TERM $$"])
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(15));
}
