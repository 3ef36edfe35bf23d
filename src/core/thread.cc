// Thread lifecycle: create, start, exit, join, detach; yield and sleep.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/park.hpp"
#include "core/runtime.hpp"
#include "sched/kernel_door.hpp"

namespace weft::detail {

namespace {

// Whether h still names t. A stale handle's TCB may be another thread's by
// now, written on another vproc as we read: whole reads, either answer safe.
bool names(const Tcb *t, weft_thread_t h) {
    return __atomic_load_n(&t->magic, __ATOMIC_RELAXED) == kTcbMagic && __atomic_load_n(&t->id, __ATOMIC_RELAXED) == h._id;
}

Tcb *resolve(weft_thread_t h) {
    auto *t = static_cast<Tcb *>(h._tcb);
    if (!t || !names(t, h)) return nullptr;
    return t;
}

// Take t's join lock if h still names it and nobody joined or detached it;
// false (lock released) otherwise. Checked again under the lock: a detached
// thread may have ended and its stack been reused between resolve() and here.
bool lock_joinable(Vproc *vp, Tcb *t, weft_thread_t h) {
    t->join_lock.lock(vp->smp);
    if (names(t, h) && !t->detached && !t->joined) return true;
    t->join_lock.unlock(vp->smp);
    return false;
}

// Never returns — a dead thread is never resumed — but is deliberately not
// declared (nor left provably) [[noreturn]]: thread_start then reaches it by
// a tail jump, not by a call that is never returned from, whose entry the
// return-stack predictor would carry into the joiner's own returns. Were a
// dead thread ever resumed, it would return to the trampoline's ud2.
// Neither this nor thread_start checks its frame (a few saved registers,
// in the reserve): a first chunk sized by the analysis may start below its
// guard, and a check here would link a chunk for nothing at every start
// and end (stack/linked.hpp).
// (gcc takes no_split_stack only on a declaration before the definition.)
WEFT_NO_STACK_CHECK void finish_thread(Vproc *vp, Tcb *self, void *ret);
WEFT_NO_STACK_CHECK void thread_start(void *p);

[[gnu::noinline]] void finish_thread(Vproc *vp, Tcb *self, void *ret) {
    vp->check_stack(self); // before anything runs on a stack that may be gone
    vp->check_slot_below(self);
    if (self->tsd) { // most threads never set a key
        run_tsd_destructors(self);
        free_tsd(self);
    }
    self->retval = ret;
    vp = tls_vproc; // destructors may have parked; still the home vproc
    if (__builtin_expect(vp->graph != nullptr, 0)) vp->graph->on_exit(self);
    vp->stats.exited.add();
    // A joiner on this vproc can be made ready now: it cannot run, and so
    // cannot free this stack, before we have switched off it. That lets us
    // switch straight to it instead of through the loop (create+join: two
    // switches, not three), and leaves nothing to reap after the switch.
    // Anything else (detached, no joiner yet, a joiner elsewhere) waits for
    // reap_dead, which runs once we are off this stack.
    bool reaped = false;
    {
        SpinGuard g(self->join_lock, vp->smp);
        if (self->joiner && self->joiner->vp == vp) {
            self->exited = true;
            if (claim(self->joiner, vp->smp)) make_ready_next(vp, self->joiner, 0); // as a return would (run-next)
            reaped = true;
        }
    }
    self->state = ThreadState::Dead;
    if (reaped) vp->rt->thread_ended(); // the joiner is alive: never the last thread
    else vp->dead = self;
    Tcb *next = vp->pick_next();
    vp->switch_to(self, next ? next : &vp->loop);
}

// First frame of every thread, jumped to by weft_ctx_trampoline.
void thread_start(void *p) {
    auto *self = static_cast<Tcb *>(p);
    FiberSwitch first; // no fake stack to restore on a fresh stack
    first.finish();
    Vproc *vp = tls_vproc;
    if (vp->dead) vp->after_switch();
    self->pinned |= vp->pin_on_start;
    if (__builtin_expect(vp->graph != nullptr, 0)) vp->graph->on_start(self);
    *vp->errno_loc = 0;
    void *ret;
    try {
        ret = self->fn(self->arg);
    } catch (...) {
        fatal_thread(self, "uncaught C++ exception");
    }
    finish_thread(vp, self, ret); // a tail jump
}

// An unnamed thread keeps name[0] == 0 and is shown as "thread-<id>":
// formatting a name at every creation would cost more than the creation.
void set_name(Tcb *t, const char *name) {
    if (name) {
        std::strncpy(t->name, name, kThreadNameMax - 1);
        t->name[kThreadNameMax - 1] = 0;
    } else {
        t->name[0] = 0;
    }
}

// weft_yield's body, with the blocking point named by the caller: a sleep
// whose deadline has already passed yields, and is still the same sleep in
// the blocking graph (else one call site would be one node or another
// depending on the clock, and none at all when the thread was alone).
// fp: the public function's frame, where the graph's walk starts. Only the
// graph hears of a yield: it is not a park for the policy.
[[gnu::always_inline]] inline int yield_as(Vproc *vp, int reason, const void *site, void *fp) {
    Tcb *self = vp->current;
    if (vp->nothing_ready()) {
        // Alone: look for expired timers and remote wake-ups now (a thread
        // spinning on weft_yield must see them), and return at once if there
        // is still nobody to give the vproc to.
        vp->poll();
        if (vp->nothing_ready()) {
            vp->check_stack(self); // as a switch would have
            if (__builtin_expect(self->graph != nullptr, 0)) {
                vp->graph->on_park(self, reason, site, fp);
                vp->graph->on_resume(self);
            }
            return 0;
        }
    }
    vp->stats.yields.add();
    if (__builtin_expect(self->graph != nullptr, 0)) vp->graph->on_park(self, reason, site, fp);
    self->state = ThreadState::Ready;
    vp->enqueue_local(self);
    self = vp->schedule();
    // (Tcb::graph is set exactly while the graph is on: one load from the
    // resumed thread, not two through its vproc.)
    if (__builtin_expect(self->graph != nullptr, 0)) self->vp->graph->on_resume(self);
    return 0;
}

} // namespace

void release_thread_slow(Tcb *t, Stack s) {
    if (t->chunk) { // linked: the chain down to the first chunk, which t lives in
        StackChunk *c = t->chunk;
        tls_vproc->chunks.release_chain(c);
        return;
    }
    StackPool &here = tls_vproc->stacks;
    if (s.owner == &here) here.release(s);
    else s.owner->release_remote(s);
}

int create_thread(Vproc *vp, weft_thread_t *out, const weft_thread_attr_t *attr, void *(*fn)(void *),
                  void *arg) {
    Runtime *rt = vp->rt;
    size_t size = rt->cfg.stack_size; // already rounded (resolve_config)
    Vproc *target = vp;
    bool linked = rt->cfg.linked;
    if (attr) {
        if (attr->stacks < WEFT_STACKS_DEFAULT || attr->stacks > WEFT_STACKS_LINKED) return EINVAL;
        if (attr->stacks != WEFT_STACKS_DEFAULT) linked = attr->stacks == WEFT_STACKS_LINKED;
        if (linked && !linked_stacks_built()) return EINVAL;
        if (attr->stack_size) {
            if (attr->stack_size > kMaxStackSize) return EINVAL;
            size = linked ? attr->stack_size : round_stack_size(attr->stack_size);
        }
        int home = attr->home_vproc;
        if (home < -1 || home >= static_cast<int>(rt->vprocs.size())) return EINVAL;
        if (home >= 0) target = rt->vprocs[static_cast<size_t>(home)].get();
    }

    Stack st;
    StackChunk *chunk = nullptr;
    if (linked) {
        // The first chunk: header and slack below, the frames, the TCB and
        // the start frame on top (stack/linked.hpp). An entry the program's
        // analysis sized (stackcheck --entry-stacks) gets what it needs up to
        // its first checkpoint, or, when its static bound is at most
        // MinChunk, that bound with the guard at the reserve: every check on
        // the chunk then passes and the thread never links.
        size_t bytes = kDefaultFirstChunk;
        bool exact = false;
        if (attr && attr->stack_size) {
            bytes = kChunkHeader + vp->chunks.slack() + size + sizeof(Tcb) + 64;
        } else if (const EntryStack *e = entry_stack(fn)) {
            exact = e->static_bound && e->static_bound <= rt->cfg.min_chunk;
            bytes = kChunkHeader + kStackReserve + (exact ? e->static_bound : e->first_chunk) + sizeof(Tcb) + 64;
        }
        chunk = vp->chunks.alloc(bytes);
        if (!chunk) return EAGAIN;
        if (exact) chunk->guard = chunk->base() + kStackReserve;
        st.lo = chunk->base();
        st.size = static_cast<size_t>(chunk->hi() - chunk->base());
        st.guarded = false;
        st.slot_below = false;
        st.owner = nullptr;
    } else {
        if (!vp->stacks.alloc(size, &st)) return EAGAIN;
        sanitizer_fresh_stack(st.lo, st.size);
    }
    // The TCB takes the top of the stack; the thread's frames grow down from
    // just below it.
    Tcb *t = new (tcb_at_top(st.hi())) Tcb;
    t->vp = target;
    __atomic_store_n(&t->id, vp->next_thread_id(), __ATOMIC_RELAXED); // (both read by stale handles' resolve,
    __atomic_store_n(&t->magic, kTcbMagic, __ATOMIC_RELAXED);         //  and magic by a neighbour's check_slot_below)
    t->detached = attr && attr->detached;
    if (attr && attr->home_vproc >= 0) t->pinned = kPinnedHome;
    t->fn = fn;
    t->arg = arg;
    t->stack = st;
    t->stack_guarded = st.guarded;
    t->chunk = chunk;
    t->switch_care = static_cast<uint8_t>((st.guarded ? 0 : Tcb::kCareUnguarded) | (chunk ? Tcb::kCareLinked : 0));
    set_name(t, attr ? attr->name : nullptr);
    context_init(&t->ctx, t, thread_start, t);
    t->tsan.make();

    rt->thread_started();
    ++vp->res_threads;
    // Counted on the home vproc at once, so created - exited is what lives
    // there; from another vproc that takes an atomic add (rare).
    if (target == vp) vp->stats.created.add();
    else target->stats.created_remotely.fetch_add(1, std::memory_order_relaxed);
    if (out) *out = weft_thread_t{t, t->id};
    t->state = ThreadState::Ready;
    // (Not handed to an idle vproc here: a thread that talks to its creator
    // is best kept with it, and one that waits long enough to start is
    // given away by share_work.) Run next, as a call would be: a fork-join
    // tree then unfolds depth-first (sched/fifo.hpp).
    if (target == vp) vp->enqueue_next(t);
    else target->push_remote(t);
    return 0;
}

} // namespace weft::detail

