#!/usr/bin/env python3
"""weft's microbenchmark suite (Capriccio section 2) against its peers, in one
run: `make bench-micro` (QUICK=1 for the short version).

Sections (--only picks some):
  table1  create_join, switch, cond_pingpong, mutex_uncontended, mutex_handoff
  memory  RSS per idle thread at 10^4, 10^5 and 10^6 threads
  fig1    producer-consumer throughput, 2 to 65,536 threads
  fig2    pipe tokens, 8 pipes up to the descriptor limit (and the epoll loop)
  fig3    random 4 KiB O_DIRECT reads of a 1 GiB file, 1 to 1,000 readers
  fig4    200 readers, buffer-cache miss rate 0 to 100 %
  stacks  linked against fixed stacks (weft only: weft-stacks, weft-stacks-b):
          bigstack at 800 to 100,000 threads, idle RSS, the hot split
  graph   what the blocking graph costs per park (weft only: weft-micro's
          cond_pingpong, switch and create_join with WEFT_GRAPH unset, =1
          at depth 8, =1 at WEFT_GRAPH_DEPTH=1, and =20): records
          graph.<bench> with params {"graph": "off"|"1"|"20", "depth"}
  smp     issue 15, on two CPUs: every process may use both (taskset -c 0,1)
          and runs --vprocs 2 (weft 2 vprocs, Go GOMAXPROCS=2, Boost.Fiber 2
          kernel threads with work_stealing, NPTL as the kernel schedules;
          State Threads and Boost.Context run on one kernel thread and are
          left out): producer-consumer at Fig. 1's thread counts
          (smp.producer_consumer) and a fork-join tree of threads computing
          fib(n), 150,049 and 1,028,457 threads (smp.fork_join, ns per
          thread). A run during which other processes took more than
          SMP_OTHERS_MAX of a CPU from the two is run again.
on every system whose binary is in BUILD/bench (weft, nptl, st,
boost-context, boost-fiber, go; epoll for Fig. 2): a binary's --list says
which benchmarks it has, and a missing one is reported skipped with the
package that provides it. Every process but smp's is pinned to one CPU
(taskset) and runs --vprocs 1; every point is repeated REPS (>= 3) times,
the systems interleaved.

Writes OUT_DIR/micro.json (a list of records {"benchmark", "system",
"params", "unit", "median", "min", "max", "repetitions", "values", ...}),
OUT_DIR/micro.run.json (the run: machine, settings, skipped points, time,
and "ratios": weft/peer per point of the smp benchmarks), then renders
OUT_DIR/micro.md and the PNG plots with report.py (--name NAME: NAME.json,
NAME.run.json, NAME.md instead; `make bench-smp` writes smp.*).

Bounded: the default run takes about 10 minutes here, --quick about 2; a
section that has spent its share of the time budget starts no more runs (and
says which it left out). Python 3 standard library only (the plots need
matplotlib, and are skipped with a message without it).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

from benchlib import log, machine_line, pick_cpu, run_plan, summarise
import pipetest
import report

SYSTEMS = [("weft", "weft-micro"), ("st", "st-micro"), ("nptl", "nptl-micro"),
           ("boost-context", "boost-context-micro"), ("boost-fiber", "boost-fiber-micro"), ("go", "go-micro")]
PROVIDER = {"st": "State Threads: libst-dev", "boost-context": "libboost-context-dev",
            "boost-fiber": "libboost-fiber-dev", "go": "the Go toolchain"}
SECTIONS = ["table1", "memory", "fig1", "fig2", "fig3", "fig4", "stacks", "graph", "smp"]
TABLE1 = ["create_join", "switch", "cond_pingpong", "mutex_uncontended", "mutex_handoff"]
CPU_SHARE_OK = 0.9
# An NPTL create+join leaves the CPU idle ~12% of the time by itself (the
# joiner sleeps while the kernel finishes the exiting thread).
CPU_SHARE_EXPECTED = {("nptl", "create_join"): 0.88}

# Thread counts no system goes beyond, and the caps of those that cannot go
# as far (kernel.pid_max is 32768 here; Boost.Fiber's malloc'd stacks cost
# ~9 KB resident each).
MEM_COUNTS = [10_000, 100_000, 1_000_000]
MEM_CAP = {"nptl": 10_000, "boost-fiber": 100_000}
FIG1_THREADS = [2, 8, 32, 128, 512, 2048, 8192, 32768, 65536]
FIG1_QUICK = [2, 64, 1024, 16384, 65536]
FIG1_CAP = {"nptl": 8192}
FIG2_QUICK = [8, 64, 512, 4096]
FIG2_NPTL_CAP = 8192
FIG3_THREADS = [1, 4, 16, 64, 256, 1000]
FIG3_QUICK = [1, 16, 256, 1000]
FIG4_MISS = [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
FIG4_QUICK = [0.0, 0.1, 0.5, 1.0]
FIG4_THREADS = 200
BIG_FILE_BYTES = 1 << 30   # Fig. 3 and 4's O_DIRECT file, made once and reused
HIT_FILE_BYTES = 16 << 20  # Fig. 4's cached file
SKIP_EXIT = 77             # a binary's "the kernel refused" (O_DIRECT)

# Seconds per section, full and --quick: the section starts no run after it.
BUDGET = {"table1": (200, 60), "memory": (200, 60), "fig1": (170, 50), "fig2": (170, 45),
          "fig3": (90, 25), "fig4": (90, 25), "stacks": (240, 90), "graph": (120, 45), "smp": (220, 50)}
# Issue 15 on two CPUs (the smp section): the systems that run their threads
# on several kernel threads, the fork-join trees (threads per tree: fib(24)
# and fib(28)), and the most other processes may take of the two CPUs
# during a run (CPUs' worth of time) before it is run again. Boost.Fiber's
# fork_join stops at fib(24): a FIFO scheduler expands the tree breadth
# first, ~10^6 fibers live at once on malloc'd 64 KiB stacks (~7 KB resident
# each) would take ~7 GB of this shared machine.
SMP_VPROCS = 2
SMP_SYSTEMS = ["weft", "nptl", "boost-fiber", "go"]
SMP_FORK_JOIN = [150_049, 1_028_457]
SMP_FORK_JOIN_QUICK = [150_049]
SMP_FORK_JOIN_CAP = {"boost-fiber": 150_049}
SMP_OTHERS_MAX = 0.15
# Linked stacks (issue 9, bench/stacks/weft_stacks.cc): bigstack's thread
# counts, and the most fixed 1 MB stacks this shared machine is asked to
# keep resident (800: 0.85 GiB; 10,000 would be 10.4 GiB).
STACK_THREADS = [800, 10_000, 100_000]
STACK_THREADS_QUICK = [800, 10_000]
FIXED_BIGSTACK_CAP = 800
# The blocking graph (issue 10, src/observe/graph.*): weft-micro's park-heavy
# benchmarks under each setting, (name, environment, params). Every run
# unsets WEFT_GRAPH, WEFT_GRAPH_DEPTH and WEFT_POLICY first, so "off" is off
# whatever the caller's environment says. 5 repetitions at least: the
# differences are a few ns.
GRAPH_BENCHES = ["cond_pingpong", "switch", "create_join"]
GRAPH_CONFIGS = [
    ("off", {}, {"graph": "off", "depth": 0}),
    ("every park, depth 8", {"WEFT_GRAPH": "1"}, {"graph": "1", "depth": 8}),
    ("every park, depth 1", {"WEFT_GRAPH": "1", "WEFT_GRAPH_DEPTH": "1"}, {"graph": "1", "depth": 1}),
    ("one park in 20, depth 8", {"WEFT_GRAPH": "20"}, {"graph": "20", "depth": 8}),
]
GRAPH_REPS = 5


def find_systems(bench_dir):
    found, skipped = [], []
    for sysid, exe in SYSTEMS:
        path = os.path.join(bench_dir, exe)
        if os.access(path, os.X_OK):
            found.append((sysid, path))
        else:
            why = f"{path} not found"
            if sysid in PROVIDER:
                why += f" ({PROVIDER[sysid]} missing when CMake ran?)"
            skipped.append(f"{sysid}: {why}")
    has = {}  # what each binary has (--list): Boost.Context only create_join and switch
    for sysid, path in found:
        try:
            p = subprocess.run([path, "--list"], capture_output=True, text=True, timeout=30)
            has[sysid] = set(p.stdout.split()) if p.returncode == 0 else set()
        except (OSError, subprocess.TimeoutExpired):
            has[sysid] = set()
    return found, has, skipped


def make_file(path, size):
    """The data file, made once: reused when it exists with the right size."""
    if os.path.exists(path) and os.path.getsize(path) == size:
        return f"{path} ({size >> 20} MiB, reused)"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    log(f"suite.py: writing {path} ({size >> 20} MiB, once) ...")
    chunk = os.urandom(1 << 20)
    with open(path + ".tmp", "wb") as f:
        for i in range(size >> 20):
            # every MiB different (a counter in front of random bytes)
            f.write(i.to_bytes(8, "little") + chunk[8:])
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    return f"{path} ({size >> 20} MiB, written now)"


class Planner:
    def __init__(self, cpu, reps, others=None):
        """cpu: the CPU (or list, "0,1") for taskset; others: run_plan's (cpus, most) for every run."""
        self.cpu, self.reps, self.others = str(cpu), reps, others
        self.plan = []

    def add(self, bid, sysid, pkey, path, args, rep, timeout, share_ok, check=None, system=None, env=None):
        """env: [NAME, ...] to unset and {NAME: value} to set, as an `env` prefix (the command reproduces the run)."""
        label = f"{sysid} {bid}" + "".join(f" {k}={v:,}" if isinstance(v, int) else f" {k}={v}" for k, v in pkey)
        prefix = []
        if env is not None:
            unset, assign = env
            prefix = ["env"] + [a for n in unset for a in ("-u", n)] + [f"{k}={v}" for k, v in assign.items()]
        self.plan.append({"key": (bid, sysid, tuple(pkey)),
                          "cmd": prefix + ["taskset", "-c", self.cpu, path] + args + ["--json"],
                          "timeout": timeout, "label": f"{label} rep {rep + 1}", "share_ok": share_ok,
                          "check": check, "system": system, "others": self.others})


