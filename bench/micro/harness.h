/*
 * harness.h — the shared part of the microbenchmarks (weft-micro,
 * st-micro, nptl-micro): command line, clock, calibration, RSS, output.
 * Header-only, C11 and C++20.
 *
 * Command line (the same for every system binary):
 *   NAME --bench BENCH [--iters N] [--threads N] [--min-time SECONDS] [--vprocs N] [--json]
 *   NAME --list | --help
 *
 * --vprocs N (default 1) is how many kernel threads the system runs its
 * threads on: weft's vprocs, Go's GOMAXPROCS, Boost.Fiber's work-stealing
 * threads; NPTL ignores it (the kernel schedules) and a single-CPU system
 * refuses N > 1 (bench_single_cpu). Every record says it: params "vprocs".
 *
 * Timing: a benchmark is a function that runs `iters` iterations and returns
 * the nanoseconds they took (CLOCK_MONOTONIC). Without --iters the harness
 * warms up and calibrates by running it with growing counts until one run
 * takes >= 1/10 of --min-time (default 0.3 s), then times one run sized to
 * last about --min-time. Each process reports ONE measurement; repetitions
 * are separate processes (bench/micro/suite.py).
 */
#ifndef WEFT_BENCH_HARNESS_H
#define WEFT_BENCH_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Capriccio section 2's benchmarks, which every full system has. */
#define BENCH_NAMES_CLASSIC                                                                            \
    "create_join switch cond_pingpong mutex_uncontended mutex_handoff memory_idle producer_consumer "  \
    "odirect_read cache_miss_read"
/* Every benchmark a binary may have: the classic ones and the fork-join tree. */
#define BENCH_NAMES BENCH_NAMES_CLASSIC " fork_join"
/* What the threads-only runtimes have (no asynchronous disk I/O to measure). */
#define BENCH_NAMES_NO_DISK                                                                            \
    "create_join switch cond_pingpong mutex_uncontended mutex_handoff memory_idle producer_consumer"

/* Fig. 1: the buffer holds at most this many (empty) messages; a consumer
 * "processes" one by bench_work: a random 0-127 steps of xorshift64. */
#define BENCH_PC_CAPACITY 64
#define BENCH_WORK_MAX 128
/* Fig. 3 and 4: the read size, and the default threads of cache_miss_read. */
#define BENCH_BLOCK 4096
#define BENCH_DISK_THREADS 200
/* Exit status of a benchmark the kernel refused (O_DIRECT): skipped, not failed. */
#define BENCH_EXIT_SKIP 77
/* fork_join: the default --threads, about 10^6 (fib(28): 1,028,457 threads). */
#define BENCH_FORK_JOIN_THREADS 1000000L

typedef struct bench_opts {
    const char *prog;
    const char *bench;  /* one of BENCH_NAMES */
    long iters;         /* 0: calibrate */
    long threads;       /* memory_idle, producer_consumer, *_read: threads; 0: the default */
    double min_time;    /* seconds one timed run should last */
    int json;
    const char *file;     /* odirect_read, cache_miss_read: the big file, read with O_DIRECT */
    const char *hit_file; /* cache_miss_read: the small file, read through the page cache */
    double miss_rate;     /* cache_miss_read: share of reads from `file`, 0..1 */
    long vprocs;          /* kernel threads the system may run its threads on (default 1) */
} bench_opts;

