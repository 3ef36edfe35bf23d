// Blocking calls that park the calling weft thread instead of its vproc:
// each goes to weft's I/O layer (docs/io.md) on a weft thread, and to libc
// unchanged anywhere else (before main, on kernel threads weft did not make,
// in a forked child).
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <csignal>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "core/runtime.hpp"
#include "io/fd.hpp"
#include "posix/real.hpp"
#include "posix/shim.hpp"
#include "weft/weft.h"

using namespace weft::posix;
namespace wd = weft::detail;

namespace {

// errno-style result of a call that returned an error number.
int fail(int e) {
    errno = e;
    return -1;
}

int64_t ns_of(const struct timespec *ts) { return static_cast<int64_t>(ts->tv_sec) * 1000000000 + ts->tv_nsec; }

// poll's timeout for a relative timespec (NULL: forever), rounded up to
// whole milliseconds.
int ms_of(const struct timespec *ts) {
    if (!ts) return -1;
    int64_t ns = ns_of(ts);
    if (ns <= 0) return 0;
    int64_t ms = (ns + 999999) / 1000000;
    return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

// ---- SO_RCVTIMEO and SO_SNDTIMEO ----
// The kernel keeps a socket's timeouts (setsockopt passes through) but never
// applies them here: weft's sockets are O_NONBLOCK underneath, and a
// blocking call parks instead. So once the program has set one, a blocking
// socket call reads the socket's timeout (from the kernel: it follows the
// open file through dup and fork) and bounds its wait with it, as the
// thread's I/O timeout; running out is EAGAIN, or the bytes a send got
// through, as Linux says. A program that never sets one pays nothing.
std::atomic<bool> g_sock_timeouts{false};

bool is_sock_timeout(int level, int name) {
    if (level != SOL_SOCKET) return false;
#ifdef SO_RCVTIMEO_NEW
    if (name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW) return true;
#endif
    return name == SO_RCVTIMEO || name == SO_SNDTIMEO;
}

enum Dir { kReceive, kSend };

uint64_t sock_timeout_ns(int fd, Dir d) {
    if (!g_sock_timeouts.load(std::memory_order_relaxed)) return 0;
    struct timeval tv = {};
    socklen_t len = sizeof tv;
    if (getsockopt(fd, SOL_SOCKET, d == kSend ? SO_SNDTIMEO : SO_RCVTIMEO, &tv, &len) != 0) return 0; // not a socket
    return static_cast<uint64_t>(tv.tv_sec) * 1000000000ull + static_cast<uint64_t>(tv.tv_usec) * 1000ull;
}

// blocking_call(call), bounded by the socket's timeout for direction d.
template <class Call> auto socket_call(int fd, Dir d, Call call) {
    const uint64_t limit = sock_timeout_ns(fd, d);
    if (!limit) return blocking_call(call);
    wd::Tcb *t = wd::tls_vproc->current;
    const uint64_t before = t->io_timeout;
    t->io_timeout = before && before < limit ? before : limit;
    auto r = blocking_call(call);
    const int e = errno;
    t->io_timeout = before;
    errno = r < 0 && e == ETIMEDOUT ? EAGAIN : e;
    return r;
}
// A copy of `from`'s state for `to` (dup): the same open file, so the same
// kind and the same O_NONBLOCK, whoever set it.
void dup_state(int from, int to) { wd::fd_dup(wd::tls_vproc, from, to); }

// Forget what weft knew of fd, without closing it (someone else will);
// then closed(fd) once that is done. Returns whether it knew anything.
bool forget(int fd) {
    wd::Vproc *vp = wd::tls_vproc;
    vp->reactor->flush(); // what the ring holds takes its file first, as in weft_close
    wd::FdState *s = vp->rt->fds.get(fd);
    if (!s || (s->kind == wd::FdKind::Unknown && !s->head)) return false;
    wd::fd_forget(vp, s, fd);
    return true;
}
void closed(int fd) { wd::fd_closed(wd::tls_vproc, wd::tls_vproc->rt->fds.get(fd), fd); }

// A call that blocks its kernel thread in the kernel with nothing weft can
// wait on instead (a child's exit, a file lock): made on the offload pool,
// the thread parked meanwhile. A cancellation point on entry; not cut short
// by pthread_cancel/pthread_kill once it waits.
template <class F> auto on_pool(F f) {
    cancellation_point(); // every call sent here is one: a pending cancel acts before it
    using R = decltype(f());
    struct Job {
        F *f;
        R r;
        int err;
    } job{&f, R{}, 0};
    weft_offload(
        [](void *p) -> void * {
            auto *j = static_cast<Job *>(p);
            j->r = (*j->f)();
            j->err = errno;
            return nullptr;
        },
        &job);
    errno = job.err;
    return job.r;
}

// Wait until epoll fd `ep` has events or the timeout passes: its own
// descriptor is readable while events are pending.
bool epoll_ready(int ep, int timeout_ms) {
    struct pollfd p = {ep, POLLIN, 0};
    return weft_poll(&p, 1, timeout_ms) > 0;
}

} // namespace

extern "C" {
#define API __attribute__((visibility("default")))
#define ON_WEFT_OR(call)                                                                                               \
    do {                                                                                                               \
        if (!on_weft()) {                                                                                              \
            count(kOutside);                                                                                           \
            return call;                                                                                               \
        }                                                                                                              \
        count(kServed);                                                                                                \
    } while (0)

API int setsockopt(int fd, int level, int name, const void *v, socklen_t len) {
    int r = __wrap_setsockopt(fd, level, name, v, len);
    if (r == 0 && is_sock_timeout(level, name)) g_sock_timeouts.store(true, std::memory_order_relaxed);
    return r;
}

API int socket(int d, int t, int p) {
    ON_WEFT_OR(__wrap_socket(d, t, p));
    return weft_socket(d, t, p);
}
API int accept(int fd, struct sockaddr *a, socklen_t *l) {
    ON_WEFT_OR(__wrap_accept(fd, a, l));
    return socket_call(fd, kReceive, [&] { return weft_accept(fd, a, l); });
}
API int accept4(int fd, struct sockaddr *a, socklen_t *l, int f) {
    ON_WEFT_OR(__wrap_accept4(fd, a, l, f));
    return socket_call(fd, kReceive, [&] { return weft_accept4(fd, a, l, f); });
}
API int connect(int fd, const struct sockaddr *a, socklen_t l) {
    ON_WEFT_OR(__wrap_connect(fd, a, l));
    int r;
    {
        BlockingCall bc;
        errno = 0;
        r = weft_connect(fd, a, l);
        const bool cut = r < 0 && errno == ETIMEDOUT && bc.unbounded();
        switch (bc.leave(r < 0)) {
        case BlockingCall::kDone:
            if (!cut) return r;
            break; // cut short for nothing: the connection is still on its way
        case BlockingCall::kInterrupted: return fail(EINTR);
        case BlockingCall::kRestart: break;
        }
    }
    // After an SA_RESTART handler Linux goes on waiting for the connection
    // (a second connect would say EALREADY): so wait for it to finish.
    struct pollfd p = {fd, POLLOUT, 0};
    if (blocking_poll([&] { return weft_poll(&p, 1, -1); }) < 0) return -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    return err ? fail(err) : 0;
}
API ssize_t read(int fd, void *b, size_t n) {
    ON_WEFT_OR(__wrap_read(fd, b, n));
    return socket_call(fd, kReceive, [&] { return weft_read(fd, b, n); });
}
API ssize_t write(int fd, const void *b, size_t n) {
    ON_WEFT_OR(__wrap_write(fd, b, n));
    return socket_call(fd, kSend, [&] { return weft_write(fd, b, n); });
}
API ssize_t readv(int fd, const struct iovec *v, int n) {
    ON_WEFT_OR(__wrap_readv(fd, v, n));
    return socket_call(fd, kReceive, [&] { return weft_readv(fd, v, n); });
}
API ssize_t writev(int fd, const struct iovec *v, int n) {
    ON_WEFT_OR(__wrap_writev(fd, v, n));
    return socket_call(fd, kSend, [&] { return weft_writev(fd, v, n); });
}
API ssize_t pread(int fd, void *b, size_t n, off_t o) {
    ON_WEFT_OR(__wrap_pread(fd, b, n, o));
    return blocking_call([&] { return weft_pread(fd, b, n, o); });
}
API ssize_t pwrite(int fd, const void *b, size_t n, off_t o) {
    ON_WEFT_OR(__wrap_pwrite(fd, b, n, o));
    return blocking_call([&] { return weft_pwrite(fd, b, n, o); });
}
API ssize_t pread64(int fd, void *b, size_t n, off_t o) { return pread(fd, b, n, o); }
API ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) { return pwrite(fd, b, n, o); }
API ssize_t recv(int fd, void *b, size_t n, int f) {
    ON_WEFT_OR(__wrap_recv(fd, b, n, f));
    return socket_call(fd, kReceive, [&] { return weft_recv(fd, b, n, f); });
}
API ssize_t send(int fd, const void *b, size_t n, int f) {
    ON_WEFT_OR(__wrap_send(fd, b, n, f));
    return socket_call(fd, kSend, [&] { return weft_send(fd, b, n, f); });
}
API ssize_t recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l) {
    ON_WEFT_OR(__wrap_recvfrom(fd, b, n, f, a, l));
    if (!a) return socket_call(fd, kReceive, [&] { return weft_recv(fd, b, n, f); });
    struct iovec v = {b, n};
    struct msghdr m = {};
    m.msg_name = a;
    m.msg_namelen = l ? *l : 0;
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    ssize_t r = socket_call(fd, kReceive, [&] { return weft_recvmsg(fd, &m, f); });
    if (r >= 0 && l) *l = m.msg_namelen;
    return r;
}
API ssize_t sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l) {
    ON_WEFT_OR(__wrap_sendto(fd, b, n, f, a, l));
    if (!a) return socket_call(fd, kSend, [&] { return weft_send(fd, b, n, f); });
    struct iovec v = {const_cast<void *>(b), n};
    struct msghdr m = {};
    m.msg_name = const_cast<struct sockaddr *>(a);
    m.msg_namelen = l;
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    return socket_call(fd, kSend, [&] { return weft_sendmsg(fd, &m, f); });
}
API ssize_t recvmsg(int fd, struct msghdr *m, int f) {
    ON_WEFT_OR(__wrap_recvmsg(fd, m, f));
    return socket_call(fd, kReceive, [&] { return weft_recvmsg(fd, m, f); });
}
API ssize_t sendmsg(int fd, const struct msghdr *m, int f) {
    ON_WEFT_OR(__wrap_sendmsg(fd, m, f));
    return socket_call(fd, kSend, [&] { return weft_sendmsg(fd, m, f); });
}
API ssize_t sendfile(int out, int in, off_t *off, size_t n) {
    ON_WEFT_OR(__wrap_sendfile(out, in, off, n));
    return socket_call(out, kSend, [&] { return weft_sendfile(out, in, off, n); });
}
API ssize_t sendfile64(int out, int in, off_t *off, size_t n) { return sendfile(out, in, off, n); }
API int shutdown(int fd, int how) {
    ON_WEFT_OR(__wrap_shutdown(fd, how));
    return weft_shutdown(fd, how);
}
API int close(int fd) {
    ON_WEFT_OR(__wrap_close(fd));
    return weft_close(fd);
}

