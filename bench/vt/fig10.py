#!/usr/bin/env python3
"""The Virtual Threads paper's Fig. 10 on weft: a DISK-BOUND web workload,
1 to 500 concurrent clients, weft-vtserver (a C++20-coroutine virtual thread
per connection) against weft-knot (a weft thread per connection), an NPTL
thread-per-connection server (weft-pool on NPTL with a worker per client)
and nginx: `make bench-vt-fig10`.

The paper (virtual-threads.txt §3.4) ran WebStone against servers whose
250 1-MB files did not fit the 128 MB machine's buffer cache, 1-500 clients.
Here the file set does not fit the page cache the server may use:

Method
  * File set: bench/web/fileset.py's SPECweb99-like set (36 sizes, 102 B to
    921,600 B), --size-mb MiB (default 2048: 420 directories, 15,120 files),
    seed 1, made once in --fileset (default var/fileset-fig10) and reused.
  * Disk-bound: each (server, clients) point starts the server -- and only
    it -- in a fresh memory cgroup limited to --mem-limit-mb (default 256 MiB;
    v1 memory.limit_in_bytes, or v2 memory.max; the page cache the server's
    reads bring in is charged to it, so the set cannot stay cached), after
    `sync; echo 3 > /proc/sys/vm/drop_caches`. The cgroup is made with
    bench/admission/run_admission.py's Cgroups (a child of this process's own
    memory cgroup on v1) and entered by a `sh -c 'echo $$ > cgroup.procs;
    exec ...'` prefix, so the server keeps its PID (nginx's worker inherits
    it). Without root (or a memory controller) there is no limit: the run
    stops with a message (exit 1; --smoke: 77) unless --allow-no-cgroup, which
    runs it cache-bound and says so in every output.
  * Requests: closed loop, wrk -t1 -c CLIENTS with a generated Lua script that
    draws each request from the access model: the SPECweb99 class and file mix
    (35/50/14/1 %; fileset.AccessModel) and a directory uniform over the set
    (--popularity uniform, the default: every file is as likely as in the
    paper's WebStone set, so the working set is the whole set) or Zipf alpha=1
    (--popularity zipf, SPECweb99's: most requests go to a few directories that
    stay cached). Seeded: every server gets the same request stream per
    connection count.
  * Per point: drop caches, start the server pinned to --cpu-server (servers
    are bench/web/servers.json entries, started with web_bench.py's
    server_command/start_server; weft's with --stats), wait 1 s, read its idle
    RSS; wrk --warmup s (default 4; not measured: fills the cgroup's page
    cache to its steady state), then wrk --duration s (default 8) measured,
    the server's summed VmRSS and RssAnon sampled every 0.5 s (a
    web_bench.RssWatch); then 36 files, one of each size
    in seeded random directories, fetched and checked byte for byte against
    fileset.expected_sha256 (a server that serves a wrong byte fails the
    point); then SIGTERM and the cgroup removed.
  * Order and noise (a shared 2-CPU VM): the points are interleaved -- every
    server at one client count, in an order rotated from count to count,
    before the next count -- for --repeat rounds (default 2); the round with
    the most req/s is reported (other load only slows a run), every round's
    req/s beside it. Before each point the harness waits (up to --quiet-wait
    s) for both CPUs to be quiet; a point during which >= 0.25 CPU outside
    the server and wrk was busy, or others read >= 10 % as much from the disk,
    is run once more (--busy-retries in all) and, if still disturbed, marked.
  * Recorded: req/s and MB/s (wrk; MB = 10^6 bytes, headers included), mean
    and p99 latency (wrk --latency), errors (wrk's socket errors and non-2xx),
    server CPU % (user + system, /proc), RSS idle and peak (VmRSS summed over
    the server's processes, and its RssAnon part: VmRSS also counts mapped
    files, which the cgroup's reclaim evicts under load, so it can shrink),
    per connection = (anon peak - anon idle) / clients (VmRSS's too, in the
    JSON) and marginal = (anon peak - anon peak at the fewest clients) /
    (clients - fewest), where constant costs (the fd cache) cancel,
    bytes the server read from disk (read_bytes of /proc/PID/io summed over its
    processes: the storage reads its threads, offload workers and io_uring
    workers caused) and the device's sectors read (/sys/block, the whole
    machine: a cross-check), the cgroup's peak usage, cache and anon memory.
  * Servers (--servers, names in bench/web/servers.json): vtserver, knot-nb,
    knot-uring, pool (weft-pool on NPTL; its --workers is set to the point's
    clients, so every connection has its own kernel thread, as in a
    thread-per-connection server) and nginx (knot_bench.py's configuration:
    master and one worker, sendfile, no aio).

Outputs: --json (default results/vt_fig10.json: settings, machine, every
point, the ratios), the Markdown report beside it (.md, also printed), and
with matplotlib the plot --png (default docs/figures/vt_fig10.png:
throughput and anonymous RSS against clients). Progress on stderr, one line
per point. --render JSON writes the report and plot again from a run's JSON.

Bounded: every wrk run stops after its duration (killed 60 s later if it has
not), a server that does not stop on SIGTERM within 5 s is killed, and no point
starts after --budget-s seconds (default 1,800): those are reported as skipped.
Ctrl-C or SIGTERM stops every process started and removes every cgroup made.

Python 3 standard library (matplotlib optional).
"""
import argparse
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import hashlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench", "web"))
sys.path.insert(0, os.path.join(REPO, "bench", "admission"))
import web_bench as wb  # noqa: E402  (servers.json, starting/stopping servers, RSS, http_get)
import run_admission as ra  # noqa: E402  (memory cgroups)

kb, fs = wb.kb, wb.fs
SKIP = 77
SEED = 1
DEFAULT_SERVERS = "vtserver,knot-nb,knot-uring,pool,nginx"
DEFAULT_CLIENTS = "1,10,50,100,200,500"
TIMEOUT_S = 15.0  # wrk's per-request timeout (as web_bench's client timeout)
PRESETS = {
    "full": {"clients": DEFAULT_CLIENTS, "duration": 8, "warmup": 4, "repeat": 2, "size_mb": 2048, "mem_limit_mb": 256,
             "fileset": os.path.join(REPO, "var", "fileset-fig10")},
    # A few minutes: a quarter of the set and of the limit, two client counts.
    "quick": {"clients": "1,50", "duration": 4, "warmup": 2, "repeat": 1, "size_mb": 256, "mem_limit_mb": 64,
              "fileset": os.path.join(REPO, "var", "fileset-fig10-quick")},
}
VT = "vtserver"
# A point is re-run when this much CPU outside the server and wrk was busy during it, or when others read
# this share of the server's own disk reads (and at least 32 MB) from the same disk.
BUSY_CPUS = 0.25
# A ratio within this of 1.0 counts as equal: the rounds of one point differ by more than that here.
GOAL_NOISE = 0.03
BUSY_DISK_SHARE = 0.10


def log(msg):
    print(f"fig10: {msg}", file=sys.stderr, flush=True)


# ---- memory cgroups ---------------------------------------------------------------------

