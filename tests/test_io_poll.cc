// weft_poll: poll(2) semantics on every backend — timeouts, POLLIN/POLLOUT,
// POLLHUP, POLLNVAL for a bad descriptor, negative descriptors ignored, the
// thread's I/O timeout ending an infinite poll with 0, and wake-ups of
// parked pollers (several on one descriptor; one among many descriptors).
#include <algorithm>
#include <atomic>

#include "io_support.hpp"

namespace {

using namespace wt;
using namespace wt::io;

class PollTest : public IoTest {};
WEFT_ON_BACKENDS(PollTest);

class PollWakeTest : public IoTest {};
WEFT_ON_BACKENDS_AND_VPROCS(PollWakeTest);

TEST_P(PollTest, ZeroTimeoutReturnsAtOnceWhenNothingIsReady) {
    int n = -1;
    short revents = -1;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        pollfd pf{fds[0], POLLIN, 0};
        uint64_t t0 = weft_now_ns();
        n = weft_poll(&pf, 1, 0);
        took = weft_now_ns() - t0;
        revents = pf.revents;
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(0, n);
    EXPECT_EQ(0, revents);
    EXPECT_LT(took, 5 * kSec);
}

TEST_P(PollTest, TimeoutExpiresWithZeroAfterAtLeastTheTimeout) {
    int n = -1;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        pollfd pf{p[0], POLLIN, 0};
        uint64_t t0 = weft_now_ns();
        n = weft_poll(&pf, 1, 50);
        took = weft_now_ns() - t0;
        weft_close(p[0]);
        weft_close(p[1]);
    }));
    EXPECT_EQ(0, n);
    EXPECT_GE(took, 50 * kMs);
}

TEST_P(PollTest, NoDescriptorsIsATimedWait) {
    int n = -1;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        uint64_t t0 = weft_now_ns();
        n = weft_poll(nullptr, 0, 30);
        took = weft_now_ns() - t0;
    }));
    EXPECT_EQ(0, n);
    EXPECT_GE(took, 30 * kMs);
}

TEST_P(PollTest, AFreshSocketIsWritableAndNotReadable) {
    int n = -1;
    short in_ev = -1, out_ev = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        pollfd pf[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLOUT, 0}};
        n = weft_poll(pf, 2, 5000);
        in_ev = pf[0].revents;
        out_ev = pf[1].revents;
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(1, n);
    EXPECT_EQ(0, in_ev);
    EXPECT_TRUE(out_ev & POLLOUT);
}

// A bad descriptor is reported at once as POLLNVAL even with an infinite
// timeout; a negative one is ignored (revents 0).
TEST_P(PollTest, BadDescriptorIsPollnvalAndNegativeIsIgnored) {
    int n = -1;
    short bad_ev = 0, neg_ev = -1, ok_ev = -1;
    ASSERT_EQ(0, run([&] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        pollfd pf[3] = {{unused_fd(), POLLIN, 0}, {-5, POLLIN, 0}, {p[0], POLLIN, 0}};
        n = weft_poll(pf, 3, -1);
        bad_ev = pf[0].revents;
        neg_ev = pf[1].revents;
        ok_ev = pf[2].revents;
        weft_close(p[0]);
        weft_close(p[1]);
    }));
    EXPECT_EQ(1, n);
    EXPECT_EQ(POLLNVAL, bad_ev);
    EXPECT_EQ(0, neg_ev);
    EXPECT_EQ(0, ok_ev);
}

// The thread's I/O timeout ends an infinite poll, which returns 0 as poll(2)
// does when its own timeout expires.
TEST_P(PollTest, TheThreadsIoTimeoutEndsAnInfinitePollWithZero) {
    int n = -1;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        ASSERT_EQ(0, weft_set_io_timeout_ns(40 * kMs));
        pollfd pf{p[0], POLLIN, 0};
        uint64_t t0 = weft_now_ns();
        n = weft_poll(&pf, 1, -1);
        took = weft_now_ns() - t0;
        EXPECT_EQ(0, weft_set_io_timeout_ns(0));
        weft_close(p[0]);
        weft_close(p[1]);
    }));
    EXPECT_EQ(0, n);
    EXPECT_GE(took, 40 * kMs);
}

// The pipe's writer closes while a poller is parked: POLLHUP.
TEST_P(PollTest, ParkedPollerSeesPollhupWhenTheWriterCloses) {
    int n = -1;
    short revents = 0;
    ASSERT_EQ(0, run([&] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [&] {
            pollfd pf{p[0], POLLIN, 0};
            n = weft_poll(&pf, 1, -1);
            revents = pf.revents;
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(0, weft_close(p[1]));
        join(t);
        weft_close(p[0]);
    }));
    EXPECT_EQ(1, n);
    EXPECT_TRUE(revents & POLLHUP) << revents;
}

