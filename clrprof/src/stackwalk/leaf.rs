//! What a frame-pointer walk cannot see at the leaf, and how the SDK's
//! handler sees it anyway: a managed method caught in its prologue or at
//! its `ret`, and a thread caught in native code without frame pointers.
//!
//! - **Prologue and `ret`.** Until a method has set its frame pointer
//!   (x86-64: the JIT's `push rbp; [push reg; ...] [sub rsp, N]; lea rbp,
//!   [rsp + N]` or `mov rbp, rsp`; arm64: `stp x29, x30, ...; mov x29, sp`
//!   or `add x29, sp, #N`), and again at its last instruction (`ret`, after
//!   the epilogue restored the caller's frame pointer), the frame pointer
//!   is its caller's: the chain starts at the caller's caller, and the
//!   caller is missing. There the return address is where the prologue
//!   left it: on x86-64 at the stack pointer plus what the prologue pushed
//!   and reserved so far (decoded from the method's first bytes, which the
//!   code map gives), on arm64 in the link register. The decoding knows only
//!   the instructions JIT prologues open with; at anything else it stops
//!   and the walk goes on as the chain says (seen: about 1 sample in 2,000
//!   of a CPU-bound loop of small methods lost its caller before this).
//! - **Native leaves.** The C library is built without frame pointers: a
//!   thread blocked in it (a wait, a sleep, a read) has anything in `rbp`,
//!   and the chain ends at once, without the managed frames that called
//!   into it. Then the words above the stack pointer are searched, up to
//!   [`SCAN_WORDS`], for the first frame record of a frame-pointer-keeping
//!   caller: a word that is a frame pointer of this stack above itself,
//!   followed by a return address into managed code (the code map). The
//!   walk goes on from that record. The native frames in between (the C
//!   library's, the runtime's) are left out: the sampler reports a run of
//!   native frames as one unmanaged frame anyway.
//! - **A native leaf at its entry or `ret`.** A native function that keeps
//!   frame pointers has its caller's in `rbp` until it pushed its own, and
//!   again at its `ret`: the chain then starts at the managed caller's
//!   caller and the managed caller is missing (under an on-stack-replaced
//!   method, whose record skips its tier-0 frame, the caller's caller went
//!   missing too: .NET 10, `Spin` calling into the runtime's native
//!   `SystemNative_GetTimestamp` lost `Work`). The instruction at the
//!   program counter tells: `endbr64`, `push rbp` or `ret` (the return
//!   address at the stack pointer), `mov rbp, rsp` with the word at the
//!   stack pointer equal to `rbp` (just pushed: the return address above
//!   it); on arm64 `bti c`, `paciasp`, `stp x29, x30, [sp, #-N]!`, `mov x29,
//!   sp` or `ret` (the return address in the link register). Only a managed
//!   return address is taken.

// The handler and its leaf recovery run on Linux only; elsewhere the
// module keeps its types and the checked refusals.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

use super::fpwalk::{walk_recording, StartRegisters, WalkEnd, Walked};

const WORD: usize = core::mem::size_of::<usize>();

/// Words above the stack pointer searched for a frame record when the
/// walk starts in native code.
pub(crate) const SCAN_WORDS: usize = 512;

/// arm64 `ret` (to the link register).
const ARM64_RET: u32 = 0xD65F_03C0;
/// Prologue bytes decoded at most (x86-64) / instructions (arm64).
const PROLOGUE_BYTES: usize = 64;

// signal-context: async-signal-safe: a checked read of a slice
/// `code[i]`, if there is one.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn byte(code: &[u8], i: usize) -> Option<u8> {
    if i >= code.len() {
        return None;
    }
    // signal-context: bounds: `i < code.len()`, checked above
    Some(code[i])
}

// signal-context: async-signal-safe: a checked read of a slice
/// `code[i]`, if there is one.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
fn word(code: &[u32], i: usize) -> Option<u32> {
    if i >= code.len() {
        return None;
    }
    // signal-context: bounds: `i < code.len()`, checked above
    Some(code[i])
}

