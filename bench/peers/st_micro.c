/*
 * st-micro — the core microbenchmarks on State Threads (libst 1.9, Debian's
 * libst-dev), the peer weft is compared with. Same command line and output
 * as weft-micro (bench/micro/harness.h); system id "st".
 *
 * How each benchmark maps onto ST:
 *   create_join        st_thread_create(joinable, 64 KiB stack) + st_thread_join
 *   switch             st_usleep(0): ST 1.9 has no st_thread_yield. A thread
 *                      that sleeps 0 goes on the sleep queue; once both are
 *                      there ST's idle thread polls (select/poll with a zero
 *                      timeout: a system call) and moves them back, so about
 *                      one idle pass per two switches is part of the cost.
 *   cond_pingpong      two st_cond_t + a turn variable. ST's condition
 *                      variables take no mutex (ST threads only switch in ST
 *                      calls), so there is no mutex here, unlike weft/NPTL.
 *   mutex_uncontended  st_mutex_lock + st_mutex_unlock
 *   mutex_handoff      two threads each: st_mutex_lock, st_usleep(0),
 *                      st_mutex_unlock, st_usleep(0)
 *   producer_consumer  --threads/2 producers and consumers on two st_cond_t
 *                      (no mutex, as in cond_pingpong) (Fig. 1)
 *   memory_idle        threads parked in st_cond_wait, 64 KiB stacks. ST maps
 *                      each stack with its own mmap; creation may fail near
 *                      vm.max_map_count: the largest count that worked is
 *                      reported ("threads" vs "requested"), never more.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <st.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../micro/harness.h"

#define SYSTEM "st"
#define STACK_SIZE (64 * 1024)
#define DEFAULT_IDLE_THREADS 1000000L

static void die(const char *what) {
    fprintf(stderr, "st-micro: %s failed: %s\n", what, strerror(errno));
    exit(1);
}

/* ---- create_join ---- */

static void *trivial(void *arg) { return arg; }

static uint64_t run_create_join(long iters, void *ctx) {
    (void)ctx;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        st_thread_t t = st_thread_create(trivial, NULL, 1, STACK_SIZE);
        if (!t) die("st_thread_create");
        if (st_thread_join(t, NULL) != 0) die("st_thread_join");
    }
    return bench_now_ns() - t0;
}

/* ---- switch ---- */

static void *yielder(void *arg) {
    long n = *(long *)arg;
    for (long i = 0; i < n; ++i) st_usleep(0);
    return NULL;
}

static uint64_t run_two(void *(*fn)(void *), void *a0, void *a1) {
    uint64_t t0 = bench_now_ns();
    st_thread_t a = st_thread_create(fn, a0, 1, STACK_SIZE);
    st_thread_t b = st_thread_create(fn, a1, 1, STACK_SIZE);
    if (!a || !b) die("st_thread_create");
    if (st_thread_join(a, NULL) != 0 || st_thread_join(b, NULL) != 0) die("st_thread_join");
    return bench_now_ns() - t0;
}

static uint64_t run_switch(long iters, void *ctx) {
    (void)ctx;
    return run_two(yielder, &iters, &iters);
}

/* ---- cond_pingpong ---- */

struct pingpong {
    st_cond_t cv[2];
    int turn;
    long iters;
};
struct player {
    struct pingpong *pp;
    int me;
};

static void *player(void *arg) {
    struct player *p = arg;
    struct pingpong *pp = p->pp;
    const int me = p->me, other = 1 - me;
    for (long i = 0; i < pp->iters; ++i) {
        while (pp->turn != me) st_cond_wait(pp->cv[me]);
        pp->turn = other;
        st_cond_signal(pp->cv[other]);
    }
    return NULL;
}

static uint64_t run_cond_pingpong(long iters, void *ctx) {
    (void)ctx;
    struct pingpong pp = {{st_cond_new(), st_cond_new()}, 0, iters};
    if (!pp.cv[0] || !pp.cv[1]) die("st_cond_new");
    struct player p0 = {&pp, 0}, p1 = {&pp, 1};
    uint64_t e = run_two(player, &p0, &p1);
    st_cond_destroy(pp.cv[0]);
    st_cond_destroy(pp.cv[1]);
    return e;
}

/* ---- mutex_uncontended ---- */

static uint64_t run_mutex(long iters, void *ctx) {
    static st_mutex_t mu;
    static volatile long counter;
    (void)ctx;
    if (!mu && !(mu = st_mutex_new())) die("st_mutex_new");
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        st_mutex_lock(mu);
        counter = counter + 1;
        st_mutex_unlock(mu);
    }
    return bench_now_ns() - t0;
}

/* ---- mutex_handoff ---- */

static st_mutex_t handoff_mu;

