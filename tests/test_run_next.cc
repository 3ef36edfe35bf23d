// Run-next (sched/fifo.hpp): under FIFO a thread just created, and a joiner
// whose child has just exited, run before threads that were ready earlier,
// in the order the running thread readied them; bounded so that ordinary
// ready threads still run; WEFT_RUN_NEXT=0 / run_next = -1 restores plain
// FIFO. Every order below is exact on one vproc: nothing else runs there.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support.hpp"

namespace {

using namespace wt;

// The order is FIFO's; the other policies (this binary also runs under
// WEFT_POLICY=cohort and tap) keep their own.
#define SKIP_UNLESS_FIFO() \
    if (!fifo_policy()) GTEST_SKIP() << "run-next is the FIFO policy's; WEFT_POLICY=" << std::getenv("WEFT_POLICY")

// body on one vproc, with run_next as given (1 on, -1 off).
int run_one(int run_next, std::function<void()> body) {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 1;
    cfg.run_next = run_next;
    std::function<int()> main = [&] {
        body();
        return 0;
    };
    return weft_main_config(&cfg, detail::main_trampoline, &main);
}

// Z is ready (it has run once and yielded) when main creates X then Y and
// yields: with run-next X and Y go first, in creation order.
std::string creation_order(int run_next) {
    std::string seq;
    EXPECT_EQ(0, run_one(run_next, [&] {
        weft_thread_t z, x, y;
        ASSERT_EQ(0, spawn(&z, [&] {
            seq += 'z';
            weft_yield();
            seq += 'Z';
            return nullptr;
        }));
        weft_yield(); // z runs, yields: it is an ordinary ready thread now
        ASSERT_EQ(0, spawn(&x, [&] {
            seq += 'X';
            return nullptr;
        }));
        ASSERT_EQ(0, spawn(&y, [&] {
            seq += 'Y';
            return nullptr;
        }));
        weft_yield();
        seq += 'm';
        join(z);
        join(x);
        join(y);
    }));
    return seq;
}

TEST(RunNext, NewThreadsRunBeforeOlderReadyOnesInCreationOrder) {
    SKIP_UNLESS_FIFO();
    EXPECT_EQ("zXYZm", creation_order(1));
}

// (The ready order without run-next, which cohort and TAP keep too; the
// resource-aware policy picks by its nodes' tickets instead.)
#define SKIP_IF_RESOURCE() \
    if (policy_is("resource")) GTEST_SKIP() << "the resource-aware policy orders ready threads by its nodes' tickets"

TEST(RunNext, OffMeansThreadsStartInTheOrderTheyBecameReady) {
    SKIP_IF_RESOURCE();
    EXPECT_EQ("zZXYm", creation_order(-1));
}

TEST(RunNext, EnvironmentVariableTurnsItOff) {
    SKIP_IF_RESOURCE();
    ScopedEnv env("WEFT_RUN_NEXT", "0");
    EXPECT_EQ("zZXYm", creation_order(0));
}

// o is an ordinary ready thread when main joins a child: once the child
// exits, main runs next, as a return would, ahead of o.
std::string join_order(int run_next) {
    std::string seq;
    EXPECT_EQ(0, run_one(run_next, [&] {
        weft_thread_t o, c;
        ASSERT_EQ(0, spawn(&o, [&] {
            seq += 'o';
            weft_yield();
            seq += 'O';
            return nullptr;
        }));
        weft_yield();
        ASSERT_EQ(0, spawn(&c, [&] {
            seq += 'c';
            return nullptr;
        }));
        join(c);
        seq += 'm';
        join(o);
    }));
    return seq;
}

TEST(RunNext, JoinerRunsRightAfterItsChildExits) {
    SKIP_UNLESS_FIFO();
    EXPECT_EQ("ocmO", join_order(1));
    EXPECT_EQ("oOcm", join_order(-1));
}

// A thread that creates and joins children in a loop readies a run-next
// thread at every switch. A yielding thread beside it must still run: once
// after every kNextStreakMax (32) run-next dispatches, so 625 times in
// 10,000 create+joins (20,000 dispatches). Without the bound: 0 until the
// loop ends; with plain FIFO, 10,000.
TEST(RunNext, OrdinaryThreadsStillRunBesideACreateJoinLoop) {
    SKIP_UNLESS_FIFO();
    constexpr int kLoops = 10000;
    long turns_during = -1;
    ASSERT_EQ(0, run_one(1, [&] {
        std::atomic<bool> stop{false};
        long turns = 0;
        weft_thread_t y;
        ASSERT_EQ(0, spawn(&y, [&] {
            while (!stop.load(std::memory_order_relaxed)) {
                ++turns;
                weft_yield();
            }
            return nullptr;
        }));
        weft_yield();
        const long before = turns;
        for (int i = 0; i < kLoops; ++i) {
            weft_thread_t c;
            ASSERT_EQ(0, spawn(&c, [] { return nullptr; }));
            join(c);
        }
        turns_during = turns - before;
        stop = true;
        join(y);
    }));
    // One turn per 32 run-next dispatches: 625.
    EXPECT_GE(turns_during, 2 * kLoops / 34) << "the yielding thread starved";
    EXPECT_LE(turns_during, 2 * kLoops / 30) << "run-next gave way more often than its bound";
}

// fib(n) as a tree of threads, counting how many exist at once.
struct Tree {
    std::atomic<long> live{0}, peak{0};
};

struct Node {
    Tree *tree;
    long n;
};

void *fib(void *p) {
    auto *node = static_cast<Node *>(p);
    Tree *tree = node->tree;
    const long n = node->n;
    long live = tree->live.fetch_add(1) + 1;
    for (long seen = tree->peak.load(); live > seen && !tree->peak.compare_exchange_weak(seen, live);) {
    }
    long r = n;
    if (n >= 2) {
        Node a{tree, n - 1}, b{tree, n - 2};
        weft_thread_t ta, tb;
        void *ra = nullptr, *rb = nullptr;
        EXPECT_EQ(0, weft_thread_create(&ta, nullptr, fib, &a));
        EXPECT_EQ(0, weft_thread_create(&tb, nullptr, fib, &b));
        EXPECT_EQ(0, weft_thread_join(ta, &ra));
        EXPECT_EQ(0, weft_thread_join(tb, &rb));
        r = static_cast<long>(reinterpret_cast<intptr_t>(ra) + reinterpret_cast<intptr_t>(rb));
    }
    tree->live.fetch_sub(1);
    return reinterpret_cast<void *>(static_cast<intptr_t>(r));
}

long fib_tree(long n, Tree *tree) {
    Node root{tree, n};
    weft_thread_t t;
    void *r = nullptr;
    EXPECT_EQ(0, weft_thread_create(&t, nullptr, fib, &root));
    EXPECT_EQ(0, weft_thread_join(t, &r));
    return static_cast<long>(reinterpret_cast<intptr_t>(r));
}

// Depth-first: at most the tree's depth of threads run at once (each level:
// a parent parked in a join). Breadth-first (plain FIFO) has hundreds.
TEST(RunNext, AForkJoinTreeRunsDepthFirst) {
    SKIP_UNLESS_FIFO();
    constexpr long kN = 16; // 2,583 threads, fib 987
    Tree on, off;
    ASSERT_EQ(0, run_one(1, [&] { EXPECT_EQ(987, fib_tree(kN, &on)); }));
    ASSERT_EQ(0, run_one(-1, [&] { EXPECT_EQ(987, fib_tree(kN, &off)); }));
    EXPECT_LE(on.peak.load(), kN + 1);
    EXPECT_GT(off.peak.load(), 10 * kN) << "plain FIFO no longer runs the tree breadth-first: this test checks nothing";
}

// Several vprocs, work stealing on: the tree is split between them (the
// oldest run-next threads, the roots of the largest subtrees, are given
// away) and still gives the right sum. Live threads stay well below plain
// FIFO's: each given root's subtree runs depth-first (the fairness bound
// interleaves the roots a vproc was given, so up to roots × depth live).
TEST(RunNext, AForkJoinTreeIsSharedAcrossVprocs) {
    SKIP_UNLESS_FIFO();
    constexpr long kN = scaled(20, 17); // 21,891 threads, fib 6,765 (ASan: 5,167, fib 1,597)
    constexpr long kFib = kN == 20 ? 6765 : 1597;
    auto tree_on_two = [&](int run_next, Tree *tree) {
        weft_config cfg;
        weft_config_init(&cfg);
        cfg.vprocs = 2;
        cfg.run_next = run_next;
        cfg.steal_after_us = 50; // steal within a tree that lasts milliseconds
        std::function<int()> main = [&] { return fib_tree(kN, tree) == kFib ? 0 : 1; };
        return weft_main_config(&cfg, detail::main_trampoline, &main);
    };
    Tree on, off;
    EXPECT_EQ(0, tree_on_two(1, &on));
    EXPECT_EQ(0, tree_on_two(-1, &off));
    EXPECT_LT(4 * on.peak.load(), off.peak.load()) << "run-next " << on.peak.load() << ", plain FIFO " << off.peak.load();
}

TEST(RunNext, BadSettingsReturnEinval) {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.run_next = 2;
    auto noop = [](void *) { return 0; };
    EXPECT_EQ(-1, weft_main_config(&cfg, noop, nullptr));
    EXPECT_EQ(EINVAL, errno);
    weft_config_init(&cfg);
    for (const char *v : {"2", "yes", "-1", "00"}) {
        ScopedEnv env("WEFT_RUN_NEXT", v);
        EXPECT_EQ(-1, weft_main_config(&cfg, noop, nullptr)) << "WEFT_RUN_NEXT=" << v;
        EXPECT_EQ(EINVAL, errno) << "WEFT_RUN_NEXT=" << v;
    }
}

} // namespace
