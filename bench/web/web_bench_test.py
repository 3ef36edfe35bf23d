#!/usr/bin/env python3
"""Unit tests of bench/web/web_bench.py that start no server: the study's
verification rules (verify_run) on synthetic per-size counts, each rule made
to fail on its own; httperf report parsing on captured outputs
(testdata/httperf_*.txt: a whole run, one stopped with SIGINT, one against a
closed port); combining several clients; the Markdown report (render) from
testdata/web_fixture.json."""
import copy
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import web_bench as wb  # noqa: E402

DATA = os.path.join(HERE, "testdata")


def read(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def stats(requests=10, timeouts=0, errors=0, wrong=0):
    """Per-size counts for all 36 sizes, all alike."""
    per = wb.new_size_stats()
    for st in per.values():
        st.update(requests=requests, timeouts=timeouts, errors=errors, wrong=wrong,
                  ok=requests - timeouts - errors - wrong)
    return per


class VerifyRun(unittest.TestCase):
    def test_clean_run_passes(self):
        ok, reasons = wb.verify_run(stats())
        self.assertTrue(ok, reasons)
        self.assertEqual(reasons, [])

    def test_even_timeouts_below_the_limit_pass(self):
        ok, reasons = wb.verify_run(stats(requests=20, timeouts=1))  # 5 % everywhere
        self.assertTrue(ok, reasons)

    def test_a_size_never_served_fails(self):
        per = stats()
        per["class3_8"].update(requests=0, ok=0)
        ok, reasons = wb.verify_run(per)
        self.assertFalse(ok)
        self.assertTrue(any("never served" in r and "class3_8" in r for r in reasons), reasons)

    def test_a_size_missing_from_the_counts_fails(self):
        per = stats()
        del per["class0_0"]
        ok, reasons = wb.verify_run(per)
        self.assertFalse(ok)
        self.assertIn("never served", reasons[0])

    def test_only_timeouts_is_not_served(self):
        per = stats()
        per["class2_4"].update(timeouts=10, ok=0)
        ok, reasons = wb.verify_run(per)
        self.assertFalse(ok)
        self.assertTrue(any("never served" in r for r in reasons), reasons)

    def test_wrong_bytes_fail(self):
        per = stats()
        per["class1_3"].update(wrong=1, ok=9)
        ok, reasons = wb.verify_run(per)
        self.assertFalse(ok)
        self.assertEqual(len(reasons), 1, reasons)  # 1 wrong reply is not a timeout
        self.assertIn("wrong bytes", reasons[0])
        self.assertIn("class1_3", reasons[0])

    def test_timeouts_above_ten_percent_fail_even_when_even(self):
        ok, reasons = wb.verify_run(stats(requests=100, timeouts=11))  # 11 % everywhere: even, too many
        self.assertFalse(ok)
        self.assertEqual(len(reasons), 1, reasons)
        self.assertIn("above 10 %", reasons[0])

    def test_exactly_ten_percent_passes(self):
        ok, reasons = wb.verify_run(stats(requests=100, timeouts=10))
        self.assertTrue(ok, reasons)

    def test_uneven_timeouts_fail_below_the_limit(self):
        per = stats(requests=100, timeouts=0)
        per["class3_8"].update(timeouts=8, ok=92)  # mean 0.22 %, this one 8 %: > mean + 2
        ok, reasons = wb.verify_run(per)
        self.assertFalse(ok)
        self.assertEqual(len(reasons), 1, reasons)
        self.assertIn("uneven", reasons[0])
        self.assertIn("class3_8", reasons[0])

    def test_within_two_points_of_the_mean_passes(self):
        per = stats(requests=100, timeouts=3)
        per["class3_8"].update(timeouts=5, ok=95)  # mean 3.06 %, 5 % is 1.9 points above
        ok, reasons = wb.verify_run(per)
        self.assertTrue(ok, reasons)

    def test_connection_errors_count_as_unanswered(self):
        per = stats(requests=10)
        per["class0_1"].update(errors=5, ok=5)
        ok, reasons = wb.verify_run(per)
        self.assertFalse(ok)
        self.assertTrue(any("class0_1 50.0 %" in r for r in reasons), reasons)

    def test_thresholds_are_parameters(self):
        ok, _ = wb.verify_run(stats(requests=100, timeouts=11), max_pct=20.0)
        self.assertTrue(ok)


class ParseHttperf(unittest.TestCase):
    def test_whole_run(self):
        r = wb.parse_httperf(read("httperf_wsesslog.txt"))
        self.assertEqual((r["connections"], r["requests"], r["replies"]), (200, 1437, 1437))
        self.assertAlmostEqual(r["test_duration_s"], 41.985)
        self.assertAlmostEqual(r["response_ms"], 0.3)
        self.assertAlmostEqual(r["transfer_ms"], 0.0)
        self.assertAlmostEqual(r["mbps"], 4.8)
        self.assertAlmostEqual(r["net_kb_s"], 586.0)
        self.assertEqual(r["status"]["2xx"], 1437)
        self.assertEqual(r["errors"]["total"], 0)
        self.assertIn("fd-unavail", r["errors"])
        self.assertEqual((r["sessions_ok"], r["sessions"]), (200, 200))
        self.assertEqual(r["max_concurrent"], 76)

    def test_interrupted_run_still_reports(self):
        r = wb.parse_httperf(read("httperf_wsesslog_sigint.txt"))
        self.assertEqual(r["replies"], 1193)
        self.assertAlmostEqual(r["test_duration_s"], 5.995)
        self.assertAlmostEqual(r["mbps"], 26.6)

    def test_errors_by_kind(self):
        r = wb.parse_httperf(read("httperf_connrefused.txt"))
        self.assertEqual(r["replies"], 0)
        self.assertEqual(r["errors"]["connrefused"], 20)
        self.assertEqual(r["errors"]["total"], 20)
        self.assertEqual(r["errors"]["client-timo"], 0)

    def test_no_report_raises(self):
        with self.assertRaises(ValueError):
            wb.parse_httperf("httperf: warning: open file limit > FD_SETSIZE\n")

    def test_clients_combine(self):
        a = wb.parse_httperf(read("httperf_wsesslog.txt"))
        b = wb.parse_httperf(read("httperf_wsesslog_sigint.txt"))
        c = wb.parse_httperf(read("httperf_connrefused.txt"))
        r = wb.combine_httperf([a, b, c])
        self.assertAlmostEqual(r["reply_rate"], round(1437 / 41.985 + 1193 / 5.995, 1))
        self.assertAlmostEqual(r["mbps"], 4.8 + 26.6)
        self.assertAlmostEqual(r["response_ms_mean"], round((0.3 * 1437 + 0.9 * 1193) / (1437 + 1193), 3))
        self.assertEqual(r["errors"]["connrefused"], 20)
        self.assertEqual(r["replies"], 1437 + 1193)

    def test_clients_for_respects_fd_setsize(self):
        self.assertEqual(wb.clients_for(100, 2, 3.0), 2)
        self.assertGreaterEqual(wb.clients_for(800, 2, 3.0) * wb.CONNS_PER_HTTPERF, 800 * 3.0)


class Render(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(DATA, "web_fixture.json")) as f:
            fx = json.load(f)
        cls.runs, cls.info = fx["runs"], fx["run_info"]
        cls.md = wb.render(cls.runs, cls.info)

    def table(self, title):
        part = self.md.split(title, 1)[1].split("\n## ", 1)[0]
        return [ln for ln in part.splitlines() if ln.startswith("|")]

    def test_table_one_uses_the_highest_verified_rate(self):
        rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
                for ln in self.table("## Table 1")}
        self.assertEqual(rows[""], ["knot-nb", "nginx"])
        self.assertEqual(rows["Rate (sessions/s)"], ["40", "40"])  # knot-nb's 400 failed verification
        self.assertEqual(len(rows["Reply rate (replies/s)"]), 2)
        for key in ("Throughput (Mbit/s)", "CPU user %", "CPU system %", "ctx-sw/s voluntary (kernel)",
                    "ctx-sw/s involuntary (kernel)", "RSS max (MiB)"):
            self.assertIn(key, rows)
        self.assertNotEqual(rows["ctx-sw/s (user, weft)"][0], "—")  # weft's counters
        self.assertEqual(rows["ctx-sw/s (user, weft)"][1], "—")  # nginx has none

    def test_unverified_server_is_named(self):
        self.assertIn("No verified rate: knot-b", self.md)

    def test_every_httperf_run_listed_with_its_verdict(self):
        rows = self.table("## Every run")[2:]
        self.assertEqual(len(rows), 3)
        self.assertTrue(any("| 400 |" in r and "| NO |" in r and "client-timo 12" in r for r in rows), rows)

    def test_wrk_peaks(self):
        rows = self.table("## Peak")[2:]
        self.assertEqual([r.split("|")[1].strip() for r in rows], ["knot-nb", "nginx"])

    def test_repeated_wrk_runs_show_their_median_and_spread(self):
        runs = copy.deepcopy(self.runs)
        wrk = next(r for r in runs if r["type"] == "wrk")
        wrk["reply_rate_runs"] = [900.0, 1000.0, 1100.0]
        wrk["reply_rate"] = 1000.0
        md = wb.render(runs, self.info)
        self.assertIn("| 1,000 (900, 1,000, 1,100) |", md)
        self.assertIn("median of the runs", md)
        self.assertNotIn("median of the runs", self.md)  # one run each: no note

    def test_failures_reported(self):
        fail = self.md.split("## Failed runs", 1)[1]
        self.assertIn("FAILED knot-nb rate 400: timeouts above 10 %", fail)
        self.assertIn("FAILED knot-b start: did not start", fail)

    def test_plots_linked_or_explained(self):
        info = copy.deepcopy(self.info)
        info["plots"] = {"web_throughput.png": "Fig. 7: throughput"}
        self.assertIn("![Fig. 7: throughput](web_throughput.png)", wb.render(self.runs, info))
        info["plots"], info["plot_note"] = {}, "(no matplotlib)"
        self.assertIn("(no matplotlib)", wb.render(self.runs, info))

    def test_two_core_ratios_shown_when_smp_web_json_is_there(self):
        self.assertNotIn("Two cores", self.md)
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(wb.smp_summary(d))
            ratios = [{"name": "knot-2vp / nginx-2w", "connections": c, "req_s": 1.25, "req_per_server_cpu_s": 1.1}
                      for c in (100, 1000)]
            with open(os.path.join(d, wb.SMP_JSON), "w") as f:
                json.dump({"benchmark": "web.smp", "generated": "2026-11-27", "machine": {"git_head": "abc1234"},
                           "ratios": ratios}, f)
            info = copy.deepcopy(self.info)
            info["smp_web"] = wb.smp_summary(d)
        md = wb.render(self.runs, info)
        self.assertIn("## Two cores", md)
        self.assertIn("git abc1234", md)
        self.assertIn("| knot-2vp / nginx-2w | 1.25x | 1.10x | 1.25x | 1.10x |", md)

    def test_plots_written_with_matplotlib(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib not installed")
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            plots, note = wb.plot(self.runs, d)
            self.assertIsNone(note)
            self.assertEqual(sorted(plots), ["web_response.png", "web_throughput.png"])
            for name in plots:
                with open(os.path.join(d, name), "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_render_is_pure(self):
        before = json.dumps(self.runs, sort_keys=True)
        self.assertEqual(wb.render(self.runs, self.info), self.md)
        self.assertEqual(json.dumps(self.runs, sort_keys=True), before)


class SourcePlan(unittest.TestCase):
    def files(self, *sessions):
        return [(f"s{j}.txt", n) for j, n in enumerate(sessions)]

    def test_auto_uses_one_address_while_ports_last(self):
        self.assertEqual(wb.source_plan(self.files(5000, 5000), 0, "auto", 28232), [None, None])

    def test_auto_gives_each_client_its_own_addresses_when_ports_run_short(self):
        plan = wb.source_plan(self.files(20000, 20000), 0, "auto", 28232)
        self.assertEqual(plan, ["127.0.1.10-127.0.1.11", "127.0.1.12-127.0.1.13"])  # 2 x 14,116 ports each

    def test_always_and_off(self):
        self.assertEqual(wb.source_plan(self.files(10, 10, 10), 2, "always", 28232),
                         ["127.0.3.10", "127.0.3.11", "127.0.3.12"])
        self.assertEqual(wb.source_plan(self.files(10 ** 6), 0, "off", 28232), [None])

    def test_rates_and_clients_never_share_an_address(self):
        seen = set()
        for i in range(4):
            for spec in wb.source_plan(self.files(40000, 40000, 40000), i, "auto", 28232):
                lo, _, hi = spec.partition("-")
                base, first = lo.rsplit(".", 1)
                last = int(hi.rsplit(".", 1)[1]) if hi else int(first)
                for x in range(int(first), last + 1):
                    self.assertNotIn(f"{base}.{x}", seen)
                    seen.add(f"{base}.{x}")
        self.assertEqual(len(seen), 4 * 3 * 3)

    def test_too_many_addresses_is_an_error(self):
        with self.assertRaises(ValueError):
            wb.source_plan(self.files(*[10 ** 6] * 10), 0, "auto", 28232)


class ServersFile(unittest.TestCase):
    """servers.json: optional "env" per server (an `env` prefix on its
    command) and "default": false (run only when named)."""

    def write(self, specs):
        import tempfile
        f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(specs, f)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_the_default_set_is_unchanged_by_the_named_only_entries(self):
        default = [s["name"] for s in wb.load_servers(wb.SERVERS_JSON)]
        self.assertEqual(default, ["knot-nb", "knot-c", "knot-b", "knot-uring", "knot-linked", "userver-sped",
                                   "userver-symped", "userver-shared", "userver-b", "watpipe", "nginx", "apache",
                                   "apache-weft"])
        for s in wb.load_servers(wb.SERVERS_JSON):
            self.assertNotIn("env", s)  # the make run servers run as before
        quick = wb.PRESETS["quick"]["servers"].split(",")
        self.assertEqual([s["name"] for s in wb.load_servers(wb.SERVERS_JSON, quick)], quick)

    def test_graph_and_policy_configurations_are_there_when_named(self):
        names = ["knot-graph", "knot-graph-d1", "knot-graph-s20", "knot-resource"]
        by = {s["name"]: s for s in wb.load_servers(wb.SERVERS_JSON, names)}
        self.assertEqual(list(by), names)
        nb = wb.load_servers(wb.SERVERS_JSON, ["knot-nb"])[0]
        for n in names:
            self.assertEqual(by[n]["args"], nb["args"])  # knot-nb but for the environment
            self.assertEqual(by[n]["kind"], "knot")
        self.assertEqual(by["knot-graph"]["env"]["WEFT_GRAPH"], "1")
        self.assertEqual((by["knot-graph-d1"]["env"]["WEFT_GRAPH"], by["knot-graph-d1"]["env"]["WEFT_GRAPH_DEPTH"]),
                         ("1", "1"))
        self.assertEqual(by["knot-graph-s20"]["env"]["WEFT_GRAPH"], "20")
        self.assertEqual(by["knot-resource"]["env"]["WEFT_POLICY"], "resource")

    def test_entries_without_env_or_default_still_load(self):
        path = self.write([{"name": "a", "kind": "knot", "args": ["--mode", "nb"]}, {"name": "n", "kind": "nginx"}])
        self.assertEqual([s["name"] for s in wb.load_servers(path)], ["a", "n"])

    def test_bad_env_or_default_is_refused(self):
        for bad in ({"env": ["WEFT_GRAPH=1"]}, {"env": {"WEFT_GRAPH": 1}}, {"env": {"BAD NAME": "1"}},
                    {"default": "no"}):
            path = self.write([dict({"name": "a", "kind": "knot", "args": []}, **bad)])
            with self.assertRaises(ValueError, msg=bad):
                wb.load_servers(path)

    def test_env_prefixes_the_command_and_keeps_the_rest(self):
        bins = {"knot": "/b/weft-knot"}
        spec = {"name": "g", "kind": "knot", "args": ["--mode", "nb"],
                "env": {"WEFT_GRAPH": "1", "WEFT_POLICY": None}}
        cmd = wb.server_command(spec, {}, bins, 1, "/root")(8080, "/tmp/x")
        self.assertEqual(cmd[:4], ["env", "-u", "WEFT_POLICY", "WEFT_GRAPH=1"])
        plain = wb.server_command(dict(spec, env={}), {}, bins, 1, "/root")(8080, "/tmp/x")
        self.assertEqual(cmd[4:], plain)
        self.assertEqual(plain[:3], ["taskset", "-c", "1"])
        self.assertIn("--stats", plain)
        self.assertEqual(wb.env_prefix({}), [])

    def test_apache_is_the_same_binary_on_nptl_and_under_weft_run(self):
        tools, bins = {"apache2": "/usr/sbin/apache2"}, {"weft-run": "/b/posix/weft-run"}
        by = {s["name"]: s for s in wb.load_servers(wb.SERVERS_JSON, ["apache", "apache-weft"])}
        with tempfile.TemporaryDirectory() as tmp:
            nptl = wb.server_command(by["apache"], tools, bins, 1, "/files")(8080, tmp)
            weft = wb.server_command(by["apache-weft"], tools, bins, 1, "/files")(8080, tmp)
            with open(os.path.join(tmp, "httpd.conf")) as f:
                conf = f.read()
        tail = ["/usr/sbin/apache2", "-X", "-f", os.path.join(tmp, "httpd.conf")]
        self.assertEqual(nptl, ["taskset", "-c", "1"] + tail)
        self.assertEqual(weft, ["taskset", "-c", "1", "/b/posix/weft-run"] + by["apache-weft"]["args"] + tail)
        for line in ("Listen 127.0.0.1:8080", "DocumentRoot /files", "mod_mpm_worker.so", "EnableSendfile On",
                     f"ThreadsPerChild {wb.APACHE_THREADS}", f"ErrorLog {tmp}/error.log"):
            self.assertIn(line, conf)

    def test_pool_is_the_same_binary_on_nptl_and_under_weft_run(self):
        bins = wb.weft_bins("/b")
        self.assertEqual((bins["pool"], bins["staged"]), ("/b/servers/pool/weft-pool", "/b/servers/staged/weft-staged"))
        by = {s["name"]: s for s in wb.load_servers(wb.SERVERS_JSON, ["pool", "pool-weft", "staged"])}
        self.assertEqual(by["pool"]["args"], by["pool-weft"]["args"])
        nptl = wb.server_command(by["pool"], {}, bins, 1, "/files")(8080, "/tmp/x")
        weft = wb.server_command(by["pool-weft"], {}, bins, 1, "/files")(8080, "/tmp/x")
        tail = ["/b/servers/pool/weft-pool", "--listen", "127.0.0.1:8080", "--root", "/files"] + by["pool"]["args"]
        self.assertEqual(nptl, ["taskset", "-c", "1"] + tail + ["--stats"])
        self.assertEqual(weft, ["taskset", "-c", "1", "/b/posix/weft-run"] + tail + ["--stats"])
        staged = wb.server_command(by["staged"], {}, bins, 1, "/files")(8080, "/tmp/x")
        self.assertEqual(staged[:4], ["taskset", "-c", "1", "/b/servers/staged/weft-staged"])
        self.assertIn("--vprocs", staged)
        for kind in ("pool", "pool-weft", "staged"):
            self.assertIn(kind, wb.STATS_KINDS)  # their counters are read like the other weft servers'
        for name in by:
            self.assertFalse(by[name]["default"])  # not in make run's set (the test above)

    def test_env_is_recorded_and_shown(self):
        spec = {"name": "knot-graph", "kind": "knot", "args": ["--mode", "nb"], "env": {"WEFT_GRAPH": "1"}}
        self.assertEqual(wb.base_record(spec, "wrk")["env"], {"WEFT_GRAPH": "1"})
        self.assertEqual(wb.base_record({"name": "n", "kind": "nginx"}, "wrk")["env"], {})
        with open(os.path.join(DATA, "web_fixture.json")) as f:
            fx = json.load(f)
        self.assertNotIn("WEFT_GRAPH", wb.render(fx["runs"], fx["run_info"]))  # fixture runs have no "env"
        for r in fx["runs"]:
            if r["server"] == "knot-nb":
                r["env"] = {"WEFT_GRAPH": "1"}
        self.assertIn("`WEFT_GRAPH=1`", wb.render(fx["runs"], fx["run_info"]))


class Goal(unittest.TestCase):
    def run_(self, server, kind, rate, reply, verified=True, typ="httperf"):
        return {"type": typ, "server": server, "kind": kind, "rate": rate, "reply_rate": reply, "verified": verified}

    def test_best_of_each_architecture_per_load(self):
        runs = [self.run_("knot-nb", "knot", 100, 500), self.run_("knot-b", "knot", 100, 520),
                self.run_("userver-sped", "userver", 100, 510), self.run_("watpipe", "watpipe", 100, 540),
                self.run_("nginx", "nginx", 100, 500),
                self.run_("knot-nb", "knot", 400, 2000), self.run_("watpipe", "watpipe", 400, 9999, verified=False),
                self.run_("userver-sped", "userver", 400, 1900),
                self.run_("knot-nb", "knot", None, 80000, typ="wrk"), self.run_("nginx", "nginx", None, 70000, typ="wrk")]
        rows = {r[0]: r for r in wb.goal_rows(runs)}
        load, k, e, n, re_, rn = rows[100]
        self.assertEqual((k, e, n), (("knot-b", 520), ("watpipe", 540), ("nginx", 500)))
        self.assertAlmostEqual(re_, 520 / 540)
        self.assertAlmostEqual(rn, 520 / 500)
        self.assertEqual(rows[400][2], ("userver-sped", 1900))  # the unverified WatPipe run does not count
        self.assertIsNone(rows[400][5])                          # no nginx run at 400
        self.assertAlmostEqual(rows["wrk peak"][5], 80000 / 70000)
        text = "\n".join(wb.goal_section(runs))
        self.assertIn("Short of the goal at: 100: 0.963x", text)


class Tune(unittest.TestCase):
    """bench/web/tune.py: the grid of configurations, and the run through
    web_bench (replaced here by a stand-in that writes the fixture)."""

    def test_grid_names_and_flags(self):
        import tune
        cfgs = tune.configurations("userver", [10000, 30000], [1, 4])
        self.assertEqual([c["name"] for c in cfgs],
                         ["userver-10K-1p", "userver-10K-4p", "userver-30K-1p", "userver-30K-4p"])
        a = cfgs[3]["args"]
        self.assertEqual(a[a.index("--max-conns") + 1], "30000")
        self.assertEqual(a[a.index("--procs") + 1], "4")
        self.assertEqual(cfgs[0]["kind"], "userver")
        knot = tune.configurations("knot-b", [500], [50])[0]
        self.assertEqual(knot["name"], "knot-b-500-50w")
        self.assertEqual(knot["args"][:2], ["--mode", "b"])
        self.assertEqual(knot["args"][knot["args"].index("--threads") + 1], "500")
        self.assertEqual(knot["args"][knot["args"].index("--workers") + 1], "50")
        wat = tune.configurations("watpipe", [20000], [5])[0]
        self.assertEqual((wat["name"], wat["kind"]), ("watpipe-20K-5w", "watpipe"))
        self.assertIn("--shared", tune.configurations("userver-shared", [1], [2])[0]["args"])

    def test_bad_lists_are_refused(self):
        import tune
        for bad in ("0", "x", "", "-3"):
            with self.assertRaises(Exception):
                tune.positive_list(bad)

    def test_main_runs_the_grid_through_web_bench_and_plots(self):
        import tempfile
        import tune
        with open(os.path.join(DATA, "web_fixture.json")) as f:
            fixture = json.load(f)
        seen = {}

        def fake_main(argv):
            seen["argv"] = argv
            with open(argv[argv.index("--servers-file") + 1]) as f:
                seen["servers"] = json.load(f)
            runs = []
            for cfg in seen["servers"]:  # the fixture's runs, renamed to the grid's configurations
                for r in fixture["runs"] if isinstance(fixture, dict) else fixture:
                    runs.append(dict(r, server=cfg["name"]))
            out = argv[argv.index("--out-dir") + 1]
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "web.json"), "w") as f:
                json.dump(runs, f)
            return 0

        real = tune.wb.main
        tune.wb.main = fake_main
        try:
            with tempfile.TemporaryDirectory() as out:
                rc = tune.main(["--server", "watpipe", "--conns", "10000,20000", "--workers", "5",
                                "--out-dir", out, "--rates", "100,200"])
                self.assertEqual(rc, 0)
                self.assertEqual([c["name"] for c in seen["servers"]], ["watpipe-10K-5w", "watpipe-20K-5w"])
                self.assertIn("--rates", seen["argv"])
                self.assertEqual(seen["argv"][seen["argv"].index("--servers") + 1], "watpipe-10K-5w,watpipe-20K-5w")
                try:
                    import matplotlib  # noqa: F401
                except ImportError:
                    return
                self.assertTrue(os.path.getsize(os.path.join(out, "tune.png")) > 1000)
        finally:
            tune.wb.main = real


if __name__ == "__main__":
    unittest.main()
