// weft-staged's stages and operations (staged.hpp has the map).
//
// The control stage's closure, Conn, is the paper's control-logic FSA: each
// method is a state, and it ends by naming the next one and what it waits
// for — children on another stage (wait_children), nothing (it calls the
// next state at once). Reading it top to bottom is reading a connection's
// life:
//
//   read_head ─► head_read ─► got_head ─► [body_dropped] ─► respond ─► found
//       ▲                                                                │
//       │            ┌───────────── fetch_window ◄─── send_reply ◄───────┘
//       │            ▼                  ▲
//       │       window_ready ─► window_sent ─┐            reply_sent
//       └──────────── reply_done ◄───────────┴──────────────┘   ─► close
//
// Ownership: a Conn lives until close() says done; the children it waits for
// are freed after the method that follows the wait returns, so a state
// copies what it keeps (the blocks of a window) into the Conn.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "common/weft_accept.hpp"
#include "staged.hpp"

namespace staged {
namespace {

namespace ws = weft::stage;
using weft::http::BodyKind;
using weft::http::ParseResult;
using ws::Step;

constexpr size_t kInSmall = 2048;              // a connection's first buffer
constexpr size_t kInBuf = 16384 + 2048;        // a whole head (Limits::head_bytes) and some
static_assert(weft::http::Limits{}.head_bytes < kInBuf, "a connection's buffer holds a whole head");

uint64_t seconds_ns(double s) { return s <= 0 ? 0 : static_cast<uint64_t>(s * 1e9); }

uint64_t mix(uint64_t h, uint64_t v) { // splitmix64's finaliser over h ^ v
    uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t file_hash(const FileId &f) { return mix(mix(mix(f.dev, f.ino), f.size), static_cast<uint64_t>(f.mtime_ns)); }

// ---- the blocks partition's table ----------------------------------------

struct BlockKey {
    FileId file;
    uint64_t idx;
    bool operator==(const BlockKey &) const = default;
};
struct BlockKeyHash {
    size_t operator()(const BlockKey &k) const { return mix(file_hash(k.file), k.idx); }
};

// One vproc's blocks, least recently used first out. Only that vproc's
// runner touches it (the stage is partitioned): no lock.
class BlockTable {
public:
    void set_budget(size_t bytes) { budget_ = bytes; }
    // Blocks of files larger than this are read but not kept: one big
    // download must not flush every small file.
    size_t largest_kept() const { return budget_ / 8; }

    const Block *find(const BlockKey &k) {
        auto it = map_.find(k);
        if (it == map_.end()) {
            ++misses;
            return nullptr;
        }
        ++hits;
        lru_.splice(lru_.begin(), lru_, it->second);
        return &it->second->second;
    }

    void insert(const BlockKey &k, const Block &b) {
        if (b.len > budget_ || map_.count(k)) return;
        while (held_ + b.len > budget_ && !lru_.empty()) {
            held_ -= lru_.back().second.len;
            map_.erase(lru_.back().first);
            lru_.pop_back();
        }
        lru_.emplace_front(k, b);
        map_.emplace(k, lru_.begin());
        held_ += b.len;
    }

    size_t held() const { return held_; }
    uint64_t hits = 0, misses = 0;

private:
    using Lru = std::list<std::pair<BlockKey, Block>>;
    Lru lru_;
    std::unordered_map<BlockKey, Lru::iterator, BlockKeyHash> map_;
    size_t held_ = 0, budget_ = 0;
};

struct Conn;
struct AggRead;

// ---- the stages ------------------------------------------------------------

// Every connection of a vproc, for shutdown; touched only by that vproc's
// runner (a connection's closure always continues where it was accepted).
struct ConnList {
    Conn *head = nullptr;
};

struct ControlStage : ws::Stage {
    ControlStage() : ws::Stage("control", {.kind = ws::Kind::kShared}) {}
    ws::Privatized<ConnList> conns;
};

struct NetworkStage : ws::Stage {
    NetworkStage() : ws::Stage("network", {.kind = ws::Kind::kShared}) {}
};

struct FilesStage : ws::Stage {
    FilesStage() : ws::Stage("files", {.kind = ws::Kind::kPartitioned}) {}
    ws::Privatized<std::unique_ptr<weft::http::FileCache>> caches;
};

struct BlocksStage : ws::Stage {
    BlocksStage() : ws::Stage("blocks", {.kind = ws::Kind::kPartitioned}) {}
    ws::Privatized<BlockTable> tables;
};

// Gathers the block reads of a cohort (they wait to be resumed) and, as the
// cohort ends, issues one disk read per run of adjacent blocks of a file.
struct AggregatorStage : ws::Stage {
    AggregatorStage() : ws::Stage("aggregator", {.kind = ws::Kind::kShared}) {}
    ws::Privatized<std::vector<AggRead *>> pending;
    std::atomic<uint64_t> reads{0}, blocks_read{0}; // disk reads issued, blocks they brought
    void cohort_end(int vp) override;
};

struct DiskStage : ws::Stage {
    DiskStage() : ws::Stage("disk", {.kind = ws::Kind::kShared}) {}
};

} // namespace

struct Stages {
    ControlStage control;
    NetworkStage network;
    FilesStage files;
    BlocksStage blocks;
    AggregatorStage aggregator;
    DiskStage disk;
    ws::Scheduler sched{{&control, &network, &files, &blocks, &aggregator, &disk}};
};

namespace {

Stages *g = nullptr;

// ---- network stage ---------------------------------------------------------

// Receive what the socket has (at most cap bytes): at once if it has
// something, else on a weft thread until it does or `deadline`.
struct Recv : ws::Op<ssize_t> {
    Recv(int f, char *b, size_t c, uint64_t d) : fd(f), buf(b), cap(c), deadline(d) {}
    int fd;
    char *buf;
    size_t cap;
    uint64_t deadline;
    int err = 0;

