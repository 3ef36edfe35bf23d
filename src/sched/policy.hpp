// The scheduling-policy contract.
//
// A policy decides which ready thread of a vproc runs next. It is a table of
// operations with one state object per vproc; the scheduler loop
// (core/vproc.cc) calls only these, so a new policy is a new file here plus a
// line in policy.cc's registry — never an edit to the loop. FIFO is the
// default; resource-aware, cohort and TAP policies plug in the same way.
//
// Every implementation must provide:
//   create(vp)        state for one vproc (called on that vproc's runtime start)
//   destroy(state)    free it (called with no ready threads left)
//   enqueue(state,t)  t became ready on this vproc; O(1)
//   pick(state)       remove and return the thread to run next, or nullptr; O(1)
//   ready(state)      how many threads are ready
// and may provide (nullptr = not interested):
//   on_park(state, t, reason, site)   t is about to park (reason: weft_park_reason,
//                                     site: where it blocked, see core/park.hpp)
//   admit(state, t)                   t, the running thread, is about to take on
//                                     new work (weft_admit: a connection it was
//                                     created for); false: shed it instead
//                                     (admission control)
//   admit_new(state)                  the running thread is about to create a
//                                     thread for new work (weft_admit_new: an
//                                     acceptor); false: refuse it at the door,
//                                     before a thread exists
//   give(state, keep, out, max)       work stealing: remove up to max ready
//                                     threads for another vproc to run and
//                                     store them in out; return how many. Never
//                                     `keep` (the running thread, which may be
//                                     queued before it has switched out) nor a
//                                     pinned thread (Tcb::pinned). nullptr: the
//                                     policy never gives threads away (tap).
//                                     give_by_pick implements it with pick and
//                                     enqueue for a policy with no cheaper way.
//
// Tcb::policy_word is the policy's to use, one word per thread, never
// touched by anything else (not initialised at creation: set it in enqueue).
//
// All operations run on the vproc that owns the state, never concurrently:
// threads woken from other vprocs arrive through the vproc's inbox first.
#pragma once

#include <cstddef>

namespace weft::detail {

struct Tcb;
struct Vproc;

struct PolicyOps {
    const char *name;
    void *(*create)(Vproc *vp);
    void (*destroy)(void *state);
    void (*enqueue)(void *state, Tcb *t);
    Tcb *(*pick)(void *state);
    size_t (*ready)(void *state);
    void (*on_park)(void *state, Tcb *t, int reason, const void *site);
    bool (*admit)(void *state, Tcb *t);
    size_t (*give)(void *state, Tcb *keep, Tcb **out, size_t max);
    bool (*admit_new)(void *state);
};

// give() for any policy: picks up to max threads, and enqueues back those
// it may not give (they then queue behind the rest, in their order).
size_t give_by_pick(const PolicyOps *p, void *state, Tcb *keep, Tcb **out, size_t max);

// The policy called `name`, or nullptr. Names: "fifo", "resource", "cohort", "tap".
const PolicyOps *find_policy(const char *name);
// Comma-separated list of known names, for error messages.
const char *policy_names();

extern const PolicyOps kFifoPolicy;
extern const PolicyOps kResourcePolicy; // sched/resource.hpp
extern const PolicyOps kCohortPolicy;   // sched/cohort.cc
extern const PolicyOps kTapPolicy;      // sched/tap.cc

} // namespace weft::detail
