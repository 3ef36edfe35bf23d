#!/usr/bin/env python3
"""Web-server architectures compared on the EuroSys'07 study's workload
(Pariag et al., "Comparing the performance of web server architectures",
sections 3-4): weft-knot in its modes, the µserver (SPED, SYMPED,
shared-SYMPED, userver-b), WatPipe and nginx, each on one CPU, loaded by
httperf session logs at a sweep of rates, verified the study's way.

Method
  * Servers are data: bench/web/servers.json lists {"name", "kind" (knot,
    userver, watpipe, pool, pool-weft, staged, nginx, apache or apache-weft),
    "args"} and optionally "env" (variables set
    for that server only, e.g. {"WEFT_GRAPH": "1"}; null unsets one: the
    command is prefixed with `env [-u NAME] NAME=VALUE ...`, so the recorded
    command reproduces it) and "default": false (run only when named: the
    configurations of other benchmarks, e.g. bench/web/overload.py's);
    --servers picks some by name, the default is every entry not marked
    "default": false. weft's
    servers run with the listed args plus --stats (their counters are read
    before and after each run); nginx with knot_bench.py's generated configuration (master and one
    worker, sendfile, worker_connections 20000, keepalive_timeout 65); Apache httpd (Debian's
    apache2) with APACHE_CONF, worker MPM in one process (-X), 4,096 threads, sendfile, the same
    keep-alive, on NPTL ("apache") or under BUILD/posix/weft-run ("apache-weft", args: weft-run's).
    weft-pool, a plain pthread program, likewise runs on NPTL ("pool") or under weft-run ("pool-weft",
    args: the server's; weft-run's options through "env", e.g. {"WEFT_IO": "epoll"}).
  * File set: bench/web/fileset.py's SPECweb99-like set (36 sizes, 102 B to
    921,600 B, dirNNNNN/classC_I), made or reused with seed 1 in --fileset
    (default $FILESET, else var/fileset), about --size-mb MiB.
  * Per server: start it pinned to the server CPU (taskset), with the set as
    its document root, on a free port; warm up by fetching every file of the
    set once, each checked against fileset.expected_sha256 (a server that
    serves one wrong byte fails there); then, for each rate of the sweep
    (new sessions per second):
      - httperf: the rate x duration sessions are split over C httperf
        processes (--clients, raised automatically so that none needs more
        than ~600 concurrent connections: Debian's httperf is limited to
        FD_SETSIZE = 1,024), each `taskset -c CLIENT_CPU httperf --hog
        --server 127.0.0.1 --port P --wsesslog=N,0,FILE --rate R/C --timeout
        15` with its own session file (sessions.py: 30 % one request, 70 %
        5-15; Weibull browser think times, mean 0.343 s; paths from the access
        model; the same files for every server). They run concurrently; at
        duration + DRAIN_S seconds the ones still running get SIGINT (httperf
        then prints its report: the Weibull tail would otherwise keep a few
        sessions alive for 30-50 s), and anything left after a grace is
        killed. httperf has no source-address option; when a client's
        sessions would take over half the ephemeral ports of one address
        (each closed connection holds its port in TIME_WAIT for 60 s), its
        httperf runs under weft-srcaddr.so (bench/web/srcaddr.c, an
        LD_PRELOAD) which binds its connections to other 127.0.x.y addresses
        (--source-addrs auto|always|off).
      - meanwhile a sampling client (threads in this process, pinned with it
        to the client CPU) requests files at a low fixed rate, cycling through
        all 36 sizes (and the directories), each on a new connection with a
        15 s deadline for the whole reply; it checks status and bytes (sha256
        against fileset.expected_sha256) and records per size: requests, ok,
        timeouts, errors (refused/reset/short), wrong; its latencies give the
        p50/p99 response time (httperf reports only means). It keeps going
        after httperf until every size has been sampled at least once.
      - recorded: reply rate (sum over clients of replies / test duration),
        Mbit/s (sum of httperf's Net I/O), mean response time (httperf's
        "Reply time response", weighted by replies; response + transfer too),
        httperf's errors by kind (summed), the server's user and system CPU
        seconds (/proc/PID/stat) and voluntary/involuntary context switches
        (/proc/PID/task/*/status), over all its processes (nginx's worker
        too), its largest RSS (VmRSS summed, sampled every 0.5 s), and for
        weft-knot the difference of its /.weft/stats counters.
    then one closed-loop wrk run (-t1 -c --wrk-connections) with a Lua script
    cycling through a few thousand paths drawn from the access model: peak
    req/s and p50/p99. The server is stopped with SIGTERM; one that fails to
    start, or dies, is reported with its last output lines.
  * Verification (verify_run), per (server, rate), from the sampler's per-size
    counts, after the study's section 3.4: every size served correctly at
    least once; no wrong bytes; no size's timeout percentage (timeouts and
    connection errors over requests) above MAX_TIMEOUT_PCT = 10 %; none more
    than SPREAD_PCT = 2 points above the mean over sizes (the study: "no
    single timeout percentage can be 2 % larger than the mean"). httperf's
    own error counts are reported beside. A run that fails is kept with
    "verified": false and its reasons, and is not plotted.

Outputs (--out-dir, default results): web.json (a list of runs: type
"httperf" per (server, rate), "wrk" per server, "start" for a server that
did not start), web.run.json (machine, settings, commands, notes),
web.md (a Table-1-like summary per server at its highest verified rate, every
run, the wrk peaks, failures), web_throughput.png and web_response.png
(Figs. 7 and 8; with matplotlib only), web.httperf.log (every httperf
report). When --out-dir holds smp_web.json (bench/web/smp.py, `make
bench-smp-web`: two cores, issue 15), web.md shows its ratios too, marked
as that run's. Progress on stderr, one line per run.

Python 3 standard library only (matplotlib optional, imported lazily).
"""
import argparse
import hashlib
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
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import knot_bench as kb  # noqa: E402  (servers, nginx config, wrk parsing, machine facts)
import fileset as fs  # noqa: E402  (the file set, its contents and access model)
import sessions as ss  # noqa: E402  (httperf session files)

log = kb.log
SKIP = 77
SEED = 1
SERVERS_JSON = os.path.join(HERE, "servers.json")
# The study's client timeout, for httperf and the sampler.
TIMEOUT_S = 15.0
# httperf runs are interrupted (SIGINT: it prints its report) this long after
# the arrival window; then given GRACE_S to print before being killed.
DRAIN_S = 3.0
GRACE_S = 10.0
# Debian's httperf handles at most FD_SETSIZE (1,024) descriptors: plan for
# at most this many concurrent connections per process.
CONNS_PER_HTTPERF = 600
# Source addresses (weft-srcaddr.so): a closed connection keeps its port for
# TIME_WAIT_S; a client is given more 127.0.x.y addresses when its sessions
# would take more than half the ephemeral range of one address.
TIME_WAIT_S = 60
SRCADDR_MODES = ("auto", "always", "off")
# Verification (the study's section 3.4).
MAX_TIMEOUT_PCT = 10.0
SPREAD_PCT = 2.0
SIZE_NAMES = [fs.file_name(c, i) for c in range(fs.CLASSES) for i in range(fs.FILES_PER_CLASS)]
SIZE_OF = {fs.file_name(c, i): fs.SIZES[c][i] for c in range(fs.CLASSES) for i in range(fs.FILES_PER_CLASS)}
WRK_PATHS = 4000
PACKAGES = {"httperf": "httperf", "wrk": "wrk", "nginx": "nginx-light", "taskset": "util-linux", "apache2": "apache2"}

PRESETS = {  # servers (None: the default entries of servers.json), rates (sessions/s), seconds of arrivals per
    # rate, wrk seconds, sampler req/s. The full run has twelve servers: about 50 s each, about 11 minutes.
    # wrk runs wrk_repeat times per server and the median counts: one run of a few seconds varies by
    # several percent on this shared machine (measured: 105-117 k req/s for one server).
    "full": {"servers": None, "rates": [100, 400, 800], "duration": 10, "wrk_duration": 4, "wrk_repeat": 3,
             "sample_rate": 36.0},
    "quick": {"servers": "knot-nb,knot-b,userver-symped,watpipe,nginx", "rates": [100, 400], "duration": 8,
              "wrk_duration": 2, "wrk_repeat": 3, "sample_rate": 36.0},
    "smoke": {"servers": "knot-nb,nginx", "rates": [40], "duration": 3, "wrk_duration": 2, "wrk_repeat": 1,
              "sample_rate": 36.0},
}


# ---- processes: every child is tracked, so Ctrl-C leaves none behind ---------------------

class Children:
    """The harness's child processes (httperf, wrk) and servers."""

    def __init__(self):
        self.procs, self.servers = [], []
        self.lock = threading.Lock()

    def popen(self, cmd, **kw):
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, **kw)
        with self.lock:
            self.procs.append(p)
        return p

    def add_server(self, server):
        self.servers.append(server)

    def end_all(self):
        """SIGTERM every live child, SIGKILL what is left after 3 s; stop every server."""
        with self.lock:
            live = [p for p in self.procs if p.poll() is None]
        for p in live:
            try:
                p.terminate()
            except OSError:
                pass
        deadline = time.monotonic() + 3
        for p in live:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for s in self.servers:
            try:
                s.stop(grace=3.0)
            except Exception:  # noqa: BLE001  (best effort on the way out)
                pass


CHILDREN = Children()


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


# ---- servers ---------------------------------------------------------------------------------

def valid_env(env):
    """Whether a servers.json "env" is {NAME: "value" or null}."""
    return isinstance(env, dict) and all(
        isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and (v is None or isinstance(v, str))
        for k, v in env.items())


