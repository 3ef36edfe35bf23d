// The resource-aware policy (Capriccio §4.2): run queues per blocking-graph
// node, node priorities from what running a thread there is expected to
// cost and from how booked each resource is, nodes chosen by stride
// scheduling, threads FIFO within a node.
//
// The forecast of a node is the blocking graph's average over the edges
// leaving it (observe/graph.hpp): running time, heap bytes, descriptors and
// threads created. Every `period` the policy reads the utilization of each
// rationed resource (ResourceMonitor, below) and recomputes the tickets of
// every node:
//
//   - a resource is *over-booked* from the moment its utilization reaches
//     `high` until it falls below `low` (the hysteresis);
//   - while one is over-booked, nodes that release it get `promote` times
//     their tickets and nodes that acquire it are divided by `demote`
//     (at least 1 ticket: the policy stays work-conserving, a held node
//     still runs when nothing else is ready);
//   - while one has plenty of room (below low / 2), nodes that acquire it
//     get twice their tickets: more of it in use means more throughput.
//
// What "acquires" means per resource: memory, a positive heap change;
// descriptors, a positive descriptor change. For the CPU only finishing
// work counts (a descriptor closed releases it): under CPU overload the
// policy finishes admitted work first.
//
// Admission control for the CPU is a verdict, not a ticket count
// (weft_admit), on the delay rather than the queue's length (CoDel's idea):
// each thread is stamped when it becomes ready, and a thread that has not
// run yet keeps how long it waited for its first run. While the CPU is
// over-booked, a thread created for new work that asks is told to shed it
// if it waited longer than twice `admit_target` (the door keeps the wait
// near the target); a server then refuses the
// connection at once instead of serving it late. New work is neither held
// back nor pushed by the tickets, and nothing holds the acceptor back:
// waiting happens where the runtime sees and bounds it, not unseen in the
// kernel's accept queue (docs/scheduling.md). An acceptor may ask first,
// before a thread exists (weft_admit_new): the Door below refuses a share
// of arrivals at once, which costs no thread. Memory and descriptors hold
// new work back through the tickets alone.
//
// Stride scheduling: each node with ready threads has a pass; the smallest
// pass runs next and advances by stride = kStrideOne / tickets. A node that
// becomes ready again resumes one stride past the current global pass (as
// a new client of stride scheduling does), so an idle spell earns no burst
// and, among nodes readied together, the one with more tickets runs first.
// When a node's tickets change, what is left of its current stride is
// scaled to the new one (Waldspurger's rule for dynamic tickets), so a node
// demoted a while ago does not carry its long stride into a promotion. The nodes with ready threads are kept in a binary heap by
// pass: pick is O(log k) in the number k of such nodes (a few, in practice;
// Capriccio claims O(1) without saying how), enqueue O(1) unless the node
// was idle (then O(log k)).
//
// ResourceScheduler is the queueing and priority logic on its own, tested on
// synthetic forecasts (tests/test_graph.cc); resource.cc binds it to a vproc,
// its graph and the machine's resource readings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tcb.hpp"

namespace weft::detail {

// The rationed resources.
enum RationedResource : int { kRCpu, kRMem, kRFds, kRCount };
extern const char *const kRationedNames[kRCount];

// What running a thread parked at a node is expected to change.
struct Forecast {
    bool known = false;  // the node has outgoing edges measured
    double ticks = 0;    // running time
    double heap = 0;     // heap bytes
    double fds = 0;      // descriptors
    double threads = 0;  // threads created
};

struct ResourceParams {
    double high = 0.90;        // a resource is over-booked from this utilization ...
    double low = 0.80;         // ... until it falls below this
    uint32_t base = 100;       // tickets of a node nothing promotes or demotes
    uint32_t promote = 4;      // factor for nodes that release an over-booked resource
    uint32_t demote = 16;      // divisor for nodes that acquire one
    uint32_t max_tickets = 100 * 4 * 4 * 4 * 2;
    double heap_epsilon = 256; // heap change below this many bytes is neither
    double count_epsilon = 0.05; // nor is a descriptor or thread change below this
    uint64_t admit_target_ns = 100'000'000; // weft_admit: new work that waited longer is shed under CPU overload
};

// The door (weft_admit_new): whether to refuse new work before a thread
// exists for it. A random early refusal with probability p, p steered by
// PIE's controller (RFC 8033) on how late work runs (update(), below):
// every period p moves by alpha times that delay's excess over the
// target and beta times its change since the last period (both in units of
// the target), in small steps while p is small (PIE's auto-tuning, so one
// bad period does not close the door). The door refuses nothing while the
// CPU is not over-booked; p then fades by 2 % a period (PIE's decay) rather than
// dropping to 0, because a CPU near the hysteresis' lower bound flips in and
// out of over-booking, and a door that forgot p at each flip would open
// wide every time. A period in which the vproc slept halves p: the CPU
// had room, so the door had refused more than the load needed.
// Refusing a share of arrivals at once, instead of every one past a
// threshold, sheds what overload needs and no more; and a refusal at the
// door costs no thread (docs/scheduling.md, "(6) the door").
class Door {
public:
    // Per target's worth of delay, every 10 ms period: 8x PIE's gains (0.125
    // and 1.25 per second of delay, every 15 ms) at the default 100 ms
    // target. PIE's own suit a network queue; here an arrival's work lasts a
    // session of hundreds of ms, and at PIE's gains p followed the load too
    // slowly (measured, docs/scheduling.md (6): 83 % of the peak rate held
    // at 3x, 89 % at 4x the gains, 98 % at 8x).
    static constexpr double kAlpha = 0.1;
    static constexpr double kBeta = 1.0;

