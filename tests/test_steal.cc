// Work stealing across vprocs (docs/stealing.md): idle vprocs take ready
// threads from busy ones, pinned threads never move, and everything a
// thread owns goes with it — errno, keys, I/O registrations, timers, the
// blocking graph's record. Deliberately more vprocs than this machine's two
// cores in places: the kernel then preempts vprocs mid-hand-off.
#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

// errno through a fresh address each time: a function that reads errno
// before and after a call keeps its address (gcc: __errno_location is
// const), and after weft_migrate that is the old kernel thread's.
[[gnu::noinline]] int get_errno() { return errno; }
[[gnu::noinline]] void set_errno(int e) { errno = e; }

void spin_ns(uint64_t ns) {
    uint64_t end = weft_now_ns() + ns;
    while (weft_now_ns() < end) {
    }
}

// n threads created the plain way (on the creator's vproc), each spinning
// `rounds` × spin with a yield between: work for an idle vproc to take.
// Returns the union of the vprocs each one ran on, as bit masks.
std::vector<uint32_t> busy_threads(int n, int rounds, const weft_thread_attr_t *attr = nullptr,
                                   uint64_t spin = 20 * kUs) {
    std::vector<weft_thread_t> ts(static_cast<size_t>(n));
    std::vector<uint32_t> seen(static_cast<size_t>(n), 0);
    for (int i = 0; i < n; ++i) {
        uint32_t *mine = &seen[static_cast<size_t>(i)];
        EXPECT_EQ(0, spawn(&ts[static_cast<size_t>(i)], [mine, rounds, spin]() -> void * {
            for (int r = 0; r < rounds; ++r) {
                *mine |= 1u << weft_vproc_self();
                spin_ns(spin);
                weft_yield();
            }
            *mine |= 1u << weft_vproc_self();
            return nullptr;
        }, attr));
    }
    for (auto &t : ts) join(t);
    return seen;
}

TEST(Steal, AnIdleVprocTakesThreadsFromABusyOne) {
    ASSERT_EQ(0, run(2, [] {
        weft_sleep_ns(20 * kMs); // vproc 1 has long gone to sleep in its reactor
        // 64 threads of 100 µs slices: the last start some 6 ms after the
        // first, well past the 1 ms a backlog must last before it is shared.
        std::vector<uint32_t> seen = busy_threads(64, 20, nullptr, 100 * kUs);
        int moved = 0;
        for (uint32_t m : seen) moved += (m & 2) != 0;
        EXPECT_GT(moved, 0) << "no thread ever ran on the idle vproc";
        weft_stats_t s0 = stats(0), s1 = stats(1), all = stats(-1);
        EXPECT_GT(s1.steals, 0u);
        EXPECT_GT(s1.migrations_in, 0u);
        EXPECT_GT(s0.migrations_out, 0u);
        EXPECT_EQ(all.migrations_in, all.migrations_out) << "a thread in transit at the end";
        EXPECT_GT(s1.idle_wakeups, 0u) << "the sleeping vproc was handed threads without being woken";
        EXPECT_GE(s1.threads_live + s0.threads_live, 1u); // main
    }));
}

