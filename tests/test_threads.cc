// Threads: create, join, detach, attributes, identity, exit, yield order,
// errno, and weft_main itself (result, shutdown, configuration).
#include <algorithm>
#include <atomic>
#include <sched.h>

#include <cerrno>
#include <cfenv>
#include <xmmintrin.h>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class ThreadTest : public OnVprocs {};
WEFT_ON_VPROCS(ThreadTest);

// ---------------------------------------------------------------- create / join

TEST_P(ThreadTest, JoinReturnsTheThreadsResult) {
    std::vector<uintptr_t> got;
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(12);
        for (int i = 0; i < 12; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [i] { return ptr(1000 + i); }));
        for (auto &t : ts) got.push_back(num(join(t)));
    }));
    ASSERT_EQ(12u, got.size());
    for (int i = 0; i < 12; ++i) EXPECT_EQ(uintptr_t(1000 + i), got[i]);
}

TEST_P(ThreadTest, JoinWithNullResultPointerSucceeds) {
    int ran = 0;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] { ran = 1; return ptr(7); }));
        EXPECT_EQ(0, weft_thread_join(t, nullptr));
    }));
    EXPECT_EQ(1, ran);
}

TEST_P(ThreadTest, CreateWithNullFunctionReturnsEinval) {
    int e = -1, e2 = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        e = weft_thread_create(&t, nullptr, nullptr, nullptr);
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.detached = 1;
        e2 = weft_thread_create(nullptr, &a, nullptr, nullptr);
    }));
    EXPECT_EQ(EINVAL, e);
    EXPECT_EQ(EINVAL, e2);
}

TEST_P(ThreadTest, CreateJoinableThreadWithoutHandleReturnsEinval) {
    int e = -1;
    ASSERT_EQ(0, run([&] { e = weft_thread_create(nullptr, nullptr, [](void *) -> void * { return nullptr; }, nullptr); }));
    EXPECT_EQ(EINVAL, e);
}

TEST_P(ThreadTest, JoinDetachedThreadReturnsEinval) {
    int by_attr = -1, by_call = -1, detach_rc = -1;
    weft_sem_t gate = WEFT_SEM_INITIALIZER(0); // outlives main: the threads are detached
    ASSERT_EQ(0, run([&] {
        // Both threads stay alive (blocked on gate) while we try to join them.
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.detached = 1;
        a.home_vproc = other();
        weft_thread_t t1, t2;
        ASSERT_EQ(0, spawn(&t1, [&] { weft_sem_wait(&gate); return nullptr; }, &a));
        ASSERT_EQ(0, spawn_on(&t2, other(), [&] { weft_sem_wait(&gate); return nullptr; }));
        detach_rc = weft_thread_detach(t2);
        by_attr = weft_thread_join(t1, nullptr);
        by_call = weft_thread_join(t2, nullptr);
        weft_sem_post(&gate);
        weft_sem_post(&gate);
    }));
    EXPECT_EQ(0, detach_rc);
    EXPECT_EQ(EINVAL, by_attr);
    EXPECT_EQ(EINVAL, by_call);
}

TEST_P(ThreadTest, JoinAlreadyJoinedThreadReturnsEinval) {
    int first = -1, second = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [] { return nullptr; }));
        first = weft_thread_join(t, nullptr);
        second = weft_thread_join(t, nullptr);
    }));
    EXPECT_EQ(0, first);
    EXPECT_EQ(EINVAL, second);
}

TEST_P(ThreadTest, SecondJoinerOfTheSameThreadReturnsEinval) {
    int first = -1, second = -1;
    ASSERT_EQ(0, run([&] {
        weft_sem_t gate = WEFT_SEM_INITIALIZER(0);
        weft_thread_t target, joiner;
        ASSERT_EQ(0, spawn_on(&target, home(1), [&] { weft_sem_wait(&gate); return ptr(5); }));
        const uint64_t base = parks(WEFT_PARK_JOIN);
        ASSERT_EQ(0, spawn_on(&joiner, home(2), [&] {
            void *r = nullptr;
            first = weft_thread_join(target, &r);
            return r;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_JOIN, base + 1)); // the first joiner waits
        second = weft_thread_join(target, nullptr);
        weft_sem_post(&gate);
        EXPECT_EQ(ptr(5), join(joiner));
    }));
    EXPECT_EQ(0, first);
    EXPECT_EQ(EINVAL, second);
}

TEST_P(ThreadTest, StaleHandleIsDetectedByEveryCall) {
    int join_rc = -1, detach_rc = -1, getname_rc = -1, setname_rc = -1;
    uint64_t id = 1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [] { return nullptr; }));
        ASSERT_EQ(0, weft_thread_join(t, nullptr));
        // The stack is reused by the next thread: the handle must still be stale.
        weft_thread_t u;
        ASSERT_EQ(0, spawn_on(&u, other(), [] { return nullptr; }));
        char buf[32];
        join_rc = weft_thread_join(t, nullptr);
        detach_rc = weft_thread_detach(t);
        getname_rc = weft_thread_getname(t, buf, sizeof buf);
        setname_rc = weft_thread_setname(t, "x");
        id = weft_thread_id(t);
        join(u);
    }));
    EXPECT_EQ(EINVAL, join_rc);
    EXPECT_EQ(EINVAL, detach_rc);
    EXPECT_EQ(EINVAL, getname_rc);
    EXPECT_EQ(EINVAL, setname_rc);
    EXPECT_EQ(0u, id);
}

