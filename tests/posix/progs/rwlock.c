/* rwlock.c - pthread_rwlock_rdlock/wrlock/tryrdlock/trywrlock/timedrdlock/
 * timedwrlock/unlock(3p):
 *  - PTHREAD_RWLOCK_INITIALIZER works without pthread_rwlock_init;
 *  - 8 readers hold the read lock at the same time (each waits, bounded, until
 *    all 8 are inside);
 *  - while a writer holds it: tryrdlock and trywrlock give EBUSY, timedrdlock
 *    and timedwrlock (~50 ms, CLOCK_REALTIME) give ETIMEDOUT, not early;
 *  - while a reader holds it (no writer waiting): tryrdlock succeeds,
 *    trywrlock gives EBUSY, timedwrlock gives ETIMEDOUT;
 *  - writers exclude readers and each other: 4 writers bump two counters
 *    together, 4 readers never see them differ; exact totals at the end.
 * Not asserted: EDEADLK for relocking by the owner (POSIX "may fail").
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { READERS = 8, WRITERS = 4, ROUNDS = 20000 };

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int inside, max_inside;

static void *reader_together(void *arg) {
    (void)arg;
    CHECK_OK(pthread_rwlock_rdlock(&rw));
    atomic_fetch_add(&inside, 1);
    for (int i = 0; i < 5000 && atomic_load(&inside) < READERS; ++i) sleep_ms(1);
    int n = atomic_load(&inside);
    int m = atomic_load(&max_inside);
    while (n > m && !atomic_compare_exchange_weak(&max_inside, &m, n)) {}
    CHECK_OK(pthread_rwlock_unlock(&rw));
    return NULL;
}

/* Try-locks from another thread: returns the four results packed in a long. */
static void *probe(void *arg) {
    (void)arg;
    int rd = pthread_rwlock_tryrdlock(&rw);
    if (rd == 0) CHECK_OK(pthread_rwlock_unlock(&rw));
    int wr = pthread_rwlock_trywrlock(&rw);
    if (wr == 0) CHECK_OK(pthread_rwlock_unlock(&rw));
    struct timespec dl = deadline_ms(CLOCK_REALTIME, 50);
    int trd = pthread_rwlock_timedrdlock(&rw, &dl);
    if (trd == 0) CHECK_OK(pthread_rwlock_unlock(&rw));
    else CHECK_LE(ts_ns(dl), now_ns(CLOCK_REALTIME));
    dl = deadline_ms(CLOCK_REALTIME, 50);
    int twr = pthread_rwlock_timedwrlock(&rw, &dl);
    if (twr == 0) CHECK_OK(pthread_rwlock_unlock(&rw));
    else CHECK_LE(ts_ns(dl), now_ns(CLOCK_REALTIME));
    return (void *)(long)(rd | wr << 8 | trd << 16 | (long)twr << 24);
}

static void expect_probe(int rd, int wr, int trd, int twr) {
    pthread_t t;
    void *ret;
    CHECK_OK(pthread_create(&t, NULL, probe, NULL));
    CHECK_OK(pthread_join(t, &ret));
    long r = (long)ret;
    CHECK_RC(r & 0xff, rd);
    CHECK_RC(r >> 8 & 0xff, wr);
    CHECK_RC(r >> 16 & 0xff, trd);
    CHECK_RC(r >> 24 & 0xff, twr);
}

static long a, b;

static void *writer(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; ++i) {
        CHECK_OK(pthread_rwlock_wrlock(&rw));
        ++a;
        ++b;
        CHECK_OK(pthread_rwlock_unlock(&rw));
    }
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; ++i) {
        CHECK_OK(pthread_rwlock_rdlock(&rw));
        CHECK_EQ(a, b);
        CHECK_OK(pthread_rwlock_unlock(&rw));
    }
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t[READERS + WRITERS];

    for (int i = 0; i < READERS; ++i) CHECK_OK(pthread_create(&t[i], NULL, reader_together, NULL));
    for (int i = 0; i < READERS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    CHECK_EQ(atomic_load(&max_inside), READERS);

    CHECK_OK(pthread_rwlock_wrlock(&rw));
    expect_probe(EBUSY, EBUSY, ETIMEDOUT, ETIMEDOUT);
    CHECK_OK(pthread_rwlock_unlock(&rw));

    CHECK_OK(pthread_rwlock_rdlock(&rw));
    expect_probe(0, EBUSY, 0, ETIMEDOUT);
    CHECK_OK(pthread_rwlock_unlock(&rw));

    expect_probe(0, 0, 0, 0); /* free */

    pthread_rwlock_t dyn;
    CHECK_OK(pthread_rwlock_init(&dyn, NULL));
    CHECK_OK(pthread_rwlock_rdlock(&dyn));
    CHECK_OK(pthread_rwlock_rdlock(&dyn)); /* a reader may hold it twice */
    CHECK_RC(pthread_rwlock_trywrlock(&dyn), EBUSY);
    CHECK_OK(pthread_rwlock_unlock(&dyn));
    CHECK_OK(pthread_rwlock_unlock(&dyn));
    CHECK_OK(pthread_rwlock_trywrlock(&dyn));
    CHECK_RC(pthread_rwlock_tryrdlock(&dyn), EBUSY);
    CHECK_OK(pthread_rwlock_unlock(&dyn));
    CHECK_OK(pthread_rwlock_destroy(&dyn));

    for (int i = 0; i < READERS + WRITERS; ++i)
        CHECK_OK(pthread_create(&t[i], NULL, i < WRITERS ? writer : reader, NULL));
    for (int i = 0; i < READERS + WRITERS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    CHECK_EQ(a, (long)WRITERS * ROUNDS);
    CHECK_EQ(b, (long)WRITERS * ROUNDS);

    printf("ok rwlock %d readers at once, writer exclusion, try/timed EBUSY/ETIMEDOUT\n",
           READERS);
    return 0;
}
