#!/usr/bin/env python3
"""StagedServer's cache claims under Valgrind's cache simulator, on
scaled-down runs (`make bench-cachegrind`). This machine has no hardware
counters; the paper (Figs. 2, 7, 8) reports L2 misses and CPI.

  (a) pubsub   weft-pubsub threaded against staged (Fig. 8's analogue):
               10^5 subscriptions, 1 and 4 clients, 1 and 2 vprocs
  (b) cap      weft-pubsub at 64 clients on one vproc: threaded, and staged
               with the match stage's cohorts capped at 1 and at 64
  (c) writes   weft-stage-bench --writes (Fig. 2): cohorts of 1..64
               asynchronous 4 KiB writes, per cohort size

Per configuration: instructions (Ir), I1 misses, D1 misses and LL misses
(reads + writes; LL misses include instruction fetches), per event or per
write, and LL misses as a share of LL references (I1 + D1 misses), the
paper's "L2 misses per L2 request".

Method.
- Per operation by difference: every configuration runs twice, with E1 and
  E2 events (writes); (counts(E2) - counts(E1)) / (E2 - E1) removes start-up,
  the index build and the cold cache (the same subscriptions, event
  streams and file offsets in both).
- (a), (b): `valgrind --tool=cachegrind --cache-sim=yes`, whole process.
- (c): weft-stage-bench runs all seven cohort sizes in one process and
  Valgrind 3.19's cachegrind cannot split a run (its start/stop client
  requests came in 3.22), so the per-size counts come from
  `valgrind --tool=callgrind --cache-sim=yes --dump-after=fflush`: the bench
  flushes stdout after each size, so each size is one dump. Callgrind's
  simulator is cachegrind's (same geometry, same model): each run checks
  that the two agree on one deterministic pub-sub run.
- Each pair of runs is repeated (--reps, default 3) and the median taken:
  the pub-sub counts are deterministic to < 0.1 % on one vproc; with two
  vprocs, and in the writes (an idle runner sweeps while a write is in
  flight), instruction counts depend on timing (up to ~10 %); miss counts
  much less.
- Cache geometry (explicit, not the host's): I1 32 KiB 8-way, D1 32 KiB
  8-way, LL 1 MiB 8-way, 64-byte lines: an AMD Zen 4 core's L1s and its
  private L2 (cachegrind models two levels; the shared L3 is not modelled,
  so "LL" stands for the paper's L2 -- 2 MB on its Pentium III Xeons).
- WEFT_IO=poll. Under Valgrind 3.19 with io_uring (the default) a process
  with a second thread (two vprocs; the offload pool) hangs: one thread
  waits in io_uring_enter, the others wait for Valgrind's lock, which the
  waiting call keeps. epoll_pwait2 (syscall 441) is not implemented (ENOSYS:
  an idle epoll vproc would spin). poll's ppoll is handled. With poll, file writes go
  to weft's offload pool instead of io_uring.
- Valgrind runs one thread at a time and simulates one cache for the whole
  process: two vprocs share one simulated I1/D1/LL, and times under it mean
  nothing (only counts are reported). The paper's staged gain came from
  each processor keeping its own partition of the index in its own cache;
  that cannot show here.

Writes OUT_DIR/cachegrind.json (or --out) and OUT_DIR/cachegrind.md.
Python 3 standard library only.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

GEOMETRY = {"I1": "32768,8,64", "D1": "32768,8,64", "LL": "1048576,8,64"}
CG_EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, timeout, env):
    """Runs cmd in its own session; on timeout kills the whole group (a
    deadlocked Valgrind ignores SIGTERM)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        sys.exit(f"cachegrind: timed out after {timeout} s: {' '.join(cmd)}")
    if p.returncode != 0:
        sys.exit(f"cachegrind: {' '.join(cmd)} failed ({p.returncode}): {err.strip()[-600:]}")
    return out, err, time.monotonic() - t0


def valgrind_cmd(tool, out_file, geometry, extra=()):
    return (["valgrind", f"--tool={tool}", "--cache-sim=yes", f"--I1={geometry['I1']}", f"--D1={geometry['D1']}",
             f"--LL={geometry['LL']}", f"--{tool}-out-file={out_file}"] + list(extra))


# Printed while Valgrind reads the host's caches, before --I1/--D1/--LL
# replace them (each output file's `desc:` lines are checked instead).
HOST_CACHE_NOTE = re.compile(r"L3 cache found|(specified|simulated) LL cache:")