static void *handoff(void *arg) {
    long n = *(long *)arg;
    for (long i = 0; i < n; ++i) {
        st_mutex_lock(handoff_mu);
        st_usleep(0);
        st_mutex_unlock(handoff_mu);
        st_usleep(0);
    }
    return NULL;
}

static uint64_t run_mutex_handoff(long iters, void *ctx) {
    (void)ctx;
    if (!handoff_mu && !(handoff_mu = st_mutex_new())) die("st_mutex_new");
    return run_two(handoff, &iters, &iters);
}

/* ---- producer_consumer (Fig. 1) ----
 * ST looks at its sleep queue only when no thread is runnable (its idle
 * thread), and producers and consumers always have one runnable: a main
 * thread sleeping for the window would never wake. So the consumers keep the
 * clock: every BENCH_PC_CAPACITY messages one checks it, opens the counting
 * window after the warm-up, and closes it and stops the run at the end. */

struct buffer {
    st_cond_t not_empty, not_full;
    long count, consumed;
    int stop, opened;
    uint64_t warm_end, end; /* CLOCK_MONOTONIC ns */
    long c0, counted;
    double rate;
    bench_window w;
};
struct consumer {
    struct buffer *b;
    uint64_t rng, sink;
};

static void *producer(void *arg) {
    struct buffer *b = arg;
    while (!b->stop) {
        while (b->count == BENCH_PC_CAPACITY && !b->stop) st_cond_wait(b->not_full);
        if (b->stop) break;
        ++b->count;
        st_cond_signal(b->not_empty);
    }
    return NULL;
}

static void pc_clock(struct buffer *b) {
    uint64_t now = bench_now_ns();
    if (!b->opened && now >= b->warm_end) {
        b->opened = 1;
        b->c0 = b->consumed;
        bench_window_open(&b->w);
    } else if (b->opened && now >= b->end) {
        b->counted = b->consumed - b->c0;
        b->rate = bench_window_close(&b->w, b->counted);
        b->stop = 1;
        st_cond_broadcast(b->not_empty);
        st_cond_broadcast(b->not_full);
    }
}

static void *consumer(void *arg) {
    struct consumer *c = arg;
    struct buffer *b = c->b;
    while (!b->stop) {
        while (b->count == 0 && !b->stop) st_cond_wait(b->not_empty);
        if (b->stop) break;
        --b->count;
        if (++b->consumed % BENCH_PC_CAPACITY == 0) pc_clock(b);
        st_cond_signal(b->not_full);
        c->sink += bench_work(&c->rng);
    }
    return NULL;
}

static int run_producer_consumer(const bench_opts *o) {
    const long n = o->threads;
    struct buffer b = {st_cond_new(), st_cond_new(), 0, 0, 0, 0, 0, 0, 0, 0, 0, {0, 0}};
    if (!b.not_empty || !b.not_full) die("st_cond_new");
    struct consumer *cons = calloc((size_t)n / 2, sizeof *cons);
    st_thread_t *ts = calloc((size_t)n, sizeof *ts);
    if (!cons || !ts) die("calloc");
    long created = 0;
    for (; created < n; ++created) {
        void *arg = &b;
        void *(*fn)(void *) = producer;
        if (created % 2) { /* interleaved: equal numbers even if creation fails part-way */
            struct consumer *c = &cons[created / 2];
            c->b = &b;
            c->rng = bench_seed((uint64_t)created);
            arg = c;
            fn = consumer;
        }
        if (!(ts[created] = st_thread_create(fn, arg, 1, STACK_SIZE))) {
            fprintf(stderr, "st-micro: st_thread_create failed after %ld threads: %s\n", created, strerror(errno));
            b.stop = 1; /* the threads made so far end at once */
            break;
        }
    }
    b.warm_end = bench_now_ns() + (uint64_t)(o->min_time * 1e8);
    b.end = b.warm_end + (uint64_t)(o->min_time * 1e9);
    uint64_t sink = 0;
    for (long i = 0; i < created; ++i)
        if (st_thread_join(ts[i], NULL) != 0) die("st_thread_join");
    for (long i = 0; i < created / 2; ++i) sink += cons[i].sink;
    free(cons);
    free(ts);
    if (created != n) return 1;
    char params[256];
    snprintf(params, sizeof params,
             "\"threads\": %ld, \"capacity\": %d, \"work_max\": %d, \"stack\": %d, \"sync\": \"2 st_cond_t, no mutex\", "
             "\"sink\": %llu",
             n, BENCH_PC_CAPACITY, BENCH_WORK_MAX, STACK_SIZE, (unsigned long long)(sink % 1000));
    bench_report(o, SYSTEM, params, "msgs/s", b.rate, b.counted);
    return 0;
}

/* ---- memory_idle ---- */

