// StagedServer (include/weft/stage.hpp): the closure protocol, the stage
// kinds, the scheduler's order (LIFO then queue, wavefront, thresholds,
// feedback) and the profile's counts.
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.hpp"
#include "weft/stage.hpp"

namespace ws = weft::stage;
using ws::Step;

namespace {

class Stage : public ws::Stage {
public:
    using ws::Stage::Stage;
};

// ---- the closure protocol ----------------------------------------------

struct Fib : ws::Op<long> {
    Fib(Stage &s, int n) : st(s), n(n) {}
    Stage &st;
    int n;
    Fib *a = nullptr, *b = nullptr;
    Step run() override {
        if (n < 2) return done(n);
        a = &invoke<Fib>(st, st, n - 1);
        b = &invoke<Fib>(st, st, n - 2);
        return wait_children(&Fib::sum);
    }
    Step sum() { return done(a->result + b->result); }
};

class StageOnVprocs : public wt::OnVprocs {};

TEST_P(StageOnVprocs, ChildrenResultsAndContinuationsComputeFibonacci) {
    ASSERT_EQ(0, run([] {
        Stage s("fib");
        ws::Scheduler sched({&s});
        sched.start();
        auto f = sched.call(s, std::make_unique<Fib>(s, 18));
        EXPECT_EQ(2584, f->result);
        EXPECT_FALSE(f->failed());
        sched.stop();
        // every closure of the tree ran once and completed: 2 * fib(19) - 1 of them
        uint64_t completed = 0;
        for (int vp = 0; vp < sched.vprocs(); ++vp) completed += s.profile(vp).completed;
        EXPECT_EQ(2u * 4181u - 1u, completed);
    }));
}

struct Thrower : ws::Op<int> {
    Step run() override { throw std::runtime_error("child broke"); }
};

struct Catcher : ws::Op<std::string> {
    Catcher(Stage &s) : st(s) {}
    Stage &st;
    Thrower *t = nullptr;
    Step run() override {
        t = &invoke<Thrower>(st);
        return wait_children(&Catcher::after);
    }
    Step after() {
        if (!t->failed()) return done("no error");
        try {
            t->rethrow_if_failed();
        } catch (const std::runtime_error &e) {
            return done(e.what());
        }
        return done("wrong error");
    }
};

struct ThrowsInContinuation : ws::Op<int> {
    ThrowsInContinuation(Stage &s) : st(s) {}
    Stage &st;
    Step run() override {
        invoke<Fib>(st, st, 3);
        return wait_children(&ThrowsInContinuation::after);
    }
    Step after() { throw std::logic_error("continuation broke"); }
};

TEST_P(StageOnVprocs, AChildsExceptionReachesItsParentAndAParentsItsCaller) {
    ASSERT_EQ(0, run([] {
        Stage s("errors");
        ws::Scheduler sched({&s});
        sched.start();
        auto c = sched.call(s, std::make_unique<Catcher>(s));
        EXPECT_FALSE(c->failed());
        EXPECT_EQ("child broke", c->result);
        auto t = sched.call(s, std::make_unique<ThrowsInContinuation>(s));
        EXPECT_TRUE(t->failed());
        EXPECT_THROW(t->rethrow_if_failed(), std::logic_error);
    }));
}

// Waits to be resumed, by a thread later or by itself before it returns.
struct Resumable : ws::Op<int> {
    explicit Resumable(bool early) : early(early) {}
    bool early;
    int steps = 0;
    Step run() override {
        ++steps;
        if (early) resume(); // before it says it waits: must not be lost
        return wait_resume(&Resumable::again);
    }
    Step again() { return done(++steps); }
};

TEST_P(StageOnVprocs, WaitResumeResumesOnceWhetherResumedBeforeOrAfterItWaits) {
    ASSERT_EQ(0, run([this] {
        Stage s("resume");
        ws::Scheduler sched({&s});
        sched.start();
        auto early = sched.call(s, std::make_unique<Resumable>(true));
        EXPECT_EQ(2, early->result);
        // Resumed from a thread on another vproc, 20 ms later.
        std::atomic<Resumable *> op{nullptr};
        weft_thread_t t;
        ASSERT_EQ(0, wt::spawn_on(&t, other(), [&]() -> void * {
            wt::wait_until([&] { return op.load() != nullptr; });
            weft_sleep_ns(20 * wt::kMs);
            op.load()->resume();
            return nullptr;
        }));
        auto late = std::make_unique<Resumable>(false);
        op = late.get();
        uint64_t t0 = weft_now_ns();
        late = sched.call(s, std::move(late));
        EXPECT_GE(weft_now_ns() - t0, 15 * wt::kMs);
        EXPECT_EQ(2, late->result);
        wt::join(t);
    }));
}

// blocking(): a pipe read on a weft thread, the closure resumed after it.
struct ReadsAPipe : ws::Op<int> {
    explicit ReadsAPipe(int fd) : fd(fd) {}
    int fd;
    char byte = 0;
    ssize_t got = -1;
    Step run() override {
        return blocking([this] { got = weft_read(fd, &byte, 1); }, &ReadsAPipe::after);
    }
    Step after() { return done(got == 1 ? byte : -1); }
};

TEST_P(StageOnVprocs, BlockingWorkRunsOnAWeftThreadAndResumesTheClosure) {
    ASSERT_EQ(0, run([] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        Stage s("io");
        ws::Scheduler sched({&s});
        sched.start();
        weft_thread_t w;
        ASSERT_EQ(0, wt::spawn(&w, [&]() -> void * {
            weft_sleep_ns(10 * wt::kMs);
            EXPECT_EQ(1, weft_write(p[1], "z", 1));
            return nullptr;
        }));
        auto r = sched.call(s, std::make_unique<ReadsAPipe>(p[0]));
        EXPECT_EQ('z', r->result);
        wt::join(w);
        weft_close(p[0]);
        weft_close(p[1]);
    }));
}

