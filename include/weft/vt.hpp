// weft/vt.hpp — Virtual Threads on C++20 coroutines (virtual-threads.txt;
// docs/virtual-threads.md).
//
// A virtual thread is threaded code whose blocking functions are
// coroutines: where a weft thread parks its whole stack, a virtual thread
// keeps only the frames of the coroutines that are suspended — the compiler
// does what the paper's `vtify` did by hand, and sizes each frame. They run
// as continuations on one event loop per vproc (the paper's Fig. 5: an
// active and a yield queue, fed by weft's reactor and timers):
//
//     weft::vt::Task<ssize_t> echo_once(int fd) {          // a "multistate" function
//         char buf[512];
//         ssize_t n = co_await weft::vt::read(fd, buf, sizeof buf);
//         if (n > 0) n = co_await weft::vt::write(fd, buf, static_cast<size_t>(n));
//         co_return n;
//     }
//     weft::vt::Task<> conn(int fd) {                       // a virtual thread's body
//         while (co_await echo_once(fd) > 0) {}
//         co_await weft::vt::close(fd);
//     }
//     ... weft::vt::spawn(conn(fd));                       // from a weft thread or a virtual thread
//
// Results follow the blocking calls: >= 0, or -1 with errno set as the
// awaitable resumes. Frames come from per-vproc pools; an awaited I/O
// operation allocates nothing. Virtual threads and weft threads mix: a weft
// thread joins a virtual thread with Handle::join(); a virtual thread may
// call any non-blocking weft function.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <type_traits>
#include <utility>

#include "weft/weft.h"

namespace weft::vt {

struct VThread;
template <class T = void> class Task;

namespace detail {
struct ClueAccess;

// Coroutine frames: per-vproc free lists by 16-byte size class (frames up
// to 4 KiB; larger ones from malloc).
void *frame_alloc(size_t n);
void frame_free(void *p, size_t n) noexcept;

// The virtual thread running on this kernel thread's loop (nullptr: none).
VThread *current() noexcept;
// Where v continues when it next runs.
void set_resume(VThread *v, std::coroutine_handle<> h) noexcept;
// v's top coroutine has finished (its final suspend).
std::coroutine_handle<> top_done(VThread *v) noexcept;

struct PromiseBase {
    std::coroutine_handle<> continuation; // the awaiting coroutine; none for a virtual thread's top
    std::exception_ptr error;
    VThread *vt = nullptr;

    // Inlined even unoptimised: frame_alloc names its caller, the coroutine.
    [[gnu::always_inline]] static void *operator new(size_t n) { return frame_alloc(n); }
    static void operator delete(void *p, size_t n) noexcept { frame_free(p, n); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
        bool await_ready() noexcept { return false; }
        template <class P> std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            PromiseBase &p = h.promise();
            return p.continuation ? p.continuation : top_done(p.vt);
        }
        void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept { error = std::current_exception(); }
};

template <class T> struct Promise : PromiseBase {
    T value{};
    Task<T> get_return_object() noexcept;
    template <class U> void return_value(U &&v) { value = std::forward<U>(v); }
};
template <> struct Promise<void> : PromiseBase {
    Task<void> get_return_object() noexcept;
    void return_void() noexcept {}
};

} // namespace detail

// A coroutine that may block: awaited from another one (it runs, the
// awaiter resumes when it returns) or spawned as a virtual thread's body.
// Starts only when awaited or spawned; owns its frame.
template <class T> class [[nodiscard]] Task {
public:
    using promise_type = detail::Promise<T>;
    using Handle = std::coroutine_handle<promise_type>;

    Task() = default;
    explicit Task(Handle h) noexcept : h_(h) {}
    Task(Task &&o) noexcept : h_(std::exchange(o.h_, {})) {}
    Task &operator=(Task &&o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~Task() {
        if (h_) h_.destroy();
    }
    Handle release() noexcept { return std::exchange(h_, {}); }

    bool await_ready() const noexcept { return !h_ || h_.done(); }
    template <class P> std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
        h_.promise().continuation = parent;
        h_.promise().vt = parent.promise().vt;
        return h_; // symmetric transfer: no stack grows, however deep the chain
    }
    T await_resume() {
        if (h_.promise().error) std::rethrow_exception(h_.promise().error);
        if constexpr (!std::is_void_v<T>) return std::move(h_.promise().value);
    }

private:
    Handle h_;
};

namespace detail {
template <class T> Task<T> Promise<T>::get_return_object() noexcept {
    return Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline Task<void> Promise<void>::get_return_object() noexcept {
    return Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}
} // namespace detail

// A virtual thread, as its creator holds it: join it (from a weft thread,
// or co_await it from a virtual thread) or let it go (the destructor
// detaches). Its body's exception, if any, is rethrown by join.
class Handle {
public:
    Handle() = default;
    explicit Handle(VThread *v) noexcept : v_(v) {}
    Handle(Handle &&o) noexcept : v_(std::exchange(o.v_, nullptr)) {}
    Handle &operator=(Handle &&o) noexcept;
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
    ~Handle();

