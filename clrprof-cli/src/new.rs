//! `clrprof new NAME`: scaffold a profiler crate.
//!
//! The crate is a `cdylib` with one `#[profiler]` class under a fresh random
//! CLSID, and a real-runtime test (`tests/runtime.rs`, run by the
//! `clrprof-testing` harness) that loads the profiler into a small C# app on
//! every runtime leg found and checks that it saw the JIT compile methods.
//! The crate is its own workspace (an empty `[workspace]` table) so that it
//! builds wherever it is created; delete that table to make it a member of an
//! enclosing workspace instead.

use clrprof_testing::{Error, Result};
use std::path::{Path, PathBuf};

/// Where the generated crate takes the clrprof crates from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// crates.io, at this release's `major.minor`.
    CratesIo,
    /// A local checkout of the clrprof repository (path dependencies).
    Local(PathBuf),
}

/// One file of the scaffold: its path relative to the crate root and its text.
pub type File = (&'static str, String);

/// Checks that `name` is usable as a cargo package name and a library name:
/// ASCII letters, digits, `-` and `_`, starting with a letter.
pub fn check_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(Error::new(format!(
            "`{name}` is not a valid crate name: use ASCII letters, digits, `-` and `_`, \
             starting with a letter"
        )))
    }
}

/// The Rust type name for a crate name: `my-jit_tracer` → `MyJitTracer`.
pub fn type_name(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// A random (version 4, RFC 4122 variant) CLSID in the braced uppercase form
/// `#[profiler]` and `CORECLR_PROFILER` use.
pub fn random_clsid() -> String {
    let mut b = random_bytes();
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // variant 10xx
    format!(
        "{{{:02X}{:02X}{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}{:02X}{:02X}{:02X}{:02X}}}",
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15]
    )
}

/// 16 random bytes: the OS generator where there is one, else hashes seeded
/// by std's per-process random keys, the time and the process id.
fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        if f.read_exact(&mut bytes).is_ok() {
            return bytes;
        }
    }
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
    }
    bytes
}

