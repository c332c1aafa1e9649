//! sampler: a sampling profiler writing folded stacks.
//!
//! Where the runtime has `ICorProfilerInfo10` (.NET Core 3.0 and later —
//! .NET Core 3.1 included) it samples every managed thread with
//! `SuspendRuntime` + `DoStackSnapshot` ([`clrprof_sampler`]). On older
//! runtimes, or with `CLRPROF_SAMPLER_SOURCE=shadow-stack`, it falls back to
//! the shadow stacks its ELT hooks keep ([`clrprof_sampler::ShadowStackSource`]):
//! no suspension, JIT-compiled frames only. The `sampling` record says which
//! method was used.
//!
//! Configuration (environment):
//! - `CLRPROF_OUTPUT`: folded stacks (`root;...;leaf N`) are written here when
//!   the profiler finishes (shutdown, or process exit when there is none),
//!   and a speedscope file and a pprof file next to it
//!   (`<CLRPROF_OUTPUT>.speedscope.json`, `<CLRPROF_OUTPUT>.pb.gz`);
//! - `CLRPROF_OUTPUT.jsonl` (the same path plus `.jsonl`): JSON Lines records
//!   `{"event":"runtime",...}`, `{"event":"sampling","method":"suspend-runtime"|"shadow-stack"|"none",...}`,
//!   `{"event":"async-walk",...}` (what an asynchronous walk of another
//!   thread gave, on runtimes without `SuspendRuntime`), and when it
//!   finishes `{"event":"samples","method":...,"samples":N,"ticks":N,...}`
//!   (with the nanoseconds the sampling thread spent per phase, summed over
//!   the ticks: `late_ns`, `suspend_ns`, `walk_ns`, `resume_ns`, `count_ns`,
//!   see [`clrprof_sampler::SamplerPhases`], and the sampling thread's CPU
//!   time `thread_cpu_ns`);
//! - `CLRPROF_SAMPLER_PROFILES`: a comma list of the profiles to take, of
//!   `cpu`, `wall`, `alloc`, `lock`, `exception` (default `cpu,wall`;
//!   `none`: no profile, e.g. to measure the trace context alone); each
//!   is written beside `CLRPROF_OUTPUT` as `<CLRPROF_OUTPUT>.<kind>.pb.gz`
//!   (e.g. `out.folded.alloc.pb.gz`), the file of one pprof profile type,
//!   as backends that file types apart want them. Without `cpu` and `wall`
//!   the sampler is not started. `alloc`: the runtime's `GCAllocationTick`
//!   events through an EventPipe session (.NET 5+), else (.NET Core 3.1, or
//!   `CLRPROF_SAMPLER_ALLOC_SOURCE=object-allocated`) `ObjectAllocated`
//!   sampled once per `CLRPROF_SAMPLER_ALLOC_EVERY` bytes a thread allocates
//!   (default 102400; 0: every object); the allocation samples' walks may
//!   take `CLRPROF_SAMPLER_ALLOC_BUDGET` per cent of the time (default 0.5;
//!   100: every sample walked), past which samples are walked at random
//!   and weighted ([`clrprof_sampler::budget`]); `lock`: the runtime's
//!   `ContentionStop` events (.NET 5+); `exception`: `ExceptionThrown`, 1 in
//!   `CLRPROF_SAMPLER_EXCEPTION_EVERY` per type kept (default 1: all);
//!   `heap`: the live heap ([`clrprof_sampler::live_heap`]: the sampled
//!   allocations kept by weak handles and checked at every collection,
//!   .NET 7 and later; at most `CLRPROF_SAMPLER_HEAP_MAX_TRACKED` objects,
//!   default 4096), written as `<CLRPROF_OUTPUT>.heap.pb.gz` as of the last
//!   collection, with a `{"event":"live-heap",...}` record. See
//!   [`clrprof_sampler::events`]. Records `{"event":"profiles",...}` at
//!   start and `{"event":"event-profiles",...}` at the end;
//! - `CLRPROF_SAMPLER_RATE`: samples per second (default 1000);
//! - `CLRPROF_SAMPLER_SOURCE` = `suspend-runtime` (default where the runtime
//!   has it) | `signals` (Linux: `SIGPROF`, per-thread CPU-time timers, the
//!   suspension as the fallback; [`clrprof_sampler::signal`]) | `shadow-stack`;
//! - `CLRPROF_SAMPLER_WALL_THREADS`: with `signals`, threads asked for a
//!   wall-time sample per tick, in turn (default 5; 0: no wall profile);
//! - continuous mode ([`clrprof_sampler::continuous`]), on when one of these
//!   is set: `CLRPROF_SAMPLER_CONTINUOUS_DIR` (a `.pb.gz` file per period in
//!   that directory) or `CLRPROF_SAMPLER_CONTINUOUS_URL` (an HTTP `POST` per
//!   period, e.g. `http://localhost:4040/ingest?name=my.app`);
//!   `CLRPROF_SAMPLER_CONTINUOUS_EVERY`: the period in seconds (default 60,
//!   fractions allowed). Uploads: `CLRPROF_SAMPLER_CONTINUOUS_HEADERS`
//!   (`;`-separated `Name=Value` pairs, split at the first `=`, e.g.
//!   `Authorization=Bearer T;X-Scope-OrgID=team`),
//!   `CLRPROF_SAMPLER_CONTINUOUS_CA` (a PEM file of extra root certificates
//!   for an `https://` URL; the system's and Mozilla's roots are trusted anyway),
//!   `CLRPROF_SAMPLER_CONTINUOUS_NAME` (Pyroscope's `name`, e.g.
//!   `shop.api{env=prod}`; `spyName` is `clrprof`),
//!   `CLRPROF_SAMPLER_CONTINUOUS_RETRIES` (further attempts per period,
//!   backoff from 0.5 s doubling to 8 s; default 0) and
//!   `CLRPROF_SAMPLER_CONTINUOUS_QUEUE` (periods kept while the endpoint is
//!   down; default 0). Each period gives a record
//!   `{"event":"period","index":N,"samples":N,"bytes":N,"ok":true|false,...}`
//!   and the end a `{"event":"continuous",...}` record; the single-file
//!   outputs above are not written then.
//!
//! - heap snapshots ([`clrprof_sampler::heap_snapshot`]: a histogram of
//!   every live object by type): `CLRPROF_SAMPLER_HEAP_SNAPSHOT_EVERY=S`
//!   takes one every `S` seconds (fractions allowed), written beside
//!   `CLRPROF_OUTPUT` as `<CLRPROF_OUTPUT>.heap-snapshot-<n>.json`, `.txt`
//!   and `.pb.gz`, with a `{"event":"heap-snapshot",...}` record each.
//!   Loaded by attach (`clrprof heap --pid PID`) with the client data
//!   `heap_snapshot=PATH`, the profiler takes one snapshot, writes `PATH`
//!   (JSON), `PATH.txt` and `PATH.pb.gz` (or `PATH.error` with the reason)
//!   and detaches.
//! - `CLRPROF_SAMPLER_OTLP=1`: the periods go out as OTLP profiles instead
//!   ([`clrprof_sampler::otlp`]; with `heap` among the profiles, the live
//!   heap as of each period's last collection too), to OpenTelemetry's
//!   `OTEL_EXPORTER_OTLP_[PROFILES_]ENDPOINT` with its headers, compression
//!   and timeout, the resource from `OTEL_SERVICE_NAME` and
//!   `OTEL_RESOURCE_ATTRIBUTES`; the period, retries and queue are the
//!   continuous mode's variables. Records `{"event":"otlp-period",...}` per
//!   period and `{"event":"otlp","periods":N,"delivered":N,...}` at the end.
//! - trace context: with the SDK's startup hook loaded
//!   (`DOTNET_STARTUP_HOOKS`, `CLRPROF_CONTEXT_LIBRARY` naming this library;
//!   `clrprof run --trace-context` sets both), samples carry `trace_id`,
//!   `span_id`, `local_root_span_id` and `trace_endpoint`; the record
//!   `{"event":"trace-context","writer":...,"writes":N,"labelled_samples":N}`
//!   says what the hook reported.
//!
//! The sampler is an SDK component: registered in `Initialize`, it receives
//! the thread, unload and module-load callbacks it needs from the SDK and
//! starts sampling at the second module load (the runtime is up and the
//! first application assembly is loading). This profiler forwards only the
//! callbacks of the event profiles (`EventPipeEventDelivered`,
//! `ExceptionThrown`, `ObjectAllocated`) to [`clrprof_sampler::events::EventProfiles`].

