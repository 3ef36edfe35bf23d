#!/usr/bin/env python3
"""weft's virtual threads (C++20 coroutines, weft-vt-bench) against weft
threads, Boost.Fiber, Boost.Asio's C++20 coroutines and Go goroutines, in one
run: `make bench-vt-peers` (QUICK=1 for the short version).

The same four measurements in every program, one task kind each:
  spawn_join   spawn a task that returns at once and join it (ns)
  yield        two tasks yielding to each other (ns per yield)
  channel      two tasks passing an int back and forth through two one-slot
               channels (ns per hand-off; weft threads: two semaphores);
               the peers also through unbuffered channels
  idle_memory  N tasks parked on one event or channel: resident bytes per
               task, (RSS after - RSS before) / N from /proc/self/statm, at
               each --idle size

Programs, from BUILD/bench (a missing or failing one is reported missing,
with the reason):
  vt, weft-thread  weft-vt-bench (one vproc)
  boost-fiber      vt-peer-fiber (bench/vt/peers_fiber.cc; 16 KiB stacks)
  asio             vt-peer-asio  (bench/vt/peers_asio.cc; no channel in 1.74)
  go               vt-peer-go    (bench/vt/peers_go/main.go, GOMAXPROCS=1;
                   built here with `go build` when CMake did not)

Every process is pinned to one CPU (taskset -c CPU); each of REPS
repetitions runs every program once, the order rotated from one repetition
to the next; medians are reported. The timed benchmarks and the first idle
size run in the same processes; each further idle size runs memory-only
processes. Idle sizes above --peer-idle-max (default 10^6) run for virtual
threads only, and no idle run starts that might need (twice its expected
resident memory, from the medians so far or a probe at 10^5) more than
--mem-share of the machine's available memory: it is reported skipped.

Prints a Markdown table with the ratios vt/peer (< 1: the virtual thread is
faster or smaller), writes it to JSON's .md and everything (medians, every
value, each run's CPU share, skipped points and why) to --json; progress on
stderr. Python 3 standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "micro"))
from benchlib import log, machine_line, pick_cpu  # noqa: E402
from report import fmt, fmt_ratio  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP_EXIT = 77

# system id -> (binary in BUILD/bench, label, what provides it)
PROGRAMS = {
    "vt": ("weft-vt-bench", "virtual thread", "weft"),
    "boost-fiber": ("vt-peer-fiber", "Boost.Fiber", "libboost-fiber-dev"),
    "asio": ("vt-peer-asio", "Boost.Asio coroutine", "libboost-dev (Asio, header-only)"),
    "go": ("vt-peer-go", "Go goroutine", "the Go toolchain"),
}
PEERS = ["boost-fiber", "asio", "go"]
COLUMNS = ["vt", "weft-thread"] + PEERS
LABEL = {"vt": "virtual thread", "weft-thread": "weft thread", "boost-fiber": "Boost.Fiber",
         "asio": "Boost.Asio coroutine", "go": "Go goroutine"}
SHORT = {"vt": "vt", "weft-thread": "weft", "boost-fiber": "Fiber", "asio": "Asio", "go": "Go"}
# weft-vt-bench's "kind" -> system id
VT_KINDS = {"virtual thread": "vt", "weft thread": "weft-thread", "weft thread (sem)": "weft-thread"}
TIMED = [("spawn_join", "spawn + join (ns)"), ("yield", "yield (ns per yield)"),
         ("channel", "channel hand-off, one slot (ns)"), ("channel_unbuffered", "channel hand-off, unbuffered (ns)")]
# Resident bytes per idle task assumed before one is measured, for idle runs
# up to PROBE_N; a larger one is sized by a probe at PROBE_N first, and by
# the medians measured once there are some.
BYTES_GUESS = {"vt": 512, "weft-thread": 8192, "boost-fiber": 12288, "asio": 4096, "go": 8192}
# A run whose process got less than CPU_SHARE_OK of its CPU (CPU time over
# wall time, from the children's rusage; every thread of it shares the one
# CPU) is run again, up to ATTEMPTS times, the last kept either way. Runs
# shorter than MIN_JUDGED_S are not judged: weft-vt-bench sleeps 20 ms by
# design (its threads reach their waits), and start-up dominates.
CPU_SHARE_OK = 0.85
ATTEMPTS = 3
MIN_JUDGED_S = 0.3
PROBE_N = 100_000  # idle tasks of the probe that sizes a larger idle run before it starts


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def find_go():
    for c in (shutil.which("go"), "/usr/local/go/bin/go", "/usr/lib/go/bin/go"):
        if c and os.access(c, os.X_OK):
            return c
    return None


def build_go(bench_dir, timeout):
    """`go build` vt-peer-go into BUILD/bench, as CMake does. Returns (path, None) or (None, reason)."""
    go = find_go()
    if not go:
        return None, "vt-peer-go not built and no Go toolchain (go on PATH or /usr/local/go/bin)"
    bench_dir = os.path.abspath(bench_dir)  # go runs in peers_go/, and wants an absolute GOCACHE
    out = os.path.join(bench_dir, "vt-peer-go")
    env = dict(os.environ, GOCACHE=os.path.join(bench_dir, "go-cache"), GOPATH=os.path.join(bench_dir, "go-path"),
               GOTOOLCHAIN="local", GOFLAGS="-buildvcs=false")
    log(f"vt_peers.py: building {out} with {go} ...")
    try:
        p = subprocess.run([go, "build", "-o", out, "main.go"], cwd=os.path.join(HERE, "peers_go"), env=env,
                           capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"go build failed: {e}"
    if p.returncode != 0:
        return None, "go build failed: " + " | ".join(p.stderr.strip().splitlines()[-3:])
    return out, None


def find_programs(bench_dir, want, smoke):
    """{system: path} of the runnable programs, and {system: reason} of the missing."""
    found, missing = {}, {}
    for sysid in ["vt"] + [p for p in PEERS if p in want]:
        exe, _, provider = PROGRAMS[sysid]
        path = os.path.join(bench_dir, exe)
        if os.access(path, os.X_OK):
            found[sysid] = path
        elif sysid == "go" and not smoke:
            path, why = build_go(bench_dir, 600)
            if path:
                found[sysid] = path
            else:
                missing[sysid] = why
        else:
            missing[sysid] = f"{path} not built ({provider} missing when CMake ran?)"
    return found, missing


def run_one(cmd, env, timeout):
    """Runs one process. Returns (records, reason or None, seconds, cpu_share)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=dict(os.environ, **env))
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout} s", time.monotonic() - t0, None
    except OSError as e:
        return [], f"could not run: {e}", time.monotonic() - t0, None
    dt = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    share = cpu / dt if dt > 0 else None
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
        return [], f"exit {p.returncode}: {tail or 'no output'}", dt, share
    return recs, None, dt, share


