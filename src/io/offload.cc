#include "io/offload.hpp"

#include <signal.h>

#include <cstdio>

#include "core/runtime.hpp"
#include "io/fd.hpp"

namespace weft::detail {

OffloadPool &offload_pool(Vproc *vp) { return *vp->rt->offload; }

OffloadPool::~OffloadPool() {
    pthread_mutex_lock(&mu_);
    stop_ = true;
    pthread_cond_broadcast(&cv_);
    std::vector<pthread_t> ts = threads_;
    ts.insert(ts.end(), retired_.begin(), retired_.end());
    pthread_mutex_unlock(&mu_);
    for (pthread_t t : ts) pthread_join(t, nullptr);
}

int OffloadPool::set_max(int n) {
    pthread_mutex_lock(&mu_);
    const int old = max_;
    max_ = n;
    pthread_cond_broadcast(&cv_); // idle workers above the bound leave
    pthread_mutex_unlock(&mu_);
    reap_retired();
    return old;
}

int OffloadPool::max() const {
    pthread_mutex_lock(&const_cast<OffloadPool *>(this)->mu_);
    const int m = max_;
    pthread_mutex_unlock(&const_cast<OffloadPool *>(this)->mu_);
    return m;
}

int OffloadPool::workers() const {
    pthread_mutex_lock(&const_cast<OffloadPool *>(this)->mu_);
    const int n = static_cast<int>(threads_.size());
    pthread_mutex_unlock(&const_cast<OffloadPool *>(this)->mu_);
    return n;
}

void OffloadPool::reap_retired() {
    pthread_mutex_lock(&mu_);
    std::vector<pthread_t> gone;
    gone.swap(retired_);
    pthread_mutex_unlock(&mu_);
    // They have left the pool's lock for good: each is at most a return away.
    for (pthread_t t : gone) pthread_join(t, nullptr);
}

bool OffloadPool::enqueue(Vproc *vp, OffloadJob *job, Tcb *parks) {
    job->next = nullptr;
    pthread_mutex_lock(&mu_);
    const bool reap = !retired_.empty();
    // A worker per queued job while the bound allows: a job never waits
    // behind a slow one while a worker could still be started. An idle
    // worker already signalled for a queued job does not count as free.
    if (queued_ >= idle_ && static_cast<int>(threads_.size()) < max_) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 256 * 1024); // blocking calls, a resolver: no deep recursion
        // Workers never take signals meant for the program (nor SIGPIPE).
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = pthread_create(&t, &a, worker_main, this);
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        pthread_attr_destroy(&a);
        if (e == 0) threads_.push_back(t);
        else if (threads_.empty()) {
            pthread_mutex_unlock(&mu_);
            return false;
        }
    }
    if (parks) parks->state = ThreadState::Parked;
    if (tail_) tail_->next = job;
    else head_ = job;
    tail_ = job;
    ++queued_;
    pthread_cond_signal(&cv_);
    pthread_mutex_unlock(&mu_);
    if (reap) reap_retired();
    vp->stats.offloaded.add();
    return true;
}

bool OffloadPool::run(Vproc *&vp, OffloadJob *job, const void *site) {
    Tcb *self = vp->current;
    job->waiter = self;
    job->done = nullptr;
    if (!enqueue(vp, job, self)) return false;
    vp->io_wait_begin();
    park(vp, WEFT_PARK_OFFLOAD, site, 0);
    vp->io_wait_end();
    return true;
}

bool OffloadPool::submit(Vproc *vp, OffloadJob *job) {
    job->waiter = nullptr;
    return enqueue(vp, job, nullptr);
}

void *OffloadPool::worker_main(void *p) {
    static_cast<OffloadPool *>(p)->worker();
    return nullptr;
}

void OffloadPool::worker() {
    pthread_mutex_lock(&mu_);
    for (;;) {
        while (!head_ && !stop_ && static_cast<int>(threads_.size()) <= max_) {
            ++idle_;
            pthread_cond_wait(&cv_, &mu_);
            --idle_;
        }
        if (!stop_ && static_cast<int>(threads_.size()) > max_) { // the bound was lowered: leave
            const pthread_t me = pthread_self();
            for (size_t i = 0; i < threads_.size(); ++i)
                if (pthread_equal(threads_[i], me)) {
                    threads_[i] = threads_.back();
                    threads_.pop_back();
                    break;
                }
            retired_.push_back(me); // joined by the next run, set_max or the destructor
            if (head_) pthread_cond_signal(&cv_); // a job signalled to us: to a worker that stays
            break;
        }
        if (!head_) break; // stopping, nothing left
        OffloadJob *job = head_;
        --queued_;
        head_ = job->next;
        if (!head_) tail_ = nullptr;
        pthread_mutex_unlock(&mu_);
        job->run(job);
        consume_sigpipe();
        if (auto done = job->done) { // the job is gone once done returns
            done(job);
        } else {
            Tcb *t = job->waiter; // the job is gone once the thread runs
            wake(t, 0, t->vp->smp);
        }
        pthread_mutex_lock(&mu_);
    }
    pthread_mutex_unlock(&mu_);
}

} // namespace weft::detail
