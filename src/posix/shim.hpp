// Shared by the files of libweft-posix (docs/posix.md): whether the caller
// is a weft thread, and the counters `weft-run --report` prints.
#pragma once

#include <atomic>
#include <pthread.h>
#include <cerrno>
#include <cstdint>

#include "core/park.hpp"
#include "core/tcb.hpp"
#include "core/vproc.hpp"

// glibc's C cleanup-handler protocol (pthread.h declares it for C only;
// the shim defines it in cancel.cc and uses it in pthread_once).
extern "C" {
void __pthread_register_cancel(__pthread_unwind_buf_t *buf);
void __pthread_unregister_cancel(__pthread_unwind_buf_t *buf);
[[noreturn]] void __pthread_unwind_next(__pthread_unwind_buf_t *buf);
}

namespace weft::posix {

// True on a weft user thread; false before main, after the runtime ended,
// and on kernel threads that are not vprocs (offload workers, threads the
// program made before main): those get libc's calls unchanged.
inline bool on_weft() {
    detail::Vproc *vp = detail::tls_vproc;
    return vp && vp->current && vp->current != &vp->loop;
}

// What the shim did, for --report: calls it served on weft, and calls it
// passed to libc because they came from outside weft or because weft has no
// equivalent (the latter named, the first time, on stderr with --report).
enum Counter : int {
    kServed,
    kOutside,
    kPassedThrough,
    kCounterCount,
};
extern std::atomic<uint64_t> g_counters[kCounterCount];
inline void count(Counter c) { g_counters[c].fetch_add(1, std::memory_order_relaxed); }

// A call weft cannot serve as asked, handed to libc: counted, and named on
// stderr once per name when WEFT_POSIX_REPORT is set.
void passed_through(const char *name);

// Nanoseconds on weft's clock (CLOCK_MONOTONIC) for an absolute timespec
// on `clock`; 0 deadline never happens (at least 1).
uint64_t deadline_on(clockid_t clock, const struct timespec *abs);
bool valid_timespec(const struct timespec *ts);

// NPTL threads exist (made outside weft): a pthread_t weft does not know
// may be theirs, for libc.
bool nptl_threads();

// --- cancellation (cancel.cc) ---

// Tcb::cancel bits: cancellation's state, and a signal's interruption of
// a blocking call (pthread_kill: kSignalled, or kSignalRestart when the
// handler has SA_RESTART).
inline constexpr uint8_t kCancelDisabled = 1, kCancelAsync = 2, kCancelPending = 4, kCancelActing = 8,
                         kSignalled = 16, kSignalRestart = 32, kSignalBits = kSignalled | kSignalRestart;

// A cancel to act on now: requested, and the thread has cancellation enabled.
inline bool cancel_due(uint8_t bits) { return (bits & (kCancelPending | kCancelDisabled)) == kCancelPending; }

// Act on a cancel: run the cleanup handlers, then exit with PTHREAD_CANCELED.
[[noreturn]] void cancel_act(detail::Tcb *self);
// Run the cleanup handlers still registered, then exit with self->retval
// (pthread_exit's path too).
[[noreturn]] void cleanup_and_exit(detail::Tcb *self);
// End t's blocking call if it waits in one (expire_wait on t's home vproc);
// the reason is in t->cancel, set before.
void interrupt_wait(detail::Tcb *t);

// A blocking call of the program, on a weft thread: a cancellation point,
// and a wait pthread_kill interrupts (EINTR), as a signal would on NPTL.
//     BlockingCall bc;           // acts on a pending cancel (does not return then)
//     r = <the call>;            // its wait may be cut short
//     bc.leave(r failed)         // kDone, or why it was cut short
// Its waits are timed (kNoDeadline when the call has none: no timer is
// armed) and interruptible, so that pthread_cancel and pthread_kill can end
// them (expire_wait). A call that did its work (leave(false)) returns its
// result; a cancel stays pending for the next cancellation point rather
// than lose, say, the bytes it read.
class BlockingCall {
public:
    enum Outcome { kDone, kInterrupted, kRestart };

