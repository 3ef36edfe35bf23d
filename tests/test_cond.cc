// Condition variables: signal/broadcast, FIFO wake order, timed waits,
// error codes, and a producer-consumer across vprocs.
#include <atomic>
#include <cerrno>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class CondTest : public OnVprocs {};
WEFT_ON_VPROCS(CondTest);

// Waiters queue on a condition variable in a known order; each signal wakes
// the longest waiter. The signaller waits for each wake-up to be recorded
// before the next signal, so the record order is the wake order.
TEST_P(CondTest, SignalWakesWaitersInFifoOrder) {
    const int n = 8;
    std::vector<int> order;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        int tickets = 0;
        std::atomic<int> done{0};
        const uint64_t base = parks(WEFT_PARK_COND);
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                weft_mutex_lock(&m);
                while (tickets == 0) EXPECT_EQ(0, weft_cond_wait(&c, &m));
                --tickets;
                order.push_back(i);
                ++done;
                weft_mutex_unlock(&m);
                return nullptr;
            }));
            ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + i + 1)) << "waiter " << i;
        }
        for (int k = 0; k < n; ++k) {
            weft_mutex_lock(&m);
            ++tickets;
            EXPECT_EQ(0, weft_cond_signal(&c));
            weft_mutex_unlock(&m);
            EXPECT_TRUE(wait_until([&] { return done.load() == k + 1; })) << "signal " << k;
        }
        for (auto &t : ts) join(t);
    }));
    std::vector<int> expected(n);
    for (int i = 0; i < n; ++i) expected[i] = i;
    EXPECT_EQ(expected, order);
}

TEST_P(CondTest, SignalWakesExactlyOneWaiter) {
    const int n = 4;
    int woke_after_signal = -1;
    std::atomic<int> done{0};
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        const uint64_t base = parks(WEFT_PARK_COND);
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&] {
                weft_mutex_lock(&m);
                weft_cond_wait(&c, &m); // no predicate: counts raw wake-ups
                ++done;
                weft_mutex_unlock(&m);
                return nullptr;
            }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + n));
        weft_cond_signal(&c);
        EXPECT_TRUE(wait_until([&] { return done.load() >= 1; }));
        weft_sleep_ns(5 * kMs); // a wrongly woken second waiter would show up here
        woke_after_signal = done.load();
        for (int i = 1; i < n; ++i) weft_cond_signal(&c);
        for (auto &t : ts) join(t);
    }));
    EXPECT_EQ(1, woke_after_signal);
    EXPECT_EQ(n, done.load());
}

TEST_P(CondTest, BroadcastWakesEveryWaiter) {
    const int n = 12;
    std::atomic<int> done{0};
    int leftover_signal_woke = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        const uint64_t base = parks(WEFT_PARK_COND);
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&] {
                weft_mutex_lock(&m);
                weft_cond_wait(&c, &m);
                ++done;
                weft_mutex_unlock(&m);
                return nullptr;
            }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + n));
        weft_mutex_lock(&m);
        EXPECT_EQ(0, weft_cond_broadcast(&c));
        weft_mutex_unlock(&m);
        EXPECT_TRUE(wait_until([&] { return done.load() == n; }));
        leftover_signal_woke = done.load();
        // Release anyone a broken broadcast left behind, so the test ends.
        for (int i = 0; i < n; ++i) weft_cond_signal(&c);
        for (auto &t : ts) join(t);
        EXPECT_EQ(0, weft_cond_destroy(&c));
    }));
    EXPECT_EQ(n, leftover_signal_woke);
}

TEST_P(CondTest, SignalWithNoWaiterIsNotRemembered) {
    int rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        EXPECT_EQ(0, weft_cond_signal(&c));
        EXPECT_EQ(0, weft_cond_broadcast(&c));
        weft_mutex_lock(&m);
        rc = weft_cond_timedwait(&c, &m, weft_now_ns() + 5 * kMs);
        weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(ETIMEDOUT, rc);
}

// ---------------------------------------------------------------- timed waits

TEST_P(CondTest, TimedwaitTimesOutWithTheMutexHeldAgain) {
    int rc = -1, other_try = -1, unlock = -1;
    uint64_t waited = 0;
    const uint64_t wait = 20 * kMs;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_ERRORCHECK_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_mutex_lock(&m);
            uint64_t t0 = weft_now_ns();
            rc = weft_cond_timedwait(&c, &m, t0 + wait);
            waited = weft_now_ns() - t0;
            weft_thread_t probe; // someone else must find it locked
            EXPECT_EQ(0, spawn_on(&probe, 0, [&] { return ptr(uintptr_t(weft_mutex_trylock(&m))); }));
            other_try = int(num(join(probe)));
            unlock = weft_mutex_unlock(&m); // EPERM if we did not hold it
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_EQ(ETIMEDOUT, rc);
    EXPECT_GE(waited, wait);
    EXPECT_EQ(EBUSY, other_try);
    EXPECT_EQ(0, unlock);
}