using namespace weft::detail;

extern "C" {

void weft_thread_attr_init(weft_thread_attr_t *attr) {
    if (!attr) return;
    attr->stack_size = 0;
    attr->name = nullptr;
    attr->detached = 0;
    attr->home_vproc = -1;
    attr->stacks = WEFT_STACKS_DEFAULT;
}

WEFT_NO_STACK_CHECK int weft_thread_create(weft_thread_t *t, const weft_thread_attr_t *attr,
                                           void *(*fn)(void *), void *arg);
WEFT_NO_STACK_CHECK int weft_thread_join(weft_thread_t h, void **ret);
WEFT_NO_STACK_CHECK int weft_yield(void);

int weft_thread_create(weft_thread_t *t, const weft_thread_attr_t *attr, void *(*fn)(void *), void *arg) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    if (!t && !(attr && attr->detached)) return EINVAL; // a joinable thread nobody could join
    if (!fn) return EINVAL;
    return create_thread(vp, t, attr, fn, arg);
}

int weft_thread_join(weft_thread_t h, void **ret) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    Tcb *t = resolve(h);
    if (!t) return EINVAL;
    Tcb *self = vp->current;
    if (t == self) return EDEADLK;
    if (!lock_joinable(vp, t, h)) return EINVAL;
    t->joined = true;
    if (!t->exited) {
        t->joiner = self;
        self->state = ThreadState::Parked; // before unlocking: the reaper may wake us at once
        t->join_lock.unlock(vp->smp);
        park(vp, WEFT_PARK_JOIN, WEFT_SITE(), 0);
    } else {
        t->join_lock.unlock(vp->smp);
    }
    if (ret) *ret = t->retval;
    release_thread(t);
    return 0;
}

