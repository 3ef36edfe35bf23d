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
#include <memory>
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
        int fd;
        Node *prev, *next;
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

// The coroutines (not in an anonymous namespace: the stats page names them).
namespace vtserver {

// Read and drop `left` bytes of a request body (its own frame: only a
// request with a body pays for the buffer).
vt::Task<bool> drop_body(int fd, uint64_t left, uint64_t timeout) {
    char sink[1024];
    while (left > 0) {
        ssize_t n = co_await vt::within(vt::recv(fd, sink, std::min<uint64_t>(left, sizeof sink)), timeout);
        if (n <= 0) co_return false;
        left -= static_cast<uint64_t>(n);
    }
    co_return true;
}

// The reply, in a frame of its own (so the awaiters are not in the
// connection's while it idles), one for each way, so that a reply in
// flight holds the awaiter of its way only. False if the connection failed.
//
// Head and memory body in one writev.
vt::Task<bool> send_memory(int fd, const weft::http::Reply &r, uint64_t timeout) {
    struct iovec iov[2] = {{const_cast<char *>(r.head), r.head_len},
                           {const_cast<char *>(r.mem), static_cast<size_t>(r.length)}};
    const int n = r.body == BodyKind::Memory ? 2 : 1;
    const size_t want = r.head_len + (n == 2 ? r.length : 0);
    co_return co_await vt::within(vt::writev(fd, iov, n), timeout) == static_cast<ssize_t>(want);
}

// The head, then the file's bytes by sendfile. The reply (its 1 KiB of
// head) is freed once the head is out: while the body goes, which may take
// long, only the file is held.
vt::Task<bool> send_file(int fd, std::unique_ptr<weft::http::Reply> r, uint64_t timeout) {
    if (co_await vt::within(vt::send(fd, r->head, r->head_len, MSG_MORE), timeout) != static_cast<ssize_t>(r->head_len))
        co_return false;
    weft::http::FileRef file = std::move(r->file);
    const auto offset = static_cast<off_t>(r->offset);
    const uint64_t length = r->length;
    r.reset();
    co_return co_await vt::within(vt::sendfile(fd, file->fd, offset, length), timeout) ==
        static_cast<ssize_t>(length);
}

// The loop's input buffer, one per kernel thread (each vproc runs its own
// loop there). A connection receives into it and parses and answers the
// request there, without a suspension in between; it keeps bytes of its
// own (InBuf) only across a suspension that needs them: a head that
// arrives in pieces, a body to skip, pipelined requests. So a connection
// that waits — for its next request, or for a reply to go out — holds its
// frame and nothing else (docs/virtual-threads.md, "Memory per connection").
thread_local char tl_in[kInBuf];

// A connection's own bytes, on the heap while it has any.
struct InBuf {
    std::unique_ptr<char[]> mem;
    size_t cap = 0;
    // in[0, have) kept, with room for more: kInSmall, then kInBuf.
    char *keep(const char *in, size_t have) {
        const size_t want = have < kInSmall ? kInSmall : kInBuf;
        if (cap < want || !mem) {
            std::unique_ptr<char[]> m(new char[want]);
            if (have) std::memmove(m.get(), in, have);
            mem = std::move(m);
            cap = want;
        } else if (in != mem.get() && have) {
            std::memmove(mem.get(), in, have);
        }
        return mem.get();
    }
    void release() {
        mem.reset();
        cap = 0;
    }
};

// One connection, the whole of its life. Between requests it holds this
// frame only (the reply and the input bytes come and go with a request).
vt::Task<> serve(int fd) {
    Server &s = server;
    Server::Node node{fd, nullptr, nullptr};
    conn_register(&node);
    s.counters.open_conns.fetch_add(1, std::memory_order_relaxed);
    const uint64_t send_timeout = seconds_ns(s.opt.send_timeout_s);
    InBuf own;
    char *in = nullptr; // tl_in (nothing kept) or own.mem
    size_t have = 0;
    weft::http::Parser parser(s.limits);
    weft::http::Request req;
    std::unique_ptr<weft::http::Reply> reply; // 1 KiB of head: only while a request is answered
    std::string page;
    long served = 0;
    uint64_t head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);

