// Machine context of a user thread: the saved stack pointer, and the frame
// that src/arch/x86_64/switch_sysv_elf.S pushes and pops. This header is the
// only place that knows that frame's layout; the static_asserts below pin it
// to the offsets the assembly uses.
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

namespace weft::detail {

struct Context {
    void *sp; // stack pointer saved by weft_ctx_switch; points at a SwitchFrame
};

// The frame weft_ctx_switch leaves at Context::sp, lowest address first.
struct SwitchFrame {
    uint32_t mxcsr;    // SSE control/status (only control bits matter)
    uint16_t x87_cw;   // x87 control word
    uint16_t pad;      // keeps the integer registers 8-byte aligned
    uint64_t r15, r14, r13, r12, rbx, rbp;
    void *ret;         // where `ret` continues: caller of the switch, or the trampoline
};

static_assert(offsetof(Context, sp) == 0, "asm stores rsp at (%rdi)");
static_assert(offsetof(SwitchFrame, mxcsr) == 0, "stmxcsr (%rsp)");
static_assert(offsetof(SwitchFrame, x87_cw) == 4, "fnstcw 4(%rsp)");
static_assert(offsetof(SwitchFrame, r15) == 8, "first popq after addq $8");
static_assert(offsetof(SwitchFrame, r12) == 32, "trampoline reads the entry from r12");
static_assert(offsetof(SwitchFrame, r13) == 24, "trampoline reads the argument from r13");
static_assert(offsetof(SwitchFrame, rbp) == 48, "last popq");
static_assert(offsetof(SwitchFrame, ret) == 56, "ret pops the return address");
static_assert(sizeof(SwitchFrame) == 64, "7 pushes + 8 bytes of control words");

extern "C" void weft_ctx_switch(Context *from, Context *to);
extern "C" void weft_ctx_trampoline();

// Power-on values of the control words: all FP exceptions masked, round to
// nearest, x87 extended precision. New threads start with these, as a new
// process does, rather than inheriting whatever the creator had set.
inline constexpr uint32_t kDefaultMxcsr = 0x1F80;
inline constexpr uint16_t kDefaultX87Cw = 0x037F;

// Prepare a context on [stack_lo, stack_hi) so that switching to it calls
// entry(arg) on that stack. entry must never return.
inline void context_init(Context *ctx, void *stack_hi, void (*entry)(void *), void *arg) {
    // After `ret` pops SwitchFrame::ret the trampoline runs with
    // rsp = frame + 64; that must be 16-byte aligned before its call.
    // Leave 16 bytes above for a zero "return address" so debuggers stop.
    auto top = reinterpret_cast<uintptr_t>(stack_hi) & ~uintptr_t{15};
    top -= 16;
    *reinterpret_cast<uint64_t *>(top) = 0;
    auto *f = reinterpret_cast<SwitchFrame *>(top - sizeof(SwitchFrame));
    static_assert(sizeof(SwitchFrame) % 16 == 0, "frame + 64 keeps 16-byte alignment");
    f->mxcsr = kDefaultMxcsr;
    f->x87_cw = kDefaultX87Cw;
    f->pad = 0;
    f->r15 = f->r14 = f->rbx = f->rbp = 0;
    f->r12 = reinterpret_cast<uint64_t>(entry);
    f->r13 = reinterpret_cast<uint64_t>(arg);
    f->ret = reinterpret_cast<void *>(&weft_ctx_trampoline);
    ctx->sp = f;
}

// AddressSanitizer must be told about every stack switch (fiber API), or it
// reports false stack-buffer overflows and loses track of fake stacks. In a
// build without ASan these compile to nothing.
struct FiberSwitch {
#if WEFT_ASAN
    void *fake_stack = nullptr;
    void start(const void *to_lo, size_t to_size, bool from_dying) {
        __sanitizer_start_switch_fiber(from_dying ? nullptr : &fake_stack, to_lo, to_size);
    }
    void finish() { __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr); }
#else
    void start(const void *, size_t, bool) {}
    void finish() {}
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

} // namespace weft::detail
