// FIFO: one intrusive singly-linked queue through Tcb::next. Threads run in
// the order they became ready, so no ready thread waits behind more than the
// threads that were ready before it.
#include "core/tcb.hpp"
#include "sched/policy.hpp"

namespace weft::detail {

namespace {

struct FifoQueue {
    Tcb *head = nullptr; // next to run
    Tcb *tail = nullptr; // most recently readied
    size_t count = 0;
};

void *fifo_create(Vproc *) { return new FifoQueue; }
void fifo_destroy(void *s) { delete static_cast<FifoQueue *>(s); }

void fifo_enqueue(void *s, Tcb *t) {
    auto *q = static_cast<FifoQueue *>(s);
    t->next = nullptr;
    if (q->tail) q->tail->next = t;
    else q->head = t;
    q->tail = t;
    ++q->count;
}

Tcb *fifo_pick(void *s) {
    auto *q = static_cast<FifoQueue *>(s);
    Tcb *t = q->head;
    if (!t) return nullptr;
    q->head = t->next;
    if (!q->head) q->tail = nullptr;
    --q->count;
    return t;
}

size_t fifo_ready(void *s) { return static_cast<FifoQueue *>(s)->count; }

} // namespace

const PolicyOps kFifoPolicy = {
    "fifo", fifo_create, fifo_destroy, fifo_enqueue, fifo_pick, fifo_ready, nullptr,
};

} // namespace weft::detail
