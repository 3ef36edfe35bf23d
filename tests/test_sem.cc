// Counting semaphores: values, limits, timed waits, FIFO hand-off.
#include <atomic>
#include <cerrno>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class SemTest : public OnVprocs {};
WEFT_ON_VPROCS(SemTest);

int value_of(weft_sem_t *s) {
    int v = -12345;
    EXPECT_EQ(0, weft_sem_getvalue(s, &v));
    return v;
}

TEST(SemInitTest, InitAboveValueMaxReturnsEinval) {
    weft_sem_t s;
    EXPECT_EQ(EINVAL, weft_sem_init(&s, WEFT_SEM_VALUE_MAX + 1u));
    EXPECT_EQ(EINVAL, weft_sem_init(&s, 0xffffffffu));
    EXPECT_EQ(EINVAL, weft_sem_init(nullptr, 1));
    EXPECT_EQ(0, weft_sem_init(&s, WEFT_SEM_VALUE_MAX));
}

TEST_P(SemTest, GetvalueCountsPostsAndWaits) {
    std::vector<int> values;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s;
        ASSERT_EQ(0, weft_sem_init(&s, 2));
        values.push_back(value_of(&s));
        weft_sem_post(&s);
        values.push_back(value_of(&s));
        weft_sem_wait(&s);
        weft_sem_wait(&s);
        values.push_back(value_of(&s));
        EXPECT_EQ(0, weft_sem_trywait(&s));
        values.push_back(value_of(&s));
        EXPECT_EQ(0, weft_sem_destroy(&s));
    }));
    EXPECT_EQ((std::vector<int>{2, 3, 1, 0}), values);
}

TEST_P(SemTest, TrywaitOnZeroReturnsEagain) {
    int rc = -1, value = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s;
        weft_sem_init(&s, 0);
        rc = weft_sem_trywait(&s);
        value = value_of(&s);
    }));
    EXPECT_EQ(EAGAIN, rc);
    EXPECT_EQ(0, value);
}

TEST_P(SemTest, PostAtValueMaxReturnsEoverflow) {
    int rc = -1, value = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s;
        ASSERT_EQ(0, weft_sem_init(&s, WEFT_SEM_VALUE_MAX - 1));
        EXPECT_EQ(0, weft_sem_post(&s));
        rc = weft_sem_post(&s);
        value = value_of(&s);
    }));
    EXPECT_EQ(EOVERFLOW, rc);
    EXPECT_EQ(int(WEFT_SEM_VALUE_MAX), value);
}

TEST_P(SemTest, StaticInitializerGivesItsValue) {
    int value = -1, fourth = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(3);
        value = value_of(&s);
        for (int i = 0; i < 3; ++i) EXPECT_EQ(0, weft_sem_trywait(&s));
        fourth = weft_sem_trywait(&s);
    }));
    EXPECT_EQ(3, value);
    EXPECT_EQ(EAGAIN, fourth);
}

TEST_P(SemTest, NullArgumentsReturnEinval) {
    std::vector<int> rcs;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        int v;
        rcs.push_back(weft_sem_wait(nullptr));
        rcs.push_back(weft_sem_trywait(nullptr));
        rcs.push_back(weft_sem_timedwait(nullptr, 0));
        rcs.push_back(weft_sem_post(nullptr));
        rcs.push_back(weft_sem_getvalue(nullptr, &v));
        rcs.push_back(weft_sem_getvalue(&s, nullptr));
        rcs.push_back(weft_sem_destroy(nullptr));
    }));
    for (size_t i = 0; i < rcs.size(); ++i) EXPECT_EQ(EINVAL, rcs[i]) << "call " << i;
}

TEST_P(SemTest, TimedwaitTimesOutAfterTheDeadline) {
    int rc = -1, zero = -1, past = -1;
    uint64_t waited = 0;
    const uint64_t wait = 20 * kMs;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            uint64_t t0 = weft_now_ns();
            rc = weft_sem_timedwait(&s, t0 + wait);
            waited = weft_now_ns() - t0;
            zero = weft_sem_timedwait(&s, 0);
            past = weft_sem_timedwait(&s, t0 - kMs);
            return nullptr;
        }));
        join(t);
        EXPECT_EQ(0, value_of(&s));
    }));
    EXPECT_EQ(ETIMEDOUT, rc);
    EXPECT_GE(waited, wait);
    EXPECT_EQ(ETIMEDOUT, zero);
    EXPECT_EQ(ETIMEDOUT, past);
}

