#!/usr/bin/env python3
"""Two cores (issue 15): weft-knot with 1 and 2 vprocs against nginx with 1
and 2 workers, wrk on the same two-CPU machine in the same run.
`make bench-smp-web` (QUICK=1 for the short version).

Method
  * Servers: weft-knot as servers.json's --knot entry (default knot-nb, the
    best mode at every point of docs/knot.md) with `--vprocs 1` ("knot-1vp")
    and `--vprocs 2` ("knot-2vp"; one SO_REUSEPORT accept socket per vproc);
    nginx with knot_bench.py's configuration and `worker_processes 1`
    ("nginx-1w") and 2 ("nginx-2w"); with --nginx-reuseport each worker gets
    its own SO_REUSEPORT socket, as weft-knot's vprocs do (default: one shared
    socket, nginx's default).
  * File set: fileset.py's SPECweb99-like set, one directory (36 files, 102 B
    to 921,600 B, 4.9 MiB), in BUILD/bench-web/smp-fileset, made once; wrk
    cycles through paths drawn from its access model (web_bench.py's Lua
    script), as web_bench.py's wrk peak does. Every run starts a fresh server,
    fetches every file once checking its bytes (web_bench.warm_up), then runs
    wrk (--timeout 15s) for --duration seconds at each --connections, and
    stops the server.
  * Where things run (the machine has two CPUs, and wrk needs CPU too):
      - "both" (the comparison): the server under `taskset -c 0,1` and wrk
        (-t2, --wrk-threads) under `taskset -c 0,1`: nothing is reserved, the kernel places
        the server's vprocs/workers and wrk's threads on the two CPUs as it
        likes. This is the fair setting for a two-vproc or two-worker
        server: pinning wrk to one CPU would make it share that CPU with one
        of the server's two workers and starve it, while the other had a CPU
        of its own. Every system runs here; the ratios come from here.
      - "split" (the baseline the other web harnesses use): the server
        pinned to CPU 1, wrk -t1 to CPU 0. Run for knot-1vp and nginx-1w only
        (a two-worker server on one CPU has nothing to scale onto).
  * The client's CPU is accounted for, not assumed away: per run the
    server's CPU seconds (utime + stime of its processes, every thread, from
    /proc/PID/stat, taken around the wrk run), wrk's (getrusage of the
    harness's children around it) and the rest of the two CPUs' busy time
    (/proc/stat less those two: other processes, interrupts, hypervisor
    steal). Reported: req/s; requests per server CPU second (the server's
    efficiency whatever the client took); requests per CPU second of server
    and wrk together (what bounds req/s on two CPUs); the CPUs' shares
    (server / wrk / others, in CPUs of 2); and the busiest server thread's
    share of the server's CPU (how evenly two vprocs or workers were loaded:
    0.5 is even, 1.0 all on one).
  * Points: system x placement x connections (100 and 1,000 by default),
    each repeated --reps times, the repetitions outermost and the systems
    interleaved, their order rotated every repetition (knot_bench.make_plan);
    medians reported. Before a run the script waits (boundedly) for both CPUs
    to be quiet; a run during which others took more than OTHERS_OK CPUs is
    run again (up to knot_bench.ATTEMPTS, within a retry budget) and kept
    marked "~" if still disturbed. Every run is bounded: the server must
    answer within 10 s, wrk is killed at duration + 60 s.
  * Ratios, from the medians of the "both" placement: knot-2vp / nginx-2w,
    knot-2vp / knot-1vp (weft's scaling), nginx-2w / nginx-1w (nginx's), and
    knot-1vp / nginx-1w; then each two-CPU server against its one-CPU
    baseline in "split". Each is also taken within every repetition (the
    two runs of a repetition are made within a minute of each other): their
    range is shown beside the ratio of the medians.

Writes OUT_DIR/smp_web.json ({"benchmark": "web.smp", "machine",
"settings", "runs", "points", "ratios", "notes", "failures", ...}),
OUT_DIR/smp_web.md and every wrk report in OUT_DIR/smp_web.wrk.log. The
output is checked (fields, a value for every point, every ratio); exit 1
when it is not well formed or a point has no value. web_bench.py's report
includes the ratios when smp_web.json is in its --out-dir.

Python 3 standard library only.
"""
import argparse
import copy
import datetime
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import knot_bench as kb  # noqa: E402  (servers, nginx, wrk, CPU accounting, the plan)
import web_bench as wb  # noqa: E402  (servers.json, start/stop, warm-up, the wrk script, Ctrl-C)
import fileset as fs  # noqa: E402  (the file set and its access model)

