// What every weft server's command line and start-up share: number and
// duration flags, the --listen address, the listening socket. Each function
// reports a problem as "PROG: ..." on stderr and exits: 2 for a usage error
// (with "(see PROG --help)"), 1 when the server cannot start.
#pragma once

#include <sys/socket.h>

#include <cstdio>
#include <functional>
#include <string>

struct option;

namespace weft::srv {

// The flags every weft server has, with the same meaning and defaults. A
// server's Options derives from it and adds its own.
struct CommonOptions {
    std::string listen = "127.0.0.1:8080";
    std::string root = ".";
    long fd_cache = 4096;         // open files kept with their headers
    long max_conns = 10000;       // connections served at once; more get 503
    long max_requests = 1000;     // per connection
    double keepalive_timeout_s = 15;
    double header_timeout_s = 10;
    double send_timeout_s = 60;
    bool stats = false;           // /.weft/stats
    bool follow_symlinks = false;
    bool quiet = false;
};

// getopt_long codes: the common flags take these; a server numbers its own
// from kOwnOption up.
enum : int {
    kOptListen = 256, kOptRoot, kOptFdCache, kOptMaxConns, kOptMaxRequests, kOptKeepalive, kOptHeaderTimeout,
    kOptSendTimeout, kOptStats, kOptFollow, kOptQuiet, kOptHelp, kOwnOption
};

// Parse argv: the common flags into *common, the server's own (`own`, a
// table ending with a zero entry) through own_flag(code, optarg), which
// returns false for a code it does not know. --help prints usage(stdout)
// and exits 0; an unknown or incomplete option or a stray argument exits 2.
void parse_command_line(const char *prog, int argc, char **argv, const struct option *own, CommonOptions *common,
                        const std::function<bool(int, const char *)> &own_flag, void (*usage)(FILE *));

[[noreturn]] void usage_error(const char *prog, const char *fmt, const char *arg);

// An integer in [lo, hi], else exit 2.
long parse_long(const char *prog, const char *opt, const char *s, long lo, long hi);

// Seconds in (0, 86400], fractions allowed, else exit 2.
double parse_seconds(const char *prog, const char *opt, const char *s);

// "host:port" or "[v6]:port" -> an address; exit 2 if malformed, 1 if it
// does not resolve.
struct sockaddr_storage resolve(const char *prog, const std::string &listen, socklen_t *len);

// A listening socket (SO_REUSEADDR, TCP_NODELAY inherited by accepted
// sockets, backlog 4096) bound to *ss; *ss gets the port chosen when 0 was
// asked. reuseport: SO_REUSEPORT too, and -2 (no exit) if the kernel
// refuses it. flags: more socket(2) type flags (SOCK_NONBLOCK). Exit 1 when
// it cannot listen.
int listen_on(const char *prog, struct sockaddr_storage *ss, socklen_t len, bool reuseport, const std::string &what,
              int flags = 0);

// "127.0.0.1:8080" or "[::1]:8080".
std::string address_text(const struct sockaddr_storage &ss);

} // namespace weft::srv
