#!/usr/bin/env python3
"""Threading by appointment, Fig. 7 analogue (issue 14, docs/tap.md).

The paper (threading-by-appointment.txt §6, Fig. 7) served one 4,244-byte
file from a small thread-per-connection server that copies it in 512-byte
reads and writes without a cache, under httperf `--close-with-reset --hog`
at rising connection rates, and compared the reply rate and the bytes/s of
its TAP reactor with NPTL. Here the same unmodified binary
(bench/tap/smallserver.c, plain C and pthreads) runs three ways:

  nptl   on the kernel's threads
  fifo   on weft threads under weft-run, WEFT_POLICY=fifo (the default)
  tap    on weft threads under weft-run, WEFT_POLICY=tap (the calendars,
         ratio 5:4:1, class weft)

Per point (system, rate): wait for quiet CPUs, start the server pinned to
--cpu-server, fetch the file once and compare it byte for byte, run
`httperf --hog --close-with-reset --uri /FILE --rate R --num-conns R*D
--timeout T` pinned to --cpu-client, fetch and compare again (the server
must still serve correctly), then SIGTERM (it must exit 0). Recorded: reply
rate (replies / httperf's test duration), Net I/O (MB/s, headers included),
mean connection time, httperf's errors, the server's CPU seconds. Points are
interleaved (every system at one rate, in a rotating order, before the next
rate) for --repeat rounds; the round with the most replies/s is reported.

Goal (issue 14): TAP >= NPTL at every rate. Outputs: --json (default
results/tap_fig7.json), the Markdown report beside it, and with matplotlib
--png (default docs/figures/tap_fig7.png). Bounded: each httperf run is
interrupted at D + T + 10 s and killed 5 s later; a server that does not
stop within 5 s of SIGTERM is killed and the point marked.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench", "web"))
import web_bench as wb  # noqa: E402  (httperf's report, weft-run's path)

kb = wb.kb
SKIP = 77
SYSTEMS = ("nptl", "fifo", "tap")
DEFAULT_RATES = "2000,4000,6000,8000,10000,12000,14000,16000"
FILE = "f4244.bin"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def int_list(text):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not v or min(v) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return v


def common_args(ap, name, systems):
    """The options both harnesses (fig7, fig8) have."""
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="the CMake build directory (default build)")
    ap.add_argument("--systems", default=",".join(systems), help=f"from {', '.join(systems)} (default all)")
    ap.add_argument("--duration", type=int, help="seconds of connection arrivals per point (default 8; --quick 4)")
    ap.add_argument("--timeout", type=float, default=5.0, help="httperf --timeout, seconds (default 5)")
    ap.add_argument("--cpu-server", type=int, default=1, help="CPU for the server (default 1)")
    ap.add_argument("--cpu-client", type=int, default=0, help="CPU for httperf and this script (default 0)")
    ap.add_argument("--quiet-wait", type=float, default=20, help="seconds to wait before each point for the CPUs "
                    "to be quiet (default 20)")
    ap.add_argument("--json", default=os.path.join(REPO, "results", f"tap_{name}.json"),
                    help=f"where the figures go (default results/tap_{name}.json; the report beside it)")
    ap.add_argument("--png", default=os.path.join(REPO, "docs", "figures", f"tap_{name}.png"), help="the plot")


def pick_systems(ap, a, systems):
    a.systems = [s for s in a.systems.split(",") if s]
    bad = [s for s in a.systems if s not in systems]
    if bad or not a.systems:
        ap.error(f"--systems: unknown {', '.join(bad) or '(none)'}; known: {', '.join(systems)}")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap, "fig7", SYSTEMS)
    ap.add_argument("--rates", type=int_list, help=f"connections per second (default {DEFAULT_RATES}; --quick "
                    "4000,10000,16000)")
    ap.add_argument("--size", type=int, default=4244, help="the file's bytes (default 4,244, the paper's)")
    ap.add_argument("--tap", default="", help="WEFT_TAP for the tap server, e.g. ratio=5:4:5 (default: the "
                    "runtime's, ratio 5:4:1, class weft)")
    ap.add_argument("--buf", type=int, default=512, help="the server's read and write size (default 512)")
    ap.add_argument("--repeat", type=int, help="rounds over every point (default 2; --quick 1)")
    ap.add_argument("--quick", action="store_true", help="3 rates, 4 s, 1 round (under a minute)")
    ap.add_argument("--smoke", action="store_true", help="2 low rates of 2 s, then check the outputs "
                    f"(exit 1 if wrong; {SKIP} when httperf or weft-run is missing)")
    a = ap.parse_args(argv)
    pick_systems(ap, a, SYSTEMS)
    if a.smoke:
        a.rates, a.duration, a.repeat = a.rates or [200, 400], a.duration or 2, a.repeat or 1
    elif a.quick:
        a.rates, a.duration, a.repeat = a.rates or [4000, 10000, 16000], a.duration or 4, a.repeat or 1
    a.rates = a.rates or int_list(DEFAULT_RATES)
    a.duration = a.duration or 8
    a.repeat = a.repeat or 2
    if a.size < 1 or a.buf < 1 or a.buf > 65536 or a.duration < 1 or a.repeat < 1 or a.timeout <= 0:
        ap.error("--size, --buf (1..65536), --duration, --repeat and --timeout must be positive")
    return a


def server_cmd(system, bins, cpu, root, buf, tap_spec, times=None):
    """The server's command line as kb.Server wants it; with `times` (a file
    name), the server writes its own connection times into its temporary
    directory when it stops (smallserver --times)."""
    def cmd(port, tmp):
        base = [bins["smallserver"], "--port", str(port), "--root", root, "--buf", str(buf), "--quiet"]
        if times:
            base += ["--times", os.path.join(tmp, times)]
        if system == "nptl":
            return ["taskset", "-c", str(cpu)] + base
        env = [f"WEFT_POLICY={system}"] + ([f"WEFT_TAP={tap_spec}"] if system == "tap" and tap_spec else [])
        return ["taskset", "-c", str(cpu), "env"] + env + [bins["weft-run"]] + base
    return cmd


def fetch_ok(port, expected):
    try:
        with kb.OPENER.open(f"http://127.0.0.1:{port}/{FILE}", timeout=5) as r:
            return r.read() == expected
    except OSError:
        return False


def run_httperf(port, rate, duration, timeout, cpu):
    n = max(1, int(rate * duration))
    cmd = ["taskset", "-c", str(cpu), "httperf", "--hog", "--close-with-reset", "--server", "127.0.0.1",
           "--port", str(port), "--uri", f"/{FILE}", f"--rate={rate}", f"--num-conns={n}", f"--timeout={timeout:g}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    limit = duration + timeout + 10
    try:
        out, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
    return cmd, out


def measure(system, rate, args, bins, root, expected):
    rec = {"system": system, "rate": rate, "ok": False, "problems": []}
    server = kb.Server(system, server_cmd(system, bins, args.cpu_server, root, args.buf, args.tap), tempfile.mkdtemp(
        prefix=f"tap-fig7-{system}-"))
    try:
        server.start(FILE)
    except kb.ServerError as e:
        rec["problems"].append(f"did not start: {e}")
        shutil.rmtree(server.tmp, ignore_errors=True)
        return rec
    try:
        rec["command"] = " ".join(server.cmd)
        if not fetch_ok(server.port, expected):
            rec["problems"].append("the file differed before the load")
        cpu0 = kb.proc_cpu_seconds(server.pids())
        cmd, out = run_httperf(server.port, rate, args.duration, args.timeout, args.cpu_client)
        rec["server_cpu_s"] = round(kb.proc_cpu_seconds(server.pids()) - cpu0, 2)
        rec["httperf"] = " ".join(cmd)
        try:
            h = wb.parse_httperf(out)
        except ValueError as e:
            rec["problems"].append(f"httperf: {e}: {out.strip().splitlines()[-1:] or 'no output'}")
            return rec
        dur = h["test_duration_s"]
        rec.update({
            "connections": h["connections"], "replies": h["replies"], "test_duration_s": dur,
            "reply_rate": round(h["replies"] / dur, 1) if dur > 0 else 0.0,
            "mbps": round(h.get("net_kb_s", 0.0) * 1024 / 1e6, 2),
            "connection_ms": wb._num(out, r"^Connection time \[ms\]: min [\d.]+ avg ([\d.]+)"),
            "status": h.get("status", {}), "errors": h["errors"],
        })
        if not fetch_ok(server.port, expected):
            rec["problems"].append("the file differed (or did not come) after the load")
    finally:
        problem = server.stop(grace=5.0)
        if problem:
            rec["problems"].append(f"server {problem}")
        shutil.rmtree(server.tmp, ignore_errors=True)
    rec["ok"] = not rec["problems"]
    return rec


def fmt(x, nd=0):
    return "—" if x is None else f"{x:,.{nd}f}"


def best(points, system, rate):
    runs = [p for p in points if p["system"] == system and p["rate"] == rate and "reply_rate" in p]
    return max(runs, key=lambda p: p["reply_rate"]) if runs else None


def render(doc):
    s, pts = doc["settings"], doc["points"]
    systems, rates = s["systems"], s["rates"]
    md = ["# Threading by appointment, Fig. 7 analogue", "",
          f"- Date: {doc['date']}. Machine: {doc['machine']}.",
          f"- Server: bench/tap/smallserver.c (a kernel thread per connection, HTTP/1.0, no cache, {s['buf']}-byte "
          f"reads and writes) serving one {s['size']:,}-byte file; on CPU {s['cpu_server']}. nptl: on the kernel's "
          "threads; fifo and tap: the same binary under weft-run with WEFT_POLICY=fifo / tap"
          + (f" (WEFT_TAP={s['tap']})." if s.get("tap") else " (the default calendars: ratio 5:4:1, class weft)."),
          f"- Load: httperf --hog --close-with-reset, one connection per request, {s['duration']} s of arrivals per "
          f"point, --timeout {s['timeout']:g}, on CPU {s['cpu_client']}; points interleaved, {s['repeat']} round(s), "
          "the best reported.", "",
          "## Reply rate (replies/s) and Net I/O (MB/s, headers included)", "",
          "| conn/s | " + " | ".join(systems) + " | " + " | ".join(f"{x} MB/s" for x in systems) +
          (" | tap / nptl |" if "tap" in systems and "nptl" in systems else " |"),
          "|---:|" + "---:|" * (2 * len(systems)) + ("---:|" if "tap" in systems and "nptl" in systems else "")]
    goal_ok, ratios = True, []
    for r in rates:
        b = {x: best(pts, x, r) for x in systems}
        row = [str(r)] + [fmt(b[x]["reply_rate"]) if b[x] else "—" for x in systems]
        row += [fmt(b[x]["mbps"], 2) if b[x] else "—" for x in systems]
        if "tap" in b and "nptl" in b:
            if b["tap"] and b["nptl"] and b["nptl"]["reply_rate"] > 0:
                q = b["tap"]["reply_rate"] / b["nptl"]["reply_rate"]
                ratios.append(q)
                goal_ok &= q >= 0.97
                row.append(f"{q:.3f}")
            else:
                goal_ok = False
                row.append("—")
        md.append("| " + " | ".join(row) + " |")
    md += ["", "## Errors and connection time", "",
           "| conn/s | system | replies | errors | mean connection ms | server CPU s | ok |", "|---:|---|---:|---|---:|---:|---|"]
    for r in rates:
        for x in systems:
            b = best(pts, x, r)
            if not b:
                continue
            errs = ", ".join(f"{k} {v}" for k, v in sorted(b["errors"].items()) if v and k != "total") or "none"
            md.append(f"| {r} | {x} | {b['replies']:,} | {errs} | {fmt(b.get('connection_ms'), 2)} | "
                      f"{fmt(b.get('server_cpu_s'), 2)} | {'yes' if b['ok'] else '; '.join(b['problems'])} |")
    if ratios:
        md += ["", "## The goal", "",
               f"- TAP >= NPTL at every rate (ratios within 3 % of 1.0 count as equal on this noisy VM): "
               f"{'met' if goal_ok else 'NOT met'}; tap / nptl {min(ratios):.3f}–{max(ratios):.3f}."]
    md += ["", f"![reply rate and MB/s against the connection rate](../docs/figures/{os.path.basename(doc['png'])})",
           ""]
    return "\n".join(md), goal_ok


def plot(doc, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("fig7: no matplotlib: no plot")
        return False
    s = doc["settings"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for x in s["systems"]:
        pts = [best(doc["points"], x, r) for r in s["rates"]]
        xs = [r for r, p in zip(s["rates"], pts) if p]
        a1.plot(xs, [p["reply_rate"] for p in pts if p], marker="o", label=x)
        a2.plot(xs, [p["mbps"] for p in pts if p], marker="o", label=x)
    a1.set(xlabel="connections/s offered", ylabel="replies/s", title="Reply rate")
    a2.set(xlabel="connections/s offered", ylabel="MB/s", title="Net I/O")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend()
    fig.suptitle(f"TAP Fig. 7 analogue: {s['size']:,}-byte file, {s['buf']}-byte I/O, thread per connection")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    return True


def prepare(args, name):
    """The binaries both harnesses run ({name: path}), or an exit status when
    one is missing (SKIP under --smoke); pins this script to the client CPU
    and makes SIGTERM end the run like Ctrl-C."""
    # Absolute: the servers run in directories of their own (web_bench.Server).
    bins = {"smallserver": os.path.abspath(os.path.join(args.build, "bench", "tap", "smallserver")),
            "weft-run": wb.weft_bins(args.build)["weft-run"]}
    missing = [n for n, p in bins.items() if not os.access(p, os.X_OK)]
    if not shutil.which("httperf"):
        missing.append("httperf")
    if missing:
        log(f"{name}: missing {', '.join(missing)} (make build; apt-get install httperf)")
        return SKIP if args.smoke else 1
    signal.signal(signal.SIGTERM, wb.on_sigterm)
    os.sched_setaffinity(0, {args.cpu_client})
    return bins


def write_outputs(doc, md, args, plot_fn, name):
    """--json, the Markdown report beside it (also printed), and the plot."""
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    md_path = os.path.splitext(args.json)[0] + ".md"
    with open(md_path, "w") as f:
        f.write(md)
    print(md)
    plotted = plot_fn(doc, args.png)
    log(f"{name}: wrote {args.json}, {md_path}" + (f", {args.png}" if plotted else ""))


def main(argv=None):
    args = parse_args(argv)
    bins = prepare(args, "fig7")
    if isinstance(bins, int):
        return bins
    root = tempfile.mkdtemp(prefix="tap-fig7-root-")
    expected = bytes((i * 131 + 7) % 251 for i in range(args.size))
    with open(os.path.join(root, FILE), "wb") as f:
        f.write(expected)
    points, t0 = [], time.monotonic()
    total = len(args.rates) * len(args.systems) * args.repeat
    log(f"fig7: {', '.join(args.systems)} at {', '.join(map(str, args.rates))} conn/s, {args.duration} s each, "
        f"{args.repeat} round(s): {total} points, about {total * (args.duration + 4) / 60:.1f} minutes")
    try:
        k = 0
        for rnd in range(args.repeat):
            for i, rate in enumerate(args.rates):
                order = args.systems[(i + rnd) % len(args.systems):] + args.systems[:(i + rnd) % len(args.systems)]
                for system in order:
                    kb.wait_quiet([args.cpu_server, args.cpu_client], args.quiet_wait)
                    rec = measure(system, rate, args, bins, root, expected)
                    rec["round"] = rnd + 1
                    points.append(rec)
                    k += 1
                    log(f"fig7: [{time.monotonic() - t0:.0f} s, {k}/{total}] {system} {rate} conn/s: "
                        f"{fmt(rec.get('reply_rate'))} replies/s, {fmt(rec.get('mbps'), 2)} MB/s, errors "
                        f"{rec.get('errors', {}).get('total', '—')}" +
                        ("" if rec["ok"] else f" -- {'; '.join(rec['problems'])}"))
    except KeyboardInterrupt:
        log("fig7: interrupted: writing what was measured")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "machine": kb.machine_line(),
           "settings": {"systems": args.systems, "rates": args.rates, "duration": args.duration,
                        "timeout": args.timeout, "size": args.size, "buf": args.buf, "repeat": args.repeat, "tap": args.tap,
                        "cpu_server": args.cpu_server, "cpu_client": args.cpu_client},
           "png": args.png, "points": points}
    md, goal_ok = render(doc)
    doc["goal_met"] = goal_ok
    write_outputs(doc, md, args, plot, "fig7")
    if args.smoke:
        bad = [p for p in points if not p["ok"]]
        want = len(args.rates) * len(args.systems) * args.repeat
        if bad or len(points) != want or any(p.get("replies", 0) == 0 for p in points):
            log(f"fig7: smoke: {len(bad)} bad points of {len(points)} (want {want} good, each with replies)")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
