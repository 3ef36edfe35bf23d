#!/usr/bin/env python3
"""Memory per idle connection: weft-vtserver, weft-knot and nginx, each holding N
keep-alive connections that have made one request (issue 13: "the smallest memory
per connection"; the Fig. 10 analogue, bench/vt/fig10.py, measures it under a
disk-bound load, where transient buffers and warm-up blur it).

Per server: start it; open WARM connections (one GET each, answers read, kept
open) so that its loops, pools and buffers have all run; read the anonymous RSS
of all its processes; open N more the same way; wait for it to settle; read it
again. Bytes per connection = the growth / N.

nginx allocates its connection and event structures for worker_connections at
start, so part of what a connection costs it is in no growth: that part is
measured as the idle anonymous RSS at worker_connections 20,000 (the benchmarks'
configuration) minus that at 1,024, over the difference in slots. Its cost per
connection is both parts together.

Loopback only; every wait is bounded. Writes results/vt_idle_memory.json and
.md and prints the table.

  python3 bench/vt/idle_memory.py [--conns 5000] [--servers vtserver,knot,nginx]
"""
import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "web"))
import knot_bench as kb  # noqa: E402  (nginx's configuration, free ports)
import fig10  # noqa: E402  (mem_kb: the processes' RSS figures)

FILE_BYTES = 4096
SLOTS = (1024, 20000)  # nginx worker_connections for the per-slot figure


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def anon_kb(pid):
    """RssAnon of pid and its children (nginx's master and worker), KiB."""
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return fig10.mem_kb(pids)[1]


def wait_listening(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def settled_anon(pid, wait=0.5, timeout=5.0):
    """The anon RSS once two readings `wait` apart agree (or after timeout)."""
    last = anon_kb(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(wait)
        now = anon_kb(pid)
        if now == last:
            return now
        last = now
    return last


def open_idle(port, n, path, timeout=30.0):
    """n connections, one GET each, every answer read whole; returned open."""
    req = f"GET /{path} HTTP/1.1\r\nHost: idle\r\n\r\n".encode()
    deadline = time.monotonic() + timeout
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=max(0.1, deadline - time.monotonic()))
            socks.append(s)
            s.sendall(req)
        for s in socks:
            got = b""
            while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 4 + FILE_BYTES:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                piece = s.recv(65536)
                if not piece:
                    raise RuntimeError(f"the server closed a connection before answering ({len(socks)} open)")
                got += piece
            if not got.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"unexpected answer: {got[:80]!r}")
        return socks
    except BaseException:
        for s in socks:
            s.close()
        raise


class Server:
    def __init__(self, argv, port, tmp):
        self.port = port
        self.err = open(os.path.join(tmp, "stderr"), "w+")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.err)
        try:
            wait_listening(port, self.proc)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


