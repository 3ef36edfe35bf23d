#!/usr/bin/env python3
"""Tuning sweeps like the EuroSys'07 study's Figs. 1-6: one server, a grid of
connections x workers (or processes, or writers), each configuration run on
the web workload (web_bench.py: httperf at a sweep of rates, verification,
a wrk peak), drawn as throughput against the offered rate, one line per
configuration, with the wrk peaks beside.

    python3 bench/web/tune.py --server userver --conns 10000,30000 --workers 1,2,4
    python3 bench/web/tune.py --server knot-b --conns 1000,5000 --workers 4,16 --quick

What "connections" and "workers" mean per server (the study's knobs):
    knot-c, knot-nb, knot-b, knot-uring  --threads C (accept-loop threads: the connections
                                         served at once), --workers W (offload pool)
    userver, userver-b                   --max-conns C, --procs W (SYMPED processes)
    userver-shared                       --max-conns C, --procs W, --shared
    watpipe                              --max-conns C, --writers W (stage-4 threads)
Each configuration is named like the study's lines: userver-30K-2p,
knot-b-20K-50w, watpipe-20K-5w.

Writes OUT (default results/tune-SERVER/): web.json, web.run.json, web.md
(web_bench's outputs over the configurations) and tune.png. Other options go
to web_bench.py (--rates, --duration, --quick, --fileset, --size-mb, ...).
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import web_bench as wb  # noqa: E402

# server -> (kind, fixed flags, connections flag, workers flag, workers suffix)
SERVERS = {
    "knot-c": ("knot", ["--mode", "c"], "--threads", "--workers", "w"),
    "knot-nb": ("knot", ["--mode", "nb"], "--threads", "--workers", "w"),
    "knot-b": ("knot", ["--mode", "b"], "--threads", "--workers", "w"),
    "knot-uring": ("knot", ["--mode", "uring"], "--threads", "--workers", "w"),
    "userver": ("userver", [], "--max-conns", "--procs", "p"),
    "userver-b": ("userver", ["--blocking-socket"], "--max-conns", "--procs", "p"),
    "userver-shared": ("userver", ["--shared"], "--max-conns", "--procs", "p"),
    "watpipe": ("watpipe", [], "--max-conns", "--writers", "w"),
}
# Flags every configuration gets: the harness's (see servers.json).
COMMON = {"knot": ["--quiet", "--max-requests", "1000000", "--keepalive-timeout", "65"],
          "userver": ["--quiet", "--max-requests", "1000000", "--keepalive-timeout", "65"],
          "watpipe": ["--quiet", "--max-requests", "1000000", "--keepalive-timeout", "65"]}


def positive_list(text):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}")
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"want positive integers, got {text!r}")
    return vals


def short(n):
    return f"{n // 1000}K" if n >= 1000 and n % 1000 == 0 else str(n)


def configurations(server, conns, workers):
    """servers.json entries for the grid, named like the study's lines."""
    kind, fixed, cflag, wflag, suffix = SERVERS[server]
    out = []
    for c in conns:
        for w in workers:
            args = fixed + COMMON[kind] + [cflag, str(c), wflag, str(w)]
            if kind == "knot":
                args += ["--max-conns", str(max(c, 10000))]  # --threads caps the connections; 503 never does
            out.append({"name": f"{server}-{short(c)}-{w}{suffix}", "kind": kind, "args": args})
    return out


def plot(runs, names, server, path):
    """Throughput vs offered rate per configuration, and the wrk peaks.
    Returns None or why there is no plot."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"matplotlib is not importable by {sys.executable}: no plot"
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    for name in names:
        pts = sorted((r["rate"], r["mbps"]) for r in runs
                     if r["server"] == name and r["type"] == "httperf" and r["verified"] and r["mbps"] is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xlabel("new sessions per second")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_title(f"Tuning {server} (verified runs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    peaks = []
    for name in names:
        w = [r for r in runs if r["server"] == name and r["type"] == "wrk" and r["verified"]]
        peaks.append(w[0]["reply_rate"] if w else 0)
    bx.barh(range(len(names)), peaks, color="tab:blue")
    bx.set_yticks(range(len(names)))
    bx.set_yticklabels(names, fontsize=7)
    bx.invert_yaxis()
    bx.set_xlabel("wrk peak (replies/s)")
    bx.set_title("closed-loop peak")
    bx.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--server", required=True, choices=sorted(SERVERS))
    ap.add_argument("--conns", type=positive_list, required=True, help="connections, comma-separated")
    ap.add_argument("--workers", type=positive_list, required=True,
                    help="workers / processes / writers, comma-separated")
    ap.add_argument("--out-dir", help="default results/tune-SERVER")
    ap.add_argument("--dry-run", action="store_true", help="print the configurations and exit")
    args, rest = ap.parse_known_args(argv)
    if "--servers" in rest or "--servers-file" in rest or "--smoke" in rest:
        ap.error("--servers, --servers-file and --smoke are chosen by tune.py")
    configs = configurations(args.server, args.conns, args.workers)
    if args.dry_run:
        json.dump(configs, sys.stdout, indent=1)
        print()
        return 0
    out = args.out_dir or os.path.join("results", f"tune-{args.server}")
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="tune-servers-", delete=False) as f:
        json.dump(configs, f)
        servers_file = f.name
    try:
        rc = wb.main(["--servers-file", servers_file, "--servers", ",".join(c["name"] for c in configs),
                      "--out-dir", out] + rest)
    finally:
        os.unlink(servers_file)
    try:
        with open(os.path.join(out, "web.json")) as f:
            runs = json.load(f)
    except (OSError, ValueError):
        return rc or 1
    why = plot(runs, [c["name"] for c in configs], args.server, os.path.join(out, "tune.png"))
    wb.log(f"tune: {why}" if why else f"tune: wrote {os.path.join(out, 'tune.png')}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
