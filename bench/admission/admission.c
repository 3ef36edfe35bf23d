/*
 * admission.c — Capriccio §5.3's producer-consumer admission-control
 * benchmark, with two back ends chosen at compile time:
 *
 *   weft-admission  (-DADM_WEFT) weft threads, weft_mutex/weft_cond, linked
 *                   with libweft-heap so the blocking graph sees the heap
 *                   change of every edge (WEFT_POLICY=resource uses it);
 *   nptl-admission  kernel threads (glibc NPTL), pthread mutex/cond.
 *
 * Producers loop: malloc a chunk, write every page of it, read --reads
 * random pages of a file-backed mapping (the data file, MAP_SHARED), push
 * the chunk on a global pool (mutex + cond), then block briefly
 * (--think-us of sleep; 0: a yield). Consumers loop: pop a chunk (waiting
 * on the cond while the pool is empty), read every page of it, free it,
 * yield. Every chunk is above the mmap threshold (mallopt), so malloc maps
 * it and free unmaps it: anonymous RSS follows the pool.
 *
 * Under a memory limit (a cgroup, bench/admission/run_admission.py) the
 * page cache of the data file competes with the pool: when the pool grows
 * the kernel evicts the file's pages and the producers' reads become major
 * faults (thrashing); past the limit the process is OOM-killed.
 *
 * Output: one line per --interval-ms on stdout,
 *   interval t=S loops_s=N cons_s=N pool=N anon_mib=X file_mib=X majflt_s=N cg_mib=X loops=N majflt=N
 * (rates over the interval; loops and majflt since the start; cg_mib -1
 * without --cgroup-file), each flushed as it is written (a killed run
 * leaves its series behind); then a summary line and, with --json, one
 * JSON object on the last line.
 *
 * Bounded: workers stop at --seconds (each checks the clock every loop), a
 * watchdog kernel thread exits the process 10 s after that whatever
 * happens.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef ADM_WEFT
#include <weft/weft.h>
#define RUNTIME "weft"
#else
#define RUNTIME "nptl"
#endif

/* ------------------------------------------------------------------ */
/* The two back ends                                                   */
/* ------------------------------------------------------------------ */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef ADM_WEFT
typedef weft_mutex_t mutex_t_;
typedef weft_cond_t cond_t_;
typedef weft_thread_t thread_t_;
static void mu_init(mutex_t_ *m) { weft_mutex_init(m, WEFT_MUTEX_NORMAL); }
static void cv_init(cond_t_ *c) { weft_cond_init(c); }
static void mu_lock(mutex_t_ *m) { weft_mutex_lock(m); }
static void mu_unlock(mutex_t_ *m) { weft_mutex_unlock(m); }
static void cv_signal(cond_t_ *c) { weft_cond_signal(c); }
static void cv_broadcast(cond_t_ *c) { weft_cond_broadcast(c); }
static void cv_wait_until(cond_t_ *c, mutex_t_ *m, uint64_t deadline) { weft_cond_timedwait(c, m, deadline); }
static int thr_create(thread_t_ *t, void *(*fn)(void *), void *arg, const char *name) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.name = name;
    return weft_thread_create(t, &a, fn, arg);
}
static void thr_join(thread_t_ t) { weft_thread_join(t, NULL); }
static void nap_ns(uint64_t ns) {
    if (ns) weft_sleep_ns(ns);
    else weft_yield();
}
#else
typedef pthread_mutex_t mutex_t_;
typedef pthread_cond_t cond_t_;
typedef pthread_t thread_t_;
static void mu_init(mutex_t_ *m) { pthread_mutex_init(m, NULL); }
static void cv_init(cond_t_ *c) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}
static void mu_lock(mutex_t_ *m) { pthread_mutex_lock(m); }
static void mu_unlock(mutex_t_ *m) { pthread_mutex_unlock(m); }
static void cv_signal(cond_t_ *c) { pthread_cond_signal(c); }
static void cv_broadcast(cond_t_ *c) { pthread_cond_broadcast(c); }
static void cv_wait_until(cond_t_ *c, mutex_t_ *m, uint64_t deadline) {
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    pthread_cond_timedwait(c, m, &ts);
}
static int thr_create(thread_t_ *t, void *(*fn)(void *), void *arg, const char *name) {
    int rc = pthread_create(t, NULL, fn, arg);
    if (rc == 0) pthread_setname_np(*t, name);
    return rc;
}
static void thr_join(thread_t_ t) { pthread_join(t, NULL); }
static void nap_ns(uint64_t ns) {
    if (ns) {
        struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
        nanosleep(&ts, NULL);
    } else {
        sched_yield();
    }
}
#endif

