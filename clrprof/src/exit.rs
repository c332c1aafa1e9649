//! Finishing work, run exactly once on every exit path the platform shows us.
//!
//! The runtime calls `ICorProfilerCallback::Shutdown` only when a host shuts
//! it down (`dotnet app.dll` returning from `Main`, `Environment.Exit`). Many
//! processes end without it: a native host that never calls
//! `coreclr_shutdown` (CPython through pythonnet), `exit()` from native code,
//! an unhandled managed exception, a signal. A profiler that aggregates and
//! writes at the end would lose everything there. This module gives each
//! profiler object one finishing point — [`Profiler::finish`] — and each
//! output writer a flush, and runs them from whichever of these comes first:
//!
//! | path | what the runtime does (3.1.23 and 8.0.4, as observed) | where finishing runs |
//! |---|---|---|
//! | `Main` returns, `Environment.Exit(n)` | the runtime shuts down in order; `Shutdown` arrives | `Shutdown`, right after [`Profiler::shutdown`] |
//! | detach | `ProfilerDetachSucceeded` is the last callback | there, after [`Profiler::profiler_detach_succeeded`] |
//! | host never shuts down, `exit()` from native code | no `Shutdown`; the C library runs its exit handlers | an `atexit` handler (Unix, and the CRT's per-DLL table on Windows, run at `DLL_PROCESS_DETACH`) |
//! | SIGTERM (Linux), .NET Core 3.1 to 9 | the runtime's handler turns it into an orderly exit (`ProcessExit`, `Shutdown`, exit status 143) | `Shutdown` (the `atexit` handler, should a host's handler exit otherwise) |
//! | SIGTERM (Linux), .NET 10 and later | no orderly exit: the runtime no longer handles SIGTERM (dotnet/runtime PR 115494; the documented .NET 10 breaking change), and the process dies of the signal unless the app registered a handler (`PosixSignalRegistration`, or a host's such as `UseConsoleLifetime`) | the SDK's finisher thread, woken by the SIGTERM handler, which then passes the signal on (an app's own handler still runs, but what the app does after it is no longer recorded) |
//! | SIGINT / Ctrl-C (Linux) | the runtime's handler restores the previous disposition and sends the signal again: the process dies of it, no exit handlers | the SDK's finisher thread, woken by a SIGINT handler installed on top of the runtime's; the thread then sends the signal again and the handler passes it to the runtime's |
//! | a signal nobody handles | default action | the same thread; the handler then restores the default and raises the signal again |
//! | unhandled managed exception (Windows) | under Wine the process ends with neither the top-level filter nor exit handlers running (seen with the watch turned off) | the watch of "Unhandled exceptions on Linux" below; also a top-level exception filter installed on top of the runtime's, which finishes and passes on, for an exception that reaches it |
//! | unhandled managed exception (Linux) | the runtime prints it, restores the signal dispositions it saved when it started and calls `abort()`: no handler of ours can run | see [`crate::exit`]'s "Unhandled exceptions on Linux" below |
//! | SIGKILL, power loss | nothing can run | `clrprof::output::JsonLines` flushes periodically, so at most one flush interval of records is lost |
//!
//! Exactly once: every finishing point goes through one state per profiler
//! object (finished or not, under a lock), so a process exit racing a
//! `Shutdown` on another thread still finishes once. Waits at process exit are
//! bounded: a lock held by a thread that the exit interrupted (or that
//! Windows already ended) is given up on after [`EXIT_WAIT`], never waited on forever.
//! The bounded locks ([`lock_until`], [`lock_unless_exiting`]) and the
//! process-exit flag ([`process_exiting`]) live in a module of their own at
//! the bottom of the crate, re-exported here: the threads and writers that
//! take them sit below this module, which orchestrates finishing on top of
//! the callbacks, the components and the stack walks.
//!
//! No finishing runs inside a signal handler: a handler interrupts its
//! thread anywhere (inside the profiler's own callback, holding its lock),
//! so the handler only wakes an SDK thread, which finishes (waiting at most
//! [`signal_finish_wait`]) and then has the signal passed on; a second
//! signal while finishing is passed on at once (Unix; the `exit::signals`
//! module docs say how, and the book's "Exit paths and hosts" chapter).
//!
//! What may run where: at process exit the runtime may be half gone (its
//! threads still run during `exit()`, or were already ended on Windows, where
//! exit handlers run under the loader lock), so finishing work must not call
//! the runtime: [`Profiler::finish`] gets no `ProfilerInfo`, and anything it
//! needs from the runtime (names) must have been resolved while the runtime
//! answered. It should only format and write.
//!
//! ## Unhandled exceptions on Linux
//! The PAL (the runtime's platform layer) saves the signal dispositions it
//! replaces when it starts and puts them back right before it aborts the
//! process (`PROCAbort`), so a SIGABRT handler installed later by a profiler
//! is gone by the time `abort()` raises the signal. The last thing the
//! profiler sees on that path is the exception's first pass:
//! `ExceptionThrown`, then `ExceptionSearchFunctionEnter`/`Leave` for every
//! managed frame up to the thread's first one, with no
//! `ExceptionSearchCatcherFound`. [`unhandled_exception_seen`] is the hook for
//! that moment: the SDK's watch (below) calls it when a search leaves the
//! outermost managed frame without a catcher, and the SDK finishes there. The
//! watch walks a thread's stack at the thread's first exception, again when
//! the outermost frame it kept has changed, and once more when an
//! exception's search reaches that frame's function (see the book's "Exit
//! paths and hosts" chapter); an exception caught before that costs no
//! walk. A profiler turns the watch off with
//! [`Profiler::watch_unhandled_exceptions`](crate::callback::Profiler::watch_unhandled_exceptions).
//!
//! [`Profiler::finish`]: crate::callback::Profiler::finish
//! [`Profiler::shutdown`]: crate::callback::Profiler::shutdown
//! [`Profiler::profiler_detach_succeeded`]: crate::callback::Profiler::profiler_detach_succeeded

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, Weak};
use std::time::{Duration, Instant};

pub use crate::exiting::{lock_unless_exiting, lock_until, process_exiting, EXIT_WAIT};

