// Introspection: weft_stats_get and the park reasons.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class StatsTest : public OnVprocs {};
WEFT_ON_VPROCS(StatsTest);

TEST(ParkReasonTest, NamesAreStable) {
    const char *expected[] = {"sleep", "join", "mutex", "cond", "rwlock", "sem",
                              "barrier", "once", "io", "offload", "other"};
    static_assert(std::size(expected) == WEFT_PARK_REASON_COUNT);
    for (int r = 0; r < WEFT_PARK_REASON_COUNT; ++r) EXPECT_STREQ(expected[r], weft_park_reason_name(r)) << r;
    EXPECT_STREQ("?", weft_park_reason_name(-1));
    EXPECT_STREQ("?", weft_park_reason_name(WEFT_PARK_REASON_COUNT));
    EXPECT_STREQ("?", weft_park_reason_name(1000));
}

TEST_P(StatsTest, InvalidVprocReturnsEinval) {
    std::vector<int> rcs;
    int null_out = -1;
    ASSERT_EQ(0, run([&] {
        weft_stats_t s;
        for (int v : {vprocs(), vprocs() + 1, -2, 1 << 30}) rcs.push_back(weft_stats_get(v, &s));
        for (int v = -1; v < vprocs(); ++v) EXPECT_EQ(0, weft_stats_get(v, &s)) << v;
        null_out = weft_stats_get(-1, nullptr);
    }));
    EXPECT_EQ((std::vector<int>(4, EINVAL)), rcs);
    EXPECT_EQ(EINVAL, null_out);
}

TEST_P(StatsTest, CountsCreationsExitsAndLiveThreads) {
    const int k = 10;
    weft_stats_t before{}, during{}, after{};
    ASSERT_EQ(0, run([&] {
        before = stats();
        weft_sem_t gate = WEFT_SEM_INITIALIZER(0);
        std::vector<weft_thread_t> ts(k);
        for (int i = 0; i < k; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&] {
                weft_sem_wait(&gate);
                return nullptr;
            }));
        during = stats();
        for (int i = 0; i < k; ++i) weft_sem_post(&gate);
        for (auto &t : ts) join(t);
        after = stats();
    }));
    EXPECT_EQ(uint64_t(k), after.threads_created - before.threads_created);
    EXPECT_EQ(uint64_t(k), after.threads_exited - before.threads_exited);
    EXPECT_EQ(1u, before.threads_live); // main
    EXPECT_EQ(uint64_t(k) + 1, during.threads_live);
    EXPECT_EQ(1u, after.threads_live);
}

TEST_P(StatsTest, CountsSwitchesAndYieldsBetweenReadyThreads) {
    StealingOff no_stealing; // threads made on one vproc, counted there: none may move
    const int n = 100;
    weft_stats_t before{}, after{};
    ASSERT_EQ(0, run([&] {
        before = stats(other());
        weft_thread_t spawner;
        ASSERT_EQ(0, spawn_on(&spawner, other(), [&] {
            weft_thread_t a, b; // same vproc: each yield hands over to the other
            EXPECT_EQ(0, spawn(&a, [&] { for (int i = 0; i < n; ++i) weft_yield(); return nullptr; }));
            EXPECT_EQ(0, spawn(&b, [&] { for (int i = 0; i < n; ++i) weft_yield(); return nullptr; }));
            join(a);
            join(b);
            return nullptr;
        }));
        join(spawner);
        after = stats(other());
    }));
    EXPECT_GE(after.yields - before.yields, uint64_t(2 * n - 2));
    EXPECT_GE(after.switches - before.switches, uint64_t(2 * n));
}

// "yields: weft_yield calls that switched". Alone on its vproc, a thread's
// yield returns at once: no switch, and nothing to count.
TEST_P(StatsTest, YieldWithNothingElseReadyNeitherSwitchesNorCounts) {
    weft_stats_t before{}, after{};
    ASSERT_EQ(0, run([&] {
        before = stats(0);
        for (int i = 0; i < 100; ++i) weft_yield();
        after = stats(0);
    }));
    EXPECT_EQ(0u, after.switches - before.switches);
    EXPECT_EQ(0u, after.yields - before.yields);
}

