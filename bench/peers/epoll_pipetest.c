/*
 * epoll-pipetest — the pipe-token benchmark (Capriccio Fig. 2) as a
 * hand-written event loop: one kernel thread, non-blocking pipes, one
 * epoll instance. The best event-driven baseline weft is held to. Command
 * line and output: bench/micro/pipetest.h; system id "epoll".
 *
 * The loop, and why:
 *   - edge-triggered EPOLLIN on every read end, registered once (the
 *     default, --trigger edge): one read(2) per readiness event takes all a
 *     pipe holds, and since at most 128 tokens exist a read that returns
 *     less than its 129-token buffer has drained the pipe — no second read
 *     to see EAGAIN. Each token is still passed on by its own write, as the
 *     threaded programs do. Measured here ~5% faster than level-triggered
 *     at 64-4,096 pipes (within the noise at 8);
 *   - --trigger level: level-triggered, one 12-byte read per event (a pipe
 *     holding two tokens is reported again), the same reads as the threaded
 *     programs make;
 *   - a short read keeps its bytes in the pipe's slot until the rest arrives;
 *   - the write to the next pipe is made at once and never blocks: at most
 *     128 tokens x 12 bytes are in flight, far below a pipe's capacity
 *     (even the 2 pages the kernel gives past pipe-user-pages-soft), so a
 *     short write is a broken invariant and stops the run;
 *   - epoll_wait fetches up to 512 events per call.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../micro/pipetest.h"

#define SYSTEM "epoll"
#define MAX_EVENTS 512
/* Edge-triggered reads take everything a pipe holds in one read: at most
 * PT_MAX_IN_FLIGHT tokens exist, so a read that returns less than this
 * buffer has drained the pipe and no read to EAGAIN is needed. */
#define EDGE_READ_BYTES ((PT_MAX_IN_FLIGHT + 1) * PT_TOKEN_BYTES)

/* A read end's partial token. */
struct slot {
    unsigned char buf[PT_TOKEN_BYTES];
    unsigned have; /* bytes of buf filled */
};

struct ring {
    const pt_opts *o;
    long n, k;         /* pipes, tokens in flight */
    int *rfd, *wfd;    /* [n] */
    struct slot *slot; /* [n] */
    long writes;       /* tokens written into pipes so far, the injected ones included */
    pt_ledger ledger;
};

static void die(const char *prog, const char *what) {
    fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
    exit(1);
}

static void put_token(const pt_opts *o, int fd, const pt_token *t) {
    ssize_t w = write(fd, t, sizeof *t);
    if (w == (ssize_t)sizeof *t) return;
    if (w < 0) die(o->prog, "write");
    fprintf(stderr, "%s: short write (%zd of %d bytes) to a pipe holding at most %d tokens\n", o->prog, w,
            PT_TOKEN_BYTES, PT_MAX_IN_FLIGHT);
    exit(1);
}

/* A whole token arrived on pipe i: check it, pass it on or retire it. */
static void on_token(struct ring *r, long i, const unsigned char *bytes) {
    pt_token t;
    memcpy(&t, bytes, sizeof t);
    if (!pt_token_ok(&r->ledger, &t, i)) pt_bad_token(r->o, &t, i);
    ++t.hops;
    if (r->writes < r->o->tokens) {
        ++r->writes;
        const long next = i + 1 == r->n ? 0 : i + 1;
        t.check = pt_check(t.id, t.hops, (uint32_t)next);
        put_token(r->o, r->wfd[next], &t);
    } else {
        pt_retire(&r->ledger, &t);
    }
}

static void check_read(const struct ring *r, long i, ssize_t got) {
    if (got < 0 && errno != EAGAIN) die(r->o->prog, "read");
    if (got == 0) {
        fprintf(stderr, "%s: unexpected EOF on pipe %ld\n", r->o->prog, i);
        exit(1);
    }
}

/* Level-triggered: one read of (the rest of) one token. */
static void on_readable_level(struct ring *r, long i) {
    struct slot *s = &r->slot[i];
    ssize_t got = read(r->rfd[i], s->buf + s->have, PT_TOKEN_BYTES - s->have);
    check_read(r, i, got);
    if (got < 0) return;
    s->have += (unsigned)got;
    if (s->have < PT_TOKEN_BYTES) return;
    s->have = 0;
    on_token(r, i, s->buf);
}

/* Edge-triggered: one read drains the pipe; each token is passed on by
 * its own write, as the threaded programs do. */
