/*
 * Test-only harness for the x86_64 Windows ELT trampolines (GNU syntax,
 * mingw-w64). Linked into clrprof-sys's test binaries only (build.rs:
 * rustc-link-arg-tests), never into the library. Used by
 * tests/elt_trampolines.rs.
 *
 * clrprof_elt_harness_call(target, in, out) loads every general register
 * (but rsp) and xmm0-xmm15 from `in`, calls `target` the way jitted code
 * calls a profiler hook (16-byte aligned stack, 32 bytes of outgoing
 * argument space below the return address, indirect call that leaves every
 * register as loaded), then stores every register into `out`.
 *
 * Register block layout (struct X64Regs in the test):
 *   0x000  xmm0..xmm15, 16 bytes each
 *   0x100  rax rcx rdx rbx rsp rbp rsi rdi r8..r15 (encoding order)
 *   0x180  extra[0] = rsp at the call, extra[1] = rsp after the return
 *
 * clrprof_elt_harness_trash_handler(id, info) is a C-ABI handler that
 * records its two arguments (a fast-path handler has only the first), its rsp and a call count, writes over its caller's 32-byte home
 * area, then clobbers every register the Windows x64 ABI lets a callee
 * clobber.
 */

        .intel_syntax noprefix

        .data
        .p2align 3
h_target:       .quad 0
h_out:          .quad 0
h_saved_rsp:    .quad 0
h_rsp_before:   .quad 0
h_rax:          .quad 0
        .globl clrprof_elt_harness_handler_id
        .globl clrprof_elt_harness_handler_sp
        .globl clrprof_elt_harness_handler_calls
        .globl clrprof_elt_harness_handler_info
clrprof_elt_harness_handler_id:    .quad 0
clrprof_elt_harness_handler_info:  .quad 0
clrprof_elt_harness_handler_sp:    .quad 0
clrprof_elt_harness_handler_calls: .quad 0

        .text
        .p2align 4
        .globl clrprof_elt_harness_call
clrprof_elt_harness_call:
        push    rbx
        push    rbp
        push    rdi
        push    rsi
        push    r12
        push    r13
        push    r14
        push    r15
        sub     rsp, 0xA8
        movdqu  [rsp + 0x00], xmm6
        movdqu  [rsp + 0x10], xmm7
        movdqu  [rsp + 0x20], xmm8
        movdqu  [rsp + 0x30], xmm9
        movdqu  [rsp + 0x40], xmm10
        movdqu  [rsp + 0x50], xmm11
        movdqu  [rsp + 0x60], xmm12
        movdqu  [rsp + 0x70], xmm13
        movdqu  [rsp + 0x80], xmm14
        movdqu  [rsp + 0x90], xmm15
        mov     [rip + h_target], rcx
        mov     [rip + h_out], r8
        mov     [rip + h_saved_rsp], rsp
        sub     rsp, 0x20               /* outgoing argument (home) area */
        mov     [rip + h_rsp_before], rsp

        movdqu  xmm0,  [rdx + 0x00]
        movdqu  xmm1,  [rdx + 0x10]
        movdqu  xmm2,  [rdx + 0x20]
        movdqu  xmm3,  [rdx + 0x30]
        movdqu  xmm4,  [rdx + 0x40]
        movdqu  xmm5,  [rdx + 0x50]
        movdqu  xmm6,  [rdx + 0x60]
        movdqu  xmm7,  [rdx + 0x70]
        movdqu  xmm8,  [rdx + 0x80]
        movdqu  xmm9,  [rdx + 0x90]
        movdqu  xmm10, [rdx + 0xA0]
        movdqu  xmm11, [rdx + 0xB0]
        movdqu  xmm12, [rdx + 0xC0]
        movdqu  xmm13, [rdx + 0xD0]
        movdqu  xmm14, [rdx + 0xE0]
        movdqu  xmm15, [rdx + 0xF0]
        mov     rax, [rdx + 0x100]
        mov     rcx, [rdx + 0x108]
        mov     rbx, [rdx + 0x118]
        mov     rbp, [rdx + 0x128]
        mov     rsi, [rdx + 0x130]
        mov     rdi, [rdx + 0x138]
        mov     r8,  [rdx + 0x140]
        mov     r9,  [rdx + 0x148]
        mov     r10, [rdx + 0x150]
        mov     r11, [rdx + 0x158]
        mov     r12, [rdx + 0x160]
        mov     r13, [rdx + 0x168]
        mov     r14, [rdx + 0x170]
        mov     r15, [rdx + 0x178]
        mov     rdx, [rdx + 0x110]

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
        movdqu  xmm6,  [rsp + 0x00]
        movdqu  xmm7,  [rsp + 0x10]
        movdqu  xmm8,  [rsp + 0x20]
        movdqu  xmm9,  [rsp + 0x30]
        movdqu  xmm10, [rsp + 0x40]
        movdqu  xmm11, [rsp + 0x50]
        movdqu  xmm12, [rsp + 0x60]
        movdqu  xmm13, [rsp + 0x70]
        movdqu  xmm14, [rsp + 0x80]
        movdqu  xmm15, [rsp + 0x90]
        add     rsp, 0xA8
        pop     r15
        pop     r14
        pop     r13
        pop     r12
        pop     rsi
        pop     rdi
        pop     rbp
        pop     rbx
        ret

        .p2align 4
        .globl clrprof_elt_harness_trash_handler
        .globl clrprof_elt_harness_trash_info_handler
clrprof_elt_harness_trash_handler:
clrprof_elt_harness_trash_info_handler:
        mov     [rip + clrprof_elt_harness_handler_id], rcx
        mov     [rip + clrprof_elt_harness_handler_info], rdx
        mov     [rip + clrprof_elt_harness_handler_sp], rsp
        inc     qword ptr [rip + clrprof_elt_harness_handler_calls]
        movabs  rax, 0xDEADBEEFDEADBEEF
        mov     [rsp + 0x08], rax       /* the caller's home area */
        mov     [rsp + 0x10], rax
        mov     [rsp + 0x18], rax
        mov     [rsp + 0x20], rax
        mov     rcx, rax
        mov     rdx, rax
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
        ret
