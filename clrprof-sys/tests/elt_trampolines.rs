//! Register-level tests of the ELT trampolines (`src/elt/`), fast path and
//! WithInfo.
//!
//! The test-only assembly harness (`tests/harness/`, `global_asm!` in this
//! test binary only) fills every general register and every FP/SIMD register (all 128
//! bits) with distinct sentinels, puts the function ID in the register the
//! JIT uses for the hook (for WithInfo: the ID and the `eltInfo` handle in
//! the C ABI's first two argument registers, as the runtime's stub passes
//! them), calls the trampoline the way jitted code does (aligned stack,
//! Windows home area, an indirect call that disturbs no register) and
//! records every register afterwards. The handler the
//! trampoline calls is, in most tests, an assembly handler that clobbers
//! every register its C ABI allows, so a register the trampoline forgot to
//! save shows up as a changed value.
#![cfg(clrprof_elt)]

#[cfg(all(target_arch = "x86_64", not(windows)))]
#[path = "harness/x86_64_sysv.rs"]
mod harness;
#[cfg(all(target_arch = "x86_64", windows))]
#[path = "harness/x86_64_win64.rs"]
mod harness;
#[cfg(target_arch = "aarch64")]
#[path = "harness/aarch64.rs"]
mod harness;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use clrprof_sys::elt::{self, EltEnterHandler, EltHandler, EltWithInfoHandler};

#[cfg(target_arch = "x86_64")]
mod arch {
    /// Register block shared with `harness/x86_64_*.rs`.
    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    pub struct Regs {
        pub simd: [[u64; 2]; 16],
        pub gpr: [u64; 16],
        /// `[0]` = stack pointer at the call, `[1]` = after the return.
        pub extra: [u64; 4],
    }

    pub const GPR_NAMES: [&str; 16] = [
        "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15",
    ];
    pub const SIMD_PREFIX: &str = "xmm";
    pub const STACK_POINTER: usize = 4;
    /// Handler entry: a `call` from a 16-byte aligned stack leaves sp at 8 mod 16.
    pub const HANDLER_SP_MOD_16: u64 = 8;

    /// Index of the general register holding the ID for each hook.
    #[cfg(not(windows))]
    pub fn id_register(hook: super::Hook) -> usize {
        match hook {
            super::Hook::Enter => 14,                        // r14
            super::Hook::Leave | super::Hook::Tailcall => 7, // rdi
            _ => C_ARGUMENTS[0],
        }
    }
    #[cfg(windows)]
    pub fn id_register(_hook: super::Hook) -> usize {
        C_ARGUMENTS[0]
    }

    /// The C ABI's first two integer argument registers.
    #[cfg(not(windows))]
    pub const C_ARGUMENTS: [usize; 2] = [7, 6]; // rdi, rsi
    #[cfg(windows)]
    pub const C_ARGUMENTS: [usize; 2] = [1, 2]; // rcx, rdx

