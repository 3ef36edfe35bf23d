#include "response.hpp"

#include <cstdio>
#include <cstring>
#include <iterator>

#include "date.hpp"
#include "path.hpp"

namespace weft::http {
namespace {

// Appends to a Reply's head; what does not fit is dropped and noted, and
// callers keep every variable part short enough that it never happens.
class Head {
public:
    explicit Head(Reply *r) : r_(r) { r_->head_len = 0; }
    Head &operator<<(std::string_view s) {
        size_t room = sizeof r_->head - r_->head_len;
        size_t n = s.size() < room ? s.size() : room;
        if (n) std::memcpy(r_->head + r_->head_len, s.data(), n); // (an empty view may have no data)
        r_->head_len += static_cast<uint32_t>(n);
        return *this;
    }
    Head &operator<<(uint64_t v) {
        char buf[24];
        int n = snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
        return *this << std::string_view(buf, static_cast<size_t>(n));
    }
    // Date, Connection and the blank line: the end of every head.
    void finish(bool keep_alive) {
        *this << "Date: " << http_date_now() << "\r\nConnection: " << (keep_alive ? "keep-alive" : "close")
              << "\r\n\r\n";
    }

private:
    Reply *r_;
};

struct Page {
    uint16_t status;
    std::string_view reason;
};
constexpr Page kReasons[] = {
    {200, "OK"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {304, "Not Modified"},
    {400, "Bad Request"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {416, "Range Not Satisfiable"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {503, "Service Unavailable"},
    {505, "HTTP Version Not Supported"},
};

std::string_view opaque_tag(std::string_view t) { // drop the weak prefix
    if (t.size() >= 2 && t[0] == 'W' && t[1] == '/') t.remove_prefix(2);
    return t;
}

// The body of an error reply: one fixed page per status, built once and
// never written again (a reply may still be sending it while another thread
// builds the next).
std::string_view error_body(uint16_t status) {
    struct Pages {
        std::string text[std::size(kReasons)];
        Pages() {
            for (size_t i = 0; i < std::size(kReasons); ++i) {
                char buf[256];
                const Page &p = kReasons[i];
                int n = snprintf(buf, sizeof buf,
                                 "<html><head><title>%u %.*s</title></head><body><h1>%u %.*s</h1></body></html>\n",
                                 p.status, static_cast<int>(p.reason.size()), p.reason.data(), p.status,
                                 static_cast<int>(p.reason.size()), p.reason.data());
                text[i].assign(buf, static_cast<size_t>(n));
            }
        }
    };
    static const Pages pages;
    for (size_t i = 0; i < std::size(kReasons); ++i)
        if (kReasons[i].status == status) return pages.text[i];
    return pages.text[std::size(kReasons) - 1]; // never: every status used is in the table
}

} // namespace

void Reply::clear() {
    status = 0;
    keep_alive = false;
    body = BodyKind::None;
    mem = nullptr;
    offset = length = 0;
    file.reset();
    head_len = 0;
}

std::string_view reason_phrase(uint16_t status) {
    for (const auto &p : kReasons)
        if (p.status == status) return p.reason;
    return "Unknown";
}

uint16_t parse_range(std::string_view range, uint64_t size, uint64_t *first, uint64_t *last) {
    range = trim_blanks(range);
    if (range.size() < 6 || range.substr(0, 6) != "bytes=") return 200;
    std::string_view spec = trim_blanks(range.substr(6));
    if (spec.find(',') != std::string_view::npos) return 200; // several ranges: send it all
    size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return 200;
    std::string_view a = trim_blanks(spec.substr(0, dash)), b = trim_blanks(spec.substr(dash + 1));
    uint64_t x = 0, y = 0;
    if (a.empty()) { // suffix: the last y bytes
        if (!parse_decimal(b, 19, &y)) return 200;
        if (y == 0 || size == 0) return 416;
        *first = y >= size ? 0 : size - y;
        *last = size - 1;
        return 206;
    }
    if (!parse_decimal(a, 19, &x)) return 200;
    if (b.empty()) {
        y = UINT64_MAX;
    } else if (!parse_decimal(b, 19, &y) || y < x) {
        return 200; // last < first: syntactically invalid, so ignored (RFC 9110 §14.1.1)
    }
    if (x >= size) return 416;
    *first = x;
    *last = y >= size ? size - 1 : y;
    return 206;
}

bool etag_matches(std::string_view list, std::string_view etag) {
    list = trim_blanks(list);
    if (list == "*") return true;
    std::string_view want = opaque_tag(etag);
    while (!list.empty()) {
        size_t comma = list.find(',');
        if (opaque_tag(trim_blanks(list.substr(0, comma))) == want) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

Responder::Responder(FileCache *cache, ResponderOptions options) : cache_(cache), opt_(std::move(options)) {
    if (opt_.server.size() > 64) opt_.server.resize(64);
}

void Responder::error_page(uint16_t status, bool keep_alive, bool head_only, Reply *out,
                           std::string_view extra) const {
    std::string_view reason = reason_phrase(status);
    std::string_view page = error_body(status);
    const int n = static_cast<int>(page.size());
    out->status = status;
    out->keep_alive = keep_alive;
    out->file.reset();
    out->body = head_only ? BodyKind::None : BodyKind::Memory;
    out->mem = page.data();
    out->length = head_only ? 0 : page.size();
    out->offset = 0;
    Head h(out);
    h << "HTTP/1.1 " << static_cast<uint64_t>(status) << " " << reason << "\r\nServer: " << opt_.server
      << "\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: " << static_cast<uint64_t>(n) << "\r\n"
      << extra;
    h.finish(keep_alive);
}

void Responder::error(uint16_t status, Reply *out, bool head_only) const {
    std::string_view extra;
    if (status == 405) extra = "Allow: GET, HEAD\r\n";
    if (status == 503) extra = "Retry-After: 1\r\n";
    error_page(status, false, head_only, out, extra);
}

void Responder::redirect_to_dir(const Request &req, bool keep_alive, Reply *out) const {
    std::string_view t = req.target;
    t = t.substr(0, t.find('#')); // a fragment is the client's, never part of a Location we build
    size_t q = t.find('?');
    std::string_view path = t.substr(0, q), query = q == std::string_view::npos ? "" : t.substr(q);
    if (path.size() + query.size() > 700) { // keep the head within Reply::head
        error_page(414, false, req.method == Method::Head, out);
        return;
    }
    char loc[720];
    int n = snprintf(loc, sizeof loc, "Location: %.*s/%.*s\r\n", static_cast<int>(path.size()), path.data(),
                     static_cast<int>(query.size()), query.data());
    error_page(301, keep_alive, req.method == Method::Head, out, std::string_view(loc, static_cast<size_t>(n)));
}

void Responder::not_modified(const FileEntry &e, bool keep_alive, Reply *out) const {
    out->status = 304;
    out->keep_alive = keep_alive;
    out->body = BodyKind::None;
    out->length = 0;
    Head h(out);
    h << "HTTP/1.1 304 Not Modified\r\nServer: " << opt_.server << "\r\nLast-Modified: " << e.last_modified
      << "\r\nETag: " << e.etag << "\r\n";
    h.finish(keep_alive);
}

void Responder::respond(const Request &req, bool allow_keep_alive, Reply *out) {
    // Per kernel thread, not on the stack (a server thread's touched stack
    // pages stay resident while it idles): it is used only until find()
    // returns, and nothing before that parks.
    thread_local CleanPath path;
    if (!prepare(req, allow_keep_alive, &path, out)) return;
    respond_found(req, allow_keep_alive, cache_->find(path), out);
}

bool Responder::prepare(const Request &req, bool allow_keep_alive, CleanPath *path, Reply *out) const {
    out->clear();
    const bool keep_alive = allow_keep_alive && req.keep_alive;
    if (req.method != Method::Get && req.method != Method::Head) {
        uint16_t status = req.method == Method::Other ? 501 : 405;
        error_page(status, keep_alive, false, out, status == 405 ? "Allow: GET, HEAD\r\n" : "");
        return false;
    }
    if (int status = clean_path(req.target, path)) {
        error_page(static_cast<uint16_t>(status), false, req.method == Method::Head, out); // malformed: close
        return false;
    }
    return true;
}

void Responder::respond_found(const Request &req, bool allow_keep_alive, Lookup found, Reply *out) const {
    out->clear();
    const bool keep_alive = allow_keep_alive && req.keep_alive;
    const bool head_only = req.method == Method::Head;
    if (found.status == 301) return redirect_to_dir(req, keep_alive, out);
    if (found.status != 200) {
        error_page(found.status, keep_alive && found.status < 500, head_only, out,
                   found.status == 503 ? "Retry-After: 1\r\n" : "");
        return;
    }
    FileEntry &e = *found.file.get();

    // Conditionals (RFC 9110 §13.2.2): If-None-Match, else If-Modified-Since.
    if (!req.if_none_match.empty()) {
        if (etag_matches(req.if_none_match, e.etag)) return not_modified(e, keep_alive, out);
    } else if (!req.if_modified_since.empty()) {
        time_t since = parse_http_date(req.if_modified_since);
        if (since >= 0 && e.mtime_ns / 1000000000 <= since) return not_modified(e, keep_alive, out);
    }

    uint64_t first = 0, last = e.size ? e.size - 1 : 0;
    uint16_t status = 200;
    if (!req.range.empty() && (req.if_range.empty() || req.if_range == e.etag || req.if_range == e.last_modified))
        status = parse_range(req.range, e.size, &first, &last);
    if (status == 416) {
        char cr[64];
        int n = snprintf(cr, sizeof cr, "Content-Range: bytes */%llu\r\n", static_cast<unsigned long long>(e.size));
        error_page(416, keep_alive, head_only, out, std::string_view(cr, static_cast<size_t>(n)));
        return;
    }

    out->status = status;
    out->keep_alive = keep_alive;
    Head h(out);
    if (status == 200) {
        h << e.head_200;
        out->offset = 0;
        out->length = e.size;
    } else {
        out->offset = first;
        out->length = last - first + 1;
        h << "HTTP/1.1 206 Partial Content\r\nServer: " << opt_.server << "\r\nContent-Type: " << e.content_type
          << "\r\nContent-Length: " << out->length << "\r\nContent-Range: bytes " << first << "-" << last << "/"
          << e.size << "\r\nLast-Modified: " << e.last_modified << "\r\nETag: " << e.etag
          << "\r\nAccept-Ranges: bytes\r\n";
    }
    h.finish(keep_alive);
    if (head_only || out->length == 0) {
        out->body = BodyKind::None;
        out->length = 0;
    } else if (const char *bytes = opt_.use_content ? cache_->content(&e) : nullptr) {
        out->body = BodyKind::Memory;
        out->mem = bytes + out->offset;
    } else {
        out->body = BodyKind::File;
    }
    out->file = std::move(found.file);
}

} // namespace weft::http
