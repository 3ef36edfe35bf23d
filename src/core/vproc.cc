#include "core/vproc.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "core/park.hpp"
#include "core/runtime.hpp"
#include "observe/graph.hpp"
#include "sched/kernel_door.hpp"

namespace weft::detail {

constinit thread_local Vproc *tls_vproc __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

// Thread ids come from one process-wide counter, a block at a time, so
// creation does no atomic operation in the common case.
constexpr uint64_t kIdBlock = 1024;
std::atomic<uint64_t> g_next_id_block{1};

} // namespace

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

Vproc::Vproc(Runtime *rt_, int index_, bool smp_, StackRegions &regions, ChunkSlabs &slabs)
    : rt(rt_), index(index_), smp(smp_), pol(rt_->cfg.policy), pol_state(pol->create(this)),
      fifo(pol == &kFifoPolicy), stacks(regions), chunks(slabs, linked_stack_slack()) {
    loop.vp = this;
    loop.state = ThreadState::Running;
    loop.stack.guarded = loop.stack_guarded = true; // the kernel thread's own stack: no canary to check
    loop.magic = kTcbMagic;
    loop.id = 0;
    std::snprintf(loop.name, sizeof loop.name, "vproc-%d-loop", index);
    current = &loop;
    if (rt->cfg.graph_sample)
        graph = new BlockingGraph(this, static_cast<uint32_t>(rt->cfg.graph_sample), rt->cfg.graph_depth);
    park_hooks = graph || (!fifo && pol->on_park);
    if (!rt->cfg.steal_started) pin_on_start = kPinnedRan;
    run_next = fifo && rt->cfg.run_next;
    stealing = rt->stealing;
    if (stealing) poll_countdown = poll_reload = kShareInterval;
}

void Vproc::switch_careful(Tcb *cur, Tcb *next) {
    check_stack(cur);
    if (next->switch_care & Tcb::kCareEh) switch_eh(cur, next);
    if (cur->chunk || next->chunk) switch_linked(cur, next);
}

// (Yields do not come here: they are blocking points for the graph, not
// parks for the policy; see yield_as in core/thread.cc.)
void park_hooks_enter(Vproc *vp, Tcb *self, int reason, const void *site, void *fp) {
    if (vp->graph) vp->graph->on_park(self, reason, site, fp);
    if (!vp->fifo && vp->pol->on_park) vp->pol->on_park(vp->pol_state, self, reason, site);
}

Vproc::~Vproc() {
    pol->destroy(pol_state);
    delete graph;
    delete kernel_door.load(std::memory_order_relaxed);
}

void Vproc::refill_thread_ids() {
    id_next = g_next_id_block.fetch_add(kIdBlock, std::memory_order_relaxed);
    id_end = id_next + kIdBlock;
}

void Vproc::run_loop() {
    loop.tsan.adopt_current(); // (ThreadSanitizer builds) the kernel thread's own context
    for (;;) {
        poll_local(); // the reactor is reaped by idle_wait when nothing is ready
        if (Tcb *next = pick()) {
            poll_countdown = poll_reload;
            switch_to(&loop, next);
            continue;
        }
        if (rt->stopping.load(std::memory_order_acquire)) break;
        idle_wait();
    }
}

void Vproc::poll() {
    poll_local();
    reactor->apply_remote(); // one load, unless another vproc waits on it (Reactor::disarm_from)
    // A zero-timeout reap costs epoll and poll a system call: only while
    // somebody waits for I/O (io_uring reads its ring, and flushes queued
    // submissions).
    if (io_waiters || reactor->cheap_poll()) {
        stats.io_waits.add(!reactor->cheap_poll());
        reactor->poll();
    }
}

// With stealing, every kShareInterval dispatches a look for idle vprocs
// (one load of a line that changes only when a vproc goes idle or wakes),
// and a full poll every kPollInterval; without, the full poll alone.
void Vproc::dispatch_poll() {
    poll_countdown = poll_reload;
    if (stealing) {
        if (rt->idle_vprocs.load(std::memory_order_relaxed)) share_work();
        if (++looks < kPollInterval / kShareInterval) return;
        looks = 0;
    }
    poll();
}

void Vproc::poll_local() {
    for (Tcb *t = inbox.drain(); t;) {
        Tcb *n = t->next;
        if (__builtin_expect(t->migrated != 0, 0)) arrived(t);
        else stats.remote_wakeups.add();
        enqueue_local(t);
        t = n;
    }
    if (!timers.empty()) stats.timers_fired.add(timers.expire(now_ns()));
}

