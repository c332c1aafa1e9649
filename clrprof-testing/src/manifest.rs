//! The runtime manifest (`runtimes.json`) and runtime discovery.
//!
//! `cargo xtask provision` writes `<cache>/runtimes.json`, listing every
//! provisioned runtime *leg*: one CoreCLR build on one OS, with the path of
//! its host (`dotnet` / `dotnet.exe`) and the version of its shared framework
//! (the name of the folder `<host dir>/shared/Microsoft.NETCore.App/<version>/`).
//! Windows legs run under Wine; the manifest then also names the Wine loader
//! and the prefix that provisioning initialised.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// File name of the manifest inside the cache directory.
pub const MANIFEST_FILE: &str = "runtimes.json";

/// The legs every full test run is expected to cover: the runtimes users run
/// today, from NuGet's runtime packs (see [`crate::runtime_pack::LEG_PACKS`]).
///
/// A leg of this list that is not found is reported as skipped (or, in strict
/// mode, as a failure); it never counts as passed.
pub const STANDARD_LEGS: [&str; 7] = [
    "linux-x64-3.1",
    "linux-x64-8.0",
    "linux-x64-9.0",
    "linux-x64-10.0",
    "linux-x64-11.0",
    "win-x64-8.0",
    "win-x64-10.0",
];

/// The leg where a real third-party host runs the runtime: CPython hosting
/// the linux-x64-10.0 runtime through pythonnet (PyPI). Its host is the
/// virtual environment's `python`; it runs only the scenarios that name it
/// (see [`OPT_IN_LEGS`]).
pub const PYTHONNET_LEG: &str = "linux-x64-10.0-pythonnet";

/// The runtime leg whose runtime the pythonnet leg hosts.
pub const PYTHONNET_RUNTIME_LEG: &str = "linux-x64-10.0";

/// The arm64 leg: the linux-arm64 runtime under `qemu-aarch64` with Debian's
/// arm64 libraries. Emulation makes it many times slower than a native leg,
/// so it runs the scenarios that name it (the ELT, stack-walk, sampler,
/// method-wrapping and example-tracer tier: `Scenario::also_on`).
pub const ARM64_LEG: &str = "linux-arm64-10.0";

/// Legs that a scenario runs on only when it names them (`Scenario::only_on`
/// or `Scenario::also_on`): the pythonnet leg's host is not `dotnet`, so a
/// generic scenario cannot run there; the arm64 leg is emulated and runs a
/// tier of scenarios. They are still listed (and a missing one reported) on
/// every run.
pub const OPT_IN_LEGS: [&str; 2] = [PYTHONNET_LEG, ARM64_LEG];

/// A Python virtual environment with pythonnet, provisioned beside the runtimes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pythonnet {
    /// The environment's `python` executable.
    pub python: PathBuf,
    /// The pythonnet version installed.
    pub version: String,
}

/// Operating system a leg's runtime is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    /// A native runtime of a Unix host: Linux (`.so` profilers), or macOS
    /// (`.dylib`) for an installed runtime; runs directly.
    Linux,
    /// A Windows runtime: loads `.dll` profilers, runs under Wine on Linux
    /// and directly on a Windows host (an installed runtime there).
    Windows,
}

impl Os {
    /// The Rust target triple a profiler for this OS is built for: the
    /// host's own for a runtime native to the host (Linux or macOS on a
    /// Unix host, Windows on a Windows host, any architecture), else
    /// `x86_64-unknown-linux-gnu` / `x86_64-pc-windows-gnu` (the Wine legs).
    pub fn rust_target(self) -> &'static str {
        match self {
            Os::Linux if cfg!(unix) => host_triple(),
            Os::Windows if cfg!(windows) => host_triple(),
            Os::Linux => "x86_64-unknown-linux-gnu",
            Os::Windows => "x86_64-pc-windows-gnu",
        }
    }

    /// Whether a runtime of this OS runs natively on the host (no Wine, no
    /// `--target`: profilers are built for the host).
    pub fn is_native(self) -> bool {
        match self {
            Os::Linux => cfg!(unix),
            Os::Windows => cfg!(windows),
        }
    }

    /// The file name of a `cdylib` with crate or library stem `stem`.
    pub fn library_file(self, stem: &str) -> String {
        match self {
            Os::Linux if cfg!(target_os = "macos") => format!("lib{stem}.dylib"),
            Os::Linux => format!("lib{stem}.so"),
            Os::Windows => format!("{stem}.dll"),
        }
    }
}

