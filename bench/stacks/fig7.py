#!/usr/bin/env python3
"""Capriccio Fig. 7 for weft-knot: the share of call sites that need a
linked-stack checkpoint, against MaxPath.

    python3 bench/stacks/fig7.py [--build-dir build-callgraph] [--out-dir results]
    python3 bench/stacks/fig7.py --ci DIR ...      # call graphs already compiled

Builds weft-knot (the runtime, http/, the server) in a scratch tree with
gcc's -fcallgraph-info=su and -fdump-ipa-cgraph (unless --ci is given),
runs tools/stackcheck over every unit with --sweep, and writes
OUT/stacks_fig7.json (stackcheck's sweep, by checkpoint kind) and
OUT/stacks_fig7.png. Prints the table. The paper measured Apache: 10 % of
call sites checkpointed at MaxPath 2 KB.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STACKCHECK = os.path.join(ROOT, "tools", "stackcheck", "stackcheck.py")
SWEEP = [512, 1024, 2048, 4096, 8192, 16384]
KINDS = ("back-edge", "maxpath", "external", "indirect", "dynamic")


def build(build_dir):
    """A scratch weft-knot build whose units leave their call graphs beside
    the objects. Returns the directory to give stackcheck."""
    flags = "-fcallgraph-info=su -fdump-ipa-cgraph"
    if not os.path.exists(os.path.join(build_dir, "build.ninja")):
        subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DWEFT_BUILD_TESTS=OFF", "-DWEFT_BUILD_BENCH=OFF", "-DWEFT_BUILD_TOOLS=OFF",
                        f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}"],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "--target", "weft-knot"], check=True, stdout=subprocess.DEVNULL)
    return build_dir


def sweep(inputs):
    """stackcheck's JSON (with the sweep) over `inputs`."""
    res = subprocess.run([sys.executable, STACKCHECK, *inputs, "--sweep", ",".join(map(str, SWEEP)),
                          "--json", "-", "-q"], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"stackcheck failed ({res.returncode}): {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout)


def plot(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"matplotlib is not importable by {sys.executable}: no plot"
    xs = [r["max_path"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    bottom = [0.0] * len(rows)
    for kind in KINDS:
        ys = [100.0 * r["by_kind"].get(kind, 0) / max(r["call_sites"], 1) for r in rows]
        if any(ys):
            ax.bar(range(len(xs)), ys, bottom=bottom, label=kind)
            bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([f"{x // 1024} KiB" if x >= 1024 else f"{x} B" for x in xs])
    ax.set_xlabel("MaxPath")
    ax.set_ylabel("call sites with a checkpoint (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build-dir", default="build-callgraph", help="scratch build tree (default build-callgraph)")
    ap.add_argument("--ci", nargs="+", help="use these .ci files / directories instead of building")
    ap.add_argument("--out-dir", default="results", help="where stacks_fig7.{json,png} go (default results)")
    ap.add_argument("--title", default="Capriccio Fig. 7 on weft-knot")
    args = ap.parse_args(argv)
    try:
        inputs = args.ci or [build(os.path.abspath(args.build_dir))]
        data = sweep(inputs)
    except (OSError, subprocess.CalledProcessError, RuntimeError, ValueError) as e:
        print(f"fig7: {e}", file=sys.stderr)
        return 1
    rows = data["sweep"]
    os.makedirs(args.out_dir, exist_ok=True)
    out = {"inputs": inputs, "functions": len(data.get("functions", {})), "sweep": rows,
           "command": " ".join([sys.executable, STACKCHECK, *inputs, "--sweep", ",".join(map(str, SWEEP))])}
    with open(os.path.join(args.out_dir, "stacks_fig7.json"), "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    print(f"{'MaxPath':>8} {'checkpointed':>13} {'of':>6} {'share':>7}   " + " ".join(f"{k:>9}" for k in KINDS))
    for r in rows:
        print(f"{r['max_path']:>8} {r['instrumented']:>13} {r['call_sites']:>6} {100 * r['share']:>6.1f}%   "
              + " ".join(f"{r['by_kind'].get(k, 0):>9}" for k in KINDS))
    why = plot(rows, os.path.join(args.out_dir, "stacks_fig7.png"), args.title)
    print(f"fig7: {why}" if why else f"fig7: wrote {os.path.join(args.out_dir, 'stacks_fig7.png')} and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
