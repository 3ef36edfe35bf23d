#include "cli.hpp"

#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace weft::srv {

void usage_error(const char *prog, const char *fmt, const char *arg) {
    std::fprintf(stderr, "%s: ", prog);
    std::fprintf(stderr, fmt, arg);
    std::fprintf(stderr, "\n(see %s --help)\n", prog);
    std::exit(2);
}

namespace {
void need_value(const char *prog, const char *opt, const char *s) {
    if (s) return;
    std::fprintf(stderr, "%s: %s wants a value\n", prog, opt);
    std::exit(2);
}
} // namespace

long parse_long(const char *prog, const char *opt, const char *s, long lo, long hi) {
    need_value(prog, opt, s);
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        std::fprintf(stderr, "%s: %s wants an integer in [%ld, %ld], got '%s'\n", prog, opt, lo, hi, s);
        std::exit(2);
    }
    return v;
}

double parse_seconds(const char *prog, const char *opt, const char *s) {
    need_value(prog, opt, s);
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(s, &end);
    if (errno || end == s || *end || !std::isfinite(v) || v <= 0 || v > 86400) {
        std::fprintf(stderr, "%s: %s wants seconds in (0, 86400], got '%s'\n", prog, opt, s);
        std::exit(2);
    }
    return v;
}

void parse_command_line(const char *prog, int argc, char **argv, const struct option *own, CommonOptions *o,
                        const std::function<bool(int, const char *)> &own_flag, void (*usage)(FILE *)) {
    std::vector<struct option> longs = {
        {"listen", required_argument, nullptr, kOptListen},
        {"root", required_argument, nullptr, kOptRoot},
        {"fd-cache", required_argument, nullptr, kOptFdCache},
        {"max-conns", required_argument, nullptr, kOptMaxConns},
        {"max-requests", required_argument, nullptr, kOptMaxRequests},
        {"keepalive-timeout", required_argument, nullptr, kOptKeepalive},
        {"header-timeout", required_argument, nullptr, kOptHeaderTimeout},
        {"send-timeout", required_argument, nullptr, kOptSendTimeout},
        {"stats", no_argument, nullptr, kOptStats},
        {"follow-symlinks", no_argument, nullptr, kOptFollow},
        {"quiet", no_argument, nullptr, kOptQuiet},
        {"help", no_argument, nullptr, kOptHelp},
    };
    for (const struct option *p = own; p && p->name; ++p) longs.push_back(*p);
    longs.push_back({nullptr, 0, nullptr, 0});
    opterr = 0;
    for (;;) {
        int idx = 0;
        int c = getopt_long(argc, argv, "h", longs.data(), &idx);
        if (c == -1) break;
        const char *a = optarg;
        switch (c) {
        case kOptListen: o->listen = a; break;
        case kOptRoot: o->root = a; break;
        case kOptFdCache: o->fd_cache = parse_long(prog, "--fd-cache", a, 1, 1 << 20); break;
        case kOptMaxConns: o->max_conns = parse_long(prog, "--max-conns", a, 1, 10000000); break;
        case kOptMaxRequests: o->max_requests = parse_long(prog, "--max-requests", a, 1, 1L << 40); break;
        case kOptKeepalive: o->keepalive_timeout_s = parse_seconds(prog, "--keepalive-timeout", a); break;
        case kOptHeaderTimeout: o->header_timeout_s = parse_seconds(prog, "--header-timeout", a); break;
        case kOptSendTimeout: o->send_timeout_s = parse_seconds(prog, "--send-timeout", a); break;
        case kOptStats: o->stats = true; break;
        case kOptFollow: o->follow_symlinks = true; break;
        case kOptQuiet: o->quiet = true; break;
        case kOptHelp:
        case 'h': usage(stdout); std::exit(0);
        default:
            if (c < kOwnOption || !own_flag(c, a)) usage_error(prog, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) usage_error(prog, "unexpected argument '%s'", argv[optind]);
}

struct sockaddr_storage resolve(const char *prog, const std::string &listen, socklen_t *len) {
    std::string host, port;
    if (!listen.empty() && listen[0] == '[') {
        size_t close = listen.find(']');
        if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':')
            usage_error(prog, "--listen wants ADDR:PORT or [ADDR]:PORT, not '%s'", listen.c_str());
        host = listen.substr(1, close - 1);
        port = listen.substr(close + 2);
    } else {
        size_t colon = listen.rfind(':');
        if (colon == std::string::npos) usage_error(prog, "--listen wants ADDR:PORT, not '%s'", listen.c_str());
        host = listen.substr(0, colon);
        port = listen.substr(colon + 1);
    }
    parse_long(prog, "--listen port", port.c_str(), 0, 65535);
    struct addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    struct addrinfo *res = nullptr;
    int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
        std::fprintf(stderr, "%s: cannot resolve '%s': %s\n", prog, host.c_str(), gai_strerror(rc));
        std::exit(1);
    }
    struct sockaddr_storage ss {};
    std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return ss;
}

int listen_on(const char *prog, struct sockaddr_storage *ss, socklen_t len, bool reuseport, const std::string &what,
              int flags) {
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
            close(fd);
            return -2; // no SO_REUSEPORT: the caller shares one socket
        }
    }
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(ss), len) != 0 || listen(fd, 4096) != 0) {
        std::fprintf(stderr, "%s: cannot listen on %s: %s\n", prog, what.c_str(), std::strerror(errno));
        std::exit(1);
    }
    getsockname(fd, reinterpret_cast<sockaddr *>(ss), &len); // the port, if 0 was asked
    return fd;
}

std::string address_text(const struct sockaddr_storage &ss) {
    char host[NI_MAXHOST], port[NI_MAXSERV];
    socklen_t len = ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    getnameinfo(reinterpret_cast<const sockaddr *>(&ss), len, host, sizeof host, port, sizeof port,
                NI_NUMERICHOST | NI_NUMERICSERV);
    return ss.ss_family == AF_INET6 ? "[" + std::string(host) + "]:" + port : std::string(host) + ":" + port;
}

} // namespace weft::srv
