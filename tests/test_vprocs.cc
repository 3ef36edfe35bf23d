// Several vprocs: wake-ups that cross kernel threads, threads created on
// every vproc, and a long run of cross-vproc hand-offs with no lost wake-up.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class VprocTest : public OnVprocs {};
WEFT_ON_VPROCS(VprocTest);

// A thread on vproc 0 waits on a condition variable; a thread on the last
// vproc signals it. The wake-up crosses kernel threads through the inbox.
TEST_P(VprocTest, WakeupFromAnotherVprocReachesTheWaiter) {
    int waiter_vproc = -1, signaller_vproc = -1, rc = -1;
    uint64_t remote_before = 0, remote_after = 0;
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t c = WEFT_COND_INITIALIZER;
        bool ready = false;
        remote_before = stats(0).remote_wakeups;
        const uint64_t base = parks(WEFT_PARK_COND);
        weft_thread_t w, s;
        ASSERT_EQ(0, spawn_on(&w, 0, [&] {
            weft_mutex_lock(&m);
            while (!ready) rc = weft_cond_wait(&c, &m);
            waiter_vproc = weft_vproc_self();
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_COND, base + 1));
        ASSERT_EQ(0, spawn_on(&s, other(), [&] {
            signaller_vproc = weft_vproc_self();
            weft_mutex_lock(&m);
            ready = true;
            weft_cond_signal(&c);
            weft_mutex_unlock(&m);
            return nullptr;
        }));
        join(s);
        join(w);
        remote_after = stats(0).remote_wakeups;
    }));
    EXPECT_EQ(0, rc);
    EXPECT_EQ(0, waiter_vproc);
    EXPECT_EQ(other(), signaller_vproc);
    if (vprocs() > 1) {
        EXPECT_GT(remote_after, remote_before);
    }
}

// A spawner on every vproc creates a thread on every vproc and joins it:
// creation and join in every direction.
TEST_P(VprocTest, ThreadsCreatedFromEveryVprocRunOnTheirHomes) {
    const int n = vprocs();
    std::vector<int> ran_on(size_t(n * n), -1);
    std::vector<int> spawner_on(size_t(n), -1);
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> spawners(n);
        for (int s = 0; s < n; ++s)
            ASSERT_EQ(0, spawn_on(&spawners[s], s, [&, s] {
                spawner_on[s] = weft_vproc_self();
                std::vector<weft_thread_t> ts(n);
                for (int d = 0; d < n; ++d)
                    EXPECT_EQ(0, spawn_on(&ts[d], d, [&, s, d] {
                        weft_yield();
                        ran_on[size_t(s * n + d)] = weft_vproc_self();
                        return ptr(uintptr_t(s * n + d));
                    }));
                for (int d = 0; d < n; ++d) EXPECT_EQ(uintptr_t(s * n + d), num(join(ts[d])));
                return nullptr;
            }));
        for (auto &t : spawners) join(t);
    }));
    for (int s = 0; s < n; ++s) {
        EXPECT_EQ(s, spawner_on[s]);
        for (int d = 0; d < n; ++d) EXPECT_EQ(d, ran_on[size_t(s * n + d)]) << "from " << s << " to " << d;
    }
}

// Pairs of threads on different vprocs pass a turn back and forth with a
// mutex and two condition variables, 10^6 hand-offs in total (fewer under
// ASan). A lost wake-up would leave a pair stuck: the count per pair and the
// end of the run both check it.
TEST_P(VprocTest, MillionMutexCondHandoffsLoseNoWakeup) {
    const long total = scaled(1000000, 100000);
    const int pairs = 6;
    const long per_side = total / (2 * pairs);
    struct Pair {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t turn_changed[2] = {WEFT_COND_INITIALIZER, WEFT_COND_INITIALIZER};
        int turn = 0;
        long handoffs = 0;
    };
    std::vector<Pair> ps(pairs);
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(2 * pairs);
        for (int p = 0; p < pairs; ++p)
            for (int side = 0; side < 2; ++side)
                ASSERT_EQ(0, spawn_on(&ts[2 * p + side], home(2 * p + side + p / 3), [&, p, side] {
                    Pair &x = ps[p];
                    for (long i = 0; i < per_side; ++i) {
                        weft_mutex_lock(&x.m);
                        while (x.turn != side) weft_cond_wait(&x.turn_changed[side], &x.m);
                        x.turn = 1 - side;
                        ++x.handoffs;
                        weft_cond_signal(&x.turn_changed[1 - side]);
                        weft_mutex_unlock(&x.m);
                    }
                    return nullptr;
                }));
        for (auto &t : ts) join(t);
    }));
    long sum = 0;
    for (int p = 0; p < pairs; ++p) {
        EXPECT_EQ(2 * per_side, ps[p].handoffs) << "pair " << p;
        sum += ps[p].handoffs;
    }
    EXPECT_EQ(2 * pairs * per_side, sum);
}

