//! HRESULT values returned by the profiling and metadata APIs.
//!
//! Written by hand: the values are facts of `winerror.h` (COM) and
//! `corerror.h` (runtime), which the generator does not read.

use crate::types::HRESULT;

/// Builds an `HRESULT` from its 32-bit pattern.
const fn hr(bits: u32) -> HRESULT {
    HRESULT(bits as i32)
}

/// Mirrors the `HRESULT_FROM_WIN32` macro (winerror.h): maps a Win32 error
/// code into the `FACILITY_WIN32` failure range (0 stays `S_OK`).
pub const fn HRESULT_FROM_WIN32(code: u32) -> HRESULT {
    if code as i32 <= 0 {
        HRESULT(code as i32)
    } else {
        hr((code & 0x0000_ffff) | (7 << 16) | 0x8000_0000)
    }
}

/// Mirrors `S_OK` (winerror.h): success.
pub const S_OK: HRESULT = hr(0);
/// Mirrors `S_FALSE` (winerror.h): success, with a negative answer.
pub const S_FALSE: HRESULT = hr(1);
/// Mirrors `E_NOTIMPL` (winerror.h).
pub const E_NOTIMPL: HRESULT = hr(0x8000_4001);
/// Mirrors `E_NOINTERFACE` (winerror.h).
pub const E_NOINTERFACE: HRESULT = hr(0x8000_4002);
/// Mirrors `E_POINTER` (winerror.h).
pub const E_POINTER: HRESULT = hr(0x8000_4003);
/// Mirrors `E_ABORT` (winerror.h).
pub const E_ABORT: HRESULT = hr(0x8000_4004);
/// Mirrors `E_FAIL` (winerror.h).
pub const E_FAIL: HRESULT = hr(0x8000_4005);
/// Mirrors `E_UNEXPECTED` (winerror.h).
pub const E_UNEXPECTED: HRESULT = hr(0x8000_ffff);
/// Mirrors `E_ACCESSDENIED` (winerror.h).
pub const E_ACCESSDENIED: HRESULT = hr(0x8007_0005);
/// Mirrors `E_HANDLE` (winerror.h).
pub const E_HANDLE: HRESULT = hr(0x8007_0006);
/// Mirrors `E_OUTOFMEMORY` (winerror.h).
pub const E_OUTOFMEMORY: HRESULT = hr(0x8007_000e);
/// Mirrors `E_INVALIDARG` (winerror.h).
pub const E_INVALIDARG: HRESULT = hr(0x8007_0057);
/// Mirrors `CLASS_E_NOAGGREGATION` (winerror.h): `CreateInstance` got an outer unknown.
pub const CLASS_E_NOAGGREGATION: HRESULT = hr(0x8004_0110);
/// Mirrors `CLASS_E_CLASSNOTAVAILABLE` (winerror.h): `DllGetClassObject` does not know the CLSID.
pub const CLASS_E_CLASSNOTAVAILABLE: HRESULT = hr(0x8004_0111);
/// Mirrors `ERROR_INSUFFICIENT_BUFFER` (winerror.h), a Win32 error code.
pub const ERROR_INSUFFICIENT_BUFFER: u32 = 122;
/// Mirrors `ERROR_TIMEOUT` (winerror.h), a Win32 error code.
pub const ERROR_TIMEOUT: u32 = 1460;
/// `HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER)`: a caller-supplied buffer is too small.
pub const HRESULT_INSUFFICIENT_BUFFER: HRESULT = HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER);
/// `HRESULT_FROM_WIN32(ERROR_TIMEOUT)`: returned e.g. when an attach request times out.
pub const HRESULT_TIMEOUT: HRESULT = HRESULT_FROM_WIN32(ERROR_TIMEOUT);
