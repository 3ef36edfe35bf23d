// Virtual threads (include/weft/vt.hpp): tasks awaiting tasks, spawn and
// join from both kinds of thread, yield order, sleep, I/O on sockets and
// pipes (results and errors as the blocking calls give them), migration
// between vprocs, and frames returned to their pools.
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.hpp"
#include "weft/vt.hpp"

namespace vt = weft::vt;

namespace {

vt::Task<int> add_one(int x) { co_return x + 1; }

vt::Task<int> deep(int n) { // a chain of awaits: symmetric transfer, no stack growth
    if (n == 0) co_return 0;
    int below = co_await deep(n - 1);
    co_return below + 1;
}

// g++ makes symmetric transfer a tail call only when optimising: the
// unoptimised sanitizer build grows the loop's stack per level.
constexpr int kDeep = wt::kSanitized ? 100 : 10000;

vt::Task<> store_sum(int *out) {
    int a = co_await add_one(1);
    int b = co_await deep(kDeep);
    *out = a + b;
}

class VtOnVprocs : public wt::OnVprocs {};

TEST_P(VtOnVprocs, ATaskAwaitsTasksAndAWeftThreadJoinsIt) {
    ASSERT_EQ(0, run([] {
        int sum = 0;
        vt::Handle h = vt::spawn(store_sum(&sum));
        h.join();
        EXPECT_EQ(2 + kDeep, sum);
    }));
}

vt::Task<> thrower() {
    co_await vt::yield();
    throw std::runtime_error("from a virtual thread");
}

TEST_P(VtOnVprocs, AnExceptionReachesTheJoiner) {
    ASSERT_EQ(0, run([] {
        vt::Handle h = vt::spawn(thrower());
        EXPECT_THROW(h.join(), std::runtime_error);
    }));
}

vt::Task<> child(std::vector<int> *log, int id) {
    log->push_back(id);
    co_return;
}

vt::Task<> parent(std::vector<int> *log) {
    vt::Handle a = vt::spawn(child(log, 1));
    vt::Handle b = vt::spawn(child(log, 2));
    co_await a;
    co_await b;
    log->push_back(3);
}

TEST_P(VtOnVprocs, AVirtualThreadJoinsVirtualThreads) {
    ASSERT_EQ(0, run([] {
        std::vector<int> log;
        vt::spawn(parent(&log)).join();
        EXPECT_EQ((std::vector<int>{1, 2, 3}), log);
    }));
}

vt::Task<> yielder(std::vector<int> *log, int id, int rounds) {
    for (int r = 0; r < rounds; ++r) {
        log->push_back(id);
        co_await vt::yield();
    }
}

TEST(Vt, YieldingThreadsTakeTurnsInSpawnOrder) {
    ASSERT_EQ(0, wt::run(1, [] {
        std::vector<int> log;
        vt::Handle a = vt::spawn(yielder(&log, 1, 3));
        vt::Handle b = vt::spawn(yielder(&log, 2, 3));
        vt::Handle c = vt::spawn(yielder(&log, 3, 3));
        a.join(), b.join(), c.join();
        EXPECT_EQ((std::vector<int>{1, 2, 3, 1, 2, 3, 1, 2, 3}), log);
    }));
}

vt::Task<> sleeper(uint64_t ns, uint64_t *slept) {
    uint64_t t0 = weft_now_ns();
    co_await vt::sleep_for(ns);
    *slept = weft_now_ns() - t0;
}

TEST_P(VtOnVprocs, SleepWaitsAtLeastItsTimeAndSleepersOverlap) {
    ASSERT_EQ(0, run([] {
        std::vector<uint64_t> slept(50);
        std::vector<vt::Handle> hs;
        uint64_t t0 = weft_now_ns();
        for (auto &s : slept) hs.push_back(vt::spawn(sleeper(20 * wt::kMs, &s)));
        for (auto &h : hs) h.join();
        for (uint64_t s : slept) EXPECT_GE(s, 20 * wt::kMs);
        EXPECT_LT(weft_now_ns() - t0, 50 * 20 * wt::kMs / 2) << "the sleeps did not overlap";
    }));
}

// ---- I/O ------------------------------------------------------------------------

vt::Task<> echo(int fd, size_t *moved) {
    char buf[1000];
    for (;;) {
        ssize_t n = co_await vt::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        ssize_t w = co_await vt::write(fd, buf, static_cast<size_t>(n));
        if (w != n) break;
        *moved += static_cast<size_t>(n);
    }
    vt::close(fd);
}

TEST_P(VtOnVprocs, AVirtualThreadEchoesWhatAWeftThreadSends) {
    ASSERT_EQ(0, run([] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        size_t moved = 0;
        vt::Handle h = vt::spawn(echo(sv[1], &moved));
        std::string sent, got;
        for (int i = 0; i < 200; ++i) sent += "line " + std::to_string(i) + " of the echo test\n";
        // The peer parks in the reactor between pieces: the echo waits for
        // data each time (a continuation on the descriptor, not a thread).
        for (size_t off = 0; off < sent.size(); off += 997) {
            size_t n = std::min<size_t>(997, sent.size() - off);
            ASSERT_EQ(static_cast<ssize_t>(n), weft_write(sv[0], sent.data() + off, n));
            char buf[2048];
            size_t have = 0;
            while (have < n) {
                ssize_t r = weft_read(sv[0], buf + have, n - have);
                ASSERT_GT(r, 0);
                have += static_cast<size_t>(r);
            }
            got.append(buf, have);
        }
        weft_shutdown(sv[0], SHUT_WR);
        h.join();
        EXPECT_EQ(sent, got);
        EXPECT_EQ(sent.size(), moved);
        char c;
        EXPECT_EQ(0, weft_read(sv[0], &c, 1)); // the echo closed its end
        weft_close(sv[0]);
        EXPECT_GT(vt::stats().io_parks, 0u);
    }));
}

