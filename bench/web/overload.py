#!/usr/bin/env python3
"""weft-knot past saturation, FIFO against the resource-aware policy:
`make bench-overload` (QUICK=1 for the short version).

The question (issue 10): offered more than it can serve, does weft-knot
under WEFT_POLICY=resource hold its reply rate at its peak and keep the p99
response time bounded, where FIFO does not?

Why a special set-up. On this 2-CPU VM the web harness (web_bench.py) cannot
overload a server: httperf on the one client CPU tops out near 800 sessions/s
while the server uses under 20 % of its CPU. Two ways around it, both run:

  * open (the study's workload, open loop): the server is pinned to the
    server CPU *and* held to a share of it by a CPU-quota cgroup made for it
    alone (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us; root needed), so that
    httperf can offer several times what it can serve. First a calibration
    of the first server, in two steps: unthrottled at CALIB_RATE sessions/s,
    its CPU time per session (from /proc/PID/task/*/schedstat) gives a first
    share; held to that share and offered --max-rate sessions/s it is
    (nearly) saturated, and its CPU per reply there (cheaper than at light
    load: work is batched) gives the share at which its capacity is
    --max-rate / max(--factors) sessions/s (capacity = share / CPU per
    session). Then each point offers factor x capacity sessions/s
    (--factors, default 0.5, 1, 1.5, 2, 3): httperf session logs (sessions.py,
    the same files for every server), split over enough httperf processes
    that none would pass Debian httperf's 1,024 descriptors even if no
    session finished, --timeout 15; the sampling client of web_bench.py (a
    new connection per request, every file size, bytes checked) gives the
    p50/p99 response time a new visitor sees, and a keep-alive sampler (a few
    persistent connections, KA_RATE requests/s over every size, lengths
    checked) the p50/p99 of requests on connections already admitted; the
    p99 judged is the larger of the two. Recorded per point: reply rate
    (httperf), httperf's mean connect and response times and errors by kind,
    sessions completed, sampler p99 and timeouts, server CPU (of one CPU, and
    of its quota), the cgroup's throttling, weft's counters.
  * closed (keep-alive, closed loop): the server pinned to the server CPU
    with no quota, wrk -t1 on the client CPU with a growing number of
    connections (--connections, default 100, 1,000, 5,000, 10,000; the
    descriptor limit raised to its hard limit first), access-model paths:
    req/s, p50/p99 and wrk's socket errors. In a closed loop the reply rate
    cannot collapse and the mean latency is connections / throughput (Little);
    what the policy may change is the spread (p99) and how the ramp is
    admitted.

Each point runs on a fresh server (start, warm-up fetching every file of the
set once with its bytes checked, then the load), the servers interleaved
within every repetition and their order rotated; --reps repetitions, medians
reported. The servers are servers.json entries (--servers, default knot-nb,
knot-resource: knot-nb's flags with WEFT_POLICY=resource, which turns on
the blocking graph recording every park, and knot-resource-kdoor: the same
with --door kernel, the door's refusals made by the kernel at the SYN,
weft_door_listen). The policy of each is its env's
WEFT_POLICY (fifo when unset). Per run the harness also reads the server's
main thread's schedstat: CPU time and time spent runnable but waiting
(run_delay; a throttled cgroup's time shows there), so cpu_demand = (CPU +
wait) / wall tells a saturated server from an idle one whatever the quota.
For a server with the graph on, /.weft/graph.json is read after its run at
the highest load and summarised (nodes, edges, descriptor and thread
changes per edge: what the policy's forecasts are made of).

--closed-cpu-share holds the server to a share of its CPU in the closed
mode too: one wrk thread is then sure not to be the limit (a way to compare
configurations at saturation, e.g. the blocking graph's overhead).

Judged per policy and mode from the medians: "held" when, from the load of
its peak reply rate on, more load never takes the reply rate below HELD
(90 %) of that peak; "bounded" when, from the first saturated point on (open:
90 % of the quota used; closed: cpu_demand >= 0.9), the p99 stays under
P99_BOUND_MS (1 s) with no timeouts (open: sampler and keep-alive sampler;
closed: wrk's socket timeouts).

Writes OUT_DIR/overload.json (records {"benchmark": "web.overload", "mode",
"server", "policy", "params", "reply_rate", "values", "p99_ms", ...}),
overload.run.json (machine, settings, calibration, commands, notes, graph
summaries), overload.md, overload.png (reply rate and p99 against the
offered load, one line per policy; matplotlib) and overload.httperf.log.
--smoke: a ~15 s check that the harness runs end to end (1-directory file
set, one point per mode, 2 s), exit 77 when httperf or wrk is missing; the
open mode is left out with a note where no CPU cgroup can be made.
Python 3 standard library only (matplotlib optional).
"""
import argparse
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import web_bench as wb  # noqa: E402  (servers, httperf, the sampler, wrk over the access model)
import knot_bench as kb  # noqa: E402  (CPUs, limits, wrk, machine facts)
import fileset as fs  # noqa: E402

log = kb.log
SKIP = 77
BENCHMARK = "web.overload"
DEFAULT_SERVERS = ["knot-nb", "knot-resource", "knot-resource-kdoor"]
MODES = ("open", "closed")
PRESETS = {
    "full": {"factors": [0.5, 1, 1.5, 2, 3], "duration": 10, "connections": [100, 1000, 5000, 10000],
             "wrk_duration": 5, "reps": 5},
    "quick": {"factors": [0.5, 1.5, 3], "duration": 6, "connections": [100, 1000, 10000], "wrk_duration": 3,
              "reps": 1},
    "smoke": {"factors": [2], "duration": 2, "connections": [50], "wrk_duration": 1, "reps": 1},
}
# httperf on one client CPU of this VM offers this many sessions/s reliably
# (web_bench.py's runs: ~800 at most, the sampler beside it).
MAX_RATE = 600
CALIB_RATE = 200
CALIB_SECONDS = 4
MIN_SHARE = 0.02            # the smallest CPU share a server is held to
QUOTA_MIN_US = 1000         # the kernel's smallest CFS quota
PERIOD_US = 10000           # CFS period (longer when the quota would be under QUOTA_MIN_US)
# Before each run the harness waits (up to QUIET_WAIT_RUN s, at most
# QUIET_WAIT_SHARE of the planned time in all) for both CPUs to be quiet
# (knot_bench.wait_quiet); a run during which other processes took more than
# OTHERS_OK of the server's CPU is marked disturbed.
QUIET_WAIT_RUN = 30.0
QUIET_WAIT_SHARE = 0.25
OTHERS_OK = 0.10
HELD = 0.90
P99_BOUND_MS = 1000.0
GRAPH_TOP = 12              # nodes and edges kept in the graph summary


# ---- a CPU quota for the server alone ----------------------------------------------------

