#!/usr/bin/env python3
"""Render the microbenchmark suite's records as Markdown tables and PNG plots.

  report.py MICRO_JSON [--run RUN_JSON] [--md OUT_MD] [--plots DIR]

MICRO_JSON is the list of records suite.py writes ({"benchmark", "system",
"params", "unit", "median", "min", "max", "repetitions", ...}); RUN_JSON
(default: MICRO_JSON with .run.json) what the run says about itself (machine,
settings, skipped points); either may come from an older run or a fixture.
Each table puts every peer beside weft with the ratio weft/peer, and the goals
of the core and microbenchmark issues are judged from the medians: "met",
"NOT met", or "not judged" when a point is missing. Plots need matplotlib:
without it they are left out with a message, the Markdown is still written.
"""
import argparse
import json
import os
import sys

# Subcommand of the benchmark binaries -> benchmark id of the records.
BENCH_OF = {
    "create_join": "table1.create_join",
    "switch": "table1.switch",
    "cond_pingpong": "table1.cond_pingpong",
    "mutex_uncontended": "table1.mutex_uncontended",
    "mutex_handoff": "table1.mutex_handoff",
    "memory_idle": "memory.idle_thread",
    "producer_consumer": "fig1.producer_consumer",
    "odirect_read": "fig3.odirect_random_read",
    "cache_miss_read": "fig4.cache_miss_read",
    "fork_join": "fork_join.fib_tree",
}
ORDER = ["weft", "weft-linked", "weft-linked-b", "epoll", "st", "nptl", "boost-context", "boost-fiber", "go"]
TABLE1_WHAT = {
    "table1.create_join": "create + join",
    "table1.switch": "switch (yield ping-pong)",
    "table1.cond_pingpong": "condition-variable hand-off",
    "table1.mutex_uncontended": "mutex lock + unlock, uncontended",
    "table1.mutex_handoff": "mutex hand-off (lock, yield, unlock, yield)",
}
# The figures: (benchmark id, x parameter, title, x label, y label, log x, log y, higher is better)
FIGURES = [
    ("fig1.producer_consumer", "threads", "Fig. 1 — producer–consumer", "threads (half producers)",
     "messages / s", True, True, True),
    ("fig2.pipe_tokens", "pipes", "Fig. 2 — tokens through pipes", "pipes", "tokens / s", True, False, True),
    ("fig3.odirect_random_read", "threads", "Fig. 3 — random 4 KiB O_DIRECT reads of a 1 GiB file",
     "concurrent readers", "reads / s", True, False, True),
    ("fig4.cache_miss_read", "miss_rate", "Fig. 4 — 200 readers, buffer-cache miss rate", "miss rate",
     "reads / s", False, True, True),
    ("memory.idle_thread", "threads", "Memory per idle thread", "idle threads", "bytes RSS per thread", True, False,
     False),
    ("stacks.bigstack", "threads", "bigstack (Capriccio §3) — 10 calls of a 1 MB frame per thread", "threads",
     "seconds", True, True, False),
    ("smp.producer_consumer", "threads", "SMP — producer–consumer on 2 CPUs, --vprocs 2", "threads (half producers)",
     "messages / s", True, True, True),
    ("smp.fork_join", "threads", "SMP — fork-join tree of threads computing fib(n), 2 CPUs, --vprocs 2",
     "threads per tree", "ns per thread", True, True, False),
]
# Benchmarks whose weft/peer ratios suite.py also writes into the run's JSON ("ratios").
RATIO_BENCHES = ["smp.producer_consumer", "smp.fork_join"]
# Goals: (label, benchmark, x (None: every point), peer (None: absolute; "every": each peer), "<=" or ">=", bound
# [, the system judged: "weft" unless given])
GOALS = [
    ("core: switch ≤ 10 ns", "table1.switch", None, None, "<=", 10.0),
    ("core: condition-variable hand-off ≤ 15 ns", "table1.cond_pingpong", None, None, "<=", 15.0),
    ("core: condition-variable hand-off ≤ 0.6× State Threads", "table1.cond_pingpong", None, "st", "<=", 0.6),
    ("core: create + join ≤ 60 ns", "table1.create_join", None, None, "<=", 60.0),
    ("core: create + join ≤ 0.5× State Threads", "table1.create_join", None, "st", "<=", 0.5),
    ("core: uncontended mutex ≤ 5 ns", "table1.mutex_uncontended", None, None, "<=", 5.0),
    ("core: idle thread at 10^6 ≤ 4.5 KB", "memory.idle_thread", 1_000_000, None, "<=", 4500.0),
    ("switch ≤ 0.4× State Threads", "table1.switch", None, "st", "<=", 0.4),
    ("switch ≤ 1.5× Boost.Context's raw switch", "table1.switch", None, "boost-context", "<=", 1.5),
    ("create + join ≤ 0.4× State Threads", "table1.create_join", None, "st", "<=", 0.4),
    ("Fig. 1 producer–consumer ≥ every peer, 2 to 65,536 threads", "fig1.producer_consumer", None, "every", ">=",
     1.0),
    ("Fig. 2 ≥ 0.95× the epoll loop at every pipe count", "fig2.pipe_tokens", None, "epoll", ">=", 0.95),
    ("Fig. 3 ≥ NPTL at every concurrency", "fig3.odirect_random_read", None, "nptl", ">=", 1.0),
    ("Fig. 4 at 0 % misses ≥ 0.95× NPTL", "fig4.cache_miss_read", 0.0, "nptl", ">=", 0.95),
    ("idle memory per thread ≤ State Threads'", "memory.idle_thread", None, "st", "<=", 1.0),
    ("linked stacks: idle thread at 10^6 ≤ 2 KB", "memory.idle_thread", 1_000_000, None, "<=", 2048.0,
     "weft-linked"),
    ("linked stacks: bigstack at 800 threads ≥ 3× faster than fixed", "stacks.bigstack", 800, "weft", "<=", 1 / 3,
     "weft-linked"),
    ("linked stacks, checks at stackcheck's checkpoints: hot split ≥ 0.95× fixed", "stacks.hotsplit", None, "weft",
     "<=", 1 / 0.95, "weft-linked-b"),
    ("smp fig1: weft ≥ every peer at every thread count", "smp.producer_consumer", None, "every", ">=", 1.0),
    ("fork_join: weft ≥ Go", "smp.fork_join", None, "go", "<=", 1.0),
]
X_OF = {f[0]: f[1] for f in FIGURES}


