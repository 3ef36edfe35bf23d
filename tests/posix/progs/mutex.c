/* mutex.c - pthread_mutex_lock(3p), pthread_mutex_trylock(3p),
 * pthread_mutex_unlock(3p), pthread_mutexattr_settype(3p):
 *  - PTHREAD_MUTEX_INITIALIZER works without pthread_mutex_init;
 *  - trylock gives EBUSY when the mutex is held by another thread, or (for
 *    NORMAL and ERRORCHECK) by the caller itself;
 *  - RECURSIVE: lock 3x + trylock succeed for the owner, another thread gets
 *    EBUSY until all 4 unlocks; unlock by a non-owner gives EPERM;
 *  - ERRORCHECK: relock by the owner gives EDEADLK; unlock by a non-owner or
 *    of an unlocked mutex gives EPERM;
 *  - a blocked pthread_mutex_lock returns once the holder unlocks, and sees
 *    the holder's writes;
 *  - gettype returns what settype stored (default PTHREAD_MUTEX_DEFAULT); a
 *    bad type gives EINVAL;
 *  - 8 threads x 50000 increments under one mutex give the exact total.
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { THREADS = 8, INCREMENTS = 50000 };

static pthread_mutex_t static_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t *target;
static long counter;

static void *trylock_busy(void *arg) {
    (void)arg;
    return (void *)(long)pthread_mutex_trylock(target);
}

static void *trylock_then_unlock(void *arg) {
    (void)arg;
    int rc = pthread_mutex_trylock(target);
    if (rc == 0) CHECK_OK(pthread_mutex_unlock(target));
    return (void *)(long)rc;
}

static void *unlock_not_owner(void *arg) {
    (void)arg;
    return (void *)(long)pthread_mutex_unlock(target);
}

/* Run fn in a new thread and return its result. */
static long in_thread(void *(*fn)(void *)) {
    pthread_t t;
    void *ret;
    CHECK_OK(pthread_create(&t, NULL, fn, NULL));
    CHECK_OK(pthread_join(t, &ret));
    return (long)ret;
}

static void init_type(pthread_mutex_t *m, int type) {
    pthread_mutexattr_t a;
    int got;
    CHECK_OK(pthread_mutexattr_init(&a));
    CHECK_OK(pthread_mutexattr_settype(&a, type));
    CHECK_OK(pthread_mutexattr_gettype(&a, &got));
    CHECK_EQ(got, type);
    CHECK_OK(pthread_mutex_init(m, &a));
    CHECK_OK(pthread_mutexattr_destroy(&a));
}

static atomic_int holder_wrote;

static void *hold_then_release(void *arg) {
    (void)arg;
    CHECK_OK(pthread_mutex_lock(target));
    sleep_ms(30);
    counter = 12345;
    atomic_store(&holder_wrote, 1);
    CHECK_OK(pthread_mutex_unlock(target));
    return NULL;
}

static void *add_many(void *arg) {
    (void)arg;
    for (int i = 0; i < INCREMENTS; ++i) {
        CHECK_OK(pthread_mutex_lock(target));
        ++counter;
        CHECK_OK(pthread_mutex_unlock(target));
    }
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_mutex_t m;
    pthread_mutexattr_t a;
    int type;

    /* attributes */
    CHECK_OK(pthread_mutexattr_init(&a));
    CHECK_OK(pthread_mutexattr_gettype(&a, &type));
    CHECK_EQ(type, PTHREAD_MUTEX_DEFAULT);
    CHECK_RC(pthread_mutexattr_settype(&a, 12345), EINVAL);
    CHECK_OK(pthread_mutexattr_destroy(&a));

    /* static initializer, NORMAL trylock */
    target = &static_mu;
    CHECK_OK(pthread_mutex_lock(&static_mu));
    CHECK_RC(in_thread(trylock_busy), EBUSY);
    CHECK_OK(pthread_mutex_unlock(&static_mu));
    CHECK_OK(in_thread(trylock_then_unlock));
    init_type(&m, PTHREAD_MUTEX_NORMAL);
    CHECK_OK(pthread_mutex_trylock(&m));
    CHECK_RC(pthread_mutex_trylock(&m), EBUSY); /* held by the caller itself */
    CHECK_OK(pthread_mutex_unlock(&m));
    CHECK_OK(pthread_mutex_destroy(&m));

    /* RECURSIVE */
    init_type(&m, PTHREAD_MUTEX_RECURSIVE);
    target = &m;
    CHECK_OK(pthread_mutex_lock(&m));
    CHECK_OK(pthread_mutex_lock(&m));
    CHECK_OK(pthread_mutex_lock(&m));
    CHECK_OK(pthread_mutex_trylock(&m));
    CHECK_RC(in_thread(unlock_not_owner), EPERM);
    for (int i = 0; i < 4; ++i) {
        CHECK_RC(in_thread(trylock_busy), EBUSY);
        CHECK_OK(pthread_mutex_unlock(&m));
    }
    CHECK_OK(in_thread(trylock_then_unlock));
    CHECK_OK(pthread_mutex_destroy(&m));

    /* ERRORCHECK */
    init_type(&m, PTHREAD_MUTEX_ERRORCHECK);
    CHECK_RC(pthread_mutex_unlock(&m), EPERM); /* not locked */
    CHECK_OK(pthread_mutex_lock(&m));
    CHECK_RC(pthread_mutex_lock(&m), EDEADLK);
    CHECK_RC(pthread_mutex_trylock(&m), EBUSY);
    CHECK_RC(in_thread(unlock_not_owner), EPERM);
    CHECK_RC(in_thread(trylock_busy), EBUSY);
    CHECK_OK(pthread_mutex_unlock(&m));
    CHECK_RC(pthread_mutex_unlock(&m), EPERM);
    CHECK_OK(pthread_mutex_destroy(&m));

    /* a blocked lock returns once the holder unlocks */
    for (int type_i = 0; type_i < 3; ++type_i) {
        static const int types[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
                                    PTHREAD_MUTEX_ERRORCHECK};
        init_type(&m, types[type_i]);
        target = &m;
        counter = 0;
        atomic_store(&holder_wrote, 0);
        pthread_t t;
        CHECK_OK(pthread_create(&t, NULL, hold_then_release, NULL));
        for (int i = 0; i < 1000 && pthread_mutex_trylock(&m) == 0; ++i) { /* until held */
            CHECK_OK(pthread_mutex_unlock(&m));
            sleep_ms(1);
        }
        CHECK_OK(pthread_mutex_lock(&m)); /* blocks ~30 ms */
        CHECK_EQ(atomic_load(&holder_wrote), 1);
        CHECK_EQ(counter, 12345);
        CHECK_OK(pthread_mutex_unlock(&m));
        CHECK_OK(pthread_join(t, NULL));
        CHECK_OK(pthread_mutex_destroy(&m));
    }

    /* exact total under contention */
    pthread_t ts[THREADS];
    CHECK_OK(pthread_mutex_init(&m, NULL));
    target = &m;
    counter = 0;
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_create(&ts[i], NULL, add_many, NULL));
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_join(ts[i], NULL));
    CHECK_EQ(counter, (long)THREADS * INCREMENTS);
    CHECK_OK(pthread_mutex_destroy(&m));

    printf("ok mutex normal/recursive/errorcheck, counter %ld\n", counter);
    return 0;
}
