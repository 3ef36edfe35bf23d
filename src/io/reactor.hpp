// The reactor contract: how a vproc waits for the kernel.
//
// Every vproc owns one reactor. It is the only place the vproc sleeps: when
// nothing is ready the scheduler loop calls wait(deadline), which returns on
// an I/O event, a completion, the deadline (the next timer), or a wake() from
// another kernel thread. Backends are one file each and are chosen at start
// (WEFT_IO / weft_config.io); the scheduler loop and the wrappers know only
// this interface.
//
// What every backend provides:
//  - arm(fd, s, events): make sure a readiness event for `events`
//    (POLLIN/POLLOUT) of fd reaches io_ready(s, ...) when it happens. Called
//    by a thread about to park on fd, under the FdState lock. An
//    edge-triggered backend (epoll, io_uring) registers each descriptor
//    once, for both directions, and ignores later calls (FdState::armed);
//    the level-triggered poll backend keeps interest only while somebody
//    waits (one-shot: an event removes it).
//  - disarm(fd, s): forget fd; called by weft_close before the descriptor
//    is closed (an io_uring poll holds a reference to the file: without
//    this the close would not release it).
//  - submit(op) (only if can_submit()): start a completion-based operation
//    (a disk read, fsync, splice). Its result reaches io_complete(op, res).
//    Submissions are queued and go to the kernel at the next flush(),
//    poll() or wait(), or when the queue is full. run_op flushes each one
//    at once while the vproc has CPU to spare (Vproc::submits_now); the
//    TAP policy queues a clock's disk calls and flushes them as one
//    submission.
//  - poll(): deliver what has happened without blocking. For io_uring this
//    reads the completion ring (no system call); for epoll and poll it is a
//    zero-timeout system call, so the scheduler calls it only every
//    kPollInterval dispatches and only while threads wait on I/O.
//  - wait(deadline): flush submissions, block until something is delivered,
//    deadline (absolute CLOCK_MONOTONIC ns, UINT64_MAX = none) or wake().
//  - arm/disarm run on the owning vproc (Reactor::arm_from routes calls
//    from other vprocs), unless the backend says they are thread-safe.
//  - wake(): thread-safe, async-signal-unsafe; makes a current or the next
//    wait() return. The vproc calls it only when it is (about to be) asleep.
//
// Events and completions are delivered on the owning vproc's kernel thread,
// inside poll() or wait(), never concurrently with the vproc's threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::detail {

struct FdState;
struct IoOp;
struct Vproc;

// What a completion-based operation asks of the kernel (IoOp::kind).
enum class IoKind : uint8_t { Read, Write, Readv, Writev, Fsync, Splice, Cancel };

class Reactor {
public:
    virtual ~Reactor() = default;
    virtual const char *name() const = 0;
    virtual int arm(int fd, FdState *s, uint32_t events) = 0; // 0 or an errno
    virtual void disarm(int fd, FdState *s) = 0;
    virtual bool can_submit() const { return false; }
    virtual void submit(IoOp *) {}
    virtual void cancel(IoOp *) {} // ask the kernel to finish op early (it still completes)
    // Hand what submit() queued to the kernel now, in one system call
    // (the TAP clock's disk turn). False if nothing was queued.
    virtual bool flush() { return false; }
    // True when poll() needs no system call (so calling it often is free).
    virtual bool cheap_poll() const { return false; }
    // True when poll() would find something to deliver, told without a
    // system call (false when the backend cannot tell so cheaply): an idle
    // vproc's spin watches it.
    virtual bool pending() const { return false; }
    virtual void poll() = 0;
    virtual void wait(uint64_t deadline) = 0;
    virtual void wake() = 0;
    // Called once on the vproc's own kernel thread before its loop starts,
    // and never again: a backend that binds itself to one submitting thread
    // (io_uring's SINGLE_ISSUER) does so here.
    virtual void attach_thread() {}

    Vproc *vp = nullptr; // the vproc whose events this reactor delivers
    // An edge-triggered backend whose registration stays until disarm and
    // records its interest in FdState::backend_events (epoll, io_uring): a
    // park on a descriptor armed here for the events it wants needs no
    // arm() call at all (fd.cc's arm_locked checks it inline).
    bool sticky_arm = false;

    // What fd.cc calls, from any vproc, with the FdState lock held. A backend
    // whose arm() is not thread-safe gets requests from other vprocs through
    // a queue that its own vproc applies (and is woken to apply).
    int arm_from(Vproc *caller, int fd, FdState *s, uint32_t events);
    // Remote disarms wait until the owner has applied them (a short
    // cross-vproc round trip): call without holding fd's lock.
    void disarm_from(Vproc *&caller, int fd, FdState *s);
    bool disarm_is_remote(const Vproc *caller) const { return caller != vp && !arm_is_thread_safe(); }

    // Owner only: apply what other vprocs asked. At the start of poll() and
    // wait(), before a local arm (requests stay in order), and at every
    // Vproc::poll — a vproc whose threads only yield must still apply the
    // disarm another vproc waits for.
    void apply_remote() {
        if (__builtin_expect(remote_pending_.load(std::memory_order_acquire), 0)) apply_remote_slow();
    }

protected:
    virtual bool arm_is_thread_safe() const { return false; }

private:
    struct RemoteRequest {
        int fd;
        FdState *s;
        uint32_t events; // 0: disarm
        std::atomic<bool> *done; // a disarm: set once applied
    };
    void apply_remote_slow();
    std::atomic<bool> remote_pending_{false};
    std::mutex remote_mu_;
    std::vector<RemoteRequest> remote_; // guarded by remote_mu_
};

// Backend factories (one file each). nullptr with errno set when the kernel
// refuses the backend.
std::unique_ptr<Reactor> make_uring_reactor(Vproc *vp);
std::unique_ptr<Reactor> make_epoll_reactor(Vproc *vp);
std::unique_ptr<Reactor> make_poll_reactor(Vproc *vp);

enum class IoBackend : uint8_t { Uring, Epoll, Poll };
const char *io_backend_name(IoBackend b);
bool parse_io_backend(const char *s, IoBackend *out);

// Create the reactor of vp for the runtime's backend; falls back from
// io_uring to epoll (saying so once per process). nullptr if even that fails.
std::unique_ptr<Reactor> make_reactor(Vproc *vp, IoBackend wanted);

uint64_t now_ns();

// A wait()'s deadline as a relative timeout: -1 for none (UINT64_MAX), else
// the nanoseconds left, 0 once it has passed.
inline int64_t timeout_until(uint64_t deadline) {
    if (deadline == UINT64_MAX) return -1;
    uint64_t now = now_ns();
    return deadline > now ? static_cast<int64_t>(deadline - now) : 0;
}

} // namespace weft::detail
