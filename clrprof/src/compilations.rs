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
//! thread) or before any, and only once. While a claim's installation runs,
//! the method is marked as being installed: a compilation of it starting
//! meanwhile on another thread (of another instantiation) waits, and then
//! reads the new body.
//!
//! The installation is the caller's code, so the table is not locked while
//! it runs (the fourth review, route 3: a claim that held the table's lock
//! hung the application when its closure asked [`is_replaced`], claimed
//! again or wrapped the method, all of which read the table). Inside a
//! claim, every call here answers as it would outside it: the method is
//! being replaced ([`is_replaced`] is `true`, a second claim is refused
//! [`Refusal::AlreadyReplaced`]), and other methods are claimed by their own
//! rule.
//!
//! The count is complete only for a profiler that had
//! `MONITOR_JIT_COMPILATION` in the runtime's mask from `Initialize` on
//! (not attached, never cleared): without it, [`claim`] refuses
//! ([`Refusal::NotSeen`]), since a compilation the SDK did not see may have
//! left tier-0 code of the original IL running. A mask change that would
//! end the count ends it *before* the runtime is called, and waits for the
//! claims in progress first (the fourth review, route 6: the runtime stops
//! sending `JITCompilationStarted` inside `SetEventMask`, so a count ended
//! after the call let a claim in for a method compiled meanwhile); inside a
//! claim, that change is refused ([`Error::WouldDeadlock`]: it would wait
//! for itself). Precompiled (ReadyToRun) code is not a compilation: the
//! first JIT compilation of such a method (tier 1) may still be claimed,
//! and precompiled code has no patchpoints.
//!
//! This module sits low in the crate (it names only IDs); the callback
//! object and the Info wrapper that sets event masks feed it, and the
//! method-wrapping crate (`clrprof-instrumentation`) claims through it.

use crate::error::Error;
use crate::ids::{MdMethodDef, RawFunctionId, RawModuleId};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// A method, by module and token.
pub type MethodKey = (RawModuleId, MdMethodDef);

/// What the SDK knows of a method.
#[derive(Default)]
struct Method {
    /// JIT compilations of it that started (saturating).
    started: u32,
    /// Whether its IL was replaced (or is being replaced) through a claim.
    replaced: bool,
    /// The thread ([`me`]) whose claim is installing its body now.
    installer: Option<usize>,
}

/// The claim table's contents.
struct Table {
    /// Every method the JIT compiled or a claim named since `Initialize`,
    /// for the life of the process (a few dozen bytes each). A module's ID
    /// is its address, which a module loaded after a collectible one
    /// unloaded may reuse: its methods may then be refused as compiled or
    /// replaced (nothing is installed), never given a body over code of
    /// another one.
    methods: BTreeMap<MethodKey, Method>,
    /// Claims whose installation runs now (with the table unlocked).
    installing: usize,
    /// Mask changes in progress that end the count: no claim is granted
    /// while one runs.
    ending: usize,
}

/// The claim table, the count's completeness, and the condition variable
/// installations end on. One per process ([`CLAIMS`]); unit tests make
/// their own.
struct Claims {
    table: Mutex<Table>,
    /// Notified whenever an installation ends.
    installed: Condvar,
    /// Whether the table saw every JIT compilation: 0 before the runtime's
    /// mask was first set, 1 while it is complete, 2 for good once it is
    /// not.
    complete: AtomicU8,
}

// reentrancy: claim-table
static CLAIMS: Claims = Claims::new();

thread_local! {
    // reentrancy: none: its address names the thread; it holds no state
    /// Its address names this thread (no destructor: always accessible).
    static ME: u8 = const { 0 };
    // reentrancy: claim-table
    /// How many claims this thread is inside (their installations run).
    static INSIDE: Cell<u32> = const { Cell::new(0) };
    // reentrancy: may-not-wait
    /// How many callbacks this thread is in whose scope keeps the runtime
    /// from suspending (see [`MayNotWait`]).
    static MAY_NOT_WAIT: Cell<u32> = const { Cell::new(0) };
    // reentrancy: jit-compilation-scope
    /// The compilation whose `JITCompilationStarted` this thread is in: the
    /// function, its method and whether it is the method's first.
    static COMPILING: Cell<Option<(RawFunctionId, MethodKey, bool)>> = const { Cell::new(None) };
}