TEST_P(ThreadTest, JoinOfFinishedDetachedThreadReturnsEinval) {
    int rc = -1;
    ASSERT_EQ(0, run([&] {
        std::atomic<bool> done{false};
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.detached = 1;
        a.home_vproc = other();
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [&] { done = true; return nullptr; }, &a));
        ASSERT_TRUE(wait_until([&] { return done.load(); }));
        weft_sleep_ns(2 * kMs); // let it be reaped
        rc = weft_thread_join(t, nullptr);
    }));
    EXPECT_EQ(EINVAL, rc);
}

TEST_P(ThreadTest, JoinOfForgedOrNullHandleReturnsEinval) {
    int forged = -1, null = -1, forged_detach = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        weft_sem_t gate;
        weft_sem_init(&gate, 0);
        ASSERT_EQ(0, spawn_on(&t, other(), [&] { weft_sem_wait(&gate); return nullptr; }));
        weft_thread_t wrong_id{t._tcb, t._id + 1000003};
        forged = weft_thread_join(wrong_id, nullptr);
        forged_detach = weft_thread_detach(wrong_id);
        null = weft_thread_join(weft_thread_t{nullptr, 0}, nullptr);
        weft_sem_post(&gate);
        join(t);
    }));
    EXPECT_EQ(EINVAL, forged);
    EXPECT_EQ(EINVAL, forged_detach);
    EXPECT_EQ(EINVAL, null);
}

TEST_P(ThreadTest, JoinSelfReturnsEdeadlk) {
    int from_main = -1, from_thread = -1;
    ASSERT_EQ(0, run([&] {
        from_main = weft_thread_join(weft_thread_self(), nullptr);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            from_thread = weft_thread_join(weft_thread_self(), nullptr);
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_EQ(EDEADLK, from_main);
    EXPECT_EQ(EDEADLK, from_thread);
}

TEST_P(ThreadTest, DetachTwiceReturnsEinval) {
    int first = -1, second = -1;
    weft_sem_t gate = WEFT_SEM_INITIALIZER(0); // outlives main: the thread is detached
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] { weft_sem_wait(&gate); return nullptr; }));
        first = weft_thread_detach(t);
        second = weft_thread_detach(t);
        weft_sem_post(&gate);
    }));
    EXPECT_EQ(0, first);
    EXPECT_EQ(EINVAL, second);
}

TEST_P(ThreadTest, DetachOfFinishedThreadSucceedsAndMakesHandleStale) {
    int detach_rc = -1, join_rc = -1;
    ASSERT_EQ(0, run([&] {
        std::atomic<bool> done{false};
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] { done = true; return nullptr; }));
        ASSERT_TRUE(wait_until([&] { return done.load(); }));
        weft_sleep_ns(2 * kMs); // finished and reaped, not yet joined
        detach_rc = weft_thread_detach(t);
        join_rc = weft_thread_join(t, nullptr);
    }));
    EXPECT_EQ(0, detach_rc);
    EXPECT_EQ(EINVAL, join_rc);
}

TEST_P(ThreadTest, DetachJoinedThreadReturnsEinval) {
    int rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [] { return nullptr; }));
        join(t);
        rc = weft_thread_detach(t);
    }));
    EXPECT_EQ(EINVAL, rc);
}

// ---------------------------------------------------------------- attributes

TEST_P(ThreadTest, AttrNameIsReportedByGetname) {
    std::string inside, outside;
    ASSERT_EQ(0, run([&] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.home_vproc = other();
        char given[] = "worker-7";
        a.name = given;
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [&] {
            char buf[32];
            EXPECT_EQ(0, weft_thread_getname(weft_thread_self(), buf, sizeof buf));
            inside = buf;
            return nullptr;
        }, &a));
        std::strcpy(given, "changed!"); // the name was copied at create
        char buf[32];
        EXPECT_EQ(0, weft_thread_getname(t, buf, sizeof buf));
        outside = buf;
        join(t);
    }));
    EXPECT_EQ("worker-7", inside);
    EXPECT_EQ("worker-7", outside);
}

TEST_P(ThreadTest, DefaultNameIsThreadDashId) {
    std::string name, expected;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        weft_sem_t gate;
        weft_sem_init(&gate, 0);
        ASSERT_EQ(0, spawn_on(&t, other(), [&] { weft_sem_wait(&gate); return nullptr; }));
        char buf[32];
        EXPECT_EQ(0, weft_thread_getname(t, buf, sizeof buf));
        name = buf;
        expected = "thread-" + std::to_string(weft_thread_id(t));
        weft_sem_post(&gate);
        join(t);
    }));
    EXPECT_EQ(expected, name);
}

TEST_P(ThreadTest, MainThreadIsNamedMain) {
    std::string name;
    ASSERT_EQ(0, run([&] {
        char buf[32];
        EXPECT_EQ(0, weft_thread_getname(weft_thread_self(), buf, sizeof buf));
        name = buf;
    }));
    EXPECT_EQ("main", name);
}

