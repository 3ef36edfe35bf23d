// Counting semaphore. post hands its unit straight to the first waiter.
#include "sync/sync.hpp"

namespace weft::detail {
namespace {

int sem_wait_until(weft_sem_t *ps, uint64_t deadline, bool try_only, const void *site) {
    if (!ps) return EINVAL;
    Vproc *vp = tls_vproc;
    SemImpl *s = impl(ps);
    const bool smp = smp_of(vp);
    s->lock.lock(smp);
    if (s->value > 0 && s->value <= WEFT_SEM_VALUE_MAX) {
        --s->value;
        s->lock.unlock(smp);
        return 0;
    }
    if (s->value > WEFT_SEM_VALUE_MAX) { // not a semaphore weft initialised
        s->lock.unlock(smp);
        return EINVAL;
    }
    if (try_only || !vp || deadline_passed(deadline)) {
        s->lock.unlock(smp);
        return try_only ? EAGAIN : deadline_passed(deadline) ? ETIMEDOUT : EPERM;
    }
    enqueue_self(vp, s->q, deadline);
    if (deadline) s->timed.enter(smp);
    s->lock.unlock(smp);
    int r = park(vp, WEFT_PARK_SEM, site, deadline, &s->lock);
    if (deadline) {
        s->timed.leave(smp); // last touch of s
    }
    return r;
}

} // namespace
} // namespace weft::detail

using namespace weft::detail;

extern "C" {

int weft_sem_init(weft_sem_t *s, unsigned value) {
    if (!s || value > WEFT_SEM_VALUE_MAX) return EINVAL;
    *s = weft_sem_t WEFT_SEM_INITIALIZER(0);
    impl(s)->value = value;
    return 0;
}
WEFT_NO_STACK_CHECK int weft_sem_wait(weft_sem_t *s);
WEFT_NO_STACK_CHECK int weft_sem_post(weft_sem_t *ps);

int weft_sem_wait(weft_sem_t *s) { return sem_wait_until(s, 0, false, WEFT_SITE()); }
int weft_sem_trywait(weft_sem_t *s) { return sem_wait_until(s, 0, true, WEFT_SITE()); }
int weft_sem_timedwait(weft_sem_t *s, uint64_t deadline_ns) {
    return sem_wait_until(s, user_deadline(deadline_ns), false, WEFT_SITE());
}

int weft_sem_post(weft_sem_t *ps) {
    if (!ps) return EINVAL;
    SemImpl *s = impl(ps);
    const bool smp = smp_of(tls_vproc);
    int r = 0;
    s->lock.lock(smp);
    if (s->value > WEFT_SEM_VALUE_MAX) { // garbage, not a semaphore: leave its queue alone
        s->lock.unlock(smp);
        return EINVAL;
    }
    Tcb *t = take_first(s->q, smp); // the unit goes straight to it
    if (!t) {
        if (s->value == WEFT_SEM_VALUE_MAX) r = EOVERFLOW;
        else ++s->value;
    }
    s->lock.unlock(smp);
    if (t) make_ready(t, 0);
    return r;
}

int weft_sem_getvalue(weft_sem_t *ps, int *value) {
    if (!ps || !value) return EINVAL;
    SemImpl *s = impl(ps);
    const bool smp = smp_of(tls_vproc);
    s->lock.lock(smp);
    uint32_t v = s->value;
    s->lock.unlock(smp);
    if (v > WEFT_SEM_VALUE_MAX) return EINVAL;
    *value = static_cast<int>(v);
    return 0;
}

int weft_sem_destroy(weft_sem_t *ps) {
    if (!ps) return EINVAL;
    SemImpl *s = impl(ps);
    const bool smp = smp_of(tls_vproc);
    s->lock.lock(smp);
    bool busy = !s->q.empty();
    s->lock.unlock(smp);
    if (busy) return EBUSY;
    s->timed.drain(); // timed waiters already woken may still be leaving
    return 0;
}

} // extern "C"
