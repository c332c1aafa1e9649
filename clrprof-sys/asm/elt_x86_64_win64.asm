; clrprof ELT trampolines for x86_64 Windows, MASM syntax (MSVC targets,
; assembled with ml64 by the cc crate). Same code, frame and register
; contract as elt_x86_64_win64.S (GNU syntax, mingw-w64 targets); see that
; file and src/elt.rs for the convention these trampolines implement.
; Not assembled by this project's CI (no ml64 on Linux): keep it in step
; with the .S file by hand.
;
; Handler slots: one pointer-sized word each, zero = no handler.

.data
ALIGN 8
PUBLIC clrprof_elt_enter_handler
PUBLIC clrprof_elt_leave_handler
PUBLIC clrprof_elt_tailcall_handler
clrprof_elt_enter_handler    QWORD 0
clrprof_elt_leave_handler    QWORD 0
clrprof_elt_tailcall_handler QWORD 0

FRAME_SIZE EQU 0A8h
OFF_XMM0   EQU 020h
OFF_XMM1   EQU 030h
OFF_XMM2   EQU 040h
OFF_XMM3   EQU 050h
OFF_XMM4   EQU 060h
OFF_XMM5   EQU 070h
OFF_RAX    EQU 080h
OFF_RCX    EQU 088h
OFF_RDX    EQU 090h
OFF_R8     EQU 098h
OFF_R9     EQU 0A0h

ELT_TRAMPOLINE MACRO fn_name, slot_name
    LOCAL no_handler
ALIGN 16
PUBLIC fn_name
fn_name PROC FRAME
        mov     r11, qword ptr [slot_name]
        test    r11, r11
        jz      no_handler

        sub     rsp, FRAME_SIZE
        .allocstack FRAME_SIZE
        .endprolog
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

        ; rcx already holds the ID, which is also the handler's argument.
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
no_handler:
        ret
fn_name ENDP
ENDM

.code
ELT_TRAMPOLINE clrprof_elt_enter3_trampoline, clrprof_elt_enter_handler
ELT_TRAMPOLINE clrprof_elt_leave3_trampoline, clrprof_elt_leave_handler
ELT_TRAMPOLINE clrprof_elt_tailcall3_trampoline, clrprof_elt_tailcall_handler

END
