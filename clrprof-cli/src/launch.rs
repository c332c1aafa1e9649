//! `clrprof run`: start a command with a profiler loaded at runtime startup.
//!
//! CoreCLR reads `CORECLR_ENABLE_PROFILING`, `CORECLR_PROFILER` (the CLSID)
//! and `CORECLR_PROFILER_PATH` (the library) when it starts. Under Wine the
//! Windows process sees the same environment, so a path in it must be the
//! `Z:\...` form of the absolute Unix path.
//!
//! With several `--profiler`s the runtime loads the profiler multiplexer
//! (`clrprof-mux`) instead, and the multiplexer loads the profilers: its
//! variables (`CLRPROF_MUX_PROFILERS`, `CLRPROF_MUX_<n>_<NAME>`) are set
//! here, and with `--output-dir DIR` each profiler gets its own
//! `CLRPROF_OUTPUT`, `DIR/<library file stem>.jsonl` (`<stem>-<n>.jsonl` for
//! a library named a second time), the multiplexer's own records going to
//! `DIR/clrprof-mux.jsonl` (`CLRPROF_MUX_OUTPUT`: the process's
//! `CLRPROF_OUTPUT` stays unset, so no child can take that file for its own).
//!
//! Before it starts anything, `run` checks what the runtime would refuse
//! silently (the doctor's checks of the library file: format, architecture,
//! export, CLSID), that the program exists (for `dotnet`, it lists the
//! runtimes `--runtime` can pick), and that the output can be written: each
//! output file is created empty, so a run never appends to the last one's.

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

/// What `clrprof run` was asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The profilers (`LIB` or `LIB={CLSID}`), at least one.
    pub profilers: Vec<PathBuf>,
    /// The CLSID of a single profiler.
    pub clsid: Option<String>,
    /// `CLRPROF_OUTPUT` of a single profiler.
    pub output: Option<PathBuf>,
    /// One output file per profiler in this directory.
    pub output_dir: Option<PathBuf>,
    /// `N:NAME=VALUE`: a variable for profiler `N` (from 1) only.
    pub profiler_env: Vec<String>,
    /// The multiplexer library (default: searched, see [`find_mux`]).
    pub mux: Option<PathBuf>,
    /// `--runtime LEG|VERSION`: the host CMD runs on.
    pub runtime: Option<String>,
    /// `--trace-context`: load the trace-context startup hook, pointed at
    /// the first profiler ([`crate::trace_context`]).
    pub trace_context: bool,
}

/// The multiplexer's list of profilers (`path={CLSID};...`).
pub const MUX_PROFILERS: &str = "CLRPROF_MUX_PROFILERS";

/// The multiplexer's own records file (clrprof-mux's `config::OUTPUT_VAR`).
pub const MUX_OUTPUT: &str = "CLRPROF_MUX_OUTPUT";

/// The multiplexer's variable `NAME` for child `n` only: `CLRPROF_MUX_<n>_<NAME>`.
fn child_var(n: usize, name: &str) -> String {
    format!("CLRPROF_MUX_{n}_{name}")
}

/// A `--profiler` value: the library and the CLSID it names after `=`, if any.
fn split_profiler(p: &Path) -> (PathBuf, Option<String>) {
    let text = p.to_string_lossy();
    if let Some((path, clsid)) = text.rsplit_once('=') {
        if normalize_clsid(clsid).is_ok() {
            return (PathBuf::from(path), Some(clsid.to_string()));
        }
    }
    (p.to_path_buf(), None)
}

/// `N:NAME=VALUE` → (N, NAME, VALUE).
fn parse_profiler_env(text: &str, count: usize) -> Result<(usize, String, String)> {
    let bad = || {
        Error::new(format!(
            "--profiler-env {text:?}: expected N:NAME=VALUE, N a profiler's position (1..={count})"
        ))
    };
    let (n, rest) = text.split_once(':').ok_or_else(bad)?;
    let (name, value) = rest.split_once('=').ok_or_else(bad)?;
    let n: usize = n.trim().parse().map_err(|_| bad())?;
    if n == 0 || n > count || name.is_empty() {
        return Err(bad());
    }
    Ok((n, name.to_string(), value.to_string()))
}

