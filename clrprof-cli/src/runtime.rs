//! Which runtime a command starts: `--runtime LEG|VERSION` picks a host
//! from the runtimes `clrprof runtimes` lists (the crate's provisioned
//! cache, an installed `dotnet`), the way the tests find theirs; and the
//! version of the framework beside a host, which decides what the runtime
//! reads (see `doctor::reads_dotnet_forms`).

use clrprof_testing::manifest::{Leg, Os, Runtimes};
use clrprof_testing::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The runtimes found from the current directory (the crate's cache,
/// `$CLRPROF_CACHE`, an installed `dotnet`), else from the cache of the
/// workspace `near` (a profiler library) was built in.
pub fn found(near: Option<&Path>) -> Runtimes {
    let mut found = clrprof_testing::discover();
    if found.legs.is_empty() {
        let from_library = near
            .and_then(Path::parent)
            .and_then(clrprof_testing::manifest::find_cache_from)
            .and_then(|cache| {
                clrprof_testing::Manifest::load(
                    &cache.join(clrprof_testing::manifest::MANIFEST_FILE),
                )
                .ok()
            });
        if let Some(m) = from_library {
            for leg in &m.legs {
                if clrprof_testing::manifest::check_leg(leg, m.wine.as_ref()).is_ok() {
                    found.legs.push(leg.clone());
                }
            }
            found.manifest = Some(m);
        }
    }
    found
}

/// One line per runnable leg: its name, version and host.
pub fn listing(found: &Runtimes) -> String {
    if found.legs.is_empty() {
        return format!(
            "  none: run `clrprof provision` in your profiler crate (it installs them into \
             target/clrprof-cache), then run clrprof there, or point CLRPROF_CACHE at that folder \
             (looked in {})",
            found.cache_dir().display()
        );
    }
    found
        .legs
        .iter()
        .map(|l| format!("  {:<18} {:<9} {}", l.name, l.version, l.host.display()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The leg `spec` names: a leg name (`linux-x64-10.0`), or a version
/// (`10`, `10.0`, `10.0.15`), for which a native leg of this machine is
/// preferred to one under Wine or an emulator.
pub fn resolve<'a>(spec: &str, found: &'a Runtimes) -> Result<&'a Leg> {
    if let Some(leg) = found.legs.iter().find(|l| l.name == spec) {
        return Ok(leg);
    }
    let matches = |l: &&Leg| l.version == spec || l.version.starts_with(&format!("{spec}."));
    let native = |l: &&Leg| !l.is_wine() && !l.is_emulated();
    found
        .legs
        .iter()
        .filter(matches)
        .find(native)
        .or_else(|| found.legs.iter().find(matches))
        .ok_or_else(|| {
            Error::new(format!(
                "--runtime {spec}: no such runtime; the runtimes found (`clrprof runtimes`):\n{}",
                listing(found)
            ))
        })
}

/// Whether `word` names the .NET host itself (`dotnet`, `dotnet.exe`),
/// with no directory.
fn is_bare_host(word: &Path) -> bool {
    word.components().count() == 1
        && word.to_str().is_some_and(|w| {
            w.eq_ignore_ascii_case("dotnet") || w.eq_ignore_ascii_case("dotnet.exe")
        })
}

/// `CMD` run on `leg`: `dotnet app.dll ARGS` or `app.dll ARGS` becomes
/// `<leg's host> app.dll ARGS` (through its emulator when it has one; for
/// a Windows leg under Wine, the app's path in its `Z:\...` form).
pub fn command_on(leg: &Leg, command: &[OsString]) -> Result<Vec<OsString>> {
    let (first, rest) = command
        .split_first()
        .ok_or_else(|| Error::new("no command given after `--`"))?;
    let args: &[OsString] = if is_bare_host(Path::new(first)) {
        rest
    } else if Path::new(first)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("dll"))
    {
        command
    } else {
        return Err(Error::new(format!(
            "with --runtime, CMD is the app: `app.dll ARGS...` or `dotnet app.dll ARGS...`, not {first:?}"
        )));
    };
    let mut out: Vec<OsString> = Vec::new();
    if let Some(e) = &leg.emulator {
        out.push(e.program.clone().into_os_string());
        out.extend(e.args.iter().map(OsString::from));
    }
    out.push(leg.host.clone().into_os_string());
    for (i, arg) in args.iter().enumerate() {
        let p = Path::new(arg);
        if i == 0 && leg.is_wine() && p.is_file() {
            let abs = clrprof_testing::manifest::absolute(p);
            out.push(clrprof_testing::wine::to_wine_path(&abs)?.into());
        } else {
            out.push(arg.clone());
        }
    }
    Ok(out)
}

/// Whether `program` can be started: a path that exists, or a bare name
/// found on `PATH`.
pub fn program_exists(program: &Path) -> bool {
    if program.components().count() > 1 {
        return program.is_file();
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            d.join(program).is_file()
                || (cfg!(windows) && d.join(program).with_extension("exe").is_file())
        })
    })
}

