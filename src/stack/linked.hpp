// Linked stacks (Capriccio §3): a thread's stack is a chain of chunks, linked
// when a checkpoint finds the current chunk too small and unlinked when the
// function that needed it returns.
//
// The mechanism is gcc's -fsplit-stack (docs/stacks.md says why, with the
// figures): a checkpoint is the split-stack prologue of a function, which
// compares the stack pointer, less the function's frame, with the guard in
// %fs:0x70 and calls __morestack (arch/x86_64/morestack_sysv_elf.S) when
// it is lower. Built with the stackcheck plugin, only the functions the
// call-graph analysis chose carry the prologue; the guard then leaves room
// for the analysis' MaxPath too (weft_stack_maxpath).
//
// A chunk:
//
//   lo                                                              hi
//   | header (64 B, canary last) | reserve + MaxPath | frames ... <-|
//                                ^ base              ^ guard
//
// The first chunk of a thread also holds its TCB at the top, as a fixed
// stack does. The guard is base + slack: a checkpoint that passes leaves at
// least the slack free below the frame it allocates — the reserve for
// __morestack and weft_stack_link themselves (and the 128-byte red zone a
// leaf may use below the stack pointer), plus MaxPath for the unchecked
// functions the analysis allows between two checkpoints.
//
// Chunks need no guard page: an overflow (a path the analysis could not
// bound, or code built without checks calling deeper than its allowance)
// first overwrites the canary, the header's last word, which is checked at
// every unlink and every switch out of the thread. Chunks above kLargeChunk
// are mappings of their own with a PROT_NONE page below: those fault.
//
// The pool (ChunkPool, one per vproc) keeps free chunks LIFO per size
// class: sub-page classes in steps of 256 bytes up to 4 KiB, then powers of
// two to kLargeChunk, carved from shared slabs; larger chunks are mapped
// one by one. Free chunks are kept up to kChunkHighWater bytes per vproc;
// above it, large chunks are unmapped and page-sized ones madvised away.
// Any vproc may free any chunk (chunks have no owner): a thread's chunks go
// back to the pool of the vproc it ends on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace weft::detail {

inline constexpr size_t kChunkHeader = 64;
inline constexpr uint64_t kChunkCanary = 0x6b6e7568632d7466; // "ft-chunk"
// Below the guard: gcc lets a function whose frame is at most 256 bytes
// skip the frame in its check (cmp %fs:0x70, %rsp: SPLIT_STACK_AVAILABLE),
// so its frame, and a leaf's red zone (128 B), may be there; then a call
// from it into __morestack (208 B of saves) and weft_stack_link's path to
// mmap (~300 B); or an external function called without a wrapper (syscall
// stubs, memcpy: a few dozen bytes; the deep ones are wrapped, see
// morestack_sysv_elf.S).
inline constexpr size_t kStackReserve = 1024;
// What a function that calls code built without checks asks for beyond its
// frame (gold rewrites its prologue to call __morestack_non_split; the
// constant is in that routine too).
inline constexpr size_t kNonSplitExtra = 16384;
inline constexpr size_t kDefaultMinChunk = 4096;  // the paper's MinChunk
inline constexpr size_t kDefaultFirstChunk = 1792; // a thread's first chunk, TCB included
inline constexpr size_t kMinFirstChunk = 1024;
inline constexpr size_t kLargeChunk = 64 * 1024;   // above: a mapping of its own, with a guard page
inline constexpr size_t kSlabBytes = size_t{4} << 20; // what ChunkSlabs maps at a time
// Chunk sizes up to kLargeChunk are multiples of this, so every chunk in a
// slab starts at a multiple of it (what lets a debugger walk a slab).
inline constexpr size_t kChunkStep = 256;
inline constexpr size_t kChunkHighWater = 8u << 20;
// Unlinked chunks up to this size stay attached as the next link's chunk:
// a loop calling across a chunk boundary (the "hot split") then costs a
// __morestack round trip, not an allocation.
inline constexpr size_t kSpareMax = 40 * 1024;

struct StackChunk {
    StackChunk *prev;   // the chunk below in the thread's chain (older frames); null: the first
    StackChunk *spare;  // a chunk unlinked from above this one, kept for the next link
    StackChunk *next_free; // pool free list
    size_t size;        // bytes, header included
    char *guard;        // the value of %fs:0x70 while this chunk is current
    uint32_t klass;     // size class, kLargeClass: mapped alone
    uint32_t cold;      // pages above the header given back (madvise)
    uint64_t large_index; // kLargeClass: its entry in ChunkSlabs' table of mappings
    uint64_t canary;    // kChunkCanary: the first word an overflow writes

    char *lo() { return reinterpret_cast<char *>(this); }
    char *base() { return lo() + kChunkHeader; }
    char *hi() { return lo() + size; }
    bool intact() const { return canary == kChunkCanary; }
};
static_assert(sizeof(StackChunk) == kChunkHeader);
static_assert(offsetof(StackChunk, canary) == kChunkHeader - 8, "the canary is the header's top word");

struct ChunkCounters {
    uint64_t links = 0;       // __morestack linked a chunk
    uint64_t spare_hits = 0;  // ... reusing the spare of the chunk below (no allocation)
    uint64_t carved = 0;      // chunks carved from slabs or mapped
    uint64_t large_mapped = 0;
    uint64_t given_back = 0;  // chunks whose pages were given back (munmap or madvise)
};

