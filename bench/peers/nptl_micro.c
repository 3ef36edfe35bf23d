/*
 * nptl-micro — the core microbenchmarks on kernel threads (glibc NPTL), the
 * baseline weft is compared with. Same command line and output as
 * weft-micro (bench/micro/harness.h); system id "nptl". Pin the process to
 * one CPU: the switch benchmark only switches when both threads share it.
 *
 *   create_join        pthread_create (64 KiB stack) + pthread_join
 *   switch             two threads calling sched_yield in turn
 *   cond_pingpong      pthread mutex + two pthread_cond_t + a turn variable
 *   mutex_uncontended  pthread_mutex_lock + unlock (default mutex)
 *   mutex_handoff      two threads each: lock, sched_yield, unlock, sched_yield
 *   producer_consumer  --threads/2 producers and consumers, one mutex, two
 *                      condition variables (Fig. 1)
 *   odirect_read       --threads kernel threads each pread-ing random 4 KiB
 *                      blocks of an O_DIRECT file (Fig. 3)
 *   cache_miss_read    200 threads, a share of the reads from the O_DIRECT
 *                      file, the rest from a cached one (Fig. 4)
 *   memory_idle        threads with 64 KiB stacks parked in pthread_cond_wait;
 *                      at most 10,000 (kernel.pid_max is 32768 here). RSS
 *                      does not count the kernel's side of a thread (task
 *                      struct, 16 KiB kernel stack).
 *
 * --vprocs N is accepted and recorded but changes nothing: every thread is a
 * kernel thread, run on the CPUs the process may use (taskset -c 0,1).
 * No fork_join: a tree of 10^6 kernel threads is past kernel.pid_max.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../micro/harness.h"

#define SYSTEM "nptl"
#define STACK_SIZE (64 * 1024)
#define DEFAULT_IDLE_THREADS 10000L
#define MAX_IDLE_THREADS 10000L

static pthread_attr_t attr;

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "nptl-micro: %s failed: %s\n", what, strerror(rc));
        exit(1);
    }
}

/* ---- create_join ---- */

static void *trivial(void *arg) { return arg; }

static uint64_t run_create_join(long iters, void *ctx) {
    (void)ctx;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        pthread_t t;
        check(pthread_create(&t, &attr, trivial, NULL), "pthread_create");
        check(pthread_join(t, NULL), "pthread_join");
    }
    return bench_now_ns() - t0;
}

/* ---- switch ---- */

static void *yielder(void *arg) {
    long n = *(long *)arg;
    for (long i = 0; i < n; ++i) sched_yield();
    return NULL;
}

static uint64_t run_two(void *(*fn)(void *), void *a0, void *a1) {
    pthread_t a, b;
    uint64_t t0 = bench_now_ns();
    check(pthread_create(&a, &attr, fn, a0), "pthread_create");
    check(pthread_create(&b, &attr, fn, a1), "pthread_create");
    check(pthread_join(a, NULL), "pthread_join");
    check(pthread_join(b, NULL), "pthread_join");
    return bench_now_ns() - t0;
}

static uint64_t run_switch(long iters, void *ctx) {
    (void)ctx;
    return run_two(yielder, &iters, &iters);
}

/* ---- cond_pingpong ---- */

struct pingpong {
    pthread_mutex_t mu;
    pthread_cond_t cv[2];
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
    pthread_mutex_lock(&pp->mu);
    for (long i = 0; i < pp->iters; ++i) {
        while (pp->turn != me) pthread_cond_wait(&pp->cv[me], &pp->mu);
        pp->turn = other;
        pthread_cond_signal(&pp->cv[other]);
    }
    pthread_mutex_unlock(&pp->mu);
    return NULL;
}

static uint64_t run_cond_pingpong(long iters, void *ctx) {
    (void)ctx;
    struct pingpong pp = {PTHREAD_MUTEX_INITIALIZER, {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER}, 0, iters};
    struct player p0 = {&pp, 0}, p1 = {&pp, 1};
    return run_two(player, &p0, &p1);
}

/* ---- mutex_uncontended ---- */

static uint64_t run_mutex(long iters, void *ctx) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static volatile long counter;
    (void)ctx;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; ++i) {
        pthread_mutex_lock(&mu);
        counter = counter + 1;
        pthread_mutex_unlock(&mu);
    }
    return bench_now_ns() - t0;
}

/* ---- mutex_handoff ---- */

static pthread_mutex_t handoff_mu = PTHREAD_MUTEX_INITIALIZER;

