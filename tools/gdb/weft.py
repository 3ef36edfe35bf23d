# weft's gdb extension: the user-level threads of a program linked with weft.
#
#   weft threads          every weft thread: id, name, state, vproc, park reason and where it blocked
#   weft bt ID [ARGS]     backtrace of weft thread ID (ARGS go to gdb's backtrace: full, -N, ...)
#   weft bt all [ARGS]    the same for every weft thread
#   weft vprocs           the vprocs, their kernel threads and what each runs
#
# gdb auto-loads this from the program (libweft embeds it in
# .debug_gdb_scripts) when the program is in gdb's auto-load safe-path, or:
#   source <prefix>/share/weft/gdb/weft.py
# docs/observability.md ("gdb") has the details.
#
# It reads memory only (the descriptor `weft_debug`, src/core/debug.hpp),
# never calls into the program, so it works on a core file too, and needs
# no debug information for libweft. x86-64 only, as weft is.
#
# A backtrace of a thread that is switched out: its saved stack pointer,
# resume address and frame pointer (src/arch/x86_64/switch_sysv.hpp) are put
# into the registers of the selected kernel thread for as long as gdb's own
# unwinder runs, then the real ones go back. The switch is inlined into the
# function that parked, and that function saved every callee-saved register
# it needed in its prologue (the switch clobbers them all), so its CFI
# recovers the callers' registers from the stack like for any call.

import struct

import gdb
import gdb.unwinder

_HEADER = 40  # magic, version, names, nfields, runtimes (debug.cc static_asserts it)
_VERSION = 1
_NEEDED = (
    "tcb.size tcb.align tcb.magic_value tcb.sp tcb.pc tcb.fp tcb.vp tcb.id tcb.magic tcb.state "
    "tcb.park_reason tcb.park_site tcb.fn tcb.stack_lo tcb.name tcb.name_max state.ready state.running "
    "state.parked state.dead park_reason.names park_reason.count vproc.index vproc.current vproc.tid "
    "stack.red_zone chunk.header chunk.size chunk.canary chunk.canary_value chunk.step slab.bytes trampoline"
).split()


def _fail(msg):
    raise gdb.GdbError("weft: " + msg)


def _process():
    inf = gdb.selected_inferior()
    if inf is None or not inf.threads():
        _fail("the program is not running (run it, attach to it, or load a core file)")
    return inf


def _read(addr, n):
    try:
        return bytes(_process().read_memory(addr, n))
    except gdb.MemoryError:
        _fail("cannot read %d bytes at %#x: the runtime's memory is not readable here "
              "(a core file without it, or a corrupted descriptor)" % (n, addr))


def _u64(addr):
    return struct.unpack("<Q", _read(addr, 8))[0]


def _string(addr, limit=4096):
    out = b""
    while len(out) < limit:
        piece = _read(addr + len(out), 64)
        nul = piece.find(b"\0")
        if nul >= 0:
            return (out + piece[:nul]).decode("utf-8", "replace")
        out += piece
    return out.decode("utf-8", "replace")


def _descriptor_address():
    sym = gdb.lookup_global_symbol("weft_debug")
    if sym is not None:
        return int(sym.value().address)
    try:  # no debug information: the ELF symbol is enough
        return int(gdb.parse_and_eval("(unsigned long)&weft_debug"))
    except gdb.error:
        _fail("this program is not linked with weft (it has no symbol weft_debug)")


class Layout:
    """The descriptor: field offsets and constants, looked up by name."""

    def __init__(self):
        addr = _descriptor_address()
        _process()
        hdr = _read(addr, _HEADER)
        if hdr[:8] != b"weftdbg\0":
            _fail("weft_debug at %#x is not weft's debug descriptor" % addr)
        version, names, nfields, self.runtimes = struct.unpack_from("<QQQQ", hdr, 8)
        if version != _VERSION:
            _fail("this program's weft publishes debug descriptor version %d; this extension reads "
                  "version %d: use the weft.py installed with that weft" % (version, _VERSION))
        keys = _string(names).split()
        values = struct.unpack("<%dQ" % nfields, _read(addr + _HEADER, 8 * nfields))
        self.f = dict(zip(keys, values))
        missing = [k for k in _NEEDED if k not in self.f]
        if missing:
            _fail("the debug descriptor lacks %s" % ", ".join(missing))
        self.reasons = [_string(_u64(self.f["park_reason.names"] + 8 * i), 64)
                        for i in range(self.f["park_reason.count"])]
        self.states = {self.f["state.ready"]: "ready", self.f["state.running"]: "running",
                       self.f["state.parked"]: "parked", self.f["state.dead"]: "exited"}

    def __getitem__(self, key):
        return self.f[key]


