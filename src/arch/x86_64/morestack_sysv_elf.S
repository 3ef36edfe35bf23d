/*
 * __morestack for weft's linked stacks, x86-64, System V ABI, ELF (GNU as).
 *
 * Code built with gcc's -fsplit-stack starts every function (or, with the
 * stackcheck plugin, every checkpoint function) with
 *
 *      cmp   %fs:0x70, %rsp        (or: lea -FRAME(%rsp), %r11; cmp %fs:0x70, %r11)
 *      jb    1f
 *  2:  ...the function body...
 *  1:  mov   $FRAME, %r10          bytes of frame it is about to allocate
 *      mov   $ARGS, %r11           bytes of arguments its caller passed on the stack
 *      call  __morestack
 *      ret                         <- X, the return address __morestack receives
 *      (varargs only: lea 24(%rbp), %r11)   <- X + 1: the body, "called" by us
 *      jmp   2b
 *
 * %fs:0x70 is the split-stack word of glibc's thread control block
 * (tcbhead_t.__private_ss). weft keeps there the lowest address the current
 * chunk may be run down to (the guard; stack/linked.hpp) while a linked-
 * stack thread runs, and 0 otherwise, so the checks never fire on fixed
 * stacks, in the scheduler loop or outside weft.
 *
 * __morestack links a chunk (weft_stack_link, C++, on the old chunk: the
 * guard leaves it a reserve for that), copies the stack arguments there,
 * calls the body at X + 1 on it, and when the body returns unlinks the chunk
 * (weft_stack_unlink, back on the old chunk) and returns to X, whose `ret`
 * returns to the original caller.
 *
 *   old chunk, from %rbp up:   saved rbp | X | caller's return | stack args...
 *
 * %rbp is that frame's base throughout: a varargs body finds its stack
 * arguments at 24(%rbp), and unwinders (gdb, C++ exceptions, weft's own
 * traces) find the caller and the old chunk through the CFA rule rbp + 24,
 * which is how a backtrace crosses from one chunk to the next. gdb also knows the
 * name: a frame called __morestack may change stacks without being called
 * a corrupt stack.
 *
 * An exception thrown through the body lands on the cleanup pad below,
 * which unlinks the chunk before unwinding goes on (the LSDA at the end).
 */
        .text
        .globl  __morestack
        .type   __morestack, @function
        .p2align 4
__morestack:
        .cfi_startproc
        .cfi_personality 0x9b, DW.ref.__gcc_personality_v0
        .cfi_lsda 0x1b, .Lmorestack_lsda
        /* Unwinders see this frame as called by the function's caller: X,
         * in the split function's prologue, is in no call-site table of its
         * LSDA, and a C++ personality would take a throw from there for a
         * noexcept violation. So the CFA is 16 above the entry rsp and the
         * return address is the caller's, X skipped. */
        .cfi_def_cfa_offset 16
        pushq   %rbp
        .cfi_def_cfa_offset 24
        .cfi_offset rbp, -24
        movq    %rsp, %rbp
        .cfi_def_cfa_register rbp
        /* The caller's argument registers (and %al, the vector-register count
         * of a varargs call) outlive the call to weft_stack_link. rbp is
         * 8 mod 16; 200 bytes below it the call is 16-byte aligned. */
        subq    $200, %rsp
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movq    %rax, 48(%rsp)
        movdqu  %xmm0, 64(%rsp)
        movdqu  %xmm1, 80(%rsp)
        movdqu  %xmm2, 96(%rsp)
        movdqu  %xmm3, 112(%rsp)
        movdqu  %xmm4, 128(%rsp)
        movdqu  %xmm5, 144(%rsp)
        movdqu  %xmm6, 160(%rsp)
        movdqu  %xmm7, 176(%rsp)
        movq    %r10, %rdi              /* frame bytes */
        movq    %r11, %rsi              /* argument bytes */
        leaq    24(%rbp), %rdx          /* where they are */
        call    weft_stack_link         /* -> rax: the new chunk's top (16-aligned),
                                           rdx: the argument bytes to copy */
        /* Copy the stack arguments: they start at 24(%rbp). */
        movq    %rdx, %rcx
        subq    %rcx, %rax
        andq    $-16, %rax              /* the body's rsp before its call */
        movq    %rax, %r10
        leaq    24(%rbp), %rsi
        movq    %rax, %rdi
        rep movsb
        movq    0(%rsp), %rdi
        movq    8(%rsp), %rsi
        movq    16(%rsp), %rdx
        movq    24(%rsp), %rcx
        movq    32(%rsp), %r8
        movq    40(%rsp), %r9
        movq    48(%rsp), %rax
        movdqu  64(%rsp), %xmm0
        movdqu  80(%rsp), %xmm1
        movdqu  96(%rsp), %xmm2
        movdqu  112(%rsp), %xmm3
        movdqu  128(%rsp), %xmm4
        movdqu  144(%rsp), %xmm5
        movdqu  160(%rsp), %xmm6
        movdqu  176(%rsp), %xmm7
        movq    8(%rbp), %r11
        incq    %r11                    /* X + 1: past the ret */
        movq    %r10, %rsp              /* onto the new chunk */
