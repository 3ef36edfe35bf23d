// Stream and datagram sockets over loopback through the weft I/O wrappers,
// the same bodies on every reactor backend (uring, epoll, poll), the key
// ones on 1 and 3 vprocs: echo at scale, partial transfers through tiny
// socket buffers, accept storms, EOF, resets, EPIPE without SIGPIPE, close
// while parked, descriptors the program made non-blocking, and the counters.
// Orderings come from the park counters, never from sleeping long enough.
#include <sys/un.h>

#include <algorithm>
#include <atomic>

#include "io_support.hpp"

namespace {

using namespace wt;
using namespace wt::io;

class SocketTest : public IoTest {};
WEFT_ON_BACKENDS_AND_VPROCS(SocketTest);

class SocketErrorTest : public IoTest {};
WEFT_ON_BACKENDS(SocketErrorTest);

// Echo until EOF, then close. Failures are recorded.
void echo_until_eof(int c) {
    char buf[4096];
    ssize_t r;
    while ((r = weft_read(c, buf, sizeof buf)) > 0)
        if (write_all(c, buf, size_t(r)) != r) {
            ADD_FAILURE() << "echo write: " << strerror(errno);
            break;
        }
    if (r < 0) ADD_FAILURE() << "echo read: " << strerror(errno);
    weft_close(c);
}

// ~1,000 connections open at the same time (a barrier holds every client
// until all are connected), each echoing a few messages of odd sizes.
TEST_P(SocketTest, EchoOverAThousandConcurrentConnectionsIsByteExact) {
    const int n = int(scaled(1000, 200));
    const int rounds = 3;
    const Pattern pat(3);
    std::atomic<int> verified{0}, served{0};
    ASSERT_EQ(0, run([&] {
        uint16_t port = 0;
        int l = tcp_listen(&port);
        ASSERT_GE(l, 0) << strerror(errno);
        weft_thread_t acceptor;
        ASSERT_EQ(0, spawn(&acceptor, [&] {
            for (int i = 0; i < n; ++i) {
                int c = weft_accept(l, nullptr, nullptr);
                if (c < 0) {
                    ADD_FAILURE() << "accept #" << i << ": " << strerror(errno);
                    break;
                }
                EXPECT_EQ(0, spawn_detached(home(i), [&, c] {
                    echo_until_eof(c);
                    served.fetch_add(1);
                    return nullptr;
                }));
            }
            return nullptr;
        }));
        weft_barrier_t all_connected;
        ASSERT_EQ(0, weft_barrier_init(&all_connected, unsigned(n)));
        std::vector<weft_thread_t> clients(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&clients[size_t(i)], home(i), [&, i] {
                int fd = tcp_connect(port);
                int e = errno;
                weft_barrier_wait(&all_connected); // every connection is open now
                if (fd < 0) {
                    ADD_FAILURE() << "connect #" << i << ": " << strerror(e);
                    return nullptr;
                }
                bool ok = true;
                for (int r = 0; r < rounds && ok; ++r) {
                    const size_t len = 1 + size_t(i * 7919 + r * 104729) % 3000;
                    const uint64_t off = uint64_t(i) * 1000003 + uint64_t(r) * 4099;
                    std::vector<uint8_t> out = pat.bytes(off, len), in(len);
                    ok = write_all(fd, out.data(), len) == ssize_t(len) &&
                         read_exact(fd, in.data(), len) == ssize_t(len) && in == out;
                    EXPECT_TRUE(ok) << "connection " << i << " round " << r << ": " << strerror(errno);
                }
                EXPECT_EQ(0, weft_shutdown(fd, SHUT_WR));
                char c;
                EXPECT_EQ(0, weft_read(fd, &c, 1)) << "connection " << i << ": EOF after the echo";
                EXPECT_EQ(0, weft_close(fd));
                if (ok) verified.fetch_add(1);
                return nullptr;
            })) << "client " << i;
        for (auto &t : clients) join(t);
        join(acceptor);
        EXPECT_TRUE(wait_until([&] { return served.load() == n; }));
        weft_close(l);
        weft_barrier_destroy(&all_connected);
    }));
    EXPECT_EQ(n, verified.load());
    EXPECT_EQ(n, served.load());
}

// 4-KiB socket buffers: multi-MiB transfers in both directions at once, so
// each socket has a parked reader and a parked writer at the same time. A
// blocking write sends everything (Linux semantics of a blocking stream
// socket); reads of odd sizes reassemble the stream byte for byte.
TEST_P(SocketTest, TinyBuffersForcePartialTransfersYetEveryByteArrivesInBothDirections) {
    const size_t size = size_t(scaled(3 << 20, 1 << 20)) + 13;
    const Pattern pat(5);
    const std::vector<uint8_t> data = pat.bytes(0, size);
    uint64_t parks_before = 0, parks_after = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds, 4096)) << strerror(errno);
        parks_before = all_stats().io_parks;
        std::vector<weft_thread_t> ts;
        for (int side = 0; side < 2; ++side) {
            const int fd = fds[side];
            weft_thread_t w, r;
            // writer: one write of everything, then a writev of 37 pieces of another copy
            ASSERT_EQ(0, spawn_on(&w, home(2 * side), [&, fd] {
                EXPECT_EQ(ssize_t(size), weft_write(fd, data.data(), size)) << strerror(errno);
                std::vector<iovec> iov;
                for (size_t off = 0, k = 0; off < size; ++k) {
                    size_t len = std::min(size - off, size / 37 + k * 11);
                    iov.push_back({const_cast<uint8_t *>(data.data()) + off, len});
                    off += len;
                }
                EXPECT_EQ(ssize_t(size), weft_writev(fd, iov.data(), int(iov.size()))) << strerror(errno);
                EXPECT_EQ(0, weft_shutdown(fd, SHUT_WR));
                return nullptr;
            }));
            // reader: chunks of 1, 997, 4096, 65536 bytes until EOF
            ASSERT_EQ(0, spawn_on(&r, home(2 * side + 1), [&, fd, side] {
                EXPECT_EQ(0, weft_set_io_timeout_ns(5 * kSec)); // a stall fails, not hangs
                const size_t chunks[] = {1, 997, 4096, 65536};
                std::vector<uint8_t> buf(65536);
                size_t total = 0;
                for (unsigned k = 0;; ++k) {
                    ssize_t got = weft_read(fd, buf.data(), chunks[k % 4]);
                    if (got <= 0) {
                        EXPECT_EQ(0, got) << "side " << side << " after " << total << " bytes: " << strerror(errno);
                        break;
                    }
                    for (ssize_t j = 0; j < got; ++j)
                        if (buf[size_t(j)] != data[(total + size_t(j)) % size]) {
                            ADD_FAILURE() << "side " << side << ": byte " << total + size_t(j) << " differs";
                            return nullptr;
                        }
                    total += size_t(got);
                    if (total > 2 * size) break;
                }
                EXPECT_EQ(2 * size, total) << "side " << side;
                return nullptr;
            }));
            ts.push_back(w);
            ts.push_back(r);
        }
        for (auto &t : ts) join(t);
        parks_after = all_stats().io_parks;
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_GT(parks_after, parks_before) << "4 KiB buffers and MiB transfers must park";
}

