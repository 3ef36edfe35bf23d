// Context switch for x86-64, System V ABI: inline assembly, included by
// src/arch/context.hpp (the only includer).
//
//   context_switch(from, to)
//
// Saves the running thread into *from and resumes the thread saved in *to.
// The saved state is the Context struct itself, never the stack:
//
//      +0   sp       stack pointer at the switch
//      +8   pc       where it resumes: label 1 below, in whichever function
//                    the switch was inlined into (or the trampoline)
//     +16   fp       rbp (the frame pointer: the compiler cannot be told it
//                    is clobbered, so the switch keeps it itself)
//     +24   mxcsr    SSE control/status
//     +28   x87 cw   x87 control word
//
// Why inline, with every other register declared clobbered, rather than a
// called function that pushes the callee-saved registers:
//  - No call and no ret: the return-stack predictor is left alone. A called
//    switch `ret`s into another thread's call site, which the predictor gets
//    wrong whenever the two sites differ (create + join: into the new
//    thread's trampoline, and from the dying thread back into the joiner;
//    and the thread's own later returns then read a stack of predictions
//    that is off by the frames it never returned from). The `jmp *` that
//    resumes the target is predicted by target history instead, and a
//    switch site almost always resumes the same kind of site.
//  - The callee-saved registers are saved once, by the compiler, in the
//    prologue of the function the switch is inlined into (which usually
//    saves them anyway), and only the values live across the switch are
//    spilled — not all six registers again by the switch.
// Nothing is written below the stack pointer, so the red zone of the
// function the switch is inlined into stays intact.
//
// The control words: MXCSR is loaded at every switch, the x87 control word
// only when the target's differs from ours (read back at the size it was
// stored, so the load forwards from the store). Comparing MXCSR the same
// way made every switch wait for `stmxcsr` to finish before the read back
// could, and on AMD EPYC `stmxcsr` takes ~14 cycles while an `ldmxcsr` of
// an unchanged value takes one: the yield ping-pong went 8.3 -> 7.1 ns and
// the cond hand-off 10.7 -> 9.5 ns without the compare (docs/tuning.md).
// `fldcw` is not cheap there, and `fnstcw` is, so that compare stays. The
// sticky exception flags travel with MXCSR: a thread that raised one gets
// its exact MXCSR back.
#pragma once

#ifndef WEFT_ARCH_CONTEXT_INTERNAL
#error "include arch/context.hpp, not this file"
#endif

namespace weft::detail {

// Returns `from` once the thread is resumed, taken from the register the
// resuming switch left it in (its `to`): the caller need not keep it live
// across the switch, where every register is clobbered.
//
// Always inlined, never merely allowed to be: in a function GCC optimises
// for size (a cold one) it once made this a called function, and a called
// switch built with linked stacks has a split-stack prologue, run after
// Vproc::switch_to has made `next` the current thread — so __morestack
// linked a chunk to the wrong thread, and the unlink at the return crashed
// (a nested recursive-mutex wait under WEFT_STACKS=linked, 2026-11-29).
[[gnu::always_inline]] inline Context *context_switch(Context *from, Context *to) {
    asm volatile(
        "leaq    1f(%%rip), %%rax\n\t"          // where this thread resumes
        "movq    %%rsp, %c[sp](%%rdi)\n\t"      // from->sp
        "movq    %%rax, %c[pc](%%rdi)\n\t"      // from->pc
        "movq    %%rbp, %c[fp](%%rdi)\n\t"      // from->fp
        "stmxcsr %c[mxcsr](%%rdi)\n\t"          // our control words ...
        "fnstcw  %c[cw](%%rdi)\n\t"
        "movzwl  %c[cw](%%rdi), %%ecx\n\t"      // ... the x87 one read back to compare
        "movq    %c[sp](%%rsi), %%rsp\n\t"      // switch stacks
        "movq    %c[fp](%%rsi), %%rbp\n\t"
        "ldmxcsr %c[mxcsr](%%rsi)\n\t"
        "cmpw    %c[cw](%%rsi), %%cx\n\t"
        "jne     2f\n"
        "3:\n\t"
        "jmpq    *%c[pc](%%rsi)\n"              // resume the target (rsi = to)
        "2:\n\t"
        "fldcw   %c[cw](%%rsi)\n\t"
        "jmp     3b\n"
        "1:"                                    // resumed here, by another switch
        : "+D"(from), "+S"(to)
        : [sp] "i"(offsetof(Context, sp)), [pc] "i"(offsetof(Context, pc)), [fp] "i"(offsetof(Context, fp)),
          [mxcsr] "i"(offsetof(Context, mxcsr)), [cw] "i"(offsetof(Context, x87_cw))
        // Everything but rsp and rbp holds the resuming thread's values now.
        : "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
          "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
          "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
#if defined(__AVX512F__)
          "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
          "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31",
          "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7",
#endif
          "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)",
          "cc", "memory");
    return to; // rsi, as the resuming switch left it: our own context
}

// The frame a new thread's stack starts with, at Context::sp: what the
// trampoline (switch_sysv_elf.S) reads. rsp = &ret when the trampoline jumps
// to the entry, which therefore starts as if called from the trampoline.
struct StartFrame {
    void *ret;               // fake return address: a ud2 in the trampoline
    void (*entry)(void *);   // jumped to, never returns
    void *arg;               // its argument
};
static_assert(offsetof(StartFrame, entry) == 8, "trampoline: jmpq *8(%rsp)");
static_assert(offsetof(StartFrame, arg) == 16, "trampoline: movq 16(%rsp), %rdi");

extern "C" void weft_ctx_trampoline();
extern "C" char weft_ctx_trampoline_ret[]; // the ud2 a returning entry would hit

inline void context_init_frame(Context *ctx, void *stack_hi, void (*entry)(void *), void *arg) {
    // At the entry's first instruction rsp + 8 must be 16-byte aligned, as
    // after a call: StartFrame (24 bytes) below a 16-byte aligned top.
    auto top = reinterpret_cast<uintptr_t>(stack_hi) & ~uintptr_t{15};
    auto *f = reinterpret_cast<StartFrame *>(top - sizeof(StartFrame));
    static_assert(sizeof(StartFrame) % 16 == 8, "rsp = &ret must be 8 mod 16");
    f->ret = weft_ctx_trampoline_ret;
    f->entry = entry;
    f->arg = arg;
    ctx->sp = f;
    ctx->pc = reinterpret_cast<void *>(&weft_ctx_trampoline);
    ctx->fp = nullptr; // frame-pointer walks stop here
    // Power-on control bits, but the creator's sticky exception flags: an
    // ldmxcsr that changes the value costs ≈ 50 ns on Intel (docs/tuning.md)
    // at every switch between threads whose words differ, and a creator that
    // has done any inexact arithmetic has the precision flag set — so fresh
    // flags would make every create + join pay it twice. POSIX threads
    // inherit the whole floating-point environment; weft inherits the flags.
    ctx->mxcsr = kDefaultMxcsr | (__builtin_ia32_stmxcsr() & kMxcsrFlags);
    ctx->x87_cw = kDefaultX87Cw;
}

} // namespace weft::detail
