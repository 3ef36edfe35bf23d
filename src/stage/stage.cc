// StagedServer on weft (include/weft/stage.hpp, docs/staged.md): closures,
// stages and the per-vproc runners that cohort-schedule them.
//
// Where an operation runs. Invoked from code on vproc p it goes to p
// (affinity), unless placed (invoke_on) or its stage is partitioned (the
// vproc that owns key % vprocs). Queued by an operation running on its own
// vproc it is pushed on the stage's stack for p — touched only by p's
// threads, which weft runs one at a time, so no lock; from another vproc,
// onto the stage's inbox for p, a lock-free list that p's runner takes
// whole and appends to p's FIFO. Invoked by a plain thread (a request from
// outside the stages) it joins the FIFO too: the stack's newest-first order
// is for work whose data the invoking operation just touched, and it would
// let a client that sends again at once pass every older request (on the
// pub-sub server: p99 5x the FIFO's, docs/staged.md).
//
// A runner visits the stages in the programmer's order, forward then
// backward (wavefront), and at each runs what is pending there: the stack,
// newest first, then the FIFO. Operations invoked meanwhile on the same
// stage join the cohort. A visit ends when nothing is left, at the stage's
// max_cohort, or when another stage asked for the processor
// (request_processor). After each operation a stage past its threshold
// (queue length, or time since it last ran) runs first; it cannot itself be
// interrupted. An exclusive stage is visited by one runner at a time: the
// others skip it. With nothing to do a runner sleeps, for back-off periods
// doubling from idle_min_ns to idle_max_ns; a new operation for it wakes it.
#include "weft/stage.hpp"

#include <cinttypes>
#include <cstdio>
#include <stdexcept>

namespace weft::stage {

namespace {

int self_vproc() {
    int v = weft_vproc_self();
    return v < 0 ? 0 : v;
}

void add_wait(uint64_t &count, uint64_t &sum, uint64_t &max, uint64_t w) {
    ++count;
    sum += w;
    if (w > max) max = w;
}

} // namespace

// ---- per stage and vproc ---------------------------------------------------

struct alignas(64) Stage::PerVproc {
    Closure *stack = nullptr;            // this vproc's only
    size_t stack_len = 0;
    Closure *fifo_head = nullptr, *fifo_tail = nullptr; // drained inbox, oldest first
    size_t fifo_len = 0;
    std::atomic<Closure *> inbox{nullptr}; // from other vprocs, newest first
    std::atomic<size_t> inbox_len{0};
    uint64_t last_run_ns = 0;
    StageProfile prof;

