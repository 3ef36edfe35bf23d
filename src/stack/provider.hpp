// The stack-provider contract, and the pooled provider that is the default.
//
// A provider hands out stacks and takes them back. Each vproc has its own
// provider instance, used only by threads running on that vproc, so the hot
// path (reuse of a recently freed stack) takes no lock. Linked stacks
// (Capriccio §3) will be a second provider behind the same interface.
//
// Pooled provider (StackPool):
//  - Stacks are carved from large regions (kRegionBytes, MAP_NORESERVE), not
//    mapped one by one: a million threads must fit in vm.max_map_count
//    (65,530 on a fresh machine) mappings.
//  - Every slot is [red page][usable stack]; the thread control block sits at
//    the top of the usable part. While the runtime's map budget allows, the
//    red page is a PROT_NONE guard (each guard splits the region, costing two
//    map entries); past the budget it stays readable and the scheduler checks
//    at every switch that its top word is still zero (a canary that costs no
//    memory: an untouched page reads as the shared zero page).
//  - Freed stacks are reused LIFO (the most recently used is the most likely
//    to be in cache). Up to kHotStacks free stacks per size keep their pages;
//    beyond that freed stacks collect in a batch whose pages are given back
//    with MADV_DONTNEED kReleaseBatch at a time — sorted, with neighbouring
//    slots merged into one call — so RSS is bounded by live threads + two
//    small caches, and tearing down 10^6 threads is not 10^6 system calls.
//  - Regions are never unmapped while the runtime runs: a stale thread
//    handle then reads zeros or another thread's id, never unmapped memory.
//  - A stack always returns to the pool that carved it. A thread may end on
//    another vproc than the one that created it (home_vproc, joins across
//    vprocs); its stack then goes back through the owner's remote-free list
//    (lock-free), which the owner drains before carving anything new. Else
//    an accept loop on vproc 0 handing connections to vproc 1 would carve a
//    new stack per connection for ever.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::detail {

inline constexpr size_t kPageSize = 4096;
inline constexpr size_t kRedZoneBytes = kPageSize;
inline constexpr size_t kMinStackSize = 16 * 1024;
inline constexpr size_t kMaxStackSize = size_t{1} << 30;
// 64 KiB: RSS is set by the pages a thread touches, not by this size (an
// idle thread touches one page), so the default only bounds how deep a
// thread may go before the guard page. 64 KiB covers glibc's deepest common
// paths (printf, getaddrinfo ~ 20 KiB) with room to spare and keeps 10^6
// threads at 68 GB of address space, a fraction of the 128 TB available.
inline constexpr size_t kDefaultStackSize = 64 * 1024;
inline constexpr size_t kRegionBytes = size_t{64} << 20;
inline constexpr size_t kHotStacks = 64;
inline constexpr size_t kReleaseBatch = 256;

class StackPool;

// Debuggers find fixed stacks through a log of every slot ever carved
// (core/debug.hpp), kept as runs of neighbouring slots of one size: a
// region of equal stacks is one entry, so the log costs nothing per thread.
struct StackRun {
    char *lo;       // usable start of the run's first slot
    uint64_t size;  // usable bytes of each slot; slots are size + kRedZoneBytes apart
    uint64_t count; // slots in the run
};
struct StackRunBlock {
    static constexpr size_t kRuns = 62;
    StackRunBlock *next; // the older block
    uint64_t count;      // runs[0, count) are written
    StackRun runs[kRuns];
};

struct Stack {
    char *lo = nullptr;   // lowest usable byte; the red page is just below
    size_t size = 0;      // usable bytes (a multiple of the page size)
    bool guarded = false; // red page is PROT_NONE (else: zero canary)
    bool slot_below = false; // another stack's slot ends where our red page starts
    StackPool *owner = nullptr; // the pool it goes back to, whoever frees it

    char *hi() const { return lo + size; }
    char *red_page() const { return lo - kRedZoneBytes; }
    // The word an overflow writes first: the top of the red page.
    uint64_t *canary() const { return reinterpret_cast<uint64_t *>(lo) - 1; }
};

struct StackCounters {
    uint64_t mapped = 0;   // carved from fresh memory
    uint64_t reused = 0;   // taken from the free list
    uint64_t released = 0; // pages given back on free
    uint64_t guarded = 0;  // got a PROT_NONE guard page
};

