/* echo_client.c - load for echo_server: one thread, non-blocking sockets
 * (socket(3p) with SOCK_NONBLOCK, connect(3p) EINPROGRESS, SO_ERROR) and
 * epoll. Opens `connections` TCP connections in waves of `concurrency`: every
 * connection of a wave stays open until the whole wave has been echoed, so
 * with concurrency == connections the server holds them all at once. Each
 * connection sends a distinct message and must get exactly it back, then EOF
 * is not awaited: the client closes after the wave.
 *  - raises RLIMIT_NOFILE to its hard limit; concurrency defaults to (and is
 *    capped at) what that limit allows;
 *  - at most 256 connections are between connect() and a complete echo at
 *    any time, so the server's accept queue never overflows;
 *  - prints "ok clients N concurrency C" and exits 0.
 *
 * Usage: echo_client host port [connections=10000] [concurrency=connections]
 *        (host is 127.0.0.1 in the tests)
 */
#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

enum { PACE = 256, MSG = 64 };
enum { CONNECTING, SENDING, RECEIVING, DONE };

typedef struct {
    int fd, state, len;
    int sent, got;
    char msg[MSG], echo[MSG + 16];
} conn_t;

static int ep;
static struct sockaddr_in server;

static void start(conn_t *c, long id) {
    c->len = snprintf(c->msg, MSG, "hello from connection %ld, check %08lx\n", id,
                      (unsigned long)(id * 2654435761u));
    c->sent = c->got = 0;
    c->state = CONNECTING;
    CHECK_SYS(c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    if (connect(c->fd, (struct sockaddr *)&server, sizeof server) == -1)
        CHECK_EQ(errno, EINPROGRESS);
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev));
}

/* Advance c as far as it goes without blocking; returns 1 when it is echoed. */
static int step(conn_t *c, unsigned events) {
    if (c->state == CONNECTING) {
        int err = -1;
        socklen_t len = sizeof err;
        CHECK_SYS(getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len));
        if (err == 0 && !(events & EPOLLOUT)) return 0;
        CHECK_RC(err, 0);
        c->state = SENDING;
    }
    if (events & (EPOLLERR | EPOLLHUP)) FAIL("connection error (events %#x)", events);
    if (c->state == SENDING) {
        while (c->sent < c->len) {
            ssize_t n = write(c->fd, c->msg + c->sent, (size_t)(c->len - c->sent));
            if (n == -1 && errno == EAGAIN) return 0;
            CHECK_SYS(n);
            c->sent += (int)n;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev));
        c->state = RECEIVING;
        return 0;
    }
    if (c->state == RECEIVING) {
        for (;;) {
            ssize_t n = read(c->fd, c->echo + c->got, sizeof c->echo - (size_t)c->got);
            if (n == -1 && errno == EAGAIN) return 0;
            CHECK_SYS(n);
            if (n == 0) FAIL("EOF after %d of %d echoed bytes", c->got, c->len);
            c->got += (int)n;
            CHECK_LE(c->got, c->len);
            if (c->got == c->len) break;
        }
        if (memcmp(c->echo, c->msg, (size_t)c->len) != 0)
            FAIL("echo (got \"%.*s\", want \"%.*s\")", c->len, c->echo, c->len, c->msg);
        CHECK_SYS(epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL));
        c->state = DONE;
        return 1;
    }
    FAIL("event on a finished connection (events %#x)", events);
}

int main(int argc, char **argv) {
    WATCHDOG(60);
    if (argc < 3) FAIL("usage: echo_client host port [connections] [concurrency] (got %d args, want >= 2)", argc - 1);
    long total = argc > 3 ? atol(argv[3]) : 10000;
    long conc = argc > 4 ? atol(argv[4]) : total;
    CHECK(total >= 1 && conc >= 1);

    struct rlimit rl;
    CHECK_SYS(getrlimit(RLIMIT_NOFILE, &rl));
    rl.rlim_cur = rl.rlim_max;
    CHECK_SYS(setrlimit(RLIMIT_NOFILE, &rl));
    if (rl.rlim_cur != RLIM_INFINITY && conc > (long)rl.rlim_cur - 32) conc = (long)rl.rlim_cur - 32;
    if (conc > total) conc = total;
    CHECK(conc >= 1);

    server.sin_family = AF_INET;
    server.sin_port = htons((unsigned short)atoi(argv[2]));
    CHECK_EQ(inet_pton(AF_INET, argv[1], &server.sin_addr), 1);
    CHECK_SYS(ep = epoll_create1(EPOLL_CLOEXEC));
    conn_t *conns = calloc((size_t)conc, sizeof *conns);
    CHECK(conns != NULL);
    struct epoll_event evs[256];

    long long t0 = now_ns(CLOCK_MONOTONIC);
    for (long base = 0; base < total; base += conc) {
        long wave = total - base < conc ? total - base : conc, started = 0, echoed = 0;
        while (echoed < wave) {
            while (started < wave && started - echoed < PACE) {
                start(&conns[started], base + started);
                ++started;
            }
            int n = epoll_wait(ep, evs, 256, 10000);
            if (n == -1 && errno == EINTR) continue;
            CHECK_SYS(n);
            if (n == 0) FAIL("no progress for 10 s (got %ld of %ld echoed in this wave)", echoed, wave);
            for (int i = 0; i < n; ++i) echoed += step(evs[i].data.ptr, evs[i].events);
        }
        for (long i = 0; i < wave; ++i) CHECK_SYS(close(conns[i].fd));
    }
    double secs = (now_ns(CLOCK_MONOTONIC) - t0) / 1e9;

    printf("ok clients %ld concurrency %ld in %.2f s\n", total, conc, secs);
    free(conns);
    return 0;
}
