// park / unpark: the one way a thread stops running until something happens.
//
// Every blocking operation — sleep, join, every synchronisation object, and
// later I/O, offload and stage waits — ends in park(). This is the seam where
// the blocking graph, resource accounting, TAP appointments and cohort
// grouping attach: park() receives the reason and the blocking site (a cheap
// identifier of where the thread blocked: the return address of the public
// weft_* call, i.e. the user's call site) and hands both to the policy.
//
// Exactly one waker per park. Several parties may try to wake a parked
// thread — whoever removes it from its wait queue (a signaller, an unlocker),
// and its own deadline timer — so each park has a one-shot claim
// (Tcb::claimed): only the party that wins it may wake the thread. A waker
// that loses moves on to the next waiter; a timer that loses does nothing
// and never touches the object the thread waited on (which may be gone).
// On one vproc the claim is a plain load and store: nothing runs concurrently.
// A queued wait without a deadline has only the one waker, whoever takes it
// off the queue under the queue's lock, and needs no claim (claim_queued).
//
// Nothing touches a synchronisation object after waking a thread from it:
// the woken thread may destroy and free the object as soon as it runs. So
// waiters are claimed and removed under the object's lock, and made ready
// only after it is released (WakeList collects several).
//
// A timer that wins the claim does not touch the object either (a waker
// that lost may meanwhile have removed the thread, seen no waiters, and the
// program destroyed the object): it only makes the thread ready. The thread,
// back in park(), leaves the queue itself if it is still on it, and a timed
// waiter counts itself in the object (TimedWaiters) until it is done with
// it, so *_destroy waits for it instead of letting the memory go.
//
// Protocol for a wait on a queue (lock = the owning object's Spin):
//     lock(); ... decide to wait ...
//     enqueue_self(vp, q);         // queued, state Parked
//     unlock();                    // a waker may now claim it
//     int r = park(vp, reason, site, deadline, &lock); // 0 or ETIMEDOUT, or what the waker said
// and for a wake-up:
//     lock(); Tcb *t = take_first(q, smp); ... update state ...; unlock();
//     if (t) make_ready(t, 0);
#pragma once

#include <cerrno>

#include "core/vproc.hpp"
#include "core/waitq.hpp"
#include "observe/graph.hpp"

// The blocking site of a public weft_* function: its caller's address.
#define WEFT_SITE() __builtin_return_address(0)