/// The error for a `CMD` whose program does not exist: for `dotnet`, the
/// runtimes there are and `--runtime`.
pub fn missing_program(program: &Path, near: Option<&Path>) -> Error {
    if is_bare_host(program) {
        let found = found(near);
        let example = found
            .legs
            .iter()
            .find(|l| !l.is_wine() && !l.is_emulated())
            .or(found.legs.first())
            .map(|l| l.name.as_str())
            .unwrap_or("linux-x64-10.0");
        return Error::new(format!(
            "cannot run {:?}: it is not on PATH. Run the app on a runtime `clrprof runtimes` lists \
             with --runtime LEG (e.g. `--runtime {example} -- app.dll`), or give the host's path:\n{}",
            program,
            listing(&found)
        ));
    }
    Error::new(format!(
        "cannot run {:?}: {}",
        program,
        if program.components().count() > 1 {
            "no such file"
        } else {
            "not found on PATH"
        }
    ))
}

/// The `Microsoft.NETCore.App` versions beside a host (`<root>/shared/...`).
fn frameworks(host: &Path) -> Vec<String> {
    let Some(root) = host.parent() else {
        return Vec::new();
    };
    let mut versions: Vec<String> =
        std::fs::read_dir(root.join("shared").join("Microsoft.NETCore.App"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
    versions.sort_by_key(|v| version_key(v));
    versions
}

fn version_key(v: &str) -> Vec<u64> {
    v.split(['.', '-'])
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

/// The host a command starts, as a path: its first word (or, when that
/// is Wine or an emulator, the first word after it that names a host).
fn host_of(command: &[OsString]) -> Option<PathBuf> {
    command.iter().take(4).find_map(|w| {
        let p = Path::new(w);
        let name = p.file_name()?.to_str()?.to_ascii_lowercase();
        if name != "dotnet" && name != "dotnet.exe" {
            return None;
        }
        if p.components().count() > 1 {
            return Some(clrprof_testing::manifest::absolute(p));
        }
        let paths = std::env::var_os("PATH")?;
        std::env::split_paths(&paths)
            .map(|d| d.join(p))
            .find(|c| c.is_file())
            .map(|c| std::fs::canonicalize(&c).unwrap_or(c))
    })
}

/// The version of the runtime `command` would start, when it can be told
/// without running it: the one framework beside its host, or, with
/// several, the newest patch of the version the app's runtimeconfig asks
/// for (the host's default roll-forward within a `major.minor`).
pub fn version_of_command(command: &[OsString]) -> Option<String> {
    let host = host_of(command)?;
    let versions = frameworks(&host);
    match versions.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        several => {
            let app = command
                .iter()
                .find(|w| Path::new(w).extension().is_some_and(|e| e == "dll"))?;
            let config = Path::new(app).with_extension("runtimeconfig.json");
            let text = std::fs::read_to_string(config).ok()?;
            let json: serde_json::Value = serde_json::from_str(&text).ok()?;
            let wanted = json["runtimeOptions"]["framework"]["version"].as_str()?;
            let major_minor: Vec<&str> = wanted.split('.').take(2).collect();
            several
                .iter()
                .rev()
                .find(|v| v.split('.').take(2).collect::<Vec<_>>() == major_minor)
                .cloned()
        }
    }
}

/// The OS family of a leg, as the doctor's target.
pub fn is_windows(leg: &Leg) -> bool {
    leg.os == Os::Windows
}

#[cfg(test)]
mod tests {
    use super::*;
    use clrprof_testing::manifest::{Arch, Emulator};

    fn leg(name: &str, os: Os, version: &str, host: &str) -> Leg {
        Leg {
            name: name.into(),
            os,
            arch: Arch::default(),
            host: PathBuf::from(host),
            emulator: None,
            version: version.into(),
            tfm: String::new(),
        }
    }

    fn runtimes() -> Runtimes {
        Runtimes {
            legs: vec![
                leg(
                    "win-x64-10.0",
                    Os::Windows,
                    "10.0.15",
                    "/c/win10/dotnet.exe",
                ),
                leg("linux-x64-10.0", Os::Linux, "10.0.15", "/c/l10/dotnet"),
                leg("linux-x64-8.0", Os::Linux, "8.0.34", "/c/l8/dotnet"),
            ],
            ..Runtimes::default()
        }
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn legs_are_named_or_versioned_native_first() {
        let r = runtimes();
        assert_eq!(resolve("win-x64-10.0", &r).unwrap().name, "win-x64-10.0");
        assert_eq!(resolve("10.0", &r).unwrap().name, "linux-x64-10.0");
        assert_eq!(resolve("10", &r).unwrap().name, "linux-x64-10.0");
        assert_eq!(resolve("8.0.34", &r).unwrap().name, "linux-x64-8.0");
        let e = resolve("9.0", &r).unwrap_err().to_string();
        assert_eq!(
            e,
            "--runtime 9.0: no such runtime; the runtimes found (`clrprof runtimes`):\n  \
             win-x64-10.0       10.0.15   /c/win10/dotnet.exe\n  \
             linux-x64-10.0     10.0.15   /c/l10/dotnet\n  \
             linux-x64-8.0      8.0.34    /c/l8/dotnet"
        );
    }

    #[test]
    fn the_app_runs_on_the_legs_host() {
        let r = runtimes();
        let l10 = resolve("10.0", &r).unwrap();
        assert_eq!(
            command_on(l10, &os(&["dotnet", "app.dll", "x"])).unwrap(),
            os(&["/c/l10/dotnet", "app.dll", "x"])
        );
        assert_eq!(
            command_on(l10, &os(&["app.dll"])).unwrap(),
            os(&["/c/l10/dotnet", "app.dll"])
        );
        let e = command_on(l10, &os(&["python", "x.py"]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("with --runtime, CMD is the app"), "{e}");
        let mut arm = l10.clone();
        arm.emulator = Some(Emulator {
            program: PathBuf::from("/usr/bin/qemu-aarch64"),
            args: vec!["-L".into(), "/usr/aarch64-linux-gnu".into()],
        });
        assert_eq!(
            command_on(&arm, &os(&["dotnet", "app.dll"])).unwrap(),
            os(&[
                "/usr/bin/qemu-aarch64",
                "-L",
                "/usr/aarch64-linux-gnu",
                "/c/l10/dotnet",
                "app.dll"
            ])
        );
    }

    #[test]
    fn a_missing_dotnet_lists_the_runtimes() {
        assert!(!program_exists(Path::new("clrprof-no-such-program")));
        assert!(program_exists(Path::new("sh")));
        let e = missing_program(Path::new("/no/such/app"), None).to_string();
        assert_eq!(e, "cannot run \"/no/such/app\": no such file");
    }

    #[test]
    fn the_version_comes_from_the_framework_beside_the_host() {
        let root = std::env::temp_dir().join(format!(
            "clrprof-runtime-t-{}",
            clrprof_testing::unique_suffix()
        ));
        let fx = root.join("shared").join("Microsoft.NETCore.App");
        std::fs::create_dir_all(fx.join("8.0.34")).unwrap();
        std::fs::write(root.join("dotnet"), "").unwrap();
        let host = root.join("dotnet").into_os_string();
        assert_eq!(
            version_of_command(&[host.clone(), "app.dll".into()]).as_deref(),
            Some("8.0.34")
        );
        std::fs::create_dir_all(fx.join("10.0.15")).unwrap();
        std::fs::create_dir_all(fx.join("10.0.2")).unwrap();
        let app = root.join("app.dll");
        std::fs::write(
            root.join("app.runtimeconfig.json"),
            r#"{"runtimeOptions":{"framework":{"name":"Microsoft.NETCore.App","version":"10.0.0"}}}"#,
        )
        .unwrap();
        assert_eq!(
            version_of_command(&[host.clone(), app.into_os_string()]).as_deref(),
            Some("10.0.15")
        );
        assert_eq!(version_of_command(&[host, "other.dll".into()]), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
