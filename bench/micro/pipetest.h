/*
 * pipetest.h — the shared part of the pipe-token benchmark (Capriccio,
 * SOSP'03, §2.6 and Fig. 2): command line, the ring of pipes, the token
 * format and its ledger, the watchdog, the output. Header-only, C11 and
 * C++20; the clock and CPU-share helpers come from harness.h.
 *
 * The benchmark: N pipes in a ring; K = N/4 tokens circulate when N < 128,
 * else exactly 128. A token is 12 bytes. A token read from pipe i is written
 * to pipe (i+1) % N. The run ends after exactly T tokens have been passed
 * (one pass = one token written into a pipe and read out of it): the K
 * injected tokens count as T's first K writes; a reader forwards a token while
 * fewer than T writes were made and otherwise retires it, so exactly T reads
 * happen and the run ends when all K tokens are retired. The time is taken
 * from just before the injection to the last retirement; the result is
 * T / that time in tokens per second.
 *
 * Every token is checked on every read (see pt_check) and once more when it
 * retires: each id retires exactly once and the hops of all tokens add up
 * to T. Any mismatch makes the binary exit 1 (at once for a damaged token).
 *
 * Command line (the same for every system binary, plus one flag of its own:
 * weft's --io NAME, the epoll loop's --trigger level|edge):
 *   NAME [--pipes N] [--tokens T] [--timeout S] [--FLAG VALUE] [--json]
 *   NAME --help
 */
#ifndef WEFT_BENCH_PIPETEST_H
#define WEFT_BENCH_PIPETEST_H

#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>

#define PT_BENCH_ID "fig2.pipe_tokens"
#define PT_TOKEN_BYTES 12
/* Tokens in flight: N/4 below 128 pipes, else 128 (the paper's rule). */
#define PT_MAX_IN_FLIGHT 128
/* The paper passes 5M tokens; 1M keeps a point at ~1-3 s on this machine
 * (epoll ~1M tokens/s pinned to one CPU, NPTL ~0.4M; see pipetest.py). */
#define PT_DEFAULT_TOKENS 1000000L
#define PT_DEFAULT_PIPES 64L
#define PT_DEFAULT_TIMEOUT 120.0
/* Descriptors besides the ring: stdio, epoll/io_uring, the runtime's own. */
#define PT_FD_HEADROOM 64

/* The 12 bytes on the wire. check ties the token to the pipe it was written
 * into, so a torn, misrouted or duplicated token fails on the next read. */
typedef struct pt_token {
    uint32_t id;    /* 0 .. K-1 */
    uint32_t hops;  /* reads of this token so far */
    uint32_t check; /* pt_check(id, hops, pipe it was written into) */
} pt_token;
#ifdef __cplusplus
static_assert(sizeof(pt_token) == PT_TOKEN_BYTES, "a token is 12 bytes");
#else
_Static_assert(sizeof(pt_token) == PT_TOKEN_BYTES, "a token is 12 bytes");
#endif

static inline uint32_t pt_check(uint32_t id, uint32_t hops, uint32_t pipe) {
    uint64_t h = ((uint64_t)id << 32 | hops) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)pipe * 0xC2B2AE3D27D4EB4Full + 0x5eed;
    return (uint32_t)(h ^ (h >> 29));
}

/* The token as written into pipe `pipe`. */
static inline pt_token pt_make(uint32_t id, uint32_t hops, uint32_t pipe) {
    pt_token t;
    t.id = id;
    t.hops = hops;
    t.check = pt_check(id, hops, pipe);
    return t;
}

static inline long pt_in_flight(long pipes) { return pipes < 128 ? pipes / 4 : PT_MAX_IN_FLIGHT; }

/* The pipe token j of K is injected into: spread evenly around the ring. */
static inline long pt_start_pipe(long j, long k, long pipes) { return j * pipes / k; }

typedef struct pt_opts {
    const char *prog;
    long pipes;     /* N */
    long tokens;    /* T: passes in total */
    double timeout; /* seconds before the watchdog ends the process */
    const char *flag; /* the value of the binary's own flag (pt_flag), or NULL */
    int json;
} pt_opts;

/* A binary's own flag: "--NAME VALUE", one line of help. */
typedef struct pt_flag {
    const char *name;  /* with the dashes: "--io" */
    const char *usage; /* "--io NAME" */
    const char *help;  /* its line in --help, with the newline */
} pt_flag;

