//! ELT trampolines for the AArch64 procedure call standard (Linux,
//! Android, macOS): the only source of them, assembled by rustc itself.
//!
//! Six trampolines share one body (the `clrprof_elt_trampoline` assembler
//! macro below):
//!
//! * fast path (`enter3`, `leave3`, `tailcall3`): called from jitted code
//!   with the JIT's profiler-hook convention, the ID in `x10`; it is moved
//!   to `x0`, the C ABI's first argument. For `enter3` the JIT also passes
//!   the hooked method's caller's stack pointer in `x11`
//!   (`REG_PROFILER_ENTER_ARG_CALLER_SP`), which the trampoline leaves
//!   alone: the caller-SP forwarder, installed as the enter handler, moves
//!   it to `x1` and branches to the caller-SP slot's handler.
//! * WithInfo (`enter3_with_info`, ...): called by the runtime's stub with
//!   the C ABI, `(FunctionIDOrClientID, COR_PRF_ELT_INFO)` already in
//!   `x0`, `x1`, where the handler takes them.
//!
//! The body: load-acquire the handler from its slot into `x16` (a slot
//! always holds a function: the no-op handler `clrprof_elt_noop_handler`
//! when none is installed, so there is no test and no branch); push a
//! 224-byte frame (sp stays
//! 16-byte aligned) holding `fp lr`, `x0`-`x8` and all 128 bits of
//! `q0`-`q7` — every argument and return register, the indirect-result
//! register `x8` included; call the handler; restore; pop; return. CFI
//! directives describe the frame.
//!
//! Frame layout: `[sp+0]` fp, lr; `[sp+16]` x0, x1; `[sp+32]` x2, x3;
//! `[sp+48]` x4, x5; `[sp+64]` x6, x7; `[sp+80]` x8 (and 8 bytes of
//! padding); `[sp+96]` q0, q1; `[sp+128]` q2, q3; `[sp+160]` q4, q5;
//! `[sp+192]` q6, q7.
//!
//! Per-object-format differences (ELF: `.hidden`, `.type`, `.size`,
//! `:lo12:` relocations; Mach-O: `.private_extern`, `@PAGE`/`@PAGEOFF`)
//! are the small assembler macros each `cfg` passes to `elt_asm!`.

use super::asm_symbols::*;

