//! Continuous mode for the event profiles ([`crate::events`]): every
//! period, each kind's profile (allocations, lock contention, exceptions)
//! is cut, encoded as its own pprof ([`crate::kinds::event_pprof`]) and
//! shipped to the same sink as the sampler's periods
//! ([`crate::continuous`]): a file `clrprof-<pid>-<index>.<kind>.pb.gz`
//! in the directory, or one `POST` per kind to the URL (the same query
//! parameters, headers, retries and bounded queue, one queue per kind), so
//! that a backend files allocations apart from wall time.
//!
//! The periods are cut by an SDK thread, never in a runtime callback;
//! [`EventContinuous::finish`] ships the last one (from `Profiler::finish`).
//! A period holds only strings: encoding and sending it never calls the
//! runtime.

#![cfg_attr(not(feature = "http-upload"), allow(unused_variables))]

use crate::continuous::{ContinuousConfig, PeriodSink};
use crate::events::{EventProfiles, ProfileKind};
use crate::kinds::{event_pprof, gzip_pprof};
use crate::upload::{Pending, Uploads};
use clrprof::error::{Error, Result};
use clrprof::thread::ProfilerThread;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What happened to one kind's period.
#[derive(Clone, Debug)]
pub struct KindPeriod {
    /// The kind.
    pub kind: ProfileKind,
    /// 0 for the first period.
    pub index: u64,
    /// The sums of the period's values (e.g. objects and bytes).
    pub totals: [u64; 2],
    /// Size of its `.pb.gz`.
    pub bytes: usize,
    /// Where it went, or why it was refused.
    pub destination: std::result::Result<String, String>,
    /// The last period, shipped by [`EventContinuous::finish`].
    pub last: bool,
}

/// Called with each kind's period.
pub type KindPeriodObserver = Arc<dyn Fn(&KindPeriod) + Send + Sync>;

/// Counters of [`EventContinuous`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventContinuousStats {
    /// Kind periods shipped or refused.
    pub periods: u64,
    /// Delivered.
    pub delivered: u64,
    /// Refused or dropped.
    pub refused: u64,
}

struct Inner {
    events: Arc<EventProfiles>,
    kinds: Vec<ProfileKind>,
    config: ContinuousConfig,
    runtime: Option<String>,
    observer: Option<KindPeriodObserver>,
    poster: crate::upload::Poster,
    stop: (Mutex<bool>, Condvar),
    shipping: Mutex<()>,
    index: AtomicU64,
    periods: AtomicU64,
    delivered: AtomicU64,
    refused: AtomicU64,
    uploads: Mutex<Vec<Uploads>>,
    thread: Mutex<Option<ProfilerThread<()>>>,
    finished: Mutex<Option<EventContinuousStats>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The event profiles shipped every period.
pub struct EventContinuous {
    inner: Arc<Inner>,
}

impl EventContinuous {
    /// Starts shipping the `kinds` of `events` (of
    /// [`ProfileKind::Alloc`], [`ProfileKind::Lock`],
    /// [`ProfileKind::Exception`], [`ProfileKind::Heap`]) every
    /// `config.every` to `config.sink` (the live heap as of the period's
    /// last collection: a gauge, not cut),
    /// labelled with `runtime` (the runtime's version).
    pub fn start(
        events: Arc<EventProfiles>,
        kinds: &[ProfileKind],
        mut config: ContinuousConfig,
        runtime: Option<String>,
        observer: Option<KindPeriodObserver>,
    ) -> Result<EventContinuous> {
        config.every = config.every.max(Duration::from_millis(10));
        let kinds: Vec<ProfileKind> = kinds
            .iter()
            .copied()
            .filter(|k| {
                matches!(
                    k,
                    ProfileKind::Alloc
                        | ProfileKind::Lock
                        | ProfileKind::Exception
                        | ProfileKind::Heap
                )
            })
            .collect();
        let (poster, _) = crate::upload::Poster::prepare(&config.sink, &config.upload)?;
        let n = kinds.len();
        let inner = Arc::new(Inner {
            events,
            kinds,
            config,
            runtime,
            observer,
            poster,
            stop: (Mutex::new(false), Condvar::new()),
            shipping: Mutex::new(()),
            index: AtomicU64::new(0),
            periods: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            uploads: Mutex::new((0..n).map(|_| Uploads::default()).collect()),
            thread: Mutex::new(None),
            finished: Mutex::new(None),
        });
        let theirs = inner.clone();
        let thread = clrprof::thread::spawn("clrprof-event-continuous", move || theirs.run())
            .map_err(|e| Error::Usage(format!("cannot start the event-profile thread: {e}")))?;
        *lock(&inner.thread) = Some(thread);
        Ok(EventContinuous { inner })
    }

    /// The counters so far.
    pub fn stats(&self) -> EventContinuousStats {
        self.inner.stats()
    }

