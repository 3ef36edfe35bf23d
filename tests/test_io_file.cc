// Files through the weft wrappers on every backend: pread/pwrite on data in
// the page cache (served inline, no park), out of it (posix_fadvise
// DONTNEED: io_uring or the offload pool) and with O_DIRECT (aligned
// buffers; skipped where the file system refuses O_DIRECT), plus open,
// fstat, fsync and the plain calls' errors.
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "io_support.hpp"

namespace {

using namespace wt;
using namespace wt::io;

class FileTest : public IoTest {};
WEFT_ON_BACKENDS(FileTest);

class FileConcurrencyTest : public IoTest {};
WEFT_ON_BACKENDS_AND_VPROCS(FileConcurrencyTest);

struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
};
using AlignedBuf = std::unique_ptr<uint8_t, FreeDeleter>;
AlignedBuf aligned(size_t n, size_t align = 4096) {
    void *p = nullptr;
    if (posix_memalign(&p, align, n)) return nullptr;
    return AlignedBuf(static_cast<uint8_t *>(p));
}

// pwrite of odd-sized pieces, pread of other odd-sized pieces, byte-exact;
// short read across EOF, 0 at EOF; the file position never moves.
TEST_P(FileTest, PwriteThenPreadRoundTripsEveryByte) {
    const size_t size = (1 << 20) + 7;
    const Pattern pat(21);
    const std::vector<uint8_t> data = pat.bytes(0, size);
    long mismatch = -2;
    ssize_t across_eof = 0, at_eof = -2, beyond = -2;
    off_t pos = -1, st_size = -1;
    TempFile f;
    ASSERT_GE(f.fd(), 0);
    ASSERT_EQ(0, run([&] {
        for (size_t off = 0, k = 0; off < size; ++k) {
            size_t len = std::min(size - off, size_t(1 + (k * 7717) % 70001));
            ssize_t w = weft_pwrite(f.fd(), data.data() + off, len, off_t(off));
            ASSERT_GT(w, 0) << strerror(errno);
            off += size_t(w);
        }
        std::vector<uint8_t> in(size);
        for (size_t off = 0, k = 0; off < size; ++k) {
            size_t len = std::min(size - off, size_t(1 + (k * 104729) % 65537));
            ssize_t r = weft_pread(f.fd(), in.data() + off, len, off_t(off));
            ASSERT_GT(r, 0) << "at " << off << ": " << strerror(errno);
            off += size_t(r);
        }
        mismatch = pat.mismatch(in.data(), 0, size);
        across_eof = weft_pread(f.fd(), in.data(), 100, off_t(size - 10));
        at_eof = weft_pread(f.fd(), in.data(), 100, off_t(size));
        beyond = weft_pread(f.fd(), in.data(), 100, off_t(size + 4096));
        pos = lseek(f.fd(), 0, SEEK_CUR);
        struct stat st;
        EXPECT_EQ(0, weft_fstat(f.fd(), &st));
        st_size = st.st_size;
    }));
    EXPECT_EQ(-1, mismatch);
    EXPECT_EQ(10, across_eof);
    EXPECT_EQ(0, at_eof);
    EXPECT_EQ(0, beyond);
    EXPECT_EQ(0, pos) << "pread/pwrite moved the file position";
    EXPECT_EQ(off_t(size), st_size);
}

