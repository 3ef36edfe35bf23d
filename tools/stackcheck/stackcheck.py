#!/usr/bin/env python3
"""stackcheck: where a linked-stack program needs stack checkpoints.

The whole-program call-graph analysis of Capriccio (von Behren et al.,
SOSP 2003, section 3, "Linked Stack Management"), over the call graphs
gcc writes with -fcallgraph-info=su. Python 3 standard library only.

The model
---------
Every function is a node weighted by its frame size, as gcc's stack usage
reports it (the return address included). A call site is an edge. The
stack a sequence of calls uses is the sum of the frames along the path. A
*checkpoint* is code at a call site that makes sure the current stack chunk
has room for everything the callee can use before it reaches the next
checkpoint (or returns from a leaf), and links a new chunk when it has not.
So a checkpoint on an edge n -> s needs bound(s) bytes, where bound(s) is
the longest path that starts at s and stops at a checkpoint or a leaf.
Thread entries have an implicit checkpoint (the paper's C0): the first
chunk must hold bound(entry). gcc's frame sizes leave out the x86-64 red
zone, the 128 bytes below the stack pointer that a leaf function may use
without moving it (a 240-byte array in a leaf is reported as 152 bytes):
build the program with -mno-red-zone, or pass --red-zone 128, which adds it
to every leaf.

The algorithm (paper section 3.2)
---------------------------------
1. Depth-first search from the roots (the --entry functions, else every
   function nobody calls, and main; then whatever is left, so that every
   cycle is seen). Every back edge (to a function still on the DFS stack)
   gets a checkpoint: every cycle contains one, so every path between
   checkpoints is finite.
2. Without the back edges the graph is acyclic, and the DFS finishing order
   is a bottom-up order of it. Walk it: for each function n and each call
   site n -> s that is not yet a checkpoint, if frame(n) + bound(s) exceeds
   MaxPath, put a checkpoint on the site (its contribution drops to 0);
   bound(n) = frame(n) + the largest remaining contribution.
3. Call sites the analysis cannot bound are checkpoints whatever MaxPath
   is, and ask for a large shared chunk (paper section 3.3):
     external  a callee outside the analysed code with no trusted bound;
     indirect  a call through a pointer whose targets are unknown;
     dynamic   a callee whose frame is unbounded (alloca or a VLA: gcc
               reports "N bytes (dynamic)").
   A callee outside the analysed code *with* a trusted bound (an
   annotation file: libc.bounds) is a leaf of that size.
The paper's greedy is not monotone in MaxPath: a larger MaxPath can move a
checkpoint from one edge below a shared callee to the many edges above it
(tests/stackcheck: Stackcheck.GreedyCanInstrumentMoreWithLargerMaxPath).

Static bounds: an entry from which no recursion, no unbounded external, no
unknown indirect call and no dynamic frame is reachable has a static bound,
its longest path with no checkpoint at all: a thread started there can be
given exactly that stack. Otherwise the report says why not, with a path.

Reading gcc's .ci files (VCG, gcc 12)
-------------------------------------
  node: { title: "T" label: "NAME\\nFILE:LINE:COL\\nN bytes (static)" }
A function defined in the translation unit: the label's third line is its
stack usage, "static", "dynamic,bounded" (N is a bound) or "dynamic"
(unbounded). The title is the assembler name, prefixed by the unit's main
source file and ':' when the symbol is local or a weak definition (static
functions, C++ inline functions and template instantiations), because such
names are not unique across units; C++ labels are demangled signatures.
  node: { title: "T" label: "NAME\\nDECL-LOCATION" shape : ellipse }
A function only declared in the unit (external to it).
  edge: { sourcename: "A" targetname: "B" label: "FILE:LINE:COL" }
One call site (two calls of B in A are two edges). An indirect call is an
edge to the node "__indirect_call".
Merging units: a title defined in the same unit wins; then a public
definition elsewhere; then, for C++ (_Z) weak definitions, the unit-
qualified copy in any unit (never a C static or a C++ internal _ZL name).
The weak copies of one C++ function in several units are one node (the
linker keeps one copy): the largest frame, the first unit's calls. A C++
complete-object constructor or destructor (C1/D1) that is only an alias
resolves to the base-object one (C2/D2); NAME.localalias (from
-fno-semantic-interposition) to NAME; '*NAME' (an asm label) is NAME.
Anything else is external. A C function defined weak (__attribute__
((weak))) is unit-qualified like a static one, and so not matched from
other units. gcc keeps only what follows the last '.' of a label, so
clones (f.part.0), variadic functions and static initialisers have
garbled labels ('0(T*)', ')'): their reports use the assembler name.
Functions of the same public name in two units (two programs' main) are
merged with a warning: give one program's units at a time.

Indirect calls
--------------
The .ci files say only that a call is indirect. In order of precedence:
  * --indirect CALLER=T1,T2 or --indirect-map FILE: the targets given.
  * gcc's -fdump-ipa-cgraph dumps (*.cgraph) given as inputs: they mark
    every function whose address is taken ("Address is taken.") and say
    whether a caller's indirect calls are C++ virtual calls ("Polymorphic
    indirect call"). An indirect call then may reach any address-taken
    function of the program, or, when all the caller's indirect calls are
    virtual calls, any address-taken virtual function. The dump is taken
    before inlining, the .ci after: the virtual-only rule applies only when
    the .ci has no more indirect calls in the caller than the dump has
    virtual calls (inlining can bring in plain indirect calls; a virtual
    call devirtualised away while a plain one is inlined in its place would
    still fool it). gcc gives no types for plain function pointers, so no
    finer matching (the paper's number and types of arguments) is done.
    External functions whose address is taken count too (bounded by the
    annotations, else unbounded), except compiler-generated ones marked
    "artificial" (the C++ personality routine). An indirect call that may
    reach an external function with no trusted bound is a checkpoint of
    kind "indirect" with a large chunk. --indirect-externals bounded|none
    leaves such externals out: unsound if the program calls them through a
    pointer, right if it only hands them to a library (a pthread_once
    routine, a context-switch trampoline).
  * Otherwise the call is a checkpoint of kind "indirect": unknown callee,
    large shared chunk; the functions it may reach have no callers and are
    analysed as roots of their own.

Checkpoint functions (--checkpoint-functions)
---------------------------------------------
With gcc's -fsplit-stack the check is a function prologue, not code at a
call site, so a checkpoint on n -> s is placed in a function: in s when s is
defined in the analysed code (its prologue then checks at every call of s,
which is more than needed and never less), in n when the callee is external
or unknown (gold rewrites the prologue of a split-stack function that calls
code built without -fsplit-stack to ask for a large chunk, so n must have a
prologue to rewrite). A site with several targets (a resolved indirect call)
applies this to each. Thread entries are not listed for their implicit
checkpoint: the runtime sizes the first chunk. The file lists the assembler
names, one per line, for the weft_checkpoints gcc plugin
(tools/stackcheck/plugin), which marks every other function no_split_stack
(except variadic ones: gcc needs their prologue for va_start).
Two C statics of the same name in different units are one name there: if
one needs a prologue, both get one.

Wrapped externals (--wrap-externals)
------------------------------------
A checkpoint in the caller of an external function with no trusted bound
leaves it MaxPath bytes, which may be too few (the paper gives such calls a
large chunk). --wrap-externals lists those functions, 'NAME BYTES' per
line, BYTES from --external-chunk (16 KiB by default, what gcc's gold
asks for code built without -fsplit-stack): gen_wraps.py turns the list
into wrappers (src/arch/x86_64/morestack_wrap.inc) and ld --wrap options,
so that each call runs the function on a chunk with that much room. Those
that must stay on the current stack (setjmp and longjmp, context
switches, __tls_get_addr: NO_WRAP) are listed as comments, not wrapped.

Exit status: 0 done, 1 bad input (missing, unreadable or malformed file,
unknown name), 2 usage, 3 internal error.
"""

