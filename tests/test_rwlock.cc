// Readers-writer lock: shared reading, exclusive writing, FIFO fairness
// between readers and writers, error codes.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

class RwlockTest : public OnVprocs {};
WEFT_ON_VPROCS(RwlockTest);

int on_thread(int vproc, std::function<int()> fn) {
    weft_thread_t t;
    EXPECT_EQ(0, spawn_on(&t, vproc, [&] { return ptr(uintptr_t(fn())); }));
    return int(num(join(t)));
}

// Every reader holds its read lock until all of them hold one: only possible
// if readers really share the lock.
TEST_P(RwlockTest, SeveralReadersHoldTheLockAtOnce) {
    const int n = 6;
    std::atomic<int> holding{0};
    int max_holding = 0;
    std::atomic<int> saw_all{0};
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l;
        ASSERT_EQ(0, weft_rwlock_init(&l));
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&] {
                EXPECT_EQ(0, weft_rwlock_rdlock(&l));
                ++holding;
                if (wait_until([&] { return holding.load() == n; }, 10 * kSec)) ++saw_all;
                weft_rwlock_unlock(&l);
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        max_holding = holding.load();
        EXPECT_EQ(0, weft_rwlock_destroy(&l));
    }));
    EXPECT_EQ(n, max_holding);
    EXPECT_EQ(n, saw_all.load());
}

TEST_P(RwlockTest, TrylocksReturnEbusyWhenTheLockIsTaken) {
    int rd_tryrd = -1, rd_trywr = -1, wr_tryrd = -1, wr_trywr = -1, free_trywr = -1;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        ASSERT_EQ(0, weft_rwlock_rdlock(&l));
        rd_tryrd = on_thread(other(), [&] {
            int r = weft_rwlock_tryrdlock(&l);
            if (r == 0) weft_rwlock_unlock(&l);
            return r;
        });
        rd_trywr = on_thread(other(), [&] { return weft_rwlock_trywrlock(&l); });
        ASSERT_EQ(0, weft_rwlock_unlock(&l));
        ASSERT_EQ(0, weft_rwlock_wrlock(&l));
        wr_tryrd = on_thread(other(), [&] { return weft_rwlock_tryrdlock(&l); });
        wr_trywr = on_thread(other(), [&] { return weft_rwlock_trywrlock(&l); });
        ASSERT_EQ(0, weft_rwlock_unlock(&l));
        free_trywr = on_thread(other(), [&] {
            int r = weft_rwlock_trywrlock(&l);
            if (r == 0) weft_rwlock_unlock(&l);
            return r;
        });
    }));
    EXPECT_EQ(0, rd_tryrd);
    EXPECT_EQ(EBUSY, rd_trywr);
    EXPECT_EQ(EBUSY, wr_tryrd);
    EXPECT_EQ(EBUSY, wr_trywr);
    EXPECT_EQ(0, free_trywr);
}

TEST_P(RwlockTest, WrlockWhileHoldingTheWriteLockReturnsEdeadlk) {
    int wr = -1, rd = -1, unlock = -1;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        ASSERT_EQ(0, weft_rwlock_wrlock(&l));
        wr = weft_rwlock_wrlock(&l);
        rd = weft_rwlock_rdlock(&l); // POSIX: EDEADLK too
        unlock = weft_rwlock_unlock(&l);
    }));
    EXPECT_EQ(EDEADLK, wr);
    EXPECT_EQ(EDEADLK, rd);
    EXPECT_EQ(0, unlock);
}

// POSIX and weft.h: the try variants report a lock they cannot take now as
// EBUSY, also when the caller itself is the writer.
TEST_P(RwlockTest, TrylocksByTheWriterItselfReturnEbusy) {
    int trywr = -1, tryrd = -1;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        ASSERT_EQ(0, weft_rwlock_wrlock(&l));
        trywr = weft_rwlock_trywrlock(&l);
        tryrd = weft_rwlock_tryrdlock(&l);
        EXPECT_EQ(0, weft_rwlock_unlock(&l));
    }));
    EXPECT_EQ(EBUSY, trywr);
    EXPECT_EQ(EBUSY, tryrd);
}