// Sleep in the reactor until an I/O event, the next timer, a push into the
// inbox, or the runtime stopping. The handshake with notify(): we publish
// sleeping=1 and then look at the inbox; a pusher publishes its push and
// then looks at sleeping. Both are seq_cst, so at least one of us sees the
// other: no lost wake-up.
void Vproc::idle_wait() {
    uint64_t deadline = timers.next_deadline();
    busy_since = 0;
    submits_now = kSubmitsPerIdle;
    if (stealing) ask_for_work();
    if (smp && rt->cfg.idle_spin_ns && spin_for_work(deadline)) {
        stop_asking();
        return;
    }
    sleeping.store(1, std::memory_order_seq_cst);
    if (!inbox.empty() || rt->stopping.load(std::memory_order_seq_cst)) {
        sleeping.store(0, std::memory_order_relaxed);
        stop_asking();
        return;
    }
    // One vproc, nothing ready, no timer, no I/O outstanding, an empty
    // inbox: every thread is parked on something only another weft thread
    // could signal. That is a deadlock — say so instead of sleeping for
    // ever. (Objects are not shared with plain kernel threads, see weft.h.)
    if (!smp && deadline == UINT64_MAX && io_waiters == 0) report_deadlock();
    stats.idle_sleeps.add();
    stats.io_waits.add();
    reactor->wait(deadline);
    sleeping.store(0, std::memory_order_relaxed);
    stop_asking();
}

// ---- work stealing (docs/stealing.md) ----------------------------------------
//
// Receiver-initiated, with private run queues: an idle vproc only raises
// its hand (wants_work); a busy vproc notices at its next look (every
// kShareInterval dispatches) and gives it threads from its own queue, on
// its own kernel thread. So no run queue is
// ever touched by two kernel threads (no lock, no atomic operation on the
// switch path, and every policy keeps its single-owner state), and the giver
// knows which thread has not yet switched out (its current one).

void Vproc::ask_for_work() {
    // The count first: whoever clears our flag takes us off it, and must
    // not do so before we are on it.
    rt->idle_vprocs.fetch_add(1, std::memory_order_relaxed);
    wants_work.store(1, std::memory_order_seq_cst);
}

void Vproc::stop_asking() {
    if (!stealing) return;
    if (wants_work.exchange(0, std::memory_order_acq_rel)) {
        rt->idle_vprocs.fetch_sub(1, std::memory_order_relaxed);
        stats.steals_failed.add();
    } else {
        stats.steals.add(); // a giver cleared it: its threads are in our inbox
    }
}

// Called every kShareInterval dispatches while some vproc idles. Threads have waited here at every look for steal_after_ns:
// this vproc stays busy, so half of them (at most kGiveMax) go to an idle
// vproc. Below that, a thread stays where it last ran, with its cache: a
// vproc that keeps up with its work gives nothing. A look that finds only
// threads it may not give (they have run, or are pinned) backs off, so a
// vproc that can give nothing does not pay for looking at every dispatch.
void Vproc::share_work() {
    size_t ready = fifo ? runq.count : pol->ready(pol_state);
    if (ready == 0) {
        busy_since = 0;
        return;
    }
    uint64_t now = now_ns();
    if (!busy_since) {
        busy_since = now;
        return;
    }
    if (now - busy_since < rt->cfg.steal_after_ns || now < give_not_before) return;
    Tcb *ts[kGiveMax];
    size_t want = std::min((ready + 1) / 2, kGiveMax);
    size_t n = fifo ? runq.give(current, ts, want)
                    : pol->give(pol_state, current, ts, want);
    if (n == 0) {
        give_backoff = give_backoff ? std::min(2 * give_backoff, kGiveBackoffMaxNs) : rt->cfg.steal_after_ns;
        give_not_before = now + give_backoff;
        return;
    }
    give_backoff = 0;
    busy_since = now;
    Vproc *to = claim_idle();
    if (!to) { // another giver was faster: keep them (behind the rest)
        for (size_t i = 0; i < n; ++i) enqueue_local(ts[i]);
        return;
    }
    give(to, ts, n);
}

// An idle vproc, claimed: its flag from 1 to 0, which takes it off the count.
Vproc *Vproc::claim_idle() {
    size_t nvp = rt->vproc_list.size();
    for (size_t k = 1; k < nvp; ++k) {
        Vproc *v = rt->vproc_list[(static_cast<size_t>(index) + k) % nvp];
        uint8_t one = 1;
        if (v->wants_work.load(std::memory_order_relaxed) &&
            v->wants_work.compare_exchange_strong(one, 0, std::memory_order_acq_rel)) {
            rt->idle_vprocs.fetch_sub(1, std::memory_order_relaxed);
            return v;
        }
    }
    return nullptr;
}

// Hand ready threads ts[0..n) to `to`, in that order. Everything of theirs
// that is tied to this vproc is settled here, on its owner's thread (let_go):
// a deadline timer still armed from the park they were woken from, their
// place in io_waiters, their blocking-graph record.
void Vproc::give(Vproc *to, Tcb **ts, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        let_go(ts[i], to);
        ts[i]->next = i ? ts[i - 1] : nullptr; // the inbox takes a chain newest first
    }
    to->inbox.push_chain(ts[n - 1], ts[0]);
    to->notify();
}

void Vproc::let_go(Tcb *t, Vproc *to) {
    if (t->timer.armed()) timers.cancel(&t->timer);
    if (t->io_counted) {
        --io_waiters;
        t->io_counted = false;
    }
    t->migrated = kMoving;
    if (graph && t->graph) {
        graph->on_migrate_out(t);
        t->migrated = kMovingMeasured;
    }
    t->vp = to;
    stats.migrations_out.add();
}

