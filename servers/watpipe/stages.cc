// weft-watpipe's four stages and the queues between them. main.cc has the
// design; the comments here are about why each step is as it is.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>

#include "watpipe.hpp"

namespace watpipe {

using weft::srv::DeadlineList;
using weft::srv::EvConn;
using weft::srv::Next;
using weft::srv::now_ns;

namespace {

constexpr int kEvents = 512;          // events taken per epoll_wait: a stage's batch
constexpr int kAcceptBatch = 64;      // connections accepted before stage 2 gets them
constexpr uint64_t kMaxWaitNs = 1000000000ull;

// How long a stage may sleep: until the earliest deadline it keeps, at most
// a second, rounded up so that it never wakes just short of a deadline and
// spins with a 0 ms timeout.
int wait_ms(uint64_t now, const DeadlineList &a, const DeadlineList *b = nullptr) {
    uint64_t until = now + kMaxWaitNs;
    if (a.front()) until = std::min(until, a.front()->deadline());
    if (b && b->front()) until = std::min(until, b->front()->deadline());
    if (until <= now) return 0;
    return static_cast<int>((until - now + 999999) / 1000000);
}

// Every connection past its deadline at the front of `list`: expire() (a
// 408 for a slow head), then close.
void expire_due(Server *s, DeadlineList &list, uint64_t now) {
    while (EvConn *e = list.front()) {
        if (e->deadline() > now) break;
        list.remove(e);
        Conn *c = static_cast<Conn *>(e);
        c->expire(s->site);
        close_conn(s, c);
    }
}

// A DeadlineList stays sorted only if a connection is appended when its
// deadline moves (to now + the list's timeout, the latest). A connection
// whose deadline did not move (a head arriving in pieces keeps the deadline
// of its first byte) keeps its place: appending it would put an early
// deadline behind later ones, and a client trickling one byte at a time
// could then dodge --header-timeout for as long as others keep coming.
void refile(DeadlineList &to, DeadlineList *other, Conn *c, uint64_t deadline_before) {
    if (c->list == c->timer() && c->deadline() == deadline_before) return;
    to.remove(c);
    if (other) other->remove(c);
    to.push(c);
}

bool arm(int ep, bool *registered, Conn *c, uint32_t events) {
    struct epoll_event ev {};
    ev.events = events | EPOLLONESHOT;
    ev.data.ptr = c;
    if (epoll_ctl(ep, *registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd(), &ev) != 0) return false;
    *registered = true;
    return true;
}

void write_eventfd(int fd) {
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; // only EAGAIN (the counter is full: a wake-up is pending anyway)
}

} // namespace

void close_conn(Server *s, Conn *c) {
    delete c; // closes the socket, which also drops it from both epoll sets
    if (s->counters.open_conns.fetch_sub(1) == 1 && s->stopping.load()) write_eventfd(s->drained_fd);
}

// ---- Inbox ----

Inbox::Inbox() : efd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Inbox::~Inbox() {
    if (efd_ >= 0) close(efd_);
}

void Inbox::push(std::vector<Conn *> *batch) {
    bool was_empty;
    {
        std::lock_guard<std::mutex> lk(mu_);
        was_empty = q_.empty();
        q_.insert(q_.end(), batch->begin(), batch->end());
    }
    batch->clear();
    if (was_empty) wake();
}

void Inbox::take(std::vector<Conn *> *out) {
    uint64_t v;
    ssize_t n = read(efd_, &v, sizeof v); // first: a batch pushed after it wakes us again
    (void)n;
    std::lock_guard<std::mutex> lk(mu_);
    if (out->empty()) {
        out->swap(q_);
    } else {
        out->insert(out->end(), q_.begin(), q_.end());
        q_.clear();
    }
}

void Inbox::wake() { write_eventfd(efd_); }

// ---- stage 1: accept ----

namespace {

// The descriptor table is full: take one waiting connection with the spare
// descriptor, tell it we are busy (503) and close it, and take the spare
// back. Without this the listener stays readable and nothing can drain it.
void shed_one(Server *s, int *spare, uint64_t *last_warned) {
    if (*spare >= 0) {
        close(*spare);
        *spare = -1;
        int fd = accept4(s->listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) s->busy->refuse(fd, &s->counters);
    }
    // Another stage may have taken the freed slot (a file the cache opens):
    // then the spare comes back on a later try.
    *spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uint64_t now = now_ns();
    if (*last_warned == 0 || now - *last_warned > 1000000000ull) {
        std::fprintf(stderr, "%s: descriptor table full (EMFILE): refusing new connections with 503\n", kProg);
        *last_warned = now;
    }
}

} // namespace

void stage1_accept(Server *s) {
    int spare = open("/dev/null", O_RDONLY | O_CLOEXEC); // held so that a full table can still shed load
    uint64_t last_warned = 0;
    std::vector<Conn *> batch;
    batch.reserve(kAcceptBatch);
    struct pollfd pf[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_accept_fd, POLLIN, 0}};
    bool back_off = false;
    while (!s->stopping.load()) {
        if (back_off) {
            // Out of descriptors or memory: let the connections being served
            // finish and free theirs, rather than spin on a readable listener.
            // Waiting on the stop eventfd keeps shutdown prompt.
            back_off = false;
            poll(&pf[1], 1, 10);
            continue;
        }
        if (poll(pf, 2, -1) < 0) {
            back_off = errno != EINTR;
            continue;
        }
        for (int i = 0; i < kAcceptBatch; ++i) {
            int fd = accept4(s->listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                if (errno == EINTR) continue;
                s->counters.accept_errors.fetch_add(1, std::memory_order_relaxed);
                if (errno == EMFILE || errno == ENFILE) {
                    shed_one(s, &spare, &last_warned);
                    back_off = true;
                    break;
                }
                if (errno == ENOBUFS || errno == ENOMEM) {
                    back_off = true;
                    break;
                }
                continue; // ECONNABORTED, EPROTO, ...: that client gave up
            }
            s->counters.accepted.fetch_add(1, std::memory_order_relaxed);
            // Only stage 1 adds to open_conns, so the check is exact.
            if (s->counters.open_conns.load() >= s->opt.max_conns) {
                s->busy->refuse(fd, &s->counters);
                continue;
            }
            weft::srv::prepare_socket(fd, false, 0);
            Conn *c = new (std::nothrow) Conn(fd, s->site, now_ns());
            if (!c) {
                s->busy->refuse(fd, &s->counters);
                continue;
            }
            s->counters.open_conns.fetch_add(1);
            batch.push_back(c);
        }
        if (!batch.empty()) s->to_reader.push(&batch);
    }
    close(s->listen_fd); // no new connections from here on; the backlog is reset
    if (spare >= 0) close(spare);
}

