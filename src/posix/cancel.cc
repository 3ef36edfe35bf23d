// Deferred cancellation and cleanup handlers on weft threads.
//
// pthread_cancel marks the target (Tcb::cancel) and, if it is parked at a
// cancellation point, ends that wait the way its deadline would
// (expire_wait, core/park.hpp): the blocking call returns early, and its
// wrapper acts on the request on the way out (cancel_leave). Waits at
// cancellation points are timed waits for this — kNoDeadline when the
// program gave none, which arms no timer.
//
// Cleanup handlers are glibc's C form of pthread_cleanup_push: the macro
// saves a jump buffer with sigsetjmp and registers it with
// __pthread_register_cancel; pop unregisters it. The shim keeps the
// registered buffers as a list per thread (Tcb::cleanup, linked through the
// buffer's spare words). Acting on a cancel, or pthread_exit, jumps into the
// innermost buffer: the macro's code there runs the handler and calls
// __pthread_unwind_next, which jumps to the next one, and after the last the
// thread exits with PTHREAD_CANCELED (or pthread_exit's value). Key
// destructors run after that, in weft_thread_exit, as POSIX orders them.
//
// What is not done (docs/posix.md): C++ destructors and
// __attribute__((cleanup)) on a cancelled or exiting thread (glibc runs them
// by a forced unwind); asynchronous cancellation, which acts like deferred;
// cutting short a join, an offloaded call (getaddrinfo) or a mutex wait —
// the request stays pending and is acted on at the next cancellation point.
#include <csetjmp>
#include <memory>
#include <pthread.h>

#include "core/park.hpp"
#include "core/tcb.hpp"
#include "posix/real.hpp"
#include "posix/shim.hpp"
#include "weft/weft.h"

using namespace weft::posix;
using weft::detail::Tcb;

namespace weft::posix {

[[noreturn]] void cancel_act(Tcb *self) {
    self->cancel.fetch_or(kCancelActing | kCancelDisabled, std::memory_order_acq_rel);
    self->interruptible = false;
    self->retval = PTHREAD_CANCELED;
    cleanup_and_exit(self);
}

// Run the innermost cleanup handler still registered — it comes back
// through __pthread_unwind_next — or, with none left, end the thread with
// the value in self->retval (weft_thread_exit sets it there anyway).
[[noreturn]] void cleanup_and_exit(Tcb *self) {
    if (auto *buf = static_cast<__pthread_unwind_buf_t *>(self->cleanup)) {
        self->cleanup = buf->__pad[0];
        longjmp(reinterpret_cast<struct __jmp_buf_tag *>(buf->__cancel_jmp_buf), 1);
    }
    weft_thread_exit(self->retval);
    __builtin_unreachable();
}

namespace {

// On t's home vproc, where t is not running: end its wait if a reason is
// still there — a cancel it will act on, or a signal for the call it is in
// (a reason gone stale meanwhile — a signal before its current call, a
// cancel it has since disabled — must not cut anything short).
void expire_if_asked(Tcb *t) {
    uint8_t c = t->cancel.load(std::memory_order_acquire);
    if (cancel_due(c) || (c & kSignalBits))
        weft::detail::expire_wait(t);
}

struct Target {
    Tcb *t;
    uint64_t id;
};

void *expire_on_home(void *arg) {
    std::unique_ptr<Target> to(static_cast<Target *>(arg));
    Tcb *t = to->t;
    // The thread may have ended (and its stack gone to a new one) since.
    if (t->magic == weft::detail::kTcbMagic && t->id == to->id && t->vp == weft::detail::tls_vproc) expire_if_asked(t);
    return nullptr;
}

} // namespace

// On t's home vproc: here if that is ours, else by a small thread made
// there. The request (Tcb::cancel) is set before: a thread that has not
// parked yet sees it as its blocking call begins or ends.
void interrupt_wait(Tcb *t) {
    weft::detail::Vproc *vp = weft::detail::tls_vproc;
    if (on_weft() && vp == t->vp) {
        expire_if_asked(t);
        return;
    }
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.detached = 1;
    a.home_vproc = t->vp->index;
    a.stack_size = 16 << 10;
    a.name = "interrupt";
    weft_thread_t h;
    auto *to = new Target{t, t->id};
    if (weft_thread_create(&h, &a, expire_on_home, to) != 0) {
        delete to;
        passed_through("interrupting a waiting thread from outside weft (acted on when its call returns)");
    }
}

} // namespace weft::posix

namespace {

Tcb *self() { return weft::detail::tls_vproc->current; }

template <class F> F libc(const char *name) { return reinterpret_cast<F>(libc_symbol(name)); }

} // namespace