    for (;;) {
        if (!have) in = tl_in;
        ParseResult pr = have ? parser.parse(in, have, &req) : ParseResult{ParseResult::NeedMore, 0};
        bool closed = false;
        while (pr.kind == ParseResult::NeedMore) {
            const size_t cap = in == tl_in ? kInBuf : own.cap;
            if (have == cap) {
                if (cap == kInBuf) {
                    pr = {ParseResult::Error, 431};
                    break;
                }
                in = own.keep(in, have); // kInSmall -> kInBuf
                continue;
            }
            // A part of a head in the loop's buffer must survive the wait.
            if (have && in == tl_in) in = own.keep(in, have);
            const bool idle = have == 0 && served > 0; // between requests: the keep-alive timeout
            const uint64_t deadline = idle ? weft_now_ns() + seconds_ns(s.opt.keepalive_timeout_s) : head_deadline;
            const size_t room = (in == tl_in ? kInBuf : own.cap) - have;
            ssize_t n = co_await vt::until(vt::recv(fd, in + have, room), deadline);
            if (n <= 0) {
                if (n < 0 && errno == ETIMEDOUT) {
                    s.counters.timeouts.fetch_add(1, std::memory_order_relaxed);
                    if (!idle) pr = {ParseResult::Error, 408}; // a slow head gets 408; an idle client just goes
                }
                closed = pr.kind != ParseResult::Error;
                break;
            }
            if (idle) head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
            have += static_cast<size_t>(n);
            pr = parser.parse(in, have, &req);
        }
        if (closed) break;

        s.counters.requests.fetch_add(1, std::memory_order_relaxed);
        ++served;
        if (!reply) reply = std::make_unique<weft::http::Reply>();
        weft::http::Reply &r = *reply;
        if (pr.kind == ParseResult::Error) {
            s.responder->error(pr.status, &r);
        } else {
            if (req.has_body) { // read and drop it
                size_t in_buf = have - req.head_len;
                if (in_buf >= req.body_len) {
                    std::memmove(in + req.head_len, in + req.head_len + req.body_len, in_buf - req.body_len);
                    have -= static_cast<size_t>(req.body_len);
                } else {
                    have = req.head_len;
                    if (in == tl_in) { // the head must survive the body's waits: keep it, parse it there again
                        in = own.keep(in, have);
                        parser.reset();
                        pr = parser.parse(in, have, &req);
                    }
                    if (!co_await drop_body(fd, req.body_len - in_buf, send_timeout)) break;
                }
            }
            const bool allow_ka = !s.stopping.load(std::memory_order_relaxed) && served < s.opt.max_requests;
            if (s.opt.stats && weft::srv::is_stats_target(req.target)) {
                page = weft::srv::stats_json(kProg, "vt", static_cast<double>(weft_now_ns() - s.started_ns) / 1e9,
                                             s.counters, s.cache->counters(), stats_extra());
                weft::srv::stats_reply(kProg, req, allow_ka && req.keep_alive, &page, &r);
            } else {
                s.responder->respond(req, allow_ka, &r);
            }
        }

        // The request is answered in r; what follows it (pipelined bytes)
        // is kept across the send, and nothing else.
        const bool last = !r.keep_alive || pr.kind == ParseResult::Error;
        have = last ? 0 : have - req.head_len;
        if (have) in = own.keep(in + req.head_len, have);
        else own.release();
        const int status = r.status;
        const uint64_t bytes = r.head_len + r.length;
        const bool ok = r.body == BodyKind::File ? co_await send_file(fd, std::move(reply), send_timeout)
                                                 : co_await send_memory(fd, r, send_timeout);
        weft::srv::count_reply(s.counters, status, bytes, ok);
        reply.reset(); // (and the cache may close a replaced file now)
        page.clear();
        page.shrink_to_fit();
        if (!ok || last) break;
        head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
    }
    conn_unregister(&node);
    s.counters.open_conns.fetch_sub(1, std::memory_order_relaxed);
    vt::close(fd);
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
