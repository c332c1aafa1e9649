//! Threads the profiler starts, known to the SDK.
//!
//! A profiler that detaches must not leave code of its library running: the
//! runtime unloads the library after `ProfilerDetachSucceeded`, and it only
//! waits for threads that are inside callbacks, not for the profiler's own
//! threads (profiling API docs, "Profiler Detach"). Threads started with
//! [`spawn`] are therefore
//!
//! - **registered** while their closure runs, so [`crate::detach`] can refuse
//!   to request a detach while any of them still works;
//! - **holding a reference to the profiler library** from before they start
//!   until after the last instruction of the library they execute, so a
//!   detach requested *from* such a thread (the usual way: a timer thread)
//!   cannot unload the code under it. The reference is dropped in a way that
//!   returns into the system's code, never into the library:
//!   on Unix, by a thread-specific-data destructor that *is* `dlclose`
//!   (the C library calls it after the thread's function returned and after
//!   the thread's Rust thread-local destructors ran); on Windows, with
//!   `FreeLibraryAndExitThread`, which never returns.
//!
//! Because the thread may end inside the system's exit path, its result is
//! handed over through [`ProfilerThread::join`] rather than
//! `std::thread::JoinHandle`.
//!
//! Threads started *after* a detach was requested (from a callback still
//! running, from `profiler_detach_succeeded`) and threads started with
//! `std::thread` are covered too: the SDK pins the library before any
//! profiler code runs (`crate::exit::pin_library`, at `CreateInstance` and
//! `Initialize`), so the runtime's `FreeLibrary` after the detach (or after
//! a failed `Initialize`) leaves their code mapped, and every call they make
//! through a kept [`RuntimeHandle`](crate::RuntimeHandle) answers
//! [`Error::Detached`](crate::error::Error::Detached) once the runtime let
//! the profiler go (see `crate::info` and its gate). The reference taken
//! here still matters where pinning is not possible (code linked into an
//! executable, a loader that refuses the pin).

use std::sync::{Arc, Condvar, Mutex};

/// A running or finished profiler thread.
pub struct ProfilerThread<T> {
    name: String,
    id: std::thread::ThreadId,
    result: Arc<(Mutex<Option<std::thread::Result<T>>>, Condvar)>,
}

impl<T> ProfilerThread<T> {
    /// The thread's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The thread's Rust id.
    pub fn id(&self) -> std::thread::ThreadId {
        self.id
    }

    /// `true` once the closure has returned (or panicked).
    pub fn is_finished(&self) -> bool {
        match self.result.0.lock() {
            Ok(r) => r.is_some(),
            Err(p) => p.into_inner().is_some(),
        }
    }

    /// Waits for the closure's result (`Err` with the panic payload if it
    /// panicked). The operating-system thread may still be in its exit path
    /// when this returns; it runs no more code of the library.
    pub fn join(self) -> std::thread::Result<T> {
        match self.wait(None) {
            Ok(r) => r,
            // Without a deadline the wait only returns with a result.
            Err(this) => this.join(),
        }
    }

    /// Waits at most `timeout` for the closure's result: `Ok(result)` when
    /// it finished, `Err(self)` (to wait again later) when it did not — for
    /// the process-exit path, where a thread may be stuck, or already ended
    /// by the system without finishing (Windows).
    pub fn join_timeout(
        self,
        timeout: std::time::Duration,
    ) -> Result<std::thread::Result<T>, Self> {
        self.wait(Some(std::time::Instant::now() + timeout))
    }

    fn wait(self, deadline: Option<std::time::Instant>) -> Result<std::thread::Result<T>, Self> {
        match self.take_result(deadline) {
            Some(r) => Ok(r),
            None => Err(self),
        }
    }

