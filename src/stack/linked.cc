// The linked-stack pool and the two calls __morestack makes (linked.hpp).
#include "stack/linked.hpp"

#include "arch/context.hpp"

#include <sys/mman.h>

#include <algorithm>

#include "core/runtime.hpp"

// A program whose checkpoints stackcheck placed defines this (strongly) as
// the MaxPath it used; weak here so that everyone else gets 0.
extern "C" {
[[gnu::weak, gnu::visibility("default")]] extern const size_t weft_stack_maxpath = 0;
}

namespace weft::detail {

namespace {

constexpr size_t kPage = 4096;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

} // namespace

size_t linked_stack_slack() { return kStackReserve + round_up(weft_stack_maxpath, 16); }

} // namespace weft::detail

// The rows the plugin wrote, bounded by the linker (weak: none without).
extern "C" {
[[gnu::weak, gnu::visibility("hidden")]] extern weft::detail::EntryStack __start_weft_entry_stacks[];
[[gnu::weak, gnu::visibility("hidden")]] extern weft::detail::EntryStack __stop_weft_entry_stacks[];
}

namespace weft::detail {

// Rows come in link order, one per unit that compiled an entry (an inline
// function's in several): sorted by address on first use, in place (the
// section is writable), then searched.
const EntryStack *entry_stack(void *(*fn)(void *)) {
    EntryStack *b = __start_weft_entry_stacks, *e = __stop_weft_entry_stacks;
    if (b == e) return nullptr;
    static const bool sorted = [b, e] {
        std::sort(b, e, [](const EntryStack &x, const EntryStack &y) {
            return reinterpret_cast<uintptr_t>(x.fn) < reinterpret_cast<uintptr_t>(y.fn);
        });
        return true;
    }();
    (void)sorted;
    const EntryStack *r = std::lower_bound(b, e, fn, [](const EntryStack &x, void *(*f)(void *)) {
        return reinterpret_cast<uintptr_t>(x.fn) < reinterpret_cast<uintptr_t>(f);
    });
    return r != e && r->fn == fn ? r : nullptr;
}

ChunkSlabs::~ChunkSlabs() {
    for (size_t i = 0; i < nslabs_; ++i) {
        sanitizer_unmapping_stack(slabs_[i], kSlabBytes);
        munmap(slabs_[i], kSlabBytes);
    }
    while (nlarge_) unmap_large(large_[nlarge_ - 1]);
    if (large_) munmap(large_, large_cap_ * sizeof *large_);
}

char *ChunkSlabs::carve(size_t size) {
    const size_t align = std::min(size, kPage);
    std::lock_guard<std::mutex> lock(mu_);
    size_t at = nslabs_ ? round_up(used_, align) : 0;
    if (!nslabs_ || at + size > kSlabBytes) {
        if (nslabs_ == kMaxSlabs) return nullptr;
        void *p = mmap(nullptr, kSlabBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED) return nullptr;
        slabs_[nslabs_++] = static_cast<char *>(p);
        at = 0;
    }
    used_ = at + size;
    return slabs_[nslabs_ - 1] + at;
}

// [PROT_NONE page][chunk]. The table grows before the chunk is mapped, so
// that a failure leaves nothing to undo; a debugger stopping the process
// in here sees the entry only once it is complete.
StackChunk *ChunkSlabs::map_large(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (nlarge_ == large_cap_) {
        size_t cap = large_cap_ ? 2 * large_cap_ : kPage / sizeof *large_;
        void *t = large_ ? mremap(large_, large_cap_ * sizeof *large_, cap * sizeof *large_, MREMAP_MAYMOVE)
                         : mmap(nullptr, cap * sizeof *large_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                -1, 0);
        if (t == MAP_FAILED) return nullptr;
        large_ = static_cast<StackChunk **>(t);
        large_cap_ = cap;
    }
    void *p = mmap(nullptr, size + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mprotect(p, kPage, PROT_NONE);
    auto *c = reinterpret_cast<StackChunk *>(static_cast<char *>(p) + kPage);
    c->large_index = nlarge_;
    large_[nlarge_] = c;
    __atomic_store_n(&nlarge_, nlarge_ + 1, __ATOMIC_RELEASE);
    return c;
}

// The last entry takes the place of the one that goes.
void ChunkSlabs::unmap_large(StackChunk *c) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        StackChunk *last = large_[nlarge_ - 1];
        large_[c->large_index] = last;
        last->large_index = c->large_index;
        __atomic_store_n(&nlarge_, nlarge_ - 1, __ATOMIC_RELEASE);
    }
    sanitizer_unmapping_stack(c->lo() - kPage, c->size + kPage);
    munmap(c->lo() - kPage, c->size + kPage);
}

