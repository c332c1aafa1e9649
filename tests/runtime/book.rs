//! The book's walk, run as written: the console blocks of the chapters a
//! newcomer follows (first-tracer, stack-walks, method-wrapping, attach,
//! multiple-profilers) from a fresh `clrprof new` crate, on one leg, each
//! command's output checked against the block.
//!
//! A chapter's ```` ```console ```` block is a list of `$ command` lines,
//! each followed by the output it must print (stdout, then stderr): a line
//! `...` stands for any number of lines, `[..]` within a line for any text.
//! HTML comments before a block steer the walk:
//! - `<!-- walk: skip -->`: the next console block is not run (a command
//!   this walk replaces: `clrprof provision` is the provisioned cache, in
//!   `CLRPROF_CACHE`; `cargo add` is the dependency below);
//! - `<!-- walk: write PATH -->`: the next code block is the file PATH;
//! - `<!-- walk: write PATH from LISTING -->`: PATH is the listing (relative
//!   to the chapter) with the crate's own CLSID, as the chapter tells the
//!   reader to keep it;
//! - `<!-- walk: dependency NAME -->`: NAME from this checkout in Cargo.toml.
//!
//! Commands run with `sh -c` in the crate (`cd` is followed), with this
//! checkout's `clrprof` first on `PATH`. `clrprof new` gets `--local` (this
//! checkout, not crates.io) and `clrprof build-mux` `--local` and `--debug`
//! (a quicker build); everything else runs as printed.

use clrprof_testing::harness::{Case, CaseResult, Scenario};
use std::path::{Path, PathBuf};

/// The chapters of the walk, in order.
const CHAPTERS: [&str; 5] = [
    "first-tracer.md",
    "stack-walks.md",
    "method-wrapping.md",
    "attach.md",
    "multiple-profilers.md",
];

/// One step of a chapter.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A command and the output it must print.
    Run {
        command: String,
        expected: Vec<String>,
    },
    /// A file of the crate and its text.
    Write { path: String, text: String },
    /// A listing file (relative to the chapter) written to `path` with the crate's CLSID.
    Listing { path: String, listing: String },
    /// A dependency on a crate of this checkout.
    Dependency(String),
}

/// The steps of a chapter's text.
fn steps(text: &str) -> Result<Vec<Step>, String> {
    let mut out = Vec::new();
    let mut directive: Option<String> = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if let Some(d) = t
            .strip_prefix("<!-- walk:")
            .and_then(|d| d.strip_suffix("-->"))
        {
            let d = d.trim().to_string();
            if let Some(name) = d.strip_prefix("dependency ") {
                out.push(Step::Dependency(name.trim().to_string()));
            } else if let Some((path, listing)) = d
                .strip_prefix("write ")
                .and_then(|r| r.split_once(" from "))
            {
                out.push(Step::Listing {
                    path: path.trim().to_string(),
                    listing: listing.trim().to_string(),
                });
            } else {
                directive = Some(d);
            }
            continue;
        }
        let Some(info) = t.strip_prefix("```") else {
            continue;
        };
        let mut body = Vec::new();
        for l in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            body.push(l.to_string());
        }
        match directive.take() {
            Some(d) if d == "skip" => {}
            Some(d) if d.starts_with("write ") => out.push(Step::Write {
                path: d["write ".len()..].trim().to_string(),
                text: body.join("\n") + "\n",
            }),
            Some(d) => return Err(format!("unknown walk directive {d:?}")),
            None if info.trim() == "console" => {
                let mut current: Option<(String, Vec<String>)> = None;
                for l in body {
                    if let Some(cmd) = l.strip_prefix("$ ") {
                        if let Some((command, expected)) = current.take() {
                            out.push(Step::Run { command, expected });
                        }
                        current = Some((cmd.to_string(), Vec::new()));
                    } else if let Some((_, expected)) = current.as_mut() {
                        expected.push(l);
                    }
                }
                if let Some((command, expected)) = current {
                    out.push(Step::Run { command, expected });
                }
            }
            None => {}
        }
    }
    Ok(out)
}

/// Whether `line` matches `pattern` (`[..]`: any text).
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `lines` match `expected` (`...`: any number of lines).
fn output_matches(expected: &[String], lines: &[&str]) -> bool {
    match expected.split_first() {
        None => lines.is_empty(),
        Some((p, rest)) if p.trim() == "..." => {
            (0..=lines.len()).any(|k| output_matches(rest, &lines[k..]))
        }
        Some((p, rest)) => {
            !lines.is_empty() && line_matches(p, lines[0]) && output_matches(rest, &lines[1..])
        }
    }
}

/// The CLSID of `#[profiler(clsid = "...")]` in `text`.
fn clsid_in(text: &str) -> Option<&str> {
    let start = text.find("#[profiler(clsid = \"")? + "#[profiler(clsid = \"".len();
    let len = text[start..].find('"')?;
    Some(&text[start..start + len])
}

struct Walk {
    root: PathBuf,
    cwd: PathBuf,
    path: std::ffi::OsString,
    cache: PathBuf,
    clsid: Option<String>,
    log: String,
}

