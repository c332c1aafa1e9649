//! `clrprof run`: start a command with a profiler loaded at runtime startup.
//!
//! CoreCLR reads `CORECLR_ENABLE_PROFILING`, `CORECLR_PROFILER` (the CLSID)
//! and `CORECLR_PROFILER_PATH` (the library) when it starts. Under Wine the
//! Windows process sees the same environment, so a path in it must be the
//! `Z:\...` form of the absolute Unix path.

use clrprof_testing::clsid::{normalize_clsid, single_clsid};
use clrprof_testing::wine::{find_wine_loader, is_wine_command, to_wine_path};
use clrprof_testing::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The command to start and the variables to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Program to execute.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables added to the inherited environment.
    pub env: Vec<(String, String)>,
}

/// Works out the launch: absolute paths, Wine translation, the CLSID.
/// `wine_loader` is used when CMD is a `.exe` that has to be started through Wine.
pub fn plan(
    profiler: &Path,
    clsid: Option<&str>,
    output: Option<&Path>,
    command: &[OsString],
    wine_loader: Option<&Path>,
) -> Result<Launch> {
    let (first, rest) = command
        .split_first()
        .ok_or_else(|| Error::new("no command given after `--`"))?;
    let profiler = absolute(profiler);
    if !profiler.is_file() {
        return Err(Error::new(format!(
            "profiler {} not found",
            profiler.display()
        )));
    }
    let clsid = match clsid {
        Some(c) => normalize_clsid(c)?,
        None => single_clsid(&profiler)?,
    };
    let cmd_path = Path::new(first);
    let under_wine = !cfg!(windows) && is_wine_command(cmd_path);
    let (program, mut args) = (first.clone(), rest.to_vec());
    let (program, args) = if under_wine && is_exe(cmd_path) {
        let loader = wine_loader.ok_or_else(|| {
            Error::new("CMD is a .exe but Wine was not found (install wine64 or set $WINE)")
        })?;
        args.insert(0, program);
        (loader.as_os_str().to_os_string(), args)
    } else {
        (program, args)
    };
    let path_for_runtime = |p: &Path| -> Result<String> {
        if under_wine {
            to_wine_path(p)
        } else {
            Ok(p.display().to_string())
        }
    };
    let mut env = vec![
        ("CORECLR_ENABLE_PROFILING".to_string(), "1".to_string()),
        ("CORECLR_PROFILER".to_string(), clsid),
        (
            "CORECLR_PROFILER_PATH".to_string(),
            path_for_runtime(&profiler)?,
        ),
    ];
    if let Some(out) = output {
        env.push((
            "CLRPROF_OUTPUT".to_string(),
            path_for_runtime(&absolute(out))?,
        ));
    }
    Ok(Launch { program, args, env })
}

fn is_exe(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("exe"))
}

fn absolute(p: &Path) -> PathBuf {
    clrprof_testing::manifest::absolute(p)
}

/// The Wine prefix of the runtime manifest found from the current directory,
/// else from the profiler library's location (its workspace's `target/`).
fn provisioned_wine_prefix(profiler: &Path) -> Option<PathBuf> {
    if let Some(w) = clrprof_testing::discover().wine() {
        return Some(w.prefix.clone());
    }
    let cache = clrprof_testing::manifest::find_cache_from(profiler.parent()?)?;
    let manifest =
        clrprof_testing::Manifest::load(&cache.join(clrprof_testing::manifest::MANIFEST_FILE))
            .ok()?;
    manifest.wine.map(|w| w.prefix)
}

