//! Trace context per thread: which request (trace, span, root span, endpoint)
//! a thread is working for, readable by a sampler at any moment.
//!
//! .NET flows the current request as `System.Diagnostics.Activity.Current`,
//! an `AsyncLocal` that moves with the execution context: across `await`,
//! `Task.Run` and thread-pool work items, onto whatever thread resumes the
//! work, and away again when that thread goes back to the pool. A sampler
//! that interrupts or suspends a thread cannot ask the runtime what that
//! value is (no managed code may run there), so the value is mirrored, at
//! every change on every thread, into a small native record of that thread
//! that the sampler reads:
//!
//! - **the record** ([`ThreadContextRecord`]): 64 bytes per OS thread that
//!   ever carried a context, allocated by the SDK in pools that are never
//!   freed, so a reader holding one never reads freed memory. Its first 28
//!   bytes are OpenTelemetry's thread-context record (OTEP 4947,
//!   `otel_thread_ctx_v1`: trace id, span id, valid, trace flags,
//!   attribute size 0); clrprof adds a sequence counter, the local root
//!   span's id and an endpoint index after them.
//! - **the writer**: only the record's own thread writes it
//!   ([`set_current`], or the exported C functions below, which the managed
//!   startup hook calls from an `AsyncLocal` value-changed handler). After a
//!   thread's first write, a write is a thread-local load and a handful of
//!   plain stores: nothing allocates, nothing locks, no system call.
//! - **the reader**: [`ThreadContextRecord::snapshot`] is async-signal-safe
//!   (no allocation, lock or system call) and tolerates a write in progress,
//!   on the same thread (a signal handler that interrupted the writer) or on
//!   another (a thread the runtime's suspension left running in native code,
//!   such as the setter itself): a sequence counter, odd while a write is
//!   under way, makes a torn read visible, and the reader then retries a few
//!   times or reports nothing. [`record_of_os_thread`] finds a thread's record
//!   without allocating or locking.
//! - **endpoints**: the names of root spans (ASP.NET Core's `http.route`, or
//!   an activity's display name) go into a table keyed by the local root
//!   span's id ([`set_root_endpoint`]), written when the root span ends (the
//!   route is known only then) and read by the sampler when it encodes a
//!   profile, outside any signal handler or suspension
//!   ([`resolve_endpoint`]).
//!
//! # The C functions (ABI version 1)
//!
//! Exported by every profiler library built with clrprof (they are
//! `#[no_mangle]` items of this crate), for the startup hook
//! (`managed/ClrprofTraceContext.cs`, found by the library path in
//! `CLRPROF_CONTEXT_LIBRARY`) or any other tracer of the process:
//!
//! | function | what it does |
//! |---|---|
//! | `uint32_t clrprof_context_hello_v1(uint32_t status, const uint16_t* detail, size_t len)` | the writer says whether it follows the context (0), cannot on this runtime (1) or failed (2), with a UTF-16 detail; returns the ABI version (1) |
//! | `void clrprof_context_set_v1(uint64_t trace_0, uint64_t trace_1, uint64_t span, uint64_t local_root_span, uint32_t trace_flags, uint32_t endpoint)` | the calling thread's context: each id is the native-endian reading of its W3C bytes (`MemoryMarshal.Read<ulong>` of `ActivityTraceId.CopyTo`'s 16 bytes, and so on); all ids zero clears it |
//! | `void clrprof_context_clear_v1(void)` | no context on the calling thread |
//! | `ThreadContextRecord* clrprof_context_record_v1(void)` | the calling thread's record, for a writer that writes it directly by its layout and protocol (the startup hook does: no native call per switch) |
//! | `uint32_t clrprof_context_root_endpoint_v1(uint64_t local_root_span, const uint16_t* name, size_t len)` | names the endpoint of a root span (UTF-16); returns its endpoint index (0 when the table is full) |
//!
//! Where this differs from OTEP 4947, and why, is in the book's chapter
//! "Profiles that know their request".

