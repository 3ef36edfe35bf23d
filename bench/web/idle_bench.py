#!/usr/bin/env python3
"""Do idle connections slow the active ones? (issue 5: 10,000 idle
connections may slow active clients by at most 10 %.)

Method, per system (weft-knot in the default mode, and nginx for reference),
each server pinned to CPU_SERVER and wrk to CPU_CLIENT as in knot_bench.py:
  1. start the server;
  2. baseline: wrk -t1 -c ACTIVE -d D --latency on 4k.bin;
  3. a holder process (this script with --hold) opens IDLE connections, makes
     one request on each (so they are keep-alive connections between
     requests, as a browser leaves them), reads the answers and keeps them
     open;
  4. loaded: the same wrk run again, the idle connections still open;
  5. the holder closes them; the server stops.
Repeated REPS times with the systems interleaved; the ratio is
loaded / baseline requests/s of the same server process, median over the
repetitions. The servers get a keep-alive timeout (120 s) longer than a
repetition, so the idle connections stay open for the whole loaded run,
and weft-knot --max-conns 20000 (nginx: worker_connections 20000). A run
with socket errors or non-2xx answers fails instead of counting.

Writes OUT_DIR/knot_idle.json (records {"benchmark": "web.idle_connections",
"system", "params": {"idle", "active", "file"}, "unit": "ratio", "median",
"values", "baseline_req_s", "loaded_req_s", "p99_ms"}) and prints a table.
"""
import argparse
import json
import os
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import knot_bench as kb  # noqa: E402  (the servers, wrk and the docroot are shared)

GOAL = 0.90  # loaded >= 0.90 x baseline


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the holder: IDLE connections, one request each, then nothing --------------