def server_argv(name, build, root, port, tmp, slots=SLOTS[1]):
    common = ["--listen", f"127.0.0.1:{port}", "--root", root, "--quiet", "--max-conns", "30000",
              "--keepalive-timeout", "300"]
    if name == "vtserver":
        return [os.path.join(build, "servers", "vtserver", "weft-vtserver")] + common
    if name == "knot":
        return [os.path.join(build, "servers", "knot", "weft-knot")] + common
    if name == "nginx":
        conf = kb.nginx_conf(tmp, port, root).replace("worker_connections 20000;", f"worker_connections {slots};")
        path = os.path.join(tmp, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        return [shutil.which("nginx") or "/usr/sbin/nginx", "-p", tmp + "/", "-e", os.path.join(tmp, "error.log"),
                "-c", path]
    raise ValueError(name)


def measure(name, build, root, conns, warm):
    with tempfile.TemporaryDirectory(prefix=f"idle-{name}-") as tmp:
        port = kb.free_port()
        srv = Server(server_argv(name, build, root, port, tmp), port, tmp)
        try:
            warm_socks = open_idle(port, warm, "f.bin")
            before = settled_anon(srv.proc.pid)
            t0 = time.monotonic()
            socks = open_idle(port, conns, "f.bin")
            opened_s = time.monotonic() - t0
            after = settled_anon(srv.proc.pid)
            for s in socks + warm_socks:
                s.close()
        finally:
            srv.stop()
    return {"server": name, "conns": conns, "warm": warm, "anon_before_kb": before, "anon_after_kb": after,
            "bytes_per_conn": round((after - before) * 1024 / conns), "open_s": round(opened_s, 2)}


def nginx_slot_bytes(build, root):
    """Anon bytes nginx allocates per worker_connections slot at start."""
    idle = {}
    for slots in SLOTS:
        with tempfile.TemporaryDirectory(prefix="idle-nginx-slots-") as tmp:
            port = kb.free_port()
            srv = Server(server_argv("nginx", build, root, port, tmp, slots), port, tmp)
            try:
                idle[slots] = settled_anon(srv.proc.pid)
            finally:
                srv.stop()
    return {"idle_anon_kb": {str(k): v for k, v in idle.items()},
            "bytes_per_slot": round((idle[SLOTS[1]] - idle[SLOTS[0]]) * 1024 / (SLOTS[1] - SLOTS[0]))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="the CMake build directory (default build/)")
    p.add_argument("--servers", default="vtserver,knot,nginx", help="any of vtserver, knot, nginx (default all)")
    p.add_argument("--conns", type=int, default=5000, help="idle connections measured (default 5000)")
    p.add_argument("--warm", type=int, default=200, help="connections opened first, not counted (default 200)")
    p.add_argument("--json", default=os.path.join(REPO, "results", "vt_idle_memory.json"),
                   help="the JSON output (default results/vt_idle_memory.json; the .md beside it)")
    args = p.parse_args(argv)
    servers = [s for s in args.servers.split(",") if s]
    for s in servers:
        if s not in ("vtserver", "knot", "nginx"):
            p.error(f"unknown server {s!r} (vtserver, knot, nginx)")
    if not 1 <= args.conns <= 20000 or not 1 <= args.warm <= 5000:
        p.error("--conns must be 1..20000 and --warm 1..5000")
    if "nginx" in servers and not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        p.error("nginx is not installed (apt-get install nginx-light), or leave it out of --servers")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.conns + args.warm + 64
    if hard < need:
        p.error(f"the descriptor limit ({hard}) is below the {need} this run needs: lower --conns")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    t_start = time.monotonic()
    root = tempfile.mkdtemp(prefix="idle-root-")
    try:
        with open(os.path.join(root, "f.bin"), "wb") as f:
            f.write(os.urandom(FILE_BYTES))
        runs = []
        for name in servers:
            log(f"[{time.monotonic() - t_start:.0f} s] {name}: {args.warm} + {args.conns} idle connections")
            runs.append(measure(name, args.build, root, args.conns, args.warm))
            log(f"  {runs[-1]['bytes_per_conn']} B per connection")
        slot = None
        if "nginx" in servers:
            slot = nginx_slot_bytes(args.build, root)
            for r in runs:
                if r["server"] == "nginx":
                    r["bytes_per_slot"] = slot["bytes_per_slot"]
        for r in runs:
            r["total_bytes_per_conn"] = r["bytes_per_conn"] + r.get("bytes_per_slot", 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    best = min(runs, key=lambda r: r["total_bytes_per_conn"])
    doc = {"benchmark": "vt.idle_memory", "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "command": "python3 bench/vt/idle_memory.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "conns": args.conns, "warm": args.warm, "file_bytes": FILE_BYTES, "runs": runs, "nginx_slots": slot,
           "smallest": best["server"], "total_seconds": round(time.monotonic() - t_start, 1)}
    md = ["# Memory per idle keep-alive connection", "",
          f"- {doc['date']}; {args.conns} connections after {args.warm} warm ones, each after one GET of a "
          f"{FILE_BYTES}-byte file; anonymous RSS of all the server's processes.",
          f"- Command: `{doc['command']}`", "",
          "| server | B/conn (growth) | B/slot at start | B/conn in all |", "|---|---:|---:|---:|"]
    for r in sorted(runs, key=lambda r: r["total_bytes_per_conn"]):
        md.append(f"| {r['server']} | {r['bytes_per_conn']:,} | "
                  f"{r['bytes_per_slot'] if 'bytes_per_slot' in r else '—'} | {r['total_bytes_per_conn']:,} |")
    if slot:
        md += ["", f"nginx's slot: idle anon {slot['idle_anon_kb']} KiB at worker_connections "
               f"{SLOTS[0]:,} / {SLOTS[1]:,}; the benchmarks run it at {SLOTS[1]:,}."]
    md += ["", f"Smallest per connection: {best['server']}.", ""]
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    md_path = os.path.splitext(args.json)[0] + ".md"
    with open(md_path, "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    log(f"idle_memory: wrote {args.json}, {md_path} ({doc['total_seconds']} s)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError) as e:
        log(f"idle_memory: {e}")
        sys.exit(1)
