/*
 * Fast-path ELT stubs of the C baseline profiler, x86_64 System V.
 * The JIT's convention for these helpers: enter gets the client ID in r14
 * and expects the argument registers (rdi rsi rdx rcx r8 r9, xmm0-xmm7)
 * unchanged; leave/tailcall get it in rdi and expect the return registers
 * (rax rdx xmm0 xmm1) unchanged. Each stub saves only what its own hook
 * must keep, calls the C function with the ID in rdi and returns.
 */
        .intel_syntax noprefix
        .text

        .globl baseline_enter_stub
        .type baseline_enter_stub, @function
        .p2align 4
baseline_enter_stub:
        .cfi_startproc
        sub     rsp, 0xB8               /* 8 xmm + 6 gpr + pad: rsp 16-aligned */
        .cfi_adjust_cfa_offset 0xB8
        movdqu  [rsp + 0x00], xmm0
        movdqu  [rsp + 0x10], xmm1
        movdqu  [rsp + 0x20], xmm2
        movdqu  [rsp + 0x30], xmm3
        movdqu  [rsp + 0x40], xmm4
        movdqu  [rsp + 0x50], xmm5
        movdqu  [rsp + 0x60], xmm6
        movdqu  [rsp + 0x70], xmm7
        mov     [rsp + 0x80], rdi
        mov     [rsp + 0x88], rsi
        mov     [rsp + 0x90], rdx
        mov     [rsp + 0x98], rcx
        mov     [rsp + 0xA0], r8
        mov     [rsp + 0xA8], r9
        mov     rdi, r14
        call    baseline_enter
        mov     r9, [rsp + 0xA8]
        mov     r8, [rsp + 0xA0]
        mov     rcx, [rsp + 0x98]
        mov     rdx, [rsp + 0x90]
        mov     rsi, [rsp + 0x88]
        mov     rdi, [rsp + 0x80]
        movdqu  xmm7, [rsp + 0x70]
        movdqu  xmm6, [rsp + 0x60]
        movdqu  xmm5, [rsp + 0x50]
        movdqu  xmm4, [rsp + 0x40]
        movdqu  xmm3, [rsp + 0x30]
        movdqu  xmm2, [rsp + 0x20]
        movdqu  xmm1, [rsp + 0x10]
        movdqu  xmm0, [rsp + 0x00]
        add     rsp, 0xB8
        .cfi_adjust_cfa_offset -0xB8
        ret
        .cfi_endproc
        .size baseline_enter_stub, . - baseline_enter_stub

        .globl baseline_leave_stub
        .type baseline_leave_stub, @function
        .p2align 4
baseline_leave_stub:
        .cfi_startproc
        sub     rsp, 0x38               /* 2 xmm + 2 gpr + pad */
        .cfi_adjust_cfa_offset 0x38
        movdqu  [rsp + 0x00], xmm0
        movdqu  [rsp + 0x10], xmm1
        mov     [rsp + 0x20], rax
        mov     [rsp + 0x28], rdx
        call    baseline_leave
        mov     rdx, [rsp + 0x28]
        mov     rax, [rsp + 0x20]
        movdqu  xmm1, [rsp + 0x10]
        movdqu  xmm0, [rsp + 0x00]
        add     rsp, 0x38
        .cfi_adjust_cfa_offset -0x38
        ret
        .cfi_endproc
        .size baseline_leave_stub, . - baseline_leave_stub

/*
 * WithInfo enter hook for CoreCLR before .NET 5 (C ABI, called by the
 * runtime's stub with (client, eltInfo) in rdi, rsi): that stub restores
 * the integer argument registers and xmm0/xmm1 after the hook but not
 * xmm2-xmm7, so the hook keeps those six itself.
 */
        .globl baseline_enter_with_info_netcore3_stub
        .type baseline_enter_with_info_netcore3_stub, @function
        .p2align 4
baseline_enter_with_info_netcore3_stub:
        .cfi_startproc
        sub     rsp, 0x68               /* 6 xmm + pad: rsp 16-aligned */
        .cfi_adjust_cfa_offset 0x68
        movdqu  [rsp + 0x00], xmm2
        movdqu  [rsp + 0x10], xmm3
        movdqu  [rsp + 0x20], xmm4
        movdqu  [rsp + 0x30], xmm5
        movdqu  [rsp + 0x40], xmm6
        movdqu  [rsp + 0x50], xmm7
        call    baseline_enter_with_info
        movdqu  xmm7, [rsp + 0x50]
        movdqu  xmm6, [rsp + 0x40]
        movdqu  xmm5, [rsp + 0x30]
        movdqu  xmm4, [rsp + 0x20]
        movdqu  xmm3, [rsp + 0x10]
        movdqu  xmm2, [rsp + 0x00]
        add     rsp, 0x68
        .cfi_adjust_cfa_offset -0x68
        ret
        .cfi_endproc
        .size baseline_enter_with_info_netcore3_stub, . - baseline_enter_with_info_netcore3_stub

        .section .note.GNU-stack, "", @progbits
