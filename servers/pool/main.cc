// weft-pool: the thread-pool web server of the StagedServer paper (Larus and
// Parkes, "Using Cohort Scheduling to Enhance Server Performance", Fig. 6,
// THWS): "a thread accepting connections and passing them to a pool of 256
// worker threads, each of which performs the server's full functionality:
// parsing a request, reading a file, and transmitting its contents". It
// serves static files through the HTTP core every weft server shares
// (http/) and the connection of servers/common/evconn.hpp in its blocking
// mode.
//
// Plain pthreads and blocking system calls, no weft runtime linked: the
// same binary runs on NPTL, and unmodified on weft threads under weft-run
// (docs/posix.md), which is the comparison the paper's figure makes
// (threads versus stages) with the thread package as the variable.
//
//   accept thread   polls the listening socket (and an eventfd that stops
//                   it), accepts, refuses with 503 past --max-conns, and
//                   pushes the socket onto the queue
//   N workers       (--workers, default 256) each pop a connection and
//                   serve it to its end: wait for a request (poll, bounded
//                   by the header or keep-alive deadline), parse it, look
//                   the file up in the shared cache, send head and body on
//                   the blocking socket (sendmsg, sendfile), again until
//                   the client closes, a timeout, an error, or shutdown
//
// A worker holds its connection while it idles between requests, as a
// thread-per-connection server does: with keep-alive, at most --workers
// connections are served at once and the others wait in the queue (the
// paper's clients closed after each request). --max-conns bounds queued
// plus served.
//
// Shutdown (SIGINT/SIGTERM, taken with sigwait by the main thread; every
// thread has the two blocked): `stopping` is set, so every reply built
// from then on says Connection: close; the accept thread closes the
// listener and returns; every connection being served gets SHUT_RD (as
// weft-knot does), so one waiting for a request reads EOF and ends while a
// reply in flight finishes (or meets --send-timeout); a connection still
// queued gets SHUT_RD when a worker takes it. When the last connection has
// closed, the workers are told to quit and are joined.
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/evconn.hpp"
#include "http/cache.hpp"
#include "http/response.hpp"
#include "pool.hpp"

