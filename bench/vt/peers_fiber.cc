// vt-peer-fiber — weft-vt-bench's four measurements on Boost.Fiber (Boost
// 1.74, libboost-fiber-dev): stackful user-level threads, the default
// round_robin scheduler on the main kernel thread. Run by
// bench/vt/vt_peers.py beside weft-vt-bench; pin it (taskset -c 1).
//
//   spawn_join   fibers::fiber on a pooled stack that returns at once + join
//                (from the main fiber)
//   yield        two fibers calling this_fiber::yield in turn: ns per yield
//   channel      two fibers passing an int through two buffered_channel<int>
//                of capacity 2 (Boost's ring keeps one slot free: one value
//                fits, as weft's Channel<int>(1)): ns per hand-off
//   channel_unbuffered  the same through two unbuffered_channel<int>
//   idle_memory  N fibers parked in unbuffered_channel::pop on one channel
//                (closed to release them), each on its own --stack bytes
//                from fixedsize_stack (malloc): resident bytes per fiber,
//                (RSS after - RSS before) / N, the fiber handles' array made
//                resident before the first reading
//
// Stacks are --stack bytes, default 16 KiB: the smallest multiple of the
// page above Boost's stack_traits::minimum_size() (glibc's MINSIGSTKSZ,
// which follows the CPU's signal frame: 13,504 bytes on the 2-CPU VM this
// was written on), and a fiber parked in a channel's pop has used ~9 KB of
// it by its end there (8 KiB stacks crash). Boost's default is
// stack_traits::default_size(), 128 KiB; bench/peers/boost_fiber_micro.cc
// uses 64 KiB. Only the pages a fiber touches are resident: its control
// block at the top, the frames of its park, malloc's header at the bottom.
#include <boost/fiber/all.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "peer_common.hpp"

namespace fibers = boost::fibers;

