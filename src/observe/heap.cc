// libweft-heap: per-kernel-thread heap accounting for the blocking graph.
//
// The graph charges each edge with the heap bytes its thread allocated less
// those it freed (graph.hpp). A segment of a weft thread runs on one kernel
// thread from resume to park, with nobody else running there in between, so
// a running total per kernel thread, read at both ends, gives the segment's
// share exactly: no per-weft-thread state, no lock, one thread-local add per
// call. The counter is the usable size glibc reports, so it matches what the
// allocator holds, not what was asked for.
//
// Used by linking `weft::heap` (it must come before libc, as any malloc
// interposer) or with LD_PRELOAD=libweft-heap.so. libweft reads
// weft_heap_thread_bytes through a weak reference: without this library heap
// changes read 0 and malloc is untouched. Not in sanitizer builds, whose
// runtime replaces malloc itself.
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>

#include <cerrno>

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
}

namespace {

constinit thread_local int64_t t_heap_bytes __attribute__((tls_model("initial-exec"))) = 0;

inline void *counted(void *p) {
    if (p) t_heap_bytes += static_cast<int64_t>(malloc_usable_size(p));
    return p;
}

inline void uncount(void *p) {
    if (p) t_heap_bytes -= static_cast<int64_t>(malloc_usable_size(p));
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) int64_t weft_heap_thread_bytes(void) { return t_heap_bytes; }

__attribute__((visibility("default"))) void *malloc(size_t n) { return counted(__libc_malloc(n)); }

__attribute__((visibility("default"))) void free(void *p) {
    uncount(p);
    __libc_free(p);
}

__attribute__((visibility("default"))) void *calloc(size_t n, size_t size) { return counted(__libc_calloc(n, size)); }

__attribute__((visibility("default"))) void *realloc(void *p, size_t n) {
    int64_t before = p ? static_cast<int64_t>(malloc_usable_size(p)) : 0;
    void *q = __libc_realloc(p, n);
    if (q || n == 0) t_heap_bytes -= before; // moved, grown, shrunk or freed
    return counted(q);
}

__attribute__((visibility("default"))) void *memalign(size_t align, size_t n) {
    return counted(__libc_memalign(align, n));
}

__attribute__((visibility("default"))) void *aligned_alloc(size_t align, size_t n) {
    return counted(__libc_memalign(align, n));
}

__attribute__((visibility("default"))) int posix_memalign(void **out, size_t align, size_t n) {
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p && n) return ENOMEM;
    *out = counted(p);
    return 0;
}

__attribute__((visibility("default"))) void *valloc(size_t n) { return counted(__libc_memalign(4096, n)); }

} // extern "C"