class StackProvider {
public:
    virtual ~StackProvider() = default;
    // A stack of at least `size` usable bytes; false when memory is exhausted.
    virtual bool alloc(size_t size, Stack *out) = 0;
    // By value: callers often pass a field of the TCB that lives on this very
    // stack, which release may give back (zero) before it is done with it.
    virtual void release(Stack s) = 0;
    virtual const StackCounters &counters() const = 0;
};

// Address space shared by every vproc's pool: regions and the guard budget.
class StackRegions {
public:
    StackRegions();
    ~StackRegions();
    StackRegions(const StackRegions &) = delete;
    StackRegions &operator=(const StackRegions &) = delete;
    // Carve one slot for `size` usable bytes (page multiple). Thread-safe.
    bool carve(size_t size, Stack *out);
    // The newest block of the slot log, for the debugger's descriptor.
    StackRunBlock *const *debug_runs() const { return &runs_; }

private:
    struct Region {
        char *base;
        size_t bytes;
        size_t used;
    };
    std::mutex mu_;
    std::vector<Region> regions_; // guarded by mu_
    long guard_budget_;           // guarded by mu_; stacks that may still get a guard page
    std::vector<unsigned> valgrind_stacks_; // guarded by mu_; ids of stacks registered with valgrind
    StackRunBlock *runs_ = nullptr; // guarded by mu_ (read by debuggers): the slot log, newest block first
    bool log_slot(char *lo, size_t size);
};

class StackPool final : public StackProvider {
public:
    explicit StackPool(StackRegions &regions) : regions_(regions) {}
    bool alloc(size_t size, Stack *out) override { return alloc_hot(size, out) || alloc_slow(size, out); }
    void release(Stack s) override {
        if (!release_hot(s)) release_slow(s);
    }
    // From another vproc: hand the stack back to this pool (thread-safe).
    void release_remote(Stack s) {
        auto *f = reinterpret_cast<FreeStack *>(s.hi() - sizeof(FreeStack));
        f->stack = s;
        FreeStack *head = remote_.load(std::memory_order_relaxed);
        do {
            f->next = head;
        } while (!remote_.compare_exchange_weak(head, f, std::memory_order_release, std::memory_order_relaxed));
    }
    // The common cases, inline for callers that know the provider is a pool.
    bool alloc_hot(size_t size, Stack *out) {
        SizeClass &c = size_class(size);
        FreeStack *f = c.hot;
        if (!f) return false;
        c.hot = f->next;
        --c.hot_count;
        *out = f->stack;
        ++counters_.reused;
        return true;
    }
    bool release_hot(Stack s) {
        SizeClass &c = size_class(s.size);
        if (c.hot_count >= kHotStacks) return false;
        auto *f = reinterpret_cast<FreeStack *>(s.hi() - sizeof(FreeStack));
        f->stack = s;
        f->next = c.hot;
        c.hot = f;
        ++c.hot_count;
        return true;
    }
    const StackCounters &counters() const override { return counters_; }

private:
    // A free hot stack describes itself in its own top bytes (resident, and
    // where the next TCB goes): the hot list costs no allocation.
    struct FreeStack {
        Stack stack;
        FreeStack *next;
    };
    struct SizeClass {
        size_t size;
        FreeStack *hot = nullptr; // pages still resident, LIFO
        size_t hot_count = 0;
        std::vector<Stack> pending; // freed past the hot cache, pages not yet given back
        std::vector<Stack> cold;    // pages given back, LIFO
    };
    void give_back(SizeClass &c);   // madvise the pending batch, move it to cold
    bool alloc_slow(size_t size, Stack *out);
    void release_slow(Stack s);
    bool drain_remote();            // take back stacks freed elsewhere; true if any
    std::atomic<FreeStack *> remote_{nullptr}; // freed by other vprocs, not yet taken back
    SizeClass &size_class(size_t size) {
        return last_ && last_->size == size ? *last_ : find_class(size);
    }
    SizeClass &find_class(size_t size);

    StackRegions &regions_;
    std::vector<std::unique_ptr<SizeClass>> classes_; // one per distinct stack size in use
    SizeClass *last_ = nullptr;      // the class used last: almost always the one wanted
    StackCounters counters_;
};

// Round a requested stack size to what the pool hands out.
inline size_t round_stack_size(size_t requested) {
    size_t s = requested > kMinStackSize ? requested : kMinStackSize;
    return (s + kPageSize - 1) & ~(kPageSize - 1);
}

} // namespace weft::detail
