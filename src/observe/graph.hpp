// The blocking graph (Capriccio §4.1): where threads block, and what they do
// in between.
//
// A node is a blocking point, identified by the call chain that reached the
// park (a walk of the frame-pointer chain from the user's call of the weft_*
// function, at most `depth` return addresses, hashed with the park reason).
// An edge joins two consecutive blocking points of one thread and carries
// what the thread did between them: how often, an exponentially weighted
// average of its running time (TSC ticks), and of its resource changes
// (stack depth, descriptors, threads created, heap bytes when the heap
// accounting of libweft-heap is linked in). Each node also averages how
// long threads stay blocked there and how much stack they hold while they
// do. Two more nodes per thread entry function, "start" and "exit", close
// every thread's path; weft_yield is a blocking point too (reason "yield").
//
// One graph per vproc, written only by that vproc's kernel thread, with no
// lock and no atomic read-modify-write: nodes and edges live in blocks that
// never move, published by a count; a reader (a dump, another kernel
// thread) walks the blocks up to the count and reads the figures with
// relaxed loads. The hash tables that find a node or an edge are the
// writer's alone. Reports merge the vprocs' graphs by node key.
//
// Sampling (weft_config.graph_sample, WEFT_GRAPH): a vproc arms one park in
// N; the armed thread's next park records the edge between the two. N = 1
// records every edge and gives every park its node (the resource-aware
// policy needs that). Off, the park path tests one pointer.
//
// What it costs is measured in docs/observability.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace weft::detail {

struct Tcb;
struct Vproc;
struct Runtime;

inline constexpr int kChainMax = 8;

// The reason recorded for weft_yield: one past the park reasons.
inline constexpr int kYieldReason = 255;

// An exponentially weighted moving average: the first sample is the value,
// then each moves it by 1/8 of the difference (Capriccio does not give its
// weight; 1/8 follows a change within a few dozen samples and smooths out
// one-off outliers). Written by one thread, read by any.
struct Ewma {
    static constexpr double kWeight = 1.0 / 8;
    std::atomic<double> value{0};
    void add(double x, uint64_t samples_before) {
        double v = value.load(std::memory_order_relaxed);
        value.store(samples_before == 0 ? x : v + (x - v) * kWeight, std::memory_order_relaxed);
    }
    double get() const { return value.load(std::memory_order_relaxed); }
};

// What an edge tracks besides time: changes over the running segment.
enum GraphResource : int { kResStack, kResFds, kResThreads, kResHeap, kResCount };
extern const char *const kGraphResourceNames[kResCount];

struct GraphNode {
    enum Kind : uint8_t { Park, Start, Exit };
    uint64_t key;
    const void *chain[kChainMax]; // return addresses, innermost first (Start/Exit: the entry function)
    uint8_t depth;
    uint8_t reason;               // weft_park_reason, or kYieldReason (Park)
    Kind kind;
    std::atomic<uint64_t> visits{0};
    std::atomic<uint64_t> waits{0}; // visits whose wait was measured
    Ewma wait_ticks;              // parked here until running again
    Ewma stack;                   // stack bytes in use while parked here
    // Over the edges leaving it, as Capriccio keeps them: what running a
    // thread parked here is expected to cost (the resource-aware policy's
    // forecast). Updated with every outgoing edge taken, so the average
    // weighs each edge by how often it is taken.
    std::atomic<uint64_t> outs{0};
    Ewma out_ticks;
    Ewma out_res[kResCount];
};

struct GraphEdge {
    uint32_t from, to;            // node indices in the same graph
    std::atomic<uint64_t> count{0};
    Ewma ticks;                   // running time from `from` to `to`
    Ewma res[kResCount];          // resource change from `from` to `to`
};

// Per thread (Tcb::graph), while the graph is on: the segment being measured.
struct GraphThread {
    uint32_t from;                // node index + 1 the running segment started at; 0: not measuring
    uint32_t at;                  // node index + 1 parked at now (0: unknown, not sampled)
    uint64_t t_park;              // ticks when it parked at `at`
    uint64_t t0;                  // ticks when the segment began
    int64_t res0[kResCount];      // resource readings when it began
    GraphThread *next_free;
};

class BlockingGraph {
public:
    BlockingGraph(Vproc *vp, uint32_t sample, int depth);
    ~BlockingGraph();
    BlockingGraph(const BlockingGraph &) = delete;
    BlockingGraph &operator=(const BlockingGraph &) = delete;

