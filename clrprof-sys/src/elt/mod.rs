//! ELT hooks: the runtime's enter / leave / tailcall notifications.
//!
//! A profiler that sets `COR_PRF_MONITOR_ENTERLEAVE` registers three hooks
//! with `ICorProfilerInfo3`. There are two variants, and clrprof provides an
//! assembly trampoline for each hook of each:
//!
//! | registered with | runtime calls it | clrprof entry point | handler slot |
//! |---|---|---|---|
//! | `SetEnterLeaveFunctionHooks3` (fast path) | straight from jitted code, JIT register convention | [`enter3_trampoline`], [`leave3_trampoline`], [`tailcall3_trampoline`] | [`set_enter3_handler`] ... |
//! | `SetEnterLeaveFunctionHooks3WithInfo` | through the runtime's own stub, normal C ABI | [`enter3_with_info_hook`], [`leave3_with_info_hook`], [`tailcall3_with_info_hook`] | [`set_enter3_with_info_handler`] ... |
//!
//! Every trampoline saves the argument and return registers its caller
//! expects back (for the fast path: the ones the JIT keeps live across that
//! hook kind, no more), calls a C-ABI handler through its slot, restores
//! them and returns. The slots belong to the assembly
//! (`clrprof_elt_enter_handler` etc.) and always hold a function (the
//! no-op handler when none is installed), so the trampoline calls through
//! the slot with no test, and a handler is installed and replaced at run
//! time with one atomic store. Dispatch allocates nothing and takes no
//! lock. Slots and trampolines have hidden (library-local) visibility
//! where the object format has it, so two clrprof-based profilers loaded
//! into one process each keep their own.
//!
//! # One source per calling convention
//!
//! The trampolines are `core::arch::global_asm!` blocks, assembled by rustc
//! itself for every target of their convention, with no external assembler:
//! `src/elt/x86_64_sysv.rs` (x86-64 Linux, Android, macOS),
//! `src/elt/x86_64_win64.rs` (x86-64 Windows:
//! MSVC and GNU toolchains assemble the same text) and `src/elt/aarch64.rs`
//! (AArch64 Linux, Android, macOS). The per-object-format differences
//! (symbol directives, Mach-O's `@PAGE` relocations, Win64 SEH unwind
//! directives) are inside those files. On other targets there are no
//! trampolines, `cfg(clrprof_elt)` is off, the fast-path items of this
//! module do not exist, and the WithInfo entry points are plain Rust
//! functions that forward to the same slots without saving registers.
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
//! program. The trampoline moves the ID to the handler's first argument
//! (`unsafe extern "C" fn(usize)`) and keeps the rest.
//!
//! What each trampoline preserves, from the JIT's target headers
//! (`targetamd64.h`, `targetarm64.h`: `REG_PROFILER_*`, `RBM_PROFILER_*_TRASH`;
//! .NET Core 3.1's `target.h`) and its codegen for the helper calls
//! (`genProfilingEnterCallback`, `genProfilingLeaveCallback`):
//!
//! * **x86-64 System V** (Linux, macOS). Enter: ID in `r14` (caller SP in
//!   `r15`, which the trampoline leaves for the handler); the JIT keeps the argument registers `rdi rsi rdx rcx r8 r9`
//!   and `xmm0`-`xmm7` live across the call and lets it clobber `rax`,
//!   `r10`, `r11` and `xmm8`-`xmm15`; the enter trampoline saves those
//!   argument registers (all 128 bits of the XMM ones). Leave and
//!   tailcall: ID in `rdi` (caller SP in `rsi`); the JIT keeps the return
//!   registers `rax rdx xmm0 xmm1` live; those trampolines save just
//!   those four. `rbx rbp r12`-`r15` are kept by the handler under the C
//!   ABI.
//! * **x86-64 Windows**. All three: ID in `rcx` (caller SP in `rdx`).
//!   Enter: the JIT stores the argument registers to their home slots
//!   before the call and reloads them after it (integer and floating-point
//!   ones), so it assumes every volatile register is clobbered: the enter
//!   trampoline saves nothing and only provides the handler's 32-byte home
//!   area. Leave and tailcall: the JIT keeps `rax` and `xmm0` live; those
//!   trampolines save them (all 128 bits of `xmm0`). `rbx rbp rsi rdi
//!   r12`-`r15 xmm6`-`xmm15` are kept by the handler under the C ABI.
//! * **AArch64** (Linux, macOS). All three: ID in `x10` (caller SP in
//!   `x11`); the JIT keeps `x0`-`x7`, `x8` (indirect result), all 128 bits
//!   of `q0`-`q7` and `fp` live for every hook kind; `x9`-`x17`, `lr` and
//!   `v16`-`v31` may be clobbered. Every trampoline saves `fp lr x0`-`x8`
//!   and `q0`-`q7`; `x19`-`x28` and the low halves of `v8`-`v15` are kept
//!   by the handler under the C ABI.
//!
//! In every case the stack pointer is restored, the handler is called with
//! the stack aligned as its ABI requires (the JIT calls with a 16-byte
//! aligned stack), and the trampolines carry unwind information (CFI on ELF
//! and Mach-O, SEH `.pdata`/`.xdata` on Windows) so exceptions, profilers
//! and debuggers walk through them. Upper halves of YMM/ZMM registers and
//! AVX-512 / SVE state are not saved: the JIT does not keep values there
//! across these calls.
//!
//! # WithInfo variant
//!
//! With the ARGS/RETVAL/FRAME_INFO flags, the runtime calls the hooks
//! registered by `SetEnterLeaveFunctionHooks3WithInfo` from its own
//! assembly stub (`ProfileEnterNaked` / `ProfileLeaveNaked` /
//! `ProfileTailcallNaked`, through the C++ `ProfileEnter` ...), with the C
//! ABI and an `eltInfo` handle for `GetFunctionEnter3Info` and friends. The
//! stub, not the hook, is meant to keep the managed method's registers.
//! The .NET Core 3.1 stub for Linux x64 does not: it saves `xmm0`-`xmm7`
//! but restores only `xmm0` and `xmm1` after the enter hook, so
//! floating-point arguments in `xmm2`-`xmm7` come back as whatever the hook
//! left there (fixed in the runtime in .NET 5, which restores all eight).
//! So this module's WithInfo entry points are trampolines too: they save
//! every argument and return register (`rax rcx rdx rsi rdi r8 r9` and
//! `xmm0`-`xmm7` on System V; every volatile register but `r10`/`r11` on
//! Windows; `x0`-`x8`, `q0`-`q7` on AArch64), call the
//! [`EltWithInfoHandler`] with `(id, eltInfo)` unchanged, and restore.
//! They keep what the handler (user code: float formatting, allocation...)
//! would clobber; the runtime's own C++ frame between the stub and the
//! trampoline is the runtime's business, and on the runtimes tested it
//! leaves `xmm2`-`xmm7` alone. Where the runtime's stub itself restores
//! every register the JIT keeps live (.NET 5 and later on every
//! architecture, .NET Core 3.x on Windows; CoreCLR had no ELT on AArch64
//! before .NET 5), a profiler may register a plain C-ABI function instead
//! and pay nothing for register keeping; the safe `clrprof` layer does.
//! On .NET Core 3.x for Unix x64 the enter hook needs to keep only
//! `xmm2`-`xmm7` (its stub restores the rest), which is what
//! `enter3_with_info_netcore3_hook` (x86-64 System V only) does.
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
use crate::corprof::{FunctionEnter3WithInfo, FunctionLeave3WithInfo, FunctionTailcall3WithInfo};
#[cfg(not(clrprof_elt))]
use crate::corprof::{FunctionIDOrClientID, COR_PRF_ELT_INFO};

