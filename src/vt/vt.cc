// Virtual threads (include/weft/vt.hpp, docs/virtual-threads.md): the
// event loop per vproc, the continuation pools, and the awaitables' way
// into weft's reactor and timers.
//
// The loop (virtual-threads.txt, Fig. 5) is a weft thread of its vproc. It
// runs every virtual thread on its active queue, each until it suspends;
// those that yield go to the yield queue, which becomes the next pass's
// active queue along with everything made ready meanwhile — by the
// reactor (an IoWaiter whose wake is a callback, not a thread), a timer,
// a joiner, or another vproc through the loop's inbox (the paper's pipe
// and metathread). Between passes it yields the vproc to its other weft
// threads and its reactor; with nothing to run it sleeps on a semaphore.
//
// A virtual thread is resumed where its innermost coroutine suspended;
// coroutines awaiting coroutines pass control by symmetric transfer, so a
// deep chain uses no stack. After resume() returns, the loop touches only
// thread-local state: a virtual thread that has just suspended may already
// be running on another vproc (migration, an I/O event delivered there).
#include "weft/vt.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>

#include "core/park.hpp"
#include "core/runtime.hpp"
#include "io/fd.hpp"
#include "io/offload.hpp"
#include "io/wrap.hpp"

namespace weft::vt {

namespace wd = weft::detail;

// ---- statistics ----------------------------------------------------------------

namespace {
// Per kernel thread (so per vproc), written only by it: a plain load and
// store, no locked instruction on the paths they count. stats() sums them.
struct ThreadCounters {
    std::atomic<uint64_t> spawned{0}, finished{0}, resumes{0}, io_parks{0}, migrations{0}, frames{0};
    std::atomic<int64_t> frame_bytes{0}; // may go below 0: a frame freed on another vproc
    ThreadCounters *next = nullptr;
};
std::atomic<ThreadCounters *> all_counters{nullptr}; // every block ever made (never freed)
std::atomic<uint64_t> largest_frame{0};
std::atomic<uint64_t> slab_bytes{0}; // Stats::pool_bytes
thread_local ThreadCounters *tl_counters = nullptr;

// Push n onto a lock-free stack linked through its `next` (any thread).
template <class N> void push_front(std::atomic<N *> &head, N *n) {
    N *h = head.load(std::memory_order_relaxed);
    do n->next = h;
    while (!head.compare_exchange_weak(h, n, std::memory_order_release, std::memory_order_relaxed));
}

ThreadCounters &counters() {
    if (__builtin_expect(tl_counters == nullptr, 0)) {
        auto *c = new ThreadCounters;
        push_front(all_counters, c);
        tl_counters = c;
    }
    return *tl_counters;
}

template <class T> inline void add(std::atomic<T> &c, T n = 1) { c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
} // namespace

Stats stats() noexcept {
    Stats s{};
    int64_t bytes = 0;
    for (ThreadCounters *c = all_counters.load(std::memory_order_acquire); c; c = c->next) {
        s.spawned += c->spawned.load(std::memory_order_relaxed);
        s.finished += c->finished.load(std::memory_order_relaxed);
        s.resumes += c->resumes.load(std::memory_order_relaxed);
        s.io_parks += c->io_parks.load(std::memory_order_relaxed);
        s.migrations += c->migrations.load(std::memory_order_relaxed);
        s.frames += c->frames.load(std::memory_order_relaxed);
        bytes += c->frame_bytes.load(std::memory_order_relaxed);
    }
    s.live = s.spawned - s.finished;
    s.frame_bytes = bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
    s.largest_frame = largest_frame.load(std::memory_order_relaxed);
    s.pool_bytes = slab_bytes.load(std::memory_order_relaxed);
    return s;
}

// ---- continuation pools ------------------------------------------------------------

namespace detail {
namespace {
// 16-byte classes up to 4 KiB: a frame or control block costs its size
// rounded to 16, which is the malloc alignment coroutine frames need.
constexpr size_t kGrain = 16, kClasses = 256;
constexpr size_t class_of(size_t n) { return (n + kGrain - 1) / kGrain; } // 1-based; 0 only for n == 0

// Blocks are carved from 256-KiB slabs, with no malloc header each (16
// bytes a block, two blocks per connection in weft-vtserver). A slab is
// never given back: blocks of every slab end up on every vproc's lists.
// Under AddressSanitizer each block is its own malloc, so that ASan sees
// every frame's bounds and lifetime.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSlabs = false;
#else
constexpr bool kSlabs = true;
#endif
constexpr size_t kSlab = size_t{256} << 10;

// The lists of kernel threads that have ended, for the next ones to take
// (with slabs, a block is never given back to malloc), and every slab.
// Never destroyed: threads may end after static destructors have run.
struct Orphans {
    std::mutex mu;
    void *free[kClasses] = {};
    std::atomic<uint64_t> has[kClasses / 64] = {}; // a bit per class with a list here
    std::vector<void *> slabs;                   // (kept reachable, for leak checkers)
};
Orphans &orphans() {
    static Orphans *o = new Orphans;
    return *o;
}

// One per kernel thread, so one per vproc: no lock. A frame freed on
// another vproc (its virtual thread migrated) joins that vproc's list.
struct FramePool {
    void *free[kClasses] = {};
    char *bump = nullptr, *end = nullptr; // the rest of this thread's slab

    ~FramePool() {
        if (!kSlabs) {
            for (void *&head : free)
                while (head) {
                    void *n = *static_cast<void **>(head);
                    std::free(head);
                    head = n;
                }
            return;
        }
        Orphans &o = orphans();
        std::lock_guard<std::mutex> g(o.mu);
        for (size_t c = 0; c < kClasses; ++c) {
            if (!free[c]) continue;
            void *tail = free[c];
            while (*static_cast<void **>(tail)) tail = *static_cast<void **>(tail);
            *static_cast<void **>(tail) = o.free[c];
            o.free[c] = free[c];
            o.has[c / 64].fetch_or(uint64_t{1} << (c % 64), std::memory_order_relaxed);
        }
    }