/// This thread, as [`Method::installer`] names it.
fn me() -> usize {
    ME.with(|m| m as *const u8 as usize)
}

/// [`Claims::complete`] after a mask is set.
fn completeness(state: u8, monitors_jit: bool, attached: bool) -> u8 {
    match (state, monitors_jit && !attached) {
        (0 | 1, true) => 1,
        _ => 2,
    }
}

impl Claims {
    const fn new() -> Claims {
        Claims {
            table: Mutex::new(Table {
                methods: BTreeMap::new(),
                installing: 0,
                ending: 0,
            }),
            installed: Condvar::new(),
            complete: AtomicU8::new(0),
        }
    }

    fn lock_table(&self) -> MutexGuard<'_, Table> {
        // Plain data, and no code here panics while holding the lock: a
        // poisoned lock is still usable.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the next installation to end (the table unlocked
    /// meanwhile).
    fn wait_installed<'a>(&'a self, t: MutexGuard<'a, Table>) -> MutexGuard<'a, Table> {
        self.installed.wait(t).unwrap_or_else(|p| p.into_inner())
    }

    fn counting(&self) -> bool {
        self.complete.load(Ordering::SeqCst) != 2
    }

    fn mask_change(
        &self,
        call: &'static str,
        monitors_jit: bool,
        attached: bool,
    ) -> crate::error::Result<MaskChange<'_>> {
        let state = self.complete.load(Ordering::SeqCst);
        let ends = state != 2 && completeness(state, monitors_jit, attached) == 2;
        if ends {
            if INSIDE.with(Cell::get) > 0 {
                return Err(Error::WouldDeadlock {
                    call,
                    why: "this mask has no MONITOR_JIT_COMPILATION, which ends the SDK's count \
                          of JIT compilations, so it is set only once every method claim in \
                          progress has installed its body (the runtime compiles unseen from \
                          then on), and this thread is inside a claim (`compilations::claim`, \
                          or a wrapped body's installation): set the mask after the claim \
                          returns"
                        .into(),
                });
            }
            let mut t = self.lock_table();
            let may_not_wait =
                MAY_NOT_WAIT.with(Cell::get) > 0 || crate::suspends::thread_holds_suspension();
            if t.installing > 0 && may_not_wait {
                // Waiting here for another thread's installation would keep
                // every runtime suspension from completing meanwhile (this
                // thread is in a callback the runtime issues in cooperative
                // mode, or the runtime is suspended): an installation that
                // waits for one would never end (the fresh review of issue
                // 42).
                return Err(Error::WouldDeadlock {
                    call,
                    why: "this mask has no MONITOR_JIT_COMPILATION, which ends the SDK's count \
                          of JIT compilations, so it is set only once every method claim in \
                          progress has installed its body, and a claim is in progress on another \
                          thread; this callback keeps the runtime from suspending while it \
                          waits (a callback that receives ObjectIDs, an unwind callback, a GC or \
                          suspension callback), so an installation that waits for a suspension \
                          would never end: set the mask from a callback that runs in preemptive \
                          mode, or from a thread of the profiler's own"
                        .into(),
                });
            }
            t.ending += 1;
            while t.installing > 0 {
                t = self.wait_installed(t);
            }
        }
        Ok(MaskChange {
            claims: self,
            ends,
            monitors_jit,
            attached,
        })
    }

    fn compilation_started(&self, function: RawFunctionId, key: Option<MethodKey>) -> Compiling {
        let current = key.and_then(|key| {
            let me = me();
            let inside = INSIDE.with(Cell::get) > 0;
            let mut t = self.lock_table();
            loop {
                match t.methods.get(&key).and_then(|m| m.installer) {
                    // This thread is installing the method's body, or is
                    // inside a claim of another (the runtime compiles
                    // nothing inside SetILFunctionBody; if it did): waiting
                    // would never end (two claims' threads could wait for
                    // each other), and which body this compilation reads
                    // cannot be told. It goes uncounted: the count is
                    // incomplete.
                    Some(who) if who == me || inside => {
                        self.complete.store(2, Ordering::SeqCst);
                        return None;
                    }
                    Some(_) => t = self.wait_installed(t),
                    None => break,
                }
            }
            let method = t.methods.entry(key).or_default();
            method.started = method.started.saturating_add(1);
            Some((function, key, method.started == 1))
        });
        Compiling {
            outer: COMPILING.with(|c| c.replace(current)),
        }
    }

    fn is_replaced(&self, key: MethodKey) -> bool {
        // Never waits for an installation in progress (the fresh review of
        // issue 42: a thread in cooperative mode, `ObjectAllocated`, waiting
        // here kept every runtime suspension from completing while the
        // installation waited for one). A method being installed is being
        // replaced: `true`, on every thread.
        self.lock_table()
            .methods
            .get(&key)
            .is_some_and(|m| m.replaced)
    }

    fn claim<T>(
        &self,
        key: MethodKey,
        during: Option<RawFunctionId>,
        install: impl FnOnce() -> crate::error::Result<T>,
    ) -> core::result::Result<crate::error::Result<T>, Refusal> {
        {
            let mut t = self.lock_table();
            let complete = self.complete.load(Ordering::SeqCst) == 1 && t.ending == 0;
            let method = t.methods.entry(key).or_default();
            decide(method, complete, COMPILING.with(Cell::get), key, during)?;
            method.replaced = true;
            method.installer = Some(me());
            INSTALLS_BEGUN.store(true, Ordering::SeqCst);
            t.installing += 1;
        }
        // The table is unlocked: `install` may ask it anything.
        let claim = Claim::enter(self, key);
        let result = install();
        if result.is_ok() {
            claim.done();
        }
        Ok(result)
    }
}

