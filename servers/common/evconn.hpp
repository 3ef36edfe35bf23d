// One HTTP connection as an event-driven server sees it: a state machine
// driven by readiness, on plain system calls (no weft runtime), so that the
// µserver (SPED, SYMPED, shared-SYMPED, userver-b) and WatPipe's stages
// serve exactly what weft-knot serves, with the same parser, cache,
// responder and limits (http/), and differ only in architecture.
//
// The loop owns the waiting; the connection says what it waits for next:
//
//     Next n = c.receive(site, now);      // the socket is readable
//     while (n == Next::Reply) n = c.send(site, now);
//     ... n == Read: wait for readable, Write: for writable, Close: close it
//
// receive() reads what is there (until EAGAIN; one read on a blocking
// socket, which readiness says will not block), parses, and when a request
// is complete builds its reply (Reply). send() writes the head and body
// (writev for memory, sendfile for a file) until done or EAGAIN (Write);
// when done it returns Read for the next request, or Reply when the next
// pipelined request is already in the buffer, or Close. On a blocking socket
// send() blocks until the reply is out (userver-b). A request body (up to
// Limits::body_bytes) is read and dropped. Errors the parser decides get
// their 4xx/5xx page and Close.
//
// Deadlines are the knot ones: a request head must arrive within
// header_timeout of its first byte (or of the accept), else 408; an idle
// keep-alive connection is closed after keepalive_timeout; a send that
// makes no progress for send_timeout ends the connection. deadline() says
// when; the loop calls expire() once it has passed. DeadlineList keeps a
// loop's connections in deadline order with O(1) updates.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "http/parser.hpp"
#include "http/response.hpp"
#include "stats.hpp"

namespace weft::srv {

// What every connection of a loop shares (read-only while it runs, except
// the counters and the stopping flag).
struct EvSite {
    http::Responder *responder = nullptr;
    http::Limits limits;
    long max_requests = 1000;          // per connection
    uint64_t header_timeout_ns = 10'000'000'000ull;
    uint64_t keepalive_timeout_ns = 15'000'000'000ull;
    uint64_t send_timeout_ns = 60'000'000'000ull;
    const std::atomic<bool> *stopping = nullptr; // replies close the connection once set
    ServerCounters *counters = nullptr;
    bool blocking = false;             // sockets are blocking (userver-b)
    // --stats: GET /.weft/stats answers the counters as JSON (the same
    // page as weft-knot's, without the runtime's part).
    bool stats = false;
    const char *server_name = "weft";  // "server" in the stats page
    const char *mode = "";             // "mode" in the stats page
    uint64_t started_ns = 0;           // CLOCK_MONOTONIC, for "uptime_s"
};

// CLOCK_MONOTONIC in nanoseconds: the clock of every deadline.
uint64_t now_ns();

enum class Next : uint8_t { Read, Write, Reply, Close };

class EvConn {
public:
    // fd: an accepted socket, non-blocking unless site.blocking.
    EvConn(int fd, const EvSite &site, uint64_t now_ns);
    ~EvConn(); // closes fd
    EvConn(const EvConn &) = delete;
    EvConn &operator=(const EvConn &) = delete;

    Next receive(const EvSite &site, uint64_t now_ns);
    Next send(const EvSite &site, uint64_t now_ns);
    // Past deadline(): a partial head gets 408 (one non-blocking try), the
    // rest just close. Always Close.
    Next expire(const EvSite &site);

    int fd() const { return fd_; }
    uint64_t deadline() const { return deadline_; }
    // Which timeout deadline() comes from: kHeader, kKeepAlive or kSend
    // (one DeadlineList each keeps them in order).
    enum Timer : uint8_t { kHeader = 1, kKeepAlive = 2, kSend = 3 };
    Timer timer() const;
    // Not in the middle of a reply: at shutdown it is closed at once (as
    // weft-knot's SHUT_RD ends a connection waiting for, or reading, a
    // request); one that is sending finishes its reply first.
    bool idle() const { return phase_ != Phase::Send; }
    bool writing() const { return phase_ == Phase::Send; }

    // Intrusive links for DeadlineList (and a loop's own lists).
    EvConn *prev = nullptr, *next = nullptr;
    uint8_t list = 0; // which DeadlineList holds it (0: none)

private:
    enum class Phase : uint8_t { Head, Body, Send };
    Next after_parse(const EvSite &site, uint64_t now_ns, http::ParseResult pr);
    Next reply_done(const EvSite &site, uint64_t now_ns);
    void count_reply(const EvSite &site, bool sent) const;
    bool grow();

    int fd_;
    Phase phase_ = Phase::Head;
    bool close_after_ = false;  // the reply being sent is the last
    uint32_t head_sent_ = 0;
    uint64_t body_sent_ = 0;
    uint64_t discard_ = 0;      // request body bytes still to drop
    uint64_t deadline_ = 0;
    long served_ = 0;
    size_t have_ = 0, cap_;
    char *in_;
    std::unique_ptr<char[]> big_;
    http::Parser parser_;
    http::Request req_;
    http::Reply reply_;
    std::string stats_body_; // the body of a stats reply while it is sent
    char small_[2048];
};

// A loop's connections in deadline order. Every connection of one list has
// the same timeout, so appending on each update keeps the list sorted: the
// expired ones are at the front.
class DeadlineList {
public:
    explicit DeadlineList(uint8_t id) : id_(id) {}
    void push(EvConn *c);   // at the back (its deadline is the latest)
    void remove(EvConn *c); // if it is in this list
    EvConn *front() const { return head_; }
    size_t size() const { return size_; }

private:
    uint8_t id_;
    EvConn *head_ = nullptr, *tail_ = nullptr;
    size_t size_ = 0;
};

// The 503 page a loop sends (one non-blocking try) to a connection beyond
// --max-conns before closing it.
struct BusyReply {
    char bytes[1024];
    size_t len = 0;
    explicit BusyReply(const http::Responder &r);
    void refuse(int fd, ServerCounters *c) const; // send, close, count
};

// An accepted socket as EvConn wants it: TCP_NODELAY; O_NONBLOCK, or for
// a blocking one (userver-b) SO_SNDTIMEO = an eighth of send_timeout_ns,
// with which EvConn::send() ends a send that makes no progress for
// send_timeout_ns, as on a non-blocking socket.
void prepare_socket(int fd, bool blocking, uint64_t send_timeout_ns);

// The first line a server prints once it serves, the same for every weft
// server: "PROG: serving ROOT on http://ADDR/ (DETAILS)".
void print_banner(const char *prog, const char *root, const char *addr, const char *details);

} // namespace weft::srv