/* xorshift64: the per-thread random numbers of the Fig. 1, 3 and 4 benchmarks. */
static inline uint64_t bench_rng(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* A seed for thread `i` (never 0, which xorshift would keep). */
static inline uint64_t bench_seed(uint64_t i) { return (i + 1) * 0x9E3779B97F4A7C15ull; }

/* Fig. 1's "processing" of one message: a random 0..BENCH_WORK_MAX-1 steps of
 * a dependent xorshift chain (~1 ns each). Returns a value the caller sums so
 * the loop is not optimised away. Go's peer does the same steps. */
static inline uint64_t bench_work(uint64_t *rng) {
    uint64_t n = bench_rng(rng) % BENCH_WORK_MAX, x = *rng;
    for (uint64_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

/* Identifier used in the JSON records for a subcommand name. */
static inline const char *bench_id(const char *name) {
    if (!strcmp(name, "create_join")) return "table1.create_join";
    if (!strcmp(name, "switch")) return "table1.switch";
    if (!strcmp(name, "cond_pingpong")) return "table1.cond_pingpong";
    if (!strcmp(name, "mutex_uncontended")) return "table1.mutex_uncontended";
    if (!strcmp(name, "mutex_handoff")) return "table1.mutex_handoff";
    if (!strcmp(name, "memory_idle")) return "memory.idle_thread";
    if (!strcmp(name, "producer_consumer")) return "fig1.producer_consumer";
    if (!strcmp(name, "odirect_read")) return "fig3.odirect_random_read";
    if (!strcmp(name, "cache_miss_read")) return "fig4.cache_miss_read";
    if (!strcmp(name, "fork_join")) return "fork_join.fib_tree";
    return NULL;
}

/* fork_join: a thread for fib(n) (n >= 2) starts a thread for fib(n-1) and
 * one for fib(n-2), joins both and returns the sum; a thread for n < 2
 * returns n. The tree of fib(n) has bench_fib_threads(n) = 2 fib(n+1) - 1
 * threads, the root included. */
static inline long bench_fib(long n) {
    long a = 0, b = 1;
    for (long i = 0; i < n; ++i) {
        long c = a + b;
        a = b;
        b = c;
    }
    return a;
}

static inline long bench_fib_threads(long n) { return 2 * bench_fib(n + 1) - 1; }

/* The smallest n whose tree has at least `threads` threads (at most 60). */
static inline long bench_fib_n_for(long threads) {
    long n = 0;
    while (n < 60 && bench_fib_threads(n) < threads) ++n;
    return n;
}

static inline void bench_usage(FILE *f, const char *prog, const char *system, long default_threads) {
    fprintf(f,
            "usage: %s --bench NAME [--iters N] [--threads N] [--min-time S] [--vprocs N] [--json]\n"
            "          [--file PATH] [--hit-file PATH] [--miss-rate R]\n"
            "       %s --list | --help\n"
            "Microbenchmarks of %s (Capriccio section 2), by default on one kernel thread /\n"
            "vproc (the disk reads of NPTL: one kernel thread per reader). --list shows which\n"
            "this binary has. Pin the process to one CPU yourself (taskset -c 1 %s ...), or\n"
            "with --vprocs 2 give it two (taskset -c 0,1).\n"
            "  create_join        ns per thread create + join of a trivial thread\n"
            "  switch             ns per switch, two threads yielding in turn\n"
            "  cond_pingpong      ns per one-way hand-off, mutex + condition variables\n"
            "  mutex_uncontended  ns per lock + unlock by one thread\n"
            "  mutex_handoff      ns per hand-off: two threads each looping lock, yield,\n"
            "                     unlock, yield (every lock waits for the other thread)\n"
            "  memory_idle        RSS bytes per parked thread (--threads, default %ld)\n"
            "  producer_consumer  messages/s: --threads/2 producers and consumers, a mutex,\n"
            "                     two condition variables, %d slots, random work per message\n"
            "  odirect_read       reads/s: --threads (default 1) random 4 KiB reads of --file\n"
            "                     opened with O_DIRECT\n"
            "  cache_miss_read    reads/s: --threads (default %d) random 4 KiB reads, a share\n"
            "                     --miss-rate of them from --file with O_DIRECT, the rest\n"
            "                     from --hit-file through the page cache\n"
            "  fork_join          ns per thread: a tree of threads computing fib(n), each\n"
            "                     thread for n >= 2 starting two for n-1 and n-2 and joining\n"
            "                     them; n the smallest with >= --threads threads (default\n"
            "                     %ld: fib(28), 1,028,457 threads); one tree as warm-up,\n"
            "                     then trees for --min-time (or --iters trees); the result\n"
            "                     is checked\n"
            "  --iters N          iterations of the timed run (default: calibrated)\n"
            "  --min-time S       seconds a timed run lasts (default 0.3); producer_consumer\n"
            "                     and the reads count for this long after a tenth as warm-up\n"
            "  --vprocs N         kernel threads to run the threads on (default 1): weft's\n"
            "                     vprocs, Go's GOMAXPROCS, Boost.Fiber's work-stealing\n"
            "                     threads; NPTL ignores it, single-CPU systems refuse N > 1\n"
            "  --json             one JSON object per line on stdout\n"
            "Exit status: 0 ok, 1 failed, 2 usage, %d the kernel refused (O_DIRECT): skipped.\n",
            prog, prog, system, prog, default_threads, BENCH_PC_CAPACITY, BENCH_DISK_THREADS, BENCH_FORK_JOIN_THREADS,
            BENCH_EXIT_SKIP);
}

/* Is `name` one of the space-separated `names`? */
static inline int bench_in(const char *names, const char *name) {
    size_t n = strlen(name);
    for (const char *p = names; (p = strstr(p, name)) != NULL; p += n)
        if ((p == names || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return 1;
    return 0;
}

/* bench_parse for a system that has only some of the benchmarks (`names`,
 * space-separated): --list prints those, and asking for another is a usage
 * error naming what the system has (suite.py plans from --list). */
static inline int bench_parse_only(int argc, char **argv, bench_opts *o, const char *system, long default_threads,
                                   const char *names);

/* 0: run opts->bench; 1: done (help/list printed), exit 0; 2: usage error. */
static inline int bench_parse(int argc, char **argv, bench_opts *o, const char *system, long default_threads) {
    return bench_parse_only(argc, argv, o, system, default_threads, BENCH_NAMES);
}

static inline int bench_parse_only(int argc, char **argv, bench_opts *o, const char *system, long default_threads,
                                   const char *names) {
    memset(o, 0, sizeof *o);
    o->prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    o->min_time = 0.3;
    o->vprocs = 1;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            bench_usage(stdout, argv[0], system, default_threads);
            return 1;
        } else if (!strcmp(a, "--list")) {
            for (const char *p = names; *p;) {
                size_t n = strcspn(p, " ");
                printf("%.*s\n", (int)n, p);
                p += n;
                p += strspn(p, " ");
            }
            return 1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--bench") && has_val) {
            o->bench = argv[++i];
        } else if (!strcmp(a, "--iters") && has_val) {
            o->iters = atol(argv[++i]);
            if (o->iters <= 0) { fprintf(stderr, "%s: --iters must be > 0\n", argv[0]); return 2; }
        } else if (!strcmp(a, "--threads") && has_val) {
            o->threads = atol(argv[++i]);
            if (o->threads <= 0) { fprintf(stderr, "%s: --threads must be > 0\n", argv[0]); return 2; }
        } else if (!strcmp(a, "--vprocs") && has_val) {
            char *end;
            o->vprocs = strtol(argv[++i], &end, 10);
            if (*end || o->vprocs < 1 || o->vprocs > 1024) {
                fprintf(stderr, "%s: --vprocs must be a number from 1 to 1024\n", argv[0]);
                return 2;
            }
        } else if (!strcmp(a, "--file") && has_val) {
            o->file = argv[++i];
        } else if (!strcmp(a, "--hit-file") && has_val) {
            o->hit_file = argv[++i];
        } else if (!strcmp(a, "--miss-rate") && has_val) {
            char *end;
            o->miss_rate = strtod(argv[++i], &end);
            if (*end || !(o->miss_rate >= 0 && o->miss_rate <= 1)) {
                fprintf(stderr, "%s: --miss-rate must be a number from 0 to 1\n", argv[0]);
                return 2;
            }
        } else if (!strcmp(a, "--min-time") && has_val) {
            o->min_time = atof(argv[++i]);
            if (!(o->min_time > 0)) { fprintf(stderr, "%s: --min-time must be > 0\n", argv[0]); return 2; }
        } else {
            fprintf(stderr, "%s: bad argument '%s'\n", argv[0], a);
            bench_usage(stderr, argv[0], system, default_threads);
            return 2;
        }
    }
    if (!o->bench) {
        fprintf(stderr, "%s: --bench NAME is required (--list shows the names)\n", argv[0]);
        return 2;
    }
    if (!bench_id(o->bench)) {
        fprintf(stderr, "%s: unknown benchmark '%s' (one of: %s)\n", argv[0], o->bench, BENCH_NAMES);
        return 2;
    }
    if (!bench_in(names, o->bench)) {
        fprintf(stderr, "%s: '%s' is not available on %s (it has: %s)\n", argv[0], o->bench, system, names);
        return 2;
    }
    int disk = !strcmp(o->bench, "odirect_read") || !strcmp(o->bench, "cache_miss_read");
    if (disk && !o->file) {
        fprintf(stderr, "%s: %s needs --file PATH (a file of at least %d bytes)\n", argv[0], o->bench, BENCH_BLOCK);
        return 2;
    }
    if (!strcmp(o->bench, "cache_miss_read") && !o->hit_file) {
        fprintf(stderr, "%s: cache_miss_read needs --hit-file PATH\n", argv[0]);
        return 2;
    }
    if (!o->threads) {
        if (!strcmp(o->bench, "memory_idle")) o->threads = default_threads;
        else if (!strcmp(o->bench, "producer_consumer")) o->threads = 2;
        else if (!strcmp(o->bench, "odirect_read")) o->threads = 1;
        else if (!strcmp(o->bench, "cache_miss_read")) o->threads = BENCH_DISK_THREADS;
        else if (!strcmp(o->bench, "fork_join")) o->threads = BENCH_FORK_JOIN_THREADS;
    }
    if (!strcmp(o->bench, "producer_consumer") && (o->threads < 2 || o->threads % 2)) {
        fprintf(stderr, "%s: producer_consumer needs an even --threads >= 2 (half producers, half consumers)\n",
                argv[0]);
        return 2;
    }
    return 0;
}

/* Blocks of BENCH_BLOCK bytes in `fd`'s file; < 1 with a message on error. */
static inline long bench_file_blocks(const char *prog, int fd, const char *path) {
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < BENCH_BLOCK) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, end < 0 ? strerror(errno) : "smaller than one 4 KiB block");
        return 0;
    }
    return (long)(end / BENCH_BLOCK);
}

