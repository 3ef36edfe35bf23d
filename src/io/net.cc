// Blocking-style wrappers for sockets, pipes and other pollable descriptors:
// socket, accept, connect, read/write and their vector and socket forms,
// shutdown, close, poll, fcntl. See include/weft/weft.h for the contract and
// io/fd.hpp for the model.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdarg>
#include <vector>

#include "io/wrap.hpp"

namespace weft::detail {

void ensure_nonblock(Vproc *vp, FdState *s, int fd) {
    if (s->user_nonblock || s->weft_nonblock) return;
    vp->stats.io_syscalls.add(2);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0) s->weft_nonblock = true;
}

namespace {

// One non-blocking read or write of an iovec array, by the descriptor's kind.
// A single buffer takes the plain call (recv/send, read/write): the kernel's
// vector forms cost ~30 ns more per call (an iovec or msghdr import), which
// is a tenth of a small transfer.
[[gnu::always_inline]] inline ssize_t try_readv(FdState *s, int fd, iovec *iov, int cnt) {
    const bool one = cnt == 1;
    switch (s->kind) {
    case FdKind::Stream:
    case FdKind::Socket: {
        if (one) return sys(recv(fd, iov->iov_base, iov->iov_len, MSG_DONTWAIT));
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = static_cast<size_t>(cnt);
        return sys(recvmsg(fd, &m, MSG_DONTWAIT));
    }
    case FdKind::Pipe:
        if (!s->weft_nonblock && !s->user_nonblock) return sys(preadv2(fd, iov, cnt, -1, RWF_NOWAIT));
        [[fallthrough]];
    default: // O_NONBLOCK is set (by weft or the program)
        return one ? sys(read(fd, iov->iov_base, iov->iov_len)) : sys(readv(fd, iov, cnt));
    }
}

[[gnu::always_inline]] inline ssize_t try_writev(FdState *s, int fd, const iovec *iov, int cnt) {
    const bool one = cnt == 1;
    ssize_t r;
    switch (s->kind) {
    case FdKind::Stream:
    case FdKind::Socket: {
        if (one) return sys(send(fd, iov->iov_base, iov->iov_len, MSG_DONTWAIT | MSG_NOSIGNAL));
        msghdr m{};
        m.msg_iov = const_cast<iovec *>(iov);
        m.msg_iovlen = static_cast<size_t>(cnt);
        return sys(sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL));
    }
    case FdKind::Pipe:
        if (!s->weft_nonblock && !s->user_nonblock) {
            r = sys(pwritev2(fd, iov, cnt, -1, RWF_NOWAIT));
            break;
        }
        [[fallthrough]];
    default: r = one ? sys(write(fd, iov->iov_base, iov->iov_len)) : sys(writev(fd, iov, cnt)); break;
    }
    if (r == -EPIPE) consume_sigpipe(); // blocked on vprocs: take it, the caller gets EPIPE
    return r;
}

// A pipe whose file lacks RWF_NOWAIT support (EOPNOTSUPP): treat it as a
// plain pollable descriptor made non-blocking.
bool demote_to_pollable(Vproc *vp, FdState *s, int fd, ssize_t r) {
    if (r != -EOPNOTSUPP || s->kind != FdKind::Pipe) return false;
    s->kind = FdKind::Pollable;
    ensure_nonblock(vp, s, fd);
    return true;
}

ssize_t do_readv(Vproc *&vp, int fd, iovec *iov, int cnt, const void *site) {
    FdState *s = fd_state(vp, fd);
    const FdKind kind = s ? FdKind(s->kind) : FdKind::Unknown; // read once (a close may reset it)
    if (kind == FdKind::Unknown) return sys(readv(fd, iov, cnt)); // EBADF, or out of range
    size_t want = iov_total(iov, cnt);
    if (want == 0) return 0; // read(2) of nothing returns 0 at once, even on an empty socket
    if (kind == FdKind::File) return file_rw(vp, s, fd, false, iov, cnt, -1, site);
    CallDeadline dl;
    for (;;) {
        ssize_t r = retry_on_fd(vp, s, fd, POLLIN, want, [&] { return try_readv(s, fd, iov, cnt); }, dl, site);
        if (!demote_to_pollable(vp, s, fd, r)) return r;
    }
}

