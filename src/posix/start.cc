// libweft-posix's entry: the program's main becomes the first weft thread.
//
// The dynamic loader runs every program through __libc_start_main(main,
// ...). Preloaded, the shim's definition comes first: it hands libc a main
// of its own, which starts the runtime (weft_main) on the process's initial
// kernel thread and runs the program's main on a weft thread named "main"
// with a main-sized stack. When main returns, exit() ends the process at
// once, other threads or not, as POSIX says; when main calls pthread_exit,
// the process ends with status 0 after its last thread, as POSIX says too.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/runtime.hpp"
#include "posix/real.hpp"
#include "posix/shim.hpp"
#include "weft/weft.h"

namespace weft::posix {

std::atomic<uint64_t> g_counters[kCounterCount];

namespace {

using MainFn = int (*)(int, char **, char **);
using StartFn = int (*)(MainFn, int, char **, void (*)(), void (*)(), void (*)(), void *);

MainFn g_main;
int g_argc;
char **g_argv, **g_envp;
bool g_report;

constexpr size_t kMainStack = size_t{8} << 20; // as NPTL's main thread gets (ulimit -s)

size_t main_stack_size() {
    const char *e = std::getenv("WEFT_MAIN_STACK");
    if (!e || !*e) return kMainStack;
    char *end;
    unsigned long long v = std::strtoull(e, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10, ++end;
    else if (*end == 'M' || *end == 'm') v <<= 20, ++end;
    if (*end || v < (64u << 10) || v > (size_t{1} << 30)) {
        std::fprintf(stderr, "weft-posix: WEFT_MAIN_STACK=%s: expected bytes 64K..1G (e.g. 8M); using 8M\n", e);
        return kMainStack;
    }
    return v;
}

void report() {
    std::fprintf(stderr, "weft-posix: %llu calls served on weft threads, %llu from outside weft passed to libc, "
                         "%llu passed to libc for want of a weft equivalent\n",
                 static_cast<unsigned long long>(g_counters[kServed].load()),
                 static_cast<unsigned long long>(g_counters[kOutside].load()),
                 static_cast<unsigned long long>(g_counters[kPassedThrough].load()));
}

// exit() from a weft thread never returns to weft_main, whose end gives
// descriptors weft made O_NONBLOCK (ttys, pipes) their mode back: do it at
// exit instead, or the shell that ran the program inherits a non-blocking
// terminal.
weft::detail::Runtime *g_runtime;
void restore_modes() {
    if (g_runtime) g_runtime->fds.restore_modes(); // (null: weft_main ended, and did it)
}

void *program_main(void *) {
    g_runtime = weft::detail::tls_vproc->rt;
    std::atexit(restore_modes);
    std::exit(g_main(g_argc, g_argv, g_envp));
}

int first_thread(void *) {
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.name = "main";
    // Joinable, as POSIX's initial thread is; never joined by weft itself
    // (an exited thread does not keep weft_main waiting, joined or not).
    a.stack_size = main_stack_size();
    weft_thread_t t;
    if (int e = weft_thread_create(&t, &a, program_main, nullptr)) {
        std::fprintf(stderr, "weft-posix: cannot create the main thread: %s\n", std::strerror(e));
        return 127;
    }
    return 0; // the process lives on until main exits or its last thread ends
}

int shim_main(int argc, char **argv, char **envp) {
    g_argc = argc;
    g_argv = argv;
    g_envp = envp;
    const char *r = std::getenv("WEFT_POSIX_REPORT");
    g_report = r && *r && std::strcmp(r, "0") != 0;
    if (g_report) std::atexit(report);
    int rc = weft_main(first_thread, nullptr);
    g_runtime = nullptr; // gone with weft_main
    if (rc == -1 && errno) {
        std::fprintf(stderr, "weft-posix: the runtime did not start: %s\n", std::strerror(errno));
        return 127;
    }
    return rc;
}

} // namespace

void passed_through(const char *name) {
    count(kPassedThrough);
    if (!g_report) return;
    // Named once each: a small table of the names seen (pointers to literals).
    static std::atomic<const char *> seen[64];
    for (auto &s : seen) {
        const char *v = s.load(std::memory_order_relaxed);
        if (!v && s.compare_exchange_strong(v, name)) break; // (on failure v is the winner's name)
        if (v == name) return;
    }
    std::fprintf(stderr, "weft-posix: %s passed to libc (no weft equivalent; docs/posix.md)\n", name);
}

bool valid_timespec(const struct timespec *ts) { return ts && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000L; }

uint64_t deadline_on(clockid_t clock, const struct timespec *abs) {
    const int64_t abs_ns = static_cast<int64_t>(abs->tv_sec) * 1000000000 + abs->tv_nsec;
    timespec now;
    clock_gettime(clock, &now);
    const int64_t now_ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
    const uint64_t base = weft_now_ns();
    if (abs_ns <= now_ns) return base ? base : 1;
    return base + static_cast<uint64_t>(abs_ns - now_ns);
}

} // namespace weft::posix

using namespace weft::posix;

extern "C" __attribute__((visibility("default"))) int __libc_start_main(MainFn main, int argc, char **argv,
                                                                        void (*init)(), void (*fini)(),
                                                                        void (*rtld_fini)(), void *stack_end) {
    auto real = reinterpret_cast<StartFn>(libc_symbol("__libc_start_main"));
    if (!real) {
        std::fprintf(stderr, "weft-posix: libc has no __libc_start_main\n");
        std::abort();
    }
    g_main = main;
    return real(shim_main, argc, argv, init, fini, rtld_fini, stack_end);
}