// By default only threads that have not run yet move; with steal = 2 a
// vproc that stays busy gives away threads that have run too.
TEST(Steal, ThreadsThatHaveRunMoveOnlyWhenAllowed) {
    for (int mode : {1, 2}) {
        weft_config cfg;
        weft_config_init(&cfg);
        cfg.vprocs = 2;
        cfg.steal = mode;
        static int moved;
        moved = 0;
        std::function<int()> body = [] {
            // Two threads that each start on vproc 0 at once (vproc 1 is busy
            // with a pinned sleeper's start-up), then keep yielding.
            std::vector<weft_thread_t> ts(2);
            std::vector<int> first(2, -1);
            std::vector<uint32_t> later(2, 0);
            for (size_t i = 0; i < ts.size(); ++i)
                EXPECT_EQ(0, spawn_on(&ts[i], 0, [] { return nullptr; }));
            for (auto &t : ts) join(t);
            for (size_t i = 0; i < ts.size(); ++i) {
                int *f = &first[i];
                uint32_t *l = &later[i];
                EXPECT_EQ(0, spawn(&ts[i], [f, l]() -> void * {
                    *f = weft_vproc_self();
                    for (int r = 0; r < 300; ++r) {
                        spin_ns(20 * kUs);
                        weft_yield();
                        *l |= 1u << weft_vproc_self();
                    }
                    return nullptr;
                }));
            }
            for (auto &t : ts) join(t);
            for (size_t i = 0; i < ts.size(); ++i)
                if (static_cast<uint32_t>(1u << first[i]) != later[i] || later[i] != (later[i] & -later[i])) moved++;
            return 0;
        };
        ASSERT_EQ(0, weft_main_config(&cfg, wt::detail::main_trampoline, &body));
        if (mode == 1) EXPECT_EQ(moved, 0) << "a thread that had run moved under steal=1";
        else EXPECT_GT(moved, 0) << "nothing that had run moved under steal=2";
    }
}

TEST(Steal, PinnedThreadsNeverMove) {
    ASSERT_EQ(0, run(2, [] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.home_vproc = 0;
        std::vector<uint32_t> seen = busy_threads(8, 100, &a);
        for (uint32_t m : seen) EXPECT_EQ(m, 1u) << "a pinned thread ran elsewhere";
        EXPECT_EQ(stats(1).migrations_in, 0u);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, 0, []() -> void * { return ptr(static_cast<uintptr_t>(weft_migrate(1))); }));
        EXPECT_EQ(num(join(t)), uintptr_t(EPERM)) << "weft_migrate of a pinned thread";
    }));
}

TEST(Steal, TurnedOffNothingMoves) {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 2;
    cfg.steal = -1;
    std::function<int()> body = [] {
        std::vector<uint32_t> seen = busy_threads(8, 50);
        for (uint32_t m : seen) EXPECT_EQ(m, 1u);
        EXPECT_EQ(stats(-1).migrations_in, 0u);
        return 0;
    };
    EXPECT_EQ(0, weft_main_config(&cfg, wt::detail::main_trampoline, &body));
    StealingOff env; // WEFT_STEAL=0
    cfg.steal = 0;
    EXPECT_EQ(0, weft_main_config(&cfg, wt::detail::main_trampoline, &body));
}

TEST(Steal, BadSettingsAreRefused) {
    auto refused = [](const char *var, std::initializer_list<const char *> values) {
        for (const char *bad : values) {
            ScopedEnv env(var, bad);
            weft_config cfg;
            weft_config_init(&cfg);
            errno = 0;
            EXPECT_EQ(weft_main_config(&cfg, [](void *) { return 0; }, nullptr), -1) << var << "=" << bad;
            EXPECT_EQ(errno, EINVAL) << var << "=" << bad;
        }
    };
    refused("WEFT_STEAL", {"3", "yes", "-1", "10"});
    refused("WEFT_STEAL_AFTER_US", {"0", "1000001", "20us", "-5"});
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.steal = 3;
    EXPECT_EQ(weft_main_config(&cfg, [](void *) { return 0; }, nullptr), -1);
    cfg.steal = 0;
    cfg.steal_after_us = -2;
    EXPECT_EQ(weft_main_config(&cfg, [](void *) { return 0; }, nullptr), -1);
    cfg.steal = 1;
    cfg.steal_after_us = 5;
    EXPECT_EQ(weft_main_config(&cfg, [](void *) { return 5; }, nullptr), 5);
}