    // From a weft thread (not a virtual thread): wait until it has finished.
    void join();
    // Ask it to end, from any thread or virtual thread, on any vproc. Its
    // I/O and sleeps become cancellation points: the wait it is parked in,
    // if it is in an I/O operation or a sleep, ends now; from then on every
    // I/O operation fails at once with ECANCELED (a transfer that moved
    // bytes returns them, as at a deadline) and every sleep returns at once.
    // Other waits (join, channels, events, on_thread, offload) end as they
    // would; its next I/O or sleep then fails. The body sees the errors and
    // returns, its frames freed on the way out (its destructors run): no
    // frame is abandoned. Cooperative, as POSIX's cancellation points are:
    // a body that ignores the errors, or computes without awaiting, runs
    // on (it can ask vt::cancelled()). No-op once it has finished, or the
    // second time.
    void cancel() noexcept;
    // From a virtual thread: co_await h.
    bool await_ready() const noexcept;
    bool await_suspend(std::coroutine_handle<> h) noexcept;
    void await_resume();
    explicit operator bool() const noexcept { return v_ != nullptr; }

private:
    VThread *v_ = nullptr;
};

// Whether the running virtual thread has been asked to end (Handle::cancel);
// false outside a virtual thread.
bool cancelled() noexcept;

// Start body as a virtual thread on this vproc's loop (vproc: on that
// one's). From a weft thread or a virtual thread.
Handle spawn(Task<void> body);
Handle spawn_on(int vproc, Task<void> body);

namespace detail {
// The suspension of an I/O operation on a descriptor: one non-blocking
// attempt at a time, parked on the reactor in between. Allocation-free.
struct IoOp {
    int fd;
    uint32_t events;           // POLLIN or POLLOUT
    ssize_t result = 0;        // >= 0 or -errno
    uint64_t deadline = 0;     // weft_now_ns() time after which a wait fails with ETIMEDOUT (0: none)
    uint64_t timeout = 0;      // ns one wait may last without the descriptor becoming ready (0: none)
    // One non-blocking try: >= 0 (done), -EAGAIN (wait for `events`),
    // kOffload (run offload_work() on a kernel worker first, then try
    // again), or another -errno.
    virtual ssize_t attempt() noexcept = 0;
    static constexpr ssize_t kOffload = -0x10000;
    virtual void offload_work() noexcept {}
    // Bytes a transfer has moved so far (what a timeout returns, if any).
    virtual ssize_t done_so_far() const noexcept { return 0; }
    // A read that returned r >= 0 bytes left the stream's buffer empty (it
    // got less than it asked for): the next one waits for an event first.
    virtual bool drained(ssize_t) const noexcept { return false; }

