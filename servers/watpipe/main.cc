// weft-watpipe: WatPipe, the pipeline web server of the EuroSys'07 study
// (server-architectures-eurosys07 §6), serving static files through the
// HTTP core every weft server shares (http/) and the event-driven
// connection of servers/common/evconn.hpp. Plain pthreads and system calls:
// like the paper's WatPipe, each thread may block in the kernel, so nothing
// is wrapped and the weft runtime is not used.
//
// The pipeline (four stages, as in the paper):
//
//   stage 1  one thread   accepts connections, passes them to stage 2
//   stage 2  one thread   waits for readable connections, reads and parses
//                         requests (EvConn::receive); a connection whose
//                         reply is ready goes to stage 3
//   stage 3  one thread   waits for writable connections and hands each
//                         batch of them to stage 4, then waits for stage 4
//                         to finish it
//   stage 4  --writers N  write the replies (EvConn::send: writev, and
//                         non-blocking sendfile for files)
//
// Stages 3 and 4 alternate, only one active at a time: stage 3 collects a
// batch, stage 4's writers drain it (sharing it out in chunks), then stage
// 3 waits again. A reply that does not fit in the socket sends what it can
// and cycles back to stage 3 to wait for room; a finished reply sends its
// connection back to stage 2 for the next request (a pipelined request
// already buffered is answered by the writer at once), or it is closed.
// Several writers let writing go on while one is blocked in sendfile on a
// disk read.
//
// Why epoll and not the paper's select with merged fd sets: select caps at
// FD_SETSIZE (1024) descriptors and the study ran 20,000 connections. So
// stages 2 and 3 each own an epoll instance, and a connection is registered
// with EPOLLONESHOT: an event disarms it, so a stage's set never reports a
// connection another stage owns, and giving it back costs one
// EPOLL_CTL_MOD (re-arm) instead of an ADD and a DEL per hand-off.
//
// Why queues with an eventfd: the paper's stages synchronise periodically;
// here a hand-off is an Inbox (watpipe.hpp): a mutex-protected vector that a
// stage pushes a whole batch into under one lock acquisition (everything
// one epoll_wait produced for the next stage), plus an eventfd in the
// receiving stage's epoll set that wakes it. So batching is kept — one lock
// and at most one wake-up per batch — and a stage with nothing to do sleeps
// in epoll_wait (stage 1 in poll) instead of polling on a period. Stage 3
// tries a reply from stage 2 at once in its next stage-4 batch and only
// registers it for EPOLLOUT if it does not fit: the socket has just carried
// a request in and almost always has room for the answer.
//
// Ownership: a connection (Conn, an EvConn) belongs to exactly one stage
// at a time — in stage 1's batch, in an Inbox, in stage 2's epoll set and
// deadline lists, in stage 3's, or in stage 4's batch (stage 3 keeps it on
// its send deadline list meanwhile, but does not run while stage 4 does).
// The mutexes of the hand-offs order everything one stage did to it before
// the next stage looks, so EvConn has no lock of its own. Whoever finds it
// finished closes it (close_conn), exactly once. Stage 1 counts a
// connection into ServerCounters::open_conns and close_conn counts it out; the
// shared counters are atomics.
//
// Deadlines: stage 2 keeps its connections in two DeadlineLists (a head
// being read: --header-timeout, then 408; idle between requests:
// --keepalive-timeout), stage 3 in one (--send-timeout). Each stage expires
// its own and sleeps at most until its earliest deadline (and a second).
//
// Shutdown (SIGINT/SIGTERM, read from a signalfd by the main thread; every
// thread has the two blocked): `stopping` is set, so every reply built from
// then on says Connection: close; stage 1 closes the listener and returns;
// stage 2 closes every connection waiting for a request (as weft-knot's
// SHUT_RD ends them) and any that comes back to it later; replies in flight
// finish (or hit the send timeout). When the last connection closes,
// close_conn wakes the main thread, which sets `quit`, wakes stages 2 and
// 3, stops the writers and joins every thread.
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "common/cli.hpp"
#include "common/evconn.hpp"
#include "http/cache.hpp"
#include "http/response.hpp"
#include "watpipe.hpp"

