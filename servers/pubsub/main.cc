// weft-pubsub — StagedServer's publish-subscribe server (§5.2, Fig. 8), in a
// threaded and a staged form over the same matcher (matcher.hpp), so the
// two can be compared in one run.
//
//   threaded  a server thread per client; each matches the client's events
//             one at a time against the whole index
//   staged    a front stage takes each event and invokes one match
//             operation per index partition on a partitioned stage (one
//             partition per vproc, privatized: no locks); the match stage's
//             runner takes the operations of many clients as a cohort
//
// Clients are weft threads in a closed loop (send an event, wait for the
// count of matching subscriptions, send the next); each event's response
// time is measured. --check verifies every count against a brute-force
// scan of all subscriptions.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "matcher.hpp"
#include "common/cli.hpp"
#include "weft/stage.hpp"
#include "weft/weft.h"

namespace ws = weft::stage;
using ws::Step;

namespace {

struct Opts {
    std::string form = "staged";
    long subs = 1000000;
    long events = 100000;
    int clients = 16;
    int32_t range = 100;
    int vprocs = 1;
    int max_cohort = 0;
    bool fifo = false;
    long front_interval_us = 0;
    bool check = false;
    bool json = false;
    bool profile = false;
} g;

struct Shared {
    pubsub::Subscriptions subs;
    std::vector<std::unique_ptr<pubsub::Index>> parts; // one per vproc (staged) or one (threaded)
    std::vector<uint64_t> lat_ns;                      // every response time
    long mismatches = 0;
    weft_mutex_t mu = WEFT_MUTEX_INITIALIZER;
};
Shared *g_s;

// Events of client c: a stream of its own, the same in both forms.
uint64_t client_seed(int c) { return 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(c + 1) | 1; }

void record(const std::vector<uint64_t> &lat, long bad) {
    weft_mutex_lock(&g_s->mu);
    g_s->lat_ns.insert(g_s->lat_ns.end(), lat.begin(), lat.end());
    g_s->mismatches += bad;
    weft_mutex_unlock(&g_s->mu);
}

long events_of(int c) { return g.events / g.clients + (c < g.events % g.clients ? 1 : 0); }

bool checked(const pubsub::Event &e, size_t got) {
    return !g.check || pubsub::match_all(g_s->subs, e, nullptr) == got;
}

// ---- threaded: a server thread per client ----

struct Channel {
    weft_sem_t request = WEFT_SEM_INITIALIZER(0), reply = WEFT_SEM_INITIALIZER(0);
    pubsub::Event event;
    size_t count = 0;
    bool closed = false;
};

void *server_thread(void *arg) {
    auto *ch = static_cast<Channel *>(arg);
    for (;;) {
        weft_sem_wait(&ch->request);
        if (ch->closed) return nullptr;
        ch->count = g_s->parts[0]->match(ch->event, nullptr);
        weft_sem_post(&ch->reply);
    }
}

void *threaded_client(void *arg) {
    int c = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    Channel ch;
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.home_vproc = c % g.vprocs; // its connection's thread, where the client is
    weft_thread_t server;
    if (weft_thread_create(&server, &a, server_thread, &ch) != 0) std::abort();
    uint64_t st = client_seed(c);
    std::vector<uint64_t> lat;
    long bad = 0;
    for (long i = events_of(c); i > 0; --i) {
        ch.event = pubsub::make_event(g.range, st);
        uint64_t t0 = weft_now_ns();
        weft_sem_post(&ch.request);
        weft_sem_wait(&ch.reply);
        lat.push_back(weft_now_ns() - t0);
        bad += !checked(ch.event, ch.count);
    }
    ch.closed = true;
    weft_sem_post(&ch.request);
    weft_thread_join(server, nullptr);
    record(lat, bad);
    return nullptr;
}

// ---- staged ----

class MatchStage : public ws::Stage {
public:
    MatchStage()
        : ws::Stage("match", {.kind = ws::Kind::kPartitioned, .max_cohort = static_cast<uint32_t>(g.max_cohort),
                              .lifo = !g.fifo}) {}
};
class FrontStage : public ws::Stage {
public:
    FrontStage()
        : ws::Stage("front", {.threshold_interval_ns = static_cast<uint64_t>(g.front_interval_us) * 1000, .lifo = !g.fifo}) {}
};
MatchStage *g_match;

// One partition's matches for an event: runs on the vproc owning it.
struct MatchPart : ws::Op<size_t> {
    MatchPart(const pubsub::Event &e, unsigned part) : e(e) { key = part; }
    const pubsub::Event &e;
    Step run() override { return done(g_s->parts[key]->match(e, nullptr)); }
};

struct Publish : ws::Op<size_t> {
    explicit Publish(const pubsub::Event &e) : e(e) {}
    pubsub::Event e;
    std::vector<MatchPart *> parts;
    Step run() override {
        for (unsigned p = 0; p < g_s->parts.size(); ++p) parts.push_back(&invoke<MatchPart>(*g_match, e, p));
        return wait_children(&Publish::sum);
    }
    Step sum() {
        size_t n = 0;
        for (MatchPart *m : parts) n += m->result;
        return done(n);
    }
};

struct StagedClient {
    ws::Scheduler *sched;
    FrontStage *front;
    int c;
};

void *staged_client(void *arg) {
    auto *sc = static_cast<StagedClient *>(arg);
    uint64_t st = client_seed(sc->c);
    std::vector<uint64_t> lat;
    long bad = 0;
    for (long i = events_of(sc->c); i > 0; --i) {
        pubsub::Event e = pubsub::make_event(g.range, st);
        uint64_t t0 = weft_now_ns();
        auto p = sc->sched->call(*sc->front, std::make_unique<Publish>(e));
        lat.push_back(weft_now_ns() - t0);
        bad += !checked(e, p->result);
    }
    record(lat, bad);
    return nullptr;
}

int body(void *) {
    Shared s;
    g_s = &s;
    uint64_t t0 = weft_now_ns();
    s.subs = pubsub::make_subscriptions(static_cast<size_t>(g.subs), g.range, 42);
    const bool staged = g.form == "staged";
    const unsigned parts = staged ? static_cast<unsigned>(g.vprocs) : 1u;
    for (unsigned p = 0; p < parts; ++p) s.parts.push_back(std::make_unique<pubsub::Index>(s.subs, parts, p));
    double build_s = static_cast<double>(weft_now_ns() - t0) / 1e9;

    std::vector<weft_thread_t> clients(static_cast<size_t>(g.clients));
    std::vector<StagedClient> sc(static_cast<size_t>(g.clients));
    std::unique_ptr<MatchStage> match;
    std::unique_ptr<FrontStage> front;
    std::unique_ptr<ws::Scheduler> sched;
    if (staged) {
        match = std::make_unique<MatchStage>();
        front = std::make_unique<FrontStage>();
        g_match = match.get();
        sched = std::make_unique<ws::Scheduler>(std::vector<ws::Stage *>{front.get(), match.get()});
        sched->start();
    }
    uint64_t t1 = weft_now_ns();
    for (int c = 0; c < g.clients; ++c) {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.home_vproc = c % g.vprocs;
        int e;
        if (staged) {
            sc[static_cast<size_t>(c)] = {sched.get(), front.get(), c};
            e = weft_thread_create(&clients[static_cast<size_t>(c)], &a, staged_client, &sc[static_cast<size_t>(c)]);
        } else {
            e = weft_thread_create(&clients[static_cast<size_t>(c)], &a, threaded_client, reinterpret_cast<void *>(static_cast<intptr_t>(c)));
        }
        if (e) {
            std::fprintf(stderr, "weft-pubsub: cannot create client %d: %s\n", c, std::strerror(e));
            return 1;
        }
    }
    for (auto t : clients) weft_thread_join(t, nullptr);
    double run_s = static_cast<double>(weft_now_ns() - t1) / 1e9;
    if (sched) {
        sched->stop();
        if (g.profile) std::fputs(sched->profile_text().c_str(), stderr);
    }

    std::vector<uint64_t> &lat = s.lat_ns;
    std::sort(lat.begin(), lat.end());
    double sum = 0;
    for (uint64_t v : lat) sum += static_cast<double>(v);
    const double mean_ms = lat.empty() ? 0 : sum / static_cast<double>(lat.size()) / 1e6;
    const double p99_ms = lat.empty() ? 0 : static_cast<double>(lat[lat.size() * 99 / 100]) / 1e6;
    if (g.json)
        std::printf("{\"benchmark\":\"pubsub\",\"form\":\"%s\",\"subscriptions\":%ld,\"events\":%zu,\"clients\":%d,"
                    "\"vprocs\":%d,\"max_cohort\":%d,\"fifo\":%s,\"mean_response_ms\":%.4f,\"p99_response_ms\":%.4f,"
                    "\"events_per_s\":%.0f,\"build_s\":%.2f,\"checked\":%s,\"mismatches\":%ld}\n",
                    g.form.c_str(), g.subs, lat.size(), g.clients, g.vprocs, g.max_cohort, g.fifo ? "true" : "false",
                    mean_ms, p99_ms,
                    static_cast<double>(lat.size()) / run_s, build_s, g.check ? "true" : "false", s.mismatches);
    else
        std::printf("%s: %zu events from %d clients against %ld subscriptions: mean response %.3f ms, p99 %.3f ms, "
                    "%.0f events/s (index built in %.2f s)%s\n",
                    g.form.c_str(), lat.size(), g.clients, g.subs, mean_ms, p99_ms,
                    static_cast<double>(lat.size()) / run_s, build_s,
                    g.check ? (s.mismatches ? "; MISMATCHES against the oracle" : "; every count checked") : "");
    if (s.mismatches) {
        std::fprintf(stderr, "weft-pubsub: %ld events matched differently from the brute-force oracle\n", s.mismatches);
        return 1;
    }
    return 0;
}

[[noreturn]] void usage(int code) {
    std::fprintf(code ? stderr : stdout,
                 "usage: weft-pubsub [--form threaded|staged] [--subs N] [--events N] [--clients C]\n"
                 "                   [--range R] [--vprocs V] [--max-cohort K] [--fifo] [--check] [--json] [--profile]\n"
                 "  StagedServer's publish-subscribe matcher, threaded or staged (docs/staged.md)\n"
                 "  --form F        threaded (a server thread per client) or staged (default)\n"
                 "  --subs N        subscriptions (default 1000000)\n"
                 "  --events N      events, spread over the clients (default 100000)\n"
                 "  --clients C     closed-loop clients (default 16)\n"
                 "  --range R       attribute values are 0..R-1 (default 100)\n"
                 "  --vprocs V      vprocs; the staged index has one partition per vproc (default 1)\n"
                 "  --max-cohort K  staged: the match stage runs at most K operations a visit (0: no limit)\n"
                 "  --fifo          staged: run operations in arrival order, not the paper's newest first\n"
                 "  --front-interval-us T  staged: the front stage's interval threshold (0: none): finished\n"
                 "                  events are answered within about T even during a long match cohort\n"
                 "  --check         verify every count against a scan of all subscriptions (slow)\n"
                 "  --json          one JSON line   --profile  the stage profile on stderr (staged)\n");
    std::exit(code);
}

// A flag's number (a missing value is an empty one: refused).
long number(const char *flag, const char *v, long lo, long hi) {
    return weft::srv::parse_long("weft-pubsub", flag, v ? v : "", lo, hi);
}

} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--help" || a == "-h") usage(0);
        else if (a == "--form" && v && (std::strcmp(v, "threaded") == 0 || std::strcmp(v, "staged") == 0)) g.form = v, ++i;
        else if (a == "--subs") g.subs = number("--subs", v, 1, 100000000), ++i;
        else if (a == "--events") g.events = number("--events", v, 1, 1000000000), ++i;
        else if (a == "--clients") g.clients = static_cast<int>(number("--clients", v, 1, 100000)), ++i;
        else if (a == "--range") g.range = static_cast<int32_t>(number("--range", v, 1, 1000000)), ++i;
        else if (a == "--vprocs") g.vprocs = static_cast<int>(number("--vprocs", v, 1, 64)), ++i;
        else if (a == "--max-cohort") g.max_cohort = static_cast<int>(number("--max-cohort", v, 0, 1000000)), ++i;
        else if (a == "--check") g.check = true;
        else if (a == "--fifo") g.fifo = true;
        else if (a == "--front-interval-us") g.front_interval_us = number("--front-interval-us", v, 0, 10000000), ++i;
        else if (a == "--json") g.json = true;
        else if (a == "--profile") g.profile = true;
        else {
            std::fprintf(stderr, "weft-pubsub: bad option %s (--help)\n", a.c_str());
            return 2;
        }
    }
    weft_config c;
    weft_config_init(&c);
    c.vprocs = g.vprocs;
    int r = weft_main_config(&c, body, nullptr);
    if (r < 0) {
        std::perror("weft-pubsub: weft_main");
        return 1;
    }
    return r;
}