// dup family: the new number inherits the old one's state; one that was
// open is closed first, through weft (its waiters are woken with EBADF).
API int dup(int fd) {
    ON_WEFT_OR(__wrap_dup(fd));
    int r = __wrap_dup(fd);
    if (r >= 0) dup_state(fd, r);
    return r;
}
API int dup3(int from, int to, int flags) {
    ON_WEFT_OR(__wrap_dup3(from, to, flags));
    if (from == to) return fail(EINVAL);
    const bool known = forget(to);
    int r = __wrap_dup3(from, to, flags);
    if (known) closed(to);
    if (r >= 0) dup_state(from, r);
    return r;
}
API int dup2(int from, int to) {
    ON_WEFT_OR(__wrap_dup2(from, to));
    if (from == to) return __wrap_fcntl(from, F_GETFD) < 0 ? -1 : to;
    const bool known = forget(to);
    int r = __wrap_dup2(from, to);
    if (known) closed(to);
    if (r >= 0) dup_state(from, r);
    return r;
}

// stdio closes its descriptor inside libc: weft forgets it first, so that
// the number, reused, is looked at afresh.
API int fclose(FILE *f) {
    const int fd = on_weft() && f ? fileno(f) : -1;
    const bool known = fd >= 0 && forget(fd);
    int r = __wrap_fclose(f);
    if (known) closed(fd);
    return r;
}

