/* wait_locks.c - calls that wait in the kernel for something no descriptor
 * tells of must not stop the other threads: waitpid(3p)/wait(3p) for a child
 * (exit status 7 after 200 ms), flock(2) LOCK_EX and fcntl(3p) F_OFD_SETLKW
 * on a file another open file description holds locked for 200 ms.
 *  - each wait returns the right result (status 7; the lock, once released);
 *  - meanwhile a ticker thread (usleep 5 ms, count) keeps running: at least
 *    10 ticks during each 200 ms wait;
 *  - waitpid(-1, WNOHANG) with no child left gives ECHILD.
 * A runtime that blocks its kernel thread in these calls fails the ticks.
 */
#include "check.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/wait.h>

static atomic_int ticks, stop;
static char path[] = "/tmp/weft-wait-locks-XXXXXX";
static int holder_fd;

static void *ticker(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        CHECK_SYS(usleep(5000));
        atomic_fetch_add(&ticks, 1);
    }
    return NULL;
}

static void *release_later(void *arg) {
    int how = (int)(long)arg;
    sleep_ms(200);
    if (how == 0) {
        CHECK_SYS(flock(holder_fd, LOCK_UN));
    } else {
        struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
        CHECK_SYS(fcntl(holder_fd, F_OFD_SETLK, &fl));
    }
    return NULL;
}

/* ticks counted while `what` waited; fails if the ticker starved */
static void ticked(const char *what, int before) {
    int n = atomic_load(&ticks) - before;
    if (n < 10) FAIL("%s: the ticker ran %d times during the wait (want >= 10)", what, n);
}

int main(void) {
    WATCHDOG(30);
    pthread_t tk;
    CHECK_OK(pthread_create(&tk, NULL, ticker, NULL));

    for (int use_wait = 0; use_wait < 2; ++use_wait) {
        pid_t pid = fork();
        CHECK_SYS(pid);
        if (pid == 0) {
            usleep(200000);
            _exit(7);
        }
        int st = 0, before = atomic_load(&ticks);
        pid_t got = use_wait ? wait(&st) : waitpid(pid, &st, 0);
        CHECK_EQ(got, pid);
        CHECK(WIFEXITED(st));
        CHECK_EQ(WEXITSTATUS(st), 7);
        ticked(use_wait ? "wait" : "waitpid", before);
    }
    CHECK_ERR(waitpid(-1, NULL, WNOHANG), ECHILD);

    int fd = mkstemp(path);
    CHECK_SYS(fd);
    CHECK_SYS(holder_fd = open(path, O_RDWR));
    pthread_t rel;

    CHECK_SYS(flock(holder_fd, LOCK_EX));
    CHECK_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    int before = atomic_load(&ticks);
    CHECK_OK(pthread_create(&rel, NULL, release_later, (void *)0L));
    CHECK_SYS(flock(fd, LOCK_EX)); /* waits for release_later */
    ticked("flock", before);
    CHECK_OK(pthread_join(rel, NULL));
    CHECK_SYS(flock(fd, LOCK_UN));

    struct flock wr = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK_SYS(fcntl(holder_fd, F_OFD_SETLK, &wr));
    struct flock mine = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK_ERR(fcntl(fd, F_OFD_SETLK, &mine), EAGAIN);
    before = atomic_load(&ticks);
    CHECK_OK(pthread_create(&rel, NULL, release_later, (void *)1L));
    CHECK_SYS(fcntl(fd, F_OFD_SETLKW, &mine));
    ticked("fcntl F_OFD_SETLKW", before);
    CHECK_OK(pthread_join(rel, NULL));

    atomic_store(&stop, 1);
    CHECK_OK(pthread_join(tk, NULL));
    CHECK_SYS(close(fd));
    CHECK_SYS(close(holder_fd));
    CHECK_SYS(unlink(path));
    printf("ok wait_locks waitpid/wait/flock/F_OFD_SETLKW leave the other threads running\n");
    return 0;
}
