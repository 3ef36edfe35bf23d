/* mutex_timedlock.c - pthread_mutex_timedlock(3p) (absolute CLOCK_REALTIME
 * deadline) and pthread_mutex_clocklock (POSIX.1-2024), while another thread
 * holds the mutex:
 *  - deadline ~50 ms ahead: ETIMEDOUT, not before the deadline, < 1 s late;
 *  - deadline already past: ETIMEDOUT at once; but a free mutex is locked
 *    ("under no circumstance shall the function fail with a timeout if the
 *    mutex can be locked immediately");
 *  - tv_nsec >= 1e9 or < 0 when the call would block: EINVAL;
 *  - the holder unlocks at ~30 ms, deadline 5 s ahead: returns 0 early;
 *  - ERRORCHECK relocked by its owner: EDEADLK;
 *  - pthread_mutex_clocklock(CLOCK_MONOTONIC, ~50 ms): ETIMEDOUT on that clock.
 */
#include "check.h"

#include <pthread.h>
#include <semaphore.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static sem_t held, release;

static void *holder(void *arg) {
    long hold_ms = (long)arg; /* 0: until release is posted */
    CHECK_OK(pthread_mutex_lock(&mu));
    CHECK_SYS(sem_post(&held));
    if (hold_ms) sleep_ms(hold_ms);
    else
        while (sem_wait(&release) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_mutex_unlock(&mu));
    return NULL;
}

static pthread_t start_holder(long hold_ms) {
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, holder, (void *)hold_ms));
    while (sem_wait(&held) == -1) CHECK_EQ(errno, EINTR);
    return t;
}

/* Timed lock with a deadline ms ahead on clock; checks the timeout timing. */
static void expect_timeout(clockid_t clock, long ms) {
    struct timespec dl = deadline_ms(clock, ms);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    if (clock == CLOCK_REALTIME) CHECK_RC(pthread_mutex_timedlock(&mu, &dl), ETIMEDOUT);
    else CHECK_RC(pthread_mutex_clocklock(&mu, clock, &dl), ETIMEDOUT);
    CHECK_LE(ts_ns(dl), now_ns(clock)); /* not early */
    CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, (ms > 0 ? ms : 0) * NS_PER_MS + NS_PER_S);
}

int main(void) {
    WATCHDOG(60);
    CHECK_SYS(sem_init(&held, 0, 0));
    CHECK_SYS(sem_init(&release, 0, 0));

    /* free mutex, deadline in the past: locks */
    struct timespec past = deadline_ms(CLOCK_REALTIME, -1000);
    CHECK_OK(pthread_mutex_timedlock(&mu, &past));
    CHECK_OK(pthread_mutex_unlock(&mu));

    pthread_t t = start_holder(0);
    expect_timeout(CLOCK_REALTIME, 50);
    expect_timeout(CLOCK_REALTIME, -1000);
    expect_timeout(CLOCK_MONOTONIC, 50);
    struct timespec bad = deadline_ms(CLOCK_REALTIME, 50);
    bad.tv_nsec = 1000000000;
    CHECK_RC(pthread_mutex_timedlock(&mu, &bad), EINVAL);
    bad.tv_nsec = -1;
    CHECK_RC(pthread_mutex_timedlock(&mu, &bad), EINVAL);
    CHECK_SYS(sem_post(&release));
    CHECK_OK(pthread_join(t, NULL));

    /* holder lets go well before the deadline */
    t = start_holder(30);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    struct timespec dl = deadline_ms(CLOCK_REALTIME, 5000);
    CHECK_OK(pthread_mutex_timedlock(&mu, &dl));
    CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, 2 * NS_PER_S);
    CHECK_OK(pthread_mutex_unlock(&mu));
    CHECK_OK(pthread_join(t, NULL));

    /* ERRORCHECK owner */
    pthread_mutex_t ec;
    pthread_mutexattr_t a;
    CHECK_OK(pthread_mutexattr_init(&a));
    CHECK_OK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK));
    CHECK_OK(pthread_mutex_init(&ec, &a));
    CHECK_OK(pthread_mutex_lock(&ec));
    dl = deadline_ms(CLOCK_REALTIME, 50);
    CHECK_RC(pthread_mutex_timedlock(&ec, &dl), EDEADLK);
    CHECK_OK(pthread_mutex_unlock(&ec));
    CHECK_OK(pthread_mutex_destroy(&ec));
    CHECK_OK(pthread_mutexattr_destroy(&a));

    printf("ok mutex_timedlock ETIMEDOUT/EINVAL/EDEADLK on CLOCK_REALTIME and clocklock MONOTONIC\n");
    return 0;
}
