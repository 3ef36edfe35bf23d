/*
 * weft.h — the C API of weft, a runtime of cooperative user-level threads
 * for high-concurrency servers on Linux. Usable from C11 and C++20.
 *
 * Conventions (one per layer, the same everywhere in this header):
 *   - Functions that can fail return 0 or a positive error number, exactly
 *     like pthreads (EINVAL, EPERM, EAGAIN, EBUSY, EDEADLK, ETIMEDOUT ...).
 *     errno is not touched by them.
 *   - Time is in nanoseconds of CLOCK_MONOTONIC (weft_now_ns()); timed
 *     waits take an absolute deadline on that clock.
 *   - All handles are plain structs the caller owns; static initializers
 *     exist for every synchronisation object.
 *
 * Outside weft_main (a kernel thread that is not running the runtime):
 *   - thread calls (create, join, detach, yield, exit) return EPERM;
 *   - weft_sleep_ns falls back to nanosleep(2) of the calling kernel thread;
 *   - synchronisation objects work while no weft thread uses them at the
 *     same time (set up before weft_main, tear down after); an operation
 *     that would have to wait returns EPERM instead of blocking. Sharing an
 *     object between a plain kernel thread and running weft threads is not
 *     supported (on one vproc objects take no lock at all);
 *   - weft_now_ns, weft_stats_get (zeros) and the key calls work.
 *
 * Threads are cooperative: a thread runs until it blocks in a weft call or
 * yields. A thread runs on one vproc (a kernel thread with its own run queue
 * and timers); a new thread that has not run yet may be taken by an idle
 * vproc (work stealing, weft_config.steal), and weft_migrate moves a thread
 * on request. Synchronisation works across vprocs.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#define WEFT_NORETURN [[noreturn]]
#else
#define WEFT_NORETURN _Noreturn
#endif

/* libweft is built with hidden visibility; exactly this API is exported. */
#pragma GCC visibility push(default)

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0

/* ------------------------------------------------------------------ */
/* Runtime                                                             */
/* ------------------------------------------------------------------ */

/* Runtime options. weft_config_init() fills every field with "unset"; an
 * unset field takes its value from the environment variable named beside
 * it, else from the default. */
