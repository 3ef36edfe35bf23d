// Files: open, read/write at the position, pread/pwrite, fsync, fstat.
//
// Page-cache hits complete inline: preadv2/pwritev2 with RWF_NOWAIT either
// moves the bytes now or says EAGAIN. Only then does the call go
// asynchronous — to io_uring when the backend has it, else to the offload
// pool — so a cached read costs one system call, not an AIO round trip
// (Capriccio §2.6 measured its disk path at twice NPTL's cost for hits).
// A short RWF_NOWAIT read of a regular file (part cached) continues
// asynchronously for the rest: a read from a file is never short before EOF.
// An O_DIRECT file goes asynchronous at once (FdState::direct).
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>

#include "io/offload.hpp"
#include "io/wrap.hpp"

namespace weft::detail {
namespace {

// The rest of a transfer the page cache could not serve.
ssize_t file_rw_async(Vproc *&vp, int fd, bool write, const iovec *iov, int cnt, off_t off, const void *site) {
    if (vp->reactor->can_submit()) {
        IoOp op{write ? IoKind::Writev : IoKind::Readv};
        op.fd = fd;
        op.buf = const_cast<iovec *>(iov);
        op.len = static_cast<unsigned>(cnt);
        op.off = static_cast<uint64_t>(off); // -1: the file position
        CallDeadline dl;
        return run_op(vp, &op, dl, site);
    }
    ssize_t r = 0;
    auto call = [&] {
        if (off < 0) r = write ? writev(fd, iov, cnt) : readv(fd, iov, cnt);
        else r = write ? pwritev(fd, iov, cnt, off) : preadv(fd, iov, cnt, off);
        r = sys(r);
    };
    offload_call(vp, call, site);
    return r;
}

} // namespace

ssize_t file_rw(Vproc *&vp, FdState *s, int fd, bool write, const iovec *iov_in, int cnt, off_t off, const void *site) {
    // O_DIRECT bypasses the page cache, so there is no hit to take inline —
    // and RWF_NOWAIT does not make a direct transfer return EAGAIN when it
    // needs the device: the call would hold the vproc for the whole I/O.
    if (s && s->direct) return file_rw_async(vp, fd, write, iov_in, cnt, off, site);
    // By appointment (sched/tap.hpp): with io_uring every disk call is one of
    // the DISK turn's batch; without, the thread waits for its turn and
    // then makes the call as usual.
    if (vp->tap) {
        if (vp->reactor->can_submit()) return file_rw_async(vp, fd, write, iov_in, cnt, off, site);
        const uint32_t closes = s ? static_cast<uint32_t>(s->closes) : 0;
        tap_disk_turn(vp, site);
        // Closed while the call waited for its turn: EBADF, never a call on
        // the number's next file (as a queued NET call; docs/tap.md).
        if (s && s->closes != closes) return -EBADF;
    }
    vp->stats.io_syscalls.add();
    ssize_t r = write ? sys(pwritev2(fd, iov_in, cnt, off, RWF_NOWAIT)) : sys(preadv2(fd, iov_in, cnt, off, RWF_NOWAIT));
    size_t total = iov_total(iov_in, cnt);
    if (r >= 0 && (static_cast<size_t>(r) == total || (!write && r == 0))) return r;
    if (r < 0 && r != -EAGAIN && r != -EOPNOTSUPP) return r;
    size_t done = r > 0 ? static_cast<size_t>(r) : 0;
    IovCopy copy(iov_in, cnt);
    iovec *iov = copy.data();
    iov_advance(iov, cnt, done);
    ssize_t rest = file_rw_async(vp, fd, write, iov, cnt, off < 0 ? off : off + static_cast<off_t>(done), site);
    if (rest < 0) return done ? static_cast<ssize_t>(done) : rest;
    return static_cast<ssize_t>(done) + rest;
}

} // namespace weft::detail

using namespace weft::detail;

extern "C" {

int weft_open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = static_cast<mode_t>(va_arg(ap, int));
        va_end(ap);
    }
    Vproc *vp = tls_vproc;
    if (!vp) return open(path, flags, mode);
    // Fast path: a lookup the dentry cache answers without I/O.
    // RESOLVE_CACHED refuses O_CREAT, O_TRUNC and O_TMPFILE (they may write).
    if (!(flags & (O_CREAT | O_TRUNC | O_TMPFILE))) {
        open_how how{};
        how.flags = static_cast<uint64_t>(flags);
        how.resolve = RESOLVE_CACHED;
        vp->stats.io_syscalls.add();
        long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
        if (fd >= 0) {
            ++vp->res_fds;
            return static_cast<int>(fd);
        }
        if (errno != EAGAIN && errno != ENOSYS && errno != EINVAL) return -1;
    }
    int fd = static_cast<int>(offload_syscall(vp, WEFT_SITE(), [&] { return open(path, flags, mode); }));
    if (fd >= 0) ++tls_vproc->res_fds; // (the home vproc again after the park)
    return fd;
}

ssize_t weft_pread(int fd, void *buf, size_t count, off_t offset) {
    Vproc *vp = tls_vproc;
    if (!vp) return pread(fd, buf, count, offset);
    FdState *s = fd_state(vp, fd);
    if (!s || s->kind != FdKind::File || offset < 0) return pread(fd, buf, count, offset); // ESPIPE, EBADF, EINVAL
    iovec iov{buf, count};
    return posix_result(file_rw(vp, s, fd, false, &iov, 1, offset, WEFT_SITE()));
}

ssize_t weft_pwrite(int fd, const void *buf, size_t count, off_t offset) {
    Vproc *vp = tls_vproc;
    if (!vp) return pwrite(fd, buf, count, offset);
    FdState *s = fd_state(vp, fd);
    if (!s || s->kind != FdKind::File || offset < 0) return pwrite(fd, buf, count, offset);
    iovec iov{const_cast<void *>(buf), count};
    return posix_result(file_rw(vp, s, fd, true, &iov, 1, offset, WEFT_SITE()));
}

int weft_fsync(int fd) {
    Vproc *vp = tls_vproc;
    if (!vp) return fsync(fd);
    if (vp->reactor->can_submit()) {
        IoOp op{IoKind::Fsync};
        op.fd = fd;
        CallDeadline dl;
        return static_cast<int>(posix_result(run_op(vp, &op, dl, WEFT_SITE())));
    }
    return offload_syscall(vp, WEFT_SITE(), [&] { return fsync(fd); });
}

int weft_fstat(int fd, struct stat *st) {
    if (Vproc *vp = tls_vproc) vp->stats.io_syscalls.add();
    return fstat(fd, st);
}

void *weft_offload(void *(*fn)(void *), void *arg) {
    Vproc *vp = tls_vproc;
    if (!vp || !fn) return fn ? fn(arg) : nullptr;
    return offload_syscall(vp, WEFT_SITE(), [&] { return fn(arg); });
}

int weft_set_workers(int n) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    if (n < 1 || n > RuntimeConfig::kMaxWorkers) return EINVAL;
    offload_pool(vp).set_max(n);
    return 0;
}

int weft_get_workers(int *running) {
    Vproc *vp = tls_vproc;
    if (!vp) return -1;
    if (running) *running = offload_pool(vp).workers();
    return offload_pool(vp).max();
}

int weft_set_io_timeout_ns(uint64_t timeout_ns) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    vp->current->io_timeout = timeout_ns;
    return 0;
}

int weft_set_io_deadline_ns(uint64_t deadline_ns) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    vp->current->io_deadline = deadline_ns;
    return 0;
}

} // extern "C"