/// Processor architecture a leg's runtime is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// x86_64.
    #[default]
    X64,
    /// aarch64.
    Arm64,
}

impl Arch {
    /// The architecture this crate was built for (x64 for anything but aarch64).
    pub fn host() -> Arch {
        if cfg!(target_arch = "aarch64") {
            Arch::Arm64
        } else {
            Arch::X64
        }
    }

    /// The runtime identifiers' spelling: `x64`, `arm64`.
    pub fn rid_part(self) -> &'static str {
        match self {
            Arch::X64 => "x64",
            Arch::Arm64 => "arm64",
        }
    }
}

/// What a profiler is built for: a leg's OS and architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    /// The runtime's OS.
    pub os: Os,
    /// The runtime's architecture.
    pub arch: Arch,
}

impl From<Os> for Target {
    /// `os` on x64, or on the host's own architecture for a runtime native to
    /// the host.
    fn from(os: Os) -> Target {
        let arch = if os.is_native() {
            Arch::host()
        } else {
            Arch::X64
        };
        Target { os, arch }
    }
}

impl Target {
    /// The Rust target triple: the host's own for a runtime native to the
    /// host (same OS and architecture), else `x86_64-unknown-linux-gnu`,
    /// `aarch64-unknown-linux-gnu` or `x86_64-pc-windows-gnu` (the emulated
    /// and Wine legs).
    pub fn rust_target(self) -> &'static str {
        if self.is_native() {
            return host_triple();
        }
        match (self.os, self.arch) {
            (Os::Linux, Arch::X64) => "x86_64-unknown-linux-gnu",
            (Os::Linux, Arch::Arm64) => "aarch64-unknown-linux-gnu",
            (Os::Windows, Arch::X64) => "x86_64-pc-windows-gnu",
            (Os::Windows, Arch::Arm64) => "aarch64-pc-windows-msvc",
        }
    }

    /// Whether the host runs this target natively (no Wine, no emulator, no
    /// `--target`: profilers are built for the host).
    pub fn is_native(self) -> bool {
        self.os.is_native() && self.arch == Arch::host()
    }
}

/// The Rust target triple of the host this crate was built for.
fn host_triple() -> &'static str {
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        "x86_64-unknown-linux-gnu"
    } else if cfg!(all(target_os = "linux", target_arch = "aarch64")) {
        "aarch64-unknown-linux-gnu"
    } else if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
        "aarch64-apple-darwin"
    } else if cfg!(all(target_os = "macos", target_arch = "x86_64")) {
        "x86_64-apple-darwin"
    } else if cfg!(all(windows, target_arch = "x86_64", target_env = "msvc")) {
        "x86_64-pc-windows-msvc"
    } else if cfg!(all(windows, target_arch = "aarch64")) {
        "aarch64-pc-windows-msvc"
    } else if cfg!(windows) {
        "x86_64-pc-windows-gnu"
    } else {
        "unknown"
    }
}

/// The leg-name prefix of runtimes native to this host: `linux-x64`,
/// `linux-arm64`, `osx-arm64`, `win-x64`, ... (the runtime identifiers'
/// spelling).
pub fn host_leg_prefix() -> String {
    let os = if cfg!(target_os = "macos") {
        "osx"
    } else if cfg!(windows) {
        "win"
    } else {
        "linux"
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "x86" => "x86",
        other => other,
    };
    format!("{os}-{arch}")
}