// The same operations as coroutines (the implicit-continuation style).
struct CoFib : ws::CoOp<long> {
    CoFib(Stage &s, int n) : st(s), n(n) {}
    Stage &st;
    int n;
    ws::Co body() override {
        if (n < 2) {
            result = n;
            co_return;
        }
        auto &a = invoke<CoFib>(st, st, n - 1);
        auto &b = invoke<CoFib>(st, st, n - 2);
        co_await children();
        result = a.result + b.result;
    }
};

struct CoSteps : ws::CoOp<int> {
    explicit CoSteps(int fd) : fd(fd) {}
    int fd;
    ws::Co body() override {
        char c = 0;
        ssize_t got = -1;
        co_await blocking([&] { got = weft_read(fd, &c, 1); }); // frame locals live across it
        resume(); // resumed before it waits: not lost
        co_await resumed();
        if (got != 1) throw std::runtime_error("read failed");
        result = c;
    }
};

TEST_P(StageOnVprocs, CoroutineOperationsWaitForChildrenBlockingWorkAndResume) {
    ASSERT_EQ(0, run([] {
        Stage s("co");
        ws::Scheduler sched({&s});
        sched.start();
        auto f = sched.call(s, std::make_unique<CoFib>(s, 18));
        EXPECT_EQ(2584, f->result);
        int p[2];
        ASSERT_EQ(0, pipe(p));
        ASSERT_EQ(1, weft_write(p[1], "q", 1));
        auto r = sched.call(s, std::make_unique<CoSteps>(p[0]));
        EXPECT_FALSE(r->failed());
        EXPECT_EQ('q', r->result);
        weft_close(p[1]); // now the read sees EOF: the body throws
        auto e = sched.call(s, std::make_unique<CoSteps>(p[0]));
        EXPECT_TRUE(e->failed());
        EXPECT_THROW(e->rethrow_if_failed(), std::runtime_error);
        weft_close(p[0]);
    }));
}

