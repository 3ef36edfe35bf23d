/* kill_eintr.c - pthread_kill(3p) wakes a thread out of a blocking call, the
 * way programs stop a thread blocked in accept or epoll_wait (Apache's worker
 * MPM at shutdown):
 *  - with a SIGUSR1 handler installed without SA_RESTART, a thread blocked in
 *    read (empty pipe), poll and epoll_wait (no timeout), sem_wait and
 *    nanosleep (30 s) returns -1 with errno EINTR soon after the kill, and
 *    the handler ran; nanosleep's remaining time is more than 20 s;
 *  - sleep(30) returns the seconds left (> 20);
 *  - with SA_RESTART, read is restarted instead: it returns the byte written
 *    50 ms after the kill, not EINTR; poll is not restarted (EINTR), as on
 *    Linux.
 */
#include "check.h"

#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/epoll.h>

enum { READ, POLL, EPOLL_WAIT, SEM_WAIT, NANOSLEEP, SLEEP, CASES };
static const char *const names[CASES] = {"read", "poll", "epoll_wait", "sem_wait", "nanosleep", "sleep"};

static int pipefd[2], epfd;
static sem_t started, never;
static atomic_int handled;
static long long got_rc, got_errno, left_ns;

static void on_usr1(int sig) {
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

static void *victim(void *arg) {
    int which = (int)(long)arg;
    char c;
    struct pollfd p = {pipefd[0], POLLIN, 0};
    struct epoll_event ev;
    struct timespec ts = {30, 0}, rem = {0, 0};
    CHECK_SYS(sem_post(&started));
    errno = 0;
    switch (which) {
    case READ: got_rc = read(pipefd[0], &c, 1); break;
    case POLL: got_rc = poll(&p, 1, -1); break;
    case EPOLL_WAIT: got_rc = epoll_wait(epfd, &ev, 1, -1); break;
    case SEM_WAIT: got_rc = sem_wait(&never); break;
    case NANOSLEEP:
        got_rc = nanosleep(&ts, &rem);
        left_ns = ts_ns(rem);
        break;
    case SLEEP: got_rc = sleep(30); break;
    }
    got_errno = errno;
    return NULL;
}

static void install(int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    CHECK_SYS(sigaction(SIGUSR1, &sa, NULL));
}

/* Start a victim in `which`, let it block, kill it; returns the thread. */
static pthread_t block_and_kill(int which) {
    pthread_t t;
    atomic_store(&handled, 0);
    got_rc = got_errno = -2;
    CHECK_OK(pthread_create(&t, NULL, victim, (void *)(long)which));
    while (sem_wait(&started) == -1) CHECK_EQ(errno, EINTR);
    sleep_ms(30); /* blocked by now */
    CHECK_OK(pthread_kill(t, SIGUSR1));
    return t;
}

int main(void) {
    WATCHDOG(60);
    CHECK_SYS(pipe(pipefd));
    CHECK_SYS(sem_init(&started, 0, 0));
    CHECK_SYS(sem_init(&never, 0, 0));
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = pipefd[0]};
    CHECK_SYS(epfd = epoll_create1(0));
    CHECK_SYS(epoll_ctl(epfd, EPOLL_CTL_ADD, pipefd[0], &ev));

    install(0);
    for (int which = 0; which < CASES; ++which) {
        long long t0 = now_ns(CLOCK_MONOTONIC);
        pthread_t t = block_and_kill(which);
        CHECK_OK(pthread_join(t, NULL));
        long long took = now_ns(CLOCK_MONOTONIC) - t0;
        if (took > 5 * NS_PER_S) FAIL("%s: not interrupted (took %lld ms)", names[which], took / NS_PER_MS);
        CHECK_EQ(atomic_load(&handled), 1);
        if (which == SLEEP) {
            if (got_rc <= 20 || got_rc > 30) FAIL("sleep: returned %lld, want the seconds left (20..30]", got_rc);
            continue;
        }
        if (got_rc != -1 || got_errno != EINTR)
            FAIL("%s: got %lld errno %s, want -1 errno EINTR", names[which], got_rc, err_name(got_errno));
        if (which == NANOSLEEP) CHECK_LE(20 * NS_PER_S, left_ns);
    }

    install(SA_RESTART);
    pthread_t t = block_and_kill(READ);
    sleep_ms(50);
    CHECK_EQ(write(pipefd[1], "x", 1), 1);
    CHECK_OK(pthread_join(t, NULL));
    CHECK_EQ(atomic_load(&handled), 1);
    if (got_rc != 1) FAIL("read with SA_RESTART: got %lld errno %s, want 1 (restarted)", got_rc, err_name(got_errno));
    t = block_and_kill(POLL);
    CHECK_OK(pthread_join(t, NULL));
    if (got_rc != -1 || got_errno != EINTR)
        FAIL("poll with SA_RESTART: got %lld errno %s, want -1 EINTR (never restarted)", got_rc, err_name(got_errno));

    printf("ok kill_eintr read/poll/epoll_wait/sem_wait/nanosleep/sleep interrupted, read restarted with SA_RESTART\n");
    return 0;
}
