// FIFO: one intrusive singly-linked queue through Tcb::next. Threads run in
// the order they became ready, so no ready thread waits behind more than the
// threads that were ready before it — with one bounded exception, run-next:
//
// Run-next (push_next): a thread just created, and a joiner whose child has
// just exited on its vproc, go to the head, not the tail — in the order the
// running thread readied them. That is what a call and a return do in
// sequential code, and it keeps a fork-join tree depth-first: the live
// threads are the tree's depth, not its breadth, so their stacks stay in
// the pool's hot cache instead of being faulted in and given back (fib(24),
// 150,049 threads: 33 ns per thread instead of 3.3 us; docs/stealing.md).
//
// Fairness: run-next threads form a prefix of the queue (next_count long,
// ending at next_last). Once kNextStreakMax of them in a row have run while
// ordinary threads waited behind them, the oldest of those runs next, and
// the prefix keeps its order. So ordinary threads keep at least one
// dispatch in kNextStreakMax + 1, in FIFO order. (Queuing push_next at the
// tail instead, once the streak was used up, turned the tree breadth-first
// again under work stealing: thousands of live stacks, madvise and TLB
// shoot-downs.)
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
    size_t next_count = 0;   // run-next threads at the head (a prefix; <= count)
    Tcb *next_last = nullptr; // the prefix's last thread (nullptr: no prefix)
    Tcb *batch_last = nullptr; // the last run-next thread the running thread readied (see push_next)
    uint32_t next_streak = 0; // run-next threads run in a row while ordinary ones waited

    static constexpr uint32_t kNextStreakMax = 32;

    void push(Tcb *t) {
        t->next = nullptr;
        if (tail) tail->next = t;
        else head = t;
        tail = t;
        ++count;
    }
    // Threads the running thread readies this way run in the order it
    // readied them (batch_last: the last of them so far; a pop, which
    // starts another thread, ends the batch), ahead of everything else.
    void push_next(Tcb *t) {
        if (Tcb *b = batch_last) { // after the running thread's earlier ones
            t->next = b->next;
            b->next = t;
            if (tail == b) tail = t;
            if (next_last == b) next_last = t;
        } else {
            t->next = head;
            head = t;
            if (!tail) tail = t;
            if (!next_count) next_last = t;
        }
        batch_last = t;
        ++next_count;
        ++count;
    }
    Tcb *pop() {
        Tcb *t = head;
        if (!t) return nullptr;
        batch_last = nullptr;
        if (__builtin_expect(next_count != 0, 0)) {
            if (count > next_count) { // ordinary threads wait behind the prefix
                if (next_streak == kNextStreakMax) {
                    next_streak = 0;
                    return pop_after(next_last); // the oldest of them, once
                }
                ++next_streak;
            } else {
                next_streak = 0;
            }
            if (--next_count == 0) next_last = nullptr;
        } else {
            next_streak = 0;
        }
        head = t->next;
        if (!head) tail = nullptr;
        --count;
        return t;
    }
    // Work stealing (PolicyOps::give). Ordinary threads go oldest first;
    // then run-next threads, also oldest first: from the far end of the
    // prefix, where in a fork-join tree wait the roots of the largest
    // subtrees left (the newest, at the head, are the smallest, and the
    // ones this vproc runs next). `keep` and pinned threads stay, in their
    // order. Looks at no more than 4 × max threads.
    size_t give(Tcb *keep, Tcb **out, size_t max) {
        size_t n = 0, budget = 4 * max;
        Tcb *pre = nullptr; // the prefix, taken off and reversed: oldest first
        size_t taken = 0;
        for (; taken < next_count && taken < budget; ++taken) {
            Tcb *t = head;
            head = t->next;
            t->next = pre;
            pre = t;
        }
        if (!head) tail = nullptr;
        count -= taken;
        next_count = 0;
        batch_last = nullptr; // it may leave: the next push_next starts at the head
        budget -= taken;
        FifoQueue kept; // ordinary threads that stay, in order
        for (; n < max && head && budget; --budget) {
            Tcb *t = pop();
            if (t == keep || t->pinned) kept.push(t);
            else out[n++] = t;
        }
        Tcb *rest = nullptr, *rest_last = nullptr; // prefix threads that stay, newest first again
        size_t rest_count = 0;
        while (Tcb *t = pre) {
            pre = t->next;
            if (n < max && t != keep && !t->pinned) {
                out[n++] = t;
            } else {
                t->next = rest;
                rest = t;
                if (!rest_last) rest_last = t;
                ++rest_count;
            }
        }
        if (kept.head) { // back in front of the rest
            kept.tail->next = head;
            if (!head) tail = kept.tail;
            head = kept.head;
            count += kept.count;
        }
        if (rest) { // and the prefix in front of them, still the prefix
            rest_last->next = head;
            if (!head) tail = rest_last;
            head = rest;
            count += rest_count;
            next_count = rest_count;
        }
        next_last = rest_last;
        return n;
    }

private:
    Tcb *pop_after(Tcb *p) { // p's successor, which exists
        Tcb *t = p->next;
        p->next = t->next;
        if (tail == t) tail = p;
        --count;
        return t;
    }
};

} // namespace weft::detail
