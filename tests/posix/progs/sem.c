/* sem.c - sem_init/sem_wait/sem_trywait/sem_timedwait/sem_post/sem_getvalue/
 * sem_destroy(3p), and sem_clockwait (POSIX.1-2024):
 *  - value > SEM_VALUE_MAX gives EINVAL;
 *  - getvalue follows posts and waits; trywait on 0 gives EAGAIN;
 *  - timedwait on 0 with a CLOCK_REALTIME deadline ~50 ms ahead gives
 *    ETIMEDOUT, not early and < 1 s late; clockwait(CLOCK_MONOTONIC) likewise;
 *  - timedwait with tv_nsec >= 1e9 when it would block gives EINVAL;
 *  - a blocked sem_wait / sem_timedwait returns 0 once another thread posts;
 *  - producer/consumer through a pair of semaphores (free slots, full slots)
 *    over an 8-slot ring: 20000 items arrive in order, none lost.
 * Not asserted: EOVERFLOW from sem_post at SEM_VALUE_MAX (Linux-only).
 */
#include "check.h"

#include <limits.h>
#include <pthread.h>
#include <semaphore.h>

enum { SLOTS = 8, ITEMS = 20000 };

static sem_t s, free_slots, full_slots;
static long ring[SLOTS];

static void *post_later(void *arg) {
    (void)arg;
    sleep_ms(30);
    CHECK_SYS(sem_post(&s));
    return NULL;
}

static void *producer(void *arg) {
    (void)arg;
    for (long i = 0; i < ITEMS; ++i) {
        while (sem_wait(&free_slots) == -1) CHECK_EQ(errno, EINTR);
        ring[i % SLOTS] = i + 1;
        CHECK_SYS(sem_post(&full_slots));
    }
    return NULL;
}

static void expect_value(int want) {
    int v = -1;
    CHECK_SYS(sem_getvalue(&s, &v));
    CHECK_EQ(v, want);
}

static void expect_timeout(clockid_t clock) {
    struct timespec dl = deadline_ms(clock, 50);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    if (clock == CLOCK_REALTIME) CHECK_ERR(sem_timedwait(&s, &dl), ETIMEDOUT);
    else CHECK_ERR(sem_clockwait(&s, clock, &dl), ETIMEDOUT);
    CHECK_LE(ts_ns(dl), now_ns(clock));
    CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, 50 * NS_PER_MS + NS_PER_S);
}

int main(void) {
    WATCHDOG(60);
    pthread_t t;

    if ((unsigned long)SEM_VALUE_MAX < UINT_MAX)
        CHECK_ERR(sem_init(&s, 0, (unsigned)SEM_VALUE_MAX + 1u), EINVAL);
    CHECK_SYS(sem_init(&s, 0, 0));
    expect_value(0);
    CHECK_ERR(sem_trywait(&s), EAGAIN);
    CHECK_SYS(sem_post(&s));
    CHECK_SYS(sem_post(&s));
    expect_value(2);
    CHECK_SYS(sem_trywait(&s));
    CHECK_SYS(sem_wait(&s));
    expect_value(0);

    expect_timeout(CLOCK_REALTIME);
    expect_timeout(CLOCK_MONOTONIC);
    struct timespec bad = deadline_ms(CLOCK_REALTIME, 50);
    bad.tv_nsec = 1000000000;
    CHECK_ERR(sem_timedwait(&s, &bad), EINVAL);

    CHECK_OK(pthread_create(&t, NULL, post_later, NULL));
    while (sem_wait(&s) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_join(t, NULL));
    CHECK_OK(pthread_create(&t, NULL, post_later, NULL));
    struct timespec dl = deadline_ms(CLOCK_REALTIME, 5000);
    CHECK_SYS(sem_timedwait(&s, &dl));
    CHECK_OK(pthread_join(t, NULL));
    expect_value(0);
    CHECK_SYS(sem_destroy(&s));

    CHECK_SYS(sem_init(&free_slots, 0, SLOTS));
    CHECK_SYS(sem_init(&full_slots, 0, 0));
    CHECK_OK(pthread_create(&t, NULL, producer, NULL));
    long sum = 0;
    for (long i = 0; i < ITEMS; ++i) {
        while (sem_wait(&full_slots) == -1) CHECK_EQ(errno, EINTR);
        CHECK_EQ(ring[i % SLOTS], i + 1);
        sum += ring[i % SLOTS];
        CHECK_SYS(sem_post(&free_slots));
    }
    CHECK_OK(pthread_join(t, NULL));
    CHECK_EQ(sum, (long)ITEMS * (ITEMS + 1) / 2);
    CHECK_SYS(sem_destroy(&free_slots));
    CHECK_SYS(sem_destroy(&full_slots));

    printf("ok sem trywait/timedwait/clockwait/getvalue, %d items through a semaphore pair\n",
           ITEMS);
    return 0;
}
