// Per-descriptor state of the I/O layer, and the two ways a thread waits
// for the kernel: for a descriptor to become ready (wait_fd), and for a
// submitted operation to complete (run_op).
//
// The wrappers' model (what makes low concurrency cost no extra system call):
//  - Try first. A wrapper makes the non-blocking form of its system call
//    and parks only if the kernel says EAGAIN. Sockets use MSG_DONTWAIT, so
//    a socket keeps the blocking mode the program gave it until accept,
//    connect or sendfile, which have no per-call flag, make weft set
//    O_NONBLOCK on the file (FdState::weft_nonblock). Pipes are made
//    non-blocking when first seen (plain read/write is cheaper than
//    RWF_NOWAIT), except descriptors 0-2, which keep their mode and use
//    preadv2/pwritev2 with RWF_NOWAIT. weft_fcntl hides what weft set.
//  - Remember unreadiness. Readiness is edge-triggered: an event arrives
//    when a descriptor *becomes* ready. A stream read that returns less than
//    asked, or EAGAIN, drained the kernel buffer, so the next read parks
//    without trying (saving the EAGAIN system call that a naive loop pays
//    on every message); any later event makes it try again.
//  - No lost wake-up. FdState::seq counts events. A wrapper reads it
//    before its attempt; it parks only if no event arrived since (checked
//    under the lock that io_ready takes), else it tries again.
//  - Spurious wake-ups are harmless: a woken thread always retries the
//    system call, so a stale event costs one EAGAIN, never a wrong answer.
//
// A descriptor is armed in one reactor (the vproc of the first thread that
// parks on it) for its whole life; threads of other vprocs waiting on it are
// woken through make_ready like any cross-vproc wake-up.
//
// Lifetime: the table of states lives as long as the runtime. weft_close
// wakes every waiter (EBADF), disarms and resets the state before closing.
// A descriptor closed behind weft's back and reused keeps a stale state:
// close what weft has seen with weft_close (docs/io.md).
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/park.hpp"
#include "core/relaxed.hpp"
#include "io/reactor.hpp"

namespace weft::detail {

enum class FdKind : uint8_t {
    Unknown,  // not looked at yet
    Stream,   // stream socket: recv/send with MSG_DONTWAIT; short read = drained
    Socket,   // datagram/seqpacket socket: MSG_DONTWAIT, a short read says nothing
    Pipe,     // pipe or FIFO: O_NONBLOCK (0-2: RWF_NOWAIT); short read = drained
    Pollable, // anything else pollable (tty, eventfd ...): O_NONBLOCK set by weft
    File,     // regular file or block device: never "not ready"; misses go async
};

// One thread waiting for events on one descriptor. Lives on the waiting
// thread's stack; linked into FdState's list under its lock.
struct IoWaiter {
    Tcb *t;           // the parked thread; nullptr: a continuation, told through wake
    IoWaiter *prev, *next;
    uint32_t events;  // POLLIN / POLLOUT wanted
    bool linked;
    // t == nullptr (wait_fd_async): called once, outside the descriptor's
    // lock, on the vproc whose reactor delivered the event — with 0 for an
    // event, EBADF when the descriptor was closed. It must not block.
    void (*wake)(IoWaiter *w, int result) = nullptr;
};

struct alignas(64) FdState { // a line each; the io_uring tags use the four low bits
    Spin lock;                       // guards the rest with several vprocs
    // Written under the lock, read without it: a wrapper looks at them
    // before it locks, and may race a weft_close on another vproc (then its
    // system call fails with EBADF, or it parks and close wakes it).
    Relaxed<FdKind> kind{FdKind::Unknown};
    Relaxed<bool> user_nonblock{false}; // the program wants EAGAIN, not a park
    Relaxed<bool> weft_nonblock{false}; // weft set O_NONBLOCK on the file
    // Registered with `reactor` (edge-triggered backends): written by that
    // reactor's vproc; read, like `reactor`, by an earlier owner reaping a
    // removed poll's last completion.
    Relaxed<bool> armed{false};
    Relaxed<bool> direct{false};     // a File opened O_DIRECT: every transfer goes to the device
    bool closing = false;            // forgotten, close(2) not yet done: waiters link unarmed (fd_closed)
    uint32_t file = 0;               // open file description shared with a dup (0: not shared)
    std::atomic<uint8_t> ready{kReadable | kWritable}; // not known to be unready
    std::atomic<uint32_t> seq{0};    // events delivered so far
    // weft_close calls so far (fd_forget, under the lock): a call that was
    // queued before a close (by appointment, sched/tap.cc) must not be made
    // on whatever file the number names next.
    Relaxed<uint32_t> closes{0};
    // The reactor it is armed in. Written under the lock; read without it by
    // that reactor's vproc, which may still reap a completion of a poll
    // removed while another vproc forgot the descriptor (fd_forget).
    Relaxed<Reactor *> reactor{nullptr};
    Reactor *owner() const { return reactor; }
    IoWaiter *head = nullptr, *tail = nullptr;
    uint32_t backend_slot = 0;       // the poll backend's index + 1 (0: none)
    uint32_t backend_events = 0;     // interest the poll backend holds
    Relaxed<uint8_t> backend_gen{0}; // the io_uring backend's poll generation (tags its completions; read like `armed`)
    int backend_fd = -1;             // the descriptor, for a backend re-arming from a completion