static inline void pt_usage(FILE *f, const char *prog, const char *what, const pt_flag *flag) {
    fprintf(f,
            "usage: %s [--pipes N] [--tokens T] [--timeout S]%s%s%s [--json]\n"
            "       %s --help\n"
            "Pipe-token benchmark (Capriccio Fig. 2) on %s.\n"
            "N pipes in a ring, N/4 tokens of 12 bytes in flight (128 from 128 pipes up);\n"
            "a token read from pipe i is written to pipe (i+1) %% N. Reports tokens/s.\n"
            "Pin the process to one CPU yourself (taskset -c 1 %s ...).\n"
            "  --pipes N     pipes in the ring (default %ld, at least 4; 2 descriptors each)\n"
            "  --tokens T    tokens passed in total (default %ld; the paper: 5000000)\n"
            "  --timeout S   give up (exit 3) after S seconds (default %.0f)\n"
            "%s"
            "  --json        one JSON object on stdout\n"
            "Exit status: 0 ok; 1 a token arrived damaged, lost or duplicated, or a call failed;\n"
            "2 usage or too few descriptors; 3 timed out.\n",
            prog, flag ? " [" : "", flag ? flag->usage : "", flag ? "]" : "", prog, what, prog, PT_DEFAULT_PIPES,
            PT_DEFAULT_TOKENS, PT_DEFAULT_TIMEOUT, flag ? flag->help : "");
}

/* 0: run; 1: done (help printed), exit 0; 2: usage error. */
static inline int pt_parse(int argc, char **argv, pt_opts *o, const char *what, const pt_flag *flag) {
    memset(o, 0, sizeof *o);
    o->prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    o->pipes = PT_DEFAULT_PIPES;
    o->tokens = PT_DEFAULT_TOKENS;
    o->timeout = PT_DEFAULT_TIMEOUT;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            pt_usage(stdout, o->prog, what, flag);
            return 1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--pipes") && has_val) {
            o->pipes = atol(argv[++i]);
            if (o->pipes < 4 || o->pipes > 1000000) {
                fprintf(stderr, "%s: --pipes must be 4 .. 1000000\n", o->prog);
                return 2;
            }
        } else if (!strcmp(a, "--tokens") && has_val) {
            o->tokens = atol(argv[++i]);
            if (o->tokens <= 0 || o->tokens > 4000000000L) { /* hops are 32-bit */
                fprintf(stderr, "%s: --tokens must be 1 .. 4000000000\n", o->prog);
                return 2;
            }
        } else if (!strcmp(a, "--timeout") && has_val) {
            o->timeout = atof(argv[++i]);
            if (!(o->timeout > 0)) {
                fprintf(stderr, "%s: --timeout must be > 0\n", o->prog);
                return 2;
            }
        } else if (flag && !strcmp(a, flag->name) && has_val) {
            o->flag = argv[++i];
        } else {
            fprintf(stderr, "%s: bad argument '%s'\n", o->prog, a);
            pt_usage(stderr, o->prog, what, flag);
            return 2;
        }
    }
    if (o->tokens < pt_in_flight(o->pipes)) {
        fprintf(stderr, "%s: --tokens %ld is below the %ld tokens in flight\n", o->prog, o->tokens,
                pt_in_flight(o->pipes));
        return 2;
    }
    return 0;
}

/* Raise the soft descriptor limit to the hard one when the ring needs it.
 * 0, or -1 after saying why on stderr (exit 2: the caller asked too much). */
static inline int pt_reserve_fds(const pt_opts *o) {
    struct rlimit rl;
    const rlim_t need = (rlim_t)(2 * o->pipes + PT_FD_HEADROOM);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
    if (rl.rlim_cur >= need) return 0;
    if (rl.rlim_max < need) {
        fprintf(stderr, "%s: %ld pipes need %lu descriptors; RLIMIT_NOFILE hard limit is %lu (at most %ld pipes)\n",
                o->prog, o->pipes, (unsigned long)need, (unsigned long)rl.rlim_max,
                (long)((rl.rlim_max - PT_FD_HEADROOM) / 2));
        return -1;
    }
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "%s: setrlimit(RLIMIT_NOFILE): %s\n", o->prog, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the watchdog: a run that hangs (a lost wakeup) ends, exit 3 ---- */

static void pt_on_alarm(int sig) {
    static const char msg[] = "pipetest: timed out (--timeout): tokens stopped moving or the run is too long\n";
    (void)sig;
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(3);
}

static inline void pt_start_watchdog(double seconds) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pt_on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)(seconds + 0.999));
}