// signal-context: async-signal-safe: decodes bytes of a slice; no call
/// x86-64: where the return address is, as an offset from the stack
/// pointer, when the method whose code starts at `code[0]` is stopped at
/// `code[at]` before it set its frame pointer, or at a `ret`. `code` holds
/// the method's bytes from its start to at least `at` (included). `None`
/// when the frame pointer is set (the chain is right) or the bytes are not
/// a prologue this knows.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn x64_return_slot(code: &[u8], at: usize) -> Option<usize> {
    // At a `ret` (after the epilogue restored the caller's frame pointer).
    if matches!(byte(code, at), Some(0xC3) | Some(0xC2)) {
        return Some(0);
    }
    let mut pos = 0usize;
    let mut offset = 0usize;
    while pos < at {
        let b = |k: usize| byte(code, pos + k);
        // signal-context: foreign: `b` is the closure above, `byte` of the slice (marked)
        match (b(0), b(1), b(2), b(3)) {
            // push rbp / push rbx .. rdi
            (Some(0x50..=0x57), _, _, _) => {
                offset += WORD;
                pos += 1;
            }
            // push r8 .. r15
            (Some(0x41), Some(0x50..=0x57), _, _) => {
                offset += WORD;
                pos += 2;
            }
            // sub rsp, imm8
            (Some(0x48), Some(0x83), Some(0xEC), Some(imm)) => {
                offset += imm as usize;
                pos += 4;
            }
            // sub rsp, imm32
            (Some(0x48), Some(0x81), Some(0xEC), _) => {
                // signal-context: foreign: `b` is the closure above, `byte` of the slice (marked)
                let (b0, b1, b2, b3) = (b(3)?, b(4)?, b(5)?, b(6)?);
                offset +=
                    b0 as usize | (b1 as usize) << 8 | (b2 as usize) << 16 | (b3 as usize) << 24;
                pos += 7;
            }
            // mov rbp, rsp (two encodings), lea rbp, [rsp + disp8/disp32]:
            // the frame pointer is set from here on.
            (Some(0x48), Some(0x8B), Some(0xEC), _)
            | (Some(0x48), Some(0x89), Some(0xE5), _)
            | (Some(0x48), Some(0x8D), Some(0x6C), Some(0x24))
            | (Some(0x48), Some(0x8D), Some(0xAC), Some(0x24)) => return None,
            _ => return None,
        }
    }
    (pos == at).then_some(offset)
}

// signal-context: async-signal-safe: decodes words of a slice; no call
/// arm64: whether the method whose instructions start at `code[0]`,
/// stopped at instruction `at`, still has its caller's frame pointer (the
/// return address is then in the link register): no instruction before
/// `at` sets `x29` from `sp` (`mov x29, sp` is `add x29, sp, #0`), or the
/// instruction at `at` is `ret`.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(crate) fn arm64_return_in_lr(code: &[u32], at: usize) -> bool {
    // add x29, sp, #imm12 (any shift): 1001_0001_0s.._imm12_11111_11101
    const ADD_FP_SP_MASK: u32 = 0xFF80_03FF;
    const ADD_FP_SP: u32 = 0x9100_03FD;
    if word(code, at) == Some(ARM64_RET) {
        return true;
    }
    let mut k = 0;
    while k < at {
        match word(code, k) {
            Some(w) if w & ADD_FP_SP_MASK == ADD_FP_SP => return false,
            Some(_) => k += 1,
            None => return false,
        }
    }
    true
}

// signal-context: async-signal-safe: reads words of [lo, hi) only, calls `is_managed`
/// The first frame record at or above `from` (up to [`SCAN_WORDS`] words)
/// whose saved frame pointer lies above it inside `[lo, hi)` and whose
/// return address `is_managed`: its address.
///
/// # Safety
/// Every word of `[lo, hi)` readable for the call.
pub(crate) unsafe fn scan_for_record(
    from: usize,
    lo: usize,
    hi: usize,
    is_managed: impl Fn(usize) -> bool,
) -> Option<usize> {
    let mut x = from.checked_add(WORD - 1)? & !(WORD - 1);
    let end = from.saturating_add(SCAN_WORDS * WORD).min(hi);
    while x >= lo && x + 2 * WORD <= end {
        // SAFETY: [interrupted-stack] `x` and `x + WORD` lie inside [lo, hi) (the loop's
        // condition); the caller guarantees that memory readable.
        let (fp, ret) = unsafe {
            (
                core::ptr::read_volatile(x as *const usize),
                core::ptr::read_volatile((x + WORD) as *const usize),
            )
        };
        if fp > x && fp % WORD == 0 && fp <= hi.saturating_sub(2 * WORD) && is_managed(ret) {
            return Some(x);
        }
        x += WORD;
    }
    None
}

