// The C++20 wrappers in weft.hpp: RAII, std:: lock adaptors, exceptions.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <vector>

#include "weft/weft.hpp"

using namespace std::chrono_literals;

TEST(Cpp, RunReturnsTheBodysResultAndVoidBodiesGiveZero) {
    EXPECT_EQ(weft::run([] { return 42; }), 42);
    bool ran = false;
    EXPECT_EQ(weft::run([&] { ran = true; }), 0);
    EXPECT_TRUE(ran);
}

TEST(Cpp, RunThrowsWhenTheRuntimeCannotStart) {
    EXPECT_THROW(weft::run(weft::config{.policy = "no-such-policy"}, [] { return 0; }), std::system_error);
    EXPECT_THROW(weft::run(weft::config{.vprocs = -1}, [] { return 0; }), std::system_error);
}

TEST(Cpp, AnExceptionFromTheMainBodyIsRethrownByRun) {
    EXPECT_THROW(weft::run([]() -> int { throw std::runtime_error("from main"); }), std::runtime_error);
    // and the runtime is usable again afterwards
    EXPECT_EQ(weft::run([] { return 3; }), 3);
}

TEST(Cpp, HugeTimeoutsMeanForeverNotNow) {
    weft::run([] {
        weft::mutex m;
        weft::condition_variable cv;
        bool done = false;
        weft::thread t([&] {
            weft::this_thread::sleep_for(2ms);
            std::lock_guard<weft::mutex> g(m);
            done = true;
            cv.notify_one();
        });
        std::unique_lock<weft::mutex> lk(m);
        // hours::max() overflows a nanosecond count: it must not become "already expired"
        EXPECT_TRUE(cv.wait_for(lk, std::chrono::hours::max(), [&] { return done; }));
        weft::counting_semaphore sem(0);
        weft::thread poster([&] {
            weft::this_thread::sleep_for(1ms);
            sem.release();
        });
        EXPECT_TRUE(sem.try_acquire_for(std::chrono::seconds::max()));
    });
}

