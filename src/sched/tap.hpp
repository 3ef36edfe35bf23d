// Threading by appointment (WEFT_POLICY=tap; docs/tap.md): a thread may make
// a system call only by appointment.
//
// Every vproc keeps three calendars — CPU, DISK and NET — each a priority
// list of discrete levels (0 is the most urgent). A thread's I/O call is an
// appointment in DISK or NET at the thread's level; its return to process
// code is a *commit appointment* in CPU. The appointment clock, which is
// the policy's pick(), serves the calendars round-robin in a ratio (the
// paper's 5 CPU : 4 DISK : 1 NET by default): it releases up to 5 ready
// threads, then submits up to 4 disk calls in one io_uring submission, then
// performs up to 1 network call — itself, on the parked thread's behalf,
// with the arguments the wrapper left in the thread (TapCall): no switch to
// the thread until its call is done. A network call that would block waits
// in the reactor like any other and comes back to NET when its descriptor
// is ready. Nothing spins: with no appointment due, the vproc sleeps in its
// reactor (the paper's idle polling, §5.1.2, is gone).
//
// The classification (how a thread's level moves) and the idling clock (a
// token bucket per calendar) are chosen by WEFT_TAP / weft_config.tap.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "io/fd.hpp"

namespace weft::detail {

struct Vproc;
struct Tcb;
struct WaitQueue;
class CallDeadline;

enum TapCalendar : uint8_t { kTapCpu = 0, kTapDisk = 1, kTapNet = 2, kTapCalendars = 3 };

// How a thread's level moves with its calls (§3.2).
enum class TapClass : uint8_t {
    Constant, // never: shaping off
    Shape,    // the paper's: an accept resets to 0, every other call lowers by one
    Boost,    // the paper's variant: an accept sets the lowest level, every call raises by one
    Weft,     // Shape, and every call is served as one level more urgent per `age` clocks it has waited
    Share,    // Shape's levels, served by stride scheduling: level l gets 2^(-l/2) of level 0's share
};

struct TapConfig {
    uint16_t ratio[kTapCalendars] = {5, 4, 1}; // appointments per clock: CPU, DISK, NET
    TapClass cls = TapClass::Weft;
    uint8_t levels = 16;                       // 1..64
    uint32_t age = 8;                          // Weft: clocks per level of aging
    uint32_t rate[kTapCalendars] = {0, 0, 0};  // idling clock: appointments per second (0: none)
    uint32_t burst = 16;                       // the token bucket's depth
    bool locks = true;                         // TAP locking (mutexes by appointment)
};

// Parse "ratio=5:4:1,class=weft,levels=16,age=8,rate=0:0:2000,burst=16"
// (any subset, any order). False with a message in err.
bool parse_tap_spec(const char *spec, TapConfig *out, char *err, size_t errlen);

// One system call waiting for its appointment, in it, or done. It lives on
// the calling thread's stack for the length of the call.
struct TapCall {
    enum Phase : uint8_t {
        Queued,    // in its calendar
        Performing, // NET: the clock makes the call on the thread's behalf (the thread is claimed)
        WaitingFd, // NET: tried, would block; `waiter` is linked on the descriptor (or about to be)
        Submitted, // DISK: handed to the reactor
        Released,  // the thread makes the call itself (DISK without io_uring)
        Done,      // `result` is final
        Dropped,   // taken off its calendar for a thread that had already woken (deadline)
    };
    Tcb *t;
    TapCall *prev = nullptr, *next = nullptr; // calendar links
    uint8_t kind;                             // kTapNet or kTapDisk
    uint8_t phase = Queued;
    uint8_t level = 0;
    uint64_t since = 0;                       // the clock count when queued (aging)
    uint64_t deadline = 0;                    // 0: none
    ssize_t result = 0;
    // NET: one non-blocking attempt, as the wrapper would make it
    ssize_t (*attempt)(void *ctx) = nullptr;
    void *ctx = nullptr;
    FdState *s = nullptr;
    int fd = -1;
    uint32_t ev = 0;
    size_t want = 0;
    uint32_t seq = 0;
    uint32_t closes = 0;                      // its descriptors' FdState::closes when queued (disk_closes)
    IoWaiter waiter{};
    // DISK
    IoOp *op = nullptr;
};

// The wrappers' entry points; vp->tap is non-null only under the policy.
//
// A network call (retry_on_fd): returns what the attempt returned (>= 0 or
// -errno), -ETIMEDOUT at the thread's I/O deadline.
ssize_t tap_net(Vproc *vp, FdState *s, int fd, uint32_t ev, size_t want, ssize_t (*attempt)(void *), void *ctx,
                CallDeadline &dl, const void *site);
// A disk operation (run_op) through the DISK calendar: submitted at the
// clock with the others of its turn. Returns its result, as run_op.
int tap_disk(Vproc *vp, IoOp *op, CallDeadline &dl, const void *site);
// A disk call the thread makes itself (no io_uring): wait for the DISK
// appointment, then go on.
void tap_disk_turn(Vproc *vp, const void *site);
// The caller is about to accept a connection (the classification's reset).
void tap_accept(Vproc *vp);

// TAP locking (sync/mutex.cc; docs/tap.md). A thread that holds a mutex
// others wait for is in an appointment with it: its commit appointments go
// to the CPU calendar's appointment lane, served before every level, and
// its calls are made at level 0, until it unlocks. Waiters queue by level.
// (Off with WEFT_TAP locks=off.)
// `owner` (a weft thread) now holds a mutex somebody waits for.
void tap_lock_contended(Vproc *vp, Tcb *owner);
// Queue the calling thread on a mutex's queue by its level (under its lock).
void tap_lock_enqueue(Vproc *vp, WaitQueue &q, uint64_t deadline);
// `from` unlocked a mutex others waited for; `to` (if not null) now holds
// it and others still wait.
void tap_lock_handoff(Vproc *vp, Tcb *from, Tcb *to);

} // namespace weft::detail