// recv(2) calls on one descriptor, counted by interposing recv for this
// test program (the virtual threads' RecvOp calls it).
std::atomic<int> g_counted_fd{-1};
std::atomic<int> g_recvs{0}, g_recvs_found_nothing{0};

} // namespace

extern "C" ssize_t recv(int fd, void *buf, size_t n, int flags) {
    using Fn = ssize_t (*)(int, void *, size_t, int);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "recv"));
    const ssize_t r = real(fd, buf, n, flags);
    if (fd == g_counted_fd.load()) {
        const int e = errno;
        ++g_recvs;
        if (r < 0 && (e == EAGAIN || e == EWOULDBLOCK)) ++g_recvs_found_nothing;
        errno = e;
    }
    return r;
}

namespace {

vt::Task<> recv_pieces(int fd, int pieces, std::string *got) {
    char buf[100];
    for (int i = 0; i < pieces; ++i) {
        ssize_t n = co_await vt::recv(fd, buf, sizeof buf);
        if (n <= 0) break;
        got->append(buf, static_cast<size_t>(n));
    }
}

// A recv that got less than it asked for drained the socket: the next one
// waits for an event before it calls recv, as the blocking wrappers do, so
// a connection reading its next request makes no recv that finds nothing
// (weft-vtserver made 0.2 per request). Five 10-byte pieces, each sent
// after the reader has gone back to waiting: five recvs, none empty (five
// and four empty ones without the mark).
TEST_P(VtOnVprocs, ARecvThatDrainedTheSocketWaitsBeforeTheNext) {
    ASSERT_EQ(0, run([] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        constexpr int kPieces = 5;
        const std::string piece = "0123456789";
        ASSERT_EQ(10, weft_write(sv[0], piece.data(), piece.size())); // there as the reader starts
        g_recvs = 0;
        g_recvs_found_nothing = 0;
        g_counted_fd = sv[1];
        std::string got;
        vt::Handle h = vt::spawn(recv_pieces(sv[1], kPieces, &got));
        for (int i = 1; i < kPieces; ++i) {
            weft_sleep_ns(2 * wt::kMs); // the reader is back, waiting
            ASSERT_EQ(10, weft_write(sv[0], piece.data(), piece.size()));
        }
        h.join();
        g_counted_fd = -1;
        std::string want;
        for (int i = 0; i < kPieces; ++i) want += piece;
        EXPECT_EQ(want, got);
        EXPECT_EQ(0, g_recvs_found_nothing.load()) << "a recv after a drained read found nothing";
        EXPECT_EQ(kPieces, g_recvs.load());
        weft_close(sv[0]);
        weft_close(sv[1]);
    }));
}

vt::Task<> read_result(int fd, ssize_t *r, int *err) {
    char c;
    *r = co_await vt::read(fd, &c, 1);
    *err = errno;
}

TEST_P(VtOnVprocs, ClosingADescriptorWakesItsReaderWithEbadf) {
    ASSERT_EQ(0, run([] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        ssize_t r = 0;
        int err = 0;
        vt::Handle h = vt::spawn(read_result(p[0], &r, &err));
        weft_sleep_ns(10 * wt::kMs); // parked on the empty pipe
        weft_close(p[0]);
        h.join();
        EXPECT_EQ(-1, r);
        EXPECT_EQ(EBADF, err);
        weft_close(p[1]);
    }));
}

TEST(Vt, ErrorsAreTheBlockingCallsErrors) {
    ASSERT_EQ(0, wt::run(1, [] {
        ssize_t r = 0;
        int err = 0;
        vt::spawn(read_result(-1, &r, &err)).join();
        EXPECT_EQ(-1, r);
        EXPECT_EQ(EBADF, err);
        int p[2];
        ASSERT_EQ(0, pipe(p));
        weft_close(p[0]);
        auto writer = [](int fd, ssize_t *w, int *e) -> vt::Task<> {
            *w = co_await vt::write(fd, "x", 1);
            *e = errno;
        };
        vt::spawn(writer(p[1], &r, &err)).join();
        EXPECT_EQ(-1, r);
        EXPECT_EQ(EPIPE, err); // and no SIGPIPE
        weft_close(p[1]);
    }));
}

vt::Task<> acceptor(int lfd, int *accepted) {
    for (int i = 0; i < 3; ++i) {
        int fd = static_cast<int>(co_await vt::accept(lfd));
        if (fd < 0) break;
        co_await vt::send(fd, "hi", 2);
        vt::close(fd);
        ++*accepted;
    }
}

TEST_P(VtOnVprocs, AcceptAndSendServeLoopbackClients) {
    ASSERT_EQ(0, run([] {
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_GE(lfd, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(0, bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a));
        ASSERT_EQ(0, listen(lfd, 8));
        socklen_t len = sizeof a;
        ASSERT_EQ(0, getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len));
        int accepted = 0;
        vt::Handle h = vt::spawn(acceptor(lfd, &accepted));
        for (int i = 0; i < 3; ++i) {
            int c = weft_socket(AF_INET, SOCK_STREAM, 0);
            ASSERT_EQ(0, weft_connect(c, reinterpret_cast<sockaddr *>(&a), sizeof a));
            char buf[4] = {};
            EXPECT_EQ(2, weft_read(c, buf, sizeof buf));
            EXPECT_STREQ("hi", buf);
            weft_close(c);
        }
        h.join();
        EXPECT_EQ(3, accepted);
        weft_close(lfd);
    }));
}