use clrprof::allocations::AllocationSample;
use clrprof::attach::ClientData;
use clrprof::elt::{self, shadow_stack, EltHooks, EltOptions, EltRuntime, Hooked};
use clrprof::eventpipe::EventPipeEvent;
use clrprof::output::JsonLines;
use clrprof::stackwalk::{FrameBuffer, ThreadGate, WalkOptions};
use clrprof::{
    profiler, AttachEventMasks, EventMask, EventMasks, FunctionId, Loaded, ModuleId, NameCache,
    Profiler, ProfilerInfo, RawThreadId, Result, ThreadId,
};
use clrprof::{ClassId, ObjectId};
use clrprof_sampler::event_upload::{EventContinuous, KindPeriod};
use clrprof_sampler::events::{AllocSource, EventProfiles, EventProfilesConfig, ProfileKind};
use clrprof_sampler::heap_snapshot::{HeapSnapshot, HeapSnapshots};
use clrprof_sampler::kinds;
use clrprof_sampler::otlp::{OtlpConfig, OtlpExport};
use clrprof_sampler::{
    Continuous, ContinuousConfig, Period, PeriodSink, Sampler, SamplerConfig, ShadowStackSource,
};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Where the JSON Lines records go (set from `CLRPROF_OUTPUT` at start-up).
const RECORDS_VAR: &str = "CLRPROF_SAMPLER_RECORDS";

/// The profiler's state.
#[profiler(clsid = "{5B0C2E71-9A43-4D1E-8F26-7C1D3E5A9B42}")]
pub struct SamplerProfiler {
    out: Arc<JsonLines>,
    names: Arc<NameCache>,
    sampler: OnceLock<Arc<Sampler>>,
    /// The continuous mode, when configured.
    continuous: OnceLock<Continuous>,
    /// Why no sampler could be registered, if so.
    no_sampler: OnceLock<String>,
    /// The ELT hooks of the shadow-stack fallback, when it is used.
    shadow: OnceLock<EltRuntime<ShadowHooks>>,
    modules: AtomicUsize,
    /// Threads seen by `ThreadCreated`, for the asynchronous-walk check.
    threads: Mutex<Vec<RawThreadId>>,
    /// Guards walks this profiler makes outside the sampler (an SDK
    /// component: it hears ThreadDestroyed from the SDK).
    gate: OnceLock<Arc<ThreadGate>>,
    /// The allocation, lock and exception profiles, when asked for.
    events: OnceLock<Arc<EventProfiles>>,
    /// The runtime's version (`major.minor.build`), a pprof label.
    runtime: OnceLock<String>,
    /// Continuous mode of the event profiles, when configured.
    event_continuous: OnceLock<EventContinuous>,
    /// Heap snapshots, when asked for (a period, or an attach).
    snapshots: OnceLock<Arc<HeapSnapshots>>,
    /// The thread taking them (periodic, or the attach's one).
    snapshot_thread: Mutex<Option<clrprof::thread::ProfilerThread<()>>>,
    /// Set to stop the periodic snapshots.
    snapshot_stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    /// The attach's snapshot file (`heap_snapshot=PATH`).
    attach_snapshot: OnceLock<std::path::PathBuf>,
    /// The OTLP profiles export (`CLRPROF_SAMPLER_OTLP=1`), when configured.
    otlp: OnceLock<OtlpExport>,
}

