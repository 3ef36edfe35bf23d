// weft-vtserver: the web server of Virtual Threads (virtual-threads.txt
// §3) on weft's virtual threads (include/weft/vt.hpp): every connection is
// a virtual thread written in plain threaded style — read a request, answer
// it, repeat — whose blocking calls are co_awaits, so an idle connection
// holds a coroutine frame instead of a stack. It serves what every weft
// server serves, through the shared HTTP core (http/).
//
// The two models mix: the accept loops are weft threads (one per vproc,
// with weft-knot's EMFILE shedding, servers/common/weft_accept), and each
// accepted connection is spawned as a virtual thread on that vproc's event
// loop. The signal watcher is a weft thread too.
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <new>
#include <type_traits>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/evconn.hpp"
#include "common/stats.hpp"
#include "common/weft_accept.hpp"
#include "http/cache.hpp"
#include "http/parser.hpp"
#include "http/response.hpp"
#include "weft/vt.hpp"

namespace {

namespace vt = weft::vt;
using weft::http::BodyKind;
using weft::http::ParseResult;

constexpr const char *kProg = "weft-vtserver";
constexpr size_t kInSmall = 2048;
constexpr size_t kInBuf = 16384 + 2048; // a whole head (Limits::head_bytes) and some
static_assert(weft::http::Limits{}.head_bytes < kInBuf, "a connection's buffer holds a whole head");

struct Options : weft::srv::CommonOptions {
    int vprocs = 0; // 0: weft_default_vprocs()
    bool reuseport = true;
};

void usage(FILE *out) {
    std::fputs(
        "usage: weft-vtserver [options]\n"
        "The Virtual Threads web server on weft: serves the static files below --root over\n"
        "HTTP/1.1 until SIGINT or SIGTERM, each connection a virtual thread (a C++20\n"
        "coroutine) on its vproc's event loop.\n"
        "\n"
        "  --listen ADDR:PORT       address to serve on (default 127.0.0.1:8080; port 0 picks\n"
        "                           a free one; [::1]:8080 for IPv6)\n"
        "  --root DIR               document root (default: the current directory)\n"
        "  --vprocs N               kernel threads, each with an event loop, an accept thread\n"
        "                           and an SO_REUSEPORT socket (default: the usable CPUs, or\n"
        "                           WEFT_VPROCS)\n"
        "  --fd-cache N             open files kept with their headers (default 4096)\n"
        "  --max-conns N            connections served at once; more get 503 (default 10000)\n"
        "  --max-requests N         requests per connection before it closes (default 1000)\n"
        "  --keepalive-timeout S    idle seconds between requests before closing (default 15)\n"
        "  --header-timeout S       seconds to send a whole request head, else 408 (default 10)\n"
        "  --send-timeout S         seconds a send may make no progress (default 60)\n"
        "  --stats                  serve the counters (and the virtual threads') as JSON at\n"
        "                           /.weft/stats\n"
        "  --follow-symlinks        serve symlinks that lead outside the root (default: 403)\n"
        "  --no-reuseport           with several vprocs, share one listening socket\n"
        "  --quiet                  no start-up and shutdown lines on stdout\n"
        "  --help                   this text\n"
        "\n"
        "Exit status: 0 after a graceful shutdown, 1 when it cannot start (bind, root),\n"
        "2 for a usage error. Environment: WEFT_IO (uring|epoll|poll) picks the reactor.\n",
        out);
}

struct Server {
    Options opt;
    int root_fd = -1;
    int listen_fds[64] = {};
    int listen_count = 0;
    weft::http::FileCache *cache = nullptr;
    weft::http::Responder *responder = nullptr;
    weft::http::Limits limits;
    weft::srv::ServerCounters counters;
    std::atomic<bool> stopping{false};
    uint64_t started_ns = 0;
    // The open connections, for shutdown.
    weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
    weft_cond_t all_gone = WEFT_COND_INITIALIZER;
    struct Node {
        Node *prev, *next;
        int fd;
    } *conns = nullptr;
    long live = 0;
    bool shutting = false;
} server;

int signal_fd = -1;
weft::srv::AcceptSite accept_site;

uint64_t seconds_ns(double s) { return s <= 0 ? 0 : static_cast<uint64_t>(s * 1e9); }

void conn_register(Server::Node *n) {
    Server &s = server;
    weft_mutex_lock(&s.mu);
    n->prev = nullptr;
    n->next = s.conns;
    if (s.conns) s.conns->prev = n;
    s.conns = n;
    ++s.live;
    const bool late = s.shutting;
    weft_mutex_unlock(&s.mu);
    if (late) weft_shutdown(n->fd, SHUT_RD); // accepted as shutdown began: serve what came, then end
}

void conn_unregister(Server::Node *n) {
    Server &s = server;
    weft_mutex_lock(&s.mu);
    (n->prev ? n->prev->next : s.conns) = n->next;
    if (n->next) n->next->prev = n->prev;
    if (--s.live == 0) weft_cond_broadcast(&s.all_gone);
    weft_mutex_unlock(&s.mu);
}

std::string stats_extra() {
    const vt::Stats v = vt::stats();
    char b[320];
    snprintf(b, sizeof b,
             ",\n \"vt\": {\"spawned\": %llu, \"live\": %llu, \"resumes\": %llu, \"io_parks\": %llu,"
             " \"frames\": %llu, \"frame_bytes\": %llu, \"largest_frame\": %llu}",
             static_cast<unsigned long long>(v.spawned), static_cast<unsigned long long>(v.live),
             static_cast<unsigned long long>(v.resumes), static_cast<unsigned long long>(v.io_parks),
             static_cast<unsigned long long>(v.frames), static_cast<unsigned long long>(v.frame_bytes),
             static_cast<unsigned long long>(v.largest_frame));
    std::string out = weft::srv::runtime_stats_json() + b;
    // The continuation sizes, by coroutine (recorded with --stats).
    out += ",\n \"frames\": [";
    bool first = true;
    for (const vt::FrameSite &f : vt::frame_report()) {
        std::string name;
        for (char c : f.name) // a JSON string: the demangled names have no control characters
            if (c == '"' || c == '\\') name += '\\', name += c;
            else name += c;
        char row[96];
        snprintf(row, sizeof row, "\"bytes\": %zu, \"count\": %llu}", f.bytes, static_cast<unsigned long long>(f.count));
        out += (first ? "{\"coroutine\": \"" : ", {\"coroutine\": \"") + name + "\", " + row;
        first = false;
    }
    return out + "]";
}

} // namespace

