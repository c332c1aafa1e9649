//! HRESULT values returned by the profiling and metadata APIs.
//!
//! Written by hand: the values are facts of `winerror.h` (COM) and
//! `corerror.h` (runtime; `FACILITY_URT` = 0x13), which the generator does
//! not read. The runtime codes listed are every `CORPROF_E_*` and
//! `CORDIAGIPC_E_*`, and the `CLDB_*` / `META_*` codes of the metadata API.

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
/// Mirrors `E_NOT_SUFFICIENT_BUFFER` (winerror.h), the same value as
/// [`HRESULT_INSUFFICIENT_BUFFER`].
pub const E_NOT_SUFFICIENT_BUFFER: HRESULT = HRESULT_INSUFFICIENT_BUFFER;
/// `HRESULT_FROM_WIN32(ERROR_TIMEOUT)`: returned e.g. when an attach request times out.
pub const HRESULT_TIMEOUT: HRESULT = HRESULT_FROM_WIN32(ERROR_TIMEOUT);

// ---------------------------------------------------------------------------
// corerror.h: FACILITY_URT codes.
// ---------------------------------------------------------------------------

/// Mirrors `CLDB_S_TRUNCATION` (corerror.h): success, but a name did not fit
/// the caller's buffer and was truncated (metadata `Get*Props` calls).
pub const CLDB_S_TRUNCATION: HRESULT = hr(0x0013_1106);

/// Mirrors `META_S_DUPLICATE` (corerror.h): metadata API success code 0x1197 of `FACILITY_URT`.
pub const META_S_DUPLICATE: HRESULT = hr(0x0013_1197);

/// Mirrors `CLDB_E_FILE_BADREAD` (corerror.h): metadata storage failure code 0x1100 of `FACILITY_URT`.
pub const CLDB_E_FILE_BADREAD: HRESULT = hr(0x8013_1100);

/// Mirrors `CLDB_E_FILE_BADWRITE` (corerror.h): metadata storage failure code 0x1101 of `FACILITY_URT`.
pub const CLDB_E_FILE_BADWRITE: HRESULT = hr(0x8013_1101);

/// Mirrors `CLDB_E_FILE_OLDVER` (corerror.h): metadata storage failure code 0x1107 of `FACILITY_URT`.
pub const CLDB_E_FILE_OLDVER: HRESULT = hr(0x8013_1107);

/// Mirrors `CLDB_E_SMDUPLICATE` (corerror.h): metadata storage failure code 0x110a of `FACILITY_URT`.
pub const CLDB_E_SMDUPLICATE: HRESULT = hr(0x8013_110a);

/// Mirrors `CLDB_E_NO_DATA` (corerror.h): metadata storage failure code 0x110b of `FACILITY_URT`.
pub const CLDB_E_NO_DATA: HRESULT = hr(0x8013_110b);

/// Mirrors `CLDB_E_INCOMPATIBLE` (corerror.h): metadata storage failure code 0x110d of `FACILITY_URT`.
pub const CLDB_E_INCOMPATIBLE: HRESULT = hr(0x8013_110d);

/// Mirrors `CLDB_E_FILE_CORRUPT` (corerror.h): metadata storage failure code 0x110e of `FACILITY_URT`.
pub const CLDB_E_FILE_CORRUPT: HRESULT = hr(0x8013_110e);

/// Mirrors `CLDB_E_BADUPDATEMODE` (corerror.h): metadata storage failure code 0x1110 of `FACILITY_URT`.
pub const CLDB_E_BADUPDATEMODE: HRESULT = hr(0x8013_1110);

/// Mirrors `CLDB_E_INDEX_NOTFOUND` (corerror.h): metadata storage failure code 0x1124 of `FACILITY_URT`.
pub const CLDB_E_INDEX_NOTFOUND: HRESULT = hr(0x8013_1124);

/// Mirrors `CLDB_E_RECORD_NOTFOUND` (corerror.h): metadata storage failure code 0x1130 of `FACILITY_URT`.
pub const CLDB_E_RECORD_NOTFOUND: HRESULT = hr(0x8013_1130);

/// Mirrors `CLDB_E_RECORD_OUTOFORDER` (corerror.h): metadata storage failure code 0x1135 of `FACILITY_URT`.
pub const CLDB_E_RECORD_OUTOFORDER: HRESULT = hr(0x8013_1135);

