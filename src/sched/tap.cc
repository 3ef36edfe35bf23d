// Threading by appointment: the calendars, the appointment clock and the
// classification (sched/tap.hpp; docs/tap.md).
//
// Who touches what. The calendars belong to the vproc: only its kernel
// thread reads or changes them — the wrappers of its threads (queueing a
// call), the clock (pick) and enqueue. A call's thread is parked for the
// length of the call, and the park protocol (core/park.hpp) decides who
// may wake it: the clock claims the thread before it performs a call on its
// behalf and lets the claim go again if the call has to wait for its
// descriptor (a readiness event, the thread's deadline or a close may then
// claim it). A claimed wake-up always reaches enqueue on the home vproc,
// which reads the call's phase: a descriptor that became ready sends the
// call back to NET (the thread stays parked), anything else makes the
// thread ready in CPU, where it finishes or withdraws its call itself.
#include "sched/tap.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "core/park.hpp"
#include "core/runtime.hpp"
#include "sched/fifo.hpp"
#include "sched/policy.hpp"
#include "weft/weft.h"

namespace weft::detail {

namespace {

constexpr unsigned kMaxLevels = 32;

// Tcb::policy_word: 0 for a thread never classified, else (level + 1) in
// the low byte and, while it waits in CPU, the clock count it came at.
inline bool classified(const Tcb *t) { return (t->policy_word & 0xff) != 0; }
inline unsigned level_of(const Tcb *t) { return classified(t) ? static_cast<unsigned>(t->policy_word & 0xff) - 1 : 0; }
inline void set_level(Tcb *t, unsigned lvl) { t->policy_word = (t->policy_word & ~uint64_t{0xff}) | (lvl + 1); }
inline uint64_t cpu_since(const Tcb *t) { return t->policy_word >> 8; }
inline void set_cpu_since(Tcb *t, uint64_t c) { t->policy_word = (t->policy_word & 0xff) | (c << 8); }

// How often a DISK operation's descriptors (both of a splice's) have been
// closed with weft_close: unchanged between queueing and the clock's turn
// unless one of them was closed meanwhile (the counts only grow).
uint32_t disk_closes(Vproc *vp, const IoOp *op) {
    uint32_t n = 0;
    for (int fd : {op->fd, op->fd2})
        if (fd >= 0)
            if (FdState *s = fd_state(vp, fd)) n += s->closes;
    return n;
}

struct CallList {
    TapCall *head = nullptr, *tail = nullptr;
    void push(TapCall *c) {
        c->next = nullptr;
        c->prev = tail;
        if (tail) tail->next = c;
        else head = c;
        tail = c;
    }
    void remove(TapCall *c) {
        if (c->prev) c->prev->next = c->next;
        else head = c->next;
        if (c->next) c->next->prev = c->prev;
        else tail = c->prev;
        c->prev = c->next = nullptr;
    }
};

// Figures other threads read (weft_tap_stats): written by the owner only.
struct Count {
    std::atomic<uint64_t> v{0};
    void add(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
    void sub(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) - n, std::memory_order_relaxed); }
    uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

struct TapState {
    Vproc *vp;
    TapConfig cfg;
    FifoQueue cpu[kMaxLevels];                   // CPU: ready threads (commit appointments)
    FifoQueue lane;                              // CPU: threads in an appointment with a mutex (TAP locking)
    CallList calls[2][kMaxLevels];               // DISK, NET: parked threads' calls
    uint32_t nonempty[kTapCalendars] = {};       // bit per level with something queued
    // Share: stride scheduling over the levels of each calendar. A level's
    // pass advances by its stride at each appointment; the non-empty level
    // with the smallest pass goes next. vtime: the pass last served, where a
    // level that was empty starts again (no credit banked while idle).
    uint64_t pass[kTapCalendars][kMaxLevels] = {};
    uint64_t vtime[kTapCalendars] = {};
    uint64_t stride[kMaxLevels] = {};
    size_t count[kTapCalendars] = {};
    uint8_t phase = kTapCpu;
    uint32_t budget = 0;                         // appointments left in this turn
    Tcb *accepting = nullptr;                    // called tap_accept: its next call is an accept
    uint64_t served = 0;                         // DISK and NET calls taken off their calendars
    // The idling clock: a token bucket per calendar.
    double tokens[kTapCalendars] = {};
    uint64_t refilled_ns = 0;
    Timer refill;                                // wakes an idle vproc when a token is due
    // weft_tap_stats
    Count clocks, appointments[kTapCalendars], by_level[kTapCalendars][kMaxLevels], queued[kTapCalendars][kMaxLevels];
    Count disk_batches, disk_batched, net_waits, dropped, throttled, lock_appointments;

