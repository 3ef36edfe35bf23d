// vt-peer-asio — weft-vt-bench's measurements on Boost.Asio's C++20
// coroutines (Boost 1.74, header-only: asio::awaitable, co_spawn,
// use_awaitable), the stackless peer closest to weft's virtual threads. One
// io_context (concurrency hint 1) run by the main kernel thread; run by
// bench/vt/vt_peers.py beside weft-vt-bench; pin it (taskset -c 1).
//
//   spawn_join   from a coroutine: co_await co_spawn(ex, nothing(),
//                use_awaitable) — a new coroutine thread that returns at once,
//                awaited to its end
//   yield        two coroutines each co_await post(ex, use_awaitable) in turn
//                (back of the io_context's queue): ns per yield
//   channel      not measured: Asio's channels (asio::experimental::channel)
//                came with Boost 1.80; 1.74 has none
//   idle_memory  N coroutines (co_spawn(..., detached)) parked in
//                async_wait on one steady_timer that never expires (Asio's
//                event: cancel() releases every waiter): resident bytes per
//                coroutine, (RSS after - RSS before) / N
#include <utility> // before Asio: 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/version.hpp>

#include <cstdio>
#include <string>

#include "peer_common.hpp"

namespace asio = boost::asio;

namespace {

constexpr const char *kSystem = "asio";
vtpeer::Options opts;
int status = 0;

asio::awaitable<void> nothing() { co_return; }

asio::awaitable<void> yielder(long n) {
    auto ex = co_await asio::this_coro::executor;
    for (long i = 0; i < n; ++i) co_await asio::post(ex, asio::use_awaitable);
}

// Parks on `gate` until it is cancelled.
asio::awaitable<void> idler(asio::steady_timer *gate, long *parked, long *done) {
    boost::system::error_code ec;
    ++*parked;
    co_await gate->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    ++*done;
}

std::string version_param() {
    return "\"boost\": \"" + std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) +
           "\"";
}

asio::awaitable<void> timed(long n) {
    auto ex = co_await asio::this_coro::executor;
    {
        const uint64_t t0 = vtpeer::now_ns();
        for (long i = 0; i < n; ++i) co_await asio::co_spawn(ex, nothing(), asio::use_awaitable);
        vtpeer::report(opts, kSystem, "spawn_join", double(vtpeer::now_ns() - t0) / double(n), "ns",
                       "\"op\": \"co_await co_spawn(ex, task, use_awaitable)\", " + version_param());
    }
    {
        // Two yielders; this coroutine waits on a timer the second to end cancels.
        asio::steady_timer joined(ex, asio::steady_timer::time_point::max());
        int left = 2;
        auto end = [&](std::exception_ptr) {
            if (--left == 0) joined.cancel();
        };
        const uint64_t t0 = vtpeer::now_ns();
        asio::co_spawn(ex, yielder(n), end);
        asio::co_spawn(ex, yielder(n), end);
        boost::system::error_code ec;
        while (left > 0) co_await joined.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        vtpeer::report(opts, kSystem, "yield", double(vtpeer::now_ns() - t0) / double(2 * n), "ns",
                       "\"op\": \"co_await post(ex, use_awaitable)\"");
    }
}

asio::awaitable<void> idle(long n) {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer gate(ex, asio::steady_timer::time_point::max());
    long parked = 0, done = 0;
    { // warm the paths with one
        asio::steady_timer g(ex, asio::steady_timer::time_point::max());
        long p = 0, d = 0;
        asio::co_spawn(ex, idler(&g, &p, &d), asio::detached);
        while (p < 1) co_await asio::post(ex, asio::use_awaitable);
        g.cancel();
        while (d < 1) co_await asio::post(ex, asio::use_awaitable);
    }
    const long before = vtpeer::rss_bytes();
    const uint64_t t0 = vtpeer::now_ns();
    for (long i = 0; i < n; ++i) asio::co_spawn(ex, idler(&gate, &parked, &done), asio::detached);
    while (parked < n) co_await asio::post(ex, asio::use_awaitable);
    co_await asio::post(ex, asio::use_awaitable); // the last one's wait is queued
    const uint64_t t1 = vtpeer::now_ns();
    const long after = vtpeer::rss_bytes();
    gate.cancel();
    while (done < n) co_await asio::post(ex, asio::use_awaitable);
    if (before < 0 || after < 0) {
        std::fprintf(stderr, "vt-peer-asio: idle_memory: cannot read /proc/self/statm\n");
        status = 1;
        co_return;
    }
    char extra[160];
    std::snprintf(extra, sizeof extra,
                  "\"idle\": %ld, \"park\": \"steady_timer::async_wait (one timer)\", \"create_park_s\": %.3f, ", n,
                  double(t1 - t0) / 1e9);
    vtpeer::report(opts, kSystem, "idle_memory", double(after - before) / double(n), "bytes",
                   extra + version_param());
}

asio::awaitable<void> body() {
    if (opts.ops > 0) co_await timed(opts.ops);
    if (opts.idle > 0) co_await idle(opts.idle);
}

} // namespace

int main(int argc, char **argv) {
    const char *usage = "usage: vt-peer-asio [--ops N] [--idle N] [--json]\n"
                        "weft-vt-bench's measurements on Boost.Asio C++20 coroutines (one io_context):\n"
                        "spawn+join and yield (N = --ops, default 1000000, 0 skips them; no channel: Boost\n"
                        "1.74's Asio has none) and resident memory per coroutine parked on a timer\n"
                        "(--idle, default 1000000, 0 skips it). Pin it: taskset -c 1.\n";
    opts = vtpeer::parse(argc, argv, usage, [](const std::string &, const char *) { return 0; });
    try {
        asio::io_context ctx(1);
        asio::co_spawn(ctx, body(), [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
        ctx.run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vt-peer-asio: %s\n", e.what());
        return 1;
    }
    return status;
}
