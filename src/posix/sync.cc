// pthread mutexes, condition variables, rwlocks, barriers and semaphores on
// weft's. Each weft object fits in the pthread type it stands for, and an
// all-zero weft object is a valid unlocked/empty one, so the static
// initializers (PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, ...)
// work as they are. The attribute types carry the shim's own encoding.
#include <cerrno>
#include <cstring>

#include "posix/real.hpp"
#include "posix/shim.hpp"
#include "weft/weft.h"

using namespace weft::posix;

static_assert(sizeof(weft_mutex_t) <= sizeof(pthread_mutex_t));
static_assert(sizeof(weft_cond_t) + sizeof(uint64_t) <= sizeof(pthread_cond_t));
static_assert(sizeof(weft_rwlock_t) <= sizeof(pthread_rwlock_t));
static_assert(sizeof(weft_barrier_t) <= sizeof(pthread_barrier_t));
static_assert(sizeof(weft_sem_t) <= sizeof(sem_t));

namespace {

weft_mutex_t *M(pthread_mutex_t *m) { return reinterpret_cast<weft_mutex_t *>(m); }
weft_cond_t *C(pthread_cond_t *c) { return reinterpret_cast<weft_cond_t *>(c); }
weft_rwlock_t *RW(pthread_rwlock_t *l) { return reinterpret_cast<weft_rwlock_t *>(l); }
weft_barrier_t *B(pthread_barrier_t *b) { return reinterpret_cast<weft_barrier_t *>(b); }
weft_sem_t *S(sem_t *s) { return reinterpret_cast<weft_sem_t *>(s); }

// The clock a condition variable's deadlines are on: the word after the
// weft object (0 = CLOCK_REALTIME, the default, so zeros still work).
clockid_t &cond_clock(pthread_cond_t *c) {
    return *reinterpret_cast<clockid_t *>(reinterpret_cast<char *>(c) + sizeof(weft_cond_t));
}

// Attribute words (pthread_mutexattr_t and pthread_condattr_t are 4 bytes):
// bits 0-3 the mutex type + 1 (0: unset = default), bit 8 process-shared.
int &word(void *attr) { return *reinterpret_cast<int *>(attr); }

// A timed wait's deadline on weft's clock, or an error (EINVAL).
int timed(clockid_t clock, const struct timespec *abs, uint64_t *deadline) {
    if (!valid_timespec(abs)) return EINVAL;
    *deadline = deadline_on(clock, abs);
    return 0;
}

// Locks with no timed form in weft: try, then sleep a little, until the
// deadline (bounded polling; docs/posix.md).
template <class Try> int poll_until(uint64_t deadline, Try try_once) {
    for (uint64_t wait = 50'000;; wait = wait < 2'000'000 ? wait * 2 : wait) {
        int e = try_once();
        if (e != EBUSY) return e;
        uint64_t now = weft_now_ns();
        if (now >= deadline) return ETIMEDOUT;
        weft_sleep_ns(deadline - now < wait ? deadline - now : wait);
    }
}

} // namespace

