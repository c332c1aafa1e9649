//! The `clrprof` binary as a user meets it: what it says when something is
//! off, exactly (no runtime needed).

use std::path::{Path, PathBuf};
use std::process::Command;

fn clrprof() -> Command {
    clrprof_at(Path::new(env!("CARGO_BIN_EXE_clrprof")))
}

/// The binary at `exe` (a copy of it), with the variables that would point
/// it elsewhere removed.
fn clrprof_at(exe: &Path) -> Command {
    let mut c = Command::new(exe);
    for var in [
        "CLRPROF_CACHE",
        "CLRPROF_RUNTIME_MANIFEST",
        "CARGO_TARGET_DIR",
        "CLRPROF_MUX_LIBRARY",
    ] {
        c.env_remove(var);
    }
    c
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "clrprof-cli-it-{name}-{}",
        clrprof_testing::unique_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A library carrying a CLSID marker, as `#[profiler]` writes one.
fn marked(dir: &Path, name: &str, head: &[u8]) -> PathBuf {
    let p = dir.join(name);
    let mut bytes = head.to_vec();
    bytes.extend_from_slice(b" CLRPROF_CLSID:{0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F9} ");
    std::fs::write(&p, bytes).unwrap();
    p
}

fn output(c: &mut Command) -> (Option<i32>, String, String) {
    let o = c.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn dotnet_not_on_path_points_at_the_runtimes() {
    let dir = scratch("path");
    let lib = marked(&dir, "libp.so", b"\x7fELF");
    let (code, stdout, stderr) = output(
        clrprof()
            .current_dir(&dir)
            .env("PATH", "")
            .env("CLRPROF_CACHE", dir.join("cache"))
            .args(["run", "--profiler"])
            .arg(&lib)
            .args(["--", "dotnet", "app.dll"]),
    );
    assert_eq!((code, stdout.as_str()), (Some(2), ""));
    assert_eq!(
        stderr,
        format!(
            "clrprof: error: cannot run \"dotnet\": it is not on PATH. Run the app on a runtime \
             `clrprof runtimes` lists with --runtime LEG (e.g. `--runtime linux-x64-10.0 -- \
             app.dll`), or give the host's path:\n  none: run `clrprof provision` in your profiler \
             crate (it installs them into target/clrprof-cache), then run clrprof there, or point \
             CLRPROF_CACHE at that folder (looked in {})\n",
            dir.join("cache").display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_rlib_is_refused_before_the_app_starts() {
    let dir = scratch("rlib");
    let rlib = marked(&dir, "libmy_profiler.rlib", b"!<arch>\n");
    let (code, stdout, stderr) = output(
        clrprof()
            .current_dir(&dir)
            .args(["run", "--profiler"])
            .arg(&rlib)
            .args(["--", "sh", "-c", "echo the app ran"]),
    );
    assert_eq!((code, stdout.as_str()), (Some(2), ""), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "clrprof: error: the runtime would not load the profiler, and the app would run without \
             it:\n  {} is a static archive (an .rlib or .a), which no runtime can load: build the \
             crate as a shared library, `[lib] crate-type = [\"cdylib\"]` in its Cargo.toml \
             (`clrprof new` does), and pass an ELF .so (target/debug/lib<name>.so, <name>.dll)\n\
             (`clrprof doctor --profiler LIB -- CMD` checks the rest)\n",
            rlib.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_output_in_a_missing_directory_is_an_error_naming_it() {
    let dir = scratch("out");
    let lib = marked(&dir, "libp.so", b"\x7fELF");
    let (code, _, stderr) = output(
        clrprof()
            .current_dir(&dir)
            .args(["run", "--output", "nodir/x.jsonl", "--profiler"])
            .arg(&lib)
            .args(["--", "sh", "-c", "true"]),
    );
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr,
        format!(
            "clrprof: error: --output {}: the directory {} does not exist\n",
            dir.join("nodir/x.jsonl").display(),
            dir.join("nodir").display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn several_profilers_without_a_multiplexer_say_how_to_build_one() {
    let dir = scratch("mux");
    let a = marked(&dir, "liba.so", b"\x7fELF");
    let b = marked(&dir, "libb.so", b"\x7fELF");
    // `run` also looks for the multiplexer next to its own executable, where
    // a build of the workspace puts one (target/debug/libclrprof_mux.so):
    // run a copy of the binary that has none beside it.
    let exe = dir.join("bin").join("clrprof");
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    if std::fs::hard_link(env!("CARGO_BIN_EXE_clrprof"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_clrprof"), &exe).unwrap();
    }
    let (code, _, stderr) = output(
        clrprof_at(&exe)
            .current_dir(&dir)
            .env("CLRPROF_CACHE", dir.join("cache"))
            .arg("run")
            .arg("--profiler")
            .arg(&a)
            .arg("--profiler")
            .arg(&b)
            .args(["--", "sh", "-c", "true"]),
    );
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr,
        "clrprof: error: several profilers need the multiplexer libclrprof_mux.so, found neither \
         next to a profiler, nor in the crate's target/clrprof-cache/mux, nor next to clrprof: \
         build it with `clrprof build-mux` in your profiler crate, or name it with --mux or \
         $CLRPROF_MUX_LIBRARY\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flamegraph_names_its_input_a_profile() {
    let (code, stdout, _) = output(clrprof().args(["flamegraph", "--help"]));
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("Usage: clrprof flamegraph [OPTIONS] --output <OUTPUT> <PROFILE>"),
        "{stdout}"
    );
    let (_, help, _) = output(clrprof().args(["run", "--help"]));
    assert!(!help.contains("xtask"), "{help}");
    assert!(help.contains("--runtime <LEG|VERSION>"), "{help}");
}