vt::Task<> timed_read(int fd, uint64_t deadline, ssize_t *r, int *err) {
    char c;
    *r = co_await vt::until(vt::read(fd, &c, 1), deadline);
    *err = errno;
}

TEST_P(VtOnVprocs, AReadWithADeadlineEndsWithEtimedoutAndDataBeforeItIsRead) {
    ASSERT_EQ(0, run([] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        ssize_t r = 0;
        int err = 0;
        uint64_t t0 = weft_now_ns();
        vt::spawn(timed_read(p[0], t0 + 30 * wt::kMs, &r, &err)).join();
        EXPECT_EQ(-1, r);
        EXPECT_EQ(ETIMEDOUT, err);
        EXPECT_GE(weft_now_ns() - t0, 30 * wt::kMs);
        // The waiter left the descriptor: data written later is read by the next one.
        ASSERT_EQ(1, weft_write(p[1], "y", 1));
        vt::spawn(timed_read(p[0], weft_now_ns() + 5 * wt::kSec, &r, &err)).join();
        EXPECT_EQ(1, r);
        weft_close(p[0]);
        weft_close(p[1]);
    }));
}

vt::Task<> send_file_and_head(int sock, int file, size_t size, ssize_t *head, ssize_t *body) {
    struct iovec iov[2] = {{const_cast<char *>("HEAD"), 4}, {const_cast<char *>(":"), 1}};
    *head = co_await vt::writev(sock, iov, 2);
    *body = co_await vt::sendfile(sock, file, 0, size);
    vt::close(sock);
}