impl Default for SamplerProfiler {
    fn default() -> Self {
        if std::env::var_os(RECORDS_VAR).is_none() {
            if let Some(out) = std::env::var_os("CLRPROF_OUTPUT") {
                let mut p = out;
                p.push(".jsonl");
                std::env::set_var(RECORDS_VAR, p);
            }
        }
        SamplerProfiler {
            out: Arc::new(JsonLines::from_env(RECORDS_VAR)),
            names: Arc::new(NameCache::new()),
            sampler: OnceLock::new(),
            continuous: OnceLock::new(),
            no_sampler: OnceLock::new(),
            shadow: OnceLock::new(),
            modules: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
            gate: OnceLock::new(),
            events: OnceLock::new(),
            runtime: OnceLock::new(),
            event_continuous: OnceLock::new(),
            snapshots: OnceLock::new(),
            snapshot_thread: Mutex::new(None),
            snapshot_stop: Arc::new((Mutex::new(false), std::sync::Condvar::new())),
            attach_snapshot: OnceLock::new(),
            otlp: OnceLock::new(),
        }
    }
}

/// ELT hooks that only keep shadow stacks (the fallback's stack source).
pub struct ShadowHooks;

impl EltHooks for ShadowHooks {
    type Function = ();
    fn map_function(&self, _info: &ProfilerInfo, _function: FunctionId<'_>) -> Option<()> {
        Some(())
    }
    fn enter(&self, function: &Hooked<()>) {
        shadow_stack::enter(function);
    }
    fn leave(&self, function: &Hooked<()>) {
        shadow_stack::leave(function);
    }
    fn tailcall(&self, function: &Hooked<()>) {
        shadow_stack::tailcall(function);
    }
}

/// Whether to sample shadow stacks: asked for, or `SuspendRuntime` missing.
fn wants_shadow_stacks(info: &ProfilerInfo) -> bool {
    match std::env::var("CLRPROF_SAMPLER_SOURCE").as_deref() {
        Ok("shadow-stack") => true,
        Ok("suspend-runtime") | Ok("signals") => false,
        _ => !info.has_info(10) || !info.has_info(4),
    }
}

fn rate() -> u32 {
    std::env::var("CLRPROF_SAMPLER_RATE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(1000)
}

/// Whether the periods go out as OTLP profiles (`CLRPROF_SAMPLER_OTLP=1`)
/// instead of the continuous mode's pprof.
fn otlp_wanted() -> bool {
    std::env::var("CLRPROF_SAMPLER_OTLP").is_ok_and(|v| v.trim() == "1")
}

/// The period of the continuous modes (`CLRPROF_SAMPLER_CONTINUOUS_EVERY`
/// seconds, default 60).
fn period() -> std::time::Duration {
    std::env::var("CLRPROF_SAMPLER_CONTINUOUS_EVERY")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
        .unwrap_or(std::time::Duration::from_secs(60))
}

/// The OTLP export's configuration: OpenTelemetry's environment
/// (`OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`),
/// the period and the retries and queue of the continuous mode's variables.
fn otlp_config(runtime: Option<&str>) -> std::result::Result<OtlpConfig, String> {
    let mut config = OtlpConfig::from_env(&|name| std::env::var(name).ok(), runtime, period())?;
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if let Some(n) = var("CLRPROF_SAMPLER_CONTINUOUS_RETRIES").and_then(|v| v.trim().parse().ok()) {
        config.upload.retries = n;
    }
    if let Some(n) = var("CLRPROF_SAMPLER_CONTINUOUS_QUEUE").and_then(|v| v.trim().parse().ok()) {
        config.upload.queue = n;
    }
    config.upload.ca_file = var("CLRPROF_SAMPLER_CONTINUOUS_CA").map(Into::into);
    // Never longer than a period: a hanging endpoint delays no period by more than one.
    config.timeout = config
        .timeout
        .min(config.every.max(std::time::Duration::from_secs(1)));
    Ok(config)
}

/// The continuous mode's configuration from the environment, if it is on.
fn continuous_config() -> Option<ContinuousConfig> {
    if otlp_wanted() {
        return None;
    }
    let mut config = if let Some(dir) = std::env::var_os("CLRPROF_SAMPLER_CONTINUOUS_DIR") {
        ContinuousConfig::to_directory(dir)
    } else {
        ContinuousConfig::to_url(std::env::var("CLRPROF_SAMPLER_CONTINUOUS_URL").ok()?)
    };
    if let Some(every) = std::env::var("CLRPROF_SAMPLER_CONTINUOUS_EVERY")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
    {
        config.every = std::time::Duration::from_secs_f64(every);
    }
    if let PeriodSink::Http { timeout, .. } = &mut config.sink {
        // Never longer than a period: a hanging endpoint delays no period
        // by more than one.
        *timeout = (*timeout).min(config.every.max(std::time::Duration::from_secs(1)));
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    // `Name=Value` pairs separated by `;`, split at the first `=`.
    if let Some(headers) = var("CLRPROF_SAMPLER_CONTINUOUS_HEADERS") {
        config.upload.headers = headers
            .split(';')
            .filter_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                Some((name.trim().to_string(), value.trim().to_string()))
            })
            .filter(|(name, _)| !name.is_empty())
            .collect();
    }
    config.upload.name = var("CLRPROF_SAMPLER_CONTINUOUS_NAME");
    config.upload.ca_file = var("CLRPROF_SAMPLER_CONTINUOUS_CA").map(Into::into);
    config.upload.spy_name = Some("clrprof".into());
    if let Some(n) = var("CLRPROF_SAMPLER_CONTINUOUS_RETRIES").and_then(|v| v.trim().parse().ok()) {
        config.upload.retries = n;
    }
    if let Some(n) = var("CLRPROF_SAMPLER_CONTINUOUS_QUEUE").and_then(|v| v.trim().parse().ok()) {
        config.upload.queue = n;
    }
    Some(config)
}