// Data in the page cache is read without parking and without the offload pool.
TEST_P(FileTest, ACachedReadCompletesInline) {
    const size_t size = 256 << 10;
    TempFile f(size, 22);
    ASSERT_GE(f.fd(), 0);
    std::vector<uint8_t> warm(size);
    ASSERT_EQ(ssize_t(size), pread(f.fd(), warm.data(), size, 0));
    ASSERT_EQ(long(size / 4096), resident_pages(f.fd(), size)) << "the file is not in the page cache";
    weft_stats_t s0{}, s1{};
    long mismatch = -2;
    ssize_t r = 0;
    ASSERT_EQ(0, run([&] {
        std::vector<uint8_t> in(size);
        s0 = all_stats();
        r = weft_pread(f.fd(), in.data(), size, 0);
        s1 = all_stats();
        mismatch = Pattern(22).mismatch(in.data(), 0, size);
    }));
    EXPECT_EQ(ssize_t(size), r);
    EXPECT_EQ(-1, mismatch);
    EXPECT_EQ(0u, s1.io_parks - s0.io_parks) << "a page-cache hit parked";
    EXPECT_EQ(0u, s1.offloaded - s0.offloaded) << "a page-cache hit went to the offload pool";
    EXPECT_GE(s1.io_syscalls - s0.io_syscalls, 1u);
}

// The most a read from `dir`'s device may bring into the page cache by
// itself: readahead, or one request (sysfs; 8 MiB when it cannot tell).
size_t readahead_bytes(const std::string &dir) {
    struct stat st;
    size_t most = 0;
    if (stat(dir.c_str(), &st) == 0) {
        const std::string dev = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
        for (const char *q : {"/queue/", "/../queue/"}) // a disk, or a partition of one
            for (const char *knob : {"read_ahead_kb", "max_sectors_kb"})
                if (FILE *in = std::fopen((dev + q + knob).c_str(), "r")) {
                    unsigned long kb = 0;
                    if (std::fscanf(in, "%lu", &kb) == 1) most = std::max<size_t>(most, size_t(kb) << 10);
                    std::fclose(in);
                }
    }
    return most ? most : size_t{8} << 20;
}

// Pages dropped from the cache: the read still returns the right bytes, and
// the miss is not served inline (io_uring completion or offload pool: it
// parks; with epoll/poll it is offloaded).
//
// An RWF_NOWAIT read of missing pages starts readahead before it gives up
// (up to read_ahead_kb: 8 MiB here). If that I/O is done before the kernel
// looks again — a fast disk, or the reader preempted meanwhile, as under a
// loaded ctest -j — the "miss" comes back inline, and rightly so: CI failed
// twice on a 128 KiB read that way. So the read here is twice as long as
// anything the device reads ahead: RWF_NOWAIT can serve a part of it
// inline at most, and the rest must go asynchronous. A runtime that reads
// misses inline (plain preadv2) fails this on every backend.
TEST_P(FileTest, AnUncachedReadReturnsTheRightBytes) {
    const size_t size = std::clamp<size_t>(2 * readahead_bytes(scratch_dir()), 4 << 20, 64 << 20);
    const int tries = 3;
    TempFile f(size, 23);
    ASSERT_GE(f.fd(), 0);
    int dropped = 0, not_inline = 0, offloaded = 0;
    long mismatch = -2;
    ssize_t got = 0;
    ASSERT_EQ(0, run([&] {
        std::vector<uint8_t> in(size);
        for (int t = 0; t < tries && not_inline == 0; ++t) {
            if (!drop_cache(f.fd(), size) || resident_pages(f.fd(), size) != 0) continue;
            ++dropped;
            weft_stats_t s0 = all_stats();
            got = weft_pread(f.fd(), in.data(), size, 0);
            weft_stats_t s1 = all_stats();
            ASSERT_EQ(ssize_t(size), got) << strerror(errno);
            if ((s1.io_parks - s0.io_parks) + (s1.offloaded - s0.offloaded) > 0) ++not_inline;
            if (s1.offloaded > s0.offloaded) ++offloaded;
        }
        if (got == 0) got = weft_pread(f.fd(), in.data(), size, 0); // (nothing was dropped)
        mismatch = Pattern(23).mismatch(in.data(), 0, size);
    }));
    EXPECT_EQ(ssize_t(size), got);
    EXPECT_EQ(-1, mismatch);
    if (dropped == 0) {
        GTEST_SKIP() << "the page cache kept the file after POSIX_FADV_DONTNEED; data checked, path not";
    }
    EXPECT_GE(not_inline, 1) << "a " << (size >> 20) << " MiB page-cache miss was read inline, blocking the vproc ("
                             << dropped << " dropped tries)";
    if (!uring()) {
        EXPECT_EQ(not_inline, offloaded) << "without io_uring a miss goes to the offload pool";
    }
}

