// The io_uring backend (liburing). Readiness: a multishot poll per
// descriptor, added when a thread first parks on it with the union of the
// events its waiters want (widened by remove + re-add), like epoll's
// edge-triggered registration: every wake-up of the file posts a completion
// and the poll stays. A multishot poll that cannot post (the CQ ring is
// full) ends with a last completion without IORING_CQE_F_MORE, which the
// kernel keeps on its overflow list (IORING_FEAT_NODROP) until an enter
// flushes it; reap() asks for that flush whenever the kernel flags an
// overflow, and a poll that ended is added again for the waiters still
// waiting. (A first multishot version that did not flush lost wake-ups
// under overflow; one-shot polls, one per park, were correct but cost 20 %
// of the pipe benchmark's throughput at 8 pipes — docs/io.md.)
// Completions: disk reads and writes, fsync, splice. Wake-ups: an eventfd
// with its own one-shot poll.
//
// Submissions are queued in the SQ ring and go to the kernel in one
// io_uring_enter per scheduler iteration: poll() flushes them, wait()
// flushes and waits in the same call. Reaping reads the CQ ring in user
// memory, so the periodic poll costs no system call unless the kernel asks
// for one (IORING_SQ_TASKRUN with COOP_TASKRUN: deferred completion work).
//
// user_data: an FdState* | generation << 1 (readiness), an IoOp* | 1 (an
// operation), or one of the small tags below. The generation tells a
// descriptor's current poll from a removed one whose completion is still on
// its way.
#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "core/vproc.hpp"
#include "io/fd.hpp"

namespace weft::detail {
namespace {

constexpr uint64_t kTagWake = 8;     // the eventfd's poll
constexpr uint64_t kTagIgnore = 16;  // completions nobody waits for
constexpr uint64_t kOpBit = 1;       // IoOp pointers are at least 8-aligned
constexpr unsigned kEntries = 256;   // SQ size: a batch per iteration rarely exceeds it
constexpr unsigned kCqEntries = 4096; // one completion per waiting thread or operation; more overflow (kept)
constexpr uint64_t kGenShift = 1, kGenMask = 3; // FdState is 16-aligned: bits 1-2 are free ...
constexpr uint64_t kRemoveBit = 8;   // ... and bit 3: a poll removal's result, for that poll
static_assert(alignof(FdState) >= 16);

uint64_t poll_tag(const FdState *s) {
    return reinterpret_cast<uint64_t>(s) | (uint64_t{uint8_t(s->backend_gen)} << kGenShift);
}

// The state a completion's tag names if it is a poll's, else nullptr (which
// poll, and whether it is still armed, is deliver's question).
const FdState *poll_state(uint64_t ud) {
    if (ud == kTagWake || ud == kTagIgnore || (ud & (kOpBit | kRemoveBit))) return nullptr;
    return reinterpret_cast<const FdState *>(ud & ~(kGenMask << kGenShift));
}

class UringReactor final : public Reactor {
public:
    UringReactor(const io_uring &ring, int efd) : ring_(ring), efd_(efd) { sticky_arm = true; }
    ~UringReactor() override {
        io_uring_queue_exit(&ring_);
        close(efd_);
    }
    const char *name() const override { return "uring"; }
    bool can_submit() const override { return true; }
    bool cheap_poll() const override { return true; }
    bool pending() const override {
        return io_uring_cq_ready(&ring_) || (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN);
    }

    // Owner's thread only (requests from other vprocs are queued).
    int arm(int fd, FdState *s, uint32_t events) override {
        if (s->owner() != this) return 0; // closed and armed elsewhere since it was queued
        events &= POLLIN | POLLOUT | POLLPRI;
        if (s->armed) {
            if ((s->backend_events & events) == events) return 0;
            events |= s->backend_events; // widen: replace the poll
            remove_now(poll_tag(s));
        }
        s->backend_gen = static_cast<uint8_t>((s->backend_gen + 1) & kGenMask);
        s->backend_events = events;
        s->backend_fd = fd;
        s->armed = true;
        io_uring_sqe *sqe = sqe_get();
        // RDHUP with POLLIN: the peer's FIN is remembered (FdState::kReadEnded)
        io_uring_prep_poll_multishot(sqe, fd, events | (events & POLLIN ? POLLRDHUP : 0u));
        io_uring_sqe_set_data64(sqe, poll_tag(s));
        return 0;
    }

    // The poll holds a reference to the file: remove it now, and push the
    // removal to the kernel at once so that the close that follows releases
    // the file (a peer must see the connection end). The enter also asks
    // for events: with DEFER_TASKRUN the cancelled poll's completion — and
    // with it the poll's reference to the file — waits for the next enter
    // that does, which a vproc busy running threads may not make for a long
    // time (the socket stayed open: no FIN for the client).
    void disarm(int, FdState *s) override {
        if (!s->armed) return;
        const uint64_t tag = poll_tag(s);
        s->armed = false;
        s->backend_events = 0;
        remove_now(tag);
    }

