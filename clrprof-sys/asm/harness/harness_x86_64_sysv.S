/*
 * Test-only harness for the x86_64 System V ELT trampolines. Linked into
 * clrprof-sys's test binaries only (build.rs: rustc-link-arg-tests), never
 * into the library. Used by tests/elt_trampolines.rs.
 *
 * clrprof_elt_harness_call(target, in, out) loads every general register
 * (but rsp) and xmm0-xmm15 from `in`, calls `target` the way jitted code
 * calls a profiler hook (16-byte aligned stack, indirect call that leaves
 * every register as loaded), then stores every register into `out`.
 *
 * Register block layout (struct X64Regs in the test):
 *   0x000  xmm0..xmm15, 16 bytes each
 *   0x100  rax rcx rdx rbx rsp rbp rsi rdi r8..r15 (encoding order)
 *   0x180  extra[0] = rsp at the call, extra[1] = rsp after the return
 *
 * clrprof_elt_harness_trash_handler(id, info) is a C-ABI handler that
 * records its two arguments (a fast-path handler has only the first), its rsp and a call count, then clobbers every register the
 * System V ABI lets a callee clobber.
 */

#if defined(__APPLE__)
#  define SYM(name) _##name
#else
#  define SYM(name) name
#endif

        .intel_syntax noprefix

        .data
        .p2align 3
h_target:       .quad 0
h_out:          .quad 0
h_saved_rsp:    .quad 0
h_rsp_before:   .quad 0
h_rax:          .quad 0
        .globl SYM(clrprof_elt_harness_handler_id)
        .globl SYM(clrprof_elt_harness_handler_sp)
        .globl SYM(clrprof_elt_harness_handler_calls)
        .globl SYM(clrprof_elt_harness_handler_info)
SYM(clrprof_elt_harness_handler_id):    .quad 0
SYM(clrprof_elt_harness_handler_info):  .quad 0
SYM(clrprof_elt_harness_handler_sp):    .quad 0
SYM(clrprof_elt_harness_handler_calls): .quad 0

        .text
        .p2align 4
        .globl SYM(clrprof_elt_harness_call)
