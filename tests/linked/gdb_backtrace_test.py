#!/usr/bin/env python3
"""gdb walks a linked stack back across its chunks.

Runs tests/linked/gdb_target under gdb, stops in bottom() at the end of 40
recursions of 1 KiB frames (about 13 chunks), and checks that the
backtrace reaches the thread's entry with every recursion level in it:
__morestack's CFI is what lets an unwinder step from one chunk to the one
below. Exit 77 (skipped) without gdb.
"""
import argparse
import re
import shutil
import subprocess
import sys
import unittest

TARGET = None


class GdbBacktraceTest(unittest.TestCase):
    def test_backtrace_crosses_chunks_to_the_thread_entry(self):
        out = subprocess.run(
            ["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "break bottom",
             "-ex", "run", "-ex", "bt", "-ex", "continue", TARGET],
            capture_output=True, text=True, timeout=120).stdout
        frames = [l for l in out.splitlines() if re.match(r"#\d+ ", l)]
        self.assertTrue(frames, "no backtrace:\n" + out[-3000:])
        self.assertRegex(frames[0], r"\bbottom\b")
        recursions = [l for l in frames if re.search(r"\brecurse\b", l)]
        self.assertEqual(41, len(recursions), "recurse(40..0) expected:\n" + "\n".join(frames))
        self.assertTrue(any("linked_entry" in l for l in frames), "\n".join(frames))
        self.assertTrue(any("__morestack" in l for l in frames), "no chunk boundary crossed:\n" + "\n".join(frames))
        self.assertNotIn("corrupt stack", out)
        self.assertIn("links ", out, "the program did not finish:\n" + out[-2000:])


def main():
    global TARGET
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    args, rest = p.parse_known_args()
    TARGET = args.target
    if not shutil.which("gdb"):
        print("gdb not installed: skipped", file=sys.stderr)
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
