// Machine context of a user thread and the switch between two of them. The
// switch itself is inline assembly in one file per CPU x ABI
// (x86_64/switch_sysv.hpp), with the trampoline new threads start in
// (x86_64/switch_sysv_elf.S); this header holds what the rest of the runtime
// sees, and the static_asserts pin the layout the assembly uses.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define WEFT_ASAN 1
#else
#define WEFT_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define WEFT_TSAN 1
#else
#define WEFT_TSAN 0
#endif

namespace weft::detail {

// Everything a switched-out thread keeps outside its stack. The other
// registers are saved (where live) by the compiler around the switch.
struct Context {
    void *sp;          // stack pointer at the switch
    void *pc;          // where the thread resumes
    void *fp;          // frame pointer (rbp)
    uint32_t mxcsr;    // SSE control/status (only control bits matter)
    uint16_t x87_cw;   // x87 control word
    uint16_t pad;
};

static_assert(offsetof(Context, sp) == 0);
static_assert(offsetof(Context, pc) == 8);
static_assert(offsetof(Context, fp) == 16);
static_assert(offsetof(Context, mxcsr) == 24, "stmxcsr/ldmxcsr operand");
static_assert(offsetof(Context, x87_cw) == 28, "fnstcw/fldcw operand");
static_assert(sizeof(Context) == 32);

// Power-on values of the control words: all FP exceptions masked, round to
// nearest, x87 extended precision. New threads start with these, as a new
// process does, rather than inheriting whatever the creator had set.
inline constexpr uint32_t kDefaultMxcsr = 0x1F80;
inline constexpr uint16_t kDefaultX87Cw = 0x037F;
inline constexpr uint32_t kMxcsrFlags = 0x3F; // MXCSR's sticky exception flags (status, not control)

// Runtime code that runs in a thread's own context and computes with
// floating point — the blocking graph's averages, the resource and TAP
// policies — must not leave its exception flags there: they are the
// thread's, kept per thread by the switch. This keeps MXCSR across a scope.
// (Reloading an unchanged value is cheap; a changed one, about 50 ns here:
// docs/tuning.md. Only those opt-in features pay it.)
class KeepFpStatus {
public:
    KeepFpStatus() : mxcsr_(__builtin_ia32_stmxcsr()) {}
    ~KeepFpStatus() { __builtin_ia32_ldmxcsr(mxcsr_); }
    KeepFpStatus(const KeepFpStatus &) = delete;
    KeepFpStatus &operator=(const KeepFpStatus &) = delete;

private:
    unsigned mxcsr_;
};

} // namespace weft::detail

#define WEFT_ARCH_CONTEXT_INTERNAL
#include "arch/x86_64/switch_sysv.hpp"
#undef WEFT_ARCH_CONTEXT_INTERNAL

namespace weft::detail {

// Prepare a context on the stack that ends at stack_hi so that switching to
// it calls entry(arg) there. entry must never return.
inline void context_init(Context *ctx, void *stack_hi, void (*entry)(void *), void *arg) {
    context_init_frame(ctx, stack_hi, entry, arg);
}

// AddressSanitizer must be told about every stack switch (fiber API), or it
// reports false stack-buffer overflows and loses track of fake stacks.
// ThreadSanitizer keeps a context per fiber (TsanFiber, in the TCB): it is
// told which one runs next, and a switch orders everything before it with
// everything after (a thread that moves to another vproc takes its history
// with it). In a build without either these compile to nothing.
struct FiberSwitch {
#if WEFT_ASAN
    void *fake_stack = nullptr;
    void start(const void *to_lo, size_t to_size, bool from_dying, void *) {
        __sanitizer_start_switch_fiber(from_dying ? nullptr : &fake_stack, to_lo, to_size);
    }
    void finish() { __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr); }
#elif WEFT_TSAN
    void start(const void *, size_t, bool, void *to_fiber) { __tsan_switch_to_fiber(to_fiber, 0); }
    void finish() {}
#else
    void start(const void *, size_t, bool, void *) {}
    void finish() {}
#endif
};

// A thread's ThreadSanitizer context: made with the thread (or, for a
// vproc's scheduler context, taken from its kernel thread), destroyed once
// the thread is off its stack for good. Empty without TSan.
struct TsanFiber {
#if WEFT_TSAN
    void *fiber = nullptr;
    void make() { fiber = __tsan_create_fiber(0); }
    void adopt_current() { fiber = __tsan_get_current_fiber(); }
    void destroy() {
        if (fiber) __tsan_destroy_fiber(fiber);
        fiber = nullptr;
    }
    void *get() const { return fiber; }
#else
    void make() {}
    void adopt_current() {}
    void destroy() {}
    void *get() const { return nullptr; }
#endif
};

// A reused stack still carries the shadow poison of the previous thread's
// frames: clear it before a new thread runs there.
inline void sanitizer_fresh_stack(void *lo, size_t size) {
#if WEFT_ASAN
    __asan_unpoison_memory_region(lo, size);
#else
    (void)lo;
    (void)size;
#endif
}

// Stack memory about to be unmapped keeps the shadow poison of the frames
// last on it, and the kernel hands the addresses to the next mmap (an
// io_uring ring, a heap arena), where ASan would then report its reads as
// stack-buffer overflows: clear it first.
inline void sanitizer_unmapping_stack(void *lo, size_t size) { sanitizer_fresh_stack(lo, size); }

} // namespace weft::detail