// signal-context: async-signal-safe: reads at most four code bytes through `code_byte`; no call
/// x86-64: where a native leaf stopped at `pc` keeps the return address
/// into its caller, as an offset from the stack pointer, when its frame
/// pointer is still its caller's (see the [module docs](self)): at
/// `endbr64`, `push rbp` or `ret`, 0; at `mov rbp, rsp` when `top` (the
/// word at the stack pointer) equals `fp` (the `push rbp` just before), 8.
/// `None` anywhere else. `code_byte(a)` is the code byte at `a`: it is asked
/// for `pc`, and for each next byte only when the bytes before say the
/// instruction at `pc` goes on (so it reads nothing past that instruction).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn x64_native_return_slot(
    pc: usize,
    top: usize,
    fp: usize,
    code_byte: impl Fn(usize) -> Option<u8>,
) -> Option<usize> {
    match code_byte(pc)? {
        // push rbp; ret; ret imm16
        0x55 | 0xC3 | 0xC2 => Some(0),
        // endbr64 (f3 0f 1e fa): an f3 prefix, then 0f (a two-byte
        // opcode), then 1e (its third byte, a ModRM follows).
        0xF3 => {
            let endbr = code_byte(pc + 1)? == 0x0F
                && code_byte(pc + 2)? == 0x1E
                && code_byte(pc + 3)? == 0xFA;
            endbr.then_some(0)
        }
        // mov rbp, rsp (48 89 e5): a REX prefix, then an opcode with a
        // ModRM byte.
        0x48 => {
            let mov = code_byte(pc + 1)? == 0x89 && code_byte(pc + 2)? == 0xE5;
            (mov && top == fp).then_some(WORD)
        }
        _ => None,
    }
}

// signal-context: async-signal-safe: decodes one instruction word; no call
/// arm64: whether a native leaf stopped at the instruction `insn` still has
/// its return address in the link register with its caller's frame
/// pointer in `x29` (see the [module docs](self)): `bti c`, `paciasp`,
/// `stp x29, x30, [sp, #-N]!`, `mov x29, sp` or `ret`.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(crate) fn arm64_native_return_in_lr(insn: u32) -> bool {
    const BTI_C: u32 = 0xD503_245F;
    const PACIASP: u32 = 0xD503_233F;
    const MOV_FP_SP: u32 = 0x9100_03FD;
    // stp x29, x30, [sp, #imm]! (pre-index, any imm7)
    const STP_FP_LR_PRE_MASK: u32 = 0xFFC0_7FFF;
    const STP_FP_LR_PRE: u32 = 0xA980_7BFD;
    matches!(insn, BTI_C | PACIASP | ARM64_RET | MOV_FP_SP)
        || insn & STP_FP_LR_PRE_MASK == STP_FP_LR_PRE
}

// signal-context: async-signal-safe: the decoders above and one stack word
/// The return address of a native leaf into its caller, where its frame
/// pointer is still the caller's ([`x64_native_return_slot`],
/// [`arm64_native_return_in_lr`]).
///
/// # Safety
/// The stack word at `regs.sp` readable (`regs.sp` inside `[lo, hi)`);
/// `code_byte` as for [`x64_native_return_slot`].
unsafe fn native_leaf_return(
    regs: StartRegisters,
    lr: usize,
    hi: usize,
    code_byte: impl Fn(usize) -> Option<u8>,
) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let _ = lr;
        if regs.sp % WORD != 0 || regs.sp > hi.saturating_sub(2 * WORD) {
            return None;
        }
        // SAFETY: [interrupted-stack] `regs.sp` lies inside [lo, hi) (the caller's
        // guarantee) with a second word below `hi` (checked above).
        let top = unsafe { core::ptr::read_volatile(regs.sp as *const usize) };
        let offset = x64_native_return_slot(regs.pc, top, regs.fp, code_byte)?;
        let slot = regs.sp + offset;
        // SAFETY: [interrupted-stack] `slot` is `sp` or `sp + WORD`, both inside [sp, hi)
        // (checked above).
        Some(unsafe { core::ptr::read_volatile(slot as *const usize) })
    }
    #[cfg(target_arch = "aarch64")]
    {
        let _ = hi;
        if regs.pc % 4 != 0 {
            return None;
        }
        // An aligned instruction word: its four bytes, little-endian.
        let b = |k: usize| code_byte(regs.pc + k);
        // signal-context: foreign: `b` is the closure above, the caller's `code_byte` (its contract: bytes of the interrupted instruction, all four of an aligned arm64 one)
        let insn = u32::from_le_bytes([b(0)?, b(1)?, b(2)?, b(3)?]);
        arm64_native_return_in_lr(insn).then_some(lr)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (regs, lr, hi, code_byte);
        None
    }
}