/// One runtime leg: a CoreCLR host and its shared framework.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leg {
    /// Leg name, e.g. `linux-x64-8.0`.
    pub name: String,
    /// OS the runtime is built for.
    pub os: Os,
    /// Architecture the runtime is built for.
    #[serde(default)]
    pub arch: Arch,
    /// Absolute path of the host executable (`dotnet` or `dotnet.exe`).
    pub host: PathBuf,
    /// The emulator that runs the host, for a leg of another architecture
    /// (`qemu-aarch64 -L <arm64 root>`); `None` for a native or Wine leg.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<Emulator>,
    /// Framework version as the framework folder names it, e.g. `3.1.23`, `8.0.4`.
    pub version: String,
    /// Target framework moniker written into the app's runtimeconfig, e.g. `netcoreapp3.1`, `net8.0`.
    pub tfm: String,
}

impl Leg {
    /// The major version of [`Leg::version`] (`3` for .NET Core 3.1; 0 when
    /// it does not parse).
    pub fn major(&self) -> u32 {
        self.version
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    }

    /// `major.minor` of [`Leg::version`].
    pub fn major_minor(&self) -> String {
        self.version
            .split('.')
            .take(2)
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The `X.Y.0` framework reference written into `runtimeconfig.json`;
    /// the host rolls it forward to the newest installed patch `X.Y.*`.
    pub fn framework_reference(&self) -> String {
        format!("{}.0", self.major_minor())
    }

    /// Whether this leg's `dotnet` root has ASP.NET Core's shared framework.
    pub fn has_aspnetcore(&self) -> bool {
        self.host.parent().is_some_and(|root| {
            root.join("shared")
                .join("Microsoft.AspNetCore.App")
                .is_dir()
        })
    }

    /// Contents of `<app>.runtimeconfig.json` for an ASP.NET Core app run on
    /// this leg (the `Microsoft.AspNetCore.App` framework, which brings
    /// `Microsoft.NETCore.App`).
    pub fn aspnetcore_runtimeconfig_json(&self) -> String {
        format!(
            "{{\"runtimeOptions\":{{\"tfm\":\"{}\",\"framework\":{{\"name\":\"Microsoft.AspNetCore.App\",\"version\":\"{}\"}}}}}}\n",
            self.tfm,
            self.framework_reference()
        )
    }

    /// Contents of `<app>.runtimeconfig.json` for an app run on this leg.
    pub fn runtimeconfig_json(&self) -> String {
        format!(
            "{{\"runtimeOptions\":{{\"tfm\":\"{}\",\"framework\":{{\"name\":\"Microsoft.NETCore.App\",\"version\":\"{}\"}}}}}}\n",
            self.tfm,
            self.framework_reference()
        )
    }

    /// Whether this leg runs under Wine (a Windows runtime on a non-Windows host).
    pub fn is_wine(&self) -> bool {
        self.os == Os::Windows && !cfg!(windows)
    }

    /// What a profiler for this leg is built for.
    pub fn target(&self) -> Target {
        Target {
            os: self.os,
            arch: self.arch,
        }
    }

    /// Whether this leg's host runs under an emulator.
    pub fn is_emulated(&self) -> bool {
        self.emulator.is_some()
    }

    /// A command that starts the leg's host (through its emulator when it
    /// has one; Wine is the caller's: see `run::app_command`).
    pub fn host_command(&self) -> Command {
        match &self.emulator {
            Some(e) => {
                let mut c = Command::new(&e.program);
                c.args(&e.args).arg(&self.host);
                c
            }
            None => Command::new(&self.host),
        }
    }
}

/// A user-mode emulator that runs a leg's host: `program args... host ...`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Emulator {
    /// The emulator, e.g. `/usr/bin/qemu-aarch64`.
    pub program: PathBuf,
    /// Its arguments before the program it runs, e.g. `["-L", "/usr/aarch64-linux-gnu"]`.
    pub args: Vec<String>,
}

/// The target framework moniker for a framework version (`3.1.23` → `netcoreapp3.1`,
/// `8.0.4` → `net8.0`): .NET 5 dropped the `netcoreapp` prefix.
pub fn tfm_for_version(version: &str) -> String {
    let mut parts = version.split('.');
    let major: u32 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    let minor = parts.next().unwrap_or("0");
    if major >= 5 {
        format!("net{major}.{minor}")
    } else {
        format!("netcoreapp{major}.{minor}")
    }
}

