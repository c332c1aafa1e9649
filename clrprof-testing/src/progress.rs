//! How downloads show while provisioning: a progress bar on a terminal, one
//! line per package otherwise (a CI log).

use crate::nuget::{Pin, Progress};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

/// Progress of package downloads (see the module docs).
pub struct Downloads {
    terminal: bool,
    current: Mutex<Option<(ProgressBar, Instant)>>,
}

impl Downloads {
    /// Shows bars when stderr is a terminal.
    pub fn new() -> Downloads {
        Downloads {
            terminal: std::io::stderr().is_terminal(),
            current: Mutex::new(None),
        }
    }
}

impl Default for Downloads {
    fn default() -> Self {
        Downloads::new()
    }
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}

impl Progress for Downloads {
    fn start(&self, pin: &Pin, length: Option<u64>) {
        let bar = if self.terminal {
            let bar = match length {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::new_spinner(),
            };
            let style = ProgressStyle::with_template(
                "{msg:<48} [{bar:30}] {bytes:>10}/{total_bytes:<10} {bytes_per_sec:>12} {eta}",
            )
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(format!("{pin}"));
            bar
        } else {
            println!(
                "provision: downloading {pin}{}",
                length
                    .map(|n| format!(" ({})", megabytes(n)))
                    .unwrap_or_default()
            );
            ProgressBar::hidden()
        };
        if let Ok(mut current) = self.current.lock() {
            *current = Some((bar, Instant::now()));
        }
    }

    fn advance(&self, bytes: u64) {
        if let Ok(current) = self.current.lock() {
            if let Some((bar, _)) = current.as_ref() {
                bar.set_position(bytes);
            }
        }
    }

    fn finish(&self, pin: &Pin, ok: bool) {
        let Ok(mut current) = self.current.lock() else {
            return;
        };
        if let Some((bar, started)) = current.take() {
            let bytes = bar.position();
            bar.finish_and_clear();
            let verdict = if ok { "checked" } else { "FAILED" };
            println!(
                "provision: {pin}: {} in {:.1}s, SHA-512 {verdict}",
                megabytes(bytes),
                started.elapsed().as_secs_f64()
            );
        }
    }
}
