#!/usr/bin/env python3
"""Next PC against call chains for the cohort policy (issue 12, StagedServer
§2.1): runs build/bench/weft-cohort-sites (see its source for the
workload) under FIFO and the cohort policy, grouping by the return address
of the blocking call (the paper's next PC) and by the blocking graph's call
chain, in one run; the median of --reps runs each, pinned to one CPU.

    python3 bench/stage/cohort_sites.py [--build build] [--out-dir results] [--reps 5]

Every configuration runs with the blocking graph on (WEFT_GRAPH=1), so that
its cost is the same in all and only the grouping differs: depth 1 is the
next PC, depth 2 the call chain (wait_event's caller). Writes
OUT/cohort_sites.json and OUT/cohort_sites.md.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS = [
    ("fifo", {"WEFT_POLICY": "fifo", "WEFT_GRAPH": "1", "WEFT_GRAPH_DEPTH": "1"}),
    ("cohort, next PC", {"WEFT_POLICY": "cohort", "WEFT_GRAPH": "1", "WEFT_GRAPH_DEPTH": "1"}),
    ("cohort, call chain", {"WEFT_POLICY": "cohort", "WEFT_GRAPH": "1", "WEFT_GRAPH_DEPTH": "2"}),
]


def run(binary, env, table_kb, rounds, cpu):
    e = dict(os.environ)
    e.update(env)
    cmd = ["taskset", "-c", str(cpu), binary, "--table-kb", str(table_kb), "--rounds", str(rounds), "--json"]
    out = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--out-dir", default="results")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--tables-kb", default="40,768", help="table sizes to try (default 40,768: one fits L1d / L2, two do not)")
    p.add_argument("--cpu", type=int, default=1)
    args = p.parse_args()
    binary = os.path.join(args.build, "bench", "weft-cohort-sites")
    if not os.access(binary, os.X_OK):
        sys.exit(f"cohort_sites: {binary} is not built (make build)")
    rows = []
    for kb in [int(x) for x in args.tables_kb.split(",")]:
        for name, env in CONFIGS:
            runs = [run(binary, env, kb, args.rounds, args.cpu) for _ in range(args.reps)]
            ns = statistics.median(r["ns_per_item"] for r in runs)
            rows.append({"table_kb": kb, "config": name, "env": env, "ns_per_item": ns,
                         "ns_runs": [r["ns_per_item"] for r in runs], "kind_switches": runs[0]["kind_switches"]})
            print(f"{kb:5d} KiB  {name:20s} {ns:8.1f} ns/item  {100 * runs[0]['kind_switches']:5.1f} % kind switches",
                  flush=True)
    for r in rows:
        base = next(x for x in rows if x["table_kb"] == r["table_kb"] and x["config"] == "fifo")
        r["vs_fifo"] = round(r["ns_per_item"] / base["ns_per_item"], 3)
    meta = {"command": "python3 bench/stage/cohort_sites.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "reps": args.reps, "rounds": args.rounds}
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "cohort_sites.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = ["# Cohort policy: next PC against call chains", "", f"`{meta['command']}` — {meta['date']}", "",
             "| tables | policy | ns per item | vs FIFO | kind switches |", "|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| 2 x {r['table_kb']} KiB | {r['config']} | {r['ns_per_item']:.0f} | {r['vs_fifo']} | "
                     f"{100 * r['kind_switches']:.1f} % |")
    with open(os.path.join(args.out_dir, "cohort_sites.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
