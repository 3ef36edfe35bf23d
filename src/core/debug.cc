// The debugger's descriptor and the list of live runtimes (core/debug.hpp),
// and the gdb extension embedded for auto-loading.
#include "core/debug.hpp"

#include <cstddef>
#include <mutex>

#include "core/runtime.hpp"

namespace weft::detail {

const char *const kParkReasonNames[WEFT_PARK_REASON_COUNT] = {
    "sleep", "join", "mutex", "cond", "rwlock", "sem", "barrier", "once", "io", "offload", "other",
};

} // namespace weft::detail

using namespace weft::detail;

namespace {

// offsetof on Vproc (not standard-layout: it has private members) is
// conditionally supported; g++ gives the plain member offset, which is all
// a reader of memory needs.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"

// name, value: one line per field of the descriptor, in its order.
#define WEFT_DEBUG_FIELDS(X)                                                          \
    X("tcb.size", sizeof(Tcb))                                                        \
    X("tcb.align", kTcbAlign)                                               \
    X("tcb.magic_value", kTcbMagic)                                                   \
    X("tcb.sp", offsetof(Tcb, ctx) + offsetof(Context, sp))                           \
    X("tcb.pc", offsetof(Tcb, ctx) + offsetof(Context, pc))                           \
    X("tcb.fp", offsetof(Tcb, ctx) + offsetof(Context, fp))                           \
    X("tcb.vp", offsetof(Tcb, vp))                                                    \
    X("tcb.id", offsetof(Tcb, id))                                                    \
    X("tcb.magic", offsetof(Tcb, magic))                                              \
    X("tcb.state", offsetof(Tcb, state))                                              \
    X("tcb.park_reason", offsetof(Tcb, park_reason))                                  \
    X("tcb.park_site", offsetof(Tcb, park_site))                                      \
    X("tcb.fn", offsetof(Tcb, fn))                                                    \
    X("tcb.stack_lo", offsetof(Tcb, stack) + offsetof(Stack, lo))                     \
    X("tcb.stack_size", offsetof(Tcb, stack) + offsetof(Stack, size))                 \
    X("tcb.chunk", offsetof(Tcb, chunk))                                              \
    X("tcb.name", offsetof(Tcb, name))                                                \
    X("tcb.name_max", kThreadNameMax)                                                 \
    X("state.ready", static_cast<uint64_t>(ThreadState::Ready))                       \
    X("state.running", static_cast<uint64_t>(ThreadState::Running))                   \
    X("state.parked", static_cast<uint64_t>(ThreadState::Parked))                     \
    X("state.dead", static_cast<uint64_t>(ThreadState::Dead))                         \
    X("park_reason.names", reinterpret_cast<uint64_t>(kParkReasonNames))              \
    X("park_reason.count", WEFT_PARK_REASON_COUNT)                                    \
    X("vproc.index", offsetof(Vproc, index))                                          \
    X("vproc.current", offsetof(Vproc, current))                                      \
    X("vproc.tid", offsetof(Vproc, tid))                                              \
    X("vproc.loop", offsetof(Vproc, loop))                                            \
    X("stack.red_zone", kRedZoneBytes)                                                \
    X("chunk.header", kChunkHeader)                                                   \
    X("chunk.size", offsetof(StackChunk, size))                                       \
    X("chunk.canary", offsetof(StackChunk, canary))                                   \
    X("chunk.canary_value", kChunkCanary)                                             \
    X("chunk.step", kChunkStep)                                                       \
    X("chunk.large_min", kLargeChunk)                                                 \
    X("slab.bytes", kSlabBytes)                                                       \
    X("trampoline", reinterpret_cast<uint64_t>(&weft_ctx_trampoline))

#define WEFT_DEBUG_NAME(name, value) name " "
#define WEFT_DEBUG_VALUE(name, value) static_cast<uint64_t>(value),
#define WEFT_DEBUG_COUNT(name, value) +1

constexpr size_t kDebugFields = 0 WEFT_DEBUG_FIELDS(WEFT_DEBUG_COUNT);

struct DebugDescriptor {
    char magic[8];              // "weftdbg"
    uint64_t version;           // kDebugVersion
    const char *names;          // the fields' names, in order, each followed by a blank
    uint64_t nfields;
    RuntimeDebug *runtimes;     // live runtimes, newest first (g_runtimes_mu)
    uint64_t fields[kDebugFields];
};
static_assert(offsetof(DebugDescriptor, fields) == 40, "tools/gdb/weft.py reads the header at these offsets");

std::mutex g_runtimes_mu;

} // namespace

extern "C" {
// Written only under g_runtimes_mu; a debugger reads it with the process
// stopped, and links a runtime in only once its record is complete.
[[gnu::visibility("default"), gnu::used]] DebugDescriptor weft_debug = {
    {'w', 'e', 'f', 't', 'd', 'b', 'g', 0},
    kDebugVersion,
    WEFT_DEBUG_FIELDS(WEFT_DEBUG_NAME),
    kDebugFields,
    nullptr,
    {WEFT_DEBUG_FIELDS(WEFT_DEBUG_VALUE)},
};
}
#pragma GCC diagnostic pop

namespace weft::detail {

void debug_register(Runtime *rt) {
    RuntimeDebug &d = rt->debug;
    d.nvprocs = rt->vproc_list.size();
    d.vprocs = rt->vproc_list.data();
    d.stack_runs = rt->regions.debug_runs();
    d.slabs = rt->chunk_slabs.debug_slabs();
    d.nslabs = rt->chunk_slabs.debug_nslabs();
    d.slab_used = rt->chunk_slabs.debug_slab_used();
    d.large = rt->chunk_slabs.debug_large();
    d.nlarge = rt->chunk_slabs.debug_nlarge();
    std::lock_guard<std::mutex> lock(g_runtimes_mu);
    d.prev = nullptr;
    d.next = weft_debug.runtimes;
    if (d.next) d.next->prev = &d;
    __atomic_store_n(&weft_debug.runtimes, &d, __ATOMIC_RELEASE); // the record first, then the link
}

void debug_unregister(Runtime *rt) {
    RuntimeDebug &d = rt->debug;
    std::lock_guard<std::mutex> lock(g_runtimes_mu);
    if (d.prev) d.prev->next = d.next;
    else weft_debug.runtimes = d.next;
    if (d.next) d.next->prev = d.prev;
}

} // namespace weft::detail

// Auto-loading (docs/observability.md): the extension itself, inlined in
// .debug_gdb_scripts (entry kind 4, Python text: a first line naming it,
// then the script). Not loaded into memory at run time; gdb runs it when
// the program's file is in its auto-load safe-path; `strip -g` removes it.
#ifdef WEFT_GDB_SCRIPT
asm(".pushsection .debug_gdb_scripts, \"MS\", @progbits, 1\n"
    ".byte 4\n"
    ".ascii \"weft/gdb/weft.py\\n\"\n"
    ".incbin \"" WEFT_GDB_SCRIPT "\"\n"
    ".byte 0\n"
    ".popsection\n");
#endif
