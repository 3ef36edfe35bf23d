// One running instance of weft: created by weft_main, gone when it returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/debug.hpp"
#include "core/vproc.hpp"
#include "io/fd.hpp"
#include "io/offload.hpp"
#include "io/reactor.hpp"
#include "sched/tap.hpp"
#include "stack/provider.hpp"

namespace weft::detail {

struct GraphDumper;

struct RuntimeConfig {
    int vprocs = 1;
    bool pin = false;
    size_t stack_size = kDefaultStackSize;
    const PolicyOps *policy = &kFifoPolicy;
    uint64_t idle_spin_ns = kIdleSpinNs;
    IoBackend io = IoBackend::Uring;
    int workers = kDefaultWorkers;
    int sendfile_mode = 1;             // WEFT_SENDFILE_NONBLOCKING
    bool linked = false;               // WEFT_STACKS=linked: threads get linked stacks by default
    size_t min_chunk = kDefaultMinChunk; // WEFT_MIN_CHUNK
    int graph_sample = 0;              // WEFT_GRAPH: 0 off, N: one park in N
    int graph_depth = 8;               // WEFT_GRAPH_DEPTH
    uint64_t mem_limit = 0;            // WEFT_MEM_LIMIT: the resource policy's memory capacity (0: the cgroup's)
    uint64_t admit_target_ns = 100'000'000; // WEFT_ADMIT_TARGET_MS: weft_admit's target (resource policy)
    TapConfig tap;                     // WEFT_TAP: threading by appointment (policy tap)
    bool steal = true;                 // WEFT_STEAL: idle vprocs take threads from busy ones
    bool steal_started = false;        // WEFT_STEAL=2: ... also threads that have run already
    uint64_t steal_after_ns = kStealAfterNs; // WEFT_STEAL_AFTER_US
    bool run_next = true;              // WEFT_RUN_NEXT: FIFO runs new threads and returning joiners next

    // Offload workers: enough that a few slow disk reads or a blocking
    // sendfile do not hold up the others, few enough to cost nothing idle
    // (they start on demand).
    static constexpr int kDefaultWorkers = 4;
    static constexpr int kMaxWorkers = 256;
};

struct Runtime {
    explicit Runtime(const RuntimeConfig &cfg);
    ~Runtime();

    const RuntimeConfig cfg;
    const bool smp;                    // cfg.vprocs > 1
    StackRegions regions;              // address space for every vproc's stacks
    ChunkSlabs chunk_slabs;            // ... and for their linked-stack chunks
    FdTable fds;                       // per-descriptor I/O state, for every vproc
    std::vector<std::unique_ptr<Vproc>> vprocs;
    std::unique_ptr<OffloadPool> offload; // stopped before the vprocs go (workers wake threads)
    int start_error = 0;               // errno if a vproc's reactor could not be made
    std::atomic<int64_t> live{0};      // threads created and not yet reaped
    std::atomic<bool> stopping{false}; // set when live drops to 0
    const bool stealing;               // smp, cfg.steal and a policy that can give threads away
    // Vprocs idle and asking for threads (Vproc::wants_work set). Busy vprocs
    // read it at every poll, so it has a cache line of its own.
    alignas(64) std::atomic<uint32_t> idle_vprocs{0};
    char idle_pad_[60];
    int main_result = 0;
    std::vector<int> cpus;             // with cfg.pin: the CPUs vproc i % n is pinned to
    std::vector<Vproc *> vproc_list;   // vprocs as a plain array, for debuggers
    RuntimeDebug debug{};              // what debuggers read (core/debug.hpp)
    uint64_t graph_tsc0 = 0, graph_ns0 = 0; // the blocking graph's clock at the start
    GraphDumper *graph_dumper = nullptr; // SIGUSR2 dumps (observe/graph.cc)

    void thread_started() {
        if (smp) live.fetch_add(1, std::memory_order_relaxed);
        else live.store(live.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    void thread_ended() {
        int64_t left;
        if (smp) left = live.fetch_sub(1, std::memory_order_acq_rel) - 1;
        else live.store(left = live.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        if (left == 0) stop();
    }
    void stop();
};

// Thread-lifecycle internals shared by core/ files.
WEFT_NO_STACK_CHECK int create_thread(Vproc *vp, weft_thread_t *out, const weft_thread_attr_t *attr,
                                      void *(*fn)(void *), void *arg);
void release_thread_slow(Tcb *t, Stack s);

// Invalidate the handle and give the stack back: inline to its own pool's
// hot list (the usual case), else out of line (cold list, or another vproc's
// pool).
inline void release_thread(Tcb *t) {
    __atomic_store_n(&t->magic, 0u, __ATOMIC_RELAXED); // stale handles now fail to resolve (read by others: check_slot_below)
    t->tsan.destroy();
    Stack s = t->stack; // a copy: releasing reuses the memory t lives in
    StackPool &here = tls_vproc->stacks;
    if (__builtin_expect(s.owner == &here, 1) && here.release_hot(s)) return;
    release_thread_slow(t, s);
}
// The I/O state of fd (io/fd.hpp), classified on first use; nullptr if fd
// is out of range. On every wrapper's path, so inline.
inline FdState *fd_state(Vproc *vp, int fd) {
    FdState *s = vp->rt->fds.get(fd);
    if (s && __builtin_expect(s->kind == FdKind::Unknown, 0)) fd_classify(vp, s, fd);
    return s;
}

void run_tsd_destructors(Tcb *t);    // core/keys.cc
void free_tsd(Tcb *t);

[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void fatal_thread(const Tcb *t, const char *what);
void install_signal_handlers();      // once per process
void vproc_signal_stack_init(Vproc *vp);
void vproc_signal_stack_fini(Vproc *vp);

} // namespace weft::detail
