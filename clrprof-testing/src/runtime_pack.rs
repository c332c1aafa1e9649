//! Runtime legs from NuGet's official runtime packs, and the C# compiler
//! and reference assemblies from NuGet too.
//!
//! A leg is a `dotnet` root assembled in `<cache>/dotnet/<leg>/` from the
//! pack `Microsoft.NETCore.App.Runtime.<rid>` of a pinned version:
//!
//! ```text
//! dotnet(.exe)                                 the launcher (src/muxer.c)
//! host/fxr/<version>/libhostfxr.so             from runtimes/<rid>/native/
//! shared/Microsoft.NETCore.App/<version>/      runtimes/<rid>/native/* and
//!                                              runtimes/<rid>/lib/<tfm>/*
//! ```
//!
//! This is the layout of an installed .NET, so the runtime's own host
//! (hostfxr, hostpolicy) resolves the framework from an app's
//! `runtimeconfig.json` exactly as it does on a user's machine, and one
//! compiled test app runs on every leg of its framework version. (The other
//! way, a self-contained publish per app, would need the SDK and a project
//! per app and leg.) NuGet serves no package with the `dotnet` executable,
//! so the root gets clrprof's own launcher, which hands the command line to
//! the pack's hostfxr (see `src/muxer.c`). Packs from 5.0 on carry the
//! framework's `Microsoft.NETCore.App.deps.json`; for older ones (3.1) a
//! minimal one listing the pack's files is written, which hostpolicy needs
//! to resolve a framework.
//!
//! Every package is pinned by version and SHA-512 ([`crate::nuget::Pin`]).