class Thread:
    def __init__(self, lay, addr, b):
        f = lay.f

        def q(key):
            return struct.unpack_from("<Q", b, f[key])[0]

        self.addr = addr
        self.id = q("tcb.id")
        self.sp, self.pc, self.fp = q("tcb.sp"), q("tcb.pc"), q("tcb.fp")
        self.vp = q("tcb.vp")
        self.fn = q("tcb.fn")
        self.site = q("tcb.park_site")
        self.state = lay.states.get(b[f["tcb.state"]], "state %d" % b[f["tcb.state"]])
        r = b[f["tcb.park_reason"]]
        self.reason = lay.reasons[r] if r < len(lay.reasons) else "reason %d" % r
        raw = b[f["tcb.name"]:f["tcb.name"] + f["tcb.name_max"]].split(b"\0")[0]
        self.name = raw.decode("utf-8", "replace") or "thread-%d" % self.id
        self.started = self.pc != f["trampoline"]
        self.vproc = None  # set from the vprocs


def _tcb_at(lay, lo, hi, buf=None, buf_base=0):
    """The thread whose stack is [lo, hi), if one lives there."""
    f = lay.f
    addr = (hi - f["tcb.size"]) & ~(f["tcb.align"] - 1)
    if addr < lo:
        return None
    if buf is not None:
        b = buf[addr - buf_base:addr - buf_base + f["tcb.size"]]
    else:
        try:
            b = bytes(_process().read_memory(addr, f["tcb.size"]))
        except gdb.MemoryError:
            return None
    if len(b) < f["tcb.size"]:
        return None
    magic = struct.unpack_from("<I", b, f["tcb.magic"])[0]
    if magic != f["tcb.magic_value"] or struct.unpack_from("<Q", b, f["tcb.stack_lo"])[0] != lo:
        return None
    return Thread(lay, addr, b)


def _fixed_threads(lay, runs_head):
    block = _u64(runs_head)
    run_size = 24
    while block:
        nxt, count = struct.unpack("<QQ", _read(block, 16))
        for i in range(count):
            lo, size, n = struct.unpack("<QQQ", _read(block + 16 + run_size * i, run_size))
            for k in range(n):
                slot_lo = lo + k * (size + lay["stack.red_zone"])
                t = _tcb_at(lay, slot_lo, slot_lo + size)
                if t:
                    yield t
        block = nxt


def _chunk_thread(lay, chunk, header, buf=None, buf_base=0):
    size = struct.unpack_from("<Q", header, lay["chunk.size"])[0]
    return _tcb_at(lay, chunk + lay["chunk.header"], chunk + size, buf, buf_base)


def _linked_threads(lay, rec):
    step, hdr = lay["chunk.step"], lay["chunk.header"]
    canary_at, size_at, canary = lay["chunk.canary"], lay["chunk.size"], lay["chunk.canary_value"]
    slabs, nslabs = rec["slabs"], _u64(rec["nslabs"])
    used = _u64(rec["slab_used"])
    for i in range(nslabs):
        base = _u64(slabs + 8 * i)
        limit = used if i == nslabs - 1 else lay["slab.bytes"]
        buf = _read(base, limit)  # one read per slab, then walked here
        off = 0
        while off + hdr <= limit:
            if struct.unpack_from("<Q", buf, off + canary_at)[0] == canary:
                size = struct.unpack_from("<Q", buf, off + size_at)[0]
                if size >= step and size % step == 0 and off + size <= limit:
                    t = _chunk_thread(lay, base + off, buf[off:off + hdr], buf, base)
                    if t:
                        yield t
                    off += size
                    continue
            off += step
    table, nlarge = _u64(rec["large"]), _u64(rec["nlarge"])
    for i in range(nlarge):
        c = _u64(table + 8 * i)
        t = _chunk_thread(lay, c, _read(c, hdr))
        if t:
            yield t


_RECORD = ("next", "prev", "nvprocs", "vprocs", "stack_runs", "slabs", "nslabs", "slab_used", "large", "nlarge")


