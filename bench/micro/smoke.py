#!/usr/bin/env python3
"""Smoke test: each core benchmark binary runs a tiny configuration and
prints well-formed JSON records (not a speed check). A binary runs the
benchmarks its --list names (Boost.Context has only two); each must be one
this script knows, and a name it does not list must be refused.

usage: smoke.py BENCH_BINARY SYSTEM_ID
"""
import json
import subprocess
import sys

BENCHES = {
    "create_join": ("table1.create_join", "ns"),
    "switch": ("table1.switch", "ns"),
    "cond_pingpong": ("table1.cond_pingpong", "ns"),
    "mutex_uncontended": ("table1.mutex_uncontended", "ns"),
    "memory_idle": ("memory.idle_thread", "bytes"),
}


def main():
    binary, system = sys.argv[1], sys.argv[2]
    listed = subprocess.run([binary, "--list"], capture_output=True, text=True, timeout=30)
    names = listed.stdout.split()
    if listed.returncode != 0 or not names:
        sys.exit(f"{binary} --list: exit {listed.returncode}, names {names!r}")
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        sys.exit(f"{binary} --list names benchmarks this script does not know: {unknown}")
    for name in BENCHES:
        if name in names:
            continue
        out = subprocess.run([binary, "--bench", name, "--json"], capture_output=True, text=True, timeout=30)
        if out.returncode != 2 or out.stdout.strip():
            sys.exit(f"{name} is not listed, so it must be refused (exit 2, no record): exit {out.returncode}")
    for name in names:
        bench_id, unit = BENCHES[name]
        args = [binary, "--bench", name, "--json"]
        args += ["--threads", "200"] if name == "memory_idle" else ["--iters", "2000"]
        out = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            sys.exit(f"{' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
        records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        if len(records) != 1:
            sys.exit(f"{name}: expected one JSON record, got {len(records)}: {out.stdout!r}")
        r = records[0]
        for key, want in (("benchmark", bench_id), ("system", system), ("unit", unit)):
            if r.get(key) != want:
                sys.exit(f"{name}: {key} is {r.get(key)!r}, expected {want!r}")
        if not isinstance(r.get("params"), dict):
            sys.exit(f"{name}: params missing or not an object: {r}")
        value = r.get("value")
        if not isinstance(value, (int, float)) or not value > 0:
            sys.exit(f"{name}: value must be a positive number: {r}")
        print(f"{system} {bench_id}: {value} {unit}")


if __name__ == "__main__":
    main()
