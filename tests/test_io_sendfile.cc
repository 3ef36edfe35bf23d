// weft_sendfile in its three strategies (non-blocking, blocking in an
// offload worker, splice), on every backend: the same bytes for files of
// 0 B, 1 B, 4095 B and 1 MiB+7 (and 100 MiB once per strategy on uring and
// epoll), through tiny socket buffers, into a pipe; the offset pointer and
// the file position; EOF; the I/O timeout; a non-blocking socket; the
// configured default strategy; the counters.
#include <algorithm>
#include <atomic>
#include <memory>

#include "io_support.hpp"

namespace {

using namespace wt;
using namespace wt::io;

const int kModes[] = {WEFT_SENDFILE_NONBLOCKING, WEFT_SENDFILE_BLOCKING, WEFT_SENDFILE_SPLICE};

const char *mode_name(int m) {
    switch (m) {
    case WEFT_SENDFILE_NONBLOCKING: return "nonblocking";
    case WEFT_SENDFILE_BLOCKING: return "blocking";
    case WEFT_SENDFILE_SPLICE: return "splice";
    default: return "default";
    }
}

class SendfileTest : public IoTest {};
WEFT_ON_BACKENDS(SendfileTest);

class SendfileVprocsTest : public IoTest {};
WEFT_ON_BACKENDS_AND_VPROCS(SendfileVprocsTest);

class SendfileLargeTest : public IoTest {};
INSTANTIATE_TEST_SUITE_P(Io, SendfileLargeTest,
                         ::testing::Values(Param{"uring", 1}, Param{"epoll", 1}), param_name);

struct Transfer {
    ssize_t sent = -2;
    int err = 0;
    off_t off_after = -1;
    size_t received = 0;
    long mismatch = -2; // first differing byte in the stream, -1 if none
    uint64_t counted = 0; // sendfile_bytes delta
    uint64_t offloaded = 0; // offloaded delta
};

std::ostream &operator<<(std::ostream &os, const Transfer &t) {
    return os << "{sent " << t.sent << " errno " << t.err << " offset after " << t.off_after << " received "
              << t.received << " first mismatch " << t.mismatch << "}";
}

// Reads `fd` until EOF on its own thread and compares with Pattern(seed)
// from `base`. Call from a weft thread; join with finish().
class StreamChecker {
public:
    // limit: stop after that many bytes instead of reading to EOF.
    StreamChecker(int fd, uint32_t seed, uint64_t base, int vproc, size_t limit = SIZE_MAX) : pat_(seed) {
        EXPECT_EQ(0, spawn_on(&t_, vproc, [this, fd, base, limit] {
            // a stall of 5 s is a failure (a lost wake-up or a lost EOF), not a hang
            EXPECT_EQ(0, weft_set_io_timeout_ns(5 * kSec));
            std::vector<uint8_t> buf(256 << 10);
            while (received_ < limit) {
                ssize_t r = weft_read(fd, buf.data(), std::min(buf.size(), limit - received_));
                if (r <= 0) {
                    EXPECT_EQ(0, r) << "receiver, after " << received_ << " bytes: " << strerror(errno);
                    break;
                }
                if (mismatch_ < 0) {
                    long m = pat_.mismatch(buf.data(), base + received_, size_t(r));
                    if (m >= 0) mismatch_ = long(received_) + m;
                }
                received_ += size_t(r);
            }
            return nullptr;
        }));
    }
    void finish(Transfer &t) {
        join(t_);
        t.received = received_;
        t.mismatch = mismatch_;
    }

private:
    Pattern pat_;
    weft_thread_t t_{};
    size_t received_ = 0;
    long mismatch_ = -1;
};

// count bytes of file_fd from offset over a fresh loopback TCP connection
// with `mode`; receiver on `rx_vproc`. Call from a weft thread.
Transfer send_over_tcp(int file_fd, uint32_t seed, off_t offset, size_t count, int mode, int bufs = 0,
                       int rx_vproc = -1) {
    Transfer t;
    int fds[2];
    if (!tcp_pair(fds, bufs)) {
        ADD_FAILURE() << "tcp_pair: " << strerror(errno);
        return t;
    }
    StreamChecker rx(fds[1], seed, uint64_t(offset), rx_vproc);
    weft_stats_t s0 = all_stats();
    off_t off = offset;
    t.sent = weft_sendfile_mode(fds[0], file_fd, &off, count, mode);
    t.err = errno;
    t.off_after = off;
    weft_stats_t s1 = all_stats();
    t.counted = s1.sendfile_bytes - s0.sendfile_bytes;
    t.offloaded = s1.offloaded - s0.offloaded;
    EXPECT_EQ(0, weft_shutdown(fds[0], SHUT_WR));
    rx.finish(t);
    weft_close(fds[0]);
    weft_close(fds[1]);
    return t;
}

void expect_whole(const Transfer &t, size_t count, const std::string &what) {
    EXPECT_EQ(ssize_t(count), t.sent) << what << " " << t << ": " << strerror(t.err);
    EXPECT_EQ(off_t(count), t.off_after) << what;
    EXPECT_EQ(count, t.received) << what;
    EXPECT_EQ(-1, t.mismatch) << what;
    EXPECT_EQ(uint64_t(count), t.counted) << what << ": sendfile_bytes";
}

// Every strategy sends exactly the file, for 0 B, 1 B, 4095 B and 1 MiB+7.
void every_size(const IoTest &fx, int mode, int bufs = 0) {
    const size_t sizes[] = {0, 1, 4095, (1 << 20) + 7};
    std::vector<Transfer> res(std::size(sizes));
    std::vector<std::unique_ptr<TempFile>> files;
    for (size_t i = 0; i < std::size(sizes); ++i) {
        files.push_back(std::make_unique<TempFile>(sizes[i], uint32_t(30 + i)));
        ASSERT_GE(files.back()->fd(), 0);
    }
    ASSERT_EQ(0, fx.run([&] {
        for (size_t i = 0; i < std::size(sizes); ++i)
            res[i] = send_over_tcp(files[i]->fd(), uint32_t(30 + i), 0, sizes[i], mode, bufs, fx.other());
    }));
    for (size_t i = 0; i < std::size(sizes); ++i)
        expect_whole(res[i], sizes[i], std::string(mode_name(mode)) + " " + std::to_string(sizes[i]) + " B");
}

TEST_P(SendfileVprocsTest, NonblockingStrategySendsEveryByteForEverySize) { every_size(*this, WEFT_SENDFILE_NONBLOCKING); }
TEST_P(SendfileVprocsTest, BlockingStrategySendsEveryByteForEverySize) { every_size(*this, WEFT_SENDFILE_BLOCKING); }
TEST_P(SendfileVprocsTest, SpliceStrategySendsEveryByteForEverySize) { every_size(*this, WEFT_SENDFILE_SPLICE); }

// 4-KiB socket buffers: many partial transfers and parks, same bytes.
TEST_P(SendfileTest, EveryStrategyIsByteExactThroughTinySocketBuffers) {
    for (int mode : kModes) {
        SCOPED_TRACE(mode_name(mode));
        every_size(*this, mode, 4096);
    }
}

// 100 MiB once per strategy.
void hundred_mib(const IoTest &fx, int mode) {
    const size_t size = size_t(scaled(100, 20)) << 20;
    TempFile f(size, 40);
    ASSERT_GE(f.fd(), 0) << "cannot write a " << (size >> 20) << " MiB scratch file in " << scratch_dir();
    Transfer t;
    ASSERT_EQ(0, fx.run([&] { t = send_over_tcp(f.fd(), 40, 0, size, mode); }));
    expect_whole(t, size, mode_name(mode));
    if (mode == WEFT_SENDFILE_BLOCKING) {
        EXPECT_GE(t.offloaded, 1u) << "the blocking strategy runs in the offload pool";
    }
}

// Out of the page cache, through 4-KiB socket buffers: the nonblocking
// strategy sends a stretch that may miss from an offload worker (which
// finds the socket full after a few KiB and reads the rest in there), and
// the vproc sends the rest. The same bytes arrive.
TEST_P(SendfileTest, NonblockingStrategySendsAnUncachedFileFromAWorker) {
    const size_t size = (9 << 20) + 123; // three stretches, the last short
    TempFile f(size, 41);
    ASSERT_GE(f.fd(), 0);
    const bool dropped = drop_cache(f.fd(), size);
    Transfer t;
    ASSERT_EQ(0, run([&] { t = send_over_tcp(f.fd(), 41, 0, size, WEFT_SENDFILE_NONBLOCKING, 4096, other()); }));
    expect_whole(t, size, "nonblocking, uncached");
    if (!dropped) GTEST_SKIP() << "the page cache kept the file after POSIX_FADV_DONTNEED; data checked, path not";
    EXPECT_GE(t.offloaded, 1u) << "a stretch that may miss was sent from the vproc, blocking it on the disk";
}

TEST_P(SendfileLargeTest, NonblockingStrategySends100MiB) { hundred_mib(*this, WEFT_SENDFILE_NONBLOCKING); }
TEST_P(SendfileLargeTest, BlockingStrategySends100MiB) { hundred_mib(*this, WEFT_SENDFILE_BLOCKING); }
TEST_P(SendfileLargeTest, SpliceStrategySends100MiB) { hundred_mib(*this, WEFT_SENDFILE_SPLICE); }

// An explicit offset is read and advanced, the file position is left alone;
// a NULL offset reads from the file position and advances it.
TEST_P(SendfileTest, OffsetPointerAdvancesAndNullOffsetMovesTheFilePosition) {
    const size_t size = 10000;
    TempFile f(size, 41);
    ASSERT_GE(f.fd(), 0);
    struct Res {
        Transfer with_off;
        off_t pos_after_off = -1;
        Transfer null_off;
        off_t pos_after_null = -1;
    };
    std::vector<Res> res(std::size(kModes));
    ASSERT_EQ(0, run([&] {
        for (size_t m = 0; m < std::size(kModes); ++m) {
            Res &r = res[m];
            ASSERT_EQ(77, lseek(f.fd(), 77, SEEK_SET));
            r.with_off = send_over_tcp(f.fd(), 41, 1000, 5000, kModes[m]);
            r.pos_after_off = lseek(f.fd(), 0, SEEK_CUR);
            // NULL offset: from the position (123), which advances
            ASSERT_EQ(123, lseek(f.fd(), 123, SEEK_SET));
            int fds[2];
            ASSERT_TRUE(tcp_pair(fds));
            StreamChecker rx(fds[1], 41, 123, -1);
            r.null_off.sent = weft_sendfile_mode(fds[0], f.fd(), nullptr, 1000, kModes[m]);
            r.null_off.err = errno;
            r.pos_after_null = lseek(f.fd(), 0, SEEK_CUR);
            weft_shutdown(fds[0], SHUT_WR);
            rx.finish(r.null_off);
            weft_close(fds[0]);
            weft_close(fds[1]);
        }
    }));
    for (size_t m = 0; m < std::size(kModes); ++m) {
        SCOPED_TRACE(mode_name(kModes[m]));
        const Res &r = res[m];
        EXPECT_EQ(5000, r.with_off.sent) << r.with_off;
        EXPECT_EQ(6000, r.with_off.off_after);
        EXPECT_EQ(5000u, r.with_off.received);
        EXPECT_EQ(-1, r.with_off.mismatch);
        EXPECT_EQ(77, r.pos_after_off) << "an explicit offset moved the file position";
        EXPECT_EQ(1000, r.null_off.sent) << r.null_off;
        EXPECT_EQ(1000u, r.null_off.received);
        EXPECT_EQ(-1, r.null_off.mismatch) << "NULL offset must read from the file position";
        EXPECT_EQ(1123, r.pos_after_null);
    }
}

// EOF stops a transfer: a count past the end sends the rest; at the end, 0.
TEST_P(SendfileTest, EndOfFileStopsTheTransfer) {
    TempFile f(4095, 42);
    ASSERT_GE(f.fd(), 0);
    std::vector<Transfer> past(3), at(3);
    ASSERT_EQ(0, run([&] {
        for (size_t m = 0; m < 3; ++m) {
            past[m] = send_over_tcp(f.fd(), 42, 4000, 1000, kModes[m]);
            at[m] = send_over_tcp(f.fd(), 42, 4095, 1000, kModes[m]);
        }
    }));
    for (size_t m = 0; m < 3; ++m) {
        SCOPED_TRACE(mode_name(kModes[m]));
        EXPECT_EQ(95, past[m].sent) << past[m];
        EXPECT_EQ(4095, past[m].off_after);
        EXPECT_EQ(95u, past[m].received);
        EXPECT_EQ(-1, past[m].mismatch);
        EXPECT_EQ(0, at[m].sent) << at[m];
        EXPECT_EQ(4095, at[m].off_after);
        EXPECT_EQ(0u, at[m].received);
    }
}

// "or any descriptor": a pipe as the destination, read on another thread.
TEST_P(SendfileTest, EveryStrategyWritesIntoAPipe) {
    const size_t size = (1 << 20) + 7;
    TempFile f(size, 43);
    ASSERT_GE(f.fd(), 0);
    std::vector<Transfer> res(3);
    ASSERT_EQ(0, run([&] {
        for (size_t m = 0; m < 3; ++m) {
            int p[2];
            ASSERT_EQ(0, pipe(p));
            StreamChecker rx(p[0], 43, 0, -1);
            off_t off = 0;
            res[m].sent = weft_sendfile_mode(p[1], f.fd(), &off, size, kModes[m]);
            res[m].err = errno;
            res[m].off_after = off;
            weft_close(p[1]);
            rx.finish(res[m]);
            weft_close(p[0]);
        }
    }));
    for (size_t m = 0; m < 3; ++m) {
        SCOPED_TRACE(mode_name(kModes[m]));
        EXPECT_EQ(ssize_t(size), res[m].sent) << res[m] << ": " << strerror(res[m].err);
        EXPECT_EQ(off_t(size), res[m].off_after);
        EXPECT_EQ(size, res[m].received);
        EXPECT_EQ(-1, res[m].mismatch);
    }
}

// The receiver does not read: with the I/O timeout set, each strategy sends
// what the buffers take and returns that part; the offset says how far.
TEST_P(SendfileTest, TheIoTimeoutEndsAStalledTransferWithThePartSent) {
    const size_t size = 4 << 20;
    TempFile f(size, 44);
    ASSERT_GE(f.fd(), 0);
    std::vector<Transfer> res(3);
    std::vector<uint64_t> took(3);
    ASSERT_EQ(0, run([&] {
        for (size_t m = 0; m < 3; ++m) {
            int fds[2];
            ASSERT_TRUE(tcp_pair(fds, 4096));
            ASSERT_EQ(0, weft_set_io_timeout_ns(100 * kMs));
            off_t off = 0;
            uint64_t t0 = weft_now_ns();
            res[m].sent = weft_sendfile_mode(fds[0], f.fd(), &off, size, kModes[m]);
            res[m].err = errno;
            took[m] = weft_now_ns() - t0;
            res[m].off_after = off;
            ASSERT_EQ(0, weft_set_io_timeout_ns(0));
            // read exactly what was reported sent (EOF is another test's business)
            StreamChecker rx(fds[1], 44, 0, -1, size_t(std::max<ssize_t>(res[m].sent, 0)));
            rx.finish(res[m]);
            weft_close(fds[0]);
            weft_close(fds[1]);
        }
    }));
    for (size_t m = 0; m < 3; ++m) {
        SCOPED_TRACE(mode_name(kModes[m]));
        const Transfer &t = res[m];
        EXPECT_GT(t.sent, 0) << t << ": " << strerror(t.err);
        EXPECT_LT(t.sent, ssize_t(size)) << t;
        EXPECT_EQ(off_t(std::max<ssize_t>(t.sent, 0)), t.off_after);
        EXPECT_EQ(size_t(std::max<ssize_t>(t.sent, 0)), t.received);
        EXPECT_EQ(-1, t.mismatch);
        EXPECT_GE(took[m], 100 * kMs) << "returned a part before the I/O timeout expired";
    }
}

// A reader that only starts once the sender has parked (the socket full):
// a blocking transfer still sends everything, in every strategy, with no
// I/O timeout set. Found against uring + splice, which returned a short
// count as soon as the socket was full.
TEST_P(SendfileTest, ASlowReaderDoesNotShortenTheTransfer) {
    const size_t size = (1 << 20) + 7;
    TempFile f(size, 48);
    ASSERT_GE(f.fd(), 0);
    std::vector<Transfer> res(3);
    ASSERT_EQ(0, run([&] {
        for (size_t m = 0; m < 3; ++m) {
            int fds[2];
            ASSERT_TRUE(tcp_pair(fds, 4096));
            auto parked = [] { return parks(WEFT_PARK_IO) + parks(WEFT_PARK_OFFLOAD); };
            const uint64_t p0 = parked();
            std::atomic<bool> done{false};
            weft_thread_t gate;
            Transfer &t = res[m];
            ASSERT_EQ(0, spawn(&gate, [&] {
                EXPECT_TRUE(wait_until([&] { return done.load() || parked() > p0; }));
                StreamChecker rx(fds[1], 48, 0, -1, size); // EOF: DataAndFin... tests
                rx.finish(t);
                return nullptr;
            }));
            off_t off = 0;
            ssize_t sent = weft_sendfile_mode(fds[0], f.fd(), &off, size, kModes[m]);
            int e = errno;
            done.store(true);
            weft_shutdown(fds[0], SHUT_WR);
            join(gate);
            t.sent = sent;
            t.err = e;
            t.off_after = off;
            weft_close(fds[0]);
            weft_close(fds[1]);
        }
    }));
    for (size_t m = 0; m < 3; ++m) {
        SCOPED_TRACE(mode_name(kModes[m]));
        EXPECT_EQ(ssize_t(size), res[m].sent) << res[m] << ": " << strerror(res[m].err);
        EXPECT_EQ(off_t(size), res[m].off_after);
        EXPECT_EQ(-1, res[m].mismatch);
    }
}

// A socket the program made non-blocking: sendfile sends what fits and then
// fails with EAGAIN in every strategy; the non-blocking strategy never parks
// (splice may wait for its io_uring completion, which does not block).
TEST_P(SendfileTest, ANonblockingSocketGetsWhatFitsThenEagain) {
    const size_t size = 4 << 20;
    TempFile f(size, 45);
    ASSERT_GE(f.fd(), 0);
    std::vector<Transfer> first(3), second(3);
    std::vector<uint64_t> parks(3, 1);
    ASSERT_EQ(0, run([&] {
        for (size_t m = 0; m < 3; ++m) {
            const uint64_t p0 = all_stats().io_parks;
            int fds[2];
            ASSERT_TRUE(tcp_pair(fds, 4096));
            int fl = weft_fcntl(fds[0], F_GETFL);
            ASSERT_EQ(0, weft_fcntl(fds[0], F_SETFL, long(fl | O_NONBLOCK)));
            off_t off = 0;
            first[m].sent = weft_sendfile_mode(fds[0], f.fd(), &off, size, kModes[m]);
            first[m].err = errno;
            first[m].off_after = off;
            second[m].sent = weft_sendfile_mode(fds[0], f.fd(), &off, size, kModes[m]);
            second[m].err = errno;
            second[m].off_after = off;
            parks[m] = all_stats().io_parks - p0;
            weft_close(fds[0]);
            weft_close(fds[1]);
        }
    }));
    for (size_t m = 0; m < 3; ++m) {
        SCOPED_TRACE(mode_name(kModes[m]));
        if (kModes[m] == WEFT_SENDFILE_NONBLOCKING) {
            EXPECT_EQ(0u, parks[m]) << "the non-blocking strategy parked on a non-blocking socket";
        }
        EXPECT_GT(first[m].sent, 0) << first[m];
        EXPECT_LT(first[m].sent, ssize_t(size)) << first[m];
        EXPECT_EQ(off_t(std::max<ssize_t>(first[m].sent, 0)), first[m].off_after);
        EXPECT_EQ(-1, second[m].sent) << second[m];
        EXPECT_EQ(EAGAIN, second[m].err) << strerror(second[m].err);
        EXPECT_EQ(first[m].off_after, second[m].off_after) << "a failed sendfile moved the offset";
    }
}

// weft_sendfile uses weft_config.sendfile: "blocking" goes through the
// offload pool, "nonblocking" with the file in the page cache does not.
TEST_P(SendfileTest, TheConfiguredDefaultStrategyIsUsed) {
    const size_t size = 256 << 10;
    TempFile f(size, 46);
    ASSERT_GE(f.fd(), 0);
    std::vector<uint8_t> warm(size);
    ASSERT_EQ(ssize_t(size), pread(f.fd(), warm.data(), size, 0));
    Transfer blocking, nonblocking;
    ASSERT_EQ(0, run([&] { blocking = send_over_tcp(f.fd(), 46, 0, size, WEFT_SENDFILE_DEFAULT); },
                     [](weft_config &c) { c.sendfile = "blocking"; }));
    ASSERT_EQ(0, run([&] { nonblocking = send_over_tcp(f.fd(), 46, 0, size, WEFT_SENDFILE_DEFAULT); },
                     [](weft_config &c) { c.sendfile = "nonblocking"; }));
    expect_whole(blocking, size, "default = blocking");
    expect_whole(nonblocking, size, "default = nonblocking");
    EXPECT_GE(blocking.offloaded, 1u) << "sendfile = \"blocking\" did not use the offload pool";
    EXPECT_EQ(0u, nonblocking.offloaded) << "sendfile = \"nonblocking\" offloaded a cached file";
    // weft_sendfile itself (not _mode) follows the configuration as well
    Transfer plain;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        StreamChecker rx(fds[1], 46, 0, -1);
        weft_stats_t s0 = all_stats();
        off_t off = 0;
        plain.sent = weft_sendfile(fds[0], f.fd(), &off, size);
        plain.off_after = off;
        plain.offloaded = all_stats().offloaded - s0.offloaded;
        plain.counted = all_stats().sendfile_bytes - s0.sendfile_bytes;
        weft_shutdown(fds[0], SHUT_WR);
        rx.finish(plain);
        weft_close(fds[0]);
        weft_close(fds[1]);
    }, [](weft_config &c) { c.sendfile = "blocking"; }));
    expect_whole(plain, size, "weft_sendfile with sendfile = blocking");
    EXPECT_GE(plain.offloaded, 1u);
}