/// The profile kinds asked for (`CLRPROF_SAMPLER_PROFILES`, default
/// `cpu,wall`), or why the list is wrong.
fn profile_kinds() -> std::result::Result<Vec<ProfileKind>, String> {
    match std::env::var("CLRPROF_SAMPLER_PROFILES") {
        Ok(list) if list.trim() == "none" => Ok(Vec::new()),
        Ok(list) if !list.trim().is_empty() => ProfileKind::parse_list(&list),
        _ => Ok(vec![ProfileKind::Cpu, ProfileKind::Wall]),
    }
}

/// The event profiles' configuration from the environment.
fn event_config(kinds: &[ProfileKind]) -> EventProfilesConfig {
    let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string());
    let mut config = EventProfilesConfig {
        alloc: kinds.contains(&ProfileKind::Alloc),
        lock: kinds.contains(&ProfileKind::Lock),
        exceptions: kinds.contains(&ProfileKind::Exception),
        live_heap: kinds.contains(&ProfileKind::Heap),
        ..EventProfilesConfig::default()
    };
    if let Some(n) = var("CLRPROF_SAMPLER_HEAP_MAX_TRACKED").and_then(|v| v.parse().ok()) {
        config.live_heap_max_tracked = n;
    }
    if let Some(n) = var("CLRPROF_SAMPLER_EXCEPTION_EVERY").and_then(|v| v.parse().ok()) {
        config.exception_every = u32::max(n, 1);
    }
    if let Some(n) = var("CLRPROF_SAMPLER_ALLOC_EVERY").and_then(|v| v.parse().ok()) {
        config.alloc_every_bytes = n;
    }
    if let Some(percent) = var("CLRPROF_SAMPLER_ALLOC_BUDGET").and_then(|v| v.parse::<f64>().ok()) {
        config.alloc_walk_budget = percent / 100.0;
    }
    config.force_object_allocated =
        var("CLRPROF_SAMPLER_ALLOC_SOURCE").as_deref() == Some("object-allocated");
    config
}

fn kind_period_record(out: &JsonLines, p: &KindPeriod) {
    let r = out
        .record("kind-period")
        .str("kind", p.kind.name())
        .num("index", p.index)
        .num("value_0", p.totals[0])
        .num("value_1", p.totals[1])
        .num("bytes", p.bytes as u64)
        .bool("last", p.last);
    match &p.destination {
        Ok(to) => r.bool("ok", true).str("to", to).write(),
        Err(e) => r.bool("ok", false).str("error", e).write(),
    }
}

/// Resident memory of this process in KiB, where the system tells (Linux).
fn rss_kib() -> Option<u64> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}

/// `{"event":"trace-context",...}`: what the trace-context writer (the
/// managed startup hook) reported, the records the threads wrote into, and
/// how many samples carried a context.
fn trace_context_record(out: &JsonLines, labelled_samples: Option<u64>) {
    use clrprof::context::{self, WriterStatus};
    let (writer, detail) = match context::writer_status() {
        Some(WriterStatus::Following(d)) => ("following", d),
        Some(WriterStatus::Unsupported(d)) => ("unsupported", d),
        Some(WriterStatus::Failed(d)) => ("failed", d),
        None => ("none", String::new()),
    };
    let stats = context::record_stats();
    let mut r = out
        .record("trace-context")
        .str("writer", writer)
        .str("detail", &detail)
        .num("records", stats.allocated as u64)
        .num("owned", stats.owned as u64)
        .num("writes", stats.writes)
        .num("dropped_endpoint_names", context::dropped_endpoint_names());
    if let Some(n) = labelled_samples {
        r = r.num("labelled_samples", n);
    }
    r.write();
}

fn period_record(out: &JsonLines, p: &Period) {
    let mut r = out
        .record("period")
        .num("index", p.index)
        .num("samples", p.samples)
        .num("empty", p.empty)
        .num("bytes", p.bytes as u64)
        .num("stacks", p.distinct_stacks as u64)
        .num("frame_names", p.frame_names as u64)
        .num(
            "duration_ms",
            p.end
                .duration_since(p.start)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        )
        .bool("last", p.last);
    if let Some(rss) = rss_kib() {
        r = r.num("rss_kib", rss);
    }
    match &p.destination {
        Ok(to) => r.bool("ok", true).str("to", to).write(),
        Err(e) => r.bool("ok", false).str("error", e).write(),
    }
}

/// `CLRPROF_SAMPLER_HEAP_SNAPSHOT_EVERY` in seconds, when set.
fn snapshot_every() -> Option<std::time::Duration> {
    std::env::var("CLRPROF_SAMPLER_HEAP_SNAPSHOT_EVERY")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
}

/// Writes `snapshot` as `base` (JSON), `base.txt` and `base.pb.gz`; the
/// JSON last, renamed into place, so a reader that sees it sees all three.
fn write_snapshot(snapshot: &HeapSnapshot, base: &std::path::Path) -> std::io::Result<()> {
    let with = |ext: &str| {
        let mut p = base.as_os_str().to_owned();
        p.push(ext);
        std::path::PathBuf::from(p)
    };
    std::fs::write(with(".txt"), snapshot.to_text())?;
    std::fs::write(with(".pb.gz"), kinds::gzip_pprof(&snapshot.to_pprof()))?;
    let tmp = with(".tmp");
    std::fs::write(&tmp, snapshot.to_json())?;
    std::fs::rename(&tmp, base)
}

fn snapshot_record(out: &JsonLines, index: u64, r: &std::result::Result<HeapSnapshot, String>) {
    match r {
        Ok(s) => out
            .record("heap-snapshot")
            .num("index", index)
            .str("method", &s.method)
            .num("objects", s.objects())
            .num("bytes", s.bytes())
            .num("types", s.types.len() as u64)
            .num("unnamed", s.unnamed)
            .num("duration_us", s.duration.as_micros() as u64)
            .write(),
        Err(e) => out
            .record("heap-snapshot")
            .num("index", index)
            .str("error", e)
            .write(),
    }
}

