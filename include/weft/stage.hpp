// weft/stage.hpp — StagedServer on weft: stages, multiple-entry closures and
// cohort scheduling (Larus & Parkes; docs/staged.md).
//
// A program is a set of stages, each with private data and asynchronous
// operations. An operation is a closure: an object whose methods are the
// operation (run) and its continuations. A method ends by saying what
// happens next:
//
//     struct Lookup : weft::stage::Op<int> {      // an operation yielding an int
//         explicit Lookup(int k) : key(k) {}
//         int key;
//         Step run() override { return done(cache.local()[key]); }
//     };
//     struct Page : weft::stage::Op<std::string> {
//         Lookup *a, *b;
//         Step run() override {
//             a = &invoke<Lookup>(cache_stage, 1);  // children, on any stage
//             b = &invoke<Lookup>(cache_stage, 2);
//             return wait_children(&Page::both);  // resume when both are done
//         }
//         Step both() { return done(std::to_string(a->result + b->result)); }
//     };
//
// Stages run on weft's vprocs: every vproc has a runner (a weft thread) that
// visits the stages in the programmer's order, forward then backward
// (wavefront), and at each runs the stage's pending operations there as a
// cohort — the ones invoked on this vproc newest first (a stack, no lock),
// then those sent from other vprocs (a queue). Exclusive stages run one
// operation at a time, partitioned stages send each operation to the vproc
// that owns its key, shared stages run anywhere. A method must not block its
// vproc: blocking work (I/O through weft's reactor) goes to blocking(),
// which runs it on a weft thread and resumes the closure when it returns.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "weft/weft.h"

namespace weft::stage {

class Closure;
class Stage;
class Scheduler;

// What a closure method returns: the operation is done, or waits for its
// children, or waits for resume(); the latter two name the method to run
// next. Made by Closure's done / wait_children / wait_resume / blocking.
class Step {
public:
    using Method = Step (Closure::*)();
    enum Kind : uint8_t { kDone, kWaitChildren, kWaitResume };
    Kind kind() const { return kind_; }

private:
    friend class Closure;
    Step(Kind k, Method m) : kind_(k), next_(m) {}
    Kind kind_;
    Method next_;
    friend class Scheduler;
};

// The base of every operation. Closures are made by Stage::invoke (no
// parent: the stage deletes it when done), Closure::invoke (a child, owned
// by its parent until the parent's next method has returned), or
// Scheduler::call (a weft thread waits for it).
class Closure {
public:
    using Method = Step::Method;
    virtual ~Closure();
    Closure(const Closure &) = delete;
    Closure &operator=(const Closure &) = delete;

    // The operation's first method.
    virtual Step run() = 0;

    // After it is done: whether it failed (an exception escaped a method, or
    // fail()), and the error.
    bool failed() const { return error_ != nullptr; }
    void rethrow_if_failed() const {
        if (error_) std::rethrow_exception(error_);
    }
    Stage *stage() const { return stage_; }
    int vproc() const { return vproc_; } // where it runs next (or last ran)

    // Resume a closure waiting in wait_resume (from anywhere: a weft thread,
    // another closure, another vproc). Exactly once per wait.
    void resume();

protected:
    Closure() = default;

    Step done() { return Step(Step::kDone, nullptr); }
    Step fail(std::exception_ptr e) {
        error_ = std::move(e);
        return done();
    }
    // Run `m` once every child invoked so far has finished (at once if none).
    template <class C> Step wait_children(Step (C::*m)()) {
        return Step(Step::kWaitChildren, static_cast<Method>(m));
    }
    // Run `m` once someone calls resume().
    template <class C> Step wait_resume(Step (C::*m)()) {
        return Step(Step::kWaitResume, static_cast<Method>(m));
    }
    // Run `fn()` on a weft thread of this closure's vproc — it may block in
    // weft's I/O, sleep, lock — then `m` on this closure's stage.
    template <class F, class C> Step blocking(F fn, Step (C::*m)()) {
        start_blocking(std::make_unique<Blocking<F>>(std::move(fn)));
        return wait_resume(m);
    }
    // A child operation on stage s (constructed from args); it runs on the
    // current vproc unless s places it elsewhere. The reference stays valid
    // until the method that follows wait_children has returned.
    template <class C, class... A> C &invoke(Stage &s, A &&...args);
    // The same, on vproc `vp` (placement).
    template <class C, class... A> C &invoke_on(Stage &s, int vp, A &&...args);
    // The key a partitioned stage routes this operation by (set before it
    // is invoked, or by the constructor).
    uint64_t key = 0;