namespace pool {
namespace {

void usage(FILE *out) {
    std::fputs(
        "usage: weft-pool [options]\n"
        "The StagedServer paper's thread-pool web server (THWS): serves the static files\n"
        "below --root over HTTP/1.1 until SIGINT or SIGTERM, with one thread accepting\n"
        "connections and a pool of workers, each serving a connection to its end with\n"
        "blocking calls. Plain pthreads: run it under weft-run for weft threads.\n"
        "\n"
        "  --listen ADDR:PORT       address to serve on (default 127.0.0.1:8080; port 0 picks\n"
        "                           a free one; [::1]:8080 for IPv6)\n"
        "  --root DIR               document root (default: the current directory)\n"
        "  --workers N              worker threads, each serving one connection at a time\n"
        "                           (default 256)\n"
        "  --fd-cache N             open files kept with their headers (default 4096)\n"
        "  --max-conns N            connections served or queued at once; more get 503\n"
        "                           (default 10000)\n"
        "  --max-requests N         requests per connection before it closes (default 1000)\n"
        "  --keepalive-timeout S    idle seconds between requests before closing (default 15)\n"
        "  --header-timeout S       seconds to send a whole request head, else 408 (default 10)\n"
        "  --send-timeout S         seconds a send may make no progress (default 60)\n"
        "  --stats                  serve the server's counters as JSON at /.weft/stats\n"
        "  --follow-symlinks        serve symlinks that lead outside the root (default: 403)\n"
        "  --quiet                  no start-up and shutdown lines on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Exit status: 0 after a graceful shutdown, 1 when it cannot start (bind, root,\n"
        "threads), 2 for a usage error.\n",
        out);
}

Options parse_options(int argc, char **argv) {
    enum { kWorkers = weft::srv::kOwnOption };
    static const struct option own[] = {
        {"workers", required_argument, nullptr, kWorkers},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    weft::srv::parse_command_line(kProg, argc, argv, own, &o, [&o](int c, const char *a) {
        if (c != kWorkers) return false;
        o.workers = static_cast<int>(weft::srv::parse_long(kProg, "--workers", a, 1, 100000));
        return true;
    }, usage);
    return o;
}

[[noreturn]] void cannot_start(const char *what, int err) {
    std::fprintf(stderr, "%s: cannot start: %s: %s\n", kProg, what, std::strerror(err));
    std::_Exit(1); // threads may be running: no static destructors under them
}

uint64_t to_ns(double s) { return static_cast<uint64_t>(s * 1e9); }

// A worker's stack. A worker's frames are small (the connection and its
// buffers are on the heap), and NPTL's 8 MiB default would map 80 GiB for
// 10,000 workers; this is also what weft-run gives a pthread that does not
// ask, so the pool has the same footprint on both.
constexpr size_t kWorkerStack = 256 << 10;

struct WorkerArg {
    Server *s;
    size_t w;
};

void *worker_main(void *p) {
    auto *a = static_cast<WorkerArg *>(p);
    worker_loop(a->s, a->w);
    return nullptr;
}

// ---- the accept thread ----

// The descriptor table is full: take one waiting connection with the spare
// descriptor, tell it we are busy (503) and close it, and take the spare
// back. Without this the listener stays readable and nothing drains it.
void shed_one(Server *s, int *spare, uint64_t *last_warned) {
    if (*spare >= 0) {
        close(*spare);
        *spare = -1;
        int fd = accept4(s->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) s->busy->refuse(fd, &s->counters);
    }
    // A worker may have taken the freed number (a file the cache opens):
    // then the spare comes back on a later try.
    *spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uint64_t now = weft::srv::now_ns();
    if (*last_warned == 0 || now - *last_warned > 1000000000ull) {
        std::fprintf(stderr, "%s: descriptor table full (EMFILE): refusing new connections with 503\n", kProg);
        *last_warned = now;
    }
}

void *accept_main(void *p) {
    auto *s = static_cast<Server *>(p);
    int spare = open("/dev/null", O_RDONLY | O_CLOEXEC); // held so that a full table can still shed load
    uint64_t last_warned = 0;
    struct pollfd pf[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_accept_fd, POLLIN, 0}};
    bool back_off = false;
    while (!s->stopping.load()) {
        if (back_off) {
            // Out of descriptors or memory: let the connections being served
            // finish and free theirs rather than spin on a readable
            // listener. Waiting on the stop eventfd keeps shutdown prompt.
            back_off = false;
            poll(&pf[1], 1, 10);
            continue;
        }
        if (poll(pf, 2, -1) < 0) {
            back_off = errno != EINTR;
            continue;
        }
        // The listener is non-blocking, so the backlog is drained without
        // another poll per connection; the bound keeps a stop prompt.
        for (int i = 0; i < 64 && !s->stopping.load(); ++i) {
            // Without SOCK_NONBLOCK: the worker gets a blocking socket.
            int fd = accept4(s->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
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
            // Only this thread adds to open_conns, so the check is exact.
            if (s->counters.open_conns.load() >= s->opt.max_conns) {
                s->busy->refuse(fd, &s->counters);
                continue;
            }
            s->counters.open_conns.fetch_add(1);
            s->queue.push(fd);
        }
    }
    close(s->listen_fd); // no new connections from here on; the backlog is reset
    if (spare >= 0) close(spare);
    return nullptr;
}

pthread_t start_thread(void *(*fn)(void *), void *arg, size_t stack, const char *what) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (stack) pthread_attr_setstacksize(&attr, stack);
    pthread_t t;
    int rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc != 0) cannot_start(what, rc);
    return t;
}

} // namespace
} // namespace pool