API int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    ON_WEFT_OR(__wrap_fcntl(fd, cmd, arg));
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
        int r = __wrap_fcntl(fd, cmd, arg);
        if (r >= 0) dup_state(fd, r);
        return r;
    }
    if (cmd == F_SETLKW || cmd == F_OFD_SETLKW) return on_pool([&] { return __wrap_fcntl(fd, cmd, arg); });
    return weft_fcntl(fd, cmd, arg);
}
API int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return fcntl(fd, cmd, arg);
}

// ioctl(FIONBIO) is the other way to set O_NONBLOCK: it goes through
// weft's fcntl, which tracks the program's own mode.
API int ioctl(int fd, unsigned long req, ...) {
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!on_weft() || req != FIONBIO) {
        if (!on_weft()) count(kOutside);
        return __wrap_ioctl(fd, req, arg);
    }
    count(kServed);
    int fl = weft_fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    bool on = arg && *static_cast<int *>(arg);
    return weft_fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0 ? -1 : 0;
}

API int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    unsigned mode = va_arg(ap, unsigned);
    va_end(ap);
    ON_WEFT_OR(__wrap_open(path, flags, mode));
    return weft_open(path, flags, mode);
}
API int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    unsigned mode = va_arg(ap, unsigned);
    va_end(ap);
    return open(path, flags, mode);
}
// openat is libc's (a path lookup does not park); weft looks at the
// descriptor when it is first used.
API int openat(int dir, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    unsigned mode = va_arg(ap, unsigned);
    va_end(ap);
    if (dir == AT_FDCWD || path[0] == '/') return open(path, flags, mode);
    return __wrap_openat(dir, path, flags, mode);
}
API int openat64(int dir, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    unsigned mode = va_arg(ap, unsigned);
    va_end(ap);
    return openat(dir, path, flags, mode);
}

