/* The small server of the TAP paper's Fig. 7 (threading-by-appointment.txt
 * §6): one kernel thread per connection, HTTP/1.0 GET, no caching — every
 * request opens its file and moves it in 512-byte reads and writes. Plain
 * C and pthreads, nothing of weft's: bench/tap/fig7.py runs the same binary
 * on NPTL and, unmodified, on weft threads under weft-run (FIFO or TAP).
 *
 *   smallserver --port N --root DIR [--buf 512] [--times FILE] [--quiet]
 *
 * Replies: 200 with the file, 400 for a request that is not "GET /path"
 * within 8 KiB, 404 for a path that does not open as a regular file under
 * the root ("..", absolute paths and symlinks out are refused: the root is
 * opened once and paths resolved beneath it). A full descriptor table is
 * survived: accept waits 10 ms and tries again. SIGTERM/SIGINT end it with
 * exit 0 after printing the count of connections served (a thread takes
 * them with sigwait, which works the same on NPTL and under weft-run).
 *
 * --times FILE: the server's own connection times per size of file served
 * (200 replies), written to FILE as JSON when it stops: accept to close (the
 * TAP paper's measure), and arrival to close, arrival being the earlier of
 * the accept and the kernel's receive timestamp of the request's first
 * bytes (SO_TIMESTAMPNS), so that a wait in the listen queue counts too.
 * Per size: the count, the means and a histogram of arrival to close in
 * power-of-two microseconds. A client's view adds its own scheduling, which on a
 * saturated client CPU can swamp the server's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int root_fd = -1;
static size_t buf_size = 512;
static atomic_long served;

/* --times: per file size, connections and their accept-to-close times. */
enum { kTimeSlots = 64, kBuckets = 40 }; /* bucket b: [2^(b-1), 2^b) µs; 0: under 1 µs */
struct size_times {
    atomic_llong size_plus1; /* 0: a free slot */
    atomic_llong count, total_ns; /* accept to close */
    atomic_llong stamped, total_req_ns; /* arrival to close, for those with a receive timestamp */
    atomic_llong hist[kBuckets];  /* arrival to close (accept to close without a timestamp) */
};
static struct size_times times[kTimeSlots];
static const char *times_path;

static unsigned long long clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}
static unsigned long long now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* ns: accept to close; req_ns: arrival to close, 0 if unknown. */
static void record_time(long long size, unsigned long long ns, unsigned long long req_ns) {
    for (int i = 0; i < kTimeSlots; ++i) {
        struct size_times *t = &times[i];
        long long k = atomic_load_explicit(&t->size_plus1, memory_order_acquire), want = 0;
        if (k == 0 && atomic_compare_exchange_strong(&t->size_plus1, &want, size + 1)) k = size + 1;
        else if (k == 0) k = want; /* another thread took the slot: for which size? */
        if (k != size + 1) continue;
        unsigned long long us = (req_ns ? req_ns : ns) / 1000;
        int b = 0;
        while (us && b < kBuckets - 1) us >>= 1, ++b;
        atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->total_ns, (long long)ns, memory_order_relaxed);
        if (req_ns) {
            atomic_fetch_add_explicit(&t->stamped, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&t->total_req_ns, (long long)req_ns, memory_order_relaxed);
        }
        atomic_fetch_add_explicit(&t->hist[b], 1, memory_order_relaxed);
        return;
    }
    /* more sizes than slots: not recorded */
}

