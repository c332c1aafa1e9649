//! Borrowed UTF-16 strings handed over by the runtime.

use crate::buffer::decode_utf16_into;
use crate::error::Result;
use core::fmt;

/// A UTF-16 string borrowed from the runtime for the duration of a callback
/// (`WCHAR` is 16-bit on every platform the runtime supports).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WideStr<'a>(&'a [u16]);

impl<'a> WideStr<'a> {
    /// Wraps code units (without a terminating NUL; anything after the first NUL is ignored).
    pub fn new(units: &'a [u16]) -> Self {
        let end = units.iter().position(|&c| c == 0).unwrap_or(units.len());
        WideStr(&units[..end])
    }

    /// Reads a NUL-terminated string.
    ///
    /// # Safety
    /// `ptr` is null or points to a NUL-terminated UTF-16 string that stays
    /// valid and unchanged for `'a` (true of `LPCWSTR` callback arguments for
    /// the duration of the callback).
    pub unsafe fn from_nul_terminated(ptr: *const u16) -> Self {
        if ptr.is_null() {
            return WideStr(&[]);
        }
        let mut len = 0usize;
        // SAFETY: [caller-contract] the caller guarantees a terminating NUL within the allocation.
        while unsafe { *ptr.add(len) } != 0 {
            len += 1;
        }
        // SAFETY: [local-memory] `len` units before the NUL are initialised and live for `'a`.
        WideStr(unsafe { core::slice::from_raw_parts(ptr, len) })
    }

    /// The code units.
    pub fn as_units(&self) -> &'a [u16] {
        self.0
    }

    /// Decodes losslessly; unpaired surrogates are an error.
    pub fn to_string_checked(&self) -> Result<String> {
        let mut s = String::new();
        decode_utf16_into("WideStr", self.0, &mut s)?;
        Ok(s)
    }
}

impl fmt::Display for WideStr<'_> {
    /// Displays with U+FFFD for unpaired surrogates (display only; use
    /// [`WideStr::to_string_checked`] for data).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in char::decode_utf16(self.0.iter().copied()) {
            fmt::Write::write_char(f, c.unwrap_or(char::REPLACEMENT_CHARACTER))?;
        }
        Ok(())
    }
}

impl fmt::Debug for WideStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}
