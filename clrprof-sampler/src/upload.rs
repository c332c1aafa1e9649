//! Uploads of continuous-mode periods: headers, Pyroscope's query
//! parameters, retries with exponential backoff, and a bounded queue of
//! periods kept while the endpoint is down.
//!
//! The queue logic ([`Uploads`]) does not know HTTP: it takes a send
//! function, so it is the same for any transport and is tested on its own;
//! the HTTP request itself is made by [`Poster`], which both continuous
//! modes (`continuous`, `event_upload`) prepare from their
//! [`PeriodSink`].

// Without `http-upload` nothing sends the periods' bytes or URLs.
#![cfg_attr(not(feature = "http-upload"), allow(dead_code))]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

/// Where each period goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeriodSink {
    /// A file per period in this directory (created if missing):
    /// `clrprof-<pid>-<index>.pb.gz`, written whole (a temporary file renamed).
    Directory(PathBuf),
    /// An HTTP `POST` of the `.pb.gz` bytes to this URL, with
    /// `format=pprof&from=<unix s>&until=<unix s>&sampleRate=<Hz>` added to
    /// its query, e.g. `http://pyroscope:4040/ingest?name=my.app` (an
    /// `https://` URL needs the `https-upload` feature). A period counts as
    /// delivered on a 2xx answer.
    Http {
        /// The endpoint.
        url: String,
        /// The longest one upload may take (connect, send, answer).
        timeout: Duration,
    },
}

/// How periods are uploaded (with [`PeriodSink::Http`]).
///
/// The default sends each period once, keeps nothing when it fails, and
/// adds no header and no `name`/`spyName` parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadOptions {
    /// Extra request headers, e.g. `("Authorization", "Bearer …")`,
    /// `("Authorization", "Basic …")` or a tenant, `("X-Scope-OrgID", "team")`.
    pub headers: Vec<(String, String)>,
    /// Pyroscope's `name` query parameter (the application name, with
    /// optional tags: `my.app{env=prod}`), percent-encoded by the SDK.
    pub name: Option<String>,
    /// Pyroscope's `spyName` query parameter (which profiler sent it).
    pub spy_name: Option<String>,
    /// Further attempts after a failed one, per period and ship.
    pub retries: u32,
    /// Wait before the first retry; doubled for each next one, up to
    /// `max_backoff`.
    pub backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// Periods kept in memory while the endpoint is down (0: none); when a
    /// new period would exceed it the oldest is dropped and counted.
    pub queue: usize,
    /// A PEM file of extra root certificates for `https://` endpoints
    /// (a private CA), trusted beside the system's and Mozilla's roots. Needs the
    /// `https-upload` feature.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for UploadOptions {
    fn default() -> Self {
        UploadOptions {
            headers: Vec::new(),
            name: None,
            spy_name: None,
            retries: 0,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            queue: 0,
            ca_file: None,
        }
    }
}