import argparse
import fnmatch
import json
import os
import re
import sys

INDIRECT = "__indirect_call"
KINDS = ("back-edge", "maxpath", "external", "indirect", "dynamic")


class InputError(Exception):
    """Bad input: a message for the user, exit status 1."""


class UsageError(Exception):
    """Bad command line: exit status 2."""


def warn(msg):
    print("stackcheck: warning: " + msg, file=sys.stderr)


# ---------------------------------------------------------------- VCG ----

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<punct>[{}:])'
                    r'|(?P<word>[^\s{}:"]+))', re.S)


def _unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(n, n))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _tokens(text, path):
    """(kind, value, line) for the strings, words and {}: of a VCG text."""
    pos, line = 0, 1
    while True:
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            rest = text[pos:]
            if rest.strip():
                line += text.count("\n", pos, pos + len(rest) - len(rest.lstrip()))
                raise InputError("%s:%d: not VCG: unexpected %r"
                                 % (path, line, rest.strip()[:20]))
            return
        start = m.start(m.lastgroup)
        line += text.count("\n", pos, start)
        if m.group("str") is not None:
            yield ("str", _unescape(m.group("str")[1:-1]), line)
        elif m.group("punct") is not None:
            yield (m.group("punct"), m.group("punct"), line)
        else:
            yield ("word", m.group("word"), line)
        line += text.count("\n", start, m.end())
        pos = m.end()


def parse_vcg(text, path):
    """gcc's .ci: graph: { title: "..." node: {...} edge: {...} ... }.

    Returns (graph title, [node attribute dicts], [edge attribute dicts]);
    each dict carries its line as "_line"."""
    toks = list(_tokens(text, path))
    i = 0

    def expect(kind, what):
        nonlocal i
        if i >= len(toks):
            raise InputError("%s: not a complete VCG graph: expected %s at end "
                             "of file" % (path, what))
        t = toks[i]
        if t[0] != kind:
            raise InputError("%s:%d: not VCG: expected %s, found %r"
                             % (path, t[2], what, t[1]))
        i += 1
        return t

    def block():
        # after '{': key ':' value ... '}' ; values are strings or words
        nonlocal i
        attrs = {"_line": toks[i - 1][2]}
        while True:
            if i >= len(toks):
                raise InputError("%s: not a complete VCG graph: missing '}'"
                                 % path)
            t = toks[i]
            if t[0] == "}":
                i += 1
                return attrs
            if t[0] != "word":
                raise InputError("%s:%d: not VCG: expected an attribute name, "
                                 "found %r" % (path, t[2], t[1]))
            i += 1
            expect(":", "':'")
            if i < len(toks) and toks[i][0] == "{":
                raise InputError("%s:%d: unexpected nested block %r"
                                 % (path, t[2], t[1]))
            if i >= len(toks) or toks[i][0] not in ("str", "word"):
                raise InputError("%s:%d: not VCG: attribute %r has no value"
                                 % (path, t[2], t[1]))
            attrs[t[1]] = toks[i][1]
            i += 1

    if not toks:
        raise InputError("%s: empty file, not a gcc -fcallgraph-info graph"
                         % path)
    t = expect("word", "'graph'")
    if t[1] != "graph":
        raise InputError("%s:%d: not a gcc -fcallgraph-info graph: starts "
                         "with %r" % (path, t[2], t[1]))
    expect(":", "':'")
    expect("{", "'{'")
    title, nodes, edges = None, [], []
    while True:
        if i >= len(toks):
            raise InputError("%s: not a complete VCG graph: missing the final "
                             "'}'" % path)
        t = toks[i]
        if t[0] == "}":
            i += 1
            break
        if t[0] != "word":
            raise InputError("%s:%d: not VCG: unexpected %r"
                             % (path, t[2], t[1]))
        i += 1
        expect(":", "':'")
        if t[1] in ("node", "edge"):
            expect("{", "'{'")
            b = block()
            (nodes if t[1] == "node" else edges).append(b)
        elif i < len(toks) and toks[i][0] in ("str", "word"):
            if t[1] == "title":
                title = toks[i][1]
            i += 1
        else:
            raise InputError("%s:%d: not VCG: %r has no value"
                             % (path, t[2], t[1]))
    if i != len(toks):
        raise InputError("%s:%d: unexpected text after the graph"
                         % (path, toks[i][2]))
    if title is None:
        raise InputError("%s: the graph has no title (gcc writes the source "
                         "file name there)" % path)
    return title, nodes, edges


_FRAME = re.compile(r"^(\d+) bytes \(([a-z,]+)\)$")


_OPERATOR = re.compile(r"\s*(?:(?:new|delete)(?:\s*\[\])?(?![\w])|\"\"\s*\w+|"
                       r"\(\)|\[\]|<=>|<<=|>>=|->\*|->|<<|>>|<=|>=|==|!=|&&|"
                       r"\|\||\+\+|--|[-+*/%^&|~!=<>,]=?|\s[^(]*)")


_QUALS = re.compile(r"(?:\s|const\b|volatile\b|&&|&|noexcept\b)*$")


def _top_level(s):
    """Yields (index, char, angle depth, paren depth) for s, skipping the
    symbols of operators (operator<, operator(), ...)."""
    angle = paren = 0
    i = 0
    while i < len(s):
        if s.startswith("operator", i) and (i == 0 or not (s[i - 1].isalnum()
                                                          or s[i - 1] == "_")):
            m = _OPERATOR.match(s, i + len("operator"))
            if m and m.end() > i + len("operator"):
                yield (i, "operator", angle, paren)
                i = m.end()
                continue
        c = s[i]
        if c == "(":
            yield (i, c, angle, paren)
            paren += 1
        elif c == ")":
            paren = max(0, paren - 1)
            yield (i, c, angle, paren)
        else:
            if c == "<":
                angle += 1
            elif c == ">" and angle:
                angle -= 1
            yield (i, c, angle, paren)
        i += 1


def short_name(label):
    """'virtual int ns::B::f(int) const' -> 'ns::B::f'; C names unchanged.
    The parameter list is the last top-level (...) followed only by
    qualifiers; the name is the last top-level word before it."""
    s = label
    k = s.find(" [with ")
    if k > 0:
        s = s[:k]
    last_open, cut = -1, -1
    for i, c, angle, paren in _top_level(s):
        if c == "(" and angle == 0 and paren == 0:
            last_open = i
        elif c == ")" and angle == 0 and paren == 0 and last_open >= 0:
            if _QUALS.match(s, i + 1):
                cut = last_open
    head = s if cut < 0 else s[:cut]
    start = 0
    for i, c, angle, paren in _top_level(head):
        if c == "operator" and angle == 0 and paren == 0:
            break                   # 'operator new []' is one name
        if c == " " and angle == 0 and paren == 0:
            start = i + 1
    name = head[start:].strip().lstrip("*&")
    if name.startswith("("):
        # a function returning a function pointer: 'void (* signal(int))(int)'
        m = re.match(r"\(\s*\*\s*([\w:~<>]+)\s*\(", name)
        if m:
            return m.group(1)
    return name or label


def display_name(title, label):
    """The short name of the label, unless gcc garbled the label: it keeps
    only what follows the last '.' of the printable name, so clones
    (f.part.0), variadic functions ('...') and static initializers come out
    as '0(T*)', ')' or 'cc)'. Then the assembler name is the honest name."""
    asm = title.rsplit(":", 1)[-1]
    if "." in asm or not label or not (label[0].isalpha() or label[0] in "_~(") \
            or label.count("(") != label.count(")"):
        return asm
    return short_name(label)


# ------------------------------------------------------------- program ----

