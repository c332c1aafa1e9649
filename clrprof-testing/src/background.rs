//! Apps that keep running while the test does something to them (attach a
//! profiler, send diagnostics commands): start, learn the pid, finish later.
//!
//! [`spawn_app`] starts an app on a leg the way [`crate::run::run_app`] does
//! (same environment rules, Wine for Windows legs, output captured into
//! files, own process group) but returns at once; [`Background::finish`]
//! waits for the exit under a timeout and returns the same
//! [`Outcome`], with the records of
//! `<work_dir>/records.jsonl` (where tests point attached profilers).

use crate::manifest::{Leg, Wine};
use crate::run::{Exit, Outcome, RunSpec};
use crate::wine::strip_cr;
use crate::{Error, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running app.
pub struct Background {
    child: Option<Child>,
    leg: Leg,
    work_dir: PathBuf,
    started: Instant,
    profiled: bool,
}

/// Starts `spec` on `leg` without waiting. `wine` is required for Windows legs.
pub fn spawn_app(leg: &Leg, wine: Option<&Wine>, spec: &RunSpec) -> Result<Background> {
    let (mut cmd, _records) = crate::run::app_command(leg, wine, spec)?;
    let open = |p: &Path| {
        std::fs::File::create(p).map_err(|e| Error::new(format!("{}: {e}", p.display())))
    };
    cmd.stdin(Stdio::null())
        .stdout(open(&spec.work_dir.join("stdout.txt"))?)
        .stderr(open(&spec.work_dir.join("stderr.txt"))?);
    crate::run::as_from_a_terminal(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| Error::new(format!("cannot start {:?}: {e}", cmd.get_program())))?;
    Ok(Background {
        child: Some(child),
        leg: leg.clone(),
        work_dir: spec.work_dir.clone(),
        started: Instant::now(),
        profiled: spec.profiler.is_some(),
    })
}

/// Waits until `path` exists and returns its contents (trimmed), polling
/// every 20 ms; fails after `timeout`.
pub fn wait_for_file(path: &Path, timeout: Duration) -> Result<String> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Ok(text.trim().to_string());
        }
        if start.elapsed() > timeout {
            return Err(Error::new(format!(
                "{} did not appear within {}s",
                path.display(),
                timeout.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Parses a JSON Lines file: (records, invalid lines). A missing file is empty.
pub fn read_records(path: &Path) -> (Vec<Value>, Vec<String>) {
    let (mut records, mut bad) = (Vec::new(), Vec::new());
    if let Ok(text) = std::fs::read_to_string(path) {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(v) => records.push(v),
                Err(e) => bad.push(format!("line {}: {e}: {line:?}", i + 1)),
            }
        }
    }
    (records, bad)
}

impl Background {
    /// The OS process id of what was started (the host, or Wine's loader on
    /// Windows legs — not the Windows process id).
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The records file (`<work_dir>/records.jsonl`).
    pub fn records_path(&self) -> PathBuf {
        self.work_dir.join("records.jsonl")
    }

    /// The records written so far.
    pub fn records(&self) -> Vec<Value> {
        read_records(&self.records_path()).0
    }

    /// `true` while the process runs.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Waits up to `timeout` for the exit (then kills the process group and
    /// reports [`Exit::Hung`]) and collects the outcome.
    pub fn finish(mut self, timeout: Duration) -> Result<Outcome> {
        let mut child = self
            .child
            .take()
            .ok_or_else(|| Error::new("background app already finished"))?;
        let wait_start = Instant::now();
        let exit = loop {
            match child.try_wait() {
                Ok(Some(status)) => break exit_of(status),
                Ok(None) => {}
                Err(e) => return Err(Error::new(format!("waiting for the app: {e}"))),
            }
            if wait_start.elapsed() >= timeout {
                kill_group(&mut child);
                let _ = child.wait();
                break Exit::Hung(timeout);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let read = |name: &str| {
            String::from_utf8_lossy(&std::fs::read(self.work_dir.join(name)).unwrap_or_default())
                .into_owned()
        };
        let (stdout, stderr) = (read("stdout.txt"), read("stderr.txt"));
        let (stdout, stderr) = if self.leg.is_wine() {
            (strip_cr(&stdout), strip_cr(&stderr))
        } else {
            (stdout, stderr)
        };
        let (records, bad_records) = read_records(&self.records_path());
        Ok(Outcome {
            leg: self.leg.name.clone(),
            exit,
            stdout,
            stderr,
            profiled: self.profiled,
            records,
            bad_records,
            duration: self.started.elapsed(),
            max_rss_kib: None,
        })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_group(&mut c);
            let _ = c.wait();
        }
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return Exit::Signal(sig);
        }
    }
    Exit::Code(status.code().unwrap_or(-1))
}

fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) takes plain integers; the negative pid addresses
            // the group the child leads (it is not reaped yet, so the id is ours).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn records_tolerate_crlf_and_report_bad_lines() {
        let dir = std::env::temp_dir().join(format!("clrprof-bg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.jsonl");
        std::fs::write(&p, "{\"event\":\"a\"}\r\n\nnot json\n{\"event\":\"b\"}\n").unwrap();
        let (r, bad) = read_records(&p);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1]["event"], "b");
        assert_eq!(bad.len(), 1);
        assert!(bad[0].starts_with("line 3:"), "{bad:?}");
        assert_eq!(
            wait_for_file(&p, Duration::from_secs(1))
                .unwrap()
                .lines()
                .count(),
            4
        );
        assert!(wait_for_file(&dir.join("never"), Duration::from_millis(50)).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
