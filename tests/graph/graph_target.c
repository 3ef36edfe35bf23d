/* A program of known blocking structure for the blocking-graph tests
 * (graph_test.py). Every worker runs
 *
 *     start -> nap_a (A1) -> [malloc 1000 B, open a socket] -> nap_b (B)
 *           -> [close it, free] -> nap_a (A1) ... 3 rounds ... -> nap_a (A2) -> exit
 *
 * so the graph has exactly: start->A1 x1, A1->B x3, B->A1 x2, B->A2 x1 and
 * A2->exit x1 per worker (A1 and A2 are the same function called from two
 * places: one node when the chain is one frame deep). A "hog" thread runs
 * 30 ms between two parks without yielding: the one slow edge; then it
 * sleeps until a deadline already past (late_nap), a node all the same. The boss
 * creates them all (its first edge creates 5 threads) and joins them.
 *
 *   graph_target OUT.json OUT.dot     dump with weft_graph_dump, then SIGUSR2
 *                                     and wait for $WEFT_GRAPH_DIR's files
 * Exit 0 on success, 3 when the graph is off (ENODATA), 1 on errors. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/weft.h>

#define WORKERS 4
#define ROUNDS 3

__attribute__((noinline)) void nap_a(void) {
    weft_sleep_ns(1000);
    __asm__ volatile("" ::: "memory"); /* not a tail call: nap_a stays on the chain */
}

__attribute__((noinline)) void nap_b(void) {
    weft_sleep_ns(1000);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void hog_nap(void) {
    weft_sleep_ns(1000);
    __asm__ volatile("" ::: "memory");
}

/* A sleep whose deadline has passed does not wait, but it is still this
 * sleep in the graph, alone or not. */
__attribute__((noinline)) void late_nap(void) {
    weft_sleep_until_ns(0);
    __asm__ volatile("" ::: "memory");
}

void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; ++i) {
        nap_a();
        char *volatile p = malloc(1000);
        memset(p, 1, 1000);
        int fd = weft_socket(AF_INET, SOCK_STREAM, 0);
        nap_b();
        weft_close(fd);
        free(p);
    }
    nap_a();
    return NULL;
}

void *hog(void *arg) {
    (void)arg;
    hog_nap();
    uint64_t until = weft_now_ns() + 30000000;
    while (weft_now_ns() < until) {
    }
    hog_nap();
    late_nap();
    return NULL;
}

void *boss(void *arg) {
    (void)arg;
    weft_thread_t t[WORKERS + 1];
    weft_thread_attr_t attr;
    weft_thread_attr_init(&attr);
    /* Warm up what a first socket allocates (weft's descriptor table), so
     * the workers' edges show their own 1000 bytes only. */
    weft_close(weft_socket(AF_INET, SOCK_STREAM, 0));
    for (int i = 0; i < WORKERS; ++i) {
        attr.home_vproc = i % weft_vproc_count();
        if (weft_thread_create(&t[i], &attr, worker, NULL) != 0) return (void *)1;
    }
    if (weft_thread_create(&t[WORKERS], NULL, hog, NULL) != 0) return (void *)1;
    for (int i = 0; i <= WORKERS; ++i) weft_thread_join(t[i], NULL);
    return NULL;
}

static int dump(const char *path, int format) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    int e = weft_graph_dump(f, format);
    fclose(f);
    if (e == ENODATA) return 3;
    if (e) {
        fprintf(stderr, "weft_graph_dump: %s\n", strerror(e));
        return 1;
    }
    return 0;
}

static int run(void *argv_) {
    char **argv = argv_;
    weft_thread_t b;
    void *r;
    if (weft_thread_create(&b, NULL, boss, NULL) != 0 || weft_thread_join(b, &r) != 0 || r) return 1;
    if (weft_graph_dump(NULL, WEFT_GRAPH_JSON) != EINVAL || weft_graph_dump(stdout, 7) != EINVAL) {
        fprintf(stderr, "bad arguments were not refused\n");
        return 1;
    }
    int e = dump(argv[1], WEFT_GRAPH_JSON);
    if (e) return e;
    if ((e = dump(argv[2], WEFT_GRAPH_DOT))) return e;
    /* SIGUSR2: the runtime's dumper writes both files. */
    const char *dir = getenv("WEFT_GRAPH_DIR");
    if (!dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/weft-graph-%d.dot", dir, (int)getpid());
    raise(SIGUSR2);
    for (int i = 0; i < 1000; ++i) { /* up to 10 s */
        struct stat st;
        if (stat(path, &st) == 0) return 0;
        weft_sleep_ns(10000000);
    }
    fprintf(stderr, "no %s after SIGUSR2\n", path);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: graph_target OUT.json OUT.dot\n");
        return 2;
    }
    int r = weft_main(run, argv);
    if (r < 0) {
        fprintf(stderr, "weft_main: %s\n", strerror(errno));
        return 4;
    }
    return r;
}