// Many clients connect at the same instant while four acceptors are parked
// on the same listening socket: each connection is accepted exactly once,
// and closing the listener wakes every parked acceptor with EBADF.
TEST_P(SocketTest, AcceptStormWithFourAcceptorsServesEachClientOnce) {
    const int n = int(scaled(1000, 200));
    const int acceptors = 4;
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::atomic<int> accepted{0}, answered{0};
    std::vector<int> end_errno(acceptors, 0);
    ASSERT_EQ(0, run([&] {
        uint16_t port = 0;
        int l = tcp_listen(&port);
        ASSERT_GE(l, 0) << strerror(errno);
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        std::vector<weft_thread_t> acc(acceptors);
        for (int a = 0; a < acceptors; ++a)
            ASSERT_EQ(0, spawn_on(&acc[size_t(a)], home(a), [&, a] {
                for (;;) {
                    sockaddr_in peer{};
                    socklen_t len = sizeof peer;
                    int c = weft_accept(l, (sockaddr *)&peer, &len);
                    if (c < 0) {
                        end_errno[size_t(a)] = errno;
                        return nullptr;
                    }
                    accepted.fetch_add(1);
                    EXPECT_EQ(sizeof peer, size_t(len));
                    EXPECT_EQ(htonl(INADDR_LOOPBACK), peer.sin_addr.s_addr);
                    uint32_t id = 0;
                    if (read_exact(c, &id, 4) == 4 && id < uint32_t(n)) {
                        seen[id].fetch_add(1);
                        uint32_t reply = id + 1;
                        EXPECT_EQ(4, write_all(c, &reply, 4));
                    } else {
                        ADD_FAILURE() << "bad request on an accepted connection";
                    }
                    weft_close(c);
                }
            }));
        // the acceptors are parked before the storm
        EXPECT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + acceptors));
        weft_barrier_t go;
        ASSERT_EQ(0, weft_barrier_init(&go, unsigned(n)));
        std::vector<weft_thread_t> clients(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(0, spawn_on(&clients[size_t(i)], home(i), [&, i] {
                weft_barrier_wait(&go);
                int fd = tcp_connect(port);
                if (fd < 0) {
                    ADD_FAILURE() << "client " << i << ": " << strerror(errno);
                    return nullptr;
                }
                uint32_t id = uint32_t(i), reply = 0;
                if (write_all(fd, &id, 4) == 4 && read_exact(fd, &reply, 4) == 4 && reply == id + 1)
                    answered.fetch_add(1);
                else
                    ADD_FAILURE() << "client " << i << " got no answer";
                weft_close(fd);
                return nullptr;
            }));
        for (auto &t : clients) join(t);
        EXPECT_EQ(0, weft_close(l));
        for (auto &t : acc) join(t);
        weft_barrier_destroy(&go);
    }));
    EXPECT_EQ(n, accepted.load());
    EXPECT_EQ(n, answered.load());
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += seen[size_t(i)].load() != 1;
    EXPECT_EQ(0, wrong) << "requests not served exactly once";
    for (int a = 0; a < acceptors; ++a) EXPECT_EQ(EBADF, end_errno[size_t(a)]) << "acceptor " << a;
}

// 1-byte ping-pong between two threads (on two vprocs when there are
// several): every wake-up must arrive, every byte in order.
TEST_P(SocketTest, PingPongLosesNoWakeup) {
    const int rounds = int(scaled(10000, 2000));
    int done_rounds = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds)) << strerror(errno);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            for (int i = 0; i < rounds; ++i) {
                uint8_t b = 0;
                if (weft_read(fds[1], &b, 1) != 1 || b != uint8_t(i)) {
                    ADD_FAILURE() << "pong side, round " << i;
                    break;
                }
                b = uint8_t(b + 1);
                if (weft_write(fds[1], &b, 1) != 1) break;
            }
            return nullptr;
        }));
        for (int i = 0; i < rounds; ++i) {
            uint8_t b = uint8_t(i);
            if (weft_write(fds[0], &b, 1) != 1 || weft_read(fds[0], &b, 1) != 1 || b != uint8_t(i + 1)) {
                ADD_FAILURE() << "ping side, round " << i << ": " << strerror(errno);
                weft_shutdown(fds[0], SHUT_RDWR);
                break;
            }
            done_rounds = i + 1;
        }
        join(t);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(rounds, done_rounds);
}

// A reader, a writer and an acceptor parked (on another vproc when there
// are several); weft_close from another thread wakes each with -1/EBADF.
TEST_P(SocketTest, CloseWhileParkedWakesEveryWaiterWithEbadf) {
    ssize_t rr = 0, wr = 0;
    int ar = 0, re = 0, we = 0, ae = 0;
    long small_writes = 0;
    ASSERT_EQ(0, run([&] {
        int rd[2], wrp[2];
        ASSERT_TRUE(tcp_pair(rd)) << strerror(errno);
        ASSERT_TRUE(tcp_pair(wrp, 4096)) << strerror(errno);
        uint16_t port = 0;
        int l = tcp_listen(&port);
        ASSERT_GE(l, 0);
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t tr, tw, ta;
        ASSERT_EQ(0, spawn_on(&tr, other(), [&] {
            char c;
            rr = weft_read(rd[0], &c, 1);
            re = errno;
            return nullptr;
        }));
        ASSERT_EQ(0, spawn_on(&ta, other(), [&] {
            ar = weft_accept(l, nullptr, nullptr);
            ae = errno;
            return nullptr;
        }));
        ASSERT_EQ(0, spawn_on(&tw, other(), [&] {
            // 1-byte writes until one parks for good (nobody reads the peer)
            const char c = 'x';
            for (small_writes = 0; small_writes < 10'000'000; ++small_writes) {
                wr = weft_write(wrp[0], &c, 1);
                if (wr != 1) break;
            }
            we = errno;
            return nullptr;
        }));
        // the reader and the acceptor park at once; the writer after filling the buffers
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 3));
        EXPECT_EQ(0, weft_close(rd[0]));
        EXPECT_EQ(0, weft_close(l));
        EXPECT_EQ(0, weft_close(wrp[0]));
        join(tr);
        join(ta);
        join(tw);
        weft_close(rd[1]);
        weft_close(wrp[1]);
    }));
    EXPECT_EQ(-1, rr);
    EXPECT_EQ(EBADF, re) << strerror(re);
    EXPECT_EQ(-1, ar);
    EXPECT_EQ(EBADF, ae) << strerror(ae);
    EXPECT_EQ(-1, wr) << "after " << small_writes << " writes";
    EXPECT_EQ(EBADF, we) << strerror(we);
}

// Two threads on two vprocs meet a blocking pipe for the first time at once.
// weft classifies a descriptor at first sight and makes a pipe non-blocking
// for itself; had both classified it, the second would have read back the
// first's O_NONBLOCK as the program's and returned EAGAIN from a blocking
// read. Both must block until data comes, and get one byte each. Many
// rounds: the window is a few system calls wide.
TEST_P(SocketTest, APipeMetOnTwoVprocsAtOnceStaysBlockingForBoth) {
    if (vprocs() < 2) GTEST_SKIP() << "needs two vprocs";
    const int rounds = int(scaled(300, 100));
    int eagain = 0, wrong = 0;
    ASSERT_EQ(0, run([&] {
        for (int r = 0; r < rounds; ++r) {
            int p[2];
            ASSERT_EQ(0, pipe(p)) << strerror(errno); // not weft_pipe: weft first sees it in the reads
            std::atomic<int> arrived{0};
            int got[2] = {0, 0}, err[2] = {0, 0};
            weft_thread_t t[2];
            for (int i = 0; i < 2; ++i)
                ASSERT_EQ(0, spawn_on(&t[i], i, [&, i] {
                    arrived.fetch_add(1);
                    while (arrived.load() < 2) weft_yield(); // start the reads together
                    char c = 0;
                    got[i] = int(weft_read(p[0], &c, 1));
                    err[i] = errno;
                    return nullptr;
                }));
            while (arrived.load() < 2) weft_yield();
            EXPECT_EQ(0, weft_sleep_ns(200 * kUs)); // both are parked by now, or returned wrongly
            EXPECT_EQ(2, weft_write(p[1], "ab", 2));
            join(t[0]);
            join(t[1]);
            for (int i = 0; i < 2; ++i) {
                if (got[i] == -1 && err[i] == EAGAIN) ++eagain;
                else if (got[i] != 1) ++wrong;
            }
            weft_close(p[0]);
            weft_close(p[1]);
        }
    }));
    EXPECT_EQ(0, eagain) << "blocking reads that returned EAGAIN in " << rounds << " rounds";
    EXPECT_EQ(0, wrong);
}

