// One connection, one weft thread: read a request, answer it, repeat. The
// code is what a programmer writes for kernel threads; weft makes each
// blocking call park only this thread.
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "access_log.hpp"
#include "common/weft_accept.hpp"
#include "knot.hpp"

namespace knot {
namespace {

using weft::http::BodyKind;
using weft::http::ParseResult;
using weft::http::Reply;
using weft::http::Request;

constexpr size_t kCopyChunk = 64 * 1024;  // knot-c: chunks of a file too big for the cache

uint64_t seconds_ns(double s) { return s <= 0 ? 0 : static_cast<uint64_t>(s * 1e9); }

// Send all of iov[0, n) (weft_writev returns short counts only on a
// timeout or an error). False if the connection failed.
bool send_all(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t w = weft_writev(fd, iov, n);
        if (w <= 0) return false;
        size_t left = static_cast<size_t>(w);
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            ++iov;
            --n;
        }
        if (n > 0) {
            iov->iov_base = static_cast<char *>(iov->iov_base) + left;
            iov->iov_len -= left;
        }
    }
    return true;
}

bool send_head_more(int fd, const Reply &r) { // the head, with the body to follow in the same segment
    size_t done = 0;
    while (done < r.head_len) {
        ssize_t w = weft_send(fd, r.head + done, r.head_len - done, MSG_MORE);
        if (w <= 0) return false;
        done += static_cast<size_t>(w);
    }
    return true;
}

// knot-c without the content in memory: read and write in chunks.
bool copy_file(int fd, const Reply &r) {
    std::unique_ptr<char[]> buf(new (std::nothrow) char[kCopyChunk]);
    if (!buf || !send_head_more(fd, r)) return false;
    uint64_t off = r.offset, left = r.length;
    while (left > 0) {
        ssize_t n = weft_pread(r.file->fd, buf.get(), std::min<uint64_t>(left, kCopyChunk), static_cast<off_t>(off));
        if (n <= 0) return false; // the file shrank: the promised length cannot be kept
        struct iovec iov = {buf.get(), static_cast<size_t>(n)};
        if (!send_all(fd, &iov, 1)) return false;
        off += static_cast<uint64_t>(n);
        left -= static_cast<uint64_t>(n);
    }
    return true;
}

bool send_reply(Server &s, int fd, const Reply &r) {
    switch (r.body) {
    case BodyKind::None: {
        struct iovec iov = {const_cast<char *>(r.head), r.head_len};
        return send_all(fd, &iov, 1);
    }
    case BodyKind::Memory: {
        struct iovec iov[2] = {{const_cast<char *>(r.head), r.head_len},
                               {const_cast<char *>(r.mem), static_cast<size_t>(r.length)}};
        return send_all(fd, iov, 2);
    }
    case BodyKind::File:
        break;
    }
    if (s.opt.mode == Mode::C) return copy_file(fd, r);
    if (!send_head_more(fd, r)) return false;
    int how = s.opt.mode == Mode::B ? WEFT_SENDFILE_BLOCKING
              : s.opt.mode == Mode::Uring ? WEFT_SENDFILE_SPLICE
                                           : WEFT_SENDFILE_NONBLOCKING;
    off_t off = static_cast<off_t>(r.offset);
    ssize_t n = weft_sendfile_mode(fd, r.file->fd, &off, r.length, how);
    return n == static_cast<ssize_t>(r.length);
}

// /.weft/stats (with --stats): the counters every weft server shows, plus
// the number of vprocs and the runtime's counters.
void stats_reply(Server &s, const Request &req, bool keep_alive, std::string *body, Reply *out) {
    const std::string runtime = weft::srv::runtime_stats_json();
    *body = weft::srv::stats_json("weft-knot", mode_name(s.opt.mode),
                                  static_cast<double>(weft_now_ns() - s.started_ns) / 1e9, s.counters,
                                  s.cache->counters(), runtime);
    weft::srv::stats_reply("weft-knot", req, keep_alive, body, out);
}

// The blocking graph, live (--stats and WEFT_GRAPH): /.weft/graph.json,
// /.weft/graph.dot, and /.weft/graph.svg drawn by Graphviz's dot, which
// runs in an offload worker so that only this connection's thread waits.
enum class GraphPage { None, Json, Dot, Svg };

GraphPage graph_page(std::string_view target) {
    target = target.substr(0, target.find('?'));
    if (target == "/.weft/graph.json") return GraphPage::Json;
    if (target == "/.weft/graph.dot") return GraphPage::Dot;
    if (target == "/.weft/graph.svg") return GraphPage::Svg;
    return GraphPage::None;
}