namespace weft::detail {

// deadline: the park's to come (0: none). Recorded under the queue's lock
// for take_first, which a waiter with no deadline spares a claim.
inline void enqueue_self(Vproc *vp, WaitQueue &q, uint64_t deadline) {
    Tcb *self = vp->current;
    q.push_back(self);
    self->queued_timed = deadline != 0;
    self->state = ThreadState::Parked;
}
// The same at the head: a waiter that was woken and lost its turn.
inline void enqueue_self_front(Vproc *vp, WaitQueue &q, uint64_t deadline) {
    Tcb *self = vp->current;
    q.push_front(self);
    self->queued_timed = deadline != 0;
    self->state = ThreadState::Parked;
}

// Fired on the home vproc when a parked thread's deadline passes.
void park_timeout(Timer *t);

// A deadline that never passes. A wait given it is still a timed wait —
// it takes the timed path, which can leave its queue on its own — but arms
// no timer (so an idle runtime still reports a deadlock). What it is for:
// a wait that expire_wait may end early (cancellation, core/thread.cc).
inline constexpr uint64_t kNoDeadline = UINT64_MAX;

// Whether a wait's deadline (0: none) has passed; kNoDeadline never does,
// and costs no clock read.
inline bool deadline_passed(uint64_t deadline) {
    return deadline && deadline != kNoDeadline && deadline <= now_ns();
}

// End t's current park now, as its deadline would (ETIMEDOUT), if it is a
// timed wait (a deadline, or kNoDeadline) and t allows it (Tcb::interruptible:
// set by a programming model around the calls it lets be cut short — the
// POSIX shim's cancellation points). If t is interruptible but not parked
// (made ready, not yet run: it may park again inside the same call), its
// next timed wait ends at once instead (Tcb::expire_next; the model clears
// it when the call ends). True if it ended a wait now. Call on t's home
// vproc: there t is not running, so its state and flags hold still.
bool expire_wait(Tcb *t);

// What a park calls when Vproc::park_hooks says something listens: the
// blocking graph (fp: the parking function's frame, where its walk starts)
// and the policy's on_park. Out of line: the park path pays one byte test.
void park_hooks_enter(Vproc *vp, Tcb *self, int reason, const void *site, void *fp);

// Timed waiters inside an object, so that destroying it waits until they
// have left (they may still have to take its lock to leave its queue).
class TimedWaiters {
public:
    void enter(bool smp) { // under the object's lock
        if (smp) n_.fetch_add(1, std::memory_order_relaxed);
        else n_.store(n_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    void leave(bool smp) { // the waiter's last touch of the object
        if (smp) n_.fetch_sub(1, std::memory_order_release);
        else n_.store(n_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    }
    // For *_destroy: wait until every timed waiter has left.
    void drain() const {
        while (n_.load(std::memory_order_acquire) != 0) {
            if (tls_vproc) weft_yield();
            else sched_yield();
        }
    }

private:
    std::atomic<uint32_t> n_{0};
};
static_assert(sizeof(TimedWaiters) == 4);

// Win the right to wake t from its current park. True for exactly one caller.
inline bool claim(Tcb *t, bool smp) {
    if (!smp) {
        if (t->claimed.load(std::memory_order_relaxed)) return false;
        t->claimed.store(1, std::memory_order_relaxed);
        return true;
    }
    return t->claimed.exchange(1, std::memory_order_acq_rel) == 0;
}

// Wake a thread parked on nothing (join): claim, then make ready.
inline void wake(Tcb *t, int result, bool smp) {
    if (claim(t, smp)) make_ready(t, result);
}

// park_held: park() without its last step. It returns with the claim still
// held, so no waker can claim the thread again until the caller calls
// park_release(). A wait that is not on a WaitQueue (I/O waiter lists) uses
// it: after a timeout it leaves its own lists under their locks first, then
// releases the claim — the same rule park() applies to a queue.
[[gnu::always_inline]] inline int park_held(Vproc *&vp, int reason, const void *site, uint64_t deadline) {
    WEFT_DCHECK_HOME(vp);
    Tcb *self = vp->current;
    // Ended before it began (expire_wait found it ready, inside the same
    // interruptible call): the timer's path, without a switch.
    if (deadline && __builtin_expect(self->expire_next, 0) && claim(self, vp->smp)) { // (folds away untimed)
        self->expire_next = false;
        self->state = ThreadState::Running;
        self->wake_result = ETIMEDOUT;
        return ETIMEDOUT;
    }
    self->park_reason = static_cast<uint8_t>(reason);
    self->park_site = site;
    vp->stats.parks[reason].add();
    if (__builtin_expect(vp->park_hooks, 0)) park_hooks_enter(vp, self, reason, site, __builtin_frame_address(0));
    if (deadline) {
        self->timed_wait = true;
        if (deadline != kNoDeadline) {
            self->timer.fire = park_timeout;
            vp->timers.arm(&self->timer, deadline);
        }
    }
    self = vp->schedule();
    vp = self->vp; // not kept across the switch (it clobbers every register)
    if (__builtin_expect(self->graph != nullptr, 0)) vp->graph->on_resume(self); // set while the graph is on
    // Running again on the home vproc; the waker is done with us. The timer
    // goes first: once it is cancelled nobody else can look at this park.
    if (deadline) {
        self->timed_wait = false;
        if (self->timer.armed()) vp->timers.cancel(&self->timer);
    }
    return self->wake_result;
}

inline void park_release(Tcb *self) { self->claimed.store(0, std::memory_order_relaxed); }

// Switch away until woken. The caller has set state = Parked where the one
// waker can find it. vp: the caller's vproc, reloaded after the switch (from
// the resumed TCB) so the caller keeps nothing live across it, where every
// register is clobbered. deadline: absolute ns, 0 = none. queue_lock: the lock
// of the wait queue the caller put itself on (enqueue_self), nullptr if none;
// only a timed park needs it. Returns wake_result.
//
// Always inlined, and callers pass a constant 0 for an untimed wait: the
// timer and timeout steps then compile away. They are not needed: the timer
// is armed only by a park with a deadline and is disarmed (fired or
// cancelled) before that park returns, so an untimed park finds it idle.
[[gnu::always_inline]] inline int park(Vproc *&vp, int reason, const void *site, uint64_t deadline,
                                       Spin *queue_lock = nullptr) {
    park_held(vp, reason, site, deadline);
    Tcb *self = vp->current;
    // Woken by our timer from a queue: take the queue's lock before the
    // claim is reset. Under it we leave the queue if still on it, and any
    // waker that popped us (it claims under that lock, and lost) is done
    // with us — else it could claim us again once the claim is reset and
    // wake a thread that is not parked. The object is alive: a timed waiter
    // is counted in it (TimedWaiters).
    if (__builtin_expect(deadline && queue_lock && self->wake_result == ETIMEDOUT, 0)) {
        queue_lock->lock(vp->smp);
        if (self->waiting_on) self->waiting_on->remove(self);
        queue_lock->unlock(vp->smp);
    }
    park_release(self);
    return self->wake_result;
}

// Whether the caller, holding the lock of the queue it has just taken t
// from, may wake t. A waiter with a deadline is raced for by its timer: the
// claim decides. One without has no other waker (no timer, and expire_wait
// ends timed waits only), so taking it off the queue is the claim, and an
// atomic exchange per wake-up is saved on several vprocs. (Its claim flag
// stays clear, as park_release would leave it.)
inline bool claim_queued(Tcb *t, bool smp) { return !t->queued_timed || claim(t, smp); }

// Remove the first waiter of q that is still ours to wake, claimed (caller
// holds q's lock; make it ready after unlocking). nullptr if none.
inline Tcb *take_first(WaitQueue &q, bool smp) {
    while (Tcb *t = q.pop_front())
        if (claim_queued(t, smp)) return t;
    return nullptr; // (a waiter whose timer won is left to the timer)
}

// Claimed threads to make ready once the object's lock is released. Chained
// through Tcb::next, which a parked thread does not use.
class WakeList {
public:
    void add(Tcb *t) {
        t->next = nullptr;
        *tail_ = t;
        tail_ = &t->next;
    }
    bool empty() const { return head_ == nullptr; }
    void make_ready_all(int result) {
        for (Tcb *t = head_; t;) {
            Tcb *n = t->next; // make_ready reuses next for the run queue
            make_ready(t, result);
            t = n;
        }
        head_ = nullptr;
        tail_ = &head_;
    }

private:
    Tcb *head_ = nullptr;
    Tcb **tail_ = &head_;
};

// Deadline as given by the public API: 0 would mean "none" internally, but a
// caller passing 0 means "already expired".
inline uint64_t user_deadline(uint64_t deadline_ns) { return deadline_ns ? deadline_ns : 1; }

} // namespace weft::detail
