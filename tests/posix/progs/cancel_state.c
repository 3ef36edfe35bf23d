/* cancel_state.c - pthread_cleanup_push/pop(3p), pthread_setcancelstate(3p),
 * pthread_setcanceltype(3p):
 *  - cleanup handlers run in LIFO order on cancellation and on pthread_exit;
 *    pthread_cleanup_pop(1) runs the handler, pop(0) does not;
 *  - defaults: state ENABLE, type DEFERRED (as returned in oldstate and oldtype);
 *    a bad state or type gives EINVAL;
 *  - with PTHREAD_CANCEL_DISABLE a cancel request stays pending: the thread
 *    sleeps through usleep (a cancellation point) and keeps running; after
 *    re-enabling (old state DISABLE) it continues to the next cancellation
 *    point (pthread_testcancel) and is cancelled there; join gives
 *    PTHREAD_CANCELED.
 */
#include "check.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>

static char order[8];
static atomic_int n_order;
static sem_t ready, cancelled;
static atomic_int slept_through, after_enable, after_testcancel;

static void record(void *arg) {
    int i = atomic_fetch_add(&n_order, 1);
    if (i < (int)sizeof order - 1) order[i] = (char)(intptr_t)arg;
}

static void *three_handlers(void *arg) {
    int by_exit = (int)(intptr_t)arg;
    pthread_cleanup_push(record, (void *)'1');
    pthread_cleanup_push(record, (void *)'2');
    pthread_cleanup_push(record, (void *)'3');
    if (by_exit) pthread_exit((void *)7);
    CHECK_SYS(sem_post(&ready));
    for (int i = 0; i < 1000; ++i) {
        pthread_testcancel();
        sleep_ms(10);
    }
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return NULL;
}

static void *pop_execute(void *arg) {
    (void)arg;
    pthread_cleanup_push(record, (void *)'a');
    pthread_cleanup_push(record, (void *)'b');
    pthread_cleanup_pop(1); /* runs b */
    pthread_cleanup_pop(0); /* drops a */
    return NULL;
}

static void *disabled_victim(void *arg) {
    (void)arg;
    int old = -1;
    CHECK_OK(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old));
    CHECK_EQ(old, PTHREAD_CANCEL_ENABLE);
    CHECK_SYS(sem_post(&ready));
    while (sem_wait(&cancelled) == -1) CHECK_EQ(errno, EINTR); /* cancel is pending now */
    CHECK_SYS(usleep(50000));
    atomic_store(&slept_through, 1);
    CHECK_OK(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old));
    CHECK_EQ(old, PTHREAD_CANCEL_DISABLE);
    atomic_store(&after_enable, 1);
    pthread_testcancel();
    atomic_store(&after_testcancel, 1);
    return NULL;
}

static pthread_t start(void *(*fn)(void *), void *arg) {
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, fn, arg));
    return t;
}

static void expect_order(const char *want) {
    order[atomic_load(&n_order)] = 0;
    if (strcmp(order, want) != 0) FAIL("cleanup order (got \"%s\", want \"%s\")", order, want);
    memset(order, 0, sizeof order);
    atomic_store(&n_order, 0);
}

int main(void) {
    WATCHDOG(60);
    pthread_t t;
    void *ret;
    int old;
    CHECK_SYS(sem_init(&ready, 0, 0));
    CHECK_SYS(sem_init(&cancelled, 0, 0));

    /* defaults and EINVAL */
    CHECK_OK(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old));
    CHECK_EQ(old, PTHREAD_CANCEL_ENABLE);
    CHECK_OK(pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old));
    CHECK_EQ(old, PTHREAD_CANCEL_DEFERRED);
    CHECK_RC(pthread_setcancelstate(12345, &old), EINVAL);
    CHECK_RC(pthread_setcanceltype(12345, &old), EINVAL);

    /* LIFO on cancellation */
    t = start(three_handlers, (void *)0);
    while (sem_wait(&ready) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_cancel(t));
    CHECK_OK(pthread_join(t, &ret));
    CHECK(ret == PTHREAD_CANCELED);
    expect_order("321");

    /* LIFO on pthread_exit */
    t = start(three_handlers, (void *)1);
    CHECK_OK(pthread_join(t, &ret));
    CHECK_EQ((intptr_t)ret, 7);
    expect_order("321");

    /* pop(1) / pop(0) */
    t = start(pop_execute, NULL);
    CHECK_OK(pthread_join(t, NULL));
    expect_order("b");

    /* DISABLE keeps the request pending until re-enabled + a cancellation point */
    t = start(disabled_victim, NULL);
    while (sem_wait(&ready) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_cancel(t));
    CHECK_SYS(sem_post(&cancelled));
    CHECK_OK(pthread_join(t, &ret));
    CHECK(ret == PTHREAD_CANCELED);
    CHECK_EQ(atomic_load(&slept_through), 1);
    CHECK_EQ(atomic_load(&after_enable), 1);
    CHECK_EQ(atomic_load(&after_testcancel), 0);

    printf("ok cancel_state cleanup LIFO, pop(1)/pop(0), DISABLE defers until ENABLE\n");
    return 0;
}
