#!/usr/bin/env python3
"""StagedServer's Fig. 6 on this machine: the staged web server (weft-staged)
against a thread-pool server — an accept thread and 256 workers — on NPTL
(weft-pool) and on weft threads (the same binary under weft-run,
pool-weft), in one run of the web harness (bench/web/web_bench.py: the
EuroSys'07 workload, httperf sessions at a sweep of rates, every reply
verified, then wrk at saturation).

The paper (Larus & Parkes §5.1): the staged server was 6 % slower than the
pool at light load and 13 % faster at heavy load; its latency grew 2.3x
from light to heavy load, the pool's 45x. The goal here: no light-load
loss, >= 13 % ahead at heavy load.

    python3 bench/stage/fig6.py [--build build] [--out-dir results] [--quick]

Writes OUT/fig6.json (the figures and ratios), OUT/fig6.md and, when
matplotlib is there, OUT/fig6.png; the harness's own records go to
OUT/fig6-web/. Light load is the lowest rate, heavy the highest rate and
wrk's saturation run.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The paper's pool has 256 workers; with keep-alive sessions a worker holds
# its connection while it idles, so the 4,096 of servers.json's pool (as
# Apache's) is shown too.
COMMON = ["--quiet", "--max-requests", "1000000", "--max-conns", "20000", "--keepalive-timeout", "65"]
SPECS = [
    {"name": "staged", "kind": "staged", "args": ["--vprocs", "1", *COMMON]},
    {"name": "pool-256", "kind": "pool", "args": ["--workers", "256", *COMMON]},
    {"name": "pool-weft-256", "kind": "pool-weft", "args": ["--workers", "256", *COMMON]},
    {"name": "pool-4096", "kind": "pool", "args": ["--workers", "4096", *COMMON]},
    {"name": "pool-weft-4096", "kind": "pool-weft", "args": ["--workers", "4096", *COMMON]},
]
SERVERS = [s["name"] for s in SPECS]
POOLS = SERVERS[1:]
PAPER = {"light_ratio": 0.94, "heavy_ratio": 1.13, "staged_latency_growth": 2.3, "pool_latency_growth": 45.0}


def run_harness(args, web_dir):
    os.makedirs(web_dir, exist_ok=True)
    servers_file = os.path.join(web_dir, "fig6-servers.json")
    with open(servers_file, "w") as f:
        json.dump(SPECS, f, indent=1)
    cmd = [sys.executable, os.path.join(ROOT, "bench", "web", "web_bench.py"), "--build", args.build,
           "--out-dir", web_dir, "--servers-file", servers_file, "--servers", ",".join(SERVERS), "--rates", args.rates,
           "--duration", str(args.duration), "--wrk-repeat", str(args.wrk_repeat)]
    print("fig6:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    with open(os.path.join(web_dir, "web.json")) as f:
        return json.load(f)


def summarize(records, rates):
    out = {}
    for name in SERVERS:
        rows = {r["rate"]: r for r in records if r["server"] == name and r["type"] == "httperf"}
        wrk = next((r for r in records if r["server"] == name and r["type"] == "wrk"), None)
        out[name] = {
            "rates": [{"rate": rate, "reply_rate": rows[rate]["reply_rate"],
                       "response_ms_mean": rows[rate]["response_ms_mean"],
                       "response_ms_p99": rows[rate]["response_ms_p99"], "verified": rows[rate]["verified"]}
                      for rate in rates if rate in rows],
            "wrk": None if not wrk else {"reply_rate": wrk["reply_rate"], "response_ms_mean": wrk["response_ms_mean"],
                                        "response_ms_p99": wrk["response_ms_p99"], "verified": wrk["verified"],
                                        "cpu_us_per_req": wrk.get("server_cpu_us_per_req")},
        }
    return out


def ratio(a, b):
    return round(a / b, 3) if a and b else None


def compare(summary, rates):
    light, heavy = min(rates), max(rates)

    def at(name, rate, key):
        row = next((r for r in summary[name]["rates"] if r["rate"] == rate), None)
        return row[key] if row else None

    cmp = {}
    for pool in POOLS:
        c = {
            "light_reply_ratio": ratio(at("staged", light, "reply_rate"), at(pool, light, "reply_rate")),
            "heavy_reply_ratio": ratio(at("staged", heavy, "reply_rate"), at(pool, heavy, "reply_rate")),
            "light_latency_ratio": ratio(at("staged", light, "response_ms_mean"), at(pool, light, "response_ms_mean")),
            "heavy_latency_ratio": ratio(at("staged", heavy, "response_ms_mean"), at(pool, heavy, "response_ms_mean")),
        }
        ws, wp = summary["staged"]["wrk"], summary[pool]["wrk"]
        if ws and wp:
            c["saturation_reply_ratio"] = ratio(ws["reply_rate"], wp["reply_rate"])
            c["saturation_latency_ratio"] = ratio(ws["response_ms_mean"], wp["response_ms_mean"])
        cmp["staged/" + pool] = c
    growth = {}
    for name in SERVERS:
        lo, hi = at(name, light, "response_ms_mean"), summary[name]["wrk"]
        growth[name] = ratio(hi["response_ms_mean"], lo) if hi and lo else None
    return cmp, growth


def write_md(path, summary, cmp, growth, rates, meta):
    lines = ["# StagedServer Fig. 6 on weft: staged vs thread pool", "",
             f"`{meta['command']}` — {meta['date']}, {meta['host']}", "",
             "| server | " + " | ".join(f"{r}/s replies, mean ms" for r in rates) + " | wrk replies/s, mean ms |",
             "|---|" + "---:|" * (len(rates) + 1)]
    for name in SERVERS:
        cells = [f"{r['reply_rate']:.0f}, {r['response_ms_mean']:.2f}" for r in summary[name]["rates"]]
        w = summary[name]["wrk"]
        cells.append(f"{w['reply_rate']:.0f}, {w['response_ms_mean']:.2f}" if w else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| ratio (staged / pool) | light replies | heavy replies | saturation replies | "
              "light latency | saturation latency |", "|---|---:|---:|---:|---:|---:|"]
    for k, c in cmp.items():
        lines.append(f"| {k} | {c['light_reply_ratio']} | {c['heavy_reply_ratio']} | "
                     f"{c.get('saturation_reply_ratio')} | {c['light_latency_ratio']} | "
                     f"{c.get('saturation_latency_ratio')} |")
    lines += ["", "Latency growth, light rate to saturation (wrk): " +
              ", ".join(f"{k} {v}x" for k, v in growth.items()) +
              f". Paper: staged {PAPER['staged_latency_growth']}x, pool {PAPER['pool_latency_growth']}x; "
              f"replies staged/pool {PAPER['light_ratio']} light, {PAPER['heavy_ratio']} heavy.", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def plot(path, summary, rates):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("fig6: no matplotlib here: no plot (try /usr/bin/python3)")
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for name in SERVERS:
        rs = summary[name]["rates"]
        a.plot([r["rate"] for r in rs], [r["reply_rate"] for r in rs], marker="o", label=name)
        b.plot([r["rate"] for r in rs], [r["response_ms_mean"] for r in rs], marker="o", label=name)
    a.set_xlabel("new sessions / s")
    a.set_ylabel("replies / s")
    b.set_xlabel("new sessions / s")
    b.set_ylabel("mean response time (ms)")
    b.set_yscale("log")
    a.legend()
    a.set_title("throughput")
    b.set_title("latency")
    fig.suptitle("StagedServer Fig. 6 on weft: weft-staged vs a 256-thread pool")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--out-dir", default="results")
    p.add_argument("--rates", default="100,400,800,1200", help="new sessions per second (default 100,400,800,1200)")
    p.add_argument("--duration", type=int, default=8, help="seconds per rate (default 8)")
    p.add_argument("--wrk-repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="rates 100,800, 5 s, one wrk run")
    p.add_argument("--from-json", help="skip the runs: summarize this web.json")
    args = p.parse_args()
    if args.quick:
        args.rates, args.duration, args.wrk_repeat = "100,800", 5, 1
    rates = [int(r) for r in args.rates.split(",")]
    os.makedirs(args.out_dir, exist_ok=True)
    web_dir = os.path.join(args.out_dir, "fig6-web")
    if args.from_json:
        with open(args.from_json) as f:
            records = json.load(f)
    else:
        records = run_harness(args, web_dir)
    summary = summarize(records, rates)
    cmp, growth = compare(summary, rates)
    meta = {"command": "python3 bench/stage/fig6.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": os.uname().nodename,
            "cpus": os.cpu_count()}
    out = {"meta": meta, "paper": PAPER, "rates": rates, "servers": summary, "ratios": cmp,
           "latency_growth": growth}
    with open(os.path.join(args.out_dir, "fig6.json"), "w") as f:
        json.dump(out, f, indent=1)
    write_md(os.path.join(args.out_dir, "fig6.md"), summary, cmp, growth, rates, meta)
    plot(os.path.join(args.out_dir, "fig6.png"), summary, rates)
    with open(os.path.join(args.out_dir, "fig6.md")) as f:
        print(f.read())


if __name__ == "__main__":
    main()
