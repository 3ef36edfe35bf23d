// libFuzzer target: the HTTP core's request parser and everything a parsed
// request reaches without touching the filesystem.
//
// For each input, under the default limits and under tiny ones (so that
// short inputs reach the 414/431/413 paths too):
//   - parse it whole, then walk the buffer as pipelined requests (head_len,
//     then body_len), checking every request's invariants;
//   - parse it split in two at a position derived from the data, and, when
//     short, one byte at a time: the outcome must agree with the whole parse
//     (see agree() for the one allowed difference);
//   - run clean_path on every target, parse_range / etag_matches /
//     parse_http_date on the header values, content_type on the clean path,
//     and Responder::error on every status returned;
// and the value parsers once more on the raw input.
//
// Every buffer handed to the code under test is an exact-size heap copy, so
// AddressSanitizer reports a read past the end. A broken invariant aborts
// with a message. Deterministic: no clock, no randomness, no files.
//
// Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined) and,
// with fuzz/replay_main.cc, by CMake as the corpus replay in `make test`.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "http/date.hpp"
#include "http/mime.hpp"
#include "http/parser.hpp"
#include "http/path.hpp"
#include "http/response.hpp"

using namespace weft::http;

namespace {

#define FUZZ_CHECK(cond)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            std::fprintf(stderr, "http_parser_fuzz: check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                                    \
        }                                                                                                    \
    } while (0)

// An exact-size heap copy of data[0, n).
class Buffer {
public:
    Buffer(const uint8_t *data, size_t n) : p_(new char[n]), n_(n) {
        if (n) std::memcpy(p_.get(), data, n);
    }
    const char *data() const { return p_.get(); }
    size_t size() const { return n_; }

private:
    std::unique_ptr<char[]> p_;
    size_t n_;
};

Limits tiny_limits() {
    Limits l;
    l.request_line = 40;
    l.head_bytes = 160;
    l.headers = 4;
    l.body_bytes = 64;
    return l;
}

bool is_parser_status(uint16_t s) { return s == 400 || s == 413 || s == 414 || s == 431 || s == 501 || s == 505; }

// Dates a formatted IMF-fixdate can show (years 1970 to 9999).
constexpr time_t kYear10000 = 253402300800;

// ---- what one parse() outcome says, independent of the buffer ----

struct Outcome {
    ParseResult::Kind kind = ParseResult::NeedMore;
    uint16_t status = 0;
    Method method = Method::Other;
    uint8_t version_minor = 0;
    bool keep_alive = false, has_body = false;
    uint64_t body_len = 0;
    uint32_t head_len = 0, header_count = 0;
    std::string method_text, target, host, ims, inm, if_range, range, user_agent, referer;

    bool operator==(const Outcome &) const = default;
};

// A view of the request: inside the head, except the "/" an absolute-form
// target without a path is given.
void check_view(std::string_view v, const char *head, size_t head_len, bool may_be_root = false) {
    if (v.empty()) return;
    if (may_be_root && v == "/" && (v.data() < head || v.data() >= head + head_len)) return;
    FUZZ_CHECK(v.data() >= head && v.data() + v.size() <= head + head_len);
}

// A header value: trimmed, no line end, no control character but tab.
void check_value(std::string_view v) {
    if (v.empty()) return;
    FUZZ_CHECK(v.front() != ' ' && v.front() != '\t' && v.back() != ' ' && v.back() != '\t');
    for (unsigned char c : v) FUZZ_CHECK(c >= 0x20 || c == '\t');
    for (unsigned char c : v) FUZZ_CHECK(c != 0x7f);
}

