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
// 150,049 threads: 32-37 ns per thread instead of 3.3 us; docs/stealing.md).
//
// Run-next threads wait in a list of their own, which pop looks at first:
// the ordinary path pays one load and a branch for it (pop_next is out of
// line: inlined, it cost every switch 5 instructions more).
//
// Fairness: once kNextStreakMax run-next threads in a row have run while
// ordinary threads waited, the oldest ordinary thread runs next, and the
// run-next list keeps its order. So ordinary threads keep at least one
// dispatch in kNextStreakMax + 1, in FIFO order. (Queuing push_next at the
// tail instead, once the streak was used up, turned the tree breadth-first
// again under work stealing: thousands of live stacks, madvise and TLB
// shoot-downs.)
//
// The queue is in a header because it is the default policy: the scheduler
// calls it inline when the vproc runs FIFO (Vproc::fifo), saving the two
// indirect calls per switch that any other policy costs. It is still reached
// through kFifoPolicy like every policy; the inline path is only a shortcut.
// Its one instance per vproc is a member of the vproc (Vproc::runq, beside
// the other fields a switch touches), which kFifoPolicy's create() returns.
#pragma once

#include <cstddef>

#include "core/tcb.hpp"

namespace weft::detail {

struct FifoQueue {
    Tcb *head = nullptr;       // ordinary threads: next to run
    Tcb *tail = nullptr;       //   ... most recently readied
    size_t count = 0;          // every thread queued, run-next ones included
    Tcb *next_head = nullptr;  // run-next threads, which run before the ordinary ones
    size_t next_count = 0;
    Tcb *batch_last = nullptr; // the last run-next thread the running thread readied (see push_next)
    uint32_t next_streak = 0;  // run-next threads run in a row while ordinary ones waited

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
        } else {
            t->next = next_head;
            next_head = t;
        }
        batch_last = t;
        ++next_count;
        ++count;
    }
    Tcb *pop() {
        if (__builtin_expect(next_head != nullptr, 0)) return pop_next();
        return pop_ordinary<true>();
    }

    // Work stealing (PolicyOps::give). Ordinary threads go oldest first;
    // then run-next threads, also oldest first: from the far end of their
    // list, where in a fork-join tree wait the roots of the largest
    // subtrees left (the newest, at its head, are the smallest, and the
    // ones this vproc runs next). `keep` and pinned threads stay, in their
    // order. Looks at no more than 4 × max ordinary threads.
    size_t give(Tcb *keep, Tcb **out, size_t max) {
        size_t n = 0;
        FifoQueue kept; // ordinary threads that stay, in order
        for (size_t looked = 0; n < max && head && looked < 4 * max; ++looked) {
            Tcb *t = pop_ordinary();
            if (t == keep || t->pinned) kept.push(t);
            else out[n++] = t;
        }
        if (kept.head) { // back in front of the rest
            kept.tail->next = head;
            if (!head) tail = kept.tail;
            head = kept.head;
            count += kept.count;
        }
        batch_last = nullptr; // it may leave: the next push_next starts at the head
        if (n == max || !next_head) return n;
        // The run-next list is singly linked, newest first: look at no more
        // than its first 4 × max (a burst of created threads can make it
        // tens of thousands long, and walking it all at every give cost
        // 44% of the time of 65,536 producer-consumer threads). In a
        // fork-join tree it is about the tree's depth, so that is all of it.
        Tcb *oldest_first = nullptr, *rest = next_head;
        size_t walked = 0;
        for (; rest && walked < 4 * max; ++walked) {
            Tcb *after = rest->next;
            rest->next = oldest_first;
            oldest_first = rest;
            rest = after;
        }
        next_head = rest; // rebuilt in front of the rest from what stays, newest first again
        size_t stay = 0;
        for (Tcb *t = oldest_first; t;) {
            Tcb *after = t->next;
            if (n < max && t != keep && !t->pinned) {
                out[n++] = t;
            } else {
                t->next = next_head;
                next_head = t;
                ++stay;
            }
            t = after;
        }
        stay += next_count - walked;
        count -= next_count - stay;
        next_count = stay;
        return n;
    }

private:
    // kPrefetch: the popped thread runs now, so start bringing in the one
    // after it (prefetch_for_switch; not for give, which runs nothing).
    template <bool kPrefetch = false>
    Tcb *pop_ordinary() {
        Tcb *t = head;
        if (!t) return nullptr;
        head = t->next;
        if (!head) tail = nullptr;
        else if (kPrefetch) prefetch_for_switch(head);
        --count;
        return t;
    }
    [[gnu::noinline]] Tcb *pop_next() {
        batch_last = nullptr;
        if (head) { // ordinary threads wait
            if (next_streak == kNextStreakMax) {
                next_streak = 0;
                return pop_ordinary<true>(); // the oldest of them, once
            }
            ++next_streak;
        } else {
            next_streak = 0;
        }
        Tcb *t = next_head;
        next_head = t->next;
        --next_count;
        --count;
        return t;
    }
};

} // namespace weft::detail
