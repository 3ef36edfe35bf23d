// Internal layouts of the public synchronisation structs, and what every
// primitive shares. The public structs in weft.h are opaque arrays of words;
// each *Impl here overlays one exactly (static_asserts below), so that
// all-zero bytes — the static initializers — are a valid initial state.
//
// Every object guards its state with a Spin (free on one vproc) and parks
// its waiters FIFO on a WaitQueue through core/park.hpp. Semaphore and
// rwlock hand ownership to the first waiter directly, so a thread that
// arrives later can never overtake one that waits: no starvation. The mutex
// wakes its first waiter to take it, and hands over only to one that has
// kept losing (sync/mutex.cc: a hand-off to a thread not yet running makes
// a convoy).
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "core/park.hpp"
#include "weft/weft.h"

namespace weft::detail {

// The identity of the caller as a lock owner: its TCB, or outside weft_main
// a per-kernel-thread tag (so uncontended use from plain threads works).
uintptr_t outside_owner_tag();
inline uintptr_t owner_tag(Vproc *vp) {
    return vp ? reinterpret_cast<uintptr_t>(vp->current) : outside_owner_tag();
}
// Outside weft_main there is no vproc to say whether others exist: assume so.
inline bool smp_of(Vproc *vp) { return vp ? vp->smp : true; }

struct MutexImpl {
    uint8_t kind;                   // weft_mutex_kind
    Spin lock;                      // guards q, setting kWaiters and kWoken, and handoff
    uint8_t handoff;                // a waiter starves: the next unlock hands over (mutex.cc)
    uint8_t pad;
    uint32_t depth;                 // extra locks held by a recursive owner
    std::atomic<uintptr_t> owner;   // owner tag | kWaiters | kWoken; free when owner & ~kFlags == 0
    WaitQueue q;
    TimedWaiters timed;             // timed lockers still inside (see park.hpp)

    static constexpr uintptr_t kWaiters = 1; // q may be non-empty: an unlock may have to wake one
    static constexpr uintptr_t kOutside = 2; // the owner is a plain kernel thread (outside_owner_tag)
    // A waiter was woken to retry and has not yet: the next unlocks need
    // wake nobody, so they stay on the fast path (Go's mutexWoken). In the
    // word, not beside it, so that such an unlock is one CAS, not the Spin.
    static constexpr uintptr_t kWoken = 4;
    static constexpr uintptr_t kFlags = kWaiters | kWoken;
    // Free, or who holds it (its tag, kOutside included).
    static uintptr_t holder(uintptr_t owner) { return owner & ~kFlags; }
    // Whether the holder's unlock has someone to wake: a waiter queued and
    // none already woken.
    static bool must_wake(uintptr_t owner) { return (owner & kFlags) == kWaiters; }
};

struct CondImpl {
    Spin lock;
    uint8_t pad[3];
    TimedWaiters timed;             // timed waiters still inside (see park.hpp)
    WaitQueue q;
};

struct RwlockImpl {
    Spin lock;
    uint8_t pad[3];
    uint32_t readers;               // read locks held
    Tcb *writer;                    // write owner or nullptr
    WaitQueue q;                    // waiters; Tcb::wait_data = kRead or kWrite

    static constexpr uintptr_t kRead = 1, kWrite = 2;
};

struct SemImpl {
    Spin lock;
    uint8_t pad[3];
    uint32_t value;                 // upper half of word 0: WEFT_SEM_INITIALIZER
    WaitQueue q;
    TimedWaiters timed;             // timed waiters still inside (see park.hpp)
    uint32_t pad2;
};

struct BarrierImpl {
    Spin lock;
    uint8_t pad[3];
    uint32_t count;                 // threads per round
    uint32_t arrived;               // in the current round
    uint32_t pad2;
    WaitQueue q;
};

struct OnceImpl {
    std::atomic<uint32_t> state;    // kNew, kRunning, kDone
    Spin lock;
    uint8_t pad[3];
    WaitQueue q;