TEST_P(RwlockTest, UnlockWhenNotHeldReturnsEperm) {
    int free_unlock = -1, not_writer = -1, writer_unlock = -1;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        free_unlock = weft_rwlock_unlock(&l);
        ASSERT_EQ(0, weft_rwlock_wrlock(&l));
        not_writer = on_thread(other(), [&] { return weft_rwlock_unlock(&l); });
        writer_unlock = weft_rwlock_unlock(&l);
    }));
    EXPECT_EQ(EPERM, free_unlock);
    EXPECT_EQ(EPERM, not_writer);
    EXPECT_EQ(0, writer_unlock);
}

TEST_P(RwlockTest, DestroyWhileHeldOrWaitedOnReturnsEbusy) {
    int read_held = -1, write_held = -1, waited = -1, idle = -1;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        weft_rwlock_rdlock(&l);
        read_held = weft_rwlock_destroy(&l);
        weft_rwlock_unlock(&l);
        weft_rwlock_wrlock(&l);
        write_held = weft_rwlock_destroy(&l);
        const uint64_t base = parks(WEFT_PARK_RWLOCK);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            weft_rwlock_rdlock(&l);
            weft_rwlock_unlock(&l);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_RWLOCK, base + 1));
        weft_rwlock_unlock(&l);
        // The reader was granted the lock at unlock: still busy until it is done.
        waited = weft_rwlock_destroy(&l);
        join(t);
        idle = weft_rwlock_destroy(&l);
    }));
    EXPECT_EQ(EBUSY, read_held);
    EXPECT_EQ(EBUSY, write_held);
    EXPECT_EQ(0, idle);
    // `waited` is EBUSY unless the reader already finished; on one vproc it cannot have.
    if (vprocs() == 1) {
        EXPECT_EQ(EBUSY, waited);
    }
}

TEST_P(RwlockTest, NullArgumentsReturnEinval) {
    std::vector<int> rcs;
    ASSERT_EQ(0, run([&] {
        rcs.push_back(weft_rwlock_init(nullptr));
        rcs.push_back(weft_rwlock_rdlock(nullptr));
        rcs.push_back(weft_rwlock_tryrdlock(nullptr));
        rcs.push_back(weft_rwlock_wrlock(nullptr));
        rcs.push_back(weft_rwlock_trywrlock(nullptr));
        rcs.push_back(weft_rwlock_unlock(nullptr));
        rcs.push_back(weft_rwlock_destroy(nullptr));
    }));
    for (size_t i = 0; i < rcs.size(); ++i) EXPECT_EQ(EINVAL, rcs[i]) << "call " << i;
}

// A reader arriving while a writer waits (behind a current reader) does not
// join the current reader: it queues behind the writer, so writers cannot
// starve.
TEST_P(RwlockTest, ReaderArrivingAfterAWaitingWriterWaitsBehindIt) {
    std::string order;
    int late_try = -1;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        weft_mutex_t rec = WEFT_MUTEX_INITIALIZER; // guards `order`
        auto note = [&](char c) {
            weft_mutex_lock(&rec);
            order += c;
            weft_mutex_unlock(&rec);
        };
        ASSERT_EQ(0, weft_rwlock_rdlock(&l)); // the current reader
        const uint64_t base = parks(WEFT_PARK_RWLOCK);
        weft_thread_t w, r;
        ASSERT_EQ(0, spawn_on(&w, home(1), [&] {
            weft_rwlock_wrlock(&l);
            note('W');
            weft_sleep_ns(2 * kMs); // a reader that jumped the queue would note meanwhile
            note('w');
            weft_rwlock_unlock(&l);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_RWLOCK, base + 1));
        ASSERT_EQ(0, spawn_on(&r, home(2), [&] {
            late_try = weft_rwlock_tryrdlock(&l);
            if (late_try == 0) weft_rwlock_unlock(&l);
            weft_rwlock_rdlock(&l);
            note('R');
            weft_rwlock_unlock(&l);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_RWLOCK, base + 2));
        note('0');
        weft_rwlock_unlock(&l);
        join(w);
        join(r);
    }));
    EXPECT_EQ(EBUSY, late_try);
    EXPECT_EQ("0WwR", order);
}

