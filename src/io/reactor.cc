// Backend selection and fallback, and the routing of requests from other
// vprocs to a reactor's owner.
#include "io/reactor.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/valgrind.hpp"
#include "core/vproc.hpp"

namespace weft::detail {

const char *io_backend_name(IoBackend b) {
    switch (b) {
    case IoBackend::Uring: return "uring";
    case IoBackend::Epoll: return "epoll";
    case IoBackend::Poll: return "poll";
    }
    return "?";
}

bool parse_io_backend(const char *s, IoBackend *out) {
    for (IoBackend b : {IoBackend::Uring, IoBackend::Epoll, IoBackend::Poll})
        if (std::strcmp(s, io_backend_name(b)) == 0) {
            *out = b;
            return true;
        }
    if (std::strcmp(s, "io_uring") == 0) {
        *out = IoBackend::Uring;
        return true;
    }
    return false;
}

std::unique_ptr<Reactor> make_reactor(Vproc *vp, IoBackend wanted) {
    if (wanted == IoBackend::Poll) return make_poll_reactor(vp);
    if (wanted == IoBackend::Uring && WEFT_ON_VALGRIND()) { // see core/valgrind.hpp
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            std::fprintf(stderr, "weft: under valgrind, a wait in io_uring_enter is never woken; using epoll\n");
        wanted = IoBackend::Epoll;
    }
    if (wanted == IoBackend::Uring) {
        if (auto r = make_uring_reactor(vp)) return r;
        static std::atomic<bool> said{false};
        int e = errno;
        if (!said.exchange(true))
            std::fprintf(stderr, "weft: io_uring is not available here (%s); using epoll\n", std::strerror(e));
    }
    return make_epoll_reactor(vp);
}

int Reactor::arm_from(Vproc *caller, int fd, FdState *s, uint32_t events) {
    if (caller == vp) {
        apply_remote();
        return arm(fd, s, events);
    }
    if (arm_is_thread_safe()) return arm(fd, s, events);
    {
        std::lock_guard<std::mutex> g(remote_mu_);
        remote_.push_back({fd, s, events, nullptr});
        remote_pending_.store(true, std::memory_order_release);
    }
    wake();
    return 0;
}

void Reactor::disarm_from(Vproc *&caller, int fd, FdState *s) {
    if (caller == vp || arm_is_thread_safe()) {
        if (caller == vp) apply_remote();
        disarm(fd, s);
        return;
    }
    std::atomic<bool> done{false};
    {
        std::lock_guard<std::mutex> g(remote_mu_);
        remote_.push_back({fd, s, 0, &done});
        remote_pending_.store(true, std::memory_order_release);
    }
    wake();
    while (!done.load(std::memory_order_acquire)) { // the owner is awake now: a few µs
        // Two vprocs may each wait for the other's disarm: keep applying ours.
        if (caller && caller->reactor) caller->reactor->apply_remote();
        if (caller && caller->current && caller->current != &caller->loop) {
            weft_yield();
            caller = tls_vproc; // (the yield may have moved us: work stealing)
        } else {
            sched_yield();
        }
    }
}

void Reactor::apply_remote_slow() {
    std::vector<RemoteRequest> todo;
    {
        std::lock_guard<std::mutex> g(remote_mu_);
        todo.swap(remote_);
        remote_pending_.store(false, std::memory_order_relaxed);
    }
    for (const RemoteRequest &r : todo) {
        if (r.events) {
            arm(r.fd, r.s, r.events);
        } else {
            disarm(r.fd, r.s);
            r.done->store(true, std::memory_order_release);
        }
    }
}

} // namespace weft::detail
