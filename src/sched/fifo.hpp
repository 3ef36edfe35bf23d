// FIFO: one intrusive singly-linked queue through Tcb::next. Threads run in
// the order they became ready, so no ready thread waits behind more than the
// threads that were ready before it.
//
// The queue is in a header because it is the default policy: the scheduler
// calls it inline when the vproc runs FIFO (Vproc::fifo), saving the two
// indirect calls per switch that any other policy costs. It is still reached
// through kFifoPolicy like every policy; the inline path is only a shortcut.
#pragma once

#include <cstddef>

#include "core/tcb.hpp"

namespace weft::detail {

struct FifoQueue {
    Tcb *head = nullptr; // next to run
    Tcb *tail = nullptr; // most recently readied
    size_t count = 0;

    void push(Tcb *t) {
        t->next = nullptr;
        if (tail) tail->next = t;
        else head = t;
        tail = t;
        ++count;
    }
    Tcb *pop() {
        Tcb *t = head;
        if (!t) return nullptr;
        head = t->next;
        if (!head) tail = nullptr;
        --count;
        return t;
    }
    // Work stealing (PolicyOps::give): the threads that have waited longest
    // go, from the head; `keep` and pinned threads stay at the head, in their
    // order. Looks at no more than 4 × max threads.
    size_t give(Tcb *keep, Tcb **out, size_t max) {
        size_t n = 0;
        FifoQueue kept;
        for (size_t looked = 0; n < max && head && looked < 4 * max; ++looked) {
            Tcb *t = pop();
            if (t == keep || t->pinned) kept.push(t);
            else out[n++] = t;
        }
        if (kept.head) { // back in front of the rest
            kept.tail->next = head;
            if (!head) tail = kept.tail;
            head = kept.head;
            count += kept.count;
        }
        return n;
    }
};

} // namespace weft::detail