/* ---- the ledger: what retired tokens must add up to ---- */

typedef struct pt_ledger {
    long in_flight;      /* K */
    long retired;        /* tokens retired so far */
    uint64_t hops;       /* sum of the hops of retired tokens */
    long twice;          /* ids retired more than once */
    unsigned char *seen; /* [K]: retired already */
} pt_ledger;

static inline int pt_ledger_init(pt_ledger *l, long k) {
    memset(l, 0, sizeof *l);
    l->in_flight = k;
    l->seen = (unsigned char *)calloc((size_t)k, 1);
    return l->seen ? 0 : -1;
}

/* Check a token read from pipe `pipe`; 1 if intact. */
static inline int pt_token_ok(const pt_ledger *l, const pt_token *t, long pipe) {
    return t->id < (uint64_t)l->in_flight && t->check == pt_check(t->id, t->hops, (uint32_t)pipe);
}

/* A token read from pipe `pipe` failed pt_token_ok: the run cannot balance
 * any more, stop now (exit 1) rather than wait for the watchdog. _exit: may
 * be called on a user-level thread's stack. */
static inline void pt_bad_token(const pt_opts *o, const pt_token *t, long pipe) {
    fprintf(stderr, "%s: TOKEN CHECK FAILED: damaged or misrouted token read from pipe %ld: id %u hops %u check %08x\n",
            o->prog, pipe, t->id, t->hops, t->check);
    _exit(1);
}

/* Account for a retired token (hops already counts its last read). */
static inline void pt_retire(pt_ledger *l, const pt_token *t) {
    if (l->seen[t->id]) ++l->twice;
    l->seen[t->id] = 1;
    l->hops += t->hops;
    ++l->retired;
}

/* 1 if every token came back intact; else says what went wrong on stderr. */
static inline int pt_ledger_verify(const pt_ledger *l, const pt_opts *o) {
    int ok = l->twice == 0 && l->retired == l->in_flight && l->hops == (uint64_t)o->tokens;
    if (!ok)
        fprintf(stderr,
                "%s: TOKEN CHECK FAILED: %ld ids retired twice, %ld of %ld tokens retired, "
                "hops %llu (expected %ld)\n",
                o->prog, l->twice, l->retired, l->in_flight, (unsigned long long)l->hops, o->tokens);
    return ok;
}

/* ---- output ---- */

/* A human line, or with --json one JSON object. extra_params: more
 * "key": value pairs for params (without braces, may be ""); extra: more
 * top-level pairs (may be ""). */
static inline void pt_report(const pt_opts *o, const char *system, const char *extra_params, const char *extra,
                             uint64_t elapsed_ns, double cpu_share, int verified) {
    const double secs = (double)elapsed_ns / 1e9;
    const double rate = secs > 0 ? (double)o->tokens / secs : 0;
    const int ep = extra_params && *extra_params, ex = extra && *extra;
    if (o->json) {
        printf("{\"benchmark\": \"%s\", \"system\": \"%s\", \"params\": {\"pipes\": %ld, \"tokens\": %ld, "
               "\"in_flight\": %ld, \"token_bytes\": %d%s%s}, \"unit\": \"tokens/s\", \"value\": %.1f, "
               "\"seconds\": %.6f, \"cpu_share\": %.3f, \"verified\": %s%s%s}\n",
               PT_BENCH_ID, system, o->pipes, o->tokens, pt_in_flight(o->pipes), PT_TOKEN_BYTES, ep ? ", " : "",
               ep ? extra_params : "", rate, secs, cpu_share, verified ? "true" : "false", ex ? ", " : "",
               ex ? extra : "");
    } else {
        printf("%-10s %s pipes=%ld tokens=%ld in_flight=%ld: %.0f tokens/s (%.3f s, cpu_share %.2f, %s)%s%s\n", system,
               PT_BENCH_ID, o->pipes, o->tokens, pt_in_flight(o->pipes), rate, secs, cpu_share,
               verified ? "verified" : "CHECK FAILED", ex ? "  " : "", ex ? extra : "");
    }
    fflush(stdout);
}

#endif /* WEFT_BENCH_PIPETEST_H */
