#include "sched/policy.hpp"

#include <cstring>

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

} // namespace weft::detail