/// The multiplexer's file name for profilers of this kind.
fn mux_file_name(windows: bool) -> &'static str {
    if windows {
        "clrprof_mux.dll"
    } else if cfg!(target_os = "macos") {
        "libclrprof_mux.dylib"
    } else {
        "libclrprof_mux.so"
    }
}

/// Finds the multiplexer library: `$CLRPROF_MUX_LIBRARY`, else the file
/// (`libclrprof_mux.so`, `clrprof_mux.dll` for Windows profilers) next to
/// one of the profilers, in the `mux` folder of the clrprof cache of the
/// current crate or of a profiler's (where `clrprof build-mux` puts it), or
/// next to this executable.
pub fn find_mux(profilers: &[PathBuf], windows: bool) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CLRPROF_MUX_LIBRARY") {
        return Ok(absolute(Path::new(&p)));
    }
    let name = mux_file_name(windows);
    let mut dirs: Vec<PathBuf> = profilers
        .iter()
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    dirs.push(crate::build_mux::mux_dir(
        &clrprof_testing::manifest::default_cache_dir(),
    ));
    for p in profilers {
        if let Some(cache) = p
            .parent()
            .and_then(clrprof_testing::manifest::find_cache_from)
        {
            dirs.push(crate::build_mux::mux_dir(&cache));
        }
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        dirs.push(dir);
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::new(format!(
                "several profilers need the multiplexer {name}, found neither next to a profiler, \
                 nor in the crate's target/clrprof-cache/mux, nor next to clrprof: build it with \
                 `clrprof build-mux{}` in your profiler crate, or name it with --mux or \
                 $CLRPROF_MUX_LIBRARY",
                if windows {
                    " --target x86_64-pc-windows-gnu"
                } else {
                    ""
                }
            ))
        })
}

