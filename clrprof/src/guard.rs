//! Panic containment at every boundary with the runtime.
//!
//! A panic that unwinds out of an `extern "system"` function aborts the host
//! process, and the generated COM glue does not catch panics. Every callback,
//! class-factory method, export and ELT handler therefore runs its Rust code
//! through [`guard`]: a panic is caught, logged through the SDK's log facade
//! at error level (on stderr by default, one line with the location and one
//! saying it was contained; `CLRPROF_LOG=off` silences it, see
//! [`crate::logging`]), and replaced by a value that is harmless for that
//! entry point.
//!
//! [`guard`] is on the path of every callback, so its fast path is only
//! `catch_unwind` (free until something panics): no thread-local, no
//! atomic. Where a panic's message goes is decided by the panic hook, which
//! the SDK installs once the runtime has found a profiler class in this
//! library (the class factory does it): from then on every panic in the
//! process that reaches the hook is logged, not printed by Rust's default
//! hook; before (unit tests, a
//! library used outside a runtime) panics keep the previous hook. The entry
//! point is named when the guard catches the panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static HOOK: Once = Once::new();

/// Set once the runtime has found a profiler class in this library: from then
/// on the library lives inside someone else's process, and a panic anywhere in
/// it (a callback, a thread the profiler started, an ELT hook) must not write
/// to that process's stderr.
static IN_HOST: AtomicBool = AtomicBool::new(false);

/// Marks this library as loaded into a profiled process (see [`IN_HOST`])
/// and installs the panic hook.
pub(crate) fn mark_loaded_in_host() {
    IN_HOST.store(true, Ordering::Relaxed);
    install_panic_hook();
}

/// Installs (once) a panic hook that sends panics to the log instead of
/// stderr once the library is loaded as a profiler, and leaves every panic
/// to the previous hook before that.
pub fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |panic_info| {
            if IN_HOST.load(Ordering::Relaxed) {
                let location = panic_info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                log::error!(
                    "panic in profiler code{location}: {}",
                    payload_text(panic_info.payload())
                );
            } else {
                previous(panic_info)
            }
        }));
    });
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.as_str()
    } else {
        "(non-string panic payload)"
    }
}

/// Runs `f`; if it panics, logs the panic as coming from `entry` and returns
/// `on_panic` instead. Never unwinds.
#[inline]
pub fn guard<R>(entry: &'static str, on_panic: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            contained(entry, payload);
            on_panic
        }
    }
}

/// Logs a panic a [`guard`] caught and drops its payload.
#[cold]
#[inline(never)]
fn contained(entry: &'static str, payload: Box<dyn std::any::Any + Send>) {
    // The logger is user code too: nothing it does may unwind from here.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        log::error!(
            "panic in {entry}: {}; contained, the runtime gets the harmless result",
            payload_text(&*payload)
        )
    }));
    drop_payload(payload);
}

/// Drops a caught panic payload without letting a panicking `Drop` of the
/// payload unwind: that second panic's own payload is leaked, since dropping
/// it could panic again, and nothing may unwind into the runtime.
#[cold]
pub(crate) fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        core::mem::forget(again);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_the_fallback_value() {
        let r = guard("test", -1, || -> i32 { panic!("boom") });
        assert_eq!(r, -1);
        assert_eq!(guard("test", -1, || 7), 7);
    }

    /// A payload whose `Drop` panics: the guard must not let that unwind.
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("drop of the payload");
        }
    }

    #[test]
    fn a_payload_that_panics_when_dropped_is_contained() {
        let r = guard("test", 3, || -> i32 { std::panic::panic_any(PanicsOnDrop) });
        assert_eq!(r, 3);
    }

    #[test]
    fn nested_guards_contain_the_inner_panic_only() {
        let r = guard("outer", 0, || {
            let inner = guard("inner", 1, || -> i32 { panic!("inner boom") });
            inner + 10
        });
        assert_eq!(r, 11);
    }
}