def plan_micro(section, pl, systems, has, args, notes, data):
    """Plan a section run by the *-micro binaries."""
    reps, quick = pl.reps, args.quick
    t1_time = 0.1 if quick else 0.3
    if section == "table1":
        for sub in TABLE1:
            for r in range(reps):
                for sysid, path in systems:
                    if sub in has[sysid]:
                        ok = CPU_SHARE_OK * CPU_SHARE_EXPECTED.get((sysid, sub), 1.0)
                        pl.add(report.BENCH_OF[sub], sysid, (), path, ["--bench", sub, "--min-time", f"{t1_time:g}"],
                               r, 120, ok)
    elif section == "memory":
        for n in MEM_COUNTS:
            nrep = reps if n < 1_000_000 else (1 if quick else 2)
            for r in range(nrep):
                for sysid, path in systems:
                    if "memory_idle" in has[sysid] and n <= MEM_CAP.get(sysid, n):
                        pl.add("memory.idle_thread", sysid, (("threads", n),), path,
                               ["--bench", "memory_idle", "--threads", str(n)], r, 600, None)
        if 1_000_000 in MEM_COUNTS:
            notes.append(f"memory.idle_thread at 1,000,000 threads: {1 if quick else 2} repetition(s) (slow)")
        for sysid, cap in MEM_CAP.items():
            if any(s == sysid for s, _ in systems):
                notes.append(f"skipped: {sysid}: memory.idle_thread above {cap:,} threads "
                             + ("(kernel.pid_max)" if sysid == "nptl" else "(its malloc'd stacks would take too "
                                "much of this shared machine's memory)"))
    elif section == "stacks":
        plan_stacks(pl, systems, args, notes)
    elif section == "graph":
        plan_graph(pl, systems, has, args, notes)
    elif section == "smp":
        plan_smp(pl, systems, has, args, notes)
    elif section == "fig1":
        counts = FIG1_QUICK if quick else FIG1_THREADS
        for n in counts:
            for r in range(reps):
                for sysid, path in systems:
                    if "producer_consumer" in has[sysid] and n <= FIG1_CAP.get(sysid, n):
                        pl.add("fig1.producer_consumer", sysid, (("threads", n),), path,
                               ["--bench", "producer_consumer", "--threads", str(n), "--min-time", f"{t1_time:g}"],
                               r, 180, CPU_SHARE_OK)
        for sysid, cap in FIG1_CAP.items():
            if any(s == sysid for s, _ in systems) and any(n > cap for n in counts):
                notes.append(f"skipped: {sysid}: fig1.producer_consumer above {cap:,} threads (kernel.pid_max is "
                             f"{pid_max()}, shared with the whole machine)")
    elif section in ("fig3", "fig4"):
        sub = "odirect_read" if section == "fig3" else "cache_miss_read"
        bid = report.BENCH_OF[sub]
        t = 0.3 if quick else 1.0
        xs = (FIG3_QUICK if quick else FIG3_THREADS) if section == "fig3" else (FIG4_QUICK if quick else FIG4_MISS)
        for x in xs:
            for r in range(reps):
                for sysid, path in systems:
                    if sub not in has[sysid]:
                        continue
                    a = ["--bench", sub, "--min-time", f"{t:g}", "--file", data["big"]]
                    if section == "fig3":
                        pkey, a = (("threads", x),), a + ["--threads", str(x)]
                    else:
                        pkey = (("miss_rate", x),)
                        a += ["--threads", str(FIG4_THREADS), "--miss-rate", f"{x:g}", "--hit-file", data["hit"]]
                    # CPU-bound only when every read hits the cache
                    pl.add(bid, sysid, pkey, path, a, r, 120, CPU_SHARE_OK if section == "fig4" and x == 0 else None)


