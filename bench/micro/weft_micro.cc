// weft-micro — the core microbenchmarks on weft, all on one vproc.
// See harness.h for the command line; bench/micro/run.py runs it pinned.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "harness.h"
#include "weft/weft.h"

namespace {

constexpr const char *kSystem = "weft";
constexpr long kDefaultIdleThreads = 1000000;

bench_opts g_opts;
int g_status = 0;
// JSON value of the stack size: weft's default (64 KiB), unless WEFT_STACK_SIZE overrides it.
char g_stack[64] = "65536";

void check(int rc, const char *what) {
    if (rc != 0) {
        std::fprintf(stderr, "weft-micro: %s failed: %s\n", what, std::strerror(rc));
        std::exit(1);
    }
}

// ---- create_join --------------------------------------------------------

void *trivial(void *arg) { return arg; }

uint64_t run_create_join(long iters, void *) {
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        weft_thread_t t;
        check(weft_thread_create(&t, nullptr, trivial, nullptr), "weft_thread_create");
        check(weft_thread_join(t, nullptr), "weft_thread_join");
    }
    return bench_now_ns() - t0;
}

// ---- switch: two threads yielding in turn --------------------------------

void *yielder(void *arg) {
    long n = *static_cast<long *>(arg);
    for (long i = 0; i < n; ++i) weft_yield();
    return nullptr;
}

uint64_t run_switch(long iters, void *) {
    weft_thread_t a, b;
    uint64_t t0 = bench_now_ns();
    check(weft_thread_create(&a, nullptr, yielder, &iters), "weft_thread_create");
    check(weft_thread_create(&b, nullptr, yielder, &iters), "weft_thread_create");
    check(weft_thread_join(a, nullptr), "weft_thread_join");
    check(weft_thread_join(b, nullptr), "weft_thread_join");
    return bench_now_ns() - t0;
}

// ---- cond_pingpong: one mutex, two conds, a turn variable ----------------

struct PingPong {
    weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
    weft_cond_t cv[2] = {WEFT_COND_INITIALIZER, WEFT_COND_INITIALIZER};
    int turn = 0;
    long iters = 0;
};

struct Player {
    PingPong *pp;
    int me;
};

void *player(void *arg) {
    auto *p = static_cast<Player *>(arg);
    PingPong *pp = p->pp;
    const int me = p->me, other = 1 - me;
    weft_mutex_lock(&pp->mu);
    for (long i = 0; i < pp->iters; ++i) {
        while (pp->turn != me) weft_cond_wait(&pp->cv[me], &pp->mu);
        pp->turn = other;
        weft_cond_signal(&pp->cv[other]);
    }
    weft_mutex_unlock(&pp->mu);
    return nullptr;
}

uint64_t run_cond_pingpong(long iters, void *) {
    PingPong pp;
    pp.iters = iters;
    Player p0{&pp, 0}, p1{&pp, 1};
    weft_thread_t a, b;
    uint64_t t0 = bench_now_ns();
    check(weft_thread_create(&a, nullptr, player, &p0), "weft_thread_create");
    check(weft_thread_create(&b, nullptr, player, &p1), "weft_thread_create");
    check(weft_thread_join(a, nullptr), "weft_thread_join");
    check(weft_thread_join(b, nullptr), "weft_thread_join");
    return bench_now_ns() - t0;
}

// ---- mutex_uncontended ----------------------------------------------------

uint64_t run_mutex(long iters, void *) {
    static weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
    static volatile long counter;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        weft_mutex_lock(&mu);
        counter = counter + 1;
        weft_mutex_unlock(&mu);
    }
    return bench_now_ns() - t0;
}

// ---- memory_idle ----------------------------------------------------------

struct Idle {
    weft_sem_t sem = WEFT_SEM_INITIALIZER(0);
    long parked = 0;
};

void *idler(void *arg) {
    auto *idle = static_cast<Idle *>(arg);
    ++idle->parked;
    weft_sem_wait(&idle->sem);
    return nullptr;
}