// --- waiting for descriptors ---

API int poll(struct pollfd *p, nfds_t n, int timeout) {
    ON_WEFT_OR(__wrap_poll(p, n, timeout));
    return blocking_poll([&] { return weft_poll(p, n, timeout); });
}
API int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *mask) {
    ON_WEFT_OR(__wrap_ppoll(p, n, t, mask));
    if (t && !valid_timespec(t)) return fail(EINVAL);
    if (mask) passed_through("ppoll's signal mask (ignored)");
    return blocking_poll([&] { return weft_poll(p, n, ms_of(t)); });
}

// select on weft_poll: the sets become a pollfd array and back.
static int select_on_poll(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout_ms) {
    if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
    struct pollfd ps[FD_SETSIZE];
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; ++fd) {
        short ev = 0;
        if (r && FD_ISSET(fd, r)) ev |= POLLIN;
        if (w && FD_ISSET(fd, w)) ev |= POLLOUT;
        if (e && FD_ISSET(fd, e)) ev |= POLLPRI;
        if (ev) ps[n++] = {fd, ev, 0};
    }
    int got = blocking_poll([&] { return weft_poll(ps, n, timeout_ms); });
    if (got < 0) return -1;
    for (nfds_t i = 0; i < n; ++i)
        if (ps[i].revents & POLLNVAL) return fail(EBADF);
    if (r) FD_ZERO(r);
    if (w) FD_ZERO(w);
    if (e) FD_ZERO(e);
    int count = 0;
    for (nfds_t i = 0; i < n && got > 0; ++i) {
        short re = ps[i].revents;
        if (r && (re & (POLLIN | POLLHUP | POLLERR)) && (ps[i].events & POLLIN)) FD_SET(ps[i].fd, r), ++count;
        if (w && (re & (POLLOUT | POLLERR)) && (ps[i].events & POLLOUT)) FD_SET(ps[i].fd, w), ++count;
        if (e && (re & POLLPRI)) FD_SET(ps[i].fd, e), ++count;
    }
    return count;
}
API int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv) {
    ON_WEFT_OR(__wrap_select(nfds, r, w, e, tv));
    int ms = -1;
    if (tv) {
        if (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000) return fail(EINVAL);
        int64_t us = static_cast<int64_t>(tv->tv_sec) * 1000000 + tv->tv_usec;
        ms = static_cast<int>((us + 999) / 1000 > INT32_MAX ? INT32_MAX : (us + 999) / 1000);
    }
    int rc = select_on_poll(nfds, r, w, e, ms);
    if (tv && rc >= 0) tv->tv_sec = tv->tv_usec = 0; // Linux updates it; the time left is not tracked
    return rc;
}
API int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *mask) {
    ON_WEFT_OR(__wrap_pselect(nfds, r, w, e, t, mask));
    if (t && !valid_timespec(t)) return fail(EINVAL);
    if (mask) passed_through("pselect's signal mask (ignored)");
    return select_on_poll(nfds, r, w, e, ms_of(t));
}