// ---- stage kinds -------------------------------------------------------------

std::atomic<int> g_inside{0}, g_most{0};

struct Critical : ws::Op<int> {
    Step run() override {
        int now = g_inside.fetch_add(1) + 1;
        int m = g_most.load();
        while (now > m && !g_most.compare_exchange_weak(m, now)) {
        }
        uint64_t end = weft_now_ns() + 2 * wt::kUs; // some time inside, for another vproc to come in if it could
        while (weft_now_ns() < end) {
        }
        g_inside.fetch_sub(1);
        return done(0);
    }
};

// Many operations from threads on every vproc at once.
void flood(ws::Scheduler &sched, Stage &s, int vprocs, int per_thread) {
    std::vector<weft_thread_t> ts(static_cast<size_t>(vprocs) * 2);
    for (size_t i = 0; i < ts.size(); ++i)
        ASSERT_EQ(0, wt::spawn_on(&ts[i], static_cast<int>(i) % vprocs, [&]() -> void * {
            for (int k = 0; k < per_thread; ++k) {
                s.invoke<Critical>();
                if (k % 16 == 0) weft_yield();
            }
            return nullptr;
        }));
    for (auto t : ts) wt::join(t);
    (void)sched;
}

TEST_P(StageOnVprocs, AnExclusiveStageNeverRunsTwoOperationsAtOnce) {
    ASSERT_EQ(0, run([this] {
        g_inside = 0;
        g_most = 0;
        Stage s("exclusive", {.kind = ws::Kind::kExclusive});
        ws::Scheduler sched({&s});
        sched.start();
        flood(sched, s, vprocs(), static_cast<int>(wt::scaled(3000, 500)));
        sched.stop();
        EXPECT_EQ(1, g_most.load());
        uint64_t completed = 0;
        for (int vp = 0; vp < vprocs(); ++vp) completed += s.profile(vp).completed;
        EXPECT_EQ(static_cast<uint64_t>(vprocs()) * 2 * static_cast<uint64_t>(wt::scaled(3000, 500)), completed);
    }));
}

struct KeyedCount : ws::Op<int> {
    KeyedCount(ws::Privatized<long> &counts, uint64_t k, std::atomic<int> &wrong) : counts(counts), wrong(wrong) {
        key = k;
    }
    ws::Privatized<long> &counts;
    std::atomic<int> &wrong;
    Step run() override {
        if (static_cast<uint64_t>(weft_vproc_self()) != key % static_cast<uint64_t>(weft_vproc_count())) ++wrong;
        ++counts.local(); // this vproc's own: no lock
        return done(0);
    }
};

TEST_P(StageOnVprocs, APartitionedStageRunsEachKeyOnTheVprocThatOwnsIt) {
    ASSERT_EQ(0, run([this] {
        Stage s("partitioned", {.kind = ws::Kind::kPartitioned});
        ws::Scheduler sched({&s});
        ws::Privatized<long> counts;
        std::atomic<int> wrong{0};
        sched.start();
        weft_thread_t t;
        ASSERT_EQ(0, wt::spawn_on(&t, other(), [&]() -> void * {
            for (uint64_t k = 0; k < 1000; ++k) s.invoke<KeyedCount>(counts, k, wrong);
            return nullptr;
        }));
        wt::join(t);
        sched.stop();
        EXPECT_EQ(0, wrong.load());
        for (int vp = 0; vp < vprocs(); ++vp) {
            long want = 0;
            for (uint64_t k = 0; k < 1000; ++k) want += k % static_cast<uint64_t>(vprocs()) == static_cast<uint64_t>(vp);
            EXPECT_EQ(want, counts[static_cast<size_t>(vp)]) << "vproc " << vp;
        }
    }));
}

WEFT_ON_VPROCS(StageOnVprocs);

// ---- the scheduler's order ----------------------------------------------------