typedef struct weft_config {
    int vprocs;          /* WEFT_VPROCS; default: the CPUs in the caller's affinity mask
                            (weft_default_vprocs()). Kernel threads running user threads. */
    int pin;             /* 1 on, -1 off, 0: WEFT_PIN (0 or 1); default off. Pin vproc i
                            to the i-th CPU of the caller's affinity mask. */
    size_t stack_size;   /* WEFT_STACK_SIZE (bytes, K/M/G suffix, 16K..1G); default 64 KiB. */
    const char *policy;  /* WEFT_POLICY; default "fifo". Scheduling policy by name:
                            "fifo", "resource" (docs/scheduling.md), "cohort" (ready
                            threads grouped by blocking site, docs/staged.md), "tap"
                            (threading by appointment, docs/tap.md; see `tap`). */
    int idle_spin_us;    /* WEFT_IDLE_SPIN_US; default 50. With several vprocs, how long
                            an idle vproc watches for work before it sleeps in the
                            kernel; -1 (or WEFT_IDLE_SPIN_US=0): never spin. */
    const char *io;      /* WEFT_IO: "uring" (default), "epoll" or "poll". The I/O
                            reactor backend; when io_uring is refused by the kernel
                            (ENOSYS, EPERM, io_uring_disabled, seccomp) weft falls
                            back to epoll and says so once on stderr. */
    int workers;         /* WEFT_WORKERS; default 4, 1..256. Kernel threads of the
                            offload pool (weft_offload, blocking sendfile, disk
                            reads when io_uring is not in use). */
    const char *sendfile; /* WEFT_SENDFILE: "nonblocking" (default), "blocking" or
                            "splice": how weft_sendfile moves data (see below). */
    const char *stacks;  /* WEFT_STACKS: "fixed" (default) or "linked": the stacks threads
                            get unless their attribute says otherwise. Linked stacks
                            (docs/stacks.md) need code built with -fsplit-stack;
                            unavailable in sanitizer builds (then EINVAL). */
    size_t min_chunk;    /* WEFT_MIN_CHUNK (bytes, 1K..64K); default 4 KiB: the smallest
                            chunk a linked stack grows by (Capriccio's MinChunk). */
    int graph_sample;    /* WEFT_GRAPH ("off", "on" = 1, or N); default off. The blocking
                            graph (docs/observability.md): record one park in N; 1 records
                            every park; -1: off whatever WEFT_GRAPH says. */
    int graph_depth;     /* WEFT_GRAPH_DEPTH (1..8); default 8. Return addresses that name
                            a blocking point (frame-pointer walk from the user's call). */
    size_t mem_limit;    /* WEFT_MEM_LIMIT (bytes, K/M/G suffix); default: the memory
                            cgroup's limit. The memory the resource-aware policy
                            (policy "resource", docs/scheduling.md) rations. */
    int admit_target_ms; /* WEFT_ADMIT_TARGET_MS (1..60000); default 100. Under the
                            resource policy, while the CPU is over-booked, weft_admit
                            tells a thread that waited longer than this between its
                            creation and its first run to shed its work. */
    const char *tap;     /* WEFT_TAP; threading by appointment's settings, for policy
                            "tap" (docs/tap.md): "key=value,..." with ratio=C:D:N
                            (appointments per clock in the CPU, DISK and NET calendars;
                            default 5:4:1), class=const|shape|boost|weft|share (how a
                            thread's level moves; default weft), levels=1..32
                            (default 16), age=N (clocks per level of aging, class
                            weft; default 8), rate=C:D:N (appointments per second
                            per calendar, 0 = no limit; default 0:0:0) and burst=N
                            (the rate's token bucket; default 16), locks=on|off (TAP
                            locking: a contended mutex by appointment; default on). */
    int steal;           /* 0: WEFT_STEAL; default 1. With several vprocs, an idle vproc
                            takes ready threads from a busy one (docs/stealing.md):
                            1 threads that have not run yet, 2 any ready thread (only
                            for code that keeps no errno or thread_local address
                            across a blocking call: compilers do for errno), -1 (or
                            WEFT_STEAL=0) off. Threads created with a home_vproc are
                            never moved; the "tap" policy never gives threads away. */
    int steal_after_us;  /* WEFT_STEAL_AFTER_US (1..1000000); default 1000. How long a vproc
                            must have had threads waiting to run, while another vproc
                            idles, before it gives some away: below it, a thread keeps
                            the vproc (and the cache) it last ran on. */
    int run_next;        /* 0: WEFT_RUN_NEXT; default 1. Under the FIFO policy, threads
                            a thread creates run next on its vproc, in the order it
                            created them, once it parks or yields; so does a joiner
                            whose thread has just exited there: as calls and
                            returns would, so a fork-join tree runs depth-first.
                            Bounded: after 32 such threads in a row, the thread
                            ready longest before them runs. -1 (or WEFT_RUN_NEXT=0):
                            plain FIFO, threads run in the order they became ready. */
} weft_config;

/* Fill *cfg with "unset" values (zeros / NULL). */
void weft_config_init(weft_config *cfg);

/* Start the runtime on the calling kernel thread with fn(arg) as the first
 * user thread (named "main", on vproc 0). Returns fn's result once every user
 * thread has finished. If the runtime cannot start, returns -1 with errno set
 * (EINVAL: bad configuration, EAGAIN: out of resources, EBUSY: the calling
 * kernel thread is already running weft) and prints the reason on stderr. */
int weft_main(int (*fn)(void *), void *arg);
int weft_main_config(const weft_config *cfg, int (*fn)(void *), void *arg);

/* The number of vprocs weft_main starts when neither weft_config.vprocs
 * nor a valid WEFT_VPROCS says otherwise: the CPUs the calling kernel
 * thread's affinity mask allows (at most 1024), so `taskset -c 0 prog`
 * runs one vproc. With a valid WEFT_VPROCS, its value. Works anywhere;
 * servers call it to open one listening socket per vproc before
 * weft_main. */
int weft_default_vprocs(void);