    // A block of class c (1-based) when its list is empty.
    void *refill(size_t c) {
        if (!kSlabs) return std::malloc(c * kGrain);
        const size_t i = c - 1;
        Orphans &o = orphans();
        if (o.has[i / 64].load(std::memory_order_relaxed) & (uint64_t{1} << (i % 64))) {
            std::lock_guard<std::mutex> g(o.mu);
            if (void *p = std::exchange(o.free[i], nullptr)) {
                o.has[i / 64].fetch_and(~(uint64_t{1} << (i % 64)), std::memory_order_relaxed);
                free[i] = *static_cast<void **>(p);
                return p;
            }
        }
        const size_t n = c * kGrain;
        if (static_cast<size_t>(end - bump) < n) {
            char *slab = static_cast<char *>(std::malloc(kSlab));
            if (!slab) return nullptr;
            {
                std::lock_guard<std::mutex> g(o.mu);
                o.slabs.push_back(slab);
            }
            slab_bytes.fetch_add(kSlab, std::memory_order_relaxed);
            bump = slab;
            end = slab + kSlab;
        }
        void *p = bump;
        bump += n;
        return p;
    }
};
thread_local FramePool pool;
} // namespace

void *raw_alloc(size_t n) {
    const size_t c = class_of(n);
    if (c == 0 || c > kClasses) {
        if (void *p = std::malloc(n)) return p;
        throw std::bad_alloc();
    }
    if (void *p = pool.free[c - 1]) {
        pool.free[c - 1] = *static_cast<void **>(p);
        return p;
    }
    if (void *p = pool.refill(c)) return p;
    throw std::bad_alloc();
}

void raw_free(void *p, size_t n) noexcept {
    const size_t c = class_of(n);
    if (c == 0 || c > kClasses) return std::free(p);
    *static_cast<void **>(p) = pool.free[c - 1];
    pool.free[c - 1] = p;
}

namespace {
// Frame sizes by coroutine (record_frames): open addressing, never shrinks;
// a spin lock, taken only while recording.
struct SiteTable {
    static constexpr size_t kSlots = 1024;
    std::atomic<bool> on{false};
    std::atomic_flag lock = ATOMIC_FLAG_INIT;
    struct Slot {
        const void *code = nullptr;
        size_t bytes = 0;
        uint64_t count = 0;
    } slots[kSlots];
    void add(const void *code, size_t n) {
        while (lock.test_and_set(std::memory_order_acquire)) {
        }
        size_t i = (reinterpret_cast<uintptr_t>(code) >> 4) % kSlots;
        for (size_t probe = 0; probe < kSlots; ++probe, i = (i + 1) % kSlots) {
            Slot &s = slots[i];
            if (s.code == code || !s.code) {
                s.code = code;
                s.bytes = n;
                ++s.count;
                break;
            }
        }
        lock.clear(std::memory_order_release);
    }
} sites;
} // namespace

[[gnu::noinline]] void *frame_alloc(size_t n) {
    if (__builtin_expect(sites.on.load(std::memory_order_relaxed), 0)) sites.add(__builtin_return_address(0), n);
    ThreadCounters &k = counters();
    add<uint64_t>(k.frames);
    add<int64_t>(k.frame_bytes, static_cast<int64_t>(n));
    if (__builtin_expect(n > largest_frame.load(std::memory_order_relaxed), 0)) {
        uint64_t big = largest_frame.load(std::memory_order_relaxed);
        while (n > big && !largest_frame.compare_exchange_weak(big, n, std::memory_order_relaxed)) {
        }
    }
    return raw_alloc(n);
}

void frame_free(void *p, size_t n) noexcept {
    add<int64_t>(counters().frame_bytes, -static_cast<int64_t>(n));
    raw_free(p, n);
}
} // namespace detail

// ---- virtual threads and loops -------------------------------------------------------

struct Loop;

struct VThread {
    // From the per-vproc pools too: a spawn allocates nothing from malloc
    // once they are warm.
    static void *operator new(size_t n) { return detail::raw_alloc(n); }
    static void operator delete(void *p, size_t n) noexcept { detail::raw_free(p, n); }

    std::coroutine_handle<detail::Promise<void>> top;
    union {
        std::coroutine_handle<> resume;   // where it continues, until it finishes
        std::exception_ptr error;         // once finished (finish()): its body's exception, if any
    };
    Loop *loop = nullptr;                 // the loop it runs on
    VThread *next = nullptr;              // in a queue
    // Parked on a descriptor: the op to try first when it runs. Parked in
    // a sleep: that sleep's timer, tagged with kSleepTag (cancel() ends it).
    detail::IoOp *retry = nullptr;
    Clue *clue = nullptr;                 // the clue it followed last (its stage)
    std::atomic<int> refs{2};             // the runtime's (until finished) and the Handle's
    std::atomic<bool> cancelled{false};   // Handle::cancel was called (set once, any thread)
    // Who waits for its end: nobody, a virtual thread, a weft thread (the
    // address of a semaphore on its stack, tagged with weft_tag), or
    // done_mark() once it has ended. One exchange on each side.
    std::atomic<VThread *> joiner{nullptr};

    static constexpr uintptr_t weft_tag = 2; // (VThreads and semaphores are 8-aligned)
    static constexpr uintptr_t kSleepTag = 1; // in `retry`: a sleep's timer, not an op (both 8-aligned)
    static VThread *done_mark() { return reinterpret_cast<VThread *>(uintptr_t{1}); }
    bool finished() const { return joiner.load(std::memory_order_acquire) == done_mark(); }

