#!/usr/bin/env python3
"""First chunks sized by the analysis (CTest LinkedStacks.EntryStacks*):
with the entry table a statically bounded thread never links and a
recursive one links as it goes; without it the bounded thread's unchecked
frame overruns the default first chunk and weft reports it by name."""
import argparse
import re
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--expect", choices=("sized", "overflow"), required=True)
    args = p.parse_args()
    res = subprocess.run([args.target], capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    if args.expect == "sized":
        m = re.search(r"^bounded: 100 of 100 right, (\d+) links; deep: right, (\d+) links$", res.stdout, re.M)
        if res.returncode != 0 or not m or int(m.group(1)) != 0 or int(m.group(2)) < 10:
            print("expected 0 links for the bounded entry and >= 10 for the deep one, exit 0; got %d:\n%s"
                  % (res.returncode, out))
            return 1
    elif res.returncode == 0 or not re.search(r"stack overflow in weft thread \d+ bounded-entry", res.stderr):
        print("expected a stack overflow report naming 'bounded-entry' and a failed exit, got %d:\n%s"
              % (res.returncode, out))
        return 1
    print(out, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
