// pthreads on weft threads: create/join/detach/self/equal/exit, attributes,
// keys, once, spinlocks, sched_yield, names, and the signal calls.
//
// A pthread_t is the address of the weft thread's control block (weft's
// handle is that plus the thread's id, read back from the block, so a stale
// pthread_t is recognised: ESRCH). Threads the program makes from outside
// weft (a constructor before main) are NPTL's, and so are their pthread_t.
#include <cerrno>
#include <csetjmp>
#include <climits>
#include <cstring>
#include <vector>

#include "core/runtime.hpp"
#include "core/tcb.hpp"
#include "posix/real.hpp"
#include "posix/shim.hpp"
#include "weft/weft.h"

using namespace weft::posix;
using weft::detail::Tcb;

namespace {

// pthread_attr_t as the shim keeps it (in the program's 56 bytes).
struct Attr {
    uint32_t magic;
    int detach;
    size_t stack_size; // 0: the default
    size_t guard;
    void *stack_addr;  // accepted, not used: weft allocates every stack
    int scope, inherit, policy, priority;
};
static_assert(sizeof(Attr) <= sizeof(pthread_attr_t));
constexpr uint32_t kAttrMagic = 0x77617474; // "watt"

Attr *attr_of(pthread_attr_t *a) { return reinterpret_cast<Attr *>(a); }
const Attr *attr_of(const pthread_attr_t *a) { return reinterpret_cast<const Attr *>(a); }

// pthreads without a stack size get this (WEFT_STACK_SIZE otherwise): NPTL's
// 8 MiB default would reserve 800 GiB for 100,000 threads.
constexpr size_t kDefaultStack = 256 << 10;
size_t g_default_stack = kDefaultStack;

Tcb *tcb_of(pthread_t t) { return reinterpret_cast<Tcb *>(t); }

// The weft handle of t, or {nullptr, 0} if t is no live weft thread.
weft_thread_t handle_of(pthread_t t) {
    Tcb *tcb = tcb_of(t);
    if (!tcb || tcb->magic != weft::detail::kTcbMagic) return {nullptr, 0};
    return {tcb, tcb->id};
}

// NPTL threads the program made outside weft: their pthread_t go to libc.
std::atomic<int> g_nptl_threads{0};

} // namespace

bool weft::posix::nptl_threads() { return g_nptl_threads.load(std::memory_order_relaxed) != 0; }