// A poller parked on another vproc wakes with POLLIN when data arrives;
// descriptors that are not ready stay at revents 0.
TEST_P(PollWakeTest, ParkedPollWakesWithPollinOnlyForTheReadyDescriptor) {
    int n = -1;
    short ev[3] = {-1, -1, -1};
    ASSERT_EQ(0, run([&] {
        int a[2], b[2], c[2];
        ASSERT_TRUE(tcp_pair(a));
        ASSERT_TRUE(tcp_pair(b));
        ASSERT_EQ(0, pipe(c));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            pollfd pf[3] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}, {c[0], POLLIN, 0}};
            n = weft_poll(pf, 3, 20000);
            for (int i = 0; i < 3; ++i) ev[i] = pf[i].revents;
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(1, weft_write(b[1], "b", 1));
        join(t);
        for (int fd : {a[0], a[1], b[0], b[1], c[0], c[1]}) weft_close(fd);
    }));
    EXPECT_EQ(1, n);
    EXPECT_EQ(0, ev[0]);
    EXPECT_EQ(POLLIN, ev[1] & (POLLIN | POLLERR | POLLNVAL));
    EXPECT_EQ(0, ev[2]);
}

// Ten pollers parked on the same descriptor (spread over the vprocs) all
// wake for one write: readiness is level-triggered, nobody consumes it.
TEST_P(PollWakeTest, EveryPollerParkedOnOneDescriptorWakes) {
    const int k = 10;
    std::atomic<int> woke{0};
    ASSERT_EQ(0, run([&] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        std::vector<weft_thread_t> ts(k);
        for (int i = 0; i < k; ++i)
            ASSERT_EQ(0, spawn_on(&ts[size_t(i)], home(i), [&] {
                pollfd pf{p[0], POLLIN, 0};
                if (weft_poll(&pf, 1, 20000) == 1 && (pf.revents & POLLIN)) woke.fetch_add(1);
                return nullptr;
            }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + k));
        EXPECT_EQ(1, weft_write(p[1], "x", 1));
        for (auto &t : ts) join(t);
        weft_close(p[0]);
        weft_close(p[1]);
    }));
    EXPECT_EQ(k, woke.load());
}

// One hundred pipes polled at once; the one written is the only one reported.
TEST_P(PollWakeTest, OneReadyDescriptorAmongAHundred) {
    const int k = 100, hot = 37;
    int n = -1, reported = 0;
    short hot_ev = 0;
    ASSERT_EQ(0, run([&] {
        std::vector<int> r(k), w(k);
        for (int i = 0; i < k; ++i) {
            int p[2];
            ASSERT_EQ(0, pipe(p));
            r[size_t(i)] = p[0];
            w[size_t(i)] = p[1];
        }
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            std::vector<pollfd> pf(k);
            for (int i = 0; i < k; ++i) pf[size_t(i)] = {r[size_t(i)], POLLIN, 0};
            n = weft_poll(pf.data(), nfds_t(k), 20000);
            for (auto &x : pf) reported += x.revents != 0;
            hot_ev = pf[hot].revents;
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(1, weft_write(w[hot], "h", 1));
        join(t);
        for (int i = 0; i < k; ++i) {
            weft_close(r[size_t(i)]);
            weft_close(w[size_t(i)]);
        }
    }));
    EXPECT_EQ(1, n);
    EXPECT_EQ(1, reported);
    EXPECT_TRUE(hot_ev & POLLIN);
}

// Readable-at-EOF: the peer's shutdown makes a parked POLLIN poll return.
TEST_P(PollWakeTest, PeerShutdownMakesASocketReadable) {
    int n = -1;
    short revents = 0;
    ssize_t r = -2;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            pollfd pf{fds[0], POLLIN, 0};
            n = weft_poll(&pf, 1, 20000);
            revents = pf.revents;
            char c;
            r = weft_read(fds[0], &c, 1);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(0, weft_shutdown(fds[1], SHUT_WR));
        join(t);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(1, n);
    EXPECT_TRUE(revents & POLLIN);
    EXPECT_EQ(0, r);
}

} // namespace

