//! Finishing on SIGINT and SIGTERM (Unix), outside the signal handler.
//!
//! A signal handler runs on whichever thread the kernel picks, interrupting
//! it at any instruction: inside `malloc`, inside a lock, inside the
//! profiler's own `ObjectAllocated`. Code it runs must therefore be
//! async-signal-safe: no user code, no allocation, no lock. `finish` is
//! none of that (it is the profiler's own code, and it formats and writes),
//! so the handler here does not run it. The fourth review showed why: a
//! profiler whose `ObjectAllocated` holds its own `Mutex` and whose
//! `finish` takes it hung on Ctrl-C, on every run on .NET 10 and in about
//! one run of two on .NET 8 (`tests/runtime/signals.rs`).
//!
//! How a signal is handled:
//!
//! 1. **The handler** ([`on_signal`]) decides, from atomics only, whether
//!    this signal is the one to finish for: a SIGINT, a SIGTERM that nobody
//!    handled before us or that .NET 10 and later no longer turn into an
//!    orderly exit (see [`super`]), in a process whose finisher thread
//!    exists (a child forked without `exec` has the handler but not the
//!    thread), while no finishing is under way. If so it copies the
//!    signal's `siginfo`, stores the signal number and wakes the finisher
//!    thread (a futex wake on Linux: one system call), and returns: the
//!    interrupted thread goes on and releases whatever it held. Any other
//!    signal, among them a second Ctrl-C while `finish` runs, is passed on
//!    at once, exactly as without the profiler ([`pass_on`]).
//! 2. **The finisher thread** (`clrprof-signals`, started before the
//!    handlers are installed, so no signal can come before it exists; a
//!    signal that comes before it first waits is found in the futex word;
//!    it blocks every signal, so none meant for the process lands on it)
//!    runs [`finish_process`](super::finish_process) on a worker thread and
//!    waits for it at most [`signal_finish_wait`](super::signal_finish_wait) (10 s unless
//!    [`set_signal_finish_wait`](super::set_signal_finish_wait) says otherwise): a `finish` that never
//!    returns delays the signal, it does not swallow it.
//! 3. **Then it sends the same signal again, to itself**, with the
//!    original `siginfo` (`rt_tgsigqueueinfo`: sender and code unchanged),
//!    marked as passing, and unblocks it: the handler, on the finisher
//!    thread now and in a real signal context, passes it
//!    on to the disposition that was installed before ours (the runtime's
//!    handler, which restores the default and sends the signal again;
//!    another handler; or the default action, which the handler restores
//!    and raises). So the process ends as it would have without us: killed
//!    by the signal, or (SIGTERM before .NET 10, a host's own handler) as
//!    that handler decides. Should the process go on (a host that handles
//!    Ctrl-C itself, like CPython), the next signal finishes again (the
//!    profilers' `finish` ran once; the writers are flushed again).
//!
//! The finisher thread is a plain thread of the library, unknown to
//! [`crate::thread`] (so it does not keep a detach from being requested);
//! its code stays mapped because the library is pinned before anything is
//! installed ([`super::pin_library`]), the same rule the handlers and the
//! exit handler rely on.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use super::signal_finish_wait;

/// No finishing under way: the next signal that ends the process is
/// handed to the finisher thread.
const IDLE: u32 = 0;
/// The finisher thread has a signal: every further one is passed on at once.
const FINISHING: u32 = 1;
/// The finisher thread has finished and sends the signal again: the
/// handler passes it (and every other) on.
const PASSING: u32 = 2;

static STATE: AtomicU32 = AtomicU32::new(IDLE);

/// The futex word: the signal the finisher thread is to finish for (0: none).
static SIGNAL: AtomicU32 = AtomicU32::new(0);

/// Signals the handler passed on while [`PASSING`].
static PASSED: AtomicU32 = AtomicU32::new(0);

/// The process whose finisher thread runs (0 before it is started).
static FINISHER_PID: AtomicI32 = AtomicI32::new(0);

/// The `siginfo` of the signal handed over, written by the handler that
/// won [`IDLE`] → [`FINISHING`] and read by the finisher thread after it
/// saw [`SIGNAL`]; written again only after [`STATE`] is back at [`IDLE`].
struct InfoSlot(UnsafeCell<MaybeUninit<libc::siginfo_t>>);

// SAFETY: [local-memory] the slot has one writer at a time and its reader runs after the
// writer's release store of `SIGNAL` (see the type's docs): the state machine
// orders every access.
unsafe impl Sync for InfoSlot {}

static INFO: InfoSlot = InfoSlot(UnsafeCell::new(MaybeUninit::uninit()));

