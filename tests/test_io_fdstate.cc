// The descriptor table across a weft_close: what a thread learns about the
// number while it is being closed (between fd_forget and fd_closed).
//
// The case that mattered (a weft-knot flake, docs/knot.md): vproc A closes
// a connection's socket; between A's close(2) and A's fd_closed, vproc B's
// file cache opens a file behind weft's back, gets the number, and a
// sendfile from it classifies it. fd_closed used to reset that state, so
// B's call saw an unknown descriptor and failed with EBADF. The two vprocs'
// interleaving is replayed here step by step on one thread, calling the
// steps weft_close is made of.
#include <sys/mman.h>
#include <sys/socket.h>

#include "core/runtime.hpp"
#include "io/fd.hpp"
#include "support.hpp"

namespace {

using namespace wt;
namespace wd = weft::detail;

// A regular file (a memfd) with `text`, put at the number `at` behind
// weft's back, as an openat the runtime never sees would.
void plant_file_at(int at, const char *text) {
    int f = memfd_create("weft-fdstate", MFD_CLOEXEC);
    ASSERT_GE(f, 0);
    ASSERT_EQ(static_cast<ssize_t>(strlen(text)), write(f, text, strlen(text)));
    if (f == at) return; // the lowest free number, as an openat would get
    ASSERT_EQ(at, dup2(f, at));
    close(f);
}

// weft_close(a) cut at close(2): the state forgotten, the number free.
// With racing_look, a thread looks at the number between the forgetting and
// close(2), and so sees the old socket.
wd::FdState *forget_and_close(int a, bool racing_look = false) {
    wd::Vproc *vp = wd::tls_vproc;
    wd::FdState *s = wd::fd_state(vp, a);
    EXPECT_EQ(wd::FdKind::Stream, wd::FdKind(s->kind));
    wd::fd_forget(vp, s, a);
    if (racing_look) {
        wd::fd_state(vp, a);
        EXPECT_EQ(wd::FdKind::Stream, wd::FdKind(s->kind));
    }
    EXPECT_EQ(0, close(a));
    return s;
}

TEST(FdStateTest, TheNextFileClassifiedWhileTheNumberClosesKeepsItsState) {
    run(1, [] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        wd::FdState *s = forget_and_close(sv[0]);
        plant_file_at(sv[0], "hello");
        // Another vproc's thread uses the new file: classified as a file.
        ASSERT_EQ(s, wd::fd_state(wd::tls_vproc, sv[0]));
        EXPECT_EQ(wd::FdKind::File, wd::FdKind(s->kind));
        wd::fd_closed(wd::tls_vproc, s, sv[0]); // the closing vproc, late
        EXPECT_EQ(wd::FdKind::File, wd::FdKind(s->kind)) << "the live file's state was reset";
        char buf[8] = {};
        EXPECT_EQ(5, weft_pread(sv[0], buf, sizeof buf, 0));
        EXPECT_STREQ("hello", buf);
        EXPECT_EQ(0, weft_close(sv[0]));
        EXPECT_EQ(0, weft_close(sv[1]));
    });
}

TEST(FdStateTest, TheOldFileClassifiedBeforeCloseIsForgotten) {
    run(1, [] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        wd::Vproc *vp = wd::tls_vproc;
        wd::FdState *s = forget_and_close(sv[0], true);
        plant_file_at(sv[0], "x");
        wd::fd_closed(vp, s, sv[0]);
        // The socket's state must not describe the file now at the number.
        EXPECT_EQ(wd::FdKind::Unknown, wd::FdKind(s->kind));
        EXPECT_EQ(wd::FdKind::File, wd::FdKind(wd::fd_state(vp, sv[0])->kind));
        char c = 0;
        EXPECT_EQ(1, weft_pread(sv[0], &c, 1, 0));
        EXPECT_EQ('x', c);
        EXPECT_EQ(0, weft_close(sv[0]));
        EXPECT_EQ(0, weft_close(sv[1]));
    });
}

TEST(FdStateTest, ANumberLeftFreeIsUnknownAfterClose) {
    run(1, [] {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        wd::Vproc *vp = wd::tls_vproc;
        wd::FdState *s = forget_and_close(sv[0], true);
        wd::fd_closed(vp, s, sv[0]);
        EXPECT_EQ(wd::FdKind::Unknown, wd::FdKind(s->kind));
        errno = 0;
        char c;
        EXPECT_EQ(-1, weft_read(sv[0], &c, 1));
        EXPECT_EQ(EBADF, errno);
        EXPECT_EQ(0, weft_close(sv[1]));
    });
}

TEST(FdStateTest, APipeWeftMadeNonBlockingKeepsItsState) {
    // weft sets O_NONBLOCK on a pipe it classifies: fd_closed's check must
    // take that O_NONBLOCK for weft's, not the program's.
    run(1, [] {
        int sv[2], p[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        ASSERT_EQ(0, pipe2(p, O_CLOEXEC));
        wd::FdState *s = forget_and_close(sv[0]);
        if (p[0] != sv[0]) {
            ASSERT_EQ(sv[0], dup2(p[0], sv[0]));
            close(p[0]);
        }
        wd::Vproc *vp = wd::tls_vproc;
        wd::fd_state(vp, sv[0]);
        ASSERT_EQ(wd::FdKind::Pipe, wd::FdKind(s->kind));
        EXPECT_TRUE(s->weft_nonblock);
        wd::fd_closed(vp, s, sv[0]);
        EXPECT_EQ(wd::FdKind::Pipe, wd::FdKind(s->kind));
        EXPECT_TRUE(s->weft_nonblock);
        EXPECT_FALSE(s->user_nonblock);
        ASSERT_EQ(1, weft_write(p[1], "y", 1));
        char c = 0;
        EXPECT_EQ(1, weft_read(sv[0], &c, 1));
        EXPECT_EQ('y', c);
        EXPECT_EQ(0, weft_close(sv[0]));
        EXPECT_EQ(0, weft_close(sv[1]));
        EXPECT_EQ(0, weft_close(p[1]));
    });
}

} // namespace