TEST_P(ThreadTest, SetnameChangesTheName) {
    std::string seen_by_thread;
    int null_rc = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        std::atomic<bool> renamed{false};
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            wait_until([&] { return renamed.load(); });
            char buf[32];
            weft_thread_getname(weft_thread_self(), buf, sizeof buf);
            seen_by_thread = buf;
            return nullptr;
        }));
        EXPECT_EQ(0, weft_thread_setname(t, "renamed"));
        null_rc = weft_thread_setname(t, nullptr);
        renamed = true;
        join(t);
    }));
    EXPECT_EQ("renamed", seen_by_thread);
    EXPECT_EQ(EINVAL, null_rc);
}

TEST_P(ThreadTest, LongNameIsTruncatedTo31Bytes) {
    std::string name;
    const std::string longname(40, 'n');
    ASSERT_EQ(0, run([&] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.name = longname.c_str();
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [] { return nullptr; }, &a));
        char buf[64];
        EXPECT_EQ(0, weft_thread_getname(t, buf, sizeof buf));
        name = buf;
        join(t);
    }));
    EXPECT_EQ(std::string(31, 'n'), name);
}

TEST_P(ThreadTest, GetnameTruncatesToTheBufferAndRejectsBadBuffers) {
    std::string small;
    int zero_len = -1, null_buf = -1;
    ASSERT_EQ(0, run([&] {
        char buf[4];
        std::memset(buf, 'x', sizeof buf);
        EXPECT_EQ(0, weft_thread_getname(weft_thread_self(), buf, sizeof buf));
        small.assign(buf, strnlen(buf, sizeof buf));
        zero_len = weft_thread_getname(weft_thread_self(), buf, 0);
        null_buf = weft_thread_getname(weft_thread_self(), nullptr, 8);
    }));
    EXPECT_EQ("mai", small); // NUL-terminated within the buffer
    EXPECT_EQ(EINVAL, zero_len);
    EXPECT_EQ(EINVAL, null_buf);
}

// Recurse through ~kBytes of stack: the frames are touched, so a stack that
// is too small faults.
__attribute__((noinline)) uint64_t use_stack(size_t bytes) {
    volatile char buf[4096];
    for (size_t i = 0; i < sizeof buf; i += 64) buf[i] = static_cast<char>(i + bytes);
    uint64_t below = bytes > sizeof buf ? use_stack(bytes - sizeof buf) : 0;
    return below + static_cast<unsigned char>(buf[64]) + 1;
}

TEST_P(ThreadTest, AttrStackSizeOf256KiBCanBeUsedAlmostEntirely) {
    uint64_t depth = 0;
    ASSERT_EQ(0, run([&] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.stack_size = 256 * 1024;
        a.home_vproc = other();
        weft_thread_t t;
        // 208 KiB of frames; ASan frames are larger, so use a bit less there.
        const size_t bytes = scaled(208, 160) * 1024;
        ASSERT_EQ(0, spawn(&t, [bytes] { return ptr(use_stack(bytes) > 0 ? bytes : 0); }, &a));
        depth = num(join(t));
    }));
    EXPECT_EQ(uint64_t(scaled(208, 160) * 1024), depth);
}

TEST_P(ThreadTest, AttrStackSizeAboveOneGiBReturnsEinval) {
    int huge = -1, max = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.stack_size = (size_t{1} << 30) + 4096;
        weft_thread_t t;
        huge = weft_thread_create(&t, &a, [](void *) -> void * { return nullptr; }, nullptr);
        a.stack_size = SIZE_MAX;
        max = weft_thread_create(&t, &a, [](void *) -> void * { return nullptr; }, nullptr);
    }));
    EXPECT_EQ(EINVAL, huge);
    EXPECT_EQ(EINVAL, max);
}

TEST_P(ThreadTest, AttrHomeVprocRunsTheThreadOnThatVproc) {
    std::vector<int> seen(vprocs(), -2);
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(vprocs());
        for (int v = 0; v < vprocs(); ++v)
            ASSERT_EQ(0, spawn_on(&ts[v], v, [&seen, v] {
                int first = weft_vproc_self();
                weft_yield();
                weft_sleep_ns(100 * kUs);
                // Never migrates: same vproc after a yield and a sleep.
                seen[v] = weft_vproc_self() == first ? first : -1;
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }));
    for (int v = 0; v < vprocs(); ++v) EXPECT_EQ(v, seen[v]) << "thread homed on vproc " << v;
}

// (Without work stealing: with it, an idle vproc may take the child first.)
TEST_P(ThreadTest, DefaultHomeIsTheCreatorsVproc) {
    StealingOff no_stealing;
    int creator = -2, child = -3;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            creator = weft_vproc_self();
            weft_thread_t c;
            EXPECT_EQ(0, spawn(&c, [&] { child = weft_vproc_self(); return nullptr; }));
            join(c);
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_EQ(other(), creator);
    EXPECT_EQ(other(), child);
}

TEST_P(ThreadTest, AttrInvalidHomeVprocReturnsEinval) {
    std::vector<int> rcs;
    ASSERT_EQ(0, run([&] {
        for (int bad : {vprocs(), vprocs() + 1, 1000, -2, -100}) {
            weft_thread_attr_t a;
            weft_thread_attr_init(&a);
            a.home_vproc = bad;
            weft_thread_t t;
            rcs.push_back(weft_thread_create(&t, &a, [](void *) -> void * { return nullptr; }, nullptr));
        }
    }));
    ASSERT_EQ(5u, rcs.size());
    for (int rc : rcs) EXPECT_EQ(EINVAL, rc);
}