    // ready bits. kReadable/kWritable: an attempt may succeed. The "ended"
    // bits record an event that no read or write consumes — the peer's FIN
    // or hang-up (reads end), an error or hang-up (writes end): the edge for
    // it has come and gone, so that direction is never marked drained again.
    static constexpr uint8_t kReadable = 1, kWritable = 2, kReadEnded = 4, kWriteEnded = 8;
    static uint8_t dir_bit(uint32_t events) { return events & POLLIN ? kReadable : kWritable; }
    // Forget readiness for `events` after a drained read/write (under lock).
    void clear_ready(uint32_t events) {
        uint8_t bit = dir_bit(events), r = ready.load(std::memory_order_relaxed);
        if (!(r & (bit << 2))) ready.store(static_cast<uint8_t>(r & ~bit), std::memory_order_relaxed);
    }
    bool drains_on_short() const { return kind == FdKind::Stream || kind == FdKind::Pipe; }
    uint32_t wanted() const; // union of the waiters' events (under the lock)
};

// The descriptor table: states for 0 .. limit-1, in chunks made on first use.
class FdTable {
public:
    FdTable();
    ~FdTable();
    FdTable(const FdTable &) = delete;
    FdTable &operator=(const FdTable &) = delete;
    // nullptr for a negative descriptor or one beyond the process limit.
    FdState *get(int fd) {
        if (static_cast<unsigned>(fd) >= limit_) return nullptr;
        FdState *c = chunks_[static_cast<unsigned>(fd) >> kChunkBits].load(std::memory_order_acquire);
        if (__builtin_expect(!c, 0)) c = make_chunk(static_cast<unsigned>(fd) >> kChunkBits);
        return c ? &c[static_cast<unsigned>(fd) & (kChunk - 1)] : nullptr;
    }
    int fd_of(const FdState *s) const; // reverse lookup, for backends that need it
    // O_NONBLOCK is a property of the open file, not of the number: set the
    // program's view of it on every descriptor that shares `file` (a dup).
    void set_user_nonblock(uint32_t file, bool on);
    // Give every descriptor weft made O_NONBLOCK its blocking mode back (at
    // the end of the runtime, or of a process that exits from inside it).
    void restore_modes();
private:
    static constexpr unsigned kChunkBits = 10, kChunk = 1u << kChunkBits;
    FdState *make_chunk(unsigned i);
    unsigned limit_ = 0;
    std::atomic<FdState *> *chunks_ = nullptr;
};

// A completion-based operation: what the kernel is asked, and its result.
// On the submitting thread's stack until it completed.
struct IoOp {
    IoKind kind;
    int fd = -1, fd2 = -1;           // Splice: fd in, fd2 out
    void *buf = nullptr;             // Read/Write buffer, or the iovec array (Readv/Writev)
    unsigned len = 0;                // bytes, or iovec count
    uint64_t off = ~uint64_t{0};     // file offset; ~0: the current position
    uint64_t off2 = ~uint64_t{0};    // Splice: output offset
    unsigned flags = 0;
    IoOp *target = nullptr;          // Cancel: the operation to cancel
    Tcb *waiter = nullptr;
    int res = 0;                     // >= 0 or -errno, valid once done
    std::atomic<bool> done{false};
};

// Per-call deadline from the thread's I/O timeout and deadline, computed the
// first time the call has to wait. 0 = none.
class CallDeadline {
public:
    uint64_t get(const Tcb *t);

private:
    bool known_ = false;
    uint64_t at_ = 0;
};

// --- called by backends, on the owning vproc's kernel thread ---
// fd became ready for `revents`: wake its waiters. Returns the events the
// remaining waiters still want (the poll backend re-arms them).
uint32_t io_ready(FdState *s, uint32_t revents);
// A submitted operation finished with res (>= 0 or -errno).
void io_complete(IoOp *op, int res);

// A backend about to deliver a batch of n events calls this first, with
// state_of(i) the FdState event i names (nullptr: none). With thousands of
// descriptors the threads an event wakes parked long ago, and io_ready
// meets three dependent cache misses: the FdState, its first waiter (in
// wait_fd's frame, on the parked thread's stack) and that thread's TCB
// (claim, then the run queue). Walking the batch once per level, the
// misses of a level overlap instead of following one another
// (weft-pipetest at 8,192 pipes: nearly all of io_ready's time sat on the
// waiter and the TCB loads). Smaller batches are still in cache. The
// waiter and TCB levels read the waiter list without its lock, which is
// only sound where nothing else runs: with several vprocs a waiter may be
// leaving, its stack chunk given back, so there only the states are
// prefetched.
// (An asm statement, not __builtin_prefetch: GCC 12 dropped the builtin's
// waiter and TCB prefetches from the object code.)
inline constexpr unsigned kWakePrefetchMin = 8; // smaller batches: all of it is still in cache
inline void prefetch_line(const void *p) { asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char *>(p))); }
template <class StateOf>
inline void prefetch_wakes(unsigned n, bool smp, StateOf state_of) {
    if (n < kWakePrefetchMin) return;
    for (unsigned i = 0; i < n; ++i)
        if (const FdState *s = state_of(i)) prefetch_line(s);
    if (smp) return;
    for (unsigned i = 0; i < n; ++i)
        if (const FdState *s = state_of(i); s && s->head) prefetch_line(s->head);
    for (unsigned i = 0; i < n; ++i)
        if (const FdState *s = state_of(i); s && s->head && s->head->t) {
            prefetch_line(s->head->t);
            prefetch_line(reinterpret_cast<const char *>(s->head->t) + 64);
        }
}

