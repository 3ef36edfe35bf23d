// Per-vproc timers: a binary min-heap ordered by (deadline, arming order).
//
// Sleeps, timed waits and (with the I/O layer) I/O deadlines all arm a Timer
// here. Arm, cancel and pop are O(log n); the earliest deadline is O(1).
// Capriccio kept sleepers on a sorted list (O(n) insert); at 10^5 sleeping
// threads that is the difference between microseconds and milliseconds.
// Ties fire in the order they were armed, so equal deadlines stay FIFO.
//
// A heap beat a hashed timing wheel here: weft's deadlines are exact
// nanoseconds spread over many magnitudes (1 µs yields to 15 s timeouts), a
// wheel needs a tick and cascading for that, and the heap's cost is paid
// only by threads that actually park with a deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::detail {

struct Timer {
    uint64_t deadline = 0;           // absolute CLOCK_MONOTONIC ns
    uint64_t seq = 0;                // arming order, breaks deadline ties
    uint32_t index = kNotArmed;      // position in the heap, or kNotArmed
    void (*fire)(Timer *) = nullptr; // called on the owning vproc when due

    static constexpr uint32_t kNotArmed = UINT32_MAX;
    bool armed() const { return index != kNotArmed; }
};

class TimerHeap {
public:
    void arm(Timer *t, uint64_t deadline);
    void cancel(Timer *t);        // no-op if not armed
    bool empty() const { return heap_.empty(); }
    uint64_t next_deadline() const { return heap_.empty() ? UINT64_MAX : heap_[0]->deadline; }
    // Pop and fire every timer due at `now`; returns how many fired.
    uint64_t expire(uint64_t now);
    size_t size() const { return heap_.size(); }

private:
    static bool before(const Timer *a, const Timer *b) {
        return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
    }
    void sift_up(uint32_t i);
    void sift_down(uint32_t i);
    void place(uint32_t i, Timer *t) { heap_[i] = t; t->index = i; }

    std::vector<Timer *> heap_;
    uint64_t seq_ = 0;
};

} // namespace weft::detail