def hold(port, n, path, timeout=60.0):
    """Open n connections, one GET each, read every answer, print 'ready', keep
    them until stdin closes. Exits 1 if they cannot all be made in time."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    req = f"GET /{path} HTTP/1.1\r\nHost: idle\r\n\r\n".encode()
    sel = selectors.DefaultSelector()
    socks, pending = [], {}
    deadline = time.monotonic() + timeout
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
        pending[s] = b""
        sel.register(s, selectors.EVENT_WRITE)
        while len(pending) > 512:  # a bounded number in flight: don't overflow the backlog
            step(sel, pending, req, deadline)
    while pending:
        step(sel, pending, req, deadline)
    print(f"ready {len(socks)}", flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    for s in socks:
        s.close()
    return 0


def step(sel, pending, req, deadline):
    if time.monotonic() > deadline:
        print(f"holder: {len(pending)} connections still unanswered", file=sys.stderr)
        sys.exit(1)
    for key, ev in sel.select(timeout=1.0):
        s = key.fileobj
        if ev & selectors.EVENT_WRITE:
            s.send(req)
            sel.modify(s, selectors.EVENT_READ)
            continue
        data = s.recv(65536)
        if not data:
            print("holder: the server closed a connection", file=sys.stderr)
            sys.exit(1)
        buf = pending[s] + data
        head, sep, body = buf.partition(b"\r\n\r\n")
        if sep:
            length = next((int(ln.split(b":")[1]) for ln in head.split(b"\r\n")
                           if ln.lower().startswith(b"content-length:")), 0)
            if len(body) >= length:
                sel.unregister(s)
                del pending[s]
                continue
        pending[s] = buf


# ---- the measurement ------------------------------------------------------------

def one_rep(system, cmd_fn, args, content, cpus):
    """(baseline wrk result, loaded wrk result) on one server process."""
    tmp = tempfile.mkdtemp(prefix=f"idle-bench-{system}-")
    server = kb.Server(system, cmd_fn, tmp)
    holder = None
    try:
        server.start(args.file)
        problem = kb.verify(server, content)
        if problem:
            raise kb.ServerError(f"wrong content: {problem}")
        url = server.url(args.file)
        base, _ = kb.run_wrk(url, args.active, args.duration, cpus[1])
        holder = subprocess.Popen(["taskset", "-c", str(cpus[1]), sys.executable, os.path.abspath(__file__),
                                   "--hold", str(server.port), str(args.idle), args.file],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = holder.stdout.readline().strip()
        if not line.startswith("ready"):
            raise kb.ServerError(f"the holder could not keep {args.idle:,} idle connections ({line or 'no answer'})")
        loaded, _ = kb.run_wrk(url, args.active, args.duration, cpus[1])
        if not server.alive():
            raise kb.ServerError("died under the idle connections")
        for name, res in (("baseline", base), ("loaded", loaded)):
            if kb.run_problems(res):  # errors or non-2xx answers: not a measurement of serving files
                raise kb.ServerError(f"{name} run: " + "; ".join(kb.run_problems(res)))
        return base, loaded
    finally:
        if holder:
            holder.stdin.close()
            try:
                holder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                holder.kill()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] + " Servers on CPU 1, wrk on CPU 0.",
                                 epilog="Exit status: 0 measured, 1 failed (or nginx/wrk missing).")
    ap.add_argument("--build", default="build", help="the CMake build directory (default: build)")
    ap.add_argument("--out-dir", default="results", help="where knot_idle.json goes (default: results)")
    ap.add_argument("--idle", type=int, default=10000, help="idle connections (default 10000)")
    ap.add_argument("--active", type=int, default=100, help="wrk's connections (default 100)")
    ap.add_argument("--file", default="4k.bin", choices=sorted(kb.FILES), help="file wrk asks for (default 4k.bin)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run (default 10)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--mode", default=kb.DEFAULT_MODE, choices=kb.MODES, help="weft-knot's mode (default: its default)")
    ap.add_argument("--no-nginx", action="store_true", help="weft-knot only")
    ap.add_argument("--quick", action="store_true", help="3 s runs, 1 repetition")
    ap.add_argument("--hold", nargs=3, metavar=("PORT", "N", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hold:
        return hold(int(args.hold[0]), int(args.hold[1]), args.hold[2])
    if args.quick:
        args.duration, args.reps = 3, 1

    tools, missing = kb.find_tools(not args.no_nginx)
    if missing:
        log(f"idle_bench: {', '.join(missing)} not found (make bench-knot installs them as root)")
        return 1
    nofile = kb.raise_nofile()
    if nofile < args.idle + args.active + 100:
        log(f"idle_bench: RLIMIT_NOFILE is {nofile}: too low for {args.idle:,} idle connections")
        return 1
    cpu_s, cpu_c, _ = kb.choose_cpus(1, 0)
    root, content, _ = kb.make_docroot(args.build)
    knot = os.path.abspath(os.path.join(args.build, "servers", "knot", "weft-knot"))
    systems = [(f"knot-{args.mode}", kb.knot_cmd(knot, cpu_s, root, kb.knot_args(
        args.mode, ["--keepalive-timeout", "120", "--max-conns", "20000"])))]
    if not args.no_nginx:
        systems.append(("nginx", kb.nginx_cmd(tools["nginx"], cpu_s, root)))

    results = {s: [] for s, _ in systems}
    for rep in range(args.reps):
        order = systems if rep % 2 == 0 else systems[::-1]
        for system, cmd in order:
            log(f"idle_bench: rep {rep + 1}/{args.reps} {system}: {args.active} active connections, "
                f"then again with {args.idle:,} idle ones")
            try:
                base, loaded = one_rep(system, cmd, args, content, (cpu_s, cpu_c))
            except (kb.ServerError, RuntimeError) as e:
                log(f"idle_bench: {system}: FAILED: {e}")
                continue
            ratio = loaded["req_s"] / base["req_s"] if base["req_s"] else 0.0
            log(f"idle_bench:   {base['req_s']:,.0f} -> {loaded['req_s']:,.0f} req/s ({ratio:.2f}x), p99 "
                f"{base['percentiles_ms'].get('99', 0):.2f} -> {loaded['percentiles_ms'].get('99', 0):.2f} ms")
            results[system].append((base, loaded, ratio))

    records = []
    for system, runs in results.items():
        if not runs:
            continue
        ratios = [r for _, _, r in runs]
        records.append({
            "benchmark": "web.idle_connections", "system": system,
            "params": {"idle": args.idle, "active": args.active, "file": args.file}, "unit": "ratio",
            "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "repetitions": len(ratios), "values": ratios,
            "baseline_req_s": [b["req_s"] for b, _, _ in runs], "loaded_req_s": [lo["req_s"] for _, lo, _ in runs],
            "p99_ms": {"baseline": [b["percentiles_ms"].get("99") for b, _, _ in runs],
                       "loaded": [lo["percentiles_ms"].get("99") for _, lo, _ in runs]}})
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "knot_idle.json")
    with open(path, "w") as f:
        json.dump(records, f, indent=2)
        f.write("\n")
    print(f"\n{args.idle:,} idle keep-alive connections, {args.active} active (wrk), {args.file}, "
          f"medians of {args.reps}:")
    print("| system | req/s without | req/s with | with / without | goal >= 0.90 |")
    print("|---|---:|---:|---:|---|")
    for r in records:
        print(f"| {r['system']} | {statistics.median(r['baseline_req_s']):,.0f} | "
              f"{statistics.median(r['loaded_req_s']):,.0f} | {r['median']:.2f} | "
              f"{'met' if r['median'] >= GOAL else 'NOT met'} |")
    print(f"\n(wrote {path})")
    return 0 if len(records) == len(systems) else 1


if __name__ == "__main__":
    sys.exit(main())