SYM(clrprof_elt_harness_call):
        push    rbx
        push    rbp
        push    r12
        push    r13
        push    r14
        push    r15
        mov     [rip + h_target], rdi
        mov     [rip + h_out], rdx
        mov     [rip + h_saved_rsp], rsp
        sub     rsp, 8                  /* 16-byte aligned at the call */
        mov     [rip + h_rsp_before], rsp

        movdqu  xmm0,  [rsi + 0x00]
        movdqu  xmm1,  [rsi + 0x10]
        movdqu  xmm2,  [rsi + 0x20]
        movdqu  xmm3,  [rsi + 0x30]
        movdqu  xmm4,  [rsi + 0x40]
        movdqu  xmm5,  [rsi + 0x50]
        movdqu  xmm6,  [rsi + 0x60]
        movdqu  xmm7,  [rsi + 0x70]
        movdqu  xmm8,  [rsi + 0x80]
        movdqu  xmm9,  [rsi + 0x90]
        movdqu  xmm10, [rsi + 0xA0]
        movdqu  xmm11, [rsi + 0xB0]
        movdqu  xmm12, [rsi + 0xC0]
        movdqu  xmm13, [rsi + 0xD0]
        movdqu  xmm14, [rsi + 0xE0]
        movdqu  xmm15, [rsi + 0xF0]
        mov     rax, [rsi + 0x100]
        mov     rcx, [rsi + 0x108]
        mov     rdx, [rsi + 0x110]
        mov     rbx, [rsi + 0x118]
        mov     rbp, [rsi + 0x128]
        mov     rdi, [rsi + 0x138]
        mov     r8,  [rsi + 0x140]
        mov     r9,  [rsi + 0x148]
        mov     r10, [rsi + 0x150]
        mov     r11, [rsi + 0x158]
        mov     r12, [rsi + 0x160]
        mov     r13, [rsi + 0x168]
        mov     r14, [rsi + 0x170]
        mov     r15, [rsi + 0x178]
        mov     rsi, [rsi + 0x130]

        call    qword ptr [rip + h_target]

        mov     [rip + h_rax], rax
        mov     rax, [rip + h_out]
        movdqu  [rax + 0x00], xmm0
        movdqu  [rax + 0x10], xmm1
        movdqu  [rax + 0x20], xmm2
        movdqu  [rax + 0x30], xmm3
        movdqu  [rax + 0x40], xmm4
        movdqu  [rax + 0x50], xmm5
        movdqu  [rax + 0x60], xmm6
        movdqu  [rax + 0x70], xmm7
        movdqu  [rax + 0x80], xmm8
        movdqu  [rax + 0x90], xmm9
        movdqu  [rax + 0xA0], xmm10
        movdqu  [rax + 0xB0], xmm11
        movdqu  [rax + 0xC0], xmm12
        movdqu  [rax + 0xD0], xmm13
        movdqu  [rax + 0xE0], xmm14
        movdqu  [rax + 0xF0], xmm15
        mov     [rax + 0x108], rcx
        mov     [rax + 0x110], rdx
        mov     [rax + 0x118], rbx
        mov     [rax + 0x120], rsp
        mov     [rax + 0x128], rbp
        mov     [rax + 0x130], rsi
        mov     [rax + 0x138], rdi
        mov     [rax + 0x140], r8
        mov     [rax + 0x148], r9
        mov     [rax + 0x150], r10
        mov     [rax + 0x158], r11
        mov     [rax + 0x160], r12
        mov     [rax + 0x168], r13
        mov     [rax + 0x170], r14
        mov     [rax + 0x178], r15
        mov     [rax + 0x188], rsp
        mov     rcx, [rip + h_rsp_before]
        mov     [rax + 0x180], rcx
        mov     rcx, [rip + h_rax]
        mov     [rax + 0x100], rcx

        mov     rsp, [rip + h_saved_rsp]
        pop     r15
        pop     r14
        pop     r13
        pop     r12
        pop     rbp
        pop     rbx
        ret

        .p2align 4
        .globl SYM(clrprof_elt_harness_trash_handler)
        .globl SYM(clrprof_elt_harness_trash_info_handler)
SYM(clrprof_elt_harness_trash_handler):
SYM(clrprof_elt_harness_trash_info_handler):
        mov     [rip + SYM(clrprof_elt_harness_handler_id)], rdi
        mov     [rip + SYM(clrprof_elt_harness_handler_info)], rsi
        mov     [rip + SYM(clrprof_elt_harness_handler_sp)], rsp
        inc     qword ptr [rip + SYM(clrprof_elt_harness_handler_calls)]
        movabs  rax, 0xDEADBEEFDEADBEEF
        mov     rcx, rax
        mov     rdx, rax
        mov     rsi, rax
        mov     rdi, rax
        mov     r8, rax
        mov     r9, rax
        mov     r10, rax
        mov     r11, rax
        pcmpeqd xmm0, xmm0
        pcmpeqd xmm1, xmm1
        pcmpeqd xmm2, xmm2
        pcmpeqd xmm3, xmm3
        pcmpeqd xmm4, xmm4
        pcmpeqd xmm5, xmm5
        pcmpeqd xmm6, xmm6
        pcmpeqd xmm7, xmm7
        pcmpeqd xmm8, xmm8
        pcmpeqd xmm9, xmm9
        pcmpeqd xmm10, xmm10
        pcmpeqd xmm11, xmm11
        pcmpeqd xmm12, xmm12
        pcmpeqd xmm13, xmm13
        pcmpeqd xmm14, xmm14
        pcmpeqd xmm15, xmm15
        ret

#if defined(__linux__) && defined(__ELF__)
        .section .note.GNU-stack, "", @progbits
#endif