TEST_P(SemTest, TimedwaitSucceedsWhenPostedInTimeOrWhenAvailable) {
    int posted = -1, available = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        const uint64_t base = parks(WEFT_PARK_SEM);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            posted = weft_sem_timedwait(&s, weft_now_ns() + 30 * kSec);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_SEM, base + 1));
        weft_sem_post(&s);
        join(t);
        weft_sem_post(&s);
        available = weft_sem_timedwait(&s, 0); // a unit is there: the deadline does not matter
    }));
    EXPECT_EQ(0, posted);
    EXPECT_EQ(0, available);
}

TEST_P(SemTest, TimedwaitWithTheLargestDeadlineWaitsForAPost) {
    int rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        const uint64_t base = parks(WEFT_PARK_SEM);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            rc = weft_sem_timedwait(&s, UINT64_MAX);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_SEM, base + 1));
        weft_sleep_ns(2 * kMs); // the vproc may go idle with that deadline armed
        weft_sem_post(&s);
        join(t);
    }));
    EXPECT_EQ(0, rc);
}

// Waiters queue in a known order; each post wakes the longest waiter.
TEST_P(SemTest, WaitersAreWokenInFifoOrder) {
    const int n = 8;
    std::vector<int> order;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        weft_mutex_t rec = WEFT_MUTEX_INITIALIZER;
        std::atomic<int> done{0};
        const uint64_t base = parks(WEFT_PARK_SEM);
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i) {
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                EXPECT_EQ(0, weft_sem_wait(&s));
                weft_mutex_lock(&rec);
                order.push_back(i);
                weft_mutex_unlock(&rec);
                ++done;
                return nullptr;
            }));
            ASSERT_TRUE(wait_parks(WEFT_PARK_SEM, base + i + 1)) << "waiter " << i;
        }
        for (int k = 0; k < n; ++k) {
            weft_sem_post(&s);
            EXPECT_TRUE(wait_until([&] { return done.load() == k + 1; })) << "post " << k;
        }
        for (auto &t : ts) join(t);
    }));
    std::vector<int> expected(n);
    for (int i = 0; i < n; ++i) expected[i] = i;
    EXPECT_EQ(expected, order);
}

// post gives its unit straight to the waiter: the count stays 0 and a late
// trywait cannot steal it.
TEST_P(SemTest, PostHandsTheUnitToTheWaiterNotToALateTrywait) {
    int value_after_post = -1, late = -1, waiter_rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        const uint64_t base = parks(WEFT_PARK_SEM);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            waiter_rc = weft_sem_wait(&s);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_SEM, base + 1));
        weft_sem_post(&s);
        value_after_post = value_of(&s);
        late = weft_sem_trywait(&s);
        join(t);
    }));
    EXPECT_EQ(0, value_after_post);
    EXPECT_EQ(EAGAIN, late);
    EXPECT_EQ(0, waiter_rc);
}

TEST_P(SemTest, DestroyWithWaitersReturnsEbusy) {
    int busy = -1, idle = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        const uint64_t base = parks(WEFT_PARK_SEM);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_sem_wait(&s);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_SEM, base + 1));
        busy = weft_sem_destroy(&s);
        weft_sem_post(&s);
        join(t);
        idle = weft_sem_destroy(&s);
    }));
    EXPECT_EQ(EBUSY, busy);
    EXPECT_EQ(0, idle);
}

// Units posted from every vproc are each consumed once.
TEST_P(SemTest, PostsAndWaitsAcrossVprocsBalance) {
    const int pairs = 2 * vprocs();
    const long per = scaled(5000, 1000);
    std::atomic<long> taken{0};
    int final_value = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        std::vector<weft_thread_t> ts(2 * pairs);
        for (int i = 0; i < pairs; ++i) {
            ASSERT_EQ(0, spawn_on(&ts[2 * i], home(i), [&] {
                for (long k = 0; k < per; ++k) {
                    EXPECT_EQ(0, weft_sem_post(&s));
                    if (k % 16 == 0) weft_yield();
                }
                return nullptr;
            }));
            ASSERT_EQ(0, spawn_on(&ts[2 * i + 1], home(i + 1), [&] {
                for (long k = 0; k < per; ++k) {
                    EXPECT_EQ(0, weft_sem_wait(&s));
                    ++taken;
                }
                return nullptr;
            }));
        }
        for (auto &t : ts) join(t);
        final_value = value_of(&s);
    }));
    EXPECT_EQ(pairs * per, taken.load());
    EXPECT_EQ(0, final_value);
}

} // namespace