// A blocking write moves everything (POSIX: a blocking write to a pipe or
// socket returns only when all is written), unless the descriptor is the
// program's non-blocking one; an error or timeout after some progress
// returns the progress. The rest of a short write goes on from a copy of the
// caller's iovecs (write_rest); the first attempt, which on a socket or pipe
// with room is the only one, copies nothing.
ssize_t write_rest(Vproc *&vp, FdState *s, int fd, const iovec *iov_in, int cnt, size_t done, CallDeadline &dl,
                   const void *site);

ssize_t do_writev(Vproc *&vp, int fd, const iovec *iov, int cnt, const void *site) {
    FdState *s = fd_state(vp, fd);
    const FdKind kind = s ? FdKind(s->kind) : FdKind::Unknown; // read once (a close may reset it)
    if (kind == FdKind::Unknown) {
        ssize_t r = sys(writev(fd, iov, cnt));
        if (r == -EPIPE) consume_sigpipe();
        return r;
    }
    if (kind == FdKind::File) return file_rw(vp, s, fd, true, iov, cnt, -1, site);
    const size_t total = iov_total(iov, cnt);
    CallDeadline dl;
    ssize_t r = retry_on_fd(vp, s, fd, POLLOUT, total, [&] { return try_writev(s, fd, iov, cnt); }, dl, site);
    if (__builtin_expect(r >= 0 && (static_cast<size_t>(r) == total || s->user_nonblock), 1)) return r;
    if (r < 0 && !demote_to_pollable(vp, s, fd, r)) return r;
    return write_rest(vp, s, fd, iov, cnt, r < 0 ? 0 : static_cast<size_t>(r), dl, site);
}

[[gnu::noinline]] ssize_t write_rest(Vproc *&vp, FdState *s, int fd, const iovec *iov_in, int cnt, size_t done,
                                     CallDeadline &dl, const void *site) {
    IovCopy copy(iov_in, cnt);
    iovec *iov = copy.data();
    const size_t total = iov_total(iov, cnt);
    iov_advance(iov, cnt, done);
    while (done < total) {
        ssize_t r = retry_on_fd(vp, s, fd, POLLOUT, total - done, [&] { return try_writev(s, fd, iov, cnt); }, dl, site);
        if (demote_to_pollable(vp, s, fd, r)) continue;
        if (r < 0) return done ? static_cast<ssize_t>(done) : r;
        done += static_cast<size_t>(r);
        if (s->user_nonblock) break;
        iov_advance(iov, cnt, static_cast<size_t>(r));
    }
    return static_cast<ssize_t>(done);
}

// recv/recvmsg: user flags kept; MSG_DONTWAIT asks for EAGAIN this once;
// MSG_WAITALL is honoured by gathering in user space (the kernel's own
// would block the vproc).
ssize_t do_recvmsg(Vproc *&vp, int fd, msghdr *msg, int flags, const void *site) {
    FdState *s = fd_state(vp, fd);
    if (!s || s->kind == FdKind::Unknown) return sys(recvmsg(fd, msg, flags));
    if (s->kind != FdKind::Stream && s->kind != FdKind::Socket) return sys(recvmsg(fd, msg, flags | MSG_DONTWAIT));
    const bool nowait = flags & MSG_DONTWAIT, waitall = (flags & MSG_WAITALL) && s->kind == FdKind::Stream;
    flags = (flags & ~MSG_WAITALL) | MSG_DONTWAIT;
    if (nowait) return sys(recvmsg(fd, msg, flags));
    CallDeadline dl;
    iovec *orig = msg->msg_iov;
    int cnt = static_cast<int>(msg->msg_iovlen);
    size_t total = iov_total(orig, cnt), done = 0;
    std::vector<iovec> copy;
    for (;;) {
        ssize_t r = retry_on_fd(vp, s, fd, POLLIN, total - done, [&] { return sys(recvmsg(fd, msg, flags)); }, dl, site);
        if (r < 0) {
            if (done) break;
            msg->msg_iov = orig;
            msg->msg_iovlen = static_cast<size_t>(cnt);
            return r;
        }
        done += static_cast<size_t>(r);
        if (!waitall || r == 0 || done >= total || (flags & MSG_PEEK)) break;
        if (copy.empty()) copy.assign(orig, orig + cnt);
        iovec *iov = copy.data();
        int left = cnt;
        iov_advance(iov, left, done);
        msg->msg_iov = iov;
        msg->msg_iovlen = static_cast<size_t>(left);
    }
    msg->msg_iov = orig;
    msg->msg_iovlen = static_cast<size_t>(cnt);
    return static_cast<ssize_t>(done);
}

