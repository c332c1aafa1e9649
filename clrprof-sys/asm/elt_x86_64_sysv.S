/*
 * clrprof ELT trampolines for x86_64 with the System V calling convention
 * (Linux, macOS). Built by clrprof-sys/build.rs; described in src/elt.rs.
 *
 * Jitted code calls the fast-path FunctionEnter3/Leave3/Tailcall3 hooks
 * directly, with the JIT's profiler-hook convention rather than the C ABI:
 *
 *   enter:            function ID / client ID in r14, caller SP in r15;
 *                     the JIT keeps rdi, rsi, rdx, rcx, r8, r9 and
 *                     xmm0-xmm7 (the argument registers) live across it.
 *   leave, tailcall:  function ID / client ID in rdi, caller SP in rsi;
 *                     the JIT keeps rax, rdx, xmm0, xmm1 (the return
 *                     registers) live across it.
 *   all three:        the call target register is r11; r10, r11 and
 *                     xmm8-xmm15 may be clobbered; rbx, rbp, r12-r15 are
 *                     preserved (the C ABI already guarantees that).
 *
 * Every trampoline saves the union of those sets (rax, rcx, rdx, rsi, rdi,
 * r8, r9 and the full 128 bits of xmm0-xmm7), calls the C-ABI handler
 * stored in its slot with the ID in rdi, restores and returns. An empty
 * (zero) slot returns at once without touching the stack. The handler is
 * read once into r11, so the trampoline never calls a half-updated slot.
 */

#if defined(__APPLE__)
#  define SYM(name) _##name
#else
#  define SYM(name) name
#endif

        .intel_syntax noprefix

/* Handler slots: one pointer-sized word each, zero = no handler.
   Written by elt.rs with release stores; read here with a plain aligned
   load, which is atomic and has acquire ordering on x86_64. */
.macro ELT_SLOT name
        .globl \name
#if defined(__APPLE__)
        .private_extern \name
#else
        .hidden \name
        .type \name, @object
        .size \name, 8
#endif
        .p2align 3
\name:
        .quad 0
.endm

        .data
        ELT_SLOT SYM(clrprof_elt_enter_handler)
        ELT_SLOT SYM(clrprof_elt_leave_handler)
        ELT_SLOT SYM(clrprof_elt_tailcall_handler)

/* Frame: 8 xmm registers (16 bytes each) then 7 general registers.
   On entry rsp is 8 mod 16 (the JIT calls with a 16-byte aligned stack),
   so a frame of 16*k + 8 bytes leaves rsp 16-byte aligned for the call. */
#define FRAME_SIZE 0xB8
#define OFF_RAX 0x80
#define OFF_RCX 0x88
#define OFF_RDX 0x90
#define OFF_RSI 0x98
#define OFF_RDI 0xA0
#define OFF_R8  0xA8
#define OFF_R9  0xB0

.macro ELT_TRAMPOLINE name, slot, idreg
        .text
        .p2align 4
        .globl \name
#if defined(__APPLE__)
        .private_extern \name
#else
        .hidden \name
        .type \name, @function
#endif
\name:
        .cfi_startproc
        mov     r11, qword ptr [rip + \slot]
        test    r11, r11
        jz      1f

        sub     rsp, FRAME_SIZE
        .cfi_adjust_cfa_offset FRAME_SIZE
        movdqu  xmmword ptr [rsp + 0x00], xmm0
        movdqu  xmmword ptr [rsp + 0x10], xmm1
        movdqu  xmmword ptr [rsp + 0x20], xmm2
        movdqu  xmmword ptr [rsp + 0x30], xmm3
        movdqu  xmmword ptr [rsp + 0x40], xmm4
        movdqu  xmmword ptr [rsp + 0x50], xmm5
        movdqu  xmmword ptr [rsp + 0x60], xmm6
        movdqu  xmmword ptr [rsp + 0x70], xmm7
        mov     qword ptr [rsp + OFF_RAX], rax
        mov     qword ptr [rsp + OFF_RCX], rcx
        mov     qword ptr [rsp + OFF_RDX], rdx
        mov     qword ptr [rsp + OFF_RSI], rsi
        mov     qword ptr [rsp + OFF_RDI], rdi
        mov     qword ptr [rsp + OFF_R8], r8
        mov     qword ptr [rsp + OFF_R9], r9

        mov     rdi, \idreg
        call    r11

        mov     r9, qword ptr [rsp + OFF_R9]
        mov     r8, qword ptr [rsp + OFF_R8]
        mov     rdi, qword ptr [rsp + OFF_RDI]
        mov     rsi, qword ptr [rsp + OFF_RSI]
        mov     rdx, qword ptr [rsp + OFF_RDX]
        mov     rcx, qword ptr [rsp + OFF_RCX]
        mov     rax, qword ptr [rsp + OFF_RAX]
        movdqu  xmm7, xmmword ptr [rsp + 0x70]
        movdqu  xmm6, xmmword ptr [rsp + 0x60]
        movdqu  xmm5, xmmword ptr [rsp + 0x50]
        movdqu  xmm4, xmmword ptr [rsp + 0x40]
        movdqu  xmm3, xmmword ptr [rsp + 0x30]
        movdqu  xmm2, xmmword ptr [rsp + 0x20]
        movdqu  xmm1, xmmword ptr [rsp + 0x10]
        movdqu  xmm0, xmmword ptr [rsp + 0x00]
        add     rsp, FRAME_SIZE
        .cfi_adjust_cfa_offset -FRAME_SIZE
1:
        ret
        .cfi_endproc
#if !defined(__APPLE__)
        .size \name, . - \name
#endif
.endm

        ELT_TRAMPOLINE SYM(clrprof_elt_enter3_trampoline), SYM(clrprof_elt_enter_handler), r14
        ELT_TRAMPOLINE SYM(clrprof_elt_leave3_trampoline), SYM(clrprof_elt_leave_handler), rdi
        ELT_TRAMPOLINE SYM(clrprof_elt_tailcall3_trampoline), SYM(clrprof_elt_tailcall_handler), rdi

#if defined(__linux__) && defined(__ELF__)
        .section .note.GNU-stack, "", @progbits
#endif