int main(int argc, char **argv) {
    using namespace pool;
    // SIGINT/SIGTERM are taken with sigwait at the end. Blocked before
    // anything else, so that every thread started later, ours or a
    // library's, inherits the mask and none is interrupted by them.
    // SIGPIPE is ignored: a client that goes away is an EPIPE (sendfile has
    // no MSG_NOSIGNAL), never a dead server.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);

    Options opt = parse_options(argc, argv);

    int root_fd = open(opt.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        std::fprintf(stderr, "%s: cannot read the root '%s': %s\n", kProg, opt.root.c_str(), std::strerror(errno));
        return 1;
    }
    socklen_t len = 0;
    struct sockaddr_storage addr = weft::srv::resolve(kProg, opt.listen, &len);
    // Non-blocking: the accept thread drains the backlog until EAGAIN, then
    // polls (with the stop eventfd, which a blocked accept could not see).
    int listen_fd = weft::srv::listen_on(kProg, &addr, len, false, opt.listen, SOCK_NONBLOCK);
    opt.listen = weft::srv::address_text(addr);

    weft::http::CacheOptions co;
    co.max_entries = static_cast<size_t>(opt.fd_cache);
    co.follow_symlinks = opt.follow_symlinks;
    co.server = kProg;
    co.pread = ::pread;
    co.close = ::close;
    weft::http::FileCache cache(root_fd, co);
    weft::http::ResponderOptions ro;
    ro.server = kProg;
    weft::http::Responder responder(&cache, ro);
    weft::srv::BusyReply busy(responder);

    Server s(opt);
    s.busy = &busy;
    s.listen_fd = listen_fd;
    weft::srv::EvSite &site = s.site;
    site.responder = &responder;
    site.max_requests = opt.max_requests;
    site.header_timeout_ns = to_ns(opt.header_timeout_s);
    site.keepalive_timeout_ns = to_ns(opt.keepalive_timeout_s);
    site.send_timeout_ns = to_ns(opt.send_timeout_s);
    site.stopping = &s.stopping;
    site.counters = &s.counters;
    site.blocking = true;
    site.stats = opt.stats;
    site.server_name = kProg;
    site.mode = "pool";
    site.started_ns = weft::srv::now_ns();

    s.stop_accept_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s.stop_accept_fd < 0) cannot_start("eventfd", errno);

    // The workers first, so that nothing is queued before one can take it.
    std::vector<WorkerArg> args(static_cast<size_t>(opt.workers));
    std::vector<pthread_t> workers;
    workers.reserve(args.size());
    for (size_t w = 0; w < args.size(); ++w) {
        args[w] = {&s, w};
        char what[64];
        std::snprintf(what, sizeof what, "worker thread %zu of %d", w + 1, opt.workers);
        workers.push_back(start_thread(worker_main, &args[w], kWorkerStack, what));
    }
    pthread_t acceptor = start_thread(accept_main, &s, 0, "the accept thread");

    if (!opt.quiet) {
        char details[128];
        std::snprintf(details, sizeof details, "mode pool, %d worker%s, max-conns %ld", opt.workers,
                      opt.workers == 1 ? "" : "s", opt.max_conns);
        weft::srv::print_banner(kProg, opt.root.c_str(), opt.listen.c_str(), details);
    }

    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
        // EINTR is not among sigwait's errors; anything else cannot happen
        // with a valid set. Go on waiting rather than serve on unstoppable.
    }
    if (!opt.quiet) {
        std::printf("%s: %s: shutting down (%ld connections open)\n", kProg, strsignal(sig),
                    s.counters.open_conns.load());
        std::fflush(stdout);
    }
    s.stopping.store(true);
    uint64_t one = 1;
    if (write(s.stop_accept_fd, &one, sizeof one) < 0) { /* a full counter: the thread is being woken anyway */ }
    pthread_join(acceptor, nullptr); // the listener is closed: nothing new is queued
    s.queue.shut_read_all();

    // Replies in flight finish; each ends within --send-timeout of its last
    // progress, and a head being read within --header-timeout, so this ends.
    s.queue.wait_drained(s.counters);
    s.queue.quit();
    for (pthread_t t : workers) pthread_join(t, nullptr);

    close(s.stop_accept_fd);
    if (!opt.quiet) {
        std::printf("%s: stopped after %llu connections, %llu requests\n", kProg,
                    static_cast<unsigned long long>(s.counters.accepted.load()),
                    static_cast<unsigned long long>(s.counters.requests.load()));
        std::fflush(stdout);
    }
    return 0;
}