static void write_times(void) {
    if (!times_path) return;
    FILE *f = fopen(times_path, "w");
    if (!f) {
        fprintf(stderr, "smallserver: --times %s: %s\n", times_path, strerror(errno));
        return;
    }
    fputs("{\"hist\": \"arrival to close (accept to close if not stamped); bucket b: [2^(b-1), 2^b) us, 0: under 1 us\", "
          "\"sizes\": {", f);
    int first = 1;
    for (int i = 0; i < kTimeSlots; ++i) {
        struct size_times *t = &times[i];
        long long k = atomic_load(&t->size_plus1), n = atomic_load(&t->count);
        if (!k || !n) continue;
        long long st = atomic_load(&t->stamped);
        fprintf(f, "%s\n  \"%lld\": {\"count\": %lld, \"mean_ms\": %.4f, \"stamped\": %lld, \"arrival_mean_ms\": %.4f, \"hist\": [",
                first ? "" : ",", k - 1, n, (double)atomic_load(&t->total_ns) / (double)n / 1e6, st,
                st ? (double)atomic_load(&t->total_req_ns) / (double)st / 1e6 : 0.0);
        for (int b = 0; b < kBuckets; ++b) fprintf(f, "%s%lld", b ? ", " : "", atomic_load(&t->hist[b]));
        fputs("]}", f);
        first = 0;
    }
    fputs("\n}}\n", f);
    fclose(f);
}

static void usage(FILE *f) {
    fputs("usage: smallserver --port N --root DIR [--buf BYTES] [--times FILE] [--quiet]\n"
          "A thread-per-connection HTTP/1.0 file server without a cache (the TAP paper's Fig. 7):\n"
          "every request opens its file and copies it in BUF-byte reads and writes (default 512).\n"
          "  --port N     TCP port on 127.0.0.1 (0: any; the port is printed)\n"
          "  --root DIR   the document root\n"
          "  --buf BYTES  read and write size, 1..65536 (default 512)\n"
          "  --times FILE on stopping, write each file size's connection times as this server\n"
          "               saw them (accept to close, and arrival to close) to FILE as JSON\n"
          "  --quiet      print nothing but errors\n",
          f);
}

/* v as a whole number in [lo, hi] for option opt, else a message and 0. */
static int number(const char *opt, const char *v, long lo, long hi, long *out) {
    char *e;
    errno = 0;
    long x = strtol(v, &e, 10);
    if (e == v || *e || errno || x < lo || x > hi) {
        fprintf(stderr, "smallserver: %s: expected %ld..%ld, got '%s'\n", opt, lo, hi, v);
        return 0;
    }
    *out = x;
    return 1;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void reply_status(int fd, const char *status) {
    char head[128];
    int n = snprintf(head, sizeof head, "HTTP/1.0 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status);
    write_all(fd, head, (size_t)n);
}

/* Open path (after "GET ") beneath the root; -1 if it is not a regular file there. */
static int open_beneath(const char *path) {
    while (*path == '/') ++path;
    if (!*path) path = "index.html";
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof how);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A read that, with --times, also takes the kernel's receive timestamp of
 * the bytes (CLOCK_REALTIME ns) into *stamp_ns, if there is one. */
static ssize_t read_stamped(int fd, char *p, size_t n, unsigned long long *stamp_ns) {
    if (!times_path || *stamp_ns) return read(fd, p, n);
    struct iovec iov = {p, n};
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t r = recvmsg(fd, &m, 0);
    for (struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            *stamp_ns = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
        }
    return r;
}

/* The size of the file sent whole with a 200, else -1; *stamp_ns: when the
 * request's first bytes arrived (with --times; 0 if not known). */
static long long serve(int fd, unsigned long long *stamp_ns) {
    char req[8192];
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        size_t want = sizeof req - 1 - have;
        if (want == 0) return reply_status(fd, "400 Bad Request"), -1;
        if (want > buf_size) want = buf_size;
        ssize_t r = read_stamped(fd, req + have, want, stamp_ns);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        have += (size_t)r;
        req[have] = '\0';
        end = strstr(req, "\r\n\r\n");
        if (!end) end = strstr(req, "\n\n");
    }
    if (strncmp(req, "GET /", 5) != 0) return reply_status(fd, "400 Bad Request"), -1;
    char *path = req + 4, *sp = strpbrk(path, " \r\n");
    if (!sp || *sp != ' ') return reply_status(fd, "400 Bad Request"), -1;
    *sp = '\0';
    char *q = strchr(path, '?');
    if (q) *q = '\0';
    int file = open_beneath(path);
    if (file < 0) return reply_status(fd, "404 Not Found"), -1;
    struct stat st;
    fstat(file, &st);
    char head[160];
    int n = snprintf(head, sizeof head, "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                        "Content-Length: %lld\r\nConnection: close\r\n\r\n",
                     (long long)st.st_size);
    char *buf = malloc(buf_size);
    long long sent = -1;
    if (buf && write_all(fd, head, (size_t)n) == 0) {
        for (sent = 0;;) {
            ssize_t r = read(file, buf, buf_size);
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) break;
            if (r < 0 || write_all(fd, buf, (size_t)r) != 0) {
                sent = -1;
                break;
            }
            sent += r;
        }
    }
    free(buf);
    close(file);
    return sent == (long long)st.st_size ? sent : -1;
}