/* Open the disk benchmarks' files: *direct with O_DIRECT (exit
 * BENCH_EXIT_SKIP with a message where the file system refuses it), *cached
 * (if asked) normally, then read through once so its pages are cached. */
static inline void bench_open_files(const bench_opts *o, int *direct, long *direct_blocks, int *cached,
                                    long *cached_blocks) {
    *direct = open(o->file, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (*direct < 0) {
        int e = errno;
        fprintf(stderr, "%s: open(%s, O_DIRECT): %s%s\n", o->prog, o->file, strerror(e),
                e == EINVAL ? " (the file system refuses O_DIRECT: skipped)" : "");
        exit(e == EINVAL ? BENCH_EXIT_SKIP : 1);
    }
    if (!(*direct_blocks = bench_file_blocks(o->prog, *direct, o->file))) exit(1);
    if (!cached) return;
    *cached = open(o->hit_file, O_RDONLY | O_CLOEXEC);
    if (*cached < 0) {
        fprintf(stderr, "%s: open(%s): %s\n", o->prog, o->hit_file, strerror(errno));
        exit(1);
    }
    if (!(*cached_blocks = bench_file_blocks(o->prog, *cached, o->hit_file))) exit(1);
    static char warm[1 << 16];
    for (off_t off = 0; pread(*cached, warm, sizeof warm, off) > 0; off += sizeof warm) {
    }
}

/* One read's block: from the direct file with probability miss_rate. */
static inline int bench_pick_read(uint64_t *rng, double miss_rate, long direct_blocks, long cached_blocks,
                                  off_t *off) {
    int miss = miss_rate >= 1 || (double)(bench_rng(rng) % 1000000) < miss_rate * 1e6;
    *off = (off_t)(bench_rng(rng) % (uint64_t)(miss ? direct_blocks : cached_blocks)) * BENCH_BLOCK;
    return miss;
}

/* Warn when the process may run on more than one CPU: the numbers then
 * measure something else (for NPTL, yields on two CPUs do not switch). */
static inline void bench_check_pinned(const char *prog) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) != 1)
        fprintf(stderr, "%s: warning: not pinned to one CPU (%d allowed); use taskset -c 1\n", prog,
                CPU_COUNT(&set));
}