TEST(Cpp, ThreadJoinsInItsDestructorAndCapturesByReference) {
    std::vector<int> order;
    weft::run([&] {
        {
            weft::thread a([&] { order.push_back(1); });
            weft::thread b([&] { order.push_back(2); });
        } // both joined here
        order.push_back(3);
    });
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(Cpp, ThreadOptionsNameAndHomeVproc) {
    std::string name;
    int vproc = -1;
    weft::run(weft::config{.vprocs = 2}, [&] {
        weft::thread t([&] {
            name = weft::this_thread::name();
            vproc = weft_vproc_self();
        }, weft::thread_options{.name = "worker", .home_vproc = 1});
        EXPECT_NE(t.id(), 0u);
    });
    EXPECT_EQ(name, "worker");
    EXPECT_EQ(vproc, 1);
}

TEST(Cpp, JoinTwiceAndDetachAfterJoinThrow) {
    weft::run([] {
        weft::thread t([] {});
        t.join();
        EXPECT_FALSE(t.joinable());
        EXPECT_THROW(t.join(), std::system_error);
        EXPECT_THROW(t.detach(), std::system_error);
    });
}

TEST(Cpp, MovedFromThreadIsNotJoinable) {
    weft::run([] {
        int runs = 0;
        weft::thread a([&] { ++runs; });
        weft::thread b(std::move(a));
        EXPECT_FALSE(a.joinable());
        EXPECT_TRUE(b.joinable());
        b.join();
        EXPECT_EQ(runs, 1);
    });
}

TEST(Cpp, ThreadCreationOutsideTheRuntimeThrows) {
    EXPECT_THROW(weft::thread([] {}), std::system_error);
}

TEST(Cpp, MutexWorksWithLockGuardAndUniqueLockAcrossVprocs) {
    long counter = 0;
    weft::run(weft::config{.vprocs = 3}, [&] {
        weft::mutex m;
        std::vector<weft::thread> ts;
        for (int i = 0; i < 6; ++i)
            ts.emplace_back([&] {
                for (int k = 0; k < 2000; ++k) {
                    std::lock_guard<weft::mutex> g(m);
                    long v = counter;
                    if (k % 64 == 0) weft::this_thread::yield(); // hold it across a switch
                    counter = v + 1;
                }
            }, weft::thread_options{.home_vproc = i % 3});
    });
    EXPECT_EQ(counter, 6 * 2000);
}

TEST(Cpp, ErrorCheckingMutexThrowsOnRelock) {
    weft::run([] {
        weft::mutex m(WEFT_MUTEX_ERRORCHECK);
        m.lock();
        try {
            m.lock();
            ADD_FAILURE() << "relock did not throw";
        } catch (const std::system_error &e) {
            EXPECT_EQ(e.code().value(), EDEADLK);
        }
        EXPECT_FALSE(m.try_lock());
        m.unlock();
        EXPECT_THROW(m.unlock(), std::system_error); // not the owner any more
    });
}

TEST(Cpp, TryLockForTimesOutWhileHeldAndSucceedsWhenFree) {
    weft::run([] {
        weft::mutex m;
        m.lock();
        bool got = true;
        weft::thread t([&] { got = m.try_lock_for(2ms); });
        t.join();
        EXPECT_FALSE(got);
        m.unlock();
        weft::thread u([&] {
            got = m.try_lock_for(2ms);
            if (got) m.unlock();
        });
        u.join();
        EXPECT_TRUE(got);
    });
}

TEST(Cpp, ConditionVariablePredicateWaitAndTimeout) {
    weft::run([] {
        weft::mutex m;
        weft::condition_variable cv;
        bool ready = false;
        weft::thread producer([&] {
            weft::this_thread::sleep_for(1ms);
            std::lock_guard<weft::mutex> g(m);
            ready = true;
            cv.notify_all();
        });
        std::unique_lock<weft::mutex> lk(m);
        cv.wait(lk, [&] { return ready; });
        EXPECT_TRUE(ready);
        EXPECT_TRUE(lk.owns_lock());
        // Nobody will notify now: a bounded wait returns the predicate's value.
        uint64_t t0 = weft_now_ns();
        EXPECT_FALSE(cv.wait_for(lk, 2ms, [] { return false; }));
        EXPECT_GE(weft_now_ns() - t0, 2000000u);
        EXPECT_EQ(cv.wait_for(lk, 1ms), weft::cv_status::timeout);
        EXPECT_TRUE(lk.owns_lock());
    });
}

TEST(Cpp, SharedMutexAdmitsReadersTogetherAndWritersAlone) {
    weft::run([] {
        weft::shared_mutex l;
        int readers_inside = 0, max_readers = 0;
        bool writer_saw_reader = false;
        std::vector<weft::thread> ts;
        for (int i = 0; i < 4; ++i)
            ts.emplace_back([&] {
                std::shared_lock<weft::shared_mutex> g(l);
                ++readers_inside;
                max_readers = std::max(max_readers, readers_inside);
                weft::this_thread::yield();
                --readers_inside;
            });
        ts.emplace_back([&] {
            std::unique_lock<weft::shared_mutex> g(l);
            writer_saw_reader = readers_inside != 0;
        });
        ts.clear();
        EXPECT_GE(max_readers, 2);
        EXPECT_FALSE(writer_saw_reader);
    });
}

TEST(Cpp, SemaphoreAndBarrier) {
    weft::run([] {
        weft::counting_semaphore sem(0);
        EXPECT_FALSE(sem.try_acquire());
        EXPECT_FALSE(sem.try_acquire_for(1ms));
        sem.release();
        EXPECT_TRUE(sem.try_acquire());

        weft::barrier b(3);
        std::atomic<int> serial{0};
        {
            std::vector<weft::thread> ts;
            for (int i = 0; i < 3; ++i)
                ts.emplace_back([&] {
                    for (int round = 0; round < 5; ++round)
                        if (b.arrive_and_wait()) ++serial;
                });
        }
        EXPECT_EQ(serial.load(), 5);
    });
}

namespace {
std::atomic<int> g_deleted{0};
struct Tracked {
    int v;
    ~Tracked() { ++g_deleted; }
};
} // namespace

TEST(Cpp, ThreadSpecificPtrDestructorDeletesTheCallersObject) {
    g_deleted = 0;
    weft::run([] {
        {
            weft::thread_specific_ptr<Tracked> p;
            p.reset(new Tracked{1});
        }
        EXPECT_EQ(g_deleted.load(), 1);
    });
}

TEST(Cpp, ThreadSpecificPtrIsPerThreadAndDeletedAtExit) {
    g_deleted = 0;
    weft::run([] {
        weft::thread_specific_ptr<Tracked> p;
        std::vector<int> seen;
        {
            std::vector<weft::thread> ts;
            for (int i = 0; i < 3; ++i)
                ts.emplace_back([&, i] {
                    EXPECT_EQ(p.get(), nullptr);
                    p.reset(new Tracked{i});
                    weft::this_thread::yield();
                    seen.push_back(p->v);
                });
        }
        EXPECT_EQ(seen.size(), 3u);
        for (int i = 0; i < 3; ++i) EXPECT_EQ(std::count(seen.begin(), seen.end(), i), 1);
        EXPECT_EQ(g_deleted.load(), 3);
    });
}

// The C++ runtime's "exceptions being handled" and uncaught count are per
// kernel thread; weft switches them with the thread. Before, `throw;` in one
// thread rethrew another thread's exception after a yield.
TEST(Cpp, EachThreadKeepsItsOwnCaughtExceptionAcrossSwitches) {
    int rethrown_a = 0, rethrown_b = 0;
    weft::run([&] {
        auto body = [](int mine, int &rethrown) {
            try {
                throw mine;
            } catch (int) {
                for (int i = 0; i < 3; ++i) weft::this_thread::yield(); // the other thread throws meanwhile
                try {
                    throw; // rethrows the exception this thread is handling
                } catch (int x) {
                    rethrown = x;
                }
            }
        };
        weft::thread a([&] { body(1, rethrown_a); });
        weft::thread b([&] { body(2, rethrown_b); });
    });
    EXPECT_EQ(rethrown_a, 1);
    EXPECT_EQ(rethrown_b, 2);
}

TEST(Cpp, UncaughtExceptionsCountsOnlyTheCallingThread) {
    int seen_by_other = -1;
    weft::run([&] {
        struct YieldsWhileUnwinding {
            ~YieldsWhileUnwinding() {
                for (int i = 0; i < 3; ++i) weft::this_thread::yield();
            }
        };
        weft::thread unwinding([] {
            try {
                YieldsWhileUnwinding y;
                throw 7;
            } catch (int) {
            }
        });
        weft::thread other([&] {
            weft::this_thread::yield(); // runs while the first one is unwinding
            seen_by_other = std::uncaught_exceptions();
        });
    });
    EXPECT_EQ(seen_by_other, 0);
}

TEST(CppDeathTest, ExceptionEscapingAThreadAbortsNamingIt) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(weft::run([] {
                     weft::thread t([] { throw std::runtime_error("boom"); },
                                    weft::thread_options{.name = "thrower"});
                 }),
                 "uncaught C\\+\\+ exception in weft thread [0-9]+ thrower");
}
