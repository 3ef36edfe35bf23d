// vprocs and the scheduler loop.
//
// A vproc is one kernel thread with its own run queue (behind the policy
// contract), timer heap, inbox, stack pool and current thread. All mutable
// scheduling state lives here; nothing is a bare global, so several runtimes
// may even run side by side in one process.
//
// The model, and its invariants:
//  - Cooperative. A thread runs until it parks, yields or exits. Switching
//    goes straight from thread to thread (one context_switch); the loop's own
//    context (Vproc::loop, on the kernel thread's stack) only runs when
//    nothing is ready, to sleep until a timer or a wake-up.
//  - Polls are bounded. Every kPollInterval dispatches the scheduler drains
//    the inbox and expires timers even while threads are always ready, so a
//    busy vproc never starves timers or remote wake-ups (nor, with the I/O
//    layer, the reactor).
//  - One home at a time. A thread runs only on its home vproc. A wake-up
//    from another kernel thread goes through the home vproc's inbox (lock-
//    free MPSC) and wakes that vproc if it sleeps. The home vproc drains its
//    inbox only in its own scheduler code, so a thread is never resumed
//    before it has switched out, even when a remote waker made it ready early.
//  - Work stealing moves the home, and only of a ready thread that has
//    switched out: an idle vproc asks (wants_work), and a busy one, at its
//    next look, gives it some of its ready threads through the same inbox —
//    never its current thread, nor a pinned one (docs/stealing.md). Every
//    run queue thus stays private to its vproc, as the policy contract says.
//  - errno and the C++ exception state belong to the thread: saved and
//    restored at every switch.
//  - A dead thread cannot free the stack it runs on: it switches away and
//    the next context to run reaps it (Vproc::dead), before anything else —
//    unless a joiner on the same vproc waits, which it wakes before the
//    switch (the joiner frees the stack, and cannot run before the switch).
//  - A thread is resumed only with an intact TCB (magic checked at switch-in).
//
// The idle wait sleeps in the vproc's reactor (io/reactor.hpp) until an I/O
// event, a completion, the next timer or a wake-up; notify() is the
// reactor's wake. I/O never starves: the periodic poll also reaps the
// reactor while threads wait on I/O.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>

#include "core/tcb.hpp"
#include "io/reactor.hpp"
#include "sched/fifo.hpp"
#include "sched/policy.hpp"
#include "stack/provider.hpp"
#include "weft/weft.h"

