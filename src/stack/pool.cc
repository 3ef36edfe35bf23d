#include "stack/provider.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>

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

size_t round_stack_size(size_t requested) {
    size_t s = std::max(requested, kMinStackSize);
    return (s + kPageSize - 1) & ~(kPageSize - 1);
}

StackRegions::StackRegions() {
    // Each guard splits its region: two more map entries per guarded stack.
    guard_budget_ = std::max(0L, (read_max_map_count() - kMapReserve) / 2);
}

StackRegions::~StackRegions() {
    for (const Region &r : regions_) munmap(r.base, r.bytes);
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
    r.used += slot;
    out->lo = base + kRedZoneBytes;
    out->size = size;
    out->guarded = false;
    if (guard_budget_ > 0 && mprotect(base, kRedZoneBytes, PROT_NONE) == 0) {
        --guard_budget_;
        out->guarded = true;
    }
    return true;
}

StackPool::SizeClass &StackPool::find_class(size_t size) {
    for (auto &c : classes_)
        if (c->size == size) return *(last_ = c.get());
    classes_.push_back(std::make_unique<SizeClass>(SizeClass{size, {}, {}}));
    return *(last_ = classes_.back().get());
}

bool StackPool::alloc(size_t size, Stack *out) {
    SizeClass &c = size_class(size);
    std::vector<Stack> &from = !c.hot.empty() ? c.hot : c.cold;
    if (!from.empty()) {
        *out = from.back();
        from.pop_back();
        ++counters_.reused;
        return true;
    }
    if (!regions_.carve(size, out)) return false;
    ++counters_.mapped;
    counters_.guarded += out->guarded;
    return true;
}

void StackPool::release(const Stack &s) {
    SizeClass &c = size_class(s.size);
    if (c.hot.size() < kHotStacks) {
        c.hot.push_back(s);
        return;
    }
    // The red page is included so a canary it holds reads zero again.
    madvise(s.guarded ? s.lo : s.red_page(), s.size + (s.guarded ? 0 : kRedZoneBytes),
            MADV_DONTNEED);
    ++counters_.released;
    c.cold.push_back(s);
}

} // namespace weft::detail
