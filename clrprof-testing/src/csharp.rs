//! Compiling C# test apps.
//!
//! Apps are compiled once per content (source text, options, compiler and
//! reference assemblies) into `<cache>/apps/<name>-<hash>/<name>.dll`, then
//! copied per target framework into `<tfm>/` next to a
//! `<name>.runtimeconfig.json`, which is what the host reads to pick the
//! shared framework. Roslyn compiles an app for a leg against that leg's
//! version's reference assemblies (NuGet's `Microsoft.NETCore.App.Ref`), so
//! an app uses what its runtime offers and nothing newer. Mono's `mcs`
//! builds against Mono's `mscorlib`; the runtime resolves those references
//! through its `mscorlib` facade.

use crate::manifest::{Compiler, Leg};
use crate::{content_hash, Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiler switches for a test app.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// Allow `unsafe` code (`-unsafe`).
    pub allow_unsafe: bool,
    /// Optimise (`-optimize+`; Roslyn always optimises, see [`compile`]).
    pub optimize: bool,
    /// Compile `async` methods as runtime-async methods
    /// (`-features:runtime-async=on`; Roslyn only, against .NET 11 or later
    /// reference assemblies).
    pub runtime_async: bool,
    /// An ASP.NET Core app: compiled against ASP.NET Core's reference
    /// assemblies too, run on the `Microsoft.AspNetCore.App` framework
    /// (Roslyn only, on legs provisioned with it).
    pub aspnetcore: bool,
}

/// A compiled app in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledApp {
    /// Assembly name (the source file's stem).
    pub name: String,
    /// Cache directory of this build.
    pub dir: PathBuf,
    /// Whether it runs on ASP.NET Core's shared framework.
    pub aspnetcore: bool,
}

impl CompiledApp {
    /// The compiled assembly.
    pub fn dll(&self) -> PathBuf {
        self.dir.join(format!("{}.dll", self.name))
    }

    /// The app's assembly for `leg`: a copy in `<dir>/<tfm>/` next to a
    /// runtimeconfig naming that leg's framework. Idempotent.
    pub fn for_leg(&self, leg: &Leg) -> Result<PathBuf> {
        let dir = self.dir.join(&leg.tfm);
        let dll = dir.join(format!("{}.dll", self.name));
        let config = dir.join(format!("{}.runtimeconfig.json", self.name));
        let wanted = if self.aspnetcore {
            leg.aspnetcore_runtimeconfig_json()
        } else {
            leg.runtimeconfig_json()
        };
        let up_to_date = dll.is_file()
            && std::fs::read_to_string(&config)
                .map(|c| c == wanted)
                .unwrap_or(false)
            && file_len(&dll) == file_len(&self.dll());
        if !up_to_date {
            std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
            std::fs::copy(self.dll(), &dll).map_err(|e| io_error(&dll, e))?;
            std::fs::write(&config, wanted).map_err(|e| io_error(&config, e))?;
        }
        Ok(dll)
    }
}

fn file_len(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::new(format!("{}: {e}", path.display()))
}

/// Compiles `source` (one `.cs` file) with `compiler` for `leg` (against its
/// version's reference assemblies), caching under `cache`.
pub fn compile(
    compiler: &Compiler,
    source: &Path,
    cache: &Path,
    options: CompileOptions,
    leg: &Leg,
) -> Result<CompiledApp> {
    compile_with_references(compiler, source, cache, options, leg, &[])
}