    /// Registers `hook`'s trampoline must hand back unchanged (beyond
    /// rsp): the C ABI's callee-saved ones, plus what the caller keeps
    /// live. Enter: the argument registers (the JIT may find rax, r10, r11
    /// and xmm8-15 clobbered). Leave and tailcall: the return registers.
    /// WithInfo: every argument and return register.
    #[cfg(not(windows))]
    pub fn must_preserve(hook: super::Hook, lane: &super::Lane) -> bool {
        use super::{Hook, Lane};
        let callee_saved = matches!(lane, Lane::Gpr(3 | 5 | 12 | 13 | 14 | 15));
        callee_saved
            || match (hook, lane) {
                // rdi rsi rdx rcx r8 r9, xmm0-xmm7
                (Hook::Enter, Lane::Gpr(i)) => matches!(i, 1 | 2 | 6 | 7 | 8 | 9),
                (Hook::Enter, Lane::SimdLow(i) | Lane::SimdHigh(i)) => *i < 8,
                // rax rdx, xmm0 xmm1
                (Hook::Leave | Hook::Tailcall, Lane::Gpr(i)) => matches!(i, 0 | 2),
                (Hook::Leave | Hook::Tailcall, Lane::SimdLow(i) | Lane::SimdHigh(i)) => *i < 2,
                // the .NET Core 3.x stub restores the rest itself: xmm2-xmm7
                (Hook::EnterWithInfoNetcore3, Lane::Gpr(_)) => false,
                (Hook::EnterWithInfoNetcore3, Lane::SimdLow(i) | Lane::SimdHigh(i)) => {
                    (2..8).contains(i)
                }
                // all but r10, r11; xmm0-xmm7
                (_, Lane::Gpr(i)) => !matches!(i, 10 | 11),
                (_, Lane::SimdLow(i) | Lane::SimdHigh(i)) => *i < 8,
            }
    }
    /// Windows: callee-saved rbx rbp rsi rdi r12-r15 xmm6-xmm15, plus
    /// nothing for enter (the JIT reloads the arguments), rax and xmm0 for
    /// leave and tailcall, every volatile register but r10/r11 for WithInfo.
    #[cfg(windows)]
    pub fn must_preserve(hook: super::Hook, lane: &super::Lane) -> bool {
        use super::{Hook, Lane};
        let callee_saved = match lane {
            Lane::Gpr(i) => matches!(i, 3 | 5 | 6 | 7 | 12 | 13 | 14 | 15),
            Lane::SimdLow(i) | Lane::SimdHigh(i) => *i >= 6,
        };
        callee_saved
            || match (hook, lane) {
                (Hook::Enter, _) => false,
                (Hook::Leave | Hook::Tailcall, Lane::Gpr(i)) => *i == 0,
                (Hook::Leave | Hook::Tailcall, Lane::SimdLow(i) | Lane::SimdHigh(i)) => *i == 0,
                (_, Lane::Gpr(i)) => !matches!(i, 10 | 11),
                (_, Lane::SimdLow(_) | Lane::SimdHigh(_)) => true,
            }
    }

    /// Registers the trampoline itself saves: those the C ABI lets the
    /// handler clobber but the JIT expects back.
    #[cfg(not(windows))]
    pub fn saved_by_trampoline(lane: &super::Lane) -> bool {
        match lane {
            super::Lane::Gpr(i) => matches!(i, 0 | 1 | 2 | 6 | 7 | 8 | 9),
            super::Lane::SimdLow(i) | super::Lane::SimdHigh(i) => *i < 8,
        }
    }
    #[cfg(windows)]
    pub fn saved_by_trampoline(lane: &super::Lane) -> bool {
        match lane {
            super::Lane::Gpr(i) => matches!(i, 0 | 1 | 2 | 8 | 9),
            super::Lane::SimdLow(i) | super::Lane::SimdHigh(i) => *i < 6,
        }
    }

