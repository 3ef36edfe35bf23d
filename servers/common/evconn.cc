#include "evconn.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>

namespace weft::srv {

using http::BodyKind;
using http::ParseResult;

namespace {

// A whole request head (Limits::head_bytes) plus the start of the next one.
constexpr size_t kBigBuf = 16384 + 2048;
constexpr uint64_t kSendfileMax = 1ull << 30; // per call

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

// A blocking socket's SO_SNDTIMEO is send_timeout / kSndtimeoSlices, and
// send() tries again until a whole send_timeout has passed without
// progress. SO_SNDTIMEO = send_timeout would not do: the kernel applies it
// to each sendmsg inside a sendfile (splice), so a sendfile that made
// progress before the client stopped reading returns its count only after
// up to three timeouts, and the next call waits one more (Linux 6.18: a
// stopped reader was dropped after 4 s with a 1 s send timeout; with
// slices, after about 1.6 s).
constexpr uint64_t kSndtimeoSlices = 8;

} // namespace

EvConn::EvConn(int fd, const EvSite &site, uint64_t now_ns)
    : fd_(fd), deadline_(now_ns + site.header_timeout_ns), cap_(sizeof small_), in_(small_), parser_(site.limits) {
    static_assert(http::Limits{}.head_bytes < kBigBuf, "a connection's buffer holds a whole head");
}

EvConn::~EvConn() {
    reply_.file.reset();
    if (fd_ >= 0) close(fd_);
}

EvConn::Timer EvConn::timer() const {
    if (phase_ == Phase::Send) return kSend;
    return phase_ == Phase::Head && have_ == 0 && served_ > 0 ? kKeepAlive : kHeader;
}

bool EvConn::grow() {
    if (cap_ == kBigBuf) return false; // cannot happen while head_bytes < kBigBuf: never overrun
    big_.reset(new (std::nothrow) char[kBigBuf]);
    if (!big_) return false;
    std::memcpy(big_.get(), in_, have_);
    in_ = big_.get();
    cap_ = kBigBuf;
    return true;
}

Next EvConn::receive(const EvSite &site, uint64_t now_ns) {
    for (;;) {
        if (phase_ == Phase::Send) return Next::Write;
        if (phase_ == Phase::Body) { // drop the request body, then answer
            char sink[4096];
            ssize_t n = recv(fd_, sink, std::min<uint64_t>(discard_, sizeof sink), 0);
            if (n == 0) return Next::Close;
            if (n < 0) {
                if (errno == EINTR) continue;
                return would_block(errno) && !site.blocking ? Next::Read : Next::Close;
            }
            discard_ -= static_cast<uint64_t>(n);
            if (discard_ == 0) return after_parse(site, now_ns, {ParseResult::Done, 0});
            if (site.blocking) return Next::Read;
            continue;
        }
        if (have_ == cap_ && !grow()) return after_parse(site, now_ns, {ParseResult::Error, 431});
        ssize_t n = recv(fd_, in_ + have_, cap_ - have_, 0);
        if (n == 0) return Next::Close;
        if (n < 0) {
            if (errno == EINTR) continue;
            return would_block(errno) && !site.blocking ? Next::Read : Next::Close;
        }
        if (have_ == 0 && served_ > 0) deadline_ = now_ns + site.header_timeout_ns; // idle -> a new head
        have_ += static_cast<size_t>(n);
        ParseResult pr = parser_.parse(in_, have_, &req_);
        if (pr.kind != ParseResult::NeedMore) return after_parse(site, now_ns, pr);
        if (site.blocking) return Next::Read; // one read per readiness: the next could block
    }
}

// A parsed head (Done), the end of its body (Done again, from the Body
// phase), or a parser error: build the reply.
Next EvConn::after_parse(const EvSite &site, uint64_t now_ns, ParseResult pr) {
    head_sent_ = 0;
    body_sent_ = 0;
    if (pr.kind == ParseResult::Error) {
        // Malformed or refused: answer and close; what follows cannot be trusted.
        site.counters->requests.fetch_add(1, std::memory_order_relaxed);
        site.responder->error(pr.status, &reply_);
        close_after_ = true;
    } else {
        if (phase_ == Phase::Head) {
            site.counters->requests.fetch_add(1, std::memory_order_relaxed);
            ++served_;
            if (req_.has_body) {
                size_t in_buf = have_ - req_.head_len;
                if (in_buf >= req_.body_len) { // all of it is here: cut it out
                    size_t body = static_cast<size_t>(req_.body_len);
                    std::memmove(in_ + req_.head_len, in_ + req_.head_len + body, in_buf - body);
                    have_ -= body;
                } else {
                    discard_ = req_.body_len - in_buf;
                    have_ = req_.head_len;
                    phase_ = Phase::Body;
                    return site.blocking ? Next::Read : receive(site, now_ns);
                }
            }
        }
        const bool stopping = site.stopping && site.stopping->load(std::memory_order_relaxed);
        const bool allow_keep_alive = !stopping && served_ < site.max_requests;
        if (site.stats && is_stats_target(req_.target)) {
            http::FileCache::Counters cc{};
            if (site.responder->cache()) cc = site.responder->cache()->counters();
            stats_body_ = stats_json(site.server_name, site.mode, static_cast<double>(now_ns - site.started_ns) / 1e9,
                                     *site.counters, cc);
            stats_reply(site.server_name, req_, allow_keep_alive && req_.keep_alive, &stats_body_, &reply_);
        }
        else
            site.responder->respond(req_, allow_keep_alive, &reply_);
        close_after_ = !reply_.keep_alive;
    }
    phase_ = Phase::Send;
    deadline_ = now_ns + site.send_timeout_ns;
    return Next::Reply;
}

Next EvConn::send(const EvSite &site, uint64_t now_ns) {
    if (phase_ != Phase::Send) return Next::Read;
    const uint64_t body_len = reply_.body == BodyKind::None ? 0 : reply_.length;
    uint64_t stalled_since = 0; // blocking: since when no byte has gone out
    for (;;) {
        ssize_t n;
        if (head_sent_ < reply_.head_len) {
            struct iovec iov[2] = {{reply_.head + head_sent_, reply_.head_len - head_sent_}, {nullptr, 0}};
            int iovcnt = 1, flags = MSG_NOSIGNAL;
            if (reply_.body == BodyKind::Memory && body_len > 0) {
                iov[1] = {const_cast<char *>(reply_.mem), static_cast<size_t>(body_len)};
                iovcnt = 2;
            } else if (reply_.body == BodyKind::File && body_len > 0) {
                flags |= MSG_MORE; // the head and the start of the file in one segment
            }
            struct msghdr msg {};
            msg.msg_iov = iov;
            msg.msg_iovlen = static_cast<size_t>(iovcnt);
            n = sendmsg(fd_, &msg, flags);
            if (n > 0) {
                size_t head_part = std::min<size_t>(static_cast<size_t>(n), reply_.head_len - head_sent_);
                head_sent_ += static_cast<uint32_t>(head_part);
                body_sent_ += static_cast<size_t>(n) - head_part;
            }
        } else if (body_sent_ < body_len) {
            if (reply_.body == BodyKind::Memory) {
                n = ::send(fd_, reply_.mem + body_sent_, static_cast<size_t>(body_len - body_sent_), MSG_NOSIGNAL);
            } else {
                off_t off = static_cast<off_t>(reply_.offset + body_sent_);
                n = sendfile(fd_, reply_.file->fd, &off, std::min(body_len - body_sent_, kSendfileMax));
                if (n == 0) { // the file shrank: the promised length cannot be kept
                    count_reply(site, false);
                    return Next::Close;
                }
            }
            if (n > 0) body_sent_ += static_cast<uint64_t>(n);
        } else {
            return reply_done(site, now_ns);
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (would_block(errno) && !site.blocking) return Next::Write;
            if (would_block(errno)) { // blocking: SO_SNDTIMEO passed with nothing sent
                const uint64_t t = weft::srv::now_ns();
                if (!stalled_since) stalled_since = t - site.send_timeout_ns / kSndtimeoSlices;
                if (t - stalled_since < site.send_timeout_ns) continue;
            }
            count_reply(site, false); // the client went away, or (blocking) send_timeout passed
            return Next::Close;
        }
        stalled_since = 0;
        deadline_ = now_ns + site.send_timeout_ns; // progress
    }
}

Next EvConn::reply_done(const EvSite &site, uint64_t now_ns) {
    count_reply(site, true);
    reply_.file.reset(); // let the cache close a replaced file now
    if (close_after_) return Next::Close;
    std::memmove(in_, in_ + req_.head_len, have_ - req_.head_len);
    have_ -= req_.head_len;
    phase_ = Phase::Head;
    if (have_ == 0) {
        deadline_ = now_ns + site.keepalive_timeout_ns;
        return Next::Read;
    }
    deadline_ = now_ns + site.header_timeout_ns;
    ParseResult pr = parser_.parse(in_, have_, &req_); // a pipelined request
    return pr.kind == ParseResult::NeedMore ? Next::Read : after_parse(site, now_ns, pr);
}

void EvConn::count_reply(const EvSite &site, bool sent) const {
    weft::srv::count_reply(*site.counters, reply_.status, reply_.head_len + reply_.length, sent);
}

Next EvConn::expire(const EvSite &site) {
    site.counters->timeouts.fetch_add(1, std::memory_order_relaxed);
    if (phase_ == Phase::Head && !(have_ == 0 && served_ > 0)) { // a slow head gets 408; an idle client just goes
        site.counters->requests.fetch_add(1, std::memory_order_relaxed);
        site.responder->error(408, &reply_);
        struct iovec iov[2] = {{reply_.head, reply_.head_len},
                               {const_cast<char *>(reply_.mem), static_cast<size_t>(reply_.length)}};
        struct msghdr msg {};
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        count_reply(site, n == static_cast<ssize_t>(reply_.head_len + reply_.length));
    }
    return Next::Close;
}

uint64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- DeadlineList ----

void DeadlineList::push(EvConn *c) {
    c->list = id_;
    c->next = nullptr;
    c->prev = tail_;
    (tail_ ? tail_->next : head_) = c;
    tail_ = c;
    ++size_;
}

void DeadlineList::remove(EvConn *c) {
    if (c->list != id_) return;
    (c->prev ? c->prev->next : head_) = c->next;
    (c->next ? c->next->prev : tail_) = c->prev;
    c->prev = c->next = nullptr;
    c->list = 0;
    --size_;
}

// ---- the rest ----

BusyReply::BusyReply(const http::Responder &r) {
    http::Reply busy;
    r.error(503, &busy);
    len = std::min<size_t>(busy.head_len, sizeof bytes);
    std::memcpy(bytes, busy.head, len);
    size_t body = std::min<size_t>(busy.length, sizeof bytes - len);
    std::memcpy(bytes + len, busy.mem, body);
    len += body;
}

void BusyReply::refuse(int fd, ServerCounters *c) const {
    ssize_t n = ::send(fd, bytes, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    close(fd);
    if (c) c->rejected_busy.fetch_add(1, std::memory_order_relaxed);
}

void prepare_socket(int fd, bool blocking, uint64_t send_timeout_ns) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
    if (blocking && send_timeout_ns > 0) {
        const uint64_t slice = std::max<uint64_t>(send_timeout_ns / kSndtimeoSlices, 1000); // 0 would mean never
        struct timeval tv;
        tv.tv_sec = static_cast<time_t>(slice / 1000000000ull);
        tv.tv_usec = static_cast<suseconds_t>(slice % 1000000000ull / 1000);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
}

void print_banner(const char *prog, const char *root, const char *addr, const char *details) {
    std::printf("%s: serving %s on http://%s/ (%s)\n", prog, root, addr, details);
    std::fflush(stdout);
}

} // namespace weft::srv
