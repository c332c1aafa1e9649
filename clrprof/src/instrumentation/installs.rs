//! A method's IL is replaced at JIT time at most once, and only before the
//! JIT compiled any of its IL.
//!
//! `JITCompilationStarted` comes for every JIT compilation of a method's
//! original IL version, not only the first: tier 1, the instrumented tier
//! of dynamic PGO, an on-stack replacement (OSR) of a running tier-0 loop,
//! and the first compilation of each other generic instantiation (the
//! runtime's `MethodDesc::JitCompileCodeLockedEventWrapper`, prestub.cpp,
//! sends it for every compilation whose ReJIT ID is 0). Each compiles the IL
//! the method has then, which is also what `GetILFunctionBody` returns
//! (`Module::GetDynamicIL` before the metadata's RVA,
//! proftoeeinterfaceimpl.cpp): after an installation, the wrapped body. An
//! installation there fails in two ways:
//!
//! - a wrapper of the wrapped body nests a second wrapper in it (each call
//!   then runs both, and handlers count it twice);
//! - an OSR compilation continues a running tier-0 frame at the IL offset
//!   of its patchpoint in the body that frame was compiled from, with that
//!   frame's layout of locals (the tier-0 code's `PatchpointInfo`). In
//!   another body the offset is another instruction and the locals are
//!   others: the JIT refuses the method (`InvalidProgramException` in the
//!   application, thrown out of the patchpoint helper, on .NET 8 to 11), or
//!   builds a continuation over a frame that does not match. The same holds
//!   for the first installation when the JIT compiled the method (or
//!   another instantiation of it) from its original IL before.
//!
//! `ICorProfilerInfo::SetILFunctionBody` "can only be called on those
//! methods which have never been compiled by a JITTER"
//! (proftoeeinterfaceimpl.cpp); the runtime does not check it. The layer
//! does: every `JITCompilationStarted` goes through
//! [`compilation_started`] (before the profiler's own handler), which counts
//! the compilations of each method; an installation is allowed only in the
//! first compilation of its method (`install_at_jit`, in that compilation's
//! `JITCompilationStarted` on its thread) or before any (`install`), and
//! only once. It holds the table's lock until the runtime has the body, so
//! a compilation starting meanwhile (of another instantiation, on another
//! thread) waits and reads the new body. The count is complete only for a
//! profiler that had `MONITOR_JIT_COMPILATION` in the runtime's mask from
//! `Initialize` on (not attached, never cleared): any other installs
//! nothing at JIT time, since a compilation it did not see may have left
//! tier-0 code of the original IL running. Precompiled (ReadyToRun) code is
//! not a compilation: the first JIT compilation of such a method (tier 1)
//! may still install, and its precompiled code has no patchpoints.

use super::*;
use crate::ids::{RawFunctionId, RawModuleId};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU8;
use std::sync::{Mutex, MutexGuard};

/// A method, by module and token.
type Key = (RawModuleId, MdMethodDef);

/// What the layer knows of a method.
#[derive(Default)]
struct Method {
    /// JIT compilations of it that started (saturating).
    started: u32,
    /// Whether the layer installed (or is installing) a body of it.
    installed: bool,
}

/// Every method the JIT compiled since `Initialize`, for the life of the
/// process (a few dozen bytes each). A module's ID is its address, which a
/// module loaded after a collectible one unloaded may reuse: its methods may
/// then be refused as compiled or wrapped (nothing is installed), never
/// wrapped over code of another body.
static METHODS: Mutex<BTreeMap<Key, Method>> = Mutex::new(BTreeMap::new());

fn methods() -> MutexGuard<'static, BTreeMap<Key, Method>> {
    // Plain data, and no code here panics while holding the lock: a
    // poisoned lock is still usable.
    METHODS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether [`METHODS`] saw every JIT compilation: 0 before the runtime's
/// mask was first set, 1 while it is complete, 2 for good once it is not.
static COMPLETE: AtomicU8 = AtomicU8::new(0);

