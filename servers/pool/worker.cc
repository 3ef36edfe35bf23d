// weft-pool's workers and the queue that feeds them. main.cc has the
// design; the comments here are about why each step is as it is.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>
#include <new>

#include "pool.hpp"

namespace pool {

using weft::srv::EvConn;
using weft::srv::Next;
using weft::srv::now_ns;

// ---- ConnQueue ----

void ConnQueue::push(int fd) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        q_.push_back(fd);
    }
    work_cv_.notify_one();
}

int ConnQueue::pop(size_t w) {
    std::unique_lock<std::mutex> lk(mu_);
    work_cv_.wait(lk, [this] { return quit_ || !q_.empty(); });
    if (q_.empty()) return -1; // quit_
    int fd = q_.front();
    q_.pop_front();
    serving_[w] = fd;
    if (shutting_) shutdown(fd, SHUT_RD); // queued when shutdown began: answer what came, then end
    return fd;
}

void ConnQueue::release(size_t w) {
    std::lock_guard<std::mutex> lk(mu_);
    serving_[w] = -1;
}

void ConnQueue::shut_read_all() {
    std::lock_guard<std::mutex> lk(mu_);
    shutting_ = true;
    for (int fd : serving_)
        if (fd >= 0) shutdown(fd, SHUT_RD);
}

void ConnQueue::quit() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        quit_ = true;
    }
    work_cv_.notify_all();
}

void ConnQueue::closed(weft::srv::ServerCounters *c) {
    if (c->open_conns.fetch_sub(1) != 1) return;
    // The last one. Taking the lock orders this with wait_drained()'s look
    // at the count, so the wake-up cannot fall between its check and its wait.
    std::lock_guard<std::mutex> lk(mu_);
    drained_cv_.notify_all();
}

void ConnQueue::wait_drained(const weft::srv::ServerCounters &c) {
    std::unique_lock<std::mutex> lk(mu_);
    drained_cv_.wait(lk, [&c] { return c.open_conns.load() == 0; });
}

// ---- a worker ----

namespace {

// Wait until fd has something to read (a request, EOF, an error: receive()
// tells which) or `deadline` passes: false then. poll rather than
// SO_RCVTIMEO: the deadline of a head is fixed at its first byte, however
// it trickles in, so each wait gets what is left of it; and poll is one
// call, with no setsockopt before every recv.
bool wait_readable(int fd, uint64_t deadline) {
    for (;;) {
        const uint64_t now = now_ns();
        if (now >= deadline) return false;
        // Rounded up: waking just short of the deadline would spin.
        const uint64_t ms = (deadline - now + 999999) / 1000000;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, static_cast<int>(std::min<uint64_t>(ms, INT_MAX)));
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) return false; // cannot wait (ENOMEM): give the connection up
    }
}

// One connection to its end, on this worker: EvConn in blocking mode (as
// the µserver's userver-b) does the HTTP, this loop does the waiting. The
// only calls that block are poll (for a request, bounded by the header or
// keep-alive deadline) and the sends of a reply (sendmsg, sendfile on the
// blocking socket, bounded by SO_SNDTIMEO: see prepare_socket).
void serve(Server *s, size_t w, int fd) {
    const weft::srv::EvSite &site = s->site;
    weft::srv::prepare_socket(fd, true, site.send_timeout_ns);
    // The head deadline runs from here, not from the accept: time spent in
    // the queue waiting for a worker is the server's, not the client's.
    std::unique_ptr<EvConn> c(new (std::nothrow) EvConn(fd, site, now_ns()));
    if (!c) {
        s->queue.release(w);
        s->busy->refuse(fd, &s->counters);
        s->queue.closed(&s->counters);
        return;
    }
    Next n = Next::Read;
    while (n != Next::Close) {
        switch (n) {
        case Next::Read:
            if (!wait_readable(fd, c->deadline())) {
                n = c->expire(site); // a 408 for a slow head; an idle connection just ends
                break;
            }
            n = c->receive(site, now_ns()); // one recv: poll said it will not block
            break;
        case Next::Reply: // a reply is ready (or a pipelined one after it)
        case Next::Write: // not returned on a blocking socket; send() is right for it anyway
            n = c->send(site, now_ns());
            break;
        case Next::Close: break;
        }
    }
    s->queue.release(w);
    c.reset(); // closes the socket
    s->queue.closed(&s->counters);
}

} // namespace

void worker_loop(Server *s, size_t w) {
    for (;;) {
        int fd = s->queue.pop(w);
        if (fd < 0) return;
        serve(s, w, fd);
    }
}

} // namespace pool
