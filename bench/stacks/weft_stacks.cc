// Linked stacks against fixed stacks (issue 9, docs/stacks.md), in one run:
//
//   bigstack   Capriccio §3's bigstack(): N threads each call a function that
//              touches a 1 MB stack buffer, 10 times, yielding between calls.
//              Fixed stacks need 1 MB+ per thread, all resident; linked ones
//              link a 1 MB chunk for the call and hand it to the next thread.
//   idle       RSS per idle thread (parked on a semaphore).
//   hotsplit   A call-heavy loop whose callee sits across a chunk boundary
//              (the "hot split" that made Go and Rust drop segmented stacks):
//              ns per call, linked against fixed.
//
// Built with -fsplit-stack (weft_link_linked_stacks): every function here is
// a checkpoint. One JSON object per result on stdout with --json, like the
// *-micro binaries (bench/micro/harness.h).
#include <weft/weft.h>

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

struct Opts {
    std::string bench;
    std::string stacks = "linked";
    long threads = 800;
    long calls = 10;
    double mem_budget_gib = 4.0;
    bool json = false;
} g;

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

long rss_bytes() {
    long pages = 0, rss = 0;
    if (FILE *f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
        std::fclose(f);
    }
    return rss * 4096;
}

void report(const char *id, const char *params, const char *unit, double value) {
    if (g.json)
        std::printf("{\"benchmark\": \"%s\", \"system\": \"weft\", \"params\": {%s}, \"unit\": \"%s\", \"value\": %.3f}\n",
                    id, params, unit, value);
    else
        std::printf("weft  %-20s %14.2f %-5s {%s}\n", id, value, unit, params);
    std::fflush(stdout);
}

weft_thread_attr_t attr_for(size_t fixed_size) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    if (g.stacks == "linked") a.stacks = WEFT_STACKS_LINKED;
    else {
        a.stacks = WEFT_STACKS_FIXED;
        a.stack_size = fixed_size;
    }
    return a;
}

weft_stats_t stats() {
    weft_stats_t s;
    weft_stats_get(-1, &s);
    return s;
}

// ---- bigstack ----

constexpr size_t kBig = 1 << 20;

__attribute__((noinline)) long big(long seed) {
    char buf[kBig];
    for (size_t i = 0; i < kBig; i += 64) buf[i] = static_cast<char>(seed + long(i));
    __asm__ volatile("" ::"r"(buf) : "memory");
    return buf[seed & (kBig - 1) & ~63L];
}

void *bigstack_thread(void *) {
    long s = 0;
    for (long i = 0; i < g.calls; ++i) {
        s += big(i);
        weft_yield();
    }
    return reinterpret_cast<void *>(s);
}

int run_bigstack() {
    const size_t fixed = kBig + 64 * 1024;
    if (g.stacks == "fixed" && double(g.threads) * double(fixed) > g.mem_budget_gib * double(1ull << 30)) {
        std::fprintf(stderr, "weft-stacks: bigstack: skipped: %ld fixed 1 MB stacks need %.1f GiB resident, over the "
                             "%.1f GiB budget (--mem-budget)\n",
                     g.threads, double(g.threads) * double(fixed) / double(1ull << 30), g.mem_budget_gib);
        return 77;
    }
    std::vector<weft_thread_t> ts(size_t(g.threads));
    weft_thread_attr_t a = attr_for(fixed);
    weft_stats_t s0 = stats();
    const long rss0 = rss_bytes();
    const uint64_t t0 = now_ns();
    for (long i = 0; i < g.threads; ++i)
        if (int e = weft_thread_create(&ts[size_t(i)], &a, bigstack_thread, nullptr)) {
            std::fprintf(stderr, "weft-stacks: create: %s\n", std::strerror(e));
            return 1;
        }
    long peak = 0;
    for (long i = 0; i < g.threads; ++i) {
        if (i == g.threads / 2) peak = rss_bytes();
        weft_thread_join(ts[size_t(i)], nullptr);
    }
    const double secs = double(now_ns() - t0) / 1e9;
    weft_stats_t s1 = stats();
    char params[320];
    std::snprintf(params, sizeof params,
                  "\"threads\": %ld, \"stacks\": \"%s\", \"calls_per_thread\": %ld, \"frame_bytes\": %zu, "
                  "\"rss_mid_mb\": %.1f, \"links\": %llu",
                  g.threads, g.stacks.c_str(), g.calls, kBig, double(peak - rss0) / 1e6,
                  static_cast<unsigned long long>(s1.stack_links - s0.stack_links));
    report("stacks.bigstack", params, "s", secs);
    return 0;
}

// ---- idle ----

weft_sem_t g_gate = WEFT_SEM_INITIALIZER(0);
long g_parked = 0;

void *idler(void *) {
    ++g_parked;
    weft_sem_wait(&g_gate);
    return nullptr;
}

int run_idle() {
    std::vector<weft_thread_t> ts(size_t(g.threads));
    weft_thread_attr_t a = attr_for(0);
    { // warm the paths and one stack of each kind
        weft_thread_t t;
        weft_thread_create(&t, &a, [](void *) -> void * { return nullptr; }, nullptr);
        weft_thread_join(t, nullptr);
    }
    weft_stats_t s0 = stats();
    const long rss0 = rss_bytes();
    for (long i = 0; i < g.threads; ++i) {
        if (int e = weft_thread_create(&ts[size_t(i)], &a, idler, nullptr)) {
            std::fprintf(stderr, "weft-stacks: create after %ld threads: %s\n", i, std::strerror(e));
            return 1;
        }
        if (g.threads >= 200000 && (i + 1) % 200000 == 0)
            std::fprintf(stderr, "weft-stacks: idle: created %ld/%ld\n", i + 1, g.threads);
    }
    while (g_parked < g.threads) weft_yield();
    const long rss1 = rss_bytes();
    weft_stats_t s1 = stats();
    for (long i = 0; i < g.threads; ++i) weft_sem_post(&g_gate);
    for (long i = 0; i < g.threads; ++i) weft_thread_join(ts[size_t(i)], nullptr);
    char params[256];
    std::snprintf(params, sizeof params, "\"threads\": %ld, \"stacks\": \"%s\", \"park\": \"weft_sem_wait\", \"links\": %llu",
                  g.threads, g.stacks.c_str(), static_cast<unsigned long long>(s1.stack_links - s0.stack_links));
    report("memory.idle_thread", params, "bytes", double(rss1 - rss0) / double(g.threads));
    return 0;
}

