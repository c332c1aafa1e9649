//! Continuous mode: the sampler's profile cut into periods, each written or
//! sent as pprof while the process runs.
//!
//! Every [`ContinuousConfig::every`] (default 60 s) an SDK thread
//! ([`clrprof::thread::spawn`], never a runtime callback) ends the sampler's
//! current period ([`Sampler::take_period`]), encodes it as gzip-compressed
//! pprof ([`super::pprof`]) and hands it to its [`PeriodSink`]: a file in a
//! directory, or an HTTP `POST` to an endpoint that takes pprof uploads
//! (Grafana Pyroscope's `/ingest`, with `format=pprof`, `from`, `until` and
//! `sampleRate` added to the URL). [`Continuous::finish`] — from
//! `Profiler::finish`, which the SDK runs once on every exit path — stops
//! the sampler and ships the last period.
//!
//! Names: frame names are resolved by the sampling thread right after each
//! tick, while the runtime answers (see [`super`]); a period holds only
//! strings, so encoding and sending it never calls the runtime and works at
//! process exit too.
//!
//! Memory is bounded: between periods the sampler keeps only its frame
//! names (one per distinct function); a period's stacks are dropped once
//! shipped. A period the sink refuses (endpoint down, HTTP error, disk full)
//! is reported ([`Period::destination`], [`ContinuousStats`]) and, by
//! default, dropped, so an endpoint that stays down costs no memory; the
//! next period is shipped on time as usual. Uploads can be retried with
//! exponential backoff and kept in a bounded queue while the endpoint is
//! down ([`UploadOptions`]: what is dropped is counted), and carry headers
//! (auth, tenant) and Pyroscope's `name` and `spyName` parameters; with
//! the `https-upload` feature `https://` endpoints work (rustls, the
//! system's and Mozilla's roots plus [`UploadOptions::ca_file`]).

// Without `http-upload`, the HTTP sink only reports that it is missing.
#![cfg_attr(not(feature = "http-upload"), allow(unused_imports, unused_variables))]

use super::upload::{Pending, Uploads};
pub use super::upload::{PeriodSink, UploadOptions};
use super::{lock, Profile, Sampler};
use clrprof::error::{Error, Result};
use clrprof::thread::ProfilerThread;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How the continuous mode runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContinuousConfig {
    /// Length of a period (default 60 s; at least 10 ms).
    pub every: Duration,
    /// Where each period goes.
    pub sink: PeriodSink,
    /// Headers, query parameters, retries and the queue of uploads (with
    /// [`PeriodSink::Http`]; the default sends each period once).
    pub upload: UploadOptions,
}

impl ContinuousConfig {
    /// Periods of 60 s written to `dir`.
    pub fn to_directory(dir: impl Into<PathBuf>) -> Self {
        ContinuousConfig {
            every: Duration::from_secs(60),
            sink: PeriodSink::Directory(dir.into()),
            upload: UploadOptions::default(),
        }
    }

    /// Periods of 60 s sent to `url` (10 s per upload at most).
    pub fn to_url(url: impl Into<String>) -> Self {
        ContinuousConfig {
            every: Duration::from_secs(60),
            sink: PeriodSink::Http {
                url: url.into(),
                timeout: Duration::from_secs(10),
            },
            upload: UploadOptions::default(),
        }
    }

    /// The same with `upload` options.
    pub fn with_upload(mut self, upload: UploadOptions) -> Self {
        self.upload = upload;
        self
    }

    /// The same with periods of `every`.
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }
}

/// One shipped (or refused) period.
#[derive(Clone, Debug)]
pub struct Period {
    /// 0 for the first period.
    pub index: u64,
    /// When the period began and ended.
    pub start: SystemTime,
    /// See `start`.
    pub end: SystemTime,
    /// Samples in the period.
    pub samples: u64,
    /// Of them, samples with no frame at all (not in the pprof output).
    pub empty: u64,
    /// Size of its `.pb.gz`.
    pub bytes: usize,
    /// Distinct (thread, stack) pairs in the period.
    pub distinct_stacks: usize,
    /// Frame names the sampler keeps across periods (its memory between
    /// periods grows with this only).
    pub frame_names: usize,
    /// Where it went (a file path, or the URL), or why it was refused.
    pub destination: std::result::Result<String, String>,
    /// The last period, shipped by [`Continuous::finish`].
    pub last: bool,
}

/// What the continuous mode has shipped so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContinuousStats {
    /// Periods ended.
    pub periods: u64,
    /// Periods the sink took.
    pub delivered: u64,
    /// Periods given up (dropped): refused with no queue, pushed out of a
    /// full queue, or still queued when the process ended.
    pub refused: u64,
    /// Samples in refused periods.
    pub lost_samples: u64,
    /// Upload attempts after a failed one.
    pub retries: u64,
    /// Periods waiting in the upload queue now.
    pub queued: u64,
}

/// Called with every period, on the SDK's thread (or in `finish`): for
/// records and logs. It must not call the runtime.
pub type PeriodObserver = Arc<dyn Fn(&Period) + Send + Sync>;

