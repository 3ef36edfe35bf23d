// Shared by the files of libweft-posix (docs/posix.md): whether the caller
// is a weft thread, and the counters `weft-run --report` prints.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/vproc.hpp"

namespace weft::posix {

// True on a weft user thread; false before main, after the runtime ended,
// and on kernel threads that are not vprocs (offload workers, threads the
// program made before main): those get libc's calls unchanged.
inline bool on_weft() {
    detail::Vproc *vp = detail::tls_vproc;
    return vp && vp->current && vp->current != &vp->loop;
}

// What the shim did, for --report: calls it served on weft, and calls it
// passed to libc because they came from outside weft or because weft has no
// equivalent (the latter named, the first time, on stderr with --report).
enum Counter : int {
    kServed,
    kOutside,
    kPassedThrough,
    kCounterCount,
};
extern std::atomic<uint64_t> g_counters[kCounterCount];
inline void count(Counter c) { g_counters[c].fetch_add(1, std::memory_order_relaxed); }

// A call weft cannot serve as asked, handed to libc: counted, and named on
// stderr once per name when WEFT_POSIX_REPORT is set.
void passed_through(const char *name);

// Nanoseconds on weft's clock (CLOCK_MONOTONIC) for an absolute timespec
// on `clock`; 0 deadline never happens (at least 1).
uint64_t deadline_on(clockid_t clock, const struct timespec *abs);
bool valid_timespec(const struct timespec *ts);

} // namespace weft::posix
