// libc's own functions, for the shim and for the weft objects linked into
// it: every name in real.def is reached as __wrap_NAME (see real.def).
#pragma once

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#define WEFT_REAL(ret, name, params, args) ret __wrap_##name params;
#include "posix/real.def"
#undef WEFT_REAL
int __wrap_open(const char *path, int flags, ...);
int __wrap_open64(const char *path, int flags, ...);
int __wrap_openat(int dir, const char *path, int flags, ...);
int __wrap_openat64(int dir, const char *path, int flags, ...);
int __wrap_fcntl(int fd, int cmd, ...);
int __wrap_fcntl64(int fd, int cmd, ...);
int __wrap_ioctl(int fd, unsigned long req, ...);
}

namespace weft::posix {

// libc's definition of `name` (the next one after the shim), or nullptr.
void *libc_symbol(const char *name);

} // namespace weft::posix
