#include "weft_accept.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "weft/weft.h"

namespace weft::srv {
namespace {
int spare_fd = -1;
weft_mutex_t spare_mu = WEFT_MUTEX_INITIALIZER;

// Under spare_mu. Linux's accept allocates the descriptor before it looks
// at the queue, so EMFILE says nothing about a client waiting: the spare is
// given up only when poll says one is there.
int shed_one(const AcceptSite &site, int lfd) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (spare_fd < 0) spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); // lost earlier: take it back when free
    if (spare_fd >= 0 && poll(&p, 1, 0) == 1) {
        weft_close(spare_fd);
        spare_fd = -1;
        int fd = weft_accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) refuse(site, fd);
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    static std::atomic<uint64_t> last_warned{0};
    uint64_t now = weft_now_ns(), last = last_warned.load(std::memory_order_relaxed);
    if (now - last > 1000000000ull && last_warned.compare_exchange_strong(last, now))
        std::fprintf(stderr, "%s: descriptor table full (EMFILE): refusing new connections with 503\n", site.prog);
    return -1;
}
} // namespace

void accept_reserve_spare() {
    if (spare_fd < 0) spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void accept_release_spare() {
    if (spare_fd >= 0) weft_close(spare_fd);
    spare_fd = -1;
}

void refuse(const AcceptSite &site, int fd) {
    if (site.busy_len) weft_send(fd, site.busy, site.busy_len, MSG_DONTWAIT);
    weft_close(fd);
    site.counters->rejected_busy.fetch_add(1, std::memory_order_relaxed);
}

int accept_one(const AcceptSite &site, int lfd, struct sockaddr_storage *peer) {
    for (;;) {
        // Every accept of the process takes spare_mu: so no other accept
        // takes the descriptor the spare frees for a refusal (two accept
        // loops did: the spare was lost, and clients waited unanswered
        // until a connection closed). The socket is O_NONBLOCK: nobody
        // waits under the lock; the wait for a client is the poll below.
        weft_mutex_lock(&spare_mu);
        socklen_t len = sizeof *peer;
        int fd = weft_accept4(lfd, reinterpret_cast<sockaddr *>(peer), &len, SOCK_CLOEXEC);
        int err = errno;
        if (fd < 0 && (err == EMFILE || err == ENFILE)) shed_one(site, lfd);
        weft_mutex_unlock(&spare_mu);
        if (site.stopping->load(std::memory_order_relaxed)) {
            if (fd >= 0) weft_close(fd);
            return -1;
        }
        if (fd >= 0) {
            site.counters->accepted.fetch_add(1, std::memory_order_relaxed);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return fd;
        }
        if (err == EAGAIN || err == EWOULDBLOCK) { // nobody yet: wait, parking only this thread
            struct pollfd p = {lfd, POLLIN, 0};
            if (weft_poll(&p, 1, -1) < 0 || (p.revents & POLLNVAL)) return -1; // the socket is gone
            continue;
        }
        site.counters->accept_errors.fetch_add(1, std::memory_order_relaxed);
        switch (err) {
        case EMFILE:
        case ENFILE: // shed_one answered a waiting client, if any; let the served ones free theirs
        case ENOBUFS:
        case ENOMEM:
            weft_sleep_ns(10 * 1000 * 1000);
            break;
        case EBADF:
        case EINVAL:
        case ENOTSOCK:
            return -1; // the socket is gone
        default: // ECONNABORTED, EPROTO, ...: that client gave up; go on
            break;
        }
    }
}

std::string runtime_stats_json() {
    weft_stats_t w;
    weft_stats_get(-1, &w);
    auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    char runtime[768];
    int n = snprintf(runtime, sizeof runtime,
                     ", \"vprocs\": %d,\n"
                     " \"runtime\": {\"io_backend\": \"%s\", \"switches\": %llu, \"threads_live\": %llu,"
                     " \"threads_created\": %llu, \"io_syscalls\": %llu, \"io_parks\": %llu, \"io_waits\": %llu,"
                     " \"io_completions\": %llu, \"sendfile_bytes\": %llu, \"offloaded\": %llu,"
                     " \"stacks_mapped\": %llu, \"stack_links\": %llu, \"stack_spare_hits\": %llu,"
                     " \"stack_chunks\": %llu, \"admissions_shed\": %llu}",
                     weft_vproc_count(), weft_io_backend(), u(w.switches), u(w.threads_live), u(w.threads_created),
                     u(w.io_syscalls), u(w.io_parks), u(w.io_waits), u(w.io_completions), u(w.sendfile_bytes),
                     u(w.offloaded), u(w.stacks_mapped), u(w.stack_links), u(w.stack_spare_hits), u(w.stack_chunks),
                     u(w.admissions_shed));
    return std::string(runtime, static_cast<size_t>(n < 0 ? 0 : n >= 768 ? 767 : n));
}

} // namespace weft::srv