use core::cell::Cell;
use core::sync::atomic::{
    fence, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The trace context of a thread at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct TraceContext {
    /// The W3C trace id (16 bytes, as in `traceparent`).
    pub trace_id: [u8; 16],
    /// The W3C id of the span the thread works for (8 bytes).
    pub span_id: [u8; 8],
    /// The id of that span's local root: the first span of the trace in
    /// this process (an incoming request's server span).
    pub local_root_span_id: [u8; 8],
    /// Index of the root span's name in the endpoint table ([`endpoint_name`]),
    /// 0 when the writer did not know it (the sampler then looks the name up
    /// by the local root span's id, [`resolve_endpoint`]).
    pub endpoint: u32,
}

impl TraceContext {
    /// The trace id as 32 lowercase hex digits (as in `traceparent`).
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The span id as 16 lowercase hex digits.
    pub fn span_id_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// The local root span's id as 16 lowercase hex digits.
    pub fn local_root_span_id_hex(&self) -> String {
        hex(&self.local_root_span_id)
    }
}

/// `bytes` as lowercase hex digits.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// One thread's trace-context record: 64 bytes, cache-line aligned, at a
/// stable address for the life of the process.
///
/// | offset | field | |
/// |---|---|---|
/// | 0 | trace id, 16 bytes | OTEP 4947 |
/// | 16 | span id, 8 bytes | OTEP 4947 |
/// | 24 | valid (1: the fields hold a context) | OTEP 4947 |
/// | 25 | trace flags | OTEP 4947 |
/// | 26 | attribute data size, always 0 | OTEP 4947 |
/// | 28 | sequence counter (odd while a write is under way) | clrprof |
/// | 32 | local root span id, 8 bytes | clrprof |
/// | 40 | endpoint index | clrprof |
/// | 48 | owner: the OS thread id + 1 (0: free) | clrprof |
///
/// Ids are stored as their bytes (W3C order) in native-endian words. Only
/// the record's own thread writes the context ([`set_current`]); any thread,
/// or a signal handler, may read it ([`snapshot`](Self::snapshot)).
#[repr(C, align(64))]
pub struct ThreadContextRecord {
    trace_id: [AtomicU64; 2],
    span_id: AtomicU64,
    valid: AtomicU8,
    trace_flags: AtomicU8,
    attrs_data_size: AtomicU16,
    seq: AtomicU32,
    local_root_span_id: AtomicU64,
    endpoint: AtomicU32,
    _reserved: AtomicU32,
    owner: AtomicU64,
    _pad: AtomicU64,
}

const _: () = {
    assert!(core::mem::size_of::<ThreadContextRecord>() == 64);
    assert!(core::mem::align_of::<ThreadContextRecord>() == 64);
    assert!(core::mem::offset_of!(ThreadContextRecord, span_id) == 16);
    assert!(core::mem::offset_of!(ThreadContextRecord, valid) == 24);
    assert!(core::mem::offset_of!(ThreadContextRecord, trace_flags) == 25);
    assert!(core::mem::offset_of!(ThreadContextRecord, attrs_data_size) == 26);
    assert!(core::mem::offset_of!(ThreadContextRecord, seq) == 28);
    assert!(core::mem::offset_of!(ThreadContextRecord, local_root_span_id) == 32);
    assert!(core::mem::offset_of!(ThreadContextRecord, endpoint) == 40);
    assert!(core::mem::offset_of!(ThreadContextRecord, owner) == 48);
};

/// How often [`ThreadContextRecord::snapshot`] reads again after seeing a
/// write under way before it reports nothing.
const SNAPSHOT_TRIES: usize = 4;

impl ThreadContextRecord {
    const fn new() -> Self {
        ThreadContextRecord {
            trace_id: [AtomicU64::new(0), AtomicU64::new(0)],
            span_id: AtomicU64::new(0),
            valid: AtomicU8::new(0),
            trace_flags: AtomicU8::new(0),
            attrs_data_size: AtomicU16::new(0),
            seq: AtomicU32::new(0),
            local_root_span_id: AtomicU64::new(0),
            endpoint: AtomicU32::new(0),
            _reserved: AtomicU32::new(0),
            owner: AtomicU64::new(0),
            _pad: AtomicU64::new(0),
        }
    }

    /// The context held now, `None` when there is none or a write was
    /// under way at every try. Async-signal-safe: atomic loads only, no
    /// allocation, lock or system call, a bounded number of tries.
    // signal-context: async-signal-safe: atomic loads of a record that is never freed; a bounded loop
    #[inline]
    pub fn snapshot(&self) -> Option<TraceContext> {
        for _ in 0..SNAPSHOT_TRIES {
            let before = self.seq.load(Acquire);
            if before & 1 == 1 {
                core::hint::spin_loop();
                continue;
            }
            let valid = self.valid.load(Relaxed);
            let t0 = self.trace_id[0].load(Relaxed);
            let t1 = self.trace_id[1].load(Relaxed);
            let span = self.span_id.load(Relaxed);
            let root = self.local_root_span_id.load(Relaxed);
            let endpoint = self.endpoint.load(Relaxed);
            // Orders the loads above before the second read of the counter
            // (the reader's half of the sequence lock).
            core::sync::atomic::fence(Acquire);
            if self.seq.load(Relaxed) != before {
                continue;
            }
            if valid != 1 {
                return None;
            }
            let mut trace_id = [0u8; 16];
            // signal-context: bounds: the halves of a 16-byte array
            trace_id[..8].copy_from_slice(&t0.to_ne_bytes());
            // signal-context: bounds: the halves of a 16-byte array
            trace_id[8..].copy_from_slice(&t1.to_ne_bytes());
            return Some(TraceContext {
                trace_id,
                span_id: span.to_ne_bytes(),
                local_root_span_id: root.to_ne_bytes(),
                endpoint,
            });
        }
        None
    }

    /// Writes the context (all-zero ids: none). Called only by the
    /// record's own thread (the sequence lock has one writer).
    #[inline]
    fn write(&self, words: [u64; 4], trace_flags: u8, endpoint: u32) {
        let present = words[0] != 0 || words[1] != 0 || words[2] != 0;
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq.wrapping_add(1), Relaxed);
        // The odd counter is visible before any field changes (the
        // writer's half of the sequence lock).
        fence(Release);
        self.valid.store(0, Relaxed);
        self.trace_id[0].store(words[0], Relaxed);
        self.trace_id[1].store(words[1], Relaxed);
        self.span_id.store(words[2], Relaxed);
        self.local_root_span_id.store(words[3], Relaxed);
        self.trace_flags.store(trace_flags, Relaxed);
        self.endpoint.store(endpoint, Relaxed);
        self.valid.store(u8::from(present), Relaxed);
        self.seq.store(seq.wrapping_add(2), Release);
    }

    /// The OS thread that owns the record now (the kernel thread id on
    /// Linux, the Win32 thread id on Windows), if any.
    // signal-context: async-signal-safe: one atomic load
    pub fn os_thread(&self) -> Option<u64> {
        match self.owner.load(Acquire) {
            0 => None,
            n => Some(n - 1),
        }
    }

    /// Contexts written to the record since it was allocated (every owner).
    pub fn writes(&self) -> u64 {
        u64::from(self.seq.load(Relaxed) / 2)
    }

    /// The record's address, as a reader outside Rust would find it.
    pub fn as_ptr(&self) -> *const u8 {
        self as *const Self as *const u8
    }
}