/// Notes a mask the runtime accepted: the count stays complete while the
/// mask has `MONITOR_JIT_COMPILATION` from the first one on, in a profiler
/// that did not attach.
pub(crate) fn runtime_mask_set(monitors_jit: bool, attached: bool) {
    let _ = COMPLETE.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |state| {
        Some(completeness(state, monitors_jit, attached))
    });
}

/// [`COMPLETE`] after a mask is set.
fn completeness(state: u8, monitors_jit: bool, attached: bool) -> u8 {
    match (state, monitors_jit && !attached) {
        (0 | 1, true) => 1,
        _ => 2,
    }
}

thread_local! {
    /// The compilation whose `JITCompilationStarted` this thread is in: the
    /// function, its method and whether it is the method's first.
    static COMPILING: Cell<Option<(RawFunctionId, Key, bool)>> = const { Cell::new(None) };
}

/// The scope of one `JITCompilationStarted` (see [`compilation_started`]).
pub(crate) struct Compiling {
    outer: Option<(RawFunctionId, Key, bool)>,
}

impl Drop for Compiling {
    fn drop(&mut self) {
        COMPILING.with(|c| c.set(self.outer));
    }
}

/// Counts a JIT compilation of `function`'s method, and marks this thread
/// as in its `JITCompilationStarted` until the value is dropped. Called by
/// the callback object for every `JITCompilationStarted`, before the
/// profiler's handler.
pub(crate) fn compilation_started(info: &ProfilerInfo, function: FunctionId<'_>) -> Compiling {
    let current = info.function_info(function).ok().map(|fi| {
        let key = (fi.module.to_raw(), fi.token);
        let mut methods = methods();
        let method = methods.entry(key).or_default();
        method.started = method.started.saturating_add(1);
        (function.to_raw(), key, method.started == 1)
    });
    Compiling {
        outer: COMPILING.with(|c| c.replace(current)),
    }
}

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

/// Whether the layer installed a body of this method at JIT time.
pub(super) fn is_installed(key: Key) -> bool {
    methods().get(&key).is_some_and(|m| m.installed)
}

/// The method's one JIT-time installation, in the first compilation of its
/// method when `during` names that compilation's function (see
/// [`compilation_started`]), or before any when it is `None`: the table
/// stays locked (compilations starting meanwhile wait) until the value is
/// dropped, and the installation is given back unless
/// [`Installing::done`] was called. `Err` says why it is refused.
pub(super) fn install(
    key: Key,
    during: Option<RawFunctionId>,
) -> core::result::Result<Installing, &'static str> {
    let mut methods = methods();
    let method = methods.entry(key).or_default();
    decide(
        method,
        COMPLETE.load(Ordering::SeqCst) == 1,
        COMPILING.with(Cell::get),
        key,
        during,
    )?;
    method.installed = true;
    Ok(Installing {
        methods,
        key,
        done: false,
    })
}

/// The rule of [`install`]: whether `key`, which the layer knows as
/// `method`, may get its body now, with the count `complete` or not, this
/// thread in the `JITCompilationStarted` of `compiling`, for the
/// compilation of `during` (or before any compilation).
fn decide(
    method: &Method,
    complete: bool,
    compiling: Option<(RawFunctionId, Key, bool)>,
    key: Key,
    during: Option<RawFunctionId>,
) -> core::result::Result<(), &'static str> {
    if method.installed {
        return Err(ALREADY_WRAPPED);
    }
    if !complete {
        return Err(NOT_SEEN);
    }
    match during {
        Some(function) => match compiling {
            Some((f, k, first)) if f == function && k == key => {
                if first && method.started == 1 {
                    Ok(())
                } else {
                    Err(ALREADY_COMPILED)
                }
            }
            _ => Err(NOT_COMPILING),
        },
        None if method.started == 0 => Ok(()),
        None => Err(ALREADY_COMPILED),
    }
}

/// See [`install`].
pub(super) struct Installing {
    methods: MutexGuard<'static, BTreeMap<Key, Method>>,
    key: Key,
    done: bool,
}

