// The door in the kernel: an sk_lookup BPF program that refuses a random
// share of a port's new TCP connections (kernel_door.hpp).
#include "sched/kernel_door.hpp"

#include <fcntl.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace weft::detail {
namespace {

long sys_bpf(int cmd, bpf_attr *a) { return syscall(SYS_bpf, cmd, a, sizeof *a); }

// The map's one value: the threshold a draw must fall below to refuse
// (p * 2^32: 2^32 refuses every draw), and the refusals.
struct DoorValue {
    uint64_t threshold;
    uint64_t refused;
};

constexpr bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}

// The program, for `port`, with the map `map_fd`. Registers: r1 the
// context (struct bpf_sk_lookup) and then helper arguments, r0 results,
// r6 the context kept, r7 the map value, r8 the threshold, r10 the frame.
// Every jump goes to `pass` (index 21); off = target - (index + 1).
int load_program(uint16_t port, int map_fd, char *log, size_t log_size) {
    const bpf_insn prog[] = {
        /* 0 */ insn(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0),
        /* 1 */ insn(BPF_LDX | BPF_MEM | BPF_W, 2, 6, offsetof(bpf_sk_lookup, protocol), 0),
        /* 2 */ insn(BPF_JMP | BPF_JNE | BPF_K, 2, 0, 18, IPPROTO_TCP),
        /* 3 */ insn(BPF_LDX | BPF_MEM | BPF_W, 2, 6, offsetof(bpf_sk_lookup, local_port), 0), // host order
        /* 4 */ insn(BPF_JMP | BPF_JNE | BPF_K, 2, 0, 16, port),
        /* 5 */ insn(BPF_ST | BPF_MEM | BPF_W, 10, 0, -4, 0), // key 0
        /* 6 */ insn(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        /* 7 */ insn(0, 0, 0, 0, 0),
        /* 8 */ insn(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0),
        /* 9 */ insn(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -4),
        /* 10 */ insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
        /* 11 */ insn(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 9, 0),
        /* 12 */ insn(BPF_ALU64 | BPF_MOV | BPF_X, 7, 0, 0, 0),
        /* 13 */ insn(BPF_LDX | BPF_MEM | BPF_DW, 8, 7, offsetof(DoorValue, threshold), 0),
        /* 14 */ insn(BPF_JMP | BPF_JEQ | BPF_K, 8, 0, 6, 0),
        /* 15 */ insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_prandom_u32),
        /* 16 */ insn(BPF_JMP | BPF_JGE | BPF_X, 0, 8, 4, 0),
        /* 17 */ insn(BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, 0, 1),
        /* 18 */ insn(BPF_STX | BPF_ATOMIC | BPF_DW, 7, 1, offsetof(DoorValue, refused), BPF_ADD),
        /* 19 */ insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, SK_DROP),
        /* 20 */ insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
        /* 21 pass */ insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, SK_PASS),
        /* 22 */ insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    };
    bpf_attr a;
    std::memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_SK_LOOKUP;
    a.expected_attach_type = BPF_SK_LOOKUP;
    a.insns = reinterpret_cast<uintptr_t>(prog);
    a.insn_cnt = sizeof prog / sizeof prog[0];
    a.license = reinterpret_cast<uintptr_t>("GPL");
    if (log) {
        a.log_buf = reinterpret_cast<uintptr_t>(log);
        a.log_size = static_cast<uint32_t>(log_size);
        a.log_level = 1;
    }
    return static_cast<int>(sys_bpf(BPF_PROG_LOAD, &a));
}

} // namespace

KernelDoor::~KernelDoor() {
    if (values_) munmap(const_cast<uint64_t *>(values_), static_cast<size_t>(sysconf(_SC_PAGESIZE)));
    for (int fd : {link_fd_, prog_fd_, map_fd_})
        if (fd >= 0) close(fd);
}

int KernelDoor::attach(int fd) {
    if (link_fd_ >= 0) return EBUSY;
    int v = 0;
    socklen_t len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0) return errno; // EBADF, ENOTSOCK
    if (!v) return EINVAL; // not listening
    len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) != 0) return errno;
    if (v != IPPROTO_TCP) return EINVAL;
    sockaddr_storage ss{};
    len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return errno;
    if (ss.ss_family == AF_INET) port_ = ntohs(reinterpret_cast<sockaddr_in *>(&ss)->sin_port);
    else if (ss.ss_family == AF_INET6) port_ = ntohs(reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port);
    else return EINVAL;

    bpf_attr a;
    std::memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = sizeof(uint32_t);
    a.value_size = sizeof(DoorValue);
    a.max_entries = 1;
    a.map_flags = BPF_F_MMAPABLE;
    map_fd_ = static_cast<int>(sys_bpf(BPF_MAP_CREATE, &a));
    if (map_fd_ < 0) return errno == EINVAL ? EOPNOTSUPP : errno;
    // (Mappable arrays came in Linux 5.5, before sk_lookup in 5.9.)
    void *m = mmap(nullptr, static_cast<size_t>(sysconf(_SC_PAGESIZE)), PROT_READ | PROT_WRITE, MAP_SHARED, map_fd_, 0);
    if (m == MAP_FAILED) return errno;
    values_ = static_cast<volatile uint64_t *>(m);

    prog_fd_ = load_program(port_, map_fd_, nullptr, 0);
    if (prog_fd_ < 0) return errno == EINVAL ? EOPNOTSUPP : errno;
    int ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (ns < 0) return errno;
    std::memset(&a, 0, sizeof a);
    a.link_create.prog_fd = static_cast<uint32_t>(prog_fd_);
    a.link_create.target_fd = static_cast<uint32_t>(ns);
    a.link_create.attach_type = BPF_SK_LOOKUP;
    link_fd_ = static_cast<int>(sys_bpf(BPF_LINK_CREATE, &a));
    int e = errno;
    close(ns);
    if (link_fd_ < 0) return e == EINVAL ? EOPNOTSUPP : e;
    return 0;
}

void KernelDoor::set_share(double p) {
    if (link_fd_ < 0) return;
    if (!(p > 0)) p = 0; // (NaN too)
    if (p > 1) p = 1;
    const auto t = static_cast<uint64_t>(std::ldexp(p, 32)); // 2^32 refuses every draw
    if (t == threshold_.load(std::memory_order_relaxed)) return;
    threshold_.store(t, std::memory_order_relaxed);
    values_[0] = t; // the program reads it at the next SYN
}

double KernelDoor::share() const { return std::ldexp(static_cast<double>(threshold_.load(std::memory_order_relaxed)), -32); }

uint64_t KernelDoor::refused() const { return values_ ? values_[1] : 0; }

} // namespace weft::detail