/* ------------------------------------------------------------------ */
/* Options and shared state                                            */
/* ------------------------------------------------------------------ */

static struct {
    int producers, consumers;
    double seconds;
    size_t chunk;
    const char *data_file;
    long data_mb;
    int reads;
    long think_us;
    long interval_ms;
    int json;
    const char *dump_graph;
    const char *cgroup_file; /* memory.current / memory.usage_in_bytes of our cgroup */
} opt = {4, 2, 10.0, 256 * 1024, "var/admission-data.bin", 256, 64, 0, 100, 0, NULL, NULL};

struct chunk {
    struct chunk *next;
};

static struct {
    mutex_t_ mu;
    cond_t_ nonempty;
    struct chunk *head, *tail;
} pool;

static uint64_t prod_loops, cons_loops; /* __atomic, relaxed */
static int64_t pool_count;              /* __atomic, relaxed */
static int stop_flag;                   /* __atomic */
static uint64_t t_start, t_deadline;
static size_t page_size;
static const unsigned char *data_map;
static size_t data_pages;
static unsigned long sink; /* __atomic: what the reads read, so they are not optimised away */

static int stopped(void) {
    return __atomic_load_n(&stop_flag, __ATOMIC_RELAXED) || now_ns() >= t_deadline;
}

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* ------------------------------------------------------------------ */
/* Producers and consumers                                             */
/* ------------------------------------------------------------------ */

static void *producer(void *arg) {
    uint64_t rng = 0x9E3779B97F4A7C15ULL * ((uint64_t)(uintptr_t)arg + 1);
    uint64_t think = (uint64_t)opt.think_us * 1000u;
    while (!stopped()) {
        unsigned char *c = malloc(opt.chunk);
        if (!c) { /* overcommit refused: try again after the pause */
            nap_ns(think ? think : 1000000);
            continue;
        }
        unsigned char v = (unsigned char)rng;
        for (size_t off = 0; off < opt.chunk; off += page_size) c[off] = v++;
        unsigned long acc = 0;
        for (int i = 0; i < opt.reads; ++i) acc += data_map[(rng_next(&rng) % data_pages) * page_size];
        __atomic_fetch_add(&sink, acc, __ATOMIC_RELAXED);
        struct chunk *ch = (struct chunk *)c;
        ch->next = NULL;
        mu_lock(&pool.mu);
        if (pool.tail) pool.tail->next = ch;
        else pool.head = ch;
        pool.tail = ch;
        __atomic_fetch_add(&pool_count, 1, __ATOMIC_RELAXED);
        cv_signal(&pool.nonempty);
        mu_unlock(&pool.mu);
        __atomic_fetch_add(&prod_loops, 1, __ATOMIC_RELAXED);
        nap_ns(think);
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    while (!stopped()) {
        mu_lock(&pool.mu);
        while (!pool.head && !stopped()) cv_wait_until(&pool.nonempty, &pool.mu, now_ns() + 50000000u);
        struct chunk *ch = pool.head;
        if (ch) {
            pool.head = ch->next;
            if (!pool.head) pool.tail = NULL;
            __atomic_fetch_sub(&pool_count, 1, __ATOMIC_RELAXED);
        }
        mu_unlock(&pool.mu);
        if (!ch) break;
        const unsigned char *c = (const unsigned char *)ch;
        unsigned long acc = 0;
        for (size_t off = page_size; off < opt.chunk; off += page_size) acc += c[off];
        __atomic_fetch_add(&sink, acc, __ATOMIC_RELAXED);
        free(ch);
        __atomic_fetch_add(&cons_loops, 1, __ATOMIC_RELAXED);
        nap_ns(0);
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* The monitor: a kernel thread outside the runtime                   */
/* ------------------------------------------------------------------ */

struct sample {
    double t, loops_s, cons_s, anon_mib, file_mib, majflt_s, cg_mib;
    int64_t pool;
    uint64_t loops, majflt; /* since the start */
};
static struct sample *samples;
static size_t nsamples, maxsamples;
static uint64_t peak_anon;

/* RssAnon and RssFile of /proc/self/status, bytes. */
static void read_rss(uint64_t *anon, uint64_t *file) {
    *anon = *file = 0;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return;
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "RssAnon: %llu kB", &kb) == 1) *anon = kb * 1024;
        else if (sscanf(line, "RssFile: %llu kB", &kb) == 1) *file = kb * 1024;
    }
    fclose(f);
}