// Sixteen threads read distinct regions of an uncached file at once.
TEST_P(FileConcurrencyTest, ManyThreadsReadAnUncachedFileConcurrently) {
    const int k = 16;
    const size_t region = 512 << 10, size = region * k;
    TempFile f(size, 24);
    ASSERT_GE(f.fd(), 0);
    drop_cache(f.fd(), size);
    std::atomic<int> good{0};
    ASSERT_EQ(0, run([&] {
        const Pattern pat(24);
        std::vector<weft_thread_t> ts(k);
        for (int i = 0; i < k; ++i)
            ASSERT_EQ(0, spawn_on(&ts[size_t(i)], home(i), [&, i] {
                std::vector<uint8_t> in(region);
                const size_t base = size_t(i) * region;
                size_t got = 0;
                while (got < region) {
                    ssize_t r = weft_pread(f.fd(), in.data() + got, std::min<size_t>(region - got, 96 << 10),
                                           off_t(base + got));
                    if (r <= 0) break;
                    got += size_t(r);
                }
                if (got == region && pat.mismatch(in.data(), base, region) == -1) good.fetch_add(1);
                return nullptr;
            }));
        for (auto &t : ts) join(t);
    }));
    EXPECT_EQ(k, good.load());
}

// O_DIRECT with 4 KiB-aligned buffers, offsets and sizes: round trip, the
// read going asynchronous (not inline); an unaligned buffer fails exactly as
// the plain call does.
TEST_P(FileTest, ODirectRoundTripsAlignedBuffers) {
    const size_t size = 1 << 20;
    TempFile f;
    ASSERT_GE(f.fd(), 0);
    bool refused = false;
    ssize_t w = 0, r = 0, weft_bad = 0, plain_bad = 0;
    int weft_bad_e = 0, plain_bad_e = 0;
    long mismatch = -2;
    weft_stats_t s0{}, s1{};
    ASSERT_EQ(0, run([&] {
        int fd = weft_open(f.path().c_str(), O_RDWR | O_DIRECT);
        if (fd < 0 && errno == EINVAL) {
            refused = true;
            return;
        }
        ASSERT_GE(fd, 0) << strerror(errno);
        AlignedBuf out = aligned(size), in = aligned(size + 4096);
        ASSERT_TRUE(out && in);
        Pattern(25).fill(out.get(), 4096, size);
        w = weft_pwrite(fd, out.get(), size, 4096);
        if (w < 0 && errno == EINVAL) {
            refused = true;
            weft_close(fd);
            return;
        }
        s0 = all_stats();
        r = weft_pread(fd, in.get(), size, 4096);
        s1 = all_stats();
        mismatch = Pattern(25).mismatch(in.get(), 4096, size_t(std::max<ssize_t>(r, 0)));
        // misaligned buffer: whatever the plain call says, weft says too
        plain_bad = pread(fd, in.get() + 1, 4096, 0);
        plain_bad_e = errno;
        weft_bad = weft_pread(fd, in.get() + 1, 4096, 0);
        weft_bad_e = errno;
        EXPECT_EQ(0, weft_close(fd));
    }));
    if (refused) GTEST_SKIP() << "the file system of " << scratch_dir() << " refuses O_DIRECT (EINVAL)";
    EXPECT_EQ(ssize_t(size), w);
    EXPECT_EQ(ssize_t(size), r);
    EXPECT_EQ(-1, mismatch);
    // RWF_NOWAIT does not stop a direct read from waiting for the device: it
    // must not be tried inline, where it would hold the vproc for the I/O.
    EXPECT_GE((s1.io_parks - s0.io_parks) + (s1.offloaded - s0.offloaded), 1u)
        << "an O_DIRECT read ran inline, blocking the vproc";
    EXPECT_EQ(plain_bad, weft_bad);
    if (plain_bad < 0) {
        EXPECT_EQ(plain_bad_e, weft_bad_e);
    }
}

