// The door in the kernel (weft_door_listen): the resource policy's door
// (Door, resource.hpp) drawn by the kernel as a connection's SYN arrives,
// instead of by an acceptor after accept().
//
// Why: refusing after accept costs the server an accept, a setsockopt and a
// close that sends a reset — about 9 µs of its CPU each on this machine,
// measured (docs/scheduling.md, "(9) the door in the kernel"). Under a 3x
// overload that is a tenth of a capped server's CPU spent saying no. Refused
// at the SYN, a connection costs the server nothing: the kernel answers the
// SYN with a reset (the client's connect fails with ECONNREFUSED) in the
// softirq that delivered it, before any socket exists.
//
// How: a BPF program of type sk_lookup, attached to the process's network
// namespace, runs on every TCP lookup for a listener. For the door's port it
// draws a random 32-bit number and refuses the lookup (SK_DROP) when the
// number is below a threshold; any other port, protocol or draw passes. The
// threshold is the door's share p scaled to 2^32, kept in a one-page array
// map that weft maps into its memory, so that the policy changes it with a
// store, not a system call. The same map counts the refusals.
//
// The program is written as BPF instructions here (23 of them): no compiler
// for BPF, no libbpf. The link holds the program attached for as long as
// the descriptor is open; the kernel detaches it when the process ends.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft::detail {

class KernelDoor {
public:
    KernelDoor() = default;
    KernelDoor(const KernelDoor &) = delete;
    KernelDoor &operator=(const KernelDoor &) = delete;
    ~KernelDoor();

    // Attach to the listening TCP socket fd's port. 0, or an errno:
    // ENOTSOCK, EINVAL (not a listening TCP socket), EPERM (no CAP_BPF /
    // CAP_NET_ADMIN), EOPNOTSUPP (a kernel without sk_lookup, before 5.9),
    // or what bpf() or mmap() said.
    int attach(int fd);
    // The share of new connections to refuse, 0..1; 0 opens the door.
    void set_share(double p);
    double share() const;
    // Connections refused so far.
    uint64_t refused() const;
    uint16_t port() const { return port_; }

private:
    int map_fd_ = -1, prog_fd_ = -1, link_fd_ = -1;
    uint16_t port_ = 0;
    // The map's two values, mapped: [0] the threshold, [1] the refusals.
    volatile uint64_t *values_ = nullptr;
    std::atomic<uint64_t> threshold_{0}; // as last written: p * 2^32
};

} // namespace weft::detail