namespace weft::detail {

struct Runtime;
class BlockingGraph;
class KernelDoor;

// Dispatches between two polls of timers and inbox while threads are always
// ready: amortises the clock read to well under 1 ns per switch while a
// timer or remote wake-up waits at most 64 thread time slices.
inline constexpr uint32_t kPollInterval = 64;

// How long an idle vproc of a multi-vproc runtime watches its inbox before
// it sleeps in the kernel, unless configured (weft_config.idle_spin_us,
// WEFT_IDLE_SPIN_US). 50 µs: measured in docs/tuning.md.
inline constexpr uint64_t kIdleSpinNs = 50000;

// Work stealing (docs/stealing.md): how long a vproc must have had threads
// waiting, at every look, while another vproc idles, before it gives some
// away (weft_config.steal_after_us); and the most it gives at once.
inline constexpr uint64_t kStealAfterNs = 1000000;
inline constexpr size_t kGiveMax = 64;
// While another vproc idles, a busy one looks at its queue every this many
// dispatches (a clock read); after a look that found nothing it may give, it
// waits twice as long before the next, up to kGiveBackoffMaxNs.
inline constexpr uint32_t kShareInterval = 16;
inline constexpr uint64_t kGiveBackoffMaxNs = 2'000'000;

// Counters written only by the owning vproc (relaxed, no RMW: a plain add on
// x86) and read by anyone.
class Counter {
public:
    void add(uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
    uint64_t get() const { return v_.load(std::memory_order_relaxed); }

private:
    std::atomic<uint64_t> v_{0};
};

// A signed count written by one kernel thread (no read-modify-write), read by any.
class LocalCount {
public:
    void add(int64_t n) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
    void operator++() { add(1); }
    void operator--() { add(-1); }
    int64_t get() const { return v_.load(std::memory_order_relaxed); }

private:
    std::atomic<int64_t> v_{0};
};

struct VprocCounters {
    Counter switches, yields, created, exited;
    Counter parks[WEFT_PARK_REASON_COUNT];
    Counter remote_wakeups, timers_fired, idle_sleeps;
    Counter io_syscalls, io_parks, io_waits, io_completions, sendfile_bytes, offloaded;
    Counter shed; // weft_admit answered 0
    Counter steals, steals_failed, migrations_in, migrations_out; // work stealing
    std::atomic<uint64_t> created_remotely{0}; // threads other vprocs created with this home
    std::atomic<uint64_t> idle_wakeups{0};     // notify() found it asleep (written by the notifier)
};

// Multi-producer single-consumer stack of ready threads, drained in FIFO order.
class Inbox {
public:
    void push(Tcb *t) { push_chain(t, t); }
    // first .. last, linked through next, newest first (drain reverses).
    void push_chain(Tcb *first, Tcb *last) {
        Tcb *h = head_.load(std::memory_order_relaxed);
        do {
            last->next = h;
        } while (!head_.compare_exchange_weak(h, first, std::memory_order_seq_cst, std::memory_order_relaxed));
    }
    bool empty() const { return head_.load(std::memory_order_seq_cst) == nullptr; }
    // Everything pushed so far, oldest first.
    Tcb *drain() {
        if (!head_.load(std::memory_order_relaxed)) return nullptr;
        Tcb *t = head_.exchange(nullptr, std::memory_order_acquire);
        Tcb *fifo = nullptr;
        while (t) { // reverse LIFO into FIFO
            Tcb *n = t->next;
            t->next = fifo;
            fifo = t;
            t = n;
        }
        return fifo;
    }

private:
    std::atomic<Tcb *> head_{nullptr};
};

struct Vproc {
    Vproc(Runtime *rt, int index, bool smp, StackRegions &regions, ChunkSlabs &slabs);
    ~Vproc();

