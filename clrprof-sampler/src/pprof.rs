//! The sampler's profile as pprof: `profile.proto`, gzip-compressed.
//!
//! pprof is the format `go tool pprof`, Grafana Pyroscope, Parca, Google
//! Cloud Profiler and Datadog read, and the base of OpenTelemetry's profiles
//! signal. The messages below follow the public `profile.proto` (package
//! `perftools.profiles`) field numbers; [prost] encodes them and [flate2]
//! compresses the result, as the format expects.
//!
//! What a clrprof profile becomes:
//!
//! | pprof | from |
//! |---|---|
//! | `sample_type` | `samples`/`count` and `wall`/`nanoseconds` (count × sampling period); `cpu`/`nanoseconds` when the profile measured CPU time ([`Profile::add_cpu`]); `alloc_objects`/`count` and `alloc_space`/`bytes` when the profile holds allocations |
//! | `period_type`, `period` | `wall`/`nanoseconds`, the sampler's period (1 s / rate) |
//! | `mapping` | one per module (file name), `has_functions` |
//! | `function` | one per frame name (`Namespace.Class::Method`), its module as `filename` |
//! | `location` | one per frame name: its mapping and one line naming the function |
//! | `sample` | one per distinct (thread name, stack), leaf first; labels `thread` (the thread's name, or `unnamed` for every thread without one) and `runtime_version` |
//! | `time_nanos`, `duration_nanos` | the profile's (period's) start and length |
//!
//! The type names are the ones pprof tools and backends know (`go tool
//! pprof`, Pyroscope's and Grafana's profile types `wall`, `cpu`,
//! `alloc_objects`, `alloc_space`); no type name holds a `-`, and no
//! function, location or mapping has ID 0, as Pyroscope's ingest requires.
//!
//! The labels have bounded cardinality: a per-run thread ID would make one
//! backend series per thread and run, so the `thread` label is the
//! thread's name (`Thread.Name`), every unnamed thread sharing
//! [`UNNAMED_THREAD`], and threads of one name are merged.
//!
//! The sampler walks every managed thread at each tick, running or waiting,
//! so its sample counts measure wall time: a thread blocked in a wait is
//! counted in the frame it waits in. The `cpu` values weigh each sample by
//! the CPU time the thread used since the tick before (see the
//! [sampler docs](super#cpu-time)).