TEST(Steal, MigrateRefusesWhatItCannotDo) {
    EXPECT_EQ(weft_migrate(0), EPERM) << "outside weft_main";
    ASSERT_EQ(0, run(2, [] {
        EXPECT_EQ(weft_migrate(2), EINVAL);
        EXPECT_EQ(weft_migrate(-1), EINVAL);
        EXPECT_EQ(weft_migrate(weft_vproc_self()), 0);
    }));
}

// ---- a thread that moves between every operation -------------------------

class Moving : public ::testing::TestWithParam<int> {};

TEST_P(Moving, KeepsErrnoKeysAndTimers) {
    const int n = GetParam();
    ASSERT_EQ(0, run(n, [n] {
        weft_key_t key;
        ASSERT_EQ(0, weft_key_create(&key, nullptr));
        std::vector<weft_thread_t> ts(4);
        for (size_t k = 0; k < ts.size(); ++k)
            ASSERT_EQ(0, spawn(&ts[k], [n, key, k]() -> void * {
                const int rounds = static_cast<int>(scaled(3000, 600));
                for (int i = 0; i < rounds; ++i) {
                    int to = (weft_vproc_self() + 1) % n;
                    int mark = static_cast<int>(k) * 100000 + i;
                    set_errno(mark);
                    weft_setspecific(key, ptr(static_cast<uintptr_t>(mark)));
                    if (weft_migrate(to) != 0) return ptr(1);
                    if (weft_vproc_self() != to) return ptr(2);
                    if (get_errno() != mark) return ptr(3);
                    if (num(weft_getspecific(key)) != static_cast<uintptr_t>(mark)) return ptr(4);
                    if (i % 100 == 0) { // a timer armed on the new vproc
                        uint64_t t0 = weft_now_ns();
                        if (weft_sleep_ns(200 * kUs) != 0 || weft_now_ns() - t0 < 200 * kUs) return ptr(5);
                        if (get_errno() != mark) return ptr(6);
                    }
                }
                return nullptr;
            }));
        for (auto &t : ts) EXPECT_EQ(num(join(t)), 0u);
        weft_stats_t all = stats(-1);
        EXPECT_GE(all.migrations_in, static_cast<uint64_t>(4 * scaled(3000, 600)));
        EXPECT_EQ(all.migrations_in, all.migrations_out);
        weft_key_delete(key);
    }));
}

// A descriptor is armed in the reactor of the vproc where it was first
// waited on; after the reader moves, its wake-ups must still find it.
TEST_P(Moving, IoWaitsFollowTheThread) {
    const int n = GetParam();
    ASSERT_EQ(0, run(n, [n] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        const int rounds = static_cast<int>(scaled(400, 100));
        weft_thread_t reader, writer;
        ASSERT_EQ(0, spawn(&reader, [&]() -> void * {
            for (int i = 0; i < rounds; ++i) {
                if (weft_migrate(i % n) != 0) return ptr(1);
                unsigned char c;
                if (weft_read(sv[0], &c, 1) != 1) return ptr(2);
                if (c != static_cast<unsigned char>(i)) return ptr(3);
            }
            return nullptr;
        }));
        ASSERT_EQ(0, spawn_on(&writer, n - 1, [&]() -> void * {
            for (int i = 0; i < rounds; ++i) {
                weft_sleep_ns(50 * kUs); // the reader has parked by now, mostly
                unsigned char c = static_cast<unsigned char>(i);
                if (weft_write(sv[1], &c, 1) != 1) return ptr(1);
            }
            return nullptr;
        }));
        EXPECT_EQ(num(join(reader)), 0u);
        EXPECT_EQ(num(join(writer)), 0u);
        weft_close(sv[0]);
        weft_close(sv[1]);
    }));
}