int weft_thread_detach(weft_thread_t h) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    Tcb *t = resolve(h);
    if (!t) return EINVAL;
    if (!lock_joinable(vp, t, h)) return EINVAL;
    bool gone = t->exited;
    t->detached = true;
    t->join_lock.unlock(vp->smp);
    if (gone) release_thread(t);
    return 0;
}

weft_thread_t weft_thread_self(void) {
    Vproc *vp = tls_vproc;
    if (!vp) return weft_thread_t{nullptr, 0};
    return weft_thread_t{vp->current, vp->current->id};
}

int weft_thread_equal(weft_thread_t a, weft_thread_t b) { return a._id == b._id && a._tcb == b._tcb; }

// A handle is meaningful only to threads of the runtime that made it: once
// its weft_main has returned, its memory is gone. Outside a runtime these
// calls do not look at it.
uint64_t weft_thread_id(weft_thread_t h) {
    if (!tls_vproc) return 0;
    Tcb *t = resolve(h);
    return t ? t->id : 0;
}

int weft_thread_getname(weft_thread_t h, char *buf, size_t len) {
    if (!tls_vproc) return EPERM;
    Tcb *t = resolve(h);
    if (!t || !buf || !len) return EINVAL;
    if (t->name[0]) std::snprintf(buf, len, "%s", t->name);
    else std::snprintf(buf, len, "thread-%llu", static_cast<unsigned long long>(t->id));
    return 0;
}

