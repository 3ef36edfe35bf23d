#include "parser.hpp"

#include <cstring>

namespace weft::http {
namespace {

// RFC 9110 tchar: the characters of a method or a header name.
constexpr bool is_tchar(unsigned char c) {
    if (c >= '0' && c <= '9') return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
    return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

constexpr char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

struct MethodName {
    std::string_view text;
    Method method;
};
constexpr MethodName kMethods[] = {
    {"GET", Method::Get},         {"HEAD", Method::Head},   {"POST", Method::Post},
    {"PUT", Method::Put},         {"DELETE", Method::Delete}, {"OPTIONS", Method::Options},
    {"PATCH", Method::Patch},     {"TRACE", Method::Trace}, {"CONNECT", Method::Connect},
};

Method method_of(std::string_view text) {
    for (const auto &m : kMethods)
        if (m.text == text) return m.method; // methods are case-sensitive (RFC 9110 §9.1)
    return Method::Other;
}

constexpr ParseResult need_more() { return {ParseResult::NeedMore, 0}; }
constexpr ParseResult done() { return {ParseResult::Done, 0}; }
constexpr ParseResult fail(uint16_t status) { return {ParseResult::Error, status}; }

// One line of the head without its line end; 400 on a CR anywhere else.
bool split_line(std::string_view &rest, std::string_view *line) {
    size_t nl = rest.find('\n');
    std::string_view l = rest.substr(0, nl); // the head ends with a line end, so nl is found
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    *line = l;
    return l.find('\r') == std::string_view::npos;
}

// "http://host[:port]/path?q" -> host and "/path?q" ("/" when no path).
bool reduce_absolute_form(std::string_view &target, std::string_view *host) {
    size_t scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos) return false;
    std::string_view scheme = target.substr(0, scheme_end);
    if (!iequals(scheme, "http") && !iequals(scheme, "https")) return false;
    std::string_view rest = target.substr(scheme_end + 3);
    size_t path = rest.find_first_of("/?");
    *host = rest.substr(0, path);
    if (host->empty()) return false;
    target = path == std::string_view::npos ? std::string_view("/") : rest.substr(path);
    return target.front() == '/'; // "http://h?q" has no path: not served
}

} // namespace

std::string_view method_name(Method m) {
    for (const auto &n : kMethods)
        if (n.method == m) return n.text;
    return "OTHER";
}

std::string_view trim_blanks(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

bool parse_decimal(std::string_view s, size_t max_digits, uint64_t *out) {
    if (s.empty() || s.size() > max_digits || max_digits > 19) return false;
    uint64_t n = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    *out = n;
    return true;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

bool has_token(std::string_view value, std::string_view token) {
    while (!value.empty()) {
        size_t comma = value.find(',');
        if (iequals(trim_blanks(value.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

ParseResult Parser::parse(const char *buf, size_t len, Request *req) {
    // RFC 9112 §2.2: ignore empty lines before the request line. They are
    // counted in head_len so the caller consumes them with the request.
    // Limits count them too, so a head is judged the same whether it
    // arrives whole or in pieces.
    size_t start = 0;
    while (start < len && (buf[start] == '\r' || buf[start] == '\n')) ++start;
    if (start == len) return len > limits_.head_bytes ? fail(431) : need_more();

    // Find the blank line that ends the head, resuming where the last call
    // stopped. pos is at a '\n' we have not yet judged, or past all of them.
    size_t pos = scanned_ > start ? scanned_ : start;
    size_t end = 0; // head length including the blank line, 0 = not found
    while (pos < len) {
        const void *nl = std::memchr(buf + pos, '\n', len - pos);
        if (!nl) {
            pos = len;
            break;
        }
        pos = static_cast<const char *>(nl) - buf;
        if (!line_end_) line_end_ = pos; // the request line's end, found once
        if (pos + 1 >= len) break; // the byte after it decides: wait for it
        if (buf[pos + 1] == '\n') {
            end = pos + 2;
            break;
        }
        if (buf[pos + 1] == '\r') {
            if (pos + 2 >= len) break;
            if (buf[pos + 2] == '\n') {
                end = pos + 3;
                break;
            }
        }
        ++pos;
    }
    // Judge the limits on what has arrived, in the same order whether the
    // head is complete or not, so a client can neither make us buffer
    // without bound nor get a different answer by sending in pieces.
    size_t line_len = (line_end_ ? line_end_ : len) - start;
    if (line_len > limits_.request_line + 1) return fail(414); // +1: its CR
    if (!end) {
        scanned_ = pos;
        return len > limits_.head_bytes ? fail(431) : need_more();
    }
    scanned_ = 0;
    line_end_ = 0;
    if (end > limits_.head_bytes) return fail(431);
    ParseResult r = parse_head(buf + start, end - start, req);
    req->head_len = static_cast<uint32_t>(end);
    return r;
}

ParseResult Parser::parse_head(const char *buf, size_t head_len, Request *req) const {
    *req = Request{};
    std::string_view rest(buf, head_len), line;

    // ---- request line: method SP target SP HTTP/x.y ----
    if (!split_line(rest, &line)) return fail(400);
    if (line.size() > limits_.request_line) return fail(414);
    size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos || sp1 == 0) return fail(400);
    size_t sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return fail(400);
    std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                     version = line.substr(sp2 + 1);
    for (unsigned char c : method)
        if (!is_tchar(c)) return fail(400);
    for (unsigned char c : target)
        if (c <= 0x20 || c == 0x7f) return fail(400);
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
        version[5] > '9' || version[7] < '0' || version[7] > '9')
        return fail(400);
    if (version[5] != '1') return fail(505);
    req->method_text = method;
    req->method = method_of(method);
    req->version_minor = static_cast<uint8_t>(version[7] - '0');

    std::string_view absolute_host;
    if (target.front() != '/') {
        if (target == "*" && req->method == Method::Options) {
            // asterisk-form: only OPTIONS, which is refused later (405)
        } else if (!reduce_absolute_form(target, &absolute_host)) {
            return fail(400);
        }
    }
    req->target = target;

    // ---- header fields ----
    bool have_host = false, have_length = false, close_asked = false, keep_alive_asked = false;
    for (;;) {
        if (!split_line(rest, &line)) return fail(400);
        if (line.empty()) break; // the blank line
        if (++req->header_count > limits_.headers) return fail(431);
        if (line.front() == ' ' || line.front() == '\t') return fail(400); // obs-fold
        size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return fail(400);
        std::string_view name = line.substr(0, colon);
        for (unsigned char c : name)
            if (!is_tchar(c)) return fail(400); // includes a blank before the colon
        std::string_view value = trim_blanks(line.substr(colon + 1));
        for (unsigned char c : value)
            if ((c < 0x20 && c != '\t') || c == 0x7f) return fail(400);

        switch (lower(name[0])) {
        case 'h':
            if (iequals(name, "host")) {
                if (have_host) return fail(400); // RFC 9112 §3.2: exactly one
                have_host = true;
                req->host = value;
            }
            break;
        case 'c':
            if (iequals(name, "connection")) {
                // Several lines are one list (RFC 9110 §5.3).
                close_asked |= has_token(value, "close");
                keep_alive_asked |= has_token(value, "keep-alive");
            } else if (iequals(name, "content-length")) {
                uint64_t n = 0;
                if (!parse_decimal(value, 18, &n)) return fail(400); // 18 digits: no overflow
                if (have_length && n != req->body_len) return fail(400);
                have_length = true;
                req->body_len = n;
            }
            break;
        case 't':
            if (iequals(name, "transfer-encoding")) return fail(501);
            break;
        case 'i':
            if (iequals(name, "if-modified-since")) req->if_modified_since = value;
            else if (iequals(name, "if-none-match")) req->if_none_match = value;
            else if (iequals(name, "if-range")) req->if_range = value;
            break;
        case 'r':
            if (iequals(name, "range")) req->range = value;
            else if (iequals(name, "referer")) req->referer = value;
            break;
        case 'u':
            if (iequals(name, "user-agent")) req->user_agent = value;
            break;
        default:
            break;
        }
    }

    if (!absolute_host.empty()) req->host = absolute_host; // RFC 9112 §3.2.2
    else if (req->version_minor >= 1 && !have_host) return fail(400);
    if (req->body_len > limits_.body_bytes) return fail(413);
    req->has_body = req->body_len > 0;
    req->keep_alive = !close_asked && (req->version_minor >= 1 || keep_alive_asked);
    return done();
}

} // namespace weft::http
