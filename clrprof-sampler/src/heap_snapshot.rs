//! Heap snapshots: a histogram of every live object by type (count and
//! bytes), the view `dotnet-gcdump report` gives.
//!
//! [`HeapSnapshots::take`] forces a full, blocking collection (`ForceGC`)
//! so that only live objects remain, then counts them:
//!
//! - on runtimes with `ICorProfilerInfo15` (.NET 9 and later) with
//!   `EnumerateGCHeapObjects`, under a runtime suspension of the SDK's
//!   sampling thread ([`clrprof::stackwalk::SamplingThread`]): every object
//!   of the GC heap, its class (`GetClassFromObject`) and size
//!   (`GetObjectSize2`);
//! - on older runtimes (.NET Core 3.1, .NET 8) from the collection's own
//!   heap walk: with `MONITOR_GC` the runtime calls `ObjectReferences` for
//!   every live object at the end of each collection, and the snapshot
//!   counts the ones of the collection it forced. `MONITOR_GC` turns
//!   concurrent (background) collection off for the process, and makes
//!   every collection walk the heap for these callbacks (the SDK answers
//!   "no more" at once outside a snapshot's collection, but the runtime
//!   starts the walk each time): a profiler loaded at startup that asks for
//!   snapshots on these runtimes pays it for the whole run; one attached
//!   for a snapshot ([`crate`]'s CLI, `clrprof heap --pid`) asks for it in
//!   `InitializeForAttach`, where the runtime allows it and turns
//!   concurrent collection off from then on.
//!
//! Both count the objects live at the forced collection, as `dotnet-gcdump`
//! counts what its own collection found. The collection's own heap walk
//! (`ObjectReferences`) sees exactly those. `EnumerateGCHeapObjects` walks
//! the heap as it is later, under the suspension: between the collection
//! and the suspension the threads ran (after a full collection the
//! finalizer thread runs the runtime's post-collection callbacks, such as
//! `ArrayPool` trimming, whose temporaries were seen in a walk), and what
//! they allocated lies in generation 0, which the collection left empty
//! (it promoted its survivors). The walk leaves generation 0 out and counts
//! it apart ([`HeapSnapshot::allocated_since`]). Neither walk reaches the
//! non-GC heap (.NET 8's frozen segments: string literals, `RuntimeType`
//! objects), and neither does `dotnet-gcdump`.
//!
//! A class is named the first time it is seen, while its `ClassID` is valid
//! (inside the walk): `Namespace.Type+Nested`, generic instantiations with
//! their arguments (`System.Collections.Generic.List<System.Int32>`, the
//! arity marker dropped), arrays as the element type's name and `[]`.
//! The names are allocated inside the walk, while the runtime is suspended;
//! the threads it stopped wait at safe points (in managed code, or when
//! they come back from native code), never inside the allocator, so the
//! allocation cannot wait for them.

use crate::pprof::PprofProfile;
use clrprof::component::Component;
use clrprof::error::{Error, Result};
use clrprof::event_mask::{EventMask, EventMasks};
use clrprof::gc::{GcReason, GenerationSet};
use clrprof::info::CorElementType;
use clrprof::output::push_json_string;
use clrprof::stackwalk::spawn_sampling_thread;
use clrprof::{ClassId, NameCache, ObjectId, ProfilerInfo, RawClassId, RuntimeHandle};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One type of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeCount {
    /// The type's name.
    pub name: String,
    /// Live objects of it.
    pub objects: u64,
    /// Their bytes (`GetObjectSize2`).
    pub bytes: u64,
}

/// A histogram of the live heap by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapSnapshot {
    /// The runtime's version (`major.minor.build`).
    pub runtime: Option<String>,
    /// How it was taken: `enumerate-gc-heap-objects` or `object-references`.
    pub method: String,
    /// When it was taken.
    pub taken_at: SystemTime,
    /// How long it took (the forced collection and the count).
    pub duration: Duration,
    /// The types, by bytes, the largest first (ties by name).
    pub types: Vec<TypeCount>,
    /// Objects whose class could not be read or named, counted under
    /// [`UNNAMED_TYPE`].
    pub unnamed: u64,
    /// Objects the walk found in generation 0, allocated after the forced
    /// collection, and left out (see the [module docs](self)).
    pub allocated_since: u64,
}

/// The type name of objects whose class could not be named.
pub const UNNAMED_TYPE: &str = "(unnamed)";

/// How a runtime's snapshots are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotMethod {
    /// `EnumerateGCHeapObjects` (Info15, .NET 9).
    HeapWalk,
    /// The forced collection's `ObjectReferences` (`MONITOR_GC`).
    ObjectReferences,
}

