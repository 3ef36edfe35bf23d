/* cancel.c - pthread_cancel(3p) with the default deferred type, at the
 * cancellation points of a thread blocked in:
 *  - pthread_cond_wait: the mutex is reacquired before the cleanup handler
 *    runs ("the effect shall be as if the thread were unblocked, allowed to
 *    execute up to the point of returning from the call, ... and then call
 *    the cancellation cleanup handlers"): the handler's unlock of an
 *    ERRORCHECK mutex returns 0, and the canceller can then lock it;
 *  - sleep, nanosleep (30 s requested), read on an empty pipe, sem_wait on
 *    a zero semaphore, poll and epoll_wait with no timeout on that pipe,
 *    accept on a listening socket nobody connects to;
 *  - pthread_testcancel in a loop that otherwise only calls sched_yield.
 * Every case: pthread_join returns PTHREAD_CANCELED well within 2 s, the
 * cleanup handler ran, and the code after the cancellation point did not.
 */
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

enum { COND_WAIT, SLEEP, NANOSLEEP, READ_PIPE, SEM_WAIT, POLL, EPOLL_WAIT, ACCEPT, TESTCANCEL, CASES };
static const char *const names[CASES] = {"pthread_cond_wait", "sleep", "nanosleep", "read", "sem_wait",
                                         "poll", "epoll_wait", "accept", "pthread_testcancel"};

static pthread_mutex_t mu;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pipefd[2];
static sem_t started, never;
static int epfd, listener;
static atomic_int cleanup_ran, unlock_rc, went_past, cancel_sent;

static void cleanup(void *arg) {
    atomic_store(&cleanup_ran, 1);
    if (arg) atomic_store(&unlock_rc, pthread_mutex_unlock(arg));
}

static void *victim(void *arg) {
    int which = (int)(long)arg;
    char c;
    struct timespec ts = {30, 0};
    pthread_cleanup_push(cleanup, which == COND_WAIT ? &mu : NULL);
    switch (which) {
    case COND_WAIT:
        CHECK_OK(pthread_mutex_lock(&mu));
        CHECK_SYS(sem_post(&started));
        for (;;) CHECK_OK(pthread_cond_wait(&cv, &mu)); /* nobody signals */
    case SLEEP:
        CHECK_SYS(sem_post(&started));
        sleep(30);
        break;
    case NANOSLEEP:
        CHECK_SYS(sem_post(&started));
        nanosleep(&ts, NULL);
        break;
    case READ_PIPE:
        CHECK_SYS(sem_post(&started));
        (void)!read(pipefd[0], &c, 1); /* nobody writes */
        break;
    case SEM_WAIT:
        CHECK_SYS(sem_post(&started));
        (void)sem_wait(&never);
        break;
    case POLL: {
        struct pollfd p = {pipefd[0], POLLIN, 0};
        CHECK_SYS(sem_post(&started));
        (void)poll(&p, 1, -1);
        break;
    }
    case EPOLL_WAIT: {
        struct epoll_event ev;
        CHECK_SYS(sem_post(&started));
        (void)epoll_wait(epfd, &ev, 1, -1);
        break;
    }
    case ACCEPT:
        CHECK_SYS(sem_post(&started));
        (void)accept(listener, NULL, NULL);
        break;
    case TESTCANCEL:
        CHECK_SYS(sem_post(&started));
        for (long i = 0; !atomic_load(&cancel_sent); ++i) {
            CHECK(i < 100000000);
            sched_yield(); /* not a cancellation point */
        }
        pthread_testcancel();
        break;
    }
    atomic_store(&went_past, 1);
    pthread_cleanup_pop(0);
    return NULL;
}

static void run(int which) {
    pthread_t t;
    void *ret;
    atomic_store(&cleanup_ran, 0);
    atomic_store(&unlock_rc, -1);
    atomic_store(&went_past, 0);
    atomic_store(&cancel_sent, 0);
    CHECK_OK(pthread_create(&t, NULL, victim, (void *)(long)which));
    while (sem_wait(&started) == -1) CHECK_EQ(errno, EINTR);
    if (which == COND_WAIT) { /* mu free again: the victim is inside cond_wait */
        CHECK_OK(pthread_mutex_lock(&mu));
        CHECK_OK(pthread_mutex_unlock(&mu));
    } else {
        sleep_ms(20); /* let it block */
    }
    long long t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_OK(pthread_cancel(t));
    atomic_store(&cancel_sent, 1);
    CHECK_OK(pthread_join(t, &ret));
    if (ret != PTHREAD_CANCELED) FAIL("%s: join value (got %p, want PTHREAD_CANCELED)",
                                      names[which], ret);
    CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, 2 * NS_PER_S);
    CHECK_EQ(atomic_load(&cleanup_ran), 1);
    CHECK_EQ(atomic_load(&went_past), 0);
    if (which == COND_WAIT) {
        CHECK_RC(atomic_load(&unlock_rc), 0); /* the handler owned mu */
        CHECK_OK(pthread_mutex_trylock(&mu));
        CHECK_OK(pthread_mutex_unlock(&mu));
    }
}

int main(void) {
    WATCHDOG(60);
    pthread_mutexattr_t ma;
    CHECK_OK(pthread_mutexattr_init(&ma));
    CHECK_OK(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK));
    CHECK_OK(pthread_mutex_init(&mu, &ma));
    CHECK_OK(pthread_mutexattr_destroy(&ma));
    CHECK_SYS(pipe(pipefd));
    CHECK_SYS(sem_init(&started, 0, 0));
    CHECK_SYS(sem_init(&never, 0, 0));
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = pipefd[0]};
    CHECK_SYS(epfd = epoll_create1(0));
    CHECK_SYS(epoll_ctl(epfd, EPOLL_CTL_ADD, pipefd[0], &ev));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_SYS(listener = socket(AF_INET, SOCK_STREAM, 0));
    CHECK_SYS(bind(listener, (struct sockaddr *)&a, sizeof a));
    CHECK_SYS(listen(listener, 1));

    for (int which = 0; which < CASES; ++which) run(which);

    printf("ok cancel deferred at cond_wait/sleep/nanosleep/read/sem_wait/poll/epoll_wait/accept/testcancel\n");
    return 0;
}