log = kb.log
BENCHMARK = "web.smp"
SKIP = 77
SEED = wb.SEED
DIRS = 1
CONNECTIONS = [100, 1000]
WRK_TIMEOUT_S = 15
# A run during which other processes (or the hypervisor) kept more than this
# many CPUs (of the two) busy is run again.
OTHERS_OK = 0.15
PROBE = fs.rel_path(0, 0, 0)

# The systems: (id, kind, vprocs or workers).
SYSTEMS = [("knot-1vp", "knot", 1), ("knot-2vp", "knot", 2), ("nginx-1w", "nginx", 1), ("nginx-2w", "nginx", 2)]
# Placements: the server's CPUs, wrk's CPUs, wrk's threads, the systems run there.
PLACEMENTS = {
    "both": {"server": "0,1", "wrk": "0,1", "wrk_threads": 2, "systems": [s[0] for s in SYSTEMS],
             "what": "server and wrk -t2 both on CPUs 0-1, placed by the kernel"},
    "split": {"server": "1", "wrk": "0", "wrk_threads": 1, "systems": ["knot-1vp", "nginx-1w"],
              "what": "server pinned to CPU 1, wrk -t1 to CPU 0 (the other web harnesses' setting)"},
}
# (name, numerator (system, placement), denominator (system, placement)).
RATIOS = [
    ("knot-2vp / nginx-2w", ("knot-2vp", "both"), ("nginx-2w", "both")),
    ("knot-2vp / knot-1vp", ("knot-2vp", "both"), ("knot-1vp", "both")),
    ("nginx-2w / nginx-1w", ("nginx-2w", "both"), ("nginx-1w", "both")),
    ("knot-1vp / nginx-1w", ("knot-1vp", "both"), ("nginx-1w", "both")),
    ("knot-2vp / knot-1vp split", ("knot-2vp", "both"), ("knot-1vp", "split")),
    ("nginx-2w / nginx-1w split", ("nginx-2w", "both"), ("nginx-1w", "split")),
]
# The ratios every run must have (the others need the "split" placement).
REQUIRED_RATIOS = [r[0] for r in RATIOS[:3]]


def client_accounting(wrk_threads):
    """How the client shares the cores, for the report."""
    return (
        "The machine has two CPUs and wrk runs on them too. In the \"both\" placement (the comparison) the server "
        f"and wrk -t{wrk_threads} are both allowed on CPUs 0-1 and the kernel places them. wrk is not pinned: "
        "pinned to one CPU it would share that CPU with one of a two-worker server's workers and starve it while "
        "the other had a CPU to itself; and it has a thread per CPU, since one wrk thread tops out near one "
        "server CPU's worth of requests and would make every server look alike. So req/s there is what two CPUs "
        "do for server and client together (server CPUs + wrk CPUs + others <= 2), and a one-worker server "
        "shares its CPU with wrk's threads (the kernel gives each runnable thread a like share), which "
        "\"split\" does not. Each run records the server's CPU seconds (/proc/PID/stat of its processes, every "
        "thread), wrk's (getrusage of the harness's children) and what else was busy (/proc/stat less those). "
        "Requests per server CPU second compares the servers whatever the client took; requests per CPU second "
        "of server and wrk together is what bounds req/s on two CPUs. The \"split\" placement (server on CPU 1, "
        "wrk -t1 on CPU 0, as knot_bench.py and web_bench.py run) is the one-CPU baseline with a CPU of its own, "
        "run for the 1-vproc and 1-worker servers only; the \"split\" ratios compare the two-CPU servers with it.")


# ---- one run -------------------------------------------------------------------------

def thread_cpu(pids):
    """{(pid, tid): CPU seconds} of every thread of these processes."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for p, t in kb.thread_ids(pids):
        try:
            with open(f"/proc/{p}/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[(p, t)] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return out


def busiest_share(before, after):
    """The busiest thread's share of the CPU all threads used between two
    thread_cpu()s (None when they used none)."""
    deltas = [after[k] - before.get(k, 0.0) for k in after]
    total = sum(d for d in deltas if d > 0)
    return round(max(deltas) / total, 3) if total > 0 else None


def busy_cpus(before, after, cpus):
    """CPUs' worth of busy time (0..len(cpus)) between two kb.cpu_times()."""
    return sum(kb.cpu_busy(before, after, c) for c in cpus)


