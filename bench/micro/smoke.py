#!/usr/bin/env python3
"""Smoke test: each core benchmark binary runs a tiny configuration and
prints well-formed JSON records (not a speed check).

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
    for name, (bench_id, unit) in BENCHES.items():
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