    static constexpr uint32_t kNew = 0, kRunning = 1, kDone = 2;
};

#define WEFT_OVERLAY(Impl, Public)                                                        \
    static_assert(sizeof(Impl) == sizeof(Public), #Impl " must overlay " #Public);        \
    static_assert(alignof(Impl) <= alignof(Public), #Impl " alignment");                  \
    inline Impl *impl(Public *p) { return reinterpret_cast<Impl *>(p); }

WEFT_OVERLAY(MutexImpl, weft_mutex_t)
WEFT_OVERLAY(CondImpl, weft_cond_t)
WEFT_OVERLAY(RwlockImpl, weft_rwlock_t)
WEFT_OVERLAY(SemImpl, weft_sem_t)
WEFT_OVERLAY(BarrierImpl, weft_barrier_t)
WEFT_OVERLAY(OnceImpl, weft_once_t)
#undef WEFT_OVERLAY

static_assert(offsetof(MutexImpl, kind) == 0, "WEFT_MUTEX_*_INITIALIZER set the kind in byte 0");
static_assert(offsetof(SemImpl, value) == 4, "WEFT_SEM_INITIALIZER puts the value in bits 32..63");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "initializers assume little-endian words");

// Mutex slow paths (sync/mutex.cc) and the inline fast paths, which
// weft_mutex_lock/unlock and the condition variable share. Never inlined:
// inside weft_mutex_unlock, mutex_unlock's prologue (five saved registers)
// ran before the fast path too, 41 instructions per unlock instead of 17.
[[gnu::noinline]] int mutex_lock_until(weft_mutex_t *m, uint64_t deadline, const void *site);
[[gnu::noinline]] int mutex_unlock(weft_mutex_t *m);

// A free mutex: take it, keeping its flags (it may be free with waiters
// queued, one of them woken to retry), with a store on one vproc and a CAS
// with several (kSmp: the runtime's, when the caller knows it). vp != nullptr.
template <bool kSmp> inline bool mutex_take_fast_as(MutexImpl *m, Vproc *vp) {
    uintptr_t cur = m->owner.load(std::memory_order_relaxed);
    if (m->kind > WEFT_MUTEX_RECURSIVE || MutexImpl::holder(cur)) return false;
    const uintptr_t me = reinterpret_cast<uintptr_t>(vp->current);
    if (!kSmp) {
        m->owner.store(me | cur, std::memory_order_relaxed);
        return true;
    }
    return m->owner.compare_exchange_strong(cur, me | cur, std::memory_order_acquire, std::memory_order_relaxed);
}
inline bool mutex_take_fast(MutexImpl *m, Vproc *vp) {
    return vp->smp ? mutex_take_fast_as<true>(m, vp) : mutex_take_fast_as<false>(m, vp);
}
inline bool mutex_lock_fast(weft_mutex_t *pm, Vproc *vp) { return pm && vp && mutex_take_fast(impl(pm), vp); }

// Release a mutex whose word was `cur` (held by the caller, nobody to
// wake), keeping the flags: a store on one vproc, a CAS with several, which
// fails (false: take mutex_unlock) if the word has changed since.
inline bool release_word(MutexImpl *m, uintptr_t cur, bool smp) {
    if (!smp) {
        m->owner.store(cur & MutexImpl::kFlags, std::memory_order_relaxed);
        return true;
    }
    return m->owner.compare_exchange_strong(cur, cur & MutexImpl::kFlags, std::memory_order_release,
                                            std::memory_order_relaxed);
}

// Owned by us, not nested, and nobody to wake (no waiter, or one already
// woken): release, keeping the flags.
inline bool release_fast(MutexImpl *m, Vproc *vp) {
    uintptr_t cur = m->owner.load(std::memory_order_relaxed);
    if (MutexImpl::holder(cur) != reinterpret_cast<uintptr_t>(vp->current) || MutexImpl::must_wake(cur) || m->depth)
        return false;
    return release_word(m, cur, vp->smp);
}
inline bool mutex_unlock_fast(weft_mutex_t *pm, Vproc *vp) { return pm && vp && release_fast(impl(pm), vp); }

} // namespace weft::detail
