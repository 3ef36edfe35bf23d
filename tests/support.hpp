// Shared helpers for the weft tests.
//
//  - run(n, body) / run_main(n, body): a lambda as the weft main thread on n
//    vprocs (weft_main_config with .vprocs = n).
//  - spawn(...): a weft thread from a lambda returning void *.
//  - wait_until(pred): poll from a weft thread (yield, then short sleeps)
//    with a generous cap, so a broken runtime fails a test instead of hanging.
//  - parks(reason) / wait_parks(reason, n): the park counters, used to order
//    waiters across vprocs without sleeping ("thread i queues only after
//    thread i-1 has parked").
//  - OnVprocs: value-parameterised fixture; WEFT_ON_VPROCS(Suite) runs every
//    TEST_P of Suite on 1 and on 3 vprocs (3 on a 2-core machine on purpose).
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "weft/weft.h"

namespace wt {

inline constexpr uint64_t kUs = 1000;
inline constexpr uint64_t kMs = 1000 * kUs;
inline constexpr uint64_t kSec = 1000 * kMs;

// ASan, and ThreadSanitizer (make test-tsan), which also allows at most
// 8,128 threads and fibers alive at once.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif

// A workload size: `normal` in a plain build, `sanitized` under ASan.
constexpr long scaled(long normal, long sanitized) { return kSanitized ? sanitized : normal; }

namespace detail {
inline int main_trampoline(void *p) { return (*static_cast<std::function<int()> *>(p))(); }

struct ThreadBody {
    std::function<void *()> fn;
};
inline void *thread_trampoline(void *p) {
    auto *b = static_cast<ThreadBody *>(p);
    std::function<void *()> fn = std::move(b->fn);
    delete b;
    return fn();
}
} // namespace detail

// body as the weft main thread on `vprocs` vprocs; its result, or -1 (errno set)
// if the runtime could not start.
inline int run_main(int vprocs, std::function<int()> body) {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = vprocs;
    return weft_main_config(&cfg, detail::main_trampoline, &body);
}

// A void body (gtest ASSERT_* may return from it); the result is weft_main's.
inline int run(int vprocs, std::function<void()> body) {
    return run_main(vprocs, [&] {
        body();
        return 0;
    });
}

// Sets an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old, had_ = true;
        if (value) setenv(name, value, 1);
        else unsetenv(name); // nullptr: unset for the scope
    }
    ~ScopedEnv() {
        if (had_) setenv(name_, old_.c_str(), 1);
        else unsetenv(name_);
    }

private:
    const char *name_;
    std::string old_;
    bool had_ = false;
};

// For its scope, the runtimes a test starts do no work stealing (WEFT_STEAL=0):
// for tests of where threads run without it.
struct StealingOff : ScopedEnv {
    StealingOff() : ScopedEnv("WEFT_STEAL", "0") {}
};

// Create a thread running fn. Returns weft_thread_create's result.
inline int spawn(weft_thread_t *t, std::function<void *()> fn, const weft_thread_attr_t *attr = nullptr) {
    auto *b = new detail::ThreadBody{std::move(fn)};
    int r = weft_thread_create(t, attr, detail::thread_trampoline, b);
    if (r) delete b;
    return r;
}

// A thread whose home is `vproc` (-1: the creator's).
inline int spawn_on(weft_thread_t *t, int vproc, std::function<void *()> fn) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.home_vproc = vproc;
    return spawn(t, std::move(fn), &a);
}

inline int spawn_detached(int vproc, std::function<void *()> fn) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.home_vproc = vproc;
    a.detached = 1;
    return spawn(nullptr, std::move(fn), &a);
}

// Join and return the thread's result; a failed join is a test failure.
inline void *join(weft_thread_t t) {
    void *r = nullptr;
    int e = weft_thread_join(t, &r);
    EXPECT_EQ(0, e) << "weft_thread_join";
    return r;
}

inline void *ptr(uintptr_t v) { return reinterpret_cast<void *>(v); }
inline uintptr_t num(void *p) { return reinterpret_cast<uintptr_t>(p); }

// Poll pred from a weft thread until it holds or timeout_ns passes.
template <class Pred>
bool wait_until(Pred pred, uint64_t timeout_ns = 20 * kSec) {
    const uint64_t end = weft_now_ns() + timeout_ns;
    for (unsigned i = 0;; ++i) {
        if (pred()) return true;
        if (weft_now_ns() >= end) return false;
        if (i < 64) weft_yield();
        else weft_sleep_ns(20 * kUs);
    }
}

inline weft_stats_t stats(int vproc = -1) {
    weft_stats_t s{};
    int e = weft_stats_get(vproc, &s);
    EXPECT_EQ(0, e) << "weft_stats_get(" << vproc << ")";
    return s;
}

// Parks for `reason` so far, summed over every vproc.
inline uint64_t parks(int reason) { return stats(-1).parks[reason]; }

// Wait until at least n parks for `reason` have happened in total.
inline bool wait_parks(int reason, uint64_t n) {
    return wait_until([&] { return parks(reason) >= n; });
}

// The policy WEFT_POLICY names (the suites run again under cohort, resource
// and tap): tests of one policy's order check it.
inline bool policy_is(const char *name) {
    const char *p = std::getenv("WEFT_POLICY");
    if (!p || !*p) p = "fifo";
    return !std::strcmp(p, name);
}
inline bool fifo_policy() { return policy_is("fifo"); }

class OnVprocs : public ::testing::TestWithParam<int> {
protected:
    int vprocs() const { return GetParam(); }
    // The vproc that thread number i of a test lives on: spread round-robin.
    int home(int i) const { return i % vprocs(); }
    // The last vproc: "another vproc" when there are several.
    int other() const { return vprocs() - 1; }
    int run(std::function<void()> body) const { return wt::run(vprocs(), std::move(body)); }
};

inline std::string vprocs_name(const ::testing::TestParamInfo<int> &info) {
    return "Vprocs" + std::to_string(info.param);
}

// Pages of [0, size) of fd that are in the page cache; -1 if unknown.
inline long resident_pages(int fd, size_t size) {
    if (size == 0) return 0;
    void *m = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return -1;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> v((size + page - 1) / page);
    long n = -1;
    if (mincore(m, size, v.data()) == 0) {
        n = 0;
        for (unsigned char c : v) n += c & 1;
    }
    munmap(m, size);
    return n;
}

// Write the file's dirty pages, then drop its pages from the page cache;
// true if none is left (the kernel may keep some).
inline bool drop_cache(int fd, size_t size) {
    fdatasync(fd);
    posix_fadvise(fd, 0, off_t(size), POSIX_FADV_DONTNEED);
    return resident_pages(fd, size) == 0;
}

} // namespace wt

#define WEFT_ON_VPROCS(Suite) \
    INSTANTIATE_TEST_SUITE_P(On, Suite, ::testing::Values(1, 3), ::wt::vprocs_name)
