// weft_main: configuration, vproc kernel threads, start and shutdown.
#include "core/runtime.hpp"

#include "observe/graph.hpp"
#include "stack/linked.hpp"

#include <cxxabi.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft::detail {

// The CPUs vproc i may be pinned to, read once before any vproc pins itself:
// a vproc's kernel thread is created by vproc 0's, and would otherwise
// inherit its one-CPU mask.
static std::vector<int> usable_cpus() {
    std::vector<int> cpus;
    cpu_set_t usable;
    if (sched_getaffinity(0, sizeof usable, &usable) != 0) return cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &usable)) cpus.push_back(cpu);
    return cpus;
}

Runtime::Runtime(const RuntimeConfig &c)
    : cfg(c), smp(c.vprocs > 1), stealing(smp && c.steal && c.policy->give != nullptr) {
    if (cfg.pin) cpus = usable_cpus();
    for (int i = 0; i < cfg.vprocs; ++i) {
        vprocs.push_back(std::make_unique<Vproc>(this, i, smp, regions, chunk_slabs));
        // Made here, not on the vprocs' threads: wake() must work from the
        // first moment any other thread may call it.
        vprocs.back()->reactor = make_reactor(vprocs.back().get(), cfg.io);
        if (!vprocs.back()->reactor && !start_error) start_error = errno ? errno : EMFILE;
    }
    offload = std::make_unique<OffloadPool>(cfg.workers);
    for (auto &vp : vprocs) vproc_list.push_back(vp.get());
    debug_register(this);
    if (cfg.graph_sample) {
        graph_tsc0 = graph_ticks();
        graph_ns0 = now_ns();
        start_graph_dumper(this);
    }
}

// The offload workers may still be inside a wake-up of some vproc: join them
// first. Vprocs hold stack pools that point into `regions`: destroy them
// before it.
Runtime::~Runtime() {
    debug_unregister(this);
    stop_graph_dumper(this);
    offload.reset();
    vprocs.clear();
}

