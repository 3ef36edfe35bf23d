#include "access_log.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>

#include <cstdio>
#include <ctime>

namespace knot {
namespace {

constexpr size_t kFlushAt = 64 * 1024;

// "[24/Nov/2026:10:00:00 +0000]", reformatted when the second changes.
std::string_view log_time() {
    thread_local time_t shown = -1;
    thread_local char text[40];
    thread_local size_t len = 0;
    time_t now = time(nullptr);
    if (now != shown) {
        struct tm tm;
        gmtime_r(&now, &tm);
        len = strftime(text, sizeof text, "[%d/%b/%Y:%H:%M:%S +0000]", &tm);
        shown = now;
    }
    return {text, len};
}

void peer_text(const struct sockaddr_storage &peer, char *out, size_t cap) {
    if (peer.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in &>(peer).sin_addr, out, static_cast<socklen_t>(cap));
    else if (peer.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 &>(peer).sin6_addr, out,
                  static_cast<socklen_t>(cap));
    else
        snprintf(out, cap, "-");
}

// Quoted log fields: a client's bytes never break the line format.
void append_field(std::string &b, std::string_view v) {
    if (v.empty()) {
        b += '-';
        return;
    }
    for (unsigned char c : v) {
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\x%02x", c);
            b += esc;
        } else {
            b += static_cast<char>(c);
        }
    }
}

} // namespace

bool AccessLog::open(const std::string &path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return fd_ >= 0;
}

void AccessLog::add(const struct sockaddr_storage &peer, std::string_view method, std::string_view target,
                    int version_minor, unsigned status, unsigned long long bytes, std::string_view referer,
                    std::string_view user_agent) {
    if (fd_ < 0) return;
    char addr[INET6_ADDRSTRLEN];
    peer_text(peer, addr, sizeof addr);
    char tail[64];
    weft_mutex_lock(&mu_);
    buf_ += addr;
    buf_ += " - - ";
    buf_ += log_time();
    buf_ += " \"";
    if (method.empty()) {
        buf_ += '-';
    } else {
        append_field(buf_, method);
        buf_ += ' ';
        append_field(buf_, target);
        buf_ += version_minor ? " HTTP/1.1" : " HTTP/1.0";
    }
    snprintf(tail, sizeof tail, "\" %u %llu \"", status, bytes);
    buf_ += tail;
    append_field(buf_, referer);
    buf_ += "\" \"";
    append_field(buf_, user_agent);
    buf_ += "\"\n";
    bool full = buf_.size() >= kFlushAt;
    weft_mutex_unlock(&mu_);
    if (full) flush();
}

void AccessLog::flush() {
    if (fd_ < 0) return;
    weft_mutex_lock(&write_mu_);
    std::string out;
    weft_mutex_lock(&mu_);
    out.swap(buf_);
    weft_mutex_unlock(&mu_);
    size_t done = 0;
    while (done < out.size()) {
        ssize_t n = weft_write(fd_, out.data() + done, out.size() - done);
        if (n <= 0) {
            perror("weft-knot: access log");
            break;
        }
        done += static_cast<size_t>(n);
    }
    weft_mutex_unlock(&write_mu_);
}

void AccessLog::close() {
    flush();
    if (fd_ >= 0) weft_close(fd_);
    fd_ = -1;
}

} // namespace knot
