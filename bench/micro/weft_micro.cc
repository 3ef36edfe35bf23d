// weft-micro — the core microbenchmarks on weft, on one vproc unless
// --vprocs N says more (then cfg.vprocs = N; threads are created the plain
// way, on their creator's vproc, and the runtime spreads them if it can).
// See harness.h for the command line; bench/micro/suite.py runs it pinned,
// and its smp section with --vprocs 2 on two CPUs.
#include <cerrno>
#include <cstdint>
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

// ---- mutex_handoff: two threads each lock, yield, unlock, yield ----------
// The yield while holding lets the other thread run into the held mutex and
// park; the unlock hands it over; the second yield lets it take it.

struct Handoff {
    weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
    long iters = 0;
};

void *handoff(void *arg) {
    auto *h = static_cast<Handoff *>(arg);
    for (long i = 0; i < h->iters; ++i) {
        weft_mutex_lock(&h->mu);
        weft_yield();
        weft_mutex_unlock(&h->mu);
        weft_yield();
    }
    return nullptr;
}

uint64_t run_mutex_handoff(long iters, void *) {
    Handoff h;
    h.iters = iters;
    weft_thread_t a, b;
    uint64_t t0 = bench_now_ns();
    check(weft_thread_create(&a, nullptr, handoff, &h), "weft_thread_create");
    check(weft_thread_create(&b, nullptr, handoff, &h), "weft_thread_create");
    check(weft_thread_join(a, nullptr), "weft_thread_join");
    check(weft_thread_join(b, nullptr), "weft_thread_join");
    return bench_now_ns() - t0;
}

// ---- producer_consumer (Fig. 1) -------------------------------------------

struct Buffer {
    weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
    weft_cond_t not_empty = WEFT_COND_INITIALIZER, not_full = WEFT_COND_INITIALIZER;
    long count = 0; // (empty) messages in the buffer
    long consumed = 0;
    bool stop = false;
};

void *producer(void *arg) {
    auto *b = static_cast<Buffer *>(arg);
    for (;;) {
        weft_mutex_lock(&b->mu);
        while (b->count == BENCH_PC_CAPACITY && !b->stop) weft_cond_wait(&b->not_full, &b->mu);
        if (b->stop) break;
        ++b->count;
        weft_cond_signal(&b->not_empty);
        weft_mutex_unlock(&b->mu);
    }
    weft_mutex_unlock(&b->mu);
    return nullptr;
}

struct Consumer {
    Buffer *b;
    uint64_t rng, sink;
};

void *consumer(void *arg) {
    auto *c = static_cast<Consumer *>(arg);
    Buffer *b = c->b;
    for (;;) {
        weft_mutex_lock(&b->mu);
        while (b->count == 0 && !b->stop) weft_cond_wait(&b->not_empty, &b->mu);
        if (b->stop) break;
        --b->count;
        ++b->consumed;
        weft_cond_signal(&b->not_full);
        weft_mutex_unlock(&b->mu);
        c->sink += bench_work(&c->rng);
    }
    weft_mutex_unlock(&b->mu);
    return nullptr;
}

// With several vprocs: switches made on each, and parks on a mutex, as JSON
// arrays, since mark() (where the work ran, all on vproc 0 until the
// runtime moves threads, and whether the mutex had threads queued on it).
struct VprocSwitches {
    std::vector<weft_stats_t> base;

    static weft_stats_t of(size_t i) {
        weft_stats_t st{};
        weft_stats_get(static_cast<int>(i), &st);
        return st;
    }
    void mark() {
        base.resize(static_cast<size_t>(weft_vproc_count()));
        for (size_t i = 0; i < base.size(); ++i) base[i] = of(i);
    }
    // `, "vproc_switches": [a, b], "mutex_parks": [c, d]` (empty with one vproc).
    void write(char *buf, size_t len, const char *sep) const {
        buf[0] = 0;
        if (base.size() < 2) return;
        std::vector<weft_stats_t> now(base.size());
        for (size_t i = 0; i < base.size(); ++i) now[i] = of(i);
        size_t at = 0;
        auto put = [&](const char *name, auto field) {
            if (at < len) at += static_cast<size_t>(std::snprintf(buf + at, len - at, "%s\"%s\": [", at ? ", " : sep, name));
            for (size_t i = 0; i < base.size() && at < len; ++i)
                at += static_cast<size_t>(std::snprintf(buf + at, len - at, "%s%llu", i ? ", " : "",
                                                        static_cast<unsigned long long>(field(now[i]) - field(base[i]))));
            if (at < len) at += static_cast<size_t>(std::snprintf(buf + at, len - at, "]"));
        };
        put("vproc_switches", [](const weft_stats_t &st) { return st.switches; });
        put("mutex_parks", [](const weft_stats_t &st) { return st.parks[WEFT_PARK_MUTEX]; });
    }
};