impl SamplerProfiler {
    /// Starts the periodic heap snapshots (startup, with
    /// `CLRPROF_SAMPLER_HEAP_SNAPSHOT_EVERY`).
    fn start_snapshots(&self) {
        let (Some(snapshots), Some(every)) = (self.snapshots.get().cloned(), snapshot_every())
        else {
            return;
        };
        let Some(output) = std::env::var_os("CLRPROF_OUTPUT") else {
            return;
        };
        let out = self.out.clone();
        let stop = self.snapshot_stop.clone();
        let spawned = clrprof::thread::spawn("sampler-heap-snapshots", move || {
            let mut index = 0u64;
            loop {
                {
                    let (flag, cv) = &*stop;
                    let guard = flag.lock().unwrap_or_else(|e| e.into_inner());
                    let (guard, _) = cv
                        .wait_timeout_while(guard, every, |stopped| !*stopped)
                        .unwrap_or_else(|e| e.into_inner());
                    if *guard {
                        return;
                    }
                }
                let taken = snapshots.take().map_err(|e| e.to_string());
                if let Ok(s) = &taken {
                    let mut base = output.clone();
                    base.push(format!(".heap-snapshot-{index}.json"));
                    let _ = write_snapshot(s, std::path::Path::new(&base));
                }
                snapshot_record(&out, index, &taken);
                out.flush();
                index += 1;
            }
        });
        match spawned {
            Ok(t) => {
                *self
                    .snapshot_thread
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(t)
            }
            Err(e) => self
                .out
                .record("heap-snapshot")
                .str("error", &format!("cannot start the snapshot thread: {e}"))
                .write(),
        }
    }

    /// Stops the periodic snapshots (bounded wait).
    fn stop_snapshots(&self) {
        {
            let (flag, cv) = &*self.snapshot_stop;
            *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
        let thread = self
            .snapshot_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(t) = thread {
            let _ = t.join_timeout(clrprof::exit::EXIT_WAIT);
        }
    }

    // ANCHOR: start
    /// The second module load: sampling starts now (the SDK component does
    /// it); record how.
    fn started(&self, info: &ProfilerInfo) {
        if let Some(events) = self.events.get() {
            if let Err(e) = events.start(info) {
                self.out
                    .record("event-session")
                    .str("error", &e.to_string())
                    .write();
            }
        }
        self.try_async_walk(info);
        self.start_snapshots();
        match (self.sampler.get(), self.no_sampler.get()) {
            (Some(sampler), _) => self
                .out
                .record("sampling")
                .str("method", sampler.method())
                .str("reason", &sampler.method_reason().unwrap_or_default())
                .num("rate_hz", u64::from(rate()))
                .write(),
            (None, reason) => self
                .out
                .record("sampling")
                .str("method", "none")
                .str(
                    "reason",
                    reason.map(String::as_str).unwrap_or("not registered"),
                )
                .write(),
        }
        self.out.flush();
    }
    // ANCHOR_END: start

    /// What does an asynchronous walk of another thread (no runtime
    /// suspension) give? Off Windows, the SDK's clear error; recorded.
    fn try_async_walk(&self, info: &ProfilerInfo) {
        let me = info.current_thread_id().ok().map(|t| t.to_raw());
        let other = self
            .threads
            .lock()
            .ok()
            .and_then(|t| t.iter().copied().find(|t| Some(*t) != me));
        let Some(other) = other else {
            self.out
                .record("async-walk")
                .str("error", "no other thread")
                .write();
            return;
        };
        let Some(_entry) = self.gate.get().and_then(|g| g.enter(1, other)) else {
            return;
        };
        // SAFETY: ThreadCreated reported it and the gate entry keeps its
        // ThreadDestroyed from returning until this walk is over.
        let thread = unsafe { other.assume_valid() };
        // Reserved before the walk: the runtime holds the thread
        // OS-suspended while it walks, and no profiler code runs then.
        let mut buffer = FrameBuffer::new(1, 256);
        match info.walk_other_thread(thread, WalkOptions::default(), &mut buffer) {
            Ok(_) => self
                .out
                .record("async-walk")
                .bool("ok", true)
                .num(
                    "frames",
                    buffer
                        .samples()
                        .first()
                        .map_or(0, |sample| buffer.frames(sample).len() as u64),
                )
                .write(),
            Err(e) => self
                .out
                .record("async-walk")
                .bool("ok", false)
                .str("error", &e.to_string())
                .write(),
        }
    }
}

impl Profiler for SamplerProfiler {
    // ANCHOR: initialize
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        // The profiler's own needs: its thread list (for the asynchronous
        // walk) and the module load at which it records how it samples.
        let mut masks: EventMasks =
            (EventMask::MONITOR_THREADS | EventMask::MONITOR_MODULE_LOADS).into();
        let _ = self.gate.set(ThreadGate::register(info)?);
        if let Ok(r) = info.runtime_information() {
            let _ = self
                .runtime
                .set(format!("{}.{}.{}", r.major, r.minor, r.build));
        }
        let kinds = match profile_kinds() {
            Ok(kinds) => kinds,
            Err(e) => {
                self.out.record("profiles").str("error", &e).write();
                vec![ProfileKind::Cpu, ProfileKind::Wall]
            }
        };
        let config = event_config(&kinds);
        let mut unavailable = String::new();
        if snapshot_every().is_some() {
            match HeapSnapshots::register(info, self.names.clone()) {
                Ok(s) => {
                    let _ = self.snapshots.set(s);
                }
                Err(e) => self
                    .out
                    .record("heap-snapshot")
                    .str("error", &e.to_string())
                    .write(),
            }
        }
        if config.alloc || config.lock || config.exceptions || config.live_heap {
            let (events, event_masks) = match EventProfiles::new(info, config, self.names.clone()) {
                Ok(set_up) => set_up,
                Err(e) => {
                    // The app runs on without them; the record says why.
                    self.out
                        .record("profiles")
                        .str("error", &e.to_string())
                        .write();
                    return self.initialize_sampler(info, &kinds, masks);
                }
            };
            masks.low |= event_masks.low;
            masks.high |= event_masks.high;
            for (kind, why) in events.unavailable() {
                unavailable.push_str(&format!("{}: {why}; ", kind.name()));
            }
            if let Some(continuous) = continuous_config() {
                let out = self.out.clone();
                let observer = Arc::new(move |p: &KindPeriod| kind_period_record(&out, p));
                match EventContinuous::start(
                    events.clone(),
                    &kinds,
                    continuous,
                    self.runtime.get().cloned(),
                    Some(observer),
                ) {
                    Ok(c) => {
                        let _ = self.event_continuous.set(c);
                    }
                    Err(e) => self
                        .out
                        .record("event-continuous")
                        .str("error", &e.to_string())
                        .write(),
                }
            }
            let _ = self.events.set(events);
        }
        self.out
            .record("profiles")
            .str(
                "kinds",
                &kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(","),
            )
            .str(
                "alloc_source",
                self.events
                    .get()
                    .map(|e| e.alloc_source())
                    .unwrap_or(AllocSource::None)
                    .name(),
            )
            .str(
                "heap_source",
                self.events
                    .get()
                    .map(|e| e.heap_source())
                    .unwrap_or(AllocSource::None)
                    .name(),
            )
            .str("unavailable", &unavailable)
            .write();
        let masks = self.initialize_sampler(info, &kinds, masks)?;
        if otlp_wanted() {
            self.start_otlp(&kinds);
        }
        Ok(masks)
    }
    // ANCHOR_END: initialize