// threads_created counts "threads created whose home is this vproc", so a
// vproc's threads_live (created - exited) is the number of threads living
// there: never negative (wrapped), zero once they are all gone.
TEST_P(StatsTest, ThreadsAreCountedOnTheirHomeVproc) {
    const int k = 30;
    std::vector<weft_stats_t> before(static_cast<size_t>(vprocs())), after(static_cast<size_t>(vprocs()));
    ASSERT_EQ(0, run([&] {
        for (int v = 0; v < vprocs(); ++v) before[size_t(v)] = stats(v);
        std::vector<weft_thread_t> ts(k);
        for (int i = 0; i < k; ++i) ASSERT_EQ(0, spawn_on(&ts[i], other(), [] { return nullptr; }));
        for (auto &t : ts) join(t);
        for (int v = 0; v < vprocs(); ++v) after[size_t(v)] = stats(v);
    }));
    EXPECT_EQ(uint64_t(k), after[size_t(other())].threads_created - before[size_t(other())].threads_created);
    EXPECT_EQ(uint64_t(k), after[size_t(other())].threads_exited - before[size_t(other())].threads_exited);
    for (int v = 0; v < vprocs(); ++v)
        EXPECT_EQ(v == 0 ? 1u : 0u, after[size_t(v)].threads_live) << "vproc " << v;
}

TEST_P(StatsTest, PerVprocCountersAddUpToTheTotal) {
    std::vector<weft_stats_t> per(static_cast<size_t>(vprocs()));
    weft_stats_t total{};
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        std::vector<weft_thread_t> ts(3 * vprocs());
        for (size_t i = 0; i < ts.size(); ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(int(i)), [&] {
                for (int r = 0; r < 50; ++r) {
                    weft_mutex_lock(&m);
                    weft_yield();
                    weft_mutex_unlock(&m);
                }
                weft_sleep_ns(100 * kUs);
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        // Every other vproc is idle now and main does not switch while reading.
        total = stats(-1);
        for (int v = 0; v < vprocs(); ++v) per[size_t(v)] = stats(v);
    }));
    weft_stats_t sum{};
    for (const auto &s : per) {
        sum.threads_created += s.threads_created;
        sum.threads_exited += s.threads_exited;
        sum.switches += s.switches;
        sum.timers_fired += s.timers_fired;
        for (int r = 0; r < WEFT_PARK_REASON_COUNT; ++r) sum.parks[r] += s.parks[r];
    }
    EXPECT_EQ(total.threads_created, sum.threads_created);
    EXPECT_EQ(total.threads_exited, sum.threads_exited);
    EXPECT_EQ(total.switches, sum.switches);
    EXPECT_EQ(total.timers_fired, sum.timers_fired);
    for (int r = 0; r < WEFT_PARK_REASON_COUNT; ++r) EXPECT_EQ(total.parks[r], sum.parks[r]) << weft_park_reason_name(r);
    EXPECT_GT(total.parks[WEFT_PARK_SLEEP], 0u);
    EXPECT_GT(total.switches, 0u);
}

