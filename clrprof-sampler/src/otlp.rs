//! OTLP profiles: the sampler's and the event profiles' periods sent as
//! OpenTelemetry profiles, beside the Pyroscope path ([`crate::continuous`]).
//!
//! It follows opentelemetry-proto **1.11.0**, profiles `v1development`
//! (the signal's public alpha), over OTLP/HTTP: a `POST` of a binary
//! protobuf `ExportProfilesServiceRequest` to `/v1development/profiles`,
//! `Content-Type: application/x-protobuf`, gzip-compressed by default
//! (`Content-Encoding: gzip`), with `OTLP-Profiles-Development-Version: 1`
//! ([`DEVELOPMENT_VERSION_HEADER`]). 1.11.0 changed nothing on the wire of
//! profiles since 1.10.0 (which OpenTelemetry .NET vendors): it marked the
//! messages Alpha, documented request and response size limits and the
//! `Retry-After` date form, recommended 16 and 8 zero bytes for
//! `link_table[0]`, stated a sample's identity, and added the separate
//! `ProcessContext` message of OTEP 4719.
//!
//! What a period becomes: one request, one `ResourceProfiles` (the process)
//! with one `ScopeProfiles` (scope `clrprof`), one `Profile` per sample
//! type, all indexing one dictionary:
//!
//! | profile | sample type | from |
//! |---|---|---|
//! | cpu | `cpu`/`nanoseconds` | the sampler's CPU time per sample |
//! | wall | `wall`/`nanoseconds` | the sampler's samples × period |
//! | alloc | `alloc_objects`/`count`, `alloc_space`/`bytes` (two profiles) | the allocation profile |
//! | lock | `contentions`/`count`, `delay`/`nanoseconds` (two profiles) | the lock profile |
//! | exception | `exceptions`/`count` | the exception profile |
//! | heap | `inuse_objects`/`count`, `inuse_space`/`bytes` (two profiles) | the live heap as of the period's last collection ([`crate::live_heap`]) |
//!
//! A profile has a single sample type in this version of the protocol, so
//! the kinds with two values give two profiles. Each sample references its
//! stack (leaf first), the attributes `thread.name` (named threads),
//! `trace_id`, `span_id`, `local_root_span_id`, `trace_endpoint`
//! ([`crate::labels`]) and `type` (allocated or thrown class), and a link
//! (trace id, span id) to the span it was taken in. The live heap's
//! samples carry `type`, `age` and `generation` (as its pprof does) and no
//! link: a surviving object outlives the request that allocated it. When the sampler keeps
//! sample times ([`Sampler::keep_sample_times`](crate::Sampler::keep_sample_times),
//! which [`OtlpExport::start`] turns on) the cpu and wall samples carry one
//! value and one timestamp per observation.
//!
//! The environment is OpenTelemetry's ([`OtlpConfig::from_env`]).
//! Uploads share the Pyroscope path's retries with exponential backoff and
//! its bounded queue ([`crate::UploadOptions`]); only the answers the
//! specification calls retryable (429, 502, 503, 504, no answer) are
//! retried, others drop the period (counted).

pub mod proto;
#[cfg(test)]
mod text;

use crate::events::{EventProfiles, KindProfile, ProfileKind};
use crate::live_heap::HeapProfile;
use crate::upload::{Pending, Uploads};
use crate::{lock, Profile, Sampler, UploadOptions};
use clrprof::context::TraceContext;
use clrprof::error::{Error, Result};
use clrprof::ids::RawThreadId;
use clrprof::thread::ProfilerThread;
use proto::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The request path of profiles (`v1development`).
pub const PROFILES_PATH: &str = "/v1development/profiles";
/// The opentelemetry-proto release the messages follow.
pub const PROTO_VERSION: &str = "1.11.0";
/// The request header naming the profiles' development version of the
/// wire format (the OpenTelemetry Collector's OTLP receiver refuses a
/// request that names a version it does not read, or names one twice; no
/// header means version 1).
pub const DEVELOPMENT_VERSION_HEADER: &str = "OTLP-Profiles-Development-Version";
/// The development version clrprof sends: 1, the one version the
/// Collector's receiver reads when this was written (its `pdata`'s
/// `ProfilesDevelopmentVersion`), the same as sending none. A header of the
/// same name in `OTEL_EXPORTER_OTLP_[PROFILES_]HEADERS` replaces it.
pub const DEVELOPMENT_VERSION: &str = "1";
/// The endpoint when none is configured (OTLP/HTTP's default).
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// Where and how OTLP profiles are sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The full URL profiles are posted to.
    pub url: String,
    /// Headers of every request (`OTEL_EXPORTER_OTLP_HEADERS`, then the
    /// `_PROFILES_` form's, which win).
    pub headers: Vec<(String, String)>,
    /// gzip the body (the default; `OTEL_EXPORTER_OTLP_COMPRESSION=none` turns it off).
    pub gzip: bool,
    /// The longest one request may take.
    pub timeout: Duration,
    /// Resource attributes, `service.name` first.
    pub resource: Vec<(String, AttributeValue)>,
    /// Length of a period.
    pub every: Duration,
    /// Retries and the queue.
    pub upload: UploadOptions,
}

/// A resource attribute's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttributeValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
}