    /// Loaded by attach: one heap snapshot (`heap_snapshot=PATH`), then
    /// detach.
    fn initialize_for_attach(
        &self,
        info: &ProfilerInfo,
        client_data: &[u8],
    ) -> Result<AttachEventMasks> {
        let data = ClientData::new(client_data);
        let Some(path) = data.get("heap_snapshot") else {
            return Err(clrprof::Error::Usage(
                "the sampler attaches only to take a heap snapshot: client data heap_snapshot=PATH"
                    .into(),
            ));
        };
        let _ = self.attach_snapshot.set(path.into());
        let snapshots = HeapSnapshots::register(info, self.names.clone())?;
        let _ = self.snapshots.set(snapshots);
        // The component asks what it needs (MONITOR_GC before .NET 9).
        Ok(AttachEventMasks::default())
    }

    fn profiler_attach_complete(&self, info: &ProfilerInfo) {
        let (Some(snapshots), Some(path)) = (
            self.snapshots.get().cloned(),
            self.attach_snapshot.get().cloned(),
        ) else {
            return;
        };
        let runtime = info.handle();
        let spawned = clrprof::thread::spawn("sampler-attach-snapshot", move || {
            match snapshots.take() {
                Ok(s) => {
                    if let Err(e) = write_snapshot(&s, &path) {
                        let mut err = path.clone().into_os_string();
                        err.push(".error");
                        let _ = std::fs::write(err, format!("cannot write the snapshot: {e}"));
                    }
                }
                Err(e) => {
                    let mut err = path.clone().into_os_string();
                    err.push(".error");
                    let _ = std::fs::write(err, e.to_string());
                }
            }
            // The snapshot's own thread may still be leaving: ask again
            // while the SDK says threads run.
            for _ in 0..100 {
                match clrprof::detach::request_detach(&runtime, 100) {
                    Err(clrprof::Error::ThreadsRunning { .. }) => {
                        std::thread::sleep(std::time::Duration::from_millis(20))
                    }
                    _ => break,
                }
            }
        });
        if let Ok(t) = spawned {
            *self
                .snapshot_thread
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(t);
        }
    }

