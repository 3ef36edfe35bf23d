#!/usr/bin/env python3
"""The same unmodified pthread binaries on NPTL and under weft-run, in one
run (issue 11's goal: weft-run >= 20x faster): `make bench-posix`.

Benchmarks (bench/posix/*.c, plain C + pthreads, built with -pthread only):
  cond_pingpong  two threads hand a token through a mutex and two condition
                 variables: ns per hand-off
  create_join    pthread_create + pthread_join, one thread after another:
                 ns per thread

Systems, interleaved, each run REPS times:
  nptl        the binary on glibc's NPTL, pinned to one CPU (taskset): its
              best case here (a hand-off between kernel threads on two CPUs
              costs a cross-CPU wake-up)
  nptl-2cpu   the binary on NPTL, free to use both CPUs: how it usually runs
  weft        `weft-run BINARY`, pinned to the same CPU (one vproc)

Every process reports its own figure (one JSON line); the median of the
repetitions is kept. Ratios are NPTL's median over weft's, and the goal is
judged against the better (smaller) of the two NPTL figures.

Writes OUT_DIR/posix_micro.json ({"run": ..., "records": [...],
"ratios": [...]}) and OUT_DIR/posix_micro.md. Python 3 standard library.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "micro"))
from benchlib import log, machine_line, pick_cpu, run_one  # noqa: E402

GOAL = 20.0
# Operations per run: enough for ~0.2-1 s on each system here.
WORK = {
    "cond_pingpong": {"nptl": 20000, "nptl-2cpu": 20000, "weft": 2000000},
    "create_join": {"nptl": 20000, "nptl-2cpu": 20000, "weft": 1000000},
}
QUICK_DIV = 4
UNIT = {"cond_pingpong": ("ns_per_handoff", "ns per hand-off"), "create_join": ("ns_per_thread", "ns per thread")}


def command(system, binary, n, cpu, weft_run):
    if system == "nptl":
        return ["taskset", "-c", str(cpu), binary, str(n)]
    if system == "nptl-2cpu":
        return [binary, str(n)]
    return ["taskset", "-c", str(cpu), weft_run, binary, str(n)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="CMake build directory (default: build)")
    p.add_argument("--out-dir", default="results", help="where the JSON and the table go (default: results)")
    p.add_argument("--reps", type=int, default=5, help="repetitions per point, >= 1 (default 5)")
    p.add_argument("--cpu", type=int, default=1, help="CPU to pin to (default 1)")
    p.add_argument("--quick", action="store_true", help="a quarter of the work per run, 3 repetitions")
    p.add_argument("--smoke", action="store_true",
                   help="for the tests: 1/100 of the work, one repetition, output checked (not a measurement)")
    args = p.parse_args()
    if args.reps < 1:
        p.error("--reps must be at least 1")
    reps = 1 if args.smoke else 3 if args.quick else args.reps
    div = 100 if args.smoke else QUICK_DIV if args.quick else 1
    weft_run = os.path.join(args.build, "posix", "weft-run")
    bins = {b: os.path.join(args.build, "bench", "posix", b) for b in WORK}
    missing = [x for x in [weft_run, *bins.values()] if not os.access(x, os.X_OK)]
    if missing:
        sys.exit(f"posix_bench: not built: {', '.join(missing)} (run `make build`)")
    cpu, note = pick_cpu(args.cpu)
    if note:
        log(note)

    values = {}  # (bench, system) -> [figure]
    systems = ["nptl", "nptl-2cpu", "weft"]
    t0 = time.monotonic()
    total = len(WORK) * len(systems) * reps
    done = 0
    for rep in range(reps):
        for bench in WORK:
            key, _ = UNIT[bench]
            for system in systems:
                n = WORK[bench][system] // div
                rec, why, secs = run_one(command(system, bins[bench], n, cpu, weft_run), timeout=120,
                                         check=lambda r: None if key in r else f"no {key} in its output")
                done += 1
                if rec is None:
                    sys.exit(f"posix_bench: {bench} on {system} failed: {why}")
                values.setdefault((bench, system), []).append(rec[key])
                log(f"[{done}/{total} {time.monotonic() - t0:.0f}s] {bench} {system} rep {rep + 1}: "
                    f"{rec[key]:.1f} {key} ({secs:.1f} s)")

    records, ratios = [], []
    for bench in WORK:
        key, unit = UNIT[bench]
        med = {}
        for system in systems:
            v = values[(bench, system)]
            med[system] = statistics.median(v)
            records.append({"benchmark": bench, "system": system, "unit": key, "median": med[system],
                            "min": min(v), "max": max(v), "repetitions": len(v), "values": v,
                            "ops_per_run": WORK[bench][system] // div})
        best_nptl = min(med["nptl"], med["nptl-2cpu"])
        ratios.append({"benchmark": bench, "unit": unit,
                       "nptl_over_weft": med["nptl"] / med["weft"],
                       "nptl_2cpu_over_weft": med["nptl-2cpu"] / med["weft"],
                       "best_nptl_over_weft": best_nptl / med["weft"],
                       "goal": GOAL, "met": best_nptl / med["weft"] >= GOAL})

    run = {"machine": machine_line(), "cpu": cpu, "reps": reps, "quick": args.quick, "smoke": args.smoke,
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(time.monotonic() - t0, 1),
           "command": " ".join(sys.argv)}
    os.makedirs(args.out_dir, exist_ok=True)
    jpath = os.path.join(args.out_dir, "posix_micro.json")
    with open(jpath, "w") as f:
        json.dump({"run": run, "records": records, "ratios": ratios}, f, indent=1)

    lines = ["# Unmodified pthread binaries: NPTL against weft-run", "",
             f"{run['machine']}; {run['date']}; {reps} repetitions (median); `{run['command']}`", "",
             "| benchmark | unit | NPTL (1 CPU) | NPTL (2 CPUs) | weft-run | best NPTL / weft | goal >= 20x |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in ratios:
        m = {x["system"]: x["median"] for x in records if x["benchmark"] == r["benchmark"]}
        lines.append(f"| {r['benchmark']} | {r['unit']} | {m['nptl']:,.0f} | {m['nptl-2cpu']:,.0f} | "
                     f"{m['weft']:,.1f} | {r['best_nptl_over_weft']:,.0f}x | {'met' if r['met'] else 'NOT met'} |")
    mpath = os.path.join(args.out_dir, "posix_micro.md")
    with open(mpath, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {jpath} and {mpath}")
    if args.smoke:  # the outputs are what they should be
        with open(jpath) as f:
            back = json.load(f)
        assert len(back["records"]) == len(WORK) * len(systems), back["records"]
        assert all(r["median"] > 0 for r in back["records"])
        assert all(r["nptl_over_weft"] > 0 for r in back["ratios"])
        print("smoke: ok")


if __name__ == "__main__":
    main()
