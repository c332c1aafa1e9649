//! Errors: a failing `HRESULT` with a name and an explanation.
//!
//! Every Info and metadata call returns an `HRESULT`. [`Error`] keeps it, knows
//! the name and meaning of every `CORPROF_E_*`, the `META_E_*`/`CLDB_E_*`
//! codes metadata calls return, and the common COM/Win32 codes, and says which
//! call failed. SDK-level failures that never came from the runtime (a method
//! the runtime's Info version lacks, undecodable UTF-16, ...) are separate
//! variants.

use core::fmt;
use num_enum::TryFromPrimitive;

/// Result of a clrprof call.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// An `HRESULT` as returned by the runtime.
pub use windows_core::HRESULT;

/// Why a clrprof call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The runtime returned a failing `HRESULT`.
    Runtime {
        /// The `HRESULT`.
        hr: HRESULT,
        /// The API entity that returned it, e.g. `ICorProfilerInfo::GetFunctionInfo`.
        call: &'static str,
    },
    /// The method belongs to a newer `ICorProfilerInfoN` than the runtime
    /// implements (QueryInterface for it failed during `Initialize`).
    Unsupported {
        /// The Info interface version the method needs.
        needs: u8,
        /// The highest version the runtime offers.
        has: u8,
        /// The method.
        call: &'static str,
    },
    /// A string from the runtime was not valid UTF-16.
    InvalidUtf16 {
        /// The call that returned it.
        call: &'static str,
    },
    /// The runtime's answer contradicted itself (e.g. a size that kept growing
    /// between calls); nothing was read from uninitialised memory.
    InconsistentAnswer {
        /// The call.
        call: &'static str,
    },
    /// Input the SDK refused before calling the runtime.
    InvalidArgument(&'static str),
    /// Data that could not be decoded (a signature blob, an IL body, ...).
    Malformed(String),
    /// A requirement of the profiling API that the caller did not meet,
    /// reported before the runtime would have refused it.
    Usage(String),
    /// The call reads object references from the GC heap, which are only
    /// valid while no garbage collection can run, and the scope it was made
    /// in does not block collections (see
    /// [`ProfilerInfo::gc_blocked`](crate::ProfilerInfo::gc_blocked)).
    GcMayRun {
        /// The call.
        call: &'static str,
    },
    /// A detach was requested while threads started with
    /// [`crate::thread::spawn`] (other than the caller) still run: the
    /// runtime unloads the library after detaching and does not wait for
    /// the profiler's own threads.
    ThreadsRunning {
        /// Their names.
        threads: Vec<String>,
    },
    /// A value made by the SDK for one runtime object was used with another:
    /// a [`MethodShape`](crate::elt::args::MethodShape) of another function,
    /// an IL buffer of another module.
    Mismatch {
        /// The call that refused it.
        call: &'static str,
        /// What it was made for.
        made_for: usize,
        /// What it was used with.
        used_with: usize,
    },
    /// The SDK refused a request before calling the runtime, which would
    /// have answered `hr` (e.g. `CORPROF_E_INCONSISTENT_WITH_FLAGS` for ELT
    /// hooks that do not match the event mask).
    Refused {
        /// The code the runtime would have returned.
        hr: HRESULT,
        /// The call that was not made.
        call: &'static str,
        /// Why, and what to do instead.
        why: String,
    },
    /// The running runtime's version refuses the request, or answered `hr`
    /// because of a rule or defect of that version only: `why` names the
    /// versions and what to do. Either the SDK refused before calling
    /// (`called` false; `hr` is what the runtime would answer) or the
    /// runtime answered `hr`.
    RuntimeVersion {
        /// The runtime's code (or the one it would answer).
        hr: HRESULT,
        /// The call.
        call: &'static str,
        /// Whether the runtime was called.
        called: bool,
        /// The versions and the rule.
        why: String,
    },
    /// `DoStackSnapshot` of another thread without a runtime suspension (an
    /// asynchronous walk) failed with `hr`: CoreCLR implements asynchronous
    /// walks on Windows only.
    AsyncWalkUnsupported {
        /// The runtime's code (`E_NOTIMPL` on Linux 3.1.23 and 8.0.4).
        hr: HRESULT,
    },
    /// An operating-system call failed.
    Os {
        /// The call, e.g. `SuspendThread`.
        call: &'static str,
        /// The system's error code (`GetLastError` / `errno`).
        code: u32,
    },
    /// An SDK component was used with a runtime it was not registered with
    /// in `Initialize`, so it would not hear of that runtime's unloads.
    NotRegistered {
        /// What, and how to register it.
        what: &'static str,
    },
    /// The call is only allowed while the runtime runs `Initialize` (or
    /// `InitializeForAttach`), e.g. registering an SDK component.
    NotInInitialize {
        /// The call.
        call: &'static str,
    },
    /// The runtime no longer takes calls from this profiler, so the SDK did
    /// not make the call: the runtime shut down (`Shutdown`, after which the
    /// profiling API forbids Info calls), detached the profiler
    /// (`ProfilerDetachSucceeded`), or released it after `Initialize`
    /// failed or declined. On detach and after a failed `Initialize` the
    /// runtime deletes its `ICorProfilerInfo` object whatever references
    /// the profiler holds (`EEToProfInterfaceImpl`'s destructor in
    /// eetoprofinterfaceimpl.cpp), so every call through a kept
    /// [`RuntimeHandle`](crate::RuntimeHandle) answers this from then on.
    /// Its `HRESULT` is `CORPROF_E_PROFILER_DETACHING`.
    Detached {
        /// The call that was not made.
        call: &'static str,
    },
    /// The method-wrapping layer (crate `clrprof-instrumentation`) refused a
    /// method whose body it cannot wrap without changing what it does (a
    /// `tail.` call, `jmp`, a vararg signature, ...). Nothing was installed.
    CannotWrap {
        /// The method (`Namespace.Type::Method`, or its token).
        method: String,
        /// Why.
        why: String,
    },
    /// Two values that must belong together do not, and the SDK refused
    /// before calling the runtime: a wrapped body and the ReJIT control (or
    /// the `FunctionID`) of another method, a frame of another
    /// [`FrameNamer`](crate::stackwalk::FrameNamer)'s buffer. The soundness
    /// ledger's provenance section lists every such pair and how it is
    /// enforced.
    WrongPartner {
        /// The call that refused.
        call: &'static str,
        /// What was given, what it belongs to, and what to do instead.
        why: String,
    },
    /// The call would wait, in the scope it was made in, for work the
    /// runtime cannot finish until that scope ends (a ReJIT request, which
    /// suspends the runtime, waited for from a callback the runtime's
    /// suspension waits for): the application would hang. Nothing was
    /// requested. Its `HRESULT` is `CORPROF_E_UNSUPPORTED_CALL_SEQUENCE`.
    WouldDeadlock {
        /// The call that refused.
        call: &'static str,
        /// Why this scope cannot wait, and where to call instead.
        why: String,
    },
    /// The call would re-enter, without bound, the callback it is made
    /// from: the runtime answers it by calling that callback again on this
    /// thread before it returns (an EventPipe write from the delivery of the
    /// profiler's own write, which would deliver again), until the thread's
    /// stack overflows. Nothing was called. Its `HRESULT` is
    /// `CORPROF_E_UNSUPPORTED_CALL_SEQUENCE`.
    WouldRecurse {
        /// The call that refused.
        call: &'static str,
        /// What the runtime would call back, and what to do instead.
        why: String,
    },
}

