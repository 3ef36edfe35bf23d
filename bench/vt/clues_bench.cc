// weft-clues-bench — Virtual Threads' clues (§2.2.3) on 2 vprocs: a
// three-stage pipeline (A and B cost 100 µs of CPU an item, C 200 µs) run
// by closed-loop virtual threads that follow a clue at the start of each
// stage. Items per second over a measured window, for
//   best     hand-placed: A and B on vproc 1, C on vproc 0 (200 : 200)
//   bad      hand-placed: A and C on vproc 0, B on vproc 1 (300 : 100)
//   clues    the bad placement, balanced by the cluethread
// and clues / best (the goal: >= 0.95).
//
//   weft-clues-bench [--seconds S] [--warmup S] [--workers N] [--json]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "weft/vt.hpp"

namespace vt = weft::vt;

namespace {

double seconds = 2.0, warmup = 0.5;
int workers = 12;
bool json = false;

void spin_ns(uint64_t ns) {
    for (uint64_t end = weft_now_ns() + ns; weft_now_ns() < end;) {
    }
}

struct Run {
    vt::Clue *a, *b, *c;
    uint64_t measure_from, until;
    std::atomic<uint64_t> items{0};
};

vt::Task<> worker(Run *r) {
    while (weft_now_ns() < r->until) {
        co_await vt::follow(*r->a);
        spin_ns(100'000);
        co_await vt::follow(*r->b);
        spin_ns(100'000);
        co_await vt::follow(*r->c);
        spin_ns(200'000);
        if (weft_now_ns() >= r->measure_from) r->items.fetch_add(1, std::memory_order_relaxed);
    }
}

double run(int va, int vb, int vc, bool cluethread, uint64_t *moves) {
    vt::Clue a(va), b(vb), c(vc);
    Run r{&a, &b, &c, 0, 0};
    const uint64_t t0 = weft_now_ns();
    r.measure_from = t0 + static_cast<uint64_t>(warmup * 1e9);
    r.until = r.measure_from + static_cast<uint64_t>(seconds * 1e9);
    std::unique_ptr<vt::Cluethread> ct;
    if (cluethread) ct = std::make_unique<vt::Cluethread>(vt::CluethreadOptions{});
    std::vector<vt::Handle> hs;
    for (int i = 0; i < workers; ++i) hs.push_back(vt::spawn_on(0, worker(&r)));
    for (auto &h : hs) h.join();
    if (ct) {
        ct->stop();
        *moves = ct->moves();
    }
    return static_cast<double>(r.items.load()) / seconds;
}

int body(void *) {
    if (weft_vproc_count() < 2) {
        std::fprintf(stderr, "weft-clues-bench: needs 2 vprocs\n");
        return 1;
    }
    uint64_t moves = 0;
    const double best = run(1, 1, 0, false, &moves);
    const double bad = run(0, 1, 0, false, &moves);
    const double clues = run(0, 1, 0, true, &moves);
    if (json) {
        std::printf("{\"bench\": \"vt_clues\", \"best_items_per_s\": %.1f, \"bad_items_per_s\": %.1f, "
                    "\"clues_items_per_s\": %.1f, \"clues_over_best\": %.3f, \"moves\": %llu, \"workers\": %d, "
                    "\"seconds\": %.1f, \"warmup\": %.1f}\n",
                    best, bad, clues, clues / best, static_cast<unsigned long long>(moves), workers, seconds, warmup);
    } else {
        std::printf("best hand-placed   %8.1f items/s\n", best);
        std::printf("bad hand-placed    %8.1f items/s\n", bad);
        std::printf("bad + cluethread   %8.1f items/s (%llu moves)\n", clues, static_cast<unsigned long long>(moves));
        std::printf("cluethread / best  %8.3f\n", clues / best);
    }
    return 0;
}


} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--help" || a == "-h") {
            std::printf("usage: weft-clues-bench [--seconds S] [--warmup S] [--workers N] [--json]\n"
                        "a 3-stage pipeline of virtual threads on 2 vprocs: the best and a bad hand\n"
                        "placement of its clues, and the bad one balanced by the cluethread\n"
                        "(S = 2 s measured after 0.5 s, N = 12 workers).\n");
            return 0;
        }
        if (a == "--seconds") seconds = weft::srv::parse_seconds("weft-clues-bench", "--seconds", v), ++i;
        else if (a == "--warmup") warmup = weft::srv::parse_seconds("weft-clues-bench", "--warmup", v), ++i;
        else if (a == "--workers")
            workers = static_cast<int>(weft::srv::parse_long("weft-clues-bench", "--workers", v, 1, 100000)), ++i;
        else if (a == "--json") json = true;
        else {
            std::fprintf(stderr, "weft-clues-bench: unknown option %s (--help)\n", a.c_str());
            return 2;
        }
    }
    weft_config c;
    weft_config_init(&c);
    c.vprocs = 2;
    int r = weft_main_config(&c, body, nullptr);
    return r < 0 ? 1 : r;
}
