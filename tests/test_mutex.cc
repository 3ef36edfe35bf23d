// Mutex: kinds, error codes, timed locks, FIFO wake-ups, no starvation, mutual exclusion.
#include <atomic>
#include <cerrno>
#include <vector>

#include "support.hpp"
#include "sync/sync.hpp"

namespace {

using namespace wt;

class MutexTest : public OnVprocs {};
WEFT_ON_VPROCS(MutexTest);

// Run fn on another thread (on the last vproc) and return its int result.
int on_other_thread(int vproc, std::function<int()> fn) {
    weft_thread_t t;
    EXPECT_EQ(0, spawn_on(&t, vproc, [&] { return ptr(uintptr_t(fn())); }));
    return int(num(join(t)));
}

TEST_P(MutexTest, LockUnlockAndTrylockOnAHeldMutexReturnsEbusy) {
    int lock = -1, try_other = -1, try_owner = -1, unlock = -1, try_after = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m;
        ASSERT_EQ(0, weft_mutex_init(&m, WEFT_MUTEX_NORMAL));
        lock = weft_mutex_lock(&m);
        try_other = on_other_thread(other(), [&] { return weft_mutex_trylock(&m); });
        try_owner = weft_mutex_trylock(&m); // a normal mutex does not nest
        unlock = weft_mutex_unlock(&m);
        try_after = on_other_thread(other(), [&] {
            int r = weft_mutex_trylock(&m);
            if (r == 0) weft_mutex_unlock(&m);
            return r;
        });
        EXPECT_EQ(0, weft_mutex_destroy(&m));
    }));
    EXPECT_EQ(0, lock);
    EXPECT_EQ(EBUSY, try_other);
    EXPECT_EQ(EBUSY, try_owner);
    EXPECT_EQ(0, unlock);
    EXPECT_EQ(0, try_after);
}

TEST_P(MutexTest, ErrorcheckRelockReturnsEdeadlk) {
    int relock = -1, timed_relock = -1, unlock = -1, unlock_again = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m;
        ASSERT_EQ(0, weft_mutex_init(&m, WEFT_MUTEX_ERRORCHECK));
        ASSERT_EQ(0, weft_mutex_lock(&m));
        relock = weft_mutex_lock(&m);
        timed_relock = weft_mutex_timedlock(&m, weft_now_ns() + kSec);
        unlock = weft_mutex_unlock(&m);
        unlock_again = weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(EDEADLK, relock);
    EXPECT_EQ(EDEADLK, timed_relock);
    EXPECT_EQ(0, unlock);
    EXPECT_EQ(EPERM, unlock_again);
}

TEST_P(MutexTest, UnlockByNonOwnerReturnsEperm) {
    std::vector<int> by_other, by_owner;
    ASSERT_EQ(0, run([&] {
        for (int kind : {WEFT_MUTEX_NORMAL, WEFT_MUTEX_ERRORCHECK, WEFT_MUTEX_RECURSIVE}) {
            weft_mutex_t m;
            ASSERT_EQ(0, weft_mutex_init(&m, kind));
            ASSERT_EQ(0, weft_mutex_lock(&m));
            by_other.push_back(on_other_thread(other(), [&] { return weft_mutex_unlock(&m); }));
            by_owner.push_back(weft_mutex_unlock(&m));
        }
    }));
    ASSERT_EQ(3u, by_other.size());
    for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(EPERM, by_other[k]) << "kind " << k;
        EXPECT_EQ(0, by_owner[k]) << "kind " << k;
    }
}

TEST_P(MutexTest, UnlockOfAnUnlockedMutexReturnsEperm) {
    int r = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_ERRORCHECK_INITIALIZER;
        r = weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(EPERM, r);
}

