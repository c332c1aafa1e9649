//! ELT hooks: the runtime's enter / leave / tailcall notifications.
//!
//! A profiler that sets `COR_PRF_MONITOR_ENTERLEAVE` registers three hooks
//! with `ICorProfilerInfo3`. There are two variants, and clrprof provides an
//! entry point for each:
//!
//! | registered with | runtime calls it | clrprof entry point | handler slot |
//! |---|---|---|---|
//! | `SetEnterLeaveFunctionHooks3` (fast path) | straight from jitted code, JIT register convention | [`enter3_trampoline`], [`leave3_trampoline`], [`tailcall3_trampoline`] (assembly) | [`set_enter3_handler`] ... |
//! | `SetEnterLeaveFunctionHooks3WithInfo` | through the runtime's own stub, normal C ABI | [`clrprof_elt_enter3_with_info`], [`clrprof_elt_leave3_with_info`], [`clrprof_elt_tailcall3_with_info`] | [`set_enter3_with_info_handler`] ... |
//!
//! # Fast path
//!
//! When the event mask has none of `COR_PRF_ENABLE_FUNCTION_ARGS`,
//! `COR_PRF_ENABLE_FUNCTION_RETVAL` and `COR_PRF_ENABLE_FRAME_INFO`, the
//! runtime hands the registered `FunctionEnter3`/`Leave3`/`Tailcall3` addresses
//! to the JIT as the targets of its profiler helper calls
//! (`CORINFO_HELP_PROF_FCN_ENTER` / `_LEAVE` / `_TAILCALL`). Jitted code then
//! calls them with the JIT's own convention, not the platform C ABI: the
//! function ID (or the client ID returned by the `FunctionIDMapper`) is in a
//! JIT-chosen register, and the JIT assumes that registers the C ABI lets a
//! callee clobber still hold argument and return values after the call. A
//! Rust `extern` function registered there directly would corrupt the
//! program. So clrprof registers small assembly trampolines
//! (`clrprof-sys/asm/`, built by `build.rs`) that save what the JIT keeps
//! live, call a C-ABI handler `unsafe extern "C" fn(usize)` with the ID as
//! its argument, restore, and return.
//!
//! The handler is read from a pointer-sized slot owned by the assembly file
//! (`clrprof_elt_enter_handler` etc.), so it can be installed and replaced at
//! run time with one atomic store; a zero slot makes the trampoline return at
//! once. Dispatch allocates nothing and takes no lock. Slots and trampolines
//! have hidden (library-local) visibility, so two clrprof-based profilers
//! loaded into one process each keep their own.
//!
//! What each trampoline preserves, from the JIT's target headers
//! (`targetamd64.h`, `targetarm64.h`: `REG_PROFILER_*`, `RBM_PROFILER_*_TRASH`)
//! and its codegen for the helper calls (`genProfilingEnterCallback`,
//! `genProfilingLeaveCallback`):
//!
//! * **x86_64 System V** (Linux, macOS), `asm/elt_x86_64_sysv.S`.
//!   Enter: ID in `r14` (caller SP in `r15`); the JIT keeps the argument
//!   registers `rdi rsi rdx rcx r8 r9` and `xmm0`-`xmm7` live across the call.
//!   Leave and tailcall: ID in `rdi` (caller SP in `rsi`); the JIT keeps the
//!   return registers `rax rdx xmm0 xmm1` live. All three may clobber `r10`,
//!   `r11` (the JIT's call-target register) and `xmm8`-`xmm15`. Every
//!   trampoline saves the union: `rax rcx rdx rsi rdi r8 r9` and all 128
//!   bits of `xmm0`-`xmm7`; `rbx rbp r12`-`r15` are kept by the handler
//!   under the C ABI.
//! * **x86_64 Windows**, `asm/elt_x86_64_win64.S` (GNU) /
//!   `asm/elt_x86_64_win64.asm` (MASM). All three: ID in `rcx` (caller SP in
//!   `rdx`). Enter: the JIT stores the argument registers to their home
//!   slots before the call and reloads them after it, so it assumes every
//!   volatile register is clobbered. Leave and tailcall: the JIT keeps `rax`
//!   and `xmm0` live. Every trampoline saves `rax rcx rdx r8 r9` and all
//!   128 bits of `xmm0`-`xmm5`, i.e. every volatile register except `r10`
//!   and `r11`; `rbx rbp rsi rdi r12`-`r15 xmm6`-`xmm15` are kept by the
//!   handler under the C ABI. The handler gets its 32-byte home area.
//! * **aarch64** (Linux, macOS), `asm/elt_aarch64.S`. All three: ID in `x10`
//!   (caller SP in `x11`); the JIT keeps `x0`-`x7`, `x8` (indirect result),
//!   all 128 bits of `q0`-`q7` and `fp` live; `x9`-`x17`, `lr` and
//!   `v16`-`v31` may be clobbered. Every trampoline saves `fp lr x0`-`x8`
//!   and `q0`-`q7`; `x19`-`x28` and the low halves of `v8`-`v15` are kept by
//!   the handler under the C ABI.
//!
//! In every case the stack pointer is restored, the handler is called with
//! the stack aligned as its ABI requires (the JIT calls with a 16-byte
//! aligned stack), and the trampolines carry unwind information (CFI on ELF
//! and Mach-O, SEH on Windows) so profilers and debuggers can walk through
//! them. Upper halves of YMM/ZMM registers and AVX-512 / SVE state are not
//! saved: the JIT does not keep values there across these calls.
//!
//! On other targets `build.rs` builds no trampolines and the fast-path
//! items of this module do not exist (`cfg(clrprof_elt)` is off); the
//! WithInfo entry points work everywhere.
//!
//! # WithInfo variant
//!
//! With the ARGS/RETVAL/FRAME_INFO flags, the runtime calls the hooks
//! registered by `SetEnterLeaveFunctionHooks3WithInfo` from its own assembly
//! stub, with the normal C ABI and an `eltInfo` handle for
//! `GetFunctionEnter3Info` and friends. clrprof's entry points for that
//! variant are plain Rust functions that forward `(id, eltInfo)` to handlers
//! of type [`EltWithInfoHandler`], installed the same way.
//!
//! # Handlers
//!
//! Handlers run on whatever thread executes managed code, concurrently, in
//! the middle of a managed method's prolog or epilog. They must not unwind
//! (an `extern "C"` function that panics aborts the process; the safe
//! `clrprof` layer catches panics before they get there), must not call
//! back into managed code, and must stay loaded while installed.

