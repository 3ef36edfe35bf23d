// weft-vt-bench — what a virtual thread costs beside a weft thread, in one
// run on one vproc (pin it: taskset -c 1):
//
//   spawn_join   spawn a virtual thread that returns at once and join it
//                (from a virtual thread: co_await) / weft_thread_create+join
//   yield        two threads yielding to each other: ns per yield
//   channel      two threads passing a token through two channels of one
//                slot: ns per hand-off / the same with weft semaphores
//   idle memory  N threads each waiting (an Event / a semaphore): resident
//                bytes per thread, from /proc/self/statm, and the frame size
//
//   weft-vt-bench [--ops N] [--idle N] [--idle-weft N] [--json]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "weft/vt.hpp"

namespace vt = weft::vt;

namespace {

long ops = 1000000, idle_vt = 1000000, idle_weft = 100000;
bool json = false;

void report(const char *bench, const char *what, double value, const char *unit) {
    if (json)
        std::printf("{\"bench\": \"vt_%s\", \"kind\": \"%s\", \"value\": %.2f, \"unit\": \"%s\"}\n", bench, what, value,
                    unit);
    else
        std::printf("%-12s %-16s %12.2f %s\n", bench, what, value, unit);
    std::fflush(stdout);
}

long rss_bytes() {
    long pages = 0, resident = 0;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

// ---- spawn + join ----
vt::Task<> nothing() { co_return; }
vt::Task<> spawner(long n, uint64_t *ns) {
    uint64_t t0 = weft_now_ns();
    for (long i = 0; i < n; ++i) co_await vt::spawn(nothing());
    *ns = weft_now_ns() - t0;
}
void *weft_nothing(void *) { return nullptr; }

// ---- yield ----
vt::Task<> yielder(long n) {
    for (long i = 0; i < n; ++i) co_await vt::yield();
}
void *weft_yielder(void *arg) {
    long n = *static_cast<long *>(arg);
    for (long i = 0; i < n; ++i) weft_yield();
    return nullptr;
}

// ---- channel ping-pong ----
vt::Task<> ping(vt::Channel<int> *to, vt::Channel<int> *from, long n) {
    for (long i = 0; i < n; ++i) {
        co_await to->send(1);
        co_await from->recv();
    }
}
vt::Task<> pong(vt::Channel<int> *to, vt::Channel<int> *from, long n) {
    for (long i = 0; i < n; ++i) {
        co_await from->recv();
        co_await to->send(1);
    }
}
struct SemPair {
    weft_sem_t a, b;
    long n;
};
void *sem_ping(void *p) {
    auto *s = static_cast<SemPair *>(p);
    for (long i = 0; i < s->n; ++i) {
        weft_sem_post(&s->a);
        weft_sem_wait(&s->b);
    }
    return nullptr;
}
void *sem_pong(void *p) {
    auto *s = static_cast<SemPair *>(p);
    for (long i = 0; i < s->n; ++i) {
        weft_sem_wait(&s->a);
        weft_sem_post(&s->b);
    }
    return nullptr;
}

// ---- idle ----
vt::Task<> idle(vt::Event *e) { co_await e->wait(); }
void *weft_idle(void *p) {
    weft_sem_wait(static_cast<weft_sem_t *>(p));
    return nullptr;
}

int body(void *) {
    {
        uint64_t ns = 0;
        vt::spawn(spawner(ops, &ns)).join();
        report("spawn_join", "virtual thread", static_cast<double>(ns) / static_cast<double>(ops), "ns");
        uint64_t t0 = weft_now_ns();
        const long n = ops / 10;
        for (long i = 0; i < n; ++i) {
            weft_thread_t t;
            weft_thread_create(&t, nullptr, weft_nothing, nullptr);
            weft_thread_join(t, nullptr);
        }
        report("spawn_join", "weft thread", static_cast<double>(weft_now_ns() - t0) / static_cast<double>(n), "ns");
    }
    {
        uint64_t t0 = weft_now_ns();
        vt::Handle a = vt::spawn(yielder(ops)), b = vt::spawn(yielder(ops));
        a.join(), b.join();
        report("yield", "virtual thread", static_cast<double>(weft_now_ns() - t0) / static_cast<double>(2 * ops), "ns");
        long n = ops;
        weft_thread_t x, y;
        t0 = weft_now_ns();
        weft_thread_create(&x, nullptr, weft_yielder, &n);
        weft_thread_create(&y, nullptr, weft_yielder, &n);
        weft_thread_join(x, nullptr), weft_thread_join(y, nullptr);
        report("yield", "weft thread", static_cast<double>(weft_now_ns() - t0) / static_cast<double>(2 * ops), "ns");
    }
    {
        vt::Channel<int> c1(1), c2(1);
        uint64_t t0 = weft_now_ns();
        vt::Handle a = vt::spawn(ping(&c1, &c2, ops)), b = vt::spawn(pong(&c2, &c1, ops));
        a.join(), b.join();
        report("channel", "virtual thread", static_cast<double>(weft_now_ns() - t0) / static_cast<double>(2 * ops), "ns");
        SemPair s;
        weft_sem_init(&s.a, 0), weft_sem_init(&s.b, 0);
        s.n = ops;
        weft_thread_t x, y;
        t0 = weft_now_ns();
        weft_thread_create(&x, nullptr, sem_ping, &s);
        weft_thread_create(&y, nullptr, sem_pong, &s);
        weft_thread_join(x, nullptr), weft_thread_join(y, nullptr);
        report("channel", "weft thread (sem)", static_cast<double>(weft_now_ns() - t0) / static_cast<double>(2 * ops),
               "ns");
    }
    {
        vt::Event e;
        std::vector<vt::Handle> hs;
        hs.reserve(static_cast<size_t>(idle_vt));
        const long before = rss_bytes();
        const vt::Stats s0 = vt::stats();
        for (long i = 0; i < idle_vt; ++i) hs.push_back(vt::spawn(idle(&e)));
        weft_sleep_ns(10 * 1000 * 1000); // every one has run to its wait
        const long after = rss_bytes();
        const vt::Stats s1 = vt::stats();
        // The handles are the benchmark's, not the threads': 8 bytes each.
        const double per = static_cast<double>(after - before - idle_vt * 8) / static_cast<double>(idle_vt);
        report("idle_memory", "virtual thread", per, "bytes");
        report("idle_frame", "virtual thread",
               static_cast<double>(s1.frame_bytes - s0.frame_bytes) / static_cast<double>(idle_vt), "bytes");
        e.set();
        for (auto &h : hs) h.join();
    }
    {
        weft_sem_t sem;
        weft_sem_init(&sem, 0);
        std::vector<weft_thread_t> ts(static_cast<size_t>(idle_weft));
        const long before = rss_bytes();
        for (auto &t : ts) weft_thread_create(&t, nullptr, weft_idle, &sem);
        weft_sleep_ns(10 * 1000 * 1000);
        const long after = rss_bytes();
        report("idle_memory", "weft thread",
               static_cast<double>(after - before - idle_weft * 8) / static_cast<double>(idle_weft), "bytes");
        for (size_t i = 0; i < ts.size(); ++i) weft_sem_post(&sem);
        for (auto &t : ts) weft_thread_join(t, nullptr);
    }
    return 0;
}


} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--help" || a == "-h") {
            std::printf("usage: weft-vt-bench [--ops N] [--idle N] [--idle-weft N] [--json]\n"
                        "virtual threads against weft threads on one vproc: spawn+join, yield, channel\n"
                        "ping-pong (N = 1000000 each) and resident memory per idle thread (10^6\n"
                        "virtual, 10^5 weft threads by default).\n");
            return 0;
        }
        if (a == "--ops") ops = weft::srv::parse_long("weft-vt-bench", "--ops", v, 1, 1000000000), ++i;
        else if (a == "--idle") idle_vt = weft::srv::parse_long("weft-vt-bench", "--idle", v, 1, 1000000000), ++i;
        else if (a == "--idle-weft") idle_weft = weft::srv::parse_long("weft-vt-bench", "--idle-weft", v, 1, 1000000000), ++i;
        else if (a == "--json") json = true;
        else {
            std::fprintf(stderr, "weft-vt-bench: unknown option %s (--help)\n", a.c_str());
            return 2;
        }
    }
    weft_config c;
    weft_config_init(&c);
    c.vprocs = 1;
    int r = weft_main_config(&c, body, nullptr);
    return r < 0 ? 1 : r;
}
