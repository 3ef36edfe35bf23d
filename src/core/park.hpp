// park / unpark: the one way a thread stops running until something happens.
//
// Every blocking operation — sleep, join, every synchronisation object, and
// later I/O, offload and stage waits — ends in park(). This is the seam where
// the blocking graph, resource accounting, TAP appointments and cohort
// grouping attach: park() receives the reason and the blocking site (a cheap
// identifier of where the thread blocked: the return address of the public
// weft_* call, i.e. the user's call site) and hands both to the policy.
//
// Exactly one waker per park. A thread parked on a WaitQueue is woken by
// whoever removes it from that queue, under the queue's lock — a signaller,
// an unlocker, or its own deadline timer (which takes the same lock and
// finds it still queued, or not). A thread parked on nothing (sleep, join) has
// exactly one party that knows about it (its timer, the joined thread). So a
// wake-up is never lost and never doubled, without any per-thread atomics.
//
// Protocol for a wait on a queue (lock = the owning object's Spin):
//     lock(); ... decide to wait ...
//     enqueue_self(vp, q, lock);   // queued, state Parked
//     unlock();                    // a waker may now make it Ready
//     int r = park(vp, reason, site, deadline);   // 0 or ETIMEDOUT, or what the waker said
#pragma once

#include <cerrno>

#include "core/vproc.hpp"
#include "core/waitq.hpp"

// The blocking site of a public weft_* function: its caller's address.
#define WEFT_SITE() __builtin_return_address(0)

namespace weft::detail {

inline void enqueue_self(Vproc *vp, WaitQueue &q, Spin &lock) {
    Tcb *self = vp->current;
    q.push_back(self);
    self->wait_lock = &lock;
    self->state = ThreadState::Parked;
}

// Fired on the home vproc when a parked thread's deadline passes.
void park_timeout(Timer *t);

// Switch away until woken. The caller has set state = Parked where the one
// waker can find it. deadline: absolute ns, 0 = none. Returns wake_result.
inline int park(Vproc *vp, int reason, const void *site, uint64_t deadline) {
    Tcb *self = vp->current;
    self->park_reason = static_cast<uint8_t>(reason);
    self->park_site = site;
    vp->stats.parks[reason].add();
    if (!vp->fifo && vp->pol->on_park) vp->pol->on_park(vp->pol_state, self, reason, site);
    if (deadline) {
        self->timer.fire = park_timeout;
        vp->timers.arm(&self->timer, deadline);
    }
    vp->schedule();
    // Running again on the home vproc; the waker is done with us.
    if (self->timer.armed()) vp->timers.cancel(&self->timer);
    self->wait_lock = nullptr;
    return self->wake_result;
}

// Remove and wake the first waiter of q (caller holds q's lock). False if empty.
inline bool wake_one(WaitQueue &q, int result) {
    Tcb *t = q.pop_front();
    if (!t) return false;
    wake(t, result);
    return true;
}

// Deadline as given by the public API: 0 would mean "none" internally, but a
// caller passing 0 means "already expired".
inline uint64_t user_deadline(uint64_t deadline_ns) { return deadline_ns ? deadline_ns : 1; }

} // namespace weft::detail
