#!/usr/bin/env python3
"""Smoke test: each core benchmark binary runs a tiny configuration and
prints well-formed JSON records (not a speed check). A binary runs the
benchmarks its --list names (Boost.Context has only two); each must be one
this script knows, and a name it does not list must be refused.

Every record carries params.vprocs, the --vprocs it ran with (1 unless
asked). A binary with several kernel threads (all but State Threads and
Boost.Context, which must refuse --vprocs 2) also runs producer_consumer and
fork_join with --vprocs 2, as suite.py's smp section does. fork_join's
record must say the tree it ran (n, threads = 2 fib(n+1) - 1, result =
fib(n), trees). `smoke.py --self-test` checks that malformed records are
caught.

The disk benchmarks read a 1 MiB scratch file (O_DIRECT) and a 256 KiB
cached one, made in a temporary directory; where the file system refuses
O_DIRECT the binary exits 77 and that benchmark is reported skipped.

usage: smoke.py BENCH_BINARY SYSTEM_ID
       smoke.py --self-test
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
    "fork_join": ("fork_join.fib_tree", "ns"),
}
SKIP = 77  # BENCH_EXIT_SKIP: the kernel refused (O_DIRECT)
SINGLE_CPU = {"st", "boost-context"}  # must refuse --vprocs 2
SMP_BENCHES = ["producer_consumer", "fork_join"]  # run again with --vprocs 2
FORK_JOIN_ITERS = 3


def tiny_args(name, tmp):
    """A configuration that runs in well under a second."""
    if name == "memory_idle":
        return ["--threads", "200"]
    if name == "producer_consumer":
        return ["--threads", "8", "--min-time", "0.05"]
    if name == "fork_join":  # fib(9): 109 threads per tree
        return ["--threads", "100", "--iters", str(FORK_JOIN_ITERS)]
    if name == "odirect_read":
        return ["--threads", "4", "--min-time", "0.05", "--file", os.path.join(tmp, "direct.dat")]
    if name == "cache_miss_read":
        return ["--threads", "16", "--min-time", "0.05", "--miss-rate", "0.5",
                "--file", os.path.join(tmp, "direct.dat"), "--hit-file", os.path.join(tmp, "cached.dat")]
    return ["--iters", "2000"]


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def check_record(name, r, system, vprocs):
    """Why record r of benchmark `name` (run with --vprocs vprocs) is
    malformed, or None."""
    if not isinstance(r, dict):
        return f"{name}: a record must be a JSON object: {r!r}"
    bench_id, unit = BENCHES[name]
    for key, want in (("benchmark", bench_id), ("system", system), ("unit", unit)):
        if r.get(key) != want:
            return f"{name}: {key} is {r.get(key)!r}, expected {want!r}"
    p = r.get("params")
    if not isinstance(p, dict):
        return f"{name}: params missing or not an object: {r}"
    value = r.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return f"{name}: value must be a positive number: {r}"
    if p.get("vprocs") != vprocs or isinstance(p.get("vprocs"), bool):
        return f"{name}: params.vprocs should be {vprocs}: {p}"
    if name == "producer_consumer" and p.get("threads") != 8:
        return f"{name}: params.threads should be 8: {r}"
    if name == "cache_miss_read":
        if p.get("miss_rate") != 0.5 or not 0.2 <= p.get("measured_miss_rate", -1) <= 0.8:
            return f"{name}: miss_rate 0.5 asked, params say {p}"
    if name == "fork_join":
        n = p.get("n")
        if not isinstance(n, int) or n != 9:
            return f"{name}: --threads 100 is the tree of fib(9), params.n says {n!r}: {p}"
        if p.get("threads") != 2 * fib(n + 1) - 1 or p.get("result") != fib(n):
            return f"{name}: fib({n}) has {2 * fib(n + 1) - 1} threads and result {fib(n)}: {p}"
        if p.get("trees") != FORK_JOIN_ITERS or r.get("iterations") != FORK_JOIN_ITERS * p["threads"]:
            return f"{name}: --iters {FORK_JOIN_ITERS}: {FORK_JOIN_ITERS} trees timed: {r}"
        tps = p.get("threads_per_s")
        if not isinstance(tps, (int, float)) or abs(tps * value / 1e9 - 1) > 0.01:
            return f"{name}: threads_per_s should be 1e9 / value (ns per thread): {r}"
    return None


def self_test():
    """check_record catches every kind of malformed record it is meant to."""
    good = {
        "producer_consumer": {"benchmark": "fig1.producer_consumer", "system": "weft", "unit": "msgs/s",
                              "value": 1e6, "params": {"threads": 8, "vprocs": 2}},
        "fork_join": {"benchmark": "fork_join.fib_tree", "system": "weft", "unit": "ns", "value": 50.0,
                      "iterations": 327, "params": {"n": 9, "threads": 109, "trees": 3, "result": 34,
                                                    "threads_per_s": 2e7, "vprocs": 2}},
    }
    bad = []
    for name, r in good.items():
        if check_record(name, r, "weft", 2):
            sys.exit(f"self-test: a good {name} record was refused: {check_record(name, r, 'weft', 2)}")

        def variant(change, params=False):
            v = json.loads(json.dumps(r))
            change(v["params"] if params else v)
            return v
        bad += [(name, variant(lambda p: p.pop("vprocs"), True), "no vprocs"),
                (name, variant(lambda p: p.update(vprocs=1), True), "vprocs 1, ran with 2"),
                (name, variant(lambda p: p.update(vprocs=True), True), "vprocs not a number"),
                (name, variant(lambda v: v.pop("params")), "no params"),
                (name, variant(lambda v: v.update(value=0)), "value 0"),
                (name, variant(lambda v: v.update(value="50")), "value a string"),
                (name, variant(lambda v: v.update(unit="s")), "wrong unit"),
                (name, variant(lambda v: v.update(benchmark="x")), "wrong id"),
                (name, [r], "not an object")]
    fj = good["fork_join"]
    for what, change in (("no n", lambda p: p.pop("n")), ("wrong result", lambda p: p.update(result=33)),
                         ("wrong threads", lambda p: p.update(threads=100)), ("wrong trees", lambda p: p.update(trees=1)),
                         ("threads_per_s off", lambda p: p.update(threads_per_s=1e6))):
        v = json.loads(json.dumps(fj))
        change(v["params"])
        bad.append(("fork_join", v, what))
    missed = [f"{name}: {what}" for name, r, what in bad if check_record(name, r, "weft", 2) is None]
    if missed:
        sys.exit("self-test: malformed records passed: " + "; ".join(missed))
    print(f"smoke self-test: {len(bad)} malformed records caught")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 3:
        sys.exit(__doc__)
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
    # --vprocs: a bad count is a usage error; a single-CPU system refuses 2.
    for n in ("0", "x"):
        out = subprocess.run([binary, "--bench", names[0], "--vprocs", n, "--json"], capture_output=True, text=True,
                             timeout=30)
        if out.returncode != 2 or out.stdout.strip():
            sys.exit(f"--vprocs {n} must be refused (exit 2, no record): exit {out.returncode}")
    if system in SINGLE_CPU:
        out = subprocess.run([binary, "--bench", names[0], "--vprocs", "2", "--json"], capture_output=True,
                             text=True, timeout=30)
        if out.returncode != 2 or out.stdout.strip() or "--vprocs" not in out.stderr:
            sys.exit(f"{system} runs on one kernel thread: --vprocs 2 must be refused naming --vprocs: "
                     f"exit {out.returncode}")
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
    runs = [(name, 1) for name in names]
    if system not in SINGLE_CPU:
        runs += [(name, 2) for name in SMP_BENCHES if name in names]
    for name, vprocs in runs:
        bench_id, unit = BENCHES[name]
        args = [binary, "--bench", name, "--json"] + tiny_args(name, tmp)
        if vprocs != 1:
            args += ["--vprocs", str(vprocs)]
        out = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if out.returncode == SKIP and name in ("odirect_read", "cache_miss_read"):
            print(f"{system} {bench_id}: skipped by the binary: {out.stderr.strip()}")
            continue
        if out.returncode != 0:
            sys.exit(f"{' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
        records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        if len(records) != 1:
            sys.exit(f"{name}: expected one JSON record, got {len(records)}: {out.stdout!r}")
        why = check_record(name, records[0], system, vprocs)
        if why:
            sys.exit(f"{' '.join(args)}: {why}")
        print(f"{system} {bench_id} vprocs={vprocs}: {records[0]['value']} {unit}")


if __name__ == "__main__":
    main()
