// The descriptor table, readiness waits, completion waits and close.
#include "io/fd.hpp"
#include "sched/tap.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>

#include "core/runtime.hpp"

namespace weft::detail {

// ---- the table -------------------------------------------------------------

namespace {

// Descriptors the table can describe: the hard RLIMIT_NOFILE (a process can
// raise its soft limit up to it at any time), capped by fs.nr_open.
unsigned table_limit() {
    unsigned long lim = 1u << 20;
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY) lim = rl.rlim_max;
    if (FILE *f = std::fopen("/proc/sys/fs/nr_open", "r")) {
        unsigned long n;
        if (std::fscanf(f, "%lu", &n) == 1 && n < lim) lim = n;
        std::fclose(f);
    }
    return static_cast<unsigned>(lim < (1u << 26) ? lim : (1u << 26));
}

} // namespace

FdTable::FdTable() : limit_(table_limit()) {
    unsigned n = (limit_ + kChunk - 1) >> kChunkBits;
    chunks_ = new std::atomic<FdState *>[n];
    for (unsigned i = 0; i < n; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

// Descriptors weft made O_NONBLOCK (accept, connect, sendfile, ttys) get
// their blocking mode back when the runtime ends: weft.h promises the
// program's mode, and a child process or a plain library may use them next.
void FdTable::restore_modes() {
    unsigned n = (limit_ + kChunk - 1) >> kChunkBits;
    for (unsigned i = 0; i < n; ++i) {
        FdState *c = chunks_[i].load(std::memory_order_acquire);
        for (unsigned j = 0; c && j < kChunk; ++j) {
            if (!c[j].weft_nonblock || c[j].kind == FdKind::Unknown) continue;
            int fd = static_cast<int>((i << kChunkBits) + j);
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            c[j].weft_nonblock = false;
        }
    }
}

void FdTable::set_user_nonblock(uint32_t file, bool on) {
    unsigned n = (limit_ + kChunk - 1) >> kChunkBits;
    for (unsigned i = 0; i < n; ++i) {
        FdState *c = chunks_[i].load(std::memory_order_acquire);
        for (unsigned j = 0; c && j < kChunk; ++j)
            if (c[j].file == file && c[j].kind != FdKind::Unknown) c[j].user_nonblock = on;
    }
}

FdTable::~FdTable() {
    restore_modes();
    unsigned n = (limit_ + kChunk - 1) >> kChunkBits;
    for (unsigned i = 0; i < n; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
    delete[] chunks_;
}

// Chunks are made by whichever vproc needs one first; a loser of the race
// frees its copy.
FdState *FdTable::make_chunk(unsigned i) {
    auto *fresh = new (std::nothrow) FdState[kChunk];
    if (!fresh) return nullptr;
    FdState *expected = nullptr;
    if (chunks_[i].compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) return fresh;
    delete[] fresh;
    return expected;
}

int FdTable::fd_of(const FdState *s) const {
    unsigned n = (limit_ + kChunk - 1) >> kChunkBits;
    for (unsigned i = 0; i < n; ++i) {
        const FdState *c = chunks_[i].load(std::memory_order_acquire);
        if (c && s >= c && s < c + kChunk) return static_cast<int>((i << kChunkBits) + static_cast<unsigned>(s - c));
    }
    return -1;
}

uint32_t FdState::wanted() const {
    uint32_t w = 0;
    for (IoWaiter *n = head; n; n = n->next) w |= n->events;
    return w;
}

// ---- classification --------------------------------------------------------

namespace {

// What the file at fd is: its kind and its F_GETFL flags, as the kernel
// has them now. False when fd names no file.
bool look_at(Vproc *vp, int fd, FdKind *kind, int *fl) {
    struct stat st;
    vp->stats.io_syscalls.add(2);
    *fl = fcntl(fd, F_GETFL);
    if (*fl < 0 || fstat(fd, &st) != 0) return false;
    if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode) || S_ISDIR(st.st_mode)) {
        *kind = FdKind::File;
    } else if (S_ISFIFO(st.st_mode)) {
        *kind = FdKind::Pipe;
    } else if (S_ISSOCK(st.st_mode)) {
        int type = 0;
        socklen_t len = sizeof type;
        vp->stats.io_syscalls.add();
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
        *kind = type == SOCK_STREAM ? FdKind::Stream : FdKind::Socket;
    } else {
        *kind = FdKind::Pollable; // a tty, an eventfd, a character device
    }
    return true;
}

// fd_closed's check, under the lock: s, classified while the number was
// being closed, matches the file at fd now (kind, O_NONBLOCK, O_DIRECT).
bool still_describes(Vproc *vp, const FdState *s, int fd) {
    if (s->kind == FdKind::Unknown) return false;
    FdKind kind;
    int fl;
    if (!look_at(vp, fd, &kind, &fl)) return false;
    return kind == s->kind && bool(fl & O_NONBLOCK) == (s->user_nonblock || s->weft_nonblock) &&
           bool(fl & O_DIRECT) == (kind == FdKind::File && s->direct);
}

} // namespace

// Once per descriptor, under its lock: two threads meeting a descriptor
// for the first time on two vprocs must not both classify it — the second
// would read back the O_NONBLOCK the first just set and take it for the
// program's. The flags are stored before `kind`, which readers test first
// without the lock. Kept out of fd_state's fast path.
[[gnu::noinline, gnu::cold]] void fd_classify(Vproc *vp, FdState *s, int fd) {
    SpinGuard g(s->lock, vp->smp);
    if (s->kind != FdKind::Unknown) return; // another thread was first
    FdKind kind;
    int fl;
    if (!look_at(vp, fd, &kind, &fl)) return; // stays Unknown: the call itself reports EBADF
    const bool user_nonblock = fl & O_NONBLOCK;
    bool weft_nonblock = false;
    // A pipe is made non-blocking, as a socket is, for the cheaper plain
    // read/write — except the standard descriptors, which a shell often
    // shares with other processes that expect blocking mode: those keep it
    // and use RWF_NOWAIT per call (docs/io.md). Anything else pollable (a
    // tty, an eventfd) has no per-call non-blocking flag: weft sets it.
    if (!user_nonblock && (kind == FdKind::Pollable || (kind == FdKind::Pipe && fd > 2))) {
        vp->stats.io_syscalls.add();
        weft_nonblock = fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
    }
    s->user_nonblock = user_nonblock;
    s->weft_nonblock = weft_nonblock;
    s->direct = kind == FdKind::File && (fl & O_DIRECT);
    s->ready.store(FdState::kReadable | FdState::kWritable, std::memory_order_relaxed);
    s->kind = kind; // last: a reader that sees it sees the rest
}

void fd_created(Vproc *vp, int fd, FdKind k, bool user_nonblock, bool weft_nonblock) {
    ++vp->res_fds;
    FdState *s = vp->rt->fds.get(fd);
    if (!s) return;
    SpinGuard g(s->lock, vp->smp);
    s->closing = false; // a new file with the number: fd_closed leaves it be
    s->user_nonblock = user_nonblock;
    s->weft_nonblock = weft_nonblock;
    s->file = 0; // a new open file (fd_dup sets it for a dup)
    s->ready.store(FdState::kReadable | FdState::kWritable, std::memory_order_relaxed);
    s->kind = k; // last, as in classify
}

void fd_dup(Vproc *vp, int from, int to) {
    static std::atomic<uint32_t> next_file{0};
    FdState *s = fd_state(vp, from), *d = vp->rt->fds.get(to);
    if (!s || !d || s->kind == FdKind::Unknown) return;
    if (!s->file) s->file = next_file.fetch_add(1, std::memory_order_relaxed) + 1;
    fd_created(vp, to, s->kind, s->user_nonblock, s->weft_nonblock);
    d->file = s->file;
    d->direct = bool(s->direct);
}

// ---- deadlines -------------------------------------------------------------

uint64_t CallDeadline::get(const Tcb *t) {
    if (!known_) {
        known_ = true;
        at_ = t->io_deadline;
        if (t->io_timeout) {
            uint64_t rel = now_ns() + t->io_timeout;
            if (!at_ || rel < at_) at_ = rel;
        }
    }
    return at_;
}

// ---- readiness -------------------------------------------------------------

namespace {

void link(FdState *s, IoWaiter *w) {
    w->next = nullptr;
    w->prev = s->tail;
    if (s->tail) s->tail->next = w;
    else s->head = w;
    s->tail = w;
    w->linked = true;
}

void unlink(FdState *s, IoWaiter *w) {
    if (w->prev) w->prev->next = w->next;
    else s->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else s->tail = w->prev;
    w->linked = false;
}

// Tell the continuation waiters collected under a descriptor's lock.
void call_wakes(IoWaiter *w, int result) {
    while (w) {
        IoWaiter *n = w->next; // w may be reused once told
        w->wake(w, result);
        w = n;
    }
}

// Unlink every waiter (under s->lock): threads claimed into `woken`,
// continuations onto `calls`; both told after the lock is released.
void take_all_waiters(FdState *s, bool smp, WakeList &woken, IoWaiter *&calls) {
    while (IoWaiter *w = s->head) {
        unlink(s, w);
        if (!w->t) {
            w->next = calls;
            calls = w;
        } else if (claim(w->t, smp)) {
            woken.add(w->t);
        }
    }
}

uint8_t ready_bits(uint32_t revents) {
    uint8_t b = 0;
    if (revents & (POLLIN | POLLRDHUP | POLLERR | POLLHUP | POLLNVAL)) b |= FdState::kReadable;
    if (revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) b |= FdState::kWritable;
    if (revents & (POLLRDHUP | POLLERR | POLLHUP | POLLNVAL)) b |= FdState::kReadEnded;
    if (revents & (POLLERR | POLLHUP | POLLNVAL)) b |= FdState::kWriteEnded;
    return b;
}

uint32_t wake_mask(uint8_t bits) {
    return (bits & FdState::kReadable ? POLLIN | POLLPRI : 0u) | (bits & FdState::kWritable ? POLLOUT : 0u);
}

// Arm the descriptor for the waiters now queued (under s->lock). 0 or the
// errno of a descriptor the reactor cannot watch.
int arm_locked(Vproc *vp, FdState *s, int fd, uint32_t events) {
    WEFT_DCHECK_HOME(vp);
    if (s->closing) return 0; // fd_closed wakes the waiter
    Reactor *r = s->owner();
    // Armed here already, for these events (the usual park): nothing to do.
    // Only the owner's own vproc reads `armed` and `backend_events` so.
    if (r == vp->reactor.get() && r->sticky_arm && s->armed && (s->backend_events & events) == events) return 0;
    if (!r) {
        r = vp->reactor.get();
        s->reactor = r;
    }
    return r->arm_from(vp, fd, s, events);
}

} // namespace

uint32_t io_ready(FdState *s, uint32_t revents) {
    Vproc *vp = tls_vproc;
    const bool smp = vp->smp;
    vp->stats.io_completions.add();
    WakeList woken;
    IoWaiter *calls = nullptr;
    uint32_t still;
    {
        SpinGuard g(s->lock, smp);
        uint8_t bits = ready_bits(revents);
        s->seq.store(s->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        // every writer holds the lock: a plain load and store, no locked RMW
        s->ready.store(static_cast<uint8_t>(s->ready.load(std::memory_order_relaxed) | bits), std::memory_order_relaxed);
        uint32_t mask = wake_mask(bits);
        for (IoWaiter *w = s->head; w;) {
            IoWaiter *n = w->next;
            if (w->events & mask) {
                unlink(s, w);
                if (!w->t) { // a continuation: told after the lock is released
                    w->next = calls;
                    calls = w;
                } else if (claim(w->t, smp)) {
                    woken.add(w->t);
                }
            }
            w = n;
        }
        still = s->wanted();
    }
    woken.make_ready_all(0);
    call_wakes(calls, 0);
    return still;
}

int wait_fd(Vproc *&vp, FdState *s, int fd, uint32_t events, uint32_t seq, CallDeadline &dl, const void *site) {
    Tcb *self = vp->current;
    IoWaiter w{self, nullptr, nullptr, events, false};
    {
        SpinGuard g(s->lock, vp->smp);
        if (s->seq.load(std::memory_order_relaxed) != seq) return 0; // an event came: try again
        s->clear_ready(events);
        if (int e = arm_locked(vp, s, fd, events)) return e;
        link(s, &w);
        self->state = ThreadState::Parked;
    }
    uint64_t deadline = dl.get(self);
    vp->io_wait_begin();
    vp->stats.io_parks.add();
    int r = park_held(vp, WEFT_PARK_IO, site, deadline);
    vp->io_wait_end();
    // Woken by our timer: leave the list under its lock before the claim is
    // released, so a waker that found us there is done with us (park.hpp).
    if (r == ETIMEDOUT) {
        SpinGuard g(s->lock, vp->smp);
        if (w.linked) unlink(s, &w);
    }
    park_release(vp->current);
    return r;
}

int link_fd_waiter(Vproc *vp, FdState *s, int fd, IoWaiter *w, uint32_t seq) {
    SpinGuard g(s->lock, vp->smp);
    if (s->seq.load(std::memory_order_relaxed) != seq) return 1; // an event came: try again
    s->clear_ready(w->events);
    if (int e = arm_locked(vp, s, fd, w->events)) return e;
    link(s, w);
    return 0;
}

int wait_fd_async(Vproc *vp, FdState *s, int fd, IoWaiter *w, uint32_t seq) {
    int rc = link_fd_waiter(vp, s, fd, w, seq);
    if (rc == 0) {
        ++vp->io_waiters;
        vp->stats.io_parks.add();
    }
    return rc;
}

bool cancel_fd_async(Vproc *vp, FdState *s, IoWaiter *w) {
    SpinGuard g(s->lock, vp->smp);
    if (!w->linked) return false;
    unlink(s, w);
    return true;
}

int wait_fds(Vproc *&vp, FdState **ss, const int *fds, IoWaiter *ws, const uint32_t *seqs, size_t n,
             uint64_t deadline, const void *site) {
    Tcb *self = vp->current;
    for (size_t i = 0; i < n; ++i) ws[i].linked = false;
    self->state = ThreadState::Parked;
    // Link a waiter on every descriptor. An event that came after the
    // caller's look (seq moved; another vproc's reactor may deliver it at
    // any time) and before our waiter was linked woke nobody: then stop.
    bool missed = false;
    for (size_t i = 0; i < n && !missed; ++i) {
        if (!ss[i]) continue;
        ws[i].t = self;
        SpinGuard g(ss[i]->lock, vp->smp);
        if (ss[i]->seq.load(std::memory_order_relaxed) != seqs[i]) missed = true;
        else if (arm_locked(vp, ss[i], fds[i], ws[i].events) == 0) link(ss[i], &ws[i]);
        else missed = true; // cannot be watched (closed meanwhile): poll(2) says what it is
    }
    // Missed one: look again instead of parking, unless a waker on a list we
    // are already on has claimed us — its wake-up is coming and must be
    // taken by parking (park.hpp: one waker per park).
    if (missed && claim(self, vp->smp)) {
        for (size_t i = 0; i < n; ++i) {
            if (!ss[i]) continue;
            SpinGuard g(ss[i]->lock, vp->smp);
            if (ws[i].linked) unlink(ss[i], &ws[i]);
        }
        self->state = ThreadState::Running;
        park_release(self);
        return 0;
    }
    vp->io_wait_begin();
    vp->stats.io_parks.add();
    int r = park_held(vp, WEFT_PARK_IO, site, deadline);
    vp->io_wait_end();
    // Leave every list under its lock before the claim is released: a
    // waker on any of them may still be about to claim us (park.hpp).
    for (size_t i = 0; i < n; ++i) {
        if (!ss[i]) continue;
        SpinGuard g(ss[i]->lock, vp->smp);
        if (ws[i].linked) unlink(ss[i], &ws[i]);
    }
    park_release(vp->current);
    return r == EBADF ? 0 : r;
}

void fd_forget(Vproc *&vp, FdState *s, int fd) {
    WakeList woken;
    IoWaiter *calls = nullptr;
    // Another vproc's reactor drops the registration on its own kernel
    // thread, and this one waits for that outside the lock (that vproc may
    // be delivering an event for fd and need the lock): only then may the
    // number be closed and reused. Dropped later, the old registration's
    // state would still be in s when the next file with this number is
    // armed — and that arm would find it "armed" and never be told of an
    // event (io_uring) — and the old poll would hold the file open.
    Reactor *owner = s->owner();
    if (owner && owner->disarm_is_remote(vp)) owner->disarm_from(vp, fd, s);
    {
        SpinGuard g(s->lock, vp->smp);
        take_all_waiters(s, vp->smp, woken, calls);
        if (Reactor *r = s->owner(); r && !r->disarm_is_remote(vp)) r->disarm_from(vp, fd, s);
        s->reactor = nullptr;
        s->kind = FdKind::Unknown;
        s->closing = true;
        s->user_nonblock = s->weft_nonblock = false;
        s->file = 0;
        s->seq.store(s->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        s->ready.store(FdState::kReadable | FdState::kWritable, std::memory_order_relaxed);
        s->closes = s->closes + 1;
    }
    woken.make_ready_all(EBADF);
    call_wakes(calls, EBADF);
}

void fd_closed(Vproc *vp, FdState *s, int fd) {
    WakeList woken;
    IoWaiter *calls = nullptr;
    {
        SpinGuard g(s->lock, vp->smp);
        // No fd_created since fd_forget. A thread that met the number
        // meanwhile classified it: the old file, if it came before close(2)
        // (a thread racing its own close), or the next file, opened behind
        // weft's back (a cache's openat on another vproc) — and that one is
        // in use now: resetting it would fail its calls with EBADF. So the
        // state stays if it still describes the file at the number.
        if (s->closing && !still_describes(vp, s, fd)) {
            s->kind = FdKind::Unknown;
            s->user_nonblock = s->weft_nonblock = false;
            s->file = 0;
        }
        s->closing = false;
        if (!s->head) return;
        // Waiters linked while it closed: told to look again (a waiter of a
        // new file with the number, if one came that fast, just looks again).
        s->seq.store(s->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        take_all_waiters(s, vp->smp, woken, calls);
    }
    woken.make_ready_all(0);
    call_wakes(calls, 0);
}

// ---- completions -----------------------------------------------------------

void io_complete(IoOp *op, int res) {
    Vproc *vp = tls_vproc;
    vp->stats.io_completions.add();
    op->res = res;
    op->done.store(true, std::memory_order_release);
    if (op->waiter) wake(op->waiter, 0, vp->smp);
}

int run_op(Vproc *&vp, IoOp *op, CallDeadline &dl, const void *site) {
    if (vp->tap) return tap_disk(vp, op, dl, site); // by appointment, in the DISK calendar
    Tcb *self = vp->current;
    op->waiter = self;
    self->state = ThreadState::Parked;
    // The operation is in this vproc's ring until it completes, and only
    // this vproc can cancel it: the thread stays here until then.
    self->pinned |= kPinnedOp;
    vp->reactor->submit(op);
    // A vproc with CPU to spare submits at once, so the device has the
    // operation while the vproc runs its other threads; a busy one leaves it
    // for the turn's batch (Vproc::submits_now has the why and the figures).
    if (vp->submits_now) {
        --vp->submits_now;
        vp->reactor->flush();
    }
    vp->io_wait_begin();
    vp->stats.io_parks.add();
    int r = park(vp, WEFT_PARK_IO, site, dl.get(self));
    if (r == ETIMEDOUT && !op->done.load(std::memory_order_acquire)) wait_cancelled(vp, op, site);
    vp->io_wait_end();
    vp->current->pinned &= static_cast<uint8_t>(~kPinnedOp);
    return op->res;
}

int wait_cancelled(Vproc *&vp, IoOp *op, const void *site) {
    // The buffer must outlive the kernel's use of it: ask for an early end
    // and wait for the completion whatever it says.
    Tcb *self = vp->current;
    op->waiter = self;
    IoOp cancel{IoKind::Cancel};
    cancel.target = op;
    cancel.waiter = self;
    vp->reactor->submit(&cancel);
    for (;;) { // both live on this stack: wait for both completions
        self->state = ThreadState::Parked;
        if (op->done.load(std::memory_order_acquire) && cancel.done.load(std::memory_order_acquire)) break;
        park(vp, WEFT_PARK_IO, site, 0);
        self = vp->current;
    }
    self->state = ThreadState::Running;
    if (op->res == -ECANCELED || op->res == -EINTR) op->res = -ETIMEDOUT;
    return op->res;
}

void consume_sigpipe() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    timespec zero{0, 0};
    while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
    }
}

} // namespace weft::detail
