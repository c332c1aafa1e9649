/*
 * clrprof ELT trampolines for x86_64 Windows, GNU assembler syntax
 * (mingw-w64 targets). elt_x86_64_win64.asm is the same code for MASM
 * (MSVC targets). Built by clrprof-sys/build.rs; described in src/elt.rs.
 *
 * Jitted code calls the fast-path FunctionEnter3/Leave3/Tailcall3 hooks
 * directly, with the JIT's profiler-hook convention:
 *
 *   all three:  function ID / client ID in rcx, caller SP in rdx; the
 *               stack is 16-byte aligned at the call and the caller has
 *               its 32-byte outgoing argument area below the return
 *               address, as for any Windows x64 call.
 *   enter:      the JIT stores the argument registers to their home slots
 *               before the call and reloads them after it, so it treats
 *               every volatile register as clobbered.
 *   leave,
 *   tailcall:   the JIT keeps rax and xmm0 (the return registers) live
 *               across the call.
 *
 * Every trampoline saves rax, rcx, rdx, r8, r9 and the full 128 bits of
 * xmm0-xmm5 (all volatile registers except r10/r11, a superset of what the
 * JIT needs), calls the C-ABI handler stored in its slot with the ID in rcx
 * and 32 bytes of home space, restores and returns. An empty (zero) slot
 * returns at once without touching the stack. The handler is read once
 * into r11, so the trampoline never calls a half-updated slot. Only
 * volatile registers are saved, so the SEH unwind info needs nothing but
 * the stack allocation.
 */

        .intel_syntax noprefix

/* Handler slots: one pointer-sized word each, zero = no handler. */
.macro ELT_SLOT name
        .globl \name
        .p2align 3
\name:
        .quad 0
.endm

        .data
        ELT_SLOT clrprof_elt_enter_handler
        ELT_SLOT clrprof_elt_leave_handler
        ELT_SLOT clrprof_elt_tailcall_handler

/* Frame: 32 bytes of home space for the handler, 6 xmm registers, then
   5 general registers. On entry rsp is 8 mod 16, so 16*k + 8 bytes leave
   rsp aligned for the call. */
#define FRAME_SIZE 0xA8
#define OFF_XMM0 0x20
#define OFF_XMM1 0x30
#define OFF_XMM2 0x40
#define OFF_XMM3 0x50
#define OFF_XMM4 0x60
#define OFF_XMM5 0x70
#define OFF_RAX  0x80
#define OFF_RCX  0x88
#define OFF_RDX  0x90
#define OFF_R8   0x98
#define OFF_R9   0xA0

.macro ELT_TRAMPOLINE name, slot
        .text
        .p2align 4
        .globl \name
        .def \name; .scl 2; .type 32; .endef
\name:
        .seh_proc \name
        mov     r11, qword ptr [rip + \slot]
        test    r11, r11
        jz      1f

        sub     rsp, FRAME_SIZE
        .seh_stackalloc FRAME_SIZE
        .seh_endprologue
        movdqu  xmmword ptr [rsp + OFF_XMM0], xmm0
        movdqu  xmmword ptr [rsp + OFF_XMM1], xmm1
        movdqu  xmmword ptr [rsp + OFF_XMM2], xmm2
        movdqu  xmmword ptr [rsp + OFF_XMM3], xmm3
        movdqu  xmmword ptr [rsp + OFF_XMM4], xmm4
        movdqu  xmmword ptr [rsp + OFF_XMM5], xmm5
        mov     qword ptr [rsp + OFF_RAX], rax
        mov     qword ptr [rsp + OFF_RCX], rcx
        mov     qword ptr [rsp + OFF_RDX], rdx
        mov     qword ptr [rsp + OFF_R8], r8
        mov     qword ptr [rsp + OFF_R9], r9

        /* rcx already holds the ID, which is also the handler's argument. */
        call    r11

        mov     r9, qword ptr [rsp + OFF_R9]
        mov     r8, qword ptr [rsp + OFF_R8]
        mov     rdx, qword ptr [rsp + OFF_RDX]
        mov     rcx, qword ptr [rsp + OFF_RCX]
        mov     rax, qword ptr [rsp + OFF_RAX]
        movdqu  xmm5, xmmword ptr [rsp + OFF_XMM5]
        movdqu  xmm4, xmmword ptr [rsp + OFF_XMM4]
        movdqu  xmm3, xmmword ptr [rsp + OFF_XMM3]
        movdqu  xmm2, xmmword ptr [rsp + OFF_XMM2]
        movdqu  xmm1, xmmword ptr [rsp + OFF_XMM1]
        movdqu  xmm0, xmmword ptr [rsp + OFF_XMM0]
        add     rsp, FRAME_SIZE
1:
        ret
        .seh_endproc
.endm

        ELT_TRAMPOLINE clrprof_elt_enter3_trampoline, clrprof_elt_enter_handler
        ELT_TRAMPOLINE clrprof_elt_leave3_trampoline, clrprof_elt_leave_handler
        ELT_TRAMPOLINE clrprof_elt_tailcall3_trampoline, clrprof_elt_tailcall_handler