/* Number of vprocs of the running runtime and the caller's vproc index;
 * -1 outside weft_main. */
int weft_vproc_count(void);
int weft_vproc_self(void);

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC). Works anywhere. */
uint64_t weft_now_ns(void);

/* ------------------------------------------------------------------ */
/* Threads                                                             */
/* ------------------------------------------------------------------ */

/* A thread handle: a reference plus the thread's unique id. A stale handle
 * (thread joined or detached and gone) is detected: calls return EINVAL.
 * Handles are meaningful only inside the runtime that created them; outside
 * weft_main the calls below return EPERM (weft_thread_id: 0). */
typedef struct weft_thread {
    void *_tcb;   /* internal: the thread control block */
    uint64_t _id; /* unique, never reused within a process */
} weft_thread_t;

/* weft_thread_attr.stacks */
enum { WEFT_STACKS_DEFAULT = 0, WEFT_STACKS_FIXED = 1, WEFT_STACKS_LINKED = 2 };

typedef struct weft_thread_attr {
    size_t stack_size; /* 0 = the runtime's default (weft_config.stack_size). With a
                          linked stack: the bytes of frames its first chunk holds (weft
                          adds its own overhead) — give a thread whose entry has a
                          static bound (stackcheck) exactly that bound; 0: a 1,792-byte chunk. */
    const char *name;  /* copied (up to 31 bytes); NULL = "thread-<id>" */
    int detached;      /* non-zero: the thread cannot be joined; freed at exit */
    int home_vproc;    /* -1 = the creator's vproc, from which an idle vproc may take
                          it (work stealing); else 0 .. vprocs-1: runs only there */
    int stacks;        /* WEFT_STACKS_DEFAULT (weft_config.stacks), _FIXED or _LINKED */
} weft_thread_attr_t;

void weft_thread_attr_init(weft_thread_attr_t *attr);

/* Create a thread running fn(arg). attr may be NULL. Returns 0, EAGAIN when
 * memory for its stack is exhausted, EINVAL for a bad attribute, EPERM
 * outside weft_main. */
int weft_thread_create(weft_thread_t *t, const weft_thread_attr_t *attr,
                       void *(*fn)(void *), void *arg);

/* Wait for t to finish; *ret (if not NULL) receives its result. EINVAL if t
 * is detached, already joined or stale; EDEADLK if t is the caller. */
int weft_thread_join(weft_thread_t t, void **ret);
int weft_thread_detach(weft_thread_t t);
weft_thread_t weft_thread_self(void);      /* {NULL, 0} outside weft_main */
int weft_thread_equal(weft_thread_t a, weft_thread_t b);
uint64_t weft_thread_id(weft_thread_t t);  /* 0 for an invalid handle */
/* Copies the name into buf (always NUL-terminated). EINVAL if stale.
 * Unnamed threads read as "thread-<id>". */
int weft_thread_getname(weft_thread_t t, char *buf, size_t len);
int weft_thread_setname(weft_thread_t t, const char *name);

/* End the calling thread with result ret. Thread-specific destructors run;
 * C++ destructors of frames still on the thread's stack do not (return from
 * the thread function instead where that matters). Outside weft_main this
 * aborts: there is no thread to end. */
WEFT_NORETURN void weft_thread_exit(void *ret);

/* Let other ready threads run. Returns 0, or EPERM outside weft_main. */
int weft_yield(void);

/* Move the calling thread to vproc `vproc` and continue there (0 at once if
 * it is there already). EINVAL: no such vproc; EPERM: outside weft_main, or
 * the thread was created with a home_vproc (pinned). errno's value, thread-
 * specific data, I/O registrations and timers go with it. It continues on
 * another kernel thread: an address of errno or of a C/C++ thread_local
 * taken before the call is the old kernel thread's (gcc keeps errno's
 * address across calls in a function that reads errno before and after). */
int weft_migrate(int vproc);

/* Park the calling thread for at least ns nanoseconds. 0 is a yield. */
int weft_sleep_ns(uint64_t ns);
/* Park until weft_now_ns() >= deadline_ns. */
int weft_sleep_until_ns(uint64_t deadline_ns);