/// How Windows legs are run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wine {
    /// The Wine loader, e.g. `/usr/lib/wine/wine64`.
    pub loader: PathBuf,
    /// The `WINEPREFIX` provisioning initialised (so no run pays for a first start).
    pub prefix: PathBuf,
}

/// The C# compiler used for test apps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Compiler {
    /// Mono's `mcs`, compiling against Mono's `mscorlib`; the result runs on
    /// .NET Core 3.1 and .NET 8 through the `mscorlib` facade.
    Mcs {
        /// Path of the `mcs` executable.
        path: PathBuf,
    },
    /// Roslyn's `csc.dll` (from NuGet's `Microsoft.Net.Compilers.Toolset`, or
    /// an installed .NET SDK), run by a `dotnet` host.
    Csc {
        /// The `dotnet` host that runs the compiler.
        dotnet: PathBuf,
        /// Path of `csc.dll`.
        csc: PathBuf,
        /// Directory of the assemblies referenced when no entry of
        /// `references_by_version` matches the leg.
        references: PathBuf,
        /// Reference assemblies per runtime `major.minor` (NuGet's
        /// `Microsoft.NETCore.App.Ref`): an app for a leg is compiled against
        /// its own version's, so it uses what that version offers.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        references_by_version: BTreeMap<String, PathBuf>,
        /// ASP.NET Core's reference assemblies per runtime `major.minor`
        /// (NuGet's `Microsoft.AspNetCore.App.Ref`), for the web apps.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        aspnetcore_references_by_version: BTreeMap<String, PathBuf>,
    },
}

impl Compiler {
    /// The reference assemblies an app for `leg` is compiled against (`None`
    /// for `mcs`, which compiles against Mono's own).
    pub fn references_for(&self, leg: &Leg) -> Option<&Path> {
        match self {
            Compiler::Mcs { .. } => None,
            Compiler::Csc {
                references,
                references_by_version,
                ..
            } => Some(
                references_by_version
                    .get(&leg.major_minor())
                    .unwrap_or(references),
            ),
        }
    }
}

/// Contents of `runtimes.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The cache directory the manifest lives in (compiled apps are cached here too).
    pub cache: PathBuf,
    /// Wine configuration, when Windows legs were provisioned.
    #[serde(default)]
    pub wine: Option<Wine>,
    /// The C# compiler, when one was found or installed.
    #[serde(default)]
    pub compiler: Option<Compiler>,
    /// The provisioned legs.
    #[serde(default)]
    pub legs: Vec<Leg>,
    /// pythonnet in a virtual environment, when provisioned (the
    /// [`PYTHONNET_LEG`]).
    #[serde(default)]
    pub pythonnet: Option<Pythonnet>,
    /// Legs provisioning could not make ready, each with the reason (a
    /// version the feed does not serve, a package whose hash is wrong, a
    /// runtime that does not start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unusable: Vec<MissingLeg>,
}

impl Manifest {
    /// Reads a manifest file.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::new(format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| {
            Error::new(format!(
                "{} is not a valid runtime manifest: {e}",
                path.display()
            ))
        })
    }

    /// Writes the manifest as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::new(format!("cannot serialise manifest: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::new(format!("cannot write {}: {e}", path.display())))
    }

    /// Finds a leg by name.
    pub fn leg(&self, name: &str) -> Option<&Leg> {
        self.legs.iter().find(|l| l.name == name)
    }
}

/// The cache directory: `$CLRPROF_CACHE`, else `$CARGO_TARGET_DIR/clrprof-cache`,
/// else `target/clrprof-cache` in the nearest ancestor of the current directory
/// that has a `target/` folder next to a `Cargo.toml` (the workspace root when
/// run by `cargo test`, whose working directory is the package's root).
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CLRPROF_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return absolute(Path::new(&dir)).join("clrprof-cache");
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut fallback = None;
    for dir in cwd.ancestors() {
        let cache = dir.join("target").join("clrprof-cache");
        if cache.join(MANIFEST_FILE).is_file() {
            return cache;
        }
        if fallback.is_none() && dir.join("Cargo.toml").is_file() && dir.join("target").is_dir() {
            fallback = Some(cache);
        }
    }
    fallback.unwrap_or_else(|| cwd.join("target").join("clrprof-cache"))
}