    pub fn is_loaded(lane: &super::Lane) -> bool {
        !matches!(lane, super::Lane::Gpr(STACK_POINTER))
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    /// Register block shared with `harness/aarch64.rs`.
    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    pub struct Regs {
        pub simd: [[u64; 2]; 32],
        /// x0..x30, then sp (index 31).
        pub gpr: [u64; 32],
        /// `[0]` = stack pointer at the call, `[1]` = after the return.
        pub extra: [u64; 4],
    }

    pub const GPR_NAMES: [&str; 32] = [
        "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
        "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26",
        "x27", "x28", "x29", "x30", "sp",
    ];
    pub const SIMD_PREFIX: &str = "v";
    pub const STACK_POINTER: usize = 31;
    /// sp is always 16-byte aligned on aarch64.
    pub const HANDLER_SP_MOD_16: u64 = 0;

    pub fn id_register(hook: super::Hook) -> usize {
        if hook.is_with_info() {
            C_ARGUMENTS[0]
        } else {
            10 // x10
        }
    }

    /// The C ABI's first two integer argument registers.
    pub const C_ARGUMENTS: [usize; 2] = [0, 1]; // x0, x1

    /// x0-x8, x19-x29, q0-q7 (all 128 bits) and the low halves of v8-v15,
    /// for every hook kind.
    pub fn must_preserve(_hook: super::Hook, lane: &super::Lane) -> bool {
        match lane {
            super::Lane::Gpr(i) => *i <= 8 || (19..=29).contains(i),
            super::Lane::SimdLow(i) => *i < 16,
            super::Lane::SimdHigh(i) => *i < 8,
        }
    }

    /// x0-x8 and q0-q7.
    pub fn saved_by_trampoline(lane: &super::Lane) -> bool {
        match lane {
            super::Lane::Gpr(i) => *i <= 8,
            super::Lane::SimdLow(i) | super::Lane::SimdHigh(i) => *i < 8,
        }
    }

    /// The harness loads everything but x16 (its call register), x18 (the
    /// platform register), x30 (set by the call) and sp.
    pub fn is_loaded(lane: &super::Lane) -> bool {
        !matches!(lane, super::Lane::Gpr(16 | 18 | 30 | STACK_POINTER))
    }
}

use arch::Regs;

extern "C" {
    fn clrprof_elt_harness_call(target: usize, input: *const Regs, output: *mut Regs);
    fn clrprof_elt_harness_trash_handler(id: usize);
    /// The same code under a second name, typed as a WithInfo handler.
    fn clrprof_elt_harness_trash_info_handler(id: usize, info: usize);
    static clrprof_elt_harness_handler_id: AtomicU64;
    static clrprof_elt_harness_handler_info: AtomicU64;
    static clrprof_elt_harness_handler_sp: AtomicU64;
    static clrprof_elt_harness_handler_calls: AtomicU64;
}

/// One 64-bit piece of the register file.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lane {
    Gpr(usize),
    SimdLow(usize),
    SimdHigh(usize),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Hook {
    Enter,
    Leave,
    Tailcall,
    EnterWithInfo,
    LeaveWithInfo,
    TailcallWithInfo,
    /// The WithInfo enter entry point for the .NET Core 3.x stub (x86-64
    /// System V only; the WithInfo enter slot).
    #[cfg(all(target_arch = "x86_64", not(windows)))]
    EnterWithInfoNetcore3,
}

const HOOKS: &[Hook] = &[
    Hook::Enter,
    Hook::Leave,
    Hook::Tailcall,
    Hook::EnterWithInfo,
    Hook::LeaveWithInfo,
    Hook::TailcallWithInfo,
    #[cfg(all(target_arch = "x86_64", not(windows)))]
    Hook::EnterWithInfoNetcore3,
];

/// A handler for either kind of hook.
#[derive(Clone, Copy)]
enum Handler {
    /// The harness's assembly handler that clobbers what its ABI allows.
    Trash,
    /// A Rust handler that records what it got.
    Rust,
}

impl Hook {
    fn is_with_info(self) -> bool {
        match self {
            Hook::EnterWithInfo | Hook::LeaveWithInfo | Hook::TailcallWithInfo => true,
            #[cfg(all(target_arch = "x86_64", not(windows)))]
            Hook::EnterWithInfoNetcore3 => true,
            _ => false,
        }
    }

    fn trampoline(self) -> usize {
        match self {
            Hook::Enter => elt::enter3_trampoline() as usize,
            Hook::Leave => elt::leave3_trampoline() as usize,
            Hook::Tailcall => elt::tailcall3_trampoline() as usize,
            Hook::EnterWithInfo => elt::enter3_with_info_hook() as usize,
            Hook::LeaveWithInfo => elt::leave3_with_info_hook() as usize,
            Hook::TailcallWithInfo => elt::tailcall3_with_info_hook() as usize,
            #[cfg(all(target_arch = "x86_64", not(windows)))]
            Hook::EnterWithInfoNetcore3 => elt::enter3_with_info_netcore3_hook() as usize,
        }
    }