/// The highest major version of CoreCLR seen initializing in this process
/// (0 before any): decides what SIGTERM means (see the module docs).
static RUNTIME_MAJOR: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// Notes a runtime of major version `major` (from `Initialize`).
pub(crate) fn note_runtime_major(major: u16) {
    RUNTIME_MAJOR.fetch_max(major, Ordering::Relaxed);
}

/// Whether a runtime in this process ends on SIGTERM without an orderly
/// exit: .NET 10 and later no longer handle the signal (Unix only: Windows
/// has no SIGTERM to handle).
#[cfg(unix)]
// signal-context: async-signal-safe
fn sigterm_ends_without_shutdown() -> bool {
    RUNTIME_MAJOR.load(Ordering::Relaxed) >= 10
}

/// How long finishing may take after SIGINT or SIGTERM, unless
/// [`set_signal_finish_wait`] says otherwise: then the signal is passed on
/// to the runtime's own handling (or its default action) whether or not
/// every [`Profiler::finish`](crate::callback::Profiler::finish) returned.
pub const SIGNAL_FINISH_WAIT: Duration = Duration::from_secs(10);

static SIGNAL_FINISH_WAIT_MS: AtomicU64 = AtomicU64::new(SIGNAL_FINISH_WAIT.as_millis() as u64);

/// Sets how long finishing may take after SIGINT or SIGTERM before the
/// signal is passed on anyway (process-wide; the default is
/// [`SIGNAL_FINISH_WAIT`]). A profiler whose `finish` uploads, say, sets it
/// above its upload timeout; a process manager that sends SIGKILL after a
/// grace period makes anything longer moot. Unix only in effect: on Windows
/// no signal handler finishes.
pub fn set_signal_finish_wait(wait: Duration) {
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    SIGNAL_FINISH_WAIT_MS.store(ms, Ordering::Relaxed);
}

/// How long finishing may take after SIGINT or SIGTERM (see
/// [`set_signal_finish_wait`]).
pub fn signal_finish_wait() -> Duration {
    Duration::from_millis(SIGNAL_FINISH_WAIT_MS.load(Ordering::Relaxed))
}

/// Something with buffered output to write out (an output writer).
///
/// Registered with [`register_flush`]; flushed at every finishing point, after
/// the profilers' [`finish`](crate::callback::Profiler::finish), and at process exit.
pub trait Flush: Send + Sync {
    /// Writes out what is buffered. `last` is `true` at process exit: the
    /// implementation must not wait unboundedly (a thread holding its lock
    /// may never run again) and should write through from now on.
    fn flush(&self, last: bool);
}

/// A registered profiler object: its finish call, until it has run.
struct Slot {
    state: Mutex<SlotState>,
}

struct SlotState {
    /// The finish call; `None` once the object is gone.
    target: Option<Target>,
    done: bool,
}

/// A type-erased `&P` and the function calling `P::finish` on it.
struct Target {
    data: *const (),
    call: unsafe fn(*const ()),
}

// SAFETY: [free-threaded, local-memory] `data` is a `&P` with `P: Profiler`, and `Profiler: Send + Sync`,
// so calling `finish(&P)` from another thread is what the type allows; the
// pointer is removed (under the slot lock) before the object is dropped.
unsafe impl Send for Target {}

#[derive(Default)]
struct Registry {
    slots: Vec<Arc<Slot>>,
    flushers: Vec<Weak<dyn Flush>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    slots: Vec::new(),
    flushers: Vec::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The finishing state of one profiler object, held by the SDK's callback object.
pub(crate) struct ProfilerFinish {
    slot: Arc<Slot>,
}

impl ProfilerFinish {
    /// Registers `profiler`'s [`finish`](crate::callback::Profiler::finish) and installs
    /// the process hooks (once per process).
    ///
    /// # Safety
    /// `profiler` must stay valid until [`ProfilerFinish::release`] has
    /// returned (the SDK's callback object owns both and releases first in
    /// its `Drop`).
    pub(crate) unsafe fn register<P: crate::callback::Profiler>(profiler: &P) -> ProfilerFinish {
        /// Calls `finish` on the profiler `data` points to.
        ///
        /// # Safety
        /// `data` is the `&P` given to [`ProfilerFinish::register`], and the
        /// target holding it is still present (see `run_slot`).
        unsafe fn call<P: crate::callback::Profiler>(data: *const ()) {
            // SAFETY: [caller-contract, local-memory] `data` came from a `&P` that is still valid: the
            // caller of `register` keeps it alive until `release`, which
            // takes the target out under the same lock this call runs under.
            let p = unsafe { &*(data as *const P) };
            p.finish();
        }
        install();
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState {
                target: Some(Target {
                    data: profiler as *const P as *const (),
                    call: call::<P>,
                }),
                done: false,
            }),
        });
        registry().slots.push(slot.clone());
        ProfilerFinish { slot }
    }

    /// Runs the profiler's finish now unless it already ran, then flushes
    /// every registered writer (a `Shutdown` or `ProfilerDetachSucceeded`).
    pub(crate) fn finish(&self, reason: &'static str) {
        run_slot(&self.slot, None, reason);
        flush_all(false);
    }

    /// Finishes (if not done yet) and forgets the profiler: called before the
    /// profiler value is dropped.
    pub(crate) fn release(&self) {
        run_slot(&self.slot, None, "profiler released");
        {
            let mut s = self.slot.state.lock().unwrap_or_else(|p| p.into_inner());
            s.target = None;
        }
        registry().slots.retain(|s| !Arc::ptr_eq(s, &self.slot));
        flush_all(false);
    }
}

/// Runs one slot's finish if it has not run; with a deadline, gives up on a
/// lock held elsewhere (another thread finishing it right now, or a thread
/// that will never run again).
fn run_slot(slot: &Slot, deadline: Option<Instant>, reason: &'static str) {
    let guard = match deadline {
        Some(d) => lock_until(&slot.state, d),
        None => Some(slot.state.lock().unwrap_or_else(|p| p.into_inner())),
    };
    let Some(mut state) = guard else {
        return;
    };
    if state.done {
        return;
    }
    state.done = true;
    if let Some(target) = &state.target {
        log::debug!("Profiler::finish at: {reason}");
        let (data, call) = (target.data, target.call);
        crate::guard::guard("Profiler::finish", (), || {
            // SAFETY: [local-memory] the target is present, so the profiler it points to is
            // alive (release removes it under this lock before the drop).
            unsafe { call(data) }
        });
    }
}

