//! Trace context per thread: the request (trace, span, root span, endpoint)
//! a thread works for, readable by a sampler at any moment.
//!
//! This is the minimal form the sampler needs (the contract between the
//! signal-driven sampler and the trace-context work): the record type, its
//! async-signal-safe [`ThreadContextRecord::snapshot`], and the calling
//! thread's record. The writer side that follows .NET's `Activity.Current`
//! is the trace-context module's.
//!
//! - **The record** ([`ThreadContextRecord`]): one per thread that ever
//!   carried a context, allocated by the SDK in chunks that are never freed
//!   (not a `thread_local!` value: a lazily initialised thread-local of a
//!   `dlopen`ed library may allocate on first touch, which a signal handler
//!   must never do). A reader holding one never reads freed memory.
//! - **The writer**: only the record's own thread writes it ([`set_current`]).
//! - **The reader**: [`ThreadContextRecord::snapshot`] loads atomics only
//!   (no allocation, no lock, no system call) and tolerates a write in
//!   progress, on the same thread (a signal handler that interrupted the
//!   writer) or on another: a sequence counter, odd while a write is under
//!   way, makes a torn read visible; the reader retries a bounded number of
//!   times, then reports nothing.

use core::cell::Cell;
use core::sync::atomic::{
    fence, AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Mutex;

/// The trace context of a thread at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct TraceContext {
    /// The W3C trace id (16 bytes, as in `traceparent`).
    pub trace_id: [u8; 16],
    /// The W3C id of the span the thread works for.
    pub span_id: [u8; 8],
    /// The id of that span's local root (an incoming request's span).
    pub local_root_span_id: [u8; 8],
    /// Index of the root span's name in the endpoint table, 0 for none.
    pub endpoint: u32,
}

/// One thread's context, written by that thread, read by anyone.
///
/// The first words follow OpenTelemetry's thread-context record (OTEP 4947,
/// `otel_thread_ctx_v1`: trace id, span id, a valid flag); the sequence
/// counter, the local root span and the endpoint come after them.
#[repr(C, align(64))]
pub struct ThreadContextRecord {
    trace_id: [AtomicU64; 2],
    span_id: AtomicU64,
    valid: AtomicU32,
    seq: AtomicU32,
    local_root_span_id: AtomicU64,
    endpoint: AtomicU32,
    _reserved: AtomicU32,
}

/// Reads of a record in which a write kept going on before `snapshot`
/// gives up.
const SNAPSHOT_TRIES: usize = 4;

impl ThreadContextRecord {
    const fn new() -> Self {
        ThreadContextRecord {
            trace_id: [AtomicU64::new(0), AtomicU64::new(0)],
            span_id: AtomicU64::new(0),
            valid: AtomicU32::new(0),
            seq: AtomicU32::new(0),
            local_root_span_id: AtomicU64::new(0),
            endpoint: AtomicU32::new(0),
            _reserved: AtomicU32::new(0),
        }
    }

    // signal-context: async-signal-safe: atomic loads of a record that is never freed; a bounded loop
    /// The context held now; `None` when there is none, or when a write was
    /// under way at every try. Async-signal-safe: atomic loads only.
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
            // The loads above happen before the second read of the counter.
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

    /// Writes `context` (`None`: no context). Only the record's own thread
    /// calls it (the sequence counter has one writer).
    fn write(&self, context: Option<&TraceContext>) {
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq.wrapping_add(1), Relaxed);
        // The odd counter is visible before any field changes.
        fence(Release);
        let c = context.copied().unwrap_or_default();
        let word = |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_ne_bytes(w)
        };
        self.valid.store(0, Relaxed);
        self.trace_id[0].store(word(&c.trace_id[..8]), Relaxed);
        self.trace_id[1].store(word(&c.trace_id[8..]), Relaxed);
        self.span_id.store(u64::from_ne_bytes(c.span_id), Relaxed);
        self.local_root_span_id
            .store(u64::from_ne_bytes(c.local_root_span_id), Relaxed);
        self.endpoint.store(c.endpoint, Relaxed);
        self.valid.store(u32::from(context.is_some()), Relaxed);
        self.seq.store(seq.wrapping_add(2), Release);
    }
}

