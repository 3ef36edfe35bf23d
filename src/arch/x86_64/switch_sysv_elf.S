/*
 * Context switch for x86-64, System V ABI, ELF (GNU as).
 *
 *   void weft_ctx_switch(weft_ctx *from, weft_ctx *to);
 *
 * Saves what the SysV ABI says a callee must preserve — rbx, rbp, r12-r15,
 * the MXCSR control bits and the x87 control word — on the current stack,
 * stores the stack pointer in from->sp, loads to->sp and restores the same
 * frame from there. Everything else is caller-saved, so the C++ caller has
 * already spilled what it needs. The frame, from to->sp upwards (its layout
 * is mirrored by struct SwitchFrame in src/arch/context.hpp, which
 * static_asserts every offset used here):
 *
 *      +0   mxcsr      (4 bytes)
 *      +4   x87 cw     (2 bytes, 2 bytes padding)
 *      +8   r15
 *     +16   r14
 *     +24   r13
 *     +32   r12
 *     +40   rbx
 *     +48   rbp
 *     +56   return address
 *
 * Loading MXCSR and the x87 control word costs more than the rest of the
 * switch, and threads almost never change them, so they are loaded only when
 * the target's saved words differ from the current ones (rax and rcx are
 * caller-saved, free to use). The compare includes MXCSR's sticky exception flags: a thread
 * that raised one gets its exact MXCSR back, at the price of the slow path.
 *
 * A new thread's stack is prepared with this frame whose return address is
 * weft_ctx_trampoline, r12 = entry function, r13 = its argument.
 */
        .text
        .globl  weft_ctx_switch
        .hidden weft_ctx_switch
        .type   weft_ctx_switch, @function
        .p2align 4
weft_ctx_switch:
        .cfi_startproc
        pushq   %rbp                    /* callee-saved integer registers */
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        subq    $8, %rsp                /* room for the two control words */
        stmxcsr (%rsp)                  /* SSE rounding mode and exception masks */
        fnstcw  4(%rsp)                 /* x87 precision and rounding control */
        movq    %rsp, (%rdi)            /* from->sp = current stack pointer */
        movl    (%rsp), %eax            /* our words, read back at the size they */
        movzwl  4(%rsp), %ecx           /* were stored (so the loads forward) */

        movq    (%rsi), %rsp            /* switch stacks: rsp = to->sp */
        cmpl    (%rsp), %eax            /* the target's words equal ours? */
        jne     1f                      /* rarely: load them (ldmxcsr/fldcw are slow) */
        cmpw    4(%rsp), %cx
        jne     1f
2:      addq    $8, %rsp
        popq    %r15                    /* restore callee-saved registers */
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        ret                             /* resume the target where it switched out */
1:      ldmxcsr (%rsp)                  /* restore the target's control words */
        fldcw   4(%rsp)
        jmp     2b
        .cfi_endproc
        .size   weft_ctx_switch, .-weft_ctx_switch

/*
 * First code a new thread runs, reached by the `ret` above. rsp is 16-byte
 * aligned here (context.hpp arranges it), as the ABI requires before a call.
 * The entry function never returns: it ends the thread and switches away.
 */
        .globl  weft_ctx_trampoline
        .hidden weft_ctx_trampoline
        .type   weft_ctx_trampoline, @function
        .p2align 4
weft_ctx_trampoline:
        .cfi_startproc
        .cfi_undefined rip              /* outermost frame: backtraces stop here */
        movq    %r13, %rdi              /* first argument: the entry's argument */
        callq   *%r12                   /* entry(arg); does not return */
        ud2                             /* unreachable: trap loudly if it did */
        .cfi_endproc
        .size   weft_ctx_trampoline, .-weft_ctx_trampoline

        .section .note.GNU-stack,"",@progbits