use core::sync::atomic::{AtomicUsize, Ordering};

#[cfg(clrprof_elt)]
use crate::corprof::{FunctionEnter3, FunctionLeave3, FunctionTailcall3};
use crate::corprof::{
    FunctionEnter3WithInfo, FunctionIDOrClientID, FunctionLeave3WithInfo,
    FunctionTailcall3WithInfo, COR_PRF_ELT_INFO,
};

/// A fast-path ELT handler: receives the function ID, or the client ID the
/// profiler's `FunctionIDMapper` returned for it.
pub type EltHandler = unsafe extern "C" fn(function_id_or_client_id: usize);

/// A WithInfo ELT handler: receives the function or client ID and the
/// `COR_PRF_ELT_INFO` handle, valid only during the call, for
/// `GetFunctionEnter3Info` / `GetFunctionLeave3Info` / `GetFunctionTailcall3Info`.
pub type EltWithInfoHandler =
    unsafe extern "C" fn(function_id_or_client_id: usize, elt_info: usize);

#[cfg(clrprof_elt)]
extern "C" {
    /// Fast-path enter trampoline (assembly). Never call it from Rust: it
    /// expects the JIT's register convention. Only its address is used, via
    /// [`enter3_trampoline`].
    pub fn clrprof_elt_enter3_trampoline();
    /// Fast-path leave trampoline (assembly); see [`leave3_trampoline`].
    pub fn clrprof_elt_leave3_trampoline();
    /// Fast-path tailcall trampoline (assembly); see [`tailcall3_trampoline`].
    pub fn clrprof_elt_tailcall3_trampoline();

    static clrprof_elt_enter_handler: AtomicUsize;
    static clrprof_elt_leave_handler: AtomicUsize;
    static clrprof_elt_tailcall_handler: AtomicUsize;
}

