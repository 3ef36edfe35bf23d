// weft-userver: the µserver's event loop and the readiness mechanisms it
// waits with. One Loop is one SPED server: main.cc runs one (SPED), one per
// forked process (SYMPED), or one per kernel thread (shared-SYMPED); see
// main.cc for the modes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/evconn.hpp"

namespace userver {

constexpr const char *kProg = "weft-userver";

enum class Events { Epoll, Poll, Select };
const char *events_name(Events e);

// ---- readiness ----

constexpr uint32_t kIn = 1, kOut = 2, kErr = 4;

struct Ready {
    int fd;
    uint32_t what; // kIn | kOut | kErr
};

// A descriptor is watched either for reading or for writing, never both:
// an EvConn waits for one or the other (Next::Read / Next::Write).
class Poller {
public:
    static std::unique_ptr<Poller> make(Events kind); // nullptr (errno set) if it cannot
    virtual ~Poller() = default;
    // false when fd cannot be watched (select: fd >= FD_SETSIZE; epoll:
    // out of memory or watches). shared: the listening socket other loops
    // watch too (epoll wakes one of them, not all).
    virtual bool add(int fd, bool write, bool shared = false) = 0;
    virtual void modify(int fd, bool write) = 0;
    // closing: fd is about to be closed, which is all epoll needs.
    virtual void remove(int fd, bool closing) = 0;
    // Waits up to timeout_ms; *out gets what is ready. -1 on failure
    // (errno), 0 on EINTR.
    virtual int wait(int timeout_ms, std::vector<Ready> *out) = 0;
};

// ---- the loop ----

struct LoopConfig {
    Events events = Events::Epoll;
    int listen_fd = -1;
    bool listen_shared = false; // other loops accept on listen_fd too
    bool own_listener = true;   // close listen_fd when stopping (else main does, after every loop ended)
    // Readable when the loop must stop: a non-blocking signalfd the loop
    // reads (SPED, a SYMPED process), or an eventfd main writes once and
    // every loop sees (shared-SYMPED).
    int stop_fd = -1;
    bool stop_is_signalfd = true;
    bool announce = false;      // print the "shutting down" line (SPED: no parent to do it)
    // --max-conns: a limit on the server's total, site.counters->open_conns,
    // which every loop of the server (thread or process) adds to.
    long max_conns = 10000;
    std::atomic<long> *open_here = nullptr; // this loop's own count (SYMPED: the parent's bookkeeping)
    weft::srv::EvSite site;     // counters: the server's; stopping: see below
    std::atomic<bool> *stopping = nullptr; // set when stopping (site.stopping points here)
    const weft::srv::BusyReply *busy = nullptr;
};

class Loop {
public:
    explicit Loop(const LoopConfig &cfg);
    ~Loop(); // closes the connections left, if any
    Loop(const Loop &) = delete;
    Loop &operator=(const Loop &) = delete;

    // The poller, the listener and stop descriptor in it, the spare
    // descriptor. false (with a message on stderr) when it cannot start.
    bool init();
    // Serves until stopped and every connection has ended: 0; 1 if waiting fails.
    int run();

private:
    struct Slot {
        weft::srv::EvConn *c = nullptr;
        bool out = false; // watched for writing
    };

    weft::srv::DeadlineList &list(uint8_t id) { return lists_[id - 1]; }
    void on_conn(int fd);
    void settle(weft::srv::EvConn *c, weft::srv::Next n, uint8_t old_list, uint64_t old_deadline);
    void close_conn(weft::srv::EvConn *c);
    void accept_ready();
    void refuse(int fd);
    void shed(int err);
    void pause_accepting(uint64_t ns);
    void on_stop();
    void begin_stop();
    void expire_due();
    int timeout_ms() const;

    LoopConfig cfg_;
    weft::srv::ServerCounters &counters_;
    std::unique_ptr<Poller> poller_;
    std::vector<Slot> slots_; // by descriptor
    weft::srv::DeadlineList lists_[3] = {weft::srv::DeadlineList(weft::srv::EvConn::kHeader),
                                         weft::srv::DeadlineList(weft::srv::EvConn::kKeepAlive),
                                         weft::srv::DeadlineList(weft::srv::EvConn::kSend)};
    std::vector<Ready> ready_;
    long open_ = 0;
    bool listening_ = false; // listen_fd is ours to accept on
    bool paused_ = false;    // ... but out of the poller until resume_ns_
    bool stopping_ = false;
    uint64_t resume_ns_ = 0;
    uint64_t now_ = 0;
    int spare_ = -1;         // /dev/null, given up to accept one connection when the table is full
};

using weft::srv::now_ns; // CLOCK_MONOTONIC ns, the clock of EvConn's deadlines

} // namespace userver