/* ------------------------------------------------------------------ */
/* Thread-specific data                                                */
/* ------------------------------------------------------------------ */

#define WEFT_KEYS_MAX 256
#define WEFT_DESTRUCTOR_ITERATIONS 4
typedef uint32_t weft_key_t;

/* EAGAIN when WEFT_KEYS_MAX keys exist. */
int weft_key_create(weft_key_t *key, void (*destructor)(void *));
int weft_key_delete(weft_key_t key);
/* EINVAL for a deleted or unknown key, EPERM outside weft_main, ENOMEM. */
int weft_setspecific(weft_key_t key, const void *value);
void *weft_getspecific(weft_key_t key); /* NULL if unset or invalid */

/* ------------------------------------------------------------------ */
/* Synchronisation. Every waiter is woken in FIFO order.               */
/* ------------------------------------------------------------------ */

enum weft_mutex_kind {
    WEFT_MUTEX_NORMAL = 0,     /* relock by the owner deadlocks (reported) */
    WEFT_MUTEX_ERRORCHECK = 1, /* relock: EDEADLK; unlock by non-owner: EPERM */
    WEFT_MUTEX_RECURSIVE = 2   /* the owner may relock; unlock as often */
};

/* An unlock wakes the first waiter to take the mutex; a running thread may
 * take it first, and the waiter then queues again at the head. One that has
 * kept losing for 1 ms is handed the mutex (docs/api.md "Synchronisation"). */
typedef struct weft_mutex { uint64_t _opaque[5]; } weft_mutex_t;
#define WEFT_MUTEX_INITIALIZER {{0, 0, 0, 0, 0}}
#define WEFT_MUTEX_ERRORCHECK_INITIALIZER {{1, 0, 0, 0, 0}}
#define WEFT_MUTEX_RECURSIVE_INITIALIZER {{2, 0, 0, 0, 0}}

int weft_mutex_init(weft_mutex_t *m, int kind);
int weft_mutex_lock(weft_mutex_t *m);
int weft_mutex_timedlock(weft_mutex_t *m, uint64_t deadline_ns);
int weft_mutex_trylock(weft_mutex_t *m);   /* EBUSY when held */
int weft_mutex_unlock(weft_mutex_t *m);    /* EPERM when not the owner */
int weft_mutex_destroy(weft_mutex_t *m);   /* EBUSY when held or waited on */

typedef struct weft_cond { uint64_t _opaque[3]; } weft_cond_t;
#define WEFT_COND_INITIALIZER {{0, 0, 0}}

int weft_cond_init(weft_cond_t *c);
/* EPERM if the caller does not hold m. */
int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m);
/* ETIMEDOUT once weft_now_ns() >= deadline_ns; m is held again either way. */
int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, uint64_t deadline_ns);
int weft_cond_signal(weft_cond_t *c);
int weft_cond_broadcast(weft_cond_t *c);
int weft_cond_destroy(weft_cond_t *c);     /* EBUSY when waited on */

/* Readers-writer lock, FIFO: a reader arriving after a waiting writer waits
 * behind it, so neither side starves. */
typedef struct weft_rwlock { uint64_t _opaque[4]; } weft_rwlock_t;
#define WEFT_RWLOCK_INITIALIZER {{0, 0, 0, 0}}

int weft_rwlock_init(weft_rwlock_t *l);
int weft_rwlock_rdlock(weft_rwlock_t *l);
int weft_rwlock_tryrdlock(weft_rwlock_t *l); /* EBUSY */
int weft_rwlock_wrlock(weft_rwlock_t *l);    /* EDEADLK if the caller writes it */
int weft_rwlock_trywrlock(weft_rwlock_t *l); /* EBUSY */
/* EPERM if the lock is free or another thread writes it. Readers are not
 * tracked one by one: an unlock by a thread that holds no read lock while
 * others do is not detected (it releases one of theirs). */
int weft_rwlock_unlock(weft_rwlock_t *l);
int weft_rwlock_destroy(weft_rwlock_t *l);   /* EBUSY when held or waited on */

