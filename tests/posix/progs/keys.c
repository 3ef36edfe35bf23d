/* keys.c - pthread_key_create(3p), pthread_key_delete(3p),
 * pthread_getspecific(3p), pthread_setspecific(3p):
 *  - a new key reads NULL in every thread; values are per thread;
 *  - at thread exit (return or pthread_exit) the destructor runs once with the
 *    thread's value; not for a NULL value (never set, or set back to NULL);
 *  - a destructor that sets a new value is called again (POSIX repeats up to
 *    PTHREAD_DESTRUCTOR_ITERATIONS rounds; here exactly 2 calls);
 *  - after pthread_key_delete no destructor runs for that key;
 *  - 64 keys at once (PTHREAD_KEYS_MAX >= 128) hold distinct values.
 */
#include "check.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

enum { THREADS = 8, KEYS = 64 };

static pthread_key_t key, again_key, deleted_key;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int calls[THREADS + 1];    /* destructor calls by value (1..THREADS) */
static int again_calls, deleted_calls;

static void destructor(void *v) {
    intptr_t i = (intptr_t)v;
    CHECK(i >= 1 && i <= THREADS);
    CHECK_OK(pthread_mutex_lock(&mu));
    ++calls[i];
    CHECK_OK(pthread_mutex_unlock(&mu));
}

static void again_destructor(void *v) {
    CHECK_OK(pthread_mutex_lock(&mu));
    int n = ++again_calls;
    CHECK_OK(pthread_mutex_unlock(&mu));
    if (n == 1) {
        CHECK_EQ((intptr_t)v, 1);
        CHECK_OK(pthread_setspecific(again_key, (void *)2)); /* one more round */
    } else {
        CHECK_EQ((intptr_t)v, 2);
    }
}

static void deleted_destructor(void *v) {
    (void)v;
    ++deleted_calls;
}

static void *worker(void *arg) {
    intptr_t i = (intptr_t)arg;
    CHECK(pthread_getspecific(key) == NULL);
    if (i % 4 == 0) return NULL; /* never set: no destructor call */
    CHECK_OK(pthread_setspecific(key, (void *)i));
    sleep_ms(1); /* let the others set theirs */
    CHECK_EQ((intptr_t)pthread_getspecific(key), i);
    if (i % 4 == 1) {
        CHECK_OK(pthread_setspecific(key, NULL)); /* set back to NULL: no call */
        return NULL;
    }
    if (i % 4 == 2) pthread_exit(NULL);
    return NULL;
}

static sem_t value_set, key_deleted;

static void *outlives_key(void *arg) {
    (void)arg;
    CHECK_OK(pthread_setspecific(deleted_key, (void *)1));
    CHECK_SYS(sem_post(&value_set));
    while (sem_wait(&key_deleted) == -1) CHECK_EQ(errno, EINTR);
    return NULL;
}

static void *set_again(void *arg) {
    (void)arg;
    CHECK_OK(pthread_setspecific(again_key, (void *)1));
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t[THREADS];

    CHECK_OK(pthread_key_create(&key, destructor));
    CHECK(pthread_getspecific(key) == NULL);
    CHECK_OK(pthread_setspecific(key, (void *)(intptr_t)THREADS)); /* main's own value */
    for (intptr_t i = 1; i < THREADS; ++i)
        CHECK_OK(pthread_create(&t[i], NULL, worker, (void *)i));
    for (int i = 1; i < THREADS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    CHECK_EQ((intptr_t)pthread_getspecific(key), THREADS); /* untouched by the others */
    for (int i = 1; i < THREADS; ++i) CHECK_EQ(calls[i], (i % 4 == 2 || i % 4 == 3) ? 1 : 0);
    CHECK_EQ(calls[THREADS], 0); /* main has not exited */
    CHECK_OK(pthread_setspecific(key, NULL));
    CHECK_OK(pthread_key_delete(key));

    /* destructor that sets a value again */
    CHECK_OK(pthread_key_create(&again_key, again_destructor));
    CHECK_OK(pthread_create(&t[0], NULL, set_again, NULL));
    CHECK_OK(pthread_join(t[0], NULL));
    CHECK_EQ(again_calls, 2);
    CHECK_OK(pthread_key_delete(again_key));

    /* deleting a key while a thread holds a value: no destructor call */
    CHECK_SYS(sem_init(&value_set, 0, 0));
    CHECK_SYS(sem_init(&key_deleted, 0, 0));
    CHECK_OK(pthread_key_create(&deleted_key, deleted_destructor));
    CHECK_OK(pthread_create(&t[0], NULL, outlives_key, NULL));
    while (sem_wait(&value_set) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_key_delete(deleted_key));
    CHECK_SYS(sem_post(&key_deleted));
    CHECK_OK(pthread_join(t[0], NULL));
    CHECK_EQ(deleted_calls, 0);

    /* many keys */
    pthread_key_t keys[KEYS];
    for (intptr_t i = 0; i < KEYS; ++i) {
        CHECK_OK(pthread_key_create(&keys[i], NULL));
        CHECK_OK(pthread_setspecific(keys[i], (void *)(i + 100)));
    }
    for (intptr_t i = 0; i < KEYS; ++i) CHECK_EQ((intptr_t)pthread_getspecific(keys[i]), i + 100);
    for (int i = 0; i < KEYS; ++i) CHECK_OK(pthread_key_delete(keys[i]));

    printf("ok keys per-thread values, destructors (%d threads, %d keys)\n", THREADS, KEYS);
    return 0;
}