/// Address of the enter trampoline, to pass as `pFuncEnter3` to
/// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3`.
///
/// The returned pointer has the IDL's type only so it can be handed to the
/// runtime: it must only ever be called by jitted code. Calling it from
/// Rust passes the ID in the wrong register on x86_64 System V and aarch64.
#[cfg(clrprof_elt)]
pub fn enter3_trampoline() -> FunctionEnter3 {
    let code = clrprof_elt_enter3_trampoline as unsafe extern "C" fn();
    // SAFETY: both types are plain code pointers of the same size; the
    // runtime calls this address with the JIT's FunctionEnter3 convention,
    // which is what the trampoline implements.
    unsafe { core::mem::transmute::<unsafe extern "C" fn(), FunctionEnter3>(code) }
}

/// Address of the leave trampoline, to pass as `pFuncLeave3` to
/// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3`. Same caveat as
/// [`enter3_trampoline`].
#[cfg(clrprof_elt)]
pub fn leave3_trampoline() -> FunctionLeave3 {
    let code = clrprof_elt_leave3_trampoline as unsafe extern "C" fn();
    // SAFETY: as in `enter3_trampoline`; the runtime calls it with the JIT's
    // FunctionLeave3 convention.
    unsafe { core::mem::transmute::<unsafe extern "C" fn(), FunctionLeave3>(code) }
}

/// Address of the tailcall trampoline, to pass as `pFuncTailcall3` to
/// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3`. Same caveat as
/// [`enter3_trampoline`].
#[cfg(clrprof_elt)]
pub fn tailcall3_trampoline() -> FunctionTailcall3 {
    let code = clrprof_elt_tailcall3_trampoline as unsafe extern "C" fn();
    // SAFETY: as in `enter3_trampoline`; the runtime calls it with the JIT's
    // FunctionTailcall3 convention.
    unsafe { core::mem::transmute::<unsafe extern "C" fn(), FunctionTailcall3>(code) }
}

#[cfg(clrprof_elt)]
fn enter_slot() -> &'static AtomicUsize {
    // SAFETY: the assembly defines the slot as an 8-byte aligned, zeroed,
    // pointer-sized word in writable data, which is a valid AtomicUsize.
    unsafe { &clrprof_elt_enter_handler }
}

#[cfg(clrprof_elt)]
fn leave_slot() -> &'static AtomicUsize {
    // SAFETY: as in `enter_slot`.
    unsafe { &clrprof_elt_leave_handler }
}

#[cfg(clrprof_elt)]
fn tailcall_slot() -> &'static AtomicUsize {
    // SAFETY: as in `enter_slot`.
    unsafe { &clrprof_elt_tailcall_handler }
}

static ENTER3_WITH_INFO_HANDLER: AtomicUsize = AtomicUsize::new(0);
static LEAVE3_WITH_INFO_HANDLER: AtomicUsize = AtomicUsize::new(0);
static TAILCALL3_WITH_INFO_HANDLER: AtomicUsize = AtomicUsize::new(0);

fn store<F: Copy>(slot: &AtomicUsize, handler: Option<F>, to_address: fn(F) -> usize) {
    slot.store(handler.map_or(0, to_address), Ordering::Release);
}

fn load_handler(slot: &AtomicUsize) -> Option<EltHandler> {
    match slot.load(Ordering::Acquire) {
        0 => None,
        // SAFETY: a non-zero value in a fast-path slot was stored from an
        // `EltHandler` by `store`, so it is that function's address.
        address => Some(unsafe { core::mem::transmute::<usize, EltHandler>(address) }),
    }
}

fn load_with_info_handler(slot: &AtomicUsize) -> Option<EltWithInfoHandler> {
    match slot.load(Ordering::Acquire) {
        0 => None,
        // SAFETY: a non-zero value in a WithInfo slot was stored from an
        // `EltWithInfoHandler` by `store`, so it is that function's address.
        address => Some(unsafe { core::mem::transmute::<usize, EltWithInfoHandler>(address) }),
    }
}

