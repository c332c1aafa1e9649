//! Provisioning of the test runtimes and the C# compiler into a cache
//! directory, idempotently: the code behind both `cargo xtask provision`
//! (this repository) and `clrprof provision` (a profiler author's crate,
//! into its `target/clrprof-cache`).
//!
//! Legs: the runtimes of [`runtime_pack::LEG_PACKS`] (linux-x64 .NET Core 3.1
//! and .NET 8, 9, 10 and 11; win-x64 .NET 8 and 10 under Wine; linux-arm64
//! .NET 10 under qemu), each a `dotnet` root assembled from NuGet's official
//! runtime pack, pinned and checked by SHA-512 ([`crate::nuget`]). The C#
//! compiler is Roslyn from NuGet, compiling each leg's apps against that
//! version's reference pack. Windows legs run under Wine with a prefix
//! initialised here, so no test pays for Wine's first start. pythonnet comes
//! from pip (PyPI, or the wheels a `pip.conf` names). The result is
//! `<cache>/runtimes.json`.

use crate::manifest::{self, Arch, Compiler, Leg, Manifest, MissingLeg, Os, Pythonnet, Wine};
use crate::nuget::Feed;
use crate::runtime_pack;
use crate::Result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// What [`provision`] does besides the runtimes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Anything that cannot be provisioned is an error (else a note, and
    /// the legs that need it are left out).
    pub strict: bool,
    /// Install the missing toolchains first ([`ensure_toolchains`]:
    /// rustup targets and Debian packages, through `sudo -n` when not root).
    pub toolchains: bool,
}

/// `install-toolchains.sh`: the rustup targets and Debian packages the
/// cross legs and the test rig need.
pub const INSTALL_TOOLCHAINS: &str = include_str!("../scripts/install-toolchains.sh");

/// `wine-runner.sh`: runs a Windows program under Wine in a prefix it
/// initialises, with the `bcryptprimitives.dll` stand-in Rust programs need
/// on Wine 8 (also this repository's cargo `runner` for
/// `x86_64-pc-windows-gnu`).
pub const WINE_RUNNER: &str = include_str!("../scripts/wine-runner.sh");

/// Writes an embedded script to `<cache>/scripts/<name>` (when it changed)
/// and returns its path.
fn write_script(cache: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let dir = cache.join("scripts");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(name);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        crate::make_executable(&path)?;
    }
    Ok(path)
}

/// Installs whatever the cross legs need and is missing, with
/// [`INSTALL_TOOLCHAINS`] (Debian, as root or through password-less sudo).
/// Not strict: a failure is printed as a warning and `Ok` is returned;
/// strict: a failure is an error.
pub fn ensure_toolchains(cache: &Path, strict: bool) -> Result<()> {
    let outcome = if !cfg!(target_os = "linux") {
        Err("the cross toolchains install on Linux (Debian) only".to_string())
    } else {
        let script = write_script(cache, "install-toolchains.sh", INSTALL_TOOLCHAINS)?;
        match Command::new("bash").arg(&script).status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("{} failed ({s})", script.display())),
            Err(e) => Err(format!("cannot run bash {}: {e}", script.display())),
        }
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(reason) if strict => Err(format!("toolchain: {reason}").into()),
        Err(reason) => {
            eprintln!(
                "toolchain: warning: {reason}; legs that need the missing tools will be skipped"
            );
            Ok(())
        }
    }
}

/// The cache directory of a crate whose target directory is `target_dir`:
/// `explicit`, else `$CLRPROF_CACHE`, else `$CARGO_TARGET_DIR/clrprof-cache`,
/// else `<target_dir>/clrprof-cache`.
pub fn cache_dir(explicit: Option<&Path>, target_dir: &Path) -> PathBuf {
    if let Some(dir) = explicit {
        return manifest::absolute(dir);
    }
    if let Some(dir) = std::env::var_os("CLRPROF_CACHE") {
        return manifest::absolute(Path::new(&dir));
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return manifest::absolute(Path::new(&dir)).join("clrprof-cache");
    }
    manifest::absolute(target_dir).join("clrprof-cache")
}

