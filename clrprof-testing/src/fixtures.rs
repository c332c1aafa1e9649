//! The broken-profiler fixture: a minimal C COM profiler that misbehaves on request.
//!
//! It exists to prove that the rig turns a broken profiler into a readable test
//! failure instead of a hang (see `fixtures/broken_profiler.c`). The mode is
//! chosen at run time with `CLRPROF_BROKEN_MODE` ([`BrokenMode`]); the
//! missing-export defect is a separate build ([`BrokenBuild::NoExport`]).

use crate::manifest::Os;
use crate::run::Profiler;
use crate::{content_hash, Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Source of the fixture, embedded so the crate works as a dependency.
pub const BROKEN_PROFILER_SOURCE: &str = include_str!("../fixtures/broken_profiler.c");

/// The CLSID the fixture answers to (unless told otherwise).
pub const BROKEN_PROFILER_CLSID: &str = "{5A1C2F3E-9B7D-4E61-A0C4-2D8F6B1E9A70}";

/// Environment variable that selects the fixture's defect.
pub const MODE_VARIABLE: &str = "CLRPROF_BROKEN_MODE";

/// Which defect the fixture shows at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokenMode {
    /// `DllGetClassObject` answers `CLASS_E_CLASSNOTAVAILABLE`.
    WrongClsid,
    /// `ICorProfilerCallback::Initialize` writes through a null pointer.
    CrashInInitialize,
    /// `ICorProfilerCallback::Initialize` never returns.
    HangInInitialize,
}

impl BrokenMode {
    /// Value of [`MODE_VARIABLE`] for this mode.
    pub fn env_value(self) -> &'static str {
        match self {
            BrokenMode::WrongClsid => "wrong-clsid",
            BrokenMode::CrashInInitialize => "crash-in-initialize",
            BrokenMode::HangInInitialize => "hang-in-initialize",
        }
    }
}

/// Which build of the fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokenBuild {
    /// Exports `DllGetClassObject`; misbehaves per [`BrokenMode`].
    Standard,
    /// Has no `DllGetClassObject` export at all.
    NoExport,
}

/// The C compiler for a runtime OS: `gcc` for Linux, `x86_64-w64-mingw32-gcc` for Windows
/// (overridable with `$CLRPROF_CC_LINUX` / `$CLRPROF_CC_WINDOWS`).
pub fn c_compiler(os: Os) -> String {
    let (var, default) = match os {
        Os::Linux => ("CLRPROF_CC_LINUX", "gcc"),
        Os::Windows if cfg!(windows) => ("CLRPROF_CC_WINDOWS", "gcc"),
        Os::Windows => ("CLRPROF_CC_WINDOWS", "x86_64-w64-mingw32-gcc"),
    };
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// Builds the fixture for `os` into `<cache>/fixtures/` (once per source
/// content) and returns it with its CLSID.
pub fn broken_profiler(os: Os, build: BrokenBuild, cache: &Path) -> Result<Profiler> {
    let cc = c_compiler(os);
    let hash = content_hash(&[BROKEN_PROFILER_SOURCE.as_bytes(), cc.as_bytes()]);
    let dir = cache.join("fixtures").join(format!("broken-{hash:016x}"));
    let stem = match build {
        BrokenBuild::Standard => "broken_profiler",
        BrokenBuild::NoExport => "broken_profiler_no_export",
    };
    let file = os.library_file(stem);
    let lib: PathBuf = dir.join(file);
    if !lib.is_file() {
        std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
        let source = dir.join("broken_profiler.c");
        std::fs::write(&source, BROKEN_PROFILER_SOURCE)
            .map_err(|e| Error::new(format!("{}: {e}", source.display())))?;
        let tmp = dir.join(format!("{stem}.{}.tmp", crate::unique_suffix()));
        let mut cmd = Command::new(&cc);
        cmd.args(["-shared", "-O0", "-o"]).arg(&tmp).arg(&source);
        if os == Os::Linux {
            cmd.arg("-fPIC");
        }
        if cfg!(target_os = "macos") {
            // macOS links shared libraries with -dynamiclib.
            cmd.arg("-dynamiclib");
        }
        if build == BrokenBuild::NoExport {
            cmd.arg("-DCLRPROF_FIXTURE_NO_EXPORT");
        }
        let out = cmd.output().map_err(|e| {
            Error::new(format!(
                "cannot run C compiler `{cc}` for the broken-profiler fixture: {e}"
            ))
        })?;
        if !out.status.success() {
            return Err(Error::new(format!(
                "`{cc}` failed to build the broken-profiler fixture: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        std::fs::rename(&tmp, &lib).map_err(|e| Error::new(format!("{}: {e}", lib.display())))?;
    }
    Ok(Profiler {
        path: lib,
        clsid: BROKEN_PROFILER_CLSID.to_string(),
    })
}

/// A hand-written C profiler of the suite (one source file, no SDK: the
/// yardsticks that show what the runtime does without clrprof), built for
/// `os` into `<cache>/fixtures/<name>-<hash>/` once per source and
/// compiler, with `flags` added (e.g. `-lpthread`).
pub fn c_profiler(
    os: Os,
    cache: &Path,
    name: &str,
    source: &str,
    clsid: &str,
    flags: &[&str],
) -> Result<Profiler> {
    let cc = c_compiler(os);
    let mut parts = vec![source.as_bytes(), cc.as_bytes()];
    parts.extend(flags.iter().map(|f| f.as_bytes()));
    let hash = content_hash(&parts);
    let dir = cache.join("fixtures").join(format!("{name}-{hash:016x}"));
    let stem = name.replace('-', "_");
    let lib: PathBuf = dir.join(os.library_file(&stem));
    if !lib.is_file() {
        std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
        let file = dir.join(format!("{stem}.c"));
        std::fs::write(&file, source)
            .map_err(|e| Error::new(format!("{}: {e}", file.display())))?;
        let tmp = dir.join(format!("{stem}.{}.tmp", crate::unique_suffix()));
        let mut cmd = Command::new(&cc);
        cmd.args(["-shared", "-O1", "-o"]).arg(&tmp).arg(&file);
        if os == Os::Linux {
            cmd.args(["-fPIC", "-fvisibility=hidden"]);
        }
        cmd.args(flags);
        let out = cmd
            .output()
            .map_err(|e| Error::new(format!("cannot run C compiler `{cc}` for {name}: {e}")))?;
        if !out.status.success() {
            return Err(Error::new(format!(
                "`{cc}` failed to build {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        std::fs::rename(&tmp, &lib).map_err(|e| Error::new(format!("{}: {e}", lib.display())))?;
    }
    Ok(Profiler {
        path: lib,
        clsid: clsid.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_marker_matches_the_declared_clsid() {
        let found = crate::clsid::scan_clsids(BROKEN_PROFILER_SOURCE.as_bytes());
        assert_eq!(found, vec![BROKEN_PROFILER_CLSID.to_string()]);
    }
}