/// The files of a new profiler crate `name` with class id `clsid`.
pub fn files(name: &str, clsid: &str, source: &Source) -> Vec<File> {
    let ty = type_name(name);
    let release = concat!(
        env!("CARGO_PKG_VERSION_MAJOR"),
        ".",
        env!("CARGO_PKG_VERSION_MINOR")
    );
    let (clrprof, testing) = match source {
        Source::CratesIo => (format!("\"{release}\""), format!("\"{release}\"")),
        Source::Local(root) => (
            format!(
                "{{ path = {:?} }}",
                root.join("clrprof").display().to_string()
            ),
            format!(
                "{{ path = {:?} }}",
                root.join("clrprof-testing").display().to_string()
            ),
        ),
    };
    let cargo_toml = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
# cdylib: the library the runtime loads; rlib: lets tests link it.
crate-type = ["cdylib", "rlib"]

[dependencies]
clrprof = {clrprof}

[dev-dependencies]
clrprof-testing = {testing}

[[test]]
name = "runtime"
harness = false

# A workspace of its own; delete this table to join an enclosing workspace.
[workspace]
"#
    );
    let lib_rs = format!(
        r#"//! {name}: a CLR profiler built with clrprof.
//!
//! Load it into a .NET process with
//! `clrprof run --profiler target/debug/lib{lib}.so -- dotnet app.dll`, or set
//! `CORECLR_ENABLE_PROFILING=1`, `CORECLR_PROFILER={clsid}` and
//! `CORECLR_PROFILER_PATH=<absolute path of the library>`.
//! It writes JSON Lines records to the file named by `CLRPROF_OUTPUT` (else
//! stderr): the runtime record first, then one record per JIT-compiled method.

use clrprof::output::JsonLines;
use clrprof::{{profiler, EventMask, EventMasks, FunctionId, Profiler, ProfilerInfo, Result}};

/// The profiler. The runtime calls it from many threads at once, so its
/// state must be `Send + Sync`: atomics, locks, or sinks like [`JsonLines`].
#[profiler(clsid = "{clsid}")]
#[derive(Default)]
pub struct {ty} {{
    out: JsonLines,
}}

impl Profiler for {ty} {{
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {{
        self.out.runtime_record(info)?;
        Ok(EventMask::MONITOR_JIT_COMPILATION.into())
    }}

    fn jit_compilation_started(&self, info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {{
        match info.function_name(function) {{
            Ok(name) => self.out.record("jit").str("method", &name).write(),
            Err(e) => self.out.record("jit").str("error", &e.to_string()).write(),
        }}
    }}

    fn shutdown(&self, _info: &ProfilerInfo) {{
        self.out.flush();
    }}
}}
"#,
        lib = name.replace('-', "_"),
    );
    let test_rs = format!(
        r#"//! Runs the profiler inside real runtimes: every leg `clrprof-testing` finds
//! (`clrprof runtimes` lists them): the runtimes `clrprof provision` put in
//! target/clrprof-cache, and those of an installed `dotnet`, any version
//! (a machine with .NET 10 tests against .NET 10). With none found the test
//! is reported as skipped, and is a failure with `--strict` or `CI=true`.
//! Run: `cargo test --test runtime [-- --leg NAME] [FILTER]`.

use clrprof_testing::harness::{{Harness, Scenario}};

fn main() {{
    Harness::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps"))
        .workspace(env!("CARGO_MANIFEST_DIR"))
        .found_legs_only()
        .scenario(Scenario::new("{name} sees the app's methods compiled", |case| {{
            let app = case.app("hello")?;
            let profiler = case.profiler("{name}")?;
            let outcome = case.run(case.spec(&app).profiler(profiler))?;
            // The app ran to completion and the profiler wrote its runtime record.
            outcome.check()?;
            let main_compiled = outcome
                .events("jit")
                .any(|r| r["method"].as_str() == Some("Hello::Main"));
            if !main_compiled {{
                return Err("no jit record for Hello::Main".into());
            }}
            Ok(())
        }}))
        .main()
}}
"#
    );
    let hello_cs = r#"// The app the runtime test profiles. Compiled with Mono's mcs (or csc).
using System;

class Hello
{
    static int Square(int x) { return x * x; }

    static void Main()
    {
        Console.WriteLine("hello, " + Square(7));
    }
}
"#
    .to_string();
    vec![
        ("Cargo.toml", cargo_toml),
        ("src/lib.rs", lib_rs),
        ("tests/runtime.rs", test_rs),
        ("tests/apps/hello.cs", hello_cs),
        (".gitignore", "/target\n".to_string()),
    ]
}

/// Writes a new profiler crate into `dir` (which must not exist, or be
/// empty) and returns its CLSID.
pub fn create(dir: &Path, name: &str, source: &Source) -> Result<String> {
    check_name(name)?;
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied {
        return Err(Error::new(format!(
            "{} already exists and is not empty",
            dir.display()
        )));
    }
    let clsid = random_clsid();
    for (rel, text) in files(name, &clsid, source) {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::new(format!("{}: {e}", parent.display())))?;
        }
        std::fs::write(&path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    }
    Ok(clsid)
}

