// Tests that need another process: 10,000 connections from a client
// process (io_echo_client, plain epoll, no weft); a full descriptor table
// (RLIMIT_NOFILE lowered in a forked child) giving EMFILE from weft_socket
// and weft_accept while the runtime keeps working; the fallback to epoll
// when io_uring is forbidden (seccomp in a forked child); and the
// configuration of the I/O layer (io, workers, sendfile; fields and
// environment).
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <spawn.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstddef>
#include <optional>

#include "io_support.hpp"

extern char **environ;

namespace {

using namespace wt;
using namespace wt::io;

class CrossProcessTest : public IoTest {};
WEFT_ON_BACKENDS(CrossProcessTest);

class DescriptorLimitTest : public IoTest {};
WEFT_ON_BACKENDS(DescriptorLimitTest);

// 10,000 connections from another process, all open at the same time (the
// client connects them all before sending anything), each echoed by its
// own weft thread. The client checks every byte; the server counts.
TEST_P(CrossProcessTest, EchoesTenThousandConnectionsFromAnotherProcess) {
    const int n = int(scaled(10000, 2000));
    const int msg = 100;
    uint16_t port = 0;
    // created before the runtime: outside weft_main the wrappers are the plain calls
    int l = tcp_listen(&port, SOMAXCONN, SOCK_CLOEXEC);
    ASSERT_GE(l, 0) << strerror(errno);
    int out[2];
    ASSERT_EQ(0, pipe2(out, O_CLOEXEC));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    const std::string port_s = std::to_string(port), n_s = std::to_string(n), msg_s = std::to_string(msg);
    const char *argv[] = {WEFT_IO_ECHO_CLIENT, port_s.c_str(), n_s.c_str(), msg_s.c_str(), "60", nullptr};
    pid_t pid = 0;
    ASSERT_EQ(0, posix_spawn(&pid, WEFT_IO_ECHO_CLIENT, &fa, nullptr, const_cast<char **>(argv), environ));
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);

    std::atomic<int> accepted{0}, served{0};
    int status = -1, accept_errno = 0;
    long max_concurrent = 0;
    std::atomic<long> open_now{0};
    ASSERT_EQ(0, run([&] {
        weft_thread_t acceptor, waiter;
        ASSERT_EQ(0, spawn(&acceptor, [&] {
            while (accepted.load() < n) {
                int c = weft_accept(l, nullptr, nullptr);
                if (c < 0) {
                    accept_errno = errno;
                    break;
                }
                accepted.fetch_add(1);
                long now = open_now.fetch_add(1) + 1;
                max_concurrent = std::max(max_concurrent, now);
                EXPECT_EQ(0, spawn_detached(-1, [&, c] {
                    char buf[512];
                    ssize_t r;
                    while ((r = weft_read(c, buf, sizeof buf)) > 0)
                        if (write_all(c, buf, size_t(r)) != r) break;
                    weft_close(c);
                    open_now.fetch_sub(1);
                    served.fetch_add(1);
                    return nullptr;
                }));
            }
            return nullptr;
        }));
        // the client's exit, waited for in the offload pool; then the
        // listener closes, which also ends the acceptor if the client died early
        ASSERT_EQ(0, spawn(&waiter, [&] {
            struct W {
                pid_t pid;
                int status;
            } w{pid, -1};
            weft_offload(
                [](void *p) -> void * {
                    auto *w = static_cast<W *>(p);
                    while (waitpid(w->pid, &w->status, 0) < 0 && errno == EINTR) {
                    }
                    return nullptr;
                },
                &w);
            status = w.status;
            weft_close(l);
            return nullptr;
        }));
        join(waiter);
        join(acceptor);
        EXPECT_TRUE(wait_until([&] { return served.load() == accepted.load(); }));
    }));
    std::string output;
    char buf[4096];
    for (ssize_t r; (r = read(out[0], buf, sizeof buf)) > 0;) output.append(buf, size_t(r));
    close(out[0]);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "client status " << status << ": " << output;
    EXPECT_EQ("ok " + n_s + "\n", output);
    EXPECT_EQ(n, accepted.load()) << "accept ended with " << strerror(accept_errno);
    EXPECT_EQ(n, served.load());
    EXPECT_EQ(n, max_concurrent) << "the client keeps every connection open until all are connected";
}

int highest_open_fd() {
    int top = -1;
    for (int fd = 0; fd < 65536; ++fd)
        if (fcntl(fd, F_GETFD) >= 0) top = fd;
    return top;
}