/// Whether [`INFO`] holds the handed-over signal's `siginfo` (the kernel
/// always gives one to an `SA_SIGINFO` handler; a direct call may not).
static HAS_INFO: AtomicBool = AtomicBool::new(false);

static PREVIOUS_SIGINT: OnceLock<libc::sigaction> = OnceLock::new();
static PREVIOUS_SIGTERM: OnceLock<libc::sigaction> = OnceLock::new();

/// The disposition installed before ours.
// signal-context: async-signal-safe
fn previous(sig: i32) -> Option<&'static libc::sigaction> {
    // `OnceLock::get` is an atomic load; both are set before the handler is
    // installed.
    match sig {
        libc::SIGINT => OnceLock::get(&PREVIOUS_SIGINT),
        libc::SIGTERM => OnceLock::get(&PREVIOUS_SIGTERM),
        _ => None,
    }
}

// signal-context: async-signal-safe
fn is_default(a: &libc::sigaction) -> bool {
    a.sa_flags & libc::SA_SIGINFO == 0 && a.sa_sigaction == libc::SIG_DFL
}

// signal-context: async-signal-safe
fn is_ignored(a: &libc::sigaction) -> bool {
    a.sa_flags & libc::SA_SIGINFO == 0 && a.sa_sigaction == libc::SIG_IGN
}

/// What the handler does with a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Hand it to the finisher thread and return.
    HandOver,
    /// Pass it on to the previous disposition now.
    PassOn,
}

/// Decides for a signal: hand it over when it is one to finish for
/// (`finish_first`), the finisher thread runs in this process
/// (`finisher_here`), and no finishing is under way (`state` goes from
/// [`IDLE`] to [`FINISHING`], so exactly one signal wins); else pass it on.
// signal-context: async-signal-safe
fn decide(finish_first: bool, finisher_here: bool, state: &AtomicU32) -> Action {
    if finish_first
        && finisher_here
        && state
            .compare_exchange(IDLE, FINISHING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        Action::HandOver
    } else {
        Action::PassOn
    }
}

/// SIGINT and SIGTERM: hand the signal to the finisher thread, or pass it
/// on (see the module docs). Keeps `errno`.
// signal-context: handler
extern "C" fn on_signal(sig: i32, info: *mut libc::siginfo_t, context: *mut c_void) {
    let saved = errno::get();
    if let Some(prev) = previous(sig) {
        // With a handler before ours, SIGTERM ends in an orderly exit on
        // .NET Core 3.1 to 9 (`Shutdown` finishes); SIGINT is sent again
        // with the default action by the runtime's handler; .NET 10 and
        // later leave SIGTERM to the app; with no handler before ours the
        // default action ends the process.
        let finish_first =
            sig == libc::SIGINT || is_default(prev) || super::sigterm_ends_without_shutdown();
        // SAFETY: [signal-handler, os-api] getpid is async-signal-safe (POSIX.1) and has no preconditions.
        let here = FINISHER_PID.load(Ordering::Acquire) == unsafe { libc::getpid() };
        match decide(finish_first, here, &STATE) {
            Action::HandOver => hand_over(sig, info),
            Action::PassOn => {
                if STATE.load(Ordering::Acquire) == PASSING {
                    PASSED.fetch_add(1, Ordering::AcqRel);
                }
                pass_on(sig, prev, info, context);
            }
        }
    }
    errno::set(saved);
}

/// Stores the signal and its `siginfo` for the finisher thread and wakes it.
// signal-context: async-signal-safe
fn hand_over(sig: i32, info: *mut libc::siginfo_t) {
    if info.is_null() {
        HAS_INFO.store(false, Ordering::Relaxed);
    } else {
        // SAFETY: [signal-handler, os-api, local-memory] the kernel's siginfo is readable for the handler's
        // duration; only the handler that moved STATE from IDLE writes the slot
        // (see `InfoSlot`).
        unsafe {
            core::ptr::write(
                UnsafeCell::get(&INFO.0).cast::<libc::siginfo_t>(),
                core::ptr::read(info),
            )
        };
        HAS_INFO.store(true, Ordering::Relaxed);
    }
    SIGNAL.store(sig as u32, Ordering::Release);
    wake::wake(&SIGNAL);
}

