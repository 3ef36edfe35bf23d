#!/usr/bin/env python3
"""StagedServer's Fig. 8 on weft: the publish-subscribe server's response
time against the number of clients, threaded against staged, in one run
(`make bench-staged`); then the staged form with its match stage's cohorts
capped (the paper capped them at 4, 10 and 20).

Both forms run the same binary (build/servers/pubsub/weft-pubsub) on the
same subscriptions and event streams; the points are interleaved, each
repeated REPS times (median). Writes OUT_DIR/pubsub.json, pubsub.md and,
with matplotlib, pubsub.png. Python 3 standard library otherwise.

The paper (4 processors, 10^6 subscriptions): staged 0.47 ms against
threaded 0.57 ms at its largest load (21 % better); capping cohorts at
4 / 10 / 20 cost 21 / 17 / 9 %.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_point(binary, form, clients, args, max_cohort=0):
    cmd = [binary, "--form", form, "--clients", str(clients), "--subs", str(args.subs),
           "--events", str(args.events), "--vprocs", str(args.vprocs), "--json"]
    if max_cohort:
        cmd += ["--max-cohort", str(max_cohort)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"pubsub_bench: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    rec["command"] = " ".join(cmd)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out-dir", default="results")
    ap.add_argument("--subs", type=int, default=1000000, help="subscriptions (default 10^6)")
    ap.add_argument("--events", type=int, default=20000,
                    help="events per point (default 2*10^4: at ~0.5 ms each on one client, 10^5 would take a minute a point)")
    ap.add_argument("--vprocs", type=int, default=2, help="vprocs (default 2: this machine's CPUs)")
    ap.add_argument("--clients", default="1,4,16,64", help="client counts (comma-separated)")
    ap.add_argument("--cohorts", default="4,10,20", help="cohort caps for the staged form at the most clients")
    ap.add_argument("--reps", type=int, default=2, help="repetitions per point (median)")
    ap.add_argument("--quick", action="store_true", help="10^5 subscriptions, 2*10^4 events, 1 repetition")
    args = ap.parse_args()
    if args.quick:
        args.subs, args.events, args.reps = 100000, 5000, 1
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    binary = os.path.join(args.build, "servers", "pubsub", "weft-pubsub")
    if not os.access(binary, os.X_OK):
        sys.exit(f"pubsub_bench: {binary} not built (make build)")
    clients = [int(c) for c in args.clients.split(",") if c]
    caps = [int(c) for c in args.cohorts.split(",") if c]

    points = [(form, c, 0) for c in clients for form in ("threaded", "staged")]
    points += [("staged", max(clients), cap) for cap in caps]
    total, t0, recs = len(points) * args.reps, time.monotonic(), {}
    for rep in range(args.reps):
        for i, (form, c, cap) in enumerate(points):
            r = run_point(binary, form, c, args, cap)
            recs.setdefault((form, c, cap), []).append(r)
            done = rep * len(points) + i + 1
            log(f"[{done}/{total} {time.monotonic() - t0:.0f}s] {form} clients={c}"
                f"{' cohort<=' + str(cap) if cap else ''}: mean {r['mean_response_ms']:.3f} ms, "
                f"p99 {r['p99_response_ms']:.3f} ms, {r['events_per_s']:.0f} events/s")

    def med(form, c, cap, key):
        return statistics.median(r[key] for r in recs[(form, c, cap)])

    rows = []
    for c in clients:
        th, st = med("threaded", c, 0, "mean_response_ms"), med("staged", c, 0, "mean_response_ms")
        rows.append({"clients": c, "threaded_ms": th, "staged_ms": st, "staged_better_pct": 100 * (th - st) / th,
                     "threaded_p99_ms": med("threaded", c, 0, "p99_response_ms"),
                     "staged_p99_ms": med("staged", c, 0, "p99_response_ms"),
                     "threaded_events_per_s": med("threaded", c, 0, "events_per_s"),
                     "staged_events_per_s": med("staged", c, 0, "events_per_s")})
    top = max(clients)
    uncapped = med("staged", top, 0, "mean_response_ms")
    capped = [{"max_cohort": cap, "mean_ms": med("staged", top, cap, "mean_response_ms"),
               "cost_pct": 100 * (med("staged", top, cap, "mean_response_ms") - uncapped) / uncapped} for cap in caps]
    out = {"run": {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "subs": args.subs, "events": args.events,
                   "vprocs": args.vprocs, "reps": args.reps, "command": " ".join(sys.argv),
                   "seconds": round(time.monotonic() - t0, 1)},
           "rows": rows, "cohort_caps": capped,
           "records": [dict(r, form=f, clients=c, max_cohort=cap) for (f, c, cap), rs in recs.items() for r in rs]}
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "pubsub.json"), "w") as f:
        json.dump(out, f, indent=1)
    md = ["# Publish-subscribe: threaded against staged (StagedServer Fig. 8)", "",
          f"{args.subs:,} subscriptions, {args.events:,} events per point, {args.vprocs} vprocs, "
          f"median of {args.reps}; `{out['run']['command']}`", "",
          "| clients | threaded mean (ms) | staged mean (ms) | staged better by | threaded p99 (ms) | staged p99 (ms) "
          "| threaded events/s | staged events/s |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['clients']} | {r['threaded_ms']:.3f} | {r['staged_ms']:.3f} | {r['staged_better_pct']:+.1f} % "
                  f"| {r['threaded_p99_ms']:.2f} | {r['staged_p99_ms']:.2f} "
                  f"| {r['threaded_events_per_s']:,.0f} | {r['staged_events_per_s']:,.0f} |")
    md += ["", f"Cohort caps on the staged match stage at {top} clients (uncapped {uncapped:.3f} ms):", "",
           "| max cohort | mean (ms) | cost |", "|---:|---:|---:|"]
    for c in capped:
        md.append(f"| {c['max_cohort']} | {c['mean_ms']:.3f} | {c['cost_pct']:+.1f} % |")
    with open(os.path.join(args.out_dir, "pubsub.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(clients, [r["threaded_ms"] for r in rows], "o-", label="threaded")
        ax.plot(clients, [r["staged_ms"] for r in rows], "s-", label="staged")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("clients")
        ax.set_ylabel("mean response time (ms)")
        ax.set_title("weft-pubsub (StagedServer Fig. 8)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out_dir, "pubsub.png"), dpi=120)
        log(f"pubsub_bench: wrote {args.out_dir}/pubsub.png")
    except ImportError:
        log("pubsub_bench: matplotlib is not importable: no plot")


if __name__ == "__main__":
    main()