/// How the handler's walk started: what [`walk_from_leaf`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct LeafFix {
    /// The caller of a method stopped in its prologue or at its `ret` was
    /// put back.
    pub(crate) caller_restored: bool,
    /// The walk began in native code and went on from a frame record found
    /// above the stack pointer.
    pub(crate) scanned: bool,
}

// signal-context: async-signal-safe: reads words of [lo, hi) and code bytes of the leaf's method; calls `function_of`
/// The frame-pointer walk of the handler: [`walk_recording`], with the
/// leaf's two blind spots handled (see the [module docs](self)).
/// `function_of(address, leaf)` is the code map (the function and the start
/// of its code range; `leaf` for the interrupted instruction, else a return
/// address); `lr` is the link register (arm64; 0 elsewhere); `code_byte(a)`
/// reads the code byte at `a`, asked only for bytes of the instruction at
/// `regs.pc` when that is native code ([`x64_native_return_slot`]).
///
/// # Safety
/// Every word of `[lo, hi)` readable for the call (the calling thread's own
/// stack, `regs` taken on it), and the code of every function
/// `function_of` answers for readable from its range's start to `regs.pc`
/// while the thread runs there.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn walk_from_leaf(
    regs: StartRegisters,
    lr: usize,
    lo: usize,
    hi: usize,
    out: &mut [usize],
    records: &mut [usize],
    function_of: impl Fn(usize, bool) -> Option<(usize, usize)>,
    code_byte: impl Fn(usize) -> Option<u8>,
) -> (Walked, LeafFix) {
    let mut fix = LeafFix {
        caller_restored: false,
        scanned: false,
    };
    if out.len() < 2 || records.len() < 2 || regs.sp < lo || regs.sp >= hi {
        // SAFETY: [interrupted-stack] the caller's guarantee, passed on.
        return (unsafe { walk_recording(regs, lo, hi, out, records) }, fix);
    }
    let leaf = function_of(regs.pc, true);
    {
        let ret = match leaf {
            // SAFETY: [interrupted-stack] the caller's guarantee: the leaf's code from its start
            // to the interrupted instruction is readable.
            Some((_, start)) => unsafe { leaf_return(regs, lr, start, hi) },
            // SAFETY: [interrupted-stack] `regs.sp` inside [lo, hi) (checked on entry);
            // `code_byte` is the caller's.
            None => unsafe { native_leaf_return(regs, lr, hi, &code_byte) },
        };
        let managed = match ret {
            Some(r) => function_of(r, false).is_some(),
            None => false,
        };
        if let (Some(ret), true) = (ret, managed) {
            out[0] = regs.pc;
            records[0] = regs.sp;
            // signal-context: bounds: both lengths are at least 2, checked on entry
            let (rest, rest_records) = (&mut out[1..], &mut records[1..]);
            // SAFETY: [interrupted-stack] the caller's guarantee, passed on.
            let walked = unsafe {
                walk_recording(
                    StartRegisters {
                        pc: ret,
                        sp: regs.sp,
                        fp: regs.fp,
                    },
                    lo,
                    hi,
                    rest,
                    rest_records,
                )
            };
            fix.caller_restored = true;
            return (
                Walked {
                    frames: walked.frames + 1,
                    end: walked.end,
                },
                fix,
            );
        }
    }
    // SAFETY: [interrupted-stack] the caller's guarantee, passed on.
    let walked = unsafe { walk_recording(regs, lo, hi, out, records) };
    if leaf.is_some() || walked.end == WalkEnd::Full {
        return (walked, fix);
    }
    // A native leaf: if the chain found no managed frame, look for the
    // first record of a managed caller above the stack pointer.
    let mut k = 1;
    while k < walked.frames {
        // signal-context: bounds: `k < walked.frames <= out.len()`
        let ret = out[k];
        if function_of(ret, false).is_some() {
            return (walked, fix);
        }
        k += 1;
    }
    // SAFETY: [interrupted-stack] the caller's guarantee, passed on.
    let found = unsafe { scan_for_record(regs.sp, lo, hi, |r| function_of(r, false).is_some()) };
    let Some(x) = found else {
        return (walked, fix);
    };
    // The record at `x`: the caller's frame pointer, then its return address.
    // signal-context: bounds: both lengths are at least 2, checked on entry
    let (rest, rest_records) = (&mut out[1..], &mut records[1..]);
    // SAFETY: [interrupted-stack] `x` and `x + WORD` lie inside [lo, hi) (scan_for_record
    // checked them); the caller's guarantee otherwise.
    let walked = unsafe {
        let ret = core::ptr::read_volatile((x + WORD) as *const usize);
        let fp = core::ptr::read_volatile(x as *const usize);
        walk_recording(
            StartRegisters {
                pc: ret,
                sp: x + 2 * WORD,
                fp,
            },
            lo,
            hi,
            rest,
            rest_records,
        )
    };
    out[0] = regs.pc;
    records[0] = regs.sp;
    fix.scanned = true;
    (
        Walked {
            frames: walked.frames + 1,
            end: walked.end,
        },
        fix,
    )
}