namespace {

constexpr const char *kSystem = "boost-fiber";
size_t stack_size = 16 * 1024;

std::string stack_param(const char *alloc) {
    return "\"stack\": " + std::to_string(stack_size) + ", \"stack_min\": " +
           std::to_string(boost::context::stack_traits::minimum_size()) + ", \"stack_allocator\": \"" + alloc + "\"";
}

void timed(const vtpeer::Options &o) {
    const long n = o.ops;
    fibers::pooled_fixedsize_stack pool(stack_size);
    { // spawn + join
        const uint64_t t0 = vtpeer::now_ns();
        for (long i = 0; i < n; ++i) {
            fibers::fiber f(std::allocator_arg, pool, [] {});
            f.join();
        }
        vtpeer::report(o, kSystem, "spawn_join", double(vtpeer::now_ns() - t0) / double(n), "ns",
                       stack_param("pooled_fixedsize_stack"));
    }
    { // yield
        auto yielder = [n] {
            for (long i = 0; i < n; ++i) boost::this_fiber::yield();
        };
        const uint64_t t0 = vtpeer::now_ns();
        fibers::fiber a(std::allocator_arg, pool, yielder), b(std::allocator_arg, pool, yielder);
        a.join();
        b.join();
        vtpeer::report(o, kSystem, "yield", double(vtpeer::now_ns() - t0) / double(2 * n), "ns",
                       "\"op\": \"this_fiber::yield\"");
    }
    { // channel ping-pong, one slot
        fibers::buffered_channel<int> c1(2), c2(2);
        const uint64_t t0 = vtpeer::now_ns();
        fibers::fiber a(std::allocator_arg, pool, [&] {
            int v;
            for (long i = 0; i < n; ++i) {
                c1.push(1);
                c2.pop(v);
            }
        });
        fibers::fiber b(std::allocator_arg, pool, [&] {
            int v;
            for (long i = 0; i < n; ++i) {
                c1.pop(v);
                c2.push(1);
            }
        });
        a.join();
        b.join();
        vtpeer::report(o, kSystem, "channel", double(vtpeer::now_ns() - t0) / double(2 * n), "ns",
                       "\"op\": \"buffered_channel<int>(2): one value\"");
    }
    { // channel ping-pong, unbuffered
        fibers::unbuffered_channel<int> c1, c2;
        const uint64_t t0 = vtpeer::now_ns();
        fibers::fiber a(std::allocator_arg, pool, [&] {
            int v;
            for (long i = 0; i < n; ++i) {
                c1.push(1);
                c2.pop(v);
            }
        });
        fibers::fiber b(std::allocator_arg, pool, [&] {
            int v;
            for (long i = 0; i < n; ++i) {
                c1.pop(v);
                c2.push(1);
            }
        });
        a.join();
        b.join();
        vtpeer::report(o, kSystem, "channel_unbuffered", double(vtpeer::now_ns() - t0) / double(2 * n), "ns",
                       "\"op\": \"unbuffered_channel<int>\"");
    }
}

int idle(const vtpeer::Options &o) {
    const long n = o.idle;
    fibers::unbuffered_channel<int> gate;
    long parked = 0;
    auto idler = [&] {
        int v;
        ++parked;
        gate.pop(v); // closed: returns channel_op_status::closed
    };
    std::vector<fibers::fiber> fs(static_cast<size_t>(n)); // empty handles: resident before the baseline
    { // warm the paths (and malloc's arena) with one
        fibers::unbuffered_channel<int> g;
        fibers::fiber w(std::allocator_arg, fibers::fixedsize_stack(stack_size), [&] {
            int v;
            g.pop(v);
        });
        boost::this_fiber::yield();
        g.close();
        w.join();
    }
    const long before = vtpeer::rss_bytes();
    const uint64_t t0 = vtpeer::now_ns();
    long created = 0;
    try {
        for (; created < n; ++created)
            fs[static_cast<size_t>(created)] =
                fibers::fiber(std::allocator_arg, fibers::fixedsize_stack(stack_size), idler);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vt-peer-fiber: creating fiber %ld of %ld failed: %s\n", created + 1, n, e.what());
    }
    while (parked < created) boost::this_fiber::yield();
    const uint64_t t1 = vtpeer::now_ns();
    const long after = vtpeer::rss_bytes();
    gate.close();
    for (long i = 0; i < created; ++i) fs[static_cast<size_t>(i)].join();
    if (created < n || before < 0 || after < 0) {
        std::fprintf(stderr, "vt-peer-fiber: idle_memory: no measurement (%ld of %ld fibers)\n", created, n);
        return 1;
    }
    char extra[160];
    std::snprintf(extra, sizeof extra, ", \"idle\": %ld, \"park\": \"unbuffered_channel::pop\", \"create_park_s\": %.3f",
                  n, double(t1 - t0) / 1e9);
    vtpeer::report(o, kSystem, "idle_memory", double(after - before) / double(n), "bytes",
                   stack_param("fixedsize_stack (malloc)") + extra);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    const char *usage =
        "usage: vt-peer-fiber [--ops N] [--idle N] [--stack BYTES] [--json]\n"
        "weft-vt-bench's measurements on Boost.Fiber: spawn+join, yield, channel ping-pong\n"
        "(one slot and unbuffered; N = --ops, default 1000000, 0 skips them) and resident\n"
        "memory per fiber parked on a channel (--idle, default 1000000, 0 skips it).\n"
        "--stack: each fiber's stack (default 16384). Pin it: taskset -c 1.\n";
    vtpeer::Options o = vtpeer::parse(argc, argv, usage, [&](const std::string &a, const char *v) {
        if (a != "--stack") return 0;
        stack_size = static_cast<size_t>(vtpeer::parse_count(argv[0], "--stack", v));
        if (stack_size < 4096) {
            std::fprintf(stderr, "vt-peer-fiber: --stack below 4096\n");
            std::exit(2);
        }
        return 2;
    });
    try {
        if (o.ops > 0) timed(o);
        if (o.idle > 0) return idle(o);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vt-peer-fiber: %s\n", e.what());
        return 1;
    }
    return 0;
}