class Vproc:
    def __init__(self, lay, addr):
        self.addr = addr
        self.index = struct.unpack("<i", _read(addr + lay["vproc.index"], 4))[0]
        self.current = _u64(addr + lay["vproc.current"])
        self.tid = struct.unpack("<i", _read(addr + lay["vproc.tid"], 4))[0]
        self.gdb_thread = None
        for t in _process().threads():
            if self.tid and t.ptid[1] == self.tid:
                self.gdb_thread = t.num

    def kernel_thread(self):
        if not self.tid:
            return "no kernel thread"
        if self.gdb_thread is None:
            return "LWP %d" % self.tid
        return "LWP %d, gdb thread %d" % (self.tid, self.gdb_thread)


class Snapshot:
    """Every runtime, vproc and thread, read once per command."""

    def __init__(self):
        self.lay = lay = Layout()
        self.vprocs, self.threads = [], []
        rec_addr = lay.runtimes
        if not rec_addr:
            _fail("no weft runtime is running in this process (weft_main has not been called yet, "
                  "or has returned)")
        seen = set()
        while rec_addr and rec_addr not in seen:
            seen.add(rec_addr)
            rec = dict(zip(_RECORD, struct.unpack("<%dQ" % len(_RECORD), _read(rec_addr, 8 * len(_RECORD)))))
            by_addr = {}
            for i in range(rec["nvprocs"]):
                vp = Vproc(lay, _u64(rec["vprocs"] + 8 * i))
                by_addr[vp.addr] = vp
                self.vprocs.append(vp)
            for t in list(_fixed_threads(lay, rec["stack_runs"])) + list(_linked_threads(lay, rec)):
                t.vproc = by_addr.get(t.vp)
                # Marked parked (or ready) but still its vproc's current
                # thread: stopped on its way out, its saved context not
                # written yet. Its frames are the kernel thread's.
                if t.vproc and t.vproc.current == t.addr and t.state in ("parked", "ready"):
                    t.state = "switching"
                self.threads.append(t)
            rec_addr = rec["next"]
        self.threads.sort(key=lambda t: t.id)

    def find(self, arg):
        """A thread by id, or by name when that names exactly one."""
        try:
            tid = int(arg, 0)
        except ValueError:
            named = [t for t in self.threads if t.name == arg]
            if len(named) == 1:
                return named[0]
            if named:
                _fail("%d weft threads are named '%s' (ids %s): give an id" % (
                    len(named), arg, ", ".join(str(t.id) for t in named)))
            _fail("no weft thread has id or name '%s' (see 'weft threads')" % arg)
        for t in self.threads:
            if t.id == tid:
                return t
        _fail("no weft thread has id %d (see 'weft threads')" % tid)


# ---- symbols ---------------------------------------------------------------

def _function(pc, innermost):
    """The function containing pc: the innermost one (inlined included) or
    the outermost (the one that has a frame of its own)."""
    try:
        block = gdb.block_for_pc(pc)
    except RuntimeError:
        block = None
    name = None
    while block is not None and not block.is_global and not block.is_static:
        if block.function is not None:
            name = block.function.print_name
            if innermost:
                break
        block = block.superblock
    if name:
        return _no_parameters(name)
    text = gdb.execute("info symbol %#x" % pc, to_string=True)  # no debug information: the ELF symbol
    if text.startswith("No symbol"):
        return "%#x" % pc
    return text.split(" in section")[0].split(" + ")[0].strip()


