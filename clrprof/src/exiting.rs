//! Process-exit state and bounded locks: the bottom layer of finishing.
//!
//! Once the process is ending (an exit hook, a signal, an unhandled
//! exception: see [`crate::exit`]) a lock may be held by a thread that will
//! never run again (on Windows, `ExitProcess` ends every other thread before
//! the exit handlers run). This module holds the one flag that says so and
//! the locks that wait a bounded time: the threads of [`crate::thread`], the
//! writers of [`crate::output`] and the finishing registry of [`crate::exit`]
//! use them. It imports nothing of the SDK, so the layers that lock can sit
//! below the one that finishes. Its public items are re-exported by
//! [`crate::exit`], their documented home.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// The longest the process-exit path waits for a lock another thread holds.
pub const EXIT_WAIT: Duration = Duration::from_secs(2);

/// Set once the process is ending (the first
/// [`finish_process`](crate::exit::finish_process)): from then on the SDK's
/// writers wait for their locks at most [`EXIT_WAIT`], since a thread the
/// system has ended may hold one forever (on Windows, `ExitProcess` ends
/// every other thread before the exit handlers run).
static EXITING: AtomicBool = AtomicBool::new(false);

/// Whether the process is ending: [`finish_process`](crate::exit::finish_process)
/// has begun (an exit hook, a signal, or an unhandled exception). Code that
/// takes a lock another thread could hold at that moment should then wait
/// with [`lock_until`] rather than block.
pub fn process_exiting() -> bool {
    EXITING.load(Ordering::Relaxed)
}

/// Notes that the process is ending (what `finish_process` does first).
pub(crate) fn mark_exiting() {
    EXITING.store(true, Ordering::Relaxed);
}

/// Locks `m`: blocking while the process runs, and at most [`EXIT_WAIT`]
/// once it is ending ([`process_exiting`]); `None` when that wait ran out.
pub fn lock_unless_exiting<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    if process_exiting() {
        lock_until(m, Instant::now() + EXIT_WAIT)
    } else {
        Some(m.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Locks `m`, waiting at most until `deadline`; poisoning is ignored (the
/// state is a plain value, valid whatever panicked).
pub fn lock_until<T>(m: &Mutex<T>, deadline: Instant) -> Option<MutexGuard<'_, T>> {
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_until_gives_up_on_a_held_lock() {
        let m = Mutex::new(0);
        let _held = m.lock().unwrap();
        let t = Instant::now();
        assert!(lock_until(&m, Instant::now() + Duration::from_millis(30)).is_none());
        assert!(t.elapsed() >= Duration::from_millis(30));
    }
}
