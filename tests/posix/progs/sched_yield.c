/* sched_yield.c - sched_yield(3p): returns 0, and lets another thread run.
 *  - alone, sched_yield returns 0;
 *  - two threads pass a turn flag back and forth 2000 times, each waiting for
 *    its turn only by calling sched_yield (no blocking call): this finishes
 *    only if yielding lets the other thread run (bounded: 10 s).
 */
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

enum { TURNS = 2000 };

static atomic_int turn;
static long long give_up_ns;

static void *player(void *arg) {
    int me = (int)(long)arg;
    long yields = 0;
    for (int i = 0; i < TURNS; ++i) {
        while (atomic_load(&turn) != me) {
            CHECK_OK(sched_yield());
            if (++yields % 1024 == 0 && now_ns(CLOCK_MONOTONIC) > give_up_ns)
                FAIL("turn %d never came back after %ld yields (got turn=%d, want %d)", i,
                     yields, atomic_load(&turn), me);
        }
        atomic_store(&turn, !me);
    }
    return (void *)yields;
}

int main(void) {
    WATCHDOG(30);
    pthread_t t[2];
    void *y[2];

    CHECK_OK(sched_yield());
    give_up_ns = now_ns(CLOCK_MONOTONIC) + 10 * NS_PER_S;
    long long t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_OK(pthread_create(&t[0], NULL, player, (void *)0L));
    CHECK_OK(pthread_create(&t[1], NULL, player, (void *)1L));
    CHECK_OK(pthread_join(t[0], &y[0]));
    CHECK_OK(pthread_join(t[1], &y[1]));
    CHECK_EQ(atomic_load(&turn), 0);

    printf("ok sched_yield %d alternations in %.1f ms (%ld + %ld yields)\n", 2 * TURNS,
           (now_ns(CLOCK_MONOTONIC) - t0) / 1e6, (long)y[0], (long)y[1]);
    return 0;
}