void Vproc::after_switch() {
    if (reinterpret_cast<uintptr_t>(dead) & kMovingTag) {
        Tcb *t = reinterpret_cast<Tcb *>(reinterpret_cast<uintptr_t>(dead) & ~kMovingTag);
        dead = nullptr;
        finish_move(t);
    } else {
        reap_dead();
    }
}

// The thread that called weft_migrate has switched out: its new vproc may
// run it now.
void Vproc::finish_move(Tcb *t) { t->vp->push_remote(t); }

void Vproc::arrived(Tcb *t) {
    if (t->migrated == kMovingMeasured && graph) graph->on_migrate_in(t);
    t->migrated = 0;
    stats.migrations_in.add();
}

// Before sleeping, watch the inbox for a short while. Another vproc that
// hands us work a few microseconds from now (a mutex hand-off, a signal) then
// reaches us without two system calls and the kernel's wake-up latency,
// which on a virtual machine is tens of microseconds. Between looks the CPU
// is offered to others (sched_yield): if the vproc that will hand us work
// shares our CPU, it gets to run instead of waiting for our time slice to
// end. Single-vproc runtimes never spin: nobody else hands them work this way.
//
// The spin watches this vproc's own I/O too: a completion or an event that
// arrives meanwhile (or was already there: a read the kernel finished while
// submitting it) is reaped at once. Until 2026-11-29 only the inbox was
// watched, and every request to a two-vproc weft-knot at low load waited
// out the 50 µs spin before its event was seen (p50 69 µs against 18 on
// one vproc; docs/io.md). io_uring tells without a system call; epoll and
// poll look once a round, in place of the yield, while threads wait on I/O.
bool Vproc::spin_for_work(uint64_t deadline) {
    uint64_t start = now_ns();
    uint64_t until = start + rt->cfg.idle_spin_ns < deadline ? start + rt->cfg.idle_spin_ns : deadline;
    const bool cheap = reactor->cheap_poll();
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (!inbox.empty() || rt->stopping.load(std::memory_order_relaxed)) return true;
            if (cheap && reactor->pending()) {
                reactor->poll();
                return true;
            }
            __builtin_ia32_pause();
        }
        if (now_ns() >= until) return false;
        if (io_waiters && !cheap) {
            poll(); // a zero-timeout reap, as between dispatches
            if (!nothing_ready()) return true;
        } else {
            sched_yield();
        }
    }
}

void Vproc::push_remote(Tcb *t) {
    inbox.push(t);
    notify();
}

void Vproc::notify() {
    if (sleeping.load(std::memory_order_seq_cst)) {
        sleeping.store(0, std::memory_order_relaxed);
        stats.idle_wakeups.fetch_add(1, std::memory_order_relaxed);
        reactor->wake();
    }
}

// Runs in the context that followed the dead thread, which is off its stack.
void Vproc::reap_dead() {
    Tcb *d = dead;
    dead = nullptr;
    bool free_now = false;
    Tcb *joiner = nullptr;
    {
        SpinGuard g(d->join_lock, smp);
        d->exited = true;
        if (d->detached) free_now = true;
        else joiner = d->joiner;
    }
    if (free_now) release_thread(d);
    else if (joiner) wake(joiner, 0, smp); // the joiner frees it after reading retval
    rt->thread_ended();
}

void Vproc::stack_overflow(Tcb *t) { fatal_thread(t, "stack overflow"); }

#ifndef NDEBUG
void stale_vproc(const Vproc *vp, const char *where) {
    fatal("%s: vproc %d used from the kernel thread of vproc %d (a Vproc pointer kept across a switch)", where,
          vp ? vp->index : -1, tls_vproc ? tls_vproc->index : -1);
}
#endif

void Vproc::report_deadlock() {
    fatal("deadlock: all %lld threads of the runtime are blocked and nothing can wake them "
          "(one vproc, no timer pending)",
          static_cast<long long>(rt->live.load(std::memory_order_relaxed)));
}

void Vproc::overwritten(Tcb *t) {
    fatal("the control block of a weft thread at %p was overwritten before it could run again: a stack "
          "overflow in the thread whose stack lies below it (a frame larger than a page skips the guard; "
          "compile with -fstack-clash-protection)",
          static_cast<void *>(t));
}

void Runtime::stop() {
    stopping.store(true, std::memory_order_seq_cst);
    for (auto &vp : vprocs) vp->notify();
}

// Never touches the object the thread waits on (see park.hpp): a thread
// still on a queue leaves it itself once it runs.
void park_timeout(Timer *tm) {
    Tcb *t = tcb_of_timer(tm);
    if (claim(t, t->vp->smp)) make_ready(t, ETIMEDOUT);
}

// The same as the timer firing: the thread leaves its queue or lists itself.
bool expire_wait(Tcb *t) {
    if (!t->interruptible) return false;
    if (t->state != ThreadState::Parked || !t->timed_wait || !claim(t, t->vp->smp)) {
        t->expire_next = true; // ready (or a waker won): the next wait of this call ends at once
        return false;
    }
    make_ready(t, ETIMEDOUT);
    return true;
}

} // namespace weft::detail
