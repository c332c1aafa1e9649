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
//! | SIGTERM (Linux), .NET 10 and later | no orderly exit: the runtime no longer handles SIGTERM (dotnet/runtime PR 115494; the documented .NET 10 breaking change), and the process dies of the signal unless the app registered a handler (`PosixSignalRegistration`, or a host's such as `UseConsoleLifetime`) | the SIGTERM handler, which finishes, then passes the signal on (an app's own handler still runs, but what the app does after it is no longer recorded) |
//! | SIGINT / Ctrl-C (Linux) | the runtime's handler restores the previous disposition and sends the signal again: the process dies of it, no exit handlers | a SIGINT handler installed on top of the runtime's, which finishes and then calls it |
//! | a signal nobody handles | default action | the same handler, which finishes, restores the default and raises the signal again |
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
//! watch costs a stack walk per thrown exception; a profiler turns it off with
//! [`Profiler::watch_unhandled_exceptions`](crate::callback::Profiler::watch_unhandled_exceptions).
//!
//! [`Profiler::finish`]: crate::callback::Profiler::finish
//! [`Profiler::shutdown`]: crate::callback::Profiler::shutdown
//! [`Profiler::profiler_detach_succeeded`]: crate::callback::Profiler::profiler_detach_succeeded

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Once, Weak};
use std::time::Instant;

pub use crate::exiting::{lock_unless_exiting, lock_until, process_exiting, EXIT_WAIT};

/// The highest major version of CoreCLR seen initializing in this process
/// (0 before any): decides what SIGTERM means (see the module docs).
static RUNTIME_MAJOR: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// Notes a runtime of major version `major` (from `Initialize`).
pub(crate) fn note_runtime_major(major: u16) {
    RUNTIME_MAJOR.fetch_max(major, Ordering::Relaxed);
}

