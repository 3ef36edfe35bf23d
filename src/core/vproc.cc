#include "core/vproc.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "core/park.hpp"
#include "core/runtime.hpp"
#include "observe/graph.hpp"

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
    loop.stack.guarded = true; // the kernel thread's own stack: no canary to check
    loop.magic = kTcbMagic;
    loop.id = 0;
    std::snprintf(loop.name, sizeof loop.name, "vproc-%d-loop", index);
    current = &loop;
    if (rt->cfg.graph_sample)
        graph = new BlockingGraph(this, static_cast<uint32_t>(rt->cfg.graph_sample), rt->cfg.graph_depth);
    park_hooks = graph || (!fifo && pol->on_park);
}

void park_hooks_enter(Vproc *vp, Tcb *self, int reason, const void *site, void *fp) {
    if (vp->graph) vp->graph->on_park(self, reason, site, fp);
    // (A yield is a blocking point for the graph, not a park for the policy.)
    if (reason != kYieldReason && !vp->fifo && vp->pol->on_park) vp->pol->on_park(vp->pol_state, self, reason, site);
}

Vproc::~Vproc() {
    pol->destroy(pol_state);
    delete graph;
}

void Vproc::refill_thread_ids() {
    id_next = g_next_id_block.fetch_add(kIdBlock, std::memory_order_relaxed);
    id_end = id_next + kIdBlock;
}

void Vproc::run_loop() {
    for (;;) {
        poll_local(); // the reactor is reaped by idle_wait when nothing is ready
        if (Tcb *next = pick()) {
            poll_countdown = kPollInterval;
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

void Vproc::poll_local() {
    for (Tcb *t = inbox.drain(); t;) {
        Tcb *n = t->next;
        stats.remote_wakeups.add();
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
    if (smp && rt->cfg.idle_spin_ns && spin_for_work(deadline)) return;
    sleeping.store(1, std::memory_order_seq_cst);
    if (!inbox.empty() || rt->stopping.load(std::memory_order_seq_cst)) {
        sleeping.store(0, std::memory_order_relaxed);
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
}

// Before sleeping, watch the inbox for a short while. Another vproc that
// hands us work a few microseconds from now (a mutex hand-off, a signal) then
// reaches us without two system calls and the kernel's wake-up latency,
// which on a virtual machine is tens of microseconds. Between looks the CPU
// is offered to others (sched_yield): if the vproc that will hand us work
// shares our CPU, it gets to run instead of waiting for our time slice to
// end. Single-vproc runtimes never spin: nobody else hands them work this way.
bool Vproc::spin_for_work(uint64_t deadline) {
    uint64_t start = now_ns();
    uint64_t until = start + rt->cfg.idle_spin_ns < deadline ? start + rt->cfg.idle_spin_ns : deadline;
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (!inbox.empty() || rt->stopping.load(std::memory_order_relaxed)) return true;
            __builtin_ia32_pause();
        }
        if (now_ns() >= until) return false;
        sched_yield();
    }
}

void Vproc::push_remote(Tcb *t) {
    inbox.push(t);
    notify();
}

void Vproc::notify() {
    if (sleeping.load(std::memory_order_seq_cst)) {
        sleeping.store(0, std::memory_order_relaxed);
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
