// boost-fiber-micro — the core microbenchmarks on Boost.Fiber (Boost 1.74,
// Debian's libboost-fiber-dev): user-level threads with a scheduler (the
// default round_robin, on the main kernel thread) and fiber-aware mutexes
// and condition variables. Same command line and output as weft-micro
// (bench/micro/harness.h); system id "boost-fiber".
//
// --vprocs N > 1: N kernel threads (main and N-1 more), each running
// boost::fibers::algo::work_stealing(N) — fibers made on one are stolen by
// the others when they run dry. Its default, suspend = false: an idle thread
// keeps looking for fibers to steal instead of sleeping (with true it would
// sleep until one of its own fibers is woken, and never steal). Then only
// the benchmarks whose stacks may be freed on another thread than the one
// that allocated them (malloc'd fixedsize_stack) run: producer_consumer,
// memory_idle and fork_join; the others use a pooled_fixedsize_stack, which
// is not thread-safe.
//
//   create_join        fiber on a pooled 64 KiB stack + join
//   switch             two fibers calling this_fiber::yield in turn
//   cond_pingpong      fibers::mutex + two fibers::condition_variable + a turn
//   mutex_uncontended  fibers::mutex lock + unlock
//   mutex_handoff      two fibers each: lock, yield, unlock, yield
//   producer_consumer  --threads/2 producer and consumer fibers, a
//                      fibers::mutex and two condition_variables (Fig. 1)
//   memory_idle        fibers parked in condition_variable::wait, each on its
//                      own 64 KiB stack from fixedsize_stack (malloc)
//   fork_join          a tree of fibers computing fib(n) (harness.h's
//                      bench_fork_join): each for n >= 2 starts two and joins
//                      them; 64 KiB fixedsize_stack (malloc) each
#include <boost/fiber/all.hpp>

#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "harness.h"

namespace fibers = boost::fibers;

namespace {

constexpr const char *kSystem = "boost-fiber";
constexpr size_t kStack = 64 * 1024;
constexpr long kDefaultIdle = 100000;

uint64_t run_create_join(long iters, void *) {
    fibers::pooled_fixedsize_stack pool(kStack);
    const uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        fibers::fiber f(std::allocator_arg, pool, [] {});
        f.join();
    }
    return bench_now_ns() - t0;
}

uint64_t run_switch(long iters, void *) {
    auto yielder = [iters] {
        for (long i = 0; i < iters; ++i) boost::this_fiber::yield();
    };
    const uint64_t t0 = bench_now_ns();
    fibers::fiber a(std::allocator_arg, fibers::pooled_fixedsize_stack(kStack), yielder);
    fibers::fiber b(std::allocator_arg, fibers::pooled_fixedsize_stack(kStack), yielder);
    a.join();
    b.join();
    return bench_now_ns() - t0;
}

uint64_t run_cond_pingpong(long iters, void *) {
    fibers::mutex mu;
    fibers::condition_variable cv[2];
    int turn = 0;
    auto player = [&](int me) {
        const int other = 1 - me;
        std::unique_lock<fibers::mutex> l(mu);
        for (long i = 0; i < iters; ++i) {
            while (turn != me) cv[me].wait(l);
            turn = other;
            cv[other].notify_one();
        }
    };
    const uint64_t t0 = bench_now_ns();
    fibers::fiber a(std::allocator_arg, fibers::pooled_fixedsize_stack(kStack), player, 0);
    fibers::fiber b(std::allocator_arg, fibers::pooled_fixedsize_stack(kStack), player, 1);
    a.join();
    b.join();
    return bench_now_ns() - t0;
}

uint64_t run_mutex(long iters, void *) {
    static fibers::mutex mu;
    static volatile long counter;
    const uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        mu.lock();
        counter = counter + 1;
        mu.unlock();
    }
    return bench_now_ns() - t0;
}

uint64_t run_mutex_handoff(long iters, void *) {
    fibers::mutex mu;
    auto body = [&] {
        for (long i = 0; i < iters; ++i) {
            mu.lock();
            boost::this_fiber::yield();
            mu.unlock();
            boost::this_fiber::yield();
        }
    };
    const uint64_t t0 = bench_now_ns();
    fibers::fiber a(std::allocator_arg, fibers::pooled_fixedsize_stack(kStack), body);
    fibers::fiber b(std::allocator_arg, fibers::pooled_fixedsize_stack(kStack), body);
    a.join();
    b.join();
    return bench_now_ns() - t0;
}