impl OtlpConfig {
    /// The configuration OpenTelemetry's environment gives
    /// (`lookup(name)` reads a variable; [`std::env::var`] in practice):
    ///
    /// - endpoint: `OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT` (the full URL), else
    ///   `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1development/profiles`
    ///   appended, else [`DEFAULT_ENDPOINT`] with it;
    /// - `OTEL_EXPORTER_OTLP_[PROFILES_]HEADERS` (`k=v,k2=v2`, percent-decoded),
    ///   `_COMPRESSION` (`gzip`, the default here, or `none`), `_TIMEOUT`
    ///   (milliseconds, default 10 000);
    /// - `OTEL_EXPORTER_OTLP_[PROFILES_]PROTOCOL`: only `http/protobuf`
    ///   (an error names any other);
    /// - resource: `OTEL_RESOURCE_ATTRIBUTES` (`k=v,...`, percent-decoded),
    ///   then `service.name` from `OTEL_SERVICE_NAME` (else the resource
    ///   attribute, else `unknown_service:<process name>`), `process.pid`,
    ///   `process.runtime.name` (`.NET`), `process.runtime.version`
    ///   (`runtime`), `host.name`, `telemetry.sdk.*` (clrprof's).
    pub fn from_env(
        lookup: &dyn Fn(&str) -> Option<String>,
        runtime: Option<&str>,
        every: Duration,
    ) -> std::result::Result<OtlpConfig, String> {
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let signal = |suffix: &str| {
            var(&format!("OTEL_EXPORTER_OTLP_PROFILES_{suffix}"))
                .or_else(|| var(&format!("OTEL_EXPORTER_OTLP_{suffix}")))
        };
        if let Some(p) = signal("PROTOCOL") {
            if p.trim() != "http/protobuf" {
                return Err(format!(
                    "OTLP protocol {p:?}: clrprof sends profiles over http/protobuf only"
                ));
            }
        }
        let url = match var("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT") {
            Some(u) => u.trim().to_string(),
            None => {
                let base = var("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
                format!("{}{PROFILES_PATH}", base.trim().trim_end_matches('/'))
            }
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "OTLP endpoint {url:?} is not an http:// or https:// URL"
            ));
        }
        let mut headers = Vec::new();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_PROFILES_HEADERS",
        ] {
            for (k, v) in pairs(&var(name).unwrap_or_default()) {
                headers.retain(|(h, _): &(String, String)| !h.eq_ignore_ascii_case(&k));
                headers.push((k, v));
            }
        }
        let gzip = match signal("COMPRESSION").as_deref().map(str::trim) {
            None | Some("gzip") => true,
            Some("none") => false,
            Some(other) => return Err(format!("OTLP compression {other:?}: gzip or none")),
        };
        let timeout = signal("TIMEOUT")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(Duration::from_secs(10));
        let mut resource: Vec<(String, AttributeValue)> = Vec::new();
        let set = |k: &str, v: AttributeValue, resource: &mut Vec<(String, AttributeValue)>| {
            resource.retain(|(key, _)| key != k);
            resource.push((k.to_string(), v));
        };
        for (k, v) in pairs(&var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default()) {
            set(&k, AttributeValue::Str(v), &mut resource);
        }
        let service = var("OTEL_SERVICE_NAME")
            .or_else(|| {
                resource.iter().find_map(|(k, v)| match (k.as_str(), v) {
                    ("service.name", AttributeValue::Str(s)) => Some(s.clone()),
                    _ => None,
                })
            })
            .unwrap_or_else(|| format!("unknown_service:{}", process_name()));
        set("service.name", AttributeValue::Str(service), &mut resource);
        // service.name first.
        resource.rotate_right(1);
        set(
            "process.pid",
            AttributeValue::Int(std::process::id() as i64),
            &mut resource,
        );
        set(
            "process.runtime.name",
            AttributeValue::Str(".NET".into()),
            &mut resource,
        );
        if let Some(r) = runtime {
            set(
                "process.runtime.version",
                AttributeValue::Str(r.into()),
                &mut resource,
            );
        }
        if let Some(h) = host_name() {
            set("host.name", AttributeValue::Str(h), &mut resource);
        }
        set(
            "telemetry.sdk.name",
            AttributeValue::Str("clrprof".into()),
            &mut resource,
        );
        set(
            "telemetry.sdk.language",
            AttributeValue::Str("rust".into()),
            &mut resource,
        );
        set(
            "telemetry.sdk.version",
            AttributeValue::Str(env!("CARGO_PKG_VERSION").into()),
            &mut resource,
        );
        Ok(OtlpConfig {
            url,
            headers,
            gzip,
            timeout,
            resource,
            every,
            upload: UploadOptions::default(),
        })
    }
}

/// `k=v,k2=v2` (W3C-baggage-like, as OpenTelemetry's headers and resource
/// variables are), each part trimmed and percent-decoded; parts without `=`
/// or with an empty key are skipped.
pub fn pairs(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|p| {
            let (k, v) = p.split_once('=')?;
            let k = percent_decode(k.trim());
            (!k.is_empty()).then(|| (k, percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn process_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "dotnet".into())
}

fn host_name() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())?;
    let h = h.trim().to_string();
    (!h.is_empty()).then_some(h)
}

/// The dictionary being built: every table with its zero entry, and the
/// indices of what was added.
struct Dictionary {
    d: ProfilesDictionary,
    strings: HashMap<String, i32>,
    mappings: HashMap<String, i32>,
    /// Frame name → location index.
    locations: HashMap<String, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    links: HashMap<([u8; 16], [u8; 8]), i32>,
    attributes: HashMap<(i32, String), i32>,
}

impl Dictionary {
    fn new() -> Self {
        let d = ProfilesDictionary {
            mapping_table: vec![Mapping::default()],
            location_table: vec![Location::default()],
            function_table: vec![Function::default()],
            // 16 and 8 zero bytes (1.11.0's recommendation for index 0).
            link_table: vec![Link {
                trace_id: vec![0; 16],
                span_id: vec![0; 8],
            }],
            string_table: vec![String::new()],
            attribute_table: vec![KeyValueAndUnit::default()],
            stack_table: vec![Stack::default()],
        };
        Dictionary {
            d,
            strings: HashMap::from([(String::new(), 0)]),
            mappings: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            links: HashMap::new(),
            attributes: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn location(&mut self, frame: &str, module: Option<&str>) -> i32 {
        if let Some(&i) = self.locations.get(frame) {
            return i;
        }
        let mapping_index = match module {
            None => 0,
            Some(m) => match self.mappings.get(m) {
                Some(&i) => i,
                None => {
                    let i = self.d.mapping_table.len() as i32;
                    let filename_strindex = self.string(m);
                    self.d.mapping_table.push(Mapping {
                        filename_strindex,
                        ..Default::default()
                    });
                    self.mappings.insert(m.to_string(), i);
                    i
                }
            },
        };
        let name = self.string(frame);
        let function_index = self.d.function_table.len() as i32;
        self.d.function_table.push(Function {
            name_strindex: name,
            system_name_strindex: name,
            filename_strindex: module.map(|m| self.strings[m]).unwrap_or(0),
            start_line: 0,
        });
        let i = self.d.location_table.len() as i32;
        self.d.location_table.push(Location {
            mapping_index,
            address: 0,
            lines: vec![Line {
                function_index,
                line: 0,
                column: 0,
            }],
            attribute_indices: Vec::new(),
        });
        self.locations.insert(frame.to_string(), i);
        i
    }

    fn stack(&mut self, leaf_first: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&leaf_first) {
            return i;
        }
        let i = self.d.stack_table.len() as i32;
        self.d.stack_table.push(Stack {
            location_indices: leaf_first.clone(),
        });
        self.stacks.insert(leaf_first, i);
        i
    }

    fn link(&mut self, c: &TraceContext) -> i32 {
        let key = (c.trace_id, c.span_id);
        if let Some(&i) = self.links.get(&key) {
            return i;
        }
        let i = self.d.link_table.len() as i32;
        self.d.link_table.push(Link {
            trace_id: c.trace_id.to_vec(),
            span_id: c.span_id.to_vec(),
        });
        self.links.insert(key, i);
        i
    }

    fn attribute(&mut self, key: &str, value: &str) -> i32 {
        let k = self.string(key);
        if let Some(&i) = self.attributes.get(&(k, value.to_string())) {
            return i;
        }
        let i = self.d.attribute_table.len() as i32;
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex: k,
            value: Some(AnyValue::string(value)),
            unit_strindex: 0,
        });
        self.attributes.insert((k, value.to_string()), i);
        i
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> ValueType {
        ValueType {
            type_strindex: self.string(ty),
            unit_strindex: self.string(unit),
        }
    }
}