// The loop's buffers, one set per kernel thread (each vproc runs its own
// loop there). A connection receives into tl_in, then parses and answers
// the request in tl_req and tl_reply, with no wait in between. What must
// survive a wait is copied out just then, and only then: a head that
// arrives in pieces, a body to skip, pipelined requests (Conn::own_), reply
// bytes the socket does not take at once (Io::keep). So a connection that
// waits — for its next request, or for a reply to go out — holds its
// frame and nothing else (docs/virtual-threads.md, "Memory per connection").
thread_local char tl_in[kInBuf];
thread_local weft::http::Request tl_req;
thread_local weft::http::Reply tl_reply;
thread_local std::string tl_page; // the stats page

// A connection's one awaiter: whichever of its I/O operations it waits
// for, built in place for each wait. GCC gives every awaiter temporary of
// a coroutine a slot of its own in the frame, for the frame's whole life,
// so a connection that awaited a RecvOp, a WriteOp and a SendfileOp
// directly would carry all three; this slot is the largest of them. Bytes
// of the loop's buffers that a send must wait with are copied to the heap
// first (keep), out of the way of the other connections of the loop.
class Io {
public:
    Io() noexcept {}
    Io(const Io &) = delete;
    Io &operator=(const Io &) = delete;

    // What co_await takes: a pointer to the Io (GCC would copy an lvalue awaiter).
    struct Wait {
        Io *io;
        bool await_ready() noexcept { return io->op_->await_ready(); }
        bool await_suspend(std::coroutine_handle<> c) noexcept { return io->suspend(c); }
        ssize_t await_resume() noexcept {
            io->kept_.reset();
            return io->op_->await_resume();
        }
    };

