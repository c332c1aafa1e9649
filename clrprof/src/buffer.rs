//! Caller-allocated buffers: the "size query, fill, re-check" protocol.
//!
//! Many profiling and metadata methods take `(ULONG cchBuffer, ULONG
//! *pcchNeeded, T buffer[])`: the caller passes a buffer and its capacity,
//! the runtime writes as much as fits and reports the size it needed (BOTR
//! *Profiling*, "Caller-Allocated Buffers"). Some methods report a short
//! buffer with `ERROR_INSUFFICIENT_BUFFER`, some succeed with a truncated
//! result; the needed size can change between two calls (a name being
//! updated, a module loading).
//!
//! [`fill`] implements the protocol once for every such method:
//! 1. call with a stack buffer of `N` elements, so the common case is one call
//!    and no allocation;
//! 2. if the runtime needed more, call again with a buffer of the needed size;
//! 3. if the size grew in between, grow and retry (a bounded number of times);
//! 4. copy out exactly the elements the runtime said it wrote — never past
//!    them, so nothing uninitialised is read (buffers are zero-filled anyway).

use crate::error::{Error, Result};
use windows_core::HRESULT;

/// How many times the buffer is grown before the answer counts as inconsistent.
const MAX_ATTEMPTS: usize = 8;

/// Stack buffer size used for names (UTF-16 code units). Most type and method
/// names fit, so those calls need one runtime round trip.
pub const NAME_STACK_LEN: usize = 256;

/// Runs the caller-allocated-buffer protocol for one call.
///
/// `call` receives `(capacity, &mut needed, buffer)` and must make the runtime
/// call with exactly those arguments (plus any other out parameters it
/// captures; their values from the last call are the ones that count). On
/// success `out` holds the `needed` elements the runtime wrote; its previous
/// contents are replaced but its allocation is reused.
pub fn fill<T: Copy + Default, const N: usize>(
    name: &'static str,
    out: &mut Vec<T>,
    mut call: impl FnMut(u32, &mut u32, *mut T) -> HRESULT,
) -> Result<()> {
    let mut stack = [T::default(); N];
    let mut needed: u32 = 0;
    let hr = call(N as u32, &mut needed, stack.as_mut_ptr());
    if succeeded_or_short(hr) && needed as usize <= N {
        ok_or_error(hr, name)?;
        out.clear();
        out.extend_from_slice(&stack[..needed as usize]);
        return Ok(());
    }
    if !succeeded_or_short(hr) {
        return Err(Error::runtime(hr, name));
    }
    for _ in 0..MAX_ATTEMPTS {
        let capacity = needed as usize;
        out.clear();
        out.resize(capacity, T::default());
        let mut again: u32 = 0;
        let hr = call(capacity as u32, &mut again, out.as_mut_ptr());
        if !succeeded_or_short(hr) {
            out.clear();
            return Err(Error::runtime(hr, name));
        }
        if again as usize <= capacity {
            ok_or_error(hr, name)?;
            out.truncate(again as usize);
            return Ok(());
        }
        needed = again;
    }
    out.clear();
    Err(Error::InconsistentAnswer { call: name })
}

/// Like [`fill`] for UTF-16 strings: decodes into `out` (reusing its
/// allocation), dropping the terminating NUL the runtime counts in its size.
pub fn fill_string_into(
    name: &'static str,
    scratch: &mut Vec<u16>,
    out: &mut String,
    call: impl FnMut(u32, &mut u32, *mut u16) -> HRESULT,
) -> Result<()> {
    fill::<u16, NAME_STACK_LEN>(name, scratch, call)?;
    decode_utf16_into(name, scratch, out)
}

/// Like [`fill_string_into`], returning a new `String`.
pub fn fill_string(
    name: &'static str,
    call: impl FnMut(u32, &mut u32, *mut u16) -> HRESULT,
) -> Result<String> {
    let mut scratch = Vec::new();
    let mut out = String::new();
    fill_string_into(name, &mut scratch, &mut out, call)?;
    Ok(out)
}

/// Decodes a UTF-16 buffer up to its first NUL (or its end) into `out`.
/// Unpaired surrogates are an error, never replaced or panicked on.
pub fn decode_utf16_into(name: &'static str, wide: &[u16], out: &mut String) -> Result<()> {
    let end = wide.iter().position(|&c| c == 0).unwrap_or(wide.len());
    out.clear();
    for c in char::decode_utf16(wide[..end].iter().copied()) {
        match c {
            Ok(c) => out.push(c),
            Err(_) => {
                out.clear();
                return Err(Error::InvalidUtf16 { call: name });
            }
        }
    }
    Ok(())
}