    Runtime *const rt;
    const int index;
    const bool smp;               // more than one vproc: sync objects use real locks
    Tcb *current = nullptr;       // running thread, or &loop
    // (before pol: the TAP policy's create() sets it, and members start in order)
    void *tap = nullptr;          // the TAP policy's state when it runs (sched/tap.hpp): the wrappers ask it for appointments
    const PolicyOps *pol;         // scheduling policy and its per-vproc state
    void *pol_state;
    const bool fifo;              // pol is kFifoPolicy: call its queue inline
    bool run_next = false;        // fifo and RuntimeConfig::run_next: enqueue_next runs t next (sched/fifo.hpp)
    bool stealing = false;        // Runtime::stealing
    bool park_hooks = false;      // a park calls out: the blocking graph, or the policy's on_park
                                  //   (one byte for the park path to test; set in the constructor)
    // What every switch reads or writes sits here, in the struct's first
    // lines, so that a switch touches two or three lines of its vproc, not
    // five spread over 1.3 KiB (measured: yield 6.9 -> 6.3 ns).
    uint32_t poll_countdown = kPollInterval;
    // What the context that runs after the next switch must finish: an
    // exited thread to reap, or (kMovingTag set) a thread moving to another
    // vproc (weft_migrate), to hand over now that it has switched out. One
    // word, so the switch tests one load as it did before threads moved.
    Tcb *dead = nullptr;
    static constexpr uintptr_t kMovingTag = 1;
    // The FIFO policy's run queue, inside the vproc (kFifoPolicy's state
    // points here): a pick reads it at a fixed offset from the vproc, not
    // through pol_state, one load fewer on the way to the next thread.
    FifoQueue runq;
    int *errno_loc = nullptr;     // &errno of this vproc's kernel thread (fixed for its life)
    uint64_t *eh_globals = nullptr; // its C++ exception globals (__cxa_get_globals, also fixed)
    VprocCounters stats;          // (switches and parks first)
    TimerHeap timers;
    Inbox inbox;                  // threads made ready by other kernel threads
    std::atomic<uint32_t> sleeping{0}; // 1 while idle_wait sleeps in the reactor
    // Work stealing: 1 while this vproc idles and asks for threads. Whoever
    // turns it back to 0 (a giver, or the vproc itself) takes it off
    // Runtime::idle_vprocs.
    std::atomic<uint8_t> wants_work{0};
    uint8_t pin_on_start = 0;     // kPinnedRan unless work stealing may move threads that have run (WEFT_STEAL=2)
    uint64_t busy_since = 0;      // first look of the current run of looks that found threads waiting (0: none)
    uint64_t give_not_before = 0; // after a look that found nothing to give: when to look again
    uint64_t give_backoff = 0;    // ... and the wait after the next such look
    uint32_t poll_reload = kPollInterval; // dispatches between dispatch_polls: kShareInterval when stealing
    uint32_t looks = 0;           // dispatch_polls since the last full poll
    std::unique_ptr<Reactor> reactor; // made on the vproc's own kernel thread
    uint32_t io_waiters = 0;      // threads parked on a descriptor, an operation or the pool
    int tid = 0;                  // its kernel thread's id while it runs this vproc, for debuggers
                                  //   (here: in padding, so no hot field moves)
    sigset_t sigmask_before;      // the kernel thread's signal mask before it ran this vproc
    // The kernel thread's split-stack guard word (%fs:0x70) before weft took
    // it: weft threads on fixed stacks run with 0 (no check fires), and a
    // program whose other code was built with -fsplit-stack had libgcc set
    // the initial thread's to the bottom of the process stack, which every
    // weft stack lies below (weft-run aborted in __morestack at start-up).
    const void *ss_guard_before = nullptr;
    // Completion-based operations (disk reads and writes, fsync, splice) this
    // vproc still submits one by one, each at once, before the turn's batch
    // takes over; refilled to kSubmitsPerIdle whenever it idles. Held for
    // the batch, the reads of a few readers reached this VM's disk together
    // and came back together, and the readers moved in lock-step (0.84-0.97x
    // NPTL at 4-64 random O_DIRECT readers); submitted at once, 1.03-1.05x.
    // But each submission costs a doorbell, on a virtual disk a trap to the
    // host: where hits keep the vproc busy (200 readers, 1-10 % misses),
    // submitting every miss at once cost a quarter of the throughput. A vproc
    // that has not idled since its last kSubmitsPerIdle is that busy one.
    uint32_t submits_now = 0;
    static constexpr uint32_t kSubmitsPerIdle = 32;
    StackPool stacks;
    ChunkPool chunks;             // linked stacks' chunks (stack/linked.hpp)
    uint64_t id_next = 0, id_end = 0; // block of thread ids this vproc hands out
    Tcb loop{};                   // the scheduler's context (kernel thread stack)
    pthread_t kthread{};          // for vprocs > 0
    void *altstack = nullptr;     // signal stack for overflow reports
    BlockingGraph *graph = nullptr; // the blocking graph of its threads (observe/graph.hpp), null: off
    // The graph's and the resource-aware policy's readings, written by this
    // vproc only (plain adds), read by any: descriptors its threads opened
    // through weft less those they closed, and threads they created.
    LocalCount res_fds, res_threads;
    // The door in the kernel (weft_door_listen, sched/kernel_door.hpp),
    // owned; set once on this vproc, read by any (weft_stats_get).
    std::atomic<KernelDoor *> kernel_door{nullptr};