/// Works out the launch of a [`Request`]: one profiler loaded directly, or
/// several through the multiplexer.
pub fn plan_request(
    request: &Request,
    command: &[OsString],
    wine_loader: Option<&Path>,
) -> Result<Launch> {
    if request.output.is_some() && request.output_dir.is_some() {
        return Err(Error::new("--output and --output-dir exclude each other"));
    }
    let count = request.profilers.len();
    let per_child: Vec<(usize, String, String)> = request
        .profiler_env
        .iter()
        .map(|e| parse_profiler_env(e, count))
        .collect::<Result<_>>()?;
    match request.profilers.as_slice() {
        [] => Err(Error::new("no --profiler given")),
        [one] => {
            let (path, clsid) = split_profiler(one);
            let clsid = request.clsid.clone().or(clsid);
            let output = match &request.output_dir {
                Some(dir) => Some(output_file(dir, &path, None)),
                None => request.output.clone(),
            };
            let mut launch = plan(
                &path,
                clsid.as_deref(),
                output.as_deref(),
                command,
                wine_loader,
            )?;
            launch
                .env
                .extend(per_child.into_iter().map(|(_, k, v)| (k, v)));
            Ok(launch)
        }
        several => {
            if request.clsid.is_some() {
                return Err(Error::new(
                    "with several profilers, name each one's CLSID as --profiler LIB={CLSID}",
                ));
            }
            if request.output.is_some() {
                return Err(Error::new(
                    "several profilers write one file each: use --output-dir DIR instead of --output",
                ));
            }
            let children: Vec<(PathBuf, String)> = several
                .iter()
                .map(|p| {
                    let (path, clsid) = split_profiler(p);
                    let path = absolute(&path);
                    if !path.is_file() {
                        return Err(Error::new(format!("profiler {} not found", path.display())));
                    }
                    let clsid = match clsid {
                        Some(c) => normalize_clsid(&c)?,
                        None => single_clsid(&path)?,
                    };
                    Ok((path, clsid))
                })
                .collect::<Result<_>>()?;
            let windows: Vec<bool> = children.iter().map(|(p, _)| is_dll(p)).collect();
            if windows.iter().any(|w| *w != windows[0]) {
                return Err(Error::new(
                    "the profilers are for different platforms (.dll and not): one runtime loads them all",
                ));
            }
            let mux = match &request.mux {
                Some(m) => absolute(m),
                None => find_mux(
                    &children.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
                    windows[0],
                )?,
            };
            // The multiplexer's CLSID is the marker in its file.
            let mut launch = plan(&mux, None, None, command, wine_loader)?;
            let under_wine = launch
                .env
                .iter()
                .any(|(k, v)| k == "CORECLR_PROFILER_PATH" && v.starts_with("Z:"));
            let for_runtime = |p: &Path| -> Result<String> {
                if under_wine {
                    to_wine_path(p)
                } else {
                    Ok(p.display().to_string())
                }
            };
            // The runtime's notification-profiler list syntax, which the
            // multiplexer reads (clrprof-mux's `config` module).
            let list = children
                .iter()
                .map(|(p, c)| {
                    let path = for_runtime(p)?;
                    if path.contains(';') {
                        return Err(Error::new(format!(
                            "the profiler path {path:?} contains `;`, which the profiler list cannot express"
                        )));
                    }
                    Ok(format!("{path}={c}"))
                })
                .collect::<Result<Vec<_>>>()?
                .join(";");
            launch.env.push((MUX_PROFILERS.to_string(), list));
            if let Some(dir) = &request.output_dir {
                let dir = absolute(dir);
                launch.env.push((
                    MUX_OUTPUT.to_string(),
                    for_runtime(&dir.join("clrprof-mux.jsonl"))?,
                ));
                for (i, (path, _)) in children.iter().enumerate() {
                    let earlier = children[..i]
                        .iter()
                        .any(|(p, _)| p.file_stem() == path.file_stem());
                    let file = output_file(&dir, path, earlier.then_some(i + 1));
                    launch
                        .env
                        .push((child_var(i + 1, "CLRPROF_OUTPUT"), for_runtime(&file)?));
                }
            }
            for (n, name, value) in per_child {
                launch.env.push((child_var(n, &name), value));
            }
            Ok(launch)
        }
    }
}

/// The files a run writes, as this machine names them: `--output`, or in
/// `--output-dir` one per profiler and, with several, the multiplexer's.
pub fn output_files(request: &Request) -> Vec<PathBuf> {
    if let Some(out) = &request.output {
        return vec![absolute(out)];
    }
    let Some(dir) = &request.output_dir else {
        return Vec::new();
    };
    let dir = absolute(dir);
    let paths: Vec<PathBuf> = request
        .profilers
        .iter()
        .map(|p| split_profiler(p).0)
        .collect();
    let mut files = Vec::new();
    if paths.len() > 1 {
        files.push(dir.join("clrprof-mux.jsonl"));
    }
    for (i, path) in paths.iter().enumerate() {
        let earlier = paths.len() > 1
            && paths[..i]
                .iter()
                .any(|p| absolute(p).file_stem() == absolute(path).file_stem());
        files.push(output_file(&dir, path, earlier.then_some(i + 1)));
    }
    files
}

/// Makes sure the outputs can be written before anything starts: the
/// `--output-dir` is created, an `--output` must be in an existing
/// directory, and every output file is created empty (a run never appends
/// to the records of the last one). The errors name the path.
pub fn prepare_outputs(request: &Request) -> Result<()> {
    check_output_dirs(request)?;
    for file in output_files(request) {
        std::fs::File::create(&file)
            .map_err(|e| Error::new(format!("cannot write the output {}: {e}", file.display())))?;
    }
    Ok(())
}

