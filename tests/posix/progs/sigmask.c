/* sigmask.c - pthread_sigmask(3p), pthread_kill(3p), sigpending(3p), sigwait(3p):
 *  - block SIGUSR1, raise() it: the handler does not run, sigpending shows it;
 *    unblocking delivers it before pthread_sigmask returns ("at least one of
 *    those signals shall be delivered before the call ... returns");
 *  - pthread_kill(t, SIGUSR1) to a thread that blocks it: pending in that
 *    thread, the handler runs in that thread when it unblocks, and not in the
 *    main thread (which does not block it);
 *  - a new thread inherits its creator's mask;
 *  - sigwait in a thread that blocks SIGUSR2 returns it after pthread_kill;
 *  - pthread_kill(t, 0) on a live thread is 0; a bad signal number gives
 *    EINVAL; a bad "how" gives EINVAL.
 */
#include "check.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>

static _Thread_local int tag; /* 1 in main, 2 in the worker */
static atomic_int hits, hit_tag;
static sem_t blocked, killed;

static void on_usr1(int sig) {
    (void)sig;
    atomic_fetch_add(&hits, 1);
    atomic_store(&hit_tag, tag);
}

static void block(int sig, sigset_t *old) {
    sigset_t set;
    CHECK_SYS(sigemptyset(&set));
    CHECK_SYS(sigaddset(&set, sig));
    CHECK_OK(pthread_sigmask(SIG_BLOCK, &set, old));
}

static int is_pending(int sig) {
    sigset_t p;
    CHECK_SYS(sigpending(&p));
    return sigismember(&p, sig);
}

static void *worker(void *arg) {
    (void)arg;
    sigset_t old;
    tag = 2;
    block(SIGUSR1, &old);
    CHECK_SYS(sem_post(&blocked));
    while (sem_wait(&killed) == -1) CHECK_EQ(errno, EINTR);
    CHECK_EQ(is_pending(SIGUSR1), 1);
    CHECK_EQ(atomic_load(&hits), 0);
    CHECK_OK(pthread_sigmask(SIG_SETMASK, &old, NULL));
    CHECK_EQ(atomic_load(&hits), 1);
    CHECK_EQ(atomic_load(&hit_tag), 2);
    return NULL;
}

static void *inherits(void *arg) {
    (void)arg;
    sigset_t cur;
    CHECK_OK(pthread_sigmask(SIG_BLOCK, NULL, &cur));
    CHECK_EQ(sigismember(&cur, SIGUSR2), 1);
    CHECK_EQ(sigismember(&cur, SIGUSR1), 0);
    int sig = 0;
    CHECK_SYS(sem_post(&blocked));
    CHECK_OK(sigwait(&cur, &sig)); /* cur holds SIGUSR2 (and whatever else main blocked) */
    CHECK_EQ(sig, SIGUSR2);
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    struct sigaction sa;
    sigset_t old, cur;
    pthread_t t;
    tag = 1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    CHECK_SYS(sigaction(SIGUSR1, &sa, NULL));
    CHECK_SYS(sem_init(&blocked, 0, 0));
    CHECK_SYS(sem_init(&killed, 0, 0));

    /* blocked in main, raise, unblock */
    block(SIGUSR1, &old);
    CHECK_EQ(sigismember(&old, SIGUSR1), 0);
    CHECK_OK(raise(SIGUSR1));
    CHECK_EQ(atomic_load(&hits), 0);
    CHECK_EQ(is_pending(SIGUSR1), 1);
    CHECK_OK(pthread_sigmask(SIG_SETMASK, &old, NULL));
    CHECK_EQ(atomic_load(&hits), 1);
    CHECK_EQ(atomic_load(&hit_tag), 1);
    CHECK_EQ(is_pending(SIGUSR1), 0);

    /* directed at a worker that blocks it */
    atomic_store(&hits, 0);
    CHECK_OK(pthread_create(&t, NULL, worker, NULL));
    while (sem_wait(&blocked) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_kill(t, 0));
    CHECK_OK(pthread_kill(t, SIGUSR1));
    CHECK_EQ(is_pending(SIGUSR1), 0); /* pending on the worker, not on main */
    CHECK_SYS(sem_post(&killed));
    CHECK_OK(pthread_join(t, NULL));
    CHECK_EQ(atomic_load(&hits), 1);

    /* inheritance and sigwait */
    block(SIGUSR2, &old);
    CHECK_OK(pthread_create(&t, NULL, inherits, NULL));
    while (sem_wait(&blocked) == -1) CHECK_EQ(errno, EINTR);
    CHECK_OK(pthread_kill(t, SIGUSR2));
    CHECK_OK(pthread_join(t, NULL));
    CHECK_OK(pthread_sigmask(SIG_SETMASK, &old, NULL));

    /* errors */
    CHECK_OK(pthread_sigmask(SIG_BLOCK, NULL, &cur));
    CHECK_RC(pthread_sigmask(12345, &cur, NULL), EINVAL);
    CHECK_RC(pthread_kill(pthread_self(), 12345), EINVAL);

    printf("ok sigmask block/pending/unblock-delivers, pthread_kill, inheritance, sigwait\n");
    return 0;
}
