//! A loopback HTTP/1.1 load generator for benchmarks and tests of web apps.
//!
//! Closed loop: `connections` keep-alive connections, each on its own
//! thread, send one `GET` at a time and wait for the whole answer. Request
//! `i` (counted over all connections) asks for `paths[i % paths.len()]`.
//! A run stops at whichever comes first, `requests` requests or `duration`,
//! and never sends to anything but the address it is given (meant for
//! `127.0.0.1`).
//!
//! Every answer is read whole (`Content-Length` or chunked), its status
//! checked, and its body kept once per path: [`LoadResult::bodies`] holds
//! each path's body, and a body that differs from
//! [`LoadSpec::expected`] (the same path's body in another run, e.g. one
//! without a profiler) or from an earlier answer of the same run counts as
//! a mismatch. Latencies are kept per request (µs) for exact percentiles.

use crate::{Error, Result};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to send.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Where (a loopback address).
    pub addr: SocketAddr,
    /// Request targets, e.g. `/json?n=3`, taken in turn.
    pub paths: Vec<String>,
    /// Connections (and threads), at least 1.
    pub connections: usize,
    /// Most requests sent.
    pub requests: u64,
    /// Longest the run lasts (no new request is sent after it).
    pub duration: Duration,
    /// Bodies each path must answer (by index into `paths`); paths
    /// missing here are checked only against the run's own answers.
    pub expected: Arc<HashMap<usize, Vec<u8>>>,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    /// Requests answered with status 200.
    pub ok: u64,
    /// Requests answered with another status, or whose connection failed
    /// (each followed by a new connection).
    pub failed: u64,
    /// Answers whose body differed from the expected one.
    pub mismatched: u64,
    /// The first few mismatches and failures, for messages.
    pub errors: Vec<String>,
    /// Requests sent per path (by index into the spec's `paths`),
    /// answered or not.
    pub sent: Vec<u64>,
    /// Body per path index, of the answers seen.
    pub bodies: HashMap<usize, Vec<u8>>,
    /// Latency of each answered request, µs, sorted.
    pub latencies_us: Vec<u32>,
    /// From the first request sent to the last answer.
    pub elapsed: Duration,
}

impl LoadResult {
    /// Answered requests per second.
    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The `q` quantile (0..=1) of the latencies, µs (0 with none).
    pub fn percentile_us(&self, q: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        let n = self.latencies_us.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        f64::from(self.latencies_us[rank - 1])
    }

    /// Requests sent in all.
    pub fn total_sent(&self) -> u64 {
        self.sent.iter().sum()
    }
}

struct Shared {
    spec: LoadSpec,
    next: AtomicU64,
    deadline: Instant,
    result: Mutex<LoadResult>,
}

