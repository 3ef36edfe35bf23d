#!/usr/bin/env python3
"""Tests of the weft_checkpoints gcc plugin (tools/stackcheck/plugin).

gcc -fsplit-stack gives every function a prologue that compares the stack
pointer with the chunk's limit and calls __morestack when it is short; the
plugin marks every function not in its list no_split_stack, which leaves
that prologue out. So, in the object file, the functions with a relocation
against __morestack are the ones that kept their prologue: these tests
compile fixtures/plugin.c at -O2 -fsplit-stack and read the relocations
(objdump -dr). One exception is by design: a variadic function keeps its
prologue (gcc 12 reads va_start's stack arguments through a pointer the
prologue sets up, even in a no_split_stack function).

The end-to-end test takes the list from stackcheck --checkpoint-functions
over the fixture's own .ci (the same compiler and flags, so the same
functions, clones included).

Skipped, with exit status 77 (CTest SKIP_RETURN_CODE), when the plugin was
not built. By hand:
  tests/stackcheck/plugin_test.py --plugin BUILD/tools/stackcheck/plugin/weft_checkpoints.so
      [--stackcheck PATH] [--cc gcc] [-v] [PluginTest.method ...]
or with the plugin's path in WEFT_CHECKPOINT_PLUGIN.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "plugin.c")
ROOT = os.path.dirname(os.path.dirname(HERE))
OPTS = {
    "plugin": os.environ.get("WEFT_CHECKPOINT_PLUGIN", ""),
    "stackcheck": os.path.join(ROOT, "tools", "stackcheck", "stackcheck.py"),
    "cc": "gcc",
}
SKIP = 77
VARIADIC = {"sum"}          # fixtures/plugin.c's variadic functions
CFLAGS = ["-O2", "-fsplit-stack"]


def plugin_missing():
    """Why the tests cannot run, or None."""
    p = OPTS["plugin"]
    if not p:
        return ("no plugin given (--plugin PATH or WEFT_CHECKPOINT_PLUGIN): "
                "weft_checkpoints.so is built when gcc's plugin headers are "
                "installed (Debian: gcc-12-plugin-dev)")
    if not os.path.isfile(p):
        return "the plugin %s does not exist (not built?)" % p
    return None


_FUNC = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_MORESTACK = re.compile(r"\s__morestack(?:[-+]0x[0-9a-f]+)?$")


def functions_calling_morestack(obj):
    """(every function of obj, the functions with a __morestack relocation),
    from objdump -dr; a gcc hot/cold split part (f.cold) counts as f."""
    r = subprocess.run(["objdump", "-dr", obj], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("objdump -dr %s failed:\n%s" % (obj, r.stderr))
    funcs, calling, cur = set(), set(), None
    for line in r.stdout.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = re.sub(r"\.cold$", "", m.group("name"))
            funcs.add(cur)
        elif cur and _MORESTACK.search(line):
            calling.add(cur)
    return funcs, calling


class PluginTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = plugin_missing()
        if why:
            raise unittest.SkipTest(why)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="weft-plugin-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as fh:
            fh.write(text)
        return path

    def cc(self, *args, expect_ok=True):
        cmd = [OPTS["cc"]] + CFLAGS + list(args)
        r = subprocess.run(cmd, cwd=self.tmp, capture_output=True, text=True)
        if expect_ok:
            self.assertEqual(r.returncode, 0, "%s failed:\n%s"
                             % (" ".join(cmd), r.stderr))
        return r

    def compile_with(self, listfile, obj="plugin.o", *extra):
        """The fixture compiled with the plugin; returns the object's path."""
        out = os.path.join(self.tmp, obj)
        self.cc("-fplugin=" + OPTS["plugin"],
                "-fplugin-arg-weft_checkpoints-list=" + listfile,
                *extra, "-c", FIXTURE, "-o", out)
        return out

    # ------------------------------------------------------------------------

    def test_without_the_plugin_every_function_calls_morestack(self):
        """The baseline the others rely on: -fsplit-stack works here."""
        obj = os.path.join(self.tmp, "plain.o")
        self.cc("-c", FIXTURE, "-o", obj)
        funcs, calling = functions_calling_morestack(obj)
        self.assertGreaterEqual(funcs, {"main", "big", "leaf", "mid", "rec",
                                        "ext", "sum", "twice"})
        self.assertEqual(calling, funcs)

    def test_only_listed_functions_keep_the_prologue(self):
        lst = self.write("checkpoints.list",
                         "# a comment, then a blank line\n\n"
                         "big\n  rec  \n"
                         "ext   # trailing comment\n"
                         "scale.constprop.0\n"          # a clone, by its name
                         "not_in_this_unit\n")
        obj = self.compile_with(lst, "plugin.o",
                                "-fplugin-arg-weft_checkpoints-verbose")
        funcs, calling = functions_calling_morestack(obj)
        self.assertIn("scale.constprop.0", funcs,
                      "gcc no longer clones scale(): the fixture is void")
        self.assertEqual(calling, {"big", "rec", "ext", "scale.constprop.0"}
                         | VARIADIC)
        # the others are there, only without the check
        self.assertGreaterEqual(funcs - calling, {"main", "mid", "leaf",
                                                  "twice"})
        # gcc tells the linker (gold) that the object has no-split code
        r = subprocess.run(["objdump", "-h", obj], capture_output=True,
                           text=True)
        self.assertIn(".note.GNU-no-split-stack", r.stdout)

    def test_verbose_lists_what_it_kept(self):
        lst = self.write("checkpoints.list", "big\n")
        r = self.cc("-fplugin=" + OPTS["plugin"],
                    "-fplugin-arg-weft_checkpoints-list=" + lst,
                    "-fplugin-arg-weft_checkpoints-verbose",
                    "-c", FIXTURE, "-o", os.path.join(self.tmp, "v.o"))
        kept = sorted(l for l in r.stderr.splitlines()
                      if l.startswith("weft_checkpoints: kept"))
        self.assertEqual(kept, ["weft_checkpoints: kept big",
                                "weft_checkpoints: kept sum (variadic)"])

    def test_an_empty_list_removes_every_check_but_the_variadic(self):
        obj = self.compile_with(self.write("empty.list", "# nothing\n"))
        _, calling = functions_calling_morestack(obj)
        self.assertEqual(calling, VARIADIC)

    def test_missing_list_is_an_error_naming_the_file(self):
        missing = os.path.join(self.tmp, "no-such-checkpoints.list")
        obj = os.path.join(self.tmp, "x.o")
        r = self.cc("-fplugin=" + OPTS["plugin"],
                    "-fplugin-arg-weft_checkpoints-list=" + missing,
                    "-c", FIXTURE, "-o", obj, expect_ok=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(missing, r.stderr)
        self.assertIn("error", r.stderr)
        self.assertFalse(os.path.exists(obj))
        # no list at all, and an argument it does not know
        r = self.cc("-fplugin=" + OPTS["plugin"], "-c", FIXTURE, "-o", obj,
                    expect_ok=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("-fplugin-arg-weft_checkpoints-list=FILE", r.stderr)
        r = self.cc("-fplugin=" + OPTS["plugin"],
                    "-fplugin-arg-weft_checkpoints-list=" + missing,
                    "-fplugin-arg-weft_checkpoints-lsit=x",
                    "-c", FIXTURE, "-o", obj, expect_ok=False)
        self.assertNotEqual(r.returncode, 0)

    def test_entries_become_rows_of_the_entry_table(self):
        """Each listed function compiled gets a row {address, first chunk,
        static bound or 0} in the section weft_entry_stacks, a static one
        (scale.constprop.0, a clone) included; a malformed file is an error
        naming its line."""
        lst = self.write("checkpoints.list", "big\n")
        ents = self.write("entries", "# NAME FIRST STATIC\n"
                          "twice 24 24\nscale.constprop.0 48 -\n"
                          "not_in_this_unit 8 8\n")
        obj = self.compile_with(lst, "e.o", "-fplugin-arg-weft_checkpoints-entries=" + ents)
        r = subprocess.run(["objdump", "-r", "-j", "weft_entry_stacks", obj],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        targets = re.findall(r"^([0-9a-f]+) R_X86_64_64\s+(\S+)$", r.stdout, re.M)
        names = sorted(re.sub(r"\+0x[0-9a-f]+$", "", t) for _, t in targets)
        # a static function is referenced through its section symbol
        self.assertEqual(len(names), 2, r.stdout)
        self.assertIn("twice", names)
        r = subprocess.run(["objdump", "-s", "-j", "weft_entry_stacks", obj],
                           capture_output=True, text=True)
        data = "".join(l[6:41].replace(" ", "") for l in r.stdout.splitlines()
                       if re.match(r"^ [0-9a-f]{4} ", l))
        words = [bytes.fromhex(data[i:i + 8])[::-1].hex() for i in range(0, len(data), 8)]
        rows = sorted((int(words[i + 2], 16), int(words[i + 3], 16))
                      for i in range(0, len(words), 4))
        self.assertEqual(rows, [(24, 24), (48, 0)])

        bad = self.write("bad-entries", "twice 24 24\nscale x -\n")
        r = self.cc("-fplugin=" + OPTS["plugin"], "-fplugin-arg-weft_checkpoints-list=" + lst,
                    "-fplugin-arg-weft_checkpoints-entries=" + bad,
                    "-c", FIXTURE, "-o", os.path.join(self.tmp, "bad.o"), expect_ok=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(bad + ":2: expected", r.stderr)

    def test_end_to_end_with_stackcheck(self):
        """stackcheck's list over the fixture's .ci, fed to the plugin: the
        functions calling __morestack are exactly the list."""
        self.cc("-fcallgraph-info=su", "-c", FIXTURE,
                "-o", os.path.join(self.tmp, "plugin-ci.o"))
        ci = os.path.join(self.tmp, "plugin-ci.ci")
        lst = os.path.join(self.tmp, "checkpoint-functions.txt")
        r = subprocess.run([sys.executable, OPTS["stackcheck"], ci,
                            "--max-path", "512", "--checkpoint-functions",
                            lst, "-q"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(lst) as fh:
            names = {l.strip() for l in fh
                     if l.strip() and not l.startswith("#")}
        obj = self.compile_with(lst)
        funcs, calling = functions_calling_morestack(obj)
        self.assertEqual(calling, names | (VARIADIC & funcs))
        # not trivially so: some functions kept the check, some lost it
        # (at MaxPath 512 big's 1000-byte frame makes mid -> big and
        # big -> leaf checkpoints, so big and leaf are listed, mid not)
        self.assertGreaterEqual(names, {"big", "leaf", "rec", "ext"})
        self.assertTrue(funcs - calling, "every function kept its check")
        self.assertNotIn("mid", names)


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--plugin")
    ap.add_argument("--stackcheck")
    ap.add_argument("--cc")
    known, rest = ap.parse_known_args()
    for k in ("plugin", "stackcheck", "cc"):
        if getattr(known, k):
            OPTS[k] = getattr(known, k)
    why = plugin_missing()
    if why:
        print("plugin_test: skipped: " + why, file=sys.stderr)
    prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False)
    if not prog.result.wasSuccessful():
        sys.exit(1)
    sys.exit(SKIP if why else 0)


if __name__ == "__main__":
    main()
