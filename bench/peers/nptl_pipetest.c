/*
 * nptl-pipetest — the pipe-token benchmark (Capriccio Fig. 2) on kernel
 * threads (glibc NPTL): one pthread per pipe (64 KiB stacks, so thousands
 * fit), each blocking in read(2) for a 12-byte token and writing it to the
 * next pipe. Blocking pipes (pipe2 with O_CLOEXEC only). Command line and
 * output: bench/micro/pipetest.h; system id "nptl".
 *
 * The threads share two counters: writes (the forward-or-retire decision,
 * one atomic add per token) and the ledger (under a mutex, touched only when
 * a token retires, K times per run). The main thread injects the tokens once
 * every reader has started, sleeps until the last token retires, then closes
 * the write ends: each reader sees EOF and returns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../micro/pipetest.h"

#define SYSTEM "nptl"
#define STACK_SIZE (64 * 1024)

static pt_opts opts;
static long n_pipes, n_flight;
static int *rfd, *wfd;
static long writes; /* tokens written into pipes so far (atomic), the injected ones included */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER; /* main waits here: started, then done */
static long started;                                 /* readers running (under mu) */
static pt_ledger ledger;                             /* under mu */
static uint64_t t_done;                              /* when the last token retired (under mu) */

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "%s: %s failed: %s\n", opts.prog, what, strerror(rc));
        exit(1);
    }
}

/* Read exactly one token; 0 at EOF (the run is over). */
static int get_token(long i, pt_token *t) {
    unsigned char *p = (unsigned char *)t;
    size_t have = 0;
    while (have < sizeof *t) {
        ssize_t r = read(rfd[i], p + have, sizeof *t - have);
        if (r > 0) {
            have += (size_t)r;
        } else if (r == 0) {
            if (have) {
                fprintf(stderr, "%s: EOF inside a token on pipe %ld\n", opts.prog, i);
                _exit(1);
            }
            return 0;
        } else if (errno != EINTR) {
            fprintf(stderr, "%s: read: %s\n", opts.prog, strerror(errno));
            _exit(1);
        }
    }
    return 1;
}

static void put_token(long i, const pt_token *t) {
    const unsigned char *p = (const unsigned char *)t;
    size_t done = 0;
    while (done < sizeof *t) {
        ssize_t w = write(wfd[i], p + done, sizeof *t - done);
        if (w > 0) {
            done += (size_t)w;
        } else if (w < 0 && errno != EINTR) {
            fprintf(stderr, "%s: write: %s\n", opts.prog, strerror(errno));
            _exit(1);
        }
    }
}

static void *reader(void *arg) {
    const long i = (long)(intptr_t)arg, next = i + 1 == n_pipes ? 0 : i + 1;
    pthread_mutex_lock(&mu);
    if (++started == n_pipes) pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pt_token t;
    while (get_token(i, &t)) {
        if (!pt_token_ok(&ledger, &t, i)) pt_bad_token(&opts, &t, i);
        ++t.hops;
        if (__atomic_fetch_add(&writes, 1, __ATOMIC_RELAXED) < opts.tokens) {
            t.check = pt_check(t.id, t.hops, (uint32_t)next);
            put_token(next, &t);
        } else {
            pthread_mutex_lock(&mu);
            pt_retire(&ledger, &t);
            if (ledger.retired == n_flight) {
                t_done = bench_now_ns();
                pthread_cond_signal(&cv);
            }
            pthread_mutex_unlock(&mu);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int r = pt_parse(argc, argv, &opts, "kernel threads (glibc NPTL), one per pipe", NULL);
    if (r) return r == 1 ? 0 : 2;
    bench_check_pinned(opts.prog);
    if (pt_reserve_fds(&opts) != 0) return 2;
    pt_start_watchdog(opts.timeout);

    n_pipes = opts.pipes;
    n_flight = pt_in_flight(n_pipes);
    rfd = malloc((size_t)n_pipes * sizeof *rfd);
    wfd = malloc((size_t)n_pipes * sizeof *wfd);
    pthread_t *ts = calloc((size_t)n_pipes, sizeof *ts);
    if (!rfd || !wfd || !ts || pt_ledger_init(&ledger, n_flight) != 0) check(ENOMEM, "malloc");
    for (long i = 0; i < n_pipes; ++i) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) check(errno, "pipe2");
        rfd[i] = fds[0];
        wfd[i] = fds[1];
    }
    pthread_attr_t attr;
    check(pthread_attr_init(&attr), "pthread_attr_init");
    check(pthread_attr_setstacksize(&attr, STACK_SIZE), "pthread_attr_setstacksize");
    for (long i = 0; i < n_pipes; ++i) {
        int err = pthread_create(&ts[i], &attr, reader, (void *)(intptr_t)i);
        if (err) {
            fprintf(stderr, "%s: pthread_create failed after %ld threads: %s\n", opts.prog, i, strerror(err));
            return 1;
        }
    }
    pthread_mutex_lock(&mu);
    while (started < n_pipes) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);

    writes = n_flight;
    const uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    for (long j = 0; j < n_flight; ++j) {
        const long p = pt_start_pipe(j, n_flight, n_pipes);
        pt_token t = pt_make((uint32_t)j, 0, (uint32_t)p);
        put_token(p, &t);
    }
    pthread_mutex_lock(&mu);
    while (ledger.retired < n_flight) pthread_cond_wait(&cv, &mu);
    const uint64_t t1 = t_done;
    pthread_mutex_unlock(&mu);
    const uint64_t c1 = bench_cpu_ns(), w1 = bench_now_ns();
    alarm(0);
    pt_start_watchdog(opts.timeout); /* teardown is bounded too */

    for (long i = 0; i < n_pipes; ++i) close(wfd[i]); /* EOF: every reader returns */
    for (long i = 0; i < n_pipes; ++i) check(pthread_join(ts[i], NULL), "pthread_join");
    for (long i = 0; i < n_pipes; ++i) close(rfd[i]);
    alarm(0);
    const int ok = pt_ledger_verify(&ledger, &opts);
    char extra_params[64];
    snprintf(extra_params, sizeof extra_params, "\"threads\": %ld, \"stack\": %d", n_pipes, STACK_SIZE);
    pt_report(&opts, SYSTEM, extra_params, "", t1 - t0, (double)(c1 - c0) / (double)(w1 - t0), ok);
    free(ts);
    free(rfd);
    free(wfd);
    free(ledger.seen);
    return ok ? 0 : 1;
}