/// Set before the first claim's installation begins in the process: only
/// then can a mask change wait for one.
static INSTALLS_BEGUN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether any claim's installation has begun in this process (one
/// relaxed load: what a callback reads before it marks its thread, so a
/// profiler that never claims pays no thread-local access per callback;
/// the instruction gate's `ObjectAllocated` row measured 48 instructions
/// for the two). A callback that began before the process's first
/// installation is not marked: a mask change it makes while that first
/// installation runs may wait for it (the one window left open, named in
/// the book's soundness chapter).
#[inline]
pub(crate) fn installs_begun() -> bool {
    INSTALLS_BEGUN.load(Ordering::Relaxed)
}

/// A callback in progress on this thread whose scope keeps the runtime
/// from suspending until it returns (`ProfilerInfo::wait_would_deadlock`:
/// cooperative mode, a GC or a suspension): nothing here waits for another
/// thread's claim meanwhile. Made by the callback object around such
/// callbacks, once [`installs_begun`].
pub(crate) struct MayNotWait(());

impl MayNotWait {
    pub(crate) fn enter() -> MayNotWait {
        MAY_NOT_WAIT.with(|n| n.set(n.get() + 1));
        MayNotWait(())
    }
}

impl Drop for MayNotWait {
    fn drop(&mut self) {
        MAY_NOT_WAIT.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// Whether compilations are still worth counting: once the count is
/// incomplete every claim is refused, whatever the table says.
pub(crate) fn counting() -> bool {
    CLAIMS.counting()
}

/// A mask change in progress (see [`mask_change`]): while a change that
/// ends the count lives, no claim is granted.
pub(crate) struct MaskChange<'a> {
    claims: &'a Claims,
    ends: bool,
    monitors_jit: bool,
    attached: bool,
}

/// Called before the runtime is asked for a mask: if the mask would end
/// the count, no claim is granted from now on, and the claims in progress
/// (on other threads) are waited for, so that every body granted lands
/// before the runtime stops announcing compilations. Refused with
/// [`Error::WouldDeadlock`] on a thread inside a claim (it would wait for
/// its own). Call [`MaskChange::applied`] once the runtime took the mask;
/// dropped without it (the runtime refused the mask), the count stays as
/// it was (it kept counting meanwhile).
pub(crate) fn mask_change(
    call: &'static str,
    monitors_jit: bool,
    attached: bool,
) -> crate::error::Result<MaskChange<'static>> {
    CLAIMS.mask_change(call, monitors_jit, attached)
}

