// What the servers built on the weft runtime (weft-knot, weft-staged)
// share beyond servers/common: accepting under load and the runtime's part
// of the stats page. Unlike the rest of servers/common it needs the runtime
// (it calls weft_* and runs on weft threads).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "http/response.hpp"
#include "stats.hpp"
#include "weft/weft.h"

namespace weft::srv {

// One accept loop's world: its listening socket, and what a refusal sends.
struct AcceptSite {
    const char *prog = "weft";              // for messages on stderr
    ServerCounters *counters = nullptr;
    const std::atomic<bool> *stopping = nullptr;
    const char *busy = nullptr;             // the whole 503 response
    size_t busy_len = 0;
};

// Reserve the spare descriptor that lets a full descriptor table still
// answer 503 (once, before the accept loops start); release it at the end.
void accept_reserve_spare();
void accept_release_spare();

// The next connection on lfd, a listening socket made O_NONBLOCK (listen_on
// with SOCK_NONBLOCK): a socket with TCP_NODELAY, counted in
// accepted), or -1 when the loop should end: the server is stopping or the
// socket is gone. EMFILE/ENFILE: one waiting client gets 503 through the
// spare descriptor and the loop backs off 10 ms, so the connections being
// served can finish and free theirs; other errors are counted and skipped.
int accept_one(const AcceptSite &site, int lfd, struct sockaddr_storage *peer);

// 503 (one non-blocking send) and close, never waiting on this client.
void refuse(const AcceptSite &site, int fd);

// The runtime's members of a stats page: ", \"vprocs\": N, \"runtime\": {...}",
// and under WEFT_POLICY=tap ", \"tap\": {...}" (the calendars, docs/tap.md).
std::string runtime_stats_json();

// ---- start-up, the same in every weft server ----

// The listening sockets for `vprocs` accept loops (0: weft_default_vprocs(),
// the number weft_main starts for a config with vprocs 0): one per vproc with
// SO_REUSEPORT when there are several and reuseport allows, else one; all
// O_NONBLOCK (accept_one wants that). *listen becomes the address bound
// (the port the kernel chose for port 0). Exits, as listen_on does, when it
// cannot listen. Returns how many went into fds (at most max).
int listen_sockets(const char *prog, std::string *listen, int vprocs, bool reuseport, int *fds, int max);

// SIGINT and SIGTERM blocked (in every thread started from now on: the
// runtime's kernel threads inherit the mask) and readable from the
// returned signalfd; SIGPIPE ignored (a client that goes away is an EPIPE).
int stop_signal_fd();

// Park until SIGINT or SIGTERM comes on signal_fd (from stop_signal_fd);
// then, unless quiet, "PROG: Terminated: shutting down (N connections
// open)" on stdout.
void wait_stop_signal(const char *prog, int signal_fd, bool quiet, const std::atomic<long> &open_conns);

// *site for a server: 503s are `responder`'s page, kept in *busy (which
// must outlive the accept loops).
void init_accept_site(AcceptSite *site, const char *prog, ServerCounters *counters,
                      const std::atomic<bool> *stopping, const http::Responder &responder, std::string *busy);

// n accept loops, loop i a weft thread on vproc i % vprocs running
// fn(fds[i % nfds]); the threads that started (a failure is said on stderr).
std::vector<weft_thread_t> start_accept_loops(const char *prog, int n, const int *fds, int nfds,
                                              void *(*fn)(void *), const char *name);

} // namespace weft::srv
