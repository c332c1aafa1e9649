//! Which methods the JIT has compiled: the SDK's count of
//! `JITCompilationStarted`, and each method's one IL replacement at JIT
//! time.
//!
//! `JITCompilationStarted` comes for every JIT compilation of a method's
//! original IL version, not only the first: tier 1, the instrumented tier
//! of dynamic PGO, an on-stack replacement (OSR) of a running tier-0 loop,
//! and the first compilation of each other generic instantiation (the
//! runtime's `MethodDesc::JitCompileCodeLockedEventWrapper`, prestub.cpp,
//! sends it for every compilation whose ReJIT ID is 0). Each compiles the IL
//! the method has then: after a `SetILFunctionBody`, the new body. A body
//! set in a later compilation breaks two ways:
//!
//! - a rewrite of the rewritten body nests a second rewrite in it;
//! - an OSR compilation continues a running tier-0 frame at the IL offset
//!   of its patchpoint in the body that frame was compiled from, with that
//!   frame's layout of locals (the tier-0 code's `PatchpointInfo`). In
//!   another body the offset is another instruction and the locals are
//!   others: the JIT refuses the method (`InvalidProgramException` in the
//!   application, thrown out of the patchpoint helper, on .NET 8 to 11), or
//!   builds a continuation over a frame that does not match. The same holds
//!   for a first replacement when the JIT compiled the method (or another
//!   instantiation of it) from its original IL before.
//!
//! `ICorProfilerInfo::SetILFunctionBody` may be called only for methods the
//! JIT never compiled (proftoeeinterfaceimpl.cpp says so; the runtime does
//! not check it). The SDK counts: the callback object notes every
//! `JITCompilationStarted` here before the profiler's handler runs, and
//! [`claim`] grants a method's one replacement only in its first
//! compilation (in that compilation's `JITCompilationStarted`, on its
//! thread) or before any, and only once. A claim keeps the table locked
//! while its installation runs, so a compilation starting meanwhile (of another
//! instantiation, on another thread) waits and then reads the new body.
//!
//! The count is complete only for a profiler that had
//! `MONITOR_JIT_COMPILATION` in the runtime's mask from `Initialize` on
//! (not attached, never cleared): without it, [`claim`] refuses
//! ([`Refusal::NotSeen`]), since a compilation the SDK did not see may have
//! left tier-0 code of the original IL running. Precompiled (ReadyToRun)
//! code is not a compilation: the first JIT compilation of such a method
//! (tier 1) may still be claimed, and precompiled code has no patchpoints.
//!
//! This module sits low in the crate (it names only IDs); the callback
//! object and the Info wrapper that sets event masks feed it, and the
//! method-wrapping crate (`clrprof-instrumentation`) claims through it.

use crate::ids::{MdMethodDef, RawFunctionId, RawModuleId};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A method, by module and token.
pub type MethodKey = (RawModuleId, MdMethodDef);

/// What the SDK knows of a method.
#[derive(Default)]
struct Method {
    /// JIT compilations of it that started (saturating).
    started: u32,
    /// Whether its IL was replaced (or is being replaced) through a claim.
    replaced: bool,
}

/// Every method the JIT compiled since `Initialize`, for the life of the
/// process (a few dozen bytes each). A module's ID is its address, which a
/// module loaded after a collectible one unloaded may reuse: its methods may
/// then be refused as compiled or replaced (nothing is installed), never
/// given a body over code of another one.
static METHODS: Mutex<BTreeMap<MethodKey, Method>> = Mutex::new(BTreeMap::new());

fn methods() -> MutexGuard<'static, BTreeMap<MethodKey, Method>> {
    // Plain data, and no code here panics while holding the lock: a
    // poisoned lock is still usable.
    METHODS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether [`METHODS`] saw every JIT compilation: 0 before the runtime's
/// mask was first set, 1 while it is complete, 2 for good once it is not.
static COMPLETE: AtomicU8 = AtomicU8::new(0);

/// Whether compilations are still worth counting: once the count is
/// incomplete every claim is refused, whatever the table says.
pub(crate) fn counting() -> bool {
    COMPLETE.load(Ordering::SeqCst) != 2
}

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
    static COMPILING: Cell<Option<(RawFunctionId, MethodKey, bool)>> = const { Cell::new(None) };
}

/// The scope of one `JITCompilationStarted` (see [`compilation_started`]).
pub(crate) struct Compiling {
    outer: Option<(RawFunctionId, MethodKey, bool)>,
}

impl Drop for Compiling {
    fn drop(&mut self) {
        COMPILING.with(|c| c.set(self.outer));
    }
}

/// Counts a JIT compilation of `function`, of the method `key` (`None` when
/// the runtime could not say which), and marks this thread as in its
/// `JITCompilationStarted` until the value is dropped. Called by the
/// callback object for every `JITCompilationStarted`, before the profiler's
/// handler.
pub(crate) fn compilation_started(function: RawFunctionId, key: Option<MethodKey>) -> Compiling {
    if HOLDING.with(Cell::get) {
        // This thread holds the table in a claim: waiting for it would never
        // end. The compilation goes uncounted, so the count is incomplete.
        COMPLETE.store(2, Ordering::SeqCst);
        return Compiling {
            outer: COMPILING.with(|c| c.replace(None)),
        };
    }
    let current = key.map(|key| {
        let mut methods = methods();
        let method = methods.entry(key).or_default();
        method.started = method.started.saturating_add(1);
        (function, key, method.started == 1)
    });
    Compiling {
        outer: COMPILING.with(|c| c.replace(current)),
    }
}

