// weft-staged: the staged web server of StagedServer (Larus & Parkes §3.6,
// §5.1) on weft's stage library (include/weft/stage.hpp), serving what
// every weft server serves through the shared HTTP core (http/).
//
// Six stages, swept in this order by one runner per vproc:
//
//   control     shared       one closure per connection: the server's
//                            control logic as a finite-state automaton
//                            whose methods are its states (stages.cc)
//   network     shared       receive a request head, drop a request body,
//                            send a reply window: tried at once without
//                            waiting, else on a weft thread parked in the
//                            reactor until the socket is ready
//   files       partitioned  by the path's hash: each vproc owns a file
//                            cache (open descriptors and prebuilt headers)
//                            for its share of the paths, so none is shared
//   blocks      partitioned  by (file, 256 KiB stripe): each vproc holds
//                            its share of the files' 64 KiB blocks in memory
//   aggregator  shared       the blocks a cohort missed, merged into one
//                            read per run of adjacent blocks of a file
//   disk        shared       one read per run, on a weft thread: with the
//                            io_uring reactor, an io_uring read
//
// A connection's closure lives as long as the connection; everything else
// is a child it waits for. Bodies always come from blocks in memory: the
// reply is sent a window (four blocks) at a time, the head with the first.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/stats.hpp"
#include "http/cache.hpp"
#include "http/parser.hpp"
#include "http/response.hpp"
#include "weft/stage.hpp"

namespace staged {

constexpr const char *kProg = "weft-staged";

constexpr uint32_t kBlockBytes = 64 * 1024;
constexpr uint32_t kWindowBlocks = 4;     // blocks fetched, then sent, at a time
constexpr uint32_t kMaxRunBlocks = 16;    // the aggregator's longest merged read (1 MiB)

// The flags every weft server has (common/cli.hpp), and weft-staged's own.
struct Options : weft::srv::CommonOptions {
    int vprocs = 0;                       // 0: weft_default_vprocs()
    long cache_mb = 64;                   // the blocks held in memory, all partitions
    bool reuseport = true;
};

// A block of a file in memory. `run` owns the buffer of the read that
// brought it (a merged read's blocks share one).
struct Block {
    std::shared_ptr<const char[]> run;
    const char *data = nullptr;
    uint32_t len = 0;
};

// Which file a block belongs to: a file edited or replaced is another file.
struct FileId {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileId &) const = default;
};

// The stages' data: each stage is a class in stages.cc; the server holds
// them and the scheduler.
struct Stages;

struct Server {
    Options opt;
    int root_fd = -1;
    int listen_fds[64] = {};
    int listen_count = 0;
    weft::http::Limits limits;
    weft::http::Responder *responder = nullptr; // prepare() and respond_found() only
    weft::srv::ServerCounters counters;
    std::atomic<bool> stopping{false};
    std::atomic<long> live{0};    // connection closures not yet done
    weft_sem_t drained;           // posted when the last one ends while stopping
    uint64_t started_ns = 0;
    Stages *stages = nullptr;
};

// Build the stages and their scheduler (on the weft runtime), start the
// runners; end: stop and free them once every connection has ended
// (*profile: the stage profile as a table, if asked).
void stages_start(Server &s);
void stages_stop(Server &s, std::string *profile);

// A new connection: its control closure, queued on the calling vproc.
void connection_start(Server &s, int fd);

// Shutdown: every connection waiting for (or reading) a request ends;
// replies in flight finish first.
void connections_shutdown(Server &s);

// Partition 0's file cache (the responder's; it looks nothing up there).
weft::http::FileCache &first_cache(Server &s);

// The file caches' counters, summed over the partitions.
weft::http::FileCache::Counters cache_counters(Server &s);

} // namespace staged
