// Readers-writer lock with one FIFO for both kinds of waiter.
//
// A thread that finds the lock busy, or anyone already queued, waits at the
// tail. Releasing grants from the head: one writer, or every reader up to the
// next queued writer. Readers therefore cannot starve writers and vice versa.
#include "sync/sync.hpp"

namespace weft::detail {
namespace {

// Hand the lock to whoever may have it now (caller holds l->lock, and
// makes `woken` ready after releasing it).
void grant(RwlockImpl *l, bool smp, WakeList &woken) {
    while (Tcb *t = l->q.head) {
        if (l->writer) return;
        bool write = t->wait_data == RwlockImpl::kWrite;
        if (write && l->readers) return;
        l->q.pop_front();
        if (!claim_queued(t, smp)) continue; // its timer won: it is leaving
        woken.add(t);
        if (write) {
            l->writer = t;
            return;
        }
        ++l->readers;
    }
}

int acquire(weft_rwlock_t *pl, bool write, bool try_only, const void *site) {
    if (!pl) return EINVAL;
    Vproc *vp = tls_vproc;
    RwlockImpl *l = impl(pl);
    const bool smp = smp_of(vp);
    // Outside weft_main the kernel thread's tag identifies the writer.
    Tcb *self = reinterpret_cast<Tcb *>(owner_tag(vp));
    l->lock.lock(smp);
    if (l->writer == self) { // try: busy, like any held lock; blocking: would never return
        l->lock.unlock(smp);
        return try_only ? EBUSY : EDEADLK;
    }
    bool free_now = write ? (!l->writer && !l->readers && l->q.empty()) : (!l->writer && l->q.empty());
    if (free_now) {
        if (write) l->writer = self;
        else ++l->readers;
        l->lock.unlock(smp);
        return 0;
    }
    if (try_only || !vp) {
        l->lock.unlock(smp);
        return try_only ? EBUSY : EPERM;
    }
    self->wait_data = write ? RwlockImpl::kWrite : RwlockImpl::kRead;
    enqueue_self(vp, l->q, 0);
    l->lock.unlock(smp);
    return park(vp, WEFT_PARK_RWLOCK, site, 0, &l->lock); // woken holding the lock
}

} // namespace
} // namespace weft::detail

using namespace weft::detail;

extern "C" {

int weft_rwlock_init(weft_rwlock_t *l) {
    if (!l) return EINVAL;
    *l = weft_rwlock_t WEFT_RWLOCK_INITIALIZER;
    return 0;
}
int weft_rwlock_rdlock(weft_rwlock_t *l) { return acquire(l, false, false, WEFT_SITE()); }
int weft_rwlock_tryrdlock(weft_rwlock_t *l) { return acquire(l, false, true, WEFT_SITE()); }
int weft_rwlock_wrlock(weft_rwlock_t *l) { return acquire(l, true, false, WEFT_SITE()); }
int weft_rwlock_trywrlock(weft_rwlock_t *l) { return acquire(l, true, true, WEFT_SITE()); }

int weft_rwlock_unlock(weft_rwlock_t *pl) {
    if (!pl) return EINVAL;
    Vproc *vp = tls_vproc;
    RwlockImpl *l = impl(pl);
    const bool smp = smp_of(vp);
    Tcb *self = vp ? vp->current : reinterpret_cast<Tcb *>(owner_tag(nullptr));
    l->lock.lock(smp);
    int r = 0;
    if (l->writer) {
        if (l->writer == self) l->writer = nullptr;
        else r = EPERM;
    } else if (l->readers) {
        --l->readers; // readers are not tracked individually
    } else {
        r = EPERM;
    }
    WakeList woken;
    if (!r) grant(l, smp, woken);
    l->lock.unlock(smp);
    woken.make_ready_all(0);
    return r;
}

int weft_rwlock_destroy(weft_rwlock_t *pl) {
    if (!pl) return EINVAL;
    RwlockImpl *l = impl(pl);
    const bool smp = smp_of(tls_vproc);
    l->lock.lock(smp);
    bool busy = l->writer || l->readers || !l->q.empty();
    l->lock.unlock(smp);
    return busy ? EBUSY : 0;
}

} // extern "C"
