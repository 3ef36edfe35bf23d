// The cohort policy (WEFT_POLICY=cohort): cohort scheduling for plain
// threads (StagedServer §2.1; docs/staged.md). Ready threads are grouped by
// where they last blocked, and a group's threads run back to back — the
// threads that waited at one call site run the same code next, so they find
// it and its data in the caches the previous one warmed.
//
// The key is the blocking site: the return address of the weft call the
// thread parked in (Tcb::park_site) — the paper's "next PC" — or, with the
// blocking graph on (WEFT_GRAPH=1), the graph node it parked at: its whole
// call chain, WEFT_GRAPH_DEPTH frames deep, so that threads blocked in one
// shared wrapper (a read_fully() every request calls) are told apart by
// who called it. bench/stage/cohort_sites.cc measures the difference. New
// threads, which never parked, form one group. Groups take turns in the order they first had a ready thread;
// a group runs at most kCohortMax threads before the next group's turn, so
// one busy site cannot starve the others (a thread waits behind at most
// kCohortMax threads of each other group).
//
// O(1): a group is found by an open-addressed table of site -> group (sites
// are few: the call sites of blocking calls in the program), and a group's
// threads are the FIFO policy's queue (sched/fifo.hpp).
#include <cstdint>
#include <cstdlib>
#include <new>

#include "core/tcb.hpp"
#include "observe/graph.hpp"
#include "sched/fifo.hpp"
#include "sched/policy.hpp"

namespace weft::detail {

namespace {

constexpr uint32_t kCohortMax = 64;
constexpr uint32_t kSlots = 1024; // groups per vproc; more sites share the last group

struct Group {
    const void *site = nullptr;
    FifoQueue threads;   // its ready threads, in the order they became ready
    bool queued = false; // in the turn order
    Group *next = nullptr; // turn order
};

struct CohortState {
    Group slots[kSlots];
    uint32_t used = 0;
    Group *turn_head = nullptr, *turn_tail = nullptr; // groups with ready threads
    Group *current = nullptr;                          // the group running its cohort
    uint32_t ran = 0;                                  // threads of `current` run this turn
    size_t ready = 0;

    // slots[0]: new threads (no site yet), and every site once the table is full.
    Group *group_of(const void *site) {
        if (!site) return &slots[0];
        uintptr_t h = reinterpret_cast<uintptr_t>(site);
        h ^= h >> 17;
        h *= 0x9e3779b97f4a7c15ull;
        uint32_t i = static_cast<uint32_t>(h >> 40) & (kSlots - 1);
        for (uint32_t probe = 0; probe < kSlots; ++probe, i = (i + 1) & (kSlots - 1)) {
            if (i == 0) continue;
            Group &g = slots[i];
            if (g.site == site) return &g;
            if (!g.site) { // sites are never removed: they are the program's call sites
                if (used >= kSlots / 2) return &slots[0];
                g.site = site;
                ++used;
                return &g;
            }
        }
        return &slots[0];
    }
    void push_turn(Group *g) {
        g->queued = true;
        g->next = nullptr;
        if (turn_tail) turn_tail->next = g;
        else turn_head = g;
        turn_tail = g;
    }
    Group *pop_turn() {
        Group *g = turn_head;
        if (!g) return nullptr;
        turn_head = g->next;
        if (!turn_head) turn_tail = nullptr;
        g->queued = false;
        return g;
    }
};

void *cohort_create(Vproc *) { return new (std::nothrow) CohortState; }
void cohort_destroy(void *s) { delete static_cast<CohortState *>(s); }

// The call chain's node (tagged with the top bit: no return address has
// it) when the graph recorded the park, else the return address.
const void *site_key(const Tcb *t) {
    if (t->graph && t->graph->at) return reinterpret_cast<const void *>((uintptr_t{1} << 63) | t->graph->at);
    return t->park_site;
}

void cohort_enqueue(void *st, Tcb *t) {
    auto *s = static_cast<CohortState *>(st);
    // A thread that never parked has no site yet; one that yielded keeps the
    // site of its last park (yielding is not blocking).
    const void *key = site_key(t);
    Group *g = key ? s->group_of(key) : &s->slots[0];
    g->threads.push(t);
    ++s->ready;
    if (!g->queued && g != s->current) s->push_turn(g);
}

Tcb *cohort_pick(void *st) {
    auto *s = static_cast<CohortState *>(st);
    Group *g = s->current;
    if (g && (g->threads.count == 0 || s->ran >= kCohortMax)) {
        if (g->threads.count && !g->queued) s->push_turn(g); // its turn is over; it waits for the next
        g = nullptr;
    }
    if (!g) {
        g = s->pop_turn();
        s->ran = 0;
        s->current = g;
        if (!g) return nullptr;
    }
    Tcb *t = g->threads.pop();
    --s->ready;
    ++s->ran;
    return t;
}

size_t cohort_ready(void *st) { return static_cast<CohortState *>(st)->ready; }

size_t cohort_give(void *st, Tcb *keep, Tcb **out, size_t max) { return give_by_pick(&kCohortPolicy, st, keep, out, max); }

} // namespace

const PolicyOps kCohortPolicy = {
    "cohort", cohort_create, cohort_destroy, cohort_enqueue, cohort_pick, cohort_ready, nullptr, nullptr, cohort_give, nullptr,
};

} // namespace weft::detail