    // Runtime state.
    VThread *vt = nullptr;
    void *fdstate = nullptr;
    uint32_t seq = 0;
    int16_t woke = 0;          // what the reactor said (0, EBADF), or ETIMEDOUT, or ECANCELED
    bool offloaded = false;    // parked on offload_work, not on the descriptor
    // The reactor's IoWaiter and the vproc's Timer (for the deadline and
    // the timeout), in place; each finds its op by its offset in it.
    alignas(8) unsigned char waiter[40];
    alignas(8) unsigned char timer[32];

    IoOp(int f, uint32_t ev) noexcept : fd(f), events(ev) {}
    IoOp(const IoOp &) = delete;
    IoOp &operator=(const IoOp &) = delete;
    bool await_ready() noexcept { return io_begin(this); }
    bool await_suspend(std::coroutine_handle<> c) noexcept { return io_park(this, c); }
    ssize_t await_resume() noexcept { return io_result(this); }

    static bool io_begin(IoOp *op) noexcept;                       // done at once?
    static bool io_park(IoOp *op, std::coroutine_handle<> c) noexcept; // suspended?
    static ssize_t io_result(IoOp *op) noexcept;
};
} // namespace detail

// ---- the awaitable calls ---------------------------------------------------

struct ReadOp final : detail::IoOp {
    ReadOp(int fd, void *b, size_t n) noexcept : IoOp(fd, 0x001 /* POLLIN */), buf(b), len(n) {}
    void *buf;
    size_t len;
    ssize_t attempt() noexcept override;
    bool drained(ssize_t r) const noexcept override { return r > 0 && static_cast<size_t>(r) < len; }
};
// All of it, unless an error (then what went, if anything).
struct WriteOp final : detail::IoOp {
    WriteOp(int fd, const void *b, size_t n, int f) noexcept : IoOp(fd, 0x004 /* POLLOUT */), buf(b), len(n), flags(f) {}
    const void *buf;
    size_t len, done = 0;
    int flags;                 // send(2) flags; -1: write(2)
    ssize_t done_so_far() const noexcept override { return static_cast<ssize_t>(done); }
    ssize_t attempt() noexcept override;
};
struct RecvOp final : detail::IoOp {
    RecvOp(int fd, void *b, size_t n, int f) noexcept : IoOp(fd, 0x001), buf(b), len(n), flags(f) {}
    void *buf;
    size_t len;
    int flags;
    ssize_t attempt() noexcept override;
    bool drained(ssize_t r) const noexcept override { // (a peek leaves the bytes where they were)
        return r > 0 && static_cast<size_t>(r) < len && !(flags & MSG_PEEK);
    }
};
struct AcceptOp final : detail::IoOp {
    AcceptOp(int fd, sockaddr *a, socklen_t *l, int f) noexcept : IoOp(fd, 0x001), addr(a), len(l), flags(f) {}
    sockaddr *addr;
    socklen_t *len;
    int flags;
    ssize_t attempt() noexcept override;
};

// Several buffers, all of them (writev), unless an error.
struct WritevOp final : detail::IoOp {
    static constexpr int kMax = 8;
    WritevOp(int fd, const struct iovec *v, int n) noexcept;
    struct iovec iov[kMax];
    int cnt, first = 0;
    size_t done = 0;
    ssize_t done_so_far() const noexcept override { return static_cast<ssize_t>(done); }
    ssize_t attempt() noexcept override;
};
// A file's bytes to a socket, all `count` of them (non-blocking sendfile,
// parked on the socket in between), unless an error or the file ends.
// Each stretch is checked for page-cache residency before it is sent; a
// stretch that may miss is sent from a kernel worker of the offload pool
// while the loop goes on (sendfile would otherwise block the loop on the
// disk), and what the socket cannot take then is read in there.
struct SendfileOp final : detail::IoOp {
    SendfileOp(int out, int in, off_t off, size_t n) noexcept : IoOp(out, 0x004), in_fd(in), offset(off), count(n) {}
    int in_fd;
    int worker_error = 0;      // the worker's sendfile failed with it
    off_t offset;
    size_t count, done = 0;
    off_t checked_to = -1;     // [offset, checked_to) was resident, or has been read in
    ssize_t done_so_far() const noexcept override { return static_cast<ssize_t>(done); }
    ssize_t attempt() noexcept override;
    void offload_work() noexcept override; // send [offset, checked_to) from a worker
};

inline ReadOp read(int fd, void *buf, size_t n) noexcept { return {fd, buf, n}; }
inline WriteOp write(int fd, const void *buf, size_t n) noexcept { return {fd, buf, n, -1}; }
inline RecvOp recv(int fd, void *buf, size_t n, int flags = 0) noexcept { return {fd, buf, n, flags}; }
inline WriteOp send(int fd, const void *buf, size_t n, int flags = 0) noexcept { return {fd, buf, n, flags}; }
inline AcceptOp accept(int fd, sockaddr *addr = nullptr, socklen_t *len = nullptr, int flags = 0) noexcept {
    return {fd, addr, len, flags};
}
inline WritevOp writev(int fd, const struct iovec *iov, int n) noexcept { return {fd, iov, n}; }
inline SendfileOp sendfile(int out, int in, off_t offset, size_t n) noexcept { return {out, in, offset, n}; }

// Any of the above, failing with ETIMEDOUT once weft_now_ns() passes
// deadline_ns (a send returns what went): co_await vt::until(vt::read(fd, b, n), dl).
template <class Op> struct Until {
    Op &op; // the temporary of the same full expression
    bool await_ready() noexcept { return op.await_ready(); }
    bool await_suspend(std::coroutine_handle<> c) noexcept { return op.await_suspend(c); }
    ssize_t await_resume() noexcept { return op.await_resume(); }
};
template <class Op> Until<Op> until(Op &&op, uint64_t deadline_ns) noexcept {
    op.deadline = deadline_ns;
    return {op};
}
// ... or once one wait (no progress) lasts timeout_ns: a send timeout.
template <class Op> Until<Op> within(Op &&op, uint64_t timeout_ns) noexcept {
    op.timeout = timeout_ns;
    return {op};
}

// close: weft_close (wakes anyone waiting on fd with EBADF). Never waits.
int close(int fd) noexcept;

// Run the other ready virtual threads first (the paper's VT_yield: onto the
// yield queue).
struct Yield {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) noexcept;
    void await_resume() const noexcept {}
};
inline Yield yield() noexcept { return {}; }

// Sleep until a CLOCK_MONOTONIC time (weft_now_ns), or for a while.
struct SleepUntil {
    uint64_t deadline;
    alignas(8) unsigned char timer[40]; // the vproc's Timer
    VThread *vt = nullptr;
    bool await_ready() const noexcept { return deadline <= weft_now_ns(); }
    bool await_suspend(std::coroutine_handle<> h) noexcept; // false: cancelled, no sleep
    void await_resume() const noexcept {}
};
inline SleepUntil sleep_until(uint64_t deadline_ns) noexcept { return {deadline_ns, {}, nullptr}; }
inline SleepUntil sleep_for(uint64_t ns) noexcept { return {weft_now_ns() + ns, {}, nullptr}; }

// Run fn() on a weft thread of this vproc — it may block in any weft call,
// take weft's locks, sleep, or weft_offload to a kernel worker — and resume
// with its result once it returns (the paper's worker pools, §2.2.2, with
// weft threads as the workers: tens of nanoseconds to start one).
namespace detail {
struct OnThreadBase {
    VThread *vt = nullptr;
    virtual void call() = 0;
    void suspend(std::coroutine_handle<> h);
};
} // namespace detail
template <class F> struct OnThread final : detail::OnThreadBase {
    explicit OnThread(F f) : fn(std::move(f)) {}
    F fn;
    std::conditional_t<std::is_void_v<std::invoke_result_t<F &>>, int, std::invoke_result_t<F &>> value{};
    void call() override {
        if constexpr (std::is_void_v<std::invoke_result_t<F &>>) fn();
        else value = fn();
    }
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) { suspend(h); }
    auto await_resume() {
        if constexpr (!std::is_void_v<std::invoke_result_t<F &>>) return std::move(value);
    }
};
template <class F> OnThread<F> on_thread(F fn) { return OnThread<F>(std::move(fn)); }