struct Logged : ws::Op<int> {
    Logged(std::vector<int> &log, int id) : log(log), id(id) {}
    std::vector<int> &log;
    int id;
    Step run() override {
        log.push_back(id);
        return done(id);
    }
};

// An operation that invokes three more on its own stage (from inside a
// stage: they go on the stack).
struct Spawner : ws::Op<int> {
    Spawner(std::vector<int> &log, Stage &s) : log(log), s(s) {}
    std::vector<int> &log;
    Stage &s;
    Step run() override {
        for (int id = 1; id <= 3; ++id) s.invoke<Logged>(log, id);
        return done(0);
    }
};

// The order a stage runs: 0 and a spawner from a thread on vproc 0, 4 and 5
// placed there from vproc 1, all before the runners start.
std::vector<int> run_order_of(ws::StageOptions opt) {
    std::vector<int> log;
    EXPECT_EQ(0, wt::run(2, [&] {
        Stage s("order", opt);
        ws::Scheduler sched({&s});
        s.invoke<Logged>(log, 0); // from a thread: the queue (a request from outside)
        s.invoke<Spawner>(log, s);
        weft_thread_t t;
        ASSERT_EQ(0, wt::spawn_on(&t, 1, [&]() -> void * {
            s.invoke_on<Logged>(0, log, 4); // from vproc 1: the queue too, after those
            s.invoke_on<Logged>(0, log, 5);
            return nullptr;
        }));
        wt::join(t);
        sched.start();
        sched.stop();
    }));
    return log;
}

TEST(StageOrder, OperationsInvokedByOperationsRunNewestFirstThenTheQueueInOrder) {
    // 0, then the spawner, whose three go on the stack and join the cohort
    // at once, newest first, before the rest of the queue.
    EXPECT_EQ((std::vector<int>{0, 3, 2, 1, 4, 5}), run_order_of({}));
}

TEST(StageOrder, AStageWithoutLifoRunsEverythingInArrivalOrder) {
    EXPECT_EQ((std::vector<int>{0, 4, 5, 1, 2, 3}), run_order_of({.lifo = false}));
}

struct Visits {
    std::vector<int> seq;
    static void hook(void *arg, int stage, int) { static_cast<Visits *>(arg)->seq.push_back(stage); }
};

TEST(StageOrder, RunnersSweepTheStagesForwardThenBackward) {
    ASSERT_EQ(0, wt::run(1, [] {
        Stage a("a", {.max_cohort = 1}), b("b", {.max_cohort = 1}), c("c", {.max_cohort = 1});
        ws::Scheduler sched({&a, &b, &c});
        Visits v;
        sched.on_visit = Visits::hook;
        sched.on_visit_arg = &v;
        std::vector<int> log;
        for (Stage *s : {&a, &b, &c})
            for (int k = 0; k < 3; ++k) s->invoke<Logged>(log, k);
        sched.start();
        sched.stop();
        EXPECT_EQ((std::vector<int>{0, 1, 2, 2, 1, 0, 0, 1, 2}), v.seq);
    }));
}

// Each operation of `from` sends one to `to`, then stays busy for `busy_ns`.
struct Feeds : ws::Op<int> {
    Feeds(std::vector<int> &log, Stage &to, int id, uint64_t busy_ns = 0) : log(log), to(to), id(id), busy_ns(busy_ns) {}
    std::vector<int> &log;
    Stage &to;
    int id;
    uint64_t busy_ns;
    Step run() override {
        log.push_back(id);
        to.invoke<Logged>(log, 100 + id);
        for (uint64_t end = weft_now_ns() + busy_ns; weft_now_ns() < end;) {
        }
        return done(0);
    }
};

