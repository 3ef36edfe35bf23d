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

#include <poll.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <new>

#include "core/park.hpp"
#include "core/runtime.hpp"
#include "io/fd.hpp"
#include "io/wrap.hpp"

namespace weft::vt {

namespace wd = weft::detail;

// ---- statistics ----------------------------------------------------------------

namespace {
struct Counters {
    std::atomic<uint64_t> spawned{0}, finished{0}, resumes{0}, io_parks{0}, migrations{0};
    std::atomic<uint64_t> frames{0}, frame_bytes{0}, largest_frame{0};
} counters;

inline void add(std::atomic<uint64_t> &c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
} // namespace

Stats stats() noexcept {
    Stats s{};
    s.spawned = counters.spawned.load(std::memory_order_relaxed);
    s.finished = counters.finished.load(std::memory_order_relaxed);
    s.live = s.spawned - s.finished;
    s.resumes = counters.resumes.load(std::memory_order_relaxed);
    s.io_parks = counters.io_parks.load(std::memory_order_relaxed);
    s.migrations = counters.migrations.load(std::memory_order_relaxed);
    s.frames = counters.frames.load(std::memory_order_relaxed);
    s.frame_bytes = counters.frame_bytes.load(std::memory_order_relaxed);
    s.largest_frame = counters.largest_frame.load(std::memory_order_relaxed);
    return s;
}

// ---- continuation pools ------------------------------------------------------------

namespace detail {
namespace {
constexpr size_t kClass = 64, kClasses = 64; // 64-byte classes up to 4 KiB

// One per kernel thread, so one per vproc: no lock. A frame freed on
// another vproc (its virtual thread migrated) joins that vproc's list.
struct FramePool {
    void *free[kClasses] = {};
    ~FramePool() {
        for (void *&head : free)
            while (head) {
                void *n = *static_cast<void **>(head);
                std::free(head);
                head = n;
            }
    }
};
thread_local FramePool pool;
} // namespace

void *frame_alloc(size_t n) {
    add(counters.frames);
    add(counters.frame_bytes, n);
    uint64_t big = counters.largest_frame.load(std::memory_order_relaxed);
    while (n > big && !counters.largest_frame.compare_exchange_weak(big, n, std::memory_order_relaxed)) {
    }
    const size_t c = (n + kClass - 1) / kClass;
    if (c == 0 || c > kClasses) {
        if (void *p = std::malloc(n)) return p;
        throw std::bad_alloc();
    }
    if (void *p = pool.free[c - 1]) {
        pool.free[c - 1] = *static_cast<void **>(p);
        return p;
    }
    if (void *p = std::malloc(c * kClass)) return p;
    throw std::bad_alloc();
}

void frame_free(void *p, size_t n) noexcept {
    counters.frame_bytes.fetch_sub(n, std::memory_order_relaxed);
    const size_t c = (n + kClass - 1) / kClass;
    if (c == 0 || c > kClasses) return std::free(p);
    *static_cast<void **>(p) = pool.free[c - 1];
    pool.free[c - 1] = p;
}
} // namespace detail

// ---- virtual threads and loops -------------------------------------------------------

struct Loop;

struct VThread {
    std::coroutine_handle<detail::Promise<void>> top;
    std::coroutine_handle<> resume;       // where it continues
    Loop *loop = nullptr;                 // the loop it runs on
    VThread *next = nullptr;              // in a queue
    detail::IoOp *retry = nullptr;        // parked on a descriptor: try this first
    std::atomic<int> refs{2};             // the runtime's (until finished) and the Handle's
    std::atomic<bool> finished{false};
    std::atomic<VThread *> joiner{nullptr}; // a virtual thread in co_await handle
    std::exception_ptr error;
    weft_sem_t done;                      // posted once, for a weft thread's join

    VThread() { weft_sem_init(&done, 0); }
    ~VThread() { weft_sem_destroy(&done); }
};

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
    std::atomic<int> live{0};             // virtual threads it runs, running or waiting
    Queue active, yielded;                // touched on vp's kernel thread only
    std::atomic<VThread *> inbox{nullptr}; // from other vprocs (a lock-free stack)
    std::atomic<bool> sleeping{false};
    weft_sem_t wakeup;

    explicit Loop(int v) : vp(v) { weft_sem_init(&wakeup, 0); }

