// weft_sendfile in three strategies (the EuroSys'07 study, §4.3, added the
// first two to Capriccio; io_uring adds the third). All three send the same
// bytes and honour the same contract: like sendfile(2) on a blocking
// socket, everything up to EOF, unless an error or the I/O deadline stops
// it (then what was sent, or -1).
//
//  - nonblocking: sendfile on the socket made O_NONBLOCK, parking on
//    writability. sendfile would block the whole vproc on a page-cache miss,
//    so the range it is about to send is checked first (cachestat, Linux
//    6.5), and a range that may miss is sent by a worker of the offload
//    pool (what the socket cannot take then is read in there).
//  - blocking: the whole transfer runs in one offload worker, which may
//    block in sendfile as long as it likes (the study's best Knot, knot-b).
//    With an I/O deadline the socket is made non-blocking and the worker
//    waits for room with poll(2) until the deadline, so a client that stops
//    reading cannot hold a worker (and the thread) forever.
//  - splice: io_uring moves file -> pipe -> socket, through a pipe that
//    belongs to this transfer alone: taken from the vproc's pool of empty
//    pipes, given back empty (or closed when bytes were left in it). Without
//    io_uring it is the nonblocking strategy.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#include "io/offload.hpp"
#include "io/wrap.hpp"

namespace weft::detail {
namespace {

constexpr size_t kProbe = kPageCacheProbe;
constexpr size_t kSendMax = 0x7ffff000;     // the most one sendfile moves (Linux)
constexpr size_t kPage = 4096;

#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
struct CachestatRange {
    uint64_t off, len;
};
struct Cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

ssize_t send_nonblocking(Vproc *&vp, FdState *out, int out_fd, int in_fd, off_t &pos, size_t count, const void *site) {
    ensure_nonblock(vp, out, out_fd);
    CallDeadline dl;
    size_t done = 0;
    while (done < count) {
        size_t want = count - done < kSendMax ? count - done : kSendMax;
        size_t probe = want < kProbe ? want : kProbe;
        vp->stats.io_syscalls.add();
        // A probe's worth at a time, so the next stretch is checked before it is sent.
        size_t chunk = want < probe ? want : probe;
        if (page_cache_may_miss(in_fd, static_cast<uint64_t>(pos), probe)) {
            size_t sent = 0;
            int err = 0;
            auto call = [&] { sent = sendfile_stretch(out_fd, in_fd, &pos, chunk, &err); };
            offload_call(vp, call, site);
            done += sent;
            chunk -= sent;
            if (err) return done ? static_cast<ssize_t>(done) : -err;
            if (!chunk) continue;
            // The socket was full (the rest is in the page cache now), or the file ended.
        }
        // want 0: no drained rule. sendfile can stop short with room left
        // in the socket (seen on loopback with io_uring: no POLLOUT edge
        // ever followed), so only EAGAIN, which is certain, makes it park.
        ssize_t r = retry_on_fd(vp, out, out_fd, POLLOUT, 0, [&] { return sys(sendfile(out_fd, in_fd, &pos, chunk)); },
                                dl, site);
        if (r == -EPIPE) consume_sigpipe();
        if (r < 0) return done ? static_cast<ssize_t>(done) : r;
        if (r == 0) break; // EOF
        done += static_cast<size_t>(r);
    }
    return static_cast<ssize_t>(done);
}

ssize_t send_blocking(Vproc *&vp, FdState *out, int out_fd, int in_fd, off_t &pos, size_t count, const void *site) {
    // A worker may block in sendfile only on a blocking socket; one weft or
    // the program made non-blocking is waited on with poll(2) there instead.
    uint64_t deadline = CallDeadline().get(vp->current);
    if (deadline == kNoDeadline) deadline = 0; // nothing to count down (and the worker cannot be cut short)
    if (deadline && out && !out->weft_nonblock && !out->user_nonblock) ensure_nonblock(vp, out, out_fd);
    const bool nonblock = out && (out->weft_nonblock || out->user_nonblock);
    ssize_t result = 0;
    auto call = [&] {
        size_t done = 0;
        while (done < count) {
            size_t want = count - done < kSendMax ? count - done : kSendMax;
            ssize_t r = sendfile(out_fd, in_fd, &pos, want);
            if (r > 0) {
                done += static_cast<size_t>(r);
                continue;
            }
            if (r == 0) break;
            if (errno == EINTR) continue;
            if (errno == EAGAIN && nonblock && !(out->user_nonblock)) {
                int ms = -1;
                if (deadline) {
                    uint64_t now = now_ns();
                    if (now >= deadline) {
                        errno = ETIMEDOUT;
                        result = done ? static_cast<ssize_t>(done) : -ETIMEDOUT;
                        return;
                    }
                    ms = static_cast<int>((deadline - now + 999999) / 1000000);
                }
                pollfd p{out_fd, POLLOUT, 0};
                ::poll(&p, 1, ms);
                continue;
            }
            result = done ? static_cast<ssize_t>(done) : -errno;
            return;
        }
        result = static_cast<ssize_t>(done);
    };
    offload_call(vp, call, site);
    return result;
}

// Pipes for splicing. Each transfer needs its own: two threads of a vproc
// splicing through one pipe would interleave their bytes (and one stalled
// client would stall the other). A vproc (= kernel thread) keeps the empty
// pipes of finished transfers for the next ones, up to kPipesKept.
struct SplicePipe {
    int rd = -1, wr = -1;
};
constexpr size_t kPipesKept = 64;
thread_local std::vector<SplicePipe> t_pipes;

bool take_pipe(SplicePipe *p) {
    if (!t_pipes.empty()) {
        *p = t_pipes.back();
        t_pipes.pop_back();
        return true;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    p->rd = fds[0];
    p->wr = fds[1];
    fcntl(p->wr, F_SETPIPE_SZ, 1 << 20); // fewer round trips; the default 64 KiB works too
    return true;
}

void drop_pipe(SplicePipe &p) {
    close(p.rd);
    close(p.wr);
    p.rd = p.wr = -1;
}

void give_back_pipe(SplicePipe &p) { // empty: every byte spliced in was spliced out
    if (t_pipes.size() < kPipesKept) t_pipes.push_back(p);
    else drop_pipe(p);
    p.rd = p.wr = -1;
}

ssize_t send_splice(Vproc *&vp, FdState *out, int out_fd, int in_fd, off_t &pos, size_t count, const void *site) {
    if (!vp->reactor->can_submit()) return send_nonblocking(vp, out, out_fd, in_fd, pos, count, site);
    SplicePipe p;
    if (!take_pipe(&p)) {
        // Out of descriptors (a pipe costs two per transfer in flight): send
        // this one without a pipe rather than fail it.
        if (errno == EMFILE || errno == ENFILE) return send_nonblocking(vp, out, out_fd, in_fd, pos, count, site);
        return -errno;
    }
    struct Return { // every way out gives the pipe back (or drops it)
        SplicePipe &p;
        ~Return() {
            if (p.rd >= 0) give_back_pipe(p);
        }
    } give_back{p};
    CallDeadline dl;
    size_t done = 0;
    auto reset_pipe = [&] { drop_pipe(p); };
    while (done < count) {
        size_t want = count - done < (size_t{1} << 20) ? count - done : (size_t{1} << 20);
        IoOp in{IoKind::Splice};
        in.fd = in_fd;
        in.off = static_cast<uint64_t>(pos);
        in.fd2 = p.wr;
        in.len = static_cast<unsigned>(want);
        in.flags = SPLICE_F_MOVE;
        int r = run_op(vp, &in, dl, site);
        if (r <= 0) {
            if (r < 0) return done ? static_cast<ssize_t>(done) : r;
            break; // EOF
        }
        size_t inpipe = static_cast<size_t>(r);
        while (inpipe) {
            IoOp o{IoKind::Splice};
            o.fd = p.rd;
            o.fd2 = out_fd;
            o.len = static_cast<unsigned>(inpipe);
            o.flags = SPLICE_F_MOVE;
            uint32_t seq = out ? out->seq.load(std::memory_order_acquire) : 0;
            int w = run_op(vp, &o, dl, site);
            // io_uring answers EAGAIN for a full socket instead of waiting:
            // wait for room like any writer, then splice again.
            if (w == -EAGAIN && out && !out->user_nonblock) {
                if (int e = wait_fd(vp, out, out_fd, POLLOUT, seq, dl, site)) w = -e;
                else continue;
            }
            if (w <= 0) {
                reset_pipe(); // bytes may be left in it
                if (w == -EPIPE) consume_sigpipe();
                size_t sent = done + (static_cast<size_t>(r) - inpipe);
                pos += static_cast<off_t>(static_cast<size_t>(r) - inpipe);
                return sent ? static_cast<ssize_t>(sent) : (w < 0 ? w : -EPIPE);
            }
            inpipe -= static_cast<size_t>(w);
        }
        pos += static_cast<off_t>(r);
        done += static_cast<size_t>(r);
    }
    return static_cast<ssize_t>(done);
}

} // namespace

bool page_cache_may_miss(int fd, uint64_t off, size_t len) {
    static std::atomic<bool> unsupported{false};
    if (unsupported.load(std::memory_order_relaxed)) return false;
    CachestatRange r{off & ~(kPage - 1), 0};
    r.len = ((off + len + kPage - 1) & ~(kPage - 1)) - r.off;
    Cachestat cs{};
    if (syscall(SYS_cachestat, fd, &r, &cs, 0) != 0) {
        if (errno == ENOSYS) unsupported.store(true, std::memory_order_relaxed);
        return false;
    }
    return cs.nr_cache < r.len / kPage;
}

size_t sendfile_stretch(int out_fd, int in_fd, off_t *pos, size_t len, int *err) {
    size_t sent = 0;
    *err = 0;
    while (sent < len) {
        ssize_t n = sendfile(out_fd, in_fd, pos, len - sent);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) page_cache_read_in(in_fd, static_cast<uint64_t>(*pos), len - sent);
        else if (n < 0) *err = errno;
        break; // full, an error, or the file ended
    }
    return sent;
}

void page_cache_read_in(int fd, uint64_t off, size_t len) {
    static thread_local std::vector<char> scratch(size_t{1} << 20);
    while (len) {
        size_t n = len < scratch.size() ? len : scratch.size();
        ssize_t r = pread(fd, scratch.data(), n, static_cast<off_t>(off));
        if (r <= 0) break;
        off += static_cast<uint64_t>(r);
        len -= static_cast<size_t>(r);
    }
}

} // namespace weft::detail

