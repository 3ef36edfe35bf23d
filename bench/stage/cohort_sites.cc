// weft-cohort-sites — does grouping ready threads by their whole call chain,
// rather than by the paper's "next PC", change StagedServer's verdict on
// cohort scheduling for plain threads (§2.1)? Run under each policy by
// bench/stage/cohort_sites.py.
//
// N threads on one vproc serve events of two kinds, A and B, half each.
// Every thread blocks in the same wrapper, wait_event() — one return
// address, as when a program funnels its I/O through one read_fully() —
// and then does its kind's work: random reads over its kind's table (by
// default 40 KiB each: on this machine's AMD EPYC one fits the 48 KiB L1 data cache, the two do not). A
// driver wakes the threads A, B, A, B ... each round, as events arrive
// interleaved, and waits until all have blocked again.
//
//   FIFO                 runs them A B A B: every item finds the other
//                        table in the cache
//   cohort, next PC      wait_event's call site is one group: the same
//                        A B A B
//   cohort, call chain   serve_a -> wait_event and serve_b -> wait_event
//                        are two nodes (WEFT_GRAPH=1, WEFT_GRAPH_DEPTH>=2):
//                        A A ... A B B ... B
//
// Prints ns per item and the fraction of consecutive items of different
// kinds; --json: one JSON object.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "weft/weft.h"

namespace {

struct Opts {
    long threads = 256;
    long rounds = 400;
    long table_kb = 40;
    long touches = 256; // cache lines read per item
    bool json = false;
} opt;

struct Worker {
    weft_sem_t go;
    int kind;
    uint32_t seed;
};

std::vector<uint64_t> tables[2];
weft_sem_t all_blocked;
long left = 0;              // threads of the round that have not blocked again (one vproc: no atomics needed)
std::vector<uint8_t> order; // kinds in the order the items ran
uint64_t sink = 0;

// The one blocking wrapper every thread waits in. Not a tail call: the
// wait must return here, to one return address for both kinds (as a tail
// call it would return straight into serve_a or serve_b, two sites).
[[gnu::noinline]] void wait_event(Worker *w) {
    if (--left == 0) weft_sem_post(&all_blocked);
    if (weft_sem_wait(&w->go) != 0) std::abort();
    asm volatile("" ::: "memory");
}

[[gnu::noinline]] void work(Worker *w) {
    const std::vector<uint64_t> &t = tables[w->kind];
    const uint32_t lines = static_cast<uint32_t>(t.size() / 8);
    uint32_t x = w->seed;
    uint64_t s = 0;
    for (long j = 0; j < opt.touches; ++j) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5; // xorshift32
        s += t[((x ^ s) % lines) * 8];             // each read waits for the one before: latency, not bandwidth
    }
    w->seed = x;
    sink += s;
    order.push_back(static_cast<uint8_t>(w->kind));
}

[[gnu::noinline]] void serve_a(Worker *w) {
    wait_event(w);
    work(w);
}

[[gnu::noinline]] void serve_b(Worker *w) {
    wait_event(w);
    work(w);
}

void *worker(void *arg) {
    auto *w = static_cast<Worker *>(arg);
    for (long r = 0; r < opt.rounds; ++r) (w->kind ? serve_b : serve_a)(w);
    if (--left == 0) weft_sem_post(&all_blocked); // the last round's end
    return nullptr;
}