// --- called by wrappers ---
// The state of fd, classified on first use; nullptr if fd is out of range.
// Inline, in core/runtime.hpp (it reads the runtime's table); this is its
// cold part, the first look at a descriptor.
void fd_classify(Vproc *vp, FdState *s, int fd);
// Record that weft made fd of kind k (socket, accept, open): no fstat needed.
void fd_created(Vproc *vp, int fd, FdKind k, bool user_nonblock, bool weft_nonblock);
// The last attempt (made when seq read `seq`) found fd not ready for
// `events`: park until an event, unless one came meanwhile. 0 = try again,
// else ETIMEDOUT or EBADF.
int wait_fd(Vproc *&vp, FdState *s, int fd, uint32_t events, uint32_t seq, CallDeadline &dl, const void *site);
// The same for a waiter that is not a thread (a virtual thread's
// continuation: w->t == nullptr, w->wake and w->events set): link w unless
// an event came since `seq`. 0: linked, w->wake comes later; 1: an event
// came meanwhile, try again; else the errno of a descriptor the reactor
// cannot watch. Every wait_fd_async that returns 0 counts in
// vp->io_waiters until the waiter calls io_waiter_done(vp).
int wait_fd_async(Vproc *vp, FdState *s, int fd, IoWaiter *w, uint32_t seq);
inline void io_waiter_done(Vproc *vp) { --vp->io_waiters; }
// wait_fd_async's linking, for any waiter (a thread's too: then its wake-up
// claims w->t), without counting it in io_waiters: 0 linked, 1 an event came
// since `seq`, else the errno of a descriptor the reactor cannot watch.
int link_fd_waiter(Vproc *vp, FdState *s, int fd, IoWaiter *w, uint32_t seq);
// Take w off fd's list if it is still there: true if it was, and then its
// wake will not be called.
bool cancel_fd_async(Vproc *vp, FdState *s, IoWaiter *w);
// A read or write moved less than asked on a stream: the buffer is drained
// (or full); the next attempt parks first unless an event came since `seq`.
inline void mark_unready(Vproc *vp, FdState *s, uint32_t events, uint32_t seq) {
    SpinGuard g(s->lock, vp->smp);
    if (s->seq.load(std::memory_order_relaxed) == seq) s->clear_ready(events);
}
// Submit op to vp's reactor and park until it completes. Returns its result
// (>= 0 or -errno; -ETIMEDOUT when the deadline cancelled it).
int run_op(Vproc *&vp, IoOp *op, CallDeadline &dl, const void *site);
// op, submitted, outlived the calling thread's deadline: ask the kernel to
// end it and wait for its completion (the buffer is the caller's). Returns
// its result, -ETIMEDOUT if the cancel ended it.
int wait_cancelled(Vproc *&vp, IoOp *op, const void *site);
// weft_close's part: wake waiters with EBADF, disarm, reset the state.
// Until fd_closed, a thread that links a waiter (another vproc's, or one
// that ran while a closing fclose yielded) is not armed in the reactor —
// the registration would go with the file, and an arm of a number already
// closed fails — and fd_closed wakes it to look again (then EBADF).
void fd_forget(Vproc *&vp, FdState *s, int fd);
// The close(2) after fd_forget is done (or the dup2 over it). A state
// classified since fd_forget is kept if it describes the file now at fd.
void fd_closed(Vproc *vp, FdState *s, int fd);
// `to` is a dup of `from` (dup, dup2, dup3, F_DUPFD): the same open file, so
// the same kind and O_NONBLOCK, now and after either changes it.
void fd_dup(Vproc *vp, int from, int to);
// Wait on several descriptors at once (weft_poll). ws[i].events set by the
// caller; returns 0 after any event, ETIMEDOUT at the deadline.
int wait_fds(Vproc *&vp, FdState **ss, const int *fds, IoWaiter *ws, const uint32_t *seqs, size_t n, uint64_t deadline,
             const void *site);

// Thread-directed SIGPIPE is blocked on vprocs and workers: take a pending
// one so that it is not delivered later (after a write returned EPIPE).
void consume_sigpipe();

} // namespace weft::detail