/// Why [`claim`] refused a method's IL replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The method's IL was replaced through a claim before.
    AlreadyReplaced,
    /// The JIT already compiled the method's IL (a later compilation: tier
    /// 1, an on-stack replacement, another generic instantiation).
    AlreadyCompiled,
    /// A claim for a compilation made outside that function's
    /// `JITCompilationStarted` on its thread.
    NotCompiling,
    /// The SDK did not see every JIT compilation since the runtime started
    /// (the profiler attached, or `MONITOR_JIT_COMPILATION` was not in its
    /// mask from `Initialize` on).
    NotSeen,
}

/// Whether `key`'s IL was replaced through a claim.
pub fn is_replaced(key: MethodKey) -> bool {
    methods().get(&key).is_some_and(|m| m.replaced)
}

/// Runs `install` under the method `key`'s one IL replacement at JIT
/// time: in the first compilation of the method when `during` names that
/// compilation's function (call it from that function's
/// `JITCompilationStarted`), or before any compilation when it is `None`.
/// `Err` says why the replacement is refused (`install` does not run).
/// While `install` runs the table stays locked, so compilations starting
/// meanwhile on other threads wait and then read the new body; the
/// replacement stays when `install` returns `Ok`, and is given back when it
/// returns `Err` (or panics). A JIT compilation that starts on this thread
/// inside `install` (the runtime compiles nothing there; if it did) is not
/// waited for: the count is then no longer complete, and every later claim
/// is refused ([`Refusal::NotSeen`]).
pub fn claim<T>(
    key: MethodKey,
    during: Option<RawFunctionId>,
    install: impl FnOnce() -> crate::error::Result<T>,
) -> core::result::Result<crate::error::Result<T>, Refusal> {
    let mut methods = methods();
    let method = methods.entry(key).or_default();
    decide(
        method,
        COMPLETE.load(Ordering::SeqCst) == 1,
        COMPILING.with(Cell::get),
        key,
        during,
    )?;
    method.replaced = true;
    let claim = Claim {
        methods,
        key,
        done: false,
        _holding: Holding::enter(),
    };
    let result = install();
    if result.is_ok() {
        claim.done();
    }
    Ok(result)
}

thread_local! {
    /// Whether this thread holds the table's lock in a claim.
    static HOLDING: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as holding the table's lock while it lives.
struct Holding;

impl Holding {
    fn enter() -> Holding {
        HOLDING.with(|h| h.set(true));
        Holding
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        HOLDING.with(|h| h.set(false));
    }
}

/// The rule of [`claim`]: whether `key`, which the SDK knows as `method`,
/// may get its body now, with the count `complete` or not, this thread in
/// the `JITCompilationStarted` of `compiling`, for the compilation of
/// `during` (or before any compilation).
fn decide(
    method: &Method,
    complete: bool,
    compiling: Option<(RawFunctionId, MethodKey, bool)>,
    key: MethodKey,
    during: Option<RawFunctionId>,
) -> core::result::Result<(), Refusal> {
    if method.replaced {
        return Err(Refusal::AlreadyReplaced);
    }
    if !complete {
        return Err(Refusal::NotSeen);
    }
    match during {
        Some(function) => match compiling {
            Some((f, k, first)) if f == function && k == key => {
                if first && method.started == 1 {
                    Ok(())
                } else {
                    Err(Refusal::AlreadyCompiled)
                }
            }
            _ => Err(Refusal::NotCompiling),
        },
        None if method.started == 0 => Ok(()),
        None => Err(Refusal::AlreadyCompiled),
    }
}

/// A method's claimed IL replacement (see [`claim`]). Fields drop in
/// order: the table's lock before the thread's mark.
struct Claim {
    methods: MutexGuard<'static, BTreeMap<MethodKey, Method>>,
    key: MethodKey,
    done: bool,
    _holding: Holding,
}

impl Claim {
    /// The runtime has the body: the replacement stays for the life of the
    /// process.
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.done {
            if let Some(m) = self.methods.get_mut(&self.key) {
                m.replaced = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: MethodKey = (RawModuleId(0x10), MdMethodDef(0x0600_0001));
    const F: RawFunctionId = RawFunctionId(0x20);

    fn method(started: u32, replaced: bool) -> Method {
        Method { started, replaced }
    }

    #[test]
    fn a_body_is_installed_once_in_the_first_compilation_only() {
        let first = Some((F, KEY, true));
        assert_eq!(decide(&method(1, false), true, first, KEY, Some(F)), Ok(()));
        // Replaced before: a second body would rewrite the first.
        assert_eq!(
            decide(&method(1, true), true, first, KEY, Some(F)),
            Err(Refusal::AlreadyReplaced)
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
                Err(Refusal::AlreadyCompiled)
            );
        }
        // Outside the function's JITCompilationStarted on this thread.
        let other_f = Some((RawFunctionId(0x21), KEY, true));
        let other_key = Some((F, (RawModuleId(0x10), MdMethodDef(0x0600_0002)), true));
        for compiling in [None, other_f, other_key] {
            assert_eq!(
                decide(&method(1, false), true, compiling, KEY, Some(F)),
                Err(Refusal::NotCompiling)
            );
        }
        // A count the profiler did not see whole: nothing is told.
        assert_eq!(
            decide(&method(1, false), false, first, KEY, Some(F)),
            Err(Refusal::NotSeen)
        );
    }

    #[test]
    fn without_a_function_a_body_is_installed_before_any_compilation() {
        assert_eq!(decide(&method(0, false), true, None, KEY, None), Ok(()));
        assert_eq!(
            decide(&method(1, false), true, None, KEY, None),
            Err(Refusal::AlreadyCompiled)
        );
        assert_eq!(
            decide(&method(0, true), true, None, KEY, None),
            Err(Refusal::AlreadyReplaced)
        );
        assert_eq!(
            decide(&method(0, false), false, None, KEY, None),
            Err(Refusal::NotSeen)
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