/// Registers an output writer to be flushed at every finishing point and at
/// process exit. Held weakly: a writer that is dropped is simply skipped.
pub fn register_flush(writer: Weak<dyn Flush>) {
    install();
    let mut r = registry();
    r.flushers.retain(|w| w.strong_count() > 0);
    r.flushers.push(writer);
}

fn flush_all(last: bool) {
    let writers: Vec<Arc<dyn Flush>> = {
        let r = if last {
            match lock_until(&REGISTRY, Instant::now() + EXIT_WAIT) {
                Some(r) => r,
                None => return,
            }
        } else {
            registry()
        };
        r.flushers.iter().filter_map(Weak::upgrade).collect()
    };
    for w in writers {
        crate::guard::guard("output flush", (), || w.flush(last));
    }
}

/// Runs every profiler's finish that has not run yet, then flushes every
/// writer for the last time. What the process hooks call; safe to call more
/// than once (later calls only flush).
pub fn finish_process(reason: &'static str) {
    crate::exiting::mark_exiting();
    let deadline = Instant::now() + EXIT_WAIT;
    let slots: Vec<Arc<Slot>> = match lock_until(&REGISTRY, deadline) {
        Some(r) => r.slots.clone(),
        None => Vec::new(),
    };
    for slot in slots {
        run_slot(&slot, Some(deadline), reason);
    }
    flush_all(true);
}

/// Tells the SDK that a managed exception is leaving the last managed frame
/// of its thread without a handler: the runtime ends the process right after
/// (see the module docs for why no later hook exists on Linux). Finishes
/// every profiler and flushes every writer, as at process exit. The SDK calls
/// it itself (see the module docs); it is public for hosts that learn of the
/// end in their own way.
pub fn unhandled_exception_seen() {
    finish_process("unhandled managed exception");
}

/// Recognising an unhandled managed exception from the exception callbacks.
///
/// An SDK component ([`unhandled::Watch`], registered by the SDK's
/// callback object for every profiler whose
/// [`Profiler::watch_unhandled_exceptions`](crate::callback::Profiler::watch_unhandled_exceptions)
/// says so, as it does by default) asks for `MONITOR_EXCEPTIONS` and
/// `ENABLE_STACK_SNAPSHOT` (both may be set and cleared at any time, also
/// after attach); a profiler that did not ask for them itself does not see
/// the exception callbacks (see [`crate::component`]). The first pass of an
/// exception calls `ExceptionSearchFunctionEnter`/`Leave` once per managed
/// frame, innermost first, and `ExceptionSearchCatcherFound` when a frame
/// will catch. A search that leaves the thread's outermost managed frame
/// with no catcher found is an unhandled exception: on Linux (3.1 and 8.0
/// observed) the runtime prints it and aborts right after, with no further
/// callback. An exception thrown during the first pass (in a filter) is
/// tracked on its own, innermost first; one caught there ends at its
/// catching frame's `ExceptionSearchFunctionLeave`, which the runtime sends
/// right after `ExceptionSearchCatcherFound`.
///
/// .NET 9 and later (the managed exception handling ported from NativeAOT)
/// end the first pass of an unhandled exception without the outermost
/// frame's `ExceptionSearchFunctionLeave` (seen on 9.0.23, 10.0.15 and
/// 11.0.0: `ExceptionSearchFunctionEnter` for `Main`, then the runtime's
/// own managed code formatting the exception, then `abort()`). So when the
/// search enters the thread's outermost frame and that method has no
/// `catch` or `filter` clause at all (read from its IL), no frame can catch:
/// the exception is unhandled there already, on every runtime. The same
/// holds when the outermost frame is one of the runtime's own entry points,
/// an `[UnmanagedCallersOnly]` method of `System.Private.CoreLib` through
/// which native code calls managed code (.NET 11 runs `Main` through
/// `System.Environment::CallEntryPoint`, whose handler only hands the
/// exception to the runtime, which reports it as unhandled and aborts). An
/// outermost method of the app with a `catch` or `filter` clause is still
/// decided at its leave, as above (on .NET 9+ an exception that its clauses
/// do not catch is then not seen).
///
/// ## Which frame is the outermost, at production cost
///
/// Knowing the outermost managed frame takes a walk of the whole stack (a
/// synchronous `DoStackSnapshot`), about 18 000 instructions on a short
/// stack (benches/README.md), six times what the runtime itself adds to an
/// exception for the profiling API. The watch therefore walks rarely:
///
/// - **One walk, kept per thread.** At an `ExceptionThrown` the watch walks
///   only when it has no walk of this thread yet, or when the outermost
///   frame the last walk saw is no longer where it was. That walk (with the
///   frames' register contexts) tells the outermost frame's function, its
///   stack pointer and its instruction pointer, which is the return address
///   of the call that frame is making. On x86-64 a `call` stores that
///   return address at the caller's stack pointer minus 8, so while the
///   frame is live and still in the same call, that stack word holds it.
///   Before trusting the kept walk, the watch reads that one word (inside
///   the live part of its own thread's stack, whose bounds it reads from
///   the system once per thread) and compares it: one load. Any difference
///   (the frame returned, native code entered managed code elsewhere, the
///   frame calls from another place) means a new walk, so a thread whose
///   outermost frame changes (CPython through pythonnet, native threads
///   calling back into managed code, the main thread's start-up code before
///   `Main`) is walked again when it matters, not trusted blindly.
/// - **A confirming walk only where an exception gets to.** A search that
///   enters a frame of the kept outermost function may be in that frame or
///   in a recursive call of it higher up. Where the watch would decide
///   (the frame cannot catch, at its enter; or the search leaves it with no
///   catcher) it walks the stack again, right then, and decides only when
///   the search has entered as many frames as that walk counts and the walk
///   ends in this function: exactly the test of a walk at every throw. An
///   exception caught before it reaches that function, which is nearly all
///   of them, costs no walk.
///
/// What the kept walk can still miss: a thread whose outermost frame
/// returned, after which native code called managed code again so that a
/// frame of the new call chain leaves the old frame's return-address word
/// unwritten (padding, an unused slot) *and* an exception is unhandled at
/// the new outermost frame before any other walk: the watch then does not
/// see that the outermost frame changed and the process ends without
/// `finish`. It never decides early: every decision comes from a walk made
/// during that exception's search. On other architectures (aarch64) no
/// word of the stack identifies the frame cheaply, and on Windows before 8
/// the system does not tell the stack's bounds: the watch walks at every
/// `ExceptionThrown` there, as before.
pub(crate) mod unhandled {
    use crate::ids::{FunctionId, ObjectId};
    use crate::info::ProfilerInfo;
    use crate::stackwalk::{Walk, WalkOptions};
    use std::cell::RefCell;