static double read_cgroup_mib(void) {
    if (!opt.cgroup_file) return -1;
    FILE *f = fopen(opt.cgroup_file, "re");
    if (!f) return -1;
    unsigned long long v = 0;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    return ok ? (double)v / 1048576.0 : -1;
}

static uint64_t majflt_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_majflt;
}

static int monitor_done;

static void *monitor(void *arg) {
    (void)arg;
    uint64_t majflt0 = majflt_now();
    uint64_t last_t = t_start, last_p = 0, last_c = 0, last_f = majflt0;
    uint64_t step = (uint64_t)opt.interval_ms * 1000000u;
    uint64_t next = t_start + step;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= t_deadline + 10000000000ull) {
            fprintf(stderr, "%s-admission: watchdog: still running 10 s after the deadline, exiting\n", RUNTIME);
            fflush(stdout);
            _exit(3);
        }
        if (__atomic_load_n(&monitor_done, __ATOMIC_ACQUIRE)) return NULL;
        if (now < next) {
            uint64_t d = next - now;
            if (d > 20000000u) d = 20000000u;
            struct timespec ts = {0, (long)d};
            nanosleep(&ts, NULL);
            continue;
        }
        next += step;
        if (now > t_deadline + step / 2 && nsamples) continue; /* the run is over; wait for the end */
        uint64_t p = __atomic_load_n(&prod_loops, __ATOMIC_RELAXED);
        uint64_t c = __atomic_load_n(&cons_loops, __ATOMIC_RELAXED);
        uint64_t f = majflt_now();
        uint64_t anon, file;
        read_rss(&anon, &file);
        if (anon > peak_anon) peak_anon = anon;
        double dt = (double)(now - last_t) / 1e9;
        struct sample s = {(double)(now - t_start) / 1e9,
                           (double)(p - last_p) / dt,
                           (double)(c - last_c) / dt,
                           (double)anon / 1048576.0,
                           (double)file / 1048576.0,
                           (double)(f - last_f) / dt,
                           read_cgroup_mib(),
                           __atomic_load_n(&pool_count, __ATOMIC_RELAXED),
                           p,
                           f - majflt0};
        last_t = now, last_p = p, last_c = c, last_f = f;
        if (nsamples < maxsamples) samples[nsamples++] = s;
        printf("interval t=%.2f loops_s=%.0f cons_s=%.0f pool=%" PRId64 " anon_mib=%.1f file_mib=%.1f majflt_s=%.0f "
               "cg_mib=%.1f loops=%" PRIu64 " majflt=%" PRIu64 "\n",
               s.t, s.loops_s, s.cons_s, s.pool, s.anon_mib, s.file_mib, s.majflt_s, s.cg_mib, s.loops, s.majflt);
        fflush(stdout);
    }
}

/* ------------------------------------------------------------------ */
/* The data file                                                       */
/* ------------------------------------------------------------------ */

/* Opens (making or extending it if needed) the data file, drops its pages
 * from the page cache, reads it back so that the cache is charged to this
 * process's cgroup, and maps it. */
