// weft-stage-bench — what a staged operation costs on weft, in both of the
// paper's styles: explicit continuations (closure methods) and implicit ones
// (a C++20 coroutine per operation). One vproc unless --vprocs.
//
//   weft-stage-bench [--ops N] [--reps R] [--vprocs V] [--json]
//   weft-stage-bench --writes [--file PATH] [--ops N] [--reps R] [--json]
//
// Benchmarks (ns per operation, the median of R repetitions):
//   leaf      N top-level operations invoked by a thread, each done at once
//             (allocation, queueing, one run, deletion)
//   tree      fib(n) as a tree of operations, each parent waiting for two
//             children (about N operations): invocation, wait, continuation
//   chain     one operation that invokes a child and waits for it, N times
//             in a row (the parent-child round trip)
// each as "explicit" and "coroutine". Prints a table, or one JSON object
// per line with --json.
//
// --writes: the StagedServer paper's Fig. 2 on weft — what one asynchronous
// 4 KiB write at a random offset costs when the writes are issued in
// cohorts of 1, 2, 4 ... 64: a parent operation invokes k write operations
// on a disk stage and waits for them, N/k times. A write operation puts its
// pwrite on a weft thread (blocking()); on an O_DIRECT file with the
// io_uring backend the k writes of a cohort reach the kernel in one
// submission. The file (default var/stage-writes.dat, 64 MiB) is made
// O_DIRECT where the filesystem allows it (said in the output).
#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "weft/stage.hpp"
#include "weft/weft.h"

namespace ws = weft::stage;
using ws::Step;

