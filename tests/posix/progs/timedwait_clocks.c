/* timedwait_clocks.c - scenario: many concurrent pthread_cond_timedwait(3p)
 * calls on two condvars, one on CLOCK_REALTIME (default) and one on
 * CLOCK_MONOTONIC (pthread_condattr_setclock(3p)). Per clock, 20 threads wait
 * on the shared condvar with deadlines 20, 30, ... 210 ms ahead, in the
 * predicate loop with a fixed absolute deadline; one more thread per clock
 * has a 5 s deadline and is released (predicate + broadcast) at ~100 ms.
 *  - every deadline thread returns ETIMEDOUT, not before its deadline on the
 *    condvar's clock, less than 1 s after it, with the mutex held;
 *  - the released thread returns 0 well before its deadline (< 1 s);
 *  - the broadcasts it takes wake the others spuriously (from the predicate's
 *    point of view): they must go back to waiting until their own deadline.
 */
#include "check.h"

#include <pthread.h>

enum { PER_CLOCK = 20, LUCKY = PER_CLOCK };

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    clockid_t clock;
    int released;
} waitq_t;

typedef struct {
    waitq_t *q;
    int index;
    long long late_ns;
} waiter_t;

static void *waiter(void *arg) {
    waiter_t *w = arg;
    waitq_t *q = w->q;
    int lucky = w->index == LUCKY;
    CHECK_OK(pthread_mutex_lock(&q->mu));
    struct timespec dl = deadline_ms(q->clock, lucky ? 5000 : 20 + 10 * w->index);
    int rc = 0;
    while (rc == 0 && !(lucky && q->released)) rc = pthread_cond_timedwait(&q->cv, &q->mu, &dl);
    long long now = now_ns(q->clock);
    CHECK_OK(pthread_mutex_unlock(&q->mu)); /* ERRORCHECK: EPERM unless held */
    if (lucky) {
        CHECK_RC(rc, 0);
        CHECK_LE(now + 4 * NS_PER_S, ts_ns(dl)); /* returned within ~1 s */
    } else {
        CHECK_RC(rc, ETIMEDOUT);
        CHECK_LE(ts_ns(dl), now);
        CHECK_LE(now - ts_ns(dl), NS_PER_S);
    }
    w->late_ns = now - ts_ns(dl);
    return NULL;
}

static void init_queue(waitq_t *q, clockid_t clock) {
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    CHECK_OK(pthread_mutexattr_init(&ma));
    CHECK_OK(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK));
    CHECK_OK(pthread_mutex_init(&q->mu, &ma));
    CHECK_OK(pthread_condattr_init(&ca));
    CHECK_OK(pthread_condattr_setclock(&ca, clock));
    CHECK_OK(pthread_cond_init(&q->cv, &ca));
    CHECK_OK(pthread_condattr_destroy(&ca));
    CHECK_OK(pthread_mutexattr_destroy(&ma));
    q->clock = clock;
    q->released = 0;
}

int main(void) {
    WATCHDOG(20);
    waitq_t q[2];
    waiter_t w[2][PER_CLOCK + 1];
    pthread_t t[2][PER_CLOCK + 1];
    init_queue(&q[0], CLOCK_REALTIME);
    init_queue(&q[1], CLOCK_MONOTONIC);

    long long t0 = now_ns(CLOCK_MONOTONIC);
    for (int c = 0; c < 2; ++c)
        for (int i = 0; i <= PER_CLOCK; ++i) {
            w[c][i] = (waiter_t){.q = &q[c], .index = i};
            CHECK_OK(pthread_create(&t[c][i], NULL, waiter, &w[c][i]));
        }
    sleep_ms(100);
    for (int c = 0; c < 2; ++c) {
        CHECK_OK(pthread_mutex_lock(&q[c].mu));
        q[c].released = 1;
        CHECK_OK(pthread_cond_broadcast(&q[c].cv));
        CHECK_OK(pthread_mutex_unlock(&q[c].mu));
    }
    long long max_late = 0;
    for (int c = 0; c < 2; ++c)
        for (int i = 0; i <= PER_CLOCK; ++i) {
            CHECK_OK(pthread_join(t[c][i], NULL));
            if (i != LUCKY && w[c][i].late_ns > max_late) max_late = w[c][i].late_ns;
        }
    long long total = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK_LE(total, 2 * NS_PER_S);

    printf("ok timedwait_clocks %d timeouts on REALTIME+MONOTONIC, max late %.2f ms, "
           "released waiters returned 0, %.0f ms total\n",
           2 * PER_CLOCK, max_late / 1e6, total / 1e6);
    return 0;
}
