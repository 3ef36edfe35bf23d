// Relaxed<T>: a field read without its lock on purpose — a flag that another
// kernel thread may change (under the lock) while this one looks. Reads and
// writes are relaxed atomics: plain loads and stores on x86-64, no fence,
// but not a data race in C++'s terms (so ThreadSanitizer checks the code
// around them instead of reporting them). Reads convert implicitly, so a
// plain field can become one without touching its readers.
#pragma once

#include <atomic>

namespace weft::detail {

template <class T>
class Relaxed {
public:
    constexpr Relaxed(T v = T{}) noexcept : v_(v) {}
    Relaxed(const Relaxed &) = delete;
    Relaxed &operator=(const Relaxed &) = delete;
    operator T() const noexcept { return v_.load(std::memory_order_relaxed); }
    T operator=(T v) noexcept {
        v_.store(v, std::memory_order_relaxed);
        return v;
    }

private:
    std::atomic<T> v_;
};

} // namespace weft::detail