namespace {

constexpr int kMaxVprocs = 1024;
constexpr size_t kMainStackSize = size_t{8} << 20;

// How many CPUs the caller's affinity mask lets it run on, at most
// kMaxVprocs: the default number of vprocs. 1 when the mask cannot be read.
int usable_cpu_count() {
    cpu_set_t usable;
    if (sched_getaffinity(0, sizeof usable, &usable) != 0) return 1;
    int n = CPU_COUNT(&usable);
    return n < 1 ? 1 : n > kMaxVprocs ? kMaxVprocs : n;
}

[[nodiscard]] bool config_error(const char *fmt, const char *value) {
    std::fprintf(stderr, "weft: ");
    std::fprintf(stderr, fmt, value);
    std::fprintf(stderr, "\n");
    errno = EINVAL;
    return false;
}

// A whole number lo..hi, digits only (no sign, no blanks). False on anything else.
bool parse_number(const char *s, long lo, long hi, long *out) {
    if (*s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

// WEFT_VPROCS's value: 0 when unset or empty, -1 when not a number in
// 1..kMaxVprocs.
int env_vprocs(const char *e) {
    long v;
    if (!e || !*e) return 0;
    return parse_number(e, 1, kMaxVprocs, &v) ? static_cast<int>(v) : -1;
}

// A 0/1 switch in the environment: "1" or "0" sets *on; unset or empty
// leaves it. False, with the value in *bad, on anything else.
bool env_switch(const char *name, bool *on, const char **bad) {
    const char *e = std::getenv(name);
    if (!e || !*e) return true;
    if ((*e != '0' && *e != '1') || e[1]) {
        *bad = e;
        return false;
    }
    *on = *e == '1';
    return true;
}

// "65536", "64K", "1M", "1G": bytes. False on anything else, overflow included.
bool parse_size(const char *s, size_t *out) {
    if (*s < '0' || *s > '9') return false; // no sign, no blanks
    char *end;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || end == s) return false;
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, ++end;
    else if (*end == 'M' || *end == 'm') shift = 20, ++end;
    else if (*end == 'G' || *end == 'g') shift = 30, ++end;
    if (*end || v > (~0ull >> shift)) return false;
    *out = static_cast<size_t>(v << shift);
    return true;
}

bool resolve_config(const weft_config *user, RuntimeConfig *out) {
    weft_config c;
    weft_config_init(&c);
    if (user) c = *user;

    out->vprocs = c.vprocs;
    if (out->vprocs == 0) {
        const char *e = std::getenv("WEFT_VPROCS");
        out->vprocs = env_vprocs(e);
        if (out->vprocs < 0) return config_error("WEFT_VPROCS=%s: expected 1..1024", e);
        if (out->vprocs == 0) out->vprocs = usable_cpu_count();
    }
    if (out->vprocs < 1 || out->vprocs > kMaxVprocs) return config_error("vprocs %s: expected 1..1024", "out of range");

    // pin: 1 on, -1 off, 0 unset (then WEFT_PIN, which must be 0 or 1).
    if (c.pin < -1 || c.pin > 1) return config_error("pin %s: expected 1 (on), -1 (off) or 0 (WEFT_PIN)", "out of range");
    out->pin = c.pin > 0;
    const char *bad = nullptr;
    if (c.pin == 0 && !env_switch("WEFT_PIN", &out->pin, &bad)) return config_error("WEFT_PIN=%s: expected 0 or 1", bad);

    out->stack_size = c.stack_size;
    if (!out->stack_size) {
        out->stack_size = kDefaultStackSize;
        if (const char *e = std::getenv("WEFT_STACK_SIZE"); e && *e && !parse_size(e, &out->stack_size))
            return config_error("WEFT_STACK_SIZE=%s: expected bytes, e.g. 65536, 64K or 1M", e);
    }
    if (out->stack_size < kMinStackSize || out->stack_size > kMaxStackSize)
        return config_error("stack size %s: expected 16K .. 1G", "out of range");
    out->stack_size = round_stack_size(out->stack_size);

    if (c.idle_spin_us < -1 || c.idle_spin_us > 1000000)
        return config_error("idle_spin_us %s: expected -1 (never), 0 (WEFT_IDLE_SPIN_US) or 1..1000000", "out of range");
    if (c.idle_spin_us > 0) out->idle_spin_ns = static_cast<uint64_t>(c.idle_spin_us) * 1000;
    else if (c.idle_spin_us == -1) out->idle_spin_ns = 0;
    else if (const char *e = std::getenv("WEFT_IDLE_SPIN_US"); e && *e) {
        long v;
        if (!parse_number(e, 0, 1000000, &v))
            return config_error("WEFT_IDLE_SPIN_US=%s: expected 0..1000000 (microseconds)", e);
        out->idle_spin_ns = static_cast<uint64_t>(v) * 1000;
    }

    const char *io = c.io;
    if (!io) io = std::getenv("WEFT_IO");
    if (io && *io && !parse_io_backend(io, &out->io)) return config_error("I/O backend '%s': expected uring, epoll or poll", io);

    if (c.workers < 0 || c.workers > RuntimeConfig::kMaxWorkers)
        return config_error("workers %s: expected 1..256 (0: WEFT_WORKERS)", "out of range");
    out->workers = c.workers;
    if (!out->workers) {
        out->workers = RuntimeConfig::kDefaultWorkers;
        if (const char *e = std::getenv("WEFT_WORKERS"); e && *e) {
            char *end;
            errno = 0;
            long v = std::strtol(e, &end, 10);
            if (*end || errno || v < 1 || v > RuntimeConfig::kMaxWorkers)
                return config_error("WEFT_WORKERS=%s: expected 1..256", e);
            out->workers = static_cast<int>(v);
        }
    }

    const char *sf = c.sendfile;
    if (!sf) sf = std::getenv("WEFT_SENDFILE");
    if (sf && *sf) {
        if (!std::strcmp(sf, "nonblocking")) out->sendfile_mode = WEFT_SENDFILE_NONBLOCKING;
        else if (!std::strcmp(sf, "blocking")) out->sendfile_mode = WEFT_SENDFILE_BLOCKING;
        else if (!std::strcmp(sf, "splice")) out->sendfile_mode = WEFT_SENDFILE_SPLICE;
        else return config_error("sendfile strategy '%s': expected nonblocking, blocking or splice", sf);
    }

    const char *stacks = c.stacks;
    if (!stacks) stacks = std::getenv("WEFT_STACKS");
    if (stacks && *stacks) {
        if (!std::strcmp(stacks, "fixed")) out->linked = false;
        else if (!std::strcmp(stacks, "linked")) out->linked = true;
        else return config_error("stacks '%s': expected fixed or linked", stacks);
    }
    if (out->linked && !linked_stacks_built())
        return config_error("stacks %s: this build of weft has no linked stacks (built without -fsplit-stack, "
                            "e.g. with sanitizers)", "linked");
    out->min_chunk = c.min_chunk;
    if (!out->min_chunk) {
        out->min_chunk = kDefaultMinChunk;
        if (const char *e = std::getenv("WEFT_MIN_CHUNK"); e && *e && !parse_size(e, &out->min_chunk))
            return config_error("WEFT_MIN_CHUNK=%s: expected bytes, e.g. 4096 or 4K", e);
    }
    if (out->min_chunk < 1024 || out->min_chunk > kLargeChunk)
        return config_error("min_chunk %s: expected 1K .. 64K", "out of range");

    if (!resolve_graph_config(c.graph_sample, c.graph_depth, &out->graph_sample, &out->graph_depth)) {
        errno = EINVAL;
        return false;
    }

    const char *policy = c.policy;
    if (!policy) policy = std::getenv("WEFT_POLICY");
    if (policy && *policy) {
        out->policy = find_policy(policy);
        if (!out->policy) {
            std::fprintf(stderr, "weft: unknown scheduling policy '%s' (known: %s)\n", policy, policy_names());
            errno = EINVAL;
            return false;
        }
    }
    {
        const char *tap = c.tap;
        if (!tap) tap = std::getenv("WEFT_TAP");
        char err[160];
        if (tap && *tap && !parse_tap_spec(tap, &out->tap, err, sizeof err)) {
            std::fprintf(stderr, "weft: %s%s: %s\n", c.tap ? "tap " : "WEFT_TAP=", tap, err);
            errno = EINVAL;
            return false;
        }
    }
    // The resource-aware policy queues threads by the graph node they
    // blocked at: it needs the graph, recording every park.
    if (out->policy == &kResourcePolicy) {
        if (out->graph_sample > 1)
            return config_error("policy resource: the blocking graph must record every park (WEFT_GRAPH=1), not %s",
                                "one in N");
        out->graph_sample = 1;
    }
    out->mem_limit = c.mem_limit;
    if (!out->mem_limit)
        if (const char *e = std::getenv("WEFT_MEM_LIMIT"); e && *e) {
            size_t v;
            if (!parse_size(e, &v) || v == 0) return config_error("WEFT_MEM_LIMIT=%s: expected bytes, e.g. 512M or 2G", e);
            out->mem_limit = v;
        }
    long admit_ms = c.admit_target_ms;
    if (!admit_ms)
        if (const char *e = std::getenv("WEFT_ADMIT_TARGET_MS"); e && *e) {
            char *end;
            errno = 0;
            admit_ms = std::strtol(e, &end, 10);
            if (*end || errno) admit_ms = -1;
        }
    if (admit_ms) {
        if (admit_ms < 1 || admit_ms > 60000)
            return config_error("admit_target_ms (WEFT_ADMIT_TARGET_MS) %s: expected 1..60000", "out of range");
        out->admit_target_ns = static_cast<uint64_t>(admit_ms) * 1000000u;
    }

    // steal: 1 threads that have not run, 2 any ready thread, -1 off, 0
    // unset (then WEFT_STEAL: 0, 1 or 2).
    if (c.steal < -1 || c.steal > 2)
        return config_error("steal %s: expected 1 (new threads), 2 (any thread), -1 (off) or 0 (WEFT_STEAL)",
                            "out of range");
    int steal = c.steal ? c.steal : 1;
    if (c.steal == 0)
        if (const char *e = std::getenv("WEFT_STEAL"); e && *e) {
            if ((*e != '0' && *e != '1' && *e != '2') || e[1])
                return config_error("WEFT_STEAL=%s: expected 0 (off), 1 (threads that have not run) or 2 (any)", e);
            steal = *e == '0' ? -1 : *e - '0';
        }
    out->steal = steal > 0;
    out->steal_started = steal == 2;
    long steal_us = c.steal_after_us;
    if (!steal_us) {
        if (const char *e = std::getenv("WEFT_STEAL_AFTER_US"); e && *e && !parse_number(e, 1, 1000000, &steal_us))
            return config_error("WEFT_STEAL_AFTER_US=%s: expected 1..1000000 (microseconds)", e);
    } else if (steal_us < 1 || steal_us > 1000000) {
        return config_error("steal_after_us %s: expected 1..1000000 (0: WEFT_STEAL_AFTER_US)", "out of range");
    }
    if (steal_us) out->steal_after_ns = static_cast<uint64_t>(steal_us) * 1000u;

    // run_next: 1 on, -1 off, 0 unset (then WEFT_RUN_NEXT: 0 or 1).
    if (c.run_next < -1 || c.run_next > 1)
        return config_error("run_next %s: expected 1 (on), -1 (off) or 0 (WEFT_RUN_NEXT)", "out of range");
    out->run_next = c.run_next >= 0;
    if (c.run_next == 0 && !env_switch("WEFT_RUN_NEXT", &out->run_next, &bad))
        return config_error("WEFT_RUN_NEXT=%s: expected 1 (on) or 0 (plain FIFO)", bad);
    return true;
}

void pin_to_cpu(const Runtime &rt, int index) {
    if (rt.cpus.empty()) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(rt.cpus[static_cast<size_t>(index) % rt.cpus.size()], &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

// The loop context runs on the kernel thread's stack; ASan needs its bounds.
void bind_kernel_thread(Vproc *vp) {
    tls_vproc = vp;
    vp->tid = gettid();
    vp->errno_loc = &errno; // errno is per kernel thread: its address never changes
    vp->eh_globals = reinterpret_cast<uint64_t *>(abi::__cxa_get_globals()); // so are these
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        void *lo;
        size_t size;
        if (pthread_attr_getstack(&a, &lo, &size) == 0) {
            vp->loop.stack.lo = static_cast<char *>(lo);
            vp->loop.stack.size = size;
        }
        pthread_attr_destroy(&a);
    }
    vproc_signal_stack_init(vp);
    vp->ss_guard_before = stack_guard();
    set_stack_guard(nullptr);
    if (vp->rt->cfg.pin) pin_to_cpu(*vp->rt, vp->index);
    vp->reactor->attach_thread();
    // SIGPIPE is thread-directed: blocked here, a write to a broken pipe
    // returns EPIPE and the I/O layer takes the pending signal (io/fd.hpp).
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &vp->sigmask_before);
}

void unbind_kernel_thread(Vproc *vp) {
    pthread_sigmask(SIG_SETMASK, &vp->sigmask_before, nullptr);
    set_stack_guard(vp->ss_guard_before);
    vproc_signal_stack_fini(vp);
    vp->tid = 0;
    tls_vproc = nullptr;
}

// weft_main runs vproc 0 on the caller's kernel thread; with pinning on, the
// caller gets its own CPU mask back when weft_main returns.
class AffinityRestore {
public:
    explicit AffinityRestore(bool active) : active_(active && sched_getaffinity(0, sizeof saved_, &saved_) == 0) {}
    ~AffinityRestore() {
        if (active_) sched_setaffinity(0, sizeof saved_, &saved_);
    }
    AffinityRestore(const AffinityRestore &) = delete;
    AffinityRestore &operator=(const AffinityRestore &) = delete;

private:
    cpu_set_t saved_;
    bool active_;
};

void *vproc_main(void *p) {
    auto *vp = static_cast<Vproc *>(p);
    bind_kernel_thread(vp);
    vp->run_loop();
    unbind_kernel_thread(vp);
    return nullptr;
}

struct MainArg {
    Runtime *rt;
    int (*fn)(void *);
    void *arg;
};

void *main_entry(void *p) {
    auto *m = static_cast<MainArg *>(p);
    m->rt->main_result = m->fn(m->arg);
    return nullptr;
}

} // namespace
} // namespace weft::detail

