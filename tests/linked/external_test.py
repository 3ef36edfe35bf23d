#!/usr/bin/env python3
"""An external function with no trusted bound on a linked stack (CTest
LinkedStacks.UnboundedExternal*): with the wrappers gcc_wraps generates from
stackcheck's analysis the call gets a chunk with room; without them the same
program overruns its chunk and weft says so, naming the thread."""
import argparse
import re
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--expect", choices=("ok", "overflow"), required=True)
    args = p.parse_args()
    res = subprocess.run([args.target], capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    if args.expect == "ok":
        m = re.search(r"^ok: 8 of 8 results right, (\d+) chunks linked$", res.stdout, re.M)
        if res.returncode != 0 or not m or int(m.group(1)) < 1:
            print("expected 'ok' with chunks linked and exit 0, got %d:\n%s" % (res.returncode, out))
            return 1
    else:
        if res.returncode == 0 or "external-caller" not in res.stderr or "stack" not in res.stderr:
            print("expected a stack overflow report naming 'external-caller' and a failed exit, got %d:\n%s"
                  % (res.returncode, out))
            return 1
    print(out, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