    /// The SDK component that feeds the functions below.
    pub(crate) struct Watch;

    impl crate::component::Component for Watch {
        fn name(&self) -> &'static str {
            "unhandled-exception watch"
        }

        fn masks(&self) -> crate::event_mask::EventMasks {
            (crate::event_mask::EventMask::MONITOR_EXCEPTIONS
                | crate::event_mask::EventMask::ENABLE_STACK_SNAPSHOT)
                .into()
        }

        fn exception_thrown(&self, info: &ProfilerInfo, _exception: ObjectId<'_>) {
            thrown(info);
        }

        fn exception_search_function_enter(&self, info: &ProfilerInfo, function: FunctionId<'_>) {
            if search_enter(info, function) {
                super::unhandled_exception_seen();
            }
        }

        fn exception_search_function_leave(&self, info: &ProfilerInfo) {
            if search_leave(info) {
                super::unhandled_exception_seen();
            }
        }

        fn exception_search_catcher_found(&self, _info: &ProfilerInfo, _function: FunctionId<'_>) {
            catcher_found();
        }

        // The watch needs the search phase only.
        fn receives_unwinds(&self) -> bool {
            false
        }
    }

    /// Whether a kept walk can be checked cheaply here (see the module docs):
    /// a `call` stores its return address at the caller's stack pointer
    /// minus 8 (x86-64), and the system tells the thread's stack bounds.
    const KEEPS_WALK: bool = cfg!(all(
        target_arch = "x86_64",
        any(target_os = "linux", windows)
    ));

    /// Where a thread's outermost managed frame was at its last walk.
    #[derive(Clone, Copy)]
    struct Bottom {
        /// Its function (raw `FunctionID`; 0: no walk yet).
        function: usize,
        /// Its stack pointer and instruction pointer (the return address of
        /// the call it was making); `sp` 0 when the walk gave no context.
        sp: usize,
        ip: usize,
        /// Whether no exception can stop in `function` ([`cannot_catch`]),
        /// once asked.
        cannot_catch: Option<bool>,
    }

    /// One exception's first pass on this thread.
    #[derive(Clone, Copy)]
    struct Pending {
        /// The outermost managed frame's function (raw `FunctionID`; 0 when
        /// not known, and then nothing is decided for this exception).
        outermost: usize,
        /// The managed frames a walk during this exception counted; 0 while
        /// the exception relies on the kept walk.
        frames: usize,
        /// Frames the search has entered so far.
        searched: usize,
        /// The search is in a frame of `outermost` that may catch: decide at
        /// its leave.
        in_outermost: bool,
        /// A catcher was found: the exception's search ends at the leave of
        /// the catching frame, which follows (see [`ThreadWatch::leave`]).
        caught: bool,
    }

    impl Pending {
        const NONE: Pending = Pending {
            outermost: 0,
            frames: 0,
            searched: 0,
            in_outermost: false,
            caught: false,
        };
    }

    /// A thread's exceptions nest (a throw in a filter) at most a few deep.
    const MAX_PENDING: usize = 16;

    /// The watch's state of one thread.
    struct ThreadWatch {
        bottom: Bottom,
        /// The thread's stack, `[low, high)`; `(0, 0)` when not known.
        stack: (usize, usize),
        stack_read: bool,
        /// Exceptions in their first pass, oldest first.
        pending: [Pending; MAX_PENDING],
        depth: usize,
    }

    impl ThreadWatch {
        const NEW: ThreadWatch = ThreadWatch {
            bottom: Bottom {
                function: 0,
                sp: 0,
                ip: 0,
                cannot_catch: None,
            },
            stack: (0, 0),
            stack_read: false,
            pending: [Pending::NONE; MAX_PENDING],
            depth: 0,
        };

        /// The kept outermost function, when its frame is still where the
        /// last walk saw it, in the same call.
        fn bottom_in_place(&self) -> Option<usize> {
            let b = &self.bottom;
            if !KEEPS_WALK || b.function == 0 || b.sp == 0 {
                return None;
            }
            let slot = b.sp.checked_sub(core::mem::size_of::<usize>())?;
            (read_live_stack(slot, self.stack)? == b.ip).then_some(b.function)
        }

        /// Keeps what a walk saw.
        fn learn(&mut self, w: &Walked) {
            if w.outermost != self.bottom.function {
                self.bottom.cannot_catch = None;
            }
            self.bottom.function = w.outermost;
            self.bottom.sp = w.sp;
            self.bottom.ip = w.ip;
            if KEEPS_WALK && !self.stack_read {
                self.stack_read = true;
                self.stack = stack_bounds().unwrap_or((0, 0));
            }
        }

        /// A new exception: the oldest is forgotten when the stack is full
        /// (an exception whose first pass ended without a callback saying
        /// so, e.g. one crossing a native frame, stays until then).
        fn push(&mut self, p: Pending) {
            if self.depth == MAX_PENDING {
                self.pending.copy_within(1.., 0);
                self.depth -= 1;
            }
            self.pending[self.depth] = p;
            self.depth += 1;
        }

        /// `ExceptionSearchFunctionEnter(f)`: counts the frame for the
        /// innermost exception; whether `f` is that exception's outermost
        /// function.
        fn enter(&mut self, f: usize) -> bool {
            // An exception caught without the catching frame's leave
            // (not observed) ends here.
            while self.top().is_some_and(|p| p.caught) {
                self.pop();
            }
            match self.top() {
                Some(top) => {
                    top.searched += 1;
                    f != 0 && f == top.outermost
                }
                None => false,
            }
        }

        /// `ExceptionSearchCatcherFound`: the innermost exception is
        /// handled; it is forgotten at the catching frame's leave, which
        /// the runtime sends next (so that leave is not taken for a frame
        /// of an exception this one is nested in, e.g. one whose filter
        /// threw and caught it).
        fn caught(&mut self) {
            if let Some(top) = self.top() {
                top.caught = true;
            }
        }

        /// `ExceptionSearchFunctionLeave`: the function of the frame left,
        /// when it is the innermost exception's outermost function and may
        /// have caught (to decide there); forgets an exception whose
        /// catching frame this is.
        fn leave(&mut self) -> Option<usize> {
            let top = self.top()?;
            if top.caught {
                self.pop();
                return None;
            }
            core::mem::take(&mut top.in_outermost).then_some(top.outermost)
        }

        fn pop(&mut self) {
            self.depth = self.depth.saturating_sub(1);
        }

        fn top(&mut self) -> Option<&mut Pending> {
            self.depth
                .checked_sub(1)
                .and_then(|i| self.pending.get_mut(i))
        }
    }

    thread_local! {
        // reentrancy: exception-watch
        static THREAD: RefCell<ThreadWatch> = const { RefCell::new(ThreadWatch::NEW) };
    }

    /// Runs `f` on this thread's state; `None` while it is borrowed (a
    /// callback re-entered) or gone (the thread is ending).
    fn with_thread<R>(f: impl FnOnce(&mut ThreadWatch) -> R) -> Option<R> {
        THREAD
            .try_with(|t| t.try_borrow_mut().ok().map(|mut t| f(&mut t)))
            .ok()
            .flatten()
    }

    /// What a walk of the calling thread saw.
    struct Walked {
        /// Managed frames.
        frames: usize,
        /// The outermost one: its function, stack pointer (0 when unknown)
        /// and instruction pointer.
        outermost: usize,
        sp: usize,
        ip: usize,
    }

    /// Walks the calling thread's stack (a synchronous snapshot) at `when`
    /// (for the log); `None` when the walk failed or found no managed frame.
    fn walk(info: &ProfilerInfo, when: &str) -> Option<Walked> {
        let mut w = Walked {
            frames: 0,
            outermost: 0,
            sp: 0,
            ip: 0,
        };
        let options = WalkOptions {
            register_context: KEEPS_WALK,
        };
        let walked = info.walk_current_thread(options, |frame| {
            let f = frame.raw_function().0;
            if f != 0 {
                w.frames += 1;
                w.outermost = f;
                w.ip = frame.ip;
                w.sp = frame.context.and_then(context_sp).unwrap_or(0);
            }
            Walk::Continue
        });
        log::debug!(
            "unhandled-exception watch: walked at {when}: {} managed frames, outermost {:#x} ({:?})",
            w.frames,
            w.outermost,
            walked
        );
        (walked.is_ok() && w.frames > 0).then_some(w)
    }

    /// The stack pointer in a frame's register context (a platform
    /// `CONTEXT`; on x86-64 Windows and the runtime's PAL alike, `Rsp` at
    /// offset 0x98).
    fn context_sp(context: &[u8]) -> Option<usize> {
        if !KEEPS_WALK {
            return None;
        }
        const RSP: usize = 0x98;
        let bytes = context.get(RSP..RSP + core::mem::size_of::<usize>())?;
        Some(usize::from_ne_bytes(bytes.try_into().ok()?))
    }

    /// `ExceptionThrown` on this thread.
    pub(crate) fn thrown(info: &ProfilerInfo) {
        // The common case: the kept walk still holds.
        let kept = with_thread(|t| match t.bottom_in_place() {
            Some(outermost) => {
                t.push(Pending {
                    outermost,
                    ..Pending::NONE
                });
                true
            }
            None => false,
        });
        if kept == Some(false) {
            thrown_walk(info);
        }
    }

    /// `ExceptionThrown` without a kept walk to rely on: walks.
    #[cold]
    #[inline(never)]
    fn thrown_walk(info: &ProfilerInfo) {
        let pending = match walk(info, "ExceptionThrown") {
            Some(w) => {
                with_thread(|t| t.learn(&w));
                Pending {
                    outermost: w.outermost,
                    frames: w.frames,
                    ..Pending::NONE
                }
            }
            // Still tracked, so that its search does not count for an
            // exception it is nested in; it decides nothing.
            None => Pending::NONE,
        };
        with_thread(|t| t.push(pending));
    }

    /// `ExceptionSearchFunctionEnter(function)` on this thread; `true` when
    /// the exception is unhandled (the function is the thread's outermost
    /// frame, and no exception can stop there).
    pub(crate) fn search_enter(info: &ProfilerInfo, function: FunctionId<'_>) -> bool {
        let f = function.as_sys();
        // The common cases, in one visit of the thread's state: a frame
        // above the outermost function, or a frame of it that may catch
        // (known from an earlier exception; decided at its leave).
        let slow = with_thread(|t| {
            if !t.enter(f) {
                return false;
            }
            if t.bottom.function == f && t.bottom.cannot_catch == Some(false) {
                if let Some(top) = t.top() {
                    top.in_outermost = true;
                }
                return false;
            }
            true
        });
        slow == Some(true) && entered_outermost(info, function)
    }

    /// The search entered a frame of the thread's outermost function.
    #[cold]
    #[inline(never)]
    fn entered_outermost(info: &ProfilerInfo, function: FunctionId<'_>) -> bool {
        let f = function.as_sys();
        let known = with_thread(|t| (t.bottom.function == f).then_some(t.bottom.cannot_catch))
            .flatten()
            .flatten();
        let cannot = known.unwrap_or_else(|| {
            let c = cannot_catch(info, function);
            log::debug!(
                "unhandled-exception watch: a search entered the outermost function {f:#x} ({}), which {}",
                info.function_name(function)
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
                if c { "cannot catch" } else { "may catch" }
            );
            with_thread(|t| {
                if t.bottom.function == f {
                    t.bottom.cannot_catch = Some(c);
                }
            });
            c
        });
        if !cannot {
            with_thread(|t| {
                if let Some(top) = t.top() {
                    top.in_outermost = true;
                }
            });
            return false;
        }
        at_outermost(info, f)
    }

    /// `ExceptionSearchFunctionLeave` on this thread; `true` when the
    /// search leaves the thread's outermost frame with no catcher found.
    pub(crate) fn search_leave(info: &ProfilerInfo) -> bool {
        let left = with_thread(ThreadWatch::leave).flatten();
        match left {
            Some(f) => at_outermost(info, f),
            None => false,
        }
    }

    /// Whether the frame of `f` that the search of this thread's innermost
    /// exception is in is the thread's outermost managed frame: the search
    /// has entered as many frames as a walk during this exception counts,
    /// and that walk ends in `f`. Walks now when the exception relied on
    /// the kept walk. `true` also forgets the exception (it is unhandled).
    #[cold]
    #[inline(never)]
    fn at_outermost(info: &ProfilerInfo, f: usize) -> bool {
        let Some((frames, searched)) =
            with_thread(|t| t.top().map(|p| (p.frames, p.searched))).flatten()
        else {
            return false;
        };
        let frames = if frames != 0 {
            frames
        } else {
            let Some(w) = walk(info, "the outermost function's search") else {
                return false;
            };
            let n = w.frames;
            let outermost = w.outermost;
            with_thread(|t| {
                t.learn(&w);
                if let Some(top) = t.top() {
                    top.frames = n;
                    top.outermost = outermost;
                }
            });
            if outermost != f {
                return false;
            }
            n
        };
        let unhandled = searched >= frames;
        if unhandled {
            with_thread(ThreadWatch::pop);
        }
        unhandled
    }

    /// Whether no exception stops in `function`, the thread's outermost
    /// managed frame: it has no `catch` and no `filter` clause in its IL, or
    /// it is one of the runtime's own `[UnmanagedCallersOnly]` entry points
    /// in `System.Private.CoreLib` (see the module docs). `false` when that
    /// cannot be read (a dynamic method, a method without IL): the search's
    /// leave decides.
    fn cannot_catch(info: &ProfilerInfo, function: FunctionId<'_>) -> bool {
        use crate::il::body::{ClauseKind, MethodBody};
        use crate::info::MetaDataOpen;
        let Ok(where_) = info.function_info(function) else {
            return false;
        };
        let runtime_entry = info
            .module_info(where_.module)
            .is_ok_and(|m| m.name.ends_with("System.Private.CoreLib.dll"))
            && info
                .module_metadata(where_.module, MetaDataOpen::Read)
                .and_then(|md| {
                    md.custom_attribute(
                        crate::ids::MdToken(where_.token.0),
                        "System.Runtime.InteropServices.UnmanagedCallersOnlyAttribute",
                    )
                })
                .is_ok_and(|a| a.is_some());
        if runtime_entry {
            return true;
        }
        let Ok(il) = info.il_function_body(where_.module, where_.token) else {
            return false;
        };
        match MethodBody::parse(il) {
            Ok(body) => !body
                .clauses
                .iter()
                .any(|c| matches!(c.kind, ClauseKind::Catch(_) | ClauseKind::Filter(_))),
            Err(_) => false,
        }
    }

    /// `ExceptionSearchCatcherFound` on this thread: the innermost pending
    /// exception is handled.
    pub(crate) fn catcher_found() {
        with_thread(ThreadWatch::caught);
    }

    /// The word at `slot` of the calling thread's own stack `[low, high)`,
    /// when `slot` lies in its live part: above this function's own frame
    /// (so in the frame of a function that has not returned) and below the
    /// stack's base. `None` otherwise (and on a thread running on another
    /// stack than the one the system gave it).
    #[inline(never)]
    fn read_live_stack(slot: usize, (low, high): (usize, usize)) -> Option<usize> {
        let marker = 0u8;
        let here = core::hint::black_box(&marker) as *const u8 as usize;
        let size = core::mem::size_of::<usize>();
        let live = low <= here && here < slot && slot.checked_add(size)? <= high;
        if !live || slot % core::mem::align_of::<usize>() != 0 {
            return None;
        }
        // SAFETY: [own-stack] `slot` is aligned and lies between this
        // function's own frame and the base of the calling thread's stack
        // (both checked above), in frames that have not returned: mapped,
        // readable, and written only by this thread, which is here.
        Some(unsafe { core::ptr::read_volatile(slot as *const usize) })
    }

    /// The calling thread's stack, `[low, high)`, as the system reports it.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn stack_bounds() -> Option<(usize, usize)> {
        // SAFETY: [ffi-abi] pthread_attr_t is a plain C struct; the call below initialises it.
        let mut attr: libc::pthread_attr_t = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] the calling thread's own attributes into a local,
        // destroyed below.
        if unsafe { libc::pthread_getattr_np(libc::pthread_self(), &mut attr) } != 0 {
            return None;
        }
        let mut addr: *mut core::ffi::c_void = core::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: [os-api] `attr` was initialised by pthread_getattr_np; out pointers are locals.
        let got = unsafe { libc::pthread_attr_getstack(&attr, &mut addr, &mut size) };
        // SAFETY: [os-api] destroys the attributes initialised above, once.
        unsafe { libc::pthread_attr_destroy(&mut attr) };
        let low = addr as usize;
        (got == 0 && size != 0).then_some((low, low.checked_add(size)?))
    }

    /// The calling thread's stack, `[low, high)`, as the system reports it
    /// (`GetCurrentThreadStackLimits`, Windows 8 and later, looked up at run
    /// time so that the library still loads on Windows 7, which .NET Core
    /// 3.1 supports; there `None`, and the watch walks at every throw).
    #[cfg(all(target_arch = "x86_64", windows))]
    fn stack_bounds() -> Option<(usize, usize)> {
        use core::ffi::c_void;
        type Limits = unsafe extern "system" fn(*mut usize, *mut usize);
        #[link(name = "kernel32")]
        extern "system" {
            fn GetModuleHandleW(name: *const u16) -> *mut c_void;
            fn GetProcAddress(module: *mut c_void, name: *const u8) -> *mut c_void;
        }
        let kernel32: Vec<u16> = "kernel32.dll\0".encode_utf16().collect();
        // SAFETY: [os-api, nul-terminated] a NUL-terminated UTF-16 name; kernel32 is
        // loaded in every process and the handle is not owned (nothing to close).
        let module = unsafe { GetModuleHandleW(kernel32.as_ptr()) };
        if module.is_null() {
            return None;
        }
        // SAFETY: [os-api, nul-terminated] a module handle from above and a NUL-terminated name.
        let f = unsafe { GetProcAddress(module, c"GetCurrentThreadStackLimits".as_ptr().cast()) };
        if f.is_null() {
            return None;
        }
        // SAFETY: [os-api] GetCurrentThreadStackLimits is declared
        // `VOID WINAPI GetCurrentThreadStackLimits(PULONG_PTR, PULONG_PTR)`.
        let limits: Limits = unsafe { core::mem::transmute::<*mut c_void, Limits>(f) };
        let (mut low, mut high) = (0usize, 0usize);
        // SAFETY: [os-api] the function looked up above, with two out pointers to locals.
        unsafe { limits(&mut low, &mut high) };
        (low < high).then_some((low, high))
    }

    #[cfg(not(all(target_arch = "x86_64", any(target_os = "linux", windows))))]
    fn stack_bounds() -> Option<(usize, usize)> {
        None
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A caller's local, read back through [`read_live_stack`] from a
        /// function it calls; an address below the reader's frame, or
        /// outside the stack, is refused.
        #[test]
        fn own_stack_reads_a_callers_live_frame_only() {
            #[inline(never)]
            fn read_from_callee(slot: usize, stack: (usize, usize)) -> Option<usize> {
                core::hint::black_box(read_live_stack(slot, stack))
            }
            let Some(stack) = stack_bounds() else {
                // No bounds here (another architecture): nothing is read.
                assert!(!core::hint::black_box(KEEPS_WALK));
                assert_eq!(read_live_stack(0x1000, (0, 0)), None);
                return;
            };
            let word: usize = 0x5eed_1234;
            let slot = core::hint::black_box(&word) as *const usize as usize;
            assert_eq!(read_from_callee(slot, stack), Some(0x5eed_1234));
            // Outside the stack, or with no bounds: refused.
            assert_eq!(read_from_callee(slot, (0, 0)), None);
            assert_eq!(read_from_callee(stack.1, stack), None);
            // Unaligned: refused.
            assert_eq!(read_from_callee(slot + 1, stack), None);
            // Below the reader's own frame (a dead frame): refused.
            assert_eq!(read_from_callee(stack.0 + 64, stack), None);
        }

        /// An exception thrown and caught inside a filter, during another
        /// exception's first pass: its catching frame's leave ends it and
        /// is not taken for a frame of the outer exception, whose count
        /// and outermost-frame decision carry on.
        #[test]
        fn a_nested_exception_caught_in_a_filter_leaves_the_outer_intact() {
            const MAIN: usize = 0x10;
            const ROUND: usize = 0x20;
            const FILTER: usize = 0x30;
            let mut t = ThreadWatch::NEW;
            t.push(Pending {
                outermost: MAIN,
                ..Pending::NONE
            });
            // The outer search: Round, whose filter runs...
            assert!(!t.enter(ROUND));
            // ...and throws: the inner exception, caught in the filter.
            t.push(Pending {
                outermost: MAIN,
                ..Pending::NONE
            });
            assert!(!t.enter(FILTER));
            t.caught();
            assert_eq!(t.leave(), None);
            assert_eq!(t.depth, 1);
            // The outer search goes on: Round's leave, then Main.
            assert_eq!(t.leave(), None);
            assert!(t.enter(MAIN));
            assert_eq!(t.top().map(|p| p.searched), Some(2));
            // Main may catch: decided at its leave.
            if let Some(top) = t.top() {
                top.in_outermost = true;
            }
            assert_eq!(t.leave(), Some(MAIN));
            // A leave is taken once.
            assert_eq!(t.leave(), None);
        }

        /// The nesting bound forgets the oldest exception, never the newest.
        #[test]
        fn a_full_pending_stack_forgets_the_oldest() {
            let mut t = ThreadWatch::NEW;
            for i in 1..=MAX_PENDING + 3 {
                t.push(Pending {
                    outermost: i,
                    ..Pending::NONE
                });
            }
            assert_eq!(t.depth, MAX_PENDING);
            assert_eq!(t.top().map(|p| p.outermost), Some(MAX_PENDING + 3));
            assert_eq!(t.pending[0].outermost, 4);
        }
    }
}