/// Prints the provisioned legs as a table.
pub fn print_manifest(m: &Manifest) {
    println!(
        "runtime manifest: {}",
        m.cache.join(manifest::MANIFEST_FILE).display()
    );
    for leg in &m.legs {
        let how = if leg.is_wine() {
            " (under Wine)"
        } else if leg.is_emulated() {
            " (under qemu)"
        } else {
            ""
        };
        println!(
            "  {:<17} {:<8} {:<10} {}{how}",
            leg.name,
            leg.version,
            leg.tfm,
            leg.host.display()
        );
    }
    if let Some(p) = &m.pythonnet {
        println!(
            "  {:<17} pythonnet {} hosting {} ({})",
            manifest::PYTHONNET_LEG,
            p.version,
            manifest::PYTHONNET_RUNTIME_LEG,
            p.python.display()
        );
    }
    for u in &m.unusable {
        println!("  {:<17} NOT USABLE: {}", u.name, u.reason);
    }
    match &m.compiler {
        Some(Compiler::Mcs { path }) => println!("  C# compiler: mcs ({})", path.display()),
        Some(Compiler::Csc {
            csc,
            references_by_version,
            ..
        }) => println!(
            "  C# compiler: csc ({}) with the reference assemblies of {}",
            csc.display(),
            references_by_version
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => println!("  C# compiler: none"),
    }
    if let Some(w) = &m.wine {
        println!(
            "  Wine: {} prefix {}",
            w.loader.display(),
            w.prefix.display()
        );
    }
}

/// Provisions everything into `cache` and writes the manifest: the legs of
/// [`runtime_pack::LEG_PACKS`] from the configured NuGet feed, Wine for the
/// Windows legs, qemu for the arm64 leg, Roslyn with each version's
/// reference assemblies, pythonnet. Each leg is then started once (a
/// program printing the runtime's version, which must be the pinned one).
///
/// A leg that cannot be made ready (a version the feed does not serve, a
/// package whose hash does not match, an unreachable feed, a runtime that
/// does not start) is recorded in the manifest's `unusable` list with the
/// reason, and the other legs are provisioned as usual. In strict mode the
/// call then returns an error (after writing the manifest); otherwise the
/// reasons are printed. The toolchains ([`ensure_toolchains`]) are
/// installed first when `options.toolchains` is set.
pub fn provision(cache: &Path, options: &Options) -> Result<Manifest> {
    let strict = options.strict;
    let started = Instant::now();
    std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    if options.toolchains {
        ensure_toolchains(cache, strict)?;
    }

    let mut problems: Vec<String> = Vec::new();
    let mut unusable: Vec<MissingLeg> = Vec::new();
    let mut legs: Vec<Leg> = Vec::new();
    let feed = Feed::configured();
    let downloads = cache.join("downloads").join("nuget");
    let progress = crate::progress::Downloads::new();

    let mut references: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut aspnetcore_references: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut wine: Option<Wine> = None;
    let mut wine_error: Option<String> = None;
    for pack in &runtime_pack::LEG_PACKS {
        match provision_leg(
            cache,
            pack,
            &feed,
            &downloads,
            &progress,
            &mut references,
            &mut aspnetcore_references,
        ) {
            Ok(mut leg) => {
                let runner = if leg.is_wine() {
                    if wine.is_none() && wine_error.is_none() {
                        match provision_wine(cache) {
                            Ok(w) => wine = Some(w),
                            Err(e) => wine_error = Some(e.to_string()),
                        }
                    }
                    wine_error.clone().map(|e| format!("Wine: {e}"))
                } else if leg.arch != Arch::host() {
                    match runtime_pack::arm64_emulator() {
                        Ok(e) => {
                            leg.emulator = Some(e);
                            None
                        }
                        Err(e) => Some(e.to_string()),
                    }
                } else {
                    None
                };
                match runner {
                    None => legs.push(leg),
                    Some(reason) => unusable.push(MissingLeg {
                        name: pack.name.to_string(),
                        reason,
                    }),
                }
            }
            Err(e) => unusable.push(MissingLeg {
                name: pack.name.to_string(),
                reason: e.to_string(),
            }),
        }
    }

    let compiler = match roslyn(
        cache,
        &feed,
        &downloads,
        &progress,
        &legs,
        &references,
        &aspnetcore_references,
    ) {
        Ok(c) => Some(c),
        Err(e) => {
            problems.push(format!("Roslyn: {e}"));
            find_compiler()
        }
    };
    if compiler.is_none() {
        problems.push("no C# compiler".into());
    }

    // Every leg starts a program once: what does not start here is unusable,
    // with the reason (Wine or qemu may not run a runtime at all).
    let mut m = Manifest {
        cache: cache.to_path_buf(),
        wine,
        compiler,
        legs,
        pythonnet: None,
        unusable,
    };
    if let Some(compiler) = m.compiler.clone() {
        let mut ready = Vec::new();
        for leg in std::mem::take(&mut m.legs) {
            match crate::smoke::check_starts(&leg, m.wine.as_ref(), &compiler, cache) {
                Ok(()) => ready.push(leg),
                Err(e) => m.unusable.push(MissingLeg {
                    name: leg.name.clone(),
                    reason: e.to_string(),
                }),
            }
        }
        m.legs = ready;
    }

    if m.legs
        .iter()
        .any(|l| l.name == manifest::PYTHONNET_RUNTIME_LEG)
    {
        match provision_pythonnet(cache) {
            Ok(p) => m.pythonnet = Some(p),
            Err(e) => m.unusable.push(MissingLeg {
                name: manifest::PYTHONNET_LEG.to_string(),
                reason: format!("pythonnet: {e}"),
            }),
        }
    }

    // The peer tools the scenarios compare with (dotnet-gcdump for the heap
    // snapshots): fetched once, checked, unpacked under the cache.
    if let Err(e) =
        crate::peer_tools::tool_dll(cache, &crate::peer_tools::DOTNET_GCDUMP, &feed, &progress)
    {
        problems.push(format!("{}: {e}", crate::peer_tools::DOTNET_GCDUMP));
    }

    // The NuGet packages test apps reference (the OpenTelemetry .NET SDK of
    // the trace-context scenario): fetched once, checked, unpacked.
    if let Err(e) =
        crate::packages::provision(cache, &crate::packages::OPENTELEMETRY_SDK, &feed, &progress)
    {
        problems.push(format!("the OpenTelemetry .NET SDK's packages: {e}"));
    }

    m.save(&cache.join(manifest::MANIFEST_FILE))?;
    problems.extend(
        m.unusable
            .iter()
            .map(|u| format!("{}: {}", u.name, u.reason)),
    );
    for p in &problems {
        eprintln!("provision: skipped: {p}");
    }
    if strict && !problems.is_empty() {
        return Err(format!("provisioning incomplete (strict): {}", problems.join("; ")).into());
    }
    println!("provision: done in {:.1}s", started.elapsed().as_secs_f64());
    Ok(m)
}

/// One leg: its runtime pack assembled into a `dotnet` root, its reference
/// pack extracted (recorded in `references` by `major.minor`).
fn provision_leg(
    cache: &Path,
    pack: &runtime_pack::LegPack,
    feed: &Feed,
    downloads: &Path,
    progress: &dyn crate::nuget::Progress,
    references: &mut BTreeMap<String, PathBuf>,
    aspnetcore_references: &mut BTreeMap<String, PathBuf>,
) -> Result<Leg> {
    if pack.os == Os::Windows && cfg!(not(target_os = "linux")) {
        return Err("Windows legs run under Wine on Linux hosts only".into());
    }
    let leg = runtime_pack::assemble_root(cache, pack, &|| {
        feed.fetch(&pack.runtime, downloads, progress)
    })?;
    let refs = runtime_pack::extract_references(cache, &pack.reference, &|| {
        feed.fetch(&pack.reference, downloads, progress)
    })?;
    references.insert(leg.major_minor(), refs);
    if let Some(aspnet) = &pack.aspnetcore {
        runtime_pack::add_aspnetcore(&leg, pack, aspnet, &|| {
            feed.fetch(&aspnet.runtime, downloads, progress)
        })?;
        let refs = runtime_pack::extract_references(cache, &aspnet.reference, &|| {
            feed.fetch(&aspnet.reference, downloads, progress)
        })?;
        aspnetcore_references.insert(leg.major_minor(), refs);
    }
    Ok(leg)
}

/// Roslyn from NuGet, run by the [`runtime_pack::COMPILER_LEG`]'s host.
fn roslyn(
    cache: &Path,
    feed: &Feed,
    downloads: &Path,
    progress: &dyn crate::nuget::Progress,
    legs: &[Leg],
    references: &BTreeMap<String, PathBuf>,
    aspnetcore_references: &BTreeMap<String, PathBuf>,
) -> Result<Compiler> {
    let host = legs
        .iter()
        .find(|l| l.name == runtime_pack::COMPILER_LEG)
        .ok_or_else(|| {
            format!(
                "Roslyn runs on the {} leg, which is not available",
                runtime_pack::COMPILER_LEG
            )
        })?;
    let csc = runtime_pack::extract_roslyn(cache, &|| {
        feed.fetch(&runtime_pack::ROSLYN, downloads, progress)
    })?;
    let default = references
        .get(&host.major_minor())
        .cloned()
        .ok_or("no reference assemblies for the compiler's own version")?;
    Ok(Compiler::Csc {
        dotnet: host.host.clone(),
        csc,
        references: default,
        references_by_version: references.clone(),
        aspnetcore_references_by_version: aspnetcore_references.clone(),
    })
}

/// The pythonnet release the pythonnet leg installs (PyPI; pure Python, with
/// `clr_loader` and `cffi`).
const PYTHONNET_VERSION: &str = "3.2.1";

/// A virtual environment with pythonnet in `<cache>/pythonnet-venv`, made
/// once: a rerun only checks that the environment's `python` imports the
/// pinned version.
fn provision_pythonnet(cache: &Path) -> Result<Pythonnet> {
    let venv = cache.join("pythonnet-venv");
    let venv_python = venv.join("bin").join("python");
    let installed = || {
        Command::new(&venv_python)
            .args([
                "-c",
                "import importlib.metadata as m, clr_loader; print(m.version('pythonnet'))",
            ])
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if installed().as_deref() != Some(PYTHONNET_VERSION) {
        println!(
            "provision: pythonnet: creating {} with pythonnet=={PYTHONNET_VERSION}",
            venv.display()
        );
        let status = Command::new(python())
            .args(["-m", "venv", "--clear"])
            .arg(&venv)
            .status()
            .map_err(|e| format!("{} -m venv: {e}", python()))?;
        if !status.success() {
            return Err(format!(
                "{} -m venv failed ({status}); on Debian install python3-venv",
                python()
            )
            .into());
        }
        let status = Command::new(venv.join("bin").join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("pythonnet=={PYTHONNET_VERSION}"))
            .status()
            .map_err(|e| format!("pip: {e}"))?;
        if !status.success() {
            return Err(
                format!("pip install pythonnet=={PYTHONNET_VERSION} failed ({status})").into(),
            );
        }
        if installed().as_deref() != Some(PYTHONNET_VERSION) {
            return Err(format!(
                "pythonnet=={PYTHONNET_VERSION} does not import in {}",
                venv.display()
            )
            .into());
        }
    }
    Ok(Pythonnet {
        python: venv_python,
        version: PYTHONNET_VERSION.to_string(),
    })
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// The Wine prefix provisioning initialises under `cache`.
pub fn wine_prefix(cache: &Path) -> PathBuf {
    cache.join("wineprefix")
}

/// Finds Wine and initialises a prefix under the cache (once).
fn provision_wine(cache: &Path) -> Result<Wine> {
    let loader = crate::wine::find_wine_loader().ok_or("Wine not found (install wine64)")?;
    let prefix = wine_prefix(cache);
    if !prefix.join("system.reg").is_file() {
        println!("provision: initialising Wine prefix {}", prefix.display());
        std::fs::create_dir_all(&prefix)?;
        let log = cache.join("wineboot.log");
        let status = Command::new(&loader)
            .args(["wineboot", "--init"])
            .env("WINEPREFIX", &prefix)
            .env("WINEDEBUG", "-all")
            // No Wine Mono / Gecko: CoreCLR's own host needs neither, and their
            // installers would try to download or prompt.
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Wine's chatter on a prefix's first start (`failed to open
            // ...rundll32.exe: c0000135`, "configuration ... has been
            // updated") goes to a file, shown only if the step fails (a
            // file, not a pipe: the wineserver it starts would hold a pipe
            // open long after wineboot ends).
            .stderr(Stdio::from(std::fs::File::create(&log)?))
            .status()
            .map_err(|e| format!("cannot run {}: {e}", loader.display()))?;
        if !status.success() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("wineboot --init failed ({status}): {}", said.trim()).into());
        }
        let _ = std::fs::remove_file(&log);
        wait_for_wineserver(&loader, &prefix);
        if !prefix.join("system.reg").is_file() {
            return Err(format!("wineboot left no system.reg in {}", prefix.display()).into());
        }
    }
    // Rust's std for Windows imports ProcessPrng from bcryptprimitives.dll,
    // which Wine 8 lacks, so a Rust profiler DLL would fail to load. The
    // project's Wine runner installs a stand-in into a prefix on first use;
    // let it do that for this prefix too.
    let shim = prefix.join("drive_c/windows/system32/bcryptprimitives.dll");
    if !shim.is_file() {
        println!("provision: installing the bcryptprimitives.dll stand-in into the Wine prefix");
        let runner = write_script(cache, "wine-runner.sh", WINE_RUNNER)?;
        let status = Command::new("sh")
            .arg(&runner)
            .args(["cmd", "/c", "exit"])
            .env("CLRPROF_WINEPREFIX", &prefix)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run {}: {e}", runner.display()))?;
        wait_for_wineserver(&loader, &prefix);
        if !shim.is_file() {
            return Err(format!(
                "{} did not install {} ({status})",
                runner.display(),
                shim.display()
            )
            .into());
        }
    }
    Ok(Wine { loader, prefix })
}

/// Waits until the prefix's wineserver has written its state and exited.
fn wait_for_wineserver(loader: &Path, prefix: &Path) {
    let candidates = [
        loader.with_file_name("wineserver"),
        PathBuf::from("wineserver"),
    ];
    for server in candidates {
        let ok = Command::new(&server)
            .arg("-w")
            .env("WINEPREFIX", prefix)
            .stdin(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            return;
        }
    }
}

/// The compiler when Roslyn from NuGet is not available: an installed
/// SDK's, else Mono's `mcs`.
fn find_compiler() -> Option<Compiler> {
    manifest::installed_sdk_compiler(false)
        .or_else(|| manifest::find_on_path("mcs").map(|path| Compiler::Mcs { path }))
}
