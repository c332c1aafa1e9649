//! NuGet library packages a test app references (the OpenTelemetry .NET
//! SDK), without a .NET SDK or a `dotnet restore`: each package is pinned by
//! version and SHA-512 ([`Pin`]), fetched once from the feed
//! ([`crate::nuget`]), unpacked under `<cache>/packages/<id>/<version>/`, and
//! its `lib/<tfm>/` assemblies are what the app is compiled against and
//! deployed with.
//!
//! A deployed app gets, next to its assembly, the packages' assemblies and a
//! `<app>.deps.json` listing each of them with its assembly and file
//! version (read from the file by the runtime's own reader, see
//! [`ASSEMBLY_VERSIONS_SOURCE`]), as `dotnet publish` writes it: the host
//! then resolves an assembly that is in the app and in the shared framework
//! by version, so a package newer than the framework's copy wins (without a
//! `deps.json` the framework's copy always wins, and without the versions
//! the framework's wins too: both seen on .NET 8 with
//! `System.Diagnostics.DiagnosticSource` 10.0.0).
//!
//! The closure of each package set is written out here by hand (NuGet's
//! resolution is not repeated): the packages of [`OPENTELEMETRY_SDK`] need
//! nothing else on .NET 8 and later but the shared frameworks
//! (`Microsoft.Extensions.*` are ASP.NET Core's) and, before .NET 10,
//! `System.Diagnostics.DiagnosticSource` 10.0.0. A package the framework
//! carries from some version on ([`LibraryPackage::framework_from`]) is left
//! out on those legs, as the SDK's package pruning does.

use crate::csharp::CompileOptions;
use crate::manifest::{Compiler, Leg};
use crate::nuget::{Feed, Pin, Progress};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// A library package an app references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibraryPackage {
    /// The package, pinned.
    pub pin: Pin,
    /// The runtime major version from which the shared framework carries
    /// this package's assemblies (at this version or newer): the package is
    /// left out there.
    pub framework_from: Option<u32>,
}

const fn package(id: &'static str, version: &'static str, sha512: &'static str) -> LibraryPackage {
    LibraryPackage {
        pin: Pin {
            id,
            version,
            sha512,
        },
        framework_from: None,
    }
}

/// The OpenTelemetry .NET SDK as an ASP.NET Core service references it:
/// `OpenTelemetry.Extensions.Hosting`, `OpenTelemetry.Instrumentation.AspNetCore`
/// and `OpenTelemetry.Exporter.OpenTelemetryProtocol` (1.20.x, the newest
/// on 2026-12-01) with their closure.
pub const OPENTELEMETRY_SDK: [LibraryPackage; 7] = [
    package(
        "OpenTelemetry",
        "1.20.1",
        "LaiJlR31Wjnw0mgRIung0EfybYXZRFVi5L62QUfNiCmYYO4+vVy2JmkwL4n4+Dcbk+g+nTqnA42fz8ES56onKQ==",
    ),
    package(
        "OpenTelemetry.Api",
        "1.20.1",
        "NbR3ikdWKYFYxLPHqnAeSAV/zrwhT7TM3P9d30mHKKGY6TFkzZUZQeWMvi1IbbCl/h3Ot9KuK3440dx5JXKdRg==",
    ),
    package(
        "OpenTelemetry.Api.ProviderBuilderExtensions",
        "1.20.1",
        "g6Sj6h+yi8z3ATnhAM4nbnFqXmJmt3edKm8il5P7jA45T+/JDOB3gwP6hlimAntQp8K8ErFCBnzbcNnEVBB1fQ==",
    ),
    package(
        "OpenTelemetry.Extensions.Hosting",
        "1.20.1",
        "AxmhcPtiMV9ByoYVNmKXCkCf7NRdWyyCzuOO8ToKCIpWa3VYM2JERsJyOm9drFN49sdW0sIEGKKznsvKjS8L4w==",
    ),
    package(
        "OpenTelemetry.Instrumentation.AspNetCore",
        "1.20.2",
        "c62foTRBt0X5iksMMuELuNc4ip9wZfFOZLig0n2XhnmX7YSwF9S76AJdR6K5TvJ8YEEZiJO6AP5kuqwhpaSfkw==",
    ),
    package(
        "OpenTelemetry.Exporter.OpenTelemetryProtocol",
        "1.20.1",
        "Bl9OT0eCh6lAY0mCe6WCyfNu+3twcc8vHZVDeEa1Uk/aekiZV5Bo9v51btXNESO5lVl+SbXMnUeb1iRnGvaghA==",
    ),
    LibraryPackage {
        framework_from: Some(10),
        ..package(
            "System.Diagnostics.DiagnosticSource",
            "10.0.0",
            "dfZpoOq/ZMvhES22AH4FHC94wmtRHVfysnDylX0MjMmgDQKDESe8hUVlFnY/EEPmQSYNXQOmhgLTqRMKsH/2Bg==",
        )
    },
];