def run_once(run, sysinfo, ctx):
    """Start the server, check every file, load it with wrk, stop it.
    Returns (result or None, problem or None, {"server_cmd", "wrk_cmd"})."""
    details = {}
    place = ctx.placements[sysinfo["placement"]]
    try:
        server = wb.start_server(run["system"], run["cmd"], PROBE)
    except kb.ServerError as e:
        return None, f"server {e}", details
    try:
        details["server_cmd"] = server.cmd
        problem, _, _ = wb.warm_up(server.port, DIRS, SEED)
        if problem:
            return None, f"warm-up: {problem}", details
        pids = server.pids()
        th0, cpu0, ct0, t0 = thread_cpu(pids), kb.proc_cpu_seconds(pids), kb.cpu_times(), time.monotonic()
        try:
            res, wcmd = kb.run_wrk(f"http://127.0.0.1:{server.port}/", run["connections"], ctx.duration,
                                   place["wrk"], extra=["--timeout", f"{WRK_TIMEOUT_S}s", "-s", ctx.wrk_script],
                                   popen=wb.CHILDREN.popen, threads=place["wrk_threads"])
        except RuntimeError as e:
            return None, str(e), details
        ct1, wall = kb.cpu_times(), time.monotonic() - t0
        server_s = kb.proc_cpu_seconds(pids) - cpu0
        res["busiest_thread_share"] = busiest_share(th0, thread_cpu(pids))
        details["wrk_cmd"] = wcmd
        if not server.alive():
            return None, f"server died during the run (status {server.proc.returncode}): {server.output()}", details
        requests = res.get("requests") or round(res["req_s"] * ctx.duration)
        client_s = res["client_cpu_s"]
        busy = busy_cpus(ct0, ct1, ctx.cpus)
        res.update(wall_s=round(wall, 3), server_cpu_s=round(server_s, 3), server_cpus=round(server_s / wall, 3),
                   client_cpus=round(client_s / wall, 3),
                   others_cpus=round(max(0.0, busy - (server_s + client_s) / wall), 3),
                   req_per_server_cpu_s=round(requests / server_s, 1) if server_s > 0 else None,
                   req_per_cpu_s=round(requests / (server_s + client_s), 1) if server_s + client_s > 0 else None)
        res["disturbed"] = res["others_cpus"] > OTHERS_OK
        return res, None, details
    finally:
        stop_problem = wb.stop_server(server)
        if stop_problem:
            log(f"smp: {run['system']}: {stop_problem}")


def run_plan(plan, systems, ctx):
    """Every run in order, progress on stderr; disturbed runs again (kb.ATTEMPTS,
    within a budget). Returns ({(system id, connections): slot}, commands, spent)."""
    slots, commands = {}, {}
    t_start = time.monotonic()
    per_run = ctx.duration + 1.5
    retry_budget = kb.RETRY_SHARE * len(plan) * per_run
    wait_budget = kb.QUIET_WAIT_SHARE * len(plan) * per_run
    waited = retried = 0.0
    for i, run in enumerate(plan, 1):
        info = systems[run["system"]]
        slot = slots.setdefault((run["system"], run["connections"]), {"runs": [], "fail": [], "retries": 0})
        label = f"[{i}/{len(plan)}] {info['name']} ({info['placement']}) c={run['connections']:,} rep {run['rep']}"
        for attempt in range(1, kb.ATTEMPTS + 1):
            if waited < wait_budget:
                waited += kb.wait_quiet(ctx.cpus, min(kb.QUIET_WAIT_RUN, wait_budget - waited), who="smp")
            t0 = time.monotonic()
            res, problem, details = run_once(run, info, ctx)
            if attempt > 1:
                retried += time.monotonic() - t0
            if res is None or not res["disturbed"] or attempt == kb.ATTEMPTS or retried >= retry_budget:
                break
            slot["retries"] += 1
            log(f"smp: {label}: disturbed (others kept {res['others_cpus']:.2f} CPUs busy; "
                f"{res['req_s']:,.0f} req/s), running it again")
        for k in ("server_cmd", "wrk_cmd"):
            if k in details:
                commands.setdefault(f"{run['system']} {k}", " ".join(shlex.quote(x) for x in details[k]))
        if res is None:
            slot["fail"].append(problem)
            log(f"smp: {label}: FAILED ({problem})")
            continue
        res["label"], res["rep"] = label, run["rep"]
        slot["runs"].append(res)
        flags = kb.run_problems(res)
        log(f"smp: {label}: {res['req_s']:,.0f} req/s, {fmt(res['req_per_server_cpu_s'])} req per server CPU-s; "
            f"CPUs: server {res['server_cpus']:.2f}, wrk {res['client_cpus']:.2f}, others {res['others_cpus']:.2f}"
            f"{', DISTURBED' if res['disturbed'] else ''}; p99 {fmt(res['percentiles_ms'].get('99'))} ms"
            + (f" FLAGGED: {'; '.join(flags)}" if flags else "")
            + f" ({time.monotonic() - t0:.1f} s, {time.monotonic() - t_start:.0f} s so far)")
    return slots, commands, {"quiet_wait_s": round(waited, 1), "retry_s": round(retried, 1)}


