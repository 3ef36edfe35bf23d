// Barrier: the last thread of a round releases the others and is the serial one.
#include "sync/sync.hpp"

using namespace weft::detail;

extern "C" {

int weft_barrier_init(weft_barrier_t *pb, unsigned count) {
    if (!pb || count == 0) return EINVAL;
    *pb = weft_barrier_t{};
    impl(pb)->count = count;
    return 0;
}

int weft_barrier_wait(weft_barrier_t *pb) {
    if (!pb) return EINVAL;
    Vproc *vp = tls_vproc;
    BarrierImpl *b = impl(pb);
    if (b->count == 0) return EINVAL;
    const bool smp = smp_of(vp);
    b->lock.lock(smp);
    if (b->arrived >= b->count) { // not a barrier weft initialised
        b->lock.unlock(smp);
        return EINVAL;
    }
    if (++b->arrived == b->count) {
        b->arrived = 0;
        WakeList woken;
        while (Tcb *t = take_first(b->q, smp)) woken.add(t);
        b->lock.unlock(smp);
        woken.make_ready_all(0);
        return WEFT_BARRIER_SERIAL_THREAD;
    }
    if (!vp) {
        --b->arrived;
        b->lock.unlock(smp);
        return EPERM;
    }
    enqueue_self(vp, b->q, 0);
    b->lock.unlock(smp);
    return park(vp, WEFT_PARK_BARRIER, WEFT_SITE(), 0, &b->lock);
}

int weft_barrier_destroy(weft_barrier_t *pb) {
    if (!pb) return EINVAL;
    BarrierImpl *b = impl(pb);
    const bool smp = smp_of(tls_vproc);
    b->lock.lock(smp);
    bool busy = b->arrived != 0;
    b->lock.unlock(smp);
    return busy ? EBUSY : 0;
}

} // extern "C"