use crate::manifest::{Arch, Emulator, Leg, Os};
use crate::nuget::Pin;
use crate::{content_hash, Error, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One runtime leg provisioned from NuGet: a runtime pack and the reference
/// pack its apps are compiled against.
#[derive(Debug, Clone, Copy)]
pub struct LegPack {
    /// Leg name, e.g. `linux-x64-10.0`.
    pub name: &'static str,
    /// The runtime's OS.
    pub os: Os,
    /// The runtime's architecture.
    pub arch: Arch,
    /// The runtime pack, `Microsoft.NETCore.App.Runtime.<rid>`.
    pub runtime: Pin,
    /// The reference pack, `Microsoft.NETCore.App.Ref`, of the same
    /// `major.minor` (its newest served patch: reference assemblies do not
    /// change within a `major.minor`).
    pub reference: Pin,
    /// ASP.NET Core's shared framework and reference pack, on the legs
    /// that run the web-service scenarios and benchmark.
    pub aspnetcore: Option<AspNetCore>,
}

/// `Microsoft.AspNetCore.App.Runtime.<rid>` and `Microsoft.AspNetCore.App.Ref`
/// of one version: a second shared framework in the leg's `dotnet` root.
#[derive(Debug, Clone, Copy)]
pub struct AspNetCore {
    /// The runtime pack.
    pub runtime: Pin,
    /// The reference pack.
    pub reference: Pin,
}

/// The name of ASP.NET Core's shared framework.
pub const ASPNETCORE_FRAMEWORK: &str = "Microsoft.AspNetCore.App";

impl LegPack {
    /// The runtime identifier, e.g. `linux-x64`.
    pub fn rid(&self) -> String {
        let os = match self.os {
            Os::Linux => "linux",
            Os::Windows => "win",
        };
        format!("{os}-{}", self.arch.rid_part())
    }
}

const fn pin(id: &'static str, version: &'static str, sha512: &'static str) -> Pin {
    Pin {
        id,
        version,
        sha512,
    }
}

const REF_3_1: Pin = pin(
    "Microsoft.NETCore.App.Ref",
    "3.1.0",
    "cTXlQgzxZx5XsAIVw8tcdYhvPpcScA3vG3AQ/ScleqMn32SMBCIQqetoE0X0EqPSjW3S+hw/pRIUli0msjiJ9A==",
);
const REF_8_0: Pin = pin(
    "Microsoft.NETCore.App.Ref",
    "8.0.34",
    "QLps42KPNzKF1BPqXDJmCsUlImQbvXOs4J9ZaKJPAOGaH3Js0MCalnq213Hu93+meiiIu1GnajfDJb9EYOkBZg==",
);
const REF_9_0: Pin = pin(
    "Microsoft.NETCore.App.Ref",
    "9.0.23",
    "+Ry23+CwUQr6X/qIST4CXk5gqyvHInI/MSX1oqWAF0cwHcxiZN8uJqBYwgD3JytVDw4ToAqkV4G3FwXTe55YwA==",
);
const REF_10_0: Pin = pin(
    "Microsoft.NETCore.App.Ref",
    "10.0.15",
    "fS+R/OlE7AEqsnQ5FzHYUAR5dw4l3jF4eXpmk8dCCas0BFRd4LNlpzZ4BYcLoOOY3IM7JuEoF/1gwdgr8rfF8Q==",
);
const REF_11_0: Pin = pin(
    "Microsoft.NETCore.App.Ref",
    "11.0.0",
    "ayOUxbNOZF/+5LIvk+x4a1MVWzezfT21L51sUNjrSPXI9hXyy1RhHGvnzzsFCaY2fcT++B7sXjY2mRtf/GFz9A==",
);

/// The legs provisioned from NuGet: the newest patch of each runtime the
/// public feed served on 2026-11-25 (3.1.3 is the only 3.1 pack it serves).
pub const LEG_PACKS: [LegPack; 8] = [
    LegPack {
        name: "linux-x64-3.1",
        os: Os::Linux,
        arch: Arch::X64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.linux-x64",
            "3.1.3",
            "SX/z6x5RwQU35hHoPUC3Iba1s8ZdJIgawdkPoNDFs7UFy0vSH5zasdb6eHKZ/yojGuJ/rsdzkxTDn+qIwPu8ig==",
        ),
        reference: REF_3_1,
        aspnetcore: None,
    },
    LegPack {
        name: "linux-x64-8.0",
        os: Os::Linux,
        arch: Arch::X64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.linux-x64",
            "8.0.34",
            "fqB1EMzydBPvd+1yklsxA/5o/2TXlOQnjFoy1HMjYTlXT42e/8ej05/O4vHKtULM6NZiM4mj0N7/KCDoFI3CEA==",
        ),
        reference: REF_8_0,
        // The trace-context scenario with the OpenTelemetry .NET SDK runs
        // an ASP.NET Core service on .NET 8 too.
        aspnetcore: Some(AspNetCore {
            runtime: pin(
                "Microsoft.AspNetCore.App.Runtime.linux-x64",
                "8.0.34",
                "XAJi0bPTUoDWbLQ7xhJoQo/t9DAz5TdxmJ5IEvjF22UnMORv095QZ+XWCxgaJz+FcnDmDKUjgvvLJIGmks0vdw==",
            ),
            reference: pin(
                "Microsoft.AspNetCore.App.Ref",
                "8.0.34",
                "U8ra1o/i+Sfb3QF30/f5MKfc7UVymmkhUd67UDxdx2cqZdMrX4mKS7ongx3mbRQmlX1YNnyUaW9IOtje/YTumw==",
            ),
        }),
    },
    LegPack {
        name: "linux-x64-9.0",
        os: Os::Linux,
        arch: Arch::X64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.linux-x64",
            "9.0.23",
            "vXCR5xzrQoJY3+QmjyM/B3w5qJFGQ2DfYZGJ1whveKUCOp1/s9fplAy/9SIEY2TbFz/tctpkSssLzu+NQBEv+Q==",
        ),
        reference: REF_9_0,
        aspnetcore: None,
    },
    LegPack {
        name: "linux-x64-10.0",
        os: Os::Linux,
        arch: Arch::X64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.linux-x64",
            "10.0.15",
            "Ak6y3EEqwNT/ZL5WEAoGbjxju8MisXpnRxYRynRifotaKEadhhWk5/z2KTvNbnRyAvMqrbN21TSnJY4NxZShxQ==",
        ),
        reference: REF_10_0,
        aspnetcore: Some(AspNetCore {
            runtime: pin(
                "Microsoft.AspNetCore.App.Runtime.linux-x64",
                "10.0.15",
                "OY9hawrAFEnh1F0lbKMAcXRATMTPOoMDWwa2S23E0MPptyLgGcBVQeFEh3Xa2B3SMHlBDYpjKJAbokrJXamfow==",
            ),
            reference: pin(
                "Microsoft.AspNetCore.App.Ref",
                "10.0.15",
                "scmS5owAPL7EYn5egcNtAU4AbuMFmOCkpf26W9m2GRgosPd6bL1KurB4jRADbfc0jOeBjuII6oxK3/EnOUBstA==",
            ),
        }),
    },
    LegPack {
        name: "linux-x64-11.0",
        os: Os::Linux,
        arch: Arch::X64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.linux-x64",
            "11.0.0",
            "92vCWKQbiW9T2QgCRTwiHVHpxpv8fDAOiCRUnlO9QkLhd2oWGKJt9zhHN4mbd7Al/WmBwD+tF0Jt8Ux5Ofox7g==",
        ),
        reference: REF_11_0,
        aspnetcore: Some(AspNetCore {
            runtime: pin(
                "Microsoft.AspNetCore.App.Runtime.linux-x64",
                "11.0.0",
                "7G7Rtb4wsazwSr4Q8XOwwfjfSPRw2id2hcKCGu58tuatIXSMVqFbbJqFfmdY4KugZgSKZEzK6q0J/4Lj7kY4FA==",
            ),
            reference: pin(
                "Microsoft.AspNetCore.App.Ref",
                "11.0.0",
                "T9BWMgotaWwAXEEVKvh+5ShetSaGVkGPnb9KTSJn12kOy7fsta1S/l99min5DOeeTdXQnz0M1CwoVwHS1iWBCA==",
            ),
        }),
    },
    LegPack {
        name: "win-x64-8.0",
        os: Os::Windows,
        arch: Arch::X64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.win-x64",
            "8.0.34",
            "2D7qUIN9TJng4jYaOuHj0WersRfDHCH4/iQuzingKe92cCaNRkXorMG6tMWQ0J5LE1EAdYbwJAnclaQ8pZWMbA==",
        ),
        reference: REF_8_0,
        aspnetcore: None,
    },
    LegPack {
        name: "win-x64-10.0",
        os: Os::Windows,
        arch: Arch::X64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.win-x64",
            "10.0.15",
            "MEGAkRGHrAXYA2t/Lo0mDxH+/O5NLqgWTcVh70iOZJTpoOCL/jKfOgDqYoDi3W9WcnviL4DhMl+5lWC8cxttSw==",
        ),
        reference: REF_10_0,
        aspnetcore: None,
    },
    LegPack {
        name: "linux-arm64-10.0",
        os: Os::Linux,
        arch: Arch::Arm64,
        runtime: pin(
            "Microsoft.NETCore.App.Runtime.linux-arm64",
            "10.0.15",
            "uyFmBiC5sVKn7/EIraL/ZL7/4jbEi6FBvfnZ5yh5hkBN4vd+72Dgggfl+wVOSdkCQWKj0Nq/MSRYNYZFTmtgng==",
        ),
        reference: REF_10_0,
        aspnetcore: None,
    },
];