#[cfg(all(clrprof_elt, target_arch = "aarch64"))]
mod aarch64;
#[cfg(all(clrprof_elt, target_arch = "x86_64", not(windows)))]
mod x86_64_sysv;
#[cfg(all(clrprof_elt, target_arch = "x86_64", windows))]
mod x86_64_win64;

/// A fast-path ELT handler: receives the function ID, or the client ID the
/// profiler's `FunctionIDMapper` returned for it.
pub type EltHandler = unsafe extern "C" fn(function_id_or_client_id: usize);

/// A fast-path enter handler that also takes the hooked method's caller's
/// stack pointer, i.e. the stack address just above the return address of
/// the call that entered the method, as the JIT computes it for the
/// runtime's own enter stub (`profiledRsp` there; in `r15` on x86-64 System
/// V, `rdx` on Windows x64, `x11` on AArch64: the JIT's
/// `REG_PROFILER_ENTER_ARG_CALLER_SP`). A live caller's value is strictly
/// greater than its callee's (the stack grows down).
///
/// Installed with [`set_enter3_caller_sp_handler`]; the enter trampoline
/// reaches it when its own handler is [`enter3_caller_sp_forwarder`]. The
/// enter trampoline itself does not pass the value, so a profiler that
/// does not want it pays nothing for it.
pub type EltEnterHandler = unsafe extern "C" fn(function_id_or_client_id: usize, caller_sp: usize);

