#!/usr/bin/env python3
"""fig8.py's client plan and its sums: a file's load is split over enough
httperf processes that none can run out of descriptors before its
connections time out, and the reports of a file's processes add up (counts
summed, the mean connection time weighted by the connections each served), and the server's own times (its p99 from the
histogram).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fig7  # noqa: E402
import fig8  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


# The plan: rate per file x timeout connections at most, HTTPERF_FDS per process.
expect(fig8.clients_per_file(10, 5) == 1, "a light load needs one process")
expect(fig8.clients_per_file(fig8.HTTPERF_FDS / 5, 5) == 1, "exactly the budget fits one process")
expect(fig8.clients_per_file(fig8.HTTPERF_FDS / 5 + 1, 5) == 2, "one connection over the budget needs two")
expect(fig8.clients_per_file(11000 / 18, 5) == 4, "11,000/s over 18 files, 5 s timeout: 4 processes a file")
for rate in (180, 3000, 10000, 11000, 20000):
    per = rate / 18
    k = fig8.clients_per_file(per, 5)
    expect(per / k * 5 <= fig8.HTTPERF_FDS, f"{rate}/s: {k} processes leave one over the budget")

# Two reports of one file fold into one record.
REPORT = """Total: connections {n} requests {n} replies {ok} test-duration 8.000 s
Connection time [ms]: min 0.2 avg {ms} max 900.0 median 1.5 stddev 3.0
Reply status: 1xx=0 2xx={ok} 3xx=0 4xx=0 5xx=0
Errors: total {err} client-timo {timo} socket-timo 0 connrefused 0 connreset 0
Errors: fd-unavail {fd} addrunavail 0 ftab-full 0 other 0
"""
st = fig8.new_size_record()
for n, ok, ms, timo, fd in ((100, 90, 10.0, 4, 6), (300, 300, 30.0, 0, 0)):
    text = REPORT.format(n=n, ok=ok, ms=ms, err=timo + fd, timo=timo, fd=fd)
    fig8.add_report(st, fig7.wb.parse_httperf(text), text)
expect(st["requests"] == 400, f"requests add up: {st['requests']}")
expect(st["ok"] == 390, f"replies add up: {st['ok']}")
expect(st["timeouts"] == 4 and st["errors"] == 6, f"timeouts and other errors apart: {st}")
expect(st["errors_by_kind"] == {"client-timo": 4, "fd-unavail": 6}, f"errors by kind: {st['errors_by_kind']}")
want = round((10.0 * 90 + 30.0 * 300) / 390, 1)
expect(st["connection_ms"] == want, f"mean connection time weighted by replies: {st['connection_ms']} != {want}")

# The server's own times: the mean as given, the p99 at the end of its bucket.
hist = [0] * 40
hist[10] = 98    # [512, 1024) µs
hist[12] = 2     # [2048, 4096) µs: the top 2 %
t = fig8.server_times({"sizes": {"1024": {"count": 100, "mean_ms": 0.71234, "stamped": 100,
                                          "arrival_mean_ms": 0.80049, "hist": hist}}})
expect(t == {"1024": {"count": 100, "mean_ms": 0.712, "arrival_ms": 0.8, "p99_ms": 4.096}}, f"server times: {t}")
hist[12], hist[11] = 0, 2  # now the top 2 % in [1024, 2048) µs
t = fig8.server_times({"sizes": {"1024": {"count": 100, "mean_ms": 0.7, "stamped": 0, "arrival_mean_ms": 0,
                                          "hist": hist}}})
expect(t["1024"]["p99_ms"] == 2.048 and t["1024"]["arrival_ms"] is None, f"p99 bucket, no stamps: {t}")

if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print("fig8_test: ok")
