//! A wrapped body is installed at JIT time at most once, and only before
//! the JIT compiled any of its method's IL: the layer claims the method's
//! one IL replacement from [`clrprof::compilations`], whose docs say why
//! (an on-stack replacement of a running tier-0 loop compiles the IL the
//! method has then, at the IL offset of the old body: a second body there
//! made the JIT refuse the method, `InvalidProgramException` on .NET 8 to
//! 11), and says here why a refusal refuses.

use clrprof::compilations::{self, MethodKey, Refusal};
use clrprof::error::Result;
use clrprof::ids::{FunctionId, RawFunctionId};
use clrprof::info::ProfilerInfo;
use clrprof_sys as sys;

/// Why a method whose body the layer installed is not wrapped or installed
/// again.
pub(super) const ALREADY_WRAPPED: &str =
    "it is already wrapped: the body installed at its first compilation is its IL now, and \
     every later compilation (tier 1, an on-stack replacement of a running loop, another \
     generic instantiation) compiles that body; wrapping it again would nest a second wrapper \
     in it, and an on-stack replacement would continue a running frame in code of another body";

/// Why a method the JIT already compiled gets no new IL.
pub(super) const ALREADY_COMPILED: &str =
    "the JIT already compiled its IL (this is a later compilation: tier 1, an on-stack \
     replacement, which continues a running frame of the earlier code at an IL offset of that \
     IL, or another generic instantiation), and a method's IL is replaced only before its first \
     compilation (wrap a method that already runs with ReJIT)";

/// Why `install_at_jit` outside the function's `JITCompilationStarted`
/// installs nothing.
pub(super) const NOT_COMPILING: &str =
    "install_at_jit installs only from the JITCompilationStarted of the function it is given, \
     on that callback's thread";

/// Why nothing is installed at JIT time without a complete count.
pub(super) const NOT_SEEN: &str =
    "the profiler did not see every JIT compilation since the runtime started (it attached, or \
     MONITOR_JIT_COMPILATION was not in its event mask from Initialize on), so whether the JIT \
     already compiled this method's IL cannot be told (wrap it with ReJIT)";

/// The message of a refusal.
pub(super) fn why(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::AlreadyReplaced => ALREADY_WRAPPED,
        Refusal::AlreadyCompiled => ALREADY_COMPILED,
        Refusal::NotCompiling => NOT_COMPILING,
        _ => NOT_SEEN,
    }
}

/// Whether the method's IL was replaced (by this layer or another claim).
pub(super) fn is_installed(key: MethodKey) -> bool {
    compilations::is_replaced(key)
}

/// Runs `set` as the method's one JIT-time installation (see
/// [`compilations::claim`]); a refusal is `Err` with its message.
pub(super) fn install<T>(
    key: MethodKey,
    during: Option<RawFunctionId>,
    set: impl FnOnce() -> Result<T>,
) -> core::result::Result<Result<T>, &'static str> {
    compilations::claim(key, during, set).map_err(why)
}

/// Whether `function` has code the JIT compiled: a second check of what
/// the count says, from the runtime. `GetCodeInfo2` answers
/// `CORPROF_E_FUNCTION_NOT_COMPILED` before a function's first compilation;
/// code it reports may be precompiled (ReadyToRun), which
/// `EnumJITedFunctions` (the JIT's own code heaps) does not list, so a
/// function with code is looked up there where the runtime allows that
/// walk (.NET 9 and older; see below for 10 and later).
pub(super) fn jit_compiled(info: &ProfilerInfo, function: FunctionId<'_>) -> Result<bool> {
    match info.code_info2(function) {
        Err(e) if e.hresult() == sys::CORPROF_E_FUNCTION_NOT_COMPILED => return Ok(false),
        _ => {}
    }
    let function = function.to_raw();
    let jitted = match info.enum_jited_functions() {
        Ok(jitted) => jitted,
        // .NET 10 and later: the runtime's walk of its code heaps is not
        // safe from a JIT callback (`ProfilerInfo::enum_jited_functions`).
        // The SDK's own count of compilations, which the installation's
        // claim checks next, answers there alone: a method the JIT compiled
        // is refused by it (`AlreadyCompiled`), and so is every method when
        // the count is not complete (`NotSeen`).
        Err(clrprof::Error::RuntimeVersion { called: false, .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    for jitted in jitted {
        if jitted?.function == function {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_its_own_message() {
        let all = [
            Refusal::AlreadyReplaced,
            Refusal::AlreadyCompiled,
            Refusal::NotCompiling,
            Refusal::NotSeen,
        ];
        let messages: std::collections::BTreeSet<_> = all.iter().map(|r| why(*r)).collect();
        assert_eq!(messages.len(), all.len());
        assert_eq!(why(Refusal::AlreadyReplaced), ALREADY_WRAPPED);
    }
}