/// The HTTP agent for `options`: `timeout` per request; with the
/// `https-upload` feature, TLS (rustls) trusting the system's roots
/// ([`system_roots`]), Mozilla's (for hosts without a certificate store,
/// such as distroless containers) and the certificates of
/// `options.ca_file`. Fails if the CA file cannot be read
/// or holds no certificate, or if one is asked for without `https-upload`.
#[cfg(feature = "http-upload")]
pub(crate) fn agent(options: &UploadOptions, timeout: Duration) -> Result<ureq::Agent, String> {
    let builder = ureq::AgentBuilder::new().timeout(timeout);
    #[cfg(feature = "https-upload")]
    {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        system_roots(&mut roots);
        if let Some(path) = &options.ca_file {
            use rustls_pki_types::pem::PemObject;
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("CA file {}: {e}", path.display()))?;
            let mut added = 0;
            for cert in certs {
                let cert = cert.map_err(|e| format!("CA file {}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("CA file {}: {e}", path.display()))?;
                added += 1;
            }
            if added == 0 {
                return Err(format!("CA file {}: no certificate in it", path.display()));
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(builder.tls_config(std::sync::Arc::new(config)).build())
    }
    #[cfg(not(feature = "https-upload"))]
    {
        match &options.ca_file {
            Some(path) => Err(format!(
                "CA file {}: HTTPS uploads need clrprof's `https-upload` feature",
                path.display()
            )),
            None => Ok(builder.build()),
        }
    }
}

/// Adds the system's trusted roots to `roots`: on Linux the distribution's
/// bundle (found as OpenSSL finds it), on Windows the `ROOT` system store,
/// on macOS the keychain; `SSL_CERT_FILE` / `SSL_CERT_DIR` replace the
/// search where set (rustls-native-certs). A store that cannot be read, or
/// certificates rustls cannot parse, are skipped (logged at debug level):
/// Mozilla's roots and the CA file still apply. Returns how many were added.
#[cfg(feature = "https-upload")]
pub(crate) fn system_roots(roots: &mut rustls::RootCertStore) -> usize {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        log::debug!("system certificate store: {e}");
    }
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        log::debug!("system certificate store: {ignored} certificate(s) rustls cannot use");
    }
    added
}

/// What a continuous mode posts with: prepared once from its sink (the
/// directory created, or the HTTP agent built), so both continuous modes
/// share the checks and the cfg switch of the `http-upload` feature.
pub(crate) struct Poster {
    #[cfg(feature = "http-upload")]
    agent: ureq::Agent,
}

impl Poster {
    /// Prepares `sink`: creates a directory, or builds the agent for an
    /// endpoint (which needs the `http-upload` feature). Returns the poster
    /// and the upload timeout of one request.
    pub(crate) fn prepare(
        sink: &PeriodSink,
        options: &UploadOptions,
    ) -> clrprof::error::Result<(Poster, Duration)> {
        use clrprof::error::Error;
        let timeout = match sink {
            PeriodSink::Directory(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| {
                    Error::Usage(format!(
                        "continuous profiling: cannot create {}: {e}",
                        dir.display()
                    ))
                })?;
                Duration::from_secs(10)
            }
            #[cfg(feature = "http-upload")]
            PeriodSink::Http { timeout, .. } => *timeout,
            #[cfg(not(feature = "http-upload"))]
            PeriodSink::Http { .. } => {
                return Err(Error::Usage(
                    "continuous profiling to an HTTP endpoint needs clrprof-sampler's \
                     `http-upload` feature"
                        .into(),
                ))
            }
        };
        #[cfg(feature = "http-upload")]
        let poster = Poster {
            agent: agent(options, timeout)
                .map_err(|e| Error::Usage(format!("continuous profiling: {e}")))?,
        };
        #[cfg(not(feature = "http-upload"))]
        let poster = {
            let _ = options;
            Poster {}
        };
        Ok((poster, timeout))
    }

    /// One `POST` of `p` to `url` ([`post`]).
    pub(crate) fn post(
        &self,
        url: &str,
        options: &UploadOptions,
        p: &Pending,
    ) -> Result<(), String> {
        #[cfg(not(feature = "http-upload"))]
        {
            let _ = (options, p);
            Err(format!(
                "cannot send to {url}: built without clrprof-sampler's `http-upload` feature"
            ))
        }
        #[cfg(feature = "http-upload")]
        {
            post(&self.agent, url, options, p)
        }
    }
}

/// Waits `d` before a retry, or less if `stop` is set meanwhile (a
/// continuous mode's stop flag and its condition variable).
pub(crate) fn pause(stop: &(std::sync::Mutex<bool>, std::sync::Condvar), d: Duration) {
    let (flag, cv) = stop;
    let stopped = flag.lock().unwrap_or_else(|e| e.into_inner());
    if !*stopped {
        let _ = cv.wait_timeout(stopped, d);
    }
}

/// The wait before retry `n` (0: the first): `backoff × 2ⁿ`, at most
/// `max_backoff`.
pub(crate) fn backoff(options: &UploadOptions, n: u32) -> Duration {
    let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
    options
        .backoff
        .checked_mul(factor)
        .unwrap_or(options.max_backoff)
        .min(options.max_backoff)
}

/// One encoded period waiting to be sent.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    /// Its index.
    pub index: u64,
    /// The `.pb.gz` bytes.
    pub bytes: Vec<u8>,
    /// Samples in it.
    pub samples: u64,
    /// Start and end, Unix seconds (`from`, `until`).
    pub from: u64,
    /// See `from`.
    pub until: u64,
    /// Samples per second (`sampleRate`).
    pub rate: u64,
}