def load_servers(path, names=None):
    """The server specs of servers.json, those named (in that order), or by
    default every one not marked "default": false. Raises ValueError."""
    with open(path) as f:
        specs = json.load(f)
    if not isinstance(specs, list):
        raise ValueError(f"{path}: not a list")
    for s in specs:
        if not (isinstance(s, dict) and isinstance(s.get("name"), str) and s.get("kind") in KINDS
                and isinstance(s.get("args", []), list) and valid_env(s.get("env", {}))
                and isinstance(s.get("default", True), bool)):
            raise ValueError(f"{path}: bad entry {s!r} (want name, kind {'|'.join(KINDS)}, args list; optional "
                             "env {NAME: value or null}, default true|false)")
    by = {s["name"]: s for s in specs}
    if not names:
        return [s for s in specs if s.get("default", True)]
    unknown = [n for n in names if n not in by]
    if unknown:
        raise ValueError(f"unknown server(s) {', '.join(unknown)}; {path} has {', '.join(by)}")
    return [by[n] for n in names]


# The kinds of server servers.json may name: weft's servers (their binary in
# the build tree), nginx, and Apache httpd on NPTL ("apache") or, the same
# binary unmodified, under the build tree's weft-run ("apache-weft"; its
# "args" are weft-run's options, e.g. ["--io", "epoll"]). weft-pool is a
# plain pthread program too: "pool" runs it on NPTL, "pool-weft" the same
# binary under weft-run (its "args" are weft-pool's, like "pool"'s; weft-run's
# options, which only set variables, go in "env": WEFT_IO, WEFT_VPROCS).
WEFT_BINS = {"knot": ("servers", "knot", "weft-knot"), "userver": ("servers", "userver", "weft-userver"),
             "watpipe": ("servers", "watpipe", "weft-watpipe"),
             "knot-linked": ("servers", "knot", "weft-knot-linked"),
             "pool": ("servers", "pool", "weft-pool"), "staged": ("servers", "staged", "weft-staged"),
             "vtserver": ("servers", "vtserver", "weft-vtserver")}
APACHE_KINDS = ("apache", "apache-weft")
# Kinds that are a weft server's binary under weft-run: {kind: the binary's kind}.
UNDER_WEFT_RUN = {"pool-weft": "pool"}
KINDS = tuple(WEFT_BINS) + tuple(UNDER_WEFT_RUN) + ("nginx",) + APACHE_KINDS
# Kinds that serve weft's /.weft/stats (with --stats).
STATS_KINDS = tuple(WEFT_BINS) + tuple(UNDER_WEFT_RUN)
WEFT_RUN = ("posix", "weft-run")


def weft_bins(build, knot_bin=None):
    """{kind: path} of weft's servers in the build tree, and of weft-run."""
    bins = {k: os.path.abspath(os.path.join(build, *parts)) for k, parts in WEFT_BINS.items()}
    if knot_bin:
        bins["knot"] = os.path.abspath(knot_bin)
    bins["weft-run"] = os.path.abspath(os.path.join(build, *WEFT_RUN))
    return bins


# Apache httpd (Debian's apache2), the worker MPM in one process (-X: no
# parent, one child whose threads serve): a thread per connection, blocking
# calls, the program weft-run is for. Keep-alive as nginx's configuration.
# A connection holds a thread while it lives, and at the highest rate
# httperf keeps thousands open: APACHE_THREADS threads, so that none waits
# in the listen queue for want of one (on NPTL too).
APACHE_THREADS = 4096
APACHE_MODULES = "/usr/lib/apache2/modules"
APACHE_CONF = """\
# Generated by bench/web/web_bench.py for one run (apache2 -X -f this file).
ServerRoot {tmp}
ServerName 127.0.0.1
LoadModule mpm_worker_module {mods}/mod_mpm_worker.so
LoadModule authz_core_module {mods}/mod_authz_core.so
Listen 127.0.0.1:{port}
PidFile {tmp}/httpd.pid
ErrorLog {tmp}/error.log
LogLevel warn
Mutex file:{tmp} default
DefaultRuntimeDir {tmp}
DocumentRoot {root}
<Directory {root}>
    Require all granted
</Directory>
EnableSendfile On
KeepAlive On
MaxKeepAliveRequests 100000
KeepAliveTimeout 65
ServerLimit 1
StartServers 1
ThreadLimit {threads}
ThreadsPerChild {threads}
MaxRequestWorkers {threads}
MinSpareThreads 1
MaxSpareThreads {threads}
MaxConnectionsPerChild 0
"""


def apache_cmd(apache, cpu, root, weft_run=None, weft_args=()):
    """A command maker (port, tmp) -> argv: apache2 -X with APACHE_CONF,
    pinned to `cpu`; under weft_run (with weft_args) when given."""
    def cmd(port, tmp):
        conf = os.path.join(tmp, "httpd.conf")
        with open(conf, "w") as f:
            f.write(APACHE_CONF.format(tmp=tmp, mods=APACHE_MODULES, port=port, root=root, threads=APACHE_THREADS))
        runner = [weft_run] + list(weft_args) if weft_run else []
        return ["taskset", "-c", str(cpu)] + runner + [apache, "-X", "-f", conf]
    return cmd


def weft_run_cmd(weft_run, server, cpu, root, args):
    """A command maker (port, tmp) -> argv: a weft server's binary under
    weft_run, pinned to `cpu`, serving `root` on 127.0.0.1:port, with `args`
    (as kb.knot_cmd, with weft-run between taskset and the server)."""
    def cmd(port, tmp):
        return (["taskset", "-c", str(cpu), weft_run, server, "--listen", f"127.0.0.1:{port}", "--root", root]
                + list(args))
    return cmd


def env_prefix(env):
    """`env` argv setting (value) or unsetting (None) variables: [] for none."""
    if not env:
        return []
    out = ["env"]
    for k, v in env.items():
        if v is None:
            out += ["-u", k]
    return out + [f"{k}={v}" for k, v in env.items() if v is not None]


def server_command(spec, tools, bins, cpu, root):
    """A command maker (port, tmp) -> argv for kb.Server. weft's servers all
    take --listen, --root and --stats (their counters at /.weft/stats). The
    spec's "env" becomes an `env ...` prefix (the server keeps its PID)."""
    if spec["kind"] == "nginx":
        inner = kb.nginx_cmd(tools["nginx"], cpu, root)
    elif spec["kind"] == "apache":
        inner = apache_cmd(tools["apache2"], cpu, root)
    elif spec["kind"] == "apache-weft":
        inner = apache_cmd(tools["apache2"], cpu, root, bins["weft-run"], spec.get("args", []))
    elif spec["kind"] in UNDER_WEFT_RUN:
        inner = weft_run_cmd(bins["weft-run"], bins[UNDER_WEFT_RUN[spec["kind"]]], cpu, root,
                             list(spec.get("args", [])) + ["--stats"])
    else:
        inner = kb.knot_cmd(bins[spec["kind"]], cpu, root, list(spec.get("args", [])) + ["--stats"])
    prefix = env_prefix(spec.get("env"))
    return (lambda port, tmp: prefix + inner(port, tmp)) if prefix else inner