/// The packages of `set` that `leg` needs (those its framework does not carry).
pub fn for_leg<'a>(set: &'a [LibraryPackage], leg: &Leg) -> Vec<&'a LibraryPackage> {
    set.iter()
        .filter(|p| p.framework_from.is_none_or(|from| leg.major() < from))
        .collect()
}

/// Where `pin` is unpacked under `cache`.
pub fn package_dir(cache: &Path, pin: &Pin) -> PathBuf {
    cache
        .join("packages")
        .join(pin.id.to_ascii_lowercase())
        .join(pin.version.to_ascii_lowercase())
}

/// The package's `lib/` folder unpacked under `cache` (fetched from `feed`
/// and checked against its pin on first use): its directory.
pub fn unpack(cache: &Path, pin: &Pin, feed: &Feed, progress: &dyn Progress) -> Result<PathBuf> {
    let dir = package_dir(cache, pin);
    let stamp = format!("{pin} {}\n", pin.sha512);
    if std::fs::read_to_string(dir.join(".provisioned")).is_ok_and(|s| s == stamp) {
        return Ok(dir);
    }
    let nupkg = feed.fetch(pin, &cache.join("downloads").join("nuget"), progress)?;
    let tmp = dir.with_extension(format!("partial-{}", crate::unique_suffix()));
    let _ = std::fs::remove_dir_all(&tmp);
    let io = |p: &Path, e: std::io::Error| Error::new(format!("{}: {e}", p.display()));
    let file = std::fs::File::open(&nupkg).map_err(|e| io(&nupkg, e))?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| Error::new(format!("{} is not a valid package: {e}", nupkg.display())))?;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| Error::new(format!("{}: entry {i}: {e}", nupkg.display())))?;
        let Some(name) = entry.enclosed_name() else {
            continue;
        };
        if !name.starts_with("lib") || entry.is_dir() {
            continue;
        }
        let out = tmp.join(name);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        let mut f = std::fs::File::create(&out).map_err(|e| io(&out, e))?;
        std::io::copy(&mut entry, &mut f).map_err(|e| io(&out, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    std::fs::write(tmp.join(".provisioned"), stamp).map_err(|e| io(&tmp, e))?;
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    }
    std::fs::rename(&tmp, &dir).map_err(|e| io(&dir, e))?;
    Ok(dir)
}

/// Fetches and unpacks every package of `set` (provisioning).
pub fn provision(
    cache: &Path,
    set: &[LibraryPackage],
    feed: &Feed,
    progress: &dyn Progress,
) -> Result<()> {
    for p in set {
        unpack(cache, &p.pin, feed, progress)?;
    }
    Ok(())
}

/// `(major, minor)` of a `lib/` folder's target framework that runs on
/// .NET (Core): `net8.0`, `netcoreapp3.1`; `netstandard2.x` as (0, x).
fn lib_tfm_version(tfm: &str) -> Option<(u32, u32)> {
    let parse = |v: &str| {
        let (a, b) = v.split_once('.')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    if let Some(v) = tfm.strip_prefix("netstandard") {
        let (major, minor): (u32, u32) = parse(v)?;
        return (major == 2).then_some((0, minor));
    }
    let v = tfm
        .strip_prefix("netcoreapp")
        .or_else(|| tfm.strip_prefix("net"))?;
    let (major, minor) = parse(v)?;
    // `net462` and the like are .NET Framework (no dot).
    (major >= 3).then_some((major, minor))
}

/// The `lib/<tfm>/` folder of an unpacked package that fits `leg` best:
/// the newest .NET target not newer than the leg's, else .NET Standard 2.x.
pub fn lib_folder(dir: &Path, leg: &Leg) -> Result<PathBuf> {
    let want = {
        let mm = leg.major_minor();
        lib_tfm_version(&format!("net{mm}")).unwrap_or((leg.major(), 0))
    };
    let lib = dir.join("lib");
    let mut best: Option<((u32, u32), PathBuf)> = None;
    for entry in std::fs::read_dir(&lib)
        .map_err(|e| Error::new(format!("{}: {e}", lib.display())))?
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(v) = lib_tfm_version(&name) else {
            continue;
        };
        if v > want {
            continue;
        }
        if best.as_ref().is_none_or(|(b, _)| v > *b) {
            best = Some((v, entry.path()));
        }
    }
    best.map(|(_, p)| p).ok_or_else(|| {
        Error::new(format!(
            "{} has no lib/ folder for .NET {} (nor .NET Standard 2.x)",
            dir.display(),
            leg.major_minor()
        ))
    })
}