    CallList &list(uint8_t cal, unsigned lvl) { return calls[cal - 1][lvl]; }

    // --- the calendars ---
    bool in_lane(const Tcb *t) const { return cfg.locks && t->tap_held.load(std::memory_order_relaxed) != 0; }
    // The level a thread's calls are made at: a lock holder's at 0.
    uint8_t call_level(const Tcb *t) const { return static_cast<uint8_t>(in_lane(t) ? 0 : level_of(t)); }
    void push_cpu(Tcb *t) {
        unsigned lvl = level_of(t);
        set_cpu_since(t, clocks.get());
        ++count[kTapCpu];
        if (in_lane(t)) {
            lane.push(t);
            queued[kTapCpu][0].add();
            return;
        }
        cpu[lvl].push(t);
        wake_level(kTapCpu, lvl);
        queued[kTapCpu][lvl].add();
    }
    // lvl of calendar cal has something queued (again).
    void wake_level(uint8_t cal, unsigned lvl) {
        if (!(nonempty[cal] & (1u << lvl)) && pass[cal][lvl] < vtime[cal]) pass[cal][lvl] = vtime[cal];
        nonempty[cal] |= 1u << lvl;
    }
    // t, ready in CPU at its level, has just come into an appointment with a
    // mutex: into the lane now (a scan of its level: rare).
    void promote(Tcb *t) {
        const unsigned lvl = level_of(t);
        FifoQueue &q = cpu[lvl];
        for (Tcb **pp = &q.head, *prev = nullptr; *pp; prev = *pp, pp = &(*pp)->next) {
            if (*pp != t) continue;
            *pp = t->next;
            if (q.tail == t) q.tail = prev;
            --q.count;
            if (!q.head) nonempty[kTapCpu] &= ~(1u << lvl);
            queued[kTapCpu][lvl].sub();
            lane.push(t);
            queued[kTapCpu][0].add();
            return;
        }
    }
    void push_call(TapCall *c) {
        c->phase = TapCall::Queued;
        c->since = clocks.get();
        list(c->kind, c->level).push(c);
        wake_level(c->kind, c->level);
        ++count[c->kind];
        queued[c->kind][c->level].add();
    }
    void unlink_call(TapCall *c) {
        CallList &l = list(c->kind, c->level);
        l.remove(c);
        if (!l.head) nonempty[c->kind] &= ~(1u << c->level);
        --count[c->kind];
        queued[c->kind][c->level].sub();
    }
    // The level to serve next in calendar `cal`: the most urgent non-empty
    // one; under Weft, the head of every level (its oldest) counts one level
    // more urgent for every `age` clocks it has waited (ties: the more urgent
    // level). That is earliest deadline first, a call's deadline being the
    // clock it was queued at plus level x age: a call waits at most for the
    // calls due before it, and urgent traffic that is itself backed up keeps
    // its lead. (Until 2026-11-29 the most urgent level did not age, so under
    // a backlog an accept at level 0 gave way to every call that had aged
    // past it, and new connections waited in the listen queue: docs/tap.md.)
    unsigned level_to_serve(uint8_t cal) {
        uint32_t bits = nonempty[cal];
        unsigned best = static_cast<unsigned>(__builtin_ctz(bits));
        if (cfg.cls == TapClass::Share) return share_level(cal, bits, best);
        if (cfg.cls != TapClass::Weft) return best;
        const uint64_t now = clocks.get();
        auto eff = [&](unsigned lvl) {
            uint64_t since = cal == kTapCpu ? cpu_since(cpu[lvl].head) : list(cal, lvl).head->since;
            return static_cast<long>(lvl) - static_cast<long>((now - since) / cfg.age);
        };
        long best_eff = eff(best);
        for (bits &= bits - 1; bits; bits &= bits - 1) {
            unsigned lvl = static_cast<unsigned>(__builtin_ctz(bits));
            if (long e = eff(lvl); e < best_eff) {
                best_eff = e;
                best = lvl;
            }
        }
        return best;
    }
    // Share: the non-empty level with the smallest pass (ties: the more
    // urgent), which then advances by its stride.
    unsigned share_level(uint8_t cal, uint32_t bits, unsigned best) {
        for (uint32_t b = bits & (bits - 1); b; b &= b - 1) {
            unsigned lvl = static_cast<unsigned>(__builtin_ctz(b));
            if (pass[cal][lvl] < pass[cal][best]) best = lvl;
        }
        vtime[cal] = pass[cal][best];
        pass[cal][best] += stride[best];
        return best;
    }
    Tcb *pop_cpu() {
        if (Tcb *t = lane.pop()) {
            --count[kTapCpu];
            queued[kTapCpu][0].sub();
            return t;
        }
        unsigned lvl = level_to_serve(kTapCpu);
        Tcb *t = cpu[lvl].pop();
        if (!cpu[lvl].head) nonempty[kTapCpu] &= ~(1u << lvl);
        --count[kTapCpu];
        queued[kTapCpu][lvl].sub();
        return t;
    }
    TapCall *pop_call(uint8_t cal) {
        TapCall *c = list(cal, level_to_serve(cal)).head;
        unlink_call(c);
        return c;
    }

