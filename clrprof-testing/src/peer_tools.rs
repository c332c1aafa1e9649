//! The .NET diagnostics tools clrprof is measured against, from NuGet:
//! pinned, hash-checked, unpacked once under the cache (`tools/<id>-<version>/`)
//! and run with a leg's `dotnet exec --roll-forward LatestMajor` (they are
//! built for .NET 8 and run on any later runtime), the way a user's
//! `dotnet tool install --tool-path` would lay them out, without needing a
//! .NET SDK.
//!
//! - `dotnet-gcdump` (the heap-snapshot scenarios compare clrprof's
//!   snapshot with its `collect` and `report`; provisioned with the legs);
//! - `dotnet-trace` and `dotnet-counters` (`cargo xtask bench server`).

use crate::nuget::{Feed, Pin, Progress};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// `dotnet-gcdump`, the heap-dump tool of dotnet/diagnostics.
pub const DOTNET_GCDUMP: Pin = Pin {
    id: "dotnet-gcdump",
    version: "10.0.750501",
    sha512:
        "U4OLsZtZakYPU068ImxNSm8Jtg98riK805k52A9J2qlsgjXmdJNzNLiy46jfWAszg4fjMwr8nNsagXk+nH+Ukg==",
};

/// `dotnet-trace`.
pub const DOTNET_TRACE: Pin = Pin {
    id: "dotnet-trace",
    version: "10.0.750501",
    sha512:
        "bHcFw2upDrhkR920Se8V0fgX19kLLA0+Chn/NDWiLfiyCkA4/b6zlPtroBJJPCLjU1GWbyynuwR3qxuFehun2w==",
};

/// `dotnet-counters`.
pub const DOTNET_COUNTERS: Pin = Pin {
    id: "dotnet-counters",
    version: "10.0.750501",
    sha512:
        "J11umV/f3cgabxfJYbPIl+60T3UXPblkNYbeJeIfcgXa2g4eWlzeYH/l15nkDIJF83HGNA4YoHaGUJSi9I9ATQ==",
};

/// Where `pin` is unpacked under `cache`.
pub fn tool_dir(cache: &Path, pin: &Pin) -> PathBuf {
    cache
        .join("tools")
        .join(format!("{}-{}", pin.id, pin.version))
}

/// The tool's `tools/<tfm>/any/<id>.dll`, fetched (checked against its
/// pin) and unpacked on first use.
pub fn tool_dll(cache: &Path, pin: &Pin, feed: &Feed, progress: &dyn Progress) -> Result<PathBuf> {
    let dir = tool_dir(cache, pin);
    if let Some(dll) = find_tool_dll(&dir, pin.id) {
        return Ok(dll);
    }
    let downloads = cache.join("downloads").join("nuget");
    let nupkg = feed.fetch(pin, &downloads, progress)?;
    unpack_tools(&nupkg, &dir)?;
    find_tool_dll(&dir, pin.id)
        .ok_or_else(|| Error::new(format!("{pin}: no tools/<tfm>/any/{}.dll", pin.id)))
}

/// `tools/<tfm>/any/<id>.dll` under `dir`, the newest TFM.
pub fn find_tool_dll(dir: &Path, id: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("tools"))
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("any").join(format!("{id}.dll")))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop()
}

/// Unpacks the `tools/` part of a tool's `.nupkg` into `dir` (whole, or not).
pub fn unpack_tools(nupkg: &Path, dir: &Path) -> Result<()> {
    let tmp = dir.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let file =
        std::fs::File::open(nupkg).map_err(|e| Error::new(format!("{}: {e}", nupkg.display())))?;
    let mut zip =
        zip::ZipArchive::new(file).map_err(|e| Error::new(format!("{}: {e}", nupkg.display())))?;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| Error::new(format!("{}: {e}", nupkg.display())))?;
        let Some(name) = entry.enclosed_name() else {
            continue;
        };
        if !name.starts_with("tools") || entry.is_dir() {
            continue;
        }
        let out = tmp.join(name);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::new(format!("{}: {e}", parent.display())))?;
        }
        let mut file = std::fs::File::create(&out)
            .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
        std::io::copy(&mut entry, &mut file)
            .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    Ok(())
}