/// Mirrors `CLDB_E_TOO_BIG` (corerror.h): metadata storage failure code 0x1154 of `FACILITY_URT`.
pub const CLDB_E_TOO_BIG: HRESULT = hr(0x8013_1154);

/// Mirrors `META_E_INVALID_TOKEN_TYPE` (corerror.h): metadata API failure code 0x115f of `FACILITY_URT`.
pub const META_E_INVALID_TOKEN_TYPE: HRESULT = hr(0x8013_115f);

/// Mirrors `META_E_BADMETADATA` (corerror.h): metadata API failure code 0x118a of `FACILITY_URT`.
pub const META_E_BADMETADATA: HRESULT = hr(0x8013_118a);

/// Mirrors `META_E_BAD_SIGNATURE` (corerror.h): metadata API failure code 0x1192 of `FACILITY_URT`.
pub const META_E_BAD_SIGNATURE: HRESULT = hr(0x8013_1192);

/// Mirrors `META_E_BAD_INPUT_PARAMETER` (corerror.h): metadata API failure code 0x1193 of `FACILITY_URT`.
pub const META_E_BAD_INPUT_PARAMETER: HRESULT = hr(0x8013_1193);

/// Mirrors `META_E_CANNOTRESOLVETYPEREF` (corerror.h): metadata API failure code 0x1196 of `FACILITY_URT`.
pub const META_E_CANNOTRESOLVETYPEREF: HRESULT = hr(0x8013_1196);

/// Mirrors `META_E_STRINGSPACE_FULL` (corerror.h): metadata API failure code 0x1198 of `FACILITY_URT`.
pub const META_E_STRINGSPACE_FULL: HRESULT = hr(0x8013_1198);

/// Mirrors `META_E_HAS_UNMARKALL` (corerror.h): metadata API failure code 0x119a of `FACILITY_URT`.
pub const META_E_HAS_UNMARKALL: HRESULT = hr(0x8013_119a);

/// Mirrors `META_E_MUST_CALL_UNMARKALL` (corerror.h): metadata API failure code 0x119b of `FACILITY_URT`.
pub const META_E_MUST_CALL_UNMARKALL: HRESULT = hr(0x8013_119b);

/// Mirrors `META_E_CA_INVALID_TARGET` (corerror.h): metadata API failure code 0x11c0 of `FACILITY_URT`.
pub const META_E_CA_INVALID_TARGET: HRESULT = hr(0x8013_11c0);

/// Mirrors `META_E_CA_INVALID_VALUE` (corerror.h): metadata API failure code 0x11c1 of `FACILITY_URT`.
pub const META_E_CA_INVALID_VALUE: HRESULT = hr(0x8013_11c1);

/// Mirrors `META_E_CA_INVALID_BLOB` (corerror.h): metadata API failure code 0x11c2 of `FACILITY_URT`.
pub const META_E_CA_INVALID_BLOB: HRESULT = hr(0x8013_11c2);

/// Mirrors `META_E_CA_REPEATED_ARG` (corerror.h): metadata API failure code 0x11c3 of `FACILITY_URT`.
pub const META_E_CA_REPEATED_ARG: HRESULT = hr(0x8013_11c3);

/// Mirrors `META_E_CA_UNKNOWN_ARGUMENT` (corerror.h): metadata API failure code 0x11c4 of `FACILITY_URT`.
pub const META_E_CA_UNKNOWN_ARGUMENT: HRESULT = hr(0x8013_11c4);

/// Mirrors `META_E_CA_UNEXPECTED_TYPE` (corerror.h): metadata API failure code 0x11c7 of `FACILITY_URT`.
pub const META_E_CA_UNEXPECTED_TYPE: HRESULT = hr(0x8013_11c7);

/// Mirrors `META_E_CA_INVALID_ARGTYPE` (corerror.h): metadata API failure code 0x11c8 of `FACILITY_URT`.
pub const META_E_CA_INVALID_ARGTYPE: HRESULT = hr(0x8013_11c8);

/// Mirrors `META_E_CA_INVALID_ARG_FOR_TYPE` (corerror.h): metadata API failure code 0x11c9 of `FACILITY_URT`.
pub const META_E_CA_INVALID_ARG_FOR_TYPE: HRESULT = hr(0x8013_11c9);