    Step run() override {
        ssize_t n = ::recv(fd, buf, cap, MSG_DONTWAIT);
        if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            err = n < 0 ? errno : 0;
            return done(n);
        }
        return blocking(
            [this] {
                weft_set_io_deadline_ns(deadline);
                result = weft_recv(fd, buf, cap, 0);
                err = result < 0 ? errno : 0;
                weft_set_io_deadline_ns(0);
            },
            &Recv::received);
    }
    Step received() { return done(); }
};

// Read and drop `left` bytes of a request body. true when all came.
struct Discard : ws::Op<bool> {
    Discard(int f, uint64_t l, uint64_t t) : fd(f), left(l), timeout(t) {}
    int fd;
    uint64_t left, timeout;

    Step run() override {
        return blocking(
            [this] {
                weft_set_io_timeout_ns(timeout);
                char sink[4096];
                while (left > 0) {
                    ssize_t n = weft_recv(fd, sink, std::min<uint64_t>(left, sizeof sink), 0);
                    if (n <= 0) break;
                    left -= static_cast<uint64_t>(n);
                }
                weft_set_io_timeout_ns(0);
                result = left == 0;
            },
            &Discard::dropped);
    }
    Step dropped() { return done(); }
};

// Send all of iov: at once as far as the socket takes it, the rest from a
// weft thread, which gives up after `timeout` without progress. true when
// all went. more: a window of the same reply follows (MSG_MORE).
struct Send : ws::Op<bool> {
    static constexpr int kMaxIov = kWindowBlocks + 1;
    Send(int f, uint64_t t) : fd(f), timeout(t) {}
    int fd;
    uint64_t timeout;
    bool more = false;
    struct iovec iov[kMaxIov];
    int n = 0, first = 0;

    void add(const void *p, size_t len) {
        if (len) iov[n++] = {const_cast<void *>(p), len};
    }

    Step run() override {
        const int flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
        while (first < n) {
            struct msghdr m = {};
            m.msg_iov = iov + first;
            m.msg_iovlen = static_cast<size_t>(n - first);
            ssize_t w = ::sendmsg(fd, &m, flags | MSG_DONTWAIT);
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            if (w <= 0) return done(false);
            advance(static_cast<size_t>(w));
        }
        if (first == n) return done(true);
        return blocking(
            [this, flags] {
                weft_set_io_timeout_ns(timeout);
                result = true;
                while (first < n) {
                    struct msghdr m = {};
                    m.msg_iov = iov + first;
                    m.msg_iovlen = static_cast<size_t>(n - first);
                    ssize_t w = weft_sendmsg(fd, &m, flags);
                    if (w <= 0) {
                        result = false;
                        break;
                    }
                    advance(static_cast<size_t>(w));
                }
                weft_set_io_timeout_ns(0);
            },
            &Send::sent);
    }
    Step sent() { return done(); }