# ---- summaries -----------------------------------------------------------------------

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


RUN_KEYS = ("rep", "req_s", "requests", "req_per_server_cpu_s", "req_per_cpu_s", "server_cpu_s", "client_cpu_s",
            "server_cpus", "client_cpus", "others_cpus", "wall_s", "busiest_thread_share", "disturbed")


def summarise(slots, systems):
    """(runs, points, failures): every run's figures, and per (system,
    placement, connections) the medians."""
    runs, points, failures = [], [], []
    for (sysid, conns), slot in slots.items():
        info = systems[sysid]
        key = {"system": info["name"], "placement": info["placement"], "connections": conns}
        for r in slot["runs"]:
            runs.append({**key, **{k: r.get(k) for k in RUN_KEYS}, "p99_ms": r["percentiles_ms"].get("99"),
                         "p50_ms": r["percentiles_ms"].get("50"), "socket_errors": r["socket_errors"],
                         "non_2xx": r["non_2xx"], "flags": kb.run_problems(r)})
        if not slot["runs"]:
            failures.append(f"{info['name']} ({info['placement']}) c={conns}: every run failed "
                            f"({slot['fail'][0] if slot['fail'] else '?'})")
            continue
        rs = slot["runs"]
        vals = [r["req_s"] for r in rs]
        p = {**key, "kind": info["kind"], "workers": info["workers"], "req_s": med(vals), "min": min(vals),
             "max": max(vals), "repetitions": len(vals), "values": vals}
        for k in ("req_per_server_cpu_s", "req_per_cpu_s", "server_cpus", "client_cpus", "others_cpus",
                  "busiest_thread_share"):
            p[k] = med(r.get(k) for r in rs)
        p["p99_ms"] = med(r["percentiles_ms"].get("99") for r in rs)
        p["disturbed_values"] = sum(bool(r["disturbed"]) for r in rs)
        flags = [fl for r in rs for fl in kb.run_problems(r)]
        p["flagged"] = bool(flags)
        if flags:
            p["flags"] = flags
        if slot["retries"]:
            p["retried_runs"] = slot["retries"]
        if slot["fail"]:
            p["failed_runs"] = slot["fail"]
        points.append(p)
    return runs, points, failures


def ratios(points, runs, conns):
    """[{"name", "connections", "req_s", "req_per_server_cpu_s", "p99",
    "paired"}]: the RATIOS of the medians (None where a side is missing), and
    in "paired" {figure: [the ratio within each repetition]}: the two runs of
    a repetition were made within a minute of each other, so their ratio is
    spared the slower swings of a shared machine, and its range says how far
    the ratio of the medians can be trusted."""
    by = {(p["system"], p["placement"], p["connections"]): p for p in points}
    by_rep = {(r["system"], r["placement"], r["connections"], r["rep"]): r for r in runs}
    reps = sorted({r["rep"] for r in runs})
    out = []
    for name, num, den in RATIOS:
        for c in conns:
            a, b = by.get((*num, c)), by.get((*den, c))
            if a is None and b is None:
                continue

            def q(x, y, k):
                return round(x[k] / y[k], 3) if x and y and x.get(k) and y.get(k) else None
            pairs = [(by_rep.get((*num, c, i)), by_rep.get((*den, c, i))) for i in reps]
            paired = {k: [v for v in (q(x, y, k) for x, y in pairs) if v is not None]
                      for k in ("req_s", "req_per_server_cpu_s")}
            out.append({"name": name, "connections": c, "numerator": list(num), "denominator": list(den),
                        "req_s": q(a, b, "req_s"), "req_per_server_cpu_s": q(a, b, "req_per_server_cpu_s"),
                        "p99": q(a, b, "p99_ms"), "paired": paired})
    return out


# ---- the report ----------------------------------------------------------------------

def fmt(x, digits=None):
    return wb.fmt(x, digits)