TEST_P(ThreadTest, AttrInitSetsDefaults) {
    weft_thread_attr_t a;
    std::memset(&a, 0x5a, sizeof a);
    weft_thread_attr_init(&a);
    EXPECT_EQ(0u, a.stack_size);
    EXPECT_EQ(nullptr, a.name);
    EXPECT_EQ(0, a.detached);
    EXPECT_EQ(-1, a.home_vproc);
}

// ---------------------------------------------------------------- identity

TEST_P(ThreadTest, SelfEqualAndIdIdentifyThreads) {
    weft_thread_t created[2], seen[2];
    uint64_t ids[2] = {0, 0}, self_ids[2] = {0, 0};
    weft_thread_t main_self{};
    uint64_t main_id = 0;
    ASSERT_EQ(0, run([&] {
        main_self = weft_thread_self();
        main_id = weft_thread_id(main_self);
        for (int i = 0; i < 2; ++i)
            ASSERT_EQ(0, spawn_on(&created[i], home(i + 1), [&, i] {
                seen[i] = weft_thread_self();
                self_ids[i] = weft_thread_id(seen[i]);
                weft_yield();
                return nullptr;
            }));
        for (int i = 0; i < 2; ++i) ids[i] = weft_thread_id(created[i]);
        for (int i = 0; i < 2; ++i) join(created[i]);
    }));
    EXPECT_NE(nullptr, main_self._tcb);
    EXPECT_NE(0u, main_id);
    for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(weft_thread_equal(created[i], seen[i])) << i;
        EXPECT_NE(0u, ids[i]);
        EXPECT_EQ(ids[i], self_ids[i]);
        EXPECT_EQ(ids[i], seen[i]._id);
        EXPECT_FALSE(weft_thread_equal(created[i], main_self));
    }
    EXPECT_NE(ids[0], ids[1]);
    EXPECT_NE(main_id, ids[0]);
    EXPECT_FALSE(weft_thread_equal(created[0], created[1]));
}

TEST_P(ThreadTest, IdsAreNeverReused) {
    std::vector<uint64_t> ids;
    ASSERT_EQ(0, run([&] {
        for (int i = 0; i < 3000; ++i) { // sequential: every stack (and TCB address) is reused
            weft_thread_t t;
            ASSERT_EQ(0, spawn_on(&t, home(i), [] { return ptr(weft_thread_id(weft_thread_self())); }));
            ids.push_back(num(join(t)));
        }
    }));
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids.end(), std::adjacent_find(ids.begin(), ids.end()));
    EXPECT_NE(0u, ids.front());
}

// ---------------------------------------------------------------- exit

weft_key_t g_exit_key;
std::atomic<uintptr_t> g_exit_dtor_value{0};
std::atomic<int> g_exit_dtor_calls{0};

void exit_key_dtor(void *v) {
    g_exit_dtor_value = num(v);
    ++g_exit_dtor_calls;
}

// Exits from the innermost of `depth` frames.
__attribute__((noinline)) void exit_from_deep(int depth, uintptr_t value) {
    volatile int frame = depth;
    if (frame < 0) return; // never: keeps the compiler from calling this endless
    if (frame > 0) exit_from_deep(depth - 1, value);
    weft_thread_exit(ptr(value));
}

void *exiting_thread(void *arg) {
    weft_setspecific(g_exit_key, ptr(0xfeed));
    exit_from_deep(5, num(arg));
    return ptr(1); // never reached
}

TEST_P(ThreadTest, ThreadExitReturnsTheValueToTheJoinerAndRunsKeyDestructors) {
    ASSERT_EQ(0, weft_key_create(&g_exit_key, exit_key_dtor));
    g_exit_dtor_value = 0;
    g_exit_dtor_calls = 0;
    uintptr_t got = 0;
    ASSERT_EQ(0, run([&] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.home_vproc = other();
        weft_thread_t t;
        ASSERT_EQ(0, weft_thread_create(&t, &a, exiting_thread, ptr(4242)));
        got = num(join(t));
    }));
    EXPECT_EQ(0, weft_key_delete(g_exit_key));
    EXPECT_EQ(4242u, got);
    EXPECT_EQ(1, g_exit_dtor_calls.load());
    EXPECT_EQ(0xfeedu, g_exit_dtor_value.load());
}

// ---------------------------------------------------------------- scheduling

// Three threads on one vproc yield in a loop: FIFO makes them strictly
// round-robin. A spawner on the vproc under test creates them, so they are
// queued in a known order before any of them runs.
TEST_P(ThreadTest, YieldingThreadsInterleaveRoundRobin) {
    if (policy_is("resource")) GTEST_SKIP() << "the resource-aware policy orders ready threads by its nodes' tickets";
    StealingOff no_stealing; // an idle vproc would take the new threads
    std::string seq;
    int vproc_seen = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t spawner;
        ASSERT_EQ(0, spawn_on(&spawner, other(), [&] {
            weft_thread_t ts[3];
            for (int i = 0; i < 3; ++i)
                EXPECT_EQ(0, spawn(&ts[i], [&, i] {
                    for (int r = 0; r < 5; ++r) {
                        seq += static_cast<char>('A' + i);
                        weft_yield();
                    }
                    vproc_seen = weft_vproc_self();
                    return nullptr;
                }));
            for (auto &t : ts) join(t);
            return nullptr;
        }));
        join(spawner);
    }));
    EXPECT_EQ("ABCABCABCABCABC", seq);
    EXPECT_EQ(other(), vproc_seen);
}