/* Counting semaphore. Unlike sem_wait(3) these return an error number. */
typedef struct weft_sem { uint64_t _opaque[4]; } weft_sem_t;
#define WEFT_SEM_INITIALIZER(value) {{(uint64_t)(value) << 32, 0, 0, 0}}
#define WEFT_SEM_VALUE_MAX 0x7fffffffu

int weft_sem_init(weft_sem_t *s, unsigned value); /* EINVAL > VALUE_MAX */
int weft_sem_wait(weft_sem_t *s);
int weft_sem_trywait(weft_sem_t *s);              /* EAGAIN when zero */
int weft_sem_timedwait(weft_sem_t *s, uint64_t deadline_ns);
int weft_sem_post(weft_sem_t *s);                 /* EOVERFLOW at VALUE_MAX */
int weft_sem_getvalue(weft_sem_t *s, int *value);
int weft_sem_destroy(weft_sem_t *s);              /* EBUSY when waited on */

typedef struct weft_barrier { uint64_t _opaque[4]; } weft_barrier_t;
#define WEFT_BARRIER_SERIAL_THREAD (-1)

int weft_barrier_init(weft_barrier_t *b, unsigned count); /* EINVAL if 0 */
/* WEFT_BARRIER_SERIAL_THREAD for exactly one thread of each round, 0 for
 * the others, or an error number (> 0). */
int weft_barrier_wait(weft_barrier_t *b);
int weft_barrier_destroy(weft_barrier_t *b);             /* EBUSY mid-round */

typedef struct weft_once { uint64_t _opaque[3]; } weft_once_t;
#define WEFT_ONCE_INIT {{0, 0, 0}}

/* Run fn exactly once for *o; concurrent callers wait until it returned. */
int weft_once(weft_once_t *o, void (*fn)(void));


/* ------------------------------------------------------------------ */
/* I/O: blocking-style calls on the runtime's asynchronous reactor      */
/* ------------------------------------------------------------------ */
/*
 * Each call has the exact POSIX behaviour of the system call it is named
 * after — return value, errno, short reads, EOF — but blocks only the
 * calling weft thread: it first tries the system call without blocking and
 * parks on the vproc's reactor only when that would block. Descriptors stay
 * in the mode the program gave them as far as it can see (weft_accept,
 * weft_connect and weft_sendfile, and the first use of a pipe other than
 * descriptors 0-2, set O_NONBLOCK underneath, which weft_fcntl hides and
 * the end of weft_main undoes); a descriptor the program made
 * O_NONBLOCK (at creation, with weft_fcntl, or before weft first saw it)
 * keeps returning EAGAIN. Differences from the plain calls:
 *   - no SIGPIPE: writing to a broken pipe or socket returns EPIPE;
 *   - EINTR is never returned (weft threads are not interrupted by signals);
 *   - a descriptor weft has used must be closed with weft_close: it also
 *     wakes every weft thread parked on it, which returns EBADF;
 *   - every blocking call honours the calling thread's I/O timeout and
 *     deadline (weft_set_io_timeout_ns, weft_set_io_deadline_ns) and then
 *     fails with ETIMEDOUT (a write that sent part returns that part).
 * Outside weft_main each call is the plain system call.
 */

/* Name of the running runtime's reactor backend ("uring", "epoll", "poll");
 * NULL outside weft_main. */
const char *weft_io_backend(void);

int weft_socket(int domain, int type, int protocol);
int weft_accept(int fd, struct sockaddr *addr, socklen_t *addrlen);
int weft_accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
int weft_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);
ssize_t weft_read(int fd, void *buf, size_t count);
ssize_t weft_write(int fd, const void *buf, size_t count);
ssize_t weft_readv(int fd, const struct iovec *iov, int iovcnt);
ssize_t weft_writev(int fd, const struct iovec *iov, int iovcnt);
ssize_t weft_recv(int fd, void *buf, size_t len, int flags);
ssize_t weft_send(int fd, const void *buf, size_t len, int flags);
ssize_t weft_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t weft_sendmsg(int fd, const struct msghdr *msg, int flags);
int weft_shutdown(int fd, int how);
int weft_close(int fd);
/* timeout_ms < 0: no timeout (the thread's I/O timeout still applies and
 * then returns 0, as poll(2) does when its timeout expires). */