    Closure *pop() {
        if (Closure *c = stack) {
            stack = c->link_;
            --stack_len;
            return c;
        }
        if (Closure *c = fifo_head) {
            fifo_head = c->link_;
            if (!fifo_head) fifo_tail = nullptr;
            --fifo_len;
            return c;
        }
        return nullptr;
    }
    // Move the inbox to the FIFO, oldest first.
    void drain() {
        Closure *c = inbox.exchange(nullptr, std::memory_order_acquire);
        if (!c) return;
        Closure *rev = nullptr;
        size_t n = 0;
        while (c) {
            Closure *next = c->link_;
            c->link_ = rev;
            rev = c;
            c = next;
            ++n;
        }
        inbox_len.fetch_sub(n, std::memory_order_relaxed);
        if (fifo_tail) fifo_tail->link_ = rev;
        else fifo_head = rev;
        while (rev->link_) rev = rev->link_;
        fifo_tail = rev;
        fifo_len += n;
    }
    size_t pending() const { return stack_len + fifo_len + inbox_len.load(std::memory_order_relaxed); }
};

struct alignas(64) Scheduler::Runner {
    weft_thread_t thread{};
    weft_sem_t wake = WEFT_SEM_INITIALIZER(0);
    std::atomic<bool> sleeping{false};
    int current_stage = -1;              // the stage whose operation runs now
    uint64_t clock = 0;                  // weft_now_ns() as the current operation started (one read per operation)
    std::atomic<Stage *> wanted{nullptr}; // feedback: the stage to run next
};

// ---- Closure ---------------------------------------------------------------

Closure::~Closure() {
    while (Closure *c = children_) {
        children_ = c->sibling_;
        delete c;
    }
}

void Closure::adopt(Closure *child) {
    child->sibling_ = children_;
    children_ = child;
    pending_.fetch_add(1, std::memory_order_relaxed);
}

void Closure::resume() {
    uint8_t expect = 0;
    if (rstate_.compare_exchange_strong(expect, 2, std::memory_order_acq_rel)) return; // before it waited
    rstate_.store(0, std::memory_order_relaxed);
    stage_->enqueue(this, vproc_);
}

void Closure::start_blocking(std::unique_ptr<BlockingBase> work) {
    struct Job {
        Closure *c;
        std::unique_ptr<BlockingBase> work;
    };
    auto *job = new Job{this, std::move(work)};
    weft_thread_attr_t a;
    weft_thread_attr_init(&a);
    a.detached = 1;
    a.home_vproc = vproc_;
    a.name = "stage-blocking";
    weft_thread_t t;
    int e = weft_thread_create(
        &t, &a,
        [](void *p) -> void * {
            std::unique_ptr<Job> j(static_cast<Job *>(p));
            try {
                j->work->call();
            } catch (...) {
                j->c->error_ = std::current_exception();
            }
            j->c->resume();
            return nullptr;
        },
        job);
    if (e != 0) { // no thread: run it here (it blocks this runner, but nothing is lost)
        std::unique_ptr<Job> j(job);
        try {
            j->work->call();
        } catch (...) {
            error_ = std::current_exception();
        }
        resume();
    }
}

// ---- Stage -----------------------------------------------------------------

Stage::Stage(std::string name, StageOptions opt) : name_(std::move(name)), opt_(opt) {}

Stage::~Stage() = default;

Stage::PerVproc &Stage::at(int vp) const { return per_[static_cast<size_t>(vp)]; }

size_t Stage::pending(int vp) const { return per_ ? at(vp).pending() : 0; }

const StageProfile &Stage::profile(int vp) const { return at(vp).prof; }

void Stage::request_processor() {
    if (sched_) sched_->runners_[self_vproc()].wanted.store(this, std::memory_order_relaxed);
}

void Stage::submit_new(Closure *c, Closure *parent, int vp) {
    if (!sched_) {
        delete c;
        throw std::logic_error("weft::stage: stage \"" + name_ + "\" is in no Scheduler");
    }
    const int n = sched_->nvp_;
    int target = vp;
    if (target < 0 || target >= n) {
        if (vp >= n) target = vp % n;
        else if (opt_.kind == Kind::kPartitioned) target = static_cast<int>(c->key % static_cast<uint64_t>(n));
        else target = self_vproc() % n;
    }
    c->stage_ = this;
    c->parent_ = parent;
    sched_->live_.fetch_add(1, std::memory_order_relaxed);
    enqueue(c, target);
}

// Queue c (new or continuing) on vproc vp; wake that runner if it sleeps.
void Stage::enqueue(Closure *c, int vp) {
    Scheduler *s = sched_;
    const int me = weft_vproc_self();
    c->vproc_ = vp;
    c->queued_at_ = s->clock(me);
    if (!c->restarted_) c->invoked_at_ = c->queued_at_; // its first queueing: invoked now
    c->from_stage_ = me >= 0 ? s->runners_[me].current_stage : -1;
    c->from_vproc_ = me;
    PerVproc &p = at(vp);
    if (me == vp && c->from_stage_ >= 0 && opt_.lifo) {
        c->link_ = p.stack;
        p.stack = c;
        ++p.stack_len;
    } else if (me == vp) { // from a thread, not an operation: nothing of it is in the cache
        c->link_ = nullptr;
        if (p.fifo_tail) p.fifo_tail->link_ = c;
        else p.fifo_head = c;
        p.fifo_tail = c;
        ++p.fifo_len;
    } else {
        p.inbox_len.fetch_add(1, std::memory_order_relaxed);
        Closure *head = p.inbox.load(std::memory_order_relaxed);
        do {
            c->link_ = head;
        } while (!p.inbox.compare_exchange_weak(head, c, std::memory_order_release, std::memory_order_relaxed));
    }
    s->wake(vp);
}

// ---- Scheduler -------------------------------------------------------------

Scheduler::Scheduler(std::vector<Stage *> order, SchedulerOptions opt) : order_(std::move(order)), opt_(opt) {
    nvp_ = weft_vproc_count();
    if (nvp_ <= 0) throw std::logic_error("weft::stage::Scheduler: made outside weft_main");
    runners_ = std::make_unique<Runner[]>(static_cast<size_t>(nvp_));
    for (size_t i = 0; i < order_.size(); ++i) {
        Stage *s = order_[i];
        if (s->sched_) throw std::logic_error("weft::stage: stage \"" + s->name_ + "\" is in two Schedulers");
        s->sched_ = this;
        s->index_ = static_cast<int>(i);
        s->per_ = std::make_unique<Stage::PerVproc[]>(static_cast<size_t>(nvp_));
    }
    const size_t pairs = order_.size() * static_cast<size_t>(nvp_);
    arcs_ = std::make_unique<std::atomic<uint64_t>[]>(pairs * pairs);
}

Scheduler::~Scheduler() {
    stop();
    for (Stage *s : order_) s->sched_ = nullptr;
}

void Scheduler::start() {
    if (started_) return;
    started_ = true;
    const uint64_t now = weft_now_ns(); // interval thresholds count from here
    for (Stage *s : order_)
        for (int vp = 0; vp < nvp_; ++vp) s->at(vp).last_run_ns = now;
    for (int vp = 0; vp < nvp_; ++vp) {
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.home_vproc = vp;
        a.name = "stage-runner";
        struct Arg {
            Scheduler *s;
            int vp;
        };
        auto *arg = new Arg{this, vp};
        int e = weft_thread_create(
            &runners_[vp].thread, &a,
            [](void *p) -> void * {
                std::unique_ptr<Arg> a(static_cast<Arg *>(p));
                a->s->run_loop(a->vp);
                return nullptr;
            },
            arg);
        if (e != 0) {
            delete arg;
            throw std::runtime_error("weft::stage::Scheduler: cannot start a runner");
        }
    }
}

void Scheduler::stop() {
    if (!started_) return;
    stopping_.store(true, std::memory_order_seq_cst);
    for (int vp = 0; vp < nvp_; ++vp) wake(vp);
    for (int vp = 0; vp < nvp_; ++vp) weft_thread_join(runners_[vp].thread, nullptr);
    started_ = false;
}

// Now, for the profile: the running operation's start when called from a
// runner (a closure method), else a clock read.
uint64_t Scheduler::clock(int me) const {
    if (me >= 0 && runners_[me].current_stage >= 0) return runners_[me].clock;
    return weft_now_ns();
}

void Scheduler::wake(int vp) {
    Runner &r = runners_[vp];
    // Pairs with the runner's sleeping=true then look for work (both seq_cst).
    if (r.sleeping.load(std::memory_order_seq_cst) && r.sleeping.exchange(false, std::memory_order_seq_cst))
        weft_sem_post(&r.wake);
}

void Scheduler::run_loop(int vp) {
    Runner &r = runners_[vp];
    const int n = static_cast<int>(order_.size());
    int dir = 1;
    uint64_t backoff = opt_.idle_min_ns;
    for (;;) {
        bool worked = false;
        for (int k = 0; k < n; ++k) {
            worked |= visit(order_[static_cast<size_t>(dir > 0 ? k : n - 1 - k)], vp, false);
            if (Stage *w = r.wanted.exchange(nullptr, std::memory_order_relaxed)) worked |= visit(w, vp, false);
        }
        dir = -dir;
        if (worked) {
            backoff = opt_.idle_min_ns;
            // The vproc's other threads — the clients waiting for replies,
            // blocking() work, I/O — run between sweeps, not only when every
            // stage is empty.
            weft_yield();
            continue;
        }
        if (stopping_.load(std::memory_order_acquire) && live_.load(std::memory_order_acquire) == 0) break;
        r.sleeping.store(true, std::memory_order_seq_cst);
        bool any = false;
        for (Stage *s : order_) any |= s->at(vp).pending() != 0;
        if (any || (stopping_.load(std::memory_order_seq_cst) && live_.load(std::memory_order_seq_cst) == 0)) {
            r.sleeping.store(false, std::memory_order_relaxed);
            continue;
        }
        weft_sem_timedwait(&r.wake, weft_now_ns() + backoff);
        r.sleeping.store(false, std::memory_order_relaxed);
        backoff = backoff * 2 > opt_.idle_max_ns ? opt_.idle_max_ns : backoff * 2;
    }
    // Every operation is done: wake the others so that they see it too.
    for (int v = 0; v < nvp_; ++v)
        if (v != vp) wake(v);
}

bool Scheduler::visit(Stage *s, int vp, bool interrupting) {
    Stage::PerVproc &p = s->at(vp);
    p.drain();
    const size_t pending = p.stack_len + p.fifo_len;
    if (pending == 0) return false;
    const bool exclusive = s->opt_.kind == Kind::kExclusive;
    if (exclusive && s->busy_.exchange(true, std::memory_order_acquire)) return false; // another runner is in it
    Runner &r = runners_[vp];
    const int outer = r.current_stage;
    r.current_stage = s->index_;
    ++p.prof.visits;
    p.prof.queue_sum += pending;
    r.clock = weft_now_ns();
    if (on_visit) on_visit(on_visit_arg, s->index_, vp);
    uint32_t ran = 0;
    while (Closure *c = p.pop()) {
        run_one(c, vp);
        ++ran;
        if (s->opt_.max_cohort && ran >= s->opt_.max_cohort) break;
        if (!interrupting) check_thresholds(s, vp);
        Stage *w = r.wanted.load(std::memory_order_relaxed);
        if (w && w != s) break; // feedback: another stage wants the processor
        // Not refilled from the inbox meanwhile: a steady stream from other
        // vprocs would keep the visit going, and this vproc's other stages
        // waiting, without bound (the pub-sub server's events waited up to
        // 390 ms for their continuations so). They join the next visit.
    }
    p.last_run_ns = r.clock;
    s->cohort_end(vp); // still inside the visit: an exclusive stage is still held
    r.current_stage = outer;
    if (exclusive) s->busy_.store(false, std::memory_order_release);
    return true;
}

void Scheduler::check_thresholds(Stage *running, int vp) {
    for (Stage *t : order_) {
        if (t == running) continue;
        const StageOptions &o = t->opt_;
        if (!o.threshold_queue && !o.threshold_interval_ns) continue;
        Stage::PerVproc &p = t->at(vp);
        const size_t pend = p.pending();
        if (pend == 0) continue;
        if ((o.threshold_queue && pend >= o.threshold_queue) ||
            (o.threshold_interval_ns && runners_[vp].clock - p.last_run_ns >= o.threshold_interval_ns))
            visit(t, vp, true);
    }
}

void Scheduler::count_arc(const Closure *c, int to_stage, int to_vp) {
    if (c->from_stage_ < 0 || c->from_vproc_ < 0) return;
    const size_t pairs = order_.size() * static_cast<size_t>(nvp_);
    const size_t from = static_cast<size_t>(c->from_stage_) * static_cast<size_t>(nvp_) + static_cast<size_t>(c->from_vproc_);
    const size_t to = static_cast<size_t>(to_stage) * static_cast<size_t>(nvp_) + static_cast<size_t>(to_vp);
    arcs_[from * pairs + to].fetch_add(1, std::memory_order_relaxed);
}

uint64_t Scheduler::arc(int from_stage, int from_vp, int to_stage, int to_vp) const {
    const size_t pairs = order_.size() * static_cast<size_t>(nvp_);
    const size_t from = static_cast<size_t>(from_stage) * static_cast<size_t>(nvp_) + static_cast<size_t>(from_vp);
    const size_t to = static_cast<size_t>(to_stage) * static_cast<size_t>(nvp_) + static_cast<size_t>(to_vp);
    return arcs_[from * pairs + to].load(std::memory_order_relaxed);
}

void Scheduler::run_one(Closure *c, int vp) {
    Stage *s = c->stage_;
    StageProfile &prof = s->at(vp).prof;
    Runner &r = runners_[vp];
    const uint64_t waited = r.clock > c->queued_at_ ? r.clock - c->queued_at_ : 0;
    if (c->restarted_) add_wait(prof.restarted, prof.restart_wait_ns, prof.restart_wait_max_ns, waited);
    else add_wait(prof.started, prof.start_wait_ns, prof.start_wait_max_ns, waited);
    count_arc(c, s->index_, vp);
    c->vproc_ = vp;
    if (c->waiting_children_) { // restarted by its last child: the guard comes back
        c->waiting_children_ = false;
        c->pending_.fetch_add(1, std::memory_order_relaxed);
    }
    // The previous method's children live until this one has returned.
    Closure *prev = c->children_;
    c->children_ = nullptr;
    Step st(Step::kDone, nullptr);
    try {
        const Closure::Method m = c->next_;
        if (m) st = (c->*m)();
        else st = c->run();
    } catch (...) {
        c->error_ = std::current_exception();
        st = Step(Step::kDone, nullptr);
    }
    r.clock = weft_now_ns(); // the end of this operation, the start of the next
    while (prev) { // free the finished; keep the others (a wait_resume may not wait for them)
        Closure *next = prev->sibling_;
        if (prev->ended_.load(std::memory_order_acquire)) {
            delete prev;
        } else {
            prev->sibling_ = c->children_;
            c->children_ = prev;
        }
        prev = next;
    }
    c->restarted_ = true;
    switch (st.kind_) {
    case Step::kDone:
        if (c->pending_.load(std::memory_order_acquire) > 1) { // children still out: done after them
            c->next_ = &Closure::done_after_children;
            c->waiting_children_ = true;
            if (c->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) s->enqueue(c, vp);
            return;
        }
        finish(c, vp);
        return;
    case Step::kWaitChildren:
        c->next_ = st.next_;
        c->waiting_children_ = true;
        if (c->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) s->enqueue(c, vp); // none left
        return;
    case Step::kWaitResume: {
        c->next_ = st.next_;
        uint8_t expect = 0;
        if (!c->rstate_.compare_exchange_strong(expect, 1, std::memory_order_acq_rel)) { // resumed already
            c->rstate_.store(0, std::memory_order_relaxed);
            s->enqueue(c, vp);
        }
        return;
    }
    }
}

void Scheduler::finish(Closure *c, int vp) {
    StageProfile &prof = c->stage_->at(vp).prof;
    const uint64_t now = runners_[vp].clock;
    add_wait(prof.completed, prof.complete_ns, prof.complete_max_ns, now > c->invoked_at_ ? now - c->invoked_at_ : 0);
    Closure *parent = c->parent_;
    if (parent) {
        c->ended_.store(true, std::memory_order_release); // the parent may free it from here on
        if (parent->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) parent->stage_->enqueue(parent, parent->vproc_);
    } else if (c->waited_) {
        weft_sem_post(c->waiter_); // the caller owns it
    } else {
        delete c;
    }
    live_.fetch_sub(1, std::memory_order_release);
}

void Scheduler::call_closure(Stage &s, Closure *c) {
    weft_sem_t done = WEFT_SEM_INITIALIZER(0);
    c->waited_ = true;
    c->waiter_ = &done;
    s.submit_new(c, nullptr, -1);
    weft_sem_wait(&done);
}

// ---- the profile -----------------------------------------------------------

namespace {
double avg_ms(uint64_t sum_ns, uint64_t n) { return n ? static_cast<double>(sum_ns) / static_cast<double>(n) / 1e6 : 0; }
double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }
std::string json_str(const std::string &s) {
    std::string o = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') o += '\\';
        if (static_cast<unsigned char>(ch) < 0x20) continue;
        o += ch;
    }
    return o + "\"";
}
} // namespace

