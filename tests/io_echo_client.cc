// io_echo_client PORT CONNECTIONS MESSAGE_BYTES TIMEOUT_S
//
// The peer of test_io's cross-process echo test, written without weft (one
// epoll loop) so that it checks weft against an independent implementation:
// opens CONNECTIONS connections to 127.0.0.1:PORT (at most 256 connects in
// flight), keeps every one open until all are connected, then sends each a
// message of MESSAGE_BYTES bytes that depends on the connection's index,
// reads the echo back and compares it byte for byte, then closes them all.
// Prints "ok N" and exits 0; any error: a message on stderr and exit 1;
// still running after TIMEOUT_S seconds: exit 3.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct Conn {
    int fd = -1;
    bool connected = false;
    size_t sent = 0, received = 0;
};

uint8_t byte_of(size_t conn, size_t i) { return uint8_t((conn * 131 + i * 7 + (i >> 8)) ^ (conn >> 3)); }

[[noreturn]] void die(const char *what, size_t conn) {
    std::fprintf(stderr, "io_echo_client: %s (connection %zu): %s\n", what, conn, std::strerror(errno));
    std::exit(1);
}

void on_alarm(int) {
    const char msg[] = "io_echo_client: timed out\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(3);
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: io_echo_client PORT CONNECTIONS MESSAGE_BYTES TIMEOUT_S\n");
        return 2;
    }
    const int port = std::atoi(argv[1]);
    const size_t n = size_t(std::atol(argv[2]));
    const size_t msg = size_t(std::atol(argv[3]));
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    alarm(unsigned(std::atoi(argv[4])));
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1", 0);
    std::vector<Conn> conns(n);
    std::vector<epoll_event> evs(1024);

    // Phase 1: connect everything, at most 256 connects in flight.
    size_t next = 0, connected = 0, in_flight = 0;
    while (connected < n) {
        while (next < n && in_flight < 256) {
            Conn &c = conns[next];
            c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (c.fd < 0) die("socket", next);
            int rc = connect(c.fd, (sockaddr *)&addr, sizeof addr);
            if (rc != 0 && errno != EINPROGRESS) die("connect", next);
            epoll_event ev{};
            ev.events = EPOLLOUT;
            ev.data.u64 = next;
            if (epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev)) die("epoll_ctl", next);
            ++in_flight;
            ++next;
        }
        int k = epoll_wait(ep, evs.data(), int(evs.size()), 1000);
        if (k < 0 && errno != EINTR) die("epoll_wait", 0);
        for (int j = 0; j < k; ++j) {
            size_t i = evs[size_t(j)].data.u64;
            Conn &c = conns[i];
            if (c.connected) continue;
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err) {
                errno = err;
                die("connect completion", i);
            }
            c.connected = true;
            ++connected;
            --in_flight;
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.u64 = i;
            if (epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev)) die("epoll_ctl mod", i);
        }
    }

    // Phase 2: every connection is open at once; send every message.
    std::vector<uint8_t> buf(msg > 65536 ? msg : 65536);
    for (size_t i = 0; i < n; ++i) {
        Conn &c = conns[i];
        for (size_t k = 0; k < msg; ++k) buf[k] = byte_of(i, k);
        while (c.sent < msg) {
            ssize_t w = send(c.fd, buf.data() + c.sent, msg - c.sent, MSG_NOSIGNAL);
            if (w < 0 && errno == EAGAIN) {
                usleep(100);
                continue;
            }
            if (w <= 0) die("send", i);
            c.sent += size_t(w);
        }
    }

    // Phase 3: read every echo back and compare.
    size_t complete = 0;
    while (complete < n) {
        int k = epoll_wait(ep, evs.data(), int(evs.size()), 1000);
        if (k < 0 && errno != EINTR) die("epoll_wait", 0);
        for (int j = 0; j < k; ++j) {
            size_t i = evs[size_t(j)].data.u64;
            Conn &c = conns[i];
            if (c.received == msg) continue;
            ssize_t r = recv(c.fd, buf.data(), msg - c.received, 0);
            if (r < 0 && errno == EAGAIN) continue;
            if (r <= 0) {
                if (r == 0) errno = ECONNRESET;
                die("recv", i);
            }
            for (ssize_t b = 0; b < r; ++b)
                if (buf[size_t(b)] != byte_of(i, c.received + size_t(b))) {
                    std::fprintf(stderr, "io_echo_client: connection %zu: byte %zu differs\n", i,
                                 c.received + size_t(b));
                    return 1;
                }
            c.received += size_t(r);
            if (c.received == msg) ++complete;
        }
    }
    for (auto &c : conns) close(c.fd);
    std::printf("ok %zu\n", n);
    return 0;
}
