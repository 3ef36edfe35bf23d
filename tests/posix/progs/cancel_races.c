/* cancel_races.c - cancellation and pthread_kill at awkward moments:
 *  - a signal sent to a thread that is busy (in no call) does not cut short
 *    the blocking call it makes afterwards: a read that gets its byte 100 ms
 *    later returns 1, not an error;
 *  - a cancel sent to a thread whose read was made ready in the same moment
 *    (a child process writes two pipes: main's and the reader's) is acted
 *    on: join gives PTHREAD_CANCELED within 2 s (30 rounds);
 *  - a pthread_once init routine cancelled inside (in sleep) counts as never
 *    run: the next pthread_once runs it again;
 *  - threads cancelled in sigwait leave no descriptor behind (50 of them).
 * Usage: cancel_races (run on one vproc and on two, see CMakeLists.txt).
 */
#include "check.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>

static void on_usr1(int s) { (void)s; }

/* ---- a signal before the call ---- */
static int sp[2];
static atomic_int busy_go, kill_sent;
static ssize_t busy_read;

static void *busy_then_read(void *arg) {
    (void)arg;
    char c;
    atomic_store(&busy_go, 1);
    while (!atomic_load(&kill_sent)) sched_yield(); /* in no blocking call */
    busy_read = read(sp[0], &c, 1);
    return NULL;
}

/* ---- cancel as the read is made ready ---- */
static int rp[2], mp[2];

static void *reader(void *arg) {
    (void)arg;
    char c;
    for (;;) (void)!read(rp[0], &c, 1); /* a cancellation point, again and again */
    return NULL;
}

/* ---- once ---- */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_int init_runs;
static void init(void) {
    if (atomic_fetch_add(&init_runs, 1) == 0) sleep(30); /* the first run is cancelled here */
}
static void *call_once(void *arg) {
    (void)arg;
    CHECK_OK(pthread_once(&once, init));
    return NULL;
}

/* ---- sigwait ---- */
static void *waits_for_usr2(void *arg) {
    (void)arg;
    sigset_t set;
    int sig;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    sigwait(&set, &sig);
    return NULL;
}

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    int n = 0;
    while (readdir(d)) ++n;
    closedir(d);
    return n;
}

int main(void) {
    WATCHDOG(30);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    CHECK_SYS(sigaction(SIGUSR1, &sa, NULL));

    /* a signal before the call */
    CHECK_SYS(pipe(sp));
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, busy_then_read, NULL));
    while (!atomic_load(&busy_go)) sched_yield();
    CHECK_OK(pthread_kill(t, SIGUSR1));
    atomic_store(&kill_sent, 1);
    sleep_ms(100);
    CHECK_EQ(write(sp[1], "x", 1), 1);
    CHECK_OK(pthread_join(t, NULL));
    if (busy_read != 1) FAIL("a signal before the call cut the read short: got %zd (%s)", busy_read, strerror(errno));

    /* cancel as the read is made ready */
    for (int round = 0; round < 30; ++round) {
        CHECK_SYS(pipe(rp));
        CHECK_SYS(pipe(mp));
        CHECK_OK(pthread_create(&t, NULL, reader, NULL));
        sleep_ms(5); /* the reader waits */
        pid_t child = fork();
        CHECK_SYS(child);
        if (child == 0) { /* both pipes at once: main and the reader become ready together */
            (void)!write(mp[1], "m", 1);
            (void)!write(rp[1], "r", 1);
            _exit(0);
        }
        char c;
        CHECK_EQ(read(mp[0], &c, 1), 1);
        long long t0 = now_ns(CLOCK_MONOTONIC);
        CHECK_OK(pthread_cancel(t));
        void *ret;
        CHECK_OK(pthread_join(t, &ret));
        CHECK(ret == PTHREAD_CANCELED);
        CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, 2 * NS_PER_S);
        CHECK_EQ(waitpid(child, NULL, 0), child);
        close(rp[0]), close(rp[1]), close(mp[0]), close(mp[1]);
    }

    /* once */
    CHECK_OK(pthread_create(&t, NULL, call_once, NULL));
    sleep_ms(50);
    CHECK_OK(pthread_cancel(t));
    void *ret;
    CHECK_OK(pthread_join(t, &ret));
    CHECK(ret == PTHREAD_CANCELED);
    CHECK_OK(pthread_create(&t, NULL, call_once, NULL));
    CHECK_OK(pthread_join(t, NULL));
    CHECK_EQ(atomic_load(&init_runs), 2);

    /* sigwait */
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    CHECK_OK(pthread_sigmask(SIG_BLOCK, &usr2, NULL));
    int before = open_fds();
    for (int i = 0; i < 50; ++i) {
        CHECK_OK(pthread_create(&t, NULL, waits_for_usr2, NULL));
        if (i % 2) sleep_ms(1); /* some cancelled while waiting, some before */
        CHECK_OK(pthread_cancel(t));
        CHECK_OK(pthread_join(t, &ret));
        CHECK(ret == PTHREAD_CANCELED);
    }
    CHECK_EQ(open_fds(), before);

    printf("ok cancel_races signal before a call, cancel as the read wakes, once, sigwait\n");
    return 0;
}
