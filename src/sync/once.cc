// Once: the first caller runs fn; callers meanwhile park until it is done.
#include "sync/sync.hpp"

using namespace weft::detail;

extern "C" int weft_once(weft_once_t *po, void (*fn)(void)) {
    if (!po || !fn) return EINVAL;
    OnceImpl *o = impl(po);
    uint32_t seen = o->state.load(std::memory_order_acquire);
    if (seen == OnceImpl::kDone) return 0;
    if (seen > OnceImpl::kDone) return EINVAL; // not WEFT_ONCE_INIT
    Vproc *vp = tls_vproc;
    const bool smp = smp_of(vp);
    o->lock.lock(smp);
    uint32_t st = o->state.load(std::memory_order_relaxed);
    if (st == OnceImpl::kNew) {
        o->state.store(OnceImpl::kRunning, std::memory_order_relaxed);
        o->lock.unlock(smp);
        fn();
        WakeList woken;
        o->lock.lock(smp);
        o->state.store(OnceImpl::kDone, std::memory_order_release);
        while (Tcb *t = take_first(o->q, smp)) woken.add(t);
        o->lock.unlock(smp);
        woken.make_ready_all(0);
        return 0;
    }
    if (st == OnceImpl::kDone) {
        o->lock.unlock(smp);
        return 0;
    }
    if (!vp) {
        o->lock.unlock(smp);
        return EPERM;
    }
    enqueue_self(vp, o->q, 0);
    o->lock.unlock(smp);
    park(vp, WEFT_PARK_ONCE, WEFT_SITE(), 0, &o->lock);
    return 0;
}