// Address space for every vproc's chunks: slabs for the small ones, a
// mapping each for the large ones. Thread-safe. Debuggers find every chunk
// here (core/debug.hpp), so both are kept in plain arrays.
class ChunkSlabs {
public:
    ChunkSlabs() = default;
    ~ChunkSlabs();
    ChunkSlabs(const ChunkSlabs &) = delete;
    ChunkSlabs &operator=(const ChunkSlabs &) = delete;
    // `size` (<= kLargeChunk) bytes aligned to min(size, page); nullptr when
    // out of memory.
    char *carve(size_t size);
    // A large chunk of `size` bytes (page multiple), a PROT_NONE page below
    // it, its large_index set (the rest of the header is the caller's);
    // nullptr when out of memory.
    StackChunk *map_large(size_t size);
    void unmap_large(StackChunk *c);

    // For the debugger's descriptor.
    char *const *debug_slabs() const { return slabs_; }
    const size_t *debug_nslabs() const { return &nslabs_; }
    const size_t *debug_slab_used() const { return &used_; }
    StackChunk *const *const *debug_large() const { return &large_; }
    const size_t *debug_nlarge() const { return &nlarge_; }

private:
    // No malloc here: carve runs inside __morestack on a few hundred bytes
    // of stack. 16,384 slabs of 4 MiB: 64 GiB of chunks.
    static constexpr size_t kMaxSlabs = 16384;
    std::mutex mu_;
    size_t nslabs_ = 0;         // guarded by mu_
    size_t used_ = 0;           // guarded by mu_: bytes carved from the newest slab
    char *slabs_[kMaxSlabs];    // guarded by mu_
    // The large chunks mapped now; entry i is the chunk whose large_index is
    // i. Mapped and grown with mremap, for the same reason as slabs_.
    StackChunk **large_ = nullptr; // guarded by mu_
    size_t nlarge_ = 0;         // guarded by mu_
    size_t large_cap_ = 0;      // guarded by mu_: entries the mapping holds
};

class ChunkPool {
public:
    static constexpr uint32_t kLargeClass = ~0u;
    ChunkPool(ChunkSlabs &slabs, size_t slack) : slabs_(slabs), slack_(slack) {}
    ~ChunkPool();
    ChunkPool(const ChunkPool &) = delete;
    ChunkPool &operator=(const ChunkPool &) = delete;

    // A chunk of at least `bytes` (header included), its header set; null
    // when memory is exhausted.
    StackChunk *alloc(size_t bytes);
    void release(StackChunk *c);
    // A thread's whole chain (and spares), from its current chunk down.
    void release_chain(StackChunk *top);
    size_t slack() const { return slack_; }
    ChunkCounters counters;

private:
    static constexpr size_t kClasses = 16 + 4; // 256 B steps to 4 KiB, then 8..64 KiB
    static uint32_t class_of(size_t bytes, size_t *rounded);
    StackChunk *alloc_large(size_t bytes);
    void init(StackChunk *c, size_t size, uint32_t klass);

    ChunkSlabs &slabs_;
    const size_t slack_;         // guard - base: reserve + MaxPath
    StackChunk *free_[kClasses] = {};
    StackChunk *large_ = nullptr; // free large chunks, LIFO
    size_t cached_bytes_ = 0;     // in free lists, resident
};

// The guard word (%fs:0x70, glibc's tcbhead_t.__private_ss on x86-64).
inline void set_stack_guard(const void *g) {
    asm volatile("movq %0, %%fs:0x70" : : "r"(g) : "memory");
}
inline void *stack_guard() {
    void *g;
    asm volatile("movq %%fs:0x70, %0" : "=r"(g));
    return g;
}

// weft_stack_maxpath: a program whose checkpoints were placed by stackcheck
// defines it (weft_add_linked_stacks in CMake does) as the MaxPath used;
// otherwise every function checks and it is 0.
size_t linked_stack_slack();

// What the analysis says of a thread entry (stackcheck --entry-stacks,
// written into the section weft_entry_stacks by the weft_checkpoints
// plugin): the stack its first chunk must hold before the first checkpoint,
// and its static bound (0: none), the most it can ever use.
struct EntryStack {
    void *(*fn)(void *);
    uint32_t first_chunk;
    uint32_t static_bound;
};
static_assert(sizeof(EntryStack) == 16, "the plugin writes .quad, .long, .long");

// The program's row for `fn`, or null (no analysis, or not an entry).
const EntryStack *entry_stack(void *(*fn)(void *));

// The hottest entry points of the API (lock, wait, signal, yield, create,
// join) are declared with this: no split-stack check. A check is a compare
// per call on every thread, fixed stacks included (0.1-0.35 ns per
// operation, docs/stacks.md); their own frames are a few saved registers
// (<= 64 bytes, objdump), which the reserve below the guard covers like an
// unchecked external call, and anything deeper they call checks for itself.
#define WEFT_NO_STACK_CHECK __attribute__((no_split_stack))

// Whether this libweft was built with linked stacks (WEFT_LINKED_STACKS).
constexpr bool linked_stacks_built() {
#if defined(WEFT_LINKED_STACKS) && WEFT_LINKED_STACKS
    return true;
#else
    return false;
#endif
}

} // namespace weft::detail