    // deadline: absolute (weft_now_ns), timeout: per wait; 0 for none.
    Wait recv(int fd, void *buf, size_t n, uint64_t deadline, uint64_t timeout) noexcept {
        return arm(new (slot_) vt::RecvOp(fd, buf, n, 0), deadline, timeout);
    }
    // n bytes at buf, all of them; `loops`: they are in the loop's buffers.
    Wait send(int fd, const char *buf, size_t n, int flags, bool loops, uint64_t timeout) noexcept {
        Wait w = arm(new (slot_) vt::WriteOp(fd, buf, n, flags), 0, timeout);
        keep_ = loops;
        return w;
    }
    Wait sendfile(int fd, int file, off_t offset, size_t n, uint64_t timeout) noexcept {
        return arm(new (slot_) vt::SendfileOp(fd, file, offset, n), 0, timeout);
    }

private:
    static constexpr size_t kSlot = std::max({sizeof(vt::RecvOp), sizeof(vt::WriteOp), sizeof(vt::SendfileOp)});
    static constexpr size_t kAlign =
        std::max({alignof(vt::RecvOp), alignof(vt::WriteOp), alignof(vt::SendfileOp)});
    // Each op is simply built over the last one (whose wait has ended).
    static_assert(std::is_trivially_destructible_v<vt::RecvOp> && std::is_trivially_destructible_v<vt::WriteOp> &&
                  std::is_trivially_destructible_v<vt::SendfileOp>);

    Wait arm(vt::detail::IoOp *op, uint64_t deadline, uint64_t timeout) noexcept {
        op->deadline = deadline;
        op->timeout = timeout;
        op_ = op;
        keep_ = false;
        return {this};
    }
    bool suspend(std::coroutine_handle<> c) noexcept {
        if (keep_ && !keep()) return false; // no memory: the send fails (ENOMEM) instead
        return op_->await_suspend(c);
    }
    // The send's bytes to the heap, for its wait: a head (at most 1 KiB),
    // or the stats page.
    bool keep() noexcept {
        auto *op = static_cast<vt::WriteOp *>(op_);
        char *m = new (std::nothrow) char[op->len];
        if (!m) {
            op->result = -ENOMEM;
            return false;
        }
        std::memcpy(m, op->buf, op->len);
        kept_.reset(m);
        op->buf = m;
        keep_ = false;
        return true;
    }

    alignas(kAlign) unsigned char slot_[kSlot];
    vt::detail::IoOp *op_ = nullptr;
    std::unique_ptr<char[]> kept_; // the bytes of a send that waits
    bool keep_ = false;            // op_ is a send of the loop's bytes, not yet kept
};

// A connection is two coroutines. serve() holds the connection across its
// requests and the one Io every wait goes through, and waits there for each
// request's first bytes; exchange() takes one request from those bytes to
// its reply's last, and returns. So a connection that waits for its next
// request holds serve()'s frame (the Conn and the Io), not exchange()'s
// (the request's state), which exists only while a request is in hand: an
// idle keep-alive connection costs less than nginx's
// (docs/virtual-threads.md, "An idle connection holds the smaller frame").
//
// Each step between two waits is a call (not a coroutine: its locals are
// on the loop's stack, not in a frame).

// A connection across its requests.
class Conn : Server::Node {
public:
    explicit Conn(int fd) : Node{nullptr, nullptr, fd} {
        Server &s = server;
        conn_register(this);
        s.counters.open_conns.fetch_add(1, std::memory_order_relaxed);
        head_deadline_ = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
    }
    ~Conn() {
        conn_unregister(this);
        server.counters.open_conns.fetch_sub(1, std::memory_order_relaxed);
        vt::close(fd);
    }
    Conn(const Conn &) = delete;
    Conn &operator=(const Conn &) = delete;