/// Roslyn (`csc.dll` for .NET, under `tasks/netcore/bincore/`), run by the
/// [`COMPILER_LEG`]'s host.
pub const ROSLYN: Pin = pin(
    "Microsoft.Net.Compilers.Toolset",
    "5.9.0",
    "nueMs8iTpdfM4+tbhcqHbPI2DHQ7NMqVx3n1xAecnITF5iB3HtR5H40kfq0DLbI0/QgckG/dw30LeIdojmYa4Q==",
);

/// The leg whose runtime runs Roslyn (its `csc.runtimeconfig.json` asks for
/// .NET 10 or later).
pub const COMPILER_LEG: &str = "linux-x64-10.0";

/// The leg pack named `name`.
pub fn leg_pack(name: &str) -> Option<&'static LegPack> {
    LEG_PACKS.iter().find(|p| p.name == name)
}

/// The launcher's source (see the module docs).
pub const MUXER_SOURCE: &str = include_str!("muxer.c");

/// The C compiler that builds the launcher for `os`/`arch` on this host:
/// `$CLRPROF_CC_<RID>` (e.g. `CLRPROF_CC_LINUX_ARM64`), else `cc` for the
/// host's own, `aarch64-linux-gnu-gcc`, `x86_64-w64-mingw32-gcc`.
pub fn launcher_compiler(os: Os, arch: Arch) -> String {
    let var = format!(
        "CLRPROF_CC_{}_{}",
        match os {
            Os::Linux => "LINUX",
            Os::Windows => "WIN",
        },
        arch.rid_part().to_ascii_uppercase()
    );
    if let Ok(cc) = std::env::var(&var) {
        return cc;
    }
    let native = os.is_native() && arch == Arch::host();
    match (os, arch) {
        _ if native => "cc".to_string(),
        (Os::Linux, Arch::Arm64) => "aarch64-linux-gnu-gcc".to_string(),
        (Os::Linux, Arch::X64) => "x86_64-linux-gnu-gcc".to_string(),
        (Os::Windows, _) => "x86_64-w64-mingw32-gcc".to_string(),
    }
}