/// One assembly of a package, for a leg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageAssembly {
    /// The package.
    pub pin: Pin,
    /// The assembly's path inside the package, e.g. `lib/net8.0/OpenTelemetry.dll`.
    pub relative: String,
    /// The assembly in the unpacked package.
    pub path: PathBuf,
}

/// The assemblies of `packages` for `leg` (unpacked under `cache`, fetched
/// first when missing).
pub fn assemblies(
    cache: &Path,
    packages: &[&LibraryPackage],
    leg: &Leg,
    feed: &Feed,
    progress: &dyn Progress,
) -> Result<Vec<PackageAssembly>> {
    let mut out = Vec::new();
    for p in packages {
        let dir = unpack(cache, &p.pin, feed, progress)?;
        let folder = lib_folder(&dir, leg)?;
        let tfm = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut dlls: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map_err(|e| Error::new(format!("{}: {e}", folder.display())))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "dll"))
            .collect();
        dlls.sort();
        for path in dlls {
            let file = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(PackageAssembly {
                pin: p.pin,
                relative: format!("lib/{tfm}/{file}"),
                path,
            });
        }
    }
    Ok(out)
}

/// A C# program printing, for each file argument, its assembly version and
/// file version (`<file>\t<assembly version>\t<file version>`), read by
/// the runtime's own metadata reader; run by the app's leg.
pub const ASSEMBLY_VERSIONS_SOURCE: &str = r#"// Prints each argument's assembly and file version (clrprof-testing packages).
public static class AssemblyVersions
{
    public static int Main(string[] args)
    {
        foreach (string path in args)
        {
            var name = System.Reflection.AssemblyName.GetAssemblyName(path);
            var file = System.Diagnostics.FileVersionInfo.GetVersionInfo(path);
            System.Console.WriteLine(path + "\t" + name.Version + "\t" + file.FileVersion);
        }
        return 0;
    }
}
"#;

/// `(assembly version, file version)` of each of `files`, in order.
fn versions(
    compiler: &Compiler,
    cache: &Path,
    leg: &Leg,
    files: &[PathBuf],
) -> Result<Vec<(String, String)>> {
    let Compiler::Csc { .. } = compiler else {
        return Err(Error::new(
            "apps with NuGet packages are compiled by Roslyn, not mcs",
        ));
    };
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let dir = cache.join("packages");
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let source = dir.join("AssemblyVersions.cs");
    if std::fs::read_to_string(&source).ok().as_deref() != Some(ASSEMBLY_VERSIONS_SOURCE) {
        std::fs::write(&source, ASSEMBLY_VERSIONS_SOURCE)
            .map_err(|e| Error::new(format!("{}: {e}", source.display())))?;
    }
    // Compiled for the leg, and run by it.
    let compiled =
        crate::csharp::compile(compiler, &source, cache, CompileOptions::default(), leg)?;
    let exe = compiled.for_leg(leg)?;
    let out = leg
        .host_command()
        .arg(&exe)
        .args(files)
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .output()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", leg.host.display())))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "reading assembly versions failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut found = Vec::new();
    for (line, file) in text.lines().zip(files) {
        let mut f = line.split('\t');
        let (path, asm, fv) = (f.next(), f.next(), f.next());
        if path != Some(&*file.display().to_string()) {
            return Err(Error::new(format!(
                "assembly versions: {line:?} is not about {}",
                file.display()
            )));
        }
        found.push((
            asm.unwrap_or_default().to_string(),
            fv.unwrap_or_default().to_string(),
        ));
    }
    if found.len() != files.len() {
        return Err(Error::new(format!(
            "assembly versions: {} lines for {} files: {text}",
            found.len(),
            files.len()
        )));
    }
    Ok(found)
}