TEST_P(SendfileTest, AnUnknownModeIsEinval) {
    TempFile f(100, 47);
    ASSERT_GE(f.fd(), 0);
    ssize_t r = 0;
    int e = 0;
    ASSERT_EQ(0, run([&] {
        int fds[2];
        ASSERT_TRUE(tcp_pair(fds));
        off_t off = 0;
        r = weft_sendfile_mode(fds[0], f.fd(), &off, 100, 99);
        e = errno;
        weft_close(fds[0]);
        weft_close(fds[1]);
    }));
    EXPECT_EQ(-1, r);
    EXPECT_EQ(EINVAL, e);
}

} // namespace

namespace {

// Two transfers at once on one vproc, through small socket buffers so that
// both park mid-way: each receiver gets exactly its own file. Regression:
// the splice strategy shared one pipe per vproc, so concurrent transfers
// interleaved their bytes (found by weft-knot's integration tests).
TEST_P(SendfileTest, ConcurrentTransfersOnOneVprocNeverMixTheirBytes) {
    const size_t size = (1 << 20) + 7;
    TempFile a(size, 60), b(size, 61);
    ASSERT_GE(a.fd(), 0);
    ASSERT_GE(b.fd(), 0);
    for (int mode : kModes) {
        SCOPED_TRACE(mode_name(mode));
        Transfer ta, tb;
        ASSERT_EQ(0, run([&] {
            weft_thread_t other;
            ASSERT_EQ(0, spawn(&other, [&] {
                tb = send_over_tcp(b.fd(), 61, 0, size, mode, 4096);
                return nullptr;
            }));
            ta = send_over_tcp(a.fd(), 60, 0, size, mode, 4096);
            join(other);
        }));
        for (const Transfer *t : {&ta, &tb}) { // (sendfile_bytes counts both: not checked here)
            EXPECT_EQ(ssize_t(size), t->sent) << *t;
            EXPECT_EQ(size, t->received) << *t;
            EXPECT_EQ(-1, t->mismatch) << *t << ": bytes of the other transfer?";
        }
    }
}

// A socket weft has never made non-blocking (a plain socketpair), nobody
// reading: the I/O timeout still ends a blocking-strategy transfer, which
// used to block in sendfile in its worker for as long as the reader slept.
TEST_P(SendfileTest, TheIoTimeoutEndsABlockingTransferToASocketWeftNeverTouched) {
    const size_t size = 4 << 20;
    TempFile f(size, 62);
    ASSERT_GE(f.fd(), 0);
    int sv[2];
    ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    ssize_t sent = -2;
    uint64_t took = 0;
    ASSERT_EQ(0, run([&] {
        std::atomic<bool> done{false};
        weft_thread_t rescue; // if the timeout is ignored, drain after 3 s so the test fails instead of hanging
        ASSERT_EQ(0, spawn(&rescue, [&] {
            uint64_t until = weft_now_ns() + 3 * kSec;
            while (!done.load() && weft_now_ns() < until) weft_sleep_ns(10 * kMs);
            std::vector<char> buf(1 << 16);
            while (!done.load()) {
                if (weft_read(sv[1], buf.data(), buf.size()) <= 0) break;
            }
            return nullptr;
        }));
        ASSERT_EQ(0, weft_set_io_timeout_ns(100 * kMs));
        off_t off = 0;
        uint64_t t0 = weft_now_ns();
        sent = weft_sendfile_mode(sv[0], f.fd(), &off, size, WEFT_SENDFILE_BLOCKING);
        took = weft_now_ns() - t0;
        ASSERT_EQ(0, weft_set_io_timeout_ns(0));
        done.store(true);
        weft_shutdown(sv[0], SHUT_RDWR);
        join(rescue);
        weft_close(sv[0]);
        weft_close(sv[1]);
    }));
    EXPECT_GT(sent, 0);
    EXPECT_LT(sent, ssize_t(size));
    EXPECT_LT(took, 2 * kSec) << "the transfer outlived its I/O timeout";
}

} // namespace
