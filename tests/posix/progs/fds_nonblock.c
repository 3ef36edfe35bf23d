/* fds_nonblock.c - the program's own O_NONBLOCK is respected, and descriptor
 * numbers behave as POSIX says (fcntl(3p), ioctl FIONBIO, socketpair(3p),
 * pipe2, dup(3p), dup2(3p), dup3, close(3p)):
 *  - O_NONBLOCK set with fcntl(F_SETFL): read and recv on an empty socket
 *    give EAGAIN; write to a full one gives EAGAIN; F_GETFL shows it;
 *  - set with ioctl(FIONBIO, 1): read gives EAGAIN, F_GETFL shows O_NONBLOCK;
 *    FIONBIO 0 clears it again; pipe2(O_NONBLOCK) likewise;
 *  - a blocking socket's F_GETFL has no O_NONBLOCK (whatever a runtime does
 *    underneath), and its read blocks until another thread writes ~50 ms later;
 *  - dup shares the file status flags (same open file description) but not
 *    FD_CLOEXEC; dup3(O_CLOEXEC) sets it; dup2 onto an open number replaces it
 *    and returns that number; dup2(fd, fd) returns fd; dup3(fd, fd) is EINVAL;
 *    a dup keeps the socket working after the original is closed;
 *  - after close, read gives EBADF and the next socket gets the same number
 *    (lowest available) and works.
 */
#include "check.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static int sv[2];

static int flags(int fd) {
    int fl;
    CHECK_SYS(fl = fcntl(fd, F_GETFL));
    return fl;
}

static void *write_later(void *arg) {
    (void)arg;
    sleep_ms(50);
    CHECK_EQ(write(sv[1], "late", 4), 4);
    return NULL;
}

/* data written on one end arrives on the other */
static void roundtrip(int a, int b) {
    char buf[8];
    CHECK_EQ(write(a, "ping", 4), 4);
    CHECK_EQ(read(b, buf, sizeof buf), 4);
    CHECK(memcmp(buf, "ping", 4) == 0);
}

int main(void) {
    WATCHDOG(30);
    char buf[4096];
    int one = 1, zero = 0;

    /* fcntl O_NONBLOCK */
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK_EQ(flags(sv[0]) & O_NONBLOCK, 0);
    CHECK_SYS(fcntl(sv[0], F_SETFL, flags(sv[0]) | O_NONBLOCK));
    CHECK_EQ(flags(sv[0]) & O_NONBLOCK, O_NONBLOCK);
    CHECK_EQ(flags(sv[1]) & O_NONBLOCK, 0);
    CHECK_ERR(read(sv[0], buf, sizeof buf), EAGAIN);
    CHECK_ERR(recv(sv[0], buf, sizeof buf, 0), EAGAIN);
    long filled = 0;
    for (int i = 0; i < 100000; ++i) { /* fill the socket buffer */
        ssize_t n = write(sv[0], buf, sizeof buf);
        if (n == -1) {
            CHECK_EQ(errno, EAGAIN);
            break;
        }
        filled += n;
    }
    CHECK(filled > 0);
    CHECK_ERR(write(sv[0], buf, sizeof buf), EAGAIN);
    CHECK_SYS(close(sv[0]));
    CHECK_SYS(close(sv[1]));

    /* ioctl FIONBIO */
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK_SYS(ioctl(sv[0], FIONBIO, &one));
    CHECK_EQ(flags(sv[0]) & O_NONBLOCK, O_NONBLOCK);
    CHECK_ERR(read(sv[0], buf, sizeof buf), EAGAIN);
    CHECK_SYS(ioctl(sv[0], FIONBIO, &zero));
    CHECK_EQ(flags(sv[0]) & O_NONBLOCK, 0);

    /* blocking read, woken by another thread's write */
    pthread_t t;
    long long t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_OK(pthread_create(&t, NULL, write_later, NULL));
    CHECK_EQ(read(sv[0], buf, sizeof buf), 4);
    CHECK_LE(40 * NS_PER_MS, now_ns(CLOCK_MONOTONIC) - t0);
    CHECK(memcmp(buf, "late", 4) == 0);
    CHECK_OK(pthread_join(t, NULL));
    CHECK_EQ(flags(sv[0]) & O_NONBLOCK, 0);

    /* pipe2 */
    int p[2];
    CHECK_SYS(pipe2(p, O_NONBLOCK));
    CHECK_EQ(flags(p[0]) & O_NONBLOCK, O_NONBLOCK);
    CHECK_ERR(read(p[0], buf, 1), EAGAIN);
    CHECK_SYS(close(p[0]));
    CHECK_SYS(close(p[1]));

    /* dup family */
    int d;
    CHECK_SYS(fcntl(sv[0], F_SETFD, FD_CLOEXEC));
    CHECK_SYS(d = dup(sv[0]));
    CHECK_EQ(fcntl(d, F_GETFD) & FD_CLOEXEC, 0);
    CHECK_SYS(fcntl(sv[0], F_SETFL, flags(sv[0]) | O_NONBLOCK));
    CHECK_EQ(flags(d) & O_NONBLOCK, O_NONBLOCK); /* shared description */
    CHECK_ERR(read(d, buf, sizeof buf), EAGAIN);
    CHECK_SYS(fcntl(d, F_SETFL, flags(d) & ~O_NONBLOCK));
    CHECK_EQ(flags(sv[0]) & O_NONBLOCK, 0);
    roundtrip(sv[1], d);
    int other[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, other));
    CHECK_EQ(dup2(sv[0], other[0]), other[0]); /* other[0] silently replaced */
    roundtrip(sv[1], other[0]);
    CHECK_EQ(dup2(d, d), d);
    CHECK_ERR(dup3(d, d, 0), EINVAL);
    int d3;
    CHECK_SYS(d3 = dup3(sv[0], other[1], O_CLOEXEC));
    CHECK_EQ(d3, other[1]);
    CHECK_EQ(fcntl(d3, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    CHECK_SYS(close(sv[0]));
    roundtrip(sv[1], d); /* the dups keep the socket open */
    roundtrip(d3, sv[1]);
    CHECK_SYS(close(d));
    CHECK_SYS(close(other[0]));
    CHECK_SYS(close(d3));

    /* close then reuse of the number */
    int s1, s2, pair[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
    s1 = pair[0];
    CHECK_SYS(close(s1));
    CHECK_ERR(read(s1, buf, 1), EBADF);
    CHECK_SYS(s2 = socket(AF_UNIX, SOCK_STREAM, 0));
    CHECK_EQ(s2, s1);
    CHECK_SYS(close(s2));
    CHECK_SYS(close(pair[1]));
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
    CHECK_EQ(pair[0], s1);
    roundtrip(pair[0], pair[1]);
    roundtrip(pair[1], pair[0]);
    CHECK_SYS(close(pair[0]));
    CHECK_SYS(close(pair[1]));
    CHECK_SYS(close(sv[1]));

    printf("ok fds_nonblock fcntl/FIONBIO/pipe2 O_NONBLOCK, blocking read, dup/dup2/dup3, "
           "fd reuse\n");
    return 0;
}