using namespace weft::detail;

extern "C" {

void weft_config_init(weft_config *cfg) {
    if (!cfg) return;
    std::memset(cfg, 0, sizeof *cfg);
}

int weft_main(int (*fn)(void *), void *arg) { return weft_main_config(nullptr, fn, arg); }

int weft_main_config(const weft_config *user, int (*fn)(void *), void *arg) {
    if (!fn) {
        errno = EINVAL;
        return -1;
    }
    if (tls_vproc) {
        std::fprintf(stderr, "weft: weft_main called from a thread already running weft\n");
        errno = EBUSY;
        return -1;
    }
    const int caller_errno = errno; // vproc 0 is this kernel thread: leave errno as found
    RuntimeConfig cfg;
    if (!resolve_config(user, &cfg)) return -1;
    install_signal_handlers();

    AffinityRestore restore_affinity(cfg.pin);
    auto rt = std::make_unique<Runtime>(cfg);
    if (rt->start_error) {
        std::fprintf(stderr, "weft: cannot create the I/O reactor: %s\n", std::strerror(rt->start_error));
        errno = rt->start_error;
        return -1;
    }
    Vproc *vp0 = rt->vprocs[0].get();
    bind_kernel_thread(vp0);

    // The other vprocs first: if one cannot start, nothing has run yet and
    // the runtime can be taken down cleanly (EAGAIN) instead of running on
    // fewer vprocs than asked.
    size_t started = 1;
    for (; started < rt->vprocs.size(); ++started) {
        Vproc *vp = rt->vprocs[started].get();
        if (int e = pthread_create(&vp->kthread, nullptr, vproc_main, vp)) {
            std::fprintf(stderr, "weft: cannot start vproc %zu of %zu: %s\n", started, rt->vprocs.size(),
                         std::strerror(e));
            rt->stop();
            for (size_t i = 1; i < started; ++i) pthread_join(rt->vprocs[i]->kthread, nullptr);
            unbind_kernel_thread(vp0);
            errno = EAGAIN;
            return -1;
        }
    }

    MainArg m{rt.get(), fn, arg};
    weft_thread_attr_t attr;
    weft_thread_attr_init(&attr);
    attr.name = "main";
    attr.detached = 1;
    // C programmers expect main to have a process-sized stack (large local
    // arrays); only touched pages cost memory, so give it 8 MiB like ulimit -s.
    attr.stack_size = cfg.stack_size > kMainStackSize ? cfg.stack_size : kMainStackSize;
    if (int e = create_thread(vp0, nullptr, &attr, main_entry, &m)) {
        std::fprintf(stderr, "weft: cannot create the main thread: %s\n", std::strerror(e));
        rt->stop();
        for (size_t i = 1; i < rt->vprocs.size(); ++i) pthread_join(rt->vprocs[i]->kthread, nullptr);
        unbind_kernel_thread(vp0);
        errno = e;
        return -1;
    }
    vp0->run_loop();
    for (size_t i = 1; i < rt->vprocs.size(); ++i) pthread_join(rt->vprocs[i]->kthread, nullptr);
    unbind_kernel_thread(vp0);
    errno = caller_errno;
    return rt->main_result;
}

int weft_default_vprocs(void) {
    int n = env_vprocs(std::getenv("WEFT_VPROCS"));
    return n > 0 ? n : usable_cpu_count();
}

int weft_vproc_count(void) {
    Vproc *vp = tls_vproc;
    return vp ? static_cast<int>(vp->rt->vprocs.size()) : -1;
}

int weft_vproc_self(void) {
    Vproc *vp = tls_vproc;
    return vp ? vp->index : -1;
}

} // extern "C"