static int setup_data(void) {
    size_t want = (size_t)opt.data_mb << 20;
    int fd = open(opt.data_file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "%s-admission: %s: %s\n", RUNTIME, opt.data_file, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    if ((size_t)st.st_size < want) {
        size_t blk = 1 << 20;
        unsigned char *buf = malloc(blk);
        if (!buf) return -1;
        uint64_t rng = 12345;
        for (size_t off = (size_t)st.st_size & ~(blk - 1); off < want; off += blk) {
            for (size_t i = 0; i < blk; i += 8) {
                uint64_t r = rng_next(&rng);
                memcpy(buf + i, &r, 8);
            }
            if (pwrite(fd, buf, blk, (off_t)off) != (ssize_t)blk) {
                fprintf(stderr, "%s-admission: writing %s: %s\n", RUNTIME, opt.data_file, strerror(errno));
                free(buf);
                return -1;
            }
        }
        free(buf);
        fsync(fd);
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    {
        size_t blk = 1 << 20;
        unsigned char *buf = malloc(blk);
        if (!buf) return -1;
        for (size_t off = 0; off < want; off += blk)
            if (pread(fd, buf, blk, (off_t)off) <= 0) break;
        free(buf);
    }
    void *m = mmap(NULL, want, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "%s-admission: mmap %s: %s\n", RUNTIME, opt.data_file, strerror(errno));
        return -1;
    }
    madvise(m, want, MADV_RANDOM); /* a fault reads one page, no readahead */
    close(fd);
    data_map = m;
    data_pages = want / page_size;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The run                                                             */
/* ------------------------------------------------------------------ */

static thread_t_ *threads;

static int run(void *arg) {
    (void)arg;
    int n = opt.producers + opt.consumers;
    char name[32];
    for (int i = 0; i < opt.consumers; ++i) {
        snprintf(name, sizeof name, "consumer-%d", i);
        if (thr_create(&threads[i], consumer, (void *)(uintptr_t)i, name) != 0) {
            fprintf(stderr, "%s-admission: cannot create a thread\n", RUNTIME);
            exit(1);
        }
    }
    for (int i = 0; i < opt.producers; ++i) {
        snprintf(name, sizeof name, "producer-%d", i);
        if (thr_create(&threads[opt.consumers + i], producer, (void *)(uintptr_t)i, name) != 0) {
            fprintf(stderr, "%s-admission: cannot create a thread\n", RUNTIME);
            exit(1);
        }
    }
    /* Sleep to the deadline in slices (bounded either way), then wake the
     * consumers waiting for chunks. */
    while (now_ns() < t_deadline) {
        uint64_t left = t_deadline - now_ns();
        nap_ns(left > 50000000u ? 50000000u : left + 1);
    }
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
    mu_lock(&pool.mu);
    cv_broadcast(&pool.nonempty);
    mu_unlock(&pool.mu);
    for (int i = 0; i < n; ++i) thr_join(threads[i]);
#ifdef ADM_WEFT
    if (opt.dump_graph) {
        FILE *f = strcmp(opt.dump_graph, "-") == 0 ? stdout : fopen(opt.dump_graph, "we");
        int rc = f ? weft_graph_dump(f, WEFT_GRAPH_JSON) : errno;
        if (rc) fprintf(stderr, "weft-admission: --dump-graph %s: %s\n", opt.dump_graph, strerror(rc));
        if (f && f != stdout) fclose(f);
        else if (f) fputc('\n', f);
    }
#endif
    return 0;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: %s-admission [options]\n"
            "  --producers N      producer threads (default 4)\n"
            "  --consumers M      consumer threads (default 2)\n"
            "  --seconds S        run time (default 10)\n"
            "  --chunk BYTES      bytes a producer allocates per loop (K/M suffix; default 256K)\n"
            "  --data-file PATH   file mapped MAP_SHARED and read at random (made if missing;\n"
            "                     default var/admission-data.bin)\n"
            "  --data-mb MB       its size (default 256)\n"
            "  --reads N          random pages of it a producer reads per loop (default 64)\n"
            "  --think-us US      a producer's pause after each loop (0: a yield, the default)\n"
            "  --interval-ms MS   reporting interval (default 100)\n"
            "  --cgroup-file PATH a file whose first number is the cgroup's memory use (reported)\n"
            "  --dump-graph PATH  (weft) write the blocking graph as JSON at the end ('-': stdout)\n"
            "  --json             a JSON object on the last line of stdout\n",
            RUNTIME);
}

static size_t parse_bytes(const char *s) {
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1048576; break;
    case 'g': case 'G': v *= 1073741824.0; break;
    case 0: break;
    default: return 0;
    }
    return v > 0 ? (size_t)v : 0;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (++i, 1))
        if (ARG("--producers")) opt.producers = atoi(v);
        else if (ARG("--consumers")) opt.consumers = atoi(v);
        else if (ARG("--seconds")) opt.seconds = atof(v);
        else if (ARG("--chunk")) opt.chunk = parse_bytes(v);
        else if (ARG("--data-file")) opt.data_file = v;
        else if (ARG("--data-mb")) opt.data_mb = atol(v);
        else if (ARG("--reads")) opt.reads = atoi(v);
        else if (ARG("--think-us")) opt.think_us = atol(v);
        else if (ARG("--interval-ms")) opt.interval_ms = atol(v);
        else if (ARG("--cgroup-file")) opt.cgroup_file = v;
        else if (ARG("--dump-graph")) opt.dump_graph = v;
        else if (strcmp(a, "--json") == 0) opt.json = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    if (opt.producers < 1 || opt.producers > 4096 || opt.consumers < 1 || opt.consumers > 4096 ||
        !(opt.seconds > 0 && opt.seconds <= 3600) || opt.chunk < 2 * page_size || opt.data_mb < 1 ||
        opt.reads < 0 || opt.think_us < 0 || opt.interval_ms < 10) {
        fprintf(stderr, "%s-admission: bad option value\n", RUNTIME);
        usage(stderr);
        return 2;
    }
    /* Every chunk is mapped by malloc and unmapped by free (a fixed
     * threshold also turns glibc's dynamic one off): RSS follows the pool. */
    mallopt(M_MMAP_THRESHOLD, (int)(opt.chunk < 65536 ? opt.chunk : 65536));

    if (setup_data() != 0) return 1;
    mu_init(&pool.mu);
    cv_init(&pool.nonempty);
    threads = calloc((size_t)(opt.producers + opt.consumers), sizeof *threads);
    maxsamples = (size_t)(opt.seconds * 1000 / (double)opt.interval_ms) + 16;
    samples = calloc(maxsamples, sizeof *samples);
    if (!threads || !samples) return 1;

    uint64_t majflt0 = majflt_now();
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    t_start = now_ns();
    t_deadline = t_start + (uint64_t)(opt.seconds * 1e9);
    pthread_t mon;
    if (pthread_create(&mon, NULL, monitor, NULL) != 0) return 1;

    const char *policy = "kernel";
    int rc;
