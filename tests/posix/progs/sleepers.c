/* sleepers.c - sleep(3p), usleep, nanosleep(3p), clock_nanosleep(3p) (relative
 * and TIMER_ABSTIME, CLOCK_MONOTONIC and CLOCK_REALTIME) from 100 threads at
 * once. Thread i uses kind i % 6; sleep(1) sleeps 1 s, the others 300 ms.
 *  - each returns 0 having slept at least what it asked (for TIMER_ABSTIME:
 *    the clock has reached the deadline), and at most 3 s more (CTest runs two jobs: a loaded machine);
 *  - the sleeps overlap: total wall time < 5 s (100 one after another would
 *    take over 40 s);
 *  - nanosleep with tv_nsec >= 1e9 gives EINVAL; clock_nanosleep returns
 *    EINVAL (as its result) for it, and for the calling thread's CPU-time clock.
 */
#include "check.h"

#include <pthread.h>

enum { THREADS = 100, SHORT_MS = 300 };
enum { SLEEP, USLEEP, NANOSLEEP, REL_MONO, ABS_MONO, ABS_REAL, KINDS };
static const char *const kinds[KINDS] = {"sleep", "usleep", "nanosleep",
                                         "clock_nanosleep(MONOTONIC)",
                                         "clock_nanosleep(MONOTONIC, TIMER_ABSTIME)",
                                         "clock_nanosleep(REALTIME, TIMER_ABSTIME)"};
static pthread_barrier_t start;

static void *sleeper(void *arg) {
    int kind = (int)(long)arg % KINDS;
    long long want = kind == SLEEP ? NS_PER_S : SHORT_MS * NS_PER_MS;
    struct timespec rel = {.tv_sec = 0, .tv_nsec = SHORT_MS * NS_PER_MS}, dl;
    int rc = pthread_barrier_wait(&start);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    switch (kind) {
    case SLEEP: CHECK_EQ(sleep(1), 0); break;
    case USLEEP: CHECK_SYS(usleep(SHORT_MS * 1000)); break;
    case NANOSLEEP: CHECK_SYS(nanosleep(&rel, NULL)); break;
    case REL_MONO: CHECK_OK(clock_nanosleep(CLOCK_MONOTONIC, 0, &rel, NULL)); break;
    case ABS_MONO:
    case ABS_REAL: {
        clockid_t c = kind == ABS_MONO ? CLOCK_MONOTONIC : CLOCK_REALTIME;
        dl = deadline_ms(c, SHORT_MS);
        CHECK_OK(clock_nanosleep(c, TIMER_ABSTIME, &dl, NULL));
        CHECK_LE(ts_ns(dl), now_ns(c));
        break;
    }
    }
    long long slept = now_ns(CLOCK_MONOTONIC) - t0;
    if (slept < want || slept > want + 3 * NS_PER_S)
        FAIL("%s slept %lld ns (want %lld .. %lld)", kinds[kind], slept, want, want + 3 * NS_PER_S);
    return NULL;
}

int main(void) {
    WATCHDOG(30);
    pthread_t t[THREADS];

    struct timespec bad = {.tv_sec = 0, .tv_nsec = 1000000000};
    CHECK_ERR(nanosleep(&bad, NULL), EINVAL);
    CHECK_RC(clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL), EINVAL);
    struct timespec ms = {.tv_sec = 0, .tv_nsec = NS_PER_MS};
    CHECK_RC(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &ms, NULL), EINVAL);

    CHECK_OK(pthread_barrier_init(&start, NULL, THREADS + 1));
    for (long i = 0; i < THREADS; ++i) CHECK_OK(pthread_create(&t[i], NULL, sleeper, (void *)i));
    int rc = pthread_barrier_wait(&start);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    long long total = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK_LE(NS_PER_S, total);
    CHECK_LE(total, 5 * NS_PER_S);
    CHECK_OK(pthread_barrier_destroy(&start));

    printf("ok sleepers %d threads in 6 kinds of sleep overlapped: %.0f ms wall\n", THREADS,
           total / 1e6);
    return 0;
}
