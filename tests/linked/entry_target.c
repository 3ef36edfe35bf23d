/* A program built for mechanism B whose thread entries the analysis sizes
 * (stackcheck --entry-stacks, entry_test.py):
 *   bounded_entry  uses ~3 KiB of stack in its own frame, calls nothing
 *                  unbounded: its static bound is at most MinChunk, so its
 *                  thread's first chunk is exactly that and it never links;
 *   deep_entry     recurses: no static bound; its first chunk holds the
 *                  path to the first checkpoint, and the recursion links.
 * Built twice: with the table, and without (NO_ENTRY_STACKS), where the
 * default first chunk (1,792 bytes) is too small for bounded_entry's
 * unchecked frame and weft reports the overflow, naming the thread. */
#include <stdio.h>
#include <string.h>

#include "weft/weft.h"

static volatile unsigned long sink;

static void *bounded_entry(void *arg) {
    volatile unsigned char frame[3000];
    for (unsigned i = 0; i < sizeof frame; ++i) frame[i] = (unsigned char)((unsigned long)arg + i);
    unsigned long sum = 0;
    for (unsigned i = 0; i < sizeof frame; ++i) sum += frame[i];
    sink = sum;
    return (void *)sum;
}

__attribute__((noinline)) static unsigned long recurse(unsigned n) {
    volatile char frame[480];
    frame[0] = (char)n;
    if (n == 0) return 1;
    unsigned long r = recurse(n - 1);
    return r + 1 + (unsigned long)(frame[0] != (char)n); /* the frame lives across the call: real recursion */
}

static void *deep_entry(void *arg) { return (void *)recurse((unsigned)(unsigned long)arg); }

static unsigned long links(void) {
    weft_stats_t s;
    weft_stats_get(-1, &s);
    return (unsigned long)s.stack_links;
}

static int main_thread(void *arg) {
    (void)arg;
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.stacks = WEFT_STACKS_LINKED;
    a.name = "bounded-entry";
    unsigned long before = links();
    int good = 0;
    for (unsigned i = 0; i < 100; ++i) {
        weft_thread_t t;
        void *ret = NULL;
        if (weft_thread_create(&t, &a, bounded_entry, (void *)(unsigned long)i) != 0) return 1;
        weft_thread_join(t, &ret);
        unsigned long want = 0;
        for (unsigned j = 0; j < 3000; ++j) want += (unsigned char)(i + j);
        good += (unsigned long)ret == want;
    }
    unsigned long bounded_links = links() - before;
    a.name = "deep-entry";
    before = links();
    weft_thread_t t;
    void *ret = NULL;
    if (weft_thread_create(&t, &a, deep_entry, (void *)200UL) != 0) return 1;
    weft_thread_join(t, &ret);
    unsigned long deep_links = links() - before;
    printf("bounded: %d of 100 right, %lu links; deep: %s, %lu links\n", good, bounded_links,
           (unsigned long)ret == 201 ? "right" : "WRONG", deep_links);
    return good == 100 && (unsigned long)ret == 201 ? 0 : 2;
}

int main(void) { return weft_main(main_thread, NULL); }