impl SnapshotMethod {
    /// A name for records.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotMethod::HeapWalk => "enumerate-gc-heap-objects",
            SnapshotMethod::ObjectReferences => "object-references",
        }
    }
}

impl HeapSnapshot {
    /// Every object.
    pub fn objects(&self) -> u64 {
        self.types.iter().map(|t| t.objects).sum()
    }

    /// Every byte.
    pub fn bytes(&self) -> u64 {
        self.types.iter().map(|t| t.bytes).sum()
    }

    /// The counts of `name`, if the snapshot has it.
    pub fn get(&self, name: &str) -> Option<&TypeCount> {
        self.types.iter().find(|t| t.name == name)
    }

    fn from_counts(
        runtime: Option<String>,
        method: SnapshotMethod,
        taken_at: SystemTime,
        duration: Duration,
        counts: impl IntoIterator<Item = TypeCount>,
        unnamed: u64,
        allocated_since: u64,
    ) -> HeapSnapshot {
        // Classes of one name (instantiations the names do not tell apart,
        // collectible copies) are merged.
        let mut by_name: HashMap<String, (u64, u64)> = HashMap::new();
        for t in counts {
            let e = by_name.entry(t.name).or_default();
            e.0 += t.objects;
            e.1 += t.bytes;
        }
        let mut types: Vec<TypeCount> = by_name
            .into_iter()
            .map(|(name, (objects, bytes))| TypeCount {
                name,
                objects,
                bytes,
            })
            .collect();
        types.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
        HeapSnapshot {
            runtime,
            method: method.name().to_string(),
            taken_at,
            duration,
            types,
            unnamed,
            allocated_since,
        }
    }

    /// As JSON: `{"format":"clrprof-heap-snapshot","version":1,"runtime":…,
    /// "method":…,"taken_at_ms":…,"duration_ms":…,"objects":…,"bytes":…,
    /// "unnamed":…,"allocated_since":…,"types":[{"type":…,"objects":…,
    /// "bytes":…},…]}`, the types by bytes.
    pub fn to_json(&self) -> String {
        let mut s =
            String::from("{\"format\":\"clrprof-heap-snapshot\",\"version\":1,\"runtime\":");
        match &self.runtime {
            Some(r) => push_json_string(&mut s, r),
            None => s.push_str("null"),
        }
        s.push_str(",\"method\":");
        push_json_string(&mut s, &self.method);
        let ms = self
            .taken_at
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        s.push_str(&format!(
            ",\"taken_at_ms\":{ms},\"duration_ms\":{:.3},\"objects\":{},\"bytes\":{},\"unnamed\":{},\"allocated_since\":{},\"types\":[",
            self.duration.as_secs_f64() * 1000.0,
            self.objects(),
            self.bytes(),
            self.unnamed,
            self.allocated_since
        ));
        for (i, t) in self.types.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("\n{\"type\":");
            push_json_string(&mut s, &t.name);
            s.push_str(&format!(
                ",\"objects\":{},\"bytes\":{}}}",
                t.objects, t.bytes
            ));
        }
        s.push_str("\n]}\n");
        s
    }

    /// As text: a summary line, then one line per type by bytes
    /// (`bytes objects type`).
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "clrprof heap snapshot: {} bytes in {} objects of {} types ({}, {}; {:.1} ms)\n{:>15}  {:>10}  type\n",
            group(self.bytes()),
            group(self.objects()),
            self.types.len(),
            self.runtime
                .as_deref()
                .map(|r| format!(".NET {r}"))
                .unwrap_or_else(|| "runtime unknown".into()),
            self.method,
            self.duration.as_secs_f64() * 1000.0,
            "bytes",
            "objects"
        );
        if self.allocated_since > 0 {
            s.insert_str(
                s.find('\n').unwrap_or(0),
                &format!(
                    "; {} objects allocated after the collection left out",
                    group(self.allocated_since)
                ),
            );
        }
        for t in &self.types {
            s.push_str(&format!(
                "{:>15}  {:>10}  {}\n",
                group(t.bytes),
                group(t.objects),
                t.name
            ));
        }
        s
    }

    /// As pprof: one sample per type, its stack the type's name alone,
    /// values `objects`/`count` and `space`/`bytes` (the default), label
    /// `type`; flame graphs show the heap by type.
    pub fn to_pprof(&self) -> PprofProfile {
        let rows = self.types.iter().map(|t| crate::pprof_rows::Row {
            stack_leaf_first: vec![t.name.as_str()],
            labels: vec![("type", t.name.as_str())],
            values: vec![
                i64::try_from(t.objects).unwrap_or(i64::MAX),
                i64::try_from(t.bytes).unwrap_or(i64::MAX),
            ],
        });
        crate::pprof_rows::build(
            &SNAPSHOT_SAMPLE_TYPES,
            1,
            rows,
            "clrprof heap snapshot",
            self.taken_at,
            self.taken_at,
        )
    }
}