TEST_P(CondTest, TimedwaitWithZeroOrPastDeadlineTimesOutAtOnceHoldingTheMutex) {
    int zero = -1, past = -1, unlock = -1;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_ERRORCHECK_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        weft_mutex_lock(&m);
        uint64_t t0 = weft_now_ns();
        zero = weft_cond_timedwait(&c, &m, 0);
        past = weft_cond_timedwait(&c, &m, t0 - kMs);
        took = weft_now_ns() - t0;
        unlock = weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(ETIMEDOUT, zero);
    EXPECT_EQ(ETIMEDOUT, past);
    EXPECT_EQ(0, unlock);
    EXPECT_LT(took, 2 * kSec);
}

TEST_P(CondTest, TimedwaitReturnsZeroWhenSignalledInTime) {
    int rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        bool ready = false;
        const uint64_t base = parks(WEFT_PARK_COND);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_mutex_lock(&m);
            while (!ready && rc != ETIMEDOUT) rc = weft_cond_timedwait(&c, &m, weft_now_ns() + 30 * kSec);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + 1));
        weft_mutex_lock(&m);
        ready = true;
        weft_cond_signal(&c);
        weft_mutex_unlock(&m);
        join(t);
    }));
    EXPECT_EQ(0, rc);
}

// A waiter that timed out is off the queue: the next signal reaches the
// waiter behind it instead of being lost on the departed one.
TEST_P(CondTest, SignalAfterATimeoutReachesTheRemainingWaiter) {
    int timed = -1, plain = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        const uint64_t base = parks(WEFT_PARK_COND);
        weft_thread_t a, b;
        ASSERT_EQ(0, spawn_on(&a, home(1), [&] {
            weft_mutex_lock(&m);
            timed = weft_cond_timedwait(&c, &m, weft_now_ns() + 5 * kMs);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + 1));
        ASSERT_EQ(0, spawn_on(&b, home(2), [&] {
            weft_mutex_lock(&m);
            plain = weft_cond_wait(&c, &m);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + 2));
        join(a);
        weft_cond_signal(&c);
        join(b);
    }));
    EXPECT_EQ(ETIMEDOUT, timed);
    EXPECT_EQ(0, plain);
}

// A timed wait that is woken before its deadline must leave no timer behind:
// the thread's next, untimed park (on a semaphore) must not end with a
// spurious ETIMEDOUT when the old deadline passes.
TEST_P(CondTest, EarlyWakeupCancelsTheDeadline) {
    int cond_rc = -1, sem_rc = -1;
    bool posted_before_return = false;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        std::atomic<bool> posted{false};
        bool ready = false;
        const uint64_t cbase = parks(WEFT_PARK_COND), sbase = parks(WEFT_PARK_SEM);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_mutex_lock(&m);
            while (!ready) cond_rc = weft_cond_timedwait(&c, &m, weft_now_ns() + 5 * kMs);
            weft_mutex_unlock(&m);
            sem_rc = weft_sem_wait(&s);
            posted_before_return = posted.load();
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, cbase + 1));
        weft_mutex_lock(&m);
        ready = true;
        weft_cond_signal(&c);
        weft_mutex_unlock(&m);
        ASSERT_TRUE(wait_parks(WEFT_PARK_SEM, sbase + 1));
        weft_sleep_ns(20 * kMs); // well past the old deadline
        posted = true;
        weft_sem_post(&s);
        join(t);
    }));
    EXPECT_EQ(0, cond_rc);
    EXPECT_EQ(0, sem_rc);
    EXPECT_TRUE(posted_before_return);
}

// ---------------------------------------------------------------- errors

TEST_P(CondTest, WaitWithoutHoldingTheMutexReturnsEperm) {
    int unheld = -1, unheld_timed = -1, held_by_other = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        unheld = weft_cond_wait(&c, &m);
        unheld_timed = weft_cond_timedwait(&c, &m, weft_now_ns() + kSec);
        weft_mutex_lock(&m);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] { return ptr(uintptr_t(weft_cond_wait(&c, &m))); }));
        held_by_other = int(num(join(t)));
        weft_mutex_unlock(&m);
    }));
    EXPECT_EQ(EPERM, unheld);
    EXPECT_EQ(EPERM, unheld_timed);
    EXPECT_EQ(EPERM, held_by_other);
}

TEST_P(CondTest, DestroyWithWaitersReturnsEbusy) {
    int busy = -1, idle = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c;
        ASSERT_EQ(0, weft_cond_init(&c));
        const uint64_t base = parks(WEFT_PARK_COND);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_mutex_lock(&m);
            weft_cond_wait(&c, &m);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + 1));
        busy = weft_cond_destroy(&c);
        weft_cond_signal(&c);
        join(t);
        idle = weft_cond_destroy(&c);
    }));
    EXPECT_EQ(EBUSY, busy);
    EXPECT_EQ(0, idle);
}