// weft_close racing a thread parked, or about to park, on the descriptor on
// another vproc: the waiter may link after the close forgot the state (woken
// by it, weft_poll looks again at once) and before close(2) — too late to be woken with EBADF, and its arm would go
// with the file (or fail on the closed number). It must still come back:
// -1/EBADF from accept, POLLNVAL from poll, never a park for ever (the I/O
// timeout turns a stranded waiter into a failure, not a hang). weft-vtserver's
// shutdown hung this way on epoll with 2 vprocs (1 run in 10 of its
// ShutdownTest); here the window is hit rarely: a stress test, bounded.
TEST_P(SocketTest, CloseRacingAThreadAboutToParkNeverStrandsIt) {
    // The race with close(2) is the point; ThreadSanitizer reports exactly it
    // (a close of a descriptor another thread is using).
    if (kTsan) GTEST_SKIP() << "races close against use on purpose: ThreadSanitizer reports that race";
    const int rounds = int(scaled(1000, 200));
    int stranded = 0, wrong = 0;
    ASSERT_EQ(0, run([&] {
        for (int r = 0; r < rounds; ++r) {
            uint16_t port = 0;
            const int l = tcp_listen(&port);
            ASSERT_GE(l, 0) << strerror(errno);
            std::atomic<bool> started{false};
            const uint64_t parks0 = parks(WEFT_PARK_IO);
            int res = 0, err = 0;
            short revents = 0;
            weft_thread_t t;
            ASSERT_EQ(0, spawn_on(&t, other(), [&] {
                weft_set_io_timeout_ns(2'000'000'000);
                started.store(true);
                if (r & 1) {
                    pollfd p{l, POLLIN, 0};
                    res = weft_poll(&p, 1, 2000);
                    revents = p.revents;
                } else {
                    res = weft_accept(l, nullptr, nullptr);
                }
                err = errno;
                return nullptr;
            }));
            // parked (poll looks again when woken: the close's wake sends it
            // straight back in, inside the window), or about to park
            if (r % 4 < 2) {
                ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
            }
            while (!started.load()) weft_yield();
            for (int spin = r % 37 * 40; spin > 0; --spin) __asm__ volatile("pause");
            EXPECT_EQ(0, weft_close(l));
            join(t);
            if (r & 1) {
                if (res == 0) ++stranded;
                else if (res != 1 || !(revents & POLLNVAL)) ++wrong;
            } else {
                if (res == -1 && (err == EAGAIN || err == ETIMEDOUT)) ++stranded;
                else if (res != -1 || err != EBADF) ++wrong;
            }
        }
    }));
    EXPECT_EQ(0, stranded) << "waiters left parked after the close, of " << rounds;
    EXPECT_EQ(0, wrong) << "waiters that came back with something else than EBADF/POLLNVAL";
}

// A reader parked with nothing to read wakes with 0 (EOF) when the peer shuts
// its side down; later reads keep returning 0.
TEST_P(SocketTest, ParkedReaderGetsEofWhenThePeerShutsDown) {
    ssize_t first = -2, second = -2, third = -2;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            char buf[16];
            first = weft_read(fds[0], buf, sizeof buf);
            second = weft_read(fds[0], buf, sizeof buf);
            third = weft_recv(fds[0], buf, sizeof buf, 0);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(0, weft_shutdown(fds[1], SHUT_WR));
        join(t);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(0, first);
    EXPECT_EQ(0, second);
    EXPECT_EQ(0, third);
}

// ---------------------------------------------------------------- errors and limits

// Data written before the peer's shutdown is read first, then EOF.
TEST_P(SocketErrorTest, ReadReturnsTheDataThenEofAfterPeerShutdown) {
    std::string got;
    ssize_t eof = -2;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        ASSERT_EQ(5, weft_write(fds[1], "hello", 5));
        ASSERT_EQ(0, weft_shutdown(fds[1], SHUT_WR));
        char buf[64];
        ssize_t n = read_exact(fds[0], buf, 5);
        if (n > 0) got.assign(buf, size_t(n));
        eof = weft_read(fds[0], buf, sizeof buf);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ("hello", got);
    EXPECT_EQ(0, eof);
}

// A listener with backlog 0 that nobody accepts on: once its queue is full
// the kernel drops SYNs and a blocking connect would wait for minutes; the
// thread's I/O timeout ends it with ETIMEDOUT.
TEST_P(SocketErrorTest, ConnectToAFullBacklogTimesOut) {
    const uint64_t timeout = 200 * kMs;
    int timed_out_at = -1, unexpected = 0;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        uint16_t port = 0;
        int l = tcp_listen(&port, 0);
        ASSERT_GE(l, 0);
        ASSERT_EQ(0, weft_set_io_timeout_ns(timeout));
        std::vector<int> open;
        for (int i = 0; i < 64 && timed_out_at < 0; ++i) {
            int fd = weft_socket(AF_INET, SOCK_STREAM, 0);
            ASSERT_GE(fd, 0);
            sockaddr_in a = loopback(port);
            uint64_t t0 = weft_now_ns();
            int rc = weft_connect(fd, (sockaddr *)&a, sizeof a);
            int e = errno;
            if (rc == 0) {
                open.push_back(fd);
                continue;
            }
            if (e == ETIMEDOUT) {
                timed_out_at = i;
                took = weft_now_ns() - t0;
            } else {
                ++unexpected;
                ADD_FAILURE() << "connect #" << i << ": " << strerror(e);
            }
            weft_close(fd);
        }
        EXPECT_EQ(0, weft_set_io_timeout_ns(0));
        for (int fd : open) weft_close(fd);
        weft_close(l);
    }));
    ASSERT_NE(-1, timed_out_at) << "no connect timed out against a full backlog";
    EXPECT_EQ(0, unexpected);
    EXPECT_GE(took, timeout);
}

// Same, with an absolute deadline instead of a relative timeout.
TEST_P(SocketErrorTest, ConnectHonoursTheIoDeadline) {
    int rc = 0, e = 0;
    uint64_t deadline = 0, ended = 0;
    ASSERT_EQ(0, run([&] {
        uint16_t port = 0;
        int l = tcp_listen(&port, 0);
        ASSERT_GE(l, 0);
        std::vector<int> open;
        for (int i = 0; i < 64; ++i) {
            int fd = weft_socket(AF_INET, SOCK_STREAM, 0);
            ASSERT_GE(fd, 0);
            deadline = weft_now_ns() + 150 * kMs;
            ASSERT_EQ(0, weft_set_io_deadline_ns(deadline));
            sockaddr_in a = loopback(port);
            rc = weft_connect(fd, (sockaddr *)&a, sizeof a);
            e = errno;
            ended = weft_now_ns();
            if (rc == 0) {
                open.push_back(fd);
                continue;
            }
            weft_close(fd);
            break;
        }
        EXPECT_EQ(0, weft_set_io_deadline_ns(0));
        for (int fd : open) weft_close(fd);
        weft_close(l);
    }));
    EXPECT_EQ(-1, rc);
    EXPECT_EQ(ETIMEDOUT, e) << strerror(e);
    EXPECT_GE(ended, deadline);
}

