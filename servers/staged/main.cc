// weft-staged: options, start-up, the accept threads, and graceful
// shutdown. staged.hpp has the stages; docs/staged.md the whole design.
#include <fcntl.h>
#include <getopt.h>
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

#include "common/cli.hpp"
#include "common/evconn.hpp"
#include "common/weft_accept.hpp"
#include "staged.hpp"

namespace staged {
namespace {

void usage(FILE *out) {
    std::fputs(
        "usage: weft-staged [options]\n"
        "StagedServer's staged web server on weft: serves the static files below --root\n"
        "over HTTP/1.1 until SIGINT or SIGTERM, as six stages (control, network, files,\n"
        "blocks, aggregator, disk) run in cohorts by one runner per vproc.\n"
        "\n"
        "  --listen ADDR:PORT       address to serve on (default 127.0.0.1:8080; port 0 picks\n"
        "                           a free one; [::1]:8080 for IPv6)\n"
        "  --root DIR               document root (default: the current directory)\n"
        "  --vprocs N               kernel threads, each running every stage's cohorts and\n"
        "                           owning a partition of the file and block caches, with an\n"
        "                           accept thread and SO_REUSEPORT socket each (default: the\n"
        "                           usable CPUs, or WEFT_VPROCS)\n"
        "  --cache-mb M             file blocks held in memory, in MiB, over all partitions\n"
        "                           (default 64; files above an eighth of a partition are\n"
        "                           read but not kept)\n"
        "  --fd-cache N             open files kept with their headers (default 4096)\n"
        "  --max-conns N            connections served at once; more get 503 (default 10000)\n"
        "  --max-requests N         requests per connection before it closes (default 1000)\n"
        "  --keepalive-timeout S    idle seconds between requests before closing (default 15)\n"
        "  --header-timeout S       seconds to send a whole request head, else 408 (default 10)\n"
        "  --send-timeout S         seconds a send may make no progress (default 60)\n"
        "  --stats                  serve the counters and the stage profile as JSON at\n"
        "                           /.weft/stats, the profile as a table at /.weft/stages\n"
        "  --profile                print the stage profile after shutdown\n"
        "  --follow-symlinks        serve symlinks that lead outside the root (default: 403)\n"
        "  --no-reuseport           with several vprocs, share one listening socket\n"
        "  --quiet                  no start-up and shutdown lines on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Exit status: 0 after a graceful shutdown, 1 when it cannot start (bind, root),\n"
        "2 for a usage error. Environment: WEFT_IO (uring|epoll|poll) picks the reactor.\n",
        out);
}

bool print_profile = false;

Options parse_options(int argc, char **argv) {
    enum { kVprocs = weft::srv::kOwnOption, kCacheMb, kProfile, kNoReuseport };
    static const struct option own[] = {
        {"vprocs", required_argument, nullptr, kVprocs},
        {"cache-mb", required_argument, nullptr, kCacheMb},
        {"profile", no_argument, nullptr, kProfile},
        {"no-reuseport", no_argument, nullptr, kNoReuseport},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    weft::srv::parse_command_line(kProg, argc, argv, own, &o, [&o](int c, const char *a) {
        switch (c) {
        case kVprocs: o.vprocs = static_cast<int>(weft::srv::parse_long(kProg, "--vprocs", a, 1, 64)); return true;
        case kCacheMb: o.cache_mb = weft::srv::parse_long(kProg, "--cache-mb", a, 0, 1 << 20); return true;
        case kProfile: print_profile = true; return true;
        case kNoReuseport: o.reuseport = false; return true;
        default: return false;
        }
    }, usage);
    return o;
}

Server the_server;
int signal_fd = -1;
weft::srv::AcceptSite accept_site;

// One per vproc: accepted connections become control closures there.
void *acceptor(void *arg) {
    Server &s = the_server;
    const int lfd = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    for (;;) {
        struct sockaddr_storage peer;
        int fd = weft::srv::accept_one(accept_site, lfd, &peer);
        if (fd < 0) break;
        if (s.counters.open_conns.load(std::memory_order_relaxed) >= s.opt.max_conns) {
            weft::srv::refuse(accept_site, fd);
            continue;
        }
        connection_start(s, fd);
    }
    return nullptr;
}

// Waits for SIGINT/SIGTERM, then shuts down: no new connections, every
// reply in flight finished, idle connections closed.
void *signal_watcher(void *) {
    Server &s = the_server;
    weft::srv::wait_stop_signal(kProg, signal_fd, s.opt.quiet, s.counters.open_conns);
    s.stopping.store(true);
    for (int i = 0; i < s.listen_count; ++i) weft_close(s.listen_fds[i]); // wakes the acceptors (EBADF)
    connections_shutdown(s);
    // A connection's last state posts `drained`; polling as well covers one
    // that ended between the store above and this wait.
    while (s.live.load() > 0) weft_sem_timedwait(&s.drained, weft_now_ns() + 100 * 1000 * 1000);
    return nullptr;
}

int run(void *) {
    Server &s = the_server;
    s.started_ns = weft_now_ns();
    weft_sem_init(&s.drained, 0);
    stages_start(s);
    weft::http::ResponderOptions ro;
    ro.server = kProg;
    weft::http::Responder responder(&first_cache(s), ro);
    s.responder = &responder;

    std::string busy;
    weft::srv::init_accept_site(&accept_site, kProg, &s.counters, &s.stopping, responder, &busy);
    weft::srv::accept_reserve_spare();

    weft_thread_t watcher;
    weft_thread_create(&watcher, nullptr, signal_watcher, nullptr);
    const int vprocs = weft_vproc_count();
    std::vector<weft_thread_t> loops =
        weft::srv::start_accept_loops(kProg, vprocs, s.listen_fds, s.listen_count, acceptor, "acceptor");
    if (!s.opt.quiet) {
        std::string details = "mode staged, " + std::to_string(vprocs) + (vprocs == 1 ? " vproc" : " vprocs") + ", io " +
                              weft_io_backend() + ", 6 stages, " + std::to_string(s.opt.cache_mb) + " MiB of blocks";
        weft::srv::print_banner(kProg, s.opt.root.c_str(), s.opt.listen.c_str(), details.c_str());
    }

    for (auto &t : loops) weft_thread_join(t, nullptr);
    weft_thread_join(watcher, nullptr);
    std::string profile;
    stages_stop(s, print_profile && !s.opt.quiet ? &profile : nullptr);
    weft::srv::accept_release_spare();
    if (!s.opt.quiet) {
        if (!profile.empty()) std::fputs(profile.c_str(), stdout);
        std::printf("%s: stopped after %llu connections, %llu requests\n", kProg,
                    static_cast<unsigned long long>(s.counters.accepted.load()),
                    static_cast<unsigned long long>(s.counters.requests.load()));
    }
    return 0;
}

} // namespace

} // namespace staged

int main(int argc, char **argv) {
    using namespace staged;
    Server &s = the_server;
    s.opt = parse_options(argc, argv);

    s.root_fd = open(s.opt.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.root_fd < 0) {
        std::fprintf(stderr, "%s: cannot read the root '%s': %s\n", kProg, s.opt.root.c_str(), std::strerror(errno));
        return 1;
    }

    s.listen_count = weft::srv::listen_sockets(kProg, &s.opt.listen, s.opt.vprocs, s.opt.reuseport, s.listen_fds, 64);
    signal_fd = weft::srv::stop_signal_fd(); // read by a weft thread

    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = s.opt.vprocs;
    int rc = weft_main_config(&cfg, run, nullptr);
    return rc < 0 ? 1 : rc;
}
