"""What the benchmark drivers (suite.py, pipetest.py) share: logging, the CPU
to pin to, running one benchmark process and reading its JSON record, and
the machine's description. Python 3 standard library only."""
import json
import os
import platform
import resource
import subprocess
import sys
import statistics
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def pick_cpu(wanted):
    """(cpu, note): `wanted` if this process may run there, else the last allowed CPU and why."""
    allowed = sorted(os.sched_getaffinity(0))
    if wanted in allowed:
        return wanted, None
    return allowed[-1], f"CPU {wanted} is not available to this process; using CPU {allowed[-1]}"


def run_one(cmd, timeout, check=None):
    """Run one benchmark process. Returns (record or None, reason or None, seconds).
    The record is the last JSON object line on stdout; check(record) may
    return a reason to reject it."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.monotonic() - t0
    except OSError as e:
        return None, f"could not run: {e}", time.monotonic() - t0
    dt = time.monotonic() - t0
    recs = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if p.returncode != 0 or not recs:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        return None, f"exit {p.returncode}: {tail or 'no output'}", dt
    why = check(recs[-1]) if check else None
    if why:
        return None, why, dt
    return recs[-1], None, dt


def cpus_busy_s(cpus):
    """Seconds CPUs `cpus` (a set of numbers) have been busy since boot, from
    /proc/stat: user, nice, system, irq, softirq and steal (the hypervisor
    running someone else on them); not idle or iowait."""
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *ticks = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                t = [int(x) for x in ticks[:8]]
                busy += t[0] + t[1] + t[2] + t[5] + t[6] + t[7]
    return busy / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_one_watched(cmd, timeout, check, cpus):
    """run_one, and how many CPUs' worth of time other processes (and the
    hypervisor: steal) took from `cpus` while it ran: (record, reason,
    seconds, others). For runs that use several CPUs, where the record's
    cpu_share cannot tell a neighbour from a thread waiting."""
    b0, c0 = cpus_busy_s(cpus), children_cpu_s()
    rec, why, dt = run_one(cmd, timeout, check=check)
    b1, c1 = cpus_busy_s(cpus), children_cpu_s()
    others = max(0.0, (b1 - b0) - (c1 - c0)) / dt if dt > 0 else 0.0
    return rec, why, dt, others


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (what the hypervisor tells)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine_line():
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs, {cpu_model()}"


# ---- running a plan of points --------------------------------------------
#
# A plan is a list of runs, each a dict:
#   key      (benchmark id, system id, params key): the point the run is a
#            repetition of; the params key is a tuple of (name, value) pairs
#   cmd      the command (already pinned with taskset)
#   timeout  seconds
#   label    what the progress line calls it
#   share_ok for CPU-bound runs: a run whose process got less than this share
#            of its CPU (cpu_share in its record) is run again, up to
#            ATTEMPTS times, the last kept either way and counted disturbed;
#            None: no such check (disk-bound runs wait by design)
#   others   optional (cpus, most): for runs on several CPUs, a run during
#            which other processes took more than `most` CPUs' worth of time
#            from the set `cpus` (/proc/stat) is run again the same way; the
#            record gets "others_cpu"
#   check    optional function(record) -> reason to reject it, or None
#   system   optional: the system id the record must carry (weft-pipetest
#            says which backend it really ran)
ATTEMPTS = 3


def run_plan(plan, budget_s=None, prefix=""):
    """Run every entry of `plan` in order, with progress on stderr. Returns
    ({key: slot}, [runs left out because the time budget was spent]); a slot
    holds "values", "recs", "fail" (reasons), "retries", "disturbed"."""
    results, out_of_time = {}, []
    t_start = time.monotonic()
    for i, run in enumerate(plan, 1):
        slot = results.setdefault(run["key"], {"values": [], "recs": [], "fail": [], "retries": 0, "disturbed": 0})
        label = f"{prefix}[{i}/{len(plan)}] {run['label']}"
        if budget_s is not None and time.monotonic() - t_start > budget_s:
            out_of_time.append(run["label"])
            continue
        if slot.get("wrong_system"):
            continue
        share_ok = run.get("share_ok")
        watch = run.get("others")
        for attempt in range(1, ATTEMPTS + 1):
            if watch:
                rec, why, dt, others = run_one_watched(run["cmd"], run["timeout"], run.get("check"), watch[0])
                if rec is not None:
                    rec["others_cpu"] = round(others, 3)
            else:
                rec, why, dt = run_one(run["cmd"], run["timeout"], check=run.get("check"))
            disturbed = disturbance(rec, share_ok, watch)
            if rec is None or not disturbed or attempt == ATTEMPTS:
                break
            slot["retries"] += 1
            log(f"{label}: disturbed ({disturbed}), running it again")
        if rec is None:
            slot["fail"].append(why)
            log(f"{label}: FAILED ({why})")
            continue
        if run.get("system") and rec.get("system") != run["system"]:
            slot["wrong_system"] = rec.get("system")
            slot["fail"].append(f"asked for {run['system']}, the binary ran {rec.get('system')}")
            log(f"{label}: {slot['fail'][-1]}")
            continue
        if disturbance(rec, share_ok, watch):
            slot["disturbed"] += 1
        share = rec.get("cpu_share")
        slot["values"].append(float(rec["value"]))
        slot["recs"].append(rec)
        log(f"{label}: {rec['value']:,.2f} {rec['unit']}" + (f" cpu_share {share:.2f}" if share is not None else "")
            + (f" others {rec['others_cpu']:.2f}" if "others_cpu" in rec else "")
            + f" ({dt:.1f} s, {time.monotonic() - t_start:.0f} s so far)")
    return results, out_of_time


def disturbance(rec, share_ok, watch):
    """Why a run's record counts as disturbed, or None."""
    if rec is None:
        return None
    share = rec.get("cpu_share")
    if share_ok is not None and share is not None and share < share_ok:
        return f"cpu_share {share:.2f}: the CPU was shared"
    others = rec.get("others_cpu")
    if watch and others is not None and others > watch[1]:
        return f"other processes took {others:.2f} CPUs of its {len(watch[0])}"
    return None