TEST_P(SocketErrorTest, ConnectToAPortWithoutListenerIsRefused) {
    int rc = 0, e = 0;
    ASSERT_EQ(0, run([&] {
        uint16_t port = 0;
        int l = tcp_listen(&port);
        ASSERT_GE(l, 0);
        weft_close(l); // the port is free now
        int fd = weft_socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_GE(fd, 0);
        sockaddr_in a = loopback(port);
        rc = weft_connect(fd, (sockaddr *)&a, sizeof a);
        e = errno;
        weft_close(fd);
    }));
    EXPECT_EQ(-1, rc);
    EXPECT_EQ(ECONNREFUSED, e) << strerror(e);
}

TEST_P(SocketErrorTest, ReadWithNoDataTimesOutAndTheConnectionStaysUsable) {
    const uint64_t timeout = 50 * kMs;
    ssize_t r = 0, later = 0;
    int e = 0;
    uint64_t took = 0;
    char c = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        ASSERT_EQ(0, weft_set_io_timeout_ns(timeout));
        uint64_t t0 = weft_now_ns();
        r = weft_read(fds[0], &c, 1);
        e = errno;
        took = weft_now_ns() - t0;
        ASSERT_EQ(0, weft_set_io_timeout_ns(0));
        ASSERT_EQ(1, weft_write(fds[1], "z", 1));
        later = weft_read(fds[0], &c, 1);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(-1, r);
    EXPECT_EQ(ETIMEDOUT, e) << strerror(e);
    EXPECT_GE(took, timeout);
    EXPECT_EQ(1, later);
    EXPECT_EQ('z', c);
}

// The earlier of the relative timeout and the absolute deadline wins; a
// deadline in the past fails a blocking call at once; the deadline stays
// until cleared.
TEST_P(SocketErrorTest, TheEarlierOfTimeoutAndDeadlineWins) {
    struct Outcome {
        ssize_t r;
        int e;
        uint64_t took, ended;
    };
    Outcome by_deadline{}, by_timeout{}, past{}, still{};
    uint64_t deadline = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        char c;
        auto attempt = [&] {
            uint64_t t0 = weft_now_ns();
            ssize_t r = weft_read(fds[0], &c, 1);
            int e = errno;
            uint64_t t1 = weft_now_ns();
            return Outcome{r, e, t1 - t0, t1};
        };
        ASSERT_EQ(0, weft_set_io_timeout_ns(20 * kSec));
        deadline = weft_now_ns() + 60 * kMs;
        ASSERT_EQ(0, weft_set_io_deadline_ns(deadline));
        by_deadline = attempt();
        still = attempt(); // the deadline has passed and is still set
        ASSERT_EQ(0, weft_set_io_deadline_ns(weft_now_ns() + 20 * kSec));
        ASSERT_EQ(0, weft_set_io_timeout_ns(60 * kMs));
        by_timeout = attempt();
        ASSERT_EQ(0, weft_set_io_timeout_ns(0));
        ASSERT_EQ(0, weft_set_io_deadline_ns(1)); // long past
        past = attempt();
        ASSERT_EQ(0, weft_set_io_deadline_ns(0));
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    for (const Outcome *o : {&by_deadline, &by_timeout, &past, &still}) {
        EXPECT_EQ(-1, o->r);
        EXPECT_EQ(ETIMEDOUT, o->e) << strerror(o->e);
    }
    EXPECT_GE(by_deadline.ended, deadline);
    EXPECT_LT(by_deadline.took, 15 * kSec) << "the 20 s timeout won over the earlier deadline";
    EXPECT_GE(by_timeout.took, 60 * kMs);
    EXPECT_LT(by_timeout.took, 15 * kSec) << "the 20 s deadline won over the earlier timeout";
    EXPECT_LT(past.took, 5 * kSec);
    EXPECT_LT(still.took, 5 * kSec);
}

// The limits only matter when a call would park: data that is already there
// is returned even past the deadline.
TEST_P(SocketErrorTest, ReadyDataIsReturnedEvenPastTheDeadline) {
    ssize_t r = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        ASSERT_EQ(3, weft_write(fds[1], "abc", 3));
        ASSERT_TRUE(wait_until([&] {
            int avail = 0;
            return ioctl_avail(fds[0], &avail) && avail == 3;
        }));
        ASSERT_EQ(0, weft_set_io_deadline_ns(1));
        char buf[8];
        r = weft_read(fds[0], buf, sizeof buf);
        ASSERT_EQ(0, weft_set_io_deadline_ns(0));
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(3, r);
}

// One thread's timeout does not touch another's call: a thread parked with
// no limit outlives a neighbour's timeout and then gets its data.
TEST_P(SocketErrorTest, IoTimeoutBelongsToTheCallingThread) {
    ssize_t patient = 0, hasty = 0;
    int hasty_errno = 0;
    ASSERT_EQ(0, run([&] {
        int a[2], b[2];
        ASSERT_TRUE(tcp_pair(a));
        ASSERT_TRUE(tcp_pair(b));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t p, h;
        ASSERT_EQ(0, spawn(&p, [&] {
            char c;
            patient = weft_read(a[0], &c, 1);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        ASSERT_EQ(0, spawn(&h, [&] {
            EXPECT_EQ(0, weft_set_io_timeout_ns(20 * kMs));
            char c;
            hasty = weft_read(b[0], &c, 1);
            hasty_errno = errno;
            return nullptr;
        }));
        join(h);
        EXPECT_EQ(1, weft_write(a[1], "p", 1));
        join(p);
        for (int fd : {a[0], a[1], b[0], b[1]}) weft_close(fd);
    }));
    EXPECT_EQ(-1, hasty);
    EXPECT_EQ(ETIMEDOUT, hasty_errno);
    EXPECT_EQ(1, patient) << "the parked thread without a limit was woken";
}

// A write into a socket whose peer does not read sends what the buffers
// take, returns that part when the timeout expires, and the next write
// fails with ETIMEDOUT. The peer then reads exactly the bytes reported.
TEST_P(SocketErrorTest, APartlyBlockedWriteReturnsThePartSentThenTimesOut) {
    const size_t size = 4 << 20;
    const Pattern pat(9);
    const std::vector<uint8_t> data = pat.bytes(0, size);
    ssize_t first = 0, total = 0, received = 0, extra = 0;
    int last_errno = 0, extra_errno = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds, 4096));
        ASSERT_EQ(0, weft_set_io_timeout_ns(100 * kMs));
        first = weft_write(fds[0], data.data(), size);
        total = std::max<ssize_t>(first, 0);
        for (int i = 0; i < 100; ++i) {
            ssize_t w = weft_write(fds[0], data.data() + total, size - size_t(total));
            if (w < 0) {
                last_errno = errno;
                break;
            }
            total += w;
        }
        std::vector<uint8_t> in(size);
        received = read_exact(fds[1], in.data(), size_t(total));
        EXPECT_EQ(-1, pat.mismatch(in.data(), 0, size_t(std::max<ssize_t>(received, 0))));
        extra = weft_read(fds[1], in.data(), 1); // nothing more: times out
        extra_errno = errno;
        EXPECT_EQ(0, weft_set_io_timeout_ns(0));
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_GT(first, 0);
    EXPECT_LT(first, ssize_t(size));
    EXPECT_EQ(ETIMEDOUT, last_errno) << strerror(last_errno);
    EXPECT_EQ(total, received);
    EXPECT_EQ(-1, extra);
    EXPECT_EQ(ETIMEDOUT, extra_errno);
}

// No SIGPIPE: writing to a pipe or socket whose reader is gone returns
// -1/EPIPE and the process lives on (SIGPIPE is at its default, deadly
// action during the test); no SIGPIPE is left pending either.
TEST_P(SocketErrorTest, WriteToAPipeWhoseReaderClosedIsEpipeWithoutSigpipe) {
    struct sigaction dfl {}, old{};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, &old);
    std::vector<std::pair<ssize_t, int>> results;
    bool pending = false;
    ASSERT_EQ(0, run([&] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        EXPECT_EQ(0, weft_close(p[0]));
        results.push_back({weft_write(p[1], "x", 1), errno});
        iovec iov{const_cast<char *>("yy"), 2};
        results.push_back({weft_writev(p[1], &iov, 1), errno});
        weft_close(p[1]);
        int s[2];
        ASSERT_TRUE(tcp_pair(s));
        EXPECT_EQ(0, weft_shutdown(s[0], SHUT_WR));
        results.push_back({weft_write(s[0], "x", 1), errno});
        results.push_back({weft_send(s[0], "x", 1, 0), errno});
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        results.push_back({weft_sendmsg(s[0], &m, 0), errno});
        weft_close(s[0]);
        weft_close(s[1]);
        sigset_t set;
        sigpending(&set);
        pending = sigismember(&set, SIGPIPE);
    }));
    sigaction(SIGPIPE, &old, nullptr);
    ASSERT_EQ(5u, results.size());
    for (size_t i = 0; i < results.size(); ++i) {
        EXPECT_EQ(-1, results[i].first) << "call " << i;
        EXPECT_EQ(EPIPE, results[i].second) << "call " << i << ": " << strerror(results[i].second);
    }
    EXPECT_FALSE(pending) << "a SIGPIPE is left pending on the vproc's kernel thread";
}