/// The provisioned cache nearest to `start`: `target/clrprof-cache` in
/// `start` or one of its ancestors, when it holds a manifest. Finds the cache
/// of the workspace a profiler library was built in, from the library's path.
pub fn find_cache_from(start: &Path) -> Option<PathBuf> {
    absolute(start).ancestors().find_map(|dir| {
        let cache = if dir.file_name().is_some_and(|n| n == "target") {
            dir.join("clrprof-cache")
        } else {
            dir.join("target").join("clrprof-cache")
        };
        cache.join(MANIFEST_FILE).is_file().then_some(cache)
    })
}

/// Makes a path absolute against the current directory (without resolving links).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A leg that was expected but cannot run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingLeg {
    /// Leg name.
    pub name: String,
    /// Why it cannot run.
    pub reason: String,
}

/// What [`discover`] found.
#[derive(Debug, Clone, Default)]
pub struct Runtimes {
    /// Where the legs came from (manifest path, installed dotnet).
    pub sources: Vec<String>,
    /// The manifest, when one was read.
    pub manifest: Option<Manifest>,
    /// Legs that can run.
    pub legs: Vec<Leg>,
    /// Legs whose runtime a third-party host runs ([`PYTHONNET_LEG`]): the
    /// leg's `host` is that host's executable. Kept apart from
    /// [`Runtimes::legs`], whose hosts run `host app.dll`.
    pub hosted: Vec<Leg>,
    /// Standard or manifest legs that cannot run, with the reason.
    pub missing: Vec<MissingLeg>,
}

impl Runtimes {
    /// Finds a runnable leg by name (hosted legs included).
    pub fn leg(&self, name: &str) -> Option<&Leg> {
        self.legs
            .iter()
            .chain(self.hosted.iter())
            .find(|l| l.name == name)
    }

    /// The Wine configuration, when Windows legs are available.
    pub fn wine(&self) -> Option<&Wine> {
        self.manifest.as_ref().and_then(|m| m.wine.as_ref())
    }

    /// The C# compiler recorded in the manifest, else `mcs` found on `PATH`,
    /// else the Roslyn `csc` of an installed .NET SDK (against its lowest
    /// shared framework: what a machine with only an SDK, e.g. a CI runner
    /// or a profiler author's, has).
    pub fn compiler(&self) -> Option<Compiler> {
        if let Some(c) = self.manifest.as_ref().and_then(|m| m.compiler.clone()) {
            return Some(c);
        }
        find_on_path("mcs")
            .map(|path| Compiler::Mcs { path })
            .or_else(|| installed_sdk_compiler(false))
    }

    /// The cache directory (from the manifest, else [`default_cache_dir`]).
    pub fn cache_dir(&self) -> PathBuf {
        match &self.manifest {
            Some(m) => m.cache.clone(),
            None => default_cache_dir(),
        }
    }
}

