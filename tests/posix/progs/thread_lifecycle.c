/* thread_lifecycle.c - pthread_create(3p), pthread_join(3p), pthread_detach(3p),
 * pthread_self(3p), pthread_equal(3p), pthread_exit(3p):
 *  - a thread runs with its argument; join returns what it returned or what it
 *    passed to pthread_exit (also from a nested call);
 *  - pthread_self in the thread equals the id pthread_create stored; ids of
 *    different unjoined threads differ;
 *  - joining yourself gives EDEADLK (glibc returns it; POSIX "may fail");
 *  - pthread_join and a second pthread_detach of a live detached thread give
 *    EINVAL (glibc returns both while the thread is alive);
 *  - a detached thread still runs to completion;
 *  - 64 threads joined in reverse creation order each return their own value.
 * Not asserted: ESRCH for a joined/exited thread's id (using it is undefined).
 */
#include "check.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

static pthread_t seen_self;

static void *record_self(void *arg) {
    seen_self = pthread_self();
    return (void *)((intptr_t)arg + 1);
}

static void *return_arg_plus_one(void *arg) {
    return (void *)((intptr_t)arg + 1);
}

static void nested_exit(intptr_t v) {
    pthread_exit((void *)v);
}

static void *exit_from_nested(void *arg) {
    nested_exit((intptr_t)arg * 2);
    return NULL; /* not reached */
}

static void *join_self(void *arg) {
    (void)arg;
    return (void *)(intptr_t)pthread_join(pthread_self(), NULL);
}

static sem_t go, done;

static void *wait_for_go(void *arg) {
    (void)arg;
    while (sem_wait(&go) == -1) CHECK_EQ(errno, EINTR);
    CHECK_SYS(sem_post(&done));
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t, me = pthread_self();
    void *ret;

    CHECK(pthread_equal(me, pthread_self()) != 0);

    /* return value and pthread_self */
    CHECK_OK(pthread_create(&t, NULL, record_self, (void *)41));
    CHECK_OK(pthread_join(t, &ret));
    CHECK_EQ((intptr_t)ret, 42);
    CHECK(pthread_equal(seen_self, t) != 0);
    CHECK(pthread_equal(seen_self, me) == 0);

    /* pthread_exit from a nested function */
    CHECK_OK(pthread_create(&t, NULL, exit_from_nested, (void *)21));
    CHECK_OK(pthread_join(t, &ret));
    CHECK_EQ((intptr_t)ret, 42);

    /* join with a NULL value pointer */
    CHECK_OK(pthread_create(&t, NULL, return_arg_plus_one, NULL));
    CHECK_OK(pthread_join(t, NULL));

    /* joining yourself: from main and from another thread */
    CHECK_RC(pthread_join(me, NULL), EDEADLK);
    CHECK_OK(pthread_create(&t, NULL, join_self, NULL));
    CHECK_OK(pthread_join(t, &ret));
    CHECK_RC((intptr_t)ret, EDEADLK);

    /* a live detached thread cannot be joined or detached again, and still runs */
    CHECK_SYS(sem_init(&go, 0, 0));
    CHECK_SYS(sem_init(&done, 0, 0));
    CHECK_OK(pthread_create(&t, NULL, wait_for_go, NULL));
    CHECK_OK(pthread_detach(t));
    CHECK_RC(pthread_join(t, NULL), EINVAL);
    CHECK_RC(pthread_detach(t), EINVAL);
    CHECK_SYS(sem_post(&go));
    while (sem_wait(&done) == -1) CHECK_EQ(errno, EINTR);

    /* a thread detached by its creator after it may already have finished */
    CHECK_OK(pthread_create(&t, NULL, wait_for_go, NULL));
    CHECK_SYS(sem_post(&go));
    while (sem_wait(&done) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_detach(t));

    /* many threads, joined in reverse order */
    enum { N = 64 };
    pthread_t ts[N];
    for (intptr_t i = 0; i < N; ++i)
        CHECK_OK(pthread_create(&ts[i], NULL, return_arg_plus_one, (void *)(i * 1000)));
    for (int i = 0; i < N; ++i)
        for (int j = i + 1; j < N; ++j) CHECK(pthread_equal(ts[i], ts[j]) == 0);
    for (intptr_t i = N - 1; i >= 0; --i) {
        CHECK_OK(pthread_join(ts[i], &ret));
        CHECK_EQ((intptr_t)ret, i * 1000 + 1);
    }

    printf("ok thread_lifecycle create/join/detach/self/equal/exit, %d threads\n", N);
    return 0;
}