int weft_thread_setname(weft_thread_t h, const char *name) {
    if (!tls_vproc) return EPERM;
    Tcb *t = resolve(h);
    if (!t || !name) return EINVAL;
    set_name(t, name);
    return 0;
}

void weft_thread_exit(void *ret) {
    Vproc *vp = tls_vproc;
    if (!vp) fatal("weft_thread_exit called outside weft_main");
    finish_thread(vp, vp->current, ret);
    __builtin_unreachable();
}

int weft_migrate(int vproc) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    auto &all = vp->rt->vprocs;
    if (vproc < 0 || vproc >= static_cast<int>(all.size())) return EINVAL;
    Tcb *self = vp->current;
    if (self->pinned & kPinnedHome) return EPERM;
    Vproc *to = all[static_cast<size_t>(vproc)].get();
    if (to == vp) return 0;
    // Ready, with its new home, but handed over only once it has switched
    // out (finish_move, after the switch): else `to` could resume it while
    // its registers are still being saved here.
    vp->let_go(self, to);
    self->state = ThreadState::Ready;
    vp->dead = reinterpret_cast<Tcb *>(reinterpret_cast<uintptr_t>(self) | Vproc::kMovingTag);
    vp->schedule();
    return 0;
}

int weft_yield(void) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    return yield_as(vp, kYieldReason, WEFT_SITE(), __builtin_frame_address(0));
}

int weft_admit(void) {
    Vproc *vp = tls_vproc;
    if (!vp || vp->fifo || !vp->pol->admit) return 1;
    if (vp->pol->admit(vp->pol_state, vp->current)) return 1;
    vp->stats.shed.add();
    return 0;
}

int weft_admit_new(void) {
    Vproc *vp = tls_vproc;
    if (!vp || vp->fifo || !vp->pol->admit_new) return 1;
    if (vp->pol->admit_new(vp->pol_state)) return 1;
    vp->stats.shed.add();
    return 0;
}

int weft_door_listen(int listen_fd) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    if (vp->kernel_door.load(std::memory_order_relaxed)) return EBUSY;
    auto *door = new (std::nothrow) KernelDoor;
    if (!door) return ENOMEM;
    if (int e = door->attach(listen_fd)) {
        delete door;
        return e;
    }
    vp->kernel_door.store(door, std::memory_order_release);
    return 0;
}

} // extern "C"

namespace {

// site: the caller of the public function, whichever of the two it called
// (weft_sleep_ns calling weft_sleep_until_ns would be its site otherwise,
// wherever the compiler does not make that call a tail jump).
[[gnu::always_inline]] inline int sleep_until(uint64_t deadline_ns, const void *site) {
    Vproc *vp = tls_vproc;
    if (!vp) {
        timespec ts{static_cast<time_t>(deadline_ns / 1000000000u), static_cast<long>(deadline_ns % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
        }
        return 0;
    }
    if (deadline_ns <= now_ns()) return yield_as(vp, WEFT_PARK_SLEEP, site, __builtin_frame_address(0));
    vp->current->state = ThreadState::Parked;
    park(vp, WEFT_PARK_SLEEP, site, deadline_ns);
    return 0;
}

} // namespace

extern "C" {

int weft_sleep_until_ns(uint64_t deadline_ns) { return sleep_until(deadline_ns, WEFT_SITE()); }

int weft_sleep_ns(uint64_t ns) {
    if (ns == 0) return tls_vproc ? weft_yield() : 0;
    return sleep_until(now_ns() + ns, WEFT_SITE());
}

uint64_t weft_now_ns(void) { return now_ns(); }

} // extern "C"