using namespace weft::detail;

extern "C" {

ssize_t weft_sendfile_mode(int out_fd, int in_fd, off_t *offset, size_t count, int mode) {
    Vproc *vp = tls_vproc;
    if (!vp) return sendfile(out_fd, in_fd, offset, count);
    if (mode < WEFT_SENDFILE_DEFAULT || mode > WEFT_SENDFILE_SPLICE) {
        errno = EINVAL;
        return -1;
    }
    if (mode == WEFT_SENDFILE_DEFAULT) mode = vp->rt->cfg.sendfile_mode;
    FdState *out = fd_state(vp, out_fd);
    FdState *in = fd_state(vp, in_fd);
    if (!out || !in || out->kind == FdKind::Unknown || in->kind == FdKind::Unknown) {
        errno = EBADF;
        return -1;
    }
    // Offsets are explicit throughout; with offset == NULL the file position
    // is the start and is moved past what was sent, as sendfile(2) does.
    off_t pos;
    if (offset) {
        if (*offset < 0) {
            errno = EINVAL;
            return -1;
        }
        pos = *offset;
    } else {
        pos = lseek(in_fd, 0, SEEK_CUR);
        if (pos < 0) return -1;
    }
    const void *site = WEFT_SITE();
    ssize_t r;
    if (count == 0) r = 0;
    else if (mode == WEFT_SENDFILE_BLOCKING) r = send_blocking(vp, out, out_fd, in_fd, pos, count, site);
    else if (mode == WEFT_SENDFILE_SPLICE) r = send_splice(vp, out, out_fd, in_fd, pos, count, site);
    else r = send_nonblocking(vp, out, out_fd, in_fd, pos, count, site);
    if (offset) *offset = pos;
    else lseek(in_fd, pos, SEEK_SET);
    if (r > 0) vp->stats.sendfile_bytes.add(static_cast<uint64_t>(r));
    return posix_result(r);
}

ssize_t weft_sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
    return weft_sendfile_mode(out_fd, in_fd, offset, count, WEFT_SENDFILE_DEFAULT);
}

} // extern "C"