impl MaskChange<'_> {
    /// The runtime took the mask: the count stays complete while the mask
    /// has `MONITOR_JIT_COMPILATION` from the first one on, in a profiler
    /// that did not attach.
    pub(crate) fn applied(self) {
        let (monitors_jit, attached) = (self.monitors_jit, self.attached);
        let _ = self
            .claims
            .complete
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |state| {
                Some(completeness(state, monitors_jit, attached))
            });
    }
}

impl Drop for MaskChange<'_> {
    fn drop(&mut self) {
        if self.ends {
            self.claims.lock_table().ending -= 1;
        }
    }
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
/// handler. A compilation of a method whose body another thread's claim is
/// installing waits for it (the table unlocked meanwhile).
pub(crate) fn compilation_started(function: RawFunctionId, key: Option<MethodKey>) -> Compiling {
    CLAIMS.compilation_started(function, key)
}

/// Why [`claim`] refused a method's IL replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The method's IL was replaced through a claim before (or is being
    /// replaced now, by a claim in progress).
    AlreadyReplaced,
    /// The JIT already compiled the method's IL (a later compilation: tier
    /// 1, an on-stack replacement, another generic instantiation).
    AlreadyCompiled,
    /// A claim for a compilation made outside that function's
    /// `JITCompilationStarted` on its thread.
    NotCompiling,
    /// The SDK did not see every JIT compilation since the runtime started
    /// (the profiler attached, or `MONITOR_JIT_COMPILATION` was not in its
    /// mask from `Initialize` on, or a mask without it is being set).
    NotSeen,
}

/// Whether `key`'s IL was replaced through a claim, or is being replaced
/// by a claim in progress (on any thread: `true` at once). It never waits:
/// a thread in cooperative mode (`ObjectAllocated`) that waited here for an
/// installation kept every runtime suspension from completing, and an
/// installation that waited for one never ended (the fresh review of
/// issue 42). A claim whose installation fails gives the method back
/// (`false` from then on).
pub fn is_replaced(key: MethodKey) -> bool {
    CLAIMS.is_replaced(key)
}

/// Runs `install` under the method `key`'s one IL replacement at JIT
/// time: in the first compilation of the method when `during` names that
/// compilation's function (call it from that function's
/// `JITCompilationStarted`), or before any compilation when it is `None`.
/// `Err` says why the replacement is refused (`install` does not run).
///
/// While `install` runs the method is marked as being installed, and the
/// table is not locked, so `install` may call anything here: inside the
/// claim the method is being replaced ([`is_replaced`] is `true`, a nested
/// claim of it is refused [`Refusal::AlreadyReplaced`]), other methods are
/// claimed by their own rule, and a mask change that would end the count is
/// refused ([`Error::WouldDeadlock`]). Compilations of the method starting
/// meanwhile on other threads wait and then read the new body. The
/// replacement stays when `install` returns `Ok`, and is given back when it
/// returns `Err` (or panics). Inside `install` nothing waits for another
/// claim (two claims' threads could wait for each other): [`is_replaced`]
/// answers `true` for a method another claim is installing, and a JIT
/// compilation of a method being installed that starts on this thread (the
/// runtime compiles nothing there; if it did) goes uncounted: the count is
/// then no longer complete, and every later claim is refused
/// ([`Refusal::NotSeen`]).
pub fn claim<T>(
    key: MethodKey,
    during: Option<RawFunctionId>,
    install: impl FnOnce() -> crate::error::Result<T>,
) -> core::result::Result<crate::error::Result<T>, Refusal> {
    CLAIMS.claim(key, during, install)
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

/// A method's claimed IL replacement while its installation runs (see
/// [`claim`]): this thread is inside a claim, the method marked as being
/// installed by it.
struct Claim<'a> {
    claims: &'a Claims,
    key: MethodKey,
    done: bool,
}

