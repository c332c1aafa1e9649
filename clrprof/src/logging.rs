//! The SDK's log sink.
//!
//! clrprof logs through the [`log`] facade. Unless the profiler installs its
//! own logger first, the SDK installs a small sink at load time, configured
//! by the environment of the profiled process:
//!
//! - `CLRPROF_LOG` = `off` | `error` (default) | `warn` | `info` | `debug` | `trace`
//! - `CLRPROF_LOG_FILE` = a path to append to (default: the process's stderr)
//!
//! Errors only by default: the profiler is a guest in someone else's process
//! and must not change its output while all is well, but what goes wrong
//! (a panic the SDK contained, an output file that cannot be opened, a
//! method the runtime refused) is said, on stderr, where the user looks.
//! `CLRPROF_LOG=off` silences even that; an unknown value keeps the default.
//! Below the enabled level a log call costs one atomic load. The sink never
//! calls into the runtime, so it never allocates managed memory.

use std::io::Write;
use std::sync::Mutex;

struct Sink {
    file: Option<Mutex<std::fs::File>>,
}

impl log::Log for Sink {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format!(
            "[clrprof {} {}] {}\n",
            record.level(),
            record.target(),
            record.args()
        );
        match &self.file {
            Some(f) => {
                if let Ok(mut f) = f.lock() {
                    let _ = f.write_all(line.as_bytes());
                }
            }
            None => {
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
        }
    }

    fn flush(&self) {}
}

/// Installs the sink from `CLRPROF_LOG` / `CLRPROF_LOG_FILE` if no logger is
/// installed yet. Called by the SDK when the runtime first asks the library
/// for a class object; calling it again does nothing.
pub fn init_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let level = match std::env::var("CLRPROF_LOG")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Ok("off") => return,
            Ok("warn") => log::LevelFilter::Warn,
            Ok("info") => log::LevelFilter::Info,
            Ok("debug") => log::LevelFilter::Debug,
            Ok("trace") => log::LevelFilter::Trace,
            _ => log::LevelFilter::Error,
        };
        let file = std::env::var_os("CLRPROF_LOG_FILE")
            .and_then(|p| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .ok()
            })
            .map(Mutex::new);
        if log::set_boxed_logger(Box::new(Sink { file })).is_ok() {
            log::set_max_level(level);
        }
    });
}