/// Records per pool chunk.
const CHUNK: usize = 64;

struct Chunk {
    records: [ThreadContextRecord; CHUNK],
    next: *const Chunk,
}

/// The newest chunk; each points to the one before. Chunks are leaked:
/// a record lives as long as the process.
static CHUNKS: AtomicPtr<Chunk> = AtomicPtr::new(core::ptr::null_mut());
/// Records owned by a thread now.
static OWNED: AtomicUsize = AtomicUsize::new(0);
/// Records ever allocated (a multiple of [`CHUNK`]).
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// Every record allocated so far, owned or free, newest chunk first.
/// Lock-free and allocation-free (a signal handler may walk it).
pub fn records() -> impl Iterator<Item = &'static ThreadContextRecord> {
    let mut chunk = CHUNKS.load(Acquire) as *const Chunk;
    core::iter::from_fn(move || {
        if chunk.is_null() {
            return None;
        }
        // SAFETY: [local-memory] chunks come from `Box::leak` below, are
        // published with a release store after they were initialised and
        // are never freed; `next` is written before publication.
        let c: &'static Chunk = unsafe { &*chunk };
        chunk = c.next;
        Some(c.records.iter())
    })
    .flatten()
}

/// The record owned by OS thread `os_thread` (kernel thread id on Linux),
/// if that thread ever wrote a context and has not ended. Lock-free and
/// allocation-free: callable while the runtime is suspended, or from a
/// signal handler.
pub fn record_of_os_thread(os_thread: u64) -> Option<&'static ThreadContextRecord> {
    if OWNED.load(Relaxed) == 0 {
        return None;
    }
    let owner = os_thread.wrapping_add(1);
    records().find(|r| r.owner.load(Acquire) == owner)
}

/// Whether any thread owns a record now (a sampler skips the look-ups
/// when none does).
pub fn any_records() -> bool {
    OWNED.load(Relaxed) > 0
}

/// Claims a free record for `os_thread`, allocating a chunk when none is
/// free. Normal context only (it may allocate).
#[cold]
fn claim(os_thread: u64) -> &'static ThreadContextRecord {
    let owner = os_thread.wrapping_add(1);
    loop {
        for r in records() {
            if r.owner.compare_exchange(0, owner, Acquire, Relaxed).is_ok() {
                OWNED.fetch_add(1, Relaxed);
                return r;
            }
        }
        let fresh: &'static mut Chunk = Box::leak(Box::new(Chunk {
            records: [const { ThreadContextRecord::new() }; CHUNK],
            next: core::ptr::null(),
        }));
        loop {
            let head = CHUNKS.load(Acquire);
            fresh.next = head;
            if CHUNKS
                .compare_exchange(head, fresh as *mut Chunk, Release, Relaxed)
                .is_ok()
            {
                break;
            }
        }
        ALLOCATED.fetch_add(CHUNK, Relaxed);
    }
}

