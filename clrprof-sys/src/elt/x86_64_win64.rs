//! ELT trampolines for the x86-64 Windows calling convention: the only
//! source of them, assembled by rustc itself for every Windows target
//! (`x86_64-pc-windows-msvc`, `-gnu`, `-gnullvm`), so MSVC users run the
//! code the register harness proves under Wine.
//!
//! Six trampolines share one body (the `clrprof_elt_trampoline` assembler
//! macro below). In both variants the ID is in `rcx` on entry, the C ABI's
//! first argument: jitted code puts it there for the fast path, and the
//! runtime's stub calls the WithInfo hooks with the C ABI,
//! `(FunctionIDOrClientID, COR_PRF_ELT_INFO)` in `rcx`, `rdx`.
//!
//! The body: read the handler slot once into `r11` (zero: return at once,
//! touching nothing but `r11`); reserve `0xA8` bytes (on entry `rsp` is
//! 8 mod 16, so `16k + 8` bytes leave it aligned for the call): 32 bytes of
//! home space for the handler, all 128 bits of `xmm0`-`xmm5`, then `rax rcx
//! rdx r8 r9` — every volatile register but `r10`/`r11`, so every argument
//! and return register; call the handler with `rcx`, `rdx` as they came;
//! restore; release; return.
//!
//! Unwind data: each trampoline is a `.seh_proc` whose prologue is the one
//! `sub rsp` (`.seh_stackalloc`); it saves only volatile registers, so
//! that is all the unwinder needs. The assembler turns it into the
//! `.pdata`/`.xdata` entries Windows uses to unwind through a hooked frame
//! (exceptions, debuggers, crash dumps); `tests/elt_unwind_info.rs` checks
//! they are in the built object. The early-return path and the epilogue
//! (`add rsp` then `ret`) have the shapes the Windows unwinder recognises.

use super::asm_symbols::*;

core::arch::global_asm!(
    // Handler slots: one pointer-sized word each, zero = no handler.
    // Written by mod.rs with release stores; read below with a plain
    // aligned load, which is atomic with acquire ordering on x86-64.
    ".data",
    ".p2align 3",
    ".globl {enter_slot}",
    "{enter_slot}: .quad 0",
    ".globl {leave_slot}",
    "{leave_slot}: .quad 0",
    ".globl {tailcall_slot}",
    "{tailcall_slot}: .quad 0",
    ".globl {enter_info_slot}",
    "{enter_info_slot}: .quad 0",
    ".globl {leave_info_slot}",
    "{leave_info_slot}: .quad 0",
    ".globl {tailcall_info_slot}",
    "{tailcall_info_slot}: .quad 0",
    ".text",
    // name, slot.
    ".macro clrprof_elt_trampoline name, slot",
    "  .p2align 4",
    "  .globl \\name",
    "  .def \\name",
    "  .scl 2",
    "  .type 32",
    "  .endef",
    "\\name:",
    "  .seh_proc \\name",
    "  mov r11, qword ptr [rip + \\slot]",
    "  test r11, r11",
    "  jz 2f",
    "  sub rsp, 0xA8",
    "  .seh_stackalloc 0xA8",
    "  .seh_endprologue",
    "  movdqu xmmword ptr [rsp + 0x20], xmm0",
    "  movdqu xmmword ptr [rsp + 0x30], xmm1",
    "  movdqu xmmword ptr [rsp + 0x40], xmm2",
    "  movdqu xmmword ptr [rsp + 0x50], xmm3",
    "  movdqu xmmword ptr [rsp + 0x60], xmm4",
    "  movdqu xmmword ptr [rsp + 0x70], xmm5",
    "  mov qword ptr [rsp + 0x80], rax",
    "  mov qword ptr [rsp + 0x88], rcx",
    "  mov qword ptr [rsp + 0x90], rdx",
    "  mov qword ptr [rsp + 0x98], r8",
    "  mov qword ptr [rsp + 0xA0], r9",
    "  call r11",
    "  mov r9, qword ptr [rsp + 0xA0]",
    "  mov r8, qword ptr [rsp + 0x98]",
    "  mov rdx, qword ptr [rsp + 0x90]",
    "  mov rcx, qword ptr [rsp + 0x88]",
    "  mov rax, qword ptr [rsp + 0x80]",
    "  movdqu xmm5, xmmword ptr [rsp + 0x70]",
    "  movdqu xmm4, xmmword ptr [rsp + 0x60]",
    "  movdqu xmm3, xmmword ptr [rsp + 0x50]",
    "  movdqu xmm2, xmmword ptr [rsp + 0x40]",
    "  movdqu xmm1, xmmword ptr [rsp + 0x30]",
    "  movdqu xmm0, xmmword ptr [rsp + 0x20]",
    "  add rsp, 0xA8",
    "2:",
    "  ret",
    "  .seh_endproc",
    ".endm",
    "clrprof_elt_trampoline {enter}, {enter_slot}",
    "clrprof_elt_trampoline {leave}, {leave_slot}",
    "clrprof_elt_trampoline {tailcall}, {tailcall_slot}",
    "clrprof_elt_trampoline {enter_info}, {enter_info_slot}",
    "clrprof_elt_trampoline {leave_info}, {leave_info_slot}",
    "clrprof_elt_trampoline {tailcall_info}, {tailcall_info_slot}",
    ".purgem clrprof_elt_trampoline",
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