def pid_max():
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return f.read().strip()
    except OSError:
        return "?"


def plan_stacks(pl, systems, args, notes):
    """Linked against fixed stacks: weft-stacks runs both (system "weft" is
    fixed, "weft-linked" linked with a check in every function);
    weft-stacks-b has the checks only at stackcheck's checkpoints
    ("weft-linked-b"). Records carry params.stacks = fixed|linked."""
    bench_dir = os.path.dirname(dict(systems)["weft"])
    exe, exe_b = os.path.join(bench_dir, "weft-stacks"), os.path.join(bench_dir, "weft-stacks-b")
    if not os.access(exe, os.X_OK):
        notes.append(f"stacks: {exe} not built (no linked stacks in this build: sanitizers?)")
        return
    reps, quick = pl.reps, args.quick
    for n in (STACK_THREADS_QUICK if quick else STACK_THREADS):
        for r in range(1 if n >= 100_000 else reps):
            for stacks, sysid in (("fixed", "weft"), ("linked", "weft-linked")):
                if stacks == "fixed" and n > FIXED_BIGSTACK_CAP:
                    continue
                pl.add("stacks.bigstack", sysid, (("threads", n), ("stacks", stacks)), exe,
                       ["--bench", "bigstack", "--threads", str(n), "--stacks", stacks], r, 600, None)
    notes.append(f"stacks.bigstack: fixed stacks only up to {FIXED_BIGSTACK_CAP:,} threads (1 MB+ resident each)")
    for n in MEM_COUNTS:
        for r in range(reps if n < 1_000_000 else (1 if quick else 2)):
            pl.add("memory.idle_thread", "weft-linked", (("threads", n), ("stacks", "linked")), exe,
                   ["--bench", "idle", "--stacks", "linked", "--threads", str(n)], r, 600, None)
    for r in range(reps):
        pl.add("stacks.hotsplit", "weft", (("stacks", "fixed"),), exe, ["--bench", "hotsplit", "--stacks", "fixed"],
               r, 120, None)
        pl.add("stacks.hotsplit", "weft-linked", (("stacks", "linked"),), exe,
               ["--bench", "hotsplit", "--stacks", "linked"], r, 120, None)
        if os.access(exe_b, os.X_OK):
            pl.add("stacks.hotsplit", "weft-linked-b", (("stacks", "linked"),), exe_b,
                   ["--bench", "hotsplit", "--stacks", "linked"], r, 120, None)