// The graph as `format`, or the reason there is none.
int graph_text(int format, std::string *out) {
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return errno;
    int e = weft_graph_dump(f, format);
    std::fclose(f);
    if (!e) out->assign(buf, len);
    std::free(buf);
    return e;
}

struct DotJob {
    const std::string *dot;
    std::string svg;
    std::string error;
};

// In an offload worker: dot -Tsvg, the DOT text on its standard input.
// nullptr on success.
void *render_svg(void *p) {
    auto *job = static_cast<DotJob *>(p);
    int in = memfd_create("weft-graph.dot", MFD_CLOEXEC);
    int out[2];
    if (in < 0 || pipe2(out, O_CLOEXEC) != 0) {
        job->error = std::string("cannot run dot: ") + std::strerror(errno);
        if (in >= 0) close(in);
        return p;
    }
    if (write(in, job->dot->data(), job->dot->size()) != static_cast<ssize_t>(job->dot->size()) ||
        lseek(in, 0, SEEK_SET) != 0) {
        job->error = std::string("cannot run dot: ") + std::strerror(errno);
        close(in), close(out[0]), close(out[1]);
        return p;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char arg0[] = "dot", arg1[] = "-Tsvg";
    char *argv[] = {arg0, arg1, nullptr};
    pid_t pid;
    int e = posix_spawnp(&pid, "dot", &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in);
    close(out[1]);
    if (e) {
        close(out[0]);
        job->error = e == ENOENT ? "Graphviz is not installed (no dot on PATH): read /.weft/graph.dot instead"
                                 : std::string("cannot run dot: ") + std::strerror(e);
        return p;
    }
    char chunk[16384];
    ssize_t n;
    while ((n = read(out[0], chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) job->svg.append(chunk, static_cast<size_t>(n));
    close(out[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        job->error = "dot failed";
        return p;
    }
    return nullptr;
}

void graph_reply(GraphPage page, const Request &req, bool keep_alive, std::string *body, Reply *out) {
    std::string dot;
    int e = graph_text(page == GraphPage::Json ? WEFT_GRAPH_JSON : WEFT_GRAPH_DOT, page == GraphPage::Svg ? &dot : body);
    if (e) {
        *body = e == ENODATA ? "the blocking graph is off: start weft-knot with WEFT_GRAPH=1 (docs/observability.md)\n"
                             : std::string("cannot write the blocking graph: ") + std::strerror(e) + "\n";
        weft::srv::stats_reply("weft-knot", req, keep_alive, body, out, e == ENODATA ? 404 : 500, "text/plain");
        return;
    }
    if (page == GraphPage::Svg) {
        DotJob job{&dot, {}, {}};
        if (weft_offload(render_svg, &job) != nullptr) {
            *body = job.error + "\n";
            weft::srv::stats_reply("weft-knot", req, keep_alive, body, out, 503, "text/plain");
            return;
        }
        *body = std::move(job.svg);
    }
    const char *type = page == GraphPage::Json ? "application/json"
                       : page == GraphPage::Dot ? "text/vnd.graphviz"
                                                : "image/svg+xml";
    weft::srv::stats_reply("weft-knot", req, keep_alive, body, out, 200, type);
}

// Read and drop a request body of `len` bytes, `have` of which are in the
// buffer after the head. False if the client went away or was too slow.
bool skip_body(int fd, char *in, size_t head_len, size_t *have, uint64_t len) {
    size_t in_buf = *have - head_len;
    if (in_buf >= len) {
        std::memmove(in + head_len, in + head_len + len, in_buf - len);
        *have -= static_cast<size_t>(len);
        return true;
    }
    len -= in_buf;
    *have = head_len;
    char sink[4096];
    while (len > 0) {
        ssize_t n = weft_recv(fd, sink, std::min<uint64_t>(len, sizeof sink), 0);
        if (n <= 0) return false;
        len -= static_cast<uint64_t>(n);
    }
    return true;
}

} // namespace

void serve_connection(Server &s, int fd, const struct sockaddr_storage &peer) {
    ConnNode node;
    node.fd = fd;
    conn_register(s, &node);
    // Most heads fit in a page; a longer one moves to the heap. A small
    // array keeps the thread's stack shallow: every page a request touches
    // stays resident while the connection idles.
    char small[kInSmall];
    std::unique_ptr<char[]> big;
    char *in = small;
    size_t cap = sizeof small, have = 0;
    weft::http::Parser parser(s.limits);
    Request req;
    Reply reply;
    std::string stats_body;
    long served = 0;
    uint64_t head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);

    for (;;) {
        // ---- a request head: read until the parser has one ----
        // Reads are bounded by the header and keep-alive deadlines alone;
        // the send timeout (set below for the reply) must not cut them.
        weft_set_io_timeout_ns(0);
        ParseResult pr = have ? parser.parse(in, have, &req) : ParseResult{ParseResult::NeedMore, 0};
        bool closed = false;
        while (pr.kind == ParseResult::NeedMore) {
            if (have == cap) {
                if (cap == kInBuf) { // cannot happen while Limits::head_bytes < kInBuf; never overrun
                    pr = {ParseResult::Error, 431};
                    break;
                }
                big.reset(new char[kInBuf]);
                std::memcpy(big.get(), in, have);
                in = big.get();
                cap = kInBuf;
            }
            const bool idle = have == 0 && served > 0; // between requests: the keep-alive timeout
            weft_set_io_deadline_ns(idle ? weft_now_ns() + seconds_ns(s.opt.keepalive_timeout_s) : head_deadline);
            ssize_t n = weft_recv(fd, in + have, cap - have, 0);
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

        weft_set_io_deadline_ns(0);
        weft_set_io_timeout_ns(seconds_ns(s.opt.send_timeout_s));
        s.counters.requests.fetch_add(1, std::memory_order_relaxed);
        ++served;
        if (pr.kind == ParseResult::Error) {
            // Malformed or refused: answer and close; what follows cannot be trusted.
            s.responder->error(pr.status, &reply);
            bool ok = send_reply(s, fd, reply);
            weft::srv::count_reply(s.counters, reply.status, reply.head_len + reply.length, ok);
            if (s.log) s.log->add(peer, {}, {}, 1, reply.status, reply.length, {}, {});
            break;
        }
        if (req.has_body && !skip_body(fd, in, req.head_len, &have, req.body_len)) break;

        const bool allow_keep_alive = !s.stopping.load(std::memory_order_relaxed) && served < s.opt.max_requests;
        GraphPage gp = s.opt.stats ? graph_page(req.target) : GraphPage::None;
        if (s.opt.stats && weft::srv::is_stats_target(req.target))
            stats_reply(s, req, allow_keep_alive && req.keep_alive, &stats_body, &reply);
        else if (gp != GraphPage::None)
            graph_reply(gp, req, allow_keep_alive && req.keep_alive, &stats_body, &reply);
        else
            s.responder->respond(req, allow_keep_alive, &reply);
        bool ok = send_reply(s, fd, reply);
        weft::srv::count_reply(s.counters, reply.status, reply.head_len + reply.length, ok);
        if (s.log)
            s.log->add(peer, req.method_text, req.target, req.version_minor, reply.status, reply.length, req.referer,
                       req.user_agent);
        reply.file.reset(); // let the cache close a replaced file now, not at the next request
        if (!ok || !reply.keep_alive) break;

        // ---- the next request: what follows this one in the buffer ----
        std::memmove(in, in + req.head_len, have - req.head_len);
        have -= req.head_len;
        head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
    }
    conn_unregister(s, &node);
    weft_close(fd);
}

// ---- the registry of open connections ----

namespace {
struct Registry {
    weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
    weft_cond_t all_gone = WEFT_COND_INITIALIZER;
    ConnNode *head = nullptr; // every open connection
    long live = 0;
    bool shutting = false;
};
Registry registry;
} // namespace

void conn_register(Server &s, ConnNode *c) {
    weft_mutex_lock(&registry.mu);
    c->prev = nullptr;
    c->next = registry.head;
    if (registry.head) registry.head->prev = c;
    registry.head = c;
    ++registry.live;
    bool late = registry.shutting;
    weft_mutex_unlock(&registry.mu);
    s.counters.open_conns.fetch_add(1, std::memory_order_relaxed);
    if (late) weft_shutdown(c->fd, SHUT_RD); // accepted as shutdown began: serve what came, then end
}

void conn_unregister(Server &s, ConnNode *c) {
    weft_mutex_lock(&registry.mu);
    (c->prev ? c->prev->next : registry.head) = c->next;
    if (c->next) c->next->prev = c->prev;
    if (--registry.live == 0) weft_cond_broadcast(&registry.all_gone);
    weft_mutex_unlock(&registry.mu);
    s.counters.open_conns.fetch_sub(1, std::memory_order_relaxed);
}

void conn_shutdown_all(Server &) {
    // SHUT_RD: a connection waiting for its next request reads EOF and ends;
    // one in the middle of a response finishes sending it first.
    weft_mutex_lock(&registry.mu);
    registry.shutting = true;
    for (ConnNode *c = registry.head; c; c = c->next) weft_shutdown(c->fd, SHUT_RD);
    weft_mutex_unlock(&registry.mu);
}

void conn_wait_all(Server &) {
    weft_mutex_lock(&registry.mu);
    while (registry.live > 0) weft_cond_wait(&registry.all_gone, &registry.mu);
    weft_mutex_unlock(&registry.mu);
}

} // namespace knot