/// Discovers runtime legs.
///
/// Order: the manifest named by `$CLRPROF_RUNTIME_MANIFEST` (a path to a
/// `runtimes.json`), else `<cache>/runtimes.json` (see [`default_cache_dir`]);
/// then the shared frameworks of an installed `dotnet` (on `PATH` or in
/// `$DOTNET_ROOT`) fill in Linux legs the manifest lacks. Every leg is checked
/// (host present, Wine present for Windows legs); [`STANDARD_LEGS`] that were
/// not found are listed in [`Runtimes::missing`].
pub fn discover() -> Runtimes {
    let mut found = Runtimes::default();
    let manifest_path = match std::env::var_os("CLRPROF_RUNTIME_MANIFEST") {
        Some(p) => PathBuf::from(p),
        None => default_cache_dir().join(MANIFEST_FILE),
    };
    let mut manifest_error = None;
    if manifest_path.is_file() {
        match Manifest::load(&manifest_path) {
            Ok(m) => {
                found
                    .sources
                    .push(format!("manifest {}", manifest_path.display()));
                found.manifest = Some(m);
            }
            Err(e) => manifest_error = Some(e.to_string()),
        }
    } else {
        manifest_error = Some(format!(
            "no runtime manifest at {} (run `clrprof provision`; in the clrprof repository `cargo xtask provision`)",
            manifest_path.display()
        ));
    }

    if let Some(m) = &found.manifest {
        found.missing.extend(m.unusable.iter().cloned());
        for leg in &m.legs {
            match check_leg(leg, m.wine.as_ref()) {
                Ok(()) => found.legs.push(leg.clone()),
                Err(reason) => found.missing.push(MissingLeg {
                    name: leg.name.clone(),
                    reason,
                }),
            }
        }
    }

    for leg in installed_dotnet_legs() {
        // A leg provisioning found unusable keeps its reason: an installed
        // runtime of another patch does not stand in for the pinned one.
        let known = found.legs.iter().any(|l| l.name == leg.name)
            || found
                .manifest
                .as_ref()
                .is_some_and(|m| m.unusable.iter().any(|u| u.name == leg.name));
        if !known {
            found.missing.retain(|m| m.name != leg.name);
            found
                .sources
                .push(format!("installed dotnet {}", leg.host.display()));
            found.legs.push(leg);
        }
    }

    let pythonnet = found.manifest.as_ref().and_then(|m| m.pythonnet.clone());
    let runtime_leg = found.leg(PYTHONNET_RUNTIME_LEG).cloned();
    match (pythonnet, runtime_leg) {
        (Some(p), Some(leg)) if p.python.is_file() => found.hosted.push(Leg {
            name: PYTHONNET_LEG.to_string(),
            host: p.python,
            ..leg
        }),
        (Some(p), Some(_)) => found.missing.push(MissingLeg {
            name: PYTHONNET_LEG.to_string(),
            reason: format!(
                "{} not found (run `clrprof provision`; in the clrprof repository `cargo xtask provision`)",
                p.python.display()
            ),
        }),
        (None, _) => found.missing.push(MissingLeg {
            name: PYTHONNET_LEG.to_string(),
            reason: "pythonnet is not provisioned (run `clrprof provision`; in the clrprof repository `cargo xtask provision`)".to_string(),
        }),
        (Some(_), None) => found.missing.push(MissingLeg {
            name: PYTHONNET_LEG.to_string(),
            reason: format!("it hosts the {PYTHONNET_RUNTIME_LEG} runtime, which is not available"),
        }),
    }

    for name in STANDARD_LEGS {
        let present = found.legs.iter().any(|l| l.name == name);
        let reported = found.missing.iter().any(|m| m.name == name);
        if !present && !reported {
            let reason = manifest_error.clone().unwrap_or_else(|| {
                "not in the runtime manifest (run `clrprof provision`; in the clrprof repository `cargo xtask provision`)".to_string()
            });
            found.missing.push(MissingLeg {
                name: name.to_string(),
                reason,
            });
        }
    }
    found
}