    struct BlockingBase {
        virtual ~BlockingBase() = default;
        virtual void call() = 0;
    };
    template <class F> struct Blocking final : BlockingBase {
        explicit Blocking(F f) : fn(std::move(f)) {}
        void call() override { fn(); }
        F fn;
    };
    void start_blocking(std::unique_ptr<BlockingBase> work);

private:
    friend class Stage;
    friend class Scheduler;
    void adopt(Closure *child);
    Step done_after_children() { return done(); }

    Stage *stage_ = nullptr;
    Method next_ = nullptr;            // the method to run (nullptr: run())
    Closure *parent_ = nullptr;        // waiting for this one; nullptr: top level
    Closure *link_ = nullptr;          // in a stage's stack or queue
    Closure *children_ = nullptr;      // invoked by the running method, owned
    Closure *sibling_ = nullptr;       // next in the parent's children_
    // Unfinished children, plus 1 except while it waits for them: whoever
    // brings it to 0 queues the continuation.
    std::atomic<int> pending_{1};
    std::atomic<uint8_t> rstate_{0};   // wait_resume: 0 -, 1 waiting, 2 resumed before it waited
    std::atomic<bool> ended_{false};   // done (a child: its parent may free it)
    bool waiting_children_ = false;
    int vproc_ = -1;
    int from_stage_ = -1, from_vproc_ = -1; // who queued it (profile arcs); -1: a thread
    bool restarted_ = false;           // queued again after a wait (profile)
    bool waited_ = false;              // someone waits in Scheduler::call
    uint64_t queued_at_ = 0, invoked_at_ = 0;
    std::exception_ptr error_;
    weft_sem_t *waiter_ = nullptr;     // Scheduler::call's
};

// An operation that produces a value of type R (default-constructible).
template <class R> class Op : public Closure {
public:
    R result{};

protected:
    using Closure::done;
    Step done(R value) {
        result = std::move(value);
        return Closure::done();
    }
};

// The implicit-continuation style (§3.2) as a C++20 coroutine: the
// operation is one coroutine, and where an explicit closure would end a
// method and name its continuation it awaits instead.
//
//     struct Page : weft::stage::CoOp<int> {
//         weft::stage::Co body() override {
//             auto &a = invoke<Lookup>(cache_stage, 1);
//             auto &b = invoke<Lookup>(cache_stage, 2);
//             co_await children();                  // wait_children
//             result = a.result + b.result;         // then done
//         }
//     };
//
// children(), resumed() (wait_resume), blocking(fn) (fn on a weft thread).
// An exception escaping the body fails the operation. The coroutine frame
// is one allocation per operation; a suspension costs a resume.
class Co {
public:
    struct promise_type {
        Co get_return_object() { return Co(std::coroutine_handle<promise_type>::from_promise(*this)); }
        std::suspend_always initial_suspend() noexcept { return {}; }
        std::suspend_always final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { error = std::current_exception(); }
        std::exception_ptr error;
        Step::Kind wait = Step::kDone; // what the suspension waits for
    };
    Co() = default;
    explicit Co(std::coroutine_handle<promise_type> h) : h_(h) {}
    Co(Co &&o) noexcept : h_(std::exchange(o.h_, {})) {}
    Co &operator=(Co &&o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~Co() {
        if (h_) h_.destroy();
    }
    std::coroutine_handle<promise_type> handle() const { return h_; }

private:
    std::coroutine_handle<promise_type> h_;
};

template <class R> class CoOp : public Op<R> {
protected:
    virtual Co body() = 0;

    struct Await {
        Step::Kind kind;
        bool await_ready() const noexcept { return false; }
        void await_suspend(std::coroutine_handle<Co::promise_type> h) const noexcept { h.promise().wait = kind; }
        void await_resume() const noexcept {}
    };
    Await children() { return {Step::kWaitChildren}; }
    Await resumed() { return {Step::kWaitResume}; }
    template <class F> Await blocking(F fn) {
        this->start_blocking(std::make_unique<typename Closure::template Blocking<F>>(std::move(fn)));
        return {Step::kWaitResume};
    }

private:
    Step run() final {
        co_ = body();
        return step();
    }
    Step step() {
        auto h = co_.handle();
        h.promise().wait = Step::kDone;
        h.resume();
        if (h.done()) {
            std::exception_ptr e = h.promise().error;
            co_ = Co(); // the frame goes now, not with the closure
            return e ? this->fail(e) : Closure::done();
        }
        if (h.promise().wait == Step::kWaitChildren) return this->wait_children(&CoOp::step);
        return this->wait_resume(&CoOp::step);
    }
    Co co_;
};

enum class Kind : uint8_t {
    kExclusive,   // at most one operation at a time, on any vproc: no locks needed
    kPartitioned, // operations go to the vproc that owns their key (key % vprocs)
    kShared,      // operations run on any vproc, concurrently
};

struct StageOptions {
    Kind kind = Kind::kShared;
    // Thresholds: run this stage, interrupting the current one after its
    // current operation, once this many operations wait on a vproc (0: no
    // limit) or once it has work and has not run for this long (0: none).
    uint32_t threshold_queue = 0;
    uint64_t threshold_interval_ns = 0;
    // Operations one visit runs at most (0: all that are pending).
    uint32_t max_cohort = 0;
    // The paper's order (§4.1.1): operations invoked by an operation on the
    // same vproc go on a stack and run newest first, for the cache. false:
    // every operation in arrival order (bounds how long one waits under a
    // steady stream of new work; see docs/staged.md, pub-sub).
    bool lifo = true;
};

// Per stage and vproc: what the profile shows (Scheduler::profile_*).
struct StageProfile {
    uint64_t visits = 0;          // cohorts run (visits that found work)
    uint64_t queue_sum = 0;       // operations pending at each visit, summed (average = / visits)
    uint64_t started = 0, start_wait_ns = 0, start_wait_max_ns = 0;       // first runs: queued -> run
    uint64_t restarted = 0, restart_wait_ns = 0, restart_wait_max_ns = 0; // after a wait: queued again -> run
    uint64_t completed = 0, complete_ns = 0, complete_max_ns = 0;         // invoked -> done
};

// A stage: derive from it and keep the stage's data in the derived class.
class Stage {
public:
    explicit Stage(std::string name, StageOptions opt = {});
    virtual ~Stage();
    Stage(const Stage &) = delete;
    Stage &operator=(const Stage &) = delete;