// ---- stage 2: read requests ----

void stage2_read(Server *s) {
    const weft::srv::EvSite &site = s->site;
    DeadlineList heads(EvConn::kHeader), idle(EvConn::kKeepAlive);
    std::vector<Conn *> incoming, replies;
    struct epoll_event evs[kEvents];
    bool swept = false; // shutdown: what waits for input has been closed

    auto unlist = [&](Conn *c) {
        heads.remove(c);
        idle.remove(c);
    };
    // c waits for (more of) a request: arm EPOLLIN, file it by its deadline.
    auto wait_input = [&](Conn *c, uint64_t deadline_before) {
        if ((swept && c->idle()) || !arm(s->read_ep, &c->in_read_set, c, EPOLLIN)) {
            unlist(c);
            close_conn(s, c);
            return;
        }
        if (c->timer() == EvConn::kKeepAlive)
            refile(idle, &heads, c, deadline_before);
        else
            refile(heads, &idle, c, deadline_before);
    };

    for (;;) {
        uint64_t now = now_ns();
        if (s->quit.load()) break;
        if (s->stopping.load() && !swept) {
            // As weft-knot's SHUT_RD: a connection waiting for a request (or
            // in the middle of one) ends now; replies in flight are stage
            // 3's and 4's, and come back here only to be closed.
            swept = true;
            for (DeadlineList *l : {&heads, &idle}) {
                for (EvConn *e = l->front(); e;) {
                    EvConn *next = e->next;
                    if (e->idle()) {
                        l->remove(e);
                        close_conn(s, static_cast<Conn *>(e));
                    }
                    e = next;
                }
            }
        }
        expire_due(s, heads, now);
        expire_due(s, idle, now);

        int n = epoll_wait(s->read_ep, evs, kEvents, wait_ms(now, heads, &idle));
        now = now_ns();
        for (int i = 0; i < n; ++i) {
            Conn *c = static_cast<Conn *>(evs[i].data.ptr);
            if (!c) { // the inbox: new connections (stage 1) and finished replies (stage 3)
                s->to_reader.take(&incoming);
                continue;
            }
            // EPOLLONESHOT has disarmed c: nothing else reports it until re-armed.
            uint64_t before = c->deadline();
            switch (c->receive(site, now)) {
            case Next::Read: wait_input(c, before); break;
            case Next::Reply:
            case Next::Write:
                unlist(c); // stage 3's now; it may be closed there at any time
                replies.push_back(c);
                break;
            case Next::Close:
                unlist(c);
                close_conn(s, c);
                break;
            }
        }
        // Both kinds wait for a request: a fresh one has its head deadline,
        // a kept-alive one its keep-alive deadline (set when its reply ended).
        for (Conn *c : incoming) wait_input(c, 0);
        incoming.clear();
        if (!replies.empty()) s->to_writer.push(&replies); // the whole batch under one lock
    }
}

