// Shared helpers for the I/O tests (test_io_*.cc), on top of support.hpp.
//
//  - IoTest: value-parameterised fixture over (backend, vprocs). Every TEST_P
//    of a suite runs on "uring", "epoll" and "poll" (WEFT_ON_BACKENDS), or on
//    those three times 1 and 3 vprocs (WEFT_ON_BACKENDS_AND_VPROCS). The
//    uring instances skip, saying why, when the kernel refuses io_uring and
//    weft falls back. run(body) starts weft with cfg.io set and checks that
//    the backend asked for is the one running.
//  - Watchdog: every IoTest (and every test that builds one) aborts with its
//    name after a limit, so a lost wake-up fails fast instead of hanging.
//  - Loopback sockets: tcp_listen / tcp_connect / tcp_pair (127.0.0.1 only),
//    small socket buffers, write_all / read_exact loops.
//  - Pattern: position-dependent bytes, so a lost, repeated or reordered
//    byte anywhere in a multi-MiB stream is found.
//  - run_in_child: a body in a forked process with a time limit; its gtest
//    failures and its output come back to the parent.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace wt::io {

// ---------------------------------------------------------------- watchdog

// An alarm, not a thread: the tests fork (run_in_child), and a thread alive
// at fork time can hold a lock the child then waits on for ever (under ASan,
// a watchdog thread still starting up held the allocator's region lock and
// hung every forked child). alarm() makes no thread and is not inherited by
// a child; the child has run_in_child's own time limit.
class Watchdog {
public:
    explicit Watchdog(int seconds) {
        const auto *ti = ::testing::UnitTest::GetInstance()->current_test_info();
        const std::string name = ti ? std::string(ti->test_suite_name()) + "." + ti->name() : "?";
        std::snprintf(message(), kMessage, "\nwatchdog: %s still running after %d s (a lost wake-up?): aborting\n",
                      name.c_str(), seconds);
        struct sigaction sa {};
        sa.sa_handler = on_alarm;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, &old_);
        alarm(unsigned(seconds));
    }
    ~Watchdog() {
        alarm(0);
        sigaction(SIGALRM, &old_, nullptr);
    }
    Watchdog(const Watchdog &) = delete;
    Watchdog &operator=(const Watchdog &) = delete;

private:
    static constexpr size_t kMessage = 512;
    static char *message() {
        static char m[kMessage];
        return m;
    }
    static void on_alarm(int) {
        const char *m = message();
        ssize_t r = write(2, m, strlen(m));
        (void)r;
        std::abort();
    }
    struct sigaction old_ {};
};

// ---------------------------------------------------------------- runtime

// Body as the weft main thread with a configuration.
inline int run_cfg(const weft_config &cfg, std::function<void()> body) {
    std::function<int()> f = [&] {
        body();
        return 0;
    };
    return weft_main_config(&cfg, detail::main_trampoline, &f);
}

// The backend weft really runs when `asked` is requested (probed once per
// process and cached). "" if the runtime did not start or reported NULL.
inline std::string running_backend(const char *asked) {
    static std::mutex m;
    static std::map<std::string, std::string> cache;
    std::lock_guard<std::mutex> l(m);
    auto it = cache.find(asked);
    if (it != cache.end()) return it->second;
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.io = asked;
    std::string got;
    int rc = run_cfg(cfg, [&] {
        const char *b = weft_io_backend();
        got = b ? b : "";
    });
    if (rc != 0) got = "";
    cache[asked] = got;
    return got;
}

struct Param {
    const char *backend;
    int vprocs;
};

inline void PrintTo(const Param &p, std::ostream *os) { *os << p.backend << " on " << p.vprocs << " vproc(s)"; }

inline std::string param_name(const ::testing::TestParamInfo<Param> &info) {
    return std::string(info.param.backend) + "_" + std::to_string(info.param.vprocs) + "vp";
}

class IoTest : public ::testing::TestWithParam<Param> {
protected:
    Watchdog dog_{45};

public:
    void SetUp() override {
        if (std::string(backend()) == "uring") {
            std::string got = running_backend("uring");
            if (!got.empty() && got != "uring")
                GTEST_SKIP() << "io_uring refused by the kernel: weft runs \"" << got
                             << "\" when \"uring\" is asked";
        }
    }

    const char *backend() const { return GetParam().backend; }
    int vprocs() const { return GetParam().vprocs; }
    int home(int i) const { return i % vprocs(); }
    int other() const { return vprocs() - 1; }
    bool uring() const { return std::string(backend()) == "uring"; }

    weft_config config() const {
        weft_config cfg;
        weft_config_init(&cfg);
        cfg.io = backend();
        cfg.vprocs = vprocs();
        return cfg;
    }

    // body on weft, with cfg.io = backend() and cfg.vprocs = vprocs();
    // tweak may change the rest of the configuration.
    int run(std::function<void()> body, std::function<void(weft_config &)> tweak = {}) const {
        weft_config cfg = config();
        if (tweak) tweak(cfg);
        return run_cfg(cfg, [&] {
            const char *b = weft_io_backend();
            EXPECT_STREQ(backend(), b) << "the backend asked for is not the one running";
            body();
        });
    }
};