struct conn {
    int fd;
    unsigned long long accepted_ns, accepted_real_ns; /* CLOCK_MONOTONIC, CLOCK_REALTIME */
};

static void *connection(void *arg) {
    struct conn c = *(struct conn *)arg;
    free(arg);
    unsigned long long stamp = 0;
    long long size = serve(c.fd, &stamp);
    close(c.fd);
    if (times_path && size >= 0) {
        /* arrival: the request's receive time, or the accept if that came first */
        unsigned long long real = clock_ns(CLOCK_REALTIME);
        unsigned long long arrived = stamp && stamp < c.accepted_real_ns ? stamp : c.accepted_real_ns;
        record_time(size, now_ns() - c.accepted_ns, stamp && arrived < real ? real - arrived : 0);
    }
    atomic_fetch_add(&served, 1);
    return NULL;
}

static int quiet;

static void *signal_watcher(void *arg) {
    sigset_t *set = arg;
    int sig = 0;
    sigwait(set, &sig);
    write_times();
    if (!quiet) printf("smallserver: %s: stopped after %ld connections\n", strsignal(sig), atomic_load(&served));
    fflush(stdout);
    exit(0);
}

int main(int argc, char **argv) {
    int port = -1;
    const char *root = NULL;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--port") && v) {
            long p;
            if (!number(a, v, 0, 65535, &p)) return 2;
            port = (int)p;
            ++i;
        } else if (!strcmp(a, "--root") && v) {
            root = v;
            ++i;
        } else if (!strcmp(a, "--times") && v) {
            times_path = v;
            ++i;
        } else if (!strcmp(a, "--buf") && v) {
            long b;
            if (!number(a, v, 1, 65536, &b)) return 2;
            buf_size = (size_t)b;
            ++i;
        } else {
            fprintf(stderr, "smallserver: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (port < 0 || !root) {
        fprintf(stderr, "smallserver: --port and --root are required\n");
        usage(stderr);
        return 2;
    }
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        fprintf(stderr, "smallserver: --root %s: %s\n", root, strerror(errno));
        return 1;
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (times_path) setsockopt(lfd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one); /* accepted sockets inherit it */
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 4096) != 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &len) != 0) {
        fprintf(stderr, "smallserver: 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    static sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGTERM);
    sigaddset(&stop_set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL); /* every thread made from here on inherits it */
    signal(SIGPIPE, SIG_IGN);
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, signal_watcher, &stop_set) != 0) {
        fprintf(stderr, "smallserver: cannot start a thread: %s\n", strerror(errno));
        return 1;
    }
    if (!quiet) printf("smallserver: listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
    fflush(stdout);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct timespec ts = {0, 10 * 1000 * 1000}; /* full: let connections end */
                nanosleep(&ts, NULL);
            }
            continue; /* EINTR, ECONNABORTED, ... */
        }
        unsigned long long at = times_path ? now_ns() : 0, at_real = times_path ? clock_ns(CLOCK_REALTIME) : 0;
        struct conn *c = malloc(sizeof *c);
        pthread_t t;
        if (c) *c = (struct conn){fd, at, at_real};
        if (!c || pthread_create(&t, &attr, connection, c) != 0) {
            free(c);
            reply_status(fd, "503 Service Unavailable");
            close(fd);
        }
    }
}