/// The samples of one OTLP profile, merged by identity (stack, attributes,
/// link).
#[derive(Default)]
struct Samples {
    by_identity: HashMap<(i32, Vec<i32>, i32), usize>,
    list: Vec<Sample>,
}

impl Samples {
    fn add(&mut self, stack: i32, attributes: Vec<i32>, link: i32, values: &[i64], times: &[u64]) {
        let key = (stack, attributes, link);
        let i = match self.by_identity.get(&key) {
            Some(&i) => i,
            None => {
                self.list.push(Sample {
                    stack_index: key.0,
                    attribute_indices: key.1.clone(),
                    link_index: key.2,
                    values: Vec::new(),
                    timestamps_unix_nano: Vec::new(),
                });
                self.by_identity.insert(key, self.list.len() - 1);
                self.list.len() - 1
            }
        };
        let s = &mut self.list[i];
        if times.is_empty() && s.timestamps_unix_nano.is_empty() && s.values.len() == 1 {
            // Aggregated values (no timestamps): one running total.
            s.values[0] = s.values[0].saturating_add(values.first().copied().unwrap_or(0));
        } else {
            s.values.extend_from_slice(values);
            s.timestamps_unix_nano.extend_from_slice(times);
        }
    }
}

fn nanos_since_epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A period to encode: the sampler's profile and the event profiles.
pub struct PeriodProfiles<'a> {
    /// The sampler's period (cpu and wall), if it runs.
    pub sampled: Option<&'a Profile>,
    /// The event profiles' periods.
    pub events: Vec<(ProfileKind, &'a KindProfile)>,
    /// The live heap as of the period's last collection, if it is kept.
    pub heap: Option<&'a HeapProfile>,
    /// When the period began and ended.
    pub start: SystemTime,
    /// See `start`.
    pub end: SystemTime,
}

static PROFILE_IDS: AtomicU64 = AtomicU64::new(1);

fn profile_id() -> Vec<u8> {
    let mut id = Vec::with_capacity(16);
    id.extend_from_slice(&nanos_since_epoch(SystemTime::now()).to_be_bytes());
    id.extend_from_slice(
        &(u64::from(std::process::id()) << 32 | PROFILE_IDS.fetch_add(1, SeqCst)).to_be_bytes(),
    );
    id
}

/// The attributes of a sample of `thread` in `context` (tag of `p`).
fn sample_attributes(
    dict: &mut Dictionary,
    p: &Profile,
    thread: RawThreadId,
    tag: u32,
    extra: &[(&str, &str)],
) -> (Vec<i32>, i32) {
    let mut attrs = Vec::new();
    if let Some(name) = p.thread_name(thread) {
        attrs.push(dict.attribute("thread.name", name));
    }
    let mut link = 0;
    if let Some(c) = p.contexts().get(tag) {
        let endpoint = p.contexts().endpoint(tag);
        for (k, v) in crate::labels::labels(c, endpoint.as_deref()) {
            attrs.push(dict.attribute(k, &v));
        }
        link = dict.link(c);
    }
    for (k, v) in extra {
        attrs.push(dict.attribute(k, v));
    }
    attrs.sort_unstable();
    (attrs, link)
}

/// Encodes a period as one `ExportProfilesServiceRequest` (see the module
/// docs), with `resource`.
pub fn encode(
    period: &PeriodProfiles<'_>,
    resource: &[(String, AttributeValue)],
) -> ExportProfilesServiceRequest {
    encode_with_ids(period, resource, &mut profile_id)
}