/// Mirrors `META_E_CA_INVALID_UUID` (corerror.h): metadata API failure code 0x11ca of `FACILITY_URT`.
pub const META_E_CA_INVALID_UUID: HRESULT = hr(0x8013_11ca);

/// Mirrors `META_E_CA_INVALID_MARSHALAS_FIELDS` (corerror.h): metadata API failure code 0x11cb of `FACILITY_URT`.
pub const META_E_CA_INVALID_MARSHALAS_FIELDS: HRESULT = hr(0x8013_11cb);

/// Mirrors `META_E_CA_NT_FIELDONLY` (corerror.h): metadata API failure code 0x11cc of `FACILITY_URT`.
pub const META_E_CA_NT_FIELDONLY: HRESULT = hr(0x8013_11cc);

/// Mirrors `META_E_CA_NEGATIVE_PARAMINDEX` (corerror.h): metadata API failure code 0x11cd of `FACILITY_URT`.
pub const META_E_CA_NEGATIVE_PARAMINDEX: HRESULT = hr(0x8013_11cd);

/// Mirrors `META_E_CA_NEGATIVE_CONSTSIZE` (corerror.h): metadata API failure code 0x11cf of `FACILITY_URT`.
pub const META_E_CA_NEGATIVE_CONSTSIZE: HRESULT = hr(0x8013_11cf);

/// Mirrors `META_E_CA_FIXEDSTR_SIZE_REQUIRED` (corerror.h): metadata API failure code 0x11d0 of `FACILITY_URT`.
pub const META_E_CA_FIXEDSTR_SIZE_REQUIRED: HRESULT = hr(0x8013_11d0);

/// Mirrors `META_E_CA_CUSTMARSH_TYPE_REQUIRED` (corerror.h): metadata API failure code 0x11d1 of `FACILITY_URT`.
pub const META_E_CA_CUSTMARSH_TYPE_REQUIRED: HRESULT = hr(0x8013_11d1);

/// Mirrors `META_E_NOT_IN_ENC_MODE` (corerror.h): metadata API failure code 0x11d4 of `FACILITY_URT`.
pub const META_E_NOT_IN_ENC_MODE: HRESULT = hr(0x8013_11d4);

/// Mirrors `META_E_CA_BAD_FRIENDS_ARGS` (corerror.h): metadata API failure code 0x11e5 of `FACILITY_URT`.
pub const META_E_CA_BAD_FRIENDS_ARGS: HRESULT = hr(0x8013_11e5);

/// Mirrors `META_E_CA_FRIENDS_SN_REQUIRED` (corerror.h): metadata API failure code 0x11e6 of `FACILITY_URT`.
pub const META_E_CA_FRIENDS_SN_REQUIRED: HRESULT = hr(0x8013_11e6);

/// Mirrors `CORPROF_E_FUNCTION_NOT_COMPILED` (corerror.h): profiling API failure code 0x1350 of `FACILITY_URT`.
pub const CORPROF_E_FUNCTION_NOT_COMPILED: HRESULT = hr(0x8013_1350);

/// Mirrors `CORPROF_E_DATAINCOMPLETE` (corerror.h): profiling API failure code 0x1351 of `FACILITY_URT`.
pub const CORPROF_E_DATAINCOMPLETE: HRESULT = hr(0x8013_1351);

/// Mirrors `CORPROF_E_FUNCTION_NOT_IL` (corerror.h): profiling API failure code 0x1354 of `FACILITY_URT`.
pub const CORPROF_E_FUNCTION_NOT_IL: HRESULT = hr(0x8013_1354);

/// Mirrors `CORPROF_E_NOT_MANAGED_THREAD` (corerror.h): profiling API failure code 0x1355 of `FACILITY_URT`.
pub const CORPROF_E_NOT_MANAGED_THREAD: HRESULT = hr(0x8013_1355);

/// Mirrors `CORPROF_E_CALL_ONLY_FROM_INIT` (corerror.h): profiling API failure code 0x1356 of `FACILITY_URT`.
pub const CORPROF_E_CALL_ONLY_FROM_INIT: HRESULT = hr(0x8013_1356);