def plan_smp(pl, systems, has, args, notes):
    """Issue 15: every system on both CPUs with --vprocs 2, the systems
    interleaved; the fork-join trees first (few, long runs), then Fig. 1's
    thread counts. Records smp.<bench> with params threads and vprocs."""
    reps, quick = pl.reps, args.quick
    t = 0.1 if quick else 0.3
    vp = ["--vprocs", str(SMP_VPROCS)]
    smp = [(s, p) for s, p in systems if s in SMP_SYSTEMS]
    left = [s for s, _ in systems if s not in SMP_SYSTEMS]
    if left:
        notes.append(f"smp: not run on {', '.join(left)} (one kernel thread only: no --vprocs {SMP_VPROCS})")
    trees = SMP_FORK_JOIN_QUICK if quick else SMP_FORK_JOIN
    for n in trees:
        for r in range(reps):
            for sysid, path in smp:
                if "fork_join" in has[sysid] and n <= SMP_FORK_JOIN_CAP.get(sysid, n):
                    pl.add("smp.fork_join", sysid, (("threads", n), ("vprocs", SMP_VPROCS)), path,
                           ["--bench", "fork_join", "--threads", str(n), "--min-time", f"{t:g}"] + vp, r, 180, None)
    no_fj = [s for s, _ in smp if "fork_join" not in has[s]]
    if no_fj:
        notes.append(f"smp.fork_join: not run on {', '.join(no_fj)} (the binary has no fork_join"
                     + (": a tree of 10^6 kernel threads is past kernel.pid_max)" if "nptl" in no_fj else ")"))
    for sysid, cap in SMP_FORK_JOIN_CAP.items():
        if any(s == sysid for s, _ in smp) and any(n > cap for n in trees):
            notes.append(f"skipped: {sysid}: smp.fork_join above {cap:,} threads (breadth first, ~10^6 fibers "
                         "live at once on malloc'd 64 KiB stacks: ~7 GB of this shared machine)")
    counts = FIG1_QUICK if quick else FIG1_THREADS
    for n in counts:
        for r in range(reps):
            for sysid, path in smp:
                if "producer_consumer" in has[sysid] and n <= FIG1_CAP.get(sysid, n):
                    pl.add("smp.producer_consumer", sysid, (("threads", n), ("vprocs", SMP_VPROCS)), path,
                           ["--bench", "producer_consumer", "--threads", str(n), "--min-time", f"{t:g}"] + vp,
                           r, 180, None)
    for sysid, cap in FIG1_CAP.items():
        if any(s == sysid for s, _ in smp) and any(n > cap for n in counts):
            notes.append(f"skipped: {sysid}: smp.producer_consumer above {cap:,} threads (kernel.pid_max is "
                         f"{pid_max()})")


