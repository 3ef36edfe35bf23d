// The blocking graph (graph.hpp): recording at the park seam, merged
// reports, and the SIGUSR2 dump.
#include "observe/graph.hpp"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/runtime.hpp"
#include "observe/symbols.hpp"

// libweft-heap (src/observe/heap.cc) when the program links it or preloads
// it: the heap bytes the calling kernel thread has allocated less those it
// has freed. Without it, heap changes read 0.
extern "C" __attribute__((weak)) int64_t weft_heap_thread_bytes(void);

#if WEFT_LINKED_STACKS
extern "C" char __morestack[];
extern "C" char weft_morestack_end[];
#endif

namespace weft::detail {

const char *const kGraphResourceNames[kResCount] = {"stack", "fds", "threads", "heap"};

namespace {

// How many frames above the park the walk looks for the user's call site.
constexpr int kSkipMax = 6;

// An edge is flagged slow (yield profiling, Capriccio §4.3) when its mean
// running time is this many times the graph's typical edge time (the
// count-weighted median of the edges' means)...
constexpr double kSlowFactor = 100;
// ... and at least this long: in a graph of sub-microsecond edges a 50 µs
// one is no sign of a thread that forgets to yield.
constexpr double kSlowMinNs = 100e3;

uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
}

uint64_t node_key(GraphNode::Kind kind, int reason, const void *const *chain, int depth) {
    uint64_t h = mix(static_cast<uint64_t>(kind) << 8 | static_cast<uint64_t>(reason & 0xff), 0x77656674);
    for (int i = 0; i < depth; ++i) h = mix(h, reinterpret_cast<uintptr_t>(chain[i]));
    return h ? h : 1;
}

// Whether `bytes` at p (a frame record: saved rbp, return address, ...)
// lie on t's stack.
bool on_stack(const Tcb *t, uintptr_t p, uintptr_t bytes = 16) {
    if (p & 7) return false;
    if (t->chunk) {
        for (StackChunk *c = t->chunk; c; c = c->prev)
            if (p >= reinterpret_cast<uintptr_t>(c->base()) && p + bytes <= reinterpret_cast<uintptr_t>(c->hi()))
                return true;
        return false;
    }
    return p >= reinterpret_cast<uintptr_t>(t->stack.lo) && p + bytes <= reinterpret_cast<uintptr_t>(t->stack.hi());
}

// Bytes of stack t holds below its top when its frame is at fp.
int64_t stack_depth(const Tcb *t, const void *fp) {
    auto p = reinterpret_cast<uintptr_t>(fp);
    if (!t->chunk) return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t->stack.hi()) - p);
    int64_t d = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t->chunk->hi()) - p);
    for (StackChunk *c = t->chunk->prev; c; c = c->prev) d += static_cast<int64_t>(c->size);
    return d;
}

} // namespace

int walk_chain(const Tcb *t, void *fp0, const void *site, const void **out, int max) {
    const void *raw[kChainMax + kSkipMax];   // return addresses, as the program sees its callers
    const void *found[kChainMax + kSkipMax]; // what the frames hold (differs across a chunk boundary)
    int n = 0;
    auto fp = reinterpret_cast<uintptr_t>(fp0);
    while (n < max + kSkipMax && on_stack(t, fp)) {
        const auto *f = reinterpret_cast<const uintptr_t *>(fp);
        uintptr_t next = f[0], ret = f[1];
        found[n] = reinterpret_cast<const void *>(ret);
#if WEFT_LINKED_STACKS
        // A function called by __morestack on a new chunk: its caller's frame
        // record is __morestack's, on the chunk below, where the caller's
        // return address sits one word higher (morestack_sysv_elf.S).
        if (ret >= reinterpret_cast<uintptr_t>(__morestack) && ret < reinterpret_cast<uintptr_t>(weft_morestack_end)) {
            if (!on_stack(t, next, 24)) break;
            const auto *m = reinterpret_cast<const uintptr_t *>(next);
            next = m[0];
            ret = m[2];
        }
#endif
        if (!ret) break;
        raw[n++] = reinterpret_cast<const void *>(ret);
        if (!t->chunk && next <= fp) break; // one stack: callers' frames lie above
        fp = next;
    }
    // The site is a return address as the weft_* function saw it: inside
    // __morestack when that call linked a chunk.
    int start = -1;
    for (int i = 0; i < n && i <= kSkipMax; ++i)
        if (raw[i] == site || found[i] == site) {
            start = i;
            break;
        }
    if (start < 0) { // the walk did not pass the call site (no frame pointers on the way)
        if (!site) return 0;
        out[0] = site;
        return 1;
    }
    int d = 0;
    for (int i = start; i < n && d < max; ++i) out[d++] = raw[i];
    return d;
}

