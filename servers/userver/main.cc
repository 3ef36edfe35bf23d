// weft-userver: the event-driven µserver of the EuroSys'07 study
// (server-architectures-eurosys07 §5), serving the static files below
// --root with the same HTTP core, cache and limits as weft-knot (http/,
// servers/common/evconn.hpp), on plain system calls: no weft runtime.
//
// Modes:
//   SPED           one process, one event loop (select, poll or epoll) on
//                  non-blocking sockets. --procs 1, the default; the loop
//                  runs in the main process.
//   SYMPED         --procs N: the main process listens, then forks N
//                  copies of the SPED server that share the listening
//                  socket (--reuseport: one SO_REUSEPORT socket each) and
//                  nothing else: each has its own cache of open files and
//                  headers. The main process only forwards SIGTERM, waits,
//                  and reads the counters every copy adds to in a
//                  MAP_SHARED page. A copy that dies is reported and not
//                  replaced.
//   shared-SYMPED  --shared: the N loops share one cache of open files and
//                  headers (its lock a futex) and one descriptor table
//                  (below).
//   userver-b      --blocking-socket, with any of the above: accepted
//                  sockets are blocking, so a reply is written in one go
//                  and its loop waits for it, seeing nothing else (not even
//                  the stop signal) until it is out or --send-timeout
//                  passes without progress; the study needed 75 to 200
//                  processes for this to keep up.
//
// --max-conns counts the connections of all loops together, as the
// study's max-conn does ("30,000 concurrent connections across 3 server
// processes (i.e., 10,000 connections per process)"), and is enforced on
// that total (one atomic counter in shared memory), not as a fixed share
// per loop: neither a shared listening socket nor SO_REUSEPORT spreads
// connections evenly (measured with 10,000 connections over 4 processes:
// 5277/2573/1420/734 on a shared socket, +-3% with SO_REUSEPORT), so fixed
// shares would answer 503 while the server as a whole had room.
//
// shared-SYMPED as threads. The study built it from clone() (one open-file
// table among the processes), mmap (the cache memory) and a futex (the
// cache lock). On Linux a pthread is exactly such a clone(): CLONE_VM |
// CLONE_FILES | CLONE_FS | CLONE_SIGHAND | CLONE_THREAD ..., and glibc does
// not support CLONE_VM children made outside pthread_create (their
// thread-local storage and stack guard would be the parent's). So the N
// loops of shared-SYMPED are N kernel threads (std::thread) of one
// process: one descriptor table, one http::FileCache whose lock is a futex,
// each thread an independent SPED loop with its own poller. Without
// --shared each process builds its own FileCache after the fork.
//
// Shutdown (SIGINT/SIGTERM): no new connections (the listening sockets are
// closed, or shut down by the main process so that the kernel refuses new
// connections at once for every loop), connections waiting for a request
// are closed, replies in flight are finished and end their connection,
// then exit 0. In SYMPED every child has PR_SET_PDEATHSIG = SIGTERM, so a
// main process killed outright (SIGKILL) takes its children with it.
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/cli.hpp"
#include "http/cache.hpp"
#include "http/response.hpp"
#include "userver.hpp"