/// [`encode`] with the profile ids `next_id` gives. Tables and samples come
/// in a fixed order (sorted by thread, context and stack), so one period
/// always gives the same bytes.
pub fn encode_with_ids(
    period: &PeriodProfiles<'_>,
    resource: &[(String, AttributeValue)],
    next_id: &mut dyn FnMut() -> Vec<u8>,
) -> ExportProfilesServiceRequest {
    let mut dict = Dictionary::new();
    let time_unix_nano = nanos_since_epoch(period.start);
    let duration_nano = nanos_since_epoch(period.end).saturating_sub(time_unix_nano);
    let mut profiles = Vec::new();
    let mut profile =
        |dict: &mut Dictionary, ty: (&str, &str), period_ns: i64, samples: Samples| {
            let sample_type = dict.value_type(ty.0, ty.1);
            proto::Profile {
                sample_type: Some(sample_type.clone()),
                samples: samples.list,
                time_unix_nano,
                duration_nano,
                period_type: Some(sample_type),
                period: period_ns,
                profile_id: next_id(),
                dropped_attributes_count: 0,
                attribute_indices: Vec::new(),
            }
        };
    if let Some(p) = period.sampled {
        let names = p.frame_names();
        let stack_of = |dict: &mut Dictionary, stack: &[u32]| -> i32 {
            let leaf_first: Vec<i32> = stack
                .iter()
                .rev()
                .map(|&i| {
                    let name = names.get(i as usize).map(|n| &**n).unwrap_or("?");
                    dict.location(name, p.frame_module(i))
                })
                .collect();
            dict.stack(leaf_first)
        };
        let period_ns = to_i64(p.period_nanos());
        let (mut cpu, mut wall) = (Samples::default(), Samples::default());
        if p.keeps_times() {
            let mut rows: Vec<_> = p.tagged_times().collect();
            rows.sort_unstable_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
            for (t, tag, stack, times) in rows {
                if stack.is_empty() {
                    continue;
                }
                let s = stack_of(&mut dict, stack);
                let (attrs, link) = sample_attributes(&mut dict, p, t, tag, &[]);
                // A signal source's samples carry their own weights.
                let (ts, wvals): (Vec<u64>, Vec<i64>) = times
                    .iter()
                    .filter(|(_, _, w)| *w != crate::profile::NOT_WALL)
                    .map(|(at, _, w)| (*at, if *w == 0 { period_ns } else { to_i64(*w) }))
                    .unzip();
                if !ts.is_empty() {
                    wall.add(s, attrs.clone(), link, &wvals, &ts);
                }
                let (cts, cvals): (Vec<u64>, Vec<i64>) = times
                    .iter()
                    .filter(|(_, c, _)| *c > 0)
                    .map(|(at, c, _)| (*at, to_i64(*c)))
                    .unzip();
                if !cts.is_empty() {
                    cpu.add(s, attrs, link, &cvals, &cts);
                }
            }
        } else {
            // A signal source's wall samples carry their own weights; a
            // profile with them has no samples of one period.
            let mut rows: Vec<_> = if p.wall_weighted() {
                p.tagged_wall().collect()
            } else {
                p.tagged_stacks()
                    .map(|(t, g, s, n)| (t, g, s, n.saturating_mul(p.period_nanos())))
                    .collect()
            };
            rows.sort_unstable();
            for (t, tag, stack, ns) in rows {
                if stack.is_empty() {
                    continue;
                }
                let s = stack_of(&mut dict, stack);
                let (attrs, link) = sample_attributes(&mut dict, p, t, tag, &[]);
                wall.add(s, attrs, link, &[to_i64(ns)], &[]);
            }
            let mut rows: Vec<_> = p.tagged_cpu().collect();
            rows.sort_unstable();
            for (t, tag, stack, ns) in rows {
                if stack.is_empty() || ns == 0 {
                    continue;
                }
                let s = stack_of(&mut dict, stack);
                let (attrs, link) = sample_attributes(&mut dict, p, t, tag, &[]);
                cpu.add(s, attrs, link, &[to_i64(ns)], &[]);
            }
        }
        if p.cpu_measured() {
            profiles.push(profile(&mut dict, ("cpu", "nanoseconds"), 1, cpu));
        }
        profiles.push(profile(&mut dict, ("wall", "nanoseconds"), period_ns, wall));
    }
    for (kind, k) in &period.events {
        let types = kind.sample_types();
        let mut per_type: Vec<Samples> = types.iter().map(|_| Samples::default()).collect();
        let mut rows: Vec<_> = k.rows().collect();
        rows.sort();
        for (ty, stack, values) in rows {
            if stack.is_empty() {
                continue;
            }
            let leaf_first: Vec<i32> = stack.iter().rev().map(|f| dict.location(f, None)).collect();
            let s = dict.stack(leaf_first);
            let mut attrs: Vec<i32> = ty
                .map(|t| vec![dict.attribute("type", t)])
                .unwrap_or_default();
            attrs.sort_unstable();
            for (i, samples) in per_type.iter_mut().enumerate() {
                if values[i] > 0 {
                    samples.add(s, attrs.clone(), 0, &[to_i64(values[i])], &[]);
                }
            }
        }
        for (i, samples) in per_type.into_iter().enumerate() {
            profiles.push(profile(&mut dict, types[i], 1, samples));
        }
    }
    if let Some(h) = period.heap {
        let types = &crate::live_heap::SAMPLE_TYPES;
        let (mut objects, mut space) = (Samples::default(), Samples::default());
        let mut rows: Vec<_> = h.rows.iter().collect();
        rows.sort_by(|a, b| {
            (&a.type_name, &a.stack, a.age, a.generation).cmp(&(
                &b.type_name,
                &b.stack,
                b.age,
                b.generation,
            ))
        });
        for r in rows {
            let (n, b) = (r.objects.round(), r.bytes.round());
            if r.stack.is_empty() || (n <= 0.0 && b <= 0.0) {
                continue;
            }
            let leaf_first: Vec<i32> = r.stack.iter().map(|f| dict.location(f, None)).collect();
            let s = dict.stack(leaf_first);
            let mut attrs = vec![
                dict.attribute("type", &r.type_name),
                dict.attribute("age", r.age),
                dict.attribute("generation", r.generation),
            ];
            attrs.sort_unstable();
            if n > 0.0 {
                objects.add(s, attrs.clone(), 0, &[n as i64], &[]);
            }
            if b > 0.0 {
                space.add(s, attrs, 0, &[b as i64], &[]);
            }
        }
        profiles.push(profile(&mut dict, types[0], 1, objects));
        profiles.push(profile(&mut dict, types[1], 1, space));
    }
    let attributes = resource
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: Some(match v {
                AttributeValue::Str(s) => AnyValue::string(s.clone()),
                AttributeValue::Int(i) => AnyValue::int(*i),
            }),
        })
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes,
                dropped_attributes_count: 0,
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "clrprof".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dict.d),
    }
}

/// The body of a request: the encoded message, gzip-compressed if `gzip`.
pub fn body(request: &ExportProfilesServiceRequest, gzip: bool) -> Vec<u8> {
    use prost::Message;
    let raw = request.encode_to_vec();
    if !gzip {
        return raw;
    }
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(raw.len() / 4 + 64),
        flate2::Compression::default(),
    );
    let _ = gz.write_all(&raw);
    gz.finish().unwrap_or_default()
}

/// Whether an HTTP status is one OTLP says to retry.
pub fn retryable(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

/// What one OTLP export has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OtlpStats {
    /// Periods ended.
    pub periods: u64,
    /// Requests the endpoint took (2xx).
    pub delivered: u64,
    /// Periods given up: refused for good (a status not to retry), pushed out of
    /// the full queue, or still queued at exit.
    pub dropped: u64,
    /// Profiles the endpoint said it rejected (partial success).
    pub rejected_profiles: u64,
    /// Attempts after a failed one.
    pub retries: u64,
}

/// Called with each period's outcome: (index, bytes, result).
pub type OtlpObserver = Arc<dyn Fn(u64, usize, &std::result::Result<String, String>) + Send + Sync>;

struct Inner {
    sampler: Option<Arc<Sampler>>,
    events: Option<Arc<EventProfiles>>,
    kinds: Vec<ProfileKind>,
    config: OtlpConfig,
    observer: Option<OtlpObserver>,
    stop: (Mutex<bool>, Condvar),
    shipping: Mutex<()>,
    uploads: Mutex<Uploads>,
    thread: Mutex<Option<ProfilerThread<()>>>,
    finished: Mutex<Option<OtlpStats>>,
    periods: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
    rejected: AtomicU64,
    retries: AtomicU64,
    /// Periods an answer not to retry dropped (the queue counts them sent).
    refused: AtomicU64,
    last_start: Mutex<SystemTime>,
    #[cfg(feature = "http-upload")]
    agent: ureq::Agent,
}

/// A running OTLP export: every `config.every` an SDK thread takes the
/// sampler's and the event profiles' periods and sends them as one request.
pub struct OtlpExport {
    inner: Arc<Inner>,
}