BlockingGraph::BlockingGraph(Vproc *vp, uint32_t sample, int depth)
    : vp_(vp), sample_(sample), depth_(depth), countdown_(sample),
      node_slots_(static_cast<uint32_t *>(std::calloc(2 * kMaxNodes, sizeof(uint32_t)))),
      edge_slots_(static_cast<uint32_t *>(std::calloc(2 * kMaxEdges, sizeof(uint32_t)))) {
    if (!node_slots_ || !edge_slots_) fatal("out of memory for the blocking graph");
}

BlockingGraph::~BlockingGraph() {
    for (GraphNode *b : node_blocks_) delete[] b;
    for (GraphEdge *b : edge_blocks_) delete[] b;
    std::free(node_slots_);
    std::free(edge_slots_);
    while (GraphThread *g = free_) {
        free_ = g->next_free;
        delete g;
    }
}

namespace {

// Open addressing over `slots` (index + 1, 0 empty; twice `max` entries)
// into blocks of kBlock items published by `count`: the index + 1 of the
// item `match` accepts, else of a new one `fill` initialises; 0 when full.
template <class Item, class Match, class Fill>
uint32_t find_or_add(uint32_t *slots, uint32_t max, uint64_t key, Item **blocks, std::atomic<uint32_t> &count,
                     Match match, Fill fill) {
    constexpr uint32_t kBlock = BlockingGraph::kBlock;
    const uint32_t mask = 2 * max - 1;
    uint32_t i = static_cast<uint32_t>(key) & mask;
    for (; uint32_t s = slots[i]; i = (i + 1) & mask)
        if (match(blocks[(s - 1) / kBlock][(s - 1) % kBlock])) return s;
    uint32_t idx = count.load(std::memory_order_relaxed);
    if (idx == max) return 0;
    if (idx % kBlock == 0) blocks[idx / kBlock] = new Item[kBlock];
    fill(blocks[idx / kBlock][idx % kBlock]);
    count.store(idx + 1, std::memory_order_release); // readers see it whole
    slots[i] = idx + 1;
    return idx + 1;
}

} // namespace

uint32_t BlockingGraph::find_node(GraphNode::Kind kind, int reason, const void *const *chain, int depth) {
    uint64_t key = node_key(kind, reason, chain, depth);
    return find_or_add(
        node_slots_, kMaxNodes, key, node_blocks_, nodes_,
        [&](const GraphNode &n) {
            return n.key == key && n.kind == kind && n.reason == static_cast<uint8_t>(reason) && n.depth == depth &&
                   std::equal(chain, chain + depth, n.chain);
        },
        [&](GraphNode &n) {
            n.key = key;
            std::copy(chain, chain + depth, n.chain);
            n.depth = static_cast<uint8_t>(depth);
            n.reason = static_cast<uint8_t>(reason);
            n.kind = kind;
        });
}

uint32_t BlockingGraph::find_edge(uint32_t from, uint32_t to) {
    return find_or_add(
        edge_slots_, kMaxEdges, mix(from, to), edge_blocks_, edges_,
        [&](const GraphEdge &e) { return e.from == from && e.to == to; },
        [&](GraphEdge &e) {
            e.from = from;
            e.to = to;
        });
}

void BlockingGraph::read_resources(Tcb *t, int64_t *out) {
    out[kResStack] = stack_depth(t, __builtin_frame_address(0));
    out[kResFds] = vp_->res_fds.get();
    out[kResThreads] = vp_->res_threads.get();
    out[kResHeap] = weft_heap_thread_bytes ? weft_heap_thread_bytes() : 0;
}

void BlockingGraph::begin(Tcb *t, GraphThread *g, uint64_t now) {
    g->t0 = now;
    read_resources(t, g->res0);
}