macro_rules! elt_asm {
    (function: $function:literal, data: $data:literal, end: $end:literal, address: $address:literal) => {
        core::arch::global_asm!(
            ".macro clrprof_elt_function name",
            $function,
            ".endm",
            ".macro clrprof_elt_data name",
            $data,
            ".endm",
            ".macro clrprof_elt_end name",
            $end,
            ".endm",
            // reg = the address of sym.
            ".macro clrprof_elt_address reg, sym",
            $address,
            ".endm",
            // The no-op handler: what an empty slot holds.
            ".text",
            ".p2align 2",
            "clrprof_elt_function {noop}",
            "{noop}:",
            "  .cfi_startproc",
            "  ret",
            "  .cfi_endproc",
            "clrprof_elt_end {noop}",
            // Handler slots: one pointer-sized word each, holding the
            // handler's address (the no-op handler when none is installed).
            // Written by mod.rs with release stores; read with ldar.
            ".data",
            ".p2align 3",
            "clrprof_elt_data {enter_slot}",
            "{enter_slot}: .quad {noop}",
            "clrprof_elt_data {leave_slot}",
            "{leave_slot}: .quad {noop}",
            "clrprof_elt_data {tailcall_slot}",
            "{tailcall_slot}: .quad {noop}",
            "clrprof_elt_data {enter_info_slot}",
            "{enter_info_slot}: .quad {noop}",
            "clrprof_elt_data {leave_info_slot}",
            "{leave_info_slot}: .quad {noop}",
            "clrprof_elt_data {tailcall_info_slot}",
            "{tailcall_info_slot}: .quad {noop}",
            "clrprof_elt_data {enter_sp_slot}",
            "{enter_sp_slot}: .quad {noop}",
            ".text",
            // The caller-SP forwarder: an enter handler (ID in x0) called
            // by the enter trampoline with the JIT's x11 untouched; x11
            // becomes the second argument of the caller-SP slot's handler,
            // which returns to the trampoline (x16 is the call's scratch).
            ".p2align 2",
            "clrprof_elt_function {forwarder}",
            "{forwarder}:",
            "  .cfi_startproc",
            "  clrprof_elt_address x16, {enter_sp_slot}",
            "  ldar x16, [x16]",
            "  mov x1, x11",
            "  br x16",
            "  .cfi_endproc",
            "clrprof_elt_end {forwarder}",
            // name, slot, register holding the ID on entry.
            ".macro clrprof_elt_trampoline name, slot, id",
            "  .p2align 2",
            "  clrprof_elt_function \\name",
            "\\name:",
            "  .cfi_startproc",
            "  clrprof_elt_address x16, \\slot",
            "  ldar x16, [x16]",
            "  stp x29, x30, [sp, #-224]!",
            "  .cfi_def_cfa_offset 224",
            "  .cfi_offset x29, -224",
            "  .cfi_offset x30, -216",
            "  mov x29, sp",
            "  stp x0, x1, [sp, #16]",
            "  stp x2, x3, [sp, #32]",
            "  stp x4, x5, [sp, #48]",
            "  stp x6, x7, [sp, #64]",
            "  str x8, [sp, #80]",
            "  stp q0, q1, [sp, #96]",
            "  stp q2, q3, [sp, #128]",
            "  stp q4, q5, [sp, #160]",
            "  stp q6, q7, [sp, #192]",
            "  .ifnc \\id, x0",
            "  mov x0, \\id",
            "  .endif",
            "  blr x16",
            "  ldp q6, q7, [sp, #192]",
            "  ldp q4, q5, [sp, #160]",
            "  ldp q2, q3, [sp, #128]",
            "  ldp q0, q1, [sp, #96]",
            "  ldr x8, [sp, #80]",
            "  ldp x6, x7, [sp, #64]",
            "  ldp x4, x5, [sp, #48]",
            "  ldp x2, x3, [sp, #32]",
            "  ldp x0, x1, [sp, #16]",
            "  ldp x29, x30, [sp], #224",
            "  .cfi_def_cfa_offset 0",
            "  .cfi_restore x29",
            "  .cfi_restore x30",
            "  ret",
            "  .cfi_endproc",
            "  clrprof_elt_end \\name",
            ".endm",
            "clrprof_elt_trampoline {enter}, {enter_slot}, x10",
            "clrprof_elt_trampoline {leave}, {leave_slot}, x10",
            "clrprof_elt_trampoline {tailcall}, {tailcall_slot}, x10",
            "clrprof_elt_trampoline {enter_info}, {enter_info_slot}, x0",
            "clrprof_elt_trampoline {leave_info}, {leave_info_slot}, x0",
            "clrprof_elt_trampoline {tailcall_info}, {tailcall_info_slot}, x0",
            ".purgem clrprof_elt_trampoline",
            ".purgem clrprof_elt_function",
            ".purgem clrprof_elt_data",
            ".purgem clrprof_elt_end",
            ".purgem clrprof_elt_address",
            noop = sym clrprof_elt_noop_handler,
            enter = sym clrprof_elt_enter3_trampoline,
            leave = sym clrprof_elt_leave3_trampoline,
            tailcall = sym clrprof_elt_tailcall3_trampoline,
            enter_info = sym clrprof_elt_enter3_with_info,
            leave_info = sym clrprof_elt_leave3_with_info,
            tailcall_info = sym clrprof_elt_tailcall3_with_info,
            enter_slot = sym clrprof_elt_enter_handler,
            leave_slot = sym clrprof_elt_leave_handler,
            tailcall_slot = sym clrprof_elt_tailcall_handler,
            enter_info_slot = sym clrprof_elt_enter_with_info_handler,
            leave_info_slot = sym clrprof_elt_leave_with_info_handler,
            tailcall_info_slot = sym clrprof_elt_tailcall_with_info_handler,
            forwarder = sym clrprof_elt_enter3_caller_sp_forwarder,
            enter_sp_slot = sym clrprof_elt_enter_caller_sp_handler,
        );
    };
}

#[cfg(target_vendor = "apple")]
elt_asm!(
    function: ".globl \\name\n.private_extern \\name",
    data: ".globl \\name\n.private_extern \\name",
    end: "",
    address: "adrp \\reg, \\sym@PAGE\nadd \\reg, \\reg, \\sym@PAGEOFF"
);

#[cfg(not(target_vendor = "apple"))]
elt_asm!(
    function: ".globl \\name\n.hidden \\name\n.type \\name, %function",
    data: ".globl \\name\n.hidden \\name\n.type \\name, %object\n.size \\name, 8",
    end: ".size \\name, . - \\name",
    address: "adrp \\reg, \\sym\nadd \\reg, \\reg, :lo12:\\sym"
);