extern "C" {
#define API __attribute__((visibility("default")))

API int pthread_create(pthread_t *out, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    if (!on_weft()) {
        count(kOutside);
        g_nptl_threads.fetch_add(1, std::memory_order_relaxed);
        return __wrap_pthread_create(out, attr, fn, arg);
    }
    count(kServed);
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.stack_size = g_default_stack;
    if (attr) {
        const Attr *at = attr_of(attr);
        if (at->magic != kAttrMagic) return EINVAL;
        if (at->stack_size) a.stack_size = at->stack_size;
        a.detached = at->detach == PTHREAD_CREATE_DETACHED;
    }
    // Several vprocs and no work stealing: new threads are dealt round-robin
    // over them (weft's own default keeps a thread on its creator's vproc,
    // which would leave every thread of a pthread program on main's). With
    // stealing, they start there and idle vprocs take them, unpinned.
    auto *rt = weft::detail::tls_vproc->rt;
    auto &vprocs = rt->vprocs;
    if (vprocs.size() > 1 && !rt->stealing) {
        static std::atomic<unsigned> next{0};
        a.home_vproc = static_cast<int>(next.fetch_add(1, std::memory_order_relaxed) % vprocs.size());
    }
    weft_thread_t t;
    int e = weft_thread_create(&t, &a, fn, arg);
    if (e == ENOMEM) e = EAGAIN;
    if (e == 0) *out = reinterpret_cast<pthread_t>(t._tcb);
    return e;
}

API int pthread_join(pthread_t t, void **ret) {
    weft_thread_t h = handle_of(t);
    if (!h._tcb) {
        if (g_nptl_threads.load(std::memory_order_relaxed) || !on_weft()) {
            count(kOutside);
            return __wrap_pthread_join(t, ret); // an NPTL thread (or nothing: libc says so)
        }
        return ESRCH;
    }
    count(kServed);
    // A cancellation point, but the wait is not cut short (the joiner is
    // recorded in the target): a request is acted on before, or after it.
    BlockingCall bc;
    int e = weft_thread_join(h, ret);
    bc.leave(e != 0);
    return e;
}

API int pthread_detach(pthread_t t) {
    weft_thread_t h = handle_of(t);
    if (!h._tcb) {
        if (g_nptl_threads.load(std::memory_order_relaxed)) return __wrap_pthread_detach(t);
        return ESRCH;
    }
    return weft_thread_detach(h);
}

API pthread_t pthread_self(void) {
    if (!on_weft()) return __wrap_pthread_self();
    return reinterpret_cast<pthread_t>(weft::detail::tls_vproc->current);
}

API int pthread_equal(pthread_t a, pthread_t b) { return a == b; }

API void pthread_exit(void *ret) {
    if (!on_weft()) {
        auto real = reinterpret_cast<void (*)(void *)>(libc_symbol("pthread_exit"));
        real(ret);
        __builtin_unreachable();
    }
    Tcb *self = weft::detail::tls_vproc->current;
    self->cancel.fetch_or(kCancelDisabled, std::memory_order_relaxed); // nothing left to cancel
    self->retval = ret;
    cleanup_and_exit(self);
}

API int sched_yield(void) {
    if (!on_weft()) return __wrap_sched_yield();
    weft_yield();
    return 0;
}

// --- attributes ---

API int pthread_attr_init(pthread_attr_t *a) {
    std::memset(a, 0, sizeof *a);
    Attr *at = attr_of(a);
    at->magic = kAttrMagic;
    at->detach = PTHREAD_CREATE_JOINABLE;
    at->guard = 4096;
    at->scope = PTHREAD_SCOPE_SYSTEM;
    at->inherit = PTHREAD_INHERIT_SCHED;
    at->policy = SCHED_OTHER;
    return 0;
}
API int pthread_attr_destroy(pthread_attr_t *a) {
    attr_of(a)->magic = 0;
    return 0;
}
API int pthread_attr_setdetachstate(pthread_attr_t *a, int s) {
    if (s != PTHREAD_CREATE_JOINABLE && s != PTHREAD_CREATE_DETACHED) return EINVAL;
    attr_of(a)->detach = s;
    return 0;
}
API int pthread_attr_getdetachstate(const pthread_attr_t *a, int *s) {
    *s = attr_of(a)->detach;
    return 0;
}
API int pthread_attr_setstacksize(pthread_attr_t *a, size_t s) {
    if (s < static_cast<size_t>(PTHREAD_STACK_MIN)) return EINVAL;
    attr_of(a)->stack_size = s;
    return 0;
}
API int pthread_attr_getstacksize(const pthread_attr_t *a, size_t *s) {
    *s = attr_of(a)->stack_size ? attr_of(a)->stack_size : g_default_stack;
    return 0;
}
API int pthread_attr_setstack(pthread_attr_t *a, void *addr, size_t s) {
    if (s < static_cast<size_t>(PTHREAD_STACK_MIN)) return EINVAL;
    attr_of(a)->stack_addr = addr; // remembered, not used: weft gives the thread a stack of that size
    attr_of(a)->stack_size = s;
    return 0;
}
API int pthread_attr_getstack(const pthread_attr_t *a, void **addr, size_t *s) {
    *addr = attr_of(a)->stack_addr;
    *s = attr_of(a)->stack_size ? attr_of(a)->stack_size : g_default_stack;
    return 0;
}
API int pthread_attr_setguardsize(pthread_attr_t *a, size_t g) {
    attr_of(a)->guard = g;
    return 0;
}
API int pthread_attr_getguardsize(const pthread_attr_t *a, size_t *g) {
    *g = attr_of(a)->guard;
    return 0;
}
API int pthread_attr_setscope(pthread_attr_t *a, int s) {
    if (s != PTHREAD_SCOPE_SYSTEM && s != PTHREAD_SCOPE_PROCESS) return EINVAL;
    attr_of(a)->scope = s;
    return 0;
}
API int pthread_attr_getscope(const pthread_attr_t *a, int *s) {
    *s = attr_of(a)->scope;
    return 0;
}
API int pthread_attr_setinheritsched(pthread_attr_t *a, int s) {
    if (s != PTHREAD_INHERIT_SCHED && s != PTHREAD_EXPLICIT_SCHED) return EINVAL;
    attr_of(a)->inherit = s;
    return 0;
}
API int pthread_attr_getinheritsched(const pthread_attr_t *a, int *s) {
    *s = attr_of(a)->inherit;
    return 0;
}
API int pthread_attr_setschedpolicy(pthread_attr_t *a, int p) {
    if (p != SCHED_OTHER && p != SCHED_FIFO && p != SCHED_RR && p != SCHED_BATCH && p != SCHED_IDLE) return EINVAL;
    attr_of(a)->policy = p;
    return 0;
}
API int pthread_attr_getschedpolicy(const pthread_attr_t *a, int *p) {
    *p = attr_of(a)->policy;
    return 0;
}
API int pthread_attr_setschedparam(pthread_attr_t *a, const struct sched_param *p) {
    attr_of(a)->priority = p->sched_priority;
    return 0;
}
API int pthread_attr_getschedparam(const pthread_attr_t *a, struct sched_param *p) {
    p->sched_priority = attr_of(a)->priority;
    return 0;
}

// The attributes of a running thread: its stack as weft gave it.
API int pthread_getattr_np(pthread_t t, pthread_attr_t *a) {
    weft_thread_t h = handle_of(t);
    if (!h._tcb) {
        if (!on_weft() || g_nptl_threads.load(std::memory_order_relaxed)) return __wrap_pthread_getattr_np(t, a);
        return ESRCH;
    }
    pthread_attr_init(a);
    Tcb *tcb = tcb_of(t);
    Attr *at = attr_of(a);
    at->stack_addr = tcb->stack.lo;
    at->stack_size = tcb->stack.size;
    at->detach = tcb->detached ? PTHREAD_CREATE_DETACHED : PTHREAD_CREATE_JOINABLE;
    return 0;
}

// --- names ---

API int pthread_setname_np(pthread_t t, const char *name) {
    weft_thread_t h = handle_of(t);
    if (!h._tcb) return ESRCH;
    if (std::strlen(name) > 15) return ERANGE; // as Linux: 16 bytes with the NUL
    return weft_thread_setname(h, name);
}
API int pthread_getname_np(pthread_t t, char *buf, size_t len) {
    weft_thread_t h = handle_of(t);
    if (!h._tcb) return ESRCH;
    if (len < 16) return ERANGE;
    return weft_thread_getname(h, buf, len);
}

// --- keys: weft's, whose destructors run at thread exit ---

API int pthread_key_create(pthread_key_t *k, void (*destructor)(void *)) {
    weft_key_t key;
    int e = weft_key_create(&key, destructor);
    if (e == 0) *k = key;
    return e;
}
API int pthread_key_delete(pthread_key_t k) { return weft_key_delete(k); }
API void *pthread_getspecific(pthread_key_t k) { return weft_getspecific(k); }
// glibc declares the value access(none) — it is only stored — and g++ 12
// then warns that passing it on may read something uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
API int pthread_setspecific(pthread_key_t k, const void *v) { return weft_setspecific(k, v); }
#pragma GCC diagnostic pop

// --- once: pthread_once_t is an int; 0 not run, 1 running, 2 done ---

API int pthread_once(pthread_once_t *o, void (*fn)(void)) {
    auto *state = reinterpret_cast<std::atomic<int> *>(o);
    int s = state->load(std::memory_order_acquire);
    if (s == 2) return 0;
    if (!on_weft()) return __wrap_pthread_once(o, fn); // same encoding as glibc's for these states
    for (;;) {
        s = state->load(std::memory_order_acquire);
        if (s == 2) return 0;
        if (s == 0 && state->compare_exchange_strong(s, 1, std::memory_order_acq_rel)) break;
        weft_yield(); // another thread runs fn: let it finish (or be cancelled: then we run it)
    }
    // fn may be cancelled: then, as POSIX says, it is as if it never ran (a
    // cleanup handler of glibc's C protocol puts the state back).
    __pthread_unwind_buf_t buf;
    if (__sigsetjmp(reinterpret_cast<struct __jmp_buf_tag *>(buf.__cancel_jmp_buf), 0)) {
        state->store(0, std::memory_order_release);
        __pthread_unwind_next(&buf);
    }
    __pthread_register_cancel(&buf);
    fn();
    __pthread_unregister_cancel(&buf);
    state->store(2, std::memory_order_release);
    return 0;
}

// --- spinlocks: a cooperative thread must not spin, so a held lock yields ---

API int pthread_spin_init(pthread_spinlock_t *l, int) {
    *l = 0;
    return 0;
}
API int pthread_spin_destroy(pthread_spinlock_t *) { return 0; }
API int pthread_spin_trylock(pthread_spinlock_t *l) {
    auto *a = reinterpret_cast<std::atomic<int> *>(const_cast<int *>(l));
    int free = 0;
    return a->compare_exchange_strong(free, 1, std::memory_order_acquire) ? 0 : EBUSY;
}
API int pthread_spin_lock(pthread_spinlock_t *l) {
    while (pthread_spin_trylock(l) == EBUSY) {
        if (on_weft()) weft_yield();
        else __builtin_ia32_pause();
    }
    return 0;
}
API int pthread_spin_unlock(pthread_spinlock_t *l) {
    reinterpret_cast<std::atomic<int> *>(const_cast<int *>(l))->store(0, std::memory_order_release);
    return 0;
}

// --- signals: a weft thread's mask is its vproc's kernel thread's ---

namespace {
struct MaskChange {
    int how;
    const sigset_t *set;
};
void *change_mask(void *arg) {
    auto *m = static_cast<MaskChange *>(arg);
    __wrap_pthread_sigmask(m->how, m->set, nullptr);
    return nullptr;
}
} // namespace

// A weft thread's mask is its kernel thread's, and weft threads share and
// (with several vprocs) spread over kernel threads: so the mask is the
// process's. A change is made on every vproc's kernel thread — by a small
// thread on each, waited for — so that the usual pattern (block signals in
// main, then sigwait in one thread) holds whichever kernel thread the
// kernel picks to deliver to.
API int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
    if (!on_weft()) return __wrap_pthread_sigmask(how, set, old);
    if (int e = __wrap_pthread_sigmask(how, set, old)) return e;
    auto &vprocs = weft::detail::tls_vproc->rt->vprocs;
    if (!set || vprocs.size() == 1) return 0;
    MaskChange m{how, set};
    std::vector<weft_thread_t> helpers;
    for (auto &vp : vprocs) {
        if (vp.get() == weft::detail::tls_vproc) continue;
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.home_vproc = vp->index;
        a.stack_size = 16 << 10;
        a.name = "sigmask";
        weft_thread_t h;
        if (weft_thread_create(&h, &a, change_mask, &m) == 0) helpers.push_back(h);
    }
    for (weft_thread_t h : helpers) weft_thread_join(h, nullptr);
    return 0;
}