class CpuCap:
    """A cgroup of its own holding the processes put in it to `share` of one CPU."""

    def __init__(self, share):
        self.path = self.kind = self.parent = None
        self._share(share)

    def _share(self, share):
        self.share = share
        self.period_us = max(PERIOD_US, math.ceil(QUOTA_MIN_US / share))
        self.quota_us = max(QUOTA_MIN_US, round(share * self.period_us))

    def set(self, share):
        """A new share for the cgroup made. Raises OSError."""
        self._share(share)
        self._limits()

    @staticmethod
    def locate():
        """(kind "v2"|"v1", the directory our process's CPU cgroup is) or (None, why not)."""
        if os.geteuid() != 0:
            return None, "not root: cannot make a cgroup"
        try:
            with open("/proc/self/cgroup") as f:
                lines = [ln.rstrip("\n").split(":", 2) for ln in f if ln.count(":") >= 2]
        except OSError as e:
            return None, f"cannot read /proc/self/cgroup: {e}"
        for _, ctrls, path in lines:  # v1: a hierarchy with the cpu controller
            if "cpu" in ctrls.split(","):
                for base in ("/sys/fs/cgroup/" + ctrls, "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"):
                    d = os.path.join(base, path.lstrip("/"))
                    if os.path.exists(os.path.join(d, "cpu.cfs_quota_us")):
                        return ("v1", d), None
        for hid, ctrls, path in lines:  # v2
            if hid == "0" and ctrls == "":
                d = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
                try:
                    with open(os.path.join(d, "cgroup.controllers")) as f:
                        if "cpu" in f.read().split():
                            return ("v2", d), None
                except OSError:
                    pass
        return None, "no cgroup hierarchy with the cpu controller is mounted where this process lives"

    def create(self):
        """Make the cgroup. Raises OSError."""
        where, why = self.locate()
        if not where:
            raise OSError(why)
        self.kind, self.parent = where
        self.path = os.path.join(self.parent, f"weft-overload-{os.getpid()}")
        if self.kind == "v2":
            try:
                with open(os.path.join(self.parent, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu")
            except OSError:
                pass  # already on, or refused: the mkdir below then lacks cpu.max
        os.makedirs(self.path, exist_ok=True)
        self._limits()
        return self

    def _limits(self):
        if self.kind == "v1":
            self._write("cpu.cfs_quota_us", "-1")  # a period shorter than the quota is refused: unlimit first
            self._write("cpu.cfs_period_us", str(self.period_us))
            self._write("cpu.cfs_quota_us", str(self.quota_us))
        else:
            self._write("cpu.max", f"{self.quota_us} {self.period_us}")

    def _write(self, name, text):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(text)

    def describe(self):
        knob = "cpu.cfs_quota_us/cpu.cfs_period_us" if self.kind == "v1" else "cpu.max"
        return (f"{self.path} ({self.kind}): {knob} = {self.quota_us} us per {self.period_us} us "
                f"({self.quota_us / self.period_us:.1%} of one CPU)")

    def add(self, pids):
        """Move these processes (all their threads) in. Raises OSError."""
        for p in pids:
            self._write("cgroup.procs", str(p))

    def stats(self):
        """{"periods", "throttled", "throttled_ms"} so far."""
        out = {}
        try:
            with open(os.path.join(self.path, "cpu.stat")) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    out[k] = int(v)
        except (OSError, ValueError):
            return {}
        ms = out.get("throttled_usec", 0) / 1e3 if self.kind == "v2" else out.get("throttled_time", 0) / 1e6
        return {"periods": out.get("nr_periods", 0), "throttled": out.get("nr_throttled", 0),
                "throttled_ms": round(ms, 1)}

    def remove(self):
        """Move anything left back to the parent and remove the cgroup."""
        if not self.path or not os.path.isdir(self.path):
            return
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                left = [ln.strip() for ln in f if ln.strip()]
            for p in left:
                with open(os.path.join(self.parent, "cgroup.procs"), "w") as f:
                    f.write(p)
        except OSError:
            pass
        for _ in range(20):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)
        log(f"overload: could not remove {self.path}")


def delta(a, b):
    return {k: round(b[k] - a.get(k, 0), 1) for k in b} if a and b else {}


# ---- a sampler on persistent connections ---------------------------------------------------

KA_RATE = 20.0     # requests/s of the keep-alive sampler, over KA_THREADS connections
KA_THREADS = 4


class KeepAliveSampler:
    """Requests on persistent connections (what an admitted session sees):
    `threads` connections, each asking for the next file size every
    threads/rate s and timing the reply (a reply must be complete within
    wb.TIMEOUT_S; its length is checked). A closed or failed connection is
    reopened, and the request that opens it is not timed (web_bench's
    Sampler times new connections)."""

    def __init__(self, port, dirs, rate=KA_RATE, threads=KA_THREADS):
        self.port, self.dirs, self.rate, self.threads = port, dirs, rate, threads
        self.lat, self.counts = [], {"requests": 0, "ok": 0, "timeouts": 0, "errors": 0, "reconnects": 0}
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.workers = []

    def start(self):
        for w in range(self.threads):
            t = threading.Thread(target=self.work, args=(w,), daemon=True)
            t.start()
            self.workers.append(t)
        return self

    def count(self, key, lat=None):
        with self.lock:
            self.counts[key] += 1
            if lat is not None:
                self.lat.append(lat)

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=wb.TIMEOUT_S)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def one(self, sock, path, size):
        """One request on sock; returns seconds. Raises socket.timeout, OSError, ValueError."""
        t0 = time.monotonic()
        deadline = t0 + wb.TIMEOUT_S
        sock.sendall(f"GET /{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        buf = bytearray()
        while b"\r\n\r\n" not in buf:
            buf += self.recv(sock, deadline)
        head, _, body = bytes(buf).partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        if int(lines[0].split(b" ", 2)[1]) != 200:
            raise ValueError(f"status {lines[0].decode(errors='replace')}")
        length = next((int(v) for k, _, v in (ln.partition(b":") for ln in lines[1:])
                       if k.strip().lower() == b"content-length"), None)
        if length != size:
            raise ValueError(f"Content-Length {length}, not {size}")
        got = len(body)
        while got < length:
            got += len(self.recv(sock, deadline))
        if got != length:
            raise ValueError("more bytes than Content-Length")
        return time.monotonic() - t0

    @staticmethod
    def recv(sock, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("reply not complete within the deadline")
        sock.settimeout(left)
        chunk = sock.recv(262144)
        if not chunk:
            raise OSError("connection closed")
        return chunk

    def work(self, w):
        interval = self.threads / self.rate
        due = time.monotonic() + w / self.rate
        k, sock, fresh = w, None, True
        while not self.halt.is_set():
            wait = due - time.monotonic()
            if wait > 0 and self.halt.wait(wait):
                break
            due = max(due + interval, time.monotonic() - interval)
            c, i = divmod(k % len(wb.SIZE_NAMES), fs.FILES_PER_CLASS)
            d = (k // len(wb.SIZE_NAMES)) % self.dirs
            k += self.threads
            try:
                if sock is None:
                    sock, fresh = self.connect(), True
                    self.count("reconnects")
                lat = self.one(sock, fs.rel_path(d, c, i), fs.SIZES[c][i])
                if fresh:
                    fresh = False  # the first request of a connection is not timed
                    continue
                self.count("requests")
                self.count("ok", lat)
            except socket.timeout:
                self.count("requests")
                self.count("timeouts")
                sock = self.close(sock)
            except (OSError, ValueError):
                if not fresh:
                    self.count("requests")
                    self.count("errors")
                sock = self.close(sock)
        self.close(sock)

    @staticmethod
    def close(sock):
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        return None

    def stop(self):
        self.halt.set()
        for t in self.workers:
            t.join(timeout=wb.TIMEOUT_S + 5)
        with self.lock:
            lat = sorted(self.lat)
            out = dict(self.counts)
        out.update(p50_ms=wb.percentile_ms(lat, 50), p99_ms=wb.percentile_ms(lat, 99),
                   mean_ms=round(1e3 * statistics.mean(lat), 3) if lat else None)
        return out


# ---- the server's threads: CPU time and run-queue wait -------------------------------------

def schedstat(pids):
    """{tid: (name, cpu ns, run-queue wait ns)} of every thread of these processes."""
    out = {}
    for p, t in kb.thread_ids(pids):
        try:
            with open(f"/proc/{p}/task/{t}/schedstat") as f:
                cpu, wait = (int(x) for x in f.read().split()[:2])
            with open(f"/proc/{p}/task/{t}/comm") as f:
                name = f.read().strip()
            out[t] = (name, cpu, wait)
        except (OSError, ValueError):
            pass
    return out


def sched_summary(before, after, wall):
    """CPU of all threads, and the busiest thread's (cpu + wait) / wall: its demand for the CPU."""
    cpu = sum(a[1] - before.get(t, (None, 0, 0))[1] for t, a in after.items())
    per = [(a[1] - before.get(t, (None, 0, 0))[1], a[2] - before.get(t, (None, 0, 0))[2], a[0])
           for t, a in after.items()]
    if not per or wall <= 0:
        return {"cpu_s": round(cpu / 1e9, 3)}
    c, w, name = max(per)
    return {"cpu_s": round(cpu / 1e9, 3), "main_thread": name, "main_cpu_share": round(c / 1e9 / wall, 3),
            "main_wait_share": round(w / 1e9 / wall, 3), "cpu_demand": round((c + w) / 1e9 / wall, 3)}


# ---- the blocking graph, summarised --------------------------------------------------------

def graph_summary(graph):
    """What the resource-aware policy sees: nodes by visits, each with the
    count-weighted means of its outgoing edges (the forecast: time,
    descriptors, threads, heap) and the edges with the most traffic."""
    nodes = {n["id"]: n for n in graph.get("nodes", [])}
    outs = {}
    for e in graph.get("edges", []):
        outs.setdefault(e["from"], []).append(e)

    def mean(es, key):
        n = sum(e["count"] for e in es)
        return round(sum(e[key] * e["count"] for e in es) / n, 3) if n else None

    top = sorted(nodes.values(), key=lambda n: -n.get("visits", 0))[:GRAPH_TOP]
    out_nodes = []
    for n in top:
        es = outs.get(n["id"], [])
        f = {k: mean(es, k) for k in ("mean_ns", "fds", "threads", "heap")}
        acquires = (f["threads"] or 0) > 0.05 or (f["fds"] or 0) > 0.05
        releases = (f["fds"] or 0) < -0.05
        out_nodes.append({"id": n["id"], "label": n.get("label"), "reason": n.get("reason"),
                          "visits": n.get("visits"), "wait_ms": round((n.get("wait_ns") or 0) / 1e6, 3),
                          "out_edges": len(es), "forecast": f,
                          "cpu_way": "acquires (new work)" if acquires else "releases" if releases else "neutral"})
    edges = sorted(graph.get("edges", []), key=lambda e: -e["count"])[:GRAPH_TOP]
    label = {i: n.get("label") for i, n in nodes.items()}
    return {"nodes": len(nodes), "edges": len(graph.get("edges", [])), "sample": graph.get("sample"),
            "depth": graph.get("depth"), "dropped": graph.get("dropped"), "top_nodes": out_nodes,
            "top_edges": [{"from": label.get(e["from"]), "to": label.get(e["to"]), "count": e["count"],
                           "mean_us": round(e["mean_ns"] / 1e3, 2), "fds": e["fds"], "threads": e["threads"],
                           "heap": e["heap"]} for e in edges]}


def fetch_graph(port):
    try:
        status, body, _ = wb.http_get(port, ".weft/graph.json", 30.0)
        return json.loads(body) if status == 200 else None
    except (OSError, ValueError):
        return None


# ---- one point ---------------------------------------------------------------------------------

def policy_of(spec):
    return (spec.get("env") or {}).get("WEFT_POLICY") or "fifo"


def graph_on(spec):
    env = spec.get("env") or {}
    return policy_of(spec) == "resource" or env.get("WEFT_GRAPH") not in (None, "", "0", "off")


def start(spec, ctx):
    """A started, warmed-up server. Raises kb.ServerError."""
    cmd_fn = wb.server_command(spec, ctx.tools, ctx.bins, ctx.cpu_server, ctx.root)
    server = wb.start_server(spec["name"], cmd_fn, fs.rel_path(0, 0, 0))
    ctx.commands.setdefault(spec["name"], " ".join(shlex.quote(x) for x in server.cmd))
    problem, _, _ = wb.warm_up(server.port, ctx.dirs, ctx.seed)
    if problem:
        wb.stop_server(server)
        raise kb.ServerError(f"warm-up: {problem}")
    return server


def base(spec, mode, params, rep):
    return {"benchmark": BENCHMARK, "mode": mode, "server": spec["name"], "policy": policy_of(spec),
            "env": spec.get("env") or {}, "params": params, "rep": rep, "problems": []}


def open_point(spec, point, ctx, rep, want_graph):
    """One open-loop run: httperf sessions at point["rate"] with the sampler, the server under the quota."""
    rec = base(spec, "open", {"rate": point["rate"], "factor": point["factor"]}, rep)
    server = start_for(rec, spec, ctx)
    if server is None:
        return rec
    try:
        try:
            ctx.cap.add(server.pids())
        except OSError as e:
            rec["problems"].append(f"cannot move the server into {ctx.cap.path}: {e}")
            return rec
        pids = server.pids()
        s0, th0, ct0, t0 = schedstat(pids), ctx.cap.stats(), kb.cpu_times(), time.monotonic()
        ka = KeepAliveSampler(server.port, ctx.dirs).start()
        try:
            r = wb.measure_rate(server, spec, point["rate"], ctx, ctx.plans[point["rate"]])
        finally:
            kas = ka.stop()
        s1, th1, ct1 = schedstat(pids), ctx.cap.stats(), kb.cpu_times()
        wall = time.monotonic() - t0  # httperf, then the sampler until it covered every size
        sched = sched_summary(s0, s1, wall)
        texts = ctx.httperf_log[-1][1] if ctx.httperf_log else []
        connect = [float(m) for t in texts for m in re.findall(r"^Connection time \[ms\]: connect ([\d.]+)", t, re.M)]
        samp = r.get("sampler") or {}
        per = samp.get("per_size", {})
        # Replies counted are 2xx: a server that sheds load answers 503 fast,
        # and those are refusals, not throughput.
        status = r.get("status") or {}
        answered = sum(status.values())
        ok_share = status.get("2xx", 0) / answered if answered else 1.0
        rec.update({
            "reply_rate": None if r.get("reply_rate") is None else round(r["reply_rate"] * ok_share, 1),
            "reply_rate_all": r.get("reply_rate"), "status": status, "non_2xx": answered - status.get("2xx", 0),
            "mbps": r.get("mbps"), "response_ms_mean": r.get("response_ms_mean"),
            "connect_ms_mean": round(statistics.mean(connect), 1) if connect else None,
            "p50_ms": samp.get("p50_ms"), "p99_new_ms": samp.get("p99_ms"), "keepalive": kas,
            "p99_ms": max((x for x in (samp.get("p99_ms"), kas.get("p99_ms")) if x is not None), default=None),
            "sampler": {"requests": samp.get("requests"), "ok": sum(s["ok"] for s in per.values()),
                        "timeouts": sum(s["timeouts"] for s in per.values()),
                        "errors": sum(s["errors"] for s in per.values()),
                        "wrong": sum(s["wrong"] for s in per.values()), "examples": samp.get("examples", [])},
            "sessions": r.get("sessions"), "sessions_ok": r.get("sessions_ok"), "replies": r.get("replies"),
            "requests": r.get("requests"), "errors": {k: v for k, v in (r.get("errors") or {}).items() if v},
            "clients": r.get("clients"), "server_cpu": r.get("server_cpu"),
            "server_cpu_of_quota": round(((r.get("server_cpu") or {}).get("user_pct", 0)
                                          + (r.get("server_cpu") or {}).get("system_pct", 0)) / 100 / ctx.cap.share, 3),
            "sched": sched, "throttling": delta(th0, th1),
            "client_cpu_busy": round(kb.cpu_busy(ct0, ct1, ctx.cpu_client), 3),
            "others_server_cpu": round(max(0.0, kb.cpu_busy(ct0, ct1, ctx.cpu_server) - sched["cpu_s"] / wall), 3),
            "study_verified": r.get("verified"), "study_reasons": r.get("reasons", []),
            "weft_stats": slim_stats(r.get("weft_stats")), "rss_kb_max": r.get("rss_kb_max")})
        rec["problems"] += [x for x in r.get("reasons", []) if "httperf" in x or "died" in x]
        if want_graph and graph_on(spec):
            keep_graph(rec, server)
    finally:
        stop(rec, server)
    return rec


def start_for(rec, spec, ctx):
    """The server for one point, or None with the reason in the record."""
    try:
        return start(spec, ctx)
    except kb.ServerError as e:
        rec["problems"].append(f"did not start: {e}")
        return None


def keep_graph(rec, server):
    """The running server's blocking graph, summarised into the record."""
    g = fetch_graph(server.port)
    if g:
        rec["graph"] = graph_summary(g)


def stop(rec, server):
    """Stop the server; a problem stopping it goes into the record."""
    problem = wb.stop_server(server)
    if problem:
        rec["problems"].append(problem)


def closed_point(spec, conns, ctx, rep, want_graph):
    """One closed-loop run: wrk -t1 with `conns` keep-alive connections, the server on its CPU alone."""
    rec = base(spec, "closed", {"connections": conns}, rep)
    server = start_for(rec, spec, ctx)
    if server is None:
        return rec
    try:
        if ctx.closed_cap:
            try:
                ctx.closed_cap.add(server.pids())
            except OSError as e:
                rec["problems"].append(f"cannot move the server into {ctx.closed_cap.path}: {e}")
                return rec
        pids = server.pids()
        ctx.wrk_connections = conns
        s0, c0, ct0, t0 = schedstat(pids), wb.proc_counters(pids), kb.cpu_times(), time.monotonic()
        r = wb.wrk_record(server, spec, ctx)
        wall = time.monotonic() - t0
        s1, c1, ct1 = schedstat(pids), wb.proc_counters(pids), kb.cpu_times()
        server_cpu = (c1["user_s"] - c0["user_s"] + c1["system_s"] - c0["system_s"]) / wall
        if ctx.closed_cap:
            rec["server_cpu_of_quota"] = round(server_cpu / ctx.closed_cap.share, 3)
        rec.update({"reply_rate": r.get("reply_rate"), "mbps": r.get("mbps"), "p50_ms": r.get("response_ms_p50"),
                    "p99_ms": r.get("response_ms_p99"), "mean_ms": r.get("response_ms_mean"),
                    "errors": {k: v for k, v in (r.get("socket_errors") or {}).items() if v},
                    "non_2xx": r.get("non_2xx"), "requests": r.get("requests"),
                    "server_cpu": round(server_cpu, 3), "sched": sched_summary(s0, s1, wall),
                    "others_server_cpu": round(max(0.0, kb.cpu_busy(ct0, ct1, ctx.cpu_server) - server_cpu), 3),
                    "client_cpu_busy": round(kb.cpu_busy(ct0, ct1, ctx.cpu_client), 3)})
        rec["problems"] += [x for x in r.get("reasons", []) if "socket errors" not in x]
        if r.get("reply_rate") is None:
            rec["problems"] += r.get("reasons", []) or ["no wrk result"]
        if want_graph and graph_on(spec):
            keep_graph(rec, server)
    finally:
        stop(rec, server)
    return rec


def slim_stats(st):
    """The counters that say how the server coped: connections, requests, timeouts, statuses."""
    if not st:
        return None
    keep = {k: st[k] for k in ("connections", "requests", "timeouts", "status") if k in st}
    rt = st.get("runtime") or {}
    keep["runtime"] = {k: rt[k] for k in ("switches", "threads_created", "threads_live", "io_parks",
                                          "admissions_shed", "door_refused") if k in rt}
    return keep


# ---- calibration ------------------------------------------------------------------------------

def calibrate(spec, ctx, rate, seconds, cap=None):
    """`spec` at `rate` sessions/s for `seconds` (under `cap` when given):
    CPU per session and per reply. Returns a dict."""
    model = fs.AccessModel(ctx.dirs, ctx.seed)
    clients = max(2, math.ceil(rate * seconds / wb.CONNS_PER_HTTPERF))
    tmp = os.path.join(ctx.tmp, f"calibration-{rate}")
    os.makedirs(tmp, exist_ok=True)
    files, stats = wb.make_session_files(tmp, rate, seconds, clients, model.sample, ctx.seed + 7)
    server = start(spec, ctx)
    try:
        if cap:
            cap.add(server.pids())
        pids = server.pids()
        s0, t0 = schedstat(pids), time.monotonic()
        parts, _, problems, _ = wb.run_httperf(server.port, files, rate, seconds, ctx.cpu_client, tmp)
        wall = time.monotonic() - t0
        s1 = schedstat(pids)
    finally:
        wb.stop_server(server)
    if not parts:
        raise RuntimeError("calibration: no httperf report: " + "; ".join(problems))
    comb = wb.combine_httperf(parts)
    if not comb["replies"]:
        raise RuntimeError("calibration: no replies")
    cpu = sched_summary(s0, s1, wall)["cpu_s"]
    per_reply = cpu / comb["replies"]
    per_request = statistics.mean(st["requests_per_session"] for st in stats)
    out = {"server": spec["name"], "rate": rate, "seconds": seconds, "sessions": sum(n for _, n in files),
           "replies": comb["replies"], "reply_rate": comb["reply_rate"], "server_cpu_s": cpu,
           "cpu_us_per_reply": round(per_reply * 1e6, 2), "requests_per_session": round(per_request, 3),
           "cpu_ms_per_session": round(per_reply * per_request * 1e3, 4), "problems": problems}
    if cap:
        out["cpu_share"] = cap.share
        out["cpu_of_quota"] = round(cpu / wall / cap.share, 3)
    return out


def plan_rates(per_session, factors, max_rate, share=None):
    """(share, capacity sessions/s, [points]) : the CPU share that puts the
    highest factor at max_rate (or the share given), the capacity it gives,
    and the points {rate, factor}."""
    notes = []
    if share is None:
        share = per_session * max_rate / max(factors)
        if share < MIN_SHARE:
            notes.append(f"share {share:.3%} raised to {MIN_SHARE:.0%}")
            share = MIN_SHARE
        if share > 1.0:
            notes.append(f"share {share:.0%} lowered to 100 %: the server cannot be overloaded by {max_rate} "
                         "sessions/s")
            share = 1.0
    capacity = share / per_session if per_session > 0 else float(max_rate)
    points = []
    for f in factors:
        rate = max(1, round(capacity * f))
        if rate > max_rate:
            notes.append(f"factor {f:g}: {rate} sessions/s is above --max-rate {max_rate}: {max_rate} offered")
            rate = max_rate
        points.append({"rate": rate, "factor": f})
    return share, capacity, points, notes


# ---- the runs ---------------------------------------------------------------------------------

class Context:
    """web_bench's context, plus this harness's state."""


def prepare_open(ctx, points, args, notes):
    """Session files for every rate (the same for every server)."""
    model = fs.AccessModel(ctx.dirs, ctx.seed)
    ports = wb.ephemeral_ports()
    ctx.plans = {}
    for i, p in enumerate(points):
        rate = p["rate"]
        if rate in ctx.plans:
            continue
        # Past saturation sessions pile up: plan descriptors as if none finished within the run.
        clients = max(args.clients, math.ceil(rate * args.duration / wb.CONNS_PER_HTTPERF))
        files, _ = wb.make_session_files(ctx.tmp, rate, args.duration, clients, model.sample, ctx.seed)
        sources = wb.source_plan(files, i, "auto" if ctx.srcaddr else "off", ports)
        if any(sources):
            notes.append(f"rate {rate}: httperf clients connect from {sources[0]} upwards (weft-srcaddr.so)")
        ctx.plans[rate] = {"files": files, "sources": sources}


def progress(rec, i, n, t_start):
    p = rec["params"]
    where = f"{p['rate']} sessions/s (x{p['factor']:g})" if rec["mode"] == "open" else f"c={p['connections']:,}"
    if rec.get("reply_rate") is None:
        log(f"overload: [{i}/{n}] {rec['mode']} {rec['server']} {where}: FAILED: {'; '.join(rec['problems'])}")
        return
    errs = sum(rec.get("errors", {}).get(k, 0) for k in rec.get("errors", {}) if k != "total")
    extra = ""
    if rec["mode"] == "open":
        extra = (f", connect {fmt(rec.get('connect_ms_mean'))} ms, response {fmt(rec.get('response_ms_mean'))} ms, "
                 f"sessions ok {rec.get('sessions_ok', 0):,}/{rec.get('sessions', 0):,}, sampler timeouts "
                 f"{rec['sampler']['timeouts']}, CPU {rec['server_cpu_of_quota']:.0%} of quota")
    else:
        extra = f", server CPU {rec['server_cpu']:.0%}"
    log(f"overload: [{i}/{n}] [{time.monotonic() - t_start:.0f} s] {rec['mode']} {rec['server']} {where}: "
        f"{rec['reply_rate']:,.0f} replies/s, p99 {fmt(rec.get('p99_ms'))} ms, errors {errs}{extra}, demand "
        f"{(rec.get('sched') or {}).get('cpu_demand', 0):.2f}, others on the server CPU "
        f"{rec.get('others_server_cpu', 0):.0%}" + (f" -- {'; '.join(rec['problems'])}" if rec["problems"] else ""))


def run_all(specs, ctx, args, t_start):
    """Every point of every mode, servers interleaved and rotated per repetition."""
    plan = []
    for rep in range(args.reps):
        for mode in args.modes:
            pts = ctx.points if mode == "open" else args.connections
            for j, pt in enumerate(pts):
                k = (rep + j) % len(specs)
                for spec in specs[k:] + specs[:k]:
                    plan.append((mode, spec, pt, rep))
    top = {"open": ctx.points[-1] if "open" in args.modes and ctx.points else None,
           "closed": args.connections[-1] if args.connections else None}
    records = []
    per_run = {"open": args.duration + wb.DRAIN_S + 4, "closed": args.wrk_duration + 3}
    wait_budget = QUIET_WAIT_SHARE * sum(per_run[m] for m, _, _, _ in plan)
    for i, (mode, spec, pt, rep) in enumerate(plan, 1):
        if ctx.waited < wait_budget and not args.smoke:
            ctx.waited += kb.wait_quiet((ctx.cpu_server, ctx.cpu_client), min(QUIET_WAIT_RUN, wait_budget - ctx.waited))
        want_graph = rep == args.reps - 1 and pt == top[mode]
        if mode == "open":
            rec = open_point(spec, pt, ctx, rep + 1, want_graph)
        else:
            rec = closed_point(spec, pt, ctx, rep + 1, want_graph)
        rec["disturbed"] = (rec.get("others_server_cpu") or 0) > OTHERS_OK
        records.append(rec)
        progress(rec, i, len(plan), t_start)
    return records


def summarise(runs):
    """One record per (mode, server, point): medians over the repetitions,
    every value kept. When at least two repetitions, and half of them, were
    undisturbed (others under OTHERS_OK of the server's CPU), the medians are
    of those alone ("used": "undisturbed"); else of all ("used": "all")."""
    groups = {}
    for r in runs:
        key = (r["mode"], r["server"], tuple(sorted(r["params"].items())))
        groups.setdefault(key, []).append(r)
    out = []
    med = (lambda xs: statistics.median(xs) if xs else None)
    for (mode, server, _), rs in groups.items():
        ok = [r for r in rs if r.get("reply_rate") is not None]
        quiet = [r for r in ok if not r.get("disturbed")]
        use = quiet if len(quiet) >= max(2, (len(ok) + 1) // 2) else ok
        rec = {"benchmark": BENCHMARK, "mode": mode, "server": server, "policy": rs[0]["policy"],
               "env": rs[0]["env"], "params": rs[0]["params"], "unit": "replies/s",
               "repetitions": len(ok), "values": [r["reply_rate"] for r in ok],
               "disturbed_values": len(ok) - len(quiet), "used": "undisturbed" if use is not ok else "all",
               "reply_rate": med([r["reply_rate"] for r in use]),
               "p99_ms_values": [r.get("p99_ms") for r in ok],
               "p50_ms": med([r["p50_ms"] for r in use if r.get("p50_ms") is not None])}
        errs = {}
        for r in ok:
            for k, v in (r.get("errors") or {}).items():
                if k != "total":
                    errs[k] = errs.get(k, 0) + v
        rec["errors"] = errs  # summed over every repetition
        rec["cpu_demand"] = med([(r.get("sched") or {}).get("cpu_demand") for r in use
                                 if (r.get("sched") or {}).get("cpu_demand") is not None])
        if mode == "open":
            rec["response_ms_mean"] = med([r["response_ms_mean"] for r in use if r.get("response_ms_mean") is not None])
            rec["connect_ms_mean"] = med([r["connect_ms_mean"] for r in use if r.get("connect_ms_mean") is not None])
            rec["sessions_ok_share"] = med([r["sessions_ok"] / r["sessions"] for r in use if r.get("sessions")])
            rec["p99_new_ms"] = med([r["p99_new_ms"] for r in use if r.get("p99_new_ms") is not None])
            rec["p99_keepalive_ms"] = med([r["keepalive"]["p99_ms"] for r in use
                                           if (r.get("keepalive") or {}).get("p99_ms") is not None])
            # the p99 judged: the larger of the two medians
            rec["p99_ms"] = max((x for x in (rec["p99_new_ms"], rec["p99_keepalive_ms"]) if x is not None),
                                default=None)
            rec["keepalive_timeouts"] = sum((r.get("keepalive") or {}).get("timeouts", 0) for r in ok)
            rec["keepalive_errors"] = sum((r.get("keepalive") or {}).get("errors", 0) for r in ok)
            rec["sampler_timeouts"] = sum(r["sampler"]["timeouts"] for r in ok)
            rec["sampler_errors"] = sum(r["sampler"]["errors"] + r["sampler"]["wrong"] for r in ok)
            rec["sampler_requests"] = sum(r["sampler"].get("requests") or 0 for r in ok)
            rec["non_2xx"] = sum(r.get("non_2xx") or 0 for r in ok)
            rec["server_cpu_of_quota"] = med([r["server_cpu_of_quota"] for r in use])
            rec["study_verified"] = [r.get("study_verified") for r in ok]
        else:
            rec["p99_ms"] = med([r["p99_ms"] for r in use if r.get("p99_ms") is not None])
            rec["server_cpu"] = med([r["server_cpu"] for r in use])
            rec["cpu_us_per_reply"] = med([r["sched"]["cpu_s"] / r["requests"] * 1e6 for r in use
                                           if r.get("requests") and (r.get("sched") or {}).get("cpu_s")])
            rec["non_2xx"] = sum(r.get("non_2xx") or 0 for r in ok)
            rec["others_server_cpu"] = [r.get("others_server_cpu") for r in ok]
        problems = [p for r in rs for p in r["problems"]]
        if problems:
            rec["problems"] = problems
        out.append(rec)
    return out


# ---- judging and the report -----------------------------------------------------------------------

def fmt(x, digits=None):
    return wb.fmt(x, digits)


def xkey(r):
    return r["params"]["factor"] if r["mode"] == "open" else r["params"]["connections"]


def saturated(r, mode):
    """Whether the server had no CPU to spare at this point: it used 90 % of
    its quota (open), or its main thread wanted the CPU 90 % of the time."""
    if mode == "open":
        return (r.get("server_cpu_of_quota") or 0) >= 0.9
    return (r.get("cpu_demand") or 0) >= 0.9


def judge(records, mode, server):
    """(held, bounded, why) for one server in one mode, None when not measured
    or never saturated. held: from the point of its peak reply rate on, more
    load never took it below HELD of the peak (a peak at the highest load
    counts as held: no decline seen). bounded: from the first point at which
    the server was saturated on, p99 stayed under P99_BOUND_MS with no
    timeouts."""
    rs = sorted([r for r in records if r["mode"] == mode and r["server"] == server
                 and r.get("reply_rate") is not None], key=xkey)
    if not rs:
        return None, None, "not measured"
    first = next((i for i, r in enumerate(rs) if saturated(r, mode)), None)
    if first is None:
        return None, None, "never saturated (the server had CPU to spare at every point)"
    at = (lambda r: f"x{r['params']['factor']:g}" if mode == "open" else f"c={r['params']['connections']:,}")
    i_peak = max(range(len(rs)), key=lambda i: rs[i]["reply_rate"])
    peak = rs[i_peak]["reply_rate"]
    after = rs[i_peak:]
    low = min(after, key=lambda r: r["reply_rate"])
    held = low["reply_rate"] >= HELD * peak
    past = rs[first:]
    worst = max(past, key=lambda r: r["p99_ms"] if r["p99_ms"] is not None else math.inf)
    if mode == "open":
        timeouts = sum(r.get("sampler_timeouts", 0) + r.get("keepalive_timeouts", 0) for r in past)
    else:
        timeouts = sum(r["errors"].get("timeout", 0) for r in past)
    bounded = worst["p99_ms"] is not None and worst["p99_ms"] <= P99_BOUND_MS and timeouts == 0
    why = (f"saturated from {at(past[0])}; peak {fmt(peak, 0)}/s at {at(rs[i_peak])}"
           + (f", then down to {fmt(low['reply_rate'], 0)}/s at {at(low)} ({low['reply_rate'] / peak:.0%})"
              if low is not rs[i_peak] else " (the highest load)" if i_peak == len(rs) - 1 else "")
           + f"; worst p99 {fmt(worst['p99_ms'])} ms at {at(worst)}" + (f", {timeouts} timeouts" if timeouts else ""))
    return held, bounded, why


def render(records, run):
    s = run["settings"]
    servers = s["servers"]
    md = ["# weft-knot past saturation: FIFO against the resource-aware policy", ""]
    m = run["machine"]
    md += [f"- Machine: {m.get('line', '?')}; httperf: {m.get('httperf', '?')}; wrk: {m.get('wrk', '?')}.",
           f"- Servers ({', '.join(f'{x} ({p})' for x, p in s['policies'].items())}) pinned to CPU "
           f"{s['cpu_server']}, clients to CPU {s['cpu_client']}; a fresh server per run; {s['reps']} "
           "repetition(s) per point, servers interleaved and rotated; medians shown.",
           f"- File set: {s['fileset']} ({s['dirs']} directories). Total time {run['total_seconds']:.0f} s.",
           f"- Judged per policy: past saturation = from the first point where the server had no CPU to spare (open: "
           f"≥ 90 % of its quota used; closed: demand ≥ 0.9) on; *held* = from the load of its peak on, more load "
           f"never takes the reply rate below {HELD:.0%} of that policy's peak; *bounded* = p99 past saturation ≤ "
           f"{P99_BOUND_MS:,.0f} ms with no timeouts (open: the larger of the new-connection and the keep-alive "
           "p99).", ""]
    for mode in s["modes"]:
        md += render_mode(records, run, mode, servers)
    md += ["## Verdicts", "", "| mode | server | policy | reply rate held | p99 bounded | detail |",
           "|---|---|---|---|---|---|"]
    yn = {True: "yes", False: "**no**", None: "—"}
    for mode in s["modes"]:
        for sv in servers:
            held, bounded, why = judge(records, mode, sv)
            md.append(f"| {mode} | {sv} | {s['policies'][sv]} | {yn[held]} | {yn[bounded]} | {why} |")
    md.append("")
    graphs = run.get("graphs") or {}
    if graphs:
        md += ["## The blocking graph at the highest load (what the resource-aware policy forecasts from)", ""]
        for label, g in graphs.items():
            md += [f"### {label}: {g['nodes']} nodes, {g['edges']} edges (sample {g['sample']}, depth {g['depth']}, "
                   f"dropped {g['dropped']})", "",
                   "| node | visits | wait ms (mean) | out-edges | forecast µs | fds | threads | CPU way |",
                   "|---|---:|---:|---:|---:|---:|---:|---|"]
            for n in g["top_nodes"]:
                f = n["forecast"]
                md.append(f"| {n['label']} | {n['visits']:,} | {fmt(n['wait_ms'])} | {n['out_edges']} | "
                          f"{fmt(f['mean_ns'] / 1e3) if f['mean_ns'] is not None else '—'} | "
                          f"{fmt(f['fds'], 2) if f['fds'] is not None else '—'} | "
                          f"{fmt(f['threads'], 2) if f['threads'] is not None else '—'} | {n['cpu_way']} |")
            md.append("")
    md += ["## Notes", ""] + [f"- {n}" for n in run["notes"]] + [""]
    if run.get("plot"):
        md += [f"![reply rate and p99 against the offered load]({run['plot']})", ""]
    elif run.get("plot_note"):
        md += [run["plot_note"], ""]
    return "\n".join(md)


def render_mode(records, run, mode, servers):
    s = run["settings"]
    rs = [r for r in records if r["mode"] == mode]
    if not rs:
        return []
    xs = sorted({xkey(r) for r in rs})
    md = []
    if mode == "open":
        cal = run.get("calibration") or {}
        c1, c2 = cal.get("unthrottled") or {}, cal.get("capped") or {}
        how = (f"Calibration: {c1.get('server', '?')} unthrottled at {c1.get('rate', '?')} sessions/s used "
               f"{c1.get('cpu_us_per_reply', '?')} µs of CPU per reply; held to {c2.get('cpu_share', 0):.1%} at "
               f"{c2.get('rate', '?')} sessions/s ({c2.get('cpu_of_quota', 0):.0%} of that quota used) "
               f"{c2.get('cpu_us_per_reply', '?')} µs per reply, {c2.get('cpu_ms_per_session', '?')} ms per session "
               f"({c2.get('requests_per_session', '?')} requests)" if c2 else cal.get("note", "no calibration"))
        md += ["## Open loop: httperf sessions past the capacity of a CPU-capped server", "",
               f"Server held to {s['cpu_share']:.1%} of CPU {s['cpu_server']} ({run.get('cgroup', '?')}). "
               f"{how}: capacity under the cap ≈ {fmt(s.get('capacity'), 0)} sessions/s. "
               f"{s['duration_s']} s of arrivals per point, httperf --timeout {wb.TIMEOUT_S:g}; p50/p99 from the "
               f"sampler ({wb.Sampler.__name__}: {s['sample_rate']:g} new connections/s over every size).", ""]
        head = ["offered (sessions/s)", "x capacity"]
    else:
        held = s.get("closed_cpu_share")
        md += ["## Closed loop: wrk keep-alive connections, " + (f"server held to {held:.0%} of its CPU ("
                                                                 f"{run.get('closed_cgroup', '?')})" if held else
                                                                 "server alone on its CPU"), "",
               f"wrk -t1, {s['wrk_duration_s']} s per point, --timeout {wb.TIMEOUT_S:g}s, access-model paths.", ""]
        head = ["connections"]
    for sv in servers:
        head += [f"{sv} replies/s", f"{sv} p99 ms" + (" new / kept" if mode == "open" else "")]
        head += ([f"{sv} connect / response ms", f"{sv} sessions ok", f"{sv} errors", f"{sv} CPU of quota"]
                 if mode == "open" else [f"{sv} errors", f"{sv} server CPU"])
        head += [f"{sv} demand"]
    if len(servers) == 2:
        head += [f"{servers[1]} / {servers[0]} replies", f"{servers[1]} / {servers[0]} p99"]
    md += ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    by = {(r["server"], xkey(r)): r for r in rs}
    for x in xs:
        any_r = next(r for r in rs if xkey(r) == x)
        row = ([str(any_r["params"]["rate"]), f"{x:g}"] if mode == "open" else [f"{x:,}"])
        for sv in servers:
            r = by.get((sv, x))
            if r is None or r.get("reply_rate") is None:
                row += ["—"] * (7 if mode == "open" else 5)
                continue
            spread = ""
            if len(r["values"]) > 1:
                spread = f" ({', '.join(fmt(v, 0) for v in r['values'])})"
            errs = ", ".join(f"{k} {v:,}" for k, v in sorted(r["errors"].items())) or "0"
            row += [fmt(r["reply_rate"], 0) + spread + (f" ~{r['disturbed_values']}" if r.get("disturbed_values")
                                                        else ""),
                    f"{fmt(r.get('p99_new_ms'))} / {fmt(r.get('p99_keepalive_ms'))}" if mode == "open"
                    else fmt(r["p99_ms"])]
            if mode == "open":
                errs += f"; non-2xx replies {r['non_2xx']:,}" if r.get("non_2xx") else ""
                errs += (f"; sampler refused {r['sampler_errors']:,}/{r['sampler_requests']:,}"
                         if r.get("sampler_errors") else "")
                errs += f"; sampler timeouts {r['sampler_timeouts']}" if r["sampler_timeouts"] else ""
                errs += f"; keep-alive timeouts {r['keepalive_timeouts']}" if r.get("keepalive_timeouts") else ""
                row += [f"{fmt(r.get('connect_ms_mean'))} / {fmt(r.get('response_ms_mean'))}",
                        f"{r['sessions_ok_share']:.0%}" if r.get("sessions_ok_share") is not None else "—", errs,
                        f"{r['server_cpu_of_quota']:.0%}" if r.get("server_cpu_of_quota") is not None else "—"]
            else:
                row += [errs, f"{r['server_cpu']:.0%}" if r.get("server_cpu") is not None else "—"]
                if r.get("cpu_us_per_reply") is not None:
                    row[-1] += f" ({r['cpu_us_per_reply']:.1f} µs/reply)"
            row.append(f"{r['cpu_demand']:.2f}" if r.get("cpu_demand") is not None else "—")
        if len(servers) == 2:
            a, b = by.get((servers[0], x)), by.get((servers[1], x))
            ok = a and b and a.get("reply_rate") and b.get("reply_rate")
            row.append(f"{b['reply_rate'] / a['reply_rate']:.2f}" if ok else "—")
            row.append(f"{b['p99_ms'] / a['p99_ms']:.2f}" if ok and a.get("p99_ms") and b.get("p99_ms") else "—")
        md.append("| " + " | ".join(row) + " |")
    if any(r.get("disturbed_values") for r in rs):
        md += ["", f"~ n: n repetitions were disturbed (others used more than {OTHERS_OK:.0%} of the server's CPU); "
               "where at least two, and half, were not, the medians shown are of the undisturbed ones alone (every "
               "value is in parentheses and in overload.json)."]
    md += ["", "Values in parentheses: each repetition. demand: the server's busiest thread's (CPU + run-queue "
           "wait) / wall time (1.00: it always wanted the CPU)." + (" p99 new: the sampler's (a new connection per "
                                                                    "request); kept: the keep-alive sampler's "
                                                                    "(requests on admitted connections). connect / "
                                                                    "response: httperf's means; errors: httperf's by "
                                                                    "kind, summed over repetitions, with the replies "
                                                                    "that were not 2xx (a server shedding load "
                                                                    "answers 503: replies/s counts 2xx only) and the "
                                                                    "sampler's requests refused (503 or reset; its "
                                                                    "p99 is of the answered ones)."
                                                                    if mode == "open" else ""), ""]
    return md


def plot(records, run, path):
    """Reply rate and p99 against the offered load, one line per policy, a row per mode."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, f"(matplotlib is not importable by {sys.executable}: no plot)"
    modes = [m for m in run["settings"]["modes"] if any(r["mode"] == m for r in records)]
    if not modes:
        return None, "(nothing to plot)"
    fig, axes = plt.subplots(len(modes), 2, figsize=(11, 3.8 * len(modes)), squeeze=False)
    for row, mode in zip(axes, modes):
        for sv in run["settings"]["servers"]:
            rs = sorted([r for r in records if r["mode"] == mode and r["server"] == sv
                         and r.get("reply_rate") is not None], key=xkey)
            if not rs:
                continue
            xs = [r["params"]["rate"] if mode == "open" else r["params"]["connections"] for r in rs]
            label = f"{sv} ({run['settings']['policies'][sv]})"
            line = row[0].plot(xs, [r["reply_rate"] for r in rs], marker="o", label=label)[0]
            row[1].plot(xs, [r["p99_ms"] for r in rs], marker="o", label=label, color=line.get_color())
            if mode == "open":  # the new-connection p99 beside, thin and dashed
                row[1].plot(xs, [r.get("p99_new_ms") for r in rs], linestyle="--", linewidth=0.9, marker=".",
                            color=line.get_color(), alpha=0.7, label=f"{sv}: new connections only")
        if mode == "open":
            cap = run["settings"].get("capacity")
            for ax in row:
                if cap:
                    ax.axvline(cap, color="grey", linestyle=":", linewidth=1)
                ax.set_xlabel("offered load (new sessions/s; dotted: estimated capacity)")
            row[0].set_title(f"open loop (httperf), server held to {run['settings']['cpu_share']:.0%} of a CPU")
        else:
            for ax in row:
                ax.set_xscale("log")
                ax.set_xlabel("wrk connections (closed loop)")
            held = run["settings"].get("closed_cpu_share")
            row[0].set_title("closed loop (wrk -t1, keep-alive), server " + (f"held to {held:.0%} of a CPU" if held
                                                                              else "alone on its CPU"))
        row[0].set_ylabel("replies / s")
        row[0].set_ylim(bottom=0)
        row[1].set_ylabel("p99 response time (ms, log)")
        row[1].set_yscale("log")
        row[1].set_title("p99: the larger of the new-connection and keep-alive samplers"
                         if mode == "open" else "p99 (wrk)", fontsize=10)
        for ax in row:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return os.path.basename(path), None


def check_outputs(out_dir, servers, modes):
    """Problems with what a run wrote ([] when well formed)."""
    bad = []
    try:
        with open(os.path.join(out_dir, "overload.json")) as f:
            recs = json.load(f)
        with open(os.path.join(out_dir, "overload.run.json")) as f:
            run = json.load(f)
    except (OSError, ValueError) as e:
        return [f"cannot read the outputs: {e}"]
    for mode in modes:
        for sv in servers:
            rs = [r for r in recs if r.get("mode") == mode and r.get("server") == sv]
            if not rs:
                bad.append(f"no {mode} record for {sv}")
            for r in rs:
                if not (isinstance(r.get("reply_rate"), (int, float)) and r["reply_rate"] > 0):
                    bad.append(f"{mode} {sv} {r.get('params')}: no replies ({r.get('problems')})")
                if not isinstance(r.get("p99_ms"), (int, float)):
                    bad.append(f"{mode} {sv} {r.get('params')}: no p99")
    for k in ("machine", "settings", "notes", "commands"):
        if k not in run:
            bad.append(f"overload.run.json has no {k}")
    md = os.path.join(out_dir, "overload.md")
    if not os.path.exists(md) or "Verdicts" not in open(md).read():
        bad.append("overload.md missing or without its verdicts")
    return bad


# ---- main ---------------------------------------------------------------------------------

def float_list(text):
    try:
        v = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated numbers wanted: {text}")
    if not v or min(v) <= 0:
        raise argparse.ArgumentTypeError(f"positive numbers wanted: {text}")
    return sorted(v)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="weft-knot past saturation, FIFO against WEFT_POLICY=resource: open-loop httperf sessions "
                    "against a CPU-capped server, and closed-loop wrk with up to 10,000 connections. Writes "
                    "overload.json, overload.run.json, overload.md and overload.png in --out-dir.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Full run: 5 loads x 3 servers x 5 reps of 10 s (open) + 4 connection counts x 3 x 5 of 5 s "
               "(closed), about 30 minutes here with the three default servers (longer while it waits for quiet CPUs); --quick about 4; --smoke "
               "about 15 s.\n"
               "Exit status: 0 when every point has a value, 1 otherwise (or a tool missing), 77 for --smoke "
               "without httperf/wrk, 130 when interrupted.")
    ap.add_argument("--build", default="build", help="the CMake build directory (default build)")
    ap.add_argument("--knot-bin", help="weft-knot (default BUILD/servers/knot/weft-knot)")
    ap.add_argument("--out-dir", help="where the outputs go (default results; --smoke: BUILD/bench-web/overload-smoke)")
    ap.add_argument("--servers-file", default=wb.SERVERS_JSON, help="the server list (default bench/web/servers.json)")
    ap.add_argument("--servers", default=",".join(DEFAULT_SERVERS),
                    help=f"comma-separated names from the server list (default {','.join(DEFAULT_SERVERS)})")
    ap.add_argument("--modes", default=",".join(MODES), help="open, closed or both (default open,closed)")
    ap.add_argument("--factors", type=float_list, help="open: offered load as multiples of the capacity (default "
                    "0.5,1,1.5,2,3; --quick 0.5,1.5,3)")
    ap.add_argument("--max-rate", type=int, default=MAX_RATE, help=f"open: the most sessions/s offered (default "
                    f"{MAX_RATE}: what httperf on one CPU offers here); the CPU share is chosen so that the highest "
                    "factor falls there")
    ap.add_argument("--cpu-share", type=float, help="open: hold the server to this share of one CPU (0.02-1) "
                    "instead of calibrating")
    ap.add_argument("--duration", type=int, help="open: seconds of arrivals per point (default 10; --quick 6)")
    ap.add_argument("--clients", type=int, default=2, help="open: httperf processes at least (default 2)")
    ap.add_argument("--sample-rate", type=float, default=36.0, help="open: sampler requests/s (default 36)")
    ap.add_argument("--connections", type=wb.int_list, help="closed: wrk connection counts (default "
                    "100,1000,5000,10000; --quick 100,1000,10000)")
    ap.add_argument("--closed-cpu-share", type=float, help="closed: hold the server to this share of one CPU too "
                    "(default: no quota): with one wrk thread as the client the server is otherwise not the limit "
                    "at low connection counts; a quota makes it so (e.g. to compare configurations at saturation)")
    ap.add_argument("--wrk-duration", type=int, help="closed: seconds per point (default 5; --quick 3)")
    ap.add_argument("--reps", type=int, help="repetitions per point (default 5: a median of five outlasts one repetition the shared host "
                         "slowed by a third; --quick 1)")
    ap.add_argument("--fileset", help="the file set (default $FILESET, else var/fileset; --smoke: "
                    "BUILD/bench-web/smoke-fileset)")
    ap.add_argument("--size-mb", type=float, help="file set size in MiB (default 64; --smoke 1 directory)")
    ap.add_argument("--cpu-server", type=int, default=1, help="CPU for the servers (default 1)")
    ap.add_argument("--cpu-client", type=int, default=0, help="CPU for httperf, wrk and this script (default 0)")
    ap.add_argument("--render", metavar="RUN_JSON", help="no runs: summarise the runs kept in an overload.run.json "
                    "again and rewrite overload.json, overload.md and overload.png beside it")
    ap.add_argument("--quick", action="store_true", help="fewer points, shorter runs, 1 repetition (~3 minutes)")
    ap.add_argument("--smoke", action="store_true", help="a ~15 s end-to-end check of the harness (not a "
                    "measurement); exit 77 when httperf or wrk is missing")
    args = ap.parse_args(argv)
    preset = PRESETS["smoke" if args.smoke else "quick" if args.quick else "full"]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or any(m not in MODES for m in args.modes):
        ap.error(f"--modes: choose from {', '.join(MODES)}")
    args.servers = [x.strip() for x in args.servers.split(",") if x.strip()]
    args.factors = args.factors or preset["factors"]
    args.duration = args.duration or preset["duration"]
    args.connections = args.connections or preset["connections"]
    args.wrk_duration = args.wrk_duration or preset["wrk_duration"]
    args.reps = args.reps or preset["reps"]
    if args.smoke:
        args.fileset = args.fileset or os.path.join(args.build, "bench-web", "smoke-fileset")
        args.size_mb = args.size_mb or 1.0
        args.out_dir = args.out_dir or os.path.join(args.build, "bench-web", "overload-smoke")
        if args.cpu_share is None:
            args.cpu_share = 0.25
        args.max_rate = min(args.max_rate, 100)
    args.fileset = os.path.abspath(args.fileset or fs.default_root())
    if args.size_mb is None:
        args.size_mb = float(os.environ["SIZE_MB"]) if os.environ.get("SIZE_MB") else float(fs.DEFAULT_SIZE_MB)
    args.out_dir = args.out_dir or "results"
    for name in ("cpu_share", "closed_cpu_share"):
        v = getattr(args, name)
        if v is not None and not MIN_SHARE <= v <= 1.0:
            ap.error(f"--{name.replace('_', '-')} must be within {MIN_SHARE}..1")
    if min(args.duration, args.wrk_duration, args.reps, args.clients, args.max_rate) < 1:
        ap.error("--duration, --wrk-duration, --reps, --clients and --max-rate must be positive")
    return args


def rerender(path):
    """--render: the outputs again from the runs an overload.run.json keeps."""
    with open(path) as f:
        run_info = json.load(f)
    out = os.path.dirname(os.path.abspath(path))
    records = summarise(run_info["runs"])
    run_info["plot"], run_info["plot_note"] = plot(records, run_info, os.path.join(out, "overload.png"))
    with open(os.path.join(out, "overload.json"), "w") as f:
        json.dump(records, f, indent=2)
        f.write("\n")
    md = render(records, run_info)
    with open(os.path.join(out, "overload.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.render:
        return rerender(args.render)
    signal.signal(signal.SIGTERM, wb.on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        specs = wb.load_servers(args.servers_file, args.servers)
    except (OSError, ValueError) as e:
        log(f"overload: {e}")
        return 1
    tools, missing = kb.find_tools(False)
    if "open" in args.modes:
        if shutil.which("httperf"):
            tools["httperf"] = shutil.which("httperf")
        else:
            missing.append("httperf")
    if missing:
        log(f"overload: {', '.join(missing)} not found: install the Debian package(s) "
            + " ".join(wb.PACKAGES[m] for m in missing))
        return SKIP if args.smoke else 1
    bins = wb.weft_bins(args.build, args.knot_bin)
    for kind in sorted({s["kind"] for s in specs} - {"nginx"}):
        if not os.access(bins[kind], os.X_OK):
            log(f"overload: {bins[kind]} not found: build first (cmake --build {args.build})")
            return 1
    ctx = Context()
    ctx.cap = ctx.closed_cap = None
    try:
        return run(args, specs, tools, bins, ctx)
    except KeyboardInterrupt:
        log("overload: interrupted: stopping every process started")
        return 130
    finally:
        wb.CHILDREN.end_all()
        for cap in (ctx.cap, ctx.closed_cap):
            if cap:
                cap.remove()


def run(args, specs, tools, bins, ctx):
    t_start = time.monotonic()
    nofile = kb.raise_nofile()
    cpu_s, cpu_c, notes = kb.choose_cpus(args.cpu_server, args.cpu_client)
    try:
        os.sched_setaffinity(0, {cpu_c})
    except OSError as e:
        notes.append(f"could not pin the harness to CPU {cpu_c}: {e}")
    leaked = {k: v for k, v in os.environ.items() if k in ("WEFT_POLICY", "WEFT_GRAPH", "WEFT_GRAPH_DEPTH")}
    if leaked:
        notes.append("the harness's environment has " + ", ".join(f"{k}={v}" for k, v in leaked.items())
                     + ": servers whose servers.json entry does not set them inherit them")
    if "closed" in args.modes and nofile < max(args.connections) + 200:
        keep = [c for c in args.connections if c + 200 <= nofile]
        notes.append(f"RLIMIT_NOFILE is {nofile}: closed-loop points above {nofile - 200:,} connections left out")
        args.connections = keep
    dirs = 1 if args.smoke else fs.dirs_for_size(args.size_mb * 2**20)
    try:
        manifest, reused = fs.ensure(args.fileset, dirs, wb.SEED)
    except OSError as e:
        log(f"overload: cannot make the file set in {args.fileset}: {e}")
        return 1
    ctx.tools, ctx.bins, ctx.cpu_server, ctx.cpu_client = tools, bins, cpu_s, cpu_c
    ctx.root, ctx.dirs, ctx.seed = args.fileset, dirs, wb.SEED
    ctx.duration, ctx.sample_rate = args.duration, args.sample_rate
    ctx.wrk_duration, ctx.wrk_repeat, ctx.wrk_connections = args.wrk_duration, 1, 100
    ctx.commands, ctx.httperf_log, ctx.points, ctx.waited = {}, [], [], 0.0
    ctx.srcaddr = wb.find_srcaddr(args.build)
    ctx.tmp = tempfile.mkdtemp(prefix="overload-")
    facts = wb.machine_info(tools, bins["knot"]) if "httperf" in tools else kb.machine_facts(tools, bins["knot"])
    policies = {s["name"]: policy_of(s) for s in specs}
    log(f"overload: {facts['line']}; {facts.get('httperf', '')}; {facts['wrk']}")
    log(f"overload: servers {', '.join(f'{n} ({p})' for n, p in policies.items())} on CPU {cpu_s}, clients on "
        f"CPU {cpu_c}; modes {', '.join(args.modes)}; {args.reps} repetition(s); RLIMIT_NOFILE {nofile}")
    settings = {"servers": [s["name"] for s in specs], "policies": policies, "modes": args.modes,
                "cpu_server": cpu_s, "cpu_client": cpu_c, "reps": args.reps, "fileset": args.fileset, "dirs": dirs,
                "duration_s": args.duration, "drain_s": wb.DRAIN_S, "sample_rate": args.sample_rate,
                "factors": args.factors, "max_rate": args.max_rate, "connections": args.connections,
                "wrk_duration_s": args.wrk_duration, "rlimit_nofile": nofile, "quick": args.quick,
                "smoke": args.smoke, "held": HELD, "p99_bound_ms": P99_BOUND_MS, "cpu_share": None, "capacity": None}
    run_info = {"machine": facts, "settings": settings, "notes": notes, "commands": ctx.commands}
    try:
        if "open" in args.modes:
            if not open_setup(args, specs, ctx, settings, run_info, notes):
                args.modes = [m for m in args.modes if m != "open"]
                settings["modes"] = args.modes
        if "closed" in args.modes and args.closed_cpu_share:
            try:
                ctx.closed_cap = CpuCap(args.closed_cpu_share).create()
                run_info["closed_cgroup"] = ctx.closed_cap.describe()
                settings["closed_cpu_share"] = args.closed_cpu_share
                log(f"overload: closed: server held to {args.closed_cpu_share:.0%} of a CPU "
                    f"({ctx.closed_cap.describe()})")
            except OSError as e:
                log(f"overload: --closed-cpu-share: cannot make a CPU cgroup: {e}")
                return 1
        rng = random.Random(wb.SEED)
        ctx.wrk_script = os.path.join(ctx.tmp, "paths.lua")
        model = fs.AccessModel(dirs, wb.SEED)
        wb.write_wrk_script(ctx.wrk_script, [model.sample(rng)[0] for _ in range(wb.WRK_PATHS)])
        per_open = args.duration + wb.DRAIN_S + 4
        per_closed = args.wrk_duration + 3
        n_open = len(ctx.points) if "open" in args.modes else 0
        n_closed = len(args.connections) if "closed" in args.modes else 0
        plan_s = args.reps * len(specs) * (n_open * per_open + n_closed * per_closed)
        log(f"overload: planned time about {plan_s / 60:.1f} minutes")
        for n in notes:
            log("overload: " + n)
        runs = run_all(specs, ctx, args, t_start) if args.modes else []
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    records = summarise(runs)
    run_info["graphs"] = {f"{r['mode']} {r['server']} at "
                          + (f"{r['params']['rate']} sessions/s" if r["mode"] == "open"
                             else f"{r['params']['connections']:,} connections"): r.pop("graph")
                          for r in runs if r.get("graph")}
    run_info["total_seconds"] = round(time.monotonic() - t_start, 1)
    others = [r["others_server_cpu"] for r in runs if r.get("others_server_cpu") is not None]
    busy = [r["client_cpu_busy"] for r in runs if r.get("client_cpu_busy") is not None]
    if ctx.waited:
        notes.append(f"{ctx.waited:.0f} s spent waiting for the CPUs to go quiet before runs")
    for name in dict.fromkeys(r["server"] for r in runs):
        mine = [r for r in runs if r["server"] == name and r.get("mode") == "open"]
        spec = next((s for s in specs if s["name"] == name), {})
        argv = spec.get("args", [])
        kernel = any(a == "--door" and b == "kernel" for a, b in zip(argv, argv[1:]))
        door = sum(((r.get("weft_stats") or {}).get("runtime") or {}).get("door_refused", 0) for r in mine)
        resets = sum((r.get("errors") or {}).get("connreset", 0) for r in mine)
        if kernel and mine and not door and resets:
            notes.append(f"{name}: its door in the kernel refused nothing and clients saw {resets:,} resets: "
                         "weft_door_listen was refused (root and Linux 5.9 are needed), so it refused after accept")
    dist = sum(1 for r in runs if r.get("disturbed"))
    if dist:
        notes.append(f"{dist} of {len(runs)} runs were disturbed: other processes used more than {OTHERS_OK:.0%} of "
                     "the server's CPU meanwhile (marked ~ in the tables)")
    if others:
        notes.append(f"noise: other processes used a median {statistics.median(others):.0%} (max {max(others):.0%}) "
                     f"of the server's CPU {cpu_s} during the runs; the client CPU {cpu_c} was busy a median "
                     f"{statistics.median(busy):.0%} (max {max(busy):.0%}; httperf, wrk, the sampler and anything "
                     "else)")
    os.makedirs(args.out_dir, exist_ok=True)
    paths = {k: os.path.join(args.out_dir, f"overload.{k}") for k in ("json", "run.json", "md", "httperf.log")}
    with open(paths["json"], "w") as f:
        json.dump(records, f, indent=2)
        f.write("\n")
    run_info["runs"] = runs
    if not args.smoke:
        run_info["plot"], run_info["plot_note"] = plot(records, run_info, os.path.join(args.out_dir, "overload.png"))
    wb.write_reports(paths, run_info, ctx.httperf_log, render(records, run_info))
    log(f"overload: wrote {', '.join(paths.values())}"
        + (f", {os.path.join(args.out_dir, run_info['plot'])}" if run_info.get("plot") else "")
        + f" ({run_info['total_seconds']:.0f} s)")
    failed = [r for r in records if r.get("reply_rate") is None]
    if args.smoke:
        bad = check_outputs(args.out_dir, settings["servers"], args.modes)
        for b in bad:
            log(f"overload: smoke: {b}")
        log("overload: smoke: " + ("FAILED" if bad else "ok"))
        return 1 if bad else 0
    return 1 if failed or not records else 0


def open_setup(args, specs, ctx, settings, run_info, notes):
    """Calibrate, make the cgroup, plan the rates and their session files. False: no open mode here.

    Calibration in two steps (the first server): unthrottled at CALIB_RATE,
    whose CPU per session gives a first share (an overestimate: a lightly
    loaded server pays a wake-up per request, a saturated one batches); then
    under that share at --max-rate, where it is (nearly) saturated: the CPU
    per reply there sets the share used."""
    cal = run_info["calibration"] = {}
    if args.cpu_share is None:
        try:
            kb.wait_quiet((ctx.cpu_server, ctx.cpu_client), QUIET_WAIT_RUN)
            log(f"overload: calibrating (1/2): {specs[0]['name']} unthrottled at {CALIB_RATE} sessions/s for "
                f"{CALIB_SECONDS} s")
            c1 = cal["unthrottled"] = calibrate(specs[0], ctx, CALIB_RATE, CALIB_SECONDS)
            share1, _, _, _ = plan_rates(c1["cpu_ms_per_session"] / 1e3, args.factors, args.max_rate)
            ctx.cap = CpuCap(share1).create()
            kb.wait_quiet((ctx.cpu_server, ctx.cpu_client), QUIET_WAIT_RUN)
            log(f"overload: calibrating (2/2): {c1['cpu_us_per_reply']} µs CPU per reply unthrottled; now held to "
                f"{share1:.1%} of a CPU at {args.max_rate} sessions/s for {CALIB_SECONDS} s")
            c2 = cal["capped"] = calibrate(specs[0], ctx, args.max_rate, CALIB_SECONDS, ctx.cap)
        except (kb.ServerError, RuntimeError) as e:
            notes.append(f"open mode left out: calibration failed: {e}")
            return False
        except OSError as e:
            notes.append(f"open mode left out: cannot make a CPU cgroup ({e}); httperf alone cannot overload a "
                         "server on this machine")
            return False
        if c2.get("cpu_of_quota", 0) < 0.9:
            notes.append(f"calibration: at {args.max_rate} sessions/s under {share1:.1%} the server used only "
                         f"{c2['cpu_of_quota']:.0%} of its quota: its CPU per reply there may overstate the cost at "
                         "saturation (the capacity is then underestimated)")
        per = c2["cpu_ms_per_session"] / 1e3
        log(f"overload: calibration: {c2['cpu_us_per_reply']} µs CPU per reply at {c2['cpu_of_quota']:.0%} of the "
            f"quota ({c1['cpu_us_per_reply']} µs unthrottled at {CALIB_RATE}/s)")
        share, capacity, points, plan_notes = plan_rates(per, args.factors, args.max_rate)
    else:
        cal["note"] = f"--cpu-share {args.cpu_share:g} given: no calibration"
        share = args.cpu_share
        capacity = args.max_rate / max(args.factors)
        points = [{"rate": max(1, min(args.max_rate, round(capacity * f))), "factor": f} for f in args.factors]
        plan_notes = [f"--cpu-share given: the capacity is not known; factors are of --max-rate / "
                      f"{max(args.factors):g} = {capacity:.0f} sessions/s"]
    notes += plan_notes
    try:
        if ctx.cap:
            ctx.cap.set(share)
        else:
            ctx.cap = CpuCap(share).create()
    except OSError as e:
        notes.append(f"open mode left out: cannot make a CPU cgroup ({e}); httperf alone cannot overload a server "
                     "on this machine")
        return False
    run_info["cgroup"] = ctx.cap.describe()
    settings.update(cpu_share=share, capacity=round(capacity, 1))
    ctx.points = points
    prepare_open(ctx, points, args, notes)
    log(f"overload: open: server held to {share:.1%} of a CPU ({ctx.cap.describe()}); capacity about "
        f"{capacity:.0f} sessions/s; offering " + ", ".join(f"{p['rate']} (x{p['factor']:g})" for p in points))
    return True


if __name__ == "__main__":
    sys.exit(main())