struct Inner {
    sampler: Arc<Sampler>,
    config: ContinuousConfig,
    observer: Option<PeriodObserver>,
    poster: super::upload::Poster,
    /// Set (under the lock, with a notify) to stop the thread.
    stop: (Mutex<bool>, Condvar),
    /// Held while a period is taken and shipped: periods go out in order.
    shipping: Mutex<()>,
    thread: Mutex<Option<ProfilerThread<()>>>,
    finished: Mutex<Option<ContinuousStats>>,
    periods: AtomicU64,
    delivered: AtomicU64,
    refused: AtomicU64,
    lost_samples: AtomicU64,
    retries: AtomicU64,
    /// Periods not yet delivered (only used with `shipping` held).
    uploads: Mutex<Uploads>,
}

/// A running continuous mode. See the [module docs](self).
pub struct Continuous {
    inner: Arc<Inner>,
}

impl Continuous {
    /// Starts shipping `sampler`'s profile every `config.every`, calling
    /// `observer` with each period. Call it once the sampler is registered
    /// (e.g. in `Initialize`); the first period ends `every` from now.
    /// Fails if the directory cannot be created or the thread cannot start.
    pub fn start(
        sampler: Arc<Sampler>,
        mut config: ContinuousConfig,
        observer: Option<PeriodObserver>,
    ) -> Result<Continuous> {
        config.every = config.every.max(Duration::from_millis(10));
        let (poster, _) = super::upload::Poster::prepare(&config.sink, &config.upload)?;
        let inner = Arc::new(Inner {
            sampler,
            config,
            observer,
            poster,
            stop: (Mutex::new(false), Condvar::new()),
            shipping: Mutex::new(()),
            thread: Mutex::new(None),
            finished: Mutex::new(None),
            periods: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            lost_samples: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            uploads: Mutex::new(Uploads::default()),
        });
        let theirs = inner.clone();
        let thread =
            clrprof::thread::spawn("clrprof-continuous", move || theirs.run()).map_err(|e| {
                Error::Usage(format!("cannot start the continuous-profiling thread: {e}"))
            })?;
        *lock(&inner.thread) = Some(thread);
        Ok(Continuous { inner })
    }

    /// The counters so far.
    pub fn stats(&self) -> ContinuousStats {
        self.inner.stats()
    }

    /// Stops the periodic thread, stops the sampler and ships the last
    /// period (bounded: the thread is waited for at most the upload timeout
    /// plus [`EXIT_WAIT`](clrprof::exit::EXIT_WAIT)). Call it from
    /// `Profiler::finish`. Later calls return the same counters.
    pub fn finish(&self) -> Result<ContinuousStats> {
        let inner = &self.inner;
        let mut finished = lock(&inner.finished);
        if let Some(stats) = *finished {
            return Ok(stats);
        }
        stop_periods(&inner.stop);
        let wait = inner.upload_timeout() + clrprof::exit::EXIT_WAIT;
        if let Some(thread) = lock(&inner.thread).take() {
            let _ = thread.join_timeout(wait);
        }
        // No tick after this: the last period is complete.
        let stopped = inner.sampler.stop();
        let deadline = Instant::now() + wait;
        let shipped = match clrprof::exit::lock_until(&inner.shipping, deadline) {
            Some(_guard) => {
                let shipped = inner.ship(true);
                // What is still queued dies with the process: count it.
                for gone in lock(&inner.uploads).drain() {
                    inner.refused.fetch_add(1, SeqCst);
                    inner.lost_samples.fetch_add(gone.samples, SeqCst);
                    log::warn!("continuous profiling: period {} lost at exit", gone.index);
                }
                shipped
            }
            None => Err(Error::Usage(
                "continuous profiling: a period is still being shipped; the last one is lost"
                    .into(),
            )),
        };
        let stats = inner.stats();
        *finished = Some(stats);
        stopped.and(shipped).map(|_| stats)
    }
}

impl Inner {
    fn stats(&self) -> ContinuousStats {
        ContinuousStats {
            periods: self.periods.load(SeqCst),
            delivered: self.delivered.load(SeqCst),
            refused: self.refused.load(SeqCst),
            lost_samples: self.lost_samples.load(SeqCst),
            retries: self.retries.load(SeqCst),
            queued: lock(&self.uploads).queued() as u64,
        }
    }

    fn upload_timeout(&self) -> Duration {
        match &self.config.sink {
            PeriodSink::Http { timeout, .. } => *timeout,
            PeriodSink::Directory(_) => Duration::ZERO,
        }
    }

    fn run(&self) {
        run_periods(self.config.every, &self.stop, &self.shipping, || {
            let _ = self.ship(false);
        });
    }