/// The pprof sample types of a snapshot.
pub const SNAPSHOT_SAMPLE_TYPES: [(&str, &str); 2] = [("objects", "count"), ("space", "bytes")];

/// `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The name of a primitive element type (`None` for classes and structs).
pub(crate) fn primitive_name(t: CorElementType) -> Option<&'static str> {
    use CorElementType as E;
    Some(match t {
        E::Boolean => "System.Boolean",
        E::Char => "System.Char",
        E::I1 => "System.SByte",
        E::U1 => "System.Byte",
        E::I2 => "System.Int16",
        E::U2 => "System.UInt16",
        E::I4 => "System.Int32",
        E::U4 => "System.UInt32",
        E::I8 => "System.Int64",
        E::U8 => "System.UInt64",
        E::R4 => "System.Single",
        E::R8 => "System.Double",
        E::String => "System.String",
        E::I => "System.IntPtr",
        E::U => "System.UIntPtr",
        E::Object => "System.Object",
        _ => return None,
    })
}

/// Drops the generic arity markers (`` `2``) of a metadata name.
fn without_arity(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '`' {
            while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

// provenance: name-cache-runtime
/// A class's display name (see the [module docs](self)).
pub fn display_type_name(
    info: &ProfilerInfo,
    names: &NameCache,
    class: ClassId<'_>,
    depth: u32,
) -> Result<String> {
    if depth > 16 {
        return Ok("?".into());
    }
    if let Some(array) = info.is_array_class(class)? {
        // The element class names enums too (an enum's element type is its
        // underlying primitive's); a primitive's element class is its own.
        let element = if array.element_class.is_null() {
            primitive_name(array.element_type)
                .unwrap_or("?")
                .to_string()
        } else {
            match display_type_name(info, names, array.element_class, depth + 1) {
                Ok(n) => n,
                Err(e) => match primitive_name(array.element_type) {
                    Some(n) => n.to_string(),
                    None => return Err(e),
                },
            }
        };
        let commas = ",".repeat(array.rank.saturating_sub(1) as usize);
        return Ok(format!("{element}[{commas}]"));
    }
    let name = names.class_name(info, class)?;
    let args = info.class_info(class)?.type_args;
    if args.is_empty() {
        return Ok(name.to_string());
    }
    let mut out = without_arity(&name);
    out.push('<');
    for (i, a) in args.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&display_type_name(info, names, a, depth + 1)?);
    }
    out.push('>');
    Ok(out)
}

/// Counts by class during one snapshot.
#[derive(Default)]
struct Tally {
    by_class: HashMap<RawClassId, usize>,
    types: Vec<TypeCount>,
    unnamed: u64,
    allocated_since: u64,
}

impl Tally {
    fn with_capacity(n: usize) -> Tally {
        Tally {
            by_class: HashMap::with_capacity(n),
            types: Vec::with_capacity(n),
            unnamed: 0,
            allocated_since: 0,
        }
    }

    /// Counts `object` (of `class`, when known).
    fn count(
        &mut self,
        info: &ProfilerInfo,
        names: &NameCache,
        object: ObjectId<'_>,
        class: Option<ClassId<'_>>,
    ) {
        let class = match class {
            Some(c) => Ok(c),
            None => info.class_from_object(object),
        };
        let size = info.object_size2(object).unwrap_or(0) as u64;
        let index = match class {
            Ok(c) => match self.by_class.get(&c.to_raw()) {
                Some(&i) => Some(i),
                None => match display_type_name(info, names, c, 0) {
                    Ok(name) => {
                        let i = self.types.len();
                        self.types.push(TypeCount {
                            name,
                            objects: 0,
                            bytes: 0,
                        });
                        self.by_class.insert(c.to_raw(), i);
                        Some(i)
                    }
                    Err(_) => None,
                },
            },
            Err(_) => None,
        };
        let t = match index {
            Some(i) => &mut self.types[i],
            None => {
                self.unnamed += 1;
                match self.by_class.get(&RawClassId(0)) {
                    Some(&i) => &mut self.types[i],
                    None => {
                        let i = self.types.len();
                        self.types.push(TypeCount {
                            name: UNNAMED_TYPE.into(),
                            objects: 0,
                            bytes: 0,
                        });
                        self.by_class.insert(RawClassId(0), i);
                        &mut self.types[i]
                    }
                }
            }
        };
        t.objects += 1;
        t.bytes += size;
    }
}