extern "C" {
#define API __attribute__((visibility("default")))

// --- mutexes ---

API int pthread_mutexattr_init(pthread_mutexattr_t *a) {
    std::memset(a, 0, sizeof *a);
    return 0;
}
API int pthread_mutexattr_destroy(pthread_mutexattr_t *) { return 0; }
API int pthread_mutexattr_settype(pthread_mutexattr_t *a, int type) {
    if (type != PTHREAD_MUTEX_NORMAL && type != PTHREAD_MUTEX_RECURSIVE && type != PTHREAD_MUTEX_ERRORCHECK)
        return EINVAL;
    word(a) = (word(a) & ~0xf) | (type + 1);
    return 0;
}
API int pthread_mutexattr_gettype(const pthread_mutexattr_t *a, int *type) {
    int t = word(const_cast<pthread_mutexattr_t *>(a)) & 0xf;
    *type = t ? t - 1 : PTHREAD_MUTEX_DEFAULT;
    return 0;
}
API int pthread_mutexattr_setpshared(pthread_mutexattr_t *a, int shared) {
    if (shared == PTHREAD_PROCESS_SHARED) return ENOTSUP; // weft's objects live in one process
    if (shared != PTHREAD_PROCESS_PRIVATE) return EINVAL;
    (void)a;
    return 0;
}
API int pthread_mutexattr_getpshared(const pthread_mutexattr_t *, int *shared) {
    *shared = PTHREAD_PROCESS_PRIVATE;
    return 0;
}
API int pthread_mutexattr_setprotocol(pthread_mutexattr_t *, int p) {
    return p == PTHREAD_PRIO_NONE ? 0 : p == PTHREAD_PRIO_INHERIT || p == PTHREAD_PRIO_PROTECT ? ENOTSUP : EINVAL;
}
API int pthread_mutexattr_getprotocol(const pthread_mutexattr_t *, int *p) {
    *p = PTHREAD_PRIO_NONE;
    return 0;
}
API int pthread_mutexattr_setrobust(pthread_mutexattr_t *, int r) {
    return r == PTHREAD_MUTEX_STALLED ? 0 : r == PTHREAD_MUTEX_ROBUST ? ENOTSUP : EINVAL;
}
API int pthread_mutexattr_getrobust(const pthread_mutexattr_t *, int *r) {
    *r = PTHREAD_MUTEX_STALLED;
    return 0;
}

API int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a) {
    int type = PTHREAD_MUTEX_DEFAULT;
    if (a) pthread_mutexattr_gettype(a, &type);
    int kind = type == PTHREAD_MUTEX_RECURSIVE ? WEFT_MUTEX_RECURSIVE
             : type == PTHREAD_MUTEX_ERRORCHECK ? WEFT_MUTEX_ERRORCHECK : WEFT_MUTEX_NORMAL;
    std::memset(m, 0, sizeof *m);
    return weft_mutex_init(M(m), kind);
}
API int pthread_mutex_lock(pthread_mutex_t *m) { return weft_mutex_lock(M(m)); }
API int pthread_mutex_trylock(pthread_mutex_t *m) { return weft_mutex_trylock(M(m)); }
API int pthread_mutex_unlock(pthread_mutex_t *m) { return weft_mutex_unlock(M(m)); }
API int pthread_mutex_destroy(pthread_mutex_t *m) { return weft_mutex_destroy(M(m)); }
API int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *abs) {
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) return EINVAL;
    int e = weft_mutex_trylock(M(m)); // a free mutex is taken whatever the deadline says
    if (e != EBUSY) return e;
    uint64_t deadline;
    if (int bad = timed(clock, abs, &deadline)) return bad;
    return weft_mutex_timedlock(M(m), deadline);
}
API int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs) {
    return pthread_mutex_clocklock(m, CLOCK_REALTIME, abs);
}

// --- condition variables ---

API int pthread_condattr_init(pthread_condattr_t *a) {
    std::memset(a, 0, sizeof *a);
    return 0;
}
API int pthread_condattr_destroy(pthread_condattr_t *) { return 0; }
API int pthread_condattr_setclock(pthread_condattr_t *a, clockid_t clock) {
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) return EINVAL;
    word(a) = clock;
    return 0;
}
API int pthread_condattr_getclock(const pthread_condattr_t *a, clockid_t *clock) {
    *clock = word(const_cast<pthread_condattr_t *>(a));
    return 0;
}
API int pthread_condattr_setpshared(pthread_condattr_t *, int shared) {
    return shared == PTHREAD_PROCESS_PRIVATE ? 0 : shared == PTHREAD_PROCESS_SHARED ? ENOTSUP : EINVAL;
}
API int pthread_condattr_getpshared(const pthread_condattr_t *, int *shared) {
    *shared = PTHREAD_PROCESS_PRIVATE;
    return 0;
}

API int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a) {
    std::memset(c, 0, sizeof *c);
    cond_clock(c) = a ? word(const_cast<pthread_condattr_t *>(a)) : CLOCK_REALTIME;
    return weft_cond_init(C(c));
}
// Cancellation points, interruptible (shim.hpp: BlockingCall). Cut short,
// the wait returns ETIMEDOUT with the mutex held again, and a cancel's
// cleanup handlers run then, as POSIX requires; a signal makes it a
// spurious wake-up (0), as on Linux.
API int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    if (!on_weft()) return weft_cond_wait(C(c), M(m));
    BlockingCall bc;
    int e = weft_cond_timedwait(C(c), M(m), bc.no_deadline());
    bc.leave(e == ETIMEDOUT);
    return e == ETIMEDOUT ? 0 : e;
}
API int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock, const struct timespec *abs) {
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) return EINVAL;
    uint64_t deadline;
    if (int bad = timed(clock, abs, &deadline)) return bad;
    if (!on_weft()) return weft_cond_timedwait(C(c), M(m), deadline);
    BlockingCall bc;
    int e = weft_cond_timedwait(C(c), M(m), deadline);
    return bc.leave(e == ETIMEDOUT) == BlockingCall::kDone ? e : 0;
}
API int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abs) {
    return pthread_cond_clockwait(c, m, cond_clock(c), abs);
}
API int pthread_cond_signal(pthread_cond_t *c) { return weft_cond_signal(C(c)); }
API int pthread_cond_broadcast(pthread_cond_t *c) { return weft_cond_broadcast(C(c)); }
API int pthread_cond_destroy(pthread_cond_t *c) { return weft_cond_destroy(C(c)); }

// --- readers-writer locks ---