static INSTALL: Once = Once::new();
static PIN: Once = Once::new();

/// Keeps this library loaded until the process ends (once per process).
///
/// The runtime unloads the profiler library (`FreeLibrary`, a `dlclose` on
/// Unix) in `EEToProfInterfaceImpl`'s destructor (eetoprofinterfaceimpl.cpp)
/// after a detach *and* after `CreateInstance` or `Initialize` failed or
/// declined, whatever threads of the profiler still run its code: a thread
/// the profiler started (with a [`RuntimeHandle`](crate::RuntimeHandle) or
/// not) would then execute unmapped memory. The SDK therefore pins the
/// library before any profiler code runs (`CreateInstance`, `Initialize`,
/// `InitializeForAttach`), and such threads keep running; their calls into
/// the runtime answer [`Error::Detached`](crate::error::Error::Detached).
pub(crate) fn pin_library() {
    PIN.call_once(platform::pin_library);
}

/// Installs the process hooks once: keeps the library loaded for the rest of
/// the process (the hooks point into it), registers the exit handler, and the
/// signal handlers (Unix) or top-level exception filter (Windows).
pub(crate) fn install() {
    INSTALL.call_once(|| {
        pin_library();
        platform::install_exit_handler();
        platform::install_signal_handlers();
    });
}

