//! Provisioning's answer to a runtime that does not start: on every leg
//! (natively, under Wine, under qemu), a copy of the leg's `dotnet` root
//! whose runtime library is broken is started the way provisioning starts
//! each leg, and must be refused with an error that names the leg, says
//! that its runtime does not start (and under what), while the leg itself
//! still starts.

use clrprof_testing::harness::{Case, CaseResult, Scenario};
use clrprof_testing::manifest::{Leg, Os, ARM64_LEG};
use std::path::Path;

/// The runtime library's file name in a framework folder.
fn coreclr(os: Os) -> &'static str {
    match os {
        Os::Windows => "coreclr.dll",
        Os::Linux => "libcoreclr.so",
    }
}

/// Copies `from` into `to`, linking every file but `broken`, which is
/// written as garbage.
fn copy_root(from: &Path, to: &Path, broken: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_root(&src, &dst, broken)?;
        } else if entry.file_name() == broken {
            std::fs::write(&dst, b"not a shared library")?;
        } else if entry.file_name() == "dotnet" || entry.file_name() == "dotnet.exe" {
            // The launcher finds its root from its own path: a copy, not a link.
            std::fs::copy(&src, &dst)?;
        } else {
            #[cfg(unix)]
            std::os::unix::fs::symlink(&src, &dst)?;
            #[cfg(not(unix))]
            std::fs::copy(&src, &dst).map(|_| ())?;
        }
    }
    Ok(())
}

fn broken_runtime_is_named(case: &Case<'_>) -> CaseResult {
    let leg = case.leg();
    let compiler = clrprof_testing::discover()
        .compiler()
        .ok_or("no C# compiler")?;
    let wine = clrprof_testing::discover().wine().cloned();
    // The leg itself starts.
    clrprof_testing::smoke::check_starts(leg, wine.as_ref(), &compiler, case.cache_dir())
        .map_err(|e| format!("the leg itself: {e}"))?;

    let root = leg.host.parent().ok_or("the host has no folder")?;
    let copy = case.cache_dir().join("broken-roots").join(&leg.name);
    let _ = std::fs::remove_dir_all(&copy);
    copy_root(root, &copy, coreclr(leg.os)).map_err(|e| format!("copy {}: {e}", root.display()))?;
    let broken = Leg {
        host: copy.join(leg.host.file_name().ok_or("no host file name")?),
        ..leg.clone()
    };
    let e =
        clrprof_testing::smoke::check_starts(&broken, wine.as_ref(), &compiler, case.cache_dir())
            .err()
            .ok_or("a runtime whose library is garbage started")?
            .to_string();
    let under = if leg.is_wine() {
        " under Wine"
    } else if leg.is_emulated() {
        " under qemu"
    } else {
        ""
    };
    let want = format!(
        "the {} runtime ({}) does not start{under}",
        leg.name, leg.version
    );
    if !e.starts_with(&want) {
        return Err(format!("expected an error starting {want:?}, got {e:?}").into());
    }
    println!("    refused: {}", e.lines().next().unwrap_or(""));
    let _ = std::fs::remove_dir_all(&copy);
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "provisioning: a runtime that does not start is refused, naming its leg",
        broken_runtime_is_named,
    )
    .also_on(&[ARM64_LEG])]
}