def port_in_use(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True


def start_server(name, cmd_fn, probe, tries=3):
    """A started kb.Server (it answers `probe`), retried on a new port when the
    port was taken meanwhile. Raises kb.ServerError saying why."""
    for attempt in range(1, tries + 1):
        tmp = tempfile.mkdtemp(prefix=f"web-bench-{name}-")
        server = kb.Server(name, cmd_fn, tmp)
        server.tmpdir = tmp
        CHILDREN.add_server(server)
        try:
            server.start(probe)
            return server
        except kb.ServerError as e:
            server.stop(grace=3.0)
            busy = server.port is not None and port_in_use(server.port)
            shutil.rmtree(tmp, ignore_errors=True)
            if busy:
                msg = f"cannot bind 127.0.0.1:{server.port}: the port is in use (by another process) ({e})"
                if attempt < tries:
                    log(f"web_bench: {name}: {msg}; trying another port")
                    continue
                raise kb.ServerError(msg)
            raise
    raise kb.ServerError("could not start")


def stop_server(server):
    problem = server.stop()
    shutil.rmtree(getattr(server, "tmpdir", ""), ignore_errors=True)
    return problem


# ---- HTTP: one request, whole reply within a deadline ----------------------------------

def http_get(port, path, timeout, sock=None):
    """GET path on a new connection (Connection: close). Returns (status, body,
    seconds); raises socket.timeout when the whole reply takes longer than
    timeout, OSError/ValueError on a connection error or a malformed reply."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(f"GET /{path.lstrip('/')} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        buf = bytearray()
        head_end, length = -1, None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("reply not complete within the deadline")
            s.settimeout(left)
            chunk = s.recv(262144)
            if not chunk:
                break
            buf += chunk
            if head_end < 0:
                head_end = buf.find(b"\r\n\r\n")
                if head_end >= 0:
                    for line in bytes(buf[:head_end]).split(b"\r\n")[1:]:
                        k, _, v = line.partition(b":")
                        if k.strip().lower() == b"content-length":
                            length = int(v.strip())
            if head_end >= 0 and length is not None and len(buf) >= head_end + 4 + length:
                break
    finally:
        s.close()
    if head_end < 0:
        raise ValueError(f"no complete reply head ({len(buf)} bytes)")
    status = int(bytes(buf[:head_end]).split(b" ", 2)[1])
    body = bytes(buf[head_end + 4:])
    if length is not None and len(body) < length:
        raise ValueError(f"short reply: {len(body):,} of {length:,} bytes")
    return status, body, time.monotonic() - t0


def warm_up(port, dirs, seed):
    """GET every file of the set once, checking its bytes. Returns (problem or None, files, seconds)."""
    t0 = time.monotonic()
    n = 0
    for d, c, i in fs.all_files(dirs):
        path = fs.rel_path(d, c, i)
        try:
            status, body, _ = http_get(port, path, TIMEOUT_S)
        except (OSError, ValueError) as e:
            return f"GET /{path}: {e}", n, time.monotonic() - t0
        if status != 200:
            return f"GET /{path}: status {status}", n, time.monotonic() - t0
        if hashlib.sha256(body).hexdigest() != fs.expected_sha256(seed, d, c, i):
            return (f"GET /{path}: {len(body):,} bytes that are not the file's {fs.SIZES[c][i]:,}: "
                    "the server serves wrong bytes"), n, time.monotonic() - t0
        n += 1
    return None, n, time.monotonic() - t0


# ---- the sampling client -------------------------------------------------------------------

def new_size_stats():
    return {name: {"size": SIZE_OF[name], "requests": 0, "ok": 0, "timeouts": 0, "errors": 0, "wrong": 0}
            for name in SIZE_NAMES}


class Sampler:
    """Requests files at `rate` per second from `threads` threads, the k-th
    request asking for size k mod 36 in directory (k // 36) mod dirs, each
    with a TIMEOUT_S deadline; per-size counts and latencies (s) of the
    correct replies."""

    def __init__(self, port, dirs, seed, rate, threads=6, timeout=TIMEOUT_S):
        self.port, self.dirs, self.seed, self.rate, self.timeout = port, dirs, seed, rate, timeout
        self.threads = threads
        self.per_size = new_size_stats()
        self.latencies = []
        self.examples = []  # a few problems, for the report
        self.lock = threading.Lock()
        self.next_k = 0
        self.halt = threading.Event()
        self.workers = []

    def start(self):
        self.t0 = time.monotonic()
        for w in range(self.threads):
            t = threading.Thread(target=self.work, args=(w,), daemon=True)
            t.start()
            self.workers.append(t)

    def work(self, w):
        interval = self.threads / self.rate
        due = self.t0 + w / self.rate
        while not self.halt.is_set():
            wait = due - time.monotonic()
            if wait > 0 and self.halt.wait(wait):
                break
            due = max(due + interval, time.monotonic() - interval)
            with self.lock:
                k = self.next_k
                self.next_k += 1
            self.one(k)

    def one(self, k):
        c, i = divmod(k % len(SIZE_NAMES), fs.FILES_PER_CLASS)
        d = (k // len(SIZE_NAMES)) % self.dirs
        name = fs.file_name(c, i)
        outcome, lat, why = "ok", None, None
        try:
            status, body, lat = http_get(self.port, fs.rel_path(d, c, i), self.timeout)
            if status != 200:
                outcome, why = "errors", f"status {status}"
            elif hashlib.sha256(body).hexdigest() != fs.expected_sha256(self.seed, d, c, i):
                outcome, why = "wrong", f"{len(body):,} bytes that differ from the file"
        except socket.timeout:
            outcome, why = "timeouts", f"no complete reply within {self.timeout:.0f} s"
        except (OSError, ValueError) as e:
            outcome, why = "errors", str(e)
        with self.lock:
            st = self.per_size[name]
            st["requests"] += 1
            st[outcome] += 1
            if lat is not None and outcome == "ok":
                self.latencies.append(lat)
            if why and len(self.examples) < 5:
                self.examples.append(f"{fs.rel_path(d, c, i)}: {why}")

    def covered(self):
        with self.lock:
            return all(st["requests"] > 0 for st in self.per_size.values())

    def stop(self, deadline):
        """Stop once every size was requested (or at the deadline); wait for the threads."""
        while not self.covered() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.halt.set()
        for t in self.workers:
            t.join(timeout=max(0.1, deadline - time.monotonic()) + self.timeout)

    def summary(self):
        with self.lock:
            lat = sorted(self.latencies)
            per = json.loads(json.dumps(self.per_size))
        return {"rate": self.rate, "requests": sum(s["requests"] for s in per.values()),
                "p50_ms": percentile_ms(lat, 50), "p99_ms": percentile_ms(lat, 99),
                "mean_ms": round(1e3 * statistics.mean(lat), 3) if lat else None,
                "per_size": per, "examples": list(self.examples)}


def percentile_ms(sorted_s, p):
    """The p-th percentile (nearest rank) of sorted seconds, in ms; None when empty."""
    if not sorted_s:
        return None
    k = max(0, min(len(sorted_s) - 1, math.ceil(p / 100 * len(sorted_s)) - 1))
    return round(1e3 * sorted_s[k], 3)


# ---- verification ---------------------------------------------------------------------------

def timeout_pct(st):
    """Requests not answered (timeouts and connection errors) over requests, %."""
    return 100.0 * (st.get("timeouts", 0) + st.get("errors", 0)) / st["requests"] if st.get("requests") else 0.0


def verify_run(per_size, sizes=SIZE_NAMES, max_pct=MAX_TIMEOUT_PCT, spread=SPREAD_PCT):
    """The study's verification of one (server, rate) from the sampler's
    per-size counts {name: {"requests", "ok", "timeouts", "errors", "wrong"}}.
    Returns (ok, [reasons])."""
    reasons = []
    never = [n for n in sizes if per_size.get(n, {}).get("ok", 0) < 1]
    if never:
        reasons.append(f"{len(never)} of {len(sizes)} sizes never served correctly: "
                       + ", ".join(f"{n} ({SIZE_OF.get(n, '?'):,} B)" for n in never[:6])
                       + (" ..." if len(never) > 6 else ""))
    wrong = {n: st["wrong"] for n, st in per_size.items() if st.get("wrong")}
    if wrong:
        reasons.append(f"wrong bytes: {sum(wrong.values())} replies ("
                       + ", ".join(f"{n} x{k}" for n, k in sorted(wrong.items())) + ")")
    pct = {n: timeout_pct(per_size[n]) for n in sizes if per_size.get(n, {}).get("requests")}
    if pct:
        mean = statistics.mean(pct.values())
        over = {n: p for n, p in pct.items() if p > max_pct}
        if over:
            reasons.append(f"timeouts above {max_pct:g} %: "
                           + ", ".join(f"{n} {p:.1f} %" for n, p in sorted(over.items(), key=lambda x: -x[1])[:6]))
        uneven = {n: p for n, p in pct.items() if p > mean + spread}
        if uneven:
            reasons.append(f"timeouts uneven over sizes (mean {mean:.1f} %, more than {spread:g} points above: "
                           + ", ".join(f"{n} {p:.1f} %" for n, p in sorted(uneven.items(), key=lambda x: -x[1])[:6])
                           + ")")
    return not reasons, reasons


# ---- httperf ----------------------------------------------------------------------------------

def _num(text, pattern, cast=float):
    m = re.search(pattern, text, re.M)
    return cast(m.group(1)) if m else None


def parse_httperf(text):
    """httperf's report -> dict. Raises ValueError without a "Total:" line."""
    m = re.search(r"^Total: connections (\d+) requests (\d+) replies (\d+) test-duration ([\d.]+) s", text, re.M)
    if not m:
        raise ValueError("no Total: line in httperf's output")
    out = {"connections": int(m.group(1)), "requests": int(m.group(2)), "replies": int(m.group(3)),
           "test_duration_s": float(m.group(4))}
    out["max_concurrent"] = _num(text, r"<=(\d+) concurrent connections", int)
    m = re.search(r"^Reply time \[ms\]: response ([\d.]+) transfer ([\d.]+)", text, re.M)
    if m:
        out["response_ms"], out["transfer_ms"] = float(m.group(1)), float(m.group(2))
    m = re.search(r"^Net I/O: ([\d.]+) KB/s \(([\d.]+)\*10\^6 bps\)", text, re.M)
    if m:
        out["net_kb_s"], out["mbps"] = float(m.group(1)), float(m.group(2))
    out["reply_rate_avg"] = _num(text, r"^Reply rate \[replies/s\]: min [\d.]+ avg ([\d.]+)")
    out["content_bytes_avg"] = _num(text, r"^Reply size \[B\]: header [\d.]+ content ([\d.]+)")
    m = re.search(r"^Reply status: 1xx=(\d+) 2xx=(\d+) 3xx=(\d+) 4xx=(\d+) 5xx=(\d+)", text, re.M)
    if m:
        out["status"] = dict(zip(("1xx", "2xx", "3xx", "4xx", "5xx"), map(int, m.groups())))
    m = re.search(r"^CPU time \[s\]: user ([\d.]+) system ([\d.]+)", text, re.M)
    if m:
        out["cpu_user_s"], out["cpu_system_s"] = float(m.group(1)), float(m.group(2))
    errors = {}
    for line in re.findall(r"^Errors: (.*)$", text, re.M):
        for k, v in re.findall(r"([a-z-]+) (\d+)", line):
            errors[k] = errors.get(k, 0) + int(v)
    out["errors"] = errors
    m = re.search(r"^Session rate \[sess/s\]: .*\((\d+)/(\d+)\)", text, re.M)
    if m:
        out["sessions_ok"], out["sessions"] = int(m.group(1)), int(m.group(2))
    out["session_lifetime_s"] = _num(text, r"^Session lifetime \[s\]: ([\d.]+)")
    return out


def combine_httperf(parts):
    """One run's figures from its clients' reports."""
    replies = sum(p["replies"] for p in parts)
    errors = {}
    for p in parts:
        for k, v in p["errors"].items():
            errors[k] = errors.get(k, 0) + v
    wsum = (lambda key: sum(p.get(key, 0) * p["replies"] for p in parts) / replies if replies else None)
    status = {}
    for p in parts:
        for k, v in p.get("status", {}).items():
            status[k] = status.get(k, 0) + v
    return {
        "reply_rate": round(sum(p["replies"] / p["test_duration_s"] for p in parts if p["test_duration_s"] > 0), 1),
        "mbps": round(sum(p.get("mbps", 0.0) for p in parts), 1),
        "response_ms_mean": None if wsum("response_ms") is None else round(wsum("response_ms"), 3),
        "transfer_ms_mean": None if wsum("transfer_ms") is None else round(wsum("transfer_ms"), 3),
        "replies": replies, "requests": sum(p["requests"] for p in parts),
        "connections": sum(p["connections"] for p in parts),
        "sessions_ok": sum(p.get("sessions_ok", 0) for p in parts),
        "test_duration_s": [p["test_duration_s"] for p in parts],
        "max_concurrent": [p.get("max_concurrent") for p in parts],
        "client_cpu_s": round(sum(p.get("cpu_user_s", 0) + p.get("cpu_system_s", 0) for p in parts), 2),
        "errors": errors, "status": status,
    }


def clients_for(rate, wanted, session_s):
    """httperf processes for `rate` sessions/s: at least `wanted`, enough that
    each expects at most CONNS_PER_HTTPERF concurrent connections."""
    return max(wanted, math.ceil(rate * session_s / CONNS_PER_HTTPERF))


def make_session_files(tmp, rate, duration, clients, sampler, seed):
    """One session file per client (seeded per rate and client: the same for
    every server). Returns [(path, sessions for that client)], stats."""
    total = max(clients, round(rate * duration))
    out, stats = [], []
    for j in range(clients):
        n = total // clients + (1 if j < total % clients else 0)
        path = os.path.join(tmp, f"sessions-r{rate}-c{j}.txt")
        st = ss.write_sessions(path, min(n, ss.HTTPERF_MAX_SESSIONS), sampler, seed * 1000003 + rate * 101 + j)
        out.append((path, n))
        stats.append(st)
    return out, stats


# ---- source addresses ----------------------------------------------------------------------

def ephemeral_ports():
    """The size of the kernel's ephemeral port range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = map(int, f.read().split())
        return hi - lo + 1
    except (OSError, ValueError):
        return 28232  # Linux's default 32768-60999


def source_plan(files, rate_index, mode, ports):
    """WEFT_SRCADDR per httperf client (None: the default 127.0.0.1) for one
    rate's session files [(path, sessions)]. Every session is one connection
    whose port stays taken for its life and then TIME_WAIT_S, longer than a
    run, so a client needs about as many ports as it has sessions. 'auto'
    gives addresses only when that is more than half the range, 'always'
    always. Client j of rate i gets 127.0.(i+1).(10 + j*k) .. +k-1, k
    addresses each: no two clients and no two rates share a 4-tuple."""
    if mode == "off":
        return [None] * len(files)
    need = max(n for _, n in files)
    if mode == "auto" and need <= ports // 2:
        return [None] * len(files)
    k = max(1, math.ceil(need / (ports // 2)))
    if 10 + len(files) * k > 255 or rate_index + 1 > 255:
        raise ValueError(f"{len(files)} clients x {k} source addresses do not fit in 127.0.{rate_index + 1}.10-254")
    out = []
    for j in range(len(files)):
        first = 10 + j * k
        a = f"127.0.{rate_index + 1}.{first}"
        out.append(a if k == 1 else f"{a}-127.0.{rate_index + 1}.{first + k - 1}")
    return out


def find_srcaddr(build):
    """weft-srcaddr.so in the build tree, None when not built."""
    path = os.path.abspath(os.path.join(build, "bench", "weft-srcaddr.so"))
    return path if os.path.exists(path) else None


def httperf_cmd(cpu, port, n, path, rate):
    return ["taskset", "-c", str(cpu), "httperf", "--hog", "--server", "127.0.0.1", "--port", str(port),
            f"--wsesslog={n},0,{path}", f"--rate={rate:g}", f"--timeout={TIMEOUT_S:g}"]


def run_httperf(port, files, rate, duration, cpu, tmp, sources=None, preload=None):
    """Run one httperf per session file concurrently (client j from source
    address sources[j] through the preload `preload` when given); SIGINT those
    still running at duration + DRAIN_S, kill what is left after GRACE_S.
    Returns ([parsed report per client], [raw text], [problems], [commands])."""
    procs, cmds, outs = [], [], []
    per = rate / len(files)
    sources = sources or [None] * len(files)
    for j, (path, n) in enumerate(files):
        cmd = httperf_cmd(cpu, port, n, path, per)
        if sources[j] and preload:  # as a prefix, so that the recorded command reproduces the run
            cmd = ["env", f"WEFT_SRCADDR={sources[j]}", f"LD_PRELOAD={preload}"] + cmd
        out = open(os.path.join(tmp, f"httperf-{j}.out"), "w+")
        procs.append(CHILDREN.popen(cmd, stdout=out, stderr=subprocess.STDOUT))
        cmds.append(cmd)
        outs.append(out)
    t0 = time.monotonic()
    stop_at, kill_at = t0 + duration + DRAIN_S, t0 + duration + DRAIN_S + GRACE_S
    interrupted = False
    while any(p.poll() is None for p in procs) and time.monotonic() < kill_at:
        if not interrupted and time.monotonic() >= stop_at:
            interrupted = True
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)
        time.sleep(0.05)
    problems, parts, texts, killed, unparsed = [], [], [], [], []
    for j, (p, out) in enumerate(zip(procs, outs)):
        if p.poll() is None:
            p.kill()
            p.wait()
            killed.append(j)
        out.seek(0)
        text = out.read()
        out.close()
        texts.append(text)
        try:
            parts.append(parse_httperf(text))
        except ValueError as e:
            lines = [ln for ln in text.strip().splitlines() if "FD_SETSIZE" not in ln]
            unparsed.append(f"{j} (exit {p.returncode}: {e}; {' | '.join(lines[-2:]) or 'no output'})")
    if killed:
        problems.append(f"{len(killed)} of {len(procs)} httperf processes had not printed their report "
                        f"{GRACE_S:g} s after SIGINT ({kill_at - t0:.0f} s in all): killed (the client CPU is "
                        "overloaded at this rate)")
    if unparsed:
        problems.append(f"no report from httperf " + (", ".join(unparsed) if len(unparsed) <= 2 else
                                                     f"{len(unparsed)} processes, e.g. {unparsed[0]}"))
    return parts, texts, problems, cmds


# ---- the server's own figures ------------------------------------------------------------

def proc_counters(pids):
    """CPU seconds (user, system), context switches (all threads) and VmRSS (kB), summed over pids."""
    tick = os.sysconf("SC_CLK_TCK")
    c = {"user_s": 0.0, "system_s": 0.0, "ctx_voluntary": 0, "ctx_involuntary": 0, "rss_kb": 0}
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            c["user_s"] += int(fields[11]) / tick
            c["system_s"] += int(fields[12]) / tick
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        c["rss_kb"] += int(line.split()[1])
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            c["ctx_voluntary"] += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches:"):
                            c["ctx_involuntary"] += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return c


class RssWatch:
    """The largest summed VmRSS of the server's processes, sampled every 0.5 s."""

    def __init__(self, server):
        self.server, self.max_kb, self.halt = server, 0, threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.halt.is_set():
            self.max_kb = max(self.max_kb, proc_counters(self.server.pids())["rss_kb"])
            self.halt.wait(0.5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.halt.set()
        self.thread.join()


def weft_stats(port):
    """A weft server's /.weft/stats as a dict, None when it has none."""
    try:
        status, body, _ = http_get(port, ".weft/stats", 5.0)
        return json.loads(body) if status == 200 else None
    except (OSError, ValueError):
        return None


def stats_delta(before, after):
    """after - before for every number (nested), the rest as in after."""
    if isinstance(after, dict):
        return {k: stats_delta((before or {}).get(k) if isinstance(before, dict) else None, v)
                for k, v in after.items()}
    if isinstance(after, (int, float)) and not isinstance(after, bool) and isinstance(before, (int, float)):
        return round(after - before, 3)
    return after


# ---- wrk over the access model ---------------------------------------------------------------

def write_wrk_script(path, paths):
    """A wrk Lua script cycling through `paths`."""
    with open(path, "w") as f:
        f.write("-- written by bench/web/web_bench.py: paths drawn from the file set's access model\n")
        f.write("local paths = {\n")
        for p in paths:
            f.write(f'  "/{p}",\n')
        f.write("}\nlocal i = 0\n")
        f.write("request = function()\n  i = i % #paths + 1\n  return wrk.format(\"GET\", paths[i])\nend\n")


# ---- one server: warm-up, the sweep, wrk ----------------------------------------------------

def base_record(spec, kind):
    return {"type": kind, "server": spec["name"], "kind": spec["kind"], "config": spec.get("args", []),
            "env": spec.get("env") or {}, "rate": None, "reply_rate": None, "mbps": None, "response_ms_mean": None,
            "response_ms_p99": None, "verified": False, "reasons": []}


def measure_rate(server, spec, rate, ctx, plan):
    """One (server, rate): httperf clients, the sampler, the server's counters. Returns a record."""
    rec = base_record(spec, "httperf")
    rec.update(rate=rate, duration_s=ctx.duration, clients=len(plan["files"]),
               sessions=sum(n for _, n in plan["files"]), source_addrs=plan["sources"])
    pids = server.pids()
    weft0 = weft_stats(server.port) if spec["kind"] in STATS_KINDS else None
    c0, t0 = proc_counters(pids), time.monotonic()
    sampler = Sampler(server.port, ctx.dirs, ctx.seed, ctx.sample_rate)
    with RssWatch(server) as rss:
        sampler.start()
        parts, texts, problems, cmds = run_httperf(server.port, plan["files"], rate, ctx.duration, ctx.cpu_client,
                                                   ctx.tmp, plan["sources"], ctx.srcaddr)
        wall = time.monotonic() - t0
        c1 = proc_counters(pids)
        sampler.stop(time.monotonic() + TIMEOUT_S + 5)
    weft1 = weft_stats(server.port) if spec["kind"] in STATS_KINDS else None
    ctx.commands.setdefault(f"httperf rate {rate}", " ".join(shlex.quote(x) for x in cmds[0]))
    ctx.httperf_log.append((f"{spec['name']} rate {rate}", texts))
    samp = sampler.summary()
    rec["sampler"] = samp
    rec["response_ms_p99"], rec["response_ms_p50"] = samp["p99_ms"], samp["p50_ms"]
    if parts:
        rec.update(combine_httperf(parts))
    cpu_wall = max(wall, 1e-9)
    rec["server_cpu"] = {"user_s": round(c1["user_s"] - c0["user_s"], 2),
                         "system_s": round(c1["system_s"] - c0["system_s"], 2),
                         "user_pct": round(100 * (c1["user_s"] - c0["user_s"]) / cpu_wall, 1),
                         "system_pct": round(100 * (c1["system_s"] - c0["system_s"]) / cpu_wall, 1),
                         "wall_s": round(wall, 2)}
    rec["ctx_switches"] = {"voluntary": c1["ctx_voluntary"] - c0["ctx_voluntary"],
                           "involuntary": c1["ctx_involuntary"] - c0["ctx_involuntary"]}
    rec["rss_kb_max"] = max(rss.max_kb, c1["rss_kb"])
    rec["weft_stats"] = stats_delta(weft0, weft1) if weft0 and weft1 else None
    ok, reasons = verify_run(samp["per_size"])
    reasons = reasons + problems
    if not server.alive():
        reasons.append(f"the server died during the run (status {server.proc.returncode}): {server.output()}")
    if not parts:
        reasons.append("no httperf report")
    rec["verified"], rec["reasons"] = not reasons, reasons
    return rec


def wrk_record(server, spec, ctx):
    """The closed-loop peak: wrk ctx.wrk_repeat times, the median run by req/s
    (every run's req/s in reply_rate_runs)."""
    rec = base_record(spec, "wrk")
    rec["connections"] = ctx.wrk_connections
    results = []
    pids = server.pids()
    c0, t0 = proc_counters(pids), time.monotonic()
    for _ in range(ctx.wrk_repeat):
        try:
            res, cmd = kb.run_wrk(f"http://127.0.0.1:{server.port}/", ctx.wrk_connections, ctx.wrk_duration,
                                  ctx.cpu_client, extra=["--timeout", f"{TIMEOUT_S:g}s", "-s", ctx.wrk_script],
                                  popen=CHILDREN.popen)
        except RuntimeError as e:
            rec["reasons"] = [str(e)]
            return rec
        results.append(res)
    wall, c1 = time.monotonic() - t0, proc_counters(pids)
    cpu_s = c1["user_s"] - c0["user_s"] + c1["system_s"] - c0["system_s"]
    served = sum(r.get("requests") or 0 for r in results)
    # The server's CPU over all the runs: under 100 % the client (one wrk
    # thread) was the limit; CPU per request compares servers whatever it was.
    rec["server_cpu_pct"] = round(100 * cpu_s / max(wall, 1e-9), 1)
    rec["server_cpu_us_per_req"] = round(1e6 * cpu_s / served, 2) if served else None
    results.sort(key=lambda r: r["req_s"])
    res = results[len(results) // 2]
    rec["reply_rate_runs"] = [r["req_s"] for r in results]
    ctx.commands.setdefault("wrk", " ".join(shlex.quote(x) for x in cmd))
    pct = res["percentiles_ms"]
    rec.update(reply_rate=res["req_s"], mbps=round(res.get("transfer_bytes_s", 0) * 8 / 1e6, 1),
               response_ms_mean=res.get("mean_ms"), response_ms_p50=pct.get("50"), response_ms_p99=pct.get("99"),
               socket_errors=res["socket_errors"], non_2xx=res["non_2xx"], requests=res.get("requests"))
    rec["reasons"] = [p for r in results for p in kb.run_problems(r)]
    if not server.alive():
        rec["reasons"].append(f"the server died during the run: {server.output()}")
    rec["verified"] = not rec["reasons"]
    ctx.httperf_log.append((f"{spec['name']} wrk", [res["wrk_output"]]))
    return rec


def progress(rec, t_start):
    if rec["type"] == "httperf":
        errs = sum(v for k, v in rec.get("errors", {}).items() if k != "total")
        line = (f"{rec['server']} rate {rec['rate']}/s: {rec['reply_rate'] or 0:,.0f} replies/s, "
                f"{rec['mbps'] or 0:,.1f} Mbit/s, mean {fmt(rec['response_ms_mean'])} ms, "
                f"p99 {fmt(rec['response_ms_p99'])} ms, httperf errors {errs}, "
                f"server CPU {rec['server_cpu']['user_pct'] + rec['server_cpu']['system_pct']:.0f} %")
    elif rec["type"] == "wrk":
        line = (f"{rec['server']} wrk c={rec.get('connections')}: {rec['reply_rate'] or 0:,.0f} req/s, "
                f"p99 {fmt(rec['response_ms_p99'])} ms, server CPU {fmt(rec.get('server_cpu_pct'))} %, "
                f"{fmt(rec.get('server_cpu_us_per_req'))} µs/req")
    else:
        line = f"{rec['server']}: did not start"
    status = "ok" if rec["verified"] else "FAILED: " + "; ".join(rec["reasons"])
    log(f"web_bench: [{time.monotonic() - t_start:.0f} s] {line} -- {status}")


def run_server(spec, ctx, t_start):
    """Every run of one server. Returns its records."""
    cmd_fn = server_command(spec, ctx.tools, ctx.bins, ctx.cpu_server, ctx.root)
    probe = fs.rel_path(0, 0, 0)
    try:
        server = start_server(spec["name"], cmd_fn, probe)
    except kb.ServerError as e:
        rec = base_record(spec, "start")
        rec["reasons"] = [f"did not start: {e}"]
        progress(rec, t_start)
        return [rec]
    ctx.commands[spec["name"]] = " ".join(shlex.quote(x) for x in server.cmd)
    records = []
    try:
        problem, n, secs = warm_up(server.port, ctx.dirs, ctx.seed)
        if problem:
            rec = base_record(spec, "start")
            rec["reasons"] = [f"warm-up: {problem}"]
            progress(rec, t_start)
            return [rec]
        log(f"web_bench: {spec['name']} on port {server.port}: warmed up, {n} files checked ({secs:.1f} s)")
        for rate in ctx.rates:
            rec = measure_rate(server, spec, rate, ctx, ctx.plans[rate])
            records.append(rec)
            progress(rec, t_start)
            if not server.alive():
                break
        if server.alive():
            rec = wrk_record(server, spec, ctx)
            records.append(rec)
            progress(rec, t_start)
    finally:
        problem = stop_server(server)
        if problem:
            log(f"web_bench: {spec['name']}: {problem}")
            for r in records:
                r.setdefault("server_problems", []).append(problem)
    return records


# ---- the report -----------------------------------------------------------------------------

def fmt(x, digits=None):
    if x is None:
        return "—"
    if digits is not None:
        return f"{x:,.{digits}f}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}" if abs(x) >= 10 else f"{x:,.2f}"


def best_verified(runs, server):
    ok = [r for r in runs if r["server"] == server and r["type"] == "httperf" and r["verified"]]
    return max(ok, key=lambda r: r["rate"]) if ok else None


# Reply rates of two servers offered the same sessions differ by a few
# tenths of a percent from run to run: a ratio within this of 1.0 is equal.
GOAL_NOISE = 0.01


def goal_rows(runs):
    """Issue 7's goal, per load: the best verified weft-knot against the best
    verified µserver/WatPipe and against nginx, by reply rate. Rows of
    (load, best knot (name, rate), best event/pipeline, nginx, ratio vs
    event/pipeline, ratio vs nginx); ratios None when a side is missing."""
    def best(pred, rate, kind):
        ok = [r for r in runs if r["type"] == kind and r["verified"] and pred(r) and r.get("reply_rate")
              and (kind == "wrk" or r["rate"] == rate)]
        return max(((r["server"], r["reply_rate"]) for r in ok), key=lambda x: x[1], default=None)

    rows = []
    loads = sorted({r["rate"] for r in runs if r["type"] == "httperf"}) + ["wrk peak"]
    for load in loads:
        kind = "wrk" if load == "wrk peak" else "httperf"
        k = best(lambda r: r.get("kind") == "knot", load, kind)
        e = best(lambda r: r.get("kind") in ("userver", "watpipe"), load, kind)
        n = best(lambda r: r.get("kind") == "nginx", load, kind)
        if not (k or e or n):
            continue
        rows.append((load, k, e, n, k[1] / e[1] if k and e else None, k[1] / n[1] if k and n else None))
    return rows


def goal_section(runs):
    rows = goal_rows(runs)
    if not rows:
        return []
    md = ["## The architectures (issue 7's goal: the best weft-knot >= 1.0x the best µserver/WatPipe and nginx)",
          "", "| Load | best weft-knot | best µserver/WatPipe | nginx | knot / event-pipeline | knot / nginx |",
          "|---|---|---|---|---:|---:|"]

    def cell(x):
        return f"{x[0]} {fmt(x[1], 0)}" if x else "—"

    for load, k, e, n, re_, rn in rows:
        label = f"{load} sessions/s" if load != "wrk peak" else load
        md.append(f"| {label} | {cell(k)} | {cell(e)} | {cell(n)} | "
                  f"{f'{re_:.3f}x' if re_ is not None else '—'} | {f'{rn:.3f}x' if rn is not None else '—'} |")
    short = [f"{r[0]}: {r[4]:.3f}x" for r in rows if r[4] is not None and r[4] < 1.0 - GOAL_NOISE]
    short += [f"{r[0]} vs nginx: {r[5]:.3f}x" for r in rows if r[5] is not None and r[5] < 1.0 - GOAL_NOISE]
    even = [str(r[0]) for r in rows if any(x is not None and 1.0 - GOAL_NOISE <= x < 1.0 for x in r[4:])]
    md.append("")
    if even:
        md.append(f"Within {GOAL_NOISE:.0%} of 1.0 at {', '.join(even)}: below a server's capacity its reply rate "
                  "is the offered load, so such differences are the run's noise, counted as equal.")
    md += ["Short of the goal at: " + "; ".join(short) + "." if short else
           "The best weft-knot is at or above the others at every load shown (within the noise above).", ""]
    return md


def render(runs, run_info):
    """The Markdown report from web.json's runs and web.run.json's info."""
    s = run_info.get("settings", {})
    m = run_info.get("machine", {})
    servers = list(dict.fromkeys([r["server"] for r in runs]))
    md = ["# Web-server architectures on the study's workload (httperf session logs)", ""]
    md += [f"- Machine: {m.get('line', '?')}; nginx: {m.get('nginx', '?')}; httperf: {m.get('httperf', '?')}; "
           f"wrk: {m.get('wrk', '?')}.",
           f"- File set: {s.get('fileset', '?')}: {s.get('dirs', '?')} directories, {s.get('files', '?')} files, "
           f"{(s.get('fileset_bytes') or 0) / 2**20:,.1f} MiB, seed {s.get('seed', '?')}.",
           f"- Servers pinned to CPU {s.get('cpu_server', '?')}, httperf/wrk/sampler to CPU {s.get('cpu_client', '?')}. "
           f"Rates (new sessions/s): {', '.join(map(str, s.get('rates', [])))}; {s.get('duration_s', '?')} s of "
           f"arrivals each (+{s.get('drain_s', DRAIN_S):g} s drain), client timeout {TIMEOUT_S:g} s; sampler "
           f"{s.get('sample_rate', '?')} req/s over all 36 sizes.",
           "- Verification (study §3.4, from the sampler): every size served, no wrong bytes, no size's timeout "
           f"share above {MAX_TIMEOUT_PCT:g} % nor more than {SPREAD_PCT:g} points above the mean.", ""]

    md += ["## Table 1: each server at its highest verified rate", ""]
    cols = [("Config", lambda r: ("`" + " ".join(r["config"]) + "`" if r["config"] else
                                  "(generated httpd.conf)" if r.get("kind") in APACHE_KINDS else "(generated nginx.conf)")
             + "".join(f" `{k}={v}`" if v is not None else f" `-u {k}`" for k, v in (r.get("env") or {}).items())),
            ("Rate (sessions/s)", lambda r: fmt(r["rate"], 0)),
            ("Reply rate (replies/s)", lambda r: fmt(r["reply_rate"], 0)),
            ("Throughput (Mbit/s)", lambda r: fmt(r["mbps"], 1)),
            ("Mean response (ms)", lambda r: fmt(r["response_ms_mean"])),
            ("p99 response (ms, sampler)", lambda r: fmt(r["response_ms_p99"])),
            ("CPU user %", lambda r: fmt(r["server_cpu"]["user_pct"], 1)),
            ("CPU system %", lambda r: fmt(r["server_cpu"]["system_pct"], 1)),
            ("ctx-sw/s voluntary (kernel)", lambda r: fmt(r["ctx_switches"]["voluntary"] / r["server_cpu"]["wall_s"], 0)),
            ("ctx-sw/s involuntary (kernel)",
             lambda r: fmt(r["ctx_switches"]["involuntary"] / r["server_cpu"]["wall_s"], 0)),
            ("ctx-sw/s (user, weft)", lambda r: fmt(((r.get("weft_stats") or {}).get("runtime") or {}).get("switches")
                                                    / r["server_cpu"]["wall_s"], 0)
             if ((r.get("weft_stats") or {}).get("runtime") or {}).get("switches") is not None else "—"),
            ("RSS max (MiB)", lambda r: fmt(r["rss_kb_max"] / 1024, 1))]
    best = {sv: best_verified(runs, sv) for sv in servers}
    shown = [sv for sv in servers if best[sv]]
    if shown:
        md.append("| | " + " | ".join(shown) + " |")
        md.append("|---|" + "---:|" * len(shown))
        for name, f in cols:
            md.append(f"| {name} | " + " | ".join(f(best[sv]) for sv in shown) + " |")
    else:
        md.append("No server passed verification at any rate.")
    missing = [sv for sv in servers if not best[sv]]
    if missing:
        md += ["", "No verified rate: " + ", ".join(missing) + "."]
    md.append("")

    md += goal_section(runs)

    md += ["## Every run (Figs. 7 and 8 plot the verified ones)", "",
           "| Server | Rate | Reply rate | Mbit/s | Mean ms | p99 ms | httperf errors | Server CPU % | Verified |",
           "|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for r in runs:
        if r["type"] != "httperf":
            continue
        errs = ", ".join(f"{k} {v:,}" for k, v in sorted(r.get("errors", {}).items()) if v and k != "total") or "0"
        cpu = r.get("server_cpu") or {}
        md.append(f"| {r['server']} | {r['rate']} | {fmt(r['reply_rate'], 0)} | {fmt(r['mbps'], 1)} | "
                  f"{fmt(r['response_ms_mean'])} | {fmt(r['response_ms_p99'])} | {errs} | "
                  f"{fmt((cpu.get('user_pct') or 0) + (cpu.get('system_pct') or 0), 0)} | "
                  f"{'yes' if r['verified'] else 'NO'} |")
    md.append("")

    wrk = [r for r in runs if r["type"] == "wrk"]
    if wrk:
        md += [f"## Peak (closed loop: wrk -t1, {wrk[0].get('connections', '?')} connections, access-model paths)", "",
               "| Server | req/s | Mbit/s | mean ms | p50 ms | p99 ms | errors | server CPU % | CPU µs/req |",
               "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
        for r in wrk:
            errs = ", ".join(f"{k} {v:,}" for k, v in (r.get("socket_errors") or {}).items() if v)
            if r.get("non_2xx"):
                errs = (errs + ", " if errs else "") + f"non-2xx {r['non_2xx']:,}"
            runs_ = r.get("reply_rate_runs") or []
            spread = f" ({', '.join(fmt(x, 0) for x in runs_)})" if len(runs_) > 1 else ""
            md.append(f"| {r['server']} | {fmt(r['reply_rate'], 0)}{spread} | {fmt(r['mbps'], 1)} | "
                      f"{fmt(r['response_ms_mean'])} | {fmt(r.get('response_ms_p50'))} | {fmt(r['response_ms_p99'])} | "
                      f"{errs or ('none' if r['verified'] else '; '.join(r['reasons']))} | "
                      f"{fmt(r.get('server_cpu_pct'))} | {fmt(r.get('server_cpu_us_per_req'))} |")
        if any(len(r.get("reply_rate_runs") or []) > 1 for r in wrk):
            md += ["", "req/s is the median of the runs in parentheses (--wrk-repeat)."]
        if any(r.get("server_cpu_pct") is not None for r in wrk):
            md += ["", "server CPU: over all the wrk runs (below 100 %: one wrk thread, not the server, was the "
                   "limit); CPU µs/req: the server's CPU time per request served."]
        md.append("")

    smp = run_info.get("smp_web")
    if smp:
        import smp as smp_bench  # here, not at the top: smp.py imports this module
        md += ["## Two cores (issue 15: bench/web/smp.py, `make bench-smp-web`)", "",
               f"Not measured by this run: the ratios of {SMP_JSON} in this directory ({smp.get('generated', '?')}, "
               f"git {smp.get('git_head', '?')}): weft-knot with 1 and 2 vprocs against nginx with 1 and 2 workers, "
               "the server and wrk sharing both CPUs (\"split\": the server on one CPU, wrk on the other); req/s "
               "and requests per server CPU second. smp_web.md has every point and how wrk's CPU is accounted for.",
               ""] + smp_bench.ratio_table(smp) + [""]

    for png, title in ((run_info.get("plots") or {}).items()):
        md.append(f"![{title}]({png})")
    if run_info.get("plots"):
        md.append("")
    elif run_info.get("plot_note"):
        md += [run_info["plot_note"], ""]

    failed = [r for r in runs if not r["verified"]]
    md += ["## Failed runs and notes", ""]
    for r in failed:
        what = f"rate {r['rate']}" if r["type"] == "httperf" else r["type"]
        md.append(f"- FAILED {r['server']} {what}: " + "; ".join(r["reasons"]))
    for n in run_info.get("notes", []):
        md.append(f"- {n}")
    if not failed and not run_info.get("notes"):
        md.append("None.")
    md.append("")
    return "\n".join(md)


SMP_JSON = "smp_web.json"


def smp_summary(out_dir):
    """What the report shows of bench/web/smp.py's last run in out_dir
    ({"generated", "git_head", "ratios"}); None when there is none."""
    try:
        with open(os.path.join(out_dir, SMP_JSON)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("benchmark") != "web.smp" or not isinstance(data.get("ratios"), list):
        return None
    return {"generated": data.get("generated"), "git_head": (data.get("machine") or {}).get("git_head"),
            "ratios": data["ratios"]}


def plot(runs, out_dir):
    """Figs. 7 and 8 as PNGs: {file: title}, or ({}, why not)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}, f"(matplotlib is not importable by {sys.executable}: no plots)"
    ok = [r for r in runs if r["type"] == "httperf" and r["verified"]]
    servers = list(dict.fromkeys(r["server"] for r in ok))
    out = {}
    for fname, key, ylabel, title in (
            ("web_throughput.png", "mbps", "throughput (Mbit/s)", "Fig. 7: throughput"),
            ("web_response.png", "response_ms_mean", "mean response time (ms)", "Fig. 8: response time")):
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for sv in servers:
            pts = sorted((r["rate"], r[key]) for r in ok if r["server"] == sv and r[key] is not None)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=sv)
        ax.set_xlabel("new sessions per second")
        ax.set_ylabel(ylabel)
        ax.set_title(title + " (verified runs)")
        ax.grid(alpha=0.3)
        if servers:
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname), dpi=110)
        plt.close(fig)
        out[fname] = title
    return out, None


# ---- the smoke check ---------------------------------------------------------------------------

def check_outputs(out_dir, servers, rates):
    """Problems with the files written ([] when well formed)."""
    bad = []
    try:
        with open(os.path.join(out_dir, "web.json")) as f:
            runs = json.load(f)
        with open(os.path.join(out_dir, "web.run.json")) as f:
            info = json.load(f)
    except (OSError, ValueError) as e:
        return [f"cannot read the outputs: {e}"]
    if not isinstance(runs, list):
        return ["web.json is not a list"]
    need = ("server", "config", "rate", "reply_rate", "mbps", "response_ms_mean", "response_ms_p99", "verified")
    for r in runs:
        miss = [k for k in need if k not in r]
        if miss:
            bad.append(f"run {r.get('server')} {r.get('rate')}: no {', '.join(miss)}")
        if not r.get("verified"):
            bad.append(f"run {r.get('server')} {r.get('type')} {r.get('rate')}: not verified: {r.get('reasons')}")
        elif not (isinstance(r.get("reply_rate"), (int, float)) and r["reply_rate"] > 0):
            bad.append(f"run {r.get('server')} {r.get('rate')}: no replies")
        if r.get("type") == "httperf":
            per = (r.get("sampler") or {}).get("per_size", {})
            if len(per) != 36:
                bad.append(f"run {r.get('server')} {r.get('rate')}: sampler has {len(per)} sizes, not 36")
    got = {(r.get("server"), r.get("rate")) for r in runs if r.get("type") == "httperf"}
    for sv in servers:
        for rate in rates:
            if (sv, rate) not in got:
                bad.append(f"no httperf run for {sv} at {rate}")
        if not any(r.get("server") == sv and r.get("type") == "wrk" for r in runs):
            bad.append(f"no wrk run for {sv}")
    for k in ("machine", "settings", "commands", "notes"):
        if k not in info:
            bad.append(f"web.run.json has no {k}")
    md = os.path.join(out_dir, "web.md")
    if not os.path.exists(md) or "Table 1" not in open(md).read():
        bad.append("web.md missing or without its table")
    return bad


# ---- main ------------------------------------------------------------------------------------

HELP_EPILOG = """\
How `make run` calls it:
  python3 bench/web/web_bench.py --build build --out-dir results [--quick]
Environment overrides, read when the matching flag is absent:
  SERVERS   e.g. knot-nb,nginx         (--servers)
  RATES     e.g. 100,400               (--rates, new sessions per second)
  DURATION  seconds of arrivals per rate (--duration)
  WRK_REPEAT wrk runs per server (--wrk-repeat)
  FILESET   the file set's directory     (--fileset)
  SIZE_MB   its size in MiB              (--size-mb)
Full run: the 11 default servers of servers.json (entries marked "default":
false run only when named) x 3 rates x (10 s + drain) + 3 wrk runs of 4 s
(the median counts), about 11 minutes; --quick: 5 servers (knot-nb,
knot-b, userver-symped, watpipe, nginx) x 2 rates of 8 s + 3 wrk runs of 2 s,
about 3 minutes; --smoke about 30 s. The planned time is printed at the start.
Exit status: 0 when every run passed verification, 1 otherwise (or a tool
missing: install the Debian packages httperf, wrk, nginx-light), 77 for
--smoke when a tool is missing, 130 when interrupted."""


def int_list(text):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated integers wanted: {text}")
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"positive integers wanted: {text}")
    return v


def write_reports(paths, info, httperf_log, md):
    """Write paths["run.json"] (info), paths["httperf.log"] (every httperf
    client's output, by label) and paths["md"] (the report, also printed)."""
    with open(paths["run.json"], "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    with open(paths["httperf.log"], "w") as f:
        for label, texts in httperf_log:
            for j, t in enumerate(texts):
                f.write(f"==== {label} client {j}\n{t.rstrip()}\n\n")
    with open(paths["md"], "w") as f:
        f.write(md)
    print(md)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Compares web-server architectures (weft-knot's modes, nginx) on the EuroSys'07 study's "
                    "workload: SPECweb99-like files, httperf session logs at a sweep of rates, the study's "
                    "verification, a Table-1-like report and Figs. 7-8. See the module docstring for the method.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=HELP_EPILOG)
    ap.add_argument("--build", default="build", help="the CMake build directory (default build)")
    ap.add_argument("--knot-bin", help="weft-knot (default BUILD/servers/knot/weft-knot)")
    ap.add_argument("--out-dir", help="where web.json, web.run.json, web.md go (default results; --smoke: "
                    "BUILD/bench-web/web-smoke)")
    ap.add_argument("--servers-file", default=SERVERS_JSON, help="the server list (default bench/web/servers.json)")
    ap.add_argument("--servers", help="comma-separated names from the server list (default every entry not "
                    "marked \"default\": false; --quick 5 of them; env SERVERS)")
    ap.add_argument("--rates", type=int_list, help="new sessions per second, comma-separated (default "
                    "100,400,800; --quick 100,400; env RATES)")
    ap.add_argument("--duration", type=int, help="seconds of session arrivals per rate (default 10; --quick 8; "
                    "env DURATION)")
    ap.add_argument("--clients", type=int, default=2, help="httperf processes at least (default 2; more when a "
                    f"rate needs over {CONNS_PER_HTTPERF} connections per process)")
    ap.add_argument("--source-addrs", choices=SRCADDR_MODES, help="127.0.x.y source addresses for httperf "
                    "(through BUILD/bench/weft-srcaddr.so): auto when a client's sessions would take over half the "
                    "ephemeral ports of one address (default), always, or off (env SOURCE_ADDRS; --smoke: always)")
    ap.add_argument("--sample-rate", type=float, help="sampler requests per second (default 36: every size once a "
                    "second)")
    ap.add_argument("--wrk-connections", type=int, default=100, help="wrk's connections (default 100)")
    ap.add_argument("--wrk-repeat", type=int, help="wrk runs per server, the median reported (default 3; "
                    "--smoke 1; env WRK_REPEAT)")
    ap.add_argument("--wrk-duration", type=int, help="seconds of each wrk run (default 4; --quick 2)")
    ap.add_argument("--fileset", help="the file set's directory (default $FILESET, else var/fileset; --smoke: "
                    "BUILD/bench-web/smoke-fileset)")
    ap.add_argument("--size-mb", type=float, help="file set size in MiB (default 64; env SIZE_MB; --smoke: one "
                    "directory)")
    ap.add_argument("--cpu-server", type=int, default=1, help="CPU for the servers (default 1)")
    ap.add_argument("--cpu-client", type=int, default=0, help="CPU for httperf, wrk and this script (default 0)")
    ap.add_argument("--quick", action="store_true", help="5 servers, 2 rates of 8 s, 3 x 2 s of wrk (about 3 minutes)")
    ap.add_argument("--smoke", action="store_true", help="a ~30 s end-to-end check: 1-directory file set, "
                    "knot-nb and nginx, one low rate, 3 s; checks the outputs; exit 77 if a tool is missing")
    args = ap.parse_args(argv)
    env = os.environ
    preset = PRESETS["smoke" if args.smoke else "quick" if args.quick else "full"]
    if args.servers is None:
        args.servers = preset["servers"] if args.smoke else env.get("SERVERS") or preset["servers"]
    args.servers = [x.strip() for x in args.servers.split(",") if x.strip()] if args.servers else None
    if args.rates is None:
        args.rates = int_list(env["RATES"]) if env.get("RATES") and not args.smoke else preset["rates"]
    if args.duration is None:
        args.duration = int(env["DURATION"]) if env.get("DURATION") and not args.smoke else preset["duration"]
    if args.source_addrs is None:
        args.source_addrs = "always" if args.smoke else env.get("SOURCE_ADDRS") or "auto"
        if args.source_addrs not in SRCADDR_MODES:
            ap.error(f"SOURCE_ADDRS={args.source_addrs}: not one of {', '.join(SRCADDR_MODES)}")
    args.wrk_duration = args.wrk_duration or preset["wrk_duration"]
    if args.wrk_repeat is None:
        args.wrk_repeat = (int(env["WRK_REPEAT"]) if env.get("WRK_REPEAT", "").isdigit() and not args.smoke
                           else preset["wrk_repeat"])
    args.sample_rate = args.sample_rate or preset["sample_rate"]
    if args.smoke:
        args.wrk_connections = 10
        args.fileset = args.fileset or os.path.join(args.build, "bench-web", "smoke-fileset")
        args.size_mb = args.size_mb or 1.0
        args.out_dir = args.out_dir or os.path.join(args.build, "bench-web", "web-smoke")
    args.fileset = os.path.abspath(args.fileset or fs.default_root())
    if args.size_mb is None:
        args.size_mb = float(env["SIZE_MB"]) if env.get("SIZE_MB") else float(fs.DEFAULT_SIZE_MB)
    args.out_dir = args.out_dir or "results"
    if args.duration < 1 or args.clients < 1 or args.wrk_duration < 1 or args.wrk_repeat < 1 or args.sample_rate <= 0:
        ap.error("--duration, --clients, --wrk-duration, --wrk-repeat and --sample-rate must be positive")
    return args


class Context:
    """What every run needs (settings, tools, CPUs, the file set, the session files)."""


def planned_seconds(n_servers, rates, duration, wrk_duration):
    per_server = 3 + sum(duration + DRAIN_S + 2.5 for _ in rates) + wrk_duration + 2
    return n_servers * per_server


def saturation_notes(runs):
    """Say when no httperf run got near the server's CPU: then httperf (one CPU)
    limited the load, not the server, and the wrk peak is the capacity."""
    notes = []
    for sv in dict.fromkeys(r["server"] for r in runs):
        cpus = [r["server_cpu"]["user_pct"] + r["server_cpu"]["system_pct"] for r in runs
                if r["server"] == sv and r["type"] == "httperf" and r.get("server_cpu")]
        if cpus and max(cpus) < 80:
            notes.append(f"{sv} used at most {max(cpus):.0f} % of its CPU under httperf: the offered load did not "
                         "saturate it (the sweep stays below its capacity; see the wrk peak)")
    return notes


def machine_info(tools, knot):
    facts = kb.machine_facts(tools, knot)
    facts["httperf"] = httperf_version()
    return facts


def httperf_version():
    try:
        p = subprocess.run(["httperf", "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    m = [w for w in p.stdout.split() if w.startswith("httperf-")]
    return m[0].rstrip(":") if m else "?"


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    try:
        specs = load_servers(args.servers_file, args.servers)
    except (OSError, ValueError) as e:
        log(f"web_bench: {e}")
        return 1
    need_nginx = any(s["kind"] == "nginx" for s in specs)
    tools, missing = kb.find_tools(need_nginx)
    if not shutil.which("httperf"):
        missing.append("httperf")
    else:
        tools["httperf"] = shutil.which("httperf")
    if any(s["kind"] in APACHE_KINDS for s in specs):
        apache = shutil.which("apache2") or "/usr/sbin/apache2"
        if os.access(apache, os.X_OK):
            tools["apache2"] = apache
        else:
            missing.append("apache2")
    if missing:
        log(f"web_bench: {', '.join(missing)} not found: install the Debian package(s) "
            + " ".join(PACKAGES[m] for m in missing) + " (apt-get install httperf wrk nginx-light)")
        return SKIP if args.smoke else 1
    bins = weft_bins(args.build, args.knot_bin)
    for kind in sorted({s["kind"] for s in specs} - {"nginx", "apache"}):
        if kind == "apache-weft":
            needs = ["weft-run"]
        elif kind in UNDER_WEFT_RUN:
            needs = ["weft-run", UNDER_WEFT_RUN[kind]]
        else:
            needs = [kind]
        for path in (bins[k] for k in needs):
            if not os.access(path, os.X_OK):
                log(f"web_bench: {path} not found: build first (cmake --build {args.build})")
                return 1
    try:
        return run(args, specs, tools, bins)
    except KeyboardInterrupt:
        log("web_bench: interrupted: stopping every process started")
        return 130
    finally:
        CHILDREN.end_all()


def run(args, specs, tools, bins):
    t_start = time.monotonic()
    nofile = kb.raise_nofile()
    cpu_s, cpu_c, notes = kb.choose_cpus(args.cpu_server, args.cpu_client)
    try:
        os.sched_setaffinity(0, {cpu_c})  # the sampler and the bookkeeping stay off the server's CPU
    except OSError as e:
        notes.append(f"could not pin the harness to CPU {cpu_c}: {e}")
    dirs = 1 if args.smoke else fs.dirs_for_size(args.size_mb * 2**20)
    try:
        manifest, reused = fs.ensure(args.fileset, dirs, SEED)
    except OSError as e:
        log(f"web_bench: cannot make the file set in {args.fileset}: {e}")
        return 1
    ctx = Context()
    ctx.tools, ctx.bins, ctx.cpu_server, ctx.cpu_client = tools, bins, cpu_s, cpu_c
    ctx.root, ctx.dirs, ctx.seed = args.fileset, dirs, SEED
    ctx.rates, ctx.duration, ctx.sample_rate = args.rates, args.duration, args.sample_rate
    ctx.wrk_connections, ctx.wrk_duration, ctx.wrk_repeat = args.wrk_connections, args.wrk_duration, args.wrk_repeat
    ctx.commands, ctx.httperf_log = {}, []
    ctx.srcaddr = find_srcaddr(args.build)
    if args.source_addrs == "always" and not ctx.srcaddr:
        log(f"web_bench: --source-addrs always needs {args.build}/bench/weft-srcaddr.so: build first "
            f"(cmake --build {args.build})")
        return 1
    ctx.tmp = tempfile.mkdtemp(prefix="web-bench-")
    try:
        model = fs.AccessModel(dirs, SEED)
        mean_session = ss.session_stats(ss.make_sessions(1000, model.sample, SEED))["mean_session_think_s"]
        ctx.plans = {}
        ports = ephemeral_ports()
        for i, rate in enumerate(args.rates):
            clients = clients_for(rate, args.clients, mean_session + 1.0)
            if clients > args.clients:
                notes.append(f"rate {rate}: {clients} httperf processes (each limited to {CONNS_PER_HTTPERF} "
                             "expected concurrent connections by FD_SETSIZE)")
            files, _ = make_session_files(ctx.tmp, rate, args.duration, clients, model.sample, SEED)
            try:
                sources = source_plan(files, i, args.source_addrs if ctx.srcaddr else "off", ports)
            except ValueError as e:
                log(f"web_bench: rate {rate}: {e}: lower the rate or the duration")
                return 1
            if any(sources):
                notes.append(f"rate {rate}: httperf client j connects from {sources[0]} (j = 0) upwards "
                             "(weft-srcaddr.so)")
            elif not ctx.srcaddr and source_plan(files, i, args.source_addrs, ports)[0]:
                notes.append(f"rate {rate}: a client's sessions need over half of the {ports} ephemeral ports "
                             f"but {args.build}/bench/weft-srcaddr.so is not built: connections may fail")
            ctx.plans[rate] = {"files": files, "sources": sources}
        rng = random.Random(SEED)
        ctx.wrk_script = os.path.join(ctx.tmp, "paths.lua")
        write_wrk_script(ctx.wrk_script, [model.sample(rng)[0] for _ in range(WRK_PATHS)])
        facts = machine_info(tools, bins["knot"])
        plan_s = planned_seconds(len(specs), args.rates, args.duration, args.wrk_duration * args.wrk_repeat)
        log(f"web_bench: {facts['line']}; {facts['nginx']}; {facts['httperf']}; {facts['wrk']}")
        log(f"web_bench: file set {args.fileset} ({dirs} directories, {'reused' if reused else 'made now'}); "
            f"servers {', '.join(s['name'] for s in specs)} on CPU {cpu_s}; clients on CPU {cpu_c}; rates "
            f"{', '.join(map(str, args.rates))} sessions/s, {args.duration} s each; wrk {args.wrk_duration} s")
        log(f"web_bench: planned time about {plan_s / 60:.1f} minutes ({plan_s:.0f} s)")
        for n in notes:
            log("web_bench: " + n)
        if not any(src for p in ctx.plans.values() for src in p["sources"]):
            notes.append("every httperf client connects from 127.0.0.1 (few enough connections for one "
                         "address's ports)")

        runs = []
        for spec in specs:
            runs += run_server(spec, ctx, t_start)
        notes += saturation_notes(runs)
        total = time.monotonic() - t_start
        return write_outputs(args, runs, ctx, facts, notes, manifest, total, nofile)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)


def write_outputs(args, runs, ctx, facts, notes, manifest, total, nofile):
    os.makedirs(args.out_dir, exist_ok=True)
    paths = {k: os.path.join(args.out_dir, f"web.{k}") for k in ("json", "run.json", "md", "httperf.log")}
    with open(paths["json"], "w") as f:
        json.dump(runs, f, indent=2)
        f.write("\n")
    plots, plot_note = ({}, None) if args.smoke else plot(runs, args.out_dir)
    info = {"machine": facts,
            "settings": {"servers": [r for r in dict.fromkeys(x["server"] for x in runs)],
                         "rates": ctx.rates, "duration_s": ctx.duration, "drain_s": DRAIN_S, "grace_s": GRACE_S,
                         "timeout_s": TIMEOUT_S, "clients_min": args.clients,
                         "clients": {str(r): len(p["files"]) for r, p in ctx.plans.items()},
                         "sample_rate": ctx.sample_rate, "wrk_connections": ctx.wrk_connections,
                         "wrk_repeat": ctx.wrk_repeat,
                         "wrk_duration_s": ctx.wrk_duration, "cpu_server": ctx.cpu_server,
                         "cpu_client": ctx.cpu_client, "fileset": ctx.root, "dirs": ctx.dirs,
                         "files": ctx.dirs * 36, "fileset_bytes": manifest.get("total_bytes"), "seed": ctx.seed,
                         "rlimit_nofile": nofile, "quick": args.quick, "smoke": args.smoke,
                         "verification": {"max_timeout_pct": MAX_TIMEOUT_PCT, "spread_pct": SPREAD_PCT}},
            "servers_file": args.servers_file, "commands": ctx.commands,
            "nginx_conf": kb.nginx_conf("TMP", "PORT", ctx.root),
            "apache_conf": APACHE_CONF.format(tmp="TMP", mods=APACHE_MODULES, port="PORT", root=ctx.root,
                                              threads=APACHE_THREADS),
            "notes": notes, "plots": plots, "plot_note": plot_note, "total_seconds": round(total, 1),
            "smp_web": None if args.smoke else smp_summary(args.out_dir)}
    write_reports(paths, info, ctx.httperf_log, render(runs, info))
    log(f"web_bench: wrote {', '.join(paths.values())}" + "".join(f", {p}" for p in plots) + f" ({total:.0f} s)")
    if args.smoke:
        bad = check_outputs(args.out_dir, [s for s in info["settings"]["servers"]], ctx.rates)
        for b in bad:
            log(f"web_bench: smoke: {b}")
        log("web_bench: smoke: " + ("FAILED" if bad else "ok"))
        return 1 if bad else 0
    return 0 if all(r["verified"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
