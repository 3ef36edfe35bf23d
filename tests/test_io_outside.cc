// The I/O wrappers outside weft_main — before it, after it, and on a plain
// kernel thread while a runtime runs — are the plain system calls: they
// block the kernel thread, raise SIGPIPE, leave descriptors in the mode the
// program gave them. weft_io_backend is NULL there, the I/O limits EPERM,
// and weft_offload runs fn on the calling thread.
#include <sys/syscall.h>

#include <atomic>
#include <thread>

#include "io_support.hpp"

namespace {

using namespace wt;
using namespace wt::io;

pid_t tid() { return pid_t(syscall(SYS_gettid)); }

TEST(IoOutsideTest, NoBackendAndTheLimitsAreEperm) {
    EXPECT_EQ(nullptr, weft_io_backend());
    EXPECT_EQ(EPERM, weft_set_io_timeout_ns(kMs));
    EXPECT_EQ(EPERM, weft_set_io_deadline_ns(weft_now_ns() + kMs));
    EXPECT_EQ(EPERM, weft_set_io_timeout_ns(0));
}

TEST(IoOutsideTest, OffloadRunsFnOnTheCallingThread) {
    struct A {
        pid_t ran_on;
    } a{0};
    errno = 0;
    void *r = weft_offload(
        [](void *p) -> void * {
            static_cast<A *>(p)->ran_on = tid();
            errno = ERANGE;
            return ptr(5);
        },
        &a);
    int e = errno;
    EXPECT_EQ(5u, num(r));
    EXPECT_EQ(tid(), a.ran_on);
    EXPECT_EQ(ERANGE, e);
}

// A TCP conversation entirely outside weft_main, with the plain results.
TEST(IoOutsideTest, SocketCallsAreThePlainCalls) {
    Watchdog dog(60);
    uint16_t port = 0;
    int l = tcp_listen(&port);
    ASSERT_GE(l, 0) << strerror(errno);
    int c = tcp_connect(port);
    ASSERT_GE(c, 0) << strerror(errno);
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    int s = weft_accept4(l, (sockaddr *)&peer, &len, SOCK_CLOEXEC);
    ASSERT_GE(s, 0) << strerror(errno);
    EXPECT_EQ(htonl(INADDR_LOOPBACK), peer.sin_addr.s_addr);
    EXPECT_NE(0, fcntl(s, F_GETFD) & FD_CLOEXEC);
    EXPECT_EQ(5, weft_write(c, "hello", 5));
    char a[2], b[3];
    iovec iov[2] = {{a, 2}, {b, 3}};
    EXPECT_EQ(5, read_exact(s, a, 2) + read_exact(s, b, 3));
    EXPECT_EQ("hello", std::string(a, 2) + std::string(b, 3));
    iovec out[2] = {{const_cast<char *>("wo"), 2}, {const_cast<char *>("rld"), 3}};
    EXPECT_EQ(5, weft_writev(s, out, 2));
    EXPECT_EQ(5, weft_recv(c, a, 2, MSG_WAITALL) + weft_recv(c, b, 3, MSG_WAITALL));
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    EXPECT_EQ(5, weft_sendmsg(c, &m, 0));
    EXPECT_EQ(5, weft_recvmsg(s, &m, MSG_WAITALL));
    char z;
    EXPECT_EQ(-1, weft_recv(c, &z, 1, MSG_DONTWAIT));
    EXPECT_EQ(EAGAIN, errno);
    EXPECT_EQ(0, weft_shutdown(s, SHUT_WR));
    EXPECT_EQ(0, weft_read(c, &z, 1));
    struct stat st;
    EXPECT_EQ(0, weft_fstat(c, &st));
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    pollfd pf{c, POLLOUT, 0};
    EXPECT_EQ(1, weft_poll(&pf, 1, 0));
    for (int fd : {l, c, s}) EXPECT_EQ(0, weft_close(fd));
    EXPECT_EQ(-1, weft_close(s));
    EXPECT_EQ(EBADF, errno);
    EXPECT_EQ(-1, weft_read(unused_fd(), &z, 1));
    EXPECT_EQ(EBADF, errno);
}

// Outside, a read of an empty blocking pipe blocks the kernel thread until
// another thread writes (it must not return EAGAIN).
TEST(IoOutsideTest, AReadBlocksTheKernelThreadUntilDataComes) {
    Watchdog dog(60);
    int p[2];
    ASSERT_EQ(0, pipe(p));
    std::thread w([&] {
        usleep(20000);
        EXPECT_EQ(1, write(p[1], "w", 1));
    });
    char c = 0;
    ssize_t r = weft_read(p[0], &c, 1);
    int e = errno;
    w.join();
    EXPECT_EQ(1, r) << strerror(e);
    EXPECT_EQ('w', c);
    close(p[0]);
    close(p[1]);
}

TEST(IoOutsideTest, PollIsThePlainPoll) {
    int p[2];
    ASSERT_EQ(0, pipe(p));
    pollfd pf[2] = {{p[0], POLLIN, 0}, {unused_fd(), POLLIN, 0}};
    EXPECT_EQ(1, weft_poll(pf, 2, 20));
    EXPECT_EQ(0, pf[0].revents);
    EXPECT_EQ(POLLNVAL, pf[1].revents);
    pollfd one{p[0], POLLIN, 0};
    uint64_t t0 = weft_now_ns();
    EXPECT_EQ(0, weft_poll(&one, 1, 20));
    EXPECT_GE(weft_now_ns() - t0, 20 * kMs);
    close(p[0]);
    close(p[1]);
}

// Outside, a write to a broken pipe raises SIGPIPE like write(2) does
// (blocked here, so it stays pending and is taken back).
TEST(IoOutsideTest, ABrokenPipeRaisesSigpipeLikeThePlainWrite) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    ASSERT_EQ(0, pthread_sigmask(SIG_BLOCK, &pipe_set, &old));
    int p[2];
    ASSERT_EQ(0, pipe(p));
    close(p[0]);
    ssize_t r = weft_write(p[1], "x", 1);
    int e = errno;
    sigset_t pending;
    sigpending(&pending);
    bool raised = sigismember(&pending, SIGPIPE);
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    close(p[1]);
    EXPECT_EQ(-1, r);
    EXPECT_EQ(EPIPE, e);
    EXPECT_TRUE(raised) << "outside weft_main the plain write raises SIGPIPE";
}

