// Per-vproc counters, read through the API while the vprocs run.
#include <cstring>

#include "core/runtime.hpp"
#include "sched/kernel_door.hpp"

using namespace weft::detail;

namespace {

void add(weft_stats_t *out, const Vproc &vp) {
    const VprocCounters &c = vp.stats;
    out->switches += c.switches.get();
    out->yields += c.yields.get();
    out->threads_created += c.created.get() + c.created_remotely.load(std::memory_order_relaxed);
    out->threads_exited += c.exited.get();
    for (int r = 0; r < WEFT_PARK_REASON_COUNT; ++r) out->parks[r] += c.parks[r].get();
    out->remote_wakeups += c.remote_wakeups.get();
    out->timers_fired += c.timers_fired.get();
    out->idle_sleeps += c.idle_sleeps.get();
    out->io_syscalls += c.io_syscalls.get();
    out->io_parks += c.io_parks.get();
    out->io_waits += c.io_waits.get();
    out->io_completions += c.io_completions.get();
    out->sendfile_bytes += c.sendfile_bytes.get();
    out->offloaded += c.offloaded.get();
    out->admissions_shed += c.shed.get();
    if (const KernelDoor *k = vp.kernel_door.load(std::memory_order_acquire)) out->door_refused += k->refused();
    out->steals += c.steals.get();
    out->steals_failed += c.steals_failed.get();
    out->migrations_in += c.migrations_in.get();
    out->migrations_out += c.migrations_out.get();
    out->idle_wakeups += c.idle_wakeups.load(std::memory_order_relaxed);
    const StackCounters &s = vp.stacks.counters();
    out->stacks_mapped += s.mapped;
    out->stacks_reused += s.reused;
    out->stacks_released += s.released;
    out->stacks_guarded += s.guarded;
    const ChunkCounters &k = vp.chunks.counters;
    out->stack_links += k.links;
    out->stack_spare_hits += k.spare_hits;
    out->stack_chunks += k.carved;
    out->stack_chunks_given_back += k.given_back;
}

} // namespace

extern "C" {

const char *weft_park_reason_name(int reason) {
    return reason >= 0 && reason < WEFT_PARK_REASON_COUNT ? kParkReasonNames[reason] : "?";
}

int weft_stats_get(int vproc, weft_stats_t *out) {
    if (!out) return EINVAL;
    std::memset(out, 0, sizeof *out);
    Vproc *vp = tls_vproc;
    if (!vp) return vproc == -1 ? 0 : EINVAL;
    auto &all = vp->rt->vprocs;
    if (vproc < -1 || vproc >= static_cast<int>(all.size())) return EINVAL;
    if (vproc >= 0) {
        add(out, *all[static_cast<size_t>(vproc)]);
    } else {
        for (auto &v : all) add(out, *v);
    }
    // What lives there: started or arrived, less ended or gone (each counter
    // moves on its own, so a snapshot in motion can be off by the threads in
    // transit; never below zero).
    uint64_t in = out->threads_created + out->migrations_in, gone = out->threads_exited + out->migrations_out;
    out->threads_live = in > gone ? in - gone : 0;
    return 0;
}

} // extern "C"