// ---- hotsplit ----

// Frames from `depth` levels down put the loop's callee at every offset of a
// chunk; the one that straddles a boundary is the hot split.
__attribute__((noinline)) long leafish(long x) {
    volatile char pad[512]; // over 256 bytes: gcc's check then includes the frame
    pad[0] = static_cast<char>(x);
    return pad[0] + x;
}

__attribute__((noinline)) long call_loop(long n) {
    long s = 0;
    for (long i = 0; i < n; ++i) s += leafish(i);
    return s;
}

__attribute__((noinline)) long descend(int depth, long n) {
    volatile char pad[48];
    pad[0] = 0;
    if (depth == 0) return call_loop(n);
    return descend(depth - 1, n) + pad[0];
}

struct HotResult {
    double worst_ns = 0, mean_ns = 0;
    int worst_depth = 0;
};

void *hotsplit_thread(void *p) {
    auto *r = static_cast<HotResult *>(p);
    constexpr long kCalls = 200000;
    constexpr int kDepths = 64; // 64 x 64 B: a whole 4 KiB chunk of offsets
    double total = 0;
    for (int d = 0; d < kDepths; ++d) {
        uint64_t t0 = now_ns();
        long s = descend(d, kCalls);
        double ns = double(now_ns() - t0) / kCalls;
        __asm__ volatile("" ::"r"(s));
        total += ns;
        if (ns > r->worst_ns) r->worst_ns = ns, r->worst_depth = d;
    }
    r->mean_ns = total / kDepths;
    return nullptr;
}

int run_hotsplit() {
    HotResult r;
    weft_thread_attr_t a = attr_for(64 * 1024);
    weft_thread_t t;
    weft_stats_t s0 = stats();
    weft_thread_create(&t, &a, hotsplit_thread, &r);
    weft_thread_join(t, nullptr);
    weft_stats_t s1 = stats();
    char params[256];
    std::snprintf(params, sizeof params,
                  "\"stacks\": \"%s\", \"op\": \"call of a 512-byte-frame function, at 64 stack depths\", "
                  "\"worst_ns\": %.3f, \"worst_depth\": %d, \"links\": %llu, \"spare_hits\": %llu",
                  g.stacks.c_str(), r.worst_ns, r.worst_depth,
                  static_cast<unsigned long long>(s1.stack_links - s0.stack_links),
                  static_cast<unsigned long long>(s1.stack_spare_hits - s0.stack_spare_hits));
    report("stacks.hotsplit", params, "ns", r.mean_ns);
    return 0;
}

int bench_main(void *) {
    if (g.bench == "bigstack") return run_bigstack();
    if (g.bench == "idle") return run_idle();
    return run_hotsplit();
}

void usage(FILE *out) {
    std::fprintf(out,
                 "usage: weft-stacks --bench bigstack|idle|hotsplit [--stacks fixed|linked] [--threads N]\n"
                 "                   [--calls N] [--mem-budget GIB] [--json]\n"
                 "  bigstack  N threads (default 800) each call a 1 MB-frame function --calls times (10),\n"
                 "            yielding between calls; seconds for all. Fixed stacks above --mem-budget GiB\n"
                 "            (default 4) of resident stacks are skipped (exit 77).\n"
                 "  idle      RSS per parked thread, N threads.\n"
                 "  hotsplit  ns per call of a small function from 64 stack depths (mean; worst in params).\n");
}

} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&](const char *what) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "weft-stacks: %s needs a value\n", what);
                std::exit(2);
            }
            return argv[++i];
        };
        auto num = [&](const char *what) {
            const char *v = val(what);
            char *end;
            errno = 0;
            double d = std::strtod(v, &end);
            if (*end || errno || d <= 0) {
                std::fprintf(stderr, "weft-stacks: %s %s: expected a positive number\n", what, v);
                std::exit(2);
            }
            return d;
        };
        if (a == "--bench") g.bench = val("--bench");
        else if (a == "--stacks") g.stacks = val("--stacks");
        else if (a == "--threads") g.threads = long(num("--threads"));
        else if (a == "--calls") g.calls = long(num("--calls"));
        else if (a == "--mem-budget") g.mem_budget_gib = num("--mem-budget");
        else if (a == "--json") g.json = true;
        else if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else {
            std::fprintf(stderr, "weft-stacks: unknown argument '%s'\n", a.c_str());
            usage(stderr);
            return 2;
        }
    }
    if (g.bench != "bigstack" && g.bench != "idle" && g.bench != "hotsplit") {
        usage(stderr);
        return 2;
    }
    if (g.stacks != "fixed" && g.stacks != "linked") {
        std::fprintf(stderr, "weft-stacks: --stacks %s: expected fixed or linked\n", g.stacks.c_str());
        return 2;
    }
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 1;
    int rc = weft_main_config(&cfg, bench_main, nullptr);
    if (rc < 0) {
        std::perror("weft-stacks: weft_main");
        return 1;
    }
    return rc;
}