def fmt(v, unit):
    if v is None:
        return "—"
    if unit.endswith("/s"):
        if v >= 1e6:
            return f"{v / 1e6:.2f}M"
        if v >= 1e3:
            return f"{v / 1e3:.1f}k"
        return f"{v:.0f}"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_ratio(q):
    return f"{q:.2f}" if q >= 0.1 else f"{q:.3f}" if q >= 0.001 else f"{q:.1e}"


def ratios(records, bids):
    """weft/peer of the medians at every point of the benchmarks `bids`:
    {bid: [{x parameter: x, "peer", "ratio", "better": "higher"|"lower"}]}
    (a ratio > 1 is weft ahead for a rate, behind for a time)."""
    R = Records(records)
    higher = {f[0]: f[7] for f in FIGURES}
    out = {}
    for bid in bids:
        xp, rows = X_OF.get(bid), []
        for x in R.xs(bid):
            w = R.get(bid, "weft", x)
            if w is None:
                continue
            for p in R.systems(bid):
                r = R.get(bid, p, x)
                if p.startswith("weft") or r is None or not r["median"]:
                    continue
                row = {xp: x} if xp else {}
                row.update(peer=p, ratio=round(w["median"] / r["median"], 4),
                           better="higher" if higher.get(bid, True) else "lower")
                rows.append(row)
        if rows:
            out[bid] = rows
    return out


def fmt_x(x):
    if isinstance(x, float):
        return f"{x:.0%}" if x < 1 or x == 1.0 else f"{x:g}"
    return f"{x:,}"


