//! ELT trampolines for the x86-64 System V calling convention (Linux,
//! Android, macOS): the only source of them, assembled by rustc itself.
//!
//! Each trampoline keeps exactly what its caller expects back and no more
//! (the JIT's `RBM_PROFILER_*_TRASH` sets for System V; see `mod.rs`):
//!
//! * `enter3`: called from jitted code with the ID in `r14` (and the
//!   hooked method's caller's stack pointer in `r15`: the JIT's
//!   `REG_PROFILER_ENTER_ARG_0/1` for System V), passes the ID to the
//!   handler; keeps the argument registers `rdi rsi rdx rcx r8 r9` and all
//!   128 bits of `xmm0`-`xmm7` (the JIT may find `rax`, `r10`, `r11` and
//!   `xmm8`-`xmm15` clobbered). Frame `0xB8` bytes. It leaves `r15` alone
//!   (callee-saved), so a handler sees the caller's stack pointer there
//!   on entry: `enter3_caller_sp_forwarder`, installed as the enter
//!   handler, moves it to `rsi` and jumps to the caller-SP slot's handler
//!   (two instructions, paid only by a profiler that installs it).
//! * `leave3`, `tailcall3`: ID in `rdi`; keep the return registers `rax
//!   rdx` and all 128 bits of `xmm0 xmm1`. Frame `0x38` bytes.
//! * WithInfo (`enter3_with_info`, ...): called with the C ABI,
//!   `(FunctionIDOrClientID, COR_PRF_ELT_INFO)` in `rdi`, `rsi`, where the
//!   handler takes them; they keep the union, `rax rcx rdx rsi rdi r8 r9`
//!   and `xmm0`-`xmm7`, for runtimes whose own stub does not (frame `0xB8`).
//! * `enter3_with_info_netcore3`: the WithInfo enter entry point for the
//!   .NET Core 3.x stub, which restores every argument register itself but
//!   `xmm2`-`xmm7`: keeps all 128 bits of those six (frame `0x68`), calls
//!   the WithInfo enter slot's handler.
//!
//! On entry `rsp` is 8 mod 16, so each frame is `16k + 8` bytes and the
//! handler is called with the stack 16-byte aligned. The handler is called
//! straight through its slot (`call [rip + slot]`): a slot always holds a
//! function, the no-op handler `clrprof_elt_noop_handler` when none is
//! installed, so the hot path has no test and no branch. CFI directives
//! describe each frame so unwinders walk through it.
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
            // The no-op handler: what an empty slot holds.
            ".text",
            ".p2align 4",
            "clrprof_elt_function {noop}",
            "{noop}:",
            "  .cfi_startproc",
            "  ret",
            "  .cfi_endproc",
            "clrprof_elt_end {noop}",
            // Handler slots: one pointer-sized word each, holding the
            // handler's address (the no-op handler when none is installed).
            // Written by mod.rs with release stores; read below by the
            // call's aligned load, which is atomic with acquire ordering on
            // x86-64.
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
            // The caller-SP forwarder: an enter handler (ID in rdi) called
            // by the enter trampoline, with the JIT's r15 untouched: the
            // caller's stack pointer becomes the second argument of the
            // caller-SP slot's handler, which returns to the trampoline.
            ".p2align 4",
            "clrprof_elt_function {forwarder}",
            "{forwarder}:",
            "  .cfi_startproc",
            "  mov rsi, r15",
            "  jmp qword ptr [rip + {enter_sp_slot}]",
            "  .cfi_endproc",
            "clrprof_elt_end {forwarder}",
            // Fast-path enter: name, slot. ID in r14, passed in rdi; keeps
            // the argument registers; r15 (the caller's stack pointer) is
            // left for the handler.
            ".macro clrprof_elt_enter_trampoline name, slot",
            "  .p2align 4",
            "  clrprof_elt_function \\name",
            "\\name:",
            "  .cfi_startproc",
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
            "  mov qword ptr [rsp + 0x80], rdi",
            "  mov qword ptr [rsp + 0x88], rsi",
            "  mov qword ptr [rsp + 0x90], rdx",
            "  mov qword ptr [rsp + 0x98], rcx",
            "  mov qword ptr [rsp + 0xA0], r8",
            "  mov qword ptr [rsp + 0xA8], r9",
            "  mov rdi, r14",
            "  call qword ptr [rip + \\slot]",
            "  mov r9, qword ptr [rsp + 0xA8]",
            "  mov r8, qword ptr [rsp + 0xA0]",
            "  mov rcx, qword ptr [rsp + 0x98]",
            "  mov rdx, qword ptr [rsp + 0x90]",
            "  mov rsi, qword ptr [rsp + 0x88]",
            "  mov rdi, qword ptr [rsp + 0x80]",
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
            "  ret",
            "  .cfi_endproc",
            "  clrprof_elt_end \\name",
            ".endm",
            // Fast-path leave and tailcall: name, slot. ID in rdi (already
            // the handler's argument); keeps the return registers.
            ".macro clrprof_elt_leave_trampoline name, slot",
            "  .p2align 4",
            "  clrprof_elt_function \\name",
            "\\name:",
            "  .cfi_startproc",
            "  sub rsp, 0x38",
            "  .cfi_adjust_cfa_offset 0x38",
            "  movdqu xmmword ptr [rsp + 0x00], xmm0",
            "  movdqu xmmword ptr [rsp + 0x10], xmm1",
            "  mov qword ptr [rsp + 0x20], rax",
            "  mov qword ptr [rsp + 0x28], rdx",
            "  call qword ptr [rip + \\slot]",
            "  mov rdx, qword ptr [rsp + 0x28]",
            "  mov rax, qword ptr [rsp + 0x20]",
            "  movdqu xmm1, xmmword ptr [rsp + 0x10]",
            "  movdqu xmm0, xmmword ptr [rsp + 0x00]",
            "  add rsp, 0x38",
            "  .cfi_adjust_cfa_offset -0x38",
            "  ret",
            "  .cfi_endproc",
            "  clrprof_elt_end \\name",
            ".endm",
            // WithInfo: name, slot. C ABI, (id, eltInfo) in rdi, rsi; keeps
            // every argument and return register.
            ".macro clrprof_elt_trampoline name, slot",
            "  .p2align 4",
            "  clrprof_elt_function \\name",
            "\\name:",
            "  .cfi_startproc",
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
            "  call qword ptr [rip + \\slot]",
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
            "  ret",
            "  .cfi_endproc",
            "  clrprof_elt_end \\name",
            ".endm",
            // WithInfo enter for the .NET Core 3.x stub: keeps xmm2-xmm7.
            ".p2align 4",
            "clrprof_elt_function {enter_info_netcore3}",
            "{enter_info_netcore3}:",
            "  .cfi_startproc",
            "  sub rsp, 0x68",
            "  .cfi_adjust_cfa_offset 0x68",
            "  movdqu xmmword ptr [rsp + 0x00], xmm2",
            "  movdqu xmmword ptr [rsp + 0x10], xmm3",
            "  movdqu xmmword ptr [rsp + 0x20], xmm4",
            "  movdqu xmmword ptr [rsp + 0x30], xmm5",
            "  movdqu xmmword ptr [rsp + 0x40], xmm6",
            "  movdqu xmmword ptr [rsp + 0x50], xmm7",
            "  call qword ptr [rip + {enter_info_slot}]",
            "  movdqu xmm7, xmmword ptr [rsp + 0x50]",
            "  movdqu xmm6, xmmword ptr [rsp + 0x40]",
            "  movdqu xmm5, xmmword ptr [rsp + 0x30]",
            "  movdqu xmm4, xmmword ptr [rsp + 0x20]",
            "  movdqu xmm3, xmmword ptr [rsp + 0x10]",
            "  movdqu xmm2, xmmword ptr [rsp + 0x00]",
            "  add rsp, 0x68",
            "  .cfi_adjust_cfa_offset -0x68",
            "  ret",
            "  .cfi_endproc",
            "clrprof_elt_end {enter_info_netcore3}",
            "clrprof_elt_enter_trampoline {enter}, {enter_slot}",
            "clrprof_elt_leave_trampoline {leave}, {leave_slot}",
            "clrprof_elt_leave_trampoline {tailcall}, {tailcall_slot}",
            "clrprof_elt_trampoline {enter_info}, {enter_info_slot}",
            "clrprof_elt_trampoline {leave_info}, {leave_info_slot}",
            "clrprof_elt_trampoline {tailcall_info}, {tailcall_info_slot}",
            ".purgem clrprof_elt_enter_trampoline",
            ".purgem clrprof_elt_leave_trampoline",
            ".purgem clrprof_elt_trampoline",
            ".purgem clrprof_elt_function",
            ".purgem clrprof_elt_data",
            ".purgem clrprof_elt_end",
            noop = sym clrprof_elt_noop_handler,
            enter = sym clrprof_elt_enter3_trampoline,
            leave = sym clrprof_elt_leave3_trampoline,
            tailcall = sym clrprof_elt_tailcall3_trampoline,
            enter_info = sym clrprof_elt_enter3_with_info,
            enter_info_netcore3 = sym clrprof_elt_enter3_with_info_netcore3,
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
    end: ""
);

#[cfg(not(target_vendor = "apple"))]
elt_asm!(
    function: ".globl \\name\n.hidden \\name\n.type \\name, @function",
    data: ".globl \\name\n.hidden \\name\n.type \\name, @object\n.size \\name, 8",
    end: ".size \\name, . - \\name"
);
