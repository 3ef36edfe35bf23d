// Sleeps and timers. Only lower bounds and orderings are checked: a sleep
// lasts at least what was asked, and sleepers wake in deadline order.
#include <algorithm>
#include <atomic>
#include <random>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class TimerTest : public OnVprocs {};
WEFT_ON_VPROCS(TimerTest);

TEST_P(TimerTest, SleepLastsAtLeastTheRequestedTime) {
    const uint64_t durations[] = {1 * kMs, 3 * kMs, 7 * kMs, 15 * kMs, 500 * kUs, 50 * kUs};
    const int n = int(std::size(durations));
    std::vector<uint64_t> slept(n, 0);
    std::vector<int> rcs(n, -1);
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                uint64_t t0 = weft_now_ns();
                rcs[i] = weft_sleep_ns(durations[i]);
                slept[i] = weft_now_ns() - t0;
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }));
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(0, rcs[i]);
        EXPECT_GE(slept[i], durations[i]) << "asked " << durations[i] << " ns";
    }
}

TEST_P(TimerTest, SleepUntilReturnsOnlyOnceTheDeadlineHasPassed) {
    uint64_t deadline = 0, woke = 0;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            deadline = weft_now_ns() + 4 * kMs;
            EXPECT_EQ(0, weft_sleep_until_ns(deadline));
            woke = weft_now_ns();
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_GE(woke, deadline);
}

TEST_P(TimerTest, SleepUntilAPastDeadlineReturnsPromptly) {
    std::vector<int> rcs;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        uint64_t t0 = weft_now_ns();
        rcs.push_back(weft_sleep_until_ns(0));
        rcs.push_back(weft_sleep_until_ns(1));
        rcs.push_back(weft_sleep_until_ns(t0 - kMs));
        rcs.push_back(weft_sleep_until_ns(t0));
        took = weft_now_ns() - t0;
    }));
    EXPECT_EQ((std::vector<int>{0, 0, 0, 0}), rcs);
    EXPECT_LT(took, kSec);
}

// sleep 0 is a yield: a thread that is ready on the same vproc runs first.
TEST_P(TimerTest, SleepZeroLetsReadyThreadsRun) {
    StealingOff no_stealing; // threads made on one vproc, counted there: none may move
    bool other_ran_first = false;
    int rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            bool ran = false;
            weft_thread_t u; // same vproc: queued behind us
            EXPECT_EQ(0, spawn(&u, [&] { ran = true; return nullptr; }));
            rc = weft_sleep_ns(0);
            other_ran_first = ran;
            join(u);
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_EQ(0, rc);
    EXPECT_TRUE(other_ran_first);
}

// 10,000 threads sleep until random deadlines (fixed seed). Timers of one
// vproc fire in deadline order and the woken threads run in that order, so
// the order in which the threads of a vproc wake is their deadline order
// (ties: creation order). Threads of different vprocs are not ordered with
// respect to each other; each vproc keeps its own wake counter.
//
// A thread whose deadline had already passed when it went to sleep only
// yields and is out of order by design: such "late" threads (none unless the
// machine stalls for the whole slack) are left out of the order check.
TEST_P(TimerTest, TenThousandSleepersWakeInDeadlineOrder) {
    const int n = 10000;
    const uint64_t slack = scaled(300, 1500) * kMs; // for every thread to get to sleep
    const uint64_t spread = 300 * kMs;
    std::mt19937_64 rng(0x5eed);
    std::uniform_int_distribution<uint64_t> offset(0, spread);
    struct Rec {
        uint64_t deadline = 0, woke = 0, pos = 0;
        int vproc = -1;
        bool late = false;
    };
    std::vector<Rec> rec(n);
    std::vector<uint64_t> offsets(n);
    for (auto &o : offsets) o = offset(rng);
    std::vector<std::atomic<uint64_t>> wake_counter(static_cast<size_t>(vprocs()));
    ASSERT_EQ(0, run([&] {
        const uint64_t base = weft_now_ns() + slack;
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                Rec &r = rec[i];
                r.deadline = base + offsets[i];
                r.late = weft_now_ns() + kMs >= r.deadline;
                weft_sleep_until_ns(r.deadline);
                r.woke = weft_now_ns();
                r.vproc = weft_vproc_self();
                r.pos = wake_counter[size_t(r.vproc)].fetch_add(1);
                return nullptr;
            })) << "thread " << i;
        for (auto &t : ts) join(t);
    }));
    int late = 0, early = 0;
    for (const Rec &r : rec) {
        late += r.late;
        early += r.woke < r.deadline;
    }
    EXPECT_EQ(0, early) << "threads that woke before their deadline";
    ASSERT_LT(late, n / 10) << "too many threads missed their deadline before sleeping";
    for (int v = 0; v < vprocs(); ++v) {
        std::vector<int> idx; // this vproc's punctual threads, in wake order
        for (int i = 0; i < n; ++i)
            if (rec[i].vproc == v && !rec[i].late) idx.push_back(i);
        ASSERT_GT(idx.size(), size_t(n / vprocs() / 2)) << "vproc " << v;
        std::sort(idx.begin(), idx.end(), [&](int a, int b) { return rec[a].pos < rec[b].pos; });
        int inversions = 0;
        for (size_t k = 1; k < idx.size(); ++k) {
            const Rec &a = rec[idx[k - 1]], &b = rec[idx[k]];
            bool ordered = a.deadline < b.deadline || (a.deadline == b.deadline && idx[k - 1] < idx[k]);
            if (!ordered) {
                if (++inversions <= 5)
                    ADD_FAILURE() << "vproc " << v << ": thread " << idx[k] << " (deadline +"
                                  << b.deadline - rec[0].deadline + offsets[0] << ") woke after thread "
                                  << idx[k - 1] << " (deadline +" << a.deadline - rec[0].deadline + offsets[0]
                                  << ")";
            }
        }
        EXPECT_EQ(0, inversions) << "vproc " << v;
    }
}

