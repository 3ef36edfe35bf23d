/* epoll_loop.c - scenario: a "library" thread runs its own event loop and
 * blocks in epoll_wait(2) (then, as variants, poll(3p) and select(3p)) on the
 * read end of a pipe, 5 s timeout. Meanwhile 4 worker threads each do 20 x
 * (usleep(1000), count, sched_yield); the last one to finish writes the pipe.
 *  - the wait returns the pipe's read event, not a timeout;
 *  - all workers had finished when the loop woke (so they ran while it was
 *    blocked), and the counter is exact;
 *  - each variant takes < 2 s.
 * A runtime that parks the whole kernel thread in the loop's wait would
 * starve the workers: the wait would time out after 5 s and this fails.
 *
 * Usage: epoll_loop [epoll|poll|select]   (default: all three in turn)
 */
#include "check.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/select.h>

enum { WORKERS = 4, STEPS = 20 };
enum { EPOLL, POLL, SELECT, KINDS };
static const char *const kinds[KINDS] = {"epoll", "poll", "select"};

static int pfd[2];
static atomic_int done_workers, steps, done_at_wake;
static sem_t loop_ready;

static void *event_loop(void *arg) {
    int kind = (int)(long)arg;
    int rc;
    if (kind == EPOLL) {
        int ep;
        CHECK_SYS(ep = epoll_create1(EPOLL_CLOEXEC));
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = pfd[0]}, out[4];
        CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev));
        CHECK_SYS(sem_post(&loop_ready));
        rc = epoll_wait(ep, out, 4, 5000);
        atomic_store(&done_at_wake, atomic_load(&done_workers));
        CHECK_EQ(rc, 1);
        CHECK_EQ(out[0].data.fd, pfd[0]);
        CHECK(out[0].events & EPOLLIN);
        CHECK_SYS(close(ep));
    } else if (kind == POLL) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        CHECK_SYS(sem_post(&loop_ready));
        rc = poll(&p, 1, 5000);
        atomic_store(&done_at_wake, atomic_load(&done_workers));
        CHECK_EQ(rc, 1);
        CHECK(p.revents & POLLIN);
    } else {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(pfd[0], &rd);
        struct timeval tv = {.tv_sec = 5};
        CHECK_SYS(sem_post(&loop_ready));
        rc = select(pfd[0] + 1, &rd, NULL, NULL, &tv);
        atomic_store(&done_at_wake, atomic_load(&done_workers));
        CHECK_EQ(rc, 1);
        CHECK(FD_ISSET(pfd[0], &rd));
    }
    char c;
    CHECK_EQ(read(pfd[0], &c, 1), 1);
    CHECK_EQ(c, 'x');
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < STEPS; ++i) {
        CHECK_SYS(usleep(1000));
        atomic_fetch_add(&steps, 1);
        CHECK_OK(sched_yield());
    }
    if (atomic_fetch_add(&done_workers, 1) + 1 == WORKERS) CHECK_EQ(write(pfd[1], "x", 1), 1);
    return NULL;
}

static void run(int kind) {
    pthread_t loop, w[WORKERS];
    atomic_store(&done_workers, 0);
    atomic_store(&steps, 0);
    atomic_store(&done_at_wake, -1);
    CHECK_SYS(pipe(pfd));
    long long t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_OK(pthread_create(&loop, NULL, event_loop, (void *)(long)kind));
    while (sem_wait(&loop_ready) == -1) CHECK_EQ(errno, EINTR);
    sleep_ms(10); /* the loop is (about to be) blocked in its wait */
    for (int i = 0; i < WORKERS; ++i) CHECK_OK(pthread_create(&w[i], NULL, worker, NULL));
    for (int i = 0; i < WORKERS; ++i) CHECK_OK(pthread_join(w[i], NULL));
    CHECK_OK(pthread_join(loop, NULL));
    long long took = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK_EQ(atomic_load(&done_at_wake), WORKERS);
    CHECK_EQ(atomic_load(&steps), WORKERS * STEPS);
    CHECK_LE(took, 2 * NS_PER_S);
    CHECK_SYS(close(pfd[0]));
    CHECK_SYS(close(pfd[1]));
    printf("%s: workers ran while the loop blocked, it woke on the pipe after %.1f ms\n",
           kinds[kind], took / 1e6);
}

int main(int argc, char **argv) {
    WATCHDOG(30);
    CHECK_SYS(sem_init(&loop_ready, 0, 0));
    int ran = 0;
    for (int kind = 0; kind < KINDS; ++kind)
        if (argc < 2 || strcmp(argv[1], kinds[kind]) == 0) run(kind), ++ran;
    if (ran == 0) FAIL("unknown variant %s (want epoll, poll or select)", argv[1]);
    printf("ok epoll_loop %s\n", argc < 2 ? "epoll poll select" : argv[1]);
    return 0;
}