def _no_parameters(name):
    """'f(int, char*)' -> 'f' (C++ names carry their parameter list)."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i]
    return name


def _line(pc):
    sal = gdb.find_pc_line(pc)
    if sal.symtab is None or not sal.line:
        return ""
    return " at %s:%d" % (sal.symtab.filename.rsplit("/", 1)[-1], sal.line)


def _callee(ret):
    """The function a call returning to `ret` called, if the call is direct
    (call rel32) or through the GOT (call *disp32(%rip)); else None."""
    try:
        code = bytes(_process().read_memory(ret - 6, 6))
        if code[1] == 0xE8:
            target = (ret + struct.unpack_from("<i", code, 2)[0]) & (2**64 - 1)
        elif code[0:2] == b"\xff\x15":
            target = _u64((ret + struct.unpack_from("<i", code, 2)[0]) & (2**64 - 1))
        else:
            return None
    except (gdb.MemoryError, gdb.GdbError):
        return None
    name = _function(target, False)
    return name.split("@")[0] if not name.startswith("0x") else None


def where(t):
    """Where a thread is. For a parked one: the weft call it blocked in <-
    the function and line that called it (its blocking site, a return
    address); the call is decoded at the site, since the parking function
    itself is often an internal one (a slow path)."""
    if t.state == "exited":
        return "exited, not yet joined"
    if not t.started:
        return "not started: " + _function(t.fn, True)
    if t.state in ("running", "switching"):
        return t.state + ", " + (t.vproc.kernel_thread() if t.vproc else "vproc unknown")
    inside = _function(t.pc, False)
    if t.state != "parked" or not t.site:
        return inside
    site = t.site - 1  # the call is the byte before the return address
    return "%s <- %s%s" % (_callee(t.site) or inside, _function(site, True), _line(site))


# ---- backtrace of a switched-out thread ------------------------------------

class _ReadOnly(Exception):
    pass


class _SavedContext:
    """The registers of the selected kernel thread's innermost frame set to
    a weft thread's saved context, restored on exit whatever happens.
    _ReadOnly (nothing changed) where registers cannot be written."""

    REGS = ("rip", "rsp", "rbp")

    def __init__(self, t):
        self.t = t

    def __enter__(self):
        th = gdb.selected_thread()
        if th is None:
            _fail("no thread is selected")
        if th.is_running():
            _fail("the selected thread is running; interrupt the program first")
        try:
            self.level = gdb.selected_frame().level()
        except gdb.error:
            self.level = 0
        frame = gdb.newest_frame()
        frame.select()
        self.saved = {r: int(frame.read_register(r)) for r in self.REGS}
        try:
            self._set({"rip": self.t.pc, "rsp": self.t.sp, "rbp": self.t.fp})
        except gdb.error:
            self._set(self.saved)  # writing the values already there succeeds anywhere
            raise _ReadOnly()
        return self

    def __exit__(self, *exc):
        gdb.newest_frame().select()
        self._set(self.saved)
        frame = gdb.newest_frame()  # back where the user was, quietly
        for _ in range(self.level):
            frame = frame.older() or frame
        frame.select()
        return False

    @staticmethod
    def _set(values):
        for r in ("rbp", "rsp", "rip"):
            gdb.execute("set $%s = %#x" % (r, values[r]), to_string=True)


def _header(t):
    vp = t.vproc.index if t.vproc else "?"
    state = "parked: " + t.reason if t.state == "parked" else t.state
    return 'weft thread %d "%s" (%s) on vproc %s:' % (t.id, t.name, state, vp)


def backtrace(t, args):
    if t.state in ("running", "switching"):
        vp = t.vproc
        how = ""
        if vp and vp.gdb_thread is not None:
            how = ": its frames are gdb thread %d's ('thread %d', then 'bt')" % (vp.gdb_thread, vp.gdb_thread)
        _fail('thread %d "%s" is %s on vproc %s (%s)%s' % (
            t.id, t.name, t.state, vp.index if vp else "?", vp.kernel_thread() if vp else "kernel thread unknown",
            how))
    if t.state == "exited":
        _fail('thread %d "%s" has exited (not yet joined): it has no frames left' % (t.id, t.name))
    if not t.started:
        gdb.write("(not started: it will begin in %s)\n" % _function(t.fn, True))
        return
    try:
        ctx = _SavedContext(t).__enter__()
    except _ReadOnly:  # a core file
        _core_backtrace(t, args)
        return
    try:
        gdb.execute(("backtrace " + args).strip())
    finally:
        ctx.__exit__(None, None, None)


# ---- backtrace without writable registers (a core file) --------------------
#
# An unwinder that, while a backtrace is being taken, says the caller of the
# selected kernel thread's innermost frame is the weft thread's saved
# context; gdb's own unwinders take it from there. The frames are printed
# here, from that caller on, since `backtrace` would also show frame 0.

class _FrameId:
    def __init__(self, sp, pc):
        self.sp, self.pc = sp, pc


class _ContextUnwinder(gdb.unwinder.Unwinder):
    def __init__(self):
        super().__init__("weft-saved-context")
        self.ctx = None

    def __call__(self, pending):
        if self.ctx is None or pending.level() != 0:
            return None
        info = pending.create_unwind_info(_FrameId(pending.read_register("rsp"), pending.read_register("rip")))
        u64 = gdb.lookup_type("unsigned long")
        for reg, value in zip(("rsp", "rip", "rbp"), self.ctx):
            info.add_saved_register(reg, gdb.Value(value).cast(u64))
        return info


_unwinder = None


def _core_backtrace(t, args):
    global _unwinder
    if _unwinder is None:
        _unwinder = _ContextUnwinder()
        gdb.unwinder.register_unwinder(None, _unwinder, replace=True)
    if args:
        gdb.write("(registers cannot be set here: frames without '%s')\n" % args)
    _unwinder.ctx = (t.sp, t.pc, t.fp)
    gdb.invalidate_cached_frames()
    try:
        frame, level = gdb.newest_frame().older(), 0
        while frame is not None:
            gdb.write(_frame_line(level, frame) + "\n")
            frame, level = frame.older(), level + 1
    finally:
        _unwinder.ctx = None
        gdb.invalidate_cached_frames()


def _frame_line(level, frame):
    pc = frame.pc()
    sal = frame.find_sal()
    lookup = pc if level == 0 or frame.type() == gdb.INLINE_FRAME else pc - 1
    name = frame.name() or _function(lookup, True)
    text = "#%-2d " % level
    if frame.type() != gdb.INLINE_FRAME and (sal.symtab is None or sal.pc != pc):
        text += "%#018x in " % pc
    text += name + " ()"
    if sal.symtab is not None:
        text += " at %s:%d" % (sal.symtab.filename, sal.line)
    return text


# ---- commands --------------------------------------------------------------

class WeftCommand(gdb.Command):
    """weft's user-level threads.