    // --- the idling clock ---
    bool take_token(uint8_t cal) {
        if (!cfg.rate[cal]) return true;
        const uint64_t now = now_ns();
        if (refilled_ns) {
            const double dt = static_cast<double>(now - refilled_ns) * 1e-9;
            for (int k = 0; k < kTapCalendars; ++k) {
                tokens[k] += dt * cfg.rate[k];
                if (tokens[k] > cfg.burst) tokens[k] = cfg.burst;
            }
        } else {
            for (int k = 0; k < kTapCalendars; ++k) tokens[k] = cfg.burst;
        }
        refilled_ns = now;
        if (tokens[cal] >= 1) {
            tokens[cal] -= 1;
            return true;
        }
        throttled.add();
        // Sleep (in the reactor) until the next token rather than poll for it.
        const uint64_t due = now + static_cast<uint64_t>((1 - tokens[cal]) * 1e9 / cfg.rate[cal]) + 1;
        if (!refill.armed() || refill.deadline > due) {
            vp->timers.cancel(&refill);
            vp->timers.arm(&refill, due);
        }
        return false;
    }

    // --- classification ---
    void classify(Tcb *t) {
        const unsigned bottom = cfg.levels - 1u;
        if (!classified(t)) set_level(t, cfg.cls == TapClass::Boost ? bottom : 0);
        unsigned lvl = level_of(t);
        const bool accept = accepting == t;
        accepting = nullptr;
        switch (cfg.cls) {
        case TapClass::Constant: break;
        case TapClass::Shape:
        case TapClass::Weft:
        case TapClass::Share: lvl = accept ? 0 : (lvl < bottom ? lvl + 1 : bottom); break;
        case TapClass::Boost: lvl = accept ? bottom : (lvl > 0 ? lvl - 1 : 0); break;
        }
        set_level(t, lvl);
    }

