/* spin.c - pthread_spin_init/lock/trylock/unlock/destroy(3p):
 *  - trylock on a held lock gives EBUSY, from the holder and from another
 *    thread; after unlock trylock succeeds;
 *  - 4 threads x 100000 increments under one spinlock give the exact total.
 * (Critical sections are short and never block, so a cooperative scheduler
 * can run this too.)
 */
#include "check.h"

#include <pthread.h>

enum { THREADS = 4, INCREMENTS = 100000 };

static pthread_spinlock_t lock;
static long counter;

static void *try_from_other(void *arg) {
    (void)arg;
    return (void *)(long)pthread_spin_trylock(&lock);
}

static void *add_many(void *arg) {
    (void)arg;
    for (int i = 0; i < INCREMENTS; ++i) {
        CHECK_OK(pthread_spin_lock(&lock));
        ++counter;
        CHECK_OK(pthread_spin_unlock(&lock));
    }
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t[THREADS];
    void *ret;

    CHECK_OK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE));
    CHECK_OK(pthread_spin_lock(&lock));
    CHECK_RC(pthread_spin_trylock(&lock), EBUSY);
    CHECK_OK(pthread_create(&t[0], NULL, try_from_other, NULL));
    CHECK_OK(pthread_join(t[0], &ret));
    CHECK_RC((long)ret, EBUSY);
    CHECK_OK(pthread_spin_unlock(&lock));
    CHECK_OK(pthread_spin_trylock(&lock));
    CHECK_OK(pthread_spin_unlock(&lock));

    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_create(&t[i], NULL, add_many, NULL));
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    CHECK_EQ(counter, (long)THREADS * INCREMENTS);
    CHECK_OK(pthread_spin_destroy(&lock));

    printf("ok spin trylock EBUSY, counter %ld\n", counter);
    return 0;
}
