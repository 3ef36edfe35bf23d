#!/usr/bin/env python3
"""Threading by appointment, Figs. 8-10 analogue (issue 14, docs/tap.md).

The paper (threading-by-appointment.txt §6) requested 18 files of 1-90 KB
from its small server with a 5 KB file buffer at connection rates rising in
steps, and plotted the connection time per file size (Fig. 8), the
successful connections per file size (Fig. 9) and the client's view
(Fig. 10) for each traffic-shaping classification. Lowering the priority of
running threads ("shape") gave small files low latency but starved the
large ones until their clients reset them.

Here: bench/tap/smallserver (--buf 5120) under weft-run with WEFT_POLICY=tap
and each classification (WEFT_TAP=class=const|shape|boost|weft|share), beside the
same binary on NPTL and on weft's FIFO. Per point (system, rate): httperf
for every file at once (rate/18 connections/s per file, one request per
connection, --timeout T), pinned to --cpu-client, each file's load split
over as many processes as keep each under HTTPERF_FDS open connections even
if every one lasted the timeout (Debian's httperf handles 1,024 descriptors
and reports the connections it cannot open as fd-unavail: the client's
shortage, which counted against the server before 2026-11-29); their
reports add up to the file's mean connection time and its errors. The
server also times its connections itself per file size (smallserver
--times): accept to close (the paper's measure) and arrival to close, from
the kernel's receive timestamp of the request (or the accept, if earlier),
which adds any wait in the listen queue. On a client CPU this busy the
client's connection time includes the client's own scheduling. A point is verified when
every size has timeouts within SPREAD points of the mean over sizes and
below MAX_PCT (bench/web/web_bench.py's rule, the EuroSys'07 study's): the
paper's large files under "shape" would fail it.

Outputs: --json (default results/tap_fig8.json), the Markdown report beside
it, and with matplotlib --png (default docs/figures/tap_fig8.png).
Bounded as bench/tap/fig7.py.
"""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fig7  # noqa: E402  (the server's command, httperf, the web harness's pieces)

wb, kb, log, fmt = fig7.wb, fig7.kb, fig7.log, fig7.fmt
SYSTEMS = ("nptl", "fifo", "tap-const", "tap-shape", "tap-boost", "tap-weft", "tap-share")
SIZES = [round(1024 + i * (90 - 1) * 1024 / 17) for i in range(18)]  # 1 KiB .. 90 KiB
DEFAULT_RATES = "3000,6000,8000,9000,10000,11000"
# Debian's httperf watches at most FD_SETSIZE (1,024) descriptors; a process
# that would need more reports the connections it could not open as
# fd-unavail, which is the client's shortage, not the server's. Each file's
# load is split over enough processes that none needs more than this many
# even if every connection lasted the whole --timeout.
HTTPERF_FDS = 1000


def clients_per_file(per_file_rate, timeout):
    """httperf processes for one file: its rate x timeout connections open at
    most, at most HTTPERF_FDS each."""
    return max(1, math.ceil(per_file_rate * timeout / HTTPERF_FDS))


def new_size_record():
    return {"requests": 0, "ok": 0, "timeouts": 0, "errors": 0, "wrong": 0, "connection_ms": None,
            "errors_by_kind": {}}


def add_report(st, h, text):
    """Fold one httperf report into a file's record (a file may have several
    clients): counts add up, the mean connection time is weighted by the
    connections each client completed."""
    errs = h["errors"].get("total", 0)
    timeouts = h["errors"].get("client-timo", 0)
    ok = h.get("status", {}).get("2xx", 0)
    ms = wb._num(text, r"^Connection time \[ms\]: min [\d.]+ avg ([\d.]+)")
    if ms is not None and ok:
        done = st["ok"]  # the connections the mean so far is over
        st["connection_ms"] = round(((st["connection_ms"] or 0) * done + ms * ok) / (done + ok), 1)
    st["requests"] += h["connections"]
    st["ok"] += ok
    st["timeouts"] += timeouts
    st["errors"] += errs - timeouts
    for kind, v in h["errors"].items():
        if v and kind != "total":
            st["errors_by_kind"][kind] = st["errors_by_kind"].get(kind, 0) + v


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    fig7.common_args(ap, "fig8", SYSTEMS)
    ap.add_argument("--rates", type=fig7.int_list, help=f"connections per second over all files (default "
                    f"{DEFAULT_RATES}; --quick 6000,10000)")
    ap.add_argument("--tap", default="", help="more WEFT_TAP settings for the tap systems, e.g. age=4 (the "
                    "class comes from the system's name)")
    ap.add_argument("--buf", type=int, default=5120, help="the server's read and write size (default 5,120)")
    ap.add_argument("--quick", action="store_true", help="2 rates of 4 s")
    ap.add_argument("--smoke", action="store_true", help="nptl and tap-weft at 180 conn/s for 2 s, then check "
                    f"the outputs (exit 1 if wrong; {fig7.SKIP} without httperf or weft-run)")
    a = ap.parse_args(argv)
    pick_systems_default = a.systems == ",".join(SYSTEMS)
    fig7.pick_systems(ap, a, SYSTEMS)
    if a.smoke:
        a.rates, a.duration = a.rates or [180], a.duration or 2
        if pick_systems_default:
            a.systems = ["nptl", "tap-weft"]
    elif a.quick:
        a.rates, a.duration = a.rates or [6000, 10000], a.duration or 4
    a.rates = a.rates or fig7.int_list(DEFAULT_RATES)
    a.duration = a.duration or 8
    if a.buf < 1 or a.buf > 65536 or a.duration < 1 or a.timeout <= 0:
        ap.error("--buf (1..65536), --duration and --timeout must be positive")
    return a


