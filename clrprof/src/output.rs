//! JSON Lines records for profiler output.
//!
//! The profiler gathers; analysis happens out of process. [`JsonLines`]
//! writes one JSON object per line to the file named by an environment
//! variable (`CLRPROF_OUTPUT` by default) or, when unset, to stderr. The
//! application's own stdout is never touched.
//!
//! No accepted record is lost or torn:
//! - every record is appended to the buffer as one complete line under the
//!   writer's lock, and the buffer is only ever written out whole, so the
//!   file holds complete lines at every moment (one `write` per buffer on a
//!   file opened for appending, so side-by-side runtimes writing to one file
//!   never split each other's lines);
//! - the writer registers with [`crate::exit`] when it opens its file: it is
//!   flushed at every finishing point (after [`Profiler::finish`]) and at
//!   process exit, after which it writes every further record straight through;
//! - periodic flush: a record written at least the flush interval after the
//!   last flush flushes the buffer (default 1 s; `CLRPROF_FLUSH_MS` or
//!   [`JsonLines::flush_interval`], `0` flushes every record), so a process
//!   killed by SIGKILL loses at most the records of one interval.
//!
//! [`Profiler::finish`]: crate::callback::Profiler::finish

use crate::error::Result;
use crate::exit::Flush;
use crate::info::{ProfilerInfo, RuntimeType};
use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Buffer size: a record that would make the buffer larger writes it out first.
const BUFFER: usize = 64 * 1024;

/// Default periodic flush interval.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// A buffered JSON Lines sink, opened on first use.
pub struct JsonLines {
    var: &'static str,
    interval: Option<Duration>,
    sink: OnceLock<Arc<Sink>>,
    runtime: OnceLock<String>,
}

/// The open file and its buffer (shared with the exit registry, weakly).
struct Sink {
    state: Mutex<SinkState>,
}

struct SinkState {
    target: Box<dyn Write + Send>,
    buffer: Vec<u8>,
    last_flush: Instant,
    interval: Duration,
    /// Set by the last flush at process exit: every record is written through.
    write_through: bool,
}

impl SinkState {
    fn flush(&mut self) {
        if !self.buffer.is_empty() {
            // One write of complete lines; on failure the records are
            // dropped rather than retried forever (the file is gone).
            let _ = self.target.write_all(&self.buffer);
            let _ = self.target.flush();
            self.buffer.clear();
        }
        self.last_flush = Instant::now();
    }

    fn push_line(&mut self, line: &[u8]) {
        if self.buffer.len() + line.len() + 1 > BUFFER {
            self.flush();
        }
        self.buffer.extend_from_slice(line);
        self.buffer.push(b'\n');
        if self.write_through || self.last_flush.elapsed() >= self.interval {
            self.flush();
        }
    }
}

impl Sink {
    /// The writer's state: blocking while the process runs, waited for at
    /// most [`EXIT_WAIT`](crate::exit::EXIT_WAIT) once it is ending (`None` then: a thread the
    /// system ended while it wrote holds the lock forever). Poisoning is
    /// ignored: a panic while holding the lock cannot leave a partial line
    /// in the buffer (lines are appended whole).
    fn lock(&self) -> Option<MutexGuard<'_, SinkState>> {
        crate::exiting::lock_unless_exiting(&self.state)
    }
}

impl Flush for Sink {
    fn flush(&self, last: bool) {
        // `last` comes from `finish_process`, which marks the process as
        // ending first: the lock is bounded then.
        // reentrancy: none: `s.flush()` is the sink file's `std::io::Write::flush`, not a profiler's `Flush`
        if let Some(mut s) = self.lock() {
            s.flush();
            if last {
                s.write_through = true;
            }
        }
    }
}

/// The writer for the file `path` names (opened for appending), else
/// stderr; with the error that sent the records to stderr instead of a
/// file that was named, naming the variable and the path.
fn open_target(
    var: &str,
    path: Option<std::ffi::OsString>,
) -> (Box<dyn Write + Send>, Option<String>) {
    let Some(path) = path else {
        return (Box::new(std::io::stderr()), None);
    };
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        Ok(f) => (Box::new(f), None),
        Err(e) => (
            Box::new(std::io::stderr()),
            Some(format!(
                "{var}={}: cannot open it ({e}); the records go to stderr",
                std::path::Path::new(&path).display()
            )),
        ),
    }
}

