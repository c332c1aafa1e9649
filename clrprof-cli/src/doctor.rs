//! `clrprof doctor [--profiler LIB] [-- CMD ...]`: why does a profiler not load?
//!
//! CoreCLR decides at startup whether to load a profiler, from three
//! environment variables: `CORECLR_ENABLE_PROFILING` must be `1`,
//! `CORECLR_PROFILER` names the class (a braced CLSID) and
//! `CORECLR_PROFILER_PATH` the library; the architecture-specific
//! `CORECLR_PROFILER_PATH_64` / `_32` / `_ARM64` win over the plain name when
//! set. .NET 11 and later read each of them under a `DOTNET_` prefix too
//! (dotnet/runtime PR 121646; `DOTNET_ENABLE_PROFILING`, `DOTNET_PROFILER`,
//! `DOTNET_PROFILER_PATH`, ...); .NET 10 and older do not (measured on every
//! leg: `tests/runtime/doctor.rs`). The doctor works out which runtime would
//! start (`--runtime`, or the framework beside the command's host) and
//! checks the variables that runtime reads. The runtime then loads the library, calls its `DllGetClassObject` export with
//! the CLSID and calls `Initialize` on the object it gets. When any step fails
//! the application simply runs without the profiler, and on Linux the runtime
//! says nothing about it. The doctor checks each step it can check without
//! running anything (variables, file, format, architecture, exports, CLSID,
//! shared-library dependencies) and, given a command, runs it with the host's
//! trace (`COREHOST_TRACE`) and the SDK's log (`CLRPROF_LOG=debug`) turned on
//! and summarises what happened.

use crate::checks::{check_binary, finding, target_of, target_of_leg, Finding, Level, Target};
use clrprof_testing::clsid::is_braced_guid;
use clrprof_testing::{Error, Result};
use object::{BinaryFormat, Object};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

const ENABLE: &str = "CORECLR_ENABLE_PROFILING";
const PROFILER: &str = "CORECLR_PROFILER";
const PATH: &str = "CORECLR_PROFILER_PATH";
/// Every variable CoreCLR reads to load a startup profiler.
const KNOWN: [&str; 7] = [
    ENABLE,
    PROFILER,
    PATH,
    "CORECLR_PROFILER_PATH_32",
    "CORECLR_PROFILER_PATH_64",
    "CORECLR_PROFILER_PATH_ARM32",
    "CORECLR_PROFILER_PATH_ARM64",
];

/// The variables of notification profilers (loaded beside the main one).
const NOTIFICATION: [&str; 2] = [
    "CORECLR_ENABLE_NOTIFICATION_PROFILERS",
    "CORECLR_NOTIFICATION_PROFILERS",
];

/// What the environment says: the CLSID and the library path the runtime
/// would use (with the variable it came from).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// `CORECLR_PROFILER`, when it is a well-formed braced CLSID.
    pub clsid: Option<String>,
    /// The effective path variable and its value.
    pub path: Option<(String, String)>,
}

/// Levenshtein distance, for "did you mean" on variable names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The first .NET major version that reads the profiler variables under
/// their `DOTNET_` names too (dotnet/runtime PR 121646).
pub const DOTNET_FORMS_SINCE: u32 = 11;

/// Whether a runtime of `version` (`major.minor.patch`) reads the
/// `DOTNET_` forms of the profiler variables; `None` when the version is
/// not known. Measured on every leg by `tests/runtime/doctor.rs`.
pub fn reads_dotnet_forms(version: Option<&str>) -> Option<bool> {
    let major: u32 = version?.split('.').next()?.parse().ok()?;
    Some(major >= DOTNET_FORMS_SINCE)
}

/// `DOTNET_<rest>` for `CORECLR_<rest>`.
fn dotnet_form(known: &str) -> String {
    format!("DOTNET_{}", known.trim_start_matches("CORECLR_"))
}