/// Builds the launcher into `<root>/dotnet` (`dotnet.exe`).
fn build_launcher(root: &Path, os: Os, arch: Arch, scratch: &Path) -> Result<PathBuf> {
    let cc = launcher_compiler(os, arch);
    let source = scratch.join("muxer.c");
    std::fs::write(&source, MUXER_SOURCE)
        .map_err(|e| Error::new(format!("{}: {e}", source.display())))?;
    let exe = root.join(match os {
        Os::Windows => "dotnet.exe",
        Os::Linux => "dotnet",
    });
    let mut cmd = Command::new(&cc);
    cmd.args(["-O2", "-o"]).arg(&exe).arg(&source);
    match os {
        Os::Windows => {
            cmd.arg("-municode");
        }
        Os::Linux => {
            cmd.arg("-ldl");
        }
    }
    let out = cmd.output().map_err(|e| {
        Error::new(format!(
            "cannot run the C compiler `{cc}` to build the `dotnet` launcher ({e}); \
             install it (`cargo xtask toolchain` / `clrprof provision --toolchains` on Debian)"
        ))
    })?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "`{cc}` failed to build the `dotnet` launcher ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(exe)
}

/// Opens a `.nupkg` (a zip).
fn open_zip(nupkg: &Path) -> Result<zip::ZipArchive<std::fs::File>> {
    let file =
        std::fs::File::open(nupkg).map_err(|e| Error::new(format!("{}: {e}", nupkg.display())))?;
    zip::ZipArchive::new(file)
        .map_err(|e| Error::new(format!("{} is not a valid package: {e}", nupkg.display())))
}