/// The directory part of [`prepare_outputs`]: the `--output-dir` created,
/// an `--output`'s directory present.
fn check_output_dirs(request: &Request) -> Result<()> {
    if let Some(dir) = &request.output_dir {
        let dir = absolute(dir);
        std::fs::create_dir_all(&dir).map_err(|e| {
            Error::new(format!(
                "--output-dir {}: cannot create it: {e}",
                dir.display()
            ))
        })?;
    }
    if let Some(out) = &request.output {
        let out = absolute(out);
        let parent = out.parent().unwrap_or(Path::new("/"));
        if !parent.is_dir() {
            return Err(Error::new(format!(
                "--output {}: the directory {} does not exist",
                out.display(),
                parent.display()
            )));
        }
    }
    Ok(())
}

/// The checks of `clrprof doctor` that need no run, made on every library
/// the runtime would load (the profilers, and the multiplexer with
/// several): an error here means the app would run without the profiler,
/// silently. Returns the error listing what is wrong.
pub fn preflight(
    request: &Request,
    target: crate::checks::Target,
    mux: Option<&Path>,
) -> Result<()> {
    let mut libraries: Vec<(PathBuf, Option<String>)> = request
        .profilers
        .iter()
        .map(|p| {
            let (path, clsid) = split_profiler(p);
            let clsid = if request.profilers.len() == 1 {
                request.clsid.clone().or(clsid)
            } else {
                clsid
            };
            (absolute(&path), clsid)
        })
        .collect();
    if let Some(m) = mux {
        libraries.push((m.to_path_buf(), None));
    }
    let mut problems = Vec::new();
    for (path, clsid) in &libraries {
        let clsid = clsid.as_deref().map(normalize_clsid).transpose()?;
        let (findings, _) = crate::checks::check_binary(path, clsid.as_deref(), target);
        problems.extend(
            findings
                .into_iter()
                .filter(|f| f.level == crate::checks::Level::Error)
                .map(|f| f.message),
        );
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::new(format!(
        "the runtime would not load the profiler, and the app would run without it:\n  {}\n\
         (`clrprof doctor --profiler LIB -- CMD` checks the rest)",
        problems.join("\n  ")
    )))
}

/// `DIR/<library file stem>.jsonl`, or `DIR/<stem>-<n>.jsonl`.
fn output_file(dir: &Path, library: &Path, n: Option<usize>) -> PathBuf {
    let stem = library
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "profiler".into());
    match n {
        Some(n) => dir.join(format!("{stem}-{n}.jsonl")),
        None => dir.join(format!("{stem}.jsonl")),
    }
}

