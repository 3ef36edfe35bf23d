/* weft-srcaddr.so: give a load generator's loopback connections chosen
 * source addresses, for tools that have no option for it (httperf).
 *
 *   WEFT_SRCADDR=127.0.0.10            every connection from 127.0.0.10
 *   WEFT_SRCADDR=127.0.0.10-127.0.0.17 round robin over the eight
 *   LD_PRELOAD=.../weft-srcaddr.so httperf ...
 *
 * A TCP connection is named by its 4-tuple, and a client that opens and closes
 * connections quickly to one server address uses up the ~28,000 ephemeral
 * ports of one source address (each closed connection holds its port in
 * TIME_WAIT for 60 s).  Every address of 127.0.0.0/8 is local on Linux, so a
 * client that binds its sockets to other loopback addresses before connecting
 * gets that many more 4-tuples, and the traffic stays on loopback.
 *
 * Only connect() on an IPv4 stream socket to a 127.0.0.0/8 destination that
 * is not bound yet is changed: the socket is bound to the next address with
 * port 0 and IP_BIND_ADDRESS_NO_PORT (the port is then chosen by connect, per
 * destination, as without the bind).  Everything else passes through.  A bad
 * WEFT_SRCADDR is reported once on stderr and ignored; a failed bind leaves
 * the connection to the kernel's default source. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static connect_fn real_connect;
static uint32_t first_addr, addr_count; /* host order; count 0: off */
static unsigned next_index;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int parse_loopback(const char *s, size_t n, uint32_t *out)
{
    char buf[INET_ADDRSTRLEN];
    struct in_addr a;
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, &a) != 1)
        return -1;
    *out = ntohl(a.s_addr);
    return (*out >> 24) == 127 ? 0 : -1;
}

static void init(void)
{
    real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    const char *spec = getenv("WEFT_SRCADDR");
    if (spec == NULL || *spec == '\0')
        return;
    const char *dash = strchr(spec, '-');
    uint32_t lo, hi;
    int bad = dash ? parse_loopback(spec, (size_t)(dash - spec), &lo) || parse_loopback(dash + 1, strlen(dash + 1), &hi)
                   : parse_loopback(spec, strlen(spec), &lo);
    if (!dash)
        hi = lo;
    if (bad || hi < lo) {
        fprintf(stderr, "weft-srcaddr: WEFT_SRCADDR=%s is not a 127.0.0.0/8 address or range "
                        "(e.g. 127.0.0.10 or 127.0.0.10-127.0.0.17): ignored\n", spec);
        return;
    }
    first_addr = lo;
    addr_count = hi - lo + 1;
}

static int unbound(int fd)
{
    struct sockaddr_in me;
    socklen_t len = sizeof me;
    return getsockname(fd, (struct sockaddr *)&me, &len) == 0 && me.sin_family == AF_INET &&
           me.sin_port == 0 && me.sin_addr.s_addr == htonl(INADDR_ANY);
}

static int is_stream(int fd)
{
    int type = 0;
    socklen_t len = sizeof type;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

int connect(int fd, const struct sockaddr *to, socklen_t len)
{
    pthread_once(&once, init);
    if (real_connect == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (addr_count != 0 && to != NULL && len >= (socklen_t)sizeof(struct sockaddr_in) &&
        to->sa_family == AF_INET &&
        (ntohl(((const struct sockaddr_in *)to)->sin_addr.s_addr) >> 24) == 127 && is_stream(fd) && unbound(fd)) {
        int saved = errno, one = 1;
        struct sockaddr_in from;
        memset(&from, 0, sizeof from);
        from.sin_family = AF_INET;
        unsigned i = __atomic_fetch_add(&next_index, 1, __ATOMIC_RELAXED) % addr_count;
        from.sin_addr.s_addr = htonl(first_addr + i);
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        bind(fd, (const struct sockaddr *)&from, sizeof from); /* on failure: the default source */
        errno = saved;
    }
    return real_connect(fd, to, len);
}
