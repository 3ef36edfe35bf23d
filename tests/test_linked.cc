// Linked stacks (stack/linked.hpp, docs/stacks.md): threads whose stack is a
// chain of chunks linked by __morestack. This file is built with
// -fsplit-stack, so every function in it is a checkpoint.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "support.hpp"

namespace {

weft_stats_t stats() {
    weft_stats_t s;
    weft_stats_get(-1, &s);
    return s;
}

void *run_linked(void *(*fn)(void *), void *arg, size_t first = 0, const char *name = nullptr) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.stacks = WEFT_STACKS_LINKED;
    a.stack_size = first;
    a.name = name;
    weft_thread_t t;
    int err = weft_thread_create(&t, &a, fn, arg);
    EXPECT_EQ(0, err);
    if (err) return nullptr;
    void *r = nullptr;
    EXPECT_EQ(0, weft_thread_join(t, &r));
    return r;
}

// 200-odd bytes of frame per level; the sum makes every level's frame live.
__attribute__((noinline)) long deep(long n) {
    volatile char pad[200];
    pad[0] = 1;
    if (n == 0) return 0;
    return deep(n - 1) + pad[0]; // == n
}

// Frames from `depth` levels down: each stack position near a chunk end is
// met by some depth, so the callee's checkpoint links there.
template <typename F>
__attribute__((noinline)) long at_depth(int depth, F &f) {
    volatile char pad[96];
    pad[0] = 1;
    if (depth == 0) return f();
    return at_depth(depth - 1, f) + pad[0] - 1;
}

__attribute__((noinline)) long ten_args(long a, long b, long c, long d, long e, long f, long g, long h, long i,
                                        long j) {
    volatile char pad[64];
    pad[0] = 0;
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j + pad[0];
}

__attribute__((noinline)) long varsum(int n, ...) {
    va_list ap;
    va_start(ap, n);
    long s = 0;
    for (int i = 0; i < n; ++i) s += va_arg(ap, long) * (i + 1);
    va_end(ap);
    return s;
}

__attribute__((noinline)) double fsum(double a, double b, double c, double d, double e, double f, double g,
                                      double h, double i, double j) {
    return a + b + c + d + e + f + g + h + i + j;
}

} // namespace

TEST(LinkedStacksTest, RecursionOneHundredThousandDeep) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    wt::run(1, [] {
        weft_stats_t s0 = stats();
        void *r = run_linked([](void *) -> void * { return reinterpret_cast<void *>(deep(100000)); }, nullptr);
        EXPECT_EQ(100000, reinterpret_cast<long>(r));
        weft_stats_t s1 = stats();
        // ~24 MB of frames in 4 KiB chunks: thousands of links.
        EXPECT_GT(s1.stack_links - s0.stack_links, 5000u);
    });
}

TEST(LinkedStacksTest, ArgumentsOnTheStackVarargsAndVectorRegistersCrossAChunkBoundary) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    wt::run(1, [] {
        weft_stats_t s0 = stats();
        run_linked([](void *) -> void * {
            for (int depth = 0; depth < 80; ++depth) {
                auto ints = [] { return ten_args(1, 2, 3, 4, 5, 6, 7, 8, 9, 10); };
                EXPECT_EQ(385, at_depth(depth, ints)) << "depth " << depth;
                auto va = [] { return varsum(9, 1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L); };
                EXPECT_EQ(285, at_depth(depth, va)) << "depth " << depth;
                auto fl = [] { return static_cast<long>(fsum(.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5) * 10); };
                EXPECT_EQ(275, at_depth(depth, fl)) << "depth " << depth;
                // A wrapped external (snprintf asks for 8 KiB) with arguments on the stack.
                auto pf = [] {
                    char b[96];
                    int n = std::snprintf(b, sizeof b, "%d %d %d %d %d %d %d %d %.1f %s", 1, 2, 3, 4, 5, 6, 7, 8,
                                          9.5, "ten");
                    return std::string(b, static_cast<size_t>(n)) == "1 2 3 4 5 6 7 8 9.5 ten" ? 1L : 0L;
                };
                EXPECT_EQ(1, at_depth(depth, pf)) << "depth " << depth;
            }
            return nullptr;
        }, nullptr);
        EXPECT_GT(stats().stack_links - s0.stack_links, 0u) << "no call crossed a chunk boundary";
    });
}

