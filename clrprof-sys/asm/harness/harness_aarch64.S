/*
 * Test-only harness for the aarch64 ELT trampolines. Linked into
 * clrprof-sys's test binaries only (build.rs: rustc-link-arg-tests), never
 * into the library. Used by tests/elt_trampolines.rs.
 *
 * clrprof_elt_harness_call(target, in, out) loads x0-x17, x19-x29 and the
 * full q0-q31 from `in` (x18, the platform register, is left alone), calls
 * `target` with blr the way jitted code calls a profiler hook (x16 holds
 * the target, as the JIT's helper calls may), then stores every register
 * into `out`.
 *
 * Register block layout (struct A64Regs in the test):
 *   0x000  q0..q31, 16 bytes each
 *   0x200  x0..x30, then sp after the return (index 31)
 *   0x300  extra[0] = sp at the call, extra[1] = sp after the return
 *
 * clrprof_elt_harness_trash_handler(id, info) is a C-ABI handler that
 * records its two arguments (a fast-path handler has only the first), its sp and a call count, then clobbers every register the
 * AAPCS64 lets a callee clobber: x0-x17, v0-v7, v16-v31 and the upper
 * 64 bits of v8-v15.
 */

#if defined(__APPLE__)
#  define SYM(name) _##name
#  define PAGE(name) name@PAGE
#  define PAGEOFF(name) name@PAGEOFF
#else
#  define SYM(name) name
#  define PAGE(name) name
#  define PAGEOFF(name) :lo12:name
#endif

        .data
        .p2align 3
h_target:       .quad 0
h_out:          .quad 0
h_saved_sp:     .quad 0
h_sp_before:    .quad 0
        .globl SYM(clrprof_elt_harness_handler_id)
        .globl SYM(clrprof_elt_harness_handler_sp)
        .globl SYM(clrprof_elt_harness_handler_calls)
        .globl SYM(clrprof_elt_harness_handler_info)
SYM(clrprof_elt_harness_handler_id):    .quad 0
SYM(clrprof_elt_harness_handler_info):  .quad 0
SYM(clrprof_elt_harness_handler_sp):    .quad 0
SYM(clrprof_elt_harness_handler_calls): .quad 0

        .text
        .p2align 2
        .globl SYM(clrprof_elt_harness_call)