/// What one [`Uploads::ship`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shipped {
    /// The new period was sent (now or from the queue in this call).
    pub sent_new: bool,
    /// Periods sent in this call, the new one included.
    pub sent: u64,
    /// Attempts after a failed one.
    pub retries: u64,
    /// Periods dropped from the queue in this call, and their samples.
    pub dropped: u64,
    /// See `dropped`.
    pub dropped_samples: u64,
    /// The last failure, if any.
    pub error: Option<String>,
}

/// The queue of periods not yet delivered.
#[derive(Debug, Default)]
pub(crate) struct Uploads {
    queue: VecDeque<Pending>,
}

impl Uploads {
    /// Periods waiting.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Queues `new` behind the waiting periods and sends them oldest first,
    /// each with up to `retries` further attempts (`sleep` waits the
    /// backoff), stopping at the first period that still fails (the
    /// endpoint is down: the rest wait for the next ship). Then drops the
    /// oldest periods beyond `options.queue`.
    pub(crate) fn ship(
        &mut self,
        new: Pending,
        options: &UploadOptions,
        retries: u32,
        send: &mut dyn FnMut(&Pending) -> Result<(), String>,
        sleep: &mut dyn FnMut(Duration),
    ) -> Shipped {
        let new_index = new.index;
        self.queue.push_back(new);
        let mut out = Shipped::default();
        'queue: while let Some(next) = self.queue.front() {
            let mut attempt = 0;
            loop {
                match send(next) {
                    Ok(()) => {
                        out.sent += 1;
                        if next.index == new_index {
                            out.sent_new = true;
                        }
                        self.queue.pop_front();
                        break;
                    }
                    Err(e) => {
                        out.error = Some(e);
                        if attempt >= retries {
                            break 'queue;
                        }
                        sleep(backoff(options, attempt));
                        attempt += 1;
                        out.retries += 1;
                    }
                }
            }
        }
        while self.queue.len() > options.queue {
            if let Some(gone) = self.queue.pop_front() {
                out.dropped += 1;
                out.dropped_samples += gone.samples;
            }
        }
        out
    }

    /// Takes every waiting period out (at exit, to count what is lost).
    pub(crate) fn drain(&mut self) -> Vec<Pending> {
        self.queue.drain(..).collect()
    }
}

/// `s` percent-encoded for a URL query value (RFC 3986 unreserved
/// characters kept).
pub(crate) fn query_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `url` with the period's query parameters added: `format=pprof`, `from`,
/// `until`, `sampleRate`, and `name` and `spyName` where set.
pub(crate) fn upload_url(url: &str, options: &UploadOptions, p: &Pending) -> String {
    let mut full = format!(
        "{url}{}format=pprof&from={}&until={}&sampleRate={}",
        if url.contains('?') { '&' } else { '?' },
        p.from,
        p.until.max(p.from),
        p.rate
    );
    if let Some(name) = &options.name {
        full.push_str("&name=");
        full.push_str(&query_encode(name));
    }
    if let Some(spy) = &options.spy_name {
        full.push_str("&spyName=");
        full.push_str(&query_encode(spy));
    }
    full
}