ChunkPool::~ChunkPool() {
    // Slab chunks go with the slabs; large chunks are mappings of their own.
    for (StackChunk *c = large_; c;) {
        StackChunk *n = c->next_free;
        slabs_.unmap_large(c);
        c = n;
    }
}

uint32_t ChunkPool::class_of(size_t bytes, size_t *rounded) {
    if (bytes <= 4096) {
        size_t r = round_up(std::max<size_t>(bytes, kChunkStep), kChunkStep);
        *rounded = r;
        return static_cast<uint32_t>(r / kChunkStep - 1); // 0..15
    }
    uint32_t k = 16;
    size_t r = 8192;
    while (r < bytes) r <<= 1, ++k;
    *rounded = r;
    return r <= kLargeChunk ? k : kLargeClass;
}

void ChunkPool::init(StackChunk *c, size_t size, uint32_t klass) {
    c->prev = nullptr;
    c->spare = nullptr;
    c->next_free = nullptr;
    c->size = size;
    c->guard = c->base() + slack_;
    c->klass = klass;
    c->cold = 0;
    c->canary = kChunkCanary;
}

StackChunk *ChunkPool::alloc(size_t bytes) {
    size_t size;
    uint32_t k = class_of(bytes, &size);
    if (k == kLargeClass) return alloc_large(bytes);
    StackChunk *c = free_[k];
    if (c) {
        free_[k] = c->next_free;
        if (!c->cold) cached_bytes_ -= size;
        c->prev = nullptr;
        c->spare = nullptr;
        c->guard = c->base() + slack_; // a first chunk may have had its own
        c->canary = kChunkCanary; // an overflow report may have left it; the chunk is fresh now
        return c;
    }
    char *p = slabs_.carve(size);
    if (!p) return nullptr;
    ++counters.carved;
    c = reinterpret_cast<StackChunk *>(p);
    init(c, size, k);
    return c;
}

// Large chunks: [PROT_NONE page][chunk], page-rounded, reused first fit.
StackChunk *ChunkPool::alloc_large(size_t bytes) {
    size_t size = round_up(bytes, kPage);
    for (StackChunk **pp = &large_; *pp; pp = &(*pp)->next_free) {
        StackChunk *c = *pp;
        if (c->size >= size && c->size <= 2 * size) {
            *pp = c->next_free;
            cached_bytes_ -= c->size;
            c->prev = nullptr;
            c->spare = nullptr;
            c->guard = c->base() + slack_;
            c->canary = kChunkCanary;
            return c;
        }
    }
    StackChunk *c = slabs_.map_large(size);
    if (!c) return nullptr;
    ++counters.carved;
    ++counters.large_mapped;
    init(c, size, kLargeClass);
    return c;
}

void ChunkPool::release(StackChunk *c) {
    if (c->spare) {
        release(c->spare);
        c->spare = nullptr;
    }
    if (c->klass == kLargeClass) {
        if (cached_bytes_ + c->size > kChunkHighWater) {
            slabs_.unmap_large(c);
            ++counters.given_back;
            return;
        }
        cached_bytes_ += c->size;
        c->next_free = large_;
        large_ = c;
        return;
    }
    if (cached_bytes_ + c->size > kChunkHighWater && c->size > kPage) {
        // Keep the header page (it holds the free-list link), give back the rest.
        madvise(c->lo() + kPage, c->size - kPage, MADV_DONTNEED);
        c->cold = 1;
        ++counters.given_back;
    } else {
        c->cold = 0;
        cached_bytes_ += c->size;
    }
    c->next_free = free_[c->klass];
    free_[c->klass] = c;
}