impl Walk {
    fn run(&mut self, command: &str, expected: &[String]) -> Result<(), String> {
        self.log.push_str(&format!("$ {command}\n"));
        if let Some(dir) = command.strip_prefix("cd ") {
            self.cwd = self.cwd.join(dir.trim());
            return Ok(());
        }
        let root = self.root.display().to_string();
        let actual = if command.starts_with("clrprof new ") {
            format!("{command} --local {root}")
        } else if command.starts_with("clrprof build-mux") {
            format!("{command} --local {root} --debug")
        } else {
            command.to_string()
        };
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&actual)
            .current_dir(&self.cwd)
            .env("PATH", &self.path)
            .env("CLRPROF_CACHE", &self.cache)
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CLRPROF_OUTPUT")
            .env_remove("CLRPROF_LOG")
            .env_remove("CORECLR_ENABLE_PROFILING")
            .env_remove("CLRPROF_MUX_LIBRARY")
            .output()
            .map_err(|e| format!("sh: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        self.log.push_str(&stdout);
        self.log.push_str(&stderr);
        let printed: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
        if !out.status.success() || !output_matches(expected, &printed) {
            return Err(format!(
                "`{command}` ({}) printed, in {}:\n{stdout}{stderr}\nbut the book says:\n{}",
                out.status,
                self.cwd.display(),
                expected.join("\n")
            ));
        }
        if command.starts_with("clrprof new ") {
            self.clsid = stdout
                .lines()
                .find_map(|l| l.strip_prefix("CLSID "))
                .map(str::to_string);
            // The dependencies at the versions this checkout is tested
            // with (and no registry needed), and a target directory kept
            // between walks so that clrprof is built once.
            let name = command.split_whitespace().nth(2).unwrap_or("");
            let dir = self.cwd.join(name);
            std::fs::copy(self.root.join("Cargo.lock"), dir.join("Cargo.lock"))
                .map_err(|e| format!("Cargo.lock: {e}"))?;
            let shared = self.root.join("target").join("book-walk-target");
            std::fs::create_dir_all(&shared).map_err(|e| format!("{}: {e}", shared.display()))?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(&shared, dir.join("target"))
                .map_err(|e| format!("target link: {e}"))?;
        }
        Ok(())
    }
}

fn walk(case: &Case<'_>) -> CaseResult {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no checkout")?
        .to_path_buf();
    let cli = crate::exits::native_cli()?;
    let book = root.join("book").join("src");
    let base = case.spec(Path::new("walk")).work_dir.join("walk");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let mut path = std::ffi::OsString::from(cli.parent().ok_or("no cli dir")?);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut w = Walk {
        root: root.clone(),
        cwd: base.clone(),
        path,
        cache: case.cache_dir().to_path_buf(),
        clsid: None,
        log: String::new(),
    };
    let started = std::time::Instant::now();
    for chapter in CHAPTERS {
        let file = book.join(chapter);
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let steps = steps(&text).map_err(|e| format!("{chapter}: {e}"))?;
        if !steps.iter().any(|s| matches!(s, Step::Run { .. })) {
            return Err(format!("{chapter}: no console block to walk").into());
        }
        w.log.push_str(&format!("# {chapter}\n"));
        for step in steps {
            let result = match step {
                Step::Run { command, expected } => w.run(&command, &expected),
                Step::Write { path, text } => {
                    std::fs::write(w.cwd.join(&path), text).map_err(|e| format!("{path}: {e}"))
                }
                Step::Listing { path, listing } => {
                    let src = file.parent().unwrap_or(&book).join(&listing);
                    std::fs::read_to_string(&src)
                        .map_err(|e| format!("{}: {e}", src.display()))
                        .and_then(|text| {
                            let mine = w.clsid.clone().ok_or("no CLSID from clrprof new yet")?;
                            let theirs = clsid_in(&text)
                                .ok_or(format!("{listing}: no #[profiler(clsid = ...)]"))?
                                .to_string();
                            std::fs::write(w.cwd.join(&path), text.replace(&theirs, &mine))
                                .map_err(|e| format!("{path}: {e}"))
                        })
                }
                Step::Dependency(name) => {
                    let toml = w.cwd.join("Cargo.toml");
                    std::fs::read_to_string(&toml)
                        .map_err(|e| format!("{}: {e}", toml.display()))
                        .and_then(|t| {
                            let dep = format!(
                                "[dependencies]\n{name} = {{ path = {:?} }}\n",
                                root.join(&name).display().to_string()
                            );
                            std::fs::write(&toml, t.replacen("[dependencies]\n", &dep, 1))
                                .map_err(|e| format!("{}: {e}", toml.display()))
                        })
                }
            };
            if let Err(e) = result {
                return Err(format!("{chapter}: {e}\n--- the walk so far:\n{}", w.log).into());
            }
        }
    }
    eprintln!(
        "    note: the book's walk took {:.0}s",
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "book: first-tracer, stack-walks, method-wrapping, attach and multiple-profilers run as written in a fresh clrprof new crate",
        walk,
    )
    .only_on(&["linux-x64-10.0"], "the walk runs on one leg")]
}