// With the descriptor table full, weft_socket and weft_accept fail with
// EMFILE (the pending connection stays queued); after descriptors are
// freed, the queued connection is accepted and echoes, and threads, sleeps,
// pipes and the offload pool all still work. In a forked child, whose
// RLIMIT_NOFILE is lowered.
TEST_P(DescriptorLimitTest, AFullDescriptorTableGivesEmfileAndTheRuntimeRecovers) {
    weft_config cfg = config();
    ChildResult res = run_in_child([&] {
        int rc = run_cfg(cfg, [&] {
            uint16_t port = 0;
            int l = tcp_listen(&port);
            ASSERT_GE(l, 0);
            int pending = tcp_connect(port);
            ASSERT_GE(pending, 0);
            rlimit old{};
            ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
            rlimit low = old;
            low.rlim_cur = rlim_t(highest_open_fd() + 1 + 8);
            ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
            std::vector<int> fillers;
            int sock_errno = 0;
            for (int i = 0; i < 100000; ++i) {
                int fd = weft_socket(AF_INET, SOCK_STREAM, 0);
                if (fd < 0) {
                    sock_errno = errno;
                    break;
                }
                fillers.push_back(fd);
            }
            EXPECT_EQ(EMFILE, sock_errno) << strerror(sock_errno);
            EXPECT_GE(fillers.size(), 8u);
            int a = weft_accept(l, nullptr, nullptr);
            int accept_errno = errno;
            EXPECT_EQ(-1, a);
            EXPECT_EQ(EMFILE, accept_errno) << strerror(accept_errno);
            int p[2];
            EXPECT_EQ(-1, pipe(p));

            // free one descriptor: the queued connection is accepted and works
            ASSERT_FALSE(fillers.empty());
            EXPECT_EQ(0, weft_close(fillers.back()));
            fillers.pop_back();
            int s = weft_accept(l, nullptr, nullptr);
            ASSERT_GE(s, 0) << strerror(errno);
            char buf[8] = {};
            EXPECT_EQ(4, weft_write(pending, "ping", 4));
            EXPECT_EQ(4, read_exact(s, buf, 4));
            EXPECT_EQ(4, weft_write(s, buf, 4));
            EXPECT_EQ(4, read_exact(pending, buf, 4));
            EXPECT_STREQ("ping", buf);
            for (int fd : fillers) weft_close(fd);
            ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &old));

            // the runtime goes on: threads parked on I/O, sleeps, offload
            int q[2];
            ASSERT_EQ(0, pipe(q));
            weft_thread_t t;
            ASSERT_EQ(0, spawn(&t, [&] {
                char c = 0;
                EXPECT_EQ(1, weft_read(q[0], &c, 1));
                EXPECT_EQ('r', c);
                return nullptr;
            }));
            EXPECT_EQ(0, weft_sleep_ns(kMs));
            EXPECT_EQ(1, weft_write(q[1], "r", 1));
            join(t);
            EXPECT_EQ(7u, num(weft_offload([](void *) -> void * { return ptr(7); }, nullptr)));
            int fds[2] = {-1, -1};
            EXPECT_TRUE(tcp_pair(fds));
            for (int fd : {q[0], q[1], fds[0], fds[1], s, pending, l}) weft_close(fd);
        });
        EXPECT_EQ(0, rc);
        return 0;
    }, 60);
    EXPECT_TRUE(res.ok()) << res.describe();
}

// ---------------------------------------------------------------- backend choice

bool kernel_allows_io_uring(int *err) {
    io_uring_params p{};
    int fd = int(syscall(__NR_io_uring_setup, 4, &p));
    if (fd < 0) {
        *err = errno;
        return false;
    }
    close(fd);
    return true;
}

// Where the kernel lets this process use io_uring, asking for "uring" gets
// "uring" (not a silent fallback).
TEST(IoBackendTest, UringIsUsedWhenTheKernelAllowsIt) {
    Watchdog dog(60);
    int err = 0;
    if (!kernel_allows_io_uring(&err)) GTEST_SKIP() << "io_uring_setup refused here: " << strerror(err);
    EXPECT_EQ("uring", running_backend("uring"));
}