def plan_graph(pl, systems, has, args, notes):
    """The blocking graph's cost: weft-micro under each GRAPH_CONFIGS
    environment, the configurations interleaved in every repetition."""
    path = dict(systems)["weft"]
    t = 0.1 if args.quick else 0.3
    reps = max(pl.reps, GRAPH_REPS)
    unset = ["WEFT_GRAPH", "WEFT_GRAPH_DEPTH", "WEFT_POLICY"]
    for sub in GRAPH_BENCHES:
        if sub not in has["weft"]:
            notes.append(f"graph: weft-micro has no {sub}")
            continue
        for r in range(reps):
            for _, env, params in GRAPH_CONFIGS:
                pl.add(f"graph.{sub}", "weft", tuple(params.items()), path, ["--bench", sub, "--min-time", f"{t:g}"],
                       r, 120, CPU_SHARE_OK, env=(unset, env))
    notes.append("graph: weft-micro with " + "; ".join(
        f"{name}: " + (" ".join(f"{k}={v}" for k, v in env.items()) or "WEFT_GRAPH unset")
        for name, env, _ in GRAPH_CONFIGS) + f" ({reps} repetitions, interleaved)")


def plan_fig2(pl, args, notes, skipped):
    bench_dir = os.path.join(args.build, "bench")
    systems, miss = pipetest.find_systems(bench_dir)
    systems = [s for s in systems if s[0] in ("epoll", "nptl", "weft-uring")]
    skipped += [m.replace("skipped: ", "") for m in miss if m.split(":")[1].strip() in ("epoll", "nptl", "weft-uring")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else 1 << 20
    top = (limit - pipetest.FD_HEADROOM) // 2
    counts = [n for n in FIG2_QUICK if n <= top] if args.quick else pipetest.pipe_counts(top)
    tokens = 200_000 if args.quick else pipetest.TOKENS_FULL
    run_timeout = 60 if args.quick else pipetest.RUN_TIMEOUT_S
    notes.append(f"fig2.pipe_tokens: {tokens:,} tokens per run; pipes {', '.join(f'{n:,}' for n in counts)} "
                 f"(descriptor limit {limit:,}: at most {top:,} pipes); weft on its io_uring backend "
                 f"(bench/micro/pipetest.py compares the epoll and poll backends too)")
    if any(s[0] == "nptl" for s in systems) and counts and counts[-1] > FIG2_NPTL_CAP:
        notes.append(f"skipped: nptl: fig2.pipe_tokens above {FIG2_NPTL_CAP:,} pipes (a kernel thread per pipe; "
                     f"kernel.pid_max is {pid_max()})")
    for n in counts:
        for r in range(pl.reps):
            for sysid, path, extra in systems:
                if sysid == "nptl" and n > FIG2_NPTL_CAP:
                    continue
                out_sys = "weft" if sysid.startswith("weft") else sysid
                pkey = (("pipes", n),) + ((("io", sysid.split("-", 1)[1]),) if out_sys == "weft" else ())
                pl.plan.append({
                    "key": ("fig2.pipe_tokens", out_sys, pkey),
                    "cmd": ["taskset", "-c", pl.cpu, path, "--pipes", str(n), "--tokens", str(tokens),
                            "--timeout", str(run_timeout - 5), "--json"] + extra,
                    "timeout": run_timeout, "label": f"{out_sys} fig2.pipe_tokens pipes={n:,} rep {r + 1}",
                    "share_ok": CPU_SHARE_OK, "check": pipetest.verified, "system": sysid})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory holding bench/ (default: build)")
    ap.add_argument("--out-dir", default="results", help="where micro.json, micro.md and the plots go (default: results)")
    ap.add_argument("--data-dir", default=None,
                    help="where the 1 GiB O_DIRECT file is made once and reused (default: BUILD/bench-data)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per point (default 3, at least 3)")
    ap.add_argument("--quick", action="store_true", help="fewer points and shorter runs: about 2 minutes")
    ap.add_argument("--cpu", type=int, default=1, help="CPU to pin every process to (default 1)")
    ap.add_argument("--only", default=None, help="comma-separated sections: " + ", ".join(SECTIONS))
    ap.add_argument("--name", default="micro",
                    help="file names: OUT_DIR/NAME.json, NAME.run.json, NAME.md (default micro)")
    args = ap.parse_args()

    reps = max(3, args.reps)
    if args.reps < 3:
        log(f"suite.py: --reps {args.reps} raised to 3 (at least 3 repetitions per point)")
    sections = SECTIONS
    if args.only:
        sections = [s.strip() for s in args.only.split(",") if s.strip()]
        bad = [s for s in sections if s not in SECTIONS]
        if bad:
            ap.error(f"unknown section(s): {', '.join(bad)} (the sections: {', '.join(SECTIONS)})")
    if not shutil.which("taskset"):
        log("suite.py: taskset not found (util-linux); cannot pin, giving up")
        return 1
    cpu, cpu_note = pick_cpu(args.cpu)
    bench_dir = os.path.join(args.build, "bench")
    systems, has, skipped = find_systems(bench_dir)
    if not any(s == "weft" for s, _ in systems):
        log(f"suite.py: weft-micro not found in {bench_dir}: build first (cmake --build {args.build})")
        return 1

    smp_cpus = sorted(os.sched_getaffinity(0))[:SMP_VPROCS]
    header = []
    if any(s != "smp" for s in sections):
        header.append(f"Every benchmark process pinned to one CPU: `taskset -c {cpu}` (all of a system's threads share "
                      f"it; weft runs one vproc, Go GOMAXPROCS=1).")
    if "smp" in sections:
        if len(smp_cpus) < SMP_VPROCS:
            skipped.append(f"smp: needs {SMP_VPROCS} CPUs, this process may use {len(smp_cpus)}")
            sections = [s for s in sections if s != "smp"]
        else:
            header.append(f"smp section: every process may use CPUs {','.join(map(str, smp_cpus))} "
                          f"(`taskset -c {','.join(map(str, smp_cpus))}`) and runs --vprocs {SMP_VPROCS}: weft "
                          f"{SMP_VPROCS} vprocs, Go GOMAXPROCS={SMP_VPROCS}, Boost.Fiber {SMP_VPROCS} kernel threads "
                          f"with algo::work_stealing, NPTL's threads wherever the kernel puts them; a run during "
                          f"which other processes took more than {SMP_OTHERS_MAX} of a CPU from them is run again.")
    header += [f"{reps} repetitions per point (separate processes, systems interleaved); the median is reported.",
               f"Machine: {machine_line()}."]
    if cpu_note:
        header.append(cpu_note)
    header.append("Quick run (QUICK=1): fewer points, shorter measurements." if args.quick else
                  "Full run.")
    for h in header:
        log("suite.py: " + h)
    for s in skipped:
        log("suite.py: skipped: " + s)
    if not sections:
        log("suite.py: nothing to run")
        return 1

    notes, data, all_records, failures = [], {}, [], []
    if {"fig3", "fig4"} & set(sections):
        data_dir = args.data_dir or os.path.join(args.build, "bench-data")
        data["big"] = os.path.join(data_dir, "odirect-1GiB.dat")
        data["hit"] = os.path.join(data_dir, "cached-16MiB.dat")
        try:
            notes.append("fig3/fig4 O_DIRECT file: " + make_file(data["big"], BIG_FILE_BYTES))
            notes.append("fig4 cached file: " + make_file(data["hit"], HIT_FILE_BYTES))
        except OSError as e:
            skipped.append(f"fig3, fig4: could not make the data files in {data_dir}: {e}")
            sections = [s for s in sections if s not in ("fig3", "fig4")]

    t_start = time.monotonic()
    section_time = {}
    for section in sections:
        pl = Planner(cpu, reps)
        if section == "smp":
            pl = Planner(",".join(map(str, smp_cpus)), reps, others=(set(smp_cpus), SMP_OTHERS_MAX))
        if section == "fig2":
            plan_fig2(pl, args, notes, skipped)
        else:
            plan_micro(section, pl, systems, has, args, notes, data)
        budget = BUDGET[section][1 if args.quick else 0]
        log(f"suite.py: {section}: {len(pl.plan)} runs (budget {budget} s)")
        t0 = time.monotonic()
        results, out_of_time = run_plan(pl.plan, budget_s=budget, prefix=f"{section} ")
        section_time[section] = round(time.monotonic() - t0, 1)
        if out_of_time:
            skipped.append(f"{section}: its time budget ({budget} s) was spent; {len(out_of_time)} run(s) left out: "
                           + ", ".join(out_of_time[:5]) + (" ..." if len(out_of_time) > 5 else ""))
        per_run = ("rss_before", "rss_after", "create_park_s", "teardown_s") if section == "memory" else \
            ("vproc_switches", "mutex_parks", "trees", "threads_per_s") if section == "smp" else ()
        drop = ("sink", "requested") + (("tokens", "in_flight") if section != "fig2" else ())
        recs, failed = summarise(results, per_run=per_run, drop=drop)
        for bid, sysid, params, why in failed:
            where = ", ".join(f"{k}={v}" for k, v in params.items())
            if why.startswith(f"exit {SKIP_EXIT}"):
                skipped.append(f"{sysid}: {bid} {where}: the kernel refused it ({why})")
            else:
                failures.append(f"{sysid}: {bid} {where}: every run failed ({why})")
        all_records += recs
    total = time.monotonic() - t_start

    for sysid, _ in systems:
        missing = [s for s in TABLE1 + ["memory_idle", "producer_consumer", "odirect_read", "cache_miss_read"]
                   if s not in has[sysid]]
        if missing:
            notes.append(f"not applicable: {sysid}: {', '.join(missing)} (the binary does not have them)")

    os.makedirs(args.out_dir, exist_ok=True)
    json_path = os.path.join(args.out_dir, args.name + ".json")
    run_path = os.path.join(args.out_dir, args.name + ".run.json")
    with open(json_path, "w") as f:
        json.dump(all_records, f, indent=2)
        f.write("\n")
    run = {"header": header, "notes": notes, "skipped": skipped, "failures": failures, "sections": sections,
           "section_seconds": section_time, "total_seconds": round(total, 1), "quick": args.quick, "cpu": cpu,
           "reps": reps, "ratios": report.ratios(all_records, report.RATIO_BENCHES)}
    with open(run_path, "w") as f:
        json.dump(run, f, indent=2)
        f.write("\n")
    md_path = os.path.join(args.out_dir, args.name + ".md")
    md, plots = report.write(all_records, run, md_path, args.out_dir)
    print(md)
    log(f"suite.py: wrote {json_path}, {run_path}, {md_path}" + (f" and {len(plots)} plots" if plots else "")
        + f" ({total:.0f} s)")
    return 1 if failures and not all_records else 0


if __name__ == "__main__":
    sys.exit(main())