    /// The closure's result once it is there; `None` when `deadline` came
    /// first.
    fn take_result(&self, deadline: Option<std::time::Instant>) -> Option<std::thread::Result<T>> {
        let (lock, cv) = &*self.result;
        // With a deadline the lock too is waited for only until then: a
        // thread the system ended (at process exit) may hold it forever.
        let mut slot = match deadline {
            None => lock.lock().unwrap_or_else(|p| p.into_inner()),
            Some(deadline) => crate::exiting::lock_until(lock, deadline)?,
        };
        loop {
            if let Some(r) = slot.take() {
                return Some(r);
            }
            slot = match deadline {
                None => match cv.wait(slot) {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                },
                Some(deadline) => {
                    let now = std::time::Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    match cv.wait_timeout(slot, deadline - now) {
                        Ok((g, _)) => g,
                        Err(p) => p.into_inner().0,
                    }
                }
            };
        }
    }
}

/// Serialises the unit tests that spawn profiler threads or check the
/// registry (it is process-wide, and libtest runs tests in parallel).
#[cfg(test)]
pub(crate) static TEST_REGISTRY: Mutex<()> = Mutex::new(());

/// Profiler threads whose closure has not returned yet: (id, name).
static RUNNING: Mutex<Vec<(std::thread::ThreadId, String)>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<(std::thread::ThreadId, String)>> {
    match RUNNING.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Names of the profiler threads still running, except the calling thread.
pub fn running_except_current() -> Vec<String> {
    let me = std::thread::current().id();
    running()
        .iter()
        .filter(|(id, _)| *id != me)
        .map(|(_, name)| name.clone())
        .collect()
}

/// [`Error::ThreadsRunning`](crate::error::Error::ThreadsRunning) unless every
/// thread started with [`spawn`], other than the caller, has finished: the
/// rule every detach request checks.
pub(crate) fn ensure_no_other_threads() -> crate::error::Result<()> {
    let threads = running_except_current();
    if threads.is_empty() {
        Ok(())
    } else {
        Err(crate::error::Error::ThreadsRunning { threads })
    }
}

/// `true` if the calling thread was started with [`spawn`] and is still
/// running its closure.
pub fn is_profiler_thread() -> bool {
    let me = std::thread::current().id();
    running().iter().any(|(id, _)| *id == me)
}

/// Starts a profiler thread named `name` running `f`. See the module docs for
/// what the SDK does around it.
pub fn spawn<F, T>(name: &str, f: F) -> std::io::Result<ProfilerThread<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let library = library_ref::acquire();
    let result: Arc<(Mutex<Option<std::thread::Result<T>>>, Condvar)> =
        Arc::new((Mutex::new(None), Condvar::new()));
    let theirs = result.clone();
    // Registered before the thread exists, so a detach request made right
    // after `spawn` returns already sees it; the thread takes its own entry
    // out when its closure is done.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let owned_name = name.to_string();
    let handle = std::thread::Builder::new()
        .name(owned_name.clone())
        .spawn(move || {
            // Wait until the spawner has registered this thread's id.
            let _ = ready_rx.recv();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let me = std::thread::current().id();
            running().retain(|(id, _)| *id != me);
            {
                let (lock, cv) = &*theirs;
                match lock.lock() {
                    Ok(mut g) => *g = Some(outcome),
                    Err(p) => *p.into_inner() = Some(outcome),
                }
                cv.notify_all();
            }
            drop(theirs);
            library_ref::release_at_thread_exit(library);
        });
    let handle = match handle {
        Ok(h) => h,
        Err(e) => {
            library_ref::release_now(library);
            return Err(e);
        }
    };
    let id = handle.thread().id();
    running().push((id, owned_name.clone()));
    let _ = ready_tx.send(());
    // The OS thread is detached: it may end in the system's exit path
    // (Windows) where std's join bookkeeping is never completed.
    drop(handle);
    Ok(ProfilerThread {
        name: owned_name,
        id,
        result,
    })
}

#[cfg(unix)]
mod library_ref {
    use core::ffi::c_void;
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    use std::sync::OnceLock;