/// The calling thread's slot: its record, released when the thread ends.
struct Slot(Cell<*const ThreadContextRecord>);

impl Drop for Slot {
    fn drop(&mut self) {
        let r = self.0.replace(core::ptr::null());
        if r.is_null() {
            return;
        }
        // SAFETY: [local-memory] a record of a leaked chunk (never freed).
        let r: &'static ThreadContextRecord = unsafe { &*r };
        // The thread ends: no context, and the record is free for the
        // next thread.
        r.write([0; 4], 0, 0);
        r.owner.store(0, Release);
        OWNED.fetch_sub(1, Relaxed);
    }
}

std::thread_local! {
    static SLOT: Slot = const { Slot(Cell::new(core::ptr::null())) };
}

/// Where writes go on a thread whose thread-local storage is already torn
/// down (a write during thread exit): a record no reader looks at.
static DISCARDED: ThreadContextRecord = ThreadContextRecord::new();

/// The calling thread's record, claimed at its first use (normal context
/// only: the first call may allocate). On a thread that is ending it is a
/// record no reader sees.
pub fn current_thread_record() -> &'static ThreadContextRecord {
    SLOT.try_with(|slot| {
        let r = slot.0.get();
        if !r.is_null() {
            // SAFETY: [local-memory] a record of a leaked chunk (never freed).
            return unsafe { &*r };
        }
        let r = claim(current_os_thread());
        slot.0.set(r);
        attached(r);
        r
    })
    .unwrap_or(&DISCARDED)
}

/// A record was claimed by the calling thread (its first write): the
/// thread's entry in the stack-walk registry points to it from now on, so
/// every sample of the thread (signal or suspension source) carries the
/// record's [`snapshot`](ThreadContextRecord::snapshot).
fn attached(record: &'static ThreadContextRecord) {
    if let Some(attach) = ON_CLAIM.get() {
        attach(record);
    }
}

/// Told, on the thread, of each record a thread claims: the stack-walk
/// registry's `attach_context`, set when the registry first runs (a thread
/// that claimed its record before that gets it at registration, by
/// [`record_of_os_thread`]). So this module knows nothing of the registry.
static ON_CLAIM: std::sync::OnceLock<fn(&'static ThreadContextRecord)> = std::sync::OnceLock::new();

/// Sets the function told of each claimed record (once; later calls are
/// ignored).
pub(crate) fn on_claim(attach: fn(&'static ThreadContextRecord)) {
    let _ = ON_CLAIM.set(attach);
}

/// Sets the calling thread's trace context (`None`: no request). What a
/// tracer written in Rust calls when its current span changes on a thread;
/// the managed startup hook does the same through
/// `clrprof_context_set_v1`. After the thread's first call nothing
/// allocates.
pub fn set_current(context: Option<&TraceContext>) {
    let r = current_thread_record();
    match context {
        None => r.write([0; 4], 0, 0),
        Some(c) => r.write(words(c), 1, c.endpoint),
    }
}

/// The calling thread's trace context now.
pub fn current() -> Option<TraceContext> {
    SLOT.try_with(|slot| {
        let r = slot.0.get();
        if r.is_null() {
            return None;
        }
        // SAFETY: [local-memory] a record of a leaked chunk (never freed).
        unsafe { &*r }.snapshot()
    })
    .ok()
    .flatten()
}

fn words(c: &TraceContext) -> [u64; 4] {
    let mut t0 = [0u8; 8];
    let mut t1 = [0u8; 8];
    t0.copy_from_slice(&c.trace_id[..8]);
    t1.copy_from_slice(&c.trace_id[8..]);
    [
        u64::from_ne_bytes(t0),
        u64::from_ne_bytes(t1),
        u64::from_ne_bytes(c.span_id),
        u64::from_ne_bytes(c.local_root_span_id),
    ]
}

/// The calling thread's OS thread id (`gettid` on Linux,
/// `GetCurrentThreadId` on Windows), as `ThreadAssignedToOSThread` and
/// `GetThreadInfo` report it.
pub fn current_os_thread() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: [os-api] gettid has no preconditions.
        (unsafe { libc::gettid() }) as u64
    }
    #[cfg(windows)]
    {
        extern "system" {
            fn GetCurrentThreadId() -> u32;
        }
        // SAFETY: [os-api] GetCurrentThreadId has no preconditions.
        u64::from(unsafe { GetCurrentThreadId() })
    }
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        std::thread_local!(static ID: u64 = NEXT.fetch_add(1, Relaxed));
        ID.with(|id| *id)
    }
}