namespace userver {
namespace {

// The flags every weft server has (common/cli.hpp; here --max-conns counts
// all loops together and --fd-cache is per cache), and the µserver's own.
struct Options : weft::srv::CommonOptions {
    Events events = Events::Epoll;
    int procs = 1;
    bool shared = false;          // shared-SYMPED
    bool blocking = false;        // userver-b
    bool reuseport = false;       // a SO_REUSEPORT socket per loop instead of one shared
};

void usage(FILE *out) {
    std::fputs(
        "usage: weft-userver [options]\n"
        "The µserver of the EuroSys'07 study, an event-driven web server: serves the\n"
        "static files below --root over HTTP/1.1 until SIGINT or SIGTERM.\n"
        "\n"
        "  --listen ADDR:PORT       address to serve on (default 127.0.0.1:8080; port 0 picks\n"
        "                           a free one; [::1]:8080 for IPv6)\n"
        "  --root DIR               document root (default: the current directory)\n"
        "  --events epoll|poll|select\n"
        "                           how a loop waits for readiness (default epoll); select\n"
        "                           handles at most 1024 descriptors (FD_SETSIZE): a\n"
        "                           connection on a higher one gets 503\n"
        "  --procs N                event loops (default 1: SPED, in this process); N > 1:\n"
        "                           SYMPED, N processes forked after listen, each with its\n"
        "                           own cache\n"
        "  --shared                 shared-SYMPED: the N loops are threads of one process\n"
        "                           sharing one cache and one descriptor table\n"
        "  --blocking-socket        userver-b: blocking sockets, a reply is written in one go\n"
        "                           (wants many --procs)\n"
        "  --reuseport              each loop its own SO_REUSEPORT listening socket instead\n"
        "                           of one shared socket\n"
        "  --max-conns N            connections served at once, all loops together; more get\n"
        "                           503 (default 10000)\n"
        "  --max-requests N         requests per connection before it closes (default 1000)\n"
        "  --keepalive-timeout S    idle seconds between requests before closing (default 15)\n"
        "  --header-timeout S       seconds to send a whole request head, else 408 (default 10)\n"
        "  --send-timeout S         seconds a send may make no progress (default 60)\n"
        "  --fd-cache N             open files kept with their headers, per cache (default 4096)\n"
        "  --stats                  serve the server's counters as JSON at /.weft/stats (the\n"
        "                           file cache's: of the process that answers)\n"
        "  --follow-symlinks        serve symlinks that lead outside the root (default: 403)\n"
        "  --quiet                  no start-up and shutdown lines on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Exit status: 0 after a graceful shutdown (in SYMPED: of every process), 1 when it\n"
        "cannot start (bind, root), 2 for a usage error.\n",
        out);
}

[[noreturn]] void usage_error(const char *fmt, const char *arg) { weft::srv::usage_error(kProg, fmt, arg); }
long parse_long(const char *opt, const char *s, long lo, long hi) { return weft::srv::parse_long(kProg, opt, s, lo, hi); }

Options parse_options(int argc, char **argv) {
    enum { kEvents = weft::srv::kOwnOption, kProcs, kShared, kBlocking, kReuseport };
    static const struct option own[] = {
        {"events", required_argument, nullptr, kEvents},
        {"procs", required_argument, nullptr, kProcs},
        {"shared", no_argument, nullptr, kShared},
        {"blocking-socket", no_argument, nullptr, kBlocking},
        {"reuseport", no_argument, nullptr, kReuseport},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    weft::srv::parse_command_line(kProg, argc, argv, own, &o, [&o](int c, const char *a) {
        switch (c) {
        case kEvents:
            if (!std::strcmp(a, "epoll")) o.events = Events::Epoll;
            else if (!std::strcmp(a, "poll")) o.events = Events::Poll;
            else if (!std::strcmp(a, "select")) o.events = Events::Select;
            else usage_error("--events is epoll, poll or select, not '%s'", a);
            return true;
        case kProcs: o.procs = static_cast<int>(parse_long("--procs", a, 1, 1024)); return true;
        case kShared: o.shared = true; return true;
        case kBlocking: o.blocking = true; return true;
        case kReuseport: o.reuseport = true; return true;
        default: return false;
        }
    }, usage);
    return o;
}

// ---- what every mode starts from ----

// The server's counters, which every loop adds to, and each loop's own
// count of open connections (on a cache line of its own), in a MAP_SHARED
// page: the processes of SYMPED share them with their parent, which prints
// the totals and takes a dead child's connections off the open count.
struct alignas(64) LoopSlot {
    std::atomic<long> open{0};
};
struct alignas(64) SharedPage {
    weft::srv::ServerCounters counters;
    // Setup::loops LoopSlots follow.
    static size_t size(int loops) { return sizeof(SharedPage) + sizeof(LoopSlot) * static_cast<size_t>(loops); }
};

struct Setup {
    Options o;
    int root_fd = -1;
    std::vector<int> listeners;  // one, or one per loop with --reuseport
    std::string where;           // ADDR:PORT, the port chosen
    std::string mode;            // sped, symped, shared-symped; -b for userver-b
    SharedPage *page = nullptr;
    LoopSlot *slots = nullptr;   // one per loop, after *page
    int loops = 1;
    uint64_t started_ns = 0;

    int listener(int i) const { return listeners[static_cast<size_t>(i) % listeners.size()]; }
    bool listener_shared() const { return loops > 1 && listeners.size() == 1; }
    weft::srv::ServerCounters &counters() const { return page->counters; }
};

ssize_t plain_pread(int fd, void *buf, size_t n, off_t off) { return pread(fd, buf, n, off); }
int plain_close(int fd) { return close(fd); }

// What one process serves with: the cache, the responder, the 503 page.
struct Site {
    weft::http::FileCache cache;
    weft::http::Responder responder;
    weft::srv::BusyReply busy;

    static weft::http::CacheOptions cache_options(const Options &o) {
        weft::http::CacheOptions co;
        co.max_entries = static_cast<size_t>(o.fd_cache);
        co.follow_symlinks = o.follow_symlinks;
        co.server = kProg;
        co.pread = plain_pread;
        co.close = plain_close;
        return co;
    }
    static weft::http::ResponderOptions responder_options() {
        weft::http::ResponderOptions ro;
        ro.server = kProg;
        return ro;
    }
    Site(int root_fd, const Options &o)
        : cache(root_fd, cache_options(o)), responder(&cache, responder_options()), busy(responder) {}
};

LoopConfig loop_config(const Setup &s, int i, Site &site, std::atomic<bool> *stopping) {
    const Options &o = s.o;
    LoopConfig cfg;
    cfg.events = o.events;
    cfg.listen_fd = s.listener(i);
    cfg.listen_shared = s.listener_shared();
    cfg.max_conns = o.max_conns;
    cfg.open_here = &s.slots[i].open;
    cfg.site.responder = &site.responder;
    cfg.site.max_requests = o.max_requests;
    cfg.site.header_timeout_ns = static_cast<uint64_t>(o.header_timeout_s * 1e9);
    cfg.site.keepalive_timeout_ns = static_cast<uint64_t>(o.keepalive_timeout_s * 1e9);
    cfg.site.send_timeout_ns = static_cast<uint64_t>(o.send_timeout_s * 1e9);
    cfg.site.counters = &s.counters();
    cfg.site.blocking = o.blocking;
    cfg.site.stats = o.stats;
    cfg.site.server_name = kProg;
    cfg.site.mode = s.mode.c_str();
    cfg.site.started_ns = s.started_ns;
    cfg.stopping = stopping;
    cfg.busy = &site.busy;
    return cfg;
}

sigset_t stop_signals(bool with_sigchld) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (with_sigchld) sigaddset(&set, SIGCHLD);
    return set;
}

void banner(const Setup &s) {
    if (s.o.quiet) return;
    std::string details = "mode " + s.mode + ", events " + events_name(s.o.events) + ", " + std::to_string(s.loops) +
                          (s.loops == 1 ? " process" : " processes") + ", max-conns " + std::to_string(s.o.max_conns);
    weft::srv::print_banner(kProg, s.o.root.c_str(), s.where.c_str(), details.c_str());
}

void announce_stop(const Setup &s, int signo) {
    if (s.o.quiet) return;
    std::printf("%s: %s: shutting down (%ld connections open)\n", kProg, strsignal(signo),
                s.counters().open_conns.load());
    std::fflush(stdout);
}

void print_stopped(const Setup &s) {
    if (s.o.quiet) return;
    std::printf("%s: stopped after %llu connections, %llu requests\n", kProg,
                static_cast<unsigned long long>(s.counters().accepted.load()),
                static_cast<unsigned long long>(s.counters().requests.load()));
    std::fflush(stdout);
}

// The kernel refuses new connections from now on, for every loop and
// process that holds the socket: shutdown() ends a listening socket's
// LISTEN state, where close() would wait for the last descriptor. Loops
// see it readable, get EINVAL from accept, and stop watching it.
void stop_listening(const Setup &s) {
    for (int fd : s.listeners) shutdown(fd, SHUT_RDWR);
}

// ---- SPED ----

int run_sped(Setup &s) {
    Site site(s.root_fd, s.o);
    std::atomic<bool> stopping{false};
    sigset_t set = stop_signals(false);
    LoopConfig cfg = loop_config(s, 0, site, &stopping);
    cfg.stop_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    cfg.announce = !s.o.quiet;
    Loop loop(cfg);
    if (cfg.stop_fd < 0 || !loop.init()) return 1;
    banner(s);
    int rc = loop.run();
    s.listeners.clear(); // the loop closed it when it stopped
    if (rc == 0) print_stopped(s);
    return rc;
}

// ---- SYMPED ----

// A forked copy: a SPED server on the shared (or its own) listening socket.
int child_main(Setup &s, int i, pid_t parent) {
    // The main process going away for any reason (SIGKILL included) sends
    // us SIGTERM, which we read like any stop signal. It may have gone
    // before prctl: then getppid() is no longer it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) return 1;
    if (s.listeners.size() > 1)
        for (size_t j = 0; j < s.listeners.size(); ++j)
            if (static_cast<int>(j) != i) close(s.listeners[j]);
    Site site(s.root_fd, s.o);
    std::atomic<bool> stopping{false};
    sigset_t set = stop_signals(false);
    LoopConfig cfg = loop_config(s, i, site, &stopping);
    cfg.stop_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    Loop loop(cfg);
    if (cfg.stop_fd < 0 || !loop.init()) return 1;
    return loop.run();
}

struct Child {
    pid_t pid = -1;
    bool alive = false;
    int status = 0;
};

std::string describe(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                    strsignal(WTERMSIG(status)) + ")";
    return "ended";
}

bool ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// Collects the children that have ended. A child that ends before the
// shutdown is reported; the others go on serving.
void reap(Setup &s, std::vector<Child> &kids, int *live, bool stopping, bool block) {
    for (;;) {
        int st = 0;
        pid_t pid = waitpid(-1, &st, block ? 0 : WNOHANG);
        if (pid <= 0) {
            if (pid < 0 && errno == EINTR) continue;
            return;
        }
        for (size_t i = 0; i < kids.size(); ++i) {
            if (kids[i].pid != pid || !kids[i].alive) continue;
            kids[i].alive = false;
            kids[i].status = st;
            --*live;
            // The kernel closed its connections.
            s.counters().open_conns.fetch_sub(s.slots[i].open.exchange(0));
            if (!stopping) {
                std::fprintf(stderr, "%s: process %zu (pid %d) %s; %d still serving\n", kProg, i, pid,
                             describe(st).c_str(), *live);
                // Its own SO_REUSEPORT socket would go on taking connections
                // nobody accepts.
                if (s.listeners.size() > 1) shutdown(s.listeners[i], SHUT_RDWR);
            } else if (!ok(st)) {
                std::fprintf(stderr, "%s: process %zu (pid %d) %s\n", kProg, i, pid, describe(st).c_str());
            }
        }
        if (block) return;
    }
}

int run_symped(Setup &s) {
    std::vector<Child> kids(static_cast<size_t>(s.loops));
    const pid_t parent = getpid();
    int live = 0;
    for (int i = 0; i < s.loops; ++i) {
        std::fflush(nullptr); // a child must not inherit (and later write) buffered output
        pid_t pid = fork();
        if (pid == 0) std::exit(child_main(s, i, parent));
        if (pid < 0) {
            std::fprintf(stderr, "%s: cannot start process %d: %s\n", kProg, i, std::strerror(errno));
            for (int j = 0; j < i; ++j) kill(kids[j].pid, SIGTERM);
            while (live > 0) reap(s, kids, &live, true, true);
            return 1;
        }
        kids[i] = {pid, true, 0};
        ++live;
    }
    sigset_t set = stop_signals(true);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC); // signals that came meanwhile are pending: none lost
    banner(s);