impl<'a> Claim<'a> {
    fn enter(claims: &'a Claims, key: MethodKey) -> Claim<'a> {
        INSIDE.with(|i| i.set(i.get() + 1));
        Claim {
            claims,
            key,
            done: false,
        }
    }

    /// The runtime has the body: the replacement stays for the life of the
    /// process.
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        {
            let mut t = self.claims.lock_table();
            t.installing -= 1;
            if let Some(m) = t.methods.get_mut(&self.key) {
                m.installer = None;
                if !self.done {
                    m.replaced = false;
                }
            }
        }
        INSIDE.with(|i| i.set(i.get() - 1));
        self.claims.installed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: MethodKey = (RawModuleId(0x10), MdMethodDef(0x0600_0001));
    const F: RawFunctionId = RawFunctionId(0x20);

    fn method(started: u32, replaced: bool) -> Method {
        Method {
            started,
            replaced,
            installer: None,
        }
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

    /// A claim table of its own, with a complete count, for the life of
    /// the test process.
    fn fresh() -> &'static Claims {
        let c: &'static Claims = Box::leak(Box::new(Claims::new()));
        c.complete.store(1, Ordering::SeqCst);
        c
    }

    /// Runs `f` on a thread of its own; a deadlock fails the test after
    /// 10 s instead of hanging it.
    fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("hung: a claim table call waited for this very thread")
    }

    const OTHER: MethodKey = (RawModuleId(0x10), MdMethodDef(0x0600_0002));
    const THIRD: MethodKey = (RawModuleId(0x10), MdMethodDef(0x0600_0003));

    #[test]
    fn inside_a_claim_the_table_answers_as_outside_it() {
        // The fourth review, route 3: the table's lock was held across the
        // closure, and each of these calls locked it again (a hang).
        let c = fresh();
        let (replaced, nested, other, mask) = bounded(move || {
            let r = c.claim(KEY, None, || {
                Ok((
                    c.is_replaced(KEY),
                    c.claim(KEY, None, || Ok(())).err(),
                    matches!(c.claim(OTHER, None, || Ok(7)), Ok(Ok(7))),
                    c.mask_change("ICorProfilerInfo::SetEventMask", false, false)
                        .err()
                        .map(|e| e.to_string()),
                ))
            });
            match r {
                Ok(Ok(v)) => v,
                _ => panic!("the claim itself was refused"),
            }
        });
        assert!(replaced, "inside its claim the method is being replaced");
        assert_eq!(nested, Some(Refusal::AlreadyReplaced));
        assert!(other, "another method is claimed by its own rule");
        let mask = mask.expect("a mask that ends the count is refused inside a claim");
        assert!(
            mask.starts_with("ICorProfilerInfo::SetEventMask refused (nothing was requested)")
                && mask.contains("this thread is inside a claim"),
            "{mask}"
        );
        // Both bodies stay; outside the claims a mask change proceeds.
        assert!(c.is_replaced(KEY) && c.is_replaced(OTHER));
        assert!(bounded(move || c
            .mask_change("SetEventMask", false, false)
            .is_ok()));
    }