    // Once per period: delay_ns, how late work now runs: the longest wait
    // of a new thread picked in the period for its first run (or the age
    // of the oldest still waiting, if longer), or a third of the longest
    // wait of any thread picked, if that is longer (admitted work may wait
    // three targets: its requests' p99 stays bounded, and the CPU is not
    // starved by refusing for the waits of new work alone).
    void update(uint64_t delay_ns, uint64_t target_ns, bool cpu_over);
    // Draw: true to refuse this arrival.
    bool refuse();
    double p() const { return p_; }
    // The share refused now: p while the CPU is over-booked, else 0.
    double share() const { return over_ ? p_ : 0; }
    void halve() { p_ /= 2; }

private:
    double p_ = 0;
    bool over_ = false;
    uint64_t last_delay_ = 0, target_ = 1;
    uint64_t rng_ = 0x9e3779b97f4a7c15u;
};

class ResourceScheduler {
public:
    static constexpr uint64_t kStrideOne = uint64_t{1} << 24;
    static constexpr uint32_t kNewWork = 0; // the queue of threads without a node (new threads)

    explicit ResourceScheduler(const ResourceParams &p = {}) : p_(p) {}

    // node: graph node index + 1, or kNewWork.
    void enqueue(Tcb *t, uint32_t node);
    Tcb *pick();
    size_t ready() const { return ready_; }

    // New utilizations (usage / capacity; negative: capacity unknown, never
    // over-booked) and the forecast of every node 1..nodes: recompute the
    // tickets. A node first seen later starts with `base` until the next
    // update.
    template <class ForecastFn> void update(const double (&util)[kRCount], uint32_t nodes, ForecastFn &&forecast) {
        set_utilization(util);
        queue(nodes);
        for (uint32_t n = 0; n < queues_.size(); ++n) set_tickets(n, tickets_for(n == kNewWork ? new_work() : forecast(n)));
        for (size_t i = heap_.size() / 2; i-- > 0;) sift_down(i); // passes moved
    }
    uint32_t tickets_for(const Forecast &f) const;
    bool over(int r) const { return over_[r]; }
    // weft_admit's verdict for a thread that waited `waited_ns` between its
    // creation and its first run: shed past kShedFactor times the target.
    // The door (Door) holds that wait near the target itself, so about half
    // the arrivals it lets in wait longer than the target; shedding them
    // all left the CPU idle a fifth of the time at 3x overload. The factor
    // keeps the tail bounded and the door does the regulating.
    static constexpr uint64_t kShedFactor = 2;
    bool admit(uint64_t waited_ns) const {
        return !over_[kRCpu] || waited_ns <= kShedFactor * p_.admit_target_ns;
    }
    // The oldest thread waiting for its first run (its policy_word is the
    // stamp of its enqueue), or nullptr: its age is part of the delay the
    // door (Door) is steered by.
    Tcb *oldest_new() const { return queues_.empty() ? nullptr : queues_[kNewWork].head; }
    uint32_t tickets(uint32_t node) const { return node < queues_.size() ? queues_[node].tickets : p_.base; }
    const ResourceParams &params() const { return p_; }

private:
    struct Queue {
        Tcb *head = nullptr, *tail = nullptr;
        uint64_t pass = 0;
        uint64_t stride = 0;
        uint32_t tickets = 0;
        int32_t heap_at = -1; // position in heap_, -1: no ready threads
    };
    static Forecast new_work() {
        Forecast f;
        f.known = true;
        return f; // a thread that has not run yet: neither acquires nor releases (weft_admit decides)
    }
    void set_utilization(const double (&util)[kRCount]);
    void set_tickets(uint32_t node, uint32_t tickets);
    Queue &queue(uint32_t node);
    bool before(uint32_t a, uint32_t b) const { return queues_[a].pass < queues_[b].pass; }
    void sift_up(size_t i);
    void sift_down(size_t i);
    void heap_swap(size_t i, size_t j);

    ResourceParams p_;
    std::vector<Queue> queues_;
    std::vector<uint32_t> heap_; // nodes with ready threads, by pass
    uint64_t global_pass_ = 0;
    size_t ready_ = 0;
    bool over_[kRCount] = {};
    double util_[kRCount] = {-1, -1, -1};
};

// The memory limit of the process's memory cgroup: v1's
// memory.limit_in_bytes or v2's memory.max, the smallest of its cgroup's
// and their ancestors'; 0 if none (the policy's default capacity).
uint64_t cgroup_memory_limit();

} // namespace weft::detail
