/*
 * measure_bounds: how much stack some libc calls really use, to check the
 * trusted bounds in libc.bounds against the C library at hand.
 *
 * Each probe runs in a fresh child process (so first-call paths, such as
 * the allocator initialising its arena or localtime reading the time-zone
 * file, are the ones measured) on a 256 KiB stack painted with a pattern
 * (makecontext/swapcontext); the depth is the distance from the top of that
 * stack to the lowest byte no longer holding the pattern. It includes the
 * probe's own small frame, so it errs on the high side. Output: one
 * "NAME BYTES" line per probe, the format of a bounds file.
 * tests/stackcheck (Stackcheck.LibcBoundsCoverMeasuredDepths) builds it and
 * checks every measured depth against the bound libc.bounds ships.
 *
 * Build: cc -O2 -pthread -Wl,-z,now -o measure_bounds measure_bounds.c
 * (-z now: without it each first call through the PLT also measures the
 * dynamic linker's lazy-binding resolver, about 3 KiB; see libc.bounds.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define STACK_BYTES (256 * 1024)
#define PAINT 0xA5

static volatile size_t sink;
static char text[4096];

static void p_memcpy(void)   { static char d[4096]; memcpy(d, text, sizeof d); sink = d[7]; }
static void p_memset(void)   { static char d[4096]; memset(d, 1, sizeof d); sink = d[9]; }
static void p_strlen(void)   { sink = strlen(text); }
static void p_strcmp(void)   { sink = (size_t)strcmp(text, "abc"); }
static void p_strchr(void)   { sink = (size_t)strchr(text, 'z'); }
static void p_strstr(void)   { sink = (size_t)strstr(text, "needle"); }
static void p_strtol(void)   { sink = (size_t)strtol("123456789", NULL, 10); }
static void p_strtod(void)   { sink = (size_t)strtod("1.2345678901234567e300", NULL); }
static void p_malloc(void)   { void *p = malloc(100000); sink = (size_t)p; free(p); }
static void p_calloc(void)   { void *p = calloc(1000, 10); sink = (size_t)p; free(p); }
static void p_realloc(void)  { void *p = realloc(NULL, 10); p = realloc(p, 1 << 20); sink = (size_t)p; free(p); }
static void p_free(void) {
  /* small chunks into the tcache and fastbins, then consolidation and trim
   * when the big neighbours go, then an mmapped chunk */
  void *p[64];
  for (int i = 0; i < 64; i++) p[i] = malloc(i < 32 ? 24 : 20000);
  for (int i = 0; i < 64; i++) free(p[i]);
  free(malloc(1 << 20));
}
static void p_snprintf(void) { char b[256]; sink = (size_t)snprintf(b, sizeof b, "%s %d %f %g %p %lx", "x", 42, 3.25, 1e300, (void *)b, 7ul); }
static void p_printf(void)   { sink = (size_t)printf("%s %d %f %.20g\n", "x", 42, 3.25, 1e-300); fflush(stdout); }
static void p_fprintf(void)  { sink = (size_t)fprintf(stderr, "%s %d %Lf\n", "x", 42, 1e300L); }
static void p_sscanf(void)   { int a; double d; sink = (size_t)sscanf("12 3.5", "%d %lf", &a, &d); }
static void p_write(void)    { sink = (size_t)write(1, "", 0); }
static void p_read(void)     { char b[16]; sink = (size_t)read(0, b, 0); }
static void p_open_close(void) { int fd = open("/dev/null", O_RDONLY); sink = (size_t)fd; close(fd); }
static void p_fstat(void)    { struct stat st; sink = (size_t)fstat(0, &st); }
static void p_socket(void)   { int fd = socket(AF_INET, SOCK_STREAM, 0); sink = (size_t)fd; close(fd); }
static void p_clock(void)    { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); sink = (size_t)ts.tv_nsec; }
static void p_gmtime(void)   { time_t t = 1700000000; struct tm tm; gmtime_r(&t, &tm); sink = (size_t)tm.tm_hour; }
static void p_localtime(void){ time_t t = 1700000000; struct tm tm; localtime_r(&t, &tm); sink = (size_t)tm.tm_hour; }
static void p_strftime(void) { time_t t = 1700000000; struct tm tm; char b[128]; gmtime_r(&t, &tm); sink = strftime(b, sizeof b, "%a, %d %b %Y %H:%M:%S GMT", &tm); }
static void p_strerror(void) { sink = strlen(strerror(ENOENT)); }
static void p_mutex(void)    { pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
static void p_getopt(void) {
  /* an unknown option: the error message goes to the unbuffered stderr */
  char a0[] = "probe", a1[] = "--no-such-option", a2[] = "-Z";
  char *argv[] = {a0, a1, a2, NULL};
  static const struct option opts[] = {{"known", no_argument, NULL, 'k'}, {0}};
  opterr = 1;
  while (getopt_long(3, argv, "k", opts, NULL) != -1) {}
}
static void p_getattr(void) {
  /* the main thread's attributes: glibc reads /proc/self/maps */
  pthread_attr_t a;
  if (pthread_getattr_np(pthread_self(), &a) == 0) pthread_attr_destroy(&a);
}
static void p_inet_ntop(void) {
  struct in6_addr a;
  char b[INET6_ADDRSTRLEN];
  memset(&a, 0x20, sizeof a);
  sink = (size_t)inet_ntop(AF_INET6, &a, b, sizeof b);
}
static void p_sigtimedwait(void) {
  sigset_t set;
  struct timespec zero = {0, 0};
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  sink = (size_t)sigtimedwait(&set, NULL, &zero);
}
static void p_cond(void)     { pthread_cond_t c = PTHREAD_COND_INITIALIZER; pthread_cond_signal(&c); pthread_cond_broadcast(&c); }

static const struct probe {
  const char *name;  /* as in libc.bounds */
  void (*fn)(void);
} probes[] = {
  {"memcpy", p_memcpy}, {"memset", p_memset}, {"strlen", p_strlen},
  {"strcmp", p_strcmp}, {"strchr", p_strchr}, {"strstr", p_strstr},
  {"strtol", p_strtol}, {"strtod", p_strtod}, {"malloc", p_malloc},
  {"calloc", p_calloc}, {"realloc", p_realloc}, {"free", p_free},
  {"snprintf", p_snprintf}, {"printf", p_printf}, {"fprintf", p_fprintf},
  {"sscanf", p_sscanf}, {"write", p_write}, {"read", p_read},
  {"open", p_open_close}, {"fstat", p_fstat}, {"socket", p_socket},
  {"clock_gettime", p_clock}, {"gmtime_r", p_gmtime},
  {"localtime_r", p_localtime}, {"strftime", p_strftime},
  {"strerror", p_strerror}, {"pthread_mutex_lock", p_mutex},
  {"pthread_cond_signal", p_cond}, {"getopt_long", p_getopt},
  {"pthread_getattr_np", p_getattr}, {"inet_ntop", p_inet_ntop},
  {"sigtimedwait", p_sigtimedwait},
};

static ucontext_t main_ctx, probe_ctx;
static void (*current)(void);

static void trampoline(void) { current(); }

/* In the child: run one probe on a painted stack, return its depth. */
static size_t measure(void (*fn)(void)) {
  /* mmap, not malloc: the allocator's first call belongs to the probe */
  unsigned char *stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack == MAP_FAILED) _exit(1);
  memset(stack, PAINT, STACK_BYTES);
  getcontext(&probe_ctx);
  probe_ctx.uc_stack.ss_sp = stack;
  probe_ctx.uc_stack.ss_size = STACK_BYTES;
  probe_ctx.uc_link = &main_ctx;
  current = fn;
  makecontext(&probe_ctx, trampoline, 0);
  swapcontext(&main_ctx, &probe_ctx);
  size_t i = 0;
  while (i < STACK_BYTES && stack[i] == PAINT) i++;
  return STACK_BYTES - i;
}

/* The parent reports with write(2) only, so that it never touches stdio
 * or the allocator: in each child the probe's call is the first one. */
static void say(const char *name, size_t depth) {
  char line[96];
  int n = snprintf(line, sizeof line, "%-22s %zu\n", name, depth);
  if (n > 0 && write(1, line, (size_t)n) != n) _exit(1);
}

int main(void) {
  memset(text, 'a', sizeof text - 1);
  for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      close(fds[0]);
      /* the probes' own output must not mix with the report */
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      size_t depth = measure(probes[k].fn);
      if (write(fds[1], &depth, sizeof depth) != sizeof depth) _exit(1);
      _exit(0);
    }
    close(fds[1]);
    size_t depth = 0;
    ssize_t got = read(fds[0], &depth, sizeof depth);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (got != sizeof depth || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      static const char msg[] = "measure_bounds: a probe failed\n";
      if (write(2, msg, sizeof msg - 1) < 0) return 1;
      return 1;
    }
    say(probes[k].name, depth);
  }
  return 0;
}
