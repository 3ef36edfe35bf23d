// From a parsed request to a reply: the static-file semantics every weft
// server shares. The responder decides the status, writes the whole
// response head into Reply::head and says where the body comes from (none,
// memory, or a range of an open file); the server moves the bytes in its
// own style (blocking weft calls, an event loop, a pipeline stage).
//
// Semantics: GET and HEAD; 405 (with Allow) for the other methods HTTP
// defines, 501 for unknown ones; 200 with Content-Type, Content-Length,
// Last-Modified, ETag, Accept-Ranges, Date; If-None-Match (which wins) and
// If-Modified-Since -> 304; one byte range -> 206 with Content-Range, an
// unsatisfiable one -> 416, several ranges or a stale If-Range -> the whole
// file; a directory is served by its index.html, named without its slash
// it is redirected (301); keep-alive as the request asks, unless the
// server says otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cache.hpp"
#include "parser.hpp"

namespace weft::http {

enum class BodyKind : uint8_t { None, Memory, File };

struct Reply {
    uint16_t status = 0;
    bool keep_alive = false;   // the connection stays open after this reply
    BodyKind body = BodyKind::None;
    const char *mem = nullptr; // BodyKind::Memory: the bytes to send
    uint64_t offset = 0;       // BodyKind::File: where in file->fd
    uint64_t length = 0;       // bytes of body (Memory or File)
    FileRef file;              // keeps the descriptor (and content) alive
    uint32_t head_len = 0;
    char head[1024];           // the response head, blank line included

    std::string_view head_view() const { return {head, head_len}; }
    void clear();
};

struct ResponderOptions {
    std::string server = "weft"; // Server header (at most 64 bytes are used)
    bool use_content = false;    // send cached content from memory (knot-c)
};

class Responder {
public:
    Responder(FileCache *cache, ResponderOptions options);

    // The reply to `req`. allow_keep_alive = false closes the connection
    // after it whatever the client asked (request cap, shutdown).
    void respond(const Request &req, bool allow_keep_alive, Reply *out);

    // respond() in two steps, for a server that looks the file up itself
    // (weft-staged's partitioned cache stage): prepare() answers what needs
    // no file (a method other than GET/HEAD, a malformed target) and
    // returns false, or sets *path and returns true; respond_found() then
    // answers from the cache's Lookup for that path, on any thread.
    bool prepare(const Request &req, bool allow_keep_alive, CleanPath *path, Reply *out) const;
    void respond_found(const Request &req, bool allow_keep_alive, Lookup found, Reply *out) const;

    // A reply the server decided without a request (parser errors, 408,
    // 503 past the connection limit): an HTML body, and the connection
    // closes. head_only: answer a HEAD request without the body.
    void error(uint16_t status, Reply *out, bool head_only = false) const;

    FileCache *cache() const { return cache_; }

private:
    void redirect_to_dir(const Request &req, bool keep_alive, Reply *out) const;
    void not_modified(const FileEntry &e, bool keep_alive, Reply *out) const;
    void error_page(uint16_t status, bool keep_alive, bool head_only, Reply *out,
                    std::string_view extra = {}) const;

    FileCache *cache_;
    ResponderOptions opt_;
};

std::string_view reason_phrase(uint16_t status);

// Parse "bytes=first-last" against a file of `size` bytes. Returns 206 and
// sets [*first, *last] when satisfiable, 416 when not, 200 when the header
// is to be ignored (malformed, several ranges, not bytes).
uint16_t parse_range(std::string_view range, uint64_t size, uint64_t *first, uint64_t *last);

// If-None-Match: does `list` ("*", or comma-separated entity tags, weak or
// strong) match `etag` by the weak comparison of RFC 9110 §8.8.3.2?
bool etag_matches(std::string_view list, std::string_view etag);

} // namespace weft::http
