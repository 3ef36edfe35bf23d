// The thread control block. It lives at the top of the thread's own stack
// (one allocation per thread, and the page an idle thread touches anyway), so
// an idle thread costs one page plus page-table entries.
//
// Ownership of fields, which is what makes cross-vproc operation safe:
//  - ctx, state transitions Running<->Ready/Parked, timer, saved_errno, tsd,
//    stack, vp: only the home vproc (the thread itself or its scheduler).
//    The home changes only while the thread is ready in its run queue: the
//    old home gives it away (Vproc::share_work) and the new one takes it
//    from its inbox.
//  - wq_prev/wq_next/waiting_on: the lock of the wait queue it is parked on.
//  - wake_result and the Parked->Ready transition: the one party that wins
//    `claimed` for this park — a waker that removed it from its queue, or its
//    own timer (see core/park.hpp).
//  - joiner/detached/exited/joined: join_lock.
#pragma once

#include <atomic>
#include <cstdint>

#include "arch/context.hpp"
#include "core/spin.hpp"
#include "core/timer.hpp"
#include "stack/linked.hpp"
#include "stack/provider.hpp"

namespace weft::detail {

struct Vproc;
struct WaitQueue;
struct GraphThread;

enum class ThreadState : uint8_t {
    Ready,   // in a run queue or an inbox
    Running, // the current thread of its vproc
    Parked,  // waiting for exactly one wake-up
    Dead,    // finished; stack kept until joined (or freed if detached)
};

struct TsdSlot {
    uint64_t seq;  // key generation this value belongs to
    void *value;
};

// Tcb::pinned: created with a home_vproc; waiting for an operation in its
// vproc's io_uring ring (run_op: only that vproc can cancel it); has run,
// and work stealing moves only threads that have not (the default,
// WEFT_STEAL=1: its frames may hold the address of its kernel thread's
// errno or another thread_local, docs/stealing.md).
inline constexpr uint8_t kPinnedHome = 1, kPinnedOp = 2, kPinnedRan = 4;

// Tcb::migrated: given to another vproc, which has not taken it in yet;
// kMovingMeasured: the blocking graph had a record of it (made anew there).
inline constexpr uint8_t kMoving = 1, kMovingMeasured = 2;

inline constexpr uint32_t kTcbMagic = 0x77656674; // "weft"
inline constexpr size_t kThreadNameMax = 32;
inline constexpr uintptr_t kTcbAlign = 64; // a cache line

// Names of enum weft_park_reason (weft_park_reason_name, and debuggers
// read them through core/debug.hpp).
extern const char *const kParkReasonNames[];

// Fields without an initializer are written before anything reads them
// (by the switch, a waker, park, or create_thread): creating a thread does
// not pay for storing them. A Tcb built any other way must be value-
// initialised (`Tcb t{}`), as Vproc::loop is.
struct Tcb {
    // ---- cache line 0: what every switch and wake-up touches ----
    // A park and its wake-up touch lines 0 and 1 only (a cond or mutex
    // wait adds line 2's queue links): with thousands of threads taking
    // turns, every line a switch brings in is a likely cache miss.
    Context ctx;                 // saved registers while switched out (arch/context.hpp)
    Vproc *vp = nullptr;         // home vproc: where it runs, where wake-ups go
    Tcb *next;                   // run-queue, inbox or WakeList link (set when linked)
    StackChunk *chunk;           // linked stacks: the current chunk; null: a fixed stack (set by create_thread)
    const void *park_site;       // where it last blocked (blocking-site id, set by park)
    // ---- cache line 1 ----
    uint32_t magic;              // kTcbMagic while the handle is valid
    ThreadState state = ThreadState::Ready;
    uint8_t park_reason;         // weft_park_reason of the current/last park (set by park)
    std::atomic<uint8_t> claimed{0}; // 1 once a waker (or the timer) owns this park's wake-up
    bool timed_wait = false;     // parked with a deadline: expire_wait may end the park early
    bool queued_timed;           // set with the wait-queue links (enqueue_self): the queued wait has a deadline (take_first)
    bool interruptible = false;  // the thread lets expire_wait end its timed waits (park.hpp)
    bool expire_next = false;    // expire_wait came while it was not parked: its next timed wait ends at once
    uint8_t pinned = 0;          // kPinned*: never given to another vproc while non-zero
    bool io_counted = false;     // counted in its vproc's io_waiters (Vproc::io_wait_begin/end)
    uint8_t migrated = 0;        // in transit to a new vproc (kMoving..., set by the giver, cleared on arrival)
    bool stack_guarded = false;  // stack.guarded, here for check_stack at every switch-out (set with stack)
    // What makes a switch from or to this thread take the slow path, in one
    // byte for the switch to test with the other thread's: kCareUnguarded
    // (!stack_guarded: check_stack has a canary to read), kCareLinked
    // (chunk != nullptr: the split-stack guard moves), kCareEh (saved_eh is
    // non-zero: an exception to restore when it next runs).
    uint8_t switch_care = 0;
    static constexpr uint8_t kCareUnguarded = 1, kCareLinked = 2, kCareEh = 4;
    int saved_errno;             // errno of this thread while switched out (set at switch-out)
    int wake_result;             // set by the waker: 0, ETIMEDOUT, ...
    uint64_t io_timeout = 0;     // I/O limit per blocking call, ns (0: none)
    uint64_t io_deadline = 0;    // absolute I/O deadline, ns (0: none)
    GraphThread *graph = nullptr; // the blocking graph's record of it (observe/graph.hpp), while the graph is on
    WaitQueue *waiting_on = nullptr; // queue it is parked on; cleared (release) by whoever removes it
    // ---- the rest ----
    Tcb *wq_prev;                // wait-queue links (set by WaitQueue::push_back,
    Tcb *wq_next;                //   guarded by the queue's lock)
    uintptr_t wait_data;         // what the queue's owner needs (e.g. reader/writer)
    uint64_t id;                 // unique in the process, never reused
    bool detached = false;       // join_lock
    bool exited = false;         // join_lock: off its stack for good
    bool joined = false;         // join_lock: a joiner has claimed it
    uint64_t saved_eh[2] = {0, 0}; // its C++ exception state while switched out (see vproc.hpp)
    Timer timer;                 // park deadline (sleep, timed waits, I/O)
    Spin join_lock;
    Tcb *joiner = nullptr;       // join_lock: thread waiting in join
    void *retval;                // result, valid once exited
    void *(*fn)(void *);         // entry function and argument (set by create_thread)
    void *arg;
    Stack stack;                 // the stack this TCB sits on top of (linked: its first chunk's usable part)
    TsdSlot *tsd = nullptr;      // thread-specific values, grown on demand
    uint32_t tsd_len = 0;
    char name[kThreadNameMax];   // name[0] == 0: unnamed (set by create_thread)
    uint64_t policy_word = 0;    // the scheduling policy's own (resource: when queued new, then how long it waited; tap: level)
    void *appt = nullptr;        // TAP: the call it waits in (sched/tap.hpp TapCall), while it does
    std::atomic<uint32_t> tap_held{0}; // TAP locking: mutexes it holds that others wait for
    // The POSIX shim's cancellation (src/posix/cancel.cc): its state bits
    // (the pending bit is set by other threads) and the innermost cleanup
    // buffer. Here rather than in a key: pthread_cancel reaches another
    // thread's, and every cancellation point reads its own.
    std::atomic<uint8_t> cancel{0};
    void *cleanup = nullptr;
    [[no_unique_address]] TsanFiber tsan; // ThreadSanitizer builds: its fiber context (arch/context.hpp); else no bytes
};

// Where the TCB of a thread whose stack ends at `hi` lives: the top of the
// stack, cache-line aligned.
inline Tcb *tcb_at_top(char *hi) {
    return reinterpret_cast<Tcb *>((reinterpret_cast<uintptr_t>(hi) - sizeof(Tcb)) & ~(kTcbAlign - 1));
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(Tcb, park_site) + sizeof(void *) <= kTcbAlign, "line 0 holds what every switch touches");
static_assert(offsetof(Tcb, waiting_on) + sizeof(void *) <= 2 * kTcbAlign, "line 1 holds the rest of a park");
#pragma GCC diagnostic pop

// Start bringing in what a switch to t will touch first, while the thread
// before it runs: its TCB (line 0 is read here for the saved stack pointer,
// line 1 is prefetched) and the kPrefetchFrameLines lines at the saved
// stack pointer: the frames the resumed thread returns through (a blocking
// read's weft_read -> do_readv -> wait_fd take 464 bytes). The scheduler
// calls it for the thread after the one it is about to run. With thousands
// of threads taking turns each of these lines is a cache miss at the
// resume; one thread's run (a few hundred ns with a system call) hides most
// of it. Pipe tokens (Capriccio Fig. 2), 2026-11-29: +3 to +34 % from 256
// pipes up, level below (docs/benchmarks.md, "Prefetching the next thread").
inline constexpr int kPrefetchFrameLines = 8; // 4: half the gain; 10 or 12: no more
inline void prefetch_for_switch(const Tcb *t) {
    __builtin_prefetch(reinterpret_cast<const char *>(t) + kTcbAlign);
    const char *sp = static_cast<const char *>(t->ctx.sp);
    for (int i = 0; i < kPrefetchFrameLines; ++i) __builtin_prefetch(sp + 64 * i);
}

inline Tcb *tcb_of_timer(Timer *t) {
    return reinterpret_cast<Tcb *>(reinterpret_cast<char *>(t) - offsetof(Tcb, timer));
}

} // namespace weft::detail