TEST_P(CondTest, NullArgumentsReturnEinval) {
    std::vector<int> rcs;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        weft_mutex_lock(&m);
        rcs.push_back(weft_cond_init(nullptr));
        rcs.push_back(weft_cond_wait(nullptr, &m));
        rcs.push_back(weft_cond_wait(&c, nullptr));
        rcs.push_back(weft_cond_timedwait(nullptr, &m, 0));
        rcs.push_back(weft_cond_signal(nullptr));
        rcs.push_back(weft_cond_broadcast(nullptr));
        rcs.push_back(weft_cond_destroy(nullptr));
        weft_mutex_unlock(&m);
    }));
    for (size_t i = 0; i < rcs.size(); ++i) EXPECT_EQ(EINVAL, rcs[i]) << "call " << i;
}

// Waiting releases every level of a recursive mutex (another thread can take
// it) and restores them all on return (two unlocks needed afterwards).
TEST_P(CondTest, WaitOnARecursiveMutexReleasesEveryLevelAndRestoresThem) {
    int other_lock = -1, unlocks = -1, extra = -1;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_RECURSIVE_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        bool ready = false;
        const uint64_t base = parks(WEFT_PARK_COND);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_mutex_lock(&m);
            weft_mutex_lock(&m);
            while (!ready) weft_cond_wait(&c, &m);
            unlocks = weft_mutex_unlock(&m) + weft_mutex_unlock(&m);
            extra = weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + 1));
        other_lock = weft_mutex_timedlock(&m, weft_now_ns() + 10 * kSec);
        ready = true;
        weft_cond_signal(&c);
        if (other_lock == 0) weft_mutex_unlock(&m);
        join(t);
    }));
    EXPECT_EQ(0, other_lock);
    EXPECT_EQ(0, unlocks);
    EXPECT_EQ(EPERM, extra);
}

// ---------------------------------------------------------------- producer-consumer

// Producers and consumers on every vproc share a small bounded buffer guarded
// by one mutex and two condition variables. Every item is consumed exactly
// once: checked by a per-item tally and a checksum.
TEST_P(CondTest, ProducerConsumerAcrossVprocsConsumesEveryItemOnce) {
    const int producers = 3, consumers = 4;
    const long per_producer = scaled(20000, 3000);
    const long total = producers * per_producer;
    std::vector<std::atomic<uint8_t>> seen(total);
    std::atomic<uint64_t> sum{0};
    std::atomic<long> consumed{0};
    ASSERT_EQ(0, run([&] {
        constexpr int kCap = 8;
        long buf[kCap];
        int head = 0, count = 0;
        long produced_total = 0;
        bool finished = false;
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t not_full = WEFT_COND_INITIALIZER, not_empty = WEFT_COND_INITIALIZER;
        std::vector<weft_thread_t> ts;
        for (int p = 0; p < producers; ++p) {
            ts.emplace_back();
            ASSERT_EQ(0, spawn_on(&ts.back(), home(p), [&, p] {
                for (long i = 0; i < per_producer; ++i) {
                    weft_mutex_lock(&m);
                    while (count == kCap) weft_cond_wait(&not_full, &m);
                    buf[(head + count) % kCap] = p * per_producer + i;
                    ++count;
                    if (++produced_total == total) finished = true;
                    weft_cond_signal(&not_empty);
                    weft_mutex_unlock(&m);
                }
                return nullptr;
            }));
        }
        for (int k = 0; k < consumers; ++k) {
            ts.emplace_back();
            ASSERT_EQ(0, spawn_on(&ts.back(), home(k + 1), [&] {
                for (;;) {
                    weft_mutex_lock(&m);
                    while (count == 0 && !finished) weft_cond_wait(&not_empty, &m);
                    if (count == 0) { // finished and drained
                        weft_cond_broadcast(&not_empty);
                        weft_mutex_unlock(&m);
                        return nullptr;
                    }
                    long v = buf[head];
                    head = (head + 1) % kCap;
                    --count;
                    weft_cond_signal(&not_full);
                    if (finished) weft_cond_broadcast(&not_empty); // let the others see the end
                    weft_mutex_unlock(&m);
                    seen[v].fetch_add(1);
                    sum += uint64_t(v);
                    ++consumed;
                }
            }));
        }
        for (auto &t : ts) join(t);
    }));
    long missing = 0, doubled = 0;
    for (long i = 0; i < total; ++i) {
        if (seen[i] == 0) ++missing;
        if (seen[i] > 1) ++doubled;
    }
    EXPECT_EQ(0, missing);
    EXPECT_EQ(0, doubled);
    EXPECT_EQ(total, consumed.load());
    EXPECT_EQ(uint64_t(total) * uint64_t(total - 1) / 2, sum.load());
}

} // namespace