TEST(StageOrder, AStagePastItsQueueThresholdInterruptsTheRunningOne) {
    ASSERT_EQ(0, wt::run(1, [] {
        Stage a("a"), b("b", {.threshold_queue = 3});
        ws::Scheduler sched({&a, &b});
        std::vector<int> log;
        for (int k = 0; k < 10; ++k) a.invoke<Feeds>(log, b, k); // from a thread: in order
        sched.start();
        sched.stop();
        // b runs whenever three of its operations wait, newest first, in a's visit
        EXPECT_EQ((std::vector<int>{0, 1, 2, 102, 101, 100, 3, 4, 5, 105, 104, 103, 6, 7, 8, 108, 107, 106, 9, 109}),
                  log);
    }));
}

TEST(StageOrder, AStageWaitingLongerThanItsIntervalInterruptsTheRunningOne) {
    ASSERT_EQ(0, wt::run(1, [] {
        Stage a("a"), b("b", {.threshold_interval_ns = 5 * wt::kMs});
        ws::Scheduler sched({&a, &b});
        std::vector<int> log;
        for (int k = 0; k < 20; ++k) a.invoke<Feeds>(log, b, k, 2 * wt::kMs); // long operations
        sched.start();
        sched.stop();
        // Without the interval b would run after all 20 of a's (40 ms); with
        // it, b's first operation runs within a few of a's.
        size_t first_b = 0;
        while (first_b < log.size() && log[first_b] < 100) ++first_b;
        EXPECT_LT(first_b, 10u) << "b first ran after " << first_b << " of a's operations";
        EXPECT_EQ(40u, log.size());
    }));
}

struct AsksForB : ws::Op<int> {
    AsksForB(std::vector<int> &log, Stage &b, int id) : log(log), b(b), id(id) {}
    std::vector<int> &log;
    Stage &b;
    int id;
    Step run() override {
        log.push_back(id);
        if (id == 1) b.request_processor();
        return done(0);
    }
};

TEST(StageOrder, RequestProcessorStopsTheRunningStageAfterItsOperation) {
    ASSERT_EQ(0, wt::run(1, [] {
        Stage a("a"), b("b"), c("c");
        ws::Scheduler sched({&a, &c, &b});
        std::vector<int> log;
        for (int k = 0; k < 5; ++k) a.invoke<AsksForB>(log, b, k);
        b.invoke<Logged>(log, 100);
        c.invoke<Logged>(log, 200);
        sched.start();
        sched.stop();
        // a stops after its operation 1 asked for b; b runs before c (which
        // comes first in the order) and before a's rest.
        EXPECT_EQ((std::vector<int>{0, 1, 100, 200, 2, 3, 4}), log);
    }));
}

// A stage that gathers its cohort, as weft-staged's I/O aggregator does:
// each operation waits; cohort_end sees the whole cohort and resumes it.
struct Gatherer : Stage {
    explicit Gatherer(uint32_t max_cohort) : Stage("gather", {.max_cohort = max_cohort}) {}
    std::vector<ws::Closure *> pending;
    std::vector<size_t> cohorts; // the size of each cohort, as it ended
    void cohort_end(int) override {
        cohorts.push_back(pending.size());
        for (ws::Closure *c : pending) c->resume();
        pending.clear();
    }
};

struct Gathered : ws::Op<int> {
    explicit Gathered(Gatherer &g) : g(g) {}
    Gatherer &g;
    Step run() override {
        g.pending.push_back(this);
        return wait_resume(&Gathered::resumed);
    }
    Step resumed() { return done(1); }
};

TEST(StageOrder, CohortEndSeesEachCohortWholeAndMayResumeIt) {
    ASSERT_EQ(0, wt::run(1, [] {
        Gatherer g(4);
        ws::Scheduler sched({&g});
        for (int k = 0; k < 10; ++k) g.invoke<Gathered>(g);
        sched.start();
        sched.stop(); // returns only once every operation is done: all were resumed
        // Cohorts of at most four; the resumed continuations form cohorts of
        // their own, which gather nothing.
        std::vector<size_t> gathered;
        for (size_t n : g.cohorts)
            if (n) gathered.push_back(n);
        EXPECT_EQ((std::vector<size_t>{4, 4, 2}), gathered);
        EXPECT_EQ(0u, g.pending.size());
    }));
}