/* bench_check_pinned for --vprocs 1; with more, warn when the process may
 * use fewer CPUs than it runs kernel threads (taskset -c 0,1 for 2). */
static inline void bench_check_cpus(const bench_opts *o) {
    if (o->vprocs <= 1) {
        bench_check_pinned(o->prog);
        return;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < o->vprocs)
        fprintf(stderr, "%s: warning: --vprocs %ld but only %d CPU(s) allowed\n", o->prog, o->vprocs,
                CPU_COUNT(&set));
}

/* For a system that runs on one kernel thread only (State Threads, raw
 * Boost.Context): 0 for --vprocs 1, else a message and 2 (usage). */
static inline int bench_single_cpu(const bench_opts *o, const char *system) {
    if (o->vprocs == 1) return 0;
    fprintf(stderr, "%s: %s runs its threads on one kernel thread only: --vprocs %ld is not supported\n", o->prog,
            system, o->vprocs);
    return 2;
}

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Resident set size of the process in bytes, from /proc/self/statm; -1 on error. */
static inline long bench_rss_bytes(void) {
    long size = 0, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

typedef uint64_t (*bench_timed_fn)(long iters, void *ctx);

/* CPU time the process got during the last timed run, over its wall time:
 * near 1 when the CPU was ours, lower when something else ran on it (the
 * machine is shared). Reported as "cpu_share"; suite.py retries low ones. */
static double bench_cpu_share = 0;

static inline uint64_t bench_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Warm up, calibrate (unless --iters), time one run. Returns ns per op, where
 * one iteration is ops_per_iter ops; *iters_out gets the iterations timed. */
static inline double bench_measure(const bench_opts *o, bench_timed_fn fn, void *ctx, double ops_per_iter,
                                   long *iters_out) {
    long iters = o->iters;
    if (iters) {
        long warm = iters / 10 > 0 ? iters / 10 : 1;
        fn(warm, ctx);
    } else {
        const uint64_t target = (uint64_t)(o->min_time * 1e9);
        long n = 16;
        uint64_t e;
        for (;;) { /* the warm-up: runs growing until one lasts target/10 */
            e = fn(n, ctx);
            if (e >= target / 10 || n >= (1L << 40)) break;
            n = e < target / 1000 ? n * 10 : n * 2;
        }
        double est = (double)n * (double)target / (double)(e ? e : 1);
        iters = est < 1 ? 1 : est > 4e12 ? (long)4e12 : (long)est;
    }
    const uint64_t c0 = bench_cpu_ns(), w0 = bench_now_ns();
    uint64_t elapsed = fn(iters, ctx);
    const uint64_t w1 = bench_now_ns(), c1 = bench_cpu_ns();
    bench_cpu_share = w1 > w0 ? (double)(c1 - c0) / (double)(w1 - w0) : 0;
    *iters_out = iters;
    return (double)elapsed / ((double)iters * ops_per_iter);
}

/* The counting window of the duration benchmarks (producer_consumer and the
 * reads): open it after the warm-up, close it with the count it saw. */
typedef struct bench_window {
    uint64_t wall0, cpu0;
} bench_window;

static inline void bench_window_open(bench_window *w) {
    w->cpu0 = bench_cpu_ns();
    w->wall0 = bench_now_ns();
}

/* Count per second over the window; sets the cpu_share reported with it. */
static inline double bench_window_close(const bench_window *w, long count) {
    const uint64_t wall = bench_now_ns() - w->wall0, cpu = bench_cpu_ns() - w->cpu0;
    bench_cpu_share = wall ? (double)cpu / (double)wall : 0;
    return wall ? (double)count * 1e9 / (double)wall : 0;
}

/* Print the result: a human line, or with --json one JSON object per line.
 * params_json is the inside of the params object (without braces); the
 * harness adds "vprocs". cpu_share is CPU time over wall time: up to
 * --vprocs (or more for NPTL) when the system uses several CPUs. */
static inline void bench_report(const bench_opts *o, const char *system, const char *params_json,
                                const char *unit, double value, long iters) {
    const char *id = bench_id(o->bench);
    const char *sep = *params_json ? ", " : "";
    if (o->json) {
        printf("{\"benchmark\": \"%s\", \"system\": \"%s\", \"params\": {%s%s\"vprocs\": %ld}, \"unit\": \"%s\", "
               "\"value\": %.3f",
               id, system, params_json, sep, o->vprocs, unit, value);
        if (iters) printf(", \"iterations\": %ld, \"cpu_share\": %.3f", iters, bench_cpu_share);
        printf("}\n");
    } else {
        printf("%-5s %-28s %12.2f %-5s", system, id, value, unit);
        if (iters) printf("  iters=%ld cpu_share=%.2f", iters, bench_cpu_share);
        printf("  {%s%s\"vprocs\": %ld}\n", params_json, sep, o->vprocs);
    }
    fflush(stdout);
}

/* fork_join's driver, shared by the C and C++ systems: `tree(n, ctx)` runs
 * one tree of threads for fib(n) and returns its root's result (< 0: it
 * failed, with a message). One tree warms up, then trees run until
 * --min-time has passed (at least one; --iters N: exactly N). Reports ns per
 * thread (unit "ns") with params n, threads (per tree), trees, threads_per_s
 * and what `extra` adds: extra(ctx, 0, ...) is called as the timed trees
 * start, extra(ctx, 1, buf, len) after them to write more params (the inside
 * of an object, "" for none) into buf; extra may be NULL. Returns the exit
 * status: 1 when a result is wrong. */
typedef long (*bench_tree_fn)(long n, void *ctx);
typedef void (*bench_extra_fn)(void *ctx, int end, char *buf, size_t len);

static inline int bench_fork_join(const bench_opts *o, const char *system, bench_tree_fn tree, void *ctx,
                                  bench_extra_fn extra) {
    char more[256] = "";
    const long n = bench_fib_n_for(o->threads), per_tree = bench_fib_threads(n), want = bench_fib(n);
    long got = tree(n, ctx);
    if (got != want) {
        fprintf(stderr, "%s: fork_join: fib(%ld) gave %ld, expected %ld (warm-up tree)\n", o->prog, n, got, want);
        return 1;
    }
    long trees = 0;
    if (extra) extra(ctx, 0, more, sizeof more);
    const uint64_t c0 = bench_cpu_ns(), w0 = bench_now_ns(), target = (uint64_t)(o->min_time * 1e9);
    uint64_t w1;
    do {
        got = tree(n, ctx);
        if (got != want) {
            fprintf(stderr, "%s: fork_join: fib(%ld) gave %ld, expected %ld (tree %ld)\n", o->prog, n, got, want,
                    trees + 1);
            return 1;
        }
        ++trees;
        w1 = bench_now_ns();
    } while (o->iters ? trees < o->iters : w1 - w0 < target);
    const uint64_t c1 = bench_cpu_ns();
    if (extra) extra(ctx, 1, more, sizeof more);
    bench_cpu_share = w1 > w0 ? (double)(c1 - c0) / (double)(w1 - w0) : 0;
    const double threads = (double)trees * (double)per_tree;
    const double ns = (double)(w1 - w0) / threads;
    char params[768];
    snprintf(params, sizeof params,
             "\"n\": %ld, \"threads\": %ld, \"trees\": %ld, \"threads_per_s\": %.0f, \"result\": %ld%s%s", n,
             per_tree, trees, ns > 0 ? 1e9 / ns : 0.0, got, *more ? ", " : "", more);
    bench_report(o, system, params, "ns", ns, (long)threads);
    return 0;
}

/* Progress on stderr for long runs: every `every` items, and at the end. */
static inline void bench_progress(const char *prog, const char *what, long done, long total, long every) {
    if (total < 2 * every) return;
    if (done % every == 0 || done == total)
        fprintf(stderr, "%s: %s %ld/%ld\n", prog, what, done, total);
}

#endif /* WEFT_BENCH_HARNESS_H */