impl Error {
    /// Builds a runtime error for `call` from a failing `HRESULT`.
    pub const fn runtime(hr: HRESULT, call: &'static str) -> Self {
        Error::Runtime { hr, call }
    }

    /// The `HRESULT` this error corresponds to: the runtime's own code, or the
    /// code the SDK hands back to the runtime for SDK-level failures.
    pub fn hresult(&self) -> HRESULT {
        match self {
            Error::Runtime { hr, .. }
            | Error::Refused { hr, .. }
            | Error::RuntimeVersion { hr, .. }
            | Error::AsyncWalkUnsupported { hr } => *hr,
            Error::Unsupported { .. } => HRESULT(KnownHresult::E_NOTIMPL as i32),
            Error::InvalidArgument(_) | Error::WrongPartner { .. } => {
                HRESULT(KnownHresult::E_INVALIDARG as i32)
            }
            Error::Detached { .. } => HRESULT(KnownHresult::CORPROF_E_PROFILER_DETACHING as i32),
            Error::WouldDeadlock { .. } | Error::WouldRecurse { .. } => {
                HRESULT(KnownHresult::CORPROF_E_UNSUPPORTED_CALL_SEQUENCE as i32)
            }
            _ => HRESULT(KnownHresult::E_FAIL as i32),
        }
    }