use super::profile::Profile;
use clrprof::context::TraceContext;
use clrprof::ids::RawThreadId;
use flate2::{read::GzDecoder, write::GzEncoder, Compression};
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct PprofProfile {
    /// What each value of a sample measures.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Loaded modules.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Code locations (one per frame here).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string of the profile; index 0 is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Regular expression of frames to drop (string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Regular expression of frames to keep (string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// Start, in nanoseconds since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// Length, in nanoseconds.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What the period measures.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Sampling period.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string index of its type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: a type and unit, as string indices.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// e.g. "samples".
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// e.g. "count".
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: a stack (leaf first) and its values.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Location IDs, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: key and string or number value.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Key (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string index).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// Unit of `num` (string index).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `Mapping`: a loaded binary (here a module).
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Unique nonzero ID.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Load address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End address.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// File name (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build ID (string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Function names are known.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// File names are known.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Line numbers are known.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Inlined frames are known.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `Location`: a code address and the function(s) at it.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Unique nonzero ID.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping (0: none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Instruction address (0: unknown).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Functions at this location, the inlined ones first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Folded frames.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// `Line`: a function and line in it.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// Function ID.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Source column (0: unknown).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// `Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Unique nonzero ID.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Name as the system knows it (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file, here the module (string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First line (0: unknown).
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// The string table being built.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.get("");
        s
    }
    fn get(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The `thread` label of samples of a thread without a name: one bucket,
/// so that unnamed threads do not make one series each.
pub const UNNAMED_THREAD: &str = "unnamed";

impl Profile {
    /// The profile as a `perftools.profiles.Profile` message (see the
    /// [module docs](self) for the mapping).
    pub fn to_pprof(&self) -> PprofProfile {
        let mut s = Strings::new();
        let allocations = self.allocations().next().is_some();
        let cpu = self.cpu_measured();
        let mut sample_type = vec![
            ValueType {
                r#type: s.get("samples"),
                unit: s.get("count"),
            },
            ValueType {
                r#type: s.get("wall"),
                unit: s.get("nanoseconds"),
            },
        ];
        if cpu {
            sample_type.push(ValueType {
                r#type: s.get("cpu"),
                unit: s.get("nanoseconds"),
            });
        }
        if allocations {
            sample_type.push(ValueType {
                r#type: s.get("alloc_objects"),
                unit: s.get("count"),
            });
            sample_type.push(ValueType {
                r#type: s.get("alloc_space"),
                unit: s.get("bytes"),
            });
        }
        // Mappings: one per module, in first-use order.
        let mut mapping: Vec<Mapping> = Vec::new();
        let mut mapping_of: HashMap<&str, u64> = HashMap::new();
        let mut function = Vec::with_capacity(self.frame_names().len());
        let mut location = Vec::with_capacity(self.frame_names().len());
        for (i, name) in self.frame_names().iter().enumerate() {
            let id = i as u64 + 1;
            let module = self.frame_module(i as u32);
            let mapping_id = match module {
                Some(m) => *mapping_of.entry(m).or_insert_with(|| {
                    let id = mapping.len() as u64 + 1;
                    mapping.push(Mapping {
                        id,
                        filename: s.get(m),
                        has_functions: true,
                        ..Default::default()
                    });
                    id
                }),
                None => 0,
            };
            let name = s.get(name);
            function.push(Function {
                id,
                name,
                system_name: name,
                filename: module.map(|m| s.get(m)).unwrap_or(0),
                start_line: 0,
            });
            location.push(Location {
                id,
                mapping_id,
                address: 0,
                line: vec![Line {
                    function_id: id,
                    line: 0,
                    column: 0,
                }],
                is_folded: false,
            });
        }
        let (thread_key, runtime_key) = (s.get("thread"), s.get("runtime_version"));
        let runtime = self.runtime().map(|r| s.get(r));
        let period = i64::try_from(self.period_nanos()).unwrap_or(i64::MAX);
        // Columns: samples, wall, [cpu], [alloc_objects, alloc_space].
        let cpu_col = cpu.then_some(2);
        let alloc_col = if cpu { 3 } else { 2 };
        let width = sample_type.len();
        // One sample per (thread name, trace context, stack): threads of
        // one name merge, so the thread label's values are bounded by the
        // names the app gives; samples of different requests stay apart.
        let mut merged: BTreeMap<(&str, u32, &[u32]), Vec<i64>> = BTreeMap::new();
        fn row<'p>(
            p: &'p Profile,
            t: RawThreadId,
            tag: u32,
            stack: &'p [u32],
        ) -> Option<(&'p str, u32, &'p [u32])> {
            if stack.is_empty() {
                return None;
            }
            Some((p.thread_name(t).unwrap_or(UNNAMED_THREAD), tag, stack))
        }
        let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for (t, tag, stack, n) in self.tagged_stacks() {
            if let Some(key) = row(self, t, tag, stack) {
                let v = merged.entry(key).or_insert_with(|| vec![0; width]);
                v[0] = v[0].saturating_add(to_i64(n));
                v[1] = v[1].saturating_add(to_i64(n).saturating_mul(period));
            }
        }
        if let Some(c) = cpu_col {
            for (t, tag, stack, ns) in self.tagged_cpu() {
                if let Some(key) = row(self, t, tag, stack) {
                    let v = merged.entry(key).or_insert_with(|| vec![0; width]);
                    v[c] = v[c].saturating_add(to_i64(ns));
                }
            }
        }
        if allocations {
            for (t, stack, n, bytes) in self.allocations() {
                if let Some(key) = row(self, t, 0, stack) {
                    let v = merged.entry(key).or_insert_with(|| vec![0; width]);
                    v[alloc_col] = v[alloc_col].saturating_add(to_i64(n));
                    v[alloc_col + 1] = v[alloc_col + 1].saturating_add(to_i64(bytes));
                }
            }
        }
        // Each context's labels once (its endpoint is looked up once).
        let mut context_labels: HashMap<u32, Vec<Label>> = HashMap::new();
        let mut sample = Vec::with_capacity(merged.len());
        for ((thread, tag, stack), value) in merged {
            let mut label = vec![Label {
                key: thread_key,
                str: s.get(thread),
                ..Default::default()
            }];
            if let Some(r) = runtime {
                label.push(Label {
                    key: runtime_key,
                    str: r,
                    ..Default::default()
                });
            }
            if let Some(c) = self.contexts().get(tag) {
                let of_context = context_labels.entry(tag).or_insert_with(|| {
                    let endpoint = self.contexts().endpoint(tag);
                    crate::labels::labels(c, endpoint.as_deref())
                        .into_iter()
                        .map(|(k, v)| Label {
                            key: s.get(k),
                            str: s.get(&v),
                            ..Default::default()
                        })
                        .collect()
                });
                label.extend(of_context.iter().cloned());
            }
            sample.push(Sample {
                location_id: stack.iter().rev().map(|&i| u64::from(i) + 1).collect(),
                value,
                label,
            });
        }
        let (start, end) = self.time_range();
        let time_nanos = start
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(nanos)
            .unwrap_or(0);
        let duration_nanos = match (start, end) {
            (Some(a), Some(b)) => b.duration_since(a).map(nanos).unwrap_or(0),
            (Some(a), None) => SystemTime::now().duration_since(a).map(nanos).unwrap_or(0),
            _ => 0,
        };
        let period_type = Some(ValueType {
            r#type: s.get("wall"),
            unit: s.get("nanoseconds"),
        });
        let comment = vec![s.get("clrprof sampler")];
        PprofProfile {
            sample_type,
            sample,
            mapping,
            location,
            function,
            string_table: s.table,
            drop_frames: 0,
            keep_frames: 0,
            time_nanos,
            duration_nanos,
            period_type,
            period,
            comment,
            default_sample_type: 0,
        }
    }

    /// The profile as gzip-compressed `profile.proto` bytes (what
    /// `go tool pprof` and pprof uploads take).
    pub fn pprof_bytes(&self) -> Vec<u8> {
        let raw = self.to_pprof().encode_to_vec();
        let mut gz = GzEncoder::new(
            Vec::with_capacity(raw.len() / 4 + 64),
            Compression::default(),
        );
        // Writing into a Vec cannot fail.
        let _ = gz.write_all(&raw);
        gz.finish().unwrap_or_default()
    }

    /// Writes the profile as gzip-compressed `profile.proto` (a `.pb.gz` file).
    pub fn write_pprof(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.pprof_bytes())
    }

    /// Reads a pprof profile (gzip-compressed or not): every sample of its
    /// `samples` type (else its first) becomes that many samples of its stack
    /// (frames named by their functions, inlined ones included), per `thread`
    /// label (a hex number is a thread ID; any other value a thread name,
    /// each distinct name one thread; no label, thread 0). Sample types
    /// `cpu`, `alloc_objects` and `alloc_space`, if present, become CPU time
    /// and allocations.
    pub fn from_pprof(bytes: &[u8]) -> Result<Profile, String> {
        let mut raw = Vec::new();
        let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
            GzDecoder::new(bytes)
                .read_to_end(&mut raw)
                .map_err(|e| format!("not gzip data: {e}"))?;
            &raw[..]
        } else {
            bytes
        };
        let pb = PprofProfile::decode(bytes).map_err(|e| format!("not a pprof profile: {e}"))?;
        let st = |i: i64| -> &str {
            usize::try_from(i)
                .ok()
                .and_then(|i| pb.string_table.get(i))
                .map(String::as_str)
                .unwrap_or("")
        };
        let type_index = |name: &str| pb.sample_type.iter().position(|t| st(t.r#type) == name);
        let count_index = type_index("samples").unwrap_or(0);
        let alloc = (type_index("alloc_objects"), type_index("alloc_space"));
        let cpu_index = type_index("cpu");
        let mut named: HashMap<&str, RawThreadId> = HashMap::new();
        let functions: HashMap<u64, &Function> = pb.function.iter().map(|f| (f.id, f)).collect();
        let mappings: HashMap<u64, &Mapping> = pb.mapping.iter().map(|m| (m.id, m)).collect();
        let locations: HashMap<u64, &Location> = pb.location.iter().map(|l| (l.id, l)).collect();
        let mut p = Profile::new();
        let mut stack = Vec::new();
        for sample in &pb.sample {
            stack.clear();
            for id in sample.location_id.iter().rev() {
                let loc = locations.get(id).ok_or_else(|| {
                    format!("sample names location {id}, which is not in the profile")
                })?;
                let module = mappings
                    .get(&loc.mapping_id)
                    .map(|m| st(m.filename))
                    .filter(|m| !m.is_empty());
                if loc.line.is_empty() {
                    stack.push(p.intern_frame(&format!("{:#x}", loc.address), module));
                }
                // Lines list inlined functions first: the caller is last.
                for line in loc.line.iter().rev() {
                    let name = functions
                        .get(&line.function_id)
                        .map(|f| st(f.name))
                        .unwrap_or("?");
                    stack.push(p.intern_frame(name, module));
                }
            }
            // A hex label is a thread ID (older clrprof files); any other
            // is a thread name, each distinct one a thread of its own.
            let label = sample
                .label
                .iter()
                .find(|l| st(l.key) == "thread")
                .map(|l| st(l.str));
            let thread = match label {
                None => RawThreadId(0),
                Some(l) => match l
                    .strip_prefix("0x")
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                {
                    Some(t) => RawThreadId(t as usize),
                    None => {
                        let next = RawThreadId(named.len() + 1);
                        let t = *named.entry(l).or_insert(next);
                        if l != UNNAMED_THREAD {
                            p.set_thread_name(t, l);
                        }
                        t
                    }
                },
            };
            let value = |i: usize| sample.value.get(i).copied().unwrap_or(0).max(0) as u64;
            let label_of = |key: &str| {
                sample
                    .label
                    .iter()
                    .find(|l| st(l.key) == key)
                    .map(|l| st(l.str))
            };
            let context = context_of_labels(&label_of);
            let tag = p.context_tag(context.as_ref());
            if let Some(e) = label_of(crate::labels::TRACE_ENDPOINT).filter(|_| tag > 0) {
                p.set_context_endpoint(tag, e);
            }
            let n = value(count_index);
            if n > 0 {
                p.add_n_in_context(thread, &stack, n, false, context.as_ref());
            }
            if let Some(c) = cpu_index {
                p.set_cpu_measured(true);
                if value(c) > 0 {
                    p.add_cpu_in_context(thread, &stack, value(c), context.as_ref());
                }
            }
            if let (Some(c), Some(b)) = alloc {
                if value(c) > 0 || value(b) > 0 {
                    p.add_allocations(thread, &stack, value(c), value(b));
                }
            }
        }
        let runtime = pb
            .sample
            .iter()
            .flat_map(|s| &s.label)
            .find(|l| st(l.key) == "runtime_version");
        p.set_origin(runtime.map(|l| st(l.str)), pb.period.max(0) as u64);
        if pb.time_nanos > 0 {
            let start = UNIX_EPOCH + Duration::from_nanos(pb.time_nanos as u64);
            p.set_start(start);
            p.set_end(start + Duration::from_nanos(pb.duration_nanos.max(0) as u64));
        }
        Ok(p)
    }
}