int weft_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms);
/* fcntl(2); F_GETFL/F_SETFL track O_NONBLOCK as the program sees it. */
int weft_fcntl(int fd, int cmd, ... /* long arg */);

/* Files. A read that the page cache can serve completes inline; a miss
 * (and O_DIRECT) goes to io_uring, or to the offload pool with the other
 * backends. */
int weft_open(const char *path, int flags, ... /* mode_t mode */);
ssize_t weft_pread(int fd, void *buf, size_t count, off_t offset);
ssize_t weft_pwrite(int fd, const void *buf, size_t count, off_t offset);
int weft_fsync(int fd);
int weft_fstat(int fd, struct stat *st);

/* sendfile(2) from a file to a socket (or any descriptor), in one of three
 * strategies, all producing the same bytes:
 *   WEFT_SENDFILE_NONBLOCKING  sendfile as far as the socket takes it, park
 *                              on writability; pages not in the page cache
 *                              are read in by the offload pool first;
 *   WEFT_SENDFILE_BLOCKING     the whole transfer in one offload worker,
 *                              which blocks in sendfile (knot-b of the
 *                              EuroSys'07 study);
 *   WEFT_SENDFILE_SPLICE       io_uring splice file -> pipe -> socket
 *                              (nonblocking strategy without io_uring).
 * weft_sendfile uses the runtime's default (weft_config.sendfile). Like
 * sendfile(2) on a blocking socket it sends all `count` bytes unless EOF,
 * an error or the I/O timeout stops it first. */
enum weft_sendfile_mode {
    WEFT_SENDFILE_DEFAULT = 0,
    WEFT_SENDFILE_NONBLOCKING = 1,
    WEFT_SENDFILE_BLOCKING = 2,
    WEFT_SENDFILE_SPLICE = 3
};
ssize_t weft_sendfile(int out_fd, int in_fd, off_t *offset, size_t count);
ssize_t weft_sendfile_mode(int out_fd, int in_fd, off_t *offset, size_t count, int mode);

/* I/O time limits of the calling thread, for every blocking call above:
 * a relative limit per call (0 = none) and an absolute deadline on
 * weft_now_ns() (0 = none); the earlier wins. EPERM outside weft_main. */
int weft_set_io_timeout_ns(uint64_t timeout_ns);
int weft_set_io_deadline_ns(uint64_t deadline_ns);

/* Run fn(arg) on a kernel thread of the offload pool while the calling weft
 * thread is parked (for calls that can only block: getaddrinfo, a library's
 * blocking call ...). Returns fn's result; errno is what fn left in it.
 * Outside weft_main fn runs on the calling thread. */
void *weft_offload(void *(*fn)(void *), void *arg);

/* The offload pool's bound on kernel workers (weft_config.workers,
 * WEFT_WORKERS) while the program runs: 1..256, else EINVAL; EPERM outside
 * weft_main. Raising it lets queued work start at once; lowering it retires
 * the workers above it as they finish their job (none is interrupted).
 * weft_get_workers gives the bound (-1 outside weft_main), and in *running
 * (if not NULL) the kernel workers that exist now (started on demand). */
int weft_set_workers(int n);
int weft_get_workers(int *running);

/* Admission control, for servers: a thread created to serve new work (a
 * connection) calls it before taking the work on. 1: serve it; 0: shed it —
 * answer "busy" as cheaply as possible (e.g. 503 and close) and finish.
 * Under the resource-aware policy (docs/scheduling.md) it answers 0 while
 * the CPU is over-booked to a thread that waited longer than
 * admit_target_ms (WEFT_ADMIT_TARGET_MS) to run for the first time, so the
 * work a server takes on starts within that target and the rest is refused
 * at once instead of queueing; other policies always answer 1. Outside
 * weft_main: 1. */
int weft_admit(void);

