// weft-pipetest — the pipe-token benchmark (Capriccio Fig. 2) on weft: one
// weft thread per pipe, each blocking in weft_read (buffered, like the epoll loop's edge mode) and
// passing each token on with weft_write, all on one vproc. The pipes are in blocking
// mode (pipe2 with O_CLOEXEC only), as a threaded program would make them:
// weft parks the thread, not the vproc. Command line and output:
// pipetest.h; --io (or WEFT_IO) picks the reactor backend, and the record's
// system names the backend that actually ran ("weft-uring", "weft-epoll",
// "weft-poll": weft falls back to epoll when the kernel refuses io_uring).
//
// Besides tokens/s each record carries weft's own counters per token passed
// (system calls, parks, reactor waits, switches) for the timed part, which
// says where a gap to the epoll loop comes from.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "pipetest.h"
#include "weft/weft.h"

namespace {

// One vproc: the counters below are touched by weft threads of that vproc
// only, so they need no atomics (a switch happens only inside weft calls).
struct Ring {
    long pipes = 0;
    long in_flight = 0;
    std::vector<int> rfd, wfd;
    long started = 0; // readers that have run
    long writes = 0;  // tokens written into pipes so far, the injected ones included
    pt_ledger ledger{};
    uint64_t t_done = 0; // when the last token retired
    weft_sem_t done = WEFT_SEM_INITIALIZER(0);
};

pt_opts g_opts;
Ring g_ring;

[[noreturn]] void fail(const char *what, int err) {
    std::fprintf(stderr, "%s: %s: %s\n", g_opts.prog, what, std::strerror(err));
    _exit(1); // may run on a weft thread's stack
}

// A reader's buffer, as a threaded server reads: as much as the pipe holds
// (at most PT_MAX_IN_FLIGHT tokens exist, so one more never fills it), then
// token by token from memory. A read that returns less than it asked tells
// weft the pipe is drained, so the next read parks at once instead of
// paying an EAGAIN — the same knowledge the epoll loop's edge mode uses.
struct ReadBuf {
    unsigned char b[(PT_MAX_IN_FLIGHT + 1) * PT_TOKEN_BYTES];
    size_t off = 0, have = 0;
};

// One token; false at EOF (the run is over).
bool get_token(long i, ReadBuf &rb, pt_token *t) {
    while (rb.have - rb.off < sizeof *t) {
        if (rb.off) { // keep a partial token at the front
            std::memmove(rb.b, rb.b + rb.off, rb.have - rb.off);
            rb.have -= rb.off;
            rb.off = 0;
        }
        ssize_t r = weft_read(g_ring.rfd[i], rb.b + rb.have, sizeof rb.b - rb.have);
        if (r > 0) {
            rb.have += static_cast<size_t>(r);
        } else if (r == 0) {
            if (rb.have) {
                std::fprintf(stderr, "%s: EOF inside a token on pipe %ld\n", g_opts.prog, i);
                _exit(1);
            }
            return false;
        } else {
            fail("weft_read", errno);
        }
    }
    std::memcpy(t, rb.b + rb.off, sizeof *t);
    rb.off += sizeof *t;
    return true;
}

void put_token(long i, const pt_token &t) {
    auto *p = reinterpret_cast<const unsigned char *>(&t);
    size_t done = 0;
    while (done < sizeof t) {
        ssize_t w = weft_write(g_ring.wfd[i], p + done, sizeof t - done);
        if (w < 0) fail("weft_write", errno);
        done += static_cast<size_t>(w);
    }
}

void *reader(void *arg) {
    Ring &ring = g_ring;
    const long i = reinterpret_cast<intptr_t>(arg), next = i + 1 == ring.pipes ? 0 : i + 1;
    ++ring.started;
    pt_token t;
    ReadBuf rb;
    while (get_token(i, rb, &t)) {
        if (!pt_token_ok(&ring.ledger, &t, i)) pt_bad_token(&g_opts, &t, i);
        ++t.hops;
        if (ring.writes < g_opts.tokens) {
            ++ring.writes;
            t.check = pt_check(t.id, t.hops, static_cast<uint32_t>(next));
            put_token(next, t);
        } else {
            pt_retire(&ring.ledger, &t);
            if (ring.ledger.retired == ring.in_flight) {
                ring.t_done = bench_now_ns();
                weft_sem_post(&ring.done);
            }
        }
    }
    return nullptr;
}

// Counters of the timed part, per token passed, as a JSON object.
void per_token_json(const weft_stats_t &a, const weft_stats_t &b, long tokens, char *out, size_t len) {
    const double t = static_cast<double>(tokens);
    auto d = [t](uint64_t x, uint64_t y) { return static_cast<double>(y - x) / t; };
    std::snprintf(out, len,
                  "\"per_token\": {\"io_syscalls\": %.3f, \"io_parks\": %.3f, \"io_waits\": %.3f, "
                  "\"io_completions\": %.3f, \"switches\": %.3f}",
                  d(a.io_syscalls, b.io_syscalls), d(a.io_parks, b.io_parks), d(a.io_waits, b.io_waits),
                  d(a.io_completions, b.io_completions), d(a.switches, b.switches));
}

int bench_main(void *) {
    const pt_opts &o = g_opts;
    Ring &ring = g_ring;
    ring.pipes = o.pipes;
    ring.in_flight = pt_in_flight(o.pipes);
    ring.rfd.resize(static_cast<size_t>(o.pipes));
    ring.wfd.resize(static_cast<size_t>(o.pipes));
    if (pt_ledger_init(&ring.ledger, ring.in_flight) != 0) fail("calloc", ENOMEM);
    for (long i = 0; i < o.pipes; ++i) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) fail("pipe2", errno);
        ring.rfd[i] = fds[0];
        ring.wfd[i] = fds[1];
    }
    std::vector<weft_thread_t> ts(static_cast<size_t>(o.pipes));
    for (long i = 0; i < o.pipes; ++i) {
        int err = weft_thread_create(&ts[i], nullptr, reader, reinterpret_cast<void *>(static_cast<intptr_t>(i)));
        if (err) fail("weft_thread_create", err);
    }
    while (ring.started < o.pipes) weft_yield(); // FIFO: each reader runs once and parks in weft_read

    weft_stats_t s0, s1;
    weft_stats_get(-1, &s0);
    ring.writes = ring.in_flight;
    const uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    for (long j = 0; j < ring.in_flight; ++j) {
        const long p = pt_start_pipe(j, ring.in_flight, o.pipes);
        put_token(p, pt_make(static_cast<uint32_t>(j), 0, static_cast<uint32_t>(p)));
    }
    weft_sem_wait(&ring.done);
    const uint64_t c1 = bench_cpu_ns(), w1 = bench_now_ns();
    weft_stats_get(-1, &s1);
    alarm(0);
    pt_start_watchdog(o.timeout); // teardown is bounded too

    for (long i = 0; i < o.pipes; ++i) weft_close(ring.wfd[i]); // EOF: every reader returns
    for (long i = 0; i < o.pipes; ++i) {
        int err = weft_thread_join(ts[i], nullptr);
        if (err) fail("weft_thread_join", err);
    }
    for (long i = 0; i < o.pipes; ++i) weft_close(ring.rfd[i]);
    alarm(0);

    const int ok = pt_ledger_verify(&ring.ledger, &o);
    const char *backend = weft_io_backend();
    if (!backend) backend = "?";
    const char *requested = o.flag ? o.flag : std::getenv("WEFT_IO");
    const char *stack = std::getenv("WEFT_STACK_SIZE");
    // The stack as weft-micro reports it: weft's default (64 KiB), unless WEFT_STACK_SIZE overrides it.
    char stack_json[40] = "65536";
    if (stack && *stack) std::snprintf(stack_json, sizeof stack_json, "\"%.30s\"", stack);
    char system[32], params[256], extra[256];
    std::snprintf(system, sizeof system, "weft-%s", backend);
    std::snprintf(params, sizeof params,
                  "\"io\": \"%s\", \"io_requested\": \"%.20s\", \"threads\": %ld, \"vprocs\": 1, \"stack\": %s",
                  backend, requested && *requested ? requested : "default", o.pipes, stack_json);
    per_token_json(s0, s1, o.tokens, extra, sizeof extra);
    pt_report(&o, system, params, extra, ring.t_done - t0, static_cast<double>(c1 - c0) / static_cast<double>(w1 - t0),
              ok);
    std::free(ring.ledger.seen);
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    static const pt_flag io_flag = {
        "--io", "--io NAME", "  --io NAME     weft's I/O backend: uring, epoll or poll (default: WEFT_IO, else uring)\n"};
    int r = pt_parse(argc, argv, &g_opts, "weft (one weft thread per pipe, one vproc)", &io_flag);
    if (r) return r == 1 ? 0 : 2;
    bench_check_pinned(g_opts.prog);
    if (pt_reserve_fds(&g_opts) != 0) return 2;
    pt_start_watchdog(g_opts.timeout);
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = 1;
    cfg.io = g_opts.flag; // NULL: WEFT_IO, else weft's default
    int rc = weft_main_config(&cfg, bench_main, nullptr);
    if (rc < 0) {
        std::perror("weft-pipetest: weft_main");
        return 1;
    }
    return rc;
}