impl OtlpExport {
    /// Starts exporting the periods of `sampler` (cpu and wall) and of
    /// `events` (the kinds of `kinds` among alloc, lock, exception, and
    /// the live heap as of each period's last collection for heap). Turns
    /// on the sampler's per-sample times. Needs the `http-upload` feature.
    pub fn start(
        sampler: Option<Arc<Sampler>>,
        events: Option<Arc<EventProfiles>>,
        kinds: &[ProfileKind],
        config: OtlpConfig,
        observer: Option<OtlpObserver>,
    ) -> Result<OtlpExport> {
        #[cfg(not(feature = "http-upload"))]
        {
            let _ = (sampler, events, kinds, config, observer);
            Err(Error::Usage(
                "OTLP profiles need clrprof-sampler's `http-upload` feature".into(),
            ))
        }
        #[cfg(feature = "http-upload")]
        {
            if let Some(s) = &sampler {
                s.keep_sample_times(true);
            }
            let agent = crate::upload::agent(&config.upload, config.timeout)
                .map_err(|e| Error::Usage(format!("OTLP profiles: {e}")))?;
            let inner = Arc::new(Inner {
                sampler,
                events,
                kinds: kinds.to_vec(),
                config,
                observer,
                stop: (Mutex::new(false), Condvar::new()),
                shipping: Mutex::new(()),
                uploads: Mutex::new(Uploads::default()),
                thread: Mutex::new(None),
                finished: Mutex::new(None),
                periods: AtomicU64::new(0),
                delivered: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                rejected: AtomicU64::new(0),
                retries: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                last_start: Mutex::new(SystemTime::now()),
                agent,
            });
            let theirs = inner.clone();
            let thread = clrprof::thread::spawn("clrprof-otlp", move || {
                let every = theirs.config.every.max(Duration::from_millis(10));
                crate::continuous::run_periods(every, &theirs.stop, &theirs.shipping, || {
                    theirs.ship(false);
                });
            })
            .map_err(|e| Error::Usage(format!("cannot start the OTLP thread: {e}")))?;
            *lock(&inner.thread) = Some(thread);
            Ok(OtlpExport { inner })
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> OtlpStats {
        self.inner.stats()
    }

    /// Stops the periods and the sampler, sends the last period (no
    /// retries) and counts what is still queued as dropped. Call it from
    /// `Profiler::finish`; later calls return the same counters.
    pub fn finish(&self) -> OtlpStats {
        let inner = &self.inner;
        let mut finished = lock(&inner.finished);
        if let Some(s) = *finished {
            return s;
        }
        crate::continuous::stop_periods(&inner.stop);
        let wait = inner.config.timeout + clrprof::exit::EXIT_WAIT;
        if let Some(t) = lock(&inner.thread).take() {
            let _ = t.join_timeout(wait);
        }
        if let Some(s) = &inner.sampler {
            let _ = s.stop();
        }
        if let Some(e) = &inner.events {
            e.stop();
        }
        let deadline = std::time::Instant::now() + wait;
        if let Some(_guard) = clrprof::exit::lock_until(&inner.shipping, deadline) {
            inner.ship(true);
            for _ in lock(&inner.uploads).drain() {
                inner.dropped.fetch_add(1, SeqCst);
            }
        }
        let s = inner.stats();
        *finished = Some(s);
        s
    }
}

impl Inner {
    fn stats(&self) -> OtlpStats {
        OtlpStats {
            periods: self.periods.load(SeqCst),
            delivered: self.delivered.load(SeqCst),
            dropped: self.dropped.load(SeqCst),
            rejected_profiles: self.rejected.load(SeqCst),
            retries: self.retries.load(SeqCst),
        }
    }

    /// Takes the periods, encodes them and sends (with `shipping` held).
    fn ship(&self, last: bool) {
        let now = SystemTime::now();
        let start = std::mem::replace(&mut *lock(&self.last_start), now);
        let sampled = self.sampler.as_ref().and_then(|s| s.take_period().ok());
        let events: Vec<(ProfileKind, KindProfile)> = match &self.events {
            None => Vec::new(),
            Some(e) => self
                .kinds
                .iter()
                .filter(|k| {
                    matches!(
                        k,
                        ProfileKind::Alloc | ProfileKind::Lock | ProfileKind::Exception
                    )
                })
                .filter_map(|k| e.take_period(*k, now).map(|p| (*k, p)))
                .collect(),
        };
        let heap = match &self.events {
            Some(e) if self.kinds.contains(&ProfileKind::Heap) => {
                e.live_heap().and_then(|h| h.profile())
            }
            _ => None,
        };
        let period = PeriodProfiles {
            sampled: sampled.as_ref(),
            events: events.iter().map(|(k, p)| (*k, p)).collect(),
            heap: heap.as_ref(),
            start: sampled
                .as_ref()
                .and_then(|p| p.time_range().0)
                .unwrap_or(start),
            // The sampled profile's own end: it was taken after `now`, and
            // may hold samples taken in between.
            end: sampled
                .as_ref()
                .and_then(|p| p.time_range().1)
                .unwrap_or(now),
        };
        let request = encode(&period, &self.config.resource);
        let bytes = body(&request, self.config.gzip);
        let index = self.periods.fetch_add(1, SeqCst);
        let size = bytes.len();
        let pending = Pending {
            index,
            bytes,
            samples: sampled.as_ref().map(|p| p.samples()).unwrap_or(0),
            from: 0,
            until: 0,
            rate: 0,
        };
        let options = &self.config.upload;
        let retries = if last { 0 } else { options.retries };
        let refused_before = self.refused.load(SeqCst);
        let mut uploads = lock(&self.uploads);
        let r = uploads.ship(pending, options, retries, &mut |p| self.post(p), &mut |d| {
            crate::upload::pause(&self.stop, d)
        });
        drop(uploads);
        let refused = self.refused.load(SeqCst) - refused_before;
        self.delivered
            .fetch_add(r.sent - refused.min(r.sent), SeqCst);
        self.retries.fetch_add(r.retries, SeqCst);
        self.dropped.fetch_add(r.dropped + refused, SeqCst);
        let result = if r.sent_new && refused == 0 {
            Ok(self.config.url.clone())
        } else {
            Err(r
                .error
                .unwrap_or_else(|| "the endpoint refused it (a status not to retry)".into()))
        };
        if let Err(e) = &result {
            log::warn!("OTLP profiles: period {index}: {e}");
        }
        if let Some(o) = &self.observer {
            let _ =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o(index, size, &result)));
        }
    }