    /// The symbolic name of the `HRESULT`, when it is a known one.
    pub fn name(&self) -> Option<&'static str> {
        KnownHresult::try_from(self.hresult().0)
            .ok()
            .map(KnownHresult::name)
    }

    /// The numeric `HRESULT` (see [`hresult`](Self::hresult)).
    pub fn code(&self) -> i32 {
        self.hresult().0
    }

    /// `true` if this error carries the given `HRESULT`, e.g.
    /// `err.is(KnownHresult::CORPROF_E_DATAINCOMPLETE)`.
    pub fn is(&self, known: KnownHresult) -> bool {
        hr_is(self, known)
    }

    /// `true` if the runtime refused because the profiler was loaded by attach
    /// (`CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`).
    pub fn is_unsupported_for_attach(&self) -> bool {
        hr_is(
            self,
            KnownHresult::CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER,
        )
    }

    /// `true` for `CORPROF_E_DATAINCOMPLETE`: the ID is known but not fully
    /// loaded yet; asking again later (after the `...Finished` callback) works.
    pub fn is_data_incomplete(&self) -> bool {
        hr_is(self, KnownHresult::CORPROF_E_DATAINCOMPLETE)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Runtime { hr, call } => {
                write!(f, "{call} failed with {:#010x}", hr.0 as u32)?;
                if let Ok(k) = KnownHresult::try_from(hr.0) {
                    write!(f, " {}: {}", k.name(), k.explanation())?;
                }
                Ok(())
            }
            Error::Unsupported { needs, has, call } => write!(
                f,
                "{call} needs ICorProfilerInfo{needs}, but this runtime offers only ICorProfilerInfo{}",
                if *has <= 1 { String::new() } else { has.to_string() }
            ),
            Error::InvalidUtf16 { call } => write!(f, "{call} returned a string that is not valid UTF-16"),
            Error::InconsistentAnswer { call } => {
                write!(f, "{call} gave inconsistent sizes on repeated calls")
            }
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Malformed(what) => write!(f, "malformed data: {what}"),
            Error::Usage(what) => f.write_str(what),
            Error::GcMayRun { call } => write!(
                f,
                "{call} reads object references, which are valid only while no garbage \
                 collection can run; call it from a callback that receives an ObjectId, an ELT \
                 hook or a runtime suspension (ProfilerInfo::gc_blocked), or keep the object \
                 through a GC handle"
            ),
            Error::ThreadsRunning { threads } => write!(
                f,
                "cannot request detach: {} profiler thread(s) still running ({}); the runtime \
                 unloads the profiler library after detaching and does not wait for the \
                 profiler's own threads, so let them finish (ProfilerThread::join) first",
                threads.len(),
                threads.join(", ")
            ),
            Error::Mismatch {
                call,
                made_for,
                used_with,
            } => write!(
                f,
                "{call}: the value was made for {made_for:#x} and cannot be used with {used_with:#x}"
            ),
            Error::Refused { hr, call, why } => {
                write!(f, "{call} not called: {why} (the runtime would answer {:#010x}", hr.0 as u32)?;
                if let Ok(k) = KnownHresult::try_from(hr.0) {
                    write!(f, " {}", k.name())?;
                }
                f.write_str(")")
            }
            Error::RuntimeVersion {
                hr,
                call,
                called,
                why,
            } => {
                let verb = if *called { "answered" } else { "would answer" };
                write!(f, "{call}: {why} (the runtime {verb} {:#010x}", hr.0 as u32)?;
                if let Ok(k) = KnownHresult::try_from(hr.0) {
                    write!(f, " {}", k.name())?;
                }
                f.write_str(")")
            }
            Error::AsyncWalkUnsupported { hr } => write!(
                f,
                "ICorProfilerInfo2::DoStackSnapshot of another thread failed with {:#010x}{}: \
                 asynchronous stack walks (the runtime suspending one thread for the walk) exist \
                 only on Windows; on this platform walk other threads under \
                 ICorProfilerInfo10::SuspendRuntime (RuntimeSuspension::walk) or keep ELT shadow \
                 stacks",
                hr.0 as u32,
                hresult_name(*hr).map(|n| format!(" ({n})")).unwrap_or_default()
            ),
            Error::Os { call, code } => write!(f, "{call} failed with system error {code}"),
            Error::NotRegistered { what } => {
                write!(f, "{what} is not registered with this runtime")
            }
            Error::NotInInitialize { call } => write!(
                f,
                "{call} is only allowed during Initialize / InitializeForAttach"
            ),
            Error::CannotWrap { method, why } => {
                write!(f, "cannot wrap {method}: {why}; the method was left unchanged")
            }
            Error::WrongPartner { call, why } => {
                write!(f, "{call} refused (nothing was handed to the runtime): {why}")
            }
            Error::WouldDeadlock { call, why } => write!(
                f,
                "{call} refused (nothing was requested): waiting here would hang the \
                 application: {why}"
            ),
            Error::WouldRecurse { call, why } => write!(
                f,
                "{call} refused (nothing was called): the runtime would call back into \
                 the callback this call is made from, again and again: {why}"
            ),
            Error::Detached { call } => write!(
                f,
                "{call} not called: the runtime no longer takes calls from this profiler \
                 (it shut down, detached the profiler, or released it after Initialize \
                 failed or declined) (CORPROF_E_PROFILER_DETACHING)"
            ),
        }
    }
}

