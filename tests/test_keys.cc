// Thread-specific data. Keys are process-wide: every test deletes the keys it
// created, so the next test starts from none.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <vector>

#include "support.hpp"

namespace {

using namespace wt;

// Creates a key for one test and deletes it at the end.
class ScopedKey {
public:
    explicit ScopedKey(void (*dtor)(void *) = nullptr) { rc_ = weft_key_create(&key_, dtor); }
    ~ScopedKey() {
        if (rc_ == 0) weft_key_delete(key_);
    }
    int rc() const { return rc_; }
    weft_key_t get() const { return key_; }

private:
    weft_key_t key_ = 0;
    int rc_ = -1;
};

class KeyTest : public OnVprocs {};
WEFT_ON_VPROCS(KeyTest);

TEST_P(KeyTest, EachThreadSeesItsOwnValue) {
    ScopedKey k;
    ASSERT_EQ(0, k.rc());
    const int n = 12;
    std::atomic<int> wrong{0};
    void *main_value = nullptr;
    ASSERT_EQ(0, run([&] {
        EXPECT_EQ(0, weft_setspecific(k.get(), ptr(0xaaaa)));
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                if (weft_getspecific(k.get()) != nullptr) ++wrong; // starts unset
                EXPECT_EQ(0, weft_setspecific(k.get(), ptr(uintptr_t(100 + i))));
                for (int r = 0; r < 50; ++r) {
                    weft_yield();
                    if (r % 10 == 0) weft_sleep_ns(50 * kUs);
                    if (weft_getspecific(k.get()) != ptr(uintptr_t(100 + i))) ++wrong;
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        main_value = weft_getspecific(k.get());
    }));
    EXPECT_EQ(0, wrong.load());
    EXPECT_EQ(ptr(0xaaaa), main_value);
}

std::mutex g_mu;
std::vector<uintptr_t> g_destroyed;
void record_dtor(void *v) {
    std::lock_guard<std::mutex> l(g_mu);
    g_destroyed.push_back(num(v));
}

TEST_P(KeyTest, DestructorRunsAtThreadExitWithTheValue) {
    g_destroyed.clear();
    ScopedKey k(record_dtor);
    ASSERT_EQ(0, k.rc());
    const int n = 6;
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(n);
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                // Threads 0 and 1 leave the value unset / set it back to NULL:
                // no destructor call for them.
                if (i == 1) {
                    weft_setspecific(k.get(), ptr(1));
                    weft_setspecific(k.get(), nullptr);
                } else if (i > 1) {
                    weft_setspecific(k.get(), ptr(uintptr_t(500 + i)));
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }));
    std::vector<uintptr_t> got = g_destroyed;
    std::sort(got.begin(), got.end());
    EXPECT_EQ((std::vector<uintptr_t>{502, 503, 504, 505}), got);
}

weft_key_t g_again_key;
std::atomic<int> g_again_calls{0};
void set_again(void *v) {
    ++g_again_calls;
    weft_setspecific(g_again_key, v); // keeps coming back
}

TEST_P(KeyTest, DestructorThatSetsTheValueAgainRunsUpToTheIterationLimit) {
    ASSERT_EQ(0, weft_key_create(&g_again_key, set_again));
    g_again_calls = 0;
    int rc = run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [] {
            weft_setspecific(g_again_key, ptr(7));
            return nullptr;
        }));
        join(t);
    });
    EXPECT_EQ(0, weft_key_delete(g_again_key));
    EXPECT_EQ(0, rc);
    EXPECT_EQ(WEFT_DESTRUCTOR_ITERATIONS, g_again_calls.load());
}

weft_key_t g_once_more_key;
std::vector<uintptr_t> g_once_more_seen;
void set_once_more(void *v) {
    g_once_more_seen.push_back(num(v));
    if (num(v) == 1) weft_setspecific(g_once_more_key, ptr(2)); // one more round, then done
}

TEST_P(KeyTest, DestructorRunsAgainForAValueSetByADestructor) {
    ASSERT_EQ(0, weft_key_create(&g_once_more_key, set_once_more));
    g_once_more_seen.clear();
    int rc = run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [] {
            weft_setspecific(g_once_more_key, ptr(1));
            return nullptr;
        }));
        join(t);
    });
    EXPECT_EQ(0, weft_key_delete(g_once_more_key));
    EXPECT_EQ(0, rc);
    EXPECT_EQ((std::vector<uintptr_t>{1, 2}), g_once_more_seen);
}