// Install a seccomp filter failing io_uring_setup with `err`.
bool forbid_io_uring(int err) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (uint32_t(err) & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{uint16_t(std::size(filter)), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

int count_lines_mentioning(const std::string &text, const std::string &word) {
    int n = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        std::transform(line.begin(), line.end(), line.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        if (line.find(word) != std::string::npos) ++n;
        start = end + 1;
    }
    return n;
}

// io_uring forbidden (seccomp makes io_uring_setup fail with EPERM, then
// ENOSYS): asking for "uring" on 3 vprocs runs epoll, says so once on
// stderr, and I/O works.
TEST(IoBackendTest, FallsBackToEpollWhenIoUringIsForbidden) {
    Watchdog dog(60);
    for (int err : {EPERM, ENOSYS}) {
        SCOPED_TRACE(strerror(err));
        ChildResult res = run_in_child([&] {
            if (!forbid_io_uring(err)) {
                std::printf("cannot install the seccomp filter: %s\n", strerror(errno));
                return 2;
            }
            int e = 0;
            if (kernel_allows_io_uring(&e)) return 3;
            std::fprintf(stderr, "--- weft starts ---\n");
            weft_config cfg;
            weft_config_init(&cfg);
            cfg.io = "uring";
            cfg.vprocs = 3;
            int rc = run_cfg(cfg, [&] {
                const char *b = weft_io_backend();
                EXPECT_STREQ("epoll", b);
                int fds[2];
                ASSERT_TRUE(tcp_pair(fds));
                const uint64_t parks0 = parks(WEFT_PARK_IO);
                weft_thread_t t;
                ASSERT_EQ(0, spawn_on(&t, 2, [&] {
                    char buf[4] = {};
                    EXPECT_EQ(3, read_exact(fds[0], buf, 3));
                    EXPECT_STREQ("abc", buf);
                    return nullptr;
                }));
                EXPECT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
                EXPECT_EQ(3, weft_write(fds[1], "abc", 3));
                join(t);
                weft_close(fds[0]);
                weft_close(fds[1]);
            });
            EXPECT_EQ(0, rc);
            return 0;
        }, 60);
        ASSERT_TRUE(res.ok()) << res.describe();
        const std::string after = res.output.substr(res.output.find("--- weft starts ---") + 19);
        EXPECT_EQ(1, count_lines_mentioning(after, "uring")) << "stderr should say once that io_uring is not used:\n"
                                                             << after;
    }
}

// ---------------------------------------------------------------- configuration

// Saves and restores the WEFT_ I/O variables around a test.
class EnvGuard {
public:
    EnvGuard() {
        for (const char *v : kVars) {
            const char *x = getenv(v);
            saved_.push_back({v, x ? std::optional<std::string>(x) : std::nullopt});
            unsetenv(v);
        }
    }
    ~EnvGuard() {
        for (auto &[k, v] : saved_)
            if (v) setenv(k.c_str(), v->c_str(), 1);
            else unsetenv(k.c_str());
    }

private:
    static constexpr const char *kVars[] = {"WEFT_IO", "WEFT_WORKERS", "WEFT_SENDFILE"};
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// weft_main_config's result and errno, and whether the body ran.
struct Start {
    int rc;
    int err;
    bool ran;
    std::string backend;
};
Start start(const weft_config &cfg) {
    Start s{0, 0, false, ""};
    errno = 0;
    s.rc = run_cfg(cfg, [&] {
        s.ran = true;
        const char *b = weft_io_backend();
        s.backend = b ? b : "(null)";
    });
    s.err = errno;
    return s;
}

TEST(IoConfigTest, BadFieldsAreRejectedWithEinval) {
    Watchdog dog(60);
    EnvGuard env;
    auto with = [](auto set) {
        weft_config c;
        weft_config_init(&c);
        set(c);
        return start(c);
    };
    std::vector<std::pair<std::string, Start>> bad = {
        {"io=kqueue", with([](weft_config &c) { c.io = "kqueue"; })},
        {"workers=257", with([](weft_config &c) { c.workers = 257; })},
        {"workers=-1", with([](weft_config &c) { c.workers = -1; })},
        {"sendfile=zerocopy", with([](weft_config &c) { c.sendfile = "zerocopy"; })},
    };
    for (auto &[what, s] : bad) {
        EXPECT_EQ(-1, s.rc) << what;
        EXPECT_EQ(EINVAL, s.err) << what;
        EXPECT_FALSE(s.ran) << what;
    }
    for (int w : {1, 256}) {
        Start s = with([w](weft_config &c) { c.workers = w; });
        EXPECT_EQ(0, s.rc) << "workers=" << w;
        EXPECT_TRUE(s.ran);
    }
    for (const char *sf : {"nonblocking", "blocking", "splice"}) {
        Start s = with([sf](weft_config &c) { c.sendfile = sf; });
        EXPECT_EQ(0, s.rc) << "sendfile=" << sf;
    }
}

TEST(IoConfigTest, BadEnvironmentValuesAreRejectedWithEinval) {
    Watchdog dog(60);
    EnvGuard env;
    const std::pair<const char *, const char *> bad[] = {
        {"WEFT_IO", "bogus"}, {"WEFT_WORKERS", "0"}, {"WEFT_WORKERS", "257"},
        {"WEFT_WORKERS", "four"}, {"WEFT_SENDFILE", "bogus"},
    };
    for (auto [var, val] : bad) {
        setenv(var, val, 1);
        weft_config c;
        weft_config_init(&c);
        Start s = start(c);
        unsetenv(var);
        EXPECT_EQ(-1, s.rc) << var << "=" << val;
        EXPECT_EQ(EINVAL, s.err) << var << "=" << val;
        EXPECT_FALSE(s.ran) << var << "=" << val;
    }
}

// WEFT_IO picks the backend when the field is unset; the field wins over it;
// unset everywhere, weft asks for io_uring.
TEST(IoConfigTest, TheBackendComesFromTheFieldThenWeftIoThenTheDefault) {
    Watchdog dog(60);
    EnvGuard env;
    weft_config c;
    weft_config_init(&c);
    Start def = start(c);
    int err = 0;
    EXPECT_EQ(kernel_allows_io_uring(&err) ? "uring" : "epoll", def.backend);
    setenv("WEFT_IO", "poll", 1);
    Start from_env = start(c);
    c.io = "epoll";
    Start field_wins = start(c);
    setenv("WEFT_IO", "epoll", 1);
    c.io = "poll";
    Start field_wins2 = start(c);
    EXPECT_EQ("poll", from_env.backend);
    EXPECT_EQ("epoll", field_wins.backend);
    EXPECT_EQ("poll", field_wins2.backend);
}

} // namespace
