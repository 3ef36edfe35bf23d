#!/usr/bin/env python3
"""The report generator renders a fixture (bench/micro/testdata): the tables
put each peer beside weft with the right ratio, the goals are judged from the
medians (met, NOT met with where, not judged without data), the SMP section's
tables, goals and ratios, bad input is a clear error, and — with `plots` —
one PNG plot per figure is drawn.

usage: report_test.py [tables|plots]   (plots exits 77 without matplotlib)
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402

FIXTURE = os.path.join(HERE, "testdata", "micro-fixture.json")
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def goal_line(md, start):
    lines = [ln for ln in md.splitlines() if ln.startswith("- " + start)]
    return lines[0] if lines else ""


def row(md, first_cell, after=None):
    """The table row whose first cell is first_cell (in the table under `after`)."""
    seen = after is None
    for ln in md.splitlines():
        if after and ln.startswith("### ") and after in ln:
            seen = True
        elif ln.startswith("### "):
            seen = seen and after is None
        if seen and ln.startswith(f"| {first_cell} |"):
            return [c.strip() for c in ln.strip("|").split("|")]
    return []


def tables():
    with open(FIXTURE) as f:
        records = json.load(f)
    with open(FIXTURE.replace(".json", ".run.json")) as f:
        run = json.load(f)
    md = report.markdown(records, run)

    # Table 1: columns weft, st, nptl, boost-context, go, then weft/peer.
    r = row(md, "switch (yield ping-pong)")
    expect(r[1:3] == ["8.00", "150"], f"switch row starts weft 8.00, st 150: {r}")
    expect(r[6] == "0.053", f"switch weft/st is 8/150 = 0.053: {r}")
    expect(r[8] == "2.00", f"switch weft/boost-context is 2.00: {r}")
    expect(row(md, "create + join")[1] == "40.0†", "a disturbed median is marked †")
    expect(row(md, "mutex hand-off (lock, yield, unlock, yield)")[4] == "—",
           "boost-context has no mutex hand-off: —")
    # Figures: rates in k/M, higher is better, missing points are —.
    r = row(md, "65,536", "Fig. 1")
    expect(r[1] == "9.00M" and "—" in r, f"fig1 at 65,536: weft 9.00M, nptl —: {r}")
    r = row(md, "1,000,000", "Memory")
    expect(any("(only 250,000)" in c for c in r), f"a system that made fewer threads says how many: {r}")
    r = row(md, "0%", "Fig. 4")
    expect(r[1:4] == ["2.50M", "2.40M", "1.04"], f"fig4 at 0 %: {r}")

    # Goals.
    g = goal_line(md, "Fig. 2 ")
    expect("**NOT met**" in g and "8: 0.84× epoll" in g and "512: 0.90× epoll" in g and "4,096" not in g,
           f"fig2 goal short at 8 and 512 only: {g}")
    g = goal_line(md, "Fig. 4 ")
    expect("**met**" in g and "1.04× nptl" in g, f"fig4 goal met: {g}")
    g = goal_line(md, "Fig. 1 ")
    expect("**NOT met**" in g and "2: 0.96× st" in g and "nptl" not in g, f"fig1 goal short only vs st at 2: {g}")
    g = goal_line(md, "core: idle thread at 10^6")
    expect("**met**" in g and "4,096" in g, f"memory goal met with the value: {g}")
    expect("skipped: boost-fiber" in md and "Total run time: 12 s" in md, "the run's notes are rendered")

    # SMP (issue 15): its own tables beside Fig. 1's, its two goals, the ratios suite.py writes.
    r = row(md, "2", "SMP — producer–consumer")
    expect(r[1:5] == ["9.00M", "2.00M", "3.00M", "6.00M"] and r[5:8] == ["4.50", "3.00", "1.50"],
           f"smp producer-consumer at 2: weft, nptl, boost-fiber, go, then the ratios: {r}")
    r = row(md, "65,536", "SMP — producer–consumer")
    expect(r[1] == "7.60M†" and r[2] == "—", f"smp at 65,536: weft disturbed (†), no nptl: {r}")
    expect(row(md, "2", "Fig. 1")[1] == "9.80M", "smp records leave Fig. 1's table alone")
    g = goal_line(md, "smp fig1:")
    expect("**NOT met**" in g and "65,536: 0.95× go" in g and "boost-fiber" not in g,
           f"smp fig1 goal short only vs go at 65,536: {g}")
    g = goal_line(md, "fork_join: weft ≥ Go")
    expect("**met**" in g and "0.20× go" in g, f"fork_join goal met, the closest 0.20× go: {g}")
    r = row(md, "1,028,457", "SMP — fork-join")
    expect(r[1] == "50.0" and r[2] == "—" and r[-1] == "0.20", f"fork_join at 1,028,457: no boost-fiber: {r}")
    expect("150,049: weft 25.00M, boost-fiber 250.0k, go 5.00M; 1,028,457: weft 20.00M, go 4.00M." in md, "fork_join's threads per second")
    ratios = report.ratios(records, report.RATIO_BENCHES)
    want = {"threads": 65536, "peer": "go", "ratio": 0.95, "better": "higher"}
    expect(want in ratios.get("smp.producer_consumer", []), f"ratios: {want} in {ratios.get('smp.producer_consumer')}")
    expect({"threads": 150049, "peer": "boost-fiber", "ratio": 0.01, "better": "lower"} in ratios.get("smp.fork_join", []),
           f"fork_join ratios: {ratios.get('smp.fork_join')}")
    md_smp = report.markdown([r for r in records if r["benchmark"].startswith("smp.")], {})
    expect(goal_line(md_smp, "smp fig1:") and not goal_line(md_smp, "core: switch")
           and "18 other goal(s) not judged" in md_smp, "a run of smp alone lists its goals only")

    # Without a peer's records its goal is not judged, and nothing breaks.
    md2 = report.markdown([r for r in records if r["system"] != "boost-context"], {})
    g = goal_line(md2, "switch ≤ 1.5×")
    expect("**not judged**" in g, f"no boost-context: not judged: {g}")
    expect("# weft microbenchmarks" in report.markdown([], None), "an empty run renders")

    # The blocking graph's cost (suite.py's graph section): off, then each setting with its difference.
    def grec(bench, graph, depth, median):
        return {"benchmark": f"graph.{bench}", "system": "weft", "params": {"graph": graph, "depth": depth},
                "unit": "ns", "median": median, "min": median, "max": median, "repetitions": 5, "values": [median]}
    graph = [grec("switch", "off", 0, 10.0), grec("switch", "1", 8, 40.0), grec("switch", "1", 1, 35.0),
             grec("switch", "20", 8, 12.0)]
    md3 = report.markdown(records + graph, {})
    r = row(md3, "switch (1 yield per op)", "Blocking graph")
    expect(r == ["switch (1 yield per op)", "10.0", "40.0 (+30.0 ns, +300%)", "35.0 (+25.0 ns, +250%)",
                 "12.0 (+2.0 ns, +20%)"], f"graph table row: {r}")
    expect(row(md3, "switch (yield ping-pong)")[1] == "8.00", "graph records leave Table 1 alone")
    expect("Blocking graph" not in md, "no graph records: no graph table")

    # Bad input is a clear error (exit 2), not a traceback.
    with tempfile.TemporaryDirectory() as d:
        for name, text in (("broken.json", "[{"), ("object.json", '{"benchmark": "x"}')):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(text)
            out = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), p, "--no-plots"],
                                 capture_output=True, text=True, timeout=60)
            expect(out.returncode == 2 and "report.py:" in out.stderr and "Traceback" not in out.stderr,
                   f"{name}: exit 2 with a message, got {out.returncode}: {out.stderr.strip()[-200:]}")
        # The command line renders the fixture to a file.
        md_path = os.path.join(d, "out.md")
        out = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), FIXTURE, "--md", md_path,
                              "--no-plots"], capture_output=True, text=True, timeout=60)
        expect(out.returncode == 0 and os.path.exists(md_path), f"report.py FIXTURE --md: {out.stderr}")


def plots():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("report_test: matplotlib not installed (python3-matplotlib): plots not tested")
        sys.exit(77)
    with open(FIXTURE) as f:
        records = json.load(f)
    with tempfile.TemporaryDirectory() as d:
        md, paths = report.write(records, {}, os.path.join(d, "micro.md"), d)
        names = sorted(os.path.basename(p) for p in paths)
        want = sorted(f[0].replace(".", "_") + ".png" for f in report.FIGURES)
        expect(names == want, f"one plot per figure: {names} != {want}")
        for p in paths:
            with open(p, "rb") as f:
                head = f.read(8)
            expect(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(p) > 5000, f"{p} is a PNG with a plot in it")
            expect(f"]({os.path.basename(p)})" in md, f"micro.md links {os.path.basename(p)}")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "tables"
    {"tables": tables, "plots": plots}[mode]()
    for f in failures:
        print("FAIL: " + f)
    if failures:
        sys.exit(1)
    print(f"report_test {mode}: ok")


if __name__ == "__main__":
    main()
