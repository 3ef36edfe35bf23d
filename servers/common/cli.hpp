// What every weft server's command line and start-up share: number and
// duration flags, the --listen address, the listening socket. Each function
// reports a problem as "PROG: ..." on stderr and exits: 2 for a usage error
// (with "(see PROG --help)"), 1 when the server cannot start.
#pragma once

#include <sys/socket.h>

#include <string>

namespace weft::srv {

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
