/* The README's example: ten thousand threads sleep, then add to a total. */
#include <stdio.h>
#include <weft/weft.h>

static weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
static long total;

static void *worker(void *arg) {
    weft_sleep_ns(1000000);              /* parks this thread only, 1 ms */
    weft_mutex_lock(&mu);
    total += (long)arg;
    weft_mutex_unlock(&mu);
    return NULL;
}

static int start(void *arg) {            /* the first weft thread */
    (void)arg;
    static weft_thread_t t[10000];
    for (long i = 0; i < 10000; ++i) weft_thread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 10000; ++i) weft_thread_join(t[i], NULL);
    printf("total %ld\n", total);        /* 49995000 */
    return total == 49995000 ? 0 : 1;
}

int main(void) { return weft_main(start, NULL); }