impl Default for JsonLines {
    fn default() -> Self {
        Self::from_env("CLRPROF_OUTPUT")
    }
}

impl JsonLines {
    /// Writes to the file named by environment variable `var` (appending), or
    /// to stderr when it is unset or cannot be opened (then an error naming
    /// the path is logged, which the default log level shows on stderr).
    pub const fn from_env(var: &'static str) -> Self {
        JsonLines {
            var,
            interval: None,
            sink: OnceLock::new(),
            runtime: OnceLock::new(),
        }
    }

    /// Sets the periodic flush interval (default: `CLRPROF_FLUSH_MS`
    /// milliseconds if set, else [`DEFAULT_FLUSH_INTERVAL`]); `ZERO` flushes
    /// every record.
    pub const fn flush_interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// Writes to the file `path` (appending) instead of the one the
    /// variable names: for a profiler told where to write another way, such
    /// as the `output=<path>` that `clrprof attach` adds to the client data
    /// (`ClientData::get("output")` in `initialize_for_attach`). Call it
    /// before the first record. Fails, naming the path, when the file
    /// cannot be opened, and when this writer has opened its output already.
    pub fn open(&self, path: &std::path::Path) -> std::io::Result<()> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let mut opened = false;
        self.sink.get_or_init(|| {
            opened = true;
            self.new_sink(Box::new(file))
        });
        if opened {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "{}: this writer has opened its output already",
                path.display()
            )))
        }
    }

    fn sink(&self) -> &Sink {
        self.sink.get_or_init(|| {
            let (target, error) = open_target(self.var, std::env::var_os(self.var));
            if let Some(e) = error {
                // At error level: on stderr unless CLRPROF_LOG=off.
                log::error!("{e}");
            }
            self.new_sink(target)
        })
    }

    fn new_sink(&self, target: Box<dyn Write + Send>) -> Arc<Sink> {
        {
            let interval = self.interval.unwrap_or_else(|| {
                std::env::var("CLRPROF_FLUSH_MS")
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .map(Duration::from_millis)
                    .unwrap_or(DEFAULT_FLUSH_INTERVAL)
            });
            let sink = Arc::new(Sink {
                state: Mutex::new(SinkState {
                    target,
                    buffer: Vec::with_capacity(BUFFER),
                    last_flush: Instant::now(),
                    interval,
                    write_through: false,
                }),
            });
            let weak = Arc::downgrade(&sink);
            crate::exit::register_flush(weak);
            sink
        }
    }

    /// Starts a record `{"event":"<event>", ...}`. After
    /// [`runtime_record`](Self::runtime_record), every record also carries
    /// `"runtime":"<major.minor.build>"`, so records of side-by-side runtimes
    /// writing to one file can be told apart.
    pub fn record(&self, event: &str) -> Record<'_> {
        let mut line = String::with_capacity(96);
        line.push_str("{\"event\":");
        push_json_string(&mut line, event);
        let record = Record { out: self, line };
        match self.runtime.get() {
            Some(version) => record.str("runtime", version),
            None => record,
        }
    }

    /// Writes the runtime record every clrprof tool starts with:
    /// `{"event":"runtime","version":"<major.minor.build>","runtime":"coreclr|desktop","pid":N}`.
    pub fn runtime_record(&self, info: &ProfilerInfo) -> Result<()> {
        let rt = info.runtime_information()?;
        let kind = match rt.runtime_type {
            RuntimeType::Desktop => "desktop",
            RuntimeType::CoreClr => "coreclr",
            RuntimeType::Unknown(_) => "unknown",
        };
        // Built directly: the runtime record itself carries no runtime tag.
        Record {
            out: self,
            line: String::from("{\"event\":\"runtime\""),
        }
        .str("version", &rt.version())
        .str("runtime", kind)
        .num("pid", std::process::id() as u64)
        .write();
        let _ = self.runtime.set(rt.version());
        Ok(())
    }

    /// Writes a complete line (without the newline) as is. The line is
    /// accepted whole: it reaches the file whole, at the latest at the next
    /// finishing point.
    ///
    /// Once the process is ending ([`crate::exit::process_exiting`]) the
    /// writer's lock is waited for at most [`EXIT_WAIT`](crate::exit::EXIT_WAIT): a thread the
    /// system ended while it wrote (on Windows, `ExitProcess` ends the other
    /// threads before the exit handlers run) holds it forever, and the
    /// line is then dropped rather than the process hung.
    pub fn write_line(&self, line: &str) {
        if let Some(mut s) = self.sink().lock() {
            s.push_line(line.as_bytes());
        }
    }

    /// Writes buffered records to the file now (bounded once the process
    /// is ending, as [`write_line`](Self::write_line)).
    pub fn flush(&self) {
        if let Some(s) = self.sink.get() {
            // reentrancy: none: `s.flush()` is the sink file's `std::io::Write::flush`
            if let Some(mut s) = s.lock() {
                s.flush();
            }
        }
    }
}