/// Installs (or with `None`, removes) the handler the enter trampoline calls.
///
/// # Safety
///
/// Until it is replaced and no thread can still be inside it, `handler`
/// must be callable from any thread at any time, concurrently, with any
/// ID, and must not unwind (see the module docs).
#[cfg(clrprof_elt)]
pub unsafe fn set_enter3_handler(handler: Option<EltHandler>) {
    store(enter_slot(), handler, |f| f as usize);
}

/// Installs (or removes) the handler the leave trampoline calls.
///
/// # Safety
///
/// As for [`set_enter3_handler`].
#[cfg(clrprof_elt)]
pub unsafe fn set_leave3_handler(handler: Option<EltHandler>) {
    store(leave_slot(), handler, |f| f as usize);
}

/// Installs (or removes) the handler the tailcall trampoline calls.
///
/// # Safety
///
/// As for [`set_enter3_handler`].
#[cfg(clrprof_elt)]
pub unsafe fn set_tailcall3_handler(handler: Option<EltHandler>) {
    store(tailcall_slot(), handler, |f| f as usize);
}

/// The handler the enter trampoline currently calls.
#[cfg(clrprof_elt)]
pub fn enter3_handler() -> Option<EltHandler> {
    load_handler(enter_slot())
}

/// The handler the leave trampoline currently calls.
#[cfg(clrprof_elt)]
pub fn leave3_handler() -> Option<EltHandler> {
    load_handler(leave_slot())
}

/// The handler the tailcall trampoline currently calls.
#[cfg(clrprof_elt)]
pub fn tailcall3_handler() -> Option<EltHandler> {
    load_handler(tailcall_slot())
}

/// Installs (or removes) the handler [`clrprof_elt_enter3_with_info`] calls.
///
/// # Safety
///
/// As for the fast-path setters: the handler must be callable from any
/// thread at any time, concurrently, and must not unwind.
pub unsafe fn set_enter3_with_info_handler(handler: Option<EltWithInfoHandler>) {
    store(&ENTER3_WITH_INFO_HANDLER, handler, |f| f as usize);
}

/// Installs (or removes) the handler [`clrprof_elt_leave3_with_info`] calls.
///
/// # Safety
///
/// As for [`set_enter3_with_info_handler`].
pub unsafe fn set_leave3_with_info_handler(handler: Option<EltWithInfoHandler>) {
    store(&LEAVE3_WITH_INFO_HANDLER, handler, |f| f as usize);
}

/// Installs (or removes) the handler [`clrprof_elt_tailcall3_with_info`] calls.
///
/// # Safety
///
/// As for [`set_enter3_with_info_handler`].
pub unsafe fn set_tailcall3_with_info_handler(handler: Option<EltWithInfoHandler>) {
    store(&TAILCALL3_WITH_INFO_HANDLER, handler, |f| f as usize);
}

fn dispatch_with_info(slot: &AtomicUsize, id: FunctionIDOrClientID, elt_info: COR_PRF_ELT_INFO) {
    if let Some(handler) = load_with_info_handler(slot) {
        // SAFETY: both union fields are pointer-sized integers, so reading
        // either is valid for any value the runtime passes.
        let id = unsafe { id.clientID };
        // SAFETY: the handler was installed through an unsafe setter whose
        // caller promised it may be called from any thread at any time.
        unsafe { handler(id, elt_info) }
    }
}

/// `FunctionEnter3WithInfo` entry point, to pass to
/// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3WithInfo`. Forwards to the
/// handler installed with [`set_enter3_with_info_handler`], if any.
pub extern "system" fn clrprof_elt_enter3_with_info(
    function_id_or_client_id: FunctionIDOrClientID,
    elt_info: COR_PRF_ELT_INFO,
) {
    dispatch_with_info(
        &ENTER3_WITH_INFO_HANDLER,
        function_id_or_client_id,
        elt_info,
    );
}

