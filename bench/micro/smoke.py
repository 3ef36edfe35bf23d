#!/usr/bin/env python3
"""Smoke test: each core benchmark binary runs a tiny configuration and
prints well-formed JSON records (not a speed check). A binary runs the
benchmarks its --list names (Boost.Context has only two); each must be one
this script knows, and a name it does not list must be refused.

The disk benchmarks read a 1 MiB scratch file (O_DIRECT) and a 256 KiB
cached one, made in a temporary directory; where the file system refuses
O_DIRECT the binary exits 77 and that benchmark is reported skipped.

usage: smoke.py BENCH_BINARY SYSTEM_ID
"""
import json
import os
import subprocess
import sys
import tempfile

BENCHES = {
    "create_join": ("table1.create_join", "ns"),
    "switch": ("table1.switch", "ns"),
    "cond_pingpong": ("table1.cond_pingpong", "ns"),
    "mutex_uncontended": ("table1.mutex_uncontended", "ns"),
    "mutex_handoff": ("table1.mutex_handoff", "ns"),
    "memory_idle": ("memory.idle_thread", "bytes"),
    "producer_consumer": ("fig1.producer_consumer", "msgs/s"),
    "odirect_read": ("fig3.odirect_random_read", "reads/s"),
    "cache_miss_read": ("fig4.cache_miss_read", "reads/s"),
}
SKIP = 77  # BENCH_EXIT_SKIP: the kernel refused (O_DIRECT)


def tiny_args(name, tmp):
    """A configuration that runs in well under a second."""
    if name == "memory_idle":
        return ["--threads", "200"]
    if name == "producer_consumer":
        return ["--threads", "8", "--min-time", "0.05"]
    if name == "odirect_read":
        return ["--threads", "4", "--min-time", "0.05", "--file", os.path.join(tmp, "direct.dat")]
    if name == "cache_miss_read":
        return ["--threads", "16", "--min-time", "0.05", "--miss-rate", "0.5",
                "--file", os.path.join(tmp, "direct.dat"), "--hit-file", os.path.join(tmp, "cached.dat")]
    return ["--iters", "2000"]


def check_params(name, r):
    p = r["params"]
    if name == "producer_consumer" and p.get("threads") != 8:
        sys.exit(f"{name}: params.threads should be 8: {r}")
    if name == "cache_miss_read":
        if p.get("miss_rate") != 0.5 or not 0.2 <= p.get("measured_miss_rate", -1) <= 0.8:
            sys.exit(f"{name}: miss_rate 0.5 asked, params say {p}")


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
    # A disk benchmark without its file is a usage error, not a crash.
    if "odirect_read" in names:
        out = subprocess.run([binary, "--bench", "odirect_read", "--json"], capture_output=True, text=True, timeout=30)
        if out.returncode != 2 or "--file" not in out.stderr:
            sys.exit(f"odirect_read without --file must be refused naming --file: exit {out.returncode}")
    tmp = tempfile.mkdtemp(prefix="weft-smoke-")
    with open(os.path.join(tmp, "direct.dat"), "wb") as f:
        f.write(os.urandom(1 << 20))
    with open(os.path.join(tmp, "cached.dat"), "wb") as f:
        f.write(os.urandom(256 << 10))
    try:
        run_all(binary, system, names, tmp)
    finally:
        for fn in os.listdir(tmp):
            os.unlink(os.path.join(tmp, fn))
        os.rmdir(tmp)


def run_all(binary, system, names, tmp):
    for name in names:
        bench_id, unit = BENCHES[name]
        args = [binary, "--bench", name, "--json"] + tiny_args(name, tmp)
        out = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if out.returncode == SKIP and name in ("odirect_read", "cache_miss_read"):
            print(f"{system} {bench_id}: skipped by the binary: {out.stderr.strip()}")
            continue
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
        check_params(name, r)
        print(f"{system} {bench_id}: {value} {unit}")


if __name__ == "__main__":
    main()