/// Whether a runtime in this process ends on SIGTERM without an orderly
/// exit: .NET 10 and later no longer handle the signal.
fn sigterm_ends_without_shutdown() -> bool {
    RUNTIME_MAJOR.load(Ordering::Relaxed) >= 10
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
/// the exception callbacks (see [`crate::component`]). Per thread: at
/// `ExceptionThrown` it counts the managed frames of the thread and notes the
/// outermost (a synchronous stack snapshot); the first pass then calls
/// `ExceptionSearchFunctionEnter`/`Leave` once per managed frame, innermost
/// first, and `ExceptionSearchCatcherFound` when a frame will catch. A search
/// that leaves the outermost frame, having searched as many frames as were
/// counted, with no catcher found, is an unhandled exception: on Linux
/// (3.1 and 8.0 observed) the runtime prints it and aborts right after,
/// with no further callback. An exception thrown during the first pass (in a
/// filter) is tracked on its own, innermost first.
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
pub(crate) mod unhandled {
    use crate::ids::{FunctionId, ObjectId};
    use crate::info::ProfilerInfo;

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
            if search_enter(function.as_sys()) && cannot_catch(info, function) {
                // The outermost frame cannot catch: unhandled (see above).
                let _ = PENDING.try_with(|p| {
                    if let Ok(mut p) = p.try_borrow_mut() {
                        p.pop();
                    }
                });
                super::unhandled_exception_seen();
            }
        }

        fn exception_search_function_leave(&self, _info: &ProfilerInfo) {
            search_leave();
        }

        fn exception_search_catcher_found(&self, _info: &ProfilerInfo, _function: FunctionId<'_>) {
            catcher_found();
        }
    }

    use crate::stackwalk::{Walk, WalkOptions};
    use std::cell::RefCell;

    struct Pending {
        /// Managed frames on the thread when it threw.
        frames: usize,
        /// The outermost of them (raw `FunctionID`).
        outermost: usize,
        /// Frames the first pass has searched so far, and the last one.
        searched: usize,
        last_searched: usize,
    }

    thread_local! {
        static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
    }

    /// `ExceptionThrown` on this thread.
    pub(crate) fn thrown(info: &ProfilerInfo) {
        let (mut frames, mut outermost) = (0usize, 0usize);
        let walked = info.walk_current_thread(WalkOptions::default(), |frame| {
            let f = frame.raw_function().0;
            if f != 0 {
                frames += 1;
                outermost = f;
            }
            Walk::Continue
        });
        if walked.is_err() || frames == 0 {
            return;
        }
        let _ = PENDING.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                // A thread's exceptions nest at most a few deep; keep it bounded.
                if p.len() < 16 {
                    p.push(Pending {
                        frames,
                        outermost,
                        searched: 0,
                        last_searched: 0,
                    });
                }
            }
        });
    }

    /// `ExceptionSearchFunctionEnter(function)` on this thread; `true` when
    /// the search has reached the thread's outermost managed frame.
    pub(crate) fn search_enter(function: usize) -> bool {
        PENDING
            .try_with(|p| match p.try_borrow_mut() {
                Ok(mut p) => match p.last_mut() {
                    Some(top) => {
                        top.searched += 1;
                        top.last_searched = function;
                        top.searched >= top.frames && function == top.outermost
                    }
                    None => false,
                },
                Err(_) => false,
            })
            .unwrap_or(false)
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
        let _ = PENDING.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                p.pop();
            }
        });
    }

    /// `ExceptionSearchFunctionLeave` on this thread.
    pub(crate) fn search_leave() {
        let unhandled = PENDING
            .try_with(|p| match p.try_borrow_mut() {
                Ok(mut p) => match p.last() {
                    // Both: as many frames searched as the thread had, and
                    // the one just left is its outermost.
                    Some(top)
                        if top.searched >= top.frames && top.last_searched == top.outermost =>
                    {
                        p.pop();
                        true
                    }
                    _ => false,
                },
                Err(_) => false,
            })
            .unwrap_or(false);
        if unhandled {
            super::unhandled_exception_seen();
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
mod platform {
    use core::ffi::c_void;
    use std::sync::OnceLock;

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

    static PREVIOUS_SIGINT: OnceLock<libc::sigaction> = OnceLock::new();
    static PREVIOUS_SIGTERM: OnceLock<libc::sigaction> = OnceLock::new();

    fn previous(sig: i32) -> Option<&'static libc::sigaction> {
        match sig {
            libc::SIGINT => PREVIOUS_SIGINT.get(),
            libc::SIGTERM => PREVIOUS_SIGTERM.get(),
            _ => None,
        }
    }

    fn is_default(a: &libc::sigaction) -> bool {
        a.sa_flags & libc::SA_SIGINFO == 0 && a.sa_sigaction == libc::SIG_DFL
    }

    fn is_ignored(a: &libc::sigaction) -> bool {
        a.sa_flags & libc::SA_SIGINFO == 0 && a.sa_sigaction == libc::SIG_IGN
    }

    /// SIGINT and SIGTERM: finish when the signal is going to end the process
    /// without the C library's exit handlers, then pass it on unchanged.
    extern "C" fn on_signal(sig: i32, info: *mut libc::siginfo_t, context: *mut c_void) {
        let Some(prev) = previous(sig) else {
            return;
        };
        // With a handler before ours, SIGTERM ends in an orderly exit on
        // .NET Core 3.1 to 9 (the runtime's handler: `Shutdown`, then the exit
        // handlers), while SIGINT is sent again with the default action (the
        // runtime's handler): finish now. .NET 10 and later leave SIGTERM to
        // the app: finish now too. With no handler before ours the default
        // action ends the process.
        if sig == libc::SIGINT || is_default(prev) || super::sigterm_ends_without_shutdown() {
            super::finish_process(if sig == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            });
        }
        if is_default(prev) {
            // SAFETY: [os-api] restoring the saved disposition and raising the signal
            // again on this thread: it stays blocked until this handler
            // returns, then takes its default action, so the process ends as
            // it would have without us (killed by the signal).
            unsafe {
                libc::sigaction(sig, prev, core::ptr::null_mut());
                libc::raise(sig);
            }
        } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: [os-api, ffi-abi] the previous disposition is a three-argument handler
            // (SA_SIGINFO), called with the arguments the kernel gave us,
            // as the signal would have called it without us.
            unsafe {
                let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut c_void) =
                    core::mem::transmute(prev.sa_sigaction);
                f(sig, info, context);
            }
        } else if !is_ignored(prev) {
            // SAFETY: [os-api, ffi-abi] the previous disposition is a one-argument handler.
            unsafe {
                let f: extern "C" fn(i32) = core::mem::transmute(prev.sa_sigaction);
                f(sig);
            }
        }
    }

    pub fn install_signal_handlers() {
        for (sig, slot) in [
            (libc::SIGINT, &PREVIOUS_SIGINT),
            (libc::SIGTERM, &PREVIOUS_SIGTERM),
        ] {
            // SAFETY: [ffi-abi] sigaction is a plain C struct, valid when zeroed.
            let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
            // SAFETY: [os-api] reads the current disposition into a valid out struct.
            if unsafe { libc::sigaction(sig, core::ptr::null(), &mut old) } != 0 {
                continue;
            }
            // An ignored signal ends nothing; leave it alone (a process that
            // ignores SIGINT, e.g. started in the background, keeps doing so).
            if is_ignored(&old) {
                continue;
            }
            // SAFETY: [ffi-abi] a zeroed sigaction, then filled in.
            let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
            let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut c_void) = on_signal;
            new.sa_sigaction = handler as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | (old.sa_flags & libc::SA_ONSTACK);
            // SAFETY: [os-api] valid mask pointer.
            unsafe { libc::sigemptyset(&mut new.sa_mask) };
            let _ = slot.set(old);
            // SAFETY: [os-api, library-pinned] installs a handler of this pinned library; the previous
            // disposition is saved above before the handler can run.
            if unsafe { libc::sigaction(sig, &new, core::ptr::null_mut()) } != 0 {
                log::warn!("sigaction({sig}) failed: finishing on that signal will not run");
            }
        }
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
