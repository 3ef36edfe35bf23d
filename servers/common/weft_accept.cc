#include "weft_accept.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <signal.h>
#include <sys/signalfd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli.hpp"
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

namespace {
// The calendars under WEFT_POLICY=tap: ", \"tap\": {...}". Per calendar
// (cpu, disk, net): appointments begun by the thread's level, and calls
// waiting now by level, levels 0 (most urgent) up.
std::string tap_stats_json(const weft_tap_stats_t &t) {
    auto u = [](uint64_t v) { return std::to_string(static_cast<unsigned long long>(v)); };
    const char *names[WEFT_TAP_CALENDARS] = {"cpu", "disk", "net"};
    const int levels = t.levels < 1 ? 1 : t.levels > WEFT_TAP_MAX_LEVELS ? WEFT_TAP_MAX_LEVELS : t.levels;
    auto by_level = [&](const uint64_t(*rows)[WEFT_TAP_MAX_LEVELS]) {
        std::string s = "{";
        for (int c = 0; c < WEFT_TAP_CALENDARS; ++c) {
            s += std::string(c ? ", \"" : "\"") + names[c] + "\": [";
            for (int l = 0; l < levels; ++l) s += (l ? ", " : "") + u(rows[c][l]);
            s += "]";
        }
        return s + "}";
    };
    std::string s = ",\n \"tap\": {\"levels\": " + std::to_string(levels) + ", \"ratio\": [" +
                    std::to_string(t.ratio[0]) + ", " + std::to_string(t.ratio[1]) + ", " + std::to_string(t.ratio[2]) +
                    "], \"clocks\": " + u(t.clocks) + ", \"appointments\": [" + u(t.appointments[0]) + ", " +
                    u(t.appointments[1]) + ", " + u(t.appointments[2]) + "], \"disk_batches\": " + u(t.disk_batches) +
                    ", \"disk_batched\": " + u(t.disk_batched) + ", \"net_waits\": " + u(t.net_waits) +
                    ", \"dropped\": " + u(t.dropped) + ", \"throttled\": " + u(t.throttled) +
                    ", \"lock_appointments\": " + u(t.lock_appointments) +
                    ",\n  \"appointments_by_level\": " + by_level(t.by_level) +
                    ",\n  \"queued_by_level\": " + by_level(t.queued) + "}";
    return s;
}
} // namespace

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
                     " \"stack_chunks\": %llu, \"admissions_shed\": %llu, \"door_refused\": %llu}",
                     weft_vproc_count(), weft_io_backend(), u(w.switches), u(w.threads_live), u(w.threads_created),
                     u(w.io_syscalls), u(w.io_parks), u(w.io_waits), u(w.io_completions), u(w.sendfile_bytes),
                     u(w.offloaded), u(w.stacks_mapped), u(w.stack_links), u(w.stack_spare_hits), u(w.stack_chunks),
                     u(w.admissions_shed), u(w.door_refused));
    std::string out(runtime, static_cast<size_t>(n < 0 ? 0 : n >= 768 ? 767 : n));
    weft_tap_stats_t t;
    if (weft_tap_stats(-1, &t) == 0) out += tap_stats_json(t);
    return out;
}

int listen_sockets(const char *prog, std::string *listen, int vprocs, bool reuseport, int *fds, int max) {
    socklen_t len = 0;
    struct sockaddr_storage addr = resolve(prog, *listen, &len);
    int count = 0;
    if (vprocs == 0) vprocs = weft_default_vprocs(); // what weft_main will start
    const int want = vprocs > 1 && reuseport ? std::min(vprocs, max) : 1;
    for (int i = 0; i < want; ++i) {
        int fd = listen_on(prog, &addr, len, want > 1, *listen, SOCK_NONBLOCK); // later ones bind the first's port
        if (fd == -2) break; // no SO_REUSEPORT here: one shared socket
        fds[count++] = fd;
    }
    if (count == 0) fds[count++] = listen_on(prog, &addr, len, false, *listen, SOCK_NONBLOCK);
    *listen = address_text(addr);
    return count;
}

int stop_signal_fd() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_CLOEXEC);
}

void wait_stop_signal(const char *prog, int signal_fd, bool quiet, const std::atomic<long> &open_conns) {
    struct signalfd_siginfo si;
    while (weft_read(signal_fd, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) {
        if (errno != EAGAIN && errno != EINTR) break;
    }
    if (!quiet)
        std::printf("%s: %s: shutting down (%ld connections open)\n", prog, strsignal(static_cast<int>(si.ssi_signo)),
                    open_conns.load());
    std::fflush(stdout);
}

void init_accept_site(AcceptSite *site, const char *prog, ServerCounters *counters,
                      const std::atomic<bool> *stopping, const http::Responder &responder, std::string *busy) {
    http::Reply r;
    responder.error(503, &r);
    busy->assign(r.head, r.head_len);
    busy->append(r.mem, r.length);
    site->prog = prog;
    site->counters = counters;
    site->stopping = stopping;
    site->busy = busy->data();
    site->busy_len = busy->size();
}

std::vector<weft_thread_t> start_accept_loops(const char *prog, int n, const int *fds, int nfds,
                                              void *(*fn)(void *), const char *name) {
    std::vector<weft_thread_t> loops;
    const int vprocs = weft_vproc_count();
    for (int i = 0; i < n; ++i) {
        weft_thread_attr_t attr;
        weft_thread_attr_init(&attr);
        attr.home_vproc = i % vprocs;
        attr.name = name;
        weft_thread_t t;
        int rc = weft_thread_create(&t, &attr, fn, reinterpret_cast<void *>(static_cast<intptr_t>(fds[i % nfds])));
        if (rc != 0) {
            std::fprintf(stderr, "%s: cannot create thread %d: %s\n", prog, i, std::strerror(rc));
            break;
        }
        loops.push_back(t);
    }
    return loops;
}

} // namespace weft::srv