// Queue behind a writer: R1 R2 W2 R3. On release R1 and R2 get the lock
// together, W2 after both, R3 after W2.
TEST_P(RwlockTest, QueuedReadersAreGrantedTogetherUpToTheNextWriter) {
    std::vector<std::string> events;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        weft_mutex_t rec = WEFT_MUTEX_INITIALIZER;
        std::atomic<int> readers_in{0};
        auto note = [&](std::string e) {
            weft_mutex_lock(&rec);
            events.push_back(std::move(e));
            weft_mutex_unlock(&rec);
        };
        ASSERT_EQ(0, weft_rwlock_wrlock(&l));
        const uint64_t base = parks(WEFT_PARK_RWLOCK);
        struct Who {
            const char *name;
            bool write;
        } who[] = {{"R1", false}, {"R2", false}, {"W2", true}, {"R3", false}};
        std::vector<weft_thread_t> ts(4);
        for (int i = 0; i < 4; ++i) {
            ASSERT_EQ(0, spawn_on(&ts[i], home(i + 1), [&, i] {
                if (who[i].write) {
                    weft_rwlock_wrlock(&l);
                    note(std::string(who[i].name) + "+");
                    note(std::string(who[i].name) + "-");
                } else {
                    weft_rwlock_rdlock(&l);
                    note(std::string(who[i].name) + "+");
                    ++readers_in;
                    // R1 and R2 wait for each other while holding: both must be in.
                    if (i < 2) wait_until([&] { return readers_in.load() >= 2; }, 10 * kSec);
                    note(std::string(who[i].name) + "-");
                }
                weft_rwlock_unlock(&l);
                return nullptr;
            }));
            ASSERT_TRUE(wait_parks(WEFT_PARK_RWLOCK, base + i + 1)) << who[i].name;
        }
        weft_rwlock_unlock(&l);
        for (auto &t : ts) join(t);
    }));
    ASSERT_EQ(8u, events.size());
    auto pos = [&](const char *e) { return std::find(events.begin(), events.end(), e) - events.begin(); };
    // Both first readers were in before either left.
    EXPECT_LT(pos("R1+"), pos("R2-"));
    EXPECT_LT(pos("R2+"), pos("R1-"));
    // The writer after both readers left, R3 after the writer left.
    EXPECT_GT(pos("W2+"), pos("R1-"));
    EXPECT_GT(pos("W2+"), pos("R2-"));
    EXPECT_EQ(pos("W2+") + 1, pos("W2-"));
    EXPECT_GT(pos("R3+"), pos("W2-"));
}

// Readers and writers on every vproc: a writer never sees a reader or another
// writer inside; readers never see a writer.
TEST_P(RwlockTest, WritersExcludeEveryoneUnderContention) {
    const int threads = 3 * vprocs() + 3;
    const long iters = scaled(2000, 300);
    std::atomic<int> readers{0}, writers{0}, violations{0};
    long value = 0, writes = 0;
    ASSERT_EQ(0, run([&] {
        weft_rwlock_t l = WEFT_RWLOCK_INITIALIZER;
        std::vector<weft_thread_t> ts(threads);
        for (int i = 0; i < threads; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                for (long k = 0; k < iters; ++k) {
                    if ((i + k) % 4 == 0) {
                        weft_rwlock_wrlock(&l);
                        if (writers.fetch_add(1) != 0 || readers.load() != 0) ++violations;
                        long v = value;
                        weft_yield();
                        value = v + 1;
                        ++writes;
                        writers.fetch_sub(1);
                    } else {
                        weft_rwlock_rdlock(&l);
                        readers.fetch_add(1);
                        if (writers.load() != 0) ++violations;
                        if (k % 2) weft_yield();
                        readers.fetch_sub(1);
                    }
                    weft_rwlock_unlock(&l);
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        EXPECT_EQ(0, weft_rwlock_destroy(&l));
    }));
    EXPECT_EQ(0, violations.load());
    EXPECT_EQ(writes, value);
    EXPECT_GT(writes, 0);
}

} // namespace