TEST_P(KeyTest, DeletedKeyReadsNullAndRejectsSetspecific) {
    g_destroyed.clear();
    weft_key_t key;
    ASSERT_EQ(0, weft_key_create(&key, record_dtor));
    void *before = nullptr, *after = ptr(1);
    int set_after = -1, delete_again = -1;
    ASSERT_EQ(0, run([&] {
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            EXPECT_EQ(0, weft_setspecific(key, ptr(9)));
            before = weft_getspecific(key);
            EXPECT_EQ(0, weft_key_delete(key));
            after = weft_getspecific(key);
            set_after = weft_setspecific(key, ptr(10));
            delete_again = weft_key_delete(key);
            return nullptr;
        }));
        join(t);
    }));
    EXPECT_EQ(ptr(9), before);
    EXPECT_EQ(nullptr, after);
    EXPECT_EQ(EINVAL, set_after);
    EXPECT_EQ(EINVAL, delete_again);
    EXPECT_TRUE(g_destroyed.empty()) << "no destructor for a deleted key";
}

// A deleted key's slot may come back as a new key: the value stored under the
// old key must not show through.
TEST_P(KeyTest, RecreatedKeyDoesNotShowTheOldValue) {
    void *fresh = ptr(1);
    ASSERT_EQ(0, run([&] {
        weft_key_t old_key, new_key;
        ASSERT_EQ(0, weft_key_create(&old_key, nullptr));
        ASSERT_EQ(0, weft_setspecific(old_key, ptr(0x51)));
        ASSERT_EQ(0, weft_key_delete(old_key));
        ASSERT_EQ(0, weft_key_create(&new_key, nullptr));
        EXPECT_EQ(old_key, new_key) << "expected the freed slot to be reused";
        fresh = weft_getspecific(new_key);
        weft_key_delete(new_key);
    }));
    EXPECT_EQ(nullptr, fresh);
}

TEST_P(KeyTest, KeyExhaustionReturnsEagain) {
    std::vector<weft_key_t> keys;
    int rc = 0, after_delete = -1;
    ASSERT_EQ(0, run([&] {
        weft_key_t k;
        while (keys.size() <= WEFT_KEYS_MAX && (rc = weft_key_create(&k, nullptr)) == 0) keys.push_back(k);
        // Every key works, the last one included.
        EXPECT_EQ(0, weft_setspecific(keys.back(), ptr(3)));
        EXPECT_EQ(ptr(3), weft_getspecific(keys.back()));
        ASSERT_EQ(0, weft_key_delete(keys.back()));
        keys.pop_back();
        after_delete = weft_key_create(&k, nullptr);
        if (after_delete == 0) keys.push_back(k);
    }));
    for (weft_key_t k : keys) EXPECT_EQ(0, weft_key_delete(k));
    EXPECT_EQ(EAGAIN, rc);
    EXPECT_EQ(size_t(WEFT_KEYS_MAX), keys.size());
    EXPECT_EQ(0, after_delete);
}

TEST_P(KeyTest, BadKeysAndArgumentsAreRejected) {
    int create_null = -1, delete_big = -1, set_big = -1;
    void *get_big = ptr(1);
    ASSERT_EQ(0, run([&] {
        create_null = weft_key_create(nullptr, nullptr);
        delete_big = weft_key_delete(WEFT_KEYS_MAX);
        set_big = weft_setspecific(WEFT_KEYS_MAX + 5, ptr(1));
        get_big = weft_getspecific(0xffffffffu);
    }));
    EXPECT_EQ(EINVAL, create_null);
    EXPECT_EQ(EINVAL, delete_big);
    EXPECT_EQ(EINVAL, set_big);
    EXPECT_EQ(nullptr, get_big);
}

// Many keys per thread (the per-thread table grows) keep their own values.
TEST_P(KeyTest, ManyKeysPerThreadKeepTheirValues) {
    std::vector<weft_key_t> keys(100);
    for (auto &k : keys) ASSERT_EQ(0, weft_key_create(&k, nullptr));
    std::atomic<int> wrong{0};
    ASSERT_EQ(0, run([&] {
        std::vector<weft_thread_t> ts(4);
        for (int i = 0; i < 4; ++i)
            ASSERT_EQ(0, spawn_on(&ts[i], home(i), [&, i] {
                for (size_t j = keys.size(); j-- > 0;) // high keys first: the table grows once
                    EXPECT_EQ(0, weft_setspecific(keys[j], ptr(i * 1000 + j + 1)));
                weft_yield();
                for (size_t j = 0; j < keys.size(); ++j)
                    if (weft_getspecific(keys[j]) != ptr(i * 1000 + j + 1)) ++wrong;
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }));
    for (auto k : keys) EXPECT_EQ(0, weft_key_delete(k));
    EXPECT_EQ(0, wrong.load());
}

} // namespace
