// Regression tests for cross-vproc races found in review, each named after
// what broke. They exercise timing windows, so each can only fail when the
// window is hit; before the fixes every one of them failed in nearly every run.
#include <sys/mman.h>

#include <atomic>
#include <cstdint>

#include "support.hpp"

namespace {

using namespace wt;

weft_config two_vprocs() {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 2;
    return cfg;
}

// A timed waiter is signalled from vproc 1, which then destroys and unmaps
// the condition variable (legal: nobody is blocked on it any more). The
// waiter's vproc is kept busy past its deadline, so its timer fires before it
// runs. The timer used to lock the cond's (unmapped) spin byte: SIGSEGV.
TEST(RaceTest, CondTimerDoesNotTouchACondDestroyedAfterItsWaiterWasSignalled) {
    struct Shared {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_cond_t *c = nullptr;
        bool done = false;
        int wait_result = -1;
        uint64_t t0 = 0;
    } s;
    std::function<int()> body = [&] {
        s.t0 = weft_now_ns();
        s.c = static_cast<weft_cond_t *>(
            mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        EXPECT_NE(MAP_FAILED, static_cast<void *>(s.c));
        weft_cond_init(s.c);
        weft_thread_t waiter, hog, signaller;
        EXPECT_EQ(0, spawn_on(&waiter, 0, [&] {
            weft_mutex_lock(&s.m);
            while (!s.done) {
                s.wait_result = weft_cond_timedwait(s.c, &s.m, s.t0 + 20 * kMs);
                if (s.wait_result) break;
            }
            weft_mutex_unlock(&s.m);
            return nullptr;
        }));
        weft_yield(); // the waiter parks
        EXPECT_EQ(0, spawn_on(&hog, 0, [&] { // holds vproc 0 past the deadline
            while (weft_now_ns() < s.t0 + 60 * kMs) {
            }
            return nullptr;
        }));
        EXPECT_EQ(0, spawn_on(&signaller, 1, [&] {
            weft_sleep_ns(10 * kMs);
            weft_mutex_lock(&s.m);
            s.done = true;
            weft_cond_signal(s.c);
            weft_mutex_unlock(&s.m);
            EXPECT_EQ(0, weft_cond_destroy(s.c));
            munmap(s.c, 4096);
            return nullptr;
        }));
        join(signaller);
        join(hog);
        join(waiter);
        return 0;
    };
    weft_config cfg = two_vprocs();
    ASSERT_EQ(0, weft_main_config(&cfg, detail::main_trampoline, &body));
    // Signalled in time (0) or, on a very loaded machine, timed out: either
    // way it returned instead of crashing the vproc.
    EXPECT_TRUE(s.wait_result == 0 || s.wait_result == ETIMEDOUT) << s.wait_result;
}

// Unlock hands the mutex to a waiter on the other vproc, which unlocks,
// destroys it and reuses its memory at once (legal). The unlocker used to
// release the mutex's spin byte after waking the waiter: a write into memory
// that was no longer a mutex.
TEST(RaceTest, UnlockDoesNotWriteToAMutexItsNewOwnerAlreadyReused) {
    static weft_mutex_t storage;
    const int iters = scaled(300, 100);
    std::atomic<int> phase{0};
    int clobbered = 0;
    std::function<int()> body = [&] {
        weft_mutex_t *m = &storage;
        weft_thread_t a, b;
        EXPECT_EQ(0, spawn_on(&b, 1, [&] {
            for (int i = 0; i < iters; ++i) {
                while (phase.load() != 1) weft_yield();
                phase.store(2);
                weft_mutex_lock(m); // queued behind a, handed over
                weft_mutex_unlock(m);
                EXPECT_EQ(0, weft_mutex_destroy(m));
                reinterpret_cast<unsigned char *>(m)[1] = 0xAB; // the memory is someone else's now
                phase.store(3);
            }
            return nullptr;
        }));
        EXPECT_EQ(0, spawn_on(&a, 0, [&] {
            for (int i = 0; i < iters; ++i) {
                weft_mutex_init(m, WEFT_MUTEX_NORMAL);
                weft_mutex_lock(m);
                phase.store(1);
                while (phase.load() != 2) weft_yield();
                weft_sleep_ns(200 * kUs); // b queues, its vproc goes idle
                weft_mutex_unlock(m);     // hand-off to b
                while (phase.load() != 3) weft_yield();
                if (reinterpret_cast<unsigned char *>(m)[1] != 0xAB) ++clobbered;
                phase.store(0);
            }
            return nullptr;
        }));
        join(a);
        join(b);
        return 0;
    };
    weft_config cfg = two_vprocs();
    ASSERT_EQ(0, weft_main_config(&cfg, detail::main_trampoline, &body));
    EXPECT_EQ(0, clobbered) << "late writes into a reused mutex, of " << iters;
}

// Threads created on vproc 0 but living and ending on vproc 1 used to return
// their stacks to vproc 1's pool, so vproc 0 carved a new stack for every
// thread: address space and map entries grew without bound.
TEST(RaceTest, StacksOfThreadsThatEndOnAnotherVprocGoBackToTheirPool) {
    if (const char *s = std::getenv("WEFT_STACKS"); s && std::string(s) == "linked")
        GTEST_SKIP() << "about the fixed-stack pools (linked chunks have no owner pool)";
    const long threads = scaled(20000, 4000);
    weft_stats_t vp0{};
    std::function<int()> body = [&] {
        weft_sem_t done = WEFT_SEM_INITIALIZER(0);
        weft_thread_attr_t attr;
        weft_thread_attr_init(&attr);
        attr.detached = 1;
        attr.home_vproc = 1;
        for (long i = 0; i < threads; ++i) {
            EXPECT_EQ(0, weft_thread_create(nullptr, &attr, [](void *d) -> void * {
                weft_sem_post(static_cast<weft_sem_t *>(d));
                return nullptr;
            }, &done));
            if (i % 100 == 99)
                for (int k = 0; k < 100; ++k) weft_sem_wait(&done); // at most ~100 alive
        }
        EXPECT_EQ(0, weft_stats_get(0, &vp0));
        return 0;
    };
    weft_config cfg = two_vprocs();
    ASSERT_EQ(0, weft_main_config(&cfg, detail::main_trampoline, &body));
    EXPECT_LT(vp0.stacks_mapped, 1000u) << "stacks carved by vproc 0 for " << threads << " threads";
    EXPECT_GT(vp0.stacks_reused, uint64_t(threads / 2));
}

// Found in review: a deadlock hung the process silently. On one vproc with
// no timer pending it can be told for sure, and is reported.
TEST(DeadlockDeathTest, TwoThreadsLockingInOppositeOrderAreReported) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(wt::run(1, [] {
        static weft_mutex_t a = WEFT_MUTEX_INITIALIZER, b = WEFT_MUTEX_INITIALIZER;
        weft_thread_t t1, t2;
        spawn(&t1, [] {
            weft_mutex_lock(&a);
            weft_yield();
            weft_mutex_lock(&b);
            return nullptr;
        });
        spawn(&t2, [] {
            weft_mutex_lock(&b);
            weft_yield();
            weft_mutex_lock(&a);
            return nullptr;
        });
        join(t1);
        join(t2);
    }),
                 "deadlock: all 3 threads of the runtime are blocked");
}

// A timed waiter whose timer fires as a broadcast reaches it; the
// broadcaster then destroys and unmaps the condition variable (legal: nobody
// is blocked on it). Found in review (twice): first the timer locked the
// freed cond after a waker won, then after the timer won while a waker was
// removing the thread. The timer now never touches the object, the waiter
// leaves the queue itself, and destroy waits for timed waiters still inside.
TEST(RaceTest, BroadcastThenDestroyRacingATimedWaitersTimeoutIsSafe) {
    const int iters = static_cast<int>(scaled(2000, 400));
    int timeouts = 0, woken = 0;
    std::function<int()> body = [&] {
        static weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        uint64_t x = 88172645463325252ull;
        for (int i = 0; i < iters; ++i) {
            auto *c = static_cast<weft_cond_t *>(
                mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
            EXPECT_NE(MAP_FAILED, static_cast<void *>(c));
            weft_cond_init(c);
            static bool done;
            done = false;
            const uint64_t deadline = weft_now_ns() + 200 * kUs;
            weft_thread_t w;
            EXPECT_EQ(0, spawn_on(&w, 1, [&, c, deadline] {
                weft_mutex_lock(&m);
                while (!done)
                    if (weft_cond_timedwait(c, &m, deadline) == ETIMEDOUT) break;
                ++(done ? woken : timeouts); // exactly one per waiter
                weft_mutex_unlock(&m);
                return nullptr;
            }));
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            weft_sleep_until_ns(deadline - 10 * kUs + x % (20 * kUs)); // around the deadline
            weft_mutex_lock(&m);
            done = true;
            weft_cond_broadcast(c);
            weft_mutex_unlock(&m);
            int d = weft_cond_destroy(c);
            if (d == 0) munmap(c, 4096); // a late touch by the runtime would fault
            join(w);
            if (d != 0) { // busy: the waiter was still on it, so it may not go yet
                EXPECT_EQ(EBUSY, d);
                EXPECT_EQ(0, weft_cond_destroy(c));
                munmap(c, 4096);
            }
        }
        return 0;
    };
    weft_config cfg = two_vprocs();
    ASSERT_EQ(0, weft_main_config(&cfg, detail::main_trampoline, &body));
    EXPECT_EQ(iters, timeouts + woken);
}

// Every primitive at once, with timed waits racing their wake-ups, on three
// vprocs (more than the CPUs): every thread finishes (no lost wake-up, no
// hang) and the counters guarded by the mutexes are exact.
TEST(StressTest, MixedSyncWithTimeoutsOnThreeVprocsLosesNothing) {
    constexpr int kObjects = 4;
    struct Shared {
        weft_mutex_t m[kObjects];
        weft_cond_t c[kObjects];
        weft_sem_t s[kObjects];
        weft_rwlock_t rw = WEFT_RWLOCK_INITIALIZER;
        long counter[kObjects] = {};
        std::atomic<long> increments{0}, ops{0};
    };
    static Shared sh;
    const int threads = 300, iterations = static_cast<int>(scaled(3000, 600));
    for (int k = 0; k < kObjects; ++k) {
        weft_mutex_init(&sh.m[k], WEFT_MUTEX_NORMAL);
        weft_cond_init(&sh.c[k]);
        weft_sem_init(&sh.s[k], 0);
        sh.counter[k] = 0;
    }
    sh.increments = 0;
    sh.ops = 0;
    std::function<int()> body = [&] {
        std::vector<weft_thread_t> ts(threads);
        for (int i = 0; i < threads; ++i)
            EXPECT_EQ(0, spawn_on(&ts[i], i % 3, [i, iterations] {
                uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
                auto rnd = [&x] { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; };
                for (int n = 0; n < iterations; ++n) {
                    int k = static_cast<int>(rnd() % kObjects);
                    uint64_t soon = weft_now_ns() + (rnd() % 50) * kUs;
                    switch (rnd() % 7) {
                    case 0:
                        weft_mutex_lock(&sh.m[k]);
                        ++sh.counter[k];
                        if (rnd() % 4 == 0) weft_yield();
                        weft_mutex_unlock(&sh.m[k]);
                        ++sh.increments;
                        break;
                    case 1:
                        weft_mutex_lock(&sh.m[k]);
                        weft_cond_timedwait(&sh.c[k], &sh.m[k], soon);
                        weft_mutex_unlock(&sh.m[k]);
                        break;
                    case 2:
                        weft_mutex_lock(&sh.m[k]);
                        if (rnd() % 2) weft_cond_signal(&sh.c[k]);
                        else weft_cond_broadcast(&sh.c[k]);
                        weft_mutex_unlock(&sh.m[k]);
                        break;
                    case 3: weft_sem_post(&sh.s[k]); break;
                    case 4: weft_sem_timedwait(&sh.s[k], soon); break;
                    case 5:
                        if (rnd() % 3) {
                            weft_rwlock_rdlock(&sh.rw);
                            weft_yield();
                        } else {
                            weft_rwlock_wrlock(&sh.rw);
                        }
                        weft_rwlock_unlock(&sh.rw);
                        break;
                    case 6:
                        if (weft_mutex_timedlock(&sh.m[k], weft_now_ns() + (rnd() % 20) * kUs) == 0) {
                            ++sh.counter[k];
                            weft_mutex_unlock(&sh.m[k]);
                            ++sh.increments;
                        }
                        break;
                    }
                    ++sh.ops;
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        return 0;
    };
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 3;
    ASSERT_EQ(0, weft_main_config(&cfg, detail::main_trampoline, &body));
    EXPECT_EQ(long(threads) * iterations, sh.ops.load());
    long total = 0;
    for (long c : sh.counter) total += c;
    EXPECT_EQ(sh.increments.load(), total);
}

} // namespace