/// Extracts every entry of `zip` whose name starts with `prefix` into
/// `dest`, keeping the rest of the name as a relative path (`dest` plus what
/// `rename` gives for it; `None` skips the entry). Returns the relative
/// paths written. Entries whose names would leave `dest` are refused.
fn extract_prefix(
    zip: &mut zip::ZipArchive<std::fs::File>,
    prefix: &str,
    dest: &Path,
    rename: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| Error::new(format!("reading package entry {i}: {e}")))?;
        let name = entry.name().to_string();
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        if rest.is_empty() || name.ends_with('/') {
            continue;
        }
        if entry.enclosed_name().is_none() || rest.split('/').any(|p| p == "..") {
            return Err(Error::new(format!(
                "package entry {name:?} would be written outside {}",
                dest.display()
            )));
        }
        let Some(relative) = rename(rest) else {
            continue;
        };
        let path = dest.join(&relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::new(format!("{}: {e}", parent.display())))?;
        }
        let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| Error::new(format!("extracting {name}: {e}")))?;
        std::fs::write(&path, &bytes)
            .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
        #[cfg(unix)]
        if entry.unix_mode().is_some_and(|m| m & 0o111 != 0) || is_native_executable(&relative) {
            crate::make_executable(&path)?;
        }
        written.push(relative);
    }
    Ok(written)
}

/// Files of a runtime pack that are programs (packs made on Windows carry
/// no Unix modes).
#[cfg(unix)]
fn is_native_executable(relative: &Path) -> bool {
    relative
        .file_name()
        .is_some_and(|n| n == "createdump" || n == "crossgen")
}

/// A directory is complete when its stamp file holds `stamp`.
fn is_stamped(dir: &Path, stamp: &str) -> bool {
    std::fs::read_to_string(dir.join(".provisioned")).is_ok_and(|s| s == stamp)
}

/// Replaces `dest` by the finished `tmp` and stamps it.
fn commit_dir(tmp: &Path, dest: &Path, stamp: &str) -> Result<()> {
    std::fs::write(tmp.join(".provisioned"), stamp)
        .map_err(|e| Error::new(format!("{}: {e}", tmp.display())))?;
    let _ = std::fs::remove_dir_all(dest);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::new(format!("{}: {e}", parent.display())))?;
    }
    std::fs::rename(tmp, dest).map_err(|e| Error::new(format!("{}: {e}", dest.display())))
}