static void on_readable_edge(struct ring *r, long i) {
    struct slot *s = &r->slot[i];
    unsigned char buf[EDGE_READ_BYTES];
    memcpy(buf, s->buf, s->have);
    ssize_t got = read(r->rfd[i], buf + s->have, sizeof buf - s->have);
    check_read(r, i, got);
    if (got < 0) return;
    if ((size_t)got == sizeof buf - s->have) {
        fprintf(stderr, "%s: pipe %ld holds more than the %d tokens in flight\n", r->o->prog, i, PT_MAX_IN_FLIGHT);
        exit(1);
    }
    size_t total = s->have + (size_t)got, off = 0;
    for (; off + PT_TOKEN_BYTES <= total; off += PT_TOKEN_BYTES) on_token(r, i, buf + off);
    s->have = (unsigned)(total - off);
    memcpy(s->buf, buf + off, s->have);
}

int main(int argc, char **argv) {
    static const pt_flag trigger_flag = {
        "--trigger", "--trigger level|edge",
        "  --trigger T   edge (default): EPOLLET, one read drains the pipe (each token still its own\n"
        "                write); level: one 12-byte read per readiness event\n"};
    pt_opts o;
    int r = pt_parse(argc, argv, &o, "a single-threaded epoll event loop", &trigger_flag);
    if (r) return r == 1 ? 0 : 2;
    const char *trigger = o.flag ? o.flag : "edge";
    const int edge = !strcmp(trigger, "edge");
    if (!edge && strcmp(trigger, "level")) {
        fprintf(stderr, "%s: --trigger must be level or edge\n", o.prog);
        return 2;
    }
    bench_check_pinned(o.prog);
    if (pt_reserve_fds(&o) != 0) return 2;
    pt_start_watchdog(o.timeout);

    struct ring ring = {.o = &o, .n = o.pipes, .k = pt_in_flight(o.pipes)};
    const long n = ring.n, k = ring.k;
    ring.rfd = malloc((size_t)n * sizeof *ring.rfd);
    ring.wfd = malloc((size_t)n * sizeof *ring.wfd);
    ring.slot = calloc((size_t)n, sizeof *ring.slot);
    if (!ring.rfd || !ring.wfd || !ring.slot || pt_ledger_init(&ring.ledger, k) != 0) die(o.prog, "malloc");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die(o.prog, "epoll_create1");
    for (long i = 0; i < n; ++i) {
        int fds[2];
        if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) die(o.prog, "pipe2");
        ring.rfd[i] = fds[0];
        ring.wfd[i] = fds[1];
        struct epoll_event ev = {.events = EPOLLIN | (edge ? EPOLLET : 0), .data.u64 = (uint64_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, ring.rfd[i], &ev) != 0) die(o.prog, "epoll_ctl");
    }

    struct epoll_event events[MAX_EVENTS];
    ring.writes = k;
    const uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    for (long j = 0; j < k; ++j) {
        const long p = pt_start_pipe(j, k, n);
        pt_token t = pt_make((uint32_t)j, 0, (uint32_t)p);
        put_token(&o, ring.wfd[p], &t);
    }
    while (ring.ledger.retired < k) {
        int ready = epoll_wait(ep, events, MAX_EVENTS, -1);
        if (ready < 0) {
            if (errno == EINTR) continue;
            die(o.prog, "epoll_wait");
        }
        for (int e = 0; e < ready; ++e) {
            const long i = (long)events[e].data.u64;
            if (edge)
                on_readable_edge(&ring, i);
            else
                on_readable_level(&ring, i);
        }
    }
    const uint64_t t1 = bench_now_ns(), c1 = bench_cpu_ns();
    alarm(0);

    for (long i = 0; i < n; ++i) {
        close(ring.rfd[i]);
        close(ring.wfd[i]);
    }
    close(ep);
    const int ok = pt_ledger_verify(&ring.ledger, &o);
    char extra_params[96];
    snprintf(extra_params, sizeof extra_params, "\"trigger\": \"%s\", \"events_per_wait\": %d", trigger, MAX_EVENTS);
    pt_report(&o, SYSTEM, extra_params, "", t1 - t0, (double)(c1 - c0) / (double)(t1 - t0), ok);
    free(ring.rfd);
    free(ring.wfd);
    free(ring.slot);
    free(ring.ledger.seen);
    return ok ? 0 : 1;
}
