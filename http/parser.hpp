// The HTTP/1.x request parser every weft server shares.
//
// Model. A connection owns one input buffer. Bytes arrive in it in any
// pieces; after each arrival the server calls Parser::parse(buf, len), which
// either says "need more", or returns one complete request head whose
// fields are views into the buffer, or returns the 4xx/5xx status the bytes
// deserve. Nothing is allocated per request and no byte is scanned twice:
// the parser remembers how far it looked for the end of the head, so a head
// that arrives one byte at a time costs O(length), not O(length^2).
//
// After a request the server consumes Request::head_len bytes (plus the body,
// which the parser measured but did not wait for: see body_len) and the next
// pipelined request, if any, starts at the front of what is left.
//
// What it accepts: RFC 9112 request lines in origin-form ("/path?q") or
// absolute-form ("http://host/path"); CRLF or bare LF line ends; header
// names are tokens, values lose surrounding blanks; obsolete line folding
// is refused (400), as RFC 9112 §5.2 allows. It extracts the headers the
// static-file semantics need and counts the rest against the limits.
//
// Errors it decides (the caller sends them and closes):
//   400 malformed line, header, or Content-Length; HTTP/1.1 without Host;
//       two different Content-Lengths; bare CR
//   414 request line longer than Limits::request_line
//   431 more than Limits::headers header lines, or a head longer than
//       Limits::head_bytes
//   413 a body longer than Limits::body_bytes (Content-Length)
//   501 Transfer-Encoding (no request body is chunked here)
//   505 a version other than HTTP/1.x
// Methods a static server does not serve are returned as requests: the
// responder answers 405 to the ones HTTP defines (POST, PUT, ...) and 501
// to any other token (Method::Other).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft::http {

struct Limits {
    uint32_t request_line = 8192;    // bytes, excluding the line end (414 beyond)
    uint32_t head_bytes = 16384;     // whole head, request line to blank line (431 beyond)
    uint32_t headers = 100;          // header lines (431 beyond)
    uint64_t body_bytes = 1u << 20;  // request body a server will read and discard (413 beyond)
};

enum class Method : uint8_t { Get, Head, Post, Put, Delete, Options, Patch, Trace, Connect, Other };

std::string_view method_name(Method m);

struct Request {
    Method method = Method::Other;
    uint8_t version_minor = 1;       // HTTP/1.<minor>; 1.2 and later are treated as 1.1
    bool keep_alive = true;          // after Connection tokens and the version default
    bool has_body = false;           // Content-Length > 0
    std::string_view method_text;    // as sent
    std::string_view target;         // the path and query ("/a%20b?x"), absolute-form reduced to it
    std::string_view host;           // Host header (or the authority of an absolute-form target)
    std::string_view if_modified_since;
    std::string_view if_none_match;
    std::string_view if_range;
    std::string_view range;
    std::string_view user_agent;     // for access logs
    std::string_view referer;
    uint64_t body_len = 0;           // Content-Length (bytes after the head to skip)
    uint32_t head_len = 0;           // bytes of the head, blank line included
    uint32_t header_count = 0;
};

// Outcome of one parse() call.
struct ParseResult {
    enum Kind : uint8_t { NeedMore, Done, Error } kind;
    uint16_t status; // for Error: the HTTP status to answer with
};

class Parser {
public:
    explicit Parser(const Limits &limits = Limits{}) : limits_(limits) {}

    // How far a partial head has been searched. A caller that keeps
    // nothing but this across its waits (weft-vtserver's connections)
    // makes a parser for each parse() call and hands the progress on.
    struct Progress {
        uint32_t scanned = 0, line_end = 0;
    };
    Parser(const Limits &limits, Progress p) : limits_(limits), scanned_(p.scanned), line_end_(p.line_end) {}
    Progress progress() const { return {static_cast<uint32_t>(scanned_), static_cast<uint32_t>(line_end_)}; }

    // Look at buf[0, len): the buffer's whole unconsumed content, starting
    // with the request. Call again with the same start and a longer len as
    // bytes arrive. On Done, *req describes the request and the parser is
    // ready for the next one (call reset() only to abandon a partial one).
    ParseResult parse(const char *buf, size_t len, Request *req);

    // Forget a partial head (the caller dropped the bytes).
    void reset() { scanned_ = line_end_ = 0; }

    const Limits &limits() const { return limits_; }

private:
    ParseResult parse_head(const char *buf, size_t head_len, Request *req) const;

    Limits limits_;
    size_t scanned_ = 0;  // bytes already searched for the end of the head
    size_t line_end_ = 0; // where the request line's '\n' is, once seen (0: not yet)
};

// Without leading and trailing blanks (spaces and tabs: RFC 9110 OWS).
std::string_view trim_blanks(std::string_view v);
// 1 to max_digits (at most 19: no overflow) decimal digits and nothing else.
bool parse_decimal(std::string_view s, size_t max_digits, uint64_t *out);
// Case-insensitive ASCII comparison (header names, tokens).
bool iequals(std::string_view a, std::string_view b);
// True if the comma-separated list `value` contains `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token);

} // namespace weft::http
