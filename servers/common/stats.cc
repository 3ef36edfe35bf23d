#include "stats.hpp"

#include <algorithm>
#include <cstdio>

namespace weft::srv {

void count_reply(ServerCounters &c, unsigned status, uint64_t bytes, bool sent) {
    auto &slot = status < 300 ? c.status_2xx : status < 400 ? c.status_3xx : status < 500 ? c.status_4xx : c.status_5xx;
    slot.fetch_add(1, std::memory_order_relaxed);
    if (sent) c.bytes_out.fetch_add(bytes, std::memory_order_relaxed);
}

bool is_stats_target(std::string_view t) { return t.substr(0, t.find('?')) == "/.weft/stats"; }

std::string stats_json(const char *server, const char *mode, double uptime_s, const ServerCounters &c,
                       const http::FileCache::Counters &cc, std::string_view extra) {
    auto r = [](const std::atomic<uint64_t> &a) { return static_cast<unsigned long long>(a.load()); };
    auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    char buf[1536];
    int n = snprintf(
        buf, sizeof buf,
        "{\"server\": \"%s\", \"mode\": \"%s\", \"uptime_s\": %.1f,\n"
        " \"connections\": {\"open\": %ld, \"accepted\": %llu, \"rejected_busy\": %llu, \"shed\": %llu, \"accept_errors\": %llu},\n"
        " \"requests\": %llu, \"bytes_out\": %llu, \"timeouts\": %llu,\n"
        " \"status\": {\"2xx\": %llu, \"3xx\": %llu, \"4xx\": %llu, \"5xx\": %llu},\n"
        " \"file_cache\": {\"entries\": %llu, \"hits\": %llu, \"misses\": %llu, \"revalidations\": %llu,"
        " \"evictions\": %llu, \"content_bytes\": %llu}",
        server, mode, uptime_s, c.open_conns.load(), r(c.accepted), r(c.rejected_busy), r(c.shed), r(c.accept_errors),
        r(c.requests), r(c.bytes_out), r(c.timeouts), r(c.status_2xx), r(c.status_3xx), r(c.status_4xx),
        r(c.status_5xx), u(cc.entries), u(cc.hits), u(cc.misses), u(cc.revalidations), u(cc.evictions),
        u(cc.content_bytes));
    std::string out(buf, static_cast<size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
    out += extra;
    out += "}\n";
    return out;
}

void stats_reply(const char *server, const http::Request &req, bool keep_alive, const std::string *body,
                 http::Reply *out, unsigned status, const char *type) {
    out->clear();
    out->status = status;
    out->keep_alive = keep_alive;
    out->body = req.method == http::Method::Head ? http::BodyKind::None : http::BodyKind::Memory;
    out->mem = body->data();
    out->length = out->body == http::BodyKind::Memory ? body->size() : 0;
    int n = snprintf(out->head, sizeof out->head,
                     "HTTP/1.1 %u %.*s\r\nServer: %s\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: %s\r\n\r\n",
                     status, static_cast<int>(http::reason_phrase(static_cast<uint16_t>(status)).size()),
                     http::reason_phrase(static_cast<uint16_t>(status)).data(), server, type, body->size(), keep_alive ? "keep-alive" : "close");
    out->head_len = static_cast<uint32_t>(n);
}

} // namespace weft::srv
