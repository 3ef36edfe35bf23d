#!/usr/bin/env python3
"""Smoke test: a pipetest binary passes a few thousand tokens around rings of
8 and 64 pipes, every token arrives intact (the binary checks; exit 0 and
"verified": true), and the record it prints is well formed. Not a speed
check (pipetest.py measures).

usage: pipetest_smoke.py BINARY SYSTEM_ID [EXTRA ARGS...]
  e.g. pipetest_smoke.py build/bench/weft-pipetest weft-uring --io uring
Exit 77 (ctest SKIP_RETURN_CODE) when a weft backend was asked for and weft
ran another one (io_uring refused by the kernel): skipped, not passed.
"""
import json
import subprocess
import sys

POINTS = ((8, 3000), (64, 5000))  # (pipes, tokens): well under a second each
TIMEOUT_S = 6                     # the binary's own watchdog; two points stay < 20 s


def in_flight(pipes):
    return pipes // 4 if pipes < 128 else 128


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, system, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    for pipes, tokens in POINTS:
        args = [binary, "--pipes", str(pipes), "--tokens", str(tokens), "--timeout", str(TIMEOUT_S), "--json"] + extra
        try:
            out = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S + 3)
        except subprocess.TimeoutExpired:
            sys.exit(f"{' '.join(args)}: still running after {TIMEOUT_S + 3} s (its watchdog did not fire)")
        if out.returncode != 0:
            sys.exit(f"{' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
        records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        if len(records) != 1:
            sys.exit(f"pipes={pipes}: expected one JSON record, got {len(records)}: {out.stdout!r}")
        r = records[0]
        if r.get("system") != system and system.startswith("weft-") and str(r.get("system", "")).startswith("weft-"):
            print(f"skipped: asked for {system}, weft ran {r.get('system')} "
                  f"(the kernel refused the backend): {out.stderr.strip()}")
            sys.exit(77)
        for key, want in (("benchmark", "fig2.pipe_tokens"), ("system", system), ("unit", "tokens/s"),
                          ("verified", True)):
            if r.get(key) != want:
                sys.exit(f"pipes={pipes}: {key} is {r.get(key)!r}, expected {want!r}: {r}")
        params = r.get("params")
        if not isinstance(params, dict):
            sys.exit(f"pipes={pipes}: params missing or not an object: {r}")
        for key, want in (("pipes", pipes), ("tokens", tokens), ("in_flight", in_flight(pipes)), ("token_bytes", 12)):
            if params.get(key) != want:
                sys.exit(f"pipes={pipes}: params.{key} is {params.get(key)!r}, expected {want!r}: {r}")
        for key in ("value", "seconds"):
            v = r.get(key)
            if not isinstance(v, (int, float)) or not v > 0:
                sys.exit(f"pipes={pipes}: {key} must be a positive number: {r}")
        print(f"{system} fig2.pipe_tokens pipes={pipes} tokens={tokens}: {r['value']:.0f} tokens/s, verified")


if __name__ == "__main__":
    main()
