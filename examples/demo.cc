// weft-demo: a short, bounded tour of the runtime core that prints figures.
// `make run` runs it until the web comparison (issue 6) takes its place.
//
//   weft-demo [--threads N] [--vprocs N] [--quick] [--help]
#include <sys/resource.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "weft/weft.hpp"

namespace {

struct Options {
    long idle_threads = 100000;
    int vprocs = 2;
    long iters = 2000000;
};

double ns_since(uint64_t t0, double ops) { return static_cast<double>(weft_now_ns() - t0) / ops; }

long rss_kib() {
    long kib = 0;
    if (FILE *f = std::fopen("/proc/self/status", "r")) {
        char line[256];
        while (std::fgets(line, sizeof line, f))
            if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
        std::fclose(f);
    }
    return kib;
}

void yield_pingpong(const Options &o) {
    uint64_t t0 = weft_now_ns();
    {
        weft::thread a([&] { for (long i = 0; i < o.iters; ++i) weft::this_thread::yield(); });
        weft::thread b([&] { for (long i = 0; i < o.iters; ++i) weft::this_thread::yield(); });
    }
    // Two lambdas: two call sites, so each switch also pays a return
    // misprediction (see docs/benchmarks.md); make bench measures one site.
    std::printf("  yield ping-pong          %8.1f ns per switch (two call sites)\n", ns_since(t0, 2.0 * o.iters));
}

void create_join(const Options &o) {
    long n = o.iters / 4;
    uint64_t t0 = weft_now_ns();
    for (long i = 0; i < n; ++i) {
        weft_thread_t t;
        weft_thread_create(&t, nullptr, [](void *) -> void * { return nullptr; }, nullptr);
        weft_thread_join(t, nullptr);
    }
    std::printf("  create + join            %8.1f ns\n", ns_since(t0, static_cast<double>(n)));
}

void cond_pingpong(const Options &o) {
    weft::mutex m;
    weft::condition_variable cv;
    int turn = 0;
    auto player = [&](int me) {
        std::unique_lock<weft::mutex> lk(m);
        for (long i = 0; i < o.iters; ++i) {
            cv.wait(lk, [&] { return turn == me; });
            turn = !me;
            cv.notify_one();
        }
    };
    uint64_t t0 = weft_now_ns();
    {
        weft::thread a([&] { player(0); });
        weft::thread b([&] { player(1); });
    }
    std::printf("  cond ping-pong           %8.1f ns per hand-off (two call sites)\n", ns_since(t0, 2.0 * o.iters));
}

void mutex_uncontended(const Options &o) {
    weft::mutex m;
    long n = o.iters * 10;
    uint64_t t0 = weft_now_ns();
    for (long i = 0; i < n; ++i) {
        m.lock();
        m.unlock();
    }
    std::printf("  mutex lock + unlock      %8.1f ns\n", ns_since(t0, static_cast<double>(n)));
}

void idle_memory(const Options &o) {
    weft_sem_t gate = WEFT_SEM_INITIALIZER(0);
    long before = rss_kib();
    std::vector<weft_thread_t> ts(static_cast<size_t>(o.idle_threads));
    uint64_t t0 = weft_now_ns();
    for (auto &t : ts)
        if (int e = weft_thread_create(&t, nullptr, [](void *g) -> void * {
                weft_sem_wait(static_cast<weft_sem_t *>(g));
                return nullptr;
            }, &gate)) {
            std::fprintf(stderr, "weft-demo: thread creation failed: %s\n", std::strerror(e));
            std::exit(1);
        }
    weft_yield(); // let them all run once and park on the semaphore
    double create_ns = ns_since(t0, static_cast<double>(o.idle_threads));
    long after = rss_kib();
    for (size_t i = 0; i < ts.size(); ++i) weft_sem_post(&gate);
    for (auto &t : ts) weft_thread_join(t, nullptr);
    std::printf("  %ld idle threads        %8.0f bytes each (RSS), created+parked in %.0f ns each\n",
                o.idle_threads, 1024.0 * static_cast<double>(after - before) / static_cast<double>(o.idle_threads),
                create_ns);
}

void sleepers() {
    constexpr int kN = 10000;
    std::vector<int> order;
    order.reserve(kN);
    std::vector<weft::thread> ts;
    ts.reserve(kN);
    // The threads first run when this one blocks in join, after `t0` is set.
    uint64_t t0 = 0;
    for (int i = 0; i < kN; ++i) {
        // Distinct deadlines 1 µs apart, 10-20 ms after t0, in scrambled order.
        int delay_us = static_cast<int>((static_cast<unsigned>(i) * 7919u) % 10000u);
        ts.emplace_back([&order, &t0, delay_us] {
            weft_sleep_until_ns(t0 + 10000000 + static_cast<uint64_t>(delay_us) * 1000);
            order.push_back(delay_us);
        });
    }
    t0 = weft_now_ns();
    ts.clear(); // joins
    bool sorted = true;
    for (size_t i = 1; i < order.size(); ++i) sorted &= order[i - 1] <= order[i];
    std::printf("  %d sleepers (10-20 ms)   woke in deadline order: %s, %.1f ms in all\n", kN, sorted ? "yes" : "NO",
                static_cast<double>(weft_now_ns() - t0) / 1e6);
}

void producer_consumer(int vprocs) {
    constexpr long kItems = 200000;
    constexpr size_t kCap = 64;
    weft::mutex m;
    weft::condition_variable not_full, not_empty;
    std::vector<long> buf;
    long sum = 0;
    uint64_t t0 = weft_now_ns();
    {
        std::vector<weft::thread> ts;
        for (int v = 0; v < vprocs; ++v) {
            ts.emplace_back([&] {
                for (long i = 1; i <= kItems / vprocs; ++i) {
                    std::unique_lock<weft::mutex> lk(m);
                    not_full.wait(lk, [&] { return buf.size() < kCap; });
                    buf.push_back(i);
                    not_empty.notify_one();
                }
            }, weft::thread_options{.home_vproc = v});
            ts.emplace_back([&] {
                for (long i = 1; i <= kItems / vprocs; ++i) {
                    std::unique_lock<weft::mutex> lk(m);
                    not_empty.wait(lk, [&] { return !buf.empty(); });
                    sum += buf.back();
                    buf.pop_back();
                    not_full.notify_one();
                }
            }, weft::thread_options{.home_vproc = (v + 1) % vprocs});
        }
    }
    long per = kItems / vprocs;
    long expect = vprocs * per * (per + 1) / 2;
    std::printf("  producer-consumer, %d vprocs: %ld items, %.0f ns each, checksum %s\n", vprocs, kItems,
                ns_since(t0, kItems), sum == expect ? "ok" : "WRONG");
}

void usage() {
    std::puts("usage: weft-demo [--threads N] [--vprocs N] [--quick]\n"
              "  A bounded tour of the weft runtime core (a few seconds), printing figures.\n"
              "  --threads N  idle threads for the memory figure (default 100000)\n"
              "  --vprocs N   vprocs for the cross-vproc producer-consumer (default 2)\n"
              "  --quick      fewer iterations\n"
              "For pinned, repeated measurements against State Threads and NPTL: make bench");
}

} // namespace