int run_producer_consumer(const bench_opts *o) {
    const long n = o->threads;
    fibers::mutex mu;
    fibers::condition_variable not_empty, not_full;
    long count = 0, consumed = 0;
    bool stop = false;
    std::vector<uint64_t> sinks(static_cast<size_t>(n / 2));
    auto producer = [&] {
        std::unique_lock<fibers::mutex> l(mu);
        for (;;) {
            while (count == BENCH_PC_CAPACITY && !stop) not_full.wait(l);
            if (stop) return;
            ++count;
            not_empty.notify_one();
            l.unlock();
            l.lock();
        }
    };
    auto consumer = [&](long k) {
        uint64_t rng = bench_seed(static_cast<uint64_t>(k)), sink = 0;
        std::unique_lock<fibers::mutex> l(mu);
        for (;;) {
            while (count == 0 && !stop) not_empty.wait(l);
            if (stop) break;
            --count;
            ++consumed;
            not_full.notify_one();
            l.unlock();
            sink += bench_work(&rng);
            l.lock();
        }
        sinks[static_cast<size_t>(k / 2)] = sink;
    };
    auto locked_consumed = [&] {
        std::lock_guard<fibers::mutex> l(mu);
        return consumed;
    };
    std::vector<fibers::fiber> fs;
    fs.reserve(static_cast<size_t>(n));
    long created = 0;
    try {
        for (; created < n; ++created) {
            if (created % 2) fs.emplace_back(std::allocator_arg, fibers::fixedsize_stack(kStack), consumer, created);
            else fs.emplace_back(std::allocator_arg, fibers::fixedsize_stack(kStack), producer);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "boost-fiber-micro: creating fiber %ld failed: %s\n", created, e.what());
    }
    double rate = 0;
    long counted = 0;
    if (created == n) {
        boost::this_fiber::sleep_for(std::chrono::nanoseconds(static_cast<long>(o->min_time * 1e8)));
        bench_window w;
        const long c0 = locked_consumed();
        bench_window_open(&w);
        boost::this_fiber::sleep_for(std::chrono::nanoseconds(static_cast<long>(o->min_time * 1e9)));
        counted = locked_consumed() - c0;
        rate = bench_window_close(&w, counted);
    }
    {
        std::lock_guard<fibers::mutex> l(mu);
        stop = true;
    }
    not_empty.notify_all();
    not_full.notify_all();
    for (auto &f : fs) f.join();
    uint64_t sink = 0;
    for (uint64_t s : sinks) sink += s;
    if (created != n) return 1;
    char params[256];
    std::snprintf(params, sizeof params,
                  "\"threads\": %ld, \"capacity\": %d, \"work_max\": %d, \"stack\": %zu, \"sink\": %llu", n,
                  BENCH_PC_CAPACITY, BENCH_WORK_MAX, kStack, static_cast<unsigned long long>(sink % 1000));
    bench_report(o, kSystem, params, "msgs/s", rate, counted);
    return 0;
}

int run_memory_idle(const bench_opts *o) {
    const long n = o->threads;
    fibers::mutex mu;
    fibers::condition_variable cv;
    bool released = false;
    long parked = 0;
    std::vector<fibers::fiber> fs;
    fs.reserve(static_cast<size_t>(n)); // resident before the baseline
    std::memset(static_cast<void *>(fs.data()), 0, static_cast<size_t>(n) * sizeof(fibers::fiber));
    auto idler = [&] {
        std::unique_lock<fibers::mutex> l(mu);
        ++parked;
        while (!released) cv.wait(l);
    };
    { // warm the paths
        fibers::fiber w(std::allocator_arg, fibers::fixedsize_stack(kStack), [] {});
        w.join();
    }
    const long rss0 = bench_rss_bytes();
    const uint64_t t0 = bench_now_ns();
    long created = 0;
    try {
        for (; created < n; ++created) {
            fs.emplace_back(std::allocator_arg, fibers::fixedsize_stack(kStack), idler);
            bench_progress(o->prog, "created", created + 1, n, 100000);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "boost-fiber-micro: creating fiber %ld failed: %s\n", created, e.what());
    }
    while (parked < created) boost::this_fiber::yield();
    const uint64_t t1 = bench_now_ns();
    const long rss1 = bench_rss_bytes();
    {
        std::lock_guard<fibers::mutex> l(mu);
        released = true;
    }
    cv.notify_all();
    for (auto &f : fs) f.join();
    const uint64_t t2 = bench_now_ns();
    if (created == 0 || rss0 < 0 || rss1 < 0) {
        std::fprintf(stderr, "boost-fiber-micro: memory_idle: no measurement (created=%ld)\n", created);
        return 1;
    }
    char params[320];
    std::snprintf(params, sizeof params,
                  "\"threads\": %ld, \"requested\": %ld, \"stack\": %zu, \"park\": \"condition_variable::wait\", "
                  "\"rss_before\": %ld, \"rss_after\": %ld, \"create_park_s\": %.3f, \"teardown_s\": %.3f%s",
                  created, n, kStack, rss0, rss1, double(t1 - t0) / 1e9, double(t2 - t1) / 1e9,
                  created < n ? ", \"limited\": \"fiber creation failed\"" : "");
    bench_report(o, kSystem, params, "bytes", double(rss1 - rss0) / double(created), 0);
    return 0;
}

