// Shared by the files of libweft-posix (docs/posix.md): whether the caller
// is a weft thread, and the counters `weft-run --report` prints.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/park.hpp"
#include "core/tcb.hpp"
#include "core/vproc.hpp"

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

// Tcb::cancel bits.
inline constexpr uint8_t kCancelDisabled = 1, kCancelAsync = 2, kCancelPending = 4, kCancelActing = 8;

// Act on a cancel: run the cleanup handlers, then exit with PTHREAD_CANCELED.
[[noreturn]] void cancel_act(detail::Tcb *self);
// Run the cleanup handlers still registered, then exit with self->retval
// (pthread_exit's path too).
[[noreturn]] void cleanup_and_exit(detail::Tcb *self);

// A blocking call at a cancellation point, on a weft thread:
//     CancelPoint cp;            // acts on a pending request (does not return then)
//     r = <the call>;            // its wait may be cut short by pthread_cancel
//     cp.leave(r failed);        // acts on a request that cut it short
// While the thread may be cancelled its waits are timed (kNoDeadline when
// the call has no deadline: no timer is armed) and interruptible, so that
// pthread_cancel can end them (expire_wait). A call that did its work
// (leave(false)) returns its result; the request stays pending for the
// next cancellation point rather than lose, say, the bytes it read.
class CancelPoint {
public:
    CancelPoint() : t_(detail::tls_vproc->current) {
        uint8_t c = t_->cancel.load(std::memory_order_acquire);
        if (c & kCancelDisabled) return;
        if (c & kCancelPending) cancel_act(t_);
        on_ = true;
        t_->interruptible = true;
        io_deadline_ = t_->io_deadline;
        if (!io_deadline_) t_->io_deadline = detail::kNoDeadline;
    }
    CancelPoint(const CancelPoint &) = delete;
    CancelPoint &operator=(const CancelPoint &) = delete;
    // The deadline a wait with none should use: kNoDeadline while cancellable.
    uint64_t no_deadline() const { return on_ ? detail::kNoDeadline : 0; }
    void leave(bool failed) {
        if (!on_) return;
        on_ = false;
        t_->interruptible = false;
        t_->io_deadline = io_deadline_;
        if (failed && (t_->cancel.load(std::memory_order_acquire) & (kCancelPending | kCancelDisabled)) == kCancelPending)
            cancel_act(t_);
    }
    // For a call that waits in a loop: act on a request now, staying a
    // cancellation point otherwise.
    void check() {
        if (on_ && (t_->cancel.load(std::memory_order_acquire) & (kCancelPending | kCancelDisabled)) == kCancelPending)
            leave(true);
    }
    ~CancelPoint() { // left by a return without leave(): the call's own error paths
        if (on_) {
            t_->interruptible = false;
            t_->io_deadline = io_deadline_;
        }
    }

private:
    detail::Tcb *t_;
    bool on_ = false;
    uint64_t io_deadline_ = 0;
};

// A blocking call at a cancellation point, acting on a cancel that cut it
// short when `failed(result)`: -1 for the errno-style calls.
template <class Call, class Failed> auto at_cancel_point(Call call, Failed failed) {
    CancelPoint cp;
    auto r = call();
    cp.leave(failed(r));
    return r;
}
template <class Call> auto at_cancel_point(Call call) {
    return at_cancel_point(call, [](auto r) { return r < 0; });
}

} // namespace weft::posix