/// A WithInfo ELT handler: receives the function or client ID and the
/// `COR_PRF_ELT_INFO` handle, valid only during the call, for
/// `GetFunctionEnter3Info` / `GetFunctionLeave3Info` / `GetFunctionTailcall3Info`.
pub type EltWithInfoHandler =
    unsafe extern "C" fn(function_id_or_client_id: usize, elt_info: usize);

/// The symbols the assembly defines. Declared here so the `global_asm!`
/// blocks name them through `sym` operands (the compiler then spells each
/// name as the target's object format wants it).
#[cfg(clrprof_elt)]
mod asm_symbols {
    use crate::corprof::{FunctionIDOrClientID, COR_PRF_ELT_INFO};
    use core::sync::atomic::AtomicUsize;

    extern "C" {
        /// Fast-path enter trampoline. Never call it from Rust: it expects
        /// the JIT's register convention. Only its address is used, via
        /// [`enter3_trampoline`](super::enter3_trampoline).
        pub fn clrprof_elt_enter3_trampoline();
        /// Fast-path leave trampoline; see [`leave3_trampoline`](super::leave3_trampoline).
        pub fn clrprof_elt_leave3_trampoline();
        /// Fast-path tailcall trampoline; see [`tailcall3_trampoline`](super::tailcall3_trampoline).
        pub fn clrprof_elt_tailcall3_trampoline();
        /// The handler an empty slot holds: returns at once.
        pub fn clrprof_elt_noop_handler();
        /// An enter handler (the enter trampoline's slot) that calls the
        /// caller-SP slot's handler with the ID and the JIT's caller stack
        /// pointer; see [`enter3_caller_sp_forwarder`](super::enter3_caller_sp_forwarder).
        pub fn clrprof_elt_enter3_caller_sp_forwarder();

        pub(super) static clrprof_elt_enter_handler: AtomicUsize;
        pub(super) static clrprof_elt_leave_handler: AtomicUsize;
        pub(super) static clrprof_elt_tailcall_handler: AtomicUsize;
        pub(super) static clrprof_elt_enter_with_info_handler: AtomicUsize;
        pub(super) static clrprof_elt_leave_with_info_handler: AtomicUsize;
        pub(super) static clrprof_elt_tailcall_with_info_handler: AtomicUsize;
        pub(super) static clrprof_elt_enter_caller_sp_handler: AtomicUsize;
    }

    #[cfg(all(target_arch = "x86_64", not(windows)))]
    extern "system" {
        /// `FunctionEnter3WithInfo` trampoline for the .NET Core 3.x stub
        /// on x86-64 System V (C ABI; keeps `xmm2`-`xmm7`, the only
        /// argument registers that stub does not restore): forwards to the
        /// handler installed with
        /// [`set_enter3_with_info_handler`](super::set_enter3_with_info_handler).
        pub fn clrprof_elt_enter3_with_info_netcore3(
            function_id_or_client_id: FunctionIDOrClientID,
            elt_info: COR_PRF_ELT_INFO,
        );
    }

    extern "system" {
        /// `FunctionEnter3WithInfo` trampoline (C ABI, every argument and
        /// return register preserved): forwards to the handler installed
        /// with [`set_enter3_with_info_handler`](super::set_enter3_with_info_handler).
        pub fn clrprof_elt_enter3_with_info(
            function_id_or_client_id: FunctionIDOrClientID,
            elt_info: COR_PRF_ELT_INFO,
        );
        /// `FunctionLeave3WithInfo` trampoline; forwards to the handler
        /// installed with [`set_leave3_with_info_handler`](super::set_leave3_with_info_handler).
        pub fn clrprof_elt_leave3_with_info(
            function_id_or_client_id: FunctionIDOrClientID,
            elt_info: COR_PRF_ELT_INFO,
        );
        /// `FunctionTailcall3WithInfo` trampoline; forwards to the handler
        /// installed with [`set_tailcall3_with_info_handler`](super::set_tailcall3_with_info_handler).
        pub fn clrprof_elt_tailcall3_with_info(
            function_id_or_client_id: FunctionIDOrClientID,
            elt_info: COR_PRF_ELT_INFO,
        );
    }
}