// A disk operation goes to the kernel as it is made while the vproc has CPU
// to spare, and with the turn's batch once the vproc is busy
// (Vproc::submits_now, 32 after each idle). Seen in io_syscalls: one read
// after an idle wait is in the kernel before the next thread runs (0 system
// calls if held for the batch); a burst of 100 readers that never lets the
// vproc idle makes 32 submissions and one batch for the rest, plus what the
// periodic polls flush (one per 64 dispatches), not 100.
TEST_P(FileTest, DiskReadsGoOutAtOnceUntilTheVprocIsBusy) {
    if (!uring()) GTEST_SKIP() << "completion-based disk I/O is io_uring's; " << backend() << " offloads it";
    static constexpr int kReaders = 100;
    TempFile f(size_t(kReaders) * 4096, 26);
    ASSERT_GE(f.fd(), 0);
    bool refused = false;
    uint64_t single = 0, burst = 0;
    std::atomic<int> parked{0}, ok{0};
    ASSERT_EQ(0, run([&] {
        int fd = weft_open(f.path().c_str(), O_RDONLY | O_DIRECT);
        if (fd < 0 && errno == EINVAL) {
            refused = true;
            return;
        }
        ASSERT_GE(fd, 0) << strerror(errno);
        AlignedBuf buf = aligned(size_t(kReaders) * 4096);
        ASSERT_TRUE(buf);
        if (weft_pread(fd, buf.get(), 4096, 0) != 4096) { // classifies fd; EINVAL: no O_DIRECT here
            refused = true;
            weft_close(fd);
            return;
        }
        struct Ctx {
            int fd;
            uint8_t *buf;
            std::atomic<int> *parked, *ok;
            weft_stats_t seen;
        } ctx{fd, buf.get(), &parked, &ok, {}};

        // One read after an idle wait: a thread made ready first sees it out.
        ASSERT_EQ(0, weft_sleep_ns(1000000));
        weft_thread_t watcher;
        ASSERT_EQ(0, weft_thread_create(&watcher, nullptr, [](void *a) -> void * {
            static_cast<Ctx *>(a)->seen = all_stats();
            return nullptr;
        }, &ctx));
        const weft_stats_t s0 = all_stats();
        EXPECT_EQ(4096, weft_pread(fd, buf.get(), 4096, 4096));
        ASSERT_EQ(0, weft_thread_join(watcher, nullptr));
        single = ctx.seen.io_syscalls - s0.io_syscalls;

        // A burst: every reader made ready before any runs, so no idle wait
        // comes between their reads; a last thread counts once all are out.
        ASSERT_EQ(0, weft_sleep_ns(1000000));
        std::vector<weft_thread_t> ts(kReaders);
        std::vector<int> idx(kReaders);
        static Ctx *shared;
        shared = &ctx;
        const weft_stats_t b0 = all_stats();
        for (int i = 0; i < kReaders; ++i) {
            idx[size_t(i)] = i;
            ASSERT_EQ(0, weft_thread_create(&ts[size_t(i)], nullptr, [](void *a) -> void * {
                const int i = *static_cast<int *>(a);
                Ctx *c = shared;
                c->parked->fetch_add(1);
                if (weft_pread(c->fd, c->buf + size_t(i) * 4096, 4096, off_t(i) * 4096) == 4096) c->ok->fetch_add(1);
                return nullptr;
            }, &idx[size_t(i)]));
        }
        weft_thread_t counter;
        ASSERT_EQ(0, weft_thread_create(&counter, nullptr, [](void *a) -> void * {
            Ctx *c = static_cast<Ctx *>(a);
            while (c->parked->load() < kReaders) weft_yield();
            c->seen = all_stats();
            return nullptr;
        }, &ctx));
        ASSERT_EQ(0, weft_thread_join(counter, nullptr));
        burst = ctx.seen.io_syscalls - b0.io_syscalls;
        for (auto &t : ts) ASSERT_EQ(0, weft_thread_join(t, nullptr));
        EXPECT_EQ(0, weft_close(fd));
    }));
    if (refused) GTEST_SKIP() << "the file system of " << scratch_dir() << " refuses O_DIRECT";
    EXPECT_GE(single, 1u) << "a read on an idle vproc waited for the batch";
    EXPECT_EQ(kReaders, ok.load());
    EXPECT_GE(burst, 32u) << "a busy vproc's first reads waited for the batch";
    EXPECT_LT(burst, 32u + 16u) << "a busy vproc submitted every read by itself";
}