    // No input in hand: the next request's first bytes are to be waited
    // for (between requests, or before the first).
    bool awaits_request() const { return have_ == 0 && !late_; }
    // That wait is a receive into the loop's buffer (nothing is kept across
    // it) on socket() until first_deadline(); arrived() takes what it
    // returned. false: the connection ends.
    int socket() const { return fd; }
    uint64_t first_deadline() const {
        return served_ ? weft_now_ns() + seconds_ns(server.opt.keepalive_timeout_s) : head_deadline_;
    }
    bool arrived(ssize_t n);

private:
    friend class Exchange;
    char *in() const { return own_ ? own_.get() : tl_in; }
    size_t cap() const { return own_ ? own_cap_ : kInBuf; }
    // in()[0, have_) to the connection's own buffer (kInSmall, else kInBuf), from `from`.
    void keep_input(const char *from);
    void drop_input() {
        own_.reset();
        own_cap_ = 0;
    }

    // (Server::Node, first: the registry's links and the descriptor, fd.)
    std::unique_ptr<char[]> own_; // the input, while it must survive a wait (else tl_in)
    uint64_t head_deadline_;      // of the request whose head is arriving
    uint32_t have_ = 0;           // input bytes at in()
    uint32_t own_cap_ = 0;
    uint32_t served_ = 0;         // requests answered
    bool late_ = false;           // no first byte before head_deadline_: answer 408
};

// One request, from its first bytes (in the Conn) to its reply's last. A
// request goes through the stages in order: its head arrives, its body (if
// any) is read and dropped, it is answered, the reply's head goes, then its
// body.
class Exchange {
public:
    explicit Exchange(Conn &c) : c_(c), error_(c.late_ ? 408 : 0) { c.late_ = false; }
    Exchange(const Exchange &) = delete;
    Exchange &operator=(const Exchange &) = delete;

    // A head, then a body to drop: parses what is here. True: receive
    // more (and hand what the receive returned to received(); false
    // from that: the connection ends).
    bool need_more();
    Io::Wait receive(Io &io);
    bool received(ssize_t n);

    // The answer, in tl_reply; then its pieces, sent while sending().
    void answer();
    bool sending() const { return stage_ == Stage::SendHead || (stage_ == Stage::SendBody && body_ != BodyKind::None); }
    Io::Wait send(Io &io);
    bool sent(ssize_t n);

    // The reply went (ok) or not. False: the connection ends.
    bool replied(bool ok);

private:
    enum class Stage : uint8_t { Head, Body, SendHead, SendBody };
    static uint64_t send_timeout() { return seconds_ns(server.opt.send_timeout_s); }
    void took_head();

    Conn &c_;
    weft::http::Parser::Progress progress_; // of a head that arrives in pieces
    uint64_t body_left_ = 0;                // Stage::Body: of the request body, still to drop
    uint64_t length_ = 0;                   // of the reply's body
    union {
        const char *mem_;                   // BodyKind::Memory: the body
        uint64_t offset_;                   // BodyKind::File: where in file_
    };
    weft::http::FileRef file_;              // while its bytes go out
    uint32_t head_len_ = 0;                 // of the reply
    uint16_t error_;                        // to answer instead of a request (408, 431, 4xx from the parser)
    uint16_t status_ = 0;                   // of the reply
    Stage stage_ = Stage::Head;
    BodyKind body_ = BodyKind::None;
    bool last_ = false;                     // close after the reply
};

void Conn::keep_input(const char *from) {
    const size_t want = have_ < kInSmall ? kInSmall : kInBuf;
    if (!own_ || own_cap_ < want) {
        std::unique_ptr<char[]> m(new char[want]);
        if (have_) std::memmove(m.get(), from, have_);
        own_ = std::move(m);
        own_cap_ = static_cast<uint32_t>(want);
    } else if (from != own_.get() && have_) {
        std::memmove(own_.get(), from, have_);
    }
}

