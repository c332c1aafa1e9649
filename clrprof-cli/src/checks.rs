//! The checks of a profiler library that need nothing run: readable, a
//! shared library of the runtime's format and architecture, its
//! `DllGetClassObject` exported, the CLSID it serves; and the runtime
//! ([`Target`]) a command or a leg would start. `clrprof run` makes them
//! before it starts anything (`launch`), `clrprof doctor` as its first
//! steps (`doctor`, which adds the environment, the library's dependencies
//! and a run).

use clrprof_testing::clsid::scan_clsids;
use object::{Architecture, BinaryFormat, Object, ObjectSymbol};
use std::ffi::OsString;
use std::path::Path;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// A check that passed.
    Ok,
    /// Worth knowing; does not stop the profiler from loading.
    Note,
    /// Probably wrong, may stop the profiler from loading.
    Warning,
    /// Stops the profiler from loading.
    Error,
}

/// One finding: a level and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How serious.
    pub level: Level,
    /// What was found, and why it matters.
    pub message: String,
}

pub(crate) fn finding(level: Level, message: impl Into<String>) -> Finding {
    Finding {
        level,
        message: message.into(),
    }
}

/// The runtime the profiler is meant for: OS family and architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// `true` for a Windows runtime (natively or under Wine).
    pub windows: bool,
    /// The runtime's architecture.
    pub arch: Architecture,
}

impl Target {
    /// The machine this tool runs on.
    pub fn host() -> Target {
        let arch = if cfg!(target_arch = "aarch64") {
            Architecture::Aarch64
        } else if cfg!(target_arch = "x86") {
            Architecture::I386
        } else if cfg!(target_arch = "arm") {
            Architecture::Arm
        } else {
            Architecture::X86_64
        };
        Target {
            windows: cfg!(windows),
            arch,
        }
    }

    /// The architecture-specific path variable this runtime reads first.
    pub(crate) fn path_variable(self) -> &'static str {
        match self.arch {
            Architecture::Aarch64 => "CORECLR_PROFILER_PATH_ARM64",
            Architecture::Arm => "CORECLR_PROFILER_PATH_ARM32",
            Architecture::I386 => "CORECLR_PROFILER_PATH_32",
            _ => "CORECLR_PROFILER_PATH_64",
        }
    }
}

/// What the first bytes of a file say it is.
fn magic_format(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x7fELF") {
        Some("ELF")
    } else if data.starts_with(b"MZ") {
        Some("PE")
    } else if data.starts_with(b"!<arch>\n") {
        Some("archive")
    } else if [
        [0xfe, 0xed, 0xfa, 0xcf],
        [0xcf, 0xfa, 0xed, 0xfe],
        [0xca, 0xfe, 0xba, 0xbe],
    ]
    .iter()
    .any(|m| data.starts_with(m))
    {
        Some("Mach-O")
    } else {
        None
    }
}

