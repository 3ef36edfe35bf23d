// What the C++ peers of weft-vt-bench share (bench/vt/peers_fiber.cc,
// bench/vt/peers_asio.cc): the command line, the clock, resident memory and
// the output, all as weft-vt-bench has them, so that bench/vt/vt_peers.py
// reads every program the same way.
//
//   PROG [--ops N] [--idle N] [--json] [program's own flags]
//     --ops N    operations per timed benchmark (default 1000000; 0: none)
//     --idle N   idle tasks for the memory benchmark (default 1000000; 0: none)
//     --json     one JSON object per line:
//                {"bench": "vt_<name>", "kind": "<system>", "value": V, "unit": U, "params": {...}}
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace vtpeer {

struct Options {
    long ops = 1000000;
    long idle = 1000000;
    bool json = false;
};

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Resident bytes, from /proc/self/statm: what weft-vt-bench reads.
inline long rss_bytes() {
    long pages = 0, resident = -1;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    std::fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

// `params` is the inside of a JSON object ("" for none).
inline void report(const Options &o, const char *system, const char *bench, double value, const char *unit,
                   const std::string &params = "") {
    if (o.json)
        std::printf("{\"bench\": \"vt_%s\", \"kind\": \"%s\", \"value\": %.2f, \"unit\": \"%s\", \"params\": {%s}}\n",
                    bench, system, value, unit, params.c_str());
    else
        std::printf("%-22s %-12s %12.2f %s%s%s\n", bench, system, value, unit, params.empty() ? "" : "  ",
                    params.c_str());
    std::fflush(stdout);
}

inline long parse_count(const char *prog, const char *flag, const char *v) {
    if (!v) {
        std::fprintf(stderr, "%s: %s needs a value\n", prog, flag);
        std::exit(2);
    }
    char *end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (errno || end == v || *end || n < 0 || n > 1000000000) {
        std::fprintf(stderr, "%s: %s: not a count from 0 to 10^9: %s\n", prog, flag, v);
        std::exit(2);
    }
    return n;
}

// Parses the common flags; `extra(flag, value)` takes the program's own
// (returns 0 not its flag, 1 flag alone, 2 flag and value). Exits on --help
// and on errors.
template <class Extra>
Options parse(int argc, char **argv, const char *usage, Extra extra) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--help" || a == "-h") {
            std::fputs(usage, stdout);
            std::exit(0);
        } else if (a == "--ops") {
            o.ops = parse_count(argv[0], "--ops", v), ++i;
        } else if (a == "--idle") {
            o.idle = parse_count(argv[0], "--idle", v), ++i;
        } else if (a == "--json") {
            o.json = true;
        } else if (int used = extra(a, v)) {
            i += used - 1;
        } else {
            std::fprintf(stderr, "%s: unknown option %s (--help)\n", argv[0], a.c_str());
            std::exit(2);
        }
    }
    return o;
}

} // namespace vtpeer