void BlockingGraph::record(Tcb *t, GraphThread *g, uint32_t to, uint64_t now) {
    uint32_t s = find_edge(g->from - 1, to - 1);
    if (!s) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return;
    }
    GraphEdge &e = edge_mut(s - 1);
    uint64_t c = e.count.load(std::memory_order_relaxed);
    int64_t r[kResCount];
    read_resources(t, r);
    GraphNode &from = node_mut(g->from - 1);
    uint64_t o = from.outs.load(std::memory_order_relaxed);
    double ticks = static_cast<double>(now - g->t0);
    e.ticks.add(ticks, c);
    from.out_ticks.add(ticks, o);
    for (int k = 0; k < kResCount; ++k) {
        double d = static_cast<double>(r[k] - g->res0[k]);
        e.res[k].add(d, c);
        from.out_res[k].add(d, o);
    }
    e.count.store(c + 1, std::memory_order_relaxed);
    from.outs.store(o + 1, std::memory_order_relaxed);
}

void BlockingGraph::on_park(Tcb *t, int reason, const void *site, void *fp) {
    GraphThread *g = t->graph;
    if (!g) return;
    bool arm = --countdown_ == 0;
    if (arm) countdown_ = sample_;
    if (!g->from && !arm) {
        g->at = 0;
        g->t_park = 0;
        return;
    }
    KeepFpStatus keep; // the averages are doubles, computed in the parking thread's context
    uint64_t now = graph_ticks();
    const void *chain[kChainMax];
    int d = walk_chain(t, fp, site, chain, depth_);
    uint32_t to = find_node(GraphNode::Park, reason, chain, d);
    if (!to) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        g->from = g->at = 0;
        g->t_park = 0;
        return;
    }
    if (g->from) record(t, g, to, now);
    GraphNode &n = node_mut(to - 1);
    uint64_t v = n.visits.load(std::memory_order_relaxed);
    n.stack.add(static_cast<double>(stack_depth(t, fp)), v);
    n.visits.store(v + 1, std::memory_order_relaxed);
    g->at = to;
    g->t_park = now;
    g->from = arm ? to : 0;
}

void BlockingGraph::on_resume(Tcb *t) {
    GraphThread *g = t->graph;
    if (!g || !(g->t_park | g->from)) return;
    KeepFpStatus keep; // as in on_park
    uint64_t now = graph_ticks();
    if (g->t_park) {
        GraphNode &n = node_mut(g->at - 1);
        uint64_t w = n.waits.load(std::memory_order_relaxed);
        n.wait_ticks.add(static_cast<double>(now - g->t_park), w);
        n.waits.store(w + 1, std::memory_order_relaxed);
        g->t_park = 0;
    }
    if (g->from) begin(t, g, now);
}

GraphThread *BlockingGraph::new_record(Tcb *t) {
    GraphThread *g = free_;
    if (g) free_ = g->next_free;
    else g = new GraphThread;
    std::memset(g, 0, sizeof *g);
    t->graph = g;
    return g;
}