def ratio_table(data):
    """The ratios as Markdown lines (web_bench.py's report uses them too)."""
    rows = data.get("ratios") or []
    conns = sorted({r["connections"] for r in rows})
    if not rows:
        return ["No ratios: a side of each was not measured."]
    head = ["ratio"] + [f"{w} @{c:,}" for c in conns for w in ("req/s", "per server CPU-s")]
    md = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name in dict.fromkeys(r["name"] for r in rows):
        cells = [name]
        for c in conns:
            r = next((x for x in rows if x["name"] == name and x["connections"] == c), {})
            for k in ("req_s", "req_per_server_cpu_s"):
                paired = (r.get("paired") or {}).get(k) or []
                cells.append((f"{r[k]:.2f}x" if r.get(k) else "—")
                             + (f" ({min(paired):.2f}–{max(paired):.2f})" if len(paired) > 1 else ""))
        md.append("| " + " | ".join(cells) + " |")
    if any(len(v) > 1 for r in rows for v in (r.get("paired") or {}).values()):
        md += ["", "The ratio of the medians; in parentheses the range of the ratio within each repetition (its two "
               "runs were made within a minute of each other)."]
    return md


def render(data):
    s, m = data["settings"], data["machine"]
    md = ["# Two cores: weft-knot 1 and 2 vprocs against nginx 1 and 2 workers (wrk)", ""]
    md += [f"- Machine: {m['line']}; nginx: {m['nginx']}; wrk: {m['wrk']}; git {m['git_head']}; "
           f"{data['generated']}.",
           f"- weft-knot: servers.json's `{s['knot']}` (`{' '.join(s['knot_args'])}`) plus `--vprocs N`; nginx: "
           f"knot_bench.py's configuration with `worker_processes N`"
           + (", `listen ... reuseport`" if s["nginx_reuseport"] else ", one listen socket shared by the workers")
           + ".",
           f"- File set: {s['fileset']} ({s['files']} files, {s['fileset_bytes'] / 2**20:.1f} MiB); wrk cycles "
           f"through {wb.WRK_PATHS:,} access-model paths (mean body {s['mean_body_bytes']:,.0f} B), keep-alive, "
           f"`--timeout {WRK_TIMEOUT_S}s`.",
           f"- {s['reps']} repetition(s) of {s['duration_s']} s per point, systems interleaved, a fresh server per "
           f"run; medians. Total {data['total_seconds']:.0f} s."
           + (" Smoke run." if s["smoke"] else " Quick run." if s["quick"] else ""), ""]
    md += ["## How the client's CPU is accounted for", "", data["client_accounting"], ""]
    for name, p in s["placements"].items():
        md.append(f"- {name}: {p['what']} (server `taskset -c {p['server']}`, wrk `taskset -c {p['wrk']} "
                  f"wrk -t{p['wrk_threads']}`).")
    md.append("")
    md += ["## Ratios (medians; \"both\" placement unless it says split)", ""] + ratio_table(data) + [""]
    md += ["## Every point", "",
           "CPUs: server / wrk / others, in CPUs of the two, medians over the runs. Busiest thread: its share of "
           "the server's CPU (0.50 = two workers evenly loaded, 1.00 = all on one).", "",
           "| system | placement | connections | req/s | req per server CPU-s | req per (server+wrk) CPU-s | CPUs "
           "server / wrk / others | busiest thread | p99 ms |",
           "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for p in data["points"]:
        spread = (p["max"] - p["min"]) / 2 / p["req_s"] if p["req_s"] and p["repetitions"] > 1 else None
        md.append(f"| {p['system']} | {p['placement']} | {p['connections']:,} | {fmt(p['req_s'], 0)}"
                  + (f" ±{spread:.0%}" if spread is not None else "") + (" ⚠" if p["flagged"] else "")
                  + (" ~" if p["disturbed_values"] else "")
                  + f" | {fmt(p['req_per_server_cpu_s'], 0)} | {fmt(p['req_per_cpu_s'], 0)} | "
                  f"{fmt(p['server_cpus'], 2)} / {fmt(p['client_cpus'], 2)} / {fmt(p['others_cpus'], 2)} | "
                  f"{fmt(p['busiest_thread_share'], 2)} | {fmt(p['p99_ms'])} |")
    md += ["", "±: half the min–max range over the repetitions. ⚠: socket errors or error responses. ~: "
           f"measured while others kept more than {OTHERS_OK} CPUs busy (even after running it again).", ""]
    md += ["## Notes and failures", ""]
    md += [f"- {n}" for n in data["notes"]] + [f"- FAILED: {f}" for f in data["failures"]]
    if not data["notes"] and not data["failures"]:
        md.append("None.")
    md.append("")
    return "\n".join(md)


# ---- checking what was written ---------------------------------------------------------

def check_outputs(json_path, md_path, planned, conns):
    """Problems with the files written ([] when well formed): every planned
    (system, placement) has a point at every connection count with req/s and
    the CPU figures; every required ratio is there with a number."""
    try:
        with open(json_path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return [f"cannot read {json_path}: {e}"]
    if not isinstance(data, dict):
        return [f"{json_path} is not an object"]
    bad = [f"no {k}" for k in ("benchmark", "machine", "settings", "runs", "points", "ratios", "client_accounting",
                              "notes", "failures") if k not in data]
    if bad:
        return bad
    if data["benchmark"] != BENCHMARK:
        bad.append(f"benchmark is {data['benchmark']!r}")
    number = (int, float)
    by = {(p.get("system"), p.get("placement"), p.get("connections")): p for p in data["points"]}
    for sysid, place in planned:
        for c in conns:
            p = by.get((sysid, place, c))
            if p is None:
                bad.append(f"no point for {sysid} ({place}) c={c}")
                continue
            for k in ("req_s", "req_per_server_cpu_s", "req_per_cpu_s", "server_cpus", "client_cpus"):
                if not (isinstance(p.get(k), number) and p[k] > 0):
                    bad.append(f"{sysid} ({place}) c={c}: {k} missing or not positive: {p.get(k)!r}")
            if not isinstance(p.get("others_cpus"), number):
                bad.append(f"{sysid} ({place}) c={c}: no others_cpus")
    for name in REQUIRED_RATIOS:
        for c in conns:
            r = next((x for x in data["ratios"] if x.get("name") == name and x.get("connections") == c), None)
            if r is None or not all(isinstance(r.get(k), number) and r[k] > 0
                                    for k in ("req_s", "req_per_server_cpu_s")):
                bad.append(f"ratio {name} c={c} missing or not a number: {r}")
    if not any(r.get("server_cpu_s") and r.get("client_cpu_s") for r in data["runs"]):
        bad.append("no run has both the server's and wrk's CPU seconds")
    try:
        with open(md_path) as f:
            text = f.read()
        for want in ("knot-2vp / nginx-2w", "How the client's CPU is accounted for"):
            if want not in text:
                bad.append(f"{md_path} lacks {want!r}")
    except OSError as e:
        bad.append(f"cannot read {md_path}: {e}")
    return bad


# ---- main ----------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="weft-knot with 1 and 2 vprocs against nginx with 1 and 2 workers under wrk on this "
                    "two-CPU machine, with the client's CPU accounted for. Writes smp_web.json, smp_web.md and "
                    "smp_web.wrk.log in --out-dir. See the module docstring for the method.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Full run: 6 systems/placements x 2 connection counts x 5 reps x 4 s, about 6 minutes; --quick "
               "1 rep of 3 s, about 1 minute.\nExit status: 0 when every point has a value and the output is "
               "well formed, 1 otherwise (or nginx/wrk missing), 77 for --smoke without nginx/wrk, 130 when "
               "interrupted.")
    ap.add_argument("--build", default="build", help="the CMake build directory (default build): weft-knot is "
                    "BUILD/servers/knot/weft-knot, the file set goes in BUILD/bench-web/smp-fileset")
    ap.add_argument("--knot-bin", help="the weft-knot binary (default BUILD/servers/knot/weft-knot)")
    ap.add_argument("--out-dir", help="where smp_web.json, smp_web.md, smp_web.wrk.log go (default results; "
                    "--smoke: BUILD/bench-web/smp-smoke)")
    ap.add_argument("--quick", action="store_true", help="1 repetition of 3 s per point (about 1 minute)")
    ap.add_argument("--smoke", action="store_true", help="a check, not a measurement: --quick with 1 s per point "
                    "at 50 connections; fails when a point or ratio is missing; exit 77 without nginx or wrk")
    ap.add_argument("--reps", type=int, help="repetitions per point (default 5; --quick 1)")
    ap.add_argument("--duration", type=int, help="seconds of wrk per run (default 4; --quick 3; --smoke 1)")
    ap.add_argument("--connections", type=kb.csv(int), help="comma-separated connection counts (default 100,1000; "
                    "--smoke 50)")
    ap.add_argument("--placements", type=kb.csv(str, list(PLACEMENTS)), help="comma-separated: both (required: the ratios come from it) "
                    "and split (default both,split)")
    ap.add_argument("--knot", default="knot-nb", help="the servers.json entry (kind knot) to run with 1 and 2 "
                    "vprocs (default knot-nb)")
    ap.add_argument("--nginx-reuseport", action="store_true", help="nginx's workers each get an SO_REUSEPORT "
                    "socket, as weft-knot's vprocs do (default: one socket shared by the workers)")
    ap.add_argument("--wrk-threads", type=int, default=2, help="wrk's threads in the \"both\" placement "
                    "(default 2: one per CPU it may use; 1 caps the client at one CPU)")
    ap.add_argument("--servers-file", default=wb.SERVERS_JSON, help="the server list (default bench/web/servers.json)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.quick = True
        args.duration = args.duration or 1
        args.connections = args.connections or [50]
        args.out_dir = args.out_dir or os.path.join(args.build, "bench-web", "smp-smoke")
    args.reps = args.reps or (1 if args.quick else 5)
    args.duration = args.duration or (3 if args.quick else 4)
    args.connections = args.connections or CONNECTIONS
    args.placements = args.placements or list(PLACEMENTS)
    args.out_dir = args.out_dir or "results"
    if args.reps < 1 or args.duration < 1 or args.wrk_threads < 1:
        ap.error("--reps, --duration and --wrk-threads must be >= 1")
    if "both" not in args.placements:
        ap.error("--placements must include both: the ratios come from it")
    return args


class Context:
    """What every run needs."""


def placements_for(args):
    """{name: PLACEMENTS[name] as --wrk-threads says} for the placements asked for."""
    out = {p: copy.deepcopy(PLACEMENTS[p]) for p in args.placements}
    out["both"]["wrk_threads"] = args.wrk_threads
    out["both"]["what"] = f"server and wrk -t{args.wrk_threads} both on CPUs 0-1, placed by the kernel"
    return out


def make_systems(args, placements, spec, tools, knot, root):
    """({id: info}, [(id, command maker)]) for every placement's systems, serving `root`."""
    infos, order = {}, []
    for place, cfg in placements.items():
        cpus = cfg["server"]
        for name, kind, n in SYSTEMS:
            if name not in cfg["systems"]:
                continue
            if kind == "knot":
                s = dict(spec, args=list(spec.get("args", [])) + ["--vprocs", str(n)])
                cmd = wb.server_command(s, tools, {"knot": knot}, cpus, root)
            else:
                cmd = kb.nginx_cmd(tools["nginx"], cpus, root, workers=n, reuseport=args.nginx_reuseport)
            sysid = f"{name}@{place}"
            infos[sysid] = {"name": name, "kind": kind, "workers": n, "placement": place}
            order.append((sysid, cmd))
    return infos, order


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, wb.on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tools, missing = kb.find_tools(True)
    if missing:
        log(f"smp: {', '.join(missing)} not found: install them (Debian: "
            + " ".join({"nginx": "nginx-light", "wrk": "wrk", "taskset": "util-linux"}[m] for m in missing)
            + "; `make bench-smp-web` does it as root)")
        return SKIP if args.smoke else 1
    try:
        spec = wb.load_servers(args.servers_file, [args.knot])[0]
    except (OSError, ValueError) as e:
        log(f"smp: {e}")
        return 1
    if spec["kind"] != "knot":
        log(f"smp: --knot {args.knot} is a {spec['kind']}, not a weft-knot entry")
        return 1
    knot = os.path.abspath(args.knot_bin or os.path.join(args.build, "servers", "knot", "weft-knot"))
    if not os.access(knot, os.X_OK):
        log(f"smp: {knot} not found: build first (cmake --build {args.build})")
        return 1
    allowed = sorted(os.sched_getaffinity(0))
    if not {0, 1} <= set(allowed):
        log(f"smp: needs CPUs 0 and 1; this process may use {allowed}")
        return SKIP if args.smoke else 1
    try:
        return run(args, spec, tools, knot)
    except KeyboardInterrupt:
        log("smp: interrupted: stopping every process started")
        return 130
    finally:
        wb.CHILDREN.end_all()


def run(args, spec, tools, knot):
    t_start = time.monotonic()
    notes = []
    nofile = kb.raise_nofile()
    if nofile < max(args.connections) + 100:
        notes.append(f"RLIMIT_NOFILE is only {nofile}: {max(args.connections):,} connections may fail")
    if os.cpu_count() != 2:
        notes.append(f"this machine has {os.cpu_count()} CPUs; the placements use CPUs 0 and 1 only")
    root = os.path.abspath(os.path.join(args.build, "bench-web", "smp-fileset"))
    try:
        manifest, reused = fs.ensure(root, DIRS, SEED)
    except OSError as e:
        log(f"smp: cannot make the file set in {root}: {e}")
        return 1
    placements = placements_for(args)
    infos, order = make_systems(args, placements, spec, tools, knot, root)
    ctx = Context()
    ctx.duration, ctx.cpus, ctx.placements = args.duration, [0, 1], placements
    ctx.tmp = tempfile.mkdtemp(prefix="smp-web-")
    try:
        model = fs.AccessModel(DIRS, SEED)
        rng = random.Random(SEED)
        ctx.wrk_script = os.path.join(ctx.tmp, "paths.lua")
        wb.write_wrk_script(ctx.wrk_script, [model.sample(rng)[0] for _ in range(wb.WRK_PATHS)])
        plan = kb.make_plan(order, ["mix"], args.connections, args.reps)
        facts = kb.machine_facts(tools, knot)
        log(f"smp: {facts['line']}; {facts['nginx']}; {facts['wrk']}")
        log(f"smp: {len(plan)} runs of {args.duration} s (about {len(plan) * (args.duration + 1.5) / 60:.1f} "
            f"minutes); file set {root} ({'reused' if reused else 'made now'}); RLIMIT_NOFILE {nofile}")
        for place, cfg in placements.items():
            log(f"smp: {place}: {cfg['what']}: {', '.join(cfg['systems'])}")
        for n in notes:
            log("smp: " + n)
        load_start = os.getloadavg()
        slots, commands, spent = run_plan(plan, infos, ctx)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    runs, points, failures = summarise(slots, infos)
    order_key = {sid: i for i, (sid, _) in enumerate(order)}
    points.sort(key=lambda p: (order_key[f"{p['system']}@{p['placement']}"], p["connections"]))
    disturbed = sum(p["disturbed_values"] for p in points)
    if disturbed:
        notes.append(f"{disturbed} of {len(runs)} values were measured while others kept more than {OTHERS_OK} "
                     "CPUs busy (even after running them again): marked ~")
    if spent["quiet_wait_s"] or spent["retry_s"]:
        notes.append(f"{spent['quiet_wait_s']:.0f} s spent waiting for the CPUs to go quiet, {spent['retry_s']:.0f} s "
                     "re-running disturbed runs")
    notes.append("weft-knot's vprocs are not pinned (WEFT_PIN unset) and, before work stealing, a connection "
                 "stays on the vproc whose SO_REUSEPORT socket accepted it: the kernel's hash spreads them")
    total = time.monotonic() - t_start
    data = {"benchmark": BENCHMARK, "generated": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": facts,
            "settings": {"knot": spec["name"], "knot_args": list(spec.get("args", [])), "knot_env": spec.get("env"),
                         "nginx_reuseport": args.nginx_reuseport, "connections": args.connections,
                         "reps": args.reps, "duration_s": args.duration, "quick": args.quick, "smoke": args.smoke,
                         "placements": placements, "wrk_threads": args.wrk_threads,
                         "fileset": root, "files": DIRS * fs.CLASSES * fs.FILES_PER_CLASS,
                         "fileset_bytes": manifest.get("total_bytes") or fs.DIR_BYTES * DIRS,
                         "mean_body_bytes": round(fs.AccessModel(DIRS, SEED).mean_size()),
                         "wrk_paths": wb.WRK_PATHS, "wrk_timeout_s": WRK_TIMEOUT_S, "rlimit_nofile": nofile,
                         "others_ok_cpus": OTHERS_OK},
            "client_accounting": client_accounting(args.wrk_threads),
            "ratios": ratios(points, runs, args.connections), "points": points, "runs": runs,
            "commands": commands, "nginx_conf": kb.nginx_conf("TMP", "PORT", root, 2, args.nginx_reuseport),
            "loadavg_start": list(load_start), "loadavg_end": list(os.getloadavg()),
            "disturbance": {**spent, "others_ok_cpus": OTHERS_OK, "attempts": kb.ATTEMPTS},
            "notes": notes, "failures": failures, "total_seconds": round(total, 1)}
    os.makedirs(args.out_dir, exist_ok=True)
    paths = {k: os.path.join(args.out_dir, f"smp_web.{k}") for k in ("json", "md", "wrk.log")}
    with open(paths["json"], "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    md = render(data)
    with open(paths["md"], "w") as f:
        f.write(md)
    with open(paths["wrk.log"], "w") as f:
        for slot in slots.values():
            for r in slot["runs"]:
                f.write(f"==== {r['label']}\n{r['wrk_output'].rstrip()}\n\n")
    print(md)
    log(f"smp: wrote {', '.join(paths.values())} ({total:.0f} s)")
    planned = [(infos[sid]["name"], infos[sid]["placement"]) for sid, _ in order]
    bad = check_outputs(paths["json"], paths["md"], planned, args.connections)
    if args.smoke:
        bad += [f"{p['system']} ({p['placement']}) c={p['connections']}: {'; '.join(p['flags'])}"
                for p in points if p["flagged"]]
    for b in bad:
        log(f"smp: check: {b}")
    for f in failures:
        log(f"smp: FAILED: {f}")
    log("smp: " + ("check FAILED" if bad else "output checked: ok"))
    return 1 if bad or failures else 0


if __name__ == "__main__":
    sys.exit(main())