// A writer parked on a full pipe wakes with EPIPE when the reader closes.
TEST_P(SocketErrorTest, WriterParkedOnAFullPipeGetsEpipeWhenTheReaderCloses) {
    struct sigaction dfl {}, old{};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, &old);
    ssize_t w = 0;
    int e = 0;
    ASSERT_EQ(0, run([&] {
        int p[2];
        ASSERT_EQ(0, pipe(p));
        fcntl(p[1], F_SETPIPE_SZ, 4096);
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            const char c = 'x';
            for (long i = 0; i < 10'000'000; ++i)
                if ((w = weft_write(p[1], &c, 1)) != 1) break;
            e = errno;
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(0, weft_close(p[0]));
        join(t);
        weft_close(p[1]);
    }));
    sigaction(SIGPIPE, &old, nullptr);
    EXPECT_EQ(-1, w);
    EXPECT_EQ(EPIPE, e) << strerror(e);
}

// The peer closed: writes soon fail with EPIPE or ECONNRESET (never SIGPIPE).
TEST_P(SocketErrorTest, WritingToAClosedPeerFailsWithEpipeOrEconnreset) {
    struct sigaction dfl {}, old{};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, &old);
    int e = 0, writes = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        EXPECT_EQ(0, weft_close(fds[1]));
        for (writes = 0; writes < 1000; ++writes) {
            if (weft_write(fds[0], "data", 4) < 0) {
                e = errno;
                break;
            }
            weft_sleep_ns(kMs);
        }
        weft_close(fds[0]);
    }));
    sigaction(SIGPIPE, &old, nullptr);
    EXPECT_TRUE(e == EPIPE || e == ECONNRESET) << "after " << writes << " writes: " << strerror(e);
}

// An abortive close (SO_LINGER 0) sends a reset: a parked reader wakes with
// ECONNRESET, the next read sees EOF and a write EPIPE.
TEST_P(SocketErrorTest, PeerResetWakesAParkedReaderWithEconnreset) {
    struct sigaction dfl {}, old{};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, &old);
    ssize_t r = 0, after = -2, w = 0;
    int re = 0, we = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            char c;
            r = weft_read(fds[0], &c, 1);
            re = errno;
            after = weft_read(fds[0], &c, 1);
            w = weft_write(fds[0], "x", 1);
            we = errno;
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        linger lg{1, 0};
        ASSERT_EQ(0, setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
        EXPECT_EQ(0, weft_close(fds[1]));
        join(t);
        weft_close(fds[0]);
    }));
    sigaction(SIGPIPE, &old, nullptr);
    EXPECT_EQ(-1, r);
    EXPECT_EQ(ECONNRESET, re) << strerror(re);
    EXPECT_EQ(0, after);
    EXPECT_EQ(-1, w);
    EXPECT_TRUE(we == EPIPE || we == ECONNRESET) << strerror(we);
}