TEST_P(ThreadTest, HundredThousandThreadsAreCreatedAndJoined) {
    const long total = 100000, batch = 2000;
    uint64_t sum = 0, expected = 0;
    long joined = 0;
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(batch);
        for (long base = 0; base < total; base += batch) {
            for (long i = 0; i < batch; ++i)
                ASSERT_EQ(0, spawn_on(&ts[i], home(int(i)), [v = base + i] { return ptr(uintptr_t(v) * 3 + 1); }))
                    << "thread " << base + i;
            for (long i = 0; i < batch; ++i) {
                void *r = nullptr;
                ASSERT_EQ(0, weft_thread_join(ts[i], &r));
                EXPECT_EQ(uintptr_t(base + i) * 3 + 1, num(r));
                sum += num(r);
                ++joined;
            }
        }
    }));
    for (long v = 0; v < total; ++v) expected += uint64_t(v) * 3 + 1;
    EXPECT_EQ(total, joined);
    EXPECT_EQ(expected, sum);
}

// Each thread sets its own errno, then yields, sleeps and blocks; the value
// must survive every switch, whatever the other threads set meanwhile.
TEST_P(ThreadTest, ErrnoIsKeptPerThreadAcrossYieldsSleepsAndBlocking) {
    const int n = 12;
    std::atomic<int> mismatches{0};
    std::atomic<int> checks{0};
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                const int mine = 1000 + i;
                auto check = [&] {
                    ++checks;
                    if (errno != mine) ++mismatches;
                    errno = mine;
                };
                errno = mine;
                for (int r = 0; r < 200; ++r) {
                    weft_yield();
                    check();
                    if (r % 50 == 0) {
                        weft_sleep_ns(100 * kUs);
                        check();
                    }
                    weft_mutex_lock(&m); // contended: parks on the mutex
                    weft_yield();
                    weft_mutex_unlock(&m);
                    check();
                    errno = 0; // a different value in flight ...
                    errno = mine; // ... then ours again
                }
                return nullptr;
            }));
        errno = 77;
        for (auto &t : ts) join(t);
        if (errno != 77) ++mismatches;
    }));
    EXPECT_EQ(0, mismatches.load());
    EXPECT_EQ(n * (200 * 2 + 4), checks.load());
}

TEST_P(ThreadTest, NewThreadStartsWithErrnoZero) {
    int seen = -1;
    ASSERT_EQ(0, run([&] {
        errno = 99;
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [&] { seen = errno; return nullptr; }));
        join(t);
    }));
    EXPECT_EQ(0, seen);
}

// ---------------------------------------------------------------- floating-point state

// Rounding modes are control words: each thread keeps its own across every
// kind of switch, whatever the others set meanwhile (SSE and x87 both).
TEST_P(ThreadTest, RoundingModeIsKeptPerThreadAcrossSwitches) {
    const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    std::atomic<int> mismatches{0};
    ASSERT_EQ(0, run([&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        std::vector<weft_thread_t> ts(8);
        for (int i = 0; i < 8; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                const int mine = modes[i % 4];
                std::fesetround(mine);
                for (int r = 0; r < 100; ++r) {
                    weft_yield();
                    weft_mutex_lock(&m);
                    weft_yield();
                    weft_mutex_unlock(&m);
                    volatile double third = 1.0, three = 3.0; // SSE
                    volatile long double lthird = 1.0L, lthree = 3.0L; // x87
                    double q = third / three;
                    long double lq = lthird / lthree;
                    if (std::fegetround() != mine) ++mismatches;
                    // the division itself rounds our way, on both units
                    std::fesetround(FE_TONEAREST);
                    double nearest = third / three;
                    long double lnearest = lthird / lthree;
                    std::fesetround(mine);
                    bool up = mine == FE_UPWARD, down = mine == FE_DOWNWARD || mine == FE_TOWARDZERO;
                    if ((up && !(q >= nearest && lq >= lnearest)) || (down && !(q <= nearest && lq <= lnearest)))
                        ++mismatches;
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        if (std::fegetround() != FE_TONEAREST) ++mismatches;
    }));
    EXPECT_EQ(0, mismatches.load());
}

// SSE exception flags (MXCSR; weft switches them, not the x87 status word).
bool sse_inexact() { return (_mm_getcsr() & _MM_EXCEPT_INEXACT) != 0; }

// Exception flags are sticky status: a thread sees the flags it raised, and
// not the ones another thread raised while it was switched out. Returns
// how many checks saw the wrong flag.
int exception_flag_mismatches(int vprocs) {
    std::atomic<int> mismatches{0};
    EXPECT_EQ(0, run(vprocs, [&] {
        std::feclearexcept(FE_ALL_EXCEPT);
        std::vector<weft_thread_t> ts(6);
        for (int i = 0; i < 6; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], i % vprocs, [&, i] {
                std::feclearexcept(FE_ALL_EXCEPT);
                const bool raiser = i % 2 == 0;
                for (int r = 0; r < 100; ++r) {
                    if (raiser) {
                        volatile double one = 1.0, three = 3.0;
                        volatile double q = one / three; // inexact (kept: volatile)
                        (void)q;
                    }
                    weft_yield();
                    if (sse_inexact() != raiser) ++mismatches;
                }
                return nullptr;
            }));
        for (auto &th : ts) join(th);
    }));
    return mismatches.load();
}