extern "C" fn at_exit() {
    crate::guard::guard("atexit", (), || finish_process("process exit"));
}

#[cfg(unix)]
mod signals;

#[cfg(unix)]
mod platform {
    use core::ffi::c_void;

    fn anchor() {}

    /// Keeps this library loaded until the process ends: the exit handler and
    /// the signal handlers point into it, and a runtime unloads a detached
    /// profiler (`dlclose`). `dlopen(RTLD_NOLOAD | RTLD_NODELETE)` marks the
    /// already loaded object as never to be unloaded.
    pub fn pin_library() {
        // SAFETY: [ffi-abi] Dl_info is a plain C struct, valid when zeroed.
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] an address inside this library and a valid out struct.
        if unsafe { libc::dladdr(anchor as *const c_void, &mut info) } == 0
            || info.dli_fname.is_null()
        {
            return;
        }
        // SAFETY: [os-api, nul-terminated, library-pinned] a NUL-terminated path owned by the loader; RTLD_NOLOAD
        // loads nothing new, RTLD_NODELETE only pins what is loaded.
        unsafe {
            libc::dlopen(
                info.dli_fname,
                libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
            )
        };
    }

    pub fn install_exit_handler() {
        // SAFETY: [os-api, library-pinned] registers a function of this (pinned) library with the C
        // library's exit handlers; it runs at `exit()` on the exiting thread.
        if unsafe { libc::atexit(super::at_exit) } != 0 {
            log::warn!("atexit failed: finishing at process exit will not run");
        }
    }

    pub fn install_signal_handlers() {
        super::signals::install();
    }
}