    /// An extra `dlopen` reference to the library containing this code, or
    /// null when there is none to take (e.g. code linked into an executable).
    #[derive(Clone, Copy)]
    pub struct LibraryRef(*mut c_void);
    // SAFETY: [os-api] a dlopen handle is a process-wide token, usable from any thread.
    unsafe impl Send for LibraryRef {}

    fn anchor() {}

    /// Takes a reference to the library by address: `dladdr` names the file,
    /// `dlopen(RTLD_NOLOAD)` finds the already loaded library and counts one
    /// more reference without loading anything.
    pub fn acquire() -> LibraryRef {
        // SAFETY: [ffi-abi] Dl_info is a plain C struct of pointers and integers, for
        // which all-zero is a valid value.
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] the address of a function in this library; `info` is a valid out struct.
        if unsafe { libc::dladdr(anchor as *const c_void, &mut info) } == 0
            || info.dli_fname.is_null()
        {
            return LibraryRef(core::ptr::null_mut());
        }
        // SAFETY: [os-api, nul-terminated] `dli_fname` is a NUL-terminated path owned by the loader;
        // RTLD_NOLOAD never loads a new object.
        let h = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        LibraryRef(h)
    }

    /// Drops the reference now (the thread never started).
    pub fn release_now(r: LibraryRef) {
        if !r.0.is_null() {
            // SAFETY: [os-api, library-pinned] a handle from dlopen, released once; the caller still
            // holds the library through the runtime's own reference.
            unsafe { libc::dlclose(r.0) };
        }
    }

    // The key's destructor must drop the library reference without ever
    // returning into the library (the call may unmap it), so it is a
    // one-instruction trampoline that *jumps* to `dlclose`: the C library
    // calls it as `void (*)(void *)`, the jump leaves the argument register
    // as it is, and `dlclose` returns straight to the C library's caller,
    // which ignores the `int` it leaves in the return register (a void
    // function's caller reads no return value). Written in assembly so no
    // function is ever called through a pointer of another signature.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    core::arch::global_asm!(
        ".text",
        ".p2align 4",
        ".globl clrprof_thread_exit_dlclose",
        ".hidden clrprof_thread_exit_dlclose",
        ".type clrprof_thread_exit_dlclose, @function",
        "clrprof_thread_exit_dlclose:",
        "jmp {dlclose}@PLT",
        ".size clrprof_thread_exit_dlclose, . - clrprof_thread_exit_dlclose",
        dlclose = sym libc::dlclose,
    );

    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    core::arch::global_asm!(
        ".text",
        ".p2align 2",
        ".globl clrprof_thread_exit_dlclose",
        ".hidden clrprof_thread_exit_dlclose",
        ".type clrprof_thread_exit_dlclose, %function",
        "clrprof_thread_exit_dlclose:",
        "b {dlclose}",
        ".size clrprof_thread_exit_dlclose, . - clrprof_thread_exit_dlclose",
        dlclose = sym libc::dlclose,
    );

    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    extern "C" {
        /// The trampoline above: `void (*)(void *)` ending in `dlclose`.
        fn clrprof_thread_exit_dlclose(handle: *mut c_void);
    }

    /// A thread-specific-data key whose destructor ends in `dlclose`
    /// (Linux x86_64 and aarch64; elsewhere `None`, and the reference is
    /// kept).
    fn key() -> Option<libc::pthread_key_t> {
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        {
            static KEY: OnceLock<Option<libc::pthread_key_t>> = OnceLock::new();
            *KEY.get_or_init(|| {
                let mut key: libc::pthread_key_t = 0;
                // SAFETY: [os-api, ffi-abi] valid out pointer; the destructor has the type the
                // C library calls it with (`void (*)(void *)`).
                (unsafe { libc::pthread_key_create(&mut key, Some(clrprof_thread_exit_dlclose)) }
                    == 0)
                    .then_some(key)
            })
        }
        #[cfg(not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )))]
        {
            None
        }
    }

    /// Arranges for `dlclose(r)` after this thread's function has returned:
    /// the C library runs thread-specific-data destructors in its own thread
    /// exit code, after the Rust thread-local destructors, and returns into
    /// its own code. Without a key the reference is kept (the library stays
    /// loaded; never unsafe).
    pub fn release_at_thread_exit(r: LibraryRef) {
        if r.0.is_null() {
            return;
        }
        if let Some(k) = key() {
            // SAFETY: [os-api] `k` is a live key; the value is our dlopen handle.
            unsafe { libc::pthread_setspecific(k, r.0) };
        }
    }
}