    fn profiler_detach_succeeded(&self, _info: &ProfilerInfo) {
        // The snapshot thread asked for this detach and does nothing after.
        let _ = self
            .snapshot_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    fn module_load_finished(&self, info: &ProfilerInfo, module: Loaded<ModuleId<'_>>) {
        if module.is_ok() && self.modules.fetch_add(1, Ordering::SeqCst) == 1 {
            self.started(info);
        }
    }

    fn thread_created(&self, _info: &ProfilerInfo, thread: ThreadId<'_>) {
        if let Ok(mut t) = self.threads.lock() {
            t.push(thread.to_raw());
        }
    }

    fn thread_destroyed(&self, _info: &ProfilerInfo, thread: ThreadId<'_>) {
        if let Ok(mut t) = self.threads.lock() {
            t.retain(|x| *x != thread.to_raw());
        }
    }

    // At shutdown, or at process exit when the runtime is not shut down.
    // The sampler's names were resolved while it sampled, and it keeps the
    // profile of every completed tick even if its thread cannot stop (stuck
    // at process exit, or already ended by Windows): nothing here waits
    // longer than the SDK's bounded stop.
    fn finish(&self) {
        self.stop_snapshots();
        if let Some(otlp) = self.otlp.get() {
            let s = otlp.finish();
            self.out
                .record("otlp")
                .num("periods", s.periods)
                .num("delivered", s.delivered)
                .num("dropped", s.dropped)
                .num("retries", s.retries)
                .num("rejected_profiles", s.rejected_profiles)
                .write();
            trace_context_record(&self.out, None);
            self.out.flush();
            return;
        }
        if let (Some(sampler), Some(continuous)) = (self.sampler.get(), self.continuous.get()) {
            let result = continuous.finish();
            let stats = sampler.stats();
            let c = continuous.stats();
            self.out
                .record("continuous")
                .num("periods", c.periods)
                .num("delivered", c.delivered)
                .num("refused", c.refused)
                .num("lost_samples", c.lost_samples)
                .num("retries", c.retries)
                .num("samples", stats.samples)
                .num("ticks", stats.ticks)
                .str(
                    "error",
                    &result.err().map(|e| e.to_string()).unwrap_or_default(),
                )
                .write();
            trace_context_record(&self.out, None);
        } else if let Some(sampler) = self.sampler.get() {
            let stopped = sampler.stop();
            // After the stop: the counters are final.
            let stats = sampler.stats();
            match stopped {
                Ok(profile) => {
                    if let Some(path) = std::env::var_os("CLRPROF_OUTPUT") {
                        let mut folded = Vec::new();
                        let _ = profile.write_folded(&mut folded);
                        let _ = std::fs::write(&path, folded);
                        let mut ss = path.clone();
                        ss.push(".speedscope.json");
                        if let Ok(mut f) = std::fs::File::create(ss) {
                            let _ = profile.write_speedscope("clrprof sampler", &mut f);
                            let _ = f.flush();
                        }
                        let mut pb = path.clone();
                        pb.push(".pb.gz");
                        let _ = std::fs::write(pb, profile.pprof_bytes());
                        for kind in profile_kinds().unwrap_or_default() {
                            if let Some(p) = kinds::sampled_pprof(&profile, kind) {
                                let file = kinds::kind_path(path.as_ref(), kind);
                                let _ = std::fs::write(file, kinds::gzip_pprof(&p));
                            }
                        }
                    }
                    let sig = stats.signal;
                    let handler = clrprof::stackwalk::SignalSampling::stats();
                    self.out
                        .record("signal-samples")
                        .num("taken", handler.taken)
                        .num("foreign", handler.foreign)
                        .num("off_stack", handler.off_stack)
                        .num("in_fault", handler.in_fault)
                        .num("ring_dropped", handler.ring_dropped)
                        .num("osr_restored", handler.osr_restored)
                        .num("caller_restored", handler.caller_restored)
                        .num("scanned", handler.scanned)
                        .str(
                            "masked_in",
                            &handler
                                .masked_in
                                .iter()
                                .map(|s| s.to_string())
                                .collect::<Vec<_>>()
                                .join(","),
                        )
                        .num("cpu_samples", sig.cpu_samples)
                        .num("wall_samples", sig.wall_samples)
                        .num("unload_dropped", sig.unload_dropped)
                        .num("placed_by_map", sig.placed_by_map)
                        .num("placed_by_runtime", sig.placed_by_runtime)
                        .num("native_frames", sig.native_frames)
                        .num("unplaced_frames", sig.unplaced_frames)
                        .num("signalled", sig.signalled)
                        .num("wall_reused", sig.wall_reused)
                        .num("timers_made", sig.timers_made)
                        .num("buffer_full", sig.buffer_full)
                        .write();
                    trace_context_record(&self.out, Some(profile.labelled_samples()));
                    self.out
                        .record("samples")
                        .str("method", sampler.method())
                        .str("reason", &sampler.method_reason().unwrap_or_default())
                        .num("samples", profile.samples())
                        .num("ticks", stats.ticks)
                        .num("threads", profile.threads() as u64)
                        .num("truncated", profile.truncated())
                        .num("empty", profile.empty())
                        .num("skipped", stats.skipped)
                        .num("failed_ticks", stats.failed_ticks)
                        .num("refused", stats.refused)
                        .num("late_ns", stats.phases.late_ns)
                        .num("suspend_ns", stats.phases.suspend_ns)
                        .num("walk_ns", stats.phases.walk_ns)
                        .num("resume_ns", stats.phases.resume_ns)
                        .num("count_ns", stats.phases.count_ns)
                        .num("thread_cpu_ns", stats.thread_cpu_ns)
                        .str(
                            "first_refusal",
                            &sampler.first_refusal().unwrap_or_default(),
                        )
                        .str("last_error", &sampler.last_error().unwrap_or_default())
                        .write();
                }
                Err(e) => self
                    .out
                    .record("samples")
                    .str("error", &e.to_string())
                    .write(),
            }
        }
        self.finish_events();
        if self.sampler.get().is_none() {
            trace_context_record(&self.out, None);
        }
        self.out.flush();
    }

    fn event_pipe_event_delivered(&self, info: &ProfilerInfo, event: &EventPipeEvent<'_>) {
        if let Some(events) = self.events.get() {
            events.event_pipe_event_delivered(info, event);
        }
    }

    fn allocation_sampled(&self, info: &ProfilerInfo, sample: &AllocationSample<'_>) {
        if let Some(events) = self.events.get() {
            events.allocation_sampled(info, sample);
        }
    }

    fn exception_thrown(&self, info: &ProfilerInfo, exception: ObjectId<'_>) {
        if let Some(events) = self.events.get() {
            events.exception_thrown(info, exception);
        }
    }

    fn object_allocated(&self, info: &ProfilerInfo, object: ObjectId<'_>, class: ClassId<'_>) {
        if let Some(events) = self.events.get() {
            events.object_allocated(info, object, class);
        }
    }
}

impl SamplerProfiler {
    /// The OTLP profiles export of the sampler's and the event profiles'
    /// periods; a record says why when it cannot start.
    fn start_otlp(&self, kinds: &[ProfileKind]) {
        let config = match otlp_config(self.runtime.get().map(String::as_str)) {
            Ok(c) => c,
            Err(e) => {
                self.out.record("otlp").str("error", &e).write();
                return;
            }
        };
        let url = config.url.clone();
        let out = self.out.clone();
        let observer: clrprof_sampler::otlp::OtlpObserver =
            Arc::new(move |index, bytes, result| {
                let r = out
                    .record("otlp-period")
                    .num("index", index)
                    .num("bytes", bytes as u64);
                match result {
                    Ok(to) => r.bool("ok", true).str("to", to).write(),
                    Err(e) => r.bool("ok", false).str("error", e).write(),
                }
            });
        match OtlpExport::start(
            self.sampler.get().cloned(),
            self.events.get().cloned(),
            kinds,
            config,
            Some(observer),
        ) {
            Ok(x) => {
                self.out.record("otlp").str("url", &url).write();
                let _ = self.otlp.set(x);
            }
            Err(e) => self.out.record("otlp").str("error", &e.to_string()).write(),
        }
    }