    // --- scheduling: called on this vproc only ---
    void run_loop();              // until the runtime stops
    void poll();                  // drain the inbox, expire timers, reap I/O
    void poll_local();            // drain the inbox, expire timers
    // Threads parked for I/O are counted in io_waiters, so that the vproc
    // polls its reactor while they wait. A thread given to another vproc
    // after its wake-up is taken off the count by the giver (Tcb::io_counted).
    void io_wait_begin() {
        ++io_waiters;
        current->io_counted = true;
    }
    void io_wait_end() {
        Tcb *self = current;
        if (self->io_counted) {
            --io_waiters;
            self->io_counted = false;
        }
    }
    bool nothing_ready() const {
        return fifo ? runq.count == 0 : pol->ready(pol_state) == 0;
    }
    Tcb *pick() { return fifo ? runq.pop() : pol->pick(pol_state); }
    Tcb *pick_next() { // pick, polling first every kPollInterval dispatches
        if (--poll_countdown == 0) dispatch_poll();
        return pick();
    }
    // Switch away from the current thread, which the caller has already put
    // where it belongs (run queue, a wait queue, or nowhere when dead).
    // Returns the current thread once it runs again (see switch_to).
    [[gnu::always_inline]] Tcb *schedule() {
        Tcb *cur = current;
        Tcb *next = pick_next();
        if (next == cur) { // woken before it managed to switch out
            cur->state = ThreadState::Running;
            return cur;
        }
        return switch_to(cur, next ? next : &loop);
    }
    // Always inline: the switch must not sit inside a call (arch/context.hpp).
    // Returns `cur` once it is resumed, so callers need not keep it (nor the
    // vproc: cur->vp) live across the switch, which clobbers every register.
    [[gnu::always_inline]] inline Tcb *switch_to(Tcb *cur, Tcb *next);
    void enqueue_local(Tcb *t) {
        if (fifo) runq.push(t);
        else pol->enqueue(pol_state, t);
    }
    // A thread this vproc's current thread has just created, or a joiner its
    // exiting child hands back to: next to run, as a call or a return would
    // be (FIFO's run-next, bounded for fairness; other policies: enqueue).
    void enqueue_next(Tcb *t) {
        if (run_next) runq.push_next(t);
        else enqueue_local(t);
    }
    void after_switch();          // reap `dead`, or hand a moving thread over
    void reap_dead();
    void finish_move(Tcb *t);     // hand t to its new vproc, now that it has switched out
    void dispatch_poll();         // every poll_reload dispatches: look for idle vprocs, poll every kPollInterval
    // Work stealing: an idle vproc that asked for work, now claimed (nullptr:
    // none), and handing it ready threads ts[0..n), to run in that order.
    Vproc *claim_idle();
    void give(Vproc *to, Tcb **ts, size_t n);
    // Settle what ties a ready thread to this vproc before it leaves for `to`
    // (its timer, io_waiters, blocking-graph record) and make `to` its home.
    void let_go(Tcb *t, Vproc *to);
    uint64_t next_thread_id() {
        if (__builtin_expect(id_next == id_end, 0)) refill_thread_ids();
        return id_next++;
    }
    void refill_thread_ids();

    // --- called from any kernel thread ---
    // Out of line: it is the rare path of make_ready(), and inlined its CAS
    // loop and futex call cost every caller extra saved registers.
    void push_remote(Tcb *t);
    void notify();

