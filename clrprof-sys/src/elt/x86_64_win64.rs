//! ELT trampolines for the x86-64 Windows calling convention: the only
//! source of them, assembled by rustc itself for every Windows target
//! (`x86_64-pc-windows-msvc`, `-gnu`, `-gnullvm`), so MSVC users run the
//! code the register harness proves under Wine.
//!
//! In both variants the ID is in `rcx` on entry, the C ABI's first
//! argument: jitted code puts it there for the fast path (with, for
//! `enter3`, the hooked method's caller's stack pointer in `rdx`, the
//! second, which the handler receives unchanged: the caller-SP forwarder
//! only jumps to the caller-SP slot's handler), and the runtime's
//! stub calls the WithInfo hooks with the C ABI, `(FunctionIDOrClientID,
//! COR_PRF_ELT_INFO)` in `rcx`, `rdx`. Each trampoline keeps what its
//! caller expects back (the JIT's `RBM_PROFILER_*_TRASH` for Windows):
//!
//! * `enter3`: nothing beyond the C ABI's callee-saved registers: the JIT
//!   homes the argument registers before the call and reloads them after
//!   it. The trampoline only gives the handler its 32-byte home area
//!   (frame `0x28`).
//! * `leave3`, `tailcall3`: the return registers `rax` and all 128 bits of
//!   `xmm0` (frame `0x38`: home area, `xmm0`, `rax`).
//! * WithInfo: every volatile register but `r10`/`r11`, i.e. `rax rcx rdx
//!   r8 r9` and all 128 bits of `xmm0`-`xmm5` (frame `0xA8`).
//!
//! On entry `rsp` is 8 mod 16, so each frame is `16k + 8` bytes and the
//! handler is called with an aligned stack, straight through its slot
//! (`call [rip + slot]`; an empty slot holds the no-op handler).
//!
//! Unwind data: each trampoline is a `.seh_proc` whose prologue is the one
//! `sub rsp` (`.seh_stackalloc`); it saves only volatile registers, so
//! that is all the unwinder needs. The assembler turns it into the
//! `.pdata`/`.xdata` entries Windows uses to unwind through a hooked frame
//! (exceptions, debuggers, crash dumps); `tests/elt_unwind_info.rs` checks
//! they are in the built object. The epilogue (`add rsp` then `ret`) has
//! the shape the Windows unwinder recognises.

use super::asm_symbols::*;

core::arch::global_asm!(
    // The no-op handler: what an empty slot holds.
    ".text",
    ".p2align 4",
    ".globl {noop}",
    ".def {noop}",
    ".scl 2",
    ".type 32",
    ".endef",
    "{noop}:",
    "  .seh_proc {noop}",
    "  .seh_endprologue",
    "  ret",
    "  .seh_endproc",
    // Handler slots: one pointer-sized word each, holding the handler's
    // address (the no-op handler when none is installed). Written by
    // mod.rs with release stores; read by the call's aligned load, which
    // is atomic with acquire ordering on x86-64.
    ".data",
    ".p2align 3",
    ".globl {enter_slot}",
    "{enter_slot}: .quad {noop}",
    ".globl {leave_slot}",
    "{leave_slot}: .quad {noop}",
    ".globl {tailcall_slot}",
    "{tailcall_slot}: .quad {noop}",
    ".globl {enter_info_slot}",
    "{enter_info_slot}: .quad {noop}",
    ".globl {leave_info_slot}",
    "{leave_info_slot}: .quad {noop}",
    ".globl {tailcall_info_slot}",
    "{tailcall_info_slot}: .quad {noop}",
    ".globl {enter_sp_slot}",
    "{enter_sp_slot}: .quad {noop}",
    ".text",
    // The caller-SP forwarder: an enter handler called by the enter
    // trampoline with (ID, caller's stack pointer) already in rcx, rdx;
    // a leaf that only jumps to the caller-SP slot's handler.
    ".p2align 4",
    ".globl {forwarder}",
    ".def {forwarder}",
    ".scl 2",
    ".type 32",
    ".endef",
    "{forwarder}:",
    "  .seh_proc {forwarder}",
    "  .seh_endprologue",
    "  jmp qword ptr [rip + {enter_sp_slot}]",
    "  .seh_endproc",
    // Fast-path enter: name, slot. Only the home area.
    ".macro clrprof_elt_enter_trampoline name, slot",
    "  .p2align 4",
    "  .globl \\name",
    "  .def \\name",
    "  .scl 2",
    "  .type 32",
    "  .endef",
    "\\name:",
    "  .seh_proc \\name",
    "  sub rsp, 0x28",
    "  .seh_stackalloc 0x28",
    "  .seh_endprologue",
    "  call qword ptr [rip + \\slot]",
    "  add rsp, 0x28",
    "  ret",
    "  .seh_endproc",
    ".endm",
    // Fast-path leave and tailcall: name, slot. Keeps rax and xmm0.
    ".macro clrprof_elt_leave_trampoline name, slot",
    "  .p2align 4",
    "  .globl \\name",
    "  .def \\name",
    "  .scl 2",
    "  .type 32",
    "  .endef",
    "\\name:",
    "  .seh_proc \\name",
    "  sub rsp, 0x38",
    "  .seh_stackalloc 0x38",
    "  .seh_endprologue",
    "  movdqu xmmword ptr [rsp + 0x20], xmm0",
    "  mov qword ptr [rsp + 0x30], rax",
    "  call qword ptr [rip + \\slot]",
    "  mov rax, qword ptr [rsp + 0x30]",
    "  movdqu xmm0, xmmword ptr [rsp + 0x20]",
    "  add rsp, 0x38",
    "  ret",
    "  .seh_endproc",
    ".endm",
    // WithInfo: name, slot. Keeps every volatile register but r10, r11.
    ".macro clrprof_elt_trampoline name, slot",
    "  .p2align 4",
    "  .globl \\name",
    "  .def \\name",
    "  .scl 2",
    "  .type 32",
    "  .endef",
    "\\name:",
    "  .seh_proc \\name",
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
    "  call qword ptr [rip + \\slot]",
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
    "  ret",
    "  .seh_endproc",
    ".endm",
    "clrprof_elt_enter_trampoline {enter}, {enter_slot}",
    "clrprof_elt_leave_trampoline {leave}, {leave_slot}",
    "clrprof_elt_leave_trampoline {tailcall}, {tailcall_slot}",
    "clrprof_elt_trampoline {enter_info}, {enter_info_slot}",
    "clrprof_elt_trampoline {leave_info}, {leave_info_slot}",
    "clrprof_elt_trampoline {tailcall_info}, {tailcall_info_slot}",
    ".purgem clrprof_elt_enter_trampoline",
    ".purgem clrprof_elt_leave_trampoline",
    ".purgem clrprof_elt_trampoline",
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
