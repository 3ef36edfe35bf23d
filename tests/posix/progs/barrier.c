/* barrier.c - pthread_barrier_init/wait/destroy(3p), pthread_barrierattr(3p):
 *  - count 0 gives EINVAL;
 *  - 8 threads, 10 rounds: in every round exactly one waiter gets
 *    PTHREAD_BARRIER_SERIAL_THREAD and the others 0, and nobody leaves a round
 *    before all 8 arrived;
 *  - a barrier of count 1 returns SERIAL at once; barrierattr pshared
 *    defaults to PRIVATE.
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { THREADS = 8, ROUNDS = 10 };

static pthread_barrier_t bar;
static atomic_int arrived[ROUNDS], serial[ROUNDS], zero[ROUNDS];

static void *worker(void *arg) {
    (void)arg;
    for (int r = 0; r < ROUNDS; ++r) {
        atomic_fetch_add(&arrived[r], 1);
        int rc = pthread_barrier_wait(&bar);
        CHECK_EQ(atomic_load(&arrived[r]), THREADS);
        if (rc == PTHREAD_BARRIER_SERIAL_THREAD) atomic_fetch_add(&serial[r], 1);
        else if (rc == 0) atomic_fetch_add(&zero[r], 1);
        else CHECK_RC(rc, 0);
    }
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t[THREADS];
    pthread_barrierattr_t ba;
    int pshared;

    CHECK_RC(pthread_barrier_init(&bar, NULL, 0), EINVAL);

    CHECK_OK(pthread_barrierattr_init(&ba));
    CHECK_OK(pthread_barrierattr_getpshared(&ba, &pshared));
    CHECK_EQ(pshared, PTHREAD_PROCESS_PRIVATE);
    CHECK_OK(pthread_barrier_init(&bar, &ba, 1));
    CHECK_RC(pthread_barrier_wait(&bar), PTHREAD_BARRIER_SERIAL_THREAD);
    CHECK_RC(pthread_barrier_wait(&bar), PTHREAD_BARRIER_SERIAL_THREAD);
    CHECK_OK(pthread_barrier_destroy(&bar));
    CHECK_OK(pthread_barrierattr_destroy(&ba));

    CHECK_OK(pthread_barrier_init(&bar, NULL, THREADS));
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    for (int r = 0; r < ROUNDS; ++r) {
        CHECK_EQ(atomic_load(&serial[r]), 1);
        CHECK_EQ(atomic_load(&zero[r]), THREADS - 1);
    }
    CHECK_OK(pthread_barrier_destroy(&bar));

    printf("ok barrier one SERIAL per round, %d threads x %d rounds\n", THREADS, ROUNDS);
    return 0;
}