    VThread() : resume() {}
    // Deleted only once finished (the runtime's reference goes at finish()).
    ~VThread() { error.~exception_ptr(); }
};
// One cache line per virtual thread, besides its frames.
static_assert(sizeof(VThread) <= 64, "VThread fits a cache line");

namespace detail {
struct ClueAccess {
    static std::atomic<uint64_t> &busy(Clue &c) { return c.busy_; }
    static std::atomic<Clue *> &previous(Clue &c) { return c.previous_; }
    static std::atomic<uint64_t> &same(Clue &c) { return c.same_; }
    static std::atomic<uint64_t> &different(Clue &c) { return c.different_; }
    static std::atomic<uint64_t> &follows(Clue &c) { return c.follows_; }
    static Clue *&next(Clue &c) { return c.next_; }
    static Clue *&prev(Clue &c) { return c.prev_; }
};
} // namespace detail

namespace {

void unref(VThread *v) {
    if (v->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete v;
}

struct Queue {
    VThread *head = nullptr, *tail = nullptr;
    void push(VThread *v) {
        v->next = nullptr;
        if (tail) tail->next = v;
        else head = v;
        tail = v;
    }
    VThread *pop() {
        VThread *v = head;
        if (v && !(head = v->next)) tail = nullptr;
        return v;
    }
    void append(Queue &o) {
        if (!o.head) return;
        if (tail) tail->next = o.head;
        else head = o.head;
        tail = o.tail;
        o.head = o.tail = nullptr;
    }
    bool empty() const { return head == nullptr; }
};

} // namespace

struct Loop {
    int vp;
    // Virtual threads it runs (running or waiting) * 2, + 1 while its weft
    // thread runs: one word, so that the thread's end (1 -> 0) and a spawn
    // counting one in (+2) cannot miss each other.
    std::atomic<uint64_t> state{0};
    std::atomic<uint64_t> busy_ns{0};      // running virtual threads (while clues exist); its thread writes
    Queue active, yielded;                // touched on vp's kernel thread only
    std::atomic<VThread *> inbox{nullptr}; // from other vprocs (a lock-free stack)
    // The loop's weft thread parks while it has nothing to run; whoever
    // turns `sleeping` off wakes it, once. Not a weft semaphore: a waker
    // may be an offload worker, a kernel thread of no vproc, and with one
    // vproc weft's sync objects take no lock (Vproc::smp), so a post from
    // there could race the loop's wait and be lost. A park and a claimed
    // wake-up (what the offload pool does for its waiters) are safe from
    // any thread.
    std::atomic<bool> sleeping{false};
    wd::Tcb *thread = nullptr;             // the loop's weft thread, while sleeping is on
    // Cancellations for virtual threads of this loop (Handle::cancel, from
    // any thread): the wait each is parked in can only be ended here, on the
    // vproc that owns its timer (a lock-free stack).
    struct CancelNode {
        VThread *v;
        CancelNode *next;
    };
    std::atomic<CancelNode *> cancels{nullptr};

    explicit Loop(int v) : vp(v) {}
    ~Loop(); // (after its runtime: drops cancellations nobody took)

