// The FIFO policy's table (the queue itself is in fifo.hpp).
#include "sched/fifo.hpp"

#include "core/vproc.hpp"
#include "sched/policy.hpp"

namespace weft::detail {

namespace {

// The queue is the vproc's own (Vproc::runq, beside the other fields a
// switch reads): nothing to allocate or free.
void *fifo_create(Vproc *vp) { return &vp->runq; }
void fifo_destroy(void *) {}
void fifo_enqueue(void *s, Tcb *t) { static_cast<FifoQueue *>(s)->push(t); }
Tcb *fifo_pick(void *s) { return static_cast<FifoQueue *>(s)->pop(); }
size_t fifo_ready(void *s) { return static_cast<FifoQueue *>(s)->count; }
size_t fifo_give(void *s, Tcb *keep, Tcb **out, size_t max) { return static_cast<FifoQueue *>(s)->give(keep, out, max); }

} // namespace

const PolicyOps kFifoPolicy = {
    "fifo", fifo_create, fifo_destroy, fifo_enqueue, fifo_pick, fifo_ready, nullptr, nullptr, fifo_give, nullptr,
};

} // namespace weft::detail
