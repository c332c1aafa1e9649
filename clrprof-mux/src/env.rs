//! A child's own variables, set in the process environment while the child
//! is created and initialized (see [`crate::config`]).
//!
//! The process environment is one table for the whole process: while a
//! child's variables are set, another thread that reads the environment sees
//! them too. The multiplexer changes it only during its own `Initialize` (or
//! `InitializeForAttach`), when the runtime runs no managed code of the
//! application yet at startup; the runtime itself copies the environment at
//! its start (its managed `Environment` reads that copy), so managed code
//! never sees the change. Native threads of the host that read the
//! environment at that moment can; under attach that is the one visible
//! effect, and the book says so.

use std::ffi::OsString;
use std::sync::{Mutex, MutexGuard};

/// Serialises every change the multiplexer makes (the children of one
/// runtime are initialized one at a time; side-by-side runtimes may
/// initialize at once).
static LOCK: Mutex<()> = Mutex::new(());

/// Variables set for one child; restored when dropped.
pub(crate) struct Overrides {
    saved: Vec<(String, Option<OsString>)>,
    _lock: MutexGuard<'static, ()>,
}

impl Overrides {
    /// Sets `vars` (in order; a later one of the same name wins) until the
    /// returned value is dropped.
    pub(crate) fn set(vars: &[(String, String)]) -> Overrides {
        let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut saved: Vec<(String, Option<OsString>)> = Vec::new();
        for (name, value) in vars {
            if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0')
            {
                log::warn!("clrprof-mux: variable {name:?} cannot be set; skipped");
                continue;
            }
            if !saved.iter().any(|(n, _)| n == name) {
                saved.push((name.clone(), std::env::var_os(name)));
            }
            std::env::set_var(name, value);
        }
        Overrides {
            saved,
            _lock: lock,
        }
    }
}

impl Drop for Overrides {
    fn drop(&mut self) {
        for (name, previous) in self.saved.drain(..).rev() {
            match previous {
                Some(v) => std::env::set_var(&name, v),
                None => std::env::remove_var(&name),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_set_then_restored() {
        std::env::set_var("CLRPROF_MUX_TEST_KEPT", "before");
        std::env::remove_var("CLRPROF_MUX_TEST_NEW");
        {
            let _o = Overrides::set(&[
                ("CLRPROF_MUX_TEST_KEPT".into(), "during".into()),
                ("CLRPROF_MUX_TEST_NEW".into(), "x".into()),
                ("CLRPROF_MUX_TEST_NEW".into(), "y".into()),
                ("BAD=NAME".into(), "z".into()),
            ]);
            assert_eq!(std::env::var("CLRPROF_MUX_TEST_KEPT").unwrap(), "during");
            assert_eq!(std::env::var("CLRPROF_MUX_TEST_NEW").unwrap(), "y");
        }
        assert_eq!(std::env::var("CLRPROF_MUX_TEST_KEPT").unwrap(), "before");
        assert!(std::env::var_os("CLRPROF_MUX_TEST_NEW").is_none());
    }
}