class Func:
    """A node: a function defined in the analysed code, or an external."""

    __slots__ = ("id", "title", "label", "name", "loc", "ci", "frame",
                 "dynamic", "defined", "sites", "bound_ext", "virtual")

    def __init__(self, fid, title, label, loc, ci, frame=None, dynamic=False,
                 defined=True):
        self.id = fid              # unique key in the program
        self.title = title         # gcc's title (assembler name, maybe qualified)
        self.label = label         # first label line: name or C++ signature
        self.name = display_name(title, label)
        self.loc = loc             # source location of the definition
        self.ci = ci               # .ci file that defined it (None: external)
        self.frame = frame         # bytes; None for externals
        self.dynamic = dynamic     # unbounded dynamic allocation in the frame
        self.defined = defined
        self.sites = []            # CallSite list, in source order
        self.bound_ext = None      # trusted bound of an external, or None
        self.virtual = False       # C++ virtual (from the cgraph dumps)


class CallSite:
    __slots__ = ("caller", "loc", "raw", "targets", "indirect", "resolved_by")

    def __init__(self, caller, loc, raw):
        self.caller = caller       # Func id
        self.loc = loc             # "file:line:col" or None
        self.raw = raw             # target title as written in the .ci
        self.targets = []          # Func ids; empty + indirect: unknown callee
        self.indirect = raw == INDIRECT
        self.resolved_by = None    # for indirect sites: map|address-taken|virtual


class TU:
    """One .ci file: its graph title and its raw nodes and edges."""

    def __init__(self, path, title, nodes, edges):
        self.path, self.title, self.nodes, self.edges = path, title, nodes, edges
        self.local = {}            # title -> Func id, for nodes defined here
        self.declared = {}         # title -> (label, location) of externals


def _is_cxx_internal(asm):
    return asm.startswith("_ZL") or "_GLOBAL__N" in asm


def _ctor_dtor_aliases(name):
    """C1/D1 (complete object) names that gcc may emit as aliases of C2/D2."""
    out = []
    for m in re.finditer(r"(C1|D1)(?=[EI])", name):
        rep = "C2" if m.group(1) == "C1" else "D2"
        out.append(name[:m.start()] + rep + name[m.end():])
    return out


class Program:
    def __init__(self):
        self.funcs = {}            # id -> Func
        self.tus = []
        self.public = {}           # unqualified title -> Func id (defined)
        self.weak = {}             # asm name -> [Func id] of qualified C++ copies
        self.by_qualified = {}     # asm name -> [Func id] of any qualified copy
        self.duplicates = []

    # -- loading ------------------------------------------------------------

    def add_tu(self, path, text):
        title, nodes, edges = parse_vcg(text, path)
        tu = TU(path, title, nodes, edges)
        prefix = title + ":"
        for nd in nodes:
            t = nd.get("title")
            if t is None:
                raise InputError("%s:%d: node without a title" % (path, nd["_line"]))
            if t == INDIRECT:
                continue
            lines = nd.get("label", t).split("\n")
            frame_line = lines[2] if len(lines) >= 3 else None
            if nd.get("shape") == "ellipse" or frame_line is None:
                # declared only: resolved when linking
                tu.declared[t] = (lines[0], lines[1] if len(lines) > 1 else "")
                continue
            m = _FRAME.match(frame_line.strip())
            if not m:
                raise InputError("%s:%d: node %r: expected 'N bytes (static|"
                                 "dynamic|dynamic,bounded)' in its label, found "
                                 "%r (compile with -fcallgraph-info=su)"
                                 % (path, nd["_line"], t, frame_line))
            frame, qual = int(m.group(1)), m.group(2).split(",")
            if qual[0] not in ("static", "dynamic"):
                raise InputError("%s:%d: node %r: unknown stack usage qualifier "
                                 "%r" % (path, nd["_line"], t, m.group(2)))
            dynamic = "dynamic" in qual and "bounded" not in qual
            qualified = t.startswith(prefix)
            asm = t[len(prefix):] if qualified else t
            fid = t
            weak = qualified and asm.startswith("_Z") and not _is_cxx_internal(asm)
            if weak and asm in self.weak:
                # another unit's copy of a C++ inline function or template
                # instance: the linker keeps one, so the graph does too
                # (its largest frame, the first copy's calls)
                other = self.funcs[self.weak[asm][0]]
                other.frame = max(other.frame, frame)
                other.dynamic = other.dynamic or dynamic
                tu.local[t] = other.id
                continue
            if fid in self.funcs:
                other = self.funcs[fid]
                if qualified:
                    # two units with the same main file name: keep both
                    fid = "%s#%s" % (t, path)
                else:
                    self.duplicates.append((t, other.ci, path))
                    other.frame = max(other.frame, frame)
                    other.dynamic = other.dynamic or dynamic
                    tu.local[t] = fid
                    continue
            f = Func(fid, t, lines[0], lines[1] if len(lines) > 1 else "",
                     path, frame, dynamic)
            self.funcs[fid] = f
            tu.local[t] = fid
            if qualified:
                self.by_qualified.setdefault(asm, []).append(fid)
                if asm.startswith("_Z") and not _is_cxx_internal(asm):
                    self.weak.setdefault(asm, []).append(fid)
            else:
                self.public[t] = fid
        self.tus.append(tu)

    def resolve(self, tu, raw):
        """A call target as written in unit tu -> Func id (creating externals)."""
        prefix = tu.title + ":"
        names = [raw] + _ctor_dtor_aliases(raw)
        if raw.endswith(".localalias"):
            # -fno-semantic-interposition: a local alias of a public function
            names.append(raw[:-len(".localalias")])
        for n in names:
            if n in tu.local:
                return tu.local[n]
        for n in names:
            asm = n[len(prefix):] if n.startswith(prefix) else n
            if asm in self.public:
                return self.public[asm]
            if asm in self.weak:
                return self.weak[asm][0]
        # '*name': an assembler name set with asm("name") (glibc redirects
        # fscanf to *__isoc99_fscanf); the symbol is the name itself
        sym = raw[1:] if raw.startswith("*") else raw
        fid = "extern:" + sym
        if fid not in self.funcs:
            label, loc = tu.declared.get(raw, (sym, ""))
            self.funcs[fid] = Func(fid, sym, label, loc, None, defined=False)
        return fid

    def link(self):
        for tu in self.tus:
            for e in tu.edges:
                src, dst = e.get("sourcename"), e.get("targetname")
                if src is None or dst is None:
                    raise InputError("%s:%d: edge without sourcename/targetname"
                                     % (tu.path, e["_line"]))
                if src not in tu.local:
                    raise InputError("%s:%d: edge from %r, which the file does "
                                     "not define" % (tu.path, e["_line"], src))
                caller = self.funcs[tu.local[src]]
                if caller.ci != tu.path:
                    continue        # a merged copy: its first unit's calls
                site = CallSite(caller.id, e.get("label"), dst)
                if not site.indirect:
                    site.targets = [self.resolve(tu, dst)]
                caller.sites.append(site)

    # -- names given on the command line or in annotation files -------------

    def lookup(self, name, defined_only=False):
        """Ids matching a user-given name: title, qualified title, C++
        signature or short name, external title."""
        cands = [f for f in self.funcs.values()
                 if not defined_only or f.defined]
        for key in (lambda f: f.id, lambda f: f.title, lambda f: f.label,
                    lambda f: f.name,
                    lambda f: f.title.rsplit(":", 1)[1] if ":" in f.title else None):
            hits = [f.id for f in cands if key(f) == name]
            if hits:
                return hits
        return []

    def display(self):
        """Human names: short names; where two functions share one, C
        statics become FILE:NAME and C++ functions NAME [ASSEMBLER-NAME]."""
        count = {}
        for f in self.funcs.values():
            count[f.name] = count.get(f.name, 0) + 1
        out = {}
        for f in self.funcs.values():
            asm = f.title.rsplit(":", 1)[-1]
            if count[f.name] == 1:
                out[f.id] = f.name
            elif asm.startswith("_Z"):
                out[f.id] = "%s [%s]" % (f.name, asm)
            else:
                out[f.id] = f.id if f.defined else f.title
        return out


