// weft.hpp — C++20 RAII wrappers over the C API in weft.h.
//
//   weft::run([] { ... });                       // weft_main with a lambda
//   weft::thread t([&] { ... }, {.name = "io"}); // joins in its destructor
//   weft::mutex m; weft::condition_variable cv;  // work with std::unique_lock
//
// Errors: constructors and lock() throw std::system_error (as the std::
// equivalents do); try_* return bool. An exception escaping a weft::thread's
// function aborts the program naming the thread, as std::thread terminates.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "weft/weft.h"

namespace weft {

namespace detail {
[[noreturn]] inline void throw_errno(int e, const char *what) {
    throw std::system_error(e, std::generic_category(), what);
}
inline void check(int e, const char *what) {
    if (e) throw_errno(e, what);
}
// now + d as an absolute weft_now_ns() deadline, saturating: a duration too
// long to count in nanoseconds (hours::max()) means "never".
template <class Rep, class Period>
uint64_t deadline_after(const std::chrono::duration<Rep, Period> &d) {
    const uint64_t now = weft_now_ns();
    const long double ns = std::chrono::duration<long double, std::nano>(d).count();
    if (!(ns > 0)) return now;
    if (ns >= static_cast<long double>(UINT64_MAX - now)) return UINT64_MAX;
    return now + static_cast<uint64_t>(ns);
}
} // namespace detail

// Options for weft::run; unset fields fall back to the environment / defaults.
struct config {
    int vprocs = 0;
    int pin = 0; // 1 on, -1 off, 0: WEFT_PIN decides
    std::size_t stack_size = 0;
    const char *policy = nullptr;
    int idle_spin_us = 0; // -1 never spin, 0: WEFT_IDLE_SPIN_US or 50
};

// Run f as weft's main thread; returns f's int result (or 0 for void f) once
// every weft thread has finished. An exception escaping f is rethrown here
// (after the other threads finished). Throws std::system_error if weft cannot
// start.
template <class F>
int run(const config &cfg, F &&f) {
    using Fn = std::decay_t<F>;
    struct Boxed {
        Fn fn;
        bool started = false;
        std::exception_ptr error;
    } box{Fn(std::forward<F>(f))};
    weft_config c;
    weft_config_init(&c);
    c.vprocs = cfg.vprocs;
    c.pin = cfg.pin;
    c.stack_size = cfg.stack_size;
    c.policy = cfg.policy;
    c.idle_spin_us = cfg.idle_spin_us;
    int r = weft_main_config(
        &c,
        [](void *p) -> int {
            Boxed &b = *static_cast<Boxed *>(p);
            b.started = true;
            try {
                if constexpr (std::is_void_v<std::invoke_result_t<Fn &>>) {
                    b.fn();
                    return 0;
                } else {
                    return static_cast<int>(b.fn());
                }
            } catch (...) {
                b.error = std::current_exception();
                return -1;
            }
        },
        &box);
    if (!box.started) detail::throw_errno(errno, "weft::run");
    if (box.error) std::rethrow_exception(box.error);
    return r;
}
template <class F>
int run(F &&f) {
    return run(config{}, std::forward<F>(f));
}

struct thread_options {
    std::size_t stack_size = 0;
    const char *name = nullptr;
    int home_vproc = -1;
};

// A joinable weft thread running a callable. Like std::jthread, it joins in
// its destructor if still joinable.
class thread {
public:
    thread() noexcept = default;
    template <class F>
    explicit thread(F &&f, const thread_options &opt = {}) {
        using Fn = std::decay_t<F>;
        auto box = std::make_unique<Fn>(std::forward<F>(f));
        weft_thread_attr_t a;
        weft_thread_attr_init(&a);
        a.stack_size = opt.stack_size;
        a.name = opt.name;
        a.home_vproc = opt.home_vproc;
        detail::check(weft_thread_create(
                          &t_, &a,
                          [](void *p) -> void * {
                              std::unique_ptr<Fn> body(static_cast<Fn *>(p));
                              (*body)();
                              return nullptr;
                          },
                          box.get()),
                      "weft_thread_create");
        box.release(); // owned by the thread now
        joinable_ = true;
    }
    thread(thread &&o) noexcept : t_(o.t_), joinable_(std::exchange(o.joinable_, false)) {}
    thread &operator=(thread &&o) noexcept {
        if (this != &o) {
            if (joinable_) join();
            t_ = o.t_;
            joinable_ = std::exchange(o.joinable_, false);
        }
        return *this;
    }
    thread(const thread &) = delete;
    thread &operator=(const thread &) = delete;
    ~thread() {
        if (joinable_) weft_thread_join(t_, nullptr);
    }

