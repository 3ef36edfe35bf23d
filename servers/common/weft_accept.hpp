// What the servers built on the weft runtime (weft-knot, weft-staged)
// share beyond servers/common: accepting under load and the runtime's part
// of the stats page. Unlike the rest of servers/common it needs the runtime
// (it calls weft_* and runs on weft threads).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <string>

#include "stats.hpp"

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

// The runtime's members of a stats page: ", \"vprocs\": N, \"runtime\": {...}".
std::string runtime_stats_json();

} // namespace weft::srv