// Run fn() on a kernel worker of the offload pool — a call that can only
// block its kernel thread (a library's blocking call, a pthread lock, a
// long computation) — and resume with its result (errno stays the
// worker's: fn returns it if it matters).
// The paper's worker pool (§2.2.2); its size is weft_set_workers /
// set_workers, adjustable while the program runs (the paper's future work).
// A weft thread of this vproc carries the request and parks meanwhile.
template <class F> auto offload(F fn) {
    return on_thread([fn = std::move(fn)]() mutable {
        using R = std::invoke_result_t<F &>;
        struct Call {
            F *fn;
            std::conditional_t<std::is_void_v<R>, int, R> value{};
        } c{&fn};
        weft_offload(
            [](void *p) -> void * {
                auto *c = static_cast<Call *>(p);
                if constexpr (std::is_void_v<R>) (*c->fn)();
                else c->value = (*c->fn)();
                return nullptr;
            },
            &c);
        if constexpr (!std::is_void_v<R>) return std::move(c.value);
    });
}
// The worker pool's bound (1..256; false if refused) and its current size.
inline bool set_workers(int n) noexcept { return weft_set_workers(n) == 0; }
inline int workers() noexcept { return weft_get_workers(nullptr); }

// Continue on vproc vp's loop (the paper's migration; a no-op if already there).
struct Migrate {
    int vproc;
    bool await_ready() const noexcept;
    void await_suspend(std::coroutine_handle<> h) noexcept;
    void await_resume() const noexcept {}
};
inline Migrate migrate(int vproc) noexcept { return {vproc}; }

