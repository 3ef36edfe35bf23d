/* The README's example: a thousand threads hand a token round a ring. */
#include <stdio.h>
#include <weft/weft.h>

enum { N = 1000, LAPS = 100 };
static weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
static weft_cond_t turn = WEFT_COND_INITIALIZER;
static long token; /* whose turn: token % N */

static void *runner(void *arg) {
    long me = (long)arg;
    weft_mutex_lock(&mu);
    for (int lap = 0; lap < LAPS; ++lap) {
        while (token % N != me) weft_cond_wait(&turn, &mu);
        ++token;
        weft_cond_broadcast(&turn);
    }
    weft_mutex_unlock(&mu);
    return NULL;
}

static int start(void *arg) {
    (void)arg;
    weft_thread_t t[N];
    for (long i = 0; i < N; ++i) weft_thread_create(&t[i], NULL, runner, (void *)i);
    for (int i = 0; i < N; ++i) weft_thread_join(t[i], NULL);
    printf("token passed %ld times by %d threads\n", token, N);
    return token == (long)N * LAPS ? 0 : 1;
}

int main(void) { return weft_main(start, NULL); }
