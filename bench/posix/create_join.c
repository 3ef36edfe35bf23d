/* create_join.c - microbenchmark: pthread_create(3p) + pthread_join(3p) of N
 * threads one after another (default attributes; each thread returns its
 * argument, which join must give back).
 * Prints "create_join ns_per_thread X" and one JSON line.
 *
 * Usage: create_join [threads=50000]
 */
#include "../../tests/posix/progs/check.h"

#include <pthread.h>
#include <stdint.h>

static void *identity(void *arg) { return arg; }

int main(int argc, char **argv) {
    WATCHDOG(60);
    long n = argc > 1 ? atol(argv[1]) : 50000;
    CHECK(n >= 1);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    for (intptr_t i = 0; i < n; ++i) {
        pthread_t t;
        void *ret;
        CHECK_OK(pthread_create(&t, NULL, identity, (void *)i));
        CHECK_OK(pthread_join(t, &ret));
        CHECK_EQ((intptr_t)ret, i);
    }
    long long ns = now_ns(CLOCK_MONOTONIC) - t0;

    double per = (double)ns / (double)n;
    printf("create_join ns_per_thread %.0f\n", per);
    printf("{\"bench\":\"create_join\",\"threads\":%ld,\"total_ns\":%lld,\"ns_per_thread\":%.1f}\n",
           n, ns, per);
    return 0;
}