/// The checks of the library file alone, which `clrprof run` makes before
/// it starts anything: readable, a shared library of the runtime's format
/// and architecture, `DllGetClassObject` exported, serving `clsid`. Returns
/// the findings and the file's bytes when it is a library worth reading
/// further.
pub fn check_binary(
    path: &Path,
    clsid: Option<&str>,
    target: Target,
) -> (Vec<Finding>, Option<Vec<u8>>) {
    let mut out = Vec::new();
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => {
            out.push(finding(
                Level::Error,
                format!("cannot read {}: {e}", path.display()),
            ));
            return (out, None);
        }
    };
    let wanted = if target.windows {
        "a PE .dll"
    } else if cfg!(target_os = "macos") {
        "a Mach-O .dylib"
    } else {
        "an ELF .so"
    };
    match magic_format(&data) {
        Some("archive") => {
            out.push(finding(
                Level::Error,
                format!(
                    "{} is a static archive (an .rlib or .a), which no runtime can load: build the \
                     crate as a shared library, `[lib] crate-type = [\"cdylib\"]` in its Cargo.toml \
                     (`clrprof new` does), and pass {wanted} (target/debug/lib<name>.so, <name>.dll)",
                    path.display()
                ),
            ));
            return (out, None);
        }
        Some(found) if (found == "PE") != target.windows => {
            out.push(finding(
                Level::Error,
                format!(
                    "{} is {} {found} file, but the runtime is a {} runtime, which loads {wanted} \
                     file{}",
                    path.display(),
                    if found == "ELF" { "an" } else { "a" },
                    if target.windows { "Windows" } else { "Linux" },
                    if target.windows {
                        " (build with --target x86_64-pc-windows-gnu)"
                    } else {
                        ""
                    }
                ),
            ));
            return (out, None);
        }
        _ => {}
    }
    let file = match object::File::parse(&*data) {
        Ok(f) => f,
        Err(e) => {
            out.push(finding(
                Level::Error,
                format!(
                    "{} is not a shared library the doctor can read ({e}); the runtime loads {wanted}",
                    path.display()
                ),
            ));
            return (out, None);
        }
    };
    let format = file.format();
    match (format, target.windows) {
        (BinaryFormat::Elf, false) | (BinaryFormat::Pe, true) => {}
        (f, windows) => out.push(finding(
            Level::Error,
            format!(
                "{} is a {f:?} file, but the runtime is a {} runtime, which loads {}",
                path.display(),
                if windows { "Windows" } else { "Linux" },
                if windows {
                    "PE .dll files"
                } else {
                    "ELF .so files"
                }
            ),
        )),
    }
    if file.architecture() == target.arch {
        out.push(finding(
            Level::Ok,
            format!(
                "{:?} {:?} library for a {:?} runtime",
                format,
                file.architecture(),
                target.arch
            ),
        ));
    } else {
        out.push(finding(
            Level::Error,
            format!(
                "the library is built for {:?} but the runtime is {:?}: a process cannot load a \
                 library of another architecture",
                file.architecture(),
                target.arch
            ),
        ));
    }

    let exported = |wanted: &str| -> bool {
        match format {
            BinaryFormat::Pe => file.exports().is_ok_and(|exports| {
                exports
                    .flatten()
                    .any(|e| e.name() == object::NameOrOrdinal::Name(wanted.as_bytes()))
            }),
            _ => file.dynamic_symbols().any(|s| {
                s.is_definition() && s.is_global() && s.name_bytes().ok() == Some(wanted.as_bytes())
            }),
        }
    };
    if exported("DllGetClassObject") {
        out.push(finding(Level::Ok, "DllGetClassObject is exported"));
    } else {
        out.push(finding(
            Level::Error,
            "DllGetClassObject is not exported: the runtime finds the profiler's class factory \
             through that export (with #[profiler], build the crate as a cdylib)",
        ));
    }

    let marked = scan_clsids(&data);
    match (clsid, marked.is_empty()) {
        (_, true) => out.push(finding(
            Level::Note,
            "the library has no CLRPROF_CLSID marker (not built with #[profiler]): the CLSID \
             cannot be checked",
        )),
        (Some(c), false) if marked.iter().any(|m| m == c) => {
            out.push(finding(Level::Ok, format!("the library serves {c}")))
        }
        (Some(c), false) => out.push(finding(
            Level::Error,
            format!(
                "CLSID mismatch: CORECLR_PROFILER is {c} but the library serves {}; \
                 DllGetClassObject will answer CLASS_E_CLASSNOTAVAILABLE",
                marked.join(", ")
            ),
        )),
        (None, false) => out.push(finding(
            Level::Note,
            format!("the library serves {}", marked.join(", ")),
        )),
    }
    drop(file);
    (out, Some(data))
}

/// The runtime a command would start: a `.exe` or Wine itself means a
/// Windows x86_64 runtime under Wine; anything else, the host's.
pub fn target_of(command: &[OsString], library: Option<&Path>) -> Target {
    if let Some(first) = command.first() {
        let p = Path::new(first);
        if clrprof_testing::wine::is_wine_command(p)
            || p.extension().is_some_and(|e| e.eq_ignore_ascii_case("exe"))
        {
            return Target {
                windows: true,
                arch: Architecture::X86_64,
            };
        }
        return Target::host();
    }
    // No command: a PE library is meant for a Windows x86_64 runtime.
    let is_pe = library
        .and_then(|l| std::fs::read(l).ok())
        .is_some_and(|d| d.starts_with(b"MZ"));
    if is_pe {
        Target {
            windows: true,
            arch: Architecture::X86_64,
        }
    } else {
        Target::host()
    }
}

/// The runtime a leg runs.
pub fn target_of_leg(leg: &clrprof_testing::manifest::Leg) -> Target {
    Target {
        windows: crate::runtime::is_windows(leg),
        arch: match leg.arch {
            clrprof_testing::manifest::Arch::Arm64 => Architecture::Aarch64,
            clrprof_testing::manifest::Arch::X64 => Architecture::X86_64,
        },
    }
}