def warnings_of(err):
    """Valgrind's warnings (not its summary), deduplicated."""
    seen = []
    for line in err.splitlines():
        m = re.match(r"^(==|--)\d+(==|--) (.*)$", line)
        if (m and re.search(r"warning|switching stacks|unhandled", m.group(3), re.I)
                and not HOST_CACHE_NOTE.search(m.group(3)) and m.group(3) not in seen):
            seen.append(m.group(3))
    return seen


def parse_counts(text, groups=None):
    """The `events:` and `summary:` lines of a cachegrind/callgrind file;
    with groups ({name: regex}, cachegrind's format only), also each group's
    sums over the functions whose names match its regex: (summary, {name: sums})."""
    names = vals = None
    groups = groups or {}
    sums = {g: [0] * 16 for g in groups}
    cur = []
    for line in text.splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("summary:"):
            vals = [int(v) for v in line.split()[1:]]
        elif line.startswith("fn="):
            cur = [sums[g] for g, rx in groups.items() if rx.match(line[3:])]
        elif cur and line[:1].isdigit():
            for i, v in enumerate(line.split()[1:]):
                for acc in cur:
                    acc[i] += int(v)
    if names is None or vals is None:
        raise ValueError("no events/summary lines")

    def named(vs):
        c = dict(zip(names, vs))
        return {k: c.get(k, 0) for k in CG_EVENTS}
    return named(vals) if not groups else (named(vals), {g: named(v) for g, v in sums.items()})


def geometry_of(text):
    """The simulated caches a Valgrind output file says it used."""
    g = {}
    for lvl in ("I1", "D1", "LL"):
        m = re.search(rf"^desc: {lvl} cache:\s+(\d+) B, (\d+) B, (\d+)-way associative", text, re.M)
        if m:
            g[lvl] = f"{m.group(1)},{m.group(3)},{m.group(2)}"
    return g


def check_geometry(text, want, what):
    got = geometry_of(text)
    if got != want:
        sys.exit(f"cachegrind: {what} simulated {got}, not the requested {want}")


def derived(c):
    """The reported counts from the raw events."""
    return {"ir": c["Ir"], "i1_misses": c["I1mr"], "d1_misses": c["D1mr"] + c["D1mw"],
            "ll_misses": c["ILmr"] + c["DLmr"] + c["DLmw"], "ll_refs": c["I1mr"] + c["D1mr"] + c["D1mw"]}


# The matching itself (the paper's "compute-intensive event matching
# portion"): servers/pubsub/matcher.cc's match functions, with what the
# compiler inlined into them (the index's hash lookup, the predicates).
# And a vproc with nothing to run spinning before it sleeps: under Valgrind,
# which runs one thread at a time for up to 100,000 basic blocks, a spinning
# vproc spins far longer than on two real CPUs.
GROUPS = {"matcher": re.compile(r"pubsub::(Subscriptions::matches|Index::match_key|Index::match)\("),
          "idle_spin": re.compile(r"weft::detail::Vproc::spin_for_work\(")}


def per_op(c2, c1, n):
    """(c2 - c1) / n for each derived count, and the LL miss share."""
    d2, d1 = derived(c2), derived(c1)
    r = {k: (d2[k] - d1[k]) / n for k in d2}
    r["ll_miss_pct_of_refs"] = 100 * r["ll_misses"] / r["ll_refs"] if r["ll_refs"] > 0 else None
    return r


def ratio(a, b):
    """a / b; none where b is too small to divide by (a count near zero per
    operation is noise: I1 misses per event, LL misses per write)."""
    return a / b if b is not None and a is not None and b >= 0.05 else None


