#!/usr/bin/env python3
"""bench/web/sessions.py follows the EuroSys'07 study's session model and
httperf accepts what it writes.

  * Lengths: 30 % of sessions 1 request, 70 % uniform over 5..15 (a
    chi-square test over 20,000 sessions, and binomial bounds on a written
    file of 1,000), nothing else.
  * Think times: Weibull browser think times of mean 0.343 s and Pareto user
    think times of mean 3.0 s (means and medians on 400,000 draws), and
    think_scale multiplies them.
  * The file: parsed back the way httperf parses it, it holds exactly the
    sessions, paths and think times the stats report; the same seed gives
    the same bytes.
  * httperf 0.9 (skipped when it is not installed) runs 5 sessions of a file
    against a local HTTP/1.1 server with 0 errors, one connection per
    session and the file's session lengths; and it ignores the user think
    time after a session's last request (the module's documented limit).

Every random draw uses a fixed seed, so the outcome is the same every run.
Runs in a few seconds: `python3 bench/web/sessions_test.py`.
"""
import functools
import http.server
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sessions  # noqa: E402

PATHS = [("/dir00000/class0_0", 102), ("dir00000/class1_1", 2048), ("/dir00001/class2_3", 40960)]
SEED = 20070321


def fake_sampler(rng):
    """The access model's interface over three paths (one without its leading /)."""
    return PATHS[rng.randrange(len(PATHS))]


def url(path):
    return path if path.startswith("/") else "/" + path