TEST_P(Moving, TheBlockingGraphFollowsTheThread) {
    const int n = GetParam();
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = n;
    cfg.graph_sample = 1;
    std::function<int()> body = [n] {
        std::vector<weft_thread_t> ts(8);
        for (auto &t : ts)
            EXPECT_EQ(0, spawn(&t, [n]() -> void * {
                for (int i = 0; i < 300; ++i) {
                    weft_migrate((weft_vproc_self() + 1) % n);
                    weft_sleep_ns(kUs);
                }
                return nullptr;
            }));
        busy_threads(8, 20);
        for (auto &t : ts) join(t);
        char *buf = nullptr;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        EXPECT_EQ(0, weft_graph_dump(f, WEFT_GRAPH_JSON));
        fclose(f);
        EXPECT_NE(std::strstr(buf ? buf : "", "\"nodes\""), nullptr);
        free(buf);
        return 0;
    };
    EXPECT_EQ(0, weft_main_config(&cfg, wt::detail::main_trampoline, &body));
}

INSTANTIATE_TEST_SUITE_P(On, Moving, ::testing::Values(2, 3, 8), ::wt::vprocs_name);

// ---- stress ------------------------------------------------------------------

class StealStress : public ::testing::TestWithParam<int> {};

// 100,000 threads (20,000 under ASan) in waves, made on one vproc and left
// to the others to steal. Each pair shares a mutex-guarded sum, a semaphore
// and a socket pair: one sends its number, the other receives and checks it.
TEST_P(StealStress, MixedSyncAndIoCheckEveryResult) {
    const int n = GetParam();
    ASSERT_EQ(0, run(n, [n] {
        const long total = scaled(100000, 20000), wave = 2000;
        weft_mutex_t mu;
        weft_mutex_init(&mu, WEFT_MUTEX_NORMAL);
        long sum = 0, bad = 0;
        for (long base = 0; base < total; base += wave) {
            struct Pair {
                int sv[2];
                weft_sem_t sem;
            };
            std::vector<Pair> pairs(static_cast<size_t>(wave / 2));
            for (auto &p : pairs) {
                ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, p.sv));
                weft_sem_init(&p.sem, 0);
            }
            std::vector<weft_thread_t> ts(static_cast<size_t>(wave));
            for (long j = 0; j < wave; ++j) {
                long id = base + j;
                Pair *p = &pairs[static_cast<size_t>(j / 2)];
                bool sender = j % 2 == 0;
                ASSERT_EQ(0, spawn(&ts[static_cast<size_t>(j)], [=, &mu, &sum, &bad]() -> void * {
                    if (id % 3 == 0) weft_yield();
                    if (id % 5 == 0) weft_sleep_ns(10 * kUs);
                    if (sender) {
                        if (weft_write(p->sv[0], &id, sizeof id) != sizeof id) bad++;
                        weft_sem_post(&p->sem);
                    } else {
                        long got = -1;
                        if (weft_read(p->sv[1], &got, sizeof got) != sizeof got || got != id - 1) {
                            weft_mutex_lock(&mu);
                            bad++;
                            weft_mutex_unlock(&mu);
                        }
                        weft_sem_wait(&p->sem);
                    }
                    weft_mutex_lock(&mu);
                    sum += id;
                    weft_mutex_unlock(&mu);
                    return ptr(static_cast<uintptr_t>(id));
                }));
            }
            for (long j = 0; j < wave; ++j) EXPECT_EQ(num(join(ts[static_cast<size_t>(j)])), uintptr_t(base + j));
            for (auto &p : pairs) {
                weft_close(p.sv[0]);
                weft_close(p.sv[1]);
                weft_sem_destroy(&p.sem);
            }
        }
        EXPECT_EQ(bad, 0);
        EXPECT_EQ(sum, total * (total - 1) / 2);
        weft_stats_t all = stats(-1);
        EXPECT_GT(all.migrations_in, 0u) << "nothing was stolen on " << n << " vprocs";
        EXPECT_EQ(all.migrations_in, all.migrations_out);
        weft_mutex_destroy(&mu);
    }));
}