// fn(from stage, from vproc, to stage, to vproc, operations) for each arc used.
template <class F> void Scheduler::for_each_arc(F fn) const {
    const int n = static_cast<int>(order_.size());
    for (int fs = 0; fs < n; ++fs)
        for (int fv = 0; fv < nvp_; ++fv)
            for (int ts = 0; ts < n; ++ts)
                for (int tv = 0; tv < nvp_; ++tv)
                    if (uint64_t k = arc(fs, fv, ts, tv)) fn(fs, fv, ts, tv, k);
}

std::string Scheduler::profile_json() const {
    std::string o = "{\"vprocs\":" + std::to_string(nvp_) + ",\"stages\":[";
    char buf[512];
    for (size_t i = 0; i < order_.size(); ++i) {
        const Stage *s = order_[i];
        o += (i ? "," : "") + std::string("{\"name\":") + json_str(s->name_) + ",\"per_vproc\":[";
        for (int vp = 0; vp < nvp_; ++vp) {
            const StageProfile &p = s->profile(vp);
            std::snprintf(buf, sizeof buf,
                          "%s{\"vproc\":%d,\"visits\":%" PRIu64 ",\"avg_queue\":%.3f,"
                          "\"started\":%" PRIu64 ",\"start_wait_avg_ms\":%.4f,\"start_wait_max_ms\":%.4f,"
                          "\"restarted\":%" PRIu64 ",\"restart_wait_avg_ms\":%.4f,\"restart_wait_max_ms\":%.4f,"
                          "\"completed\":%" PRIu64 ",\"complete_avg_ms\":%.4f,\"complete_max_ms\":%.4f}",
                          vp ? "," : "", vp, p.visits,
                          p.visits ? static_cast<double>(p.queue_sum) / static_cast<double>(p.visits) : 0.0, p.started,
                          avg_ms(p.start_wait_ns, p.started), ms(p.start_wait_max_ns), p.restarted,
                          avg_ms(p.restart_wait_ns, p.restarted), ms(p.restart_wait_max_ns), p.completed,
                          avg_ms(p.complete_ns, p.completed), ms(p.complete_max_ns));
            o += buf;
        }
        o += "]}";
    }
    o += "],\"arcs\":[";
    bool first = true;
    for_each_arc([&](int fs, int fv, int ts, int tv, uint64_t k) {
        std::snprintf(buf, sizeof buf, "%s{\"from\":[%d,%d],\"to\":[%d,%d],\"operations\":%" PRIu64 "}",
                      first ? "" : ",", fs, fv, ts, tv, k);
        o += buf;
        first = false;
    });
    return o + "]}";
}

