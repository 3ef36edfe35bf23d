/* A program built for mechanism B (weft_checkpoints_from_analysis) that
 * calls an external function with no trusted bound and a 12 KiB frame
 * (deep_external.c) from a thread on a linked stack. Built twice: with the
 * wrappers generated from the analysis, the call runs on a chunk with room
 * and the program prints "ok"; without them (NO_WRAPS) it runs on MaxPath's
 * slack, overruns the chunk, and weft reports the overflow
 * (external_test.py). */
#include <stdio.h>

#include "weft/weft.h"

unsigned long deep_external(unsigned seed);

static unsigned long expected(unsigned seed) {
    unsigned long sum = 0;
    for (unsigned long i = 0; i < 12 * 1024; ++i) sum += (unsigned char)(seed + i);
    return sum;
}

static void *caller(void *arg) {
    unsigned seed = (unsigned)(unsigned long)arg;
    unsigned long r = deep_external(seed);
    return (void *)(r == expected(seed) ? 1UL : 0UL);
}

static int main_thread(void *arg) {
    (void)arg;
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.stacks = WEFT_STACKS_LINKED;
    a.name = "external-caller";
    int good = 0;
    for (unsigned i = 0; i < 8; ++i) {
        weft_thread_t t;
        void *ret = NULL;
        if (weft_thread_create(&t, &a, caller, (void *)(unsigned long)(7 * i + 3)) != 0) return 1;
        weft_thread_join(t, &ret);
        good += ret != NULL;
    }
    weft_stats_t s;
    weft_stats_get(-1, &s);
    printf("%s: %d of 8 results right, %llu chunks linked\n", good == 8 ? "ok" : "WRONG", good,
           (unsigned long long)s.stack_links);
    return good == 8 ? 0 : 2;
}

int main(void) { return weft_main(main_thread, NULL); }