#ifdef ADM_WEFT
    policy = getenv("WEFT_POLICY") && *getenv("WEFT_POLICY") ? getenv("WEFT_POLICY") : "fifo";
    weft_config cfg; /* one vproc, as the comparison says, unless WEFT_VPROCS asks */
    weft_config_init(&cfg);
    if (!getenv("WEFT_VPROCS") || !*getenv("WEFT_VPROCS")) cfg.vprocs = 1;
    rc = weft_main_config(&cfg, run, NULL);
    if (rc < 0) {
        fprintf(stderr, "weft-admission: weft_main failed: %s\n", strerror(errno));
        return 1;
    }
#else
    rc = run(NULL);
#endif
    double elapsed = (double)(now_ns() - t_start) / 1e9;
    __atomic_store_n(&monitor_done, 1, __ATOMIC_RELEASE);
    pthread_join(mon, NULL);

    uint64_t p = prod_loops, c = cons_loops;
    uint64_t majflt = majflt_now() - majflt0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    printf("summary runtime=%s policy=%s producers=%d consumers=%d seconds=%.2f producer_loops=%" PRIu64
           " loops_s=%.0f consumer_loops=%" PRIu64 " peak_anon_mib=%.1f majflt=%" PRIu64 " cpu_s=%.2f\n",
           RUNTIME, policy, opt.producers, opt.consumers, elapsed, p, (double)p / opt.seconds, c,
           (double)peak_anon / 1048576.0, majflt, cpu);
    if (opt.json) {
        printf("{\"benchmark\": \"admission\", \"runtime\": \"%s\", \"policy\": \"%s\", "
               "\"params\": {\"producers\": %d, \"consumers\": %d, \"seconds\": %g, \"chunk\": %zu, "
               "\"data_mb\": %ld, \"reads\": %d, \"think_us\": %ld, \"interval_ms\": %ld}, "
               "\"elapsed_s\": %.3f, \"producer_loops\": %" PRIu64 ", \"consumer_loops\": %" PRIu64 ", "
               "\"loops_per_s\": %.1f, \"peak_anon_mib\": %.1f, \"majflt\": %" PRIu64 ", \"cpu_s\": %.3f, "
               "\"intervals\": [",
               RUNTIME, policy, opt.producers, opt.consumers, opt.seconds, opt.chunk, opt.data_mb, opt.reads,
               opt.think_us, opt.interval_ms, elapsed, p, c, (double)p / opt.seconds, (double)peak_anon / 1048576.0,
               majflt, cpu);
        for (size_t i = 0; i < nsamples; ++i) {
            const struct sample *s = &samples[i];
            printf("%s{\"t\": %.3f, \"loops_s\": %.1f, \"cons_s\": %.1f, \"pool\": %" PRId64
                   ", \"anon_mib\": %.1f, \"file_mib\": %.1f, \"majflt_s\": %.1f, \"cg_mib\": %.1f, \"loops\": %" PRIu64
                   ", \"majflt\": %" PRIu64 "}",
                   i ? ", " : "", s->t, s->loops_s, s->cons_s, s->pool, s->anon_mib, s->file_mib, s->majflt_s,
                   s->cg_mib, s->loops, s->majflt);
        }
        printf("]}\n");
    }
    fflush(stdout);
    return rc;
}