TEST_P(ThreadTest, ExceptionFlagsAreKeptPerThreadAcrossSwitches) { EXPECT_EQ(0, exception_flag_mismatches(vprocs())); }

// The blocking graph and the resource-aware policy compute with doubles in
// the parking thread's own context; their flags must not reach it.
TEST_P(ThreadTest, ExceptionFlagsAreKeptWithTheGraphAndTheResourcePolicy) {
    {
        ScopedEnv graph("WEFT_GRAPH", "1");
        EXPECT_EQ(0, exception_flag_mismatches(vprocs())) << "WEFT_GRAPH=1";
    }
    ScopedEnv policy("WEFT_POLICY", "resource");
    EXPECT_EQ(0, exception_flag_mismatches(vprocs())) << "WEFT_POLICY=resource";
}

// A new thread starts rounding to nearest whatever its creator set (control
// words are not inherited) and with its creator's exception flags (status
// is, as with POSIX threads: see arch/x86_64/switch_sysv.hpp).
TEST_P(ThreadTest, NewThreadStartsRoundingToNearestWithItsCreatorsFlags) {
    int round_clean = -1, round_flagged = -1;
    bool inexact_clean = true, inexact_flagged = false;
    ASSERT_EQ(0, run([&] {
        std::fesetround(FE_UPWARD);
        std::feclearexcept(FE_ALL_EXCEPT);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            round_clean = std::fegetround();
            inexact_clean = sse_inexact();
            return nullptr;
        }));
        join(t);
        _mm_setcsr(_mm_getcsr() | _MM_EXCEPT_INEXACT);
        ASSERT_EQ(0, spawn(&t, [&] {
            round_flagged = std::fegetround();
            inexact_flagged = sse_inexact();
            return nullptr;
        }));
        join(t);
        std::fesetround(FE_TONEAREST);
    }));
    EXPECT_EQ(FE_TONEAREST, round_clean);
    EXPECT_EQ(FE_TONEAREST, round_flagged);
    EXPECT_FALSE(inexact_clean);
    EXPECT_TRUE(inexact_flagged);
}

class ThreadDeathTest : public OnVprocs {};
WEFT_ON_VPROCS(ThreadDeathTest);

TEST_P(ThreadDeathTest, UncaughtExceptionAbortsNamingTheThread) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const int n = vprocs();
    EXPECT_DEATH(wt::run(n, [n] {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.name = "thrower";
        a.home_vproc = n - 1;
        weft_thread_t t;
        weft_thread_create(&t, &a, [](void *) -> void * { throw 42; }, nullptr);
        weft_thread_join(t, nullptr);
    }),
                 "uncaught C\\+\\+ exception in weft thread [0-9]+ thrower");
}

// ---------------------------------------------------------------- weft_main

TEST_P(ThreadTest, WeftMainReturnsMainsResult) {
    EXPECT_EQ(42, run_main(vprocs(), [] { return 42; }));
    EXPECT_EQ(-7, run_main(vprocs(), [] { return -7; }));
}

TEST_P(ThreadTest, WeftMainReturnsOnlyAfterDetachedThreadsFinish) {
    std::atomic<int> finished{0};
    const int n = 6;
    int r = run_main(vprocs(), [&] {
        for (int i = 0; i < n; ++i)
            EXPECT_EQ(0, spawn_detached(home(i), [&, i] {
                weft_sleep_ns((5 + 5 * uint64_t(i)) * kMs);
                // A thread started by a detached thread counts too.
                EXPECT_EQ(0, spawn_detached(-1, [&] {
                    weft_sleep_ns(5 * kMs);
                    ++finished;
                    return nullptr;
                }));
                ++finished;
                return nullptr;
            }));
        return 5;
    });
    EXPECT_EQ(5, r);
    EXPECT_EQ(2 * n, finished.load());
}