    const std::string &name() const { return name_; }
    Kind kind() const { return opt_.kind; }
    const StageOptions &options() const { return opt_; }

    // A top-level operation (no parent): the stage deletes it when done.
    // From a weft thread or a closure method. Returns it (valid until done).
    template <class C, class... A> C *invoke(A &&...args) {
        auto *c = new C(std::forward<A>(args)...);
        submit_new(c, nullptr, -1);
        return c;
    }
    template <class C, class... A> C *invoke_on(int vp, A &&...args) {
        auto *c = new C(std::forward<A>(args)...);
        submit_new(c, nullptr, vp);
        return c;
    }

    // Feedback (§4.1.3): this stage has work enough; the stage running on
    // the caller's vproc stops after its current operation and the runner
    // comes here next.
    void request_processor();

    // Operations pending on vproc vp (stack and queue).
    size_t pending(int vp) const;

protected:
    // Called on the runner of vproc vp after each visit that ran a cohort
    // here, before the runner moves on: a stage that gathers its cohort's
    // operations acts on them together (weft-staged's I/O aggregator merges
    // the block reads of one cohort into one read per run of adjacent
    // blocks). It may invoke top-level operations and resume closures; it
    // must not block.
    virtual void cohort_end(int /*vp*/) {}

public:
    const StageProfile &profile(int vp) const;

private:
    friend class Closure;
    friend class Scheduler;
    struct PerVproc;
    void submit_new(Closure *c, Closure *parent, int vp);
    void enqueue(Closure *c, int vp);
    PerVproc &at(int vp) const;