class Lengths(unittest.TestCase):
    def test_chi_square_over_20000_sessions(self):
        got = [len(s) for s in sessions.make_sessions(20000, fake_sampler, SEED)]
        counts = {n: got.count(n) for n in set(got)}
        self.assertEqual(set(counts) - ({1} | set(range(5, 16))), set(), "lengths outside 1 and 5..15")
        expected = {1: 0.30 * len(got), **{n: 0.70 / 11 * len(got) for n in range(5, 16)}}
        chi2 = sum((counts.get(n, 0) - e) ** 2 / e for n, e in expected.items())
        # 12 categories, 11 degrees of freedom: P(chi2 > 31.26) = 0.001.
        self.assertLess(chi2, 31.26, f"chi-square {chi2:.1f}; counts {sorted(counts.items())}")
        self.assertAlmostEqual(statistics.mean(got), 7.3, delta=0.1)

    def test_written_file_binomial_bounds(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.log")
            stats = sessions.write_sessions(path, 1000, fake_sampler, SEED)
            with open(path) as f:
                parsed = sessions.parse_sessions(f.read())
        singles = sum(1 for s in parsed if len(s) == 1)
        sd = math.sqrt(1000 * 0.3 * 0.7)
        self.assertLessEqual(abs(singles - 300), 4 * sd, f"{singles} single-request sessions of 1000")
        multi = [len(s) for s in parsed if len(s) > 1]
        self.assertTrue(all(5 <= n <= 15 for n in multi))
        self.assertLessEqual(abs(statistics.mean(multi) - 10.0), 4 * math.sqrt(10.0 / len(multi)))
        self.assertEqual(stats["single_request_sessions"], singles)


class ThinkTimes(unittest.TestCase):
    N = 400000

    def test_browser_think_is_weibull_with_the_study_mean(self):
        model, rng = sessions.ThinkModel(), random.Random(SEED)
        draws = [model.browser_think(rng) for _ in range(self.N)]
        self.assertAlmostEqual(model.browser_scale * math.gamma(1 + 1 / 0.382), 0.343, places=12)
        # Coefficient of variation ~3.7: the mean of 400,000 is within ~0.6 % (1 sd).
        self.assertAlmostEqual(statistics.mean(draws) / 0.343, 1.0, delta=0.03)
        median = model.browser_scale * math.log(2) ** (1 / 0.382)
        self.assertAlmostEqual(statistics.median(draws) / median, 1.0, delta=0.02)

    def test_user_think_is_pareto_with_the_study_mean(self):
        model, rng = sessions.ThinkModel(), random.Random(SEED)
        draws = [model.user_think(rng) for _ in range(self.N)]
        self.assertAlmostEqual(model.user_min, 1.0, places=12)
        self.assertGreaterEqual(min(draws), 1.0)
        # Shape 1.5: infinite variance, the mean converges slowly; 10 % is wide.
        self.assertAlmostEqual(statistics.mean(draws) / 3.0, 1.0, delta=0.10)
        self.assertAlmostEqual(statistics.median(draws) / 2 ** (1 / 1.5), 1.0, delta=0.02)

    def test_session_means_and_think_scale(self):
        full = sessions.make_sessions(20000, fake_sampler, SEED)
        scaled = sessions.make_sessions(20000, fake_sampler, SEED, think_scale=0.01)
        stats = sessions.session_stats(full)
        self.assertAlmostEqual(stats["mean_browser_think_s"] / 0.343, 1.0, delta=0.05)
        self.assertAlmostEqual(stats["mean_user_think_s"] / 3.0, 1.0, delta=0.25)
        self.assertEqual(stats["mean_think_s"], stats["mean_browser_think_s"])
        for a, b in zip(full, scaled):
            self.assertEqual([p for p, _, _ in a], [p for p, _, _ in b])
            for (_, ta, _), (_, tb, _) in zip(a, b):
                self.assertLessEqual(abs(ta * 0.01 - tb), 1e-6)


class FileFormat(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.path = os.path.join(self.tmp, "s.log")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_parses_back_to_what_was_drawn(self):
        stats = sessions.write_sessions(self.path, 1000, fake_sampler, SEED)
        drawn = sessions.make_sessions(1000, fake_sampler, SEED)
        with open(self.path) as f:
            text = f.read()
        body = [ln for ln in text.split("\n") if not ln.startswith("#")]
        self.assertTrue(text.startswith("# "))
        # Request lines: `/path think=S.SSSSSS`, flush left (no bursts); single blank separators.
        for ln in body:
            self.assertTrue(ln == "" or re.fullmatch(r"/\S+ think=\d+\.\d{6}", ln), repr(ln))
        self.assertNotIn("\n\n\n", text)
        parsed = sessions.parse_sessions(text)
        self.assertEqual(len(parsed), 1000)
        self.assertEqual(stats["sessions"], 1000)
        self.assertEqual(stats["requests"], sum(len(s) for s in parsed))
        self.assertAlmostEqual(stats["requests_per_session"], stats["requests"] / 1000)
        for got, want in zip(parsed, drawn):
            self.assertEqual([(p, t) for p, t, _ in got], [(p, t) for p, t, _ in want])
            self.assertFalse(any(burst for _, _, burst in got))
        self.assertEqual({p for s in parsed for p, _, _ in s}, {url(p) for p, _ in PATHS})
        self.assertEqual(stats["distinct_paths"], 3)
        browser = [t for s in parsed for _, t, _ in s[:-1]]
        user = [s[-1][1] for s in parsed]
        self.assertAlmostEqual(stats["mean_browser_think_s"], statistics.mean(browser), places=9)
        self.assertAlmostEqual(stats["mean_user_think_s"], statistics.mean(user), places=9)
        self.assertAlmostEqual(stats["mean_session_think_s"], sum(browser) / 1000, places=9)
        sizes = dict((url(p), z) for p, z in PATHS)
        want_size = statistics.mean(sizes[p] for s in parsed for p, _, _ in s)
        self.assertAlmostEqual(stats["mean_size_bytes"], want_size, places=6)

    def test_same_seed_same_bytes(self):
        other = os.path.join(self.tmp, "t.log")
        sessions.write_sessions(self.path, 300, fake_sampler, SEED)
        sessions.write_sessions(other, 300, fake_sampler, SEED)
        with open(self.path, "rb") as a, open(other, "rb") as b:
            self.assertEqual(a.read(), b.read())
        sessions.write_sessions(other, 300, fake_sampler, SEED + 1)
        with open(self.path, "rb") as a, open(other, "rb") as b:
            self.assertNotEqual(a.read(), b.read())

    def test_shapes_do_not_depend_on_the_sampler(self):
        a = sessions.make_sessions(200, fake_sampler, SEED)
        b = sessions.make_sessions(200, lambda rng: "/x%d" % rng.randrange(10 ** 6), SEED)
        self.assertEqual([[t for _, t, _ in s] for s in a], [[t for _, t, _ in s] for s in b])

    def test_limits_and_bad_paths(self):
        with self.assertRaises(ValueError):
            sessions.write_sessions(self.path, 1001, fake_sampler, SEED)  # httperf's 1,000 sessions
        with self.assertRaises(ValueError):
            sessions.write_sessions(self.path, 0, fake_sampler, SEED)
        with self.assertRaises(ValueError):
            sessions.write_sessions(self.path, 5, lambda rng: ("/a b", 1), SEED)
        self.assertEqual(sessions.make_sessions(1, lambda rng: "x", 1, url_prefix="/pre/")[0][0][0], "/pre/x")


class Cli(unittest.TestCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "sessions.py"), *args],
                              capture_output=True, text=True, timeout=60)

    def test_help(self):
        r = self.run_cli("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in ("--out", "--sessions", "--seed", "--fileset", "--think-scale"):
            self.assertIn(flag, r.stdout)

    @unittest.skipUnless(os.path.exists(os.path.join(HERE, "fileset.py")), "bench/web/fileset.py is not there yet")
    def test_fileset_paths_are_checked(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "set")
            os.makedirs(os.path.join(root, "dir00000"))
            with open(os.path.join(root, "fileset.json"), "w") as f:
                json.dump({"dirs": 1}, f)
            out = os.path.join(tmp, "s.log")
            r = self.run_cli("--out", out, "--sessions", "50", "--seed", "3", "--fileset", root)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("not files", r.stderr)
            self.assertFalse(os.path.exists(out))
            for c in range(4):
                for i in range(9):
                    open(os.path.join(root, "dir00000", f"class{c}_{i}"), "w").close()
            r = self.run_cli("--out", out, "--sessions", "50", "--seed", "3", "--fileset", root)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                parsed = sessions.parse_sessions(f.read())
            self.assertEqual(len(parsed), 50)
            self.assertTrue(all(re.fullmatch(r"/dir00000/class[0-3]_[0-8]", p) for s in parsed for p, _, _ in s))


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the servers under test

    def log_message(self, *args):
        pass


HTTPERF = shutil.which("httperf")


@unittest.skipUnless(HTTPERF, "httperf is not installed (apt-get install httperf)")
class Httperf(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        docroot = os.path.join(self.tmp, "www")
        for path, size in PATHS:
            full = os.path.join(docroot, path.lstrip("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(b"x" * size)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(Handler, directory=docroot))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.tmp)

    def httperf(self, session_file, n):
        cmd = [HTTPERF, "--server", "127.0.0.1", "--port", str(self.server.server_address[1]),
               f"--wsesslog={n},0,{session_file}", "--rate", "50", "--timeout", "5"]
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)}:\n{r.stdout}\n{r.stderr}")
        return r.stdout, elapsed

    def field(self, out, pattern):
        m = re.search(pattern, out, re.M)
        self.assertIsNotNone(m, f"no {pattern!r} in httperf's output:\n{out}")
        return m

    def test_httperf_runs_the_sessions_without_errors(self):
        path = os.path.join(self.tmp, "s.log")
        sessions.write_sessions(path, 20, fake_sampler, SEED, think_scale=0.01)
        with open(path) as f:
            lengths = [len(s) for s in sessions.parse_sessions(f.read())][:5]
        out, _ = self.httperf(path, 5)
        rate = self.field(out, r"^Session rate \[sess/s\]: .*\((\d+)/(\d+)\)$")
        self.assertEqual((int(rate.group(1)), int(rate.group(2))), (5, 5), out)
        self.assertEqual(int(self.field(out, r"^Errors: total (\d+)").group(1)), 0, out)
        status = self.field(out, r"^Reply status: 1xx=(\d+) 2xx=(\d+) 3xx=(\d+) 4xx=(\d+) 5xx=(\d+)")
        self.assertEqual([int(x) for x in status.groups()], [0, sum(lengths), 0, 0, 0], out)
        total = self.field(out, r"^Total: connections (\d+) requests (\d+) replies (\d+)")
        self.assertEqual([int(x) for x in total.groups()], [5, sum(lengths), sum(lengths)], out)
        self.assertEqual(self.field(out, r"^Session: avg ([\d.]+) connections/session").group(1), "1.00", out)
        hist = [int(x) for x in self.field(out, r"^Session length histogram:((?: \d+)+)").group(1).split()]
        self.assertEqual({n: c for n, c in enumerate(hist) if c}, {n: lengths.count(n) for n in set(lengths)}, out)

    def test_httperf_ignores_the_think_time_after_a_last_request(self):
        # Browser think times ~3 ms, user think times >= 20 s (Pareto, mean 60 s).
        path = os.path.join(self.tmp, "u.log")
        model = sessions.ThinkModel(browser_mean=0.003, user_mean=60.0)
        sessions.write_sessions(path, 5, fake_sampler, SEED, model=model)
        with open(path) as f:
            self.assertTrue(all(s[-1][1] >= 20.0 for s in sessions.parse_sessions(f.read())))
        out, elapsed = self.httperf(path, 5)
        self.assertEqual(self.field(out, r"\((\d+)/5\)$").group(1), "5", out)
        self.assertLess(elapsed, 10.0, f"httperf waited after the last request:\n{out}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