#[cfg(all(clrprof_elt, target_arch = "x86_64", not(windows)))]
pub use asm_symbols::clrprof_elt_enter3_with_info_netcore3;
#[cfg(clrprof_elt)]
pub use asm_symbols::{
    clrprof_elt_enter3_trampoline, clrprof_elt_enter3_with_info, clrprof_elt_leave3_trampoline,
    clrprof_elt_leave3_with_info, clrprof_elt_tailcall3_trampoline,
    clrprof_elt_tailcall3_with_info,
};

/// Address of the enter trampoline, to pass as `pFuncEnter3` to
/// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3`.
///
/// The returned pointer has the IDL's type only so it can be handed to the
/// runtime: it must only ever be called by jitted code. Calling it from
/// Rust passes the ID in the wrong register on x86_64 System V and aarch64.
#[cfg(clrprof_elt)]
pub fn enter3_trampoline() -> FunctionEnter3 {
    let code = clrprof_elt_enter3_trampoline as unsafe extern "C" fn();
    // SAFETY: [ffi-abi, library-pinned] both types are plain code pointers of the same size; the
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
    // SAFETY: [ffi-abi, library-pinned] as in `enter3_trampoline`; the runtime calls it with the JIT's
    // FunctionLeave3 convention.
    unsafe { core::mem::transmute::<unsafe extern "C" fn(), FunctionLeave3>(code) }
}

/// Address of the tailcall trampoline, to pass as `pFuncTailcall3` to
/// `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3`. Same caveat as
/// [`enter3_trampoline`].
#[cfg(clrprof_elt)]
pub fn tailcall3_trampoline() -> FunctionTailcall3 {
    let code = clrprof_elt_tailcall3_trampoline as unsafe extern "C" fn();
    // SAFETY: [ffi-abi, library-pinned] as in `enter3_trampoline`; the runtime calls it with the JIT's
    // FunctionTailcall3 convention.
    unsafe { core::mem::transmute::<unsafe extern "C" fn(), FunctionTailcall3>(code) }
}

/// The handler slots: one per trampoline, and the caller-SP forwarder's.
#[derive(Clone, Copy)]
enum Slot {
    #[cfg(clrprof_elt)]
    Enter,
    #[cfg(clrprof_elt)]
    EnterCallerSp,
    #[cfg(clrprof_elt)]
    Leave,
    #[cfg(clrprof_elt)]
    Tailcall,
    EnterWithInfo,
    LeaveWithInfo,
    TailcallWithInfo,
}

#[cfg(not(clrprof_elt))]
static ENTER3_WITH_INFO_HANDLER: AtomicUsize = AtomicUsize::new(0);
#[cfg(not(clrprof_elt))]
static LEAVE3_WITH_INFO_HANDLER: AtomicUsize = AtomicUsize::new(0);
#[cfg(not(clrprof_elt))]
static TAILCALL3_WITH_INFO_HANDLER: AtomicUsize = AtomicUsize::new(0);

impl Slot {
    #[cfg(clrprof_elt)]
    fn get(self) -> &'static AtomicUsize {
        use asm_symbols::*;
        // SAFETY: [ffi-abi, local-memory] the assembly defines each slot as an 8-byte aligned,
        // zero-initialised, pointer-sized word in writable data, which is a
        // valid AtomicUsize; nothing but these atomics and the trampolines'
        // aligned loads ever accesses it.
        unsafe {
            match self {
                Slot::Enter => &clrprof_elt_enter_handler,
                Slot::EnterCallerSp => &clrprof_elt_enter_caller_sp_handler,
                Slot::Leave => &clrprof_elt_leave_handler,
                Slot::Tailcall => &clrprof_elt_tailcall_handler,
                Slot::EnterWithInfo => &clrprof_elt_enter_with_info_handler,
                Slot::LeaveWithInfo => &clrprof_elt_leave_with_info_handler,
                Slot::TailcallWithInfo => &clrprof_elt_tailcall_with_info_handler,
            }
        }
    }

    #[cfg(not(clrprof_elt))]
    fn get(self) -> &'static AtomicUsize {
        match self {
            Slot::EnterWithInfo => &ENTER3_WITH_INFO_HANDLER,
            Slot::LeaveWithInfo => &LEAVE3_WITH_INFO_HANDLER,
            Slot::TailcallWithInfo => &TAILCALL3_WITH_INFO_HANDLER,
        }
    }

    /// What an empty slot holds: the assembly's no-op handler, which the
    /// trampolines call like any other (no test on the hot path).
    #[cfg(clrprof_elt)]
    fn empty() -> usize {
        asm_symbols::clrprof_elt_noop_handler as unsafe extern "C" fn() as usize
    }

    /// Without trampolines the Rust entry points test for zero.
    #[cfg(not(clrprof_elt))]
    fn empty() -> usize {
        0
    }

    /// Installs `address`, or with `None` empties the slot.
    fn store(self, address: Option<usize>) {
        self.get()
            .store(address.unwrap_or_else(Self::empty), Ordering::Release);
    }

    /// The installed handler's address, `0` for an empty slot.
    fn load(self) -> usize {
        match self.get().load(Ordering::Acquire) {
            a if a == Self::empty() => 0,
            a => a,
        }
    }
}

