//! Panic containment at every boundary with the runtime.
//!
//! A panic that unwinds out of an `extern "system"` function aborts the host
//! process, and the generated COM glue does not catch panics. Every callback,
//! class-factory method, export and ELT handler therefore runs its Rust code
//! through [`guard`]: a panic is caught, logged through the SDK's log facade
//! (never printed to the application's stderr), and replaced by a value that
//! is harmless for that entry point.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

thread_local! {
    /// The entry point currently guarded on this thread (innermost), if any.
    static CURRENT_ENTRY: Cell<Option<&'static str>> = const { Cell::new(None) };
}

static HOOK: Once = Once::new();

/// Set once the runtime has found a profiler class in this library: from then
/// on the library lives inside someone else's process, and a panic anywhere in
/// it (a thread the profiler started, an ELT hook, which runs without the
/// per-call guard state) must not write to that process's stderr either.
static IN_HOST: AtomicBool = AtomicBool::new(false);

/// Marks this library as loaded into a profiled process (see [`IN_HOST`]).
pub(crate) fn mark_loaded_in_host() {
    IN_HOST.store(true, Ordering::Relaxed);
}

/// Installs (once) a panic hook that sends panics raised inside a guarded
/// entry point — or anywhere, once the library is loaded as a profiler — to
/// the log instead of stderr, and leaves every other panic to the previous hook.
pub fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |panic_info| {
            let entry = CURRENT_ENTRY.try_with(|c| c.get()).ok().flatten();
            let entry = entry.or_else(|| {
                IN_HOST
                    .load(Ordering::Relaxed)
                    .then_some("profiler code outside a callback")
            });
            match entry {
                Some(entry) => {
                    let location = panic_info
                        .location()
                        .map(|l| format!(" at {}:{}", l.file(), l.line()))
                        .unwrap_or_default();
                    log::error!(
                        "panic in {entry}{location}: {}",
                        payload_text(panic_info.payload())
                    );
                }
                None => previous(panic_info),
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
    install_panic_hook();
    let outer = CURRENT_ENTRY
        .try_with(|c| c.replace(Some(entry)))
        .ok()
        .flatten();
    let result = catch_unwind(AssertUnwindSafe(f));
    let _ = CURRENT_ENTRY.try_with(|c| c.set(outer));
    match result {
        Ok(r) => r,
        Err(payload) => {
            drop_payload(payload);
            on_panic
        }
    }
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
    fn nested_guards_restore_the_outer_entry() {
        let r = guard("outer", 0, || {
            let inner = guard("inner", 1, || -> i32 { panic!("inner boom") });
            assert_eq!(CURRENT_ENTRY.with(|c| c.get()), Some("outer"));
            inner + 10
        });
        assert_eq!(r, 11);
        assert_eq!(CURRENT_ENTRY.with(|c| c.get()), None);
    }
}