/// Checks that a leg can run: its host exists, and for Windows legs Wine and its prefix exist.
pub fn check_leg(leg: &Leg, wine: Option<&Wine>) -> std::result::Result<(), String> {
    if !leg.host.is_file() {
        return Err(format!("host {} not found", leg.host.display()));
    }
    if leg.is_wine() {
        match wine {
            None => return Err("Windows leg but no Wine configured in the manifest".into()),
            Some(w) if !w.loader.is_file() => {
                return Err(format!("Wine loader {} not found", w.loader.display()))
            }
            Some(w) if !w.prefix.join("system.reg").is_file() => {
                return Err(format!(
                    "Wine prefix {} not initialised",
                    w.prefix.display()
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Finds an executable on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The installed `dotnet` host: `$DOTNET_ROOT/dotnet`, else `dotnet` on `PATH`
/// (`dotnet.exe` on Windows).
pub fn installed_dotnet() -> Option<PathBuf> {
    let exe = if cfg!(windows) {
        "dotnet.exe"
    } else {
        "dotnet"
    };
    if let Some(root) = std::env::var_os("DOTNET_ROOT") {
        let host = PathBuf::from(root).join(exe);
        if host.is_file() {
            return Some(host);
        }
    }
    let host = find_on_path(exe)?;
    Some(std::fs::canonicalize(&host).unwrap_or(host))
}

/// The Roslyn `csc` of the newest SDK of the installed `dotnet`, compiling
/// against the installation's lowest shared framework (so the result runs
/// on every runtime installed beside it); with `require_31`, only when that
/// framework is 3.x (the result must run on the 3.1 legs too).
pub fn installed_sdk_compiler(require_31: bool) -> Option<Compiler> {
    let dotnet = installed_dotnet()?;
    let out = Command::new(&dotnet).arg("--list-sdks").output().ok()?;
    // Lines look like `8.0.100 [/usr/share/dotnet/sdk]`.
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last()?;
    let (version, rest) = line.split_once(' ')?;
    let base = rest.trim().trim_start_matches('[').trim_end_matches(']');
    let csc = Path::new(base)
        .join(version)
        .join("Roslyn")
        .join("bincore")
        .join("csc.dll");
    let lowest = framework_versions(&dotnet).into_iter().next()?;
    if !csc.is_file() || (require_31 && !lowest.starts_with("3.")) {
        return None;
    }
    let references = dotnet
        .parent()?
        .join("shared")
        .join("Microsoft.NETCore.App")
        .join(lowest);
    Some(Compiler::Csc {
        dotnet,
        csc,
        references,
        references_by_version: BTreeMap::new(),
        aspnetcore_references_by_version: BTreeMap::new(),
    })
}

/// Legs provided by an installed `dotnet` (`dotnet --list-runtimes`),
/// newest patch per `major.minor`, named after the host
/// ([`host_leg_prefix`]: `linux-x64-10.0`, `linux-arm64-9.0`,
/// `osx-arm64-11.0`, `win-x64-8.0`, ...), on every host: this is how a
/// machine with .NET 8, 9, 10 or 11 installed (a CI runner, a profiler
/// author's machine) tests against it. Previews and release candidates are
/// left out unless `CLRPROF_DOTNET_PREVIEWS=1`.
pub fn installed_dotnet_legs() -> Vec<Leg> {
    let previews = std::env::var("CLRPROF_DOTNET_PREVIEWS").is_ok_and(|v| v == "1");
    let os = if cfg!(windows) {
        Os::Windows
    } else {
        Os::Linux
    };
    let prefix = host_leg_prefix();
    let Some(host) = installed_dotnet() else {
        return Vec::new();
    };
    let Ok(out) = Command::new(&host).arg("--list-runtimes").output() else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut legs: Vec<Leg> = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("Microsoft.NETCore.App") {
            continue;
        }
        let Some(version) = words.next() else {
            continue;
        };
        if version.contains('-') && !previews {
            continue; // previews
        }
        let leg = Leg {
            name: format!(
                "{prefix}-{}",
                version.split('.').take(2).collect::<Vec<_>>().join(".")
            ),
            os,
            arch: Arch::host(),
            host: host.clone(),
            emulator: None,
            version: version.to_string(),
            tfm: tfm_for_version(version),
        };
        match legs.iter_mut().find(|l| l.name == leg.name) {
            Some(existing) if version_key(&existing.version) < version_key(version) => {
                *existing = leg
            }
            Some(_) => {}
            None => legs.push(leg),
        }
    }
    legs
}

fn version_key(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The shared framework versions under `<host dir>/shared/Microsoft.NETCore.App/`.
pub fn framework_versions(host: &Path) -> Vec<String> {
    let dir = match host.parent() {
        Some(d) => d.join("shared").join("Microsoft.NETCore.App"),
        None => return Vec::new(),
    };
    let mut versions: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    versions.sort_by_key(|v| version_key(v));
    versions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_legs_are_named_after_the_host() {
        let prefix = host_leg_prefix();
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert_eq!(prefix, "linux-x64");
            assert_eq!(Os::Linux.rust_target(), "x86_64-unknown-linux-gnu");
            assert!(Os::Linux.is_native() && !Os::Windows.is_native());
            assert_eq!(Os::Linux.library_file("p"), "libp.so");
            assert_eq!(Os::Windows.rust_target(), "x86_64-pc-windows-gnu");
        }
        if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
            assert_eq!(prefix, "osx-arm64");
            assert_eq!(Os::Linux.library_file("p"), "libp.dylib");
        }
        let wine_leg = Leg {
            name: "win-x64-8.0".into(),
            os: Os::Windows,
            arch: Arch::X64,
            emulator: None,
            host: PathBuf::from("dotnet.exe"),
            version: "8.0.4".into(),
            tfm: "net8.0".into(),
        };
        assert_eq!(wine_leg.is_wine(), !cfg!(windows));
        assert_eq!(wine_leg.major(), 8);
    }

    #[test]
    fn tfm_follows_the_net5_rename() {
        assert_eq!(tfm_for_version("3.1.23"), "netcoreapp3.1");
        assert_eq!(tfm_for_version("8.0.4"), "net8.0");
        assert_eq!(tfm_for_version("5.0.0"), "net5.0");
    }

    #[test]
    fn runtimeconfig_names_the_framework_major_minor() {
        let leg = Leg {
            name: "linux-x64-3.1".into(),
            os: Os::Linux,
            arch: Arch::X64,
            emulator: None,
            host: "/x/dotnet".into(),
            version: "3.1.23".into(),
            tfm: "netcoreapp3.1".into(),
        };
        let v: serde_json::Value = serde_json::from_str(&leg.runtimeconfig_json()).unwrap();
        assert_eq!(v["runtimeOptions"]["tfm"], "netcoreapp3.1");
        assert_eq!(v["runtimeOptions"]["framework"]["version"], "3.1.0");
        assert_eq!(
            v["runtimeOptions"]["framework"]["name"],
            "Microsoft.NETCore.App"
        );
    }

    #[test]
    fn manifest_round_trips() {
        let m = Manifest {
            cache: "/c".into(),
            wine: Some(Wine {
                loader: "/usr/lib/wine/wine64".into(),
                prefix: "/c/wine".into(),
            }),
            compiler: Some(Compiler::Mcs {
                path: "/usr/bin/mcs".into(),
            }),
            legs: vec![Leg {
                name: "win-x64-8.0".into(),
                os: Os::Windows,
                arch: Arch::X64,
                emulator: None,
                host: "/c/w8/dotnet.exe".into(),
                version: "8.0.4".into(),
                tfm: "net8.0".into(),
            }],
            pythonnet: None,
            unusable: Vec::new(),
        };
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"os\":\"windows\""), "{text}");
        assert!(text.contains("\"kind\":\"mcs\""), "{text}");
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn cache_is_found_from_a_library_path_inside_target() {
        let root = std::env::temp_dir().join(format!("clrprof-find-cache-{}", std::process::id()));
        let cache = root.join("target").join("clrprof-cache");
        let lib_dir = root
            .join("target")
            .join("x86_64-pc-windows-gnu")
            .join("debug");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::create_dir_all(&lib_dir).unwrap();
        assert_eq!(find_cache_from(&lib_dir), None);
        std::fs::write(cache.join(MANIFEST_FILE), "{}").unwrap();
        assert_eq!(find_cache_from(&lib_dir), Some(cache.clone()));
        assert_eq!(find_cache_from(&root), Some(cache));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn missing_host_is_reported() {
        let leg = Leg {
            name: "linux-x64-8.0".into(),
            os: Os::Linux,
            arch: Arch::X64,
            emulator: None,
            host: "/nonexistent/dotnet".into(),
            version: "8.0.4".into(),
            tfm: "net8.0".into(),
        };
        let err = check_leg(&leg, None).unwrap_err();
        assert!(err.contains("/nonexistent/dotnet"), "{err}");
    }
}