class Cgroups(ra.Cgroups):
    """run_admission's cgroups, named for this benchmark."""

    def make(self, tag, limit_bytes):
        path = os.path.join(self.parent, f"weft-vt-fig10-{os.getpid()}-{tag}")
        try:
            os.mkdir(path)
        except OSError as e:
            raise ra.CgroupError(f"cannot make {path}: {e}")
        self.made.append(path)
        try:
            if self.version == 2:
                ra._write(os.path.join(path, "memory.max"), str(limit_bytes))
                if os.path.exists(os.path.join(path, "memory.swap.max")):
                    ra._write(os.path.join(path, "memory.swap.max"), "0")
            else:
                ra._write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
                memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):
                    try:
                        ra._write(memsw, str(limit_bytes))
                    except OSError:
                        pass  # swap accounting off
        except OSError as e:
            self.remove(path)
            raise ra.CgroupError(f"cannot set the memory limit of {path}: {e}")
        return path

    def stat(self, path):
        """A few figures of memory.stat (bytes): anon and page cache, both versions' names."""
        out = {}
        try:
            for line in ra._read(os.path.join(path, "memory.stat")).splitlines():
                k, _, v = line.partition(" ")
                if k in ("cache", "rss", "mapped_file", "pgmajfault", "anon", "file", "file_mapped"):
                    out[k] = int(v)
        except (OSError, ValueError):
            pass
        try:
            out["usage"] = int(ra._read(self.usage_file(path)).split()[0])
        except (OSError, ValueError, IndexError):
            pass
        return out

    def failcnt(self, path):
        try:
            if self.version == 1:
                return int(ra._read(os.path.join(path, "memory.failcnt")).split()[0])
            for line in ra._read(os.path.join(path, "memory.events")).splitlines():
                k, _, v = line.partition(" ")
                if k == "max":
                    return int(v)
        except (OSError, ValueError, IndexError):
            pass
        return None


    def discard(self, path):
        """Kill whatever is still in the cgroup, then remove it."""
        try:
            for pid in ra._read(self.procs_file(path)).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        except OSError:
            pass
        self.remove(path)

    def remove(self, path, wait_s=15.0):
        """rmdir, retried for up to wait_s: a server's io_uring workers leave the cgroup a moment after it
        has been reaped."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if time.monotonic() >= deadline:
                    log(f"could not remove the cgroup {path} ({e}): remove it with rmdir")
                    return
                time.sleep(0.1)
        if path in self.made:
            self.made.remove(path)


def in_cgroup(cmd_fn, procs_file):
    """A command maker whose command first moves itself into the cgroup
    (`echo $$ > cgroup.procs`) and then execs the server (same PID)."""
    if not procs_file:
        return cmd_fn

    def cmd(port, tmp):
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs_file] + cmd_fn(port, tmp)
    return cmd


def drop_caches(root):
    """Empty the page cache: drop_caches as root; else posix_fadvise(DONTNEED)
    on every file of the set (clean pages only). Returns how."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        pass
    for dirpath, _, names in os.walk(root):
        for n in names:
            try:
                fd = os.open(os.path.join(dirpath, n), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    return "fadvise"


# ---- the server's own figures -----------------------------------------------------------

def io_read_bytes(pids):
    """read_bytes of /proc/PID/io summed: what the processes caused to be read from storage."""
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/io") as f:
                for line in f:
                    if line.startswith("read_bytes:"):
                        total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return total


def mem_kb(pids):
    """(VmRSS, RssAnon) in kB summed over pids. RssAnon (heap, stacks, frames) is what connections cost;
    VmRSS adds mapped files (the binary, libraries), which the cgroup's reclaim may evict under load."""
    rss = anon = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
                    elif line.startswith("RssAnon:"):
                        anon += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return rss, anon


class MemWatch(wb.RssWatch):
    """web_bench's RssWatch (every 0.5 s), keeping the largest VmRSS and RssAnon."""

    def loop(self):
        self.max_anon_kb = 0
        while not self.halt.is_set():
            rss, anon = mem_kb(self.server.pids())
            self.max_kb, self.max_anon_kb = max(self.max_kb, rss), max(self.max_anon_kb, anon)
            self.halt.wait(0.5)


def root_device(path):
    """/sys/block/NAME/stat of the disk holding path (its partition's parent), None if not found."""
    try:
        dev = os.stat(path).st_dev
        sys_dev = os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    except OSError:
        return None
    for cand in (sys_dev, os.path.dirname(sys_dev)):
        if os.path.exists(os.path.join(cand, "stat")) and os.path.basename(os.path.dirname(cand)) == "block":
            return os.path.join(cand, "stat")
    if os.path.exists(os.path.join(sys_dev, "stat")):
        return os.path.join(sys_dev, "stat")
    return None


def device_read_bytes(stat_path):
    if not stat_path:
        return None
    try:
        with open(stat_path) as f:
            return int(f.read().split()[2]) * 512
    except (OSError, ValueError, IndexError):
        return None


# ---- the load -----------------------------------------------------------------------------

def write_wrk_script(path, dirs, popularity, seed):
    """A wrk Lua script drawing each request from the access model: the
    class/file mix of fileset.AccessModel and a directory uniform or Zipf."""
    model = fs.AccessModel(dirs, seed)
    if popularity == "zipf":
        dw = [model.prob_dir(d) for d in range(dirs)]
    else:
        dw = [1.0 / dirs] * dirs
    cf = [(c, i) for c in range(fs.CLASSES) for i in range(fs.FILES_PER_CLASS)]
    cw = [model.prob_class(c) * model.prob_file(i) for c, i in cf]

    def cum(ws):
        out, s = [], 0.0
        tot = sum(ws)
        for w in ws:
            s += w / tot
            out.append(s)
        out[-1] = 1.0
        return out

    with open(path, "w") as f:
        f.write(f"-- written by bench/vt/fig10.py: {popularity} directories over {dirs}, SPECweb99 class/file mix\n")
        f.write("local dircum = {" + ",".join(f"{x:.12g}" for x in cum(dw)) + "}\n")
        f.write("local names = {" + ",".join(f'"{fs.file_name(c, i)}"' for c, i in cf) + "}\n")
        f.write("local namecum = {" + ",".join(f"{x:.12g}" for x in cum(cw)) + "}\n")
        f.write(f"math.randomseed({seed})\n")
        f.write("local function pick(cum)\n"
                "  local r, lo, hi = math.random(), 1, #cum\n"
                "  while lo < hi do\n"
                "    local mid = math.floor((lo + hi) / 2)\n"
                "    if cum[mid] < r then lo = mid + 1 else hi = mid end\n"
                "  end\n"
                "  return lo\n"
                "end\n"
                "request = function()\n"
                "  local d, n = pick(dircum), pick(namecum)\n"
                "  return wrk.format(\"GET\", string.format(\"/dir%05d/%s\", d - 1, names[n]))\n"
                "end\n")


def wrk(port, clients, seconds, ctx):
    """One wrk run: (parsed result, command) or raises RuntimeError."""
    return kb.run_wrk(f"http://127.0.0.1:{port}/", clients, seconds, ctx.cpu_client,
                      extra=["--timeout", f"{TIMEOUT_S:g}s", "-s", ctx.script], popen=wb.CHILDREN.popen)


def check_files(port, dirs, seed, tag):
    """One file of each of the 36 sizes, in seeded random directories, checked byte for byte.
    Returns a problem or None."""
    rng = random.Random(f"{seed}-{tag}")
    for c in range(fs.CLASSES):
        for i in range(fs.FILES_PER_CLASS):
            d = rng.randrange(dirs)
            path = fs.rel_path(d, c, i)
            try:
                status, body, _ = wb.http_get(port, path, TIMEOUT_S)
            except (OSError, ValueError) as e:
                return f"GET /{path}: {e}"
            if status != 200:
                return f"GET /{path}: status {status}"
            if hashlib.sha256(body).hexdigest() != fs.expected_sha256(seed, d, c, i):
                return f"GET /{path}: {len(body):,} bytes that are not the file's {fs.SIZES[c][i]:,}"
    return None


# ---- one point ---------------------------------------------------------------------------

def spec_for(spec, clients):
    """The servers.json entry for this point: the pool gets a worker per client."""
    s = json.loads(json.dumps(spec))
    if s["kind"] in ("pool", "pool-weft"):
        args = list(s.get("args", []))
        if "--workers" in args:
            k = args.index("--workers")
            args[k + 1] = str(max(1, clients))
        else:
            args = ["--workers", str(max(1, clients))] + args
        s["args"] = args
    return s


def run_point(spec0, clients, ctx, t_start):
    spec = spec_for(spec0, clients)
    rec = {"server": spec["name"], "kind": spec["kind"], "clients": clients, "config": spec.get("args", []),
           "env": spec.get("env") or {}, "ok": False, "reasons": [], "req_s": None, "mb_s": None}
    cg_path = None
    server = None
    try:
        if ctx.cgroups:
            cg_path = ctx.cgroups.make(f"{spec['name']}-c{clients}", ctx.limit_bytes)
        rec["cache_drop"] = drop_caches(ctx.root)
        cmd_fn = wb.server_command(spec, ctx.tools, ctx.bins, ctx.cpu_server, ctx.root)
        cmd_fn = in_cgroup(cmd_fn, ctx.cgroups.procs_file(cg_path) if cg_path else None)
        try:
            server = wb.start_server(spec["name"], cmd_fn, fs.rel_path(0, 0, 0))
        except kb.ServerError as e:
            rec["reasons"].append(f"did not start: {e}")
            return rec
        rec["command"] = " ".join(shlex.quote(x) for x in server.cmd)
        time.sleep(1.0)
        pids = server.pids()
        rec["rss_idle_kb"], rec["anon_idle_kb"] = mem_kb(pids)
        io0, dev0 = io_read_bytes(pids), device_read_bytes(ctx.dev_stat)
        try:
            if ctx.warmup > 0:
                wrk(server.port, clients, ctx.warmup, ctx)
            pids = server.pids()
            io1, dev1, c0 = io_read_bytes(pids), device_read_bytes(ctx.dev_stat), wb.proc_counters(pids)
            cpu0, t0 = kb.cpu_times(), time.monotonic()
            with MemWatch(server) as rss:
                res, cmd = wrk(server.port, clients, ctx.duration, ctx)
                wall = time.monotonic() - t0
                pids = server.pids()
                io2, dev2, c1 = io_read_bytes(pids), device_read_bytes(ctx.dev_stat), wb.proc_counters(pids)
                cpu1 = kb.cpu_times()
                rss_end, anon_end = mem_kb(pids)
                cg_stat = ctx.cgroups.stat(cg_path) if cg_path else {}
        except RuntimeError as e:
            rec["reasons"].append(f"wrk: {e}")
            return rec
        ctx.commands.setdefault("wrk", " ".join(shlex.quote(x) for x in cmd))
        secs = res.get("seconds") or ctx.duration
        pct = res.get("percentiles_ms", {})
        rec.update(req_s=res["req_s"], mb_s=round(res.get("transfer_bytes_s", 0) / 1e6, 2),
                   requests=res.get("requests"), bytes_read_client=res.get("bytes_read"), seconds=round(secs, 2),
                   mean_ms=res.get("mean_ms"), p50_ms=pct.get("50"), p90_ms=pct.get("90"), p99_ms=pct.get("99"),
                   socket_errors=res["socket_errors"], non_2xx=res["non_2xx"],
                   errors=sum(res["socket_errors"].values()) + res["non_2xx"], client_cpu=res.get("client_cpu"))
        rec["rss_peak_kb"] = max(rss.max_kb, rss_end)
        rec["anon_peak_kb"] = max(getattr(rss, "max_anon_kb", 0), anon_end)
        rec["rss_per_conn_kb"] = round((rec["rss_peak_kb"] - rec["rss_idle_kb"]) / clients, 2)
        rec["anon_per_conn_kb"] = round((rec["anon_peak_kb"] - rec["anon_idle_kb"]) / clients, 2)
        cpu_s = (c1["user_s"] - c0["user_s"]) + (c1["system_s"] - c0["system_s"])
        rec["server_cpu_pct"] = round(100 * cpu_s / max(wall, 1e-9), 1)
        rec["server_cpu_us_per_req"] = round(1e6 * cpu_s / res["requests"], 1) if res.get("requests") else None
        # Other load on the machine while it ran: every CPU's busy time less the server's and wrk's.
        busy = sum(kb.cpu_busy(cpu0, cpu1, c) for c in cpu0)
        tick_wall = max(wall, 1e-9)
        rec["machine_busy_cpus"] = round(busy, 2)
        rec["other_busy_cpus"] = round(max(0.0, busy - cpu_s / tick_wall - (res.get("client_cpu") or 0)), 2)
        rec["disk_read_bytes"] = io2 - io1
        rec["disk_read_mb_s"] = round((io2 - io1) / 1e6 / max(wall, 1e-9), 1)
        rec["warmup_disk_read_bytes"] = io1 - io0
        if dev0 is not None and dev2 is not None:
            rec["device_read_bytes"] = dev2 - dev1
        if res.get("bytes_read"):
            rec["disk_share_of_bytes_served"] = round((io2 - io1) / res["bytes_read"], 3)
        if cg_path:
            rec["cgroup"] = {"limit_bytes": ctx.limit_bytes, "peak_bytes": int((ctx.cgroups.peak_mib(cg_path) or 0)
                                                                               * 1048576),
                             "failcnt": ctx.cgroups.failcnt(cg_path), "oom_kills": ctx.cgroups.oom_kills(cg_path),
                             "at_end": cg_stat}
        if not server.alive():
            rec["reasons"].append(f"the server died during the run (status {server.proc.returncode}): "
                                  f"{server.output()}")
            return rec
        problem = check_files(server.port, ctx.dirs, ctx.seed, f"{spec['name']}-{clients}")
        if problem:
            rec["reasons"].append(f"byte check after the run: {problem}")
        if not rec["requests"]:
            rec["reasons"].append("no request completed")
        rec["ok"] = not rec["reasons"]
        return rec
    except ra.CgroupError as e:
        rec["reasons"].append(str(e))
        return rec
    except KeyboardInterrupt:
        rec["reasons"].append("interrupted")
        raise
    finally:
        if server is not None:
            problem = server.stop(grace=5.0)
            shutil.rmtree(getattr(server, "tmpdir", ""), ignore_errors=True)
            if problem:
                rec.setdefault("server_problems", []).append(problem)
        if cg_path:
            ctx.cgroups.discard(cg_path)
        progress(rec, t_start)


def progress(rec, t_start):
    if rec.get("req_s") is not None:
        line = (f"{rec['server']} c={rec['clients']}: {rec['req_s']:,.0f} req/s, {rec['mb_s']:,.1f} MB/s, "
                f"mean {fmt(rec.get('mean_ms'))} ms, p99 {fmt(rec.get('p99_ms'))} ms, errors {rec.get('errors')}, "
                f"RSS {rec['rss_idle_kb'] / 1024:.1f} -> {rec['rss_peak_kb'] / 1024:.1f} MiB, anon "
                f"{rec['anon_idle_kb'] / 1024:.1f} -> {rec['anon_peak_kb'] / 1024:.1f} MiB "
                f"({fmt(rec['anon_per_conn_kb'])} KiB/conn), disk {rec['disk_read_bytes'] / 1e6:,.0f} MB "
                f"({rec['disk_read_mb_s']:,.0f} MB/s), server CPU {rec['server_cpu_pct']:.0f} %")
    else:
        line = f"{rec['server']} c={rec['clients']}: no result"
    status = "ok" if rec["ok"] else "FAILED: " + "; ".join(rec["reasons"])
    log(f"[{time.monotonic() - t_start:.0f} s] {line} -- {status}")


# ---- the report -------------------------------------------------------------------------------

fmt = wb.fmt  # numbers as the web report prints them


def marginal_kb(runs, rec):
    """(peak anonymous RSS at N - that at the smallest N) / (N - that N), KiB: what one more connection
    costs, the constant costs (file cache, buffers touched by any load) cancelling out."""
    same = [r for r in runs if r["server"] == rec["server"] and r.get("anon_peak_kb") is not None]
    if not same:
        return None
    base = min(same, key=lambda r: r["clients"])
    if rec["clients"] <= base["clients"] or rec.get("anon_peak_kb") is None:
        return None
    return round((rec["anon_peak_kb"] - base["anon_peak_kb"]) / (rec["clients"] - base["clients"]), 2)


SLOPE_FROM = 50  # clients: by then every loop and worker of a server has been busy


def slope_kb(runs, server):
    """Least-squares slope of peak anonymous RSS over the client counts >= SLOPE_FROM, KiB per
    connection: what one more connection costs once the server is warm. The marginal figure (against
    the fewest clients) also holds what a second loop, the offload workers and their buffers cost when
    they first run, which 1 client does not make happen. None with fewer than two such points."""
    pts = [(r["clients"], r["anon_peak_kb"]) for r in runs
           if r["server"] == server and r["clients"] >= SLOPE_FROM and r.get("anon_peak_kb") is not None]
    if len({n for n, _ in pts}) < 2:
        return None
    mx = sum(n for n, _ in pts) / len(pts)
    my = sum(k for _, k in pts) / len(pts)
    return round(sum((n - mx) * (k - my) for n, k in pts) / sum((n - mx) ** 2 for n, _ in pts), 2)


def reserved_per_conn(specs, args, notes):
    """Bytes each server reserves per connection it can hold, at start, before any connection: in no
    growth under load, so the figures above leave it out. nginx allocates its connection and event
    structures for every worker_connections slot (20,000 here); measured now, as bench/vt/idle_memory.py
    does it (idle anon at 20,000 slots less that at 1,024, over the difference). weft's servers reserve
    nothing per connection (a frame, a stack or a thread is made when the connection comes)."""
    out = {s["name"]: 0 for s in specs if s["kind"] != "nginx"}
    ngx = [s["name"] for s in specs if s["kind"] == "nginx"]
    if not ngx or args.smoke:
        return out
    import idle_memory  # noqa: E402  (imports this module: only here)
    try:
        got = idle_memory.nginx_slot_bytes(args.build, args.fileset)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        notes.append(f"nginx's bytes per worker_connections slot not measured ({e}): memory counted from growth only")
        return out
    log(f"nginx reserves {got['bytes_per_slot']:,} anon bytes per worker_connections slot at start "
        f"(idle anon {got['idle_anon_kb']} KiB by slots)")
    for name in ngx:
        out[name] = got["bytes_per_slot"]
    return out


def with_reserved_kb(per_conn_kb, reserved, server):
    """A per-connection figure plus what the server reserved per connection at start, KiB."""
    if per_conn_kb is None or reserved is None or server not in reserved:
        return None
    return round(per_conn_kb + reserved[server] / 1024, 2)


def ratio_rows(runs):
    """Per client count: vtserver against the best weft-knot, nginx and the pool, by req/s."""
    def get(pred, n):
        ok = [r for r in runs if r["clients"] == n and pred(r) and r.get("req_s")]
        return max(ok, key=lambda r: r["req_s"]) if ok else None

    rows = []
    for n in sorted({r["clients"] for r in runs}):
        vt = get(lambda r: r["kind"] == "vtserver", n)
        knot = get(lambda r: r["kind"] in ("knot", "knot-linked"), n)
        ngx = get(lambda r: r["kind"] == "nginx", n)
        pool = get(lambda r: r["kind"] == "pool", n)
        rows.append({"clients": n, "vtserver": vt and vt["req_s"], "knot": knot and knot["req_s"],
                     "knot_server": knot and knot["server"], "nginx": ngx and ngx["req_s"],
                     "pool": pool and pool["req_s"],
                     "vt_over_knot": round(vt["req_s"] / knot["req_s"], 3) if vt and knot else None,
                     "vt_over_nginx": round(vt["req_s"] / ngx["req_s"], 3) if vt and ngx else None,
                     "vt_over_pool": round(vt["req_s"] / pool["req_s"], 3) if vt and pool else None})
    return rows


def render(doc):
    s, m, runs = doc["settings"], doc["machine"], doc["runs"]
    md = ["# Virtual Threads Fig. 10 analogue: a disk-bound web workload, 1-500 clients", ""]
    md += [f"- Date: {doc['date']}. Machine: {m.get('line', '?')}; kernel {m.get('kernel', '?')}; "
           f"nginx {m.get('nginx', '?')}; {m.get('wrk', '?')}.",
           f"- File set: {s['fileset']}: {s['dirs']} directories, {s['files']:,} files, "
           f"{s['fileset_bytes'] / 2**20:,.0f} MiB (SPECweb99-like sizes, 102 B-900 KiB); requests: SPECweb99 "
           f"class/file mix, {s['popularity']} directories; mean body {s['mean_body_bytes']:,.0f} B.",
           "- Disk-bound: " + (f"each server alone in a memory cgroup of {s['mem_limit_mb']} MiB "
                               f"({s['cgroup']}; page cache charged to it), caches dropped before every point."
                               if s.get("cgroup") else
                               "**NO memory cgroup could be made: the page cache was not limited, so after its "
                               "first touch the set was served from memory (NOT disk-bound)**. " + s.get("cgroup_error", "")),
           f"- Load: wrk -t1 -c CLIENTS, closed loop, keep-alive, {s['warmup_s']} s warm-up (not measured) then "
           f"{s['duration_s']} s measured per point; server on CPU {s['cpu_server']}, wrk on CPU {s['cpu_client']}. "
           f"Points interleaved (every server at one client count, in a rotating order, before the next count)"
           + (f", {s['repeat']} rounds, the best reported (other load only slows a run; every round's req/s in "
              "the last column)" if s.get("repeat", 1) > 1 else ", one run each")
           + f"; a point during which >= {s.get('busy_cpus', BUSY_CPUS)} CPU outside the server and wrk was busy, "
           "or others read the disk, was run again (up to "
           f"{s.get('busy_retries', '?')} re-runs in all).",
           "- Disk MB: bytes the server's processes caused to be read from storage (/proc/PID/io read_bytes) "
           "during the measured seconds. RSS: VmRSS summed over the server's processes, idle (1 s after start) "
           "and peak (sampled every 0.5 s under load); anon: its RssAnon part (heap, stacks, frames; VmRSS also "
           "counts mapped files, which the cgroup's reclaim evicts under load). KiB/conn = (anon peak - anon "
           "idle) / clients; marginal = (anon peak - anon peak at the fewest clients) / (clients - fewest).", ""]
    md += ["## Every point", "",
           "| clients | server | req/s | MB/s | mean ms | p99 ms | errors | RSS idle / peak MiB | "
           "anon idle / peak MiB | KiB/conn | marginal KiB/conn | disk MB read | disk MB/s | server CPU % | ok | "
           "req/s of each round |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in sorted(runs, key=lambda r: (r["clients"], s["servers"].index(r["server"])
                                          if r["server"] in s["servers"] else 99)):
        if r.get("req_s") is None:
            md.append(f"| {r['clients']} | {r['server']} | — | — | — | — | — | — | — | — | — | — | — | — | "
                      f"NO: {'; '.join(r['reasons'])} | |")
            continue
        md.append(f"| {r['clients']} | {r['server']}{' *' if r.get('disturbed') else ''} | {fmt(r['req_s'], 0)} | "
                  f"{fmt(r['mb_s'], 1)} | "
                  f"{fmt(r.get('mean_ms'))} | {fmt(r.get('p99_ms'))} | {r.get('errors', 0):,} | "
                  f"{r['rss_idle_kb'] / 1024:,.1f} / {r['rss_peak_kb'] / 1024:,.1f} | "
                  f"{r['anon_idle_kb'] / 1024:,.1f} / {r['anon_peak_kb'] / 1024:,.1f} | {fmt(r['anon_per_conn_kb'])} | "
                  f"{fmt(marginal_kb(runs, r))} | {r['disk_read_bytes'] / 1e6:,.0f} | {fmt(r['disk_read_mb_s'], 0)} | "
                  f"{fmt(r['server_cpu_pct'], 0)} | {'yes' if r['ok'] else 'NO: ' + '; '.join(r['reasons'])} | "
                  + ", ".join(fmt(x, 0) for x in r.get("req_s_rounds", [r["req_s"]])) + " |")
    md.append("")
    rows = doc["ratios"]
    md += ["## vtserver against the others (req/s; the issue's goal: vtserver >= weft-knot and >= nginx)", "",
           "| clients | vtserver | best weft-knot | vtserver / knot | nginx | vtserver / nginx | pool (NPTL) | "
           "vtserver / pool |", "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for x in rows:
        md.append(f"| {x['clients']} | {fmt(x['vtserver'], 0)} | "
                  f"{(x['knot_server'] + ' ' + fmt(x['knot'], 0)) if x['knot'] else '—'} | "
                  f"{fmt(x['vt_over_knot'], 3)} | {fmt(x['nginx'], 0)} | {fmt(x['vt_over_nginx'], 3)} | "
                  f"{fmt(x['pool'], 0)} | {fmt(x['vt_over_pool'], 3)} |")
    md.append("")
    # Memory per connection at the largest client count.
    top = max((r["clients"] for r in runs if r.get("anon_peak_kb") is not None), default=None)
    if top:
        at = sorted((r for r in runs if r["clients"] == top and r.get("anon_peak_kb") is not None),
                    key=lambda r: r["anon_per_conn_kb"])
        md += [f"## Memory per connection at {top} clients (smallest first)", "",
               "| server | KiB/conn (anon peak - idle) | marginal KiB/conn | slope KiB/conn | "
               "reserved at start, B/conn | slope + reserved KiB/conn | VmRSS KiB/conn | anon idle MiB | "
               "anon peak MiB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        reserved = doc.get("reserved_bytes_per_conn") or {}
        for r in at:
            slope = slope_kb(runs, r["server"])
            res = reserved.get(r["server"])
            md.append(f"| {r['server']} | {fmt(r['anon_per_conn_kb'])} | {fmt(marginal_kb(runs, r))} | "
                      f"{fmt(slope)} | {'—' if res is None else f'{res:,}'} | "
                      f"{fmt(with_reserved_kb(slope, reserved, r['server']))} | {fmt(r['rss_per_conn_kb'])} | "
                      f"{r['anon_idle_kb'] / 1024:,.1f} | {r['anon_peak_kb'] / 1024:,.1f} |")
        md += ["", f"Slope: the least-squares slope of anon peak over the points with >= {SLOPE_FROM} clients "
               "(what one more connection costs once every loop and worker has run; none with fewer than two "
               "such points). nginx's connection structures are not in any of the growth figures: it allocates "
               "them for worker_connections at start (in its idle anon); 'reserved at start' is that, per slot, "
               "measured in the same run (idle anon at 20,000 slots less that at 1,024), and weft's servers "
               "reserve nothing per connection before it comes.", ""]
    goal = doc.get("goal")
    if goal:
        md += ["## The goal", ""] + [f"- {g}" for g in goal] + [""]
    if doc.get("plot"):
        md += [f"![throughput and RSS against clients]({doc['plot']})", ""]
    elif doc.get("plot_note"):
        md += [doc["plot_note"], ""]
    md += ["## Notes", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    return "\n".join(md)


def goal_lines(runs, ratios, servers, reserved=None):
    out = []
    for key, what in (("vt_over_knot", "the best weft-knot"), ("vt_over_nginx", "nginx")):
        have = [x for x in ratios if x[key] is not None]
        if not have:
            continue
        below = [f"{x['clients']} ({x[key]:.2f}x)" for x in have if x[key] < 1.0 - GOAL_NOISE]
        even = [f"{x['clients']} ({x[key]:.2f}x)" for x in have if 1.0 - GOAL_NOISE <= x[key] < 1.0]
        line = f"vtserver >= {what}: " + ("at every client count" if not below and not even else
                                          "NOT at " + ", ".join(below) if below else "")
        if even:
            line += ("; " if below else "") + f"within {GOAL_NOISE:.0%} below (counted as equal) at " + ", ".join(even)
        out.append(line)
    top = max((r["clients"] for r in runs if r.get("anon_peak_kb") is not None), default=None)
    if top:
        at = [r for r in runs if r["clients"] == top and r.get("anon_per_conn_kb") is not None]
        if at:
            for label, key in (("(anon peak - idle) / clients", lambda r: r["anon_per_conn_kb"]),
                               ("marginal", lambda r: marginal_kb(runs, r)),
                               (f"slope over >= {SLOPE_FROM} clients", lambda r: slope_kb(runs, r["server"]))):
                have = [r for r in at if key(r) is not None]
                if not have:
                    continue
                best = min(have, key=key)
                out.append(f"smallest memory per connection at {top} clients, {label}: {best['server']} "
                           f"({fmt(key(best))} KiB)" + ("" if best["kind"] == "vtserver" else " -- not vtserver")
                           + "; " + ", ".join(f"{r['server']} {fmt(key(r))}" for r in sorted(have, key=key)))
            # What a connection costs in all: its growth (marginal, slope) and what the server set aside
            # for it at start (nginx's worker_connections slot), which no growth shows.
            if reserved and any(reserved.values()):
                slots = ", ".join(f"{n} {b:,} B" for n, b in reserved.items() if b)
                for label, key in (("marginal", lambda r: marginal_kb(runs, r)),
                                   ("slope", lambda r: slope_kb(runs, r["server"]))):
                    whole = [(r, with_reserved_kb(key(r), reserved, r["server"])) for r in at]
                    whole = sorted(((r, k) for r, k in whole if k is not None), key=lambda x: x[1])
                    if not whole:
                        continue
                    best, k = whole[0]
                    out.append(f"smallest memory per connection at {top} clients, {label} plus the bytes reserved "
                               f"per connection at start ({slots} a worker_connections slot; weft's servers: none): "
                               f"{best['server']} ({fmt(k)} KiB)"
                               + ("" if best["kind"] == "vtserver" else " -- not vtserver")
                               + "; " + ", ".join(f"{r['server']} {fmt(x)}" for r, x in whole))
    out.append("a shared 2-CPU VM whose disk is shared too: differences of a few percent (and, on the disk-bound "
               "points, more) are within its noise; see the rounds and re-runs in the JSON")
    return out


def plot(runs, servers, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, f"(matplotlib is not importable by {sys.executable}: no plot)"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for sv in servers:
        pts = sorted((r["clients"], r["mb_s"], r["anon_peak_kb"] / 1024) for r in runs
                     if r["server"] == sv and r.get("req_s") is not None)
        if not pts:
            continue
        style = {"lw": 2.5} if sv == VT else {}
        ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=sv, **style)
        ax2.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=sv, **style)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("concurrent clients (wrk connections)")
        ax.grid(alpha=0.3)
    ax1.set_ylabel("throughput (MB/s)")
    ax1.set_title("Disk-bound throughput")
    ax2.set_ylabel("server anonymous RSS, peak (MiB)")
    ax2.set_title("Server memory under load")
    ax1.legend(fontsize=8)
    fig.tight_layout()
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, None


def check_outputs(json_path, md_path, servers, clients):
    bad = []
    try:
        with open(json_path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return [f"cannot read {json_path}: {e}"]
    for k in ("settings", "machine", "runs", "ratios", "notes"):
        if k not in doc:
            bad.append(f"{json_path} has no {k}")
    got = {(r.get("server"), r.get("clients")): r for r in doc.get("runs", [])}
    for sv in servers:
        for n in clients:
            r = got.get((sv, n))
            if not r:
                bad.append(f"no point for {sv} at {n} clients")
            elif not (isinstance(r.get("req_s"), (int, float)) and r["req_s"] > 0):
                bad.append(f"{sv} at {n} clients: no throughput ({'; '.join(r.get('reasons', []))})")
            elif not r.get("ok"):
                bad.append(f"{sv} at {n} clients: {'; '.join(r.get('reasons', []))}")
    try:
        text = open(md_path).read()
        if "| clients | server | req/s |" not in text or "vtserver / knot" not in text:
            bad.append(f"{md_path} has no table")
    except OSError as e:
        bad.append(f"cannot read {md_path}: {e}")
    return bad


# ---- main -------------------------------------------------------------------------------------

def int_list(text):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated integers wanted: {text}")
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"positive integers wanted: {text}")
    return v


EPILOG = """\
Examples:
  python3 bench/vt/fig10.py                                   # the full run, ~17-25 minutes
  python3 bench/vt/fig10.py --quick                           # ~2 minutes, 256 MiB set, 64 MiB limit
  python3 bench/vt/fig10.py --servers vtserver,nginx --clients 1,100 --duration 10
  make bench-vt-fig10 [QUICK=1]
Needs root for the memory cgroup and drop_caches (else: --allow-no-cgroup runs
it cache-bound, labelled so). Exit status: 0 when every point ran and served
correct bytes, 1 otherwise, 77 for --smoke when a tool, the build or a memory
cgroup is missing, 130 when interrupted."""


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="The Virtual Threads paper's Fig. 10: weft-vtserver against weft-knot, an NPTL "
                    "thread-per-connection server (weft-pool) and nginx on a disk-bound web workload (the file set "
                    "several times the page cache the server may use), 1-500 clients. See the module docstring.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="the CMake build directory (default build)")
    ap.add_argument("--servers", help=f"names from the server list (default {DEFAULT_SERVERS})")
    ap.add_argument("--servers-file", default=wb.SERVERS_JSON, help="the server list (default bench/web/servers.json)")
    ap.add_argument("--clients", type=int_list, help=f"concurrent clients per point (default {DEFAULT_CLIENTS}; "
                    "--quick 1,50)")
    ap.add_argument("--duration", type=int, help="measured seconds per point (default 8; --quick 4)")
    ap.add_argument("--warmup", type=int, help="unmeasured seconds of load before each (default 4; --quick 2)")
    ap.add_argument("--fileset", help="the file set's directory (default var/fileset-fig10; --quick "
                    "var/fileset-fig10-quick)")
    ap.add_argument("--size-mb", type=float, help="file set size in MiB (default 2048; --quick 256)")
    ap.add_argument("--mem-limit-mb", type=int, help="the server's memory cgroup limit (default 256; --quick 64)")
    ap.add_argument("--popularity", choices=("uniform", "zipf"), default="uniform",
                    help="directory popularity (default uniform; zipf: SPECweb99's alpha=1)")
    ap.add_argument("--allow-no-cgroup", action="store_true",
                    help="when no memory cgroup can be made, run anyway without one (NOT disk-bound; said so)")
    ap.add_argument("--cpu-server", type=int, default=1, help="CPU for the servers (default 1)")
    ap.add_argument("--cpu-client", type=int, default=0, help="CPU for wrk and this script (default 0)")
    ap.add_argument("--json", default=os.path.join(REPO, "results", "vt_fig10.json"),
                    help="the JSON output (default results/vt_fig10.json); the report goes beside it (.md)")
    ap.add_argument("--png", default=os.path.join(REPO, "docs", "figures", "vt_fig10.png"),
                    help="the plot (default docs/figures/vt_fig10.png; '' for none)")
    ap.add_argument("--repeat", type=int, help="rounds over every point (interleaved); the best "
                    "round by req/s is reported, every round's too (default 2; --quick 1)")
    ap.add_argument("--busy-retries", type=int, default=6, help="re-runs, in all, of points disturbed by other load "
                    f"(>= {BUSY_CPUS} CPU outside the server and wrk, or others reading the disk), at most one per "
                    "point (default 6)")
    ap.add_argument("--quiet-wait", type=float, default=20, help="seconds to wait before each point for the CPUs "
                    "to go quiet (default 20)")
    ap.add_argument("--budget-s", type=float, default=1800, help="start no point after this many seconds "
                    "(default 1800)")
    ap.add_argument("--quick", action="store_true", help="small set and limit, clients 1,50, 4 s points")
    ap.add_argument("--smoke", action="store_true", help="check the outputs after writing them (exit 1 when "
                    "one is missing or a point failed); exit 77 when a tool, the build or a cgroup is missing")
    ap.add_argument("--render", metavar="JSON", help="only write the report (beside --json) and the plot again from "
                    "an earlier run's JSON")
    args = ap.parse_args(argv)
    p = PRESETS["quick" if args.quick else "full"]
    args.servers = [x.strip() for x in (args.servers or DEFAULT_SERVERS).split(",") if x.strip()]
    args.clients = args.clients or int_list(p["clients"])
    args.duration = args.duration if args.duration is not None else p["duration"]
    args.warmup = args.warmup if args.warmup is not None else p["warmup"]
    args.repeat = args.repeat if args.repeat is not None else p["repeat"]
    args.size_mb = args.size_mb or p["size_mb"]
    args.mem_limit_mb = args.mem_limit_mb or p["mem_limit_mb"]
    args.fileset = os.path.abspath(args.fileset or p["fileset"])
    if args.duration < 1 or args.warmup < 0 or args.mem_limit_mb < 16 or args.repeat < 1 or args.busy_retries < 0:
        ap.error("--duration >= 1, --warmup >= 0, --mem-limit-mb >= 16, --repeat >= 1 and --busy-retries >= 0 wanted")
    return args


class Context:
    pass


def machine_facts(tools):
    return {"line": kb.machine_line(), "cpu_model": kb.cpu_model(), "cpus": os.cpu_count(),
            "kernel": os.uname().release,
            "nginx": kb.tool_version([tools["nginx"], "-v"]) if "nginx" in tools else "not used",
            "wrk": kb.tool_version([tools["wrk"], "-v"]), "python": sys.version.split()[0]}


def rerender(args):
    """The report and the plot again from a run's JSON (after a change to the report's code)."""
    with open(args.render) as f:
        doc = json.load(f)
    runs, servers = doc["runs"], doc["settings"]["servers"]
    doc["ratios"] = ratio_rows(runs)
    doc["goal"] = goal_lines(runs, doc["ratios"], servers, doc.get("reserved_bytes_per_conn"))
    md_path = os.path.splitext(args.json)[0] + ".md"
    doc.pop("plot", None)
    if args.png:
        plot_path, doc["plot_note"] = plot(runs, servers, args.png)
        if plot_path:
            doc["plot"] = os.path.relpath(plot_path, os.path.dirname(os.path.abspath(md_path)))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    if os.path.abspath(args.render) != os.path.abspath(args.json):
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    md = render(doc)
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    log(f"wrote {md_path}" + (f", {args.png}" if doc.get("plot") else "") + f" from {args.render}")
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.render:
        return rerender(args)
    signal.signal(signal.SIGTERM, wb.on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    fail = SKIP if args.smoke else 1
    try:
        specs = wb.load_servers(args.servers_file, args.servers)
    except (OSError, ValueError) as e:
        log(str(e))
        return 1
    tools, missing = kb.find_tools(any(s["kind"] == "nginx" for s in specs))
    if any(s["kind"] in wb.APACHE_KINDS for s in specs):
        apache = shutil.which("apache2") or "/usr/sbin/apache2"
        if os.access(apache, os.X_OK):
            tools["apache2"] = apache
        else:
            missing.append("apache2")
    if missing:
        log(f"{', '.join(missing)} not found: install the Debian package(s) (apt-get install wrk nginx-light)")
        return fail
    bins = wb.weft_bins(args.build)
    for s in specs:
        need = ([] if s["kind"] in ("nginx", "apache") else ["weft-run"] if s["kind"] == "apache-weft" else
                ["weft-run", wb.UNDER_WEFT_RUN[s["kind"]]] if s["kind"] in wb.UNDER_WEFT_RUN else [s["kind"]])
        for k in need:
            if not os.access(bins[k], os.X_OK):
                log(f"{bins[k]} not found: build first (make -C {REPO} build)")
                return fail
    ctx = Context()
    notes = []
    try:
        if os.geteuid() != 0:
            raise ra.CgroupError("not root: making a memory cgroup (and dropping the page cache) needs root")
        ctx.cgroups = Cgroups()
        ctx.cgroup_error = None
    except ra.CgroupError as e:
        ctx.cgroups, ctx.cgroup_error = None, str(e)
        if not args.allow_no_cgroup:
            log(f"cannot limit the servers' page cache: {e}. Without a memory cgroup the file set stays cached "
                "and the workload is not disk-bound: run as root, or pass --allow-no-cgroup to run it cache-bound "
                "anyway" + (" (smoke: skipped)" if args.smoke else ""))
            return fail
        log(f"WARNING: no memory cgroup ({e}): running WITHOUT a page-cache limit -- NOT disk-bound")
        notes.append(f"NO memory cgroup ({e}): the page cache was not limited; the set was read from disk only "
                     "after each cache drop, then served from memory: these are NOT disk-bound figures")
    try:
        return run(args, specs, tools, bins, ctx, notes)
    except KeyboardInterrupt:
        log("interrupted: stopping every process started and removing the cgroups")
        return 130
    finally:
        wb.CHILDREN.end_all()
        if ctx.cgroups:
            ctx.cgroups.cleanup()


def wait_quiet(cpus, max_wait, busy_max=0.15, sample=0.5):
    """Wait (up to max_wait s) until no CPU in `cpus` is busier than busy_max with nothing of ours running.
    Returns the seconds waited."""
    t0 = time.monotonic()
    said = False
    while True:
        a = kb.cpu_times()
        time.sleep(sample)
        b = kb.cpu_times()
        busy = {c: kb.cpu_busy(a, b, c) for c in cpus}
        waited = time.monotonic() - t0
        if all(x <= busy_max for x in busy.values()) or waited >= max_wait:
            if said:
                log(f"... waited {waited:.0f} s" + ("" if waited < max_wait else ", going on anyway"))
            return waited
        if not said:
            log("something else is using " + ", ".join(f"CPU {c} ({x:.0%})" for c, x in busy.items())
                + f": waiting up to {max_wait:.0f} s for quiet")
            said = True


def disturbed(rec):
    """Why a point's figures are suspect (another load on the CPUs or the disk), or None."""
    why = []
    if (rec.get("other_busy_cpus") or 0) >= BUSY_CPUS:
        why.append(f"{rec['other_busy_cpus']:.2f} CPU busy outside the server and wrk")
    dev, own = rec.get("device_read_bytes"), rec.get("disk_read_bytes")
    if dev is not None and own is not None and dev - own > max(BUSY_DISK_SHARE * own, 32e6):
        why.append(f"{(dev - own) / 1e6:,.0f} MB read from the disk by others")
    return "; ".join(why) or None


def measured_point(spec, n, ctx, t_start, args, retries):
    """run_point after waiting for quiet CPUs; run once again (retries[0] times in all, for the whole run) when
    something else loaded the machine meanwhile, keeping the second run."""
    wait_quiet(sorted({ctx.cpu_server, ctx.cpu_client}), args.quiet_wait)
    rec = run_point(spec, n, ctx, t_start)
    why = disturbed(rec)
    if why and retries[0] > 0 and time.monotonic() - t_start <= args.budget_s:
        retries[0] -= 1
        log(f"{spec['name']} c={n}: disturbed ({why}): running it again ({retries[0]} re-runs left)")
        wait_quiet(sorted({ctx.cpu_server, ctx.cpu_client}), args.quiet_wait)
        again = run_point(spec, n, ctx, t_start)
        again.setdefault("earlier_disturbed", []).extend(rec.get("earlier_disturbed", []) + [
            {"req_s": rec.get("req_s"), "why": why}])
        rec = again
        why = disturbed(rec)
    rec["disturbed"] = why
    return rec


def combine_rounds(runs):
    """One record per (server, clients): the round with the most req/s (other load on this shared machine
    only slows a run down), with every round's req/s."""
    out = []
    for key in dict.fromkeys((r["server"], r["clients"]) for r in runs):
        same = [r for r in runs if (r["server"], r["clients"]) == key]
        good = sorted((r for r in same if r.get("req_s") is not None), key=lambda r: r["req_s"])
        rec = dict(good[-1] if good else same[0])
        rec["req_s_rounds"] = [r.get("req_s") for r in same]
        rec["mb_s_rounds"] = [r.get("mb_s") for r in same]
        out.append(rec)
    return out


def run(args, specs, tools, bins, ctx, notes):
    t_start = time.monotonic()
    nofile = kb.raise_nofile()
    cpu_s, cpu_c, cpu_notes = kb.choose_cpus(args.cpu_server, args.cpu_client)
    notes += cpu_notes
    try:
        os.sched_setaffinity(0, {cpu_c})
    except OSError as e:
        notes.append(f"could not pin the harness to CPU {cpu_c}: {e}")
    dirs = fs.dirs_for_size(args.size_mb * 2**20)
    try:
        manifest, reused = fs.ensure(args.fileset, dirs, SEED)
    except OSError as e:
        log(f"cannot make the file set in {args.fileset}: {e}")
        return 1
    set_bytes = manifest.get("total_bytes") or dirs * fs.DIR_BYTES
    ctx.limit_bytes = args.mem_limit_mb << 20
    if ctx.cgroups and set_bytes < 2 * ctx.limit_bytes:
        notes.append(f"the file set ({set_bytes / 2**20:,.0f} MiB) is less than twice the limit "
                     f"({args.mem_limit_mb} MiB): much of it stays cached")
    ctx.tools, ctx.bins, ctx.cpu_server, ctx.cpu_client = tools, bins, cpu_s, cpu_c
    ctx.root, ctx.dirs, ctx.seed = args.fileset, dirs, SEED
    ctx.duration, ctx.warmup = args.duration, args.warmup
    ctx.commands = {}
    ctx.dev_stat = root_device(args.fileset)
    tmp = tempfile.mkdtemp(prefix="vt-fig10-")
    try:
        ctx.script = os.path.join(tmp, "fig10.lua")
        write_wrk_script(ctx.script, dirs, args.popularity, SEED)
        facts = machine_facts(tools)
        per_point = args.warmup + args.duration + 4
        plan = len(specs) * len(args.clients) * per_point * args.repeat
        log(f"{facts['line']}; {facts['nginx']}; {facts['wrk']}")
        log(f"file set {args.fileset}: {dirs} directories, {set_bytes / 2**20:,.0f} MiB "
            f"({'reused' if reused else 'made now'}); " +
            (f"memory cgroup {args.mem_limit_mb} MiB ({ctx.cgroups.describe()})" if ctx.cgroups else "NO cgroup"))
        log(f"servers {', '.join(s['name'] for s in specs)} on CPU {cpu_s}; wrk on CPU {cpu_c}; clients "
            f"{', '.join(map(str, args.clients))}; {args.warmup} s warm-up + {args.duration} s per point; planned "
            f"about {plan / 60:.1f} minutes")
        runs = []
        retries = [args.busy_retries]
        for rnd in range(args.repeat):
            for k, n in enumerate(args.clients):
                # Interleaved: every server at one client count before the next count, the order rotated
                # from one count (and round) to the next, so that no server always runs first or last.
                shift = (k + rnd) % len(specs)
                for spec in specs[shift:] + specs[:shift]:
                    if time.monotonic() - t_start > args.budget_s:
                        runs.append({"server": spec["name"], "kind": spec["kind"], "clients": n, "round": rnd,
                                     "ok": False, "req_s": None,
                                     "reasons": [f"skipped: past the {args.budget_s:.0f} s budget"]})
                        log(f"{spec['name']} c={n}: skipped (past the budget)")
                        continue
                    rec = measured_point(spec, n, ctx, t_start, args, retries)
                    rec["round"] = rnd
                    runs.append(rec)
        runs = combine_rounds(runs) if args.repeat > 1 else runs
        ctx.reserved = reserved_per_conn(specs, args, notes)
        total = time.monotonic() - t_start
        return write_outputs(args, specs, runs, ctx, facts, notes, set_bytes, nofile, total)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_outputs(args, specs, runs, ctx, facts, notes, set_bytes, nofile, total):
    servers = [s["name"] for s in specs]
    for r in runs:
        if r.get("anon_peak_kb") is not None:
            r["anon_marginal_kb_per_conn"] = marginal_kb(runs, r)
            r["anon_slope_kb_per_conn"] = slope_kb(runs, r["server"])
    ratios = ratio_rows(runs)
    pool_note = [s for s in specs if s["kind"] == "pool"]
    if pool_note:
        notes.append("pool (weft-pool on NPTL) ran with --workers = clients at each point: a kernel thread per "
                     "connection, created at start-up (so its idle RSS grows with the clients; see marginal)")
    if any(s["kind"] == "nginx" for s in specs):
        notes.append("nginx: knot_bench.py's configuration (one worker, sendfile on, no aio/thread pool): a "
                     "page-cache miss in sendfile blocks its only worker. It allocates its connection and event "
                     "arrays for worker_connections (20,000) at start: its per-connection memory is in its idle "
                     "anon RSS, not in the growth under load")
    dropped = {r.get("cache_drop") for r in runs if r.get("cache_drop")}
    if "fadvise" in dropped:
        notes.append("not root: caches emptied with posix_fadvise(DONTNEED) on every file of the set, not drop_caches")
    busy = [r for r in runs if r.get("disturbed")]
    if busy:
        notes.append("still disturbed after the re-runs (figures suspect; marked * in the table): " + "; ".join(
            f"{r['server']} c={r['clients']}: {r['disturbed']}" for r in busy))
    rerun = [r for r in runs if r.get("earlier_disturbed")]
    if rerun:
        notes.append("re-run because other load disturbed them: " + ", ".join(
            f"{r['server']} c={r['clients']} (first {fmt((r['earlier_disturbed'][0] or {}).get('req_s'), 0)} req/s)"
            for r in rerun))
    doc = {"benchmark": "vt.fig10", "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
           "machine": facts,
           "settings": {"servers": servers, "clients": args.clients, "duration_s": args.duration,
                        "warmup_s": args.warmup, "fileset": args.fileset, "dirs": ctx.dirs,
                        "files": ctx.dirs * fs.CLASSES * fs.FILES_PER_CLASS, "fileset_bytes": set_bytes,
                        "popularity": args.popularity, "mean_body_bytes": round(fs.AccessModel(ctx.dirs).mean_size()),
                        "mem_limit_mb": args.mem_limit_mb if ctx.cgroups else None,
                        "cgroup": ctx.cgroups.describe() if ctx.cgroups else None,
                        "cgroup_error": ctx.cgroup_error, "cpu_server": ctx.cpu_server, "cpu_client": ctx.cpu_client,
                        "wrk_timeout_s": TIMEOUT_S, "rlimit_nofile": nofile, "quick": args.quick,
                        "repeat": args.repeat, "busy_retries": args.busy_retries, "busy_cpus": BUSY_CPUS,
                        "busy_disk_share": BUSY_DISK_SHARE, "quiet_wait_s": args.quiet_wait,
                        "cache_drop": sorted({r.get("cache_drop") for r in runs if r.get("cache_drop")}),
                        "servers_file": args.servers_file,
                        "command": " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv)},
           "specs": specs, "commands": ctx.commands, "runs": runs, "ratios": ratios, "notes": notes,
           "total_seconds": round(total, 1)}
    doc["reserved_bytes_per_conn"] = getattr(ctx, "reserved", None)
    doc["goal"] = goal_lines(runs, ratios, servers, doc["reserved_bytes_per_conn"])
    plot_path, plot_note = (None, None)
    if args.png:
        plot_path, plot_note = plot(runs, servers, args.png)
    md_path = os.path.splitext(args.json)[0] + ".md"
    if plot_path:
        doc["plot"] = os.path.relpath(plot_path, os.path.dirname(os.path.abspath(md_path)))
    doc["plot_note"] = plot_note
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    md = render(doc)
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    log(f"wrote {args.json}, {md_path}" + (f", {plot_path}" if plot_path else "") + f" ({total:.0f} s)")
    failed = [r for r in runs if not r.get("ok")]
    if args.smoke:
        bad = check_outputs(args.json, md_path, servers, args.clients)
        if args.png and plot_path and not os.path.exists(plot_path):
            bad.append(f"no plot at {plot_path}")
        for b in bad:
            log(f"smoke: {b}")
        log("smoke: " + ("FAILED" if bad else "ok"))
        return 1 if bad else 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
