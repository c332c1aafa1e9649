//! The link table of an OTLP profiles request as Debian's `protoc --decode`
//! reads it, against a schema of its own: only the fields on the path to
//! the links, numbered as in opentelemetry-proto's
//! `collector/profiles/v1development/profiles_service.proto`
//! (`ExportProfilesServiceRequest.dictionary` = 2) and
//! `profiles/v1development/profiles.proto` (`ProfilesDictionary.link_table`
//! = 4, `Link.trace_id` = 1, `Link.span_id` = 2). protoc prints the other
//! fields as unknown ones, by number; they are skipped. So the links the
//! scenario joins with the spans are read once by the SDK's own message
//! types and once by protoc, and must be the same.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const SCHEMA: &str = r#"syntax = "proto3";
package clrprof_e2e;
message Request { Dictionary dictionary = 2; }
message Dictionary { repeated Link link_table = 4; }
message Link { bytes trace_id = 1; bytes span_id = 2; }
"#;

/// A link: trace id and span id bytes.
pub type Link = (Vec<u8>, Vec<u8>);

/// `(trace id, span id)` of every entry of the request's link table, in
/// order, as protoc decodes `body` (uncompressed). `dir` holds the schema.
pub fn links(dir: &Path, body: &[u8]) -> Result<Vec<Link>, String> {
    let schema = dir.join("clrprof_e2e_links.proto");
    std::fs::write(&schema, SCHEMA).map_err(|e| format!("{}: {e}", schema.display()))?;
    let mut child = Command::new("protoc")
        .arg(format!("--proto_path={}", dir.display()))
        .arg("--decode=clrprof_e2e.Request")
        .arg(&schema)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run protoc (Debian package protobuf-compiler): {e}"))?;
    let mut stdin = child.stdin.take().ok_or("protoc without stdin")?;
    let feed = {
        let body = body.to_vec();
        std::thread::spawn(move || stdin.write_all(&body))
    };
    let out = child
        .wait_with_output()
        .map_err(|e| format!("protoc: {e}"))?;
    let _ = feed.join();
    if !out.status.success() {
        return Err(format!(
            "protoc --decode failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// The links of protoc's text output.
fn parse(text: &str) -> Result<Vec<Link>, String> {
    let mut path: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let mut current: Option<Link> = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(name) = line.strip_suffix(" {") {
            path.push(name.to_string());
            if path == ["dictionary", "link_table"] {
                current = Some((Vec::new(), Vec::new()));
            }
        } else if line == "}" {
            if path == ["dictionary", "link_table"] {
                out.push(current.take().ok_or("protoc output: unbalanced link")?);
            }
            path.pop().ok_or("protoc output: unbalanced braces")?;
        } else if path == ["dictionary", "link_table"] {
            let c = current
                .as_mut()
                .ok_or("protoc output: a field outside a link")?;
            if let Some(v) = line.strip_prefix("trace_id: ") {
                c.0 = unquote(v)?;
            } else if let Some(v) = line.strip_prefix("span_id: ") {
                c.1 = unquote(v)?;
            }
        }
    }
    if !path.is_empty() {
        return Err("protoc output: unbalanced braces".into());
    }
    Ok(out)
}

/// The bytes of a C-escaped, double-quoted string as protoc prints them.
fn unquote(s: &str) -> Result<Vec<u8>, String> {
    let inner = s
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .ok_or_else(|| format!("protoc output: not a quoted string: {s}"))?;
    let b = inner.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let e = *b.get(i + 1).ok_or("protoc output: a lone backslash")?;
        i += 2;
        match e {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'"' | b'\'' | b'\\' => out.push(e),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match b.get(i) {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(u8::try_from(v).map_err(|_| format!("protoc output: escape {v}"))?);
            }
            b'x' => {
                let mut v = 0u32;
                let mut n = 0;
                while let Some(d) = b.get(i).and_then(|c| (*c as char).to_digit(16)) {
                    v = v * 16 + d;
                    i += 1;
                    n += 1;
                }
                if n == 0 {
                    return Err("protoc output: an empty \\x escape".into());
                }
                out.push(u8::try_from(v).map_err(|_| format!("protoc output: escape {v}"))?);
            }
            _ => return Err(format!("protoc output: unknown escape \\{}", e as char)),
        }
    }
    Ok(out)
}