/// One `POST` of `p` to `url` with `options`' query parameters and
/// headers; `Err` says why it was not delivered (an HTTP status other than
/// 2xx, or the transport's error).
#[cfg(feature = "http-upload")]
pub(crate) fn post(
    agent: &ureq::Agent,
    url: &str,
    options: &UploadOptions,
    p: &Pending,
) -> Result<(), String> {
    let full = upload_url(url, options, p);
    let mut request = agent
        .post(&full)
        .set("Content-Type", "application/octet-stream");
    for (name, value) in &options.headers {
        request = request.set(name, value);
    }
    match request.send_bytes(&p.bytes) {
        Ok(_) => Ok(()),
        Err(ureq::Error::Status(code, response)) => Err(format!(
            "{url} answered HTTP {code} {}",
            response.status_text()
        )),
        Err(e) => Err(format!("cannot send to {url}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(index: u64, samples: u64) -> Pending {
        Pending {
            index,
            bytes: vec![1, 2, 3],
            samples,
            from: 100 + index,
            until: 101 + index,
            rate: 100,
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let o = UploadOptions {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
            ..Default::default()
        };
        let waits: Vec<u128> = (0..5).map(|n| backoff(&o, n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 700, 700]);
        assert_eq!(backoff(&o, 200), Duration::from_millis(700));
    }

    #[test]
    fn retries_then_delivers() {
        let o = UploadOptions {
            retries: 3,
            queue: 4,
            ..Default::default()
        };
        let mut u = Uploads::default();
        let mut calls = 0;
        let mut waits = Vec::new();
        let r = u.ship(
            period(0, 10),
            &o,
            o.retries,
            &mut |_| {
                calls += 1;
                if calls < 3 {
                    Err("HTTP 503".into())
                } else {
                    Ok(())
                }
            },
            &mut |d| waits.push(d),
        );
        assert!(r.sent_new);
        assert_eq!((r.sent, r.retries, r.dropped), (1, 2, 0));
        assert_eq!(waits, [backoff(&o, 0), backoff(&o, 1)]);
        assert_eq!(u.queued(), 0);
    }

    #[test]
    fn queue_is_bounded_oldest_dropped_and_counted_then_sent_in_order() {
        let o = UploadOptions {
            retries: 1,
            queue: 2,
            ..Default::default()
        };
        let mut u = Uploads::default();
        let mut down = |_: &Pending| Err::<(), String>("connection refused".into());
        let mut dropped = (0, 0);
        for i in 0..5 {
            let r = u.ship(period(i, 10 + i), &o, o.retries, &mut down, &mut |_| {});
            assert!(!r.sent_new);
            assert_eq!(r.retries, 1, "one retry of the oldest period per ship");
            dropped.0 += r.dropped;
            dropped.1 += r.dropped_samples;
        }
        // Periods 0, 1 and 2 dropped (10 + 11 + 12 samples); 3 and 4 wait.
        assert_eq!(dropped, (3, 33));
        assert_eq!(u.queued(), 2);
        let mut sent = Vec::new();
        let r = u.ship(
            period(5, 1),
            &o,
            o.retries,
            &mut |p| {
                sent.push(p.index);
                Ok(())
            },
            &mut |_| {},
        );
        assert_eq!(sent, [3, 4, 5]);
        assert!(r.sent_new && r.sent == 3 && r.dropped == 0);
        assert_eq!(u.queued(), 0);
    }

    #[test]
    fn default_options_keep_nothing() {
        let o = UploadOptions::default();
        let mut u = Uploads::default();
        let r = u.ship(
            period(0, 7),
            &o,
            o.retries,
            &mut |_| Err("down".into()),
            &mut |_| panic!("no retry by default"),
        );
        assert_eq!(
            (r.sent, r.retries, r.dropped, r.dropped_samples),
            (0, 0, 1, 7)
        );
        assert_eq!(r.error.as_deref(), Some("down"));
        assert_eq!(u.queued(), 0);
    }

    #[test]
    fn url_has_pyroscope_parameters_encoded() {
        let o = UploadOptions {
            name: Some("shop.api{env=prod, region=eu}".into()),
            spy_name: Some("clrprof".into()),
            ..Default::default()
        };
        let url = upload_url("http://h:4040/ingest", &o, &period(0, 1));
        assert_eq!(
            url,
            "http://h:4040/ingest?format=pprof&from=100&until=101&sampleRate=100\
             &name=shop.api%7Benv%3Dprod%2C%20region%3Deu%7D&spyName=clrprof"
        );
        let url = upload_url(
            "http://h/ingest?x=1",
            &UploadOptions::default(),
            &period(0, 1),
        );
        assert_eq!(
            url,
            "http://h/ingest?x=1&format=pprof&from=100&until=101&sampleRate=100"
        );
    }

    /// Reads one request from `s` (line, headers, body length), records it
    /// in `log` and then answers `status` (so the client sees the answer
    /// only once the request is recorded).
    #[cfg(feature = "http-upload")]
    fn answer<S: std::io::Read + std::io::Write>(mut s: S, status: u16, log: &Seen) {
        use std::io::{BufRead, BufReader, Read};
        let mut request = String::new();
        let mut length = 0usize;
        {
            let mut reader = BufReader::new(&mut s);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                request.push_str(&line);
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            request.push_str(&format!("body {}", body.len()));
        }
        log.lock().unwrap().push(request);
        let _ = write!(
            s,
            "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = s.flush();
    }

    type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    /// A plain-HTTP server on a thread: records each request's line,
    /// headers and body length, and answers with the next status of
    /// `statuses` (the last one repeated).
    #[cfg(feature = "http-upload")]
    fn server(statuses: Vec<u16>) -> (String, Seen) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/ingest", listener.local_addr().unwrap());
        let seen = Seen::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for (k, conn) in listener.incoming().enumerate() {
                let Ok(conn) = conn else { return };
                let status = *statuses.get(k).or(statuses.last()).unwrap();
                answer(conn, status, &log);
            }
        });
        (url, seen)
    }

    #[cfg(feature = "http-upload")]
    #[test]
    fn http_upload_sends_headers_and_parameters_retries_a_503_and_counts_drops() {
        let o = UploadOptions {
            headers: vec![
                ("Authorization".into(), "Bearer s3cret".into()),
                ("X-Scope-OrgID".into(), "tenant-7".into()),
            ],
            name: Some("shop.api{env=prod}".into()),
            spy_name: Some("clrprof".into()),
            retries: 2,
            backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(40),
            queue: 1,
            ca_file: None,
        };
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(5))
            .build();
        // First a 503, then 200: one retry delivers the period.
        let (url, seen) = server(vec![503, 200]);
        let mut u = Uploads::default();
        let r = u.ship(
            period(0, 10),
            &o,
            o.retries,
            &mut |p| post(&agent, &url, &o, p),
            &mut std::thread::sleep,
        );
        assert!(r.sent_new, "{r:?}");
        assert_eq!((r.sent, r.retries, r.dropped), (1, 1, 0));
        let requests = seen.lock().unwrap().clone();
        assert_eq!(requests.len(), 2, "{requests:#?}");
        for req in &requests {
            let first = req.lines().next().unwrap();
            assert_eq!(
                first,
                "POST /ingest?format=pprof&from=100&until=101&sampleRate=100\
                 &name=shop.api%7Benv%3Dprod%7D&spyName=clrprof HTTP/1.1"
            );
            let lower = req.to_ascii_lowercase();
            assert!(
                lower.contains("\r\nauthorization: bearer s3cret\r\n"),
                "{req}"
            );
            assert!(lower.contains("\r\nx-scope-orgid: tenant-7\r\n"), "{req}");
            assert!(req.ends_with("body 3"), "{req}");
        }
        // An endpoint that answers 503 to everything: each ship tries the
        // oldest period 3 times; the queue holds 1, the rest is dropped.
        let (url, seen) = server(vec![503]);
        let mut u = Uploads::default();
        let mut total = Shipped::default();
        for i in 0..3 {
            let r = u.ship(
                period(i, 5),
                &o,
                o.retries,
                &mut |p| post(&agent, &url, &o, p),
                &mut std::thread::sleep,
            );
            assert!(!r.sent_new);
            assert!(
                r.error.as_deref().unwrap_or("").contains("HTTP 503"),
                "{r:?}"
            );
            total.retries += r.retries;
            total.dropped += r.dropped;
            total.dropped_samples += r.dropped_samples;
        }
        assert_eq!(
            (total.retries, total.dropped, total.dropped_samples),
            (6, 2, 10)
        );
        assert_eq!(u.queued(), 1);
        assert_eq!(seen.lock().unwrap().len(), 9);
    }

    #[cfg(feature = "https-upload")]
    #[test]
    fn https_agent_reads_the_ca_file_and_speaks_tls() {
        let dir = std::env::temp_dir().join(format!("clrprof-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let with = |file: Option<&std::path::Path>| UploadOptions {
            ca_file: file.map(Into::into),
            ..Default::default()
        };
        let missing = dir.join("missing.pem");
        let e = agent(&with(Some(&missing)), Duration::from_secs(1))
            .err()
            .unwrap_or_default();
        assert!(e.contains("missing.pem"), "{e}");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no PEM here\n").unwrap();
        let e = agent(&with(Some(&empty)), Duration::from_secs(1))
            .err()
            .unwrap_or_default();
        assert!(e.contains("no certificate"), "{e}");
        // An https:// URL to a plain-HTTP server: the agent starts a TLS
        // handshake, which fails (the server answers in clear text).
        let (url, seen) = server(vec![200]);
        let url = url.replace("http://", "https://");
        let a = agent(&with(None), Duration::from_secs(5)).unwrap();
        let e = post(&a, &url, &UploadOptions::default(), &period(0, 1)).unwrap_err();
        assert!(!e.contains("HTTP 200"), "{e}");
        assert!(seen.lock().unwrap().iter().all(|r| !r.starts_with("POST")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An HTTPS server with a certificate for 127.0.0.1 made now (rcgen):
    /// its URL, its certificate as PEM, and the requests it saw.
    #[cfg(feature = "https-upload")]
    fn https_server() -> (String, String, Seen) {
        use std::sync::Arc;
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let key = rustls_pki_types::PrivatePkcs8KeyDer::from(made.key_pair.serialize_der());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key.into())
        .unwrap();
        let config = Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/ingest", listener.local_addr().unwrap());
        let seen = Seen::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let Ok(tls) = rustls::ServerConnection::new(config.clone()) else {
                    return;
                };
                answer(rustls::StreamOwned::new(tls, conn), 200, &log);
            }
        });
        (url, made.cert.pem(), seen)
    }

    /// Serializes the tests whose agents read `SSL_CERT_FILE`.
    #[cfg(feature = "https-upload")]
    static CERT_ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[cfg(feature = "https-upload")]
    #[test]
    fn https_upload_to_a_server_trusted_through_the_system_store() {
        let _env = CERT_ENV.lock().unwrap_or_else(|p| p.into_inner());
        let (url, pem, seen) = https_server();
        let dir = std::env::temp_dir().join(format!("clrprof-sys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bundle = dir.join("bundle.pem");
        std::fs::write(&bundle, pem).unwrap();
        // The system store, pointed at a bundle holding the server's
        // certificate the way OpenSSL's users point it.
        std::env::set_var("SSL_CERT_FILE", &bundle);
        let a = agent(&UploadOptions::default(), Duration::from_secs(5));
        std::env::remove_var("SSL_CERT_FILE");
        post(&a.unwrap(), &url, &UploadOptions::default(), &period(0, 1)).unwrap();
        let requests = seen.lock().unwrap().clone();
        assert_eq!(
            requests.iter().filter(|r| r.starts_with("POST")).count(),
            1,
            "{requests:#?}"
        );
        // A store that cannot be read fails nothing: Mozilla's roots remain.
        std::env::set_var("SSL_CERT_FILE", dir.join("missing.pem"));
        let a = agent(&UploadOptions::default(), Duration::from_secs(5));
        std::env::remove_var("SSL_CERT_FILE");
        assert!(a.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(feature = "https-upload")]
    #[test]
    fn https_upload_to_a_server_trusted_through_the_ca_file() {
        let _env = CERT_ENV.lock().unwrap_or_else(|p| p.into_inner());
        let (url, pem, seen) = https_server();
        let dir = std::env::temp_dir().join(format!("clrprof-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, pem).unwrap();
        let o = UploadOptions {
            headers: vec![("X-Scope-OrgID".into(), "tenant-7".into())],
            name: Some("shop.api".into()),
            ca_file: Some(ca),
            ..Default::default()
        };
        // Without the CA file the server's certificate is not trusted.
        let plain = agent(&UploadOptions::default(), Duration::from_secs(5)).unwrap();
        let e = post(&plain, &url, &o, &period(0, 1)).unwrap_err();
        assert!(!e.contains("HTTP"), "{e}");
        let trusted = agent(&o, Duration::from_secs(5)).unwrap();
        post(&trusted, &url, &o, &period(1, 1)).unwrap();
        let requests = seen.lock().unwrap().clone();
        let delivered: Vec<_> = requests.iter().filter(|r| r.starts_with("POST")).collect();
        assert_eq!(delivered.len(), 1, "{requests:#?}");
        assert!(delivered[0].starts_with(
            "POST /ingest?format=pprof&from=101&until=102&sampleRate=100&name=shop.api HTTP/1.1"
        ));
        assert!(delivered[0]
            .to_ascii_lowercase()
            .contains("x-scope-orgid: tenant-7"));
        assert!(delivered[0].ends_with("body 3"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