impl std::error::Error for Error {}

fn hr_is(e: &Error, k: KnownHresult) -> bool {
    e.hresult().0 == k as i32
}

/// Turns an `HRESULT` into `Ok(())` for success codes (including `S_FALSE`)
/// and an [`Error::Runtime`] for failures.
#[inline]
pub fn check(hr: HRESULT, call: &'static str) -> Result<()> {
    check_success(hr, call).map(|_| ())
}

/// Like [`check`], keeping the success code (to tell `S_OK` from `S_FALSE`).
#[inline]
pub fn check_success(hr: HRESULT, call: &'static str) -> Result<HRESULT> {
    if hr.0 >= 0 {
        Ok(hr)
    } else {
        Err(Error::Runtime { hr, call })
    }
}

/// Looks up the symbolic name of an `HRESULT`.
pub fn hresult_name(hr: HRESULT) -> Option<&'static str> {
    KnownHresult::try_from(hr.0).ok().map(KnownHresult::name)
}

/// Looks up the human explanation of an `HRESULT`.
pub fn hresult_explanation(hr: HRESULT) -> Option<&'static str> {
    KnownHresult::try_from(hr.0)
        .ok()
        .map(KnownHresult::explanation)
}

macro_rules! known_hresults {
    ($($name:ident = $value:literal, $explanation:literal;)*) => {
        /// Every `HRESULT` the SDK can name and explain.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, TryFromPrimitive)]
        #[repr(i32)]
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        pub enum KnownHresult {
            $(
                #[doc = $explanation]
                $name = $value as u32 as i32,
            )*
        }

        impl KnownHresult {
            /// The symbolic name, e.g. `CORPROF_E_DATAINCOMPLETE`.
            pub const fn name(self) -> &'static str {
                match self { $(Self::$name => stringify!($name),)* }
            }
            /// What it means for a profiler, in one sentence.
            pub const fn explanation(self) -> &'static str {
                match self { $(Self::$name => $explanation,)* }
            }
        }
    };
}