// ---- clues (§2.2.3): self-organising pipelines -----------------------------------

// A clue belongs to one event loop (vproc). A virtual thread that follows
// it migrates there (nothing, if already there): code between two follows
// is a pipeline stage, and runs on one loop. The cluethread moves clues
// between loops to balance their load.
class Clue {
public:
    explicit Clue(int vproc = 0);
    ~Clue();
    Clue(const Clue &) = delete;
    Clue &operator=(const Clue &) = delete;

    int vproc() const noexcept { return vp_.load(std::memory_order_relaxed); }
    void move_to(int vproc) noexcept { vp_.store(vproc, std::memory_order_relaxed); }

    // The paper's bookkeeping (footnote 3): the clue a thread followed just
    // before this one, and how often that was the same as last time.
    Clue *previous() const noexcept { return previous_.load(std::memory_order_relaxed); }
    uint64_t same_count() const noexcept { return same_.load(std::memory_order_relaxed); }
    uint64_t different_count() const noexcept { return different_.load(std::memory_order_relaxed); }
    uint64_t follows() const noexcept { return follows_.load(std::memory_order_relaxed); }
    // CPU time virtual threads spent after following it, before their next
    // follow or their end (its stage's load).
    uint64_t busy_ns() const noexcept { return busy_.load(std::memory_order_relaxed); }

    struct Follow {
        Clue &c;
        bool await_ready() noexcept;
        void await_suspend(std::coroutine_handle<> h) noexcept;
        void await_resume() const noexcept {}
    };
    Follow follow() noexcept { return Follow{*this}; }

private:
    friend struct detail::ClueAccess;
    std::atomic<int> vp_;
    std::atomic<Clue *> previous_{nullptr};
    std::atomic<uint64_t> same_{0}, different_{0}, follows_{0}, busy_{0};
    Clue *next_ = nullptr, *prev_ = nullptr; // every clue, for the cluethread
};
inline Clue::Follow follow(Clue &c) noexcept { return c.follow(); }