    // The writer: the owning vproc's kernel thread. fp: the frame of the
    // function that parks (where the walk starts); site: the user's call.
    void on_park(Tcb *t, int reason, const void *site, void *fp);
    void on_resume(Tcb *t);
    void on_start(Tcb *t);
    void on_exit(Tcb *t);
    // Work stealing: t leaves for another vproc (its record comes back here),
    // and arrives from one (a new record, measuring from its next sampled
    // park: the segment that spans the move is not counted).
    void on_migrate_out(Tcb *t);
    void on_migrate_in(Tcb *t);

    // Readers, any thread: what is published so far.
    uint32_t node_count() const { return nodes_.load(std::memory_order_acquire); }
    uint32_t edge_count() const { return edges_.load(std::memory_order_acquire); }
    const GraphNode &node(uint32_t i) const { return node_blocks_[i / kBlock][i % kBlock]; }
    const GraphEdge &edge(uint32_t i) const { return edge_blocks_[i / kBlock][i % kBlock]; }
    // Ticks per nanosecond of graph_ticks(), for the writer's own use.
    double ticks_per_ns() const;
    uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
    uint32_t sample() const { return sample_; }
    int depth() const { return depth_; }

    static constexpr uint32_t kBlock = 256;
    static constexpr uint32_t kMaxNodes = 16384;
    static constexpr uint32_t kMaxEdges = 65536;

private:
    GraphThread *new_record(Tcb *t); // a zeroed record for t, from the free list
    void release_record(Tcb *t);     // t's record back to the free list (exit, or a move to another vproc)
    GraphNode &node_mut(uint32_t i) { return node_blocks_[i / kBlock][i % kBlock]; }
    GraphEdge &edge_mut(uint32_t i) { return edge_blocks_[i / kBlock][i % kBlock]; }
    // Index + 1 of the node, made if new; 0 when the graph is full.
    uint32_t find_node(GraphNode::Kind kind, int reason, const void *const *chain, int depth);
    uint32_t find_edge(uint32_t from, uint32_t to);
    void record(Tcb *t, GraphThread *g, uint32_t to, uint64_t now);
    void begin(Tcb *t, GraphThread *g, uint64_t now);
    void read_resources(Tcb *t, int64_t *out);

    Vproc *const vp_;
    const uint32_t sample_;
    const int depth_;
    uint32_t countdown_;
    std::atomic<uint32_t> nodes_{0}, edges_{0};
    std::atomic<uint64_t> dropped_{0};     // parks not recorded: the graph is full
    GraphNode *node_blocks_[kMaxNodes / kBlock] = {};
    GraphEdge *edge_blocks_[kMaxEdges / kBlock] = {};
    uint32_t *node_slots_;                 // open addressing: index + 1, 0 empty
    uint32_t *edge_slots_;
    GraphThread *free_ = nullptr;          // GraphThreads of finished threads
};

// The call chain of a park: return addresses from the frame at fp up, at
// most `max`, through the thread's own stack only (linked stacks: across its
// chunks, __morestack's frames left out, so a chain does not depend on where
// a chunk boundary fell). Starts at the frame that returns to `site` when it
// is among the first few (the weft-internal frames above it say nothing),
// else at `site` itself. Returns how many (at least 1 when site is given).
int walk_chain(const Tcb *t, void *fp, const void *site, const void **out, int max);

// The graph's sampling rate from the config or WEFT_GRAPH (0: off, N: one park
// in N) and the walk depth from WEFT_GRAPH_DEPTH (1..8). False with a message
// on a bad value.
bool resolve_graph_config(int configured_sample, int configured_depth, int *sample, int *depth);

// Writes every vproc's graph, merged, as JSON or DOT (weft.h's
// WEFT_GRAPH_JSON / WEFT_GRAPH_DOT). Returns 0 or an errno value.
int write_graph(Runtime *rt, FILE *out, int format);

// SIGUSR2 writes the graph (JSON and DOT) into WEFT_GRAPH_DIR or the working
// directory: the handler posts a semaphore, a kernel thread of the runtime's
// does the writing. Started with a runtime whose graph is on.
void start_graph_dumper(Runtime *rt);
void stop_graph_dumper(Runtime *rt);

// The time-stamp counter, and its rate (measured since the runtime began).
inline uint64_t graph_ticks() { return __builtin_ia32_rdtsc(); }
double graph_ticks_per_ns(const Runtime *rt);

} // namespace weft::detail