impl Installing {
    /// The runtime has the body: the installation stays for the life of
    /// the process.
    pub(super) fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Installing {
    fn drop(&mut self) {
        if !self.done {
            if let Some(m) = self.methods.get_mut(&self.key) {
                m.installed = false;
            }
        }
    }
}

/// Whether `function` has code the JIT compiled: a second check of what
/// the count says, from the runtime. `GetCodeInfo2` answers
/// `CORPROF_E_FUNCTION_NOT_COMPILED` before a function's first compilation;
/// code it reports may be precompiled (ReadyToRun), which
/// `EnumJITedFunctions` (the JIT's own code heaps; safe at any time) does
/// not list, so a function with code is looked up there.
pub(super) fn jit_compiled(info: &ProfilerInfo, function: FunctionId<'_>) -> Result<bool> {
    match info.code_info2(function) {
        Err(e) if e.hresult() == sys::CORPROF_E_FUNCTION_NOT_COMPILED => return Ok(false),
        _ => {}
    }
    let function = function.to_raw();
    for jitted in info.enum_jited_functions()? {
        if jitted?.function == function {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: Key = (RawModuleId(0x10), MdMethodDef(0x0600_0001));
    const F: RawFunctionId = RawFunctionId(0x20);

    fn method(started: u32, installed: bool) -> Method {
        Method { started, installed }
    }

    #[test]
    fn a_body_is_installed_once_in_the_first_compilation_only() {
        let first = Some((F, KEY, true));
        assert_eq!(decide(&method(1, false), true, first, KEY, Some(F)), Ok(()));
        // Installed before: a second body would wrap the first.
        assert_eq!(
            decide(&method(1, true), true, first, KEY, Some(F)),
            Err(ALREADY_WRAPPED)
        );
        // A later compilation (tier 1, OSR), or another instantiation's
        // first one after the method's first (`first` is false), or a
        // first one while another instantiation's started too.
        for (started, first) in [(2, true), (2, false), (5, false)] {
            assert_eq!(
                decide(
                    &method(started, false),
                    true,
                    Some((F, KEY, first)),
                    KEY,
                    Some(F)
                ),
                Err(ALREADY_COMPILED)
            );
        }
        // Outside the function's JITCompilationStarted on this thread.
        let other_f = Some((RawFunctionId(0x21), KEY, true));
        let other_key = Some((F, (RawModuleId(0x10), MdMethodDef(0x0600_0002)), true));
        for compiling in [None, other_f, other_key] {
            assert_eq!(
                decide(&method(1, false), true, compiling, KEY, Some(F)),
                Err(NOT_COMPILING)
            );
        }
        // A count the profiler did not see whole: nothing is told.
        assert_eq!(
            decide(&method(1, false), false, first, KEY, Some(F)),
            Err(NOT_SEEN)
        );
    }

    #[test]
    fn without_a_function_a_body_is_installed_before_any_compilation() {
        assert_eq!(decide(&method(0, false), true, None, KEY, None), Ok(()));
        assert_eq!(
            decide(&method(1, false), true, None, KEY, None),
            Err(ALREADY_COMPILED)
        );
        assert_eq!(
            decide(&method(0, true), true, None, KEY, None),
            Err(ALREADY_WRAPPED)
        );
        assert_eq!(
            decide(&method(0, false), false, None, KEY, None),
            Err(NOT_SEEN)
        );
    }

    #[test]
    fn the_count_is_complete_only_from_a_first_mask_with_jit_events_and_never_after_losing_them() {
        assert_eq!(completeness(0, true, false), 1);
        assert_eq!(completeness(1, true, false), 1);
        // Attached, or a mask without the JIT events: for good.
        assert_eq!(completeness(0, true, true), 2);
        assert_eq!(completeness(0, false, false), 2);
        assert_eq!(completeness(1, false, false), 2);
        assert_eq!(completeness(2, true, false), 2);
    }
}
