// weft-knot: options, start-up, the accept loops, and graceful shutdown.
// See knot.hpp for the modes and docs/knot.md for the whole server.
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "access_log.hpp"
#include "common/cli.hpp"
#include "common/weft_accept.hpp"
#include "knot.hpp"

namespace knot {

const char *mode_name(Mode m) {
    switch (m) {
    case Mode::C: return "c";
    case Mode::NB: return "nb";
    case Mode::B: return "b";
    case Mode::Uring: return "uring";
    }
    return "?";
}

namespace {

void usage(FILE *out) {
    std::fputs(
        "usage: weft-knot [options]\n"
        "Knot, Capriccio's thread-per-connection web server, on weft: serves the\n"
        "static files below --root over HTTP/1.1 until SIGINT or SIGTERM.\n"
        "\n"
        "  --listen ADDR:PORT       address to serve on (default 127.0.0.1:8080; port 0 picks\n"
        "                           a free one; [::1]:8080 for IPv6)\n"
        "  --root DIR               document root (default: the current directory)\n"
        "  --mode c|nb|b|uring      how bodies are sent (default nb):\n"
        "                             c      application content cache + writev (knot-c)\n"
        "                             nb     non-blocking sendfile (knot-nb)\n"
        "                             b      blocking sendfile in offload workers (knot-b)\n"
        "                             uring  io_uring splice\n"
        "  --threads N              N threads looping on accept (as in the study); 0 = a new\n"
        "                           thread per accepted connection (default 0)\n"
        "  --vprocs N               kernel threads running weft threads, one accept loop (and\n"
        "                           SO_REUSEPORT socket) each (default: the usable CPUs,\n"
        "                           or WEFT_VPROCS)\n"
        "  --workers N              offload pool threads (default: the runtime's, 4)\n"
        "  --cache-mb M             knot-c content cache in MiB (default 64)\n"
        "  --fd-cache N             open files kept with their headers (default 4096)\n"
        "  --max-conns N            connections served at once; more get 503 (default 10000)\n"
        "  --max-requests N         requests per connection before it closes (default 1000)\n"
        "  --keepalive-timeout S    idle seconds between requests before closing (default 15)\n"
        "  --header-timeout S       seconds to send a whole request head, else 408 (default 10)\n"
        "  --send-timeout S         seconds a send may make no progress (default 60)\n"
        "  --access-log FILE        append one combined-format line per response\n"
        "  --stats                  serve runtime and server counters as JSON at /.weft/stats, and\n"
        "                           with WEFT_GRAPH=1 the blocking graph at /.weft/graph.{json,dot,svg}\n"
        "  --follow-symlinks        serve symlinks that lead outside the root (default: 403)\n"
        "  --no-reuseport           with several vprocs, share one listening socket\n"
        "  --door accept|kernel     where connections are refused under overload (WEFT_POLICY=\n"
        "                           resource): accept = accepted and reset (default); kernel =\n"
        "                           the SYN refused by the kernel (weft_door_listen: needs root,\n"
        "                           Linux 5.9; falls back to accept with a warning)\n"
        "  --quiet                  no start-up and shutdown lines on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Exit status: 0 after a graceful shutdown, 1 when it cannot start (bind, root),\n"
        "2 for a usage error. Environment: WEFT_IO (uring|epoll|poll) picks the reactor.\n",
        out);
}

constexpr const char *kProg = "weft-knot";

[[noreturn]] void usage_error(const char *fmt, const char *arg) { weft::srv::usage_error(kProg, fmt, arg); }
long parse_long(const char *opt, const char *s, long lo, long hi) { return weft::srv::parse_long(kProg, opt, s, lo, hi); }

Options parse_options(int argc, char **argv) {
    enum { kMode = weft::srv::kOwnOption, kThreads, kVprocs, kWorkers, kCacheMb, kAccessLog, kNoReuseport, kDoor };
    static const struct option own[] = {
        {"mode", required_argument, nullptr, kMode},
        {"threads", required_argument, nullptr, kThreads},
        {"vprocs", required_argument, nullptr, kVprocs},
        {"workers", required_argument, nullptr, kWorkers},
        {"cache-mb", required_argument, nullptr, kCacheMb},
        {"access-log", required_argument, nullptr, kAccessLog},
        {"no-reuseport", no_argument, nullptr, kNoReuseport},
        {"door", required_argument, nullptr, kDoor},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    weft::srv::parse_command_line(kProg, argc, argv, own, &o, [&o](int c, const char *a) {
        switch (c) {
        case kMode:
            if (!std::strcmp(a, "c")) o.mode = Mode::C;
            else if (!std::strcmp(a, "nb")) o.mode = Mode::NB;
            else if (!std::strcmp(a, "b")) o.mode = Mode::B;
            else if (!std::strcmp(a, "uring")) o.mode = Mode::Uring;
            else usage_error("--mode is c, nb, b or uring, not '%s'", a);
            return true;
        case kThreads: o.threads = static_cast<int>(parse_long("--threads", a, 0, 1000000)); return true;
        case kVprocs: o.vprocs = static_cast<int>(parse_long("--vprocs", a, 1, 64)); return true;
        case kWorkers: o.workers = static_cast<int>(parse_long("--workers", a, 1, 256)); return true;
        case kCacheMb: o.cache_mb = parse_long("--cache-mb", a, 0, 1 << 20); return true;
        case kAccessLog: o.access_log = a; return true;
        case kNoReuseport: o.reuseport = false; return true;
        case kDoor:
            if (!std::strcmp(a, "accept")) o.kernel_door = false;
            else if (!std::strcmp(a, "kernel")) o.kernel_door = true;
            else usage_error("--door is accept or kernel, not '%s'", a);
            return true;
        default: return false;
        }
    }, usage);
    return o;
}

// ---- running ----

Server server;
int signal_fd = -1;
weft::srv::AcceptSite accept_site; // what the accept loops refuse with

struct Accepted {
    int fd;
    struct sockaddr_storage peer;
};

void refuse(int fd) { weft::srv::refuse(accept_site, fd); }
// --door kernel, attached: the kernel refuses at the SYN what the door
// would, so the acceptors do not draw again.
bool door_in_kernel = false;
int accept_one(int lfd, Accepted *a) { return weft::srv::accept_one(accept_site, lfd, &a->peer); }

// Past capacity the runtime may say to shed a connection rather than serve
// it late (weft_admit_new at the door, weft_admit in its thread;
// docs/scheduling.md): reset it, so that the client's whole session ends
// here. (A 503 would let the session go on over a new connection, straight
// back into the queue: measured, that retry storm cut 2xx replies to a
// fifth.)
void shed(int fd) {
    struct linger reset = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    weft_close(fd);
    server.counters.shed.fetch_add(1, std::memory_order_relaxed);
}

void *connection_thread(void *arg) {
    Accepted *a = static_cast<Accepted *>(arg);
    Accepted mine = *a;
    delete a;
    if (!weft_admit()) {
        shed(mine.fd);
        return nullptr;
    }
    serve_connection(server, mine.fd, mine.peer);
    return nullptr;
}

// threads == 0: one of these per vproc, a new thread per connection.
void *acceptor(void *arg) {
    int lfd = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    weft_thread_attr_t attr;
    weft_thread_attr_init(&attr);
    attr.detached = 1;
    attr.name = "conn";
    for (;;) {
        Accepted a;
        int fd = accept_one(lfd, &a);
        if (fd < 0) break;
        if (server.counters.open_conns.load(std::memory_order_relaxed) >= server.opt.max_conns) {
            refuse(fd);
            continue;
        }
        if (!door_in_kernel && !weft_admit_new()) { // the door: a share of arrivals under overload
            shed(fd);
            continue;
        }
        a.fd = fd;
        auto *heap = new (std::nothrow) Accepted(a);
        weft_thread_t t;
        if (!heap || weft_thread_create(&t, &attr, connection_thread, heap) != 0) {
            delete heap;
            refuse(fd);
        }
    }
    return nullptr;
}

// threads > 0: each loops on accept and serves the connection itself.
void *accept_and_serve(void *arg) {
    int lfd = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    for (;;) {
        Accepted a;
        int fd = accept_one(lfd, &a);
        if (fd < 0) break;
        serve_connection(server, fd, a.peer);
    }
    return nullptr;
}

void *log_flusher(void *) {
    for (int tick = 0; !server.stopping.load(std::memory_order_relaxed); ++tick) {
        weft_sleep_ns(200 * 1000 * 1000);
        if (tick % 5 == 4) server.log->flush();
    }
    return nullptr;
}

// Waits for SIGINT/SIGTERM, then shuts down: no new connections, every
// response in flight finished, idle connections closed, the log written.
void *signal_watcher(void *) {
    weft::srv::wait_stop_signal(kProg, signal_fd, server.opt.quiet, server.counters.open_conns);
    server.stopping.store(true);
    for (int i = 0; i < server.listen_count; ++i) weft_close(server.listen_fds[i]); // wakes the acceptors (EBADF)
    conn_shutdown_all(server);
    conn_wait_all(server);
    return nullptr;
}

ssize_t weft_pread_fn(int fd, void *buf, size_t n, off_t off) { return weft_pread(fd, buf, n, off); }
int weft_close_fn(int fd) { return weft_close(fd); }

int run(void *) {
    Server &s = server;
    s.started_ns = weft_now_ns();
    weft::http::CacheOptions co;
    co.max_entries = static_cast<size_t>(s.opt.fd_cache);
    co.content_bytes = s.opt.mode == Mode::C ? static_cast<size_t>(s.opt.cache_mb) << 20 : 0;
    co.follow_symlinks = s.opt.follow_symlinks;
    co.server = "weft-knot";
    co.pread = weft_pread_fn;
    co.close = weft_close_fn;
    weft::http::FileCache cache(s.root_fd, co);
    weft::http::ResponderOptions ro;
    ro.server = "weft-knot";
    ro.use_content = s.opt.mode == Mode::C;
    weft::http::Responder responder(&cache, ro);
    s.cache = &cache;
    s.responder = &responder;
    std::string busy;
    weft::srv::init_accept_site(&accept_site, kProg, &s.counters, &s.stopping, responder, &busy);
    weft::srv::accept_reserve_spare();

    AccessLog log;
    if (!s.opt.access_log.empty()) {
        if (!log.open(s.opt.access_log)) {
            std::fprintf(stderr, "weft-knot: cannot open the access log '%s': %s\n", s.opt.access_log.c_str(),
                         std::strerror(errno));
            return 1;
        }
        s.log = &log;
    }

    weft_thread_t watcher, flusher{};
    std::vector<weft_thread_t> loops;
    weft_thread_create(&watcher, nullptr, signal_watcher, nullptr);
    if (s.log) weft_thread_create(&flusher, nullptr, log_flusher, nullptr);
    int vprocs = weft_vproc_count();
    if (s.opt.kernel_door) {
        // One door for the port, steered by this (the first) vproc's load:
        // several would each refuse their share of every arrival.
        if (int e = weft_door_listen(s.listen_fds[0])) {
            std::fprintf(stderr, "weft-knot: --door kernel: %s; refusing after accept instead\n",
                         e == EOPNOTSUPP ? "this kernel has no sk_lookup BPF programs (Linux 5.9)"
                         : e == EPERM    ? "not permitted (root, or CAP_BPF and CAP_NET_ADMIN, is needed)"
                                         : std::strerror(e));
        } else {
            door_in_kernel = true;
        }
    }
    loops = weft::srv::start_accept_loops(kProg, s.opt.threads > 0 ? s.opt.threads : vprocs, s.listen_fds,
                                          s.listen_count, s.opt.threads > 0 ? accept_and_serve : acceptor,
                                          s.opt.threads > 0 ? "knot" : "acceptor");
    if (!s.opt.quiet) {
        std::printf("weft-knot: serving %s on http://%s/ (mode %s, %d vproc%s, io %s, %s)\n", s.opt.root.c_str(),
                    s.opt.listen.c_str(), mode_name(s.opt.mode), vprocs, vprocs == 1 ? "" : "s", weft_io_backend(),
                    s.opt.threads > 0 ? (std::to_string(s.opt.threads) + " accept threads").c_str()
                                      : "a thread per connection");
        std::fflush(stdout);
    }

    for (auto &t : loops) weft_thread_join(t, nullptr);
    weft_thread_join(watcher, nullptr);
    if (s.log) {
        weft_thread_join(flusher, nullptr);
        log.close();
    }
    weft::srv::accept_release_spare();
    auto &c = s.counters;
    if (!s.opt.quiet)
        std::printf("weft-knot: stopped after %llu connections, %llu requests\n",
                    static_cast<unsigned long long>(c.accepted.load()),
                    static_cast<unsigned long long>(c.requests.load()));
    return 0;
}

} // namespace
} // namespace knot

int main(int argc, char **argv) {
    using namespace knot;
    Server &s = server;
    s.opt = parse_options(argc, argv);
    static_assert(weft::http::Limits{}.head_bytes < kInBuf, "a connection's buffer holds a whole head");

    s.root_fd = open(s.opt.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.root_fd < 0) {
        std::fprintf(stderr, "weft-knot: cannot read the root '%s': %s\n", s.opt.root.c_str(), std::strerror(errno));
        return 1;
    }

    s.listen_count = weft::srv::listen_sockets(kProg, &s.opt.listen, s.opt.vprocs, s.opt.reuseport, s.listen_fds, 64);
    signal_fd = weft::srv::stop_signal_fd(); // read by a weft thread

    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = s.opt.vprocs;
    if (s.opt.workers > 0) cfg.workers = s.opt.workers;
#ifdef WEFT_KNOT_LINKED
    // weft-knot-linked: built for linked stacks (docs/stacks.md), its
    // threads get them unless WEFT_STACKS says otherwise.
    if (!std::getenv("WEFT_STACKS")) cfg.stacks = "linked";
#endif
    int rc = weft_main_config(&cfg, run, nullptr);
    return rc < 0 ? 1 : rc;
}