/// The trace context a sample's labels name (`trace_id`, `span_id`,
/// `local_root_span_id`), if they are all there and well-formed.
fn context_of_labels<'a>(label: &impl Fn(&str) -> Option<&'a str>) -> Option<TraceContext> {
    let mut c = TraceContext::default();
    let ok = crate::labels::parse_hex(label(crate::labels::TRACE_ID)?, &mut c.trace_id)
        && crate::labels::parse_hex(label(crate::labels::SPAN_ID)?, &mut c.span_id)
        && crate::labels::parse_hex(
            label(crate::labels::LOCAL_ROOT_SPAN_ID)?,
            &mut c.local_root_span_id,
        );
    ok.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        let mut p = Profile::new();
        p.set_origin(Some("8.0.4"), 1_000_000);
        let main = p.intern_frame("Hot.Program::Main", Some("hot.exe"));
        let spin = p.intern_frame("Hot.Program::Spin", Some("hot.exe"));
        let un = p.intern_frame("[unmanaged]", None);
        let (t1, t2) = (RawThreadId(0x10), RawThreadId(0x20));
        p.set_thread_name(t1, "worker");
        p.add(t1, &[main, spin], false);
        p.add(t1, &[main, spin], false);
        p.add(t2, &[main, spin], false);
        p.add(t2, &[un], false);
        p.add(t2, &[], false);
        p
    }

    /// What a file written by `write_pprof` decodes to.
    fn written(p: &Profile) -> PprofProfile {
        let mut out = Vec::new();
        p.write_pprof(&mut out).unwrap();
        let mut raw = Vec::new();
        GzDecoder::new(&out[..]).read_to_end(&mut raw).unwrap();
        PprofProfile::decode(&raw[..]).unwrap()
    }

    fn types(pb: &PprofProfile) -> Vec<(String, String)> {
        let st = |i: i64| pb.string_table[i as usize].clone();
        pb.sample_type
            .iter()
            .map(|t| (st(t.r#type), st(t.unit)))
            .collect()
    }

    fn labels(pb: &PprofProfile, s: &Sample) -> Vec<(String, String)> {
        let st = |i: i64| pb.string_table[i as usize].clone();
        s.label.iter().map(|l| (st(l.key), st(l.str))).collect()
    }

    #[test]
    fn cpu_time_is_a_cpu_nanoseconds_column() {
        let mut p = profile();
        let main = p.intern("Hot.Program::Main");
        let spin = p.intern("Hot.Program::Spin");
        p.add_cpu(RawThreadId(0x10), &[main, spin], 1_500_000);
        p.add_cpu(RawThreadId(0x20), &[main, spin], 7);
        let pb = written(&p);
        let t: Vec<_> = types(&pb);
        let t: Vec<(&str, &str)> = t.iter().map(|(a, b)| (&**a, &**b)).collect();
        assert_eq!(
            t,
            [
                ("samples", "count"),
                ("wall", "nanoseconds"),
                ("cpu", "nanoseconds")
            ]
        );
        let worker = pb
            .sample
            .iter()
            .find(|s| labels(&pb, s)[0].1 == "worker")
            .unwrap();
        assert_eq!(worker.value, [2, 2_000_000, 1_500_000]);
        // A stack sampled but never given CPU time has cpu 0.
        let un = pb
            .function
            .iter()
            .find(|f| pb.string_table[f.name as usize] == "[unmanaged]");
        let un = un.unwrap().id;
        let idle = pb.sample.iter().find(|s| s.location_id == [un]).unwrap();
        assert_eq!(idle.value, [1, 1_000_000, 0]);
        let back = Profile::from_pprof(&p.pprof_bytes()).unwrap();
        assert!(back.cpu_measured());
        let mut cpu: Vec<u64> = back.cpu_stacks().map(|(_, _, n)| n).collect();
        cpu.sort();
        assert_eq!(cpu, [7, 1_500_000]);
        // Without CPU time measured there is no cpu column.
        assert_eq!(types(&written(&profile())).len(), 2);
    }

    #[test]
    fn thread_labels_are_names_and_unnamed_threads_share_one() {
        let mut p = profile();
        let main = p.intern("Hot.Program::Main");
        let spin = p.intern("Hot.Program::Spin");
        // Forty more unnamed threads and a second "worker" thread.
        for t in 0..40 {
            p.add(RawThreadId(0x1000 + t * 8), &[main, spin], false);
        }
        p.set_thread_name(RawThreadId(0x99), "worker");
        p.add(RawThreadId(0x99), &[main, spin], false);
        let pb = written(&p);
        let mut values: Vec<String> = pb
            .sample
            .iter()
            .map(|s| labels(&pb, s)[0].1.clone())
            .collect();
        values.sort();
        values.dedup();
        assert_eq!(values, ["unnamed", "worker"]);
        // Threads of one name merge: one sample per (name, stack).
        assert_eq!(pb.sample.len(), 3);
        let find = |name: &str| {
            pb.sample
                .iter()
                .find(|s| labels(&pb, s)[0].1 == name && s.location_id.len() == 2)
                .unwrap()
                .value
                .clone()
        };
        assert_eq!(find("unnamed"), [41, 41_000_000]);
        assert_eq!(find("worker"), [3, 3_000_000]);
        // Names survive a round trip; every unnamed thread is one thread.
        let back = Profile::from_pprof(&p.pprof_bytes()).unwrap();
        assert_eq!(back.threads(), 2);
        let named: Vec<_> = back
            .stacks()
            .filter_map(|(t, _, _)| back.thread_name(t))
            .collect();
        assert!(named.contains(&"worker"));
    }

    #[test]
    fn keeps_pyroscope_ingest_rules() {
        let mut p = profile();
        let main = p.intern("Hot.Program::Main");
        p.add_cpu(RawThreadId(0x10), &[main], 5);
        p.add_allocations(RawThreadId(0x10), &[main], 3, 96);
        let pb = written(&p);
        assert_eq!(pb.string_table[0], "");
        for (t, u) in types(&pb) {
            assert!(!t.contains('-') && !u.contains('-'), "{t}/{u}");
        }
        assert!(pb.function.iter().all(|f| f.id != 0 && f.name != 0));
        assert!(pb.location.iter().all(|l| l.id != 0));
        assert!(pb.mapping.iter().all(|m| m.id != 0));
        let ids: std::collections::HashSet<u64> = pb.location.iter().map(|l| l.id).collect();
        assert!(pb
            .sample
            .iter()
            .all(|s| !s.location_id.is_empty() && s.location_id.iter().all(|i| ids.contains(i))));
        assert!(pb
            .sample
            .iter()
            .all(|s| s.value.len() == pb.sample_type.len()));
        let pt = pb.period_type.as_ref().unwrap();
        assert_eq!(pb.string_table[pt.r#type as usize], "wall");
    }

    #[test]
    fn encodes_types_functions_mappings_and_labels() {
        let p = profile();
        let pb = written(&p);
        let st = |i: i64| pb.string_table[i as usize].as_str();
        assert_eq!(pb.string_table[0], "");
        let types: Vec<_> = pb
            .sample_type
            .iter()
            .map(|t| (st(t.r#type), st(t.unit)))
            .collect();
        assert_eq!(types, [("samples", "count"), ("wall", "nanoseconds")]);
        assert_eq!(pb.period, 1_000_000);
        assert_eq!(pb.mapping.len(), 1);
        assert_eq!(st(pb.mapping[0].filename), "hot.exe");
        assert_eq!(pb.function.len(), 3);
        // The empty stack is left out; three distinct (thread, stack) pairs.
        assert_eq!(pb.sample.len(), 3);
        let spin_t1 = pb
            .sample
            .iter()
            .find(|s| s.value[0] == 2)
            .expect("the thread-1 Spin stack");
        assert_eq!(spin_t1.value, [2, 2_000_000]);
        let leaf = pb.function[spin_t1.location_id[0] as usize - 1].name;
        assert_eq!(st(leaf), "Hot.Program::Spin");
        let labels: Vec<_> = spin_t1
            .label
            .iter()
            .map(|l| (st(l.key), st(l.str)))
            .collect();
        assert_eq!(labels, [("thread", "worker"), ("runtime_version", "8.0.4")]);
    }

    #[test]
    fn round_trips_through_gzip_and_folded() {
        let p = profile();
        let bytes = p.pprof_bytes();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
        let back = Profile::from_pprof(&bytes).unwrap();
        let mut a = Vec::new();
        let mut b = Vec::new();
        p.write_folded(&mut a).unwrap();
        back.write_folded(&mut b).unwrap();
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
        assert_eq!(back.threads(), 2);
        assert_eq!(back.runtime(), Some("8.0.4"));
        assert!(back
            .stacks()
            .any(|(t, _, _)| back.thread_name(t) == Some("worker")));
        let spin = back
            .frame_names()
            .iter()
            .position(|n| &**n == "Hot.Program::Spin")
            .unwrap();
        assert_eq!(back.frame_module(spin as u32), Some("hot.exe"));
    }

    #[test]
    fn allocations_add_sample_types() {
        let mut p = profile();
        let main = p.intern("Hot.Program::Main");
        p.add_allocations(RawThreadId(0x10), &[main], 3, 96);
        let pb = p.to_pprof();
        assert_eq!(pb.sample_type.len(), 4);
        // Main alone was never sampled: its row has allocations only.
        assert!(pb.sample.iter().any(|s| s.value == [0, 0, 3, 96]));
        assert_eq!(types(&pb)[2], ("alloc_objects".into(), "count".into()));
        assert_eq!(types(&pb)[3], ("alloc_space".into(), "bytes".into()));
        let back = Profile::from_pprof(&pb.encode_to_vec()).unwrap();
        let a: Vec<_> = back.allocations().collect();
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].2, a[0].3), (3, 96));
    }

    #[test]
    fn folded_to_pprof_and_back_is_identity() {
        let text = "A;B;C 5\nA;D 2\n";
        let p = Profile::from_folded(text).unwrap();
        let back = Profile::from_pprof(&p.pprof_bytes()).unwrap();
        let mut out = Vec::new();
        back.write_folded(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), text);
    }

    #[test]
    fn samples_in_a_trace_context_carry_its_labels_and_read_back() {
        let mut p = profile();
        let main = p.intern("Hot.Program::Main");
        let spin = p.intern("Hot.Program::Spin");
        let c = TraceContext {
            trace_id: [0xab; 16],
            span_id: [0x01, 2, 3, 4, 5, 6, 7, 8],
            local_root_span_id: [0xcd; 8],
            endpoint: 0,
        };
        // Request c's root span was named; a second context's was not.
        clrprof::context::set_root_endpoint(c.local_root_span_id, "/pprof-test/{n}");
        let d = TraceContext {
            span_id: [9; 8],
            local_root_span_id: [0x5a; 8],
            ..c
        };
        let t = RawThreadId(0x10);
        p.add_n_in_context(t, &[main, spin], 3, false, Some(&c));
        p.add_cpu_in_context(t, &[main, spin], 7_000, Some(&c));
        p.add_n_in_context(t, &[main, spin], 1, false, Some(&d));
        assert_eq!(p.labelled_samples(), 4);
        let pb = written(&p);
        let labelled: Vec<_> = pb
            .sample
            .iter()
            .filter(|s| labels(&pb, s).iter().any(|(k, _)| k == "span_id"))
            .collect();
        assert_eq!(labelled.len(), 2, "one sample per context");
        let of_c = labelled
            .iter()
            .find(|s| labels(&pb, s).contains(&("span_id".into(), "0102030405060708".into())))
            .unwrap();
        assert_eq!(of_c.value, [3, 3_000_000, 7_000]);
        assert_eq!(
            labels(&pb, of_c)[1..],
            [
                ("runtime_version".to_string(), "8.0.4".to_string()),
                ("trace_id".into(), "ab".repeat(16)),
                ("span_id".into(), "0102030405060708".into()),
                ("local_root_span_id".into(), "cd".repeat(8)),
                ("trace_endpoint".into(), "/pprof-test/{n}".into()),
            ]
        );
        let of_d = labelled.iter().find(|s| s.value[0] == 1).unwrap();
        assert!(!labels(&pb, of_d).iter().any(|(k, _)| k == "trace_endpoint"));
        // Unlabelled samples have no context labels.
        assert!(pb
            .sample
            .iter()
            .filter(|s| !labelled.iter().any(|l| std::ptr::eq(*l, *s)))
            .all(|s| labels(&pb, s).len() == 2));
        let back = Profile::from_pprof(&p.pprof_bytes()).unwrap();
        let mut seen: Vec<(Option<TraceContext>, u64)> = back
            .stacks_in_context()
            .filter(|(_, c, _, _)| c.is_some())
            .map(|(_, c, _, n)| (c.copied(), n))
            .collect();
        seen.sort_by_key(|(_, n)| *n);
        assert_eq!(seen, [(Some(d), 1), (Some(c), 3)]);
        assert_eq!(back.endpoint_of(&c).as_deref(), Some("/pprof-test/{n}"));
        assert_eq!(back.labelled_samples(), 4);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Profile::from_pprof(&[0x1f, 0x8b, 1, 2, 3]).is_err());
        assert!(Profile::from_pprof(&[0xff, 0xff, 0xff]).is_err());
    }
}