    /// One `POST`. A status not to retry counts the period as dropped and
    /// answers `Ok` (so the queue does not keep it).
    #[cfg(feature = "http-upload")]
    fn post(&self, p: &Pending) -> std::result::Result<(), String> {
        let url = &self.config.url;
        let mut request = self
            .agent
            .post(url)
            .set("Content-Type", "application/x-protobuf");
        // Once: the receiver refuses a version named twice.
        if !self
            .config
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(DEVELOPMENT_VERSION_HEADER))
        {
            request = request.set(DEVELOPMENT_VERSION_HEADER, DEVELOPMENT_VERSION);
        }
        if self.config.gzip {
            request = request.set("Content-Encoding", "gzip");
        }
        for (k, v) in &self.config.headers {
            request = request.set(k, v);
        }
        match request.send_bytes(&p.bytes) {
            Ok(response) => {
                let mut body = Vec::new();
                use std::io::Read;
                let _ = response.into_reader().take(4 << 20).read_to_end(&mut body);
                use prost::Message;
                if let Ok(answer) = ExportProfilesServiceResponse::decode(&body[..]) {
                    if let Some(partial) = answer.partial_success {
                        if partial.rejected_profiles > 0 {
                            self.rejected
                                .fetch_add(partial.rejected_profiles as u64, SeqCst);
                            log::warn!(
                                "OTLP profiles: {url} rejected {} profile(s): {}",
                                partial.rejected_profiles,
                                partial.error_message
                            );
                        }
                    }
                }
                Ok(())
            }
            Err(ureq::Error::Status(code, _)) if retryable(code) => {
                Err(format!("{url} answered HTTP {code} (retryable)"))
            }
            Err(ureq::Error::Status(code, response)) => {
                // Not to be retried: the period is dropped here, and the
                // queue is told it went (so it does not keep it).
                self.refused.fetch_add(1, SeqCst);
                log::warn!(
                    "OTLP profiles: {url} answered HTTP {code} {}: period {} dropped",
                    response.status_text(),
                    p.index
                );
                Ok(())
            }
            Err(e) => Err(format!("cannot send to {url}: {e}")),
        }
    }

    #[cfg(not(feature = "http-upload"))]
    fn post(&self, _p: &Pending) -> std::result::Result<(), String> {
        Err("built without clrprof-sampler's `http-upload` feature".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn attr<'a>(c: &'a OtlpConfig, key: &str) -> Option<&'a AttributeValue> {
        c.resource.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    #[test]
    fn the_standard_environment_is_honoured() {
        let every = Duration::from_secs(1);
        let c = OtlpConfig::from_env(&env(&[]), Some("10.0.15"), every).unwrap();
        assert_eq!(c.url, "http://localhost:4318/v1development/profiles");
        assert!(c.gzip);
        let c = OtlpConfig::from_env(
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,Authorization=Basic%20x"),
                ("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "a=2"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
                ("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "2500"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "service.name=fromattrs,deployment.environment.name=prod%2Ceu",
                ),
                ("OTEL_SERVICE_NAME", "shop"),
            ]),
            Some("10.0.15"),
            every,
        )
        .unwrap();
        assert_eq!(c.url, "http://collector:4318/v1development/profiles");
        assert_eq!(
            c.headers,
            [
                ("Authorization".to_string(), "Basic x".to_string()),
                ("a".to_string(), "2".to_string())
            ]
        );
        assert!(!c.gzip);
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(
            c.resource[0],
            ("service.name".into(), AttributeValue::Str("shop".into()))
        );
        assert_eq!(
            attr(&c, "deployment.environment.name"),
            Some(&AttributeValue::Str("prod,eu".into()))
        );
        assert_eq!(
            attr(&c, "process.pid"),
            Some(&AttributeValue::Int(std::process::id() as i64))
        );
        assert_eq!(
            attr(&c, "process.runtime.version"),
            Some(&AttributeValue::Str("10.0.15".into()))
        );
        assert_eq!(
            attr(&c, "process.runtime.name"),
            Some(&AttributeValue::Str(".NET".into()))
        );
        assert!(attr(&c, "host.name").is_some());
        // The signal's own endpoint is used as it is.
        let c = OtlpConfig::from_env(
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
                ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "http://p:9/custom"),
            ]),
            None,
            every,
        )
        .unwrap();
        assert_eq!(c.url, "http://p:9/custom");
        // Without OTEL_SERVICE_NAME the resource attribute names the service.
        let c = OtlpConfig::from_env(
            &env(&[("OTEL_RESOURCE_ATTRIBUTES", "service.name=fromattrs")]),
            None,
            every,
        )
        .unwrap();
        assert_eq!(
            attr(&c, "service.name"),
            Some(&AttributeValue::Str("fromattrs".into()))
        );
        for (k, v) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
        ] {
            let e = OtlpConfig::from_env(&env(&[(k, v)]), None, every).unwrap_err();
            assert!(e.contains(v), "{k}={v}: {e}");
        }
    }

    fn sampled() -> (Profile, TraceContext) {
        let mut p = Profile::new();
        p.set_origin(Some("10.0.15"), 10_000_000);
        p.set_keep_times(true);
        p.set_cpu_measured(true);
        let main = p.intern_frame("App::Main", Some("app.dll"));
        let spin = p.intern_frame("App::Spin", Some("app.dll"));
        let c = TraceContext {
            trace_id: [0x11; 16],
            span_id: [0x22; 8],
            local_root_span_id: [0x33; 8],
            endpoint: 0,
        };
        clrprof::context::set_root_endpoint(c.local_root_span_id, "/otlp-test");
        let t = RawThreadId(0x10);
        p.set_thread_name(t, "worker");
        for (k, at) in [1_000u64, 2_000, 3_000].iter().enumerate() {
            p.add_n_in_context(t, &[main, spin], 1, false, Some(&c));
            p.add_cpu_in_context(t, &[main, spin], 5 + k as u64, Some(&c));
            p.add_time(t, &[main, spin], Some(&c), *at, 5 + k as u64);
        }
        p.add_n_in_context(RawThreadId(0x20), &[main], 1, false, None);
        p.add_time(RawThreadId(0x20), &[main], None, 4_000, 0);
        (p, c)
    }

    #[test]
    fn a_period_becomes_one_request_with_a_profile_per_sample_type() {
        let (p, c) = sampled();
        let mut exceptions = KindProfile::default();
        exceptions.add(
            Some("System.InvalidOperationException"),
            &["App::Throw", "App::Main"],
            [3, 0],
        );
        let config = OtlpConfig::from_env(
            &env(&[("OTEL_SERVICE_NAME", "svc")]),
            Some("10.0.15"),
            Duration::from_secs(1),
        )
        .unwrap();
        let start = UNIX_EPOCH + Duration::from_secs(100);
        let period = PeriodProfiles {
            sampled: Some(&p),
            events: vec![(ProfileKind::Exception, &exceptions)],
            heap: None,
            start,
            end: start + Duration::from_secs(2),
        };
        let bytes = body(&encode(&period, &config.resource), false);
        let r = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
        let d = r.dictionary.as_ref().unwrap();
        let st = |i: i32| d.string_table[i as usize].as_str();
        // Every table starts with its zero value; link 0 has 16 and 8 zero bytes.
        assert_eq!(d.string_table[0], "");
        assert_eq!(d.mapping_table[0], Mapping::default());
        assert_eq!(d.location_table[0], Location::default());
        assert_eq!(d.function_table[0], Function::default());
        assert_eq!(d.stack_table[0], Stack::default());
        assert_eq!(d.attribute_table[0], KeyValueAndUnit::default());
        assert_eq!(
            (
                d.link_table[0].trace_id.len(),
                d.link_table[0].span_id.len()
            ),
            (16, 8)
        );
        let rp = &r.resource_profiles[0];
        let res = &rp.resource.as_ref().unwrap().attributes;
        assert_eq!(res[0].key, "service.name");
        assert_eq!(res[0].value.as_ref().unwrap().as_str(), Some("svc"));
        let scope = &rp.scope_profiles[0];
        assert_eq!(scope.scope.as_ref().unwrap().name, "clrprof");
        let types: Vec<(&str, &str)> = scope
            .profiles
            .iter()
            .map(|p| {
                let t = p.sample_type.as_ref().unwrap();
                (st(t.type_strindex), st(t.unit_strindex))
            })
            .collect();
        assert_eq!(
            types,
            [
                ("cpu", "nanoseconds"),
                ("wall", "nanoseconds"),
                ("exceptions", "count")
            ]
        );
        for prof in &scope.profiles {
            assert_eq!(prof.time_unix_nano, 100_000_000_000);
            assert_eq!(prof.duration_nano, 2_000_000_000);
            assert_eq!(prof.profile_id.len(), 16);
            assert!(prof.profile_id.iter().any(|&b| b != 0));
        }
        let (cpu, wall) = (&scope.profiles[0], &scope.profiles[1]);
        // The labelled stack: one sample, three observations with their times.
        let labelled = wall.samples.iter().find(|s| s.link_index != 0).unwrap();
        assert_eq!(labelled.values, [10_000_000; 3]);
        assert_eq!(labelled.timestamps_unix_nano, [1_000, 2_000, 3_000]);
        let link = &d.link_table[labelled.link_index as usize];
        assert_eq!(
            (&link.trace_id[..], &link.span_id[..]),
            (&c.trace_id[..], &c.span_id[..])
        );
        let attrs: Vec<(&str, &str)> = labelled
            .attribute_indices
            .iter()
            .map(|&i| {
                let a = &d.attribute_table[i as usize];
                (
                    st(a.key_strindex),
                    a.value.as_ref().unwrap().as_str().unwrap(),
                )
            })
            .collect();
        for want in [
            ("thread.name", "worker"),
            ("trace_id", "11111111111111111111111111111111"),
            ("span_id", "2222222222222222"),
            ("local_root_span_id", "3333333333333333"),
            ("trace_endpoint", "/otlp-test"),
        ] {
            assert!(attrs.contains(&want), "{want:?} not in {attrs:?}");
        }
        let stack = &d.stack_table[labelled.stack_index as usize];
        let leaf = &d.location_table[stack.location_indices[0] as usize];
        let f = &d.function_table[leaf.lines[0].function_index as usize];
        assert_eq!(st(f.name_strindex), "App::Spin");
        assert_eq!(
            st(d.mapping_table[leaf.mapping_index as usize].filename_strindex),
            "app.dll"
        );
        let cpu_labelled = cpu.samples.iter().find(|s| s.link_index != 0).unwrap();
        assert_eq!(cpu_labelled.values, [5, 6, 7]);
        // The unlabelled sample has no link and no context attributes.
        let other = wall.samples.iter().find(|s| s.link_index == 0).unwrap();
        assert!(other.attribute_indices.is_empty());
        assert_eq!(other.timestamps_unix_nano, [4_000]);
        let exc = &scope.profiles[2].samples[0];
        assert_eq!(exc.values, [3]);
    }

    /// The request of `tests/data/otlp-request.pb`: the sampled period of
    /// [`sampled`] and an exception profile, fixed resource and profile ids.
    fn fixture() -> ExportProfilesServiceRequest {
        let (p, _) = sampled();
        let mut exceptions = KindProfile::default();
        exceptions.add(
            Some("System.InvalidOperationException"),
            &["App::Throw", "App::Main"],
            [3, 0],
        );
        let resource = vec![
            (
                "service.name".to_string(),
                AttributeValue::Str("fixture".into()),
            ),
            ("process.pid".to_string(), AttributeValue::Int(4242)),
            (
                "process.runtime.name".to_string(),
                AttributeValue::Str(".NET".into()),
            ),
            (
                "process.runtime.version".to_string(),
                AttributeValue::Str("10.0.15".into()),
            ),
            ("host.name".to_string(), AttributeValue::Str("ci".into())),
        ];
        let start = UNIX_EPOCH + Duration::from_secs(100);
        let period = PeriodProfiles {
            sampled: Some(&p),
            events: vec![(ProfileKind::Exception, &exceptions)],
            heap: None,
            start,
            end: start + Duration::from_secs(2),
        };
        let mut n = 0u8;
        let mut r = encode_with_ids(&period, &resource, &mut || {
            n += 1;
            vec![n; 16]
        });
        // The crate's version stays out of the committed bytes.
        for sp in &mut r.resource_profiles[0].scope_profiles {
            if let Some(scope) = &mut sp.scope {
                scope.version = "fixture".into();
            }
        }
        r
    }

    const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/otlp-request.pb");
    const PROTOC_TEXT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/otlp-request.protoc.txt"
    );

    /// The committed request is what the encoder gives today, and the SDK's
    /// own types read it as `protoc --decode` did against the official
    /// protos of 1.11.0 (recorded once with Debian's protobuf-compiler:
    /// `CLRPROF_WRITE_OTLP_FIXTURE=1` writes the `.pb`; then
    /// `protoc --decode=opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
    /// -I <opentelemetry-proto checkout> opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
    /// < otlp-request.pb > otlp-request.protoc.txt`).
    #[test]
    fn the_request_reads_as_protoc_decoded_it() {
        let bytes = fixture().encode_to_vec();
        if std::env::var_os("CLRPROF_WRITE_OTLP_FIXTURE").is_some() {
            std::fs::create_dir_all(std::path::Path::new(FIXTURE).parent().unwrap()).unwrap();
            std::fs::write(FIXTURE, &bytes).unwrap();
        }
        let committed = std::fs::read(FIXTURE).unwrap();
        assert_eq!(
            bytes, committed,
            "the encoder no longer gives the committed request"
        );
        let ours = text::request(&ExportProfilesServiceRequest::decode(&committed[..]).unwrap());
        let protoc = std::fs::read_to_string(PROTOC_TEXT).unwrap();
        assert_eq!(ours, protoc);
    }

    /// A live heap of two rows (two types, one stack each), as of a
    /// collection.
    fn heap() -> HeapProfile {
        use crate::live_heap::HeapRow;
        let stack = |frames: &[&str]| -> Arc<[Arc<str>]> {
            frames.iter().map(|f| Arc::<str>::from(*f)).collect()
        };
        HeapProfile {
            rows: vec![
                HeapRow {
                    type_name: "System.Byte[]".into(),
                    stack: stack(&["Cache::Grow", "App::Main"]),
                    age: "2-3",
                    generation: "loh",
                    objects: 12.4,
                    bytes: 1_056_000.0,
                },
                HeapRow {
                    type_name: "App.Node".into(),
                    stack: stack(&["App::Link", "App::Main"]),
                    age: "1",
                    generation: "0",
                    objects: 3_201.0,
                    bytes: 102_432.0,
                },
                // Nothing to show: no sample in either profile, nothing in
                // the dictionary.
                HeapRow {
                    type_name: "App.Empty".into(),
                    stack: stack(&["App::Main"]),
                    age: "1",
                    generation: "0",
                    objects: 0.2,
                    bytes: 0.0,
                },
            ],
            as_of: None,
            stats: Default::default(),
        }
    }

    /// A period with the live heap only, fixed ids, as committed in
    /// `tests/data/otlp-heap-request.pb`.
    fn heap_fixture() -> ExportProfilesServiceRequest {
        let h = heap();
        let start = UNIX_EPOCH + Duration::from_secs(200);
        let period = PeriodProfiles {
            sampled: None,
            events: Vec::new(),
            heap: Some(&h),
            start,
            end: start + Duration::from_secs(5),
        };
        let resource = vec![(
            "service.name".to_string(),
            AttributeValue::Str("fixture".into()),
        )];
        let mut n = 0u8;
        let mut r = encode_with_ids(&period, &resource, &mut || {
            n += 1;
            vec![n; 16]
        });
        for sp in &mut r.resource_profiles[0].scope_profiles {
            if let Some(scope) = &mut sp.scope {
                scope.version = "fixture".into();
            }
        }
        r
    }

    #[test]
    fn the_live_heap_is_two_profiles_with_type_age_and_generation() {
        let r = heap_fixture();
        let d = r.dictionary.as_ref().unwrap();
        let st = |i: i32| d.string_table[i as usize].as_str();
        let profiles = &r.resource_profiles[0].scope_profiles[0].profiles;
        let types: Vec<(&str, &str)> = profiles
            .iter()
            .map(|p| {
                let t = p.sample_type.as_ref().unwrap();
                (st(t.type_strindex), st(t.unit_strindex))
            })
            .collect();
        assert_eq!(
            types,
            [("inuse_objects", "count"), ("inuse_space", "bytes")]
        );
        /// (leaf function, attributes sorted by key, values)
        type Row = (String, Vec<(String, String)>, Vec<i64>);
        let rows = |p: &proto::Profile| -> Vec<Row> {
            p.samples
                .iter()
                .map(|s| {
                    let stack = &d.stack_table[s.stack_index as usize];
                    let leaf = &d.location_table[stack.location_indices[0] as usize];
                    let f = &d.function_table[leaf.lines[0].function_index as usize];
                    let attrs = s
                        .attribute_indices
                        .iter()
                        .map(|&i| {
                            let a = &d.attribute_table[i as usize];
                            (
                                st(a.key_strindex).to_string(),
                                a.value.as_ref().unwrap().as_str().unwrap().to_string(),
                            )
                        })
                        .collect::<std::collections::BTreeMap<_, _>>()
                        .into_iter()
                        .collect();
                    assert_eq!(s.link_index, 0);
                    (st(f.name_strindex).to_string(), attrs, s.values.clone())
                })
                .collect()
        };
        let kv = |t: &str, a: &str, g: &str| {
            vec![
                ("age".to_string(), a.to_string()),
                ("generation".to_string(), g.to_string()),
                ("type".to_string(), t.to_string()),
            ]
        };
        // Sorted by type; the estimates rounded; a zero row left out.
        assert_eq!(
            rows(&profiles[0]),
            [
                (
                    "App::Link".to_string(),
                    kv("App.Node", "1", "0"),
                    vec![3_201]
                ),
                (
                    "Cache::Grow".to_string(),
                    kv("System.Byte[]", "2-3", "loh"),
                    vec![12]
                ),
            ]
        );
        assert_eq!(
            rows(&profiles[1]),
            [
                (
                    "App::Link".to_string(),
                    kv("App.Node", "1", "0"),
                    vec![102_432]
                ),
                (
                    "Cache::Grow".to_string(),
                    kv("System.Byte[]", "2-3", "loh"),
                    vec![1_056_000]
                ),
            ]
        );
        for p in profiles {
            assert_eq!(p.time_unix_nano, 200_000_000_000);
            assert_eq!(p.duration_nano, 5_000_000_000);
        }
    }

    const HEAP_FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/otlp-heap-request.pb"
    );
    const HEAP_PROTOC_TEXT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/otlp-heap-request.protoc.txt"
    );

    /// As [`the_request_reads_as_protoc_decoded_it`], for a period with the
    /// live heap (recorded the same way, `CLRPROF_WRITE_OTLP_FIXTURE=1`
    /// writing `otlp-heap-request.pb`).
    #[test]
    fn the_live_heap_reads_as_protoc_decoded_it() {
        let bytes = heap_fixture().encode_to_vec();
        if std::env::var_os("CLRPROF_WRITE_OTLP_FIXTURE").is_some() {
            std::fs::write(HEAP_FIXTURE, &bytes).unwrap();
        }
        let committed = std::fs::read(HEAP_FIXTURE).unwrap();
        assert_eq!(
            bytes, committed,
            "the encoder no longer gives the committed request"
        );
        let ours = text::request(&ExportProfilesServiceRequest::decode(&committed[..]).unwrap());
        let protoc = std::fs::read_to_string(HEAP_PROTOC_TEXT).unwrap();
        assert_eq!(ours, protoc);
    }

    /// A one-request-at-a-time HTTP server answering `statuses` in turn;
    /// returns its URL and the requests' (headers, body).
    #[cfg(feature = "http-upload")]
    fn server(statuses: Vec<u16>) -> (String, std::sync::mpsc::Receiver<(String, Vec<u8>)>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}{PROFILES_PATH}", listener.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for status in statuses {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let mut reader = BufReader::new(stream);
                let mut head = String::new();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let _ = tx.send((head, body));
                let mut stream = reader.into_inner();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        (url, rx)
    }

    #[cfg(feature = "http-upload")]
    #[test]
    fn retryable_answers_are_retried_others_drop_the_period() {
        let (url, rx) = server(vec![503, 200, 400]);
        let mut config = OtlpConfig::from_env(
            &env(&[
                ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", &url),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=t1"),
            ]),
            Some("10.0.15"),
            Duration::from_secs(3600),
        )
        .unwrap();
        config.upload.retries = 2;
        config.upload.backoff = Duration::from_millis(10);
        let export = OtlpExport::start(None, None, &[], config, None).unwrap();
        // First period: 503 then 200.
        export.inner.ship(false);
        let (head, body) = rx.recv().unwrap();
        assert!(head.starts_with("POST /v1development/profiles "), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("content-type: application/x-protobuf"));
        assert!(lower.contains("content-encoding: gzip"));
        assert!(lower.contains("x-tenant: t1"));
        assert!(lower.contains("otlp-profiles-development-version: 1\r\n"));
        let mut raw = Vec::new();
        use std::io::Read;
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut raw)
            .unwrap();
        ExportProfilesServiceRequest::decode(&raw[..]).unwrap();
        let _ = rx.recv().unwrap();
        let s = export.stats();
        assert_eq!((s.periods, s.delivered, s.retries, s.dropped), (1, 1, 1, 0));
        // Second: 400 is not retried; the period is dropped.
        export.inner.ship(false);
        let _ = rx.recv().unwrap();
        let s = export.stats();
        assert_eq!((s.periods, s.delivered, s.retries, s.dropped), (2, 1, 1, 1));
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "no retry after 400"
        );
    }
}