/// Runs `spec` (see the module docs). Fails only when no connection could
/// be made at all; failed requests are counted in the result.
pub fn run(spec: &LoadSpec) -> Result<LoadResult> {
    if spec.paths.is_empty() || spec.connections == 0 {
        return Err(Error::new("load: no paths or no connections"));
    }
    TcpStream::connect_timeout(&spec.addr, Duration::from_secs(5))
        .map_err(|e| Error::new(format!("load: cannot connect to {}: {e}", spec.addr)))?;
    let started = Instant::now();
    let shared = Arc::new(Shared {
        spec: spec.clone(),
        next: AtomicU64::new(0),
        deadline: started + spec.duration,
        result: Mutex::new(LoadResult {
            sent: vec![0; spec.paths.len()],
            ..LoadResult::default()
        }),
    });
    let threads: Vec<_> = (0..spec.connections)
        .map(|_| {
            let shared = shared.clone();
            std::thread::spawn(move || connection(&shared))
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let mut result = shared
        .result
        .lock()
        .map(|r| r.clone())
        .unwrap_or_else(|e| e.into_inner().clone());
    result.elapsed = started.elapsed();
    result.latencies_us.sort_unstable();
    Ok(result)
}

/// What one connection's thread gathers, merged at its end.
#[derive(Default)]
struct Local {
    ok: u64,
    failed: u64,
    mismatched: u64,
    errors: Vec<String>,
    sent: Vec<u64>,
    bodies: HashMap<usize, Vec<u8>>,
    latencies: Vec<u32>,
}

fn connection(shared: &Shared) {
    let spec = &shared.spec;
    let mut local = Local {
        sent: vec![0; spec.paths.len()],
        ..Local::default()
    };
    let mut stream: Option<(TcpStream, BufReader<TcpStream>)> = None;
    let mut body = Vec::with_capacity(16 * 1024);
    loop {
        if Instant::now() >= shared.deadline {
            break;
        }
        let i = shared.next.fetch_add(1, Ordering::Relaxed);
        if i >= spec.requests {
            break;
        }
        let index = (i % spec.paths.len() as u64) as usize;
        if stream.is_none() {
            match open(spec.addr) {
                Ok(s) => stream = Some(s),
                Err(e) => {
                    local.failed += 1;
                    local.sent[index] += 1;
                    note(&mut local.errors, format!("connect: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            }
        }
        let Some((writer, reader)) = stream.as_mut() else {
            continue;
        };
        let path = &spec.paths[index];
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let start = Instant::now();
        local.sent[index] += 1;
        let answer = writer
            .write_all(request.as_bytes())
            .map_err(|e| e.to_string())
            .and_then(|()| read_response(reader, &mut body));
        let elapsed = start.elapsed();
        match answer {
            Ok(200) => {
                local.ok += 1;
                local
                    .latencies
                    .push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
                let expected = spec
                    .expected
                    .get(&index)
                    .or_else(|| local.bodies.get(&index));
                match expected {
                    Some(e) if *e != body => {
                        local.mismatched += 1;
                        note(
                            &mut local.errors,
                            format!(
                                "{path}: body changed: {:?}",
                                String::from_utf8_lossy(&body[..body.len().min(200)])
                            ),
                        );
                    }
                    _ => {}
                }
                local.bodies.entry(index).or_insert_with(|| body.clone());
            }
            Ok(status) => {
                local.failed += 1;
                note(&mut local.errors, format!("{path}: HTTP {status}"));
            }
            Err(e) => {
                local.failed += 1;
                note(&mut local.errors, format!("{path}: {e}"));
                stream = None;
            }
        }
    }
    let Ok(mut r) = shared.result.lock() else {
        return;
    };
    r.ok += local.ok;
    r.failed += local.failed;
    r.mismatched += local.mismatched;
    for e in local.errors {
        note(&mut r.errors, e);
    }
    for (total, n) in r.sent.iter_mut().zip(&local.sent) {
        *total += n;
    }
    for (index, b) in local.bodies {
        match r.bodies.get(&index) {
            Some(other) if *other != b => {
                r.mismatched += 1;
                let path = spec.paths[index].clone();
                note(
                    &mut r.errors,
                    format!("{path}: two connections got different bodies"),
                );
            }
            _ => {
                r.bodies.insert(index, b);
            }
        }
    }
    r.latencies_us.extend(local.latencies);
}

fn note(errors: &mut Vec<String>, e: String) {
    if errors.len() < 10 {
        errors.push(e);
    }
}

fn open(addr: SocketAddr) -> std::io::Result<(TcpStream, BufReader<TcpStream>)> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let r = BufReader::with_capacity(64 * 1024, s.try_clone()?);
    Ok((s, r))
}

/// Reads one response: its status; the body (de-chunked) into `body`.
fn read_response(
    reader: &mut BufReader<TcpStream>,
    body: &mut Vec<u8>,
) -> std::result::Result<u16, String> {
    let mut line = String::new();
    let e = |e: std::io::Error| e.to_string();
    if reader.read_line(&mut line).map_err(e)? == 0 {
        return Err("connection closed".into());
    }
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {line:?}"))?;
    let (mut length, mut chunked, mut close) = (None, false, false);
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(e)? == 0 {
            return Err("connection closed in the head".into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse::<usize>().ok();
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.eq_ignore_ascii_case("chunked");
            } else if k.eq_ignore_ascii_case("connection") {
                close = v.eq_ignore_ascii_case("close");
            }
        }
    }
    body.clear();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).map_err(e)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| format!("bad chunk size {line:?}"))?;
            if size == 0 {
                // Trailers, up to the blank line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line).map_err(e)? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..]).map_err(e)?;
            line.clear();
            reader.read_line(&mut line).map_err(e)?;
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        reader.read_exact(body).map_err(e)?;
    } else {
        return Err("answer without Content-Length or chunked body".into());
    }
    if close {
        return Err("server closed the connection".into());
    }
    Ok(status)
}

/// One `GET` on a new connection: status and body (for control requests
/// such as a stats or shutdown endpoint).
pub fn get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let (mut w, mut r) =
        open(addr).map_err(|e| Error::new(format!("GET {path}: cannot connect: {e}")))?;
    w.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .map_err(|e| Error::new(format!("GET {path}: {e}")))?;
    let mut body = Vec::new();
    let status = match read_response(&mut r, &mut body) {
        Ok(s) => s,
        // A server that closes after answering (shutdown) still answered.
        Err(e) if e == "server closed the connection" => 200,
        Err(e) => return Err(Error::new(format!("GET {path}: {e}"))),
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Starts a web app (`spec` on `leg`, in the background) that writes the
/// port it listens on to the file given as its last argument
/// (`<work dir>/port`, appended to `spec.args` here), and waits up to
/// `timeout` for it: the app and its address on `127.0.0.1`. An app that
/// exits first fails with its output.
pub fn spawn_web_app(
    leg: &crate::Leg,
    wine: Option<&crate::manifest::Wine>,
    spec: &crate::run::RunSpec,
    timeout: Duration,
) -> Result<(crate::background::Background, SocketAddr)> {
    let port_file = spec.work_dir.join("port");
    let _ = std::fs::remove_file(&port_file);
    let mut spec = spec.clone();
    spec.args.push(port_file.display().to_string());
    let mut app = crate::background::spawn_app(leg, wine, &spec)?;
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(&port_file) {
            if let Ok(port) = text.trim().parse::<u16>() {
                return Ok((app, SocketAddr::from(([127, 0, 0, 1], port))));
            }
        }
        if !app.is_running() || start.elapsed() > timeout {
            let running = app.is_running();
            let outcome = app.finish(Duration::from_secs(5))?;
            return Err(Error::new(format!(
                "the web app {} (exit {:?}): stdout {:?} stderr {:?}",
                if running {
                    format!("wrote no port within {} s", timeout.as_secs())
                } else {
                    "exited before it listened".to_string()
                },
                outcome.exit,
                outcome.stdout,
                outcome.stderr
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A keep-alive server answering `/a` with a fixed body (chunked or
    /// not) and `/b` with a body that changes after the first answer.
    fn server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let b_calls = Arc::new(AtomicU64::new(0));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (calls, b_calls) = (calls.clone(), b_calls.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut w = stream;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            break;
                        }
                        let path = line.split(' ').nth(1).unwrap_or("").to_string();
                        loop {
                            let mut h = String::new();
                            if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                                break;
                            }
                        }
                        let n = calls.fetch_add(1, Ordering::SeqCst);
                        let answer = match path.as_str() {
                            "/a" if n % 2 == 0 => {
                                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_string()
                            }
                            "/a" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n".to_string(),
                            "/b" => {
                                let nb = b_calls.fetch_add(1, Ordering::SeqCst);
                                let body = if nb < 2 { "same" } else { "diff" };
                                format!("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{body}")
                            }
                            _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string(),
                        };
                        if w.write_all(answer.as_bytes()).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    #[test]
    fn counts_checks_and_dechunks() {
        let addr = server();
        let spec = LoadSpec {
            addr,
            paths: vec!["/a".into(), "/a".into(), "/nope".into()],
            connections: 1,
            requests: 30,
            duration: Duration::from_secs(20),
            expected: Arc::default(),
        };
        let r = run(&spec).unwrap();
        assert_eq!(r.total_sent(), 30);
        assert_eq!(r.sent, vec![10, 10, 10]);
        assert_eq!(
            (r.ok, r.failed, r.mismatched),
            (20, 10, 0),
            "{:?}",
            r.errors
        );
        assert_eq!(r.bodies[&0], b"hello");
        assert_eq!(r.latencies_us.len(), 20);
        assert!(r.percentile_us(0.5) <= r.percentile_us(0.99));
        // A body that changes within the run is a mismatch, and so is one
        // that differs from the expected hash.
        let spec = LoadSpec {
            paths: vec!["/b".into()],
            requests: 4,
            expected: Arc::default(),
            ..spec
        };
        let r = run(&spec).unwrap();
        assert_eq!((r.ok, r.mismatched), (4, 2), "{:?}", r.errors);
        let spec = LoadSpec {
            paths: vec!["/a".into()],
            requests: 3,
            expected: Arc::new([(0usize, b"other".to_vec())].into_iter().collect()),
            ..spec
        };
        let r = run(&spec).unwrap();
        assert_eq!((r.ok, r.mismatched), (3, 3));
    }
}
