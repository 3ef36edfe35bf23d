// Stack-overflow reports.
//
// A thread that runs into its guard page faults; the SIGSEGV handler runs on
// the vproc's alternate signal stack (the faulting stack has no room left),
// recognises the fault as an overflow of the current thread — the fault
// address is in its red page, or its stack pointer is below its stack — and
// aborts with "stack overflow in weft thread <id> <name>". Any other fault is
// passed to the previous handler (e.g. AddressSanitizer's) or to the
// default action.
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <mutex>

#include "core/runtime.hpp"

namespace weft::detail {

namespace {

constexpr size_t kAltStackBytes = 64 * 1024; // ASan's handler needs more than SIGSTKSZ
struct sigaction g_previous_segv;
thread_local stack_t t_previous_altstack; // restored when the vproc ends

bool is_overflow(const Tcb *t, const char *addr, const ucontext_t *uc) {
    if (!t->stack.lo) return false;
    if (addr >= t->stack.red_page() && addr < t->stack.lo) return true;
    // A frame larger than the red page jumps past it; the stack pointer
    // still tells: below the stack's lowest byte (by less than any stack could
    // be) means this thread ran off its stack.
    auto sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
    auto lo = reinterpret_cast<uintptr_t>(t->stack.lo);
    return sp < lo && lo - sp <= kMaxStackSize;
}

void on_segv(int sig, siginfo_t *si, void *ctx) {
    Vproc *vp = tls_vproc;
    if (vp && vp->current && vp->current != &vp->loop &&
        is_overflow(vp->current, static_cast<const char *>(si->si_addr), static_cast<ucontext_t *>(ctx)))
        fatal_thread(vp->current, "stack overflow");
    if ((g_previous_segv.sa_flags & SA_SIGINFO) && g_previous_segv.sa_sigaction) {
        g_previous_segv.sa_sigaction(sig, si, ctx);
        return;
    }
    if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
        g_previous_segv.sa_handler(sig);
        return;
    }
    // Default action: restore it and return; the faulting instruction runs
    // again and the process dies of SIGSEGV as it would have without weft.
    signal(sig, SIG_DFL);
}

} // namespace

void install_signal_handlers() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa{};
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_previous_segv);
    });
}

// The signal stack has a guard page of its own: a handler that overflows it
// faults instead of writing into whatever lies below.
void vproc_signal_stack_init(Vproc *vp) {
    void *p = mmap(nullptr, kPageSize + kAltStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return; // overflows then die of plain SIGSEGV, unreported
    mprotect(p, kPageSize, PROT_NONE);
    stack_t ss{};
    ss.ss_sp = static_cast<char *>(p) + kPageSize;
    ss.ss_size = kAltStackBytes;
    if (sigaltstack(&ss, &t_previous_altstack) != 0) {
        munmap(p, kPageSize + kAltStackBytes);
        return;
    }
    vp->altstack = p;
}

void vproc_signal_stack_fini(Vproc *vp) {
    if (!vp->altstack) return;
    if (t_previous_altstack.ss_flags & SS_DISABLE) {
        stack_t ss{};
        ss.ss_flags = SS_DISABLE;
        sigaltstack(&ss, nullptr);
    } else {
        sigaltstack(&t_previous_altstack, nullptr);
    }
    munmap(vp->altstack, kPageSize + kAltStackBytes);
    vp->altstack = nullptr;
}

} // namespace weft::detail