// ---- fork_join: a tree of fibers computing fib(n) ----

long fib_node(long n) {
    if (n < 2) return n;
    long a = 0, b = 0;
    fibers::fiber fa(std::allocator_arg, fibers::fixedsize_stack(kStack), [&a, n] { a = fib_node(n - 1); });
    fibers::fiber fb(std::allocator_arg, fibers::fixedsize_stack(kStack), [&b, n] { b = fib_node(n - 2); });
    fa.join();
    fb.join();
    return a + b;
}

long fib_tree(long n, void *) {
    long r = -1;
    try {
        fibers::fiber root(std::allocator_arg, fibers::fixedsize_stack(kStack), [&r, n] { r = fib_node(n); });
        root.join();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "boost-fiber-micro: fork_join: %s\n", e.what());
        return -1;
    }
    return r;
}

void fork_join_extra(void *, int end, char *buf, size_t len) {
    if (end) std::snprintf(buf, len, "\"op\": \"fiber x2 + join x2\", \"stack\": %zu", kStack);
}

// --vprocs N > 1: N-1 more kernel threads running work_stealing, parked
// (their main fiber) until the benchmark is over.
class Stealers {
  public:
    explicit Stealers(long n) : n_(static_cast<uint32_t>(n)) {
        if (n_ < 2) return;
        for (uint32_t i = 1; i < n_; ++i)
            threads_.emplace_back([this] {
                fibers::use_scheduling_algorithm<fibers::algo::work_stealing>(n_);
                std::unique_lock<fibers::mutex> l(mu_);
                cv_.wait(l, [this] { return done_; });
            });
        // The last to join work_stealing's start-up barrier (every thread's).
        fibers::use_scheduling_algorithm<fibers::algo::work_stealing>(n_);
    }
    ~Stealers() {
        if (n_ < 2) return;
        {
            std::lock_guard<fibers::mutex> l(mu_);
            done_ = true;
        }
        cv_.notify_all();
        for (auto &t : threads_) t.join();
    }

  private:
    uint32_t n_;
    std::vector<std::thread> threads_;
    fibers::mutex mu_;
    fibers::condition_variable cv_;
    bool done_ = false;
};

int run(const bench_opts &o) {
    long iters = 0;
    double v;
    const char *b = o.bench;
    if (!std::strcmp(b, "memory_idle")) return run_memory_idle(&o);
    if (!std::strcmp(b, "producer_consumer")) return run_producer_consumer(&o);
    if (!std::strcmp(b, "fork_join")) return bench_fork_join(&o, kSystem, fib_tree, nullptr, fork_join_extra);
    if (!std::strcmp(b, "create_join")) {
        v = bench_measure(&o, run_create_join, nullptr, 1.0, &iters);
        bench_report(&o, kSystem, "\"op\": \"fiber (pooled stack) + join\", \"stack\": 65536", "ns", v, iters);
    } else if (!std::strcmp(b, "switch")) {
        v = bench_measure(&o, run_switch, nullptr, 2.0, &iters);
        bench_report(&o, kSystem, "\"op\": \"this_fiber::yield\", \"threads\": 2", "ns", v, iters);
    } else if (!std::strcmp(b, "cond_pingpong")) {
        v = bench_measure(&o, run_cond_pingpong, nullptr, 2.0, &iters);
        bench_report(&o, kSystem, "\"op\": \"mutex + 2 condition_variable + turn\", \"threads\": 2", "ns", v, iters);
    } else if (!std::strcmp(b, "mutex_handoff")) {
        v = bench_measure(&o, run_mutex_handoff, nullptr, 2.0, &iters);
        bench_report(&o, kSystem, "\"op\": \"lock, this_fiber::yield, unlock, this_fiber::yield\", \"threads\": 2", "ns",
                     v, iters);
    } else if (!std::strcmp(b, "mutex_uncontended")) {
        v = bench_measure(&o, run_mutex, nullptr, 1.0, &iters);
        bench_report(&o, kSystem, "\"op\": \"fibers::mutex lock+unlock\"", "ns", v, iters);
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    bench_opts o;
    int r = bench_parse_only(argc, argv, &o, "Boost.Fiber", kDefaultIdle, BENCH_NAMES_NO_DISK " fork_join");
    if (r) return r == 1 ? 0 : 2;
    if (o.vprocs > 1 && !bench_in("producer_consumer memory_idle fork_join", o.bench)) {
        std::fprintf(stderr,
                     "%s: with --vprocs > 1 only producer_consumer, memory_idle and fork_join (%s uses a "
                     "pooled_fixedsize_stack, which is not thread-safe)\n",
                     o.prog, o.bench);
        return 2;
    }
    bench_check_cpus(&o);
    Stealers stealers(o.vprocs);
    return run(o);
}
