// The __wrap_NAME functions of real.def: libc's NAME, looked up once.
#include "posix/real.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/ioctl.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace weft::posix {

void *libc_symbol(const char *name) { return dlsym(RTLD_NEXT, name); }

namespace {

template <class Fn> Fn resolve(std::atomic<Fn> &slot, const char *name) {
    Fn f = slot.load(std::memory_order_acquire);
    if (__builtin_expect(f != nullptr, 1)) return f;
    f = reinterpret_cast<Fn>(libc_symbol(name));
    if (!f) {
        // Nothing to fall back on: the program would misbehave silently.
        std::fprintf(stderr, "weft-posix: libc has no %s\n", name);
        std::abort();
    }
    slot.store(f, std::memory_order_release);
    return f;
}

} // namespace
} // namespace weft::posix

using weft::posix::resolve;

extern "C" {

#define WEFT_REAL(ret, name, params, args)                                                                             \
    __attribute__((visibility("hidden"))) ret __wrap_##name params {                                                   \
        static std::atomic<ret(*) params> weft_real_fn_;                                                               \
        return resolve(weft_real_fn_, #name) args;                                                                     \
    }
#include "posix/real.def"
#undef WEFT_REAL

// The variadic ones: their optional argument is passed on as a machine word
// (a mode_t, a long or a pointer; reading it when absent is harmless on
// x86-64, where it is a register).
#define WEFT_REAL_VARIADIC(name, fixed_params, fixed_args, last)                                                       \
    __attribute__((visibility("hidden"))) int __wrap_##name fixed_params {                                            \
        static std::atomic<int (*)(...)> fn;                                                                           \
        va_list ap;                                                                                                    \
        va_start(ap, last);                                                                                            \
        unsigned long word = va_arg(ap, unsigned long);                                                                \
        va_end(ap);                                                                                                    \
        return resolve(fn, #name) fixed_args;                                                                          \
    }
WEFT_REAL_VARIADIC(open, (const char *path, int flags, ...), (path, flags, word), flags)
WEFT_REAL_VARIADIC(open64, (const char *path, int flags, ...), (path, flags, word), flags)
WEFT_REAL_VARIADIC(openat, (int dir, const char *path, int flags, ...), (dir, path, flags, word), flags)
WEFT_REAL_VARIADIC(openat64, (int dir, const char *path, int flags, ...), (dir, path, flags, word), flags)
WEFT_REAL_VARIADIC(fcntl, (int fd, int cmd, ...), (fd, cmd, word), cmd)
WEFT_REAL_VARIADIC(fcntl64, (int fd, int cmd, ...), (fd, cmd, word), cmd)
WEFT_REAL_VARIADIC(ioctl, (int fd, unsigned long req, ...), (fd, req, word), req)
#undef WEFT_REAL_VARIADIC

} // extern "C"