bool Conn::arrived(ssize_t n) {
    Server &s = server;
    if (n > 0) {
        if (served_) head_deadline_ = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
        have_ = static_cast<uint32_t>(n);
        return true;
    }
    if (n < 0 && errno == ETIMEDOUT) {
        s.counters.timeouts.fetch_add(1, std::memory_order_relaxed);
        if (!served_) { // a first request that does not come gets 408; an idle client just goes
            late_ = true;
            return true;
        }
    }
    return false;
}

bool Exchange::need_more() {
    Conn &c = c_;
    if (stage_ == Stage::Body) return body_left_ > 0;
    if (error_) return false;
    if (c.have_ == 0) return true;
    weft::http::Parser p(server.limits, progress_);
    const ParseResult pr = p.parse(c.in(), c.have_, &tl_req);
    progress_ = p.progress();
    if (pr.kind == ParseResult::Error) {
        error_ = pr.status;
        return false;
    }
    if (pr.kind == ParseResult::Done) {
        took_head();
        return stage_ == Stage::Body;
    }
    // A part of a head: it must survive the wait, with room after it.
    if (c.have_ == c.cap() && c.cap() == kInBuf) {
        error_ = 431;
        return false;
    }
    if (!c.own_ || c.have_ == c.cap()) c.keep_input(c.in()); // (kInSmall -> kInBuf)
    return true;
}

Io::Wait Exchange::receive(Io &io) {
    Conn &c = c_;
    if (stage_ == Stage::Body) // into the loop's buffer, and forgotten
        return io.recv(c.fd, tl_in, static_cast<size_t>(std::min<uint64_t>(body_left_, kInBuf)), 0, send_timeout());
    return io.recv(c.fd, c.in() + c.have_, c.cap() - c.have_, c.head_deadline_, 0);
}

bool Exchange::received(ssize_t n) {
    if (n > 0) {
        if (stage_ == Stage::Body) body_left_ -= static_cast<uint64_t>(n);
        else c_.have_ += static_cast<uint32_t>(n);
        return true;
    }
    if (n < 0 && errno == ETIMEDOUT) {
        server.counters.timeouts.fetch_add(1, std::memory_order_relaxed);
        if (stage_ == Stage::Head) { // a slow head gets 408
            error_ = 408;
            return true;
        }
    }
    return false;
}

// tl_req is a whole head at in(): drop the body that follows it, here or
// by reading it in (Stage::Body).
void Exchange::took_head() {
    Conn &c = c_;
    const weft::http::Request &req = tl_req;
    if (!req.has_body) return;
    const uint32_t in_buf = c.have_ - req.head_len;
    if (in_buf >= req.body_len) {
        const auto body = static_cast<uint32_t>(req.body_len);
        std::memmove(c.in() + req.head_len, c.in() + req.head_len + body, in_buf - body);
        c.have_ -= body;
        return;
    }
    body_left_ = req.body_len - in_buf;
    c.have_ = req.head_len;
    if (!c.own_) c.keep_input(tl_in);
    stage_ = Stage::Body; // answer() parses the kept head again
}

void Exchange::answer() {
    Server &s = server;
    Conn &c = c_;
    weft::http::Request &req = tl_req;
    weft::http::Reply &r = tl_reply;
    if (!error_ && stage_ == Stage::Body) { // tl_req is another's after the body's waits
        weft::http::Parser p(s.limits);
        const ParseResult pr = p.parse(c.in(), c.have_, &req);
        if (pr.kind != ParseResult::Done) error_ = pr.kind == ParseResult::Error ? pr.status : 400;
    }
    s.counters.requests.fetch_add(1, std::memory_order_relaxed);
    ++c.served_;
    if (error_) {
        s.responder->error(error_, &r);
    } else {
        const bool allow_ka = !s.stopping.load(std::memory_order_relaxed) && c.served_ < s.opt.max_requests;
        if (s.opt.stats && weft::srv::is_stats_target(req.target)) {
            tl_page = weft::srv::stats_json(kProg, "vt", static_cast<double>(weft_now_ns() - s.started_ns) / 1e9,
                                            s.counters, s.cache->counters(), stats_extra());
            weft::srv::stats_reply(kProg, req, allow_ka && req.keep_alive, &tl_page, &r);
        } else {
            s.responder->respond(req, allow_ka, &r);
        }
    }

    // What follows the head (pipelined requests) is kept across the
    // reply's waits; the rest of the reply is taken from tl_reply (its
    // head is sent from there, and kept only if that send waits).
    last_ = !r.keep_alive || error_;
    c.have_ = last_ ? 0 : c.have_ - req.head_len;
    if (c.have_) c.keep_input(c.in() + req.head_len);
    else c.drop_input();
    progress_ = {};
    stage_ = Stage::SendHead;
    status_ = r.status;
    head_len_ = r.head_len;
    body_ = r.body;
    length_ = body_ == BodyKind::None ? 0 : r.length;
    if (body_ == BodyKind::Memory) mem_ = r.mem;
    else offset_ = r.offset;
    file_ = std::move(r.file);
}