TEST_P(SocketErrorTest, InvalidDescriptorIsEbadf) {
    std::vector<std::pair<std::string, int>> bad; // call, errno when it did not fail with EBADF
    ASSERT_EQ(0, run([&] {
        TempFile file(1);
        ASSERT_GE(file.fd(), 0);
        for (int fd : {unused_fd(), -1, 1 << 20}) {
            char buf[8];
            iovec iov{buf, sizeof buf};
            msghdr m{};
            m.msg_iov = &iov;
            m.msg_iovlen = 1;
            sockaddr_in a = loopback(9);
            socklen_t len = sizeof a;
            struct stat st;
            off_t off = 0;
            auto check = [&](const char *name, long rc) {
                int e = errno;
                if (rc != -1 || e != EBADF)
                    bad.push_back({std::string(name) + "(fd " + std::to_string(fd) + ") = " + std::to_string(rc), e});
            };
            check("read", weft_read(fd, buf, 1));
            check("write", weft_write(fd, buf, 1));
            check("readv", weft_readv(fd, &iov, 1));
            check("writev", weft_writev(fd, &iov, 1));
            check("recv", weft_recv(fd, buf, 1, 0));
            check("send", weft_send(fd, buf, 1, 0));
            check("recvmsg", weft_recvmsg(fd, &m, 0));
            check("sendmsg", weft_sendmsg(fd, &m, 0));
            check("accept", weft_accept(fd, (sockaddr *)&a, &len));
            check("accept4", weft_accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
            check("connect", weft_connect(fd, (sockaddr *)&a, sizeof a));
            check("shutdown", weft_shutdown(fd, SHUT_RDWR));
            check("pread", weft_pread(fd, buf, 1, 0));
            check("pwrite", weft_pwrite(fd, buf, 1, 0));
            check("fsync", weft_fsync(fd));
            check("fstat", weft_fstat(fd, &st));
            check("fcntl", weft_fcntl(fd, F_GETFL));
            check("sendfile out", weft_sendfile(fd, file.fd(), &off, 1));
            check("sendfile in", weft_sendfile(file.fd(), fd, &off, 1));
            check("close", weft_close(fd));
        }
    }));
    for (auto &[what, e] : bad) ADD_FAILURE() << what << ", errno " << e << " (" << strerror(e) << "), want -1/EBADF";
}

// A descriptor the program made O_NONBLOCK returns EAGAIN instead of
// parking: at creation (SOCK_NONBLOCK, pipe2, accept4), with weft_fcntl
// after weft used it, or with plain fcntl before weft saw it. MSG_DONTWAIT
// on a blocking socket too. No call parks.
TEST_P(SocketErrorTest, DescriptorsTheProgramMadeNonblockingReturnEagain) {
    std::vector<std::pair<std::string, int>> wrong;
    uint64_t io_parks = 1;
    ASSERT_EQ(0, run([&] {
        auto expect_eagain = [&](const char *name, long rc) {
            int e = errno;
            if (rc != -1 || (e != EAGAIN && e != EWOULDBLOCK)) wrong.push_back({name, e});
        };
        char buf[64];
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        ASSERT_EQ(1, weft_write(fds[1], "a", 1));
        ASSERT_EQ(1, weft_read(fds[0], buf, 1)); // weft has used fds[0] in blocking mode
        const uint64_t before = all_stats().io_parks;
        int fl = weft_fcntl(fds[0], F_GETFL);
        ASSERT_GE(fl, 0);
        EXPECT_EQ(0, fl & O_NONBLOCK);
        ASSERT_EQ(0, weft_fcntl(fds[0], F_SETFL, long(fl | O_NONBLOCK)));
        EXPECT_NE(0, weft_fcntl(fds[0], F_GETFL) & O_NONBLOCK);
        expect_eagain("read after F_SETFL O_NONBLOCK", weft_read(fds[0], buf, 1));
        expect_eagain("recv after F_SETFL O_NONBLOCK", weft_recv(fds[0], buf, 1, 0));
        expect_eagain("recv MSG_DONTWAIT on a blocking socket", weft_recv(fds[1], buf, 1, MSG_DONTWAIT));

        int p[2];
        ASSERT_EQ(0, pipe2(p, O_NONBLOCK)); // made non-blocking before weft saw it
        expect_eagain("read of an O_NONBLOCK pipe", weft_read(p[0], buf, 1));
        EXPECT_NE(0, weft_fcntl(p[0], F_GETFL) & O_NONBLOCK);
        fcntl(p[1], F_SETPIPE_SZ, 4096);
        std::vector<char> big(1 << 16, 'x');
        ssize_t w = weft_write(p[1], big.data(), big.size());
        EXPECT_GT(w, 0);
        EXPECT_LT(w, ssize_t(big.size())) << "a non-blocking pipe takes only what fits";
        expect_eagain("write to a full O_NONBLOCK pipe", weft_write(p[1], big.data(), big.size()));

        int q[2];
        ASSERT_EQ(0, pipe(q));
        ASSERT_EQ(0, fcntl(q[0], F_SETFL, O_NONBLOCK)); // plain fcntl, before weft
        expect_eagain("read of a pipe set O_NONBLOCK with fcntl", weft_read(q[0], buf, 1));

        uint16_t port = 0;
        int l = tcp_listen(&port, SOMAXCONN, SOCK_NONBLOCK);
        ASSERT_GE(l, 0);
        expect_eagain("accept on a non-blocking listener", weft_accept(l, nullptr, nullptr));
        int c = weft_socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a = loopback(port);
        ASSERT_EQ(0, weft_connect(c, (sockaddr *)&a, sizeof a));
        int s = -1;
        for (int i = 0; i < 1000 && s < 0; ++i) { // the connection is queued at once on loopback
            s = weft_accept4(l, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (s < 0) weft_yield();
        }
        ASSERT_GE(s, 0) << strerror(errno);
        EXPECT_NE(0, weft_fcntl(s, F_GETFL) & O_NONBLOCK);
        EXPECT_NE(0, weft_fcntl(s, F_GETFD) & FD_CLOEXEC);
        expect_eagain("read of a socket accepted with SOCK_NONBLOCK", weft_read(s, buf, 1));
        io_parks = all_stats().io_parks - before;
        for (int fd : {fds[0], fds[1], p[0], p[1], q[0], q[1], l, c, s}) weft_close(fd);
    }));
    for (auto &[what, e] : wrong) ADD_FAILURE() << what << ": errno " << e << " (" << strerror(e) << "), want -1/EAGAIN";
    EXPECT_EQ(0u, io_parks) << "a non-blocking descriptor parked";
}

// Clearing O_NONBLOCK with weft_fcntl brings back the blocking behaviour:
// the read parks until data comes.
TEST_P(SocketErrorTest, ClearingNonblockWithFcntlMakesReadsParkAgain) {
    ssize_t r = 0;
    char c = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        int fl = weft_fcntl(fds[0], F_GETFL);
        ASSERT_EQ(0, weft_fcntl(fds[0], F_SETFL, long(fl | O_NONBLOCK)));
        ASSERT_EQ(-1, weft_read(fds[0], &c, 1));
        ASSERT_EQ(0, weft_fcntl(fds[0], F_SETFL, long(fl & ~O_NONBLOCK)));
        EXPECT_EQ(0, weft_fcntl(fds[0], F_GETFL) & O_NONBLOCK);
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            r = weft_read(fds[0], &c, 1);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(1, weft_write(fds[1], "q", 1));
        join(t);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(1, r);
    EXPECT_EQ('q', c);
}

// A non-blocking connect made by the program: EINPROGRESS (or 0), then the
// socket becomes writable through weft_poll with SO_ERROR 0.
TEST_P(SocketErrorTest, NonblockingConnectCompletesThroughPoll) {
    int rc = 0, e = 0, n = 0, soerr = -1;
    short revents = 0;
    ASSERT_EQ(0, run([&] {
        uint16_t port = 0;
        int l = tcp_listen(&port);
        ASSERT_GE(l, 0);
        int fd = weft_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        ASSERT_GE(fd, 0);
        sockaddr_in a = loopback(port);
        rc = weft_connect(fd, (sockaddr *)&a, sizeof a);
        e = errno;
        pollfd pf{fd, POLLOUT, 0};
        n = weft_poll(&pf, 1, 10000);
        revents = pf.revents;
        socklen_t len = sizeof soerr;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        int s = weft_accept(l, nullptr, nullptr);
        EXPECT_GE(s, 0);
        EXPECT_EQ(2, weft_write(fd, "ok", 2));
        char buf[2];
        EXPECT_EQ(2, read_exact(s, buf, 2));
        weft_close(s);
        weft_close(fd);
        weft_close(l);
    }));
    EXPECT_TRUE(rc == 0 || (rc == -1 && e == EINPROGRESS)) << rc << " " << strerror(e);
    EXPECT_EQ(1, n);
    EXPECT_TRUE(revents & POLLOUT);
    EXPECT_EQ(0, soerr);
}

// UDP on loopback: a parked receiver wakes on a datagram; boundaries are
// kept; a short buffer truncates as recv(2) does; recvmsg reports the source.
TEST_P(SocketErrorTest, UdpDatagramsKeepTheirBoundaries) {
    const size_t sizes[] = {1, 1000, 60000};
    std::vector<ssize_t> got;
    bool contents_ok = true, source_ok = false;
    ssize_t truncated = 0;
    ASSERT_EQ(0, run([&] {
        int rx = weft_socket(AF_INET, SOCK_DGRAM, 0), tx = weft_socket(AF_INET, SOCK_DGRAM, 0);
        ASSERT_GE(rx, 0);
        ASSERT_GE(tx, 0);
        sockaddr_in a = loopback(0), txa = loopback(0);
        socklen_t len = sizeof a;
        ASSERT_EQ(0, bind(rx, (sockaddr *)&a, sizeof a));
        ASSERT_EQ(0, getsockname(rx, (sockaddr *)&a, &len));
        ASSERT_EQ(0, bind(tx, (sockaddr *)&txa, sizeof txa));
        len = sizeof txa;
        ASSERT_EQ(0, getsockname(tx, (sockaddr *)&txa, &len));
        ASSERT_EQ(0, weft_connect(tx, (sockaddr *)&a, sizeof a));
        const Pattern pat(11);
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            std::vector<uint8_t> buf(65536);
            for (size_t i = 0; i < std::size(sizes); ++i) {
                ssize_t r = weft_recv(rx, buf.data(), buf.size(), 0);
                got.push_back(r);
                if (r > 0 && pat.mismatch(buf.data(), i * 70000, size_t(r)) != -1) contents_ok = false;
            }
            truncated = weft_recv(rx, buf.data(), 10, 0);
            sockaddr_in from{};
            iovec iov{buf.data(), buf.size()};
            msghdr m{};
            m.msg_name = &from;
            m.msg_namelen = sizeof from;
            m.msg_iov = &iov;
            m.msg_iovlen = 1;
            ssize_t r = weft_recvmsg(rx, &m, 0);
            source_ok = r == 4 && from.sin_port == txa.sin_port && from.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        for (size_t i = 0; i < std::size(sizes); ++i) {
            std::vector<uint8_t> d = pat.bytes(i * 70000, sizes[i]);
            EXPECT_EQ(ssize_t(sizes[i]), weft_send(tx, d.data(), d.size(), 0));
        }
        std::vector<uint8_t> big(1000, 'b');
        EXPECT_EQ(1000, weft_send(tx, big.data(), big.size(), 0));
        EXPECT_EQ(4, weft_send(tx, "last", 4, 0));
        join(t);
        weft_close(rx);
        weft_close(tx);
    }));
    ASSERT_EQ(std::size(sizes), got.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(ssize_t(sizes[i]), got[i]);
    EXPECT_TRUE(contents_ok);
    EXPECT_EQ(10, truncated);
    EXPECT_TRUE(source_ok);
}

// sendmsg/recvmsg with scatter-gather and a descriptor passed over a Unix
// socket pair (SCM_RIGHTS); the receiver was parked before the message.
TEST_P(SocketErrorTest, SendmsgAndRecvmsgCarryIovecsAndDescriptors) {
    std::string received;
    int passed_fd = -1;
    bool ctrunc = true;
    char via_passed[6] = {};
    ASSERT_EQ(0, run([&] {
        int sv[2], p[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        ASSERT_EQ(0, pipe(p));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            char a[3], b[4], c[32];
            iovec iov[3] = {{a, sizeof a}, {b, sizeof b}, {c, sizeof c}};
            alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
            msghdr m{};
            m.msg_iov = iov;
            m.msg_iovlen = 3;
            m.msg_control = ctl;
            m.msg_controllen = sizeof ctl;
            ssize_t r = weft_recvmsg(sv[1], &m, 0);
            if (r > 0) {
                std::string all = std::string(a, 3) + std::string(b, 4) + std::string(c, sizeof c);
                received = all.substr(0, size_t(r));
            }
            ctrunc = m.msg_flags & MSG_CTRUNC;
            for (cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                    std::memcpy(&passed_fd, CMSG_DATA(cm), sizeof(int));
            if (passed_fd >= 0) {
                EXPECT_EQ(5, weft_write(passed_fd, "hello", 5));
                weft_close(passed_fd);
            }
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        char x[] = "scatter", y[] = "-gather";
        iovec iov[2] = {{x, 7}, {y, 7}};
        alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = 2;
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cm), &p[1], sizeof(int));
        EXPECT_EQ(14, weft_sendmsg(sv[0], &m, 0));
        join(t);
        EXPECT_EQ(5, read_exact(p[0], via_passed, 5));
        for (int fd : {sv[0], sv[1], p[0], p[1]}) weft_close(fd);
    }));
    EXPECT_EQ("scatter-gather", received);
    EXPECT_GE(passed_fd, 0);
    EXPECT_FALSE(ctrunc);
    EXPECT_STREQ("hello", via_passed);
}

// readv/writev as the plain calls: scatter into odd pieces, writev of
// iovcnt 0 gives 0, a negative or oversized iovcnt EINVAL.
TEST_P(SocketErrorTest, ReadvAndWritevFollowThePlainCalls) {
    std::string got;
    ssize_t zero_w = -2, neg = 0, big = 0;
    int neg_e = 0, big_e = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        char a[] = "one", b[] = "two", c[] = "three";
        iovec out[3] = {{a, 3}, {b, 3}, {c, 5}};
        ASSERT_EQ(11, weft_writev(fds[0], out, 3));
        char x[2], y[5], z[4];
        iovec in[3] = {{x, 2}, {y, 5}, {z, 4}};
        while (got.size() < 11) { // may arrive in pieces; each readv fills from x on
            ssize_t r = weft_readv(fds[1], in, 3);
            ASSERT_GT(r, 0);
            std::string all = std::string(x, 2) + std::string(y, 5) + std::string(z, 4);
            got += all.substr(0, size_t(r));
        }
        zero_w = weft_writev(fds[0], out, 0);
        neg = weft_writev(fds[0], out, -1);
        neg_e = errno;
        std::vector<iovec> many(IOV_MAX + 1, iovec{a, 1});
        big = weft_writev(fds[0], many.data(), int(many.size()));
        big_e = errno;
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ("onetwothree", got);
    EXPECT_EQ(0, zero_w);
    EXPECT_EQ(-1, neg);
    EXPECT_EQ(EINVAL, neg_e);
    EXPECT_EQ(-1, big);
    EXPECT_EQ(EINVAL, big_e);
}

// Reading 0 bytes returns 0 at once, as read(2) and readv(2) do, even on an
// empty socket (the I/O timeout only turns a wrong park into a failure).
TEST_P(SocketErrorTest, ReadingZeroBytesReturnsZeroAtOnce) {
    std::vector<std::pair<ssize_t, int>> res;
    ASSERT_EQ(0, run([&] {
        int fds[2], p[2];
        ASSERT_TRUE(tcp_pair(fds));
        ASSERT_EQ(0, pipe(p));
        ASSERT_EQ(0, weft_set_io_timeout_ns(2 * kSec));
        char c;
        iovec iov{&c, 1};
        for (int fd : {fds[0], p[0]}) {
            res.push_back({weft_read(fd, &c, 0), errno});
            res.push_back({weft_readv(fd, &iov, 0), errno});
        }
        EXPECT_EQ(0, weft_set_io_timeout_ns(0));
        for (int fd : {fds[0], fds[1], p[0], p[1]}) weft_close(fd);
    }));
    const char *what[] = {"read(socket, 0)", "readv(socket, iovcnt 0)", "read(pipe, 0)", "readv(pipe, iovcnt 0)"};
    ASSERT_EQ(4u, res.size());
    for (size_t i = 0; i < res.size(); ++i)
        EXPECT_EQ(0, res[i].first) << what[i] << ": " << strerror(res[i].second);
}

// Data and the peer's FIN arrive together while the reader is parked: the
// reader gets the data (a short read), then EOF. Found against the
// edge-triggered backends: the short read marked the socket drained and the
// second read parked for ever although the FIN was already queued.
TEST_P(SocketTest, DataAndFinArrivingTogetherGiveTheDataThenEof) {
    ssize_t first = -2, second = -2;
    int second_errno = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            EXPECT_EQ(0, weft_set_io_timeout_ns(2 * kSec)); // a lost EOF fails, not hangs
            char buf[64];
            first = weft_read(fds[0], buf, sizeof buf);
            second = weft_read(fds[0], buf, sizeof buf);
            second_errno = errno;
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(5, weft_write(fds[1], "hello", 5));
        EXPECT_EQ(0, weft_shutdown(fds[1], SHUT_WR));
        join(t);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(5, first);
    EXPECT_EQ(0, second) << "EOF lost after a short read: " << strerror(second_errno);
}

// The same with an abortive close: data, then ECONNRESET or EOF, never a hang.
TEST_P(SocketTest, DataAndResetArrivingTogetherGiveTheDataThenTheError) {
    ssize_t first = -2, second = -2;
    int second_errno = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        const uint64_t parks0 = parks(WEFT_PARK_IO);
        weft_thread_t t;
        ASSERT_EQ(0, spawn_on(&t, other(), [&] {
            EXPECT_EQ(0, weft_set_io_timeout_ns(2 * kSec));
            char buf[64];
            first = weft_read(fds[0], buf, sizeof buf);
            second = weft_read(fds[0], buf, sizeof buf);
            second_errno = errno;
            return nullptr;
        }));
        ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
        EXPECT_EQ(5, weft_write(fds[1], "hello", 5));
        linger lg{1, 0};
        ASSERT_EQ(0, setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
        EXPECT_EQ(0, weft_close(fds[1]));
        join(t);
        weft_close(fds[0]);
    }));
    // the reset may discard the unread data: then the first read reports it
    if (first == 5) {
        EXPECT_TRUE(second == 0 || (second == -1 && second_errno == ECONNRESET))
            << second << ": " << strerror(second_errno);
    } else {
        EXPECT_EQ(-1, first);
    }
}

// Counters: a read that finds data makes system calls but does not park; a
// read that must wait parks (io_parks and parks[WEFT_PARK_IO]) and is woken
// by a reaped event.
TEST_P(SocketErrorTest, CountersSeparateReadyCallsFromParkedOnes) {
    weft_stats_t s0{}, s1{}, s2{};
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        char c;
        ASSERT_EQ(1, weft_write(fds[1], "r", 1));
        ASSERT_TRUE(wait_until([&] {
            int avail = 0;
            return ioctl_avail(fds[0], &avail) && avail == 1;
        }));
        s0 = all_stats();
        ASSERT_EQ(1, weft_read(fds[0], &c, 1));
        s1 = all_stats();
        weft_thread_t t;
        ASSERT_EQ(0, spawn(&t, [&] {
            EXPECT_EQ(1, weft_read(fds[0], &c, 1));
            return nullptr;
        }));
        ASSERT_TRUE(wait_until([&] { return all_stats().io_parks > s1.io_parks; }));
        ASSERT_EQ(1, weft_write(fds[1], "p", 1));
        join(t);
        s2 = all_stats();
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_GE(s1.io_syscalls - s0.io_syscalls, 1u);
    EXPECT_EQ(0u, s1.io_parks - s0.io_parks) << "a read that found data parked";
    EXPECT_EQ(s0.parks[WEFT_PARK_IO], s1.parks[WEFT_PARK_IO]);
    EXPECT_GE(s2.io_parks - s1.io_parks, 1u);
    EXPECT_GE(s2.parks[WEFT_PARK_IO] - s1.parks[WEFT_PARK_IO], 1u);
    EXPECT_GE(s2.io_completions - s1.io_completions, 1u);
    EXPECT_GE(s2.io_waits - s1.io_waits, 1u);
    EXPECT_GE(s2.io_syscalls - s1.io_syscalls, 2u); // the failed try, the retry, the write
}


// io_uring's poll holds a reference to the file, so weft_close removes the
// poll before close(2), and the socket is released only once the removal
// has completed. The vproc's one thread parks on a socket (arming its
// poll), the main thread closes it and then computes for up to 3 s without
// a weft call — no switch, no reap — while a kernel thread on the peer
// watches for the close. Two ways the poll survived, each fixed and each
// failing its test without the fix (docs/io.md):
//  - with DEFER_TASKRUN (WEFT_DEFER=1) the removal's completion is kernel
//    work deferred until the vproc next asks for events: weft_close asks;
//  - a poll with an event on its way refuses the removal (EALREADY) and
//    polls on, on either ring mode: weft_close removes it again.
class UringCloseTest : public ::testing::TestWithParam<const char *> {
protected:
    struct Seen {
        bool while_busy = false; // the peer saw the close while the vproc computed
        ssize_t rr = 0;          // the parked read's result and errno
        int re = 0;
    };
    // event: the peer writes a byte just before the close, so an event is
    // on its way to the poll as it is removed.
    Seen close_while_computing(bool event) {
        struct Env {
            explicit Env(bool defer) { setenv("WEFT_DEFER", defer ? "1" : "0", 1); }
            ~Env() { unsetenv("WEFT_DEFER"); }
        } env(std::string(GetParam()) == "defer");
        Seen seen;
        if (running_backend("uring") != "uring") return seen;
        Watchdog dog(30);
        int sv[2];
        EXPECT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) << strerror(errno);
        std::atomic<bool> closed{false}, go{false};
        std::thread peer([&] { // a plain kernel thread, not weft's
            while (!go.load()) std::this_thread::yield();
            timeval tv{5, 0};
            setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            char c;
            ssize_t r = recv(sv[1], &c, 1, 0);
            // closed: EOF, or ECONNRESET (it closed with our byte unread)
            if (r == 0 || (r < 0 && errno == ECONNRESET)) closed = true;
        });
        weft_config cfg;
        weft_config_init(&cfg);
        cfg.io = "uring";
        cfg.vprocs = 1;
        EXPECT_EQ(0, run_cfg(cfg, [&] {
            const uint64_t parks0 = parks(WEFT_PARK_IO);
            weft_thread_t t;
            ASSERT_EQ(0, spawn_on(&t, 0, [&] { // parks on sv[0]: its poll is armed
                char c;
                seen.rr = weft_read(sv[0], &c, 1);
                seen.re = errno;
                return nullptr;
            }));
            ASSERT_TRUE(wait_parks(WEFT_PARK_IO, parks0 + 1));
            if (event) {
                EXPECT_EQ(1, write(sv[1], "x", 1)); // the plain call: not yet delivered
            }
            EXPECT_EQ(0, weft_close(sv[0]));
            go = true;
            const uint64_t until = weft_now_ns() + 3'000'000'000ull;
            while (!closed.load() && weft_now_ns() < until) {
            }
            seen.while_busy = closed.load();
            join(t);
        }));
        go = true;
        peer.join();
        close(sv[1]);
        return seen;
    }
};
INSTANTIATE_TEST_SUITE_P(Io, UringCloseTest, ::testing::Values("coop", "defer"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });

TEST_P(UringCloseTest, AClosedSocketReachesThePeerWhileTheVprocComputes) {
    if (running_backend("uring") != "uring") GTEST_SKIP() << "io_uring refused by the kernel here";
    Seen seen = close_while_computing(false);
    EXPECT_TRUE(seen.while_busy) << "the peer saw no close while the vproc computed (" << GetParam() << " ring)";
    EXPECT_EQ(-1, seen.rr);
    EXPECT_EQ(EBADF, seen.re) << strerror(seen.re);
}

TEST_P(UringCloseTest, AClosedSocketWithAnEventOnItsWayReachesThePeer) {
    if (running_backend("uring") != "uring") GTEST_SKIP() << "io_uring refused by the kernel here";
    Seen seen = close_while_computing(true);
    EXPECT_TRUE(seen.while_busy) << "the peer saw no close while the vproc computed (" << GetParam() << " ring)";
    EXPECT_EQ(-1, seen.rr); // woken by the close: the byte came too, but the close wins
    EXPECT_EQ(EBADF, seen.re) << strerror(seen.re);
}

} // namespace