API int pthread_rwlockattr_init(pthread_rwlockattr_t *a) {
    std::memset(a, 0, sizeof *a);
    return 0;
}
API int pthread_rwlockattr_destroy(pthread_rwlockattr_t *) { return 0; }
API int pthread_rwlock_init(pthread_rwlock_t *l, const pthread_rwlockattr_t *) {
    std::memset(l, 0, sizeof *l);
    return weft_rwlock_init(RW(l));
}
API int pthread_rwlock_rdlock(pthread_rwlock_t *l) { return weft_rwlock_rdlock(RW(l)); }
API int pthread_rwlock_tryrdlock(pthread_rwlock_t *l) { return weft_rwlock_tryrdlock(RW(l)); }
API int pthread_rwlock_wrlock(pthread_rwlock_t *l) { return weft_rwlock_wrlock(RW(l)); }
API int pthread_rwlock_trywrlock(pthread_rwlock_t *l) { return weft_rwlock_trywrlock(RW(l)); }
API int pthread_rwlock_unlock(pthread_rwlock_t *l) { return weft_rwlock_unlock(RW(l)); }
API int pthread_rwlock_destroy(pthread_rwlock_t *l) { return weft_rwlock_destroy(RW(l)); }
API int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abs) {
    int e = weft_rwlock_tryrdlock(RW(l));
    if (e != EBUSY) return e;
    uint64_t deadline;
    if (int bad = timed(CLOCK_REALTIME, abs, &deadline)) return bad;
    return poll_until(deadline, [l] { return weft_rwlock_tryrdlock(RW(l)); });
}
API int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abs) {
    int e = weft_rwlock_trywrlock(RW(l));
    if (e != EBUSY) return e;
    uint64_t deadline;
    if (int bad = timed(CLOCK_REALTIME, abs, &deadline)) return bad;
    return poll_until(deadline, [l] { return weft_rwlock_trywrlock(RW(l)); });
}

// --- barriers ---

API int pthread_barrierattr_init(pthread_barrierattr_t *a) {
    std::memset(a, 0, sizeof *a);
    return 0;
}
API int pthread_barrierattr_destroy(pthread_barrierattr_t *) { return 0; }
API int pthread_barrier_init(pthread_barrier_t *b, const pthread_barrierattr_t *, unsigned count) {
    std::memset(b, 0, sizeof *b);
    return weft_barrier_init(B(b), count);
}
API int pthread_barrier_wait(pthread_barrier_t *b) {
    int r = weft_barrier_wait(B(b));
    return r == WEFT_BARRIER_SERIAL_THREAD ? PTHREAD_BARRIER_SERIAL_THREAD : r;
}
API int pthread_barrier_destroy(pthread_barrier_t *b) { return weft_barrier_destroy(B(b)); }

// --- unnamed semaphores: -1 and errno, as sem_*(3) ---

static int sem_result(int e) {
    if (!e) return 0;
    errno = e;
    return -1;
}
API int sem_init(sem_t *s, int pshared, unsigned value) {
    if (pshared) return sem_result(ENOSYS); // POSIX's answer for process-shared semaphores a system lacks
    std::memset(s, 0, sizeof *s);
    return sem_result(weft_sem_init(S(s), value));
}
API int sem_destroy(sem_t *s) { return sem_result(weft_sem_destroy(S(s))); }
API int sem_wait(sem_t *s) { // never restarted after a signal (Linux)
    if (!on_weft()) return sem_result(weft_sem_wait(S(s)));
    for (;;) {
        BlockingCall bc;
        int e = weft_sem_timedwait(S(s), bc.no_deadline());
        if (e != ETIMEDOUT) return sem_result(e);
        if (bc.leave(true) != BlockingCall::kDone) return sem_result(EINTR);
        // cut short with no reason left: wait again
    }
}
API int sem_trywait(sem_t *s) { return sem_result(weft_sem_trywait(S(s))); }
API int sem_post(sem_t *s) { return sem_result(weft_sem_post(S(s))); }
API int sem_getvalue(sem_t *s, int *v) { return sem_result(weft_sem_getvalue(S(s), v)); }
API int sem_clockwait(sem_t *s, clockid_t clock, const struct timespec *abs) {
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC) return sem_result(EINVAL);
    if (weft_sem_trywait(S(s)) == 0) return 0;
    uint64_t deadline;
    if (int bad = timed(clock, abs, &deadline)) return sem_result(bad);
    if (!on_weft()) return sem_result(weft_sem_timedwait(S(s), deadline));
    BlockingCall bc;
    int e = weft_sem_timedwait(S(s), deadline);
    if (bc.leave(e == ETIMEDOUT) != BlockingCall::kDone) e = EINTR;
    return sem_result(e);
}
API int sem_timedwait(sem_t *s, const struct timespec *abs) { return sem_clockwait(s, CLOCK_REALTIME, abs); }

} // extern "C"
