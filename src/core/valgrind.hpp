// What weft asks of valgrind when it runs under it. The client requests are
// a few no-op instructions outside valgrind; the header is optional at build
// time (without it, weft never knows it runs under valgrind).
//
//  - Stacks: memcheck must be told where each stack is, or it takes every
//    access to another thread's TCB (above that thread's frames, below the
//    current stack pointer as it sees it) for a wild read (stack/pool.cc).
//  - io_uring: a kernel thread blocked in io_uring_enter under valgrind never
//    lets another run, so a vproc waiting there is never woken by another
//    vproc or an offload worker (io/reactor.cc picks epoll instead).
#pragma once

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define WEFT_VALGRIND_STACK_REGISTER(lo, hi) VALGRIND_STACK_REGISTER(lo, hi)
#define WEFT_VALGRIND_STACK_DEREGISTER(id) VALGRIND_STACK_DEREGISTER(id)
#define WEFT_ON_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#else
#define WEFT_VALGRIND_STACK_REGISTER(lo, hi) ((void)(lo), (void)(hi), 0u)
#define WEFT_VALGRIND_STACK_DEREGISTER(id) ((void)(id))
#define WEFT_ON_VALGRIND() false
#endif