known_hresults! {
    S_FALSE = 0x0000_0001, "success, but the answer is the negative or partial one (e.g. a stack walk stopped early)";
    E_NOTIMPL = 0x8000_4001, "not implemented by this runtime";
    E_NOINTERFACE = 0x8000_4002, "the object does not implement the requested interface";
    E_POINTER = 0x8000_4003, "a required pointer argument was null";
    E_ABORT = 0x8000_4004, "the operation was aborted";
    E_FAIL = 0x8000_4005, "unspecified failure";
    E_UNEXPECTED = 0x8000_FFFF, "the call was not expected at this time";
    E_ACCESSDENIED = 0x8007_0005, "access denied";
    E_HANDLE = 0x8007_0006, "invalid handle";
    E_OUTOFMEMORY = 0x8007_000E, "out of memory";
    E_INVALIDARG = 0x8007_0057, "an argument was invalid (often: an ID that is not, or no longer, valid)";
    ERROR_INSUFFICIENT_BUFFER = 0x8007_007A, "the buffer was too small; the needed size was returned";
    ERROR_TIMEOUT = 0x8007_05B4, "the operation timed out";
    ERROR_PARTIAL_COPY = 0x8007_012B, "only part of the memory could be read";
    CLASS_E_NOAGGREGATION = 0x8004_0110, "the class does not support aggregation";
    CLASS_E_CLASSNOTAVAILABLE = 0x8004_0111, "the library does not serve this CLSID";
    CLDB_S_TRUNCATION = 0x0013_1106, "the string or array was truncated to fit the buffer";
    CLDB_E_FILE_CORRUPT = 0x8013_110E, "the metadata is corrupt";
    CLDB_E_INDEX_NOTFOUND = 0x8013_1124, "the metadata index (token) was not found";
    CLDB_E_RECORD_NOTFOUND = 0x8013_1130, "no metadata record matches (e.g. the name or token does not exist)";
    META_E_INVALID_TOKEN_TYPE = 0x8013_115F, "the token is of the wrong table for this call";
    META_E_BADMETADATA = 0x8013_118A, "the metadata is malformed";
    META_E_BAD_SIGNATURE = 0x8013_1192, "the signature blob is malformed";
    META_E_BAD_INPUT_PARAMETER = 0x8013_1193, "an input parameter of the metadata call is invalid";
    META_E_CANNOTRESOLVETYPEREF = 0x8013_1196, "the type reference cannot be resolved";
    META_E_STRINGSPACE_FULL = 0x8013_1198, "the metadata string heap is full";
    META_S_DUPLICATE = 0x0013_1197, "the item already exists; the existing token was returned";
    CORPROF_E_FUNCTION_NOT_COMPILED = 0x8013_1350, "the function has no native code yet (not JIT-compiled)";
    CORPROF_E_DATAINCOMPLETE = 0x8013_1351, "the ID is not fully loaded yet; ask again after its ...Finished callback";
    CORPROF_E_FUNCTION_NOT_IL = 0x8013_1354, "the function has no IL (e.g. it is a native or runtime-implemented method)";
    CORPROF_E_NOT_MANAGED_THREAD = 0x8013_1355, "the thread has never run managed code or is not a managed thread";
    CORPROF_E_CALL_ONLY_FROM_INIT = 0x8013_1356, "this call is only allowed during Initialize";
    CORPROF_E_NOT_YET_AVAILABLE = 0x8013_135B, "the information is not available yet at this point of startup";
    CORPROF_E_TYPE_IS_PARAMETERIZED = 0x8013_135C, "the type is a generic instantiation; use the ...2 variant of the call";
    CORPROF_E_FUNCTION_IS_PARAMETERIZED = 0x8013_135D, "the function is generic; use the ...2 variant of the call";
    CORPROF_E_STACKSNAPSHOT_INVALID_TGT_THREAD = 0x8013_135E, "the target thread of the stack walk is invalid or not walkable now";
    CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX = 0x8013_135F, "the seed context is in unmanaged code; walk from a managed frame";
    CORPROF_E_STACKSNAPSHOT_UNSAFE = 0x8013_1360, "walking that thread now could deadlock or crash, so the runtime refused";
    CORPROF_E_STACKSNAPSHOT_ABORTED = 0x8013_1361, "the stack walk was stopped by the profiler's callback";
    CORPROF_E_LITERALS_HAVE_NO_ADDRESS = 0x8013_1362, "the field is a literal (const) and has no address";
    CORPROF_E_UNSUPPORTED_CALL_SEQUENCE = 0x8013_1363, "the call is not allowed from this callback or thread (e.g. re-entrant or asynchronous)";
    CORPROF_E_ASYNCHRONOUS_UNSAFE = 0x8013_1364, "the call is not safe outside a callback on this thread";
    CORPROF_E_CLASSID_IS_ARRAY = 0x8013_1365, "the ClassID is an array type; use GetArrayObjectInfo / IsArrayClass";
    CORPROF_E_CLASSID_IS_COMPOSITE = 0x8013_1366, "the ClassID is a composite type (pointer, byref, array)";
    CORPROF_E_PROFILER_DETACHING = 0x8013_1367, "the profiler is detaching; no more calls are accepted";
    CORPROF_E_PROFILER_NOT_ATTACHABLE = 0x8013_1368, "the profiler does not implement InitializeForAttach";
    CORPROF_E_UNRECOGNIZED_PIPE_MSG_FORMAT = 0x8013_1369, "the attach message was not understood by the target";
    CORPROF_E_PROFILER_ALREADY_ACTIVE = 0x8013_136A, "a profiler is already loaded in the target process";
    CORPROF_E_PROFILEE_INCOMPATIBLE_WITH_TRIGGER = 0x8013_136B, "the target runtime is incompatible with the attach trigger";
    CORPROF_E_IPC_FAILED = 0x8013_136C, "the inter-process communication with the target failed";
    CORPROF_E_PROFILEE_PROCESS_NOT_FOUND = 0x8013_136D, "the target process was not found";
    CORPROF_E_CALLBACK3_REQUIRED = 0x8013_136E, "the profiler must implement ICorProfilerCallback3 for this";
    CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER = 0x8013_136F, "not allowed for a profiler loaded by attach";
    CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT = 0x8013_1370, "the profiler used instrumentation that cannot be undone (ELT hooks or IL rewriting), so it cannot detach";
    CORPROF_E_RUNTIME_UNINITIALIZED = 0x8013_1371, "the runtime has not finished initialising";
    CORPROF_E_IMMUTABLE_FLAGS_SET = 0x8013_1372, "an event-mask flag that can only be set during Initialize was changed later; on detach: an immutable flag was set, so the profiler cannot detach";
    CORPROF_E_PROFILER_NOT_YET_INITIALIZED = 0x8013_1373, "the profiler has not finished Initialize";
    CORPROF_E_INCONSISTENT_WITH_FLAGS = 0x8013_1374, "the call is inconsistent with the event mask (e.g. hooks set without the flags they need)";
    CORPROF_E_PROFILER_CANCEL_ACTIVATION = 0x8013_1375, "the profiler chose not to be loaded into this runtime";
    CORPROF_E_CONCURRENT_GC_NOT_PROFILABLE = 0x8013_1376, "concurrent GC is on, so GC monitoring cannot be enabled after attach";
    CORPROF_E_DEBUGGING_DISABLED = 0x8013_1378, "debugging support is disabled in this runtime";
    CORPROF_E_TIMEOUT_WAITING_FOR_CONCURRENT_GC = 0x8013_1379, "timed out waiting for a concurrent GC to finish during attach";
    CORPROF_E_MODULE_IS_DYNAMIC = 0x8013_137A, "the module is dynamic (Reflection.Emit) and has no file image";
    CORPROF_E_CALLBACK4_REQUIRED = 0x8013_137B, "the profiler must implement ICorProfilerCallback4 for this";
    CORPROF_E_REJIT_NOT_ENABLED = 0x8013_137C, "ReJIT was not enabled (COR_PRF_ENABLE_REJIT) in Initialize";
    CORPROF_E_FUNCTION_IS_COLLECTIBLE = 0x8013_137E, "the function belongs to a collectible assembly, which this call does not support";
    CORPROF_E_CALLBACK6_REQUIRED = 0x8013_1380, "the profiler must implement ICorProfilerCallback6 for this";
    CORPROF_E_CALLBACK7_REQUIRED = 0x8013_1382, "the profiler must implement ICorProfilerCallback7 for this";
    CORPROF_E_REJIT_INLINING_DISABLED = 0x8013_1383, "ReJIT with inlining tracking was disabled";
    CORDIAGIPC_E_BAD_ENCODING = 0x8013_1384, "the diagnostics IPC message was badly encoded";
    CORDIAGIPC_E_UNKNOWN_COMMAND = 0x8013_1385, "the diagnostics server does not know this command (runtime too old?)";
    CORDIAGIPC_E_UNKNOWN_MAGIC = 0x8013_1386, "the diagnostics IPC magic was not recognised";
    CORDIAGIPC_E_UNKNOWN_ERROR = 0x8013_1387, "the diagnostics server reported an unknown error";
    CORPROF_E_SUSPENSION_IN_PROGRESS = 0x8013_1388, "a runtime suspension is already in progress";
    CORPROF_E_NOT_GC_OBJECT = 0x8013_1389, "the address is not an object in the GC heap";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_explains_corprof_codes() {
        let e = Error::runtime(
            HRESULT(0x8013_136F_u32 as i32),
            "ICorProfilerInfo::SetEventMask",
        );
        assert_eq!(
            e.name(),
            Some("CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER")
        );
        assert!(e.is_unsupported_for_attach());
        let text = e.to_string();
        assert!(
            text.contains("SetEventMask failed with 0x8013136f"),
            "{text}"
        );
        assert!(
            text.contains("not allowed for a profiler loaded by attach"),
            "{text}"
        );
    }

    #[test]
    fn known_table_agrees_with_sys_constants() {
        assert_eq!(
            KnownHresult::CORPROF_E_DATAINCOMPLETE as i32,
            clrprof_sys::CORPROF_E_DATAINCOMPLETE.0
        );
        assert_eq!(
            KnownHresult::CORPROF_E_NOT_GC_OBJECT as i32,
            clrprof_sys::CORPROF_E_NOT_GC_OBJECT.0
        );
        assert_eq!(
            KnownHresult::E_INVALIDARG as i32,
            clrprof_sys::E_INVALIDARG.0
        );
        assert_eq!(
            KnownHresult::CORPROF_E_PROFILER_CANCEL_ACTIVATION as i32,
            clrprof_sys::CORPROF_E_PROFILER_CANCEL_ACTIVATION.0
        );
    }

    #[test]
    fn unknown_codes_still_display() {
        let e = Error::runtime(HRESULT(0x8765_4321_u32 as i32), "X::Y");
        assert_eq!(e.to_string(), "X::Y failed with 0x87654321");
        assert_eq!(e.name(), None);
        assert!(check(HRESULT(1), "X::Y").is_ok());
        assert!(check(HRESULT(-1), "X::Y").is_err());
    }

    #[test]
    fn unsupported_names_versions() {
        let e = Error::Unsupported {
            needs: 10,
            has: 9,
            call: "ICorProfilerInfo10::SuspendRuntime",
        };
        assert_eq!(
            e.to_string(),
            "ICorProfilerInfo10::SuspendRuntime needs ICorProfilerInfo10, but this runtime offers only ICorProfilerInfo9"
        );
    }
}
