// One SPED event loop: accept, read, parse, reply, time out, all on one
// kernel thread through one Poller. The HTTP work is EvConn's; the loop
// only says when each connection may make progress.
#include <fcntl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>

#include "userver.hpp"

namespace userver {

using weft::srv::EvConn;
using weft::srv::Next;
using weft::srv::now_ns;

namespace {

constexpr uint64_t kMs = 1000000ull;
constexpr uint64_t kSec = 1000000000ull;
constexpr uint64_t kShedPause = 10 * kMs; // no accepts for this long after the table filled

// One warning a second for the whole process, whatever the loop.
std::atomic<uint64_t> last_warned{0};

} // namespace

Loop::Loop(const LoopConfig &cfg) : cfg_(cfg), counters_(*cfg.site.counters) { cfg_.site.stopping = cfg_.stopping; }

Loop::~Loop() {
    for (auto &l : lists_)
        while (EvConn *c = l.front()) close_conn(c);
    if (spare_ >= 0) close(spare_);
}

bool Loop::init() {
    poller_ = Poller::make(cfg_.events);
    if (!poller_) {
        std::fprintf(stderr, "%s: cannot create an %s set: %s\n", kProg, events_name(cfg_.events), std::strerror(errno));
        return false;
    }
    if (!poller_->add(cfg_.stop_fd, false) || !poller_->add(cfg_.listen_fd, false, cfg_.listen_shared)) {
        std::fprintf(stderr, "%s: cannot watch the listening socket with %s: %s\n", kProg, events_name(cfg_.events),
                     errno ? std::strerror(errno) : "descriptor too large");
        return false;
    }
    listening_ = true;
    spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    slots_.resize(1024);
    return true;
}

int Loop::run() {
    for (;;) {
        if (stopping_ && open_ == 0) return 0;
        now_ = now_ns();
        if (paused_ && now_ >= resume_ns_) {
            paused_ = false;
            poller_->add(cfg_.listen_fd, false, cfg_.listen_shared);
        }
        if (poller_->wait(timeout_ms(), &ready_) < 0) {
            std::fprintf(stderr, "%s: %s: %s\n", kProg, events_name(cfg_.events), std::strerror(errno));
            return 1;
        }
        // Connections first, the listener last: a descriptor closed in this
        // batch is not reused by an accept until the batch is done, so no
        // event of the batch can reach the wrong connection.
        bool accept = false, stop = false;
        for (const Ready &r : ready_) {
            if (r.fd == cfg_.stop_fd) stop = true;
            else if (r.fd == cfg_.listen_fd && listening_) accept = true;
            else on_conn(r.fd);
        }
        if (stop) on_stop();
        if (accept && listening_ && !paused_) accept_ready();
        expire_due();
    }
}

void Loop::on_conn(int fd) {
    if (static_cast<size_t>(fd) >= slots_.size() || !slots_[fd].c) return;
    EvConn *c = slots_[fd].c;
    const uint8_t old_list = c->list;
    const uint64_t old_deadline = c->deadline();
    now_ = now_ns(); // a blocking send (userver-b) may have taken a while
    // Writing: the socket is writable, or in error (send() finds out).
    Next n = c->writing() ? Next::Reply : c->receive(cfg_.site, now_);
    while (n == Next::Reply) n = c->send(cfg_.site, now_);
    settle(c, n, old_list, old_deadline);
}

// After an event: what to wait for, and in which deadline list.
void Loop::settle(EvConn *c, Next n, uint8_t old_list, uint64_t old_deadline) {
    // Stopping, a connection with no reply to finish is done (its reply,
    // built before the signal, may have said keep-alive).
    if (n == Next::Close || (stopping_ && n == Next::Read)) {
        close_conn(c);
        return;
    }
    Slot &s = slots_[c->fd()];
    const bool out = n == Next::Write;
    if (out != s.out) {
        poller_->modify(c->fd(), out);
        s.out = out;
    }
    // Every deadline of one list is "now + that list's timeout", so a
    // connection whose deadline moved goes to the back and the lists stay
    // sorted. One whose deadline did not move (more of a slow head) stays
    // where it is: the head's deadline runs from its first byte.
    if (c->timer() != old_list || c->deadline() != old_deadline) {
        if (old_list) list(old_list).remove(c);
        list(c->timer()).push(c);
    }
}

void Loop::close_conn(EvConn *c) {
    const int fd = c->fd();
    if (c->list) list(c->list).remove(c);
    poller_->remove(fd, true);
    slots_[fd] = Slot{};
    delete c; // closes fd
    cfg_.open_here->store(--open_, std::memory_order_relaxed);
    counters_.open_conns.fetch_sub(1, std::memory_order_relaxed);
}

void Loop::accept_ready() {
    const bool blocking = cfg_.site.blocking;
    now_ = now_ns();
    while (listening_ && !paused_) {
        int fd = accept4(cfg_.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            switch (errno) {
            case EAGAIN: return;
            case EINTR: continue;
            case EMFILE:
            case ENFILE:
                counters_.accept_errors.fetch_add(1, std::memory_order_relaxed);
                shed(errno);
                return;
            case ENOBUFS:
            case ENOMEM:
                counters_.accept_errors.fetch_add(1, std::memory_order_relaxed);
                pause_accepting(kShedPause);
                return;
            case EBADF:
            case EINVAL:
            case ENOTSOCK:
                // Shut down under us (main does that at shutdown): stop watching it.
                poller_->remove(cfg_.listen_fd, false);
                listening_ = false;
                return;
            default: // ECONNABORTED, EPROTO, EPERM: that client is gone; next
                counters_.accept_errors.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
        }
        counters_.accepted.fetch_add(1, std::memory_order_relaxed);
        // Take a place in the server's total first: two loops accepting at
        // once cannot both take the last one.
        if (counters_.open_conns.fetch_add(1, std::memory_order_relaxed) >= cfg_.max_conns) {
            refuse(fd);
            continue;
        }
        if (static_cast<size_t>(fd) >= slots_.size()) slots_.resize(std::max<size_t>(fd + 1, slots_.size() * 2));
        if (!poller_->add(fd, false)) { // select: past FD_SETSIZE
            refuse(fd);
            continue;
        }
        if (blocking) weft::srv::prepare_socket(fd, true, cfg_.site.send_timeout_ns);
        // (Non-blocking: accept4 made it so, and TCP_NODELAY is inherited
        // from the listening socket; nothing more to set.)
        EvConn *c = new (std::nothrow) EvConn(fd, cfg_.site, now_);
        if (!c) {
            poller_->remove(fd, true);
            refuse(fd);
            continue;
        }
        slots_[fd] = Slot{c, false};
        cfg_.open_here->store(++open_, std::memory_order_relaxed);
        list(c->timer()).push(c);
    }
}

// 503 and close, giving back the place taken in the server's total.
void Loop::refuse(int fd) {
    counters_.open_conns.fetch_sub(1, std::memory_order_relaxed);
    cfg_.busy->refuse(fd, &counters_);
}

// The descriptor table is full: accept one connection with the spare
// descriptor and tell it we are busy, then stop accepting briefly so that
// the connections being served can finish and free theirs. Without this
// the listener would stay readable and the loop would spin on EMFILE.
void Loop::shed(int err) {
    if (spare_ >= 0) {
        close(spare_);
        spare_ = -1;
        int fd = accept4(cfg_.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) cfg_.busy->refuse(fd, &counters_);
    }
    spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC); // if it fails, the next shed tries again
    uint64_t last = last_warned.load(std::memory_order_relaxed);
    if (now_ - last > kSec && last_warned.compare_exchange_strong(last, now_))
        std::fprintf(stderr, "%s: descriptor table full (%s): refusing new connections with 503\n", kProg,
                     err == ENFILE ? "ENFILE" : "EMFILE");
    pause_accepting(kShedPause);
}

void Loop::pause_accepting(uint64_t ns) {
    if (!paused_) poller_->remove(cfg_.listen_fd, false);
    paused_ = true;
    resume_ns_ = now_ + ns;
}

void Loop::on_stop() {
    if (!cfg_.stop_is_signalfd) { // the shared eventfd stays readable: stop watching it
        poller_->remove(cfg_.stop_fd, false);
        begin_stop();
        return;
    }
    struct signalfd_siginfo si;
    while (read(cfg_.stop_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (stopping_) continue; // a second signal changes nothing
        if (cfg_.announce) {
            std::printf("%s: %s: shutting down (%ld connections open)\n", kProg,
                        strsignal(static_cast<int>(si.ssi_signo)), counters_.open_conns.load());
            std::fflush(stdout);
        }
        begin_stop();
    }
}

// No new connections; the ones waiting for (or in the middle of) a request
// are closed, as Knot's SHUT_RD ends them; replies in flight are finished,
// and close their connection after (site.stopping turns keep-alive off).
void Loop::begin_stop() {
    if (stopping_) return;
    stopping_ = true;
    cfg_.stopping->store(true, std::memory_order_relaxed);
    if (listening_) {
        if (!paused_) poller_->remove(cfg_.listen_fd, false);
        if (cfg_.own_listener) close(cfg_.listen_fd);
        listening_ = paused_ = false;
    }
    for (auto &l : lists_) {
        for (EvConn *c = l.front(); c;) {
            EvConn *next = c->next;
            if (!c->writing()) close_conn(c);
            c = next;
        }
    }
}

void Loop::expire_due() {
    now_ = now_ns();
    for (auto &l : lists_) {
        while (EvConn *c = l.front()) {
            if (c->deadline() > now_) break;
            c->expire(cfg_.site);
            close_conn(c);
        }
    }
}

// Until the earliest deadline (or the end of an accept pause), at most a
// second; rounded up so that the loop does not wake just before it.
int Loop::timeout_ms() const {
    uint64_t next = now_ + kSec;
    for (const auto &l : lists_)
        if (const EvConn *c = l.front()) next = std::min(next, c->deadline());
    if (paused_) next = std::min(next, resume_ns_);
    if (next <= now_) return 0;
    return static_cast<int>((next - now_ + kMs - 1) / kMs);
}

} // namespace userver