Io::Wait Exchange::send(Io &io) {
    const int fd = c_.fd;
    if (stage_ == Stage::SendHead) // (MSG_MORE: the body follows at once)
        return io.send(fd, tl_reply.head, head_len_, body_ == BodyKind::None ? 0 : MSG_MORE, true, send_timeout());
    if (body_ == BodyKind::Memory)
        return io.send(fd, mem_, length_, 0, mem_ == tl_page.data(), send_timeout());
    return io.sendfile(fd, file_->fd, static_cast<off_t>(offset_), length_, send_timeout());
}

bool Exchange::sent(ssize_t n) {
    const uint64_t want = stage_ == Stage::SendHead ? head_len_ : length_;
    stage_ = stage_ == Stage::SendHead ? Stage::SendBody : Stage::Head;
    return n == static_cast<ssize_t>(want);
}

bool Exchange::replied(bool ok) {
    weft::srv::count_reply(server.counters, status_, head_len_ + length_, ok);
    file_.reset(); // (and the cache may close a replaced file now)
    if (!ok || last_) return false;
    c_.head_deadline_ = weft_now_ns() + seconds_ns(server.opt.header_timeout_s);
    return true;
}

// The coroutines (not in an anonymous namespace: the stats page names them).
namespace vtserver {

// One request and its reply, in plain threaded style: read the rest of the
// request, answer it, send the reply. false: the connection ends.
vt::Task<bool> exchange(Conn &c, Io &io) {
    Exchange x(c);
    while (x.need_more())
        if (!x.received(co_await x.receive(io))) co_return false;
    x.answer();
    bool ok = true;
    while (ok && x.sending()) ok = x.sent(co_await x.send(io));
    co_return x.replied(ok);
}

// One connection, the whole of its life: a request, then another while the
// client keeps it open.
vt::Task<> serve(int fd) {
    Conn c(fd);
    Io io;
    do {
        if (c.awaits_request() && !c.arrived(co_await io.recv(c.socket(), tl_in, kInBuf, c.first_deadline(), 0)))
            co_return;
    } while (co_await exchange(c, io));
}
} // namespace vtserver