class Run:
    """Collects the values of every (bench, system, idle size) point."""

    def __init__(self):
        self.values = {}     # (bench, system, n or None) -> [values]
        self.params = {}     # same key -> params of the first record
        self.shares = {}     # system -> [cpu share of each run]
        self.failures = {}   # system -> [reasons]
        self.runs = 0
        self.retries = 0
        self.probe = {}      # system -> bytes per idle task at PROBE_N (sizing only)

    def add(self, key, value, params):
        self.values.setdefault(key, []).append(value)
        self.params.setdefault(key, params)

    def median(self, key):
        v = self.values.get(key)
        return statistics.median(v) if v else None


def read_records(sysid, recs, want_idle, want_weft_idle, timed):
    """(key, value, params) of the records a run was asked for."""
    out = []
    for r in recs:
        bench = str(r.get("bench", ""))[3:] if str(r.get("bench", "")).startswith("vt_") else None
        if bench is None or "value" not in r:
            continue
        if sysid == "vt":
            who = VT_KINDS.get(r.get("kind"))
            params = {"op": r.get("kind")} if r.get("kind") == "weft thread (sem)" else {}
        else:
            who, params = sysid, dict(r.get("params", {}))
        if who is None:
            continue
        if bench in ("idle_memory", "idle_frame"):
            n = want_weft_idle if who == "weft-thread" else want_idle
            if n:
                params.pop("idle", None)
                out.append(((bench, who, n), float(r["value"]), params))
        elif timed:
            out.append(((bench, who, None), float(r["value"]), params))
    return out