// A disk read held for a busy vproc's batch when another thread closes its
// file goes to the kernel before the close (weft_close flushes the ring):
// it reads the file it was made on, never the file that takes the number
// next. A thread that yields keeps the vproc busy, so after 32 reads it
// holds new ones for the batch; the read under test is checked to have
// been held (no submission between its park and the close).
TEST_P(FileTest, AReadHeldForTheBatchReadsItsOwnFileWhenItIsClosed) {
    if (!uring()) GTEST_SKIP() << "completion-based disk I/O is io_uring's; " << backend() << " offloads it";
    TempFile fa(64 * 4096, 41), fb(4096, 42);
    ASSERT_GE(fa.fd(), 0);
    ASSERT_GE(fb.fd(), 0);
    const Pattern pa(41);
    bool refused = false, held = false;
    int reused = 0;
    ASSERT_EQ(0, run([&] {
        AlignedBuf buf = aligned(4096), got = aligned(4096);
        ASSERT_TRUE(buf && got);
        static std::atomic<bool> stop;
        stop = false;
        weft_thread_t spinner;
        ASSERT_EQ(0, weft_thread_create(&spinner, nullptr, [](void *) -> void * {
            while (!stop.load()) weft_yield();
            return nullptr;
        }, nullptr));
        for (int attempt = 0; attempt < 10 && !held; ++attempt) {
            int fd = weft_open(fa.path().c_str(), O_RDONLY | O_DIRECT);
            if (fd < 0 && errno == EINVAL) {
                refused = true;
                break;
            }
            ASSERT_GE(fd, 0) << strerror(errno);
            for (int i = 0; i < 40; ++i) { // the vproc's immediate submissions, used up
                if (weft_pread(fd, buf.get(), 4096, off_t(i) * 4096) != 4096) {
                    refused = true; // EINVAL: no O_DIRECT here
                    break;
                }
            }
            if (refused) {
                weft_close(fd);
                break;
            }
            struct Ctx {
                int fd;
                uint8_t *got;
                ssize_t r;
            } ctx{fd, got.get(), 0};
            std::memset(got.get(), 0, 4096);
            const uint64_t parks0 = parks(WEFT_PARK_IO);
            weft_thread_t reader;
            ASSERT_EQ(0, weft_thread_create(&reader, nullptr, [](void *a) -> void * {
                auto *c = static_cast<Ctx *>(a);
                c->r = weft_pread(c->fd, c->got, 4096, 8 * 4096);
                return nullptr;
            }, &ctx));
            const weft_stats_t s0 = all_stats();
            while (parks(WEFT_PARK_IO) == parks0) weft_yield();
            held = all_stats().io_syscalls == s0.io_syscalls; // not submitted yet
            ASSERT_EQ(0, weft_close(fd));
            int g = open(fb.path().c_str(), O_RDONLY | O_DIRECT); // takes the number, unseen by weft
            ASSERT_GE(g, 0) << strerror(errno);
            reused += g == fd;
            ASSERT_EQ(0, weft_thread_join(reader, nullptr));
            if (held) {
                EXPECT_EQ(4096, ctx.r) << strerror(int(-ctx.r));
                EXPECT_EQ(-1, pa.mismatch(got.get(), 8 * 4096, 4096)) << "the read took the next file's bytes";
            }
            close(g);
        }
        stop = true;
        ASSERT_EQ(0, weft_thread_join(spinner, nullptr));
    }));
    if (refused) GTEST_SKIP() << "the file system of " << scratch_dir() << " refuses O_DIRECT";
    EXPECT_TRUE(held) << "no read was held for the batch in 10 attempts";
    EXPECT_GE(reused, 1) << "the next file never took the closed number";
}