/// Passes the signal on to `prev`, as the signal would have reached it
/// without us: its handler is called with the kernel's arguments, and the
/// default action is restored and the signal raised again on this thread
/// (blocked until the handler returns, then the process dies of it).
// signal-context: async-signal-safe
fn pass_on(sig: i32, prev: &libc::sigaction, info: *mut libc::siginfo_t, context: *mut c_void) {
    if is_default(prev) {
        // SAFETY: [signal-handler, os-api] sigaction and raise are async-signal-safe (POSIX.1); `prev`
        // is a valid disposition read by sigaction itself.
        unsafe {
            libc::sigaction(sig, prev, core::ptr::null_mut());
            libc::raise(sig);
        }
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: [signal-handler, os-api, ffi-abi] the previous disposition is a three-argument handler
        // (SA_SIGINFO), called with the arguments the kernel gave us.
        let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut c_void) =
            unsafe { core::mem::transmute(prev.sa_sigaction) };
        // signal-context: foreign: the handler installed before ours (the runtime's, a host's), called as the kernel would have called it
        f(sig, info, context);
    } else if !is_ignored(prev) {
        // SAFETY: [signal-handler, os-api, ffi-abi] the previous disposition is a one-argument handler.
        let f: extern "C" fn(i32) = unsafe { core::mem::transmute(prev.sa_sigaction) };
        // signal-context: foreign: the handler installed before ours, called as the kernel would have called it
        f(sig);
    }
}

/// `errno`, which a signal handler must leave as it found it.
mod errno {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // signal-context: async-signal-safe
    fn location() -> *mut i32 {
        // SAFETY: [signal-handler, os-api] the C library's thread-local errno; async-signal-safe.
        unsafe { libc::__errno_location() }
    }

    #[cfg(any(target_vendor = "apple", target_os = "freebsd"))]
    // signal-context: async-signal-safe
    fn location() -> *mut i32 {
        // SAFETY: [signal-handler, os-api] the C library's thread-local errno; async-signal-safe.
        unsafe { libc::__error() }
    }

    #[cfg(not(any(
        target_os = "linux",
        target_os = "android",
        target_vendor = "apple",
        target_os = "freebsd"
    )))]
    // signal-context: async-signal-safe
    fn location() -> *mut i32 {
        core::ptr::null_mut()
    }

    // signal-context: async-signal-safe
    pub fn get() -> i32 {
        let p = location();
        if p.is_null() {
            0
        } else {
            // SAFETY: [signal-handler, os-api] a valid thread-local int of the C library.
            unsafe { core::ptr::read(p) }
        }
    }

    // signal-context: async-signal-safe
    pub fn set(v: i32) {
        let p = location();
        if !p.is_null() {
            // SAFETY: [signal-handler, os-api] a valid thread-local int of the C library.
            unsafe { core::ptr::write(p, v) }
        }
    }
}

/// Waking the finisher thread from a handler, and its wait.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod wake {
    use core::sync::atomic::{AtomicU32, Ordering};

    /// Wakes the thread waiting on `word` (a futex wake: one system call,
    /// async-signal-safe).
    // signal-context: async-signal-safe
    pub fn wake(word: &AtomicU32) {
        // SAFETY: [signal-handler, os-api] FUTEX_WAKE on an aligned u32 of this process; no memory is written.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            )
        };
    }

    /// Waits until `word` is not 0 and returns its value.
    pub fn wait(word: &AtomicU32) -> u32 {
        loop {
            let v = word.load(Ordering::Acquire);
            if v != 0 {
                return v;
            }
            // SAFETY: [os-api] FUTEX_WAIT on an aligned u32 of this process, expected 0,
            // no timeout; it returns at once when the word changed.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    word.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    0,
                    core::ptr::null::<libc::timespec>(),
                )
            };
        }
    }
}

/// Elsewhere (no futex): the finisher thread looks every 20 ms.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod wake {
    use core::sync::atomic::{AtomicU32, Ordering};

    // signal-context: async-signal-safe
    pub fn wake(_word: &AtomicU32) {}

    pub fn wait(word: &AtomicU32) -> u32 {
        loop {
            let v = word.load(Ordering::Acquire);
            if v != 0 {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Sends `sig` to the calling thread again, with the handed-over `siginfo`
/// where the system allows it (Linux: `rt_tgsigqueueinfo` to oneself keeps
/// the original sender and code), else plainly; then unblocks it for the
/// moment its handler runs (the finisher thread blocks every signal
/// otherwise, so it never takes one meant for the process).
fn resend(sig: i32) {
    let mut queued = false;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if HAS_INFO.load(Ordering::Relaxed) {
        // SAFETY: [local-memory] the handler wrote the slot before its release store of
        // SIGNAL, which this thread has read (`wake::wait`).
        let info: libc::siginfo_t =
            unsafe { core::ptr::read(UnsafeCell::get(&INFO.0).cast::<libc::siginfo_t>()) };
        // SAFETY: [os-api] a thread-directed signal to the calling thread with a siginfo of
        // this process's own signal (the kernel allows any code when the target is
        // the caller); getpid and gettid have no preconditions.
        queued = unsafe {
            let tid = libc::syscall(libc::SYS_gettid);
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                libc::getpid(),
                tid,
                sig,
                &info as *const libc::siginfo_t,
            )
        } == 0;
    }
    if !queued {
        // SAFETY: [os-api] raise sends the signal to the calling thread.
        unsafe { libc::raise(sig) };
    }
    // SAFETY: [os-api] a valid, initialised signal set; the pending signal is delivered
    // on the return from the first call, before the second blocks it again.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut());
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut());
    }
}