/// Mirrors `CORPROF_E_NOT_YET_AVAILABLE` (corerror.h): profiling API failure code 0x135b of `FACILITY_URT`.
pub const CORPROF_E_NOT_YET_AVAILABLE: HRESULT = hr(0x8013_135b);

/// Mirrors `CORPROF_E_TYPE_IS_PARAMETERIZED` (corerror.h): profiling API failure code 0x135c of `FACILITY_URT`.
pub const CORPROF_E_TYPE_IS_PARAMETERIZED: HRESULT = hr(0x8013_135c);

/// Mirrors `CORPROF_E_FUNCTION_IS_PARAMETERIZED` (corerror.h): profiling API failure code 0x135d of `FACILITY_URT`.
pub const CORPROF_E_FUNCTION_IS_PARAMETERIZED: HRESULT = hr(0x8013_135d);

/// Mirrors `CORPROF_E_STACKSNAPSHOT_INVALID_TGT_THREAD` (corerror.h): profiling API failure code 0x135e of `FACILITY_URT`.
pub const CORPROF_E_STACKSNAPSHOT_INVALID_TGT_THREAD: HRESULT = hr(0x8013_135e);

/// Mirrors `CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX` (corerror.h): profiling API failure code 0x135f of `FACILITY_URT`.
pub const CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX: HRESULT = hr(0x8013_135f);

/// Mirrors `CORPROF_E_STACKSNAPSHOT_UNSAFE` (corerror.h): profiling API failure code 0x1360 of `FACILITY_URT`.
pub const CORPROF_E_STACKSNAPSHOT_UNSAFE: HRESULT = hr(0x8013_1360);

/// Mirrors `CORPROF_E_STACKSNAPSHOT_ABORTED` (corerror.h): profiling API failure code 0x1361 of `FACILITY_URT`.
pub const CORPROF_E_STACKSNAPSHOT_ABORTED: HRESULT = hr(0x8013_1361);

/// Mirrors `CORPROF_E_LITERALS_HAVE_NO_ADDRESS` (corerror.h): profiling API failure code 0x1362 of `FACILITY_URT`.
pub const CORPROF_E_LITERALS_HAVE_NO_ADDRESS: HRESULT = hr(0x8013_1362);

/// Mirrors `CORPROF_E_UNSUPPORTED_CALL_SEQUENCE` (corerror.h): profiling API failure code 0x1363 of `FACILITY_URT`.
pub const CORPROF_E_UNSUPPORTED_CALL_SEQUENCE: HRESULT = hr(0x8013_1363);

/// Mirrors `CORPROF_E_ASYNCHRONOUS_UNSAFE` (corerror.h): profiling API failure code 0x1364 of `FACILITY_URT`.
pub const CORPROF_E_ASYNCHRONOUS_UNSAFE: HRESULT = hr(0x8013_1364);

/// Mirrors `CORPROF_E_CLASSID_IS_ARRAY` (corerror.h): profiling API failure code 0x1365 of `FACILITY_URT`.
pub const CORPROF_E_CLASSID_IS_ARRAY: HRESULT = hr(0x8013_1365);

/// Mirrors `CORPROF_E_CLASSID_IS_COMPOSITE` (corerror.h): profiling API failure code 0x1366 of `FACILITY_URT`.
pub const CORPROF_E_CLASSID_IS_COMPOSITE: HRESULT = hr(0x8013_1366);

/// Mirrors `CORPROF_E_PROFILER_DETACHING` (corerror.h): profiling API failure code 0x1367 of `FACILITY_URT`.
pub const CORPROF_E_PROFILER_DETACHING: HRESULT = hr(0x8013_1367);

/// Mirrors `CORPROF_E_PROFILER_NOT_ATTACHABLE` (corerror.h): profiling API failure code 0x1368 of `FACILITY_URT`.
pub const CORPROF_E_PROFILER_NOT_ATTACHABLE: HRESULT = hr(0x8013_1368);

/// Mirrors `CORPROF_E_UNRECOGNIZED_PIPE_MSG_FORMAT` (corerror.h): profiling API failure code 0x1369 of `FACILITY_URT`.
pub const CORPROF_E_UNRECOGNIZED_PIPE_MSG_FORMAT: HRESULT = hr(0x8013_1369);