// A library's own event loop: wait on the epoll descriptor through weft,
// then collect the events without blocking.
API int epoll_wait(int ep, struct epoll_event *v, int n, int timeout) {
    ON_WEFT_OR(__wrap_epoll_wait(ep, v, n, timeout));
    if (timeout == 0) return __wrap_epoll_wait(ep, v, n, 0);
    uint64_t deadline = timeout > 0 ? weft_now_ns() + static_cast<uint64_t>(timeout) * 1000000 : 0;
    BlockingCall bc;
    for (;;) {
        int r = __wrap_epoll_wait(ep, v, n, 0);
        if (r != 0) return r;
        int left = -1;
        if (deadline) {
            uint64_t now = weft_now_ns();
            if (now >= deadline) return 0;
            left = static_cast<int>((deadline - now + 999999) / 1000000);
        }
        epoll_ready(ep, left);
        if (bc.check() != BlockingCall::kDone) return fail(EINTR); // never restarted
    }
}
API int epoll_pwait(int ep, struct epoll_event *v, int n, int timeout, const sigset_t *mask) {
    ON_WEFT_OR(__wrap_epoll_pwait(ep, v, n, timeout, mask));
    if (mask) passed_through("epoll_pwait's signal mask (ignored)");
    return epoll_wait(ep, v, n, timeout);
}
API int epoll_pwait2(int ep, struct epoll_event *v, int n, const struct timespec *t, const sigset_t *mask) {
    ON_WEFT_OR(__wrap_epoll_pwait2(ep, v, n, t, mask));
    if (t && !valid_timespec(t)) return fail(EINVAL);
    if (mask) passed_through("epoll_pwait2's signal mask (ignored)");
    return epoll_wait(ep, v, n, ms_of(t));
}

// --- sleeping ---