long locked_read(weft_mutex_t *mu, const long *v) {
    weft_mutex_lock(mu);
    long x = *v;
    weft_mutex_unlock(mu);
    return x;
}

int run_producer_consumer(const bench_opts *o) {
    const long n = o->threads, half = n / 2;
    Buffer b;
    std::vector<Consumer> cons(static_cast<size_t>(half));
    std::vector<weft_thread_t> ts(static_cast<size_t>(n));
    long created = 0;
    for (; created < n; ++created) {
        void *arg = &b;
        void *(*fn)(void *) = producer;
        if (created % 2) { // interleaved: equal numbers even if creation fails part-way
            Consumer &c = cons[static_cast<size_t>(created / 2)];
            c = Consumer{&b, bench_seed(static_cast<uint64_t>(created)), 0};
            arg = &c;
            fn = consumer;
        }
        if (int err = weft_thread_create(&ts[static_cast<size_t>(created)], nullptr, fn, arg)) {
            std::fprintf(stderr, "weft-micro: weft_thread_create failed after %ld threads: %s\n", created,
                         std::strerror(err));
            break;
        }
    }
    bool ok = created == n;
    double rate = 0;
    long counted = 0;
    VprocSwitches vs;
    char spread[256] = "";
    if (ok) {
        weft_sleep_ns(static_cast<uint64_t>(o->min_time * 1e8)); // warm-up: a tenth
        bench_window w;
        long c0 = locked_read(&b.mu, &b.consumed);
        vs.mark();
        bench_window_open(&w);
        weft_sleep_ns(static_cast<uint64_t>(o->min_time * 1e9));
        counted = locked_read(&b.mu, &b.consumed) - c0;
        rate = bench_window_close(&w, counted);
        vs.write(spread, sizeof spread, ", ");
    }
    weft_mutex_lock(&b.mu);
    b.stop = true;
    weft_cond_broadcast(&b.not_empty);
    weft_cond_broadcast(&b.not_full);
    weft_mutex_unlock(&b.mu);
    uint64_t sink = 0;
    for (long i = 0; i < created; ++i) check(weft_thread_join(ts[static_cast<size_t>(i)], nullptr), "weft_thread_join");
    for (const Consumer &c : cons) sink += c.sink;
    if (!ok) return 1;
    char params[384];
    std::snprintf(params, sizeof params,
                  "\"threads\": %ld, \"capacity\": %d, \"work_max\": %d, \"stack\": %s, \"sink\": %llu%s", n,
                  BENCH_PC_CAPACITY, BENCH_WORK_MAX, g_stack, static_cast<unsigned long long>(sink % 1000), spread);
    bench_report(o, kSystem, params, "msgs/s", rate, counted);
    return 0;
}

// ---- fork_join: a tree of threads computing fib(n) -------------------------
// Each thread gets n as its argument and returns fib(n) as its result.

void *fib_node(void *arg) {
    const intptr_t n = reinterpret_cast<intptr_t>(arg);
    if (n < 2) return arg;
    weft_thread_t a, b;
    check(weft_thread_create(&a, nullptr, fib_node, reinterpret_cast<void *>(n - 1)), "weft_thread_create");
    check(weft_thread_create(&b, nullptr, fib_node, reinterpret_cast<void *>(n - 2)), "weft_thread_create");
    void *ra = nullptr, *rb = nullptr;
    check(weft_thread_join(a, &ra), "weft_thread_join");
    check(weft_thread_join(b, &rb), "weft_thread_join");
    return reinterpret_cast<void *>(reinterpret_cast<intptr_t>(ra) + reinterpret_cast<intptr_t>(rb));
}

long fib_tree(long n, void *) {
    weft_thread_t root;
    void *r = nullptr;
    check(weft_thread_create(&root, nullptr, fib_node, reinterpret_cast<void *>(static_cast<intptr_t>(n))),
          "weft_thread_create");
    check(weft_thread_join(root, &r), "weft_thread_join");
    return static_cast<long>(reinterpret_cast<intptr_t>(r));
}

void fork_join_extra(void *ctx, int end, char *buf, size_t len) {
    auto *vs = static_cast<VprocSwitches *>(ctx);
    if (!end) {
        vs->mark();
        return;
    }
    int at = std::snprintf(buf, len, "\"op\": \"weft_thread_create x2 + weft_thread_join x2\", \"stack\": %s", g_stack);
    if (at > 0 && static_cast<size_t>(at) < len) vs->write(buf + at, len - static_cast<size_t>(at), ", ");
}

int run_fork_join(const bench_opts *o) {
    VprocSwitches vs;
    return bench_fork_join(o, kSystem, fib_tree, &vs, fork_join_extra);
}

// ---- odirect_read (Fig. 3), cache_miss_read (Fig. 4) ------------------------

struct Disk {
    int direct = -1, cached = -1;
    long direct_blocks = 0, cached_blocks = 0;
    double miss_rate = 1;
    long done = 0, misses = 0;
    bool stop = false;
    int err = 0;
};

