// What a debugger needs to find every weft thread without running code in
// the program — so that it works as well on a core file as on a live
// process. tools/gdb/weft.py is the reader; docs/observability.md ("gdb")
// has the usage.
//
// The model. A live thread's TCB sits at the top of its stack (tcb.hpp),
// and every stack comes from bookkeeping the providers keep anyway for
// their own reasons: fixed stacks from StackRegions (a log of every slot it
// carved, as runs of equal neighbours), linked stacks from ChunkSlabs (4 MiB
// slabs, walked chunk by chunk through their headers, and a table of the
// large chunks mapped one by one). A slot or a first chunk holds a thread
// when the TCB at its top has kTcbMagic and names that stack as its own.
// Regions and slabs are never unmapped while a runtime runs, so every
// address the debugger reads is mapped.
//
// What it costs at run time: nothing on create, join or switch. A runtime
// links itself into one list when it starts and out when it ends; the slot
// log grows when a region is carved (one store per fresh slot, none when a
// stack is reused); the large-chunk table changes with its mmap/munmap.
// Measured in docs/observability.md.
//
// Rejected: an intrusive list of threads, per vproc or global. Insert at
// create and remove at release is two or three stores each way on one
// vproc, and a lock or a lock-free remove when a thread ends on another
// vproc than the one that created it (home_vproc, joins across vprocs) —
// on the create+join path this is all about, for a feature used only in a
// debugger. libthread_db's way (a descriptor naming addresses and offsets,
// read by the debugger) costs nothing until somebody looks.
//
// The descriptor (weft_debug, exported with default visibility so that a
// stripped program still has it in .dynsym or its symbol table) describes
// itself: `names` lists its fields in order, so a reader looks fields up by
// name and a field added later breaks no older reader. Every field is a
// 64-bit word. The reader needs no DWARF of libweft, only this symbol.
#pragma once

#include <cstdint>

namespace weft::detail {

struct Runtime;
struct Vproc;
struct StackChunk;
struct StackRunBlock;

// One per live runtime, in Runtime; linked into weft_debug.runtimes.
// Pointers to the providers' own fields, read where they are.
struct RuntimeDebug {
    RuntimeDebug *next;                  // newer runtimes first
    RuntimeDebug *prev;
    uint64_t nvprocs;
    Vproc *const *vprocs;                // [nvprocs]
    StackRunBlock *const *stack_runs;    // fixed stacks: the newest block of the slot log
    char *const *slabs;                  // linked stacks: the chunk slabs ...
    const uint64_t *nslabs;              // ... how many
    const uint64_t *slab_used;           // ... bytes carved from the newest
    StackChunk *const *const *large;     // ... the large chunks
    const uint64_t *nlarge;
};

// Layout version of RuntimeDebug and of the meaning of the fields: a
// reader that finds another version says so rather than guess.
inline constexpr uint64_t kDebugVersion = 1;

void debug_register(Runtime *rt);   // in the Runtime's constructor, once its vprocs exist
void debug_unregister(Runtime *rt); // first thing in its destructor

} // namespace weft::detail