// signal-context: async-signal-safe: reads the leaf's code bytes and one stack word
/// The return address of a managed leaf stopped before it set its frame
/// pointer, or at its `ret`, if it is.
///
/// # Safety
/// The code from `start` to `regs.pc` readable; the stack words from
/// `regs.sp` to `hi` readable.
unsafe fn leaf_return(regs: StartRegisters, lr: usize, start: usize, hi: usize) -> Option<usize> {
    let at = regs.pc.checked_sub(start)?;
    #[cfg(target_arch = "x86_64")]
    {
        let _ = lr;
        if at >= PROLOGUE_BYTES {
            // Past any prologue: only a `ret` may still hide the caller.
            // SAFETY: [interrupted-stack] the interrupted instruction's own first byte.
            let b = unsafe { core::ptr::read_volatile(regs.pc as *const u8) };
            if b != 0xC3 && b != 0xC2 {
                return None;
            }
        }
        let len = at.min(PROLOGUE_BYTES - 1) + 1;
        let from = regs.pc - (len - 1);
        // SAFETY: [interrupted-stack] `len` bytes ending with the interrupted instruction's
        // first byte, inside the leaf's code range (from its start at most).
        let code = unsafe { core::slice::from_raw_parts(from as *const u8, len) };
        let offset = if at < PROLOGUE_BYTES {
            x64_return_slot(code, at)?
        } else {
            0
        };
        let slot = regs.sp.checked_add(offset)?;
        if slot % WORD != 0 || slot > hi.saturating_sub(WORD) {
            return None;
        }
        // SAFETY: [interrupted-stack] `slot` lies inside [sp, hi), checked above.
        Some(unsafe { core::ptr::read_volatile(slot as *const usize) })
    }
    #[cfg(target_arch = "aarch64")]
    {
        let _ = hi;
        if at % 4 != 0 {
            return None;
        }
        let n = (at / 4).min(PROLOGUE_BYTES / 4 - 1) + 1;
        let from = regs.pc - (n - 1) * 4;
        // SAFETY: [interrupted-stack] `n` instructions ending with the interrupted one,
        // inside the leaf's code range.
        let code = unsafe { core::slice::from_raw_parts(from as *const u32, n) };
        let in_lr = if at / 4 < PROLOGUE_BYTES / 4 {
            arm64_return_in_lr(code, n - 1)
        } else {
            // Past any prologue: only a `ret` may still hide the caller.
            word(code, n - 1) == Some(ARM64_RET)
        };
        in_lr.then_some(lr)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (regs, lr, start, hi, at);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prologue of the JIT on x86-64: push rbp; push r15; push rbx;
    /// sub rsp, 0x18; lea rbp, [rsp + 0x30]; then the body.
    const PROLOGUE: &[u8] = &[
        0x55, // push rbp
        0x41, 0x57, // push r15
        0x53, // push rbx
        0x48, 0x83, 0xEC, 0x18, // sub rsp, 0x18
        0x48, 0x8D, 0x6C, 0x24, 0x30, // lea rbp, [rsp + 0x30]
        0x90, 0xC3, // nop; ret
    ];

    #[test]
    fn the_return_address_is_found_at_each_step_of_a_prologue() {
        assert_eq!(x64_return_slot(PROLOGUE, 0), Some(0), "at entry");
        assert_eq!(x64_return_slot(PROLOGUE, 1), Some(8), "after push rbp");
        assert_eq!(x64_return_slot(PROLOGUE, 3), Some(16), "after push r15");
        assert_eq!(x64_return_slot(PROLOGUE, 4), Some(24), "after push rbx");
        assert_eq!(x64_return_slot(PROLOGUE, 8), Some(48), "after sub rsp");
        assert_eq!(
            x64_return_slot(PROLOGUE, 13),
            None,
            "frame set: the chain is right"
        );
        assert_eq!(x64_return_slot(PROLOGUE, 14), Some(0), "at ret");
        // Bytes that are no prologue: nothing guessed.
        assert_eq!(x64_return_slot(&[0x31, 0xC0, 0x90], 2), None);
        // Inside an instruction (not a boundary the decoding reaches).
        assert_eq!(x64_return_slot(PROLOGUE, 2), None);
        // sub rsp, imm32
        let big = [0x55, 0x48, 0x81, 0xEC, 0x00, 0x01, 0x00, 0x00, 0x90];
        assert_eq!(x64_return_slot(&big, 8), Some(8 + 0x100));
    }

    #[test]
    fn arm64_prologues_keep_the_return_in_lr_until_x29_is_set() {
        // stp x29, x30, [sp, #-32]!; mov x29, sp; ...; ret
        let code = [0xA9BE_7BFD, 0x9100_03FD, 0xD503_201F, 0xD65F_03C0];
        assert!(arm64_return_in_lr(&code, 0), "at entry");
        assert!(arm64_return_in_lr(&code, 1), "after stp, at mov x29, sp");
        assert!(!arm64_return_in_lr(&code, 2), "frame set");
        assert!(arm64_return_in_lr(&code, 3), "at ret");
        // sub sp, sp, #48; stp x29, x30, [sp, #32]; add x29, sp, #32
        let code = [0xD100_C3FF, 0xA902_7BFD, 0x9100_83FD, 0xD503_201F];
        assert!(arm64_return_in_lr(&code, 2));
        assert!(!arm64_return_in_lr(&code, 3));
    }

    /// Words of any value (up to `usize::MAX`) in the stack and in the
    /// registers never make the leaf's walk overflow, panic or read outside
    /// the stack (a panic in a signal handler aborts the process).
    #[test]
    fn any_words_at_all_are_survived() {
        let mut stack = vec![0usize; 256];
        let base = stack.as_ptr() as usize;
        let (lo, hi) = (base, base + stack.len() * WORD);
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as usize
        };
        let code = PROLOGUE.as_ptr() as usize;
        for round in 0..3000 {
            for w in stack.iter_mut() {
                *w = match next() % 4 {
                    0 => lo + next() % (hi - lo + 64),
                    1 => usize::MAX - next() % 64,
                    2 => 0x5000 + next() % 0x1000,
                    _ => next(),
                };
            }
            // The leaf either in "managed" code (the prologue bytes above,
            // readable) or anywhere.
            let pc = if round % 2 == 0 {
                code + next() % PROLOGUE.len()
            } else {
                next()
            };
            let regs = StartRegisters {
                pc,
                sp: lo + (next() % (hi - lo)) / WORD * WORD,
                fp: if round % 3 == 0 {
                    next()
                } else {
                    lo + next() % (hi - lo)
                },
            };
            let function_of = |ip: usize, leaf: bool| {
                let at = if leaf { ip } else { ip.wrapping_sub(1) };
                if (code..code + PROLOGUE.len()).contains(&at) {
                    Some((1, code))
                } else if (0x5000..0x6000).contains(&at) {
                    Some((2, 0x5000))
                } else {
                    None
                }
            };
            let mut out = [0usize; 32];
            let mut records = [0usize; 32];
            // Code bytes: those of PROLOGUE, or of a fake native function
            // (random bytes, or the patterns the native decoder knows).
            let native = [0x55u8, 0xC3, 0xF3, 0x0F, 0x1E, 0xFA, 0x48, 0x89, 0xE5];
            let native_at = 0x9000usize;
            let code_byte = |a: usize| {
                if (code..code + PROLOGUE.len()).contains(&a) {
                    Some(PROLOGUE[a - code])
                } else if (native_at..native_at + native.len()).contains(&a) {
                    Some(native[a - native_at])
                } else {
                    None
                }
            };
            let regs = if round % 5 == 1 {
                StartRegisters {
                    pc: native_at + next() % native.len(),
                    ..regs
                }
            } else {
                regs
            };
            // SAFETY: [test-fake] the bounds are the vector's own memory; the only code
            // `function_of` answers for is PROLOGUE, a readable static, and
            // `code_byte` reads only its own arrays.
            let (w, _) = unsafe {
                walk_from_leaf(
                    regs,
                    next(),
                    lo,
                    hi,
                    &mut out,
                    &mut records,
                    function_of,
                    code_byte,
                )
            };
            assert!(w.frames <= out.len());
        }
    }

    #[test]
    fn a_native_leaf_finds_the_first_managed_callers_record() {
        let mut stack = vec![0usize; 64];
        let base = stack.as_ptr() as usize;
        let addr = |i: usize| base + i * WORD;
        // Garbage below, a record at word 20 whose return address is
        // managed (0x5000..0x6000), its saved frame pointer at word 30.
        stack[3] = addr(2); // a frame pointer below itself: refused
        stack[4] = 0x5010;
        stack[10] = addr(40); // a frame pointer, but a native return
        stack[11] = 0x1234;
        stack[20] = addr(30);
        stack[21] = 0x5020;
        let managed = |r: usize| (0x5000..0x6000).contains(&r);
        let (lo, hi) = (base, base + stack.len() * WORD);
        // SAFETY: [test-fake] the bounds are the vector's own memory.
        let x = unsafe { scan_for_record(addr(0), lo, hi, managed) };
        assert_eq!(x, Some(addr(20)));
        // Nothing above the start point: none.
        // SAFETY: [test-fake] as above.
        let x = unsafe { scan_for_record(addr(22), lo, hi, managed) };
        assert_eq!(x, None);
    }

    #[test]
    fn a_native_leaf_at_its_entry_or_ret_names_where_its_return_address_is() {
        let at = |bytes: &'static [u8]| move |a: usize| bytes.get(a.wrapping_sub(0x100)).copied();
        assert_eq!(
            x64_native_return_slot(0x100, 0, 0, at(&[0x55])),
            Some(0),
            "push rbp"
        );
        assert_eq!(
            x64_native_return_slot(0x100, 0, 0, at(&[0xC3])),
            Some(0),
            "ret"
        );
        let endbr: &[u8] = &[0xF3, 0x0F, 0x1E, 0xFA];
        assert_eq!(
            x64_native_return_slot(0x100, 0, 0, at(endbr)),
            Some(0),
            "endbr64"
        );
        // mov rbp, rsp just after push rbp: the pushed word is rbp.
        let mov: &[u8] = &[0x48, 0x89, 0xE5];
        assert_eq!(x64_native_return_slot(0x100, 7, 7, at(mov)), Some(8));
        assert_eq!(
            x64_native_return_slot(0x100, 7, 9, at(mov)),
            None,
            "not after push rbp"
        );
        // Anything else, a prefix that is no endbr64, or a byte the decoder
        // may not read (past a one-byte instruction): nothing guessed.
        assert_eq!(x64_native_return_slot(0x100, 0, 0, at(&[0x90])), None);
        assert_eq!(x64_native_return_slot(0x100, 0, 0, at(&[0xF3, 0x90])), None);
        assert_eq!(x64_native_return_slot(0x100, 0, 0, at(&[0xF3, 0x0F])), None);
        assert_eq!(x64_native_return_slot(0x100, 0, 0, at(&[0x48, 0x89])), None);
    }

    #[test]
    fn an_arm64_native_leaf_at_its_entry_or_ret_has_its_return_in_lr() {
        for insn in [
            0xD503_245F, // bti c
            0xD503_233F, // paciasp
            0xA9BE_7BFD, // stp x29, x30, [sp, #-32]!
            0xA9BF_7BFD, // stp x29, x30, [sp, #-16]!
            0x9100_03FD, // mov x29, sp
            0xD65F_03C0, // ret
        ] {
            assert!(arm64_native_return_in_lr(insn), "{insn:#x}");
        }
        for insn in [
            0xA9017BFD,  // stp x29, x30, [sp, #16] (no writeback: not an entry)
            0xD503_201F, // nop
            0x9100_83FD, // add x29, sp, #32
        ] {
            assert!(!arm64_native_return_in_lr(insn), "{insn:#x}");
        }
    }

    /// The .NET 10 case: a native leaf at `push rbp`, called from an
    /// on-stack-replaced `Spin` whose record skips its tier-0 frame. The
    /// leaf's caller comes from the stack pointer, and the OSR repair then
    /// puts `Work` back.
    #[test]
    fn a_native_leaf_at_entry_under_an_osr_method_keeps_both_callers() {
        let mut stack = vec![0usize; 64];
        let base = stack.as_ptr() as usize;
        let addr = |i: usize| base + i * WORD;
        // Code: Spin's OSR body at 0x5000, its tier-0 code at 0x6000, Work
        // at 0x7000, Main at 0x8000.
        let function_of = |ip: usize, leaf: bool| {
            let at = if leaf { ip } else { ip.wrapping_sub(1) };
            match at {
                0x5000..=0x5FFF => Some((1, 0x5000)),
                0x6000..=0x6FFF => Some((1, 0x6000)),
                0x7000..=0x7FFF => Some((2, 0x7000)),
                0x8000..=0x8FFF => Some((3, 0x8000)),
                _ => None,
            }
        };
        // sp = word 0: the return address into the OSR body.
        stack[0] = 0x5040;
        // The OSR body's record at word 8: Work's record (the tier-0
        // frame's caller's), and the patchpoint's return into tier-0 code.
        stack[8] = addr(30);
        stack[9] = 0x6080;
        // The tier-0 frame's own record at word 20: Work's record, and
        // the return into Work.
        stack[20] = addr(30);
        stack[21] = 0x7010;
        // Work's record at word 30: Main's, the return into Main.
        stack[30] = addr(40);
        stack[31] = 0x8010;
        stack[40] = 0;
        let (lo, hi) = (base, base + stack.len() * WORD);
        let regs = StartRegisters {
            pc: 0x100,
            sp: addr(0),
            fp: addr(8),
        };
        let push_rbp = |a: usize| (a == 0x100).then_some(0x55u8);
        let mut out = [0usize; 16];
        let mut records = [0usize; 16];
        // SAFETY: [test-fake] the bounds are the vector's own memory.
        let (w, fix) = unsafe {
            walk_from_leaf(
                regs,
                0,
                lo,
                hi,
                &mut out,
                &mut records,
                function_of,
                push_rbp,
            )
        };
        assert!(fix.caller_restored);
        let mut frames = w.frames;
        // SAFETY: [test-fake] as above; `records` as the walk wrote them.
        let restored = unsafe {
            crate::stackwalk::fpwalk::restore_osr_callers(
                &mut out,
                &mut records,
                &mut frames,
                lo,
                hi,
                function_of,
            )
        };
        assert_eq!(restored, 1);
        assert_eq!(&out[..frames], &[0x100, 0x5040, 0x7010, 0x8010]);

        // A runtime helper without a frame of its own, stopped past its
        // entry (`rbp` still the OSR body's, the return address not at the
        // stack pointer): the chain gives the patchpoint's return (standing
        // for Spin), then Main; the OSR repair puts Work in after it.
        stack[0] = 0x1234;
        let regs = StartRegisters {
            pc: 0x100,
            sp: addr(0),
            fp: addr(8),
        };
        let nothing = |_: usize| None;
        let mut out = [0usize; 16];
        let mut records = [0usize; 16];
        // SAFETY: [test-fake] as above.
        let (w, fix) = unsafe {
            walk_from_leaf(
                regs,
                0,
                lo,
                hi,
                &mut out,
                &mut records,
                function_of,
                nothing,
            )
        };
        assert!(!fix.caller_restored && !fix.scanned);
        assert_eq!(&out[..w.frames], &[0x100, 0x6080, 0x8010], "Work skipped");
        let mut frames = w.frames;
        // SAFETY: [test-fake] as above.
        let restored = unsafe {
            crate::stackwalk::fpwalk::restore_osr_callers(
                &mut out,
                &mut records,
                &mut frames,
                lo,
                hi,
                function_of,
            )
        };
        assert_eq!(restored, 1);
        assert_eq!(&out[..frames], &[0x100, 0x6080, 0x7010, 0x8010]);
        assert_eq!(records[2], addr(20), "the tier-0 frame's record");
        // A plain (not OSR) native leaf's chain is left as it is: nothing
        // between the first record and the next looks like a skipped one.
        stack[20] = 0;
        stack[21] = 0;
        let mut out = [0usize; 16];
        let mut records = [0usize; 16];
        // SAFETY: [test-fake] as above.
        let (w, _) = unsafe {
            walk_from_leaf(
                regs,
                0,
                lo,
                hi,
                &mut out,
                &mut records,
                function_of,
                nothing,
            )
        };
        let mut frames = w.frames;
        // SAFETY: [test-fake] as above.
        let restored = unsafe {
            crate::stackwalk::fpwalk::restore_osr_callers(
                &mut out,
                &mut records,
                &mut frames,
                lo,
                hi,
                function_of,
            )
        };
        assert_eq!((restored, frames), (0, 3));
    }
}