/* Admission control at the door, for an acceptor: asked after accepting a
 * connection and before creating a thread for it. 1: create it; 0: refuse
 * the connection now (e.g. reset it) — no thread, no program code, the
 * cheapest refusal there is. Under the resource-aware policy, while the CPU
 * is over-booked, it refuses a random share of arrivals; the share follows
 * how far work runs late past admit_target_ms — new threads' wait for their
 * first run, or a third of any thread's wait (PIE's controller,
 * docs/scheduling.md) — so the door takes
 * over the refusals weft_admit would make later, at the price of a thread
 * each. Other policies always answer 1. Outside weft_main: 1. Counted in
 * admissions_shed with weft_admit. */
int weft_admit_new(void);

/* The door in the kernel: the same draw as weft_admit_new, made by the
 * kernel as each new connection's SYN reaches listen_fd's port, so that a
 * refused connection costs the server nothing — no accept, no socket, no
 * reset sent from its CPU (refusing after accept cost about 9 us of it
 * each, measured: docs/scheduling.md). The client's connect fails with
 * ECONNREFUSED. The share refused follows the calling vproc's door; under
 * policies without one (fifo, ...) nothing is refused. An acceptor of
 * listen_fd then no longer asks weft_admit_new (it would refuse twice);
 * weft_admit still bounds the wait of what the door lets in.
 * It is a BPF program of type sk_lookup attached to the process's network
 * namespace for as long as the process lives: it watches the port on
 * every address of that namespace, another process's sockets on it
 * included. One door per vproc. 0, or an errno: EPERM (outside weft_main,
 * or no CAP_BPF and CAP_NET_ADMIN), EOPNOTSUPP (a kernel before 5.9),
 * EINVAL (not a listening TCP socket), EBADF, ENOTSOCK, EBUSY (this vproc
 * has a door already). Refusals are counted in door_refused. */
int weft_door_listen(int listen_fd);

/* ------------------------------------------------------------------ */
/* Introspection                                                       */
/* ------------------------------------------------------------------ */

/* Why a thread parked. Every blocking operation parks through one path and
 * is counted under one of these reasons. */
enum weft_park_reason {
    WEFT_PARK_SLEEP = 0,
    WEFT_PARK_JOIN,
    WEFT_PARK_MUTEX,
    WEFT_PARK_COND,
    WEFT_PARK_RWLOCK,
    WEFT_PARK_SEM,
    WEFT_PARK_BARRIER,
    WEFT_PARK_ONCE,
    WEFT_PARK_IO,
    WEFT_PARK_OFFLOAD,
    WEFT_PARK_OTHER,
    WEFT_PARK_REASON_COUNT
};

/* Name of a park reason ("sleep", "mutex", ...), "?" if out of range. */
const char *weft_park_reason_name(int reason);

typedef struct weft_stats {
    uint64_t switches;         /* context switches made */
    uint64_t yields;           /* weft_yield calls that let another thread run */
    uint64_t threads_created;  /* threads started on this vproc (their home) */
    uint64_t threads_exited;   /* threads that finished here */
    uint64_t threads_live;     /* created + migrations_in - exited - migrations_out:
                                  running, ready or parked here */
    uint64_t parks[WEFT_PARK_REASON_COUNT]; /* parks by reason */
    uint64_t remote_wakeups;   /* threads handed in from another vproc */
    uint64_t timers_fired;     /* deadlines that expired */
    uint64_t idle_sleeps;      /* times the vproc slept with nothing to run */
    uint64_t stacks_mapped;    /* stacks carved from fresh memory */
    uint64_t stacks_reused;    /* stacks taken from the vproc's free list */
    uint64_t stacks_released;  /* stacks whose pages were given back (madvise) */
    uint64_t stacks_guarded;   /* stacks protected by a guard page */
    uint64_t io_syscalls;      /* system calls made by the I/O wrappers and the reactor */
    uint64_t io_parks;         /* parks waiting for a descriptor or an I/O completion */
    uint64_t io_waits;         /* reactor waits (blocking or not) */
    uint64_t io_completions;   /* readiness events and completions reaped */
    uint64_t sendfile_bytes;   /* bytes sent by weft_sendfile* */
    uint64_t offloaded;        /* calls run on the offload pool */
    uint64_t stack_links;      /* linked stacks: chunks linked by a checkpoint (__morestack) */
    uint64_t stack_spare_hits; /* ... of which reused the thread's spare chunk (no allocation) */
    uint64_t stack_chunks;     /* chunks carved or mapped from fresh memory */
    uint64_t stack_chunks_given_back; /* chunks whose memory went back above the high-water mark */
    uint64_t admissions_shed;  /* weft_admit and weft_admit_new calls answered 0 */
    uint64_t steals;           /* idle spells that ended with threads given by a busy vproc */
    uint64_t steals_failed;    /* idle spells that asked for threads and got none */
    uint64_t migrations_in;    /* threads that moved here from another vproc */
    uint64_t migrations_out;   /* threads this vproc gave to another */
    uint64_t idle_wakeups;     /* times another kernel thread woke this vproc from its sleep */
    uint64_t door_refused;     /* connections the door in the kernel refused (weft_door_listen) */
} weft_stats_t;

