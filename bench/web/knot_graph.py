#!/usr/bin/env python3
"""weft-knot's blocking graph under load (Capriccio Fig. 8): `make knot-graph`.

Starts weft-knot (mode b by default, pinned to one CPU) with WEFT_GRAPH=1 and --stats,
loads it with wrk for a few seconds on a mix of files (4 KiB, 100 KiB, and
a missing one for the 404 path), then reads /.weft/graph.json and
/.weft/graph.dot from the live server and draws the graph with Graphviz:

  OUT_DIR/knot-graph.json, .dot, .png   (--docs also copies the PNG to docs/)

and prints the nodes and the busiest edges. wrk's connections stay open
for the whole run, so the accept and exit edges are few and the
request path (read -> send -> read) dominates, as in the paper's figure.
Exits 77 when wrk or Graphviz is missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from knot_bench import OPENER, Server, choose_cpus, knot_args, knot_cmd, make_docroot, raise_nofile, run_wrk  # noqa: E402

LUA = """
local paths = {"/4k.bin", "/4k.bin", "/4k.bin", "/100k.bin", "/missing.bin"}
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build directory (default: build)")
    ap.add_argument("--out-dir", default="results", help="where to write (default: results)")
    ap.add_argument("--seconds", type=int, default=5, help="wrk's duration (default: 5)")
    ap.add_argument("--conns", type=int, default=100, help="wrk's connections (default: 100)")
    ap.add_argument("--mode", default="b", choices=["c", "nb", "b", "uring"],
                    help="weft-knot's --mode (default b: bodies sent by blocking sendfile in an offload worker, "
                         "so a reply is a blocking point of its own; in nb only the reads block on loopback)")
    ap.add_argument("--docs", action="store_true", help="also copy the PNG to docs/knot-graph.png")
    args = ap.parse_args(argv)
    for tool in ("wrk", "dot"):
        if not shutil.which(tool):
            print(f"knot_graph: {tool} is not installed (apt-get install {'wrk' if tool == 'wrk' else 'graphviz'})",
                  file=sys.stderr)
            return 77
    knot = os.path.abspath(os.path.join(args.build, "servers", "knot", "weft-knot"))
    if not os.access(knot, os.X_OK):
        print(f"knot_graph: no {knot}: build first (make build)", file=sys.stderr)
        return 1
    raise_nofile()
    root, _, _ = make_docroot(args.build)
    server_cpu, client_cpu, notes = choose_cpus(1, 0)
    for n in notes:
        print("knot_graph:", n)
    os.makedirs(args.out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="weft-knot-graph-") as tmp:
        base = knot_cmd(knot, server_cpu, root, knot_args(args.mode, ["--stats"]))
        server = Server("knot-" + args.mode, lambda port, t: ["env", "WEFT_GRAPH=1"] + base(port, t), tmp)
        server.start("4k.bin")
        try:
            lua = os.path.join(tmp, "mix.lua")
            with open(lua, "w") as f:
                f.write(LUA)
            res, _ = run_wrk(server.url(""), args.conns, args.seconds, client_cpu, extra=["-s", lua])
            print(f"knot_graph: wrk {args.conns} connections, {args.seconds} s: {res['req_s']:,.0f} req/s")
            pages = {}
            for ext in ("json", "dot"):
                with OPENER.open(server.url(f".weft/graph.{ext}"), timeout=30) as r:
                    pages[ext] = r.read()
        finally:
            problem = server.stop()
            if problem:
                print("knot_graph: weft-knot", problem, file=sys.stderr)
    out = os.path.join(args.out_dir, "knot-graph")
    for ext, body in pages.items():
        with open(f"{out}.{ext}", "wb") as f:
            f.write(body)
    subprocess.run(["dot", "-Tpng", "-Gdpi=110", "-o", f"{out}.png", f"{out}.dot"], check=True, timeout=120)
    g = json.loads(pages["json"])
    labels = {n["id"]: n["label"] for n in g["nodes"]}
    print(f"knot_graph: {len(g['nodes'])} nodes, {len(g['edges'])} edges, median edge {g['median_edge_ns'] / 1e3:.1f} us")
    for n in g["nodes"]:
        print(f"  node {n['id']:3d}  {n['label']:<55s} visits {n['visits']:>9,}  waits {n['wait_ns'] / 1e3:9.1f} us")
    for e in sorted(g["edges"], key=lambda e: -e["count"])[:12]:
        print(f"  {labels[e['from']]:<40s} -> {labels[e['to']]:<40s} {e['count']:>9,} x {e['mean_ns'] / 1e3:7.1f} us"
              f"  fds {e['fds']:+.2f} threads {e['threads']:+.2f}{'  SLOW' if e['slow'] else ''}")
    print(f"knot_graph: wrote {out}.json, {out}.dot, {out}.png")
    if args.docs:
        shutil.copyfile(f"{out}.png", os.path.join(os.path.dirname(__file__), "..", "..", "docs", "knot-graph.png"))
        print("knot_graph: copied to docs/knot-graph.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
