#include "sched/policy.hpp"

#include <cstring>

#include "core/tcb.hpp"

namespace weft::detail {

namespace {
const PolicyOps *const kPolicies[] = {&kFifoPolicy, &kResourcePolicy, &kCohortPolicy, &kTapPolicy};
}

const PolicyOps *find_policy(const char *name) {
    for (const PolicyOps *p : kPolicies)
        if (std::strcmp(p->name, name) == 0) return p;
    return nullptr;
}

const char *policy_names() { return "fifo, resource, cohort, tap"; }

size_t give_by_pick(const PolicyOps *p, void *state, Tcb *keep, Tcb **out, size_t max) {
    size_t n = 0;
    Tcb *kept = nullptr, **kept_tail = &kept;
    for (size_t looked = 0; n < max && looked < 4 * max; ++looked) {
        Tcb *t = p->pick(state);
        if (!t) break;
        if (t == keep || t->pinned) {
            *kept_tail = t;
            kept_tail = &t->next;
        } else {
            out[n++] = t;
        }
    }
    *kept_tail = nullptr;
    for (Tcb *t = kept; t;) {
        Tcb *next = t->next; // enqueue reuses the link
        p->enqueue(state, t);
        t = next;
    }
    return n;
}

} // namespace weft::detail