    /// The sampler (CPU and wall time) and its continuous mode, when asked
    /// for: registered in `Initialize`, on top of `masks`.
    fn initialize_sampler(
        &self,
        info: &ProfilerInfo,
        kinds: &[ProfileKind],
        mut masks: EventMasks,
    ) -> Result<EventMasks> {
        if !kinds.contains(&ProfileKind::Cpu) && !kinds.contains(&ProfileKind::Wall) {
            let _ = self
                .no_sampler
                .set("no cpu or wall profile asked for (CLRPROF_SAMPLER_PROFILES)".into());
            return Ok(masks);
        }
        let mut config = SamplerConfig::at(rate());
        match std::env::var("CLRPROF_SAMPLER_SOURCE").as_deref() {
            Ok("signals") => config.source = clrprof_sampler::SourceChoice::Signals,
            Ok("suspend-runtime") => config.source = clrprof_sampler::SourceChoice::SuspendRuntime,
            _ => {}
        }
        if let Some(n) = std::env::var("CLRPROF_SAMPLER_WALL_THREADS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
        {
            config.wall_threads_per_tick = n;
        }
        let registered = if wants_shadow_stacks(info) {
            // ELT needs MONITOR_ENTERLEAVE, which only Initialize can set;
            // with exceptions the SDK keeps the shadow stacks balanced.
            let options = EltOptions::fast_path().with_exceptions();
            let (elt_masks, runtime) = elt::install(info, Arc::new(ShadowHooks), options, masks)?;
            masks = elt_masks;
            let _ = self.shadow.set(runtime);
            Sampler::register_with_source(info, config, self.names.clone(), ShadowStackSource)
        } else {
            Sampler::register(info, config, self.names.clone())
        };
        match registered {
            Ok(sampler) => {
                if let Some(config) = continuous_config() {
                    let out = self.out.clone();
                    let observer = Arc::new(move |p: &Period| period_record(&out, p));
                    match Continuous::start(sampler.clone(), config, Some(observer)) {
                        Ok(c) => {
                            let _ = self.continuous.set(c);
                        }
                        Err(e) => self
                            .out
                            .record("continuous")
                            .str("error", &e.to_string())
                            .write(),
                    }
                }
                let _ = self.sampler.set(sampler);
            }
            Err(e) => {
                let _ = self.no_sampler.set(e.to_string());
            }
        }
        Ok(masks)
    }

    /// Writes the allocation, lock and exception profiles beside
    /// `CLRPROF_OUTPUT` and records what they hold.
    fn finish_events(&self) {
        let Some(events) = self.events.get() else {
            return;
        };
        if let Some(c) = self.event_continuous.get() {
            let stats = c.finish();
            self.out
                .record("event-continuous")
                .num("periods", stats.periods)
                .num("delivered", stats.delivered)
                .num("refused", stats.refused)
                .write();
        }
        let now = std::time::SystemTime::now();
        // In continuous mode the periods went to the sink: no files here.
        let output =
            std::env::var_os("CLRPROF_OUTPUT").filter(|_| self.event_continuous.get().is_none());
        let mut r = self.out.record("event-profiles");
        for kind in [
            ProfileKind::Alloc,
            ProfileKind::Lock,
            ProfileKind::Exception,
        ] {
            let Some(profile) = events.profile(kind) else {
                continue;
            };
            let wanted = match kind {
                ProfileKind::Alloc => events.alloc_source() != AllocSource::None,
                _ => profile_kinds().unwrap_or_default().contains(&kind),
            };
            if !wanted {
                continue;
            }
            let totals = profile.totals();
            r = r
                .num(&format!("{}_0", kind.name()), totals[0])
                .num(&format!("{}_1", kind.name()), totals[1]);
            if let Some(out) = &output {
                let p =
                    kinds::event_pprof(&profile, kind, self.runtime.get().map(String::as_str), now);
                let file = kinds::kind_path(std::path::Path::new(out), kind);
                let _ = std::fs::write(file, kinds::gzip_pprof(&p));
            }
        }
        if let Some(heap) = events.live_heap().and_then(|h| h.profile()) {
            let totals = heap.totals();
            r = r.num("heap_0", totals[0]).num("heap_1", totals[1]);
            if let Some(out) = &output {
                let p = heap.to_pprof(self.runtime.get().map(String::as_str), now);
                let file = kinds::kind_path(std::path::Path::new(out), ProfileKind::Heap);
                let _ = std::fs::write(file, kinds::gzip_pprof(&p));
            }
            let s = heap.stats;
            self.out
                .record("live-heap")
                .str("source", events.heap_source().name())
                .num("offered", s.offered)
                .num("tracked", s.tracked)
                .num("tracking", s.tracking)
                .num("died", s.died)
                .num("thinned", s.thinned)
                .num("handle_failures", s.handle_failures)
                .num("collections", s.collections)
                .num("level", u64::from(s.level))
                .num("max_level", u64::from(s.max_level))
                .num("checks", s.checks)
                .num("gc_ns", s.gc_ns)
                .num("offer_ns", s.offer_ns)
                .num("rows", heap.rows.len() as u64)
                .write();
        }
        let stats = events.stats();
        r.str("alloc_source", events.alloc_source().name())
            .num("alloc_events", stats.alloc_events)
            .num("alloc_walks", stats.alloc_walks)
            .num("alloc_walk_ns", stats.alloc_walk_ns)
            .num("objects_seen", stats.objects_seen)
            .num("object_samples", stats.object_samples)
            .num("contentions", stats.contentions)
            .num("exceptions_thrown", stats.exceptions_thrown)
            .num("exceptions_kept", stats.exceptions_kept)
            .num("failures", stats.failures)
            .num("events_with_stack", stats.events_with_stack)
            .num("events_delivered", stats.events_delivered)
            .num("ticks_delivered", stats.ticks_delivered)
            .num("sampled_delivered", stats.sampled_delivered)
            .str("last_error", &events.last_error().unwrap_or_default())
            .write();
    }
}