    int signo = 0;
    while (live > 0 && signo == 0) {
        struct signalfd_siginfo si;
        ssize_t n = read(sfd, &si, sizeof si);
        if (n != static_cast<ssize_t>(sizeof si)) {
            if (n < 0 && errno == EINTR) continue;
            std::fprintf(stderr, "%s: reading signals: %s\n", kProg, std::strerror(errno));
            signo = SIGTERM;
            break;
        }
        if (si.ssi_signo == SIGCHLD) reap(s, kids, &live, false, false);
        else signo = static_cast<int>(si.ssi_signo);
    }
    if (signo) {
        announce_stop(s, signo);
        stop_listening(s);
        for (const Child &k : kids)
            if (k.alive) kill(k.pid, SIGTERM);
        while (live > 0) reap(s, kids, &live, true, true);
    } else {
        std::fprintf(stderr, "%s: every process has ended\n", kProg);
    }
    close(sfd);
    bool all_ok = true;
    for (const Child &k : kids) all_ok = all_ok && ok(k.status);
    print_stopped(s);
    return all_ok ? 0 : 1;
}

// ---- shared-SYMPED ----

int run_shared(Setup &s) {
    Site site(s.root_fd, s.o); // one cache, one descriptor table: every thread's
    std::atomic<bool> stopping{false};
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) {
        std::fprintf(stderr, "%s: eventfd: %s\n", kProg, std::strerror(errno));
        return 1;
    }
    std::vector<std::unique_ptr<Loop>> loops;
    for (int i = 0; i < s.loops; ++i) {
        LoopConfig cfg = loop_config(s, i, site, &stopping);
        cfg.own_listener = false; // one descriptor table: closed below, once no loop can use it
        cfg.stop_fd = efd;
        cfg.stop_is_signalfd = false;
        loops.push_back(std::make_unique<Loop>(cfg));
        if (!loops.back()->init()) return 1;
    }
    sigset_t set = stop_signals(false);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);

    std::vector<int> status(loops.size(), 1);
    std::vector<std::thread> threads;
    int signo = SIGTERM;
    try {
        for (size_t i = 0; i < loops.size(); ++i)
            threads.emplace_back([&, i] { status[i] = loops[i]->run(); });
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "%s: cannot start thread %zu: %s\n", kProg, threads.size(), e.what());
        signo = 0;
    }
    if (signo) {
        banner(s);
        struct signalfd_siginfo si;
        ssize_t n;
        while ((n = read(sfd, &si, sizeof si)) < 0 && errno == EINTR) {
        }
        if (n == static_cast<ssize_t>(sizeof si)) signo = static_cast<int>(si.ssi_signo);
        announce_stop(s, signo);
    }
    stop_listening(s);
    stopping.store(true);
    uint64_t one = 1;
    ssize_t w = write(efd, &one, sizeof one); // readable for good: every loop sees it
    (void)w;
    for (auto &t : threads) t.join();
    loops.clear();
    close(efd);
    close(sfd);
    if (!signo) return 1;
    bool all_ok = true;
    for (int st : status) all_ok = all_ok && st == 0;
    print_stopped(s);
    return all_ok ? 0 : 1;
}

} // namespace
} // namespace userver

