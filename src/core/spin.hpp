// A one-byte spin lock that costs nothing on a single vproc.
//
// weft threads are cooperative, so on one vproc no two threads ever run a
// critical section at the same time and no lock is needed at all. With
// several vprocs, synchronisation objects and thread join state are guarded
// by this lock. Whether it is real is decided once per runtime (Vproc::smp)
// and passed in by the caller, who already has the vproc at hand.
//
// Rule: nothing parks, yields or switches while holding a Spin. Sections are
// a handful of loads and stores, so spinning is normally short — unless the
// holder's kernel thread was preempted, e.g. two vprocs sharing one CPU.
// Spinning then cannot help (the holder needs this CPU), so after a brief
// spin the waiter gives the CPU away with sched_yield instead of burning its
// time slice (a tick, 4 ms here) per acquisition.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

namespace weft::detail {

class Spin {
public:
    void lock(bool smp) noexcept {
        if (!smp) return;
        if (__builtin_expect(flag_.exchange(1, std::memory_order_acquire), 0)) lock_contended();
    }
    void unlock(bool smp) noexcept {
        if (smp) flag_.store(0, std::memory_order_release);
    }

private:
    // Out of line: inlined, the waiting loop costs every lock site registers.
    [[gnu::noinline, gnu::cold]] void lock_contended() noexcept {
        do {
            for (int spins = 0; flag_.load(std::memory_order_relaxed); ++spins) {
                if (spins < kSpinsBeforeYield) __builtin_ia32_pause();
                else sched_yield();
            }
        } while (flag_.exchange(1, std::memory_order_acquire));
    }

    static constexpr int kSpinsBeforeYield = 128; // ~ a few µs of pause
    std::atomic<uint8_t> flag_{0};
};
static_assert(sizeof(Spin) == 1);

class SpinGuard {
public:
    SpinGuard(Spin &s, bool smp) noexcept : s_(s), smp_(smp) { s_.lock(smp_); }
    ~SpinGuard() { s_.unlock(smp_); }
    SpinGuard(const SpinGuard &) = delete;
    SpinGuard &operator=(const SpinGuard &) = delete;

private:
    Spin &s_;
    bool smp_;
};

} // namespace weft::detail