def median_of(dicts):
    """Per key, the median over dicts (None values left out)."""
    out = {}
    for k in dicts[0]:
        vs = sorted(d[k] for d in dicts if d[k] is not None)
        out[k] = (vs[(len(vs) - 1) // 2] + vs[len(vs) // 2]) / 2 if vs else None
    return out


# ---- (a), (b): weft-pubsub under cachegrind ----

def pubsub_cmd(args, form, clients, vprocs, events, cap=None):
    cmd = [args.pubsub, "--form", form, "--subs", str(args.subs), "--events", str(events),
           "--clients", str(clients), "--vprocs", str(vprocs), "--json"]
    if cap is not None:
        cmd += ["--max-cohort", str(cap), "--profile"]
    return cmd


def pubsub_point(args, env, tmp, form, clients, vprocs, cap=None):
    """The configuration's runs (E1 and E2 events, --reps times) and its
    per-event counts (median over the repetitions)."""
    recs, n = [], args.events[1] - args.events[0]
    for rep in range(args.reps):
        for events in args.events:
            out_file = os.path.join(tmp, f"cg.pubsub.{form}.{clients}.{vprocs}.{cap}.{events}.{rep}")
            full = valgrind_cmd("cachegrind", out_file, args.geometry) + pubsub_cmd(args, form, clients, vprocs, events, cap)
            out, err, secs = run(full, args.timeout, env)
            with open(out_file) as f:
                text = f.read()
            os.unlink(out_file)
            check_geometry(text, args.geometry, out_file)
            counts, groups = parse_counts(text, GROUPS)
            rec = json.loads(out.strip().splitlines()[-1])
            m = re.search(r"^match\s+0\s+([\d.]+)\s+\|", err, re.M)
            recs.append({"rep": rep, "events": events, "command": "WEFT_IO=poll " + " ".join(full),
                         "seconds": round(secs, 1), "counts": counts, "matcher_counts": groups["matcher"],
                         "idle_spin_counts": groups["idle_spin"], "pubsub": rec, "warnings": warnings_of(err),
                         "match_avg_queue": float(m.group(1)) if m else None})
            log(f"  {form:8} clients={clients:<3} vprocs={vprocs} {'cap=' + str(cap) + ' ' if cap is not None else ''}"
                f"events={events:<6} rep {rep + 1}: {counts['Ir']:>14,} Ir  {secs:5.1f} s")
    point = {"form": form, "clients": clients, "vprocs": vprocs, "max_cohort": cap, "events_measured": n}
    for key, counts in (("per_event", "counts"), ("matcher_per_event", "matcher_counts"),
                        ("idle_spin_per_event", "idle_spin_counts")):
        reps = [per_op(recs[2 * r + 1][counts], recs[2 * r][counts], n) for r in range(args.reps)]
        point[key] = median_of(reps)
        point[key + "_reps"] = reps
    point["match_avg_queue"] = recs[-1]["match_avg_queue"]
    point["runs"] = recs
    return point


# ---- (c): Fig. 2's writes under callgrind, one dump per cohort size ----

COHORTS = (1, 2, 4, 8, 16, 32, 64)


def writes_run(args, env, tmp, ops, rep):
    """One callgrind run of weft-stage-bench --writes: a dump per cohort size."""
    out_file = os.path.join(tmp, f"callgrind.writes.{ops}.{rep}")
    data = os.path.join(tmp, "writes.dat")
    cmd = [args.stage_bench, "--writes", "--file", data, "--ops", str(ops), "--reps", "1", "--json"]
    full = valgrind_cmd("callgrind", out_file, args.geometry, ["--dump-after=fflush"]) + cmd
    out, err, secs = run(full, args.timeout, env)
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    parts = []
    for name in os.listdir(tmp):
        m = re.fullmatch(re.escape(os.path.basename(out_file)) + r"(?:\.(\d+))?", name)
        if m:
            with open(os.path.join(tmp, name)) as f:
                text = f.read()
            os.unlink(os.path.join(tmp, name))
            check_geometry(text, args.geometry, name)
            trig = re.search(r"^desc: Trigger: (.*)$", text, re.M)
            parts.append((int(m.group(1) or 0), trig.group(1) if trig else "", parse_counts(text)))
    parts.sort()
    flushes = [p for p in parts if "fflush" in p[1]]
    if len(flushes) != len(COHORTS):
        sys.exit(f"cachegrind: expected {len(COHORTS)} dumps at fflush (one per cohort size), got "
                 f"{len(flushes)}: {' '.join(full)}")
    log(f"  writes   ops={ops:<6} rep {rep + 1}: {secs:5.1f} s")
    return {"rep": rep, "ops": ops, "command": "WEFT_IO=poll " + " ".join(full), "seconds": round(secs, 1),
            "direct": bool(lines and lines[0].get("direct")), "warnings": warnings_of(err),
            "segments": [p[2] for p in flushes], "total": {k: sum(p[2][k] for p in parts) for k in CG_EVENTS}}


def writes_experiment(args, env, tmp):
    n1, n2 = args.writes
    runs, per_rep = [], []
    for rep in range(args.reps):
        r1, r2 = writes_run(args, env, tmp, n1, rep), writes_run(args, env, tmp, n2, rep)
        runs += [r1, r2]
        per_rep.append([per_op(r2["segments"][i], r1["segments"][i], n2 - n1) for i in range(len(COHORTS))])
    rows = []
    for i, k in enumerate(COHORTS):
        reps = [pr[i] for pr in per_rep]
        rows.append({"cohort": k, "writes_measured": n2 - n1, "per_write": median_of(reps), "per_write_reps": reps})
    base = rows[0]["per_write"]
    for r in rows:
        r["relative_to_1"] = {k: ratio(r["per_write"][k], base[k]) for k in ("ir", "i1_misses", "d1_misses", "ll_misses")}
        r["range"] = {k: [min(x[k] for x in r["per_write_reps"]), max(x[k] for x in r["per_write_reps"])]
                      for k in ("ir", "i1_misses")}
    return {"rows": rows, "direct": runs[-1]["direct"], "runs": runs}


def cross_check(args, env, tmp):
    """Callgrind's simulator against cachegrind's, on a deterministic run
    (threaded pub-sub, one client, one vproc, E1 events)."""
    cmd = pubsub_cmd(args, "threaded", 1, 1, args.events[0])
    res = {"command": "WEFT_IO=poll " + " ".join(cmd)}
    for tool in ("cachegrind", "callgrind"):
        out_file = os.path.join(tmp, f"check.{tool}")
        run(valgrind_cmd(tool, out_file, args.geometry) + cmd, args.timeout, env)
        with open(out_file) as f:
            text = f.read()
        os.unlink(out_file)
        check_geometry(text, args.geometry, out_file)
        res[tool] = derived(parse_counts(text))
    res["diff_pct"] = {k: 100 * (res["callgrind"][k] - v) / v if v else None for k, v in res["cachegrind"].items()}
    log("  cross-check callgrind against cachegrind: " +
        ", ".join(f"{k} {fmt(v, 3)} %" for k, v in res["diff_pct"].items()))
    return res


# ---- the report ----

def fmt(v, d=2):
    return "–" if v is None else f"{v:,.{d}f}"


def markdown(out):
    run_ = out["run"]
    g = run_["geometry"]
    md = ["# StagedServer under cachegrind (scaled-down runs)", "",
          f"{run_['date']}; valgrind {run_['valgrind']}; WEFT_IO=poll; I1 {g['I1']}, D1 {g['D1']}, LL {g['LL']} "
          f"(size,assoc,line); per operation by difference of two runs, median of {run_['reps']}; `"
          + run_["command"] + "`", ""]
    if "pubsub" in out:
        p = out["pubsub"]
        md += [f"## (a) weft-pubsub, threaded against staged ({p['subs']:,} subscriptions, per event, "
               f"events {p['events'][0]:,} → {p['events'][1]:,})", "",
               "| clients | vprocs | form | Ir/event | of which idle spin | I1 miss/event | D1 miss/event | LL miss/event "
               "| LL miss % of LL refs |",
               "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for c in p["configs"]:
            e = c["per_event"]
            md.append(f"| {c['clients']} | {c['vprocs']} | {c['form']} | {fmt(e['ir'], 0)} "
                      f"| {fmt(c['idle_spin_per_event']['ir'], 0)} | {fmt(e['i1_misses'], 3)} "
                      f"| {fmt(e['d1_misses'], 0)} | {fmt(e['ll_misses'], 0)} | {fmt(e['ll_miss_pct_of_refs'], 1)} |")
        md += ["", "The matching alone (pubsub::Index::match, match_key, Subscriptions::matches), per event:", "",
               "| clients | vprocs | form | Ir/event | D1 miss/event | LL miss/event | LL miss % of LL refs |",
               "|---:|---:|---|---:|---:|---:|---:|"]
        for c in p["configs"]:
            e = c["matcher_per_event"]
            md.append(f"| {c['clients']} | {c['vprocs']} | {c['form']} | {fmt(e['ir'], 0)} | {fmt(e['d1_misses'], 0)} "
                      f"| {fmt(e['ll_misses'], 0)} | {fmt(e['ll_miss_pct_of_refs'], 1)} |")
        md += ["", "Staged / threaded, per event (whole process | matching alone):", "",
               "| clients | vprocs | Ir | I1 misses | D1 misses | LL misses | LL miss share "
               "| match Ir | match D1 misses | match LL misses |",
               "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in p["ratios"]:
            a, b = r["process"], r["matcher"]
            md.append(f"| {r['clients']} | {r['vprocs']} | {fmt(a['ir'])} | {fmt(a['i1_misses'])} | {fmt(a['d1_misses'])} "
                      f"| {fmt(a['ll_misses'])} | {fmt(a['ll_miss_pct_of_refs'])} "
                      f"| {fmt(b['ir'])} | {fmt(b['d1_misses'])} | {fmt(b['ll_misses'])} |")
    if "cap" in out:
        p = out["cap"]
        md += ["", f"## (b) match-stage cohorts capped, {p['clients']} clients, 1 vproc (per event)", "",
               "| form | max cohort | match avg queue at a visit | Ir/event | I1 miss/event | D1 miss/event | LL miss/event "
               "| LL miss % of LL refs |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for c in p["configs"]:
            e = c["per_event"]
            q = c["match_avg_queue"]
            md.append(f"| {c['form']} | {c['max_cohort'] if c['max_cohort'] is not None else '–'} | {fmt(q, 1)} "
                      f"| {fmt(e['ir'], 0)} | {fmt(e['i1_misses'], 3)} | {fmt(e['d1_misses'], 0)} "
                      f"| {fmt(e['ll_misses'], 0)} | {fmt(e['ll_miss_pct_of_refs'], 1)} |")
    if "writes" in out:
        w = out["writes"]
        md += ["", f"## (c) Fig. 2: cohorts of 4 KiB writes (weft-stage-bench --writes under callgrind, per write, "
               f"{w['rows'][0]['writes_measured']:,} writes per size; {'O_DIRECT' if w['direct'] else 'page cache'})",
               "", "| cohort | Ir/write (range) | I1 miss/write (range) | D1 miss/write | LL miss/write | Ir vs 1 | I1 vs 1 |",
               "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in w["rows"]:
            e, rel, rg = r["per_write"], r["relative_to_1"], r["range"]
            md.append(f"| {r['cohort']} | {fmt(e['ir'], 0)} ({fmt(rg['ir'][0], 0)}–{fmt(rg['ir'][1], 0)}) "
                      f"| {fmt(e['i1_misses'])} ({fmt(rg['i1_misses'][0])}–{fmt(rg['i1_misses'][1])}) "
                      f"| {fmt(e['d1_misses'])} | {fmt(e['ll_misses'])} | {fmt(rel['ir'])} | {fmt(rel['i1_misses'])} |")
    if "cross_check" in out:
        cc = out["cross_check"]
        md += ["", "Cross-check, callgrind's simulator against cachegrind's on one deterministic run (threaded, "
               "1 client, 1 vproc): " + ", ".join(f"{k} {fmt(v, 3)} %" for k, v in cc["diff_pct"].items())]
    warn = sorted({w for sec in ("pubsub", "cap") if sec in out for c in out[sec]["configs"] for r in c["runs"]
                   for w in r["warnings"]} |
                  {w for r in out.get("writes", {}).get("runs", []) for w in r["warnings"]})
    if not warn:
        md += ["", "Valgrind printed no warnings (beyond its notes on the host's caches, which --I1/--D1/--LL replace; "
               "each output file's geometry is checked)."]
    if warn:
        md += ["", "Valgrind's warnings: " + "; ".join(f"`{w}`" for w in warn)]
    return md


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out-dir", default="results")
    ap.add_argument("--out", help="the JSON file (default OUT_DIR/cachegrind.json)")
    ap.add_argument("--subs", type=int, default=100000, help="subscriptions (default 10^5)")
    ap.add_argument("--events", default="1000,5000", help="E1,E2: the two runs' events (default 1000,5000)")
    ap.add_argument("--clients", default="1,4", help="(a) client counts (default 1,4)")
    ap.add_argument("--vprocs", default="1,2", help="(a) vproc counts (default 1,2)")
    ap.add_argument("--cap-clients", type=int, default=64, help="(b) clients (default 64)")
    ap.add_argument("--caps", default="1,64", help="(b) match-stage cohort caps (default 1,64)")
    ap.add_argument("--writes", default="512,2560", help="N1,N2: writes per cohort size in the two runs (c)")
    ap.add_argument("--only", default="pubsub,cap,writes", help="experiments to run (default all three)")
    ap.add_argument("--i1", default=GEOMETRY["I1"], help="size,assoc,line (default %(default)s)")
    ap.add_argument("--d1", default=GEOMETRY["D1"], help="size,assoc,line (default %(default)s)")
    ap.add_argument("--ll", default=GEOMETRY["LL"], help="size,assoc,line (default %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each pair of runs, median (default 3)")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per Valgrind run (default 240)")
    ap.add_argument("--quick", action="store_true",
                    help="5*10^4 subscriptions, events 500,2500, writes 256,1280, one repetition")
    args = ap.parse_args()
    if args.quick:
        args.subs, args.events, args.writes, args.reps = 50000, "500,2500", "256,1280", 1
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    args.events = [int(x) for x in args.events.split(",")]
    args.writes = [int(x) for x in args.writes.split(",")]
    if len(args.events) != 2 or not 0 < args.events[0] < args.events[1]:
        ap.error("--events takes E1,E2 with 0 < E1 < E2")
    if len(args.writes) != 2 or not 0 < args.writes[0] < args.writes[1] or any(n % 64 for n in args.writes):
        ap.error("--writes takes N1,N2 with 0 < N1 < N2, multiples of 64")
    args.geometry = {"I1": args.i1, "D1": args.d1, "LL": args.ll}
    only = set(args.only.split(","))
    if not shutil.which("valgrind"):
        sys.exit("cachegrind: valgrind is not installed (apt-get install valgrind)")
    args.pubsub = os.path.abspath(os.path.join(args.build, "servers", "pubsub", "weft-pubsub"))
    args.stage_bench = os.path.abspath(os.path.join(args.build, "bench", "weft-stage-bench"))
    for b in ((args.pubsub,) if only & {"pubsub", "cap"} else ()) + ((args.stage_bench,) if "writes" in only else ()):
        if not os.access(b, os.X_OK):
            sys.exit(f"cachegrind: {b} not built (make build)")
    version = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, WEFT_IO="poll")

    t0 = time.monotonic()
    out = {"run": {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "valgrind": version.replace("valgrind-", ""),
                   "geometry": args.geometry, "weft_io": "poll", "build": args.build, "reps": args.reps,
                   "subs": args.subs, "events": args.events, "writes": args.writes, "command": " ".join(sys.argv)}}
    # The writes' data file must be on a disk for O_DIRECT: a scratch directory in the build tree.
    tmp = tempfile.mkdtemp(prefix="cachegrind.", dir=os.path.abspath(args.build))
    try:
        if "pubsub" in only:
            log(f"(a) weft-pubsub threaded against staged, {args.subs:,} subscriptions")
            configs = [pubsub_point(args, env, tmp, form, int(c), int(v))
                       for c in args.clients.split(",") for v in args.vprocs.split(",") for form in ("threaded", "staged")]
            ratios = []
            for th, st in zip(configs[0::2], configs[1::2]):
                r = {"clients": th["clients"], "vprocs": th["vprocs"]}
                for key, name in (("per_event", "process"), ("matcher_per_event", "matcher")):
                    a, b = st[key], th[key]
                    r[name] = {k: ratio(a[k], b[k]) for k in a}
                ratios.append(r)
            out["pubsub"] = {"subs": args.subs, "events": args.events, "configs": configs, "ratios": ratios}
        if "cap" in only:
            log(f"(b) match-stage cohort caps at {args.cap_clients} clients, one vproc")
            configs = [pubsub_point(args, env, tmp, "threaded", args.cap_clients, 1)]
            configs += [pubsub_point(args, env, tmp, "staged", args.cap_clients, 1, int(cap)) for cap in args.caps.split(",")]
            out["cap"] = {"subs": args.subs, "events": args.events, "clients": args.cap_clients, "configs": configs}
        if "writes" in only:
            log("(c) Fig. 2: cohorts of writes, per cohort size (callgrind)")
            out["writes"] = writes_experiment(args, env, tmp)
        if only & {"pubsub", "cap"}:
            log("cross-check: callgrind's simulator against cachegrind's")
            out["cross_check"] = cross_check(args, env, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["run"]["seconds"] = round(time.monotonic() - t0, 1)

    md = markdown(out)
    json_path = args.out or os.path.join(args.out_dir, "cachegrind.json")
    os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(out, f, indent=1)
    os.makedirs(args.out_dir, exist_ok=True)
    md_path = os.path.join(args.out_dir, "cachegrind.md")
    with open(md_path, "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    log(f"cachegrind: wrote {json_path} and {md_path} ({out['run']['seconds']} s)")


if __name__ == "__main__":
    main()