impl Drop for JsonLines {
    fn drop(&mut self) {
        self.flush();
    }
}

/// One record being built; [`Record::write`] appends it.
pub struct Record<'a> {
    out: &'a JsonLines,
    line: String,
}

impl Record<'_> {
    /// Adds a string field.
    pub fn str(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        push_json_string(&mut self.line, value);
        self
    }

    /// Adds an unsigned number field.
    pub fn num(mut self, key: &str, value: u64) -> Self {
        self.key(key);
        let _ = write!(self.line, "{value}");
        self
    }

    /// Adds a signed number field.
    pub fn int(mut self, key: &str, value: i64) -> Self {
        self.key(key);
        let _ = write!(self.line, "{value}");
        self
    }

    /// Adds a boolean field.
    pub fn bool(mut self, key: &str, value: bool) -> Self {
        self.key(key);
        self.line.push_str(if value { "true" } else { "false" });
        self
    }

    /// Adds a field whose value is already JSON.
    pub fn raw(mut self, key: &str, json: &str) -> Self {
        self.key(key);
        self.line.push_str(json);
        self
    }

    fn key(&mut self, key: &str) {
        self.line.push(',');
        push_json_string(&mut self.line, key);
        self.line.push(':');
    }

    /// Appends the record to the sink.
    pub fn write(mut self) {
        self.line.push('}');
        self.out.write_line(&self.line);
    }
}

