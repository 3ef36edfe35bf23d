/* once.c - pthread_once(3p): "The first call to pthread_once() by any thread in a
 * process, with a given once_control, shall call the init_routine with no
 * arguments. Subsequent calls ... shall not call the init_routine. On return
 * from pthread_once(), init_routine shall have completed."
 *  - 50 threads released together race on one PTHREAD_ONCE_INIT control whose
 *    routine sleeps 20 ms: it runs exactly once, and every caller sees it done;
 *  - a second control is independent; calling pthread_once again is a no-op.
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { THREADS = 50 };

static pthread_once_t once = PTHREAD_ONCE_INIT, other = PTHREAD_ONCE_INIT;
static atomic_int runs, finished, other_runs;
static pthread_barrier_t start;

static void init_routine(void) {
    atomic_fetch_add(&runs, 1);
    sleep_ms(20); /* keep the others waiting inside pthread_once */
    atomic_store(&finished, 1);
}

static void other_routine(void) { atomic_fetch_add(&other_runs, 1); }

static void *racer(void *arg) {
    (void)arg;
    int rc = pthread_barrier_wait(&start);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
    CHECK_OK(pthread_once(&once, init_routine));
    CHECK_EQ(atomic_load(&finished), 1); /* init_routine has completed */
    CHECK_EQ(atomic_load(&runs), 1);
    return NULL;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t[THREADS];
    CHECK_OK(pthread_barrier_init(&start, NULL, THREADS));
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_create(&t[i], NULL, racer, NULL));
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_join(t[i], NULL));
    CHECK_EQ(atomic_load(&runs), 1);

    CHECK_OK(pthread_once(&once, init_routine));
    CHECK_EQ(atomic_load(&runs), 1);
    CHECK_EQ(atomic_load(&other_runs), 0);
    CHECK_OK(pthread_once(&other, other_routine));
    CHECK_OK(pthread_once(&other, other_routine));
    CHECK_EQ(atomic_load(&other_runs), 1);
    CHECK_OK(pthread_barrier_destroy(&start));

    printf("ok once init ran once for %d racing threads\n", THREADS);
    return 0;
}