# ------------------------------------------------------------- bounds ----

def annotation_lines(path, what):
    """(line number, text) of a text annotation file's lines, without
    '#' comments and blank lines. InputError naming `what` if unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as e:
        raise InputError("cannot read %s %s: %s" % (what, path, e.strerror))
    except UnicodeDecodeError:
        raise InputError("%s: not a text file" % path)
    for n, line in enumerate(lines, 1):
        s = line.split("#", 1)[0].strip()
        if s:
            yield n, s


def load_bounds(path):
    """'NAME BYTES' per line ('#' comments); NAME may be a glob. BYTES may be
    'unbounded' to insist that a function has no trusted bound."""
    out = []
    for n, s in annotation_lines(path, "bounds file"):
        parts = s.split()
        if len(parts) != 2:
            raise InputError("%s:%d: expected 'NAME BYTES', found %r"
                             % (path, n, s))
        name, val = parts
        if val == "unbounded":
            out.append((name, None))
            continue
        try:
            b = int(val, 0)
        except ValueError:
            b = -1
        if b < 0:
            raise InputError("%s:%d: %r is not a byte count (or 'unbounded')"
                             % (path, n, val))
        out.append((name, b))
    return out


def apply_bounds(prog, bounds):
    """Later files and later lines win; exact names before globs."""
    exact, globs = {}, []
    for name, b in bounds:
        if any(c in name for c in "*?["):
            globs.append((name, b))
        else:
            exact[name] = b
    for f in prog.funcs.values():
        if f.defined:
            continue
        keys = [f.title, f.name, f.label]
        hit = False
        for k in keys:
            if k in exact:
                f.bound_ext, hit = exact[k], True
                break
        if hit:
            continue
        for pat, b in reversed(globs):
            if any(fnmatch.fnmatchcase(k, pat) for k in keys):
                f.bound_ext = b
                break


# ------------------------------------------------------ cgraph dumps ----

_DUMP_HEAD = re.compile(r"^(\S.*)/(\d+) \((.*)\) @0x[0-9a-f]+$")


def parse_cgraph_dump(path, text):
    """gcc -fdump-ipa-cgraph: the first symbol table. Returns a dict
    name -> {'function', 'defined', 'public', 'weak', 'addr', 'virtual',
    'artificial', 'indirect', 'polymorphic'}."""
    if "Symbol table:" not in text:
        raise InputError("%s: not a gcc -fdump-ipa-cgraph dump (no symbol table)"
                         % path)
    syms, cur = {}, None
    in_table = False
    for line in text.splitlines():
        if line.endswith("Symbol table:"):
            if in_table or syms:
                break               # only the first (initial) table
            in_table = True
            continue
        if not in_table:
            continue
        m = _DUMP_HEAD.match(line)
        if m:
            cur = {"function": False, "defined": False, "public": False,
                   "weak": False, "addr": False, "virtual": False,
                   "artificial": False, "indirect": 0, "polymorphic": 0}
            syms[m.group(1)] = cur
            continue
        if cur is None:
            continue
        s = line.strip()
        if s.startswith("Type:"):
            cur["function"] = s.startswith("Type: function")
            cur["defined"] = "definition" in s
        elif s.startswith("Visibility:"):
            words = s.split()[1:]
            cur["public"] = "public" in words
            cur["weak"] = "weak" in words
            cur["virtual"] = "virtual" in words
            cur["artificial"] = "artificial" in words
        elif s == "Address is taken.":
            cur["addr"] = True
        elif s.startswith("Polymorphic indirect call"):
            cur["polymorphic"] += 1
            cur["indirect"] += 1
        elif s.startswith("Indirect call"):
            cur["indirect"] += 1
    if not in_table:
        raise InputError("%s: not a gcc -fdump-ipa-cgraph dump" % path)
    return syms


def _pair_dump(prog, dump_path):
    """The unit of a dump: dir/x.cc.cc.000i.cgraph belongs to dir/x.cc.ci
    (the longest .ci stem that prefixes the dump's name)."""
    best = None
    for tu in prog.tus:
        stem = tu.path[:-3] if tu.path.endswith(".ci") else tu.path
        if dump_path.startswith(stem + ".") and (best is None or
                                                 len(stem) > len(best[0])):
            best = (stem, tu)
    return best[1] if best else None


def apply_dumps(prog, dumps):
    """Marks address-taken and virtual functions; returns the set of
    address-taken ids and, per caller id, whether its indirect calls are
    all virtual calls."""
    taken, polymorphic_only = set(), {}
    for path, syms in dumps:
        tu = _pair_dump(prog, path)
        for name, s in syms.items():
            if not s["function"]:
                continue
            ids = _dump_ids(prog, tu, name, s,
                            create=s["addr"] and not s["artificial"])
            for fid in ids:
                f = prog.funcs[fid]
                if s["virtual"]:
                    f.virtual = True
                if s["addr"] and not (s["artificial"] and not f.defined):
                    taken.add(fid)
                if s["indirect"] and f.defined:
                    only = s["polymorphic"] == s["indirect"] and \
                        sum(1 for c in f.sites if c.indirect) <= s["polymorphic"]
                    polymorphic_only[fid] = polymorphic_only.get(fid, True) and only
    return taken, polymorphic_only


def _dump_ids(prog, tu, name, s, create):
    """The program's ids for a symbol of a dump. gcc names a symbol by its
    assembler name once it has one, else (C++ declarations never defined in
    the unit) by its printable name, which is the .ci label."""
    names = [name] + _ctor_dtor_aliases(name)
    if s["defined"] and (not s["public"] or s["weak"]):
        for n in names:
            if tu is not None:
                q = tu.title + ":" + n
                if q in tu.local:
                    return [tu.local[q]]
        for n in names:
            if n in prog.by_qualified:
                return list(prog.by_qualified[n])
        if not s["weak"]:
            return []
    for n in names:
        if n in prog.public:
            return [prog.public[n]]
        if n in prog.weak:
            return [prog.weak[n][0]]
    by_label = [f.id for f in prog.funcs.values()
                if f.defined and f.label == name] if " " in name else []
    if by_label:
        return by_label
    if s["defined"]:
        return []                   # defined, but in no .ci given
    # an external function: it becomes a node when something may call it.
    # A printable name ('int close(int)') is matched to the .ci externals by
    # label, else keyed by its short name ('close', as libc.bounds has it).
    title, label = name, name
    if " " in name or "(" in name:
        same = [f.id for f in prog.funcs.values()
                if not f.defined and f.label == name]
        if same:
            return same[:1]
        title = short_name(name)
    fid = "extern:" + title
    if fid not in prog.funcs:
        if not create:
            return []
        prog.funcs[fid] = Func(fid, title, label, "", None, defined=False)
    return [fid]


_MAP_LINE = re.compile(r"^(\S+?)(?::\s+|\s*=\s*|\s+)(\S.*)$")


def load_indirect_map(path):
    """'CALLER: T1 T2', 'CALLER = T1, T2' or 'CALLER T1 T2' per line; '#'
    comments. Names as for --entry (no spaces: use C++ short or mangled
    names)."""
    out = []
    for n, s in annotation_lines(path, "indirect-call map"):
        m = _MAP_LINE.match(s)
        targets = [t for t in re.split(r"[\s,]+", m.group(2)) if t] if m else []
        if not targets:
            raise InputError("%s:%d: expected 'CALLER: TARGET...', found %r"
                             % (path, n, s))
        out.append((m.group(1), targets, "%s:%d" % (path, n)))
    return out


def resolve_indirect(prog, explicit, taken, polymorphic_only, externals="all"):
    """Gives every indirect call site its targets (see the module comment).
    externals: which address-taken external functions may be targets: all
    (sound), bounded (those with a trusted bound), none."""
    by_caller = {}
    for caller, targets, where in explicit:
        ids = prog.lookup(caller, defined_only=True)
        if not ids:
            raise InputError("%s: no function %r is defined in the .ci files"
                             % (where, caller))
        tids = []
        for t in targets:
            hit = prog.lookup(t)
            if not hit:
                warn("%s: %r is not defined in the .ci files: treated as an "
                     "external function" % (where, t))
                fid = "extern:" + t
                if fid not in prog.funcs:
                    prog.funcs[fid] = Func(fid, t, t, "", None, defined=False)
                hit = [fid]
            tids.extend(hit)
        for fid in ids:
            by_caller.setdefault(fid, []).extend(tids)
    if externals != "all":
        taken = {t for t in taken if prog.funcs[t].defined or (
            externals == "bounded" and prog.funcs[t].bound_ext is not None)}
    taken_sorted = sorted(taken)
    virt = [fid for fid in taken_sorted if prog.funcs[fid].virtual]
    for f in prog.funcs.values():
        for s in f.sites:
            if not s.indirect:
                continue
            if f.id in by_caller:
                s.targets = sorted(set(by_caller[f.id]))
                s.resolved_by = "map"
            elif taken_sorted:
                if polymorphic_only.get(f.id) and virt:
                    s.targets, s.resolved_by = list(virt), "virtual"
                else:
                    s.targets, s.resolved_by = list(taken_sorted), "address-taken"
            else:
                s.targets, s.resolved_by = [], None


# ------------------------------------------------------------ analysis ----

class Analysis:
    """Back edges, checkpoints for one MaxPath, bounds, static bounds."""

    def __init__(self, prog, entries, red_zone=0):
        self.prog = prog
        self.f = prog.funcs
        self.red_zone = red_zone
        self.entries = entries
        self.order = sorted(self.f)          # deterministic iteration
        self._dfs()
        self._static_bounds()

    def weight(self, fid):
        """Frame of a defined function (leaves get the red zone); the trusted
        bound of an external; None for an unbounded external."""
        f = self.f[fid]
        if not f.defined:
            return f.bound_ext
        if not f.sites:
            return f.frame + self.red_zone
        return f.frame

    def roots(self):
        called = set()
        for f in self.f.values():
            for s in f.sites:
                called.update(t for t in s.targets if t != f.id)
        defaults = [fid for fid in self.order
                    if self.f[fid].defined and fid not in called]
        if "main" in self.f and "main" not in defaults:
            defaults.insert(0, "main")
        elif "main" in defaults:
            defaults.remove("main")
            defaults.insert(0, "main")
        return defaults

    def _dfs(self):
        """Iterative DFS: back edges (caller, callee) and the finish order."""
        self.default_roots = self.roots()
        starts = list(self.entries) + self.default_roots + self.order
        state = {}                           # fid -> 1 on stack, 2 finished
        self.back = set()
        self.post = []
        for r in starts:
            if r in state:
                continue
            state[r] = 1
            stack = [(r, self._succ(r))]
            while stack:
                node, it = stack[-1]
                nxt = None
                for t in it:
                    st = state.get(t)
                    if st is None:
                        nxt = t
                        break
                    if st == 1:
                        self.back.add((node, t))
                if nxt is None:
                    state[node] = 2
                    self.post.append(node)
                    stack.pop()
                else:
                    state[nxt] = 1
                    stack.append((nxt, self._succ(nxt)))

    def _succ(self, fid):
        return (t for s in self.f[fid].sites for t in s.targets)

    def fixed_kind(self, f, s):
        """The kind of a checkpoint a site needs whatever MaxPath is."""
        if s.indirect and not s.targets:
            return "indirect"
        if any((f.id, t) in self.back for t in s.targets):
            return "back-edge"
        if any(not self.f[t].defined and self.f[t].bound_ext is None
               for t in s.targets):
            return "indirect" if s.indirect else "external"
        if any(self.f[t].defined and self.f[t].dynamic for t in s.targets):
            return "dynamic"
        return None

    def place(self, max_path):
        """Returns (checkpoints: list of (caller, site index, kind), bound)."""
        bound, cps = {}, []
        for fid in self.post:
            f = self.f[fid]
            w = self.weight(fid)
            if not f.defined:
                bound[fid] = w
                continue
            best = 0
            for i, s in enumerate(f.sites):
                kind = self.fixed_kind(f, s)
                if kind is None:
                    need = max(bound[t] for t in s.targets)
                    if w + need > max_path:
                        kind = "maxpath"
                    else:
                        best = max(best, need)
                if kind is not None:
                    cps.append((fid, i, kind))
            bound[fid] = w + best
        return cps, bound

    def site_need(self, f, s, bound):
        """Bytes a checkpoint at the site must ensure; None: a large chunk."""
        if not s.targets:
            return None
        vals = []
        for t in s.targets:
            g = self.f[t]
            if (not g.defined and g.bound_ext is None) or (g.defined and g.dynamic):
                return None
            vals.append(bound[t])
        return max(vals)

    def _static_bounds(self):
        """Longest checkpoint-free path per function, or why there is none:
        Tarjan's SCCs come out callees first."""
        index, low, onstack, stack = {}, {}, set(), []
        self.sb, self.why = {}, {}
        counter = [0]
        comps = []
        for root in self.order:
            if root in index:
                continue
            work = [(root, iter(list(self._succ(root))))]
            index[root] = low[root] = counter[0]
            counter[0] += 1
            stack.append(root)
            onstack.add(root)
            while work:
                node, it = work[-1]
                advanced = False
                for t in it:
                    if t not in index:
                        index[t] = low[t] = counter[0]
                        counter[0] += 1
                        stack.append(t)
                        onstack.add(t)
                        work.append((t, iter(list(self._succ(t)))))
                        advanced = True
                        break
                    if t in onstack:
                        low[node] = min(low[node], index[t])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        x = stack.pop()
                        onstack.discard(x)
                        comp.append(x)
                        if x == node:
                            break
                    comps.append(comp)
        for comp in comps:
            self._bound_comp(comp)

    def _bound_comp(self, comp):
        if len(comp) > 1 or any(comp[0] in s.targets
                                for s in self.f[comp[0]].sites):
            members = sorted(comp)
            for fid in comp:
                self.sb[fid] = None
                self.why[fid] = ("recursion", members)
            return
        fid = comp[0]
        f = self.f[fid]
        if not f.defined:
            self.sb[fid] = f.bound_ext
            if f.bound_ext is None:
                self.why[fid] = ("external", fid)
            return
        if f.dynamic:
            self.sb[fid], self.why[fid] = None, ("dynamic", fid)
            return
        best = 0
        for s in f.sites:
            if not s.targets:
                self.sb[fid], self.why[fid] = None, ("indirect", fid, s.loc)
                return
            for t in s.targets:
                if self.sb[t] is None:
                    self.sb[fid], self.why[fid] = None, ("via", t)
                    return
                best = max(best, self.sb[t])
        self.sb[fid] = self.weight(fid) + best

    def explain(self, fid):
        """Why fid has no static bound: (reason, path of ids, detail)."""
        path = [fid]
        seen = {fid}
        why = self.why[fid]
        while why[0] == "via" and why[1] not in seen:
            path.append(why[1])
            seen.add(why[1])
            why = self.why[why[1]]
        return why, path


# -------------------------------------------------------------- output ----

def run_analysis(prog, an, max_path, min_chunk, disp):
    cps, bound = an.place(max_path)
    cp_rows = []
    counts = {k: 0 for k in KINDS}
    for fid, i, kind in cps:
        f = prog.funcs[fid]
        s = f.sites[i]
        need = an.site_need(f, s, bound)
        counts[kind] += 1
        callees = [disp[t] for t in s.targets] if s.targets else ["?"]
        cp_rows.append({
            "caller": disp[fid], "caller_id": fid,
            "callee": callees[0] if len(callees) == 1 else "|".join(callees),
            "callee_ids": list(s.targets),
            "indirect": s.indirect, "indirect_resolved_by": s.resolved_by,
            "site": s.loc, "kind": kind,
            "bytes": need,
            "chunk": None if need is None else max(need, min_chunk),
            "large_chunk": need is None,
        })
    return cps, bound, cp_rows, counts


def total_sites(prog):
    return sum(len(f.sites) for f in prog.funcs.values() if f.defined)


def sweep(an, prog, values):
    total = total_sites(prog)
    rows = []
    for mp in values:
        cps, _ = an.place(mp)
        by = {k: 0 for k in KINDS}
        for _, _, k in cps:
            by[k] += 1
        rows.append({"max_path": mp, "instrumented": len(cps),
                     "share": (len(cps) / total) if total else 0.0,
                     "by_kind": by, "call_sites": total})
    return rows


def asm_name(f):
    """The symbol of a function: its title without the unit qualifier (an
    assembler name has no ':') or an asm label's '*'."""
    return f.title.rsplit(":", 1)[-1].lstrip("*")


def checkpoint_functions(prog, cps):
    """The functions that need a split-stack prologue for the checkpoints
    cps (see the module comment): id -> set of reasons, 'callee' (a defined
    callee of a checkpoint) and/or 'caller' (calls an external or unknown
    function at a checkpoint)."""
    out = {}
    for fid, i, _ in cps:
        s = prog.funcs[fid].sites[i]
        if not s.targets:
            out.setdefault(fid, set()).add("caller")
        for t in s.targets:
            if prog.funcs[t].defined:
                out.setdefault(t, set()).add("callee")
            else:
                out.setdefault(fid, set()).add("caller")
    return out


def write_checkpoint_functions(path, prog, cps, max_path):
    need = checkpoint_functions(prog, cps)
    names = sorted({asm_name(prog.funcs[fid]) for fid in need})
    defined = sum(1 for f in prog.funcs.values() if f.defined)
    callee = sum(1 for r in need.values() if "callee" in r)
    caller = sum(1 for r in need.values() if "caller" in r)
    head = ["# stackcheck --checkpoint-functions: functions that keep their "
            "-fsplit-stack prologue",
            "# (gcc plugin weft_checkpoints: -fplugin-arg-weft_checkpoints-"
            "list=FILE)",
            "# MaxPath %d bytes; %d checkpoints; %d of %d functions: %d callees "
            "of checkpoints, %d callers of external or unknown functions"
            % (max_path, len(cps), len(need), defined, callee, caller)]
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(head + names) + "\n")
    except OSError as e:
        raise InputError("cannot write %s: %s" % (path, e.strerror))


