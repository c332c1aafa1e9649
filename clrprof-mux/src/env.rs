//! A child's own variables, set in the process environment while the child
//! is created and initialized, and while it shuts down (see [`crate::config`]).
//!
//! The process environment is one table for the whole process: while a
//! child's variables are set, another thread that reads the environment sees
//! them too. The multiplexer changes it only during its own `Initialize` (or
//! `InitializeForAttach`), when the runtime runs no managed code of the
//! application yet at startup, and during `Shutdown`, when it runs none any
//! more; the runtime itself copies the environment at
//! its start (its managed `Environment` reads that copy), so managed code
//! never sees the change. Native threads of the host that read the
//! environment at that moment can; under attach that is the one visible
//! effect, and the book says so.
//!
//! On Windows a C runtime library keeps its own copy of the environment,
//! which its `getenv` reads: a child written in C sees a change only if that
//! copy changes too. So each variable is also set (and restored) with
//! `_wputenv` of the dynamic C runtimes loaded at that moment (`msvcrt.dll`,
//! `ucrtbase.dll`); a C runtime that loads later copies the process
//! environment as it is then. A child with a statically linked C runtime
//! reads its own copy, which no other module can reach.

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
            crt::set(name, Some(value));
        }
        Overrides { saved, _lock: lock }
    }
}

impl Drop for Overrides {
    fn drop(&mut self) {
        for (name, previous) in self.saved.drain(..).rev() {
            match &previous {
                Some(v) => std::env::set_var(&name, v),
                None => std::env::remove_var(&name),
            }
            crt::set(&name, previous.as_ref().and_then(|v| v.to_str()));
        }
    }
}

/// The C runtimes' own copies of the environment (Windows).
#[cfg(windows)]
mod crt {
    use core::ffi::c_void;

    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleW(name: *const u16) -> *mut c_void;
        fn GetProcAddress(module: *mut c_void, name: *const u8) -> *mut c_void;
    }

    fn wide(s: &str) -> Vec<u16> {
        s.encode_utf16().chain(Some(0)).collect()
    }

    /// `_wputenv("NAME=value")` (or `"NAME="`, which removes it) in every
    /// loaded dynamic C runtime.
    pub(super) fn set(name: &str, value: Option<&str>) {
        let assignment = wide(&format!("{name}={}", value.unwrap_or("")));
        for module in ["msvcrt.dll", "ucrtbase.dll"] {
            let module = wide(module);
            // SAFETY: [os-api, nul-terminated] GetModuleHandleW takes a NUL-terminated name and takes
            // no reference; a null result means "not loaded".
            let handle = unsafe { GetModuleHandleW(module.as_ptr()) };
            if handle.is_null() {
                continue;
            }
            // SAFETY: [os-api, nul-terminated] a loaded module's handle and a NUL-terminated name.
            let f = unsafe { GetProcAddress(handle, b"_wputenv\0".as_ptr()) };
            if f.is_null() {
                continue;
            }
            // SAFETY: [ffi-abi, os-api] `_wputenv` of the C runtime is `int __cdecl
            // _wputenv(const wchar_t *)` (cdecl is the one x64 convention);
            // it copies the string.
            let putenv = unsafe {
                core::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const u16) -> i32>(f)
            };
            // SAFETY: [os-api, nul-terminated] a NUL-terminated wide string valid for the call.
            unsafe { putenv(assignment.as_ptr()) };
        }
    }
}

#[cfg(not(windows))]
mod crt {
    /// The C library reads the process environment itself (`environ`).
    pub(super) fn set(_name: &str, _value: Option<&str>) {}
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