// The same with semaphores and every thread on its own vproc in a ring.
TEST_P(VprocTest, TokenRingOfSemaphoresAcrossVprocs) {
    const int n = 3 * vprocs();
    const long laps = scaled(100, 50); // small: see VprocSharedCpuTest
    long passes = 0;
    ASSERT_EQ(0, run([&] {
        std::vector<weft_sem_t> sems(n);
        for (auto &s : sems) weft_sem_init(&s, 0);
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                for (long k = 0; k < laps; ++k) {
                    weft_sem_wait(&sems[i]);
                    ++passes; // only the token holder runs this
                    weft_sem_post(&sems[(i + 1) % n]);
                }
                return nullptr;
            }));
        weft_sem_post(&sems[0]);
        for (auto &t : ts) join(t);
    }));
    // The last post of the last thread leaves one unit on sems[0], unconsumed.
    EXPECT_EQ(n * laps, passes);
}

// Cross-vproc hand-offs must not cost a scheduler tick each when vprocs
// outnumber CPUs. Both vprocs share one CPU here (the affinity of the kernel
// thread that starts weft is inherited by the vprocs), so every wake-up of
// the idle vproc makes the kernel choose between waker and woken. 500
// barrier rounds take a few milliseconds; a vproc that spins without
// yielding — on a lock its preempted waker still holds, or waiting for work
// that the vproc it keeps off the CPU would hand it — burns up to a tick
// (4 ms at HZ=250) per round: 2 s of CPU (2,002 ms with the idle spin's
// sched_yield taken out and WEFT_IDLE_SPIN_US=4000). Judged by the CPU time
// the process used, not by the wall clock: other tests sharing the CPU
// stretch the wall time (1.6 s seen under `ctest -j2`), not our CPU time.
TEST(VprocSharedCpuTest, HandOffsBetweenVprocsSharingOneCpuDoNotWaitForATick) {
    const int rounds = 500;
    uint64_t elapsed = 0, cpu_used = 0;
    int rc = -1;
    auto cpu_now = [] {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return uint64_t(ts.tv_sec) * kSec + uint64_t(ts.tv_nsec);
    };
    std::thread k([&] {
        cpu_set_t set;
        ASSERT_EQ(0, sched_getaffinity(0, sizeof set, &set));
        int cpu = 0;
        while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set)) ++cpu;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ASSERT_EQ(0, pthread_setaffinity_np(pthread_self(), sizeof set, &set));
        rc = run(2, [&] {
            weft_barrier_t b;
            weft_barrier_init(&b, 2);
            weft_thread_t ts[2];
            uint64_t t0 = weft_now_ns(), c0 = cpu_now();
            for (int v = 0; v < 2; ++v)
                EXPECT_EQ(0, spawn_on(&ts[v], v, [&] {
                    for (int r = 0; r < rounds; ++r) weft_barrier_wait(&b);
                    return nullptr;
                }));
            for (auto &t : ts) join(t);
            elapsed = weft_now_ns() - t0;
            cpu_used = cpu_now() - c0;
        });
    });
    k.join();
    EXPECT_EQ(0, rc);
    EXPECT_LT(cpu_used, kSec / 2) << rounds << " rounds used " << cpu_used / kMs << " ms of CPU (" << elapsed / kMs
                             << " ms of wall time)";
}

// With pin set, vproc i runs on the i-th usable CPU alone; the caller of
// weft_main gets its own CPU mask back afterwards.
TEST(VprocPinTest, PinnedVprocsRunOnOneCpuEachAndTheCallersMaskIsRestored) {
    cpu_set_t before;
    ASSERT_EQ(0, sched_getaffinity(0, sizeof before, &before));
    if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "needs two usable CPUs";
    int cpu_of[2] = {-1, -1};
    int count_of[2] = {0, 0};
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 2;
    cfg.pin = 1;
    std::function<int()> body = [&] {
        weft_thread_t ts[2];
        for (int v = 0; v < 2; ++v)
            EXPECT_EQ(0, spawn_on(&ts[v], v, [&, v] {
                cpu_set_t mine;
                if (sched_getaffinity(0, sizeof mine, &mine) == 0) {
                    count_of[v] = CPU_COUNT(&mine);
                    for (int c = 0; c < CPU_SETSIZE; ++c)
                        if (CPU_ISSET(c, &mine)) cpu_of[v] = c;
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        return 0;
    };
    ASSERT_EQ(0, weft_main_config(&cfg, detail::main_trampoline, &body));
    EXPECT_EQ(1, count_of[0]);
    EXPECT_EQ(1, count_of[1]);
    EXPECT_NE(cpu_of[0], cpu_of[1]);
    cpu_set_t after;
    ASSERT_EQ(0, sched_getaffinity(0, sizeof after, &after));
    EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "weft_main left the caller pinned";
}

} // namespace