# External functions a wrapper must not run on another chunk: they return
# twice or never (the chunk would be unlinked under a live setjmp buffer, or
# never unlinked), switch stacks themselves, have their own calling
# convention, or are part of the linked-stack machinery.
NO_WRAP = {
    "setjmp": "returns twice", "_setjmp": "returns twice",
    "__sigsetjmp": "returns twice", "sigsetjmp": "returns twice",
    "savectx": "returns twice", "vfork": "returns twice",
    "getcontext": "returns twice", "longjmp": "never returns",
    "_longjmp": "never returns", "siglongjmp": "never returns",
    "__longjmp_chk": "never returns", "setcontext": "switches stacks",
    "swapcontext": "switches stacks", "makecontext": "switches stacks",
    "__tls_get_addr": "has its own calling convention",
}
NO_WRAP_PREFIXES = ("__morestack", "__splitstack", "__wrap_", "__real_",
                    "__generic_morestack", "__stack_chk", "__cyg_profile",
                    "mcount", "_mcount", "__fentry__")


def wrap_externals(prog, cps):
    """The external functions with no trusted bound that checkpoints call
    (directly, or through a pointer that may reach them): name -> None when
    a wrapper can give them a large chunk, else why not."""
    out = {}
    for fid, i, _ in cps:
        for t in prog.funcs[fid].sites[i].targets:
            f = prog.funcs[t]
            if f.defined or f.bound_ext is not None:
                continue
            name = asm_name(f)
            why = NO_WRAP.get(name)
            if why is None and name.startswith(NO_WRAP_PREFIXES):
                why = "part of the linked-stack machinery or instrumentation"
            out[name] = why
    return out


