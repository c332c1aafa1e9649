//! Test CLR profilers against real runtimes.
//!
//! This crate is the project's test rig, usable by any profiler built with
//! clrprof:
//!
//! * [`manifest`]: discover runtime *legs* (a CoreCLR build on an OS and
//!   architecture) from the manifest `cargo xtask provision` writes,
//!   `$CLRPROF_RUNTIME_MANIFEST`, or an installed `dotnet`;
//! * [`provision`], [`runtime_pack`], [`nuget`]: the legs from NuGet's
//!   official runtime packs, pinned and checked by SHA-512, and Roslyn;
//! * [`csharp`]: compile C# test apps and write their `runtimeconfig.json`;
//!   [`packages`]: the NuGet library packages an app references;
//! * [`build`]: build a profiler `cdylib` for a leg's target;
//! * [`run`]: run an app on a leg, with or without a profiler, under a timeout,
//!   and collect its exit status, output and the profiler's JSON Lines records;
//! * [`harness`]: a test runner for `harness = false` test targets that runs
//!   scenario × leg and reports `ok` / `FAILED: reason` / `skipped: reason`;
//! * [`clsid`], [`wine`]: CLSID markers in profiler binaries, Wine paths;
//! * [`fixtures`]: a deliberately broken C profiler, to prove failures are reported.

#![deny(missing_docs)]

pub mod background;
pub mod build;
pub mod callbacks;
pub mod clsid;
pub mod csharp;
pub mod fixtures;
pub mod harness;
pub mod http;
pub mod load;
pub mod manifest;
pub mod nuget;
pub mod packages;
pub mod peer_tools;
pub mod profiler_env;
pub mod progress;
pub mod provision;
pub mod run;
pub mod runtime_pack;
pub mod smoke;
pub mod sxs;
pub mod wine;

pub use manifest::{discover, Leg, Manifest, Os, Runtimes};

use std::fmt;

/// An error of the test rig: a readable sentence saying what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// Makes an error from a message.
    pub fn new(message: impl Into<String>) -> Error {
        Error(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Error {
        Error(s.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error(e.to_string())
    }
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// A suffix unique to this call within the machine (process id and a
/// per-process counter), for temporary files renamed into place: concurrent
/// builders (threads or processes) never write the same temporary file.
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Adds the execute bits (`0o755`) to a file's mode: scripts written and
/// native programs unpacked from runtime packs. Nothing to do on Windows.
#[cfg(unix)]
pub(crate) fn make_executable(path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .permissions();
    perms.set_mode(perms.mode() | 0o755);
    std::fs::set_permissions(path, perms)?;
    Ok(())
}

#[cfg(not(unix))]
pub(crate) fn make_executable(_path: &std::path::Path) -> Result<()> {
    Ok(())
}

/// A stable 64-bit FNV-1a hash, used to name cache entries by content.
pub fn content_hash(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate parts so ("ab","c") and ("a","bc") differ.
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    #[test]
    fn content_hash_is_stable_and_part_sensitive() {
        // FNV-1a of the empty input is the offset basis; fixed so cache names never drift.
        assert_eq!(super::content_hash(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(
            super::content_hash(&[b"ab", b"c"]),
            super::content_hash(&[b"a", b"bc"])
        );
        assert_eq!(super::content_hash(&[b"x"]), super::content_hash(&[b"x"]));
    }
}
