/* cond_timedwait.c - pthread_cond_timedwait(3p) on a condvar with the default
 * clock (CLOCK_REALTIME) and one with pthread_condattr_setclock(CLOCK_MONOTONIC),
 * plus pthread_cond_clockwait (POSIX.1-2024):
 *  - deadline ~50 ms ahead, nobody signals: ETIMEDOUT, the condvar's clock
 *    has reached the deadline (not early), less than 1 s late, and the mutex
 *    is held again (ERRORCHECK unlock returns 0);
 *  - a deadline already past: ETIMEDOUT at once;
 *  - signalled at ~30 ms with a 5 s deadline: returns 0 early;
 *  - tv_nsec >= 1e9: EINVAL;
 *  - pthread_cond_clockwait(CLOCK_MONOTONIC) on a CLOCK_REALTIME condvar and
 *    (CLOCK_REALTIME) on a MONOTONIC one time out on the clock passed.
 * (A monotonic deadline read as realtime would return at once: "early"; a
 * realtime one read as monotonic would wait for decades: the watchdog.)
 */
#include "check.h"

#include <pthread.h>

static pthread_mutex_t mu;
static pthread_cond_t cv;
static int flag;

/* One timed wait, deadline ms ahead on clock; use clockwait if clockwait != 0. */
static void expect_timeout(clockid_t clock, long ms, int clockwait) {
    CHECK_OK(pthread_mutex_lock(&mu));
    struct timespec dl = deadline_ms(clock, ms);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    int rc = 0;
    while (rc == 0) /* flag is never set here: any 0 is a spurious wakeup */
        rc = clockwait ? pthread_cond_clockwait(&cv, &mu, clock, &dl)
                       : pthread_cond_timedwait(&cv, &mu, &dl);
    CHECK_RC(rc, ETIMEDOUT);
    CHECK_LE(ts_ns(dl), now_ns(clock));
    CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, (ms > 0 ? ms : 0) * NS_PER_MS + NS_PER_S);
    CHECK_OK(pthread_mutex_unlock(&mu)); /* EPERM unless the wait relocked mu */
}

static void *signal_later(void *arg) {
    (void)arg;
    sleep_ms(30);
    CHECK_OK(pthread_mutex_lock(&mu));
    flag = 1;
    CHECK_OK(pthread_cond_signal(&cv));
    CHECK_OK(pthread_mutex_unlock(&mu));
    return NULL;
}

static void expect_signalled(clockid_t clock) {
    pthread_t t;
    flag = 0;
    CHECK_OK(pthread_mutex_lock(&mu));
    CHECK_OK(pthread_create(&t, NULL, signal_later, NULL));
    struct timespec dl = deadline_ms(clock, 5000);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    while (!flag) CHECK_OK(pthread_cond_timedwait(&cv, &mu, &dl));
    CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, 2 * NS_PER_S);
    CHECK_OK(pthread_mutex_unlock(&mu));
    CHECK_OK(pthread_join(t, NULL));
}

static void run(clockid_t clock) {
    pthread_condattr_t ca;
    clockid_t other = clock == CLOCK_REALTIME ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    CHECK_OK(pthread_condattr_init(&ca));
    if (clock != CLOCK_REALTIME) CHECK_OK(pthread_condattr_setclock(&ca, clock));
    CHECK_OK(pthread_cond_init(&cv, &ca));
    CHECK_OK(pthread_condattr_destroy(&ca));

    expect_timeout(clock, 50, 0);
    expect_timeout(clock, -1000, 0);
    expect_signalled(clock);
    expect_timeout(other, 50, 1);
    expect_timeout(clock, 50, 1);

    CHECK_OK(pthread_mutex_lock(&mu));
    struct timespec bad = deadline_ms(clock, 50);
    bad.tv_nsec = 1000000000;
    CHECK_RC(pthread_cond_timedwait(&cv, &mu, &bad), EINVAL);
    CHECK_OK(pthread_mutex_unlock(&mu));
    CHECK_OK(pthread_cond_destroy(&cv));
}

int main(void) {
    WATCHDOG(20);
    pthread_mutexattr_t ma;
    CHECK_OK(pthread_mutexattr_init(&ma));
    CHECK_OK(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK));
    CHECK_OK(pthread_mutex_init(&mu, &ma));
    CHECK_OK(pthread_mutexattr_destroy(&ma));

    run(CLOCK_REALTIME);
    run(CLOCK_MONOTONIC);

    CHECK_OK(pthread_mutex_destroy(&mu));
    printf("ok cond_timedwait ETIMEDOUT/0/EINVAL on CLOCK_REALTIME and CLOCK_MONOTONIC\n");
    return 0;
}