def write_wrap_externals(path, prog, cps, chunk):
    wraps = wrap_externals(prog, cps)
    lines = ["# stackcheck --wrap-externals: external functions with no "
             "trusted bound, called at checkpoints,",
             "# to run on a chunk of %d bytes (tools/stackcheck/gen_wraps.py)"
             % chunk]
    lines += ["# not wrapped: %s (%s)" % (n, wraps[n])
              for n in sorted(wraps) if wraps[n]]
    lines += ["%s %d" % (n, chunk) for n in sorted(wraps) if not wraps[n]]
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as e:
        raise InputError("cannot write %s: %s" % (path, e.strerror))


def write_entry_stacks(path, prog, an, bound, max_path):
    """Per entry: its assembler name, the stack its first chunk must hold
    (bound: the longest path to a checkpoint or a leaf) and its static
    bound ('-' when it has none), for the weft_checkpoints plugin, which
    puts them in a table the runtime sizes first chunks from."""
    lines = ["# stackcheck --entry-stacks: NAME FIRST_CHUNK STATIC_BOUND|- "
             "(bytes; MaxPath %d)" % max_path,
             "# (gcc plugin weft_checkpoints: -fplugin-arg-weft_checkpoints-"
             "entries=FILE)"]
    seen = set()
    for fid in (an.entries or an.default_roots):
        name = asm_name(prog.funcs[fid])
        if name in seen:
            continue
        seen.add(name)
        sb = an.sb[fid]
        lines.append("%s %d %s" % (name, bound[fid], "-" if sb is None else sb))
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as e:
        raise InputError("cannot write %s: %s" % (path, e.strerror))


def build_report(prog, an, args, disp):
    cps, bound, cp_rows, counts = run_analysis(prog, an, args.max_path,
                                               args.min_chunk, disp)
    defined = [f for f in prog.funcs.values() if f.defined]
    externals = [f for f in prog.funcs.values() if not f.defined]
    total = total_sites(prog)
    entries = []
    for fid in (an.entries or an.default_roots):
        f = prog.funcs[fid]
        row = {"entry": disp[fid], "id": fid, "frame": f.frame,
               "first_chunk": bound[fid],
               "static_bound": an.sb[fid]}
        if an.sb[fid] is None:
            why, path = an.explain(fid)
            row["unbounded"] = _why_text(why, disp)
            row["reason"] = why[0]
            row["path"] = [disp[p] for p in path]
        entries.append(row)
    ext_rows = []
    ext_sites = {}
    for f in defined:
        for s in f.sites:
            for t in s.targets:
                if not prog.funcs[t].defined:
                    ext_sites[t] = ext_sites.get(t, 0) + 1
    for f in sorted(externals, key=lambda g: g.id):
        if f.id in ext_sites:
            ext_rows.append({"name": disp[f.id], "id": f.title,
                             "bound": f.bound_ext, "call_sites": ext_sites[f.id]})
    indirect_sites = [s for f in defined for s in f.sites if s.indirect]
    report = {
        "tool": "stackcheck",
        "max_path": args.max_path, "min_chunk": args.min_chunk,
        "red_zone": args.red_zone,
        "inputs": {"ci": [tu.path for tu in prog.tus], "dumps": args.dump_paths,
                   "bounds": args.bounds_used},
        "counts": {
            "functions": len(defined), "externals": len(ext_rows),
            "call_sites": total, "indirect_call_sites": len(indirect_sites),
            "indirect_resolved": sum(1 for s in indirect_sites if s.targets),
            "back_edges": len(an.back),
            "checkpoints": len(cps), "checkpoints_by_kind": counts,
            "share_instrumented": (len(cps) / total) if total else 0.0,
            "entries": len(entries),
            "entries_with_static_bound": sum(1 for e in entries
                                             if e["static_bound"] is not None),
        },
        "checkpoints": cp_rows,
        "functions": [
            {"function": disp[f.id], "id": f.id, "label": f.label,
             "location": f.loc, "frame": f.frame, "dynamic": f.dynamic,
             "bound": bound[f.id], "static_bound": an.sb[f.id]}
            for f in sorted(defined, key=lambda g: g.id)],
        "entries": entries,
        "externals": ext_rows,
    }
    if args.sweep:
        report["sweep"] = sweep(an, prog, args.sweep)
    return report