namespace {

// One per vproc: connections become virtual threads there.
void *acceptor(void *arg) {
    Server &s = server;
    const int lfd = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    for (;;) {
        struct sockaddr_storage peer;
        int fd = weft::srv::accept_one(accept_site, lfd, &peer);
        if (fd < 0) break;
        if (s.counters.open_conns.load(std::memory_order_relaxed) >= s.opt.max_conns) {
            weft::srv::refuse(accept_site, fd);
            continue;
        }
        try {
            vt::spawn(vtserver::serve(fd)); // detached: it ends with its connection
        } catch (const std::bad_alloc &) {
            weft::srv::refuse(accept_site, fd);
        }
    }
    return nullptr;
}

void *signal_watcher(void *) {
    Server &s = server;
    weft::srv::wait_stop_signal(kProg, signal_fd, s.opt.quiet, s.counters.open_conns);
    s.stopping.store(true);
    for (int i = 0; i < s.listen_count; ++i) weft_close(s.listen_fds[i]); // wakes the acceptors (EBADF)
    weft_mutex_lock(&s.mu);
    s.shutting = true;
    // SHUT_RD: a connection waiting for its next request reads EOF and ends;
    // one in the middle of a reply finishes sending it first.
    for (Server::Node *n = s.conns; n; n = n->next) weft_shutdown(n->fd, SHUT_RD);
    while (s.live > 0) weft_cond_wait(&s.all_gone, &s.mu);
    weft_mutex_unlock(&s.mu);
    return nullptr;
}

ssize_t weft_pread_fn(int fd, void *buf, size_t n, off_t off) { return weft_pread(fd, buf, n, off); }
int weft_close_fn(int fd) { return weft_close(fd); }

int run(void *) {
    Server &s = server;
    s.started_ns = weft_now_ns();
    weft::http::CacheOptions co;
    co.max_entries = static_cast<size_t>(s.opt.fd_cache);
    co.follow_symlinks = s.opt.follow_symlinks;
    co.server = kProg;
    co.pread = weft_pread_fn;
    co.close = weft_close_fn;
    weft::http::FileCache cache(s.root_fd, co);
    weft::http::ResponderOptions ro;
    ro.server = kProg;
    weft::http::Responder responder(&cache, ro);
    s.cache = &cache;
    s.responder = &responder;

    std::string busy;
    weft::srv::init_accept_site(&accept_site, kProg, &s.counters, &s.stopping, responder, &busy);
    weft::srv::accept_reserve_spare();
    if (s.opt.stats) vt::record_frames(true);

    weft_thread_t watcher;
    weft_thread_create(&watcher, nullptr, signal_watcher, nullptr);
    const int vprocs = weft_vproc_count();
    std::vector<weft_thread_t> loops =
        weft::srv::start_accept_loops(kProg, vprocs, s.listen_fds, s.listen_count, acceptor, "acceptor");
    if (!s.opt.quiet) {
        std::string details = "mode vt, " + std::to_string(vprocs) + (vprocs == 1 ? " vproc" : " vprocs") + ", io " +
                              weft_io_backend() + ", a virtual thread per connection";
        weft::srv::print_banner(kProg, s.opt.root.c_str(), s.opt.listen.c_str(), details.c_str());
    }
    for (auto &t : loops) weft_thread_join(t, nullptr);
    weft_thread_join(watcher, nullptr);
    weft::srv::accept_release_spare();
    if (!s.opt.quiet)
        std::printf("%s: stopped after %llu connections, %llu requests\n", kProg,
                    static_cast<unsigned long long>(s.counters.accepted.load()),
                    static_cast<unsigned long long>(s.counters.requests.load()));
    return 0;
}

Options parse_options(int argc, char **argv) {
    enum { kVprocs = weft::srv::kOwnOption, kNoReuseport };
    static const struct option own[] = {
        {"vprocs", required_argument, nullptr, kVprocs},
        {"no-reuseport", no_argument, nullptr, kNoReuseport},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    weft::srv::parse_command_line(kProg, argc, argv, own, &o, [&o](int c, const char *a) {
        switch (c) {
        case kVprocs: o.vprocs = static_cast<int>(weft::srv::parse_long(kProg, "--vprocs", a, 1, 64)); return true;
        case kNoReuseport: o.reuseport = false; return true;
        default: return false;
        }
    }, usage);
    return o;
}

} // namespace

int main(int argc, char **argv) {
    Server &s = server;
    s.opt = parse_options(argc, argv);
    s.root_fd = open(s.opt.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.root_fd < 0) {
        std::fprintf(stderr, "%s: cannot read the root '%s': %s\n", kProg, s.opt.root.c_str(), std::strerror(errno));
        return 1;
    }
    s.listen_count = weft::srv::listen_sockets(kProg, &s.opt.listen, s.opt.vprocs, s.opt.reuseport, s.listen_fds, 64);
    signal_fd = weft::srv::stop_signal_fd(); // read by a weft thread

    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = s.opt.vprocs;
    int rc = weft_main_config(&cfg, run, nullptr);
    return rc < 0 ? 1 : rc;
}