    inline void check_stack(Tcb *t);
    // A linked-stack chunk of t has been overwritten below its guard.
    [[noreturn]] void report_overflow(Tcb *t) { stack_overflow(t); }
    // Linked stacks at a switch: the guard word follows the running thread;
    // a thread going to sleep gives back the spare chunk it keeps against
    // the hot split (an idle thread holds its first chunk only).
    void switch_linked(Tcb *cur, Tcb *next) {
        if (cur->chunk && cur->state == ThreadState::Parked && cur->chunk->spare) {
            chunks.release(cur->chunk->spare);
            cur->chunk->spare = nullptr;
        }
        set_stack_guard(next->chunk ? next->chunk->guard : nullptr);
    }
    // Once per thread, at its end: a frame larger than the red page may have
    // skipped it and landed on the TCB of the stack below, without a fault.
    // That TCB's magic is kTcbMagic (live) or 0 (freed, or never used) —
    // anything else is this thread's overflow. Not at every switch: the
    // neighbour's line is usually not in cache.
    void check_slot_below(Tcb *t) {
        if (!t->stack.slot_below) return;
        // (Another thread's TCB, perhaps freed meanwhile on another vproc:
        // either value is fine, the read only has to be a whole one.)
        uint32_t m = __atomic_load_n(&tcb_at_top(t->stack.red_page())->magic, __ATOMIC_RELAXED);
        if (__builtin_expect(m != kTcbMagic && m != 0, 0)) stack_overflow(t);
    }

private:
    [[noreturn]] void overwritten(Tcb *t);
    // An exception is in flight on either side of a switch: swap the C++
    // runtime's exception globals (rare: out of line).
    [[gnu::noinline, gnu::cold]] void switch_eh(Tcb *cur, Tcb *next) {
        cur->saved_eh[0] = eh_globals[0];
        cur->saved_eh[1] = eh_globals[1];
        if (cur->saved_eh[0] | cur->saved_eh[1]) cur->switch_care |= Tcb::kCareEh;
        eh_globals[0] = next->saved_eh[0];
        eh_globals[1] = next->saved_eh[1];
        next->saved_eh[0] = next->saved_eh[1] = 0;
        next->switch_care &= static_cast<uint8_t>(~Tcb::kCareEh);
    }
    // A switch where either side has a bit of Tcb::switch_care set: the
    // stack check of an unguarded thread going out, next's exception state,
    // and for linked stacks the split-stack guard word, which follows the
    // running thread (its current chunk's; 0, where checks never fire, for
    // everyone else). Out of line: the usual switch tests one byte of each.
    // No split-stack check of its own: it moves the guard word, and must not
    // itself run on a chunk that __morestack would unlink on its return
    // (its frame is a few registers, inside the reserve below the guard).
    __attribute__((no_split_stack)) void switch_careful(Tcb *cur, Tcb *next); // (vproc.cc)
    [[noreturn]] void report_deadlock();
    void idle_wait();
    void share_work();            // give ready threads to an idle vproc, if it is time to
    void arrived(Tcb *t);         // t was given to this vproc
    void ask_for_work();          // idle: let busy vprocs know
    void stop_asking();
    bool spin_for_work(uint64_t deadline);
    [[noreturn]] void stack_overflow(Tcb *t);
};

// The vproc the calling kernel thread runs, or nullptr outside weft_main.
// initial-exec: one %fs-relative load, no __tls_get_addr on the hot path.
// constinit: no dynamic initialisation, so no TLS wrapper call on access.
extern constinit thread_local Vproc *tls_vproc __attribute__((tls_model("initial-exec")));

// Stop loudly if `t` has run off its stack: an unguarded stack's red page
// must still read zero (stack/provider.hpp), and the stack pointer of the
// running thread must be inside its stack. Called at every switch out, when
// a yield finds nobody to switch to, and when a thread ends.
// A guarded stack needs neither test: running below it faults on the guard
// (and the fault handler compares the stack pointer).
inline void Vproc::check_stack(Tcb *t) {
    if (__builtin_expect(t->stack_guarded, 1)) return;
    if (t->chunk) { // linked: the current chunk's canary, and the stack pointer above its header
        if (!t->chunk->intact() || static_cast<char *>(__builtin_frame_address(0)) < t->chunk->base())
            stack_overflow(t);
        return;
    }
    if (*t->stack.canary() != 0 || static_cast<char *>(__builtin_frame_address(0)) < t->stack.lo)
        stack_overflow(t);
}

// Debug builds: the calling kernel thread runs vp. Catches a Vproc pointer
// kept across a switch after which the thread may run on another vproc
// (work stealing): code that can park takes `Vproc *&vp` and gets it
// reloaded, and anything else must reload tls_vproc.
#ifdef NDEBUG
#define WEFT_DCHECK_HOME(vp) ((void)0)
#else
[[noreturn]] void stale_vproc(const Vproc *vp, const char *where);
#define WEFT_DCHECK_HOME(vp) \
    (__builtin_expect((vp) != ::weft::detail::tls_vproc, 0) ? ::weft::detail::stale_vproc(vp, __func__) : (void)0)
#endif

inline Tcb *Vproc::switch_to(Tcb *cur, Tcb *next) {
    // A frame larger than the red page can skip it and land on the TCB of
    // the thread whose stack lies below: catch that before running it.
    if (__builtin_expect(next->magic != kTcbMagic, 0)) overwritten(next);
    stats.switches.add();
    cur->saved_errno = *errno_loc;
    // The C++ runtime keeps the exceptions being handled (for `throw;` and
    // std::current_exception) and the uncaught count per kernel thread; they
    // belong to the weft thread. Itanium ABI: {caughtExceptions, uncaughtExceptions}.
    // Invariant: a running thread's saved_eh is zero (kCareEh clear), so when
    // neither side has an exception in flight (almost always) there is nothing
    // to store. Ours are tested here; next's (kCareEh) with the rest of what
    // makes a switch careful, in one byte of each side (Tcb::switch_care):
    // an unguarded stack to check, a linked stack's guard word to move, an
    // exception to restore. (switch_eh first: it may set cur's kCareEh and
    // clears next's, so switch_careful finds nothing left to restore.)
    if (__builtin_expect((eh_globals[0] | eh_globals[1]) != 0, 0)) switch_eh(cur, next);
    if (__builtin_expect((cur->switch_care | next->switch_care) != 0, 0)) switch_careful(cur, next);
    current = next;
    next->state = ThreadState::Running;
    FiberSwitch fiber;
    fiber.start(next->stack.lo, next->stack.size, cur->state == ThreadState::Dead, next->tsan.get());
    static_assert(offsetof(Tcb, ctx) == 0, "the switch hands back &ctx as the Tcb");
    Tcb *self = reinterpret_cast<Tcb *>(context_switch(&cur->ctx, &next->ctx));
    fiber.finish();
    // Back on self (== cur), on its home vproc: `this` unless another vproc
    // has taken it meanwhile (work stealing).
    Vproc *vp = self->vp;
    if (vp->dead) vp->after_switch();
    *vp->errno_loc = self->saved_errno;
    return self;
}

// Make a parked thread ready: on its home vproc's run queue when we are
// that vproc, else through its inbox. The caller has won the thread's claim
// (core/park.hpp) and holds no lock of the object the thread waited on: the
// thread may run, and free that object, the moment this returns.
inline void make_ready(Tcb *t, int result) {
    t->wake_result = result;
    t->state = ThreadState::Ready;
    Vproc *me = tls_vproc;
    if (t->vp == me) me->enqueue_local(t);
    else t->vp->push_remote(t);
}

// make_ready for a thread whose home is the calling vproc vp.
inline void make_ready_here(Vproc *vp, Tcb *t, int result) {
    t->wake_result = result;
    t->state = ThreadState::Ready;
    vp->enqueue_local(t);
}

// make_ready for a thread of the calling vproc vp that should run next
// (Vproc::enqueue_next: a joiner its exiting child hands back to).
inline void make_ready_next(Vproc *vp, Tcb *t, int result) {
    t->wake_result = result;
    t->state = ThreadState::Ready;
    vp->enqueue_next(t);
}

uint64_t now_ns();

} // namespace weft::detail