/// Runs `finish_process` on a worker thread and waits at most
/// [`signal_finish_wait`]. Logs nothing: a thread the wait gave up on may
/// hold the log's lock.
fn finish_bounded(sig: i32) -> bool {
    let reason = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::Builder::new()
        .name("clrprof-finish".into())
        .spawn(move || {
            crate::guard::guard("finishing on a signal", (), || {
                super::finish_process(reason)
            });
            let _ = done.send(());
        });
    match worker {
        Ok(_) => finished.recv_timeout(signal_finish_wait()).is_ok(),
        Err(_) => false,
    }
}

/// The finisher thread's loop (see the module docs).
fn finisher() {
    // Every signal meant for the process goes to another thread: a host
    // that blocks SIGINT everywhere and takes it with `sigwait` still gets
    // it (the workers started below inherit this mask).
    // SAFETY: [os-api] a valid, initialised (full) signal set for this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, core::ptr::null_mut());
    }
    loop {
        let sig = wake::wait(&SIGNAL) as i32;
        SIGNAL.store(0, Ordering::Relaxed);
        let finished = finish_bounded(sig);
        let before = PASSED.load(Ordering::Acquire);
        STATE.store(PASSING, Ordering::SeqCst);
        resend(sig);
        // Here only if the process goes on (a handler before ours that does
        // not end it). The signal sent to this thread was passed on when it
        // was unblocked; once it was, the next signal finishes again. If it
        // was not (a handler installed above ours since), every later signal
        // is passed on.
        if PASSED.load(Ordering::Acquire) != before {
            STATE.store(IDLE, Ordering::SeqCst);
        }
        if !finished {
            log::warn!(
                "finishing on signal {sig} did not end within {:?}: the signal was passed on",
                signal_finish_wait()
            );
        }
    }
}

/// Starts the finisher thread, then installs the handlers for SIGINT and
/// SIGTERM (a signal that is ignored stays ignored). Without the thread no
/// handler is installed: signals then act exactly as without the profiler,
/// and finishing runs only at `Shutdown` and process exit.
pub fn install() {
    match std::thread::Builder::new()
        .name("clrprof-signals".into())
        .spawn(finisher)
    {
        Ok(_) => {
            // SAFETY: [os-api] getpid has no preconditions.
            FINISHER_PID.store(unsafe { libc::getpid() }, Ordering::Release);
        }
        Err(e) => {
            log::warn!("cannot start the signal finisher thread ({e}): finishing on SIGINT/SIGTERM will not run");
            return;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_signal_is_handed_over_and_every_other_passed_on() {
        let state = AtomicU32::new(IDLE);
        // Not a signal to finish for, or no finisher here (a forked child):
        // passed on, and the state is untouched.
        assert_eq!(decide(false, true, &state), Action::PassOn);
        assert_eq!(decide(true, false, &state), Action::PassOn);
        assert_eq!(state.load(Ordering::Relaxed), IDLE);
        // The first one to finish for wins; a second one while finishing
        // (a second Ctrl-C) is passed on at once.
        assert_eq!(decide(true, true, &state), Action::HandOver);
        assert_eq!(state.load(Ordering::Relaxed), FINISHING);
        assert_eq!(decide(true, true, &state), Action::PassOn);
        // The finisher's own signal, sent again, is passed on.
        state.store(PASSING, Ordering::Relaxed);
        assert_eq!(decide(true, true, &state), Action::PassOn);
        // Back at IDLE (the process went on), the next one finishes again.
        state.store(IDLE, Ordering::Relaxed);
        assert_eq!(decide(true, true, &state), Action::HandOver);
    }

    #[test]
    fn racing_signals_hand_over_exactly_one() {
        let state = std::sync::Arc::new(AtomicU32::new(IDLE));
        let handed: usize = (0..8)
            .map(|_| {
                let s = state.clone();
                std::thread::spawn(move || decide(true, true, &s) == Action::HandOver)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum();
        assert_eq!(handed, 1);
    }

    #[test]
    fn errno_is_read_and_written_back() {
        let before = errno::get();
        errno::set(1234);
        assert_eq!(errno::get(), 1234);
        errno::set(before);
    }
}