static st_cond_t idle_cv;
static int idle_released;
static long idle_parked;

static void *idler(void *arg) {
    (void)arg;
    ++idle_parked;
    while (!idle_released) st_cond_wait(idle_cv);
    return NULL;
}

static int run_memory_idle(const bench_opts *o) {
    const long n = o->threads;
    st_thread_t *ts = calloc((size_t)n, sizeof *ts);
    if (!ts) die("calloc");
    memset(ts, 0, (size_t)n * sizeof *ts); /* resident before the baseline */
    if (!(idle_cv = st_cond_new())) die("st_cond_new");
    st_thread_t warm = st_thread_create(trivial, NULL, 1, STACK_SIZE); /* warm the paths */
    if (!warm || st_thread_join(warm, NULL) != 0) die("st_thread_create/join");
    const long rss0 = bench_rss_bytes();
    const uint64_t t0 = bench_now_ns();
    long created = 0;
    int err = 0;
    for (; created < n; ++created) {
        ts[created] = st_thread_create(idler, NULL, 1, STACK_SIZE);
        if (!ts[created]) {
            err = errno;
            break;
        }
        bench_progress(o->prog, "created", created + 1, n, 100000);
    }
    if (created < n)
        fprintf(stderr, "st-micro: st_thread_create failed after %ld threads: %s (vm.max_map_count?)\n",
                created, strerror(err));
    while (idle_parked < created) st_usleep(0);
    const uint64_t t1 = bench_now_ns();
    const long rss1 = bench_rss_bytes();
    if (created >= 200000)
        fprintf(stderr, "st-micro: %ld threads parked in %.2f s; releasing and joining\n", created,
                (double)(t1 - t0) / 1e9);
    idle_released = 1;
    st_cond_broadcast(idle_cv);
    for (long i = 0; i < created; ++i)
        if (st_thread_join(ts[i], NULL) != 0) die("st_thread_join");
    const uint64_t t2 = bench_now_ns();
    free(ts);
    if (created == 0 || rss0 < 0 || rss1 < 0) {
        fprintf(stderr, "st-micro: memory_idle: no measurement (created=%ld)\n", created);
        return 1;
    }
    char params[320];
    snprintf(params, sizeof params,
             "\"threads\": %ld, \"requested\": %ld, \"stack\": %d, \"park\": \"st_cond_wait\", "
             "\"rss_before\": %ld, \"rss_after\": %ld, \"create_park_s\": %.3f, \"teardown_s\": %.3f%s",
             created, n, STACK_SIZE, rss0, rss1, (double)(t1 - t0) / 1e9, (double)(t2 - t1) / 1e9,
             created < n ? ", \"limited\": \"st_thread_create failed\"" : "");
    bench_report(o, SYSTEM, params, "bytes", (double)(rss1 - rss0) / (double)created, 0);
    return 0; /* a count limited by the system is a result, reported as such */
}

int main(int argc, char **argv) {
    bench_opts o;
    int r = bench_parse_only(argc, argv, &o, "State Threads", DEFAULT_IDLE_THREADS, BENCH_NAMES_NO_DISK);
    if (r) return r == 1 ? 0 : 2;
    if ((r = bench_single_cpu(&o, "State Threads"))) return r;
    bench_check_pinned(argv[0]);
    if (st_init() != 0) die("st_init");
    long iters = 0;
    double v;
    const char *b = o.bench;
    if (!strcmp(b, "memory_idle")) return run_memory_idle(&o);
    if (!strcmp(b, "producer_consumer")) return run_producer_consumer(&o);
    if (!strcmp(b, "create_join")) {
        v = bench_measure(&o, run_create_join, NULL, 1.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"st_thread_create(joinable)+st_thread_join\", \"stack\": 65536", "ns", v,
                     iters);
    } else if (!strcmp(b, "switch")) {
        v = bench_measure(&o, run_switch, NULL, 2.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"st_usleep(0)\", \"threads\": 2", "ns", v, iters);
    } else if (!strcmp(b, "cond_pingpong")) {
        v = bench_measure(&o, run_cond_pingpong, NULL, 2.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"2 st_cond_t + turn (no mutex)\", \"threads\": 2", "ns", v, iters);
    } else if (!strcmp(b, "mutex_handoff")) {
        v = bench_measure(&o, run_mutex_handoff, NULL, 2.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"st_mutex_lock, st_usleep(0), st_mutex_unlock, st_usleep(0)\", \"threads\": 2",
                     "ns", v, iters);
    } else if (!strcmp(b, "mutex_uncontended")) {
        v = bench_measure(&o, run_mutex, NULL, 1.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"st_mutex_lock+st_mutex_unlock\"", "ns", v, iters);
    }
    return 0;
}