ssize_t do_sendmsg(Vproc *&vp, int fd, const msghdr *msg_in, int flags, const void *site) {
    FdState *s = fd_state(vp, fd);
    flags |= MSG_NOSIGNAL;
    if (!s || s->kind == FdKind::Unknown || (s->kind != FdKind::Stream && s->kind != FdKind::Socket) ||
        (flags & MSG_DONTWAIT))
        return sys(sendmsg(fd, msg_in, flags | MSG_DONTWAIT));
    flags |= MSG_DONTWAIT;
    msghdr m = *msg_in;
    int cnt = static_cast<int>(m.msg_iovlen);
    std::vector<iovec> copy(m.msg_iov, m.msg_iov + cnt);
    iovec *iov = copy.data();
    m.msg_iov = iov;
    size_t total = iov_total(iov, cnt), done = 0;
    CallDeadline dl;
    for (;;) {
        ssize_t r = retry_on_fd(vp, s, fd, POLLOUT, total - done, [&] { return sys(sendmsg(fd, &m, flags)); }, dl, site);
        if (r < 0) return done ? static_cast<ssize_t>(done) : r;
        done += static_cast<size_t>(r);
        // A datagram is all or nothing; a stream continues where it stopped.
        if (done >= total || s->kind != FdKind::Stream || s->user_nonblock) break;
        iov_advance(iov, cnt, static_cast<size_t>(r));
        m.msg_iov = iov;
        m.msg_iovlen = static_cast<size_t>(cnt);
        m.msg_control = nullptr; // ancillary data went with the first part
        m.msg_controllen = 0;
    }
    return static_cast<ssize_t>(done);
}

FdKind socket_kind(int type) { return (type & 0xf) == SOCK_STREAM ? FdKind::Stream : FdKind::Socket; }

} // namespace
} // namespace weft::detail

using namespace weft::detail;