weft threads          list every weft thread: id, name, state, vproc, park reason, where
weft bt ID [ARGS]     backtrace of weft thread ID (ARGS as for backtrace: full, -N, ...)
weft bt all [ARGS]    backtrace of every weft thread
weft vprocs           list the vprocs, their kernel threads and what each runs"""

    def __init__(self):
        super().__init__("weft", gdb.COMMAND_STACK, gdb.COMPLETE_NONE, True)


class WeftThreadsCommand(gdb.Command):
    """List every weft thread: id, name, state, home vproc, why it is parked,
and where: for a parked thread, the function it parked in <- the call
site that blocked (the blocking site). '*' marks the thread the selected
kernel thread runs."""

    def __init__(self):
        super().__init__("weft threads", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        snap = Snapshot()
        sel = gdb.selected_thread()
        sel_lwp = sel.ptid[1] if sel is not None else None
        rows = [("", "ID", "NAME", "STATE", "VPROC", "REASON", "WHERE")]
        for t in snap.threads:
            mark = "*" if t.state == "running" and t.vproc and t.vproc.tid == sel_lwp else ""
            rows.append((mark, str(t.id), t.name, t.state, str(t.vproc.index) if t.vproc else "?",
                         t.reason if t.state == "parked" else "-", where(t)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            gdb.write("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] + "\n")
        if not snap.threads:
            gdb.write("(no weft threads)\n")


class WeftBtCommand(gdb.Command):
    """Backtrace of a weft thread that is not running: weft bt ID [ARGS],
or of every weft thread: weft bt all [ARGS]. ARGS are passed to
backtrace (full, -N, ...). A running thread's frames are those of the
kernel thread that runs it (see weft threads, weft vprocs)."""

    def __init__(self):
        super().__init__("weft bt", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        words = arg.split(None, 1)
        if not words:
            _fail("usage: weft bt ID|all [backtrace arguments]")
        rest = words[1] if len(words) > 1 else ""
        snap = Snapshot()
        if words[0] != "all":
            t = snap.find(words[0])
            gdb.write(_header(t) + "\n")
            backtrace(t, rest)
            return
        for t in snap.threads:
            gdb.write("\n" + _header(t) + "\n")
            try:
                backtrace(t, rest)
            except gdb.GdbError as e:
                gdb.write(str(e) + "\n")


class WeftVprocsCommand(gdb.Command):
    """List the vprocs of every running weft runtime: index, kernel thread,
and the weft thread each runs now (or idle, in its scheduler loop)."""

    def __init__(self):
        super().__init__("weft vprocs", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        snap = Snapshot()
        by_addr = {t.addr: t for t in snap.threads}
        for vp in snap.vprocs:
            t = by_addr.get(vp.current)
            now = 'runs thread %d "%s"' % (t.id, t.name) if t else "idle (in its scheduler loop)"
            gdb.write("vproc %d: %s; %s\n" % (vp.index, vp.kernel_thread(), now))


WeftCommand()
WeftThreadsCommand()
WeftBtCommand()
WeftVprocsCommand()