struct Reader {
    Disk *d;
    uint64_t rng;
};

void *reader(void *arg) {
    auto *r = static_cast<Reader *>(arg);
    Disk *d = r->d;
    void *buf = std::aligned_alloc(BENCH_BLOCK, BENCH_BLOCK);
    if (!buf) {
        d->err = ENOMEM;
        return nullptr;
    }
    while (!d->stop) {
        off_t off;
        int miss = bench_pick_read(&r->rng, d->miss_rate, d->direct_blocks, d->cached_blocks, &off);
        ssize_t got = weft_pread(miss ? d->direct : d->cached, buf, BENCH_BLOCK, off);
        if (got != BENCH_BLOCK) {
            d->err = got < 0 ? errno : EIO;
            break;
        }
        ++d->done;
        d->misses += miss;
        // weft threads are cooperative: a reader whose reads all hit the
        // page cache never parks, so it lets the others run now and then
        // (every 64 reads, ~25 us; every 16 cost 2 % in switches to cold stacks).
        if ((d->done & 63) == 0) weft_yield();
    }
    std::free(buf);
    return nullptr;
}

int run_disk(const bench_opts *o) {
    const bool fig4 = !std::strcmp(o->bench, "cache_miss_read");
    Disk d;
    bench_open_files(o, &d.direct, &d.direct_blocks, fig4 ? &d.cached : nullptr, &d.cached_blocks);
    d.miss_rate = fig4 ? o->miss_rate : 1.0;
    const long n = o->threads;
    std::vector<Reader> rs(static_cast<size_t>(n));
    std::vector<weft_thread_t> ts(static_cast<size_t>(n));
    long created = 0;
    for (; created < n; ++created) {
        rs[static_cast<size_t>(created)] = Reader{&d, bench_seed(static_cast<uint64_t>(created))};
        if (int err = weft_thread_create(&ts[static_cast<size_t>(created)], nullptr, reader,
                                         &rs[static_cast<size_t>(created)])) {
            std::fprintf(stderr, "weft-micro: weft_thread_create failed after %ld threads: %s\n", created,
                         std::strerror(err));
            break;
        }
    }
    weft_sleep_ns(static_cast<uint64_t>(o->min_time * 1e8));
    bench_window w;
    const long c0 = d.done, m0 = d.misses;
    bench_window_open(&w);
    weft_sleep_ns(static_cast<uint64_t>(o->min_time * 1e9));
    const long counted = d.done - c0, missed = d.misses - m0;
    const double rate = bench_window_close(&w, counted);
    d.stop = true;
    for (long i = 0; i < created; ++i) check(weft_thread_join(ts[static_cast<size_t>(i)], nullptr), "weft_thread_join");
    close(d.direct);
    if (d.cached >= 0) close(d.cached);
    if (d.err) {
        std::fprintf(stderr, "weft-micro: %s: weft_pread: %s\n", o->bench, std::strerror(d.err));
        return 1;
    }
    if (created != n || counted == 0) {
        std::fprintf(stderr, "weft-micro: %s: no measurement (%ld threads, %ld reads)\n", o->bench, created, counted);
        return 1;
    }
    char params[256];
    if (fig4)
        std::snprintf(params, sizeof params,
                      "\"threads\": %ld, \"miss_rate\": %g, \"measured_miss_rate\": %.4f, \"block\": %d, \"io\": \"%s\"",
                      n, o->miss_rate, (double)missed / (double)counted, BENCH_BLOCK, weft_io_backend());
    else
        std::snprintf(params, sizeof params, "\"threads\": %ld, \"block\": %d, \"file_blocks\": %ld, \"io\": \"%s\"", n,
                      BENCH_BLOCK, d.direct_blocks, weft_io_backend());
    bench_report(o, kSystem, params, "reads/s", rate, counted);
    return 0;
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
    if (!std::strcmp(b, "producer_consumer")) return run_producer_consumer(o);
    if (!std::strcmp(b, "fork_join")) return run_fork_join(o);
    if (!std::strcmp(b, "odirect_read") || !std::strcmp(b, "cache_miss_read")) return run_disk(o);
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
    } else if (!std::strcmp(b, "mutex_handoff")) {
        v = bench_measure(o, run_mutex_handoff, nullptr, 2.0, &iters);
        bench_report(o, kSystem, "\"op\": \"lock, weft_yield, unlock, weft_yield\", \"threads\": 2", "ns", v, iters);
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
    bench_check_cpus(&g_opts);
    if (const char *s = std::getenv("WEFT_STACK_SIZE"); s && *s)
        std::snprintf(g_stack, sizeof g_stack, "\"%.40s\"", s);
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = static_cast<int>(g_opts.vprocs);
    int rc = weft_main_config(&cfg, bench_main, nullptr);
    if (rc < 0) {
        std::perror("weft-micro: weft_main");
        return 1;
    }
    return rc;
}