// Hand-offs through a mutex and a condition variable between two threads
// that keep moving: a lost wake-up would leave one waiting, which the timed
// wait turns into a failure instead of a hang.
TEST_P(StealStress, NoLostWakeupInAMillionCondHandoffs) {
    const int n = GetParam();
    ASSERT_EQ(0, run(n, [n] {
        const long handoffs = scaled(1000000, 100000);
        weft_mutex_t mu;
        weft_cond_t cv;
        weft_mutex_init(&mu, WEFT_MUTEX_NORMAL);
        weft_cond_init(&cv);
        long turn = 0; // even: ping's turn, odd: pong's
        std::atomic<long> timeouts{0};
        auto player = [&](long parity) {
            return [&, parity]() -> void * {
                for (long i = parity; i < handoffs; i += 2) {
                    // On different vprocs, both moving on every 4096 hand-offs.
                    if (i % 4096 == parity) weft_migrate(static_cast<int>((i / 4096 + parity) % n));
                    weft_mutex_lock(&mu);
                    while (turn % 2 != parity) {
                        if (weft_cond_timedwait(&cv, &mu, weft_now_ns() + 10 * kSec) == ETIMEDOUT) {
                            timeouts++;
                            weft_mutex_unlock(&mu);
                            return ptr(1);
                        }
                    }
                    ++turn;
                    weft_cond_signal(&cv);
                    weft_mutex_unlock(&mu);
                }
                return nullptr;
            };
        };
        weft_thread_t ping, pong;
        ASSERT_EQ(0, spawn(&ping, player(0)));
        ASSERT_EQ(0, spawn(&pong, player(1)));
        EXPECT_EQ(num(join(ping)), 0u);
        EXPECT_EQ(num(join(pong)), 0u);
        EXPECT_EQ(timeouts.load(), 0);
        EXPECT_EQ(turn, handoffs);
        weft_cond_destroy(&cv);
        weft_mutex_destroy(&mu);
    }));
}

// The runtime ends cleanly when its last threads were parked on every
// vproc — on a condition variable, a timer and a pipe — and are released
// together.
TEST_P(StealStress, ShutdownWithThreadsParkedOnEveryVproc) {
    const int n = GetParam();
    int r = run_main(n, [n] {
        weft_mutex_t mu;
        weft_cond_t cv;
        weft_mutex_init(&mu, WEFT_MUTEX_NORMAL);
        weft_cond_init(&cv);
        bool go = false;
        int p[2];
        if (pipe(p) != 0) return 1;
        std::atomic<int> parked{0}, done{0};
        for (int v = 0; v < n; ++v) {
            for (int kind = 0; kind < 3; ++kind) {
                if (spawn_detached(-1, [&, v, kind]() -> void * {
                        weft_migrate(v);
                        parked++;
                        if (kind == 0) {
                            weft_mutex_lock(&mu);
                            while (!go) weft_cond_wait(&cv, &mu);
                            weft_mutex_unlock(&mu);
                        } else if (kind == 1) {
                            weft_sleep_ns(30 * kMs);
                        } else {
                            char c;
                            weft_read(p[0], &c, 1);
                        }
                        done++;
                        return nullptr;
                    }) != 0)
                    return 2;
            }
        }
        if (!wait_until([&] { return parked.load() == 3 * n; })) return 3;
        weft_sleep_ns(kMs); // let them park
        weft_mutex_lock(&mu);
        go = true;
        weft_cond_broadcast(&cv);
        weft_mutex_unlock(&mu);
        std::vector<char> bytes(static_cast<size_t>(n), 'x');
        if (weft_write(p[1], bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) return 4;
        if (!wait_until([&] { return done.load() == 3 * n; })) return 5;
        weft_close(p[0]);
        weft_close(p[1]);
        return 42;
    });
    EXPECT_EQ(r, 42);
}

INSTANTIATE_TEST_SUITE_P(On, StealStress, ::testing::Values(2, 4, 8), ::wt::vprocs_name);

} // namespace