API unsigned sleep(unsigned s) {
    ON_WEFT_OR(__wrap_sleep(s));
    BlockingCall bc;
    uint64_t until = weft_now_ns() + static_cast<uint64_t>(s) * 1000000000u;
    weft_sleep_until_ns(until);
    if (bc.leave(true) == BlockingCall::kDone) return 0;
    uint64_t now = weft_now_ns(); // interrupted: the seconds left, rounded up
    return now >= until ? 0 : static_cast<unsigned>((until - now + 999999999u) / 1000000000u);
}
API int usleep(useconds_t us) {
    ON_WEFT_OR(__wrap_usleep(us));
    BlockingCall bc;
    weft_sleep_ns(static_cast<uint64_t>(us) * 1000u);
    return bc.leave(true) == BlockingCall::kDone ? 0 : fail(EINTR);
}
API int nanosleep(const struct timespec *req, struct timespec *rem) {
    ON_WEFT_OR(__wrap_nanosleep(req, rem));
    if (!valid_timespec(req) || req->tv_sec < 0) return fail(EINVAL);
    BlockingCall bc;
    uint64_t until = weft_now_ns() + static_cast<uint64_t>(ns_of(req));
    weft_sleep_until_ns(until);
    if (bc.leave(true) != BlockingCall::kDone) { // interrupted: what is left
        uint64_t now = weft_now_ns(), left = now >= until ? 0 : until - now;
        if (rem) *rem = {static_cast<time_t>(left / 1000000000u), static_cast<long>(left % 1000000000u)};
        return fail(EINTR);
    }
    if (rem) *rem = {0, 0};
    return 0;
}
API int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
    ON_WEFT_OR(__wrap_clock_nanosleep(clock, flags, req, rem));
    if (!valid_timespec(req)) return EINVAL;
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC && clock != CLOCK_BOOTTIME) {
        passed_through("clock_nanosleep on this clock");
        return __wrap_clock_nanosleep(clock, flags, req, rem);
    }
    if (!(flags & TIMER_ABSTIME) && req->tv_sec < 0) return EINVAL;
    BlockingCall bc;
    uint64_t until = flags & TIMER_ABSTIME ? deadline_on(clock, req) : weft_now_ns() + static_cast<uint64_t>(ns_of(req));
    weft_sleep_until_ns(until);
    if (bc.leave(true) != BlockingCall::kDone) { // interrupted: what is left (a relative sleep)
        uint64_t now = weft_now_ns(), left = now >= until ? 0 : until - now;
        if (rem && !(flags & TIMER_ABSTIME))
            *rem = {static_cast<time_t>(left / 1000000000u), static_cast<long>(left % 1000000000u)};
        return EINTR;
    }
    if (rem && !(flags & TIMER_ABSTIME)) *rem = {0, 0};
    return 0;
}

// --- waiting for signals ---

// sigwait and its kin block the kernel thread, that is the vproc and every
// thread on it (Apache's -X mode waits for SIGTERM so on its main thread
// while its workers serve). On weft the set is read from a signalfd that
// the thread waits on through weft_poll. As with sigwait, the signals must
// be blocked (the program blocks them on its vproc's kernel thread; one
// unblocked on another kernel thread may be handled there instead). A
// signal sent to one kernel thread (raise, pthread_kill) is in the signalfd
// only for reads from that thread; the read before each wait finds one
// already pending there, one sent during the wait may not wake it.
// Returns the signal, or -1 with errno (EAGAIN: the timeout passed).
static int sigwait_on_weft(const sigset_t *set, siginfo_t *info, int timeout_ms) {
    BlockingCall bc; // a cancellation point (acts before the descriptor exists), interruptible, never restarted
    int fd = signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC); // not interposed: libc's
    if (fd < 0) return -1;
    uint64_t deadline = timeout_ms > 0 ? weft_now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000 : 0;
    int rc;
    bool cut = false;
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t n = __wrap_read(fd, &si, sizeof si);
        if (n == static_cast<ssize_t>(sizeof si)) {
            if (info) {
                *info = {};
                info->si_signo = static_cast<int>(si.ssi_signo);
                info->si_errno = si.ssi_errno;
                info->si_code = si.ssi_code;
                info->si_pid = static_cast<pid_t>(si.ssi_pid);
                info->si_uid = si.ssi_uid;
                info->si_status = si.ssi_status;
                info->si_value.sival_ptr = reinterpret_cast<void *>(si.ssi_ptr);
            }
            rc = static_cast<int>(si.ssi_signo);
            break;
        }
        if (n < 0 && errno != EAGAIN) {
            rc = -1;
            break;
        }
        int left = -1;
        if (timeout_ms == 0) left = 0;
        if (deadline) {
            uint64_t now = weft_now_ns();
            left = now >= deadline ? 0 : static_cast<int>((deadline - now + 999999) / 1000000);
        }
        if (left == 0) {
            errno = EAGAIN;
            rc = -1;
            break;
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (weft_poll(&p, 1, left) < 0) {
            rc = -1;
            break;
        }
        if ((cut = bc.cut_short())) break;
    }
    int e = errno;
    weft_close(fd);
    if (cut) {
        bc.leave(true); // a cancel acts here, with the descriptor closed
        return fail(EINTR);
    }
    errno = e;
    return rc;
}

