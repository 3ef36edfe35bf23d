/*
 * harness.h — the shared part of the core microbenchmarks (weft-micro,
 * st-micro, nptl-micro): command line, clock, calibration, RSS, output.
 * Header-only, C11 and C++20.
 *
 * Command line (the same for every system binary):
 *   NAME --bench BENCH [--iters N] [--threads N] [--min-time SECONDS] [--json]
 *   NAME --list | --help
 *
 * Timing: a benchmark is a function that runs `iters` iterations and returns
 * the nanoseconds they took (CLOCK_MONOTONIC). Without --iters the harness
 * warms up and calibrates by running it with growing counts until one run
 * takes >= 1/10 of --min-time (default 0.3 s), then times one run sized to
 * last about --min-time. Each process reports ONE measurement; repetitions
 * are separate processes (bench/micro/run.py).
 */
#ifndef WEFT_BENCH_HARNESS_H
#define WEFT_BENCH_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAMES "create_join switch cond_pingpong mutex_uncontended memory_idle"

typedef struct bench_opts {
    const char *prog;
    const char *bench;  /* one of BENCH_NAMES */
    long iters;         /* 0: calibrate */
    long threads;       /* memory_idle: threads to park; 0: the binary's default */
    double min_time;    /* seconds one timed run should last */
    int json;
} bench_opts;

/* Identifier used in the JSON records for a subcommand name. */
static inline const char *bench_id(const char *name) {
    if (!strcmp(name, "create_join")) return "table1.create_join";
    if (!strcmp(name, "switch")) return "table1.switch";
    if (!strcmp(name, "cond_pingpong")) return "table1.cond_pingpong";
    if (!strcmp(name, "mutex_uncontended")) return "table1.mutex_uncontended";
    if (!strcmp(name, "memory_idle")) return "memory.idle_thread";
    return NULL;
}

static inline void bench_usage(FILE *f, const char *prog, const char *system, long default_threads) {
    fprintf(f,
            "usage: %s --bench NAME [--iters N] [--threads N] [--min-time S] [--json]\n"
            "       %s --list | --help\n"
            "Core microbenchmarks of %s, all on one kernel thread / vproc.\n"
            "Pin the process to one CPU yourself (taskset -c 1 %s ...).\n"
            "  create_join        ns per thread create + join of a trivial thread\n"
            "  switch             ns per switch, two threads yielding in turn\n"
            "  cond_pingpong      ns per one-way hand-off, mutex + condition variables\n"
            "  mutex_uncontended  ns per lock + unlock by one thread\n"
            "  memory_idle        RSS bytes per parked thread (--threads, default %ld)\n"
            "  --iters N          iterations of the timed run (default: calibrated)\n"
            "  --min-time S       seconds a calibrated timed run lasts (default 0.3)\n"
            "  --json             one JSON object per line on stdout\n",
            prog, prog, system, prog, default_threads);
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
 * error naming what the system has (run.py plans from --list). */
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
    if (!o->threads) o->threads = default_threads;
    return 0;
}

/* Warn when the process may run on more than one CPU: the numbers then
 * measure something else (for NPTL, yields on two CPUs do not switch). */
static inline void bench_check_pinned(const char *prog) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) != 1)
        fprintf(stderr, "%s: warning: not pinned to one CPU (%d allowed); use taskset -c 1\n", prog,
                CPU_COUNT(&set));
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
 * machine is shared). Reported as "cpu_share"; run.py retries low ones. */
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

/* Print the result: a human line, or with --json one JSON object per line.
 * params_json is the inside of the params object (without braces). */
static inline void bench_report(const bench_opts *o, const char *system, const char *params_json,
                                const char *unit, double value, long iters) {
    const char *id = bench_id(o->bench);
    if (o->json) {
        printf("{\"benchmark\": \"%s\", \"system\": \"%s\", \"params\": {%s}, \"unit\": \"%s\", \"value\": %.3f",
               id, system, params_json, unit, value);
        if (iters) printf(", \"iterations\": %ld, \"cpu_share\": %.3f", iters, bench_cpu_share);
        printf("}\n");
    } else {
        printf("%-5s %-28s %12.2f %-5s", system, id, value, unit);
        if (iters) printf("  iters=%ld cpu_share=%.2f", iters, bench_cpu_share);
        printf("  {%s}\n", params_json);
    }
    fflush(stdout);
}

/* Progress on stderr for long runs: every `every` items, and at the end. */
static inline void bench_progress(const char *prog, const char *what, long done, long total, long every) {
    if (total < 2 * every) return;
    if (done % every == 0 || done == total)
        fprintf(stderr, "%s: %s %ld/%ld\n", prog, what, done, total);
}

#endif /* WEFT_BENCH_HARNESS_H */
