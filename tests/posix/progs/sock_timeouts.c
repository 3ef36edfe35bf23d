/* sock_timeouts.c - SO_RCVTIMEO and SO_SNDTIMEO bound blocking socket calls.
 *  - recv on a socket with a 200 ms SO_RCVTIMEO and nothing to read fails
 *    with EAGAIN after about 200 ms (read and recvmsg too, and on a dup);
 *  - accept on a listening socket with SO_RCVTIMEO fails with EAGAIN;
 *  - send into a full socket with a 200 ms SO_SNDTIMEO returns what it got
 *    through, or fails with EAGAIN when that is nothing;
 *  - getsockopt reads back what setsockopt set;
 *  - a socket without timeouts still waits: a recv is answered by a writer
 *    300 ms later (longer than the other socket's timeout).
 */
#include "check.h"

#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

static const long long TIMEOUT_NS = 200 * 1000 * 1000;

static void set_timeout(int fd, int name) {
    struct timeval tv = {0, 200 * 1000};
    CHECK_SYS(setsockopt(fd, SOL_SOCKET, name, &tv, sizeof tv));
    struct timeval got;
    socklen_t len = sizeof got;
    CHECK_SYS(getsockopt(fd, SOL_SOCKET, name, &got, &len));
    CHECK_EQ(got.tv_sec, 0);
    CHECK(got.tv_usec >= 190 * 1000 && got.tv_usec <= 210 * 1000); /* the kernel rounds to its ticks */
}

/* The call took about the timeout: not at once, not forever. */
static void check_took_timeout(long long t0) {
    long long took = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK(took >= TIMEOUT_NS * 8 / 10);
    CHECK_LE(took, 5 * NS_PER_S);
}

static int late_fd;
static void *late_writer(void *arg) {
    (void)arg;
    struct timespec d = {0, 300 * 1000 * 1000};
    nanosleep(&d, NULL);
    CHECK_EQ(write(late_fd, "x", 1), 1);
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    int sv[2];
    char buf[64];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    set_timeout(sv[0], SO_RCVTIMEO);

    long long t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(recv(sv[0], buf, sizeof buf, 0), EAGAIN);
    check_took_timeout(t0);
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(read(sv[0], buf, sizeof buf), EAGAIN);
    check_took_timeout(t0);
    struct iovec v = {buf, sizeof buf};
    struct msghdr m = {0};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(recvmsg(sv[0], &m, 0), EAGAIN);
    check_took_timeout(t0);
    int d;
    CHECK_SYS(d = dup(sv[0])); /* the timeout belongs to the socket */
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(recv(d, buf, sizeof buf, 0), EAGAIN);
    check_took_timeout(t0);
    CHECK_SYS(close(d));
    /* Data before the timeout is read at once. */
    CHECK_EQ(write(sv[1], "hi", 2), 2);
    CHECK_EQ(recv(sv[0], buf, sizeof buf, 0), 2);

    /* A socket without a timeout waits as long as it takes. */
    int other[2];
    CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM, 0, other));
    late_fd = other[1];
    pthread_t w;
    CHECK_OK(pthread_create(&w, NULL, late_writer, NULL));
    CHECK_EQ(recv(other[0], buf, sizeof buf, 0), 1);
    CHECK_OK(pthread_join(w, NULL));

    /* accept */
    int l;
    CHECK_SYS(l = socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_SYS(bind(l, (struct sockaddr *)&a, sizeof a));
    CHECK_SYS(listen(l, 4));
    set_timeout(l, SO_RCVTIMEO);
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(accept(l, NULL, NULL), EAGAIN);
    check_took_timeout(t0);

    /* send into a full socket: nobody reads sv[0] */
    set_timeout(sv[1], SO_SNDTIMEO);
    int small = 4096;
    CHECK_SYS(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small));
    static char big[1 << 20];
    t0 = now_ns(CLOCK_MONOTONIC);
    ssize_t n = send(sv[1], big, sizeof big, 0);
    check_took_timeout(t0);
    CHECK(n > 0 && n < (ssize_t)sizeof big); /* part of it went */
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(send(sv[1], big, sizeof big, 0), EAGAIN); /* now nothing goes */
    check_took_timeout(t0);

    printf("ok sock_timeouts: recv, read, recvmsg, dup, accept and send bounded by 200 ms\n");
    return 0;
}