TEST_P(VtOnVprocs, WritevAndSendfileMoveEverythingThroughAFullSocket) {
    ASSERT_EQ(0, run([] {
        char path[] = "/tmp/weft-vt-XXXXXX";
        int file = mkstemp(path);
        ASSERT_GE(file, 0);
        unlink(path);
        std::string data(3 << 20, '\0'); // far more than a socket buffer: the sender parks many times
        for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 23);
        ASSERT_EQ(static_cast<ssize_t>(data.size()), write(file, data.data(), data.size()));
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        ssize_t head = 0, body = 0;
        vt::Handle h = vt::spawn(send_file_and_head(sv[1], file, data.size(), &head, &body));
        std::string got;
        char buf[65536];
        for (ssize_t n; (n = weft_read(sv[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
        h.join();
        EXPECT_EQ(5, head);
        EXPECT_EQ(static_cast<ssize_t>(data.size()), body);
        EXPECT_EQ("HEAD:" + data, got);
        weft_close(sv[0]);
        close(file);
    }));
}

vt::Task<> send_range(int sock, int file, off_t off, size_t n, ssize_t *sent, int *ticks_before, int *ticks) {
    *ticks_before = *ticks;
    *sent = co_await vt::sendfile(sock, file, off, n);
    vt::close(sock);
}

vt::Task<> ticker(std::atomic<bool> *stop, int *ticks) {
    while (!stop->load()) {
        ++*ticks;
        co_await vt::yield();
    }
}

// A file out of the page cache: sendfile on the loop would block it on the
// disk, so each stretch that may miss is read in on a kernel worker (the
// offload pool counts it) while the loop runs its other virtual threads;
// every byte of the range still arrives, in order.
TEST_P(VtOnVprocs, ASendfileThatWouldMissThePageCacheReadsOnAWorker) {
    char path[] = "/tmp/weft-vt-XXXXXX";
    int file = mkstemp(path);
    ASSERT_GE(file, 0);
    unlink(path);
    const size_t size = 10 << 20;
    std::string data(size, '\0');
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
    ASSERT_EQ(static_cast<ssize_t>(size), write(file, data.data(), size));
    const bool dropped = wt::drop_cache(file, size);
    const off_t off = 1000;                 // not page-aligned, and not a whole number of stretches
    const size_t n = size - 1000 - 4097;
    weft_stats_t s0{}, s1{};
    ssize_t sent = 0;
    int ticks = 0, ticks_before = 0;
    std::string got;
    ASSERT_EQ(0, run([&] {
        weft_stats_get(-1, &s0);
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        std::atomic<bool> stop{false};
        vt::Handle t = vt::spawn(ticker(&stop, &ticks));
        vt::Handle h = vt::spawn(send_range(sv[1], file, off, n, &sent, &ticks_before, &ticks));
        char buf[65536];
        for (ssize_t r; (r = weft_read(sv[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(r));
        h.join();
        stop = true;
        t.join();
        weft_close(sv[0]);
        weft_stats_get(-1, &s1);
    }));
    close(file);
    EXPECT_EQ(static_cast<ssize_t>(n), sent);
    EXPECT_TRUE(got == data.substr(static_cast<size_t>(off), n)) << "bytes differ (got " << got.size() << ")";
    if (!dropped) GTEST_SKIP() << "the page cache kept the file after POSIX_FADV_DONTNEED; data checked, path not";
    // (Reading one stretch in may bring the next with it: the kernel reads ahead.)
    EXPECT_GE(s1.offloaded - s0.offloaded, 1u) << "a stretch that missed was sent from the loop, blocking it";
    EXPECT_GT(ticks, ticks_before) << "the loop ran nothing else while the file was sent";
    // The worker wakes the virtual thread itself: no weft thread waits for
    // each stretch (the loops are the only weft threads made here).
    EXPECT_LE(s1.threads_created - s0.threads_created, static_cast<uint64_t>(GetParam()))
        << "offloaded stretches: " << s1.offloaded - s0.offloaded;
}

// Pieces of a file not in the page cache, so that each is
// sent from an offload worker, which then wakes the loop from a kernel
// thread of no vproc while the loop goes to sleep.
// Piece i of sender k: a page of its own (an odd multiplier permutes the
// file's 2^13 pages), scattered, so that no other sender's read brings it
// into the page cache first (and the file is read with POSIX_FADV_RANDOM:
// no read-ahead).
size_t piece_offset(int k, int i, int count, size_t piece) {
    const uint64_t j = static_cast<uint64_t>(k) * static_cast<uint64_t>(count) + static_cast<uint64_t>(i);
    return static_cast<size_t>((j * 2654435761u) & 8191u) * piece;
}

vt::Task<> send_dropped_pieces(int sock, int file, int k, size_t piece, int count, int *sent, ssize_t *failed) {
    for (int i = 0; i < count; ++i) {
        const auto off = static_cast<off_t>(piece_offset(k, i, count, piece));
        const ssize_t r = co_await vt::sendfile(sock, file, off, piece);
        if (r != static_cast<ssize_t>(piece)) {
            *failed = r < 0 ? -errno : r;
            break;
        }
        ++*sent;
    }
    ::shutdown(sock, SHUT_WR);
}

// Every offloaded stretch wakes its loop, asleep or falling asleep, however
// the two race: a lost wake-up hangs the loop for good. (A loop used to
// sleep on a weft semaphore, which with one vproc takes no lock, so a post
// from the worker could slip in between the loop's check and its wait.)
TEST_P(VtOnVprocs, ManyStretchesSentFromWorkersEachWakeTheirLoop) {
    char path[] = "/tmp/weft-vt-XXXXXX";
    int file = mkstemp(path);
    ASSERT_GE(file, 0);
    unlink(path);
    const size_t size = 32 << 20, piece = 4096;
    std::string data(size, '\0');
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>('a' + (i * 13 + i / 4096) % 26);
    ASSERT_EQ(static_cast<ssize_t>(size), write(file, data.data(), size));
    const bool dropped = wt::drop_cache(file, size);
    posix_fadvise(file, 0, static_cast<off_t>(size), POSIX_FADV_RANDOM);
    // Many at once, so that the workers' wake-ups land at every point of
    // the loop's going to sleep: 32 virtual threads, a socket pair each.
    const int senders = 32, count = 125; // pieces per sender
    // A hang is this test's failure: end it with a message, not a CI timeout.
    std::atomic<bool> finished{false};
    std::thread watchdog([&finished] {
        for (int i = 0; i < 300 && !finished.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (!finished.load()) {
            std::fprintf(stderr, "ManyStretchesSentFromWorkersEachWakeTheirLoop: not done after 30 s: a lost wake-up\n");
            std::abort();
        }
    });
    std::vector<int> sent(senders, 0);
    std::vector<ssize_t> failed(senders, 0);
    std::vector<std::string> got(senders);
    weft_stats_t s0{}, s1{};
    ASSERT_EQ(0, run([&] {
        weft_stats_get(-1, &s0);
        std::vector<int> ends;
        std::vector<vt::Handle> hs;
        for (int k = 0; k < senders; ++k) {
            int sv[2];
            ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
            ends.push_back(sv[0]);
            ends.push_back(sv[1]);
            hs.push_back(vt::spawn(send_dropped_pieces(sv[1], file, k, piece, count, &sent[k], &failed[k])));
        }
        // One weft thread reads them all, a socket at a time (each holds a
        // whole sender's bytes: 500 KiB of socket buffer is not needed, the
        // sender waits for room as it must).
        std::vector<weft_thread_t> readers(senders);
        struct Reader {
            int fd;
            std::string *out;
        };
        std::vector<Reader> rs;
        for (int k = 0; k < senders; ++k) rs.push_back({ends[2 * k], &got[k]});
        for (int k = 0; k < senders; ++k)
            ASSERT_EQ(0, weft_thread_create(&readers[k], nullptr, [](void *p) -> void * {
                auto *r = static_cast<Reader *>(p);
                char buf[16384];
                for (ssize_t n; (n = weft_read(r->fd, buf, sizeof buf)) > 0;) r->out->append(buf, static_cast<size_t>(n));
                return nullptr;
            }, &rs[k]));
        for (auto &h : hs) h.join();
        for (auto &t : readers) weft_thread_join(t, nullptr);
        for (int fd : ends) weft_close(fd);
        weft_stats_get(-1, &s1);
    }));
    finished = true;
    watchdog.join();
    close(file);
    for (int k = 0; k < senders; ++k) {
        EXPECT_EQ(0, failed[k]) << "sender " << k;
        ASSERT_EQ(count, sent[k]) << "sender " << k;
        ASSERT_EQ(static_cast<size_t>(count) * piece, got[k].size()) << "sender " << k;
        for (int i = 0; i < count; ++i) {
            const size_t off = piece_offset(k, i, count, piece);
            ASSERT_TRUE(got[k].compare(static_cast<size_t>(i) * piece, piece, data, off, piece) == 0)
                << "sender " << k << ", piece " << i;
        }
    }
    const uint64_t total = static_cast<uint64_t>(senders) * count;
    if (!dropped) GTEST_SKIP() << "the page cache kept the file after POSIX_FADV_DONTNEED: the race was not run";
    if (s1.offloaded - s0.offloaded < total / 2)
        GTEST_SKIP() << "only " << s1.offloaded - s0.offloaded << " of " << total
                     << " pieces went to a worker (the page cache kept them, or no cachestat): the race was not run";
}

vt::Task<> taker(weft_sem_t *sem, int *counter) {
    for (int i = 0; i < 100; ++i) {
        // A weft semaphore blocks a thread, not a continuation: wait on one.
        // (Not a mutex: the thread that would own it ends at once.)
        co_await vt::on_thread([sem] { weft_sem_wait(sem); });
        ++*counter;
        weft_sem_post(sem);
        co_await vt::yield();
    }
}

TEST_P(VtOnVprocs, OnThreadLetsAVirtualThreadWaitOnWeftSynchronisation) {
    ASSERT_EQ(0, run([] {
        weft_sem_t sem;
        weft_sem_init(&sem, 0); // taken while they start: they must wait
        int counter = 0;
        std::vector<vt::Handle> hs;
        for (int i = 0; i < 4; ++i) hs.push_back(vt::spawn(taker(&sem, &counter)));
        weft_sleep_ns(5 * wt::kMs);
        EXPECT_EQ(0, counter);
        weft_sem_post(&sem);
        for (auto &h : hs) h.join();
        EXPECT_EQ(400, counter);
        weft_sem_destroy(&sem);
    }));
}

// ---- the worker pool (offload) -------------------------------------------------------

// Inside an offloaded call: one more running at once; wait (up to 5 s) until
// `want` have been at once, or just hold the worker a moment when want == 0.
// Returns how many ran at once at most, as seen from here.
struct Crowd {
    std::atomic<int> inside{0}, most{0};
    int enter_and_wait(int want) {
        int now = inside.fetch_add(1) + 1;
        for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        if (want == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
        while (want && most.load() < want && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        inside.fetch_sub(1);
        return most.load();
    }
};

vt::Task<> offloader(Crowd *c, int want, int *seen, int *result, int value) {
    // a blocking kernel-thread call: the loop goes on meanwhile
    *seen = co_await vt::offload([c, want] { return c->enter_and_wait(want); });
    *result = co_await vt::offload([value] { return value * 2; });
}

vt::Task<> counter_vt(std::atomic<bool> *stop, long *spins) {
    while (!stop->load()) {
        ++*spins;
        co_await vt::sleep_for(100 * wt::kUs);
    }
}

TEST_P(VtOnVprocs, OffloadRunsOnKernelWorkersWhileTheLoopGoesOn) {
    ASSERT_EQ(0, run([] {
        ASSERT_TRUE(vt::set_workers(4));
        EXPECT_EQ(4, vt::workers());
        Crowd crowd;
        int seen[4] = {}, result[4] = {};
        std::atomic<bool> stop{false};
        long spins = 0;
        vt::Handle ticker = vt::spawn(counter_vt(&stop, &spins));
        std::vector<vt::Handle> hs;
        for (int i = 0; i < 4; ++i) hs.push_back(vt::spawn(offloader(&crowd, 4, &seen[i], &result[i], i + 10)));
        for (auto &h : hs) h.join();
        stop.store(true);
        ticker.join();
        for (int i = 0; i < 4; ++i) {
            EXPECT_EQ(4, seen[i]) << "offload " << i << ": the 4 workers did not run at once";
            EXPECT_EQ(2 * (i + 10), result[i]);
        }
        EXPECT_GT(spins, 0) << "the loop stood still while the workers blocked";
    }));
}

TEST_P(VtOnVprocs, TheWorkerPoolIsResizedWhileTheProgramRuns) {
    ASSERT_EQ(0, run([] {
        EXPECT_FALSE(vt::set_workers(0));
        EXPECT_FALSE(vt::set_workers(257));
        ASSERT_TRUE(vt::set_workers(3));
        Crowd wide;
        int seen[3] = {}, result[3] = {};
        {
            std::vector<vt::Handle> hs;
            for (int i = 0; i < 3; ++i) hs.push_back(vt::spawn(offloader(&wide, 3, &seen[i], &result[i], i)));
            for (auto &h : hs) h.join();
        }
        EXPECT_EQ(3, wide.most.load());
        int running = 0;
        weft_get_workers(&running);
        EXPECT_EQ(3, running);
        // lowered to 1: the two above it leave (idle ones at once), and no
        // two calls run at once any more
        ASSERT_TRUE(vt::set_workers(1));
        for (int i = 0; i < 500 && (weft_get_workers(&running), running) > 1; ++i) weft_sleep_ns(wt::kMs);
        EXPECT_EQ(1, running) << "workers above the lowered bound stayed";
        Crowd narrow;
        {
            std::vector<vt::Handle> hs;
            for (int i = 0; i < 4; ++i) hs.push_back(vt::spawn(offloader(&narrow, 0, &seen[0], &result[0], i)));
            for (auto &h : hs) h.join();
        }
        EXPECT_EQ(1, narrow.most.load());
        // raised again: queued work spreads over the new bound
        ASSERT_TRUE(vt::set_workers(2));
        Crowd again;
        {
            std::vector<vt::Handle> hs;
            for (int i = 0; i < 2; ++i) hs.push_back(vt::spawn(offloader(&again, 2, &seen[i], &result[i], i)));
            for (auto &h : hs) h.join();
        }
        EXPECT_EQ(2, again.most.load());
        EXPECT_EQ(2, vt::workers());
    }));
    EXPECT_EQ(EPERM, weft_set_workers(2)); // outside weft_main
}

// ---- migration --------------------------------------------------------------------

vt::Task<> wanderer(std::vector<int> *where, int hops) {
    for (int i = 0; i < hops; ++i) {
        co_await vt::migrate(i % weft_vproc_count());
        where->push_back(weft_vproc_self());
        int x = co_await add_one(i); // its frames travel with it
        if (x != i + 1) throw std::logic_error("lost a result in migration");
    }
}

TEST_P(VtOnVprocs, MigrationMovesTheThreadAndKeepsItsState) {
    ASSERT_EQ(0, run([this] {
        std::vector<int> where;
        vt::spawn(wanderer(&where, 9)).join();
        ASSERT_EQ(9u, where.size());
        for (int i = 0; i < 9; ++i) EXPECT_EQ(i % vprocs(), where[static_cast<size_t>(i)]) << "hop " << i;
    }));
}

// ---- channels and events ----------------------------------------------------------------

vt::Task<> producer(vt::Channel<int> *ch, int from, int n, int vp) {
    co_await vt::migrate(vp);
    for (int i = from; i < from + n; ++i)
        if (!co_await ch->send(i)) throw std::logic_error("send failed before close");
}

vt::Task<> consumer(vt::Channel<int> *ch, std::vector<int> *got, int vp) {
    co_await vt::migrate(vp);
    while (auto v = co_await ch->recv()) got->push_back(*v);
}

TEST_P(VtOnVprocs, AChannelCarriesEveryValueInOrderBetweenVprocs) {
    ASSERT_EQ(0, run([this] {
        vt::Channel<int> ch(4); // small: senders wait for room often
        std::vector<int> got;
        vt::Handle c = vt::spawn(consumer(&ch, &got, other()));
        vt::Handle p = vt::spawn(producer(&ch, 0, 5000, 0));
        p.join();
        ch.close(); // the consumer drains what is left, then ends
        c.join();
        ASSERT_EQ(5000u, got.size());
        for (int i = 0; i < 5000; ++i) ASSERT_EQ(i, got[static_cast<size_t>(i)]);
    }));
}

vt::Task<> blocked_sender(vt::Channel<int> *ch, int *results) {
    results[0] = co_await ch->send(1); // fits
    results[1] = co_await ch->send(2); // waits: full
}

TEST(Vt, ClosingAChannelFailsAWaitingSenderAndEndsReceivers) {
    ASSERT_EQ(0, wt::run(1, [] {
        vt::Channel<int> ch(1);
        int results[2] = {-1, -1};
        vt::Handle h = vt::spawn(blocked_sender(&ch, results));
        weft_sleep_ns(2 * wt::kMs);
        ch.close();
        h.join();
        EXPECT_EQ(1, results[0]);
        EXPECT_EQ(0, results[1]);
        std::vector<int> got;
        vt::spawn(consumer(&ch, &got, 0)).join();
        EXPECT_EQ((std::vector<int>{1}), got); // what was in before the close
    }));
}

vt::Task<> waiter(vt::Event *e, std::atomic<int> *passed) {
    co_await e->wait();
    passed->fetch_add(1);
}

TEST_P(VtOnVprocs, AnEventReleasesEveryWaiterOnEveryVproc) {
    ASSERT_EQ(0, run([this] {
        vt::Event e;
        std::atomic<int> passed{0};
        std::vector<vt::Handle> hs;
        for (int i = 0; i < 30; ++i) hs.push_back(vt::spawn_on(home(i), waiter(&e, &passed)));
        weft_sleep_ns(5 * wt::kMs);
        EXPECT_EQ(0, passed.load());
        e.set();
        for (auto &h : hs) h.join();
        EXPECT_EQ(30, passed.load());
        vt::spawn(waiter(&e, &passed)).join(); // set: passes at once
        EXPECT_EQ(31, passed.load());
    }));
}

// ---- frames ---------------------------------------------------------------------------

// ---- cancellation ---------------------------------------------------------------

vt::Task<ssize_t> read_one(int fd, char *c) { co_return co_await vt::read(fd, c, 1); } // a frame more

struct CancelSeen {
    ssize_t first = 0, second = 0;
    int err1 = 0, err2 = 0;
    char c = 0;
};

vt::Task<> cancellable_reader(int fd, CancelSeen *out) {
    out->first = co_await read_one(fd, &out->c);
    out->err1 = errno;
    char c;
    out->second = co_await vt::read(fd, &c, 1); // parks (a byte read before), or fails at once
    out->err2 = errno;
}

vt::Task<> cancellable_sleeper(uint64_t ns, uint64_t *slept, int *saw) {
    const uint64_t t0 = weft_now_ns();
    co_await vt::sleep_for(ns);
    *saw = vt::cancelled();
    co_await vt::sleep_for(ns); // returns at once
    *slept = weft_now_ns() - t0;
}

// Parked reads (on every vproc, some a coroutine deep) and sleeps end when
// cancelled from a weft thread; what a read got before stays got; every
// later I/O or sleep fails or returns at once; every frame goes back.
TEST_P(VtOnVprocs, CancelEndsParkedReadsAndSleepsAndFreesTheirFrames) {
    ASSERT_EQ(0, run([this] {
        constexpr int kReaders = 20, kSleepers = 10;
        const vt::Stats before = vt::stats();
        EXPECT_FALSE(vt::cancelled()) << "a weft thread is no virtual thread";
        int sv[kReaders][2];
        std::vector<CancelSeen> seen(kReaders);
        std::vector<uint64_t> slept(kSleepers, 0);
        std::vector<int> saw(kSleepers, 0);
        std::vector<vt::Handle> hs;
        for (int i = 0; i < kReaders; ++i) {
            ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]));
            hs.push_back(vt::spawn_on(home(i), cancellable_reader(sv[i][1], &seen[i])));
        }
        for (int i = 0; i < kSleepers; ++i)
            hs.push_back(vt::spawn_on(home(i), cancellable_sleeper(60 * wt::kSec, &slept[i], &saw[i])));
        ASSERT_EQ(1, weft_write(sv[0][0], "x", 1)); // reader 0's first read gets it
        weft_sleep_ns(30 * wt::kMs);                // every one parked
        const uint64_t t0 = weft_now_ns();
        for (auto &h : hs) h.cancel();
        for (auto &h : hs) h.cancel(); // a second time: nothing
        for (auto &h : hs) h.join();
        EXPECT_LT(weft_now_ns() - t0, 30 * wt::kSec) << "a cancelled sleep ran its course";
        EXPECT_EQ(1, seen[0].first);
        EXPECT_EQ('x', seen[0].c);
        for (int i = 1; i < kReaders; ++i) {
            EXPECT_EQ(-1, seen[i].first) << "reader " << i;
            EXPECT_EQ(ECANCELED, seen[i].err1) << "reader " << i;
        }
        for (int i = 0; i < kReaders; ++i) {
            EXPECT_EQ(-1, seen[i].second) << "reader " << i;
            EXPECT_EQ(ECANCELED, seen[i].err2) << "reader " << i;
        }
        for (int i = 0; i < kSleepers; ++i) {
            EXPECT_EQ(1, saw[i]) << "sleeper " << i << " did not see vt::cancelled()";
            EXPECT_LT(slept[i], 30 * wt::kSec) << "sleeper " << i;
        }
        const vt::Stats after = vt::stats();
        EXPECT_EQ(before.live, after.live);
        EXPECT_EQ(before.frame_bytes, after.frame_bytes) << "a cancelled thread's frames are still live";
        // The descriptors work on: nothing of the cancelled waits is left on them.
        for (int i = 0; i < kReaders; ++i) {
            ASSERT_EQ(1, weft_write(sv[i][0], "y", 1));
            char c = 0;
            EXPECT_EQ(1, weft_read(sv[i][1], &c, 1));
            EXPECT_EQ('y', c);
            weft_close(sv[i][0]);
            weft_close(sv[i][1]);
        }
    }));
}

vt::Task<> deadline_read(int fd, uint64_t deadline, ssize_t *r, int *err) {
    char c;
    *r = co_await vt::until(vt::read(fd, &c, 1), deadline);
    *err = errno;
}

vt::Task<> send_all(int fd, const std::string *data, ssize_t *r, int *err) {
    *r = co_await vt::write(fd, data->data(), data->size());
    *err = errno;
}

// A cancelled wait with a deadline ends with ECANCELED and its timer goes
// (ASan would see it fire on a freed frame); a transfer that moved bytes
// returns them, as at a deadline; cancelling a finished one does nothing.
TEST_P(VtOnVprocs, CancelEndsATimedWaitAndATransferReturnsWhatWent) {
    ASSERT_EQ(0, run([this] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        ssize_t r = 0;
        int err = 0;
        vt::Handle h = vt::spawn_on(other(), deadline_read(p[0], weft_now_ns() + 60 * wt::kMs, &r, &err));
        weft_sleep_ns(10 * wt::kMs);
        h.cancel();
        h.join();
        EXPECT_EQ(-1, r);
        EXPECT_EQ(ECANCELED, err) << "not ended by the cancel";
        weft_sleep_ns(80 * wt::kMs); // past the deadline: its timer must be gone

        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        const std::string data(4 << 20, 'z'); // far more than the socket holds: the writer parks
        vt::Handle w = vt::spawn_on(other(), send_all(sv[1], &data, &r, &err));
        weft_sleep_ns(20 * wt::kMs);
        w.cancel();
        w.join();
        EXPECT_GT(r, 0) << "errno " << err;
        EXPECT_LT(r, static_cast<ssize_t>(data.size()));
        w.cancel(); // finished (and joined): nothing

        vt::Handle done = vt::spawn(read_result(sv[0], &r, &err)); // the bytes are there: it ends at once
        weft_sleep_ns(10 * wt::kMs);
        done.cancel();
        done.join();
        EXPECT_EQ(1, r) << "errno " << err;
        weft_close(p[0]);
        weft_close(p[1]);
        weft_close(sv[0]);
        weft_close(sv[1]);
    }));
}

TEST(Vt, FramesGoBackToThePoolAndSizesAreRecorded) {
    ASSERT_EQ(0, wt::run(1, [] {
        const vt::Stats before = vt::stats();
        int sum = 0;
        for (int i = 0; i < 100; ++i) vt::spawn(store_sum(&sum)).join();
        const vt::Stats after = vt::stats();
        EXPECT_EQ(before.frame_bytes, after.frame_bytes) << "frames still live after every thread ended";
        EXPECT_GE(after.frames - before.frames, 100u * (kDeep + 3u)); // store_sum, add_one, deep(0..kDeep)
        EXPECT_GT(after.largest_frame, 0u);
        EXPECT_EQ(after.live, before.live);
    }));
}

// Frames and control blocks come from slabs that are never given back, so
// the blocks a vproc's kernel thread held when it ended must go to the
// next threads; else every run would take as many slabs again.
TEST(Vt, TheBlocksOfAnEndedVprocAreTakenByTheNextRun) {
    static constexpr int kThreads = 20000; // all alive at once: a few MB of frames
    uint64_t grew[3] = {};
    for (uint64_t &g : grew) {
        const uint64_t before = vt::stats().pool_bytes;
        ASSERT_EQ(0, wt::run(2, [] {
            // Made here (vproc 0), ended on vproc 1, whose kernel thread
            // ends with the run: the blocks go back to vproc 1's lists.
            vt::Event e;
            std::atomic<int> passed{0};
            std::vector<vt::Handle> hs;
            hs.reserve(kThreads);
            for (int i = 0; i < kThreads; ++i) hs.push_back(vt::spawn_on(1, waiter(&e, &passed)));
            e.set();
            for (auto &h : hs) h.join();
            EXPECT_EQ(kThreads, passed.load());
        }));
        g = vt::stats().pool_bytes - before;
    }
    if (grew[0] == 0) GTEST_SKIP() << "no slabs in this build (AddressSanitizer: every block is its own malloc)";
    EXPECT_LE(grew[1] + grew[2], grew[0] / 4)
        << "runs 2 and 3 took " << grew[1] << " and " << grew[2] << " bytes of new slabs (run 1: " << grew[0] << ")";
}

// ---- clues ---------------------------------------------------------------------------

vt::Task<> follow_ab(vt::Clue *a, vt::Clue *b, int rounds, std::vector<int> *where) {
    for (int i = 0; i < rounds; ++i) {
        co_await vt::follow(*a);
        where->push_back(weft_vproc_self());
        co_await vt::follow(*b);
        where->push_back(weft_vproc_self());
    }
}

TEST(VtClues, FollowingAClueMovesToItsLoopAndCountsSequences) {
    ASSERT_EQ(0, wt::run(2, [] {
        vt::Clue a(0), b(1);
        std::vector<int> where;
        vt::spawn(follow_ab(&a, &b, 10, &where)).join();
        ASSERT_EQ(20u, where.size());
        for (size_t i = 0; i < where.size(); ++i) EXPECT_EQ(static_cast<int>(i % 2), where[i]) << i;
        EXPECT_EQ(10u, a.follows());
        EXPECT_EQ(&a, b.previous()); // b always follows a
        EXPECT_EQ(1u, b.different_count());
        EXPECT_EQ(9u, b.same_count());
        EXPECT_EQ(&b, a.previous()); // a follows b from the second round on
        EXPECT_EQ(1u, a.different_count()); // the first: nothing before, as before (a fresh clue)
        EXPECT_EQ(9u, a.same_count());
    }));
}

vt::Task<> hashed_follower(vt::HashedClue *h, std::atomic<int> *on) {
    co_await vt::follow(*h);
    on[weft_vproc_self()].fetch_add(1);
}

TEST(VtClues, AHashedClueSpreadsThreadsOverItsLoops) {
    ASSERT_EQ(0, wt::run(2, [] {
        vt::HashedClue h(2);
        std::atomic<int> on[2] = {0, 0};
        std::vector<vt::Handle> hs;
        for (int i = 0; i < 200; ++i) hs.push_back(vt::spawn(hashed_follower(&h, on)));
        for (auto &x : hs) x.join();
        EXPECT_EQ(200, on[0].load() + on[1].load());
        EXPECT_GT(on[0].load(), 20);
        EXPECT_GT(on[1].load(), 20);
    }));
}

void spin_ns(uint64_t ns) {
    for (uint64_t end = weft_now_ns() + ns; weft_now_ns() < end;) {
    }
}

// A three-stage pipeline: A and B cost 100 µs an item, C 200 µs.
vt::Task<> pipeline_worker(vt::Clue *a, vt::Clue *b, vt::Clue *c, uint64_t until) {
    while (weft_now_ns() < until) {
        co_await vt::follow(*a);
        spin_ns(100 * wt::kUs);
        co_await vt::follow(*b);
        spin_ns(100 * wt::kUs);
        co_await vt::follow(*c);
        spin_ns(200 * wt::kUs);
    }
}

TEST(VtClues, TheCluethreadMovesTheClueThatBalancesTheLoops) {
    // The loads are wall-clock time (the items spin on the clock, and the
    // cluethread reads loops' busy time): a vproc preempted by another
    // process mid-item looks busier, and its clue with it. Under a parallel
    // ctest that happened once, so the scenario gets three tries; a
    // cluethread that moves the wrong clue fails all three.
    std::string tries;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const void *moved = nullptr, *want = nullptr;
        int from = -1, to = -1;
        ASSERT_EQ(0, wt::run(2, [&] {
            // A and C on vproc 0 (300 µs an item), B alone on vproc 1 (100 µs).
            // Moving A balances them (200 : 200); moving C would not (100 : 300).
            vt::Clue a(0), b(1), c(0);
            const uint64_t until = weft_now_ns() + 400 * wt::kMs;
            std::vector<vt::Handle> hs;
            for (int i = 0; i < 12; ++i) hs.push_back(vt::spawn_on(0, pipeline_worker(&a, &b, &c, until)));
            weft_sleep_ns(20 * wt::kMs); // the pipeline fills
            vt::Cluethread ct({.period_ns = 10 * wt::kMs, .threshold = 0.10});
            for (auto &h : hs) h.join();
            ct.stop();
            want = &a;
            if (ct.history().empty()) return;
            const auto &first = ct.history()[0];
            moved = first.clue;
            from = first.from;
            to = first.to;
            tries += std::string(" [") + (moved == &a ? "A" : moved == &b ? "B" : moved == &c ? "C" : "?") + " " +
                     std::to_string(from) + "->" + std::to_string(to) + "]";
        }));
        if (moved == want && from == 0 && to == 1) return;
        if (!moved) tries += " [no move]";
    }
    FAIL() << "the first move should be A's, from vproc 0 to 1; in three tries it was" << tries;
}

TEST(Vt, FrameSizesAreReportedPerCoroutine) {
    ASSERT_EQ(0, wt::run(1, [] {
        vt::record_frames(true);
        int sum = 0;
        vt::spawn(store_sum(&sum)).join();
        vt::record_frames(false);
        const auto report = vt::frame_report();
        // deep() allocated kDeep + 1 frames of one size; store_sum and add_one one each.
        bool found_deep = false;
        for (const auto &f : report) {
            EXPECT_GT(f.bytes, 0u);
            if (f.count >= static_cast<uint64_t>(kDeep) + 1) found_deep = true;
        }
        EXPECT_TRUE(found_deep);
        EXPECT_GE(report.size(), 3u);
    }));
}

WEFT_ON_VPROCS(VtOnVprocs);

} // namespace
