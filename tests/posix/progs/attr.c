/* attr.c - pthread_attr_*(3p):
 *  - pthread_attr_init defaults: PTHREAD_CREATE_JOINABLE, PTHREAD_INHERIT_SCHED;
 *  - setstacksize/getstacksize round-trip 256 KiB; a thread created with it
 *    touches 192 KiB of locals (it would crash on a smaller stack);
 *    stacksize < PTHREAD_STACK_MIN gives EINVAL;
 *  - setdetachstate DETACHED: the thread runs, and pthread_join on it (while
 *    alive) gives EINVAL; a bad detachstate gives EINVAL;
 *  - guardsize, scope (SYSTEM), inheritsched, schedpolicy, schedparam: get
 *    returns what set stored; a thread with EXPLICIT_SCHED + SCHED_OTHER runs;
 *  - one attr object serves several pthread_create calls.
 * Not asserted: PTHREAD_SCOPE_PROCESS (POSIX allows ENOTSUP; glibc gives it).
 */
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>

enum { STACK = 256 * 1024, USE = 192 * 1024 };

static void *deep(void *arg) {
    volatile unsigned char buf[USE];
    for (size_t i = 0; i < sizeof buf; i += 512) buf[i] = (unsigned char)(i >> 9);
    uintptr_t sum = (uintptr_t)arg;
    for (size_t i = 0; i < sizeof buf; i += 512) sum += buf[i];
    return (void *)sum;
}

static sem_t go, done;

static void *detached(void *arg) {
    (void)arg;
    while (sem_wait(&go) == -1) CHECK_EQ(errno, EINTR);
    CHECK_SYS(sem_post(&done));
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_attr_t a;
    int v;
    size_t sz;
    pthread_t t;
    void *ret;

    CHECK_OK(pthread_attr_init(&a));
    CHECK_OK(pthread_attr_getdetachstate(&a, &v));
    CHECK_EQ(v, PTHREAD_CREATE_JOINABLE);
    CHECK_OK(pthread_attr_getinheritsched(&a, &v));
    CHECK_EQ(v, PTHREAD_INHERIT_SCHED);

    /* stack size */
    CHECK_OK(pthread_attr_setstacksize(&a, STACK));
    CHECK_OK(pthread_attr_getstacksize(&a, &sz));
    CHECK_EQ(sz, STACK);
    CHECK_RC(pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN - 1), EINVAL);
    CHECK_OK(pthread_attr_getstacksize(&a, &sz));
    CHECK_EQ(sz, STACK);
    uintptr_t want = 7;
    for (size_t i = 0; i < USE; i += 512) want += (unsigned char)(i >> 9);
    for (int round = 0; round < 3; ++round) { /* the attr object is reusable */
        CHECK_OK(pthread_create(&t, &a, deep, (void *)7));
        CHECK_OK(pthread_join(t, &ret));
        CHECK_EQ((uintptr_t)ret, want);
    }

    /* guard size */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    CHECK_OK(pthread_attr_setguardsize(&a, 2 * page));
    CHECK_OK(pthread_attr_getguardsize(&a, &sz));
    CHECK_EQ(sz, 2 * page);

    /* scope */
    CHECK_OK(pthread_attr_setscope(&a, PTHREAD_SCOPE_SYSTEM));
    CHECK_OK(pthread_attr_getscope(&a, &v));
    CHECK_EQ(v, PTHREAD_SCOPE_SYSTEM);

    /* scheduling: explicit SCHED_OTHER priority 0 needs no privilege */
    struct sched_param sp = {.sched_priority = 0};
    CHECK_OK(pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED));
    CHECK_OK(pthread_attr_getinheritsched(&a, &v));
    CHECK_EQ(v, PTHREAD_EXPLICIT_SCHED);
    CHECK_OK(pthread_attr_setschedpolicy(&a, SCHED_FIFO));
    CHECK_OK(pthread_attr_getschedpolicy(&a, &v));
    CHECK_EQ(v, SCHED_FIFO);
    CHECK_OK(pthread_attr_setschedpolicy(&a, SCHED_OTHER));
    CHECK_OK(pthread_attr_getschedpolicy(&a, &v));
    CHECK_EQ(v, SCHED_OTHER);
    CHECK_OK(pthread_attr_setschedparam(&a, &sp));
    sp.sched_priority = -1;
    CHECK_OK(pthread_attr_getschedparam(&a, &sp));
    CHECK_EQ(sp.sched_priority, 0);
    CHECK_OK(pthread_create(&t, &a, deep, (void *)7));
    CHECK_OK(pthread_join(t, &ret));
    CHECK_EQ((uintptr_t)ret, want);
    CHECK_OK(pthread_attr_setinheritsched(&a, PTHREAD_INHERIT_SCHED));
    CHECK_OK(pthread_attr_getinheritsched(&a, &v));
    CHECK_EQ(v, PTHREAD_INHERIT_SCHED);

    /* detach state */
    CHECK_RC(pthread_attr_setdetachstate(&a, 12345), EINVAL);
    CHECK_OK(pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED));
    CHECK_OK(pthread_attr_getdetachstate(&a, &v));
    CHECK_EQ(v, PTHREAD_CREATE_DETACHED);
    CHECK_SYS(sem_init(&go, 0, 0));
    CHECK_SYS(sem_init(&done, 0, 0));
    CHECK_OK(pthread_create(&t, &a, detached, NULL));
    CHECK_RC(pthread_join(t, NULL), EINVAL); /* alive, because it waits for go */
    CHECK_SYS(sem_post(&go));
    while (sem_wait(&done) == -1) CHECK_EQ(errno, EINTR);

    CHECK_OK(pthread_attr_destroy(&a));
    printf("ok attr stacksize/detachstate/guardsize/scope/sched, %d KiB of a %d KiB stack used\n",
           USE / 1024, STACK / 1024);
    return 0;
}