static void *handoff(void *arg) {
    long n = *(long *)arg;
    for (long i = 0; i < n; ++i) {
        pthread_mutex_lock(&handoff_mu);
        sched_yield();
        pthread_mutex_unlock(&handoff_mu);
        sched_yield();
    }
    return NULL;
}

static uint64_t run_mutex_handoff(long iters, void *ctx) {
    (void)ctx;
    return run_two(handoff, &iters, &iters);
}

/* ---- producer_consumer (Fig. 1) ---- */

struct buffer {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    long count, consumed;
    int stop;
};
struct consumer {
    struct buffer *b;
    uint64_t rng, sink;
};

static void *producer(void *arg) {
    struct buffer *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (b->count == BENCH_PC_CAPACITY && !b->stop) pthread_cond_wait(&b->not_full, &b->mu);
        if (b->stop) break;
        ++b->count;
        pthread_cond_signal(&b->not_empty);
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void *consumer(void *arg) {
    struct consumer *c = arg;
    struct buffer *b = c->b;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (b->count == 0 && !b->stop) pthread_cond_wait(&b->not_empty, &b->mu);
        if (b->stop) break;
        --b->count;
        ++b->consumed;
        pthread_cond_signal(&b->not_full);
        pthread_mutex_unlock(&b->mu);
        c->sink += bench_work(&c->rng);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static long locked_read(pthread_mutex_t *mu, const long *v) {
    pthread_mutex_lock(mu);
    long x = *v;
    pthread_mutex_unlock(mu);
    return x;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int run_producer_consumer(const bench_opts *o) {
    const long n = o->threads;
    struct buffer b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    struct consumer *cons = calloc((size_t)n / 2, sizeof *cons);
    pthread_t *ts = calloc((size_t)n, sizeof *ts);
    if (!cons || !ts) check(ENOMEM, "calloc");
    long created = 0;
    int err = 0;
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
        if ((err = pthread_create(&ts[created], &attr, fn, arg)) != 0) {
            fprintf(stderr, "nptl-micro: pthread_create failed after %ld threads: %s\n", created, strerror(err));
            break;
        }
    }
    double rate = 0;
    long counted = 0;
    if (created == n) {
        sleep_s(o->min_time / 10); /* warm-up */
        bench_window w;
        long c0 = locked_read(&b.mu, &b.consumed);
        bench_window_open(&w);
        sleep_s(o->min_time);
        counted = locked_read(&b.mu, &b.consumed) - c0;
        rate = bench_window_close(&w, counted);
    }
    pthread_mutex_lock(&b.mu);
    b.stop = 1;
    pthread_cond_broadcast(&b.not_empty);
    pthread_cond_broadcast(&b.not_full);
    pthread_mutex_unlock(&b.mu);
    uint64_t sink = 0;
    for (long i = 0; i < created; ++i) check(pthread_join(ts[i], NULL), "pthread_join");
    for (long i = 0; i < created / 2; ++i) sink += cons[i].sink;
    free(cons);
    free(ts);
    if (created != n) return 1;
    char params[256];
    snprintf(params, sizeof params,
             "\"threads\": %ld, \"capacity\": %d, \"work_max\": %d, \"stack\": %d, \"sink\": %llu", n,
             BENCH_PC_CAPACITY, BENCH_WORK_MAX, STACK_SIZE, (unsigned long long)(sink % 1000));
    bench_report(o, SYSTEM, params, "msgs/s", rate, counted);
    return 0;
}

/* ---- odirect_read (Fig. 3), cache_miss_read (Fig. 4) ---- */

struct disk {
    int direct, cached;
    long direct_blocks, cached_blocks;
    double miss_rate;
    long done, misses; /* __atomic, relaxed */
    int stop, err;     /* __atomic */
};
struct reader {
    struct disk *d;
    uint64_t rng;
};

static void *reader(void *arg) {
    struct reader *r = arg;
    struct disk *d = r->d;
    void *buf = aligned_alloc(BENCH_BLOCK, BENCH_BLOCK);
    if (!buf) {
        __atomic_store_n(&d->err, ENOMEM, __ATOMIC_RELAXED);
        return NULL;
    }
    while (!__atomic_load_n(&d->stop, __ATOMIC_RELAXED)) {
        off_t off;
        int miss = bench_pick_read(&r->rng, d->miss_rate, d->direct_blocks, d->cached_blocks, &off);
        ssize_t got = pread(miss ? d->direct : d->cached, buf, BENCH_BLOCK, off);
        if (got != BENCH_BLOCK) {
            __atomic_store_n(&d->err, got < 0 ? errno : EIO, __ATOMIC_RELAXED);
            break;
        }
        __atomic_fetch_add(&d->done, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&d->misses, miss, __ATOMIC_RELAXED);
    }
    free(buf);
    return NULL;
}

static int run_disk(const bench_opts *o) {
    const int fig4 = !strcmp(o->bench, "cache_miss_read");
    struct disk d = {-1, -1, 0, 0, 1.0, 0, 0, 0, 0};
    bench_open_files(o, &d.direct, &d.direct_blocks, fig4 ? &d.cached : NULL, &d.cached_blocks);
    d.miss_rate = fig4 ? o->miss_rate : 1.0;
    const long n = o->threads;
    struct reader *rs = calloc((size_t)n, sizeof *rs);
    pthread_t *ts = calloc((size_t)n, sizeof *ts);
    if (!rs || !ts) check(ENOMEM, "calloc");
    long created = 0;
    for (; created < n; ++created) {
        rs[created].d = &d;
        rs[created].rng = bench_seed((uint64_t)created);
        int err = pthread_create(&ts[created], &attr, reader, &rs[created]);
        if (err) {
            fprintf(stderr, "nptl-micro: pthread_create failed after %ld threads: %s\n", created, strerror(err));
            break;
        }
    }
    sleep_s(o->min_time / 10);
    bench_window w;
    const long c0 = __atomic_load_n(&d.done, __ATOMIC_RELAXED), m0 = __atomic_load_n(&d.misses, __ATOMIC_RELAXED);
    bench_window_open(&w);
    sleep_s(o->min_time);
    const long counted = __atomic_load_n(&d.done, __ATOMIC_RELAXED) - c0;
    const long missed = __atomic_load_n(&d.misses, __ATOMIC_RELAXED) - m0;
    const double rate = bench_window_close(&w, counted);
    __atomic_store_n(&d.stop, 1, __ATOMIC_RELAXED);
    for (long i = 0; i < created; ++i) check(pthread_join(ts[i], NULL), "pthread_join");
    free(rs);
    free(ts);
    close(d.direct);
    if (d.cached >= 0) close(d.cached);
    if (d.err) {
        fprintf(stderr, "nptl-micro: %s: pread: %s\n", o->bench, strerror(d.err));
        return 1;
    }
    if (created != n || counted == 0) {
        fprintf(stderr, "nptl-micro: %s: no measurement (%ld threads, %ld reads)\n", o->bench, created, counted);
        return 1;
    }
    char params[256];
    if (fig4)
        snprintf(params, sizeof params,
                 "\"threads\": %ld, \"miss_rate\": %g, \"measured_miss_rate\": %.4f, \"block\": %d", n,
                 o->miss_rate, (double)missed / (double)counted, BENCH_BLOCK);
    else
        snprintf(params, sizeof params, "\"threads\": %ld, \"block\": %d, \"file_blocks\": %ld", n, BENCH_BLOCK,
                 d.direct_blocks);
    bench_report(o, SYSTEM, params, "reads/s", rate, counted);
    return 0;
}

/* ---- memory_idle ---- */

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;    /* idlers wait here */
static pthread_cond_t parked_cv = PTHREAD_COND_INITIALIZER;  /* the main thread waits here */
static long idle_parked;
static int idle_released;

static void *idler(void *arg) {
    const long *target = arg; /* threads to wait for; read under idle_mu */
    pthread_mutex_lock(&idle_mu);
    if (++idle_parked == *target) pthread_cond_signal(&parked_cv);
    while (!idle_released) pthread_cond_wait(&idle_cv, &idle_mu);
    pthread_mutex_unlock(&idle_mu);
    return NULL;
}

static int run_memory_idle(const bench_opts *o) {
    long n = o->threads;
    if (n > MAX_IDLE_THREADS) {
        fprintf(stderr, "nptl-micro: memory_idle: %ld threads requested, capped at %ld (kernel.pid_max)\n", n,
                MAX_IDLE_THREADS);
        n = MAX_IDLE_THREADS;
    }
    pthread_t *ts = calloc((size_t)n, sizeof *ts);
    if (!ts) check(ENOMEM, "calloc");
    memset(ts, 0, (size_t)n * sizeof *ts); /* resident before the baseline */
    pthread_t warm;
    check(pthread_create(&warm, &attr, trivial, NULL), "pthread_create");
    check(pthread_join(warm, NULL), "pthread_join");
    const long rss0 = bench_rss_bytes();
    const uint64_t t0 = bench_now_ns();
    long created = 0, target = n;
    int err = 0;
    for (; created < n; ++created) {
        err = pthread_create(&ts[created], &attr, idler, &target);
        if (err) break;
        bench_progress(o->prog, "created", created + 1, n, 5000);
    }
    pthread_mutex_lock(&idle_mu);
    if (created < n) {
        fprintf(stderr, "nptl-micro: pthread_create failed after %ld threads: %s\n", created, strerror(err));
        target = created; /* read by idlers under idle_mu */
    }
    while (idle_parked < created) pthread_cond_wait(&parked_cv, &idle_mu);
    pthread_mutex_unlock(&idle_mu);
    const uint64_t t1 = bench_now_ns();
    const long rss1 = bench_rss_bytes();
    fprintf(stderr, "nptl-micro: %ld threads parked in %.2f s; releasing and joining\n", created,
            (double)(t1 - t0) / 1e9);
    pthread_mutex_lock(&idle_mu);
    idle_released = 1;
    pthread_cond_broadcast(&idle_cv);
    pthread_mutex_unlock(&idle_mu);
    for (long i = 0; i < created; ++i) check(pthread_join(ts[i], NULL), "pthread_join");
    const uint64_t t2 = bench_now_ns();
    free(ts);
    if (created == 0 || rss0 < 0 || rss1 < 0) {
        fprintf(stderr, "nptl-micro: memory_idle: no measurement (created=%ld)\n", created);
        return 1;
    }
    char params[320];
    snprintf(params, sizeof params,
             "\"threads\": %ld, \"requested\": %ld, \"stack\": %d, \"park\": \"pthread_cond_wait\", "
             "\"rss_before\": %ld, \"rss_after\": %ld, \"create_park_s\": %.3f, \"teardown_s\": %.3f%s",
             created, o->threads, STACK_SIZE, rss0, rss1, (double)(t1 - t0) / 1e9, (double)(t2 - t1) / 1e9,
             created < o->threads ? ", \"limited\": \"capped or pthread_create failed\"" : "");
    bench_report(o, SYSTEM, params, "bytes", (double)(rss1 - rss0) / (double)created, 0);
    return 0;
}

int main(int argc, char **argv) {
    bench_opts o;
    int r = bench_parse_only(argc, argv, &o, "NPTL (pthreads)", DEFAULT_IDLE_THREADS, BENCH_NAMES_CLASSIC);
    if (r) return r == 1 ? 0 : 2;
    bench_check_cpus(&o); /* --vprocs only labels the record: the kernel schedules on the CPUs taskset allows */
    check(pthread_attr_init(&attr), "pthread_attr_init");
    check(pthread_attr_setstacksize(&attr, STACK_SIZE), "pthread_attr_setstacksize");
    long iters = 0;
    double v;
    const char *b = o.bench;
    if (!strcmp(b, "memory_idle")) return run_memory_idle(&o);
    if (!strcmp(b, "producer_consumer")) return run_producer_consumer(&o);
    if (!strcmp(b, "odirect_read") || !strcmp(b, "cache_miss_read")) return run_disk(&o);
    if (!strcmp(b, "create_join")) {
        v = bench_measure(&o, run_create_join, NULL, 1.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"pthread_create+pthread_join\", \"stack\": 65536", "ns", v, iters);
    } else if (!strcmp(b, "switch")) {
        v = bench_measure(&o, run_switch, NULL, 2.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"sched_yield\", \"threads\": 2", "ns", v, iters);
    } else if (!strcmp(b, "cond_pingpong")) {
        v = bench_measure(&o, run_cond_pingpong, NULL, 2.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"pthread mutex + 2 pthread_cond_t + turn\", \"threads\": 2", "ns", v,
                     iters);
    } else if (!strcmp(b, "mutex_handoff")) {
        v = bench_measure(&o, run_mutex_handoff, NULL, 2.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"lock, sched_yield, unlock, sched_yield\", \"threads\": 2", "ns", v,
                     iters);
    } else if (!strcmp(b, "mutex_uncontended")) {
        v = bench_measure(&o, run_mutex, NULL, 1.0, &iters);
        bench_report(&o, SYSTEM, "\"op\": \"pthread_mutex_lock+pthread_mutex_unlock\"", "ns", v, iters);
    }
    return 0;
}