/// How many records exist and how many threads own one now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Records allocated (never freed).
    pub allocated: usize,
    /// Records owned by a live thread.
    pub owned: usize,
    /// Contexts written, summed over every record.
    pub writes: u64,
}

/// The records' counters now.
pub fn record_stats() -> RecordStats {
    RecordStats {
        allocated: ALLOCATED.load(Relaxed),
        owned: OWNED.load(Relaxed),
        writes: records().map(|r| r.writes()).sum(),
    }
}

// ---------------------------------------------------------------------------
// Endpoints: root-span names, keyed by the local root span's id.

/// Distinct endpoint names kept at most (a display name per request would
/// otherwise grow the table without bound); later names get index 0.
pub const MAX_ENDPOINTS: usize = 1024;
/// Root spans whose endpoint is remembered; the oldest are forgotten first.
pub const MAX_ROOT_SPANS: usize = 65536;

#[derive(Default)]
struct Endpoints {
    /// Index `i + 1`'s name at `names[i]`.
    names: Vec<Arc<str>>,
    by_name: HashMap<Arc<str>, u32>,
    roots: HashMap<u64, u32>,
    order: VecDeque<u64>,
    dropped_names: u64,
}

static ENDPOINTS: Mutex<Option<Endpoints>> = Mutex::new(None);

fn endpoints<R>(f: impl FnOnce(&mut Endpoints) -> R) -> R {
    // reentrancy: none: `f` is one of this module's own operations on the table (private; they call nothing else)
    let mut guard = ENDPOINTS.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Endpoints::default))
}

/// The index of endpoint `name` (1 or more), added if new; 0 when the
/// table holds [`MAX_ENDPOINTS`] names already, or `name` is empty.
pub fn intern_endpoint(name: &str) -> u32 {
    if name.is_empty() {
        return 0;
    }
    endpoints(|e| intern_in(e, name))
}

fn intern_in(e: &mut Endpoints, name: &str) -> u32 {
    if let Some(&i) = e.by_name.get(name) {
        return i;
    }
    if e.names.len() >= MAX_ENDPOINTS {
        e.dropped_names += 1;
        return 0;
    }
    let name: Arc<str> = name.into();
    e.names.push(name.clone());
    let i = e.names.len() as u32;
    e.by_name.insert(name, i);
    i
}

/// The name of endpoint `index`, if there is one.
pub fn endpoint_name(index: u32) -> Option<Arc<str>> {
    if index == 0 {
        return None;
    }
    endpoints(|e| e.names.get(index as usize - 1).cloned())
}

/// Names the endpoint of the root span `local_root_span_id` (its route or
/// display name, known when it ends); returns the endpoint's index.
pub fn set_root_endpoint(local_root_span_id: [u8; 8], name: &str) -> u32 {
    let root = u64::from_ne_bytes(local_root_span_id);
    if root == 0 || name.is_empty() {
        return 0;
    }
    endpoints(|e| {
        let i = intern_in(e, name);
        if i == 0 {
            return 0;
        }
        if e.roots.insert(root, i).is_none() {
            e.order.push_back(root);
            while e.order.len() > MAX_ROOT_SPANS {
                if let Some(old) = e.order.pop_front() {
                    e.roots.remove(&old);
                }
            }
        }
        i
    })
}

/// The endpoint index of root span `local_root_span_id`, 0 if unknown.
pub fn root_endpoint(local_root_span_id: [u8; 8]) -> u32 {
    let root = u64::from_ne_bytes(local_root_span_id);
    endpoints(|e| e.roots.get(&root).copied().unwrap_or(0))
}

/// The endpoint name of `context`: its own index, else its root span's.
/// Takes the table's lock: call it outside signal handlers and runtime
/// suspensions (a sampler does, when it encodes a profile).
pub fn resolve_endpoint(context: &TraceContext) -> Option<Arc<str>> {
    let root = u64::from_ne_bytes(context.local_root_span_id);
    endpoints(|e| {
        let i = match context.endpoint {
            0 => e.roots.get(&root).copied().unwrap_or(0),
            i => i,
        };
        (i > 0)
            .then(|| e.names.get(i as usize - 1).cloned())
            .flatten()
    })
}

/// Endpoint names refused because the table was full.
pub fn dropped_endpoint_names() -> u64 {
    endpoints(|e| e.dropped_names)
}

// ---------------------------------------------------------------------------
// The writer's report: does it follow the context on this runtime?