namespace {

struct Opts {
    long ops = 0; // 0: 200000 operations, or 8192 writes
    int reps = 5;
    int vprocs = 1;
    bool json = false;
    bool writes = false;
    std::string file = "var/stage-writes.dat";
} g;

class Plain : public ws::Stage {
public:
    Plain() : ws::Stage("bench") {}
};

// ---- explicit ----

struct Leaf : ws::Op<int> {
    Step run() override { return done(1); }
};

struct Fib : ws::Op<long> {
    Fib(ws::Stage &s, int n) : st(s), n(n) {}
    ws::Stage &st;
    int n;
    Fib *a = nullptr, *b = nullptr;
    Step run() override {
        if (n < 2) return done(n);
        a = &invoke<Fib>(st, st, n - 1);
        b = &invoke<Fib>(st, st, n - 2);
        return wait_children(&Fib::sum);
    }
    Step sum() { return done(a->result + b->result); }
};

struct Chain : ws::Op<long> {
    Chain(ws::Stage &s, long n) : st(s), left(n) {}
    ws::Stage &st;
    long left;
    Leaf *child = nullptr;
    Step run() override {
        if (left == 0) return done(result);
        child = &invoke<Leaf>(st);
        return wait_children(&Chain::next);
    }
    Step next() {
        result += child->result;
        --left;
        return run();
    }
};

// ---- coroutines ----

struct CoLeaf : ws::CoOp<int> {
    ws::Co body() override {
        result = 1;
        co_return;
    }
};

struct CoFib : ws::CoOp<long> {
    CoFib(ws::Stage &s, int n) : st(s), n(n) {}
    ws::Stage &st;
    int n;
    ws::Co body() override {
        if (n < 2) {
            result = n;
            co_return;
        }
        auto &a = invoke<CoFib>(st, st, n - 1);
        auto &b = invoke<CoFib>(st, st, n - 2);
        co_await children();
        result = a.result + b.result;
    }
};

struct CoChain : ws::CoOp<long> {
    CoChain(ws::Stage &s, long n) : st(s), n(n) {}
    ws::Stage &st;
    long n;
    ws::Co body() override {
        for (long i = 0; i < n; ++i) {
            auto &c = invoke<Leaf>(st);
            co_await children();
            result += c.result;
        }
    }
};

// fib(k) has 2 fib(k+1) - 1 operations: the k with about `ops` of them.
int fib_for(long ops, long *count) {
    long a = 0, b = 1; // fib(k), fib(k+1)
    int k = 0;
    while (2 * (a + b) - 1 < ops && k < 40) {
        long c = a + b;
        a = b;
        b = c;
        ++k;
    }
    *count = 2 * b - 1;
    return k;
}

template <class LeafT> double leaf(long n) {
    Plain s;
    ws::Scheduler sched({&s});
    uint64_t t0 = weft_now_ns();
    sched.start();
    for (long i = 0; i < n; ++i) {
        s.invoke<LeafT>();
        if ((i & 255) == 255) weft_yield(); // let the runner take a cohort
    }
    sched.stop();
    return static_cast<double>(weft_now_ns() - t0) / static_cast<double>(n);
}

template <class FibT> double tree(long n) {
    Plain s;
    ws::Scheduler sched({&s});
    long count;
    int k = fib_for(n, &count);
    sched.start();
    uint64_t t0 = weft_now_ns();
    auto f = sched.call(s, std::make_unique<FibT>(s, k));
    uint64_t dt = weft_now_ns() - t0;
    sched.stop();
    if (f->failed()) std::exit(1);
    return static_cast<double>(dt) / static_cast<double>(count);
}

template <class ChainT> double chain(long n) {
    Plain s;
    ws::Scheduler sched({&s});
    sched.start();
    uint64_t t0 = weft_now_ns();
    auto c = sched.call(s, std::make_unique<ChainT>(s, n));
    uint64_t dt = weft_now_ns() - t0;
    sched.stop();
    if (c->result != n) {
        std::fprintf(stderr, "weft-stage-bench: chain result %ld, want %ld\n", c->result, n);
        std::exit(1);
    }
    return static_cast<double>(dt) / static_cast<double>(n);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void report(const char *bench, const char *style, double (*fn)(long)) {
    std::vector<double> v;
    for (int r = 0; r < g.reps; ++r) v.push_back(fn(g.ops));
    double m = median(v);
    if (g.json)
        std::printf("{\"benchmark\":\"stage_%s\",\"style\":\"%s\",\"ops\":%ld,\"vprocs\":%d,\"reps\":%d,"
                    "\"median_ns_per_op\":%.1f,\"min\":%.1f,\"max\":%.1f}\n",
                    bench, style, g.ops, g.vprocs, g.reps, m, *std::min_element(v.begin(), v.end()),
                    *std::max_element(v.begin(), v.end()));
    else
        std::printf("%-6s %-9s %10.1f ns/op  (min %.1f, max %.1f)\n", bench, style, m,
                    *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
    std::fflush(stdout);
}

// ---- Fig. 2: cohorts of asynchronous writes ----

constexpr size_t kBlock = 4096;
constexpr uint64_t kFileBytes = 64ull << 20;

struct WriteCtx {
    int fd;
    char *buf;
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    ws::Stage *disk;
    long failed = 0;
    off_t next_offset() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return static_cast<off_t>((rng % (kFileBytes / kBlock)) * kBlock);
    }
};

struct Write : ws::Op<int> {
    Write(WriteCtx &c, off_t off) : ctx(c), off(off) {}
    WriteCtx &ctx;
    off_t off;
    ssize_t got = -1;
    Step run() override {
        return blocking([this] { got = weft_pwrite(ctx.fd, ctx.buf, kBlock, off); }, &Write::after);
    }
    Step after() {
        if (got != static_cast<ssize_t>(kBlock)) ++ctx.failed;
        return done(0);
    }
};

struct Cohort : ws::Op<int> {
    Cohort(WriteCtx &c, int k) : ctx(c), k(k) {}
    WriteCtx &ctx;
    int k;
    Step run() override {
        for (int i = 0; i < k; ++i) invoke<Write>(*ctx.disk, ctx, ctx.next_offset());
        return wait_children(&Cohort::after);
    }
    Step after() { return done(0); }
};

int writes_body() {
    bool direct = true;
    int fd = weft_open(g.file.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL) { // the filesystem has no O_DIRECT (tmpfs)
        direct = false;
        fd = weft_open(g.file.c_str(), O_RDWR | O_CREAT, 0644);
    }
    if (fd < 0) {
        std::fprintf(stderr, "weft-stage-bench: %s: %s (the directory must exist)\n", g.file.c_str(), std::strerror(errno));
        return 1;
    }
    if (ftruncate(fd, static_cast<off_t>(kFileBytes)) != 0) {
        std::fprintf(stderr, "weft-stage-bench: %s: %s\n", g.file.c_str(), std::strerror(errno));
        return 1;
    }
    void *mem = nullptr;
    if (posix_memalign(&mem, kBlock, kBlock) != 0) return 1;
    std::memset(mem, 'w', kBlock);
    ws::Stage front("front"), disk("disk");
    ws::Scheduler sched({&front, &disk});
    WriteCtx ctx{fd, static_cast<char *>(mem)};
    ctx.disk = &disk;
    sched.start();
    const long n = g.ops;
    double base = 0;
    for (int k = 1; k <= 64; k *= 2) {
        std::vector<double> v;
        for (int r = 0; r < g.reps; ++r) {
            uint64_t t0 = weft_now_ns();
            for (long done = 0; done < n; done += k) sched.call(front, std::make_unique<Cohort>(ctx, k));
            v.push_back(static_cast<double>(weft_now_ns() - t0) / static_cast<double>((n + k - 1) / k * k));
        }
        double m = median(v);
        if (k == 1) base = m;
        if (g.json)
            std::printf("{\"benchmark\":\"stage_cohort_writes\",\"cohort\":%d,\"writes\":%ld,\"direct\":%s,"
                        "\"reps\":%d,\"median_ns_per_write\":%.1f,\"relative_to_1\":%.3f}\n",
                        k, n, direct ? "true" : "false", g.reps, m, m / base);
        else
            std::printf("cohort %2d: %8.0f ns per write (%.2fx the cost of one at a time)%s\n", k, m, m / base,
                        k == 1 ? (direct ? "  [O_DIRECT]" : "  [page cache: no O_DIRECT here]") : "");
        std::fflush(stdout);
    }
    sched.stop();
    weft_close(fd);
    std::free(mem);
    if (ctx.failed) {
        std::fprintf(stderr, "weft-stage-bench: %ld writes failed\n", ctx.failed);
        return 1;
    }
    return 0;
}

int body(void *) {
    if (g.writes) return writes_body();
    report("leaf", "explicit", leaf<Leaf>);
    report("leaf", "coroutine", leaf<CoLeaf>);
    report("tree", "explicit", tree<Fib>);
    report("tree", "coroutine", tree<CoFib>);
    report("chain", "explicit", chain<Chain>);
    report("chain", "coroutine", chain<CoChain>);
    return 0;
}

[[noreturn]] void usage(int code) {
    std::fprintf(code ? stderr : stdout,
                 "usage: weft-stage-bench [--ops N] [--reps R] [--vprocs V] [--json]\n"
                 "       weft-stage-bench --writes [--file PATH] [--ops N] [--reps R] [--json]\n"
                 "  what a staged operation costs, explicit closures against coroutines;\n"
                 "  --writes: 4 KiB random writes in cohorts of 1..64 (the paper's Fig. 2)\n"
                 "  --file PATH  the file --writes writes (default var/stage-writes.dat, 64 MiB)\n"
                 "  --ops N     operations per run (default 200000; --writes: 8192 writes)\n"
                 "  --reps R    runs per benchmark, median reported (default 5)\n"
                 "  --vprocs V  vprocs (default 1)\n"
                 "  --json      one JSON object per line\n");
    std::exit(code);
}

// A flag's number (a missing value is an empty one: refused).
long number(const char *flag, const char *v, long lo, long hi) {
    return weft::srv::parse_long("weft-stage-bench", flag, v ? v : "", lo, hi);
}

} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--help" || a == "-h") usage(0);
        else if (a == "--ops") g.ops = number("--ops", v, 10, 100000000), ++i;
        else if (a == "--reps") g.reps = static_cast<int>(number("--reps", v, 1, 1000)), ++i;
        else if (a == "--vprocs") g.vprocs = static_cast<int>(number("--vprocs", v, 1, 64)), ++i;
        else if (a == "--json") g.json = true;
        else if (a == "--writes") g.writes = true;
        else if (a == "--file" && v) g.file = v, ++i;
        else {
            std::fprintf(stderr, "weft-stage-bench: unknown option %s (--help)\n", a.c_str());
            return 2;
        }
    }
    if (!g.ops) g.ops = g.writes ? 8192 : 200000;
    weft_config c;
    weft_config_init(&c);
    c.vprocs = g.vprocs;
    int r = weft_main_config(&c, body, nullptr);
    if (r < 0) {
        std::perror("weft-stage-bench: weft_main");
        return 1;
    }
    return r;
}
