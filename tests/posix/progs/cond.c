/* cond.c - pthread_cond_wait(3p), pthread_cond_signal(3p),
 * pthread_cond_broadcast(3p), pthread_condattr_getclock/setclock(3p):
 *  - PTHREAD_COND_INITIALIZER works without pthread_cond_init;
 *  - with 6 threads blocked in pthread_cond_wait (predicate loop on a token
 *    count), each signal + token lets exactly one more thread through;
 *    broadcast + "open" lets all the rest through;
 *  - wait returns with the mutex held (ERRORCHECK unlock succeeds);
 *  - a signal with no waiter is not remembered: a later timed wait times out;
 *  - two threads alternate 1000 times through one condvar and a turn flag;
 *  - condattr clock: default CLOCK_REALTIME, setclock(MONOTONIC) then getclock
 *    returns it, a CPU-time clock gives EINVAL; pshared default PRIVATE.
 */
#include "check.h"

#include <pthread.h>

enum { WAITERS = 6, TURNS = 1000 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int waiting, tokens, open_gate, passed;

static void *waiter(void *arg) {
    (void)arg;
    CHECK_OK(pthread_mutex_lock(&mu));
    ++waiting;
    while (tokens == 0 && !open_gate) CHECK_OK(pthread_cond_wait(&cv, &mu));
    if (!open_gate) --tokens;
    ++passed;
    CHECK_OK(pthread_mutex_unlock(&mu));
    return NULL;
}

/* Wait (bounded) until passed == want, then check it stays there for 20 ms. */
static void expect_passed(int want) {
    for (int i = 0; i < 2000; ++i) {
        CHECK_OK(pthread_mutex_lock(&mu));
        int p = passed;
        CHECK_OK(pthread_mutex_unlock(&mu));
        if (p >= want) break;
        sleep_ms(1);
    }
    sleep_ms(20);
    CHECK_OK(pthread_mutex_lock(&mu));
    CHECK_EQ(passed, want);
    CHECK_OK(pthread_mutex_unlock(&mu));
}

static pthread_mutex_t ec;
static pthread_cond_t turn_cv;
static int turn, alternations;

static void *alternate(void *arg) {
    int me = (int)(long)arg;
    for (int i = 0; i < TURNS; ++i) {
        CHECK_OK(pthread_mutex_lock(&ec));
        while (turn != me) CHECK_OK(pthread_cond_wait(&turn_cv, &ec));
        ++alternations;
        turn = !me;
        CHECK_OK(pthread_cond_broadcast(&turn_cv));
        CHECK_OK(pthread_mutex_unlock(&ec)); /* EPERM if wait had not relocked */
    }
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t[WAITERS];

    /* signal releases one, broadcast the rest */
    for (int i = 0; i < WAITERS; ++i) CHECK_OK(pthread_create(&t[i], NULL, waiter, NULL));
    int in_wait = 0; /* seen under mu, waiting == 6 means all 6 are inside wait */
    for (int i = 0; i < 5000 && in_wait != WAITERS; ++i) {
        CHECK_OK(pthread_mutex_lock(&mu));
        in_wait = waiting;
        CHECK_OK(pthread_mutex_unlock(&mu));
        if (in_wait != WAITERS) sleep_ms(1);
    }
    CHECK_EQ(in_wait, WAITERS);
    for (int k = 1; k <= 2; ++k) {
        CHECK_OK(pthread_mutex_lock(&mu));
        ++tokens;
        CHECK_OK(pthread_cond_signal(&cv));
        CHECK_OK(pthread_mutex_unlock(&mu));
        expect_passed(k);
    }
    CHECK_OK(pthread_mutex_lock(&mu));
    open_gate = 1;
    CHECK_OK(pthread_cond_broadcast(&cv));
    CHECK_OK(pthread_mutex_unlock(&mu));
    for (int i = 0; i < WAITERS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    CHECK_EQ(passed, WAITERS);

    /* no memory: signal and broadcast with nobody waiting */
    CHECK_OK(pthread_cond_signal(&cv));
    CHECK_OK(pthread_cond_broadcast(&cv));
    CHECK_OK(pthread_mutex_lock(&mu));
    struct timespec dl = deadline_ms(CLOCK_REALTIME, 30);
    CHECK_RC(pthread_cond_timedwait(&cv, &mu, &dl), ETIMEDOUT);
    CHECK_OK(pthread_mutex_unlock(&mu));

    /* alternation with an error-checking mutex */
    pthread_mutexattr_t ma;
    CHECK_OK(pthread_mutexattr_init(&ma));
    CHECK_OK(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK));
    CHECK_OK(pthread_mutex_init(&ec, &ma));
    CHECK_OK(pthread_cond_init(&turn_cv, NULL));
    CHECK_OK(pthread_create(&t[0], NULL, alternate, (void *)0L));
    CHECK_OK(pthread_create(&t[1], NULL, alternate, (void *)1L));
    CHECK_OK(pthread_join(t[0], NULL));
    CHECK_OK(pthread_join(t[1], NULL));
    CHECK_EQ(alternations, 2 * TURNS);
    CHECK_OK(pthread_cond_destroy(&turn_cv));
    CHECK_OK(pthread_mutex_destroy(&ec));
    CHECK_OK(pthread_mutexattr_destroy(&ma));

    /* condattr */
    pthread_condattr_t ca;
    clockid_t clk;
    int pshared;
    CHECK_OK(pthread_condattr_init(&ca));
    CHECK_OK(pthread_condattr_getclock(&ca, &clk));
    CHECK_EQ(clk, CLOCK_REALTIME);
    CHECK_OK(pthread_condattr_getpshared(&ca, &pshared));
    CHECK_EQ(pshared, PTHREAD_PROCESS_PRIVATE);
    CHECK_OK(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC));
    CHECK_OK(pthread_condattr_getclock(&ca, &clk));
    CHECK_EQ(clk, CLOCK_MONOTONIC);
    CHECK_RC(pthread_condattr_setclock(&ca, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
    CHECK_OK(pthread_condattr_getclock(&ca, &clk));
    CHECK_EQ(clk, CLOCK_MONOTONIC);
    CHECK_OK(pthread_condattr_setclock(&ca, CLOCK_REALTIME));
    CHECK_OK(pthread_condattr_getclock(&ca, &clk));
    CHECK_EQ(clk, CLOCK_REALTIME);
    CHECK_OK(pthread_condattr_destroy(&ca));

    printf("ok cond signal/broadcast/predicate/%d alternations/condattr\n", alternations);
    return 0;
}