    /// Ends the sampler's period and ships it. Called with `shipping` held.
    fn ship(&self, last: bool) -> Result<()> {
        let profile = self.sampler.take_period()?;
        let index = self.periods.fetch_add(1, SeqCst);
        let bytes = profile.pprof_bytes();
        let size = bytes.len();
        let destination = match &self.config.sink {
            PeriodSink::Directory(_) => {
                let d = self.send(index, &bytes);
                match &d {
                    Ok(_) => self.delivered.fetch_add(1, SeqCst),
                    Err(e) => {
                        log::warn!("continuous profiling: period {index} lost: {e}");
                        self.lost_samples.fetch_add(profile.samples(), SeqCst);
                        self.refused.fetch_add(1, SeqCst)
                    }
                };
                d
            }
            PeriodSink::Http { url, .. } => self.upload(index, url, &profile, bytes, last),
        };
        let (start, end) = profile.time_range();
        let now = SystemTime::now();
        let period = Period {
            index,
            start: start.unwrap_or(now),
            end: end.unwrap_or(now),
            samples: profile.samples(),
            empty: profile.empty(),
            bytes: size,
            distinct_stacks: profile.distinct_stacks(),
            frame_names: profile.frame_names().len(),
            destination,
            last,
        };
        if let Some(observer) = &self.observer {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| observer(&period)));
        }
        match period.destination {
            Ok(_) => Ok(()),
            Err(e) => Err(Error::Usage(e)),
        }
    }

    fn send(&self, index: u64, bytes: &[u8]) -> std::result::Result<String, String> {
        match &self.config.sink {
            PeriodSink::Directory(dir) => {
                let name = format!("clrprof-{}-{index:05}.pb.gz", std::process::id());
                let path = dir.join(&name);
                let tmp = dir.join(format!(".{name}.tmp"));
                std::fs::write(&tmp, bytes)
                    .and_then(|_| std::fs::rename(&tmp, &path))
                    .map(|_| path.display().to_string())
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            }
            PeriodSink::Http { url, .. } => Err(format!("{url}: not a directory sink")),
        }
    }
}

impl Inner {
    /// Queues period `index` and sends what is queued (see [`Uploads::ship`]);
    /// the last period gets no retries (the process is exiting).
    fn upload(
        &self,
        index: u64,
        url: &str,
        profile: &Profile,
        bytes: Vec<u8>,
        last: bool,
    ) -> std::result::Result<String, String> {
        let secs = |t: Option<SystemTime>| {
            t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
                .unwrap_or(0)
        };
        let (start, end) = profile.time_range();
        let pending = Pending {
            index,
            bytes,
            samples: profile.samples(),
            from: secs(start),
            until: secs(end),
            rate: match profile.period_nanos() {
                0 => 0,
                p => 1_000_000_000 / p,
            },
        };
        let options = &self.config.upload;
        let retries = if last { 0 } else { options.retries };
        let mut uploads = lock(&self.uploads);
        let r = uploads.ship(
            pending,
            options,
            retries,
            &mut |p| self.poster.post(url, &self.config.upload, p),
            &mut |d| super::upload::pause(&self.stop, d),
        );
        let queued = uploads.queued();
        drop(uploads);
        self.delivered.fetch_add(r.sent, SeqCst);
        self.retries.fetch_add(r.retries, SeqCst);
        self.refused.fetch_add(r.dropped, SeqCst);
        self.lost_samples.fetch_add(r.dropped_samples, SeqCst);
        if r.dropped > 0 {
            log::warn!(
                "continuous profiling: {} period(s) dropped ({} samples): {}",
                r.dropped,
                r.dropped_samples,
                r.error.as_deref().unwrap_or("")
            );
        }
        if r.sent_new {
            Ok(url.to_string())
        } else {
            let e = r.error.unwrap_or_default();
            Err(if queued > 0 && !last {
                format!("{e} (queued, {queued} waiting)")
            } else {
                e
            })
        }
    }
}

/// Stops [`run_periods`]: sets `stop` and wakes the loop. Bounded at exit:
/// on Windows the system has ended the periodic thread before the exit
/// handlers run, and it may have been ended holding this lock (the loop
/// takes it every period); the flag is then left, the thread being gone.
pub(crate) fn stop_periods(stop: &(Mutex<bool>, Condvar)) {
    let (flag, cv) = stop;
    if let Some(mut stopped) = clrprof::exit::lock_unless_exiting(flag) {
        *stopped = true;
    }
    cv.notify_all();
}

/// The shipping loop of a continuous mode: waits a period (or until `stop`
/// is set), then calls `ship` holding `shipping`, until stopped. A period
/// whose shipping overran starts when it ends: later periods are simply
/// longer, nothing is dropped. Stopped while waiting for `shipping`, it
/// returns without shipping (`finish` ships the rest).
pub(crate) fn run_periods(
    every: Duration,
    stop: &(Mutex<bool>, Condvar),
    shipping: &Mutex<()>,
    mut ship: impl FnMut(),
) {
    let mut next = Instant::now() + every;
    loop {
        {
            let (flag, cv) = stop;
            let mut stopped = lock(flag);
            while !*stopped {
                let now = Instant::now();
                if now >= next {
                    break;
                }
                stopped = match cv.wait_timeout(stopped, next - now) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                };
            }
            if *stopped {
                return;
            }
        }
        next += every;
        let now = Instant::now();
        if next < now {
            next = now + every;
        }
        // reentrancy: sampler-shipping
        let _guard = lock(shipping);
        if *lock(&stop.0) {
            return;
        }
        ship();
    }
}
