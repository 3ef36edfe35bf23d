/* cond_pingpong.c - microbenchmark: two threads hand a token back and forth
 * through one mutex and two condition variables (pthread_cond_wait(3p) /
 * pthread_cond_signal(3p)); one round trip is two handoffs. Checks every
 * return value and that the token made exactly 2 x N moves.
 * Prints "cond_pingpong ns_per_handoff X" and one JSON line.
 *
 * Usage: cond_pingpong [round_trips=50000]
 */
#include "../../tests/posix/progs/check.h"

#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t to_ping = PTHREAD_COND_INITIALIZER, to_pong = PTHREAD_COND_INITIALIZER;
static int turn; /* 0: ping's move, 1: pong's */
static long rounds, moves;

static void *pong(void *arg) {
    (void)arg;
    CHECK_OK(pthread_mutex_lock(&mu));
    for (long i = 0; i < rounds; ++i) {
        while (turn != 1) CHECK_OK(pthread_cond_wait(&to_pong, &mu));
        turn = 0;
        ++moves;
        CHECK_OK(pthread_cond_signal(&to_ping));
    }
    CHECK_OK(pthread_mutex_unlock(&mu));
    return NULL;
}

int main(int argc, char **argv) {
    WATCHDOG(60);
    rounds = argc > 1 ? atol(argv[1]) : 50000;
    CHECK(rounds >= 1);
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, pong, NULL));
    long long t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_OK(pthread_mutex_lock(&mu));
    for (long i = 0; i < rounds; ++i) {
        turn = 1;
        ++moves;
        CHECK_OK(pthread_cond_signal(&to_pong));
        while (turn != 0) CHECK_OK(pthread_cond_wait(&to_ping, &mu));
    }
    CHECK_OK(pthread_mutex_unlock(&mu));
    long long ns = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK_OK(pthread_join(t, NULL));
    CHECK_EQ(moves, 2 * rounds);

    double per = (double)ns / (double)(2 * rounds);
    printf("cond_pingpong ns_per_handoff %.0f\n", per);
    printf("{\"bench\":\"cond_pingpong\",\"round_trips\":%ld,\"handoffs\":%ld,"
           "\"total_ns\":%lld,\"ns_per_handoff\":%.1f}\n",
           rounds, 2 * rounds, ns, per);
    return 0;
}
