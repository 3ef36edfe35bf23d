// The counters every weft server keeps and the /.weft/stats page that
// shows them (--stats), one definition for weft-knot, the µserver and
// WatPipe, so that the harness reads every server the same way.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/cache.hpp"
#include "http/parser.hpp"
#include "http/response.hpp"

namespace weft::srv {

// Counters of a server; std::atomic so that several threads, loops, or
// processes over a MAP_SHARED page can add to one set.
struct ServerCounters {
    std::atomic<uint64_t> accepted{0}, requests{0}, bytes_out{0}, rejected_busy{0}, shed{0}, accept_errors{0},
        timeouts{0}, status_2xx{0}, status_3xx{0}, status_4xx{0}, status_5xx{0};
    std::atomic<long> open_conns{0};
};

// A reply with this status went out (or failed: sent = false); bytes are
// counted only when sent.
void count_reply(ServerCounters &c, unsigned status, uint64_t bytes, bool sent);

// Is the request target the stats page ("/.weft/stats", any query)?
bool is_stats_target(std::string_view target);

// The page's JSON: the counters and the file cache's, plus `extra` (more
// members, each starting with ", ": a server's own part, such as the
// runtime's counters).
std::string stats_json(const char *server, const char *mode, double uptime_s, const ServerCounters &c,
                       const http::FileCache::Counters &cache, std::string_view extra = {});

// The reply carrying `*body` (JSON unless `type` says otherwise, kept alive
// by the caller while it is sent): `status`, no-store; HEAD gets the head
// alone.
void stats_reply(const char *server, const http::Request &req, bool keep_alive, const std::string *body,
                 http::Reply *out, unsigned status = 200, const char *type = "application/json");

} // namespace weft::srv
