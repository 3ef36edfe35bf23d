#!/usr/bin/env python3
"""Run the pipe-token benchmark (Capriccio Fig. 2) on weft and its peers and
compare them.

Systems (binaries in BUILD/bench):
  epoll       epoll-pipetest   a single-threaded epoll event loop (the baseline)
  nptl        nptl-pipetest    one kernel thread per pipe
  weft-uring  weft-pipetest --io uring   one weft thread per pipe, one vproc
  weft-uring-coop  the same with WEFT_DEFER=0: rings with COOP_TASKRUN
              instead of DEFER_TASKRUN (the default; docs/io.md)
  weft-epoll  weft-pipetest --io epoll
  weft-poll   weft-pipetest --io poll
at pipe counts 8, 16, 32, ... up to what the descriptor limit allows (2 per
pipe, capped at 9,000 pipes), every process pinned to ONE CPU with
`taskset -c CPU`, REPS times per point with the systems interleaved, and writes:
  - OUT (default results/pipetest.json): a list of records
      {"benchmark": "fig2.pipe_tokens", "system", "params": {"pipes", "tokens", "in_flight"},
       "unit": "tokens/s", "median", "min", "max", "repetitions", "values"}
  - the same path with .md: a Markdown table of the medians with the ratios
    weft-<backend>/epoll and nptl/epoll, and whether the goal is met (weft >=
    0.95x the epoll loop at every pipe count, for the uring and epoll
    backends);
and prints the table. A missing binary or a failed run is reported as
"skipped: <why>", never replaced by a number. A run whose process got less
than 90% of its CPU (the machine is shared) is run again, up to 3 times.

Python 3 standard library only. Usage:
  python3 bench/micro/pipetest.py [--build DIR] [--out FILE] [--reps N] [--quick] [--cpu N]
                                  [--tokens T] [--pipes N,N,...]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import time

from benchlib import ATTEMPTS, log, machine_line, pick_cpu, run_plan

BENCH_ID = "fig2.pipe_tokens"
# (system id, binary, extra arguments)
SYSTEMS = [
    ("epoll", "epoll-pipetest", []),
    ("nptl", "nptl-pipetest", []),
    ("weft-uring", "weft-pipetest", ["--io", "uring"]),
    ("weft-uring-coop", "weft-pipetest", ["--io", "uring"]),
    ("weft-epoll", "weft-pipetest", ["--io", "epoll"]),
    ("weft-poll", "weft-pipetest", ["--io", "poll"]),
]
# A system that is another one run with a setting: its environment, and the
# system its binary reports (checked, as for the others).
ENV = {"weft-uring-coop": ["WEFT_DEFER=0"]}
REPORTS_AS = {"weft-uring-coop": "weft-uring"}
BASELINE = "epoll"
GOAL_RATIO = 0.95                     # weft >= 0.95x the epoll loop ...
GOAL_SYSTEMS = ["weft-uring", "weft-epoll"]  # ... at every pipe count, for these backends
MAX_PIPES = 9000                      # the brief's cap; below RLIMIT_NOFILE / 2 with headroom
FD_HEADROOM = 64                      # as PT_FD_HEADROOM in pipetest.h
TOKENS_FULL = 1_000_000               # the paper: 5,000,000; this keeps epoll at ~0.5-1.5 s a point
TOKENS_QUICK = 500_000
QUICK_PIPES = [8, 64, 512, 4096]
QUICK_BUDGET_S = 170                  # --quick stops starting runs after this (bounded <= 3 min)
RUN_TIMEOUT_S = 120                   # one process; the binary's own watchdog is set a bit below
CPU_SHARE_OK = 0.9


def fmt_rate(v):
    return "—" if v is None else f"{v / 1e3:,.0f}k"


def verified(rec):
    """A record whose binary did not verify every token is a failed run."""
    return None if rec.get("verified") is True else "token check failed"


def max_pipes():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else 1 << 20
    return min(MAX_PIPES, (limit - FD_HEADROOM) // 2), limit


def pipe_counts(top):
    counts, n = [], 8
    while n <= top:
        counts.append(n)
        n *= 2
    if counts and counts[-1] != top:
        counts.append(top)  # the largest ring the descriptor limit allows
    return counts


def find_systems(bench_dir):
    """[(sysid, path, extra)], [skipped lines]."""
    found, skipped = [], []
    for sysid, exe, extra in SYSTEMS:
        path = os.path.join(bench_dir, exe)
        if os.access(path, os.X_OK):
            found.append((sysid, path, extra))
            continue
        why = f"{path} not found"
        if exe == "weft-pipetest":
            why += (" (built only once weft's I/O layer — weft_read, weft_io_backend — is in src/; "
                    "re-run CMake, or -DWEFT_BENCH_WEFT_PIPETEST=ON)")
        skipped.append(f"skipped: {sysid}: {why}")
    return found, skipped


def summarise(results, skipped):
    records = []
    for (sysid, pipes), slot in results.items():
        if not slot["values"]:
            if slot["fail"] and not slot.get("wrong_system"):
                skipped.append(f"skipped: {sysid} at {pipes:,} pipes: every run failed ({slot['fail'][0]})")
            continue
        vals = slot["values"]
        first = slot["recs"][0]
        rec = {
            "benchmark": BENCH_ID,
            "system": sysid,
            "params": {k: first["params"][k] for k in ("pipes", "tokens", "in_flight") if k in first["params"]},
            "unit": "tokens/s",
            "median": statistics.median(vals),
            "min": min(vals),
            "max": max(vals),
            "repetitions": len(vals),
            "values": vals,
            "cpu_share": [r.get("cpu_share") for r in slot["recs"]],
        }
        if "per_token" in first:  # weft's counters per token, median over the runs
            keys = first["per_token"].keys()
            rec["per_token"] = {k: statistics.median(r["per_token"][k] for r in slot["recs"]) for k in keys}
        if slot["fail"]:
            rec["failed_runs"] = slot["fail"]
        if slot["retries"] or slot["disturbed"]:
            rec["retried_runs"] = slot["retries"]
            rec["disturbed_values"] = slot["disturbed"]
        records.append(rec)
    return records


def markdown(records, header, present, counts, skipped, total):
    med = {(r["system"], r["params"]["pipes"]): r for r in records}
    others = [s for s in present if s != BASELINE]
    cols = ["pipes", "in flight"] + [f"{s} (tokens/s)" for s in present] + \
           ([f"{s}/{BASELINE}" for s in others] if BASELINE in present else [])
    lines = ["# Pipe-token benchmark (Capriccio Fig. 2)", ""] + [f"- {h}" for h in header] + [""]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "|".join("---:" for _ in cols) + "|")
    for n in counts:
        cells = [f"{n:,}", str(n // 4 if n < 128 else 128)]
        for s in present:
            r = med.get((s, n))
            cells.append("skipped" if r is None else fmt_rate(r["median"]) + ("†" if r.get("disturbed_values") else ""))
        if BASELINE in present:
            base = med.get((BASELINE, n))
            for s in others:
                r = med.get((s, n))
                cells.append(f"{r['median'] / base['median']:.2f}" if r and base else "—")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["",
              "Medians of tokens passed per second (k = 1,000); min, max and every value are in the JSON. "
              "Ratio > 1: faster than the epoll loop.",
              f"† a value in the median came from a run that got less than {CPU_SHARE_OK:.0%} of its CPU after "
              f"{ATTEMPTS} attempts (the machine is shared).", ""]
    weft_counters = [r for r in records if "per_token" in r]
    if weft_counters:
        lines.append("weft's counters per token passed (median over runs): I/O system calls / parks / reactor "
                     "waits / switches:")
        lines.append("")
        for s in [s for s in present if s.startswith("weft-")]:
            parts = []
            for n in counts:
                r = med.get((s, n))
                if r and "per_token" in r:
                    p = r["per_token"]
                    parts.append(f"{n}: {p['io_syscalls']:.2f}/{p['io_parks']:.2f}/{p['io_waits']:.3f}/"
                                 f"{p['switches']:.2f}")
            if parts:
                lines.append(f"- {s}: " + "; ".join(parts))
        lines.append("")
    lines.append("What runs: epoll — one kernel thread, edge-triggered epoll, up to 512 events per epoll_wait, "
                 "non-blocking pipes, one read drains a ready pipe, one write per token; nptl — one pthread per pipe (64 KiB "
                 "stacks), blocking pipes; weft-* — one weft thread per pipe on one vproc (64 KiB stacks), "
                 "blocking pipes, weft_read/weft_write on the named reactor backend. Every token carries an id "
                 "and a check tied to the pipe it was written into; each binary verifies every read and that the "
                 "hops add up to the tokens passed (a failed check is a failed run, never a number).")
    for s in skipped:
        lines.append(f"- {s}")

    lines += ["", f"Goal: weft ≥ {GOAL_RATIO}× the epoll loop at every pipe count (backends: "
                  f"{', '.join(GOAL_SYSTEMS)}).", ""]
    for s in GOAL_SYSTEMS:
        if BASELINE not in present:
            lines.append(f"- {s}: no {BASELINE} results: not judged")
            continue
        if s not in present:
            lines.append(f"- {s}: not measured (skipped): not judged")
            continue
        short, missing, worst = [], [], None  # worst: (ratio, pipes)
        for n in counts:
            r, base = med.get((s, n)), med.get((BASELINE, n))
            if not r or not base:
                missing.append(n)
                continue
            q = r["median"] / base["median"]
            if worst is None or q < worst[0]:
                worst = (q, n)
            if q < GOAL_RATIO:
                short.append(f"{n:,} ({q:.2f}×)")
        verdict = "NOT met" if short else ("not judged (missing points)" if missing else "met")
        line = f"- {s}: {verdict}"
        if short:
            line += f"; below {GOAL_RATIO}× at " + ", ".join(short)
        if missing:
            line += "; no result at " + ", ".join(f"{n:,}" for n in missing)
        if worst:
            line += f" (lowest ratio {worst[0]:.2f}× at {worst[1]:,} pipes)"
        lines.append(line)
    lines += ["", f"Total run time: {total:.0f} s."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory holding bench/*-pipetest (default: build)")
    ap.add_argument("--out", default="results/pipetest.json", help="JSON output (default: results/pipetest.json)")
    ap.add_argument("--md", default=None, help="Markdown output (default: OUT with .md)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per point, median kept (default 3)")
    ap.add_argument("--quick", action="store_true",
                    help=f"pipes {','.join(map(str, QUICK_PIPES))}, {TOKENS_QUICK:,} tokens, stops starting runs "
                         f"after {QUICK_BUDGET_S} s (bounded <= 3 min)")
    ap.add_argument("--cpu", type=int, default=1, help="CPU to pin every process to with taskset (default 1)")
    ap.add_argument("--tokens", type=int, default=None,
                    help=f"tokens passed per run (default {TOKENS_FULL:,}; --quick {TOKENS_QUICK:,}; paper 5,000,000)")
    ap.add_argument("--pipes", default=None, help="comma-separated pipe counts (default: 8, 16, ... up to the limit)")
    ap.add_argument("--systems", default=None,
                    help="comma-separated subset of: " + ", ".join(s for s, _, _ in SYSTEMS))
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be >= 1")

    if not shutil.which("taskset"):
        log("pipetest.py: taskset not found (util-linux); cannot pin, giving up")
        return 1
    cpu, cpu_note = pick_cpu(args.cpu)
    top, fd_limit = max_pipes()
    if args.pipes:
        counts = sorted({int(x) for x in args.pipes.split(",") if x.strip()})
        too_big = [n for n in counts if n > top]
        counts = [n for n in counts if n <= top]
    else:
        counts, too_big = (QUICK_PIPES if args.quick else pipe_counts(top)), []
        counts = [n for n in counts if n <= top]
    tokens = args.tokens or (TOKENS_QUICK if args.quick else TOKENS_FULL)
    budget = QUICK_BUDGET_S if args.quick else None
    bench_dir = os.path.join(args.build, "bench")

    systems, skipped = find_systems(bench_dir)
    if args.systems:
        wanted = [s.strip() for s in args.systems.split(",")]
        unknown = [s for s in wanted if s not in {x for x, _, _ in SYSTEMS}]
        if unknown:
            ap.error(f"unknown system(s): {', '.join(unknown)}")
        systems = [x for x in systems if x[0] in wanted]
        skipped = [s for s in skipped if s.split(":")[1].strip() in wanted]
    for n in too_big:
        skipped.append(f"skipped: {n:,} pipes: more than the {top:,} the descriptor limit allows "
                       f"(RLIMIT_NOFILE {fd_limit:,}, 2 per pipe)")
    if not systems:
        for s in skipped:
            log("pipetest.py: " + s)
        log(f"pipetest.py: no pipetest binary in {bench_dir}: build first (cmake --build {args.build})")
        return 1

    header = [
        f"Every process pinned to ONE CPU: `taskset -c {cpu}` (all threads of a system share it).",
        f"{tokens:,} tokens passed per run (the paper: 5,000,000); tokens in flight: pipes/4 below 128 pipes, "
        f"else 128; 12-byte tokens.",
        f"{args.reps} repetition(s) per point (separate processes, systems interleaved); the median is reported.",
        f"Pipe counts: {', '.join(f'{n:,}' for n in counts)} (descriptor limit {fd_limit:,}: at most {top:,} pipes).",
        f"Machine: {machine_line()}.",
    ]
    if cpu_note:
        header.append(cpu_note)
    for h in header:
        log("pipetest.py: " + h)
    for s in skipped:
        log("pipetest.py: " + s)

    run_timeout = min(RUN_TIMEOUT_S, 40) if args.quick else RUN_TIMEOUT_S
    plan = [{"key": (sysid, n), "label": f"{sysid} pipes={n:,} rep {r + 1}",
             "cmd": (["env"] + ENV[sysid] if sysid in ENV else []) +
                    ["taskset", "-c", str(cpu), path, "--pipes", str(n), "--tokens", str(tokens),
                     "--timeout", str(run_timeout - 5), "--json"] + extra,
             "timeout": run_timeout, "share_ok": CPU_SHARE_OK, "check": verified,
             "system": REPORTS_AS.get(sysid, sysid)}
            for n in counts for r in range(args.reps) for sysid, path, extra in systems]
    t_start = time.monotonic()
    results, out_of_time = run_plan(plan, budget_s=budget)
    total = time.monotonic() - t_start
    # weft ran another backend than asked (the kernel refused io_uring): not a weft-uring number.
    wrong = {key[0]: slot["wrong_system"] for key, slot in results.items() if slot.get("wrong_system")}
    for sysid, ran in wrong.items():
        skipped.append(f"skipped: {sysid}: asked for it, weft ran {ran} (the kernel refused the backend)")
    if out_of_time:
        skipped.append(f"skipped (--quick time budget of {QUICK_BUDGET_S} s spent): {len(out_of_time)} run(s): "
                       + ", ".join(out_of_time[:6]) + (" ..." if len(out_of_time) > 6 else ""))

    records = summarise(results, skipped)
    present = [s for s, _, _ in systems if any(r["system"] == s for r in records)]
    for s, _, _ in systems:
        if s not in present and not any(f" {s}:" in x or f" {s} at" in x for x in skipped):
            skipped.append(f"skipped: {s}: no successful run")
    md = markdown(records, header, present, counts, skipped, total)

    for path in (args.out, args.md or (os.path.splitext(args.out)[0] + ".md")):
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(records, f, indent=2)
        f.write("\n")
    md_path = args.md or (os.path.splitext(args.out)[0] + ".md")
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    log(f"pipetest.py: wrote {args.out} and {md_path} ({total:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