/// Checks the loading variables in `env` for a runtime `target` of
/// `version` (`major.minor.patch`, `None` when unknown): the `DOTNET_`
/// forms count only for a runtime that reads them.
pub fn check_environment(
    env: &BTreeMap<String, String>,
    target: Target,
    version: Option<&str>,
) -> (Vec<Finding>, Request) {
    let mut out = Vec::new();
    let mut request = Request::default();

    // .NET 11 and later also read every profiler variable under a DOTNET_
    // prefix (dotnet/runtime PR 121646); older runtimes read only CORECLR_.
    let reads = reads_dotnet_forms(version);
    let runtime = match version {
        Some(v) => format!(".NET {v}"),
        None => "this runtime".to_string(),
    };
    let mut effective = env.clone();
    // The name each effective variable was read under (its DOTNET_ form
    // when only that one is set and read), for the report.
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    // DOTNET_ forms set without their CORECLR_ name, which this runtime ignores.
    let mut ignored: BTreeMap<String, String> = BTreeMap::new();
    for known in KNOWN.iter().chain(NOTIFICATION.iter()) {
        let dotnet = dotnet_form(known);
        let Some(value) = env.get(&dotnet) else {
            continue;
        };
        match (env.get(*known), reads) {
            (None, Some(true)) => {
                out.push(finding(
                    Level::Note,
                    format!(
                        "{dotnet} is read by {runtime} (.NET {DOTNET_FORMS_SINCE} and later read the \
                         DOTNET_ forms; .NET 10 and older only {known}: set {known} for them)"
                    ),
                ));
                effective.insert(known.to_string(), value.clone());
                names.insert(known.to_string(), dotnet);
            }
            (None, Some(false)) => {
                ignored.insert(known.to_string(), dotnet);
            }
            (None, None) => {
                out.push(finding(
                    Level::Warning,
                    format!(
                        "{dotnet} is read only by .NET {DOTNET_FORMS_SINCE} and later; .NET 10 and \
                         older ignore it and need {known} (which runtime will start is not known \
                         here: give the command after `--`, or --runtime)"
                    ),
                ));
                effective.insert(known.to_string(), value.clone());
                names.insert(known.to_string(), dotnet);
            }
            (Some(v), Some(false)) => out.push(finding(
                Level::Note,
                format!("{dotnet} is set but {runtime} reads only {known}={v}"),
            )),
            (Some(v), _) if v != value => out.push(finding(
                Level::Warning,
                format!(
                    "{dotnet}={value} and {known}={v} differ: a .NET {DOTNET_FORMS_SINCE} runtime \
                     reads both names; set one value"
                ),
            )),
            (Some(_), _) => {}
        }
    }
    let env = &effective;
    let name_of = |known: &str| -> String {
        names
            .get(known)
            .cloned()
            .unwrap_or_else(|| known.to_string())
    };
    // What to add to "X is not set" when only the DOTNET_ form is.
    let unread = |known: &str| -> String {
        match ignored.get(known) {
            Some(dotnet) => format!(
                "; {dotnet} is set, but {runtime} does not read it (the DOTNET_ forms are read \
                 from .NET {DOTNET_FORMS_SINCE} on): set {known}"
            ),
            None => String::new(),
        }
    };

    // Notification profilers: a list whose last entry has no trailing `;`
    // loses that entry on runtimes before dotnet/runtime PR 130584.
    for var in NOTIFICATION[1..].iter() {
        if let Some(list) = env.get(*var).filter(|l| !l.trim().is_empty()) {
            if !list.trim_end().ends_with(';') {
                out.push(finding(
                    Level::Warning,
                    format!(
                        "{var} does not end with `;`: runtimes before dotnet/runtime PR 130584 \
                         (July 2026) drop the last entry of such a list; end it with `;`"
                    ),
                ));
            }
        }
    }

    // Near misses: other prefixes, wrong case, typos.
    for name in env.keys() {
        if KNOWN.contains(&name.as_str()) || NOTIFICATION.contains(&name.as_str()) {
            continue;
        }
        let upper = name.to_ascii_uppercase();
        if let Some(rest) = upper.strip_prefix("COR_") {
            if ["ENABLE_PROFILING", "PROFILER", "PROFILER_PATH"].contains(&rest) {
                out.push(finding(
                    Level::Warning,
                    format!(
                        "{name} is set: COR_ variables are read by .NET Framework only; CoreCLR \
                         (.NET Core, .NET 5+) reads CORECLR_{rest}"
                    ),
                ));
                continue;
            }
        }
        if let Some(rest) = upper.strip_prefix("DOTNET_") {
            let bare = format!("CORECLR_{rest}");
            if KNOWN.contains(&bare.as_str()) || NOTIFICATION.contains(&bare.as_str()) {
                // Read by .NET 11+, judged above.
                continue;
            }
        }
        for prefix in ["COMPLUS_"] {
            if let Some(rest) = upper.strip_prefix(prefix) {
                let bare = format!("CORECLR_{}", rest.trim_start_matches("CORECLR_"));
                if KNOWN.contains(&bare.as_str()) {
                    out.push(finding(
                        Level::Warning,
                        format!(
                            "{name} is set: the runtime reads the profiler variables only under \
                             their CORECLR_ names, without a {prefix} prefix; set {bare}"
                        ),
                    ));
                }
            }
        }
        if !(upper.starts_with("CORECLR") || upper.starts_with("COR_") || upper.contains("PROFIL"))
        {
            continue;
        }
        let nearest = KNOWN
            .iter()
            .map(|k| (distance(&upper, k), *k))
            .min()
            .filter(|(d, _)| *d <= 2);
        if let Some((_, known)) = nearest {
            let why = if upper == known {
                "variable names are case-sensitive"
            } else {
                "the runtime ignores names it does not know"
            };
            out.push(finding(
                Level::Warning,
                format!("{name} looks like a misspelling of {known} ({why})"),
            ));
        }
    }

    let enable = name_of(ENABLE);
    match env.get(ENABLE).map(String::as_str) {
        Some("1") => out.push(finding(Level::Ok, format!("{enable}=1"))),
        Some(v) => out.push(finding(
            Level::Error,
            format!("{enable}={v:?}: profiling is enabled only by the value 1"),
        )),
        None => out.push(finding(
            Level::Error,
            format!(
                "{ENABLE} is not set: the runtime loads no profiler without {ENABLE}=1{}",
                unread(ENABLE)
            ),
        )),
    }

    let profiler = name_of(PROFILER);
    match env.get(PROFILER) {
        None => out.push(finding(
            Level::Error,
            format!(
                "{PROFILER} is not set: it names the profiler class, e.g. {{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E6F}}{}",
                unread(PROFILER)
            ),
        )),
        Some(v) if is_braced_guid(&v.to_ascii_uppercase()) => {
            out.push(finding(Level::Ok, format!("{profiler}={v}")));
            request.clsid = Some(v.to_ascii_uppercase());
        }
        Some(v) => {
            let hint = match clrprof_testing::clsid::normalize_clsid(v) {
                Ok(fixed) => format!("; write it as {fixed}"),
                Err(_) => String::new(),
            };
            out.push(finding(
                Level::Error,
                format!("{profiler}={v:?} is not a braced CLSID {{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}}{hint}"),
            ));
        }
    }

    // The path: the architecture's own variable wins over the plain one.
    let specific = target.path_variable();
    let plain = env.get(PATH).filter(|v| !v.is_empty());
    let own = env.get(specific).filter(|v| !v.is_empty());
    for other in KNOWN[3..].iter().filter(|k| **k != specific) {
        if env.contains_key(*other) {
            out.push(finding(
                Level::Note,
                format!(
                    "{other} is set but ignored: a {:?} runtime reads {specific}",
                    target.arch
                ),
            ));
        }
    }
    match (own, plain) {
        (Some(o), Some(p)) if o != p => {
            out.push(finding(
                Level::Warning,
                format!("{specific}={o} shadows {PATH}={p}: the runtime uses {specific}"),
            ));
            request.path = Some((specific.to_string(), o.clone()));
        }
        (Some(o), _) => request.path = Some((specific.to_string(), o.clone())),
        (None, Some(p)) => request.path = Some((PATH.to_string(), p.clone())),
        (None, None) => out.push(finding(
            Level::Error,
            format!(
                "neither {PATH} nor {specific} is set: the runtime does not know which library to load{}",
                if ignored.contains_key(specific) { unread(specific) } else { unread(PATH) }
            ),
        )),
    }
    if let Some((var, value)) = &request.path {
        let var = &name_of(var);
        let absolute = if target.windows {
            let b = value.as_bytes();
            (b.len() > 2 && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/'))
                || value.starts_with("\\\\")
        } else {
            value.starts_with('/')
        };
        if absolute {
            out.push(finding(Level::Ok, format!("{var}={value}")));
        } else {
            out.push(finding(
                Level::Error,
                format!(
                    "{var}={value} is not an absolute path: the runtime would resolve it against \
                     the application's working directory, and does not search for it"
                ),
            ));
        }
    }
    (out, request)
}

/// Reads and checks the library at `path` for `target`: readable, the right
/// format and architecture, `DllGetClassObject` exported, serving `clsid`,
/// its shared-library dependencies resolvable (`env` gives
/// `LD_LIBRARY_PATH` / `WINEPREFIX`).
pub fn check_library(
    path: &Path,
    clsid: Option<&str>,
    target: Target,
    env: &BTreeMap<String, String>,
) -> Vec<Finding> {
    let (mut out, data) = check_binary(path, clsid, target);
    let Some(data) = data else {
        return out;
    };
    match object::File::parse(&*data) {
        Ok(file) if file.format() == BinaryFormat::Elf => {
            out.extend(check_elf_needed(path, &data, env))
        }
        Ok(file) if file.format() == BinaryFormat::Pe => {
            out.extend(check_pe_imports(path, &file, env))
        }
        _ => {}
    }
    out
}

/// `DT_NEEDED` entries and `DT_RUNPATH`/`DT_RPATH` of an ELF library.
pub fn elf_needed(data: &[u8]) -> object::Result<(Vec<String>, Vec<String>)> {
    use object::read::elf::{ElfFile32, ElfFile64, FileHeader};
    fn collect<H: FileHeader<Endian = object::Endianness>>(
        elf: &object::read::elf::ElfFile<'_, H>,
        data: &[u8],
    ) -> object::Result<(Vec<String>, Vec<String>)> {
        let table = elf.elf_section_table().dynamic_table(elf.endian(), data)?;
        let (mut needed, mut paths) = (Vec::new(), Vec::new());
        for d in &table {
            let text = || {
                table
                    .string(d)
                    .map(|s| String::from_utf8_lossy(s).into_owned())
            };
            if d.tag == object::elf::DT_NEEDED {
                needed.push(text()?);
            } else if d.tag == object::elf::DT_RUNPATH || d.tag == object::elf::DT_RPATH {
                paths.extend(text()?.split(':').map(str::to_string));
            }
        }
        Ok((needed, paths))
    }
    match ElfFile64::<object::Endianness>::parse(data) {
        Ok(elf) => collect(&elf, data),
        Err(_) => collect(&ElfFile32::<object::Endianness>::parse(data)?, data),
    }
}

/// Library names the dynamic loader's cache knows (`ldconfig -p`).
fn ld_cache() -> Vec<String> {
    let Ok(out) = std::process::Command::new("ldconfig").arg("-p").output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn check_elf_needed(path: &Path, data: &[u8], env: &BTreeMap<String, String>) -> Vec<Finding> {
    let (needed, runpath) = match elf_needed(data) {
        Ok(x) => x,
        Err(e) => {
            return vec![finding(
                Level::Warning,
                format!("cannot read the dynamic section: {e}"),
            )]
        }
    };
    let origin = path.parent().unwrap_or(Path::new("/"));
    let mut dirs: Vec<PathBuf> = runpath
        .iter()
        .map(|p| PathBuf::from(p.replace("$ORIGIN", &origin.display().to_string())))
        .collect();
    if let Some(lp) = env.get("LD_LIBRARY_PATH") {
        dirs.extend(lp.split(':').filter(|p| !p.is_empty()).map(PathBuf::from));
    }
    for d in [
        "/lib",
        "/usr/lib",
        "/lib64",
        "/usr/lib64",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
    ] {
        dirs.push(PathBuf::from(d));
    }
    let cache = ld_cache();
    let missing: Vec<&String> = needed
        .iter()
        .filter(|n| !cache.contains(n) && !dirs.iter().any(|d| d.join(n.as_str()).exists()))
        .collect();
    if missing.is_empty() {
        vec![finding(
            Level::Ok,
            format!(
                "all {} needed shared libraries found ({})",
                needed.len(),
                needed.join(", ")
            ),
        )]
    } else {
        vec![finding(
            Level::Error,
            format!(
                "needed shared libraries not found: {} (searched RUNPATH, LD_LIBRARY_PATH, the \
                 loader cache and the system directories); loading the profiler fails",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )]
    }
}

fn check_pe_imports(
    path: &Path,
    file: &object::File<'_>,
    env: &BTreeMap<String, String>,
) -> Vec<Finding> {
    let Ok(imports) = file.imports() else {
        return vec![finding(Level::Warning, "cannot read the import table")];
    };
    let mut dlls: Vec<String> = imports
        .flatten()
        .map(|i| String::from_utf8_lossy(i.library()).to_ascii_lowercase())
        .collect();
    dlls.sort();
    dlls.dedup();
    let prefix = env
        .get("WINEPREFIX")
        .map(PathBuf::from)
        .or_else(|| clrprof_testing::discover().wine().map(|w| w.prefix.clone()));
    let system32 = prefix.map(|p| p.join("drive_c").join("windows").join("system32"));
    let Some(system32) = system32.filter(|d| d.is_dir()) else {
        return vec![finding(
            Level::Note,
            format!(
                "imports {} (no Wine prefix found to check them against)",
                dlls.join(", ")
            ),
        )];
    };
    let beside = path.parent().unwrap_or(Path::new("."));
    let present = |dll: &str| -> bool {
        dll.starts_with("api-ms-win-")
            || dll.starts_with("ext-ms-")
            || [&system32, &beside.to_path_buf()].iter().any(|d| {
                std::fs::read_dir(d).is_ok_and(|entries| {
                    entries
                        .flatten()
                        .any(|e| e.file_name().to_string_lossy().eq_ignore_ascii_case(dll))
                })
            })
    };
    let missing: Vec<&String> = dlls.iter().filter(|d| !present(d)).collect();
    if missing.is_empty() {
        vec![finding(
            Level::Ok,
            format!("all {} imported DLLs found", dlls.len()),
        )]
    } else {
        vec![finding(
            Level::Error,
            format!(
                "imported DLLs not found next to the library or in {}: {}",
                system32.display(),
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )]
    }
}

/// What a diagnostic run showed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEvidence {
    /// The framework folder the host chose (`COREHOST_TRACE`), if it said.
    pub framework: Option<String>,
    /// SDK log lines (`[clrprof LEVEL target] message`).
    pub log: Vec<String>,
    /// JSON Lines records the profiler wrote.
    pub records: Vec<String>,
    /// The command is a Python program (CPython hosting .NET through pythonnet).
    pub python: bool,
}

/// Whether `command` runs Python: its program is `python…`, or a `.py` script.
pub fn is_python_command(command: &[OsString]) -> bool {
    let Some(first) = command.first() else {
        return false;
    };
    let p = Path::new(first);
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    name.starts_with("python") || p.extension().is_some_and(|e| e == "py")
}

/// What CPython + pythonnet need before CoreCLR loads a profiler (pythonnet 3).
const PYTHONNET_HINTS: &str = "pythonnet starts .NET only when the program calls \
     `pythonnet.load(\"coreclr\", ...)` or sets PYTHONNET_RUNTIME=coreclr before `import clr` \
     (on Linux its default is Mono, which loads no CoreCLR profiler), and the runtime reads the \
     CORECLR_* variables once, when it starts: they must be in the environment before that \
     (set them outside Python, e.g. `clrprof run -- python script.py`; assigning os.environ after \
     the runtime started changes nothing)";

/// Interprets a diagnostic run: the host trace, the SDK's log, the records.
pub fn summarize(evidence: &RunEvidence) -> Vec<Finding> {
    let mut out = Vec::new();
    match &evidence.framework {
        Some(fx) if evidence.python => out.push(finding(
            Level::Ok,
            format!("the Python host started CoreCLR through hostfxr (pythonnet) on the framework {fx}"),
        )),
        Some(fx) => out.push(finding(
            Level::Ok,
            format!("the host chose the framework {fx}"),
        )),
        None if evidence.python => out.push(finding(
            Level::Error,
            format!(
                "the Python program started no CoreCLR through hostfxr (no host trace was written): {PYTHONNET_HINTS}"
            ),
        )),
        None => out.push(finding(
            Level::Note,
            "the host wrote no framework choice (not started through a dotnet host, or it failed \
             before choosing)",
        )),
    }
    if evidence
        .log
        .iter()
        .any(|l| l.contains("Profiler::finish at: process exit"))
    {
        out.push(finding(
            Level::Note,
            "the host never shut the runtime down (no Shutdown callback): the profiler finished at \
             process exit; output written only in `shutdown` is lost there, write it in `Profiler::finish`",
        ));
    }
    for line in &evidence.log {
        if line.contains("does not serve CLSID") {
            out.push(finding(
                Level::Error,
                format!("CLSID mismatch reported by the profiler: {line}"),
            ));
        } else if line.contains("needs ICorProfilerInfo") {
            out.push(finding(
                Level::Error,
                format!(
                    "runtime too old for what the profiler requests: {line}{}",
                    evidence
                        .framework
                        .as_deref()
                        .map(|fx| format!(" (runtime: {fx})"))
                        .unwrap_or_default()
                ),
            ));
        } else if line.contains(" ERROR ") || line.starts_with("[clrprof ERROR") {
            out.push(finding(
                Level::Error,
                format!("the profiler logged: {line}"),
            ));
        }
    }
    let runtime_record = evidence
        .records
        .first()
        .is_some_and(|r| r.contains("\"event\":\"runtime\""));
    if runtime_record {
        out.push(finding(
            Level::Ok,
            format!(
                "the profiler loaded and Initialize ran: {} record(s) written, the first being the runtime record",
                evidence.records.len()
            ),
        ));
    } else if !evidence.records.is_empty() {
        out.push(finding(
            Level::Ok,
            format!(
                "the profiler loaded: {} record(s) written",
                evidence.records.len()
            ),
        ));
    } else if evidence
        .log
        .iter()
        .any(|l| l.contains("does not serve CLSID"))
    {
        // Reported above: the class factory refused, no profiler was created.
        out.push(finding(
            Level::Note,
            "no records: the library was loaded but served no class for that CLSID, so no \
             profiler was created and Initialize never ran",
        ));
    } else if !evidence.log.is_empty() {
        out.push(finding(
            Level::Error,
            "the library was loaded (it logged) but wrote no records: Initialize failed or was declined",
        ));
    } else if evidence.python && evidence.framework.is_some() {
        out.push(finding(
            Level::Error,
            format!(
                "CoreCLR started in the Python process but the profiler left no sign (no records, \
                 nothing logged): the runtime did not see the CORECLR_* variables, or \
                 DllGetClassObject failed (see the checks above); {PYTHONNET_HINTS}"
            ),
        ));
    } else {
        out.push(finding(
            Level::Error,
            "no sign of the profiler: it wrote no records and logged nothing, so the runtime did \
             not load it, or DllGetClassObject failed (see the checks above)",
        ));
    }
    out
}

/// The framework folder from a `COREHOST_TRACE` log.
pub fn chosen_framework(trace: &str) -> Option<String> {
    trace.lines().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("Chose FX version [")?;
        Some(rest.trim_end_matches(']').to_string())
    })
}

fn env_snapshot() -> BTreeMap<String, String> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

fn print(findings: &[Finding]) {
    for f in findings {
        let tag = match f.level {
            Level::Ok => "ok     ",
            Level::Note => "note   ",
            Level::Warning => "warning",
            Level::Error => "ERROR  ",
        };
        println!("  {tag} {}", f.message);
    }
}

/// The `clrprof doctor` command. Exits 1 when an error was found.
pub fn run(
    profiler: Option<&Path>,
    runtime: Option<&str>,
    command: &[OsString],
) -> Result<ExitCode> {
    let mut env = env_snapshot();
    let leg = match runtime {
        Some(r) => {
            let found = crate::runtime::found(profiler);
            Some(crate::runtime::resolve(r, &found)?.clone())
        }
        None => None,
    };
    let command = match &leg {
        Some(l) if !command.is_empty() => crate::runtime::command_on(l, command)?,
        _ => command.to_vec(),
    };
    let command = command.as_slice();
    let target = match &leg {
        Some(l) => target_of_leg(l),
        None => target_of(command, profiler),
    };
    let version = leg
        .as_ref()
        .map(|l| l.version.clone())
        .or_else(|| crate::runtime::version_of_command(command));
    match (&version, &leg) {
        (Some(v), Some(l)) => println!("runtime: .NET {v} ({})", l.name),
        (Some(v), None) => println!("runtime: .NET {v} (the framework beside the command's host)"),
        (None, _) => println!(
            "runtime: not known (give the command after `--`, or --runtime LEG|VERSION): the \
             variables are checked for any runtime"
        ),
    }
    // With --profiler and no variables, check (and run) as `clrprof run` would.
    if let Some(lib) = profiler {
        let launch = crate::launch::plan(
            lib,
            None,
            None,
            command_or_dummy(command).as_slice(),
            clrprof_testing::wine::find_wine_loader().as_deref(),
        );
        if let (Ok(launch), false) = (launch, env.contains_key(PROFILER)) {
            println!(
                "(checking the variables `clrprof run --profiler {}` sets)",
                lib.display()
            );
            env.extend(launch.env);
        }
    }
    let mut all = Vec::new();
    println!("environment:");
    let (found, request) = check_environment(&env, target, version.as_deref());
    print(&found);
    all.extend(found);

    let library: Option<PathBuf> = match (profiler, &request.path) {
        (Some(l), _) => Some(clrprof_testing::manifest::absolute(l)),
        (None, Some((_, p))) if target.windows => wine_to_unix(p),
        (None, Some((_, p))) => Some(PathBuf::from(p)),
        (None, None) => None,
    };
    if let Some(lib) = &library {
        println!("library {}:", lib.display());
        let found = check_library(lib, request.clsid.as_deref(), target, &env);
        print(&found);
        all.extend(found);
    }

    if !command.is_empty() {
        println!("running the command with diagnostics on:");
        let found = diagnose_run(profiler, command, target, &[])?;
        print(&found);
        all.extend(found);
    }
    let errors = all.iter().filter(|f| f.level == Level::Error).count();
    let warnings = all.iter().filter(|f| f.level == Level::Warning).count();
    println!("{errors} error(s), {warnings} warning(s)");
    Ok(if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn command_or_dummy(command: &[OsString]) -> Vec<OsString> {
    if command.is_empty() {
        vec![OsString::from("dotnet")]
    } else {
        command.to_vec()
    }
}

/// `Z:\a\b` → `/a/b` (Wine's default mapping of drive Z:).
fn wine_to_unix(p: &str) -> Option<PathBuf> {
    let rest = p.strip_prefix("Z:").or_else(|| p.strip_prefix("z:"))?;
    Some(PathBuf::from(rest.replace('\\', "/")))
}

/// Runs the command with `COREHOST_TRACE` and `CLRPROF_LOG=debug`, each
/// into its own file, and the records into a fresh `CLRPROF_OUTPUT`.
fn diagnose_run(
    profiler: Option<&Path>,
    command: &[OsString],
    target: Target,
    extra: &[(&str, &str)],
) -> Result<Vec<Finding>> {
    let dir = std::env::temp_dir().join(format!(
        "clrprof-doctor-{}",
        clrprof_testing::unique_suffix()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let trace = dir.join("host-trace.txt");
    let log = dir.join("clrprof.log");
    let records = dir.join("records.jsonl");
    let for_runtime = |p: &Path| -> Result<String> {
        if target.windows && !cfg!(windows) {
            clrprof_testing::wine::to_wine_path(p)
        } else {
            Ok(p.display().to_string())
        }
    };
    let (program, args, mut vars) = match profiler {
        Some(lib) => {
            let launch = crate::launch::plan(
                lib,
                None,
                Some(&records),
                command,
                clrprof_testing::wine::find_wine_loader().as_deref(),
            )?;
            (launch.program, launch.args, launch.env)
        }
        None => (
            command[0].clone(),
            command[1..].to_vec(),
            vec![("CLRPROF_OUTPUT".to_string(), for_runtime(&records)?)],
        ),
    };
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    vars.push(("COREHOST_TRACE".into(), "1".into()));
    vars.push(("COREHOST_TRACEFILE".into(), for_runtime(&trace)?));
    vars.push(("CLRPROF_LOG".into(), "debug".into()));
    vars.push(("CLRPROF_LOG_FILE".into(), for_runtime(&log)?));
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&args).envs(vars.iter().map(|(k, v)| (k, v)));
    if target.windows && std::env::var_os("WINEPREFIX").is_none() {
        if let Some(w) = clrprof_testing::discover().wine() {
            cmd.env("WINEPREFIX", &w.prefix).env("WINEDEBUG", "-all");
        }
    }
    let captured = clrprof_testing::run::run_captured(cmd, Duration::from_secs(120), &dir)?;
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .replace('\r', "")
    };
    let evidence = RunEvidence {
        framework: chosen_framework(&read(&trace)),
        log: read(&log).lines().map(str::to_string).collect(),
        records: read(&records)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
        python: is_python_command(command),
    };
    let mut out = vec![finding(
        if matches!(captured.exit, clrprof_testing::run::Exit::Code(0)) {
            Level::Ok
        } else {
            Level::Warning
        },
        format!(
            "the command ended: {:?} after {:.1}s",
            captured.exit,
            captured.duration.as_secs_f64()
        ),
    )];
    out.extend(summarize(&evidence));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::Architecture;

    const LINUX: Target = Target {
        windows: false,
        arch: Architecture::X86_64,
    };
    const WINDOWS: Target = Target {
        windows: true,
        arch: Architecture::X86_64,
    };
    const CLSID: &str = "{0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F9}";

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn errors(f: &[Finding]) -> Vec<&str> {
        f.iter()
            .filter(|f| f.level == Level::Error)
            .map(|f| f.message.as_str())
            .collect()
    }

    fn has(f: &[Finding], level: Level, text: &str) -> bool {
        f.iter()
            .any(|f| f.level == level && f.message.contains(text))
    }

    #[test]
    fn a_complete_environment_passes() {
        let e = env(&[(ENABLE, "1"), (PROFILER, CLSID), (PATH, "/opt/p/libp.so")]);
        let (f, req) = check_environment(&e, LINUX, None);
        assert!(errors(&f).is_empty(), "{f:?}");
        assert_eq!(req.clsid.as_deref(), Some(CLSID));
        assert_eq!(
            req.path,
            Some((PATH.to_string(), "/opt/p/libp.so".to_string()))
        );
    }

    /// Exactly what `clrprof doctor` prints for the three `DOTNET_` forms
    /// alone: by the runtime's version (measured per leg by
    /// tests/runtime/doctor.rs), and when the version is not known.
    #[test]
    fn dotnet_prefixed_variables_count_for_the_runtimes_that_read_them() {
        let e = env(&[
            ("DOTNET_ENABLE_PROFILING", "1"),
            ("DOTNET_PROFILER", CLSID),
            ("DOTNET_PROFILER_PATH", "/opt/p/libp.so"),
        ]);
        let lines = |f: &[Finding]| -> Vec<String> {
            f.iter()
                .map(|f| format!("{:?} {}", f.level, f.message))
                .collect()
        };
        // .NET 8 reads only the CORECLR_ names: three errors, each naming
        // the DOTNET_ form it ignores.
        let (f, req) = check_environment(&e, LINUX, Some("8.0.34"));
        assert_eq!(
            lines(&f),
            [
                "Error CORECLR_ENABLE_PROFILING is not set: the runtime loads no profiler without \
                 CORECLR_ENABLE_PROFILING=1; DOTNET_ENABLE_PROFILING is set, but .NET 8.0.34 does not \
                 read it (the DOTNET_ forms are read from .NET 11 on): set CORECLR_ENABLE_PROFILING",
                "Error CORECLR_PROFILER is not set: it names the profiler class, e.g. \
                 {8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E6F}; DOTNET_PROFILER is set, but .NET 8.0.34 does \
                 not read it (the DOTNET_ forms are read from .NET 11 on): set CORECLR_PROFILER",
                "Error neither CORECLR_PROFILER_PATH nor CORECLR_PROFILER_PATH_64 is set: the runtime \
                 does not know which library to load; DOTNET_PROFILER_PATH is set, but .NET 8.0.34 \
                 does not read it (the DOTNET_ forms are read from .NET 11 on): set CORECLR_PROFILER_PATH",
            ]
        );
        assert_eq!(req, Request::default());
        // .NET 11 reads them: the checks pass under their DOTNET_ names.
        let (f, req) = check_environment(&e, LINUX, Some("11.0.0"));
        assert!(errors(&f).is_empty(), "{f:?}");
        assert_eq!(req.clsid.as_deref(), Some(CLSID));
        assert!(has(&f, Level::Ok, "DOTNET_ENABLE_PROFILING=1"), "{f:?}");
        assert!(
            has(&f, Level::Ok, &format!("DOTNET_PROFILER={CLSID}")),
            "{f:?}"
        );
        assert!(
            has(&f, Level::Ok, "DOTNET_PROFILER_PATH=/opt/p/libp.so"),
            "{f:?}"
        );
        assert!(
            has(&f, Level::Note, "DOTNET_PROFILER is read by .NET 11.0.0"),
            "{f:?}"
        );
        // Unknown runtime: a warning per variable, never "ok CORECLR_...".
        let (f, _) = check_environment(&e, LINUX, None);
        assert!(errors(&f).is_empty(), "{f:?}");
        assert_eq!(
            f.iter().filter(|f| f.level == Level::Warning).count(),
            3,
            "{f:?}"
        );
        assert!(
            has(&f, Level::Warning, "DOTNET_ENABLE_PROFILING is read only by .NET 11 and later; .NET 10 and older ignore it"),
            "{f:?}"
        );
        assert!(!has(&f, Level::Ok, "CORECLR_"), "{f:?}");
        // Both names with different values.
        let e = env(&[
            (ENABLE, "1"),
            ("DOTNET_ENABLE_PROFILING", "0"),
            (PROFILER, CLSID),
            (PATH, "/opt/p/libp.so"),
        ]);
        let (f, _) = check_environment(&e, LINUX, None);
        assert!(has(&f, Level::Warning, "differ"), "{f:?}");
        let (f, _) = check_environment(&e, LINUX, Some("10.0.15"));
        assert!(
            has(&f, Level::Note, "DOTNET_ENABLE_PROFILING is set but .NET 10.0.15 reads only CORECLR_ENABLE_PROFILING=1"),
            "{f:?}"
        );
        assert_eq!(reads_dotnet_forms(Some("10.0.15")), Some(false));
        assert_eq!(reads_dotnet_forms(Some("11.0.0")), Some(true));
        assert_eq!(reads_dotnet_forms(Some("3.1.3")), Some(false));
        assert_eq!(reads_dotnet_forms(None), None);
    }

    #[test]
    fn a_notification_list_must_end_with_a_semicolon() {
        let base = [(ENABLE, "1"), (PROFILER, CLSID), (PATH, "/opt/p/libp.so")];
        let mut e = env(&base);
        e.insert(
            "CORECLR_NOTIFICATION_PROFILERS".into(),
            format!("/a.so={CLSID};/b.so={CLSID}"),
        );
        let (f, _) = check_environment(&e, LINUX, None);
        assert!(has(&f, Level::Warning, "PR 130584"), "{f:?}");
        e.insert(
            "CORECLR_NOTIFICATION_PROFILERS".into(),
            format!("/a.so={CLSID};/b.so={CLSID};"),
        );
        let (f, _) = check_environment(&e, LINUX, None);
        assert!(!has(&f, Level::Warning, "PR 130584"), "{f:?}");
        assert!(!has(&f, Level::Warning, "misspelling"), "{f:?}");
    }

    #[test]
    fn missing_variables_are_errors() {
        let (f, req) = check_environment(&env(&[]), LINUX, None);
        assert_eq!(errors(&f).len(), 3, "{f:?}");
        assert!(has(&f, Level::Error, "CORECLR_ENABLE_PROFILING is not set"));
        assert_eq!(req, Request::default());
        let (f, _) = check_environment(&env(&[(ENABLE, "true")]), LINUX, None);
        assert!(has(&f, Level::Error, "only by the value 1"));
    }

    #[test]
    fn misspelled_and_foreign_prefixes_are_named() {
        let e = env(&[
            ("CORECLR_PROFILER_PATH64", "/x.so"),
            ("coreclr_enable_profiling", "1"),
            ("COR_PROFILER", CLSID),
            ("DOTNET_ENABLE_PROFILING", "1"),
            ("CORECLR_PROFILR", CLSID),
        ]);
        let (f, _) = check_environment(&e, LINUX, None);
        assert!(
            has(
                &f,
                Level::Warning,
                "CORECLR_PROFILER_PATH64 looks like a misspelling of CORECLR_PROFILER_PATH_64"
            ),
            "{f:?}"
        );
        assert!(has(&f, Level::Warning, "coreclr_enable_profiling looks like a misspelling of CORECLR_ENABLE_PROFILING (variable names are case-sensitive)"), "{f:?}");
        assert!(
            has(
                &f,
                Level::Warning,
                "COR_PROFILER is set: COR_ variables are read by .NET Framework only"
            ),
            "{f:?}"
        );
        assert!(
            has(
                &f,
                Level::Warning,
                "DOTNET_ENABLE_PROFILING is read only by .NET 11 and later"
            ),
            "{f:?}"
        );
        assert!(
            has(
                &f,
                Level::Warning,
                "CORECLR_PROFILR looks like a misspelling of CORECLR_PROFILER"
            ),
            "{f:?}"
        );
        // Unrelated variables are left alone.
        let (f, _) = check_environment(&env(&[("HOME", "/root"), ("PATH", "/bin")]), LINUX, None);
        assert!(!f.iter().any(|f| f.level == Level::Warning), "{f:?}");
    }

    #[test]
    fn the_architecture_variable_shadows_the_plain_one() {
        let e = env(&[
            (ENABLE, "1"),
            (PROFILER, CLSID),
            (PATH, "/a.so"),
            ("CORECLR_PROFILER_PATH_64", "/b.so"),
            ("CORECLR_PROFILER_PATH_32", "/c.so"),
        ]);
        let (f, req) = check_environment(&e, LINUX, None);
        assert!(
            has(
                &f,
                Level::Warning,
                "CORECLR_PROFILER_PATH_64=/b.so shadows CORECLR_PROFILER_PATH=/a.so"
            ),
            "{f:?}"
        );
        assert!(
            has(
                &f,
                Level::Note,
                "CORECLR_PROFILER_PATH_32 is set but ignored"
            ),
            "{f:?}"
        );
        assert_eq!(req.path.unwrap().1, "/b.so");
        let arm = Target {
            windows: false,
            arch: Architecture::Aarch64,
        };
        let (_, req) = check_environment(&e, arm, None);
        assert_eq!(req.path.unwrap().1, "/a.so", "an arm64 runtime ignores _64");
    }

    #[test]
    fn relative_paths_and_bad_clsids_are_errors() {
        let e = env(&[
            (ENABLE, "1"),
            (PROFILER, "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"),
            (PATH, "libp.so"),
        ]);
        let (f, _) = check_environment(&e, LINUX, None);
        assert!(has(&f, Level::Error, "is not an absolute path"), "{f:?}");
        assert!(
            has(
                &f,
                Level::Error,
                "write it as {0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F9}"
            ),
            "{f:?}"
        );
        let e = env(&[(ENABLE, "1"), (PROFILER, CLSID), (PATH, "Z:\\work\\p.dll")]);
        let (f, _) = check_environment(&e, WINDOWS, None);
        assert!(errors(&f).is_empty(), "{f:?}");
        assert_eq!(
            wine_to_unix("Z:\\work\\p.dll"),
            Some(PathBuf::from("/work/p.dll"))
        );
    }

    #[test]
    fn unreadable_and_non_library_files_are_errors() {
        let f = check_library(Path::new("/nonexistent/libp.so"), None, LINUX, &env(&[]));
        assert!(
            has(&f, Level::Error, "cannot read /nonexistent/libp.so"),
            "{f:?}"
        );
        let dir = std::env::temp_dir().join(format!(
            "clrprof-doctor-t-{}",
            clrprof_testing::unique_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("libtext.so");
        std::fs::write(&text, "not a library").unwrap();
        let f = check_library(&text, None, LINUX, &env(&[]));
        assert!(has(&f, Level::Error, "is not a shared library"), "{f:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn summaries_name_what_happened() {
        let loaded = RunEvidence {
            framework: Some("/rt/shared/Microsoft.NETCore.App/8.0.4".into()),
            log: vec![],
            records: vec![
                "{\"event\":\"runtime\",\"version\":\"8.0.4\"}".into(),
                "{\"event\":\"jit\"}".into(),
            ],
            python: false,
        };
        let f = summarize(&loaded);
        assert!(errors(&f).is_empty(), "{f:?}");
        assert!(has(&f, Level::Ok, "Initialize ran: 2 record(s)"), "{f:?}");
        let old = RunEvidence {
            framework: Some("/rt/3.1.23".into()),
            log: vec!["[clrprof ERROR clrprof::com] Initialize: ICorProfilerInfo12::X needs ICorProfilerInfo12, but this runtime offers only ICorProfilerInfo11".into()],
            records: vec![],
            python: false,
        };
        let f = summarize(&old);
        assert!(has(&f, Level::Error, "runtime too old"), "{f:?}");
        assert!(
            has(&f, Level::Error, "Initialize failed or was declined"),
            "{f:?}"
        );
        let nothing = summarize(&RunEvidence::default());
        assert!(
            has(&nothing, Level::Error, "no sign of the profiler"),
            "{nothing:?}"
        );
        assert_eq!(
            chosen_framework("x\nChose FX version [/a/8.0.4]\ny"),
            Some("/a/8.0.4".to_string())
        );
    }

    #[test]
    fn a_refused_clsid_is_not_reported_as_a_failed_initialize() {
        let refused = RunEvidence {
            framework: Some("/rt/shared/Microsoft.NETCore.App/10.0.15".into()),
            log: vec![format!(
                "[clrprof WARN clrprof::factory] DllGetClassObject: this library does not serve CLSID {CLSID:?}"
            )],
            records: vec![],
            python: false,
        };
        let f = summarize(&refused);
        assert!(
            has(&f, Level::Error, "CLSID mismatch reported by the profiler"),
            "{f:?}"
        );
        assert!(!has(&f, Level::Error, "Initialize failed"), "{f:?}");
        assert!(has(&f, Level::Note, "Initialize never ran"), "{f:?}");
    }

    #[test]
    fn archives_and_libraries_of_the_wrong_os_are_named() {
        let dir = std::env::temp_dir().join(format!(
            "clrprof-doctor-b-{}",
            clrprof_testing::unique_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let rlib = dir.join("libmy_profiler.rlib");
        std::fs::write(
            &rlib,
            b"!<arch>\n/               0           0     0     0       8         `\n",
        )
        .unwrap();
        let (f, data) = check_binary(&rlib, None, LINUX);
        assert!(data.is_none());
        assert_eq!(
            errors(&f),
            [format!(
                "{} is a static archive (an .rlib or .a), which no runtime can load: build the crate \
                 as a shared library, `[lib] crate-type = [\"cdylib\"]` in its Cargo.toml (`clrprof \
                 new` does), and pass an ELF .so (target/debug/lib<name>.so, <name>.dll)",
                rlib.display()
            )]
        );
        let pe = dir.join("p.dll");
        std::fs::write(&pe, b"MZ\x90\0 not really a dll").unwrap();
        let (f, _) = check_binary(&pe, None, LINUX);
        assert_eq!(
            errors(&f),
            [format!(
                "{} is a PE file, but the runtime is a Linux runtime, which loads an ELF .so file",
                pe.display()
            )]
        );
        // This test's own executable stands for an ELF library.
        let elf = std::env::current_exe().unwrap();
        let (f, _) = check_binary(&elf, None, WINDOWS);
        assert_eq!(
            errors(&f),
            [format!(
                "{} is an ELF file, but the runtime is a Windows runtime, which loads a PE .dll file \
                 (build with --target x86_64-pc-windows-gnu)",
                elf.display()
            )]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn levenshtein() {
        assert_eq!(distance("CORECLR_PROFILER", "CORECLR_PROFILER"), 0);
        assert_eq!(distance("CORECLR_PROFILR", "CORECLR_PROFILER"), 1);
        assert_eq!(
            distance("CORECLR_PROFILER_PATH64", "CORECLR_PROFILER_PATH_64"),
            1
        );
    }

    /// The rig's broken-profiler fixtures, built with the C compilers: the
    /// doctor names the missing export, a CLSID the library does not serve,
    /// and a Windows DLL offered to a Linux runtime. Without gcc the test
    /// says so (and fails with CI=true).
    #[test]
    fn broken_profiler_fixtures_are_diagnosed() {
        use clrprof_testing::fixtures::{broken_profiler, BrokenBuild, BROKEN_PROFILER_CLSID};
        use clrprof_testing::Os;
        let strict = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        let cache = clrprof_testing::discover().cache_dir();
        let no_export = match broken_profiler(Os::Linux, BrokenBuild::NoExport, &cache) {
            Ok(p) => p,
            Err(e) => {
                assert!(!strict, "cannot build the fixture: {e}");
                eprintln!("skipped: cannot build the broken-profiler fixture: {e}");
                return;
            }
        };
        let none = env(&[]);
        let f = check_library(
            &no_export.path,
            Some(BROKEN_PROFILER_CLSID),
            Target::host(),
            &none,
        );
        assert!(
            has(&f, Level::Error, "DllGetClassObject is not exported"),
            "{f:?}"
        );
        assert_eq!(errors(&f).len(), 1, "{f:?}");

        let standard = broken_profiler(Os::Linux, BrokenBuild::Standard, &cache).unwrap();
        let f = check_library(
            &standard.path,
            Some(BROKEN_PROFILER_CLSID),
            Target::host(),
            &none,
        );
        assert!(errors(&f).is_empty(), "{f:?}");
        assert!(has(&f, Level::Ok, "DllGetClassObject is exported"), "{f:?}");
        assert!(has(&f, Level::Ok, "needed shared libraries found"), "{f:?}");
        let other = "{5A1C2F3E-9B7D-4E61-A0C4-2D8F6B1E9A71}";
        let f = check_library(&standard.path, Some(other), Target::host(), &none);
        assert!(has(&f, Level::Error, "CLSID mismatch"), "{f:?}");

        match broken_profiler(Os::Windows, BrokenBuild::Standard, &cache) {
            Ok(dll) => {
                let f = check_library(&dll.path, Some(BROKEN_PROFILER_CLSID), LINUX, &none);
                assert!(
                    has(
                        &f,
                        Level::Error,
                        "is a PE file, but the runtime is a Linux runtime"
                    ),
                    "{f:?}"
                );
                let f = check_library(&dll.path, Some(BROKEN_PROFILER_CLSID), WINDOWS, &none);
                assert!(has(&f, Level::Ok, "DllGetClassObject is exported"), "{f:?}");
                let arm = Target {
                    windows: true,
                    arch: Architecture::Aarch64,
                };
                let f = check_library(&dll.path, None, arm, &none);
                assert!(
                    has(
                        &f,
                        Level::Error,
                        "built for X86_64 but the runtime is Aarch64"
                    ),
                    "{f:?}"
                );
            }
            Err(e) => {
                assert!(!strict, "cannot build the Windows fixture: {e}");
                eprintln!("skipped the PE part: {e}");
            }
        }
    }

    #[test]
    fn python_hosts_are_explained() {
        assert!(is_python_command(&["/v/bin/python3".into(), "s.py".into()]));
        assert!(is_python_command(&["./script.py".into()]));
        assert!(!is_python_command(&["dotnet".into(), "app.dll".into()]));
        let no_runtime = RunEvidence {
            python: true,
            ..Default::default()
        };
        let f = summarize(&no_runtime);
        assert!(
            has(&f, Level::Error, "started no CoreCLR through hostfxr"),
            "{f:?}"
        );
        assert!(has(&f, Level::Error, "PYTHONNET_RUNTIME=coreclr"), "{f:?}");
        let not_loaded = RunEvidence {
            framework: Some("/rt/shared/Microsoft.NETCore.App/8.0.4".into()),
            python: true,
            ..Default::default()
        };
        let f = summarize(&not_loaded);
        assert!(
            has(&f, Level::Ok, "the Python host started CoreCLR"),
            "{f:?}"
        );
        assert!(
            has(&f, Level::Error, "did not see the CORECLR_* variables"),
            "{f:?}"
        );
        let finished_at_exit = RunEvidence {
            framework: Some("/rt/shared/Microsoft.NETCore.App/8.0.4".into()),
            log: vec!["[clrprof DEBUG clrprof::exit] Profiler::finish at: process exit".into()],
            records: vec!["{\"event\":\"runtime\"}".into()],
            python: true,
        };
        let f = summarize(&finished_at_exit);
        assert!(errors(&f).is_empty(), "{f:?}");
        assert!(has(&f, Level::Note, "never shut the runtime down"), "{f:?}");
    }

    /// A diagnostic run on the linux-x64-8.0 leg: the jit-tracer is seen
    /// loading on the chosen framework, and the fixture without
    /// `DllGetClassObject` is reported as never loaded. Without the leg the
    /// test says so (and fails with CI=true).
    #[test]
    fn diagnostic_runs_tell_loaded_from_not_loaded() {
        use clrprof_testing::fixtures::{broken_profiler, BrokenBuild};
        let strict = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        let runtimes = clrprof_testing::discover();
        let (Some(leg), Some(compiler), true) = (
            runtimes.leg("linux-x64-8.0"),
            runtimes.compiler(),
            cfg!(all(target_os = "linux", target_arch = "x86_64")),
        ) else {
            assert!(
                !strict,
                "the linux-x64-8.0 leg or the C# compiler is missing"
            );
            eprintln!("skipped: the linux-x64-8.0 leg or the C# compiler is missing");
            return;
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let cache = runtimes.cache_dir();
        let app = clrprof_testing::csharp::compile(
            &compiler,
            &root.join("tests").join("apps").join("hello.cs"),
            &cache,
            Default::default(),
            leg,
        )
        .and_then(|a| a.for_leg(leg))
        .unwrap();
        let command = [leg.host.clone().into_os_string(), app.into_os_string()];
        let invariant = [("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")];

        let tracer = clrprof_testing::build::build_cdylib(
            "jit-tracer",
            clrprof_testing::Os::Linux,
            false,
            root,
        )
        .unwrap();
        let f = diagnose_run(Some(&tracer), &command, LINUX, &invariant).unwrap();
        assert!(errors(&f).is_empty(), "{f:?}");
        let framework = format!("Microsoft.NETCore.App/{}", leg.version);
        assert!(has(&f, Level::Ok, &framework), "{f:?}");
        assert!(
            has(&f, Level::Ok, "the profiler loaded and Initialize ran"),
            "{f:?}"
        );

        let broken =
            broken_profiler(clrprof_testing::Os::Linux, BrokenBuild::NoExport, &cache).unwrap();
        let f = diagnose_run(Some(&broken.path), &command, LINUX, &invariant).unwrap();
        assert!(has(&f, Level::Ok, "the command ended: Code(0)"), "{f:?}");
        assert!(has(&f, Level::Error, "no sign of the profiler"), "{f:?}");
    }
}