TEST_P(ThreadTest, NestedWeftMainReturnsEbusy) {
    int r_main = 0, e_main = 0, r_thread = 0, e_thread = 0;
    ASSERT_EQ(0, run([&] {
        errno = 0;
        r_main = weft_main([](void *) { return 0; }, nullptr);
        e_main = errno;
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            errno = 0;
            r_thread = weft_main([](void *) { return 0; }, nullptr);
            e_thread = errno;
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_EQ(-1, r_main);
    EXPECT_EQ(EBUSY, e_main);
    EXPECT_EQ(-1, r_thread);
    EXPECT_EQ(EBUSY, e_thread);
}

TEST_P(ThreadTest, VprocCountAndSelfInsideWeftMain) {
    int count = -2, self = -2;
    ASSERT_EQ(0, run([&] {
        count = weft_vproc_count();
        self = weft_vproc_self();
    }));
    EXPECT_EQ(vprocs(), count);
    EXPECT_EQ(0, self); // main runs on vproc 0
}

// ---------------------------------------------------------------- configuration

int return_vproc_count(void *) { return weft_vproc_count(); }

int start_with(const weft_config &cfg) {
    errno = 0;
    return weft_main_config(&cfg, return_vproc_count, nullptr);
}

TEST(RuntimeConfigTest, BadConfigReturnsMinusOneWithEinval) {
    weft_config cfg;
    struct Case {
        const char *what;
        void (*set)(weft_config *);
    } cases[] = {
        {"vprocs -5", [](weft_config *c) { c->vprocs = -5; }},
        {"vprocs 5000", [](weft_config *c) { c->vprocs = 5000; }},
        {"policy nope", [](weft_config *c) { c->policy = "nope"; }},
        {"stack_size 100", [](weft_config *c) { c->stack_size = 100; }},
        {"stack_size 2 GiB", [](weft_config *c) { c->stack_size = size_t{2} << 30; }},
    };
    for (const Case &k : cases) {
        weft_config_init(&cfg);
        k.set(&cfg);
        EXPECT_EQ(-1, start_with(cfg)) << k.what;
        EXPECT_EQ(EINVAL, errno) << k.what;
    }
}

TEST(RuntimeConfigTest, NullMainFunctionReturnsEinval) {
    errno = 0;
    EXPECT_EQ(-1, weft_main(nullptr, nullptr));
    EXPECT_EQ(EINVAL, errno);
}

TEST(RuntimeConfigTest, ConfigInitClearsEveryField) {
    weft_config cfg;
    std::memset(&cfg, 0x5a, sizeof cfg);
    weft_config_init(&cfg);
    EXPECT_EQ(0, cfg.vprocs);
    EXPECT_EQ(0, cfg.pin);
    EXPECT_EQ(0u, cfg.stack_size);
    EXPECT_EQ(nullptr, cfg.policy);
}

TEST(RuntimeConfigTest, ExplicitFifoPolicyAndPinningAreAccepted) {
    int r = -1;
    // On a kernel thread of its own: pinning binds the calling thread too.
    std::thread k([&] {
        weft_config cfg;
        weft_config_init(&cfg);
        cfg.policy = "fifo";
        cfg.vprocs = 2;
        cfg.pin = 1;
        r = start_with(cfg);
    });
    k.join();
    EXPECT_EQ(2, r);
}

// The CPUs the calling kernel thread may run on, counted independently of
// weft's own code.
int usable_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; ++c) n += CPU_ISSET(c, &set) ? 1 : 0;
    return n;
}

TEST(RuntimeConfigTest, WeftVprocsEnvironmentVariableIsHonoured) {
    weft_config cfg;
    weft_config_init(&cfg);
    {
        ScopedEnv env("WEFT_VPROCS", "3");
        EXPECT_EQ(3, start_with(cfg));
        cfg.vprocs = 2; // an explicit setting wins over the environment
        EXPECT_EQ(2, start_with(cfg));
        cfg.vprocs = 0;
        EXPECT_EQ(3, weft_main(return_vproc_count, nullptr)); // weft_main reads it too
    }
    EXPECT_EQ(usable_cpus(), start_with(cfg)); // unset again: the default
}

TEST(RuntimeConfigTest, DefaultVprocsAreTheUsableCpus) {
    ScopedEnv env("WEFT_VPROCS", nullptr);
    weft_config cfg;
    weft_config_init(&cfg);
    const int cpus = usable_cpus();
    ASSERT_GE(cpus, 1);
    EXPECT_EQ(cpus, weft_default_vprocs());
    EXPECT_EQ(cpus, start_with(cfg));
    EXPECT_EQ(cpus, weft_main(return_vproc_count, nullptr));
}

TEST(RuntimeConfigTest, DefaultVprocsFollowTheAffinityMask) {
    // On a kernel thread of its own, confined to one CPU (as `taskset -c`
    // confines a process): one vproc, whatever the machine has.
    int inside = -1, outside = -1;
    std::thread k([&] {
        ScopedEnv env("WEFT_VPROCS", nullptr);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu(), &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) return;
        outside = weft_default_vprocs();
        weft_config cfg;
        weft_config_init(&cfg);
        inside = start_with(cfg);
    });
    k.join();
    EXPECT_EQ(1, outside);
    EXPECT_EQ(1, inside);
}

TEST(RuntimeConfigTest, DefaultVprocsReadTheEnvironment) {
    {
        ScopedEnv env("WEFT_VPROCS", "5");
        EXPECT_EQ(5, weft_default_vprocs());
    }
    for (const char *v : {"", "0", "lots", "2000"}) { // unset, empty or bad: the CPUs (weft_main refuses bad ones)
        ScopedEnv env("WEFT_VPROCS", v);
        EXPECT_EQ(usable_cpus(), weft_default_vprocs()) << "WEFT_VPROCS=" << v;
    }
}