    #[test]
    fn a_failed_installation_gives_the_method_back() {
        let c = fresh();
        let r = c.claim(KEY, None, || -> crate::error::Result<()> {
            Err(Error::Usage("no body".into()))
        });
        assert!(matches!(r, Ok(Err(_))));
        assert!(!c.is_replaced(KEY));
        assert!(matches!(c.claim(KEY, None, || Ok(())), Ok(Ok(()))));
        // A panicking installation too (the claim's guard unwinds).
        let p = std::panic::catch_unwind(|| {
            c.claim(OTHER, None, || -> crate::error::Result<()> {
                panic!("install")
            })
        });
        assert!(p.is_err());
        assert!(!c.is_replaced(OTHER));
        assert_eq!(c.lock_table().installing, 0);
        assert_eq!(INSIDE.with(Cell::get), 0);
    }

    /// A claim on a thread of its own whose installation waits for `go`,
    /// then returns `ok`; `entered` is sent once it runs.
    fn claim_in_progress(
        c: &'static Claims,
        key: MethodKey,
        ok: bool,
    ) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<bool>) {
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let r = c.claim(key, None, || {
                let _ = entered_tx.send(());
                let _ = go_rx.recv();
                if ok {
                    Ok(())
                } else {
                    Err(Error::Usage("refused".into()))
                }
            });
            matches!(r, Ok(Ok(())))
        });
        entered_rx.recv().expect("the installation ran");
        (go_tx, t)
    }

    #[test]
    fn other_threads_wait_for_an_installation_in_progress() {
        let c = fresh();
        let (go, t) = claim_in_progress(c, KEY, true);
        // A compilation of the method on another thread waits.
        let compiled = std::thread::spawn(move || {
            let _scope = c.compilation_started(F, Some(KEY));
            COMPILING.with(Cell::get)
        });
        // `is_replaced` does not (the fresh review of issue 42: a thread in
        // cooperative mode waiting here kept the runtime from suspending):
        // the method is being replaced.
        assert!(bounded(move || c.is_replaced(KEY)));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!compiled.is_finished(), "the compilation did not wait");
        // Another method's compilation does not wait.
        assert!(bounded(move || {
            let _scope = c.compilation_started(F, Some(OTHER));
            true
        }));
        go.send(()).unwrap();
        assert!(t.join().unwrap());
        assert!(c.is_replaced(KEY), "the body was installed");
        // The compilation was counted after the installation: its first.
        assert_eq!(compiled.join().unwrap(), Some((F, KEY, true)));
        assert_eq!(c.lock_table().methods[&KEY].started, 1);

        // An installation that fails: being replaced while it runs, given
        // back after.
        let (go, t) = claim_in_progress(c, THIRD, false);
        assert!(bounded(move || c.is_replaced(THIRD)));
        go.send(()).unwrap();
        assert!(!t.join().unwrap());
        assert!(!c.is_replaced(THIRD));
    }

    #[test]
    fn a_thread_that_keeps_the_runtime_from_suspending_waits_for_no_claim() {
        // The fresh review of issue 42: an ObjectAllocated (cooperative
        // mode) that waited for another thread's installation kept every
        // suspension from completing, and the installation waited for one.
        let c = fresh();
        let (go, t) = claim_in_progress(c, KEY, true);
        let refused = bounded(move || {
            let _coop = MayNotWait::enter();
            c.mask_change("ICorProfilerInfo::SetEventMask", false, false)
                .err()
                .map(|e| e.to_string())
        })
        .expect("a mask that would wait for the claim is refused");
        assert!(
            refused.starts_with("ICorProfilerInfo::SetEventMask refused (nothing was requested)")
                && refused.contains("a claim is in progress on another thread"),
            "{refused}"
        );
        // Nothing changed: claims are still granted, the count goes on.
        assert!(c.counting());
        assert!(matches!(c.claim(OTHER, None, || Ok(())), Ok(Ok(()))));
        // With no claim in progress it need not wait, and proceeds.
        go.send(()).unwrap();
        assert!(t.join().unwrap());
        assert!(bounded(move || {
            let _coop = MayNotWait::enter();
            c.mask_change("SetEventMask", false, false).is_ok()
        }));
        assert_eq!(MAY_NOT_WAIT.with(Cell::get), 0);
    }

    #[test]
    fn two_claims_asking_for_each_other_s_method_do_not_wait_for_each_other() {
        // Inside a claim nothing waits for another thread's claim: A inside
        // its claim asks about B's method while B, inside its own, asks
        // about A's (a `wrap` of each other's method does so).
        let c = fresh();
        let (a_in, a_rx) = std::sync::mpsc::channel::<()>();
        let (b_in, b_rx) = std::sync::mpsc::channel::<()>();
        let a = std::thread::spawn(move || {
            c.claim(KEY, None, || {
                a_in.send(()).unwrap();
                b_rx.recv().unwrap();
                Ok(c.is_replaced(OTHER))
            })
        });
        let b = std::thread::spawn(move || {
            c.claim(OTHER, None, || {
                b_in.send(()).unwrap();
                a_rx.recv().unwrap();
                Ok(c.is_replaced(KEY))
            })
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send((a.join().unwrap(), b.join().unwrap()));
        });
        let (a, b) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("hung: two claims waited for each other");
        // Each other's method is being replaced.
        assert!(matches!(a, Ok(Ok(true))) && matches!(b, Ok(Ok(true))));
        // A compilation inside a claim of another method being installed
        // does not wait either: it goes uncounted, and the count ends.
        let d = fresh();
        let (go, t) = claim_in_progress(d, KEY, true);
        let counted = bounded(move || {
            d.claim(OTHER, None, || {
                let _scope = d.compilation_started(F, Some(KEY));
                Ok(COMPILING.with(Cell::get))
            })
        });
        assert!(matches!(counted, Ok(Ok(None))));
        assert!(!d.counting());
        go.send(()).unwrap();
        assert!(t.join().unwrap());
    }

    #[test]
    fn a_mask_that_ends_the_count_waits_for_claims_in_progress_and_stops_new_ones() {
        // The fourth review, route 6: the count was marked incomplete only
        // after the runtime took the mask.
        let c = fresh();
        let (go, t) = claim_in_progress(c, KEY, true);
        let changing = std::thread::spawn(move || {
            let change = c.mask_change("SetEventMask", false, false).unwrap();
            // While it lives no claim is granted.
            let refused = c.claim(OTHER, None, || Ok(())).err();
            (c.is_replaced(KEY), refused, change)
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!changing.is_finished(), "the mask change did not wait");
        go.send(()).unwrap();
        assert!(t.join().unwrap());
        let (installed, refused, change) = changing.join().unwrap();
        assert!(installed, "the claim in progress landed before the mask");
        assert_eq!(refused, Some(Refusal::NotSeen));
        // The runtime refused the mask: the count goes on.
        drop(change);
        assert!(c.counting());
        assert!(matches!(c.claim(OTHER, None, || Ok(())), Ok(Ok(()))));
        // It took it: for good.
        c.mask_change("SetEventMask", false, false)
            .unwrap()
            .applied();
        assert!(!c.counting());
        assert_eq!(
            c.claim(THIRD, None, || Ok(())).err(),
            Some(Refusal::NotSeen)
        );
        // A mask with the JIT events never waits or ends anything.
        let d = fresh();
        let (go, t) = claim_in_progress(d, KEY, true);
        assert!(bounded(move || {
            d.mask_change("SetEventMask", true, false)
                .unwrap()
                .applied();
            d.counting()
        }));
        go.send(()).unwrap();
        assert!(t.join().unwrap());
    }

    #[test]
    fn a_compilation_inside_the_method_s_own_installation_ends_the_count() {
        let c = fresh();
        let r = bounded(move || {
            c.claim(KEY, None, || {
                let _scope = c.compilation_started(F, Some(KEY));
                Ok(COMPILING.with(Cell::get))
            })
        });
        assert!(matches!(r, Ok(Ok(None))));
        assert!(!c.counting());
    }
}
