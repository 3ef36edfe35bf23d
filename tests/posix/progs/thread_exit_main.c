/* thread_exit_main.c - pthread_exit(3p) from main: "The process shall exit with
 * an exit status of 0 after the last thread has been terminated", and the other
 * threads keep running after the initial thread has exited.
 *  - main starts 4 workers (each 20 x 1 ms sleeps) and a joiner, then calls
 *    pthread_exit((void *)42);
 *  - the joiner joins the initial thread (it is joinable) and gets 42, then
 *    joins the workers, checks they all finished their work, prints the ok
 *    line and returns: the process exits 0 with the last thread.
 */
#include "check.h"

#include <pthread.h>
#include <stdint.h>

enum { WORKERS = 4, STEPS = 20 };

static pthread_t main_thread, workers[WORKERS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int steps_done;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < STEPS; ++i) {
        sleep_ms(1);
        CHECK_OK(pthread_mutex_lock(&mu));
        ++steps_done;
        CHECK_OK(pthread_mutex_unlock(&mu));
    }
    return NULL;
}

static void *joiner(void *arg) {
    (void)arg;
    void *ret;
    CHECK_OK(pthread_join(main_thread, &ret));
    CHECK_EQ((intptr_t)ret, 42);
    for (int i = 0; i < WORKERS; ++i) CHECK_OK(pthread_join(workers[i], NULL));
    CHECK_EQ(steps_done, WORKERS * STEPS);
    printf("ok thread_exit_main workers ran on after main's pthread_exit, %d steps\n",
           steps_done);
    fflush(stdout);
    return NULL; /* last thread: the process exits with status 0 */
}

int main(void) {
    WATCHDOG(60);
    pthread_t j;
    main_thread = pthread_self();
    for (int i = 0; i < WORKERS; ++i) CHECK_OK(pthread_create(&workers[i], NULL, worker, NULL));
    CHECK_OK(pthread_create(&j, NULL, joiner, NULL));
    CHECK_OK(pthread_detach(j));
    pthread_exit((void *)42);
}