namespace watpipe {
namespace {

void usage(FILE *out) {
    std::fputs(
        "usage: weft-watpipe [options]\n"
        "WatPipe, the EuroSys'07 study's pipeline web server: serves the static files\n"
        "below --root over HTTP/1.1 until SIGINT or SIGTERM, in four stages of pthreads\n"
        "(accept; read requests; find writable connections; N writers sending replies).\n"
        "\n"
        "  --listen ADDR:PORT       address to serve on (default 127.0.0.1:8080; port 0 picks\n"
        "                           a free one; [::1]:8080 for IPv6)\n"
        "  --root DIR               document root (default: the current directory)\n"
        "  --writers N              stage-4 threads writing replies (default 4)\n"
        "  --fd-cache N             open files kept with their headers (default 4096)\n"
        "  --max-conns N            connections served at once; more get 503 (default 10000)\n"
        "  --max-requests N         requests per connection before it closes (default 1000)\n"
        "  --keepalive-timeout S    idle seconds between requests before closing (default 15)\n"
        "  --header-timeout S       seconds to send a whole request head, else 408 (default 10)\n"
        "  --send-timeout S         seconds a send may make no progress (default 60)\n"
        "  --stats                  serve the server's counters as JSON at /.weft/stats\n"
        "  --follow-symlinks        serve symlinks that lead outside the root (default: 403)\n"
        "  --quiet                  no start-up and shutdown lines on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Exit status: 0 after a graceful shutdown, 1 when it cannot start (bind, root),\n"
        "2 for a usage error.\n",
        out);
}

long parse_long(const char *opt, const char *s, long lo, long hi) { return weft::srv::parse_long(kProg, opt, s, lo, hi); }

Options parse_options(int argc, char **argv) {
    enum { kWriters = weft::srv::kOwnOption };
    static const struct option own[] = {
        {"writers", required_argument, nullptr, kWriters},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    weft::srv::parse_command_line(kProg, argc, argv, own, &o, [&o](int c, const char *a) {
        if (c != kWriters) return false;
        o.writers = static_cast<int>(parse_long("--writers", a, 1, 1000));
        return true;
    }, usage);
    return o;
}

[[noreturn]] void cannot_start(const char *what) {
    std::fprintf(stderr, "%s: cannot start: %s: %s\n", kProg, what, std::strerror(errno));
    std::_Exit(1); // threads may be running: no static destructors under them
}

uint64_t to_ns(double s) { return static_cast<uint64_t>(s * 1e9); }

// An epoll instance for stage 2 or 3, with the stage's inbox in it
// (data.ptr == nullptr tells it from a connection).
int stage_epoll(const Inbox &inbox) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) cannot_start("epoll_create1");
    struct epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, inbox.fd(), &ev) != 0) cannot_start("epoll_ctl");
    return ep;
}

std::thread start_thread(void (*fn)(Server *), Server *s, const char *name) {
    try {
        return std::thread(fn, s);
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "%s: cannot start the %s thread: %s\n", kProg, name, e.what());
        std::_Exit(1);
    }
}

// Blocks until SIGINT or SIGTERM; returns its number.
int wait_for_signal(int sfd) {
    struct signalfd_siginfo si;
    for (;;) {
        ssize_t n = read(sfd, &si, sizeof si);
        if (n == static_cast<ssize_t>(sizeof si)) return static_cast<int>(si.ssi_signo);
        if (n < 0 && errno == EINTR) continue;
        return SIGTERM; // cannot happen; shut down rather than serve on unstoppable
    }
}

} // namespace
} // namespace watpipe