/// What the managed startup hook (or another writer) said at its start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriterStatus {
    /// It follows `Activity.Current` on every thread.
    Following(String),
    /// This runtime lacks what it needs (`Activity.CurrentChanged`, .NET 7+).
    Unsupported(String),
    /// It failed to start (the detail is the exception it caught).
    Failed(String),
}

static WRITER: Mutex<Option<WriterStatus>> = Mutex::new(None);

/// What the writer reported, if one said hello.
pub fn writer_status() -> Option<WriterStatus> {
    WRITER.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Records a writer's report (what `clrprof_context_hello_v1` does).
pub fn report_writer(status: WriterStatus) {
    *WRITER.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
}

/// The ABI version of the exported functions.
pub const ABI_VERSION: u32 = 1;

/// Reads `len` UTF-16 units at `ptr` (lossy), at most 4096.
///
/// # Safety
/// `ptr` is null or points to `len` readable `u16`s.
unsafe fn utf16(ptr: *const u16, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: [caller-contract] `ptr` points to `len` readable units.
    let units = unsafe { core::slice::from_raw_parts(ptr, len.min(4096)) };
    String::from_utf16_lossy(units)
}

/// `clrprof_context_hello_v1`: a writer reports whether it follows the
/// trace context (see the module docs). Returns [`ABI_VERSION`].
///
/// # Safety
/// `detail` is null or points to `len` readable UTF-16 units.
#[no_mangle]
pub unsafe extern "C" fn clrprof_context_hello_v1(
    status: u32,
    detail: *const u16,
    len: usize,
) -> u32 {
    // SAFETY: [caller-contract] the function's own precondition.
    let detail = unsafe { utf16(detail, len) };
    let _ = std::panic::catch_unwind(|| {
        let status = match status {
            0 => WriterStatus::Following(detail),
            1 => WriterStatus::Unsupported(detail),
            _ => WriterStatus::Failed(detail),
        };
        log::info!("trace context: the writer reports {status:?}");
        report_writer(status);
    });
    ABI_VERSION
}

/// `clrprof_context_set_v1`: the calling thread's context (see the module
/// docs for the id encoding). Allocates only at a thread's first call.
#[no_mangle]
pub extern "C" fn clrprof_context_set_v1(
    trace_0: u64,
    trace_1: u64,
    span: u64,
    local_root_span: u64,
    trace_flags: u32,
    endpoint: u32,
) {
    current_thread_record().write(
        [trace_0, trace_1, span, local_root_span],
        trace_flags as u8,
        endpoint,
    );
}

/// `clrprof_context_record_v1`: the calling thread's record (claimed at the
/// thread's first call; may allocate then). A writer that writes the record
/// itself keeps to its layout and protocol ([`ThreadContextRecord`]): only
/// this thread writes it; the sequence counter at offset 28 is made odd,
/// then the fields are stored, the valid byte (24) last, then the counter is
/// made even, every store a release store.
#[no_mangle]
pub extern "C" fn clrprof_context_record_v1() -> *const ThreadContextRecord {
    current_thread_record()
}

/// `clrprof_context_clear_v1`: no context on the calling thread.
#[no_mangle]
pub extern "C" fn clrprof_context_clear_v1() {
    current_thread_record().write([0; 4], 0, 0);
}

/// `clrprof_context_root_endpoint_v1`: names the endpoint of a root span;
/// returns its index (0: refused).
///
/// # Safety
/// `name` is null or points to `len` readable UTF-16 units.
#[no_mangle]
pub unsafe extern "C" fn clrprof_context_root_endpoint_v1(
    local_root_span: u64,
    name: *const u16,
    len: usize,
) -> u32 {
    // SAFETY: [caller-contract] the function's own precondition.
    let name = unsafe { utf16(name, len) };
    std::panic::catch_unwind(|| set_root_endpoint(local_root_span.to_ne_bytes(), &name))
        .unwrap_or(0)
}

/// The C# source of the startup hook that mirrors `Activity.Current` into
/// the records (`managed/ClrprofTraceContext.cs` in this crate): compile
/// it into `ClrprofTraceContext.dll` (`clrprof trace-context-hook` does)
/// and load it with `DOTNET_STARTUP_HOOKS=<path>`, with
/// `CLRPROF_CONTEXT_LIBRARY=<the profiler library's path>`.
pub const STARTUP_HOOK_SOURCE: &str = include_str!("../managed/ClrprofTraceContext.cs");

/// The environment variable naming the library whose exports the startup
/// hook calls.
pub const LIBRARY_VAR: &str = "CLRPROF_CONTEXT_LIBRARY";

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(n: u8) -> TraceContext {
        TraceContext {
            trace_id: [n; 16],
            span_id: [n.wrapping_add(1); 8],
            local_root_span_id: [n.wrapping_add(2); 8],
            endpoint: u32::from(n),
        }
    }

    #[test]
    fn layout_follows_otep_4947_where_it_fits() {
        let r = ThreadContextRecord::new();
        let c = TraceContext {
            trace_id: *b"\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6\xa3\xce\x92\x9d\x0e\x0e\x47\x36",
            span_id: *b"\x00\xf0\x67\xaa\x0b\xa9\x02\xb7",
            local_root_span_id: [7; 8],
            endpoint: 3,
        };
        r.write(words(&c), 1, 3);
        // SAFETY: [local-memory] the record is 64 readable bytes of this test.
        let bytes = unsafe { core::slice::from_raw_parts(r.as_ptr(), 64) };
        assert_eq!(&bytes[..16], &c.trace_id);
        assert_eq!(&bytes[16..24], &c.span_id);
        assert_eq!((bytes[24], bytes[25]), (1, 1), "valid, trace flags");
        assert_eq!(&bytes[26..28], &[0, 0], "no attribute data");
        assert_eq!(&bytes[32..40], &[7; 8]);
        assert_eq!(r.snapshot(), Some(c));
        r.write([0; 4], 0, 0);
        assert_eq!(bytes[24], 0, "cleared: not valid");
        assert_eq!(r.snapshot(), None);
        assert_eq!(r.writes(), 2);
    }

    #[test]
    fn a_write_under_way_is_never_read_as_a_context() {
        let r = ThreadContextRecord::new();
        r.write(words(&ctx(1)), 1, 1);
        // A reader arriving mid-write (odd counter) gets nothing.
        r.seq.fetch_add(1, Relaxed);
        assert_eq!(r.snapshot(), None);
        r.seq.fetch_add(1, Relaxed);
        assert_eq!(r.snapshot(), Some(ctx(1)));
    }

    #[test]
    fn concurrent_reads_see_whole_contexts_only() {
        // One writer thread, readers on others: every snapshot is one of
        // the contexts written, never a mix of two. The writer goes on until
        // every reader has read many contexts (on a loaded machine a reader
        // may start late).
        use core::sync::atomic::AtomicBool;
        let r: &'static ThreadContextRecord = Box::leak(Box::new(ThreadContextRecord::new()));
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let seen: &'static [AtomicU64; 2] =
            Box::leak(Box::new([AtomicU64::new(0), AtomicU64::new(0)]));
        let readers: Vec<_> = (0..2)
            .map(|k| {
                std::thread::spawn(move || {
                    let mut torn = 0u64;
                    while !stop.load(Relaxed) {
                        if let Some(c) = r.snapshot() {
                            seen[k].fetch_add(1, Relaxed);
                            if c != ctx(c.trace_id[0]) {
                                torn += 1;
                            }
                        }
                    }
                    torn
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut i = 0u32;
        while seen.iter().any(|s| s.load(Relaxed) < 10_000) && std::time::Instant::now() < deadline
        {
            let n = (i % 200) as u8 + 1;
            r.write(words(&ctx(n)), 1, u32::from(n));
            i = i.wrapping_add(1);
        }
        stop.store(true, Relaxed);
        for (k, h) in readers.into_iter().enumerate() {
            let torn = h.join().unwrap();
            let n = seen[k].load(Relaxed);
            assert!(n >= 10_000, "reader {k} read only {n} contexts in 30 s");
            assert_eq!(torn, 0, "{torn} torn reads of {n}");
        }
    }

    #[test]
    fn a_thread_owns_one_record_found_by_its_os_thread_and_freed_at_its_end() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            assert_eq!(current(), None);
            set_current(Some(&ctx(9)));
            assert_eq!(current(), Some(ctx(9)));
            let r = current_thread_record();
            assert!(core::ptr::eq(r, current_thread_record()));
            tx.send((current_os_thread(), r as *const _ as usize))
                .unwrap();
            done_rx.recv().unwrap();
        });
        let (tid, addr) = rx.recv().unwrap();
        let found = record_of_os_thread(tid).expect("the thread's record");
        assert_eq!(found as *const _ as usize, addr);
        assert_eq!(found.snapshot(), Some(ctx(9)));
        assert_eq!(found.os_thread(), Some(tid));
        assert!(any_records());
        done_tx.send(()).unwrap();
        t.join().unwrap();
        // The thread ended: its record is free and holds nothing.
        assert!(record_of_os_thread(tid).is_none());
        let r = records()
            .find(|r| *r as *const ThreadContextRecord as usize == addr)
            .unwrap();
        assert_eq!((r.snapshot(), r.os_thread()), (None, None));
    }

    #[test]
    fn the_c_functions_write_the_calling_threads_record() {
        std::thread::spawn(|| {
            let c = ctx(4);
            let w = words(&c);
            clrprof_context_set_v1(w[0], w[1], w[2], w[3], 1, 4);
            assert_eq!(current(), Some(c));
            clrprof_context_clear_v1();
            assert_eq!(current(), None);
            let detail: Vec<u16> = "ok".encode_utf16().collect();
            // SAFETY: [local-memory] `detail` holds `len` units.
            let v = unsafe { clrprof_context_hello_v1(0, detail.as_ptr(), detail.len()) };
            assert_eq!(v, ABI_VERSION);
            assert_eq!(writer_status(), Some(WriterStatus::Following("ok".into())));
        })
        .join()
        .unwrap();
    }

    /// The startup hook writes the record itself, by offset (see
    /// `managed/ClrprofTraceContext.cs`, `OnValueChanged`): the same writes
    /// here must read back as the context.
    #[test]
    fn the_hooks_writes_by_offset_read_back_as_the_context() {
        std::thread::spawn(|| {
            let c = ctx(7);
            let w = words(&c);
            let r = clrprof_context_record_v1() as *mut u8;
            // SAFETY: [local-memory] a 64-byte record of a leaked chunk, owned by this thread;
            // every offset below lies inside it and is aligned for its width.
            unsafe {
                let seq = r.add(28) as *mut u32;
                let s = core::ptr::read_volatile(seq);
                core::ptr::write_volatile(seq, s + 1);
                core::ptr::write_volatile(r.add(24), 0);
                core::ptr::write_volatile(r as *mut u64, w[0]);
                core::ptr::write_volatile(r.add(8) as *mut u64, w[1]);
                core::ptr::write_volatile(r.add(16) as *mut u64, w[2]);
                core::ptr::write_volatile(r.add(25), 1);
                core::ptr::write_volatile(r.add(32) as *mut u64, w[3]);
                core::ptr::write_volatile(r.add(40) as *mut u32, 7);
                core::ptr::write_volatile(r.add(24), 1);
                core::ptr::write_volatile(seq, s + 2);
            }
            assert_eq!(current(), Some(c));
            // A clear: the valid byte only.
            // SAFETY: [local-memory] as above.
            unsafe {
                let seq = r.add(28) as *mut u32;
                let s = core::ptr::read_volatile(seq);
                core::ptr::write_volatile(seq, s + 1);
                core::ptr::write_volatile(r.add(24), 0);
                core::ptr::write_volatile(seq, s + 2);
            }
            assert_eq!(current(), None);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn endpoints_are_named_by_root_span_and_bounded() {
        let name: Vec<u16> = "GET /cpu/{n}".encode_utf16().collect();
        let root = [0x11u8, 2, 3, 4, 5, 6, 7, 8];
        // SAFETY: [local-memory] `name` holds `len` units.
        let i = unsafe {
            clrprof_context_root_endpoint_v1(u64::from_ne_bytes(root), name.as_ptr(), name.len())
        };
        assert!(i > 0);
        assert_eq!(root_endpoint(root), i);
        assert_eq!(endpoint_name(i).as_deref(), Some("GET /cpu/{n}"));
        let c = TraceContext {
            local_root_span_id: root,
            ..ctx(1)
        };
        let unknown_index = TraceContext { endpoint: 0, ..c };
        assert_eq!(
            resolve_endpoint(&unknown_index).as_deref(),
            Some("GET /cpu/{n}")
        );
        assert_eq!(intern_endpoint("GET /cpu/{n}"), i);
        assert_eq!(intern_endpoint(""), 0);
        assert_eq!(set_root_endpoint([0; 8], "x"), 0, "no root span");
        // The root-span table forgets its oldest entries.
        for k in 1..=(MAX_ROOT_SPANS as u64 + 10) {
            set_root_endpoint((k << 8 | 0x99).to_ne_bytes(), "GET /other");
        }
        assert_eq!(root_endpoint(root), 0, "the oldest root was forgotten");
        endpoints(|e| assert!(e.roots.len() <= MAX_ROOT_SPANS));
    }

    #[test]
    fn hex_is_lowercase_w3c() {
        let c = TraceContext {
            trace_id: [0xab; 16],
            span_id: [0, 1, 2, 3, 4, 5, 6, 0xff],
            ..Default::default()
        };
        assert_eq!(c.trace_id_hex(), "ab".repeat(16));
        assert_eq!(c.span_id_hex(), "00010203040506ff");
    }
}