TEST(IoOutsideTest, FilesAndSendfileAreThePlainCalls) {
    Watchdog dog(60);
    const size_t size = 100000;
    TempFile f(size, 60);
    ASSERT_GE(f.fd(), 0);
    int fd = weft_open(f.path().c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> in(size);
    EXPECT_EQ(ssize_t(size), weft_pread(fd, in.data(), size, 0));
    EXPECT_EQ(-1, Pattern(60).mismatch(in.data(), 0, size));
    struct stat st;
    EXPECT_EQ(0, weft_fstat(fd, &st));
    EXPECT_EQ(off_t(size), st.st_size);
    EXPECT_EQ(-1, weft_pwrite(fd, "x", 1, 0)); // opened read-only
    EXPECT_EQ(EBADF, errno);
    for (int mode : {WEFT_SENDFILE_DEFAULT, WEFT_SENDFILE_NONBLOCKING, WEFT_SENDFILE_BLOCKING, WEFT_SENDFILE_SPLICE}) {
        int s[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, s));
        int big = 1 << 20;
        setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        setsockopt(s[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        off_t off = 1000;
        std::vector<uint8_t> got(5000);
        std::thread rx([&] { EXPECT_EQ(5000, read_exact(s[1], got.data(), got.size())); });
        ssize_t r = mode == WEFT_SENDFILE_DEFAULT ? weft_sendfile(s[0], fd, &off, 5000)
                                                  : weft_sendfile_mode(s[0], fd, &off, 5000, mode);
        rx.join();
        EXPECT_EQ(5000, r) << "mode " << mode;
        EXPECT_EQ(6000, off) << "mode " << mode;
        EXPECT_EQ(-1, Pattern(60).mismatch(got.data(), 1000, got.size())) << "mode " << mode;
        close(s[0]);
        close(s[1]);
    }
    EXPECT_EQ(0, weft_close(fd));
}

// A descriptor weft parked on inside the runtime is left blocking: after
// weft_main returns, the plain read on it blocks until data comes.
TEST(IoOutsideTest, DescriptorsUsedInsideKeepTheirBlockingModeAfterTheRuntime) {
    Watchdog dog(60);
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    ASSERT_EQ(0, run(1, [&] {
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [&] {
            char c;
            EXPECT_EQ(1, weft_read(sv[0], &c, 1));
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(1, weft_write(sv[1], "i", 1));
        join(t);
    }));
    EXPECT_EQ(0, fcntl(sv[0], F_GETFL) & O_NONBLOCK) << "the descriptor was left O_NONBLOCK";
    std::thread w([&] {
        usleep(20000);
        EXPECT_EQ(1, write(sv[1], "o", 1));
    });
    char c = 0;
    ssize_t r = weft_read(sv[0], &c, 1);
    int e = errno;
    w.join();
    EXPECT_EQ(1, r) << strerror(e);
    EXPECT_EQ('o', c);
    close(sv[0]);
    close(sv[1]);
}

// weft.h: "Descriptors stay in the mode the program gave them". A blocking
// listener weft accepted on, a blocking socket weft connected and one weft
// sent a file on are still blocking once the runtime has ended (a child
// process or a plain library may use them next).
TEST(IoOutsideTest, AcceptConnectAndSendfileLeaveTheDescriptorsBlocking) {
    Watchdog dog(60);
    TempFile f(4096, 61);
    ASSERT_GE(f.fd(), 0);
    int l = -1, c = -1, s = -1;
    ASSERT_EQ(0, run(1, [&] {
        uint16_t port = 0;
        l = tcp_listen(&port);
        ASSERT_GE(l, 0);
        c = tcp_connect(port);
        ASSERT_GE(c, 0);
        s = weft_accept(l, nullptr, nullptr);
        ASSERT_GE(s, 0);
        off_t off = 0;
        EXPECT_EQ(4096, weft_sendfile_mode(s, f.fd(), &off, 4096, WEFT_SENDFILE_NONBLOCKING));
        std::vector<char> buf(4096);
        EXPECT_EQ(4096, read_exact(c, buf.data(), buf.size()));
        for (int fd : {l, c, s}) EXPECT_EQ(0, weft_fcntl(fd, F_GETFL) & O_NONBLOCK) << "as the program sees it";
    }));
    EXPECT_EQ(0, fcntl(l, F_GETFL) & O_NONBLOCK) << "listener after weft_accept";
    EXPECT_EQ(0, fcntl(c, F_GETFL) & O_NONBLOCK) << "socket after weft_connect";
    EXPECT_EQ(0, fcntl(s, F_GETFL) & O_NONBLOCK) << "socket after weft_sendfile";
    for (int fd : {l, c, s}) close(fd);
}

// docs/io.md: a pipe is made non-blocking when weft first uses it (plain
// read/write are cheaper than RWF_NOWAIT), hidden from weft_fcntl and
// cleared when the runtime ends; a pipe on descriptors 0-2 (often shared
// with other processes) is never touched.
TEST(IoOutsideTest, APipeIsNonBlockingOnlyWhileWeftUsesItAndStdioPipesNever) {
    Watchdog dog(60);
    int p[2];
    ASSERT_EQ(0, pipe(p));
    int saved_stdin = dup(0);
    ASSERT_GE(saved_stdin, 0);
    int q[2];
    ASSERT_EQ(0, pipe(q));
    ASSERT_EQ(0, dup2(q[0], 0)) << "a pipe as standard input";
    close(q[0]);
    int kernel_sees_p = -1, kernel_sees_stdin = -1, program_sees_p = -1;
    ASSERT_EQ(0, run(1, [&] {
        char c = 0;
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [&] { // parks in weft_read on each pipe
            EXPECT_EQ(1, weft_read(p[0], &c, 1));
            EXPECT_EQ(1, weft_read(0, &c, 1));
            return nullptr;
        }));
        EXPECT_EQ(0, weft_sleep_ns(kMs));
        EXPECT_EQ(1, weft_write(p[1], "p", 1));
        EXPECT_EQ(0, weft_sleep_ns(kMs));
        EXPECT_EQ(1, weft_write(q[1], "q", 1));
        join(t);
        EXPECT_EQ('q', c);
        kernel_sees_p = fcntl(p[0], F_GETFL) & O_NONBLOCK;
        kernel_sees_stdin = fcntl(0, F_GETFL) & O_NONBLOCK;
        program_sees_p = weft_fcntl(p[0], F_GETFL) & O_NONBLOCK;
    }));
    EXPECT_NE(0, kernel_sees_p) << "weft made the pipe non-blocking while it ran";
    EXPECT_EQ(0, program_sees_p) << "weft_fcntl hides it";
    EXPECT_EQ(0, kernel_sees_stdin) << "a pipe on descriptor 0 keeps its mode";
    EXPECT_EQ(0, fcntl(p[0], F_GETFL) & O_NONBLOCK) << "cleared when the runtime ended";
    EXPECT_EQ(0, fcntl(0, F_GETFL) & O_NONBLOCK);
    dup2(saved_stdin, 0);
    for (int fd : {saved_stdin, q[1], p[0], p[1]}) close(fd);
}

// A plain kernel thread calling the wrappers while a runtime runs is outside
// weft_main too: its read blocks its own kernel thread, and a weft thread's
// write wakes it.
TEST(IoOutsideTest, AForeignKernelThreadUsesThePlainCallsWhileTheRuntimeRuns) {
    Watchdog dog(60);
    int p[2];
    ASSERT_EQ(0, pipe(p));
    std::atomic<int> stage{0};
    ssize_t r = 0;
    char c = 0;
    const char *backend_there = "x";
    int limit_rc = 0;
    std::thread foreign;
    ASSERT_EQ(0, run(1, [&] {
        foreign = std::thread([&] {
            backend_there = weft_io_backend();
            limit_rc = weft_set_io_timeout_ns(kMs);
            stage.store(1);
            r = weft_read(p[0], &c, 1);
            stage.store(2);
        });
        ASSERT_TRUE(wait_until([&] { return stage.load() >= 1; }));
        EXPECT_EQ(1, weft_write(p[1], "f", 1));
        EXPECT_TRUE(wait_until([&] { return stage.load() == 2; }));
    }));
    foreign.join();
    EXPECT_EQ(nullptr, backend_there);
    EXPECT_EQ(EPERM, limit_rc);
    EXPECT_EQ(1, r);
    EXPECT_EQ('f', c);
    close(p[0]);
    close(p[1]);
}

} // namespace
