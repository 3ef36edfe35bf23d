// The epoll backend: every descriptor registered once, edge-triggered, for
// both directions; a wake-up is an eventfd write (also edge-triggered, so it
// is never read back: each write is one event). Completion-based operations
// are not offered: disk misses go to the offload pool.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <vector>

#include "core/vproc.hpp"
#include "io/fd.hpp"

namespace weft::detail {
namespace {

class EpollReactor final : public Reactor {
public:
    EpollReactor(int ep, int efd) : ep_(ep), efd_(efd) { sticky_arm = true; }
    ~EpollReactor() override {
        close(efd_);
        close(ep_);
    }
    const char *name() const override { return "epoll"; }
    bool arm_is_thread_safe() const override { return true; }

    int arm(int fd, FdState *s, uint32_t) override {
        if (s->armed) return 0;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
        ev.data.ptr = s;
        vp->stats.io_syscalls.add();
        if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) == 0 || errno == EEXIST) {
            s->armed = true;
            s->backend_events = POLLIN | POLLOUT | POLLPRI;
            return 0;
        }
        return errno; // EBADF: closed; EPERM: not pollable
    }

    void disarm(int fd, FdState *s) override {
        if (!s->armed) return;
        vp->stats.io_syscalls.add();
        epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); // a dup'ed file would stay registered
        s->armed = false;
        s->backend_events = 0;
    }

    void poll() override { collect(0); }

    void wait(uint64_t deadline) override {
        collect(timeout_until(deadline));
    }

    void wake() override {
        uint64_t one = 1;
        ssize_t r = write(efd_, &one, sizeof one);
        (void)r;
    }

private:
    // timeout_ns < 0: block. epoll_pwait2 takes nanoseconds (a millisecond
    // timeout would round every sleep).
    void collect(int64_t timeout_ns) {
        timespec ts, *tsp = nullptr;
        if (timeout_ns >= 0) {
            ts.tv_sec = timeout_ns / 1000000000;
            ts.tv_nsec = timeout_ns % 1000000000;
            tsp = &ts;
        }
        vp->stats.io_syscalls.add();
        int n = -1;
        if (!no_pwait2_) {
            n = epoll_pwait2(ep_, events_, kBatch, tsp, nullptr);
            // Linux before 5.11, a seccomp filter or Valgrind: without the
            // fallback every idle wait returned at once, and no event came.
            if (n < 0 && errno == ENOSYS) no_pwait2_ = true;
        }
        if (no_pwait2_) {
            const int64_t ms = timeout_ns < 0 ? -1 : (timeout_ns + 999999) / 1000000; // rounded up: never early
            n = epoll_wait(ep_, events_, kBatch, ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms));
        }
        if (n > 0)
            prefetch_wakes(static_cast<unsigned>(n), vp->smp,
                           [this](unsigned i) { return static_cast<const FdState *>(events_[i].data.ptr); });
        for (int i = 0; i < n; ++i) {
            if (events_[i].data.ptr == nullptr) continue; // the wake-up eventfd
            uint32_t e = events_[i].events;
            io_ready(static_cast<FdState *>(events_[i].data.ptr), e);
        }
    }

    static constexpr int kBatch = 256; // events per epoll_wait: amortises the call at high concurrency
    int ep_, efd_;
    bool no_pwait2_ = false; // the kernel says ENOSYS: epoll_wait, in milliseconds
    epoll_event events_[kBatch];
};

} // namespace

std::unique_ptr<Reactor> make_epoll_reactor(Vproc *vp) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return nullptr;
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) {
        int e = errno;
        close(ep);
        errno = e;
        return nullptr;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = nullptr;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) != 0) {
        int e = errno;
        close(efd);
        close(ep);
        errno = e;
        return nullptr;
    }
    auto r = std::make_unique<EpollReactor>(ep, efd);
    r->vp = vp;
    return r;
}

} // namespace weft::detail
