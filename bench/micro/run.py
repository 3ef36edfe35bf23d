#!/usr/bin/env python3
"""Run weft's core microbenchmarks against its peers and tabulate them.

Runs every benchmark of every system binary present in BUILD/bench
(weft-micro, st-micro, nptl-micro, boost-context-micro, boost-fiber-micro,
go-micro; each binary's --list says which benchmarks it has: Boost.Context,
a raw switch, has only create_join and switch), each process pinned to one CPU with
`taskset -c CPU`, REPS times (interleaving the systems), and writes:
  - OUT (default results/core.json): a list of records
      {"benchmark", "system", "params", "unit", "median", "min", "max",
       "repetitions", "values"}
  - the same path with .md: a Markdown table of the medians and the ratios
    weft/peer, plus the lead's goals and whether they are met;
and prints the table. A missing binary or a failed run is reported as
"skipped: <why>", never replaced by a number.

Python 3 standard library only. Usage:
  python3 bench/micro/run.py [--build DIR] [--out FILE] [--reps N] [--quick] [--cpu N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from benchlib import log, machine_line, pick_cpu, run_one

SYSTEMS = [("weft", "weft-micro"), ("st", "st-micro"), ("nptl", "nptl-micro"),
           ("boost-context", "boost-context-micro"), ("boost-fiber", "boost-fiber-micro"), ("go", "go-micro")]
PEERS = ["st", "nptl", "boost-context", "boost-fiber", "go"]
# What provides each peer, for the message when its binary is missing.
PROVIDER = {"st": "State Threads: libst-dev", "boost-context": "libboost-context-dev",
            "boost-fiber": "libboost-fiber-dev", "go": "the Go toolchain"}
TIMED = [  # (subcommand, benchmark id, what the number is)
    ("create_join", "table1.create_join", "ns per create + join"),
    ("switch", "table1.switch", "ns per switch (yield ping-pong)"),
    ("cond_pingpong", "table1.cond_pingpong", "ns per one-way hand-off"),
    ("mutex_uncontended", "table1.mutex_uncontended", "ns per lock + unlock"),
]
MEM_ID = "memory.idle_thread"
MEM_SMALL = 10_000       # every system
MEM_LARGE = 1_000_000    # weft, st and go; NPTL and Boost.Fiber are capped (below)
NPTL_MAX_THREADS = 10_000
# Boost.Fiber's stacks come from malloc, two touched pages each (~9 KB): 10^6
# of them would take ~9 GB of this shared machine's 24 GiB.
MAX_THREADS = {"nptl": NPTL_MAX_THREADS, "boost-fiber": 100_000}
PER_RUN = ("rss_before", "rss_after", "create_park_s", "teardown_s")  # vary per run: kept under "runs"
CPU_SHARE_OK = 0.9  # a timed run below this share of the CPU was disturbed...
# ...relative to the share a point gets on an idle machine, where that is not
# 1: an NPTL create+join leaves the CPU idle ~12% of the time by itself (the
# joiner sleeps while the kernel finishes the exiting thread).
CPU_SHARE_EXPECTED = {("nptl", "table1.create_join"): 0.88}
ATTEMPTS = 3        # runs of a disturbed point before its value is kept anyway

# The goals for weft: (benchmark, threads or None, absolute max or None, peer
# or None, max ratio to peer or None). The core issue's, then the
# microbenchmark issue's (ratios from one run).
GOALS = [
    ("table1.switch", None, 10.0, None, None),
    ("table1.cond_pingpong", None, 15.0, "st", 0.6),
    ("table1.create_join", None, 60.0, "st", 0.5),
    ("table1.mutex_uncontended", None, 5.0, None, None),
    (MEM_ID, MEM_LARGE, 4500.0, None, None),
    ("table1.switch", None, None, "st", 0.4),
    ("table1.switch", None, None, "boost-context", 1.5),
    ("table1.create_join", None, None, "st", 0.4),
    (MEM_ID, MEM_LARGE, None, "st", 1.0),
]


def fmt(v):
    if v is None:
        return "—"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory holding bench/*-micro (default: build)")
    ap.add_argument("--out", default="results/core.json", help="JSON output (default: results/core.json)")
    ap.add_argument("--md", default=None, help="Markdown output (default: OUT with .md)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per point (default 3, at least 3)")
    ap.add_argument("--quick", action="store_true", help="about a minute: 0.1 s per measurement, 10^6 memory once")
    ap.add_argument("--cpu", type=int, default=1, help="CPU to pin to with taskset (default 1)")
    ap.add_argument("--min-time", type=float, default=None, help="seconds per timed measurement (default 0.3, quick 0.1)")
    args = ap.parse_args()

    reps = max(3, args.reps)
    if args.reps < 3:
        log(f"run.py: --reps {args.reps} raised to 3 (at least 3 repetitions per point)")
    min_time = args.min_time or (0.1 if args.quick else 0.3)
    # 10^6 idle threads take ~10-20 s per run (creation faults in 4 GB, and
    # teardown): run that point once (--quick) or twice, not REPS times.
    large_reps = 1 if args.quick else min(reps, 2)

    if not shutil.which("taskset"):
        log("run.py: taskset not found (util-linux); cannot pin, giving up")
        return 1
    cpu, cpu_note = pick_cpu(args.cpu)
    bench_dir = os.path.join(args.build, "bench")

    header = [
        f"Every benchmark process pinned to one CPU: `taskset -c {cpu}`.",
        f"{reps} repetitions per point (separate processes, systems interleaved); "
        f"{min_time:g} s per timed measurement after a calibrating warm-up.",
        f"memory.idle_thread at {MEM_LARGE:,} threads: {large_reps} repetition(s) only (slow).",
        f"Machine: {machine_line()}.",
    ]
    if cpu_note:
        header.append(cpu_note)
    for h in header:
        log("run.py: " + h)

    systems, skipped = [], []
    for sysid, exe in SYSTEMS:
        path = os.path.join(bench_dir, exe)
        if os.access(path, os.X_OK):
            systems.append((sysid, path))
        else:
            why = f"{path} not found"
            if sysid in PROVIDER:
                why += f" ({PROVIDER[sysid]} missing when CMake ran?)"
            skipped.append(f"skipped: {sysid}: {why}")
            log("run.py: " + skipped[-1])
    if not any(s == "weft" for s, _ in systems):
        log(f"run.py: weft-micro not found in {bench_dir}: build first (cmake --build {args.build})")
        return 1

    # What each binary has (--list): Boost.Context only a switch and create_join.
    has = {}
    for sysid, path in systems:
        try:
            out = subprocess.run([path, "--list"], capture_output=True, text=True, timeout=30)
            has[sysid] = set(out.stdout.split()) if out.returncode == 0 else set()
        except (OSError, subprocess.TimeoutExpired):
            has[sysid] = set()

    # The plan: (label, system, path, extra args, reps, timeout)
    plan = []
    for sub, bid, _ in TIMED:
        for r in range(reps):
            for sysid, path in systems:
                if sub in has[sysid]:
                    plan.append(((bid, None), sysid, path, ["--bench", sub, "--min-time", f"{min_time:g}"], r, 120))
    for threads, nrep in ((MEM_SMALL, reps), (MEM_LARGE, large_reps)):
        for r in range(nrep):
            for sysid, path in systems:
                if "memory_idle" not in has[sysid] or threads > MAX_THREADS.get(sysid, threads):
                    continue
                plan.append(((MEM_ID, threads), sysid, path, ["--bench", "memory_idle", "--threads", str(threads)],
                             r, 600))
    for sysid, _ in systems:
        missing = [sub for sub, _, _ in TIMED if sub not in has[sysid]] + \
                  (["memory_idle"] if "memory_idle" not in has[sysid] else [])
        if missing:
            skipped.append(f"not applicable: {sysid}: {', '.join(missing)} (the binary does not have them)")
        if sysid in MAX_THREADS and sysid != "nptl" and "memory_idle" in has[sysid]:
            skipped.append(f"skipped: {sysid}: {MEM_ID} at {MEM_LARGE:,} threads (capped at "
                           f"{MAX_THREADS[sysid]:,}: its stacks would take too much of this machine's memory)")
    if any(s == "nptl" for s, _ in systems):
        try:
            with open("/proc/sys/kernel/pid_max") as f:
                pid_max = f.read().strip()
        except OSError:
            pid_max = "?"
        skipped.append(f"skipped: nptl: {MEM_ID} at {MEM_LARGE:,} threads (capped at {NPTL_MAX_THREADS:,}: "
                       f"kernel.pid_max is {pid_max})")

    results = {}  # (bid, threads, sysid) -> {"values": [...], "rec": first record, "fail": [...]}
    t_start = time.monotonic()
    for i, ((bid, threads), sysid, path, extra, r, timeout) in enumerate(plan, 1):
        cmd = ["taskset", "-c", str(cpu), path] + extra + ["--json"]
        label = f"{sysid} {bid}" + (f" threads={threads:,}" if threads else "")
        slot = results.setdefault((bid, threads, sysid),
                                  {"values": [], "rec": None, "fail": [], "params": [], "retries": 0, "disturbed": 0})
        # A timed run whose process got less than CPU_SHARE_OK of the CPU
        # (something else ran on it) is run again, up to ATTEMPTS times; the
        # last attempt is kept either way and counted as disturbed.
        share_ok = CPU_SHARE_OK * CPU_SHARE_EXPECTED.get((sysid, bid), 1.0)
        for attempt in range(1, ATTEMPTS + 1):
            rec, why, dt = run_one(cmd, timeout)
            share = rec.get("cpu_share") if rec else None
            if rec is None or share is None or share >= share_ok or attempt == ATTEMPTS:
                break
            slot["retries"] += 1
            log(f"[{i}/{len(plan)}] {label} rep {r + 1}: disturbed (cpu_share {share:.2f}: the CPU was shared), "
                f"running it again")
        if rec is None:
            slot["fail"].append(why)
            log(f"[{i}/{len(plan)}] {label} rep {r + 1}: FAILED ({why})")
            continue
        if share is not None and share < share_ok:
            slot["disturbed"] += 1
        slot["values"].append(float(rec["value"]))
        slot["params"].append(rec.get("params", {}))
        slot["rec"] = slot["rec"] or rec
        log(f"[{i}/{len(plan)}] {label} rep {r + 1}: {rec['value']:.2f} {rec['unit']}"
            + (f" cpu_share {share:.2f}" if share is not None else "")
            + f" ({dt:.1f} s, {time.monotonic() - t_start:.0f} s so far)")
    total = time.monotonic() - t_start

    # ---- records ----
    records, disturbed = [], []
    for (bid, threads, sysid), slot in results.items():
        if not slot["values"]:
            skipped.append(f"skipped: {sysid}: {bid}" + (f" threads={threads:,}" if threads else "") +
                           f": every run failed ({slot['fail'][0]})")
            continue
        params = {k: v for k, v in slot["params"][0].items() if k not in PER_RUN}
        if threads:
            created = [p.get("threads") for p in slot["params"]]
            params["threads"] = min(created)
            params["requested"] = threads
        vals = slot["values"]
        rec = {
            "benchmark": bid,
            "system": sysid,
            "params": params,
            "unit": slot["rec"]["unit"],
            "median": statistics.median(vals),
            "min": min(vals),
            "max": max(vals),
            "repetitions": len(vals),
            "values": vals,
        }
        per_run = [{k: p[k] for k in PER_RUN if k in p} for p in slot["params"]]
        if any(per_run):
            rec["runs"] = per_run
        if slot["fail"]:
            rec["failed_runs"] = slot["fail"]
        if slot["retries"] or slot["disturbed"]:
            rec["retried_runs"] = slot["retries"]
            rec["disturbed_values"] = slot["disturbed"]
            if slot["disturbed"]:
                disturbed.append(f"{sysid} {bid}: {slot['disturbed']} of {len(vals)} values kept although the "
                                 f"process got too little of its CPU ({ATTEMPTS} attempts each)")
        records.append(rec)

    def get(bid, sysid, threads=None):
        for rec in records:
            if rec["benchmark"] == bid and rec["system"] == sysid and \
                    (threads is None or rec["params"].get("requested") == threads):
                return rec
        return None

    # ---- Markdown ----
    present = [s for s, _ in systems]
    peers = [p for p in PEERS if p in present]
    cols = ["benchmark", "unit"] + present + [f"weft/{p}" for p in peers]
    lines = ["# weft core microbenchmarks", ""] + [f"- {h}" for h in header] + [""]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "|".join("---" if c == "benchmark" else "---:" for c in cols) + "|")
    rows = [(bid, None, what) for _, bid, what in TIMED] + \
           [(MEM_ID, MEM_SMALL, "bytes RSS per idle thread"), (MEM_ID, MEM_LARGE, "bytes RSS per idle thread")]
    notes = []
    for bid, threads, what in rows:
        name = bid + (f" ({threads:,} threads)" if threads else "")
        cells = [name, "ns" if not threads else "bytes"]
        meds = {}
        for s in present:
            rec = get(bid, s, threads)
            if rec is None:
                cells.append("skipped")
                continue
            meds[s] = rec["median"]
            cell = fmt(rec["median"]) + ("†" if rec.get("disturbed_values") else "")
            if threads and rec["params"].get("threads") != threads:
                cell += f" (only {rec['params']['threads']:,} created)"
                notes.append(f"{s}: {name}: thread creation failed after {rec['params']['threads']:,} threads; "
                             f"bytes per thread are for that many")
            cells.append(cell)
        for p in peers:
            if "weft" in meds and p in meds and meds[p] > 0:
                cells.append(f"{meds['weft'] / meds[p]:.2f}")
            else:
                cells.append("—")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Medians; min/max and every value are in the JSON. Ratio < 1: weft is faster / smaller.")
    lines.append(f"Wall-clock time (CLOCK_MONOTONIC). The process's CPU time over wall time shows whether "
                 f"another process ran on its CPU: a timed run below {CPU_SHARE_OK:.0%} of the expected share "
                 f"(1, but 0.88 for NPTL create+join) is run again, up to {ATTEMPTS} times; † marks a median "
                 f"with such values still in it. The machine is a shared VM: neighbours on the host are not "
                 f"seen this way.")
    retried = sum(r.get("retried_runs", 0) for r in records)
    if retried:
        lines.append(f"{retried} disturbed run(s) were run again.")
    lines.append("")
    lines.append("What each system runs (all on one kernel thread / vproc):")
    ops = {}
    for rec in records:
        if "op" in rec["params"] or "park" in rec["params"]:
            ops.setdefault(rec["benchmark"], []).append(
                f"{rec['system']}: {rec['params'].get('op') or rec['params'].get('park')}")
    for bid in [b for _, b, _ in TIMED] + [MEM_ID]:
        if bid in ops:
            lines.append(f"- {bid}: " + "; ".join(dict.fromkeys(ops[bid])))
    stacks = {}
    for rec in records:
        if "stack" in rec["params"]:
            stacks.setdefault(rec["system"], set()).add(str(rec["params"]["stack"]))
    if stacks:
        lines.append("- Stack size (bytes): " + "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in stacks.items())
                     + " (weft: its default; the peers: set to 64 KiB; Go's stacks start small and grow).")
    for threads in (MEM_SMALL, MEM_LARGE):
        secs = []
        for sysid in present:
            rec = get(MEM_ID, sysid, threads)
            if rec and rec.get("runs") and "create_park_s" in rec["runs"][0]:
                cp = statistics.median(r["create_park_s"] for r in rec["runs"])
                td = statistics.median(r["teardown_s"] for r in rec["runs"])
                secs.append(f"{sysid} {cp:.2f} s + {td:.2f} s")
        if secs:
            lines.append(f"- memory.idle_thread ({threads:,} threads), seconds to create and park them + to release "
                         f"and join them (wall clock): " + "; ".join(secs))
    if "st" in present:
        lines.append("- ST 1.9 has no st_thread_yield: its switch is st_usleep(0), which goes through ST's idle "
                     "thread (a zero-timeout poll system call) about once per two switches. "
                     "ST's condition variables take no mutex.")
    if "boost-context" in present:
        lines.append("- Boost.Context is a raw switch: no scheduler, no run queue, no sync. Its switch is one "
                     "fiber::resume; weft's is a yield through the scheduler.")
    if "go" in present:
        lines.append("- Go runs with GOMAXPROCS=1; its switch is runtime.Gosched.")
    if "nptl" in present:
        lines.append("- NPTL RSS leaves out the kernel's share of a thread (task struct, 16 KiB kernel stack).")
    for n in notes + disturbed + skipped:
        lines.append(f"- {n}")

    # ---- goals ----
    lines += ["", "Goals for weft (the core issue's, then the microbenchmark issue's):", ""]
    for bid, threads, absmax, peer, ratio in GOALS:
        rec = get(bid, "weft", threads)
        name = bid + (f" ({threads:,} threads)" if threads else "")
        if rec is None:
            lines.append(f"- {name}: no weft result")
            continue
        v = rec["median"]
        parts = [f"{fmt(v)} {rec['unit']}"]
        if absmax is not None:
            parts[0] += f" ≤ {fmt(absmax)}: {'met' if v <= absmax else 'NOT met'}"
        if peer:
            pr = get(bid, peer, threads)
            if pr:
                q = v / pr["median"]
                parts.append(f"{q:.2f}× {peer} ≤ {ratio}×: {'met' if q <= ratio else 'NOT met'}")
            else:
                parts.append(f"ratio to {peer}: no {peer} result")
        lines.append(f"- {name}: " + "; ".join(parts) + (" (4.5 KB read as 4,500 bytes)" if bid == MEM_ID and absmax else ""))
    lines.append("")
    lines.append(f"Total run time: {total:.0f} s.")
    md = "\n".join(lines) + "\n"

    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(records, f, indent=2)
        f.write("\n")
    md_path = args.md or (os.path.splitext(args.out)[0] + ".md")
    md_dir = os.path.dirname(md_path)
    if md_dir:
        os.makedirs(md_dir, exist_ok=True)
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    log(f"run.py: wrote {args.out} and {md_path} ({total:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