/// Records per chunk; chunks are leaked, so a record lives as long as the
/// process.
const CHUNK: usize = 64;

/// Free records (of threads that ended), and the unused rest of the newest
/// chunk.
static FREE: Mutex<Vec<&'static ThreadContextRecord>> = Mutex::new(Vec::new());

thread_local! {
    /// The calling thread's record, once it has one (normal context only:
    /// a signal handler never touches this thread-local).
    static CURRENT: Cell<*const ThreadContextRecord> = const { Cell::new(core::ptr::null()) };
    /// Gives the record back when the thread ends.
    static RETURN: ReturnRecord = const { ReturnRecord(Cell::new(None)) };
}

/// Puts a thread's record back on the free list at thread exit. Its
/// context is cleared first, so a reader that still holds it sees none.
struct ReturnRecord(Cell<Option<&'static ThreadContextRecord>>);

impl Drop for ReturnRecord {
    fn drop(&mut self) {
        if let Some(record) = self.0.take() {
            record.write(None);
            if let Ok(mut free) = FREE.lock() {
                free.push(record);
            }
        }
    }
}

/// The calling thread's record, allocated at its first call (normal
/// context only: it may allocate). Also attaches it to the thread's entry
/// in the stack-walk registry, so samples of this thread carry its context.
pub fn current_thread_record() -> &'static ThreadContextRecord {
    let current = CURRENT.with(|c| c.get());
    if !current.is_null() {
        // SAFETY: [local-memory] the pointer was made from a `&'static` record below.
        return unsafe { &*current };
    }
    let record = {
        let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
        if free.is_empty() {
            let chunk: &'static [ThreadContextRecord] = Box::leak(
                (0..CHUNK)
                    .map(|_| ThreadContextRecord::new())
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            );
            free.extend(chunk.iter().rev());
        }
        free.pop()
    };
    let record = record.unwrap_or_else(|| Box::leak(Box::new(ThreadContextRecord::new())));
    CURRENT.with(|c| c.set(record));
    let _ = RETURN.try_with(|r| r.0.set(Some(record)));
    ATTACHED.with(|a| {
        if !a.get() {
            crate::stackwalk::threads::attach_context(record);
            a.set(true);
        }
    });
    record
}

thread_local! {
    static ATTACHED: Cell<bool> = const { Cell::new(false) };
}

/// Sets the calling thread's context (`None`: no context). Normal context
/// only; a sampler reads it with [`ThreadContextRecord::snapshot`].
pub fn set_current(context: Option<&TraceContext>) {
    current_thread_record().write(context);
}

/// The calling thread's context now.
pub fn current() -> Option<TraceContext> {
    current_thread_record().snapshot()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u8) -> TraceContext {
        TraceContext {
            trace_id: [n; 16],
            span_id: [n.wrapping_add(1); 8],
            local_root_span_id: [n.wrapping_add(2); 8],
            endpoint: u32::from(n),
        }
    }

    #[test]
    fn a_thread_reads_back_what_it_wrote() {
        assert_eq!(current(), None);
        set_current(Some(&sample(7)));
        assert_eq!(current(), Some(sample(7)));
        set_current(None);
        assert_eq!(current(), None);
    }

    #[test]
    fn a_reader_never_sees_a_torn_context() {
        let record = current_thread_record();
        let stop = std::sync::Arc::new(core::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let reader = std::thread::spawn(move || {
            let (mut seen, mut none) = (0u64, 0u64);
            while !s.load(Relaxed) {
                match record.snapshot() {
                    Some(c) => {
                        let n = c.trace_id[0];
                        assert!(c.trace_id.iter().all(|&b| b == n), "torn trace id {c:?}");
                        assert_eq!(c.span_id, [n.wrapping_add(1); 8], "torn span {c:?}");
                        assert_eq!(c.endpoint, u32::from(n));
                        seen += 1;
                    }
                    None => none += 1,
                }
            }
            (seen, none)
        });
        for i in 0..200_000u32 {
            set_current(Some(&sample((i % 251) as u8)));
        }
        stop.store(true, Relaxed);
        let (seen, _) = reader.join().unwrap();
        assert!(seen > 0, "the reader never saw a whole context");
    }
}
