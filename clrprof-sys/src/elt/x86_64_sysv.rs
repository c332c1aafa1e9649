//! ELT trampolines for the x86-64 System V calling convention (Linux,
//! Android, macOS): the only source of them, assembled by rustc itself.
//!
//! Six trampolines share one body (the `clrprof_elt_trampoline` assembler
//! macro below):
//!
//! * fast path (`enter3`, `leave3`, `tailcall3`): called from jitted code
//!   with the JIT's profiler-hook convention. The ID arrives in `r14`
//!   (enter) or `rdi` (leave, tailcall) and is moved to `rdi`, the C ABI's
//!   first argument.
//! * WithInfo (`enter3_with_info`, ...): called by the runtime's stub with
//!   the C ABI, `(FunctionIDOrClientID, COR_PRF_ELT_INFO)` already in
//!   `rdi`, `rsi`, where the handler takes them.
//!
//! The body: read the handler slot once into `r11` (zero: return at once,
//! touching nothing but `r11`); reserve a frame of `0xB8` bytes (on entry
//! `rsp` is 8 mod 16, so `16k + 8` bytes leave it 16-byte aligned for the
//! call); save all 128 bits of `xmm0`-`xmm7` and `rax rcx rdx rsi rdi r8 r9`
//! (every argument and return register of the convention); call the
//! handler; restore them; release the frame; return. CFI directives
//! describe the frame so unwinders walk through it.
//!
//! Per-object-format differences (ELF: `.hidden`, `.type`, `.size`;
//! Mach-O: `.private_extern`) are the three small assembler macros each
//! `cfg` passes to `elt_asm!`; symbol names come from `sym` operands, so
//! Mach-O's leading underscore is the compiler's business.

use super::asm_symbols::*;

macro_rules! elt_asm {
    (function: $function:literal, data: $data:literal, end: $end:literal) => {
        core::arch::global_asm!(
            // Library-local symbols: one function, one pointer-sized datum.
            ".macro clrprof_elt_function name",
            $function,
            ".endm",
            ".macro clrprof_elt_data name",
            $data,
            ".endm",
            ".macro clrprof_elt_end name",
            $end,
            ".endm",
            // Handler slots: one pointer-sized word each, zero = no handler.
            // Written by mod.rs with release stores; read below with a plain
            // aligned load, which is atomic with acquire ordering on x86-64.
            ".data",
            ".p2align 3",
            "clrprof_elt_data {enter_slot}",
            "{enter_slot}: .quad 0",
            "clrprof_elt_data {leave_slot}",
            "{leave_slot}: .quad 0",
            "clrprof_elt_data {tailcall_slot}",
            "{tailcall_slot}: .quad 0",
            "clrprof_elt_data {enter_info_slot}",
            "{enter_info_slot}: .quad 0",
            "clrprof_elt_data {leave_info_slot}",
            "{leave_info_slot}: .quad 0",
            "clrprof_elt_data {tailcall_info_slot}",
            "{tailcall_info_slot}: .quad 0",
            ".text",
            // name, slot, register holding the ID on entry.
            ".macro clrprof_elt_trampoline name, slot, id",
            "  .p2align 4",
            "  clrprof_elt_function \\name",
            "\\name:",
            "  .cfi_startproc",
            "  mov r11, qword ptr [rip + \\slot]",
            "  test r11, r11",
            "  jz 2f",
            "  sub rsp, 0xB8",
            "  .cfi_adjust_cfa_offset 0xB8",
            "  movdqu xmmword ptr [rsp + 0x00], xmm0",
            "  movdqu xmmword ptr [rsp + 0x10], xmm1",
            "  movdqu xmmword ptr [rsp + 0x20], xmm2",
            "  movdqu xmmword ptr [rsp + 0x30], xmm3",
            "  movdqu xmmword ptr [rsp + 0x40], xmm4",
            "  movdqu xmmword ptr [rsp + 0x50], xmm5",
            "  movdqu xmmword ptr [rsp + 0x60], xmm6",
            "  movdqu xmmword ptr [rsp + 0x70], xmm7",
            "  mov qword ptr [rsp + 0x80], rax",
            "  mov qword ptr [rsp + 0x88], rcx",
            "  mov qword ptr [rsp + 0x90], rdx",
            "  mov qword ptr [rsp + 0x98], rsi",
            "  mov qword ptr [rsp + 0xA0], rdi",
            "  mov qword ptr [rsp + 0xA8], r8",
            "  mov qword ptr [rsp + 0xB0], r9",
            "  .ifnc \\id, rdi",
            "  mov rdi, \\id",
            "  .endif",
            "  call r11",
            "  mov r9, qword ptr [rsp + 0xB0]",
            "  mov r8, qword ptr [rsp + 0xA8]",
            "  mov rdi, qword ptr [rsp + 0xA0]",
            "  mov rsi, qword ptr [rsp + 0x98]",
            "  mov rdx, qword ptr [rsp + 0x90]",
            "  mov rcx, qword ptr [rsp + 0x88]",
            "  mov rax, qword ptr [rsp + 0x80]",
            "  movdqu xmm7, xmmword ptr [rsp + 0x70]",
            "  movdqu xmm6, xmmword ptr [rsp + 0x60]",
            "  movdqu xmm5, xmmword ptr [rsp + 0x50]",
            "  movdqu xmm4, xmmword ptr [rsp + 0x40]",
            "  movdqu xmm3, xmmword ptr [rsp + 0x30]",
            "  movdqu xmm2, xmmword ptr [rsp + 0x20]",
            "  movdqu xmm1, xmmword ptr [rsp + 0x10]",
            "  movdqu xmm0, xmmword ptr [rsp + 0x00]",
            "  add rsp, 0xB8",
            "  .cfi_adjust_cfa_offset -0xB8",
            "2:",
            "  ret",
            "  .cfi_endproc",
            "  clrprof_elt_end \\name",
            ".endm",
            "clrprof_elt_trampoline {enter}, {enter_slot}, r14",
            "clrprof_elt_trampoline {leave}, {leave_slot}, rdi",
            "clrprof_elt_trampoline {tailcall}, {tailcall_slot}, rdi",
            "clrprof_elt_trampoline {enter_info}, {enter_info_slot}, rdi",
            "clrprof_elt_trampoline {leave_info}, {leave_info_slot}, rdi",
            "clrprof_elt_trampoline {tailcall_info}, {tailcall_info_slot}, rdi",
            ".purgem clrprof_elt_trampoline",
            ".purgem clrprof_elt_function",
            ".purgem clrprof_elt_data",
            ".purgem clrprof_elt_end",
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
        );
    };
}

#[cfg(target_vendor = "apple")]
elt_asm!(
    function: ".globl \\name\n.private_extern \\name",
    data: ".globl \\name\n.private_extern \\name",
    end: ""
);

#[cfg(not(target_vendor = "apple"))]
elt_asm!(
    function: ".globl \\name\n.hidden \\name\n.type \\name, @function",
    data: ".globl \\name\n.hidden \\name\n.type \\name, @object\n.size \\name, 8",
    end: ".size \\name, . - \\name"
);
