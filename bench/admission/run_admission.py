#!/usr/bin/env python3
"""Capriccio §5.3, resource-aware admission control: `make bench-admission`
(QUICK=1 for the short version).

Producers malloc a chunk, write every page of it and read random pages of a
file mapping, then push the chunk on a pool; consumers pop, read and free
(bench/admission/admission.c). Each run lives in its own memory cgroup
(memory.max = --limit-mb, no swap), where the page cache of the data file
competes with the pool: when producers outrun consumers the pool grows, the
kernel evicts the data file, the producers' reads become major faults
(thrashing) and at the limit the process is OOM-killed (a failure).

Runs NPTL (nptl-admission), weft with the FIFO policy and weft with the
resource-aware policy (WEFT_POLICY=resource) for a sweep of producer counts
(--producers, --consumers of them each) and, longer, at one overloaded point
(--series-producers) for the time series.

Cgroups: v2 when a cgroup2 hierarchy has the memory controller (a child of
its root, +memory enabled in the root's cgroup.subtree_control if needed),
else v1 (a child of this process's own memory cgroup). Each run gets a fresh
cgroup, removed after it (and on Ctrl-C). Needs root. The resource policy
reads the limit itself from the usual mounts (v1 /sys/fs/cgroup/memory, v2
/sys/fs/cgroup); elsewhere (--weft-mem-limit auto) its run gets
WEFT_MEM_LIMIT = the cgroup's limit, the documented way to tell it.

Writes OUT_DIR/admission.json (settings and every run with its 100 ms
series), OUT_DIR/admission.md and OUT_DIR/admission.png (loops/s over time
at the overloaded point; loops/s against producers).

On a shared machine: a run during which other processes used >= 0.25 CPUs
(from /proc/stat less this run's own CPU) is flagged [busy] and repeated
once, up to --busy-retries times per invocation, keeping the quieter one.

Bounded: the default run takes about 3 minutes (up to ~4 with re-runs),
--quick under one, --smoke (the CTest smoke test: tiny sizes, checks its
own output, exit 77 when no cgroup can be made) about 15 s; a run is killed
30 s past its length and no run starts after --budget seconds.
"""
import argparse
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
RUNTIMES = {
    # name: (binary, environment, whether it is the resource policy)
    "nptl": ("nptl-admission", {}, False),
    "weft-fifo": ("weft-admission", {"WEFT_POLICY": "fifo"}, False),
    "weft-resource": ("weft-admission", {"WEFT_POLICY": "resource"}, True),
}
DEFAULT_RUNTIMES = ["nptl", "weft-fifo", "weft-resource"]
COLORS = {"nptl": "tab:red", "weft-fifo": "tab:orange", "weft-resource": "tab:blue"}
# A 100 ms interval with at least this many major faults per second counts
# as thrashing (the resource policy's own sign of over-booked memory).
THRASH_FAULTS_S = 200
THRASH_SHARE = 0.10  # a run thrashes when this share of its intervals does
BUSY_CPUS = 0.25     # other processes using this many CPUs meanwhile: the run is flagged

# The data file's cache is 3/4 of the limit: thrashing starts when the pool
# passes ~1/4 of it (~120 MiB of 512), well before the limit itself, as it
# does on a machine whose page cache matters. (--data-mb 256 moves that
# point to ~1/2.)
PROFILES = {
    "full":  dict(limit_mb=512, data_mb=384, chunk="256K", reads=64, producers="1,2,4,8,16,32,64",
                  seconds=6.0, series_producers=16, series_seconds=20.0, budget=200, busy_retries=3),
    "quick": dict(limit_mb=256, data_mb=192, chunk="256K", reads=64, producers="1,4,16",
                  seconds=3.0, series_producers=16, series_seconds=6.0, budget=50, busy_retries=2),
    "smoke": dict(limit_mb=160, data_mb=48, chunk="128K", reads=32, producers="1,8",
                  seconds=1.5, series_producers=8, series_seconds=2.0, budget=30, busy_retries=0),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class CgroupError(Exception):
    """No memory cgroup can be made here (not root, no controller, refused)."""


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, value):
    with open(path, "w") as f:
        f.write(value)


def _mounts():
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4:
                out.append((parts[0], parts[1], parts[2], parts[3].split(",")))
    return out