// ---- stage 3: find writable connections; stage 4 writes them ----

void stage3_write(Server *s) {
    DeadlineList sending(EvConn::kSend);
    std::vector<Conn *> batch, done;
    std::vector<uint64_t> before;
    std::vector<Next> results;
    struct epoll_event evs[kEvents];

    for (;;) {
        uint64_t now = now_ns();
        expire_due(s, sending, now);
        if (s->quit.load()) break;

        int n = epoll_wait(s->write_ep, evs, kEvents, wait_ms(now, sending));
        batch.clear();
        for (int i = 0; i < n; ++i) {
            Conn *c = static_cast<Conn *>(evs[i].data.ptr);
            // From stage 2, replies just built: tried at once, without a trip
            // through epoll (a socket that has just sent us a request almost
            // always has room), and registered for EPOLLOUT only if the
            // reply does not fit.
            if (!c) s->to_writer.take(&batch);
            else batch.push_back(c); // writable; stays in `sending` (stage 4 does not touch the links)
        }
        if (batch.empty()) continue;

        before.resize(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) before[i] = batch[i]->deadline();
        s->writers.run(batch, &results); // stage 4; stage 3 waits, as in the paper

        for (size_t i = 0; i < batch.size(); ++i) {
            Conn *c = batch[i];
            switch (results[i]) {
            case Next::Write: // the socket is full: back to waiting for EPOLLOUT
                if (arm(s->write_ep, &c->in_write_set, c, EPOLLOUT)) {
                    refile(sending, nullptr, c, before[i]);
                    break;
                }
                sending.remove(c);
                close_conn(s, c);
                break;
            case Next::Read: // reply done: stage 2 waits for the next request
                sending.remove(c);
                done.push_back(c);
                break;
            case Next::Reply: // not returned by stage 4 (it sends pipelined replies itself)
            case Next::Close:
                sending.remove(c);
                close_conn(s, c);
                break;
            }
        }
        if (!done.empty()) s->to_reader.push(&done);
    }
}

// ---- stage 4: the writers ----

bool Writers::start(Server *s, int n) {
    s_ = s;
    nthreads_ = static_cast<size_t>(n);
    try {
        for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "%s: cannot start writer thread %zu: %s\n", kProg, threads_.size(), e.what());
        stop();
        return false;
    }
    return true;
}

void Writers::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        quit_ = true;
    }
    work_cv_.notify_all();
    for (auto &t : threads_) t.join();
    threads_.clear();
}

void Writers::run(const std::vector<Conn *> &batch, std::vector<Next> *results) {
    results->assign(batch.size(), Next::Close);
    std::unique_lock<std::mutex> lk(mu_);
    items_ = batch.data();
    results_ = results->data();
    count_ = batch.size();
    next_ = finished_ = 0;
    // Wake as many writers as there is work for, not all of them for one
    // connection.
    size_t wake = std::min(count_, nthreads_);
    if (wake == nthreads_) {
        work_cv_.notify_all();
    } else {
        for (size_t i = 0; i < wake; ++i) work_cv_.notify_one();
    }
    done_cv_.wait(lk, [this] { return finished_ == count_; });
    items_ = nullptr;
    results_ = nullptr;
    count_ = next_ = finished_ = 0;
}

void Writers::loop() {
    const weft::srv::EvSite &site = s_->site;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        work_cv_.wait(lk, [this] { return quit_ || next_ < count_; });
        if (next_ >= count_) return; // quit_
        // A big batch goes in a few chunks per writer (few trips through the
        // lock); its tail one at a time, so that a writer held up by a disk
        // read (sendfile of a file not in the page cache) does not hold
        // back connections the others could serve.
        const size_t take = std::max<size_t>(1, (count_ - next_) / (2 * nthreads_));
        const size_t first = next_;
        next_ += take;
        Conn *const *items = items_;
        Next *results = results_;
        lk.unlock();
        for (size_t i = first; i < first + take; ++i) {
            Conn *c = items[i];
            uint64_t now = now_ns();
            Next r = c->send(site, now);
            while (r == Next::Reply) r = c->send(site, now); // pipelined requests answered in turn
            results[i] = r; // a slot of its own; run() reads it after finished_ says so, under mu_
        }
        lk.lock();
        finished_ += take;
        if (finished_ == count_) done_cv_.notify_one();
    }
}

} // namespace watpipe