/// A fresh scratch directory beside `dest`.
fn scratch_for(dest: &Path) -> Result<PathBuf> {
    let tmp = dest.with_extension(format!("partial-{}", crate::unique_suffix()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| Error::new(format!("{}: {e}", tmp.display())))?;
    Ok(tmp)
}

/// The `dotnet` root of `pack` in `<cache>/dotnet/<leg>/`, assembled once
/// from the runtime pack `nupkg` gives (asked only when the root is not
/// there yet; see the module docs); returns the leg without an emulator
/// (the caller adds it).
pub fn assemble_root(
    cache: &Path,
    pack: &LegPack,
    nupkg: &dyn Fn() -> Result<PathBuf>,
) -> Result<Leg> {
    let root = cache.join("dotnet").join(pack.name);
    let version = pack.runtime.version;
    let stamp = format!(
        "{} {} launcher {:016x}\n",
        pack.runtime,
        pack.runtime.sha512,
        content_hash(&[MUXER_SOURCE.as_bytes()])
    );
    let host = root.join(match pack.os {
        Os::Windows => "dotnet.exe",
        Os::Linux => "dotnet",
    });
    if !is_stamped(&root, &stamp) || !host.is_file() {
        let nupkg = nupkg()?;
        println!("provision: {}: assembling {}", pack.name, root.display());
        let tmp = scratch_for(&root)?;
        let result = assemble_into(&tmp, pack, &nupkg);
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        commit_dir(&tmp, &root, &stamp)?;
    }
    Ok(Leg {
        name: pack.name.to_string(),
        os: pack.os,
        arch: pack.arch,
        host,
        emulator: None,
        version: version.to_string(),
        tfm: crate::manifest::tfm_for_version(version),
    })
}

fn assemble_into(root: &Path, pack: &LegPack, nupkg: &Path) -> Result<()> {
    let version = pack.runtime.version;
    let rid = pack.rid();
    let fxr_name = match pack.os {
        Os::Windows => "hostfxr.dll",
        Os::Linux => "libhostfxr.so",
    };
    let framework = root
        .join("shared")
        .join("Microsoft.NETCore.App")
        .join(version);
    let fxr_dir = root.join("host").join("fxr").join(version);
    let mut zip = open_zip(nupkg)?;
    let native = extract_prefix(
        &mut zip,
        &format!("runtimes/{rid}/native/"),
        &framework,
        &|rest| {
            // Static archives are for linking apps, not for running them.
            (!rest.contains('/') && !rest.ends_with(".a")).then(|| PathBuf::from(rest))
        },
    )?;
    let tfm = crate::manifest::tfm_for_version(version);
    let managed = extract_prefix(
        &mut zip,
        &format!("runtimes/{rid}/lib/{tfm}/"),
        &framework,
        &|rest| (!rest.contains('/')).then(|| PathBuf::from(rest)),
    )?;
    if managed.is_empty() {
        return Err(Error::new(format!(
            "{} has no runtimes/{rid}/lib/{tfm}/: not the runtime pack of {rid} {version}",
            pack.runtime
        )));
    }
    let fxr_in_framework = framework.join(fxr_name);
    if !fxr_in_framework.is_file() {
        return Err(Error::new(format!(
            "{} has no runtimes/{rid}/native/{fxr_name}",
            pack.runtime
        )));
    }
    std::fs::create_dir_all(&fxr_dir)
        .map_err(|e| Error::new(format!("{}: {e}", fxr_dir.display())))?;
    std::fs::rename(&fxr_in_framework, fxr_dir.join(fxr_name))
        .map_err(|e| Error::new(format!("{}: {e}", fxr_dir.display())))?;
    let deps = framework.join("Microsoft.NETCore.App.deps.json");
    if !deps.is_file() {
        let files: Vec<PathBuf> = native
            .iter()
            .chain(managed.iter())
            .filter(|p| p.as_os_str() != fxr_name)
            .cloned()
            .collect();
        std::fs::write(&deps, framework_deps_json(pack, &files))
            .map_err(|e| Error::new(format!("{}: {e}", deps.display())))?;
    }
    build_launcher(root, pack.os, pack.arch, root)?;
    let _ = std::fs::remove_file(root.join("muxer.c"));
    Ok(())
}

/// A minimal `Microsoft.NETCore.App.deps.json` for a framework folder holding
/// `files`: every `.dll` as a runtime asset, every other file as a native
/// one. hostpolicy reads it to build the framework's assembly and native
/// search lists (packs older than 5.0 ship none).
pub fn framework_deps_json(pack: &LegPack, files: &[PathBuf]) -> String {
    let version = pack.runtime.version;
    let major_minor = version.split('.').take(2).collect::<Vec<_>>().join(".");
    let rid = pack.rid();
    let target = format!(".NETCoreApp,Version=v{major_minor}");
    let library = format!("{}/{version}", pack.runtime.id);
    let mut runtime = serde_json::Map::new();
    let mut native = serde_json::Map::new();
    let mut names: Vec<String> = files
        .iter()
        .filter_map(|p| p.to_str().map(str::to_string))
        .collect();
    names.sort();
    for name in names {
        if name.ends_with(".dll") {
            runtime.insert(name, serde_json::json!({}));
        } else {
            native.insert(name, serde_json::json!({}));
        }
    }
    let doc = serde_json::json!({
        "runtimeTarget": { "name": format!("{target}/{rid}"), "signature": "" },
        "compilationOptions": {},
        "targets": {
            target.clone(): {},
            format!("{target}/{rid}"): {
                library.clone(): { "runtime": runtime, "native": native }
            }
        },
        "libraries": {
            library: { "type": "package", "serviceable": false, "sha512": "" }
        }
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// The reference assemblies of `reference` in `<cache>/refs/<version>/`
/// (the pack's `ref/<tfm>/*.dll`), extracted once from the package `nupkg`
/// gives.
pub fn extract_references(
    cache: &Path,
    reference: &Pin,
    nupkg: &dyn Fn() -> Result<PathBuf>,
) -> Result<PathBuf> {
    // `refs/<version>` for .NET's own, `refs/<package>/<version>` for others
    // (ASP.NET Core's).
    let dir = if reference.id == "Microsoft.NETCore.App.Ref" {
        cache.join("refs").join(reference.version)
    } else {
        cache
            .join("refs")
            .join(reference.id.to_ascii_lowercase())
            .join(reference.version)
    };
    let stamp = format!("{reference} {}\n", reference.sha512);
    if !is_stamped(&dir, &stamp) {
        let nupkg = nupkg()?;
        let tmp = scratch_for(&dir)?;
        let tfm = crate::manifest::tfm_for_version(reference.version);
        let mut zip = open_zip(&nupkg)?;
        let written = extract_prefix(&mut zip, &format!("ref/{tfm}/"), &tmp, &|rest| {
            (!rest.contains('/') && rest.ends_with(".dll")).then(|| PathBuf::from(rest))
        });
        match written {
            Ok(w) if !w.is_empty() => commit_dir(&tmp, &dir, &stamp)?,
            Ok(_) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(Error::new(format!(
                    "{reference} has no ref/{tfm}/*.dll: not a reference pack"
                )));
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        }
    }
    Ok(dir)
}

/// ASP.NET Core's shared framework in the leg's `dotnet` root,
/// `shared/Microsoft.AspNetCore.App/<version>/` (the pack's
/// `runtimes/<rid>/lib/<tfm>/`, its framework `deps.json` and
/// `runtimeconfig.json` included), added once from the package `nupkg`
/// gives.
pub fn add_aspnetcore(
    leg: &Leg,
    pack: &LegPack,
    aspnet: &AspNetCore,
    nupkg: &dyn Fn() -> Result<PathBuf>,
) -> Result<PathBuf> {
    let root = leg
        .host
        .parent()
        .ok_or_else(|| Error::new(format!("{}: the host has no folder", leg.name)))?;
    let version = aspnet.runtime.version;
    let dir = root.join("shared").join(ASPNETCORE_FRAMEWORK).join(version);
    let stamp = format!("{} {}\n", aspnet.runtime, aspnet.runtime.sha512);
    if !is_stamped(&dir, &stamp) {
        let nupkg = nupkg()?;
        let tmp = scratch_for(&dir)?;
        let tfm = crate::manifest::tfm_for_version(version);
        let mut zip = open_zip(&nupkg)?;
        let written = extract_prefix(
            &mut zip,
            &format!("runtimes/{}/lib/{tfm}/", pack.rid()),
            &tmp,
            &|rest| (!rest.contains('/')).then(|| PathBuf::from(rest)),
        );
        match written {
            Ok(w)
                if w.iter()
                    .any(|p| p.as_os_str() == "Microsoft.AspNetCore.App.deps.json") =>
            {
                commit_dir(&tmp, &dir, &stamp)?
            }
            Ok(_) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(Error::new(format!(
                    "{} has no runtimes/{}/lib/{tfm}/ with the framework's deps.json",
                    aspnet.runtime,
                    pack.rid()
                )));
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        }
    }
    Ok(dir)
}

/// Roslyn's `csc.dll` in `<cache>/roslyn/<version>/`, extracted once from
/// the package `nupkg` gives.
pub fn extract_roslyn(cache: &Path, nupkg: &dyn Fn() -> Result<PathBuf>) -> Result<PathBuf> {
    let dir = cache.join("roslyn").join(ROSLYN.version);
    let stamp = format!("{ROSLYN} {}\n", ROSLYN.sha512);
    if !is_stamped(&dir, &stamp) {
        let nupkg = nupkg()?;
        let tmp = scratch_for(&dir)?;
        let mut zip = open_zip(&nupkg)?;
        if let Err(e) = extract_prefix(&mut zip, "tasks/netcore/bincore/", &tmp, &|rest| {
            Some(PathBuf::from(rest))
        }) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        commit_dir(&tmp, &dir, &stamp)?;
    }
    let csc = dir.join("csc.dll");
    if !csc.is_file() {
        return Err(Error::new(format!(
            "{ROSLYN} has no tasks/netcore/bincore/csc.dll"
        )));
    }
    Ok(csc)
}

/// The emulator of an arm64 leg on an x64 Linux host: `qemu-aarch64` with
/// Debian's arm64 libraries (`/usr/aarch64-linux-gnu`, where
/// `libc6-arm64-cross` and `libstdc++6-arm64-cross` install them).
pub fn arm64_emulator() -> Result<Emulator> {
    let program = crate::manifest::find_on_path("qemu-aarch64").ok_or(
        "qemu-aarch64 not found (Debian package qemu-user; `cargo xtask toolchain` installs it)",
    )?;
    let sysroot = PathBuf::from(
        std::env::var("CLRPROF_ARM64_SYSROOT").unwrap_or_else(|_| "/usr/aarch64-linux-gnu".into()),
    );
    for lib in ["lib/ld-linux-aarch64.so.1", "lib/libstdc++.so.6"] {
        if !sysroot.join(lib).exists() {
            return Err(Error::new(format!(
                "{} not found: the arm64 runtime needs Debian's arm64 libc and libstdc++ \
                 (packages libc6-arm64-cross, libstdc++6-arm64-cross)",
                sysroot.join(lib).display()
            )));
        }
    }
    Ok(Emulator {
        program,
        args: vec!["-L".into(), sysroot.display().to_string()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_leg_pack_names_its_own_runtime_and_reference() {
        for p in &LEG_PACKS {
            assert_eq!(
                p.runtime.id,
                format!("Microsoft.NETCore.App.Runtime.{}", p.rid()),
                "{}",
                p.name
            );
            let major_minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
            assert!(
                p.name.ends_with(&major_minor(p.runtime.version)),
                "{}",
                p.name
            );
            assert_eq!(
                major_minor(p.reference.version),
                major_minor(p.runtime.version),
                "{}",
                p.name
            );
            assert!(p.name.starts_with(&p.rid()), "{}", p.name);
            // A SHA-512 in base64 is 88 characters.
            assert_eq!(p.runtime.sha512.len(), 88, "{}", p.name);
        }
        for leg in crate::manifest::STANDARD_LEGS {
            assert!(leg_pack(leg).is_some(), "standard leg {leg} has no pack");
        }
        assert!(leg_pack(crate::manifest::ARM64_LEG).is_some());
        assert!(leg_pack(COMPILER_LEG).is_some());
    }

    #[test]
    fn deps_json_lists_managed_and_native_files() {
        let pack = leg_pack("linux-x64-3.1").unwrap();
        let text = framework_deps_json(
            pack,
            &[
                PathBuf::from("System.Runtime.dll"),
                PathBuf::from("libcoreclr.so"),
            ],
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["runtimeTarget"]["name"],
            ".NETCoreApp,Version=v3.1/linux-x64"
        );
        let lib = &v["targets"][".NETCoreApp,Version=v3.1/linux-x64"]
            ["Microsoft.NETCore.App.Runtime.linux-x64/3.1.3"];
        assert!(lib["runtime"]["System.Runtime.dll"].is_object(), "{text}");
        assert!(lib["native"]["libcoreclr.so"].is_object(), "{text}");
        assert!(lib["runtime"]["libcoreclr.so"].is_null(), "{text}");
    }
}