    std::string name_;
    StageOptions opt_;
    Scheduler *sched_ = nullptr;
    int index_ = -1;
    std::atomic<bool> busy_{false};   // an exclusive stage's one runner
    std::unique_ptr<PerVproc[]> per_;
};

// Privatized data (§4.1.4): one T per vproc, indexed by the caller's.
template <class T> class Privatized {
public:
    Privatized() : v_(static_cast<size_t>(weft_vproc_count() > 0 ? weft_vproc_count() : 1)) {}
    T &local() { return v_[static_cast<size_t>(weft_vproc_self() > 0 ? weft_vproc_self() : 0)]; }
    T &operator[](size_t vp) { return v_[vp]; }
    size_t size() const { return v_.size(); }

private:
    std::vector<T> v_;
};

struct SchedulerOptions {
    // Idle runners sleep for back-off periods doubling from min to max
    // (an invocation wakes them at once).
    uint64_t idle_min_ns = 1000;
    uint64_t idle_max_ns = 1000000;
};

// Runs a set of stages on every vproc in the given (wavefront) order. Made
// inside weft_main; start() starts one runner per vproc; stop() (or the
// destructor) waits until every operation is done and the runners left.
class Scheduler {
public:
    Scheduler(std::vector<Stage *> order, SchedulerOptions opt = {});
    ~Scheduler();
    Scheduler(const Scheduler &) = delete;
    Scheduler &operator=(const Scheduler &) = delete;

    void start();
    void stop();

    // Run operation c on stage s and wait for it (a weft thread, not a
    // closure method); returns it done, owned by the caller.
    template <class C> std::unique_ptr<C> call(Stage &s, std::unique_ptr<C> c) {
        call_closure(s, c.get());
        return c;
    }

    // The profile: per stage and vproc, and the arcs between stage-vproc
    // pairs (operations started or restarted at one that came from another).
    std::string profile_json() const;
    std::string profile_text() const;
    uint64_t arc(int from_stage, int from_vp, int to_stage, int to_vp) const;

    int vprocs() const { return nvp_; }
    const std::vector<Stage *> &stages() const { return order_; }

    // Test hook: called with (stage index, vproc) at each visit that finds work.
    void (*on_visit)(void *arg, int stage, int vp) = nullptr;
    void *on_visit_arg = nullptr;

private:
    friend class Stage;
    friend class Closure;
    struct Runner;
    static void *runner_main(void *arg);
    void run_loop(int vp);
    bool visit(Stage *s, int vp, bool interrupting);
    void run_one(Closure *c, int vp);
    void finish(Closure *c, int vp);
    void check_thresholds(Stage *running, int vp);
    void call_closure(Stage &s, Closure *c);
    void wake(int vp);
    uint64_t clock(int me) const; // me: the caller's vproc (weft_vproc_self())
    void count_arc(const Closure *c, int to_stage, int to_vp);
    template <class F> void for_each_arc(F fn) const;

    std::vector<Stage *> order_;
    SchedulerOptions opt_;
    int nvp_;
    std::unique_ptr<Runner[]> runners_;
    std::atomic<bool> stopping_{false};
    std::atomic<int64_t> live_{0};   // operations not yet done
    std::unique_ptr<std::atomic<uint64_t>[]> arcs_;
    bool started_ = false;
};

// ---- templates ---------------------------------------------------------

template <class C, class... A> C &Closure::invoke(Stage &s, A &&...args) {
    auto *c = new C(std::forward<A>(args)...);
    adopt(c);
    s.submit_new(c, this, -1);
    return *c;
}

template <class C, class... A> C &Closure::invoke_on(Stage &s, int vp, A &&...args) {
    auto *c = new C(std::forward<A>(args)...);
    adopt(c);
    s.submit_new(c, this, vp);
    return *c;
}

} // namespace weft::stage