    bool joinable() const noexcept { return joinable_; }
    void join() {
        if (!joinable_) detail::throw_errno(EINVAL, "weft::thread::join");
        joinable_ = false;
        detail::check(weft_thread_join(t_, nullptr), "weft_thread_join");
    }
    void detach() {
        if (!joinable_) detail::throw_errno(EINVAL, "weft::thread::detach");
        joinable_ = false;
        detail::check(weft_thread_detach(t_), "weft_thread_detach");
    }
    uint64_t id() const noexcept { return weft_thread_id(t_); }
    weft_thread_t native_handle() const noexcept { return t_; }

private:
    weft_thread_t t_{};
    bool joinable_ = false;
};

namespace this_thread {
inline void yield() noexcept { weft_yield(); }
template <class Rep, class Period>
void sleep_for(const std::chrono::duration<Rep, Period> &d) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    weft_sleep_ns(ns > 0 ? static_cast<uint64_t>(ns) : 0);
}
inline uint64_t id() noexcept { return weft_thread_id(weft_thread_self()); }
inline std::string name() {
    char buf[32];
    return weft_thread_getname(weft_thread_self(), buf, sizeof buf) == 0 ? std::string(buf) : std::string();
}
} // namespace this_thread

// Meets the Lockable requirements: works with std::lock_guard, std::unique_lock.
class mutex {
public:
    mutex() noexcept = default;
    explicit mutex(weft_mutex_kind kind) { detail::check(weft_mutex_init(&m_, kind), "weft_mutex_init"); }
    mutex(const mutex &) = delete;
    mutex &operator=(const mutex &) = delete;
    void lock() { detail::check(weft_mutex_lock(&m_), "weft_mutex_lock"); }
    bool try_lock() noexcept { return weft_mutex_trylock(&m_) == 0; }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d) {
        int e = weft_mutex_timedlock(&m_, detail::deadline_after(d));
        if (e == ETIMEDOUT) return false;
        detail::check(e, "weft_mutex_timedlock");
        return true;
    }
    void unlock() { detail::check(weft_mutex_unlock(&m_), "weft_mutex_unlock"); }
    weft_mutex_t *native_handle() noexcept { return &m_; }

private:
    weft_mutex_t m_ = WEFT_MUTEX_INITIALIZER;
};

enum class cv_status { no_timeout, timeout };

class condition_variable {
public:
    condition_variable() noexcept = default;
    condition_variable(const condition_variable &) = delete;
    condition_variable &operator=(const condition_variable &) = delete;
    void notify_one() noexcept { weft_cond_signal(&c_); }
    void notify_all() noexcept { weft_cond_broadcast(&c_); }
    void wait(std::unique_lock<mutex> &lk) {
        detail::check(weft_cond_wait(&c_, lk.mutex()->native_handle()), "weft_cond_wait");
    }
    template <class Pred>
    void wait(std::unique_lock<mutex> &lk, Pred pred) {
        while (!pred()) wait(lk);
    }
    template <class Rep, class Period>
    cv_status wait_for(std::unique_lock<mutex> &lk, const std::chrono::duration<Rep, Period> &d) {
        int e = weft_cond_timedwait(&c_, lk.mutex()->native_handle(),
                                    detail::deadline_after(d));
        if (e == ETIMEDOUT) return cv_status::timeout;
        detail::check(e, "weft_cond_timedwait");
        return cv_status::no_timeout;
    }
    template <class Rep, class Period, class Pred>
    bool wait_for(std::unique_lock<mutex> &lk, const std::chrono::duration<Rep, Period> &d, Pred pred) {
        uint64_t deadline = detail::deadline_after(d);
        while (!pred()) {
            int e = weft_cond_timedwait(&c_, lk.mutex()->native_handle(), deadline);
            if (e == ETIMEDOUT) return pred();
            detail::check(e, "weft_cond_timedwait");
        }
        return true;
    }
    weft_cond_t *native_handle() noexcept { return &c_; }

private:
    weft_cond_t c_ = WEFT_COND_INITIALIZER;
};