    void wake() {
        if (sleeping.exchange(false, std::memory_order_seq_cst)) weft_sem_post(&wakeup);
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

// The loops of the running runtime, by vproc. A loop runs while it has
// virtual threads (weft_main waits for every weft thread, and a loop with
// nothing to do would wait for ever): the last one's end ends it, and the
// next spawn there starts another. The lock orders that end against a
// spawn or a migration counting a thread in.
struct Registry {
    std::atomic<void *> rt{nullptr};      // a later weft_main starts afresh
    std::atomic<Loop *> loops[64] = {};
    std::mutex lock; // held for a few loads and stores (and a thread's creation)
} reg;

thread_local VThread *tl_current = nullptr;
thread_local VThread *tl_ended = nullptr; // set by top_done during a resume

void make_ready(VThread *v) {
    Loop *l = v->loop;
    if (weft_vproc_self() == l->vp) {
        l->active.push(v);
    } else {
        VThread *h = l->inbox.load(std::memory_order_relaxed);
        do v->next = h;
        while (!l->inbox.compare_exchange_weak(h, v, std::memory_order_release, std::memory_order_relaxed));
    }
    l->wake();
}

void finish(VThread *v) {
    v->loop->live.fetch_sub(1, std::memory_order_release);
    auto &p = v->top.promise();
    v->error = p.error;
    v->top.destroy();
    v->top = {};
    add(counters.finished);
    v->finished.store(true, std::memory_order_seq_cst);
    if (VThread *j = v->joiner.exchange(nullptr, std::memory_order_acq_rel)) make_ready(j);
    weft_sem_post(&v->done);
    unref(v);
}

bool io_retry(detail::IoOp *op);

void run_one(VThread *v) {
    if (v->retry) {
        detail::IoOp *op = v->retry;
        v->retry = nullptr;
        if (!io_retry(op)) return; // parked again (a spurious event)
    }
    add(counters.resumes);
    tl_current = v;
    tl_ended = nullptr;
    v->resume.resume();
    tl_current = nullptr;
    if (VThread *e = tl_ended) { // its top coroutine returned (here: it cannot have moved since)
        tl_ended = nullptr;
        finish(e);
    }
}

void *loop_main(void *arg) {
    Loop *l = static_cast<Loop *>(arg);
    for (;;) {
        l->take_inbox();
        if (l->active.empty()) l->active.append(l->yielded);
        if (l->active.empty()) {
            if (l->live.load(std::memory_order_acquire) == 0) {
                std::lock_guard<std::mutex> g(reg.lock);
                if (l->live.load(std::memory_order_acquire) == 0 && !l->inbox.load(std::memory_order_acquire)) {
                    if (reg.loops[l->vp].load(std::memory_order_relaxed) == l)
                        reg.loops[l->vp].store(nullptr, std::memory_order_relaxed);
                    break; // nothing of it is left anywhere
                }
                continue;
            }
            l->sleeping.store(true, std::memory_order_seq_cst);
            if (l->inbox.load(std::memory_order_seq_cst) || !l->active.empty()) {
                l->sleeping.store(false, std::memory_order_relaxed);
                continue;
            }
            weft_sem_wait(&l->wakeup);
            continue;
        }
        // One pass over the active queue; what becomes ready meanwhile, and
        // what yields, runs in the next one.
        Queue pass;
        pass.append(l->active);
        while (VThread *v = pass.pop()) run_one(v);
        l->active.append(l->yielded);
        weft_yield(); // this vproc's other threads, its timers and its reactor
    }
    weft_sem_destroy(&l->wakeup);
    delete l;
    return nullptr;
}

// vp's loop, started if it is not running, with one more virtual thread
// counted in.
Loop *loop_for_one_more(int vp) {
    wd::Vproc *self = wd::tls_vproc;
    if (!self) std::abort(); // virtual threads live inside weft_main
    if (vp < 0 || vp >= weft_vproc_count()) vp = weft_vproc_self();
    std::lock_guard<std::mutex> g(reg.lock);
    void *rt = self->rt;
    if (reg.rt.load(std::memory_order_relaxed) != rt) {
        for (auto &l : reg.loops) l.store(nullptr, std::memory_order_relaxed);
        reg.rt.store(rt, std::memory_order_relaxed);
    }
    Loop *l = reg.loops[vp].load(std::memory_order_relaxed);
    if (!l) {
        l = new Loop(vp);
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.detached = 1;
        a.home_vproc = vp;
        a.name = "vt-loop";
        weft_thread_t t;
        if (weft_thread_create(&t, &a, loop_main, l) != 0) {
            delete l;
            throw std::bad_alloc();
        }
        reg.loops[vp].store(l, std::memory_order_relaxed);
    }
    l->live.fetch_add(1, std::memory_order_relaxed);
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

Handle spawn_on(int vproc, Task<void> body) {
    auto *v = new VThread;
    v->top = body.release();
    v->top.promise().vt = v;
    v->resume = v->top;
    v->loop = loop_for_one_more(vproc);
    add(counters.spawned);
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
    weft_sem_wait(&v_->done);
    VThread *v = std::exchange(v_, nullptr);
    std::exception_ptr e = v->error;
    unref(v);
    if (e) std::rethrow_exception(e);
}

bool Handle::await_ready() const noexcept { return !v_ || v_->finished.load(std::memory_order_acquire); }

bool Handle::await_suspend(std::coroutine_handle<> h) noexcept {
    VThread *me = tl_current;
    me->resume = h;
    v_->joiner.store(me, std::memory_order_seq_cst);
    // Finished meanwhile: if the finisher did not take us, resume at once.
    if (v_->finished.load(std::memory_order_seq_cst) && v_->joiner.exchange(nullptr) == me) return false;
    return true;
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

void SleepUntil::await_suspend(std::coroutine_handle<> h) noexcept {
    static_assert(sizeof(SleepTimer) <= sizeof timer, "SleepUntil::timer holds a SleepTimer");
    VThread *v = tl_current;
    v->resume = h;
    auto *st = new (timer) SleepTimer{};
    st->vt = v;
    st->timer.fire = sleep_fire;
    wd::tls_vproc->timers.arm(&st->timer, deadline);
}

bool Migrate::await_ready() const noexcept { return vproc < 0 || vproc >= weft_vproc_count() || vproc == weft_vproc_self(); }

void Migrate::await_suspend(std::coroutine_handle<> h) noexcept {
    VThread *v = tl_current;
    v->resume = h;
    Loop *from = v->loop;
    v->loop = loop_for_one_more(vproc);
    from->live.fetch_sub(1, std::memory_order_release); // its loop is running it: cannot end meanwhile
    add(counters.migrations);
    make_ready(v); // from here on it may run there: not touched again
}

void detail::OnThreadBase::suspend(std::coroutine_handle<> h) {
    VThread *v = tl_current;
    vt = v;
    v->resume = h;
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.detached = 1;
    a.home_vproc = weft_vproc_self();
    a.name = "vt-on-thread";
    weft_thread_t t;
    auto body = [](void *p) -> void * {
        auto *self = static_cast<OnThreadBase *>(p);
        self->call(); // an exception here would be lost: on_thread's fn must not throw
        make_ready(self->vt);
        return nullptr;
    };
    if (weft_thread_create(&t, &a, body, this) != 0) { // no thread: run it here, blocking the loop
        call();
        make_ready(v);
    }
}

// ---- I/O ---------------------------------------------------------------------

namespace {
struct AsyncWaiter {
    wd::IoWaiter w;
    detail::IoOp *op;
};

void io_wake(wd::IoWaiter *w, int result) {
    detail::IoOp *op = reinterpret_cast<AsyncWaiter *>(w)->op;
    op->woke = result;
    make_ready(op->vt);
}

struct IoTimer {
    wd::Timer timer;
    detail::IoOp *op;
};

// The deadline passed: if the waiter is still linked, take it off and wake
// the thread with ETIMEDOUT (if an event took it first, that wake stands).
void io_timeout(wd::Timer *t) {
    detail::IoOp *op = reinterpret_cast<IoTimer *>(t)->op;
    wd::Vproc *vp = wd::tls_vproc;
    if (wd::cancel_fd_async(vp, static_cast<wd::FdState *>(op->fdstate), &reinterpret_cast<AsyncWaiter *>(op->waiter)->w)) {
        op->woke = ETIMEDOUT;
        make_ready(op->vt);
    }
}

// Link op's waiter, trying again while events slip in. true: parked.
bool io_wait(detail::IoOp *op) {
    wd::Vproc *vp = wd::tls_vproc;
    auto *s = static_cast<wd::FdState *>(op->fdstate);
    auto *aw = new (op->waiter) AsyncWaiter{};
    aw->op = op;
    aw->w.t = nullptr;
    aw->w.events = op->events;
    aw->w.wake = io_wake;
    for (;;) {
        op->woke = 0;
        op->vt->retry = op;
        if (op->deadline && op->deadline <= weft_now_ns()) {
            op->vt->retry = nullptr;
            op->result = op->done_so_far() ? op->done_so_far() : -ETIMEDOUT;
            return false;
        }
        int rc = wd::wait_fd_async(vp, s, op->fd, &aw->w, op->seq);
        if (rc == 0) {
            add(counters.io_parks);
            if (op->deadline || op->timeout) {
                uint64_t dl = op->deadline;
                if (op->timeout) {
                    const uint64_t t = weft_now_ns() + op->timeout;
                    if (!dl || t < dl) dl = t;
                }
                auto *it = new (op->timer) IoTimer{};
                it->op = op;
                it->timer.fire = io_timeout;
                vp->timers.arm(&it->timer, dl);
            }
            return true;
        }
        op->vt->retry = nullptr;
        if (rc != 1) {
            op->result = -rc;
            return false;
        }
        op->seq = s->seq.load(std::memory_order_acquire);
        op->result = op->attempt();
        if (op->result != -EAGAIN) return false;
    }
}

// The loop runs a virtual thread parked on a descriptor: an event came (or
// the descriptor closed). true: resume it; false: parked again.
bool io_retry(detail::IoOp *op) {
    wd::Vproc *vp = wd::tls_vproc;
    wd::io_waiter_done(vp);
    if (op->deadline || op->timeout) vp->timers.cancel(&reinterpret_cast<IoTimer *>(op->timer)->timer);
    if (op->woke) {
        const ssize_t done = op->done_so_far();
        op->result = op->woke == ETIMEDOUT && done ? done : -op->woke;
        return true;
    }
    auto *s = static_cast<wd::FdState *>(op->fdstate);
    op->seq = s->seq.load(std::memory_order_acquire);
    op->result = op->attempt();
    if (op->result != -EAGAIN) return true;
    return !io_wait(op);
}
} // namespace

namespace detail {
static_assert(sizeof(AsyncWaiter) <= sizeof(IoOp::waiter), "IoOp::waiter holds an AsyncWaiter");
static_assert(sizeof(IoTimer) <= sizeof(IoOp::timer), "IoOp::timer holds an IoTimer");

bool IoOp::io_begin(IoOp *op) noexcept {
    wd::Vproc *vp = wd::tls_vproc;
    wd::FdState *s = vp ? wd::fd_state(vp, op->fd) : nullptr;
    if (!s || s->kind == wd::FdKind::Unknown || s->kind == wd::FdKind::File) {
        op->result = op->attempt(); // out of range, closed, or a regular file (never "not ready")
        return true;
    }
    wd::ensure_nonblock(vp, s, op->fd);
    op->fdstate = s;
    op->seq = s->seq.load(std::memory_order_acquire);
    op->result = op->attempt();
    return op->result != -EAGAIN || s->user_nonblock;
}

bool IoOp::io_park(IoOp *op, std::coroutine_handle<> c) noexcept {
    VThread *v = tl_current;
    op->vt = v;
    op->h = c;
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

ssize_t ReadOp::attempt() noexcept { return wd::sys(::read(fd, buf, len)); }

ssize_t RecvOp::attempt() noexcept { return wd::sys(::recv(fd, buf, len, flags | MSG_DONTWAIT)); }

ssize_t WriteOp::attempt() noexcept {
    while (done < len || len == 0) {
        const char *p = static_cast<const char *>(buf) + done;
        ssize_t n = flags < 0 ? ::write(fd, p, len - done) : ::send(fd, p, len - done, flags | MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            const int e = errno;
            if (e == EPIPE) wd::consume_sigpipe();
            if (e == EAGAIN || e == EWOULDBLOCK) return -EAGAIN;
            return done ? static_cast<ssize_t>(done) : -e;
        }
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
        if (n < 0) {
            const int e = errno;
            if (e == EPIPE) wd::consume_sigpipe();
            if (e == EAGAIN || e == EWOULDBLOCK) return -EAGAIN;
            return done ? static_cast<ssize_t>(done) : -e;
        }
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
    while (done < count) {
        ssize_t n = ::sendfile(fd, in_fd, &offset, count - done);
        if (n == 0) break; // the file ended early
        if (n < 0) {
            const int e = errno;
            if (e == EPIPE) wd::consume_sigpipe();
            if (e == EAGAIN || e == EWOULDBLOCK) return -EAGAIN;
            return done ? static_cast<ssize_t>(done) : -e;
        }
        done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
}

ssize_t AcceptOp::attempt() noexcept {
    int r = ::accept4(fd, addr, len, flags | SOCK_NONBLOCK);
    if (r < 0) return -errno;
    if (wd::Vproc *vp = wd::tls_vproc)
        wd::fd_created(vp, r, wd::FdKind::Stream, (flags & SOCK_NONBLOCK) != 0, (flags & SOCK_NONBLOCK) == 0);
    return r;
}

int close(int fd) noexcept { return weft_close(fd); }

} // namespace weft::vt