class Cgroups:
    """Makes one memory cgroup per run under a parent found at start-up."""

    def __init__(self, want="auto"):
        if os.geteuid() != 0:
            raise CgroupError("must run as root: it makes memory cgroups (sudo, or run `make bench-admission` as root)")
        self.made = []
        v2 = [m for m in _mounts() if m[2] == "cgroup2"]
        v1 = [m for m in _mounts() if m[2] == "cgroup" and "memory" in m[3]]
        problems = []
        self.version = None
        if want in ("auto", "2"):
            for _, mnt, _, _ in v2:
                try:
                    ctrls = _read(os.path.join(mnt, "cgroup.controllers")).split()
                except OSError as e:
                    problems.append(f"cgroup v2 at {mnt}: {e}")
                    continue
                if "memory" not in ctrls:
                    problems.append(f"cgroup v2 at {mnt} has no memory controller (controllers: "
                                    f"{' '.join(ctrls) or 'none'}" + ("; memory is on a v1 hierarchy)" if v1 else ")"))
                    continue
                sub = os.path.join(mnt, "cgroup.subtree_control")
                if "memory" not in _read(sub).split():
                    try:
                        _write(sub, "+memory")
                    except OSError as e:
                        problems.append(f"cannot enable +memory in {sub}: {e}")
                        continue
                self.version, self.parent, self.mount = 2, mnt, mnt
                break
            if not v2:
                problems.append("no cgroup v2 hierarchy is mounted")
        if self.version is None and want in ("auto", "1"):
            if not v1:
                problems.append("no cgroup v1 memory hierarchy is mounted")
            else:
                mnt = v1[0][1]
                own = "/"
                for line in _read("/proc/self/cgroup").splitlines():
                    _, ctrls, path = line.split(":", 2)
                    if "memory" in ctrls.split(","):
                        own = path
                parent = os.path.normpath(mnt + own)
                if os.path.isfile(os.path.join(parent, "memory.limit_in_bytes")):
                    self.version, self.parent, self.mount = 1, parent, mnt
                else:
                    problems.append(f"cgroup v1 memory hierarchy at {mnt}: {parent} is not a memory cgroup")
        if self.version is None:
            raise CgroupError("no usable memory cgroup: " + "; ".join(problems))
        # Can a child be made at all?
        probe = self.make("probe", 64 << 20)
        self.remove(probe)

    def describe(self):
        return f"cgroup v{self.version} under {self.parent}"

    def policy_reads_limit(self):
        """Whether weft's resource policy finds the limit by itself (it reads
        v1's memory.limit_in_bytes below /sys/fs/cgroup/memory, or v2's
        memory.max below /sys/fs/cgroup)."""
        if self.version == 1:
            return os.path.normpath(self.mount) == "/sys/fs/cgroup/memory"
        return os.path.normpath(self.mount) == "/sys/fs/cgroup"

    def make(self, tag, limit_bytes):
        path = os.path.join(self.parent, f"weft-admission-{os.getpid()}-{tag}")
        try:
            os.mkdir(path)
        except OSError as e:
            raise CgroupError(f"cannot make {path}: {e}")
        self.made.append(path)
        try:
            if self.version == 2:
                _write(os.path.join(path, "memory.max"), str(limit_bytes))
                if os.path.exists(os.path.join(path, "memory.swap.max")):
                    _write(os.path.join(path, "memory.swap.max"), "0")
            else:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
                memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):
                    try:
                        _write(memsw, str(limit_bytes))
                    except OSError:
                        pass  # swap accounting off: there is no swap to forbid
        except OSError as e:
            self.remove(path)
            raise CgroupError(f"cannot set the memory limit of {path}: {e}")
        return path

    def procs_file(self, path):
        return os.path.join(path, "cgroup.procs")

    def usage_file(self, path):
        return os.path.join(path, "memory.current" if self.version == 2 else "memory.usage_in_bytes")

    def oom_kills(self, path):
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in _read(os.path.join(path, name)).splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def peak_mib(self, path):
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int(_read(os.path.join(path, name)).split()[0]) / 1048576
        except (OSError, ValueError, IndexError):
            return None

    def remove(self, path):
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        else:
            log(f"admission: could not remove {path} (still busy)")
            return
        if path in self.made:
            self.made.remove(path)

    def cleanup(self):
        for path in list(self.made):
            try:
                for pid in _read(self.procs_file(path)).split():
                    try:
                        os.kill(int(pid), 9)
                    except (OSError, ValueError):
                        pass
            except OSError:
                pass
            self.remove(path)


