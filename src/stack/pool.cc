#include "stack/provider.hpp"

#include "arch/context.hpp"

#include <sys/mman.h>

#include "core/valgrind.hpp" // stacks are registered with valgrind

#include <algorithm>
#include <cstdio>
#include <new>

namespace weft::detail {

namespace {

// Map entries kept free for everything else in the process (malloc arenas,
// libraries, the I/O layer, sanitizer shadow): guards stop well before the
// kernel's limit would make an unrelated mmap fail.
constexpr long kMapReserve = 8192;

long read_max_map_count() {
    long v = 65530;
    if (FILE *f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
        if (std::fscanf(f, "%ld", &v) != 1) v = 65530;
        std::fclose(f);
    }
    return v;
}

} // namespace

StackRegions::StackRegions() {
    // Each guard splits its region: two more map entries per guarded stack.
    guard_budget_ = std::max(0L, (read_max_map_count() - kMapReserve) / 2);
}

StackRegions::~StackRegions() {
    for (unsigned id : valgrind_stacks_) WEFT_VALGRIND_STACK_DEREGISTER(id);
    for (const Region &r : regions_) {
        sanitizer_unmapping_stack(r.base, r.bytes);
        munmap(r.base, r.bytes);
    }
    while (StackRunBlock *b = runs_) {
        runs_ = b->next;
        delete b;
    }
}

// A debugger may stop the process between any two instructions here, and
// reads the log without a lock: a run is complete before the count that
// shows it is stored, and a slot joins a run before its TCB exists.
// False when out of memory: a stack the debugger cannot see is not handed out.
bool StackRegions::log_slot(char *lo, size_t size) {
    StackRunBlock *b = runs_;
    if (b && b->count) {
        StackRun &last = b->runs[b->count - 1];
        if (last.size == size && last.lo + last.count * (size + kRedZoneBytes) == lo) {
            __atomic_store_n(&last.count, last.count + 1, __ATOMIC_RELEASE);
            return true;
        }
    }
    if (!b || b->count == StackRunBlock::kRuns) {
        b = new (std::nothrow) StackRunBlock{runs_, 0, {}};
        if (!b) return false;
        __atomic_store_n(&runs_, b, __ATOMIC_RELEASE);
    }
    b->runs[b->count] = StackRun{lo, size, 1};
    __atomic_store_n(&b->count, b->count + 1, __ATOMIC_RELEASE);
    return true;
}

bool StackRegions::carve(size_t size, Stack *out) {
    const size_t slot = size + kRedZoneBytes;
    std::lock_guard<std::mutex> lock(mu_);
    if (regions_.empty() || regions_.back().bytes - regions_.back().used < slot) {
        size_t bytes = std::max(kRegionBytes, slot);
        void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return false;
        regions_.push_back({static_cast<char *>(p), bytes, 0});
    }
    Region &r = regions_.back();
    char *base = r.base + r.used;
    if (!log_slot(base + kRedZoneBytes, size)) return false;
    r.used += slot;
    if (WEFT_ON_VALGRIND()) valgrind_stacks_.push_back(WEFT_VALGRIND_STACK_REGISTER(base + kRedZoneBytes, base + slot));
    out->lo = base + kRedZoneBytes;
    out->size = size;
    out->guarded = false;
    out->slot_below = base != r.base;
    if (guard_budget_ > 0 && mprotect(base, kRedZoneBytes, PROT_NONE) == 0) {
        --guard_budget_;
        out->guarded = true;
    }
    return true;
}

StackPool::SizeClass &StackPool::find_class(size_t size) {
    for (auto &c : classes_)
        if (c->size == size) return *(last_ = c.get());
    classes_.push_back(std::make_unique<SizeClass>());
    classes_.back()->size = size;
    return *(last_ = classes_.back().get());
}

// Past the hot list: a batch not yet given back, then the cold list, then
// fresh memory.
bool StackPool::alloc_slow(size_t size, Stack *out) {
    if (drain_remote() && alloc_hot(size, out)) return true;
    SizeClass &c = size_class(size);
    for (std::vector<Stack> *list : {&c.pending, &c.cold}) {
        if (list->empty()) continue;
        *out = list->back();
        list->pop_back();
        ++counters_.reused;
        return true;
    }
    if (!regions_.carve(size, out)) return false;
    out->owner = this;
    ++counters_.mapped;
    counters_.guarded += out->guarded;
    return true;
}

bool StackPool::drain_remote() {
    if (!remote_.load(std::memory_order_relaxed)) return false;
    FreeStack *f = remote_.exchange(nullptr, std::memory_order_acquire);
    while (f) {
        FreeStack *next = f->next; // release() may overwrite *f
        release(f->stack);
        f = next;
    }
    return true;
}

// The hot list is full: batch the stack for giving its pages back.
void StackPool::release_slow(Stack s) {
    SizeClass &c = size_class(s.size);
    c.pending.push_back(s);
    if (c.pending.size() >= kReleaseBatch) give_back(c);
}

void StackPool::give_back(SizeClass &c) {
    std::sort(c.pending.begin(), c.pending.end(), [](const Stack &a, const Stack &b) { return a.lo < b.lo; });
    // Slots of one region are contiguous ([red page][stack] ...): a run of
    // neighbours is one range. Red pages inside it are included, which also
    // resets the canary of unguarded stacks; a guard page may be given back
    // too (it holds no memory), its protection stays.
    for (size_t i = 0; i < c.pending.size();) {
        const Stack &first = c.pending[i];
        char *end = first.hi();
        size_t j = i + 1;
        while (j < c.pending.size() && c.pending[j].red_page() == end) end = c.pending[j++].hi();
        char *begin = first.guarded ? first.lo : first.red_page();
        madvise(begin, static_cast<size_t>(end - begin), MADV_DONTNEED);
        i = j;
    }
    counters_.released += c.pending.size();
    // Keep LIFO order roughly: the batch goes on top of the cold list.
    c.cold.insert(c.cold.end(), c.pending.begin(), c.pending.end());
    c.pending.clear();
}

} // namespace weft::detail
