#include "core/timer.hpp"

namespace weft::detail {

void TimerHeap::arm(Timer *t, uint64_t deadline) {
    if (t->armed()) cancel(t);
    t->deadline = deadline;
    t->seq = seq_++;
    heap_.push_back(t);
    t->index = static_cast<uint32_t>(heap_.size() - 1);
    sift_up(t->index);
}

void TimerHeap::cancel(Timer *t) {
    if (!t->armed()) return;
    uint32_t i = t->index;
    Timer *last = heap_.back();
    heap_.pop_back();
    t->index = Timer::kNotArmed;
    if (last == t) return;
    place(i, last);
    // The moved element may belong higher or lower than the hole it fills.
    sift_up(i);
    sift_down(last->index);
}

uint64_t TimerHeap::expire(uint64_t now) {
    uint64_t fired = 0;
    while (!heap_.empty() && heap_[0]->deadline <= now) {
        Timer *t = heap_[0];
        cancel(t);
        t->fire(t); // may arm or cancel other timers: the heap is consistent here
        ++fired;
    }
    return fired;
}

void TimerHeap::sift_up(uint32_t i) {
    Timer *t = heap_[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!before(t, heap_[parent])) break;
        place(i, heap_[parent]);
        i = parent;
    }
    place(i, t);
}

void TimerHeap::sift_down(uint32_t i) {
    Timer *t = heap_[i];
    auto n = static_cast<uint32_t>(heap_.size());
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
        if (!before(heap_[child], t)) break;
        place(i, heap_[child]);
        i = child;
    }
    place(i, t);
}

} // namespace weft::detail