    /// Stops the periodic thread and ships the last period of every kind
    /// (bounded waits). Later calls return the same counters.
    pub fn finish(&self) -> EventContinuousStats {
        let inner = &self.inner;
        let mut finished = lock(&inner.finished);
        if let Some(stats) = *finished {
            return stats;
        }
        crate::continuous::stop_periods(&inner.stop);
        let wait = inner.upload_timeout() + clrprof::exit::EXIT_WAIT;
        if let Some(thread) = lock(&inner.thread).take() {
            let _ = thread.join_timeout(wait);
        }
        let deadline = Instant::now() + wait;
        if let Some(_guard) = clrprof::exit::lock_until(&inner.shipping, deadline) {
            inner.ship(true);
            for queue in lock(&inner.uploads).iter_mut() {
                for gone in queue.drain() {
                    inner.refused.fetch_add(1, SeqCst);
                    log::warn!("event profiles: period {} lost at exit", gone.index);
                }
            }
        }
        let stats = inner.stats();
        *finished = Some(stats);
        stats
    }
}

impl Inner {
    fn stats(&self) -> EventContinuousStats {
        EventContinuousStats {
            periods: self.periods.load(SeqCst),
            delivered: self.delivered.load(SeqCst),
            refused: self.refused.load(SeqCst),
        }
    }

    fn upload_timeout(&self) -> Duration {
        match &self.config.sink {
            PeriodSink::Http { timeout, .. } => *timeout * (self.kinds.len() as u32).max(1),
            PeriodSink::Directory(_) => Duration::ZERO,
        }
    }

    fn run(&self) {
        crate::continuous::run_periods(self.config.every, &self.stop, &self.shipping, || {
            self.ship(false)
        });
    }

    /// Cuts and ships one period of every kind. Called with `shipping` held.
    fn ship(&self, last: bool) {
        let now = SystemTime::now();
        let index = self.index.fetch_add(1, SeqCst);
        for (slot, &kind) in self.kinds.iter().enumerate() {
            let (pprof, totals, start) = if kind == ProfileKind::Heap {
                let Some(profile) = self.events.live_heap().and_then(|h| h.profile()) else {
                    continue;
                };
                (
                    profile.to_pprof(self.runtime.as_deref(), now),
                    profile.totals(),
                    profile.as_of,
                )
            } else {
                let Some(profile) = self.events.take_period(kind, now) else {
                    continue;
                };
                (
                    event_pprof(&profile, kind, self.runtime.as_deref(), now),
                    profile.totals(),
                    profile.start(),
                )
            };
            let bytes = gzip_pprof(&pprof);
            let size = bytes.len();
            self.periods.fetch_add(1, SeqCst);
            let destination = match &self.config.sink {
                PeriodSink::Directory(dir) => {
                    let name = format!(
                        "clrprof-{}-{index:05}.{}.pb.gz",
                        std::process::id(),
                        kind.name()
                    );
                    let path = dir.join(&name);
                    let tmp = dir.join(format!(".{name}.tmp"));
                    let d = std::fs::write(&tmp, &bytes)
                        .and_then(|_| std::fs::rename(&tmp, &path))
                        .map(|_| path.display().to_string())
                        .map_err(|e| format!("cannot write {}: {e}", path.display()));
                    match &d {
                        Ok(_) => self.delivered.fetch_add(1, SeqCst),
                        Err(_) => self.refused.fetch_add(1, SeqCst),
                    };
                    d
                }
                PeriodSink::Http { url, .. } => {
                    let secs = |t: Option<SystemTime>| {
                        t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                            .map(|d| d.as_secs())
                            .unwrap_or(0)
                    };
                    let pending = Pending {
                        index,
                        bytes,
                        samples: totals[0],
                        from: secs(start),
                        until: secs(Some(now)),
                        rate: 0,
                    };
                    self.upload(slot, url, pending, last)
                }
            };
            if let Some(observer) = &self.observer {
                let period = KindPeriod {
                    kind,
                    index,
                    totals,
                    bytes: size,
                    destination,
                    last,
                };
                let _ =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| observer(&period)));
            }
        }
    }

    fn upload(
        &self,
        slot: usize,
        url: &str,
        pending: Pending,
        last: bool,
    ) -> std::result::Result<String, String> {
        let options = &self.config.upload;
        let retries = if last { 0 } else { options.retries };
        let mut uploads = lock(&self.uploads);
        let Some(queue) = uploads.get_mut(slot) else {
            return Err("no upload queue".into());
        };
        let r = queue.ship(
            pending,
            options,
            retries,
            &mut |p| self.poster.post(url, &self.config.upload, p),
            &mut |d| crate::upload::pause(&self.stop, d),
        );
        drop(uploads);
        self.delivered.fetch_add(r.sent, SeqCst);
        self.refused.fetch_add(r.dropped, SeqCst);
        if r.sent_new {
            Ok(url.to_string())
        } else {
            Err(r.error.unwrap_or_default())
        }
    }
}