// Meets SharedLockable: works with std::shared_lock and std::unique_lock.
class shared_mutex {
public:
    shared_mutex() noexcept = default;
    shared_mutex(const shared_mutex &) = delete;
    shared_mutex &operator=(const shared_mutex &) = delete;
    void lock() { detail::check(weft_rwlock_wrlock(&l_), "weft_rwlock_wrlock"); }
    bool try_lock() noexcept { return weft_rwlock_trywrlock(&l_) == 0; }
    void unlock() { detail::check(weft_rwlock_unlock(&l_), "weft_rwlock_unlock"); }
    void lock_shared() { detail::check(weft_rwlock_rdlock(&l_), "weft_rwlock_rdlock"); }
    bool try_lock_shared() noexcept { return weft_rwlock_tryrdlock(&l_) == 0; }
    void unlock_shared() { detail::check(weft_rwlock_unlock(&l_), "weft_rwlock_unlock"); }

private:
    weft_rwlock_t l_ = WEFT_RWLOCK_INITIALIZER;
};

class counting_semaphore {
public:
    explicit counting_semaphore(unsigned initial) { detail::check(weft_sem_init(&s_, initial), "weft_sem_init"); }
    counting_semaphore(const counting_semaphore &) = delete;
    counting_semaphore &operator=(const counting_semaphore &) = delete;
    void release() { detail::check(weft_sem_post(&s_), "weft_sem_post"); }
    void acquire() { detail::check(weft_sem_wait(&s_), "weft_sem_wait"); }
    bool try_acquire() noexcept { return weft_sem_trywait(&s_) == 0; }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d) {
        int e = weft_sem_timedwait(&s_, detail::deadline_after(d));
        if (e == ETIMEDOUT) return false;
        detail::check(e, "weft_sem_timedwait");
        return true;
    }

private:
    weft_sem_t s_;
};

class barrier {
public:
    explicit barrier(unsigned count) { detail::check(weft_barrier_init(&b_, count), "weft_barrier_init"); }
    barrier(const barrier &) = delete;
    barrier &operator=(const barrier &) = delete;
    // True for exactly one thread of each round.
    bool arrive_and_wait() {
        int r = weft_barrier_wait(&b_);
        if (r > 0) detail::throw_errno(r, "weft_barrier_wait");
        return r == WEFT_BARRIER_SERIAL_THREAD;
    }

private:
    weft_barrier_t b_;
};

// Thread-specific storage of a T* per weft thread; deletes it at thread exit.
template <class T>
class thread_specific_ptr {
public:
    thread_specific_ptr() {
        detail::check(weft_key_create(&k_, [](void *p) { delete static_cast<T *>(p); }), "weft_key_create");
    }
    // Deletes the calling thread's object; other threads' are deleted when
    // they end, if they end before this is destroyed (as with boost's).
    ~thread_specific_ptr() {
        delete get();
        weft_setspecific(k_, nullptr);
        weft_key_delete(k_);
    }
    thread_specific_ptr(const thread_specific_ptr &) = delete;
    thread_specific_ptr &operator=(const thread_specific_ptr &) = delete;
    T *get() const noexcept { return static_cast<T *>(weft_getspecific(k_)); }
    T *operator->() const noexcept { return get(); }
    T &operator*() const noexcept { return *get(); }
    void reset(T *p = nullptr) {
        T *old = get();
        if (old == p) return;
        detail::check(weft_setspecific(k_, p), "weft_setspecific");
        delete old;
    }

private:
    weft_key_t k_;
};

} // namespace weft