def summarise(results, per_run=(), drop=()):
    """Records from run_plan's slots: {"benchmark", "system", "params", "unit",
    "median", "min", "max", "repetitions", "values"}, the params those of the
    first run without `drop` (and `per_run`, which vary per run and are kept
    under "runs"). Returns (records, [reasons for points with no value])."""
    records, failed = [], []
    for (bid, sysid, pkey), slot in results.items():
        if not slot["values"]:
            if slot["fail"]:
                failed.append((bid, sysid, dict(pkey), slot["fail"][0]))
            continue
        vals = slot["values"]
        first = slot["recs"][0]
        params = {k: v for k, v in first.get("params", {}).items() if k not in per_run and k not in drop}
        for k, v in pkey:  # a binary that did less than asked (fewer threads made) says so
            got = [r.get("params", {}).get(k) for r in slot["recs"]]
            if all(isinstance(g, (int, float)) for g in got) and min(got) != v:
                params[f"actual_{k}"] = min(got)
        params.update(dict(pkey))
        rec = {"benchmark": bid, "system": sysid, "params": params, "unit": first["unit"],
               "median": statistics.median(vals), "min": min(vals), "max": max(vals),
               "repetitions": len(vals), "values": vals}
        runs = [{k: r["params"][k] for k in per_run if k in r.get("params", {})} for r in slot["recs"]]
        if any(runs):
            rec["runs"] = runs
        shares = [r.get("cpu_share") for r in slot["recs"] if r.get("cpu_share") is not None]
        if shares:
            rec["cpu_share"] = shares
        others = [r["others_cpu"] for r in slot["recs"] if "others_cpu" in r]
        if others:
            rec["others_cpu"] = others
        if slot["fail"]:
            rec["failed_runs"] = slot["fail"]
        if slot["retries"] or slot["disturbed"]:
            rec["retried_runs"] = slot["retries"]
            rec["disturbed_values"] = slot["disturbed"]
        records.append(rec)
    return records, failed
