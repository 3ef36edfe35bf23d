// The access log: one line per response in the combined log format,
// buffered in memory and written by a flusher thread once a second (and
// when the buffer passes 64 KiB, and at shutdown), so a request never waits
// for the disk.
#pragma once

#include <sys/socket.h>

#include <string>
#include <string_view>

#include "weft/weft.h"

namespace knot {

class AccessLog {
public:
    // Opens (appends to) path; false with errno on failure.
    bool open(const std::string &path);
    void add(const struct sockaddr_storage &peer, std::string_view method, std::string_view target,
             int version_minor, unsigned status, unsigned long long bytes, std::string_view referer,
             std::string_view user_agent);
    // Writes what is buffered (called by the flusher thread and at exit).
    void flush();
    int fd() const { return fd_; }
    void close();

private:
    int fd_ = -1;
    weft_mutex_t mu_ = WEFT_MUTEX_INITIALIZER;    // guards buf_
    weft_mutex_t write_mu_ = WEFT_MUTEX_INITIALIZER; // keeps writes in order
    std::string buf_;
};

} // namespace knot