extern "C" {

const char *weft_io_backend(void) {
    Vproc *vp = tls_vproc;
    return vp ? vp->reactor->name() : nullptr;
}

int weft_socket(int domain, int type, int protocol) {
    Vproc *vp = tls_vproc;
    int fd = socket(domain, type, protocol);
    if (vp && fd >= 0) {
        vp->stats.io_syscalls.add();
        fd_created(vp, fd, socket_kind(type), type & SOCK_NONBLOCK, false);
    }
    return fd;
}

int weft_accept4(int fd, sockaddr *addr, socklen_t *addrlen, int flags) {
    Vproc *vp = tls_vproc;
    if (!vp) return accept4(fd, addr, addrlen, flags);
    FdState *s = fd_state(vp, fd);
    if (!s || s->kind == FdKind::Unknown) return accept4(fd, addr, addrlen, flags);
    ensure_nonblock(vp, s, fd);
    CallDeadline dl;
    if (vp->tap) tap_accept(vp); // the classification's reset
    ssize_t r = retry_on_fd(vp, s, fd, POLLIN, 0, [&] { return sys(accept4(fd, addr, addrlen, flags)); }, dl,
                            WEFT_SITE());
    if (r < 0) return static_cast<int>(posix_result(r));
    fd_created(vp, static_cast<int>(r), s->kind, flags & SOCK_NONBLOCK, false);
    return static_cast<int>(r);
}

int weft_accept(int fd, sockaddr *addr, socklen_t *addrlen) { return weft_accept4(fd, addr, addrlen, 0); }

int weft_connect(int fd, const sockaddr *addr, socklen_t addrlen) {
    Vproc *vp = tls_vproc;
    if (!vp) return connect(fd, addr, addrlen);
    FdState *s = fd_state(vp, fd);
    if (!s || s->kind == FdKind::Unknown || s->user_nonblock) return connect(fd, addr, addrlen);
    ensure_nonblock(vp, s, fd);
    vp->stats.io_syscalls.add();
    if (connect(fd, addr, addrlen) == 0) return 0;
    if (errno != EINPROGRESS) return -1;
    CallDeadline dl;
    // Writable means the handshake ended; SO_ERROR says how.
    ssize_t r = retry_on_fd(vp, s, fd, POLLOUT, 0, [&]() -> ssize_t {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -errno;
        if (err) return -err;
        pollfd p{fd, POLLOUT, 0}; // still connecting?
        if (::poll(&p, 1, 0) == 1) return 0;
        return -EAGAIN;
    }, dl, WEFT_SITE());
    return static_cast<int>(posix_result(r));
}

ssize_t weft_read(int fd, void *buf, size_t count) {
    Vproc *vp = tls_vproc;
    if (!vp) return read(fd, buf, count);
    iovec iov{buf, count};
    return posix_result(do_readv(vp, fd, &iov, 1, WEFT_SITE()));
}

ssize_t weft_write(int fd, const void *buf, size_t count) {
    Vproc *vp = tls_vproc;
    if (!vp) return write(fd, buf, count);
    iovec iov{const_cast<void *>(buf), count};
    return posix_result(do_writev(vp, fd, &iov, 1, WEFT_SITE()));
}

ssize_t weft_readv(int fd, const iovec *iov, int iovcnt) {
    Vproc *vp = tls_vproc;
    if (!vp) return readv(fd, iov, iovcnt);
    if (iovcnt < 0 || iovcnt > IOV_MAX) {
        errno = EINVAL;
        return -1;
    }
    return posix_result(do_readv(vp, fd, const_cast<iovec *>(iov), iovcnt, WEFT_SITE()));
}

ssize_t weft_writev(int fd, const iovec *iov, int iovcnt) {
    Vproc *vp = tls_vproc;
    if (!vp) return writev(fd, iov, iovcnt);
    if (iovcnt < 0 || iovcnt > IOV_MAX) {
        errno = EINVAL;
        return -1;
    }
    return posix_result(do_writev(vp, fd, iov, iovcnt, WEFT_SITE()));
}

ssize_t weft_recv(int fd, void *buf, size_t len, int flags) {
    Vproc *vp = tls_vproc;
    if (!vp) return recv(fd, buf, len, flags);
    iovec iov{buf, len};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    return posix_result(do_recvmsg(vp, fd, &m, flags, WEFT_SITE()));
}

ssize_t weft_send(int fd, const void *buf, size_t len, int flags) {
    Vproc *vp = tls_vproc;
    if (!vp) return send(fd, buf, len, flags);
    iovec iov{const_cast<void *>(buf), len};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    return posix_result(do_sendmsg(vp, fd, &m, flags, WEFT_SITE()));
}

ssize_t weft_recvmsg(int fd, msghdr *msg, int flags) {
    Vproc *vp = tls_vproc;
    if (!vp) return recvmsg(fd, msg, flags);
    if (!msg) {
        errno = EFAULT;
        return -1;
    }
    return posix_result(do_recvmsg(vp, fd, msg, flags, WEFT_SITE()));
}

ssize_t weft_sendmsg(int fd, const msghdr *msg, int flags) {
    Vproc *vp = tls_vproc;
    if (!vp) return sendmsg(fd, msg, flags);
    if (!msg) {
        errno = EFAULT;
        return -1;
    }
    return posix_result(do_sendmsg(vp, fd, msg, flags, WEFT_SITE()));
}

int weft_shutdown(int fd, int how) {
    if (Vproc *vp = tls_vproc) vp->stats.io_syscalls.add();
    return shutdown(fd, how);
}

int weft_close(int fd) {
    Vproc *vp = tls_vproc;
    if (vp) {
        FdState *s = vp->rt->fds.get(fd);
        const bool known = s && (s->kind != FdKind::Unknown || s->head);
        if (known) fd_forget(vp, s, fd);
        // Operations still queued in this vproc's ring (a busy vproc's disk
        // batch) go to the kernel first: they take their file now, as calls
        // made before the close, and never the number's next file.
        vp->reactor->flush();
        vp->stats.io_syscalls.add();
        int r = close(fd);
        if (known) fd_closed(vp, s, fd);
        if (r == 0) --vp->res_fds;
        return r;
    }
    return close(fd);
}

int weft_poll(pollfd *fds, nfds_t nfds, int timeout_ms) {
    Vproc *vp = tls_vproc;
    if (!vp || timeout_ms == 0) return poll(fds, nfds, timeout_ms);
    if (nfds > 1u << 20) {
        errno = EINVAL;
        return -1;
    }
    const void *site = WEFT_SITE();
    uint64_t deadline = 0;
    if (timeout_ms > 0) deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000u;
    {
        CallDeadline dl;
        uint64_t io = dl.get(vp->current);
        if (io && (!deadline || io < deadline)) deadline = io;
    }
    std::vector<FdState *> ss(nfds);
    std::vector<IoWaiter> ws(nfds);
    std::vector<int> fdv(nfds);
    std::vector<uint32_t> seqs(nfds);
    for (;;) {
        // Each descriptor's event count before the look: wait_fds parks only
        // if none moved since (the same rule as one descriptor's wait_fd).
        for (nfds_t i = 0; i < nfds; ++i) {
            ss[i] = fds[i].fd >= 0 ? fd_state(vp, fds[i].fd) : nullptr;
            seqs[i] = ss[i] ? ss[i]->seq.load(std::memory_order_acquire) : 0;
        }
        vp->stats.io_syscalls.add();
        int n = poll(fds, nfds, 0);
        if (n != 0) return n;
        if (deadline_passed(deadline)) return 0;
        for (nfds_t i = 0; i < nfds; ++i) {
            fdv[i] = fds[i].fd;
            uint32_t ev = 0;
            if (fds[i].events & (POLLIN | POLLRDNORM | POLLRDBAND | POLLPRI | POLLRDHUP)) ev |= POLLIN;
            if (fds[i].events & (POLLOUT | POLLWRNORM | POLLWRBAND)) ev |= POLLOUT;
            ws[i].events = ev ? ev : POLLIN | POLLOUT; // errors only: any event will do
        }
        if (wait_fds(vp, ss.data(), fdv.data(), ws.data(), seqs.data(), nfds, deadline, site) == ETIMEDOUT) {
            vp->stats.io_syscalls.add();
            return poll(fds, nfds, 0); // one last look, as poll(2) reports at its timeout
        }
    }
}

int weft_fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    Vproc *vp = tls_vproc;
    FdState *s = vp ? fd_state(vp, fd) : nullptr;
    if (!s || s->kind == FdKind::Unknown) return fcntl(fd, cmd, arg);
    if (cmd == F_GETFL) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && s->weft_nonblock && !s->user_nonblock) fl &= ~O_NONBLOCK;
        return fl;
    }
    if (cmd == F_SETFL) {
        int fl = static_cast<int>(arg);
        bool user = fl & O_NONBLOCK;
        if (s->weft_nonblock) fl |= O_NONBLOCK;
        int r = fcntl(fd, F_SETFL, fl);
        if (r == 0) {
            if (s->file && s->user_nonblock != user) vp->rt->fds.set_user_nonblock(s->file, user);
            s->user_nonblock = user;
            if (s->kind == FdKind::File) s->direct = fl & O_DIRECT;
        }
        return r;
    }
    return fcntl(fd, cmd, arg);
}

} // extern "C"
