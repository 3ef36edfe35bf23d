// weft-knot: Capriccio's Knot web server on weft — one weft thread per
// connection, written in plain blocking style, serving static files through
// the shared HTTP core (http/).
//
// Modes (how a response body leaves, EuroSys'07 §4.3):
//   c      knot-c: bodies from an application-level content cache, sent
//          with the head in one writev; files too big for it are read and
//          written in chunks
//   nb     knot-nb: non-blocking sendfile (weft parks on writability, disk
//          misses go to the offload pool)
//   b      knot-b: blocking sendfile, the whole transfer in an offload
//          worker (the study's best Knot)
//   uring  io_uring splice file -> pipe -> socket
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/cli.hpp"
#include "common/stats.hpp"
#include "http/cache.hpp"
#include "http/parser.hpp"
#include "http/response.hpp"
#include "weft/weft.h"

namespace knot {

enum class Mode { C, NB, B, Uring };

// A connection's input buffer: a whole request head (Limits::head_bytes)
// plus the start of the next pipelined request.
constexpr size_t kInBuf = 16384 + 2048;
constexpr size_t kInSmall = 2048; // on the stack; kInBuf on the heap when a head needs it

// The flags every weft server has (listen, root, limits, timeouts, stats,
// quiet: common/cli.hpp), and knot's own.
struct Options : weft::srv::CommonOptions {
    int threads = 0;              // pre-forked accept loops; 0 = a thread per connection
    Mode mode = Mode::NB;
    int workers = 0;              // offload pool (0: the runtime's default)
    long cache_mb = 64;           // knot-c content cache
    int vprocs = 0;               // 0: weft_default_vprocs()
    std::string access_log;       // empty: none
    bool reuseport = true;
    bool kernel_door = false;     // --door kernel: weft_door_listen, else weft_admit_new after accept
};

const char *mode_name(Mode m);

class AccessLog;

// Everything a connection thread needs; one per server, shared.
struct Server {
    Options opt;
    int root_fd = -1;
    int listen_fds[64] = {};     // one per vproc with SO_REUSEPORT, else one shared
    int listen_count = 0;
    weft::http::FileCache *cache = nullptr;
    weft::http::Responder *responder = nullptr;
    weft::http::Limits limits;
    AccessLog *log = nullptr;
    weft::srv::ServerCounters counters; // read by the stats page
    std::atomic<bool> stopping{false};
    uint64_t started_ns = 0;
};

// A connection's whole life on the calling weft thread: requests until the
// client closes, a timeout, an error, or shutdown. Closes fd.
void serve_connection(Server &s, int fd, const struct sockaddr_storage &peer);

// Registry of open connections, so that shutdown can end the idle ones.
// A node lives on its connection thread's stack.
struct ConnNode {
    int fd = -1;
    ConnNode *prev = nullptr, *next = nullptr;
};
void conn_register(Server &s, ConnNode *c);
void conn_unregister(Server &s, ConnNode *c);
void conn_shutdown_all(Server &s);
void conn_wait_all(Server &s); // until every connection thread has ended

} // namespace knot