/// Runs the command. On Unix the process *becomes* CMD (exec), so its exit
/// status and its signals are exactly CMD's; elsewhere the status is passed on.
pub fn run(
    profiler: &Path,
    clsid: Option<&str>,
    output: Option<&Path>,
    command: &[OsString],
) -> Result<ExitCode> {
    let launch = plan(
        profiler,
        clsid,
        output,
        command,
        find_wine_loader().as_deref(),
    )?;
    let mut cmd = std::process::Command::new(&launch.program);
    cmd.args(&launch.args);
    // Variants with a suffix take precedence in the runtime; drop inherited ones.
    for var in [
        "CORECLR_PROFILER_PATH_64",
        "CORECLR_PROFILER_PATH_32",
        "CORECLR_PROFILER_PATH_ARM64",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in &launch.env {
        cmd.env(k, v);
    }
    // Under Wine without a chosen prefix, use the one `cargo xtask provision`
    // prepared: it has the bcryptprimitives.dll stand-in that Rust-built
    // profiler DLLs need on Wine 8.
    let under_wine = command
        .first()
        .is_some_and(|c| is_wine_command(Path::new(c)));
    if under_wine && std::env::var_os("WINEDEBUG").is_none() {
        // Wine's own diagnostics would mix with the app's stderr.
        cmd.env("WINEDEBUG", "-all");
    }
    if under_wine && std::env::var_os("WINEPREFIX").is_none() {
        match provisioned_wine_prefix(profiler) {
            Some(prefix) => {
                cmd.env("WINEPREFIX", prefix);
            }
            None => eprintln!(
                "clrprof: warning: WINEPREFIX is unset and no provisioned prefix was found \
                 (cargo xtask provision); a Rust-built profiler DLL needs the \
                 bcryptprimitives.dll stand-in that prefix has"
            ),
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let err = cmd.exec();
        Err(Error::new(format!(
            "cannot run {:?}: {err}",
            launch.program
        )))
    }
    #[cfg(not(unix))]
    {
        let status = cmd
            .status()
            .map_err(|e| Error::new(format!("cannot run {:?}: {e}", launch.program)))?;
        Ok(ExitCode::from(
            u8::try_from(status.code().unwrap_or(1) & 0xff).unwrap_or(1),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLSID: &str = "{0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9}";

    fn fake_library(name: &str, marked: bool) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("clrprof-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let body = if marked {
            format!("bytes CLRPROF_CLSID:{CLSID} more")
        } else {
            "bytes".to_string()
        };
        std::fs::write(&path, body).unwrap();
        path
    }

    fn env_of<'a>(l: &'a Launch, key: &str) -> Option<&'a str> {
        l.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn native_run_sets_absolute_paths_and_the_marked_clsid() {
        let lib = fake_library("libp.so", true);
        let cmd = vec![
            OsString::from("/opt/dotnet/dotnet"),
            OsString::from("app.dll"),
        ];
        let l = plan(&lib, None, Some(Path::new("out.jsonl")), &cmd, None).unwrap();
        assert_eq!(l.program, "/opt/dotnet/dotnet");
        assert_eq!(l.args, vec![OsString::from("app.dll")]);
        assert_eq!(env_of(&l, "CORECLR_ENABLE_PROFILING"), Some("1"));
        assert_eq!(env_of(&l, "CORECLR_PROFILER"), Some(CLSID));
        assert_eq!(
            env_of(&l, "CORECLR_PROFILER_PATH"),
            Some(lib.to_str().unwrap())
        );
        let out = env_of(&l, "CLRPROF_OUTPUT").unwrap();
        assert!(out.starts_with('/') && out.ends_with("/out.jsonl"), "{out}");
    }

    #[test]
    fn exe_runs_under_wine_with_windows_paths() {
        let lib = fake_library("p.dll", true);
        let cmd = vec![
            OsString::from("/rt/dotnet.exe"),
            OsString::from(r"Z:\apps\app.dll"),
        ];
        let l = plan(
            &lib,
            Some("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"),
            Some(Path::new("/tmp/o.jsonl")),
            &cmd,
            Some(Path::new("/usr/lib/wine/wine64")),
        )
        .unwrap();
        assert_eq!(l.program, "/usr/lib/wine/wine64");
        assert_eq!(
            l.args,
            vec![
                OsString::from("/rt/dotnet.exe"),
                OsString::from(r"Z:\apps\app.dll")
            ]
        );
        assert_eq!(env_of(&l, "CORECLR_PROFILER"), Some(CLSID));
        let expected = format!("Z:{}", lib.to_str().unwrap().replace('/', "\\"));
        assert_eq!(env_of(&l, "CORECLR_PROFILER_PATH"), Some(expected.as_str()));
        assert_eq!(env_of(&l, "CLRPROF_OUTPUT"), Some(r"Z:\tmp\o.jsonl"));
    }

    #[test]
    fn wine_given_explicitly_is_not_wrapped_again() {
        let lib = fake_library("q.dll", true);
        let cmd = vec![OsString::from("wine64"), OsString::from("/rt/dotnet.exe")];
        let l = plan(
            &lib,
            None,
            None,
            &cmd,
            Some(Path::new("/usr/lib/wine/wine64")),
        )
        .unwrap();
        assert_eq!(l.program, "wine64");
        assert!(env_of(&l, "CORECLR_PROFILER_PATH")
            .unwrap()
            .starts_with(r"Z:\"));
        assert_eq!(env_of(&l, "CLRPROF_OUTPUT"), None);
    }

    #[test]
    fn errors_are_explained() {
        let unmarked = fake_library("plain.so", false);
        let cmd = vec![OsString::from("true")];
        let e = plan(&unmarked, None, None, &cmd, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no `CLRPROF_CLSID:` marker"), "{e}");
        let e = plan(Path::new("/nonexistent/p.so"), None, None, &cmd, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not found"), "{e}");
        let marked = fake_library("m.so", true);
        let e = plan(&marked, Some("nope"), None, &cmd, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a CLSID"), "{e}");
        let exe = vec![OsString::from("app.exe")];
        let e = plan(&marked, None, None, &exe, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Wine was not found"), "{e}");
    }
}
