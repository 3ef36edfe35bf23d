/* A program for the gdb test (gdb_backtrace_test.py): a thread on a linked
 * stack recurses through several chunks and stops in bottom(), where gdb
 * must be able to walk back to the thread's entry. */
#include <stdio.h>

#include "weft/weft.h"

volatile long g_sink;

__attribute__((noinline)) void bottom(long depth) { g_sink = depth; }

__attribute__((noinline)) long recurse(long n) {
    volatile char frame[1024]; /* a 4 KiB chunk holds three of these */
    frame[0] = (char)n;
    if (n == 0) {
        bottom(n);
        return frame[0];
    }
    return recurse(n - 1) + frame[0];
}

static void *linked_entry(void *arg) {
    long r = recurse((long)arg);
    g_sink += r; /* not a tail call: the entry stays in the backtrace */
    return (void *)r;
}

static int main_thread(void *arg) {
    (void)arg;
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.stacks = WEFT_STACKS_LINKED;
    weft_thread_t t;
    if (weft_thread_create(&t, &a, linked_entry, (void *)40L) != 0) return 1;
    weft_thread_join(t, NULL);
    weft_stats_t s;
    weft_stats_get(-1, &s);
    printf("links %llu\n", (unsigned long long)s.stack_links);
    return s.stack_links >= 10 ? 0 : 2;
}

int main(void) { return weft_main(main_thread, NULL); }