int run_memory_idle(const bench_opts *o) {
    const long n = o->threads;
    std::vector<weft_thread_t> ts(static_cast<size_t>(n)); // zeroed: its pages are resident before the baseline
    Idle idle;
    // Warm the runtime's paths (and one stack) so the baseline holds them.
    {
        weft_thread_t t;
        check(weft_thread_create(&t, nullptr, trivial, nullptr), "weft_thread_create");
        check(weft_thread_join(t, nullptr), "weft_thread_join");
    }
    const long rss0 = bench_rss_bytes();
    const uint64_t t0 = bench_now_ns();
    long created = 0;
    int err = 0;
    for (; created < n; ++created) {
        err = weft_thread_create(&ts[static_cast<size_t>(created)], nullptr, idler, &idle);
        if (err) break;
        bench_progress(o->prog, "created", created + 1, n, 100000);
    }
    if (err)
        std::fprintf(stderr, "weft-micro: weft_thread_create failed after %ld threads: %s\n", created,
                     std::strerror(err));
    while (idle.parked < created) weft_yield(); // FIFO: every new thread runs once and parks
    const uint64_t t1 = bench_now_ns();
    const long rss1 = bench_rss_bytes();
    if (n >= 200000)
        std::fprintf(stderr, "weft-micro: %ld threads parked in %.2f s; releasing and joining\n", created,
                     (double)(t1 - t0) / 1e9);
    for (long i = 0; i < created; ++i) check(weft_sem_post(&idle.sem), "weft_sem_post");
    for (long i = 0; i < created; ++i) check(weft_thread_join(ts[static_cast<size_t>(i)], nullptr), "weft_thread_join");
    const uint64_t t2 = bench_now_ns();
    if (created == 0 || rss0 < 0 || rss1 < 0) {
        std::fprintf(stderr, "weft-micro: memory_idle: no measurement (created=%ld)\n", created);
        return 1;
    }
    char params[320];
    std::snprintf(params, sizeof params,
                  "\"threads\": %ld, \"requested\": %ld, \"stack\": %s, \"park\": \"weft_sem_wait\", "
                  "\"rss_before\": %ld, \"rss_after\": %ld, \"create_park_s\": %.3f, \"teardown_s\": %.3f",
                  created, n, g_stack, rss0, rss1, (double)(t1 - t0) / 1e9, (double)(t2 - t1) / 1e9);
    bench_report(o, kSystem, params, "bytes", (double)(rss1 - rss0) / (double)created, 0);
    return created == n ? 0 : 1;
}

// ---- driver ---------------------------------------------------------------

int bench_main(void *) {
    const bench_opts *o = &g_opts;
    const char *b = o->bench;
    long iters = 0;
    double v;
    if (!std::strcmp(b, "memory_idle")) return run_memory_idle(o);
    if (!std::strcmp(b, "create_join")) {
        v = bench_measure(o, run_create_join, nullptr, 1.0, &iters);
        char params[128];
        std::snprintf(params, sizeof params, "\"op\": \"weft_thread_create+weft_thread_join\", \"stack\": %s",
                      g_stack);
        bench_report(o, kSystem, params, "ns", v, iters);
    } else if (!std::strcmp(b, "switch")) {
        v = bench_measure(o, run_switch, nullptr, 2.0, &iters);
        bench_report(o, kSystem, "\"op\": \"weft_yield\", \"threads\": 2", "ns", v, iters);
    } else if (!std::strcmp(b, "cond_pingpong")) {
        v = bench_measure(o, run_cond_pingpong, nullptr, 2.0, &iters);
        bench_report(o, kSystem, "\"op\": \"mutex + 2 weft_cond_t + turn\", \"threads\": 2", "ns", v, iters);
    } else if (!std::strcmp(b, "mutex_uncontended")) {
        v = bench_measure(o, run_mutex, nullptr, 1.0, &iters);
        bench_report(o, kSystem, "\"op\": \"weft_mutex_lock+weft_mutex_unlock\"", "ns", v, iters);
    }
    return g_status;
}

} // namespace

int main(int argc, char **argv) {
    int r = bench_parse(argc, argv, &g_opts, "weft", kDefaultIdleThreads);
    if (r) return r == 1 ? 0 : 2;
    bench_check_pinned(argv[0]);
    if (const char *s = std::getenv("WEFT_STACK_SIZE"); s && *s)
        std::snprintf(g_stack, sizeof g_stack, "\"%.40s\"", s);
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 1;
    int rc = weft_main_config(&cfg, bench_main, nullptr);
    if (rc < 0) {
        std::perror("weft-micro: weft_main");
        return 1;
    }
    return rc;
}