TEST_P(MutexTest, RecursiveMutexCountsLockDepth) {
    std::vector<int> other_try; // another thread's trylock after each unlock
    int extra_unlock = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m;
        ASSERT_EQ(0, weft_mutex_init(&m, WEFT_MUTEX_RECURSIVE));
        ASSERT_EQ(0, weft_mutex_lock(&m));
        ASSERT_EQ(0, weft_mutex_lock(&m));
        ASSERT_EQ(0, weft_mutex_trylock(&m));
        ASSERT_EQ(0, weft_mutex_timedlock(&m, weft_now_ns() + kSec)); // depth 4
        for (int i = 0; i < 4; ++i) {
            ASSERT_EQ(0, weft_mutex_unlock(&m));
            other_try.push_back(on_other_thread(other(), [&] {
                int r = weft_mutex_trylock(&m);
                if (r == 0) weft_mutex_unlock(&m);
                return r;
            }));
        }
        extra_unlock = weft_mutex_unlock(&m);
    }));
    EXPECT_EQ((std::vector<int>{EBUSY, EBUSY, EBUSY, 0}), other_try);
    EXPECT_EQ(EPERM, extra_unlock);
}

TEST_P(MutexTest, DestroyLockedOrWaitedOnMutexReturnsEbusy) {
    int held = -1, waited = -1, free_rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        held = weft_mutex_destroy(&m);
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_mutex_lock(&m);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 1));
        waited = weft_mutex_destroy(&m);
        weft_mutex_unlock(&m);
        join(t);
        free_rc = weft_mutex_destroy(&m);
    }));
    EXPECT_EQ(EBUSY, held);
    EXPECT_EQ(EBUSY, waited);
    EXPECT_EQ(0, free_rc);
}

TEST_P(MutexTest, StaticInitializersGiveTheirKinds) {
    int normal_lock = -1, normal_unlock = -1, ec_relock = -1, rec_relock = -1, rec_unlocks = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t n = WEFT_MUTEX_INITIALIZER;
        weft_mutex_t e = WEFT_MUTEX_ERRORCHECK_INITIALIZER;
        weft_mutex_t r = WEFT_MUTEX_RECURSIVE_INITIALIZER;
        normal_lock = weft_mutex_lock(&n);
        normal_unlock = weft_mutex_unlock(&n);
        ASSERT_EQ(0, weft_mutex_lock(&e));
        ec_relock = weft_mutex_lock(&e);
        weft_mutex_unlock(&e);
        ASSERT_EQ(0, weft_mutex_lock(&r));
        rec_relock = weft_mutex_lock(&r);
        rec_unlocks = weft_mutex_unlock(&r) + weft_mutex_unlock(&r);
    }));
    EXPECT_EQ(0, normal_lock);
    EXPECT_EQ(0, normal_unlock);
    EXPECT_EQ(EDEADLK, ec_relock);
    EXPECT_EQ(0, rec_relock);
    EXPECT_EQ(0, rec_unlocks);
}

TEST_P(MutexTest, BadArgumentsReturnEinval) {
    weft_mutex_t m;
    std::vector<int> rcs;
    ASSERT_EQ(0, run([&] {
        rcs.push_back(weft_mutex_init(&m, 3));
        rcs.push_back(weft_mutex_init(&m, -1));
        rcs.push_back(weft_mutex_init(nullptr, WEFT_MUTEX_NORMAL));
        rcs.push_back(weft_mutex_lock(nullptr));
        rcs.push_back(weft_mutex_trylock(nullptr));
        rcs.push_back(weft_mutex_timedlock(nullptr, 0));
        rcs.push_back(weft_mutex_unlock(nullptr));
        rcs.push_back(weft_mutex_destroy(nullptr));
        weft_mutex_t garbage = {{7, 0, 0, 0}}; // kind byte out of range
        rcs.push_back(weft_mutex_lock(&garbage));
    }));
    ASSERT_EQ(9u, rcs.size());
    for (size_t i = 0; i < rcs.size(); ++i) EXPECT_EQ(EINVAL, rcs[i]) << "call " << i;
}

// ---------------------------------------------------------------- timed lock

TEST_P(MutexTest, TimedlockTimesOutWhileTheMutexIsHeld) {
    int rc = -1;
    uint64_t waited = 0;
    const uint64_t wait = 20 * kMs;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        on_other_thread(other(), [&] {
            uint64_t t0 = weft_now_ns();
            rc = weft_mutex_timedlock(&m, t0 + wait);
            waited = weft_now_ns() - t0;
            return 0;
        });
        weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(ETIMEDOUT, rc);
    EXPECT_GE(waited, wait);
}