API int pthread_kill(pthread_t t, int sig) {
    weft_thread_t h = handle_of(t);
    if (!h._tcb) {
        if (g_nptl_threads.load(std::memory_order_relaxed) || !on_weft()) return __wrap_pthread_kill(t, sig);
        return ESRCH;
    }
    if (sig == 0) return 0; // it exists
    // Delivered to the kernel thread running the caller: the handler runs on
    // whichever weft thread is current there (docs/posix.md, signals).
    passed_through("pthread_kill");
    if (int e = __wrap_pthread_kill(__wrap_pthread_self(), sig)) return e;
    // And, as on NPTL, the target's blocking call ends with EINTR if a
    // handler ran for it (SA_RESTART: the calls that restart do) — how a
    // program wakes a thread out of accept or epoll_wait (Apache at stop).
    struct sigaction sa;
    sigset_t mask;
    if (sigaction(sig, nullptr, &sa) != 0 || sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) return 0;
    if (__wrap_pthread_sigmask(SIG_BLOCK, nullptr, &mask) == 0 && sigismember(&mask, sig)) return 0; // pending
    Tcb *tcb = tcb_of(t);
    tcb->cancel.fetch_or(sa.sa_flags & SA_RESTART ? kSignalRestart : kSignalled, std::memory_order_acq_rel);
    interrupt_wait(tcb);
    return 0;
}

} // extern "C"

// WEFT_STACK_SIZE, when set, is the default for pthreads too.
__attribute__((constructor)) static void read_default_stack() {
    if (const char *e = getenv("WEFT_STACK_SIZE"); e && *e) g_default_stack = 0; // weft's own default
}