/// Like [`compile`], against `extra` assemblies too (a NuGet package's, see
/// [`crate::packages`]); an extra assembly replaces the reference assembly
/// of the same file name (a package newer than the framework's copy).
/// Roslyn only.
pub fn compile_with_references(
    compiler: &Compiler,
    source: &Path,
    cache: &Path,
    options: CompileOptions,
    leg: &Leg,
    extra: &[PathBuf],
) -> Result<CompiledApp> {
    let text = std::fs::read(source).map_err(|e| io_error(source, e))?;
    let name = source
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| Error::new(format!("{}: no usable file name", source.display())))?
        .to_string();
    let references = compiler.references_for(leg);
    let aspnetcore_references = match (options.aspnetcore, compiler) {
        (false, _) => None,
        (
            true,
            Compiler::Csc {
                aspnetcore_references_by_version,
                ..
            },
        ) => Some(
            aspnetcore_references_by_version
                .get(&leg.major_minor())
                .cloned()
                .ok_or_else(|| {
                    Error::new(format!(
                        "no ASP.NET Core reference assemblies for .NET {} (provisioned for the legs that run web apps)",
                        leg.major_minor()
                    ))
                })?,
        ),
        (true, Compiler::Mcs { .. }) => {
            return Err(Error::new("ASP.NET Core apps are compiled by Roslyn, not mcs"))
        }
    };
    let compiler_id = match compiler {
        Compiler::Mcs { path } => format!("mcs {}", path.display()),
        Compiler::Csc { dotnet, csc, .. } => format!("csc {} {}", dotnet.display(), csc.display()),
    };
    let mut compiler_id = format!(
        "{compiler_id} references {}",
        references
            .map(|r| r.display().to_string())
            .unwrap_or_default()
    );
    if !extra.is_empty() {
        if matches!(compiler, Compiler::Mcs { .. }) {
            return Err(Error::new(
                "apps with NuGet packages are compiled by Roslyn, not mcs",
            ));
        }
        for e in extra {
            compiler_id.push_str(&format!(" {}", e.display()));
        }
    }
    let flags = format!("{options:?}");
    // "assembly named after the app": apps compiled before the assembly took
    // the app's own name (it was the temporary file's) are not reused.
    let hash = content_hash(&[
        &text,
        compiler_id.as_bytes(),
        flags.as_bytes(),
        b"assembly named after the app",
        b"roslyn release build",
    ]);
    let dir = cache.join("apps").join(format!("{name}-{hash:016x}"));
    let app = CompiledApp {
        name: name.clone(),
        dir: dir.clone(),
        aspnetcore: options.aspnetcore,
    };
    if app.dll().is_file() {
        return Ok(app);
    }
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    // Compile into a temporary directory, then rename: a concurrent or
    // interrupted build never leaves a half-written assembly under the final
    // name. The file name is the final one, because the compiler names the
    // assembly after it (name-only references to it, such as a startup
    // hook's, must bind).
    let tmp_dir = dir.join(format!("{name}.{}.tmp", crate::unique_suffix()));
    std::fs::create_dir_all(&tmp_dir).map_err(|e| io_error(&tmp_dir, e))?;
    let tmp = tmp_dir.join(format!("{name}.dll"));
    let mut cmd = match compiler {
        Compiler::Mcs { path } => {
            let mut c = Command::new(path);
            c.arg(format!("-out:{}", tmp.display())).arg("-target:exe");
            if options.allow_unsafe {
                c.arg("-unsafe");
            }
            if options.optimize {
                c.arg("-optimize+");
            }
            c.arg(source);
            c
        }
        Compiler::Csc { dotnet, csc, .. } => {
            let references = references.unwrap_or(Path::new("."));
            let mut c = Command::new(dotnet);
            c.arg("exec")
                .arg(csc)
                .args(["-nologo", "-noconfig", "-nostdlib", "-target:exe"]);
            c.arg(format!("-out:{}", tmp.display()));
            if options.allow_unsafe {
                c.arg("-unsafe");
            }
            // Always a release build: without `-optimize+` Roslyn marks the
            // assembly debuggable with optimisations disabled, and the JIT
            // then neither optimises nor tiers its methods (Mono's `mcs`
            // marks nothing unless asked for debug information).
            c.arg("-optimize+");
            if options.runtime_async {
                c.arg("-features:runtime-async=on");
            }
            let replaced = |p: &Path| extra.iter().any(|e| e.file_name() == p.file_name());
            for dir in std::iter::once(references).chain(aspnetcore_references.as_deref()) {
                for entry in std::fs::read_dir(dir)
                    .map_err(|e| io_error(dir, e))?
                    .flatten()
                {
                    let p = entry.path();
                    if p.extension().and_then(|e| e.to_str()) == Some("dll") && !replaced(&p) {
                        c.arg(format!("-r:{}", p.display()));
                    }
                }
            }
            for e in extra {
                c.arg(format!("-r:{}", e.display()));
            }
            c.arg(source);
            c
        }
    };
    let out = cmd
        .output()
        .map_err(|e| Error::new(format!("cannot start the C# compiler ({compiler_id}): {e}")))?;
    if !out.status.success() || !tmp.is_file() {
        let _ = std::fs::remove_dir_all(&tmp_dir);
        return Err(Error::new(format!(
            "compiling {} failed ({}):\n{}{}",
            source.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::rename(&tmp, app.dll()).map_err(|e| io_error(&app.dll(), e))?;
    let _ = std::fs::remove_dir_all(&tmp_dir);
    Ok(app)
}
