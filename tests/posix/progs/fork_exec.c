/* fork_exec.c - fork(3p), execv(3p), _exit(3p), waitpid(3p) in a threaded
 * program. While 4 threads keep counting (1 ms sleeps):
 *  - main forks a child that execs /bin/true: waitpid sees it exit 0;
 *  - a worker thread forks a child that calls _exit(3): waitpid (in main)
 *    sees exit status 3;
 *  - a child that raises SIGTERM: WIFSIGNALED with WTERMSIG == SIGTERM;
 *  - with no children left, waitpid(-1, WNOHANG) gives ECHILD;
 *  - the parent's threads kept running across the forks (counters advance
 *    after the children are reaped), and stop when told.
 * Children only call async-signal-safe functions between fork and exec/_exit.
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

enum { WORKERS = 4 };

static atomic_int stop;
static atomic_long ticks;

static void *counter(void *arg) {
    (void)arg;
    for (int i = 0; i < 30000 && !atomic_load(&stop); ++i) { /* <= ~30 s */
        sleep_ms(1);
        atomic_fetch_add(&ticks, 1);
    }
    return NULL;
}

static void *fork_from_thread(void *arg) {
    (void)arg;
    pid_t pid = fork();
    CHECK_SYS(pid);
    if (pid == 0) _exit(3);
    return (void *)(long)pid;
}

static void expect_status(pid_t pid, int exited, int code) {
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, 0)) == -1 && errno == EINTR) {}
    CHECK_EQ(r, pid);
    if (exited) {
        CHECK(WIFEXITED(st));
        CHECK_EQ(WEXITSTATUS(st), code);
    } else {
        CHECK(WIFSIGNALED(st));
        CHECK_EQ(WTERMSIG(st), code);
    }
}

/* the counters move on within a bounded time */
static void expect_ticking(void) {
    long before = atomic_load(&ticks);
    for (int i = 0; i < 1000 && atomic_load(&ticks) < before + 2 * WORKERS; ++i) sleep_ms(1);
    CHECK_LE(before + 2 * WORKERS, atomic_load(&ticks));
}

int main(void) {
    WATCHDOG(60);
    pthread_t w[WORKERS], f;
    void *ret;
    for (int i = 0; i < WORKERS; ++i) CHECK_OK(pthread_create(&w[i], NULL, counter, NULL));
    expect_ticking();

    pid_t pid;
    CHECK_SYS(pid = fork());
    if (pid == 0) {
        char *const argv[] = {"true", NULL};
        execv("/bin/true", argv);
        _exit(127);
    }
    expect_status(pid, 1, 0);
    expect_ticking();

    CHECK_OK(pthread_create(&f, NULL, fork_from_thread, NULL));
    CHECK_OK(pthread_join(f, &ret));
    expect_status((pid_t)(long)ret, 1, 3);
    expect_ticking();

    CHECK_SYS(pid = fork());
    if (pid == 0) {
        raise(SIGTERM);
        _exit(99);
    }
    expect_status(pid, 0, SIGTERM);
    expect_ticking();

    CHECK_ERR(waitpid(-1, NULL, WNOHANG), ECHILD);
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; ++i) CHECK_OK(pthread_join(w[i], NULL));

    printf("ok fork_exec exec /bin/true -> 0, _exit(3) -> 3, SIGTERM, %ld ticks across forks\n",
           atomic_load(&ticks));
    return 0;
}
