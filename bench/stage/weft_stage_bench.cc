// weft-stage-bench — what a staged operation costs on weft, in both of the
// paper's styles: explicit continuations (closure methods) and implicit ones
// (a C++20 coroutine per operation). One vproc unless --vprocs.
//
//   weft-stage-bench [--ops N] [--reps R] [--vprocs V] [--json]
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
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "weft/stage.hpp"
#include "weft/weft.h"

namespace ws = weft::stage;
using ws::Step;

namespace {

struct Opts {
    long ops = 200000;
    int reps = 5;
    int vprocs = 1;
    bool json = false;
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

int body(void *) {
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
                 "  what a staged operation costs, explicit closures against coroutines\n"
                 "  --ops N     operations per run (default 200000)\n"
                 "  --reps R    runs per benchmark, median reported (default 5)\n"
                 "  --vprocs V  vprocs (default 1)\n"
                 "  --json      one JSON object per line\n");
    std::exit(code);
}

long number(const char *flag, const char *v, long lo, long hi) {
    char *end = nullptr;
    long n = v ? std::strtol(v, &end, 10) : 0;
    if (!v || *end || n < lo || n > hi) {
        std::fprintf(stderr, "weft-stage-bench: %s expects a number in %ld..%ld\n", flag, lo, hi);
        std::exit(2);
    }
    return n;
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
        else {
            std::fprintf(stderr, "weft-stage-bench: unknown option %s (--help)\n", a.c_str());
            return 2;
        }
    }
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