#[cfg(windows)]
mod platform {
    use core::ffi::c_void;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const GET_MODULE_HANDLE_EX_FLAG_PIN: u32 = 0x1;
    const GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS: u32 = 0x4;
    const EXCEPTION_CONTINUE_SEARCH: i32 = 0;

    type Filter = unsafe extern "system" fn(*mut c_void) -> i32;

    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleExW(flags: u32, address: *const c_void, module: *mut *mut c_void) -> i32;
        fn SetUnhandledExceptionFilter(filter: Option<Filter>) -> Option<Filter>;
    }

    fn anchor() {}

    /// Pins this DLL until the process ends (`GET_MODULE_HANDLE_EX_FLAG_PIN`):
    /// the exit handler and the exception filter point into it.
    pub fn pin_library() {
        let mut h: *mut c_void = core::ptr::null_mut();
        // SAFETY: [os-api] an address inside this module; valid out pointer.
        unsafe {
            GetModuleHandleExW(
                GET_MODULE_HANDLE_EX_FLAG_PIN | GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
                anchor as *const c_void,
                &mut h,
            )
        };
    }

    extern "C" {
        /// The C runtime's `atexit`; in a DLL it adds to the DLL's own table.
        fn atexit(f: extern "C" fn()) -> i32;
    }

    pub fn install_exit_handler() {
        // SAFETY: [os-api, library-pinned] the CRT of a DLL keeps its own exit-handler table and runs
        // it at DLL_PROCESS_DETACH (ExitProcess, and the end of a process
        // whose host never shuts the runtime down); the function lives in
        // this pinned DLL.
        if unsafe { atexit(super::at_exit) } != 0 {
            log::warn!("atexit failed: finishing at process exit will not run");
        }
    }

    static PREVIOUS_FILTER: AtomicUsize = AtomicUsize::new(0);

    /// The top-level exception filter: an exception no frame handled (an
    /// unhandled managed exception included) is about to end the process.
    unsafe extern "system" fn on_unhandled(pointers: *mut c_void) -> i32 {
        crate::guard::guard("unhandled exception filter", (), || {
            super::finish_process("unhandled exception")
        });
        let previous = PREVIOUS_FILTER.load(Ordering::Acquire);
        if previous == 0 {
            return EXCEPTION_CONTINUE_SEARCH;
        }
        // SAFETY: [os-api, ffi-abi] the value was returned by SetUnhandledExceptionFilter as the
        // previous filter, a function of that signature; it is called with
        // the arguments the system gave us, as it would have been without us.
        unsafe {
            let f: Filter = core::mem::transmute(previous);
            f(pointers)
        }
    }

    pub fn install_signal_handlers() {
        // SAFETY: [os-api, library-pinned] installs a filter of this pinned DLL and keeps the previous
        // one to pass on to.
        let previous = unsafe { SetUnhandledExceptionFilter(Some(on_unhandled)) };
        PREVIOUS_FILTER.store(previous.map_or(0, |f| f as usize), Ordering::Release);
    }
}