API int sigwait(const sigset_t *set, int *sig) {
    ON_WEFT_OR(__wrap_sigwait(set, sig));
    int r;
    while ((r = sigwait_on_weft(set, nullptr, -1)) < 0 && errno == EINTR) {
    } // sigwait itself is not interrupted (glibc's retries EINTR)
    if (r < 0) return errno;
    *sig = r;
    return 0;
}
API int sigwaitinfo(const sigset_t *set, siginfo_t *info) {
    ON_WEFT_OR(__wrap_sigwaitinfo(set, info));
    return sigwait_on_weft(set, info, -1);
}
API int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *t) {
    ON_WEFT_OR(__wrap_sigtimedwait(set, info, t));
    if (t && !valid_timespec(t)) return fail(EINVAL);
    return sigwait_on_weft(set, info, ms_of(t));
}

// --- waiting for children, and for file locks: on the offload pool ---

API pid_t wait(int *st) {
    ON_WEFT_OR(__wrap_wait(st));
    return on_pool([&] { return __wrap_wait(st); });
}
API pid_t waitpid(pid_t pid, int *st, int opt) {
    ON_WEFT_OR(__wrap_waitpid(pid, st, opt));
    if (opt & WNOHANG) return __wrap_waitpid(pid, st, opt);
    return on_pool([&] { return __wrap_waitpid(pid, st, opt); });
}
API pid_t wait4(pid_t pid, int *st, int opt, struct rusage *ru) {
    ON_WEFT_OR(__wrap_wait4(pid, st, opt, ru));
    if (opt & WNOHANG) return __wrap_wait4(pid, st, opt, ru);
    return on_pool([&] { return __wrap_wait4(pid, st, opt, ru); });
}
API int waitid(idtype_t type, id_t id, siginfo_t *info, int opt) {
    ON_WEFT_OR(__wrap_waitid(type, id, info, opt));
    if (opt & WNOHANG) return __wrap_waitid(type, id, info, opt);
    return on_pool([&] { return __wrap_waitid(type, id, info, opt); });
}
API int flock(int fd, int op) {
    ON_WEFT_OR(__wrap_flock(fd, op));
    if (op & LOCK_NB) return __wrap_flock(fd, op);
    return on_pool([&] { return __wrap_flock(fd, op); });
}
API int lockf(int fd, int cmd, off_t len) {
    ON_WEFT_OR(__wrap_lockf(fd, cmd, len));
    if (cmd != F_LOCK) return __wrap_lockf(fd, cmd, len);
    return on_pool([&] { return __wrap_lockf(fd, cmd, len); });
}

// --- names: getaddrinfo may block for seconds (DNS): on the offload pool ---

using GaiFn = int (*)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

struct GaiCall {
    GaiFn fn;
    const char *node, *service;
    const struct addrinfo *hints;
    struct addrinfo **res;
    int rc;
};

API int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    static std::atomic<GaiFn> real{nullptr};
    GaiFn f = real.load(std::memory_order_acquire);
    if (!f) {
        f = reinterpret_cast<GaiFn>(libc_symbol("getaddrinfo"));
        real.store(f, std::memory_order_release);
    }
    if (!on_weft()) {
        count(kOutside);
        return f(node, service, hints, res);
    }
    count(kServed);
    GaiCall c{f, node, service, hints, res, 0};
    weft_offload([](void *p) -> void * {
        auto *c = static_cast<GaiCall *>(p);
        c->rc = c->fn(c->node, c->service, c->hints, c->res);
        return nullptr;
    }, &c);
    return c.rc;
}

// --- processes ---

// fork: the child has one kernel thread, the caller's, and none of the
// runtime's others; it continues on plain libc (docs/posix.md): weft's
// wrappers step aside for good on that thread.
API pid_t fork(void) {
    if (!on_weft()) return __wrap_fork();
    pid_t pid = __wrap_fork();
    if (pid == 0) wd::tls_vproc = nullptr;
    return pid;
}

} // extern "C"