def make_data_file(path, mb):
    """The file whose page cache competes with the pool; made (outside the
    cgroups) once and reused."""
    want = mb << 20
    if os.path.exists(path) and os.path.getsize(path) >= want:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    log(f"admission: writing {path} ({mb} MiB)")
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def busy_cpu_s():
    """CPU seconds the whole machine has spent busy (not idle or waiting for I/O)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def parse_kv(line):
    out = {}
    for tok in line.split()[1:]:
        k, _, v = tok.partition("=")
        try:
            out[k] = float(v) if any(c in v for c in ".e") else int(v)
        except ValueError:
            out[k] = v
    return out


def run_one(args, cg, bins, runtime, producers, seconds, tag, dump_graph=None):
    binary, env_add, is_resource = RUNTIMES[runtime]
    limit = args.limit_mb << 20
    path = cg.make(tag, limit)
    cmd = [bins[binary], "--producers", str(producers), "--consumers", str(args.consumers),
           "--seconds", str(seconds), "--chunk", str(args.chunk), "--data-file", args.data_file,
           "--data-mb", str(args.data_mb), "--reads", str(args.reads), "--think-us", str(args.think_us),
           "--interval-ms", "100", "--cgroup-file", cg.usage_file(path), "--json"]
    if dump_graph:
        cmd += ["--dump-graph", dump_graph]
    env = dict(os.environ)
    for k in ("WEFT_POLICY", "WEFT_MEM_LIMIT", "WEFT_GRAPH"):
        env.pop(k, None)
    env.update(env_add)
    mem_env = None
    if is_resource and (args.weft_mem_limit == "always" or
                        (args.weft_mem_limit == "auto" and not cg.policy_reads_limit())):
        mem_env = str(limit)
        env["WEFT_MEM_LIMIT"] = mem_env
    procs = cg.procs_file(path)

    def enter_cgroup():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    t0 = time.monotonic()
    busy0, kids0 = busy_cpu_s(), children_cpu_s()
    rec = dict(runtime=runtime, producers=producers, consumers=args.consumers, seconds=seconds,
               weft_mem_limit_env=mem_env, command=" ".join(cmd))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         preexec_fn=enter_cgroup)
    try:
        out, err = p.communicate(timeout=seconds + 30)
        timed_out = False
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        timed_out = True
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        rec["oom_kills"] = cg.oom_kills(path)
        rec["cgroup_peak_mib"] = cg.peak_mib(path)
        cg.remove(path)
    rec["wall_s"] = round(time.monotonic() - t0, 2)
    # CPU the rest of the machine used meanwhile (this is a shared machine:
    # a run beside someone else's load is flagged, not silently compared).
    own = children_cpu_s() - kids0
    rec["cpu_s"] = round(own, 2)
    rec["other_cpus"] = round(max(0.0, busy_cpu_s() - busy0 - own) / max(rec["wall_s"], 1e-3), 2)
    rec["exit"] = p.returncode
    intervals, final = [], None
    for line in out.splitlines():
        if line.startswith("interval "):
            intervals.append(parse_kv(line))
        elif line.startswith("{"):
            try:
                final = json.loads(line)
            except json.JSONDecodeError:
                pass
    rec["intervals"] = final["intervals"] if final else intervals
    rec["stderr"] = err.strip()[-2000:]
    iv = rec["intervals"]
    loops = final["producer_loops"] if final else (iv[-1]["loops"] if iv else 0)
    rec["producer_loops"] = loops
    rec["loops_per_s"] = loops / seconds
    # The second half of the planned run; intervals a dead run did not live count 0.
    half = [x["loops_s"] for x in iv if x["t"] > seconds / 2 + 1e-9]
    n_half = max(1, round(seconds / 2 / 0.1))
    rec["steady_loops_per_s"] = sum(half) / max(n_half, len(half)) if half else 0.0
    rec["peak_anon_mib"] = max((x["anon_mib"] for x in iv), default=0.0)
    rec["majflt"] = final["majflt"] if final else (iv[-1]["majflt"] if iv else 0)
    thrash = [x for x in iv if x["majflt_s"] >= THRASH_FAULTS_S]
    rec["thrash_share"] = len(thrash) / len(iv) if iv else 0.0
    rec["died_at_s"] = None
    if timed_out:
        rec["status"] = "timeout"
    elif p.returncode == -9 and rec["oom_kills"] > 0:
        rec["status"] = "oom"
        rec["died_at_s"] = iv[-1]["t"] if iv else 0.0
    elif p.returncode != 0 or not final:
        rec["status"] = "error"
        rec["died_at_s"] = iv[-1]["t"] if iv else 0.0
    elif rec["thrash_share"] >= THRASH_SHARE:
        rec["status"] = "thrashing"
    else:
        rec["status"] = "ok"
    return rec


def status_text(r):
    s = r["status"]
    if s == "oom":
        return f"OOM-killed at {r['died_at_s']:.1f} s"
    if s == "thrashing":
        return f"thrashing ({r['thrash_share'] * 100:.0f} % of intervals >= {THRASH_FAULTS_S} majflt/s)"
    if s == "error":
        return f"failed (exit {r['exit']}): {r['stderr'].splitlines()[-1] if r['stderr'] else 'no output'}"
    if s == "timeout":
        return "timed out"
    return "ok"


def progress(r, t_start):
    log(f"admission: [{time.monotonic() - t_start:.0f} s] {r['runtime']} producers={r['producers']} "
        f"consumers={r['consumers']} {r['seconds']:g} s: {r['loops_per_s']:,.0f} loops/s "
        f"(second half {r['steady_loops_per_s']:,.0f}), peak anon {r['peak_anon_mib']:.0f} MiB, "
        f"cgroup peak {r['cgroup_peak_mib'] or 0:.0f} MiB, {r['majflt']:,} major faults -- {status_text(r)}"
        + (f" [machine busy: other processes used {r['other_cpus']:.1f} CPUs]" if r["other_cpus"] >= BUSY_CPUS else ""))


def fmt_cell(r):
    if r is None:
        return "not run"
    mark = {"ok": "", "thrashing": " (thrash {:.0f} %)".format(r["thrash_share"] * 100),
            "oom": " (OOM at {:.1f} s)".format(r["died_at_s"] or 0), "error": " (failed)",
            "timeout": " (timed out)"}[r["status"]]
    busy = " [busy]" if r.get("other_cpus", 0) >= BUSY_CPUS else ""
    return f"{r['loops_per_s']:,.0f}{mark}{busy}"


def graph_summary(path):
    """Park nodes of a weft graph dump with the heap change of the edges leaving them."""
    try:
        with open(path) as f:
            g = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    out = []
    for n in g.get("nodes", []):
        if n.get("kind") != "park":
            continue
        es = [e for e in g.get("edges", []) if e["from"] == n["id"]]
        cnt = sum(e["count"] for e in es)
        heap = sum(e["heap"] * e["count"] for e in es) / cnt if cnt else 0.0
        out.append(dict(label=n["label"], visits=n["visits"], heap_kib=heap / 1024, outs=cnt))
    return out


def render_md(doc):
    s = doc["settings"]
    runs = doc["runs"]
    rts = s["runtimes"]
    lines = ["# Admission control (Capriccio §5.3)", ""]
    lines.append(f"{s['machine']}. {s['cgroup']}, memory limit {s['limit_mb']} MiB, no swap; data file "
                 f"{s['data_mb']} MiB (MAP_SHARED, {s['reads']} random page reads per producer loop); "
                 f"chunk {s['chunk']} bytes; {s['consumers']} consumers; producer pause "
                 f"{'a yield' if not s['think_us'] else str(s['think_us']) + ' us'}. "
                 f"weft on one vproc; NPTL on {s['cpus']} CPUs.")
    if s.get("weft_mem_limit_env"):
        lines.append("")
        lines.append(f"weft-resource ran with WEFT_MEM_LIMIT={s['weft_mem_limit_env']} (the cgroup's limit): "
                     "this cgroup is not where the policy looks for a limit by itself.")
    sweep = [r for r in runs if r["phase"] == "sweep"]
    if sweep:
        lines += ["", "## Summary", ""]
        peaks = {}
        for rt in rts:
            rs = sorted((x for x in sweep if x["runtime"] == rt), key=lambda x: x["producers"])
            if not rs:
                continue
            ok = [x for x in rs if x["status"] == "ok"] or [x for x in rs if x["status"] == "thrashing"]
            if ok:
                peaks[rt] = max(ok, key=lambda x: x["loops_per_s"])
        ref = peaks.get("weft-fifo") or (max(peaks.values(), key=lambda x: x["loops_per_s"]) if peaks else None)
        for rt in rts:
            rs = sorted((x for x in sweep if x["runtime"] == rt), key=lambda x: x["producers"])
            if not rs:
                continue
            parts = []
            pk = peaks.get(rt)
            if pk:
                parts.append(f"best {pk['loops_per_s']:,.0f} loops/s at {pk['producers']} producers ({pk['status']})")
            died = [x for x in rs if x["status"] in ("oom", "error", "timeout")]
            thr = [x for x in rs if x["status"] == "thrashing"]
            if died:
                parts.append("OOM-killed or failed at " + ", ".join(
                    f"{x['producers']} ({x['died_at_s'] or 0:.1f} s)" for x in died) + " producers")
            if thr:
                parts.append("thrashing at " + ", ".join(
                    f"{x['producers']} ({x['thrash_share'] * 100:.0f} %)" for x in thr) + " producers")
            alive = [x for x in rs if x["status"] in ("ok", "thrashing")]
            if alive and ref and rt != ref["runtime"]:
                lo = min(x["loops_per_s"] for x in alive) / ref["loops_per_s"] * 100
                hi = max(x["loops_per_s"] for x in alive) / ref["loops_per_s"] * 100
                parts.append(f"{lo:.0f}-{hi:.0f} % of {ref['runtime']}'s best where it survived")
            lines.append(f"- {rt}: " + "; ".join(parts or ["no runs"]) + ".")
    lines += ["", "## Producer loops/s against producers", "",
              f"Producer loops over the run ({s['seconds']:g} s; a killed run counts nothing after its death). "
              f"Thrashing: a share of 100 ms intervals with >= {THRASH_FAULTS_S} major faults/s. "
              f"[busy]: other processes used >= {BUSY_CPUS} CPUs during the run.", ""]
    def table(cell):  # producers x runtimes, cell(run or None)
        lines.append("| producers | " + " | ".join(rts) + " |")
        lines.append("|---:|" + "---:|" * len(rts))
        for n in s["producers"]:
            runs_n = [next((x for x in sweep if x["runtime"] == rt and x["producers"] == n), None) for rt in rts]
            lines.append(f"| {n} | " + " | ".join(cell(r) for r in runs_n) + " |")

    table(fmt_cell)
    lines += ["", "Second half of each run (loops/s):", ""]
    table(lambda r: "-" if r is None else f"{r['steady_loops_per_s']:,.0f}")
    series = [r for r in runs if r["phase"] == "series"]
    if series:
        lines += ["", f"## Over time at {s['series_producers']} producers ({s['series_seconds']:g} s)", "",
                  "| runtime | loops/s | first 1 s | last 5 s | peak anon MiB | cgroup peak MiB | major faults | result | other CPUs |",
                  "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
        for r in series:
            iv = r["intervals"]
            first = [x["loops_s"] for x in iv if x["t"] <= 1.0 + 1e-9]
            last_n = max(1, round(min(5.0, r["seconds"]) / 0.1))
            last = [x["loops_s"] for x in iv if x["t"] > r["seconds"] - 5.0 + 1e-9]
            lines.append(f"| {r['runtime']} | {r['loops_per_s']:,.0f} | "
                         f"{(sum(first) / len(first)) if first else 0:,.0f} | "
                         f"{sum(last) / max(last_n, len(last)) if last else 0:,.0f} | {r['peak_anon_mib']:.0f} | "
                         f"{r['cgroup_peak_mib'] or 0:.0f} | {r['majflt']:,} | {status_text(r)} | "
                         f"{r.get('other_cpus', 0):.2f} |")
    view = [r for r in runs if RUNTIMES.get(r["runtime"], (None, None, False))[2] and r["intervals"]]
    if view:
        known = bool(s.get("weft_mem_limit_env")) or s.get("policy_reads_limit")
        lines += ["", "## What the resource policy saw", "",
                  "From the 100 ms samples (the policy reads every 10 ms): memory utilization = anonymous RSS / "
                  f"{s['limit_mb']} MiB"
                  + ("" if known else " -- but this policy run had no limit (WEFT_MEM_LIMIT unset, no cgroup "
                     "limit it can read), so it saw no utilization, only the fault rate")
                  + f"; over-booked from 90 % (down at 80 %) of the capacity, which drops to the memory in use "
                  f"when major faults average >= {THRASH_FAULTS_S}/s over 100 ms and creeps back up 0.5 % per "
                  "10 ms without them (utilization below is against the cgroup's limit); "
                  "producers' tickets doubled below 40 %.", "",
                  "| run | producers | util min-max | share < 40 % | share >= 90 % | share >= 200 majflt/s | mean majflt/s |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in view:
            iv = r["intervals"]
            u = [x["anon_mib"] / s["limit_mb"] for x in iv]
            share = lambda pred: sum(1 for x in iv if pred(x)) / len(iv) * 100
            lines.append(f"| {r['phase']} | {r['producers']} | {min(u) * 100:.0f}-{max(u) * 100:.0f} % | "
                         f"{share(lambda x: x['anon_mib'] / s['limit_mb'] < 0.4):.0f} % | "
                         f"{share(lambda x: x['anon_mib'] / s['limit_mb'] >= 0.9):.0f} % | "
                         f"{share(lambda x: x['majflt_s'] >= THRASH_FAULTS_S):.0f} % | "
                         f"{sum(x['majflt_s'] for x in iv) / len(iv):,.0f} |")
    g = doc.get("graph")
    if g:
        lines += ["", f"Blocking graph of the weft-resource series run (admission.graph.json): the heap change "
                  "the policy forecasts for a thread leaving each node (count-weighted mean of its edges).", "",
                  "| node | visits | heap change per run, KiB | edges out |", "|---|---:|---:|---:|"]
        for n in g:
            lines.append(f"| {n['label']} | {n['visits']:,} | {n['heap_kib']:+,.1f} | {n['outs']:,} |")
    lines += ["", "Plot: admission.png (left: loops/s and anonymous RSS over time at the overloaded point; "
              "right: loops/s against producers, x = OOM-killed, hollow = thrashing).", ""]
    return "\n".join(lines)


def plot(doc, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"plot skipped: matplotlib is not installed ({e}; Debian: python3-matplotlib)"
    s = doc["settings"]
    fig = plt.figure(figsize=(13, 5.6), dpi=110)
    gs = fig.add_gridspec(3, 2, width_ratios=[1.35, 1], hspace=0.08, wspace=0.22)
    a1 = fig.add_subplot(gs[0:2, 0])
    a1m = fig.add_subplot(gs[2, 0], sharex=a1)
    a2 = fig.add_subplot(gs[:, 1])
    for r in (x for x in doc["runs"] if x["phase"] == "series"):
        iv = r["intervals"]
        if not iv:
            continue
        c = COLORS.get(r["runtime"], None)
        t = [x["t"] for x in iv]
        a1.plot(t, [x["loops_s"] for x in iv], color=c, linewidth=1.1,
                label=f"{r['runtime']}: {r['loops_per_s']:,.0f} loops/s, {status_text(r).split(' (')[0]}")
        a1m.plot(t, [x["anon_mib"] for x in iv], color=c, linewidth=1)
        if r["status"] in ("oom", "error"):
            a1.plot([t[-1]], [iv[-1]["loops_s"]], marker="x", color=c, markersize=10, mew=2)
            a1m.plot([t[-1]], [iv[-1]["anon_mib"]], marker="x", color=c, markersize=10, mew=2)
    a1m.axhline(s["limit_mb"], color="grey", linestyle="--", linewidth=0.8)
    a1m.text(0.2, s["limit_mb"] * 0.93, f"limit {s['limit_mb']} MiB (with {s['data_mb']} MiB of data file cache)",
             fontsize=7, va="top", color="grey")
    a1m.set_ylim(0, s["limit_mb"] * 1.05)
    a1m.set_ylabel("anon RSS, MiB", fontsize=9)
    a1m.set_xlabel("time, s")
    a1.set_xlim(0, s["series_seconds"])
    a1.set_ylim(bottom=0)
    a1.tick_params(labelbottom=False)
    a1.set_ylabel("producer loops/s (100 ms intervals)")
    a1.set_title(f"{s['series_producers']} producers, {s['consumers']} consumers; x: OOM-killed", fontsize=10)
    a1.legend(loc="upper right", fontsize=8, framealpha=0.9)
    sweep = [x for x in doc["runs"] if x["phase"] == "sweep"]
    for rt in s["runtimes"]:
        rs = sorted((x for x in sweep if x["runtime"] == rt), key=lambda x: x["producers"])
        if not rs:
            continue
        c = COLORS.get(rt, None)
        a2.plot([x["producers"] for x in rs], [x["loops_per_s"] for x in rs], color=c, label=rt)
        for x in rs:
            if x["status"] in ("oom", "error", "timeout"):
                a2.plot([x["producers"]], [x["loops_per_s"]], marker="x", color=c, markersize=10, mew=2)
            elif x["status"] == "thrashing":
                a2.plot([x["producers"]], [x["loops_per_s"]], marker="o", mfc="none", color=c, markersize=8)
            else:
                a2.plot([x["producers"]], [x["loops_per_s"]], marker="o", color=c, markersize=5)
    a2.set_xscale("log", base=2)
    a2.set_xticks(s["producers"])
    a2.set_xticklabels([str(n) for n in s["producers"]])
    a2.set_ylim(bottom=0)
    a2.set_xlabel(f"producers ({s['consumers']} consumers)")
    a2.set_ylabel(f"producer loops/s over {s['seconds']:g} s")
    a2.set_title(f"{s['limit_mb']} MiB cgroup; x: OOM-killed, hollow: thrashing", fontsize=10)
    a2.legend(fontsize=8)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return None


def check_outputs(out_dir, runtimes):
    """The smoke test's checks: well-formed JSON, loop counts from every runtime, the report."""
    bad = []
    try:
        with open(os.path.join(out_dir, "admission.json")) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        return [f"admission.json: {e}"]
    runs = doc.get("runs")
    if not isinstance(runs, list) or not runs:
        return ["admission.json: no runs"]
    for rt in runtimes:
        mine = [r for r in runs if r.get("runtime") == rt]
        if not mine:
            bad.append(f"{rt}: no run")
        for r in mine:
            if not isinstance(r.get("producer_loops"), int) or r["producer_loops"] <= 0:
                bad.append(f"{rt} producers={r.get('producers')}: no producer loops ({r.get('status')}: "
                           f"{r.get('stderr', '')[-300:]})")
            if not r.get("intervals"):
                bad.append(f"{rt} producers={r.get('producers')}: no intervals")
            for x in r.get("intervals", []):
                if not all(isinstance(x.get(k), (int, float)) for k in ("t", "loops_s", "anon_mib", "majflt_s")):
                    bad.append(f"{rt}: malformed interval {x}")
                    break
    md = os.path.join(out_dir, "admission.md")
    if not os.path.exists(md) or "| producers |" not in _read(md):
        bad.append("admission.md missing or without its table")
    return bad


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main():
    # Ctrl-C and kill both end in the cleanup below (SIGINT even when the
    # shell that started us in the background ignored it).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the CMake build directory (default build)")
    ap.add_argument("--out-dir", help="where admission.{json,md,png} go (default results; --smoke: a temporary directory)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the short version (under a minute)")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes, check the outputs (CTest); exit 77 without cgroups")
    ap.add_argument("--runtimes", default=",".join(DEFAULT_RUNTIMES), help="comma-separated: " + ", ".join(RUNTIMES))
    ap.add_argument("--producers", help="producer counts of the sweep, comma-separated")
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--seconds", type=float, help="seconds per sweep run")
    ap.add_argument("--series-producers", type=int, help="producers of the time series (0: none)")
    ap.add_argument("--series-seconds", type=float)
    ap.add_argument("--limit-mb", type=int, help="the cgroup's memory limit")
    ap.add_argument("--data-mb", type=int, help="size of the data file")
    ap.add_argument("--data-file", help="default var/admission-data.bin (--smoke: BUILD/bench/admission-smoke-data.bin)")
    ap.add_argument("--chunk", help="bytes per producer loop (K/M suffix)")
    ap.add_argument("--reads", type=int, help="random data-file pages a producer reads per loop")
    ap.add_argument("--think-us", type=int, default=0, help="a producer's pause after each loop (0: a yield)")
    ap.add_argument("--cgroup-version", choices=["auto", "1", "2"], default="auto")
    ap.add_argument("--weft-mem-limit", choices=["auto", "always", "never"], default="auto",
                    help="pass the cgroup's limit to the resource policy as WEFT_MEM_LIMIT (auto: when it cannot read it)")
    ap.add_argument("--budget", type=float, help="no run starts after this many seconds")
    ap.add_argument("--busy-retries", type=int,
                    help=f"runs repeated because other processes used >= {BUSY_CPUS} CPUs meanwhile "
                         "(default 3; --quick 2, --smoke 0)")
    args = ap.parse_args()

    prof = PROFILES["smoke" if args.smoke else "quick" if args.quick else "full"]
    for k, v in prof.items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    producers = [int(x) for x in str(args.producers).split(",") if x]
    runtimes = [x for x in args.runtimes.split(",") if x]
    for rt in runtimes:
        if rt not in RUNTIMES:
            sys.exit(f"admission: unknown runtime {rt!r} (known: {', '.join(RUNTIMES)})")
    tmp = None
    if args.smoke and not args.out_dir:
        tmp = tempfile.TemporaryDirectory(prefix="weft-admission-")
        args.out_dir = tmp.name
    args.out_dir = args.out_dir or "results"
    if not args.data_file:
        # Not in a temporary directory: on tmpfs the file's pages would be
        # shared memory, which cannot be evicted without swap.
        args.data_file = (os.path.join(args.build, "bench", "admission-smoke-data.bin") if args.smoke
                          else "var/admission-data.bin")
    args.data_file = os.path.abspath(args.data_file)
    bins = {}
    for rt in runtimes:
        b = RUNTIMES[rt][0]
        path = os.path.join(args.build, "bench", b)
        if not os.access(path, os.X_OK):
            sys.exit(f"admission: {path} not found: build it first (cmake --build {args.build} --target {b})")
        bins[b] = os.path.abspath(path)
    if args.data_mb >= args.limit_mb:
        sys.exit("admission: --data-mb must be below --limit-mb (the file's cache has to fit beside the pool)")

    try:
        cg = Cgroups(args.cgroup_version)
    except CgroupError as e:
        if args.smoke:
            print(f"skipped: {e}")
            sys.exit(SKIP)
        sys.exit(f"admission: {e}")

    os.makedirs(args.out_dir, exist_ok=True)
    make_data_file(args.data_file, args.data_mb)
    mem_env = None
    if "weft-resource" in runtimes and (args.weft_mem_limit == "always" or
                                        (args.weft_mem_limit == "auto" and not cg.policy_reads_limit())):
        mem_env = str(args.limit_mb << 20)
    settings = dict(policy_reads_limit=cg.policy_reads_limit(), machine=f"{platform.node()}, Linux {platform.release()}, {os.cpu_count()} CPUs",
                    cpus=os.cpu_count(), cgroup=cg.describe(), limit_mb=args.limit_mb, data_mb=args.data_mb,
                    chunk=args.chunk, reads=args.reads, think_us=args.think_us, consumers=args.consumers,
                    producers=producers, seconds=args.seconds, series_producers=args.series_producers,
                    series_seconds=args.series_seconds, runtimes=runtimes, weft_mem_limit_env=mem_env,
                    thrash_faults_s=THRASH_FAULTS_S, profile="smoke" if args.smoke else "quick" if args.quick else "full")
    log(f"admission: {cg.describe()}, limit {args.limit_mb} MiB, data {args.data_mb} MiB, chunk {args.chunk}, "
        f"reads {args.reads}, producers {producers} x {args.seconds:g} s, series at {args.series_producers} "
        f"x {args.series_seconds:g} s; runtimes {', '.join(runtimes)}"
        + (f"; weft-resource gets WEFT_MEM_LIMIT={mem_env}" if mem_env else ""))
    t_start = time.monotonic()
    runs, skipped, retries = [], [], 0
    # The time series first: the budget cuts the sweep's end, not it.
    plan = [("series", args.series_producers, args.series_seconds, rt) for rt in runtimes] if args.series_producers else []
    plan += [("sweep", n, args.seconds, rt) for n in producers for rt in runtimes]
    graph_path = os.path.join(args.out_dir, "admission.graph.json")
    if os.path.exists(graph_path):
        os.remove(graph_path)  # a stale one would be read as this run's
    try:
        for k, (phase, n, secs, rt) in enumerate(plan):
            if time.monotonic() - t_start > args.budget:
                skipped.append(f"{phase} {rt} producers={n}")
                continue
            dump = graph_path if phase == "series" and RUNTIMES[rt][2] else None
            r = run_one(args, cg, bins, rt, n, secs, f"{k}", dump_graph=dump)
            r["phase"] = phase
            progress(r, t_start)
            # Beside someone else's load: once more (a few times per
            # invocation), keeping the run that had the machine more to itself.
            if (r["other_cpus"] >= BUSY_CPUS and retries < args.busy_retries
                    and time.monotonic() - t_start <= args.budget):
                retries += 1
                log(f"admission: the machine was busy; running {rt} producers={n} again")
                dump2 = dump + ".retry" if dump else None
                r2 = run_one(args, cg, bins, rt, n, secs, f"{k}b", dump_graph=dump2)
                r2["phase"] = phase
                progress(r2, t_start)
                r2["busy_retry_of_other_cpus"] = r["other_cpus"]
                keep2 = r2["other_cpus"] < r["other_cpus"]
                if dump2 and os.path.exists(dump2):
                    if keep2:
                        os.replace(dump2, dump)
                    else:
                        os.remove(dump2)
                if keep2:
                    r = r2
            runs.append(r)
    except KeyboardInterrupt:
        log("admission: interrupted; removing the cgroups")
        cg.cleanup()
        sys.exit(130)
    finally:
        cg.cleanup()
    if skipped:
        log(f"admission: over the {args.budget:g} s budget, not run: {', '.join(skipped)}")
    settings["skipped"] = skipped
    settings["elapsed_s"] = round(time.monotonic() - t_start, 1)
    doc = dict(settings=settings, runs=runs)
    if os.path.exists(graph_path):
        doc["graph"] = graph_summary(graph_path)
    with open(os.path.join(args.out_dir, "admission.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    md = render_md(doc)
    with open(os.path.join(args.out_dir, "admission.md"), "w") as f:
        f.write(md)
    why = plot(doc, os.path.join(args.out_dir, "admission.png"))
    print(md)
    if why:
        log(f"admission: {why}")
    log(f"admission: wrote {os.path.join(args.out_dir, 'admission.json')}, admission.md"
        + ("" if why else ", admission.png") + f" in {settings['elapsed_s']:.0f} s")
    if args.smoke:
        bad = check_outputs(args.out_dir, runtimes)
        if bad:
            sys.exit("admission smoke: " + "; ".join(bad))
        print("admission smoke: every runtime produced loop counts; outputs well formed")


if __name__ == "__main__":
    main()