    void advance(size_t w) {
        while (first < n && w >= iov[first].iov_len) w -= iov[first++].iov_len;
        if (first < n) {
            iov[first].iov_base = static_cast<char *>(iov[first].iov_base) + w;
            iov[first].iov_len -= w;
        }
    }
};

// ---- files stage -----------------------------------------------------------

// Look a clean path up in the file cache of the partition that owns it.
struct FindFile : ws::Op<weft::http::Lookup> {
    FindFile(std::string_view p, bool dir) : path(p), dir_form(dir) { key = weft::http::hash_bytes(p); }
    std::string path;
    bool dir_form;

    Step run() override {
        thread_local weft::http::CleanPath clean; // 4 KiB: per kernel thread, not per operation
        std::memcpy(clean.buf, path.data(), path.size());
        clean.len = path.size();
        clean.dir_form = dir_form;
        return done(g->files.caches.local()->find(clean));
    }
};

// ---- blocks, aggregator and disk stages ------------------------------------

// A block this vproc's aggregator is to read: waits until a disk read
// brings it (result) or fails (error).
struct AggRead : ws::Op<Block> {
    AggRead(const FileId &f, int d, uint64_t i) : file(f), fd(d), idx(i) {}
    FileId file;
    int fd;
    uint64_t idx;
    std::string error;

    Step run() override {
        g->aggregator.pending.local().push_back(this);
        return wait_resume(&AggRead::arrived);
    }
    Step arrived() {
        if (!error.empty()) throw std::runtime_error(error);
        return done();
    }
};

// Block idx of a file: from this partition's table, else from the disk.
// Partitioned by (file, window stripe): a window's blocks meet in one
// aggregator, so they merge into one read.
struct GetBlock : ws::Op<Block> {
    GetBlock(const FileId &f, int d, uint64_t i) : file(f), fd(d), idx(i) {
        key = mix(file_hash(f), i / kWindowBlocks);
    }
    FileId file;
    int fd;
    uint64_t idx;
    AggRead *read = nullptr;

    Step run() override {
        if (const Block *b = g->blocks.tables.local().find({file, idx})) return done(*b);
        read = &invoke<AggRead>(g->aggregator, file, fd, idx);
        return wait_children(&GetBlock::loaded);
    }
    Step loaded() {
        read->rethrow_if_failed();
        BlockTable &t = g->blocks.tables.local();
        if (file.size <= t.largest_kept()) t.insert({file, idx}, read->result);
        return done(read->result);
    }
};

// One read of blocks [waiters.front()->idx, waiters.back()->idx] of a file,
// on a weft thread; each waiter gets its slice of the buffer.
struct DiskRead : ws::Op<int> {
    explicit DiskRead(std::vector<AggRead *> w) : waiters(std::move(w)) {}
    std::vector<AggRead *> waiters;
    std::shared_ptr<char[]> buf;
    uint64_t off = 0, len = 0, got = 0;
    int err = 0;

    Step run() override {
        const AggRead &a = *waiters.front(), &z = *waiters.back();
        off = a.idx * kBlockBytes;
        len = std::min<uint64_t>(a.file.size, (z.idx + 1) * kBlockBytes) - off;
        buf.reset(new (std::nothrow) char[len]);
        if (!buf) {
            err = ENOMEM;
            return deliver();
        }
        g->aggregator.reads.fetch_add(1, std::memory_order_relaxed);
        g->aggregator.blocks_read.fetch_add(z.idx - a.idx + 1, std::memory_order_relaxed);
        return blocking(
            [this, fd = a.fd] {
                while (got < len) {
                    ssize_t r = weft_pread(fd, buf.get() + got, len - got, static_cast<off_t>(off + got));
                    if (r <= 0) {
                        err = r < 0 ? errno : 0;
                        break;
                    }
                    got += static_cast<uint64_t>(r);
                }
            },
            &DiskRead::deliver);
    }