/// `FunctionLeave3WithInfo` entry point; forwards to the handler installed
/// with [`set_leave3_with_info_handler`], if any.
pub extern "system" fn clrprof_elt_leave3_with_info(
    function_id_or_client_id: FunctionIDOrClientID,
    elt_info: COR_PRF_ELT_INFO,
) {
    dispatch_with_info(
        &LEAVE3_WITH_INFO_HANDLER,
        function_id_or_client_id,
        elt_info,
    );
}

/// `FunctionTailcall3WithInfo` entry point; forwards to the handler
/// installed with [`set_tailcall3_with_info_handler`], if any.
pub extern "system" fn clrprof_elt_tailcall3_with_info(
    function_id_or_client_id: FunctionIDOrClientID,
    elt_info: COR_PRF_ELT_INFO,
) {
    dispatch_with_info(
        &TAILCALL3_WITH_INFO_HANDLER,
        function_id_or_client_id,
        elt_info,
    );
}

/// [`clrprof_elt_enter3_with_info`] as the IDL's `FunctionEnter3WithInfo`.
pub fn enter3_with_info_hook() -> FunctionEnter3WithInfo {
    clrprof_elt_enter3_with_info
}

/// [`clrprof_elt_leave3_with_info`] as the IDL's `FunctionLeave3WithInfo`.
pub fn leave3_with_info_hook() -> FunctionLeave3WithInfo {
    clrprof_elt_leave3_with_info
}

/// [`clrprof_elt_tailcall3_with_info`] as the IDL's `FunctionTailcall3WithInfo`.
pub fn tailcall3_with_info_hook() -> FunctionTailcall3WithInfo {
    clrprof_elt_tailcall3_with_info
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static SEEN: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];

    unsafe extern "C" fn record_enter(id: usize, info: usize) {
        SEEN[0].store(id, Ordering::SeqCst);
        SEEN[1].store(info, Ordering::SeqCst);
    }
    unsafe extern "C" fn record_leave(id: usize, info: usize) {
        SEEN[2].store(id, Ordering::SeqCst);
        SEEN[3].store(info, Ordering::SeqCst);
    }
    unsafe extern "C" fn record_tailcall(id: usize, info: usize) {
        SEEN[4].store(id, Ordering::SeqCst);
        SEEN[5].store(info, Ordering::SeqCst);
    }

    fn id(value: usize) -> FunctionIDOrClientID {
        FunctionIDOrClientID { clientID: value }
    }

    #[test]
    fn with_info_entry_points_forward_id_and_info_to_their_own_handler() {
        // SAFETY: the recording handlers only store to atomics.
        unsafe {
            set_enter3_with_info_handler(Some(record_enter));
            set_leave3_with_info_handler(Some(record_leave));
            set_tailcall3_with_info_handler(Some(record_tailcall));
        }
        // SAFETY: calling through the IDL types with the C ABI, as the
        // runtime's stub does.
        unsafe {
            enter3_with_info_hook()(id(0x1111), 0xA1);
            leave3_with_info_hook()(id(0x2222), 0xA2);
            tailcall3_with_info_hook()(id(0x3333), 0xA3);
        }
        let seen: Vec<usize> = SEEN.iter().map(|v| v.load(Ordering::SeqCst)).collect();
        assert_eq!(seen, [0x1111, 0xA1, 0x2222, 0xA2, 0x3333, 0xA3]);

        // SAFETY: removing handlers is always allowed.
        unsafe {
            set_enter3_with_info_handler(None);
            set_leave3_with_info_handler(None);
            set_tailcall3_with_info_handler(None);
        }
        clrprof_elt_enter3_with_info(id(0x4444), 0xB1);
        clrprof_elt_leave3_with_info(id(0x4444), 0xB2);
        clrprof_elt_tailcall3_with_info(id(0x4444), 0xB3);
        let after: Vec<usize> = SEEN.iter().map(|v| v.load(Ordering::SeqCst)).collect();
        assert_eq!(after, seen, "an empty slot must not call anything");
    }
}