/// Mirrors `CORPROF_E_PROFILER_ALREADY_ACTIVE` (corerror.h): profiling API failure code 0x136a of `FACILITY_URT`.
pub const CORPROF_E_PROFILER_ALREADY_ACTIVE: HRESULT = hr(0x8013_136a);

/// Mirrors `CORPROF_E_PROFILEE_INCOMPATIBLE_WITH_TRIGGER` (corerror.h): profiling API failure code 0x136b of `FACILITY_URT`.
pub const CORPROF_E_PROFILEE_INCOMPATIBLE_WITH_TRIGGER: HRESULT = hr(0x8013_136b);

/// Mirrors `CORPROF_E_IPC_FAILED` (corerror.h): profiling API failure code 0x136c of `FACILITY_URT`.
pub const CORPROF_E_IPC_FAILED: HRESULT = hr(0x8013_136c);

/// Mirrors `CORPROF_E_PROFILEE_PROCESS_NOT_FOUND` (corerror.h): profiling API failure code 0x136d of `FACILITY_URT`.
pub const CORPROF_E_PROFILEE_PROCESS_NOT_FOUND: HRESULT = hr(0x8013_136d);

/// Mirrors `CORPROF_E_CALLBACK3_REQUIRED` (corerror.h): profiling API failure code 0x136e of `FACILITY_URT`.
pub const CORPROF_E_CALLBACK3_REQUIRED: HRESULT = hr(0x8013_136e);

/// Mirrors `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER` (corerror.h): the
/// call or event-mask flag is not allowed for a profiler that attached late.
pub const CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER: HRESULT = hr(0x8013_136f);

/// Mirrors `CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT` (corerror.h): profiling API failure code 0x1370 of `FACILITY_URT`.
pub const CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT: HRESULT = hr(0x8013_1370);

/// Mirrors `CORPROF_E_RUNTIME_UNINITIALIZED` (corerror.h): profiling API failure code 0x1371 of `FACILITY_URT`.
pub const CORPROF_E_RUNTIME_UNINITIALIZED: HRESULT = hr(0x8013_1371);

/// Mirrors `CORPROF_E_IMMUTABLE_FLAGS_SET` (corerror.h): profiling API failure code 0x1372 of `FACILITY_URT`.
pub const CORPROF_E_IMMUTABLE_FLAGS_SET: HRESULT = hr(0x8013_1372);

/// Mirrors `CORPROF_E_PROFILER_NOT_YET_INITIALIZED` (corerror.h): profiling API failure code 0x1373 of `FACILITY_URT`.
pub const CORPROF_E_PROFILER_NOT_YET_INITIALIZED: HRESULT = hr(0x8013_1373);

/// Mirrors `CORPROF_E_INCONSISTENT_WITH_FLAGS` (corerror.h): profiling API failure code 0x1374 of `FACILITY_URT`.
pub const CORPROF_E_INCONSISTENT_WITH_FLAGS: HRESULT = hr(0x8013_1374);

/// Mirrors `CORPROF_E_PROFILER_CANCEL_ACTIVATION` (corerror.h): profiling API failure code 0x1375 of `FACILITY_URT`.
pub const CORPROF_E_PROFILER_CANCEL_ACTIVATION: HRESULT = hr(0x8013_1375);

/// Mirrors `CORPROF_E_CONCURRENT_GC_NOT_PROFILABLE` (corerror.h): profiling API failure code 0x1376 of `FACILITY_URT`.
pub const CORPROF_E_CONCURRENT_GC_NOT_PROFILABLE: HRESULT = hr(0x8013_1376);

/// Mirrors `CORPROF_E_DEBUGGING_DISABLED` (corerror.h): profiling API failure code 0x1378 of `FACILITY_URT`.
pub const CORPROF_E_DEBUGGING_DISABLED: HRESULT = hr(0x8013_1378);

/// Mirrors `CORPROF_E_TIMEOUT_WAITING_FOR_CONCURRENT_GC` (corerror.h): profiling API failure code 0x1379 of `FACILITY_URT`.
pub const CORPROF_E_TIMEOUT_WAITING_FOR_CONCURRENT_GC: HRESULT = hr(0x8013_1379);

