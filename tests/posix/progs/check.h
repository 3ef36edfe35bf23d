/* check.h - assertions shared by the POSIX shim test programs.
 *
 * Every program in this directory is plain C11 + POSIX (built with
 * -std=c11 -D_GNU_SOURCE -pthread, no weft headers) and must pass on glibc's
 * NPTL before it is used to test weft's shim (weft-run PROGRAM ARGS).
 *
 * On the first failed check a program prints
 *     FAIL <file>:<line>: <what> (got X, want Y)
 * on stderr and exits 1.  On success it prints one "ok <name> ..." line on
 * stdout and exits 0.  WATCHDOG(secs) turns a hang into such a failure.
 *
 *   CHECK(cond)            cond is true
 *   CHECK_EQ(expr, want)   integer expr == want
 *   CHECK_RC(call, want)   pthread-style call returns want (0 or an error number)
 *   CHECK_OK(call)         pthread-style call returns 0
 *   CHECK_SYS(call)        errno-style call does not return -1 (e.g. CHECK_SYS(fd = open(...)))
 *   CHECK_ERR(call, err)   errno-style call returns -1 with errno == err
 *   CHECK_LE(a, b)         integer a <= b (used for timing bounds)
 */
#ifndef WEFT_POSIX_CHECK_H
#define WEFT_POSIX_CHECK_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Symbolic name of the error numbers these tests meet, "E?" otherwise. */
static inline const char *err_name(long long e) {
    switch (e) {
    case EAGAIN: return "EAGAIN";
    case EBADF: return "EBADF";
    case EBUSY: return "EBUSY";
    case ECHILD: return "ECHILD";
    case EDEADLK: return "EDEADLK";
    case EINTR: return "EINTR";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    case ENOMEM: return "ENOMEM";
    case ENOTSUP: return "ENOTSUP";
    case EPERM: return "EPERM";
    case ESRCH: return "ESRCH";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EOVERFLOW: return "EOVERFLOW";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case EPIPE: return "EPIPE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    default: return "E?";
    }
}

/* "0", or e.g. "EBUSY(16)", in buf. */
static inline const char *err_str(long long e, char *buf, size_t n) {
    if (e == 0) snprintf(buf, n, "0");
    else snprintf(buf, n, "%s(%lld)", err_name(e), e);
    return buf;
}

#define FAIL(...)                                                        \
    do {                                                                 \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
        fprintf(stderr, __VA_ARGS__);                                    \
        fputc('\n', stderr);                                             \
        exit(1);                                                         \
    } while (0)

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) FAIL("%s (got false, want true)", #cond);           \
    } while (0)

#define CHECK_EQ(expr, want)                                             \
    do {                                                                 \
        long long got_ = (long long)(expr), want_ = (long long)(want);   \
        if (got_ != want_) FAIL("%s (got %lld, want %lld)", #expr, got_, want_); \
    } while (0)

#define CHECK_LE(a, b)                                                   \
    do {                                                                 \
        long long a_ = (long long)(a), b_ = (long long)(b);              \
        if (!(a_ <= b_)) FAIL("%s <= %s (got %lld, want <= %lld)", #a, #b, a_, b_); \
    } while (0)

#define CHECK_RC(call, want)                                             \
    do {                                                                 \
        long long got_ = (long long)(call), want_ = (long long)(want);   \
        char g_[40], w_[40];                                             \
        if (got_ != want_)                                               \
            FAIL("%s (got %s, want %s)", #call, err_str(got_, g_, sizeof g_), \
                 err_str(want_, w_, sizeof w_));                         \
    } while (0)

#define CHECK_OK(call) CHECK_RC(call, 0)

#define CHECK_SYS(call)                                                  \
    do {                                                                 \
        if ((long long)(call) == -1) {                                   \
            char g_[40];                                                 \
            FAIL("%s (got -1 errno %s, want success)", #call,            \
                 err_str(errno, g_, sizeof g_));                         \
        }                                                                \
    } while (0)

#define CHECK_ERR(call, err)                                             \
    do {                                                                 \
        errno = 0;                                                       \
        long long got_ = (long long)(call);                              \
        int e_ = errno, want_ = (err);                                   \
        char g_[40], w_[40];                                             \
        if (got_ != -1 || e_ != want_)                                   \
            FAIL("%s (got %lld errno %s, want -1 errno %s)", #call, got_, \
                 err_str(e_, g_, sizeof g_), err_str(want_, w_, sizeof w_)); \
    } while (0)

/* ---- time ---- */

#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

static inline long long ts_ns(struct timespec ts) {
    return (long long)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static inline long long now_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) FAIL("clock_gettime(%d) (errno %d)", (int)clock, errno);
    return ts_ns(ts);
}

/* The absolute time ms milliseconds from now on clock (negative: in the past). */
static inline struct timespec deadline_ms(clockid_t clock, long long ms) {
    long long t = now_ns(clock) + ms * NS_PER_MS;
    struct timespec ts = {.tv_sec = t / NS_PER_S, .tv_nsec = t % NS_PER_S};
    return ts;
}

static inline void sleep_ms(long long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * NS_PER_MS};
    while (nanosleep(&ts, &ts) == -1)
        if (errno != EINTR) FAIL("nanosleep (errno %d)", errno);
}

/* ---- watchdog: alarm(secs); on expiry print a FAIL line and exit 1 ---- */

static const char *watchdog_where_;
static void watchdog_fire_(int sig) {
    (void)sig;
    static const char msg[] = "FAIL watchdog: program did not finish in time at ";
    if (write(2, msg, sizeof msg - 1) < 0 ||
        write(2, watchdog_where_, strlen(watchdog_where_)) < 0 || write(2, "\n", 1) < 0)
        _exit(1);
    _exit(1);
}

#define WATCHDOG_STR2_(x) #x
#define WATCHDOG_STR_(x) WATCHDOG_STR2_(x)
#define WATCHDOG(secs)                                                   \
    do {                                                                 \
        watchdog_where_ = __FILE__ ":" WATCHDOG_STR_(__LINE__);          \
        struct sigaction sa_;                                            \
        memset(&sa_, 0, sizeof sa_);                                     \
        sa_.sa_handler = watchdog_fire_;                                 \
        CHECK_SYS(sigaction(SIGALRM, &sa_, NULL));                       \
        alarm(secs);                                                     \
    } while (0)

#endif
