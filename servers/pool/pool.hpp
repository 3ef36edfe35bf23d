// weft-pool: the thread-pool web server of the StagedServer paper (Larus and
// Parkes, Fig. 6: THWS), on plain pthreads and blocking system calls.
// main.cc explains the design; this header is what main.cc and the workers
// (worker.cc) share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

#include "common/cli.hpp"
#include "common/evconn.hpp"
#include "common/stats.hpp"

namespace pool {

constexpr const char *kProg = "weft-pool";

// The flags every weft server has (common/cli.hpp), and the pool's own.
struct Options : weft::srv::CommonOptions {
    int workers = 256; // the paper's pool
};

// The hand-off from the accept thread to the workers, and the record of
// which connection each worker serves (so that shutdown can end the idle
// ones). The queue needs no bound of its own: the accept thread admits a
// connection only while open_conns (queued + served) is below --max-conns,
// so it never holds more than that.
class ConnQueue {
public:
    explicit ConnQueue(size_t workers) : serving_(workers, -1) {}

    // The accept thread: a new connection for the next free worker.
    void push(int fd);
    // Worker `w`: the next connection (now recorded as w's), or -1 once
    // quit() has been called and nothing is queued. A connection taken
    // after shutdown began gets SHUT_RD at once: it is answered what it has
    // already sent, then ends.
    int pop(size_t w);
    // Worker `w` is done with its connection: forget it *before* closing,
    // so that shutdown never shuts down a descriptor number reused since.
    void release(size_t w);

    // Shutdown: SHUT_RD on every connection being served. One waiting for
    // (or in the middle of) a request reads EOF and ends; one sending a
    // reply finishes it first, as in weft-knot.
    void shut_read_all();
    // The workers return once the queue is empty.
    void quit();

    // Counting out: called after a connection's socket is closed; the
    // last one while `stopping` wakes wait_drained().
    void closed(weft::srv::ServerCounters *c);
    void wait_drained(const weft::srv::ServerCounters &c);

private:
    std::mutex mu_;
    std::condition_variable work_cv_, drained_cv_;
    std::deque<int> q_;
    std::vector<int> serving_; // per worker: its connection, or -1
    bool shutting_ = false, quit_ = false;
};

// The whole server, shared by the accept thread and the workers.
struct Server {
    explicit Server(const Options &o) : opt(o), queue(static_cast<size_t>(o.workers)) {}
    Options opt;
    weft::srv::ServerCounters counters;
    weft::srv::EvSite site;
    const weft::srv::BusyReply *busy = nullptr;
    std::atomic<bool> stopping{false}; // a signal came (EvSite::stopping points here)
    int listen_fd = -1;                // non-blocking; the accept thread closes it when it returns
    int stop_accept_fd = -1;           // eventfd: the accept thread returns
    ConnQueue queue;
};

// A worker: pops connections and serves each to its end, until quit.
void worker_loop(Server *s, size_t w);

} // namespace pool
