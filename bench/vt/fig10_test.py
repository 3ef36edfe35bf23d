#!/usr/bin/env python3
"""fig10.py's memory verdict: the slope of anonymous RSS over the points with
enough clients, and what a connection costs in all once the bytes a server
reserves per connection at start (nginx's worker_connections slot) are
counted. Synthetic runs, no server started.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fig10  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def runs_for(server, kind, kib_per_conn, base_kb):
    """Peak anon = base + kib_per_conn x clients, at 1..500 clients."""
    return [{"server": server, "kind": kind, "clients": n, "req_s": 1000.0, "anon_idle_kb": base_kb,
             "anon_peak_kb": base_kb + kib_per_conn * n, "anon_per_conn_kb": kib_per_conn}
            for n in (1, 10, 50, 100, 200, 500)]


# nginx grows less per connection than vtserver (0.50 against 0.55 KiB) but set
# 432 bytes aside per slot at start.
runs = runs_for("vtserver", "vtserver", 0.55, 3000) + runs_for("nginx", "nginx", 0.50, 10000)
expect(fig10.slope_kb(runs, "vtserver") == 0.55, f"vtserver's slope {fig10.slope_kb(runs, 'vtserver')}")
expect(fig10.slope_kb(runs, "nginx") == 0.5, f"nginx's slope {fig10.slope_kb(runs, 'nginx')}")
expect(fig10.with_reserved_kb(0.5, {"nginx": 432}, "nginx") == 0.92, "0.5 KiB + 432 B is 0.92 KiB")
expect(fig10.with_reserved_kb(0.55, {"vtserver": 0}, "vtserver") == 0.55, "nothing reserved adds nothing")
expect(fig10.with_reserved_kb(0.5, None, "nginx") is None, "no measurement: no whole figure")
expect(fig10.with_reserved_kb(None, {"nginx": 432}, "nginx") is None, "no slope: no whole figure")

ratios = fig10.ratio_rows(runs)
reserved = {"vtserver": 0, "nginx": 432}
lines = fig10.goal_lines(runs, ratios, ["vtserver", "nginx"], reserved)
slope_line = [x for x in lines if "slope over" in x]
whole_line = [x for x in lines if "slope plus the bytes reserved" in x]
expect(len(slope_line) == 1 and "nginx (0.50 KiB) -- not vtserver" in slope_line[0],
       f"from growth alone nginx is the smaller: {slope_line}")
expect(len(whole_line) == 1 and "vtserver (0.55 KiB)" in whole_line[0] and "nginx 0.92" in whole_line[0]
       and "not vtserver" not in whole_line[0], f"counted whole, vtserver is the smaller: {whole_line}")

marg_line = [x for x in lines if "marginal plus the bytes reserved" in x]
expect(len(marg_line) == 1 and "vtserver (0.55 KiB)" in marg_line[0] and "nginx 0.92" in marg_line[0],
       f"the marginal figure counted whole too: {marg_line}")

# Without a measurement (an old JSON, or a run without nginx) there is no such line.
lines = fig10.goal_lines(runs, ratios, ["vtserver", "nginx"], None)
expect(not [x for x in lines if "bytes reserved" in x], "no reservation measured: no whole-cost line")
lines = fig10.goal_lines(runs, ratios, ["vtserver", "nginx"], {"vtserver": 0})
expect(not [x for x in lines if "bytes reserved" in x], "nothing reserved by anyone: no whole-cost line")

# A server that reserves so much that it loses counted whole, though it grows least.
lines = fig10.goal_lines(runs, ratios, ["vtserver", "nginx"], {"vtserver": 0, "nginx": 20})
whole_line = [x for x in lines if "slope plus the bytes reserved" in x]
expect(len(whole_line) == 1 and "nginx (0.52 KiB) -- not vtserver" in whole_line[0],
       f"20 bytes a slot keep nginx the smaller: {whole_line}")

for f in failures:
    print("FAIL:", f)
print("fig10_test:", "FAILED" if failures else "ok", f"({len(failures)} failure(s))")
sys.exit(1 if failures else 0)