    void submit(IoOp *op) override {
        io_uring_sqe *sqe = sqe_get();
        switch (op->kind) {
        case IoKind::Read: io_uring_prep_read(sqe, op->fd, op->buf, op->len, op->off); break;
        case IoKind::Write: io_uring_prep_write(sqe, op->fd, op->buf, op->len, op->off); break;
        case IoKind::Readv: io_uring_prep_readv(sqe, op->fd, static_cast<const iovec *>(op->buf), op->len, op->off); break;
        case IoKind::Writev: io_uring_prep_writev(sqe, op->fd, static_cast<const iovec *>(op->buf), op->len, op->off); break;
        case IoKind::Fsync: io_uring_prep_fsync(sqe, op->fd, op->flags); break;
        case IoKind::Splice:
            io_uring_prep_splice(sqe, op->fd, static_cast<int64_t>(op->off), op->fd2, static_cast<int64_t>(op->off2),
                                 op->len, op->flags);
            break;
        case IoKind::Cancel: io_uring_prep_cancel64(sqe, reinterpret_cast<uint64_t>(op->target) | kOpBit, 0); break;
        }
        io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(op) | kOpBit);
    }

    bool flush() override {
        if (!io_uring_sq_ready(&ring_)) return false;
        submit_now();
        return true;
    }

    void poll() override {
        apply_remote();
        if (io_uring_sq_ready(&ring_) || (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN)) enter(0, nullptr);
        reap();
    }

    void wait(uint64_t deadline) override {
        apply_remote();
        if (!wake_armed_) arm_wake();
        // Something already there: flush and go back to run it. (Tested
        // inline first: a wait nearly always finds nothing there.)
        if (io_uring_cq_ready(&ring_) && reap()) {
            if (io_uring_sq_ready(&ring_)) enter(0, nullptr);
            return;
        }
        if (int64_t rel = timeout_until(deadline); rel < 0) {
            enter(1, nullptr);
        } else {
            __kernel_timespec ts{rel / 1000000000, rel % 1000000000};
            enter(1, &ts);
        }
        reap();
    }

    void wake() override {
        uint64_t one = 1;
        ssize_t r = write(efd_, &one, sizeof one);
        (void)r;
    }

    // The ring was made disabled by the thread that starts the runtime;
    // enabling it here makes this vproc's thread its one submitter.
    void attach_thread() override {
        // (liburing 2.3 has no io_uring_enable_rings: the register call itself)
        if (disabled_) syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
        disabled_ = false;
    }
    bool disabled_ = false;

private:
    io_uring_sqe *sqe_get() {
        io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
        while (!sqe) { // the ring is full: flush it (and make room in the CQ ring)
            enter(0, nullptr);
            reap();
            sqe = io_uring_get_sqe(&ring_);
        }
        return sqe;
    }

    void submit_now() {
        vp->stats.io_syscalls.add();
        io_uring_submit(&ring_);
    }

    // Submit what is queued and wait for `want` completions (0: don't wait).
    void enter(unsigned want, __kernel_timespec *ts) {
        vp->stats.io_syscalls.add();
        io_uring_cqe *cqe;
        if (ts) io_uring_submit_and_wait_timeout(&ring_, &cqe, want, ts, nullptr);
        else if (want) io_uring_submit_and_wait(&ring_, want);
        else if (io_uring_sq_ready(&ring_)) io_uring_submit(&ring_);
        else io_uring_get_events(&ring_);
    }

    // Remove a poll and see it go. The removal goes with an ask for events,
    // which runs the cancelled poll's completion — and so lets go of its
    // file — in the same call. A poll with an event on its way refuses with
    // EALREADY: that event's work, queued when it came, has run by the end
    // of the call and the poll polls on, so ask again (read from the CQ ring
    // without reaping it; deliver() skips the answers later).
    void remove_now(uint64_t tag) {
        for (int tries = 0; tries < 16; ++tries) {
            remove_poll_tag(tag);
            vp->stats.io_syscalls.add();
            io_uring_submit_and_get_events(&ring_);
            if (!removal_refused(tag)) return;
        }
    }
    // The newest answer to a removal of `tag` among the unreaped
    // completions is EALREADY.
    bool removal_refused(uint64_t tag) const {
        const unsigned mask = *ring_.cq.kring_mask;
        const unsigned tail = io_uring_smp_load_acquire(ring_.cq.ktail);
        int res = 0;
        for (unsigned i = *ring_.cq.khead; i != tail; ++i) {
            const io_uring_cqe &c = ring_.cq.cqes[i & mask];
            if (c.user_data == (tag | kRemoveBit)) res = c.res;
        }
        return res == -EALREADY;
    }
    void remove_poll_tag(uint64_t tag) {
        io_uring_sqe *sqe = sqe_get();
        io_uring_prep_poll_remove(sqe, tag);
        io_uring_sqe_set_data64(sqe, tag | kRemoveBit);
    }

    void arm_wake() {
        io_uring_sqe *sqe = sqe_get();
        io_uring_prep_poll_add(sqe, efd_, POLLIN);
        io_uring_sqe_set_data64(sqe, kTagWake);
        wake_armed_ = true;
    }