int main(int argc, char **argv) {
    using namespace userver;
    Setup s;
    s.o = parse_options(argc, argv);
    s.loops = s.o.procs;
    s.mode = s.o.shared ? "shared-symped" : s.loops > 1 ? "symped" : "sped";
    if (s.o.blocking) s.mode += "-b";
    s.started_ns = now_ns();

    s.root_fd = open(s.o.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.root_fd < 0) {
        std::fprintf(stderr, "%s: cannot read the root '%s': %s\n", kProg, s.o.root.c_str(), std::strerror(errno));
        return 1;
    }

    // Non-blocking listening sockets: a loop accepts until EAGAIN, and with
    // several loops on one socket another may have taken the connection.
    socklen_t len = 0;
    struct sockaddr_storage addr = weft::srv::resolve(kProg, s.o.listen, &len);
    const int want = s.loops > 1 && s.o.reuseport ? s.loops : 1;
    for (int i = 0; i < want; ++i) {
        // later ones bind the port the first got
        int fd = weft::srv::listen_on(kProg, &addr, len, want > 1, s.o.listen, SOCK_NONBLOCK);
        if (fd == -2) break; // no SO_REUSEPORT: share one socket
        s.listeners.push_back(fd);
    }
    if (s.listeners.empty())
        s.listeners.push_back(weft::srv::listen_on(kProg, &addr, len, false, s.o.listen, SOCK_NONBLOCK));
    s.where = weft::srv::address_text(addr);

    void *page = mmap(nullptr, SharedPage::size(s.loops), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        std::fprintf(stderr, "%s: cannot map the counters: %s\n", kProg, std::strerror(errno));
        return 1;
    }
    s.page = new (page) SharedPage;
    s.slots = reinterpret_cast<LoopSlot *>(static_cast<char *>(page) + sizeof(SharedPage));
    for (int i = 0; i < s.loops; ++i) new (&s.slots[i]) LoopSlot;

    // SIGINT/SIGTERM (and, for the SYMPED parent, SIGCHLD) are read from a
    // signalfd; children and threads inherit the blocked mask. SIGPIPE is
    // ignored: sendfile to a client that went away is an EPIPE, never a
    // dead server.
    sigset_t set = stop_signals(s.loops > 1 && !s.o.shared);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);

    int rc = s.o.shared ? run_shared(s) : s.loops > 1 ? run_symped(s) : run_sped(s);
    for (int fd : s.listeners) close(fd);
    close(s.root_fd);
    return rc;
}