TIMES = "times.json"  # the server's own connection times, in its temporary directory


def command(system, bins, cpu, root, buf, extra=""):
    kind, _, cls = system.partition("-")
    spec = ",".join(x for x in (f"class={cls}" if cls else "", extra if cls else "") if x)
    return fig7.server_cmd(kind, bins, cpu, root, buf, spec, times=TIMES)


def server_times(doc):
    """smallserver --times's JSON -> {size: {count, mean_ms, arrival_ms,
    p99_ms}}: accept to close, arrival (the request's receive timestamp, or
    the accept if earlier) to close, and arrival to close's p99 as the upper
    edge of the power-of-two bucket it falls in (so at most 2x)."""
    out = {}
    for size, t in doc.get("sizes", {}).items():
        n, hist = t["count"], t["hist"]
        seen, p99 = 0, None
        for b, c in enumerate(hist):
            seen += c
            if seen >= 0.99 * n:
                p99 = (2 ** b) / 1000.0  # bucket b ends at 2^b µs
                break
        out[str(size)] = {"count": n, "mean_ms": round(t["mean_ms"], 3),
                          "arrival_ms": round(t["arrival_mean_ms"], 3) if t.get("stamped") else None, "p99_ms": p99}
    return out


def measure(system, rate, args, bins, root, files):
    rec = {"system": system, "rate": rate, "ok": False, "problems": [], "sizes": {}}
    server = kb.Server(system, command(system, bins, args.cpu_server, root, args.buf, args.tap),
                       tempfile.mkdtemp(prefix=f"tap-fig8-{system}-"))
    try:
        server.start(os.path.basename(files[0][0]))
    except kb.ServerError as e:
        rec["problems"].append(f"did not start: {e}")
        shutil.rmtree(server.tmp, ignore_errors=True)
        return rec
    procs = []
    try:
        per = rate / len(files)
        n = max(1, int(per * args.duration))  # connections per file
        k = clients_per_file(per, args.timeout)
        rec["httperf_per_file"] = k
        cpu0 = kb.proc_cpu_seconds(server.pids())
        for path, size in files:
            for j in range(k):  # k processes share the file's rate and connections
                conns = max(1, n // k + (j < n % k))
                cmd = ["taskset", "-c", str(args.cpu_client), "httperf", "--hog", "--close-with-reset",
                       "--server", "127.0.0.1", "--port", str(server.port), "--uri", "/" + os.path.basename(path),
                       f"--rate={per / k:g}", f"--num-conns={conns}", f"--timeout={args.timeout:g}"]
                procs.append((size, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                     stdin=subprocess.DEVNULL, text=True)))
        deadline = time.monotonic() + args.duration + args.timeout + 10
        for size, p in procs:
            try:
                out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGINT)
                try:
                    out, _ = p.communicate(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
            try:
                h = wb.parse_httperf(out)
            except ValueError as e:
                rec["problems"].append(f"httperf for {size} B: {e}")
                continue
            add_report(rec["sizes"].setdefault(str(size), new_size_record()), h, out)
        rec["server_cpu_s"] = round(kb.proc_cpu_seconds(server.pids()) - cpu0, 2)
        rec["replies"] = sum(st["ok"] for st in rec["sizes"].values())
        if len(rec["sizes"]) == len(files):
            names = list(rec["sizes"])
            ok, reasons = wb.verify_run(rec["sizes"], sizes=names)
            rec["verified"], rec["verify_reasons"] = ok, reasons
        for path, size in files[:1] + files[-1:]:
            with open(path, "rb") as f:
                expected = f.read()
            try:
                with kb.OPENER.open(server.url(os.path.basename(path)), timeout=5) as r:
                    if r.read() != expected:
                        rec["problems"].append(f"{size} B: wrong bytes after the load")
            except OSError as e:
                rec["problems"].append(f"{size} B: no reply after the load ({e})")
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        problem = server.stop(grace=5.0)
        if problem:
            rec["problems"].append(f"server {problem}")
        try:
            with open(os.path.join(server.tmp, TIMES)) as f:
                for size, t in server_times(json.load(f)).items():
                    if size in rec["sizes"]:
                        rec["sizes"][size]["server"] = t
        except (OSError, ValueError) as e:
            rec["problems"].append(f"no server times: {e}")
        shutil.rmtree(server.tmp, ignore_errors=True)
    rec["ok"] = not rec["problems"]
    return rec


def served_pct(st):
    """Connections served whole, % of those served, timed out or failed
    (httperf's fd-unavail among them: connections it could not even open
    because its earlier ones to that file were still going)."""
    return 100.0 * st["ok"] / max(1, st["ok"] + st["timeouts"] + st["errors"])


def render(doc):
    s, pts = doc["settings"], doc["points"]
    find = {(p["system"], p["rate"]): p for p in pts}
    md = ["# Threading by appointment, Figs. 8-10 analogue", "",
          f"- Date: {doc['date']}. Machine: {doc['machine']}.",
          f"- bench/tap/smallserver --buf {s['buf']} (a kernel thread per connection, no cache) serving 18 files of "
          f"{SIZES[0]:,}-{SIZES[-1]:,} B; nptl on the kernel's threads, the others under weft-run (fifo; tap with "
          "WEFT_TAP=class=const|shape|boost|weft|share). Server on CPU "
          f"{s['cpu_server']}; httperf for each file (--close-with-reset, --timeout {s['timeout']:g}), split over "
          f"enough processes that none holds more than {HTTPERF_FDS:,} connections, on CPU {s['cpu_client']}, "
          f"{s['duration']} s of arrivals per point.",
          "- Verified: every size's timeouts within 2 points of the mean over sizes and below 10 % "
          "(bench/web/web_bench.py's rule).", ""]
    for rate in s["rates"]:
        md += [f"## {rate:,} connections/s: mean connection time (ms) per file size, and % of connections served whole", "",
               "| size (B) | " + " | ".join(s["systems"]) + " |", "|---:|" + "---:|" * len(s["systems"])]
        for size in SIZES:
            row = [f"{size:,}"]
            for x in s["systems"]:
                st = find.get((x, rate), {}).get("sizes", {}).get(str(size))
                row.append("—" if not st else f"{fmt(st['connection_ms'], 1)} ({served_pct(st):.0f} %)")
            md.append("| " + " | ".join(row) + " |")
        ver = []
        for x in s["systems"]:
            p = find.get((x, rate))
            v = "—" if not p or "verified" not in p else ("yes" if p["verified"] else "NO: " + "; ".join(p["verify_reasons"]))
            ver.append(v)
        md += ["| verified | " + " | ".join(ver) + " |",
               "| replies/s | " + " | ".join(fmt(find[(x, rate)]["replies"] / s["duration"]) if (x, rate) in find
                                              else "—" for x in s["systems"]) + " |", "",
               f"{rate:,} connections/s, as the server timed them: mean ms from the request's arrival to close "
               "(p99 at most; mean from accept to close)", "",
               "| size (B) | " + " | ".join(s["systems"]) + " |", "|---:|" + "---:|" * len(s["systems"])]
        for size in SIZES:
            row = [f"{size:,}"]
            for x in s["systems"]:
                t = find.get((x, rate), {}).get("sizes", {}).get(str(size), {}).get("server")
                row.append("—" if not t else f"{fmt(t['arrival_ms'], 2)} ({fmt(t['p99_ms'], 1)}; {fmt(t['mean_ms'], 2)})")
            md.append("| " + " | ".join(row) + " |")
        md.append("")
    md += [f"![connection time and served share per file size](../docs/figures/{os.path.basename(doc['png'])})", ""]
    return "\n".join(md)


def plot(doc, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("fig8: no matplotlib: no plot")
        return False
    s = doc["settings"]
    find = {(p["system"], p["rate"]): p for p in doc["points"]}
    rates = [s["rates"][len(s["rates"]) // 2], s["rates"][-1]] if len(s["rates"]) > 1 else s["rates"]
    fig, axes = plt.subplots(3, len(rates), figsize=(5 * len(rates), 10), squeeze=False)
    for j, rate in enumerate(rates):
        for x in s["systems"]:
            st = [find.get((x, rate), {}).get("sizes", {}).get(str(z)) for z in SIZES]
            srv = [(z / 1024, t["server"]["arrival_ms"]) for z, t in zip(SIZES, st)
                   if t and t.get("server") and t["server"]["arrival_ms"] is not None]
            axes[0][j].plot([a for a, _ in srv], [b for _, b in srv], marker=".", label=x)
            xs = [z / 1024 for z, t in zip(SIZES, st) if t and t["connection_ms"] is not None]
            axes[1][j].plot(xs, [t["connection_ms"] for t in st if t and t["connection_ms"] is not None],
                            marker=".", label=x)
            axes[2][j].plot([z / 1024 for z, t in zip(SIZES, st) if t],
                            [served_pct(t) for t in st if t], marker=".", label=x)
        axes[0][j].set(title=f"{rate:,} conn/s: server, arrival to close",
                       xlabel="file KiB", ylabel="ms", yscale="log")
        axes[1][j].set(title=f"{rate:,} conn/s: client, connect to close", xlabel="file KiB", ylabel="ms")
        axes[2][j].set(title=f"{rate:,} conn/s: connections served", xlabel="file KiB", ylabel="%")
        for a in (axes[0][j], axes[1][j], axes[2][j]):
            a.grid(alpha=0.3)
            a.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    return True


def main(argv=None):
    args = parse_args(argv)
    bins = fig7.prepare(args, "fig8")
    if isinstance(bins, int):
        return bins
    root = tempfile.mkdtemp(prefix="tap-fig8-root-")
    files = []
    for i, size in enumerate(SIZES):
        path = os.path.join(root, f"f{i:02d}-{size}.bin")
        with open(path, "wb") as f:
            f.write(bytes((k * 31 + i) % 251 for k in range(size)))
        files.append((path, size))
    points, t0 = [], time.monotonic()
    total = len(args.rates) * len(args.systems)
    log(f"fig8: {', '.join(args.systems)} at {', '.join(map(str, args.rates))} conn/s, {args.duration} s each: "
        f"{total} points, about {total * (args.duration + 5) / 60:.1f} minutes")
    try:
        for i, rate in enumerate(args.rates):
            order = args.systems[i % len(args.systems):] + args.systems[:i % len(args.systems)]
            for system in order:
                kb.wait_quiet([args.cpu_server, args.cpu_client], args.quiet_wait)
                rec = measure(system, rate, args, bins, root, files)
                points.append(rec)
                small, large = rec["sizes"].get(str(SIZES[0]), {}), rec["sizes"].get(str(SIZES[-1]), {})
                srv = lambda st: fmt(st.get("server", {}).get("arrival_ms"), 2)  # noqa: E731
                log(f"fig8: [{time.monotonic() - t0:.0f} s, {len(points)}/{total}] {system} {rate} conn/s: "
                    f"{fmt(rec.get('replies', 0) / args.duration)} replies/s; 1 KiB {fmt(small.get('connection_ms'), 1)} "
                    f"ms (server {srv(small)}), 90 KiB {fmt(large.get('connection_ms'), 1)} ms (server {srv(large)}); "
                    f"verified {rec.get('verified', '—')}" +
                    ("" if rec["ok"] else f" -- {'; '.join(rec['problems'])}"))
    except KeyboardInterrupt:
        log("fig8: interrupted: writing what was measured")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "machine": kb.machine_line(),
           "settings": {"systems": args.systems, "rates": args.rates, "duration": args.duration, "sizes": SIZES,
                        "timeout": args.timeout, "buf": args.buf, "tap": args.tap, "cpu_server": args.cpu_server,
                        "cpu_client": args.cpu_client},
           "png": args.png, "points": points}
    fig7.write_outputs(doc, render(doc), args, plot, "fig8")
    if args.smoke:
        want = len(args.rates) * len(args.systems)
        bad = [p for p in points if not p["ok"] or len(p["sizes"]) != len(SIZES) or not p.get("replies") or
               any(st.get("server", {}).get("count", 0) < 1 for st in p["sizes"].values())]
        if bad or len(points) != want:
            log(f"fig8: smoke: {len(bad)} bad points of {len(points)} (want {want}, each with all 18 sizes, "
                "served and timed by the server)")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