// One blocking operation of every kind; each is counted under its reason.
TEST_P(StatsTest, ParksAreCountedByReason) {
    const int contenders = 5;
    weft_stats_t before{}, after{};
    ASSERT_EQ(0, run([&] {
        before = stats();
        // sleep
        weft_sleep_ns(100 * kUs);
        // join: the thread ends only once our join has parked (not by timing:
        // a loaded machine can delay us past any sleep)
        weft_thread_t sleeper;
        const uint64_t jbase = parks(WEFT_PARK_JOIN);
        ASSERT_EQ(0, spawn_on(&sleeper, other(), [jbase] {
            weft_sleep_ns(100 * kUs);
            EXPECT_TRUE(wait_parks(WEFT_PARK_JOIN, jbase + 1));
            return nullptr;
        }));
        join(sleeper);
        // mutex: `contenders` threads block on a held mutex
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_mutex_lock(&m);
        const uint64_t mbase = parks(WEFT_PARK_MUTEX);
        std::vector<weft_thread_t> ts(contenders);
        for (int i = 0; i < contenders; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&] {
                weft_mutex_lock(&m);
                weft_mutex_unlock(&m);
                return nullptr;
            }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_MUTEX, mbase + contenders));
        weft_mutex_unlock(&m);
        for (auto &t : ts) join(t);
        // cond
        weft_cond_t c = WEFT_COND_INITIALIZER;
        weft_mutex_lock(&m);
        weft_cond_timedwait(&c, &m, weft_now_ns() + 100 * kUs);
        weft_mutex_unlock(&m);
        // rwlock: a writer waits for a reader
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        weft_rwlock_rdlock(&l);
        const uint64_t rbase = parks(WEFT_PARK_RWLOCK);
        weft_thread_t w;
        ASSERT_EQ(0, spawn_on(&w, other(), [&] {
            weft_rwlock_wrlock(&l);
            weft_rwlock_unlock(&l);
            return nullptr;
        }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_RWLOCK, rbase + 1));
        weft_rwlock_unlock(&l);
        join(w);
        // sem
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        weft_sem_timedwait(&s, weft_now_ns() + 100 * kUs);
        // barrier of two
        weft_barrier_t b;
        weft_barrier_init(&b, 2);
        weft_thread_t partner;
        ASSERT_EQ(0, spawn_on(&partner, other(), [&] {
            weft_sleep_ns(kMs); // we arrive first and park
            weft_barrier_wait(&b);
            return nullptr;
        }));
        weft_barrier_wait(&b);
        join(partner);
        // once: a second caller waits while the first runs
        static weft_once_t o;
        static std::atomic<bool> in_once;
        static uint64_t obase;
        o = weft_once_t WEFT_ONCE_INIT;
        in_once = false;
        obase = parks(WEFT_PARK_ONCE);
        weft_thread_t first;
        ASSERT_EQ(0, spawn_on(&first, other(), [&] {
            weft_once(&o, [] {
                in_once = true;
                EXPECT_TRUE(wait_parks(WEFT_PARK_ONCE, obase + 1)); // until the second caller waits
            });
            return nullptr;
        }));
        EXPECT_TRUE(wait_until([&] { return in_once.load(); }));
        weft_once(&o, [] {});
        join(first);
        after = stats();
    }));
    auto delta = [&](int r) { return after.parks[r] - before.parks[r]; };
    EXPECT_GE(delta(WEFT_PARK_SLEEP), 2u); // ours and the sleeper's
    EXPECT_GE(delta(WEFT_PARK_JOIN), 1u);
    EXPECT_GE(delta(WEFT_PARK_MUTEX), uint64_t(contenders));
    EXPECT_GE(delta(WEFT_PARK_COND), 1u);
    EXPECT_GE(delta(WEFT_PARK_RWLOCK), 1u);
    EXPECT_GE(delta(WEFT_PARK_SEM), 1u);
    EXPECT_GE(delta(WEFT_PARK_BARRIER), 1u);
    EXPECT_GE(delta(WEFT_PARK_ONCE), 1u);
    EXPECT_EQ(0u, delta(WEFT_PARK_IO));
    EXPECT_EQ(0u, delta(WEFT_PARK_OFFLOAD));
    EXPECT_EQ(0u, delta(WEFT_PARK_OTHER));
    EXPECT_GE(after.timers_fired - before.timers_fired, 3u); // sleep, cond and sem timeouts
}

TEST_P(StatsTest, RemoteWakeupsAreCountedOnTheWokenVproc) {
    uint64_t before = 0, after = 0;
    ASSERT_EQ(0, run([&] {
        before = stats(other()).remote_wakeups;
        weft_sem_t s = WEFT_SEM_INITIALIZER(0);
        const uint64_t base = parks(WEFT_PARK_SEM);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_sem_wait(&s);
            return nullptr;
        }));
        EXPECT_TRUE(wait_parks(WEFT_PARK_SEM, base + 1));
        weft_sem_post(&s); // from vproc 0
        join(t);
        after = stats(other()).remote_wakeups;
    }));
    if (vprocs() > 1) {
        EXPECT_GE(after - before, 2u); // the new thread and its wake-up both came from vproc 0
    } else {
        EXPECT_EQ(0u, after - before);
    }
}

} // namespace