/// The `<app>.deps.json` of an app `name` on `leg` with `assemblies` and
/// their `(assembly version, file version)`s.
pub fn deps_json(
    name: &str,
    leg: &Leg,
    assemblies: &[PackageAssembly],
    versions: &[(String, String)],
) -> String {
    let target = format!(".NETCoreApp,Version=v{}", leg.major_minor());
    let app = format!("{name}/1.0.0");
    let mut targets = serde_json::Map::new();
    let mut libraries = serde_json::Map::new();
    let mut dependencies = serde_json::Map::new();
    for (a, (asm, file)) in assemblies.iter().zip(versions) {
        let library = format!("{}/{}", a.pin.id, a.pin.version);
        dependencies.insert(a.pin.id.to_string(), a.pin.version.into());
        let entry = targets
            .entry(library.clone())
            .or_insert_with(|| serde_json::json!({ "runtime": {} }));
        entry["runtime"][&a.relative] =
            serde_json::json!({ "assemblyVersion": asm, "fileVersion": file });
        libraries.insert(
            library,
            serde_json::json!({
                "type": "package",
                "serviceable": true,
                "sha512": format!("sha512-{}", a.pin.sha512),
                "path": format!("{}/{}", a.pin.id.to_ascii_lowercase(), a.pin.version.to_ascii_lowercase()),
            }),
        );
    }
    targets.insert(
        app.clone(),
        serde_json::json!({
            "dependencies": dependencies,
            "runtime": { format!("{name}.dll"): {} }
        }),
    );
    libraries.insert(
        app,
        serde_json::json!({ "type": "project", "serviceable": false, "sha512": "" }),
    );
    let doc = serde_json::json!({
        "runtimeTarget": { "name": target, "signature": "" },
        "compilationOptions": {},
        "targets": { target: targets },
        "libraries": libraries,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// Puts `assemblies` next to the app `app_dll` (prepared for `leg`) with
/// the app's `deps.json` (see the module docs). Idempotent.
pub fn deploy(
    compiler: &Compiler,
    cache: &Path,
    leg: &Leg,
    app_dll: &Path,
    assemblies: &[PackageAssembly],
) -> Result<()> {
    let dir = app_dll
        .parent()
        .ok_or_else(|| Error::new(format!("{}: no folder", app_dll.display())))?;
    let name = app_dll
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .ok_or_else(|| Error::new(format!("{}: no name", app_dll.display())))?;
    let deps = dir.join(format!("{name}.deps.json"));
    let files: Vec<PathBuf> = assemblies.iter().map(|a| a.path.clone()).collect();
    let versions = versions(compiler, cache, leg, &files)?;
    let text = deps_json(&name, leg, assemblies, &versions);
    for a in assemblies {
        let file = a.path.file_name().unwrap_or_default();
        let to = dir.join(file);
        if std::fs::metadata(&to).map(|m| m.len()).ok()
            != std::fs::metadata(&a.path).map(|m| m.len()).ok()
        {
            std::fs::copy(&a.path, &to)
                .map_err(|e| Error::new(format!("{}: {e}", to.display())))?;
        }
    }
    if std::fs::read_to_string(&deps).ok().as_deref() != Some(&text) {
        std::fs::write(&deps, text).map_err(|e| Error::new(format!("{}: {e}", deps.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_frameworks_order() {
        assert_eq!(lib_tfm_version("net8.0"), Some((8, 0)));
        assert_eq!(lib_tfm_version("net10.0"), Some((10, 0)));
        assert_eq!(lib_tfm_version("netcoreapp3.1"), Some((3, 1)));
        assert_eq!(lib_tfm_version("netstandard2.1"), Some((0, 1)));
        assert_eq!(lib_tfm_version("net462"), None);
        assert_eq!(lib_tfm_version("netstandard1.3"), None);
        assert!(lib_tfm_version("net10.0") > lib_tfm_version("net9.0"));
    }

    #[test]
    fn every_pin_is_a_sha512() {
        for p in &OPENTELEMETRY_SDK {
            assert_eq!(p.pin.sha512.len(), 88, "{}", p.pin);
        }
    }
}