/// Mirrors `CORPROF_E_MODULE_IS_DYNAMIC` (corerror.h): profiling API failure code 0x137a of `FACILITY_URT`.
pub const CORPROF_E_MODULE_IS_DYNAMIC: HRESULT = hr(0x8013_137a);

/// Mirrors `CORPROF_E_CALLBACK4_REQUIRED` (corerror.h): profiling API failure code 0x137b of `FACILITY_URT`.
pub const CORPROF_E_CALLBACK4_REQUIRED: HRESULT = hr(0x8013_137b);

/// Mirrors `CORPROF_E_REJIT_NOT_ENABLED` (corerror.h): profiling API failure code 0x137c of `FACILITY_URT`.
pub const CORPROF_E_REJIT_NOT_ENABLED: HRESULT = hr(0x8013_137c);

/// Mirrors `CORPROF_E_FUNCTION_IS_COLLECTIBLE` (corerror.h): profiling API failure code 0x137e of `FACILITY_URT`.
pub const CORPROF_E_FUNCTION_IS_COLLECTIBLE: HRESULT = hr(0x8013_137e);

/// Mirrors `CORPROF_E_CALLBACK6_REQUIRED` (corerror.h): profiling API failure code 0x1380 of `FACILITY_URT`.
pub const CORPROF_E_CALLBACK6_REQUIRED: HRESULT = hr(0x8013_1380);

/// Mirrors `CORPROF_E_CALLBACK7_REQUIRED` (corerror.h): profiling API failure code 0x1382 of `FACILITY_URT`.
pub const CORPROF_E_CALLBACK7_REQUIRED: HRESULT = hr(0x8013_1382);

/// Mirrors `CORPROF_E_REJIT_INLINING_DISABLED` (corerror.h): profiling API failure code 0x1383 of `FACILITY_URT`.
pub const CORPROF_E_REJIT_INLINING_DISABLED: HRESULT = hr(0x8013_1383);

/// Mirrors `CORDIAGIPC_E_BAD_ENCODING` (corerror.h): diagnostics IPC failure code 0x1384 of `FACILITY_URT`.
pub const CORDIAGIPC_E_BAD_ENCODING: HRESULT = hr(0x8013_1384);

/// Mirrors `CORDIAGIPC_E_UNKNOWN_COMMAND` (corerror.h): diagnostics IPC failure code 0x1385 of `FACILITY_URT`.
pub const CORDIAGIPC_E_UNKNOWN_COMMAND: HRESULT = hr(0x8013_1385);

/// Mirrors `CORDIAGIPC_E_UNKNOWN_MAGIC` (corerror.h): diagnostics IPC failure code 0x1386 of `FACILITY_URT`.
pub const CORDIAGIPC_E_UNKNOWN_MAGIC: HRESULT = hr(0x8013_1386);

/// Mirrors `CORDIAGIPC_E_UNKNOWN_ERROR` (corerror.h): diagnostics IPC failure code 0x1387 of `FACILITY_URT`.
pub const CORDIAGIPC_E_UNKNOWN_ERROR: HRESULT = hr(0x8013_1387);

/// Mirrors `CORPROF_E_SUSPENSION_IN_PROGRESS` (corerror.h): profiling API failure code 0x1388 of `FACILITY_URT`.
pub const CORPROF_E_SUSPENSION_IN_PROGRESS: HRESULT = hr(0x8013_1388);

/// Mirrors `CORPROF_E_NOT_GC_OBJECT` (corerror.h): profiling API failure code 0x1389 of `FACILITY_URT`.
pub const CORPROF_E_NOT_GC_OBJECT: HRESULT = hr(0x8013_1389);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn win32_codes_map_into_facility_win32() {
        assert_eq!(HRESULT_INSUFFICIENT_BUFFER.0 as u32, 0x8007_007a);
        assert_eq!(HRESULT_TIMEOUT.0 as u32, 0x8007_05b4);
        assert_eq!(HRESULT_FROM_WIN32(0), S_OK);
    }

    #[test]
    fn runtime_codes_are_facility_urt() {
        // Seen returned by SetEventMask(ENTERLEAVE) after attach (RUNTIMES.md).
        assert_eq!(
            CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER.0 as u32,
            0x8013_136f
        );
        assert!(CLDB_S_TRUNCATION.is_ok());
        assert!(CORPROF_E_DATAINCOMPLETE.is_err());
    }
}