#define WEFT_ON_BACKENDS(Suite)                                                                   \
    INSTANTIATE_TEST_SUITE_P(Io, Suite,                                                           \
                             ::testing::Values(::wt::io::Param{"uring", 1}, ::wt::io::Param{"epoll", 1}, \
                                               ::wt::io::Param{"poll", 1}),                       \
                             ::wt::io::param_name)

#define WEFT_ON_BACKENDS_AND_VPROCS(Suite)                                                        \
    INSTANTIATE_TEST_SUITE_P(                                                                     \
        Io, Suite,                                                                                \
        ::testing::Values(::wt::io::Param{"uring", 1}, ::wt::io::Param{"epoll", 1},              \
                          ::wt::io::Param{"poll", 1}, ::wt::io::Param{"uring", 3},                \
                          ::wt::io::Param{"epoll", 3}, ::wt::io::Param{"poll", 3}),               \
        ::wt::io::param_name)

// Sum of the I/O counters over every vproc.
inline weft_stats_t all_stats() { return stats(-1); }

// ---------------------------------------------------------------- sockets

inline sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

inline int set_bufs(int fd, int bytes) {
    if (bytes <= 0) return 0;
    int r = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    if (r == 0) r = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    return r;
}

// A TCP listener on 127.0.0.1 with a kernel-chosen port; -1 on error.
// bufs > 0: small send/receive buffers, inherited by accepted sockets.
inline int tcp_listen(uint16_t *port, int backlog = SOMAXCONN, int type_flags = 0, int bufs = 0) {
    int fd = weft_socket(AF_INET, SOCK_STREAM | type_flags, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    set_bufs(fd, bufs);
    sockaddr_in a = loopback(0);
    socklen_t len = sizeof a;
    if (bind(fd, (sockaddr *)&a, sizeof a) || listen(fd, backlog) || getsockname(fd, (sockaddr *)&a, &len)) {
        int e = errno;
        weft_close(fd);
        errno = e;
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

// A connected TCP socket to 127.0.0.1:port; -1 with errno on error.
inline int tcp_connect(uint16_t port, int bufs = 0, int type_flags = 0) {
    int fd = weft_socket(AF_INET, SOCK_STREAM | type_flags, 0);
    if (fd < 0) return -1;
    set_bufs(fd, bufs);
    sockaddr_in a = loopback(port);
    if (weft_connect(fd, (sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        weft_close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

// A connected pair of TCP sockets over loopback, made by one thread (the
// kernel completes a loopback connect before accept). fds[0] is the
// connecting side, fds[1] the accepted one. false on error.
inline bool tcp_pair(int fds[2], int bufs = 0) {
    uint16_t port = 0;
    int l = tcp_listen(&port, 4, 0, bufs);
    if (l < 0) return false;
    fds[0] = tcp_connect(port, bufs);
    fds[1] = fds[0] >= 0 ? weft_accept(l, nullptr, nullptr) : -1;
    weft_close(l);
    if (fds[1] < 0) {
        if (fds[0] >= 0) weft_close(fds[0]);
        return false;
    }
    set_bufs(fds[1], bufs);
    int one = 1;
    setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return true;
}

// Write all n bytes with weft_write (looping over short writes); the total
// written, or -1 if the first write fails. *calls counts the writes.
inline ssize_t write_all(int fd, const void *buf, size_t n, int *calls = nullptr) {
    size_t done = 0;
    const char *p = static_cast<const char *>(buf);
    while (done < n) {
        ssize_t w = weft_write(fd, p + done, n - done);
        if (calls) ++*calls;
        if (w < 0) return done ? ssize_t(done) : -1;
        if (w == 0) break;
        done += size_t(w);
    }
    return ssize_t(done);
}

// Read exactly n bytes unless EOF or an error comes first; bytes read, or
// -1 if the first read fails. Reads at most `chunk` bytes per call.
inline ssize_t read_exact(int fd, void *buf, size_t n, size_t chunk = SIZE_MAX) {
    size_t done = 0;
    char *p = static_cast<char *>(buf);
    while (done < n) {
        ssize_t r = weft_read(fd, p + done, std::min(chunk, n - done));
        if (r < 0) return done ? ssize_t(done) : -1;
        if (r == 0) break;
        done += size_t(r);
    }
    return ssize_t(done);
}

// A descriptor number below the limit that nothing opens (the top of the
// table: the kernel hands out the lowest free number), so closing it can
// never hit a descriptor of the runtime.
inline int unused_fd() {
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    int fd = int(std::min<rlim_t>(rl.rlim_cur, 1 << 20)) - 1;
    return fcntl(fd, F_GETFD) < 0 ? fd : 1 << 20;
}

// Bytes waiting to be read on a socket or pipe (FIONREAD).
inline bool ioctl_avail(int fd, int *n) { return ioctl(fd, FIONREAD, n) == 0; }

// ---------------------------------------------------------------- pattern

// Bytes that depend on their position: table[i % P] ^ (i / P) with P prime,
// so any shift, loss or duplication below P * 256 bytes shows.
class Pattern {
public:
    explicit Pattern(uint32_t seed = 1) : table_(kPeriod) {
        uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
        for (auto &b : table_) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b = uint8_t(x >> 24);
        }
    }
    uint8_t at(uint64_t i) const { return table_[i % kPeriod] ^ uint8_t(i / kPeriod); }
    void fill(void *buf, uint64_t offset, size_t n) const {
        auto *p = static_cast<uint8_t *>(buf);
        for (size_t k = 0; k < n; ++k) p[k] = at(offset + k);
    }
    std::vector<uint8_t> bytes(uint64_t offset, size_t n) const {
        std::vector<uint8_t> v(n);
        fill(v.data(), offset, n);
        return v;
    }
    // Index (relative to buf) of the first byte that differs, or -1.
    long mismatch(const void *buf, uint64_t offset, size_t n) const {
        auto *p = static_cast<const uint8_t *>(buf);
        for (size_t k = 0; k < n; ++k)
            if (p[k] != at(offset + k)) return long(k);
        return -1;
    }

private:
    static constexpr uint64_t kPeriod = 65521;
    std::vector<uint8_t> table_;
};

// ---------------------------------------------------------------- files

// A directory for scratch files on a disk file system (O_DIRECT, page
// cache misses): $TMPDIR, /var/tmp, else /tmp.
inline std::string scratch_dir() {
    const char *t = std::getenv("TMPDIR");
    for (const char *d : {t, "/var/tmp", "/tmp"})
        if (d && *d && access(d, W_OK) == 0) return d;
    return ".";
}

// A fresh scratch file (unlinked when the object dies) holding `size` bytes
// of Pattern(seed), written with plain pwrite. fd is open O_RDWR.
class TempFile {
public:
    explicit TempFile(size_t size = 0, uint32_t seed = 1) {
        path_ = scratch_dir() + "/weft-io-test-XXXXXX";
        fd_ = mkstemp(path_.data());
        if (fd_ < 0) return;
        if (size) {
            Pattern p(seed);
            std::vector<uint8_t> buf(1 << 20);
            for (size_t off = 0; off < size; off += buf.size()) {
                size_t n = std::min(buf.size(), size - off);
                p.fill(buf.data(), off, n);
                if (pwrite(fd_, buf.data(), n, off_t(off)) != ssize_t(n)) {
                    ::close(fd_);
                    fd_ = -1;
                    return;
                }
            }
        }
    }
    ~TempFile() {
        if (fd_ >= 0) ::close(fd_);
        if (!path_.empty()) unlink(path_.c_str());
    }
    TempFile(const TempFile &) = delete;
    TempFile &operator=(const TempFile &) = delete;
    int fd() const { return fd_; }
    const std::string &path() const { return path_; }

private:
    std::string path_;
    int fd_ = -1;
};

// ---------------------------------------------------------------- child processes

struct ChildResult {
    bool timed_out = false;
    int status = 0;      // waitpid status
    std::string output;  // the child's stdout and stderr
    bool ok() const { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
    std::string describe() const {
        std::string s;
        if (timed_out) s = "timed out (killed)";
        else if (WIFEXITED(status)) s = "exited " + std::to_string(WEXITSTATUS(status));
        else if (WIFSIGNALED(status)) s = std::string("killed by signal ") + strsignal(WTERMSIG(status));
        return s + "; output:\n" + output;
    }
};

// Run body in a forked child with stdout/stderr captured. The child exits
// with body's result, or 100 if a gtest assertion failed in it. Killed after
// timeout_s seconds.
inline ChildResult run_in_child(std::function<int()> body, int timeout_s) {
    ChildResult res;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        res.status = 255 << 8;
        res.output = "pipe2 failed";
        return res;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        int rc = body();
        if (rc == 0 && ::testing::Test::HasFailure()) rc = 100;
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(rc);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        res.status = 255 << 8;
        res.output = "fork failed";
        return res;
    }
    const uint64_t end = weft_now_ns() + uint64_t(timeout_s) * kSec;
    bool open = true;
    char buf[4096];
    for (;;) {
        if (open) {
            pollfd pf{p[0], POLLIN, 0};
            if (poll(&pf, 1, 20) > 0) {
                ssize_t n = read(p[0], buf, sizeof buf);
                if (n > 0) res.output.append(buf, size_t(n));
                else open = false;
                continue;
            }
        } else {
            usleep(5000);
        }
        pid_t w = waitpid(pid, &res.status, WNOHANG);
        if (w == pid) break;
        if (weft_now_ns() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &res.status, 0);
            res.timed_out = true;
            break;
        }
    }
    for (ssize_t n; open && (n = read(p[0], buf, sizeof buf)) > 0;) res.output.append(buf, size_t(n));
    close(p[0]);
    return res;
}

// Descriptors open in this process.
inline int open_fd_count() {
    int n = 0;
    for (int fd = 0; fd < 4096; ++fd)
        if (fcntl(fd, F_GETFD) >= 0) ++n;
    return n;
}

} // namespace wt::io
