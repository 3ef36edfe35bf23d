// The offload pool: kernel worker threads that run calls which can only
// block (fsync without io_uring, getaddrinfo, a blocking sendfile, a disk
// read that missed the page cache on the epoll and poll backends) while the
// weft thread that asked is parked.
//
// Workers are started on demand, up to the configured bound
// (WEFT_WORKERS, or weft_set_workers while the program runs): a program that
// never offloads runs no extra kernel thread. Lowering the bound retires
// the workers above it as they finish their job or idle.
// A job lives on the parked thread's stack; the worker runs it, then wakes
// the thread like any cross-vproc waker (claim, make_ready through the home
// vproc's inbox), and never touches the job again after that.
#pragma once

#include <pthread.h>

#include <cerrno>
#include <cstddef>
#include <vector>

#include "core/park.hpp"

namespace weft::detail {

struct OffloadJob {
    void (*run)(OffloadJob *); // called on a worker
    Tcb *waiter = nullptr;     // run(): the parked thread the worker wakes
    // submit(): called on the worker after run instead of a wake; the job
    // is the callee's from then on (the worker never touches it again).
    void (*done)(OffloadJob *) = nullptr;
    OffloadJob *next = nullptr;
};

class OffloadPool {
public:
    explicit OffloadPool(int max_workers) : max_(max_workers) {}
    ~OffloadPool(); // joins the workers: call once no job can be queued
    OffloadPool(const OffloadPool &) = delete;
    OffloadPool &operator=(const OffloadPool &) = delete;

    // Run job->run(job) on a worker while the calling weft thread parks.
    // False if no worker could be started (the caller runs it inline).
    bool run(Vproc *&vp, OffloadJob *job, const void *site);
    // Queue job (with job->done set) for a worker and return at once: the
    // caller parks nothing, and counts the wait itself if its vproc must
    // not sleep past it (virtual threads, vt.cc). False if no worker could
    // be started.
    bool submit(Vproc *vp, OffloadJob *job);
    // The bound on workers, from now on (1..256). Returns the previous one.
    int set_max(int n);
    int max() const;
    int workers() const; // kernel threads running or idle now

private:
    static void *worker_main(void *p);
    void worker();
    void reap_retired(); // join workers that left after a lowered bound (mu_ not held)
    // Queue job, starting a worker if need be, and count it; `parks` (if
    // not null) is marked parked before the job can be taken, as its worker
    // may wake it at once. False: no worker could be started (nothing queued).
    bool enqueue(Vproc *vp, OffloadJob *job, Tcb *parks);

    int max_;                                      // (mu_)
    pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv_ = PTHREAD_COND_INITIALIZER;
    OffloadJob *head_ = nullptr, *tail_ = nullptr; // queued jobs, FIFO (mu_)
    int idle_ = 0;                                 // workers waiting for a job (mu_)
    int queued_ = 0;                               // jobs in the queue (mu_)
    bool stop_ = false;                            // (mu_)
    std::vector<pthread_t> threads_;               // (mu_)
    std::vector<pthread_t> retired_;               // left, not joined yet (mu_)
};

OffloadPool &offload_pool(Vproc *vp); // the runtime's pool

// Run fn() on a worker while the calling thread parks; the closure carries
// the results (errno included: it is the worker's). Inline when no worker
// can be started.
template <class F>
void offload_call(Vproc *&vp, F &fn, const void *site) {
    struct Job : OffloadJob {
        F *f;
    } job;
    job.f = &fn;
    job.run = [](OffloadJob *j) { (*static_cast<Job *>(j)->f)(); };
    if (!offload_pool(vp).run(vp, &job, site)) fn();
}

// A system call on a worker, in the POSIX convention: its return value, and
// the worker's errno carried back to the calling thread.
template <class Call>
auto offload_syscall(Vproc *&vp, const void *site, Call &&c) -> decltype(c()) {
    decltype(c()) r{};
    int err = 0;
    auto call = [&] {
        r = c();
        err = errno;
    };
    offload_call(vp, call, site);
    errno = err;
    return r;
}

} // namespace weft::detail