/// The `clrprof new` command.
pub fn run(
    name: &str,
    path: Option<&Path>,
    local: Option<&Path>,
) -> Result<std::process::ExitCode> {
    let dir = path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(name));
    let source = match local {
        Some(root) => {
            let root = clrprof_testing::manifest::absolute(root);
            if !root.join("clrprof").join("Cargo.toml").is_file() {
                return Err(Error::new(format!(
                    "{} is not a clrprof checkout (no clrprof/Cargo.toml)",
                    root.display()
                )));
            }
            Source::Local(root)
        }
        None => Source::CratesIo,
    };
    let clsid = create(&dir, name, &source)?;
    println!("created profiler crate `{name}` in {}", dir.display());
    println!("CLSID {clsid}");
    println!("next: cd {} && cargo test", dir.display());
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clrprof_testing::clsid::is_braced_guid;

    #[test]
    fn names() {
        assert!(check_name("jit-tracer").is_ok());
        assert!(check_name("a_b2").is_ok());
        for bad in ["", "2fast", "-x", "has space", "ünï", "a.b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(type_name("my-jit_tracer"), "MyJitTracer");
        assert_eq!(type_name("x"), "X");
        assert_eq!(type_name("a--b"), "AB");
    }

    #[test]
    fn clsids_are_fresh_version_4_guids() {
        let a = random_clsid();
        let b = random_clsid();
        assert!(is_braced_guid(&a), "{a}");
        assert_ne!(a, b);
        // Version nibble and variant bits.
        assert_eq!(&a[15..16], "4", "{a}");
        assert!(matches!(&a[20..21], "8" | "9" | "A" | "B"), "{a}");
    }

    #[test]
    fn files_name_the_crate_class_and_clsid() {
        let clsid = "{0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F9}";
        let files = files(
            "my-prof",
            clsid,
            &Source::Local(PathBuf::from("/src/clrprof")),
        );
        let get = |p: &str| &files.iter().find(|(f, _)| *f == p).unwrap().1;
        assert!(get("Cargo.toml").contains("name = \"my-prof\""));
        assert!(get("Cargo.toml").contains("path = \"/src/clrprof/clrprof\""));
        assert!(get("Cargo.toml").contains("path = \"/src/clrprof/clrprof-testing\""));
        assert!(get("src/lib.rs").contains(&format!("#[profiler(clsid = \"{clsid}\")]")));
        assert!(get("src/lib.rs").contains("pub struct MyProf {"));
        assert!(get("tests/runtime.rs").contains("case.profiler(\"my-prof\")"));
        let crates_io = super::files("p", clsid, &Source::CratesIo);
        let toml = &crates_io[0].1;
        let release = concat!(
            env!("CARGO_PKG_VERSION_MAJOR"),
            ".",
            env!("CARGO_PKG_VERSION_MINOR")
        );
        assert!(toml.contains(&format!("clrprof = \"{release}\"")), "{toml}");
    }

    #[test]
    fn refuses_a_non_empty_directory() {
        let dir =
            std::env::temp_dir().join(format!("clrprof-new-{}", clrprof_testing::unique_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("keep.txt"), "mine").unwrap();
        let err = create(&dir, "p", &Source::CratesIo)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not empty"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
            "mine"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The real thing: scaffold into the workspace's target directory with
    /// path dependencies on this checkout, build it and run its runtime test
    /// on the linux-x64-8.0 leg. Without that leg the test says so, and fails
    /// in strict mode (`CI=true`).
    #[test]
    fn scaffold_builds_and_its_runtime_test_passes() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let target = root.join("target");
        let leg = "linux-x64-8.0";
        let strict = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        if !cfg!(all(target_os = "linux", target_arch = "x86_64"))
            || clrprof_testing::discover().leg(leg).is_none()
        {
            assert!(
                !strict,
                "leg {leg} is not available (run `clrprof provision`; in the clrprof repository `cargo xtask provision`)"
            );
            eprintln!("skipped: leg {leg} is not available (run `clrprof provision`; in the clrprof repository `cargo xtask provision`)");
            return;
        }
        let dir = target
            .join("clrprof-new-test")
            .join(clrprof_testing::unique_suffix())
            .join("demo-prof");
        let clsid = create(&dir, "demo-prof", &Source::Local(root.clone())).unwrap();
        // The workspace's lock file pins the same dependency versions, so the
        // shared target directory's build of clrprof is reused.
        std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
        let out = std::process::Command::new(clrprof_testing::build::cargo())
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .env("CLRPROF_CACHE", clrprof_testing::discover().cache_dir())
            .args(["test", "--quiet", "--test", "runtime", "--", "--leg", leg])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "cargo test failed:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("1 passed, 0 failed, 0 skipped"),
            "{stdout}\n{stderr}"
        );
        // The built library carries the fresh CLSID.
        let lib = target.join("debug").join("libdemo_prof.so");
        assert_eq!(clrprof_testing::clsid::single_clsid(&lib).unwrap(), clsid);
        let _ = std::fs::remove_dir_all(dir.parent().unwrap());
    }
}