fn is_dll(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("dll"))
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
pub fn run(request: &Request, command: &[OsString]) -> Result<ExitCode> {
    let profiler = request
        .profilers
        .first()
        .map(|p| split_profiler(p).0)
        .unwrap_or_default();
    let profiler = profiler.as_path();
    let (command, target) = match &request.runtime {
        Some(r) => {
            let found = crate::runtime::found(Some(profiler));
            let leg = crate::runtime::resolve(r, &found)?;
            (
                crate::runtime::command_on(leg, command)?,
                crate::checks::target_of_leg(leg),
            )
        }
        None => (
            command.to_vec(),
            crate::checks::target_of(command, Some(profiler)),
        ),
    };
    let command = command.as_slice();
    let program = Path::new(
        command
            .first()
            .ok_or_else(|| Error::new("no command given after `--`"))?,
    );
    if !crate::runtime::program_exists(program) {
        return Err(crate::runtime::missing_program(program, Some(profiler)));
    }
    let mut launch = plan_request(request, command, find_wine_loader().as_deref())?;
    if request.trace_context {
        let windows = command
            .first()
            .is_some_and(|c| is_wine_command(Path::new(c)));
        let hook = crate::trace_context::hook_assembly(Some(profiler))?;
        let library = clrprof_testing::manifest::absolute(profiler);
        let (hook, library) = if windows {
            (to_wine_path(&hook)?, to_wine_path(&library)?)
        } else {
            (hook.display().to_string(), library.display().to_string())
        };
        launch
            .env
            .extend(crate::trace_context::env(&hook, &library, windows));
    }
    let mux = (request.profilers.len() > 1)
        .then(|| {
            launch
                .env
                .iter()
                .find(|(k, _)| k == "CORECLR_PROFILER_PATH")
                .map(|(_, v)| match v.strip_prefix("Z:") {
                    Some(rest) => PathBuf::from(rest.replace('\\', "/")),
                    None => PathBuf::from(v),
                })
        })
        .flatten();
    check_output_dirs(request)?;
    preflight(request, target, mux.as_deref())?;
    prepare_outputs(request)?;
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
    // Under Wine without a chosen prefix, use the one `clrprof provision`
    // prepared (in this repository, `cargo xtask provision`): it has the bcryptprimitives.dll stand-in that Rust-built
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
                 (`clrprof provision` in your profiler crate prepares one); a Rust-built \
                 profiler DLL needs the bcryptprimitives.dll stand-in that prefix has"
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
    const MUX: &str = "{366DABA3-098B-4669-961C-4FBE18ECC9B9}";

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

    fn request(profilers: &[&Path], output_dir: Option<&Path>) -> Request {
        Request {
            profilers: profilers.iter().map(|p| p.to_path_buf()).collect(),
            output_dir: output_dir.map(Path::to_path_buf),
            ..Request::default()
        }
    }

    #[test]
    fn several_profilers_run_through_the_multiplexer_with_one_output_each() {
        let a = fake_library("liba.so", true);
        let b = fake_library("libb.so", true);
        let mux = a.with_file_name("libclrprof_mux.so");
        std::fs::write(&mux, format!("CLRPROF_CLSID:{MUX}")).unwrap();
        let other = format!("{}={{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4C}}", a.display());
        let mut req = request(&[&a, &b, Path::new(&other)], Some(Path::new("/out")));
        req.profiler_env = vec!["2:CLRPROF_CALLS_FILTER=Calls.".into()];
        let cmd = vec![
            OsString::from("/opt/dotnet/dotnet"),
            OsString::from("app.dll"),
        ];
        let l = plan_request(&req, &cmd, None).unwrap();
        assert_eq!(env_of(&l, "CORECLR_PROFILER"), Some(MUX));
        assert_eq!(env_of(&l, "CORECLR_PROFILER_PATH"), mux.to_str());
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_PROFILERS").unwrap(),
            format!(
                "{}={CLSID};{}={CLSID};{}={{5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4C}}",
                a.display(),
                b.display(),
                a.display()
            )
        );
        // The multiplexer's file is its own variable: a child reading
        // CLRPROF_OUTPUT outside its Initialize finds nothing, never that file.
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_OUTPUT"),
            Some("/out/clrprof-mux.jsonl")
        );
        assert_eq!(env_of(&l, "CLRPROF_OUTPUT"), None);
        assert_eq!(
            output_files(&req),
            ["clrprof-mux", "liba", "libb", "liba-3"]
                .map(|n| PathBuf::from(format!("/out/{n}.jsonl")))
        );
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_1_CLRPROF_OUTPUT"),
            Some("/out/liba.jsonl")
        );
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_2_CLRPROF_OUTPUT"),
            Some("/out/libb.jsonl")
        );
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_3_CLRPROF_OUTPUT"),
            Some("/out/liba-3.jsonl")
        );
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_2_CLRPROF_CALLS_FILTER"),
            Some("Calls.")
        );
    }

    #[test]
    fn several_windows_profilers_get_windows_paths() {
        let a = fake_library("a.dll", true);
        let b = fake_library("b.dll", true);
        let mux = a.with_file_name("clrprof_mux.dll");
        std::fs::write(&mux, format!("CLRPROF_CLSID:{MUX}")).unwrap();
        let cmd = vec![OsString::from("/rt/dotnet.exe"), OsString::from("app.dll")];
        let l = plan_request(
            &request(&[&a, &b], Some(Path::new("/out"))),
            &cmd,
            Some(Path::new("/usr/lib/wine/wine64")),
        )
        .unwrap();
        let z = |p: &Path| format!("Z:{}", p.to_str().unwrap().replace('/', "\\"));
        assert_eq!(env_of(&l, "CORECLR_PROFILER_PATH"), Some(z(&mux).as_str()));
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_PROFILERS").unwrap(),
            format!("{}={CLSID};{}={CLSID}", z(&a), z(&b))
        );
        assert_eq!(
            env_of(&l, "CLRPROF_MUX_2_CLRPROF_OUTPUT"),
            Some(r"Z:\out\b.jsonl")
        );
    }

    #[test]
    fn several_profilers_refuse_what_cannot_work() {
        let a = fake_library("libc1.so", true);
        let w = fake_library("w1.dll", true);
        let cmd = vec![OsString::from("true")];
        let e = |r: Request| plan_request(&r, &cmd, None).unwrap_err().to_string();
        let mut r = request(&[&a, &a], None);
        r.output = Some(PathBuf::from("o.jsonl"));
        assert!(e(r).contains("--output-dir"));
        let mut r = request(&[&a, &a], None);
        r.clsid = Some(CLSID.into());
        assert!(e(r).contains("LIB={CLSID}"));
        assert!(e(request(&[&a, &w], None)).contains("different platforms"));
        let mut r = request(&[&a, &a], None);
        r.profiler_env = vec!["3:X=1".into()];
        assert!(e(r).contains("N:NAME=VALUE"));
        let mut r = request(&[&a], Some(Path::new("/out")));
        r.profiler_env = vec!["1:X=1".into()];
        let l = plan_request(&r, &cmd, None).unwrap();
        assert_eq!(env_of(&l, "CLRPROF_OUTPUT"), Some("/out/libc1.jsonl"));
        assert_eq!(env_of(&l, "X"), Some("1"));
    }

    #[test]
    fn outputs_are_checked_created_and_emptied_before_the_run() {
        let dir = std::env::temp_dir().join(format!(
            "clrprof-cli-out-{}",
            clrprof_testing::unique_suffix()
        ));
        let lib = fake_library("libout.so", true);
        // An --output in a directory that does not exist: an error naming it.
        let mut r = request(&[&lib], None);
        r.output = Some(dir.join("nodir").join("x.jsonl"));
        assert_eq!(
            prepare_outputs(&r).unwrap_err().to_string(),
            format!(
                "--output {}: the directory {} does not exist",
                dir.join("nodir").join("x.jsonl").display(),
                dir.join("nodir").display()
            )
        );
        // An --output-dir that does not exist is created; a second run's
        // files start empty.
        let out = dir.join("made");
        let r = request(&[&lib], Some(&out));
        prepare_outputs(&r).unwrap();
        let file = out.join("libout.jsonl");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
        std::fs::write(&file, "{\"event\":\"runtime\"}\n").unwrap();
        prepare_outputs(&r).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
        // A directory where the file should be cannot be written.
        let mut r = request(&[&lib], None);
        r.output = Some(out.clone());
        let e = prepare_outputs(&r).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot write the output {}: ", out.display())),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn preflight_refuses_what_the_runtime_would_not_load() {
        let linux = crate::checks::Target {
            windows: false,
            arch: object::Architecture::X86_64,
        };
        let rlib = fake_library("libmine.rlib", false);
        std::fs::write(&rlib, b"!<arch>\n").unwrap();
        let e = preflight(&request(&[&rlib], None), linux, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "the runtime would not load the profiler, and the app would run without it:\n  {} is a static archive",
                rlib.display()
            )),
            "{e}"
        );
        assert!(
            e.ends_with("(`clrprof doctor --profiler LIB -- CMD` checks the rest)"),
            "{e}"
        );
        let pe = fake_library("w.dll", true);
        std::fs::write(&pe, format!("MZ CLRPROF_CLSID:{CLSID}")).unwrap();
        let e = preflight(&request(&[&pe], None), linux, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "{} is a PE file, but the runtime is a Linux runtime",
                pe.display()
            )),
            "{e}"
        );
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