// The hot split: a loop calling across a chunk boundary. The chunk unlinked
// on return stays as the spare, so each call costs a __morestack round
// trip and no allocation.
TEST(LinkedStacksTest, AHotSplitReusesTheSpareChunkWithoutAllocating) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    wt::run(1, [] {
        weft_stats_t s0 = stats();
        run_linked([](void *) -> void * {
            for (int depth = 0; depth < 40; ++depth) {
                auto loop = [] {
                    long s = 0;
                    for (int i = 0; i < 1000; ++i) s += deep(3);
                    return s;
                };
                EXPECT_EQ(1000 * 3, at_depth(depth, loop));
            }
            return nullptr;
        }, nullptr);
        weft_stats_t s1 = stats();
        uint64_t links = s1.stack_links - s0.stack_links;
        EXPECT_GT(links, 1000u) << "no depth put the loop at a chunk boundary";
        EXPECT_GE(s1.stack_spare_hits - s0.stack_spare_hits, links - 50);
        EXPECT_LT(s1.stack_chunks - s0.stack_chunks, 50u);
    });
}

// A frame larger than kLargeChunk gets a mapping of its own; libc then runs
// on it (memset, snprintf, qsort calling back into this file).
TEST(LinkedStacksTest, ALargeFrameGetsAMappedChunkAndCallsIntoLibc) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    wt::run(1, [] {
        void *r = run_linked([](void *) -> void * {
            char buf[256 * 1024];
            std::memset(buf, 'a', sizeof buf);
            int n = std::snprintf(buf, sizeof buf, "%s-%d-%.3f", "linked", 42, 2.5);
            EXPECT_EQ(std::string("linked-42-2.500"), std::string(buf, static_cast<size_t>(n)));
            int v[64];
            for (int i = 0; i < 64; ++i) v[i] = (i * 37) % 64;
            std::qsort(v, 64, sizeof v[0], [](const void *a, const void *b) {
                return *static_cast<const int *>(a) - *static_cast<const int *>(b);
            });
            for (int i = 0; i < 64; ++i) EXPECT_EQ(i, v[i]);
            return reinterpret_cast<void *>(static_cast<long>(buf[100000]));
        }, nullptr);
        EXPECT_EQ('a', reinterpret_cast<long>(r));
    });
}

__attribute__((noinline)) long throw_deep(long n) {
    volatile char pad[200];
    pad[0] = 0;
    if (n == 0) throw std::runtime_error("bottom");
    return throw_deep(n - 1) + pad[0];
}

// An exception leaving a function that got its own chunk unlinks it on the
// way (__morestack's cleanup): afterwards the thread is back on its first
// chunk and a second descent reuses the same chunks.
TEST(LinkedStacksTest, AnExceptionUnwindsAcrossChunksAndUnlinksThem) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    wt::run(1, [] {
        run_linked([](void *) -> void * {
            for (int round = 0; round < 3; ++round) {
                weft_stats_t s0 = stats();
                bool caught = false;
                try {
                    throw_deep(2000);
                } catch (const std::runtime_error &e) {
                    caught = std::string(e.what()) == "bottom";
                }
                EXPECT_TRUE(caught);
                weft_stats_t s1 = stats();
                EXPECT_GT(s1.stack_links - s0.stack_links, 50u);
                if (round > 0) {
                    EXPECT_EQ(0u, s1.stack_chunks - s0.stack_chunks) << "round " << round;
                }
            }
            return nullptr;
        }, nullptr);
    });
}