class Records:
    def __init__(self, records):
        self.recs = [r for r in records if isinstance(r, dict) and "benchmark" in r and "system" in r]

    def of(self, bid):
        return [r for r in self.recs if r["benchmark"] == bid]

    def systems(self, bid):
        present = {r["system"] for r in self.of(bid)}
        return [s for s in ORDER if s in present] + sorted(present - set(ORDER))

    def xs(self, bid):
        xp = X_OF.get(bid)
        if not xp:
            return [None]
        return sorted({r["params"].get(xp) for r in self.of(bid) if r["params"].get(xp) is not None})

    def get(self, bid, sysid, x=None):
        xp = X_OF.get(bid)
        for r in self.of(bid):
            if r["system"] == sysid and (xp is None or x is None or r["params"].get(xp) == x):
                return r
        return None


def table(R, bids, title, better_low, first_col):
    """Rows: the x values of one benchmark (or several benchmarks without x)."""
    systems = []
    for b in bids:
        systems += [s for s in R.systems(b) if s not in systems]
    systems = [s for s in ORDER if s in systems] + [s for s in systems if s not in ORDER]
    if not systems:
        return []
    base = "weft" if "weft" in systems else None
    peers = [s for s in systems if s != base]
    unit = R.of(bids[0])[0]["unit"]
    cols = [first_col] + systems + ([f"weft/{p}" for p in peers] if base else [])
    lines = [f"### {title}", "", "| " + " | ".join(cols) + " |", "|" + "|".join(["---"] + ["---:"] * (len(cols) - 1)) + "|"]
    for b in bids:
        for x in R.xs(b):
            name = TABLE1_WHAT.get(b, b) if x is None else fmt_x(x)
            cells = [name]
            med = {}
            for s in systems:
                r = R.get(b, s, x)
                if r is None:
                    cells.append("—")
                    continue
                med[s] = r["median"]
                cell = fmt(r["median"], unit)
                if r.get("disturbed_values"):
                    cell += "†"
                if "actual_threads" in r["params"]:  # fewer could be made than asked for
                    cell += f" (only {r['params']['actual_threads']:,})"
                cells.append(cell)
            if base:
                for p in peers:
                    cells.append(fmt_ratio(med[base] / med[p]) if base in med and p in med and med[p] else "—")
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Unit: {unit}; medians (min, max and every value are in the JSON). "
              + ("Ratio < 1: weft is faster / smaller." if better_low else "Ratio > 1: weft does more per second.")
              + " — : not measured (see the notes).", ""]
    return lines


# The blocking graph's cost (suite.py's graph section): per benchmark, the
# settings as (params graph, params depth, column title).
GRAPH_WHAT = {"graph.cond_pingpong": "condition-variable hand-off (1 park per op)",
              "graph.switch": "switch (1 yield per op)",
              "graph.create_join": "create + join (start, exit, join)"}
GRAPH_COLS = [("1", 8, "every park, depth 8"), ("1", 1, "every park, depth 1"), ("20", 8, "1 park in 20, depth 8")]


def graph_table(R):
    """ns per operation with the blocking graph off and on, and the difference."""
    bids = [b for b in GRAPH_WHAT if R.of(b)]
    if not bids:
        return []

    def get(bid, graph, depth=None):
        for r in R.of(bid):
            p = r["params"]
            if p.get("graph") == graph and (depth is None or p.get("depth") == depth):
                return r
        return None

    cols = ["benchmark", "off"] + [c[2] for c in GRAPH_COLS]
    lines = ["### Blocking graph — cost per operation (ns; weft-micro, WEFT_GRAPH / WEFT_GRAPH_DEPTH)", "",
             "| " + " | ".join(cols) + " |", "|" + "|".join(["---"] + ["---:"] * (len(cols) - 1)) + "|"]
    for b in bids:
        off = get(b, "off")
        cells = [GRAPH_WHAT[b], "—" if off is None
                 else fmt(off["median"], "ns") + ("†" if off.get("disturbed_values") else "")]
        for graph, depth, _ in GRAPH_COLS:
            r = get(b, graph, depth)
            if r is None:
                cells.append("—")
                continue
            cell = fmt(r["median"], "ns") + ("†" if r.get("disturbed_values") else "")
            if off is not None and off["median"]:
                d = r["median"] - off["median"]
                cell += f" ({d:+.1f} ns, {d / off['median']:+.0%})"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Medians of interleaved repetitions; in parentheses the difference from off. Every park records an "
              "edge at WEFT_GRAPH=1 (the resource-aware policy forces it); at 20, one in 20 does.", ""]
    return lines


