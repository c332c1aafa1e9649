//! Register-level tests of the fast-path ELT trampolines (`src/elt.rs`).
//!
//! The test-only assembly harness (`asm/harness/`, linked into test binaries
//! only) fills every general register and every FP/SIMD register (all 128
//! bits) with distinct sentinels, puts the function ID in the register the
//! JIT uses for the hook, calls the trampoline the way jitted code does
//! (aligned stack, Windows home area, an indirect call that disturbs no
//! register) and records every register afterwards. The handler the
//! trampoline calls is, in most tests, an assembly handler that clobbers
//! every register its C ABI allows, so a register the trampoline forgot to
//! save shows up as a changed value.
#![cfg(clrprof_elt_harness)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use clrprof_sys::elt::{self, EltHandler};

#[cfg(target_arch = "x86_64")]
mod arch {
    /// Register block shared with `harness_x86_64_*.S`.
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
        }
    }
    #[cfg(windows)]
    pub fn id_register(_hook: super::Hook) -> usize {
        1 // rcx
    }

    /// Registers the trampoline must hand back unchanged (beyond rsp).
    #[cfg(not(windows))]
    pub fn must_preserve(lane: &super::Lane) -> bool {
        match lane {
            super::Lane::Gpr(i) => !matches!(i, 10 | 11), // all but r10, r11
            super::Lane::SimdLow(i) | super::Lane::SimdHigh(i) => *i < 8, // xmm0-xmm7
        }
    }
    #[cfg(windows)]
    pub fn must_preserve(lane: &super::Lane) -> bool {
        match lane {
            super::Lane::Gpr(i) => !matches!(i, 10 | 11), // all but r10, r11
            super::Lane::SimdLow(_) | super::Lane::SimdHigh(_) => true, // xmm0-xmm15
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
    /// Register block shared with `harness_aarch64.S`.
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

    pub fn id_register(_hook: super::Hook) -> usize {
        10 // x10
    }

    /// x0-x8, x19-x29, q0-q7 (all 128 bits) and the low halves of v8-v15.
    pub fn must_preserve(lane: &super::Lane) -> bool {
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
    static clrprof_elt_harness_handler_id: AtomicU64;
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
}

const HOOKS: [Hook; 3] = [Hook::Enter, Hook::Leave, Hook::Tailcall];

impl Hook {
    fn trampoline(self) -> usize {
        match self {
            Hook::Enter => elt::enter3_trampoline() as usize,
            Hook::Leave => elt::leave3_trampoline() as usize,
            Hook::Tailcall => elt::tailcall3_trampoline() as usize,
        }
    }

    /// # Safety
    /// `handler` must be callable from any thread and must not unwind.
    unsafe fn set_handler(self, handler: Option<EltHandler>) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match self {
                Hook::Enter => elt::set_enter3_handler(handler),
                Hook::Leave => elt::set_leave3_handler(handler),
                Hook::Tailcall => elt::set_tailcall3_handler(handler),
            }
        }
    }

    fn handler(self) -> Option<EltHandler> {
        match self {
            Hook::Enter => elt::enter3_handler(),
            Hook::Leave => elt::leave3_handler(),
            Hook::Tailcall => elt::tailcall3_handler(),
        }
    }

    /// A distinct function ID per hook.
    fn id(self) -> u64 {
        match self {
            Hook::Enter => 0x0000_7F00_1234_5670,
            Hook::Leave => 0x0000_7F00_1234_5680,
            Hook::Tailcall => 0x0000_7F00_1234_5690,
        }
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

fn harness_globals() -> (&'static AtomicU64, &'static AtomicU64, &'static AtomicU64) {
    // SAFETY: the harness defines these as 8-byte aligned words in writable
    // data; nothing else touches them while the HARNESS lock is held.
    unsafe {
        (
            &clrprof_elt_harness_handler_id,
            &clrprof_elt_harness_handler_sp,
            &clrprof_elt_harness_handler_calls,
        )
    }
}

/// Calls `target` through the harness with sentinels in every register and
/// `id` in `id_register`.
fn run(target: usize, id_register: usize, id: u64) -> Outcome {
    let mut input = sentinels();
    input.gpr[id_register] = id;
    let mut output = empty();
    let (_, _, calls) = harness_globals();
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
    let outcome = run(trash as usize, arch::id_register(Hook::Enter), 7);
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
fn trampolines_preserve_jit_registers_and_pass_the_id() {
    let _guard = lock();
    let (handler_id, handler_sp, _) = harness_globals();
    for hook in HOOKS {
        // SAFETY: the trash handler obeys the C ABI and does not unwind.
        unsafe { hook.set_handler(Some(clrprof_elt_harness_trash_handler)) };
        let outcome = run(hook.trampoline(), arch::id_register(hook), hook.id());
        // SAFETY: removing a handler is always allowed.
        unsafe { hook.set_handler(None) };

        assert_eq!(outcome.handler_calls, 1, "{hook:?}: handler calls");
        assert_eq!(
            handler_id.load(Ordering::SeqCst),
            hook.id(),
            "{hook:?}: handler's ID"
        );
        assert_eq!(
            handler_sp.load(Ordering::SeqCst) % 16,
            arch::HANDLER_SP_MOD_16,
            "{hook:?}: handler called with a misaligned stack"
        );
        let broken = changed(&outcome, arch::must_preserve);
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
    for hook in HOOKS {
        // SAFETY: removing a handler is always allowed.
        unsafe { hook.set_handler(None) };
        assert!(hook.handler().is_none());
        let outcome = run(hook.trampoline(), arch::id_register(hook), hook.id());
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
static RUST_HANDLER_CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn rust_handler(id: usize) {
    RUST_HANDLER_ID.store(id, Ordering::SeqCst);
    RUST_HANDLER_CALLS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn rust_handler_is_called_with_the_id_and_registers_survive() {
    let _guard = lock();
    for hook in HOOKS {
        let before = RUST_HANDLER_CALLS.load(Ordering::SeqCst);
        // SAFETY: `rust_handler` only touches atomics and cannot unwind.
        unsafe { hook.set_handler(Some(rust_handler)) };
        assert_eq!(
            hook.handler().map(|h| h as usize),
            Some(rust_handler as EltHandler as usize)
        );
        let outcome = run(hook.trampoline(), arch::id_register(hook), hook.id());
        // SAFETY: removing a handler is always allowed.
        unsafe { hook.set_handler(None) };

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
        let broken = changed(&outcome, arch::must_preserve);
        assert!(broken.is_empty(), "{hook:?}: {broken:#?}");
        assert_stack_restored(&outcome);
    }
}

#[test]
fn handler_swapped_between_calls_takes_effect_at_once() {
    let _guard = lock();
    let hook = Hook::Leave;
    let (_, _, calls) = harness_globals();
    let rust_before = RUST_HANDLER_CALLS.load(Ordering::SeqCst);
    let asm_before = calls.load(Ordering::SeqCst);
    // SAFETY: both handlers obey the C ABI and do not unwind.
    unsafe { hook.set_handler(Some(rust_handler)) };
    run(hook.trampoline(), arch::id_register(hook), 1);
    // SAFETY: as above.
    unsafe { hook.set_handler(Some(clrprof_elt_harness_trash_handler)) };
    run(hook.trampoline(), arch::id_register(hook), 2);
    // SAFETY: removing a handler is always allowed.
    unsafe { hook.set_handler(None) };
    assert_eq!(RUST_HANDLER_CALLS.load(Ordering::SeqCst) - rust_before, 1);
    assert_eq!(calls.load(Ordering::SeqCst) - asm_before, 1);
}