def _why_text(why, disp):
    if why[0] == "recursion":
        names = [disp[m] for m in why[1]]
        more = "" if len(names) <= 6 else " and %d more" % (len(names) - 6)
        return "recursion (%s%s)" % (", ".join(names[:6]), more)
    if why[0] == "external":
        return "calls %s, an external function with no trusted bound" % disp[why[1]]
    if why[0] == "indirect":
        return "an indirect call with unknown targets in %s (%s)" % (
            disp[why[1]], why[2] or "?")
    if why[0] == "dynamic":
        return "%s allocates an unbounded amount of stack (alloca/VLA)" % disp[why[1]]
    return str(why)


def _clip(text, width):
    return text if len(text) <= width else text[:width - 3] + "..."


def _fmt_bytes(b):
    return "large" if b is None else str(b)


def _table(rows, headers):
    w = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            w[i] = max(w[i], len(str(c)))
    out = ["  " + "  ".join(h.ljust(w[i]) for i, h in enumerate(headers))]
    for r in rows:
        out.append("  " + "  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
    return "\n".join(out)


def print_report(rep, limit, out):
    c = rep["counts"]
    p = lambda s="": print(s, file=out)
    p("stackcheck: %d functions, %d call sites (%d indirect, %d resolved), "
      "%d external functions called, %d back edges"
      % (c["functions"], c["call_sites"], c["indirect_call_sites"],
         c["indirect_resolved"], c["externals"], c["back_edges"]))
    p("MaxPath %d bytes, MinChunk %d bytes%s" % (
        rep["max_path"], rep["min_chunk"],
        ", red zone %d" % rep["red_zone"] if rep["red_zone"] else ""))
    by = c["checkpoints_by_kind"]
    p("checkpoints: %d of %d call sites (%.1f%%): %s" % (
        c["checkpoints"], c["call_sites"], 100 * c["share_instrumented"],
        ", ".join("%s %d" % (k, by[k]) for k in KINDS)))
    p()

    def clip(rows):
        return rows if not limit or len(rows) <= limit else rows[:limit]

    def more(rows, what):
        if limit and len(rows) > limit:
            p("  ... %d more %s (all in --json)" % (len(rows) - limit, what))

    cps = sorted(rep["checkpoints"], key=lambda r: (KINDS.index(r["kind"]),
                                                    r["caller"], r["site"] or ""))
    p("Checkpoints (call site -> bytes the callee needs until the next "
      "checkpoint; 'large': a large shared chunk):")
    if cps:
        p(_table([(r["kind"], _clip(r["caller"], 50), _clip(r["callee"], 60),
                   r["site"] or "", _fmt_bytes(r["bytes"])) for r in clip(cps)],
                 ("kind", "caller", "callee", "site", "bytes")))
        more(cps, "checkpoints")
    else:
        p("  none")
    p()
    ents = sorted(rep["entries"], key=lambda e: (e["static_bound"] is None,
                                                 e["entry"]))
    p("Entries (first chunk = stack up to the first checkpoint; a static "
      "bound is the whole stack the thread can ever use):")
    p(_table([(_clip(e["entry"], 60), e["first_chunk"],
               e["static_bound"] if e["static_bound"] is not None
               else "unbounded: " + e["unbounded"]) for e in clip(ents)],
             ("entry", "first chunk", "static bound")))
    more(ents, "entries")
    unb = [e for e in rep["externals"] if e["bound"] is None]
    if unb:
        p()
        p("External functions without a trusted bound (add them to a --bounds "
          "file to make their calls ordinary leaves):")
        unb.sort(key=lambda e: (-e["call_sites"], e["name"]))
        p(_table([(_clip(e["name"], 60), e["call_sites"]) for e in clip(unb)],
                 ("function", "call sites")))
        more(unb, "externals")
    if "sweep" in rep:
        p()
        p("Sweep (Capriccio Fig. 7): call sites instrumented per MaxPath")
        p(_table([(r["max_path"], r["instrumented"], "%.1f%%" % (100 * r["share"]),
                   r["by_kind"]["back-edge"], r["by_kind"]["maxpath"],
                   r["by_kind"]["external"] + r["by_kind"]["indirect"]
                   + r["by_kind"]["dynamic"])
                  for r in rep["sweep"]],
                 ("MaxPath", "instrumented", "share", "back-edge", "maxpath",
                  "ext/ind/dyn")))


# ---------------------------------------------------------------- main ----

def default_bounds_file():
    here = os.path.dirname(os.path.realpath(__file__))
    for cand in (os.path.join(here, "libc.bounds"),
                 os.path.join(here, os.pardir, "share", "weft", "stackcheck",
                              "libc.bounds")):
        if os.path.isfile(cand):
            return os.path.normpath(cand)
    return None


def parse_sweep(text):
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected a comma-separated list of "
                                         "byte counts, e.g. 512,1024,2048")
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError("expected positive byte counts")
    return sorted(set(vals))


def positive(text):
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a byte count" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return v


def nonneg(text):
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a byte count" % text)
    if v < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return v