.Lbody_begin:
        call    *%r11
.Lbody_end:
        /* Back from the body: its results are in rax, rdx, xmm0, xmm1. Off
         * the new chunk before giving it back. */
        movq    %rbp, %rsp
        subq    $56, %rsp
        movq    %rax, 0(%rsp)
        movq    %rdx, 8(%rsp)
        movdqu  %xmm0, 16(%rsp)
        movdqu  %xmm1, 32(%rsp)
        call    weft_stack_unlink
        movq    0(%rsp), %rax
        movq    8(%rsp), %rdx
        movdqu  16(%rsp), %xmm0
        movdqu  32(%rsp), %xmm1
        movq    %rbp, %rsp
        .cfi_remember_state
        popq    %rbp
        .cfi_restore rbp
        .cfi_def_cfa rsp, 16
        ret                             /* to X: its ret returns to the caller */
        .cfi_restore_state
.Lcleanup:
        /* An exception is leaving the body. We are still on the body's
         * chunk (rsp as at the call), which has room for the unwinder, and
         * the frames it goes on to are below: unlink the chunk now (it stays
         * the thread's spare, unused, while the unwinder runs on it) and
         * resume unwinding here. Straight to the real _Unwind_Resume: the
         * --wrap wrapper would compare this stack with the chunk below. */
        pushq   %rax                    /* the exception object */
        pushq   %rax
        call    weft_stack_unlink_unwinding
        popq    %rdi
        popq    %rdi
        movq    __real__Unwind_Resume@GOTPCREL(%rip), %rax
        testq   %rax, %rax
        jnz     1f
        movq    _Unwind_Resume@GOTPCREL(%rip), %rax   /* not wrapped: the real one */
1:      call    *%rax
        ud2
        .cfi_endproc
        .size   __morestack, .-__morestack
        /* Its end, for weft's own stack walks (observe/graph.cc): a frame
         * returning into __morestack is a chunk boundary. */
        .globl  weft_morestack_end
        .hidden weft_morestack_end
weft_morestack_end:

/*
 * gold calls this instead of __morestack from split-stack functions that
 * call code built without -fsplit-stack (libc, say): they want
 * kNonSplitExtra bytes more than their frame, for the callee. With that
 * room on the current chunk, go straight to the body (X + 1) on it; else
 * link a chunk large enough. A varargs body (its X + 1 is
 * `lea 24(%rbp), %r11`) needs our frame for its arguments: always link.
 */
        .globl  __morestack_non_split
        .type   __morestack_non_split, @function
        .p2align 4