/* vproc >= 0: that vproc's counters; -1: the sum over all vprocs. EINVAL for
 * a vproc that does not exist; outside weft_main: zeros, and 0 for vproc -1.
 * Counters are read without stopping the vprocs: each is exact, the set is
 * a snapshot in motion. */
int weft_stats_get(int vproc, weft_stats_t *out);

/* Threading by appointment (policy "tap", docs/tap.md). Calendars: 0 CPU
 * (commit appointments: threads back to their own code), 1 DISK, 2 NET;
 * levels: 0 is the most urgent. */
#define WEFT_TAP_CALENDARS 3
#define WEFT_TAP_MAX_LEVELS 32
typedef struct weft_tap_stats {
    int levels;                      /* levels per calendar */
    int ratio[WEFT_TAP_CALENDARS];   /* appointments per clock */
    uint64_t clocks;                 /* appointment-clock cycles completed */
    uint64_t appointments[WEFT_TAP_CALENDARS];                   /* begun, per calendar */
    uint64_t by_level[WEFT_TAP_CALENDARS][WEFT_TAP_MAX_LEVELS];  /* ... by the thread's level */
    uint64_t queued[WEFT_TAP_CALENDARS][WEFT_TAP_MAX_LEVELS];    /* waiting now, by level */
    uint64_t disk_batches;           /* submissions of a DISK turn (one system call each) */
    uint64_t disk_batched;           /* disk calls in them */
    uint64_t net_waits;              /* network calls that waited for their descriptor */
    uint64_t dropped;                /* appointments come after their thread's deadline */
    uint64_t throttled;              /* turns the idling clock (rate=) cut short */
    uint64_t lock_appointments;      /* mutexes that came to be waited for (TAP locking) */
} weft_tap_stats_t;
/* vproc >= 0: that vproc's calendars; -1: the sum. ENOTSUP when the policy is
 * not tap, EPERM outside weft_main, EINVAL for a vproc that does not exist. */
int weft_tap_stats(int vproc, weft_tap_stats_t *out);
/* The calling thread's level (0 .. levels-1) from now on; with class=const it
 * stays there. ENOTSUP when the policy is not tap. weft_tap_level: the
 * caller's level, -1 when the policy is not tap. */
int weft_tap_set_level(int level);
int weft_tap_level(void);

/* The blocking graph (docs/observability.md), on when weft_config.graph_sample
 * or WEFT_GRAPH says so: nodes are the places threads block (named by the
 * call chain that got there), edges what threads did between two of them,
 * with counts, mean running times and resource changes, merged over every
 * vproc. Written as JSON or as Graphviz DOT. Returns 0, EINVAL (NULL out,
 * unknown format), ENODATA (the graph is off), EPERM (outside weft_main) or
 * EIO (the stream failed). SIGUSR2 writes both forms to
 * $WEFT_GRAPH_DIR/weft-graph-<pid>.{json,dot} (default: the working
 * directory) while the graph is on, unless the program handles SIGUSR2. */
enum { WEFT_GRAPH_JSON = 0, WEFT_GRAPH_DOT = 1 };
int weft_graph_dump(FILE *out, int format);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* WEFT_WEFT_H */
