// weft_offload: fn runs on a kernel thread of the offload pool (not the
// vproc's), its result and errno come back, the vproc keeps running other
// threads meanwhile, many threads on several vprocs can offload at once, the
// pool has exactly `workers` threads, and the counters say what happened.
#include <sys/syscall.h>

#include <algorithm>
#include <atomic>

#include "io_support.hpp"

namespace {

using namespace wt;
using namespace wt::io;

class OffloadTest : public IoTest {};
WEFT_ON_BACKENDS_AND_VPROCS(OffloadTest);

class OffloadPoolTest : public IoTest {};
WEFT_ON_BACKENDS(OffloadPoolTest);

pid_t tid() { return pid_t(syscall(SYS_gettid)); }

struct Probe {
    pid_t ran_on = 0;
    long arg = 0;
};

void *probe_fn(void *p) {
    auto *pr = static_cast<Probe *>(p);
    pr->ran_on = tid();
    errno = EDOM;
    return ptr(uintptr_t(pr->arg + 1));
}

TEST_P(OffloadTest, RunsOnAnotherKernelThreadAndReturnsTheResultAndErrno) {
    pid_t caller = 0;
    Probe pr;
    pr.arg = 41;
    void *result = nullptr;
    int e = 0;
    weft_stats_t s0{}, s1{};
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            caller = tid();
            s0 = all_stats();
            errno = 0;
            result = weft_offload(probe_fn, &pr);
            e = errno;
            s1 = all_stats();
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_NE(0, pr.ran_on);
    EXPECT_NE(caller, pr.ran_on) << "fn ran on the vproc's kernel thread";
    EXPECT_NE(getpid(), pr.ran_on);
    EXPECT_EQ(42u, num(result));
    EXPECT_EQ(EDOM, e) << "errno set by fn did not come back";
    EXPECT_EQ(1u, s1.offloaded - s0.offloaded);
}

// 200 threads spread over the vprocs offload at once; every call completes
// with its own result, and the counter counts each once.
TEST_P(OffloadTest, ManyThreadsOffloadingConcurrentlyAllComplete) {
    const int n = int(scaled(200, 60));
    std::atomic<int> right{0};
    std::atomic<int> other_thread{0};
    weft_stats_t s0{}, s1{};
    ASSERT_EQ(0, run([&] {
        s0 = all_stats();
        std::vector<weft_thread_t> ts(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[size_t(i)], home(i), [&, i] {
                struct Arg {
                    long v;
                    pid_t tid;
                } a{i, 0};
                const pid_t me = tid();
                void *r = weft_offload(
                    [](void *p) -> void * {
                        auto *a = static_cast<Arg *>(p);
                        a->tid = tid();
                        usleep(500); // really blocks the worker
                        return ptr(uintptr_t(a->v * 3 + 1));
                    },
                    &a);
                if (num(r) == uintptr_t(i * 3 + 1)) right.fetch_add(1);
                if (a.tid != me) other_thread.fetch_add(1);
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        s1 = all_stats();
    }));
    EXPECT_EQ(n, right.load());
    EXPECT_EQ(n, other_thread.load());
    EXPECT_EQ(uint64_t(n), s1.offloaded - s0.offloaded);
    EXPECT_GE(s1.parks[WEFT_PARK_OFFLOAD] - s0.parks[WEFT_PARK_OFFLOAD], 1u);
}

// While fn blocks in the pool, the caller's vproc runs another thread: fn
// waits for a flag that only a thread of that same vproc sets.
TEST_P(OffloadTest, TheVprocRunsOtherThreadsWhileAnOffloadBlocks) {
    std::atomic<bool> flag{false};
    void *seen = nullptr;
    ASSERT_EQ(0, run([&] {
        weft_thread_t a, b;
        ASSERT_EQ(0, spawn_on(&a, other(), [&] {
            seen = weft_offload(
                [](void *p) -> void * {
                    auto *f = static_cast<std::atomic<bool> *>(p);
                    const uint64_t end = weft_now_ns() + 10 * kSec;
                    while (!f->load() && weft_now_ns() < end) usleep(100);
                    return ptr(f->load() ? 1 : 0);
                },
                &flag);
            return nullptr;
        }));
        ASSERT_EQ(0, spawn_on(&b, other(), [&] {
            flag.store(true);
            return nullptr;
        }));
        join(a);
        join(b);
    }));
    EXPECT_EQ(1u, num(seen)) << "the vproc was blocked while fn ran";
}

// Max number of fns running at once while `calls` offloads are made
// concurrently. The first `rendezvous` fns wait (10 s at most) until that
// many are inside together; the rest linger up to 50 ms hoping to overlap
// with more than the pool allows.
struct Concurrency {
    std::atomic<int> inside{0}, max{0}, started{0}, rendezvous_ok{0};
    int rendezvous = 0;
};

void *concurrency_fn(void *p) {
    auto *c = static_cast<Concurrency *>(p);
    const int idx = c->started.fetch_add(1);
    int now = c->inside.fetch_add(1) + 1;
    for (int m = c->max.load(); now > m && !c->max.compare_exchange_weak(m, now);) {
    }
    const uint64_t end = weft_now_ns() + (idx < c->rendezvous ? 10 * kSec : 50 * kMs);
    while (weft_now_ns() < end) {
        int in = c->inside.load();
        for (int m = c->max.load(); in > m && !c->max.compare_exchange_weak(m, in);) {
        }
        if (idx < c->rendezvous && in >= c->rendezvous) {
            c->rendezvous_ok.fetch_add(1);
            break;
        }
        usleep(200);
    }
    c->inside.fetch_sub(1);
    return nullptr;
}

void pool_size_is(const IoTest &fx, int expected, std::function<void(weft_config &)> tweak) {
    Concurrency c;
    c.rendezvous = expected;
    const int calls = expected * 4;
    ASSERT_EQ(0, fx.run([&] {
        std::vector<weft_thread_t> ts(static_cast<size_t>(calls));
        for (int i = 0; i < calls; ++i)
            ASSERT_EQ(0, spawn(&ts[size_t(i)], [&] {
                weft_offload(concurrency_fn, &c);
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }, std::move(tweak)));
    EXPECT_EQ(expected, c.rendezvous_ok.load()) << "fewer than " << expected << " workers ran at once";
    EXPECT_LE(c.max.load(), expected) << "more fns ran at once than the pool has workers";
    EXPECT_EQ(calls, c.started.load());
}

TEST_P(OffloadPoolTest, ThePoolHasFourWorkersByDefault) {
    unsetenv("WEFT_WORKERS");
    pool_size_is(*this, 4, {});
}

TEST_P(OffloadPoolTest, ThePoolHasTheConfiguredNumberOfWorkers) {
    pool_size_is(*this, 3, [](weft_config &c) { c.workers = 3; });
}

TEST_P(OffloadPoolTest, WeftWorkersFromTheEnvironmentSetsThePoolSize) {
    setenv("WEFT_WORKERS", "2", 1);
    pool_size_is(*this, 2, {});
    unsetenv("WEFT_WORKERS");
}

// A single worker still serves many callers, one after another.
TEST_P(OffloadPoolTest, OneWorkerServesEveryCallerInTurn) {
    const int n = 50;
    std::atomic<int> done{0};
    Concurrency c;
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn(&ts[size_t(i)], [&] {
                weft_offload(
                    [](void *p) -> void * {
                        auto *c = static_cast<Concurrency *>(p);
                        int now = c->inside.fetch_add(1) + 1;
                        for (int m = c->max.load(); now > m && !c->max.compare_exchange_weak(m, now);) {
                        }
                        usleep(100);
                        c->inside.fetch_sub(1);
                        return nullptr;
                    },
                    &c);
                done.fetch_add(1);
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }, [](weft_config &cfg) { cfg.workers = 1; }));
    EXPECT_EQ(n, done.load());
    EXPECT_EQ(1, c.max.load());
}

} // namespace