def per_second(R, bid, what):
    """A line under a table of ns per item: the medians as items per second."""
    cells = []
    for x in R.xs(bid):
        got = [f"{s} {fmt(1e9 / r['median'], '/s')}" for s in R.systems(bid)
               for r in [R.get(bid, s, x)] if r is not None and r["median"]]
        if got:
            cells.append(f"{fmt_x(x)}: " + ", ".join(got))
    return [f"The same as {what} per second (10^9 / the median): " + "; ".join(cells) + ".", ""] if cells else []


def judge(R, goal):
    """(verdict, detail) of one goal from the medians."""
    label, bid, x, peer, op, bound = goal[:6]
    subject = goal[6] if len(goal) > 6 else "weft"
    checks, missing = [], []  # checks: (ok, text, how far from the bound: > 1 is short)
    for xv in (R.xs(bid) if x is None else [x]):
        where = "" if xv is None else fmt_x(xv) + ": "
        w = R.get(bid, subject, xv)
        if w is None:
            missing.append(f"{where}no {subject}")
            continue
        if peer is None:
            v, text = w["median"], f"{where}{fmt(w['median'], w['unit'])} {w['unit']}"
        else:
            for p in ([p for p in R.systems(bid) if not p.startswith("weft")] if peer == "every" else [peer]):
                r = R.get(bid, p, xv)
                if r is None or not r["median"]:
                    if peer != "every":
                        missing.append(f"{where}no {p}")
                    continue
                q = w["median"] / r["median"]
                checks.append((q <= bound if op == "<=" else q >= bound, f"{where}{fmt_ratio(q)}× {p}",
                               q / bound if op == "<=" else bound / q))
            continue
        checks.append((v <= bound if op == "<=" else v >= bound, text, v / bound if op == "<=" else bound / v))
    if not checks:
        return "not judged", "no results" + (f" ({', '.join(missing)})" if missing else "")
    short = [t for ok, t, _ in checks if not ok]
    if short:
        verdict, detail = "NOT met", "short at " + ", ".join(short)
    else:
        verdict = "met" if not missing else "met where measured"
        worst = max(checks, key=lambda c: c[2])
        detail = worst[1] if len(checks) == 1 else f"{len(checks)} points, the closest {worst[1]}"
    if missing:
        detail += "; not measured: " + ", ".join(missing)
    return verdict, detail


def markdown(records, run):
    R = Records(records)
    run = run or {}
    lines = ["# weft microbenchmarks (Capriccio §2) against their peers", ""]
    lines += [f"- {h}" for h in run.get("header", [])]
    if run.get("total_seconds") is not None:
        lines.append(f"- Total run time: {run['total_seconds']:.0f} s"
                     + (" (" + ", ".join(f"{k} {v:.0f} s" for k, v in run.get("section_seconds", {}).items()) + ")"
                        if run.get("section_seconds") else "") + ".")
    lines.append("")

    lines += ["## Goals", ""]
    unrun = 0
    for g in GOALS:
        if R.recs and not R.of(g[1]):  # a part of the suite (--only): its section's goals are not listed
            unrun += 1
            continue
        verdict, detail = judge(R, g)
        lines.append(f"- {g[0]}: **{verdict}**" + (f" — {detail}" if detail else ""))
    if unrun:
        lines.append(f"- {unrun} other goal(s) not judged: their benchmarks were not run (suite.py --only)")
    lines.append("")

    lines += ["## Tables", ""]
    t1 = [b for b in TABLE1_WHAT if R.of(b)]
    if t1:
        lines += table(R, t1, "Table 1 — thread primitives (ns per operation)", True, "benchmark")
    for bid, xp, title, xlabel, ylabel, _, _, higher in FIGURES:
        if R.of(bid):
            lines += table(R, [bid], title, not higher, xlabel)
            if bid == "smp.fork_join":
                lines += per_second(R, bid, "threads")
    if R.of("stacks.hotsplit"):
        lines += table(R, ["stacks.hotsplit"], "Linked stacks — the hot split (ns per call, mean of 64 depths)", True,
                       "benchmark")
    lines += graph_table(R)
    lines.append("† a value in the median came from a run whose process got less than 90 % of its CPU after three "
                 "attempts (the machine is shared)" + ("; in the SMP tables, from a run during which other processes "
                                                       "kept taking part of the two CPUs (others_cpu in the JSON)"
                                                       if any(r["benchmark"].startswith("smp.") for r in R.recs)
                                                       else "") + ".")
    lines.append("")

    what = []
    for r in R.recs:
        op = r["params"].get("op") or r["params"].get("park") or r["params"].get("sync")
        if op:
            what.append(f"{r['benchmark']}: {r['system']}: {op}")
    if what:
        lines += ["## What each system runs", ""]
        lines += [f"- {w}" for w in dict.fromkeys(what)]
        lines.append("")
    notes = run.get("notes", [])
    skipped = run.get("skipped", [])
    failures = run.get("failures", [])
    if notes or skipped or failures:
        lines += ["## Notes, skipped and failed points", ""]
        lines += [f"- {n}" for n in notes]
        lines += [f"- skipped: {s}" for s in skipped]
        lines += [f"- FAILED: {f}" for f in failures]
        lines.append("")
    return "\n".join(lines) + "\n"