/// Appends `s` as a JSON string literal.
pub fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exiting::EXIT_WAIT;

    #[test]
    fn escapes_json_strings() {
        let mut s = String::new();
        push_json_string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }

    #[test]
    fn an_output_that_cannot_be_opened_is_an_error_naming_it() {
        let missing = std::env::temp_dir()
            .join(format!("clrprof-out-missing-{}", std::process::id()))
            .join("x.jsonl");
        let (_, error) = open_target("CLRPROF_OUTPUT", Some(missing.clone().into_os_string()));
        let error = error.expect("a file in a missing directory cannot be opened");
        assert!(
            error.starts_with(&format!(
                "CLRPROF_OUTPUT={}: cannot open it (",
                missing.display()
            )),
            "{error}"
        );
        assert!(error.ends_with("); the records go to stderr"), "{error}");
        assert!(open_target("CLRPROF_OUTPUT", None).1.is_none());
        let ok = temp_file("opened.jsonl");
        assert!(open_target("CLRPROF_OUTPUT", Some(ok.into_os_string()))
            .1
            .is_none());
    }

    #[test]
    fn open_writes_to_the_named_file_once() {
        let path = temp_file("opened-explicitly.jsonl");
        let out = JsonLines::from_env("CLRPROF_TEST_NEVER_SET");
        out.open(&path).unwrap();
        out.record("attached").write();
        out.flush();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"event\":\"attached\"}\n"
        );
        let again = out.open(&path).unwrap_err().to_string();
        assert_eq!(
            again,
            format!(
                "{}: this writer has opened its output already",
                path.display()
            )
        );
        let missing = path.with_file_name("no-such-dir").join("x.jsonl");
        let e = JsonLines::default().open(&missing).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: ", missing.display())), "{e}");
    }

    fn temp_file(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("clrprof-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    /// Every line of `text` is a complete record `{"event":"r","t":T,"i":I}`;
    /// returns, per writer thread, the indices in file order.
    fn lines_by_thread(text: &str) -> BTreeMap<u64, Vec<u64>> {
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "torn tail: {:?}",
            &text[text.len().saturating_sub(80)..]
        );
        let mut by: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for line in text.lines() {
            let rest = line
                .strip_prefix("{\"event\":\"r\",\"t\":")
                .and_then(|r| r.strip_suffix('}'))
                .unwrap_or_else(|| panic!("torn or foreign line {line:?}"));
            let (t, i) = rest.split_once(",\"i\":").expect("fields");
            by.entry(t.parse().unwrap())
                .or_default()
                .push(i.parse().unwrap());
        }
        by
    }

    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn concurrent_writers_lose_and_tear_nothing() {
        let path = temp_file("concurrent.jsonl");
        std::env::set_var("CLRPROF_TEST_OUTPUT_CONCURRENT", &path);
        let out = Arc::new(JsonLines::from_env("CLRPROF_TEST_OUTPUT_CONCURRENT"));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let out = out.clone();
                std::thread::spawn(move || {
                    for i in 0..5000u64 {
                        out.record("r").num("t", t).num("i", i).write();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        out.flush();
        let by = lines_by_thread(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(by.len(), 8);
        for (t, seq) in by {
            assert_eq!(seq, (0..5000).collect::<Vec<_>>(), "thread {t}");
        }
    }

    #[test]
    fn a_flush_racing_writes_leaves_only_complete_lines() {
        let path = temp_file("racing.jsonl");
        std::env::set_var("CLRPROF_TEST_OUTPUT_RACING", &path);
        let out = Arc::new(JsonLines::from_env("CLRPROF_TEST_OUTPUT_RACING"));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3u64)
            .map(|t| {
                let out = out.clone();
                std::thread::spawn(move || {
                    for i in 0..20000u64 {
                        out.record("r").num("t", t).num("i", i).write();
                    }
                })
            })
            .collect();
        let flusher = {
            let (out, stop) = (out.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(Ordering::SeqCst) {
                    out.flush();
                    // What is on disk is whole lines, in order per thread. (A
                    // read racing a writer's `write` can see part of that one
                    // call, so only up to its last newline.)
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let whole = &text[..text.rfind('\n').map_or(0, |n| n + 1)];
                    let by = lines_by_thread(whole);
                    for seq in by.values() {
                        assert!(seq.iter().enumerate().all(|(n, &i)| n as u64 == i));
                    }
                    reads += 1;
                }
                (reads, path)
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        let (reads, path) = flusher.join().unwrap();
        assert!(reads > 0);
        out.flush();
        let by = lines_by_thread(&std::fs::read_to_string(&path).unwrap());
        assert!(by.values().all(|s| s.len() == 20000));
    }

    #[test]
    fn the_periodic_flush_writes_without_an_explicit_flush() {
        let path = temp_file("periodic.jsonl");
        std::env::set_var("CLRPROF_TEST_OUTPUT_PERIODIC", &path);
        let out = JsonLines::from_env("CLRPROF_TEST_OUTPUT_PERIODIC")
            .flush_interval(Duration::from_millis(20));
        out.record("r").num("t", 0).num("i", 0).write();
        std::thread::sleep(Duration::from_millis(30));
        // The interval has passed: this record flushes both.
        out.record("r").num("t", 0).num("i", 1).write();
        let by = lines_by_thread(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(by[&0], vec![0, 1]);
        let every =
            JsonLines::from_env("CLRPROF_TEST_OUTPUT_PERIODIC").flush_interval(Duration::ZERO);
        every.record("r").num("t", 1).num("i", 0).write();
        let by = lines_by_thread(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(by[&1], vec![0]);
    }

    /// The child half of `process_exit_during_writes_keeps_every_accepted_record`.
    #[test]
    fn exit_child() {
        let Some(path) = std::env::var_os("CLRPROF_TEST_EXIT_CHILD") else {
            return;
        };
        static OUT: JsonLines = JsonLines::from_env("CLRPROF_TEST_EXIT_CHILD")
            .flush_interval(Duration::from_secs(3600));
        let accepted: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
        for t in 0..4u64 {
            let accepted = accepted.clone();
            std::thread::spawn(move || {
                for i in 0.. {
                    OUT.record("r").num("t", t).num("i", i).write();
                    accepted[t as usize].store(i + 1, Ordering::SeqCst);
                }
            });
        }
        while accepted
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .sum::<u64>()
            < 20000
        {
            std::thread::yield_now();
        }
        // Accepted before exit() starts: all of these must be in the file.
        let counts: Vec<String> = accepted
            .iter()
            .map(|a| a.load(Ordering::SeqCst).to_string())
            .collect();
        std::fs::write(
            format!("{}.counts", path.to_string_lossy()),
            counts.join(","),
        )
        .unwrap();
        // exit() runs the C library's exit handlers (the SDK's among them)
        // while the writers keep writing.
        std::process::exit(0);
    }

    #[cfg(unix)]
    #[test]
    fn process_exit_during_writes_keeps_every_accepted_record() {
        let path = temp_file("exit.jsonl");
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "output::tests::exit_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CLRPROF_TEST_EXIT_CHILD", &path)
            .status()
            .unwrap();
        assert!(status.success(), "{status}");
        let counts: Vec<u64> = std::fs::read_to_string(format!("{}.counts", path.display()))
            .unwrap()
            .split(',')
            .map(|n| n.parse().unwrap())
            .collect();
        let by = lines_by_thread(&std::fs::read_to_string(&path).unwrap());
        for (t, accepted) in counts.iter().enumerate() {
            let seq = by.get(&(t as u64)).map_or(&[][..], |v| &v[..]);
            assert!(
                seq.len() as u64 >= *accepted,
                "thread {t}: {} in the file, {accepted} accepted",
                seq.len()
            );
            assert!(
                seq.iter().enumerate().all(|(n, &i)| n as u64 == i),
                "thread {t}: gap"
            );
        }
    }

    #[test]
    fn writes_records_to_the_named_file() {
        let dir = std::env::temp_dir().join(format!("clrprof-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        let _ = std::fs::remove_file(&path);
        // A variable name unique to this test, so parallel tests do not interfere.
        std::env::set_var("CLRPROF_TEST_OUTPUT_WRITES", &path);
        let out = JsonLines::from_env("CLRPROF_TEST_OUTPUT_WRITES");
        out.record("jit")
            .str("method", "A.B+C::M")
            .num("count", 3)
            .bool("ok", true)
            .write();
        out.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"event\":\"jit\",\"method\":\"A.B+C::M\",\"count\":3,\"ok\":true}\n"
        );
    }

    #[test]
    fn at_exit_a_writer_held_by_an_ended_thread_drops_the_line_not_the_process() {
        let path = temp_file("held.jsonl");
        std::env::set_var("CLRPROF_TEST_OUTPUT_HELD", &path);
        let out = JsonLines::from_env("CLRPROF_TEST_OUTPUT_HELD");
        out.record("before").write();
        out.flush();
        // A thread that ended while it held the writer's lock: the lock is
        // never released.
        std::mem::forget(out.sink().state.lock().unwrap());
        crate::exiting::mark_exiting();
        let start = Instant::now();
        out.record("after").write();
        out.flush();
        let waited = start.elapsed();
        assert!(waited >= 2 * EXIT_WAIT, "{waited:?}");
        assert!(
            waited < 2 * EXIT_WAIT + Duration::from_secs(2),
            "{waited:?}"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"event\":\"before\"}\n");
    }
}
