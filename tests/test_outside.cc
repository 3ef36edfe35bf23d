// Calls made outside weft_main, from plain kernel threads (the gtest thread
// and std::threads): thread calls refuse with EPERM, sleeps use the kernel,
// synchronisation works while it need not wait and refuses (EPERM) when it
// would have to.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "support.hpp"

namespace {

using namespace wt;

void *noop(void *) { return nullptr; }

TEST(OutsideTest, ThreadCallsReturnEperm) {
    weft_thread_t t{};
    EXPECT_EQ(EPERM, weft_thread_create(&t, nullptr, noop, nullptr));
    EXPECT_EQ(EPERM, weft_thread_join(t, nullptr));
    EXPECT_EQ(EPERM, weft_thread_detach(t));
    EXPECT_EQ(EPERM, weft_yield());
}

TEST(OutsideTest, SelfIsTheNullHandleAndVprocIsMinusOne) {
    weft_thread_t self = weft_thread_self();
    EXPECT_EQ(nullptr, self._tcb);
    EXPECT_EQ(0u, self._id);
    EXPECT_EQ(0u, weft_thread_id(self));
    EXPECT_EQ(-1, weft_vproc_self());
    EXPECT_EQ(-1, weft_vproc_count());
    char buf[16];
    EXPECT_EQ(EPERM, weft_thread_getname(self, buf, sizeof buf));
}

// Found in review: a handle kept after weft_main returned pointed into
// unmapped memory, and weft_thread_id crashed on it.
TEST(OutsideTest, AHandleKeptAfterItsRuntimeEndedIsNotDereferenced) {
    weft_thread_t kept{};
    ASSERT_EQ(0, run(1, [&] {
        ASSERT_EQ(0, spawn(&kept, [] { return nullptr; }));
        weft_thread_detach(kept);
    }));
    EXPECT_EQ(0u, weft_thread_id(kept));
    char buf[16];
    EXPECT_EQ(EPERM, weft_thread_getname(kept, buf, sizeof buf));
    EXPECT_EQ(EPERM, weft_thread_setname(kept, "x"));
    EXPECT_EQ(EPERM, weft_thread_join(kept, nullptr));
    EXPECT_EQ(EPERM, weft_thread_detach(kept));
}

TEST(OutsideTest, SleepReallySleeps) {
    uint64_t t0 = weft_now_ns();
    EXPECT_EQ(0, weft_sleep_ns(3 * kMs));
    uint64_t t1 = weft_now_ns();
    EXPECT_GE(t1 - t0, 3 * kMs);
    EXPECT_EQ(0, weft_sleep_until_ns(t1 + 2 * kMs));
    EXPECT_GE(weft_now_ns(), t1 + 2 * kMs);
    EXPECT_EQ(0, weft_sleep_ns(0));
    EXPECT_EQ(0, weft_sleep_until_ns(0));
}

TEST(OutsideTest, StatsAreZeroForTheSumAndEinvalForAVproc) {
    weft_stats_t s;
    std::memset(&s, 0xff, sizeof s);
    EXPECT_EQ(0, weft_stats_get(-1, &s));
    weft_stats_t zero;
    std::memset(&zero, 0, sizeof zero);
    EXPECT_EQ(0, std::memcmp(&s, &zero, sizeof s));
    EXPECT_EQ(EINVAL, weft_stats_get(0, &s));
}

TEST(OutsideTest, UncontendedMutexWorks) {
    weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
    EXPECT_EQ(0, weft_mutex_lock(&m));
    EXPECT_EQ(0, weft_mutex_unlock(&m));
    EXPECT_EQ(0, weft_mutex_trylock(&m));
    EXPECT_EQ(0, weft_mutex_unlock(&m));
    EXPECT_EQ(0, weft_mutex_timedlock(&m, weft_now_ns() + kSec));
    EXPECT_EQ(0, weft_mutex_unlock(&m));
    EXPECT_EQ(0, weft_mutex_destroy(&m));

    weft_mutex_t e = WEFT_MUTEX_ERRORCHECK_INITIALIZER;
    EXPECT_EQ(0, weft_mutex_lock(&e));
    EXPECT_EQ(EDEADLK, weft_mutex_lock(&e));
    EXPECT_EQ(0, weft_mutex_unlock(&e));
    EXPECT_EQ(EPERM, weft_mutex_unlock(&e));

    weft_mutex_t r = WEFT_MUTEX_RECURSIVE_INITIALIZER;
    EXPECT_EQ(0, weft_mutex_lock(&r));
    EXPECT_EQ(0, weft_mutex_lock(&r));
    EXPECT_EQ(0, weft_mutex_unlock(&r));
    EXPECT_EQ(0, weft_mutex_unlock(&r));
    EXPECT_EQ(EPERM, weft_mutex_unlock(&r));
}

// A mutex held by another kernel thread: trylock says EBUSY, and a lock that
// would have to wait says EPERM instead of blocking the kernel thread.
TEST(OutsideTest, MutexLockThatWouldBlockReturnsEperm) {
    weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
    std::atomic<int> phase{0};
    int other_lock = -1, other_unlock = -1;
    std::thread holder([&] {
        other_lock = weft_mutex_lock(&m);
        phase = 1;
        while (phase.load() != 2) std::this_thread::yield();
        other_unlock = weft_mutex_unlock(&m);
    });
    while (phase.load() != 1) std::this_thread::yield();
    EXPECT_EQ(EBUSY, weft_mutex_trylock(&m));
    EXPECT_EQ(EPERM, weft_mutex_lock(&m));
    EXPECT_EQ(EPERM, weft_mutex_timedlock(&m, weft_now_ns() + kSec));
    EXPECT_EQ(EPERM, weft_mutex_unlock(&m)); // not ours
    EXPECT_EQ(EBUSY, weft_mutex_destroy(&m));
    phase = 2;
    holder.join();
    EXPECT_EQ(0, other_lock);
    EXPECT_EQ(0, other_unlock);
    EXPECT_EQ(0, weft_mutex_lock(&m)); // free again
    EXPECT_EQ(0, weft_mutex_unlock(&m));
}

TEST(OutsideTest, CondWaitReturnsEperm) {
    weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
    weft_cond_t c = WEFT_COND_INITIALIZER;
    EXPECT_EQ(EPERM, weft_cond_wait(&c, &m)); // mutex not held
    ASSERT_EQ(0, weft_mutex_lock(&m));
    EXPECT_EQ(EPERM, weft_cond_wait(&c, &m)); // held, but waiting is impossible here
    EXPECT_EQ(EPERM, weft_cond_timedwait(&c, &m, weft_now_ns() + kSec));
    EXPECT_EQ(0, weft_mutex_unlock(&m)); // still ours
    EXPECT_EQ(0, weft_cond_signal(&c));
    EXPECT_EQ(0, weft_cond_broadcast(&c));
    EXPECT_EQ(0, weft_cond_destroy(&c));
}

TEST(OutsideTest, SemaphoreWorksUntilItWouldBlock) {
    weft_sem_t s;
    ASSERT_EQ(0, weft_sem_init(&s, 1));
    EXPECT_EQ(0, weft_sem_wait(&s));
    EXPECT_EQ(EAGAIN, weft_sem_trywait(&s));
    EXPECT_EQ(EPERM, weft_sem_wait(&s));
    EXPECT_EQ(EPERM, weft_sem_timedwait(&s, weft_now_ns() + kSec));
    EXPECT_EQ(0, weft_sem_post(&s));
    int v = -1;
    EXPECT_EQ(0, weft_sem_getvalue(&s, &v));
    EXPECT_EQ(1, v);
    EXPECT_EQ(0, weft_sem_timedwait(&s, weft_now_ns() + kSec));
    EXPECT_EQ(0, weft_sem_destroy(&s));
}

TEST(OutsideTest, RwlockWorksUntilItWouldBlock) {
    weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
    EXPECT_EQ(0, weft_rwlock_rdlock(&l));
    EXPECT_EQ(0, weft_rwlock_rdlock(&l));
    EXPECT_EQ(EBUSY, weft_rwlock_trywrlock(&l));
    EXPECT_EQ(EPERM, weft_rwlock_wrlock(&l));
    EXPECT_EQ(0, weft_rwlock_unlock(&l));
    EXPECT_EQ(0, weft_rwlock_unlock(&l));
    EXPECT_EQ(EPERM, weft_rwlock_unlock(&l));
    EXPECT_EQ(0, weft_rwlock_wrlock(&l));
    int other_rd = -1, other_unlock = -1;
    std::thread([&] {
        other_rd = weft_rwlock_rdlock(&l);
        other_unlock = weft_rwlock_unlock(&l);
    }).join();
    EXPECT_EQ(EPERM, other_rd);
    EXPECT_EQ(EPERM, other_unlock);
    EXPECT_EQ(0, weft_rwlock_unlock(&l));
    EXPECT_EQ(0, weft_rwlock_destroy(&l));
}

// The kernel thread is the recorded writer (its unlock works, others' fail),
// so a relock is the caller writing it: EDEADLK, as inside weft_main.
TEST(OutsideTest, RwlockRelockByTheWritingKernelThreadReturnsEdeadlk) {
    weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
    ASSERT_EQ(0, weft_rwlock_wrlock(&l));
    EXPECT_EQ(EDEADLK, weft_rwlock_wrlock(&l));
    EXPECT_EQ(EDEADLK, weft_rwlock_rdlock(&l));
    EXPECT_EQ(0, weft_rwlock_unlock(&l));
}

TEST(OutsideTest, BarrierOfOneAndBlockingBarrier) {
    weft_barrier_t one, two;
    ASSERT_EQ(0, weft_barrier_init(&one, 1));
    EXPECT_EQ(WEFT_BARRIER_SERIAL_THREAD, weft_barrier_wait(&one));
    ASSERT_EQ(0, weft_barrier_init(&two, 2));
    EXPECT_EQ(EPERM, weft_barrier_wait(&two)); // would wait for the second thread
    EXPECT_EQ(0, weft_barrier_destroy(&two)); // the refused arrival did not count
}

std::atomic<int> g_outside_once_calls{0};

TEST(OutsideTest, OnceRunsTheFunction) {
    weft_once_t o = WEFT_ONCE_INIT;
    EXPECT_EQ(0, weft_once(&o, [] { ++g_outside_once_calls; }));
    EXPECT_EQ(0, weft_once(&o, [] { ++g_outside_once_calls; }));
    EXPECT_EQ(1, g_outside_once_calls.load());
}

TEST(OutsideTest, KeysCanBeCreatedButNotSet) {
    weft_key_t k;
    ASSERT_EQ(0, weft_key_create(&k, nullptr));
    EXPECT_EQ(EPERM, weft_setspecific(k, ptr(1)));
    EXPECT_EQ(nullptr, weft_getspecific(k));
    EXPECT_EQ(0, weft_key_delete(k));
}

TEST(OutsideTest, SyncObjectsUsedOutsideStillWorkInsideWeftMain) {
    // A mutex locked and released by the kernel thread before weft starts.
    weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
    ASSERT_EQ(0, weft_mutex_lock(&m));
    ASSERT_EQ(0, weft_mutex_unlock(&m));
    long counter = 0;
    ASSERT_EQ(0, run(2, [&] {
        weft_thread_t ts[4];
        for (int i = 0; i < 4; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], i % 2, [&] {
                for (int k = 0; k < 200; ++k) {
                    weft_mutex_lock(&m);
                    long v = counter;
                    weft_yield();
                    counter = v + 1;
                    weft_mutex_unlock(&m);
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }));
    EXPECT_EQ(800, counter);
    EXPECT_EQ(0, weft_mutex_trylock(&m)); // and outside again afterwards
    EXPECT_EQ(0, weft_mutex_unlock(&m));
}

TEST(OutsideDeathTest, ThreadExitAborts) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(weft_thread_exit(nullptr), "weft_thread_exit called outside weft_main");
}

} // namespace

// Found in review: objects holding garbage were accepted (a semaphore above
// WEFT_SEM_VALUE_MAX read back negative) or crashed. Where a value is out of
// its range the runtime can tell, and says EINVAL.
namespace {
TEST(GarbageTest, ObjectsWithOutOfRangeStateAreRejected) {
    ASSERT_EQ(0, wt::run(1, [] {
        weft_sem_t sem;
        std::memset(&sem, 0xff, sizeof sem);
        std::memset(&sem, 0, 1); // its lock byte free
        int v = 0;
        EXPECT_EQ(EINVAL, weft_sem_getvalue(&sem, &v));
        EXPECT_EQ(EINVAL, weft_sem_trywait(&sem));
        EXPECT_EQ(EINVAL, weft_sem_post(&sem));

        weft_barrier_t b;
        ASSERT_EQ(0, weft_barrier_init(&b, 2));
        std::memset(reinterpret_cast<char *>(&b) + 8, 0x7f, 4); // arrived far beyond count
        EXPECT_EQ(EINVAL, weft_barrier_wait(&b));

        weft_once_t o;
        std::memset(&o, 0x5a, sizeof o);
        EXPECT_EQ(EINVAL, weft_once(&o, [] {}));
    }));
}
} // namespace