#[cfg(not(any(unix, windows)))]
mod platform {
    pub fn pin_library() {}
    pub fn install_exit_handler() {}
    pub fn install_signal_handlers() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counter(AtomicUsize);
    impl Flush for Counter {
        fn flush(&self, _last: bool) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[derive(Default)]
    struct Finishing {
        finished: AtomicUsize,
    }
    impl crate::callback::Profiler for Finishing {
        fn initialize(
            &self,
            _info: &crate::info::ProfilerInfo,
        ) -> crate::error::Result<crate::event_mask::EventMasks> {
            Ok(crate::event_mask::EventMask::empty().into())
        }
        fn finish(&self) {
            self.finished.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn finish_runs_exactly_once_whatever_calls_it() {
        let p = Finishing::default();
        // SAFETY: [local-memory] `p` outlives the registration, released below.
        let f = unsafe { ProfilerFinish::register(&p) };
        f.finish("Shutdown");
        f.finish("ProfilerDetachSucceeded");
        finish_process("test exit");
        f.release();
        assert_eq!(p.finished.load(Ordering::SeqCst), 1);

        // Released without a finishing point: finishes then, once; a
        // process exit afterwards no longer sees it.
        let q = Finishing::default();
        // SAFETY: [local-memory] as above.
        let g = unsafe { ProfilerFinish::register(&q) };
        g.release();
        finish_process("test exit");
        assert_eq!(q.finished.load(Ordering::SeqCst), 1);

        // Racing finishing points on several threads: still once.
        let r = Arc::new(Finishing::default());
        // SAFETY: [local-memory] `r` is kept alive by this test until after `release`.
        let h = Arc::new(unsafe { ProfilerFinish::register(&*r) });
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let h = h.clone();
                std::thread::spawn(move || {
                    if i % 2 == 0 {
                        h.finish("Shutdown");
                    } else {
                        finish_process("test exit");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        h.release();
        assert_eq!(r.finished.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn dropped_writers_are_skipped_and_live_ones_flushed() {
        let live: Arc<dyn Flush> = Arc::new(Counter(AtomicUsize::new(0)));
        let gone: Arc<dyn Flush> = Arc::new(Counter(AtomicUsize::new(0)));
        register_flush(Arc::downgrade(&live));
        register_flush(Arc::downgrade(&gone));
        drop(gone);
        flush_all(false);
        finish_process("test");
        // Other tests may flush too, so at least the two calls here.
        let c = Arc::as_ptr(&live) as *const Counter;
        // SAFETY: [local-memory] `live` is a Counter behind the trait object.
        assert!(unsafe { &*c }.0.load(Ordering::SeqCst) >= 2);
    }
}
