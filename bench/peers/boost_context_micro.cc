// boost-context-micro — Boost.Context's raw switch, the floor weft's switch is
// measured against (Boost 1.74, Debian's libboost-context-dev). Same command
// line and output as weft-micro (bench/micro/harness.h); system id
// "boost-context".
//
// Boost.Context is a context-switch library, not a thread library: it has no
// scheduler, no join, no mutex or condition variable. So only two benchmarks
// exist here (--list says which):
//   switch       two contexts resuming each other: ns per one resume, i.e.
//                per switch, with no run queue or scheduler in between
//                (weft's switch benchmark yields through its scheduler).
//   create_join  a fiber on a pooled 64 KiB stack, resumed once; it returns
//                at once, which ends it (Boost's "join").
#include <boost/context/fiber.hpp>
#include <boost/context/pooled_fixedsize_stack.hpp>

#include <cstdio>
#include <cstring>
#include <utility>

#include "harness.h"

namespace ctx = boost::context;

namespace {

constexpr const char *kSystem = "boost-context";
constexpr size_t kStack = 64 * 1024;

uint64_t run_switch(long iters, void *) {
    bool stop = false;
    ctx::fiber f{std::allocator_arg, ctx::pooled_fixedsize_stack(kStack), [&stop](ctx::fiber &&main) {
                     while (!stop) main = std::move(main).resume();
                     return std::move(main);
                 }};
    const uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) f = std::move(f).resume(); // two switches: there and back
    const uint64_t e = bench_now_ns() - t0;
    stop = true;
    f = std::move(f).resume(); // let it return
    return e;
}

uint64_t run_create_join(long iters, void *) {
    ctx::pooled_fixedsize_stack pool(kStack);
    const uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        ctx::fiber f{std::allocator_arg, pool, [](ctx::fiber &&main) { return std::move(main); }};
        f = std::move(f).resume();
        if (f) {
            std::fprintf(stderr, "boost-context-micro: the fiber did not end\n");
            std::exit(1);
        }
    }
    return bench_now_ns() - t0;
}

} // namespace

int main(int argc, char **argv) {
    bench_opts o;
    int r = bench_parse_only(argc, argv, &o, "Boost.Context (raw switch: no scheduler, no sync)", 0,
                             "create_join switch");
    if (r) return r == 1 ? 0 : 2;
    if ((r = bench_single_cpu(&o, "Boost.Context (no scheduler)"))) return r;
    bench_check_pinned(argv[0]);
    long iters = 0;
    if (!std::strcmp(o.bench, "switch")) {
        double v = bench_measure(&o, run_switch, nullptr, 2.0, &iters);
        bench_report(&o, kSystem, "\"op\": \"fiber::resume (no scheduler)\", \"threads\": 2", "ns", v, iters);
    } else {
        double v = bench_measure(&o, run_create_join, nullptr, 1.0, &iters);
        bench_report(&o, kSystem, "\"op\": \"fiber (pooled stack) + resume to its end\", \"stack\": 65536", "ns", v,
                     iters);
    }
    return 0;
}