struct Shared {
    runtime: RuntimeHandle,
    names: Arc<NameCache>,
    method: SnapshotMethod,
    version: Option<String>,
    /// One snapshot at a time.
    taking: Mutex<()>,
    /// Armed before the forced collection (ObjectReferences method).
    armed: AtomicBool,
    /// The tally of the collection under way, when it is the snapshot's.
    collecting: Mutex<Option<Tally>>,
    /// The finished tally of the snapshot's collection.
    done: Mutex<Option<Tally>>,
}

/// Heap snapshots of one runtime (see the [module docs](self)).
pub struct HeapSnapshots {
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// provenance: name-cache-runtime
impl HeapSnapshots {
    /// Registers snapshots for the runtime of `info` as an SDK component,
    /// in `Initialize` or `InitializeForAttach`; names classes through
    /// `names` (registered too). Where the runtime has no
    /// `EnumerateGCHeapObjects` (before .NET 9) it adds `MONITOR_GC` to the
    /// event mask (see the [module docs](self) for what that costs).
    pub fn register(info: &ProfilerInfo, names: Arc<NameCache>) -> Result<Arc<HeapSnapshots>> {
        names.register(info)?;
        let method = if info.has_info(15) {
            SnapshotMethod::HeapWalk
        } else {
            SnapshotMethod::ObjectReferences
        };
        let version = info
            .runtime_information()
            .ok()
            .map(|r| format!("{}.{}.{}", r.major, r.minor, r.build));
        let shared = Arc::new(Shared {
            runtime: info.handle(),
            names,
            method,
            version,
            taking: Mutex::new(()),
            armed: AtomicBool::new(false),
            collecting: Mutex::new(None),
            done: Mutex::new(None),
        });
        info.register(Arc::new(SnapshotComponent {
            shared: shared.clone(),
        }))?;
        Ok(Arc::new(HeapSnapshots { shared }))
    }

    /// How this runtime's snapshots are taken.
    pub fn method(&self) -> SnapshotMethod {
        self.shared.method
    }

    /// Takes a snapshot now: forces a full collection and counts what
    /// lives. Runs on a thread of its own (an SDK sampling thread) and waits
    /// for it, so call it from a thread that may wait for a collection: a
    /// thread of the profiler's own, never a runtime callback (a
    /// collection waits for the callback's thread). One snapshot at a time;
    /// a second caller waits for the first.
    pub fn take(&self) -> Result<HeapSnapshot> {
        let _one = lock(&self.shared.taking);
        let shared = self.shared.clone();
        let thread =
            spawn_sampling_thread(&self.shared.runtime, "clrprof-heap-snapshot", 1, move |t| {
                shared.take_on(t)
            })
            .map_err(|e| Error::Usage(format!("cannot start the heap-snapshot thread: {e}")))?;
        match thread.join() {
            Ok(Ok(Ok(snapshot))) => Ok(snapshot),
            Ok(Ok(Err(e))) | Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Usage(
                "the heap-snapshot thread panicked (see the log)".into(),
            )),
        }
    }
}

impl Shared {
    fn take_on(&self, thread: &mut clrprof::stackwalk::SamplingThread) -> Result<HeapSnapshot> {
        let taken_at = SystemTime::now();
        let started = Instant::now();
        let tally = match self.method {
            SnapshotMethod::ObjectReferences => {
                *lock(&self.done) = None;
                self.armed.store(true, SeqCst);
                let forced = thread.runtime().force_gc();
                self.armed.store(false, SeqCst);
                forced?;
                lock(&self.done).take().ok_or_else(|| {
                    Error::Usage(
                        "the forced collection reported no objects (ObjectReferences): \
                         MONITOR_GC was not in the event mask"
                            .into(),
                    )
                })?
            }
            SnapshotMethod::HeapWalk => {
                thread.runtime().force_gc()?;
                let mut tally = Tally::with_capacity(8192);
                let suspension = thread.suspend_runtime()?;
                let info = suspension.info();
                // The forced collection left generation 0 empty (its
                // survivors were promoted): what lies there now was
                // allocated since, by the threads that ran until the
                // suspension (the finalizer thread's work after a full
                // collection, the app), and may be dead already.
                let young: Vec<clrprof::info::gc::GenerationRange> = info
                    .generation_bounds()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|r| r.generation == clrprof::info::gc::Generation::Gen0)
                    .collect();
                info.enumerate_gc_heap_objects(|o| {
                    if young.iter().any(|r| r.contains(o.to_raw())) {
                        tally.allocated_since += 1;
                    } else {
                        tally.count(&info, &self.names, o, None);
                    }
                    true
                })?;
                drop(suspension);
                tally
            }
        };
        Ok(HeapSnapshot::from_counts(
            self.version.clone(),
            self.method,
            taken_at,
            started.elapsed(),
            tally.types,
            tally.unnamed,
            tally.allocated_since,
        ))
    }
}