    // Deliver every completion in the ring. Returns how many there were.
    unsigned reap() {
        unsigned n = 0;
        // Completions the kernel kept on its overflow list reach the ring
        // only through an enter: ask for them.
        if (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_CQ_OVERFLOW) enter(0, nullptr);
        for (;;) {
            constexpr unsigned kBatch = 64;
            io_uring_cqe *batch[kBatch];
            unsigned got = io_uring_peek_batch_cqe(&ring_, batch, kBatch);
            if (!got) break;
            prefetch_wakes(got, vp->smp, [&batch](unsigned i) { return poll_state(batch[i]->user_data); });
            for (unsigned i = 0; i < got; ++i) deliver(batch[i]);
            io_uring_cq_advance(&ring_, got);
            n += got;
            // Fewer than asked for: the ring was empty at the tail we read.
            // What came since waits for the next reap (a wait returns at
            // once for it), not for another look now.
            if (got < kBatch) break;
        }
        return n;
    }

    void deliver(const io_uring_cqe *cqe) {
        uint64_t ud = cqe->user_data;
        if (ud == kTagIgnore) return;
        if (ud == kTagWake) { // consume the wake-ups; re-armed at the next wait
            wake_armed_ = false;
            uint64_t n;
            ssize_t r = read(efd_, &n, sizeof n);
            (void)r;
            return;
        }
        if (ud & kOpBit) {
            io_complete(reinterpret_cast<IoOp *>(ud & ~kOpBit), cqe->res);
            return;
        }
        if (ud & kRemoveBit) return; // a removal's answer (not an IoOp: bit 0 is clear): remove_now read it
        auto *s = reinterpret_cast<FdState *>(ud & ~(kGenMask << kGenShift));
        if (cqe->res == -ECANCELED) return; // removed
        if (s->owner() != this || !s->armed || ud != poll_tag(s)) return; // a removed poll's last word
        const bool more = cqe->flags & IORING_CQE_F_MORE;
        if (!more) {
            s->armed = false;
            s->backend_events = 0;
        }
        uint32_t revents = cqe->res < 0 ? POLLERR : static_cast<uint32_t>(cqe->res);
        uint32_t still = io_ready(s, revents);
        // The poll ended (the ring was full, or an error): poll again for
        // the waiters still waiting.
        if (!more && still) arm(s->backend_fd, s, still);
    }

    io_uring ring_;
    int efd_;
    bool wake_armed_ = false;
};

} // namespace

std::unique_ptr<Reactor> make_uring_reactor(Vproc *vp) {
    io_uring ring;
    io_uring_params p{};
    // DEFER_TASKRUN (6.1): the kernel runs completion work only when this
    // vproc asks for events, in a batch, instead of on its way back to user
    // space after every system call (COOP_TASKRUN: get_signal ->
    // task_work_run took ~2.5 % of a web server's CPU). It needs a single
    // submitting thread: the ring starts disabled and the vproc's thread
    // enables it (attach_thread). A closed descriptor's poll must then be
    // removed with an ask for events, and removed again while refused
    // (remove_now; docs/io.md). WEFT_DEFER=0 asks for COOP_TASKRUN, which
    // is also what a kernel before 6.1 gets.
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_DEFER_TASKRUN |
              IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED;
    if (const char *d = getenv("WEFT_DEFER"); d && *d == '0')
        p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    // WEFT_URING_CQ: the CQ ring's size (a power of two >= 256); small rings
    // let the tests make the kernel overflow it.
    unsigned cq = kCqEntries;
    if (const char *e = getenv("WEFT_URING_CQ")) {
        unsigned long v = strtoul(e, nullptr, 10);
        if (v >= kEntries && v <= 65536 && (v & (v - 1)) == 0) cq = static_cast<unsigned>(v);
    }
    p.cq_entries = cq;
    int r = io_uring_queue_init_params(kEntries, &ring, &p);
    const bool disabled = r == 0 && (p.flags & IORING_SETUP_R_DISABLED);
    if (r == -EINVAL) { // before 6.1: no DEFER_TASKRUN
        unsigned cq_entries = p.cq_entries;
        p = io_uring_params{};
        p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
        p.cq_entries = cq_entries;
        r = io_uring_queue_init_params(kEntries, &ring, &p);
    }
    if (r == -EINVAL) { // an older kernel without the task-run flags
        p = io_uring_params{};
        p.flags = IORING_SETUP_CQSIZE;
        p.cq_entries = cq;
        r = io_uring_queue_init_params(kEntries, &ring, &p);
    }
    if (r < 0) {
        errno = -r;
        return nullptr;
    }
    if (!(p.features & IORING_FEAT_EXT_ARG) || !(p.features & IORING_FEAT_NODROP)) {
        io_uring_queue_exit(&ring); // waits with a timeout need EXT_ARG (5.11); NODROP keeps events
        errno = ENOSYS;
        return nullptr;
    }
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) {
        int e = errno;
        io_uring_queue_exit(&ring);
        errno = e;
        return nullptr;
    }
    auto reactor = std::make_unique<UringReactor>(ring, efd);
    reactor->vp = vp;
    reactor->disabled_ = disabled;
    return reactor;
}

} // namespace weft::detail