void ChunkPool::release_chain(StackChunk *top) {
    while (top) {
        StackChunk *below = top->prev;
        release(top);
        top = below;
    }
}

} // namespace weft::detail

using namespace weft::detail;

// Called by __morestack on the current chunk, below its guard (the reserve):
// link a chunk with room for `frame` + `args` + the slack, make it current,
// and return its top. Never fails: out of memory is fatal (a stack overflow
// has no error to return).
// `args` bytes of stack arguments at `src` are to be copied; the wrappers of
// external functions ask for 256 whatever the call has, so the count is
// clamped to what the current chunk holds above `src` (the TCB of a first
// chunk, the next chunk of a slab, or a mapping's end above a large one).
struct LinkResult {
    void *top;     // rax
    size_t args;   // rdx
};

extern "C" [[gnu::visibility("hidden")]] LinkResult weft_stack_link(size_t frame, size_t args, const char *src) {
    Vproc *vp = tls_vproc;
    Tcb *t = vp ? vp->current : nullptr;
    if (!t || !t->chunk) {
        void *g = stack_guard();
        set_stack_guard(nullptr);
        fatal("__morestack outside a linked-stack weft thread (a %zu-byte frame did not fit above %%fs:0x70 = %p)",
              frame, g);
    }
    StackChunk *cur = t->chunk;
    if (src + args > cur->hi()) args = src < cur->hi() ? static_cast<size_t>(cur->hi() - src) : 0;
    if (!cur->intact()) {
        set_stack_guard(nullptr); // the report runs where it is, unchecked
        vp->report_overflow(t);
    }
    ChunkPool &pool = vp->chunks;
    // The chunk must hold: header, slack, the frame, the copied arguments,
    // and the return address __morestack pushes plus alignment.
    const size_t need = kChunkHeader + pool.slack() + frame + args + 32;
    StackChunk *n = cur->spare;
    if (n && n->size >= need) {
        cur->spare = nullptr;
        ++pool.counters.spare_hits;
    } else {
        if (n) {
            cur->spare = nullptr;
            pool.release(n);
        }
        n = pool.alloc(std::max(need, vp->rt->cfg.min_chunk));
        if (!n) {
            set_stack_guard(nullptr);
            fatal_thread(t, "out of memory for a stack chunk");
        }
    }
    n->prev = cur;
    t->chunk = n;
    set_stack_guard(n->guard);
    ++pool.counters.links;
    return {n->hi(), args};
}

namespace {

// Make the chunk below the current one current again; returns the chunk
// left, its own spare given back, for the caller to keep or free.
StackChunk *pop_chunk(Vproc *vp, Tcb *t) {
    StackChunk *n = t->chunk;
    if (!n->intact()) {
        set_stack_guard(nullptr);
        vp->report_overflow(t);
    }
    StackChunk *below = n->prev;
    t->chunk = below;
    set_stack_guard(below->guard);
    if (n->spare) {
        vp->chunks.release(n->spare);
        n->spare = nullptr;
    }
    return n;
}

} // namespace

// Called by __morestack back on the chunk below, after the function that
// needed the current chunk returned.
extern "C" [[gnu::visibility("hidden")]] void weft_stack_unlink() {
    Vproc *vp = tls_vproc;
    StackChunk *n = pop_chunk(vp, vp->current);
    StackChunk *below = n->prev;
    if (n->size <= kSpareMax && !below->spare) below->spare = n;
    else vp->chunks.release(n);
}

// The same when an exception leaves the function that needed the chunk:
// __morestack's cleanup still runs on it, and the unwinder will too, so it
// is not freed but kept as the spare of the chunk below.
extern "C" [[gnu::visibility("hidden")]] void weft_stack_unlink_unwinding() {
    Vproc *vp = tls_vproc;
    StackChunk *n = pop_chunk(vp, vp->current);
    StackChunk *below = n->prev;
    if (below->spare) vp->chunks.release(below->spare);
    below->spare = n;
}