extern "C" {
#define API __attribute__((visibility("default")))

API int pthread_cancel(pthread_t th) {
    Tcb *t = reinterpret_cast<Tcb *>(th);
    if (!t || t->magic != weft::detail::kTcbMagic) {
        if (!on_weft() || nptl_threads()) return libc<int (*)(pthread_t)>("pthread_cancel")(th);
        return ESRCH;
    }
    count(kServed);
    uint8_t was = t->cancel.fetch_or(kCancelPending, std::memory_order_acq_rel);
    if (was & (kCancelPending | kCancelActing | kCancelDisabled)) return 0; // acted on later, or already
    interrupt_wait(t);
    return 0;
}

API int pthread_setcancelstate(int state, int *old) {
    if (!on_weft()) return libc<int (*)(int, int *)>("pthread_setcancelstate")(state, old);
    if (state != PTHREAD_CANCEL_ENABLE && state != PTHREAD_CANCEL_DISABLE) return EINVAL;
    Tcb *t = self();
    uint8_t was = state == PTHREAD_CANCEL_DISABLE ? t->cancel.fetch_or(kCancelDisabled, std::memory_order_acq_rel)
                                                  : t->cancel.fetch_and(static_cast<uint8_t>(~kCancelDisabled),
                                                                        std::memory_order_acq_rel);
    if (was & kCancelActing) t->cancel.fetch_or(kCancelDisabled, std::memory_order_relaxed); // stays off
    if (old) *old = was & kCancelDisabled ? PTHREAD_CANCEL_DISABLE : PTHREAD_CANCEL_ENABLE;
    // Asynchronous type: a pending request is acted on as soon as allowed.
    if (state == PTHREAD_CANCEL_ENABLE && (was & kCancelAsync) && (was & kCancelPending) && !(was & kCancelActing))
        cancel_act(t);
    return 0;
}

API int pthread_setcanceltype(int type, int *old) {
    if (!on_weft()) return libc<int (*)(int, int *)>("pthread_setcanceltype")(type, old);
    if (type != PTHREAD_CANCEL_DEFERRED && type != PTHREAD_CANCEL_ASYNCHRONOUS) return EINVAL;
    Tcb *t = self();
    uint8_t was = type == PTHREAD_CANCEL_ASYNCHRONOUS
                      ? t->cancel.fetch_or(kCancelAsync, std::memory_order_acq_rel)
                      : t->cancel.fetch_and(static_cast<uint8_t>(~kCancelAsync), std::memory_order_acq_rel);
    if (old) *old = was & kCancelAsync ? PTHREAD_CANCEL_ASYNCHRONOUS : PTHREAD_CANCEL_DEFERRED;
    if (type == PTHREAD_CANCEL_ASYNCHRONOUS && (was & kCancelPending) && !(was & (kCancelDisabled | kCancelActing)))
        cancel_act(t);
    return 0;
}

API void pthread_testcancel(void) {
    if (!on_weft()) return libc<void (*)()>("pthread_testcancel")();
    Tcb *t = self();
    if (cancel_due(t->cancel.load(std::memory_order_acquire))) cancel_act(t);
}

// --- the cleanup-handler protocol of glibc's pthread.h (C, no exceptions) ---

API void __pthread_register_cancel(__pthread_unwind_buf_t *buf) {
    if (!on_weft()) return libc<void (*)(__pthread_unwind_buf_t *)>("__pthread_register_cancel")(buf);
    Tcb *t = self();
    buf->__pad[0] = t->cleanup;
    t->cleanup = buf;
}

API void __pthread_unregister_cancel(__pthread_unwind_buf_t *buf) {
    if (!on_weft()) return libc<void (*)(__pthread_unwind_buf_t *)>("__pthread_unregister_cancel")(buf);
    self()->cleanup = buf->__pad[0];
}

// The _defer_np forms also make the type deferred while the handler is
// registered, and restore it at pop.
API void __pthread_register_cancel_defer(__pthread_unwind_buf_t *buf) {
    if (!on_weft()) return libc<void (*)(__pthread_unwind_buf_t *)>("__pthread_register_cancel_defer")(buf);
    int old;
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
    buf->__pad[1] = reinterpret_cast<void *>(static_cast<intptr_t>(old));
    __pthread_register_cancel(buf);
}

API void __pthread_unregister_cancel_restore(__pthread_unwind_buf_t *buf) {
    if (!on_weft()) return libc<void (*)(__pthread_unwind_buf_t *)>("__pthread_unregister_cancel_restore")(buf);
    __pthread_unregister_cancel(buf);
    pthread_setcanceltype(static_cast<int>(reinterpret_cast<intptr_t>(buf->__pad[1])), nullptr);
}

API void __pthread_unwind_next(__pthread_unwind_buf_t *buf) {
    if (!on_weft()) {
        libc<void (*)(__pthread_unwind_buf_t *)>("__pthread_unwind_next")(buf);
        __builtin_unreachable();
    }
    cleanup_and_exit(self()); // buf was taken off the list before the jump into it
}

} // extern "C"