void BlockingGraph::on_start(Tcb *t) {
    GraphThread *g = new_record(t);
    const void *entry = reinterpret_cast<const void *>(t->fn);
    uint32_t s = find_node(GraphNode::Start, 0, &entry, 1);
    if (!s) return;
    GraphNode &n = node_mut(s - 1);
    n.visits.store(n.visits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    g->at = g->from = s;
    begin(t, g, graph_ticks());
}

void BlockingGraph::on_exit(Tcb *t) {
    GraphThread *g = t->graph;
    if (!g) return;
    if (g->from) {
        const void *entry = reinterpret_cast<const void *>(t->fn);
        if (uint32_t s = find_node(GraphNode::Exit, 0, &entry, 1)) {
            record(t, g, s, graph_ticks());
            GraphNode &n = node_mut(s - 1);
            n.visits.store(n.visits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
    }
    release_record(t);
}

void BlockingGraph::release_record(Tcb *t) {
    GraphThread *g = t->graph;
    if (!g) return;
    t->graph = nullptr;
    g->next_free = free_;
    free_ = g;
}

void BlockingGraph::on_migrate_out(Tcb *t) { release_record(t); }

void BlockingGraph::on_migrate_in(Tcb *t) { new_record(t); }

// --- configuration ---

bool resolve_graph_config(int configured_sample, int configured_depth, int *sample, int *depth) {
    *sample = 0;
    if (configured_sample < -1) {
        std::fprintf(stderr, "weft: graph_sample %d: expected -1 (off), 0 (WEFT_GRAPH) or N >= 1 (one park in N)\n",
                     configured_sample);
        return false;
    }
    if (configured_sample > 0) {
        *sample = configured_sample;
    } else if (configured_sample == 0) {
        if (const char *e = std::getenv("WEFT_GRAPH"); e && *e) {
            char *end;
            errno = 0;
            long v = std::strtol(e, &end, 10);
            if (!std::strcmp(e, "off")) v = 0;
            else if (!std::strcmp(e, "on")) v = 1;
            else if (*end || errno || v < 0 || v > 1000000 || *e < '0' || *e > '9') {
                std::fprintf(stderr, "weft: WEFT_GRAPH=%s: expected off, on, or N (record one park in N, 1..1000000)\n", e);
                return false;
            }
            *sample = static_cast<int>(v);
        }
    }
    *depth = kChainMax;
    if (configured_depth < 0 || configured_depth > kChainMax) {
        std::fprintf(stderr, "weft: graph_depth %d: expected 1..%d (0: WEFT_GRAPH_DEPTH)\n", configured_depth, kChainMax);
        return false;
    }
    if (configured_depth > 0) {
        *depth = configured_depth;
    } else if (const char *e = std::getenv("WEFT_GRAPH_DEPTH"); e && *e) {
        char *end;
        errno = 0;
        long v = std::strtol(e, &end, 10);
        if (*end || errno || v < 1 || v > kChainMax) {
            std::fprintf(stderr, "weft: WEFT_GRAPH_DEPTH=%s: expected 1..%d\n", e, kChainMax);
            return false;
        }
        *depth = static_cast<int>(v);
    }
    return true;
}

double BlockingGraph::ticks_per_ns() const { return graph_ticks_per_ns(vp_->rt); }

double graph_ticks_per_ns(const Runtime *rt) {
    uint64_t ns = now_ns(), ticks = graph_ticks();
    // Too soon after the start for a good ratio: measure a millisecond.
    while (ns - rt->graph_ns0 < 1000000) {
        ns = now_ns();
        ticks = graph_ticks();
    }
    return static_cast<double>(ticks - rt->graph_tsc0) / static_cast<double>(ns - rt->graph_ns0);
}

// --- reports ---

namespace {

struct MergedNode {
    GraphNode::Kind kind;
    int reason;
    int depth;
    const void *chain[kChainMax];
    uint64_t visits = 0, waits = 0;
    double wait_sum = 0, stack_sum = 0; // EWMA x samples, over the vprocs
};

struct MergedEdge {
    uint64_t count = 0;
    double ticks_sum = 0;
    double res_sum[kResCount] = {};
};

const char *kind_name(GraphNode::Kind k) {
    return k == GraphNode::Start ? "start" : k == GraphNode::Exit ? "exit" : "park";
}

const char *reason_name(const MergedNode &n) {
    if (n.kind != GraphNode::Park) return kind_name(n.kind);
    if (n.reason == kYieldReason) return "yield";
    return weft_park_reason_name(n.reason);
}

std::string json_string(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o + "\"";
}

std::string dot_escape(const std::string &s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o;
}

std::string human_ns(double ns) {
    char b[32];
    if (ns < 1e3) std::snprintf(b, sizeof b, "%.0f ns", ns);
    else if (ns < 1e6) std::snprintf(b, sizeof b, "%.1f us", ns / 1e3);
    else if (ns < 1e9) std::snprintf(b, sizeof b, "%.1f ms", ns / 1e6);
    else std::snprintf(b, sizeof b, "%.2f s", ns / 1e9);
    return b;
}

struct Report {
    std::vector<MergedNode> nodes;
    std::map<std::pair<uint32_t, uint32_t>, MergedEdge> edges;
    uint64_t dropped = 0;
    double ns_per_tick = 0;
    double median_edge_ns = 0;
};

Report merge(Runtime *rt) {
    Report r;
    std::map<uint64_t, uint32_t> index; // node key -> merged index
    r.ns_per_tick = 1.0 / graph_ticks_per_ns(rt);
    for (auto &vp : rt->vprocs) {
        const BlockingGraph *g = vp->graph;
        if (!g) continue;
        r.dropped += g->dropped();
        uint32_t nn = g->node_count();
        std::vector<uint32_t> local(nn);
        for (uint32_t i = 0; i < nn; ++i) {
            const GraphNode &n = g->node(i);
            auto [it, fresh] = index.emplace(n.key, static_cast<uint32_t>(r.nodes.size()));
            if (fresh) {
                MergedNode m;
                m.kind = n.kind;
                m.reason = n.reason;
                m.depth = n.depth;
                std::copy(n.chain, n.chain + n.depth, m.chain);
                r.nodes.push_back(m);
            }
            MergedNode &m = r.nodes[it->second];
            uint64_t v = n.visits.load(std::memory_order_relaxed), w = n.waits.load(std::memory_order_relaxed);
            m.visits += v;
            m.waits += w;
            m.wait_sum += n.wait_ticks.get() * static_cast<double>(w);
            m.stack_sum += n.stack.get() * static_cast<double>(v);
            local[i] = it->second;
        }
        uint32_t ne = g->edge_count();
        for (uint32_t i = 0; i < ne; ++i) {
            const GraphEdge &e = g->edge(i);
            if (e.from >= nn || e.to >= nn) continue; // published after the count we read
            uint64_t c = e.count.load(std::memory_order_relaxed);
            if (!c) continue;
            MergedEdge &m = r.edges[{local[e.from], local[e.to]}];
            m.count += c;
            m.ticks_sum += e.ticks.get() * static_cast<double>(c);
            for (int k = 0; k < kResCount; ++k) m.res_sum[k] += e.res[k].get() * static_cast<double>(c);
        }
    }
    // The count-weighted median of the edges' mean times: what a typical
    // segment takes, which one slow edge does not move.
    std::vector<std::pair<double, uint64_t>> means;
    uint64_t total = 0;
    for (auto &[k, e] : r.edges) {
        means.emplace_back(e.ticks_sum / static_cast<double>(e.count) * r.ns_per_tick, e.count);
        total += e.count;
    }
    std::sort(means.begin(), means.end());
    uint64_t seen = 0;
    for (auto &[mean, c] : means)
        if ((seen += c) * 2 >= total) {
            r.median_edge_ns = mean;
            break;
        }
    return r;
}

bool is_slow(const Report &r, double mean_ns) {
    return mean_ns >= kSlowMinNs && mean_ns >= kSlowFactor * r.median_edge_ns;
}

// "reason @ function" for park nodes, "start fn" / "exit fn" otherwise.
// The function a call site calls, when the call is a direct one (e8 rel32
// just before the return address), and it has a name; else "".
std::string callee_of(const void *ret) {
    const auto *p = static_cast<const unsigned char *>(ret) - 5;
    if (*p != 0xe8) return "";
    int32_t rel;
    std::memcpy(&rel, p + 1, sizeof rel);
    return function_name(static_cast<const unsigned char *>(ret) + rel);
}

// "weft_recv @ serve_connection" (the weft call and the function that made
// it; the reason when the call is indirect, through a PLT, or unnamed),
// "start fn" / "exit fn".
std::string label(const MergedNode &n) {
    std::string f = n.depth ? function_name(n.chain[0]) : "";
    if (f.empty() && n.depth) f = symbolize(n.chain[0]);
    if (n.kind != GraphNode::Park) return std::string(kind_name(n.kind)) + " " + f;
    std::string what = n.depth ? callee_of(n.chain[0]) : "";
    return (what.empty() ? std::string(reason_name(n)) : what) + " @ " + f;
}

void write_json(const Report &r, Runtime *rt, FILE *out) {
    const BlockingGraph *g0 = rt->vprocs[0]->graph;
    std::fprintf(out, "{\n  \"weft_graph\": 1,\n  \"sample\": %u,\n  \"depth\": %d,\n  \"vprocs\": %zu,\n",
                 g0->sample(), g0->depth(), rt->vprocs.size());
    std::fprintf(out, "  \"ns_per_tick\": %.6f,\n  \"dropped\": %" PRIu64 ",\n  \"median_edge_ns\": %.1f,\n",
                 r.ns_per_tick, r.dropped, r.median_edge_ns);
    std::fprintf(out, "  \"slow_factor\": %.0f,\n  \"slow_min_ns\": %.0f,\n  \"nodes\": [", kSlowFactor, kSlowMinNs);
    for (size_t i = 0; i < r.nodes.size(); ++i) {
        const MergedNode &n = r.nodes[i];
        std::fprintf(out, "%s\n    {\"id\": %zu, \"kind\": \"%s\", \"reason\": \"%s\", \"label\": %s, \"chain\": [",
                     i ? "," : "", i, kind_name(n.kind), reason_name(n), json_string(label(n)).c_str());
        for (int d = 0; d < n.depth; ++d)
            std::fprintf(out, "%s{\"addr\": \"%p\", \"symbol\": %s}", d ? ", " : "", n.chain[d],
                         json_string(symbolize(n.chain[d])).c_str());
        std::fprintf(out, "], \"visits\": %" PRIu64 ", \"wait_ns\": %.1f, \"stack_bytes\": %.0f}", n.visits,
                     n.waits ? n.wait_sum / static_cast<double>(n.waits) * r.ns_per_tick : 0.0,
                     n.visits ? n.stack_sum / static_cast<double>(n.visits) : 0.0);
    }
    std::fprintf(out, "\n  ],\n  \"edges\": [");
    bool first = true;
    for (auto &[k, e] : r.edges) {
        double c = static_cast<double>(e.count);
        double mean = e.ticks_sum / c * r.ns_per_tick;
        std::fprintf(out, "%s\n    {\"from\": %u, \"to\": %u, \"count\": %" PRIu64 ", \"mean_ns\": %.1f", first ? "" : ",",
                     k.first, k.second, e.count, mean);
        for (int j = 0; j < kResCount; ++j) std::fprintf(out, ", \"%s\": %.2f", kGraphResourceNames[j], e.res_sum[j] / c);
        std::fprintf(out, ", \"slow\": %s}", is_slow(r, mean) ? "true" : "false");
        first = false;
    }
    std::fprintf(out, "\n  ]\n}\n");
}

void write_dot(const Report &r, FILE *out) {
    std::fprintf(out, "digraph weft_blocking_graph {\n  rankdir=TB;\n"
                      "  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n"
                      "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    for (size_t i = 0; i < r.nodes.size(); ++i) {
        const MergedNode &n = r.nodes[i];
        std::string text = dot_escape(label(n)) + "\\n" + std::to_string(n.visits) + " visits";
        if (n.waits) text += ", waits " + human_ns(n.wait_sum / static_cast<double>(n.waits) * r.ns_per_tick);
        const char *shape = n.kind == GraphNode::Park ? "" : ", shape=ellipse";
        std::fprintf(out, "  n%zu [label=\"%s\"%s];\n", i, text.c_str(), shape);
    }
    uint64_t most = 1;
    for (auto &[k, e] : r.edges) most = e.count > most ? e.count : most;
    for (auto &[k, e] : r.edges) {
        double mean = e.ticks_sum / static_cast<double>(e.count) * r.ns_per_tick;
        bool slow = is_slow(r, mean);
        // Pen width by the count's order of magnitude (in bits: no libm, which
        // a C program linking libweft.a statically need not link).
        double width = 1 + 3.0 * (64 - __builtin_clzll(e.count)) / (64 - __builtin_clzll(most));
        std::string text = std::to_string(e.count) + " x " + human_ns(mean);
        double heap = e.res_sum[kResHeap] / static_cast<double>(e.count);
        double fds = e.res_sum[kResFds] / static_cast<double>(e.count);
        if (heap >= 1 || heap <= -1) text += "\\nheap " + std::to_string(static_cast<long long>(heap)) + " B";
        if (fds >= 0.01 || fds <= -0.01) {
            char b[32];
            std::snprintf(b, sizeof b, "\\nfds %+.2f", fds);
            text += b;
        }
        if (slow) text += "\\nSLOW";
        std::fprintf(out, "  n%u -> n%u [label=\"%s\", penwidth=%.1f%s];\n", k.first, k.second, text.c_str(), width,
                     slow ? ", color=red, fontcolor=red" : "");
    }
    std::fprintf(out, "}\n");
}

} // namespace

int write_graph(Runtime *rt, FILE *out, int format) {
    if (!out || (format != WEFT_GRAPH_JSON && format != WEFT_GRAPH_DOT)) return EINVAL;
    if (!rt->vprocs[0]->graph) return ENODATA;
    Report r = merge(rt);
    if (format == WEFT_GRAPH_JSON) write_json(r, rt, out);
    else write_dot(r, out);
    return std::ferror(out) ? EIO : 0;
}

// --- SIGUSR2 ---

// One dumper at a time in the process: the first runtime whose graph is on
// takes SIGUSR2 (unless the program handles or ignores the signal itself).
// The handler only posts a semaphore that lives as long as the process, so
// a signal that races with the runtime's end touches nothing freed.
struct GraphDumper {
    Runtime *rt;
    pthread_t thread;
    std::atomic<bool> quit{false};
    struct sigaction previous;
    bool handler_installed = false;
};

namespace {

sem_t g_dump_sem;
std::once_flag g_dump_sem_once;
std::atomic<bool> g_dumper_taken{false};

void on_sigusr2(int) {
    int saved = errno;
    sem_post(&g_dump_sem);
    errno = saved;
}

bool write_file(Runtime *rt, const std::string &path, int format) {
    std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "w");
    if (!f) return false;
    int e = write_graph(rt, f, format);
    if (std::fclose(f) != 0 && !e) e = EIO;
    if (e || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        if (e) errno = e;
        return false;
    }
    return true;
}

void *dumper_main(void *p) {
    auto *d = static_cast<GraphDumper *>(p);
    for (;;) {
        if (sem_wait(&g_dump_sem) != 0) continue; // EINTR
        if (d->quit.load(std::memory_order_acquire)) return nullptr;
        const char *dir = std::getenv("WEFT_GRAPH_DIR");
        std::string base = std::string(dir && *dir ? dir : ".") + "/weft-graph-" + std::to_string(getpid());
        bool ok = write_file(d->rt, base + ".json", WEFT_GRAPH_JSON) && write_file(d->rt, base + ".dot", WEFT_GRAPH_DOT);
        if (ok) std::fprintf(stderr, "weft: blocking graph written to %s.json and %s.dot\n", base.c_str(), base.c_str());
        else std::fprintf(stderr, "weft: cannot write the blocking graph to %s.json: %s\n", base.c_str(), std::strerror(errno));
    }
}

} // namespace

void start_graph_dumper(Runtime *rt) {
    bool no = false;
    if (!g_dumper_taken.compare_exchange_strong(no, true)) return;
    std::call_once(g_dump_sem_once, [] { sem_init(&g_dump_sem, 0, 0); });
    while (sem_trywait(&g_dump_sem) == 0) { // signals meant for an earlier runtime
    }
    auto *d = new GraphDumper;
    d->rt = rt;
    // The thread takes no signals: they stay with the program's threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&d->thread, nullptr, dumper_main, d);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (e) {
        std::fprintf(stderr, "weft: no SIGUSR2 graph dumps: cannot start their thread: %s\n", std::strerror(e));
        delete d;
        g_dumper_taken.store(false);
        return;
    }
    rt->graph_dumper = d;
    struct sigaction current;
    sigaction(SIGUSR2, nullptr, &current);
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL) {
        struct sigaction sa{};
        sa.sa_handler = on_sigusr2;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, &d->previous);
        d->handler_installed = true;
    }
}

void stop_graph_dumper(Runtime *rt) {
    GraphDumper *d = rt->graph_dumper;
    if (!d) return;
    if (d->handler_installed) sigaction(SIGUSR2, &d->previous, nullptr);
    d->quit.store(true, std::memory_order_release);
    sem_post(&g_dump_sem);
    pthread_join(d->thread, nullptr);
    delete d;
    rt->graph_dumper = nullptr;
    g_dumper_taken.store(false);
}

} // namespace weft::detail

using namespace weft::detail;

extern "C" int weft_graph_dump(FILE *out, int format) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    return write_graph(vp->rt, out, format);
}