#[cfg(windows)]
mod library_ref {
    use core::ffi::c_void;

    const GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS: u32 = 0x4;

    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleExW(flags: u32, address: *const c_void, module: *mut *mut c_void) -> i32;
        fn FreeLibrary(module: *mut c_void) -> i32;
        fn FreeLibraryAndExitThread(module: *mut c_void, code: u32) -> !;
    }

    /// A `LoadLibrary`-style reference to the DLL containing this code.
    #[derive(Clone, Copy)]
    pub struct LibraryRef(*mut c_void);
    // SAFETY: [os-api] a module handle is a process-wide token, usable from any thread.
    unsafe impl Send for LibraryRef {}

    fn anchor() {}

    /// Takes a reference by address (`GetModuleHandleExW` without
    /// `UNCHANGED_REFCOUNT` counts one more reference, like `LoadLibrary`).
    pub fn acquire() -> LibraryRef {
        let mut h: *mut c_void = core::ptr::null_mut();
        // SAFETY: [os-api] an address inside this module; valid out pointer.
        let ok = unsafe {
            GetModuleHandleExW(
                GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
                anchor as *const c_void,
                &mut h,
            )
        };
        LibraryRef(if ok != 0 { h } else { core::ptr::null_mut() })
    }

    /// Drops the reference now (the thread never started).
    pub fn release_now(r: LibraryRef) {
        if !r.0.is_null() {
            // SAFETY: [os-api, library-pinned] a counted module reference, released once; the runtime
            // still holds its own reference while we run.
            unsafe { FreeLibrary(r.0) };
        }
    }

    /// `FreeLibraryAndExitThread`: drops the reference and ends the thread
    /// without returning into the library.
    pub fn release_at_thread_exit(r: LibraryRef) {
        if !r.0.is_null() {
            // SAFETY: [os-api, library-pinned] a counted module reference; the call does not return, so
            // no code of the (possibly unloaded) module runs afterwards.
            unsafe { FreeLibraryAndExitThread(r.0, 0) }
        }
    }
}

#[cfg(not(any(unix, windows)))]
mod library_ref {
    #[derive(Clone, Copy)]
    pub struct LibraryRef;
    pub fn acquire() -> LibraryRef {
        LibraryRef
    }
    pub fn release_now(_: LibraryRef) {}
    pub fn release_at_thread_exit(_: LibraryRef) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_registered_while_running_and_results_come_back() {
        let _serial = TEST_REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = spawn("clrprof-test-worker", move || {
            let _ = go_rx.recv();
            assert!(is_profiler_thread());
            // Seen from inside, the calling thread is not "another" thread.
            running_except_current().contains(&"clrprof-test-worker".to_string())
        })
        .unwrap();
        assert!(running_except_current().contains(&"clrprof-test-worker".to_string()));
        assert!(!is_profiler_thread());
        go_tx.send(()).unwrap();
        let id = t.id();
        assert!(!t.join().unwrap());
        assert!(!running().iter().any(|(i, _)| *i == id));
    }

    #[test]
    fn a_panicking_thread_is_deregistered_and_reports_the_panic() {
        let _serial = TEST_REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        let t = spawn("clrprof-test-panics", || -> u8 { panic!("deliberate") }).unwrap();
        let id = t.id();
        assert!(t.join().is_err());
        assert!(!running().iter().any(|(i, _)| *i == id));
    }
}
