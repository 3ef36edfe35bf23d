/* The program tests/gdb/weft_gdb_test.py debugs: named weft threads parked
 * in known places, then a stop in all_parked(), where gdb lists them and
 * backtraces them. Two vprocs, so that one thread lives on vproc 1.
 *
 *   waiter         cond wait      in waiter_on_cond
 *   sleeper        sleep          in sleeper
 *   locker         mutex lock     in locker_on_mutex (main holds the mutex)
 *   reader         read of a pipe in reader_on_pipe
 *   remote         cond wait      in waiter_on_cond, on vproc 1
 *   deep           cond wait      in linked_bottom, below deep_recurse(12):
 *                                 a linked stack of several chunks (when weft has them)
 *   quitter        exited, not joined
 *   fresh          created, never run (entry never_started)
 *   main           running: it calls all_parked()
 *
 * After the stop every thread but the sleeper is released and joined, and
 * the program prints "released" and exits: the registers gdb borrowed for
 * the backtraces must have been given back intact for that.
 *
 * SITE:<function> marks the line of each blocking call, which the test
 * expects in the listing.
 *
 * Every "is it parked yet" below is a handshake, never a sleep: on vproc 0
 * a thread that has set its flag parks before main runs again
 * (cooperative); the thread on vproc 1 is followed there by a notifier,
 * which can run only once it has switched out, and which main joins. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "weft/weft.h"

static weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
static weft_cond_t cv = WEFT_COND_INITIALIZER;
static weft_mutex_t held = WEFT_MUTEX_INITIALIZER;
static int go;
static int parked;   /* threads of vproc 0 that are about to park */
static int pipefd[2];
volatile long g_sink;

__attribute__((noinline)) void all_parked(void) { __asm__ volatile("" ::: "memory"); }

__attribute__((noinline)) static void wait_for_go(void) {
    weft_mutex_lock(&mu);
    while (!go) weft_cond_wait(&cv, &mu); /* SITE:wait_for_go */
    weft_mutex_unlock(&mu);
}

__attribute__((noinline)) void *waiter_on_cond(void *arg) {
    (void)arg;
    weft_mutex_lock(&mu);
    ++parked;
    while (!go) weft_cond_wait(&cv, &mu); /* SITE:waiter_on_cond */
    weft_mutex_unlock(&mu);
    g_sink++;
    return NULL;
}

__attribute__((noinline)) void *sleeper(void *arg) {
    (void)arg;
    ++parked;
    weft_sleep_ns(3600ull * 1000000000ull); /* SITE:sleeper (never woken: the program exits first) */
    g_sink++;
    return NULL;
}

__attribute__((noinline)) void *locker_on_mutex(void *arg) {
    (void)arg;
    ++parked;
    weft_mutex_lock(&held); /* SITE:locker_on_mutex */
    weft_mutex_unlock(&held);
    g_sink++;
    return NULL;
}

__attribute__((noinline)) void *reader_on_pipe(void *arg) {
    (void)arg;
    char c;
    ++parked;
    ssize_t n = weft_read(pipefd[0], &c, 1); /* SITE:reader_on_pipe */
    g_sink += n;
    return NULL;
}

/* On vproc 1 after "remote": it runs only once remote has switched out,
 * and once main has joined it vproc 1 is back in its scheduler loop. */
static void *notifier(void *arg) { return arg; }

__attribute__((noinline)) void linked_bottom(void) {
    ++parked;
    wait_for_go();
}

__attribute__((noinline)) long deep_recurse(long n) {
    volatile char frame[1024]; /* a 4 KiB chunk holds three of these */
    frame[0] = (char)n;
    if (n == 0) linked_bottom();
    else g_sink += deep_recurse(n - 1);
    return frame[0];
}

__attribute__((noinline)) void *deep_entry(void *arg) {
    long r = deep_recurse((long)arg);
    g_sink += r; /* not a tail call: the entry stays in the backtrace */
    return NULL;
}

static void *quitter(void *arg) { return arg; }

__attribute__((noinline)) void *never_started(void *arg) {
    g_sink++;
    return arg;
}

static void check(int err, const char *what) {
    if (err) {
        fprintf(stderr, "weft_gdb_target: %s: %d\n", what, err);
        exit(1);
    }
}

static weft_thread_t start(const char *name, void *(*fn)(void *), void *arg, int vproc, int linked) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.name = name;
    a.home_vproc = vproc;
    if (linked) a.stacks = WEFT_STACKS_LINKED;
    weft_thread_t t;
    check(weft_thread_create(&t, &a, fn, arg), name);
    return t;
}

static int main_thread(void *arg) {
    (void)arg;
    check(pipe(pipefd), "pipe");
    weft_mutex_lock(&held);
    weft_thread_t waiter = start("waiter", waiter_on_cond, NULL, 0, 0);
    start("sleeper", sleeper, NULL, 0, 0); /* never joined */
    weft_thread_t locker = start("locker", locker_on_mutex, NULL, 0, 0);
    weft_thread_t reader = start("reader", reader_on_pipe, NULL, 0, 0);
    int expect = 4;
#ifdef WEFT_GDB_TARGET_LINKED
    weft_thread_t deep = start("deep", deep_entry, (void *)12L, 0, 1);
    ++expect;
#endif
    weft_thread_t quit = start("quitter", quitter, NULL, 0, 0);
    while (parked < expect) weft_yield();
    weft_yield(); /* the quitter has run to its end */

    weft_thread_t remote = start("remote", waiter_on_cond, NULL, 1, 0);
    check(weft_thread_join(start("notifier", notifier, NULL, 1, 0), NULL), "join notifier");

    weft_thread_t fresh = start("fresh", never_started, NULL, 0, 0);
    printf("parked\n");
    fflush(stdout);
    all_parked();

    weft_mutex_lock(&mu);
    go = 1;
    weft_cond_broadcast(&cv);
    weft_mutex_unlock(&mu);
    weft_mutex_unlock(&held);
    check(write(pipefd[1], "x", 1) == 1 ? 0 : errno, "write");
    weft_thread_t joins[] = {waiter, locker, reader, quit, remote, fresh};
    for (size_t i = 0; i < sizeof joins / sizeof joins[0]; ++i) check(weft_thread_join(joins[i], NULL), "join");
#ifdef WEFT_GDB_TARGET_LINKED
    check(weft_thread_join(deep, NULL), "join deep");
#endif
    printf("released\n");
    fflush(stdout);
    exit(0); /* the sleeper still sleeps */
}

int main(void) {
    weft_config c;
    weft_config_init(&c);
    c.vprocs = 2;
    return weft_main_config(&c, main_thread, NULL);
}