    void wake() {
        if (sleeping.exchange(false, std::memory_order_seq_cst)) wd::wake(thread, 0, true);
    }
    // On the loop's weft thread: park unless something came meanwhile.
    void sleep() {
        wd::Vproc *v = wd::tls_vproc;
        wd::Tcb *self = v->current;
        thread = self;
        self->state = wd::ThreadState::Parked; // before a waker can see sleeping
        sleeping.store(true, std::memory_order_seq_cst);
        if ((inbox.load(std::memory_order_seq_cst) || cancels.load(std::memory_order_seq_cst) || !active.empty()) &&
            sleeping.exchange(false, std::memory_order_seq_cst)) { // taken back before any waker saw it
            self->state = wd::ThreadState::Running;
            return;
        }
        wd::park(v, WEFT_PARK_OTHER, WEFT_SITE(), 0);
    }
    void take_inbox() {
        VThread *v = inbox.exchange(nullptr, std::memory_order_acquire);
        VThread *rev = nullptr; // oldest first
        while (v) {
            VThread *n = v->next;
            v->next = rev;
            rev = v;
            v = n;
        }
        while (rev) {
            VThread *n = rev->next;
            active.push(rev);
            rev = n;
        }
    }
};

namespace {

// The loops of the running runtime, by vproc: made once, kept until the
// runtime ends. A loop's weft thread runs while it has virtual threads
// (weft_main waits for every weft thread, and a loop with nothing to do
// would wait for ever): it ends when the last one has, and the next spawn
// there starts another (Loop::state).
struct Registry {
    std::atomic<void *> rt{nullptr};      // a later weft_main starts afresh
    std::atomic<Loop *> loops[64] = {};
    std::mutex lock; // making a loop, starting its thread
} reg;

thread_local VThread *tl_current = nullptr;
thread_local VThread *tl_ended = nullptr; // set by top_done during a resume

void make_ready(VThread *v) {
    Loop *l = v->loop;
    if (weft_vproc_self() == l->vp) {
        l->active.push(v);
    } else {
        push_front(l->inbox, v);
    }
    l->wake();
}

void finish(VThread *v) {
    v->loop->state.fetch_sub(2, std::memory_order_release);
    auto &p = v->top.promise();
    new (&v->error) std::exception_ptr(std::move(p.error)); // (resume is done with)
    v->top.destroy();
    v->top = {};
    add<uint64_t>(counters().finished);
    VThread *j = v->joiner.exchange(VThread::done_mark(), std::memory_order_acq_rel);
    const auto bits = reinterpret_cast<uintptr_t>(j);
    if (bits & VThread::weft_tag) weft_sem_post(reinterpret_cast<weft_sem_t *>(bits & ~VThread::weft_tag));
    else if (j) make_ready(j);
    unref(v);
}

bool io_retry(detail::IoOp *op);
wd::IoWaiter *waiter_of(detail::IoOp *op);

std::atomic<int> clues_live{0}; // while any exists, the loops time what they run
// The stage the running virtual thread is in (the clue it followed last)
// and since when: a follow that does not migrate changes stage inside one
// resume, so the time is split there.
thread_local Clue *tl_stage = nullptr;
thread_local uint64_t tl_stage_t0 = 0;

void stage_time(uint64_t now) {
    if (tl_stage) detail::ClueAccess::busy(*tl_stage).fetch_add(now - tl_stage_t0, std::memory_order_relaxed);
    tl_stage_t0 = now;
}

void run_one(VThread *v) {
    if (v->retry) {
        detail::IoOp *op = v->retry;
        v->retry = nullptr;
        if (!(reinterpret_cast<uintptr_t>(op) & VThread::kSleepTag) && !io_retry(op))
            return; // parked again (a spurious event)
    }
    add<uint64_t>(counters().resumes);
    Loop *l = v->loop;
    const uint64_t t0 = clues_live.load(std::memory_order_relaxed) ? weft_now_ns() : 0;
    if (t0) {
        tl_stage = v->clue;
        tl_stage_t0 = t0;
    }
    tl_current = v;
    tl_ended = nullptr;
    v->resume.resume();
    tl_current = nullptr;
    if (t0) { // v may be elsewhere now: only what was read before, and thread-locals
        const uint64_t t1 = weft_now_ns();
        l->busy_ns.store(l->busy_ns.load(std::memory_order_relaxed) + (t1 - t0), std::memory_order_relaxed);
        stage_time(t1);
        tl_stage = nullptr;
    }
    if (VThread *e = tl_ended) { // its top coroutine returned (here: it cannot have moved since)
        tl_ended = nullptr;
        finish(e);
    }
}

// ---- cancellation (Handle::cancel) ----

Loop *loop_of(const VThread *v) { return __atomic_load_n(&v->loop, __ATOMIC_ACQUIRE); } // Migrate moves it

void post_cancel(Loop *l, Loop::CancelNode *n) {
    push_front(l->cancels, n);
    l->wake();
}

// On l's weft thread, between resumes, so v is not running: end the wait v
// is parked in, if it is an I/O operation's or a sleep's and nothing has
// ended it yet. Anything else (ready, running nowhere, parked in another
// kind of wait, finished) meets the flag at its next I/O or sleep.
void interrupt(Loop *l, Loop::CancelNode *n) {
    VThread *v = n->v;
    if (Loop *at = loop_of(v); at != l) { // it moved on: the wait (if any) is that loop's
        post_cancel(at, n);
        return;
    }
    if (!v->finished() && v->retry) {
        wd::Vproc *vp = wd::tls_vproc;
        const auto bits = reinterpret_cast<uintptr_t>(v->retry);
        if (bits & VThread::kSleepTag) {
            auto *t = reinterpret_cast<wd::Timer *>(bits & ~VThread::kSleepTag);
            if (t->armed()) { // else it fired: v is ready already
                vp->timers.cancel(t);
                make_ready(v);
            }
        } else if (detail::IoOp *op = v->retry; !op->offloaded &&
                   wd::cancel_fd_async(vp, static_cast<wd::FdState *>(op->fdstate), waiter_of(op))) {
            op->woke = ECANCELED; // io_retry ends it (and its deadline's timer)
            make_ready(v);
        }
    }
    unref(v);
    delete n;
}

void take_cancels(Loop *l) {
    if (!l->cancels.load(std::memory_order_relaxed)) return;
    Loop::CancelNode *n = l->cancels.exchange(nullptr, std::memory_order_acquire);
    while (n) {
        Loop::CancelNode *next = n->next;
        interrupt(l, n);
        n = next;
    }
}

constexpr int kPass = 256;
constexpr uint64_t kPassNs = 1'000'000;

void *loop_main(void *arg) {
    Loop *l = static_cast<Loop *>(arg);
    for (;;) {
        l->take_inbox();
        take_cancels(l);
        if (l->active.empty()) l->active.append(l->yielded);
        if (l->active.empty()) {
            uint64_t alone = 1; // no virtual thread left, anywhere: end (a spawn starts another)
            if (l->state.compare_exchange_strong(alone, 0, std::memory_order_acq_rel)) {
                take_cancels(l); // (of threads that have ended: a later one waits for the next thread, or ~Loop)
                return nullptr;
            }
            l->sleep();
            continue;
        }
        // A pass: the active queue, and what the pass itself makes ready
        // (a joiner, a channel's partner), up to kPass resumes or about
        // kPassNs (looked at every 16: a clock read costs more than a
        // resume, so a short pass reads none; the time counts from the
        // 16th); what yields waits for the next pass. Then the vproc's
        // other weft threads, its timers and its reactor get their turn.
        uint64_t pass_start = 0;
        for (int n = 0; n < kPass; ++n) {
            VThread *v = l->active.pop();
            if (!v) break;
            run_one(v);
            if ((n & 15) == 15) {
                const uint64_t now = weft_now_ns();
                if (!pass_start) pass_start = now;
                else if (now - pass_start > kPassNs) break;
            }
        }
        l->active.append(l->yielded);
        weft_yield();
    }
}

// vp's loop, started if its thread is not running, with one more virtual
// thread counted in. The common case is one atomic add.
Loop *loop_for_one_more(int vp) {
    wd::Vproc *self = wd::tls_vproc;
    if (!self) std::abort(); // virtual threads live inside weft_main
    if (vp < 0 || vp >= weft_vproc_count()) vp = weft_vproc_self();
    Loop *l = reg.rt.load(std::memory_order_acquire) == self->rt ? reg.loops[vp].load(std::memory_order_acquire)
                                                                  : nullptr;
    if (!l) {
        std::lock_guard<std::mutex> g(reg.lock);
        if (reg.rt.load(std::memory_order_relaxed) != self->rt) { // the previous runtime's loops ended with it
            for (auto &old : reg.loops) delete old.exchange(nullptr, std::memory_order_relaxed);
            reg.rt.store(self->rt, std::memory_order_release);
        }
        l = reg.loops[vp].load(std::memory_order_relaxed);
        if (!l) {
            l = new Loop(vp);
            reg.loops[vp].store(l, std::memory_order_release);
        }
    }
    if (l->state.fetch_add(2, std::memory_order_acq_rel) & 1) return l; // its thread runs
    std::lock_guard<std::mutex> g(reg.lock);
    if (!(l->state.load(std::memory_order_acquire) & 1)) {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.detached = 1;
        a.home_vproc = vp;
        a.name = "vt-loop";
        // The loop's stack holds the resume of one virtual thread at a time,
        // and its awaits pass control by symmetric transfer — a tail call
        // when g++ optimises, a call that stays on the stack when it does
        // not (the sanitizer builds): a connection answering 100 pipelined
        // requests in one resume went 100 calls deep. Ample there.
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
        a.stack_size = 8u << 20;
#endif
        weft_thread_t t;
        l->state.fetch_or(1, std::memory_order_acq_rel);
        if (weft_thread_create(&t, &a, loop_main, l) != 0) {
            l->state.fetch_sub(3, std::memory_order_acq_rel);
            throw std::bad_alloc();
        }
    }
    return l;
}

} // namespace

namespace detail {
void ready(VThread *v) noexcept { make_ready(v); }
VThread *current() noexcept { return tl_current; }
void set_resume(VThread *v, std::coroutine_handle<> h) noexcept { v->resume = h; }
std::coroutine_handle<> top_done(VThread *v) noexcept {
    tl_ended = v;
    return std::noop_coroutine();
}
} // namespace detail

void record_frames(bool on) noexcept { detail::sites.on.store(on, std::memory_order_relaxed); }

std::vector<FrameSite> frame_report() {
    std::vector<FrameSite> out;
    auto &t = detail::sites;
    while (t.lock.test_and_set(std::memory_order_acquire)) {
    }
    for (const auto &s : t.slots)
        if (s.code) out.push_back({s.code, std::string(), s.bytes, s.count});
    t.lock.clear(std::memory_order_release);
    for (FrameSite &f : out) {
        Dl_info info;
        if (dladdr(f.code, &info) && info.dli_sname) {
            int status = 0;
            char *d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
            f.name = status == 0 && d ? d : info.dli_sname;
            std::free(d);
        }
    }
    std::sort(out.begin(), out.end(), [](const FrameSite &a, const FrameSite &b) { return a.bytes > b.bytes; });
    return out;
}

Handle spawn_on(int vproc, Task<void> body) {
    auto *v = new VThread;
    v->top = body.release();
    v->top.promise().vt = v;
    v->resume = v->top;
    v->loop = loop_for_one_more(vproc);
    add<uint64_t>(counters().spawned);
    make_ready(v);
    return Handle(v);
}

Handle spawn(Task<void> body) { return spawn_on(-1, std::move(body)); }

Handle &Handle::operator=(Handle &&o) noexcept {
    if (this != &o) {
        if (v_) unref(v_);
        v_ = std::exchange(o.v_, nullptr);
    }
    return *this;
}

Handle::~Handle() {
    if (v_) unref(v_);
}

void Handle::join() {
    if (!v_) return;
    weft_sem_t done; // posted by finish(), which then touches only its own reference to v_
    weft_sem_init(&done, 0);
    auto *me = reinterpret_cast<VThread *>(reinterpret_cast<uintptr_t>(&done) | VThread::weft_tag);
    if (v_->joiner.exchange(me, std::memory_order_acq_rel) != VThread::done_mark()) weft_sem_wait(&done);
    weft_sem_destroy(&done);
    VThread *v = std::exchange(v_, nullptr);
    std::exception_ptr e = v->error;
    unref(v);
    if (e) std::rethrow_exception(e);
}

void Handle::cancel() noexcept {
    VThread *v = v_;
    if (!v || v->finished() || v->cancelled.exchange(true, std::memory_order_acq_rel)) return;
    // The flag first: a wait that begins from now on fails at once. The loop
    // ends the one it may be parked in already (interrupt).
    auto *n = new (std::nothrow) Loop::CancelNode{v, nullptr};
    if (!n) return; // the flag still stops it at its next I/O or sleep
    v->refs.fetch_add(1, std::memory_order_relaxed); // until the loop has looked
    post_cancel(loop_of(v), n);
}

bool cancelled() noexcept { return tl_current && tl_current->cancelled.load(std::memory_order_relaxed); }

Loop::~Loop() {
    for (CancelNode *n = cancels.exchange(nullptr); n;) {
        CancelNode *next = n->next;
        unref(n->v);
        delete n;
        n = next;
    }
}

bool Handle::await_ready() const noexcept { return !v_ || v_->finished(); }

bool Handle::await_suspend(std::coroutine_handle<> h) noexcept {
    VThread *me = tl_current;
    me->resume = h;
    // It ended meanwhile: resume at once.
    return v_->joiner.exchange(me, std::memory_order_acq_rel) != VThread::done_mark();
}

void Handle::await_resume() {
    if (!v_) return;
    VThread *v = std::exchange(v_, nullptr);
    std::exception_ptr e = v->error;
    unref(v);
    if (e) std::rethrow_exception(e);
}

// ---- yield, sleep, migrate ---------------------------------------------------------

void Yield::await_suspend(std::coroutine_handle<> h) noexcept {
    VThread *v = tl_current;
    v->resume = h;
    v->loop->yielded.push(v);
}

namespace {
struct SleepTimer {
    wd::Timer timer;
    VThread *vt;
};
void sleep_fire(wd::Timer *t) { make_ready(reinterpret_cast<SleepTimer *>(t)->vt); }
} // namespace

bool SleepUntil::await_suspend(std::coroutine_handle<> h) noexcept {
    static_assert(sizeof(SleepTimer) <= sizeof timer, "SleepUntil::timer holds a SleepTimer");
    VThread *v = tl_current;
    if (v->cancelled.load(std::memory_order_relaxed)) return false;
    v->resume = h;
    auto *st = new (timer) SleepTimer{};
    st->vt = v;
    st->timer.fire = sleep_fire;
    wd::tls_vproc->timers.arm(&st->timer, deadline);
    static_assert(offsetof(SleepTimer, timer) == 0);
    v->retry = reinterpret_cast<detail::IoOp *>(reinterpret_cast<uintptr_t>(&st->timer) | VThread::kSleepTag);
    return true;
}

bool Migrate::await_ready() const noexcept { return vproc < 0 || vproc >= weft_vproc_count() || vproc == weft_vproc_self(); }

void Migrate::await_suspend(std::coroutine_handle<> h) noexcept {
    VThread *v = tl_current;
    v->resume = h;
    Loop *from = v->loop;
    __atomic_store_n(&v->loop, loop_for_one_more(vproc), __ATOMIC_RELEASE); // (Handle::cancel reads it anywhere)
    from->state.fetch_sub(2, std::memory_order_release); // its loop is running it: cannot end meanwhile
    add<uint64_t>(counters().migrations);
    make_ready(v); // from here on it may run there: not touched again
}

namespace {
// A detached weft thread on this vproc running body(arg), for work a
// virtual thread hands over (it makes the virtual thread ready at its end).
// 0 or weft_thread_create's error.
int helper_thread(const char *name, void *(*body)(void *), void *arg) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.detached = 1;
    a.home_vproc = weft_vproc_self();
    a.name = name;
    weft_thread_t t;
    return weft_thread_create(&t, &a, body, arg);
}
} // namespace

void detail::OnThreadBase::suspend(std::coroutine_handle<> h) {
    VThread *v = tl_current;
    vt = v;
    v->resume = h;
    auto body = [](void *p) -> void * {
        auto *self = static_cast<OnThreadBase *>(p);
        self->call(); // an exception here would be lost: on_thread's fn must not throw
        make_ready(self->vt);
        return nullptr;
    };
    if (helper_thread("vt-on-thread", body, this) != 0) { // no thread: run it here, blocking the loop
        call();
        make_ready(v);
    }
}

// ---- I/O ---------------------------------------------------------------------

namespace {
// An op's waiter and timer are built in its `waiter` and `timer` bytes and
// find the op again by their offsets, which saves a pointer back in each
// (16 bytes of every parked virtual thread). IoOp has a vtable, so it is
// not standard-layout and offsetof on it is only conditionally supported:
// GCC and Clang give the plain offset for a class with no virtual base.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
constexpr size_t kWaiterAt = offsetof(detail::IoOp, waiter);
constexpr size_t kTimerAt = offsetof(detail::IoOp, timer);
#pragma GCC diagnostic pop
static_assert(sizeof(wd::IoWaiter) <= sizeof(detail::IoOp::waiter), "IoOp::waiter holds an IoWaiter");
static_assert(sizeof(wd::Timer) <= sizeof(detail::IoOp::timer), "IoOp::timer holds a Timer");

wd::IoWaiter *waiter_of(detail::IoOp *op) { return std::launder(reinterpret_cast<wd::IoWaiter *>(op->waiter)); }
wd::Timer *timer_of(detail::IoOp *op) { return std::launder(reinterpret_cast<wd::Timer *>(op->timer)); }
detail::IoOp *op_of(wd::IoWaiter *w) { return reinterpret_cast<detail::IoOp *>(reinterpret_cast<char *>(w) - kWaiterAt); }
detail::IoOp *op_of(wd::Timer *t) { return reinterpret_cast<detail::IoOp *>(reinterpret_cast<char *>(t) - kTimerAt); }

void io_wake(wd::IoWaiter *w, int result) {
    detail::IoOp *op = op_of(w);
    op->woke = static_cast<int16_t>(result);
    make_ready(op->vt);
}

// The deadline passed: if the waiter is still linked, take it off and wake
// the thread with ETIMEDOUT (if an event took it first, that wake stands).
void io_timeout(wd::Timer *t) {
    detail::IoOp *op = op_of(t);
    wd::Vproc *vp = wd::tls_vproc;
    if (wd::cancel_fd_async(vp, static_cast<wd::FdState *>(op->fdstate), waiter_of(op))) {
        op->woke = ETIMEDOUT;
        make_ready(op->vt);
    }
}

// op's offload_work on the calling weft thread's behalf, parked on the
// offload pool meanwhile (or inline when no worker can be started): where
// there is no loop to go on with, or no job could be queued.
void offload_here(detail::IoOp *op) {
    weft_offload(
        [](void *p) -> void * {
            static_cast<detail::IoOp *>(p)->offload_work();
            return nullptr;
        },
        op);
}

// op's offload_work, queued for a kernel worker of the offload pool; the
// worker makes op's virtual thread ready when it is done, and the loop goes
// on meanwhile. No weft thread waits for it (one did, with a stack's
// touched pages for every stretch in flight): the vproc counts the job as
// an I/O wait, so that with nothing else to do it sleeps in its reactor
// until the worker's wake-up instead of reporting a deadlock (io_retry
// takes it off the count). false: no job could be queued.
struct VtJob : wd::OffloadJob {
    detail::IoOp *op;
};

bool io_offload(detail::IoOp *op) {
    wd::Vproc *vp = wd::tls_vproc;
    auto *job = new (std::nothrow) VtJob{};
    if (!job) return false;
    job->op = op;
    job->run = [](wd::OffloadJob *j) { static_cast<VtJob *>(j)->op->offload_work(); };
    job->done = [](wd::OffloadJob *j) { // on the worker
        detail::IoOp *op = static_cast<VtJob *>(j)->op;
        delete static_cast<VtJob *>(j);
        make_ready(op->vt);
    };
    op->offloaded = true;
    op->vt->retry = op;
    ++vp->io_waiters;
    if (wd::offload_pool(vp).submit(vp, job)) return true;
    --vp->io_waiters;
    delete job;
    op->offloaded = false;
    op->vt->retry = nullptr;
    return false;
}

// One try, from the descriptor's event count as it begins. A read that
// drained a stream marks it not ready, so that the next one waits for an
// event before it tries (as the wrappers do: io/wrap.hpp, retry_on_fd):
// a connection reading its next request does not make a recv that finds
// nothing first.
void try_once(wd::Vproc *vp, wd::FdState *s, detail::IoOp *op) {
    op->seq = s->seq.load(std::memory_order_acquire);
    op->result = op->attempt();
    if (op->result > 0 && s->drains_on_short() && op->drained(op->result)) wd::mark_unready(vp, s, op->events, op->seq);
}

// Link op's waiter, trying again while events slip in. true: parked.
bool io_wait(detail::IoOp *op) {
    while (op->result == detail::IoOp::kOffload) {
        if (io_offload(op)) return true;
        offload_here(op); // no job: on the loop's weft thread, holding up the loop
        op->result = op->attempt();
    }
    if (op->result != -EAGAIN) return false;
    wd::Vproc *vp = wd::tls_vproc;
    auto *s = static_cast<wd::FdState *>(op->fdstate);
    auto *w = new (op->waiter) wd::IoWaiter{};
    w->t = nullptr;
    w->events = op->events;
    w->wake = io_wake;
    for (;;) {
        op->woke = 0;
        if (op->vt->cancelled.load(std::memory_order_relaxed)) {
            op->result = op->done_so_far() ? op->done_so_far() : -ECANCELED;
            return false;
        }
        op->vt->retry = op;
        if (op->deadline && op->deadline <= weft_now_ns()) {
            op->vt->retry = nullptr;
            op->result = op->done_so_far() ? op->done_so_far() : -ETIMEDOUT;
            return false;
        }
        int rc = wd::wait_fd_async(vp, s, op->fd, w, op->seq);
        if (rc == 0) {
            add<uint64_t>(counters().io_parks);
            if (op->deadline || op->timeout) {
                uint64_t dl = op->deadline;
                if (op->timeout) {
                    const uint64_t t = weft_now_ns() + op->timeout;
                    if (!dl || t < dl) dl = t;
                }
                auto *t = new (op->timer) wd::Timer{};
                t->fire = io_timeout;
                vp->timers.arm(t, dl);
            }
            return true;
        }
        op->vt->retry = nullptr;
        if (rc != 1) {
            op->result = -rc;
            return false;
        }
        try_once(vp, s, op);
        if (op->result == detail::IoOp::kOffload) return io_wait(op);
        if (op->result != -EAGAIN) return false;
    }
}

// The loop runs a virtual thread parked on a descriptor: an event came (or
// the descriptor closed). true: resume it; false: parked again.
bool io_retry(detail::IoOp *op) {
    wd::Vproc *vp = wd::tls_vproc;
    auto *s = static_cast<wd::FdState *>(op->fdstate);
    if (op->offloaded) { // the worker's part is done: go on
        op->offloaded = false;
        --vp->io_waiters; // (io_offload's)
        try_once(vp, s, op);
        if (op->result != -EAGAIN && op->result != detail::IoOp::kOffload) return true;
        return !io_wait(op);
    }
    wd::io_waiter_done(vp);
    if (op->deadline || op->timeout) vp->timers.cancel(timer_of(op));
    if (op->woke) {
        const ssize_t done = op->done_so_far();
        op->result = (op->woke == ETIMEDOUT || op->woke == ECANCELED) && done ? done : -op->woke;
        return true;
    }
    try_once(vp, s, op);
    if (op->result != -EAGAIN) return true;
    return !io_wait(op);
}
} // namespace

namespace detail {

bool IoOp::io_begin(IoOp *op) noexcept {
    if (VThread *v = tl_current; v && v->cancelled.load(std::memory_order_relaxed)) {
        op->result = -ECANCELED;
        return true;
    }
    wd::Vproc *vp = wd::tls_vproc;
    wd::FdState *s = vp ? wd::fd_state(vp, op->fd) : nullptr;
    if (!s || s->kind == wd::FdKind::Unknown || s->kind == wd::FdKind::File) {
        // Out of range, closed, or a regular file (never "not ready"); work
        // for a worker is done here, on a weft thread if need be.
        while ((op->result = op->attempt()) == IoOp::kOffload) offload_here(op);
        return true;
    }
    wd::ensure_nonblock(vp, s, op->fd);
    op->fdstate = s;
    op->seq = s->seq.load(std::memory_order_acquire); // before the look at ready, as the wrappers
    if (!s->user_nonblock && !(s->ready.load(std::memory_order_relaxed) & wd::FdState::dir_bit(op->events))) {
        op->result = -EAGAIN; // the last read drained it: wait for an event first
        return false;
    }
    try_once(vp, s, op);
    if (op->result == IoOp::kOffload) return false;
    return op->result != -EAGAIN || s->user_nonblock;
}

bool IoOp::io_park(IoOp *op, std::coroutine_handle<> c) noexcept {
    VThread *v = tl_current;
    op->vt = v;
    v->resume = c;
    return io_wait(op);
}

ssize_t IoOp::io_result(IoOp *op) noexcept {
    if (op->result < 0) {
        errno = static_cast<int>(-op->result);
        return -1;
    }
    return op->result;
}
} // namespace detail

namespace {
// A non-blocking transfer failed with e: wait (-EAGAIN), or end with what
// went already, else with the error (no SIGPIPE left pending).
ssize_t transfer_error(int e, size_t done) {
    if (e == EPIPE) wd::consume_sigpipe();
    if (e == EAGAIN || e == EWOULDBLOCK) return -EAGAIN;
    return done ? static_cast<ssize_t>(done) : -e;
}
} // namespace

ssize_t ReadOp::attempt() noexcept { return wd::sys(::read(fd, buf, len)); }

ssize_t RecvOp::attempt() noexcept { return wd::sys(::recv(fd, buf, len, flags | MSG_DONTWAIT)); }

ssize_t WriteOp::attempt() noexcept {
    while (done < len || len == 0) {
        const char *p = static_cast<const char *>(buf) + done;
        ssize_t n = flags < 0 ? ::write(fd, p, len - done) : ::send(fd, p, len - done, flags | MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) return transfer_error(errno, done);
        done += static_cast<size_t>(n);
        if (len == 0) break;
    }
    return static_cast<ssize_t>(done);
}

WritevOp::WritevOp(int fd, const struct iovec *v, int n) noexcept : IoOp(fd, POLLOUT), cnt(n < kMax ? n : kMax) {
    for (int i = 0; i < cnt; ++i) iov[i] = v[i];
}

ssize_t WritevOp::attempt() noexcept {
    while (first < cnt) {
        ssize_t n = ::writev(fd, iov + first, cnt - first);
        if (n < 0) return transfer_error(errno, done);
        done += static_cast<size_t>(n);
        size_t left = static_cast<size_t>(n);
        while (first < cnt && left >= iov[first].iov_len) left -= iov[first++].iov_len;
        if (first < cnt) {
            iov[first].iov_base = static_cast<char *>(iov[first].iov_base) + left;
            iov[first].iov_len -= left;
        }
    }
    return static_cast<ssize_t>(done);
}

ssize_t SendfileOp::attempt() noexcept {
    if (worker_error) return transfer_error(std::exchange(worker_error, 0), done);
    while (done < count) {
        const size_t want = count - done;
        if (offset >= checked_to) { // the next stretch: in the page cache?
            const size_t probe = want < wd::kPageCacheProbe ? want : wd::kPageCacheProbe;
            checked_to = offset + static_cast<off_t>(probe);
            if (wd::page_cache_may_miss(in_fd, static_cast<uint64_t>(offset), probe)) return kOffload;
        }
        const size_t stretch = static_cast<size_t>(checked_to - offset);
        ssize_t n = ::sendfile(fd, in_fd, &offset, want < stretch ? want : stretch);
        if (n == 0) break; // the file ended early
        if (n < 0) return transfer_error(errno, done);
        done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
}

// On a kernel worker, where waiting for the disk blocks nobody: send the
// stretch from there (what the socket cannot take now is read in there).
void SendfileOp::offload_work() noexcept {
    done += wd::sendfile_stretch(fd, in_fd, &offset, static_cast<size_t>(checked_to - offset), &worker_error);
}

ssize_t AcceptOp::attempt() noexcept {
    int r = ::accept4(fd, addr, len, flags | SOCK_NONBLOCK);
    if (r < 0) return -errno;
    if (wd::Vproc *vp = wd::tls_vproc)
        wd::fd_created(vp, r, wd::FdKind::Stream, (flags & SOCK_NONBLOCK) != 0, (flags & SOCK_NONBLOCK) == 0);
    return r;
}

int close(int fd) noexcept { return weft_close(fd); }

// ---- clues ---------------------------------------------------------------------

namespace {
std::mutex clue_mu;          // the list of clues
Clue *clue_head = nullptr;
} // namespace

Clue::Clue(int vproc) : vp_(vproc) {
    std::lock_guard<std::mutex> g(clue_mu);
    next_ = clue_head;
    if (clue_head) clue_head->prev_ = this;
    clue_head = this;
    clues_live.fetch_add(1, std::memory_order_relaxed);
}

Clue::~Clue() {
    std::lock_guard<std::mutex> g(clue_mu);
    (prev_ ? prev_->next_ : clue_head) = next_;
    if (next_) next_->prev_ = prev_;
    clues_live.fetch_sub(1, std::memory_order_relaxed);
}

bool Clue::Follow::await_ready() noexcept {
    VThread *v = tl_current;
    Clue *last = v->clue;
    if (c.previous_.load(std::memory_order_relaxed) == last) {
        c.same_.fetch_add(1, std::memory_order_relaxed);
    } else {
        c.previous_.store(last, std::memory_order_relaxed);
        c.different_.fetch_add(1, std::memory_order_relaxed);
    }
    c.follows_.fetch_add(1, std::memory_order_relaxed);
    v->clue = &c;
    if (tl_stage_t0 && clues_live.load(std::memory_order_relaxed)) { // the stage changes here
        stage_time(weft_now_ns());
        tl_stage = &c;
    }
    const int vp = c.vproc();
    return vp < 0 || vp >= weft_vproc_count() || vp == weft_vproc_self();
}

void Clue::Follow::await_suspend(std::coroutine_handle<> h) noexcept {
    Migrate m{c.vproc()};
    m.await_suspend(h);
}

HashedClue::HashedClue(int n) {
    const int vprocs = weft_vproc_count() > 0 ? weft_vproc_count() : 1;
    for (int i = 0; i < (n > 0 ? n : 1); ++i) subs_.push_back(std::make_unique<Clue>(i % vprocs));
}

Clue::Follow HashedClue::follow() noexcept {
    uint64_t h = reinterpret_cast<uintptr_t>(tl_current) >> 4; // the thread's identity
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    return subs_[static_cast<size_t>(h >> 33) % subs_.size()]->follow();
}

uint64_t loop_busy_ns(int vproc) noexcept {
    if (vproc < 0 || vproc >= 64) return 0;
    Loop *l = reg.loops[vproc].load(std::memory_order_acquire);
    return l ? l->busy_ns.load(std::memory_order_relaxed) : 0;
}

Cluethread::Cluethread(CluethreadOptions o) : opt_(o) {
    if (weft_thread_create(&t_, nullptr, main, this) == 0) running_ = true;
}

Cluethread::~Cluethread() { stop(); }

void Cluethread::stop() {
    if (!running_) return;
    stop_.store(true, std::memory_order_relaxed);
    weft_thread_join(t_, nullptr);
    running_ = false;
}

void *Cluethread::main(void *arg) {
    auto *self = static_cast<Cluethread *>(arg);
    const int n = weft_vproc_count() < 64 ? weft_vproc_count() : 64;
    std::vector<uint64_t> loop_before(static_cast<size_t>(n));
    std::vector<std::pair<Clue *, uint64_t>> clue_before;
    auto snapshot = [&] {
        for (int i = 0; i < n; ++i) loop_before[static_cast<size_t>(i)] = loop_busy_ns(i);
        std::lock_guard<std::mutex> g(clue_mu);
        clue_before.clear();
        for (Clue *c = clue_head; c; c = detail::ClueAccess::next(*c)) clue_before.emplace_back(c, c->busy_ns());
    };
    snapshot();
    bool settling = true; // the first period: what it sees may be a pipeline filling up
    while (!self->stop_.load(std::memory_order_relaxed)) {
        weft_sleep_ns(self->opt_.period_ns);
        if (n < 2) continue;
        if (settling) { // this period straddled the last move (or the start)
            settling = false;
            snapshot();
            continue;
        }
        // Each loop's work in the period; the busiest and the idlest.
        int hi = 0, lo = 0;
        std::vector<uint64_t> d(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) {
            d[static_cast<size_t>(i)] = loop_busy_ns(i) - loop_before[static_cast<size_t>(i)];
            if (d[static_cast<size_t>(i)] > d[static_cast<size_t>(hi)]) hi = i;
            if (d[static_cast<size_t>(i)] < d[static_cast<size_t>(lo)]) lo = i;
        }
        const uint64_t gap = d[static_cast<size_t>(hi)] - d[static_cast<size_t>(lo)];

        Clue *best = nullptr;
        if (static_cast<double>(gap) > self->opt_.threshold * static_cast<double>(self->opt_.period_ns)) {
            std::lock_guard<std::mutex> g(clue_mu);
            // Candidates: the busy loop's clues whose load is under the gap
            // (moving a bigger one would make it worse), by fewest
            // neighbours-in-sequence on that loop, then by how close their
            // load is to half the gap.
            int best_nb = 0;
            uint64_t best_miss = 0;
            for (auto &[c, before] : clue_before) {
                bool alive = false;
                for (Clue *x = clue_head; x && !alive; x = detail::ClueAccess::next(*x)) alive = x == c;
                if (!alive || c->vproc() != hi) continue;
                const uint64_t load = c->busy_ns() - before;

                if (load == 0 || load >= gap) continue;
                int nb = 0;
                for (Clue *x = clue_head; x; x = detail::ClueAccess::next(*x))
                    if (x != c && x->vproc() == hi && (x->previous() == c || c->previous() == x)) ++nb;
                const uint64_t miss = load > gap / 2 ? load - gap / 2 : gap / 2 - load;
                if (!best || nb < best_nb || (nb == best_nb && miss < best_miss)) best = c, best_nb = nb, best_miss = miss;
            }
            if (best) {
                best->move_to(lo);
                self->history_.push_back({best, hi, lo});
            }
        }
        if (best) {
            self->moves_.fetch_add(1, std::memory_order_relaxed);
            settling = true;
        }
        snapshot();
    }
    return nullptr;
}

} // namespace weft::vt
