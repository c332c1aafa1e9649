//! JSON Lines records for profiler output.
//!
//! The profiler gathers; analysis happens out of process. [`JsonLines`]
//! writes one JSON object per line to the file named by an environment
//! variable (`CLRPROF_OUTPUT` by default) or, when unset, to stderr. Writes
//! are buffered and flushed by [`JsonLines::flush`] (call it from
//! `shutdown` / `profiler_detach_succeeded`) and on drop. The application's
//! own stdout is never touched.

use crate::error::Result;
use crate::info::{ProfilerInfo, RuntimeType};
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::sync::{Mutex, OnceLock};

/// A buffered JSON Lines sink, opened on first use.
pub struct JsonLines {
    var: &'static str,
    sink: OnceLock<Mutex<BufWriter<Box<dyn Write + Send>>>>,
    runtime: OnceLock<String>,
}

impl Default for JsonLines {
    fn default() -> Self {
        Self::from_env("CLRPROF_OUTPUT")
    }
}

impl JsonLines {
    /// Writes to the file named by environment variable `var` (appending), or
    /// to stderr when it is unset or cannot be opened.
    pub const fn from_env(var: &'static str) -> Self {
        JsonLines {
            var,
            sink: OnceLock::new(),
            runtime: OnceLock::new(),
        }
    }

    fn sink(&self) -> &Mutex<BufWriter<Box<dyn Write + Send>>> {
        self.sink.get_or_init(|| {
            let target: Box<dyn Write + Send> = match std::env::var_os(self.var).and_then(|p| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .ok()
            }) {
                Some(f) => Box::new(f),
                None => Box::new(std::io::stderr()),
            };
            Mutex::new(BufWriter::with_capacity(64 * 1024, target))
        })
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

    /// Writes a complete line (without the newline) as is.
    pub fn write_line(&self, line: &str) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        if let Ok(mut w) = self.sink().lock() {
            // One write per line: buffer flushes then end on line boundaries,
            // so several writers appending to one file (side-by-side runtimes)
            // never split each other's lines.
            let _ = w.write_all(&bytes);
        }
    }

    /// Flushes buffered records to the file.
    pub fn flush(&self) {
        if let Some(s) = self.sink.get() {
            if let Ok(mut w) = s.lock() {
                let _ = w.flush();
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

    #[test]
    fn escapes_json_strings() {
        let mut s = String::new();
        push_json_string(&mut s, "a\"b\\c\nd\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é\"");
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
}
