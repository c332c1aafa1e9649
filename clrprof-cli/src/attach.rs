//! `clrprof attach`: load a profiler into a running .NET process.
//!
//! Uses `clrprof::attach::trigger::attach_profiler` (the diagnostics IPC
//! `AttachProfiler` command). The CLSID comes from `--clsid` or, when
//! omitted, from the library's CLSID marker. When `CLRPROF_OUTPUT` is set
//! in this tool's environment and the client data names no `output`, the
//! tool appends `output=<absolute CLRPROF_OUTPUT>` to the client data: the
//! target's environment cannot be changed after it started, so this is how
//! an attached profiler learns where to write.

use clrprof::attach::trigger::{attach_profiler, parse_clsid, AttachError};
use clrprof::attach::ClientData;
use clrprof_testing::clsid::{normalize_clsid, single_clsid};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// The client data to send: `given`, plus `output=PATH` from `output_env`
/// when `given` has no `output` key.
pub fn client_data(given: Option<&str>, output_env: Option<&Path>) -> String {
    let mut data = given.unwrap_or("").to_string();
    if let Some(out) = output_env {
        if ClientData::new(data.as_bytes()).get("output").is_none() {
            let out = clrprof_testing::manifest::absolute(out);
            if !data.is_empty() && !data.ends_with(';') {
                data.push(';');
            }
            data.push_str(&format!("output={}", out.display()));
        }
    }
    data
}

/// Runs the attach; prints one line and returns a failure code on error.
pub fn run(
    pid: u32,
    profiler: &Path,
    clsid: Option<&str>,
    given_data: Option<&str>,
    timeout_ms: u64,
) -> ExitCode {
    match attach(pid, profiler, clsid, given_data, timeout_ms) {
        Ok(clsid) => {
            eprintln!("clrprof: attached {clsid} to process {pid}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("clrprof: attach failed: {message}");
            ExitCode::from(1)
        }
    }
}

pub(crate) fn attach(
    pid: u32,
    profiler: &Path,
    clsid: Option<&str>,
    given_data: Option<&str>,
    timeout_ms: u64,
) -> Result<String, String> {
    let profiler = clrprof_testing::manifest::absolute(profiler);
    if !profiler.is_file() {
        return Err(format!("profiler {} not found", profiler.display()));
    }
    let clsid = match clsid {
        Some(c) => normalize_clsid(c),
        None => single_clsid(&profiler),
    }
    .map_err(|e| e.to_string())?;
    let guid = parse_clsid(&clsid).map_err(|e| e.to_string())?;
    let output = std::env::var_os("CLRPROF_OUTPUT").filter(|o| !o.is_empty());
    let data = client_data(given_data, output.as_deref().map(Path::new));
    let path = profiler
        .to_str()
        .ok_or_else(|| format!("profiler path {} is not UTF-8", profiler.display()))?;
    attach_profiler(
        pid,
        guid,
        path,
        data.as_bytes(),
        Duration::from_millis(timeout_ms),
    )
    .map_err(|e: AttachError| e.to_string())?;
    Ok(clsid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_added_unless_given() {
        assert_eq!(client_data(None, None), "");
        assert_eq!(
            client_data(Some("detach_after_ms=5"), Some(Path::new("/o.jsonl"))),
            "detach_after_ms=5;output=/o.jsonl"
        );
        assert_eq!(
            client_data(Some("output=/mine"), Some(Path::new("/o.jsonl"))),
            "output=/mine"
        );
        assert_eq!(client_data(None, Some(Path::new("/o"))), "output=/o");
    }
}
