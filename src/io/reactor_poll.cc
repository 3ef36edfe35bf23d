// The poll(2) backend: the portable fallback. Level-triggered, so interest
// is one-shot: a descriptor is in the poll set only while a thread waits on
// it, and an event takes it out (its woken waiters retry the system call and
// re-arm if they must wait again). Slot 0 is the wake-up eventfd.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <vector>

#include "core/vproc.hpp"
#include "io/fd.hpp"

namespace weft::detail {
namespace {

class PollReactor final : public Reactor {
public:
    explicit PollReactor(int efd) : efd_(efd) {
        fds_.push_back(pollfd{efd, POLLIN, 0});
        states_.push_back(nullptr);
    }
    ~PollReactor() override { close(efd_); }
    const char *name() const override { return "poll"; }

    int arm(int fd, FdState *s, uint32_t events) override {
        if (s->owner() != this) return 0; // closed and re-armed elsewhere since it was queued
        events &= POLLIN | POLLOUT | POLLPRI;
        if (s->backend_slot) {
            fds_[s->backend_slot - 1].events |= static_cast<short>(events);
            s->backend_events |= events;
            return 0;
        }
        fds_.push_back(pollfd{fd, static_cast<short>(events), 0});
        states_.push_back(s);
        s->backend_slot = static_cast<uint32_t>(fds_.size());
        s->backend_events = events;
        return 0;
    }

    void disarm(int, FdState *s) override {
        if (s->backend_slot) remove(s->backend_slot - 1);
    }

    void poll() override {
        apply_remote();
        collect(0);
    }

    void wait(uint64_t deadline) override {
        apply_remote();
        collect(timeout_until(deadline));
    }

    void wake() override {
        uint64_t one = 1;
        ssize_t r = write(efd_, &one, sizeof one);
        (void)r;
    }

private:
    void remove(size_t i) { // swap with the last slot
        states_[i]->backend_slot = 0;
        states_[i]->backend_events = 0;
        size_t last = fds_.size() - 1;
        if (i != last) {
            fds_[i] = fds_[last];
            states_[i] = states_[last];
            states_[i]->backend_slot = static_cast<uint32_t>(i + 1);
        }
        fds_.pop_back();
        states_.pop_back();
    }

    void collect(int64_t timeout_ns) {
        timespec ts, *tsp = nullptr;
        if (timeout_ns >= 0) {
            ts.tv_sec = timeout_ns / 1000000000;
            ts.tv_nsec = timeout_ns % 1000000000;
            tsp = &ts;
        }
        vp->stats.io_syscalls.add();
        int n = ppoll(fds_.data(), fds_.size(), tsp, nullptr);
        if (n <= 0) return;
        if (fds_[0].revents) { // drain the wake-ups (level-triggered)
            uint64_t v;
            vp->stats.io_syscalls.add();
            ssize_t r = read(efd_, &v, sizeof v);
            (void)r;
            fds_[0].revents = 0;
            --n;
        }
        // Take the ready slots out first: io_ready may re-arm (append).
        ready_.clear();
        for (size_t i = fds_.size(); n > 0 && i-- > 1;) {
            if (!fds_[i].revents) continue;
            --n;
            ready_.push_back({states_[i], static_cast<uint32_t>(fds_[i].revents), fds_[i].fd});
            remove(i);
        }
        for (const Ready &r : ready_) {
            uint32_t still = io_ready(r.s, r.revents);
            if (still && r.s->owner() == this) arm(r.fd, r.s, still);
        }
    }

    struct Ready {
        FdState *s;
        uint32_t revents;
        int fd;
    };
    int efd_;
    std::vector<pollfd> fds_;
    std::vector<FdState *> states_;
    std::vector<Ready> ready_;
};

} // namespace

std::unique_ptr<Reactor> make_poll_reactor(Vproc *vp) {
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) return nullptr;
    auto r = std::make_unique<PollReactor>(efd);
    r->vp = vp;
    return r;
}

} // namespace weft::detail