// ---- the profile ----------------------------------------------------------------

struct Parent : ws::Op<int> {
    explicit Parent(Stage &t) : t(t) {}
    Stage &t;
    Step run() override {
        invoke<Fib>(t, t, 1);
        invoke<Fib>(t, t, 0);
        return wait_children(&Parent::after);
    }
    Step after() { return done(1); }
};

TEST(StageProfile, CountsAndArcsAreExactOnAScriptedWorkload) {
    ASSERT_EQ(0, wt::run(1, [] {
        Stage s("parents"), t("children");
        ws::Scheduler sched({&s, &t});
        for (int k = 0; k < 10; ++k) s.invoke<Parent>(t);
        sched.start();
        sched.stop();
        const ws::StageProfile &ps = s.profile(0), &pt = t.profile(0);
        EXPECT_EQ(10u, ps.started);
        EXPECT_EQ(10u, ps.restarted);
        EXPECT_EQ(10u, ps.completed);
        EXPECT_EQ(20u, pt.started);
        EXPECT_EQ(0u, pt.restarted);
        EXPECT_EQ(20u, pt.completed);
        EXPECT_EQ(20u, sched.arc(0, 0, 1, 0)); // parents -> children
        EXPECT_EQ(10u, sched.arc(1, 0, 0, 0)); // the last child restarts its parent
        EXPECT_EQ(0u, sched.arc(0, 0, 0, 0));
        std::string j = sched.profile_json();
        EXPECT_NE(std::string::npos, j.find("\"name\":\"parents\"")) << j;
        EXPECT_NE(std::string::npos, j.find("{\"from\":[0,0],\"to\":[1,0],\"operations\":20}")) << j;
        std::string txt = sched.profile_text();
        EXPECT_NE(std::string::npos, txt.find("arc parents/0 -> children/0: 20")) << txt;
    }));
}

// ---- the cohort policy for plain threads ----------------------------------------

struct Sites {
    weft_sem_t a = WEFT_SEM_INITIALIZER(0), b = WEFT_SEM_INITIALIZER(0);
    std::string log;
};
[[gnu::noinline]] void wait_at_a(Sites *s) {
    weft_sem_wait(&s->a);
    s->log += 'A';
}
[[gnu::noinline]] void wait_at_b(Sites *s) {
    weft_sem_wait(&s->b);
    s->log += 'B';
}

// Three threads blocked at one call site and three at another, made ready
// alternately: the order they then run in.
std::string run_order(const char *policy) {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.policy = policy;
    Sites sites;
    int r = weft_main_config(
        &cfg,
        [](void *p) -> int {
            auto *s = static_cast<Sites *>(p);
            weft_thread_t t[6];
            for (int i = 0; i < 6; ++i)
                EXPECT_EQ(0, wt::spawn(&t[i], [s, i]() -> void * {
                    if (i % 2) wait_at_b(s);
                    else wait_at_a(s);
                    return nullptr;
                }));
            EXPECT_TRUE(wt::wait_parks(WEFT_PARK_SEM, 6));
            for (int i = 0; i < 3; ++i) {
                weft_sem_post(&s->a);
                weft_sem_post(&s->b);
            }
            for (auto th : t) wt::join(th);
            return 0;
        },
        &sites);
    EXPECT_EQ(0, r);
    return sites.log;
}

TEST(CohortPolicy, ThreadsReadiedAtTheSameBlockingSiteRunTogether) {
    EXPECT_EQ("ABABAB", run_order("fifo"));
    EXPECT_EQ("AAABBB", run_order("cohort"));
}

TEST(StageErrors, AStageInNoSchedulerIsRefused) {
    ASSERT_EQ(0, wt::run(1, [] {
        Stage lone("lone");
        std::vector<int> log;
        EXPECT_THROW(lone.invoke<Logged>(log, 1), std::logic_error);
    }));
}

} // namespace
