/*
 * Where a new thread starts, x86-64, System V ABI, ELF (GNU as).
 *
 * The switch itself is inline assembly (switch_sysv.hpp): it resumes a
 * thread with `jmp *pc`, and a new thread's pc is this trampoline, with
 * rsp at the StartFrame that context_init_frame prepared:
 *
 *      +0   ret      weft_ctx_trampoline_ret (the ud2 below)
 *      +8   entry    the thread's first function; never returns
 *     +16   arg      its argument
 *
 * The entry is reached by a jump, not a call, so the return-stack predictor
 * gets no entry that nobody ever returns to; it starts with rsp = &ret,
 * i.e. 8 mod 16, exactly as after a call. Were it to return, it would land
 * on the ud2 and trap loudly; unwinders reading that return address find
 * this function's `.cfi_undefined rip` and stop.
 */
        .text
        .globl  weft_ctx_trampoline
        .hidden weft_ctx_trampoline
        .globl  weft_ctx_trampoline_ret
        .hidden weft_ctx_trampoline_ret
        .type   weft_ctx_trampoline, @function
        .p2align 4
weft_ctx_trampoline:
        .cfi_startproc
        .cfi_undefined rip              /* outermost frame: backtraces stop here */
        movq    16(%rsp), %rdi          /* first argument: the entry's argument */
        jmpq    *8(%rsp)                /* entry(arg), as if called from here */
weft_ctx_trampoline_ret:
        ud2                             /* unreachable: trap loudly if it returned */
        .cfi_endproc
        .size   weft_ctx_trampoline, .-weft_ctx_trampoline

        .section .note.GNU-stack,"",@progbits
