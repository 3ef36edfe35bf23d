/* producer_consumer.c - scenario: P producers and C consumers over a bounded
 * buffer guarded by one mutex and two condition variables (not_full,
 * not_empty), the textbook pthread_cond_wait(3p) predicate-loop pattern.
 * Every item (a distinct number) must be consumed exactly once: checked by
 * count, by sum and by a per-item seen[] array.
 *
 * Usage: producer_consumer [producers=4] [consumers=3] [items_per_producer=25000]
 */
#include "check.h"

#include <pthread.h>

enum { CAP = 16 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static long buf[CAP];
static int head, len, producers_done;
static long per_producer;
static unsigned char *seen;

typedef struct {
    long id, count, sum;
} worker_t;

static void *producer(void *arg) {
    worker_t *w = arg;
    for (long i = 0; i < per_producer; ++i) {
        long item = w->id * per_producer + i; /* 0 .. P*per_producer-1 */
        CHECK_OK(pthread_mutex_lock(&mu));
        while (len == CAP) CHECK_OK(pthread_cond_wait(&not_full, &mu));
        buf[(head + len++) % CAP] = item;
        CHECK_OK(pthread_cond_signal(&not_empty));
        CHECK_OK(pthread_mutex_unlock(&mu));
        w->count++;
        w->sum += item;
    }
    return NULL;
}

static void *consumer(void *arg) {
    worker_t *w = arg;
    for (;;) {
        CHECK_OK(pthread_mutex_lock(&mu));
        while (len == 0 && !producers_done) CHECK_OK(pthread_cond_wait(&not_empty, &mu));
        if (len == 0) { /* drained and no more coming */
            CHECK_OK(pthread_mutex_unlock(&mu));
            return NULL;
        }
        long item = buf[head];
        head = (head + 1) % CAP;
        --len;
        CHECK_EQ(seen[item], 0); /* seen[] is only touched under mu */
        seen[item] = 1;
        CHECK_OK(pthread_cond_signal(&not_full));
        CHECK_OK(pthread_mutex_unlock(&mu));
        w->count++;
        w->sum += item;
    }
}

int main(int argc, char **argv) {
    WATCHDOG(60);
    int np = argc > 1 ? atoi(argv[1]) : 4, nc = argc > 2 ? atoi(argv[2]) : 3;
    per_producer = argc > 3 ? atol(argv[3]) : 25000;
    CHECK(np >= 1 && np <= 1000 && nc >= 1 && nc <= 1000 && per_producer >= 1);
    long total = np * per_producer;
    pthread_t *pt = calloc((size_t)(np + nc), sizeof *pt);
    worker_t *w = calloc((size_t)(np + nc), sizeof *w);
    CHECK(pt != NULL && w != NULL && (seen = calloc((size_t)total, 1)) != NULL);

    for (int i = 0; i < nc; ++i) CHECK_OK(pthread_create(&pt[np + i], NULL, consumer, &w[np + i]));
    for (int i = 0; i < np; ++i) {
        w[i].id = i;
        CHECK_OK(pthread_create(&pt[i], NULL, producer, &w[i]));
    }
    for (int i = 0; i < np; ++i) CHECK_OK(pthread_join(pt[i], NULL));
    CHECK_OK(pthread_mutex_lock(&mu));
    producers_done = 1;
    CHECK_OK(pthread_cond_broadcast(&not_empty));
    CHECK_OK(pthread_mutex_unlock(&mu));
    for (int i = 0; i < nc; ++i) CHECK_OK(pthread_join(pt[np + i], NULL));

    long produced = 0, consumed = 0, psum = 0, csum = 0;
    for (int i = 0; i < np; ++i) produced += w[i].count, psum += w[i].sum;
    for (int i = 0; i < nc; ++i) consumed += w[np + i].count, csum += w[np + i].sum;
    CHECK_EQ(produced, total);
    CHECK_EQ(consumed, total);
    CHECK_EQ(psum, total * (total - 1) / 2);
    CHECK_EQ(csum, psum);
    for (long i = 0; i < total; ++i) CHECK_EQ(seen[i], 1);
    CHECK_EQ(len, 0);

    printf("ok producer_consumer %d producers %d consumers %ld items each consumed once\n", np,
           nc, total);
    free(pt);
    free(w);
    free(seen);
    return 0;
}