def plots(records, out_dir, machine=""):
    """PNG plots of the figures; returns (paths, message or None)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return [], f"plots skipped: matplotlib is not installed ({e}; Debian: python3-matplotlib)"
    R = Records(records)
    paths = []
    for bid, xp, title, xlabel, ylabel, logx, logy, _ in FIGURES:
        if not R.of(bid):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        for s in R.systems(bid):
            pts = sorted((r["params"][xp], r["median"], r["min"], r["max"]) for r in R.of(bid)
                         if r["system"] == s and r["params"].get(xp) is not None)
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", markersize=4, capsize=2,
                        linewidth=2.2 if s == "weft" else 1.2, label=s)
        if logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        elif bid != "memory.idle_thread":
            ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=11)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        if machine:
            fig.text(0.01, 0.01, machine, fontsize=6, alpha=0.7)
        fig.tight_layout()
        path = os.path.join(out_dir, bid.replace(".", "_") + ".png")
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths, None


def write(records, run, md_path, plot_dir):
    """Markdown to md_path and plots to plot_dir (None: no plots); returns (markdown, plot paths)."""
    machine = next((h for h in (run or {}).get("header", []) if h.startswith("Machine:")), "")
    paths, msg = ([], None) if plot_dir is None else plots(records, plot_dir, machine)
    md = markdown(records, run)
    if paths:
        md += "## Plots\n\n" + "".join(f"![{os.path.basename(p)}]({os.path.relpath(p, os.path.dirname(md_path) or '.')})\n"
                                       for p in paths) + "\n"
    if msg:
        md += f"{msg}\n"
    d = os.path.dirname(md_path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(md_path, "w") as f:
        f.write(md)
    return md, paths


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="the records (results/micro.json)")
    ap.add_argument("--run", default=None, help="the run's description (default: JSON with .run.json)")
    ap.add_argument("--md", default=None, help="Markdown output (default: JSON with .md)")
    ap.add_argument("--plots", default=None, help="directory for the PNG plots (default: next to the Markdown)")
    ap.add_argument("--no-plots", action="store_true", help="write no plots")
    args = ap.parse_args()
    try:
        with open(args.json) as f:
            records = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"report.py: cannot read {args.json}: {e}", file=sys.stderr)
        return 2
    if not isinstance(records, list):
        print(f"report.py: {args.json}: expected a list of records", file=sys.stderr)
        return 2
    stem = os.path.splitext(args.json)[0]
    run_path = args.run or stem + ".run.json"
    run = {}
    if os.path.exists(run_path):
        with open(run_path) as f:
            run = json.load(f)
    md_path = args.md or stem + ".md"
    plot_dir = None if args.no_plots else (args.plots or os.path.dirname(md_path) or ".")
    if plot_dir:
        os.makedirs(plot_dir, exist_ok=True)
    md, paths = write(records, run, md_path, plot_dir)
    print(f"report.py: wrote {md_path}" + (f" and {len(paths)} plots in {plot_dir}" if paths else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