#[cfg(clrprof_elt)]
fn load_handler(slot: Slot) -> Option<EltHandler> {
    match slot.load() {
        0 => None,
        // SAFETY: [elt-handler] a non-zero value in a fast-path slot was stored from an
        // `EltHandler` by one of the fast-path setters, so it is that
        // function's address.
        address => Some(unsafe { core::mem::transmute::<usize, EltHandler>(address) }),
    }
}

fn load_with_info_handler(slot: Slot) -> Option<EltWithInfoHandler> {
    match slot.load() {
        0 => None,
        // SAFETY: [elt-handler] a non-zero value in a WithInfo slot was stored from an
        // `EltWithInfoHandler` by one of the WithInfo setters, so it is that
        // function's address.
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
    Slot::Enter.store(handler.map(|f| f as usize));
}

/// Installs (or with `None`, removes) the handler of the caller-SP slot:
/// an enter handler that takes the hooked method's caller's stack pointer
/// as well (see [`EltEnterHandler`]). The enter trampoline calls it while
/// its own handler is [`enter3_caller_sp_forwarder`]; an empty slot makes
/// the forwarder a no-op.
///
/// # Safety
///
/// As for [`set_enter3_handler`].
#[cfg(clrprof_elt)]
pub unsafe fn set_enter3_caller_sp_handler(handler: Option<EltEnterHandler>) {
    Slot::EnterCallerSp.store(handler.map(|f| f as usize));
}

/// The handler of the caller-SP slot, if one is installed.
#[cfg(clrprof_elt)]
pub fn enter3_caller_sp_handler() -> Option<EltEnterHandler> {
    match Slot::EnterCallerSp.load() {
        0 => None,
        // SAFETY: [elt-handler] a non-zero value in the caller-SP slot was
        // stored from an `EltEnterHandler` by `set_enter3_caller_sp_handler`.
        address => Some(unsafe { core::mem::transmute::<usize, EltEnterHandler>(address) }),
    }
}

/// The caller-SP forwarder, an [`EltHandler`] to install as the enter
/// trampoline's handler ([`set_enter3_handler`]): it calls the handler of
/// the caller-SP slot ([`set_enter3_caller_sp_handler`]) with the ID and
/// the hooked method's caller's stack pointer, which the JIT passes beside
/// the ID and the trampoline leaves in its register (`r15` on x86-64 System
/// V, `rdx` on Windows, `x11` on AArch64). Two instructions on x86-64
/// System V (`mov rsi, r15; jmp [slot]`), one on Windows, five on AArch64;
/// only for the enter trampoline: the other trampolines' callers pass no
/// stack pointer.
#[cfg(clrprof_elt)]
pub fn enter3_caller_sp_forwarder() -> EltHandler {
    let code = asm_symbols::clrprof_elt_enter3_caller_sp_forwarder as unsafe extern "C" fn();
    // SAFETY: [ffi-abi] both are plain code pointers of the same size; the
    // forwarder takes the ID in the C ABI's first argument register like any
    // `EltHandler`, and reads its second value from the register the JIT
    // set, which only the enter trampoline leaves untouched (its docs).
    unsafe { core::mem::transmute::<unsafe extern "C" fn(), EltHandler>(code) }
}

/// Installs (or removes) the handler the leave trampoline calls.
///
/// # Safety
///
/// As for [`set_enter3_handler`].
#[cfg(clrprof_elt)]
pub unsafe fn set_leave3_handler(handler: Option<EltHandler>) {
    Slot::Leave.store(handler.map(|f| f as usize));
}

/// Installs (or removes) the handler the tailcall trampoline calls.
///
/// # Safety
///
/// As for [`set_enter3_handler`].
#[cfg(clrprof_elt)]
pub unsafe fn set_tailcall3_handler(handler: Option<EltHandler>) {
    Slot::Tailcall.store(handler.map(|f| f as usize));
}

/// The handler the enter trampoline currently calls (possibly
/// [`enter3_caller_sp_forwarder`], whose second value is meaningful only
/// when the enter trampoline calls it).
#[cfg(clrprof_elt)]
pub fn enter3_handler() -> Option<EltHandler> {
    load_handler(Slot::Enter)
}

/// The handler the leave trampoline currently calls.
#[cfg(clrprof_elt)]
pub fn leave3_handler() -> Option<EltHandler> {
    load_handler(Slot::Leave)
}

/// The handler the tailcall trampoline currently calls.
#[cfg(clrprof_elt)]
pub fn tailcall3_handler() -> Option<EltHandler> {
    load_handler(Slot::Tailcall)
}

/// Installs (or removes) the handler the WithInfo enter entry point
/// ([`enter3_with_info_hook`]) calls.
///
/// # Safety
///
/// As for the fast-path setters: the handler must be callable from any
/// thread at any time, concurrently, and must not unwind.
pub unsafe fn set_enter3_with_info_handler(handler: Option<EltWithInfoHandler>) {
    Slot::EnterWithInfo.store(handler.map(|f| f as usize));
}

/// Installs (or removes) the handler the WithInfo leave entry point
/// ([`leave3_with_info_hook`]) calls.
///
/// # Safety
///
/// As for [`set_enter3_with_info_handler`].
pub unsafe fn set_leave3_with_info_handler(handler: Option<EltWithInfoHandler>) {
    Slot::LeaveWithInfo.store(handler.map(|f| f as usize));
}

/// Installs (or removes) the handler the WithInfo tailcall entry point
/// ([`tailcall3_with_info_hook`]) calls.
///
/// # Safety
///
/// As for [`set_enter3_with_info_handler`].
pub unsafe fn set_tailcall3_with_info_handler(handler: Option<EltWithInfoHandler>) {
    Slot::TailcallWithInfo.store(handler.map(|f| f as usize));
}

/// The handler the WithInfo enter entry point currently calls.
pub fn enter3_with_info_handler() -> Option<EltWithInfoHandler> {
    load_with_info_handler(Slot::EnterWithInfo)
}

/// The handler the WithInfo leave entry point currently calls.
pub fn leave3_with_info_handler() -> Option<EltWithInfoHandler> {
    load_with_info_handler(Slot::LeaveWithInfo)
}

/// The handler the WithInfo tailcall entry point currently calls.
pub fn tailcall3_with_info_handler() -> Option<EltWithInfoHandler> {
    load_with_info_handler(Slot::TailcallWithInfo)
}

/// Without trampolines: calls the slot's handler, if any, with the C ABI
/// (registers are whatever the compiler keeps).
#[cfg(not(clrprof_elt))]
fn dispatch_with_info(slot: Slot, id: FunctionIDOrClientID, elt_info: COR_PRF_ELT_INFO) {
    if let Some(handler) = load_with_info_handler(slot) {
        // SAFETY: [callback-args, ffi-abi] both union fields are pointer-sized integers, so reading
        // either is valid for any value the runtime passes.
        let id = unsafe { id.clientID };
        // SAFETY: [elt-handler] the handler was installed through an unsafe setter whose
        // caller promised it may be called from any thread at any time.
        unsafe { handler(id, elt_info) }
    }
}

/// `FunctionEnter3WithInfo` entry point on targets without trampolines:
/// forwards to the handler installed with [`set_enter3_with_info_handler`].
#[cfg(not(clrprof_elt))]
pub extern "system" fn clrprof_elt_enter3_with_info(
    function_id_or_client_id: FunctionIDOrClientID,
    elt_info: COR_PRF_ELT_INFO,
) {
    dispatch_with_info(Slot::EnterWithInfo, function_id_or_client_id, elt_info);
}

/// `FunctionLeave3WithInfo` entry point on targets without trampolines.
#[cfg(not(clrprof_elt))]
pub extern "system" fn clrprof_elt_leave3_with_info(
    function_id_or_client_id: FunctionIDOrClientID,
    elt_info: COR_PRF_ELT_INFO,
) {
    dispatch_with_info(Slot::LeaveWithInfo, function_id_or_client_id, elt_info);
}

/// `FunctionTailcall3WithInfo` entry point on targets without trampolines.
#[cfg(not(clrprof_elt))]
pub extern "system" fn clrprof_elt_tailcall3_with_info(
    function_id_or_client_id: FunctionIDOrClientID,
    elt_info: COR_PRF_ELT_INFO,
) {
    dispatch_with_info(Slot::TailcallWithInfo, function_id_or_client_id, elt_info);
}

/// The WithInfo enter entry point as the IDL's `FunctionEnter3WithInfo`, to
/// pass to `ICorProfilerInfo3::SetEnterLeaveFunctionHooks3WithInfo`: a
/// trampoline that keeps every argument and return register and calls the
/// handler installed with [`set_enter3_with_info_handler`], if any.
pub fn enter3_with_info_hook() -> FunctionEnter3WithInfo {
    clrprof_elt_enter3_with_info
}

/// x86-64 System V only: the WithInfo enter entry point for the stub of
/// .NET Core 3.x (CoreCLR before .NET 5) on Unix x64, to pass to
/// `SetEnterLeaveFunctionHooks3WithInfo` there instead of
/// [`enter3_with_info_hook`]. That stub restores the integer argument
/// registers and `xmm0`/`xmm1` after the hook but not `xmm2`-`xmm7`; this
/// trampoline keeps all 128 bits of those six and calls the handler
/// installed with [`set_enter3_with_info_handler`].
#[cfg(all(clrprof_elt, target_arch = "x86_64", not(windows)))]
pub fn enter3_with_info_netcore3_hook() -> FunctionEnter3WithInfo {
    clrprof_elt_enter3_with_info_netcore3
}

/// The WithInfo leave entry point as the IDL's `FunctionLeave3WithInfo`
/// (see [`enter3_with_info_hook`]).
pub fn leave3_with_info_hook() -> FunctionLeave3WithInfo {
    clrprof_elt_leave3_with_info
}

/// The WithInfo tailcall entry point as the IDL's `FunctionTailcall3WithInfo`
/// (see [`enter3_with_info_hook`]).
pub fn tailcall3_with_info_hook() -> FunctionTailcall3WithInfo {
    clrprof_elt_tailcall3_with_info
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corprof::FunctionIDOrClientID;
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
        // SAFETY: [elt-handler] the recording handlers only store to atomics.
        unsafe {
            set_enter3_with_info_handler(Some(record_enter));
            set_leave3_with_info_handler(Some(record_leave));
            set_tailcall3_with_info_handler(Some(record_tailcall));
        }
        // SAFETY: [elt-handler, ffi-abi] calling through the IDL types with the C ABI, as the
        // runtime's stub does.
        unsafe {
            enter3_with_info_hook()(id(0x1111), 0xA1);
            leave3_with_info_hook()(id(0x2222), 0xA2);
            tailcall3_with_info_hook()(id(0x3333), 0xA3);
        }
        let seen: Vec<usize> = SEEN.iter().map(|v| v.load(Ordering::SeqCst)).collect();
        assert_eq!(seen, [0x1111, 0xA1, 0x2222, 0xA2, 0x3333, 0xA3]);

        // SAFETY: [elt-handler] removing handlers is always allowed.
        unsafe {
            set_enter3_with_info_handler(None);
            set_leave3_with_info_handler(None);
            set_tailcall3_with_info_handler(None);
        }
        assert!(enter3_with_info_handler().is_none());
        // SAFETY: [elt-handler] as above; an empty slot makes every entry point return.
        unsafe {
            enter3_with_info_hook()(id(0x4444), 0xB1);
            leave3_with_info_hook()(id(0x4444), 0xB2);
            tailcall3_with_info_hook()(id(0x4444), 0xB3);
        }
        let after: Vec<usize> = SEEN.iter().map(|v| v.load(Ordering::SeqCst)).collect();
        assert_eq!(after, seen, "an empty slot must not call anything");
    }
}