def plan_and_run(args, found, idle_sizes, run, skipped):
    cpu = str(args.cpu)
    order = [s for s in ["vt"] + PEERS if s in found]
    mem_note_done = set()

    def per_task(who, n):
        """Resident bytes per idle task to expect: the largest median measured so far, else a probe's."""
        done = [run.median(("idle_memory", who, m)) for m in idle_sizes if run.median(("idle_memory", who, m))]
        if done:
            return max(done)
        if who not in run.probe and n > PROBE_N and not room(BYTES_GUESS[who], n)[0]:
            probe(who)  # the guess says no: measure before deciding
        return run.probe.get(who) or BYTES_GUESS[who]

    def room(per, n):
        """(fits, GiB needed, GiB available): a run may peak above its measured figure (Boost.Fiber's
        stacks grow while they end), hence the factor 2."""
        need = per * n * 2 + (256 << 20)
        avail = mem_available()
        return avail is None or need <= args.mem_share * avail, need / 2**30, (avail or 0) / 2**30

    def probe(who):
        """One memory-only run at PROBE_N tasks, to size the larger ones (not reported)."""
        sysid = "vt" if who == "weft-thread" else who
        if sysid == "vt":
            cmd = [found["vt"], "--ops", "1", "--idle", str(PROBE_N), "--idle-weft", str(PROBE_N), "--json"]
        else:
            cmd = [found[sysid], "--ops", "0", "--idle", str(PROBE_N), "--json"]
        recs, why, dt, _ = run_one(["taskset", "-c", cpu] + cmd, {"GOMAXPROCS": "1"} if sysid == "go" else {},
                                   args.timeout)
        for key, v, _ in read_records(sysid, recs, PROBE_N, PROBE_N if sysid == "vt" else 0, False):
            if key[0] == "idle_memory":
                run.probe[key[1]] = v
        log(f"vt_peers.py: probe {sysid} at {PROBE_N:,} idle tasks (to size the larger runs): "
            + (why or ", ".join(f"{w} {b:,.0f} bytes" for w, b in run.probe.items() if w in (sysid, who)))
            + f" ({dt:.1f} s)")

    def fits(who, n):
        """None if an idle run of n tasks may start, else why not."""
        if who != "vt" and n > args.peer_idle_max:
            done = [run.median(("idle_memory", who, m)) for m in idle_sizes if run.median(("idle_memory", who, m))]
            at = (f": ~{max(done) * n / 2**30:.0f} GiB resident at its {max(done):,.0f} bytes per task"
                  if done else "")
            return f"above --peer-idle-max {args.peer_idle_max:,}{at}"
        ok, need, avail = room(per_task(who, n), n)
        if not ok:
            return (f"might need ~{need:.1f} GiB resident (twice the expected), more than {args.mem_share:.0%} "
                    f"of the {avail:.1f} GiB available now")
        return None

    for k, n in enumerate(idle_sizes):
        timed = k == 0
        phase = "timed + idle" if timed else "idle only"
        for rep in range(args.reps):
            rot = order[rep % len(order):] + order[:rep % len(order)]
            for sysid in rot:
                path = found[sysid]
                why = fits(sysid, n)
                who_idle = n if why is None else 0
                if why and (sysid, n) not in mem_note_done:
                    mem_note_done.add((sysid, n))
                    skipped.append(f"{sysid}: idle memory at {n:,}: {why}")
                weft_idle = 0
                if sysid == "vt":
                    if not timed and who_idle == 0:
                        continue  # nothing this process could add
                    wwhy = fits("weft-thread", n)
                    weft_idle = n if wwhy is None else 0
                    if wwhy and ("weft-thread", n) not in mem_note_done:
                        mem_note_done.add(("weft-thread", n))
                        skipped.append(f"weft-thread: idle memory at {n:,}: {wwhy}")
                    # weft-vt-bench always measures both idle kinds: 1,000 of a kind not asked for (ignored)
                    ops = args.ops if timed else 1000
                    cmd = [path, "--ops", str(ops), "--idle", str(who_idle or 1000), "--idle-weft",
                           str(weft_idle or 1000), "--json"]
                    env = {}
                else:
                    if not timed and who_idle == 0:
                        continue
                    cmd = [path, "--ops", str(args.ops if timed else 0), "--idle", str(who_idle), "--json"]
                    env = {"GOMAXPROCS": "1"} if sysid == "go" else {}
                full = ["taskset", "-c", cpu] + cmd
                label = f"[{phase} {n:,}] rep {rep + 1}/{args.reps} {sysid}"
                attempts = 1 if args.smoke else ATTEMPTS
                for attempt in range(1, attempts + 1):
                    recs, why, dt, share = run_one(full, env, args.timeout)
                    if why or share is None or share >= CPU_SHARE_OK or dt < MIN_JUDGED_S or attempt == attempts:
                        break
                    run.retries += 1
                    log(f"vt_peers.py: {label}: disturbed (cpu share {share:.2f}), running it again")
                run.runs += 1
                if share is not None and dt >= MIN_JUDGED_S:
                    run.shares.setdefault(sysid, []).append(round(share, 3))
                if why:
                    run.failures.setdefault(sysid, []).append(why)
                    log(f"vt_peers.py: {label}: FAILED ({why}): "
                        + " ".join(shlex.quote(c) for c in ([f"{k}={v}" for k, v in env.items()] + full)))
                    continue
                got = read_records(sysid, recs, who_idle, weft_idle, timed)
                for key, v, params in got:
                    run.add(key, v, params)
                summary = ", ".join(f"{key[0]}{'' if key[1] == sysid else ' ' + key[1]} {v:,.1f}"
                                    for key, v, _ in got)
                log(f"vt_peers.py: {label}: {summary} (cpu share {share:.2f}, {dt:.1f} s)" if share is not None
                    else f"vt_peers.py: {label}: {summary} ({dt:.1f} s)")


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def table(run, systems, idle_sizes):
    """(markdown lines, ratio records)."""
    cols = [s for s in COLUMNS if s in systems]
    others = [s for s in cols if s != "vt"]
    head = ["", *[LABEL[s] for s in cols], *[f"vt/{SHORT[s]}" for s in others]]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    ratios = []
    rows = [(b, what, None) for b, what in TIMED] + \
           [("idle_memory", f"idle memory at {n:,} (bytes per task)", n) for n in idle_sizes]
    for bench, what, n in rows:
        vals = {s: run.median((bench, s, n)) for s in cols}
        if all(v is None for v in vals.values()):
            continue
        unit = "bytes" if bench == "idle_memory" else "ns"
        vt_val, vt_cell = vals["vt"], fmt(vals["vt"], unit)
        if bench == "channel_unbuffered" and vt_val is None:
            # weft's channels always have a slot: its one-slot figure, marked
            vt_val = run.median(("channel", "vt", None))
            vt_cell = fmt(vt_val, unit) + " ¹" if vt_val is not None else "—"
        cells = [what, vt_cell] + [fmt(vals[s], unit) for s in others]
        for s in others:
            q = ratio(vt_val, vals[s])
            cells.append(fmt_ratio(q) if q is not None else "—")
            if q is not None:
                ratios.append({"bench": bench, "idle": n, "peer": s, "vt": vt_val, "peer_value": vals[s],
                               "vt_over_peer": round(q, 4),
                               **({"vt_is": "the one-slot channel"} if bench == "channel_unbuffered" else {})})
        lines.append("| " + " | ".join(cells) + " |")
    return lines, ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory holding bench/ (default: build)")
    ap.add_argument("--json", default=None, help="where the results go (default: results/vt_peers.json; the "
                    "Markdown table beside it, .md)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3; medians)")
    ap.add_argument("--ops", type=int, default=None, help="operations per timed benchmark (default 1000000; "
                    "--quick 100000)")
    ap.add_argument("--idle", default=None, help="idle task counts, comma-separated (default 1000000,10000000; "
                    "--quick 100000,1000000); the first also in the timed runs")
    ap.add_argument("--peer-idle-max", type=int, default=1_000_000,
                    help="largest idle count for weft threads and the peers (default 1000000: 10^7 would be "
                    "~27 GB for Go, ~51 GB for Boost.Fiber, ~41 GB for weft threads)")
    ap.add_argument("--mem-share", type=float, default=0.6,
                    help="no idle run starts that may need more than this share of MemAvailable (default 0.6)")
    ap.add_argument("--systems", default=",".join(PEERS), help="peers to run, comma-separated (default: "
                    + ",".join(PEERS) + "); weft-vt-bench always runs")
    ap.add_argument("--cpu", type=int, default=1, help="CPU to pin every process to (default 1)")
    ap.add_argument("--timeout", type=int, default=None, help="seconds per process (default 900; --smoke 5)")
    ap.add_argument("--quick", action="store_true", help="10^5 operations, idle 10^5 and 10^6: about a minute (the default: ~2.5)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny counts, one repetition, no retries, no go build; exit 1 if a built peer has no vt/peer ratio, "
                    f"{SKIP_EXIT} if no peer is built (the CTest entry)")
    args = ap.parse_args()

    if args.smoke:
        args.ops = args.ops or 2000
        args.idle = args.idle or "2000"
        args.reps = 1
        args.timeout = args.timeout or 5  # four programs, no retries: bounded by 20 s
    elif args.quick:
        args.ops = args.ops or 100_000
        args.idle = args.idle or "100000,1000000"
    args.ops = args.ops or 1_000_000
    args.idle = args.idle or "1000000,10000000"
    args.timeout = args.timeout or 900
    try:
        idle_sizes = [int(x.replace("_", "")) for x in args.idle.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--idle: not a list of counts: {args.idle}")
    if not idle_sizes or any(n < 1 or n > 1_000_000_000 for n in idle_sizes):
        ap.error("--idle: counts from 1 to 10^9")
    if args.reps < 1 or args.ops < 1:
        ap.error("--reps and --ops: at least 1")
    want = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in want if s not in PEERS]
    if bad:
        ap.error(f"--systems: unknown {', '.join(bad)} (the peers: {', '.join(PEERS)})")
    out_json = args.json or os.path.join("results", "vt_peers.json")
    out_md = os.path.splitext(out_json)[0] + ".md"
    if not shutil.which("taskset"):
        log("vt_peers.py: taskset not found (util-linux); cannot pin, giving up")
        return 1
    cpu, cpu_note = pick_cpu(args.cpu)
    args.cpu = cpu
    bench_dir = os.path.join(args.build, "bench")
    found, missing = find_programs(bench_dir, want, args.smoke)
    if "vt" not in found:
        log(f"vt_peers.py: {missing.get('vt')}: build first (cmake --build {args.build} --target weft-vt-bench)")
        return 1
    for s, why in missing.items():
        log(f"vt_peers.py: missing: {s}: {why}")
    if not any(p in found for p in PEERS):
        msg = "no peer is built (" + "; ".join(f"{s}: {w}" for s, w in missing.items()) + ")"
        if args.smoke:
            print(f"SKIPPED: vt_peers.py --smoke: {msg}")
            return SKIP_EXIT
        log(f"vt_peers.py: {msg}: measuring weft alone")

    notes = [f"Every process pinned to CPU {cpu} (taskset -c {cpu}); weft one vproc, Go GOMAXPROCS=1, the "
             f"C++ peers on their main kernel thread.",
             f"{args.reps} repetition(s), programs interleaved (order rotated each repetition); medians.",
             f"{args.ops:,} operations per timed benchmark (weft threads' spawn + join: {args.ops // 10:,}).",
             "weft threads' channel row: two weft semaphores (weft-vt-bench's weft thread (sem))."]
    notes.append("¹ weft's Channel<T> always has a slot (capacity 0 is 1): vt's one-slot figure, beside the "
                 "peers' unbuffered channels.")
    if cpu_note:
        notes.append(cpu_note)
    skipped = []
    run = Run()
    t0 = time.monotonic()
    log(f"vt_peers.py: {', '.join(found)}; idle sizes {', '.join(f'{n:,}' for n in idle_sizes)}; "
        f"{args.reps} repetition(s); pinned to CPU {cpu}")
    plan_and_run(args, found, idle_sizes, run, skipped)
    elapsed = time.monotonic() - t0

    for sysid, path in found.items():
        fails = run.failures.get(sysid, [])
        if fails and not any(k[1] == sysid for k in run.values):
            missing[sysid] = f"every run failed: {fails[0]}"
    disturbed = {s: sum(1 for x in v if x < CPU_SHARE_OK) for s, v in run.shares.items()}
    if any(disturbed.values()):
        notes.append("runs whose process got less than {:.0%} of its CPU even after {} attempts (the machine "
                     "was busy; values kept): ".format(CPU_SHARE_OK, ATTEMPTS)
                     + ", ".join(f"{s} {n}" for s, n in disturbed.items() if n))
    if run.retries:
        notes.append(f"{run.retries} run(s) repeated because their process got less than {CPU_SHARE_OK:.0%} of its CPU")
    systems = [s for s in COLUMNS if any(k[1] == s for k in run.values)]
    if "boost-fiber" in systems:
        notes.append("Boost.Fiber: 16 KiB stacks (the smallest page multiple above Boost's "
                     "stack_traits::minimum_size(): params.stack_min); pooled_fixedsize_stack "
                     "for the timed runs, fixedsize_stack (malloc) for the idle ones; parked in "
                     "unbuffered_channel::pop.")
    if "asio" in systems:
        notes.append("Boost.Asio: one io_context (concurrency hint 1); yield is co_await post(ex, use_awaitable); "
                     "idle coroutines wait on one steady_timer; no channel row: Boost 1.74's Asio has no "
                     "channels (asio::experimental::channel came with Boost 1.80).")
    if "go" in systems:
        notes.append("Go: GOMAXPROCS=1, runtime.Gosched for yield, idle goroutines receive from one unbuffered "
                     "channel; a GC before the idle baseline.")
    lines, ratios = table(run, systems, idle_sizes)
    frame = [f"{n:,}: {run.median(('idle_frame', 'vt', n)):.0f} bytes" for n in idle_sizes
             if run.median(("idle_frame", "vt", n)) is not None]
    if frame:
        notes.append("virtual thread's coroutine frame (vt::stats) at " + "; ".join(frame) + ".")
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    command = " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable), *sys.argv])
    md = [f"# Virtual threads against their peers ({date})", "",
          f"`{command}`; {machine_line()}; {elapsed:.0f} s.", "",
          *lines, "",
          "Ratio vt/peer < 1: the virtual thread is faster (smaller). — : not measured.", ""]
    md += [f"- {n}" for n in notes]
    md += [f"- missing: {s}: {w}" for s, w in missing.items()]
    md += [f"- skipped: {s}" for s in skipped]
    text = "\n".join(md) + "\n"
    print(text, end="")

    results = []
    for (bench, sysid, n), vals in sorted(run.values.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        results.append({"bench": bench, "system": sysid, "idle": n, "unit": "bytes" if bench.startswith("idle")
                        else "ns", "median": statistics.median(vals), "min": min(vals), "max": max(vals),
                        "repetitions": len(vals), "values": vals, "params": run.params[(bench, sysid, n)]})
    doc = {"date": date, "machine": machine_line(), "kernel": platform.release(), "command": command,
           "cpu": cpu, "seconds": round(elapsed, 1),
           "settings": {"reps": args.reps, "ops": args.ops, "idle": idle_sizes, "peer_idle_max": args.peer_idle_max,
                        "mem_share": args.mem_share, "quick": args.quick, "smoke": args.smoke},
           "programs": {s: p for s, p in found.items()}, "missing": missing, "skipped": skipped, "notes": notes,
           "cpu_share": run.shares, "failures": run.failures, "results": results, "ratios": ratios}
    os.makedirs(os.path.dirname(os.path.abspath(out_json)), exist_ok=True)
    with open(out_json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(out_md, "w") as f:
        f.write(text)
    log(f"vt_peers.py: wrote {out_json} and {out_md} ({elapsed:.0f} s)")

    if args.smoke:
        bad = []
        for s in PEERS:
            if s not in found:
                continue
            if s in missing:
                bad.append(f"{s}: built but {missing[s]}")
                continue
            have = {r["bench"] for r in ratios if r["peer"] == s}
            need = {"spawn_join", "yield", "idle_memory"} | ({"channel"} if s != "asio" else set())
            if need - have:
                bad.append(f"{s}: no vt/{SHORT[s]} ratio for {', '.join(sorted(need - have))}")
            if f"vt/{SHORT[s]}" not in lines[0]:
                bad.append(f"{s}: the table has no vt/{SHORT[s]} column")
        if "weft-thread" not in systems:
            bad.append("weft-vt-bench gave no weft thread figures")
        if bad:
            print("FAILED: " + "; ".join(bad))
            return 1
        if missing:
            print("smoke: passed for the built peers; not built: " + ", ".join(missing))
        else:
            print("smoke: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