namespace {

// weft_poll on several descriptors, one of them armed in another vproc's
// reactor, which delivers its events at any moment. An event delivered
// between weft_poll's look (a zero-timeout poll(2)) and the linking of its
// waiters would wake nobody, and the poll would sleep until its timeout (and
// then report the event, late); the multi-descriptor wait now re-checks the
// event counts as the one-descriptor wait does. This stress exercises the
// path 2,000 times, each write timed near the poll; the window is a fraction
// of a microsecond and this test did not hit it on the 2-CPU development VM
// without the fix either, so it guards the path rather than reproducing the
// race. A round that waits a whole timeout is a miss.
TEST_P(PollWakeTest, AnEventDeliveredByAnotherVprocAsThePollParksIsNotMissed) {
    if (vprocs() < 2) GTEST_SKIP() << "needs a second vproc to deliver the event";
    const int rounds = 2000;
    const int timeout_ms = 1000;
    int late = 0, wrong = 0;
    ASSERT_EQ(0, run([&] {
        int a[2], b[2];
        ASSERT_EQ(0, pipe(a));
        ASSERT_EQ(0, pipe(b));
        // Arm b's read end in the other vproc's reactor: its first parker is there.
        weft_thread_t armer;
        ASSERT_EQ(0, spawn_on(&armer, other(), [&] {
            pollfd pf{b[0], POLLIN, 0};
            EXPECT_EQ(0, weft_poll(&pf, 1, 1));
            return nullptr;
        }));
        join(armer);
        // The writer parks between rounds (a spinning weft thread would keep
        // its vproc's reactor from delivering anything).
        weft_sem_t go;
        ASSERT_EQ(0, weft_sem_init(&go, 0));
        std::atomic<bool> stop{false};
        weft_thread_t writer;
        ASSERT_EQ(0, spawn_on(&writer, other(), [&] {
            for (int round = 1; round <= rounds; ++round) {
                weft_sem_wait(&go);
                if (stop.load()) break;
                // land anywhere in the first ~2 us of the poll: its look and its park
                uint64_t until = weft_now_ns() + uint64_t(round * 7919 % 2000);
                while (weft_now_ns() < until) {}
                EXPECT_EQ(1, weft_write(b[1], "x", 1));
            }
            return nullptr;
        }));
        for (int round = 1; round <= rounds; ++round) {
            pollfd pf[2] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}};
            weft_sem_post(&go);
            uint64_t t0 = weft_now_ns();
            int n = weft_poll(pf, 2, timeout_ms);
            if (weft_now_ns() - t0 > uint64_t(timeout_ms) * kMs / 2) ++late;
            if (n != 1 || !(pf[1].revents & POLLIN)) ++wrong;
            char c;
            if (n == 1) {
                EXPECT_EQ(1, weft_read(b[0], &c, 1));
            }
            if (late > 3 || wrong) break; // enough to fail; don't sit through the rest
        }
        stop.store(true);
        weft_sem_post(&go);
        join(writer);
        weft_sem_destroy(&go);
        for (int fd : {a[0], a[1], b[0], b[1]}) weft_close(fd);
    }));
    EXPECT_EQ(0, late) << "polls that slept through an event until their timeout";
    EXPECT_EQ(0, wrong);
}

} // namespace

// ---- the epoll backend where epoll_pwait2 is refused ----------------------

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

namespace {
// In a child: epoll_pwait2 fails with ENOSYS (as before Linux 5.11, under a
// seccomp policy, or under Valgrind), then a timed sleep and a read that
// parks in the epoll reactor must both come back. Exit 0 if they did.
[[noreturn]] void epoll_without_pwait2_child() {
#ifdef __NR_epoll_pwait2
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_epoll_pwait2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        _exit(77);
#endif
    weft_config c;
    weft_config_init(&c);
    c.io = "epoll";
    int rc = weft_main_config(&c, [](void *) -> int {
        uint64_t t0 = weft_now_ns();
        weft_sleep_ns(20 * 1000 * 1000); // the idle wait with a timeout
        if (weft_now_ns() - t0 < 20 * 1000 * 1000) return 2;
        int p[2];
        if (pipe(p) != 0) return 3;
        weft_thread_t w;
        weft_thread_create(&w, nullptr, [](void *arg) -> void * {
            weft_sleep_ns(10 * 1000 * 1000);
            char x = 'x';
            return weft_write(*static_cast<int *>(arg), &x, 1) == 1 ? nullptr : arg;
        }, &p[1]);
        char got = 0;
        if (weft_read(p[0], &got, 1) != 1 || got != 'x') return 4; // parks in the reactor until the write
        void *r = nullptr;
        weft_thread_join(w, &r);
        return r == nullptr ? 0 : 5;
    }, nullptr);
    _exit(rc);
}
} // namespace

TEST(EpollFallback, SleepsAndReadsWorkWhereEpollPwait2IsRefused) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) epoll_without_pwait2_child();
    int status = 0;
    for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(10 * 1000);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL() << "the child hung (10 s): the epoll reactor spun or missed the event";
    }
    ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
    if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "this kernel refused the seccomp filter";
    EXPECT_EQ(0, WEXITSTATUS(status));
}