    BlockingCall() : t_(detail::tls_vproc->current) {
        uint8_t c = t_->cancel.load(std::memory_order_acquire);
        if (cancel_due(c)) cancel_act(t_);
        // A signal before the call ran its handler then; it does not interrupt
        // this one (an interrupt still on its way checks for a reason first).
        if (c & kSignalBits) clear_signal();
        t_->expire_next = false;
        t_->interruptible = true;
        io_deadline_ = t_->io_deadline;
        if (!io_deadline_) t_->io_deadline = detail::kNoDeadline;
    }
    BlockingCall(const BlockingCall &) = delete;
    BlockingCall &operator=(const BlockingCall &) = delete;
    ~BlockingCall() { end(); }

    // The deadline for a wait the program gave none.
    static constexpr uint64_t no_deadline() { return detail::kNoDeadline; }
    // Whether the call's I/O waits had no deadline but ours (kNoDeadline):
    // an ETIMEDOUT from them means it was cut short.
    bool unbounded() const { return io_deadline_ == 0 && t_->io_timeout == 0; }

    // After the call. failed: it did not do its work (an error, a timeout,
    // nothing ready) — then a pending cancel is acted on, or the call was
    // interrupted by a signal: kInterrupted (EINTR), or kRestart if the
    // handler asked for SA_RESTART (for the calls that honour it).
    Outcome leave(bool failed) {
        end();
        return failed ? check() : kDone;
    }
    // For a call that waits in a loop: what leave(true) would say, but the
    // call goes on (kDone: wait again).
    Outcome check() {
        uint8_t c = t_->cancel.load(std::memory_order_acquire);
        if (cancel_due(c)) {
            end();
            cancel_act(t_);
        }
        if (!(c & kSignalBits)) return kDone;
        clear_signal();
        return c & kSignalled ? kInterrupted : kRestart;
    }

    // Whether leave(true) would act or say interrupted, doing nothing yet
    // (for a call that must first release what it holds).
    bool cut_short() const {
        uint8_t c = t_->cancel.load(std::memory_order_acquire);
        return cancel_due(c) || (c & kSignalBits);
    }

private:
    void clear_signal() { t_->cancel.fetch_and(static_cast<uint8_t>(~kSignalBits), std::memory_order_relaxed); }
    void end() {
        if (!on_) return;
        on_ = false;
        t_->interruptible = false;
        t_->expire_next = false;
        t_->io_deadline = io_deadline_;
    }
    detail::Tcb *t_;
    bool on_ = true;
    uint64_t io_deadline_ = 0;
};

// An errno-style blocking call (-1 and errno on failure) through
// BlockingCall: -1 EINTR when a signal interrupted it; restarted after a
// SA_RESTART handler if `restartable` (read, write, accept ... as on Linux;
// poll, select, epoll_wait and sleeps never are). failed(r): the result
// says it did not do its work.
template <class Call, class Failed> auto blocking_call(bool restartable, Call call, Failed failed) {
    for (;;) {
        BlockingCall bc;
        errno = 0;
        auto r = call();
        const bool f = failed(r);
        const bool cut = f && errno == ETIMEDOUT && bc.unbounded();
        switch (bc.leave(f)) {
        case BlockingCall::kDone:
            if (cut) continue; // cut short with no reason left (it went stale): call again
            return r;
        case BlockingCall::kRestart:
            if (restartable) continue;
            [[fallthrough]];
        case BlockingCall::kInterrupted: errno = EINTR; return static_cast<decltype(r)>(-1);
        }
    }
}
// A cancellation point that does not wait through weft (a call made on the
// offload pool, close): a pending cancel is acted on as it begins.
inline void cancellation_point() {
    detail::Tcb *t = detail::tls_vproc->current;
    if (cancel_due(t->cancel.load(std::memory_order_acquire))) cancel_act(t);
}

// poll, ppoll, select, pselect: never restarted, failed when nothing is ready.
template <class Call> int blocking_poll(Call call) {
    return blocking_call(false, call, [](int n) { return n <= 0; });
}

// The I/O calls: restartable, failed when -1.
template <class Call> auto blocking_call(Call call) {
    return blocking_call(true, call, [](auto r) { return r < 0; });
}

} // namespace weft::posix