std::string Scheduler::profile_text() const {
    std::string o;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%-16s %5s %9s | %10s %9s %9s | %10s %9s %9s | %10s %9s %9s\n", "stage", "vproc",
                  "avg queue", "started", "avg ms", "max ms", "restarted", "avg ms", "max ms", "completed", "avg ms",
                  "max ms");
    o += buf;
    for (const Stage *s : order_)
        for (int vp = 0; vp < nvp_; ++vp) {
            const StageProfile &p = s->profile(vp);
            std::snprintf(buf, sizeof buf,
                          "%-16.16s %5d %9.2f | %10" PRIu64 " %9.3f %9.3f | %10" PRIu64 " %9.3f %9.3f | %10" PRIu64
                          " %9.3f %9.3f\n",
                          s->name_.c_str(), vp,
                          p.visits ? static_cast<double>(p.queue_sum) / static_cast<double>(p.visits) : 0.0, p.started,
                          avg_ms(p.start_wait_ns, p.started), ms(p.start_wait_max_ns), p.restarted,
                          avg_ms(p.restart_wait_ns, p.restarted), ms(p.restart_wait_max_ns), p.completed,
                          avg_ms(p.complete_ns, p.completed), ms(p.complete_max_ns));
            o += buf;
        }
    for_each_arc([&](int fs, int fv, int ts, int tv, uint64_t k) {
        std::snprintf(buf, sizeof buf, "arc %s/%d -> %s/%d: %" PRIu64 "\n", order_[static_cast<size_t>(fs)]->name_.c_str(),
                      fv, order_[static_cast<size_t>(ts)]->name_.c_str(), tv, k);
        o += buf;
    });
    return o;
}

} // namespace weft::stage
