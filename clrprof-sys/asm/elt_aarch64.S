/*
 * clrprof ELT trampolines for aarch64 (Linux, macOS). Built by
 * clrprof-sys/build.rs; described in src/elt.rs.
 *
 * Jitted code calls the fast-path FunctionEnter3/Leave3/Tailcall3 hooks
 * directly (bl/blr), with the JIT's profiler-hook convention:
 *
 *   all three:  function ID / client ID in x10, caller SP in x11; the JIT
 *               keeps x0-x7 (arguments and return values), x8 (indirect
 *               result address), q0-q7 (FP/SIMD arguments and HFA/HVA
 *               return values, all 128 bits) and fp live across the call.
 *               x9-x17, lr and v16-v31 may be clobbered; x19-x28, sp and
 *               the low 64 bits of v8-v15 are preserved (the C ABI already
 *               guarantees that).
 *
 * Every trampoline saves fp, lr, x0-x8 and q0-q7, calls the C-ABI handler
 * stored in its slot with the ID in x0, restores and returns. An empty
 * (zero) slot returns at once without touching the stack. The handler is
 * read once (load-acquire) into x16, so the trampoline never calls a
 * half-updated slot.
 */

#if defined(__APPLE__)
#  define SYM(name) _##name
#else
#  define SYM(name) name
#endif

/* Handler slots: one pointer-sized word each, zero = no handler. */
.macro ELT_SLOT name
        .globl \name
#if defined(__APPLE__)
        .private_extern \name
#else
        .hidden \name
        .type \name, %object
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

/* Frame (224 bytes, keeps sp 16-byte aligned):
     [sp +   0] fp, lr     [sp +  16] x0, x1   [sp +  32] x2, x3
     [sp +  48] x4, x5     [sp +  64] x6, x7   [sp +  80] x8 (+ pad)
     [sp +  96] q0, q1     [sp + 128] q2, q3   [sp + 160] q4, q5
     [sp + 192] q6, q7 */
#define FRAME_SIZE 224

.macro ELT_TRAMPOLINE name, slot
        .text
        .p2align 2
        .globl \name
#if defined(__APPLE__)
        .private_extern \name
#else
        .hidden \name
        .type \name, %function
#endif
\name:
        .cfi_startproc
#if defined(__APPLE__)
        adrp    x16, \slot@PAGE
        add     x16, x16, \slot@PAGEOFF
#else
        adrp    x16, \slot
        add     x16, x16, :lo12:\slot
#endif
        ldar    x16, [x16]
        cbz     x16, 1f

        stp     x29, x30, [sp, #-FRAME_SIZE]!
        .cfi_def_cfa_offset FRAME_SIZE
        .cfi_offset x29, -FRAME_SIZE
        .cfi_offset x30, -(FRAME_SIZE - 8)
        mov     x29, sp
        stp     x0, x1, [sp, #16]
        stp     x2, x3, [sp, #32]
        stp     x4, x5, [sp, #48]
        stp     x6, x7, [sp, #64]
        str     x8, [sp, #80]
        stp     q0, q1, [sp, #96]
        stp     q2, q3, [sp, #128]
        stp     q4, q5, [sp, #160]
        stp     q6, q7, [sp, #192]

        mov     x0, x10
        blr     x16

        ldp     q6, q7, [sp, #192]
        ldp     q4, q5, [sp, #160]
        ldp     q2, q3, [sp, #128]
        ldp     q0, q1, [sp, #96]
        ldr     x8, [sp, #80]
        ldp     x6, x7, [sp, #64]
        ldp     x4, x5, [sp, #48]
        ldp     x2, x3, [sp, #32]
        ldp     x0, x1, [sp, #16]
        ldp     x29, x30, [sp], #FRAME_SIZE
        .cfi_def_cfa_offset 0
        .cfi_restore x29
        .cfi_restore x30
1:
        ret
        .cfi_endproc
#if !defined(__APPLE__)
        .size \name, . - \name
#endif
.endm

        ELT_TRAMPOLINE SYM(clrprof_elt_enter3_trampoline), SYM(clrprof_elt_enter_handler)
        ELT_TRAMPOLINE SYM(clrprof_elt_leave3_trampoline), SYM(clrprof_elt_leave_handler)
        ELT_TRAMPOLINE SYM(clrprof_elt_tailcall3_trampoline), SYM(clrprof_elt_tailcall_handler)

#if defined(__linux__) && defined(__ELF__)
        .section .note.GNU-stack, "", %progbits
#endif