int body(void *) {
    for (int k = 0; k < 2; ++k) {
        tables[k].assign(static_cast<size_t>(opt.table_kb) * 1024 / sizeof(uint64_t), 0);
        for (size_t i = 0; i < tables[k].size(); ++i) tables[k][i] = i * (k + 3);
    }
    order.reserve(static_cast<size_t>(opt.threads * opt.rounds));
    std::unique_ptr<Worker[]> ws(new Worker[static_cast<size_t>(opt.threads)]);
    std::vector<weft_thread_t> ts(static_cast<size_t>(opt.threads));
    weft_sem_init(&all_blocked, 0);
    left = opt.threads;
    for (long i = 0; i < opt.threads; ++i) {
        ws[i].kind = static_cast<int>(i & 1);
        ws[i].seed = static_cast<uint32_t>(i * 2654435761u + 1);
        weft_sem_init(&ws[i].go, 0);
        if (weft_thread_create(&ts[static_cast<size_t>(i)], nullptr, worker, &ws[i]) != 0) {
            std::fprintf(stderr, "weft-cohort-sites: cannot create thread %ld\n", i);
            return 1;
        }
    }
    weft_sem_wait(&all_blocked); // all are in wait_event
    uint64_t t0 = weft_now_ns();
    for (long r = 0; r < opt.rounds; ++r) {
        left = opt.threads;
        for (long i = 0; i < opt.threads; ++i) weft_sem_post(&ws[i].go); // A B A B ...
        weft_sem_wait(&all_blocked);
    }
    uint64_t t1 = weft_now_ns();
    for (auto &t : ts) weft_thread_join(t, nullptr);
    long switches = 0;
    for (size_t i = 1; i < order.size(); ++i) switches += order[i] != order[i - 1];
    const double items = static_cast<double>(order.size());
    const double ns = static_cast<double>(t1 - t0) / items;
    const char *policy = std::getenv("WEFT_POLICY");
    const char *graph = std::getenv("WEFT_GRAPH");
    const char *depth = std::getenv("WEFT_GRAPH_DEPTH");
    if (opt.json)
        std::printf("{\"bench\": \"cohort_sites\", \"policy\": \"%s\", \"graph\": \"%s\", \"graph_depth\": \"%s\", "
                    "\"threads\": %ld, \"rounds\": %ld, \"table_kb\": %ld, \"touches\": %ld, \"items\": %.0f, "
                    "\"ns_per_item\": %.1f, \"kind_switches\": %.4f, \"sink\": %llu}\n",
                    policy ? policy : "", graph ? graph : "", depth ? depth : "", opt.threads, opt.rounds, opt.table_kb,
                    opt.touches, items, ns, static_cast<double>(switches) / (items - 1),
                    static_cast<unsigned long long>(sink % 10));
    else
        std::printf("%.1f ns per item, %.1f %% of consecutive items of different kinds (%ld threads x %ld rounds)\n",
                    ns, 100.0 * static_cast<double>(switches) / (items - 1), opt.threads, opt.rounds);
    return 0;
}


} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--help" || a == "-h") {
            std::printf("usage: weft-cohort-sites [--threads N] [--rounds R] [--table-kb K] [--touches T] [--json]\n"
                        "N threads (default 256) of two kinds block in one wrapper and then read T (256)\n"
                        "dependent random lines of their kind's K KiB table (40), R rounds (400). The policy comes\n"
                        "from WEFT_POLICY, the call chains from WEFT_GRAPH / WEFT_GRAPH_DEPTH.\n");
            return 0;
        }
        if (a == "--threads") opt.threads = weft::srv::parse_long("weft-cohort-sites", "--threads", v, 2, 1000000), ++i;
        else if (a == "--rounds") opt.rounds = weft::srv::parse_long("weft-cohort-sites", "--rounds", v, 1, 1000000), ++i;
        else if (a == "--table-kb") opt.table_kb = weft::srv::parse_long("weft-cohort-sites", "--table-kb", v, 1, 1 << 20), ++i;
        else if (a == "--touches") opt.touches = weft::srv::parse_long("weft-cohort-sites", "--touches", v, 1, 1 << 20), ++i;
        else if (a == "--json") opt.json = true;
        else {
            std::fprintf(stderr, "weft-cohort-sites: unknown option %s (--help)\n", a.c_str());
            return 2;
        }
    }
    weft_config c;
    weft_config_init(&c);
    c.vprocs = 1;
    int r = weft_main_config(&c, body, nullptr);
    return r < 0 ? 1 : r;
}
