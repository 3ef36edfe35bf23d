// Mutex: one word of ownership with a fast path, a FIFO queue for the rest.
//
// Fast paths: lock of a free mutex and unlock with nobody waiting touch only
// `owner` — a plain load and store on one vproc, one CAS with several. A
// contended lock sets the kWaiters bit under the Spin and queues; unlock with
// that bit set releases the mutex and wakes the first waiter to take it
// (one woken waiter at a time), or hands it over to a waiter that has waited
// too long (see mutex_unlock, and docs/api.md "Synchronisation").
#include "core/runtime.hpp"
#include "sched/tap.hpp"
#include "sync/sync.hpp"

namespace weft::detail {

uintptr_t outside_owner_tag() {
    // Its address identifies the kernel thread. Aligned, so that bit 0 (a
    // mutex's kWaiters) is free, and marked with bit 1, which no TCB (64-byte
    // aligned) has: TAP locking tells a weft owner from a plain kernel thread.
    alignas(8) static thread_local char tag;
    return reinterpret_cast<uintptr_t>(&tag) | MutexImpl::kOutside;
}

namespace {

bool valid_kind(uint8_t k) { return k <= WEFT_MUTEX_RECURSIVE; }

// A woken waiter that has kept finding the mutex taken for this long asks
// for a hand-off (Go's mutex turns to hand-offs after 1 ms of waiting too).
constexpr uint64_t kMutexStarveNs = 1'000'000;

// Take the mutex if nobody owns it, keeping its flags: a mutex may be free
// with waiters queued (an unlock woke the first of them to retry).
bool try_take(MutexImpl *m, uintptr_t me, bool smp) {
    uintptr_t cur = m->owner.load(std::memory_order_relaxed);
    if (MutexImpl::holder(cur)) return false;
    if (!smp) {
        m->owner.store(me | cur, std::memory_order_relaxed);
        return true;
    }
    return m->owner.compare_exchange_strong(cur, me | cur, std::memory_order_acquire, std::memory_order_relaxed);
}

// The mutex is held by someone else, or by us (relock).
int lock_slow(MutexImpl *m, Vproc *&vp, uintptr_t me, uint64_t deadline, const void *site) {
    if (MutexImpl::holder(m->owner.load(std::memory_order_relaxed)) == me) {
        if (m->kind == WEFT_MUTEX_RECURSIVE) {
            ++m->depth;
            return 0;
        }
        if (m->kind == WEFT_MUTEX_ERRORCHECK) return EDEADLK;
        if (!vp) return EDEADLK;
        fatal_thread(vp->current, "deadlock: relock of a normal mutex held by the thread");
    }
    if (!vp) return EPERM; // would block, and a plain kernel thread cannot park
    const bool smp = vp->smp;
    bool queued = false;  // parked at least once, and woken to retry
    uint64_t lost_at = 0; // when we first lost a retry (no clock read until then)
    m->lock.lock(smp);
    for (;;) {
        uintptr_t cur = m->owner.load(std::memory_order_relaxed);
        if (!MutexImpl::holder(cur)) { // free: released meanwhile, or woken to retry
            if (try_take(m, me, smp)) {
                m->lock.unlock(smp);
                return 0;
            }
            continue;
        }
        if (deadline_passed(deadline)) {
            m->lock.unlock(smp);
            return ETIMEDOUT;
        }
        // Announce a waiter so the owner's unlock takes the slow path. A CAS,
        // because the owner's fast-path unlock does not take the Spin.
        if (!(cur & MutexImpl::kWaiters)) {
            if (smp ? !m->owner.compare_exchange_strong(cur, cur | MutexImpl::kWaiters, std::memory_order_relaxed)
                    : (m->owner.store(cur | MutexImpl::kWaiters, std::memory_order_relaxed), false))
                continue;
            // TAP locking: the owner is now in an appointment others wait for.
            if (__builtin_expect(vp->tap != nullptr, 0) && !(cur & MutexImpl::kOutside))
                tap_lock_contended(vp, reinterpret_cast<Tcb *>(MutexImpl::holder(cur)));
        }
        if (__builtin_expect(vp->tap != nullptr, 0)) {
            tap_lock_enqueue(vp, m->q, deadline);
        } else if (!queued) {
            queued = true;
            enqueue_self(vp, m->q, deadline);
        } else {
            // Woken, and somebody took it first: back at the head, and if we
            // have been losing for too long, the next unlock hands it to us.
            enqueue_self_front(vp, m->q, deadline);
            uint64_t now = now_ns();
            if (!lost_at) lost_at = now;
            else if (now - lost_at >= kMutexStarveNs) m->handoff = 1;
        }
        if (deadline) m->timed.enter(smp);
        m->lock.unlock(smp);
        // 0: woken by an unlock, which either made us the owner (a hand-off)
        // or left the mutex free for us to take. ETIMEDOUT: our timer first.
        int r = park(vp, WEFT_PARK_MUTEX, site, deadline, &m->lock);
        // Woken to retry: m is still busy for weft_mutex_destroy (kWoken is
        // set until we clear it), so we may go on touching it. Cleared with
        // an atomic and, under the Spin: the holder may be releasing it
        // meanwhile with a CAS (release_fast).
        if (r == 0 && MutexImpl::holder(m->owner.load(std::memory_order_acquire)) != me) {
            m->lock.lock(smp);
            if (deadline) m->timed.leave(smp);
            if (smp) m->owner.fetch_and(~MutexImpl::kWoken, std::memory_order_relaxed);
            else m->owner.store(m->owner.load(std::memory_order_relaxed) & ~MutexImpl::kWoken, std::memory_order_relaxed);
            continue;
        }
        if (deadline) {
            m->timed.leave(smp); // last touch of m
        }
        return r;
    }
}

} // namespace

int mutex_lock_until(weft_mutex_t *pm, uint64_t deadline, const void *site) {
    if (!pm) return EINVAL;
    MutexImpl *m = impl(pm);
    if (!valid_kind(m->kind)) return EINVAL;
    Vproc *vp = tls_vproc;
    uintptr_t me = owner_tag(vp);
    if (try_take(m, me, smp_of(vp))) return 0;
    return lock_slow(m, vp, me, deadline, site);
}

int mutex_unlock(weft_mutex_t *pm) {
    if (!pm) return EINVAL;
    MutexImpl *m = impl(pm);
    if (!valid_kind(m->kind)) return EINVAL;
    Vproc *vp = tls_vproc;
    const bool smp = smp_of(vp);
    uintptr_t me = owner_tag(vp);
    uintptr_t cur = m->owner.load(std::memory_order_relaxed);
    if (MutexImpl::holder(cur) != me) return EPERM;
    if (m->depth) { // recursive: only the outermost unlock releases
        --m->depth;
        return 0;
    }
    // Nobody waits, or one is already woken: release, keeping the flags. If
    // a waiter announced itself, or the woken one retried, meanwhile: below.
    if (!MutexImpl::must_wake(cur) && release_word(m, cur, smp)) return 0;
    // Hand over to the first waiter, or (the default) release and wake it
    // to take the mutex if it is still free when it runs. Handing over
    // makes every later lock queue behind a thread that is not running
    // yet: once a holder on another vproc has made threads queue, each
    // lock costs a switch for as long as anyone waits (a convoy). Waking
    // lets the running thread go on; a woken waiter that loses goes back
    // to the head, and one that has waited kMutexStarveNs is handed the
    // mutex by the next unlock. TAP always hands over: the next holder's
    // appointment begins at the unlock.
    const bool tap = vp && __builtin_expect(vp->tap != nullptr, 0);
    m->lock.lock(smp);
    // Under the Spin the flags hold still: waiters set kWaiters, and the
    // woken one clears kWoken, only under it; nobody else takes a held mutex.
    uintptr_t woken = m->owner.load(std::memory_order_relaxed) & MutexImpl::kWoken;
    const bool hand_over = tap || m->handoff;
    Tcb *w = hand_over || !woken ? take_first(m->q, smp) : nullptr;
    bool more = !m->q.empty();
    uintptr_t next = more ? MutexImpl::kWaiters : 0;
    if (w && hand_over) {
        m->handoff = 0;
        next |= reinterpret_cast<uintptr_t>(w);
    } else if (w) {
        woken = MutexImpl::kWoken;
    }
    m->owner.store(next | woken, std::memory_order_release);
    m->lock.unlock(smp);
    // TAP locking: our appointment with the mutex ends; the next holder's
    // begins, one others still wait for if the queue is not empty.
    if (tap && (cur & MutexImpl::kWaiters)) tap_lock_handoff(vp, vp->current, more ? w : nullptr);
    if (w) make_ready(w, 0); // after unlocking: w may free the mutex at once
    return 0;
}

} // namespace weft::detail