int main(int argc, char **argv) {
    using namespace watpipe;
    Options opt = parse_options(argc, argv);

    int root_fd = open(opt.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        std::fprintf(stderr, "%s: cannot read the root '%s': %s\n", kProg, opt.root.c_str(), std::strerror(errno));
        return 1;
    }
    socklen_t len = 0;
    struct sockaddr_storage addr = weft::srv::resolve(kProg, opt.listen, &len);
    // Non-blocking: stage 1 drains the backlog until EAGAIN, then polls.
    int listen_fd = weft::srv::listen_on(kProg, &addr, len, false, opt.listen, SOCK_NONBLOCK);
    opt.listen = weft::srv::address_text(addr);

    // SIGINT/SIGTERM are read from a signalfd here; every thread started
    // below inherits the blocked mask, so none is interrupted by them.
    // SIGPIPE is ignored: a client that goes away is an EPIPE, never a dead
    // server.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    int signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
    if (signal_fd < 0) cannot_start("signalfd");
    signal(SIGPIPE, SIG_IGN);

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

    Server s;
    s.opt = opt;
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
    site.stats = opt.stats;
    site.server_name = kProg;
    site.mode = "pipeline";
    site.started_ns = weft::srv::now_ns();

    s.stop_accept_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s.drained_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s.stop_accept_fd < 0 || s.drained_fd < 0 || !s.to_reader.ok() || !s.to_writer.ok()) cannot_start("eventfd");
    s.read_ep = stage_epoll(s.to_reader);
    s.write_ep = stage_epoll(s.to_writer);

    // From the end of the pipeline to its start, so that nothing is handed
    // to a stage that is not running yet.
    if (!s.writers.start(&s, opt.writers)) std::_Exit(1);
    std::thread stage3 = start_thread(stage3_write, &s, "stage-3");
    std::thread stage2 = start_thread(stage2_read, &s, "stage-2");
    std::thread stage1 = start_thread(stage1_accept, &s, "stage-1");

    if (!opt.quiet) {
        char details[128];
        std::snprintf(details, sizeof details, "mode pipeline, %d writer%s, max-conns %ld", opt.writers,
                      opt.writers == 1 ? "" : "s", opt.max_conns);
        weft::srv::print_banner(kProg, opt.root.c_str(), opt.listen.c_str(), details);
    }

    int sig = wait_for_signal(signal_fd);
    if (!opt.quiet) {
        std::printf("%s: %s: shutting down (%ld connections open)\n", kProg, strsignal(sig),
                    s.counters.open_conns.load());
        std::fflush(stdout);
    }
    s.stopping.store(true);
    uint64_t one = 1;
    if (write(s.stop_accept_fd, &one, sizeof one) < 0) { /* a full counter: stage 1 is being woken anyway */ }
    stage1.join(); // the listener is closed: nothing new enters the pipeline
    s.to_reader.wake(); // stage 2 closes the connections waiting for a request

    // Replies in flight finish; each ends within --send-timeout of its last
    // progress, and a head being read within --header-timeout, so this ends.
    while (s.counters.open_conns.load() > 0) {
        struct pollfd p = {s.drained_fd, POLLIN, 0};
        if (poll(&p, 1, 200) > 0) {
            uint64_t v;
            if (read(s.drained_fd, &v, sizeof v) < 0) { /* EAGAIN: raced with nothing */ }
        }
    }
    s.quit.store(true);
    s.to_reader.wake();
    s.to_writer.wake();
    stage2.join();
    stage3.join();
    s.writers.stop();

    close(s.read_ep);
    close(s.write_ep);
    close(s.stop_accept_fd);
    close(s.drained_fd);
    close(signal_fd);
    if (!opt.quiet) {
        std::printf("%s: stopped after %llu connections, %llu requests\n", kProg,
                    static_cast<unsigned long long>(s.counters.accepted.load()),
                    static_cast<unsigned long long>(s.counters.requests.load()));
        std::fflush(stdout);
    }
    return 0;
}
