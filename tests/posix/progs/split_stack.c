/* split_stack.c - a program with code built with -fsplit-stack (gcc's
 * segmented stacks) runs its threads normally.
 *  - libgcc's split-stack runtime, linked in by that code, sets the initial
 *    thread's stack-limit word (%fs:0x70 on x86-64) in a constructor; every
 *    split-stack function compares the stack pointer with it on entry;
 *  - main and four threads each recurse 200 calls deep through a function
 *    with a 256-byte frame and check the sum.
 * On NPTL the checks pass (or libgcc adds a segment). Under weft-run the
 * threads run on weft's stacks, far from the process stack: a weft that
 * left the word as libgcc set it sent every call to __morestack.
 */
#include "check.h"

#include <pthread.h>

static long deep(int n, volatile char *prev) {
    volatile char frame[256];
    frame[0] = (char)n;
    frame[255] = prev ? prev[0] : 0;
    if (n == 0) return frame[0];
    return n + deep(n - 1, frame);
}

static void *thread(void *arg) {
    (void)arg;
    return (void *)deep(200, NULL);
}

int main(void) {
    WATCHDOG(30);
    CHECK_EQ(deep(200, NULL), 200 * 201 / 2);
    pthread_t t[4];
    for (int i = 0; i < 4; ++i) CHECK_OK(pthread_create(&t[i], NULL, thread, NULL));
    for (int i = 0; i < 4; ++i) {
        void *r;
        CHECK_OK(pthread_join(t[i], &r));
        CHECK_EQ((long)r, 200 * 201 / 2);
    }
    printf("ok split_stack: main and 4 threads 200 calls deep in split-stack code\n");
    return 0;
}