// Equal deadlines fire in the order they were armed.
TEST_P(TimerTest, EqualDeadlinesWakeInTheOrderTheyWereArmed) {
    StealingOff no_stealing; // threads made on one vproc, counted there: none may move
    const int n = 50;
    std::vector<int> order;
    ASSERT_EQ(0, run([&] {
        weft_thread_t spawner;
        ASSERT_EQ(0, spawn_on(&spawner, other(), [&] {
            const uint64_t deadline = weft_now_ns() + 5 * kMs;
            std::vector<weft_thread_t> ts(n);
            for (int i = 0; i < n; ++i)
                EXPECT_EQ(0, spawn(&ts[i], [&, i] {
                    weft_sleep_until_ns(deadline);
                    order.push_back(i); // one vproc: no lock needed
                    return nullptr;
                }));
            for (auto &t : ts) join(t);
            return nullptr;
        }));
        join(spawner);
    }));
    std::vector<int> expected(n);
    for (int i = 0; i < n; ++i) expected[i] = i;
    EXPECT_EQ(expected, order);
}

// Threads that never block must not starve a sleeper on their vproc: the
// scheduler polls timers every few dispatches even when something is ready.
TEST_P(TimerTest, TimersFireWhileOtherThreadsAreAlwaysReady) {
    std::atomic<bool> woke{false};
    std::atomic<int> saw_wake{0};
    ASSERT_EQ(0, run([&] {
        weft_thread_t spawner;
        ASSERT_EQ(0, spawn_on(&spawner, other(), [&] {
            weft_thread_t ts[3];
            EXPECT_EQ(0, spawn(&ts[0], [&] {
                weft_sleep_ns(2 * kMs);
                woke = true;
                return nullptr;
            }));
            for (int i = 1; i < 3; ++i)
                EXPECT_EQ(0, spawn(&ts[i], [&] {
                    const uint64_t give_up = weft_now_ns() + 10 * kSec;
                    while (!woke.load() && weft_now_ns() < give_up) weft_yield(); // never parks
                    if (woke.load()) ++saw_wake;
                    return nullptr;
                }));
            for (auto &t : ts) join(t);
            return nullptr;
        }));
        join(spawner);
    }));
    EXPECT_TRUE(woke.load());
    EXPECT_EQ(2, saw_wake.load());
}

// A vproc with nothing to run sleeps in the kernel until its next timer.
TEST_P(TimerTest, IdleVprocWakesUpForItsTimer) {
    uint64_t slept = 0;
    uint64_t idle_before = 0, idle_after = 0;
    ASSERT_EQ(0, run([&] {
        idle_before = stats(other()).idle_sleeps;
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            uint64_t t0 = weft_now_ns();
            weft_sleep_ns(10 * kMs);
            slept = weft_now_ns() - t0;
            return nullptr;
        }));
        join(t);
        idle_after = stats(other()).idle_sleeps;
    }));
    EXPECT_GE(slept, 10 * kMs);
    EXPECT_GT(idle_after, idle_before);
}

TEST_P(TimerTest, NowIsMonotonic) {
    uint64_t prev = weft_now_ns(), backwards = 0;
    ASSERT_EQ(0, run([&] {
        for (int i = 0; i < 10000; ++i) {
            uint64_t t = weft_now_ns();
            if (t < prev) ++backwards;
            prev = t;
            if (i % 100 == 0) weft_yield();
        }
    }));
    EXPECT_EQ(0u, backwards);
    EXPECT_GT(prev, 0u);
}

} // namespace