    // --- the clock's work ---
    void finish(TapCall *c, ssize_t r) {
        c->result = r;
        c->phase = TapCall::Done;
        make_ready(c->t, 0); // to enqueue: CPU
    }
    void perform_net(TapCall *c);
    void disk_turn();
    void net_turn();
};

// The network call of a claimed thread, made here on its behalf: as
// retry_on_fd would make it, except that where the thread would park, the
// call waits on the descriptor and the thread stays where it is.
void TapState::perform_net(TapCall *c) {
    FdState *s = c->s;
    // Closed with weft_close while the call waited in its calendar (a close
    // wakes only calls waiting on the descriptor itself): EBADF, as for a
    // thread parked on it, and never a call on the number's next file.
    if (s->closes != c->closes) return finish(c, -EBADF);
    for (;;) {
        const uint32_t seq = s->seq.load(std::memory_order_acquire);
        if (s->user_nonblock || (s->ready.load(std::memory_order_relaxed) & FdState::dir_bit(c->ev))) {
            vp->stats.io_syscalls.add();
            ssize_t r = c->attempt(c->ctx);
            if (r >= 0) {
                if (r > 0 && static_cast<size_t>(r) < c->want && s->drains_on_short()) mark_unready(vp, s, c->ev, seq);
                return finish(c, r);
            }
            if ((r != -EAGAIN && r != -EWOULDBLOCK) || s->user_nonblock) return finish(c, r);
        }
        // It would wait: not past the thread's deadline (ready data is still
        // returned after it, as without appointments).
        if (deadline_passed(c->deadline)) return finish(c, -ETIMEDOUT);
        // The claim goes before the waiter is linked: a waker on another
        // vproc (its reactor, a close) takes the waiter off the list and then
        // claims the thread, and a wake-up whose claim failed is dropped —
        // it would be lost while the clock still held the claim. Meanwhile
        // nothing can wake the thread (no waiter is linked; its timer runs
        // on this vproc), except a cancellation, which then owns the wake.
        c->waiter = IoWaiter{c->t, nullptr, nullptr, c->ev, false};
        c->phase = TapCall::WaitingFd;
        park_release(c->t);
        const int rc = link_fd_waiter(vp, s, c->fd, &c->waiter, seq);
        if (rc == 0) { // parked on the descriptor: a wake-up claims the thread again
            net_waits.add();
            vp->stats.io_parks.add(); // (io_parks: waits for I/O, not for appointments)
            return;
        }
        if (!claim(c->t, vp->smp)) return; // woken meanwhile: its waker made it ready
        c->phase = TapCall::Performing;
        if (rc != 1) return finish(c, -rc);
        // an event came since the look: look again
    }
}

void TapState::disk_turn() {
    unsigned n = 0;
    for (uint32_t left = cfg.ratio[kTapDisk]; left && count[kTapDisk] && take_token(kTapDisk); --left) {
        TapCall *c = pop_call(kTapDisk);
        ++served;
        if (!claim(c->t, vp->smp)) { // its deadline woke it: it withdraws on its own
            c->phase = TapCall::Dropped;
            dropped.add();
            continue;
        }
        appointments[kTapDisk].add();
        by_level[kTapDisk][c->level].add();
        if (!c->op) {
            c->phase = TapCall::Released; // no io_uring: the thread makes the call itself
            make_ready(c->t, 0);
        } else if (disk_closes(vp, c->op) != c->closes) { // closed while queued: as perform_net
            c->op->res = -EBADF;
            finish(c, -EBADF);
        } else {
            c->phase = TapCall::Submitted;
            vp->stats.io_parks.add();
            vp->reactor->submit(c->op); // queued: one submission for the turn, below
            ++n;
            park_release(c->t);
        }
    }
    if (n) {
        vp->reactor->flush();
        disk_batches.add();
        disk_batched.add(n);
    }
}

void TapState::net_turn() {
    for (uint32_t left = cfg.ratio[kTapNet]; left && count[kTapNet] && take_token(kTapNet); --left) {
        TapCall *c = pop_call(kTapNet);
        ++served;
        if (!claim(c->t, vp->smp)) {
            c->phase = TapCall::Dropped;
            dropped.add();
            continue;
        }
        appointments[kTapNet].add();
        by_level[kTapNet][c->level].add();
        c->phase = TapCall::Performing;
        perform_net(c);
    }
}

// ---- the policy ------------------------------------------------------------------

void *tap_create(Vproc *vp) {
    auto *st = new TapState;
    st->vp = vp;
    st->cfg = vp->rt->cfg.tap;
    st->budget = st->cfg.ratio[kTapCpu];
    // Share: level l's weight is 2^(-l/2) of level 0's, so its stride is
    // 2^(l/2) units (level 15 gets 1/181 of level 0's turns, never none).
    // (1448 = 1024 x sqrt 2, in integers: no libm for the static library's users.)
    for (unsigned l = 0; l < kMaxLevels; ++l) st->stride[l] = (l % 2 ? uint64_t{1448} : uint64_t{1024}) << (l / 2);
    st->refill.fire = [](Timer *) {}; // only wakes the vproc: the clock looks again
    vp->tap = st;
    return st;
}

void tap_destroy(void *p) {
    auto *st = static_cast<TapState *>(p);
    st->vp->timers.cancel(&st->refill);
    st->vp->tap = nullptr;
    delete st;
}

void tap_enqueue(void *p, Tcb *t) {
    auto *st = static_cast<TapState *>(p);
    if (auto *c = static_cast<TapCall *>(t->appt)) {
        switch (c->phase) {
        case TapCall::WaitingFd:
            if (t->wake_result == 0) { // its descriptor is ready: back to NET, still parked
                t->state = ThreadState::Parked;
                st->push_call(c);
                park_release(t);
                return;
            }
            if (t->wake_result == EBADF) { // closed under it
                c->result = -EBADF;
                c->phase = TapCall::Done;
            }
            break; // ETIMEDOUT: it withdraws its call itself
        case TapCall::Submitted:
            if (t->wake_result == 0) c->phase = TapCall::Done; // the completion
            break;
        default: break;
        }
    }
    if (!classified(t)) set_level(t, st->cfg.cls == TapClass::Boost ? st->cfg.levels - 1u : 0);
    st->push_cpu(t);
}

// The appointment clock: CPU, DISK, NET turns in the configured ratio.
// Network calls are made here, on whichever stack the vproc switches from:
// errno is the switching thread's and is kept.
Tcb *tap_pick(void *p) {
    KeepFpStatus keep; // in the switching thread's context: the token refill computes with doubles
    auto *st = static_cast<TapState *>(p);
    const int saved_errno = errno;
    Tcb *t = nullptr;
    // Turn after turn until a thread is released, or a whole clock went by
    // without an appointment (nothing queued, or the idling clock's buckets
    // are empty): then the vproc may sleep.
    uint64_t served = st->served, idle_turns = 0;
    while (!t && idle_turns <= kTapCalendars) { // (a whole clock, and the CPU turn after it)
        if (st->served != served) {
            served = st->served;
            idle_turns = 0;
        } else {
            ++idle_turns;
        }
        switch (st->phase) {
        case kTapCpu:
            if (st->budget && st->count[kTapCpu] && st->take_token(kTapCpu)) {
                --st->budget;
                t = st->pop_cpu();
                st->appointments[kTapCpu].add();
                st->by_level[kTapCpu][st->call_level(t)].add();
                break;
            }
            st->phase = kTapDisk;
            break;
        case kTapDisk:
            st->disk_turn();
            st->phase = kTapNet;
            break;
        default:
            st->net_turn();
            st->phase = kTapCpu;
            st->budget = st->cfg.ratio[kTapCpu];
            st->clocks.add();
            break;
        }
    }
    errno = saved_errno;
    return t;
}

size_t tap_ready(void *p) {
    auto *st = static_cast<TapState *>(p);
    return st->count[kTapCpu] + st->count[kTapDisk] + st->count[kTapNet];
}

} // namespace

// No give: a thread's pending call sits in this vproc's calendars, and its
// appointments are this vproc's clock (docs/stealing.md).
const PolicyOps kTapPolicy = {"tap", tap_create, tap_destroy, tap_enqueue, tap_pick, tap_ready, nullptr, nullptr, nullptr, nullptr};

// ---- the wrappers' side --------------------------------------------------------------

namespace {

TapState *state_of(Vproc *vp) { return static_cast<TapState *>(vp->tap); }

// The thread's deadline came (or cancellation ended the park) before its
// call was done: take the call back from wherever it is.
void withdraw(Vproc *vp, TapCall *c) {
    switch (c->phase) {
    case TapCall::Queued: state_of(vp)->unlink_call(c); break;
    case TapCall::WaitingFd: cancel_fd_async(vp, c->s, &c->waiter); break;
    default: break;
    }
}

} // namespace

ssize_t tap_net(Vproc *vp, FdState *s, int fd, uint32_t ev, size_t want, ssize_t (*attempt)(void *), void *ctx,
                CallDeadline &dl, const void *site) {
    Tcb *self = vp->current;
    TapState *st = state_of(vp);
    TapCall c;
    c.t = self;
    c.kind = kTapNet;
    c.attempt = attempt;
    c.ctx = ctx;
    c.s = s;
    c.closes = s->closes;
    c.fd = fd;
    c.ev = ev;
    c.want = want;
    const uint64_t deadline = dl.get(self);
    c.deadline = deadline == kNoDeadline ? 0 : deadline;
    st->classify(self);
    c.level = st->call_level(self);
    self->appt = &c;
    self->state = ThreadState::Parked;
    st->push_call(&c);
    ++vp->io_waiters;
    const int r = park_held(vp, WEFT_PARK_IO, site, deadline);
    --vp->io_waiters;
    self = vp->current;
    if (c.phase != TapCall::Done) { // its deadline (or cancellation) ended the park
        withdraw(vp, &c);
        c.result = r ? -r : -ETIMEDOUT;
    }
    self->appt = nullptr;
    park_release(self);
    return c.result;
}

int tap_disk(Vproc *vp, IoOp *op, CallDeadline &dl, const void *site) {
    Tcb *self = vp->current;
    TapState *st = state_of(vp);
    TapCall c;
    c.t = self;
    c.kind = kTapDisk;
    c.op = op;
    c.closes = disk_closes(vp, op);
    op->waiter = self;
    const uint64_t deadline = dl.get(self);
    st->classify(self);
    c.level = st->call_level(self);
    self->appt = &c;
    self->state = ThreadState::Parked;
    st->push_call(&c);
    ++vp->io_waiters;
    park_held(vp, WEFT_PARK_IO, site, deadline);
    self = vp->current;
    self->appt = nullptr;
    int res;
    if (c.phase == TapCall::Done || op->done.load(std::memory_order_acquire)) {
        res = op->res;
        park_release(self);
    } else if (c.phase == TapCall::Submitted) { // in the kernel: cancel it, wait for it
        park_release(self);
        res = wait_cancelled(vp, op, site); // still an I/O waiter: the vproc must reap its completion
    } else { // never submitted
        withdraw(vp, &c);
        park_release(self);
        res = -ETIMEDOUT;
    }
    --vp->io_waiters;
    return res;
}

void tap_disk_turn(Vproc *vp, const void *site) {
    Tcb *self = vp->current;
    TapState *st = state_of(vp);
    TapCall c;
    c.t = self;
    c.kind = kTapDisk;
    st->classify(self);
    c.level = st->call_level(self);
    self->appt = &c;
    self->state = ThreadState::Parked;
    st->push_call(&c);
    park_held(vp, WEFT_PARK_IO, site, 0);
    vp->current->appt = nullptr;
    park_release(vp->current);
}

void tap_accept(Vproc *vp) { state_of(vp)->accepting = vp->current; }

// ---- TAP locking ---------------------------------------------------------------------

void tap_lock_contended(Vproc *vp, Tcb *owner) {
    TapState *st = state_of(vp);
    if (!st->cfg.locks) return;
    owner->tap_held.fetch_add(1, std::memory_order_relaxed);
    // Ready here (not running, not parked, not in the inbox): in our CPU
    // calendar at its level. Elsewhere it reaches the lane at its next
    // commit appointment.
    if (owner->vp == vp && owner != vp->current && owner->state == ThreadState::Ready) st->promote(owner);
    st->lock_appointments.add();
}

void tap_lock_enqueue(Vproc *vp, WaitQueue &q, uint64_t deadline) {
    TapState *st = state_of(vp);
    Tcb *self = vp->current;
    if (!st->cfg.locks) {
        enqueue_self(vp, q, deadline);
        return;
    }
    // By level, FIFO within one: after the last waiter at least as urgent.
    const unsigned mine = st->call_level(self);
    Tcb *after = q.tail;
    while (after && level_of(after) > mine) after = after->wq_prev;
    if (after == q.tail) {
        q.push_back(self);
    } else {
        Tcb *before = after ? after->wq_next : q.head;
        self->wq_prev = after;
        self->wq_next = before;
        before->wq_prev = self;
        if (after) after->wq_next = self;
        else q.head = self;
        self->waiting_on = &q;
    }
    self->queued_timed = deadline != 0;
    self->state = ThreadState::Parked;
}

void tap_lock_handoff(Vproc *vp, Tcb *from, Tcb *to) {
    TapState *st = state_of(vp);
    if (!st->cfg.locks) return;
    if (from->tap_held.load(std::memory_order_relaxed)) from->tap_held.fetch_sub(1, std::memory_order_relaxed);
    if (to) to->tap_held.fetch_add(1, std::memory_order_relaxed);
}

// ---- configuration -------------------------------------------------------------------

bool parse_tap_spec(const char *spec, TapConfig *out, char *err, size_t errlen) {
    TapConfig c;
    auto fail = [&](const char *what, const char *item) {
        std::snprintf(err, errlen, "%s in \"%s\"", what, item);
        return false;
    };
    auto triple = [](const char *v, uint32_t *dst, uint32_t lo, uint32_t hi) {
        unsigned long x[3];
        char *end;
        for (int i = 0; i < 3; ++i) {
            errno = 0;
            x[i] = std::strtoul(v, &end, 10);
            if (end == v || errno || x[i] < lo || x[i] > hi) return false;
            v = end;
            if (i < 2 && *v++ != ':') return false;
        }
        if (*v) return false;
        for (int i = 0; i < 3; ++i) dst[i] = static_cast<uint32_t>(x[i]);
        return true;
    };
    auto number = [](const char *v, uint32_t *dst, uint32_t lo, uint32_t hi) {
        char *end;
        errno = 0;
        unsigned long x = std::strtoul(v, &end, 10);
        if (end == v || *end || errno || x < lo || x > hi) return false;
        *dst = static_cast<uint32_t>(x);
        return true;
    };
    std::string_view rest = spec ? spec : "";
    while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string item(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (item.empty()) continue;
        size_t eq = item.find('=');
        if (eq == std::string::npos) return fail("expected key=value", item.c_str());
        std::string key = item.substr(0, eq);
        const char *v = item.c_str() + eq + 1;
        if (key == "ratio") {
            uint32_t r[3];
            // CPU and NET must get turns (a thread could never run or finish a
            // call); DISK may be 0 when nothing reads files.
            if (!triple(v, r, 0, 1000) || !r[kTapCpu] || !r[kTapNet])
                return fail("ratio: expected CPU:DISK:NET, each 0..1000, CPU and NET at least 1", item.c_str());
            for (int i = 0; i < 3; ++i) c.ratio[i] = static_cast<uint16_t>(r[i]);
            if (!c.ratio[kTapDisk]) c.ratio[kTapDisk] = 1; // (a disk call still needs a turn)
        } else if (key == "class") {
            if (!std::strcmp(v, "const")) c.cls = TapClass::Constant;
            else if (!std::strcmp(v, "shape")) c.cls = TapClass::Shape;
            else if (!std::strcmp(v, "boost")) c.cls = TapClass::Boost;
            else if (!std::strcmp(v, "weft")) c.cls = TapClass::Weft;
            else if (!std::strcmp(v, "share")) c.cls = TapClass::Share;
            else return fail("class: expected const, shape, boost, weft or share", item.c_str());
        } else if (key == "levels") {
            uint32_t n;
            if (!number(v, &n, 1, kMaxLevels)) return fail("levels: expected 1..32", item.c_str());
            c.levels = static_cast<uint8_t>(n);
        } else if (key == "age") {
            if (!number(v, &c.age, 1, 1000000)) return fail("age: expected 1..1000000 clocks", item.c_str());
        } else if (key == "rate") {
            if (!triple(v, c.rate, 0, 100000000))
                return fail("rate: expected CPU:DISK:NET appointments per second (0: no limit)", item.c_str());
        } else if (key == "locks") {
            if (!std::strcmp(v, "on")) c.locks = true;
            else if (!std::strcmp(v, "off")) c.locks = false;
            else return fail("locks: expected on or off", item.c_str());
        } else if (key == "burst") {
            if (!number(v, &c.burst, 1, 1000000)) return fail("burst: expected 1..1000000", item.c_str());
        } else {
            return fail("unknown key (ratio, class, levels, age, rate, burst, locks)", item.c_str());
        }
    }
    *out = c;
    return true;
}

} // namespace weft::detail