TEST(RuntimeConfigTest, BadEnvironmentValuesReturnEinval) {
    weft_config cfg;
    weft_config_init(&cfg);
    for (const char *v : {"zero", "0", "-1", "3x", "100000", "99999999999999999999"}) {
        ScopedEnv env("WEFT_VPROCS", v);
        EXPECT_EQ(-1, start_with(cfg)) << "WEFT_VPROCS=" << v;
        EXPECT_EQ(EINVAL, errno) << "WEFT_VPROCS=" << v;
    }
    for (const char *v : {"lots", "12Q", "100", "-64K", " 64K", "17592186044417M", "99999999999999999999", "2G"}) {
        ScopedEnv env("WEFT_STACK_SIZE", v);
        EXPECT_EQ(-1, start_with(cfg)) << "WEFT_STACK_SIZE=" << v;
        EXPECT_EQ(EINVAL, errno) << "WEFT_STACK_SIZE=" << v;
    }
    {
        ScopedEnv env("WEFT_POLICY", "nope");
        EXPECT_EQ(-1, start_with(cfg));
        EXPECT_EQ(EINVAL, errno);
    }
    for (const char *v : {"yes", "no", "true", "2"}) { // found in review: these turned pinning on
        ScopedEnv env("WEFT_PIN", v);
        EXPECT_EQ(-1, start_with(cfg)) << "WEFT_PIN=" << v;
        EXPECT_EQ(EINVAL, errno) << "WEFT_PIN=" << v;
    }
}

TEST(RuntimeConfigTest, IdleSpinIsConfigurableAndCheckedLikeTheOthers) {
    weft_config cfg;
    weft_config_init(&cfg);
    for (const char *v : {"-1", "lots", "2000000", "+5"}) {
        ScopedEnv env("WEFT_IDLE_SPIN_US", v);
        EXPECT_EQ(-1, start_with(cfg)) << "WEFT_IDLE_SPIN_US=" << v;
        EXPECT_EQ(EINVAL, errno) << "WEFT_IDLE_SPIN_US=" << v;
    }
    {
        ScopedEnv env("WEFT_IDLE_SPIN_US", "0");
        cfg.vprocs = 2;
        EXPECT_EQ(2, start_with(cfg)); // no spinning: still runs
    }
    cfg.idle_spin_us = -1;
    EXPECT_EQ(2, start_with(cfg));
    cfg.idle_spin_us = -2;
    EXPECT_EQ(-1, start_with(cfg));
    EXPECT_EQ(EINVAL, errno);
}

TEST(RuntimeConfigTest, LargestStackSizeWithAGSuffixIsAccepted) {
    ScopedEnv env("WEFT_STACK_SIZE", "1G");
    EXPECT_EQ(0, wt::run(1, [] {}));
}

// Found in review: pin = 0 meant "unset", so a program could not turn off
// WEFT_PIN=1. -1 is "off".
TEST(RuntimeConfigTest, ExplicitPinOffWinsOverTheEnvironment) {
    ScopedEnv env("WEFT_PIN", "1");
    cpu_set_t before;
    ASSERT_EQ(0, sched_getaffinity(0, sizeof before, &before));
    int cpus_seen = 0;
    std::function<int()> body = [&] {
        cpu_set_t mine;
        if (sched_getaffinity(0, sizeof mine, &mine) == 0) cpus_seen = CPU_COUNT(&mine);
        return 0;
    };
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.pin = -1;
    ASSERT_EQ(0, weft_main_config(&cfg, wt::detail::main_trampoline, &body));
    EXPECT_EQ(CPU_COUNT(&before), cpus_seen);
}

TEST(RuntimeConfigTest, WeftMainLeavesTheCallersErrnoAlone) {
    errno = 1234;
    EXPECT_EQ(0, wt::run(2, [] {
        weft_cond_t c = WEFT_COND_INITIALIZER;
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_mutex_lock(&m);
        weft_cond_timedwait(&c, &m, weft_now_ns() + 100000); // leaves ETIMEDOUT somewhere
        weft_mutex_unlock(&m);
        errno = ETIMEDOUT;
    }));
    EXPECT_EQ(1234, errno);
}

TEST(RuntimeConfigTest, WeftStackSizeEnvironmentVariableSetsTheDefaultStack) {
    ScopedEnv env("WEFT_STACK_SIZE", "512K");
    uint64_t used = 0;
    int r = wt::run(1, [&] {
        weft_thread_t t;
        // 400 KiB of frames need the 512 KiB default (64 KiB would overflow).
        ASSERT_EQ(0, spawn(&t, [] { return ptr(use_stack(400 * 1024)); }));
        used = num(join(t));
    });
    EXPECT_EQ(0, r);
    EXPECT_GT(used, 0u);
}

TEST(RuntimeTest, RuntimesRunOneAfterAnother) {
    for (int i = 0; i < 20; ++i) EXPECT_EQ(i, run_main(1 + i % 3, [i] { return i; }));
}

TEST(RuntimeTest, TwoRuntimesRunSideBySideOnDifferentKernelThreads) {
    int results[2] = {-1, -1};
    long sums[2] = {0, 0};
    std::vector<std::thread> ks;
    for (int k = 0; k < 2; ++k)
        ks.emplace_back([&, k] {
            results[k] = run_main(2, [&, k] {
                weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
                std::vector<weft_thread_t> ts(8);
                for (int i = 0; i < 8; ++i)
                    EXPECT_EQ(0, spawn_on(&ts[i], i % 2, [&] {
                        for (int r = 0; r < 500; ++r) {
                            weft_mutex_lock(&m);
                            ++sums[k];
                            weft_yield();
                            weft_mutex_unlock(&m);
                        }
                        return nullptr;
                    }));
                for (auto &t : ts) join(t);
                return 10 + k;
            });
        });
    for (auto &t : ks) t.join();
    EXPECT_EQ(10, results[0]);
    EXPECT_EQ(11, results[1]);
    EXPECT_EQ(4000, sums[0]);
    EXPECT_EQ(4000, sums[1]);
}

} // namespace