def make_parser():
    p = argparse.ArgumentParser(
        prog="stackcheck",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Place linked-stack checkpoints on a program's call graph "
                    "(Capriccio, SOSP'03, section 3).",
        epilog="""inputs:
  Compile every unit of the program with gcc -fcallgraph-info=su (it writes
  OBJ.ci beside each object) and pass the .ci files, or directories holding
  them. Add -fdump-ipa-cgraph and pass the *.cgraph dumps too (directories
  are searched for both) to resolve indirect calls to address-taken functions.

output:
  A report on stdout; --json FILE for the data (checkpoints, per-function
  bounds, per-entry static bounds, counts, sweep); --checkpoint-functions
  FILE for the weft_checkpoints gcc plugin (the functions that keep their
  -fsplit-stack prologue).

exit status: 0 done, 1 bad input, 2 usage, 3 internal error.""")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help=".ci files, *.cgraph dumps, or directories")
    p.add_argument("--max-path", type=positive, default=2048, metavar="BYTES",
                   help="longest stack between checkpoints (default 2048, the "
                        "paper's choice for Apache)")
    p.add_argument("--min-chunk", type=positive, default=4096, metavar="BYTES",
                   help="smallest stack chunk a checkpoint links; reported as "
                        "each checkpoint's chunk (default 4096)")
    p.add_argument("--entry", action="append", default=[], metavar="NAME",
                   help="a thread entry (repeatable or comma-separated); "
                        "default: every function with no callers, and main. "
                        "Entries start the depth-first search and are the "
                        "ones reported; checkpoints are placed everywhere")
    p.add_argument("--bounds", action="append", default=[], metavar="FILE",
                   help="trusted stack bounds of external functions, 'NAME "
                        "BYTES' per line (repeatable; later files win)")
    p.add_argument("--no-default-bounds", action="store_true",
                   help="do not load the shipped libc.bounds")
    p.add_argument("--indirect", action="append", default=[],
                   metavar="CALLER=T1,T2",
                   help="the targets of CALLER's indirect calls (repeatable)")
    p.add_argument("--indirect-map", action="append", default=[],
                   metavar="FILE",
                   help="'CALLER: T1 T2 ...' per line; like --indirect")
    p.add_argument("--indirect-externals", choices=("all", "bounded", "none"),
                   default="all",
                   help="which external functions whose address is taken an "
                        "indirect call may reach: all (default, sound), only "
                        "those with a trusted bound, or none (unsound: for "
                        "externals the program only passes to a library, such "
                        "as a pthread_once routine)")
    p.add_argument("--red-zone", type=nonneg, default=0, metavar="BYTES",
                   help="add to every leaf function's frame (x86-64 leaves "
                        "may use 128 bytes below the stack pointer that gcc "
                        "does not report; or build with -mno-red-zone)")
    p.add_argument("--sweep", type=parse_sweep, metavar="LIST",
                   help="instrumented call sites for each MaxPath in LIST, "
                        "e.g. 512,1024,2048,4096,8192,16384 (Capriccio Fig. 7)")
    p.add_argument("--json", metavar="FILE",
                   help="write the results as JSON ('-': stdout, no report)")
    p.add_argument("--checkpoint-functions", metavar="FILE",
                   help="write the assembler names of the functions that need "
                        "a split-stack prologue check (the callees of "
                        "checkpoints, and the callers of external or unknown "
                        "functions at checkpoints), for the weft_checkpoints "
                        "gcc plugin")
    p.add_argument("--wrap-externals", metavar="FILE",
                   help="write the external functions with no trusted bound "
                        "that checkpoints call, one 'NAME BYTES' per line, "
                        "for wrappers that run them on a chunk of "
                        "--external-chunk bytes (tools/stackcheck/gen_wraps.py)")
    p.add_argument("--external-chunk", type=positive, default=16384,
                   metavar="BYTES",
                   help="stack for an external function with no trusted "
                        "bound, with --wrap-externals (default 16384)")
    p.add_argument("--entry-stacks", metavar="FILE",
                   help="write, per entry, its assembler name, the stack its "
                        "first chunk must hold and its static bound ('-' if "
                        "none), for the weft_checkpoints gcc plugin")
    p.add_argument("--list", type=nonneg, default=40, metavar="N",
                   help="rows per table in the report (0: all; default 40)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no report on stdout")
    return p


def gather(inputs):
    cis, dumps = [], []
    for path in inputs:
        if os.path.isdir(path):
            for dirpath, dirnames, filenames in os.walk(path):
                # CMake's compiler-identification probes are not the program
                dirnames[:] = sorted(d for d in dirnames
                                     if not d.startswith("CompilerId"))
                for fn in sorted(filenames):
                    full = os.path.join(dirpath, fn)
                    if fn.endswith(".ci"):
                        cis.append(full)
                    elif fn.endswith(".cgraph"):
                        dumps.append(full)
        elif not os.path.exists(path):
            raise InputError("%s: no such file or directory" % path)
        elif path.endswith(".cgraph"):
            dumps.append(path)
        else:
            cis.append(path)
    if not cis:
        raise InputError("no .ci files among the inputs (compile with gcc "
                         "-fcallgraph-info=su)")
    return cis, dumps


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="strict") as fh:
            return fh.read()
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e))
    except UnicodeDecodeError:
        raise InputError("%s: not a text file (expected a gcc .ci graph)" % path)


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    explicit = []
    for spec in args.indirect:
        if "=" not in spec:
            raise UsageError("--indirect %r: expected CALLER=TARGET[,TARGET...]"
                             % spec)
        caller, rest = spec.split("=", 1)
        targets = [t for t in rest.split(",") if t.strip()]
        if not caller.strip() or not targets:
            raise UsageError("--indirect %r: expected CALLER=TARGET[,TARGET...]"
                             % spec)
        explicit.append((caller.strip(), [t.strip() for t in targets],
                         "--indirect " + spec))
    for path in args.indirect_map:
        explicit.extend(load_indirect_map(path))

    cis, dump_paths = gather(args.inputs)
    prog = Program()
    for path in cis:
        prog.add_tu(path, read_text(path))
    prog.link()
    if prog.duplicates:
        names = sorted({d[0] for d in prog.duplicates})
        warn("%d functions are defined in more than one unit (merged: the first "
             "unit's calls, the largest frame): %s%s" % (len(names), ", ".join(names[:5]),
                                    " ..." if len(names) > 5 else ""))

    bounds, used = [], []
    if not args.no_default_bounds:
        d = default_bounds_file()
        if d is None:
            warn("the default libc.bounds was not found; externals are "
                 "unbounded unless --bounds says otherwise")
        else:
            bounds += load_bounds(d)
            used.append(d)
    for path in args.bounds:
        bounds += load_bounds(path)
        used.append(path)
    args.bounds_used = used
    args.dump_paths = dump_paths

    dumps = [(p, parse_cgraph_dump(p, read_text(p))) for p in dump_paths]
    taken, poly = apply_dumps(prog, dumps) if dumps else (set(), {})
    apply_bounds(prog, bounds)
    resolve_indirect(prog, explicit, taken, poly, args.indirect_externals)
    apply_bounds(prog, bounds)       # externals added by dumps or the map

    entries = []
    for spec in args.entry:
        for name in (n.strip() for n in spec.split(",")):
            if not name:
                continue
            ids = prog.lookup(name, defined_only=True)
            if not ids:
                raise InputError("--entry %s: no such function in the .ci files"
                                 % name)
            if len(ids) > 1:
                raise InputError("--entry %s is ambiguous: %s" % (
                    name, ", ".join(sorted(ids)[:8])))
            if ids[0] not in entries:
                entries.append(ids[0])

    an = Analysis(prog, entries, args.red_zone)
    disp = prog.display()
    rep = build_report(prog, an, args, disp)
    if args.json:
        text = json.dumps(rep, indent=1, sort_keys=False) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            try:
                with open(args.json, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as e:
                raise InputError("cannot write %s: %s" % (args.json, e.strerror))
    if args.checkpoint_functions or args.wrap_externals or args.entry_stacks:
        cps, bound = an.place(args.max_path)
        if args.entry_stacks:
            write_entry_stacks(args.entry_stacks, prog, an, bound,
                               args.max_path)
        if args.checkpoint_functions:
            write_checkpoint_functions(args.checkpoint_functions, prog, cps,
                                       args.max_path)
        if args.wrap_externals:
            write_wrap_externals(args.wrap_externals, prog, cps,
                                 args.external_chunk)
    if not args.quiet and args.json != "-":
        print_report(rep, args.list, sys.stdout)
    return 0


def entry_point():
    try:
        code = main()
        sys.stdout.flush()
    except InputError as e:
        print("stackcheck: error: %s" % e, file=sys.stderr)
        code = 1
    except UsageError as e:
        print("stackcheck: usage error: %s" % e, file=sys.stderr)
        code = 2
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    except KeyboardInterrupt:
        code = 130
    except SystemExit as e:            # argparse: 2 on usage errors
        code = e.code if isinstance(e.code, int) else 2
    except Exception as e:             # never a traceback
        print("stackcheck: internal error: %s: %s (please report it with the "
              "inputs)" % (type(e).__name__, e), file=sys.stderr)
        code = 3
    sys.exit(code)


if __name__ == "__main__":
    entry_point()