    Step deliver() {
        for (AggRead *w : waiters) {
            const uint64_t at = w->idx * kBlockBytes - off;
            const uint64_t want = std::min<uint64_t>(kBlockBytes, w->file.size - w->idx * kBlockBytes);
            if (got >= at + want)
                w->result = Block{buf, buf.get() + at, static_cast<uint32_t>(want)};
            else
                w->error = err ? std::string("read: ") + std::strerror(err) : "the file shrank while it was read";
            w->resume();
        }
        return done();
    }
};

} // namespace

void AggregatorStage::cohort_end(int vp) {
    std::vector<AggRead *> &p = pending[static_cast<size_t>(vp)];
    if (p.empty()) return;
    std::sort(p.begin(), p.end(), [](const AggRead *a, const AggRead *b) {
        if (a->file.ino != b->file.ino) return a->file.ino < b->file.ino;
        if (a->file.dev != b->file.dev) return a->file.dev < b->file.dev;
        if (a->file.mtime_ns != b->file.mtime_ns) return a->file.mtime_ns < b->file.mtime_ns;
        if (a->file.size != b->file.size) return a->file.size < b->file.size;
        return a->idx < b->idx;
    });
    // Runs: the same file, each block the one before or the next (the same
    // block asked twice is read once), at most kMaxRunBlocks long.
    for (size_t i = 0, j; i < p.size(); i = j) {
        for (j = i + 1; j < p.size(); ++j) {
            const AggRead &prev = *p[j - 1], &next = *p[j];
            if (!(next.file == prev.file) || next.idx > prev.idx + 1 || next.idx - p[i]->idx >= kMaxRunBlocks) break;
        }
        g->disk.invoke<DiskRead>(std::vector<AggRead *>(p.begin() + static_cast<long>(i), p.begin() + static_cast<long>(j)));
    }
    p.clear();
}

namespace {

// ---- control stage: a connection ---------------------------------------------

struct Conn : ws::Op<int> {
    Conn(Server &srv, int f) : s(srv), fd(f), parser(srv.limits) {}

    Server &s;
    int fd;
    Conn *prev = nullptr, *next = nullptr; // in this vproc's ConnList
    char small[kInSmall];
    std::unique_ptr<char[]> big;
    char *in = small;
    size_t cap = kInSmall, have = 0;
    weft::http::Parser parser;
    weft::http::Request req;
    weft::http::Reply reply;
    ParseResult pr{ParseResult::NeedMore, 0};
    std::string page;                      // a stats page's body while it is sent
    long served = 0;
    uint64_t head_deadline = 0;
    bool idle = false;                     // waiting between requests (keep-alive timeout)
    bool head_sent = false;
    uint64_t pos = 0, end = 0, window_end = 0; // the file range of the reply, and of this window
    // Children of the state that waits for them.
    Recv *recv = nullptr;
    Discard *discard = nullptr;
    FindFile *find = nullptr;
    Send *send = nullptr;
    GetBlock *win[kWindowBlocks] = {};
    uint32_t nwin = 0;
    Block held[kWindowBlocks];             // the window's blocks while it is sent

    bool allow_keep_alive() const {
        return !s.stopping.load(std::memory_order_relaxed) && served < s.opt.max_requests;
    }

    Step run() override {
        ConnList &l = g->control.conns.local();
        next = l.head;
        if (next) next->prev = this;
        l.head = this;
        if (s.stopping.load(std::memory_order_relaxed)) weft_shutdown(fd, SHUT_RD); // serve what came, then end
        head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
        return read_head();
    }

    // State: parse what is buffered; receive more until a head is whole.
    Step read_head() {
        pr = have ? parser.parse(in, have, &req) : ParseResult{ParseResult::NeedMore, 0};
        if (pr.kind != ParseResult::NeedMore) return got_head();
        if (have == cap) {
            if (cap == kInBuf) { // cannot happen while Limits::head_bytes < kInBuf; never overrun
                pr = {ParseResult::Error, 431};
                return got_head();
            }
            big.reset(new char[kInBuf]);
            std::memcpy(big.get(), in, have);
            in = big.get();
            cap = kInBuf;
        }
        idle = have == 0 && served > 0;
        const uint64_t deadline = idle ? weft_now_ns() + seconds_ns(s.opt.keepalive_timeout_s) : head_deadline;
        recv = &invoke<Recv>(g->network, fd, in + have, cap - have, deadline);
        return wait_children(&Conn::head_read);
    }

    Step head_read() {
        const ssize_t n = recv->result;
        if (n <= 0) {
            if (n < 0 && recv->err == ETIMEDOUT) {
                s.counters.timeouts.fetch_add(1, std::memory_order_relaxed);
                if (!idle) { // a slow head gets 408; an idle client just goes
                    pr = {ParseResult::Error, 408};
                    return got_head();
                }
            }
            return close();
        }
        if (idle) head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
        have += static_cast<size_t>(n);
        return read_head();
    }