using namespace weft::detail;

extern "C" int weft_tap_stats(int vproc, weft_tap_stats_t *out) {
    Vproc *vp = tls_vproc;
    if (!vp || !out) return vp ? EINVAL : EPERM;
    if (vp->rt->cfg.policy != &kTapPolicy) return ENOTSUP;
    std::memset(out, 0, sizeof *out);
    const auto &vps = vp->rt->vprocs;
    if (vproc >= static_cast<int>(vps.size())) return EINVAL;
    for (size_t i = 0; i < vps.size(); ++i) {
        if (vproc >= 0 && static_cast<int>(i) != vproc) continue;
        auto *st = static_cast<TapState *>(vps[i]->tap);
        if (!st) continue;
        out->levels = st->cfg.levels;
        for (int k = 0; k < kTapCalendars; ++k) {
            out->ratio[k] = st->cfg.ratio[k];
            out->appointments[k] += st->appointments[k].get();
            for (unsigned l = 0; l < kMaxLevels; ++l) {
                out->by_level[k][l] += st->by_level[k][l].get();
                out->queued[k][l] += st->queued[k][l].get();
            }
        }
        out->clocks += st->clocks.get();
        out->disk_batches += st->disk_batches.get();
        out->disk_batched += st->disk_batched.get();
        out->net_waits += st->net_waits.get();
        out->dropped += st->dropped.get();
        out->throttled += st->throttled.get();
        out->lock_appointments += st->lock_appointments.get();
    }
    return 0;
}

extern "C" int weft_tap_set_level(int level) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    auto *st = static_cast<TapState *>(vp->tap);
    if (!st) return ENOTSUP;
    if (level < 0 || level >= st->cfg.levels) return EINVAL;
    set_level(vp->current, static_cast<unsigned>(level));
    return 0;
}

extern "C" int weft_tap_level(void) {
    Vproc *vp = tls_vproc;
    if (!vp || !vp->tap) return -1;
    return classified(vp->current) ? static_cast<int>(level_of(vp->current)) : 0;
}