SYM(clrprof_elt_harness_call):
        stp     x29, x30, [sp, #-160]!
        mov     x29, sp
        stp     x19, x20, [sp, #16]
        stp     x21, x22, [sp, #32]
        stp     x23, x24, [sp, #48]
        stp     x25, x26, [sp, #64]
        stp     x27, x28, [sp, #80]
        stp     d8, d9, [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        adrp    x9, PAGE(h_target)
        str     x0, [x9, PAGEOFF(h_target)]
        adrp    x9, PAGE(h_out)
        str     x2, [x9, PAGEOFF(h_out)]
        mov     x10, sp
        adrp    x9, PAGE(h_saved_sp)
        str     x10, [x9, PAGEOFF(h_saved_sp)]
        adrp    x9, PAGE(h_sp_before)
        str     x10, [x9, PAGEOFF(h_sp_before)]

        mov     x16, x1
        ldp     q0, q1, [x16, #0]
        ldp     q2, q3, [x16, #32]
        ldp     q4, q5, [x16, #64]
        ldp     q6, q7, [x16, #96]
        ldp     q8, q9, [x16, #128]
        ldp     q10, q11, [x16, #160]
        ldp     q12, q13, [x16, #192]
        ldp     q14, q15, [x16, #224]
        ldp     q16, q17, [x16, #256]
        ldp     q18, q19, [x16, #288]
        ldp     q20, q21, [x16, #320]
        ldp     q22, q23, [x16, #352]
        ldp     q24, q25, [x16, #384]
        ldp     q26, q27, [x16, #416]
        ldp     q28, q29, [x16, #448]
        ldp     q30, q31, [x16, #480]
        add     x16, x16, #0x200
        ldp     x0, x1, [x16, #0]
        ldp     x2, x3, [x16, #16]
        ldp     x4, x5, [x16, #32]
        ldp     x6, x7, [x16, #48]
        ldp     x8, x9, [x16, #64]
        ldp     x10, x11, [x16, #80]
        ldp     x12, x13, [x16, #96]
        ldp     x14, x15, [x16, #112]
        ldr     x17, [x16, #136]
        ldp     x19, x20, [x16, #152]
        ldp     x21, x22, [x16, #168]
        ldp     x23, x24, [x16, #184]
        ldp     x25, x26, [x16, #200]
        ldp     x27, x28, [x16, #216]
        ldr     x29, [x16, #232]
        adrp    x16, PAGE(h_target)
        ldr     x16, [x16, PAGEOFF(h_target)]
        blr     x16

        adrp    x16, PAGE(h_out)
        ldr     x16, [x16, PAGEOFF(h_out)]
        stp     q0, q1, [x16, #0]
        stp     q2, q3, [x16, #32]
        stp     q4, q5, [x16, #64]
        stp     q6, q7, [x16, #96]
        stp     q8, q9, [x16, #128]
        stp     q10, q11, [x16, #160]
        stp     q12, q13, [x16, #192]
        stp     q14, q15, [x16, #224]
        stp     q16, q17, [x16, #256]
        stp     q18, q19, [x16, #288]
        stp     q20, q21, [x16, #320]
        stp     q22, q23, [x16, #352]
        stp     q24, q25, [x16, #384]
        stp     q26, q27, [x16, #416]
        stp     q28, q29, [x16, #448]
        stp     q30, q31, [x16, #480]
        add     x16, x16, #0x200
        stp     x0, x1, [x16, #0]
        stp     x2, x3, [x16, #16]
        stp     x4, x5, [x16, #32]
        stp     x6, x7, [x16, #48]
        stp     x8, x9, [x16, #64]
        stp     x10, x11, [x16, #80]
        stp     x12, x13, [x16, #96]
        stp     x14, x15, [x16, #112]
        str     x17, [x16, #136]
        stp     x19, x20, [x16, #152]
        stp     x21, x22, [x16, #168]
        stp     x23, x24, [x16, #184]
        stp     x25, x26, [x16, #200]
        stp     x27, x28, [x16, #216]
        stp     x29, x30, [x16, #232]
        mov     x17, sp
        str     x17, [x16, #248]
        str     x17, [x16, #264]
        adrp    x17, PAGE(h_sp_before)
        ldr     x17, [x17, PAGEOFF(h_sp_before)]
        str     x17, [x16, #256]

        adrp    x17, PAGE(h_saved_sp)
        ldr     x17, [x17, PAGEOFF(h_saved_sp)]
        mov     sp, x17
        ldp     d14, d15, [sp, #144]
        ldp     d12, d13, [sp, #128]
        ldp     d10, d11, [sp, #112]
        ldp     d8, d9, [sp, #96]
        ldp     x27, x28, [sp, #80]
        ldp     x25, x26, [sp, #64]
        ldp     x23, x24, [sp, #48]
        ldp     x21, x22, [sp, #32]
        ldp     x19, x20, [sp, #16]
        ldp     x29, x30, [sp], #160
        ret

        .p2align 2
        .globl SYM(clrprof_elt_harness_trash_handler)
        .globl SYM(clrprof_elt_harness_trash_info_handler)
SYM(clrprof_elt_harness_trash_handler):
SYM(clrprof_elt_harness_trash_info_handler):
        adrp    x9, PAGE(SYM(clrprof_elt_harness_handler_id))
        str     x0, [x9, PAGEOFF(SYM(clrprof_elt_harness_handler_id))]
        adrp    x9, PAGE(SYM(clrprof_elt_harness_handler_info))
        str     x1, [x9, PAGEOFF(SYM(clrprof_elt_harness_handler_info))]
        mov     x10, sp
        adrp    x9, PAGE(SYM(clrprof_elt_harness_handler_sp))
        str     x10, [x9, PAGEOFF(SYM(clrprof_elt_harness_handler_sp))]
        adrp    x9, PAGE(SYM(clrprof_elt_harness_handler_calls))
        add     x9, x9, PAGEOFF(SYM(clrprof_elt_harness_handler_calls))
        ldr     x10, [x9]
        add     x10, x10, #1
        str     x10, [x9]
        movz    x0, #0xBEEF
        movk    x0, #0xDEAD, lsl #16
        movk    x0, #0xBEEF, lsl #32
        movk    x0, #0xDEAD, lsl #48
        mov     x1, x0
        mov     x2, x0
        mov     x3, x0
        mov     x4, x0
        mov     x5, x0
        mov     x6, x0
        mov     x7, x0
        mov     x8, x0
        mov     x9, x0
        mov     x10, x0
        mov     x11, x0
        mov     x12, x0
        mov     x13, x0
        mov     x14, x0
        mov     x15, x0
        mov     x16, x0
        mov     x17, x0
        movi    v0.16b, #0xEE
        movi    v1.16b, #0xEE
        movi    v2.16b, #0xEE
        movi    v3.16b, #0xEE
        movi    v4.16b, #0xEE
        movi    v5.16b, #0xEE
        movi    v6.16b, #0xEE
        movi    v7.16b, #0xEE
        movi    v16.16b, #0xEE
        movi    v17.16b, #0xEE
        movi    v18.16b, #0xEE
        movi    v19.16b, #0xEE
        movi    v20.16b, #0xEE
        movi    v21.16b, #0xEE
        movi    v22.16b, #0xEE
        movi    v23.16b, #0xEE
        movi    v24.16b, #0xEE
        movi    v25.16b, #0xEE
        movi    v26.16b, #0xEE
        movi    v27.16b, #0xEE
        movi    v28.16b, #0xEE
        movi    v29.16b, #0xEE
        movi    v30.16b, #0xEE
        movi    v31.16b, #0xEE
        mov     v8.d[1], x0
        mov     v9.d[1], x0
        mov     v10.d[1], x0
        mov     v11.d[1], x0
        mov     v12.d[1], x0
        mov     v13.d[1], x0
        mov     v14.d[1], x0
        mov     v15.d[1], x0
        ret

#if defined(__linux__) && defined(__ELF__)
        .section .note.GNU-stack, "", %progbits
#endif