TEST_P(MutexTest, TimedlockWithPastDeadlineOnHeldMutexTimesOutAtOnce) {
    int zero = -1, past = -1;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        on_other_thread(other(), [&] {
            uint64_t t0 = weft_now_ns();
            zero = weft_mutex_timedlock(&m, 0);
            past = weft_mutex_timedlock(&m, t0 - kMs);
            took = weft_now_ns() - t0;
            return 0;
        });
        weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(ETIMEDOUT, zero);
    EXPECT_EQ(ETIMEDOUT, past);
    EXPECT_LT(took, 2 * kSec);
}

TEST_P(MutexTest, TimedlockOfAFreeMutexSucceedsEvenWithAPastDeadline) {
    int rc = -1, unlock = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        rc = weft_mutex_timedlock(&m, 0);
        unlock = weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(0, rc);
    EXPECT_EQ(0, unlock);
}

TEST_P(MutexTest, TimedlockSucceedsWhenTheMutexIsReleasedInTime) {
    int rc = -1, owner_unlock = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_ERRORCHECK_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            rc = weft_mutex_timedlock(&m, weft_now_ns() + 30 * kSec);
            owner_unlock = weft_mutex_unlock(&m); // 0 only if it really owns it
            return nullptr;
        }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 1));
        weft_sleep_ns(2 * kMs);
        weft_mutex_unlock(&m);
        join(t);
    }));
    EXPECT_EQ(0, rc);
    EXPECT_EQ(0, owner_unlock);
}

// A waiter that times out leaves the queue from the middle; the waiters
// around it still get the mutex, in order.
TEST_P(MutexTest, TimedOutWaiterLeavesTheQueueAndOthersStillAcquireInOrder) {
    std::vector<int> order;
    int timed_rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        weft_thread_t a, b, c;
        ASSERT_EQ(0, spawn_on(&a, home(1), [&] {
            weft_mutex_lock(&m);
            order.push_back(1);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 1));
        ASSERT_EQ(0, spawn_on(&b, home(2), [&] {
            timed_rc = weft_mutex_timedlock(&m, weft_now_ns() + 5 * kMs);
            if (timed_rc == 0) weft_mutex_unlock(&m);
            return nullptr;
        }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 2));
        ASSERT_EQ(0, spawn_on(&c, home(3), [&] {
            weft_mutex_lock(&m);
            order.push_back(3);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 3));
        join(b); // times out while we still hold the mutex
        weft_mutex_unlock(&m);
        join(a);
        join(c);
    }));
    EXPECT_EQ(ETIMEDOUT, timed_rc);
    EXPECT_EQ((std::vector<int>{1, 3}), order);
}

// ---------------------------------------------------------------- ordering and exclusion

// Waiters queue on a held mutex in a known order (each starts only after the
// previous one has parked); unlock hands the mutex over in that order.
TEST_P(MutexTest, WaitersAcquireInFifoOrder) {
    const int n = 10;
    std::vector<int> order;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                weft_mutex_lock(&m);
                order.push_back(i);
                weft_yield(); // holding it: later waiters must not barge in
                weft_mutex_unlock(&m);
                return nullptr;
            }));
            ASSERT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + i + 1)) << "waiter " << i << " never parked";
        }
        weft_mutex_unlock(&m);
        for (auto &t : ts) join(t);
    }));
    std::vector<int> expected(n);
    for (int i = 0; i < n; ++i) expected[i] = i;
    EXPECT_EQ(expected, order);
}

