// Barriers and once-initialisation.
#include <atomic>
#include <cerrno>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class BarrierTest : public OnVprocs {};
WEFT_ON_VPROCS(BarrierTest);

TEST_P(BarrierTest, CountZeroReturnsEinval) {
    weft_barrier_t b;
    EXPECT_EQ(EINVAL, weft_barrier_init(&b, 0));
    EXPECT_EQ(EINVAL, weft_barrier_init(nullptr, 2));
    int wait_null = -1, destroy_null = -1;
    ASSERT_EQ(0, run([&] {
        wait_null = weft_barrier_wait(nullptr);
        destroy_null = weft_barrier_destroy(nullptr);
    }));
    EXPECT_EQ(EINVAL, wait_null);
    EXPECT_EQ(EINVAL, destroy_null);
}

TEST_P(BarrierTest, BarrierOfOneReturnsSerialEveryTime) {
    std::vector<int> rcs;
    ASSERT_EQ(0, run([&] {
        weft_barrier_t b;
        ASSERT_EQ(0, weft_barrier_init(&b, 1));
        for (int i = 0; i < 3; ++i) rcs.push_back(weft_barrier_wait(&b));
        EXPECT_EQ(0, weft_barrier_destroy(&b));
    }));
    EXPECT_EQ((std::vector<int>(3, WEFT_BARRIER_SERIAL_THREAD)), rcs);
}

// n threads on every vproc go through many rounds: in each, exactly one gets
// WEFT_BARRIER_SERIAL_THREAD, the rest 0, and nobody leaves a round before
// everyone has arrived in it.
TEST_P(BarrierTest, ExactlyOneSerialThreadPerRoundAcrossVprocs) {
    const int n = 2 * vprocs() + 1;
    const int rounds = int(scaled(100, 40));
    std::vector<std::atomic<int>> arrived(rounds), serial(rounds), zero(rounds);
    std::atomic<int> early{0}, bad_rc{0};
    ASSERT_EQ(0, run([&] {
        weft_barrier_t b;
        ASSERT_EQ(0, weft_barrier_init(&b, unsigned(n)));
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                for (int r = 0; r < rounds; ++r) {
                    if ((i + r) % 3 == 0) weft_yield(); // vary who arrives last
                    ++arrived[r];
                    int rc = weft_barrier_wait(&b);
                    if (arrived[r].load() != n) ++early;
                    if (rc == WEFT_BARRIER_SERIAL_THREAD) ++serial[r];
                    else if (rc == 0) ++zero[r];
                    else ++bad_rc;
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        EXPECT_EQ(0, weft_barrier_destroy(&b));
    }));
    EXPECT_EQ(0, early.load());
    EXPECT_EQ(0, bad_rc.load());
    for (int r = 0; r < rounds; ++r) {
        EXPECT_EQ(1, serial[r].load()) << "round " << r;
        EXPECT_EQ(n - 1, zero[r].load()) << "round " << r;
    }
}

TEST_P(BarrierTest, DestroyMidRoundReturnsEbusy) {
    int mid = -1, after = -1, waiter_rc = -2, last_rc = -2;
    ASSERT_EQ(0, run([&] {
        weft_barrier_t b;
        ASSERT_EQ(0, weft_barrier_init(&b, 2));
        const uint64_t base = parks(WEFT_PARK_BARRIER);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            waiter_rc = weft_barrier_wait(&b);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_BARRIER, base + 1));
        mid = weft_barrier_destroy(&b);
        last_rc = weft_barrier_wait(&b);
        join(t);
        after = weft_barrier_destroy(&b);
    }));
    EXPECT_EQ(EBUSY, mid);
    EXPECT_EQ(0, after);
    EXPECT_EQ(0, waiter_rc); // the one that waited
    EXPECT_EQ(WEFT_BARRIER_SERIAL_THREAD, last_rc); // the last to arrive
}

// ---------------------------------------------------------------- once

class OnceTest : public OnVprocs {};
WEFT_ON_VPROCS(OnceTest);

std::atomic<int> g_calls{0};
std::atomic<bool> g_running{false}, g_finished{false};
std::atomic<uint64_t> g_park_target{0};
std::atomic<bool> g_saw_waiters{false};

// Runs while the other callers arrive: it waits (yielding and sleeping) until
// they have all parked on the once, so they demonstrably came in mid-run.
void slow_init() {
    ++g_calls;
    g_running = true;
    g_saw_waiters = wait_parks(WEFT_PARK_ONCE, g_park_target.load());
    weft_sleep_ns(kMs);
    g_finished = true;
}

TEST_P(OnceTest, CallersArrivingDuringTheRunReturnOnlyAfterItFinished) {
    const int n = 3 * vprocs() + 2;
    g_calls = 0;
    g_running = false;
    g_finished = false;
    std::atomic<int> returned_early{0}, returned{0};
    ASSERT_EQ(0, run([&] {
        weft_once_t once = WEFT_ONCE_INIT;
        g_park_target = parks(WEFT_PARK_ONCE) + uint64_t(n - 1);
        auto caller = [&] {
            EXPECT_EQ(0, weft_once(&once, slow_init));
            if (!g_finished.load()) ++returned_early;
            ++returned;
            return nullptr;
        };
        std::vector<weft_thread_t> ts(n);
        ASSERT_EQ(0, spawn_on(&ts[0], home(0), caller));
        ASSERT_TRUE(wait_until([&] { return g_running.load(); }));
        for (int i = 1; i < n; ++i) ASSERT_EQ(0, spawn_on(&ts[i], home(i), caller));
        for (auto &t : ts) join(t);
        // Later callers return at once without running it again.
        EXPECT_EQ(0, weft_once(&once, slow_init));
    }));
    EXPECT_EQ(1, g_calls.load());
    EXPECT_TRUE(g_saw_waiters.load());
    EXPECT_EQ(0, returned_early.load());
    EXPECT_EQ(n, returned.load());
}

std::atomic<int> g_quick_calls{0};
void quick_init() { ++g_quick_calls; }

// Many rounds, each a fresh once object that every thread (on every vproc)
// races for right after a barrier: one run per object.
TEST_P(OnceTest, FunctionRunsExactlyOnceWithManyConcurrentCallers) {
    const int n = 4 * vprocs();
    const int rounds = int(scaled(100, 40));
    g_quick_calls = 0;
    std::vector<weft_once_t> onces(rounds);
    for (auto &o : onces) o = weft_once_t WEFT_ONCE_INIT;
    std::atomic<int> not_done{0};
    int calls_seen = 0;
    ASSERT_EQ(0, run([&] {
        weft_barrier_t b;
        ASSERT_EQ(0, weft_barrier_init(&b, unsigned(n)));
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&] {
                for (int r = 0; r < rounds; ++r) {
                    weft_barrier_wait(&b);
                    EXPECT_EQ(0, weft_once(&onces[r], quick_init));
                    if (g_quick_calls.load() < r + 1) ++not_done;
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        calls_seen = g_quick_calls.load();
    }));
    EXPECT_EQ(rounds, calls_seen);
    EXPECT_EQ(0, not_done.load());
}

TEST_P(OnceTest, NullArgumentsReturnEinval) {
    int null_once = -1, null_fn = -1;
    ASSERT_EQ(0, run([&] {
        weft_once_t o = WEFT_ONCE_INIT;
        null_once = weft_once(nullptr, quick_init);
        null_fn = weft_once(&o, nullptr);
    }));
    EXPECT_EQ(EINVAL, null_once);
    EXPECT_EQ(EINVAL, null_fn);
}

} // namespace
