// Broken invariants stop the program loudly, naming the thread.
#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/runtime.hpp"

namespace weft::detail {

void fatal(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if (n > static_cast<int>(sizeof buf) - 2) n = sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, "weft: ", 6);
    w = write(STDERR_FILENO, buf, static_cast<size_t>(n));
    (void)w;
    std::abort();
}

// Async-signal-safe: formats by hand, one write(2), then abort().
void fatal_thread(const Tcb *t, const char *what) {
    char buf[160];
    size_t n = 0;
    auto put = [&](const char *s) {
        while (*s && n < sizeof buf - 1) buf[n++] = *s++;
    };
    put("weft: ");
    put(what);
    put(" in weft thread ");
    char digits[24];
    size_t d = 0;
    uint64_t id = t->id;
    do {
        digits[d++] = static_cast<char>('0' + id % 10);
        id /= 10;
    } while (id && d < sizeof digits);
    while (d && n < sizeof buf - 1) buf[n++] = digits[--d];
    put(" ");
    char name[kThreadNameMax];
    std::memcpy(name, t->name, sizeof name);
    name[kThreadNameMax - 1] = 0;
    put(name[0] ? name : "(unnamed)");
    put("\n");
    ssize_t w = write(STDERR_FILENO, buf, n);
    (void)w;
    std::abort();
}

} // namespace weft::detail