Outcome capture(ParseResult r, const Request &q, const char *buf, size_t len, const Limits &lim) {
    Outcome o;
    o.kind = r.kind;
    o.status = r.status;
    if (r.kind == ParseResult::Error) FUZZ_CHECK(is_parser_status(r.status));
    if (r.kind != ParseResult::Done) return o;

    // The request's invariants.
    FUZZ_CHECK(q.head_len > 0 && q.head_len <= len);
    FUZZ_CHECK(buf[q.head_len - 1] == '\n');
    FUZZ_CHECK(q.header_count <= lim.headers);
    FUZZ_CHECK(q.body_len <= lim.body_bytes);
    FUZZ_CHECK(q.has_body == (q.body_len > 0));
    FUZZ_CHECK(q.version_minor <= 9);
    FUZZ_CHECK(!q.method_text.empty());
    if (q.method != Method::Other) FUZZ_CHECK(method_name(q.method) == q.method_text);
    else FUZZ_CHECK(method_name(q.method) == "OTHER");
    FUZZ_CHECK(!q.target.empty());
    FUZZ_CHECK(q.target.front() == '/' || (q.target == "*" && q.method == Method::Options));
    for (unsigned char c : q.target) FUZZ_CHECK(c > 0x20 && c != 0x7f);
    if (q.version_minor == 0 && q.keep_alive) FUZZ_CHECK(q.header_count > 0);
    for (std::string_view v : {q.method_text, q.host, q.if_modified_since, q.if_none_match, q.if_range, q.range,
                               q.user_agent, q.referer})
        check_view(v, buf, q.head_len);
    check_view(q.target, buf, q.head_len, /*may_be_root=*/true);
    for (std::string_view v :
         {q.if_modified_since, q.if_none_match, q.if_range, q.range, q.user_agent, q.referer})
        check_value(v);
    for (unsigned char c : q.host) FUZZ_CHECK(c >= 0x20 || c == '\t'); // may be an absolute-form authority

    o.method = q.method;
    o.version_minor = q.version_minor;
    o.keep_alive = q.keep_alive;
    o.has_body = q.has_body;
    o.body_len = q.body_len;
    o.head_len = q.head_len;
    o.header_count = q.header_count;
    o.method_text = q.method_text;
    o.target = q.target;
    o.host = q.host;
    o.ims = q.if_modified_since;
    o.inm = q.if_none_match;
    o.if_range = q.if_range;
    o.range = q.range;
    o.user_agent = q.user_agent;
    o.referer = q.referer;
    return o;
}

// ---- the value parsers ----

void check_date(std::string_view s) {
    time_t t = parse_http_date(s);
    FUZZ_CHECK(t >= -1);
    if (t < 0 || t >= kYear10000) return;
    char text[kHttpDateLen];
    format_http_date(t, text);
    FUZZ_CHECK(parse_http_date(std::string_view(text, kHttpDateLen)) == t);
}

void check_range(std::string_view header) {
    for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{4096}, uint64_t{1} << 40}) {
        uint64_t first = 7, last = 7;
        uint16_t s = parse_range(header, size, &first, &last);
        FUZZ_CHECK(s == 200 || s == 206 || s == 416);
        if (s == 206) FUZZ_CHECK(first <= last && last < size);
    }
}

void check_error_reply(uint16_t status) {
    static const Responder responder(nullptr, ResponderOptions{}); // error() never touches the cache
    for (bool head_only : {false, true}) {
        Reply r;
        responder.error(status, &r, head_only);
        FUZZ_CHECK(r.status == status);
        FUZZ_CHECK(!r.keep_alive);
        FUZZ_CHECK(r.head_len >= 4 && r.head_len < sizeof r.head);
        std::string_view head = r.head_view();
        char line[32];
        int n = std::snprintf(line, sizeof line, "HTTP/1.1 %u ", status);
        FUZZ_CHECK(head.substr(0, static_cast<size_t>(n)) == std::string_view(line, static_cast<size_t>(n)));
        FUZZ_CHECK(head.find("\r\n\r\n") == head.size() - 4);
        FUZZ_CHECK(reason_phrase(status) != "Unknown");
        if (head_only) {
            FUZZ_CHECK(r.body == BodyKind::None && r.length == 0);
        } else {
            FUZZ_CHECK(r.body == BodyKind::Memory && r.mem && r.length > 0);
            unsigned sum = 0; // touch every byte of the body (ASan)
            for (uint64_t i = 0; i < r.length; ++i) sum += static_cast<unsigned char>(r.mem[i]);
            FUZZ_CHECK(sum > 0);
        }
    }
}

void check_clean_path(std::string_view target) {
    static CleanPath path; // 4 KiB; one at a time
    int s = clean_path(target, &path);
    FUZZ_CHECK(s == 0 || s == 400 || s == 414);
    if (s != 0) {
        check_error_reply(static_cast<uint16_t>(s));
        return;
    }
    std::string_view p = path.view();
    FUZZ_CHECK(p.size() < CleanPath::kMax);
    if (p.empty()) {
        FUZZ_CHECK(path.dir_form);
    } else {
        FUZZ_CHECK(p.front() != '/' && p.back() != '/');
        // Every segment is a name: not empty, not ".", not "..", no NUL.
        while (!p.empty()) {
            size_t slash = p.find('/');
            std::string_view seg = p.substr(0, slash);
            FUZZ_CHECK(!seg.empty() && seg != "." && seg != "..");
            // A NUL is refused when encoded; a raw one can come only from a
            // caller other than the parser (which refuses controls in targets).
            if (target.find('\0') == std::string_view::npos) FUZZ_CHECK(seg.find('\0') == std::string_view::npos);
            p.remove_prefix(slash == std::string_view::npos ? p.size() : slash + 1);
        }
    }
    FUZZ_CHECK(!content_type(path.view()).empty());
}

