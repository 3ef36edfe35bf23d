// weft-watpipe: WatPipe, the pipeline web server of the EuroSys'07 study
// (§6), on plain pthreads and system calls. main.cc explains the design;
// this header is what main.cc and the stages (stages.cc) share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cli.hpp"
#include "common/evconn.hpp"

namespace watpipe {

constexpr const char *kProg = "weft-watpipe";

// The flags every weft server has (common/cli.hpp), and WatPipe's own.
struct Options : weft::srv::CommonOptions {
    int writers = 4;              // stage-4 threads
};

// A connection as it travels the pipeline. Exactly one stage owns it at a
// time (holds the pointer and may touch it); a hand-off publishes it to the
// next stage through a mutex, so EvConn itself needs no lock.
struct Conn : weft::srv::EvConn {
    using EvConn::EvConn;
    // Registered (EPOLLONESHOT, possibly disarmed) with stage 2's / stage
    // 3's epoll instance: re-arm with EPOLL_CTL_MOD rather than ADD. Each
    // flag is read and written by its own stage only.
    bool in_read_set = false;
    bool in_write_set = false;
};

// A hand-off queue into a stage whose thread sleeps in epoll_wait: the
// eventfd is in that epoll set. Senders push a whole batch under one lock
// and write the eventfd only when the queue was empty (otherwise a wake-up
// is already pending); the receiver clears the eventfd before it takes the
// queue, so no batch is left without a wake-up.
class Inbox {
public:
    Inbox();
    ~Inbox();
    Inbox(const Inbox &) = delete;
    Inbox &operator=(const Inbox &) = delete;

    bool ok() const { return efd_ >= 0; }
    int fd() const { return efd_; }
    void push(std::vector<Conn *> *batch); // moves all of *batch in, leaves it empty
    void take(std::vector<Conn *> *out);   // appends everything queued to *out
    void wake();                           // no batch: look at the flags (shutdown)

private:
    std::mutex mu_;
    std::vector<Conn *> q_;
    int efd_;
};

struct Server;

// Stage 4: the writer threads, driven by stage 3. run() gives them a batch
// and returns when every connection of it has been written as far as it
// goes, so that stages 3 and 4 alternate as in the paper.
class Writers {
public:
    // Starts n threads; false (and none left running) if it cannot.
    bool start(Server *s, int n);
    // results[i]: what batch[i] waits for next (Write, Read or Close).
    void run(const std::vector<Conn *> &batch, std::vector<weft::srv::Next> *results);
    void stop(); // the threads return; joins them

private:
    void loop();

    Server *s_ = nullptr;
    size_t nthreads_ = 0;
    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    Conn *const *items_ = nullptr;
    weft::srv::Next *results_ = nullptr;
    size_t count_ = 0, next_ = 0, finished_ = 0; // the batch; next_: first unclaimed
    bool quit_ = false;
    std::vector<std::thread> threads_;
};

// The whole server, shared by the stages.
struct Server {
    Options opt;
    weft::srv::ServerCounters counters;
    weft::srv::EvSite site;
    const weft::srv::BusyReply *busy = nullptr;
    std::atomic<bool> stopping{false}; // a signal came: wind down (EvSite::stopping points here)
    std::atomic<bool> quit{false};     // every connection is closed: stages 2 and 3 return
    int listen_fd = -1;                // non-blocking; stage 1 closes it when it returns
    int stop_accept_fd = -1;           // eventfd: stage 1 returns
    int drained_fd = -1;               // eventfd: the last connection closed while stopping
    int read_ep = -1, write_ep = -1;   // stage 2's and stage 3's epoll instances
    Inbox to_reader;                   // stages 1 and 3 -> stage 2
    Inbox to_writer;                   // stage 2 -> stage 3
    Writers writers;                   // stage 4
};

void stage1_accept(Server *s);
void stage2_read(Server *s);
void stage3_write(Server *s);

// The one way a connection ends: closes its socket, and wakes the
// shutdown when it was the last.
void close_conn(Server *s, Conn *c);

} // namespace watpipe