// An unlock with a waiter releases the mutex and wakes the waiter to take
// it: the running thread may take it again first (no convoy), and the
// woken waiter then goes back to the head of the queue, not the tail.
TEST_P(MutexTest, UnlockWakesTheFirstWaiterAndTheRunningThreadMayRelock) {
    int late = -1;
    uint64_t waiter_parks = 0;
    std::vector<int> order;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        std::atomic<bool> tried{false};
        weft_thread_t w, w2;
        ASSERT_EQ(0, spawn_on(&w, other(), [&] {
            weft_mutex_lock(&m);
            order.push_back(1);
            wait_until([&] { return tried.load(); }); // if it won the race: hold it until the try is done
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 1));
        ASSERT_EQ(0, spawn_on(&w2, other(), [&] { // queued behind w
            weft_mutex_lock(&m);
            order.push_back(2);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 2));
        weft_mutex_unlock(&m);
        late = weft_mutex_trylock(&m); // w is woken, but free to take until it runs
        tried = true;
        if (late == 0) {
            order.push_back(0);
            weft_yield(); // w runs, finds it held, queues again: at the head
            weft_mutex_unlock(&m);
        }
        join(w);
        join(w2);
        waiter_parks = parks(WEFT_PARK_MUTEX) - base;
    }));
    if (policy_is("tap")) { // TAP hands the mutex over: w's appointment begins at the unlock
        EXPECT_EQ(EBUSY, late);
        EXPECT_EQ((std::vector<int>{1, 2}), order);
    } else if (vprocs() == 1) { // deterministic: w cannot run before the trylock
        EXPECT_EQ(0, late);
        EXPECT_EQ((std::vector<int>{0, 1, 2}), order);
        if (fifo_policy()) {
            EXPECT_EQ(3u, waiter_parks); // w twice (it ran during the yield), w2 once
        }
    } else { // w may win the race from its own vproc
        ASSERT_TRUE(late == 0 || late == EBUSY) << late;
        const std::vector<int> expected = late == 0 ? std::vector<int>{0, 1, 2} : std::vector<int>{1, 2};
        EXPECT_EQ(expected, order);
    }
}

// No starvation: a thread that unlocks and relocks at once, and yields
// while it holds the mutex, would otherwise take it back every time before
// the woken waiter runs. A waiter that has waited over a millisecond is
// handed the mutex by the next unlock.
TEST_P(MutexTest, AWaiterThatKeepsLosingIsHandedTheMutex) {
    long rounds = 0;
    bool waiter_got_it = false;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        std::atomic<bool> got{false};
        weft_thread_t w;
        ASSERT_EQ(0, spawn_on(&w, other(), [&] {
            weft_mutex_lock(&m);
            got = true;
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 1));
        const uint64_t end = weft_now_ns() + 10 * kSec; // bounded: the waiter takes a few ms
        while (!got.load() && weft_now_ns() < end) {
            weft_mutex_unlock(&m);
            ASSERT_EQ(0, weft_mutex_lock(&m)); // parks once it was handed over
            weft_yield();
            ++rounds;
        }
        weft_mutex_unlock(&m);
        waiter_got_it = got.load();
        join(w);
    }));
    EXPECT_TRUE(waiter_got_it) << "the waiter never got the mutex in " << rounds << " rounds";
}

// A woken waiter that has not yet taken the mutex is still inside its lock:
// destroying the mutex then is refused.
TEST_P(MutexTest, DestroyWithAWokenWaiterInFlightReturnsEbusy) {
    if (vprocs() > 1) GTEST_SKIP() << "needs the waiter not to run before the destroy: one vproc";
    int destroyed = -1;
    bool waiter_got_it = false;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        ASSERT_EQ(0, weft_mutex_lock(&m));
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        weft_thread_t w;
        ASSERT_EQ(0, spawn_on(&w, other(), [&] {
            weft_mutex_lock(&m);
            waiter_got_it = true;
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 1));
        weft_mutex_unlock(&m);
        destroyed = weft_mutex_destroy(&m);
        join(w);
        EXPECT_EQ(0, weft_mutex_destroy(&m));
    }));
    EXPECT_EQ(EBUSY, destroyed);
    EXPECT_TRUE(waiter_got_it);
}

