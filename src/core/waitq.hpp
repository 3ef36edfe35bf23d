// An intrusive FIFO of parked threads, doubly linked through the TCB so a
// thread whose deadline expires can leave from the middle in O(1).
// The queue has no lock of its own: the object that owns it (a mutex, a
// condition variable ...) guards it with its Spin, and parks its waiters
// with that Spin (see park.hpp: wait_on).
#pragma once

#include "core/tcb.hpp"

namespace weft::detail {

struct WaitQueue {
    Tcb *head = nullptr;
    Tcb *tail = nullptr;

    bool empty() const { return head == nullptr; }

    void push_back(Tcb *t) {
        t->wq_next = nullptr;
        t->wq_prev = tail;
        if (tail) tail->wq_next = t;
        else head = t;
        tail = t;
        t->waiting_on = this;
    }

    void push_front(Tcb *t) {
        t->wq_prev = nullptr;
        t->wq_next = head;
        if (head) head->wq_prev = t;
        else tail = t;
        head = t;
        t->waiting_on = this;
    }

    void remove(Tcb *t) {
        if (t->wq_prev) t->wq_prev->wq_next = t->wq_next;
        else head = t->wq_next;
        if (t->wq_next) t->wq_next->wq_prev = t->wq_prev;
        else tail = t->wq_prev;
        t->wq_prev = t->wq_next = nullptr;
        __atomic_store_n(&t->waiting_on, nullptr, __ATOMIC_RELEASE); // read unlocked after a timeout
    }

    Tcb *pop_front() {
        Tcb *t = head;
        if (!t) return nullptr;
        head = t->wq_next;
        if (head) head->wq_prev = nullptr;
        else tail = nullptr;
        t->wq_next = nullptr;
        __atomic_store_n(&t->waiting_on, nullptr, __ATOMIC_RELEASE); // read unlocked after a timeout
        return t;
    }
};
static_assert(sizeof(WaitQueue) == 16, "public sync structs reserve 16 bytes for it");

} // namespace weft::detail