// open with O_CREAT and a mode, O_EXCL, ENOENT; fstat; fsync; read/write on
// a regular file move its position; the plain calls' errors.
TEST_P(FileTest, OpenFstatFsyncAndPositionsFollowThePlainCalls) {
    const std::string path = scratch_dir() + "/weft-io-open-" + std::to_string(getpid()) + "-" + backend();
    unlink(path.c_str());
    int fd = -1, excl = 0, excl_e = 0, missing = 0, missing_e = 0, fsync_rc = -1, pipe_fsync = 0, pipe_fsync_e = 0;
    mode_t mode = 0;
    off_t pos_after_write = -1, pos_after_read = -1;
    ssize_t spipe = 0, negative = 0;
    int spipe_e = 0, negative_e = 0;
    std::string back;
    const mode_t mask = umask(022);
    umask(mask);
    ASSERT_EQ(0, run([&] {
        fd = weft_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        ASSERT_GE(fd, 0) << strerror(errno);
        excl = weft_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        excl_e = errno;
        missing = weft_open((path + ".missing").c_str(), O_RDONLY);
        missing_e = errno;
        struct stat st;
        ASSERT_EQ(0, weft_fstat(fd, &st));
        mode = st.st_mode & 0777;
        EXPECT_TRUE(S_ISREG(st.st_mode));
        EXPECT_EQ(11, weft_write(fd, "hello world", 11));
        pos_after_write = lseek(fd, 0, SEEK_CUR);
        fsync_rc = weft_fsync(fd);
        ASSERT_EQ(6, lseek(fd, 6, SEEK_SET));
        char buf[16] = {};
        ssize_t r = weft_read(fd, buf, sizeof buf);
        if (r > 0) back.assign(buf, size_t(r));
        pos_after_read = lseek(fd, 0, SEEK_CUR);
        int p[2];
        ASSERT_EQ(0, pipe(p));
        pipe_fsync = weft_fsync(p[0]);
        pipe_fsync_e = errno;
        spipe = weft_pread(p[0], buf, 1, 0);
        spipe_e = errno;
        negative = weft_pwrite(fd, "x", 1, -1);
        negative_e = errno;
        weft_close(p[0]);
        weft_close(p[1]);
        EXPECT_EQ(0, weft_close(fd));
    }));
    unlink(path.c_str());
    EXPECT_EQ(0640 & ~mask, mode);
    EXPECT_EQ(-1, excl);
    EXPECT_EQ(EEXIST, excl_e);
    EXPECT_EQ(-1, missing);
    EXPECT_EQ(ENOENT, missing_e);
    EXPECT_EQ(11, pos_after_write);
    EXPECT_EQ(0, fsync_rc);
    EXPECT_EQ("world", back);
    EXPECT_EQ(11, pos_after_read);
    EXPECT_EQ(-1, pipe_fsync);
    EXPECT_EQ(EINVAL, pipe_fsync_e);
    EXPECT_EQ(-1, spipe);
    EXPECT_EQ(ESPIPE, spipe_e);
    EXPECT_EQ(-1, negative);
    EXPECT_EQ(EINVAL, negative_e);
}

} // namespace
