// weft-run: run an unmodified, dynamically linked program on weft.
//
//   weft-run [--vprocs N] [--io uring|epoll|poll] [--report] PROGRAM [ARGS...]
//
// It preloads libweft-posix (docs/posix.md), which makes the program's main
// the first weft thread and its pthreads weft threads, then execs PROGRAM:
// the exit status is the program's own.
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef WEFT_RUN_LIBDIR_REL
#define WEFT_RUN_LIBDIR_REL "../lib"
#endif

namespace {

constexpr const char *kLib = "libweft-posix.so";

[[noreturn]] void usage(int status) {
    std::fprintf(status ? stderr : stdout,
                 "usage: weft-run [options] PROGRAM [ARGS...]\n"
                 "Run an unmodified, dynamically linked pthread program on weft's user-level threads\n"
                 "(docs/posix.md). The exit status is PROGRAM's.\n"
                 "\n"
                 "options:\n"
                 "  --vprocs N         kernel threads running weft threads (WEFT_VPROCS; default: the usable CPUs)\n"
                 "  --io BACKEND       uring, epoll or poll (WEFT_IO; default uring)\n"
                 "  --report           at exit, print on stderr what the shim served and what it\n"
                 "                     passed to libc, naming calls weft has no equivalent for\n"
                 "  -h, --help         this text\n"
                 "\n"
                 "environment: WEFT_* settings of the runtime (README), WEFT_STACK_SIZE (stack of a\n"
                 "pthread created without one; default 256K), WEFT_MAIN_STACK (main's; default 8M),\n"
                 "WEFT_POSIX_LIB (the shim to preload; default: found beside weft-run).\n");
    std::exit(status);
}

[[noreturn]] void die(int status, const char *fmt, const char *a, const char *b = "") {
    std::fprintf(stderr, "weft-run: ");
    std::fprintf(stderr, fmt, a, b);
    std::fputc('\n', stderr);
    std::exit(status);
}

bool readable(const std::string &p) { return access(p.c_str(), R_OK) == 0; }

// The shim: $WEFT_POSIX_LIB, else beside this program (the build tree),
// else in the library directory of the installation it belongs to.
std::string find_lib() {
    if (const char *e = std::getenv("WEFT_POSIX_LIB"); e && *e) {
        if (!readable(e)) die(1, "WEFT_POSIX_LIB=%s: cannot read it", e);
        return e;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        std::string dir(self, std::strrchr(self, '/') - self);
        for (std::string c : {dir + "/" + kLib, dir + "/" WEFT_RUN_LIBDIR_REL "/" + kLib})
            if (readable(c)) return c;
    }
    die(1, "cannot find %s beside weft-run or in %s; set WEFT_POSIX_LIB", kLib, WEFT_RUN_LIBDIR_REL);
}

// PROGRAM as execvp would find it.
std::string find_program(const char *prog) {
    if (std::strchr(prog, '/')) {
        if (access(prog, F_OK) != 0) die(127, "%s: no such file", prog);
        return prog;
    }
    const char *path = std::getenv("PATH");
    std::string p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (size_t at = 0; at <= p.size();) {
        size_t end = p.find(':', at);
        if (end == std::string::npos) end = p.size();
        std::string c = (end > at ? p.substr(at, end - at) : ".") + "/" + prog;
        if (access(c.c_str(), X_OK) == 0) return c;
        at = end + 1;
    }
    die(127, "%s: not found in PATH", prog);
}

// Refuse what a preloaded library cannot reach: a static ELF program.
// Scripts (#!) are fine: their interpreter gets the shim.
void check_dynamic(const std::string &prog) {
    int fd = open(prog.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(126, "%s: %s", prog.c_str(), std::strerror(errno));
    Elf64_Ehdr eh;
    ssize_t n = pread(fd, &eh, sizeof eh, 0);
    if (n >= 2 && eh.e_ident[0] == '#' && eh.e_ident[1] == '!') {
        close(fd);
        return;
    }
    if (n != static_cast<ssize_t>(sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        close(fd);
        die(126, "%s: not an ELF program or a script", prog.c_str());
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
        close(fd);
        die(126, "%s: not an x86-64 program (weft runs x86-64 only)", prog.c_str());
    }
    bool interp = false;
    for (int i = 0; i < eh.e_phnum && !interp; ++i) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + static_cast<uint64_t>(i) * eh.e_phentsize)) !=
            static_cast<ssize_t>(sizeof ph))
            break;
        interp = ph.p_type == PT_INTERP;
    }
    close(fd);
    if (!interp)
        die(126, "%s: statically linked: weft-run needs a dynamically linked program (the shim is preloaded%s)",
            prog.c_str(), ")");
}

} // namespace

int main(int argc, char **argv) {
    int i = 1;
    bool report = false;
    for (; i < argc && argv[i][0] == '-'; ++i) {
        std::string a = argv[i];
        auto value = [&](const char *name) -> const char * {
            if (i + 1 >= argc) die(2, "%s needs a value (see --help)", name);
            return argv[++i];
        };
        if (a == "--") {
            ++i;
            break;
        } else if (a == "-h" || a == "--help") {
            usage(0);
        } else if (a == "--vprocs") {
            const char *v = value("--vprocs");
            char *end;
            long n = std::strtol(v, &end, 10);
            if (*end || n < 1 || n > 1024) die(2, "--vprocs %s: expected 1..1024", v);
            setenv("WEFT_VPROCS", v, 1);
        } else if (a == "--io") {
            const char *v = value("--io");
            if (std::strcmp(v, "uring") && std::strcmp(v, "epoll") && std::strcmp(v, "poll"))
                die(2, "--io %s: expected uring, epoll or poll", v);
            setenv("WEFT_IO", v, 1);
        } else if (a == "--report") {
            report = true;
        } else {
            die(2, "unknown option %s (see --help)", a.c_str());
        }
    }
    if (i >= argc) usage(2);
    std::string prog = find_program(argv[i]);
    check_dynamic(prog);
    std::string lib = find_lib();
    const char *pre = std::getenv("LD_PRELOAD");
    std::string preload = pre && *pre ? lib + ":" + pre : lib;
    setenv("LD_PRELOAD", preload.c_str(), 1);
    if (report) setenv("WEFT_POSIX_REPORT", "1", 1);
    execv(prog.c_str(), argv + i);
    die(126, "%s: %s", prog.c_str(), std::strerror(errno));
}
