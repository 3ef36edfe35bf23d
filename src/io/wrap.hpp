// What the wrapper files (net.cc, file.cc, sendfile.cc) share: the
// try-then-park loop on a descriptor, and the POSIX return convention.
#pragma once

#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "core/runtime.hpp"
#include "io/fd.hpp"
#include "sched/tap.hpp"

namespace weft::detail {

// -errno to the POSIX convention (-1 and errno).
inline ssize_t posix_result(ssize_t r) {
    if (r >= 0) return r;
    errno = static_cast<int>(-r);
    return -1;
}

// Run attempt() — one non-blocking system call returning >= 0 or -errno —
// until it does not say EAGAIN, parking on fd for `ev` (POLLIN or POLLOUT)
// in between. `want` is the byte count asked: a stream transfer that moves
// less (but something) drained the kernel buffer, remembered so the next
// call parks without trying (want 0: not for this call). Returns >= 0 or -errno (-ETIMEDOUT, -EBADF
// when closed meanwhile, -EAGAIN for a descriptor the program made
// non-blocking).
template <class Attempt>
ssize_t retry_on_fd(Vproc *&vp, FdState *s, int fd, uint32_t ev, size_t want, Attempt &&attempt, CallDeadline &dl,
                    const void *site) {
    // Threading by appointment: the call waits in the NET calendar and the
    // appointment clock makes it on the thread's behalf (sched/tap.hpp).
    // (A descriptor the program made non-blocking is its own event loop's:
    // those calls never wait and are made at once.)
    // Read once: the program's O_NONBLOCK as the call began.
    const bool nonblock = s->user_nonblock;
    if (__builtin_expect(vp->tap != nullptr, 0) && !nonblock) {
        // A copy: were `attempt` itself to escape, the compiler would keep
        // every variable it captures in memory on the usual path too.
        using A = std::remove_cvref_t<Attempt>;
        A copy = attempt;
        return tap_net(vp, s, fd, ev, want, [](void *a) -> ssize_t { return (*static_cast<A *>(a))(); }, &copy, dl,
                       site);
    }
    for (;;) {
        uint32_t seq = s->seq.load(std::memory_order_acquire);
        if (nonblock || (s->ready.load(std::memory_order_relaxed) & FdState::dir_bit(ev))) {
            vp->stats.io_syscalls.add();
            ssize_t r = attempt();
            if (r >= 0) {
                if (r > 0 && static_cast<size_t>(r) < want && s->drains_on_short()) mark_unready(vp, s, ev, seq);
                return r;
            }
            if (r != -EAGAIN && r != -EWOULDBLOCK) return r;
            if (nonblock) return r;
        }
        if (int e = wait_fd(vp, s, fd, ev, seq, dl, site)) return -e;
    }
}

// The system call's result as >= 0 or -errno.
inline ssize_t sys(ssize_t r) { return r >= 0 ? r : -errno; }

// Advance an iovec array past n bytes (the array is the caller's copy).
inline void iov_advance(iovec *&iov, int &cnt, size_t n) {
    while (cnt > 0 && n >= iov->iov_len) {
        n -= iov->iov_len;
        ++iov;
        --cnt;
    }
    if (cnt > 0 && n) {
        iov->iov_base = static_cast<char *>(iov->iov_base) + n;
        iov->iov_len -= n;
    }
}

// The caller's copy of an iovec array, for a transfer that advances through
// it (iov_advance): on the stack up to 8 entries.
class IovCopy {
public:
    IovCopy(const iovec *iov, int cnt) {
        if (cnt > 8) {
            big_.assign(iov, iov + cnt);
            p_ = big_.data();
        } else {
            for (int i = 0; i < cnt; ++i) small_[i] = iov[i];
        }
    }
    IovCopy(const IovCopy &) = delete;
    IovCopy &operator=(const IovCopy &) = delete;
    iovec *data() { return p_; }

private:
    iovec small_[8];
    std::vector<iovec> big_;
    iovec *p_ = small_;
};

inline size_t iov_total(const iovec *iov, int cnt) {
    if (cnt == 1) return iov->iov_len; // read/write/send/recv: no loop (gcc vectorises it)
    size_t n = 0;
    for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
    return n;
}

// Set O_NONBLOCK on a descriptor for a call that has no per-call flag
// (accept, connect, sendfile). Remembered: the program still sees its own
// mode through weft_fcntl.
void ensure_nonblock(Vproc *vp, FdState *s, int fd);

// Disk I/O on a regular file (file.cc). off = -1: the file position.
ssize_t file_rw(Vproc *&vp, FdState *s, int fd, bool write, const iovec *iov, int cnt, off_t off, const void *site);

// Page-cache residency, for sendfile: a miss would block the whole vproc
// in the call (sendfile.cc).
constexpr size_t kPageCacheProbe = size_t{4} << 20; // bytes checked ahead of each sendfile
// True if [off, off+len) may not all be in the page cache. Without
// cachestat (Linux < 6.5) nothing is known: false (sendfile may block).
bool page_cache_may_miss(int fd, uint64_t off, size_t len);
// Read [off, off+len) into the page cache; blocks (call it on a worker).
// EOF inside the range is fine.
void page_cache_read_in(int fd, uint64_t off, size_t len);
// Send [*pos, *pos+len) of in_fd to the non-blocking socket out_fd; for a
// kernel worker, where waiting for the disk blocks nobody. What the socket
// cannot take now is read into the page cache for a later sendfile. Bytes
// sent (*pos moved past them); *err: the error that stopped it, else 0 (the
// socket was full, the range went, or the file ended).
size_t sendfile_stretch(int out_fd, int in_fd, off_t *pos, size_t len, int *err);

} // namespace weft::detail