/// The SDK component behind [`HeapSnapshots::register`].
struct SnapshotComponent {
    shared: Arc<Shared>,
}

impl Component for SnapshotComponent {
    fn name(&self) -> &'static str {
        "heap-snapshots"
    }

    fn masks(&self) -> EventMasks {
        match self.shared.method {
            SnapshotMethod::HeapWalk => EventMasks::default(),
            SnapshotMethod::ObjectReferences => EventMask::MONITOR_GC.into(),
        }
    }

    fn garbage_collection_started(
        &self,
        _info: &ProfilerInfo,
        generations: GenerationSet,
        reason: GcReason,
    ) {
        // The snapshot's collection: forced (induced) and full.
        if self.shared.armed.load(SeqCst)
            && reason == GcReason::Induced
            && generations.max_generation() == Some(2)
        {
            *lock(&self.shared.collecting) = Some(Tally::with_capacity(4096));
        }
    }

    fn object_references(
        &self,
        info: &ProfilerInfo,
        object: ObjectId<'_>,
        class: ClassId<'_>,
        _references: &[ObjectId<'_>],
    ) -> bool {
        let mut collecting = lock(&self.shared.collecting);
        match collecting.as_mut() {
            Some(tally) => {
                tally.count(info, &self.shared.names, object, Some(class));
                true
            }
            None => false,
        }
    }

    fn garbage_collection_finished(&self, _info: &ProfilerInfo) {
        if let Some(tally) = lock(&self.shared.collecting).take() {
            *lock(&self.shared.done) = Some(tally);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> HeapSnapshot {
        HeapSnapshot::from_counts(
            Some("10.0.15".into()),
            SnapshotMethod::HeapWalk,
            UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            Duration::from_millis(12),
            vec![
                TypeCount {
                    name: "Node".into(),
                    objects: 5000,
                    bytes: 160_000,
                },
                TypeCount {
                    name: "System.String".into(),
                    objects: 1697,
                    bytes: 80_000,
                },
                TypeCount {
                    name: "Node".into(),
                    objects: 1,
                    bytes: 32,
                },
                TypeCount {
                    name: "A\"quoted\\type".into(),
                    objects: 1,
                    bytes: 80_000,
                },
            ],
            0,
            0,
        )
    }

    #[test]
    fn types_merge_by_name_and_sort_by_bytes() {
        let s = snapshot();
        let names: Vec<&str> = s.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Node", "A\"quoted\\type", "System.String"]);
        assert_eq!(s.get("Node").unwrap().objects, 5001);
        assert_eq!((s.objects(), s.bytes()), (6699, 320_032));
    }

    #[test]
    fn text_json_and_pprof() {
        let s = snapshot();
        let text = s.to_text();
        assert!(
            text.starts_with("clrprof heap snapshot: 320,032 bytes in 6,699 objects of 3 types"),
            "{text}"
        );
        assert!(
            text.contains("        160,032       5,001  Node\n"),
            "{text}"
        );
        let json = s.to_json();
        assert!(json.contains("\"type\":\"A\\\"quoted\\\\type\""), "{json}");
        assert!(json.contains("\"objects\":6699,\"bytes\":320032"), "{json}");
        let p = s.to_pprof();
        assert_eq!(p.sample.len(), 3);
        assert_eq!(p.sample[0].value, [5001, 160_032]);
        assert_eq!(p.string_table[0], "");
        assert!(p.location.iter().all(|l| l.id != 0));
    }

    #[test]
    fn arity_markers_go() {
        assert_eq!(
            without_arity("System.Collections.Generic.Dictionary`2+Entry"),
            "System.Collections.Generic.Dictionary+Entry"
        );
        assert_eq!(without_arity("List`1"), "List");
        assert_eq!(without_arity("Plain"), "Plain");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(group(12), "12");
    }
}