__morestack_non_split:
        .cfi_startproc
        pushq   %rax
        .cfi_def_cfa_offset 16
        leaq    -16384(%rsp), %rax      /* kNonSplitExtra, stack/linked.hpp */
        subq    %r10, %rax
        jb      1f                      /* wrapped: no room */
        cmpq    %fs:0x70, %rax
        jb      1f
        movq    8(%rsp), %rax
        cmpw    $0x8d4c, 1(%rax)        /* lea ...(%rbp), %r11 after the ret? */
        je      1f
        incq    %rax                    /* X + 1 */
        movq    %rax, 8(%rsp)
        popq    %rax
        .cfi_def_cfa_offset 8
        ret                             /* "returns" into the body, no switch */
1:
        .cfi_def_cfa_offset 16
        popq    %rax
        .cfi_def_cfa_offset 8
        addq    $16384, %r10
        jmp     __morestack
        .cfi_endproc
        .size   __morestack_non_split, .-__morestack_non_split

/*
 * External code on a linked stack: the wrappers of the external functions
 * known to need more than the reserve (morestack_wrap.inc says how).
 * Programs built with weft_checkpoints_from_analysis get more, generated
 * from their own analysis (tools/stackcheck/gen_wraps.py).
 */
#include "morestack_wrap.inc"
        /* Throwing and unwinding: libgcc's unwinder and the personality. */
        WEFT_WRAP __cxa_throw, 16384
        WEFT_WRAP __cxa_rethrow, 16384
        WEFT_WRAP _Unwind_Resume, 16384
        WEFT_WRAP __cxa_allocate_exception, 2048
        /* malloc's slow paths (a consolidating free: 904 bytes measured). */
        WEFT_WRAP malloc, 2048
        WEFT_WRAP calloc, 2048
        WEFT_WRAP realloc, 2048
        WEFT_WRAP free, 2048
        /* stdio's formatting (an unbuffered stream: 12.4 KiB measured). */
        WEFT_WRAP printf, 16384
        WEFT_WRAP fprintf, 16384
        WEFT_WRAP vprintf, 16384
        WEFT_WRAP vfprintf, 16384
        WEFT_WRAP sprintf, 8192
        WEFT_WRAP snprintf, 8192
        WEFT_WRAP vsprintf, 8192
        WEFT_WRAP vsnprintf, 8192
        WEFT_WRAP puts, 8192
        WEFT_WRAP fputs, 8192
        WEFT_WRAP fwrite, 8192
        WEFT_WRAP getaddrinfo, 32768

/* The call of the body is a region whose landing pad is .Lcleanup (a
 * cleanup: no action, no type table). */
        .section .gcc_except_table,"a",@progbits
.Lmorestack_lsda:
        .byte   0xff                    /* @LPStart: the function's start */
        .byte   0xff                    /* no type table */
        .byte   0x01                    /* call sites: uleb128 */
        .uleb128 .Lcs_end - .Lcs_begin
.Lcs_begin:
        .uleb128 .Lbody_begin - __morestack
        .uleb128 .Lbody_end - .Lbody_begin
        .uleb128 .Lcleanup - __morestack
        .uleb128 0                      /* action 0: cleanup */
.Lcs_end:

        .hidden DW.ref.__gcc_personality_v0
        .weak   DW.ref.__gcc_personality_v0
        .section .data.rel.local.DW.ref.__gcc_personality_v0,"awG",@progbits,DW.ref.__gcc_personality_v0,comdat
        .align  8
        .type   DW.ref.__gcc_personality_v0, @object
        .size   DW.ref.__gcc_personality_v0, 8
DW.ref.__gcc_personality_v0:
        .quad   __gcc_personality_v0

        /* This file is safe to call from split-stack code: gold must not
         * treat calls into it as calls to non-split code. */
        .section .note.GNU-split-stack,"",@progbits
        /* ... but its own entries have no split-stack prologue for gold to
         * rewrite (it calls _Unwind_Resume): say so, or gold stops. */
        .section .note.GNU-no-split-stack,"",@progbits
        .section .note.GNU-stack,"",@progbits