    // State: a whole head (or an error the parser decided).
    Step got_head() {
        s.counters.requests.fetch_add(1, std::memory_order_relaxed);
        ++served;
        if (pr.kind == ParseResult::Error) { // malformed or refused: answer and close
            s.responder->error(pr.status, &reply);
            return send_reply();
        }
        if (req.has_body) {
            const size_t in_buf = have - req.head_len;
            if (in_buf >= req.body_len) {
                std::memmove(in + req.head_len, in + req.head_len + req.body_len, in_buf - req.body_len);
                have -= static_cast<size_t>(req.body_len);
            } else {
                have = req.head_len;
                discard = &invoke<Discard>(g->network, fd, req.body_len - in_buf, seconds_ns(s.opt.send_timeout_s));
                return wait_children(&Conn::body_dropped);
            }
        }
        return respond();
    }

    Step body_dropped() { return discard->result ? respond() : close(); }

    // State: the reply, or the lookup it needs.
    Step respond() {
        const bool ka = allow_keep_alive();
        std::string_view target = req.target.substr(0, req.target.find('?'));
        if (s.opt.stats && weft::srv::is_stats_target(req.target)) {
            page = weft::srv::stats_json(kProg, "staged", static_cast<double>(weft_now_ns() - s.started_ns) / 1e9,
                                         s.counters, cache_counters(s), stats_extra());
            weft::srv::stats_reply(kProg, req, ka && req.keep_alive, &page, &reply);
            return send_reply();
        }
        if (s.opt.stats && target == "/.weft/stages") {
            page = g->sched.profile_text();
            weft::srv::stats_reply(kProg, req, ka && req.keep_alive, &page, &reply, 200, "text/plain");
            return send_reply();
        }
        thread_local weft::http::CleanPath path; // used before this method returns
        if (!s.responder->prepare(req, ka, &path, &reply)) return send_reply();
        find = &invoke<FindFile>(g->files, path.view(), path.dir_form);
        return wait_children(&Conn::found);
    }

    Step found() {
        if (find->failed()) s.responder->error(500, &reply);
        else s.responder->respond_found(req, allow_keep_alive(), std::move(find->result), &reply);
        return send_reply();
    }

    // State: send the reply; a file body goes a window of blocks at a time.
    Step send_reply() {
        head_sent = false;
        if (reply.body != BodyKind::File) {
            send = &invoke<Send>(g->network, fd, seconds_ns(s.opt.send_timeout_s));
            send->add(reply.head, reply.head_len);
            if (reply.body == BodyKind::Memory) send->add(reply.mem, reply.length);
            return wait_children(&Conn::reply_sent);
        }
        pos = reply.offset;
        end = reply.offset + reply.length;
        return fetch_window();
    }

    Step fetch_window() {
        const weft::http::FileEntry &e = *reply.file.get();
        const FileId id{e.dev, e.ino, e.size, e.mtime_ns};
        const uint64_t first = pos / kBlockBytes;
        const uint64_t last = std::min((end - 1) / kBlockBytes, first + kWindowBlocks - 1);
        nwin = 0;
        for (uint64_t b = first; b <= last; ++b) win[nwin++] = &invoke<GetBlock>(g->blocks, id, e.fd, b);
        return wait_children(&Conn::window_ready);
    }

    Step window_ready() {
        for (uint32_t i = 0; i < nwin; ++i)
            if (win[i]->failed()) { // the promised length cannot be kept: end the connection
                weft::srv::count_reply(s.counters, reply.status, 0, false);
                return close();
            }
        send = &invoke<Send>(g->network, fd, seconds_ns(s.opt.send_timeout_s));
        if (!head_sent) send->add(reply.head, reply.head_len);
        uint64_t at = pos;
        for (uint32_t i = 0; i < nwin; ++i) {
            held[i] = win[i]->result;
            const uint64_t start = win[i]->idx * kBlockBytes;
            const uint64_t stop = std::min<uint64_t>(end, start + held[i].len);
            send->add(held[i].data + (at - start), stop - at);
            at = stop;
        }
        window_end = at;
        send->more = window_end < end;
        return wait_children(&Conn::window_sent);
    }

    Step window_sent() {
        for (uint32_t i = 0; i < nwin; ++i) held[i] = Block{};
        if (!send->result) {
            weft::srv::count_reply(s.counters, reply.status, 0, false);
            return close();
        }
        head_sent = true;
        pos = window_end;
        return pos < end ? fetch_window() : reply_done(true);
    }