    fn set_handler(self, handler: Option<Handler>) {
        let fast: Option<EltHandler> = handler.map(|h| match h {
            Handler::Trash => clrprof_elt_harness_trash_handler as EltHandler,
            Handler::Rust => rust_handler as EltHandler,
        });
        let with_info: Option<EltWithInfoHandler> = handler.map(|h| match h {
            Handler::Trash => clrprof_elt_harness_trash_info_handler as EltWithInfoHandler,
            Handler::Rust => rust_info_handler as EltWithInfoHandler,
        });
        // SAFETY: both handlers obey the C ABI, touch only their own
        // atomics (or, for the assembly one, registers and harness words),
        // and cannot unwind.
        unsafe {
            match self {
                Hook::Enter => elt::set_enter3_handler(fast),
                Hook::Leave => elt::set_leave3_handler(fast),
                Hook::Tailcall => elt::set_tailcall3_handler(fast),
                Hook::EnterWithInfo => elt::set_enter3_with_info_handler(with_info),
                #[cfg(all(target_arch = "x86_64", not(windows)))]
                Hook::EnterWithInfoNetcore3 => elt::set_enter3_with_info_handler(with_info),
                Hook::LeaveWithInfo => elt::set_leave3_with_info_handler(with_info),
                Hook::TailcallWithInfo => elt::set_tailcall3_with_info_handler(with_info),
            }
        }
    }

    /// The installed handler's address.
    fn handler(self) -> Option<usize> {
        match self {
            Hook::Enter => elt::enter3_handler().map(|h| h as usize),
            Hook::Leave => elt::leave3_handler().map(|h| h as usize),
            Hook::Tailcall => elt::tailcall3_handler().map(|h| h as usize),
            Hook::EnterWithInfo => elt::enter3_with_info_handler().map(|h| h as usize),
            #[cfg(all(target_arch = "x86_64", not(windows)))]
            Hook::EnterWithInfoNetcore3 => elt::enter3_with_info_handler().map(|h| h as usize),
            Hook::LeaveWithInfo => elt::leave3_with_info_handler().map(|h| h as usize),
            Hook::TailcallWithInfo => elt::tailcall3_with_info_handler().map(|h| h as usize),
        }
    }

    /// A distinct function ID per hook.
    fn id(self) -> u64 {
        match self {
            Hook::Enter => 0x0000_7F00_1234_5670,
            Hook::Leave => 0x0000_7F00_1234_5680,
            Hook::Tailcall => 0x0000_7F00_1234_5690,
            Hook::EnterWithInfo => 0x0000_7F00_1234_56A0,
            Hook::LeaveWithInfo => 0x0000_7F00_1234_56B0,
            Hook::TailcallWithInfo => 0x0000_7F00_1234_56C0,
            #[cfg(all(target_arch = "x86_64", not(windows)))]
            Hook::EnterWithInfoNetcore3 => 0x0000_7F00_1234_56D0,
        }
    }