using namespace weft::detail;

extern "C" {

int weft_mutex_init(weft_mutex_t *pm, int kind) {
    if (!pm || kind < WEFT_MUTEX_NORMAL || kind > WEFT_MUTEX_RECURSIVE) return EINVAL;
    *pm = weft_mutex_t WEFT_MUTEX_INITIALIZER;
    impl(pm)->kind = static_cast<uint8_t>(kind);
    return 0;
}

// The uncontended single-vproc case inline: a load and a store, no call.
WEFT_NO_STACK_CHECK int weft_mutex_lock(weft_mutex_t *pm);
WEFT_NO_STACK_CHECK int weft_mutex_unlock(weft_mutex_t *pm);

int weft_mutex_lock(weft_mutex_t *pm) {
    if (__builtin_expect(mutex_lock_fast(pm, tls_vproc), 1)) return 0;
    return mutex_lock_until(pm, 0, WEFT_SITE());
}

int weft_mutex_timedlock(weft_mutex_t *m, uint64_t deadline_ns) {
    return mutex_lock_until(m, user_deadline(deadline_ns), WEFT_SITE());
}

int weft_mutex_trylock(weft_mutex_t *pm) {
    if (!pm) return EINVAL;
    MutexImpl *m = impl(pm);
    if (!valid_kind(m->kind)) return EINVAL;
    Vproc *vp = tls_vproc;
    uintptr_t me = owner_tag(vp);
    if (try_take(m, me, smp_of(vp))) return 0;
    if (m->kind == WEFT_MUTEX_RECURSIVE && MutexImpl::holder(m->owner.load(std::memory_order_relaxed)) == me) {
        ++m->depth;
        return 0;
    }
    return EBUSY;
}

int weft_mutex_unlock(weft_mutex_t *pm) {
    if (__builtin_expect(mutex_unlock_fast(pm, tls_vproc), 1)) return 0;
    return mutex_unlock(pm);
}

int weft_mutex_destroy(weft_mutex_t *pm) {
    if (!pm) return EINVAL;
    MutexImpl *m = impl(pm);
    if (!valid_kind(m->kind)) return EINVAL;
    // Under the lock, so a waker still inside unlock() has finished with it.
    const bool smp = smp_of(tls_vproc);
    m->lock.lock(smp);
    // (A woken waiter that has not yet retried is still inside its lock.)
    uintptr_t owner = m->owner.load(std::memory_order_acquire);
    bool busy = MutexImpl::holder(owner) != 0 || !m->q.empty() || (owner & MutexImpl::kWoken);
    m->lock.unlock(smp);
    if (busy) return EBUSY;
    m->timed.drain(); // timed lockers that timed out may still be leaving
    return 0;
}

} // extern "C"