    Step reply_sent() { return reply_done(send->result); }

    Step reply_done(bool ok) {
        weft::srv::count_reply(s.counters, reply.status, reply.head_len + reply.length, ok);
        reply.file.reset(); // let the cache close a replaced file now
        if (!ok || !reply.keep_alive) return close();
        std::memmove(in, in + req.head_len, have - req.head_len);
        have -= req.head_len;
        head_deadline = weft_now_ns() + seconds_ns(s.opt.header_timeout_s);
        return read_head();
    }

    // State: the end.
    Step close() {
        ConnList &l = g->control.conns.local();
        (prev ? prev->next : l.head) = next;
        if (next) next->prev = prev;
        reply.file.reset();
        weft_close(fd);
        s.counters.open_conns.fetch_sub(1, std::memory_order_relaxed);
        if (s.live.fetch_sub(1, std::memory_order_acq_rel) == 1 && s.stopping.load()) weft_sem_post(&s.drained);
        return done();
    }

    std::string stats_extra() const {
        std::string x = weft::srv::runtime_stats_json();
        uint64_t hits = 0, misses = 0, held_bytes = 0;
        for (size_t v = 0; v < g->blocks.tables.size(); ++v) {
            const BlockTable &t = g->blocks.tables[v];
            hits += t.hits, misses += t.misses, held_bytes += t.held();
        }
        x += ",\n \"blocks\": {\"hits\": " + std::to_string(hits) + ", \"misses\": " + std::to_string(misses) +
             ", \"bytes\": " + std::to_string(held_bytes) +
             ", \"disk_reads\": " + std::to_string(g->aggregator.reads.load()) +
             ", \"blocks_read\": " + std::to_string(g->aggregator.blocks_read.load()) + "},\n \"stages\": " +
             g->sched.profile_json();
        return x;
    }
};

// Shutdown, on each vproc: SHUT_RD ends every connection there waiting for
// (or reading) a request; one sending a reply finishes it first.
struct ShutdownConns : ws::Op<int> {
    Step run() override {
        for (Conn *c = g->control.conns.local().head; c; c = c->next) weft_shutdown(c->fd, SHUT_RD);
        return done();
    }
};

ssize_t weft_pread_fn(int fd, void *buf, size_t n, off_t off) { return weft_pread(fd, buf, n, off); }
int weft_close_fn(int fd) { return weft_close(fd); }

} // namespace

void stages_start(Server &s) {
    g = new Stages;
    s.stages = g;
    const size_t vprocs = g->files.caches.size();
    weft::http::CacheOptions co;
    co.max_entries = std::max<size_t>(16, static_cast<size_t>(s.opt.fd_cache) / vprocs);
    co.follow_symlinks = s.opt.follow_symlinks;
    co.server = kProg;
    co.pread = weft_pread_fn;
    co.close = weft_close_fn;
    for (size_t v = 0; v < vprocs; ++v) {
        g->files.caches[v] = std::make_unique<weft::http::FileCache>(s.root_fd, co);
        g->blocks.tables[v].set_budget((static_cast<size_t>(s.opt.cache_mb) << 20) / vprocs);
    }
    g->sched.start();
}

void stages_stop(Server &s, std::string *profile) {
    g->sched.stop();
    if (profile) *profile = g->sched.profile_text();
    s.stages = nullptr;
    delete g;
    g = nullptr;
}

weft::http::FileCache &first_cache(Server &) { return *g->files.caches[0]; }

void connection_start(Server &s, int fd) {
    s.live.fetch_add(1, std::memory_order_relaxed);
    s.counters.open_conns.fetch_add(1, std::memory_order_relaxed);
    g->control.invoke<Conn>(s, fd);
}

void connections_shutdown(Server &) {
    for (int vp = 0; vp < g->sched.vprocs(); ++vp) g->control.invoke_on<ShutdownConns>(vp);
}

weft::http::FileCache::Counters cache_counters(Server &) {
    weft::http::FileCache::Counters sum{};
    for (size_t v = 0; v < g->files.caches.size(); ++v) {
        auto c = g->files.caches[v]->counters();
        sum.hits += c.hits, sum.misses += c.misses, sum.revalidations += c.revalidations;
        sum.evictions += c.evictions, sum.entries += c.entries, sum.content_bytes += c.content_bytes;
    }
    return sum;
}

} // namespace staged
