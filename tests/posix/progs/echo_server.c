/* echo_server.c - scenario: thread-per-connection TCP echo server, written in
 * the plain blocking style: accept(3p) in main, one detached pthread per
 * connection doing blocking read(3p)/write(3p) until EOF, then close(3p).
 *  - raises RLIMIT_NOFILE to its hard limit (setrlimit(3p));
 *  - listens on 127.0.0.1, port 0 (the kernel picks), prints "port N" on
 *    stdout (flushed) once listening;
 *  - serves exactly `connections` connections, waits for their threads to
 *    finish, prints "ok echo_server served N connections, at most M threads at
 *    once" and exits 0. Any read/write error is a failure.
 * Pair it with echo_client (tests/posix/run_posix.py): with 10000 connections all open at
 * once, this process holds 10000 threads.
 *
 * Usage: echo_server [connections=10000] [thread_stack_bytes=65536]
 */
#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_done = PTHREAD_COND_INITIALIZER;
static long live, max_live, finished;

static void *serve(void *arg) {
    int fd = (int)(long)arg;
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == -1 && errno == EINTR) continue;
        CHECK_SYS(n);
        if (n == 0) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w == -1 && errno == EINTR) continue;
            CHECK_SYS(w);
            off += w;
        }
    }
    CHECK_SYS(close(fd));
    CHECK_OK(pthread_mutex_lock(&mu));
    --live;
    ++finished;
    CHECK_OK(pthread_cond_signal(&all_done));
    CHECK_OK(pthread_mutex_unlock(&mu));
    return NULL;
}

int main(int argc, char **argv) {
    WATCHDOG(60);
    long want = argc > 1 ? atol(argv[1]) : 10000;
    long stack = argc > 2 ? atol(argv[2]) : 65536;
    CHECK(want >= 1);

    struct rlimit rl;
    CHECK_SYS(getrlimit(RLIMIT_NOFILE, &rl));
    rl.rlim_cur = rl.rlim_max;
    CHECK_SYS(setrlimit(RLIMIT_NOFILE, &rl));

    int ls, one = 1;
    CHECK_SYS(ls = socket(AF_INET, SOCK_STREAM, 0));
    CHECK_SYS(setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    CHECK_EQ(inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr), 1);
    CHECK_SYS(bind(ls, (struct sockaddr *)&sa, sizeof sa));
    CHECK_SYS(listen(ls, SOMAXCONN));
    socklen_t sl = sizeof sa;
    CHECK_SYS(getsockname(ls, (struct sockaddr *)&sa, &sl));
    printf("port %d\n", ntohs(sa.sin_port));
    CHECK_EQ(fflush(stdout), 0);

    pthread_attr_t attr;
    CHECK_OK(pthread_attr_init(&attr));
    CHECK_OK(pthread_attr_setstacksize(&attr, (size_t)stack));
    CHECK_OK(pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED));
    for (long accepted = 0; accepted < want;) {
        int fd = accept(ls, NULL, NULL);
        if (fd == -1 && (errno == EINTR || errno == ECONNABORTED)) continue;
        CHECK_SYS(fd);
        ++accepted;
        CHECK_OK(pthread_mutex_lock(&mu));
        if (++live > max_live) max_live = live;
        CHECK_OK(pthread_mutex_unlock(&mu));
        pthread_t t;
        CHECK_OK(pthread_create(&t, &attr, serve, (void *)(long)fd));
    }
    CHECK_OK(pthread_attr_destroy(&attr));
    CHECK_SYS(close(ls));

    CHECK_OK(pthread_mutex_lock(&mu));
    while (finished < want) CHECK_OK(pthread_cond_wait(&all_done, &mu));
    CHECK_EQ(live, 0);
    printf("ok echo_server served %ld connections, at most %ld threads at once\n", finished,
           max_live);
    CHECK_OK(pthread_mutex_unlock(&mu));
    return 0;
}