int main(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> long {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "weft-demo: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            char *end;
            long v = std::strtol(argv[++i], &end, 10);
            if (*end || v < 1) {
                std::fprintf(stderr, "weft-demo: %s: expected a positive number, got '%s'\n", a.c_str(), argv[i]);
                std::exit(2);
            }
            return v;
        };
        if (a == "--help" || a == "-h") {
            usage();
            return 0;
        } else if (a == "--threads") {
            o.idle_threads = value();
        } else if (a == "--vprocs") {
            o.vprocs = static_cast<int>(value());
        } else if (a == "--quick") {
            o.iters = 200000;
            o.idle_threads = 10000;
        } else {
            std::fprintf(stderr, "weft-demo: unknown option '%s' (try --help)\n", a.c_str());
            return 2;
        }
    }
    std::printf("weft %d.%d.%d runtime core — one vproc unless noted (not pinned; `make bench` pins and repeats)\n",
                WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
    int r = weft::run(weft::config{.vprocs = 1}, [&] {
        yield_pingpong(o);
        create_join(o);
        cond_pingpong(o);
        mutex_uncontended(o);
        sleepers();
        idle_memory(o);
        weft_stats_t st;
        weft_stats_get(-1, &st);
        std::printf("  counters: %llu switches, %llu threads created, parks:",
                    static_cast<unsigned long long>(st.switches), static_cast<unsigned long long>(st.threads_created));
        for (int r = 0; r < WEFT_PARK_REASON_COUNT; ++r)
            if (st.parks[r])
                std::printf(" %s %llu", weft_park_reason_name(r), static_cast<unsigned long long>(st.parks[r]));
        std::printf(", %llu timers fired, stacks %llu mapped / %llu reused\n",
                    static_cast<unsigned long long>(st.timers_fired), static_cast<unsigned long long>(st.stacks_mapped),
                    static_cast<unsigned long long>(st.stacks_reused));
        return 0;
    });
    if (r != 0) return r;
    r = weft::run(weft::config{.vprocs = o.vprocs}, [&] { producer_consumer(o.vprocs); });
    std::printf("done.\n");
    return r;
}