    /// The `eltInfo` handle a WithInfo hook is called with.
    fn elt_info(self) -> Option<u64> {
        self.is_with_info()
            .then(|| 0x0000_7FFE_0000_1000 + (self.id() & 0xF0))
    }
}

/// The handler slots and the harness globals are process-wide.
static HARNESS: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    HARNESS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lanes() -> Vec<Lane> {
    let regs = empty();
    let mut lanes: Vec<Lane> = (0..regs.gpr.len()).map(Lane::Gpr).collect();
    for i in 0..regs.simd.len() {
        lanes.push(Lane::SimdLow(i));
        lanes.push(Lane::SimdHigh(i));
    }
    lanes
}

fn name(lane: Lane) -> String {
    match lane {
        Lane::Gpr(i) => arch::GPR_NAMES[i].to_string(),
        Lane::SimdLow(i) => format!("{}{i} bits 0-63", arch::SIMD_PREFIX),
        Lane::SimdHigh(i) => format!("{}{i} bits 64-127", arch::SIMD_PREFIX),
    }
}

fn get(regs: &Regs, lane: Lane) -> u64 {
    match lane {
        Lane::Gpr(i) => regs.gpr[i],
        Lane::SimdLow(i) => regs.simd[i][0],
        Lane::SimdHigh(i) => regs.simd[i][1],
    }
}

fn set(regs: &mut Regs, lane: Lane, value: u64) {
    match lane {
        Lane::Gpr(i) => regs.gpr[i] = value,
        Lane::SimdLow(i) => regs.simd[i][0] = value,
        Lane::SimdHigh(i) => regs.simd[i][1] = value,
    }
}

fn empty() -> Regs {
    Regs {
        simd: [[0; 2]; arch_simd_count()],
        gpr: [0; arch_gpr_count()],
        extra: [0; 4],
    }
}

const fn arch_simd_count() -> usize {
    if cfg!(target_arch = "aarch64") {
        32
    } else {
        16
    }
}

const fn arch_gpr_count() -> usize {
    if cfg!(target_arch = "aarch64") {
        32
    } else {
        16
    }
}

/// Distinct, unmistakable values: an odd multiplier is a bijection on u64,
/// and none equals what the trash handler writes.
fn sentinels() -> Regs {
    let mut regs = empty();
    for (k, lane) in lanes().into_iter().enumerate() {
        let value = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(k as u64 + 1);
        assert!(
            value != 0xDEAD_BEEF_DEAD_BEEF && value != u64::MAX && value != 0xEEEE_EEEE_EEEE_EEEE
        );
        set(&mut regs, lane, value);
    }
    regs
}

struct Outcome {
    input: Regs,
    output: Regs,
    handler_calls: u64,
}

struct HarnessWords {
    id: &'static AtomicU64,
    info: &'static AtomicU64,
    sp: &'static AtomicU64,
    calls: &'static AtomicU64,
}

fn harness_words() -> HarnessWords {
    // SAFETY: the harness defines these as 8-byte aligned words in writable
    // data; nothing else touches them while the HARNESS lock is held.
    unsafe {
        HarnessWords {
            id: &clrprof_elt_harness_handler_id,
            info: &clrprof_elt_harness_handler_info,
            sp: &clrprof_elt_harness_handler_sp,
            calls: &clrprof_elt_harness_handler_calls,
        }
    }
}

/// Calls `target` through the harness with sentinels in every register,
/// `id` in `id_register` and, for WithInfo hooks, the `eltInfo` handle in
/// the C ABI's second argument register.
fn run_with(target: usize, id_register: usize, id: u64, info: Option<u64>) -> Outcome {
    let mut input = sentinels();
    input.gpr[id_register] = id;
    if let Some(info) = info {
        input.gpr[arch::C_ARGUMENTS[1]] = info;
    }
    let mut output = empty();
    let calls = harness_words().calls;
    let before = calls.load(Ordering::SeqCst);
    // SAFETY: `target` is a trampoline or handler that follows the hook
    // convention the harness emulates; the blocks are valid for the harness.
    unsafe { clrprof_elt_harness_call(target, &input, &mut output) };
    Outcome {
        input,
        output,
        handler_calls: calls.load(Ordering::SeqCst) - before,
    }
}

/// Calls `hook`'s trampoline the way its caller does.
fn run(hook: Hook) -> Outcome {
    run_with(
        hook.trampoline(),
        arch::id_register(hook),
        hook.id(),
        hook.elt_info(),
    )
}

/// Names of the lanes in `wanted` that changed.
fn changed(outcome: &Outcome, wanted: impl Fn(&Lane) -> bool) -> Vec<String> {
    lanes()
        .into_iter()
        .filter(|lane| arch::is_loaded(lane) && wanted(lane))
        .filter(|lane| get(&outcome.input, *lane) != get(&outcome.output, *lane))
        .map(|lane| {
            format!(
                "{}: {:#018x} -> {:#018x}",
                name(lane),
                get(&outcome.input, lane),
                get(&outcome.output, lane)
            )
        })
        .collect()
}

fn assert_stack_restored(outcome: &Outcome) {
    let sp = arch::STACK_POINTER;
    assert_eq!(
        outcome.output.extra[0], outcome.output.extra[1],
        "stack pointer not restored"
    );
    assert_eq!(outcome.output.gpr[sp], outcome.output.extra[0]);
    assert_eq!(
        outcome.output.extra[0] % 16,
        0,
        "harness must call with an aligned stack"
    );
}

#[test]
fn harness_sees_every_register_the_handler_may_clobber() {
    let _guard = lock();
    // Calling the clobbering handler directly: every register a trampoline
    // has to save must come back changed, or the other tests could not
    // notice a missing save.
    let trash: EltHandler = clrprof_elt_harness_trash_handler;
    let outcome = run_with(trash as usize, arch::id_register(Hook::Enter), 7, None);
    assert_eq!(outcome.handler_calls, 1);
    let unchanged: Vec<String> = lanes()
        .into_iter()
        .filter(|lane| arch::is_loaded(lane) && arch::saved_by_trampoline(lane))
        .filter(|lane| get(&outcome.input, *lane) == get(&outcome.output, *lane))
        .map(name)
        .collect();
    assert!(
        unchanged.is_empty(),
        "handler left these untouched: {unchanged:?}"
    );
    assert_stack_restored(&outcome);
}

#[test]
fn trampolines_preserve_argument_and_return_registers_and_pass_the_id() {
    let _guard = lock();
    let words = harness_words();
    for &hook in HOOKS {
        words.info.store(0, Ordering::SeqCst);
        hook.set_handler(Some(Handler::Trash));
        let outcome = run(hook);
        hook.set_handler(None);

        assert_eq!(outcome.handler_calls, 1, "{hook:?}: handler calls");
        assert_eq!(words.id.load(Ordering::SeqCst), hook.id(), "{hook:?}: ID");
        if let Some(info) = hook.elt_info() {
            assert_eq!(words.info.load(Ordering::SeqCst), info, "{hook:?}: eltInfo");
        }
        assert_eq!(
            words.sp.load(Ordering::SeqCst) % 16,
            arch::HANDLER_SP_MOD_16,
            "{hook:?}: handler called with a misaligned stack"
        );
        let broken = changed(&outcome, |lane| arch::must_preserve(hook, lane));
        assert!(
            broken.is_empty(),
            "{hook:?} trampoline lost registers: {broken:#?}"
        );
        assert_stack_restored(&outcome);
    }
}

#[test]
fn empty_slot_returns_without_calling_or_touching_registers() {
    let _guard = lock();
    for &hook in HOOKS {
        hook.set_handler(None);
        assert!(hook.handler().is_none());
        let outcome = run(hook);
        assert_eq!(outcome.handler_calls, 0, "{hook:?}: handler called");
        // With no handler, even the registers the JIT lets it clobber stay.
        let broken = changed(&outcome, |_| true);
        #[cfg(target_arch = "x86_64")]
        let broken: Vec<String> = broken
            .into_iter()
            .filter(|r| !r.starts_with("r11:"))
            .collect();
        assert!(broken.is_empty(), "{hook:?}: {broken:#?}");
        assert_stack_restored(&outcome);
    }
}

static RUST_HANDLER_ID: AtomicUsize = AtomicUsize::new(0);
static RUST_HANDLER_INFO: AtomicUsize = AtomicUsize::new(0);
static RUST_HANDLER_CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn rust_handler(id: usize) {
    RUST_HANDLER_ID.store(id, Ordering::SeqCst);
    RUST_HANDLER_CALLS.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn rust_info_handler(id: usize, info: usize) {
    RUST_HANDLER_INFO.store(info, Ordering::SeqCst);
    // SAFETY: `rust_handler` only touches atomics.
    unsafe { rust_handler(id) };
}

#[test]
fn rust_handler_is_called_with_the_id_and_registers_survive() {
    let _guard = lock();
    for &hook in HOOKS {
        let before = RUST_HANDLER_CALLS.load(Ordering::SeqCst);
        hook.set_handler(Some(Handler::Rust));
        let expected = if hook.is_with_info() {
            rust_info_handler as EltWithInfoHandler as usize
        } else {
            rust_handler as EltHandler as usize
        };
        assert_eq!(hook.handler(), Some(expected), "{hook:?}");
        let outcome = run(hook);
        hook.set_handler(None);

        assert_eq!(
            RUST_HANDLER_CALLS.load(Ordering::SeqCst) - before,
            1,
            "{hook:?}"
        );
        assert_eq!(
            RUST_HANDLER_ID.load(Ordering::SeqCst) as u64,
            hook.id(),
            "{hook:?}"
        );
        if let Some(info) = hook.elt_info() {
            assert_eq!(
                RUST_HANDLER_INFO.load(Ordering::SeqCst) as u64,
                info,
                "{hook:?}"
            );
        }
        let broken = changed(&outcome, |lane| arch::must_preserve(hook, lane));
        assert!(broken.is_empty(), "{hook:?}: {broken:#?}");
        assert_stack_restored(&outcome);
    }
}

static SP_HANDLER_ID: AtomicUsize = AtomicUsize::new(0);
static SP_HANDLER_CALLER_SP: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn rust_sp_handler(id: usize, caller_sp: usize) {
    SP_HANDLER_ID.store(id, Ordering::SeqCst);
    SP_HANDLER_CALLER_SP.store(caller_sp, Ordering::SeqCst);
}

/// The register in which the JIT passes the hooked method's caller's stack
/// pointer to the enter hook (`REG_PROFILER_ENTER_ARG_CALLER_SP`).
#[cfg(all(target_arch = "x86_64", not(windows)))]
const CALLER_SP_REGISTER: usize = 15; // r15
#[cfg(all(target_arch = "x86_64", windows))]
const CALLER_SP_REGISTER: usize = 2; // rdx
#[cfg(target_arch = "aarch64")]
const CALLER_SP_REGISTER: usize = 11; // x11

#[test]
fn caller_sp_forwarder_passes_the_callers_stack_pointer_second() {
    let _guard = lock();
    // SAFETY: the handler only touches atomics; the forwarder only jumps to it.
    unsafe {
        elt::set_enter3_caller_sp_handler(Some(rust_sp_handler));
        elt::set_enter3_handler(Some(elt::enter3_caller_sp_forwarder()));
    }
    assert_eq!(
        elt::enter3_caller_sp_handler().map(|h| h as usize),
        Some(rust_sp_handler as EltEnterHandler as usize)
    );
    let outcome = run(Hook::Enter);
    // SAFETY: removing handlers is always allowed.
    unsafe {
        elt::set_enter3_handler(None);
        elt::set_enter3_caller_sp_handler(None);
    }
    assert_eq!(
        SP_HANDLER_ID.load(Ordering::SeqCst) as u64,
        Hook::Enter.id()
    );
    assert_eq!(
        SP_HANDLER_CALLER_SP.load(Ordering::SeqCst) as u64,
        outcome.input.gpr[CALLER_SP_REGISTER],
        "the handler's second argument is the JIT's caller-SP register"
    );
    let broken = changed(&outcome, |lane| arch::must_preserve(Hook::Enter, lane));
    assert!(broken.is_empty(), "{broken:#?}");
    assert_stack_restored(&outcome);
}

#[test]
fn caller_sp_forwarder_keeps_registers_around_a_clobbering_handler() {
    let _guard = lock();
    let words = harness_words();
    let trash: EltHandler = clrprof_elt_harness_trash_handler;
    // SAFETY: the clobbering handler obeys the C ABI (it takes one argument
    // and ignores the second), and cannot unwind.
    unsafe {
        elt::set_enter3_caller_sp_handler(Some(
            core::mem::transmute::<EltHandler, EltEnterHandler>(trash),
        ));
        elt::set_enter3_handler(Some(elt::enter3_caller_sp_forwarder()));
    }
    let outcome = run(Hook::Enter);
    // An empty caller-SP slot: the forwarder reaches the no-op handler.
    // SAFETY: removing a handler is always allowed.
    unsafe { elt::set_enter3_caller_sp_handler(None) };
    assert!(elt::enter3_caller_sp_handler().is_none());
    let idle = run(Hook::Enter);
    // SAFETY: as above.
    unsafe { elt::set_enter3_handler(None) };

    assert_eq!(outcome.handler_calls, 1);
    assert_eq!(words.id.load(Ordering::SeqCst), Hook::Enter.id());
    assert_eq!(
        words.sp.load(Ordering::SeqCst) % 16,
        arch::HANDLER_SP_MOD_16,
        "the forwarder must reach the handler with the trampoline's alignment"
    );
    let broken = changed(&outcome, |lane| arch::must_preserve(Hook::Enter, lane));
    assert!(broken.is_empty(), "{broken:#?}");
    assert_stack_restored(&outcome);
    assert_eq!(idle.handler_calls, 0);
    let broken = changed(&idle, |lane| arch::must_preserve(Hook::Enter, lane));
    assert!(broken.is_empty(), "{broken:#?}");
    assert_stack_restored(&idle);
}

#[test]
fn the_enter_trampoline_passes_only_the_id() {
    let _guard = lock();
    // A two-argument handler straight in the enter slot gets the ID and
    // whatever the second argument register held: on x86-64 System V and
    // AArch64 the trampoline spends no instruction on the caller's stack
    // pointer, so that is not the caller-SP register's value (the
    // sentinels make them distinct); on Windows the JIT's register for it
    // is the C ABI's second argument register itself.
    // SAFETY: the handler only touches atomics; called with one argument it
    // reads a register value, never memory.
    unsafe {
        elt::set_enter3_handler(Some(core::mem::transmute::<EltEnterHandler, EltHandler>(
            rust_sp_handler,
        )))
    };
    let outcome = run(Hook::Enter);
    // SAFETY: removing a handler is always allowed.
    unsafe { elt::set_enter3_handler(None) };
    assert_eq!(
        SP_HANDLER_ID.load(Ordering::SeqCst) as u64,
        Hook::Enter.id()
    );
    let second = SP_HANDLER_CALLER_SP.load(Ordering::SeqCst) as u64;
    if cfg!(windows) {
        assert_eq!(second, outcome.input.gpr[CALLER_SP_REGISTER]);
    } else {
        assert_ne!(second, outcome.input.gpr[CALLER_SP_REGISTER]);
    }
    let broken = changed(&outcome, |lane| arch::must_preserve(Hook::Enter, lane));
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn handler_swapped_between_calls_takes_effect_at_once() {
    let _guard = lock();
    let calls = harness_words().calls;
    for hook in [Hook::Leave, Hook::LeaveWithInfo] {
        let rust_before = RUST_HANDLER_CALLS.load(Ordering::SeqCst);
        let asm_before = calls.load(Ordering::SeqCst);
        hook.set_handler(Some(Handler::Rust));
        run(hook);
        hook.set_handler(Some(Handler::Trash));
        run(hook);
        hook.set_handler(None);
        run(hook);
        assert_eq!(
            RUST_HANDLER_CALLS.load(Ordering::SeqCst) - rust_before,
            1,
            "{hook:?}"
        );
        assert_eq!(calls.load(Ordering::SeqCst) - asm_before, 1, "{hook:?}");
    }
}
