/* many_threads.c - scenario: N threads alive at once. Each thread, created
 * with pthread_attr_setstacksize(3p) = stack, blocks on one shared condition
 * variable until the creator has made all of them, then counts itself and
 * exits; the creator broadcasts and joins them all.
 *  - prints "created K of N";
 *  - exit 0 (with an "ok" line) only if all N were created and all N ran;
 *  - if pthread_create fails, prints its error (EAGAIN is expected from NPTL
 *    around 32k threads: pid_max / vm.max_map_count), releases and joins the
 *    K it made, checks all K ran, and exits 2 (a check failure exits 1).
 *
 * Usage: many_threads [N=100000] [stack_bytes=65536]
 */
#include "check.h"

#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cv = PTHREAD_COND_INITIALIZER;
static int go;
static long ran;

static void *worker(void *arg) {
    (void)arg;
    CHECK_OK(pthread_mutex_lock(&mu));
    while (!go) CHECK_OK(pthread_cond_wait(&go_cv, &mu));
    ++ran;
    CHECK_OK(pthread_mutex_unlock(&mu));
    return NULL;
}

int main(int argc, char **argv) {
    WATCHDOG(60);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long stack = argc > 2 ? atol(argv[2]) : 65536;
    CHECK(n >= 1 && stack > 0);
    pthread_t *t = calloc((size_t)n, sizeof *t);
    CHECK(t != NULL);
    pthread_attr_t attr;
    CHECK_OK(pthread_attr_init(&attr));
    CHECK_OK(pthread_attr_setstacksize(&attr, (size_t)stack));

    long long t0 = now_ns(CLOCK_MONOTONIC);
    long k = 0;
    int err = 0;
    for (; k < n; ++k)
        if ((err = pthread_create(&t[k], &attr, worker, NULL)) != 0) break;
    long long t1 = now_ns(CLOCK_MONOTONIC);
    printf("created %ld of %ld", k, n);
    if (err) printf(" (pthread_create: %s=%d, %s)", err_name(err), err, strerror(err));
    printf(" in %.2f s\n", (t1 - t0) / 1e9);
    CHECK_EQ(fflush(stdout), 0);

    CHECK_OK(pthread_mutex_lock(&mu));
    go = 1;
    CHECK_OK(pthread_cond_broadcast(&go_cv));
    CHECK_OK(pthread_mutex_unlock(&mu));
    for (long i = 0; i < k; ++i) CHECK_OK(pthread_join(t[i], NULL));
    CHECK_EQ(ran, k);
    CHECK_OK(pthread_attr_destroy(&attr));
    free(t);
    if (err) {
        printf("released and joined all %ld created threads; exit 2\n", k);
        return 2;
    }
    printf("ok many_threads %ld threads with %ld-byte stacks, %.2f s total\n", n, stack,
           (now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
    return 0;
}
