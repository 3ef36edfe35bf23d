/* sigwait.c - sigwait(3p), sigwaitinfo(3p), sigtimedwait(3p) while other
 * threads go on (Apache's -X mode waits for SIGTERM so on its main thread
 * while its workers serve: a wait that held the kernel thread stopped them).
 *  - sigtimedwait with nothing pending gives EAGAIN after its timeout;
 *  - a signal pending before the call is returned at once, with its siginfo
 *    (si_signo, si_code SI_USER, si_pid);
 *  - sigwait returns a signal that another thread sends after 20 sleeps of
 *    5 ms, all of which it has done meanwhile;
 *  - sigtimedwait with a 10 s timeout returns a signal sent after 50 ms.
 * SIGUSR1 and SIGUSR2 must be blocked in every thread, or kill() may hand
 * them to one that is not waiting. Blocking them in main reaches main's
 * thread and the threads made after it, not kernel threads a runtime made
 * before main (weft-run --vprocs 2): the program blocks them and executes
 * itself again, which starts with them blocked from its first instruction.
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { ROUNDS = 20 };
static atomic_int rounds;

static void *count_then_signal(void *arg) {
    for (int i = 0; i < ROUNDS; ++i) {
        sleep_ms(5);
        atomic_fetch_add(&rounds, 1);
    }
    CHECK_SYS(kill(getpid(), (int)(long)arg));
    return NULL;
}

static void *signal_later(void *arg) {
    sleep_ms(50);
    CHECK_SYS(kill(getpid(), (int)(long)arg));
    return NULL;
}

int main(int argc, char **argv) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    if (argc < 2) {
        CHECK_OK(pthread_sigmask(SIG_BLOCK, &set, NULL));
        char *const again[] = {argv[0], "blocked", NULL};
        execv("/proc/self/exe", again);
        FAIL("execv(/proc/self/exe) (errno %d)", errno);
    }
    WATCHDOG(60);
    siginfo_t si;
    struct timespec ms50 = {0, 50 * NS_PER_MS}, s10 = {10, 0};
    pthread_t t;
    int sig = 0;

    long long t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_ERR(sigtimedwait(&set, &si, &ms50), EAGAIN);
    long long took = now_ns(CLOCK_MONOTONIC) - t0;
    CHECK_LE(50 * NS_PER_MS, took);
    CHECK_LE(took, 1000 * NS_PER_MS);

    CHECK_SYS(kill(getpid(), SIGUSR2));
    CHECK_EQ(sigwaitinfo(&set, &si), SIGUSR2);
    CHECK_EQ(si.si_signo, SIGUSR2);
    CHECK_EQ(si.si_code, SI_USER);
    CHECK_EQ(si.si_pid, getpid());

    CHECK_OK(pthread_create(&t, NULL, count_then_signal, (void *)(long)SIGUSR1));
    CHECK_OK(sigwait(&set, &sig));
    CHECK_EQ(sig, SIGUSR1);
    CHECK_EQ(atomic_load(&rounds), ROUNDS);
    CHECK_OK(pthread_join(t, NULL));

    CHECK_OK(pthread_create(&t, NULL, signal_later, (void *)(long)SIGUSR2));
    t0 = now_ns(CLOCK_MONOTONIC);
    CHECK_EQ(sigtimedwait(&set, &si, &s10), SIGUSR2);
    CHECK_LE(now_ns(CLOCK_MONOTONIC) - t0, 5 * NS_PER_S);
    CHECK_OK(pthread_join(t, NULL));

    printf("ok sigwait: timeout, pending, waited while %d rounds ran, timed\n", ROUNDS);
    return 0;
}
