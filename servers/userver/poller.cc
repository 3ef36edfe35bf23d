// The three readiness mechanisms the study's µserver could use: select,
// poll and epoll. Each keeps what it needs to answer "which descriptors
// are ready" for one loop.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "userver.hpp"

namespace userver {

const char *events_name(Events e) {
    switch (e) {
    case Events::Epoll: return "epoll";
    case Events::Poll: return "poll";
    case Events::Select: return "select";
    }
    return "?";
}

namespace {

// Level-triggered. EvConn::receive() returns as soon as it has a whole
// request, without reading until EAGAIN, so with edge triggering the loop
// would have to try one more recv after every reply to learn whether more
// input had already arrived (its edge consumed): a system call per
// request. Level-triggered, the cost is an epoll_ctl when a reply fills
// the socket buffer and the connection turns to waiting for writability
// (and one back), which only large replies to slow readers pay.
class EpollPoller final : public Poller {
public:
    EpollPoller() : ep_(epoll_create1(EPOLL_CLOEXEC)), events_(512) {}
    ~EpollPoller() override {
        if (ep_ >= 0) close(ep_);
    }
    bool ok() const { return ep_ >= 0; }

    bool add(int fd, bool write, bool shared) override {
        struct epoll_event ev {};
        ev.events = write ? EPOLLOUT : EPOLLIN;
        // A listening socket every loop watches: wake one idle loop per
        // new connection rather than the whole herd.
        if (shared) ev.events |= EPOLLEXCLUSIVE;
        ev.data.fd = fd;
        return epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) == 0;
    }
    void modify(int fd, bool write) override {
        struct epoll_event ev {};
        ev.events = write ? EPOLLOUT : EPOLLIN;
        ev.data.fd = fd;
        epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
    }
    void remove(int fd, bool closing) override {
        // Closing the only descriptor of a socket takes it out of every epoll
        // set; connection sockets are never duplicated (SYMPED forks before
        // the first accept), so the call would be wasted.
        if (!closing) epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
    }
    int wait(int timeout_ms, std::vector<Ready> *out) override {
        out->clear();
        int n = epoll_wait(ep_, events_.data(), static_cast<int>(events_.size()), timeout_ms);
        if (n < 0) return errno == EINTR ? 0 : -1;
        for (int i = 0; i < n; ++i) {
            uint32_t e = events_[i].events, what = 0;
            if (e & EPOLLIN) what |= kIn;
            if (e & EPOLLOUT) what |= kOut;
            if (e & (EPOLLERR | EPOLLHUP)) what |= kErr;
            out->push_back({events_[i].data.fd, what});
        }
        return n;
    }

private:
    int ep_;
    std::vector<struct epoll_event> events_;
};

// A dense pollfd array, with each descriptor's index so that removal is
// O(1): the last entry moves into the hole.
class PollPoller final : public Poller {
public:
    bool add(int fd, bool write, bool) override {
        if (static_cast<size_t>(fd) >= at_.size()) at_.resize(std::max<size_t>(fd + 1, at_.size() * 2), -1);
        at_[fd] = static_cast<int>(fds_.size());
        fds_.push_back({fd, static_cast<short>(write ? POLLOUT : POLLIN), 0});
        return true;
    }
    void modify(int fd, bool write) override { fds_[at_[fd]].events = write ? POLLOUT : POLLIN; }
    void remove(int fd, bool) override {
        int i = at_[fd];
        if (i < 0) return;
        fds_[i] = fds_.back();
        at_[fds_[i].fd] = i;
        fds_.pop_back();
        at_[fd] = -1;
    }
    int wait(int timeout_ms, std::vector<Ready> *out) override {
        out->clear();
        int n = poll(fds_.data(), fds_.size(), timeout_ms);
        if (n < 0) return errno == EINTR ? 0 : -1;
        for (size_t i = 0; i < fds_.size() && static_cast<int>(out->size()) < n; ++i) {
            short e = fds_[i].revents;
            if (!e) continue;
            uint32_t what = 0;
            if (e & POLLIN) what |= kIn;
            if (e & POLLOUT) what |= kOut;
            if (e & (POLLERR | POLLHUP | POLLNVAL)) what |= kErr;
            out->push_back({fds_[i].fd, what});
        }
        return n;
    }

private:
    std::vector<struct pollfd> fds_;
    std::vector<int> at_; // index in fds_ by descriptor, -1: not watched
};

// Two fd_sets copied for every call, as select wants. A descriptor at or
// past FD_SETSIZE (1024) cannot be in an fd_set at all: add() refuses it,
// and the loop answers that connection 503.
class SelectPoller final : public Poller {
public:
    SelectPoller() {
        FD_ZERO(&rd_);
        FD_ZERO(&wr_);
    }
    bool add(int fd, bool write, bool) override {
        if (fd < 0 || fd >= FD_SETSIZE) return false;
        FD_SET(fd, write ? &wr_ : &rd_);
        max_ = std::max(max_, fd);
        return true;
    }
    void modify(int fd, bool write) override {
        FD_CLR(fd, write ? &rd_ : &wr_);
        FD_SET(fd, write ? &wr_ : &rd_);
    }
    void remove(int fd, bool) override {
        if (fd < 0 || fd >= FD_SETSIZE) return;
        FD_CLR(fd, &rd_);
        FD_CLR(fd, &wr_);
        while (max_ >= 0 && !FD_ISSET(max_, &rd_) && !FD_ISSET(max_, &wr_)) --max_;
    }
    int wait(int timeout_ms, std::vector<Ready> *out) override {
        out->clear();
        fd_set r = rd_, w = wr_;
        struct timeval tv {timeout_ms / 1000, static_cast<suseconds_t>(timeout_ms % 1000) * 1000};
        int n = select(max_ + 1, &r, &w, nullptr, &tv);
        if (n < 0) return errno == EINTR ? 0 : -1;
        for (int fd = 0, left = n; fd <= max_ && left > 0; ++fd) {
            uint32_t what = (FD_ISSET(fd, &r) ? kIn : 0) | (FD_ISSET(fd, &w) ? kOut : 0);
            if (!what) continue;
            out->push_back({fd, what});
            left -= (what & kIn ? 1 : 0) + (what & kOut ? 1 : 0);
        }
        return n;
    }

private:
    fd_set rd_, wr_;
    int max_ = -1;
};

} // namespace

std::unique_ptr<Poller> Poller::make(Events kind) {
    switch (kind) {
    case Events::Epoll: {
        auto p = std::make_unique<EpollPoller>();
        if (!p->ok()) return nullptr;
        return p;
    }
    case Events::Poll: return std::make_unique<PollPoller>();
    case Events::Select: return std::make_unique<SelectPoller>();
    }
    return nullptr;
}

} // namespace userver