// A hashed n-clue (§5): n sub-clues, on as many loops; a virtual thread
// follows the one its identity hashes to, so one stage runs on several loops.
class HashedClue {
public:
    explicit HashedClue(int n);
    Clue &sub(size_t i) { return *subs_[i]; }
    size_t size() const { return subs_.size(); }
    Clue::Follow follow() noexcept;

private:
    std::vector<std::unique_ptr<Clue>> subs_;
};
inline Clue::Follow follow(HashedClue &c) noexcept { return c.follow(); }

// The cluethread: a weft thread that every `period_ns` reads each loop's
// CPU use and each clue's, and when the busiest loop is ahead of the idlest
// by more than `threshold` of the period moves one clue from it: the one
// whose load comes closest to halving the gap, among those with the fewest
// neighbours-in-sequence (the clue before it, or after it) on that loop —
// only if the move at least halves the gap, and never in its first period
// or the period after a move (whose figures straddle it).
struct CluethreadOptions {
    uint64_t period_ns = 20'000'000; // 20 ms
    double threshold = 0.10;
};
class Cluethread {
public:
    explicit Cluethread(CluethreadOptions o = {});
    ~Cluethread(); // stops it
    Cluethread(const Cluethread &) = delete;
    Cluethread &operator=(const Cluethread &) = delete;
    void stop();
    uint64_t moves() const noexcept { return moves_.load(std::memory_order_relaxed); }
    struct Move {
        const Clue *clue;
        int from, to;
    };
    // The moves it made, in order (read after stop()).
    const std::vector<Move> &history() const noexcept { return history_; }

private:
    static void *main(void *self);
    std::vector<Move> history_;
    CluethreadOptions opt_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> moves_{0};
    weft_thread_t t_{};
    bool running_ = false;
};

// CPU time each vproc's loop has spent running virtual threads, in ns
// (counted while any clue exists).
uint64_t loop_busy_ns(int vproc) noexcept;

// ---- synchronisation between virtual threads (any vprocs) ---------------------

namespace detail {
// Make v ready on its loop (from a virtual thread, a weft thread, any vproc).
void ready(VThread *v) noexcept;
} // namespace detail

// A flag virtual threads wait for: set() releases every waiter and those to
// come, until reset(). The waiting costs nothing but the awaiter in the
// waiter's frame.
class Event {
public:
    struct Wait {
        Event &e;
        Wait *next = nullptr;
        VThread *vt = nullptr;
        bool await_ready() {
            e.mu_.lock();
            if (e.set_) e.mu_.unlock();
            return e.set_;
        }
        void await_suspend(std::coroutine_handle<> h) {
            vt = detail::current();
            detail::set_resume(vt, h);
            next = e.waiters_;
            e.waiters_ = this;
            e.mu_.unlock();
        }
        void await_resume() const noexcept {}
    };
    Wait wait() { return Wait{*this}; }
    void set() {
        std::lock_guard<std::mutex> g(mu_);
        set_ = true;
        for (Wait *w = std::exchange(waiters_, nullptr); w;) {
            Wait *n = w->next;
            detail::ready(w->vt);
            w = n;
        }
    }
    void reset() {
        std::lock_guard<std::mutex> g(mu_);
        set_ = false;
    }

private:
    std::mutex mu_;
    bool set_ = false;
    Wait *waiters_ = nullptr;
};