// What a server does with a parsed request short of opening a file.
void exercise_request(const Request &q) {
    check_clean_path(q.target);
    check_range(q.range);
    check_date(q.if_modified_since);
    check_date(q.if_range);
    const std::string_view etag = "\"5f5e1000-1f\"";
    (void)etag_matches(q.if_none_match, etag);
    (void)etag_matches(q.if_none_match, q.if_range);
    (void)etag_matches(q.if_range, etag);
    (void)content_type(q.target);
}

// ---- the three ways to parse ----

Outcome parse_whole(const Limits &lim, const Buffer &b) {
    Parser parser(lim);
    Request req;
    ParseResult r = parser.parse(b.data(), b.size(), &req);
    return capture(r, req, b.data(), b.size(), lim);
}

// The first k bytes (a separate buffer), then all of them. `early` is set
// when the first call already decided.
Outcome parse_split(const Limits &lim, const uint8_t *data, size_t size, size_t k, bool *early) {
    Parser parser(lim);
    Request req;
    Buffer prefix(data, k);
    ParseResult r = parser.parse(prefix.data(), k, &req);
    *early = r.kind != ParseResult::NeedMore;
    if (*early) return capture(r, req, prefix.data(), k, lim);
    Buffer all(data, size);
    r = parser.parse(all.data(), size, &req);
    return capture(r, req, all.data(), size, lim);
}

// One byte more per call until the parser decides.
Outcome parse_bytewise(const Limits &lim, const uint8_t *data, size_t size, bool *early) {
    Parser parser(lim);
    Request req;
    Outcome o;
    *early = false;
    for (size_t n = 1; n <= size; ++n) {
        Buffer prefix(data, n);
        ParseResult r = parser.parse(prefix.data(), n, &req);
        o = capture(r, req, prefix.data(), n, lim);
        if (r.kind != ParseResult::NeedMore) {
            *early = n < size;
            break;
        }
    }
    return o;
}

// A piecewise outcome against the whole one. When the pieces decided on a
// prefix, a Done must be the same request, and an Error must be an Error
// (its status may differ: on a prefix the parser can only judge the limits,
// the whole head may show an earlier fault). Otherwise they are identical.
void agree(const Outcome &whole, const Outcome &piecewise, bool early) {
    if (early && piecewise.kind == ParseResult::Error) {
        FUZZ_CHECK(whole.kind == ParseResult::Error);
        return;
    }
    FUZZ_CHECK(whole == piecewise);
}

// Parse the buffer as a connection would: request after request.
void walk(const Limits &lim, const Buffer &b) {
    Parser parser(lim);
    Request req;
    size_t off = 0;
    for (int i = 0; i < 64 && off <= b.size(); ++i) {
        ParseResult r = parser.parse(b.data() + off, b.size() - off, &req);
        (void)capture(r, req, b.data() + off, b.size() - off, lim);
        if (r.kind == ParseResult::Error) {
            check_error_reply(r.status);
            return;
        }
        if (r.kind == ParseResult::NeedMore) return;
        exercise_request(req);
        off += req.head_len;
        if (req.body_len > b.size() - off) return; // the body has not all arrived
        off += static_cast<size_t>(req.body_len);
    }
}

size_t split_point(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size && i < 16; ++i) h = (h ^ data[size - 1 - i]) * 0x100000001b3ull;
    return static_cast<size_t>(h % (size + 1));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const Limits kLimits[] = {Limits{}, tiny_limits()};
    const Buffer whole_buf(data, size);

    for (const Limits &lim : kLimits) {
        const Outcome whole = parse_whole(lim, whole_buf);

        bool early = false; // (set by the parse before agree() reads it: separate statements)
        const Outcome split = parse_split(lim, data, size, split_point(data, size), &early);
        agree(whole, split, early);
        if (size <= 512) {
            const Outcome bytewise = parse_bytewise(lim, data, size, &early);
            agree(whole, bytewise, early);
        }

        walk(lim, whole_buf);
    }

    // The value parsers straight on the input.
    const std::string_view raw(whole_buf.data(), size);
    check_date(raw);
    check_range(raw);
    check_clean_path(raw);
    const size_t half = size / 2;
    (void)etag_matches(raw.substr(0, half), raw.substr(half));
    (void)has_token(raw.substr(0, half), raw.substr(half));
    (void)iequals(raw.substr(0, half), raw.substr(half));
    (void)content_type(raw);
    return 0;
}
