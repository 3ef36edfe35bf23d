// Threading by appointment (WEFT_POLICY=tap, sched/tap.hpp): the order the
// appointment clock releases calls in, for a given ratio and given levels;
// commit appointments; the classifications; one submission for a DISK
// turn's calls; deadlines and closes of calls waiting in a calendar; and a
// bulk transfer that completes while urgent traffic keeps coming. (The I/O
// test suite runs again under the policy as Policy.tap.io: every wrapper's
// POSIX results unchanged.)
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io_support.hpp"

namespace {

using namespace wt;
using namespace wt::io;

int run_tap(const char *spec, std::function<void()> body, const char *io = nullptr, int vprocs = 1) {
    weft_config cfg;
    weft_config_init(&cfg);
    cfg.vprocs = vprocs;
    cfg.policy = "tap";
    cfg.tap = spec;
    cfg.io = io;
    std::function<int()> main = [&body] {
        body();
        return 0;
    };
    return weft_main_config(&cfg, detail::main_trampoline, &main);
}

weft_tap_stats_t tap_stats() {
    weft_tap_stats_t s;
    EXPECT_EQ(0, weft_tap_stats(-1, &s));
    return s;
}

TEST(Tap, BadSettingsAreRefusedWithAMessage) {
    for (const char *bad : {"ratio=0:1:1", "ratio=5:4", "ratio=5:4:0", "class=fast", "class=shares", "levels=0", "levels=33",
                            "age=0", "rate=1:2", "burst=0", "colour=blue", "ratio", "locks=maybe"}) {
        weft_config cfg;
        weft_config_init(&cfg);
        cfg.policy = "tap";
        cfg.tap = bad;
        errno = 0;
        EXPECT_EQ(-1, weft_main_config(&cfg, [](void *) { return 0; }, nullptr)) << bad;
        EXPECT_EQ(EINVAL, errno) << bad;
    }
}

TEST(Tap, StatsSayWhenThePolicyIsNotTap) {
    ASSERT_EQ(0, run(1, [] {
        weft_tap_stats_t s;
        EXPECT_EQ(ENOTSUP, weft_tap_stats(-1, &s));
        EXPECT_EQ(ENOTSUP, weft_tap_set_level(0));
        EXPECT_EQ(-1, weft_tap_level());
    }));
    weft_tap_stats_t s;
    EXPECT_EQ(EPERM, weft_tap_stats(-1, &s));
}

// Thread i sets its level to levels[i] and writes names[i] to one socket,
// all in the same clock, under the policy `spec`: the letters in the order
// their writes were released. check(stats) runs once all are done; with
// level_stays, each thread's level must not have moved (class=const).
std::string release_order(const char *spec, std::vector<int> levels, const char *names,
                          std::function<void(const weft_tap_stats_t &)> check = {}, bool level_stays = false) {
    std::string got;
    EXPECT_EQ(0, run_tap(spec, [&] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        std::vector<weft_thread_t> ts(levels.size());
        for (size_t i = 0; i < ts.size(); ++i)
            ASSERT_EQ(0, spawn(&ts[i], [&, i] {
                EXPECT_EQ(0, weft_tap_set_level(levels[i]));
                EXPECT_EQ(1, weft_write(sv[0], &names[i], 1));
                if (level_stays) {
                    EXPECT_EQ(levels[i], weft_tap_level());
                }
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        char buf[64];
        ssize_t n = read(sv[1], buf, sizeof buf);
        ASSERT_EQ(ssize_t(ts.size()), n);
        got.assign(buf, size_t(n));
        if (check) check(tap_stats());
        close(sv[0]);
        close(sv[1]);
    }));
    return got;
}

// Six threads at levels 3, 0, 2, 1, 0, 3 (constant classification). One NET
// appointment per clock: the writes land in level order, whatever order the
// threads made them in; equal levels keep the order they came in.
TEST(Tap, NetAppointmentsAreReleasedByLevelOnePerClock) {
    auto check = [](const weft_tap_stats_t &s) {
        EXPECT_GE(s.clocks, 6u) << "one NET appointment per clock";
        EXPECT_EQ(2u, s.by_level[2][0]); // B, E
        EXPECT_EQ(1u, s.by_level[2][1]); // D
        EXPECT_EQ(1u, s.by_level[2][2]); // C
        EXPECT_EQ(2u, s.by_level[2][3]); // A, F
    };
    EXPECT_EQ("BEDCAF", release_order("ratio=8:1:1,class=const,levels=4", {3, 0, 2, 1, 0, 3}, "ABCDEF", check, true));
}

// Aging under class=weft is earliest deadline first: a call is due at the
// clock it was queued at plus level x age. X asks at level 4 and A-E at
// level 1 (each write moves the level down one), all in the same clock, one
// NET appointment per clock, age 1: A-E are all due before X, so X goes
// last. (Before 2026-11-29 the most urgent level did not age: X, aged past
// level-1 calls that had waited as long, went before E, "ABCDXE" — and an
// accept waiting at level 0 gave way the same way.)
TEST(Tap, AgingServesTheEarliestDeadlineFirst) {
    auto check = [](const weft_tap_stats_t &s) {
        EXPECT_EQ(5u, s.by_level[2][1]); // A-E
        EXPECT_EQ(1u, s.by_level[2][4]); // X
    };
    EXPECT_EQ("ABCDEX", release_order("ratio=8:1:1,class=weft,levels=8,age=1", {3, 0, 0, 0, 0, 0}, "XABCDE", check));
}

// class=share: stride scheduling over the levels, level l served 2^(-l/2)
// as often as level 0. A-F ask at level 1 and X-Z at level 3, all in the
// same clock, one NET appointment per clock: two level-1 calls for each
// level-3 one, ties to the more urgent level, and nobody waits for a level
// to empty.
TEST(Tap, ShareServesTheLevelsInProportion) {
    EXPECT_EQ("AXBCYDEZF",
              release_order("ratio=16:1:1,class=share,levels=8", {0, 0, 0, 0, 0, 0, 2, 2, 2}, "ABCDEFXYZ"));
}

// The ratio: a clock's CPU turn releases at most `ratio CPU` threads. Twelve
// threads each run three times, writing a byte between runs (a NET
// appointment); every run notes the clock count it ran at. No clock has more
// runs than the ratio allows, and with this many threads some clock is full.
TEST(Tap, TheClockTakesTheCalendarsInItsRatio) {
    for (int cpu : {1, 3}) {
        std::vector<uint64_t> at;
        std::string spec = "ratio=" + std::to_string(cpu) + ":1:4,class=const";
        ASSERT_EQ(0, run_tap(spec.c_str(), [&] {
            int sv[2];
            ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
            std::vector<weft_thread_t> ts(12);
            for (int i = 0; i < 12; ++i)
                ASSERT_EQ(0, spawn(&ts[size_t(i)], [&] {
                    for (int k = 0; k < 3; ++k) {
                        at.push_back(tap_stats().clocks);
                        EXPECT_EQ(1, weft_write(sv[0], "z", 1));
                    }
                    return nullptr;
                }));
            for (auto &t : ts) join(t);
            char buf[64];
            EXPECT_EQ(36, read(sv[1], buf, sizeof buf));
            EXPECT_EQ(36u, tap_stats().appointments[2]);
            close(sv[0]);
            close(sv[1]);
        }));
        ASSERT_EQ(36u, at.size());
        std::map<uint64_t, int> per_clock;
        for (uint64_t c : at) ++per_clock[c];
        int most = 0;
        for (auto &[c, n] : per_clock) most = std::max(most, n);
        EXPECT_EQ(cpu, most) << "runs in one clock's CPU turn, ratio " << spec;
    }
}

// The paper's classification: an accept resets a thread to level 0, any
// other call lowers it by one; its variant raises instead; constant keeps.
TEST(Tap, ClassificationsMoveTheLevelAsTheirRulesSay) {
    struct Case {
        const char *spec;
        int after_three, after_accept, after_one_more;
    } cases[] = {
        {"class=shape,levels=8", 3, 0, 1},
        {"class=weft,levels=8", 3, 0, 1},
        {"class=boost,levels=8", 4, 7, 6}, // new threads start at the bottom (7)
        {"class=const,levels=8", 0, 0, 0},
    };
    for (const Case &k : cases) {
        int a = -1, b = -1, c = -1;
        ASSERT_EQ(0, run_tap(k.spec, [&] {
            int sv[2];
            ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
            uint16_t port = 0;
            int l = tcp_listen(&port);
            ASSERT_GE(l, 0);
            weft_thread_t t;
            ASSERT_EQ(0, spawn(&t, [&] {
                for (int i = 0; i < 3; ++i) EXPECT_EQ(1, weft_write(sv[0], "x", 1));
                a = weft_tap_level();
                int cfd = weft_accept(l, nullptr, nullptr);
                EXPECT_GE(cfd, 0);
                b = weft_tap_level();
                EXPECT_EQ(1, weft_write(sv[0], "y", 1));
                c = weft_tap_level();
                weft_close(cfd);
                return nullptr;
            }));
            int client = tcp_connect(port);
            EXPECT_GE(client, 0);
            join(t);
            weft_close(client);
            weft_close(l);
            close(sv[0]);
            close(sv[1]);
        }));
        EXPECT_EQ(k.after_three, a) << k.spec;
        EXPECT_EQ(k.after_accept, b) << k.spec;
        EXPECT_EQ(k.after_one_more, c) << k.spec;
    }
}

// Eight threads read a file in the same CPU turn: the DISK turn submits
// their eight reads to io_uring in one system call.
TEST(Tap, ADiskTurnsCallsGoToTheKernelInOneSubmission) {
    std::string path = "/tmp/weft-tap-disk-XXXXXX";
    int fd = mkstemp(path.data());
    ASSERT_GE(fd, 0);
    std::string data(8 * 4096, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = char('a' + i % 26);
    ASSERT_EQ(ssize_t(data.size()), write(fd, data.data(), data.size()));
    close(fd);
    bool uring = true;
    ASSERT_EQ(0, run_tap("ratio=64:8:1,class=const", [&] {
        weft_stats_t w;
        weft_stats_get(-1, &w);
        int f = weft_open(path.c_str(), O_RDONLY);
        ASSERT_GE(f, 0);
        std::vector<weft_thread_t> ts(8);
        std::vector<std::string> got(8, std::string(4096, '\0'));
        for (int i = 0; i < 8; ++i)
            ASSERT_EQ(0, spawn(&ts[size_t(i)], [&, i] {
                EXPECT_EQ(4096, weft_pread(f, got[size_t(i)].data(), 4096, off_t(i) * 4096));
                return nullptr;
            }));
        for (auto &t : ts) join(t);
        for (int i = 0; i < 8; ++i) EXPECT_EQ(data.substr(size_t(i) * 4096, 4096), got[size_t(i)]) << i;
        const weft_tap_stats_t s = tap_stats();
        uring = std::string(weft_io_backend()) == "uring";
        if (uring) {
            EXPECT_EQ(8u, s.disk_batched);
            EXPECT_EQ(1u, s.disk_batches) << "the eight reads went in " << s.disk_batches << " submissions";
        } else {
            EXPECT_EQ(0u, s.disk_batches);
            EXPECT_EQ(8u, s.appointments[1]);
        }
        weft_close(f);
    }));
    unlink(path.c_str());
    if (!uring) GTEST_SKIP() << "io_uring refused here: disk calls were made by their threads at their turn";
}

// A call waiting for its descriptor past the thread's I/O timeout comes back
// with ETIMEDOUT, and one whose descriptor is closed under it with EBADF;
// the calendars are empty afterwards.
TEST(Tap, DeadlinesAndClosesEndCallsWaitingInTheCalendars) {
    for (const char *io : {"uring", "epoll", "poll"}) {
        ASSERT_EQ(0, run_tap("ratio=5:4:1", [&] {
            int sv[2];
            ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
            weft_set_io_timeout_ns(20 * kMs);
            char c;
            errno = 0;
            EXPECT_EQ(-1, weft_read(sv[0], &c, 1)) << io;
            EXPECT_EQ(ETIMEDOUT, errno) << io;
            weft_set_io_timeout_ns(0);
            ssize_t r = 0;
            int e = 0;
            weft_thread_t t;
            const uint64_t parks0 = parks(WEFT_PARK_IO);
            ASSERT_EQ(0, spawn(&t, [&] {
                r = weft_read(sv[1], &c, 1);
                e = errno;
                return nullptr;
            }));
            while (parks(WEFT_PARK_IO) == parks0) weft_yield();
            for (int i = 0; i < 10; ++i) weft_yield(); // its read is made and waits for the descriptor
            weft_close(sv[1]);
            join(t);
            EXPECT_EQ(-1, r) << io;
            EXPECT_EQ(EBADF, e) << io;
            const weft_tap_stats_t s = tap_stats();
            for (int k = 0; k < WEFT_TAP_CALENDARS; ++k)
                for (int l = 0; l < WEFT_TAP_MAX_LEVELS; ++l) EXPECT_EQ(0u, s.queued[k][l]) << k << "/" << l;
            EXPECT_GE(s.net_waits, 1u);
            close(sv[0]);
        }, io));
    }
}

// A call still in its calendar when its descriptor is closed comes back
// with EBADF, and is never made on the file the number names next. (The
// close wakes the calls linked on the descriptor; this one was not linked
// yet. Found as a flaky UringCloseTest under ASan, whose own pipe took the
// number and gave the queued read a byte.)
TEST(Tap, ACallQueuedWhenItsDescriptorIsClosedIsNotMadeOnTheNumbersNextFile) {
    for (const char *io : {"uring", "epoll", "poll"}) {
        ASSERT_EQ(0, run_tap("ratio=5:4:1", [&] {
            int sv[2];
            ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
            ssize_t r = 0;
            int e = 0;
            weft_thread_t t;
            const uint64_t parks0 = parks(WEFT_PARK_IO);
            ASSERT_EQ(0, spawn(&t, [&] {
                char c;
                r = weft_read(sv[0], &c, 1);
                e = errno;
                return nullptr;
            }));
            // Parked in the NET calendar, its read not made yet: the clock
            // runs only when this thread lets the vproc go (join, below).
            while (parks(WEFT_PARK_IO) == parks0) weft_yield();
            const weft_tap_stats_t before = tap_stats();
            uint64_t in_net = 0; // calendar 2: NET
            for (int l = 0; l < WEFT_TAP_MAX_LEVELS; ++l) in_net += before.queued[2][l];
            EXPECT_EQ(1u, in_net) << io << ": the read waits in the NET calendar";
            weft_close(sv[0]);
            int p[2]; // non-blocking: a stolen byte fails the last read instead of hanging it
            ASSERT_EQ(0, pipe2(p, O_NONBLOCK));
            const bool reused = p[0] == sv[0];
            ASSERT_EQ(1, write(p[1], "y", 1));
            join(t);
            EXPECT_EQ(-1, r) << io;
            EXPECT_EQ(EBADF, e) << io;
            char c = 0;
            if (reused) {
                EXPECT_EQ(1, read(p[0], &c, 1)) << io << ": the byte was left for its owner";
            }
            close(p[0]);
            close(p[1]);
            close(sv[1]);
        }, io));
    }
}

// The same for a disk call: a read still in the DISK calendar when its file
// is closed comes back with EBADF and never reads the file that takes the
// number next. With io_uring the clock submits it at the DISK turn; without,
// the thread makes it itself after its turn.
TEST(Tap, ADiskCallQueuedWhenItsFileIsClosedIsNotMadeOnTheNumbersNextFile) {
    TempFile fa(4096, 51), fb(4096, 52);
    ASSERT_GE(fa.fd(), 0);
    ASSERT_GE(fb.fd(), 0);
    const Pattern pb(52);
    for (const char *io : {"uring", "epoll", "poll"}) {
        ASSERT_EQ(0, run_tap("ratio=5:4:1", [&] {
            int f = weft_open(fa.path().c_str(), O_RDONLY);
            ASSERT_GE(f, 0) << strerror(errno);
            std::vector<uint8_t> got(4096, 0);
            ssize_t r = 0;
            int e = 0;
            weft_thread_t t;
            const uint64_t parks0 = parks(WEFT_PARK_IO);
            ASSERT_EQ(0, spawn(&t, [&] {
                r = weft_pread(f, got.data(), got.size(), 0);
                e = errno;
                return nullptr;
            }));
            while (parks(WEFT_PARK_IO) == parks0) weft_yield();
            const weft_tap_stats_t before = tap_stats();
            uint64_t in_disk = 0; // calendar 1: DISK
            for (int l = 0; l < WEFT_TAP_MAX_LEVELS; ++l) in_disk += before.queued[1][l];
            EXPECT_EQ(1u, in_disk) << io << ": the read waits in the DISK calendar";
            weft_close(f);
            int g = open(fb.path().c_str(), O_RDONLY); // takes the number, unseen by weft
            ASSERT_GE(g, 0);
            const bool reused = g == f;
            join(t);
            EXPECT_EQ(-1, r) << io;
            EXPECT_EQ(EBADF, e) << io;
            if (reused) {
                EXPECT_NE(-1, pb.mismatch(got.data(), 0, got.size())) << io << ": it read the next file";
            }
            close(g);
        }, io));
    }
}

// TAP locking, the paper's Figs. 5-6. L (least urgent) holds R and works
// inside it, yielding; M (middling) keeps running; H (most urgent) asks for
// R. With locks by appointment L's critical section runs in the appointment
// lane, ahead of M, and H has R as soon as L lets it go: M does not run at
// all between H's request and H's lock. With locks=off it is the classic
// inversion: L waits behind M, and H with it, until M is done.
TEST(Tap, AMutexByAppointmentKeepsTheMiddleThreadOutOfTheInversion) {
    constexpr long kM = 20000;
    for (const char *locks : {"on", "off"}) {
        long requested_at = -1, got_at = -1;
        uint64_t appts = 0;
        std::string spec = std::string("ratio=1:1:1,class=const,levels=16,locks=") + locks;
        ASSERT_EQ(0, run_tap(spec.c_str(), [&] {
            weft_mutex_t r = WEFT_MUTEX_INITIALIZER;
            std::atomic<bool> held{false}, asked{false}, stop{false};
            long m_count = 0;
            weft_thread_t tl, tm, th;
            ASSERT_EQ(0, spawn(&tl, [&] {
                weft_tap_set_level(15);
                weft_mutex_lock(&r);
                held = true;
                while (!asked.load()) weft_yield();        // holds R until H asks for it,
                for (int i = 0; i < 50; ++i) weft_yield(); // then works inside it a while
                weft_mutex_unlock(&r);
                return nullptr;
            }));
            while (!held.load()) weft_sleep_ns(100 * kUs);
            ASSERT_EQ(0, spawn(&tm, [&] {
                weft_tap_set_level(8);
                for (long i = 0; i < kM && !stop.load(); ++i) {
                    ++m_count;
                    weft_yield();
                }
                return nullptr;
            }));
            ASSERT_EQ(0, spawn(&th, [&] {
                weft_tap_set_level(0);
                weft_yield(); // let M get going
                requested_at = m_count;
                asked = true;
                weft_mutex_lock(&r);
                got_at = m_count;
                weft_mutex_unlock(&r);
                stop = true;
                return nullptr;
            }));
            join(th);
            join(tm);
            join(tl);
            appts = tap_stats().lock_appointments;
        }));
        ASSERT_GE(requested_at, 0) << locks;
        if (std::string(locks) == "on") {
            EXPECT_EQ(requested_at, got_at) << "M ran while H waited for R";
            EXPECT_EQ(1u, appts);
        } else {
            EXPECT_EQ(kM, got_at) << "without TAP locking H waits for M (the inversion)";
            EXPECT_LT(requested_at, kM);
            EXPECT_EQ(0u, appts);
        }
    }
}

// Waiters for a mutex are served by level, FIFO within a level.
TEST(Tap, MutexWaitersAreServedByLevel) {
    std::string order;
    ASSERT_EQ(0, run_tap("class=const,levels=8", [&] {
        weft_mutex_t m = WEFT_MUTEX_INITIALIZER;
        weft_mutex_lock(&m);
        const int levels[] = {5, 1, 3, 1, 7, 0};
        std::vector<weft_thread_t> ts(6);
        for (int i = 0; i < 6; ++i)
            ASSERT_EQ(0, spawn(&ts[size_t(i)], [&, i] {
                weft_tap_set_level(levels[i]);
                weft_mutex_lock(&m);
                order += char('A' + i);
                weft_mutex_unlock(&m);
                return nullptr;
            }));
        const uint64_t parks0 = parks(WEFT_PARK_MUTEX);
        while (parks(WEFT_PARK_MUTEX) < parks0 + 6) weft_sleep_ns(100 * kUs);
        weft_mutex_unlock(&m);
        for (auto &t : ts) join(t);
    }));
    EXPECT_EQ("FBDCAE", order);
}

// Starvation (the paper's Figs. 8-9: large files reset under shaping). One
// thread streams 4 MiB through a socket while forty servers keep accepting
// and answering short requests (each accept resets them to level 0) for
// forty clients that put themselves at level 0 before each request; the
// bulk thread sinks to the lowest level at once. With weft's class the
// calendars age its calls up, so the transfer completes while the short
// traffic still runs (the clients give up after 20 s: then it did not).
TEST(Tap, ABulkTransferCompletesUnderUrgentTraffic) {
    std::atomic<bool> bulk_done{false};
    std::atomic<long> shorts{0};
    std::atomic<bool> timed_out{false};
    long shorts_when_done = 0;
    bool timed_out_when_done = true;
    ASSERT_EQ(0, run_tap("ratio=5:4:1,class=weft,levels=16,age=4", [&] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        uint16_t port = 0;
        int l = tcp_listen(&port);
        ASSERT_GE(l, 0);
        std::atomic<bool> stop{false};
        std::vector<weft_thread_t> servers(40), clients(40);
        for (int i = 0; i < 40; ++i) {
            ASSERT_EQ(0, spawn(&servers[size_t(i)], [&] {
                for (;;) {
                    int c = weft_accept(l, nullptr, nullptr);
                    if (c < 0) break;
                    char b[8];
                    if (weft_read(c, b, 1) == 1) weft_write(c, b, 1);
                    weft_close(c);
                }
                return nullptr;
            }));
            ASSERT_EQ(0, spawn(&clients[size_t(i)], [&] {
                const uint64_t until = weft_now_ns() + 20'000 * kMs;
                while (!stop.load()) {
                    if (weft_now_ns() >= until) {
                        timed_out.store(true); // the bulk transfer did not finish while we ran
                        break;
                    }
                    weft_tap_set_level(0); // an interactive client: always above the bulk thread
                    int c = tcp_connect(port);
                    if (c < 0) break;
                    char b = 'q';
                    if (weft_write(c, &b, 1) == 1 && weft_read(c, &b, 1) == 1) shorts.fetch_add(1);
                    weft_close(c);
                }
                return nullptr;
            }));
        }
        weft_thread_t reader;
        size_t received = 0;
        ASSERT_EQ(0, spawn(&reader, [&] {
            std::vector<char> buf(65536);
            for (ssize_t n; (n = weft_read(sv[1], buf.data(), buf.size())) > 0;) received += size_t(n);
            return nullptr;
        }));
        std::vector<char> chunk(16384, 'b');
        size_t sent = 0;
        while (sent < (4u << 20)) {
            ssize_t n = weft_write(sv[0], chunk.data(), chunk.size());
            if (n <= 0) break;
            sent += size_t(n);
        }
        shutdown(sv[0], SHUT_WR);
        join(reader);
        bulk_done = true;
        shorts_when_done = shorts.load();
        timed_out_when_done = timed_out.load();
        stop = true;
        for (auto &t : clients) join(t);
        weft_close(l); // the servers' accepts end with EBADF
        for (auto &t : servers) join(t);
        EXPECT_EQ(size_t(4u << 20), sent);
        EXPECT_EQ(sent, received);
        close(sv[0]);
        close(sv[1]);
    }));
    EXPECT_TRUE(bulk_done.load());
    EXPECT_FALSE(timed_out_when_done) << "the bulk transfer finished only once the urgent traffic had stopped";
    EXPECT_GT(shorts_when_done, 100) << "the short traffic was not running while the bulk transfer did";
}

} // namespace