// A bounded FIFO channel between virtual threads (capacity >= 1): send
// waits while it is full, receive while it is empty; a value is handed
// straight to a waiting receiver, and a waiting sender's straight into the
// space a receive makes. close(): receives drain what is left, then get
// nothing; sends fail.
template <class T> class Channel {
public:
    explicit Channel(size_t capacity) : cap_(capacity ? capacity : 1) {}

    struct Recv {
        Channel &c;
        std::optional<T> slot;
        Recv *next = nullptr;
        VThread *vt = nullptr;
        bool await_ready() {
            c.mu_.lock();
            if (!c.q_.empty()) {
                slot.emplace(std::move(c.q_.front()));
                c.q_.pop_front();
                if (typename Channel::Send *s = c.pop(c.senders_)) { // its value takes the space
                    c.q_.push_back(std::move(s->value));
                    detail::ready(s->vt);
                }
            } else if (!c.closed_) {
                return false; // still locked: await_suspend queues us
            }
            c.mu_.unlock();
            return true;
        }
        void await_suspend(std::coroutine_handle<> h) {
            vt = detail::current();
            detail::set_resume(vt, h);
            c.push(c.receivers_, this);
            c.mu_.unlock();
        }
        std::optional<T> await_resume() { return std::move(slot); }
    };
    struct Send {
        Channel &c;
        T value;
        bool ok = true;
        Send *next = nullptr;
        VThread *vt = nullptr;
        bool await_ready() {
            c.mu_.lock();
            if (c.closed_) {
                ok = false;
            } else if (Recv *r = c.pop(c.receivers_)) {
                r->slot.emplace(std::move(value));
                detail::ready(r->vt);
            } else if (c.q_.size() < c.cap_) {
                c.q_.push_back(std::move(value));
            } else {
                return false; // still locked
            }
            c.mu_.unlock();
            return true;
        }
        void await_suspend(std::coroutine_handle<> h) {
            vt = detail::current();
            detail::set_resume(vt, h);
            c.push(c.senders_, this);
            c.mu_.unlock();
        }
        bool await_resume() const noexcept { return ok; }
    };

    // co_await ch.send(v): true once it is in, false if the channel closed.
    Send send(T v) { return Send{*this, std::move(v)}; }
    // co_await ch.recv(): the next value, or nothing once closed and drained.
    Recv recv() { return Recv{*this, std::nullopt}; }
    void close() {
        std::lock_guard<std::mutex> g(mu_);
        closed_ = true;
        while (Recv *r = pop(receivers_)) detail::ready(r->vt);
        while (Send *s = pop(senders_)) {
            s->ok = false;
            detail::ready(s->vt);
        }
    }

private:
    template <class W> struct List {
        W *head = nullptr, *tail = nullptr;
    };
    template <class W> static void push(List<W> &l, W *w) {
        w->next = nullptr;
        (l.tail ? l.tail->next : l.head) = w;
        l.tail = w;
    }
    template <class W> static W *pop(List<W> &l) {
        W *w = l.head;
        if (w && !(l.head = w->next)) l.tail = nullptr;
        return w;
    }

    std::mutex mu_;
    std::deque<T> q_;
    size_t cap_;
    bool closed_ = false;
    List<Recv> receivers_;
    List<Send> senders_;
};

// ---- what the runtime can tell -------------------------------------------------

struct Stats {
    uint64_t spawned, finished, live;     // virtual threads
    uint64_t resumes, io_parks, migrations;
    uint64_t frames, frame_bytes;         // frames allocated so far, bytes of those now live
    uint64_t largest_frame;               // bytes
    uint64_t pool_bytes;                  // taken from malloc in slabs for frames and control blocks, kept
};
// Summed over every vproc.
Stats stats() noexcept;

// The continuation size the paper optimised by hand, per coroutine: with
// recording on, every frame allocated is counted by the coroutine that
// allocated it (its address: the caller of the frame allocator is the
// coroutine's ramp). Off by default (a table lookup per frame).
struct FrameSite {
    const void *code;     // inside the coroutine's ramp function
    std::string name;     // demangled, when the symbol is visible (-rdynamic), else ""
    size_t bytes;         // its frame
    uint64_t count;       // frames allocated
};
void record_frames(bool on) noexcept;
std::vector<FrameSite> frame_report();

} // namespace weft::vt