// A thread whose entry has a static bound gets exactly that first chunk and
// never links; a shallow default thread neither.
TEST(LinkedStacksTest, AThreadWithItsBoundAsFirstChunkNeverLinks) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    wt::run(1, [] {
        weft_stats_t s0 = stats();
        void *r = run_linked([](void *) -> void * { return reinterpret_cast<void *>(deep(20)); }, nullptr,
                             21 * 256 + 512);
        EXPECT_EQ(20, reinterpret_cast<long>(r));
        EXPECT_EQ(0u, stats().stack_links - s0.stack_links);
        // Too small a bound for the path: linking takes over, still correct.
        r = run_linked([](void *) -> void * { return reinterpret_cast<void *>(deep(200)); }, nullptr, 256);
        EXPECT_EQ(200, reinterpret_cast<long>(r));
        EXPECT_GT(stats().stack_links - s0.stack_links, 0u);
    });
}

// Every thread linked (WEFT_STACKS=linked), on several vprocs, each
// recursing, parking and being woken from other vprocs at depth.
class LinkedOnVprocs : public wt::OnVprocs {};
TEST_P(LinkedOnVprocs, ManyThreadsRecurseAndParkAtDepth) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = GetParam();
    cfg.stacks = "linked";
    static weft_sem_t gate;
    static long sum;
    sum = 0;
    weft_sem_init(&gate, 0);
    auto body = [] {
        constexpr int kThreads = 64;
        weft_thread_t ts[kThreads];
        weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
        struct Arg { weft_mutex_t *mu; int i; } args[kThreads];
        for (int i = 0; i < kThreads; ++i) {
            args[i] = {&mu, i};
            weft_thread_attr_t a;
            weft_thread_attr_init(&a);
            a.home_vproc = i % weft_vproc_count();
            EXPECT_EQ(0, weft_thread_create(&ts[i], &a, [](void *p) -> void * {
                auto *arg = static_cast<Arg *>(p);
                auto parked = [] {
                    weft_sem_wait(&gate);
                    return deep(50);
                };
                long v = at_depth(arg->i * 7 % 90, parked);
                weft_mutex_lock(arg->mu);
                sum += v;
                weft_mutex_unlock(arg->mu);
                return nullptr;
            }, &args[i]));
        }
        for (int i = 0; i < kThreads; ++i) weft_sem_post(&gate);
        for (int i = 0; i < kThreads; ++i) EXPECT_EQ(0, weft_thread_join(ts[i], nullptr));
        return 0;
    };
    std::function<int()> fn = body;
    ASSERT_EQ(0, weft_main_config(&cfg, wt::detail::main_trampoline, &fn));
    EXPECT_EQ(64 * 50, sum);
}
WEFT_ON_VPROCS(LinkedOnVprocs);

TEST(LinkedStacksTest, BadStackSettingsAreRejected) {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.stacks = "segmented";
    std::function<int()> fn = [] { return 0; };
    errno = 0;
    EXPECT_EQ(-1, weft_main_config(&cfg, wt::detail::main_trampoline, &fn));
    EXPECT_EQ(EINVAL, errno);
    weft_config_init(&cfg);
    cfg.min_chunk = 100;
    errno = 0;
    EXPECT_EQ(-1, weft_main_config(&cfg, wt::detail::main_trampoline, &fn));
    EXPECT_EQ(EINVAL, errno);
    wt::run(1, [] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.stacks = 7;
        weft_thread_t t;
        EXPECT_EQ(EINVAL, weft_thread_create(&t, &a, [](void *) -> void * { return nullptr; }, nullptr));
    });
}

// A function built without checks whose frame runs off its chunk: the
// canary below the frames is overwritten and the thread is named when it
// switches out.
__attribute__((no_split_stack, noinline)) void unchecked_big_frame();
void unchecked_big_frame() {
    volatile char buf[3000];
    for (size_t i = 0; i < sizeof buf; ++i) buf[i] = 'X';
}

TEST(LinkedStacksTest, AnUncheckedFrameRunningOffItsChunkIsReportedNamingTheThread) {
    if (wt::kSanitized) GTEST_SKIP() << "sanitizer builds have no linked stacks";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(wt::run(1, [] {
        run_linked([](void *) -> void * {
            unchecked_big_frame();
            weft_yield();
            return nullptr;
        }, nullptr, 0, "runaway");
    }),
                 "stack overflow in weft thread [0-9]+ runaway");
}
