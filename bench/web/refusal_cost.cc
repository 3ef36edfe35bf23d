// refusal-cost — what refusing a TCP connection costs the server, three ways
// (docs/scheduling.md, "(9) The door in the kernel"):
//
//   accept+reset  accept4, SO_LINGER {1, 0}, close: the client sees a reset
//                 (weft-knot's door after accept, --door accept)
//   accept+close  accept4, close: the client sees an orderly end
//   kernel door   the SYN refused by weft's sk_lookup program (KernelDoor at
//                 share 1, what weft_door_listen attaches): the client's
//                 connect fails with ECONNREFUSED and the server runs nothing
//
// A client process on one CPU makes --batch connections, then the server on
// the other refuses them all; the server's CPU time is measured around its
// part, the client's around its connects. Per way, --rounds rounds; the
// median round's µs per connection is printed and written as JSON.
// Loopback only. The kernel door needs root and Linux 5.9: without them
// that way is reported as skipped, with the reason.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sched/kernel_door.hpp"

namespace {

const char *kProg = "refusal-cost";

void usage(FILE *out) {
    std::fprintf(out,
                 "usage: %s [--batch N] [--rounds R] [--json FILE]\n"
                 "What refusing a TCP connection costs the server: accept and reset, accept and\n"
                 "close, and weft's door in the kernel (the SYN refused by an sk_lookup program).\n"
                 "  --batch N    connections per round (default 1000, at most 4000)\n"
                 "  --rounds R   rounds per way; the median is reported (default 7)\n"
                 "  --json FILE  also write the figures as JSON\n"
                 "Prints µs of server and client CPU per connection. Loopback only; the server on\n"
                 "CPU 1 and the client on CPU 0 when there are two. Exit 0; 77 when a way could\n"
                 "not run here (the kernel door without root), the others reported; 1 on failure.\n",
                 kProg);
}

double cpu_s(clockid_t which) {
    timespec t;
    clock_gettime(which, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void pin(int cpu) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "%s: %s: %s\n", kProg, what, std::strerror(errno));
    std::exit(1);
}

enum Way { kReset, kClose, kKernel };
const char *const kWayName[] = {"accept+reset", "accept+close", "kernel door"};

struct Round {
    double server_us, client_us; // per connection
};

// One way, `rounds` rounds of `batch` connections. The client process
// writes its CPU per round to a pipe.
std::vector<Round> run_way(Way way, int batch, int rounds) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || listen(lfd, 4096) != 0 ||
        getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len) != 0)
        die("listen");
    weft::detail::KernelDoor door;
    if (way == kKernel) {
        if (int e = door.attach(lfd)) {
            close(lfd);
            errno = e;
            return {};
        }
        door.set_share(1.0);
    }
    int go[2], done[2], report[2];
    if (pipe(go) || pipe(done) || pipe(report)) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) { // the client
        pin(0);
        std::vector<int> c(static_cast<size_t>(batch));
        for (int r = 0; r < rounds; ++r) {
            double t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
            for (int i = 0; i < batch; ++i) {
                c[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                int rc = connect(c[i], reinterpret_cast<sockaddr *>(&a), sizeof a);
                if (way == kKernel ? !(rc < 0 && errno == ECONNREFUSED) : rc != 0) _exit(2);
            }
            double us = (cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0) * 1e6 / batch;
            char x = 'g';
            if (write(go[1], &x, 1) != 1 || read(done[0], &x, 1) != 1) _exit(3);
            for (int i = 0; i < batch; ++i) close(c[i]);
            if (write(report[1], &us, sizeof us) != sizeof us) _exit(3);
        }
        _exit(0);
    }
    pin(1);
    std::vector<Round> out;
    for (int r = 0; r < rounds; ++r) {
        // The kernel door: the whole process's CPU while the client connects
        // (the server runs nothing; this says so with a figure).
        double p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        char x;
        if (read(go[0], &x, 1) != 1) break;
        double t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        if (way != kKernel) {
            for (int i = 0; i < batch; ++i) {
                int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) die("accept4");
                if (way == kReset) {
                    linger l = {1, 0};
                    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
                }
                close(fd);
            }
        }
        double server = way == kKernel ? cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0 : cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (write(done[1], &x, 1) != 1) die("write");
        double client = 0;
        if (read(report[0], &client, sizeof client) != sizeof client) break;
        out.push_back({server * 1e6 / batch, client});
    }
    int status = 0;
    waitpid(pid, &status, 0);
    for (int fd : {go[0], go[1], done[0], done[1], report[0], report[1], lfd}) close(fd);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || static_cast<int>(out.size()) != rounds) {
        std::fprintf(stderr, "%s: %s: the client failed (status %d)\n", kProg, kWayName[way], status);
        std::exit(1);
    }
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
    int batch = 1000, rounds = 7;
    const char *json = nullptr;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const char *name) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s: %s needs a value\n", kProg, name);
                std::exit(2);
            }
            return argv[++i];
        };
        auto number = [&](const char *name, int lo, int hi) {
            const char *v = value(name);
            char *end = nullptr;
            long n = std::strtol(v, &end, 10);
            if (!*v || *end || n < lo || n > hi) {
                std::fprintf(stderr, "%s: %s wants a number from %d to %d, not '%s'\n", kProg, name, lo, hi, v);
                std::exit(2);
            }
            return static_cast<int>(n);
        };
        if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else if (a == "--batch") {
            batch = number("--batch", 1, 4000);
        } else if (a == "--rounds") {
            rounds = number("--rounds", 1, 1000);
        } else if (a == "--json") {
            json = value("--json");
        } else {
            std::fprintf(stderr, "%s: unknown argument '%s'\n", kProg, argv[i]);
            usage(stderr);
            return 2;
        }
    }
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < static_cast<rlim_t>(batch) + 64) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, static_cast<rlim_t>(batch) + 64);
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    std::string js = "{\"benchmark\": \"web.refusal_cost\", \"batch\": " + std::to_string(batch) +
                     ", \"rounds\": " + std::to_string(rounds) + ", \"unit\": \"us of CPU per connection\", \"ways\": [";
    bool skipped = false;
    for (Way w : {kReset, kClose, kKernel}) {
        errno = 0;
        std::vector<Round> rs = run_way(w, batch, rounds);
        if (w != kReset) js += ", ";
        if (rs.empty()) {
            const char *why = errno == EPERM ? "not permitted (root, or CAP_BPF and CAP_NET_ADMIN, is needed)"
                              : errno == EOPNOTSUPP ? "no sk_lookup BPF programs in this kernel (Linux 5.9)"
                                                    : std::strerror(errno);
            std::printf("%-13s skipped: %s\n", kWayName[w], why);
            js += std::string("{\"way\": \"") + kWayName[w] + "\", \"skipped\": \"" + why + "\"}";
            skipped = true;
            continue;
        }
        std::vector<double> s, c;
        for (const Round &r : rs) {
            s.push_back(r.server_us);
            c.push_back(r.client_us);
        }
        double ms = median(s), mc = median(c);
        std::printf("%-13s server %6.2f us, client %6.2f us per connection (medians of %d rounds of %d)\n",
                    kWayName[w], ms, mc, rounds, batch);
        char buf[256];
        std::snprintf(buf, sizeof buf, "{\"way\": \"%s\", \"server_us\": %.3f, \"client_us\": %.3f}", kWayName[w], ms,
                      mc);
        js += buf;
    }
    js += "]}\n";
    if (json) {
        FILE *f = std::fopen(json, "w");
        if (!f || std::fputs(js.c_str(), f) < 0 || std::fclose(f) != 0) {
            std::fprintf(stderr, "%s: cannot write %s: %s\n", kProg, json, std::strerror(errno));
            return 1;
        }
    }
    return skipped ? 77 : 0;
}