// One woken waiter at a time, and while it is on its way the holder's
// unlocks have nobody to wake: they keep the flags in the owner word and
// take the fast path (one CAS on several vprocs), instead of the Spin and
// the queue at every unlock until the woken waiter has run.
TEST_P(MutexTest, UnlocksWhileAWaiterIsWokenWakeNobodyElse) {
    if (vprocs() > 1) GTEST_SKIP() << "needs the woken waiter not to run before the checks: one vproc";
    if (policy_is("tap")) GTEST_SKIP() << "TAP hands the mutex over instead of waking";
    using weft::detail::MutexImpl;
    uintptr_t after_first = 0, after_second = 0, at_end = 1;
    bool second_still_queued = false;
    std::vector<int> order;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        MutexImpl *mi = weft::detail::impl(&m);
        ASSERT_EQ(0, weft_mutex_lock(&m));
        const uint64_t base = parks(WEFT_PARK_MUTEX);
        weft_thread_t w[2];
        for (int i = 0; i < 2; ++i) {
            ASSERT_EQ(0, spawn_on(&w[i], other(), [&, i] {
                weft_mutex_lock(&m);
                order.push_back(i + 1);
                weft_mutex_unlock(&m);
                return nullptr;
            }));
            ASSERT_TRUE(wait_parks(WEFT_PARK_MUTEX, base + 1 + static_cast<uint64_t>(i)));
        }
        weft_mutex_unlock(&m); // wakes w[0]
        after_first = mi->owner.load();
        ASSERT_EQ(0, weft_mutex_trylock(&m)); // free until w[0] runs
        ASSERT_EQ(0, weft_mutex_unlock(&m));  // w[0] is on its way: nobody to wake
        after_second = mi->owner.load();
        second_still_queued = mi->q.head != nullptr && mi->q.head == mi->q.tail;
        join(w[0]);
        join(w[1]);
        at_end = mi->owner.load();
    }));
    EXPECT_EQ(MutexImpl::kWaiters | MutexImpl::kWoken, after_first);
    EXPECT_EQ(MutexImpl::kWaiters | MutexImpl::kWoken, after_second);
    EXPECT_TRUE(second_still_queued);
    EXPECT_EQ(0u, at_end);
    EXPECT_EQ((std::vector<int>{1, 2}), order);
}

// Many threads on every vproc increment a plain counter, yielding inside the
// critical section; any overlap loses an increment or trips the guard.
TEST_P(MutexTest, MutualExclusionUnderContention) {
    const int threads = 4 * vprocs() + 2;
    const long iters = scaled(3000, 600);
    long counter = 0;
    std::atomic<int> inside{0}, overlaps{0};
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        std::vector<weft_thread_t> ts(threads);
        for (int i = 0; i < threads; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&] {
                for (long k = 0; k < iters; ++k) {
                    EXPECT_EQ(0, weft_mutex_lock(&m));
                    if (inside.fetch_add(1) != 0) ++overlaps;
                    long v = counter;
                    if (k % 3 == 0) weft_yield();
                    counter = v + 1;
                    inside.fetch_sub(1);
                    EXPECT_EQ(0, weft_mutex_unlock(&m));
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        EXPECT_EQ(0, weft_mutex_destroy(&m));
    }));
    EXPECT_EQ(threads * iters, counter);
    EXPECT_EQ(0, overlaps.load());
}

TEST_P(MutexTest, TrylockSpinnersAndBlockingLockersShareOneMutex) {
    const int threads = 3 * vprocs();
    const long iters = scaled(2000, 400);
    long counter = 0;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        std::vector<weft_thread_t> ts(threads);
        for (int i = 0; i < threads; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                for (long k = 0; k < iters; ++k) {
                    if (i % 2) {
                        while (weft_mutex_trylock(&m) == EBUSY) weft_yield();
                    } else {
                        weft_mutex_lock(&m);
                    }
                    long v = counter;
                    if (k % 5 == 0) weft_yield();
                    counter = v + 1;
                    weft_mutex_unlock(&m);
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }));
    EXPECT_EQ(threads * iters, counter);
}

// ---------------------------------------------------------------- death

class MutexDeathTest : public OnVprocs {};
WEFT_ON_VPROCS(MutexDeathTest);

TEST_P(MutexDeathTest, RelockOfANormalMutexAbortsNamingTheThread) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const int n = vprocs();
    EXPECT_DEATH(wt::run(n, [n] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.name = "relocker";
        a.home_vproc = n - 1;
        weft_thread_t t;
        weft_thread_create(&t, &a, [](void *) -> void * {
            weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
            weft_mutex_lock(&m);
            weft_mutex_lock(&m);
            return nullptr;
        }, nullptr);
        weft_thread_join(t, nullptr);
    }),
                 "deadlock: relock of a normal mutex.* in weft thread [0-9]+ relocker");
}

} // namespace
