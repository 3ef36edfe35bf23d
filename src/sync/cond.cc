// Condition variable: a FIFO of waiters. signal wakes the longest waiter.
#include "sync/sync.hpp"

namespace weft::detail {
namespace {

// Inlined into both public entry points: no extra frame, and the deadline
// tests fold away for weft_cond_wait.
template <bool kNested, bool kSmp>
[[gnu::always_inline]] inline int cond_wait_as(weft_cond_t *pc, weft_mutex_t *pm, uint64_t deadline,
                                               const void *site) {
    if (!pc || !pm) return EINVAL;
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM; // outside weft_main nobody holds m in a way we could wait with
    MutexImpl *m = impl(pm);
    const uintptr_t owner = m->owner.load(std::memory_order_relaxed);
    if (MutexImpl::holder(owner) != reinterpret_cast<uintptr_t>(vp->current)) return EPERM;
    if (deadline_passed(deadline)) return ETIMEDOUT; // m is still held, as required
    constexpr bool smp = kSmp; // (the runtime's: the same on every vproc, before and after the switch)
    CondImpl *c = impl(pc);
    c->lock.lock(smp);
    enqueue_self(vp, c->q, deadline); // queued before m is released: no lost signal
    if (deadline) c->timed.enter(smp);
    c->lock.unlock(smp);
    // Release m entirely (a recursive one is restored below). Not nested and
    // nobody to wake: inline, from the word read above (on one vproc nothing
    // else has run since; with several, the CAS fails if it has changed);
    // else the full unlock.
    uint32_t depth = kNested ? m->depth : 0;
    if (kNested || MutexImpl::must_wake(owner) || !release_word(m, owner, smp)) {
        m->depth = 0;
        mutex_unlock(pm);
    }
    int r = park(vp, WEFT_PARK_COND, site, deadline, &c->lock);
    if (deadline) {
        c->timed.leave(smp); // last touch of c
    }
    if (!mutex_take_fast_as<kSmp>(m, vp))
        if (int lr = mutex_lock_until(pm, 0, site)) return lr;
    if (kNested) m->depth = depth;
    return r;
}

// A wait on a recursive mutex held more than once: out of line, so that
// the usual wait carries no depth across its switch. Rare: it takes the
// locked (several-vproc) path on one vproc too, which is correct there.
[[gnu::noinline, gnu::cold]] int cond_wait_nested(weft_cond_t *pc, weft_mutex_t *pm, uint64_t deadline,
                                                  const void *site) {
    return cond_wait_as<true, true>(pc, pm, deadline, site);
}

// One vproc (the runtime's smp, fixed for its life) gets its own copy of
// the wait, with no lock and no CAS in it to test for.
[[gnu::always_inline]] inline int cond_wait(weft_cond_t *pc, weft_mutex_t *pm, uint64_t deadline,
                                            const void *site) {
    if (pc && pm && __builtin_expect(impl(pm)->depth != 0, 0)) return cond_wait_nested(pc, pm, deadline, site);
    Vproc *vp = tls_vproc;
    if (vp && !vp->smp) return cond_wait_as<false, false>(pc, pm, deadline, site);
    return cond_wait_as<false, true>(pc, pm, deadline, site);
}

// Several vprocs (or none: outside weft_main): under the lock, and the
// waiter may live on another vproc. Out of line, so that the one-vproc
// path of weft_cond_signal calls nothing and needs no frame.
[[gnu::noinline]] int cond_signal_locked(CondImpl *c, bool smp) {
    c->lock.lock(smp);
    Tcb *t = take_first(c->q, smp);
    c->lock.unlock(smp);
    if (t) make_ready(t, 0);
    return 0;
}

} // namespace
} // namespace weft::detail

using namespace weft::detail;

extern "C" {

int weft_cond_init(weft_cond_t *c) {
    if (!c) return EINVAL;
    *c = weft_cond_t WEFT_COND_INITIALIZER;
    return 0;
}

WEFT_NO_STACK_CHECK int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m);
WEFT_NO_STACK_CHECK int weft_cond_signal(weft_cond_t *pc);
WEFT_NO_STACK_CHECK int weft_cond_broadcast(weft_cond_t *pc);

int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m) { return cond_wait(c, m, 0, WEFT_SITE()); }

int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, uint64_t deadline_ns) {
    return cond_wait(c, m, user_deadline(deadline_ns), WEFT_SITE());
}

int weft_cond_signal(weft_cond_t *pc) {
    if (!pc) return EINVAL;
    CondImpl *c = impl(pc);
    Vproc *vp = tls_vproc;
    if (__builtin_expect(!vp || vp->smp, 0)) return cond_signal_locked(c, smp_of(vp));
    // One vproc: no lock to take, and the waiter's home is this vproc.
    if (Tcb *t = take_first(c->q, false)) make_ready_here(vp, t, 0);
    return 0;
}

int weft_cond_broadcast(weft_cond_t *pc) {
    if (!pc) return EINVAL;
    CondImpl *c = impl(pc);
    bool smp = smp_of(tls_vproc);
    WakeList woken;
    c->lock.lock(smp);
    while (Tcb *t = take_first(c->q, smp)) woken.add(t);
    c->lock.unlock(smp);
    woken.make_ready_all(0);
    return 0;
}

int weft_cond_destroy(weft_cond_t *pc) {
    if (!pc) return EINVAL;
    CondImpl *c = impl(pc);
    bool smp = smp_of(tls_vproc);
    c->lock.lock(smp);
    bool busy = !c->q.empty();
    c->lock.unlock(smp);
    if (busy) return EBUSY;
    c->timed.drain(); // timed waiters already woken may still be leaving
    return 0;
}

} // extern "C"
