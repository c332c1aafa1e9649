//! The process environment as the runtime sees it (`ICorProfilerInfo11`).
//!
//! `GetEnvironmentVariable` / `SetEnvironmentVariable` read and change the
//! environment block the runtime itself uses: on Windows the process's
//! (`GetEnvironmentVariableW`), on Linux the copy CoreCLR's platform layer
//! keeps. That is what the runtime's own configuration reads and what
//! managed code gets from `Environment.GetEnvironmentVariable`, which is why
//! a profiler uses these rather than the C library's `getenv`/`setenv`:
//! a variable set in `Initialize` is seen by the managed program. On Linux
//! the change stays in the runtime's copy: the C library's environment
//! (`getenv`, Rust's `std::env`) of the same process sees neither a
//! variable set nor one removed this way; on Windows it sees both (the
//! `info environment` scenario records this on every leg).

use crate::buffer::{fill_string, to_wide};
use crate::error::{check, Error, Result};
use crate::info::RuntimeHandle;

/// `HRESULT_FROM_WIN32(ERROR_ENVVAR_NOT_FOUND)`.
const ENVVAR_NOT_FOUND: i32 = 0x8007_00CB_u32 as i32;

fn check_name(name: &str) -> Result<Vec<u16>> {
    if name.is_empty() || name.contains('\0') || name.chars().skip(1).any(|c| c == '=') {
        return Err(Error::InvalidArgument(
            "an environment variable name must be non-empty, without NUL and without '=' after its first character",
        ));
    }
    Ok(to_wide(name))
}

impl RuntimeHandle {
    /// `GetEnvironmentVariable` (Info11): the value of `name`, or `None`
    /// when it is not set. Callable from any thread at any time.
    pub fn environment_variable(&self, name: &str) -> Result<Option<String>> {
        self.call_live("ICorProfilerInfo11::GetEnvironmentVariable", || {
            const CALL: &str = "ICorProfilerInfo11::GetEnvironmentVariable";
            let i11 = self.raw_info11(CALL)?;
            let wide = check_name(name)?;
            let answer = fill_string(CALL, |cap, needed, buf| {
                // SAFETY: [info-alive, nul-terminated, buffer-protocol, plain-call] `wide` is NUL-terminated and outlives the call; `buf`
                // has `cap` writable WCHARs; `needed` is a valid out pointer.
                unsafe { i11.GetEnvironmentVariable(wide.as_ptr(), cap, needed, buf) }
            });
            match answer {
                Ok(value) => Ok(Some(value)),
                Err(Error::Runtime { hr, .. }) if hr.0 == ENVVAR_NOT_FOUND => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    /// `SetEnvironmentVariable` (Info11): sets `name` to `value`, or removes
    /// it when `value` is `None`. Callable from any thread at any time; set
    /// in `Initialize`, a variable is in place before any managed code runs.
    pub fn set_environment_variable(&self, name: &str, value: Option<&str>) -> Result<()> {
        self.call_live("ICorProfilerInfo11::SetEnvironmentVariable", || {
            const CALL: &str = "ICorProfilerInfo11::SetEnvironmentVariable";
            let i11 = self.raw_info11(CALL)?;
            let name = check_name(name)?;
            if value.is_some_and(|v| v.contains('\0')) {
                return Err(Error::InvalidArgument(
                    "an environment variable value cannot contain NUL",
                ));
            }
            let value = value.map(to_wide);
            let value_ptr = value.as_ref().map_or(core::ptr::null(), |v| v.as_ptr());
            check(
                // SAFETY: [info-alive, nul-terminated] both strings are NUL-terminated and outlive the call;
                // a null value asks the runtime to remove the variable.
                unsafe { i11.SetEnvironmentVariable(name.as_ptr(), value_ptr) },
                CALL,
            )
            .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::FakeRuntime;

    #[test]
    fn read_set_and_remove() {
        let fake = FakeRuntime::with_info_version(11);
        fake.state()
            .environment
            .insert("LONG".into(), "v".repeat(600));
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let handle = unsafe { fake.runtime_handle(false) };
        assert_eq!(handle.environment_variable("MISSING").unwrap(), None);
        assert_eq!(
            handle.environment_variable("LONG").unwrap(),
            Some("v".repeat(600))
        );
        handle
            .set_environment_variable("CLRPROF_X", Some("ä=1"))
            .unwrap();
        assert_eq!(
            handle.environment_variable("CLRPROF_X").unwrap().as_deref(),
            Some("ä=1")
        );
        handle.set_environment_variable("CLRPROF_X", None).unwrap();
        assert_eq!(handle.environment_variable("CLRPROF_X").unwrap(), None);
        assert_eq!(fake.calls_of("SetEnvironmentVariable")[1].args, vec![1]);
    }

    #[test]
    fn bad_names_and_values_are_refused_before_the_runtime() {
        let fake = FakeRuntime::with_info_version(11);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let handle = unsafe { fake.runtime_handle(false) };
        for name in ["", "A=B", "ä=B", "A\0B"] {
            assert!(matches!(
                handle.environment_variable(name),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            handle.set_environment_variable("A", Some("x\0y")),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(fake.call_count("GetEnvironmentVariable"), 0);
        assert_eq!(fake.call_count("SetEnvironmentVariable"), 0);
        let old = FakeRuntime::with_info_version(10);
        // SAFETY: [test-fake] as above.
        let handle = unsafe { old.runtime_handle(false) };
        assert_eq!(
            handle.environment_variable("A").unwrap_err(),
            Error::Unsupported {
                needs: 11,
                has: 10,
                call: "ICorProfilerInfo11::GetEnvironmentVariable"
            }
        );
    }
}