/// Encodes a string as NUL-terminated UTF-16 for calls that take `LPCWSTR`.
pub fn to_wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(core::iter::once(0)).collect()
}

fn succeeded_or_short(hr: HRESULT) -> bool {
    hr.0 >= 0 || hr.0 == crate::error::KnownHresult::ERROR_INSUFFICIENT_BUFFER as i32
}

fn ok_or_error(hr: HRESULT, name: &'static str) -> Result<()> {
    // A short-buffer code with a size that now fits means the runtime did not
    // write the data on this call.
    if hr.0 < 0 {
        Err(Error::InconsistentAnswer { call: name })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A simulated runtime answer: the string it holds on each successive call.
    struct Simulated {
        answers: Vec<Vec<u16>>,
        calls: usize,
        short_hr: bool,
    }

    impl Simulated {
        fn call(&mut self, cap: u32, needed: &mut u32, buf: *mut u16) -> HRESULT {
            let s = &self.answers[self.calls.min(self.answers.len() - 1)];
            self.calls += 1;
            *needed = s.len() as u32;
            let n = s.len().min(cap as usize);
            // SAFETY: [buffer-protocol, local-memory] `buf` points to `cap` writable elements (the protocol's
            // contract, upheld by `fill`), and `n <= cap`.
            unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), buf, n) };
            if self.short_hr && s.len() > cap as usize {
                HRESULT(crate::error::KnownHresult::ERROR_INSUFFICIENT_BUFFER as i32)
            } else {
                HRESULT(0)
            }
        }
    }

    fn wide_nul(s: &str) -> Vec<u16> {
        to_wide(s)
    }

    #[test]
    fn short_names_take_one_call() {
        let mut sim = Simulated {
            answers: vec![wide_nul("System.String")],
            calls: 0,
            short_hr: false,
        };
        let s = fill_string("T", |c, n, b| sim.call(c, n, b)).unwrap();
        assert_eq!(s, "System.String");
        assert_eq!(sim.calls, 1);
    }

    #[test]
    fn long_names_take_two_calls() {
        let long = "N".repeat(1000);
        let mut sim = Simulated {
            answers: vec![wide_nul(&long)],
            calls: 0,
            short_hr: true,
        };
        let s = fill_string("T", |c, n, b| sim.call(c, n, b)).unwrap();
        assert_eq!(s, long);
        assert_eq!(sim.calls, 2);
    }

    #[test]
    fn failure_is_reported_with_call_name() {
        let e = fill_string("ICorProfilerInfo::GetModuleInfo", |_, _, _| {
            HRESULT(crate::error::KnownHresult::E_INVALIDARG as i32)
        })
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ICorProfilerInfo::GetModuleInfo failed"),
            "{e}"
        );
    }

    #[test]
    fn ever_growing_answer_is_inconsistent_not_a_hang() {
        let mut n = 300u32;
        let e = fill_string("T", |_, needed, _| {
            n += 100;
            *needed = n;
            HRESULT(0)
        })
        .unwrap_err();
        assert_eq!(e, Error::InconsistentAnswer { call: "T" });
    }

    #[test]
    fn unpaired_surrogate_is_an_error() {
        let mut sim = Simulated {
            answers: vec![vec![0x41, 0xD800, 0x42, 0]],
            calls: 0,
            short_hr: false,
        };
        let e = fill_string("T", |c, n, b| sim.call(c, n, b)).unwrap_err();
        assert_eq!(e, Error::InvalidUtf16 { call: "T" });
    }

    proptest! {
        /// Whatever sizes the simulated runtime reports from call to call, the
        /// result is the last complete answer, or a clean error.
        #[test]
        fn growing_answers_settle_on_the_last(lens in proptest::collection::vec(0usize..2000, 1..6), short_hr: bool) {
            let answers: Vec<Vec<u16>> = lens.iter().enumerate()
                .map(|(i, &l)| { let mut v: Vec<u16> = (0..l).map(|j| b'a' as u16 + ((i + j) % 26) as u16).collect(); v.push(0); v })
                .collect();
            let mut sim = Simulated { answers: answers.clone(), calls: 0, short_hr };
            let mut out = String::from("stale");
            let mut scratch = Vec::new();
            let r = fill_string_into("T", &mut scratch, &mut out, |c, n, b| sim.call(c, n, b));
            prop_assert!(r.is_ok());
            let used = &answers[(sim.calls - 1).min(answers.len() - 1)];
            let expect = String::from_utf16(&used[..used.len() - 1]).unwrap();
            prop_assert_eq!(out, expect);
        }
    }
}
